// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A pool of reference-counted CUevents (CU_EVENT_DISABLE_TIMING, and the
// pool's further flags) shared by a device's queues. One recorded event serves
// many users at once: the completion path of the execution that recorded it
// (and the completion thread's sleeper), every later GPU signal of the same
// semaphore that must be ordered after it, and the execution's fence, through
// which every consumer released on it waits on the device (one event, many
// waits: seeds/iree-cuda-hal-semaphores.md). The last release returns the event
// to the pool, never to the driver, so a release is legal on any thread,
// cuLaunchHostFunc callbacks included (they may not call CUDA).
//
// Thread-safety: thread-safe. acquire may call cuEventCreate (a thread with
// the device's context current); deinitialize calls cuEventDestroy.
#ifndef HALO_HAL_CUDA_CUDA_EVENT_POOL_H_
#define HALO_HAL_CUDA_CUDA_EVENT_POOL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hal/cuda/cuda_symbols.h"

typedef struct halo_hal_cuda_event_pool_t halo_hal_cuda_event_pool_t;

typedef struct halo_hal_cuda_event_t {
  CUevent handle;
  atomic_uint references;
  halo_hal_cuda_event_pool_t *pool;
  struct halo_hal_cuda_event_t *next;  // in the pool's free list
} halo_hal_cuda_event_t;

struct halo_hal_cuda_event_pool_t {
  const halo_hal_cuda_symbols_t *cu;
  unsigned flags;  // cuEventCreate's, CU_EVENT_DISABLE_TIMING included
  pthread_mutex_t mutex;
  halo_hal_cuda_event_t *free_list;
  uint32_t free_count;
  uint32_t total;  // events created and not destroyed
};

// |flags|: more cuEventCreate flags (CU_EVENT_BLOCKING_SYNC or 0).
void halo_hal_cuda_event_pool_initialize(halo_hal_cuda_event_pool_t *pool,
                                         const halo_hal_cuda_symbols_t *cu,
                                         unsigned flags);
// Destroys the pooled events; every event must have been released.
void halo_hal_cuda_event_pool_deinitialize(halo_hal_cuda_event_pool_t *pool);

// An unrecorded-or-reused event with one reference (context current).
halo_status_t halo_hal_cuda_event_pool_acquire(
    halo_hal_cuda_event_pool_t *pool, halo_hal_cuda_event_t **out_event);

// Whether cuEventSynchronize on |event| sleeps (CU_EVENT_BLOCKING_SYNC)
// rather than spins.
bool halo_hal_cuda_event_blocks(const halo_hal_cuda_event_t *event);

void halo_hal_cuda_event_retain(halo_hal_cuda_event_t *event);
// Any thread; no driver call.
void halo_hal_cuda_event_release(halo_hal_cuda_event_t *event);

#endif  // HALO_HAL_CUDA_CUDA_EVENT_POOL_H_
