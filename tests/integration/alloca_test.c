// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of queue-ordered alloca and dealloca
// (halo_queue_alloca, halo_queue_dealloca) with a real halod, on the driver
// under test (HALO_TEST_DRIVER). ctest runs the program twice: over the
// submission ring (integration.alloca_test) and over the socket only
// (integration.alloca_test_socket, HALO_RING=0), with the same results.
// - alloca -> an execution writing the buffer (waiting on the alloca's
//   signal) -> read back -> dealloca waiting on the execution's signal ->
//   its signal observed; device and host-visible memory; afterwards every
//   use of the handle is NOT_FOUND naming it;
// - an alloca waiting on a host semaphore shows in haloctl's pending list
//   with its kind, signals only after the wait;
// - a dealloca while executions binding the buffer still wait on a host
//   semaphore: the memory stays valid (a new allocation of the same size
//   scribbled meanwhile does not disturb the result) and the dealloca's
//   signal comes only after they completed;
// - a failed wait fails the alloca's and the dealloca's signals with the
//   reason (and the memory is still freed);
// - stale, foreign, exportable handles, bad sizes, memory types, queues
//   and signal values: clear errors, through libhalo and raw requests;
// - the session's byte quota: RESOURCE_EXHAUSTED naming it, charged at the
//   alloca, returned by the dealloca;
// - a client killed with allocas, executions and deallocas pending or in
//   flight leaves the daemon with the buffers and bytes it had before.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/admin.h"
#include "tests/support/halo_test.h"

#ifndef EXECUTE_TEST_PEER
#error "EXECUTE_TEST_PEER must name the execute_peer executable"
#endif

#define DEADLINE_NS (HALO_TEST_DEADLINE_MS * HALO_TEST_MS)
#define N 1024  // floats of the vector-add buffers

static halo_semaphore_t *create_semaphore(halo_client_t *client) {
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
  return semaphore;
}

static halo_queue_t *create_queue(halo_client_t *client) {
  halo_queue_t *queue = NULL;
  HALO_TEST_ASSERT_OK(halo_queue_create(client, 0, 0, &queue));
  return queue;
}

static halo_buffer_t *alloca_buffer(halo_queue_t *queue,
                                    halo_semaphore_value_t *wait,
                                    halo_semaphore_value_t *signal,
                                    halo_memory_type_t type, uint64_t size) {
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_queue_alloca(queue, wait, wait ? 1 : 0, signal,
                                        signal ? 1 : 0, type, size, &buffer));
  assert_non_null(buffer);
  assert_int_equal(halo_buffer_size(buffer), size);
  assert_int_equal(halo_buffer_memory_type(buffer), type);
  return buffer;
}

static void write_floats(halo_buffer_t *buffer, float base, float step) {
  float values[N];
  for (uint32_t i = 0; i < N; ++i) values[i] = base + step * (float)i;
  HALO_TEST_ASSERT_OK(halo_buffer_write(buffer, 0, values, sizeof(values)));
}

static void expect_floats(halo_buffer_t *buffer, float base, float step) {
  float values[N];
  HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, 0, values, sizeof(values)));
  for (uint32_t i = 0; i < N; ++i) {
    float expected = base + step * (float)i;
    if (values[i] != expected) {
      print_error("[%u] = %f, expected %f\n", i, (double)values[i],
                  (double)expected);
      fail();
    }
  }
}

static uint64_t query(halo_semaphore_t *semaphore) {
  uint64_t value = 0;
  halo_status_free(halo_semaphore_query(semaphore, &value));
  return value;
}

// ---------------------------------------------------------------- daemon

// What the daemon holds, from its metrics (every live buffer, not only those
// with a handle) and its queues.
typedef struct alloca_usage_t {
  uint64_t buffers;
  uint64_t device_bytes;
  uint64_t host_bytes;
  uint32_t sessions;
  uint32_t pending;
  uint32_t in_flight;
} alloca_usage_t;

static alloca_usage_t usage_now(const halo_test_daemon_t *daemon) {
  alloca_usage_t usage = {0};
  halo_admin_t *admin = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_connect(daemon->admin_address, 5000, &admin));
  halo_wire_response_t *response = NULL;
  halo_status_t status = halo_admin_metrics(admin, &response);
  halo_admin_close(admin);
  HALO_TEST_ASSERT_OK(status);
  const char *text = response->admin_metrics->text;
  usage.buffers =
      halo_test_metric_in(text, "halo_device_buffers{device=\"0\"} ");
  usage.device_bytes = halo_test_metric_in(
      text, "halo_device_allocated_bytes{device=\"0\",memory=\"device\"} ");
  usage.host_bytes = halo_test_metric_in(
      text,
      "halo_device_allocated_bytes{device=\"0\",memory=\"host_visible\"} ");
  halo__wire__response__free_unpacked(response, NULL);
  usage.sessions = halo_test_admin_session_count(daemon);
  halo_test_admin_queue_totals(daemon, &usage.pending, &usage.in_flight);
  return usage;
}

