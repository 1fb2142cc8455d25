// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A device worker's start holds only the session that needs it: halod
// waits for a new trust domain's worker (a CUDA context's creation: tens of
// milliseconds; a wedged driver or MPS server: until the start's timeout)
// off its loop, and the session's requests, its Hello first, wait behind
// that wait. halod used to wait on its loop: every other domain, haloctl
// and /metrics waited with it.
//
// halod runs with --trust-domain process and --worker-spares 0 (each new
// domain starts a worker), with tests/support/worker_gates.c
// preloaded: while the gate file exists a worker's start waits, while it
// says "fail" the worker exits instead.
// - slow start: the fixture's client (this process: a domain whose worker
//   started) pings, allocates, writes and reads within BOUND_MS while a
//   client process (another domain) connects and its worker's start is
//   held for longer than hello-timeout-ms; its connect completes once the
//   gate opens (the wait is not taken for a silent connection), and it
//   allocates, writes and reads back.
// - failed start: the other domain's worker exits at its start, and so
//   does the worker halod starts in its place; that client's connect fails
//   naming the worker's start and no fault is charged; this process is
//   served; the same client process (the same domain) connects again once
//   workers start, and is served.
// - a start that fails once: the worker that replaces it starts, and the
//   client connects as if nothing had happened.
// - many domains starting at once (calls 6 below their 8 connections):
//   their Hellos wait on places of their own (or are refused for now and
//   sent again by libhalo), so this process's writes (control calls) are
//   still served at once; every one of them connects once the gate opens.
//   Before, the starting domains' Hellos took every place of calls.
// Local driver (cheap workers).
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

#define MS HALO_TEST_MS
// How long one of this process's requests may take while another domain's
// worker starts (times HALO_TEST_TIME_SCALE).
#define BOUND_MS 1000
// How long a start is held: past halod's hello-timeout-ms (HELLO_MS).
#define HOLD_MS 2500
#define HELLO_MS "1000"

static int64_t time_scale(void) {
  const char *scale = getenv("HALO_TEST_TIME_SCALE");
  int64_t value = scale ? strtoll(scale, NULL, 10) : 1;
  return value > 0 ? value : 1;
}

// `worker_start_test --client ADDRESS [again]`: connects ("connect CODE
// MESSAGE"; with "again", once more after a failure, 500 ms later), then
// writes a device buffer and reads it back ("buffer CODE MESSAGE").
static int client_main(const char *address, bool again) {
  halo_client_options_t options = {.address = address,
                                   .client_name = "worker-start-client",
                                   .request_timeout_ms = 60000};
  halo_client_t *client = NULL;
  halo_status_t status = NULL;
  for (int attempt = 0; attempt < (again ? 2 : 1); ++attempt) {
    if (attempt > 0) usleep(500 * 1000);
    status = halo_client_connect(&options, &client);
    printf("connect %d %s\n", (int)halo_status_code(status),
           status ? halo_status_message(status) : "");
    fflush(stdout);
    if (!status) break;
    halo_status_free(status);
  }
  if (!client) return 0;
  halo_buffer_t *buffer = NULL;
  status = halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 4096, 0, &buffer);
  static uint8_t data[4096], back[4096];
  memset(data, 0x42, sizeof(data));
  if (!status) status = halo_buffer_write(buffer, 0, data, sizeof(data));
  if (!status) status = halo_buffer_read(buffer, 0, back, sizeof(back));
  if (!status && memcmp(data, back, sizeof(data)) != 0) {
    status = halo_status_make(HALO_STATUS_DATA_LOSS, "read back other bytes");
  }
  printf("buffer %d %s\n", (int)halo_status_code(status),
         status ? halo_status_message(status) : "");
  fflush(stdout);
  halo_status_free(status);
  halo_buffer_release(buffer);
  halo_client_close(client);
  return 0;
}

typedef struct state_t {
  halo_test_fixture_t *fixture;
  char directory[64];
  char gate[96];
} state_t;

static void gate_set(state_t *test, const char *word) {
  FILE *file = fopen(test->gate, "w");
  assert_non_null(file);
  assert_true(fputs(word, file) >= 0);
  assert_int_equal(fclose(file), 0);
}

static void gate_open(state_t *test) {
  assert_true(unlink(test->gate) == 0 || errno == ENOENT);
}

