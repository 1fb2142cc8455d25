// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Operations: what a client asks of its session once the transport is
// peeled off. The client socket's decoder (daemon/requests.c, protobuf over
// nng) and the submission ring's decoder (daemon/ring.c, fixed records in
// shared memory) both produce these plain structs, and everything below
// (validation, submissions, semaphores) consumes them; no generated
// protobuf type crosses this line. Spans point into the decoder's storage:
// they live for the call only.
//
// Loop thread only.
#ifndef HALOD_OPERATION_H_
#define HALOD_OPERATION_H_

#include <stdint.h>

#include "daemon/daemon.h"

typedef struct halod_buffer_t halod_buffer_t;

// A semaphore handle of the session and a timeline value.
typedef struct halod_op_value_t {
  uint64_t semaphore;
  uint64_t value;
} halod_op_value_t;

// One binding table entry: a buffer handle (0: an empty slot) and a range.
typedef struct halod_op_binding_t {
  uint64_t buffer;
  uint64_t offset;
  uint64_t length;  // UINT64_MAX: to the end of the buffer
} halod_op_binding_t;

// What a queue operation waits for and signals.
typedef struct halod_op_sync_t {
  const halod_op_value_t *waits;
  uint32_t wait_count;
  const halod_op_value_t *signals;
  uint32_t signal_count;
} halod_op_sync_t;

// queue_execute: a command buffer with a binding table.
typedef struct halod_op_execute_t {
  uint64_t queue;  // 0: the default queue of the command buffer's device
  uint64_t command_buffer;
  const halod_op_binding_t *bindings;
  uint32_t binding_count;
  halod_op_sync_t sync;
} halod_op_execute_t;

// queue_alloca: a buffer whose use is ordered on a queue.
typedef struct halod_op_alloca_t {
  uint64_t queue;  // a queue handle: there is no default queue
  uint64_t size;
  uint32_t memory_type;  // halo_memory_type_t
  halod_op_sync_t sync;
} halod_op_alloca_t;

// queue_dealloca: frees a buffer once the waits are met.
typedef struct halod_op_dealloca_t {
  uint64_t queue;  // a queue handle: there is no default queue
  uint64_t buffer;
  halod_op_sync_t sync;
} halod_op_dealloca_t;

// Validates |op| and accepts the submission; |out_submission_id| is its id.
halo_status_t halod_op_execute(halod_t *daemon, halod_session_t *session,
                               const halod_op_execute_t *op,
                               uint64_t *out_submission_id);

// Validates |op|, allocates the buffer and accepts the submission that
// orders its signals after its waits. |out_buffer| (borrowed from the
// session's handle |out_handle|) fills the reply. Where the allocation is
// a control call to a worker (device memory; host memory that needs a new
// arena), *out_call is that call, which the caller finishes and starts
// (daemon/submission.h), and the outputs stay empty.
typedef struct halod_alloca_call_t halod_alloca_call_t;
halo_status_t halod_op_alloca(halod_t *daemon, halod_session_t *session,
                              const halod_op_alloca_t *op,
                              halod_alloca_call_t **out_call,
                              halod_buffer_t **out_buffer, uint64_t *out_handle,
                              uint64_t *out_submission_id);

// Validates |op|, removes the buffer's handle and accepts the submission
// that frees it.
halo_status_t halod_op_dealloca(halod_t *daemon, halod_session_t *session,
                                const halod_op_dealloca_t *op,
                                uint64_t *out_submission_id);

// A host signal of the session's semaphore |signal->semaphore|.
halo_status_t halod_op_signal(halod_t *daemon, halod_session_t *session,
                              const halod_op_value_t *signal);

#endif  // HALOD_OPERATION_H_
