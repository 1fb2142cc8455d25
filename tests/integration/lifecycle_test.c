// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of halod's life cycle: start-up, the version handshake,
// sessions appearing and disappearing in the admin API, clean exit on
// SIGTERM and SIGINT (waking waiters with a status), and connecting when no
// daemon listens.
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

static void test_handshake_and_status(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  assert_int_not_equal(halo_client_session_id(client), 0);
  // The daemon's pid comes from the fd channel's peer credentials.
  assert_int_equal(halo_client_daemon_pid(client), fixture->daemon.pid);
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  assert_int_equal(halo_abi_version(), HALO_ABI_VERSION);
  assert_string_equal(halo_version_string(), HALO_VERSION_STRING);

  halo_wire_response_t *response = halo_test_admin_status(&fixture->daemon);
  Halo__Wire__AdminStatusReply *status = response->admin_status;
  assert_int_equal(status->pid, fixture->daemon.pid);
  assert_int_equal(status->protocol_version, HALO_PROTOCOL_VERSION);
  assert_string_equal(status->daemon_version, HALO_VERSION_STRING);
  assert_int_equal(status->sessions, 1);
  assert_string_equal(status->listen_address, fixture->daemon.listen_address);
  assert_true(status->uptime_seconds >= 0.0);
  assert_true(status->n_devices >= 1);
  assert_string_equal(status->devices[0]->driver, halo_test_driver());
  bool driver_available = false;
  for (size_t i = 0; i < status->n_drivers; ++i) {
    if (strcmp(status->drivers[i]->name, halo_test_driver()) == 0) {
      driver_available = status->drivers[i]->available;
    }
  }
  assert_true(driver_available);
  assert_true(status->trust_domains >= 1);
  halo__wire__response__free_unpacked(response, NULL);
}

static void test_devices(void **state) {
  halo_test_fixture_t *fixture = *state;
  uint32_t count = 0;
  HALO_TEST_ASSERT_OK(halo_client_device_count(fixture->client, &count));
  assert_true(count >= 1);
  halo_device_info_t info;
  HALO_TEST_ASSERT_OK(halo_client_device_info(fixture->client, 0, &info));
  assert_int_equal(info.ordinal, 0);
  assert_string_equal(info.driver, halo_test_driver());
  assert_true(info.name[0] != '\0');
  assert_true(info.memory_bytes > 0);
  if (halo_test_driver_is("local")) {
    assert_int_equal(info.compute_major, 0);
  } else {
    assert_true(info.compute_major >= 1);
    assert_true(info.multiprocessor_count >= 1);
  }
  HALO_TEST_ASSERT_CODE(halo_client_device_info(fixture->client, count, &info),
                        HALO_STATUS_OUT_OF_RANGE);
}

static void test_sessions_come_and_go(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *clients[4];
  for (int i = 0; i < 4; ++i) {
    clients[i] = halo_test_connect(&fixture->daemon, 0);
    assert_int_not_equal(halo_client_session_id(clients[i]),
                         halo_client_session_id(fixture->client));
  }
  assert_int_equal(halo_test_admin_session_count(&fixture->daemon), 5);
  // Every session is ours: uid and pid from the socket's credentials.
  halo_wire_response_t *response = halo_test_admin_sessions(&fixture->daemon);
  assert_int_equal(response->admin_sessions->n_sessions, 5);
  for (size_t i = 0; i < 5; ++i) {
    Halo__Wire__SessionInfo *info = response->admin_sessions->sessions[i];
    assert_int_equal(info->pid, getpid());
    assert_int_equal(info->uid, getuid());
    assert_non_null(info->client_name);
    assert_string_equal(info->client_name, "halo-test");
    assert_non_null(info->trust_domain);
    assert_true(info->trust_domain[0] != '\0');
  }
  halo__wire__response__free_unpacked(response, NULL);
  for (int i = 0; i < 4; ++i) halo_client_close(clients[i]);
  // The daemon notices each pipe going away.
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1,
                                                   HALO_TEST_DEADLINE_MS));
}

static void test_connect_close_cycles_leave_nothing(void **state) {
  halo_test_fixture_t *fixture = *state;
  int baseline = halo_test_count_memfds(fixture->daemon.pid);
  assert_true(baseline >= 0);
  for (int i = 0; i < 20; ++i) {
    halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
    halo_semaphore_t *semaphore = NULL;
    HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
    halo_buffer_t *buffer = NULL;
    HALO_TEST_ASSERT_OK(halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE,
                                           4096, 0, &buffer));
    halo_client_close(client);  // releases both
  }
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1,
                                                   HALO_TEST_DEADLINE_MS));
  assert_true(
      HALO_TEST_POLL(halo_test_count_memfds(fixture->daemon.pid) == baseline,
                     HALO_TEST_DEADLINE_MS));
}

