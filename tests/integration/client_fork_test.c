// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo and fork(), as include/halo/halo.h states it: a child forked by a
// process that connected a client inherits a copy of that client (its
// connection, fd channel and submission ring are the parent's session), and
// nng, which libhalo's socket uses, aborts in a process forked after it was
// initialized. So in such a child:
// - every call on the inherited client fails FAILED_PRECONDITION naming the
//   process that connected it: the submission ring's (semaphore signal,
//   queue execute, alloca, dealloca), the socket's (ping, creates, a device
//   buffer's write, a recording's end), a host-visible buffer's copies;
//   with the submission ring off too;
// - halo_client_connect of a new client fails FAILED_PRECONDITION saying
//   what works (exec), even where the parent closed its clients first, and
//   in the child's own children;
// - halo_client_close of the inherited client returns (no abort) and sends
//   nothing: the parent's session is untouched;
// - releasing the inherited objects one by one (a clean-up's or
//   destructors' way) frees the child's copies and sends nothing, and never
//   hangs, in children forked while other threads of the parent churn
//   through the client's locks;
// and the parent is never affected: its semaphores keep their values, its
// ring keeps working (executes run, signals land) and its session stands.
// A program exec'd by the child connects as any process does.
//
// The children report through a pipe and _exit (no cmocka in a child).
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/status.h"
#include "tests/support/halo_test.h"

#define MS HALO_TEST_MS
// How long a child may take before the test gives up on it (kills it).
#define CHILD_DEADLINE_MS 20000

// ---------------------------------------------------------------- children

typedef struct child_t {
  int report_fd;  // the pipe to the parent
  int failures;
  pid_t parent;
} child_t;

// Writes one line of the child's report: whether |status| has |code| and a
// message containing each of |substrings| (NULL-terminated; may be NULL).
// Frees |status|.
static void child_expect_all(child_t *child, const char *what,
                             halo_status_t status, halo_status_code_t code,
                             const char *const *substrings) {
  halo_status_code_t got = halo_status_code(status);
  const char *message = status ? halo_status_message(status) : "";
  bool ok = got == code;
  for (size_t i = 0; ok && substrings && substrings[i]; ++i) {
    ok = strstr(message, substrings[i]) != NULL;
  }
  if (!ok) ++child->failures;
  dprintf(child->report_fd, "%s %s: %s %s\n", ok ? "ok  " : "FAIL", what,
          halo_status_code_name(got), message);
  halo_status_free(status);
}

// The refusal of a call on a client the parent connected: it names the
// parent and the fork.
static void child_expect_refused(child_t *child, const char *what,
                                 halo_status_t status) {
  char parent[64];
  snprintf(parent, sizeof(parent), "connected by process %d",
           (int)child->parent);
  const char *const substrings[] = {parent, "forked", NULL};
  child_expect_all(child, what, status, HALO_STATUS_FAILED_PRECONDITION,
                   substrings);
}

static void child_check(child_t *child, const char *what, bool ok) {
  if (!ok) ++child->failures;
  dprintf(child->report_fd, "%s %s\n", ok ? "ok  " : "FAIL", what);
}

typedef void (*child_main_t)(child_t *child, void *argument);

// Runs |child_main| in a forked child and prints its report. Whether it
// exited 0 having met every expectation: false for a child that failed one,
// was killed by a signal (an abort: nng's "not fork-reentrant safe" panic)
// or did not finish in time (killed), with why in |child_failure|. The test
// checks the parent first (what the child did to it), then the child
// (assert_child_ok).
static char child_failure[256];

