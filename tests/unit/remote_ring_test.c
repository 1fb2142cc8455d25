// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The device worker's submission-ring consumer (hal/remote/remote_ring.h)
// against a real `halod --worker --driver local` process: this test plays
// the supervisor over a real link (hal/remote/remote_link.h) and the client
// on a real ring (common/ring.h), as libhalo writes it. Covers a taken
// execution (RING_COMPLETE, the slot's value and pending, the fill, head,
// the flight table), the records the worker bounces (an ungranted handle, a
// wait not reached, a signal not above pending, a misaligned and a short
// binding, a changed checksum, a SIGNAL record) and that it reads nothing
// more until RING_RESUME, REVOKE of a grant in use (released after its
// execution's RING_COMPLETE) and of an idle one (at once), halod's order
// on a busy link (a REVOKE sent just before a record is seen before it,
// learnt from the flight table's message count; a send that failed before
// its first byte is not counted), DETACH (every
// grant released, those of a running execution after its RING_COMPLETE) and
// the doorbell of an idle worker, DETACH sent as a call (it answers where
// it stopped: at a bounced record; NOT_FOUND for a session it does not
// hold), and the session's pending limit (the
// record past it bounced, its reservation given back). The worker's reporter
// thread sends the completions, several per RING_COMPLETE where several are
// waiting: many executions in flight each complete exactly once, and a buffer
// revoked while several running executions use it is released after all of
// their completions. The worker runs with a report linger of a minute
// (--report-linger-us): the local driver does not store signal values
// itself, so its completions must still come at once (every test here
// would wait a minute otherwise).
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/memfd.h"
#include "common/ring.h"
#include "common/status.h"
#include "common/timeline.h"
#include "hal/remote/remote_link.h"

#define TEST_SESSION 7u
#define TEST_CAPACITY HALO_RING_DEFAULT_CAPACITY
#define TEST_FILL_BYTES 256u
#define TEST_BIG_BYTES (128ull << 20)
#define TEST_PATTERN 0x5a17c0deu
// Handles of the session, and the supervisor's grant ids for them.
#define H_QUEUE 0u  // the default queue
#define H_CB 0x100u
#define H_CB_BIG 0x101u
#define H_BUFFER 0x200u
#define H_BIG 0x201u
#define H_SEM 0x300u
#define H_SEM2 0x301u
#define H_UNGRANTED 0x999u
#define G_QUEUE 1001u
#define G_CB 1002u
#define G_CB_BIG 1003u
#define G_BUFFER 1004u
#define G_BIG 1005u
#define G_SEM 1006u
#define G_SEM2 1007u
#define G_BIG2 1008u
#define G_BIG3 1009u
#define G_BIG4 1010u
// Executions in flight together in test_many_completions and
// test_revoke_busy; the session's pending limit (test_pending_limit).
#define TEST_MANY 48u
#define TEST_BUSY 4u
#define TEST_PENDING_LIMIT 64u
#define TEST_QUEUED 256u
// Rounds of test_link_order.
#define TEST_ORDER_ROUNDS 64u

typedef struct message_t {
  halo_remote_header_t header;
  void *payload;
} message_t;

typedef struct test_t {
  pid_t worker;
  halo_remote_link_t link;
  uint64_t next_request;
  // Received, not yet taken, in the order received; a RING_COMPLETE's
  // completions are queued one by one.
  message_t queued[TEST_QUEUED];
  uint32_t queued_count;
  uint32_t complete_messages;  // RING_COMPLETE messages received
  uint32_t completions;        // completions in them
  // Objects on the worker.
  uint64_t buffer_address;
  uint64_t big_address;
  uint64_t queue_id;
  uint64_t cb_id;
  uint64_t cb_big_id;
  // The timeline page (registered) and the flight table.
  halo_timeline_page_t *page;
  halo_remote_flight_t *flight;
  // The ring, as halod creates it and libhalo writes it.
  halo_ring_header_t *ring;
  uint8_t *records;
  uint8_t key[HALO_RING_KEY_BYTES];
  int doorbell;
  uint64_t tail;
  uint64_t sequence;
  uint64_t next_value;      // of H_SEM
  uint32_t doorbells_rung;  // by publish
} test_t;

static test_t t;

// ---------------------------------------------------------------- link

static int64_t remaining_ms(int64_t deadline_ns) {
  int64_t left = deadline_ns - halo_clock_now_ns();
  return left <= 0 ? 0 : left / 1000000 + 1;
}

static void queue_message(message_t message) {
  if (t.queued_count == TEST_QUEUED)
    fail_msg("%u messages not taken", TEST_QUEUED);
  t.queued[t.queued_count++] = message;
}

// Receives one message. A RING_COMPLETE carries one or more completions
// back to back: each is queued as a RING_COMPLETE of its own.
static void receive_one(void) {
  message_t message;
  int fd = -1;
  halo_status_t status =
      halo_remote_link_receive(&t.link, &message.header, &message.payload, &fd);
  if (status) fail_msg("receive: %s", halo_status_message(status));
  assert_int_equal(fd, -1);
  if (message.header.type != HALO_REMOTE_RING_COMPLETE) {
    queue_message(message);
    return;
  }
  ++t.complete_messages;
  const uint8_t *payload = message.payload;
  uint64_t length = message.header.length;
  uint64_t offset = 0;
  do {
    halo_remote_ring_complete_t complete;
    if (length - offset < sizeof(complete)) {
      fail_msg("RING_COMPLETE of %llu bytes: %llu left at byte %llu",
               (unsigned long long)length,
               (unsigned long long)(length - offset),
               (unsigned long long)offset);
    }
    memcpy(&complete, payload + offset, sizeof(complete));
    uint64_t size = sizeof(complete) +
                    complete.signal_count * sizeof(halo_remote_ring_value_t) +
                    complete.message_length;
    if (size > length - offset) {
      fail_msg("RING_COMPLETE of %llu bytes: a completion of %llu at byte %llu",
               (unsigned long long)length, (unsigned long long)size,
               (unsigned long long)offset);
    }
    message_t one = {.header = message.header, .payload = malloc(size)};
    assert_non_null(one.payload);
    one.header.length = size;
    memcpy(one.payload, payload + offset, size);
    queue_message(one);
    ++t.completions;
    offset += size;
  } while (offset < length);
  free(message.payload);
}

// The first message of |type| (received or within 5 s), taken off the
// queue; the caller frees its payload.
static message_t take(uint32_t type) {
  int64_t deadline = halo_clock_now_ns() + 5000000000ll;
  for (;;) {
    for (uint32_t i = 0; i < t.queued_count; ++i) {
      if (t.queued[i].header.type != type) continue;
      message_t message = t.queued[i];
      memmove(&t.queued[i], &t.queued[i + 1],
              (t.queued_count - i - 1) * sizeof(message_t));
      --t.queued_count;
      return message;
    }
    if (!halo_remote_link_wait(&t.link, 0, (int)remaining_ms(deadline))) {
      fail_msg("no message of type %u within 5 s", type);
    }
    receive_one();
  }
}

