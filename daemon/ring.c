// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/memfd.h"
#include "common/ring.h"
#include "common/status.h"
#include "daemon/buffer.h"
#include "daemon/command_buffer.h"
#include "daemon/device_call.h"
#include "daemon/operation.h"
#include "daemon/queue.h"
#include "daemon/ring_worker.h"
#include "daemon/session.h"
#include "daemon/submission.h"
#include "daemon/workers.h"
#include "hal/remote/remote_device.h"
#include "hal/remote/remote_link.h"

// Records one ring may yield per loop iteration before the next ring's
// turn: busy sessions are drained fairly.
#define HALOD_RING_BUDGET 16

struct halod_ring_t {
  halod_t *daemon;
  halod_session_t *session;
  halo_ring_header_t *header;
  uint8_t *records;  // header + HALO_RING_HEADER_BYTES
  uint64_t map_size;
  uint32_t capacity;                 // record bytes, a power of two
  uint8_t key[HALO_RING_KEY_BYTES];  // of the records' checksums
  int eventfd;
  uv_poll_t poll;
  // The daemon's own view: never read back from the shared header.
  uint64_t head;
  uint64_t sequence;
  bool broken;
  bool active;  // on the drain list
  int64_t last_work_ns;
  // The gaps before the last two pieces of work (halo_clock_gaps_spin_ns):
  // the poll window applies where either was within it.
  halo_clock_gaps_t gaps;
  halod_ring_t *next;  // drain list
  halod_ring_t *prev;
  uint64_t records_done;
  uint64_t records_rejected;
  uint64_t doorbells;
  // Handed to a device worker (ring-consumer = worker): it drains the ring
  // and bounces to halod the records it does not take (held; NULL while
  // halod drains it). |memfd| is kept until then.
  halo_hal_device_t *worker;
  int memfd;
  // After an accepted execute: the worker to hand the ring to, and the
  // operation to grant (its spans point into the record scratch, valid
  // until the next record).
  halo_hal_device_t *attach_to;
  bool granting;
  halod_op_execute_t accepted;
  halo_u64_map_t granted;  // handle -> grant id, what the worker holds
  bool taking_bounce;      // processing the record the worker bounced
  // While halod_ring_abandon reads the ring: every record is refused with
  // this code and reason instead of run (halod_ring_abandoned).
  const char *abandon_reason;
  halo_status_code_t abandon_code;
  // Its session was lost while its worker lives: the worker is asked where
  // it stopped (RING_DETACH as a call, off the loop: halod_ring_lose); the
  // ring waits for the answer, taking no bounce.
  bool detaching;
  // An ALLOCA record's allocation is a control call to a worker, made off
  // the loop: the head passes the record (|alloca_length| bytes) only with
  // its verdict, and no later record is taken (nor a worker draining the
  // ring resumed) until then. |alloca_started|: the record just processed
  // started it.
  bool alloca_waiting;
  bool alloca_started;
  uint32_t alloca_length;
};

typedef struct halod_rings_t {
  uv_idle_t idle;
  halod_ring_t *active;  // drain list
  // Scratch for one copied record: the operations point into it.
  _Alignas(16) uint8_t record[HALO_RING_MAX_RECORD_BYTES];
} halod_rings_t;

