// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/spin_window.h"

void halo_spin_window_initialize(halo_spin_window_t *window, int64_t base_ns) {
  window->last_ns = 0;
  window->gap_ns = 0;
  halo_spin_window_set_base(window, base_ns);
}

void halo_spin_window_set_base(halo_spin_window_t *window, int64_t base_ns) {
  if (base_ns < 0) base_ns = 0;
  window->base_ns = base_ns;
  window->cap_ns = base_ns * HALO_SPIN_WINDOW_CAP_FACTOR;
}

void halo_spin_window_note(halo_spin_window_t *window, int64_t now_ns) {
  if (window->last_ns) {
    int64_t gap = now_ns - window->last_ns;
    if (gap < 0) gap = 0;
    // An idle gap counts as the cap, not as seconds, so that a burst after
    // a pause starts from the longest window and then narrows.
    if (gap > window->cap_ns) gap = window->cap_ns;
    // Average over about the last 8 gaps.
    window->gap_ns += (gap - window->gap_ns) / 8;
  }
  window->last_ns = now_ns;
}

int64_t halo_spin_window_ns(const halo_spin_window_t *window) {
  int64_t ns = 2 * window->gap_ns;
  if (ns < window->base_ns) ns = window->base_ns;
  if (ns > window->cap_ns) ns = window->cap_ns;
  return ns;
}
