// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of timeline semaphores across processes: peers are
// separate programs (fork+exec of semaphore_peer) that import exported
// semaphores and exit with the status code of their wait. A producer and a
// consumer hand off data through a shared buffer; N waiters in N processes
// all wake on one signal; timeouts and failures reach other processes; a
// creator killed with SIGKILL fails the semaphores others imported.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

#define MS HALO_TEST_MS

static void export_semaphore(halo_semaphore_t *semaphore, char text[33]) {
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_semaphore_export(semaphore, &token));
  halo_token_format(&token, text);
}

static halo_semaphore_t *create_exported(halo_client_t *client,
                                         uint64_t initial_value,
                                         char text[33]) {
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(
      client, initial_value, HALO_OBJECT_FLAG_EXPORTABLE, &semaphore));
  export_semaphore(semaphore, text);
  return semaphore;
}

// Starts `semaphore_peer wait TOKEN VALUE TIMEOUT_MS` and returns once it
// sleeps in the wait.
static void spawn_waiter(halo_test_fixture_t *fixture, int index,
                         const char *token, uint64_t value, int timeout_ms) {
  char value_text[32];
  char timeout_text[32];
  snprintf(value_text, sizeof(value_text), "%llu", (unsigned long long)value);
  snprintf(timeout_text, sizeof(timeout_text), "%d", timeout_ms);
  const char *args[] = {"wait", token, value_text, timeout_text, NULL};
  halo_test_process_t *peer = &fixture->peers[index];
  halo_test_spawn_peer(peer, fixture->daemon.listen_address, args);
  char line[64];
  halo_test_read_line(peer, line, sizeof(line), HALO_TEST_DEADLINE_MS);
  assert_string_equal(line, "ready");
}

static void await_waiter_sleeping(halo_test_fixture_t *fixture, int index) {
  halo_test_process_t *peer = &fixture->peers[index];
  if (!halo_test_wait_until_sleeping(peer->pid, peer->pid,
                                     HALO_TEST_DEADLINE_MS)) {
    print_error("peer %d never slept in its wait\n", peer->pid);
    fail();
  }
}

// Reads the peer's "done CODE" line within |timeout_ms| and returns CODE;
// also checks the exit status matches.
static int waiter_result(halo_test_fixture_t *fixture, int index,
                         int timeout_ms) {
  halo_test_process_t *peer = &fixture->peers[index];
  char line[64];
  halo_test_read_line(peer, line, sizeof(line), timeout_ms);
  int code = -1;
  assert_int_equal(sscanf(line, "done %d", &code), 1);
  assert_int_equal(halo_test_process_wait(peer, HALO_TEST_DEADLINE_MS), code);
  return code;
}

static void test_producer_consumer(void **state) {
  halo_test_fixture_t *fixture = *state;
  char data_token[33];
  char ack_token[33];
  char buffer_token[33];
  halo_semaphore_t *data = create_exported(fixture->client, 0, data_token);
  halo_semaphore_t *ack = create_exported(fixture->client, 0, ack_token);
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_buffer_create(fixture->client, 0,
                                         HALO_MEMORY_HOST_VISIBLE, 64,
                                         HALO_OBJECT_FLAG_EXPORTABLE, &buffer));
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_buffer_export(buffer, &token));
  halo_token_format(&token, buffer_token);
  const char *count = "300";
  const char *consume[] = {"consume",    data_token, ack_token,
                           buffer_token, count,      NULL};
  const char *produce[] = {"produce",    data_token, ack_token,
                           buffer_token, count,      NULL};
  halo_test_spawn_peer(&fixture->peers[0], fixture->daemon.listen_address,
                       consume);
  halo_test_spawn_peer(&fixture->peers[1], fixture->daemon.listen_address,
                       produce);
  assert_int_equal(halo_test_process_wait(&fixture->peers[0], 20000), 0);
  assert_int_equal(halo_test_process_wait(&fixture->peers[1], 20000), 0);
  uint64_t value = 0;
  HALO_TEST_ASSERT_OK(halo_semaphore_query(data, &value));
  assert_int_equal(value, 300);
  HALO_TEST_ASSERT_OK(halo_semaphore_query(ack, &value));
  assert_int_equal(value, 300);
  assert_int_equal(*(uint64_t *)halo_buffer_host_pointer(buffer), 300 * 7919);
  halo_buffer_release(buffer);
  halo_semaphore_release(ack);
  halo_semaphore_release(data);
}