// How many completions were received before the first message of |type|
// (received or within 5 s), which stays queued.
static uint32_t completions_before(uint32_t type) {
  int64_t deadline = halo_clock_now_ns() + 5000000000ll;
  for (;;) {
    uint32_t count = 0;
    for (uint32_t i = 0; i < t.queued_count; ++i) {
      if (t.queued[i].header.type == type) return count;
      if (t.queued[i].header.type == HALO_REMOTE_RING_COMPLETE) ++count;
    }
    if (!halo_remote_link_wait(&t.link, 0, (int)remaining_ms(deadline))) {
      fail_msg("no message of type %u within 5 s", type);
    }
    receive_one();
  }
}

// Whether a message of |type| arrives within |ms|.
static bool arrives(uint32_t type, int ms) {
  int64_t deadline = halo_clock_now_ns() + (int64_t)ms * 1000000;
  for (;;) {
    for (uint32_t i = 0; i < t.queued_count; ++i) {
      if (t.queued[i].header.type == type) return true;
    }
    if (!halo_remote_link_wait(&t.link, 0, (int)remaining_ms(deadline))) {
      return false;
    }
    receive_one();
  }
}

static void send_message(uint32_t type, uint64_t id,
                         const halo_remote_part_t *parts, uint32_t count,
                         int fd) {
  halo_status_t status =
      halo_remote_link_send(&t.link, type, id, parts, count, fd);
  if (status) fail_msg("send %u: %s", type, halo_status_message(status));
}

// Sends a request and returns its reply's values; fails on an error reply.
// |out_data| (optional) receives the reply's data (the caller frees it).
static void request(uint32_t type, const halo_remote_part_t *parts,
                    uint32_t count, int fd, uint64_t *out_value,
                    void **out_data) {
  uint64_t id = ++t.next_request;
  send_message(type, id, parts, count, fd);
  message_t reply = take(HALO_REMOTE_REPLY);
  assert_int_equal(reply.header.id, id);
  halo_remote_reply_t header;
  assert_true(reply.header.length >= sizeof(header));
  memcpy(&header, reply.payload, sizeof(header));
  if (header.code != 0) {
    fail_msg("request %u: code %d: %.*s", type, header.code,
             (int)header.message_length,
             (const char *)reply.payload + sizeof(header));
  }
  if (out_value) *out_value = header.values[0];
  if (out_data) {
    *out_data = reply.payload;
    return;
  }
  free(reply.payload);
}

// ---------------------------------------------------------------- ring

// Builds a record in |scratch|: header, then |body| of |body_bytes|.
static uint32_t record_build(uint8_t *scratch, uint16_t type, const void *body,
                             size_t body_bytes) {
  uint32_t length = (uint32_t)((sizeof(halo_ring_record_header_t) + body_bytes +
                                HALO_RING_RECORD_ALIGN - 1) &
                               ~(size_t)(HALO_RING_RECORD_ALIGN - 1));
  memset(scratch, 0, length);
  halo_ring_record_header_t header = {.type = type,
                                      .length = (uint16_t)length,
                                      .sequence = (uint32_t)t.sequence};
  memcpy(scratch, &header, sizeof(header));
  memcpy(scratch + sizeof(header), body, body_bytes);
  return length;
}

// Writes a built record (a PAD first where it would cross the end) and
// publishes it as libhalo does; |corrupt|: a byte of the body changes
// after the seal. Returns the record's head (bytes before it).
static uint64_t ring_publish(uint8_t *scratch, uint32_t length, bool corrupt) {
  uint32_t offset = (uint32_t)(t.tail & (TEST_CAPACITY - 1));
  uint32_t contiguous = TEST_CAPACITY - offset;
  if (length > contiguous) {
    halo_ring_record_header_t pad = {.type = HALO_RING_RECORD_PAD,
                                     .length = (uint16_t)contiguous,
                                     .sequence = (uint32_t)t.sequence++};
    halo_ring_record_seal(t.key, &pad);
    memcpy(t.records + offset, &pad, sizeof(pad));
    t.tail += contiguous;
    offset = 0;
    // The scratch record's sequence moves with it.
    ((halo_ring_record_header_t *)scratch)->sequence = (uint32_t)t.sequence;
  }
  halo_ring_record_seal(t.key, scratch);
  if (corrupt) scratch[sizeof(halo_ring_record_header_t)] ^= 1;
  memcpy(t.records + offset, scratch, length);
  uint64_t head = t.tail;
  t.tail += length;
  ++t.sequence;
  atomic_store_explicit(&t.ring->tail, t.tail, memory_order_release);
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&t.ring->flags, memory_order_seq_cst) &
      HALO_RING_FLAG_NEED_WAKEUP) {
    uint64_t one = 1;
    assert_int_equal(write(t.doorbell, &one, sizeof(one)), sizeof(one));
    ++t.doorbells_rung;
  }
  return head;
}

typedef struct execute_args_t {
  uint64_t command_buffer;
  uint64_t buffer;
  uint64_t offset;
  uint64_t length;
  uint32_t wait_count;
  halo_ring_semaphore_value_t wait;
  halo_ring_semaphore_value_t signal;
  uint32_t flags;
  bool corrupt;
} execute_args_t;

// Publishes an EXECUTE record of one binding, at most one wait and one
// signal. Returns its head.
static uint64_t publish_execute(const execute_args_t *args) {
  _Alignas(16) uint8_t body[512];
  halo_ring_execute_t execute = {.queue = H_QUEUE,
                                 .command_buffer = args->command_buffer,
                                 .binding_count = 1,
                                 .wait_count = args->wait_count,
                                 .signal_count = 1,
                                 .flags = args->flags};
  halo_ring_binding_t binding = {
      .buffer = args->buffer, .offset = args->offset, .length = args->length};
  size_t size = 0;
  memcpy(body + size, &execute, sizeof(execute));
  size += sizeof(execute);
  memcpy(body + size, &binding, sizeof(binding));
  size += sizeof(binding);
  if (args->wait_count) {
    memcpy(body + size, &args->wait, sizeof(args->wait));
    size += sizeof(args->wait);
  }
  memcpy(body + size, &args->signal, sizeof(args->signal));
  size += sizeof(args->signal);
  _Alignas(16) uint8_t scratch[1024];
  uint32_t length = record_build(scratch, HALO_RING_RECORD_EXECUTE, body, size);
  assert_int_equal(length, halo_ring_execute_length(1, args->wait_count, 1));
  return ring_publish(scratch, length, args->corrupt);
}

// A good execute: fills the small buffer and signals H_SEM to the next
// value.
static execute_args_t good_execute(void) {
  return (execute_args_t){
      .command_buffer = H_CB,
      .buffer = H_BUFFER,
      .length = UINT64_MAX,
      .signal = {.semaphore = H_SEM, .value = ++t.next_value},
      .flags = HALO_RING_EXECUTE_ASYNC,
  };
}

// A good execute of the big fill (H_CB_BIG on H_BIG).
static execute_args_t big_execute(void) {
  execute_args_t args = good_execute();
  args.command_buffer = H_CB_BIG;
  args.buffer = H_BIG;
  return args;
}

static void wait_head(uint64_t target) {
  int64_t deadline = halo_clock_now_ns() + 5000000000ll;
  while (atomic_load_explicit(&t.ring->head, memory_order_acquire) < target) {
    if (halo_clock_now_ns() > deadline) {
      fail_msg("head stays at %llu, below %llu",
               (unsigned long long)atomic_load(&t.ring->head),
               (unsigned long long)target);
    }
    usleep(100);
  }
}