static bool run_in_child(child_main_t child_main, void *argument) {
  int fds[2];
  assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(fds[0]);
    child_t child = {.report_fd = fds[1], .parent = parent};
    child_main(&child, argument);
    _exit(child.failures ? 1 : 0);
  }
  close(fds[1]);
  char report[32768];
  size_t length = 0;
  int64_t deadline = halo_test_now_ns() + CHILD_DEADLINE_MS * MS;
  bool timed_out = false;
  for (;;) {
    int64_t left_ms = (deadline - halo_test_now_ns()) / MS;
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd poll_fd = {.fd = fds[0], .events = POLLIN};
    int ready = poll(&poll_fd, 1, (int)left_ms);
    if (ready <= 0) continue;  // EINTR, or the deadline (checked above)
    ssize_t got = read(fds[0], report + length, sizeof(report) - 1 - length);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    length += (size_t)got;
    if (length == sizeof(report) - 1) break;
  }
  report[length] = '\0';
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int wait_status = 0;
  assert_int_equal(waitpid(pid, &wait_status, 0), pid);
  // One line at a time (print_message's buffer is short).
  print_message("child %d:\n", (int)pid);
  for (char *line = report, *end; *line; line = end) {
    end = strchr(line, '\n');
    end = end ? end + 1 : line + strlen(line);
    print_message("%.*s", (int)(end - line), line);
  }
  child_failure[0] = '\0';
  if (timed_out) {
    snprintf(child_failure, sizeof(child_failure),
             "the child did not finish within %d ms (killed)",
             CHILD_DEADLINE_MS);
  } else if (WIFSIGNALED(wait_status)) {
    snprintf(child_failure, sizeof(child_failure),
             "the child was killed by signal %d (%s)", WTERMSIG(wait_status),
             strsignal(WTERMSIG(wait_status)));
  } else if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    snprintf(child_failure, sizeof(child_failure),
             "the child exited %d: an expectation above failed",
             WEXITSTATUS(wait_status));
  }
  if (child_failure[0]) print_message("%s\n", child_failure);
  return child_failure[0] == '\0';
}

static void assert_child_ok(bool ok) {
  if (!ok) fail_msg("%s", child_failure);
}

// ---------------------------------------------------------------- parent

// What the parent built before it forked.
typedef struct objects_t {
  halo_client_t *client;
  halo_semaphore_t *signalled;  // signalled by the parent only (from 0)
  halo_semaphore_t *done;       // signalled by the executions (from 0)
  halo_semaphore_t *scratch;    // at 0: only the children try to signal it
  halo_buffer_t *device;
  halo_buffer_t *host;
  halo_command_buffer_t *fill;       // fills |device| with 7s; REUSABLE, ended
  halo_command_buffer_t *recording;  // the same, not ended yet
  halo_queue_t *queue;
  halo_buffer_t *allocated;  // halo_queue_alloca's, on |queue|
  uint64_t executions;       // |done|'s value
} objects_t;

static const char kHostBytes[] = "the parent's bytes";

static void objects_build(halo_client_t *client, objects_t *objects) {
  memset(objects, 0, sizeof(*objects));
  objects->client = client;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &objects->signalled));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &objects->done));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &objects->scratch));
  objects->device = halo_test_create_buffer(client, HALO_MEMORY_DEVICE, 64, 0);
  objects->host =
      halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE, 64, 0);
  HALO_TEST_ASSERT_OK(
      halo_buffer_write(objects->host, 0, kHostBytes, sizeof(kHostBytes)));
  objects->fill = halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 0);
  uint32_t pattern = 7;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      objects->fill, halo_buffer_ref(objects->device, 0, HALO_WHOLE_BUFFER),
      &pattern, sizeof(pattern)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(objects->fill));
  objects->recording = halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      objects->recording,
      halo_buffer_ref(objects->device, 0, HALO_WHOLE_BUFFER), &pattern,
      sizeof(pattern)));
  HALO_TEST_ASSERT_OK(halo_queue_create(client, 0, 0, &objects->queue));
  HALO_TEST_ASSERT_OK(halo_queue_alloca(objects->queue, NULL, 0, NULL, 0,
                                        HALO_MEMORY_DEVICE, 64,
                                        &objects->allocated));
  // The ring (or the socket) works before the fork.
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(objects->signalled, 1));
  halo_semaphore_value_t signal = {objects->done, ++objects->executions};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, objects->fill, NULL, 0, NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(objects->done, objects->executions, 5000 * MS));
}

