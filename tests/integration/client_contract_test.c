// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo's contract with a program that embeds it (an inference server:
// many threads, a long-lived process), as include/halo/halo.h states it:
// - request timeout: every call that asks halod (over the socket, over the
//   submission ring, or waiting for either behind other threads) returns
//   DEADLINE_EXCEEDED within the client's request timeout when halod does
//   not answer (here: halod stopped with SIGSTOP), and the client works
//   again once halod does;
// - connect: the dial is bounded by the request timeout too;
// - halod gone: calls over the submission ring return UNAVAILABLE, an
//   asynchronous execute's too, and so do waits too short to sleep;
// - the fd channel (mappings, the session's AUTH at connect): a request
//   halod does not answer ends the same way, and its late reply is not
//   taken for the next request's; one halod never answers (it drops a reply
//   it fails to send) does not leave the channel unusable: the next request
//   gets a new one; so does its connect when halod accepts no more of them
//   (a fake halod: fake_halod_t);
// - the waits behind other threads measure the request timeout on the
//   monotonic clock (a step of the wall clock changes nothing), and a
//   DEADLINE_EXCEEDED names what used the time up (the submission ring's
//   drain, other threads' requests on the socket);
// - a lost session: the calls that ask halod fail SESSION_LOST, the local
//   ones (host-visible buffers' contents, recording) still work;
// - arguments: a request timeout out of range is INVALID_ARGUMENT naming
//   it; a NULL argument is INVALID_ARGUMENT naming that one argument, and
//   the outputs are cleared first, whichever argument was NULL.
// clang-format off
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
// clang-format on
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "common/fd_channel.h"
#include "common/timeline.h"
#include "common/wire.h"
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

// The clocks as one thread of this process reads them (clock_gettime, which
// libhalo calls, is this one in the test): |skewed_thread|'s readings of
// CLOCK_REALTIME and CLOCK_MONOTONIC are ahead by |realtime_skew_ns| and
// |monotonic_skew_ns|. A wall clock read ahead is a wall clock stepped
// back right after the reading, as NTP or an operator may step it: the
// kernel's timed waits on CLOCK_REALTIME still measure the true one. The
// monotonic clock read ahead is time passing at once, at a point the test
// chooses.
static _Atomic unsigned long skewed_thread;
static _Atomic int64_t realtime_skew_ns;
static _Atomic int64_t monotonic_skew_ns;

int clock_gettime(clockid_t clock, struct timespec *time) {
  if (syscall(SYS_clock_gettime, clock, time) != 0) return -1;
  if (atomic_load(&skewed_thread) != (unsigned long)pthread_self()) return 0;
  int64_t skew = clock == CLOCK_REALTIME    ? atomic_load(&realtime_skew_ns)
                 : clock == CLOCK_MONOTONIC ? atomic_load(&monotonic_skew_ns)
                                            : 0;
  int64_t ns = (int64_t)time->tv_sec * 1000000000 + time->tv_nsec + skew;
  time->tv_sec = ns / 1000000000;
  time->tv_nsec = ns % 1000000000;
  return 0;
}

typedef enum call_kind_e {
  CALL_PING = 0,    // over the socket
  CALL_SIGNAL = 1,  // over the submission ring (a synchronous record)
} call_kind_t;

typedef struct call_t {
  halo_client_t *client;
  halo_semaphore_t *semaphore;
  call_kind_t kind;
  uint64_t value;
  bool skewed;  // reads the clocks skewed (skewed_thread)
  halo_status_code_t code;
  char message[256];
  int64_t took_ns;
  _Atomic bool done;
} call_t;

static void *call_main(void *arg) {
  call_t *call = arg;
  if (call->skewed) atomic_store(&skewed_thread, (unsigned long)pthread_self());
  int64_t start = halo_test_now_ns();
  halo_status_t status =
      call->kind == CALL_PING
          ? halo_client_ping(call->client)
          : halo_semaphore_signal(call->semaphore, call->value);
  call->took_ns = halo_test_now_ns() - start;
  if (call->skewed) atomic_store(&skewed_thread, 0);
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
  // A call that does not end even with halod running fails the test naming
  // it (its thread is left behind) instead of hanging it until ctest's
  // timeout, which told nothing.
  for (int i = 0; i < count; ++i) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += GIVE_UP_MS / 1000;
    if (pthread_timedjoin_np(threads[i], NULL, &deadline) != 0) {
      kill(daemon->pid, SIGCONT);
      fail_msg(
          "call %d (%s) still runs %d ms after halod was continued "
          "(hung: %d)",
          i, calls[i].kind == CALL_PING ? "ping" : "signal", GIVE_UP_MS,
          (int)hung);
    }
  }
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

// A ping of |client| succeeds once a resumed halod has caught up: it still
// counts the timed-out requests against session-requests until it answered
// them (RESOURCE_EXHAUSTED until then), and a slow build's halod may take
// longer than a request timeout to get there.
static void ping_once_caught_up(halo_client_t *client) {
  halo_status_t status = NULL;
  int64_t since = halo_test_now_ns();
  while ((status = halo_client_ping(client)) &&
         (halo_status_code(status) == HALO_STATUS_RESOURCE_EXHAUSTED ||
          halo_status_code(status) == HALO_STATUS_DEADLINE_EXCEEDED) &&
         halo_test_now_ns() - since < GIVE_UP_MS * MS) {
    halo_status_free(status);
    halo_test_sleep_ms(5);
  }
  HALO_TEST_ASSERT_OK(status);
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
  ping_once_caught_up(client);
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
  ping_once_caught_up(client);
  for (int i = 0; i < THREADS; ++i) {
    HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphores[i], 2));
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(semaphores[i], 2, 0));
    halo_semaphore_release(semaphores[i]);
  }
  halo_client_close(client);
}

// ---------------------------------------------------------------- fake halod
//
// The fd channel's requests (a semaphore page's or an arena's mapping, the
// session's AUTH at connect) are answered by halod's loop, as its socket's
// are: to stop it between the two, this fake serves the socket (Hello,
// SemaphoreCreate with each semaphore on a page of its own, OK to the rest)
// and the fd channel (AUTH; DAEMON and RING refused; SEMAPHORE_PAGE with a
// memfd holding a timeline page), and leaves every fd request of kind
// |stall_kind| unanswered while it is set. Cleared, it answers those late,
// each with a page that is not a timeline page (a client that took one as
// its reply would fail "has no timeline header"), on their connection if
// it is still open. The next request of kind |drop_kind| is never
// answered, as halod drops a reply it fails to send.

