// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Submissions: one queue_execute, queue_alloca or queue_dealloca.
// Validated in O(bindings + waits + signals), then handed to the deferred
// queue (hal/deferred_queue.h), which releases it when its waits are met:
// an execution to the device, an alloca or dealloca to the loop thread (a
// host action: it has no device work). A submission holds a reference to
// everything it uses (command buffer, bound buffers, semaphores, queue)
// until it retires, so clients may release them right after submitting.
//
// Alloca and dealloca (docs/architecture.md "Queue-ordered alloca and
// dealloca"): the alloca's memory is allocated when the request is
// processed, through halod_buffer_create; the submission only orders its
// signals after its waits. The dealloca takes over the reference of the
// buffer's handle (removed at once); once its waits are met it drops that
// reference, and it completes (its signals) when the buffer's memory is
// freed: at once, or when the last execution that bound it retires.
//
// Loop thread only.
#ifndef HALOD_SUBMISSION_H_
#define HALOD_SUBMISSION_H_

#include <stdint.h>

#include "common/list.h"
#include "daemon/command_buffer.h"
#include "daemon/daemon.h"
#include "daemon/fault_budget.h"
#include "daemon/operation.h"
#include "daemon/queue.h"
#include "daemon/semaphore.h"
#include "hal/deferred_queue.h"

typedef enum halod_submission_kind_e {
  HALOD_SUBMISSION_EXECUTE = 0,
  HALOD_SUBMISSION_ALLOCA = 1,
  HALOD_SUBMISSION_DEALLOCA = 2,
} halod_submission_kind_t;

// "execute" | "alloca" | "dealloca".
const char *halod_submission_kind_name(halod_submission_kind_t kind);

typedef struct halod_submission_t {
  halo_hal_action_t action;  // first: the retire callback finds us
  halod_t *daemon;
  halod_submission_kind_t kind;
  uint64_t id;
  uint64_t session_id;
  // Its session's process: charged if the work faults, even after the
  // session ended (daemon/fault_budget.h).
  halod_client_process_t process;
  halod_queue_t *queue;
  halod_command_buffer_t *command_buffer;
  halo_hal_binding_t *bindings;  // binding_capacity entries
  // Bound, retained (a dealloca: its buffer, until its waits are met).
  halod_buffer_t **buffers;
  uint32_t buffer_count;
  // Alloca and dealloca: the buffer's id (haloctl queues).
  uint64_t buffer_id;
  halod_semaphore_t **semaphores;  // waits then signals, retained
  uint32_t semaphore_count;
  // The signals as the device stores them (slot address on the queue's
  // device, value): action.execution.signals.
  halo_hal_execution_signal_t *device_signals;
  // What each signal's slot pending was before this submission reserved
  // its value, until it is accepted (then the reservations stand).
  uint64_t *reserved_previous;
  bool accepted;
  int64_t accepted_ns;
  // In the session's submissions not yet retired (session->submissions).
  halo_list_link_t session_link;
} halod_submission_t;

// Validates and accepts |op|; |out_id| is the submission's id.
halo_status_t halod_submission_create(halod_t *daemon, halod_session_t *session,
                                      const halod_op_execute_t *op,
                                      uint64_t *out_id);

// queue_alloca: validates |op|, allocates the buffer (as
// halod_buffer_create, charged to the session at once), adds its handle
// (|out_handle|; |out_buffer| borrowed from it) and accepts the submission
// that signals |op|'s signals after its waits. On error nothing is
// left behind.
halo_status_t halod_submission_create_alloca(
    halod_t *daemon, halod_session_t *session, const halod_op_alloca_t *op,
    halod_buffer_t **out_buffer, uint64_t *out_handle, uint64_t *out_id);

// queue_dealloca: validates |op|, removes the buffer's handle and
// accepts the submission that frees it (see above).
halo_status_t halod_submission_create_dealloca(halod_t *daemon,
                                               halod_session_t *session,
                                               const halod_op_dealloca_t *op,
                                               uint64_t *out_id);

// The session ended: its submissions still waiting fail with ABORTED
// (their signal semaphores too); issued ones complete and retire.
void halod_submission_cancel_session(halod_t *daemon, halod_session_t *session);

// Calls |visit| for every submission issued to |device| (on the device,
// not yet completed), in every session.
typedef void (*halod_submission_visit_fn)(void *user_data,
                                          halod_session_t *session,
                                          halod_submission_t *submission);
void halod_submission_for_each_issued(halod_t *daemon,
                                      const halo_hal_device_t *device,
                                      halod_submission_visit_fn visit,
                                      void *user_data);

// Writes "12 (session 3, pid 456, command buffer 7), ..." for the
// submissions issued to |device|, at most |limit| of them ("none" when
// there are none) into |text|; returns how many there are.
uint32_t halod_submission_describe_issued(halod_t *daemon,
                                          const halo_hal_device_t *device,
                                          char *text, size_t size,
                                          uint32_t limit);

#endif  // HALOD_SUBMISSION_H_
