// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halod's stop under load (SIGTERM with clients waiting and requests in
// flight), many times over: a shutdown always completes.
//
// Each round starts halod and CLIENTS client processes (this program
// re-executed with --client), each with WAITERS threads asleep in
// halo_semaphore_wait on semaphores nobody signals, one thread asleep on
// the signal semaphore of a queue-ordered alloca whose wait is never met
// (a submission pending in halod), REQUESTERS threads with a client of
// their own sending requests back to back, and in every fourth process a
// thread loading the test kernels over and over (executable loads run off
// halod's loop). Then SIGTERM, and:
// - halod exits with status 0 within STOP_BOUND_MS (else the test prints
//   its threads' backtraces when gdb is installed, SIGKILLs it and fails);
// - every waiter returns UNAVAILABLE within WAKE_BOUND_MS of the signal;
// - every requester's call in flight (or the next one) fails with
//   UNAVAILABLE within WAKE_BOUND_MS, far inside the 30 s request timeout;
// - every client process exits normally.
//
//   shutdown_test [--rounds N]      (default ROUNDS)
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

#define MS HALO_TEST_MS
#define ROUNDS 20
#define CLIENTS 16
#define WAITERS 16
#define REQUESTERS 2
// What halod promises for its exit after SIGTERM (docs/operations.md).
#define STOP_BOUND_MS 5000
// Waiters and requests in flight fail "at once": this allows for sixteen
// processes waking on two cores under ASan.
#define WAKE_BOUND_MS 1000
// A client process that saw no SIGTERM ends by itself after this.
#define CLIENT_MAX_NS (60000 * MS)

static int rounds = ROUNDS;
// This process is a client (--client).
static bool client_process;

// LeakSanitizer's hook: no leak check at a client process's exit. nng
// 1.5.2 leaks a request sent as its connection goes away (the pipe's send
// aio, stopped by the close, drops the message it was given: see
// tests/NOTES-for-daemon.md), and these clients send requests right into
// halod's stop on purpose. halod and the test process keep theirs.
int __lsan_is_turned_off(void);
__attribute__((visibility("default"))) int __lsan_is_turned_off(void) {
  return client_process;
}

// ---------------------------------------------------------------- client
//
//   shutdown_test --client ADDRESS KERNELS WAITERS REQUESTERS
//
// Sets up the threads described above (KERNELS "-": no loader thread),
// prints "ready" once every thread is under way, then, as each thread's
// call returns, one line per thread: "KIND CODE END_NS CALLS" (KIND
// waiter, queued, requester or loader; CODE the status code that ended it;
// END_NS CLOCK_MONOTONIC when it returned; CALLS the calls that succeeded
// before), then "end". Setup failures print "setup CODE MESSAGE" and exit
// 2. Plain libhalo: no cmocka in a client process.

typedef struct client_thread_t {
  const char *kind;
  const char *address;
  const char *kernels;
  halo_client_t *client;        // waiter, queued: shared; others: own
  halo_semaphore_t *semaphore;  // waiter, queued: the one it waits on
  pthread_t thread;
  _Atomic bool started;
  halo_status_code_t code;
  int64_t end_ns;
  uint64_t calls;
} client_thread_t;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void client_finish(client_thread_t *thread, halo_status_t status) {
  thread->end_ns = now_ns();
  thread->code = halo_status_code(status);
  if (thread->code != HALO_STATUS_UNAVAILABLE) {
    fprintf(stderr, "shutdown client (pid %d): %s: %s: %s\n", (int)getpid(),
            thread->kind, halo_status_code_name(thread->code),
            halo_status_message(status));
  }
  halo_status_free(status);
}

static void *client_waiter_main(void *arg) {
  client_thread_t *thread = arg;
  atomic_store(&thread->started, true);
  client_finish(
      thread, halo_semaphore_wait(thread->semaphore, 1, HALO_TIMEOUT_INFINITE));
  return NULL;
}