static int setup_with(void **state, const char *calls) {
  state_t *test = calloc(1, sizeof(*test));
  assert_non_null(test);
  snprintf(test->directory, sizeof(test->directory),
           "/tmp/halo-worker-start-XXXXXX");
  assert_non_null(mkdtemp(test->directory));
  snprintf(test->gate, sizeof(test->gate), "%s/gate", test->directory);
  // halod and its workers inherit these; the gate acts in workers only.
  // ASan wants its runtime first among the loaded libraries; the gate
  // library, preloaded, comes before it.
  const char *asan = getenv("ASAN_OPTIONS");
  char asan_options[512];
  snprintf(asan_options, sizeof(asan_options), "%s%sverify_asan_link_order=0",
           asan ? asan : "", asan && *asan ? ":" : "");
  setenv("ASAN_OPTIONS", asan_options, 1);
  setenv("LD_PRELOAD", WORKER_GATES_LIBRARY, 1);
  setenv("HALO_TEST_WORKER_GATE", test->gate, 1);
  const char *const args[] = {"--trust-domain",
                              "process",
                              "--worker-spares",
                              "0",
                              "--hello-timeout-ms",
                              HELLO_MS,
                              "--calls",
                              calls,
                              "--domain-calls",
                              "8",
                              NULL};
  int result =
      halo_test_fixture_setup_with((void **)&test->fixture, args, true);
  unsetenv("LD_PRELOAD");
  unsetenv("HALO_TEST_WORKER_GATE");
  *state = test;
  return result;
}

static int setup(void **state) {
  return setup_with(state, "64");
}

// calls 6: fewer places than the domains test_many_domains_start starts.
static int setup_few_places(void **state) {
  return setup_with(state, "6");
}

static int teardown(void **state) {
  state_t *test = *state;
  gate_open(test);  // a held worker would hold halod's stop
  rmdir(test->directory);
  void *fixture = test->fixture;
  free(test);
  return halo_test_fixture_teardown(&fixture);
}

// A client process of its own (a trust domain of its own); |again|: it
// connects once more after a failure.
static void client_spawn(state_t *test, halo_test_process_t *process,
                         bool again) {
  static char self[512];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  assert_true(length > 0);
  self[length] = '\0';
  const char *argv[] = {self, "--client", test->fixture->daemon.listen_address,
                        again ? "again" : NULL, NULL};
  halo_test_spawn(process, argv);
}

// Whether |process| printed anything yet.
static bool client_said_anything(const halo_test_process_t *process) {
  struct pollfd pfd = {.fd = process->stdout_fd, .events = POLLIN};
  return process->length > 0 || poll(&pfd, 1, 0) == 1;
}

// Reads "LABEL CODE MESSAGE" within |timeout_ms|; returns CODE, the
// message in |out_message|.
static int client_result(halo_test_process_t *process, const char *label,
                         char *out_message, size_t capacity, int timeout_ms) {
  char line[512];
  halo_test_read_line(process, line, sizeof(line), timeout_ms);
  size_t label_length = strlen(label);
  int code = -1, consumed = 0;
  if (strncmp(line, label, label_length) != 0 ||
      sscanf(line + label_length, " %d %n", &code, &consumed) < 1) {
    print_error("expected \"%s CODE MESSAGE\", got: %s\n", label, line);
    fail();
  }
  snprintf(out_message, capacity, "%s", line + label_length + consumed);
  return code;
}

// This process's domain is served within the bound: a ping, a device
// buffer's creation, write and read-back, and halod's admin socket.
static void expect_served(state_t *test) {
  halo_client_t *client = test->fixture->client;
  int64_t bound_ns = BOUND_MS * MS * time_scale();
  static uint8_t data[4096], back[4096];
  memset(data, 0x17, sizeof(data));
  int64_t start = halo_test_now_ns();
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 4096, 0, &buffer));
  HALO_TEST_ASSERT_OK(halo_buffer_write(buffer, 0, data, sizeof(data)));
  HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, 0, back, sizeof(back)));
  assert_memory_equal(data, back, sizeof(data));
  halo_buffer_release(buffer);
  (void)halo_test_admin_metric(&test->fixture->daemon,
                               "halo_worker_control_calls_waiting");
  int64_t took_ns = halo_test_now_ns() - start;
  if (took_ns > bound_ns) {
    print_error(
        "this domain's requests took %lld ms while another domain's "
        "worker starts (bound %lld ms)\n",
        (long long)(took_ns / MS), (long long)(bound_ns / MS));
    fail();
  }
}

