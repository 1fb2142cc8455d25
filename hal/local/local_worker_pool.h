// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The local driver's worker pool: one per local device, shared by all of its
// queues. Tasks run in priority order (higher first; FIFO within a
// priority). The priority is strict: a steady stream of higher-priority work
// delays lower-priority work indefinitely, as with CUDA stream priorities.
//
// Thread-safety: submit is thread-safe (the loop thread submits executions,
// workers submit the helpers of parallel dispatches); create and destroy
// are not.
#ifndef HALO_HAL_LOCAL_LOCAL_WORKER_POOL_H_
#define HALO_HAL_LOCAL_LOCAL_WORKER_POOL_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

typedef struct halo_hal_local_worker_pool_t halo_hal_local_worker_pool_t;
typedef struct halo_hal_local_task_t halo_hal_local_task_t;

// One thread of the pool, passed to every task it runs.
typedef struct halo_hal_local_worker_t {
  halo_hal_local_worker_pool_t *pool;
  pthread_t thread;
  uint32_t index;
  // Scratch for a dispatch's shared memory (one workgroup at a time runs on
  // a worker), grown on demand, freed with the pool.
  void *scratch;
  size_t scratch_size;
} halo_hal_local_worker_t;

// Runs |task| on |worker|. The task may free itself: the pool does not
// touch it after the call begins.
typedef void (*halo_hal_local_task_fn)(halo_hal_local_task_t *task,
                                       halo_hal_local_worker_t *worker);

struct halo_hal_local_task_t {
  halo_hal_local_task_fn run;
  int32_t priority;
  // Set by the pool: FIFO order within a priority.
  uint64_t sequence;
};

// Starts |thread_count| threads (at least 1). A worker without a task spins
// |spin_ns| (0: none) before it sleeps, trading idle CPU for latency.
halo_status_t halo_hal_local_worker_pool_create(
    uint32_t thread_count, int64_t spin_ns,
    halo_hal_local_worker_pool_t **out_pool);

// Runs every task still queued, then joins the threads and frees the pool.
// No task may be submitted concurrently or afterwards.
void halo_hal_local_worker_pool_destroy(halo_hal_local_worker_pool_t *pool);

uint32_t halo_hal_local_worker_pool_thread_count(
    const halo_hal_local_worker_pool_t *pool);

// Queues |task| (its |run| and |priority| set; not owned by the pool).
// RESOURCE_EXHAUSTED if the queue cannot grow.
halo_status_t halo_hal_local_worker_pool_submit(
    halo_hal_local_worker_pool_t *pool, halo_hal_local_task_t *task);

// Returns |worker|'s scratch with at least |size| bytes (64-byte aligned),
// or NULL if it cannot grow.
void *halo_hal_local_worker_scratch(halo_hal_local_worker_t *worker,
                                    size_t size);

#endif  // HALO_HAL_LOCAL_LOCAL_WORKER_POOL_H_