// A record's bindings and semaphore values are the operations' spans as
// they are (daemon/operation.h): no copy between the record and validation.
#define HALOD_RING_SAME_LAYOUT(ring_type, op_type, field)                \
  _Static_assert(offsetof(ring_type, field) == offsetof(op_type, field), \
                 #ring_type "." #field " moved")
_Static_assert(sizeof(halo_ring_binding_t) == sizeof(halod_op_binding_t),
               "ring binding and operation binding differ");
HALOD_RING_SAME_LAYOUT(halo_ring_binding_t, halod_op_binding_t, buffer);
HALOD_RING_SAME_LAYOUT(halo_ring_binding_t, halod_op_binding_t, offset);
HALOD_RING_SAME_LAYOUT(halo_ring_binding_t, halod_op_binding_t, length);
_Static_assert(sizeof(halo_ring_semaphore_value_t) == sizeof(halod_op_value_t),
               "ring semaphore value and operation value differ");
HALOD_RING_SAME_LAYOUT(halo_ring_semaphore_value_t, halod_op_value_t,
                       semaphore);
HALOD_RING_SAME_LAYOUT(halo_ring_semaphore_value_t, halod_op_value_t, value);

typedef enum halod_ring_step_e {
  HALOD_RING_EMPTY,
  HALOD_RING_PROGRESS,
  HALOD_RING_BROKEN,
} halod_ring_step_t;

static void halod_ring_unlink(halod_ring_t *ring, halod_ring_t **list) {
  if (ring->prev) {
    ring->prev->next = ring->next;
  } else {
    *list = ring->next;
  }
  if (ring->next) ring->next->prev = ring->prev;
  ring->next = ring->prev = NULL;
}

static void halod_ring_link(halod_ring_t *ring, halod_ring_t **list) {
  ring->prev = NULL;
  ring->next = *list;
  if (*list) (*list)->prev = ring;
  *list = ring;
}

static void halod_rings_on_idle(uv_idle_t *idle);

static void halod_ring_activate(halod_ring_t *ring) {
  halod_rings_t *rings = ring->daemon->work.rings;
  if (ring->active || ring->broken) return;
  ring->active = true;
  ring->last_work_ns = halo_clock_now_ns();
  halod_ring_link(ring, &rings->active);
  uv_idle_start(&rings->idle, halod_rings_on_idle);
}

static void halod_ring_deactivate(halod_ring_t *ring) {
  halod_rings_t *rings = ring->daemon->work.rings;
  if (ring->active) halod_ring_unlink(ring, &rings->active);
  ring->active = false;
}

// Records the rejection of record |sequence| in the header (release: before
// head passes the record) for the client that waits on it.
static void halod_ring_report(halod_ring_t *ring, uint64_t sequence,
                              halo_status_t status) {
  halo_ring_report_error(ring->header, sequence, status);
  ++ring->records_rejected;
}

// A framing error: the ring is read no more; the semaphores the session
// created fail with the reason so its waiters wake.
static halod_ring_step_t halod_ring_break(halod_ring_t *ring,
                                          const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static halod_ring_step_t halod_ring_break(halod_ring_t *ring,
                                          const char *format, ...) {
  char reason[200];
  va_list args;
  va_start(args, format);
  vsnprintf(reason, sizeof(reason), format, args);
  va_end(args);
  halod_t *daemon = ring->daemon;
  halod_session_t *session = ring->session;
  HALO_LOG_WARN("session %llu (pid %u): submission ring broken: %s",
                (unsigned long long)session->id, session->pid, reason);
  ring->broken = true;
  halod_ring_deactivate(ring);
  uv_poll_stop(&ring->poll);
  halo_status_t status =
      halo_status_make(HALO_STATUS_DATA_LOSS,
                       "the session's submission ring is broken: %s", reason);
  halod_ring_report(ring, ring->sequence, status);
  halo_status_free(status);
  atomic_fetch_or_explicit(&ring->header->flags, HALO_RING_FLAG_BROKEN,
                           memory_order_seq_cst);
  size_t count = 0;
  halod_semaphore_t **created =
      halod_semaphores_retain_all(daemon, session->id, &count);
  for (size_t i = 0; i < count; ++i) {
    halod_semaphore_fail(created[i], HALO_STATUS_DATA_LOSS,
                         "the submission ring of session %llu (pid %u) is "
                         "broken, its later records are lost: %s",
                         (unsigned long long)session->id, session->pid, reason);
  }
  halod_semaphores_release_all(daemon, created, count);
  return HALOD_RING_BROKEN;
}

// The refusal of a record read by halod_ring_abandon (NULL otherwise): in
// place of the operation it names, so that it is refused as any other
// record (an asynchronous one's signals fail).
static halo_status_t halod_ring_abandoned(const halod_ring_t *ring) {
  if (!ring->abandon_reason) return NULL;
  return halo_status_make(ring->abandon_code,
                          "published, not taken, when its session was lost: "
                          "%s",
                          ring->abandon_reason);
}

// A record (|what|: "queue_execute", "queue_dealloca") the daemon
// refused: the signal semaphores of an asynchronous one fail with the
// reason (there is no reply to carry it).
static void halod_ring_reject(halod_ring_t *ring, const char *what,
                              uint64_t sequence,
                              const halo_ring_semaphore_value_t *signals,
                              uint32_t signal_count, halo_status_t status) {
  halod_session_t *session = ring->session;
  for (uint32_t i = 0; i < signal_count; ++i) {
    void *object;
    halo_status_t lookup =
        halod_handle_table_lookup(&session->handles, signals[i].semaphore,
                                  HALOD_OBJECT_SEMAPHORE, &object);
    if (lookup) {
      halo_status_free(lookup);
      continue;
    }
    halod_semaphore_fail(object, halo_status_code(status),
                         "%s (submission ring record %llu) was rejected: %s",
                         what, (unsigned long long)sequence,
                         halo_status_message(status));
  }
  HALO_LOG_DEBUG("session %llu: ring record %llu: %s",
                 (unsigned long long)session->id, (unsigned long long)sequence,
                 halo_status_message(status));
  halod_ring_report(ring, sequence, status);
  halo_status_free(status);
}

// Copies the fixed part of a record's body (|body_bytes| after the record
// header) to |out_body|; false, the record rejected as |what|, when
// |length| is too short to hold it.
static bool halod_ring_read_body(halod_ring_t *ring, const char *what,
                                 uint64_t sequence, const uint8_t *record,
                                 uint32_t length, void *out_body,
                                 size_t body_bytes) {
  if (length < sizeof(halo_ring_record_header_t) + body_bytes) {
    halod_ring_reject(
        ring, what, sequence, NULL, 0,
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                         "%s record of %u bytes is too short", what, length));
    return false;
  }
  memcpy(out_body, record + sizeof(halo_ring_record_header_t), body_bytes);
  return true;
}

// The waits and signals that follow a record's body (the counts fit the
// record's length).
static halod_op_sync_t halod_ring_sync(
    const halo_ring_semaphore_value_t *values, uint32_t wait_count,
    uint32_t signal_count) {
  const halod_op_value_t *waits = (const halod_op_value_t *)values;
  return (halod_op_sync_t){.waits = waits,
                           .wait_count = wait_count,
                           .signals = waits + wait_count,
                           .signal_count = signal_count};
}

// Whether the ring goes (or went) to a device worker: ring-consumer =
// worker, and the accepted execute ran on a worker that is up.
static void halod_ring_after_execute(halod_ring_t *ring,
                                     const halod_op_execute_t *op) {
  halod_t *daemon = ring->daemon;
  if (ring->broken) return;
  if (!ring->worker) {
    if (strcmp(daemon->config.ring_consumer, "worker") != 0) return;
    halod_queue_t *queue = NULL;
    void *object;
    if (op->queue) {
      halo_status_t status = halod_handle_table_lookup(
          &ring->session->handles, op->queue, HALOD_OBJECT_QUEUE, &object);
      if (status) {
        halo_status_free(status);
        return;
      }
      queue = object;
    } else {
      halo_status_t status =
          halod_handle_table_lookup(&ring->session->handles, op->command_buffer,
                                    HALOD_OBJECT_COMMAND_BUFFER, &object);
      if (status) {
        halo_status_free(status);
        return;
      }
      queue = ring->session->default_queues[((halod_command_buffer_t *)object)
                                                ->entry->device];
    }
    if (!queue || !halo_hal_remote_device_is(queue->hal_device) ||
        !halo_hal_remote_device_is_ready(queue->hal_device) ||
        ring->memfd < 0) {
      return;
    }
    ring->attach_to = queue->hal_device;
  }
  ring->accepted = *op;
  ring->granting = true;
}

static void halod_ring_execute(halod_ring_t *ring, uint64_t sequence,
                               const uint8_t *record, uint32_t length) {
  halo_ring_execute_t execute;
  if (!halod_ring_read_body(ring, "queue_execute", sequence, record, length,
                            &execute, sizeof(execute))) {
    return;
  }
  const uint8_t *cursor =
      record + sizeof(halo_ring_record_header_t) + sizeof(halo_ring_execute_t);
  uint32_t expected = halo_ring_execute_length(
      execute.binding_count, execute.wait_count, execute.signal_count);
  if (expected == 0 || expected != length) {
    halod_ring_reject(
        ring, "queue_execute", sequence, NULL, 0,
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                         "queue_execute record of %u bytes does not hold "
                         "%u bindings, %u waits and %u signals",
                         length, execute.binding_count, execute.wait_count,
                         execute.signal_count));
    return;
  }
  const halo_ring_binding_t *bindings = (const halo_ring_binding_t *)cursor;
  const halo_ring_semaphore_value_t *waits =
      (const halo_ring_semaphore_value_t *)(cursor + execute.binding_count *
                                                         sizeof(*bindings));
  const halo_ring_semaphore_value_t *signals = waits + execute.wait_count;
  halod_op_execute_t op = {
      .queue = execute.queue,
      .command_buffer = execute.command_buffer,
      .bindings = (const halod_op_binding_t *)bindings,
      .binding_count = execute.binding_count,
      .sync = halod_ring_sync(waits, execute.wait_count, execute.signal_count),
  };
  uint64_t id;
  halo_status_t status = halod_ring_abandoned(ring);
  if (!status) status = halod_op_execute(ring->daemon, ring->session, &op, &id);
  if (!status) halod_ring_after_execute(ring, &op);
  if (status) {
    // A client waiting for the verdict reads it from the header; one that
    // does not learns it from the signal semaphores.
    bool async = execute.flags & HALO_RING_EXECUTE_ASYNC;
    halod_ring_reject(ring, "queue_execute", sequence, signals,
                      async ? execute.signal_count : 0, status);
  }
}

