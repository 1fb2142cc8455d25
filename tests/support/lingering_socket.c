// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "tests/support/lingering_socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int halo_test_lingering_socket(int linger_s, int *out_listener) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(listener >= 0);
  struct sockaddr_in address = {.sin_family = AF_INET};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int small = 4096;
  setsockopt(listener, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  assert_int_equal(bind(listener, (struct sockaddr *)&address, sizeof(address)),
                   0);
  assert_int_equal(listen(listener, 1), 0);
  socklen_t length = sizeof(address);
  assert_int_equal(getsockname(listener, (struct sockaddr *)&address, &length),
                   0);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  assert_true(fd >= 0);
  int connected = connect(fd, (struct sockaddr *)&address, sizeof(address));
  assert_true(connected == 0 || errno == EINPROGRESS);
  // Fill the send queue: the listener's backlog holds the connection but
  // nobody reads it. Bounded, in case writes never stop succeeding.
  static char bytes[65536];
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    if (write(fd, bytes, sizeof(bytes)) < 0 &&
        (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    assert_true(now.tv_sec - start.tv_sec < 5);
  }
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  struct linger linger = {.l_onoff = 1, .l_linger = linger_s};
  assert_int_equal(
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, sizeof(linger)), 0);
  *out_listener = listener;
  return fd;
}
