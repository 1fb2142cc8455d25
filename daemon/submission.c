// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/submission.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/semaphore_orphans.h"
#include "daemon/session.h"
#include "daemon/trust_domain.h"
#include "daemon/workers.h"
#include "hal/remote/remote_device.h"

const char *halod_submission_kind_name(halod_submission_kind_t kind) {
  switch (kind) {
    case HALOD_SUBMISSION_EXECUTE:
      return "execute";
    case HALOD_SUBMISSION_ALLOCA:
      return "alloca";
    case HALOD_SUBMISSION_DEALLOCA:
      return "dealloca";
  }
  return "unknown";
}

static void halod_submission_free(halod_submission_t *submission) {
  halod_t *daemon = submission->daemon;
  halod_submission_ledger_t *ledger = submission->ledger;
  if (ledger) {
    ledger->sync_count -= submission->sync_charged;
    if (--ledger->submissions == 0) free(ledger);
  }
  // Refused after it reserved its signal values: give them back (last
  // first, so that each restores what the one before it saw).
  for (uint32_t i = submission->accepted ? 0 : submission->action.signal_count;
       i > 0; --i) {
    halo_hal_semaphore_unreserve(submission->action.signals[i - 1].semaphore,
                                 submission->action.signals[i - 1].value,
                                 submission->reserved_previous[i - 1]);
  }
  for (uint32_t i = 0; i < submission->buffer_count; ++i) {
    if (i < submission->held_imports) {
      halod_session_drop_import(daemon, submission->session_id,
                                submission->buffers[i]);
    }
    halod_buffer_release(daemon, submission->buffers[i]);
  }
  for (uint32_t i = 0; i < submission->semaphore_count; ++i) {
    halod_semaphore_release(daemon, submission->semaphores[i]);
  }
  if (submission->command_buffer) {
    halod_command_buffer_release(daemon, submission->command_buffer);
  }
  if (submission->queue) halod_queue_release(daemon, submission->queue);
  free(submission->bindings);
  free(submission->buffers);
  free(submission->semaphores);
  free(submission->action.waits);
  free(submission->action.signals);
  free(submission->device_signals);
  free(submission->reserved_previous);
  free(submission);
}

// Loop thread: the deferred queue is done with the submission.
static void halod_submission_on_retire(halo_hal_action_t *action) {
  halod_submission_t *submission = (halod_submission_t *)action;
  halod_t *daemon = submission->daemon;
  // Before its references go: a release looks at what waits.
  halod_semaphore_orphans_stop_waiting(submission);
  halod_queue_t *queue = submission->queue;
  if (action->issued_ns) {
    --queue->in_flight;
    if (action->failure) {
      ++queue->failed;
    } else {
      ++queue->completed;
      // Device latency only: host actions take no device time.
      if (submission->kind == HALOD_SUBMISSION_EXECUTE) {
        halod_queue_record_latency(daemon, queue,
                                   action->completed_ns - action->issued_ns);
      }
    }
  } else {
    --queue->waiting;
    ++queue->failed;
  }
  if (action->failure) {
    HALO_LOG_DEBUG("submission %llu (%s) failed: %s",
                   (unsigned long long)submission->id,
                   halod_submission_kind_name(submission->kind),
                   halo_status_message(action->failure));
    halo_status_free(action->failure);
    action->failure = NULL;
  }
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions.by_id, submission->session_id);
  if (session) {
    halo_list_remove(&session->submissions, &submission->session_link);
    --session->pending_submissions;
  }
  halod_submission_free(submission);
  // Work an ended session left in flight kept its trust domain (and the
  // domain's worker) alive: it may end now.
  if (!session) halod_domains_end_idle(daemon);
}

static void halod_submission_on_issue(halo_hal_action_t *action) {
  halod_submission_t *submission = (halod_submission_t *)action;
  // Issued, it will signal (or fail) its signals whatever they wait for.
  halod_semaphore_orphans_stop_waiting(submission);
  --submission->queue->waiting;
  ++submission->queue->in_flight;
}

