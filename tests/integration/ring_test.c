// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The submission ring (docs/architecture.md "Submission ring"): ordering and
// backpressure, a client writing garbage into its own ring, racing it or
// leaving a record half-written (only its own semaphores fail, with the
// reason; the daemon and other sessions carry on), records changed after
// they were written rejected by their checksum (DATA_LOSS naming them),
// rejected records failing their signal semaphores, queue-ordered alloca and
// dealloca records (the alloca's result in the header, a refused
// asynchronous dealloca dropping its handle), a configured ring size
// (ring-bytes: a small ring's backpressure loses nothing; SIGHUP applies it
// to later sessions), 64 busy clients drained fairly, 1000 sessions, and an
// idle daemon using no CPU.
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "client/client.h"
#include "common/tsan.h"
#include "tests/support/halo_test.h"

#define DEADLINE_NS (10ll * 1000 * HALO_TEST_MS)

typedef struct fixture_t {
  halo_test_daemon_t daemon;
} fixture_t;

static int setup(void **state) {
  fixture_t *fixture = calloc(1, sizeof(*fixture));
  halo_test_daemon_start(&fixture->daemon);
  *state = fixture;
  return 0;
}

// Many sessions of this test's uid: above the default uid-connections.
static int setup_many_sessions(void **state) {
  fixture_t *fixture = calloc(1, sizeof(*fixture));
  const char *args[] = {"--uid-connections", "2048", NULL};
  halo_test_daemon_start_with_args(&fixture->daemon, args);
  *state = fixture;
  return 0;
}

static int teardown(void **state) {
  fixture_t *fixture = *state;
  halo_test_daemon_stop(&fixture->daemon, SIGTERM);
  halo_test_daemon_cleanup(&fixture->daemon);
  free(fixture);
  return 0;
}

// A reusable command buffer filling a small device buffer.
typedef struct work_t {
  halo_buffer_t *buffer;
  halo_command_buffer_t *cb;
} work_t;

static void work_create(halo_client_t *client, work_t *work) {
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &work->buffer));
  HALO_TEST_ASSERT_OK(halo_command_buffer_begin(
      client, 0, HALO_COMMAND_BUFFER_REUSABLE, 0, &work->cb));
  uint32_t pattern = 0x5a5a5a5a;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      work->cb, halo_buffer_ref(work->buffer, 0, 64), &pattern, 4));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(work->cb));
}

static void work_release(work_t *work) {
  halo_command_buffer_release(work->cb);
  halo_buffer_release(work->buffer);
}

static halo_status_t execute_signal(work_t *work, halo_semaphore_t *semaphore,
                                    uint64_t value) {
  halo_semaphore_value_t signal = {semaphore, value};
  return halo_queue_execute(NULL, work->cb, NULL, 0, NULL, 0, &signal, 1);
}

// Ring records, the daemon's view; the raw header for the garbage tests.
static halo_ring_header_t *ring_of(halo_client_t *client) {
  assert_non_null(client->ring.header);
  return client->ring.header;
}

static void test_ring_is_negotiated_and_can_be_refused(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_ring_header_t *header = ring_of(client);
  assert_int_equal(header->magic, HALO_RING_MAGIC);
  assert_int_equal(header->version, HALO_RING_VERSION);
  assert_int_equal(header->capacity, HALO_RING_DEFAULT_CAPACITY);
  assert_int_equal(client->ring.capacity, HALO_RING_DEFAULT_CAPACITY);
  // Each ring has its own random checksum key; libhalo keeps a copy.
  assert_memory_equal(client->ring.key, header->checksum_key,
                      HALO_RING_KEY_BYTES);
  halo_client_t *second = halo_test_connect(&fixture->daemon, 0);
  assert_memory_not_equal(ring_of(second)->checksum_key, header->checksum_key,
                          HALO_RING_KEY_BYTES);
  halo_client_close(second);
  halo_client_close(client);
  setenv("HALO_RING", "0", 1);
  client = halo_test_connect(&fixture->daemon, 0);
  unsetenv("HALO_RING");
  assert_null(client->ring.header);
  halo_client_close(client);
}

// Many more records than the ring holds, executes and host signals
// interleaved: the client waits for space, nothing is lost or reordered
// (each signal must be above the last, or the daemon refuses it).
static void test_backpressure_keeps_order(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  ring_of(client);
  setenv("HALO_RING_ASYNC", "1", 1);
  halo_client_t *async_client = halo_test_connect(&fixture->daemon, 0);
  unsetenv("HALO_RING_ASYNC");
  assert_true(async_client->ring.async);
  halo_client_t *clients[2] = {client, async_client};
  const uint64_t count = 5000;  // ~5x the ring's records
  for (int c = 0; c < 2; ++c) {
    work_t work;
    work_create(clients[c], &work);
    halo_semaphore_t *executed, *host;
    HALO_TEST_ASSERT_OK(halo_semaphore_create(clients[c], 0, 0, &executed));
    HALO_TEST_ASSERT_OK(halo_semaphore_create(clients[c], 0, 0, &host));
    for (uint64_t i = 1; i <= count; ++i) {
      HALO_TEST_ASSERT_OK(execute_signal(&work, executed, i));
      if (i % 7 == 0) HALO_TEST_ASSERT_OK(halo_semaphore_signal(host, i));
    }
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(executed, count, DEADLINE_NS));
    uint64_t value;
    HALO_TEST_ASSERT_OK(halo_semaphore_query(host, &value));
    assert_int_equal(value, count / 7 * 7);
    // A socket request after ring records sees them all.
    HALO_TEST_ASSERT_OK(halo_client_ping(clients[c]));
    halo_semaphore_release(executed);
    halo_semaphore_release(host);
    work_release(&work);
  }
  halo_client_close(client);
  halo_client_close(async_client);
}

