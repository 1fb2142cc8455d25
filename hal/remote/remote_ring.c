// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The worker's ring consumer (see the header; the protocol is the "rings"
// part of hal/remote/remote_link.h).
#include "hal/remote/remote_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/ring.h"
#include "common/status.h"
#include "common/timeline.h"
#include "hal/command_buffer.h"
#include "hal/queue.h"

// Records one ring may yield per round before the next ring's turn (as
// halod's loop: busy sessions are drained fairly).
#define HALO_REMOTE_RING_BUDGET 16
// Waits and signals of one record, at most (halod_submission_sync).
#define HALO_REMOTE_RING_MAX_VALUES 1024
// Payload bytes of one RING_COMPLETE or RING_RELEASED message the reporter
// fills, at most (one completion alone always fits: its signals and the
// first HALO_REMOTE_RING_MESSAGE_BYTES of its error message).
#define HALO_REMOTE_RING_REPORT_BYTES (64u * 1024u)
#define HALO_REMOTE_RING_MESSAGE_BYTES 4096u
// Successful completions whose semaphores halod does not wait on
// (halo_timeline_slot_t's host_waits) are held back at most
// tables.report_linger_ns (worker-report-linger-us), or until this many
// reports are queued, and go together: halod wakes once for many (the
// values are in their slots already, stored by the device, and their
// sleepers woke). Anything else goes at once, with whatever is queued
// before it.
#define HALO_REMOTE_RING_LINGER_REPORTS 512u
// A report whose send failed before its first byte is tried again this
// many times, a millisecond apart, before the link goes down.
#define HALO_REMOTE_RING_REPORT_RETRIES 3

typedef struct halo_remote_ring_session_state_t
    halo_remote_ring_session_state_t;

// An entry of the reporter's queue: an execution that completed
// (RING_COMPLETE) or a grant released (RING_RELEASED). The first member of
// the execution's or the grant's state, which the queue hands back.
typedef struct halo_remote_ring_report_t {
  struct halo_remote_ring_report_t *next;
  uint32_t type;  // HALO_REMOTE_RING_COMPLETE or HALO_REMOTE_RING_RELEASED
} halo_remote_ring_report_t;

// A session's handle as granted by the supervisor. The fields of the
// message are immutable; |uses| and |revoked| are guarded by the rings'
// mutex. A grant is in its session's table until it is revoked (replaced,
// RING_REVOKE, RING_DETACH); then whoever drops its last use queues it for
// the reporter, which sends RING_RELEASED and frees it.
typedef struct halo_remote_ring_grant_state_t {
  halo_remote_ring_report_t report;  // first: RING_RELEASED
  halo_remote_ring_grant_t grant;
  // COMMAND_BUFFER: the worker's object and the slots' requirements
  // (grant.binding_capacity of them).
  halo_hal_command_buffer_t *command_buffer;
  halo_remote_ring_slot_t *slots;
  // QUEUE: the worker's queue.
  halo_hal_queue_t *queue;
  // SEMAPHORE: the slot in the worker's mapping of the registered page.
  halo_timeline_slot_t *slot;
  uint32_t uses;  // executions in flight that use it
  bool revoked;
} halo_remote_ring_grant_state_t;

struct halo_remote_ring_session_state_t {
  uint64_t id;  // the supervisor's session id
  // Main thread only.
  halo_ring_header_t *header;  // NULL once detached
  uint8_t *records;
  uint64_t map_size;
  uint32_t capacity;
  uint32_t pending_limit;
  uint8_t key[HALO_RING_KEY_BYTES];
  // The worker's own view: never read back from the shared header.
  uint64_t head;
  uint64_t sequence;
  uint64_t snapshot_tail;
  bool snapshot_valid;
  bool bounced;  // until RING_RESUME
  bool asked_wakeup;
  int doorbell;                                   // -1: none yet
  halo_u64_map_t grants;                          // handle -> grant state
  halo_remote_ring_grant_state_t *default_queue;  // the QUEUE grant of 0
  // Guarded by the rings' mutex.
  uint32_t in_flight;
  bool detached;
};

// An execution taken from a ring, until the reporter sent its completion.
// One allocation: the bindings, signals and grants follow the struct.
typedef struct halo_remote_ring_running_t {
  halo_remote_ring_report_t report;  // first: RING_COMPLETE
  halo_remote_rings_t *rings;
  halo_remote_ring_session_state_t *session;
  uint64_t id;
  uint32_t flight_index;
  int64_t issued_ns;
  halo_remote_ring_grant_state_t *queue;
  halo_remote_ring_grant_state_t *command_buffer;
  halo_hal_binding_t *bindings;  // binding_capacity
  halo_hal_execution_signal_t *signals;
  halo_remote_ring_grant_state_t **signal_grants;  // signal_count
  uint32_t signal_count;
  // Every grant used, one use each (queue, command buffer, buffers, waits,
  // signals).
  halo_remote_ring_grant_state_t **grants;
  uint32_t grant_count;
  // Set by the completion path: what the reporter sends (but the message's
  // length) and the outcome (owned).
  halo_remote_ring_complete_t complete;
  halo_status_t status;
} halo_remote_ring_running_t;

struct halo_remote_rings_t {
  halo_remote_ring_tables_t tables;
  pthread_mutex_t mutex;
  // Main thread only.
  halo_u64_map_t sessions;  // session id -> session state (attached)
  uint64_t next_execution;
  // Reporter thread only: the last report's sequence number.
  uint32_t report_sequence;
  // The flight table (RING_FLIGHT); NULL before it came.
  halo_remote_flight_t *flight;
  uint32_t flight_capacity;
  // Guarded by |mutex|: free entries of the flight table.
  uint32_t *flight_free;
  uint32_t flight_free_count;
  // Guarded by |mutex|: the reporter's queue, in the order the reports were
  // made, and whether the reporter sleeps on |reports_ready| (the first
  // report queued then wakes it).
  halo_remote_ring_report_t *reports_head;
  halo_remote_ring_report_t *reports_tail;
  bool reporter_waiting;
  pthread_cond_t reports_ready;  // CLOCK_MONOTONIC
  // Guarded by |mutex|: the queue must go now (a report that cannot wait
  // came, or enough did); how many are queued; when the first came.
  bool reports_urgent;
  uint32_t reports_count;
  int64_t reports_since_ns;
  // Scratch for one copied record (main thread).
  _Alignas(16) uint8_t record[HALO_RING_MAX_RECORD_BYTES];
  // The payload of the message the reporter fills (reporter thread).
  _Alignas(16) uint8_t report[HALO_REMOTE_RING_REPORT_BYTES];
};

// ---------------------------------------------------------------- sends

static void halo_remote_rings_send_bounce(
    halo_remote_rings_t *rings,
    const halo_remote_ring_session_state_t *session) {
  halo_remote_ring_position_t position = {.session = session->id,
                                          .head = session->head,
                                          .sequence = session->sequence};
  halo_remote_part_t part = {&position, sizeof(position)};
  halo_status_free(halo_remote_link_send(
      rings->tables.link, HALO_REMOTE_RING_BOUNCE, 0, &part, 1, -1));
}