// Prints what |pid|'s descriptors point to, one line, after |label|.
static void print_fds(const char *label, pid_t pid) {
  char path[64], target[256], line[8192];
  size_t used = 0;
  line[0] = '\0';
  snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
  DIR *dir = opendir(path);
  if (!dir) return;
  struct dirent *entry;
  while ((entry = readdir(dir)) && used + 300 < sizeof(line)) {
    if (entry->d_name[0] == '.') continue;
    char fd_path[320];
    snprintf(fd_path, sizeof(fd_path), "%s/%s", path, entry->d_name);
    ssize_t n = readlink(fd_path, target, sizeof(target) - 1);
    target[n > 0 ? n : 0] = '\0';
    used += (size_t)snprintf(line + used, sizeof(line) - used, " %s=%s",
                             entry->d_name, target);
  }
  closedir(dir);
  print_error("%s:%s\n", label, line);
}

static void test_clients_vanishing_at_once_leave_no_session(void **state) {
  // Connections that close right after the handshake race the daemon's
  // pipe events (a pipe may be gone before its "added" event is handled):
  // none may leave a session or a descriptor behind. Not tested here, as
  // nng 1.5.2 itself leaks then (tests/NOTES-for-daemon.md): connections
  // closing before the greeting, and ones closing with a request in flight.
  halo_test_fixture_t *fixture = *state;
  // The baseline once the spare that replaces the fixture's worker is up
  // (while it starts, halod holds its start-up descriptors) and the count
  // held still for 150 ms (halod's end of an admin connection the test
  // closed goes a little later).
  assert_true(halo_test_admin_wait_spare(&fixture->daemon, 60000));
  int baseline_fds = halo_test_count_fds(fixture->daemon.pid);
  for (int still = 0, i = 0; still < 3 && i < 100; ++i) {
    halo_test_sleep_ms(50);
    int count = halo_test_count_fds(fixture->daemon.pid);
    still = count == baseline_fds ? still + 1 : 0;
    baseline_fds = count;
  }
  assert_true(baseline_fds > 0);
  for (int i = 0; i < 400; ++i) {
    close(halo_test_ipc_connect(fixture->daemon.socket_path));
  }
  // The daemon let go of every connection (sockets and all)...
  if (!HALO_TEST_POLL(halo_test_count_fds(fixture->daemon.pid) == baseline_fds,
                      HALO_TEST_DEADLINE_MS)) {
    print_error("halod holds %d descriptors, %d before the burst\n",
                halo_test_count_fds(fixture->daemon.pid), baseline_fds);
    print_fds("halod's descriptors", fixture->daemon.pid);
    fail();
  }
  // ...and has no session for any of them.
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1,
                                                   HALO_TEST_DEADLINE_MS));
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->client));
}

static void test_sigint_exits_cleanly(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_close(fixture->client);
  fixture->client = NULL;
  halo_test_daemon_stop(&fixture->daemon, SIGINT);
}

// A thread blocked in halo_semaphore_wait.
typedef struct blocked_wait_t {
  halo_semaphore_t *semaphore;
  uint64_t value;
  _Atomic pid_t tid;
  halo_status_code_t code;
  int64_t finished_ns;
  _Atomic bool done;
} blocked_wait_t;

static void *blocked_wait_main(void *arg) {
  blocked_wait_t *wait = arg;
  atomic_store(&wait->tid, (pid_t)syscall(SYS_gettid));
  wait->code = halo_status_consume_code(
      halo_semaphore_wait(wait->semaphore, wait->value, HALO_TIMEOUT_INFINITE));
  wait->finished_ns = halo_test_now_ns();
  atomic_store(&wait->done, true);
  return NULL;
}

static void test_sigterm_wakes_waiters(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(
      fixture->client, 0, HALO_OBJECT_FLAG_EXPORTABLE, &semaphore));
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_semaphore_export(semaphore, &token));
  char text[33];
  halo_token_format(&token, text);
  // One waiter in this process, one in another.
  blocked_wait_t wait = {.semaphore = semaphore, .value = 1};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, blocked_wait_main, &wait), 0);
  const char *args[] = {"wait", text, "1", "-1", NULL};
  halo_test_process_t *peer = &fixture->peers[0];
  halo_test_spawn_peer(peer, fixture->daemon.listen_address, args);
  char line[64];
  halo_test_read_line(peer, line, sizeof(line), HALO_TEST_DEADLINE_MS);
  assert_string_equal(line, "ready");
  while (atomic_load(&wait.tid) == 0) halo_test_sleep_ms(1);
  assert_true(halo_test_wait_until_sleeping(getpid(), atomic_load(&wait.tid),
                                            HALO_TEST_DEADLINE_MS));
  assert_true(halo_test_wait_until_sleeping(peer->pid, peer->pid,
                                            HALO_TEST_DEADLINE_MS));

  int64_t stopped = halo_test_now_ns();
  halo_test_daemon_stop(&fixture->daemon, SIGTERM);  // asserts exit 0
  if (!HALO_TEST_POLL(atomic_load(&wait.done), 2000)) {
    print_error(
        "the waiter in this process still sleeps 2 s after halod "
        "stopped\n");
    fail();  // the process exit ends the thread
  }
  assert_int_equal(pthread_join(thread, NULL), 0);
  // Woken with a status (not left asleep, not "success").
  assert_int_equal(wait.code, HALO_STATUS_UNAVAILABLE);
  assert_true(wait.finished_ns - stopped < 1000 * HALO_TEST_MS);
  halo_test_read_line(peer, line, sizeof(line), 1000);
  char expected[32];
  snprintf(expected, sizeof(expected), "done %d", HALO_STATUS_UNAVAILABLE);
  assert_string_equal(line, expected);
  assert_int_equal(halo_test_process_wait(peer, HALO_TEST_DEADLINE_MS),
                   HALO_STATUS_UNAVAILABLE);
  // Requests to the stopped daemon fail; closing does not hang.
  halo_client_t *client = fixture->client;
  fixture->client = NULL;
  halo_status_t status = halo_client_ping(client);
  assert_int_not_equal(halo_status_code(status), HALO_STATUS_OK);
  halo_status_free(status);
  halo_semaphore_release(semaphore);
  int64_t before_close = halo_test_now_ns();
  halo_client_close(client);
  assert_true(halo_test_now_ns() - before_close < 2000 * HALO_TEST_MS);
}