static bool usage_equal(const alloca_usage_t *a, const alloca_usage_t *b) {
  return a->buffers == b->buffers && a->device_bytes == b->device_bytes &&
         a->host_bytes == b->host_bytes && a->sessions == b->sessions &&
         a->pending == b->pending && a->in_flight == b->in_flight;
}

// Polls until the daemon holds what it held at |baseline|.
static void expect_usage(const halo_test_daemon_t *daemon,
                         const alloca_usage_t *baseline) {
  alloca_usage_t usage;
  if (HALO_TEST_POLL((usage = usage_now(daemon), usage_equal(&usage, baseline)),
                     HALO_TEST_DEADLINE_MS)) {
    return;
  }
  print_error(
      "halod holds %llu buffers (%llu device, %llu host-visible bytes), %u "
      "sessions, %u pending, %u in flight; expected %llu (%llu, %llu), %u, "
      "%u, %u\n",
      (unsigned long long)usage.buffers, (unsigned long long)usage.device_bytes,
      (unsigned long long)usage.host_bytes, usage.sessions, usage.pending,
      usage.in_flight, (unsigned long long)baseline->buffers,
      (unsigned long long)baseline->device_bytes,
      (unsigned long long)baseline->host_bytes, baseline->sessions,
      baseline->pending, baseline->in_flight);
  halo_test_admin_print_sessions(daemon);
  fail();
}

// ---------------------------------------------------------------- round trip

// alloca (signals s = 1) -> c = a + b (waits s >= 1, signals s = 2) -> read
// c -> dealloca (waits s >= 2, signals s = 3).
static void round_trip(halo_test_fixture_t *fixture, halo_memory_type_t type) {
  halo_client_t *client = fixture->client;
  alloca_usage_t baseline = usage_now(&fixture->daemon);
  halo_executable_t *executable = halo_test_load_kernels(client);
  uint32_t n = N;
  halo_command_buffer_t *add =
      halo_test_record_vector_add(client, executable, &n);
  halo_queue_t *queue = create_queue(client);
  halo_buffer_t *a = halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE,
                                             N * sizeof(float), 0);
  halo_buffer_t *b =
      halo_test_create_buffer(client, HALO_MEMORY_DEVICE, N * sizeof(float), 0);
  write_floats(a, 0.0f, 1.0f);
  write_floats(b, 1.0f, 0.0f);
  halo_semaphore_t *s = create_semaphore(client);

  halo_semaphore_value_t allocated = {s, 1};
  halo_buffer_t *c =
      alloca_buffer(queue, NULL, &allocated, type, N * sizeof(float));
  if (type == HALO_MEMORY_HOST_VISIBLE) {
    assert_non_null(halo_buffer_host_pointer(c));
  } else {
    assert_null(halo_buffer_host_pointer(c));
  }
  halo_binding_t bindings[3] = {{a, 0, HALO_WHOLE_BUFFER},
                                {b, 0, HALO_WHOLE_BUFFER},
                                {c, 0, HALO_WHOLE_BUFFER}};
  halo_semaphore_value_t written = {s, 2};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(queue, add, bindings, 3, &allocated, 1, &written, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(s, 2, DEADLINE_NS));
  expect_floats(c, 1.0f, 1.0f);
  if (type == HALO_MEMORY_HOST_VISIBLE) {
    const float *host = halo_buffer_host_pointer(c);
    assert_true(host[N - 1] == (float)N);
  }

  halo_semaphore_value_t freed = {s, 3};
  HALO_TEST_ASSERT_OK(halo_queue_dealloca(queue, &written, 1, &freed, 1, c));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(s, 3, DEADLINE_NS));

  // The handle is gone: every use names it.
  char handle[32];
  snprintf(handle, sizeof(handle), "0x%llx",
           (unsigned long long)halo_buffer_handle(c));
  float word;
  HALO_TEST_EXPECT_STATUS(halo_buffer_read(c, 0, &word, sizeof(word)),
                          HALO_STATUS_NOT_FOUND, handle);
  HALO_TEST_EXPECT_STATUS(halo_buffer_write(c, 0, &word, sizeof(word)),
                          HALO_STATUS_NOT_FOUND, handle);
  assert_null(halo_buffer_host_pointer(c));
  HALO_TEST_EXPECT_STATUS(halo_queue_dealloca(queue, NULL, 0, NULL, 0, c),
                          HALO_STATUS_NOT_FOUND, handle);
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(queue, add, bindings, 3, NULL, 0, NULL, 0),
      HALO_STATUS_NOT_FOUND, handle);
  halo_token_t token;
  HALO_TEST_EXPECT_STATUS(halo_buffer_export(c, &token), HALO_STATUS_NOT_FOUND,
                          handle);
  halo_buffer_release(c);  // local only

  halo_buffer_release(a);
  halo_buffer_release(b);
  halo_semaphore_release(s);
  halo_command_buffer_release(add);
  halo_executable_release(executable);
  halo_queue_release(queue);
  expect_usage(&fixture->daemon, &baseline);
}

