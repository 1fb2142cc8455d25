// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/stop_watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

// The watchdog's thread: sleeps until the deadline, then ends the process.
static void *halod_stop_watchdog_main(void *argument) {
  halod_stop_watchdog_t *watchdog = argument;
  struct timespec deadline = halo_clock_timespec(watchdog->deadline_ns);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) ==
         EINTR) {
  }
  HALO_LOG_ERROR(
      "the stop did not finish within %.1f s of the signal (it was %s); "
      "exiting now",
      (double)(watchdog->deadline_ns - watchdog->start_ns) / 1e9,
      atomic_load(&watchdog->phase));
  fflush(NULL);
  _exit(1);
}

void halod_stop_watchdog_start(halod_stop_watchdog_t *watchdog,
                               int64_t deadline_ns) {
  if (watchdog->started) return;
  watchdog->started = true;
  watchdog->start_ns = halo_clock_now_ns();
  watchdog->deadline_ns = deadline_ns;
  atomic_store(&watchdog->phase, "starting to stop");
  pthread_t thread;
  int rv = pthread_create(&thread, NULL, halod_stop_watchdog_main, watchdog);
  if (rv != 0) {
    HALO_LOG_WARN("no stop watchdog (pthread_create: %s); stopping unguarded",
                  strerror(rv));
    return;
  }
  pthread_detach(thread);
}

void halod_stop_watchdog_set_phase(halod_stop_watchdog_t *watchdog,
                                   const char *phase) {
  atomic_store(&watchdog->phase, phase);
}
