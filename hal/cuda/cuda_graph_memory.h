// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The device-wide bound on the graph instances' device memory
// (cuda_graph_memory.c, where each function is described in full), the
// part the command buffers use: halo's estimate of one instance, reserving
// an instance's bytes (trimming other recordings' idle instances, waiting
// for room), giving them back, and waking the executions that wait for
// room. The device's queries of the usage are declared in cuda_device.h.
//
// Thread-safety: as each function says; the accounting is under the
// device's graph_mutex.
#ifndef HALO_HAL_CUDA_CUDA_GRAPH_MEMORY_H_
#define HALO_HAL_CUDA_CUDA_GRAPH_MEMORY_H_

#include <stdbool.h>
#include <stdint.h>

#include "hal/cuda/cuda_command_buffer_internal.h"
#include "hal/cuda/cuda_device.h"

// Any thread, no driver call (the loop thread prepares a recording): halo's
// estimate of one graph instance of |command_buffer|, what the bound counts
// for it.
uint64_t halo_hal_cuda_instance_bytes(
    const halo_hal_cuda_command_buffer_t *command_buffer);

// What halo_hal_cuda_graph_reserve found.
typedef enum halo_hal_cuda_graph_room_e {
  HALO_HAL_CUDA_GRAPH_ROOM_RESERVED = 0,
  // No room now (or executions wait for room before it); the recording's
  // own instances, all in use, come back.
  HALO_HAL_CUDA_GRAPH_ROOM_WAIT = 1,
  // No room now (or executions wait for room before it), and the recording
  // has no instance; other recordings' instances in use come back: the
  // waiter is last on the device's waiters.
  HALO_HAL_CUDA_GRAPH_ROOM_WAIT_OTHERS = 2,
  // No room, and nothing in use to wait for (or it waited long enough).
  HALO_HAL_CUDA_GRAPH_ROOM_NONE = 3,
} halo_hal_cuda_graph_room_t;

// Submission thread, with the right to create an instance of
// |command_buffer| for |waiter|: reserves its bytes in the device's bound,
// trimming other recordings' idle instances, or says why not (while
// executions wait for room, it waits behind them: first come, first
// served).
halo_hal_cuda_graph_room_t halo_hal_cuda_graph_reserve(
    halo_hal_cuda_command_buffer_t *command_buffer,
    halo_hal_cuda_task_t *waiter, uint64_t *out_used, bool *out_waited);

// The device's graph_mutex held: |count| of |command_buffer|'s instances
// are gone (or were never built); their bytes go back.
void halo_hal_cuda_graph_release_locked(
    halo_hal_cuda_command_buffer_t *command_buffer, uint32_t count);

// Any thread, no driver call and no lock taken: posts the device's wake
// task where executions wait for room in the bound.
void halo_hal_cuda_graph_wake(halo_hal_cuda_device_t *device);

#endif  // HALO_HAL_CUDA_CUDA_GRAPH_MEMORY_H_
