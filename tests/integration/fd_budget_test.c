// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of halod's descriptor budget (issue 14): a session that
// creates exportable semaphores (a memfd page each) until refused gets
// RESOURCE_EXHAUSTED naming session-fds, or fd-reserve once halod nears
// RLIMIT_NOFILE, while another client connects and works throughout.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

#define FLOOD_MAX 2000  // bound on the semaphores a flood creates

static int start_daemon(void **state, const char *const *args) {
  return halo_test_fixture_setup_with(state, args, true);
}

// Another client connects, creates a semaphore, signals and reads it.
static void expect_other_client_works(halo_test_fixture_t *fixture) {
  halo_client_t *other = halo_test_connect(&fixture->daemon, 10000);
  HALO_TEST_ASSERT_OK(halo_client_ping(other));
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(other, 0, 0, &semaphore));
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 7));
  uint64_t value = 0;
  HALO_TEST_ASSERT_OK(halo_semaphore_query(semaphore, &value));
  assert_int_equal(value, 7);
  halo_semaphore_release(semaphore);
  halo_client_close(other);
}

// Creates exportable semaphores until refused (at most FLOOD_MAX), checking
// that another client works every 50; returns how many were created.
static uint32_t flood(halo_test_fixture_t *fixture,
                      halo_semaphore_t **semaphores, const char *setting) {
  uint32_t count = 0;
  for (; count < FLOOD_MAX; ++count) {
    halo_status_t status = halo_semaphore_create(
        fixture->client, 0, HALO_OBJECT_FLAG_EXPORTABLE, &semaphores[count]);
    if (status) {
      HALO_TEST_EXPECT_STATUS(status, HALO_STATUS_RESOURCE_EXHAUSTED, setting);
      break;
    }
    if (count % 50 == 0) expect_other_client_works(fixture);
  }
  assert_true(count < FLOOD_MAX);
  return count;
}

static void test_session_fds(void **state) {
  const char *args[] = {"--session-fds", "100", NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t **semaphores = calloc(FLOOD_MAX, sizeof(*semaphores));
  assert_non_null(semaphores);
  int64_t start = halo_test_now_ns();
  uint32_t count = flood(fixture, semaphores, "session-fds");
  printf("session-fds 100: %u exportable semaphores, refused after %.1f ms\n",
         count, (double)(halo_test_now_ns() - start) / HALO_TEST_MS);
  assert_int_equal(count, 100);
  expect_other_client_works(fixture);
  // A page released is a descriptor back in the budget.
  halo_semaphore_release(semaphores[0]);
  HALO_TEST_ASSERT_OK(halo_semaphore_create(
      fixture->client, 0, HALO_OBJECT_FLAG_EXPORTABLE, &semaphores[0]));
  for (uint32_t i = 0; i < count; ++i) halo_semaphore_release(semaphores[i]);
  free(semaphores);
}

static void test_fd_reserve(void **state) {
  // halod raises its soft limit to the hard one (inherited from us); a
  // reserve of all but 200 descriptors leaves pages fewer than that.
  struct rlimit limit;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max == RLIM_INFINITY || limit.rlim_max < 1024 ||
      limit.rlim_max - 200 > (1u << 30)) {
    skip();
  }
  char reserve[32];
  snprintf(reserve, sizeof(reserve), "%llu",
           (unsigned long long)limit.rlim_max - 200);
  const char *args[] = {"--fd-reserve", reserve, "--session-fds", "1000", NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t **semaphores = calloc(FLOOD_MAX, sizeof(*semaphores));
  assert_non_null(semaphores);
  uint32_t count = flood(fixture, semaphores, "fd-reserve");
  printf("fd-reserve: %u exportable semaphores before refusal\n", count);
  assert_true(count > 0);
  // The reserve holds: a new client connects and is served, though halod
  // has no page to spare it until the flood's pages go.
  halo_client_t *other = halo_test_connect(&fixture->daemon, 10000);
  HALO_TEST_ASSERT_OK(halo_client_ping(other));
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_EXPECT_STATUS(halo_semaphore_create(other, 0, 0, &semaphore),
                          HALO_STATUS_RESOURCE_EXHAUSTED, "fd-reserve");
  halo_client_close(other);
  for (uint32_t i = 0; i < count; ++i) halo_semaphore_release(semaphores[i]);
  expect_other_client_works(fixture);
  free(semaphores);
}

#define IDLE_CONNECTIONS 300
#define IDLE_LIMIT "50"
#define IDLE_AUTH_MS 500

// In a child running as nobody: opens IDLE_CONNECTIONS connections to the fd
// channel that send nothing, then waits (at most 5 s) until halod has
// closed every one: those over the limit at once with RESOURCE_EXHAUSTED
// naming it, the others after fd-channel-auth-ms. Exits 0 if so.
static void idle_flood(const char *path) {
  static int fds[IDLE_CONNECTIONS];
  static struct pollfd polls[IDLE_CONNECTIONS];
  int64_t start = halo_test_now_ns();
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof(address.sun_path)) _exit(6);
  memcpy(address.sun_path, path, strlen(path) + 1);
  for (int i = 0; i < IDLE_CONNECTIONS; ++i) {
    fds[i] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fds[i] < 0 ||
        connect(fds[i], (struct sockaddr *)&address, sizeof(address)) != 0) {
      perror("idle flood: connect");
      _exit(2);
    }
    polls[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
  }
  int refused = 0, timed_out = 0, early = 0;
  int64_t deadline = start + 5000 * HALO_TEST_MS;
  while (refused + timed_out + early < IDLE_CONNECTIONS &&
         halo_test_now_ns() < deadline) {
    if (poll(polls, IDLE_CONNECTIONS, 100) < 0) _exit(3);
    for (int i = 0; i < IDLE_CONNECTIONS; ++i) {
      if (polls[i].fd < 0 || !polls[i].revents) continue;
      halo_fd_reply_t reply;
      ssize_t n = recv(fds[i], &reply, sizeof(reply), 0);
      if (n == (ssize_t)sizeof(reply)) {
        if (reply.code == HALO_STATUS_RESOURCE_EXHAUSTED &&
            strstr(reply.message, "fd-channel-unauthenticated")) {
          ++refused;
        } else {
          fprintf(stderr, "idle flood: unexpected reply %d '%s'\n", reply.code,
                  reply.message);
          _exit(4);
        }
      } else if (n <= 0) {
        bool late =
            halo_test_now_ns() - start >= (IDLE_AUTH_MS - 50) * HALO_TEST_MS;
        late ? ++timed_out : ++early;
      } else {
        continue;
      }
      close(fds[i]);
      polls[i].fd = -1;
    }
  }
  printf(
      "idle flood: %d refused at once, %d closed after fd-channel-auth-ms, "
      "%d closed early, all within %.0f ms\n",
      refused, timed_out, early,
      (double)(halo_test_now_ns() - start) / HALO_TEST_MS);
  fflush(stdout);
  bool ok =
      refused + timed_out == IDLE_CONNECTIONS && early == 0 && timed_out == 50;
  _exit(ok ? 0 : 1);
}

