// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/oom_score.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

static const char kOomScorePath[] = "/proc/self/oom_score_adj";

// Opened for writing by halod_oom_score_prepare, while the process was
// still dumpable; -1 if not (then halod_oom_score_write opens it).
static int g_write_fd = -1;

void halod_oom_score_prepare(void) {
  if (g_write_fd < 0) g_write_fd = open(kOomScorePath, O_WRONLY | O_CLOEXEC);
}

bool halod_oom_score_read(int *out_score) {
  *out_score = 0;
  int fd = open(kOomScorePath, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[16];
  ssize_t length = read(fd, text, sizeof(text) - 1);
  int error = errno;
  close(fd);
  if (length <= 0) {
    errno = length < 0 ? error : EIO;
    return false;
  }
  text[length] = '\0';
  char *end = NULL;
  errno = 0;
  long score = strtol(text, &end, 10);
  if (errno || end == text || score < -1000 || score > 1000) {
    errno = EIO;
    return false;
  }
  *out_score = (int)score;
  return true;
}

bool halod_oom_score_write(int score) {
  int fd =
      g_write_fd >= 0 ? g_write_fd : open(kOomScorePath, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[16];
  int length = snprintf(text, sizeof(text), "%d", score);
  ssize_t written = pwrite(fd, text, (size_t)length, 0);
  int error = errno;
  if (fd != g_write_fd) close(fd);
  if (written != length) {
    errno = written < 0 ? error : EIO;
    return false;
  }
  return true;
}

int halod_oom_score_for_worker(int inherited) {
  int score = inherited + HALOD_OOM_SCORE_WORKER_ABOVE;
  return score > 1000 ? 1000 : score;
}

void halod_oom_score_raise_worker(void) {
  int inherited = 0;
  if (!halod_oom_score_read(&inherited)) {
    HALO_LOG_WARN(
        "device worker: cannot read %s (%s): its oom_score_adj "
        "stays halod's, and the kernel may kill halod first",
        kOomScorePath, strerror(errno));
    return;
  }
  int score = halod_oom_score_for_worker(inherited);
  if (score <= inherited) return;
  if (!halod_oom_score_write(score)) {
    HALO_LOG_WARN(
        "device worker: oom_score_adj %d not set (%s): it stays %d, "
        "halod's, and the kernel may kill halod first",
        score, strerror(errno), inherited);
  }
}