// Sends pings, with a semaphore's life (create, signal, release) every
// eighth call, until one fails.
static void *client_requester_main(void *arg) {
  client_thread_t *thread = arg;
  atomic_store(&thread->started, true);
  halo_status_t status = NULL;
  while (!status) {
    if (thread->calls % 8 == 7) {
      halo_semaphore_t *semaphore = NULL;
      status = halo_semaphore_create(thread->client, 0, 0, &semaphore);
      if (!status) status = halo_semaphore_signal(semaphore, 1);
      halo_semaphore_release(semaphore);
    } else {
      status = halo_client_ping(thread->client);
    }
    if (!status) ++thread->calls;
  }
  client_finish(thread, status);
  return NULL;
}

static void *client_loader_main(void *arg) {
  client_thread_t *thread = arg;
  atomic_store(&thread->started, true);
  halo_status_t status = NULL;
  while (!status) {
    halo_executable_t *executable = NULL;
    status = halo_executable_create_from_file(thread->client, 0,
                                              thread->kernels, 0, &executable);
    halo_executable_release(executable);
    if (!status) ++thread->calls;
  }
  client_finish(thread, status);
  return NULL;
}

static halo_status_t client_connect(const char *address,
                                    halo_client_t **out_client) {
  // The default request timeout (30 s): requests in flight must fail long
  // before it.
  halo_client_options_t options = {.address = address,
                                   .client_name = "shutdown-client"};
  return halo_client_connect(&options, out_client);
}

// The queued waiter's semaphore: signaled by an alloca that waits on
// |gate|, which nobody signals.
static halo_status_t client_queue_alloca(halo_client_t *client,
                                         halo_queue_t **out_queue,
                                         halo_semaphore_t **out_gate,
                                         halo_semaphore_t **out_done,
                                         halo_buffer_t **out_buffer) {
  halo_status_t status = halo_queue_create(client, 0, 0, out_queue);
  if (!status) status = halo_semaphore_create(client, 0, 0, out_gate);
  if (!status) status = halo_semaphore_create(client, 0, 0, out_done);
  if (status) return status;
  halo_semaphore_value_t wait = {*out_gate, 1};
  halo_semaphore_value_t signal = {*out_done, 1};
  return halo_queue_alloca(*out_queue, &wait, 1, &signal, 1,
                           HALO_MEMORY_HOST_VISIBLE, 4096, out_buffer);
}

static int client_main(const char *address, const char *kernels, int waiters,
                       int requesters) {
  bool loader = strcmp(kernels, "-") != 0;
  int count = waiters + 1 + requesters + (loader ? 1 : 0);
  client_thread_t *threads = calloc((size_t)count, sizeof(*threads));
  halo_client_t *client = NULL;
  halo_queue_t *queue = NULL;
  halo_semaphore_t *gate = NULL;
  halo_buffer_t *buffer = NULL;
  halo_status_t status = threads
                             ? client_connect(address, &client)
                             : halo_status_make(HALO_STATUS_INTERNAL, "oom");
  for (int i = 0; !status && i < count; ++i) {
    client_thread_t *thread = &threads[i];
    thread->address = address;
    thread->kernels = kernels;
    if (i < waiters) {
      thread->kind = "waiter";
      thread->client = client;
      status = halo_semaphore_create(client, 0, 0, &thread->semaphore);
    } else if (i == waiters) {
      thread->kind = "queued";
      thread->client = client;
      status = client_queue_alloca(client, &queue, &gate, &thread->semaphore,
                                   &buffer);
    } else {
      thread->kind = i < waiters + 1 + requesters ? "requester" : "loader";
      status = client_connect(address, &thread->client);
    }
  }
  if (status) {
    printf("setup %d %s\n", (int)halo_status_code(status),
           halo_status_message(status));
    fflush(stdout);
    halo_status_free(status);
    return 2;
  }
  for (int i = 0; i < count; ++i) {
    client_thread_t *thread = &threads[i];
    void *(*main_fn)(void *) = client_waiter_main;
    if (strcmp(thread->kind, "requester") == 0) main_fn = client_requester_main;
    if (strcmp(thread->kind, "loader") == 0) main_fn = client_loader_main;
    if (pthread_create(&thread->thread, NULL, main_fn, thread) != 0) {
      printf("setup %d pthread_create\n", HALO_STATUS_INTERNAL);
      fflush(stdout);
      _exit(2);
    }
  }
  for (int i = 0; i < count; ++i) {
    while (!atomic_load(&threads[i].started)) usleep(100);
  }
  printf("ready\n");
  fflush(stdout);
  int64_t give_up = now_ns() + CLIENT_MAX_NS;
  for (int i = 0; i < count; ++i) {
    // A thread that never returns leaves the test to find it silent.
    while (pthread_tryjoin_np(threads[i].thread, NULL) == EBUSY) {
      if (now_ns() > give_up) _exit(3);
      usleep(1000);
    }
    printf("%s %d %lld %llu\n", threads[i].kind, (int)threads[i].code,
           (long long)threads[i].end_ns, (unsigned long long)threads[i].calls);
    fflush(stdout);
  }
  printf("end\n");
  fflush(stdout);
  for (int i = 0; i < count; ++i) {
    if (threads[i].client != client) halo_client_close(threads[i].client);
  }
  halo_buffer_release(buffer);
  halo_semaphore_release(gate);
  halo_queue_release(queue);
  halo_client_close(client);  // frees the waiters' semaphores
  free(threads);
  return 0;
}