typedef struct fake_halod_t {
  char dir[48];
  char address[160];
  char fd_path[100];
  nng_socket socket;
  int fd_listener;
  pthread_t socket_thread;
  pthread_t fd_thread;
  _Atomic bool stop;
  _Atomic uint32_t stall_kind;  // halo_fd_request_kind_t; 0: none
  _Atomic int stalled;          // requests left unanswered so far
  _Atomic int stalls;           // requests ever left unanswered
  _Atomic bool hold_accepts;    // leave the fd channel's backlog alone
  _Atomic bool holding;         // the fd thread saw |hold_accepts|
  _Atomic uint32_t drop_kind;   // halo_fd_request_kind_t; 0: none
  _Atomic int drops;            // requests dropped so far
  _Atomic int connections;      // fd channel connections accepted
  uint64_t next_page;           // socket thread only
} fake_halod_t;

static void *fake_socket_main(void *arg) {
  fake_halod_t *fake = arg;
  uint8_t token[16];
  memset(token, 0x42, sizeof(token));
  while (!atomic_load(&fake->stop)) {
    nng_msg *message = NULL;
    if (nng_recvmsg(fake->socket, &message, 0) != 0) continue;  // timeout
    Halo__Wire__Request *request = halo__wire__request__unpack(
        NULL, nng_msg_len(message), nng_msg_body(message));
    nng_msg_free(message);
    Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
    Halo__Wire__HelloReply hello = HALO__WIRE__HELLO_REPLY__INIT;
    Halo__Wire__SemaphoreReply semaphore = HALO__WIRE__SEMAPHORE_REPLY__INIT;
    if (!request) {
      response.code = HALO_STATUS_INVALID_ARGUMENT;
    } else if (request->body_case == HALO__WIRE__REQUEST__BODY_HELLO) {
      hello.protocol_version = HALO_PROTOCOL_VERSION;
      hello.daemon_version = "fake";
      hello.session_id = 1;
      hello.session_token.data = token;
      hello.session_token.len = sizeof(token);
      hello.fd_channel_path = fake->fd_path;
      hello.incarnation = 1;
      hello.trust_domain = "fake";
      hello.max_message_bytes = HALO_WIRE_MAX_MESSAGE_BYTES;
      response.body_case = HALO__WIRE__RESPONSE__BODY_HELLO;
      response.hello = &hello;
    } else if (request->body_case ==
               HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE) {
      uint64_t page = ++fake->next_page;
      semaphore.handle = 0x1000 + page;
      semaphore.page_id = page;
      response.body_case = HALO__WIRE__RESPONSE__BODY_SEMAPHORE;
      response.semaphore = &semaphore;
    }
    if (request) halo__wire__request__free_unpacked(request, NULL);
    nng_msg *reply = NULL;
    halo_status_t status = halo_wire_pack(&response.base, &reply);
    if (status) {
      halo_status_free(status);
      continue;
    }
    if (nng_sendmsg(fake->socket, reply, 0) != 0) nng_msg_free(reply);
  }
  return NULL;
}

// A memfd of one page: a timeline page (its magic set) or not.
static int fake_page(bool timeline) {
  int fd = memfd_create("fake-page", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, HALO_TIMELINE_PAGE_SIZE) != 0) abort();
  if (timeline) {
    uint64_t magic = HALO_TIMELINE_PAGE_MAGIC;
    if (pwrite(fd, &magic, sizeof(magic), 0) != sizeof(magic)) abort();
  }
  return fd;
}

static void fake_reply(int connection, int32_t code, int fd) {
  halo_fd_reply_t reply;
  memset(&reply, 0, sizeof(reply));
  reply.code = code;
  reply.size = fd >= 0 ? HALO_TIMELINE_PAGE_SIZE : 0;
  if (code) snprintf(reply.message, sizeof(reply.message), "fake halod");
  halo_status_free(halo_fd_send(connection, &reply, sizeof(reply), fd));
  if (fd >= 0) close(fd);
}

// Whether |fd| becomes readable within |ms|.
static bool fake_readable(int fd, int ms) {
  struct pollfd poll_fd = {.fd = fd, .events = POLLIN};
  return poll(&poll_fd, 1, ms) > 0;
}

static void *fake_fd_main(void *arg) {
  fake_halod_t *fake = arg;
  int connection = -1;
  while (!atomic_load(&fake->stop)) {
    if (connection < 0) {
      if (atomic_load(&fake->hold_accepts)) {
        atomic_store(&fake->holding, true);
        halo_test_sleep_ms(5);
      } else if (fake_readable(fake->fd_listener, 20)) {
        connection = accept4(fake->fd_listener, NULL, NULL, SOCK_CLOEXEC);
        if (connection >= 0) atomic_fetch_add(&fake->connections, 1);
      }
      continue;
    }
    // Requests left unanswered get their (wrong) replies once the stall
    // ends, before anything else is read.
    if (atomic_load(&fake->stall_kind) == 0) {
      for (; atomic_load(&fake->stalled) > 0;
           atomic_fetch_sub(&fake->stalled, 1)) {
        fake_reply(connection, HALO_STATUS_OK, fake_page(false));
      }
    }
    if (!fake_readable(connection, 20)) continue;
    halo_fd_request_t request;
    int ignored = -1;
    halo_status_t status =
        halo_fd_recv(connection, &request, sizeof(request), &ignored);
    if (status) {  // the client went away
      halo_status_free(status);
      close(connection);
      connection = -1;
      // The late replies it was owed go nowhere (not to the next one).
      atomic_store(&fake->stalled, 0);
      continue;
    }
    uint32_t drop = request.kind;
    if (atomic_compare_exchange_strong(&fake->drop_kind, &drop, 0)) {
      atomic_fetch_add(&fake->drops, 1);
    } else if (request.kind == atomic_load(&fake->stall_kind)) {
      atomic_fetch_add(&fake->stalls, 1);
      atomic_fetch_add(&fake->stalled, 1);
    } else if (request.kind == HALO_FD_REQUEST_AUTH) {
      fake_reply(connection, HALO_STATUS_OK, -1);
    } else if (request.kind == HALO_FD_REQUEST_SEMAPHORE_PAGE) {
      fake_reply(connection, HALO_STATUS_OK, fake_page(true));
    } else {
      fake_reply(connection, HALO_STATUS_UNIMPLEMENTED, -1);
    }
  }
  if (connection >= 0) close(connection);
  return NULL;
}

