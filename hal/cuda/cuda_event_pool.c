// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Reference-counted CUevents recycled through a free list (see the header).
#include "hal/cuda/cuda_event_pool.h"

#include <stdlib.h>

#include "common/log.h"
#include "common/mutex.h"
#include "common/status.h"

void halo_hal_cuda_event_pool_initialize(halo_hal_cuda_event_pool_t *pool,
                                         const halo_hal_cuda_symbols_t *cu,
                                         unsigned flags) {
  pool->cu = cu;
  pool->flags = flags | CU_EVENT_DISABLE_TIMING;
  halo_mutex_initialize(&pool->mutex);
  pool->free_list = NULL;
  pool->free_count = 0;
  pool->total = 0;
}

void halo_hal_cuda_event_pool_deinitialize(halo_hal_cuda_event_pool_t *pool) {
  pthread_mutex_lock(&pool->mutex);
  halo_hal_cuda_event_t *event = pool->free_list;
  pool->free_list = NULL;
  if (pool->free_count != pool->total) {
    HALO_LOG_WARN("CUDA event pool: %u of %u events still in use at teardown",
                  pool->total - pool->free_count, pool->total);
  }
  pool->free_count = 0;
  pthread_mutex_unlock(&pool->mutex);
  while (event) {
    halo_hal_cuda_event_t *next = event->next;
    pool->cu->cuEventDestroy(event->handle);
    free(event);
    event = next;
  }
  pthread_mutex_destroy(&pool->mutex);
}

halo_status_t halo_hal_cuda_event_pool_acquire(
    halo_hal_cuda_event_pool_t *pool, halo_hal_cuda_event_t **out_event) {
  *out_event = NULL;
  pthread_mutex_lock(&pool->mutex);
  halo_hal_cuda_event_t *event = pool->free_list;
  if (event) {
    pool->free_list = event->next;
    --pool->free_count;
  }
  pthread_mutex_unlock(&pool->mutex);
  if (!event) {
    event = calloc(1, sizeof(*event));
    if (!event) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "oom for a CUDA event");
    }
    CUresult result = pool->cu->cuEventCreate(&event->handle, pool->flags);
    if (result != CUDA_SUCCESS) {
      free(event);
      return halo_hal_cuda_result_to_status(pool->cu, result, "cuEventCreate");
    }
    event->pool = pool;
    pthread_mutex_lock(&pool->mutex);
    ++pool->total;
    pthread_mutex_unlock(&pool->mutex);
  }
  event->next = NULL;
  atomic_store_explicit(&event->references, 1, memory_order_relaxed);
  *out_event = event;
  return NULL;
}

bool halo_hal_cuda_event_blocks(const halo_hal_cuda_event_t *event) {
  return (event->pool->flags & CU_EVENT_BLOCKING_SYNC) != 0;
}

void halo_hal_cuda_event_retain(halo_hal_cuda_event_t *event) {
  atomic_fetch_add_explicit(&event->references, 1, memory_order_relaxed);
}

void halo_hal_cuda_event_release(halo_hal_cuda_event_t *event) {
  if (atomic_fetch_sub_explicit(&event->references, 1, memory_order_acq_rel) !=
      1) {
    return;
  }
  halo_hal_cuda_event_pool_t *pool = event->pool;
  pthread_mutex_lock(&pool->mutex);
  event->next = pool->free_list;
  pool->free_list = event;
  ++pool->free_count;
  pthread_mutex_unlock(&pool->mutex);
}
