// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A session of several devices whose submission ring a device worker
// drains (docs/architecture.md "Rings in the worker"): its ring is the
// worker's of the first device it ran an execution on; when the worker of
// another of its devices is lost, the session is lost while the ring's
// worker lives on. The records the ring's worker had not taken are refused
// with the loss (their signals fail), not dropped. halod asks the ring's
// worker where it stopped off its loop (a control call): while that worker
// is stopped, halod's loop serves on (its admin socket answers).
//
// Real halod, real worker processes, real client processes, on the fake
// CUDA driver with two devices (integration/fake_cuda_devices.c as
// libcuda.so.1: the local driver has one device; ctest sets
// HALO_TEST_DRIVER=cuda and LD_LIBRARY_PATH). With HALO_TEST_DRIVER=cuda
// alone it runs on a machine's GPUs, two or more; it exits 77 (skipped)
// on another driver.
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

#define DEADLINE_NS (10ll * 1000 * HALO_TEST_MS)

typedef struct fixture_t {
  halo_test_daemon_t daemon;
  // halod's log (its stderr), which the test reads while a worker is
  // stopped.
  char log_path[64];
  char command[160];
  pid_t stopped;  // a worker the test stopped (continued by the teardown)
} fixture_t;

// halod with a domain per process, its stderr to a file.
static int setup_process_domains(void **state) {
  fixture_t *fixture = calloc(1, sizeof(*fixture));
  snprintf(fixture->log_path, sizeof(fixture->log_path),
           "/tmp/halo-ring-devices-XXXXXX");
  int fd = mkstemp(fixture->log_path);
  assert_true(fd >= 0);
  close(fd);
  snprintf(fixture->command, sizeof(fixture->command),
           "exec \"$0\" \"$@\" 2>>'%s'", fixture->log_path);
  const char *wrapper[] = {"/bin/sh", "-c", fixture->command, NULL};
  const char *args[] = {"--trust-domain", "process", NULL};
  halo_test_daemon_start_wrapped(&fixture->daemon, wrapper, args);
  *state = fixture;
  return 0;
}

static int teardown(void **state) {
  fixture_t *fixture = *state;
  if (fixture->stopped > 0) kill(fixture->stopped, SIGCONT);
  halo_test_daemon_stop(&fixture->daemon, SIGTERM);
  halo_test_daemon_cleanup(&fixture->daemon);
  FILE *log = fopen(fixture->log_path, "r");
  if (log) {
    char line[1024];
    while (fgets(line, sizeof(line), log)) fputs(line, stderr);
    fclose(log);
  }
  unlink(fixture->log_path);
  free(fixture);
  return 0;
}

// Whether halod's log has a line containing |text|.
static bool log_has(const fixture_t *fixture, const char *text) {
  FILE *log = fopen(fixture->log_path, "r");
  if (!log) return false;
  char line[2048];
  bool found = false;
  while (!found && fgets(line, sizeof(line), log)) {
    found = strstr(line, text) != NULL;
  }
  fclose(log);
  return found;
}

// The pid of |domain|'s worker of |device| (0: none).
static pid_t worker_pid(const halo_test_daemon_t *daemon, const char *domain,
                        uint32_t device) {
  halo_wire_response_t *response = halo_test_admin_workers(daemon);
  pid_t pid = 0;
  for (size_t i = 0; i < response->admin_workers->n_workers && !pid; ++i) {
    const Halo__Wire__WorkerInfo *worker = response->admin_workers->workers[i];
    if (worker->device == device && strcmp(worker->domain, domain) == 0 &&
        worker->pid > 0) {
      pid = (pid_t)worker->pid;
    }
  }
  halo__wire__response__free_unpacked(response, NULL);
  return pid;
}