static void fake_start(fake_halod_t *fake) {
  memset(fake, 0, sizeof(*fake));
  snprintf(fake->dir, sizeof(fake->dir), "/tmp/halo-fake-XXXXXX");
  assert_non_null(mkdtemp(fake->dir));
  snprintf(fake->address, sizeof(fake->address), "ipc://%s/halo.sock",
           fake->dir);
  snprintf(fake->fd_path, sizeof(fake->fd_path), "%s/halo.sock.fd", fake->dir);
  assert_int_equal(nng_rep0_open(&fake->socket), 0);
  assert_int_equal(nng_socket_set_ms(fake->socket, NNG_OPT_RECVTIMEO, 20), 0);
  assert_int_equal(nng_listen(fake->socket, fake->address, NULL, 0), 0);
  fake->fd_listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  assert_true(fake->fd_listener >= 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof(address.sun_path), "%s", fake->fd_path);
  assert_int_equal(
      bind(fake->fd_listener, (struct sockaddr *)&address, sizeof(address)), 0);
  assert_int_equal(listen(fake->fd_listener, 4), 0);
  assert_int_equal(
      pthread_create(&fake->socket_thread, NULL, fake_socket_main, fake), 0);
  assert_int_equal(pthread_create(&fake->fd_thread, NULL, fake_fd_main, fake),
                   0);
}

static void fake_stop(fake_halod_t *fake) {
  atomic_store(&fake->stop, true);
  pthread_join(fake->socket_thread, NULL);
  pthread_join(fake->fd_thread, NULL);
  nng_close(fake->socket);
  close(fake->fd_listener);
  char path[200];
  snprintf(path, sizeof(path), "%s/halo.sock", fake->dir);
  unlink(path);
  unlink(fake->fd_path);
  rmdir(fake->dir);
}

typedef struct create_t {
  halo_client_t *client;
  halo_client_options_t options;  // connect (client NULL)
  halo_semaphore_t *semaphore;    // or create a semaphore on |client|
  halo_status_code_t code;
  char message[256];
  int64_t took_ns;
  _Atomic bool done;
} create_t;

static void *create_main(void *arg) {
  create_t *create = arg;
  int64_t start = halo_test_now_ns();
  halo_status_t status =
      create->client
          ? halo_semaphore_create(create->client, 0, 0, &create->semaphore)
          : halo_client_connect(&create->options, &create->client);
  create->took_ns = halo_test_now_ns() - start;
  create->code = halo_status_code(status);
  snprintf(create->message, sizeof(create->message), "%s",
           halo_status_message(status));
  halo_status_free(status);
  atomic_store(&create->done, true);
  return NULL;
}

// Runs |create| while |fake| leaves its fd requests of |kind| unanswered;
// asserts it ends with DEADLINE_EXCEEDED within the request timeout (a
// call still running after GIVE_UP_MS is let go by ending the stall), and
// that a request was stalled (|stalls|: |stalled| falls back to 0 as the
// fake answers late, which it may do as soon as the stall ends).
static void create_while_stalled(fake_halod_t *fake, uint32_t kind,
                                 create_t *create) {
  atomic_store(&fake->stall_kind, kind);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, create_main, create), 0);
  int64_t start = halo_test_now_ns();
  while (!atomic_load(&create->done) &&
         halo_test_now_ns() - start < GIVE_UP_MS * MS) {
    halo_test_sleep_ms(5);
  }
  atomic_store(&fake->stall_kind, 0);
  pthread_join(thread, NULL);
  print_message("%s: %s after %lld ms: %s\n",
                create->options.address ? "connect" : "create",
                halo_status_code_name(create->code),
                (long long)(create->took_ns / MS), create->message);
  assert_true(atomic_load(&fake->stalls) > 0);
  assert_int_equal(create->code, HALO_STATUS_DEADLINE_EXCEEDED);
  assert_true(create->took_ns <= (REQUEST_TIMEOUT_MS + SLACK_MS) * MS);
}

// A mapping whose fd channel reply does not come ends with the request
// timeout, and the late reply is not taken for the next request's.
static void test_fd_channel_requests_honour_the_request_timeout(void **state) {
  (void)state;
  fake_halod_t fake;
  fake_start(&fake);
  halo_client_options_t options = {.address = fake.address,
                                   .request_timeout_ms = REQUEST_TIMEOUT_MS};
  halo_client_t *client = NULL;
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &client));
  halo_semaphore_t *first = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &first));
  create_t create = {.client = client};
  create_while_stalled(&fake, HALO_FD_REQUEST_SEMAPHORE_PAGE, &create);
  assert_null(create.semaphore);
  halo_semaphore_t *second = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &second));
  assert_int_equal(atomic_load(&fake.stalled), 0);
  halo_semaphore_release(second);
  halo_semaphore_release(first);
  halo_client_close(client);
  fake_stop(&fake);
}