static void halo_remote_ring_grant_free(halo_remote_ring_grant_state_t *grant) {
  free(grant->slots);
  free(grant);
}

static void halo_remote_ring_session_free(
    halo_remote_ring_session_state_t *session) {
  halo_u64_map_deinitialize(&session->grants);
  free(session);
}

// ---------------------------------------------------------------- reports

_Static_assert(sizeof(halo_remote_ring_complete_t) +
                       HALO_REMOTE_RING_MAX_VALUES *
                           sizeof(halo_remote_ring_value_t) +
                       HALO_REMOTE_RING_MESSAGE_BYTES <=
                   HALO_REMOTE_RING_REPORT_BYTES,
               "one completion fits a report message");

// Appends |report| to the reporter's queue (|mutex| held); |urgent|: it
// cannot wait (tables.report_linger_ns). Returns whether the caller wakes
// the reporter after unlocking: the first report queued while it sleeps
// does, and an urgent one while it lingers.
static bool halo_remote_rings_queue_locked(halo_remote_rings_t *rings,
                                           halo_remote_ring_report_t *report,
                                           uint32_t type, bool urgent) {
  report->type = type;
  report->next = NULL;
  bool first = !rings->reports_tail;
  if (first) {
    rings->reports_head = report;
    rings->reports_since_ns = halo_clock_now_ns();
  } else {
    rings->reports_tail->next = report;
  }
  rings->reports_tail = report;
  if (urgent || rings->tables.report_linger_ns <= 0 ||
      ++rings->reports_count >= HALO_REMOTE_RING_LINGER_REPORTS) {
    rings->reports_urgent = true;
  }
  bool wake = rings->reporter_waiting && (first || rings->reports_urgent);
  if (wake) rings->reporter_waiting = false;
  return wake;
}

// Reporter thread: fills in the message's length of |running|'s completion
// (its status's message, cut at HALO_REMOTE_RING_MESSAGE_BYTES). Returns
// the completion's bytes in a RING_COMPLETE.
static size_t halo_remote_ring_complete_size(
    halo_remote_ring_running_t *running) {
  size_t length = 0;
  if (running->status) {
    length = strnlen(halo_status_message(running->status),
                     HALO_REMOTE_RING_MESSAGE_BYTES);
  }
  running->complete.message_length = (uint32_t)length;
  return sizeof(running->complete) +
         running->complete.signal_count * sizeof(halo_remote_ring_value_t) +
         length;
}

// Reporter thread: writes |running|'s completion at |out| (the size was
// taken).
static void halo_remote_ring_complete_encode(
    const halo_remote_ring_running_t *running, uint8_t *out) {
  memcpy(out, &running->complete, sizeof(running->complete));
  out += sizeof(running->complete);
  for (uint32_t i = 0; i < running->complete.signal_count; ++i) {
    // The grant is alive: its RING_RELEASED comes after this completion.
    halo_remote_ring_value_t value = {
        .grant = running->signal_grants[i]->grant.grant,
        .value = running->signals[i].value};
    memcpy(out, &value, sizeof(value));
    out += sizeof(value);
  }
  memcpy(out, halo_status_message(running->status),
         running->complete.message_length);
}

// Reporter thread: frees the executions and grants of |reports| up to
// |end|. Where they were |sent|, the executions' flight entries are free
// from here (their RING_COMPLETE is on its way: halod no longer needs the
// table to learn their outcome), given back to the free list a batch per
// lock. Where the send failed (the link is down then: it failed with the
// send, or the reporter shut it down), the entries keep naming them,
// completed with a report halod never applied: halod, once the worker is
// lost, applies their outcome from the table and counts each once.
static void halo_remote_rings_free_reports(halo_remote_rings_t *rings,
                                           halo_remote_ring_report_t *reports,
                                           const halo_remote_ring_report_t *end,
                                           bool sent) {
  uint32_t freed[256];
  uint32_t freed_count = 0;
  while (reports != end) {
    halo_remote_ring_report_t *next = reports->next;
    if (reports->type == HALO_REMOTE_RING_COMPLETE) {
      halo_remote_ring_running_t *running =
          (halo_remote_ring_running_t *)reports;
      if (sent) {
        atomic_store_explicit(&rings->flight->entries[running->flight_index].id,
                              0, memory_order_release);
        freed[freed_count++] = running->flight_index;
      }
      halo_status_free(running->status);
      free(running);
    } else {
      halo_remote_ring_grant_free((halo_remote_ring_grant_state_t *)reports);
    }
    reports = next;
    if (freed_count == sizeof(freed) / sizeof(freed[0]) ||
        (reports == end && freed_count > 0)) {
      pthread_mutex_lock(&rings->mutex);
      for (uint32_t i = 0; i < freed_count; ++i) {
        rings->flight_free[rings->flight_free_count++] = freed[i];
      }
      pthread_mutex_unlock(&rings->mutex);
      freed_count = 0;
    }
  }
}

// Reporter thread: sends |report| and the reports after it in order, each
// run of one type in as few messages as HALO_REMOTE_RING_REPORT_BYTES
// allows (completions back to back in a RING_COMPLETE, grant ids in a
// RING_RELEASED), and frees them once sent.
static void halo_remote_rings_send_reports(halo_remote_rings_t *rings,
                                           halo_remote_ring_report_t *report) {
  while (report) {
    halo_remote_ring_report_t *first = report;
    uint32_t type = report->type;
    size_t used = 0;
    for (; report && report->type == type; report = report->next) {
      if (type == HALO_REMOTE_RING_COMPLETE) {
        halo_remote_ring_running_t *running =
            (halo_remote_ring_running_t *)report;
        size_t size = halo_remote_ring_complete_size(running);
        if (size > sizeof(rings->report) - used) break;
        // Numbered in the order sent, in the entry first: halod, reading
        // the entry before the id is cleared, tells whether it applied
        // this report already (remote_link.h).
        running->complete.report = ++rings->report_sequence;
        if (running->complete.report == 0) {
          running->complete.report = ++rings->report_sequence;
        }
        atomic_store_explicit(
            &rings->flight->entries[running->flight_index].report,
            running->complete.report, memory_order_release);
        halo_remote_ring_complete_encode(running, rings->report + used);
        used += size;
      } else {
        const halo_remote_ring_grant_state_t *grant =
            (const halo_remote_ring_grant_state_t *)report;
        if (sizeof(uint64_t) > sizeof(rings->report) - used) break;
        memcpy(rings->report + used, &grant->grant.grant, sizeof(uint64_t));
        used += sizeof(uint64_t);
      }
    }
    // A peer gone ends the worker through the main thread's receive.
    halo_remote_part_t part = {rings->report, used};
    halo_status_t status =
        halo_remote_link_send(rings->tables.link, type, 0, &part, 1, -1);
    // A send that failed before its first byte (no memory, no buffers)
    // leaves the link up: tried again a few times, the same message (its
    // reports keep their numbers: nothing went after it).
    for (int retry = 0; status && retry < HALO_REMOTE_RING_REPORT_RETRIES;
         ++retry) {
      halo_status_free(status);
      usleep(1000);
      status = halo_remote_link_send(rings->tables.link, type, 0, &part, 1, -1);
    }
    if (status && type == HALO_REMOTE_RING_COMPLETE) {
      // Reports halod will never get: the link goes down, so that the
      // worker ends (the main thread's receive sees it) and nothing is
      // sent after them (a RING_RELEASED of the grants they used, later
      // reports with higher numbers). halod then settles these executions
      // from the flight table, whose entries stay (free_reports).
      HALO_LOG_WARN(
          "worker: a ring completion report could not be sent (%s); ending "
          "the link",
          halo_status_message(status));
      halo_remote_link_shut_down(rings->tables.link);
    }
    halo_remote_rings_free_reports(rings, first, report, status == NULL);
    halo_status_free(status);
  }
}