// Errors are identical through the ring: a signal that does not increase
// the value is refused synchronously, as over the socket.
static void test_identical_errors_ring_and_socket(void **state) {
  fixture_t *fixture = *state;
  for (int ring = 0; ring < 2; ++ring) {
    if (!ring) setenv("HALO_RING", "0", 1);
    halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
    unsetenv("HALO_RING");
    assert_true((client->ring.header != NULL) == ring);
    halo_semaphore_t *semaphore;
    HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 5, 0, &semaphore));
    halo_status_t status = halo_semaphore_signal(semaphore, 5);
    assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
    char message[256];
    snprintf(message, sizeof(message), "%s", halo_status_message(status));
    halo_status_free(status);
    HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 6));
    uint64_t value;
    HALO_TEST_ASSERT_OK(halo_semaphore_query(semaphore, &value));
    assert_int_equal(value, 6);
    // Unknown command buffer handles cannot be made through the API; a
    // missing binding can: see execute_test (run with HALO_RING=0 too).
    halo_semaphore_release(semaphore);
    halo_client_close(client);
    print_message("ring=%d: %s\n", ring, message);
  }
}

// Writes raw bytes at the ring's tail and advances the client's own
// bookkeeping by |advance| bytes and one record, as if libhalo had written
// a record there; returns where they went. Publishes nothing.
static uint8_t *raw_write(halo_client_t *client, const void *record,
                          uint32_t length, uint64_t advance) {
  halo_client_ring_t *ring = &client->ring;
  pthread_mutex_lock(&ring->mutex);
  uint8_t *at = ring->records + (ring->tail & (ring->capacity - 1));
  memcpy(at, record, length);
  ring->tail += advance;
  ring->sequence += 1;
  pthread_mutex_unlock(&ring->mutex);
  return at;
}

// Publishes the client's tail; rings the doorbell if |doorbell|.
static void raw_publish_tail(halo_client_t *client, bool doorbell) {
  halo_client_ring_t *ring = &client->ring;
  pthread_mutex_lock(&ring->mutex);
  atomic_store(&ring->header->tail, ring->tail);
  if (doorbell) {
    uint64_t one = 1;
    assert_int_equal(write(ring->doorbell, &one, sizeof(one)), sizeof(one));
  }
  pthread_mutex_unlock(&ring->mutex);
}

// Writes one raw record at the ring's tail and publishes it.
static void raw_publish(halo_client_t *client, const void *record,
                        uint32_t length, uint64_t advance) {
  raw_write(client, record, length, advance);
  raw_publish_tail(client, true);
}

// Waits until the daemon has consumed everything published.
static void wait_ring_drained(halo_client_t *client) {
  halo_ring_header_t *header = client->ring.header;
  assert_true(HALO_TEST_POLL(
      atomic_load(&header->head) == atomic_load(&header->tail), 5000));
}

// Another session runs work through its ring: the daemon carries on.
static void other_session_works(fixture_t *fixture) {
  halo_client_t *other = halo_test_connect(&fixture->daemon, 0);
  ring_of(other);
  work_t work;
  work_create(other, &work);
  halo_semaphore_t *semaphore;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(other, 0, 0, &semaphore));
  for (uint64_t i = 1; i <= 100; ++i) {
    HALO_TEST_ASSERT_OK(execute_signal(&work, semaphore, i));
  }
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(semaphore, 100, DEADLINE_NS));
  halo_semaphore_release(semaphore);
  work_release(&work);
  halo_client_close(other);
}

static void expect_wait_failure(halo_semaphore_t *semaphore, uint64_t value,
                                halo_status_code_t code, const char *text) {
  halo_status_t status = halo_semaphore_wait(semaphore, value, DEADLINE_NS);
  assert_int_equal(halo_status_code(status), code);
  if (!strstr(halo_status_message(status), text)) {
    print_error("'%s' does not contain '%s'\n", halo_status_message(status),
                text);
    fail();
  }
  print_message("%s\n", halo_status_message(status));
  halo_status_free(status);
}

static void test_garbage_record_breaks_only_its_ring(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  ring_of(client);
  halo_semaphore_t *semaphore;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
  uint8_t garbage[64];
  for (size_t i = 0; i < sizeof(garbage); ++i) garbage[i] = (uint8_t)(i * 37);
  raw_publish(client, garbage, sizeof(garbage), sizeof(garbage));
  expect_wait_failure(semaphore, 1, HALO_STATUS_DATA_LOSS, "submission ring");
  HALO_TEST_POLL(
      atomic_load(&client->ring.header->flags) & HALO_RING_FLAG_BROKEN, 5000);
  // The client goes on over the socket.
  halo_semaphore_t *later;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &later));
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(later, 3));
  other_session_works(fixture);
  halo_semaphore_release(later);
  halo_semaphore_release(semaphore);
  halo_client_close(client);
}

// The tail published before the record was written: the daemon reads a
// stale sequence and breaks the ring.
static void test_half_written_record(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  ring_of(client);
  halo_semaphore_t *semaphore;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
  // Only the first 8 bytes (type, length); the sequence is left zero... of
  // a ring whose next record is number 0: write a wrong one.
  halo_ring_record_header_t header = {
      .type = HALO_RING_RECORD_EXECUTE, .length = 64, .sequence = 12345};
  raw_publish(client, &header, sizeof(header), 64);
  expect_wait_failure(semaphore, 1, HALO_STATUS_DATA_LOSS, "sequence");
  other_session_works(fixture);
  halo_semaphore_release(semaphore);
  halo_client_close(client);
}