// Idle connections of one uid fill its fd-channel-unauthenticated and are
// closed after fd-channel-auth-ms; clients of another uid work meanwhile.
static void test_fd_channel_idle_flood(void **state) {
  if (geteuid() != 0) skip();  // the flood runs as another uid
  const char *args[] = {"--fd-channel-unauthenticated", IDLE_LIMIT,
                        "--fd-channel-auth-ms", "500", NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  assert_int_equal(chmod(fixture->daemon.dir, 0755), 0);
  assert_int_equal(chmod(fixture->daemon.fd_channel_path, 0777), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(5);
    idle_flood(fixture->daemon.fd_channel_path);
  }
  // While the flood holds its connections, new clients connect and work.
  int rounds = 0;
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    expect_other_client_works(fixture);
    ++rounds;
    halo_test_sleep_ms(20);
  }
  printf("idle flood: another client worked %d times meanwhile\n", rounds);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_true(rounds > 1);
  expect_other_client_works(fixture);
}

// A client whose fd channel is refused (its uid holds
// fd-channel-unauthenticated idle connections) learns why: connecting fails
// with RESOURCE_EXHAUSTED naming the setting. Before, halod closed the
// refused connection with the client's AUTH unread, which reset it, and the
// client saw UNAVAILABLE "fd channel recvmsg: Connection reset by peer".
static void test_fd_channel_refusal_reaches_the_client(void **state) {
  const char *args[] = {"--fd-channel-unauthenticated", "2",
                        "--fd-channel-auth-ms", "20000", NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  int idle[2];
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  strcpy(address.sun_path, fixture->daemon.fd_channel_path);
  for (int i = 0; i < 2; ++i) {
    idle[i] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    assert_int_equal(
        connect(idle[i], (struct sockaddr *)&address, sizeof(address)), 0);
  }
  halo_test_sleep_ms(200);  // halod accepted them
  for (int round = 0; round < 8; ++round) {
    halo_client_options_t options = {.address = fixture->daemon.listen_address,
                                     .request_timeout_ms = 5000};
    halo_client_t *client = NULL;
    halo_status_t status = halo_client_connect(&options, &client);
    if (round == 0) {
      print_message("connect: %s\n",
                    status ? halo_status_message(status) : "OK");
    }
    HALO_TEST_EXPECT_STATUS(status, HALO_STATUS_RESOURCE_EXHAUSTED,
                            "fd-channel-unauthenticated");
    assert_null(client);
  }
  for (int i = 0; i < 2; ++i) close(idle[i]);
  // Their places free, a client connects.
  assert_true(HALO_TEST_POLL(({
                               halo_client_options_t options = {
                                   .address = fixture->daemon.listen_address};
                               halo_client_t *client = NULL;
                               halo_status_t status =
                                   halo_client_connect(&options, &client);
                               halo_status_free(status);
                               if (client) halo_client_close(client);
                               status == NULL;
                             }),
                             HALO_TEST_DEADLINE_MS));
}

#define UID_LIMIT 20
#define UID_CONNECTIONS 40
#define UID_REFUSED_OPEN 16  // HALOD_UID_REFUSED_OPEN (daemon/session.c)

// In a child running as nobody: opens UID_CONNECTIONS client-socket
// connections (halod's pipes), waits for halod to have seen them, then sends
// a Hello on each still open. Exits 0 if UID_LIMIT got sessions, the next
// UID_REFUSED_OPEN got RESOURCE_EXHAUSTED naming uid-connections and the
// rest were closed before they sent anything; holds them 500 ms more.
static void uid_flood(const char *path) {
  static int fds[UID_CONNECTIONS];
  int64_t start = halo_test_now_ns();
  for (int i = 0; i < UID_CONNECTIONS; ++i)
    fds[i] = halo_test_ipc_connect(path);
  halo_test_sleep_ms(300);  // halod handles the pipes' arrival
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Hello hello = HALO__WIRE__HELLO__INIT;
  hello.protocol_version = HALO_PROTOCOL_VERSION;
  hello.client_name = "uid-flood";
  request.body_case = HALO__WIRE__REQUEST__BODY_HELLO;
  request.hello = &hello;
  uint8_t body[256];
  size_t length = halo__wire__request__get_packed_size(&request);
  if (length > sizeof(body)) _exit(2);
  halo__wire__request__pack(&request, body);
  int accepted = 0, refused = 0, closed = 0;
  for (int i = 0; i < UID_CONNECTIONS; ++i) {
    if (halo_test_ipc_wait_closed(fds[i], 10)) {
      ++closed;
      continue;
    }
    halo_wire_response_t *response =
        halo_test_ipc_call(fds[i], 1, body, length);
    if (response->code == HALO_STATUS_OK) {
      ++accepted;
    } else if (response->code == HALO_STATUS_RESOURCE_EXHAUSTED &&
               response->message &&
               strstr(response->message, "uid-connections")) {
      ++refused;
    } else {
      fprintf(stderr, "uid flood: unexpected reply %d '%s'\n", response->code,
              response->message ? response->message : "");
      _exit(3);
    }
    halo__wire__response__free_unpacked(response, NULL);
  }
  printf(
      "uid flood: %d sessions, %d refused naming uid-connections, %d "
      "closed, in %.0f ms\n",
      accepted, refused, closed,
      (double)(halo_test_now_ns() - start) / HALO_TEST_MS);
  fflush(stdout);
  halo_test_sleep_ms(500);  // the other uid keeps working meanwhile
  bool ok = accepted == UID_LIMIT && refused == UID_REFUSED_OPEN &&
            closed == UID_CONNECTIONS - UID_LIMIT - UID_REFUSED_OPEN;
  _exit(ok ? 0 : 1);
}

// One uid opening more client connections than uid-connections gets a clear
// error, then closed connections; clients of another uid work meanwhile, and
// the flooding uid may connect again once its connections are gone.
static void test_uid_connections_flood(void **state) {
  if (geteuid() != 0) skip();  // the flood runs as another uid
  char limit[16];
  snprintf(limit, sizeof(limit), "%d", UID_LIMIT);
  const char *args[] = {"--uid-connections", limit, NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  assert_int_equal(chmod(fixture->daemon.dir, 0755), 0);
  assert_int_equal(chmod(fixture->daemon.socket_path, 0777), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(5);
    uid_flood(fixture->daemon.socket_path);
  }
  int rounds = 0;
  int status = 0;
  int64_t deadline = halo_test_now_ns() + 10000 * HALO_TEST_MS;
  while (waitpid(child, &status, WNOHANG) == 0) {
    assert_true(halo_test_now_ns() < deadline);
    expect_other_client_works(fixture);
    ++rounds;
    halo_test_sleep_ms(20);
  }
  printf("uid flood: another client worked %d times meanwhile\n", rounds);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_true(rounds > 1);
  // The flood's sessions end with its process: its uid's count drops.
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1, 5000));
  expect_other_client_works(fixture);
}