// The parent after the child: its objects are as it left them, and its
// session works, the submission ring included: signals land, executions
// run (each signals |done| once it ran), many times over the ring's
// records the child may have written.
static void objects_check_intact(objects_t *objects) {
  uint64_t value = 0;
  HALO_TEST_ASSERT_OK(halo_semaphore_query(objects->signalled, &value));
  assert_int_equal(value, 1);
  HALO_TEST_ASSERT_OK(halo_semaphore_query(objects->done, &value));
  assert_int_equal(value, objects->executions);
  assert_memory_equal(halo_buffer_host_pointer(objects->host), kHostBytes,
                      sizeof(kHostBytes));
  HALO_TEST_ASSERT_OK(halo_client_ping(objects->client));
  // A record of the parent's that the ring lost (written where a child's
  // was, which halod had taken: the call returned that record's verdict)
  // shows as a value not reached.
  for (uint64_t i = 2; i < 200; ++i) {
    HALO_TEST_ASSERT_OK(halo_semaphore_signal(objects->signalled, i));
    halo_semaphore_value_t signal = {objects->done, ++objects->executions};
    HALO_TEST_ASSERT_OK(halo_queue_execute(objects->queue, objects->fill, NULL,
                                           0, NULL, 0, &signal, 1));
    HALO_TEST_ASSERT_OK(
        halo_semaphore_wait(objects->done, objects->executions, 5000 * MS));
    HALO_TEST_ASSERT_OK(halo_semaphore_query(objects->signalled, &value));
    assert_int_equal(value, i);
  }
  // The recording is still the parent's to end.
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(objects->recording));
  halo_semaphore_value_t signal = {objects->done, ++objects->executions};
  HALO_TEST_ASSERT_OK(halo_queue_execute(NULL, objects->recording, NULL, 0,
                                         NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(objects->done, objects->executions, 5000 * MS));
  uint32_t words[16];
  HALO_TEST_ASSERT_OK(halo_buffer_read(objects->device, 0, words, 64));
  for (int i = 0; i < 16; ++i) assert_int_equal(words[i], 7);
  // Checked last: where a child's signal landed, the parent's ring breaks
  // first (above).
  HALO_TEST_ASSERT_OK(halo_semaphore_query(objects->scratch, &value));
  assert_int_equal(value, 0);
  // The alloca'd buffer is still the parent's to give back.
  HALO_TEST_ASSERT_OK(halo_queue_dealloca(objects->queue, NULL, 0, NULL, 0,
                                          objects->allocated));
  HALO_TEST_ASSERT_OK(halo_client_ping(objects->client));
}

static void objects_release(objects_t *objects) {
  halo_buffer_release(objects->allocated);
  halo_queue_release(objects->queue);
  halo_command_buffer_release(objects->recording);
  halo_command_buffer_release(objects->fill);
  halo_buffer_release(objects->host);
  halo_buffer_release(objects->device);
  halo_semaphore_release(objects->scratch);
  halo_semaphore_release(objects->done);
  halo_semaphore_release(objects->signalled);
}

// ---------------------------------------------------------------- tests

// The calls that go through the submission ring, with no nng in them: in
// the child they would have been applied to the parent's session, and the
// child's copy of the ring's tail would have made the parent's next
// records overwrite ones halod had taken (its executions never ran).
static void child_ring_calls(child_t *child, void *argument) {
  objects_t *objects = argument;
  child_expect_refused(child, "semaphore_signal",
                       halo_semaphore_signal(objects->signalled, 100));
  halo_semaphore_value_t signal = {objects->done, 100};
  child_expect_refused(
      child, "queue_execute",
      halo_queue_execute(NULL, objects->fill, NULL, 0, NULL, 0, &signal, 1));
  child_expect_refused(child, "queue_execute on a queue",
                       halo_queue_execute(objects->queue, objects->fill, NULL,
                                          0, NULL, 0, &signal, 1));
  halo_buffer_t *buffer = NULL;
  child_expect_refused(
      child, "queue_alloca",
      halo_queue_alloca(objects->queue, NULL, 0, &signal, 1,
                        HALO_MEMORY_HOST_VISIBLE, 64, &buffer));
  child_check(child, "queue_alloca's buffer is NULL", buffer == NULL);
  child_expect_refused(child, "queue_dealloca",
                       halo_queue_dealloca(objects->queue, NULL, 0, NULL, 0,
                                           objects->allocated));
  // The shared memory of a host-visible buffer is the parent session's.
  child_expect_refused(child, "host-visible buffer_write",
                       halo_buffer_write(objects->host, 0, "child", 5));
  char bytes[sizeof(kHostBytes)];
  child_expect_refused(child, "host-visible buffer_read",
                       halo_buffer_read(objects->host, 0, bytes, 5));
  child_check(child, "buffer_host_pointer is NULL",
              halo_buffer_host_pointer(objects->host) == NULL);
  // Reading the semaphores' shared page changes nothing: the values are
  // the parent's.
  uint64_t value = 0;
  child_expect_all(child, "semaphore_query",
                   halo_semaphore_query(objects->signalled, &value),
                   HALO_STATUS_OK, NULL);
  child_check(child, "the value is the parent's", value == 1);
}