// Takes the next completion, of a successful execution of
// |command_buffer_grant| that signaled one semaphore, and checks it.
// Returns it and its signal.
static halo_remote_ring_complete_t take_complete(
    uint64_t command_buffer_grant, halo_remote_ring_value_t *out_signal) {
  message_t message = take(HALO_REMOTE_RING_COMPLETE);
  halo_remote_ring_complete_t complete;
  assert_true(message.header.length >= sizeof(complete));
  memcpy(&complete, message.payload, sizeof(complete));
  assert_int_equal(complete.session, TEST_SESSION);
  assert_true(complete.id & HALO_REMOTE_RING_ID_BIT);
  assert_int_equal(complete.queue_grant, G_QUEUE);
  assert_int_equal(complete.command_buffer_grant, command_buffer_grant);
  if (complete.code != 0) {
    fail_msg("execution failed: code %d: %.*s", complete.code,
             (int)complete.message_length,
             (const char *)message.payload + sizeof(complete) +
                 complete.signal_count * sizeof(halo_remote_ring_value_t));
  }
  assert_true(complete.completed_ns >= complete.issued_ns);
  assert_int_equal(complete.signal_count, 1);
  assert_int_equal(message.header.length,
                   sizeof(complete) + sizeof(halo_remote_ring_value_t));
  memcpy(out_signal, (const char *)message.payload + sizeof(complete),
         sizeof(*out_signal));
  free(message.payload);
  return complete;
}

// The worker reserved |value| of |semaphore_grant|'s slot; the supervisor
// signals it now (the local driver has no device stores: the host path
// signals).
static void signal_slot(uint64_t semaphore_grant, uint64_t value) {
  halo_timeline_slot_t *slot = &t.page->slots[semaphore_grant == G_SEM ? 0 : 1];
  assert_true(atomic_load(&slot->pending) >= value);
  halo_timeline_slot_signal(slot, value);  // raises only
}

// Takes the RING_COMPLETE of an execution that signaled |semaphore_grant|
// to |value|, checks it and signals the slot as the supervisor does.
static void expect_complete(uint64_t command_buffer_grant,
                            uint64_t semaphore_grant, uint64_t value) {
  halo_remote_ring_value_t signal;
  take_complete(command_buffer_grant, &signal);
  assert_int_equal(signal.grant, semaphore_grant);
  assert_int_equal(signal.value, value);
  signal_slot(semaphore_grant, value);
}

// Takes the completions of |count| executions of |command_buffer_grant|
// that signaled H_SEM to |first| .. |first| + |count| - 1, in any order:
// each exactly once, each execution id once.
static void expect_completions(uint64_t command_buffer_grant, uint64_t first,
                               uint32_t count) {
  bool seen[TEST_PENDING_LIMIT] = {false};
  uint64_t ids[TEST_PENDING_LIMIT];
  assert_true(count <= TEST_PENDING_LIMIT);
  for (uint32_t i = 0; i < count; ++i) {
    halo_remote_ring_value_t signal;
    halo_remote_ring_complete_t complete =
        take_complete(command_buffer_grant, &signal);
    assert_int_equal(signal.grant, G_SEM);
    if (signal.value < first || signal.value - first >= count) {
      fail_msg("a completion of value %llu, not in %llu..%llu",
               (unsigned long long)signal.value, (unsigned long long)first,
               (unsigned long long)(first + count - 1));
    }
    if (seen[signal.value - first]) {
      fail_msg("value %llu completed twice", (unsigned long long)signal.value);
    }
    seen[signal.value - first] = true;
    for (uint32_t j = 0; j < i; ++j) {
      assert_int_not_equal(ids[j], complete.id);
    }
    ids[i] = complete.id;
  }
  signal_slot(G_SEM, first + count - 1);
}

static void expect_bounce(uint64_t head, uint64_t sequence) {
  message_t message = take(HALO_REMOTE_RING_BOUNCE);
  halo_remote_ring_position_t position;
  assert_int_equal(message.header.length, sizeof(position));
  memcpy(&position, message.payload, sizeof(position));
  free(message.payload);
  assert_int_equal(position.session, TEST_SESSION);
  assert_int_equal(position.head, head);
  assert_int_equal(position.sequence, sequence);
}

// The ids of one RING_RELEASED message (at most 16).
static uint32_t expect_released(uint64_t *ids) {
  message_t message = take(HALO_REMOTE_RING_RELEASED);
  assert_true(message.header.length % sizeof(uint64_t) == 0);
  uint32_t count = (uint32_t)(message.header.length / sizeof(uint64_t));
  assert_true(count >= 1 && count <= 16);
  memcpy(ids, message.payload, message.header.length);
  free(message.payload);
  return count;
}

static void send_resume(uint64_t head, uint64_t sequence) {
  halo_remote_ring_position_t position = {
      .session = TEST_SESSION, .head = head, .sequence = sequence};
  halo_remote_part_t part = {&position, sizeof(position)};
  send_message(HALO_REMOTE_RING_RESUME, 0, &part, 1, -1);
}

static void send_grant(uint64_t handle, uint64_t grant, uint32_t kind,
                       uint64_t object, uint64_t size,
                       const halo_remote_ring_slot_t *slot) {
  halo_remote_ring_grant_t message = {.session = TEST_SESSION,
                                      .handle = handle,
                                      .grant = grant,
                                      .kind = kind,
                                      .binding_capacity = slot ? 1 : 0,
                                      .object = object,
                                      .size = size};
  halo_remote_part_t parts[2] = {{&message, sizeof(message)},
                                 {slot, slot ? sizeof(*slot) : 0}};
  send_message(HALO_REMOTE_RING_GRANT, 0, parts, 2, -1);
}

static void send_revoke(uint64_t handle, uint32_t kind) {
  halo_remote_ring_revoke_t message = {
      .session = TEST_SESSION, .handle = handle, .kind = kind};
  halo_remote_part_t part = {&message, sizeof(message)};
  send_message(HALO_REMOTE_RING_REVOKE, 0, &part, 1, -1);
}

// Grants H_BIG as |grant| and publishes |count| big executions; returns
// the value the first signals.
static uint64_t publish_big(uint64_t grant, uint32_t count) {
  send_grant(H_BIG, grant, HALO_REMOTE_GRANT_BUFFER, t.big_address,
             TEST_BIG_BYTES, NULL);
  uint64_t first = t.next_value + 1;
  for (uint32_t i = 0; i < count; ++i) {
    execute_args_t args = big_execute();
    publish_execute(&args);
  }
  return first;
}

// Publishes a good execute and checks that the worker takes it: its
// completion, and head past it.
static void expect_good_taken(void) {
  execute_args_t args = good_execute();
  publish_execute(&args);
  expect_complete(G_CB, G_SEM, args.signal.value);
  wait_head(t.tail);
}

static bool flight_empty_now(void) {
  for (uint32_t i = 0; i < HALO_REMOTE_FLIGHT_ENTRIES; ++i) {
    if (atomic_load(&t.flight->entries[i].id) != 0) return false;
  }
  return true;
}