// An accepted ALLOCA record's verdict: the new buffer goes to the header's
// |alloca_result| (its sequence stored last).
static void halod_ring_alloca_result(halod_ring_t *ring, uint64_t sequence,
                                     const halod_buffer_t *buffer,
                                     uint64_t handle, uint64_t id) {
  halo_ring_header_t *header = ring->header;
  halo_ring_alloca_result_t result = {.handle = handle, .submission_id = id};
  if (buffer->arena) {
    result.arena_id = buffer->arena->id;
    result.arena_size = buffer->arena->size;
    result.offset = buffer->offset;
  }
  header->alloca_result = result;
  atomic_store_explicit(&header->result_sequence, sequence + 1,
                        memory_order_release);
}

static void halod_ring_drain(halod_ring_t *ring, int64_t now_ns);

// The loop: an ALLOCA record's allocation returned (daemon/submission.h):
// its verdict goes to the header, and the ring goes on (halod drains it
// again, or its worker is resumed after the record).
static void halod_ring_alloca_finish(halod_t *daemon, halod_alloca_call_t *call,
                                     halod_session_t *session,
                                     halo_status_t status,
                                     const halod_buffer_t *buffer,
                                     uint64_t handle, uint64_t id) {
  (void)daemon;
  halod_ring_t *ring = call->user_data;
  if (!session || session->ring != ring || !ring->alloca_waiting) {
    // The ring went with its session, or its loss: nobody reads a verdict.
    halo_status_free(status);
    return;
  }
  ring->alloca_waiting = false;
  if (session->lost_reason) {
    // Its loss refuses the record with what follows it.
    halo_status_free(status);
    return;
  }
  uint64_t sequence = call->user_value;
  if (status) {
    halod_ring_reject(ring, "queue_alloca", sequence, NULL, 0, status);
  } else {
    halod_ring_alloca_result(ring, sequence, buffer, handle, id);
  }
  // The head passes the record now that its verdict is there.
  ring->head += ring->alloca_length;
  ++ring->sequence;
  ++ring->records_done;
  atomic_store_explicit(&ring->header->head, ring->head, memory_order_release);
  if (ring->broken) return;
  if (ring->worker) {
    if (ring->detaching) return;  // asked where it stopped: no resume
    halo_remote_ring_position_t position = {
        .session = session->id, .head = ring->head, .sequence = ring->sequence};
    halo_status_free(
        halo_hal_remote_device_send(ring->worker, HALO_REMOTE_RING_RESUME,
                                    &position, sizeof(position), NULL, 0, -1));
    return;
  }
  // Records published meanwhile are taken now.
  halod_ring_activate(ring);
  halod_ring_drain(ring, halo_clock_now_ns());
}

// An ALLOCA record: always synchronous. The new buffer goes to the header's
// |alloca_result| (its sequence stored last), a refusal to |error_*|; an
// allocation by a worker comes later (halod_ring_alloca_finish).
static void halod_ring_alloca(halod_ring_t *ring, uint64_t sequence,
                              const uint8_t *record, uint32_t length) {
  halo_ring_alloca_t alloca;
  if (!halod_ring_read_body(ring, "queue_alloca", sequence, record, length,
                            &alloca, sizeof(alloca))) {
    return;
  }
  uint32_t expected = halo_ring_values_length(sizeof(alloca), alloca.wait_count,
                                              alloca.signal_count);
  if (expected == 0 || expected != length || alloca.flags != 0) {
    halod_ring_reject(ring, "queue_alloca", sequence, NULL, 0,
                      halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                       "queue_alloca record of %u bytes with "
                                       "%u waits, %u signals and flags 0x%x "
                                       "(none defined) is malformed",
                                       length, alloca.wait_count,
                                       alloca.signal_count, alloca.flags));
    return;
  }
  halod_op_alloca_t op = {
      .queue = alloca.queue,
      .size = alloca.size,
      .memory_type = alloca.memory_type,
      .sync = halod_ring_sync(
          (const halo_ring_semaphore_value_t
               *)(record + sizeof(halo_ring_record_header_t) + sizeof(alloca)),
          alloca.wait_count, alloca.signal_count),
  };
  halod_alloca_call_t *call = NULL;
  halod_buffer_t *buffer;
  uint64_t handle, id;
  halo_status_t status = halod_ring_abandoned(ring);
  if (!status) {
    status = halod_op_alloca(ring->daemon, ring->session, &op, &call, &buffer,
                             &handle, &id);
  }
  if (status) {
    halod_ring_reject(ring, "queue_alloca", sequence, NULL, 0, status);
    return;
  }
  if (call) {
    // Allocated by the worker, off the loop: the ring waits for the verdict.
    call->finish = halod_ring_alloca_finish;
    call->user_data = ring;
    call->user_value = sequence;
    ring->alloca_waiting = true;
    ring->alloca_started = true;
    halod_device_call_start(ring->daemon, NULL, NULL, &call->call);
    return;
  }
  halod_ring_alloca_result(ring, sequence, buffer, handle, id);
}

// A DEALLOCA record. A refused asynchronous one fails its signals and still
// drops the buffer's handle: its client no longer knows it.
static void halod_ring_dealloca(halod_ring_t *ring, uint64_t sequence,
                                const uint8_t *record, uint32_t length) {
  halo_ring_dealloca_t dealloca;
  if (!halod_ring_read_body(ring, "queue_dealloca", sequence, record, length,
                            &dealloca, sizeof(dealloca))) {
    return;
  }
  const halo_ring_semaphore_value_t *values =
      (const halo_ring_semaphore_value_t *)(record +
                                            sizeof(halo_ring_record_header_t) +
                                            sizeof(dealloca));
  uint32_t expected = halo_ring_values_length(
      sizeof(dealloca), dealloca.wait_count, dealloca.signal_count);
  bool async = dealloca.flags & HALO_RING_EXECUTE_ASYNC;
  halo_status_t status = NULL;
  if (expected == 0 || expected != length ||
      (dealloca.flags & ~HALO_RING_EXECUTE_ASYNC) || dealloca.reserved) {
    // The counts cannot be trusted: no signal is failed.
    status = halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "queue_dealloca record of %u bytes with %u "
                              "waits, %u signals and flags 0x%x is malformed",
                              length, dealloca.wait_count,
                              dealloca.signal_count, dealloca.flags);
    values = NULL;
  } else {
    halod_op_dealloca_t op = {
        .queue = dealloca.queue,
        .buffer = dealloca.buffer,
        .sync =
            halod_ring_sync(values, dealloca.wait_count, dealloca.signal_count),
    };
    uint64_t id;
    status = halod_ring_abandoned(ring);
    if (!status)
      status = halod_op_dealloca(ring->daemon, ring->session, &op, &id);
  }
  if (!status) return;
  if (async) {
    halo_status_free(halod_session_release_buffer(ring->daemon, ring->session,
                                                  dealloca.buffer));
  }
  halod_ring_reject(ring, "queue_dealloca", sequence,
                    values ? values + dealloca.wait_count : NULL,
                    values && async ? dealloca.signal_count : 0, status);
}