static void test_connect_without_daemon_is_unavailable(void **state) {
  (void)state;
  char dir[] = "/tmp/halo-test-empty-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char address[128];
  snprintf(address, sizeof(address), "ipc://%s/halo.sock", dir);
  halo_client_options_t options = {.address = address,
                                   .request_timeout_ms = 1000};
  halo_client_t *client = (halo_client_t *)&options;  // must be cleared
  int64_t start = halo_test_now_ns();
  HALO_TEST_ASSERT_CODE(halo_client_connect(&options, &client),
                        HALO_STATUS_UNAVAILABLE);
  assert_null(client);
  assert_true(halo_test_now_ns() - start < 5000 * HALO_TEST_MS);
  rmdir(dir);
}

// Whether |pid| has a mapping whose path contains |name|.
static bool maps_contain(pid_t pid, const char *name) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
  FILE *maps = fopen(path, "r");
  assert_non_null(maps);
  char line[512];
  bool found = false;
  while (!found && fgets(line, sizeof(line), maps)) {
    found = strstr(line, name) != NULL;
  }
  fclose(maps);
  return found;
}

// halod and its device workers (the same binary) run on jemalloc where the
// build links it (HALO_JEMALLOC; never under a sanitizer), and on the C
// library's malloc otherwise. halod is not dumpable: reading its maps takes
// root or CAP_SYS_PTRACE, as the descriptor counts of this file's other
// tests do.
static void test_allocator(void **state) {
  halo_test_fixture_t *fixture = *state;
  bool linked = HALO_TEST_JEMALLOC;
  assert_int_equal(maps_contain(fixture->daemon.pid, "libjemalloc"), linked);
  assert_true(halo_test_admin_wait_spare(&fixture->daemon, 30000));
  halo_wire_response_t *response = halo_test_admin_workers(&fixture->daemon);
  size_t count = response->admin_workers->n_workers, checked = 0;
  for (size_t i = 0; i < count; ++i) {
    const Halo__Wire__WorkerInfo *worker = response->admin_workers->workers[i];
    // A worker still starting may not have mapped its libraries yet.
    bool up = strcmp(worker->state, "spare") == 0 ||
              strcmp(worker->state, "serving") == 0;
    if (worker->pid <= 0 || !up) continue;
    assert_int_equal(maps_contain((pid_t)worker->pid, "libjemalloc"), linked);
    ++checked;
  }
  halo__wire__response__free_unpacked(response, NULL);
  print_message("halod and %zu of %zu workers %s jemalloc\n", checked, count,
                linked ? "run on" : "do not run on");
  // Workers are processes unless the daemon runs them inline (none listed).
  assert_true(count == 0 || checked > 0);
}

static void test_connect_rejects_non_ipc_address(void **state) {
  (void)state;
  halo_client_options_t options = {.address = "tcp://127.0.0.1:1"};
  halo_client_t *client = NULL;
  halo_status_t status = halo_client_connect(&options, &client);
  // Only ipc:// is supported: the client shares memory with the daemon.
  assert_int_not_equal(halo_status_code(status), HALO_STATUS_OK);
  assert_null(client);
  halo_status_free(status);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name)                                                  \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_handshake_and_status),
      T(test_devices),
      T(test_sessions_come_and_go),
      T(test_connect_close_cycles_leave_nothing),
      T(test_clients_vanishing_at_once_leave_no_session),
      T(test_sigint_exits_cleanly),
      T(test_sigterm_wakes_waiters),
      T(test_allocator),
      cmocka_unit_test(test_connect_without_daemon_is_unavailable),
      cmocka_unit_test(test_connect_rejects_non_ipc_address),
  };
#undef T
  return cmocka_run_group_tests_name("lifecycle", tests, NULL, NULL);
}
