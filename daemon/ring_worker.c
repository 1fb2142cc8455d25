// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/ring_worker.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/buffer.h"
#include "daemon/command_buffer.h"
#include "daemon/queue.h"
#include "daemon/ring.h"
#include "daemon/semaphore.h"
#include "daemon/session.h"
#include "daemon/trust_domain.h"
#include "hal/remote/remote_device.h"
#include "hal/remote/remote_link.h"

// A reference the supervisor holds for a worker (until RING_RELEASED).
typedef struct halod_ring_grant_t {
  uint64_t id;
  uint32_t type;  // halod_object_type_t
  void *object;
  // A buffer's: the session whose import charge it holds (0: none;
  // halod_session_hold_import).
  uint64_t held_by;
  halo_hal_device_t *worker;  // compared only
} halod_ring_grant_t;

// A message from a worker, on its way to the loop.
typedef struct halod_ring_message_t {
  struct halod_ring_message_t *next;
  halo_hal_device_t *worker;  // compared only
  uint32_t type;
  void *payload;
  uint64_t length;
} halod_ring_message_t;

struct halod_ring_workers_t {
  halod_t *daemon;
  halo_u64_map_t grants;  // id -> halod_ring_grant_t
  // The workers that hold grants: worker (its address) ->
  // halod_ring_holder_t.
  halo_u64_map_t holders;
  uint64_t next_grant;
  uint64_t executions;  // completed or failed, reported by workers
  // Executions in the holders' |seen| maps, all of them (0: a report need
  // not look).
  uint64_t seen;
  uv_async_t async;
  pthread_mutex_t mutex;  // the inbox
  halod_ring_message_t *inbox_head;
  halod_ring_message_t *inbox_tail;
  bool closed;  // stop: messages are dropped
};

static void halod_ring_grant_release(halod_ring_workers_t *workers,
                                     halod_ring_grant_t *grant) {
  if (grant->held_by) {
    halod_session_drop_import(workers->daemon, grant->held_by, grant->object);
  }
  halod_object_release(workers->daemon, grant->type, grant->object);
  free(grant);
}

// A worker that holds grants.
typedef struct halod_ring_holder_t {
  uint64_t grants;  // how many
  uint32_t device;  // the device it serves (halod's index)
  // The executions it took from rings that halod saw in its flight table
  // (halod_ring_holder_sync) and whose completion did not reach halod yet:
  // id -> the queue (held) on which each counts as ring_taken.
  halo_u64_map_t seen;
  // The sequence number of its last RING_COMPLETE report halod applied
  // (halo_remote_ring_complete_t |report|; 0: none yet). Its flight table
  // may still name an execution whose report was applied (the worker
  // clears an entry after the send): one whose entry names a report at or
  // before this one is not taken again.
  uint32_t reports_applied;
} halod_ring_holder_t;

// Whether |holder|'s worker's report |report| (0: none sent yet) was
// applied. The numbers wrap (and skip 0), and an entry's report is never
// 2^31 or more behind the last applied; a holder that applied none yet
// (made after the worker sent billions, say) has applied none of those its
// worker's table names (the worker frees an entry before it sends the
// release of the grants that held the last holder).
static bool halod_ring_report_applied(const halod_ring_holder_t *holder,
                                      uint32_t report) {
  return report != 0 && holder->reports_applied != 0 &&
         (int32_t)(report - holder->reports_applied) <= 0;
}

// Takes the execution |id| out of |holder|'s seen ones and out of its
// queue's ring_taken; returns the queue (held: the caller counts the
// execution there, then releases it), or NULL if halod had not seen it.
static halod_queue_t *halod_ring_seen_take(halod_ring_workers_t *workers,
                                           halod_ring_holder_t *holder,
                                           uint64_t id) {
  if (!holder || holder->seen.count == 0) return NULL;
  halod_queue_t *queue = halo_u64_map_remove(&holder->seen, id);
  if (!queue) return NULL;
  --workers->seen;
  --queue->ring_taken;
  return queue;
}

// Every execution |holder| still has seen counts as failed (none should be
// left: the worker reports an execution before it releases the grants it
// used, and a lost worker's are settled from its flight table); frees it.
static void halod_ring_holder_free(halod_ring_workers_t *workers,
                                   halod_ring_holder_t *holder) {
  for (size_t i = 0; i < holder->seen.capacity; ++i) {
    if (!holder->seen.entries[i].key) continue;
    halod_queue_t *queue = holder->seen.entries[i].value;
    --workers->seen;
    --queue->ring_taken;
    ++queue->failed;
    halod_queue_release(workers->daemon, queue);
  }
  halo_u64_map_deinitialize(&holder->seen);
  free(holder);
}

