// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// How long a polling thread spins for its next event before it sleeps,
// adapted to how often events come.
//
// Each hop of an execution (the client's ring to halod's loop, halod to a
// device worker over its link, the worker's submission thread, the CUDA
// completion poller, back again) polls a while for its next event before
// it sleeps, so that a steady stream of work costs no wake-ups. With a
// fixed window the chain is bistable: once one hop takes longer than the
// next side's window, that side sleeps and every later step pays a wake-up,
// which keeps the steps long (measured on an H100: some runs of the same
// benchmark settled at 40-100 us a step instead of 15-18 us). A window of
// twice the recent gap between events, between |base_ns| and |cap_ns|,
// keeps a side awake for as long as work comes at least that often, and
// lets it sleep once the gaps are longer than the cap; the CPU this costs
// still stops with the traffic (after one window of at most |cap_ns|).
//
// One thread owns each window (no locking).
#ifndef HALO_COMMON_SPIN_WINDOW_H_
#define HALO_COMMON_SPIN_WINDOW_H_

#include <stdint.h>

typedef struct halo_spin_window_t {
  int64_t base_ns;  // the shortest window (the setting)
  int64_t cap_ns;   // the longest
  int64_t last_ns;  // the last event (CLOCK_MONOTONIC; 0: none yet)
  int64_t gap_ns;   // moving average of the gaps, each clamped to cap_ns
} halo_spin_window_t;

// |base_ns| 0 turns spinning off (the window is always 0).
void halo_spin_window_initialize(halo_spin_window_t *window, int64_t base_ns);

// A new base (a setting reloaded); the cap follows.
void halo_spin_window_set_base(halo_spin_window_t *window, int64_t base_ns);

// An event (work arrived) at |now_ns|.
void halo_spin_window_note(halo_spin_window_t *window, int64_t now_ns);

// How long to spin after the last event: 2 x the average gap, at least
// base_ns and at most cap_ns (HALO_SPIN_WINDOW_CAP_FACTOR x base_ns).
int64_t halo_spin_window_ns(const halo_spin_window_t *window);

#define HALO_SPIN_WINDOW_CAP_FACTOR 4

#endif  // HALO_COMMON_SPIN_WINDOW_H_
