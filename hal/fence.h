// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Device fences: GPU-to-GPU waits without the host (docs/architecture.md "CUDA
// driver": GPU-to-GPU waits use events, one event serving many waits).
//
// A fence stands for the device work of one execution (its commands and
// its signals' device stores). A queue whose driver has fences hands one
// out from execute (halo_hal_execution_t.out_fence); the deferred queue
// records it on every semaphore the execution signals ("value v is reached
// when this fence fires", hal/semaphore.h) and can then release an action
// whose remaining waits are all covered by fences of its own queue's
// |fence_domain|, passing the fences with the execution: the driver orders
// the work after them on the device (CUDA: cuStreamWaitEvent on the
// producer's event) instead of waiting for the producer's completion to
// come back through the host.
//
// Only device-issued work ever gets a fence, never a value a client will
// signal from the host: the GPU never waits on something outside the
// device, so nothing already on the GPU can form a cycle.
//
// Failure: if the producer fails before its work reached the device, the
// driver fails every execution waiting on its fence (naming the producer's
// error). If the producer fails later (the host sees its semaphore fail
// after the consumer was released), the consumer may have run on the
// device already; the deferred queue then fails the consumer's signals as
// well (hal/deferred_queue.h).
//
// Thread-safety: reference counting is thread-safe; a release makes no
// driver call (legal on any thread, host functions included). A fence must
// not outlive its device's queues (the deferred queue drops it when the
// semaphore reaches the value, before the producer's queue can go).
#ifndef HALO_HAL_FENCE_H_
#define HALO_HAL_FENCE_H_

#include <stdatomic.h>

typedef struct halo_hal_fence_t halo_hal_fence_t;

typedef struct halo_hal_fence_vtable_t {
  // The last reference went (any thread).
  void (*destroy)(halo_hal_fence_t *fence);
} halo_hal_fence_vtable_t;

struct halo_hal_fence_t {
  const halo_hal_fence_vtable_t *vtable;
  atomic_uint references;
  // Queues with the same fence_domain (halo_hal_queue_t) can wait for it
  // (CUDA: the device, whose streams share one context).
  const void *domain;
};

static inline void halo_hal_fence_retain(halo_hal_fence_t *fence) {
  atomic_fetch_add_explicit(&fence->references, 1, memory_order_relaxed);
}

static inline void halo_hal_fence_release(halo_hal_fence_t *fence) {
  if (fence && atomic_fetch_sub_explicit(&fence->references, 1,
                                         memory_order_acq_rel) == 1) {
    fence->vtable->destroy(fence);
  }
}

#endif  // HALO_HAL_FENCE_H_