// Builds the fixture's client's objects, runs |child_main| on them in a
// forked child, and checks that the parent's session is intact after it.
static void run_child_on_objects(halo_test_fixture_t *fixture,
                                 void (*child_main)(child_t *, void *)) {
  objects_t objects;
  objects_build(fixture->client, &objects);
  bool child_ok = run_in_child(child_main, &objects);
  objects_check_intact(&objects);
  objects_release(&objects);
  assert_child_ok(child_ok);
}

static void test_ring_calls_in_a_child_fail(void **state) {
  run_child_on_objects(*state, child_ring_calls);
}

// One signal on the ring, of a semaphore the parent does not touch: the
// child's copy of the ring's tail made the parent's next record land where
// the child's was, which halod had taken: the parent's execute never ran.
static void child_one_signal(child_t *child, void *argument) {
  objects_t *objects = argument;
  child_expect_refused(child, "semaphore_signal",
                       halo_semaphore_signal(objects->scratch, 1));
}

static void test_parent_ring_outlives_a_child_signal(void **state) {
  run_child_on_objects(*state, child_one_signal);
}

// The calls that ask halod over the socket: nng would have aborted the
// child ("nng is not fork-reentrant safe").
static void child_socket_calls(child_t *child, void *argument) {
  objects_t *objects = argument;
  child_expect_refused(child, "client_ping", halo_client_ping(objects->client));
  uint32_t count = 7;
  child_expect_refused(child, "client_device_count",
                       halo_client_device_count(objects->client, &count));
  halo_semaphore_t *semaphore = NULL;
  child_expect_refused(
      child, "semaphore_create",
      halo_semaphore_create(objects->client, 0, 0, &semaphore));
  child_expect_refused(
      child, "semaphore_fail",
      halo_semaphore_fail(objects->signalled, HALO_STATUS_ABORTED, "child"));
  halo_buffer_t *buffer = NULL;
  child_expect_refused(child, "buffer_create",
                       halo_buffer_create(objects->client, 0,
                                          HALO_MEMORY_DEVICE, 64, 0, &buffer));
  child_expect_refused(child, "device buffer_write",
                       halo_buffer_write(objects->device, 0, "child", 5));
  halo_queue_t *queue = NULL;
  child_expect_refused(child, "queue_create",
                       halo_queue_create(objects->client, 0, 0, &queue));
  halo_command_buffer_t *command_buffer = NULL;
  child_expect_refused(child, "command_buffer_begin",
                       halo_command_buffer_begin(objects->client, 0,
                                                 HALO_COMMAND_BUFFER_ONE_SHOT,
                                                 0, &command_buffer));
  child_check(child, "no objects were made",
              !semaphore && !buffer && !queue && !command_buffer);
  child_expect_refused(child, "command_buffer_end",
                       halo_command_buffer_end(objects->recording));
  // Releasing an inherited object is local: the parent's stays.
  halo_buffer_release(objects->device);
  halo_semaphore_release(objects->done);
}

static void test_socket_calls_in_a_child_fail(void **state) {
  run_child_on_objects(*state, child_socket_calls);
}

// With $HALO_RING=0 the ring's calls go over the socket: refused the same.
static void child_socket_only_calls(child_t *child, void *argument) {
  objects_t *objects = argument;
  child_expect_refused(child, "semaphore_signal (no ring)",
                       halo_semaphore_signal(objects->signalled, 100));
  halo_semaphore_value_t signal = {objects->done, 100};
  child_expect_refused(
      child, "queue_execute (no ring)",
      halo_queue_execute(NULL, objects->fill, NULL, 0, NULL, 0, &signal, 1));
}