static halo_status_t halod_submission_queue(halod_t *daemon,
                                            halod_session_t *session,
                                            uint64_t handle, uint32_t device,
                                            halod_queue_t **out_queue) {
  *out_queue = NULL;
  if (handle) {
    void *object;
    HALO_RETURN_IF_ERROR(halod_handle_table_lookup(
        &session->handles, handle, HALOD_OBJECT_QUEUE, &object));
    halod_queue_t *queue = object;
    if (queue->device != device) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "queue handle 0x%llx is on device %u, the "
                              "command buffer on device %u",
                              (unsigned long long)handle, queue->device,
                              device);
    }
    *out_queue = queue;
    return NULL;
  }
  if (!session->default_queues[device]) {
    // A worker's device: its default queue is made off the loop with the
    // session's first command buffer there, and again with each next one
    // while it is missing (the creation failed: out of memory, the worker
    // gone or hung). Made here, the worker's answer (up to its 30 s bound)
    // would hold every session's requests on the loop.
    halo_hal_device_t *hal_device = NULL;
    HALO_RETURN_IF_ERROR(
        halod_domain_device(daemon, session->domain, device, &hal_device));
    if (halo_hal_remote_device_is(hal_device)) {
      return halo_status_make(
          HALO_STATUS_UNAVAILABLE,
          "the session has no default queue on device %u: making it with "
          "the session's command buffer failed (halod's log says why); "
          "create another command buffer to retry, or execute on a queue "
          "of the session's own",
          device);
    }
    HALO_RETURN_IF_ERROR(halod_queue_create(daemon, session, device, 0,
                                            &session->default_queues[device]));
  }
  *out_queue = session->default_queues[device];
  return NULL;
}

// Checks the binding table against the recording's slot requirements and
// resolves it: O(bindings).
static halo_status_t halod_submission_bind(halod_submission_t *submission,
                                           halod_session_t *session,
                                           const halod_memo_entry_t *entry,
                                           const halod_queue_t *queue,
                                           const halod_op_execute_t *op) {
  uint32_t capacity = entry->binding_capacity;
  if (op->binding_count > capacity) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%u bindings for a command buffer with binding "
                            "capacity %u",
                            op->binding_count, capacity);
  }
  submission->bindings = calloc(capacity + 1, sizeof(*submission->bindings));
  submission->buffers =
      calloc(op->binding_count + 1, sizeof(*submission->buffers));
  if (!submission->bindings || !submission->buffers) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  for (uint32_t i = 0; i < capacity; ++i) {
    const halod_slot_requirement_t *slot = &entry->slots[i];
    const halod_op_binding_t *binding =
        i < op->binding_count ? &op->bindings[i] : NULL;
    if (!binding || binding->buffer == 0) {
      if (slot->used) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "binding %u: missing, but the command buffer "
                                "uses slot %u (at least %llu bytes)",
                                i, i, (unsigned long long)slot->min_length);
      }
      continue;
    }
    void *object;
    halo_status_t status = halod_handle_table_lookup(
        &session->handles, binding->buffer, HALOD_OBJECT_BUFFER, &object);
    if (status) return halo_status_annotate(status, "binding %u", i);
    halod_buffer_t *buffer = object;
    uint64_t address;
    status = halod_buffer_device_address(buffer, queue->hal_device,
                                         queue->device, &address);
    if (status) return halo_status_annotate(status, "binding %u", i);
    if (binding->offset > buffer->size) {
      return halo_status_make(HALO_STATUS_OUT_OF_RANGE,
                              "binding %u: offset %llu is past the end of "
                              "the buffer (%llu bytes)",
                              i, (unsigned long long)binding->offset,
                              (unsigned long long)buffer->size);
    }
    uint64_t length = binding->length == UINT64_MAX
                          ? buffer->size - binding->offset
                          : binding->length;
    if (length > buffer->size - binding->offset) {
      return halo_status_make(HALO_STATUS_OUT_OF_RANGE,
                              "binding %u: range [%llu, +%llu) exceeds the "
                              "buffer's %llu bytes",
                              i, (unsigned long long)binding->offset,
                              (unsigned long long)length,
                              (unsigned long long)buffer->size);
    }
    if (slot->used && length < slot->min_length) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "binding %u: %llu bytes bound, but the command "
                              "buffer needs at least %llu in slot %u",
                              i, (unsigned long long)length,
                              (unsigned long long)slot->min_length, i);
    }
    if ((address + binding->offset) % slot->alignment != 0) {
      // 16 and up: a kernel's buffer argument (daemon/command_buffer.h).
      return halo_status_make(
          HALO_STATUS_INVALID_ARGUMENT,
          "binding %u: offset %llu is not %u-byte aligned, as slot %u "
          "needs%s",
          i, (unsigned long long)binding->offset, slot->alignment, i,
          slot->alignment >= HALOD_DISPATCH_ALIGNMENT
              ? " (a kernel takes its address: vectorized loads fault on a "
                "lesser one; HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS allows "
                "it)"
              : "");
    }
    submission->bindings[i].address = address + binding->offset;
    submission->bindings[i].length = length;
    halod_buffer_retain(buffer);
    submission->buffers[submission->buffer_count++] = buffer;
    halod_session_hold_import(session, buffer);
    submission->held_imports = submission->buffer_count;
  }
  return NULL;
}