// A recording that fills binding slot 0 (16 bytes) with |pattern|.
static halo_command_buffer_t *fill_slot(halo_client_t *client,
                                        uint32_t pattern) {
  halo_command_buffer_t *cb;
  HALO_TEST_ASSERT_OK(halo_command_buffer_begin(
      client, 0, HALO_COMMAND_BUFFER_REUSABLE, 1, &cb));
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(cb, halo_binding_ref(0, 0, 16),
                                               &pattern, sizeof(pattern)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  return cb;
}

// The session uses devices 0 and 1; its ring is device 0's worker's. An
// asynchronous execute that signals another domain's semaphore is published
// while that worker is stopped (it takes nothing), then device 1's worker
// is killed: the domain's sessions are lost, the ring's worker lives. The
// record it never took is refused with the loss: the other domain's waiter
// wakes with DEVICE_LOST naming why, not at its timeout.
static void test_live_worker_leaves_records_to_the_loss(void **state) {
  fixture_t *fixture = *state;
  // Another domain creates the semaphore, a third waits for 1.
  halo_test_process_t creator = {0}, waiter = {0};
  const char *creator_args[] = {"create", "0", NULL};
  halo_test_spawn_peer(&creator, fixture->daemon.listen_address, creator_args);
  char line[128];
  halo_test_read_line(&creator, line, sizeof(line), 5000);
  assert_int_equal(strncmp(line, "token ", 6), 0);
  const char *hex = line + 6;
  const char *waiter_args[] = {"wait", hex, "1", "5000", NULL};
  halo_test_spawn_peer(&waiter, fixture->daemon.listen_address, waiter_args);
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_token_parse(hex, &token));
  char ready[128];
  halo_test_read_line(&waiter, ready, sizeof(ready), 5000);
  assert_string_equal(ready, "ready");

  setenv("HALO_RING_ASYNC", "1", 1);
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  unsetenv("HALO_RING_ASYNC");
  uint32_t devices = 0;
  HALO_TEST_ASSERT_OK(halo_client_device_count(client, &devices));
  if (devices < 2) {
    halo_client_close(client);
    halo_test_process_cleanup(&waiter);
    halo_test_process_cleanup(&creator);
    print_message("halod serves %u device(s): this needs two\n", devices);
    skip();
  }
  halo_semaphore_t *foreign;
  HALO_TEST_ASSERT_OK(halo_semaphore_import(client, &token, &foreign));
  // Device 0: the ring goes to its worker with the first execution.
  halo_buffer_t *buffer;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &buffer));
  halo_command_buffer_t *cb = fill_slot(client, 7);
  halo_semaphore_t *done;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  halo_binding_t binding = {buffer, 0, HALO_WHOLE_BUFFER};
  for (uint64_t step = 1; step <= 3; ++step) {
    halo_semaphore_value_t signal = {done, step};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, &signal, 1));
  }
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, 3, DEADLINE_NS));
  // Device 1: the domain gets its worker there too.
  halo_buffer_t *other;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 1, HALO_MEMORY_DEVICE, 64, 0, &other));
  char domain[32];
  snprintf(domain, sizeof(domain), "pid:%d", (int)getpid());
  pid_t ring_worker = worker_pid(&fixture->daemon, domain, 0);
  pid_t other_worker = worker_pid(&fixture->daemon, domain, 1);
  assert_true(ring_worker > 0);
  assert_true(other_worker > 0);
  assert_int_not_equal(ring_worker, other_worker);

  assert_int_equal(kill(ring_worker, SIGSTOP), 0);
  fixture->stopped = ring_worker;
  halo_semaphore_value_t signal = {foreign, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, &signal, 1));
  assert_int_equal(kill(other_worker, SIGKILL), 0);
  // halod loses the session while the ring's worker is stopped (and, to
  // learn where that worker stopped, waits for it).
  char lost[64];
  snprintf(lost, sizeof(lost), ": lost (pid %d)", (int)getpid());
  assert_true(HALO_TEST_POLL(log_has(fixture, lost), 10000));
  halo_test_sleep_ms(50);
  // The loop does not wait for that answer: it serves on meanwhile.
  int64_t asked = halo_test_now_ns();
  halo_wire_response_t *status = halo_test_admin_status(&fixture->daemon);
  halo__wire__response__free_unpacked(status, NULL);
  int64_t took_ms = (halo_test_now_ns() - asked) / HALO_TEST_MS;
  print_message(
      "halod's admin socket while the ring's worker is stopped: "
      "%lld ms\n",
      (long long)took_ms);
  assert_true(took_ms < 3000);
  assert_int_equal(kill(ring_worker, SIGCONT), 0);
  fixture->stopped = 0;
  int64_t start = halo_test_now_ns();
  int code = halo_test_process_wait(&waiter, 10000);
  print_message("the other domain's waiter: %s after %lld ms\n",
                halo_status_code_name((halo_status_code_t)code),
                (long long)((halo_test_now_ns() - start) / HALO_TEST_MS));
  assert_int_equal(code, HALO_STATUS_DEVICE_LOST);
  // The same failure, with why, to this process (its session is lost;
  // semaphore waits and queries are still answered).
  const char *const expected[] = {"queue_execute", "not taken", "trust domain",
                                  NULL};
  halo_test_expect_status_all(halo_semaphore_wait(foreign, 1, DEADLINE_NS),
                              HALO_STATUS_DEVICE_LOST, expected,
                              "the untaken record's signal");
  // The ring's worker was not touched: it still serves the domain.
  assert_int_equal(worker_pid(&fixture->daemon, domain, 0), ring_worker);
  halo_test_process_cleanup(&waiter);
  halo_test_process_cleanup(&creator);
  halo_client_close(client);
}

int main(void) {
  if (!halo_test_driver_is("cuda")) {
    fprintf(stderr,
            "ring_devices_test needs a halod of two devices: "
            "HALO_TEST_DRIVER=cuda and LD_LIBRARY_PATH=<build>/"
            "fake-cuda-devices (ctest sets both), or two GPUs\n");
    return HALO_TEST_EXIT_SKIPPED;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_live_worker_leaves_records_to_the_loss, setup_process_domains,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