// Counts one more grant of |worker|, a worker of |device|.
static halo_status_t halod_ring_holder_add(halod_ring_workers_t *workers,
                                           const halo_hal_device_t *worker,
                                           uint32_t device) {
  uint64_t key = (uint64_t)(uintptr_t)worker;
  halod_ring_holder_t *holder = halo_u64_map_get(&workers->holders, key);
  if (holder) {
    ++holder->grants;
    return NULL;
  }
  holder = calloc(1, sizeof(*holder));
  if (!holder) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  holder->grants = 1;
  holder->device = device;
  halo_u64_map_initialize(&holder->seen);
  halo_status_t status = halo_u64_map_put(&workers->holders, key, holder);
  if (status) halod_ring_holder_free(workers, holder);
  return status;
}

// Counts one grant of |worker| less.
static void halod_ring_holder_remove(halod_ring_workers_t *workers,
                                     const halo_hal_device_t *worker) {
  uint64_t key = (uint64_t)(uintptr_t)worker;
  halod_ring_holder_t *holder = halo_u64_map_get(&workers->holders, key);
  if (holder && --holder->grants == 0) {
    halo_u64_map_remove(&workers->holders, key);
    halod_ring_holder_free(workers, holder);
  }
}

// |grant| leaves the table (the worker released it, or is gone): halod's
// reference on its object goes.
static void halod_ring_grant_drop(halod_ring_workers_t *workers,
                                  halod_ring_grant_t *grant) {
  halo_u64_map_remove(&workers->grants, grant->id);
  halod_ring_holder_remove(workers, grant->worker);
  halod_ring_grant_release(workers, grant);
}

// ---------------------------------------------------------------- grants

static uint32_t halod_ring_grant_kind(uint32_t type) {
  switch (type) {
    case HALOD_OBJECT_QUEUE:
      return HALO_REMOTE_GRANT_QUEUE;
    case HALOD_OBJECT_COMMAND_BUFFER:
      return HALO_REMOTE_GRANT_COMMAND_BUFFER;
    case HALOD_OBJECT_BUFFER:
      return HALO_REMOTE_GRANT_BUFFER;
    default:
      return HALO_REMOTE_GRANT_SEMAPHORE;
  }
}

static void halod_ring_object_retain(uint32_t type, void *object) {
  switch (type) {
    case HALOD_OBJECT_QUEUE:
      halod_queue_retain(object);
      break;
    case HALOD_OBJECT_COMMAND_BUFFER:
      halod_command_buffer_retain(object);
      break;
    case HALOD_OBJECT_BUFFER:
      halod_buffer_retain(object);
      break;
    default:
      halod_semaphore_retain(object);
      break;
  }
}

// The key of |handle| in a ring's |granted| map (0, the default queue, is
// no map key; no handle is all ones: its type byte would be 0xff).
static uint64_t halod_ring_granted_key(uint64_t handle) {
  return handle ? handle : UINT64_MAX;
}

void halod_ring_workers_revoke_all(halo_hal_device_t *worker,
                                   halo_u64_map_t *granted, uint64_t session) {
  // The kind is only checked by the worker against the grant it has: the
  // default queue's key is the only non-handle, and handles carry their
  // type (daemon/handle_table.h: bits 39..32).
  for (size_t i = 0; i < granted->capacity; ++i) {
    uint64_t key = granted->entries[i].key;
    if (!key) continue;
    uint64_t handle = key == UINT64_MAX ? 0 : key;
    uint32_t type =
        handle ? (uint32_t)((handle >> 32) & 0xff) : HALOD_OBJECT_QUEUE;
    halo_remote_ring_revoke_t revoke = {.session = session,
                                        .handle = handle,
                                        .kind = halod_ring_grant_kind(type)};
    halo_status_free(halo_hal_remote_device_send(
        worker, HALO_REMOTE_RING_REVOKE, &revoke, sizeof(revoke), NULL, 0, -1));
  }
  halo_u64_map_deinitialize(granted);
  halo_u64_map_initialize(granted);
}

// Sends one grant of |handle| (|message| filled but for ids) with |tail|
// (a command buffer's slots) to |worker|, the worker of |device|, holding a
// reference on |object|.
static void halod_ring_grant_send(halod_t *daemon, halod_session_t *session,
                                  halo_hal_device_t *worker, uint32_t device,
                                  halo_u64_map_t *granted, uint32_t type,
                                  void *object,
                                  halo_remote_ring_grant_t *message,
                                  const void *tail, size_t tail_length) {
  halod_ring_workers_t *workers = daemon->work.ring_workers;
  halod_ring_grant_t *grant = calloc(1, sizeof(*grant));
  if (!grant) return;  // not granted: the worker bounces such records
  grant->id = ++workers->next_grant;
  grant->type = type;
  grant->object = object;
  grant->worker = worker;
  halo_status_t status = halod_ring_holder_add(workers, worker, device);
  if (!status) {
    status = halo_u64_map_put(&workers->grants, grant->id, grant);
    if (status) halod_ring_holder_remove(workers, worker);
  }
  if (!status) {
    status = halo_u64_map_put(granted, halod_ring_granted_key(message->handle),
                              (void *)(uintptr_t)grant->id);
    if (status) {
      halo_u64_map_remove(&workers->grants, grant->id);
      halod_ring_holder_remove(workers, worker);
    }
  }
  if (status) {
    halo_status_free(status);
    free(grant);
    return;
  }
  halod_ring_object_retain(type, object);
  if (type == HALOD_OBJECT_BUFFER) {
    // The worker's executions may use it after the handle goes: it stays
    // charged to the session until the grant is released.
    halod_session_hold_import(session, object);
    grant->held_by = session->id;
  }
  message->session = session->id;
  message->grant = grant->id;
  message->kind = halod_ring_grant_kind(type);
  status = halo_hal_remote_device_send(worker, HALO_REMOTE_RING_GRANT, message,
                                       sizeof(*message), tail, tail_length, -1);
  if (status) {
    // The worker is gone: its loss releases the grant.
    HALO_LOG_DEBUG("ring grant: %s", halo_status_message(status));
    halo_status_free(status);
  }
}