#define CHURN_LIMIT 8
#define CHURN_CONNECTIONS 300
#define CHURN_ROUNDS 20

// Connects to |path| and sends nng's greeting and |frame| (a Hello) in one
// write, not waiting for halod's greeting, as a client in a hurry does.
static int churn_connect(const char *path, const void *frame, size_t length) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct timeval timeout = {.tv_sec = 5};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  memcpy(address.sun_path, path, strlen(path) + 1);
  uint8_t bytes[256] = {0, 'S', 'P', 0, 0, 0x30, 0, 0};  // req0's greeting
  memcpy(bytes + 8, frame, length);
  if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof(address)) ||
      send(fd, bytes, 8 + length, MSG_NOSIGNAL) != (ssize_t)(8 + length)) {
    perror("churn: connect");
    _exit(2);
  }
  return fd;
}

static bool churn_read(int fd, void *data, size_t length) {
  for (size_t got = 0; got < length;) {
    ssize_t n = recv(fd, (char *)data + got, length - got, 0);
    if (n <= 0) return false;
    got += (size_t)n;
  }
  return true;
}

// The answer to the Hello on |fd|: 1 a session, 0 refused naming
// uid-connections, -1 closed unanswered.
static int churn_reply(int fd) {
  uint8_t greeting[8], header[9], body[1024];
  if (!churn_read(fd, greeting, sizeof(greeting)) ||
      !churn_read(fd, header, sizeof(header))) {
    return -1;
  }
  uint64_t length = 0;
  for (int i = 1; i < 9; ++i) length = (length << 8) | header[i];
  if (length < 4 || length > sizeof(body) || !churn_read(fd, body, length)) {
    _exit(3);
  }
  halo_wire_response_t *response =
      halo__wire__response__unpack(NULL, length - 4, body + 4);
  if (!response) _exit(3);
  int result = response->code == HALO_STATUS_OK ? 1
               : response->code == HALO_STATUS_RESOURCE_EXHAUSTED &&
                       response->message &&
                       strstr(response->message, "uid-connections")
                   ? 0
                   : -2;
  if (result == -2) {
    fprintf(stderr, "churn: unexpected reply %d '%s'\n", response->code,
            response->message ? response->message : "");
    _exit(4);
  }
  halo__wire__response__free_unpacked(response, NULL);
  return result;
}

