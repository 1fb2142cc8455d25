// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Queues: where released work runs (local: a worker thread pool; CUDA: a
// stream or a small pool of them). Queues are unordered: the deferred queue
// (hal/deferred_queue.h) releases an execution only when its waits are met,
// so a queue runs whatever it is given as soon as it can.
//
// GPU-to-GPU waits: a queue with a |fence_domain| hands out a fence of each
// execution's device work and takes fences to wait for on the device
// (hal/fence.h); the deferred queue decides which waits they cover.
//
// Thread-safety: execute is called on the loop thread; the completion
// callback runs on a driver thread (CUDA: its completion path, or the
// submission thread that finished a short execution itself), or within
// execute on the loop thread (a driver may finish a short execution there:
// CUDA on an idle device). A callback must not block, and must not wait
// for the driver's threads (e.g. destroy the queue or flush a thread).
#ifndef HALO_HAL_QUEUE_H_
#define HALO_HAL_QUEUE_H_

#include <stdint.h>

#include "common/timeline.h"
#include "hal/command_buffer.h"
#include "hal/fence.h"
#include "halo/status.h"

typedef struct halo_hal_queue_t halo_hal_queue_t;

// Called exactly once per execution, from any thread, with the outcome
// (ownership of |status| passes to the callee).
typedef void (*halo_hal_completion_fn)(void *user_data, halo_status_t status);

// A signal the device itself stores when the work is done, before the
// host completion path signals the semaphore (which it still does: it fires
// halod's timepoints; halod's deferred queue also bumps the epoch again,
// while a device worker's ring report does not, the worker having woken
// the sleepers: halo_hal_semaphore_signal_woken). CUDA: cuStreamWriteValue64 of
// |value| into the semaphore's slot, registered with the device, so that a
// waiter spinning on the slot sees it without a host hop. Drivers without
// device stores (local) ignore it. The store is an early sight, not the
// signal: a store that would land below a higher value stored or issued
// before at the same address is left out (the host path's signal then
// covers it), so the values signalled at one address only go up; one
// used again for a new semaphore needs its |slot|, whose generation tells
// the two apart.
//
// |slot|, the host's view of the same slot (NULL: none), lets a completion
// path wake the slot's futex sleepers as soon as the device's store has
// landed (an epoch bump and a wake, no value written: the device wrote
// it), ahead of the host path's signal, which follows on the loop thread
// (for a worker's ring execution, the only wake).
typedef struct halo_hal_execution_signal_t {
  // The device address of the slot's 64-bit value on the queue's device;
  // 0: the host path only.
  uint64_t device_address;
  uint64_t value;
  halo_timeline_slot_t *slot;
} halo_hal_execution_signal_t;

typedef struct halo_hal_execution_t {
  halo_hal_command_buffer_t *command_buffer;
  // binding_capacity entries, valid until completion.
  const halo_hal_binding_t *bindings;
  uint32_t binding_count;
  halo_hal_completion_fn completion;
  void *user_data;
  // The execution's signals, valid until completion (may be NULL).
  const halo_hal_execution_signal_t *signals;
  uint32_t signal_count;
  // Fences of the queue's fence_domain the work waits for on the device
  // before it starts; read during execute (the driver retains what it
  // keeps). Only for queues with a fence_domain.
  halo_hal_fence_t *const *wait_fences;
  uint32_t wait_fence_count;
  // When not NULL: execute stores a fence of this execution's device work
  // (a reference the caller owns) or NULL when the queue has none. Set
  // before the execution can complete, so the fence is valid even if the
  // work already finished.
  halo_hal_fence_t **out_fence;
} halo_hal_execution_t;

typedef struct halo_hal_queue_vtable_t {
  void (*destroy)(halo_hal_queue_t *queue);
  // Starts |execution| (copied). An error return means the execution did
  // not start and completion will not be called (and *out_fence is NULL).
  halo_status_t (*execute)(halo_hal_queue_t *queue,
                           const halo_hal_execution_t *execution);
} halo_hal_queue_vtable_t;

struct halo_hal_queue_t {
  const halo_hal_queue_vtable_t *vtable;
  // Fences of this domain can be waited on by the queue's device work
  // (hal/fence.h); NULL: the queue has no device fences (waits go through
  // the host).
  const void *fence_domain;
};

static inline void halo_hal_queue_destroy(halo_hal_queue_t *queue) {
  queue->vtable->destroy(queue);
}

static inline halo_status_t halo_hal_queue_execute(
    halo_hal_queue_t *queue, const halo_hal_execution_t *execution) {
  return queue->vtable->execute(queue, execution);
}

#endif  // HALO_HAL_QUEUE_H_
