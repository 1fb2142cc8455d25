// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The last resort of halod's stop: a thread that ends the process if the
// stop has not finished by a deadline. halod_stop bounds each thing it
// waits for (sockets, executions, device workers), so the watchdog firing
// means a wait nobody bounded: it logs what the stop was doing and exits
// with status 1 rather than leave clients and the service manager waiting.
//
// Thread-safety: start on the loop thread, once; set_phase from any thread.
#ifndef HALOD_STOP_WATCHDOG_H_
#define HALOD_STOP_WATCHDOG_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct halod_stop_watchdog_t {
  int64_t start_ns;
  int64_t deadline_ns;  // CLOCK_MONOTONIC
  _Atomic(const char *) phase;
  bool started;
} halod_stop_watchdog_t;

// Starts the watchdog: at |deadline_ns| (CLOCK_MONOTONIC) the process
// exits with status 1 unless it exited already. The thread is never joined
// (the process exit ends it). Without a thread (pthread_create failed) the
// stop goes on unguarded, logged.
void halod_stop_watchdog_start(halod_stop_watchdog_t *watchdog,
                               int64_t deadline_ns);

// What the stop is doing now (a string literal), for the watchdog's log
// line.
void halod_stop_watchdog_set_phase(halod_stop_watchdog_t *watchdog,
                                   const char *phase);

#endif  // HALOD_STOP_WATCHDOG_H_
