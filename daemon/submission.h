// Submissions: one queue_execute. Validated in O(bindings + waits +
// signals), then handed to the deferred queue (hal/deferred_queue.h), which
// releases it to the device when its waits are met. A submission holds a
// reference to everything it uses (command buffer, bound buffers,
// semaphores, queue) until it retires, so clients may release them right
// after submitting.
//
// Loop thread only.
#ifndef HALOD_SUBMISSION_H_
#define HALOD_SUBMISSION_H_

#include <stdint.h>

#include "daemon/command_buffer.h"
#include "daemon/daemon.h"
#include "daemon/queue.h"
#include "daemon/semaphore.h"
#include "hal/deferred_queue.h"

typedef struct halod_submission_t {
  halo_hal_action_t action;  // first: the retire callback finds us
  halod_t *daemon;
  uint64_t id;
  uint64_t session_id;
  halod_queue_t *queue;
  halod_command_buffer_t *command_buffer;
  halo_hal_binding_t *bindings;  // binding_capacity entries
  halod_buffer_t **buffers;      // bound, retained
  uint32_t buffer_count;
  halod_semaphore_t **semaphores;  // waits then signals, retained
  uint32_t semaphore_count;
  // The signals as the device stores them (slot address on the queue's
  // device, value): action.execution.signals.
  halo_hal_execution_signal_t *device_signals;
  int64_t accepted_ns;
  // The session's submissions not yet retired.
  struct halod_submission_t *session_prev;
  struct halod_submission_t *session_next;
} halod_submission_t;

// Validates and accepts |request|; |out_id| is the submission's id.
halo_status_t halod_submission_create(halod_t *daemon, halod_session_t *session,
                                      const Halo__Wire__QueueExecute *request,
                                      uint64_t *out_id);

// The session ended: its submissions still waiting fail with ABORTED
// (their signal semaphores too); issued ones complete and retire.
void halod_submission_cancel_session(halod_t *daemon, halod_session_t *session);

#endif  // HALOD_SUBMISSION_H_