static void test_n_waiters_wake_on_one_signal(void **state) {
  halo_test_fixture_t *fixture = *state;
  enum { WAITERS = 8 };
  char text[33];
  halo_semaphore_t *semaphore = create_exported(fixture->client, 0, text);
  for (int i = 0; i < WAITERS; ++i) spawn_waiter(fixture, i, text, 5, 10000);
  // One more waits for a value the signal does not reach.
  spawn_waiter(fixture, WAITERS, text, 6, 1500);
  for (int i = 0; i <= WAITERS; ++i) await_waiter_sleeping(fixture, i);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 4));  // not yet
  for (int i = 0; i <= WAITERS; ++i) {
    await_waiter_sleeping(fixture, i);
    assert_false(halo_test_process_exited(&fixture->peers[i]));
  }
  int64_t signaled = halo_test_now_ns();
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 5));
  for (int i = 0; i < WAITERS; ++i) {
    assert_int_equal(waiter_result(fixture, i, HALO_TEST_DEADLINE_MS),
                     HALO_STATUS_OK);
  }
  // All woke promptly (by the futex, not a sleep slice or the timeout).
  assert_true(halo_test_now_ns() - signaled < 2000 * MS);
  // The one waiting for 6 times out in its own process.
  assert_int_equal(waiter_result(fixture, WAITERS, HALO_TEST_DEADLINE_MS),
                   HALO_STATUS_DEADLINE_EXCEEDED);
  halo_semaphore_release(semaphore);
}

static void test_wait_timeout_in_other_process(void **state) {
  halo_test_fixture_t *fixture = *state;
  char text[33];
  halo_semaphore_t *semaphore = create_exported(fixture->client, 0, text);
  int64_t start = halo_test_now_ns();
  spawn_waiter(fixture, 0, text, 1, 200);
  assert_int_equal(waiter_result(fixture, 0, HALO_TEST_DEADLINE_MS),
                   HALO_STATUS_DEADLINE_EXCEEDED);
  assert_true(halo_test_now_ns() - start >= 200 * MS);
  // A zero timeout on an unreached value polls once.
  spawn_waiter(fixture, 1, text, 1, 0);
  assert_int_equal(waiter_result(fixture, 1, HALO_TEST_DEADLINE_MS),
                   HALO_STATUS_DEADLINE_EXCEEDED);
  halo_semaphore_release(semaphore);
}

static void test_failure_reaches_other_processes(void **state) {
  halo_test_fixture_t *fixture = *state;
  char text[33];
  halo_semaphore_t *semaphore = create_exported(fixture->client, 3, text);
  enum { WAITERS = 4 };
  for (int i = 0; i < WAITERS; ++i) spawn_waiter(fixture, i, text, 10, 10000);
  for (int i = 0; i < WAITERS; ++i) await_waiter_sleeping(fixture, i);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_fail(semaphore, HALO_STATUS_DATA_LOSS, "lost the data"));
  for (int i = 0; i < WAITERS; ++i) {
    assert_int_equal(waiter_result(fixture, i, HALO_TEST_DEADLINE_MS),
                     HALO_STATUS_DATA_LOSS);
  }
  // Late waiters: a reached value is still OK, an unreached one fails.
  spawn_waiter(fixture, WAITERS, text, 3, 10000);
  assert_int_equal(waiter_result(fixture, WAITERS, HALO_TEST_DEADLINE_MS),
                   HALO_STATUS_OK);
  spawn_waiter(fixture, WAITERS + 1, text, 4, 10000);
  assert_int_equal(waiter_result(fixture, WAITERS + 1, HALO_TEST_DEADLINE_MS),
                   HALO_STATUS_DATA_LOSS);
  halo_semaphore_release(semaphore);
}