// Whether some execution in the flight table still runs (not completed).
static bool flight_running(void) {
  for (uint32_t i = 0; i < HALO_REMOTE_FLIGHT_ENTRIES; ++i) {
    halo_remote_flight_entry_t *entry = &t.flight->entries[i];
    if (atomic_load(&entry->id) != 0 &&
        halo_remote_flight_entry_running(entry)) {
      return true;
    }
  }
  return false;
}

// Whether the flight table empties within 5 s: an entry is freed once the
// reporter sent its execution's RING_COMPLETE, just after the send.
static bool flight_empty(void) {
  int64_t deadline = halo_clock_now_ns() + 5000000000ll;
  while (!flight_empty_now()) {
    if (halo_clock_now_ns() > deadline) return false;
    usleep(100);
  }
  return true;
}

// ---------------------------------------------------------------- setup

static uint64_t allocate(uint64_t size) {
  halo_remote_allocate_t message = {.size = size};
  halo_remote_part_t part = {&message, sizeof(message)};
  uint64_t address = 0;
  request(HALO_REMOTE_ALLOCATE, &part, 1, -1, &address, NULL);
  assert_true(address != 0);
  return address;
}

// A recording of one FILL of |bytes| into binding slot 0.
static uint64_t prepare_fill(uint64_t bytes) {
  halo_remote_prepare_t prepare = {.flags = HALO_HAL_RECORDING_REUSABLE,
                                   .binding_capacity = 1,
                                   .command_count = 1,
                                   .data_size = 4};
  halo_hal_command_t command;
  memset(&command, 0, sizeof(command));
  command.type = HALO_HAL_COMMAND_FILL;
  command.target = (halo_hal_buffer_ref_t){.slot = 0, .length = bytes};
  command.source.slot = HALO_HAL_SLOT_DIRECT;
  command.workgroup_count.slot = HALO_HAL_SLOT_DIRECT;
  command.data_size = 4;
  uint32_t pattern = TEST_PATTERN;
  halo_remote_part_t parts[3] = {{&prepare, sizeof(prepare)},
                                 {&command, sizeof(command)},
                                 {&pattern, sizeof(pattern)}};
  uint64_t id = 0;
  request(HALO_REMOTE_PREPARE, parts, 3, -1, &id, NULL);
  assert_true(id != 0);
  return id;
}

// Attaches session |id|'s ring, made as halod_ring_create makes it (sealed,
// checksummed with |key|, NEED_WAKEUP set), and gives it a doorbell where
// |out_doorbell| is not NULL. Returns the test's mapping of the ring.
static halo_ring_header_t *attach_ring(uint64_t id,
                                       const uint8_t key[HALO_RING_KEY_BYTES],
                                       int *out_doorbell) {
  int fd;
  uint64_t map_size = HALO_RING_HEADER_BYTES + TEST_CAPACITY;
  assert_null(halo_memfd_create("remote-ring-test-ring", map_size, &fd));
  assert_null(halo_memfd_seal(fd, HALO_SEALS_FIXED_SIZE));
  void *pointer;
  assert_null(halo_memfd_map(fd, map_size, PROT_READ | PROT_WRITE, &pointer));
  halo_ring_header_t *ring = pointer;
  ring->magic = HALO_RING_MAGIC;
  ring->version = HALO_RING_VERSION;
  ring->capacity = TEST_CAPACITY;
  ring->max_record_bytes = HALO_RING_MAX_RECORD_BYTES;
  memcpy(ring->checksum_key, key, HALO_RING_KEY_BYTES);
  atomic_store(&ring->flags, HALO_RING_FLAG_NEED_WAKEUP);
  halo_remote_ring_attach_t attach = {.session = id,
                                      .map_size = map_size,
                                      .capacity = TEST_CAPACITY,
                                      .pending_limit = TEST_PENDING_LIMIT};
  memcpy(attach.key, key, sizeof(attach.key));
  halo_remote_part_t part = {&attach, sizeof(attach)};
  send_message(HALO_REMOTE_RING_ATTACH, 0, &part, 1, fd);
  close(fd);
  if (out_doorbell) {
    *out_doorbell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    assert_true(*out_doorbell >= 0);
    halo_remote_ring_session_t session = {.session = id};
    part = (halo_remote_part_t){&session, sizeof(session)};
    send_message(HALO_REMOTE_RING_DOORBELL, 0, &part, 1, *out_doorbell);
  }
  return ring;
}

static void send_detach(uint64_t id) {
  halo_remote_ring_session_t session = {.session = id};
  halo_remote_part_t part = {&session, sizeof(session)};
  send_message(HALO_REMOTE_RING_DETACH, 0, &part, 1, -1);
}

