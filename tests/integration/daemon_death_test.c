// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of a daemon that dies without warning (SIGKILL): every
// waiter, in this process and in others, returns UNAVAILABLE within a
// second (waits sleep in slices and check a pidfd of the daemon) instead of
// sleeping for ever; later calls fail instead of hanging.
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

#define MS HALO_TEST_MS

typedef struct blocked_wait_t {
  halo_semaphore_t *semaphore;
  _Atomic pid_t tid;
  halo_status_code_t code;
  int64_t finished_ns;
  _Atomic bool done;
} blocked_wait_t;

static void *blocked_wait_main(void *arg) {
  blocked_wait_t *wait = arg;
  atomic_store(&wait->tid, (pid_t)syscall(SYS_gettid));
  wait->code = halo_status_consume_code(
      halo_semaphore_wait(wait->semaphore, 1, HALO_TIMEOUT_INFINITE));
  wait->finished_ns = halo_test_now_ns();
  atomic_store(&wait->done, true);
  return NULL;
}

static void test_sigkill_wakes_waiters_with_unavailable(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(
      fixture->client, 0, HALO_OBJECT_FLAG_EXPORTABLE, &semaphore));
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_semaphore_export(semaphore, &token));
  char text[33];
  halo_token_format(&token, text);

  enum { PEERS = 3 };
  const char *args[] = {"wait", text, "1", "-1", NULL};  // wait for ever
  for (int i = 0; i < PEERS; ++i) {
    halo_test_spawn_peer(&fixture->peers[i], fixture->daemon.listen_address,
                         args);
    char line[64];
    halo_test_read_line(&fixture->peers[i], line, sizeof(line),
                        HALO_TEST_DEADLINE_MS);
    assert_string_equal(line, "ready");
  }
  blocked_wait_t wait = {.semaphore = semaphore};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, blocked_wait_main, &wait), 0);
  while (atomic_load(&wait.tid) == 0) halo_test_sleep_ms(1);
  assert_true(halo_test_wait_until_sleeping(getpid(), atomic_load(&wait.tid),
                                            HALO_TEST_DEADLINE_MS));
  for (int i = 0; i < PEERS; ++i) {
    assert_true(halo_test_wait_until_sleeping(
        fixture->peers[i].pid, fixture->peers[i].pid, HALO_TEST_DEADLINE_MS));
  }

  // The bound counts from halod's death (reaped), not from the kill: a
  // killed process's exit (unmapping its memory, TSan's shadow included) can
  // take a while on a loaded machine, and no waiter can see it dead before.
  halo_test_daemon_kill(&fixture->daemon);
  int64_t killed = halo_test_now_ns();

  char expected[32];
  snprintf(expected, sizeof(expected), "done %d", HALO_STATUS_UNAVAILABLE);
  for (int i = 0; i < PEERS; ++i) {
    char line[64];
    halo_test_read_line(&fixture->peers[i], line, sizeof(line), 2000);
    int64_t woke = halo_test_now_ns() - killed;
    assert_string_equal(line, expected);
    if (woke >= 1000 * MS) {
      print_error("peer %d woke %lld ms after the daemon died\n",
                  fixture->peers[i].pid, (long long)(woke / MS));
      fail();
    }
    assert_int_equal(
        halo_test_process_wait(&fixture->peers[i], HALO_TEST_DEADLINE_MS),
        HALO_STATUS_UNAVAILABLE);
  }
  // The in-process waiter waits for ever: if it never wakes, fail rather
  // than join (the process exit ends the thread).
  if (!HALO_TEST_POLL(atomic_load(&wait.done), 2000)) {
    print_error(
        "the waiter in this process still sleeps 2 s after halod "
        "died\n");
    fail();
  }
  assert_int_equal(pthread_join(thread, NULL), 0);
  assert_int_equal(wait.code, HALO_STATUS_UNAVAILABLE);
  assert_true(wait.finished_ns - killed < 1000 * MS);

  // A new wait on the dead daemon's semaphore ends at once too (3 s bound
  // so a broken client fails here rather than hanging).
  int64_t start = halo_test_now_ns();
  HALO_TEST_ASSERT_CODE(halo_semaphore_wait(semaphore, 1, 3000 * MS),
                        HALO_STATUS_UNAVAILABLE);
  assert_true(halo_test_now_ns() - start < 1000 * MS);
  halo_semaphore_release(semaphore);
}

static void test_calls_after_daemon_death_fail_quickly(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_close(fixture->client);
  // The 1 s request timeout below bounds the calls after halod's death; the
  // reconnect must not wait for a device worker's start (the domain's
  // worker went with its last session).
  assert_true(halo_test_admin_wait_spare(&fixture->daemon, 60000));
  fixture->client = halo_test_connect(&fixture->daemon, 1000);
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(fixture->client, 0, 0, &semaphore));
  halo_test_daemon_kill(&fixture->daemon);
  int64_t start = halo_test_now_ns();
  halo_status_t status = halo_client_ping(fixture->client);
  halo_status_code_t code = halo_status_code(status);
  halo_status_free(status);
  assert_true(code == HALO_STATUS_UNAVAILABLE ||
              code == HALO_STATUS_DEADLINE_EXCEEDED);
  status = halo_semaphore_signal(semaphore, 1);
  code = halo_status_code(status);
  halo_status_free(status);
  assert_true(code == HALO_STATUS_UNAVAILABLE ||
              code == HALO_STATUS_DEADLINE_EXCEEDED);
  // Bounded by the client's request timeout (1 s each).
  assert_true(halo_test_now_ns() - start < 3000 * MS);
  // Query reads shared memory: it still works (the mapping outlives the
  // daemon) or reports UNAVAILABLE; it must not crash.
  uint64_t value = 99;
  halo_status_free(halo_semaphore_query(semaphore, &value));
  halo_semaphore_release(semaphore);
  start = halo_test_now_ns();
  halo_client_close(fixture->client);
  fixture->client = NULL;
  assert_true(halo_test_now_ns() - start < 2000 * MS);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name)                                                  \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_sigkill_wakes_waiters_with_unavailable),
      T(test_calls_after_daemon_death_fail_quickly),
  };
#undef T
  return cmocka_run_group_tests_name("daemon_death", tests, NULL, NULL);
}
