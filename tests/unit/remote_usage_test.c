// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A device worker's usage reports (USAGE, hal/remote/remote_link.h) as the
// supervisor's proxy (hal/remote/remote_device.c) takes them, from a fake
// worker (this binary, run with --fake-worker): its first report is what
// the device's query_usage answers; malformed ones (no payload, short,
// long, reserved bits set) are refused with one log line (at most one a
// minute) and leave the last good report standing, the worker still
// served; a later good one replaces it.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/status.h"
#include "hal/device.h"
#include "hal/remote/remote_device.h"
#include "hal/remote/remote_link.h"

#define WORKER_FD 3

static const char *test_program;

static const halo_hal_device_usage_t kFirst = {.graph_bytes = 3u << 20,
                                               .graph_bytes_limit = 8u << 20,
                                               .graph_instances = 1};
static const halo_hal_device_usage_t kSecond = {.graph_bytes = 6u << 20,
                                                .graph_bytes_limit = 8u << 20,
                                                .graph_instances = 2};

// ---------------------------------------------------------------- the worker

static void worker_send(halo_remote_link_t *link, uint32_t type, uint64_t id,
                        const void *payload, size_t length) {
  halo_remote_part_t part = {payload, length};
  halo_status_t status = halo_remote_link_send(link, type, id, &part, 1, -1);
  if (status) {
    fprintf(stderr, "fake worker: %s\n", halo_status_message(status));
    _exit(2);
  }
}

// READY and the first report; then at the second ALLOCATE four malformed
// reports, at the third the second report, each before the call's reply
// (so that the proxy took them when the call returns). Ends when the link
// closes.
static int fake_worker(void) {
  halo_remote_link_t link;
  halo_remote_link_initialize(&link, WORKER_FD);
  halo_remote_ready_t ready = {
      .version = HALO_REMOTE_LINK_VERSION,
      .header_size = sizeof(halo_remote_header_t),
      .execute_size = sizeof(halo_remote_execute_t),
      .command_size = sizeof(halo_hal_command_t),
      .pid = getpid(),
  };
  snprintf(ready.info.driver, sizeof(ready.info.driver), "fake");
  worker_send(&link, HALO_REMOTE_READY, 0, &ready, sizeof(ready));
  worker_send(&link, HALO_REMOTE_USAGE, 0, &kFirst, sizeof(kFirst));
  uint32_t allocations = 0;
  for (;;) {
    halo_remote_header_t header;
    void *payload = NULL;
    int fd = -1;
    halo_status_t status =
        halo_remote_link_receive(&link, &header, &payload, &fd);
    if (status) {
      halo_status_free(status);
      break;
    }
    if (fd >= 0) close(fd);
    free(payload);
    if (header.type != HALO_REMOTE_ALLOCATE) continue;
    if (++allocations == 2) {
      uint8_t bytes[sizeof(halo_hal_device_usage_t) + 8];
      memset(bytes, 0xee, sizeof(bytes));
      worker_send(&link, HALO_REMOTE_USAGE, 0, NULL, 0);
      worker_send(&link, HALO_REMOTE_USAGE, 0, bytes,
                  sizeof(halo_hal_device_usage_t) - 1);
      worker_send(&link, HALO_REMOTE_USAGE, 0, bytes, sizeof(bytes));
      halo_hal_device_usage_t reserved = kSecond;
      reserved.reserved = 1;
      worker_send(&link, HALO_REMOTE_USAGE, 0, &reserved, sizeof(reserved));
    } else if (allocations == 3) {
      worker_send(&link, HALO_REMOTE_USAGE, 0, &kSecond, sizeof(kSecond));
    }
    halo_remote_reply_t reply = {.code = HALO_STATUS_OK,
                                 .values = {0x1000u * allocations, 0}};
    worker_send(&link, HALO_REMOTE_REPLY, header.id, &reply, sizeof(reply));
  }
  halo_remote_link_deinitialize(&link);
  return 0;
}

// ---------------------------------------------------------------- the test

static halo_hal_device_t *start_device(void) {
  const char *const argv[] = {test_program, "--fake-worker", NULL};
  halo_hal_remote_options_t options = {
      .program = "/proc/self/exe",
      .argv = argv,
      .label = "device 0, trust domain test",
  };
  halo_hal_device_t *device = NULL;
  halo_status_t status = halo_hal_remote_device_create(&options, &device);
  if (status)
    fail_msg("starting the fake worker: %s", halo_status_message(status));
  return device;
}

static void allocate(halo_hal_device_t *device) {
  halo_hal_allocator_t *allocator = device->allocator;
  uint64_t address = 0;
  halo_status_t status = allocator->vtable->allocate(allocator, 64, &address);
  if (status) fail_msg("allocate: %s", halo_status_message(status));
  assert_int_not_equal(address, 0);
}

static void expect_usage(halo_hal_device_t *device,
                         const halo_hal_device_usage_t *expected) {
  halo_hal_device_usage_t usage;
  assert_true(halo_hal_device_query_usage(device, &usage));
  assert_int_equal(usage.graph_bytes, expected->graph_bytes);
  assert_int_equal(usage.graph_bytes_limit, expected->graph_bytes_limit);
  assert_int_equal(usage.graph_instances, expected->graph_instances);
  assert_int_equal(usage.reserved, 0);
}

// Runs one allocation with stderr (where the proxy's reader logs) going to
// a file; returns what was logged meanwhile (the caller frees it).
static char *allocate_logged(halo_hal_device_t *device) {
  int log = memfd_create("log", MFD_CLOEXEC);
  assert_true(log >= 0);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  assert_true(saved >= 0);
  assert_true(dup2(log, STDERR_FILENO) >= 0);
  allocate(device);
  fflush(stderr);
  assert_true(dup2(saved, STDERR_FILENO) >= 0);
  close(saved);
  off_t size = lseek(log, 0, SEEK_END);
  char *text = calloc(1, (size_t)size + 1);
  assert_non_null(text);
  assert_int_equal(pread(log, text, (size_t)size, 0), size);
  close(log);
  return text;
}

static void test_usage_reports(void **state) {
  (void)state;
  halo_hal_device_t *device = start_device();
  // The first report came before the call's reply.
  allocate(device);
  expect_usage(device, &kFirst);

  // Malformed reports: refused, logged once, the first report stands and
  // the worker is served.
  char *logged = allocate_logged(device);
  const char *line = strstr(
      logged,
      "device 0, trust domain test: the worker's usage report is refused: a "
      "USAGE message of 0 bytes (24 expected) (1 refused so far");
  const char *after = line ? strchr(line, '\n') : NULL;
  if (!after || strstr(after, "usage report is refused")) {
    fail_msg("expected one line of the refused reports, logged:\n%s", logged);
  }
  free(logged);
  expect_usage(device, &kFirst);
  assert_true(halo_hal_remote_device_is_ready(device));

  // A good report replaces it.
  allocate(device);
  expect_usage(device, &kSecond);

  device->vtable->destroy(device);
  assert_int_equal(halo_hal_remote_wait_all(5000000000ll), 0);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--fake-worker") == 0) {
    return fake_worker();
  }
  test_program = argv[0];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage_reports),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