static bool halod_ring_granted(const halo_u64_map_t *granted, uint64_t handle) {
  return halo_u64_map_get(granted, halod_ring_granted_key(handle)) != NULL;
}

void halod_ring_workers_revoke(halo_hal_device_t *worker,
                               halo_u64_map_t *granted, uint64_t session,
                               uint64_t handle, uint32_t type) {
  if (!halo_u64_map_remove(granted, halod_ring_granted_key(handle))) return;
  halo_remote_ring_revoke_t revoke = {.session = session,
                                      .handle = handle,
                                      .kind = halod_ring_grant_kind(type)};
  halo_status_free(halo_hal_remote_device_send(
      worker, HALO_REMOTE_RING_REVOKE, &revoke, sizeof(revoke), NULL, 0, -1));
}

static void halod_ring_grant_semaphore(
    halod_t *daemon, halod_session_t *session, halo_hal_device_t *worker,
    halo_u64_map_t *granted, const halod_queue_t *queue, uint64_t handle) {
  if (halod_ring_granted(granted, handle)) return;
  void *object;
  halo_status_t status = halod_handle_table_lookup(
      &session->handles, handle, HALOD_OBJECT_SEMAPHORE, &object);
  if (status) {
    halo_status_free(status);
    return;
  }
  halod_semaphore_t *semaphore = object;
  halo_remote_ring_grant_t message = {.handle = handle};
  if (!halo_hal_remote_device_locate_slot(worker, semaphore->hal.slot,
                                          &message.object, &message.size)) {
    return;  // another domain's page: stays with the supervisor
  }
  message.device_address =
      halod_semaphore_device_address(semaphore, worker, queue->device);
  halod_ring_grant_send(daemon, session, worker, queue->device, granted,
                        HALOD_OBJECT_SEMAPHORE, semaphore, &message, NULL, 0);
}

void halod_ring_workers_grant(halod_t *daemon, halod_session_t *session,
                              halo_hal_device_t *worker,
                              halo_u64_map_t *granted,
                              const halod_op_execute_t *op) {
  // Resolved as the accepted execute was: these lookups cannot fail.
  void *object;
  halo_status_t status =
      halod_handle_table_lookup(&session->handles, op->command_buffer,
                                HALOD_OBJECT_COMMAND_BUFFER, &object);
  if (status) {
    halo_status_free(status);
    return;
  }
  halod_command_buffer_t *command_buffer = object;
  halod_memo_entry_t *entry = command_buffer->entry;
  halod_queue_t *queue = NULL;
  if (op->queue) {
    status = halod_handle_table_lookup(&session->handles, op->queue,
                                       HALOD_OBJECT_QUEUE, &object);
    if (status) {
      halo_status_free(status);
      return;
    }
    queue = object;
  } else {
    queue = session->default_queues[entry->device];
  }
  if (!queue || queue->hal_device != worker) return;
  if (!halod_ring_granted(granted, op->queue)) {
    halo_remote_ring_grant_t message = {
        .handle = op->queue, .object = halo_hal_remote_queue_id(queue->hal)};
    if (!message.object) return;
    halod_ring_grant_send(daemon, session, worker, queue->device, granted,
                          HALOD_OBJECT_QUEUE, queue, &message, NULL, 0);
  }
  if (entry->flags != HALO_HAL_RECORDING_ONE_SHOT &&
      !halod_ring_granted(granted, op->command_buffer)) {
    halo_remote_ring_grant_t message = {
        .handle = op->command_buffer,
        .binding_capacity = entry->binding_capacity,
        .object = halo_hal_remote_command_buffer_id(entry->hal),
    };
    halo_remote_ring_slot_t *slots =
        calloc(entry->binding_capacity + 1, sizeof(*slots));
    if (message.object && slots) {
      for (uint32_t i = 0; i < entry->binding_capacity; ++i) {
        slots[i].min_length = entry->slots[i].min_length;
        slots[i].alignment = entry->slots[i].alignment;
        slots[i].used = entry->slots[i].used;
      }
      halod_ring_grant_send(daemon, session, worker, queue->device, granted,
                            HALOD_OBJECT_COMMAND_BUFFER, command_buffer,
                            &message, slots,
                            entry->binding_capacity * sizeof(*slots));
    }
    free(slots);
  }
  for (uint32_t i = 0; i < op->binding_count; ++i) {
    uint64_t handle = op->bindings[i].buffer;
    if (!handle || halod_ring_granted(granted, handle)) continue;
    status = halod_handle_table_lookup(&session->handles, handle,
                                       HALOD_OBJECT_BUFFER, &object);
    if (status) {
      halo_status_free(status);
      continue;
    }
    halod_buffer_t *buffer = object;
    halo_remote_ring_grant_t message = {.handle = handle, .size = buffer->size};
    status = halod_buffer_device_address(buffer, worker, queue->device,
                                         &message.object);
    if (status) {
      halo_status_free(status);
      continue;
    }
    halod_ring_grant_send(daemon, session, worker, queue->device, granted,
                          HALOD_OBJECT_BUFFER, buffer, &message, NULL, 0);
  }
  for (uint32_t i = 0; i < op->sync.wait_count; ++i) {
    halod_ring_grant_semaphore(daemon, session, worker, granted, queue,
                               op->sync.waits[i].semaphore);
  }
  for (uint32_t i = 0; i < op->sync.signal_count; ++i) {
    halod_ring_grant_semaphore(daemon, session, worker, granted, queue,
                               op->sync.signals[i].semaphore);
  }
}

