// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of daemon/fd_closer.c (closing descriptors a client controls
// off the caller's thread) and daemon/socket_rights.c (listening sockets
// that refuse passed descriptors), with real sockets: a TCP socket whose
// last close lingers, and a Unix socket holding one in flight.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "daemon/fd_closer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/fd_channel.h"
#include "daemon/socket_rights.h"
#include "tests/support/lingering_socket.h"

static int64_t now_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// Whether the kernel lets a socket refuse passed descriptors (6.16).
static bool kernel_refuses_rights(void) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  int error = halod_socket_refuse_rights(fd);
  close(fd);
  return error == 0;
}

// A lingering socket handed to the closer: the call returns at once, and
// the close (its linger off) soon after; nothing stays counted.
static void test_lingering_socket_closes_at_once(void **state) {
  (void)state;
  halod_fd_closer_t *closer = NULL;
  assert_null(halod_fd_closer_create(&closer));
  int listener;
  int stuck = halo_test_lingering_socket(60, &listener);
  halod_fd_closer_close(closer, stuck, 1000);
  int64_t deadline = now_ms() + 10000;
  while (halod_fd_closer_pending(closer, 1000) > 0 && now_ms() < deadline) {
    usleep(1000);
  }
  assert_int_equal(halod_fd_closer_pending(closer, 1000), 0);
  // The descriptor is closed: its number is free.
  assert_int_equal(fcntl(stuck, F_GETFD), -1);
  close(listener);
  halod_fd_closer_destroy(closer);
}

// A Unix socket with a lingering socket in flight on it (its close, the
// last, releases that one, whose linger is not the closer's to switch off):
// as a connection with messages queued, it closes on a thread that blocks
// for the linger time, counted for its uid alone (root's, whose uid is 0,
// counted as any other), while the caller and another uid's closes go on.
// A connection whose queue holds a socket that lingers |linger_s| s: its
// close, the last of that socket, blocks for as long. |*out_listener| as
// halo_test_lingering_socket's.
static int connection_holding_lingerer(int linger_s, int *out_listener) {
  int stuck = halo_test_lingering_socket(linger_s, out_listener);
  int pair[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair), 0);
  char byte = 'x';
  assert_null(halo_fd_send(pair[0], &byte, 1, stuck));
  close(stuck);    // in flight only now
  close(pair[0]);  // the peer, as a client that left
  return pair[1];
}

static void test_blocking_close_is_counted_for_its_uid(void **state) {
  (void)state;
  halod_fd_closer_t *closer = NULL;
  assert_null(halod_fd_closer_create(&closer));
  int listeners[2];
  halod_fd_closer_close_connection(
      closer, connection_holding_lingerer(2, &listeners[0]), 1000);
  halod_fd_closer_close_connection(
      closer, connection_holding_lingerer(2, &listeners[1]), 0);
  assert_int_equal(halod_fd_closer_pending(closer, 1000), 1);
  assert_int_equal(halod_fd_closer_pending(closer, 0), 1);
  // Another uid's connection closes meanwhile, on a thread of its own.
  int other[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, other), 0);
  halod_fd_closer_close_connection(closer, other[1], 2000);
  int64_t deadline = now_ms() + 10000;
  while (halod_fd_closer_pending(closer, 2000) > 0 && now_ms() < deadline) {
    usleep(1000);
  }
  assert_int_equal(halod_fd_closer_pending(closer, 2000), 0);
  assert_int_equal(fcntl(other[1], F_GETFD), -1);
  assert_int_equal(halod_fd_closer_pending(closer, 0), 1);
  close(other[0]);
  // The blocked closes end with their linger.
  deadline = now_ms() + 15000;
  while ((halod_fd_closer_pending(closer, 0) > 0 ||
          halod_fd_closer_pending(closer, 1000) > 0) &&
         now_ms() < deadline) {
    usleep(10000);
  }
  assert_int_equal(halod_fd_closer_pending(closer, 0), 0);
  assert_int_equal(halod_fd_closer_pending(closer, 1000), 0);
  close(listeners[0]);
  close(listeners[1]);
  halod_fd_closer_destroy(closer);
}

