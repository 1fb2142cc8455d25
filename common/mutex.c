// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/mutex.h"

#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/tsan.h"

void halo_mutex_initialize(pthread_mutex_t *mutex) {
  pthread_mutexattr_t attributes;
  pthread_mutexattr_init(&attributes);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
  pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
  pthread_mutex_init(mutex, &attributes);
  pthread_mutexattr_destroy(&attributes);
}

bool halo_mutex_lock_until(pthread_mutex_t *mutex, int64_t deadline_ns) {
  if (pthread_mutex_trylock(mutex) == 0) return true;
  if (deadline_ns <= halo_clock_now_ns()) return false;
#if defined(HALO_TSAN)
  // ThreadSanitizer's runtimes differ: GCC 12's and clang 14's do not
  // intercept pthread_mutex_clocklock (the lock would go unseen, and every
  // access it guards be reported), newer ones do (hand annotations would
  // then count the lock twice). Under TSan the wait is a try every 50 us
  // until the deadline, which every runtime sees.
  for (;;) {
    usleep(50);
    if (pthread_mutex_trylock(mutex) == 0) return true;
    if (deadline_ns <= halo_clock_now_ns()) return false;
  }
#else
  struct timespec until = halo_clock_timespec(deadline_ns);
  return pthread_mutex_clocklock(mutex, CLOCK_MONOTONIC, &until) == 0;
#endif
}