// The reporter thread: sends what the completion path and the main thread
// queue, whatever has queued up since its last send together; sleeps while
// nothing is queued. Runs as long as the worker.
static void *halo_remote_rings_reporter_main(void *argument) {
  halo_remote_rings_t *rings = argument;
  pthread_setname_np(pthread_self(), "halo-reporter");
  pthread_mutex_lock(&rings->mutex);
  for (;;) {
    for (;;) {
      if (rings->reports_head && rings->reports_urgent) break;
      if (rings->reports_head) {
        int64_t until =
            rings->reports_since_ns + rings->tables.report_linger_ns;
        if (halo_clock_now_ns() >= until) break;
        struct timespec deadline = halo_clock_timespec(until);
        rings->reporter_waiting = true;
        pthread_cond_timedwait(&rings->reports_ready, &rings->mutex, &deadline);
      } else {
        rings->reporter_waiting = true;
        pthread_cond_wait(&rings->reports_ready, &rings->mutex);
      }
      rings->reporter_waiting = false;
    }
    halo_remote_ring_report_t *reports = rings->reports_head;
    rings->reports_head = rings->reports_tail = NULL;
    rings->reports_urgent = false;
    rings->reports_count = 0;
    pthread_mutex_unlock(&rings->mutex);
    halo_remote_rings_send_reports(rings, reports);
    pthread_mutex_lock(&rings->mutex);
  }
  return NULL;
}

// Main thread, |mutex| held: revokes |grant| (out of its session's table
// already): queued for RING_RELEASED now if no execution uses it, else by
// the completion that drops its last use. Returns whether the caller wakes
// the reporter (halo_remote_rings_queue_locked).
static bool halo_remote_rings_revoke_locked(
    halo_remote_rings_t *rings, halo_remote_ring_grant_state_t *grant) {
  grant->revoked = true;
  return grant->uses == 0 &&
         halo_remote_rings_queue_locked(rings, &grant->report,
                                        HALO_REMOTE_RING_RELEASED, true);
}

static void halo_remote_rings_revoke(halo_remote_rings_t *rings,
                                     halo_remote_ring_grant_state_t *grant) {
  if (!grant) return;
  pthread_mutex_lock(&rings->mutex);
  bool wake = halo_remote_rings_revoke_locked(rings, grant);
  pthread_mutex_unlock(&rings->mutex);
  if (wake) pthread_cond_signal(&rings->reports_ready);
}

// ---------------------------------------------------------------- completion

// A driver thread (or the main thread: an execution the driver refused, or
// one it finished within halo_hal_queue_execute).
// The execution goes to the reporter's queue, then the grants whose last use
// it held and that were revoked meanwhile: the supervisor gets its
// RING_COMPLETE before their RING_RELEASED.
static void halo_remote_ring_on_complete(void *user_data,
                                         halo_status_t status) {
  halo_remote_ring_running_t *running = user_data;
  halo_remote_rings_t *rings = running->rings;
  halo_remote_ring_session_state_t *session = running->session;
  if (halo_status_code(status) == HALO_STATUS_DEVICE_LOST) {
    // The device is lost, so this process ends (the driver's loss report
    // reached halo_hal_remote_serve_lost on some thread) and the
    // supervisor fails the execution, still in the flight table, with the
    // loss, which names the device, the worker and what was in flight. A
    // report of it sent from here could reach the supervisor first (the
    // loss is reported by the thread that saw it first), and its bare
    // driver error would stand instead.
    halo_status_free(status);
    return;
  }
  // The outcome in the flight entry first: a worker lost before the
  // reporter sent the RING_COMPLETE (the entry is freed once it was) still
  // tells halod how the execution ended.
  atomic_store_explicit(
      &rings->flight->entries[running->flight_index].completed,
      HALO_REMOTE_FLIGHT_COMPLETED | (uint32_t)halo_status_code(status),
      memory_order_release);
  running->complete = (halo_remote_ring_complete_t){
      .session = session->id,
      .id = running->id,
      .queue_grant = running->queue->grant.grant,
      .command_buffer_grant = running->command_buffer->grant.grant,
      .issued_ns = running->issued_ns,
      .completed_ns = halo_clock_now_ns(),
      .code = (int32_t)halo_status_code(status),
      .signal_count = running->signal_count,
  };
  running->status = status;
  // A failure, a value the device did not store (the supervisor's host
  // path stores it), or one halod waits for (its timepoints: work in its
  // deferred queue) is reported at once; else it may linger. The device
  // stored the values before the completion path saw the execution done
  // (a value not in its slot yet is reported at once too).
  bool urgent = status != NULL || !rings->tables.device_stores_signals;
  for (uint32_t i = 0; !urgent && i < running->signal_count; ++i) {
    const halo_hal_execution_signal_t *signal = &running->signals[i];
    urgent = !signal->slot || signal->device_address == 0 ||
             atomic_load_explicit(&signal->slot->value, memory_order_acquire) <
                 signal->value ||
             halo_timeline_slot_host_waits(signal->slot);
  }
  pthread_mutex_lock(&rings->mutex);
  // The reporter owns |running| once the mutex is released.
  bool wake = halo_remote_rings_queue_locked(rings, &running->report,
                                             HALO_REMOTE_RING_COMPLETE, urgent);
  for (uint32_t i = 0; i < running->grant_count; ++i) {
    halo_remote_ring_grant_state_t *grant = running->grants[i];
    if (--grant->uses == 0 && grant->revoked) {
      wake |= halo_remote_rings_queue_locked(rings, &grant->report,
                                             HALO_REMOTE_RING_RELEASED, true);
    }
  }
  bool session_done = --session->in_flight == 0 && session->detached;
  pthread_mutex_unlock(&rings->mutex);
  if (wake) pthread_cond_signal(&rings->reports_ready);
  if (session_done) halo_remote_ring_session_free(session);
}

// ---------------------------------------------------------------- records

// The grant of |handle| in |session| if it is of |kind|, else NULL.
static halo_remote_ring_grant_state_t *halo_remote_ring_lookup(
    const halo_remote_ring_session_state_t *session, uint64_t handle,
    uint32_t kind) {
  halo_remote_ring_grant_state_t *grant =
      handle == 0
          ? (kind == HALO_REMOTE_GRANT_QUEUE ? session->default_queue : NULL)
          : halo_u64_map_get(&session->grants, handle);
  return grant && grant->grant.kind == kind ? grant : NULL;
}