// ---------------------------------------------------------------- reports

static halod_ring_grant_t *halod_ring_grant_of(halod_ring_workers_t *workers,
                                               halo_hal_device_t *worker,
                                               uint64_t id, uint32_t type) {
  halod_ring_grant_t *grant = halo_u64_map_get(&workers->grants, id);
  return grant && grant->worker == worker && grant->type == type ? grant : NULL;
}

// One execution of a RING_COMPLETE: |values| (complete->signal_count of
// them) and the message follow it in the payload.
static void halod_ring_complete_one(halod_ring_workers_t *workers,
                                    halo_hal_device_t *worker,
                                    const halo_remote_ring_complete_t *complete,
                                    const uint8_t *values) {
  ++workers->executions;
  const char *message =
      (const char *)values +
      (uint64_t)complete->signal_count * sizeof(halo_remote_ring_value_t);
  halod_ring_grant_t *queue_grant = halod_ring_grant_of(
      workers, worker, complete->queue_grant, HALOD_OBJECT_QUEUE);
  // Counted as submitted since halod saw it taken, if it did: it moves to
  // completed or failed (the queue's submissions stay).
  halod_queue_t *seen = NULL;
  if (workers->seen) {
    halod_ring_holder_t *holder =
        halo_u64_map_get(&workers->holders, (uint64_t)(uintptr_t)worker);
    seen = halod_ring_seen_take(workers, holder, complete->id);
  }
  halod_queue_t *queue = queue_grant ? queue_grant->object : seen;
  if (queue) {
    if (complete->code == 0) {
      ++queue->completed;
      halod_queue_record_latency(workers->daemon, queue,
                                 complete->completed_ns - complete->issued_ns);
    } else {
      ++queue->failed;
    }
  }
  if (seen) halod_queue_release(workers->daemon, seen);
  halod_ring_grant_t *command_buffer_grant =
      halod_ring_grant_of(workers, worker, complete->command_buffer_grant,
                          HALOD_OBJECT_COMMAND_BUFFER);
  for (uint32_t i = 0; i < complete->signal_count; ++i) {
    halo_remote_ring_value_t value;
    memcpy(&value, values + i * sizeof(value), sizeof(value));
    halod_ring_grant_t *grant = halod_ring_grant_of(
        workers, worker, value.grant, HALOD_OBJECT_SEMAPHORE);
    if (!grant) continue;
    halod_semaphore_t *semaphore = grant->object;
    if (complete->code == 0) {
      // The worker woke the slot's sleepers when it saw the device's store
      // land; a value the device did not store (the CPU driver's, or a
      // signal without a device address) is stored and woken here.
      if (!halo_hal_semaphore_failure(&semaphore->hal)) {
        halo_hal_semaphore_signal_woken(&semaphore->hal, value.value);
      }
      continue;
    }
    halod_semaphore_fail(
        semaphore, (halo_status_code_t)complete->code,
        "execution %llu of command buffer %llu (session %llu, taken from its "
        "submission ring by the device worker) failed: %.*s",
        (unsigned long long)(complete->id & ~HALO_REMOTE_RING_ID_BIT),
        command_buffer_grant
            ? (unsigned long long)((halod_command_buffer_t *)
                                       command_buffer_grant->object)
                  ->id
            : 0ull,
        (unsigned long long)complete->session, (int)complete->message_length,
        message);
  }
}