// ---------------------------------------------------------------- test

typedef struct round_result_t {
  int64_t stop_ns;  // SIGTERM to halod's exit
  int64_t latest_waiter_ns;
  int64_t latest_request_ns;
  uint64_t calls;  // requests that succeeded before the stop
} round_result_t;

// Prints every thread's backtrace of |pid| (gdb, when installed).
static void print_backtraces(pid_t pid) {
  char command[256];
  snprintf(command, sizeof(command),
           "command -v gdb >/dev/null && gdb -batch -p %d -ex 'thread apply "
           "all bt' 1>&2 2>/dev/null",
           (int)pid);
  if (system(command) != 0) {
    print_error("(no backtraces: gdb is missing or could not attach)\n");
  }
}

// Waits up to |timeout_ms| for the daemon to exit; its wait status, or -1.
static int wait_daemon(pid_t pid, int timeout_ms) {
  int wait_status = -1;
  if (!HALO_TEST_POLL(waitpid(pid, &wait_status, WNOHANG) == pid, timeout_ms)) {
    return -1;
  }
  return wait_status;
}

// Reads client |index|'s report and checks each thread against |term_ns|.
static void check_client(halo_test_process_t *process, int index,
                         int64_t term_ns, round_result_t *result) {
  for (;;) {
    char line[160];
    halo_test_read_line(process, line, sizeof(line), WAKE_BOUND_MS + 3000);
    if (strcmp(line, "end") == 0) break;
    char kind[16];
    int code;
    long long end_ns;
    unsigned long long calls;
    if (sscanf(line, "%15s %d %lld %llu", kind, &code, &end_ns, &calls) != 4) {
      print_error("client %d: unexpected line: %s\n", index, line);
      fail();
    }
    int64_t after_ns = end_ns - term_ns;
    bool waiter = strcmp(kind, "waiter") == 0 || strcmp(kind, "queued") == 0;
    if (code != HALO_STATUS_UNAVAILABLE || after_ns < 0 ||
        after_ns > WAKE_BOUND_MS * MS) {
      print_error(
          "client %d: a %s returned %s %lld ms after SIGTERM (expected "
          "UNAVAILABLE within %d ms)\n",
          index, kind, halo_status_code_name((halo_status_code_t)code),
          (long long)(after_ns / MS), WAKE_BOUND_MS);
      fail();
    }
    int64_t *latest =
        waiter ? &result->latest_waiter_ns : &result->latest_request_ns;
    if (after_ns > *latest) *latest = after_ns;
    result->calls += calls;
  }
  assert_int_equal(halo_test_process_wait(process, HALO_TEST_DEADLINE_MS), 0);
}