// In a child running as nobody: opens CHURN_CONNECTIONS client-socket
// connections, each sending its Hello with nng's greeting, so that Hellos
// are arriving while halod refuses the connections past uid-connections
// and 16 more. Exits 0 if CHURN_LIMIT got sessions, UID_REFUSED_OPEN were
// refused naming uid-connections and the others closed; its connections
// close with it.
static void churn(const char *path) {
  static int fds[CHURN_CONNECTIONS];
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Hello hello = HALO__WIRE__HELLO__INIT;
  hello.protocol_version = HALO_PROTOCOL_VERSION;
  hello.client_name = "churn";
  request.body_case = HALO__WIRE__REQUEST__BODY_HELLO;
  request.hello = &hello;
  size_t length = halo__wire__request__get_packed_size(&request);
  uint8_t frame[128] = {1};  // nng's frame: 1, length, request id, body
  if (13 + length > sizeof(frame)) _exit(2);
  for (int i = 0; i < 8; ++i)
    frame[1 + i] = (uint8_t)((length + 4) >> (56 - 8 * i));
  frame[9] = 0x80;
  frame[12] = 1;
  halo__wire__request__pack(&request, frame + 13);
  for (int i = 0; i < CHURN_CONNECTIONS; ++i) {
    fds[i] = churn_connect(path, frame, 13 + length);
  }
  int answers[3] = {0};  // closed, refused, sessions
  for (int i = 0; i < CHURN_CONNECTIONS; ++i)
    ++answers[churn_reply(fds[i]) + 1];
  bool ok = answers[2] == CHURN_LIMIT && answers[1] == UID_REFUSED_OPEN &&
            answers[0] == CHURN_CONNECTIONS - CHURN_LIMIT - UID_REFUSED_OPEN;
  if (!ok) {
    fprintf(stderr, "churn: %d sessions, %d refused, %d closed\n", answers[2],
            answers[1], answers[0]);
  }
  _exit(ok ? 0 : 1);
}

// A uid's clients keep connecting past uid-connections, each sending Hello
// at once, and exit. halod closes the connections past the limit and 16 more
// as they arrive: before, it closed them once its loop saw them, by then
// often with a Hello arriving, which nng 1.5.2 loses, and from then on nng
// finished closing no connection: every session stayed for good (the uid
// locked out). Each round the child's sessions must end with it, and the
// next round gets its sessions again.
static void test_uid_connections_churn(void **state) {
  if (geteuid() != 0) skip();  // the clients run as another uid
  char limit[16];
  snprintf(limit, sizeof(limit), "%d", CHURN_LIMIT);
  const char *args[] = {"--uid-connections", limit, NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  assert_int_equal(chmod(fixture->daemon.dir, 0755), 0);
  assert_int_equal(chmod(fixture->daemon.socket_path, 0777), 0);
  int64_t start = halo_test_now_ns();
  for (int round = 0; round < CHURN_ROUNDS; ++round) {
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(5);
      churn(fixture->daemon.socket_path);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fail_msg(
          "round %d: the child's connections were not answered as "
          "expected (status 0x%x)",
          round, status);
    }
    if (!halo_test_admin_expect_session_count(&fixture->daemon, 1, 5000)) {
      fail_msg("round %d: the sessions of the exited child stay", round);
    }
  }
  printf("uid churn: %d rounds of %d connections in %.0f ms\n", CHURN_ROUNDS,
         CHURN_CONNECTIONS,
         (double)(halo_test_now_ns() - start) / HALO_TEST_MS);
  expect_other_client_works(fixture);
}

// What libhalo says past its uid's limit: RESOURCE_EXHAUSTED naming
// uid-connections while the uid has fewer than 16 refused connections open;
// past those halod closes the connection as it arrives, before it reads the
// Hello (closing it later could lose a message arriving on it, in nng 1.5.2),
// and libhalo's UNAVAILABLE says so, naming the settings. Once the
// connections go, the uid connects again.
static void test_uid_connections_refusal_message(void **state) {
  enum { LIMIT = 4 };
  const char *args[] = {"--uid-connections", "4", NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  int fds[LIMIT - 1 + UID_REFUSED_OPEN];
  // The fixture's client holds one of the uid's LIMIT.
  for (int i = 0; i < LIMIT - 1; ++i)
    fds[i] = halo_test_ipc_open_session(fixture->daemon.socket_path);
  halo_client_options_t options = {.address = fixture->daemon.listen_address};
  halo_client_t *client = NULL;
  HALO_TEST_EXPECT_STATUS(halo_client_connect(&options, &client),
                          HALO_STATUS_RESOURCE_EXHAUSTED, "uid-connections");
  for (int i = LIMIT - 1; i < LIMIT - 1 + UID_REFUSED_OPEN; ++i)
    fds[i] = halo_test_ipc_connect(fixture->daemon.socket_path);
  assert_true(halo_test_admin_expect_session_count(
      &fixture->daemon, LIMIT + UID_REFUSED_OPEN, 5000));
  const char *named[] = {"closed the connection before answering Hello",
                         "uid-connections", NULL};
  halo_test_expect_status_all(halo_client_connect(&options, &client),
                              HALO_STATUS_UNAVAILABLE, named,
                              "connect past uid-connections and 16 more");
  for (int i = 0; i < LIMIT - 1 + UID_REFUSED_OPEN; ++i) close(fds[i]);
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1, 5000));
  expect_other_client_works(fixture);
}

// Connections that complete no Hello are closed after hello-timeout-ms;
// a client that said Hello stays; other clients work meanwhile.
static void test_hello_timeout(void **state) {
  enum { IDLE = 50 };
  const char *args[] = {"--hello-timeout-ms", "300", NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  int fds[IDLE];
  for (int i = 0; i < IDLE; ++i)
    fds[i] = halo_test_ipc_connect(fixture->daemon.socket_path);
  assert_true(
      halo_test_admin_expect_session_count(&fixture->daemon, 1 + IDLE, 5000));
  expect_other_client_works(fixture);
  int64_t start = halo_test_now_ns();
  for (int i = 0; i < IDLE; ++i) {
    assert_true(halo_test_ipc_wait_closed(fds[i], 5000));
    close(fds[i]);
  }
  printf("hello-timeout-ms 300: %d idle connections closed within %.0f ms\n",
         IDLE, (double)(halo_test_now_ns() - start) / HALO_TEST_MS);
  // The fixture's client said Hello long ago and still works.
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1, 5000));
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->client));
  expect_other_client_works(fixture);
}