// Why a record is bounced, for the debug log (the supervisor says why to
// the client).
typedef const char *halo_remote_ring_verdict_t;

// Checks the EXECUTE record in the scratch (|length| bytes, checksum
// verified) and takes it. Returns NULL when taken, else why it bounces.
static halo_remote_ring_verdict_t halo_remote_ring_execute(
    halo_remote_rings_t *rings, halo_remote_ring_session_state_t *session,
    uint32_t length) {
  const uint8_t *record = rings->record;
  if (length <
      sizeof(halo_ring_record_header_t) + sizeof(halo_ring_execute_t)) {
    return "too short";
  }
  halo_ring_execute_t execute;
  memcpy(&execute, record + sizeof(halo_ring_record_header_t), sizeof(execute));
  uint32_t expected = halo_ring_execute_length(
      execute.binding_count, execute.wait_count, execute.signal_count);
  if (expected == 0 || expected != length) return "length";
  if ((uint64_t)execute.wait_count + execute.signal_count >
      HALO_REMOTE_RING_MAX_VALUES) {
    return "too many waits and signals";
  }
  // A lost worker's flight entry names this many signals for halod to
  // fail; halod runs an execution with more itself, so that all of them
  // fail with it.
  if (execute.signal_count > HALO_REMOTE_FLIGHT_SIGNALS) {
    return "more signals than a flight entry holds";
  }
  const halo_ring_binding_t *bindings =
      (const halo_ring_binding_t *)(record + sizeof(halo_ring_record_header_t) +
                                    sizeof(halo_ring_execute_t));
  const halo_ring_semaphore_value_t *waits =
      (const halo_ring_semaphore_value_t *)(bindings + execute.binding_count);
  const halo_ring_semaphore_value_t *signals = waits + execute.wait_count;

  halo_remote_ring_grant_state_t *queue =
      halo_remote_ring_lookup(session, execute.queue, HALO_REMOTE_GRANT_QUEUE);
  if (!queue) return "queue not granted";
  halo_remote_ring_grant_state_t *command_buffer = halo_remote_ring_lookup(
      session, execute.command_buffer, HALO_REMOTE_GRANT_COMMAND_BUFFER);
  if (!command_buffer) return "command buffer not granted";
  uint32_t capacity = command_buffer->grant.binding_capacity;
  if (execute.binding_count > capacity) return "bindings past the capacity";

  // One allocation for what the execution keeps.
  size_t grant_limit =
      2 + (size_t)capacity + execute.wait_count + execute.signal_count;
  size_t bytes =
      sizeof(halo_remote_ring_running_t) +
      (size_t)capacity * sizeof(halo_hal_binding_t) +
      execute.signal_count * sizeof(halo_hal_execution_signal_t) +
      execute.signal_count * sizeof(halo_remote_ring_grant_state_t *) +
      grant_limit * sizeof(halo_remote_ring_grant_state_t *);
  halo_remote_ring_running_t *running = calloc(1, bytes);
  if (!running) return "out of memory";
  running->bindings = (halo_hal_binding_t *)(running + 1);
  running->signals =
      (halo_hal_execution_signal_t *)(running->bindings + capacity);
  running->signal_grants =
      (halo_remote_ring_grant_state_t **)(running->signals +
                                          execute.signal_count);
  running->grants = running->signal_grants + execute.signal_count;
  running->grants[running->grant_count++] = queue;
  running->grants[running->grant_count++] = command_buffer;

  halo_remote_ring_verdict_t verdict = NULL;
  for (uint32_t i = 0; !verdict && i < capacity; ++i) {
    const halo_remote_ring_slot_t *slot = &command_buffer->slots[i];
    halo_ring_binding_t binding = {0};
    if (i < execute.binding_count) binding = bindings[i];
    if (binding.buffer == 0) {
      if (slot->used) verdict = "a used slot unbound";
      continue;
    }
    halo_remote_ring_grant_state_t *buffer = halo_remote_ring_lookup(
        session, binding.buffer, HALO_REMOTE_GRANT_BUFFER);
    if (!buffer) {
      verdict = "buffer not granted";
      break;
    }
    uint64_t size = buffer->grant.size;
    uint64_t address = buffer->grant.object;
    if (binding.offset > size) {
      verdict = "binding offset past the buffer";
      break;
    }
    uint64_t range =
        binding.length == UINT64_MAX ? size - binding.offset : binding.length;
    if (range > size - binding.offset) {
      verdict = "binding past the buffer";
      break;
    }
    if (slot->used && range < slot->min_length) {
      verdict = "binding shorter than the slot needs";
      break;
    }
    uint32_t alignment = slot->alignment ? slot->alignment : 1;
    if ((address + binding.offset) % alignment != 0) {
      verdict = "binding misaligned";
      break;
    }
    running->bindings[i].address = address + binding.offset;
    running->bindings[i].length = range;
    running->grants[running->grant_count++] = buffer;
  }
  for (uint32_t i = 0; !verdict && i < execute.wait_count; ++i) {
    halo_remote_ring_grant_state_t *semaphore = halo_remote_ring_lookup(
        session, waits[i].semaphore, HALO_REMOTE_GRANT_SEMAPHORE);
    if (!semaphore) {
      verdict = "wait semaphore not granted";
    } else if (waits[i].value > HALO_TIMELINE_MAX_VALUE) {
      verdict = "wait value >= 2^63";
    } else if (atomic_load_explicit(&semaphore->slot->failure,
                                    memory_order_acquire) != 0) {
      verdict = "wait semaphore failed";
    } else if (atomic_load_explicit(&semaphore->slot->value,
                                    memory_order_acquire) < waits[i].value) {
      verdict = "wait not reached";
    } else {
      running->grants[running->grant_count++] = semaphore;
    }
  }
  for (uint32_t i = 0; !verdict && i < execute.signal_count; ++i) {
    halo_remote_ring_grant_state_t *semaphore = halo_remote_ring_lookup(
        session, signals[i].semaphore, HALO_REMOTE_GRANT_SEMAPHORE);
    uint64_t value = signals[i].value;
    if (!semaphore) {
      verdict = "signal semaphore not granted";
      break;
    }
    halo_timeline_slot_t *slot = semaphore->slot;
    for (uint32_t j = 0; !verdict && j < i; ++j) {
      if (running->signals[j].slot == slot) verdict = "signaled twice";
    }
    if (verdict) break;
    if (value > HALO_TIMELINE_MAX_VALUE) {
      verdict = "signal value >= 2^63";
    } else if (atomic_load_explicit(&slot->failure, memory_order_acquire) !=
               0) {
      verdict = "signal semaphore failed";
    } else if (value <=
               atomic_load_explicit(&slot->value, memory_order_acquire)) {
      verdict = "signal not above the value";
    } else if (value <=
               atomic_load_explicit(&slot->pending, memory_order_acquire)) {
      verdict = "signal not above pending";
    } else {
      running->signals[i].device_address = semaphore->grant.device_address;
      running->signals[i].value = value;
      running->signals[i].slot = slot;
      running->signal_grants[i] = semaphore;
      running->grants[running->grant_count++] = semaphore;
    }
  }
  if (verdict) {
    free(running);
    return verdict;
  }
  // The session's quota, the flight table and the grants' uses in one
  // section (the completion thread takes the same mutex for each
  // completion: one section per record), then the reservations; a
  // reservation that fails (another process reserved meanwhile) undoes
  // the section. A record past the quota reserves nothing.
  uint32_t flight_index = 0;
  pthread_mutex_lock(&rings->mutex);
  if (session->in_flight >= session->pending_limit) {
    verdict = "the session's pending limit";
  } else if (rings->flight_free_count == 0) {
    verdict = "the flight table is full";
  } else {
    flight_index = rings->flight_free[--rings->flight_free_count];
    for (uint32_t i = 0; i < running->grant_count; ++i) {
      ++running->grants[i]->uses;
    }
    ++session->in_flight;
  }
  pthread_mutex_unlock(&rings->mutex);
  if (verdict) {
    free(running);
    return verdict;
  }
  uint32_t reserved = 0;
  uint64_t before[HALO_REMOTE_RING_MAX_VALUES];
  for (; reserved < execute.signal_count; ++reserved) {
    if (!halo_timeline_slot_reserve(running->signals[reserved].slot,
                                    running->signals[reserved].value,
                                    &before[reserved])) {
      verdict = "signal reserved meanwhile";
      break;
    }
  }
  if (verdict) {
    while (reserved-- > 0) {
      halo_timeline_slot_unreserve(running->signals[reserved].slot,
                                   running->signals[reserved].value,
                                   before[reserved]);
    }
    // No revocation came meanwhile (this thread takes them), so no use
    // dropped here is a revoked grant's last.
    pthread_mutex_lock(&rings->mutex);
    rings->flight_free[rings->flight_free_count++] = flight_index;
    for (uint32_t i = 0; i < running->grant_count; ++i) {
      --running->grants[i]->uses;
    }
    --session->in_flight;
    pthread_mutex_unlock(&rings->mutex);
    free(running);
    return verdict;
  }

  // Taken.
  running->rings = rings;
  running->session = session;
  running->id = HALO_REMOTE_RING_ID_BIT | ++rings->next_execution;
  running->flight_index = flight_index;
  running->issued_ns = halo_clock_now_ns();
  running->queue = queue;
  running->command_buffer = command_buffer;
  running->signal_count = execute.signal_count;
  halo_remote_flight_entry_t *entry = &rings->flight->entries[flight_index];
  // The entry's last id was cleared (0) before it was freed; the supervisor
  // reads an entry's fields between two looks at its id and keeps them only
  // if the id held (a sequence lock), so the clear must be seen before any
  // new field: a release fence orders it before the stores below (a
  // compiler barrier on x86, a barrier instruction on Arm).
  atomic_thread_fence(memory_order_release);
  entry->session = session->id;
  atomic_store_explicit(&entry->queue_grant, queue->grant.grant,
                        memory_order_relaxed);
  entry->command_buffer_grant = command_buffer->grant.grant;
  atomic_store_explicit(&entry->issued_ns, running->issued_ns,
                        memory_order_relaxed);
  entry->signal_count = execute.signal_count;
  atomic_store_explicit(&entry->completed, 0, memory_order_relaxed);
  atomic_store_explicit(&entry->report, 0, memory_order_relaxed);
  for (uint32_t i = 0; i < execute.signal_count; ++i) {
    entry->signal_grants[i] = running->signal_grants[i]->grant.grant;
    entry->signal_values[i] = running->signals[i].value;
  }
  atomic_store_explicit(&entry->id, running->id, memory_order_release);

  halo_hal_execution_t execution = {
      .command_buffer = command_buffer->command_buffer,
      .bindings = running->bindings,
      .binding_count = capacity,
      .completion = halo_remote_ring_on_complete,
      .user_data = running,
      .signals = running->signals,
      .signal_count = execute.signal_count,
  };
  uint64_t sequence = session->sequence;
  halo_status_t status = halo_hal_queue_execute(queue->queue, &execution);
  if (status) {
    // The driver refused it: a client waiting for the verdict reads it
    // from the header (before head passes the record); the supervisor
    // learns it from RING_COMPLETE and fails the signals.
    if (!(execute.flags & HALO_RING_EXECUTE_ASYNC)) {
      halo_ring_report_error(session->header, sequence, status);
    }
    halo_remote_ring_on_complete(running, status);
  }
  return NULL;
}

