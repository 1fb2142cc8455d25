// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A device's pool of CUDA streams, shared by its queues (cuda_queue.c): a
// stream costs GPU memory (about 0.5 MiB on an H100), so queues do not
// each create their own. Per priority level the pool holds |stream_count|
// CU_STREAM_NON_BLOCKING streams (config key cuda-streams): the least
// priority's (the default level) are created when the device is opened,
// any other level's all at once when a queue of that level first needs a
// stream. A queue takes the stream of its level with the fewest queues on
// it and keeps it until it is destroyed, so two queues share a stream only
// when the level has more queues than streams; a queue on a shared stream
// can wait behind the other queues' work there (head-of-line). Under
// HOST_FUNC completion each stream has a callback stream beside it, shared
// the same way. Streams are destroyed with the device, not with a queue.
//
// Threads: the submission thread only, and the device's destroy once that
// thread has stopped; except |blocked_round| and |poll_round|, which only
// the device's completion thread touches.
#ifndef HALO_HAL_CUDA_CUDA_STREAM_POOL_H_
#define HALO_HAL_CUDA_CUDA_STREAM_POOL_H_

#include <stdbool.h>
#include <stdint.h>

#include "hal/cuda/cuda_symbols.h"
#include "halo/status.h"

// cuda-streams' default: streams per priority level.
#define HALO_HAL_CUDA_DEFAULT_STREAMS 16

typedef struct halo_hal_cuda_stream_t {
  CUstream stream;
  CUstream callback_stream;  // HOST_FUNC completion; NULL otherwise
  uint32_t queue_count;      // queues that took this stream
  // The completion thread's: the poll round in which the stream's oldest
  // pending execution was found unfinished (a stream completes in order,
  // whichever queues share it).
  uint64_t blocked_round;
} halo_hal_cuda_stream_t;

typedef struct halo_hal_cuda_stream_pool_t {
  const halo_hal_cuda_symbols_t *cu;
  uint32_t stream_count;  // per level
  bool callback_streams;
  int priority_least;    // level 0
  uint32_t level_count;  // least - greatest + 1
  // levels[least - priority]: |stream_count| streams, NULL until a queue
  // of that priority needs one (level 0 from initialize on).
  halo_hal_cuda_stream_t **levels;
  // The completion thread's: its last poll round. A later completion
  // thread of the device goes on from it, so that no stream's
  // |blocked_round| matches one of its rounds by accident.
  uint64_t poll_round;
} halo_hal_cuda_stream_pool_t;

// Creates the least priority's |stream_count| streams (and as many
// callback streams with |callback_streams|) for the priority range
// [greatest, least] (cuCtxGetStreamPriorityRange). On failure nothing is
// left to release; the status names the stream that failed.
halo_status_t halo_hal_cuda_stream_pool_initialize(
    const halo_hal_cuda_symbols_t *cu, uint32_t stream_count,
    bool callback_streams, int priority_least, int priority_greatest,
    halo_hal_cuda_stream_pool_t *out_pool);

// Destroys every stream (each finishes its enqueued work first, as
// cuStreamDestroy does). Every queue released its stream before.
void halo_hal_cuda_stream_pool_deinitialize(halo_hal_cuda_stream_pool_t *pool);

// The stream of CUDA priority |priority| (within the range) with the
// fewest queues on it, taken by one more queue; creates the level's
// streams first if it has none yet.
halo_status_t halo_hal_cuda_stream_pool_acquire(
    halo_hal_cuda_stream_pool_t *pool, int priority,
    halo_hal_cuda_stream_t **out_stream);

// A queue that took |stream| (from acquire) is gone; its executions
// completed.
void halo_hal_cuda_stream_pool_release(halo_hal_cuda_stream_t *stream);

#endif  // HALO_HAL_CUDA_CUDA_STREAM_POOL_H_
