// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of clients misusing the fd channel against halod's
// loop, which serves every tenant: a descriptor passed for halod to hold
// the last reference to, whose close blocks (a TCP socket with SO_LINGER
// and unsent data), and requests sent without reading the replies, which
// carry descriptors (daemon/fd_closer.h, daemon/fd_server.c).
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/fd_channel.h"
#include "tests/support/halo_test.h"
#include "tests/support/lingering_socket.h"

typedef struct abuse_fixture_t {
  halo_test_fixture_t base;  // first: the shared teardown frees it
  halo_test_raw_t raw;
} abuse_fixture_t;

static int abuse_setup(void **state) {
  abuse_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  halo_test_daemon_start(&fixture->base.daemon);
  // Its calls give up after 5 s: a loop held for the linger time (60 s)
  // fails them.
  fixture->base.client = halo_test_connect(&fixture->base.daemon, 5000);
  halo_test_raw_open(&fixture->raw, fixture->base.daemon.listen_address, 0);
  halo_test_raw_hello(&fixture->raw);
  return 0;
}

static int abuse_teardown(void **state) {
  abuse_fixture_t *fixture = *state;
  halo_test_raw_close(&fixture->raw);
  return halo_test_fixture_teardown(state);
}

// Whether this kernel lets a socket refuse passed descriptors
// (SO_PASSRIGHTS, Linux 6.16): halod's sockets then do.
static bool kernel_refuses_rights(void) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  int off = 0;
  bool refuses = setsockopt(fd, SOL_SOCKET, 83 /* SO_PASSRIGHTS */, &off,
                            sizeof(off)) == 0;
  close(fd);
  return refuses;
}

// A client passes a socket whose close lingers 60 s and closes its own copy
// while halod is stopped, so halod would hold the last reference. Where the
// kernel can, the fd channel refuses the descriptor at the client's
// sendmsg (EPERM). Elsewhere halod refuses the request (clients pass no
// descriptor) and closes the connection. Either way its loop goes on
// serving: another client's ping answers within its 5 s.
static void test_passed_descriptor_does_not_block_the_loop(void **state) {
  abuse_fixture_t *fixture = *state;
  int listener;
  int stuck = halo_test_lingering_socket(60, &listener);
  pid_t daemon_pid = fixture->base.daemon.pid;
  halo_fd_request_t request;
  memset(&request, 0, sizeof(request));
  request.magic = HALO_FD_CHANNEL_MAGIC;
  request.kind = HALO_FD_REQUEST_AUTH;
  request.id = fixture->raw.session_id;
  memcpy(request.token, fixture->raw.session_token, 16);
  // No assertion while halod is stopped: a failure would leave it stopped
  // for the teardown.
  assert_int_equal(kill(daemon_pid, SIGSTOP), 0);
  int channel = halo_test_fd_connect(fixture->raw.fd_channel_path);
  halo_status_t sent =
      channel >= 0 ? halo_fd_send(channel, &request, sizeof(request), stuck)
                   : NULL;
  if (channel < 0 || sent) {
    // Not in flight: this close is the last, and must not linger.
    struct linger off = {.l_onoff = 0};
    setsockopt(stuck, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
  }
  close(stuck);  // else halod's copy, in flight, is now the last
  assert_int_equal(kill(daemon_pid, SIGCONT), 0);
  assert_true(channel >= 0);
  if (kernel_refuses_rights()) {
    HALO_TEST_ASSERT_CODE(sent, HALO_STATUS_PERMISSION_DENIED);
    close(channel);
    HALO_TEST_ASSERT_OK(halo_client_ping(fixture->base.client));
    close(listener);
    return;
  }
  HALO_TEST_ASSERT_OK(sent);

  halo_fd_reply_t reply;
  int passed = -1;
  HALO_TEST_ASSERT_OK(halo_fd_recv(channel, &reply, sizeof(reply), &passed));
  assert_int_equal(passed, -1);
  assert_int_equal(reply.code, HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(reply.message, "1 descriptor(s) passed"));
  assert_non_null(strstr(reply.message, "clients pass none"));
  // The connection is closed.
  char byte;
  assert_int_equal(recv(channel, &byte, 1, 0), 0);
  close(channel);
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->base.client));
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(
      halo_semaphore_create(fixture->base.client, 0, 0, &semaphore));
  halo_semaphore_release(semaphore);
  close(listener);
}