static void test_socket_only_client_in_a_child_fails(void **state) {
  halo_test_fixture_t *fixture = *state;
  setenv("HALO_RING", "0", 1);
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  unsetenv("HALO_RING");
  objects_t objects;
  objects_build(client, &objects);
  bool child_ok = run_in_child(child_socket_only_calls, &objects);
  objects_check_intact(&objects);
  objects_release(&objects);
  halo_client_close(client);
  assert_child_ok(child_ok);
}

// A new client in the child: refused, saying what works, without an abort.
static void child_connect(child_t *child, void *argument) {
  const halo_test_daemon_t *daemon = argument;
  halo_client_options_t options = {.address = daemon->listen_address,
                                   .request_timeout_ms = 2000};
  halo_client_t *client = (halo_client_t *)1;
  char parent[64];
  snprintf(parent, sizeof(parent), "process %d", (int)child->parent);
  const char *const substrings[] = {parent, "fork", "exec", NULL};
  child_expect_all(child, "client_connect",
                   halo_client_connect(&options, &client),
                   HALO_STATUS_FAILED_PRECONDITION, substrings);
  child_check(child, "out_client is NULL", client == NULL);
  // Refused the same the second time.
  child_expect_all(child, "client_connect again",
                   halo_client_connect(&options, &client),
                   HALO_STATUS_FAILED_PRECONDITION, substrings);
  // And in the child's own child: it descends from the process that used
  // libhalo too.
  pid_t grandchild = fork();
  if (grandchild == 0) {
    halo_status_t status = halo_client_connect(&options, &client);
    bool ok = halo_status_code(status) == HALO_STATUS_FAILED_PRECONDITION &&
              strstr(halo_status_message(status), parent);
    _exit(ok ? 0 : 1);
  }
  int wait_status = 0;
  child_check(child, "client_connect in the child's child fails",
              grandchild > 0 && waitpid(grandchild, &wait_status, 0) > 0 &&
                  WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
}

static void test_connect_in_a_child_fails(void **state) {
  halo_test_fixture_t *fixture = *state;
  objects_t objects;
  objects_build(fixture->client, &objects);
  bool child_ok = run_in_child(child_connect, &fixture->daemon);
  objects_check_intact(&objects);
  objects_release(&objects);
  assert_child_ok(child_ok);
}

// Closing its clients before the fork does not make nng usable in the
// child: it was initialized in the parent.
static void test_connect_in_a_child_fails_after_the_parent_closed(
    void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_close(fixture->client);
  fixture->client = NULL;
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 0,
                                                   HALO_TEST_DEADLINE_MS));
  bool child_ok = run_in_child(child_connect, &fixture->daemon);
  // The parent connects again as ever.
  fixture->client = halo_test_connect(&fixture->daemon, 0);
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->client));
  assert_child_ok(child_ok);
}

// halo_client_close on the inherited client frees the child's copy
// (memory, mappings, descriptors) and sends nothing.
static void child_close(child_t *child, void *argument) {
  objects_t *objects = argument;
  halo_client_close(objects->client);
  child_check(child, "client_close returned", true);
}

static void test_close_in_a_child_leaves_the_parent_session(void **state) {
  halo_test_fixture_t *fixture = *state;
  objects_t objects;
  objects_build(fixture->client, &objects);
  uint64_t session = halo_client_session_id(fixture->client);
  bool child_ok = run_in_child(child_close, &objects);
  // The session stands, with everything in it.
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1,
                                                   HALO_TEST_DEADLINE_MS));
  assert_int_equal(halo_client_session_id(fixture->client), session);
  objects_check_intact(&objects);
  objects_release(&objects);
  assert_int_equal(halo_test_admin_session_count(&fixture->daemon), 1);
  assert_child_ok(child_ok);
}