static halo_status_t halod_submission_semaphore(halod_submission_t *submission,
                                                halod_session_t *session,
                                                const char *role, size_t index,
                                                uint64_t handle,
                                                halod_semaphore_t **out) {
  void *object;
  halo_status_t status = halod_handle_table_lookup(
      &session->handles, handle, HALOD_OBJECT_SEMAPHORE, &object);
  if (status) return halo_status_annotate(status, "%s %zu", role, index);
  halod_semaphore_retain(object);
  submission->semaphores[submission->semaphore_count++] = object;
  *out = object;
  return NULL;
}

uint64_t halod_submission_sync_quota(uint32_t session_pending) {
  uint64_t quota =
      (uint64_t)session_pending * HALOD_SUBMISSION_SYNC_PER_PENDING;
  return quota > HALOD_SUBMISSION_MAX_SYNC ? quota : HALOD_SUBMISSION_MAX_SYNC;
}

// The ledger of |session|'s accepted submissions (its newest one's); NULL
// while it has none.
static halod_submission_ledger_t *halod_submission_session_ledger(
    const halod_session_t *session) {
  const halod_submission_t *newest = HALO_LIST_ENTRY(
      session->submissions.head, halod_submission_t, session_link);
  return newest ? newest->ledger : NULL;
}

// Checks that |session|'s unfinished submissions with |count| more waits
// and signals stay within their quota, and holds the session's ledger for
// the submission (a new one while the session has no submission; the
// charge waits for its acceptance, halod_submission_accept).
static halo_status_t halod_submission_check_sync_quota(
    halod_submission_t *submission, const halod_session_t *session,
    size_t count) {
  uint32_t session_pending = submission->daemon->config.session_pending;
  uint64_t quota = halod_submission_sync_quota(session_pending);
  halod_submission_ledger_t *ledger = halod_submission_session_ledger(session);
  uint64_t held = ledger ? ledger->sync_count : 0;
  if (held + count > quota) {
    return halo_status_make(
        HALO_STATUS_RESOURCE_EXHAUSTED,
        "the waits and signals of this session's unfinished submissions "
        "(%llu, and this one's %zu) would pass their quota of %llu (%u per "
        "submission of session-pending, %u, and at least %u); wait for some "
        "to complete",
        (unsigned long long)held, count, (unsigned long long)quota,
        HALOD_SUBMISSION_SYNC_PER_PENDING, session_pending,
        HALOD_SUBMISSION_MAX_SYNC);
  }
  if (!ledger) {
    ledger = calloc(1, sizeof(*ledger));
    if (!ledger) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  ++ledger->submissions;
  submission->ledger = ledger;
  return NULL;
}

static halo_status_t halod_submission_sync(halod_submission_t *submission,
                                           halod_session_t *session,
                                           const halod_queue_t *queue,
                                           const halod_op_sync_t *sync) {
  size_t total = (size_t)sync->wait_count + sync->signal_count;
  if (total > HALOD_SUBMISSION_MAX_SYNC) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%u waits and %u signals (at most %u in all)",
                            sync->wait_count, sync->signal_count,
                            HALOD_SUBMISSION_MAX_SYNC);
  }
  HALO_RETURN_IF_ERROR(
      halod_submission_check_sync_quota(submission, session, total));
  halo_hal_action_t *action = &submission->action;
  submission->semaphores = calloc(total + 1, sizeof(*submission->semaphores));
  action->waits = calloc(sync->wait_count + 1, sizeof(*action->waits));
  action->signals = calloc(sync->signal_count + 1, sizeof(*action->signals));
  submission->device_signals =
      calloc(sync->signal_count + 1, sizeof(*submission->device_signals));
  submission->reserved_previous =
      calloc(sync->signal_count + 1, sizeof(*submission->reserved_previous));
  if (!submission->semaphores || !action->waits || !action->signals ||
      !submission->device_signals || !submission->reserved_previous) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  for (size_t i = 0; i < sync->wait_count; ++i) {
    halod_semaphore_t *semaphore;
    HALO_RETURN_IF_ERROR(halod_submission_semaphore(
        submission, session, "wait", i, sync->waits[i].semaphore, &semaphore));
    if (sync->waits[i].value > HALO_TIMELINE_MAX_VALUE) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "wait %zu: value %llu is >= 2^63", i,
                              (unsigned long long)sync->waits[i].value);
    }
    action->waits[i].semaphore = &semaphore->hal;
    action->waits[i].timepoint.value = sync->waits[i].value;
    ++action->wait_count;
  }
  for (size_t i = 0; i < sync->signal_count; ++i) {
    halod_semaphore_t *semaphore;
    HALO_RETURN_IF_ERROR(
        halod_submission_semaphore(submission, session, "signal", i,
                                   sync->signals[i].semaphore, &semaphore));
    uint64_t value = sync->signals[i].value;
    for (uint32_t j = 0; j < action->signal_count; ++j) {
      if (action->signals[j].semaphore == &semaphore->hal) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "signal %zu: the semaphore is signaled twice "
                                "by one submission (signal %u)",
                                i, j);
      }
    }
    // Checked and reserved at once: a device worker taking ring records
    // reserves values in the same slot (halod_submission_free undoes it if
    // the submission is refused after all).
    halo_status_t status = halo_hal_semaphore_reserve_signal(
        &semaphore->hal, value, &submission->reserved_previous[i]);
    if (status) return halo_status_annotate(status, "signal %zu", i);
    action->signals[i].semaphore = &semaphore->hal;
    action->signals[i].value = value;
    submission->device_signals[i].device_address =
        halod_semaphore_device_address(semaphore, queue->hal_device,
                                       queue->device);
    submission->device_signals[i].value = value;
    submission->device_signals[i].slot = semaphore->hal.slot;
    ++action->signal_count;
  }
  return NULL;
}