// A RING_COMPLETE: one or more completions back to back. A malformed one
// ends the message (the ones before it count).
static void halod_ring_on_complete(halod_ring_workers_t *workers,
                                   halo_hal_device_t *worker,
                                   const uint8_t *payload, uint64_t length) {
  uint64_t offset = 0;
  uint32_t applied = 0;  // the last report applied (numbered in order)
  do {
    halo_remote_ring_complete_t complete;
    uint64_t left = length - offset;
    uint64_t size = sizeof(complete);
    if (left >= sizeof(complete)) {
      memcpy(&complete, payload + offset, sizeof(complete));
      size +=
          (uint64_t)complete.signal_count * sizeof(halo_remote_ring_value_t) +
          complete.message_length;
    }
    if (size > left) {
      HALO_LOG_ERROR(
          "a worker's ring completion at byte %llu of a RING_COMPLETE of "
          "%llu bytes is malformed: %llu bytes past the message's end",
          (unsigned long long)offset, (unsigned long long)length,
          (unsigned long long)(size - left));
      break;
    }
    halod_ring_complete_one(workers, worker, &complete,
                            payload + offset + sizeof(complete));
    applied = complete.report;
    offset += size;
  } while (offset < length);
  // Once for the message: nothing reads it between its reports.
  halod_ring_holder_t *holder =
      halo_u64_map_get(&workers->holders, (uint64_t)(uintptr_t)worker);
  if (holder && applied) holder->reports_applied = applied;
}

static void halod_ring_on_released(halod_ring_workers_t *workers,
                                   halo_hal_device_t *worker,
                                   const uint8_t *payload, uint64_t length) {
  for (uint64_t offset = 0; offset + sizeof(uint64_t) <= length;
       offset += sizeof(uint64_t)) {
    uint64_t id;
    memcpy(&id, payload + offset, sizeof(id));
    halod_ring_grant_t *grant = halo_u64_map_get(&workers->grants, id);
    if (grant && grant->worker == worker) halod_ring_grant_drop(workers, grant);
  }
  // What the grants held may have gone to the caches, or nothing holds the
  // domain any more: keep it or end it now.
  halod_domains_end_idle(workers->daemon);
}

// The session a message of |size| bytes names in its first field (every
// ring message's payload starts with the session id); NULL if it ended
// (its ring was detached) or the message is malformed.
static halod_session_t *halod_ring_message_session(
    const halod_ring_workers_t *workers, const uint8_t *payload,
    uint64_t length, size_t size, void *out_message) {
  if (length != size) return NULL;
  memcpy(out_message, payload, size);
  uint64_t session;
  memcpy(&session, payload, sizeof(session));
  return halo_u64_map_get(&workers->daemon->sessions.by_id, session);
}

static void halod_ring_on_bounce(halod_ring_workers_t *workers,
                                 halo_hal_device_t *worker,
                                 const uint8_t *payload, uint64_t length) {
  halo_remote_ring_position_t position;
  halod_session_t *session = halod_ring_message_session(
      workers, payload, length, sizeof(position), &position);
  if (session) {
    halod_ring_take_bounced(workers->daemon, session, worker, position.head,
                            position.sequence);
  }
}

// Takes every message queued so far (oldest first).
static halod_ring_message_t *halod_ring_inbox_take(
    halod_ring_workers_t *workers) {
  pthread_mutex_lock(&workers->mutex);
  halod_ring_message_t *message = workers->inbox_head;
  workers->inbox_head = workers->inbox_tail = NULL;
  pthread_mutex_unlock(&workers->mutex);
  return message;
}

static void halod_ring_on_refused(halod_ring_workers_t *workers,
                                  halo_hal_device_t *worker,
                                  const uint8_t *payload, uint64_t length) {
  halo_remote_ring_session_t refused;
  halod_session_t *session = halod_ring_message_session(
      workers, payload, length, sizeof(refused), &refused);
  if (session) halod_ring_take_back(session, worker);
}

// Handles every message the workers' readers queued so far.
static void halod_ring_workers_drain(halod_ring_workers_t *workers) {
  halod_ring_message_t *message = halod_ring_inbox_take(workers);
  while (message) {
    halod_ring_message_t *next = message->next;
    switch (message->type) {
      case HALO_REMOTE_RING_BOUNCE:
        halod_ring_on_bounce(workers, message->worker, message->payload,
                             message->length);
        break;
      case HALO_REMOTE_RING_COMPLETE:
        halod_ring_on_complete(workers, message->worker, message->payload,
                               message->length);
        break;
      case HALO_REMOTE_RING_REFUSED:
        halod_ring_on_refused(workers, message->worker, message->payload,
                              message->length);
        break;
      case HALO_REMOTE_RING_RELEASED:
        halod_ring_on_released(workers, message->worker, message->payload,
                               message->length);
        break;
    }
    free(message->payload);
    free(message);
    message = next;
  }
}

static void halod_ring_workers_on_async(uv_async_t *async) {
  halod_ring_workers_drain(async->data);
}