typedef enum halo_remote_ring_step_e {
  HALO_REMOTE_RING_EMPTY,
  HALO_REMOTE_RING_PROGRESS,
  HALO_REMOTE_RING_BOUNCED,
} halo_remote_ring_step_t;

static halo_remote_ring_step_t halo_remote_ring_bounce(
    halo_remote_rings_t *rings, halo_remote_ring_session_state_t *session,
    const char *why) {
  HALO_LOG_DEBUG(
      "worker: session %llu: ring record %llu at byte %llu goes to "
      "the supervisor: %s",
      (unsigned long long)session->id, (unsigned long long)session->sequence,
      (unsigned long long)session->head, why);
  session->bounced = true;
  session->snapshot_valid = false;
  halo_remote_rings_send_bounce(rings, session);
  return HALO_REMOTE_RING_BOUNCED;
}

// The record at the ring's head, if it is before the snapshot tail (the
// framing checks of halod_ring_step: any failure is the supervisor's).
static halo_remote_ring_step_t halo_remote_ring_step(
    halo_remote_rings_t *rings, halo_remote_ring_session_state_t *session) {
  uint64_t tail = session->snapshot_tail;
  if (tail == session->head) return HALO_REMOTE_RING_EMPTY;
  if (tail < session->head || tail - session->head > session->capacity ||
      tail % HALO_RING_RECORD_ALIGN) {
    return halo_remote_ring_bounce(rings, session, "tail out of bounds");
  }
  uint32_t offset = (uint32_t)(session->head & (session->capacity - 1));
  uint64_t available = tail - session->head;
  uint32_t contiguous = session->capacity - offset;
  halo_ring_record_header_t record;
  memcpy(&record, session->records + offset, sizeof(record));
  if (record.sequence != (uint32_t)session->sequence) {
    return halo_remote_ring_bounce(rings, session, "sequence");
  }
  if (record.length < sizeof(record) ||
      record.length % HALO_RING_RECORD_ALIGN ||
      record.length > HALO_RING_MAX_RECORD_BYTES ||
      record.length > contiguous || record.length > available) {
    return halo_remote_ring_bounce(rings, session, "record length");
  }
  // From here on only the copy is read: the client may still write. The
  // copy's header is the one checked above (the client may have changed
  // the ring's since): a changed record then fails its checksum, and no
  // length but the checked one is ever used.
  memcpy(rings->record, session->records + offset, record.length);
  memcpy(rings->record, &record, sizeof(record));
  if (!halo_ring_record_verify(session->key, rings->record)) {
    return halo_remote_ring_bounce(rings, session, "checksum");
  }
  if (record.type == HALO_RING_RECORD_EXECUTE) {
    halo_remote_ring_verdict_t verdict =
        halo_remote_ring_execute(rings, session, record.length);
    if (verdict) return halo_remote_ring_bounce(rings, session, verdict);
  } else if (record.type != HALO_RING_RECORD_PAD) {
    return halo_remote_ring_bounce(rings, session, "not an execute record");
  }
  session->head += record.length;
  ++session->sequence;
  atomic_store_explicit(&session->header->head, session->head,
                        memory_order_release);
  return HALO_REMOTE_RING_PROGRESS;
}