// Past connections (in all, whatever the uid) a new connection is closed
// as it arrives; the clients already connected keep working, and once
// connections go a new one is served again.
static void test_connections_limit(void **state) {
  enum { LIMIT = 8 };
  const char *args[] = {"--connections", "8", NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  int fds[LIMIT + 4];
  // The fixture's client holds one of the LIMIT.
  for (int i = 0; i < LIMIT - 1; ++i)
    fds[i] = halo_test_ipc_connect(fixture->daemon.socket_path);
  assert_true(
      halo_test_admin_expect_session_count(&fixture->daemon, LIMIT, 5000));
  for (int i = LIMIT - 1; i < LIMIT + 4; ++i) {
    fds[i] = halo_test_ipc_connect(fixture->daemon.socket_path);
    assert_true(halo_test_ipc_wait_closed(fds[i], 5000));
  }
  for (int i = 0; i < LIMIT - 1; ++i)
    assert_false(halo_test_ipc_wait_closed(fds[i], 1));
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->client));
  for (int i = 0; i < LIMIT + 4; ++i) close(fds[i]);
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1, 5000));
  expect_other_client_works(fixture);
}

// Imports count too. Each round a new client creates session-fds (10)
// exportable semaphores, hands their tokens to the fixture's client, which
// imports them, and leaves. The pages live on, held by the importer: before,
// nobody was charged for them once their creator left, so rounds of fresh
// creators grew halod's descriptors without bound. Now the importer's
// second round is refused naming session-fds, and releasing an imported
// semaphore gives its descriptor back.
enum { IMPORT_QUOTA = 10 };

static void test_imports_count_against_session_fds(void **state) {
  const char *args[] = {"--session-fds", "10", NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *imported[2 * IMPORT_QUOTA] = {0};
  uint32_t count = 0;
  for (uint32_t round = 0; round < 2; ++round) {
    halo_client_t *creator = halo_test_connect(&fixture->daemon, 0);
    for (uint32_t i = 0; i < IMPORT_QUOTA; ++i) {
      halo_semaphore_t *semaphore = NULL;
      HALO_TEST_ASSERT_OK(halo_semaphore_create(
          creator, round * 100 + i, HALO_OBJECT_FLAG_EXPORTABLE, &semaphore));
      halo_token_t token;
      HALO_TEST_ASSERT_OK(halo_semaphore_export(semaphore, &token));
      halo_status_t status =
          halo_semaphore_import(fixture->client, &token, &imported[count]);
      if (round == 0) {
        HALO_TEST_ASSERT_OK(status);
        ++count;
      } else {
        HALO_TEST_EXPECT_STATUS(status, HALO_STATUS_RESOURCE_EXHAUSTED,
                                "session-fds");
      }
      halo_semaphore_release(semaphore);
    }
    halo_client_close(creator);
  }
  assert_int_equal(count, IMPORT_QUOTA);
  // The creators are gone; the imports still work.
  uint64_t value = 0;
  HALO_TEST_ASSERT_OK(halo_semaphore_query(imported[3], &value));
  assert_int_equal(value, 3);
  // One released: one more import fits.
  halo_semaphore_release(imported[0]);
  halo_client_t *creator = halo_test_connect(&fixture->daemon, 0);
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(
      creator, 0, HALO_OBJECT_FLAG_EXPORTABLE, &semaphore));
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_semaphore_export(semaphore, &token));
  HALO_TEST_ASSERT_OK(
      halo_semaphore_import(fixture->client, &token, &imported[0]));
  // A second import of a page the session holds already costs nothing.
  halo_semaphore_t *again = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_import(fixture->client, &token, &again));
  halo_semaphore_release(again);
  halo_semaphore_release(semaphore);
  halo_client_close(creator);
  for (uint32_t i = 0; i < count; ++i) halo_semaphore_release(imported[i]);
  expect_other_client_works(fixture);
}

// ------------------------------------------------------------------ uid-fds

// The uid budget under a small open-file limit: halod runs under prlimit
// with UID_FDS_NOFILE descriptors, so uid-fds's default is a quarter of
// that; each session may hold UID_FDS_SESSION pages, which do not divide
// it, so the page that crosses the uid's budget is refused naming uid-fds.
#define UID_FDS_NOFILE 1200
#define UID_FDS_DEFAULT (UID_FDS_NOFILE / 4)
#define UID_FDS_SESSION 32
#define UID_FDS_CONNECTIONS 100
#define UID_FDS_SESSIONS 120  // bound on the sessions the flood opens

static pid_t g_flood_child;

// Kills the flood's child if a test left it, then the fixture's teardown.
static int uid_fds_teardown(void **state) {
  if (g_flood_child > 0) {
    kill(g_flood_child, SIGKILL);
    waitpid(g_flood_child, NULL, 0);
    g_flood_child = 0;
  }
  return halo_test_fixture_teardown(state);
}

// "CODE: message" of |status| into |out|; frees it.
static void describe_status(halo_status_t status, char *out, size_t capacity) {
  snprintf(out, capacity, "%s: %s",
           halo_status_code_name(halo_status_code(status)),
           halo_status_message(status));
  for (char *c = out; *c; ++c) {
    if (*c == '\n') *c = ' ';
  }
  halo_status_free(status);
}

