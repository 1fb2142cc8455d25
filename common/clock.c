// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/clock.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
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

struct timespec halo_clock_timespec(int64_t ns) {
  return (struct timespec){.tv_sec = ns / 1000000000,
                           .tv_nsec = ns % 1000000000};
}

void halo_clock_cond_initialize(pthread_cond_t *cond) {
  pthread_condattr_t attributes;
  pthread_condattr_init(&attributes);
  pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
  pthread_cond_init(cond, &attributes);
  pthread_condattr_destroy(&attributes);
}

// HALO_SPIN_ALWAYS=1 in the environment: the whole window every time (a
// diagnostic, to compare). Read once.
static bool halo_clock_spin_always(void) {
  static _Atomic int cached = -1;
  int value = atomic_load_explicit(&cached, memory_order_relaxed);
  if (value < 0) {
    const char *text = getenv("HALO_SPIN_ALWAYS");
    value = text && strcmp(text, "1") == 0;
    atomic_store_explicit(&cached, value, memory_order_relaxed);
  }
  return value;
}

bool halo_clock_due(int64_t *last_ns, int64_t now_ns, int64_t interval_ns) {
  if (*last_ns != 0 && now_ns - *last_ns < interval_ns) return false;
  *last_ns = now_ns;
  return true;
}

int64_t halo_clock_spin_window_ns(int64_t previous_gap_ns, int64_t window_ns) {
  if (previous_gap_ns <= window_ns || halo_clock_spin_always()) {
    return window_ns;
  }
  return 0;
}

void halo_clock_gaps_arrived(halo_clock_gaps_t *gaps, int64_t arrival_ns) {
  gaps->before_ns = gaps->last_ns;
  gaps->last_ns = gaps->done_ns ? arrival_ns - gaps->done_ns : 0;
}

int64_t halo_clock_gaps_spin_ns(const halo_clock_gaps_t *gaps,
                                int64_t window_ns) {
  int64_t shorter =
      gaps->last_ns < gaps->before_ns ? gaps->last_ns : gaps->before_ns;
  return halo_clock_spin_window_ns(shorter, window_ns);
}