static int setup(void **state) {
  (void)state;
  memset(&t, 0, sizeof(t));
  assert_null(halo_ring_library_initialize());
  int pair[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  // The worker's end sends little before it waits for this test to read
  // (test_outcome_before_report stops reading to hold its reporter).
  int send_buffer = 4096;
  assert_int_equal(setsockopt(pair[1], SOL_SOCKET, SO_SNDBUF, &send_buffer,
                              sizeof(send_buffer)),
                   0);
  char supervisor[32];
  snprintf(supervisor, sizeof(supervisor), "%d", (int)getpid());
  t.worker = fork();
  assert_true(t.worker >= 0);
  if (t.worker == 0) {
    // The worker's link is descriptor 3 (daemon/worker_process.c).
    if (dup2(pair[1], 3) < 0) _exit(126);
    execl(HALO_TEST_HALOD, "halod", "--worker", "--driver", "local", "--device",
          "0", "--poll-us", "1000", "--report-linger-us", "60000000",
          "--log-level", "warn", "--supervisor", supervisor, (char *)NULL);
    _exit(127);
  }
  close(pair[1]);
  halo_remote_link_initialize(&t.link, pair[0]);
  message_t ready = take(HALO_REMOTE_READY);
  halo_remote_ready_t info;
  assert_true(ready.header.length >= sizeof(info));
  memcpy(&info, ready.payload, sizeof(info));
  free(ready.payload);
  assert_int_equal(info.version, HALO_REMOTE_LINK_VERSION);

  t.buffer_address = allocate(4096);
  t.big_address = allocate(TEST_BIG_BYTES);

  // The timeline page: slots 0 (H_SEM) and 1 (H_SEM2) in service at 0.
  int page_fd;
  assert_null(halo_memfd_create("remote-ring-test-page",
                                HALO_TIMELINE_PAGE_SIZE, &page_fd));
  void *pointer;
  assert_null(halo_memfd_map(page_fd, HALO_TIMELINE_PAGE_SIZE,
                             PROT_READ | PROT_WRITE, &pointer));
  t.page = pointer;
  halo_timeline_page_initialize(t.page, 1);
  halo_timeline_slot_activate(&t.page->slots[0], 0);
  halo_timeline_slot_activate(&t.page->slots[1], 0);
  halo_remote_register_t reg = {.key = (uint64_t)(uintptr_t)t.page,
                                .size = HALO_TIMELINE_PAGE_SIZE};
  halo_remote_part_t part = {&reg, sizeof(reg)};
  request(HALO_REMOTE_REGISTER_HOST, &part, 1, page_fd, NULL, NULL);
  close(page_fd);

  t.cb_id = prepare_fill(TEST_FILL_BYTES);
  t.cb_big_id = prepare_fill(TEST_BIG_BYTES);
  halo_remote_queue_t queue = {0};
  part = (halo_remote_part_t){&queue, sizeof(queue)};
  request(HALO_REMOTE_CREATE_QUEUE, &part, 1, -1, &t.queue_id, NULL);
  assert_true(t.queue_id != 0);

  // The flight table.
  int flight_fd;
  assert_null(halo_memfd_create("remote-ring-test-flight",
                                HALO_REMOTE_FLIGHT_BYTES, &flight_fd));
  assert_null(halo_memfd_map(flight_fd, HALO_REMOTE_FLIGHT_BYTES,
                             PROT_READ | PROT_WRITE, &pointer));
  t.flight = pointer;
  t.flight->capacity = HALO_REMOTE_FLIGHT_ENTRIES;
  // As halod: every message from RING_FLIGHT on is counted in the table.
  assert_null(halo_remote_link_send_counted(&t.link, &t.flight->link_sent,
                                            HALO_REMOTE_RING_FLIGHT, 0, NULL, 0,
                                            flight_fd));
  assert_int_equal(atomic_load(&t.flight->link_sent), 1);
  close(flight_fd);

  // The ring, as halod_ring_create makes it.
  halo_ring_key_generate(t.key);
  t.ring = attach_ring(TEST_SESSION, t.key, &t.doorbell);
  t.records = (uint8_t *)t.ring + HALO_RING_HEADER_BYTES;

  halo_remote_ring_slot_t slot = {
      .min_length = TEST_FILL_BYTES, .alignment = 16, .used = 1};
  halo_remote_ring_slot_t big_slot = {
      .min_length = TEST_BIG_BYTES, .alignment = 16, .used = 1};
  send_grant(H_QUEUE, G_QUEUE, HALO_REMOTE_GRANT_QUEUE, t.queue_id, 0, NULL);
  send_grant(H_CB, G_CB, HALO_REMOTE_GRANT_COMMAND_BUFFER, t.cb_id, 0, &slot);
  send_grant(H_CB_BIG, G_CB_BIG, HALO_REMOTE_GRANT_COMMAND_BUFFER, t.cb_big_id,
             0, &big_slot);
  send_grant(H_BUFFER, G_BUFFER, HALO_REMOTE_GRANT_BUFFER, t.buffer_address,
             4096, NULL);
  send_grant(H_BIG, G_BIG, HALO_REMOTE_GRANT_BUFFER, t.big_address,
             TEST_BIG_BYTES, NULL);
  send_grant(H_SEM, G_SEM, HALO_REMOTE_GRANT_SEMAPHORE, reg.key,
             offsetof(halo_timeline_page_t, slots[0]), NULL);
  send_grant(H_SEM2, G_SEM2, HALO_REMOTE_GRANT_SEMAPHORE, reg.key,
             offsetof(halo_timeline_page_t, slots[1]), NULL);
  // A grant of a semaphore in a page never registered is released at once.
  send_grant(0x400, 1099, HALO_REMOTE_GRANT_SEMAPHORE, 0xdead000, 0, NULL);
  uint64_t ids[16];
  assert_int_equal(expect_released(ids), 1);
  assert_int_equal(ids[0], 1099);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  halo_remote_link_deinitialize(&t.link);  // the worker ends
  int status = 0;
  assert_int_equal(waitpid(t.worker, &status, 0), t.worker);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  for (uint32_t i = 0; i < t.queued_count; ++i) free(t.queued[i].payload);
  print_message("%u completions came in %u RING_COMPLETE messages\n",
                t.completions, t.complete_messages);
  close(t.doorbell);
  return 0;
}

// ---------------------------------------------------------------- tests

static void test_taken(void **state) {
  (void)state;
  execute_args_t args = good_execute();
  publish_execute(&args);
  expect_complete(G_CB, G_SEM, args.signal.value);
  halo_timeline_slot_t *slot = &t.page->slots[0];
  assert_int_equal(atomic_load(&slot->value), args.signal.value);
  assert_int_equal(atomic_load(&slot->pending), args.signal.value);
  wait_head(t.tail);
  assert_int_equal(atomic_load(&t.ring->head), t.tail);
  assert_true(flight_empty());
  halo_remote_memory_t read = {.address = t.buffer_address,
                               .length = TEST_FILL_BYTES + 16};
  halo_remote_part_t part = {&read, sizeof(read)};
  void *reply;
  request(HALO_REMOTE_READ, &part, 1, -1, NULL, &reply);
  halo_remote_reply_t header;
  memcpy(&header, reply, sizeof(header));
  const uint8_t *bytes =
      (const uint8_t *)reply + sizeof(header) + header.message_length;
  for (uint32_t i = 0; i < TEST_FILL_BYTES; i += 4) {
    uint32_t word;
    memcpy(&word, bytes + i, sizeof(word));
    assert_int_equal(word, TEST_PATTERN);
  }
  uint32_t past;
  memcpy(&past, bytes + TEST_FILL_BYTES, sizeof(past));
  assert_int_not_equal(past, TEST_PATTERN);  // fresh memory is not the fill
  free(reply);
}

// Publishes |bad| (or the SIGNAL record when NULL) and a good record after
// it: the worker bounces the first at its head and reads nothing more until
// the supervisor resumes it past the record; then it takes the good one.
static void check_bounce(const execute_args_t *bad) {
  uint64_t head;
  if (bad) {
    head = publish_execute(bad);
  } else {
    _Alignas(16) uint8_t scratch[64];
    halo_ring_semaphore_value_t value = {.semaphore = H_SEM,
                                         .value = t.next_value + 1000};
    uint32_t length =
        record_build(scratch, HALO_RING_RECORD_SIGNAL, &value, sizeof(value));
    assert_int_equal(length, HALO_RING_SIGNAL_LENGTH);
    head = ring_publish(scratch, length, false);
  }
  // Its sequence (a PAD before it moved its position).
  uint64_t sequence = t.sequence - 1;
  uint64_t after = t.tail;
  execute_args_t good = good_execute();
  publish_execute(&good);
  expect_bounce(head, sequence);
  // Nothing more is read: no completion, head stays before the record.
  assert_false(arrives(HALO_REMOTE_RING_COMPLETE, 50));
  assert_int_equal(atomic_load(&t.ring->head), head);
  send_resume(after, sequence + 1);
  expect_complete(G_CB, G_SEM, good.signal.value);
  wait_head(t.tail);
  assert_true(flight_empty());
}

static void test_bounce_ungranted(void **state) {
  (void)state;
  execute_args_t bad = good_execute();
  --t.next_value;  // not taken: the value stays free
  bad.command_buffer = H_UNGRANTED;
  check_bounce(&bad);
  bad = good_execute();
  --t.next_value;
  bad.buffer = H_UNGRANTED;
  check_bounce(&bad);
}

static void test_bounce_wait_not_reached(void **state) {
  (void)state;
  execute_args_t bad = good_execute();
  --t.next_value;
  bad.wait_count = 1;
  bad.wait = (halo_ring_semaphore_value_t){.semaphore = H_SEM2, .value = 1};
  check_bounce(&bad);
}

static void test_bounce_signal_not_above_pending(void **state) {
  (void)state;
  // The supervisor promised value 50 of H_SEM2 (its value is 0).
  assert_true(halo_timeline_slot_reserve(&t.page->slots[1], 50, NULL));
  execute_args_t bad = good_execute();
  --t.next_value;
  bad.signal = (halo_ring_semaphore_value_t){.semaphore = H_SEM2, .value = 50};
  check_bounce(&bad);
  assert_int_equal(atomic_load(&t.page->slots[1].pending), 50);
}

static void test_bounce_bindings(void **state) {
  (void)state;
  execute_args_t bad = good_execute();
  --t.next_value;
  bad.offset = 4;  // the slot needs 16-byte alignment
  check_bounce(&bad);
  bad = good_execute();
  --t.next_value;
  bad.length = TEST_FILL_BYTES - 16;  // the slot needs 256 bytes
  check_bounce(&bad);
  bad = good_execute();
  --t.next_value;
  bad.offset = 4096 - 128;  // 128 bytes left to the buffer's end
  check_bounce(&bad);
}

static void test_bounce_checksum(void **state) {
  (void)state;
  execute_args_t bad = good_execute();
  --t.next_value;
  bad.corrupt = true;
  check_bounce(&bad);
}

static void test_bounce_signal_record(void **state) {
  (void)state;
  check_bounce(NULL);
}

// A grant in use by a running execution is released only after that
// execution's RING_COMPLETE; an idle one at once.
static void test_revoke(void **state) {
  (void)state;
  execute_args_t args = big_execute();
  publish_execute(&args);
  wait_head(t.tail);  // taken: running (or done already)
  bool running = flight_running();
  send_revoke(H_BIG, HALO_REMOTE_GRANT_BUFFER);
  // Received in order: the COMPLETE must be queued when RELEASED comes.
  uint64_t ids[16];
  assert_int_equal(expect_released(ids), 1);
  assert_int_equal(ids[0], G_BIG);
  bool complete_first = false;
  for (uint32_t i = 0; i < t.queued_count; ++i) {
    if (t.queued[i].header.type == HALO_REMOTE_RING_COMPLETE) {
      complete_first = true;
    }
  }
  assert_true(complete_first);
  expect_complete(G_CB_BIG, G_SEM, args.signal.value);
  print_message("the execution was %s at REVOKE\n",
                running ? "running" : "done");
  // A record naming the revoked handle is bounced now.
  execute_args_t bad = big_execute();
  --t.next_value;
  uint64_t head = publish_execute(&bad);
  expect_bounce(head, t.sequence - 1);
  send_resume(t.tail, t.sequence);
  // An idle grant: released at once.
  send_revoke(H_SEM2, HALO_REMOTE_GRANT_SEMAPHORE);
  assert_int_equal(expect_released(ids), 1);
  assert_int_equal(ids[0], G_SEM2);
}

// halod's order on a busy link: a REVOKE sent just before a record is
// published is seen before the record (bounced), every round; the grant
// comes back with the RESUME (the ring is read again only after it) and
// the next record is taken. The worker's ring loop learns of the messages
// from the flight table's count, not a poll(2) of the socket each round
// (remote_link.h): a loop that missed the REVOKE would take the record.
static void test_link_order(void **state) {
  (void)state;
  for (uint32_t round = 0; round < TEST_ORDER_ROUNDS; ++round) {
    send_revoke(H_BUFFER, HALO_REMOTE_GRANT_BUFFER);
    execute_args_t bad = good_execute();
    --t.next_value;
    uint64_t head = publish_execute(&bad);
    expect_bounce(head, t.sequence - 1);
    uint64_t ids[16];
    assert_int_equal(expect_released(ids), 1);
    assert_int_equal(ids[0], G_BUFFER);
    send_grant(H_BUFFER, G_BUFFER, HALO_REMOTE_GRANT_BUFFER, t.buffer_address,
               4096, NULL);
    send_resume(t.tail, t.sequence);
    expect_good_taken();
  }
}

// A send that fails before its first byte (a closed descriptor to pass:
// EBADF) leaves the link usable and takes its count back, so the worker's
// ring loop, which trusts the count, does not wait for a message that
// never comes: the next record is still taken.
static void test_failed_send_uncounted(void **state) {
  (void)state;
  uint64_t before = atomic_load(&t.flight->link_sent);
  int fd = eventfd(0, 0);
  assert_true(fd >= 0);
  close(fd);
  halo_remote_ring_session_t session = {.session = TEST_SESSION};
  halo_remote_part_t part = {&session, sizeof(session)};
  halo_status_t status = halo_remote_link_send(
      &t.link, HALO_REMOTE_RING_DOORBELL, 0, &part, 1, fd);
  assert_non_null(status);
  halo_status_free(status);
  assert_int_equal(atomic_load(&t.flight->link_sent), before);
  expect_good_taken();
}

// Attaches an empty ring (a session that publishes nothing), with a
// doorbell of its own where |out_doorbell| is not NULL.
static void attach_quiet(uint64_t id, int *out_doorbell) {
  uint8_t key[HALO_RING_KEY_BYTES];
  halo_ring_key_generate(key);
  halo_ring_header_t *ring = attach_ring(id, key, out_doorbell);
  munmap(ring, HALO_RING_HEADER_BYTES + TEST_CAPACITY);
}

// Whether |fd| is readable now (poll(2), nothing consumed).
static bool readable(int fd) {
  struct pollfd poll_fd = {.fd = fd, .events = POLLIN};
  return poll(&poll_fd, 1, 0) == 1;
}

// Waits until the worker sleeps (NEED_WAKEUP set on the test's ring), then
// a while more: asleep in poll(2), not spinning.
static void wait_asleep(void) {
  int64_t deadline = halo_clock_now_ns() + 5000000000ll;
  while (!(atomic_load(&t.ring->flags) & HALO_RING_FLAG_NEED_WAKEUP)) {
    if (halo_clock_now_ns() > deadline) fail_msg("the worker never slept");
    usleep(1000);
  }
  usleep(20000);
  assert_true(atomic_load(&t.ring->flags) & HALO_RING_FLAG_NEED_WAKEUP);
}

// Past the polling window the worker sleeps with NEED_WAKEUP set; a record
// published then rings the doorbell and is taken. Beside the test's ring,
// a session with a doorbell and nothing to publish, and one without a
// doorbell: whichever doorbell rang is the one drained (its count read, so
// that the next sleep blocks).
static void test_doorbell(void **state) {
  (void)state;
  int quiet_doorbell = -1;
  attach_quiet(TEST_SESSION + 1, &quiet_doorbell);
  attach_quiet(TEST_SESSION + 2, NULL);
  // The quiet session's doorbell wakes it and is drained.
  wait_asleep();
  uint64_t one = 1;
  assert_int_equal(write(quiet_doorbell, &one, sizeof(one)), sizeof(one));
  int64_t deadline = halo_clock_now_ns() + 5000000000ll;
  while (readable(quiet_doorbell)) {
    if (halo_clock_now_ns() > deadline) fail_msg("the doorbell was not read");
    usleep(1000);
  }
  // The test's ring: its record rings its doorbell, is taken, and the
  // doorbell is drained.
  wait_asleep();
  uint32_t rung = t.doorbells_rung;
  execute_args_t args = good_execute();
  publish_execute(&args);
  assert_int_equal(t.doorbells_rung, rung + 1);  // it woke by the doorbell
  expect_complete(G_CB, G_SEM, args.signal.value);
  wait_head(t.tail);
  assert_false(readable(t.doorbell));
  send_detach(TEST_SESSION + 1);
  send_detach(TEST_SESSION + 2);
  close(quiet_doorbell);
}

static uint32_t flight_count(void) {
  uint32_t count = 0;
  for (uint32_t i = 0; i < HALO_REMOTE_FLIGHT_ENTRIES; ++i) {
    halo_remote_flight_entry_t *entry = &t.flight->entries[i];
    if (atomic_load(&entry->id) != 0 &&
        halo_remote_flight_entry_running(entry)) {
      ++count;
    }
  }
  return count;
}

// Many executions in flight at once: every one completes exactly once, in
// RING_COMPLETE messages that carry one or more completions each.
static void test_many_completions(void **state) {
  (void)state;
  uint32_t messages = t.complete_messages;
  uint64_t first = t.next_value + 1;
  for (uint32_t i = 0; i < TEST_MANY; ++i) {
    execute_args_t args = good_execute();
    publish_execute(&args);
  }
  expect_completions(G_CB, first, TEST_MANY);
  // None twice, none more.
  assert_false(arrives(HALO_REMOTE_RING_COMPLETE, 50));
  print_message("%u completions in %u RING_COMPLETE messages\n", TEST_MANY,
                t.complete_messages - messages);
  wait_head(t.tail);
  assert_true(flight_empty());
}

// An execution's flight entry outlives its completion until the reporter
// sent its RING_COMPLETE, and holds its outcome and values meanwhile: a
// worker lost in between still tells halod how the execution ended. This
// test stops reading the link, so the reporter's sends block once the
// worker's small send buffer is full, while the executions complete (one
// every 2 ms, so that each goes in a message of its own).
static void test_outcome_before_report(void **state) {
  (void)state;
  uint64_t first = t.next_value + 1;
  for (uint32_t i = 0; i < TEST_MANY; ++i) {
    execute_args_t args = good_execute();
    publish_execute(&args);
    usleep(2000);
  }
  wait_head(t.tail);
  uint32_t unreported = 0;
  int64_t deadline = halo_clock_now_ns() + 5000000000ll;
  while (unreported == 0 && halo_clock_now_ns() < deadline) {
    for (uint32_t i = 0; i < HALO_REMOTE_FLIGHT_ENTRIES; ++i) {
      halo_remote_flight_entry_t *entry = &t.flight->entries[i];
      if (atomic_load(&entry->id) == 0) continue;
      uint32_t completed = atomic_load(&entry->completed);
      if (!(completed & HALO_REMOTE_FLIGHT_COMPLETED)) continue;
      assert_int_equal(completed, HALO_REMOTE_FLIGHT_COMPLETED);  // OK
      assert_int_equal(entry->session, TEST_SESSION);
      assert_int_equal(entry->signal_count, 1);
      assert_int_equal(entry->signal_grants[0], G_SEM);
      assert_true(entry->signal_values[0] >= first &&
                  entry->signal_values[0] < first + TEST_MANY);
      ++unreported;
    }
    if (unreported == 0) usleep(1000);
  }
  print_message(
      "%u of %u completed executions' entries held their outcome while the "
      "reporter could not send\n",
      unreported, TEST_MANY);
  assert_true(unreported >= 1);
  expect_completions(G_CB, first, TEST_MANY);
  assert_true(flight_empty());
}

// A buffer revoked while several taken executions use it is released only
// after the RING_COMPLETE of every one of them.
static void test_revoke_busy(void **state) {
  (void)state;
  // test_revoke revoked H_BIG: granted again.
  uint64_t first = publish_big(G_BIG2, TEST_BUSY);
  wait_head(t.tail);  // all taken: running (or done already)
  uint32_t running = flight_count();
  send_revoke(H_BIG, HALO_REMOTE_GRANT_BUFFER);
  assert_int_equal(completions_before(HALO_REMOTE_RING_RELEASED), TEST_BUSY);
  uint64_t ids[16];
  assert_int_equal(expect_released(ids), 1);
  assert_int_equal(ids[0], G_BIG2);
  expect_completions(G_CB_BIG, first, TEST_BUSY);
  print_message("%u of %u executions were in flight at REVOKE\n", running,
                TEST_BUSY);
  assert_true(flight_empty());
}

// The session's pending limit: with that many of its executions in
// flight the next record is bounced, and the value its signal reserved is
// given back (the supervisor may take the record).
static void test_pending_limit(void **state) {
  (void)state;
  // The records all wait behind a bounced one, so that the worker takes
  // them back to back once resumed, long before the first fill ends.
  execute_args_t stop = good_execute();
  --t.next_value;
  stop.buffer = H_UNGRANTED;
  uint64_t stop_head = publish_execute(&stop);
  expect_bounce(stop_head, t.sequence - 1);
  uint64_t resume_head = t.tail, resume_sequence = t.sequence;
  uint64_t first = publish_big(G_BIG4, TEST_PENDING_LIMIT);
  execute_args_t over = big_execute();
  uint64_t head = publish_execute(&over);
  uint64_t over_sequence = t.sequence - 1;
  send_resume(resume_head, resume_sequence);
  expect_bounce(head, over_sequence);
  assert_int_equal(atomic_load(&t.page->slots[0].pending),
                   over.signal.value - 1);
  --t.next_value;
  send_resume(t.tail, t.sequence);
  expect_completions(G_CB_BIG, first, TEST_PENDING_LIMIT);
  send_revoke(H_BIG, HALO_REMOTE_GRANT_BUFFER);
  uint64_t ids[16];
  assert_int_equal(expect_released(ids), 1);
  assert_int_equal(ids[0], G_BIG4);
  assert_true(flight_empty());
}

// DETACH releases every grant left: those a running execution uses after
// its RING_COMPLETE.
// An ATTACH the worker cannot take (its memfd is smaller than the ring it
// names) is refused, naming the session, so that halod drains the ring
// again; an ATTACH of a session it holds already is not.
static void test_attach_refused(void **state) {
  (void)state;
  const uint64_t session = TEST_SESSION + 100;
  int fd = -1;
  assert_null(halo_memfd_create("remote-ring-test-short", 4096, &fd));
  halo_remote_ring_attach_t attach = {
      .session = session,
      .map_size = HALO_RING_HEADER_BYTES + TEST_CAPACITY,
      .capacity = TEST_CAPACITY,
      .pending_limit = TEST_PENDING_LIMIT};
  halo_remote_part_t part = {&attach, sizeof(attach)};
  send_message(HALO_REMOTE_RING_ATTACH, 0, &part, 1, fd);
  close(fd);
  message_t refused = take(HALO_REMOTE_RING_REFUSED);
  assert_int_equal(refused.header.length, sizeof(halo_remote_ring_session_t));
  halo_remote_ring_session_t named;
  memcpy(&named, refused.payload, sizeof(named));
  assert_int_equal(named.session, session);
  free(refused.payload);
  // The test's own ring again (attached in setup): ignored, not refused.
  assert_null(halo_memfd_create("remote-ring-test-again", 4096, &fd));
  attach.session = TEST_SESSION;
  send_message(HALO_REMOTE_RING_ATTACH, 0, &part, 1, fd);
  close(fd);
  assert_false(arrives(HALO_REMOTE_RING_REFUSED, 200));
  // And the ring still works.
  expect_good_taken();
}

static void test_detach(void **state) {
  (void)state;
  send_grant(H_BIG, G_BIG3, HALO_REMOTE_GRANT_BUFFER, t.big_address,
             TEST_BIG_BYTES, NULL);
  execute_args_t args = big_execute();
  publish_execute(&args);
  wait_head(t.tail);
  bool running = flight_running();
  send_detach(TEST_SESSION);
  uint64_t want[] = {G_QUEUE, G_CB, G_CB_BIG, G_BUFFER, G_SEM, G_BIG3};
  bool used[] = {true, false, true, false, true, true};
  bool seen[6] = {false};
  uint32_t seen_count = 0;
  while (seen_count < 6) {
    uint32_t before = completions_before(HALO_REMOTE_RING_RELEASED);
    uint64_t ids[16];
    uint32_t count = expect_released(ids);
    for (uint32_t i = 0; i < count; ++i) {
      bool known = false;
      for (uint32_t j = 0; j < 6; ++j) {
        if (ids[i] != want[j]) continue;
        assert_false(seen[j]);
        seen[j] = true;
        ++seen_count;
        known = true;
        if (used[j] && before != 1) {
          fail_msg("grant %llu released before the completion that used it",
                   (unsigned long long)ids[i]);
        }
      }
      if (!known) fail_msg("released grant %llu", (unsigned long long)ids[i]);
    }
  }
  expect_complete(G_CB_BIG, G_SEM, args.signal.value);
  print_message("the execution was %s at DETACH\n",
                running ? "running" : "done");
  // A grant for the detached session is released at once.
  send_grant(H_BUFFER, 2000, HALO_REMOTE_GRANT_BUFFER, t.buffer_address, 4096,
             NULL);
  uint64_t ids[16];
  assert_int_equal(expect_released(ids), 1);
  assert_int_equal(ids[0], 2000);
}

// A DETACH sent as a call (halod's, for a session lost while this worker
// lives) answers where the worker stopped: past the records it took, at a
// record it bounced (not taken), and it takes nothing after. The session's
// grants go as with any DETACH. A session it does not hold: NOT_FOUND.
static void test_detach_call(void **state) {
  (void)state;
  // The session again (test_detach detached it), on a fresh ring.
  close(t.doorbell);
  t.tail = 0;
  t.sequence = 0;
  t.ring = attach_ring(TEST_SESSION, t.key, &t.doorbell);
  t.records = (uint8_t *)t.ring + HALO_RING_HEADER_BYTES;
  halo_remote_ring_slot_t slot = {
      .min_length = TEST_FILL_BYTES, .alignment = 16, .used = 1};
  send_grant(H_QUEUE, G_QUEUE, HALO_REMOTE_GRANT_QUEUE, t.queue_id, 0, NULL);
  send_grant(H_CB, G_CB, HALO_REMOTE_GRANT_COMMAND_BUFFER, t.cb_id, 0, &slot);
  send_grant(H_BUFFER, G_BUFFER, HALO_REMOTE_GRANT_BUFFER, t.buffer_address,
             4096, NULL);
  send_grant(H_SEM, G_SEM, HALO_REMOTE_GRANT_SEMAPHORE,
             (uint64_t)(uintptr_t)t.page,
             offsetof(halo_timeline_page_t, slots[0]), NULL);
  expect_good_taken();
  execute_args_t bad = good_execute();
  --t.next_value;
  bad.command_buffer = H_UNGRANTED;
  uint64_t head = publish_execute(&bad);
  uint64_t sequence = t.sequence - 1;
  execute_args_t after = good_execute();
  publish_execute(&after);
  expect_bounce(head, sequence);

  halo_remote_ring_session_t session = {.session = TEST_SESSION};
  halo_remote_part_t part = {&session, sizeof(session)};
  uint64_t id = ++t.next_request;
  send_message(HALO_REMOTE_RING_DETACH, id, &part, 1, -1);
  message_t reply = take(HALO_REMOTE_REPLY);
  assert_int_equal(reply.header.id, id);
  halo_remote_reply_t answer;
  assert_true(reply.header.length >= sizeof(answer));
  memcpy(&answer, reply.payload, sizeof(answer));
  free(reply.payload);
  assert_int_equal(answer.code, HALO_STATUS_OK);
  assert_int_equal(answer.values[0], head);
  assert_int_equal(answer.values[1], sequence);
  // Nothing after it is taken.
  assert_false(arrives(HALO_REMOTE_RING_COMPLETE, 200));
  assert_int_equal(atomic_load(&t.ring->head), head);
  uint64_t want[] = {G_QUEUE, G_CB, G_BUFFER, G_SEM};
  bool seen[4] = {false};
  for (uint32_t seen_count = 0; seen_count < 4;) {
    uint64_t ids[16];
    uint32_t count = expect_released(ids);
    for (uint32_t i = 0; i < count; ++i) {
      bool known = false;
      for (uint32_t j = 0; j < 4; ++j) {
        if (ids[i] != want[j]) continue;
        assert_false(seen[j]);
        seen[j] = true;
        ++seen_count;
        known = true;
      }
      if (!known) fail_msg("released grant %llu", (unsigned long long)ids[i]);
    }
  }

  // Detached now: not found.
  id = ++t.next_request;
  send_message(HALO_REMOTE_RING_DETACH, id, &part, 1, -1);
  reply = take(HALO_REMOTE_REPLY);
  assert_int_equal(reply.header.id, id);
  memcpy(&answer, reply.payload, sizeof(answer));
  free(reply.payload);
  assert_int_equal(answer.code, HALO_STATUS_NOT_FOUND);
}

int main(void) {
  // The tests run in order on one worker and one ring.
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_taken),
      cmocka_unit_test(test_bounce_ungranted),
      cmocka_unit_test(test_bounce_wait_not_reached),
      cmocka_unit_test(test_bounce_signal_not_above_pending),
      cmocka_unit_test(test_bounce_bindings),
      cmocka_unit_test(test_bounce_checksum),
      cmocka_unit_test(test_bounce_signal_record),
      cmocka_unit_test(test_revoke),
      cmocka_unit_test(test_link_order),
      cmocka_unit_test(test_failed_send_uncounted),
      cmocka_unit_test(test_doorbell),
      cmocka_unit_test(test_many_completions),
      cmocka_unit_test(test_outcome_before_report),
      cmocka_unit_test(test_revoke_busy),
      cmocka_unit_test(test_pending_limit),
      cmocka_unit_test(test_attach_refused),
      cmocka_unit_test(test_detach),
      cmocka_unit_test(test_detach_call),
  };
  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests(tests, setup, teardown);
}