static void test_device_round_trip(void **state) {
  round_trip(*state, HALO_MEMORY_DEVICE);
}

static void test_host_visible_round_trip(void **state) {
  round_trip(*state, HALO_MEMORY_HOST_VISIBLE);
}

// An alloca waiting on a host semaphore: the buffer exists at once (it
// counts against the quota and shows in haloctl buffers), the alloca shows
// as pending with its kind, and its signal comes only after the wait.
static void test_alloca_waits_in_queue_order(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  alloca_usage_t baseline = usage_now(&fixture->daemon);
  halo_queue_t *queue = create_queue(client);
  halo_semaphore_t *gate = create_semaphore(client);
  halo_semaphore_t *s = create_semaphore(client);
  halo_semaphore_value_t wait = {gate, 1};
  halo_semaphore_value_t signal = {s, 1};
  halo_buffer_t *c =
      alloca_buffer(queue, &wait, &signal, HALO_MEMORY_DEVICE, 12345);
  alloca_usage_t usage = usage_now(&fixture->daemon);
  assert_int_equal(usage.buffers, baseline.buffers + 1);
  assert_int_equal(usage.device_bytes, baseline.device_bytes + 12345);
  assert_int_equal(usage.pending, baseline.pending + 1);
  // Before the wait is met the buffer may already be written (the memory is
  // there); the signal is what orders users.
  uint8_t bytes[16] = {1, 2, 3};
  HALO_TEST_ASSERT_OK(halo_buffer_write(c, 0, bytes, sizeof(bytes)));
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(s, 1, 20 * HALO_TEST_MS),
                          HALO_STATUS_DEADLINE_EXCEEDED, NULL);

  // haloctl queues: the pending alloca with its kind and buffer.
  halo_wire_response_t *response = halo_test_admin_queues(&fixture->daemon);
  bool found = false;
  for (size_t i = 0; i < response->admin_queues->n_queues; ++i) {
    const Halo__Wire__QueueInfo *info = response->admin_queues->queues[i];
    for (size_t a = 0; a < info->n_pending_actions; ++a) {
      const Halo__Wire__PendingAction *action = info->pending_actions[a];
      if (strcmp(action->kind, "alloca") != 0) continue;
      found = true;
      assert_true(action->has_buffer_id);
      assert_int_equal(action->n_waits, 1);
      assert_int_equal(action->waits[0]->value, 1);
      assert_false(action->waits[0]->met);
    }
  }
  halo__wire__response__free_unpacked(response, NULL);
  assert_true(found);
  // haloctl buffers: it is there like a created one.
  halo_admin_t *admin = NULL;
  HALO_TEST_ASSERT_OK(
      halo_admin_connect(fixture->daemon.admin_address, 5000, &admin));
  HALO_TEST_ASSERT_OK(halo_admin_buffers(admin, &response));
  halo_admin_close(admin);
  found = false;
  for (size_t i = 0; i < response->admin_buffers->n_buffers; ++i) {
    const Halo__Wire__BufferInfo *info = response->admin_buffers->buffers[i];
    if (info->size == 12345 && strcmp(info->memory_type, "device") == 0) {
      found = true;
      assert_int_equal(info->owner_session, halo_client_session_id(client));
    }
  }
  halo__wire__response__free_unpacked(response, NULL);
  assert_true(found);

  HALO_TEST_ASSERT_OK(halo_semaphore_signal(gate, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(s, 1, DEADLINE_NS));
  uint8_t back[16];
  HALO_TEST_ASSERT_OK(halo_buffer_read(c, 0, back, sizeof(back)));
  assert_memory_equal(back, bytes, sizeof(bytes));

  // A chain of allocas, each waiting on the one before (the first on the
  // gate): all signal in order once the gate opens.
  halo_semaphore_t *chain_done = create_semaphore(client);
  halo_buffer_t *chain[8];
  for (uint64_t i = 0; i < 8; ++i) {
    halo_semaphore_value_t after = {i ? chain_done : gate, i ? i : 2};
    halo_semaphore_value_t next = {chain_done, i + 1};
    chain[i] = alloca_buffer(
        queue, &after, &next,
        i % 2 ? HALO_MEMORY_HOST_VISIBLE : HALO_MEMORY_DEVICE, 64 + i);
  }
  assert_int_equal(query(chain_done), 0);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(gate, 2));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(chain_done, 8, DEADLINE_NS));
  halo_semaphore_release(chain_done);
  for (int i = 0; i < 8; ++i) {
    HALO_TEST_ASSERT_OK(halo_queue_dealloca(queue, NULL, 0, NULL, 0, chain[i]));
    halo_buffer_release(chain[i]);
  }
  halo_semaphore_value_t freed = {s, 2};
  HALO_TEST_ASSERT_OK(halo_queue_dealloca(queue, NULL, 0, &freed, 1, c));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(s, 2, DEADLINE_NS));
  halo_buffer_release(c);
  halo_semaphore_release(gate);
  halo_semaphore_release(s);
  halo_queue_release(queue);
  expect_usage(&fixture->daemon, &baseline);
}