// A well-framed record the daemon rejects, from a client that does not wait
// for the verdict: its signal semaphore fails with the reason.
static void test_rejected_record_fails_its_signals(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  ring_of(client);
  halo_semaphore_t *semaphore;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
  uint8_t record[64] = {0};
  uint32_t length = halo_ring_execute_length(0, 0, 1);
  assert_int_equal(length, sizeof(record));
  halo_ring_record_header_t header = {
      .type = HALO_RING_RECORD_EXECUTE,
      .length = (uint16_t)length,
      .sequence = (uint32_t)client->ring.sequence};
  halo_ring_execute_t execute = {.command_buffer = 0xdead,
                                 .signal_count = 1,
                                 .flags = HALO_RING_EXECUTE_ASYNC};
  halo_ring_semaphore_value_t signal = {halo_semaphore_handle(semaphore), 1};
  memcpy(record, &header, sizeof(header));
  memcpy(record + sizeof(header), &execute, sizeof(execute));
  memcpy(record + sizeof(header) + sizeof(execute), &signal, sizeof(signal));
  halo_ring_record_seal(client->ring.key, record);
  raw_publish(client, record, length, length);
  expect_wait_failure(semaphore, 1, HALO_STATUS_INVALID_ARGUMENT, "rejected");
  // The ring itself is fine: later records go through.
  work_t work;
  work_create(client, &work);
  halo_semaphore_t *next;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &next));
  HALO_TEST_ASSERT_OK(execute_signal(&work, next, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(next, 1, DEADLINE_NS));
  assert_false(atomic_load(&client->ring.header->flags) &
               HALO_RING_FLAG_BROKEN);
  halo_semaphore_release(next);
  work_release(&work);
  halo_semaphore_release(semaphore);
  halo_client_close(client);
}

// Record 0 (an asynchronous execute) and record 1 (a host signal) are
// written and published while the daemon is idle on this fresh ring (no
// doorbell), then one byte of each record's body changes in the ring before
// the doorbell rings: both are rejected with DATA_LOSS naming them, the
// execute through its signal semaphore, the signal through the header's
// verdict; neither ran as changed. The same signal unchanged then runs, and
// the ring, the daemon and other sessions carry on.
static void test_changed_record_is_rejected(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_ring_header_t *header = ring_of(client);
  halo_semaphore_t *executed, *host;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &executed));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &host));
  // Nothing was written into the ring: the daemon has not read it and
  // waits for the doorbell.
  assert_int_equal(client->ring.sequence, 0);
  assert_int_equal(atomic_load(&header->tail), 0);
  assert_true(atomic_load(&header->flags) & HALO_RING_FLAG_NEED_WAKEUP);

  // Record 0: unchanged it would be refused as INVALID_ARGUMENT (unknown
  // command buffer; test_rejected_record_fails_its_signals): the checksum
  // is checked first.
  _Alignas(16) uint8_t execute_record[64] = {0};
  uint32_t execute_length = halo_ring_execute_length(0, 0, 1);
  assert_int_equal(execute_length, sizeof(execute_record));
  halo_ring_record_header_t record = {.type = HALO_RING_RECORD_EXECUTE,
                                      .length = (uint16_t)execute_length,
                                      .sequence = 0};
  halo_ring_execute_t execute = {.command_buffer = 0xdead,
                                 .signal_count = 1,
                                 .flags = HALO_RING_EXECUTE_ASYNC};
  halo_ring_semaphore_value_t signal = {halo_semaphore_handle(executed), 1};
  memcpy(execute_record, &record, sizeof(record));
  memcpy(execute_record + sizeof(record), &execute, sizeof(execute));
  memcpy(execute_record + sizeof(record) + sizeof(execute), &signal,
         sizeof(signal));
  halo_ring_record_seal(client->ring.key, execute_record);
  // Record 1: a host signal of |host| to 7.
  _Alignas(16) uint8_t signal_record[HALO_RING_SIGNAL_LENGTH];
  record = (halo_ring_record_header_t){.type = HALO_RING_RECORD_SIGNAL,
                                       .length = HALO_RING_SIGNAL_LENGTH,
                                       .sequence = 1};
  halo_ring_semaphore_value_t host_value = {halo_semaphore_handle(host), 7};
  memcpy(signal_record, &record, sizeof(record));
  memcpy(signal_record + sizeof(record), &host_value, sizeof(host_value));
  halo_ring_record_seal(client->ring.key, signal_record);

  uint8_t *in_ring_execute =
      raw_write(client, execute_record, execute_length, execute_length);
  uint8_t *in_ring_signal = raw_write(
      client, signal_record, HALO_RING_SIGNAL_LENGTH, HALO_RING_SIGNAL_LENGTH);
  raw_publish_tail(client, false);
  // Published; now a racing writer changes one byte of each body: the
  // command buffer handle of record 0, the value of record 1 (7 -> 71).
  in_ring_execute[sizeof(record) +
                  offsetof(halo_ring_execute_t, command_buffer)] ^= 0x01;
  in_ring_signal[sizeof(record) +
                 offsetof(halo_ring_semaphore_value_t, value)] ^= 0x40;
  raw_publish_tail(client, true);

  expect_wait_failure(executed, 1, HALO_STATUS_DATA_LOSS,
                      "submission ring record 0 changed after it was "
                      "written");
  wait_ring_drained(client);
  assert_int_equal(atomic_load(&header->error_sequence), 2);
  assert_int_equal(header->error_code, HALO_STATUS_DATA_LOSS);
  assert_non_null(strstr(header->error_message,
                         "submission ring record 1 changed after it was "
                         "written"));
  print_message("%s\n", header->error_message);
  uint64_t value;
  HALO_TEST_ASSERT_OK(halo_semaphore_query(host, &value));
  assert_int_equal(value, 0);  // not 71: the changed record did not run
  assert_false(atomic_load(&header->flags) & HALO_RING_FLAG_BROKEN);

  // The same signal, unchanged, as record 2: it runs.
  record.sequence = 2;
  memcpy(signal_record, &record, sizeof(record));
  halo_ring_record_seal(client->ring.key, signal_record);
  raw_publish(client, signal_record, HALO_RING_SIGNAL_LENGTH,
              HALO_RING_SIGNAL_LENGTH);
  wait_ring_drained(client);
  assert_int_equal(atomic_load(&header->error_sequence), 2);
  HALO_TEST_ASSERT_OK(halo_semaphore_query(host, &value));
  assert_int_equal(value, 7);

  // libhalo's own records go on through the ring.
  work_t work;
  work_create(client, &work);
  halo_semaphore_t *next;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &next));
  HALO_TEST_ASSERT_OK(execute_signal(&work, next, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(host, 8));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(next, 1, DEADLINE_NS));
  assert_false(atomic_load(&header->flags) & HALO_RING_FLAG_BROKEN);
  assert_int_equal(client->ring.sequence, 5);
  other_session_works(fixture);
  halo_semaphore_release(next);
  work_release(&work);
  halo_semaphore_release(executed);
  halo_semaphore_release(host);
  halo_client_close(client);
}