// A request whose reply halod never sends (it drops a reply it fails to
// send) ends with the request timeout; the channel is not left waiting for
// that reply for ever: the next request connects a new one and is
// answered, and so are those after it.
static void test_fd_channel_outlives_a_dropped_reply(void **state) {
  (void)state;
  fake_halod_t fake;
  fake_start(&fake);
  halo_client_options_t options = {.address = fake.address,
                                   .request_timeout_ms = REQUEST_TIMEOUT_MS};
  halo_client_t *client = NULL;
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &client));
  halo_semaphore_t *first = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &first));
  atomic_store(&fake.drop_kind, HALO_FD_REQUEST_SEMAPHORE_PAGE);
  halo_semaphore_t *dropped = NULL;
  int64_t start = halo_test_now_ns();
  halo_status_t status = halo_semaphore_create(client, 0, 0, &dropped);
  int64_t took_ns = halo_test_now_ns() - start;
  print_message("create: %s after %lld ms: %s\n",
                halo_status_code_name(halo_status_code(status)),
                (long long)(took_ns / MS), halo_status_message(status));
  assert_int_equal(atomic_load(&fake.drops), 1);
  assert_true(took_ns <= (REQUEST_TIMEOUT_MS + SLACK_MS) * MS);
  HALO_TEST_EXPECT_STATUS(status, HALO_STATUS_DEADLINE_EXCEEDED,
                          "fd channel request SEMAPHORE_PAGE");
  assert_null(dropped);
  for (int i = 0; i < 3; ++i) {
    halo_semaphore_t *next = NULL;
    HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &next));
    halo_semaphore_release(next);
  }
  // On a new connection (the one at connect, then one).
  assert_int_equal(atomic_load(&fake.connections), 2);
  halo_semaphore_release(first);
  halo_client_close(client);
  fake_stop(&fake);
}

// A call waiting for the socket behind another thread's request ends at its
// request timeout on the monotonic clock: the wall clock stepped back an
// hour as it began to wait neither holds it an hour longer nor (stepped
// forward) ends it early, and the message names the wait.
static void test_socket_wait_ignores_wall_clock_steps(void **state) {
  (void)state;
  fake_halod_t fake;
  fake_start(&fake);
  halo_client_options_t options = {.address = fake.address,
                                   .request_timeout_ms = REQUEST_TIMEOUT_MS};
  halo_client_t *client = NULL;
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &client));
  const int64_t steps_ns[] = {3600 * 1000 * MS, -3600 * 1000 * MS};
  for (size_t i = 0; i < sizeof(steps_ns) / sizeof(steps_ns[0]); ++i) {
    // Another thread's request halod does not answer holds the socket.
    assert_int_equal(pthread_mutex_lock(&client->call_mutex), 0);
    atomic_store(&realtime_skew_ns, steps_ns[i]);
    call_t call = {.client = client, .kind = CALL_PING, .skewed = true};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, call_main, &call), 0);
    int64_t start = halo_test_now_ns();
    while (!atomic_load(&call.done) &&
           halo_test_now_ns() - start < GIVE_UP_MS * MS) {
      halo_test_sleep_ms(5);
    }
    assert_int_equal(pthread_mutex_unlock(&client->call_mutex), 0);
    pthread_join(thread, NULL);
    atomic_store(&realtime_skew_ns, 0);
    print_message("ping, wall clock stepped %+lld s: %s after %lld ms: %s\n",
                  (long long)(-steps_ns[i] / (1000 * MS)),
                  halo_status_code_name(call.code),
                  (long long)(call.took_ns / MS), call.message);
    assert_int_equal(call.code, HALO_STATUS_DEADLINE_EXCEEDED);
    assert_true(call.took_ns >= (REQUEST_TIMEOUT_MS - 50) * MS);
    assert_true(call.took_ns <= (REQUEST_TIMEOUT_MS + SLACK_MS) * MS);
    assert_non_null(
        strstr(call.message, "other threads' requests on the socket"));
  }
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_client_close(client);
  fake_stop(&fake);
}

// A socket call waits for halod to take the records in the submission ring
// first. Where that wait uses up the call's timeout, the DEADLINE_EXCEEDED
// names it, even when the last record is taken just as the timeout ends
// and the socket itself is free. Here the ring is a header in this
// process's memory with a record outstanding (the fake has no ring), taken
// as the call's monotonic clock jumps past its deadline.
static void test_ring_drain_timeout_names_the_drain(void **state) {
  (void)state;
  fake_halod_t fake;
  fake_start(&fake);
  halo_client_options_t options = {.address = fake.address,
                                   .request_timeout_ms = REQUEST_TIMEOUT_MS};
  halo_client_t *client = NULL;
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &client));
  assert_null(client->ring.header);
  halo_ring_header_t *header = aligned_alloc(64, HALO_RING_HEADER_BYTES);
  assert_non_null(header);
  memset(header, 0, HALO_RING_HEADER_BYTES);
  atomic_store(&header->tail, 64);
  client->ring.header = header;
  call_t call = {.client = client, .kind = CALL_PING, .skewed = true};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, call_main, &call), 0);
  // The call sleeps in slices of at most a millisecond, waiting for the
  // record to be taken.
  halo_test_sleep_ms(REQUEST_TIMEOUT_MS / 2);
  assert_false(atomic_load(&call.done));
  atomic_store(&monotonic_skew_ns, 2 * REQUEST_TIMEOUT_MS * MS);
  atomic_store(&header->head, 64);
  int64_t start = halo_test_now_ns();
  while (!atomic_load(&call.done) &&
         halo_test_now_ns() - start < GIVE_UP_MS * MS) {
    halo_test_sleep_ms(5);
  }
  pthread_join(thread, NULL);
  atomic_store(&monotonic_skew_ns, 0);
  client->ring.header = NULL;
  free(header);
  print_message("ping: %s: %s\n", halo_status_code_name(call.code),
                call.message);
  assert_int_equal(call.code, HALO_STATUS_DEADLINE_EXCEEDED);
  assert_non_null(strstr(call.message, "submission ring"));
  assert_null(strstr(call.message, "socket, busy"));
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_client_close(client);
  fake_stop(&fake);
}

// The same for the session's AUTH, in halo_client_connect.
static void test_connect_honours_the_request_timeout(void **state) {
  (void)state;
  fake_halod_t fake;
  fake_start(&fake);
  create_t create = {.options = {.address = fake.address,
                                 .request_timeout_ms = REQUEST_TIMEOUT_MS}};
  create_while_stalled(&fake, HALO_FD_REQUEST_AUTH, &create);
  assert_null(create.client);
  fake_stop(&fake);
}

