// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo's contract with a program that embeds it (an inference server:
// many threads, a long-lived process), as include/halo/halo.h states it:
// - request timeout: every call that asks halod (over the socket, over the
//   submission ring, or waiting for either behind other threads) returns
//   DEADLINE_EXCEEDED within the client's request timeout when halod does
//   not answer (here: halod stopped with SIGSTOP), and the client works
//   again once halod does;
// - options: a request timeout out of range is INVALID_ARGUMENT naming it.
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/halo_test.h"

#define MS HALO_TEST_MS
// The request timeout of the clients below, and how much later than it a
// call may return (scheduling, ASan).
#define REQUEST_TIMEOUT_MS 500
#define SLACK_MS 700
// How long a call may take before the test gives up on it (continues halod
// so that the call can end, and fails).
#define GIVE_UP_MS 6000

enum { THREADS = 4 };

typedef enum call_kind_e {
  CALL_PING = 0,    // over the socket
  CALL_SIGNAL = 1,  // over the submission ring (a synchronous record)
} call_kind_t;

typedef struct call_t {
  halo_client_t *client;
  halo_semaphore_t *semaphore;
  call_kind_t kind;
  uint64_t value;
  halo_status_code_t code;
  char message[256];
  int64_t took_ns;
  _Atomic bool done;
} call_t;

static void *call_main(void *arg) {
  call_t *call = arg;
  int64_t start = halo_test_now_ns();
  halo_status_t status =
      call->kind == CALL_PING
          ? halo_client_ping(call->client)
          : halo_semaphore_signal(call->semaphore, call->value);
  call->took_ns = halo_test_now_ns() - start;
  call->code = halo_status_code(status);
  snprintf(call->message, sizeof(call->message), "%s",
           halo_status_message(status));
  halo_status_free(status);
  atomic_store(&call->done, true);
  return NULL;
}

// Runs |count| calls at once on threads of their own while halod is
// stopped (SIGSTOP before the first, if not stopped yet). Each must end with
// DEADLINE_EXCEEDED within the request timeout (plus slack); a call still
// running after GIVE_UP_MS is let go by continuing halod, and fails the
// test. halod stays stopped otherwise (resume_daemon).
static void calls_while_stopped(halo_test_daemon_t *daemon, call_t *calls,
                                int count) {
  assert_int_equal(kill(daemon->pid, SIGSTOP), 0);
  pthread_t threads[THREADS];
  for (int i = 0; i < count; ++i) {
    assert_int_equal(pthread_create(&threads[i], NULL, call_main, &calls[i]),
                     0);
  }
  int64_t start = halo_test_now_ns();
  bool hung = false;
  for (int i = 0; i < count; ++i) {
    while (!atomic_load(&calls[i].done) &&
           halo_test_now_ns() - start < GIVE_UP_MS * MS) {
      halo_test_sleep_ms(5);
    }
    hung = hung || !atomic_load(&calls[i].done);
  }
  if (hung) assert_int_equal(kill(daemon->pid, SIGCONT), 0);
  for (int i = 0; i < count; ++i) pthread_join(threads[i], NULL);
  bool ok = true;
  for (int i = 0; i < count; ++i) {
    print_message("call %d (%s): %s after %lld ms: %s\n", i,
                  calls[i].kind == CALL_PING ? "ping" : "signal",
                  halo_status_code_name(calls[i].code),
                  (long long)(calls[i].took_ns / MS), calls[i].message);
    if (calls[i].code != HALO_STATUS_DEADLINE_EXCEEDED ||
        calls[i].took_ns > (REQUEST_TIMEOUT_MS + SLACK_MS) * MS) {
      ok = false;
    }
  }
  if (!ok) kill(daemon->pid, SIGCONT);
  assert_true(ok);
}

static void resume_daemon(halo_test_daemon_t *daemon) {
  assert_int_equal(kill(daemon->pid, SIGCONT), 0);
}

// Calls over the socket from several threads: each waits for the call
// before it, but none longer than its own request timeout.
static void test_queued_socket_calls_honour_the_request_timeout(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client =
      halo_test_connect(&fixture->daemon, REQUEST_TIMEOUT_MS);
  call_t calls[THREADS];
  memset(calls, 0, sizeof(calls));
  for (int i = 0; i < THREADS; ++i) {
    calls[i].client = client;
    calls[i].kind = CALL_PING;
  }
  calls_while_stopped(&fixture->daemon, calls, THREADS);
  resume_daemon(&fixture->daemon);
  // halod answers again: so does the client.
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_client_close(client);
}

// Semaphore signals go through the submission ring and wait for halod's
// verdict on their records: that wait is bounded by the request timeout as
// a socket call's is, for the first signal and for those queued behind it.
static void test_ring_calls_honour_the_request_timeout(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client =
      halo_test_connect(&fixture->daemon, REQUEST_TIMEOUT_MS);
  halo_semaphore_t *semaphores[THREADS];
  call_t calls[THREADS];
  memset(calls, 0, sizeof(calls));
  for (int i = 0; i < THREADS; ++i) {
    HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphores[i]));
    calls[i].semaphore = semaphores[i];
    calls[i].kind = CALL_SIGNAL;
    calls[i].value = 1;
  }
  calls_while_stopped(&fixture->daemon, calls, THREADS);
  // The records are still in the ring: a call on the socket, which must
  // not overtake them, waits for them no longer than its request timeout.
  call_t ping = {.client = client, .kind = CALL_PING};
  calls_while_stopped(&fixture->daemon, &ping, 1);
  resume_daemon(&fixture->daemon);
  // halod takes the records it missed (a timed-out call may still have
  // happened, as over the socket) and answers again.
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  for (int i = 0; i < THREADS; ++i) {
    HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphores[i], 2));
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(semaphores[i], 2, 0));
    halo_semaphore_release(semaphores[i]);
  }
  halo_client_close(client);
}

// A negative request timeout is not a timeout: it is refused, not replaced
// by the default in silence.
static void test_negative_request_timeout_is_invalid(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_options_t options = {.address = fixture->daemon.listen_address,
                                   .request_timeout_ms = -1};
  halo_client_t *client = (halo_client_t *)1;
  HALO_TEST_EXPECT_STATUS(halo_client_connect(&options, &client),
                          HALO_STATUS_INVALID_ARGUMENT, "request_timeout_ms");
  assert_null(client);
}

// A daemon without a client of the fixture's: each test connects its own.
static int setup(void **state) {
  return halo_test_fixture_setup_with(state, NULL, false);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name) \
  cmocka_unit_test_setup_teardown(name, setup, halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_queued_socket_calls_honour_the_request_timeout),
      T(test_ring_calls_honour_the_request_timeout),
      T(test_negative_request_timeout_is_invalid),
  };
#undef T
  return cmocka_run_group_tests_name("client_contract", tests, NULL, NULL);
}
