// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the fd channel framing (common/fd_channel.h) over a
// socketpair: descriptors pass with SCM_RIGHTS, wrong sizes are errors that
// leak no descriptor, a closed peer is UNAVAILABLE.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "common/fd_channel.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/memfd.h"

typedef struct pair_t {
  int a;
  int b;
} pair_t;

static int pair_setup(void **state) {
  pair_t *pair = calloc(1, sizeof(*pair));
  assert_non_null(pair);
  int fds[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds),
                   0);
  pair->a = fds[0];
  pair->b = fds[1];
  *state = pair;
  return 0;
}

static int pair_teardown(void **state) {
  pair_t *pair = *state;
  if (pair->a >= 0) close(pair->a);
  if (pair->b >= 0) close(pair->b);
  free(pair);
  return 0;
}

static int open_fd_count(void) {
  DIR *dir = opendir("/proc/self/fd");
  assert_non_null(dir);
  int count = 0;
  while (readdir(dir)) ++count;
  closedir(dir);
  return count;
}

static void test_descriptor_passes(void **state) {
  pair_t *pair = *state;
  int memfd = -1;
  assert_null(halo_memfd_create("fd-channel-test", 4096, &memfd));
  char *mapping = NULL;
  assert_null(
      halo_memfd_map(memfd, 4096, PROT_READ | PROT_WRITE, (void **)&mapping));
  strcpy(mapping, "through the socket");
  halo_fd_reply_t reply = {.code = 0, .size = 4096};
  strcpy(reply.message, "here");
  assert_null(halo_fd_send(pair->a, &reply, sizeof(reply), memfd));
  halo_fd_reply_t received;
  int passed = -1;
  assert_null(halo_fd_recv(pair->b, &received, sizeof(received), &passed));
  assert_true(passed >= 0);
  assert_int_not_equal(passed, memfd);
  assert_int_equal(received.size, 4096);
  assert_string_equal(received.message, "here");
  struct stat original;
  struct stat copy;
  assert_int_equal(fstat(memfd, &original), 0);
  assert_int_equal(fstat(passed, &copy), 0);
  assert_int_equal(original.st_ino, copy.st_ino);
  char *other = NULL;
  assert_null(halo_memfd_map(passed, 4096, PROT_READ, (void **)&other));
  assert_string_equal(other, "through the socket");
  munmap(other, 4096);
  munmap(mapping, 4096);
  close(passed);
  close(memfd);
}

static void test_message_without_descriptor(void **state) {
  pair_t *pair = *state;
  halo_fd_request_t request = {.magic = HALO_FD_CHANNEL_MAGIC,
                               .kind = HALO_FD_REQUEST_AUTH,
                               .id = 12345};
  memset(request.token, 0xcd, sizeof(request.token));
  assert_null(halo_fd_send(pair->a, &request, sizeof(request), -1));
  halo_fd_request_t received;
  int passed = 99;
  assert_null(halo_fd_recv(pair->b, &received, sizeof(received), &passed));
  assert_int_equal(passed, -1);
  assert_memory_equal(&received, &request, sizeof(request));
}

static void test_wrong_length_is_rejected_without_leak(void **state) {
  pair_t *pair = *state;
  int memfd = -1;
  assert_null(halo_memfd_create("fd-channel-test", 4096, &memfd));
  int before = open_fd_count();
  char small[10] = {0};
  assert_null(halo_fd_send(pair->a, small, sizeof(small), memfd));
  halo_fd_reply_t received;
  int passed = 99;
  halo_status_t status =
      halo_fd_recv(pair->b, &received, sizeof(received), &passed);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(status);
  assert_int_equal(passed, -1);
  assert_int_equal(open_fd_count(), before);  // the passed copy was closed
  // Too long: truncated, also an error.
  char big[sizeof(halo_fd_reply_t) + 16] = {0};
  assert_null(halo_fd_send(pair->a, big, sizeof(big), memfd));
  status = halo_fd_recv(pair->b, &received, sizeof(received), &passed);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(status);
  assert_int_equal(passed, -1);
  assert_int_equal(open_fd_count(), before);
  close(memfd);
}

static void test_extra_descriptors_are_closed(void **state) {
  pair_t *pair = *state;
  int fds[3];
  for (int i = 0; i < 3; ++i) {
    assert_null(halo_memfd_create("fd-channel-test", 4096, &fds[i]));
  }
  int before = open_fd_count();
  halo_fd_reply_t reply = {.code = 0};
  struct iovec iov = {.iov_base = &reply, .iov_len = sizeof(reply)};
  union {
    char buffer[CMSG_SPACE(sizeof(fds))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof(control));
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buffer,
                       .msg_controllen = sizeof(control.buffer)};
  struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(fds));
  memcpy(CMSG_DATA(cmsg), fds, sizeof(fds));
  assert_int_equal(sendmsg(pair->a, &msg, 0), (ssize_t)sizeof(reply));
  halo_fd_reply_t received;
  int passed = -1;
  assert_null(halo_fd_recv(pair->b, &received, sizeof(received), &passed));
  assert_true(passed >= 0);
  assert_int_equal(open_fd_count(), before + 1);  // only the first is kept
  struct stat first;
  struct stat got;
  assert_int_equal(fstat(fds[0], &first), 0);
  assert_int_equal(fstat(passed, &got), 0);
  assert_int_equal(first.st_ino, got.st_ino);
  close(passed);
  for (int i = 0; i < 3; ++i) close(fds[i]);
}

static void test_closed_peer(void **state) {
  pair_t *pair = *state;
  close(pair->a);
  pair->a = -1;
  halo_fd_reply_t received;
  int passed = 99;
  halo_status_t status =
      halo_fd_recv(pair->b, &received, sizeof(received), &passed);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNAVAILABLE);
  assert_int_equal(passed, -1);
  halo_status_free(status);
  // Sending to a closed peer is an error, not a SIGPIPE.
  status = halo_fd_send(pair->b, &received, sizeof(received), -1);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNAVAILABLE);
  halo_status_free(status);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, pair_setup, pair_teardown)
  const struct CMUnitTest tests[] = {
      T(test_descriptor_passes),
      T(test_message_without_descriptor),
      T(test_wrong_length_is_rejected_without_leak),
      T(test_extra_descriptors_are_closed),
      T(test_closed_peer),
  };
#undef T
  return cmocka_run_group_tests_name("fd_channel", tests, NULL, NULL);
}
