// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/mutex.h"

#include <stdatomic.h>
#include <time.h>

#include "common/clock.h"
#include "common/tsan.h"

#if defined(HALO_TSAN)
#include <dlfcn.h>

// ThreadSanitizer's interface (sanitizer/tsan_interface.h).
void __tsan_mutex_pre_lock(void *address, unsigned flags);
void __tsan_mutex_post_lock(void *address, unsigned flags, int recursion);
#define HALO_TSAN_MUTEX_TRY_LOCK (1u << 4)
#define HALO_TSAN_MUTEX_TRY_LOCK_FAILED (1u << 5)

// Whether the ThreadSanitizer runtime intercepts pthread_mutex_clocklock:
// GCC 12's and clang 14's do not (TSan would not see the lock taken, and
// would report every access it guards), newer ones do (annotations would
// then count the lock twice). Intercepted, the name resolves into the
// runtime's own object (its library, or the program that links it
// statically), where __tsan_mutex_pre_lock is.
static bool halo_mutex_tsan_intercepts_clocklock(void) {
  static atomic_int known;  // 0: not looked yet; 1: no; 2: yes
  int value = atomic_load_explicit(&known, memory_order_relaxed);
  if (value == 0) {
    void *clock = dlsym(RTLD_DEFAULT, "pthread_mutex_clocklock");
    Dl_info clock_info, runtime_info;
    value = clock && dladdr(clock, &clock_info) &&
                    dladdr((void *)&__tsan_mutex_pre_lock, &runtime_info) &&
                    clock_info.dli_fbase == runtime_info.dli_fbase
                ? 2
                : 1;
    atomic_store_explicit(&known, value, memory_order_relaxed);
  }
  return value == 2;
}
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
  bool annotate = !halo_mutex_tsan_intercepts_clocklock();
  if (annotate) __tsan_mutex_pre_lock(mutex, HALO_TSAN_MUTEX_TRY_LOCK);
  int rv = pthread_mutex_clocklock(mutex, CLOCK_MONOTONIC, &until);
  if (annotate) {
    __tsan_mutex_post_lock(
        mutex,
        HALO_TSAN_MUTEX_TRY_LOCK | (rv ? HALO_TSAN_MUTEX_TRY_LOCK_FAILED : 0),
        0);
  }
  return rv == 0;
#else
  return pthread_mutex_clocklock(mutex, CLOCK_MONOTONIC, &until) == 0;
#endif
}