// A session's pending quota covers every kind of submission.
static halo_status_t halod_submission_check_quota(
    const halod_t *daemon, const halod_session_t *session) {
  if (session->pending_submissions >= daemon->config.session_pending) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "%u submissions of this session are unfinished "
                            "(its quota, session-pending); wait for some to "
                            "complete",
                            session->pending_submissions);
  }
  return NULL;
}

// Accepted: takes the queue's reference, reserves the signal values, links
// the submission to its session and hands it to the deferred queue, which
// may issue (and even retire) it before this returns.
static void halod_submission_accept(halod_t *daemon, halod_session_t *session,
                                    halod_submission_t *submission,
                                    halod_queue_t *queue, uint64_t *out_id) {
  halod_queue_retain(queue);
  submission->queue = queue;
  halo_hal_action_t *action = &submission->action;
  submission->accepted = true;  // its reservations stand
  // Charged to the ledger of the session's submissions: the one it holds,
  // unless the session accepted others since it was checked (an alloca
  // waits for its allocation meanwhile), each of which holds the newest's.
  halod_submission_ledger_t *ledger = halod_submission_session_ledger(session);
  if (ledger && ledger != submission->ledger) {
    if (--submission->ledger->submissions == 0) free(submission->ledger);
    ++ledger->submissions;
    submission->ledger = ledger;
  }
  submission->sync_charged = action->wait_count + action->signal_count;
  submission->ledger->sync_count += submission->sync_charged;
  submission->id = halod_next_id(daemon);
  submission->accepted_ns = halo_clock_now_ns();
  action->queue = queue->hal;
  action->retire = halod_submission_on_retire;
  action->on_issue = halod_submission_on_issue;
  halo_list_push_front(&session->submissions, &submission->session_link);
  ++session->pending_submissions;
  ++queue->waiting;
  *out_id = submission->id;
  halod_semaphore_orphans_start_waiting(submission);
  halo_hal_deferred_queue_submit(&daemon->work.deferred, action);
}

// Loop thread: the last reference of a dealloca's buffer went, when a
// submission that bound it retired or a command buffer naming it went. The
// dealloca completes on the next drain of the inbox, not here: a retirement
// inside this release could free the submission a caller walks past
// (halod_submission_cancel_session's cursor).
static void halod_submission_on_buffer_freed(void *user_data) {
  halod_submission_t *submission = user_data;
  halo_hal_deferred_queue_post_completion(&submission->action, NULL);
}