// The same for the fd channel's connect, in halo_client_connect: halod
// answered Hello, then its loop stopped before it accepted the fd channel
// connections waiting (more than its listen backlog of them), so the
// kernel holds a blocking connect() until halod accepts. Here the fake
// holds its accepts with a backlog of 0 and one connection waiting.
static void test_fd_channel_connect_honours_the_request_timeout(void **state) {
  (void)state;
  fake_halod_t fake;
  fake_start(&fake);
  atomic_store(&fake.hold_accepts, true);
  // Until the fd thread holds (it may be polling the listener, and would
  // accept the filler).
  assert_true(HALO_TEST_POLL(atomic_load(&fake.holding), 5000));
  assert_int_equal(listen(fake.fd_listener, 0), 0);
  int filler = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  assert_true(filler >= 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof(address.sun_path), "%s", fake.fd_path);
  assert_int_equal(
      connect(filler, (struct sockaddr *)&address, sizeof(address)), 0);
  create_t create = {.options = {.address = fake.address,
                                 .request_timeout_ms = REQUEST_TIMEOUT_MS}};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, create_main, &create), 0);
  int64_t start = halo_test_now_ns();
  while (!atomic_load(&create.done) &&
         halo_test_now_ns() - start < GIVE_UP_MS * MS) {
    halo_test_sleep_ms(5);
  }
  // Let a connect still waiting go: the fake accepts the filler (gone, so
  // it moves on), then the client's connection.
  close(filler);
  atomic_store(&fake.hold_accepts, false);
  pthread_join(thread, NULL);
  print_message("connect: %s after %lld ms: %s\n",
                halo_status_code_name(create.code),
                (long long)(create.took_ns / MS), create.message);
  halo_client_close(create.client);
  assert_int_equal(create.code, HALO_STATUS_DEADLINE_EXCEEDED);
  assert_true(create.took_ns <= (REQUEST_TIMEOUT_MS + SLACK_MS) * MS);
  assert_non_null(strstr(create.message, fake.fd_path));
  char timeout[32];
  snprintf(timeout, sizeof(timeout), "%d ms", REQUEST_TIMEOUT_MS);
  assert_non_null(strstr(create.message, timeout));
  // Accepting again, halod is reached.
  halo_client_options_t options = {.address = fake.address,
                                   .request_timeout_ms = REQUEST_TIMEOUT_MS};
  halo_client_t *client = NULL;
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &client));
  halo_client_close(client);
  fake_stop(&fake);
}

typedef struct connect_t {
  halo_client_options_t options;
  halo_client_t *client;
  halo_status_code_t code;
  char message[512];
  int64_t took_ns;
  _Atomic bool done;
} connect_t;

static void *connect_main(void *arg) {
  connect_t *connect = arg;
  int64_t start = halo_test_now_ns();
  halo_status_t status =
      halo_client_connect(&connect->options, &connect->client);
  connect->took_ns = halo_test_now_ns() - start;
  connect->code = halo_status_code(status);
  snprintf(connect->message, sizeof(connect->message), "%s",
           halo_status_message(status));
  halo_status_free(status);
  atomic_store(&connect->done, true);
  return NULL;
}

// Connecting to a halod that does not answer (stopped: the kernel accepts
// the connection, nng's handshake never completes) ends with the request
// timeout, not after nng's own 10 s.
static void test_connect_to_stopped_daemon(void **state) {
  halo_test_fixture_t *fixture = *state;
  assert_int_equal(kill(fixture->daemon.pid, SIGSTOP), 0);
  connect_t connect = {.options = {.address = fixture->daemon.listen_address,
                                   .request_timeout_ms = REQUEST_TIMEOUT_MS}};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, connect_main, &connect), 0);
  int64_t start = halo_test_now_ns();
  while (!atomic_load(&connect.done) &&
         halo_test_now_ns() - start < GIVE_UP_MS * MS) {
    halo_test_sleep_ms(5);
  }
  assert_int_equal(kill(fixture->daemon.pid, SIGCONT), 0);
  pthread_join(thread, NULL);
  print_message("connect: %s after %lld ms: %s\n",
                halo_status_code_name(connect.code),
                (long long)(connect.took_ns / MS), connect.message);
  halo_client_close(connect.client);
  assert_int_equal(connect.code, HALO_STATUS_DEADLINE_EXCEEDED);
  assert_true(connect.took_ns <= (REQUEST_TIMEOUT_MS + SLACK_MS) * MS);
  // Continued, halod is reached again.
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
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

// Fails unless |status| is INVALID_ARGUMENT saying "|name| must not be
// NULL" and naming no other argument (no "and"); frees it.
static void expect_null_named(halo_status_t status, const char *name,
                              const char *expression) {
  char expected[64];
  snprintf(expected, sizeof(expected), "%s must not be NULL", name);
  const char *message = halo_status_message(status);
  bool ok = halo_status_code(status) == HALO_STATUS_INVALID_ARGUMENT &&
            strstr(message, expected) && !strstr(message, " and ");
  print_message("%s: %s: %s\n", expression,
                halo_status_code_name(halo_status_code(status)), message);
  halo_status_free(status);
  if (!ok) {
    print_error("expected INVALID_ARGUMENT naming only '%s'\n", name);
    fail();
  }
}
#define EXPECT_NULL_NAMED(expr, name) expect_null_named((expr), (name), #expr)