// ---------------------------------------------------------------- lifetime

// X writes c (c = a + b) and Y reads it (o = c + zero); both wait on a host
// gate when c is deallocated. The memory stays valid until they ran: an
// alloca of the same size scribbled over right after the dealloca does not
// change o, and the dealloca's signal comes after Y's.
static void test_dealloca_waits_for_executions(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  alloca_usage_t baseline = usage_now(&fixture->daemon);
  halo_executable_t *executable = halo_test_load_kernels(client);
  uint32_t n = N;
  halo_command_buffer_t *add =
      halo_test_record_vector_add(client, executable, &n);
  halo_queue_t *queue = create_queue(client);
  const uint64_t bytes = N * sizeof(float);
  halo_buffer_t *a =
      halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE, bytes, 0);
  halo_buffer_t *b =
      halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE, bytes, 0);
  halo_buffer_t *zero =
      halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE, bytes, 0);
  halo_buffer_t *o =
      halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE, bytes, 0);
  write_floats(a, 5.0f, 2.0f);
  write_floats(b, 1.0f, 1.0f);
  write_floats(zero, 0.0f, 0.0f);
  halo_semaphore_t *gate = create_semaphore(client);
  halo_semaphore_t *s = create_semaphore(client);
  halo_semaphore_t *freed = create_semaphore(client);

  halo_semaphore_value_t allocated = {s, 1};
  halo_buffer_t *c =
      alloca_buffer(queue, NULL, &allocated, HALO_MEMORY_DEVICE, bytes);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(s, 1, DEADLINE_NS));
  halo_binding_t x_bindings[3] = {{a, 0, HALO_WHOLE_BUFFER},
                                  {b, 0, HALO_WHOLE_BUFFER},
                                  {c, 0, HALO_WHOLE_BUFFER}};
  halo_semaphore_value_t x_wait[2] = {{s, 1}, {gate, 1}};
  halo_semaphore_value_t x_done = {s, 2};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(queue, add, x_bindings, 3, x_wait, 2, &x_done, 1));
  halo_binding_t y_bindings[3] = {{c, 0, HALO_WHOLE_BUFFER},
                                  {zero, 0, HALO_WHOLE_BUFFER},
                                  {o, 0, HALO_WHOLE_BUFFER}};
  halo_semaphore_value_t y_done = {s, 3};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(queue, add, y_bindings, 3, &x_done, 1, &y_done, 1));
  // No wait: only the executions that bound c hold it now.
  halo_semaphore_value_t freed_value = {freed, 1};
  HALO_TEST_ASSERT_OK(halo_queue_dealloca(queue, NULL, 0, &freed_value, 1, c));
  halo_buffer_release(c);

  // Memory freed now would likely come back here; scribble over all of it.
  halo_buffer_t *scribble =
      alloca_buffer(queue, NULL, NULL, HALO_MEMORY_DEVICE, bytes);
  write_floats(scribble, -7.0f, -3.0f);
  halo_test_sleep_ms(20);
  assert_int_equal(query(freed), 0);
  alloca_usage_t usage = usage_now(&fixture->daemon);
  assert_int_equal(usage.device_bytes, baseline.device_bytes + 2 * bytes);

  HALO_TEST_ASSERT_OK(halo_semaphore_signal(gate, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(freed, 1, DEADLINE_NS));
  // The dealloca signaled after Y completed (and its host signal landed).
  assert_true(query(s) >= 3);
  expect_floats(o, 6.0f, 3.0f);

  HALO_TEST_ASSERT_OK(halo_queue_dealloca(queue, NULL, 0, NULL, 0, scribble));
  halo_buffer_release(scribble);
  halo_buffer_release(a);
  halo_buffer_release(b);
  halo_buffer_release(zero);
  halo_buffer_release(o);
  halo_semaphore_release(gate);
  halo_semaphore_release(s);
  halo_semaphore_release(freed);
  halo_command_buffer_release(add);
  halo_executable_release(executable);
  halo_queue_release(queue);
  expect_usage(&fixture->daemon, &baseline);
}