// Two requests without reading the first reply (a DAEMON reply carries a
// pidfd): halod answers the first and closes the connection at the second,
// rather than queuing replies and their descriptors for a reader that never
// comes. The session's other connections and clients are served.
static void test_unread_replies_close_the_connection(void **state) {
  abuse_fixture_t *fixture = *state;
  int channel = halo_test_fd_open_session(&fixture->raw);
  halo_fd_request_t request;
  memset(&request, 0, sizeof(request));
  request.magic = HALO_FD_CHANNEL_MAGIC;
  request.kind = HALO_FD_REQUEST_DAEMON;
  for (int i = 0; i < 2; ++i) {
    assert_int_equal(send(channel, &request, sizeof(request), MSG_NOSIGNAL),
                     (ssize_t)sizeof(request));
  }
  // halod closes its end (both replies unread until then).
  struct pollfd hangup = {.fd = channel, .events = POLLRDHUP};
  assert_int_equal(poll(&hangup, 1, HALO_TEST_DEADLINE_MS), 1);
  assert_true(hangup.revents & (POLLRDHUP | POLLHUP));
  halo_fd_reply_t reply;
  int passed = -1;
  HALO_TEST_ASSERT_OK(halo_fd_recv(channel, &reply, sizeof(reply), &passed));
  assert_int_equal(reply.code, HALO_STATUS_OK);
  assert_true(passed >= 0);  // the first request's pidfd
  close(passed);
  passed = -1;
  halo_status_t status = halo_fd_recv(channel, &reply, sizeof(reply), &passed);
  HALO_TEST_ASSERT_CODE(status, HALO_STATUS_UNAVAILABLE);  // no second reply
  assert_int_equal(passed, -1);
  close(channel);
  // A channel that reads its replies is served as before.
  channel = halo_test_fd_open_session(&fixture->raw);
  close(channel);
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->base.client));
}

// Where the kernel can, halod's client socket (nng's, whose reader would
// close what a message carries in its own thread) refuses passed
// descriptors too: a connection's sendmsg with one fails with EPERM.
static void test_client_socket_refuses_rights(void **state) {
  abuse_fixture_t *fixture = *state;
  if (!kernel_refuses_rights()) {
    print_message("kernel before Linux 6.16: SO_PASSRIGHTS unsupported\n");
    skip();
  }
  const char *address = fixture->base.daemon.listen_address;
  assert_true(strncmp(address, "ipc://", 6) == 0);
  int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un path = {.sun_family = AF_UNIX};
  snprintf(path.sun_path, sizeof(path.sun_path), "%s", address + 6);
  assert_int_equal(connect(client, (struct sockaddr *)&path, sizeof(path)), 0);
  char greeting[8] = {0, 'S', 'P', 0, 0, 0, 0, 0};
  halo_status_t sent = halo_fd_send(client, greeting, sizeof(greeting), client);
  HALO_TEST_ASSERT_CODE(sent, HALO_STATUS_PERMISSION_DENIED);
  close(client);
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->base.client));
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_passed_descriptor_does_not_block_the_loop, abuse_setup,
          abuse_teardown),
      cmocka_unit_test_setup_teardown(test_unread_replies_close_the_connection,
                                      abuse_setup, abuse_teardown),
      cmocka_unit_test_setup_teardown(test_client_socket_refuses_rights,
                                      abuse_setup, abuse_teardown),
  };
  return cmocka_run_group_tests_name("fd_channel_abuse", tests, NULL, NULL);
}