// Loop thread: the waits of an alloca or dealloca are met. An alloca's
// memory exists already: it completes. A dealloca drops the buffer's
// reference it took from the handle and completes once the memory is
// freed: now, or when the last execution that bound it retires.
static void halod_submission_run_on_host(halo_hal_action_t *action) {
  halod_submission_t *submission = (halod_submission_t *)action;
  if (submission->kind != HALOD_SUBMISSION_DEALLOCA ||
      submission->buffer_count == 0) {
    halo_hal_deferred_queue_complete(action, NULL);
    return;
  }
  halod_buffer_t *buffer = submission->buffers[0];
  submission->buffer_count = 0;
  if (buffer->refcount > 1) {
    buffer->on_freed = halod_submission_on_buffer_freed;
    buffer->on_freed_data = submission;
    halod_buffer_release(submission->daemon, buffer);
    return;
  }
  halod_buffer_release(submission->daemon, buffer);
  halo_hal_deferred_queue_complete(action, NULL);
}

halo_status_t halod_submission_create(halod_t *daemon, halod_session_t *session,
                                      const halod_op_execute_t *op,
                                      uint64_t *out_id) {
  *out_id = 0;
  HALO_RETURN_IF_ERROR(halod_submission_check_quota(daemon, session));
  void *object;
  halo_status_t status =
      halod_handle_table_lookup(&session->handles, op->command_buffer,
                                HALOD_OBJECT_COMMAND_BUFFER, &object);
  if (status) return status;
  halod_command_buffer_t *command_buffer = object;
  halod_memo_entry_t *entry = command_buffer->entry;
  if (command_buffer->executed && entry->flags == HALO_HAL_RECORDING_ONE_SHOT) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "command buffer handle 0x%llx is ONE_SHOT and "
                            "was executed already",
                            (unsigned long long)op->command_buffer);
  }
  halod_submission_t *submission = calloc(1, sizeof(*submission));
  if (!submission)
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  submission->daemon = daemon;
  submission->session_id = session->id;
  submission->process = session->process;
  halod_queue_t *queue = NULL;
  status =
      halod_submission_queue(daemon, session, op->queue, entry->device, &queue);
  if (!status) {
    status = halod_submission_bind(submission, session, entry, queue, op);
  }
  if (!status) {
    status = halod_submission_sync(submission, session, queue, &op->sync);
  }
  if (status) {
    halod_submission_free(submission);
    return status;
  }
  halod_command_buffer_retain(command_buffer);
  submission->command_buffer = command_buffer;
  command_buffer->executed = true;
  halo_hal_action_t *action = &submission->action;
  action->execution.command_buffer = entry->hal;
  action->execution.bindings = submission->bindings;
  action->execution.binding_count = entry->binding_capacity;
  action->execution.signals = submission->device_signals;
  action->execution.signal_count = action->signal_count;
  halod_submission_accept(daemon, session, submission, queue, out_id);
  return NULL;
}

// The queue an alloca or dealloca names (a handle: there is no default
// queue to pick without a device).
static halo_status_t halod_submission_named_queue(halod_session_t *session,
                                                  uint64_t handle,
                                                  halod_queue_t **out_queue) {
  void *object = NULL;
  halo_status_t status = halod_handle_table_lookup(&session->handles, handle,
                                                   HALOD_OBJECT_QUEUE, &object);
  *out_queue = object;
  return halo_status_annotate(status, "queue");
}

// A new host submission (alloca, dealloca) with its waits and signals
// checked.
static halo_status_t halod_submission_create_host(
    halod_t *daemon, halod_session_t *session, halod_submission_kind_t kind,
    const halod_queue_t *queue, const halod_op_sync_t *sync,
    halod_submission_t **out_submission) {
  *out_submission = NULL;
  halod_submission_t *submission = calloc(1, sizeof(*submission));
  if (!submission) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  submission->daemon = daemon;
  submission->kind = kind;
  submission->session_id = session->id;
  submission->process = session->process;
  halo_status_t status =
      halod_submission_sync(submission, session, queue, sync);
  if (status) {
    halod_submission_free(submission);
    return status;
  }
  submission->action.run_on_host = halod_submission_run_on_host;
  *out_submission = submission;
  return NULL;
}