void halod_ring_workers_on_message(void *user_data, halo_hal_device_t *device,
                                   uint32_t type, void *payload,
                                   uint64_t length) {
  halod_t *daemon = user_data;
  // Set at start, before any worker takes a ring, and kept (closed) after
  // halod's stop while readers may still call in.
  halod_ring_workers_t *workers = daemon->work.ring_workers;
  halod_ring_message_t *message = calloc(1, sizeof(*message));
  if (!workers || !message) {
    // Lost: a completion's semaphores then fail with the session's loss
    // or halod's stop, a grant stays held until the worker goes.
    free(message);
    free(payload);
    return;
  }
  message->worker = device;
  message->type = type;
  message->payload = payload;
  message->length = length;
  pthread_mutex_lock(&workers->mutex);
  if (workers->closed) {
    pthread_mutex_unlock(&workers->mutex);
    free(payload);
    free(message);
    return;
  }
  if (workers->inbox_tail) {
    workers->inbox_tail->next = message;
  } else {
    workers->inbox_head = message;
  }
  workers->inbox_tail = message;
  uv_async_send(&workers->async);
  pthread_mutex_unlock(&workers->mutex);
}

// ---------------------------------------------------------------- flight

typedef struct halod_ring_sync_t {
  halod_ring_workers_t *workers;
  halo_hal_device_t *worker;
  halod_ring_holder_t *holder;
  bool count_running;  // in the queues' ring_in_flight
  uint32_t running;
} halod_ring_sync_t;

static void halod_ring_sync_entry(
    void *visit_data, uint64_t id,
    const struct halo_remote_flight_entry_t *entry) {
  halod_ring_sync_t *sync = visit_data;
  uint64_t queue_grant =
      atomic_load_explicit(&entry->queue_grant, memory_order_relaxed);
  bool running = halo_remote_flight_entry_running(entry);
  uint32_t report = atomic_load_explicit(&entry->report, memory_order_relaxed);
  // The worker frees an entry (its id 0) before it fills it again for
  // another execution (another id): what was read is |id|'s if its id is
  // still there.
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(&entry->id, memory_order_relaxed) != id) return;
  if (running) ++sync->running;
  halod_queue_t *queue = halo_u64_map_get(&sync->holder->seen, id);
  // Its report came already (the worker has not freed the entry yet): it
  // counted then, as completed or failed.
  if (!queue && halod_ring_report_applied(sync->holder, report)) return;
  if (!queue) {
    // Its queue grant is used until the execution is reported, so it is
    // there (a worker naming another is ignored).
    halod_ring_grant_t *grant = halod_ring_grant_of(
        sync->workers, sync->worker, queue_grant, HALOD_OBJECT_QUEUE);
    if (!grant) return;
    queue = grant->object;
    halo_status_t status = halo_u64_map_put(&sync->holder->seen, id, queue);
    if (status) {
      halo_status_free(status);  // counted when its report comes
      return;
    }
    halod_queue_retain(queue);
    ++sync->workers->seen;
    ++queue->ring_taken;
  }
  if (running && sync->count_running) ++queue->ring_in_flight;
}

// Counts the executions in |worker|'s flight table not seen before as
// taken on their queues (|holder|: the worker's), and if |count_running|
// those running in their queues' ring_in_flight; returns how many run.
static uint32_t halod_ring_holder_sync(halod_ring_workers_t *workers,
                                       halo_hal_device_t *worker,
                                       halod_ring_holder_t *holder,
                                       bool count_running) {
  halod_ring_sync_t sync = {.workers = workers,
                            .worker = worker,
                            .holder = holder,
                            .count_running = count_running};
  halo_hal_remote_device_visit_flight(worker, halod_ring_sync_entry, &sync);
  return sync.running;
}

// ---------------------------------------------------------------- loss

typedef struct halod_ring_flight_text_t {
  halod_t *daemon;
  halo_hal_device_t *device;
  halod_ring_holder_t *holder;  // the device's (NULL: it holds no grants)
  const char *reason;           // the worker's end
  char *text;
  size_t size;
  size_t used;
  uint32_t count;
} halod_ring_flight_text_t;

// A ring execution of a lost worker that completed, its RING_COMPLETE
// perhaps not sent: its outcome, as halod_ring_complete_one applies it
// (again, harmlessly, where the report came: a value reached stays
// reached, and a semaphore's first failure stands). Otherwise a semaphore
// no lost session created (an import) would keep a value halod never saw
// reached (its waits in halod would not fire), or would never fail. The
// workers' execution count is not moved; the queue's counts are the
// caller's (halod_ring_describe_flight).
static void halod_ring_complete_unreported(
    halod_ring_workers_t *workers, halo_hal_device_t *device, uint64_t id,
    const struct halo_remote_flight_entry_t *entry, uint32_t completed,
    const char *reason) {
  halo_status_code_t code =
      (halo_status_code_t)(completed & ~HALO_REMOTE_FLIGHT_COMPLETED);
  for (uint32_t i = 0;
       i < entry->signal_count && i < HALO_REMOTE_FLIGHT_SIGNALS; ++i) {
    halod_ring_grant_t *grant = halod_ring_grant_of(
        workers, device, entry->signal_grants[i], HALOD_OBJECT_SEMAPHORE);
    if (!grant) continue;
    halod_semaphore_t *semaphore = grant->object;
    if (code == HALO_STATUS_OK) {
      if (!halo_hal_semaphore_failure(&semaphore->hal)) {
        halo_hal_semaphore_signal_woken(&semaphore->hal,
                                        entry->signal_values[i]);
      }
      continue;
    }
    halod_semaphore_fail(
        semaphore, code,
        "ring execution %llu (session %llu) failed with %s in its device "
        "worker, which ended (%s) before it reported why",
        (unsigned long long)(id & ~HALO_REMOTE_RING_ID_BIT),
        (unsigned long long)entry->session, halo_status_code_name(code),
        reason);
  }
}