// Where the listening socket refuses passed descriptors nothing can be
// queued on a connection with one: it closes at once, on the caller.
static void test_connection_closes_here_where_rights_are_refused(void **state) {
  (void)state;
  halod_fd_closer_t *closer = NULL;
  assert_null(halod_fd_closer_create(&closer));
  halod_fd_closer_set_rights_refused(closer);
  int pair[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair), 0);
  halod_fd_closer_close_connection(closer, pair[1], 1000);
  assert_int_equal(fcntl(pair[1], F_GETFD), -1);
  assert_int_equal(halod_fd_closer_pending(closer, 1000), 0);
  close(pair[0]);
  halod_fd_closer_destroy(closer);
}

// A listening socket that refuses passed descriptors (where the kernel
// can): its connections inherit it, and a sender gets EPERM; found by its
// path too, as halod finds nng's.
// A Unix stream socket listening at |path| (removed first); asserts.
static int listen_at(const char *path) {
  unlink(path);
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  strcpy(address.sun_path, path);
  assert_int_equal(bind(listener, (struct sockaddr *)&address, sizeof(address)),
                   0);
  assert_int_equal(listen(listener, 4), 0);
  return listener;
}

// A Unix stream socket connected to |path|; asserts.
static int connect_to(const char *path) {
  int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  strcpy(address.sun_path, path);
  assert_int_equal(
      connect(client, (struct sockaddr *)&address, sizeof(address)), 0);
  return client;
}

static void test_listening_socket_refuses_rights(void **state) {
  (void)state;
  if (!kernel_refuses_rights()) {
    print_message("kernel before Linux 6.16: SO_PASSRIGHTS unsupported\n");
    skip();
  }
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  snprintf(path, sizeof(path), "/tmp/halo-fd-closer-test-%d.sock", getpid());
  int listener = listen_at(path);
  assert_int_equal(halod_socket_refuse_rights_at("/tmp/no-such-socket"),
                   ENOENT);
  assert_int_equal(halod_socket_refuse_rights_at(path), 0);
  int client = connect_to(path);
  char byte = 'x';
  halo_status_t status = halo_fd_send(client, &byte, 1, client);
  assert_non_null(status);
  assert_int_equal(halo_status_code(status), HALO_STATUS_PERMISSION_DENIED);
  halo_status_free(status);
  // Plain bytes still pass.
  assert_null(halo_fd_send(client, &byte, 1, -1));
  close(client);
  close(listener);
  unlink(path);
}

// The listener is found by its inode among the process's descriptors, on
// any kernel: not a connection accepted from it (same path, not listening),
// not a listener at another path, not a socket that was never bound.
static void test_listening_socket_is_found_by_path(void **state) {
  (void)state;
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  char other[sizeof(path)];
  snprintf(path, sizeof(path), "/tmp/halo-fd-find-test-%d.sock", getpid());
  snprintf(other, sizeof(other), "/tmp/halo-fd-find-test-%d.other", getpid());
  int unbound = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int elsewhere = listen_at(other);
  int listener = listen_at(path);
  int client = connect_to(path);
  int accepted = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
  assert_true(accepted >= 0);
  // Closed: only the connection accepted from it is left at |path|.
  close(listener);
  assert_int_equal(halod_socket_refuse_rights_at(path), ENOENT);
  listener = listen_at(path);
  // Found: 0 where the kernel refuses rights, its errno where it cannot.
  int found = halod_socket_refuse_rights_at(path);
  if (kernel_refuses_rights()) {
    assert_int_equal(found, 0);
  } else {
    assert_int_equal(found, ENOPROTOOPT);
  }
  close(accepted);
  close(client);
  close(listener);
  close(elsewhere);
  close(unbound);
  unlink(path);
  unlink(other);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_listening_socket_is_found_by_path),
      cmocka_unit_test(test_lingering_socket_closes_at_once),
      cmocka_unit_test(test_blocking_close_is_counted_for_its_uid),
      cmocka_unit_test(test_connection_closes_here_where_rights_are_refused),
      cmocka_unit_test(test_listening_socket_refuses_rights),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