// Builds a sealed DEALLOCA record (asynchronous) of |buffer| on |queue|
// signaling |signal| to 1, with sequence |sequence|, into |out| (64 bytes).
static uint32_t dealloca_record(halo_client_t *client, uint64_t sequence,
                                uint64_t queue, uint64_t buffer,
                                halo_semaphore_t *signal, uint8_t out[64]) {
  uint32_t length =
      halo_ring_values_length(sizeof(halo_ring_dealloca_t), 0, signal ? 1 : 0);
  assert_true(length <= 64);
  memset(out, 0, 64);
  halo_ring_record_header_t header = {.type = HALO_RING_RECORD_DEALLOCA,
                                      .length = (uint16_t)length,
                                      .sequence = (uint32_t)sequence};
  halo_ring_dealloca_t dealloca = {.queue = queue,
                                   .buffer = buffer,
                                   .signal_count = signal ? 1 : 0,
                                   .flags = HALO_RING_EXECUTE_ASYNC};
  memcpy(out, &header, sizeof(header));
  memcpy(out + sizeof(header), &dealloca, sizeof(dealloca));
  if (signal) {
    halo_ring_semaphore_value_t value = {halo_semaphore_handle(signal), 1};
    memcpy(out + sizeof(header) + sizeof(dealloca), &value, sizeof(value));
  }
  halo_ring_record_seal(client->ring.key, out);
  return length;
}

// The socket requests the daemon counted for |client|'s session, and the
// buffers it holds handles to.
static uint64_t session_counts(const fixture_t *fixture, halo_client_t *client,
                               uint32_t *out_buffers) {
  halo_wire_response_t *response = halo_test_admin_sessions(&fixture->daemon);
  uint64_t requests = UINT64_MAX;
  for (size_t i = 0; i < response->admin_sessions->n_sessions; ++i) {
    const Halo__Wire__SessionInfo *info = response->admin_sessions->sessions[i];
    if (info->session_id == halo_client_session_id(client)) {
      requests = info->requests;
      if (out_buffers) *out_buffers = info->buffers;
    }
  }
  halo__wire__response__free_unpacked(response, NULL);
  assert_true(requests != UINT64_MAX);
  return requests;
}