// ---------------------------------------------------------------- failures

static void test_failed_waits_fail_signals(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  alloca_usage_t baseline = usage_now(&fixture->daemon);
  halo_queue_t *queue = create_queue(client);
  halo_semaphore_t *upstream = create_semaphore(client);
  halo_semaphore_t *s = create_semaphore(client);
  halo_semaphore_t *d = create_semaphore(client);
  halo_semaphore_value_t wait = {upstream, 1};
  halo_semaphore_value_t signal = {s, 1};
  halo_buffer_t *c =
      alloca_buffer(queue, &wait, &signal, HALO_MEMORY_HOST_VISIBLE, 4096);
  halo_semaphore_value_t dealloca_wait = {s, 1};
  halo_semaphore_value_t dealloca_signal = {d, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_dealloca(queue, &dealloca_wait, 1, &dealloca_signal, 1, c));
  halo_buffer_release(c);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_fail(upstream, HALO_STATUS_DATA_LOSS, "upstream broke"));
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(s, 1, DEADLINE_NS),
                          HALO_STATUS_DATA_LOSS, "upstream broke");
  // The failure travels on through the dealloca (whose memory still goes).
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(d, 1, DEADLINE_NS),
                          HALO_STATUS_DATA_LOSS, "upstream broke");
  halo_semaphore_release(upstream);
  halo_semaphore_release(s);
  halo_semaphore_release(d);
  halo_queue_release(queue);
  expect_usage(&fixture->daemon, &baseline);
}

// Errors through libhalo (over the ring unless HALO_RING=0: the same
// results either way).
static void test_errors_name_what_was_wrong(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  alloca_usage_t baseline = usage_now(&fixture->daemon);
  halo_queue_t *queue = create_queue(client);
  halo_semaphore_t *s = create_semaphore(client);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(s, 5));
  halo_buffer_t *buffer = NULL;
  HALO_TEST_EXPECT_STATUS(halo_queue_alloca(queue, NULL, 0, NULL, 0,
                                            HALO_MEMORY_DEVICE, 0, &buffer),
                          HALO_STATUS_INVALID_ARGUMENT, "size 0");
  assert_null(buffer);
  HALO_TEST_EXPECT_STATUS(halo_queue_alloca(queue, NULL, 0, NULL, 0,
                                            (halo_memory_type_t)7, 64, &buffer),
                          HALO_STATUS_INVALID_ARGUMENT, "memory_type 7");
  HALO_TEST_EXPECT_STATUS(halo_queue_alloca(NULL, NULL, 0, NULL, 0,
                                            HALO_MEMORY_DEVICE, 64, &buffer),
                          HALO_STATUS_INVALID_ARGUMENT, "queue");
  halo_semaphore_value_t stale_signal = {s, 5};
  HALO_TEST_EXPECT_STATUS(halo_queue_alloca(queue, NULL, 0, &stale_signal, 1,
                                            HALO_MEMORY_DEVICE, 64, &buffer),
                          HALO_STATUS_INVALID_ARGUMENT, "signal 0");
  halo_semaphore_value_t too_big = {s, HALO_SEMAPHORE_MAX_VALUE + 1};
  HALO_TEST_EXPECT_STATUS(halo_queue_alloca(queue, &too_big, 1, NULL, 0,
                                            HALO_MEMORY_DEVICE, 64, &buffer),
                          HALO_STATUS_INVALID_ARGUMENT, "2^63");
  assert_null(buffer);

  // Objects of another client.
  halo_client_t *other = halo_test_connect(&fixture->daemon, 0);
  halo_buffer_t *foreign =
      halo_test_create_buffer(other, HALO_MEMORY_DEVICE, 64, 0);
  HALO_TEST_EXPECT_STATUS(halo_queue_dealloca(queue, NULL, 0, NULL, 0, foreign),
                          HALO_STATUS_INVALID_ARGUMENT, "another client");
  halo_semaphore_t *foreign_semaphore = create_semaphore(other);
  halo_semaphore_value_t foreign_signal = {foreign_semaphore, 1};
  HALO_TEST_EXPECT_STATUS(halo_queue_alloca(queue, NULL, 0, &foreign_signal, 1,
                                            HALO_MEMORY_DEVICE, 64, &buffer),
                          HALO_STATUS_INVALID_ARGUMENT, "another client");
  halo_semaphore_release(foreign_semaphore);
  halo_buffer_release(foreign);
  halo_client_close(other);

  // Exportable buffers may be held by other sessions.
  halo_buffer_t *exported = halo_test_create_buffer(
      client, HALO_MEMORY_DEVICE, 64, HALO_OBJECT_FLAG_EXPORTABLE);
  HALO_TEST_EXPECT_STATUS(
      halo_queue_dealloca(queue, NULL, 0, NULL, 0, exported),
      HALO_STATUS_FAILED_PRECONDITION, "exportable");
  halo_buffer_release(exported);

  // A refused dealloca leaves the buffer as it was; a created (not
  // alloca'd) buffer may be deallocated too.
  halo_buffer_t *plain =
      halo_test_create_buffer(client, HALO_MEMORY_DEVICE, 64, 0);
  HALO_TEST_EXPECT_STATUS(
      halo_queue_dealloca(queue, NULL, 0, &stale_signal, 1, plain),
      HALO_STATUS_INVALID_ARGUMENT, "signal 0");
  uint8_t bytes[8] = {9};
  HALO_TEST_ASSERT_OK(halo_buffer_write(plain, 0, bytes, sizeof(bytes)));
  HALO_TEST_ASSERT_OK(halo_queue_dealloca(queue, NULL, 0, NULL, 0, plain));
  halo_buffer_release(plain);

  halo_semaphore_release(s);
  halo_queue_release(queue);
  expect_usage(&fixture->daemon, &baseline);
}

