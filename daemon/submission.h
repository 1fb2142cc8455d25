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
// processed, through halod_buffer_create, or by a control call to the
// worker made off the loop (halod_alloca_call_t) that the request waits
// for; the submission only orders its signals after its waits. The dealloca
// takes over the reference of the buffer's handle (removed at once); once its
// waits are met it drops that reference, and it completes (its signals) when
// the buffer's memory is freed: at once, or when the last execution that bound
// it retires.
//
// Loop thread only.
#ifndef HALOD_SUBMISSION_H_
#define HALOD_SUBMISSION_H_

#include <stdint.h>

#include "common/list.h"
#include "daemon/arena.h"
#include "daemon/command_buffer.h"
#include "daemon/daemon.h"
#include "daemon/device_call.h"
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

// A session's unfinished submissions may hold at most this many waits and
// signals together: on average HALOD_SUBMISSION_SYNC_PER_PENDING per
// submission its session-pending quota allows, and at least
// HALOD_SUBMISSION_MAX_SYNC (one submission's most). Each is a timepoint
// or a reservation halod keeps (about 100 bytes) until the submission
// retires; session-pending alone let one session keep 65536 submissions of
// 1024 waits each, some 7 GiB of halod's memory. More are refused with
// RESOURCE_EXHAUSTED naming the quota and session-pending.
#define HALOD_SUBMISSION_MAX_SYNC 1024u
#define HALOD_SUBMISSION_SYNC_PER_PENDING 8u
uint64_t halod_submission_sync_quota(uint32_t session_pending);

// The waits and signals of a session's accepted submissions not yet
// retired, shared by those submissions (each holds it until it is freed,
// also after the session ended); every submission in a session's list
// holds the same one, so its newest tells the session's count.
typedef struct halod_submission_ledger_t {
  uint64_t sync_count;   // waits and signals charged
  uint32_t submissions;  // holders
} halod_submission_ledger_t;

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
  // The first |held_imports| of |buffers| hold their imports' charge on
  // the session (halod_session_hold_import): the bound ones.
  uint32_t held_imports;
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
  // Its session's ledger (held) and what it charged there once accepted
  // (its waits and signals).
  halod_submission_ledger_t *ledger;
  uint32_t sync_charged;
  // In the session's submissions not yet retired (session->submissions).
  halo_list_link_t session_link;
  // Accepted and not yet issued or retired: its references count as a
  // waiting submission's on its semaphores (daemon/semaphore_orphans.h).
  bool waiting_counted;
  // Its place in a walk of daemon/semaphore_orphans.c plus 1; 0 outside.
  uint32_t walk_index;
} halod_submission_t;

// Validates and accepts |op|; |out_id| is the submission's id.
halo_status_t halod_submission_create(halod_t *daemon, halod_session_t *session,
                                      const halod_op_execute_t *op,
                                      uint64_t *out_id);

// An alloca whose allocation is a control call to its queue's worker
// (device memory, or host-visible memory that needs a new arena), made off
// the loop (daemon/device_call.h). Its caller sets |finish| (and what it
// needs to answer) and starts |call|; once it returned, the alloca is
// accepted or undone and |finish| gets the outcome.
typedef struct halod_alloca_call_t halod_alloca_call_t;
// The loop: |status| (consumed), or the buffer (|buffer|, borrowed from
// |session|'s handle |handle|) and its submission's |id|. |session| NULL:
// it ended (then |status| says so).
typedef void (*halod_alloca_finish_fn)(halod_t *daemon,
                                       halod_alloca_call_t *call,
                                       halod_session_t *session,
                                       halo_status_t status,
                                       const halod_buffer_t *buffer,
                                       uint64_t handle, uint64_t id);
struct halod_alloca_call_t {
  halod_device_call_t call;
  halod_alloca_finish_fn finish;
  void *user_data;
  uint64_t user_value;
  // Private to daemon/submission.c.
  uint64_t session_id;
  halod_submission_t *submission;  // not accepted yet
  halod_queue_t *queue;            // held
  uint32_t memory_type;
  uint64_t size;  // charged to the session already
  uint64_t address;
  halo_status_t status;
  halod_arena_t *arena;
  halod_host_registration_t registration;
};

// queue_alloca: validates |op|, allocates the buffer (as
// halod_buffer_create, charged to the session at once), adds its handle
// (|out_handle|; |out_buffer| borrowed from it) and accepts the submission
// that signals |op|'s signals after its waits. Where the allocation is a
// control call to a worker, *out_call is the call that makes it (the
// rest as above, once it returned) and the outputs stay empty; else
// *out_call is NULL. On error nothing is left behind.
halo_status_t halod_submission_create_alloca(
    halod_t *daemon, halod_session_t *session, const halod_op_alloca_t *op,
    halod_alloca_call_t **out_call, halod_buffer_t **out_buffer,
    uint64_t *out_handle, uint64_t *out_id);

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
