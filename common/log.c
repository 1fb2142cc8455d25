// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Atomic int halo__log_level = HALO_LOG_INFO;

// Whether stderr is the journal: $JOURNAL_STREAM names its device and inode
// (a program started by systemd may pass the variable on to a child whose
// stderr is something else). -1: not decided yet.
static _Atomic int halo__log_journal = -1;

static bool halo__log_to_journal(void) {
  int journal = atomic_load(&halo__log_journal);
  if (journal >= 0) return journal;
  journal = 0;
  const char *stream = getenv("JOURNAL_STREAM");
  unsigned long long device, inode;
  struct stat st;
  if (stream && sscanf(stream, "%llu:%llu", &device, &inode) == 2 &&
      fstat(STDERR_FILENO, &st) == 0 &&
      (unsigned long long)st.st_dev == device &&
      (unsigned long long)st.st_ino == inode) {
    journal = 1;
  }
  atomic_store(&halo__log_journal, journal);
  return journal;
}

void halo_log_set_level(halo_log_level_t level) {
  atomic_store(&halo__log_level, (int)level);
}

halo_log_level_t halo_log_level(void) {
  return (halo_log_level_t)atomic_load(&halo__log_level);
}

int halo_log_level_parse(const char *name) {
  static const char *const names[] = {"error", "warn", "info", "debug"};
  for (int i = 0; i < 4; ++i) {
    if (strcmp(name, names[i]) == 0) return i;
  }
  return -1;
}

void halo_log(halo_log_level_t level, const char *format, ...) {
  if ((int)level > atomic_load(&halo__log_level)) return;
  static const char *const tags[] = {"error", "warn", "info", "debug"};
  // syslog priorities: err=3, warning=4, info=6, debug=7.
  static const int priorities[] = {3, 4, 6, 7};
  char line[2048];
  int used;
  if (halo__log_to_journal()) {
    used = snprintf(line, sizeof(line), "<%d>", priorities[level]);
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    used =
        snprintf(line, sizeof(line),
                 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s: ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000, tags[level]);
  }
  va_list args;
  va_start(args, format);
  vsnprintf(line + used, sizeof(line) - (size_t)used, format, args);
  va_end(args);
  // One fputs per line so concurrent threads do not interleave.
  flockfile(stderr);
  fputs(line, stderr);
  fputc('\n', stderr);
  funlockfile(stderr);
}