// One ring execution in flight on a lost worker: named in |text|, and all
// its signals (the worker takes no execution with more than the entry
// holds) fail now: with DEADLINE_EXCEEDED past the deadline, else (halod
// not stopping) with DEVICE_LOST and the worker's end. The session's loss
// fails the semaphores its session created too (the first failure wins).
// One that completed gets its own outcome instead
// (halod_ring_complete_unreported). Either way, one that halod saw taken
// and whose report did not come (halod_ring_workers_on_lost synced the
// table before it read the worker's last reports) counts on its queue as
// completed or failed, as its report would have.
static void halod_ring_describe_flight(
    void *visit_data, uint64_t id,
    const struct halo_remote_flight_entry_t *entry) {
  halod_ring_flight_text_t *text = visit_data;
  halod_t *daemon = text->daemon;
  halod_ring_workers_t *workers = daemon->work.ring_workers;
  uint32_t completed =
      atomic_load_explicit(&entry->completed, memory_order_acquire);
  halod_queue_t *seen = halod_ring_seen_take(workers, text->holder, id);
  if (seen) {
    // The grant holds the queue too: this release does not free it.
    if (completed == HALO_REMOTE_FLIGHT_COMPLETED) {
      ++seen->completed;
    } else {
      ++seen->failed;
    }
    halod_queue_release(daemon, seen);
  }
  if (completed & HALO_REMOTE_FLIGHT_COMPLETED) {
    halod_ring_complete_unreported(workers, text->device, id, entry, completed,
                                   text->reason);
    return;
  }
  uint64_t session_id = entry->session;
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions.by_id, session_id);
  halod_ring_grant_t *grant =
      halod_ring_grant_of(workers, text->device, entry->command_buffer_grant,
                          HALOD_OBJECT_COMMAND_BUFFER);
  uint64_t command_buffer =
      grant ? ((halod_command_buffer_t *)grant->object)->id : 0;
  bool overdue =
      halo_hal_remote_device_flight_overdue(text->device, entry->issued_ns);
  char what[128];
  snprintf(what, sizeof(what),
           "ring execution %llu of command buffer %llu (session %llu, pid %u)",
           (unsigned long long)(id & ~HALO_REMOTE_RING_ID_BIT),
           (unsigned long long)command_buffer, (unsigned long long)session_id,
           session ? session->pid : 0);
  for (uint32_t i = 0;
       i < entry->signal_count && i < HALO_REMOTE_FLIGHT_SIGNALS; ++i) {
    halod_ring_grant_t *signal = halod_ring_grant_of(
        workers, text->device, entry->signal_grants[i], HALOD_OBJECT_SEMAPHORE);
    if (!signal) continue;
    if (overdue) {
      halod_semaphore_fail(signal->object, HALO_STATUS_DEADLINE_EXCEEDED,
                           "%s ran past the submission deadline of %u ms "
                           "(submission-deadline-ms) on %s; the worker was "
                           "replaced and the domain's sessions are lost",
                           what, daemon->config.submission_deadline_ms,
                           text->reason);
    } else if (!daemon->stopping) {
      halod_semaphore_fail(signal->object, HALO_STATUS_DEVICE_LOST,
                           "%s was in flight on %s; the domain's sessions are "
                           "lost (reconnect and rebuild)",
                           what, text->reason);
    }
  }
  if (text->count++ < 32 && text->used < text->size) {
    int written = snprintf(
        text->text + text->used, text->size - text->used,
        "%sring execution %llu (session %llu, pid %u, command buffer %llu)",
        text->used ? ", " : "",
        (unsigned long long)(id & ~HALO_REMOTE_RING_ID_BIT),
        (unsigned long long)session_id, session ? session->pid : 0,
        (unsigned long long)command_buffer);
    if (written > 0) text->used += (size_t)written;
  }
}