// Queue-ordered alloca and dealloca through the ring: libhalo's go through
// records (no socket request; the alloca's handle in the header's result),
// a malformed ALLOCA is refused in the verdict, and a refused asynchronous
// DEALLOCA fails its signal and still drops the buffer's handle, whether
// raw, from libhalo with $HALO_RING_ASYNC=1, or changed after it was
// written (then the handle stays: the copy may name another buffer).
static void test_alloca_and_dealloca_records(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_ring_header_t *header = ring_of(client);
  halo_queue_t *queue;
  HALO_TEST_ASSERT_OK(halo_queue_create(client, 0, 0, &queue));
  halo_semaphore_t *s;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &s));
  uint64_t requests = session_counts(fixture, client, NULL);
  uint64_t sequence = client->ring.sequence;
  halo_semaphore_value_t allocated = {s, 1};
  halo_buffer_t *host = NULL;
  HALO_TEST_ASSERT_OK(halo_queue_alloca(queue, NULL, 0, &allocated, 1,
                                        HALO_MEMORY_HOST_VISIBLE, 256, &host));
  assert_int_equal(atomic_load(&header->result_sequence), sequence + 1);
  assert_int_equal(header->alloca_result.handle, halo_buffer_handle(host));
  assert_true(header->alloca_result.arena_id != 0);
  memset(halo_buffer_host_pointer(host), 0x3c, 256);
  halo_buffer_t *device = NULL;
  HALO_TEST_ASSERT_OK(halo_queue_alloca(queue, &allocated, 1, NULL, 0,
                                        HALO_MEMORY_DEVICE, 256, &device));
  halo_semaphore_value_t freed = {s, 2};
  HALO_TEST_ASSERT_OK(
      halo_queue_dealloca(queue, &allocated, 1, &freed, 1, host));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(s, 2, DEADLINE_NS));
  assert_int_equal(client->ring.sequence, sequence + 3);
  // Only the query of the sessions in between: no socket request.
  assert_int_equal(session_counts(fixture, client, NULL), requests);
  halo_buffer_release(host);

  // A malformed ALLOCA (flags set): the verdict says why.
  _Alignas(16) uint8_t record[64] = {0};
  uint32_t length = halo_ring_values_length(sizeof(halo_ring_alloca_t), 0, 0);
  halo_ring_record_header_t record_header = {
      .type = HALO_RING_RECORD_ALLOCA,
      .length = (uint16_t)length,
      .sequence = (uint32_t)client->ring.sequence};
  halo_ring_alloca_t alloca = {
      .queue = 1, .size = 64, .memory_type = 0, .flags = 4};
  memcpy(record, &record_header, sizeof(record_header));
  memcpy(record + sizeof(record_header), &alloca, sizeof(alloca));
  halo_ring_record_seal(client->ring.key, record);
  uint64_t alloca_sequence = client->ring.sequence;
  raw_publish(client, record, length, length);
  wait_ring_drained(client);
  assert_int_equal(atomic_load(&header->error_sequence), alloca_sequence + 1);
  assert_int_equal(header->error_code, HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(header->error_message, "flags 0x4"));

  // A raw asynchronous DEALLOCA naming no queue: refused, its signal fails,
  // and the handle goes all the same.
  halo_semaphore_t *d;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &d));
  length = dealloca_record(client, client->ring.sequence, 0,
                           halo_buffer_handle(device), d, record);
  raw_publish(client, record, length, length);
  expect_wait_failure(d, 1, HALO_STATUS_INVALID_ARGUMENT,
                      "queue_dealloca (submission ring record");
  uint8_t byte;
  halo_status_t status = halo_buffer_read(device, 0, &byte, 1);
  assert_int_equal(halo_status_code(status), HALO_STATUS_NOT_FOUND);
  halo_status_free(status);
  halo_buffer_release(device);  // sends a release the daemon refuses

  // The same, changed after it was written: DATA_LOSS on its signal; the
  // handle stays (the changed copy could name another buffer).
  halo_buffer_t *kept = NULL;
  HALO_TEST_ASSERT_OK(halo_queue_alloca(queue, NULL, 0, NULL, 0,
                                        HALO_MEMORY_DEVICE, 64, &kept));
  halo_semaphore_t *e;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &e));
  length = dealloca_record(client, client->ring.sequence, 0,
                           halo_buffer_handle(kept), e, record);
  uint8_t *in_ring = raw_write(client, record, length, length);
  in_ring[sizeof(halo_ring_record_header_t) +
          offsetof(halo_ring_dealloca_t, queue)] ^= 0x01;
  raw_publish_tail(client, true);
  expect_wait_failure(e, 1, HALO_STATUS_DATA_LOSS, "changed after it was");
  HALO_TEST_ASSERT_OK(halo_buffer_read(kept, 0, &byte, 1));
  HALO_TEST_ASSERT_OK(halo_queue_dealloca(queue, NULL, 0, NULL, 0, kept));
  halo_buffer_release(kept);

  // libhalo with $HALO_RING_ASYNC=1: the dealloca returns at once; refused
  // (a signal value that does not increase) it fails its signal, and the
  // daemon dropped the handle.
  setenv("HALO_RING_ASYNC", "1", 1);
  halo_client_t *async = halo_test_connect(&fixture->daemon, 0);
  unsetenv("HALO_RING_ASYNC");
  assert_true(async->ring.async);
  halo_queue_t *async_queue;
  HALO_TEST_ASSERT_OK(halo_queue_create(async, 0, 0, &async_queue));
  halo_semaphore_t *f;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(async, 3, 0, &f));
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_queue_alloca(async_queue, NULL, 0, NULL, 0,
                                        HALO_MEMORY_HOST_VISIBLE, 64, &buffer));
  uint32_t buffers = 0;
  session_counts(fixture, async, &buffers);
  assert_int_equal(buffers, 1);
  halo_semaphore_value_t stale = {f, 3};
  HALO_TEST_ASSERT_OK(
      halo_queue_dealloca(async_queue, NULL, 0, &stale, 1, buffer));
  expect_wait_failure(f, 4, HALO_STATUS_INVALID_ARGUMENT, "signal 0");
  session_counts(fixture, async, &buffers);
  assert_int_equal(buffers, 0);
  halo_buffer_release(buffer);
  halo_semaphore_release(f);
  halo_queue_release(async_queue);
  halo_client_close(async);

  assert_false(atomic_load(&header->flags) & HALO_RING_FLAG_BROKEN);
  other_session_works(fixture);
  halo_semaphore_release(d);
  halo_semaphore_release(e);
  halo_semaphore_release(s);
  halo_queue_release(queue);
  halo_client_close(client);
}

typedef struct racer_t {
  halo_client_t *client;
  atomic_bool stop;
} racer_t;

static void *racer_main(void *arg) {
  racer_t *racer = arg;
  halo_client_ring_t *ring = &racer->client->ring;
  uint32_t x = 12345;
  while (!atomic_load(&racer->stop)) {
    x = x * 1103515245u + 12345u;
    // The race is the test: ThreadSanitizer is not to report it.
    HALO_TSAN_IGNORE_BEGIN();
    ring->records[x & (ring->capacity - 1)] = (uint8_t)(x >> 24);
    HALO_TSAN_IGNORE_END();
  }
  return NULL;
}

static bool ring_broken(halo_client_t *client) {
  return atomic_load(&client->ring.header->flags) & HALO_RING_FLAG_BROKEN;
}

// What a record hit by the racer ends in: rejected by its checksum, or (its
// framing hit) the ring broken.
static void expect_racer_failure(halo_status_t status) {
  assert_int_equal(halo_status_code(status), HALO_STATUS_DATA_LOSS);
  const char *message = halo_status_message(status);
  // The verdict says "the session's submission ring is broken", a failed
  // semaphore "the submission ring of session N (pid P) is broken".
  if (!strstr(message, "changed after it was written") &&
      !(strstr(message, "submission ring") && strstr(message, "is broken"))) {
    fail_msg("unexpected failure: %s", message);
  }
}

