// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/clock.h"

#include <time.h>

int64_t halo_clock_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int64_t halo_clock_deadline_ns(int64_t timeout_ns) {
  int64_t now = halo_clock_now_ns();
  if (timeout_ns <= 0) return now;
  if (timeout_ns > INT64_MAX - now) return INT64_MAX;
  return now + timeout_ns;
}