// The session's |queue|'s device, if its alloca of |op| allocates by a
// control call (a worker's device memory; host-visible memory that needs a
// new arena); NULL otherwise.
static halo_hal_device_t *halod_submission_alloca_caller(
    const halod_t *daemon, const halod_session_t *session,
    const halod_queue_t *queue, const halod_op_alloca_t *op) {
  if (!halo_hal_remote_device_is(queue->hal_device)) return NULL;
  if (op->memory_type == HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE) {
    return queue->hal_device;
  }
  if (op->memory_type == HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE &&
      halod_buffer_needs_arena(daemon, session, op->size, false)) {
    return queue->hal_device;
  }
  return NULL;
}

// |submission|'s semaphores, each retained, in a new array of
// |*out_count| (none when out of memory: nothing is retained then), for
// halod_semaphores_release_all.
static halod_semaphore_t **halod_submission_hold_semaphores(
    const halod_submission_t *submission, size_t *out_count) {
  *out_count = 0;
  halod_semaphore_t **held =
      calloc(submission->semaphore_count + 1, sizeof(*held));
  if (!held) return NULL;
  for (uint32_t i = 0; i < submission->semaphore_count; ++i) {
    halod_semaphore_retain(submission->semaphores[i]);
    held[i] = submission->semaphores[i];
  }
  *out_count = submission->semaphore_count;
  return held;
}

// A call thread: the allocation, or the new arena's registration.
static void halod_submission_alloca_work(halod_device_call_t *call) {
  halod_alloca_call_t *alloca = (halod_alloca_call_t *)call;
  if (alloca->arena) {
    halod_host_registration_run(&alloca->registration);
    return;
  }
  halo_hal_allocator_t *allocator = call->device->allocator;
  alloca->status =
      allocator->vtable->allocate(allocator, alloca->size, &alloca->address);
}

static void halod_submission_alloca_done(halod_t *daemon,
                                         halod_device_call_t *call,
                                         halod_session_t *unused) {
  (void)unused;  // started for a request or a ring's record: looked up
  halod_alloca_call_t *alloca = (halod_alloca_call_t *)call;
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions.by_id, alloca->session_id);
  halod_submission_t *submission = alloca->submission;
  halod_queue_t *queue = alloca->queue;
  if (session) --session->pending_submissions;  // held for it meanwhile
  halo_status_t status = alloca->arena ? NULL : alloca->status;
  alloca->status = NULL;
  if (!status) status = halod_device_call_session_gone(call, session);
  halod_buffer_t *buffer = NULL;
  if (!status && alloca->arena) {
    status = halod_buffer_create_on_arena(daemon, session, queue->device,
                                          alloca->size, false, alloca->arena,
                                          &alloca->registration, &buffer);
    alloca->arena = NULL;  // finished, or gone with the error
  } else if (!status) {
    status = halod_buffer_adopt(daemon, session, queue->device, alloca->size,
                                false, call->device, alloca->address, &buffer);
  }
  if (status) {
    // Nothing of it stays: the memory or arena, the bytes charged for it,
    // the submission's reservations.
    if (alloca->arena) {
      halod_buffer_arena_abandon(daemon, session, alloca->size, alloca->arena,
                                 &alloca->registration);
    } else if (alloca->address && !buffer) {
      halo_hal_allocator_t *allocator = call->device->allocator;
      allocator->vtable->deallocate(allocator, alloca->address, alloca->size);
      if (session) halod_buffer_unreserve(session, alloca->size);
    } else if (!alloca->address && session &&
               alloca->memory_type == HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE) {
      halod_buffer_unreserve(session, alloca->size);
    }
    halod_submission_free(submission);
    halod_queue_release(daemon, queue);
    alloca->finish(daemon, alloca, session,
                   halo_status_annotate(status, "queue_alloca"), NULL, 0, 0);
    free(alloca);
    return;
  }
  uint64_t handle = 0;
  status = halod_session_add_buffer(daemon, session, buffer, &handle);
  if (status) {
    halod_submission_free(submission);
    halod_queue_release(daemon, queue);
    alloca->finish(daemon, alloca, session,
                   halo_status_annotate(status, "queue_alloca"), NULL, 0, 0);
    free(alloca);
    return;
  }
  submission->buffer_id = buffer->id;
  uint64_t id = 0;
  // The session may have released semaphores the alloca names while the
  // allocation ran, and only a release looks for semaphores nothing can
  // advance any more (daemon/semaphore.h): held across the acceptance,
  // they are looked at once its waits are linked.
  size_t held_count = 0;
  halod_semaphore_t **held =
      halod_submission_hold_semaphores(submission, &held_count);
  // Out of memory for that: a search from all of them instead.
  if (!held && submission->semaphore_count) {
    halod_semaphore_orphans_later(daemon, NULL);
  }
  // May complete (and retire) the submission before returning.
  halod_submission_accept(daemon, session, submission, queue, &id);
  halod_semaphores_release_all(daemon, held, held_count);
  halod_queue_release(daemon, queue);
  alloca->finish(daemon, alloca, session, NULL, buffer, handle, id);
  free(alloca);
}