// Processes the verified copy |record| of record |sequence|, its length
// checked by the caller.
static void halod_ring_process(halod_ring_t *ring, uint64_t sequence,
                               const uint8_t *record) {
  halo_ring_record_header_t header;
  memcpy(&header, record, sizeof(header));
  switch (header.type) {
    case HALO_RING_RECORD_PAD:
      break;
    case HALO_RING_RECORD_EXECUTE:
      halod_ring_execute(ring, sequence, record, header.length);
      break;
    case HALO_RING_RECORD_ALLOCA:
      halod_ring_alloca(ring, sequence, record, header.length);
      break;
    case HALO_RING_RECORD_DEALLOCA:
      halod_ring_dealloca(ring, sequence, record, header.length);
      break;
    case HALO_RING_RECORD_SIGNAL: {
      halo_status_t status = NULL;
      if (header.length != HALO_RING_SIGNAL_LENGTH) {
        status = halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                  "signal record of %u bytes (%u expected)",
                                  header.length, HALO_RING_SIGNAL_LENGTH);
      } else {
        halod_op_value_t signal;
        memcpy(&signal, record + sizeof(header), sizeof(signal));
        status = halod_ring_abandoned(ring);
        if (!status) {
          status = halod_op_signal(ring->daemon, ring->session, &signal);
        }
      }
      // The client waits for this record and returns the status itself.
      if (status) {
        halod_ring_report(ring, sequence, status);
        halo_status_free(status);
      }
      break;
    }
    default: {
      halo_status_t status =
          halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                           "unknown ring record type %u", header.type);
      halod_ring_report(ring, sequence, status);
      halo_status_free(status);
      break;
    }
  }
}

// Record |sequence| (the copy |record|, its length checked) does not match
// its checksum: it changed between libhalo sealing it and the daemon
// copying it out, so another thread of the client wrote into the ring. It
// is rejected like any other record, not run: a synchronous one's verdict
// goes to the header; an asynchronous execute fails its signal semaphores,
// as far as the changed copy still names them (flags and signal list are
// read from it, because there is nothing else to read them from).
static void halod_ring_reject_changed(halod_ring_t *ring, uint64_t sequence,
                                      const uint8_t *record) {
  halo_ring_record_header_t header;
  memcpy(&header, record, sizeof(header));
  halo_status_t status = halo_status_make(
      HALO_STATUS_DATA_LOSS,
      "submission ring record %llu changed after it was written (its "
      "checksum does not match: another thread of the client wrote into the "
      "ring while libhalo published it); not run",
      (unsigned long long)sequence);
  if (header.type == HALO_RING_RECORD_DEALLOCA &&
      header.length >= sizeof(header) + sizeof(halo_ring_dealloca_t)) {
    // Its signals as the changed copy names them; its buffer handle is not
    // dropped (the copy may name another buffer): the session keeps it
    // until it ends.
    halo_ring_dealloca_t dealloca;
    memcpy(&dealloca, record + sizeof(header), sizeof(dealloca));
    uint32_t signal_count = 0;
    const halo_ring_semaphore_value_t *signals = NULL;
    if ((dealloca.flags & HALO_RING_EXECUTE_ASYNC) &&
        halo_ring_values_length(sizeof(dealloca), dealloca.wait_count,
                                dealloca.signal_count) == header.length) {
      signals = (const halo_ring_semaphore_value_t *)(record + sizeof(header) +
                                                      sizeof(dealloca)) +
                dealloca.wait_count;
      signal_count = dealloca.signal_count;
    }
    halod_ring_reject(ring, "queue_dealloca", sequence, signals, signal_count,
                      status);
    return;
  }
  if (header.type != HALO_RING_RECORD_EXECUTE ||
      header.length < sizeof(header) + sizeof(halo_ring_execute_t)) {
    HALO_LOG_DEBUG("session %llu: %s", (unsigned long long)ring->session->id,
                   halo_status_message(status));
    halod_ring_report(ring, sequence, status);
    halo_status_free(status);
    return;
  }
  halo_ring_execute_t execute;
  memcpy(&execute, record + sizeof(header), sizeof(execute));
  uint32_t signal_count = 0;
  const halo_ring_semaphore_value_t *signals = NULL;
  if ((execute.flags & HALO_RING_EXECUTE_ASYNC) &&
      halo_ring_execute_length(execute.binding_count, execute.wait_count,
                               execute.signal_count) == header.length) {
    const uint8_t *values = record + sizeof(header) + sizeof(execute) +
                            execute.binding_count * sizeof(halo_ring_binding_t);
    signals = (const halo_ring_semaphore_value_t *)values + execute.wait_count;
    signal_count = execute.signal_count;
  }
  halod_ring_reject(ring, "queue_execute", sequence, signals, signal_count,
                    status);
}

// Hands the ring to its worker (the first accepted execute that ran on
// one). Sends the ATTACH and the doorbell; false if the worker is gone (the
// ring stays with halod).
static bool halod_ring_attach(halod_ring_t *ring, halo_hal_device_t *worker) {
  halod_session_t *session = ring->session;
  halo_remote_ring_attach_t attach = {
      .session = session->id,
      .map_size = ring->map_size,
      .head = ring->head,
      .sequence = ring->sequence,
      .capacity = ring->capacity,
      .pending_limit = ring->daemon->config.session_pending,
  };
  _Static_assert(sizeof(attach.key) == HALO_RING_KEY_BYTES, "key size");
  memcpy(attach.key, ring->key, sizeof(attach.key));
  halo_status_t status =
      halo_hal_remote_device_send(worker, HALO_REMOTE_RING_ATTACH, &attach,
                                  sizeof(attach), NULL, 0, ring->memfd);
  if (!status) {
    halo_remote_ring_session_t doorbell = {.session = session->id};
    status = halo_hal_remote_device_send(worker, HALO_REMOTE_RING_DOORBELL,
                                         &doorbell, sizeof(doorbell), NULL, 0,
                                         ring->eventfd);
  }
  if (status) {
    HALO_LOG_DEBUG("session %llu: the ring stays with halod: %s",
                   (unsigned long long)session->id,
                   halo_status_message(status));
    halo_status_free(status);
    return false;
  }
  close(ring->memfd);
  ring->memfd = -1;
  halod_device_retain(worker);
  ring->worker = worker;
  halod_ring_deactivate(ring);
  uv_poll_stop(&ring->poll);
  HALO_LOG_DEBUG("session %llu: its ring is drained by its device worker",
                 (unsigned long long)session->id);
  return true;
}