// A thread scribbles over the ring while another submits 2000 executions.
// Every record the daemon runs is one libhalo wrote (the checksum), so
// nothing runs as changed and no wait is left hanging: a synchronous
// execute the racer hit returns DATA_LOSS naming its record (or the broken
// ring), and the executes before it all complete; asynchronously, the
// semaphore reaches the last value published after the racer stopped or
// fails with DATA_LOSS. The daemon and other sessions carry on, and so does
// the client (over the socket if its ring broke).
static void race_own_ring(fixture_t *fixture, bool async) {
  if (async) setenv("HALO_RING_ASYNC", "1", 1);
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  unsetenv("HALO_RING_ASYNC");
  ring_of(client);
  assert_int_equal(client->ring.async, async);
  work_t work;
  work_create(client, &work);
  halo_semaphore_t *semaphore;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
  racer_t racer = {.client = client};
  pthread_t thread;
  pthread_create(&thread, NULL, racer_main, &racer);
  uint64_t submitted = 0;
  halo_status_t failure = NULL;
  // Up to the first failure or the ring breaking (later executes would go
  // over the socket).
  for (uint64_t i = 1; i <= 2000 && !ring_broken(client); ++i) {
    failure = execute_signal(&work, semaphore, i);
    if (failure) break;
    submitted = i;
  }
  atomic_store(&racer.stop, true);
  pthread_join(thread, NULL);
  bool broken = ring_broken(client);
  char failure_text[300] = "";
  if (failure) {
    // Only a synchronous execute hears the verdict; an asynchronous one
    // fails only if the ring broke before it (over the socket then).
    if (async) {
      assert_true(broken);
    } else {
      expect_racer_failure(failure);
    }
    snprintf(failure_text, sizeof(failure_text), "%s",
             halo_status_message(failure));
    halo_status_free(failure);
  }
  uint64_t target = submitted;
  if (async && !broken) {
    // Published after the racer stopped: it runs as written.
    target = 2001;
    HALO_TEST_ASSERT_OK(execute_signal(&work, semaphore, target));
  }
  halo_status_t status = NULL;
  if (target) {
    status = halo_semaphore_wait(semaphore, target, DEADLINE_NS);
    if (status) {
      // Never a timeout: a rejected asynchronous record fails its
      // semaphore; a broken ring fails them all.
      expect_racer_failure(status);
      assert_true(async || ring_broken(client));
    } else {
      // Reached; exactly (nothing ran as changed), unless the ring broke
      // after it was reached and failed the semaphore.
      uint64_t value = 0;
      halo_status_t query = halo_semaphore_query(semaphore, &value);
      if (query) {
        expect_racer_failure(query);
        assert_true(ring_broken(client));
        halo_status_free(query);
      } else {
        assert_int_equal(value, target);
      }
    }
  }
  print_message(
      "racing client (%s): %llu submitted%s%s, ring %s, wait for %llu: "
      "%s%s%s\n",
      async ? "async" : "sync", (unsigned long long)submitted,
      failure_text[0] ? ", then " : "", failure_text,
      ring_broken(client) ? "broken" : "intact", (unsigned long long)target,
      halo_status_code_name(halo_status_code(status)), status ? ": " : "",
      status ? halo_status_message(status) : "");
  halo_status_free(status);
  other_session_works(fixture);
  // The client itself still works (over the socket if its ring broke).
  halo_semaphore_t *fresh;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &fresh));
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(fresh, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(fresh, 1, DEADLINE_NS));
  halo_semaphore_release(fresh);
  halo_semaphore_release(semaphore);
  work_release(&work);
  halo_client_close(client);
}

static void test_client_racing_its_own_ring(void **state) {
  race_own_ring(*state, false);
}

static void test_client_racing_its_own_ring_async(void **state) {
  race_own_ring(*state, true);
}

// A halod with a small ring (32 KiB, ring-bytes): libhalo takes the
// capacity from the header; many more records than it holds, with many
// executes in flight (async) and the longest record that fits, all go
// through the ring and complete, nothing rejected or lost.
static int setup_small_ring(void **state) {
  static const char *const args[] = {"--ring-bytes", "32K", NULL};
  fixture_t *fixture = calloc(1, sizeof(*fixture));
  halo_test_daemon_start_with_args(&fixture->daemon, args);
  *state = fixture;
  return 0;
}

static void test_small_ring_backpressure_loses_nothing(void **state) {
  fixture_t *fixture = *state;
  setenv("HALO_RING_ASYNC", "1", 1);
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  unsetenv("HALO_RING_ASYNC");
  halo_ring_header_t *header = ring_of(client);
  assert_int_equal(header->capacity, 32768);
  assert_int_equal(client->ring.capacity, 32768);
  work_t work;
  work_create(client, &work);
  halo_semaphore_t *executed, *host;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &executed));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &host));
  const uint64_t count = 5000;  // ~15 times what the ring holds
  uint64_t most_in_flight = 0;
  for (uint64_t i = 1; i <= count; ++i) {
    HALO_TEST_ASSERT_OK(execute_signal(&work, executed, i));
    // A few synchronous host signals (each waits for the ring to drain).
    if (i % 500 == 0) HALO_TEST_ASSERT_OK(halo_semaphore_signal(host, i));
    uint64_t in_flight =
        atomic_load(&header->tail) - atomic_load(&header->head);
    if (in_flight > most_in_flight) most_in_flight = in_flight;
    assert_true(in_flight <= 32768);
  }
  // libhalo writes records faster than halod runs them: the ring filled
  // and the client waited for space.
  assert_true(most_in_flight > 32768 / 2);
  // The longest record: 1000 waits (on values reached) and a signal, in a
  // ring twice its size.
  enum { WAITS = 1000 };
  uint32_t length = halo_ring_execute_length(0, WAITS, 1);
  assert_true(length > HALO_RING_MAX_RECORD_BYTES - 512 &&
              length <= HALO_RING_MAX_RECORD_BYTES);
  halo_semaphore_value_t *waits = calloc(WAITS, sizeof(*waits));
  for (int i = 0; i < WAITS; ++i) {
    waits[i] = (halo_semaphore_value_t){host, 500};
  }
  uint64_t sequence = client->ring.sequence;
  for (uint64_t i = 1; i <= 5; ++i) {
    halo_semaphore_value_t signal = {executed, count + i};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, work.cb, NULL, 0, waits, WAITS, &signal, 1));
  }
  free(waits);
  // Through the ring (PAD records included when one did not fit before
  // the end), not the socket.
  assert_true(client->ring.sequence >= sequence + 5);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(executed, count + 5, DEADLINE_NS));
  uint64_t value;
  HALO_TEST_ASSERT_OK(halo_semaphore_query(host, &value));
  assert_int_equal(value, count);
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  assert_int_equal(atomic_load(&header->error_sequence), 0);
  assert_false(atomic_load(&header->flags) & HALO_RING_FLAG_BROKEN);
  print_message("32 KiB ring: %llu executes, at most %llu bytes in flight\n",
                (unsigned long long)count, (unsigned long long)most_in_flight);
  halo_semaphore_release(executed);
  halo_semaphore_release(host);
  work_release(&work);
  halo_client_close(client);
}