// The flood's process (this program with --uid-flood ADDRESS, run as nobody
// by test_uid_fds_leaves_room_for_other_uids): opens sessions, each filled
// with exportable semaphores until refused, until a connect fails; reports
// on stdout "SESSIONS PAGES", the last refused create and the failed
// connect, one a line. Then, once a byte arrives on stdin, ends its first
// session and connects again (retrying while halod has not yet counted the
// end), creating one exportable semaphore; reports "again: ok" or why not.
static int uid_flood_main(const char *address) {
  static halo_client_t *clients[UID_FDS_SESSIONS];
  static halo_semaphore_t *semaphores[UID_FDS_SESSIONS][UID_FDS_SESSION + 1];
  static uint32_t counts[UID_FDS_SESSIONS];
  halo_client_options_t options = {.address = address,
                                   .client_name = "uid-flood",
                                   .request_timeout_ms = 3000};
  char refused_create[1024] = "none", refused_connect[1024] = "none";
  uint32_t sessions = 0, pages = 0;
  for (; sessions < UID_FDS_SESSIONS; ++sessions) {
    halo_status_t status = halo_client_connect(&options, &clients[sessions]);
    if (status) {
      describe_status(status, refused_connect, sizeof(refused_connect));
      break;
    }
    for (uint32_t i = 0; i <= UID_FDS_SESSION; ++i) {
      status = halo_semaphore_create(clients[sessions], 0,
                                     HALO_OBJECT_FLAG_EXPORTABLE,
                                     &semaphores[sessions][i]);
      if (status) {
        describe_status(status, refused_create, sizeof(refused_create));
        break;
      }
      ++counts[sessions];
      ++pages;
    }
  }
  printf("%u %u\n%s\n%s\n", sessions, pages, refused_create, refused_connect);
  fflush(stdout);
  char go;
  if (read(STDIN_FILENO, &go, 1) != 1) return 1;
  if (sessions == 0) return 2;
  for (uint32_t i = 0; i < counts[0]; ++i)
    halo_semaphore_release(semaphores[0][i]);
  halo_client_close(clients[0]);
  halo_client_t *again = NULL;
  char why[1024] = "";
  int64_t deadline = halo_test_now_ns() + 5000 * HALO_TEST_MS;
  for (;;) {
    halo_status_t status = halo_client_connect(&options, &again);
    if (!status) {
      halo_semaphore_t *semaphore = NULL;
      status = halo_semaphore_create(again, 0, HALO_OBJECT_FLAG_EXPORTABLE,
                                     &semaphore);
      if (!status) {
        halo_semaphore_release(semaphore);
        halo_client_close(again);
        break;
      }
      halo_client_close(again);
    }
    describe_status(status, why, sizeof(why));
    if (halo_test_now_ns() > deadline) {
      printf("again: %s\n", why);
      return 3;
    }
    halo_test_sleep_ms(20);
  }
  printf("again: ok\n");
  fflush(stdout);
  return 0;
}

// Reads a line of the flood's report (at most 30 s) into |line|.
static bool read_report_line(FILE *report, char *line, size_t capacity) {
  if (!fgets(line, (int)capacity, report)) return false;
  line[strcspn(line, "\n")] = '\0';
  return true;
}

