// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Monotonic time in nanoseconds and deadline arithmetic.
#ifndef HALO_COMMON_CLOCK_H_
#define HALO_COMMON_CLOCK_H_

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

// CLOCK_MONOTONIC in nanoseconds.
int64_t halo_clock_now_ns(void);

// now + timeout, saturating at INT64_MAX (timeouts <= 0 mean "now").
int64_t halo_clock_deadline_ns(int64_t timeout_ns);

// |ns| nanoseconds (a CLOCK_MONOTONIC time or a duration) as a timespec.
struct timespec halo_clock_timespec(int64_t ns);

// Initializes |cond| with CLOCK_MONOTONIC for its timed waits, so that
// pthread_cond_timedwait takes halo_clock_timespec(deadline_ns).
void halo_clock_cond_initialize(pthread_cond_t *cond);

// Whether something done at most every |interval_ns| (a log line, say) is
// due at |now_ns|: never done yet (*last_ns 0) or done |interval_ns| ago or
// more; then *last_ns becomes |now_ns|. The caller serializes the calls.
bool halo_clock_due(int64_t *last_ns, int64_t now_ns, int64_t interval_ns);

// How long a thread that serves work arriving at intervals (a driver's
// submission thread, a device worker's loop, the completion poller) spins
// for the next piece before it sleeps: |window_ns| where the gap before the
// previous piece (from the end of the work before it to its arrival) was
// within the window, else 0. Under load a spin saves a wake-up per piece;
// work arriving every millisecond pays one wake-up instead of a spin each
// time (docs/architecture.md "Threads that spin"). HALO_SPIN_ALWAYS=1 in
// the environment: always |window_ns| (a diagnostic, to compare).
int64_t halo_clock_spin_window_ns(int64_t previous_gap_ns, int64_t window_ns);

// The gaps before a serving thread's last two pieces of work, each from the
// end of the work before it (|done_ns|, which the thread sets when it
// finishes) to its arrival: it spins where either was within its window,
// so that work that alternates a long and a short gap (a long kernel on one
// queue, a short one on another) is still spun on.
typedef struct halo_clock_gaps_t {
  int64_t last_ns;
  int64_t before_ns;
  int64_t done_ns;  // 0: no work yet
} halo_clock_gaps_t;
// Work arrived at |arrival_ns| (when the thread found it).
void halo_clock_gaps_arrived(halo_clock_gaps_t *gaps, int64_t arrival_ns);
int64_t halo_clock_gaps_spin_ns(const halo_clock_gaps_t *gaps,
                                int64_t window_ns);

#endif  // HALO_COMMON_CLOCK_H_