// After a record: hands the ring over and grants the worker what an
// accepted execute used.
static void halod_ring_hand_over(halod_ring_t *ring) {
  bool granting = ring->granting;
  halo_hal_device_t *target = ring->attach_to;
  ring->granting = false;
  ring->attach_to = NULL;
  if (!granting || ring->broken) return;
  if (target && !ring->worker && !halod_ring_attach(ring, target)) return;
  if (ring->worker) {
    halod_ring_workers_grant(ring->daemon, ring->session, ring->worker,
                             &ring->granted, &ring->accepted);
  }
}

// Copies out and processes the record at the ring's head, if any.
static halod_ring_step_t halod_ring_step(halod_ring_t *ring) {
  if (ring->broken) return HALOD_RING_BROKEN;
  // An alloca's verdict first (its loss refuses what follows, though).
  if (ring->alloca_waiting && !ring->abandon_reason) return HALOD_RING_EMPTY;
  // A worker's ring: only the record it bounced (or, the worker lost, what
  // it left: halod_ring_abandon).
  if (ring->worker && !ring->taking_bounce && !ring->abandon_reason) {
    return HALOD_RING_EMPTY;
  }
  halo_ring_header_t *header = ring->header;
  uint64_t tail = atomic_load_explicit(&header->tail, memory_order_acquire);
  if (tail == ring->head) return HALOD_RING_EMPTY;
  if (tail < ring->head || tail - ring->head > ring->capacity ||
      tail % HALO_RING_RECORD_ALIGN) {
    return halod_ring_break(ring,
                            "tail %llu is out of bounds (head %llu, capacity "
                            "%u, records aligned to %u)",
                            (unsigned long long)tail,
                            (unsigned long long)ring->head, ring->capacity,
                            HALO_RING_RECORD_ALIGN);
  }
  uint32_t offset = (uint32_t)(ring->head & (ring->capacity - 1));
  uint64_t available = tail - ring->head;
  uint32_t contiguous = ring->capacity - offset;
  halo_ring_record_header_t record;
  memcpy(&record, ring->records + offset, sizeof(record));
  // Records carry the low 32 bits of their sequence; the daemon's own count
  // names them.
  uint64_t sequence = ring->sequence;
  if (record.sequence != (uint32_t)sequence) {
    return halod_ring_break(ring,
                            "record at byte %llu has sequence %u, expected "
                            "%u (record %llu; written after its tail was "
                            "published, or overwritten)",
                            (unsigned long long)ring->head, record.sequence,
                            (uint32_t)sequence, (unsigned long long)sequence);
  }
  if (record.length < sizeof(record) ||
      record.length % HALO_RING_RECORD_ALIGN ||
      record.length > HALO_RING_MAX_RECORD_BYTES ||
      record.length > contiguous || record.length > available) {
    return halod_ring_break(
        ring,
        "record %llu at byte %llu has length %u (at "
        "least %zu, a multiple of %u, at most %u, within "
        "the %u bytes to the ring's end and the %llu "
        "published)",
        (unsigned long long)sequence, (unsigned long long)ring->head,
        record.length, sizeof(record), HALO_RING_RECORD_ALIGN,
        HALO_RING_MAX_RECORD_BYTES, contiguous, (unsigned long long)available);
  }
  // A session at its pending quota is not stalled here: its execute is
  // refused with RESOURCE_EXHAUSTED by the shared path, as over the socket.
  // Leaving the record in the ring would block the signals queued behind
  // it, which may be what the pending work waits for: a deadlock.
  // From here on only the copy is read: the client may still write the
  // ring.
  // The copy's header is the one checked above (the client may have
  // changed the ring's since): a changed record then fails its checksum,
  // and nothing reads a length but the checked one.
  halod_rings_t *rings = ring->daemon->work.rings;
  memcpy(rings->record, ring->records + offset, record.length);
  memcpy(rings->record, &record, sizeof(record));
  ring->alloca_started = false;
  if (!halo_ring_record_verify(ring->key, rings->record)) {
    halod_ring_reject_changed(ring, sequence, rings->record);
  } else {
    halod_ring_process(ring, sequence, rings->record);
  }
  if (ring->alloca_started) {
    // Its allocation runs off the loop: the head passes the record with
    // its verdict (halod_ring_alloca_finish).
    ring->alloca_started = false;
    ring->alloca_length = record.length;
    return HALOD_RING_PROGRESS;
  }
  // Processing may have ended the ring (never the session: sessions end on
  // pipe events only).
  ring->head += record.length;
  ++ring->sequence;
  ++ring->records_done;
  atomic_store_explicit(&header->head, ring->head, memory_order_release);
  halod_ring_hand_over(ring);
  return HALOD_RING_PROGRESS;
}

// Empty after its polling window: ask for the doorbell, then look once
// more (the client fences between publishing its tail and reading the
// flag).
static bool halod_ring_try_sleep(halod_ring_t *ring) {
  halo_ring_header_t *header = ring->header;
  atomic_fetch_or_explicit(&header->flags, HALO_RING_FLAG_NEED_WAKEUP,
                           memory_order_seq_cst);
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&header->tail, memory_order_seq_cst) != ring->head) {
    atomic_fetch_and_explicit(&header->flags, ~HALO_RING_FLAG_NEED_WAKEUP,
                              memory_order_relaxed);
    return false;
  }
  return true;
}

