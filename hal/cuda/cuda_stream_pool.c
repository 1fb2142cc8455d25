// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The device's pool of streams shared by its queues (see the header).
// Every function runs on the submission thread (deinitialize also on the
// device's destroy, after that thread stopped).
#include "hal/cuda/cuda_stream_pool.h"

#include <stdlib.h>
#include <string.h>

#include "common/status.h"

static void halo_hal_cuda_stream_pool_destroy_level(
    halo_hal_cuda_stream_pool_t *pool, halo_hal_cuda_stream_t *streams) {
  for (uint32_t i = 0; i < pool->stream_count; ++i) {
    if (streams[i].stream) pool->cu->cuStreamDestroy(streams[i].stream);
    if (streams[i].callback_stream) {
      pool->cu->cuStreamDestroy(streams[i].callback_stream);
    }
  }
  free(streams);
}

// Creates every stream of level |level|; on failure none is left.
static halo_status_t halo_hal_cuda_stream_pool_create_level(
    halo_hal_cuda_stream_pool_t *pool, uint32_t level) {
  int priority = pool->priority_least - (int)level;
  halo_hal_cuda_stream_t *streams =
      calloc(pool->stream_count, sizeof(*streams));
  if (!streams) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "oom for %u streams of priority %d",
                            pool->stream_count, priority);
  }
  const halo_hal_cuda_symbols_t *cu = pool->cu;
  for (uint32_t i = 0; i < pool->stream_count; ++i) {
    CUresult result = cu->cuStreamCreateWithPriority(
        &streams[i].stream, CU_STREAM_NON_BLOCKING, priority);
    if (result == CUDA_SUCCESS && pool->callback_streams) {
      result = cu->cuStreamCreateWithPriority(&streams[i].callback_stream,
                                              CU_STREAM_NON_BLOCKING, priority);
    }
    if (result != CUDA_SUCCESS) {
      halo_hal_cuda_stream_pool_destroy_level(pool, streams);
      return halo_status_annotate(
          halo_hal_cuda_result_to_status(cu, result,
                                         "cuStreamCreateWithPriority"),
          "creating stream %u of the %u (cuda-streams) of priority %d", i,
          pool->stream_count, priority);
    }
  }
  pool->levels[level] = streams;
  return NULL;
}

halo_status_t halo_hal_cuda_stream_pool_initialize(
    const halo_hal_cuda_symbols_t *cu, uint32_t stream_count,
    bool callback_streams, int priority_least, int priority_greatest,
    halo_hal_cuda_stream_pool_t *out_pool) {
  memset(out_pool, 0, sizeof(*out_pool));
  if (stream_count == 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "a stream pool of 0 streams per priority "
                            "(cuda-streams must be at least 1)");
  }
  if (priority_greatest > priority_least) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "stream priority range %d..%d: the greatest "
                            "priority must not be above the least",
                            priority_least, priority_greatest);
  }
  halo_hal_cuda_stream_pool_t pool = {
      .cu = cu,
      .stream_count = stream_count,
      .callback_streams = callback_streams,
      .priority_least = priority_least,
      .level_count = (uint32_t)(priority_least - priority_greatest) + 1,
  };
  pool.levels = calloc(pool.level_count, sizeof(*pool.levels));
  if (!pool.levels) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "oom for a stream pool of %u priorities",
                            pool.level_count);
  }
  halo_status_t status = halo_hal_cuda_stream_pool_create_level(&pool, 0);
  if (status) {
    free(pool.levels);
    return status;
  }
  *out_pool = pool;
  return NULL;
}

void halo_hal_cuda_stream_pool_deinitialize(halo_hal_cuda_stream_pool_t *pool) {
  for (uint32_t level = 0; level < pool->level_count; ++level) {
    if (pool->levels[level]) {
      halo_hal_cuda_stream_pool_destroy_level(pool, pool->levels[level]);
    }
  }
  free(pool->levels);
  memset(pool, 0, sizeof(*pool));
}

halo_status_t halo_hal_cuda_stream_pool_acquire(
    halo_hal_cuda_stream_pool_t *pool, int priority,
    halo_hal_cuda_stream_t **out_stream) {
  *out_stream = NULL;
  if (!pool->levels) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "the device's stream pool was not created");
  }
  int level = pool->priority_least - priority;
  if (level < 0 || (uint32_t)level >= pool->level_count) {
    return halo_status_make(
        HALO_STATUS_INVALID_ARGUMENT,
        "stream priority %d is outside the device's range %d..%d", priority,
        pool->priority_least,
        pool->priority_least - (int)pool->level_count + 1);
  }
  if (!pool->levels[level]) {
    HALO_RETURN_IF_ERROR(
        halo_hal_cuda_stream_pool_create_level(pool, (uint32_t)level));
  }
  halo_hal_cuda_stream_t *streams = pool->levels[level];
  halo_hal_cuda_stream_t *fewest = &streams[0];
  for (uint32_t i = 1; i < pool->stream_count; ++i) {
    if (streams[i].queue_count < fewest->queue_count) fewest = &streams[i];
  }
  ++fewest->queue_count;
  *out_stream = fewest;
  return NULL;
}

void halo_hal_cuda_stream_pool_release(halo_hal_cuda_stream_t *stream) {
  --stream->queue_count;
}