static void test_slow_start_holds_only_its_session(void **state) {
  state_t *test = *state;
  expect_served(test);  // this domain's worker started before the gate
  gate_set(test, "hold");
  halo_test_process_t *other = &test->fixture->peers[0];
  int64_t spawned = halo_test_now_ns();
  client_spawn(test, other, false);
  // Served throughout, for longer than hello-timeout-ms, while the other
  // domain's worker is held at its start and that client waits.
  int rounds = 0;
  while (halo_test_now_ns() - spawned < HOLD_MS * MS) {
    expect_served(test);
    ++rounds;
    halo_test_sleep_ms(100);
  }
  if (client_said_anything(other)) {
    char line[512];
    halo_test_read_line(other, line, sizeof(line), 1000);
    print_error("the other domain connected while its worker was held: %s\n",
                line);
    fail();
  }
  assert_true(halo_test_admin_metric(&test->fixture->daemon,
                                     "halo_worker_control_calls_waiting") >= 1);
  print_message(
      "%d rounds of this domain's requests served while another "
      "domain's worker start was held %d ms\n",
      rounds, HOLD_MS);
  gate_open(test);
  char message[512];
  int timeout_ms = (int)(10000 * time_scale());
  assert_int_equal(
      client_result(other, "connect", message, sizeof(message), timeout_ms),
      HALO_STATUS_OK);
  int code =
      client_result(other, "buffer", message, sizeof(message), timeout_ms);
  if (code != HALO_STATUS_OK) {
    print_error("the other domain's buffer: %d %s\n", code, message);
    fail();
  }
  assert_int_equal(halo_test_process_wait(other, timeout_ms), 0);
}

// Reads a client's "connect" and "buffer" lines: both OK.
static void expect_client_served(halo_test_process_t *process) {
  char message[512];
  int timeout_ms = (int)(10000 * time_scale());
  int code =
      client_result(process, "connect", message, sizeof(message), timeout_ms);
  if (code == HALO_STATUS_OK) {
    code =
        client_result(process, "buffer", message, sizeof(message), timeout_ms);
  }
  if (code != HALO_STATUS_OK) {
    print_error("a client: %s: %s\n", halo_status_code_name(code), message);
    fail();
  }
  assert_int_equal(halo_test_process_wait(process, timeout_ms), 0);
}

static void test_failed_start_fails_only_its_session(void **state) {
  state_t *test = *state;
  const char *domains = "halo_trust_domains ";
  uint64_t domains_before =
      halo_test_admin_metric(&test->fixture->daemon, domains);
  gate_set(test, "fail");
  halo_test_process_t *other = &test->fixture->peers[0];
  client_spawn(test, other, true);
  char message[512];
  int timeout_ms = (int)(10000 * time_scale());
  int code =
      client_result(other, "connect", message, sizeof(message), timeout_ms);
  print_message("a client whose workers failed to start: %s: %s\n",
                halo_status_code_name(code), message);
  assert_int_not_equal(code, HALO_STATUS_OK);
  assert_non_null(strstr(message, "starting the worker of device 0"));
  expect_served(test);
  // The refused session's domain (it has no session and nothing cached)
  // ended with the refusal; it did not stay.
  assert_true(HALO_TEST_POLL(
      halo_test_admin_metric(&test->fixture->daemon, domains) == domains_before,
      HALO_TEST_DEADLINE_MS));
  // The same process (its domain) connects again once workers start; a
  // start that failed was no fault of the client's.
  gate_open(test);
  expect_client_served(other);
  expect_served(test);
  assert_int_equal(halo_test_admin_metric(&test->fixture->daemon,
                                          "halo_client_faults_total"),
                   0);
}

static void test_start_failing_once_is_replaced(void **state) {
  state_t *test = *state;
  gate_set(test, "once");
  halo_test_process_t *other = &test->fixture->peers[0];
  client_spawn(test, other, false);
  expect_client_served(other);
  assert_int_equal(access(test->gate, F_OK), -1);  // the first worker read it
}

static void test_many_domains_start(void **state) {
  state_t *test = *state;
  enum { DOMAINS = 8 };
  gate_set(test, "hold");
  for (int i = 0; i < DOMAINS; ++i) {
    client_spawn(test, &test->fixture->peers[i], false);
  }
  // Every one of calls (6) holds a starting domain's Hello after a while.
  assert_true(HALO_TEST_POLL(
      halo_test_admin_metric(&test->fixture->daemon,
                             "halo_worker_requests_waiting") == 6,
      (int)(5000 * time_scale())));
  for (int round = 0; round < 5; ++round) {
    expect_served(test);
    halo_test_sleep_ms(100);
  }
  gate_open(test);
  for (int i = 0; i < DOMAINS; ++i) {
    expect_client_served(&test->fixture->peers[i]);
  }
}

int main(int argc, char **argv) {
  if ((argc == 3 || argc == 4) && strcmp(argv[1], "--client") == 0) {
    return client_main(argv[2], argc == 4 && strcmp(argv[3], "again") == 0);
  }
  if (!halo_test_driver_is("local")) {
    fprintf(stderr, "worker_start_test runs on the local driver\n");
    return HALO_TEST_EXIT_SKIPPED;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_slow_start_holds_only_its_session,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_failed_start_fails_only_its_session,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_start_failing_once_is_replaced,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_many_domains_start, setup_few_places,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
