// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the memfd helpers (common/memfd.h) and of the kernel
// guarantees halo relies on: a daemon-owned page sealed with
// HALO_SEALS_DAEMON_OWNED cannot be mapped writable, written or resized by
// anyone holding its descriptor, while the daemon's earlier read-write
// mapping keeps working; a client-writable memfd sealed with
// HALO_SEALS_FIXED_SIZE cannot be resized.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "common/memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIZE 8192

static int create(void) {
  int fd = -1;
  halo_status_t status = halo_memfd_create("memfd-test", SIZE, &fd);
  assert_null(status);
  assert_true(fd >= 0);
  return fd;
}

static void test_create_size_and_cloexec(void **state) {
  (void)state;
  int fd = create();
  uint64_t size = 0;
  assert_null(halo_memfd_size(fd, &size));
  assert_int_equal(size, SIZE);
  assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  // Sealing is allowed, nothing sealed yet.
  assert_int_equal(fcntl(fd, F_GET_SEALS), 0);
  close(fd);
}

static void test_fixed_size_seals(void **state) {
  (void)state;
  int fd = create();
  void *mapping = NULL;
  assert_null(halo_memfd_map(fd, SIZE, PROT_READ | PROT_WRITE, &mapping));
  assert_null(halo_memfd_seal(fd, HALO_SEALS_FIXED_SIZE));
  assert_null(halo_memfd_check_seals(fd, HALO_SEALS_FIXED_SIZE));
  halo_status_t status = halo_memfd_check_seals(fd, HALO_SEALS_DAEMON_OWNED);
  assert_int_equal(halo_status_code(status), HALO_STATUS_FAILED_PRECONDITION);
  halo_status_free(status);
  // No shrink, no grow.
  assert_int_equal(ftruncate(fd, SIZE / 2), -1);
  assert_int_equal(errno, EPERM);
  assert_int_equal(ftruncate(fd, SIZE * 2), -1);
  assert_int_equal(errno, EPERM);
  assert_int_equal(fallocate(fd, 0, 0, SIZE * 4), -1);
  assert_int_equal(errno, EPERM);
  // No new seals (F_SEAL_SEAL), so nobody can add F_SEAL_WRITE either.
  assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
  assert_int_equal(errno, EPERM);
  // Still writable: clients write their arenas.
  void *second = NULL;
  assert_null(halo_memfd_map(fd, SIZE, PROT_READ | PROT_WRITE, &second));
  memset(second, 0x5a, SIZE);
  assert_int_equal(((unsigned char *)mapping)[SIZE - 1], 0x5a);
  munmap(second, SIZE);
  munmap(mapping, SIZE);
  close(fd);
}

static void test_daemon_owned_seals(void **state) {
  (void)state;
  int fd = create();
  unsigned char *daemon_view = NULL;
  assert_null(
      halo_memfd_map(fd, SIZE, PROT_READ | PROT_WRITE, (void **)&daemon_view));
  assert_null(halo_memfd_seal(fd, HALO_SEALS_DAEMON_OWNED));
  assert_null(halo_memfd_check_seals(fd, HALO_SEALS_DAEMON_OWNED));

  // A client cannot get a writable shared mapping...
  void *mapping = NULL;
  halo_status_t status =
      halo_memfd_map(fd, SIZE, PROT_READ | PROT_WRITE, &mapping);
  assert_int_equal(halo_status_code(status), HALO_STATUS_PERMISSION_DENIED);
  assert_null(mapping);
  halo_status_free(status);
  // ...nor write or resize it...
  char byte = 1;
  assert_int_equal(pwrite(fd, &byte, 1, 0), -1);
  assert_int_equal(errno, EPERM);
  assert_int_equal(ftruncate(fd, SIZE / 2), -1);
  assert_int_equal(errno, EPERM);
  assert_int_equal(ftruncate(fd, SIZE * 2), -1);
  assert_int_equal(errno, EPERM);
  // ...nor upgrade a read-only mapping...
  unsigned char *client_view = NULL;
  assert_null(halo_memfd_map(fd, SIZE, PROT_READ, (void **)&client_view));
  assert_int_equal(mprotect(client_view, SIZE, PROT_READ | PROT_WRITE), -1);
  // ...nor re-open it read-write through /proc and map that.
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  int reopened = open(path, O_RDWR | O_CLOEXEC);
  if (reopened >= 0) {
    void *via_reopen =
        mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, reopened, 0);
    assert_ptr_equal(via_reopen, MAP_FAILED);
    assert_int_equal(errno, EPERM);
    assert_int_equal(write(reopened, &byte, 1), -1);
    close(reopened);
  }
  // A private writable mapping (if the kernel allows one) is copy-on-write:
  // it never reaches the shared page.
  unsigned char *private_view =
      mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (private_view != MAP_FAILED) {
    private_view[0] = 0xee;
    assert_int_equal(daemon_view[0], 0);
    munmap(private_view, SIZE);
  }
  // The daemon's mapping made before the seal still writes, and readers see
  // it.
  daemon_view[100] = 42;
  assert_int_equal(client_view[100], 42);
  munmap(client_view, SIZE);
  munmap(daemon_view, SIZE);
  close(fd);
}

static void test_check_seals_of_unsealed(void **state) {
  (void)state;
  int fd = create();
  halo_status_t status = halo_memfd_check_seals(fd, HALO_SEALS_FIXED_SIZE);
  assert_int_equal(halo_status_code(status), HALO_STATUS_FAILED_PRECONDITION);
  assert_non_null(strstr(halo_status_message(status), "seals"));
  halo_status_free(status);
  close(fd);
}

static void test_errors_of_bad_descriptor(void **state) {
  (void)state;
  uint64_t size = 1;
  halo_status_t status = halo_memfd_size(-1, &size);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_int_equal(size, 0);
  halo_status_free(status);
  status = halo_memfd_check_seals(-1, HALO_SEALS_FIXED_SIZE);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(status);
  void *mapping = (void *)1;
  status = halo_memfd_map(-1, SIZE, PROT_READ, &mapping);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_null(mapping);
  halo_status_free(status);
  status = halo_memfd_seal(-1, F_SEAL_SEAL);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(status);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_size_and_cloexec),
      cmocka_unit_test(test_fixed_size_seals),
      cmocka_unit_test(test_daemon_owned_seals),
      cmocka_unit_test(test_check_seals_of_unsealed),
      cmocka_unit_test(test_errors_of_bad_descriptor),
  };
  return cmocka_run_group_tests_name("memfd", tests, NULL, NULL);
}
