// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// LD_PRELOADed into halod by haloctl_test: holds a device worker (halod
// --worker ...) right after it sent a RING_COMPLETE, before it frees the
// flight table entries of the executions it reports, for as long as the
// file that $HALO_TEST_REPORT_HOLD names exists: what a worker preempted
// between the send and the free would show halod, kept for as long as the
// test looks. halod itself, and every other program the variable reaches,
// is left alone. While it holds, the file named with ".held" after it
// exists.
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hal/remote/remote_link.h"

static const char *worker_report_hold_path;

// Whether this process's command line has the argument "--worker".
static bool worker_report_hold_is_worker(void) {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[4096];
  ssize_t length = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (length <= 0) return false;
  text[length] = '\0';
  for (ssize_t i = 0; i < length; i += (ssize_t)strlen(text + i) + 1) {
    if (strcmp(text + i, "--worker") == 0) return true;
  }
  return false;
}

__attribute__((constructor)) static void worker_report_hold_start(void) {
  const char *path = getenv("HALO_TEST_REPORT_HOLD");
  if (path && worker_report_hold_is_worker()) worker_report_hold_path = path;
}

__attribute__((visibility("default"))) ssize_t sendmsg(
    int fd, const struct msghdr *message, int flags) {
  static ssize_t (*next)(int, const struct msghdr *, int);
  if (!next) {
    next = (ssize_t(*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT,
                                                              "sendmsg");
  }
  ssize_t sent = next(fd, message, flags);
  halo_remote_header_t header;
  if (sent >= (ssize_t)sizeof(header) && worker_report_hold_path &&
      message->msg_iovlen > 0 &&
      message->msg_iov[0].iov_len >= sizeof(header)) {
    memcpy(&header, message->msg_iov[0].iov_base, sizeof(header));
    if (header.type == HALO_REMOTE_RING_COMPLETE &&
        access(worker_report_hold_path, F_OK) == 0) {
      // Says it holds (the path with ".held" after it), then holds.
      char held[4096];
      snprintf(held, sizeof(held), "%s.held", worker_report_hold_path);
      close(open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
      while (access(worker_report_hold_path, F_OK) == 0) usleep(1000);
      unlink(held);
    }
  }
  return sent;
}