// What libhalo never sends: raw requests with bad handles and fields.
static void test_raw_requests_are_validated(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_test_raw_t raw;
  halo_test_raw_open(&raw, fixture->daemon.listen_address, 0);
  halo_test_raw_hello(&raw);
  halo_test_raw_t other;
  halo_test_raw_open(&other, fixture->daemon.listen_address, 0);
  halo_test_raw_hello(&other);

  Halo__Wire__QueueCreate create = HALO__WIRE__QUEUE_CREATE__INIT;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_CREATE;
  request.queue_create = &create;
  halo_wire_response_t *response =
      HALO_TEST_EXPECT_OK(halo_test_raw_call(&raw, &request));
  uint64_t queue = response->queue->handle;
  halo__wire__response__free_unpacked(response, NULL);

  Halo__Wire__QueueAlloca alloca = HALO__WIRE__QUEUE_ALLOCA__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_ALLOCA;
  request.queue_alloca = &alloca;
  alloca.queue = 0;
  alloca.size = 64;
  HALO_TEST_EXPECT_ERROR(halo_test_raw_call(&raw, &request),
                         HALO_STATUS_INVALID_ARGUMENT, "queue: handle 0");
  alloca.queue = queue;
  alloca.memory_type = (Halo__Wire__MemoryType)9;
  HALO_TEST_EXPECT_ERROR(halo_test_raw_call(&raw, &request),
                         HALO_STATUS_INVALID_ARGUMENT, "memory type 9");
  alloca.memory_type = HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE;
  alloca.size = (1ull << 40) + 1;
  HALO_TEST_EXPECT_ERROR(halo_test_raw_call(&raw, &request),
                         HALO_STATUS_INVALID_ARGUMENT, "2^40");
  alloca.size = 4096;
  response = HALO_TEST_EXPECT_OK(halo_test_raw_call(&raw, &request));
  assert_int_equal(response->body_case, HALO__WIRE__RESPONSE__BODY_BUFFER);
  uint64_t buffer = response->buffer->handle;
  assert_non_null(response->buffer->placement);
  assert_true(response->buffer->has_submission_id);
  halo__wire__response__free_unpacked(response, NULL);
  // Another session's queue.
  HALO_TEST_EXPECT_ERROR(halo_test_raw_call(&other, &request),
                         HALO_STATUS_INVALID_ARGUMENT,
                         "does not belong to this session");

  Halo__Wire__QueueDealloca dealloca = HALO__WIRE__QUEUE_DEALLOCA__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_DEALLOCA;
  request.queue_dealloca = &dealloca;
  dealloca.queue = queue;
  dealloca.buffer = queue;  // a queue handle, not a buffer's
  HALO_TEST_EXPECT_ERROR(halo_test_raw_call(&raw, &request),
                         HALO_STATUS_INVALID_ARGUMENT, "expected a buffer");
  dealloca.buffer = buffer;
  // Another session's handle.
  Halo__Wire__QueueCreate other_create = HALO__WIRE__QUEUE_CREATE__INIT;
  Halo__Wire__Request other_request = HALO__WIRE__REQUEST__INIT;
  other_request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_CREATE;
  other_request.queue_create = &other_create;
  response = HALO_TEST_EXPECT_OK(halo_test_raw_call(&other, &other_request));
  dealloca.queue = response->queue->handle;
  halo__wire__response__free_unpacked(response, NULL);
  HALO_TEST_EXPECT_ERROR(halo_test_raw_call(&other, &request),
                         HALO_STATUS_INVALID_ARGUMENT,
                         "does not belong to this session");
  dealloca.queue = queue;
  response = HALO_TEST_EXPECT_OK(halo_test_raw_call(&raw, &request));
  assert_int_equal(response->body_case,
                   HALO__WIRE__RESPONSE__BODY_QUEUE_EXECUTE);
  halo__wire__response__free_unpacked(response, NULL);
  // Stale now.
  char text[32];
  snprintf(text, sizeof(text), "0x%llx", (unsigned long long)buffer);
  HALO_TEST_EXPECT_ERROR(halo_test_raw_call(&raw, &request),
                         HALO_STATUS_NOT_FOUND, text);
  Halo__Wire__BufferRelease release = HALO__WIRE__BUFFER_RELEASE__INIT;
  release.handle = buffer;
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE;
  request.buffer_release = &release;
  HALO_TEST_EXPECT_ERROR(halo_test_raw_call(&raw, &request),
                         HALO_STATUS_NOT_FOUND, "stale");
  halo_test_raw_close(&other);
  halo_test_raw_close(&raw);
}