// A NULL argument is INVALID_ARGUMENT naming that argument alone (not "a or
// b"), and the outputs are cleared before anything else happens, whichever
// argument was NULL.
static void test_null_arguments_are_named_and_outputs_cleared(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE,
                                         64, HALO_OBJECT_FLAG_EXPORTABLE,
                                         &buffer));

  uint32_t count = 7;
  EXPECT_NULL_NAMED(halo_client_device_count(NULL, &count), "client");
  assert_int_equal(count, 0);
  EXPECT_NULL_NAMED(halo_client_device_count(client, NULL), "out_count");
  halo_device_info_t info;
  memset(&info, 0xff, sizeof(info));
  EXPECT_NULL_NAMED(halo_client_device_info(NULL, 0, &info), "client");
  assert_int_equal(info.memory_bytes, 0);
  assert_int_equal(info.name[0], '\0');
  EXPECT_NULL_NAMED(halo_client_device_info(client, 0, NULL), "out_info");

  uint64_t value = 7;
  EXPECT_NULL_NAMED(halo_semaphore_query(NULL, &value), "semaphore");
  assert_int_equal(value, 0);
  EXPECT_NULL_NAMED(halo_semaphore_query(semaphore, NULL), "out_value");

  halo_token_t token;
  memset(&token, 0xff, sizeof(token));
  EXPECT_NULL_NAMED(halo_buffer_export(NULL, &token), "buffer");
  assert_int_equal(token.bytes[0], 0);
  EXPECT_NULL_NAMED(halo_buffer_export(buffer, NULL), "out_token");
  memset(&token, 0xff, sizeof(token));
  EXPECT_NULL_NAMED(halo_semaphore_export(NULL, &token), "semaphore");
  assert_int_equal(token.bytes[0], 0);
  EXPECT_NULL_NAMED(halo_semaphore_export(semaphore, NULL), "out_token");

  HALO_TEST_ASSERT_OK(halo_buffer_export(buffer, &token));
  halo_buffer_t *imported = (halo_buffer_t *)1;
  EXPECT_NULL_NAMED(halo_buffer_import(NULL, &token, &imported), "client");
  assert_null(imported);
  EXPECT_NULL_NAMED(halo_buffer_import(client, NULL, &imported), "token");
  halo_semaphore_t *imported_semaphore = (halo_semaphore_t *)1;
  EXPECT_NULL_NAMED(halo_semaphore_import(NULL, &token, &imported_semaphore),
                    "client");
  assert_null(imported_semaphore);
  EXPECT_NULL_NAMED(halo_semaphore_import(client, NULL, &imported_semaphore),
                    "token");

  halo_executable_t *executable = (halo_executable_t *)1;
  halo_executable_params_t params = {
      .format = HALO_EXECUTABLE_FORMAT_ELF, .data = "x", .size = 1};
  EXPECT_NULL_NAMED(halo_executable_create(NULL, 0, &params, &executable),
                    "client");
  assert_null(executable);
  EXPECT_NULL_NAMED(halo_executable_create(client, 0, NULL, &executable),
                    "params");
  EXPECT_NULL_NAMED(
      halo_executable_create_from_file(NULL, 0, "kernels.so", 0, &executable),
      "client");
  EXPECT_NULL_NAMED(
      halo_executable_create_from_file(client, 0, NULL, 0, &executable),
      "path");
  size_t parameter_count = 7;
  EXPECT_NULL_NAMED(
      halo_executable_parameters(NULL, "entry", NULL, 0, &parameter_count),
      "executable");
  assert_int_equal(parameter_count, 0);

  uint64_t values[1] = {1};
  EXPECT_NULL_NAMED(
      halo_semaphore_wait_list(1, NULL, values, HALO_WAIT_ALL, 0, NULL),
      "semaphores");
  EXPECT_NULL_NAMED(
      halo_semaphore_wait_list(1, &semaphore, NULL, HALO_WAIT_ALL, 0, NULL),
      "values");

  halo_buffer_release(buffer);
  halo_semaphore_release(semaphore);
  halo_client_close(client);
}

// Once the client knows halod is gone (its connection closed), every call
// that asks halod returns UNAVAILABLE, a queue_execute with
// $HALO_RING_ASYNC=1 too: it must not report success for a record that
// nobody will read (until the ring is full).
static void test_async_execute_after_daemon_death(void **state) {
  halo_test_fixture_t *fixture = *state;
  setenv("HALO_RING_ASYNC", "1", 1);
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  unsetenv("HALO_RING_ASYNC");
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &buffer));
  halo_command_buffer_t *command_buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_command_buffer_begin(
      client, 0, HALO_COMMAND_BUFFER_REUSABLE, 0, &command_buffer));
  uint32_t pattern = 7;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      command_buffer, halo_buffer_ref(buffer, 0, HALO_WHOLE_BUFFER), &pattern,
      sizeof(pattern)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(command_buffer));
  halo_semaphore_t *done = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, command_buffer, NULL, 0, NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, 1, 5000 * MS));

  halo_test_daemon_kill(&fixture->daemon);
  // The client learns of it from its socket: nng's pipe removal sets
  // |lost| (a call may fail UNAVAILABLE a moment before).
  assert_true(
      HALO_TEST_POLL(atomic_load(&client->lost), HALO_TEST_DEADLINE_MS));
  signal.value = 2;
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, command_buffer, NULL, 0, NULL, 0, &signal, 1),
      HALO_STATUS_UNAVAILABLE, "reconnect");
  HALO_TEST_EXPECT_STATUS(halo_semaphore_signal(done, 3),
                          HALO_STATUS_UNAVAILABLE, "reconnect");
  halo_semaphore_release(done);
  halo_command_buffer_release(command_buffer);
  halo_buffer_release(buffer);
  halo_client_close(client);
}

// A wait that polls (timeout 0) or waits less than its spin learns of
// halod's death too: UNAVAILABLE, not DEADLINE_EXCEEDED for ever (a
// consumer that waits in short slices, checking its own flag between them,
// would never see the daemon gone).
static void test_short_waits_see_daemon_death(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
  HALO_TEST_ASSERT_CODE(halo_semaphore_wait(semaphore, 1, 0),
                        HALO_STATUS_DEADLINE_EXCEEDED);
  halo_test_daemon_kill(&fixture->daemon);
  // A thread looks at halod's pidfd at most once a millisecond while the
  // connection stands (a poll costs no system call): within that, a poll
  // may still time out; from the first that sees the death on, each says
  // so.
  halo_status_t status = NULL;
  int64_t since = halo_test_now_ns();
  while ((status = halo_semaphore_wait(semaphore, 1, 0)) &&
         halo_status_code(status) == HALO_STATUS_DEADLINE_EXCEEDED &&
         halo_test_now_ns() - since < 100 * 1000000ll) {
    halo_status_free(status);
  }
  HALO_TEST_EXPECT_STATUS(status, HALO_STATUS_UNAVAILABLE, "exited");
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(semaphore, 1, 0),
                          HALO_STATUS_UNAVAILABLE, "exited");
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(semaphore, 1, 1000),
                          HALO_STATUS_UNAVAILABLE, "exited");
  uint64_t value = 1;
  size_t index = 7;
  HALO_TEST_EXPECT_STATUS(
      halo_semaphore_wait_list(1, &semaphore, &value, HALO_WAIT_ANY, 0, &index),
      HALO_STATUS_UNAVAILABLE, "exited");
  // A value reached is still reached.
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(semaphore, 0, 0));
  halo_semaphore_release(semaphore);
  halo_client_close(client);
}