typedef struct busy_t {
  const halo_test_daemon_t *daemon;
  uint64_t count;
  int64_t elapsed_ns;
  int failures;
} busy_t;

static void *busy_main(void *arg) {
  busy_t *busy = arg;
  halo_client_t *client = halo_test_connect(busy->daemon, 0);
  work_t work;
  work_create(client, &work);
  halo_semaphore_t *semaphore;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
  int64_t start = halo_test_now_ns();
  for (uint64_t i = 1; i <= busy->count; ++i) {
    halo_status_t status = execute_signal(&work, semaphore, i);
    if (status) {
      ++busy->failures;
      halo_status_free(status);
    }
  }
  // Every signal observed: the last value, and no failure.
  halo_status_t status =
      halo_semaphore_wait(semaphore, busy->count, DEADLINE_NS * 3);
  if (status) {
    ++busy->failures;
    halo_status_free(status);
  }
  busy->elapsed_ns = halo_test_now_ns() - start;
  halo_semaphore_release(semaphore);
  work_release(&work);
  halo_client_close(client);
  return NULL;
}

static void test_64_busy_clients_drained_fairly(void **state) {
  fixture_t *fixture = *state;
  enum { CLIENTS = 64 };
  busy_t busy[CLIENTS];
  pthread_t threads[CLIENTS];
  for (int i = 0; i < CLIENTS; ++i) {
    busy[i] = (busy_t){.daemon = &fixture->daemon, .count = 300};
    pthread_create(&threads[i], NULL, busy_main, &busy[i]);
  }
  int64_t slowest = 0, fastest = INT64_MAX;
  for (int i = 0; i < CLIENTS; ++i) {
    pthread_join(threads[i], NULL);
    assert_int_equal(busy[i].failures, 0);
    if (busy[i].elapsed_ns > slowest) slowest = busy[i].elapsed_ns;
    if (busy[i].elapsed_ns < fastest) fastest = busy[i].elapsed_ns;
  }
  print_message(
      "64 clients x 300 executions: fastest %.1f ms, slowest %.1f "
      "ms\n",
      fastest / 1e6, slowest / 1e6);
}

static void test_1000_sessions_with_rings(void **state) {
  fixture_t *fixture = *state;
  enum { SESSIONS = 1000 };
  struct rlimit limit;
  getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_max < 8192) {
    print_message("RLIMIT_NOFILE hard limit %llu < 8192: skipped\n",
                  (unsigned long long)limit.rlim_max);
    return;
  }
  limit.rlim_cur = limit.rlim_max;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &limit), 0);
  halo_client_t **clients = calloc(SESSIONS, sizeof(*clients));
  halo_semaphore_t **semaphores = calloc(SESSIONS, sizeof(*semaphores));
  int64_t start = halo_test_now_ns();
  for (int i = 0; i < SESSIONS; ++i) {
    clients[i] = halo_test_connect(&fixture->daemon, 0);
    ring_of(clients[i]);
    HALO_TEST_ASSERT_OK(
        halo_semaphore_create(clients[i], 0, 0, &semaphores[i]));
  }
  int64_t connected = halo_test_now_ns();
  for (uint64_t round = 1; round <= 3; ++round) {
    for (int i = 0; i < SESSIONS; ++i) {
      HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphores[i], round));
    }
  }
  for (int i = 0; i < SESSIONS; ++i) {
    uint64_t value;
    HALO_TEST_ASSERT_OK(halo_semaphore_query(semaphores[i], &value));
    assert_int_equal(value, 3);
  }
  print_message(
      "1000 sessions: connected in %.0f ms, 3000 ring signals in "
      "%.1f ms\n",
      (connected - start) / 1e6, (halo_test_now_ns() - connected) / 1e6);
  for (int i = 0; i < SESSIONS; ++i) {
    halo_semaphore_release(semaphores[i]);
    halo_client_close(clients[i]);
  }
  free(semaphores);
  free(clients);
}

// The capacity of a new session's ring (0: none).
static uint32_t new_session_ring_capacity(const halo_test_daemon_t *daemon) {
  halo_client_t *client = halo_test_connect(daemon, 0);
  uint32_t capacity = client->ring.header ? client->ring.capacity : 0;
  halo_client_close(client);
  return capacity;
}

static void write_file(const char *path, const char *text) {
  FILE *file = fopen(path, "w");
  assert_non_null(file);
  assert_int_equal(fputs(text, file) >= 0, 1);
  assert_int_equal(fclose(file), 0);
}

// ring-bytes is live: after SIGHUP, sessions that connect get rings of the
// new size; a session's ring keeps the size it was created with.
static void test_ring_bytes_reload_applies_to_new_sessions(void **state) {
  (void)state;
  char path[] = "/tmp/halo-ring-test-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  write_file(path, "ring-bytes = 32K\n");
  const char *const args[] = {"--config", path, NULL};
  halo_test_daemon_t daemon;
  halo_test_daemon_start_with_args(&daemon, args);
  halo_client_t *before = halo_test_connect(&daemon, 0);
  assert_int_equal(ring_of(before)->capacity, 32768);
  write_file(path, "ring-bytes = 1M\n");
  assert_int_equal(kill(daemon.pid, SIGHUP), 0);
  assert_true(
      HALO_TEST_POLL(new_session_ring_capacity(&daemon) == 1u << 20, 5000));
  // The older session keeps its 32 KiB ring, which works on.
  assert_int_equal(before->ring.capacity, 32768);
  work_t work;
  work_create(before, &work);
  halo_semaphore_t *semaphore;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(before, 0, 0, &semaphore));
  for (uint64_t i = 1; i <= 1000; ++i) {
    HALO_TEST_ASSERT_OK(execute_signal(&work, semaphore, i));
  }
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(semaphore, 1000, DEADLINE_NS));
  halo_semaphore_release(semaphore);
  work_release(&work);
  halo_client_close(before);
  halo_test_daemon_stop(&daemon, SIGTERM);
  halo_test_daemon_cleanup(&daemon);
  unlink(path);
}