static void halod_ring_drain(halod_ring_t *ring, int64_t now_ns) {
  halod_rings_t *rings = ring->daemon->work.rings;
  if (ring->worker) {
    halod_ring_deactivate(ring);
    return;
  }
  halod_ring_step_t step = HALOD_RING_EMPTY;
  int done = 0;
  while (done < HALOD_RING_BUDGET) {
    step = halod_ring_step(ring);
    if (step != HALOD_RING_PROGRESS) break;
    ++done;
  }
  if (done) {
    // The gap from the end of the ring's previous work (activation on a
    // doorbell does not move it) to this round.
    halo_clock_gaps_arrived(&ring->gaps, now_ns);
    ring->gaps.done_ns = halo_clock_now_ns();
    ring->last_work_ns = now_ns;
  }
  if (step != HALOD_RING_EMPTY || !ring->active) return;
  int64_t window = halo_clock_gaps_spin_ns(
      &ring->gaps, (int64_t)ring->daemon->config.ring_poll_us * 1000);
  if (now_ns - ring->last_work_ns >= window && halod_ring_try_sleep(ring)) {
    halod_ring_unlink(ring, &rings->active);
    ring->active = false;
  }
}

static void halod_rings_on_idle(uv_idle_t *idle) {
  halod_t *daemon = idle->data;
  halod_rings_t *rings = daemon->work.rings;
  int64_t now_ns = halo_clock_now_ns();
  halod_ring_t *ring = rings->active;
  while (ring) {
    halod_ring_t *next = ring->next;
    halod_ring_drain(ring, now_ns);
    ring = next;
  }
  if (!rings->active) uv_idle_stop(&rings->idle);
}

void halod_ring_take_bounced(halod_t *daemon, halod_session_t *session,
                             halo_hal_device_t *worker, uint64_t head,
                             uint64_t sequence) {
  (void)daemon;
  halod_ring_t *ring = session->ring;
  if (!ring || ring->worker != worker || ring->broken) return;
  // Lost, its worker asked where it stopped: the answer covers this record.
  if (ring->detaching) return;
  if (head < ring->head || head % HALO_RING_RECORD_ALIGN ||
      sequence < ring->sequence) {
    halod_ring_break(ring,
                     "the device worker bounced a record at byte %llu "
                     "(sequence %llu), before halod's last (%llu, %llu)",
                     (unsigned long long)head, (unsigned long long)sequence,
                     (unsigned long long)ring->head,
                     (unsigned long long)ring->sequence);
    return;
  }
  ring->head = head;
  ring->sequence = sequence;
  ring->taking_bounce = true;
  halod_ring_step(ring);
  ring->taking_bounce = false;
  // A ring that broke is read no more: the worker stays stopped until the
  // session's end detaches it. An alloca its worker allocates resumes it
  // once done (halod_ring_alloca_finish).
  if (ring->broken || ring->alloca_waiting) return;
  halo_remote_ring_position_t position = {
      .session = session->id, .head = ring->head, .sequence = ring->sequence};
  halo_status_free(halo_hal_remote_device_send(worker, HALO_REMOTE_RING_RESUME,
                                               &position, sizeof(position),
                                               NULL, 0, -1));
}

static void halod_ring_on_doorbell(uv_poll_t *poll, int status, int events);

void halod_ring_take_back(halod_session_t *session, halo_hal_device_t *worker) {
  halod_ring_t *ring = session->ring;
  if (!ring || ring->worker != worker) return;
  // Lost meanwhile: the detach's answer (NOT_FOUND) gives it back.
  if (ring->detaching) return;
  HALO_LOG_WARN(
      "session %llu: its device worker could not take its ring; "
      "halod drains it",
      (unsigned long long)session->id);
  // What was granted the worker released at once (it has no such session).
  halo_u64_map_deinitialize(&ring->granted);
  halo_u64_map_initialize(&ring->granted);
  ring->worker = NULL;
  halod_device_release(worker);
  if (ring->broken) return;
  uv_poll_start(&ring->poll, UV_READABLE, halod_ring_on_doorbell);
  halod_ring_activate(ring);
  halod_ring_drain(ring, halo_clock_now_ns());
}

void halod_ring_revoke(halod_session_t *session, uint64_t handle,
                       uint32_t type) {
  halod_ring_t *ring = session->ring;
  if (!ring || !ring->worker) return;
  halod_ring_workers_revoke(ring->worker, &ring->granted, session->id, handle,
                            type);
}

void halod_ring_revoke_all(halod_session_t *session) {
  halod_ring_t *ring = session->ring;
  if (!ring || !ring->worker) return;
  halod_ring_workers_revoke_all(ring->worker, &ring->granted, session->id);
}

static void halod_ring_on_doorbell(uv_poll_t *poll, int status, int events) {
  (void)events;
  halod_ring_t *ring = poll->data;
  uint64_t count;
  while (read(ring->eventfd, &count, sizeof(count)) == sizeof(count)) {
  }
  if (status < 0) return;
  ++ring->doorbells;
  atomic_fetch_and_explicit(&ring->header->flags, ~HALO_RING_FLAG_NEED_WAKEUP,
                            memory_order_seq_cst);
  if (ring->active) return;
  // Drain now rather than one loop iteration later.
  halod_ring_activate(ring);
  halod_ring_drain(ring, halo_clock_now_ns());
}

halo_status_t halod_rings_start(halod_t *daemon) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur < limit.rlim_max) {
    rlim_t before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
      HALO_LOG_DEBUG("RLIMIT_NOFILE raised from %llu to %llu",
                     (unsigned long long)before,
                     (unsigned long long)limit.rlim_cur);
    }
  }
  HALO_RETURN_IF_ERROR(halo_ring_library_initialize());
  halod_rings_t *rings = calloc(1, sizeof(*rings));
  if (!rings) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  uv_idle_init(daemon->loop, &rings->idle);
  rings->idle.data = daemon;
  daemon->work.rings = rings;
  return NULL;
}

static void halod_rings_on_closed(uv_handle_t *handle) {
  halod_t *daemon = handle->data;
  free(daemon->work.rings);
  daemon->work.rings = NULL;
}

void halod_rings_stop(halod_t *daemon) {
  halod_rings_t *rings = daemon->work.rings;
  if (!rings) return;
  uv_close((uv_handle_t *)&rings->idle, halod_rings_on_closed);
}