// ---------------------------------------------------------------- rounds

void halo_remote_rings_snapshot(halo_remote_rings_t *rings) {
  for (size_t i = 0; i < rings->sessions.capacity; ++i) {
    if (!rings->sessions.entries[i].key) continue;
    halo_remote_ring_session_state_t *session =
        rings->sessions.entries[i].value;
    // A ring halod marked broken (the session ended or was lost: DETACH
    // is on its way) is read no more.
    session->snapshot_valid =
        !session->bounced &&
        !(atomic_load_explicit(&session->header->flags, memory_order_acquire) &
          HALO_RING_FLAG_BROKEN);
    if (session->snapshot_valid) {
      session->snapshot_tail =
          atomic_load_explicit(&session->header->tail, memory_order_acquire);
    }
  }
}

bool halo_remote_rings_drain(halo_remote_rings_t *rings) {
  bool progress = false;
  for (size_t i = 0; i < rings->sessions.capacity; ++i) {
    if (!rings->sessions.entries[i].key) continue;
    halo_remote_ring_session_state_t *session =
        rings->sessions.entries[i].value;
    for (int done = 0; done < HALO_REMOTE_RING_BUDGET; ++done) {
      // A RESUME or a new ATTACH since the snapshot: next round.
      if (!session->snapshot_valid || session->bounced) break;
      halo_remote_ring_step_t step = halo_remote_ring_step(rings, session);
      if (step == HALO_REMOTE_RING_EMPTY) break;
      progress = true;
      if (step == HALO_REMOTE_RING_BOUNCED) break;
    }
  }
  return progress;
}

bool halo_remote_rings_sleep(halo_remote_rings_t *rings, int link_fd) {
  size_t count = rings->sessions.count;
  struct pollfd inline_fds[17];
  struct pollfd *fds =
      count + 1 <= 17 ? inline_fds : calloc(count + 1, sizeof(*fds));
  if (!fds) return true;  // no sleep: poll again
  nfds_t used = 0;
  fds[used++] = (struct pollfd){.fd = link_fd, .events = POLLIN};
  bool ready = false;
  for (size_t i = 0; i < rings->sessions.capacity; ++i) {
    if (!rings->sessions.entries[i].key) continue;
    halo_remote_ring_session_state_t *session =
        rings->sessions.entries[i].value;
    if (session->doorbell >= 0) {
      fds[used++] = (struct pollfd){.fd = session->doorbell, .events = POLLIN};
    }
    if (session->bounced || ready) continue;
    halo_ring_header_t *header = session->header;
    atomic_fetch_or_explicit(&header->flags, HALO_RING_FLAG_NEED_WAKEUP,
                             memory_order_seq_cst);
    session->asked_wakeup = true;
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&header->tail, memory_order_seq_cst) !=
        session->head) {
      ready = true;
    }
  }
  if (!ready) {
    int got;
    do {
      got = poll(fds, used, -1);
    } while (got < 0 && errno == EINTR);
  }
  // Only the doorbells that rang are read (a read of a quiet one is a
  // system call for EAGAIN), once each: an eventfd's read takes its whole
  // count. One that rang while no poll ran (|ready|) is read after the next
  // sleep's poll, which returns at once for it.
  nfds_t next = 1;  // fds[0] is the link
  for (size_t i = 0; i < rings->sessions.capacity; ++i) {
    if (!rings->sessions.entries[i].key) continue;
    halo_remote_ring_session_state_t *session =
        rings->sessions.entries[i].value;
    if (session->doorbell >= 0 && (fds[next++].revents & POLLIN) != 0) {
      // A failed read leaves the count: the next poll returns at once.
      uint64_t count;
      ssize_t got = read(session->doorbell, &count, sizeof(count));
      (void)got;
    }
    if (session->asked_wakeup) {
      atomic_fetch_and_explicit(&session->header->flags,
                                ~HALO_RING_FLAG_NEED_WAKEUP,
                                memory_order_seq_cst);
      session->asked_wakeup = false;
    }
  }
  bool link_event = fds[0].revents != 0;
  if (fds != inline_fds) free(fds);
  return link_event;
}

// ---------------------------------------------------------------- messages

static void halo_remote_rings_on_flight(halo_remote_rings_t *rings, int fd) {
  if (rings->flight) {
    HALO_LOG_WARN("worker: a second RING_FLIGHT is ignored");
    return;
  }
  struct stat info;
  if (fd < 0 || fstat(fd, &info) != 0 ||
      (uint64_t)info.st_size < HALO_REMOTE_FLIGHT_BYTES) {
    HALO_LOG_WARN(
        "worker: RING_FLIGHT without a memfd of %zu bytes: rings "
        "will bounce every record",
        (size_t)HALO_REMOTE_FLIGHT_BYTES);
    return;
  }
  void *pointer = mmap(NULL, HALO_REMOTE_FLIGHT_BYTES, PROT_READ | PROT_WRITE,
                       MAP_SHARED, fd, 0);
  if (pointer == MAP_FAILED) {
    HALO_LOG_WARN("worker: mapping the flight table: %s", strerror(errno));
    return;
  }
  halo_remote_flight_t *flight = pointer;
  uint32_t capacity = flight->capacity;
  if (capacity == 0 || capacity > HALO_REMOTE_FLIGHT_ENTRIES) {
    capacity = HALO_REMOTE_FLIGHT_ENTRIES;
  }
  uint32_t *free_list = calloc(capacity, sizeof(*free_list));
  if (!free_list) {
    munmap(pointer, HALO_REMOTE_FLIGHT_BYTES);
    HALO_LOG_WARN("worker: oom (the flight table's free list)");
    return;
  }
  // Lowest indices first.
  for (uint32_t i = 0; i < capacity; ++i) free_list[i] = capacity - 1 - i;
  pthread_mutex_lock(&rings->mutex);
  rings->flight_free = free_list;
  rings->flight_free_count = capacity;
  pthread_mutex_unlock(&rings->mutex);
  rings->flight_capacity = capacity;
  rings->flight = flight;
  // From here on the ring loop learns of halod's messages from the table's
  // count (RING_FLIGHT the first of it) instead of a poll(2) per round; the
  // table stays mapped until the process ends.
  halo_remote_link_count_receives(rings->tables.link, &flight->link_sent, 1);
}

// Tells halod that the ring of |session| was not taken: it drains it again.
static void halo_remote_rings_refuse(halo_remote_rings_t *rings,
                                     uint64_t session) {
  halo_remote_ring_session_t message = {.session = session};
  halo_remote_part_t part = {&message, sizeof(message)};
  halo_status_free(halo_remote_link_send(
      rings->tables.link, HALO_REMOTE_RING_REFUSED, 0, &part, 1, -1));
}