static void test_other_process_signals_and_fails(void **state) {
  halo_test_fixture_t *fixture = *state;
  char text[33];
  halo_semaphore_t *semaphore = create_exported(fixture->client, 0, text);
  // Another process signals: this one sees the value.
  const char *signal_args[] = {"signal", text, "7", NULL};
  halo_test_spawn_peer(&fixture->peers[0], fixture->daemon.listen_address,
                       signal_args);
  assert_int_equal(
      halo_test_process_wait(&fixture->peers[0], HALO_TEST_DEADLINE_MS),
      HALO_STATUS_OK);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(semaphore, 7, 1000 * MS));
  // A lower value from another process is rejected there.
  const char *lower_args[] = {"signal", text, "6", NULL};
  halo_test_spawn_peer(&fixture->peers[1], fixture->daemon.listen_address,
                       lower_args);
  assert_int_equal(
      halo_test_process_wait(&fixture->peers[1], HALO_TEST_DEADLINE_MS),
      HALO_STATUS_INVALID_ARGUMENT);
  // Another process fails it: this process's wait for 8 ends with the code.
  const char *fail_args[] = {"fail", text, "10", NULL};  // ABORTED
  halo_test_spawn_peer(&fixture->peers[2], fixture->daemon.listen_address,
                       fail_args);
  assert_int_equal(
      halo_test_process_wait(&fixture->peers[2], HALO_TEST_DEADLINE_MS),
      HALO_STATUS_OK);
  HALO_TEST_ASSERT_CODE(halo_semaphore_wait(semaphore, 8, 1000 * MS),
                        HALO_STATUS_ABORTED);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(semaphore, 7, 0));
  halo_semaphore_release(semaphore);
}

static void test_creator_killed_fails_imported_semaphores(void **state) {
  halo_test_fixture_t *fixture = *state;
  // The creator is another process; it starts the semaphore at 3.
  halo_test_process_t *creator = &fixture->peers[0];
  const char *args[] = {"create", "3", NULL};
  halo_test_spawn_peer(creator, fixture->daemon.listen_address, args);
  char line[64];
  halo_test_read_line(creator, line, sizeof(line), HALO_TEST_DEADLINE_MS);
  char text[33];
  assert_int_equal(sscanf(line, "token %32s", text), 1);
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_token_parse(text, &token));
  halo_semaphore_t *imported = NULL;
  HALO_TEST_ASSERT_OK(
      halo_semaphore_import(fixture->client, &token, &imported));
  // Waiters in two other processes, for values not reached.
  spawn_waiter(fixture, 1, text, 4, 10000);
  spawn_waiter(fixture, 2, text, 100, 10000);
  await_waiter_sleeping(fixture, 1);
  await_waiter_sleeping(fixture, 2);

  assert_int_equal(kill(creator->pid, SIGKILL), 0);
  assert_int_equal(waiter_result(fixture, 1, HALO_TEST_DEADLINE_MS),
                   HALO_STATUS_ABORTED);
  assert_int_equal(waiter_result(fixture, 2, HALO_TEST_DEADLINE_MS),
                   HALO_STATUS_ABORTED);
  // In this process too; the value reached before stays reached.
  HALO_TEST_ASSERT_CODE(halo_semaphore_wait(imported, 4, 1000 * MS),
                        HALO_STATUS_ABORTED);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(imported, 3, 0));
  uint64_t value = 0;
  HALO_TEST_ASSERT_CODE(halo_semaphore_query(imported, &value),
                        HALO_STATUS_ABORTED);
  assert_int_equal(value, 3);
  // A waiter started afterwards in another process sees the same.
  spawn_waiter(fixture, 3, text, 3, 1000);
  assert_int_equal(waiter_result(fixture, 3, HALO_TEST_DEADLINE_MS),
                   HALO_STATUS_OK);
  spawn_waiter(fixture, 4, text, 5, 1000);
  assert_int_equal(waiter_result(fixture, 4, HALO_TEST_DEADLINE_MS),
                   HALO_STATUS_ABORTED);
  halo_semaphore_release(imported);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name)                                                  \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_producer_consumer),
      T(test_n_waiters_wake_on_one_signal),
      T(test_wait_timeout_in_other_process),
      T(test_failure_reaches_other_processes),
      T(test_other_process_signals_and_fails),
      T(test_creator_killed_fails_imported_semaphores),
  };
#undef T
  return cmocka_run_group_tests_name("multiprocess", tests, NULL, NULL);
}
