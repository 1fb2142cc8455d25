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
// domain starts a worker), with tests/support/worker_start_gate.c
// preloaded: while the gate file exists a worker's start waits, while it
// says "fail" the worker exits instead.
// - slow start: the fixture's client (this process: a domain whose worker
//   started) pings, allocates, writes and reads within BOUND_MS while a
//   client process (another domain) connects and its worker's start is
//   held for longer than hello-timeout-ms; its connect completes once the
//   gate opens (the wait is not taken for a silent connection), and it
//   allocates, writes and reads back.
// - failed start: the other domain's worker exits at its start; that
//   client's connect (or its first request) fails naming the worker's
//   start, this process is served meanwhile, and the next client process
//   (a new domain) starts a worker and is served.
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

// `worker_start_test --client ADDRESS`: connects ("connect CODE MESSAGE"),
// then writes a device buffer and reads it back ("buffer CODE MESSAGE").
static int client_main(const char *address) {
  halo_client_options_t options = {.address = address,
                                   .client_name = "worker-start-client",
                                   .request_timeout_ms = 60000};
  halo_client_t *client = NULL;
  halo_status_t status = halo_client_connect(&options, &client);
  printf("connect %d %s\n", (int)halo_status_code(status),
         status ? halo_status_message(status) : "");
  fflush(stdout);
  if (status) {
    halo_status_free(status);
    return 0;
  }
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

static int setup(void **state) {
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
  setenv("LD_PRELOAD", WORKER_START_GATE_LIBRARY, 1);
  setenv("HALO_TEST_WORKER_GATE", test->gate, 1);
  static const char *const args[] = {
      "--trust-domain", "process", "--worker-spares", "0", "--hello-timeout-ms",
      HELLO_MS,         NULL};
  int result =
      halo_test_fixture_setup_with((void **)&test->fixture, args, true);
  unsetenv("LD_PRELOAD");
  unsetenv("HALO_TEST_WORKER_GATE");
  *state = test;
  return result;
}

static int teardown(void **state) {
  state_t *test = *state;
  gate_open(test);  // a held worker would hold halod's stop
  rmdir(test->directory);
  void *fixture = test->fixture;
  free(test);
  return halo_test_fixture_teardown(&fixture);
}

// A client process of its own (a trust domain of its own).
static void client_spawn(state_t *test, halo_test_process_t *process) {
  static char self[512];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  assert_true(length > 0);
  self[length] = '\0';
  const char *argv[] = {self, "--client", test->fixture->daemon.listen_address,
                        NULL};
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
  client_spawn(test, other);
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

static void test_failed_start_fails_only_its_session(void **state) {
  state_t *test = *state;
  gate_set(test, "fail");
  halo_test_process_t *other = &test->fixture->peers[0];
  client_spawn(test, other);
  char message[512];
  int timeout_ms = (int)(10000 * time_scale());
  int code =
      client_result(other, "connect", message, sizeof(message), timeout_ms);
  if (code == HALO_STATUS_OK) {
    code = client_result(other, "buffer", message, sizeof(message), timeout_ms);
  }
  print_message("a client whose worker failed to start: %s: %s\n",
                halo_status_code_name(code), message);
  assert_int_not_equal(code, HALO_STATUS_OK);
  assert_non_null(strstr(message, "worker"));
  assert_int_equal(halo_test_process_wait(other, timeout_ms), 0);
  expect_served(test);
  // The next domain starts a worker of its own.
  gate_open(test);
  halo_test_process_t *next = &test->fixture->peers[1];
  client_spawn(test, next);
  assert_int_equal(
      client_result(next, "connect", message, sizeof(message), timeout_ms),
      HALO_STATUS_OK);
  assert_int_equal(
      client_result(next, "buffer", message, sizeof(message), timeout_ms),
      HALO_STATUS_OK);
  assert_int_equal(halo_test_process_wait(next, timeout_ms), 0);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--client") == 0) {
    return client_main(argv[2]);
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
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