// Before uid-fds, one uid could take every descriptor of halod's: its
// sessions each filled session-fds, until halod's pages reached
// fd-reserve, and then its further connections (each an nng connection,
// an fd channel connection and a ring's two) ate the reserve; another
// uid's connect then timed out, and so did haloctl's. Now a uid's sessions
// together hold at most uid-fds pages and arenas (by default a quarter of
// halod's open-file limit), a uid holding that many gets no new session,
// and everyone else connects and works. A session that ends gives its
// pages back to its uid.
static void test_uid_fds_leaves_room_for_other_uids(void **state) {
  if (geteuid() != 0) skip();  // the flood runs as another uid
  const char *prlimit = halo_test_prlimit();
  if (!prlimit) {
    print_message("prlimit(1) is not installed (util-linux); skipped\n");
    skip();
  }
  char nofile[64], session_fds[16], connections[16];
  snprintf(nofile, sizeof(nofile), "--nofile=%d:%d", UID_FDS_NOFILE,
           UID_FDS_NOFILE);
  snprintf(session_fds, sizeof(session_fds), "%d", UID_FDS_SESSION);
  snprintf(connections, sizeof(connections), "%d", UID_FDS_CONNECTIONS);
  const char *wrapper[] = {prlimit, nofile, NULL};
  // With these, one uid's connections are bounded too (3 descriptors each
  // beside its fd channel connections; halod_fd_budget_check_limits):
  // 300 + 3 x 100 + 16 + 128 and fd-reserve 64 stay under 1200.
  const char *args[] = {"--session-fds",
                        session_fds,
                        "--uid-connections",
                        connections,
                        "--fd-channel-connections",
                        "128",
                        NULL};
  halo_test_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  halo_test_daemon_start_wrapped(&fixture->daemon, wrapper, args);
  fixture->client = halo_test_connect(&fixture->daemon, 10000);
  assert_int_equal(chmod(fixture->daemon.socket_path, 0777), 0);
  assert_int_equal(chmod(fixture->daemon.fd_channel_path, 0777), 0);

  int to_child[2], from_child[2];
  assert_int_equal(pipe2(to_child, O_CLOEXEC), 0);
  assert_int_equal(pipe2(from_child, O_CLOEXEC), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    if (dup2(to_child[0], STDIN_FILENO) < 0 ||
        dup2(from_child[1], STDOUT_FILENO) < 0) {
      _exit(125);
    }
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
      _exit(124);
    const char *argv[] = {"fd_budget_test", "--uid-flood",
                          fixture->daemon.listen_address, NULL};
    execv("/proc/self/exe", (char *const *)argv);
    _exit(127);
  }
  g_flood_child = child;
  close(to_child[0]);
  close(from_child[1]);
  FILE *report = fdopen(from_child[0], "r");
  assert_non_null(report);
  char counts[64] = "", refused_create[1024] = "", refused_connect[1024] = "";
  int64_t start = halo_test_now_ns();
  bool reported =
      read_report_line(report, counts, sizeof(counts)) &&
      read_report_line(report, refused_create, sizeof(refused_create)) &&
      read_report_line(report, refused_connect, sizeof(refused_connect));
  unsigned sessions = 0, pages = 0;
  if (reported) sscanf(counts, "%u %u", &sessions, &pages);
  printf(
      "uid flood (open-file limit %d, session-fds %d): %u sessions, %u "
      "exportable semaphores in %.0f ms;\n  last create: %s\n  last "
      "connect: %s\n",
      UID_FDS_NOFILE, UID_FDS_SESSION, sessions, pages,
      (double)(halo_test_now_ns() - start) / HALO_TEST_MS, refused_create,
      refused_connect);
  fflush(stdout);
  assert_true(reported);

  // Another uid connects and works, and so does haloctl's admin socket.
  expect_other_client_works(fixture);
  halo_wire_response_t *status = halo_test_admin_status(&fixture->daemon);
  assert_non_null(status);
  halo__wire__response__free_unpacked(status, NULL);

  // The flood held exactly its uid's budget and was told so.
  assert_int_equal(pages, UID_FDS_DEFAULT);
  assert_int_equal(sessions,
                   (UID_FDS_DEFAULT + UID_FDS_SESSION - 1) / UID_FDS_SESSION);
  assert_non_null(strstr(refused_create, "RESOURCE_EXHAUSTED"));
  assert_non_null(strstr(refused_create, "uid-fds"));
  assert_non_null(strstr(refused_connect, "RESOURCE_EXHAUSTED"));
  assert_non_null(strstr(refused_connect, "uid-fds"));

  // Its first session ends: its pages go back to the uid, which connects
  // and creates again.
  assert_int_equal(write(to_child[1], "g", 1), 1);
  char again[1024] = "";
  assert_true(read_report_line(report, again, sizeof(again)));
  printf("uid flood: after a session ended, %s\n", again);
  int wait_status = 0;
  assert_int_equal(waitpid(child, &wait_status, 0), child);
  g_flood_child = 0;
  fclose(report);
  close(to_child[1]);
  assert_string_equal(again, "again: ok");
  assert_true(WIFEXITED(wait_status));
  assert_int_equal(WEXITSTATUS(wait_status), 0);
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1, 5000));
  expect_other_client_works(fixture);
}

// uid-fds counts every session of a uid and what each imported, as
// session-fds counts a session's: here 10 for the uid, 8 a session. A
// session at 8 is refused naming session-fds, a second session of the same
// uid is refused naming uid-fds once the two hold 10, and so is its import;
// a third connection is refused at Hello while the uid holds them all,
// counted in halo_sessions_uid_fds_limited_total (before, no metric
// counted it). A release, or a session's end, gives descriptors back to the
// uid.
static void test_uid_fds_counts_sessions_and_imports(void **state) {
  const char *args[] = {"--uid-fds", "10", "--session-fds", "8", NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *first[9] = {0};
  for (int i = 0; i < 8; ++i) {
    HALO_TEST_ASSERT_OK(halo_semaphore_create(
        fixture->client, i, HALO_OBJECT_FLAG_EXPORTABLE, &first[i]));
  }
  HALO_TEST_EXPECT_STATUS(
      halo_semaphore_create(fixture->client, 0, HALO_OBJECT_FLAG_EXPORTABLE,
                            &first[8]),
      HALO_STATUS_RESOURCE_EXHAUSTED, "session-fds");
  halo_client_t *second = halo_test_connect(&fixture->daemon, 10000);
  halo_semaphore_t *own[3] = {0};
  for (int i = 0; i < 2; ++i) {
    HALO_TEST_ASSERT_OK(
        halo_semaphore_create(second, 0, HALO_OBJECT_FLAG_EXPORTABLE, &own[i]));
  }
  HALO_TEST_EXPECT_STATUS(
      halo_semaphore_create(second, 0, HALO_OBJECT_FLAG_EXPORTABLE, &own[2]),
      HALO_STATUS_RESOURCE_EXHAUSTED, "uid-fds");
  // The uid holds all 10: a new connection is refused at Hello, and
  // counted as that refusal only.
  const char *const kLimited = "halo_sessions_uid_fds_limited_total ";
  assert_int_equal(halo_test_admin_metric(&fixture->daemon, kLimited), 0);
  halo_client_options_t options = {.address = fixture->daemon.listen_address,
                                   .request_timeout_ms = 10000};
  halo_client_t *third = NULL;
  HALO_TEST_EXPECT_STATUS(halo_client_connect(&options, &third),
                          HALO_STATUS_RESOURCE_EXHAUSTED, "uid-fds");
  assert_null(third);
  assert_int_equal(halo_test_admin_metric(&fixture->daemon, kLimited), 1);
  assert_int_equal(halo_test_admin_metric(&fixture->daemon,
                                          "halo_sessions_uid_limited_total "),
                   0);
  assert_int_equal(
      halo_test_admin_metric(&fixture->daemon, "halo_sessions_refused_total "),
      0);
  // Imports count: one released makes room for one import, not two.
  halo_semaphore_release(first[0]);
  first[0] = NULL;
  halo_token_t token;
  halo_semaphore_t *imported[2] = {0};
  HALO_TEST_ASSERT_OK(halo_semaphore_export(first[1], &token));
  HALO_TEST_ASSERT_OK(halo_semaphore_import(second, &token, &imported[0]));
  HALO_TEST_ASSERT_OK(halo_semaphore_export(first[2], &token));
  HALO_TEST_EXPECT_STATUS(halo_semaphore_import(second, &token, &imported[1]),
                          HALO_STATUS_RESOURCE_EXHAUSTED, "uid-fds");
  // The second session ends: its two pages and its import go back to the
  // uid (7 in use), which connects and creates again.
  halo_semaphore_release(imported[0]);
  for (int i = 0; i < 2; ++i) halo_semaphore_release(own[i]);
  halo_client_close(second);
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1, 5000));
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &third));
  for (int i = 0; i < 3; ++i) {
    HALO_TEST_ASSERT_OK(
        halo_semaphore_create(third, 0, HALO_OBJECT_FLAG_EXPORTABLE, &own[i]));
  }
  for (int i = 0; i < 3; ++i) halo_semaphore_release(own[i]);
  halo_client_close(third);
  for (int i = 1; i < 8; ++i) halo_semaphore_release(first[i]);
  expect_other_client_works(fixture);
  // Refusals of creates and imports are not counted there.
  assert_int_equal(halo_test_admin_metric(&fixture->daemon, kLimited), 1);
}