halo_status_t halod_ring_create(halod_t *daemon, halod_session_t *session,
                                int *out_memfd, uint64_t *out_size) {
  *out_memfd = -1;
  *out_size = 0;
  if (!daemon->work.rings) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE, "halod is stopping");
  }
  // A lost session's ring ended with its loss: nothing it would write into
  // a new one may run (the socket answers its requests SESSION_LOST too).
  if (session->lost_reason) {
    return halo_status_make(HALO_STATUS_SESSION_LOST, "%s",
                            session->lost_reason);
  }
  if (session->ring_handed_out) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "the session's submission ring was handed out "
                            "already (one per session)");
  }
  // ring-bytes as configured now (live: rings created after a reload get
  // the new size); config.c accepts only valid capacities.
  uint64_t capacity = daemon->config.ring_bytes;
  if (!halo_ring_capacity_valid(capacity)) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "ring-bytes %llu is not a ring capacity",
                            (unsigned long long)capacity);
  }
  halod_ring_t *ring = calloc(1, sizeof(*ring));
  if (!ring) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  ring->daemon = daemon;
  ring->session = session;
  ring->eventfd = -1;
  ring->memfd = -1;
  halo_u64_map_initialize(&ring->granted);
  ring->capacity = (uint32_t)capacity;
  halo_ring_key_generate(ring->key);
  ring->map_size = HALO_RING_HEADER_BYTES + capacity;
  int memfd = -1;
  void *pointer = NULL;
  halo_status_t status = halo_memfd_create("halo-ring", ring->map_size, &memfd);
  if (!status) status = halo_memfd_seal(memfd, HALO_SEALS_FIXED_SIZE);
  if (!status) {
    status =
        halo_memfd_map(memfd, ring->map_size, PROT_READ | PROT_WRITE, &pointer);
  }
  if (!status) {
    ring->eventfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ring->eventfd < 0) status = halo_status_from_errno(errno, "eventfd");
  }
  if (!status && uv_poll_init(daemon->loop, &ring->poll, ring->eventfd) != 0) {
    status = halo_status_make(HALO_STATUS_INTERNAL,
                              "cannot watch the ring's doorbell");
  }
  if (!status && halod_workers_enabled(daemon) &&
      strcmp(daemon->config.ring_consumer, "worker") == 0) {
    // Kept until the ring goes to a device worker (only the worker needs
    // it); a ring created under ring-consumer halod stays with halod.
    ring->memfd = fcntl(memfd, F_DUPFD_CLOEXEC, 0);
    if (ring->memfd < 0) status = halo_status_from_errno(errno, "dup");
  }
  if (status) {
    if (pointer) munmap(pointer, ring->map_size);
    if (memfd >= 0) close(memfd);
    if (ring->eventfd >= 0) close(ring->eventfd);
    if (ring->memfd >= 0) close(ring->memfd);
    halo_u64_map_deinitialize(&ring->granted);
    free(ring);
    return halo_status_annotate(status, "creating the submission ring");
  }
  ring->header = pointer;
  ring->records = (uint8_t *)pointer + HALO_RING_HEADER_BYTES;
  ring->header->magic = HALO_RING_MAGIC;
  ring->header->version = HALO_RING_VERSION;
  ring->header->capacity = ring->capacity;
  ring->header->max_record_bytes = HALO_RING_MAX_RECORD_BYTES;
  memcpy(ring->header->checksum_key, ring->key, sizeof(ring->key));
  // Idle from the start: the first record rings the doorbell.
  atomic_store(&ring->header->flags, HALO_RING_FLAG_NEED_WAKEUP);
  ring->poll.data = ring;
  uv_poll_start(&ring->poll, UV_READABLE, halod_ring_on_doorbell);
  session->ring = ring;
  session->ring_handed_out = true;
  *out_memfd = memfd;
  *out_size = ring->map_size;
  return NULL;
}

int halod_ring_doorbell(const halod_session_t *session) {
  return session->ring ? session->ring->eventfd : -1;
}

static void halod_ring_on_closed(uv_handle_t *handle) {
  halod_ring_t *ring = handle->data;
  close(ring->eventfd);
  if (ring->memfd >= 0) close(ring->memfd);
  halo_u64_map_deinitialize(&ring->granted);
  munmap(ring->header, ring->map_size);
  free(ring);
}

// |ring|'s session is lost while the worker draining the ring lives (a
// session of several devices, lost with another device's worker): the
// worker stopped reading it and said where (RING_DETACH as a call, made off
// the loop: halod_ring_lose), |status| (consumed) NULL with |head| and
// |sequence| after the last record it took, and the ring is halod's again
// from there, so that halod_ring_abandon refuses exactly the records the
// worker did not take. A live worker would otherwise take more until it saw
// the ring detached, and drop the rest with it: their signals would never
// come, nor fail. False if the worker could not say (it was lost or hung
// meanwhile) or said what cannot be; either way it reads the ring no more.
static bool halod_ring_detached(halod_ring_t *ring, halo_status_t status,
                                uint64_t head, uint64_t sequence) {
  halod_session_t *session = ring->session;
  if (halo_status_code(status) == HALO_STATUS_NOT_FOUND) {
    // It never held the ring (its refusal is on the way): it took nothing.
    halo_status_free(status);
    status = NULL;
    head = ring->head;
    sequence = ring->sequence;
  }
  if (status) {
    HALO_LOG_WARN(
        "session %llu (pid %u): the device worker draining its ring did not "
        "say where it stopped: %s",
        (unsigned long long)session->id, session->pid,
        halo_status_message(status));
    halo_status_free(status);
    return false;
  }
  // Between where halod last knew the head (it learns the worker's only at
  // a bounce, so a worker may have gone round the ring many times since)
  // and the tail the client published; each record it took is at least a
  // record header long.
  uint64_t tail =
      atomic_load_explicit(&ring->header->tail, memory_order_acquire);
  uint64_t bytes = head - ring->head;
  if (head < ring->head || head > tail || tail - head > ring->capacity ||
      head % HALO_RING_RECORD_ALIGN || sequence < ring->sequence ||
      sequence - ring->sequence > bytes / sizeof(halo_ring_record_header_t)) {
    HALO_LOG_WARN(
        "session %llu (pid %u): the device worker draining its ring says it "
        "stopped at byte %llu (record %llu), which it cannot have reached "
        "from byte %llu (record %llu)",
        (unsigned long long)session->id, session->pid, (unsigned long long)head,
        (unsigned long long)sequence, (unsigned long long)ring->head,
        (unsigned long long)ring->sequence);
    return false;
  }
  ring->head = head;
  ring->sequence = sequence;
  halod_device_release(ring->worker);
  ring->worker = NULL;
  return true;
}