// utime + stime of |pid| in clock ticks.
static uint64_t process_ticks(pid_t pid) {
  char path[64], line[2048];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *file = fopen(path, "r");
  assert_non_null(file);
  assert_non_null(fgets(line, sizeof(line), file));
  fclose(file);
  const char *cursor = strrchr(line, ')');
  assert_non_null(cursor);
  unsigned long utime = 0, stime = 0;
  // Fields after the comm: state(3) ... utime(14) stime(15).
  int field = 2;
  for (const char *p = cursor + 1; *p; ++p) {
    if (*p != ' ') continue;
    ++field;
    if (field == 14) utime = strtoul(p + 1, NULL, 10);
    if (field == 15) {
      stime = strtoul(p + 1, NULL, 10);
      break;
    }
  }
  return utime + stime;
}

// At the session's pending quota an execute is refused (RESOURCE_EXHAUSTED,
// synchronously, or through its signal semaphore in async mode), as over
// the socket; the ring is not held back, so the signal queued behind it
// still releases the pending work (holding the record back would deadlock:
// the pending work waits for that signal).
static int setup_small_quota(void **state) {
  static const char *const args[] = {"--session-pending", "4", NULL};
  fixture_t *fixture = calloc(1, sizeof(*fixture));
  halo_test_daemon_start_with_args(&fixture->daemon, args);
  *state = fixture;
  return 0;
}

static void test_pending_quota_refuses_rather_than_stalls(void **state) {
  fixture_t *fixture = *state;
  for (int async = 0; async < 2; ++async) {
    if (async) setenv("HALO_RING_ASYNC", "1", 1);
    halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
    unsetenv("HALO_RING_ASYNC");
    ring_of(client);
    work_t work;
    work_create(client, &work);
    halo_semaphore_t *gate, *done, *refused;
    HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &gate));
    HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
    HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &refused));
    halo_semaphore_value_t wait = {gate, 1};
    for (uint64_t i = 1; i <= 4; ++i) {
      halo_semaphore_value_t signal = {done, i};
      HALO_TEST_ASSERT_OK(
          halo_queue_execute(NULL, work.cb, NULL, 0, &wait, 1, &signal, 1));
    }
    halo_semaphore_value_t signal = {refused, 1};
    halo_status_t status =
        halo_queue_execute(NULL, work.cb, NULL, 0, &wait, 1, &signal, 1);
    if (async) {
      HALO_TEST_ASSERT_OK(status);
      HALO_TEST_ASSERT_CODE(halo_semaphore_wait(refused, 1, DEADLINE_NS),
                            HALO_STATUS_RESOURCE_EXHAUSTED);
    } else {
      HALO_TEST_ASSERT_CODE(status, HALO_STATUS_RESOURCE_EXHAUSTED);
    }
    // The gate's signal goes through the ring behind the refused execute.
    HALO_TEST_ASSERT_OK(halo_semaphore_signal(gate, 1));
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, 4, DEADLINE_NS));
    // Below the quota again: executes are accepted.
    halo_semaphore_value_t more = {done, 5};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, work.cb, NULL, 0, &wait, 1, &more, 1));
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, 5, DEADLINE_NS));
    halo_semaphore_release(gate);
    halo_semaphore_release(done);
    halo_semaphore_release(refused);
    work_release(&work);
    halo_client_close(client);
  }
}

static void test_idle_daemon_uses_no_cpu(void **state) {
  fixture_t *fixture = *state;
  // Sessions with rings, some work, then nothing.
  halo_client_t *clients[8];
  for (int i = 0; i < 8; ++i) {
    clients[i] = halo_test_connect(&fixture->daemon, 0);
    halo_semaphore_t *semaphore;
    HALO_TEST_ASSERT_OK(halo_semaphore_create(clients[i], 0, 0, &semaphore));
    for (uint64_t v = 1; v <= 50; ++v) {
      HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, v));
    }
    halo_semaphore_release(semaphore);
  }
  halo_test_sleep_ms(100);
  uint64_t before = process_ticks(fixture->daemon.pid);
  halo_test_sleep_ms(1000);
  uint64_t used = process_ticks(fixture->daemon.pid) - before;
  long hz = sysconf(_SC_CLK_TCK);
  print_message(
      "idle halod with 8 ring sessions: %llu ticks (1/%ld s) in 1 "
      "s\n",
      (unsigned long long)used, hz);
  assert_true(used <= 2);
  for (int i = 0; i < 8; ++i) halo_client_close(clients[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_ring_is_negotiated_and_can_be_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_backpressure_keeps_order, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_identical_errors_ring_and_socket,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_garbage_record_breaks_only_its_ring,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_half_written_record, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_rejected_record_fails_its_signals,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_changed_record_is_rejected, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_alloca_and_dealloca_records, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_racing_its_own_ring, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_racing_its_own_ring_async,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_small_ring_backpressure_loses_nothing, setup_small_ring,
          teardown),
      cmocka_unit_test(test_ring_bytes_reload_applies_to_new_sessions),
      cmocka_unit_test_setup_teardown(test_64_busy_clients_drained_fairly,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_1000_sessions_with_rings,
                                      setup_many_sessions, teardown),
      cmocka_unit_test_setup_teardown(
          test_pending_quota_refuses_rather_than_stalls, setup_small_quota,
          teardown),
      cmocka_unit_test_setup_teardown(test_idle_daemon_uses_no_cpu, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