uint32_t halod_ring_workers_on_lost(halod_t *daemon, halo_hal_device_t *device,
                                    const char *reason, char *text,
                                    size_t size) {
  halod_ring_workers_t *workers = daemon->work.ring_workers;
  halod_ring_flight_text_t flight = {.daemon = daemon,
                                     .device = device,
                                     .reason = reason,
                                     .text = text,
                                     .size = size};
  if (size) text[0] = '\0';
  if (!workers) return 0;
  // Every execution in its flight table counts as taken, so that the
  // reports below settle those they report and the visit the others
  // (without it, one the worker completed and had not reported yet would
  // count nowhere: its entry cannot tell whether its report came before).
  uint64_t key = (uint64_t)(uintptr_t)device;
  halod_ring_holder_t *holder = halo_u64_map_get(&workers->holders, key);
  if (holder && halo_hal_remote_device_is(device)) {
    halod_ring_holder_sync(workers, device, holder, false);
  }
  // What the worker reported before it ended comes first: its reader
  // queued those messages before it saw the link close, and the flight
  // table no longer names the executions they complete, nor will their
  // grants be there after this.
  halod_ring_workers_drain(workers);
  // The reports may have released grants (and the holder with its last).
  flight.holder = halo_u64_map_get(&workers->holders, key);
  if (halo_hal_remote_device_is(device)) {
    halo_hal_remote_device_visit_flight(device, halod_ring_describe_flight,
                                        &flight);
  }
  // The worker holds nothing any more. Collected first: removals may move
  // the map's entries.
  size_t count = 0;
  halod_ring_grant_t **gone =
      calloc(workers->grants.capacity + 1, sizeof(*gone));
  for (size_t i = 0; gone && i < workers->grants.capacity; ++i) {
    if (!workers->grants.entries[i].key) continue;
    halod_ring_grant_t *grant = workers->grants.entries[i].value;
    if (grant->worker == device) gone[count++] = grant;
  }
  for (size_t i = 0; i < count; ++i) halod_ring_grant_drop(workers, gone[i]);
  free(gone);
  return flight.count;
}

bool halod_ring_workers_hold(const halod_t *daemon,
                             const halo_hal_device_t *worker) {
  const halod_ring_workers_t *workers = daemon->work.ring_workers;
  return workers && halo_u64_map_get(&workers->holders,
                                     (uint64_t)(uintptr_t)worker) != NULL;
}

uint32_t halod_ring_workers_sync(halod_t *daemon, uint32_t *out_per_device) {
  if (out_per_device) {
    memset(out_per_device, 0, HALO_HAL_MAX_DEVICES * sizeof(*out_per_device));
  }
  for (halod_queue_t *queue = daemon->stats.queues; queue;
       queue = queue->all_next) {
    queue->ring_in_flight = 0;
  }
  halod_ring_workers_t *workers = daemon->work.ring_workers;
  if (!workers) return 0;
  uint32_t total = 0;
  for (size_t i = 0; i < workers->holders.capacity; ++i) {
    if (!workers->holders.entries[i].key) continue;
    halo_hal_device_t *worker =
        (halo_hal_device_t *)(uintptr_t)workers->holders.entries[i].key;
    halod_ring_holder_t *holder = workers->holders.entries[i].value;
    if (!halo_hal_remote_device_is(worker)) continue;
    uint32_t count = halod_ring_holder_sync(workers, worker, holder, true);
    total += count;
    if (out_per_device && holder->device < HALO_HAL_MAX_DEVICES) {
      out_per_device[holder->device] += count;
    }
  }
  return total;
}

uint64_t halod_ring_workers_executions(const halod_t *daemon) {
  return daemon->work.ring_workers ? daemon->work.ring_workers->executions : 0;
}

// ---------------------------------------------------------------- start

halo_status_t halod_ring_workers_start(halod_t *daemon) {
  halod_ring_workers_t *workers = calloc(1, sizeof(*workers));
  if (!workers) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  workers->daemon = daemon;
  halo_u64_map_initialize(&workers->grants);
  halo_u64_map_initialize(&workers->holders);
  pthread_mutex_init(&workers->mutex, NULL);
  uv_async_init(daemon->loop, &workers->async, halod_ring_workers_on_async);
  workers->async.data = workers;
  daemon->work.ring_workers = workers;
  return NULL;
}

static void halod_ring_workers_on_closed(uv_handle_t *handle) {
  halod_ring_workers_t *workers = handle->data;
  halod_ring_message_t *message = halod_ring_inbox_take(workers);
  while (message) {
    halod_ring_message_t *next = message->next;
    free(message->payload);
    free(message);
    message = next;
  }
  // Proxies' readers may still call in until their workers are reaped:
  // the instance stays (closed), its memory with the process.
}

void halod_ring_workers_stop(halod_t *daemon) {
  halod_ring_workers_t *workers = daemon->work.ring_workers;
  if (!workers) return;
  pthread_mutex_lock(&workers->mutex);
  workers->closed = true;
  pthread_mutex_unlock(&workers->mutex);
  for (size_t i = 0; i < workers->grants.capacity; ++i) {
    if (!workers->grants.entries[i].key) continue;
    halod_ring_grant_release(workers, workers->grants.entries[i].value);
  }
  halo_u64_map_deinitialize(&workers->grants);
  halo_u64_map_initialize(&workers->grants);
  for (size_t i = 0; i < workers->holders.capacity; ++i) {
    if (workers->holders.entries[i].key) {
      halod_ring_holder_free(workers, workers->holders.entries[i].value);
    }
  }
  halo_u64_map_deinitialize(&workers->holders);
  halo_u64_map_initialize(&workers->holders);
  uv_close((uv_handle_t *)&workers->async, halod_ring_workers_on_closed);
}