halo_status_t halod_submission_create_alloca(
    halod_t *daemon, halod_session_t *session, const halod_op_alloca_t *op,
    halod_alloca_call_t **out_call, halod_buffer_t **out_buffer,
    uint64_t *out_handle, uint64_t *out_id) {
  *out_call = NULL;
  *out_buffer = NULL;
  *out_handle = 0;
  *out_id = 0;
  HALO_RETURN_IF_ERROR(halod_submission_check_quota(daemon, session));
  halod_queue_t *queue;
  HALO_RETURN_IF_ERROR(
      halod_submission_named_queue(session, op->queue, &queue));
  halod_submission_t *submission;
  HALO_RETURN_IF_ERROR(halod_submission_create_host(
      daemon, session, HALOD_SUBMISSION_ALLOCA, queue, &op->sync, &submission));
  halo_hal_device_t *caller =
      halod_submission_alloca_caller(daemon, session, queue, op);
  if (caller) {
    // Allocated (or its arena registered) by the worker, off the loop; its
    // bytes, and a place among the session's pending submissions, are
    // taken meanwhile.
    halod_alloca_call_t *alloca = calloc(1, sizeof(*alloca));
    halo_status_t status =
        alloca ? NULL : halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    if (!status && op->memory_type == HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE) {
      halo_hal_device_t *device = NULL;
      status = halod_buffer_reserve(daemon, session, queue->device, op->size,
                                    &device);
    } else if (!status) {
      status =
          halod_buffer_arena_open(daemon, session, queue->device, op->size,
                                  false, &alloca->arena, &alloca->registration);
    }
    if (status) {
      free(alloca);
      halod_submission_free(submission);
      return halo_status_annotate(status, "queue_alloca");
    }
    alloca->call.device = caller;
    alloca->call.work = halod_submission_alloca_work;
    alloca->call.done = halod_submission_alloca_done;
    alloca->call.what = "a queue_alloca's allocation";
    alloca->session_id = session->id;
    alloca->submission = submission;
    halod_queue_retain(queue);
    alloca->queue = queue;
    alloca->memory_type = op->memory_type;
    alloca->size = op->size;
    ++session->pending_submissions;
    *out_call = alloca;
    return NULL;
  }
  // Everything else checked: allocate (memory type, size and quota are
  // checked there, with the messages buffer create gives).
  halod_buffer_t *buffer = NULL;
  halo_status_t status =
      halod_buffer_create(daemon, session, queue->device, op->memory_type,
                          op->size, false, &buffer);
  uint64_t handle = 0;
  if (!status) {
    status = halod_session_add_buffer(daemon, session, buffer, &handle);
  }
  if (status) {
    halod_submission_free(submission);
    return halo_status_annotate(status, "queue_alloca");
  }
  submission->buffer_id = buffer->id;
  *out_buffer = buffer;
  *out_handle = handle;
  // May complete (and retire) the submission before returning.
  halod_submission_accept(daemon, session, submission, queue, out_id);
  return NULL;
}

