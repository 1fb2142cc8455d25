// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/mutex.h"

#include <time.h>

#include "common/clock.h"
#include "common/tsan.h"

#if defined(HALO_TSAN)
// ThreadSanitizer's runtime (sanitizer/tsan_interface.h) intercepts
// pthread_mutex_timedlock but not pthread_mutex_clocklock (GCC 12's and
// clang 14's do not): without these annotations TSan would not see the
// lock taken, and would report the unlock and every access it guards.
void __tsan_mutex_pre_lock(void *address, unsigned flags);
int __tsan_mutex_post_lock(void *address, unsigned flags, int recursion);
#define HALO_TSAN_MUTEX_TRY_LOCK (1u << 4)
#define HALO_TSAN_MUTEX_TRY_LOCK_FAILED (1u << 5)
#endif

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
  struct timespec until = halo_clock_timespec(deadline_ns);
#if defined(HALO_TSAN)
  __tsan_mutex_pre_lock(mutex, HALO_TSAN_MUTEX_TRY_LOCK);
#endif
  int rv = pthread_mutex_clocklock(mutex, CLOCK_MONOTONIC, &until);
#if defined(HALO_TSAN)
  __tsan_mutex_post_lock(
      mutex,
      HALO_TSAN_MUTEX_TRY_LOCK | (rv ? HALO_TSAN_MUTEX_TRY_LOCK_FAILED : 0), 0);
#endif
  return rv == 0;
}
