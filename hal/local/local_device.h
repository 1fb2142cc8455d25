// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The local (CPU) driver: the embedded default without a GPU, and what CI
// exercises. Executables are ELF shared objects loaded from a memfd copy;
// queues run released executions on a worker thread pool shared by the
// device's queues (hal/local/local_worker_pool.h).
//
// Execution semantics (hal/local/local_command_buffer.c):
// - An execution runs its commands in order on one worker, so barriers are
//   satisfied by construction. Executions of one queue or of different
//   queues run concurrently (queues are unordered).
// - A dispatch's workgroups are spread over the pool: the executing worker
//   runs workgroups itself and queues helpers that join while there is work
//   left; the next command starts once every workgroup has returned.
// - dispatch_indirect reads three uint32 counts when it runs; a zero count
//   runs no workgroup; a count above HALO_HAL_LOCAL_MAX_INDIRECT_COUNT fails
//   the execution with OUT_OF_RANGE.
// - Queue priority is honored: the pool runs higher-priority work first
//   (strictly), FIFO within a priority.
// - Lifetimes: destroying a queue waits for its executions (their
//   completions have returned), so a completion must not destroy its own
//   queue; every queue must be destroyed before the device, whose destroy
//   joins the pool. Each executable holds one descriptor (its memfd) while
//   it is loaded (hal/local/local_executable.c says why).
#ifndef HALO_HAL_LOCAL_LOCAL_DEVICE_H_
#define HALO_HAL_LOCAL_LOCAL_DEVICE_H_

#include "hal/device.h"
#include "hal/local/local_worker_pool.h"
#include "halo/local_kernel.h"

// The largest workgroup count per dimension an indirect dispatch may read
// (CUDA's limit for grid y and z; a CPU would take hours past it).
#define HALO_HAL_LOCAL_MAX_INDIRECT_COUNT 65535u

// How long an idle worker spins for the next task before it sleeps: at most
// this much CPU per idle transition, for a round trip without a thread
// wake-up when executions follow each other closely.
#define HALO_HAL_LOCAL_WORKER_SPIN_NS 20000

typedef void (*halo_hal_local_entry_fn)(const halo_dispatch_state_t *state);

void halo_hal_local_allocator_initialize(halo_hal_allocator_t *allocator);

// local_executable.c
halo_status_t halo_hal_local_executable_create(
    const halo_hal_executable_params_t *params,
    halo_hal_executable_t **out_executable);
// The function of entry |ordinal| (from lookup_entry); INVALID_ARGUMENT if
// |executable| is not a local one or the ordinal was never handed out.
halo_status_t halo_hal_local_executable_entry(
    halo_hal_executable_t *executable, uint32_t ordinal,
    halo_hal_local_entry_fn *out_function);

// local_command_buffer.c
halo_status_t halo_hal_local_command_buffer_prepare(
    halo_hal_recording_t *recording,
    halo_hal_command_buffer_t **out_command_buffer);
// True if |command_buffer| was prepared by the local driver.
bool halo_hal_local_command_buffer_isa(
    const halo_hal_command_buffer_t *command_buffer);
// Runs |execution|'s commands in order on |worker| (helpers of parallel
// dispatches at |priority|). NULL, or an error naming the command index.
halo_status_t halo_hal_local_command_buffer_run(
    const halo_hal_execution_t *execution, int32_t priority,
    halo_hal_local_worker_t *worker);

// local_queue.c
halo_status_t halo_hal_local_queue_create(halo_hal_local_worker_pool_t *pool,
                                          int32_t priority,
                                          halo_hal_queue_t **out_queue);

#endif  // HALO_HAL_LOCAL_LOCAL_DEVICE_H_
