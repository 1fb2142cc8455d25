// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Logging to stderr, one line per event, journald-friendly: when stderr is
// the journal ($JOURNAL_STREAM names stderr's device and inode) lines carry
// a <N> syslog priority prefix instead of a timestamp.
//
// Thread-safe.
#ifndef HALO_COMMON_LOG_H_
#define HALO_COMMON_LOG_H_

typedef enum halo_log_level_e {
  HALO_LOG_ERROR = 0,
  HALO_LOG_WARN = 1,
  HALO_LOG_INFO = 2,
  HALO_LOG_DEBUG = 3,
} halo_log_level_t;

void halo_log_set_level(halo_log_level_t level);
halo_log_level_t halo_log_level(void);
// Parses "error", "warn", "info", "debug"; returns -1 if unknown.
int halo_log_level_parse(const char *name);

void halo_log(halo_log_level_t level, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

#define HALO_LOG_ERROR(...) halo_log(HALO_LOG_ERROR, __VA_ARGS__)
#define HALO_LOG_WARN(...) halo_log(HALO_LOG_WARN, __VA_ARGS__)
#define HALO_LOG_INFO(...) halo_log(HALO_LOG_INFO, __VA_ARGS__)
#define HALO_LOG_DEBUG(...)                  \
  do {                                       \
    if (halo_log_level() >= HALO_LOG_DEBUG)  \
      halo_log(HALO_LOG_DEBUG, __VA_ARGS__); \
  } while (0)

#endif  // HALO_COMMON_LOG_H_
