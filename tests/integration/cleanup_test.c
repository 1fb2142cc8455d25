// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of session clean-up: a client killed with SIGKILL while
// holding buffers (host-visible in arenas, an exportable one on its own
// memfd, device memory) and semaphores (one exportable, on its own page)
// leaves nothing behind: the admin API shows no session for it and the
// daemon holds no memfd of it (/proc/PID/fd).
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

// Starts `semaphore_peer hold` and returns its session id once it holds
// everything.
static uint64_t spawn_holder(halo_test_fixture_t *fixture,
                             halo_test_process_t *holder) {
  const char *args[] = {"hold", NULL};
  halo_test_spawn_peer(holder, fixture->daemon.listen_address, args);
  char line[64];
  halo_test_read_line(holder, line, sizeof(line), HALO_TEST_DEADLINE_MS);
  unsigned long long session_id = 0;
  assert_int_equal(sscanf(line, "ready %llu", &session_id), 1);
  return session_id;
}

static void expect_holder_session(halo_test_fixture_t *fixture, pid_t pid) {
  Halo__Wire__SessionInfo info;
  assert_true(halo_test_admin_find_session(&fixture->daemon, pid, &info));
  assert_int_equal(info.buffers, 4);
  assert_int_equal(info.semaphores, 4);
  assert_true(info.host_bytes >= 4096 + (1 << 20) + 65536);
  assert_true(info.device_bytes >= 1 << 20);
  assert_true(info.arenas >= 1);
}

static void test_sigkilled_client_leaves_nothing(void **state) {
  halo_test_fixture_t *fixture = *state;
  pid_t daemon_pid = fixture->daemon.pid;
  // At the end no more memfds than now (more: a leak). Fewer is no fault:
  // halod may close one it held for the fixture's own session meanwhile
  // (a ring's memfd is closed once a device worker takes the ring); a
  // clean clone's run ended at 1 against 2 here.
  int baseline_memfds = halo_test_count_memfds(daemon_pid);
  assert_true(baseline_memfds >= 0);
  uint32_t baseline_sessions = halo_test_admin_session_count(&fixture->daemon);

  halo_test_process_t *holder = &fixture->peers[0];
  spawn_holder(fixture, holder);
  expect_holder_session(fixture, holder->pid);
  // The check below can see the difference: the holder's memory is there.
  assert_true(halo_test_count_memfds(daemon_pid) >= baseline_memfds + 2);
  assert_int_equal(halo_test_admin_session_count(&fixture->daemon),
                   baseline_sessions + 1);

  pid_t holder_pid = holder->pid;
  assert_int_equal(kill(holder_pid, SIGKILL), 0);
  assert_true(HALO_TEST_POLL(halo_test_process_exited(holder), 2000));

  if (!HALO_TEST_POLL(
          !halo_test_admin_find_session(&fixture->daemon, holder_pid, NULL),
          HALO_TEST_DEADLINE_MS)) {
    print_error("halod still lists a session of killed pid %d\n", holder_pid);
    fail();
  }
  assert_int_equal(halo_test_admin_session_count(&fixture->daemon),
                   baseline_sessions);
  if (!HALO_TEST_POLL(halo_test_count_memfds(daemon_pid) <= baseline_memfds,
                      HALO_TEST_DEADLINE_MS)) {
    print_error("halod holds %d memfds, %d before the client came\n",
                halo_test_count_memfds(daemon_pid), baseline_memfds);
    fail();
  }
  // No semaphore of it is left either.
  halo_wire_response_t *response = halo_test_admin_semaphores(&fixture->daemon);
  assert_int_equal(response->admin_semaphores->n_semaphores, 0);
  halo__wire__response__free_unpacked(response, NULL);
  // And the daemon still serves.
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->client));
}