static void run_round(halo_test_fixture_t *fixture, int round,
                      round_result_t *result) {
  memset(result, 0, sizeof(*result));
  const char *daemon_args[] = {"--log-level", "warn", NULL};
  halo_test_daemon_start_with_args(&fixture->daemon, daemon_args);
  for (int i = 0; i < CLIENTS; ++i) {
    char waiters[16], requesters[16];
    snprintf(waiters, sizeof(waiters), "%d", WAITERS);
    snprintf(requesters, sizeof(requesters), "%d", REQUESTERS);
    const char *argv[] = {"/proc/self/exe",  // this test, run again

                          "--client",
                          fixture->daemon.listen_address,
                          i % 4 == 0 ? halo_test_kernels_path() : "-",
                          waiters,
                          requesters,
                          NULL};
    halo_test_spawn(&fixture->peers[i], argv);
  }
  for (int i = 0; i < CLIENTS; ++i) {
    char line[160];
    halo_test_read_line(&fixture->peers[i], line, sizeof(line), 30000);
    if (strcmp(line, "ready") != 0) {
      print_error("round %d: client %d did not start: %s\n", round, i, line);
      fail();
    }
  }
  // Let the requesters get going (and every waiter fall asleep).
  halo_test_sleep_ms(50);

  pid_t pid = fixture->daemon.pid;
  int64_t term_ns = halo_test_now_ns();
  assert_return_code(kill(pid, SIGTERM), errno);
  int wait_status = wait_daemon(pid, STOP_BOUND_MS);
  if (wait_status == -1) {
    print_error(
        "round %d: halod (pid %d) did not exit within %d ms of SIGTERM; "
        "its threads:\n",
        round, (int)pid, STOP_BOUND_MS);
    print_backtraces(pid);
    halo_test_daemon_kill(&fixture->daemon);
    fail();
  }
  fixture->daemon.pid = 0;
  result->stop_ns = halo_test_now_ns() - term_ns;
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    print_error("round %d: halod ended with wait status 0x%x after SIGTERM\n",
                round, wait_status);
    fail();
  }
  // Every client process reports and exits on its own; one that does not
  // has a thread stuck somewhere.
  for (int i = 0; i < CLIENTS; ++i) {
    halo_test_process_t *process = &fixture->peers[i];
    pid_t client_pid = process->pid;
    if (!HALO_TEST_POLL(halo_test_process_exited(process),
                        STOP_BOUND_MS + WAKE_BOUND_MS)) {
      print_error("round %d: client %d (pid %d) still runs; its threads:\n",
                  round, i, (int)client_pid);
      print_backtraces(client_pid);
      fail();
    }
  }
  for (int i = 0; i < CLIENTS; ++i) {
    check_client(&fixture->peers[i], i, term_ns, result);
  }
  halo_test_daemon_cleanup(&fixture->daemon);
}

static void test_sigterm_under_load_completes(void **state) {
  halo_test_fixture_t *fixture = *state;
  int64_t worst_stop = 0, worst_waiter = 0, worst_request = 0;
  for (int round = 0; round < rounds; ++round) {
    round_result_t result;
    run_round(fixture, round, &result);
    if (result.stop_ns > worst_stop) worst_stop = result.stop_ns;
    if (result.latest_waiter_ns > worst_waiter) {
      worst_waiter = result.latest_waiter_ns;
    }
    if (result.latest_request_ns > worst_request) {
      worst_request = result.latest_request_ns;
    }
    printf(
        "round %d: halod exited %lld ms after SIGTERM; last waiter woke "
        "after %lld ms, last request failed after %lld ms (%llu requests "
        "before)\n",
        round, (long long)(result.stop_ns / MS),
        (long long)(result.latest_waiter_ns / MS),
        (long long)(result.latest_request_ns / MS),
        (unsigned long long)result.calls);
  }
  printf(
      "%d rounds of %d clients x %d waiters: worst stop %lld ms, waiter "
      "%lld ms, request %lld ms\n",
      rounds, CLIENTS, WAITERS + 1, (long long)(worst_stop / MS),
      (long long)(worst_waiter / MS), (long long)(worst_request / MS));
}

static int setup(void **state) {
  halo_test_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  return 0;
}

static int teardown(void **state) {
  halo_test_fixture_t *fixture = *state;
  for (int i = 0; i < HALO_TEST_MAX_PEERS; ++i) {
    halo_test_process_cleanup(&fixture->peers[i]);
  }
  halo_test_daemon_cleanup(&fixture->daemon);
  free(fixture);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[1], "--client") == 0) {
    client_process = true;
    return client_main(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
  }
  if (argc == 3 && strcmp(argv[1], "--rounds") == 0) {
    rounds = atoi(argv[2]);
  } else if (argc != 1) {
    fprintf(stderr, "usage: shutdown_test [--rounds N]\n");
    return 2;
  }
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sigterm_under_load_completes, setup,
                                      teardown),
  };
  return cmocka_run_group_tests_name("shutdown", tests, NULL, NULL);
}