// After its session is lost (its trust domain's device worker killed),
// the calls that ask halod fail SESSION_LOST, and those libhalo serves
// locally still work, as include/halo/status.h says: a host-visible
// buffer's contents (results of work done before the loss) are read back,
// and a command buffer is recorded, until halo_command_buffer_end asks
// halod.
static void test_local_calls_work_after_session_loss(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_buffer_t *results = NULL;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE, 64, 0, &results));
  const char written[] = "computed before the loss";
  HALO_TEST_ASSERT_OK(halo_buffer_write(results, 0, written, sizeof(written)));
  char domain[32];
  snprintf(domain, sizeof(domain), "uid:%u", (unsigned)getuid());
  pid_t worker = halo_test_admin_worker_pid(&fixture->daemon, domain);
  assert_true(worker > 0);
  assert_int_equal(kill(worker, SIGKILL), 0);
  halo_status_t status = NULL;
  int64_t since = halo_test_now_ns();
  while ((status = halo_client_ping(client)) == NULL &&
         halo_test_now_ns() - since < GIVE_UP_MS * MS) {
    halo_test_sleep_ms(5);
  }
  HALO_TEST_EXPECT_STATUS(status, HALO_STATUS_SESSION_LOST, "");
  halo_buffer_t *more = NULL;
  HALO_TEST_EXPECT_STATUS(
      halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE, 64, 0, &more),
      HALO_STATUS_SESSION_LOST, "");
  // Local: the shared memory stays mapped until the buffer is released.
  char read[sizeof(written)] = "";
  HALO_TEST_ASSERT_OK(halo_buffer_read(results, 0, read, sizeof(read)));
  assert_string_equal(read, written);
  assert_memory_equal(halo_buffer_host_pointer(results), written,
                      sizeof(written));
  HALO_TEST_ASSERT_OK(halo_buffer_write(results, 0, "x", 1));
  // Recording is local; its end asks halod.
  halo_command_buffer_t *command_buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_command_buffer_begin(
      client, 0, HALO_COMMAND_BUFFER_ONE_SHOT, 0, &command_buffer));
  uint32_t pattern = 7;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(command_buffer,
                                               halo_buffer_ref(results, 0, 16),
                                               &pattern, sizeof(pattern)));
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_end(command_buffer),
                          HALO_STATUS_SESSION_LOST, "");
  halo_command_buffer_release(command_buffer);
  halo_buffer_release(results);
  halo_client_close(client);
}

// halod's max-message-bytes (here 1 MiB, a quarter of the default) bounds
// every request libhalo sends, as halod's Hello states it: a buffer write
// goes in chunks that fit it, with their framing; a request that cannot fit
// (a recording's end()) is refused before it is sent, naming the request,
// its size, the limit and the setting. Either way the session goes on: a
// request above the limit would make nng drop the connection, and with it
// the session and everything it holds.
static void test_requests_fit_the_daemons_message_limit(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  enum { BYTES = 4 << 20 };
  uint8_t *written = malloc(BYTES);
  uint8_t *read = malloc(BYTES);
  assert_non_null(written);
  assert_non_null(read);
  for (size_t i = 0; i < BYTES; ++i) written[i] = (uint8_t)(i * 7 + i / 4093);
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, BYTES, 0, &buffer));
  HALO_TEST_ASSERT_OK(halo_buffer_write(buffer, 0, written, BYTES));
  HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, 0, read, BYTES));
  assert_memory_equal(read, written, BYTES);

  // 16 updates of HALO_MAX_UPDATE_BYTES: 1 MiB of inline bytes, within the
  // recording's own bound, plus the commands' framing.
  halo_command_buffer_t *command_buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_command_buffer_begin(
      client, 0, HALO_COMMAND_BUFFER_ONE_SHOT, 0, &command_buffer));
  for (uint64_t i = 0; i < 16; ++i) {
    HALO_TEST_ASSERT_OK(halo_command_buffer_update(
        command_buffer, written, HALO_MAX_UPDATE_BYTES,
        halo_buffer_ref(buffer, i * HALO_MAX_UPDATE_BYTES,
                        HALO_MAX_UPDATE_BYTES)));
  }
  const char *const named[] = {"command_buffer_create", "bytes", "1048576",
                               "max-message-bytes", NULL};
  halo_test_expect_status_all(halo_command_buffer_end(command_buffer),
                              HALO_STATUS_RESOURCE_EXHAUSTED, named,
                              "end() of a recording above the limit");
  halo_command_buffer_release(command_buffer);

  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, BYTES - 64, read, 64));
  assert_memory_equal(read, written + BYTES - 64, 64);
  halo_buffer_release(buffer);
  halo_client_close(client);
  free(written);
  free(read);
}

// Above halod's default of 4 MiB, a halod that accepts more gets more: a
// recording of some 5 MiB (65,536 no-op dispatches of `add`, whose
// bindings' offsets and lengths take 5 bytes each) ends. libhalo refused
// every request above 4 MiB before, whatever halod took.
static void test_larger_messages_where_halod_takes_them(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *kernels = halo_test_load_kernels(client);
  halo_command_buffer_t *command_buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_command_buffer_begin(
      client, 0, HALO_COMMAND_BUFFER_ONE_SHOT, 3, &command_buffer));
  uint32_t n = 64;
  halo_dispatch_arg_t args[4];
  for (uint32_t i = 0; i < 3; ++i) {
    args[i] = (halo_dispatch_arg_t){
        .kind = HALO_DISPATCH_ARG_BUFFER,
        .ref = halo_binding_ref(i, UINT64_C(1) << 30, UINT64_C(1) << 30)};
  }
  args[3] = (halo_dispatch_arg_t){
      .kind = HALO_DISPATCH_ARG_CONSTANT, .data = &n, .size = sizeof(n)};
  halo_dispatch_params_t dispatch = {.executable = kernels,
                                     .entry = "add",
                                     .grid = {0, 1, 1},
                                     .block = {1, 1, 1},
                                     .args = args,
                                     .arg_count = 4};
  for (int i = 0; i < HALO_MAX_COMMANDS; ++i) {
    HALO_TEST_ASSERT_OK(
        halo_command_buffer_dispatch(command_buffer, &dispatch));
  }
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(command_buffer));
  halo_command_buffer_release(command_buffer);
  halo_executable_release(kernels);
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_client_close(client);
}