halo_status_t halod_submission_create_dealloca(halod_t *daemon,
                                               halod_session_t *session,
                                               const halod_op_dealloca_t *op,
                                               uint64_t *out_id) {
  *out_id = 0;
  HALO_RETURN_IF_ERROR(halod_submission_check_quota(daemon, session));
  halod_queue_t *queue;
  HALO_RETURN_IF_ERROR(
      halod_submission_named_queue(session, op->queue, &queue));
  void *object;
  halo_status_t status = halod_handle_table_lookup(
      &session->handles, op->buffer, HALOD_OBJECT_BUFFER, &object);
  if (status) return halo_status_annotate(status, "queue_dealloca");
  halod_buffer_t *buffer = object;
  if (buffer->exportable) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "queue_dealloca: buffer handle 0x%llx is "
                            "exportable (other sessions may hold it): "
                            "release it instead",
                            (unsigned long long)op->buffer);
  }
  halod_submission_t *submission;
  HALO_RETURN_IF_ERROR(
      halod_submission_create_host(daemon, session, HALOD_SUBMISSION_DEALLOCA,
                                   queue, &op->sync, &submission));
  submission->buffers = calloc(1, sizeof(*submission->buffers));
  if (!submission->buffers) {
    halod_submission_free(submission);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  // The handle goes now; its reference is the submission's.
  status = halod_session_remove_buffer(daemon, session, op->buffer, &buffer);
  if (status) {  // looked up above: cannot fail
    halod_submission_free(submission);
    return status;
  }
  submission->buffers[submission->buffer_count++] = buffer;
  submission->buffer_id = buffer->id;
  halod_submission_accept(daemon, session, submission, queue, out_id);
  return NULL;
}

void halod_submission_cancel_session(halod_t *daemon,
                                     halod_session_t *session) {
  (void)daemon;
  // Cancelling a submission fails its signals, which retires (and frees)
  // every waiting submission that waits on them, this session's included,
  // wherever it sits in the list. Only waiting submissions retire that way:
  // the cursor is the last issued one passed (or the head), never a pointer
  // kept across a cancel.
  halod_submission_t *issued = NULL;
  for (;;) {
    halod_submission_t *submission = HALO_LIST_ENTRY(
        issued ? issued->session_link.next : session->submissions.head,
        halod_submission_t, session_link);
    if (!submission) break;
    if (submission->action.state != HALO_HAL_ACTION_WAITING) {
      issued = submission;
      continue;
    }
    halo_hal_deferred_queue_cancel(
        &submission->action,
        halo_status_make(HALO_STATUS_ABORTED,
                         "submission %llu was cancelled: its session "
                         "(%llu, pid %u) ended",
                         (unsigned long long)submission->id,
                         (unsigned long long)session->id, session->pid));
  }
}

void halod_submission_for_each_issued(halod_t *daemon,
                                      const halo_hal_device_t *device,
                                      halod_submission_visit_fn visit,
                                      void *user_data) {
  for (size_t i = 0; i < daemon->sessions.by_id.capacity; ++i) {
    if (!daemon->sessions.by_id.entries[i].key) continue;
    halod_session_t *session = daemon->sessions.by_id.entries[i].value;
    for (halo_list_link_t *link = session->submissions.head; link;
         link = link->next) {
      halod_submission_t *submission =
          HALO_LIST_ENTRY(link, halod_submission_t, session_link);
      if (submission->action.state == HALO_HAL_ACTION_ISSUED &&
          submission->queue && submission->queue->hal_device == device) {
        visit(user_data, session, submission);
      }
    }
  }
}

typedef struct halod_submission_text_t {
  char *text;
  size_t size;
  size_t used;
  uint32_t count;
  uint32_t limit;
} halod_submission_text_t;

static void halod_submission_describe_one(void *user_data,
                                          halod_session_t *session,
                                          halod_submission_t *submission) {
  halod_submission_text_t *text = user_data;
  if (text->count++ >= text->limit || text->used >= text->size) return;
  int written =
      snprintf(text->text + text->used, text->size - text->used,
               "%s%llu (session %llu, pid %u, command buffer %llu)",
               text->count > 1 ? ", " : "", (unsigned long long)submission->id,
               (unsigned long long)session->id, session->pid,
               submission->command_buffer
                   ? (unsigned long long)submission->command_buffer->id
                   : 0ull);
  if (written > 0) text->used += (size_t)written;
}

uint32_t halod_submission_describe_issued(halod_t *daemon,
                                          const halo_hal_device_t *device,
                                          char *text, size_t size,
                                          uint32_t limit) {
  halod_submission_text_t state = {.text = text, .size = size, .limit = limit};
  text[0] = '\0';
  halod_submission_for_each_issued(daemon, device,
                                   halod_submission_describe_one, &state);
  if (state.count > limit && state.used < size) {
    snprintf(text + state.used, size - state.used, " and %u more",
             state.count - limit);
  }
  if (state.count == 0) snprintf(text, size, "none");
  return state.count;
}
