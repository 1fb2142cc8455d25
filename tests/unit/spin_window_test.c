// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The adaptive polling window (common/spin_window.h): the base while events
// come often, twice the gap while they come less often, the cap past it,
// and back to the base once they come often again.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
// clang-format off
#include <cmocka.h>
// clang-format on

#include "common/spin_window.h"

enum { US = 1000 };

// |count| events |gap_ns| apart from |*now|.
static void events(halo_spin_window_t *window, int64_t *now, int64_t gap_ns,
                   int count) {
  for (int i = 0; i < count; ++i) {
    *now += gap_ns;
    halo_spin_window_note(window, *now);
  }
}

static void test_base_while_events_come_often(void **state) {
  (void)state;
  halo_spin_window_t window;
  halo_spin_window_initialize(&window, 50 * US);
  assert_int_equal(halo_spin_window_ns(&window), 50 * US);
  int64_t now = 1000000;
  events(&window, &now, 15 * US, 100);
  assert_int_equal(halo_spin_window_ns(&window), 50 * US);
}

static void test_twice_the_gap_when_events_come_less_often(void **state) {
  (void)state;
  halo_spin_window_t window;
  halo_spin_window_initialize(&window, 50 * US);
  int64_t now = 1000000;
  events(&window, &now, 90 * US, 200);
  // The average converges to the gap: the window to 180 us (within the
  // rounding of the integer average).
  int64_t ns = halo_spin_window_ns(&window);
  assert_true(ns > 170 * US && ns <= 180 * US);
  // A slow step is caught by the next window, not missed: it is longer than
  // the gap.
  assert_true(ns > 90 * US);
}

static void test_capped_and_back_to_the_base(void **state) {
  (void)state;
  halo_spin_window_t window;
  halo_spin_window_initialize(&window, 50 * US);
  assert_int_equal(window.cap_ns, 50 * US * HALO_SPIN_WINDOW_CAP_FACTOR);
  int64_t now = 1000000;
  // Idle gaps (seconds) count as the cap: the window is the cap.
  events(&window, &now, 3000000ll * US, 50);
  assert_int_equal(halo_spin_window_ns(&window), window.cap_ns);
  // Traffic again, often: back to the base within a few dozen events.
  events(&window, &now, 10 * US, 40);
  assert_int_equal(halo_spin_window_ns(&window), 50 * US);
}

static void test_zero_base_never_spins(void **state) {
  (void)state;
  halo_spin_window_t window;
  halo_spin_window_initialize(&window, 0);
  int64_t now = 1000000;
  events(&window, &now, 90 * US, 20);
  assert_int_equal(halo_spin_window_ns(&window), 0);
  // A new base (a reloaded setting) takes effect, cap included.
  halo_spin_window_set_base(&window, 20 * US);
  assert_int_equal(window.cap_ns, 20 * US * HALO_SPIN_WINDOW_CAP_FACTOR);
  events(&window, &now, 5 * US, 40);
  assert_int_equal(halo_spin_window_ns(&window), 20 * US);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_base_while_events_come_often),
      cmocka_unit_test(test_twice_the_gap_when_events_come_less_often),
      cmocka_unit_test(test_capped_and_back_to_the_base),
      cmocka_unit_test(test_zero_base_never_spins),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