static void halo_remote_rings_on_attach(halo_remote_rings_t *rings,
                                        const void *payload, uint64_t length,
                                        int fd) {
  halo_remote_ring_attach_t attach;
  if (length < sizeof(attach) || fd < 0) {
    HALO_LOG_WARN("worker: RING_ATTACH of %llu bytes%s is ignored",
                  (unsigned long long)length, fd < 0 ? " without a memfd" : "");
    return;
  }
  memcpy(&attach, payload, sizeof(attach));
  if (attach.session == 0 ||
      halo_u64_map_get(&rings->sessions, attach.session)) {
    HALO_LOG_WARN(
        "worker: RING_ATTACH of session %llu is ignored: no "
        "session, or attached already",
        (unsigned long long)attach.session);
    return;
  }
  struct stat info;
  if (!halo_ring_capacity_valid(attach.capacity) ||
      attach.map_size < HALO_RING_HEADER_BYTES + (uint64_t)attach.capacity ||
      fstat(fd, &info) != 0 || (uint64_t)info.st_size < attach.map_size ||
      attach.head % HALO_RING_RECORD_ALIGN) {
    HALO_LOG_WARN(
        "worker: RING_ATTACH of session %llu (capacity %u, %llu "
        "bytes) is refused: not a ring",
        (unsigned long long)attach.session, attach.capacity,
        (unsigned long long)attach.map_size);
    halo_remote_rings_refuse(rings, attach.session);
    return;
  }
  void *pointer =
      mmap(NULL, attach.map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (pointer == MAP_FAILED) {
    HALO_LOG_WARN("worker: mapping the ring of session %llu: %s",
                  (unsigned long long)attach.session, strerror(errno));
    halo_remote_rings_refuse(rings, attach.session);
    return;
  }
  halo_remote_ring_session_state_t *session = calloc(1, sizeof(*session));
  halo_status_t status =
      session ? NULL : halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  if (session) {
    session->id = attach.session;
    session->header = pointer;
    session->records = (uint8_t *)pointer + HALO_RING_HEADER_BYTES;
    session->map_size = attach.map_size;
    session->capacity = attach.capacity;
    session->pending_limit = attach.pending_limit;
    memcpy(session->key, attach.key, sizeof(session->key));
    session->head = attach.head;
    session->sequence = attach.sequence;
    session->doorbell = -1;
    halo_u64_map_initialize(&session->grants);
    status = halo_u64_map_put(&rings->sessions, attach.session, session);
  }
  if (status) {
    HALO_LOG_WARN("worker: attaching the ring of session %llu: %s",
                  (unsigned long long)attach.session,
                  halo_status_message(status));
    halo_status_free(status);
    munmap(pointer, attach.map_size);
    if (session) halo_remote_ring_session_free(session);
    halo_remote_rings_refuse(rings, attach.session);
  }
}

static void halo_remote_rings_on_doorbell(halo_remote_rings_t *rings,
                                          const void *payload, uint64_t length,
                                          int *inout_fd) {
  halo_remote_ring_session_t message;
  if (length < sizeof(message) || *inout_fd < 0) return;
  memcpy(&message, payload, sizeof(message));
  halo_remote_ring_session_state_t *session =
      halo_u64_map_get(&rings->sessions, message.session);
  if (!session) return;  // the descriptor is closed by the caller
  int flags = fcntl(*inout_fd, F_GETFL);
  if (flags >= 0) fcntl(*inout_fd, F_SETFL, flags | O_NONBLOCK);
  if (session->doorbell >= 0) close(session->doorbell);
  session->doorbell = *inout_fd;
  *inout_fd = -1;
}

// Resolves a grant's object on this worker; false when it names nothing
// here (the grant is released at once).
static bool halo_remote_rings_resolve(halo_remote_rings_t *rings,
                                      halo_remote_ring_grant_state_t *grant) {
  const halo_remote_ring_tables_t *tables = &rings->tables;
  bool resolved = true;
  pthread_mutex_lock(tables->mutex);
  switch (grant->grant.kind) {
    case HALO_REMOTE_GRANT_QUEUE:
      grant->queue = halo_u64_map_get(tables->queues, grant->grant.object);
      resolved = grant->queue != NULL;
      break;
    case HALO_REMOTE_GRANT_COMMAND_BUFFER:
      grant->command_buffer =
          halo_u64_map_get(tables->command_buffers, grant->grant.object);
      resolved = grant->command_buffer != NULL;
      break;
    case HALO_REMOTE_GRANT_BUFFER:
      break;
    case HALO_REMOTE_GRANT_SEMAPHORE: {
      const halo_remote_mapping_t *mapping =
          halo_u64_map_get(tables->registrations, grant->grant.object);
      uint64_t offset = grant->grant.size;
      resolved = mapping && offset % _Alignof(halo_timeline_slot_t) == 0 &&
                 offset <= mapping->size &&
                 mapping->size - offset >= sizeof(halo_timeline_slot_t);
      if (resolved) {
        grant->slot =
            (halo_timeline_slot_t *)((char *)mapping->pointer + offset);
      }
      break;
    }
    default:
      resolved = false;
      break;
  }
  pthread_mutex_unlock(tables->mutex);
  return resolved;
}

static void halo_remote_rings_on_grant(halo_remote_rings_t *rings,
                                       const void *payload, uint64_t length) {
  halo_remote_ring_grant_t message;
  if (length < sizeof(message)) {
    HALO_LOG_WARN("worker: a RING_GRANT of %llu bytes is ignored",
                  (unsigned long long)length);
    return;
  }
  memcpy(&message, payload, sizeof(message));
  halo_remote_ring_grant_state_t *grant = calloc(1, sizeof(*grant));
  bool usable = grant != NULL;
  if (grant) {
    grant->grant = message;
    if (message.kind == HALO_REMOTE_GRANT_COMMAND_BUFFER) {
      uint64_t slots_size =
          (uint64_t)message.binding_capacity * sizeof(halo_remote_ring_slot_t);
      usable = length - sizeof(message) == slots_size;
      grant->slots = usable ? malloc(slots_size ? slots_size : 1) : NULL;
      usable = usable && grant->slots;
      if (usable) {
        memcpy(grant->slots, (const char *)payload + sizeof(message),
               slots_size);
      }
    }
  }
  halo_remote_ring_session_state_t *session =
      halo_u64_map_get(&rings->sessions, message.session);
  if (session) {
    // A grant of the same handle is replaced: the old one is revoked, even
    // if the new one names nothing here.
    halo_remote_ring_grant_state_t *old = NULL;
    if (message.handle == 0) {
      if (message.kind == HALO_REMOTE_GRANT_QUEUE) {
        old = session->default_queue;
        session->default_queue = NULL;
      }
    } else {
      old = halo_u64_map_remove(&session->grants, message.handle);
    }
    halo_remote_rings_revoke(rings, old);
  }
  usable = usable && session &&
           !(message.handle == 0 && message.kind != HALO_REMOTE_GRANT_QUEUE);
  if (usable) usable = halo_remote_rings_resolve(rings, grant);
  if (usable && message.handle != 0) {
    halo_status_t status =
        halo_u64_map_put(&session->grants, message.handle, grant);
    if (status) {
      halo_status_free(status);
      usable = false;
    }
  } else if (usable) {
    session->default_queue = grant;
  }
  if (!usable && grant) {
    // Unknown here: the supervisor gets its reference back at once.
    HALO_LOG_DEBUG(
        "worker: grant %llu (session %llu, handle 0x%llx, kind "
        "%u) names nothing here: released",
        (unsigned long long)message.grant, (unsigned long long)message.session,
        (unsigned long long)message.handle, message.kind);
    halo_remote_rings_revoke(rings, grant);
  } else if (!usable) {
    HALO_LOG_ERROR(
        "worker: oom for grant %llu (session %llu, handle 0x%llx): it is "
        "not released",
        (unsigned long long)message.grant, (unsigned long long)message.session,
        (unsigned long long)message.handle);
  }
}

static void halo_remote_rings_on_revoke(halo_remote_rings_t *rings,
                                        const void *payload, uint64_t length) {
  halo_remote_ring_revoke_t message;
  if (length < sizeof(message)) return;
  memcpy(&message, payload, sizeof(message));
  halo_remote_ring_session_state_t *session =
      halo_u64_map_get(&rings->sessions, message.session);
  if (!session) return;
  halo_remote_ring_grant_state_t *grant =
      halo_remote_ring_lookup(session, message.handle, message.kind);
  if (!grant) return;
  if (message.handle == 0) {
    session->default_queue = NULL;
  } else {
    halo_u64_map_remove(&session->grants, message.handle);
  }
  halo_remote_rings_revoke(rings, grant);
}

static void halo_remote_rings_on_resume(halo_remote_rings_t *rings,
                                        const void *payload, uint64_t length) {
  halo_remote_ring_position_t message;
  if (length < sizeof(message)) return;
  memcpy(&message, payload, sizeof(message));
  halo_remote_ring_session_state_t *session =
      halo_u64_map_get(&rings->sessions, message.session);
  if (!session) return;
  session->head = message.head;
  session->sequence = message.sequence;
  session->bounced = false;
  session->snapshot_valid = false;  // the next round's snapshot
}

// Answers a RING_DETACH sent as a call (|id| nonzero): where the worker
// stopped reading the ring, |head| and |sequence| after the last record it
// took (|code| NOT_FOUND: it never held the ring).
static void halo_remote_rings_reply_detach(halo_remote_rings_t *rings,
                                           uint64_t id, halo_status_code_t code,
                                           uint64_t head, uint64_t sequence) {
  if (!id) return;
  halo_remote_reply_t reply = {.code = (int32_t)code,
                               .values = {head, sequence}};
  halo_remote_part_t part = {&reply, sizeof(reply)};
  halo_status_free(halo_remote_link_send(rings->tables.link, HALO_REMOTE_REPLY,
                                         id, &part, 1, -1));
}

static void halo_remote_rings_on_detach(halo_remote_rings_t *rings, uint64_t id,
                                        const void *payload, uint64_t length) {
  halo_remote_ring_session_t message;
  if (length < sizeof(message)) {
    halo_remote_rings_reply_detach(rings, id, HALO_STATUS_INVALID_ARGUMENT, 0,
                                   0);
    return;
  }
  memcpy(&message, payload, sizeof(message));
  halo_remote_ring_session_state_t *session =
      halo_u64_map_remove(&rings->sessions, message.session);
  if (!session) {
    halo_remote_rings_reply_detach(rings, id, HALO_STATUS_NOT_FOUND, 0, 0);
    return;
  }
  // Read no more from here (messages come between rounds): every record
  // before |head| was taken, none after it will be. A bounced record is at
  // |head|: not taken.
  halo_remote_rings_reply_detach(rings, id, HALO_STATUS_OK, session->head,
                                 session->sequence);
  munmap(session->header, session->map_size);
  session->header = NULL;
  session->records = NULL;
  if (session->doorbell >= 0) close(session->doorbell);
  session->doorbell = -1;
  bool wake = false;
  pthread_mutex_lock(&rings->mutex);
  for (size_t i = 0; i <= session->grants.capacity; ++i) {
    halo_remote_ring_grant_state_t *grant =
        i < session->grants.capacity
            ? (session->grants.entries[i].key ? session->grants.entries[i].value
                                              : NULL)
            : session->default_queue;
    if (grant) wake |= halo_remote_rings_revoke_locked(rings, grant);
  }
  session->default_queue = NULL;
  session->detached = true;
  bool done = session->in_flight == 0;
  pthread_mutex_unlock(&rings->mutex);
  if (wake) pthread_cond_signal(&rings->reports_ready);
  if (done) halo_remote_ring_session_free(session);
}

bool halo_remote_rings_on_message(halo_remote_rings_t *rings,
                                  const halo_remote_header_t *header,
                                  const void *payload, int *inout_fd) {
  switch (header->type) {
    case HALO_REMOTE_RING_FLIGHT:
      halo_remote_rings_on_flight(rings, *inout_fd);
      break;
    case HALO_REMOTE_RING_ATTACH:
      halo_remote_rings_on_attach(rings, payload, header->length, *inout_fd);
      break;
    case HALO_REMOTE_RING_DOORBELL:
      halo_remote_rings_on_doorbell(rings, payload, header->length, inout_fd);
      break;
    case HALO_REMOTE_RING_GRANT:
      halo_remote_rings_on_grant(rings, payload, header->length);
      break;
    case HALO_REMOTE_RING_REVOKE:
      halo_remote_rings_on_revoke(rings, payload, header->length);
      break;
    case HALO_REMOTE_RING_RESUME:
      halo_remote_rings_on_resume(rings, payload, header->length);
      break;
    case HALO_REMOTE_RING_DETACH:
      halo_remote_rings_on_detach(rings, header->id, payload, header->length);
      break;
    default:
      return false;
  }
  return true;
}

halo_status_t halo_remote_rings_create(const halo_remote_ring_tables_t *tables,
                                       halo_remote_rings_t **out_rings) {
  *out_rings = NULL;
  HALO_RETURN_IF_ERROR(halo_ring_library_initialize());
  halo_remote_rings_t *rings = calloc(1, sizeof(*rings));
  if (!rings) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  rings->tables = *tables;
  halo_mutex_initialize(&rings->mutex);
  halo_clock_cond_initialize(&rings->reports_ready);
  halo_u64_map_initialize(&rings->sessions);
  // The reporter takes no asynchronous signals: they stay with the main
  // thread.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_t reporter;
  int error =
      pthread_create(&reporter, NULL, halo_remote_rings_reporter_main, rings);
  pthread_sigmask(SIG_SETMASK, &previous, NULL);
  if (!error) pthread_detach(reporter);
  if (error) {
    pthread_cond_destroy(&rings->reports_ready);
    pthread_mutex_destroy(&rings->mutex);
    free(rings);
    return halo_status_from_errno(error,
                                  "worker: starting the ring reporter thread");
  }
  *out_rings = rings;
  return NULL;
}