// A page counts from its creation on, not once its registration with the
// devices (a control call to the domain's worker, off halod's loop) is
// done: before, creates of many sessions whose registrations were all
// waiting each found the uid (and session) under its quota, and all got
// their pages. Here the uid's worker is stopped while 12 sessions each
// create an exportable semaphore; with uid-fds 4, 4 get one and 8 are
// refused naming uid-fds (before: all 12).
enum { PENDING_SESSIONS = 12, PENDING_QUOTA = 4 };

typedef struct pending_create_t {
  pthread_t thread;
  halo_client_t *client;
  halo_semaphore_t *semaphore;
  halo_status_t status;
} pending_create_t;

static void *pending_create(void *arg) {
  pending_create_t *create = arg;
  create->status = halo_semaphore_create(
      create->client, 0, HALO_OBJECT_FLAG_EXPORTABLE, &create->semaphore);
  return NULL;
}

static pid_t g_stopped_worker;

static int pending_teardown(void **state) {
  if (g_stopped_worker > 0) kill(g_stopped_worker, SIGCONT);
  g_stopped_worker = 0;
  return halo_test_fixture_teardown(state);
}

static void test_pages_count_while_registered(void **state) {
  char quota[16];
  snprintf(quota, sizeof(quota), "%d", PENDING_QUOTA);
  const char *args[] = {"--uid-fds", quota, NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  static pending_create_t creates[PENDING_SESSIONS];
  memset(creates, 0, sizeof(creates));
  for (int i = 0; i < PENDING_SESSIONS; ++i)
    creates[i].client = halo_test_connect(&fixture->daemon, 10000);
  char domain[32];
  snprintf(domain, sizeof(domain), "uid:%u", (unsigned)geteuid());
  pid_t worker = halo_test_admin_worker_pid(&fixture->daemon, domain);
  assert_true(worker > 0);
  assert_int_equal(kill(worker, SIGSTOP), 0);
  g_stopped_worker = worker;
  for (int i = 0; i < PENDING_SESSIONS; ++i) {
    assert_int_equal(
        pthread_create(&creates[i].thread, NULL, pending_create, &creates[i]),
        0);
  }
  halo_test_sleep_ms(500);  // every create reaches halod meanwhile
  assert_int_equal(kill(worker, SIGCONT), 0);
  g_stopped_worker = 0;
  int created = 0, refused = 0;
  for (int i = 0; i < PENDING_SESSIONS; ++i) {
    assert_int_equal(pthread_join(creates[i].thread, NULL), 0);
    if (!creates[i].status) {
      ++created;
      continue;
    }
    HALO_TEST_EXPECT_STATUS(creates[i].status, HALO_STATUS_RESOURCE_EXHAUSTED,
                            "uid-fds");
    ++refused;
  }
  printf(
      "uid-fds %d, %d creates while the worker was stopped: %d created, %d "
      "refused\n",
      PENDING_QUOTA, PENDING_SESSIONS, created, refused);
  assert_int_equal(created, PENDING_QUOTA);
  assert_int_equal(refused, PENDING_SESSIONS - PENDING_QUOTA);
  for (int i = 0; i < PENDING_SESSIONS; ++i) {
    if (creates[i].semaphore) halo_semaphore_release(creates[i].semaphore);
    halo_client_close(creates[i].client);
  }
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1, 5000));
  expect_other_client_works(fixture);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--uid-flood") == 0)
    return uid_flood_main(argv[2]);
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name) cmocka_unit_test_teardown(name, halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_session_fds),
      T(test_fd_reserve),
      T(test_fd_channel_idle_flood),
      T(test_fd_channel_refusal_reaches_the_client),
      T(test_uid_connections_flood),
      T(test_uid_connections_churn),
      T(test_uid_connections_refusal_message),
      T(test_hello_timeout),
      T(test_connections_limit),
      T(test_imports_count_against_session_fds),
      T(test_uid_fds_counts_sessions_and_imports),
      cmocka_unit_test_teardown(test_pages_count_while_registered,
                                pending_teardown),
      cmocka_unit_test_teardown(test_uid_fds_leaves_room_for_other_uids,
                                uid_fds_teardown),
  };
#undef T
  return cmocka_run_group_tests_name("fd_budget", tests, NULL, NULL);
}