static void test_many_sigkilled_clients(void **state) {
  halo_test_fixture_t *fixture = *state;
  pid_t daemon_pid = fixture->daemon.pid;
  int baseline_memfds = halo_test_count_memfds(daemon_pid);
  enum { HOLDERS = 4 };
  for (int i = 0; i < HOLDERS; ++i) spawn_holder(fixture, &fixture->peers[i]);
  for (int i = 0; i < HOLDERS; ++i) {
    assert_int_equal(kill(fixture->peers[i].pid, SIGKILL), 0);
  }
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1,
                                                   HALO_TEST_DEADLINE_MS));
  assert_true(
      HALO_TEST_POLL(halo_test_count_memfds(daemon_pid) <= baseline_memfds,
                     HALO_TEST_DEADLINE_MS));
}

static void test_imported_semaphore_outlives_killed_creator(void **state) {
  // The creator dies while this client holds its exported semaphore: the
  // semaphore (and its page) stay until this client releases it too.
  halo_test_fixture_t *fixture = *state;
  pid_t daemon_pid = fixture->daemon.pid;
  int baseline_memfds = halo_test_count_memfds(daemon_pid);
  halo_test_process_t *creator = &fixture->peers[0];
  const char *args[] = {"create", "1", NULL};
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
  pid_t creator_pid = creator->pid;
  assert_int_equal(kill(creator_pid, SIGKILL), 0);
  assert_true(HALO_TEST_POLL(
      !halo_test_admin_find_session(&fixture->daemon, creator_pid, NULL),
      HALO_TEST_DEADLINE_MS));
  // Failed with ABORTED, still readable: value 1 was reached.
  HALO_TEST_ASSERT_CODE(halo_semaphore_wait(imported, 2, 1000 * HALO_TEST_MS),
                        HALO_STATUS_ABORTED);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(imported, 1, 0));
  halo_wire_response_t *response = halo_test_admin_semaphores(&fixture->daemon);
  assert_int_equal(response->admin_semaphores->n_semaphores, 1);
  assert_int_equal(response->admin_semaphores->semaphores[0]->failure_code,
                   HALO_STATUS_ABORTED);
  halo__wire__response__free_unpacked(response, NULL);
  // The last holder's release frees it and its page.
  halo_semaphore_release(imported);
  assert_true(
      HALO_TEST_POLL(halo_test_count_memfds(daemon_pid) <= baseline_memfds,
                     HALO_TEST_DEADLINE_MS));
  response = halo_test_admin_semaphores(&fixture->daemon);
  assert_int_equal(response->admin_semaphores->n_semaphores, 0);
  halo__wire__response__free_unpacked(response, NULL);
}

static void test_orderly_close_leaves_nothing(void **state) {
  halo_test_fixture_t *fixture = *state;
  pid_t daemon_pid = fixture->daemon.pid;
  int baseline_memfds = halo_test_count_memfds(daemon_pid);
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  for (int i = 0; i < 3; ++i) {
    halo_buffer_t *buffer = NULL;
    HALO_TEST_ASSERT_OK(halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE,
                                           4096, (uint32_t)(i & 1), &buffer));
    halo_semaphore_t *semaphore = NULL;
    HALO_TEST_ASSERT_OK(
        halo_semaphore_create(client, 0, (uint32_t)(i & 1), &semaphore));
  }
  assert_true(halo_test_count_memfds(daemon_pid) > baseline_memfds);
  halo_client_close(client);
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1,
                                                   HALO_TEST_DEADLINE_MS));
  assert_true(
      HALO_TEST_POLL(halo_test_count_memfds(daemon_pid) <= baseline_memfds,
                     HALO_TEST_DEADLINE_MS));
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name)                                                  \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_sigkilled_client_leaves_nothing),
      T(test_many_sigkilled_clients),
      T(test_imported_semaphore_outlives_killed_creator),
      T(test_orderly_close_leaves_nothing),
  };
#undef T
  return cmocka_run_group_tests_name("cleanup", tests, NULL, NULL);
}