// ---------------------------------------------------------------- quota

static int setup_small_quota(void **state) {
  halo_test_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  static const char *const args[] = {"--session-device-bytes", "1M",
                                     "--session-host-bytes", "1M", NULL};
  halo_test_daemon_start_with_args(&fixture->daemon, args);
  fixture->client = halo_test_connect(&fixture->daemon, 0);
  return 0;
}

static void test_quota_is_charged_at_alloca(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_queue_t *queue = create_queue(client);
  halo_semaphore_t *gate = create_semaphore(client);
  halo_semaphore_t *freed = create_semaphore(client);
  halo_buffer_t *buffer = NULL;
  for (int type = 0; type < 2; ++type) {
    const char *quota = type ? "session-host-bytes" : "session-device-bytes";
    HALO_TEST_EXPECT_STATUS(
        halo_queue_alloca(queue, NULL, 0, NULL, 0, (halo_memory_type_t)type,
                          2 << 20, &buffer),
        HALO_STATUS_RESOURCE_EXHAUSTED, quota);
    // Charged while the alloca still waits.
    halo_semaphore_value_t wait = {gate, 1 + (uint64_t)type};
    halo_buffer_t *first =
        alloca_buffer(queue, &wait, NULL, (halo_memory_type_t)type, 768 << 10);
    HALO_TEST_EXPECT_STATUS(
        halo_queue_alloca(queue, NULL, 0, NULL, 0, (halo_memory_type_t)type,
                          512 << 10, &buffer),
        HALO_STATUS_RESOURCE_EXHAUSTED, quota);
    assert_null(buffer);
    // Returned once the dealloca freed the memory.
    // A refused alloca gives back the signal value it reserved: the next
    // submission may signal it.
    halo_semaphore_value_t signal = {freed, 1 + (uint64_t)type};
    HALO_TEST_EXPECT_STATUS(
        halo_queue_alloca(queue, NULL, 0, &signal, 1, (halo_memory_type_t)type,
                          512 << 10, &buffer),
        HALO_STATUS_RESOURCE_EXHAUSTED, quota);
    HALO_TEST_ASSERT_OK(
        halo_queue_dealloca(queue, &wait, 1, &signal, 1, first));
    halo_buffer_release(first);
    HALO_TEST_ASSERT_OK(halo_semaphore_signal(gate, 1 + (uint64_t)type));
    HALO_TEST_ASSERT_OK(
        halo_semaphore_wait(freed, 1 + (uint64_t)type, DEADLINE_NS));
    buffer =
        alloca_buffer(queue, NULL, NULL, (halo_memory_type_t)type, 512 << 10);
    HALO_TEST_ASSERT_OK(halo_queue_dealloca(queue, NULL, 0, NULL, 0, buffer));
    halo_buffer_release(buffer);
    buffer = NULL;
  }
  halo_semaphore_release(gate);
  halo_semaphore_release(freed);
  halo_queue_release(queue);
}

// ---------------------------------------------------------------- kill

static void test_killed_client_leaves_daemon_clean(void **state) {
  halo_test_fixture_t *fixture = *state;
  alloca_usage_t baseline = usage_now(&fixture->daemon);
  halo_test_process_t *victim = &fixture->peers[0];
  const char *argv[] = {EXECUTE_TEST_PEER, fixture->daemon.listen_address,
                        "alloca", halo_test_kernels_path(), NULL};
  halo_test_spawn(victim, argv);
  char line[64];
  halo_test_read_line(victim, line, sizeof(line), 10000);
  assert_string_equal(line, "ready");
  alloca_usage_t usage = usage_now(&fixture->daemon);
  // 8 allocas, 8 executions and 8 deallocas waiting; a dealloca issued and
  // waiting for an execution that waits; the last alloca's buffer used by a
  // running kernel.
  assert_int_equal(usage.buffers, baseline.buffers + 10);
  assert_true(usage.device_bytes > baseline.device_bytes);
  assert_true(usage.host_bytes > baseline.host_bytes);
  assert_true(usage.pending >= baseline.pending + 25);
  assert_true(usage.in_flight >= 2);

  assert_int_equal(kill(victim->pid, SIGKILL), 0);
  assert_true(
      HALO_TEST_POLL(halo_test_process_exited(victim), HALO_TEST_DEADLINE_MS));
  assert_true(WIFSIGNALED(victim->wait_status));
  expect_usage(&fixture->daemon, &baseline);
  // The daemon serves on.
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->client));
}

