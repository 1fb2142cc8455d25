// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The queue operations both transports share: one validation path, whichever
// way a request came.
#include "daemon/operation.h"

#include "common/status.h"
#include "daemon/semaphore.h"
#include "daemon/session.h"
#include "daemon/submission.h"

static halo_status_t halod_op_check_draining(const halod_t *daemon) {
  if (daemon->draining) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE,
                            "halod is draining before a restart "
                            "(haloctl drain): no new submissions");
  }
  return NULL;
}

halo_status_t halod_op_execute(halod_t *daemon, halod_session_t *session,
                               const halod_op_execute_t *op,
                               uint64_t *out_submission_id) {
  *out_submission_id = 0;
  HALO_RETURN_IF_ERROR(halod_op_check_draining(daemon));
  return halod_submission_create(daemon, session, op, out_submission_id);
}

halo_status_t halod_op_alloca(halod_t *daemon, halod_session_t *session,
                              const halod_op_alloca_t *op,
                              halod_alloca_call_t **out_call,
                              halod_buffer_t **out_buffer, uint64_t *out_handle,
                              uint64_t *out_submission_id) {
  *out_call = NULL;
  *out_buffer = NULL;
  *out_handle = 0;
  *out_submission_id = 0;
  HALO_RETURN_IF_ERROR(halod_op_check_draining(daemon));
  return halod_submission_create_alloca(
      daemon, session, op, out_call, out_buffer, out_handle, out_submission_id);
}

halo_status_t halod_op_dealloca(halod_t *daemon, halod_session_t *session,
                                const halod_op_dealloca_t *op,
                                uint64_t *out_submission_id) {
  *out_submission_id = 0;
  HALO_RETURN_IF_ERROR(halod_op_check_draining(daemon));
  return halod_submission_create_dealloca(daemon, session, op,
                                          out_submission_id);
}

halo_status_t halod_op_signal(halod_t *daemon, halod_session_t *session,
                              const halod_op_value_t *signal) {
  (void)daemon;
  void *object;
  HALO_RETURN_IF_ERROR(halod_handle_table_lookup(
      &session->handles, signal->semaphore, HALOD_OBJECT_SEMAPHORE, &object));
  return halod_semaphore_signal(object, signal->value);
}