// A write or read of 0 bytes may pass NULL data (halo.h), on either kind of
// buffer: nothing is copied (memcpy's arguments must not be NULL even for
// 0 bytes; the ASan/UBSan build fails on it).
static void test_empty_transfers_take_null_data(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_memory_type_t types[] = {HALO_MEMORY_HOST_VISIBLE, HALO_MEMORY_DEVICE};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); ++i) {
    halo_buffer_t *buffer = NULL;
    HALO_TEST_ASSERT_OK(
        halo_buffer_create(client, 0, types[i], 64, 0, &buffer));
    HALO_TEST_ASSERT_OK(halo_buffer_write(buffer, 0, NULL, 0));
    HALO_TEST_ASSERT_OK(halo_buffer_write(buffer, 64, NULL, 0));
    HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, 0, NULL, 0));
    HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, 64, NULL, 0));
    halo_buffer_release(buffer);
  }
  halo_client_close(client);
}

// One execution waits on and signals at most HALO_MAX_EXECUTE_SEMAPHORES
// semaphore values in all (halod's bound): libhalo refuses more before
// sending, naming the counts and the limit; the bound itself passes.
static void test_execute_semaphores_are_bounded(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &buffer));
  halo_command_buffer_t *command_buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_command_buffer_begin(
      client, 0, HALO_COMMAND_BUFFER_REUSABLE, 0, &command_buffer));
  uint32_t pattern = 7;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      command_buffer, halo_buffer_ref(buffer, 0, HALO_WHOLE_BUFFER), &pattern,
      sizeof(pattern)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(command_buffer));
  halo_semaphore_t *ready = NULL;
  halo_semaphore_t *done[2] = {NULL, NULL};
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 1, 0, &ready));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done[0]));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done[1]));
  enum { WAITS = HALO_MAX_EXECUTE_SEMAPHORES - 2 };
  halo_semaphore_value_t waits[WAITS + 1];
  for (size_t i = 0; i < WAITS + 1; ++i) {
    waits[i] = (halo_semaphore_value_t){ready, 1};
  }
  halo_semaphore_value_t signals[2] = {{done[0], 1}, {done[1], 1}};
  const char *const named[] = {"1023 waits", "2 signals", "1025",
                               "HALO_MAX_EXECUTE_SEMAPHORES (1024)", NULL};
  halo_test_expect_status_all(halo_queue_execute(NULL, command_buffer, NULL, 0,
                                                 waits, WAITS + 1, signals, 2),
                              HALO_STATUS_INVALID_ARGUMENT, named,
                              "an execute past the bound");
  HALO_TEST_ASSERT_OK(halo_queue_execute(NULL, command_buffer, NULL, 0, waits,
                                         WAITS, signals, 2));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done[1], 1, 5000 * MS));
  halo_semaphore_release(done[1]);
  halo_semaphore_release(done[0]);
  halo_semaphore_release(ready);
  halo_command_buffer_release(command_buffer);
  halo_buffer_release(buffer);
  halo_client_close(client);
}

// A path that names no file to load (a directory, or a path through a
// file) is the caller's mistake: INVALID_ARGUMENT naming the path, not
// INTERNAL.
static void test_executable_path_must_name_a_file(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *executable = NULL;
  HALO_TEST_EXPECT_STATUS(
      halo_executable_create_from_file(client, 0, fixture->daemon.dir,
                                       HALO_EXECUTABLE_FORMAT_ELF, &executable),
      HALO_STATUS_INVALID_ARGUMENT, fixture->daemon.dir);
  char through_file[192];
  snprintf(through_file, sizeof(through_file), "%s/x.so",
           halo_test_kernels_path());
  HALO_TEST_EXPECT_STATUS(
      halo_executable_create_from_file(client, 0, through_file, 0, &executable),
      HALO_STATUS_INVALID_ARGUMENT, through_file);
  assert_null(executable);
  halo_client_close(client);
}

// A daemon without a client of the fixture's: each test connects its own.
static int setup(void **state) {
  return halo_test_fixture_setup_with(state, NULL, false);
}

// The same, halod accepting messages of at most 1 MiB.
static int setup_small_messages(void **state) {
  static const char *const args[] = {"--max-message-bytes", "1M", NULL};
  return halo_test_fixture_setup_with(state, args, false);
}

static int setup_large_messages(void **state) {
  static const char *const args[] = {"--max-message-bytes", "8M", NULL};
  return halo_test_fixture_setup_with(state, args, false);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name) \
  cmocka_unit_test_setup_teardown(name, setup, halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_queued_socket_calls_honour_the_request_timeout),
      T(test_ring_calls_honour_the_request_timeout),
      T(test_negative_request_timeout_is_invalid),
      T(test_connect_to_stopped_daemon),
      T(test_null_arguments_are_named_and_outputs_cleared),
      T(test_async_execute_after_daemon_death),
      T(test_short_waits_see_daemon_death),
      T(test_local_calls_work_after_session_loss),
      T(test_empty_transfers_take_null_data),
      T(test_execute_semaphores_are_bounded),
      T(test_executable_path_must_name_a_file),
      cmocka_unit_test_setup_teardown(
          test_requests_fit_the_daemons_message_limit, setup_small_messages,
          halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(
          test_larger_messages_where_halod_takes_them, setup_large_messages,
          halo_test_fixture_teardown),
      cmocka_unit_test(test_fd_channel_requests_honour_the_request_timeout),
      cmocka_unit_test(test_fd_channel_outlives_a_dropped_reply),
      cmocka_unit_test(test_socket_wait_ignores_wall_clock_steps),
      cmocka_unit_test(test_ring_drain_timeout_names_the_drain),
      cmocka_unit_test(test_connect_honours_the_request_timeout),
      cmocka_unit_test(test_fd_channel_connect_honours_the_request_timeout),
  };
#undef T
  return cmocka_run_group_tests_name("client_contract", tests, NULL, NULL);
}