// ---------------------------------------------------------------- chains

// A chain of allocas, each waiting on the one before, set off at once by
// its gate: halod retires the links in a loop, not in a recursion as deep
// as the chain. Here halod runs with a 1 MiB stack (prlimit); before, a
// chain of 10,000 whose gate failed overflowed it and halod died (at its
// default 8 MiB, 65,000 came close, and a client may keep session-pending
// in each of its sessions).
enum { CHAIN_LINKS = 16000 };

static int setup_small_stack(void **state) {
  halo_test_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  const char *prlimit = halo_test_prlimit();
  if (!prlimit) return 0;  // the test skips
  const char *wrapper[] = {prlimit, "--stack=1048576", NULL};
  halo_test_daemon_start_wrapped(&fixture->daemon, wrapper, NULL);
  fixture->client = halo_test_connect(&fixture->daemon, 0);
  return 0;
}

// Submits CHAIN_LINKS allocas of |chain|, the first waiting on |gate| 1.
static void submit_chain(halo_queue_t *queue, halo_semaphore_t *gate,
                         halo_semaphore_t *chain) {
  for (uint64_t i = 0; i < CHAIN_LINKS; ++i) {
    halo_semaphore_value_t after = {i ? chain : gate, i ? i : 1};
    halo_semaphore_value_t next = {chain, i + 1};
    halo_buffer_t *buffer = NULL;
    HALO_TEST_ASSERT_OK(halo_queue_alloca(queue, &after, 1, &next, 1,
                                          HALO_MEMORY_DEVICE, 64, &buffer));
    // Kept (no release's round trip): the client's close frees them.
    (void)buffer;
  }
}

static void test_long_chains_retire_in_a_loop(void **state) {
  halo_test_fixture_t *fixture = *state;
  if (!halo_test_prlimit()) {
    print_message("prlimit(1) is not installed (util-linux); skipped\n");
    skip();
  }
  HALO_TEST_LOCAL_ONLY("halod's stack is bounded for the local driver only");
  halo_client_t *client = fixture->client;
  halo_queue_t *queue = create_queue(client);
  // A failed gate fails every link.
  halo_semaphore_t *gate = create_semaphore(client);
  halo_semaphore_t *chain = create_semaphore(client);
  submit_chain(queue, gate, chain);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_fail(gate, HALO_STATUS_ABORTED, "the gate failed"));
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(chain, CHAIN_LINKS, DEADLINE_NS),
                          HALO_STATUS_ABORTED, "the gate failed");
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_semaphore_release(gate);
  halo_semaphore_release(chain);
  // A gate signaled completes every link in order.
  gate = create_semaphore(client);
  chain = create_semaphore(client);
  submit_chain(queue, gate, chain);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(gate, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(chain, CHAIN_LINKS, DEADLINE_NS));
  assert_int_equal(query(chain), CHAIN_LINKS);
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_semaphore_release(gate);
  halo_semaphore_release(chain);
  halo_queue_release(queue);
  assert_int_equal(waitpid(fixture->daemon.pid, NULL, WNOHANG), 0);
}

int main(void) {
  // Synchronous verdicts (the default) are what these tests check; the
  // asynchronous dealloca ($HALO_RING_ASYNC=1) is ring_test's.
  unsetenv("HALO_RING_ASYNC");
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
  const struct CMUnitTest tests[] = {
#define TEST(name)                                               \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
      TEST(test_device_round_trip),
      TEST(test_host_visible_round_trip),
      TEST(test_alloca_waits_in_queue_order),
      TEST(test_dealloca_waits_for_executions),
      TEST(test_failed_waits_fail_signals),
      TEST(test_errors_name_what_was_wrong),
      TEST(test_raw_requests_are_validated),
      cmocka_unit_test_setup_teardown(test_quota_is_charged_at_alloca,
                                      setup_small_quota,
                                      halo_test_fixture_teardown),
      TEST(test_killed_client_leaves_daemon_clean),
      cmocka_unit_test_setup_teardown(test_long_chains_retire_in_a_loop,
                                      setup_small_stack,
                                      halo_test_fixture_teardown),
#undef TEST
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