// Waits for child |pid| until |deadline_ns|: true once it was reaped (its
// wait status in *|out_status|); false if it was still running then, and
// is killed (and reaped).
static bool wait_child_until(pid_t pid, int64_t deadline_ns, int *out_status) {
  for (;;) {
    pid_t reaped = waitpid(pid, out_status, WNOHANG);
    if (reaped == pid) return true;
    if (reaped < 0 && errno != EINTR) fail_msg("waitpid: %s", strerror(errno));
    if (halo_test_now_ns() >= deadline_ns) break;
    halo_test_sleep_ms(1);
  }
  kill(pid, SIGKILL);
  waitpid(pid, out_status, 0);
  return false;
}

// The parent's threads that hold the client's locks while the test forks:
// |recorder| begins and releases command buffers (locally: the client's
// object list, under its state lock, and nothing else), |worker| makes
// round trips that hold the others (semaphore and host buffer creates and
// releases, their mappings, the ring's executes and their verdicts, waits,
// pings). The first failure of a thread is kept for the test to report.
typedef struct churn_t {
  objects_t *objects;
  atomic_bool stop;
  atomic_ullong rounds;
  halo_status_t failure;  // the worker's first
} churn_t;

static void *churn_recorder(void *argument) {
  churn_t *churn = argument;
  while (!atomic_load(&churn->stop)) {
    halo_command_buffer_t *command_buffer = NULL;
    halo_status_t status = halo_command_buffer_begin(
        churn->objects->client, 0, HALO_COMMAND_BUFFER_ONE_SHOT, 0,
        &command_buffer);
    if (status) {
      halo_status_free(status);
      break;
    }
    halo_command_buffer_release(command_buffer);
    atomic_fetch_add(&churn->rounds, 1);
  }
  return NULL;
}

static halo_status_t churn_work_once(churn_t *churn) {
  objects_t *objects = churn->objects;
  halo_semaphore_t *semaphore = NULL;
  HALO_RETURN_IF_ERROR(
      halo_semaphore_create(objects->client, 0, 0, &semaphore));
  halo_semaphore_value_t signal = {semaphore, 1};
  halo_status_t status = halo_queue_execute(objects->queue, objects->fill, NULL,
                                            0, NULL, 0, &signal, 1);
  if (!status) status = halo_semaphore_wait(semaphore, 1, 5000 * MS);
  halo_semaphore_release(semaphore);
  halo_buffer_t *buffer = NULL;
  if (!status) {
    status = halo_buffer_create(objects->client, 0, HALO_MEMORY_HOST_VISIBLE,
                                64, 0, &buffer);
  }
  halo_buffer_release(buffer);
  if (!status) status = halo_client_ping(objects->client);
  return status;
}

static void *churn_worker(void *argument) {
  churn_t *churn = argument;
  while (!atomic_load(&churn->stop)) {
    halo_status_t status = churn_work_once(churn);
    if (status) {
      churn->failure = status;
      break;
    }
    atomic_fetch_add(&churn->rounds, 1);
  }
  return NULL;
}

// The child: every inherited object released one by one, as a program's
// clean-up (or its objects' destructors) would, then the client closed.
// Each release frees the child's copy alone and must not wait for a lock
// the parent's threads held at the fork. SIGALRM ends a child that hangs,
// should the parent be gone.
static void child_release_each(objects_t *objects) {
  signal(SIGALRM, SIG_DFL);
  alarm(CHILD_DEADLINE_MS / 1000);
  halo_buffer_release(objects->allocated);
  halo_queue_release(objects->queue);
  halo_command_buffer_release(objects->recording);
  halo_command_buffer_release(objects->fill);
  halo_buffer_release(objects->host);
  halo_buffer_release(objects->device);
  halo_semaphore_release(objects->scratch);
  halo_semaphore_release(objects->done);
  halo_semaphore_release(objects->signalled);
  halo_client_close(objects->client);
}

// How many children release their objects while the parent's threads
// churn, and how long each may take.
#define RELEASE_CHILDREN 200
#define RELEASE_CHILD_DEADLINE_MS 5000