// The lost session's records nobody took are read and refused with |code|
// and |reason|. A worker still set (lost, or it could not say where it
// stopped) stopped where it last stored the head.
static void halod_ring_abandon(halod_t *daemon, halod_session_t *session,
                               halo_status_code_t code, const char *reason) {
  halod_ring_t *ring = session->ring;
  if (!ring || ring->broken || !daemon->work.rings) return;
  if (ring->worker) {
    // A lost worker (or one that could not say where it stopped) stopped
    // where it last stored the head (halod stores it after each record it
    // bounced); its count of records is its own, which the record there
    // names. A client that wrote another head could only fail its own
    // semaphores, which it may anyway.
    uint64_t taken =
        atomic_load_explicit(&ring->header->head, memory_order_acquire);
    uint64_t tail =
        atomic_load_explicit(&ring->header->tail, memory_order_acquire);
    if (taken > ring->head && taken <= tail && tail - taken <= ring->capacity &&
        taken % HALO_RING_RECORD_ALIGN == 0) {
      halo_ring_record_header_t record;
      memcpy(&record, ring->records + (taken & (ring->capacity - 1)),
             sizeof(record));
      ring->sequence += (uint32_t)(record.sequence - (uint32_t)ring->sequence);
      ring->head = taken;
    }
  }
  uint64_t rejected = ring->records_rejected;
  // Only the records published by now, at most a ring's worth: the client
  // may go on writing its ring (a thread of it publishing record after
  // record as fast as they are read), which would keep the loop here, every
  // other session waiting, for as long as it liked. What it publishes
  // later is never read: the ring ends below.
  uint64_t published =
      atomic_load_explicit(&ring->header->tail, memory_order_acquire);
  uint64_t end =
      published >= ring->head && published - ring->head <= ring->capacity
          ? published
          : ring->head + ring->capacity;
  // An ALLOCA whose allocation is still out is refused with the rest (its
  // verdict, when it comes, finds the ring gone).
  ring->alloca_waiting = false;
  ring->abandon_code = code;
  ring->abandon_reason = reason;
  while (ring->head < end && halod_ring_step(ring) == HALOD_RING_PROGRESS) {
  }
  ring->abandon_reason = NULL;
  if (ring->records_rejected > rejected) {
    HALO_LOG_INFO(
        "session %llu (pid %u): %llu ring records not taken were refused "
        "with its loss",
        (unsigned long long)session->id, session->pid,
        (unsigned long long)(ring->records_rejected - rejected));
  }
}

// A lost session's RING_DETACH, made off the loop.
typedef struct halod_ring_detach_call_t {
  halod_device_call_t call;
  uint64_t session_id;
  halod_ring_t *ring;  // compared with the session's: never read otherwise
  uint64_t head;
  uint64_t sequence;
  halo_status_t status;
} halod_ring_detach_call_t;

static void halod_ring_detach_work(halod_device_call_t *call) {
  halod_ring_detach_call_t *detach = (halod_ring_detach_call_t *)call;
  detach->status = halo_hal_remote_device_ring_detach(
      call->device, detach->session_id, &detach->head, &detach->sequence);
}

static void halod_ring_detach_done(halod_t *daemon, halod_device_call_t *call,
                                   halod_session_t *unused) {
  (void)unused;  // started for no request
  halod_ring_detach_call_t *detach = (halod_ring_detach_call_t *)call;
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions.by_id, detach->session_id);
  halod_ring_t *ring = session ? session->ring : NULL;
  if (!ring || ring != detach->ring || !ring->detaching) {
    // The ring went with its session (the client closed it meanwhile): its
    // records were dropped, as a closed session's are.
    halo_status_free(detach->status);
    free(detach);
    return;
  }
  ring->detaching = false;
  if (call->cancelled) {
    detach->status = halo_status_make(HALO_STATUS_UNAVAILABLE,
                                      "halod stopped before it asked");
  }
  halod_ring_detached(ring, detach->status, detach->head, detach->sequence);
  free(detach);
  halod_ring_abandon(daemon, session, HALO_STATUS_DEVICE_LOST,
                     session->lost_reason);
  halod_ring_destroy(daemon, session);
}

void halod_ring_lose(halod_t *daemon, halod_session_t *session,
                     halo_status_code_t code, const char *reason) {
  halod_ring_t *ring = session->ring;
  if (!ring) return;
  if (ring->detaching) return;  // asked already
  if (ring->worker && !ring->broken && daemon->work.rings &&
      !halo_hal_remote_device_lost(ring->worker, NULL, 0)) {
    // Its worker lives: it says where it stopped, off the loop; the ring
    // waits for that.
    halod_ring_detach_call_t *detach = calloc(1, sizeof(*detach));
    if (detach) {
      detach->call.device = ring->worker;
      detach->call.work = halod_ring_detach_work;
      detach->call.done = halod_ring_detach_done;
      detach->call.what = "a lost session's ring detach";
      detach->session_id = session->id;
      detach->ring = ring;
      ring->detaching = true;
      halod_device_call_start(daemon, NULL, NULL, &detach->call);
      return;
    }
    HALO_LOG_ERROR(
        "session %llu: out of memory asking its ring's worker where it "
        "stopped; refusing from where it last stored the head",
        (unsigned long long)session->id);
  }
  halod_ring_abandon(daemon, session, code, reason);
  halod_ring_destroy(daemon, session);
}

void halod_ring_destroy(halod_t *daemon, halod_session_t *session) {
  halod_ring_t *ring = session->ring;
  if (!ring) return;
  session->ring = NULL;
  if (ring->records_rejected) {
    HALO_LOG_DEBUG(
        "session %llu: ring: %llu records, %llu rejected, %llu "
        "doorbells",
        (unsigned long long)session->id, (unsigned long long)ring->records_done,
        (unsigned long long)ring->records_rejected,
        (unsigned long long)ring->doorbells);
  }
  // Nothing drains it any more: a client waiting for room or for its
  // records to be taken (before a control call) must stop waiting. A lost
  // session's client is still connected and would wait for ever. A record
  // it waits on ends with the code and reason a request would get now.
  if (!ring->broken) {
    bool stopping = daemon->stopping;
    // Relaxed: the fetch_or of BROKEN below publishes it; a client may be
    // reading the code of its last record's rejection meanwhile.
    atomic_store_explicit(&ring->header->error_code,
                          stopping || !session->lost_reason
                              ? HALO_STATUS_UNAVAILABLE
                              : HALO_STATUS_SESSION_LOST,
                          memory_order_relaxed);
    snprintf((char *)ring->header->error_message,
             sizeof(ring->header->error_message),
             "the submission ring is no longer read: %s",
             stopping               ? HALOD_STOPPING_MESSAGE
             : session->lost_reason ? session->lost_reason
                                    : "its session ended");
  }
  atomic_fetch_or_explicit(&ring->header->flags, HALO_RING_FLAG_BROKEN,
                           memory_order_seq_cst);
  halod_ring_deactivate(ring);
  if (ring->worker) {
    // The worker stops reading and releases its grants once no execution
    // of it uses them (asked already where the ring is detaching).
    if (!ring->detaching) {
      halo_remote_ring_session_t detach = {.session = session->id};
      halo_status_free(
          halo_hal_remote_device_send(ring->worker, HALO_REMOTE_RING_DETACH,
                                      &detach, sizeof(detach), NULL, 0, -1));
    }
    halod_device_release(ring->worker);
    ring->worker = NULL;
  }
  ring->detaching = false;
  uv_poll_stop(&ring->poll);
  uv_close((uv_handle_t *)&ring->poll, halod_ring_on_closed);
}
