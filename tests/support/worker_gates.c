// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// LD_PRELOADed into halod by tests: holds halod's device workers (halod
// --worker ...) at points a test chooses, each controlled by a file whose
// path an environment variable names. halod itself, and every other
// program the variables reach, is left alone.
//
// - $HALO_TEST_WORKER_GATE (worker_start_test): holds back the start of a
//   worker as a wedged driver would (a CUDA context's creation that does
//   not return): while the file exists, a worker starting waits before it
//   does anything; while that file says "fail", the worker exits 3 instead
//   (a start that fails); where it says "once", the first worker to read
//   it removes it and exits 3 (one start fails, the next goes).
// - $HALO_TEST_REPORT_HOLD (haloctl_test): holds a worker right after it
//   sent a RING_COMPLETE, before it frees the flight table entries of the
//   executions it reports, for as long as the file exists: what a worker
//   preempted between the send and the free would show halod, kept for as
//   long as the test looks. While it holds, the file named with ".held"
//   after it exists.
// - $HALO_TEST_REPORT_FAIL (haloctl_test): while the file exists, a
//   worker's send of a RING_COMPLETE fails before its first byte (EPIPE),
//   as a send for want of memory would: the report is lost, the link
//   stays.
// - $HALO_TEST_REPORT_HALF (hung_worker_test): while the file holds this
//   worker's pid, its next report of completed work (COMPLETE or
//   RING_COMPLETE, with a payload) sends only the message's header, and
//   the worker then stops itself (SIGSTOP): a worker stopped halfway
//   through a message, which halod's reader waits for in its receive.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hal/remote/remote_link.h"

// $HALO_TEST_REPORT_HOLD and $HALO_TEST_REPORT_FAIL in a worker, else
// NULL.
static const char *worker_gates_report_hold;
static const char *worker_gates_report_fail;
static const char *worker_gates_report_half;

// The link header |message| starts with (its first part); false if none.
static bool worker_gates_header(const struct msghdr *message,
                                halo_remote_header_t *out_header) {
  if (message->msg_iovlen == 0 ||
      message->msg_iov[0].iov_len < sizeof(*out_header)) {
    return false;
  }
  memcpy(out_header, message->msg_iov[0].iov_base, sizeof(*out_header));
  return true;
}

// Whether |message| is a RING_COMPLETE.
static bool worker_gates_is_report(const struct msghdr *message) {
  halo_remote_header_t header;
  return worker_gates_header(message, &header) &&
         header.type == HALO_REMOTE_RING_COMPLETE;
}

// Whether |message| reports completed work and has a payload after its
// header, in parts of its own (iov[0] the header alone).
static bool worker_gates_is_completion(const struct msghdr *message) {
  halo_remote_header_t header;
  return message->msg_iovlen >= 2 &&
         message->msg_iov[0].iov_len == sizeof(header) &&
         worker_gates_header(message, &header) &&
         (header.type == HALO_REMOTE_COMPLETE ||
          header.type == HALO_REMOTE_RING_COMPLETE) &&
         header.length > 0;
}

// Whether the file |path| holds this process's pid.
static bool worker_gates_names_me(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[32] = {0};
  ssize_t length = read(fd, text, sizeof(text) - 1);
  close(fd);
  return length > 0 && atoi(text) == (int)getpid();
}

// Whether this process's command line has the argument "--worker".
static bool worker_gates_is_worker(void) {
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

__attribute__((constructor)) static void worker_gates_start(void) {
  const char *path = getenv("HALO_TEST_WORKER_GATE");
  const char *hold = getenv("HALO_TEST_REPORT_HOLD");
  const char *fail = getenv("HALO_TEST_REPORT_FAIL");
  const char *half = getenv("HALO_TEST_REPORT_HALF");
  if ((!path && !hold && !fail && !half) || !worker_gates_is_worker()) return;
  worker_gates_report_hold = hold;
  worker_gates_report_fail = fail;
  worker_gates_report_half = half;
  if (!path) return;
  for (;;) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;  // open: the worker starts
    char word[8] = {0};
    ssize_t length = read(fd, word, sizeof(word) - 1);
    close(fd);
    if (length >= 4 && memcmp(word, "fail", 4) == 0) _exit(3);
    if (length >= 4 && memcmp(word, "once", 4) == 0 && unlink(path) == 0) {
      _exit(3);
    }
    usleep(10000);
  }
}

// halod defines a sendmsg of its own, which calls the next one: this one.
__attribute__((visibility("default"))) ssize_t sendmsg(
    int fd, const struct msghdr *message, int flags) {
  static ssize_t (*next)(int, const struct msghdr *, int);
  if (!next) {
    next = (ssize_t(*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT,
                                                              "sendmsg");
  }
  if (worker_gates_report_fail && access(worker_gates_report_fail, F_OK) == 0 &&
      worker_gates_is_report(message)) {
    errno = EPIPE;
    return -1;
  }
  if (worker_gates_report_half && worker_gates_is_completion(message) &&
      worker_gates_names_me(worker_gates_report_half)) {
    struct msghdr header_only = *message;
    header_only.msg_iovlen = 1;
    ssize_t sent = next(fd, &header_only, flags);
    raise(SIGSTOP);  // the rest never comes: halod kills this worker
    return sent;
  }
  // Only a send that began once the file existed holds: one that went
  // before it (the reporter then descheduled) reports what the test waited
  // for already.
  bool hold =
      worker_gates_report_hold && access(worker_gates_report_hold, F_OK) == 0;
  ssize_t sent = next(fd, message, flags);
  if (hold && sent > 0 && worker_gates_is_report(message)) {
    // Says it holds, then holds.
    char held[4096];
    snprintf(held, sizeof(held), "%s.held", worker_gates_report_hold);
    close(open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    while (access(worker_gates_report_hold, F_OK) == 0) usleep(1000);
    unlink(held);
  }
  return sent;
}