// Children that release the inherited objects one by one, forked while
// other threads of the parent hold the client's locks (a server whose
// worker pool forks helpers): each child finishes at once, and the
// parent's session is untouched by all of them.
static void test_release_one_by_one_in_children_of_a_busy_parent(void **state) {
  halo_test_fixture_t *fixture = *state;
  objects_t objects;
  objects_build(fixture->client, &objects);
  churn_t churn = {.objects = &objects};
  pthread_t recorder;
  pthread_t worker;
  assert_int_equal(pthread_create(&recorder, NULL, churn_recorder, &churn), 0);
  assert_int_equal(pthread_create(&worker, NULL, churn_worker, &churn), 0);
  int forked = 0;
  int failed = 0;
  bool hung = false;
  while (forked < RELEASE_CHILDREN && !hung) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      child_release_each(&objects);
      _exit(0);
    }
    ++forked;
    int wait_status = 0;
    hung = !wait_child_until(
        pid, halo_test_now_ns() + RELEASE_CHILD_DEADLINE_MS * MS, &wait_status);
    if (!hung && (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0)) {
      ++failed;
    }
  }
  atomic_store(&churn.stop, true);
  pthread_join(recorder, NULL);
  pthread_join(worker, NULL);
  print_message(
      "%d children forked, %d failed%s; the parent's threads made "
      "%llu rounds meanwhile\n",
      forked, failed, hung ? ", the last hung" : "",
      (unsigned long long)atomic_load(&churn.rounds));
  HALO_TEST_ASSERT_OK(churn.failure);
  objects_check_intact(&objects);
  objects_release(&objects);
  if (hung) {
    fail_msg(
        "child %d did not finish its releases within %d ms (killed): a "
        "release waited for a lock a thread of the parent held at the "
        "fork",
        forked, RELEASE_CHILD_DEADLINE_MS);
  }
  assert_int_equal(failed, 0);
}

// fork then exec: the program exec'd connects as any process does (here
// this test, re-executed with --exec-child ADDRESS: exec_child below).
static void test_exec_in_a_child_connects(void **state) {
  halo_test_fixture_t *fixture = *state;
  objects_t objects;
  objects_build(fixture->client, &objects);
  char self[4096];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  assert_true(length > 0);
  self[length] = '\0';
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execl(self, self, "--exec-child", fixture->daemon.listen_address,
          (char *)NULL);
    _exit(127);
  }
  int wait_status = 0;
  int64_t deadline = halo_test_now_ns() + CHILD_DEADLINE_MS * MS;
  pid_t reaped = 0;
  while ((reaped = waitpid(pid, &wait_status, WNOHANG)) == 0 &&
         halo_test_now_ns() < deadline) {
    halo_test_sleep_ms(10);
  }
  if (reaped == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &wait_status, 0);
    fail_msg("the exec'd child did not finish within %d ms", CHILD_DEADLINE_MS);
  }
  assert_true(WIFEXITED(wait_status));
  assert_int_equal(WEXITSTATUS(wait_status), 0);
  objects_check_intact(&objects);
  objects_release(&objects);
}

// The exec'd child: a client of its own, used and closed.
static int exec_child(const char *address) {
  halo_client_options_t options = {.address = address};
  halo_client_t *client = NULL;
  halo_semaphore_t *semaphore = NULL;
  halo_status_t status = halo_client_connect(&options, &client);
  if (!status) status = halo_client_ping(client);
  if (!status) status = halo_semaphore_create(client, 0, 0, &semaphore);
  if (!status) status = halo_semaphore_signal(semaphore, 5);
  if (!status) status = halo_semaphore_wait(semaphore, 5, 5000 * MS);
  if (status) {
    fprintf(stderr, "exec'd child: %s: %s\n",
            halo_status_code_name(halo_status_code(status)),
            halo_status_message(status));
    halo_status_free(status);
  }
  halo_semaphore_release(semaphore);
  halo_client_close(client);
  return status ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--exec-child") == 0) {
    return exec_child(argv[2]);
  }
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name)                                                  \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_ring_calls_in_a_child_fail),
      T(test_parent_ring_outlives_a_child_signal),
      T(test_socket_calls_in_a_child_fail),
      T(test_socket_only_client_in_a_child_fails),
      T(test_connect_in_a_child_fails),
      T(test_connect_in_a_child_fails_after_the_parent_closed),
      T(test_close_in_a_child_leaves_the_parent_session),
      T(test_release_one_by_one_in_children_of_a_busy_parent),
      T(test_exec_in_a_child_connects),
  };
#undef T
  return cmocka_run_group_tests_name("client_fork", tests, NULL, NULL);
}
