// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the host side of a semaphore (hal/semaphore.h) that device
// workers read through the shared slot: the slot's host_waits word is 1
// exactly while timepoints are linked (added, fired by a signal, removed,
// failed, added again from a callback), so that a worker reports a
// completion halod waits for at once (hal/remote/remote_ring.c); and a
// worker's report of a value the device stored wakes nobody again.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdatomic.h>
#include <stdlib.h>

#include "common/timeline.h"
#include "hal/semaphore.h"

typedef struct fixture_t {
  halo_timeline_page_t *page;
  halo_hal_semaphore_t semaphore;
} fixture_t;

static int setup(void **state) {
  fixture_t *fixture = calloc(1, sizeof(*fixture));
  fixture->page = aligned_alloc(64, sizeof(halo_timeline_page_t));
  halo_timeline_page_initialize(fixture->page, 1);
  halo_timeline_slot_activate(&fixture->page->slots[0], 0);
  halo_hal_semaphore_initialize(&fixture->semaphore, &fixture->page->slots[0],
                                0);
  *state = fixture;
  return 0;
}

static int teardown(void **state) {
  fixture_t *fixture = *state;
  halo_hal_semaphore_deinitialize(&fixture->semaphore);
  free(fixture->page);
  free(fixture);
  return 0;
}

static bool host_waits(fixture_t *fixture) {
  return halo_timeline_slot_host_waits(&fixture->page->slots[0]);
}

static int fired;
static halo_status_code_t fired_code;
static void on_fire(halo_hal_timepoint_t *timepoint, halo_status_t status) {
  (void)timepoint;
  ++fired;
  fired_code = halo_status_code(status);
  halo_status_free(status);
}

// A timepoint that adds |next| (on the same semaphore) when it fires.
static halo_hal_timepoint_t *chained;
static halo_hal_semaphore_t *chained_semaphore;
static void on_fire_add(halo_hal_timepoint_t *timepoint, halo_status_t status) {
  on_fire(timepoint, status);
  halo_hal_semaphore_add_timepoint(chained_semaphore, chained);
}

static void test_signal_clears_once_every_timepoint_fired(void **state) {
  fixture_t *fixture = *state;
  fired = 0;
  assert_false(host_waits(fixture));
  halo_hal_timepoint_t a = {.value = 2, .callback = on_fire};
  halo_hal_timepoint_t b = {.value = 4, .callback = on_fire};
  halo_hal_semaphore_add_timepoint(&fixture->semaphore, &a);
  halo_hal_semaphore_add_timepoint(&fixture->semaphore, &b);
  assert_true(host_waits(fixture));
  halo_hal_semaphore_signal(&fixture->semaphore, 3);
  assert_int_equal(fired, 1);
  assert_true(host_waits(fixture));  // b still waits
  halo_hal_semaphore_signal(&fixture->semaphore, 4);
  assert_int_equal(fired, 2);
  assert_false(host_waits(fixture));
}

static void test_reached_value_leaves_it_clear(void **state) {
  fixture_t *fixture = *state;
  fired = 0;
  halo_hal_semaphore_signal(&fixture->semaphore, 5);
  halo_hal_timepoint_t a = {.value = 5, .callback = on_fire};
  halo_hal_semaphore_add_timepoint(&fixture->semaphore, &a);  // fires at once
  assert_int_equal(fired, 1);
  assert_false(host_waits(fixture));
}

static void test_remove_clears(void **state) {
  fixture_t *fixture = *state;
  halo_hal_timepoint_t a = {.value = 1, .callback = on_fire};
  halo_hal_semaphore_add_timepoint(&fixture->semaphore, &a);
  assert_true(host_waits(fixture));
  halo_hal_semaphore_remove_timepoint(&fixture->semaphore, &a);
  assert_false(host_waits(fixture));
}

static void test_failure_clears(void **state) {
  fixture_t *fixture = *state;
  fired = 0;
  halo_hal_timepoint_t a = {.value = 1, .callback = on_fire};
  halo_hal_semaphore_add_timepoint(&fixture->semaphore, &a);
  halo_hal_semaphore_fail(&fixture->semaphore,
                          halo_status_make(HALO_STATUS_DATA_LOSS, "test"));
  assert_int_equal(fired, 1);
  assert_int_equal(fired_code, HALO_STATUS_DATA_LOSS);
  assert_false(host_waits(fixture));
}

// A callback that adds another timepoint leaves the word set for it.
// A slot put in service again starts without the word (a semaphore that
// went away with it set cannot leave it to the slot's next one).
static void test_activation_clears(void **state) {
  fixture_t *fixture = *state;
  halo_timeline_slot_set_host_waits(&fixture->page->slots[0], true);
  halo_timeline_slot_activate(&fixture->page->slots[0], 0);
  assert_false(host_waits(fixture));
}

static void test_timepoint_added_by_a_callback_keeps_it(void **state) {
  fixture_t *fixture = *state;
  fired = 0;
  halo_hal_timepoint_t next = {.value = 9, .callback = on_fire};
  chained = &next;
  chained_semaphore = &fixture->semaphore;
  halo_hal_timepoint_t first = {.value = 1, .callback = on_fire_add};
  halo_hal_semaphore_add_timepoint(&fixture->semaphore, &first);
  halo_hal_semaphore_signal(&fixture->semaphore, 1);
  assert_int_equal(fired, 1);
  assert_true(next.linked);
  assert_true(host_waits(fixture));
  halo_hal_semaphore_signal(&fixture->semaphore, 9);
  assert_int_equal(fired, 2);
  assert_false(host_waits(fixture));
}

static uint32_t epoch(fixture_t *fixture) {
  return atomic_load(&fixture->page->slots[0].epoch);
}

// A value the device stored (and whose sleepers its worker woke): the
// report's signal fires the timepoints but moves no epoch, so sleepers
// waiting for later values stay asleep; a value not stored yet is stored
// and wakes as a plain signal does, and a plain signal of a stored value
// still wakes.
static void test_signal_woken(void **state) {
  fixture_t *fixture = *state;
  fired = 0;
  halo_hal_timepoint_t a = {.value = 5, .callback = on_fire};
  halo_hal_semaphore_add_timepoint(&fixture->semaphore, &a);
  atomic_store(&fixture->page->slots[0].value, 5);  // the GPU's store
  uint32_t before = epoch(fixture);
  halo_hal_semaphore_signal_woken(&fixture->semaphore, 5);
  assert_int_equal(fired, 1);
  assert_false(host_waits(fixture));
  assert_int_equal(epoch(fixture), before);
  halo_hal_semaphore_signal_woken(&fixture->semaphore, 6);
  assert_int_equal(atomic_load(&fixture->page->slots[0].value), 6);
  assert_int_equal(epoch(fixture), before + 1);
  halo_hal_semaphore_signal(&fixture->semaphore, 6);
  assert_int_equal(epoch(fixture), before + 2);
}

// A GPU signal of 3 in flight while halod signals 5 (a client's host
// signal, an alloca's); the GPU's store, a plain write, lands late and puts
// 3 back into the slot.
static halo_timeline_slot_t *hide_reached_value(fixture_t *fixture) {
  halo_timeline_slot_t *slot = &fixture->page->slots[0];
  uint64_t previous;
  assert_null(
      halo_hal_semaphore_reserve_signal(&fixture->semaphore, 3, &previous));
  assert_null(
      halo_hal_semaphore_reserve_signal(&fixture->semaphore, 5, &previous));
  halo_hal_semaphore_signal(&fixture->semaphore, 5);
  assert_int_equal(atomic_load(&slot->value), 5);
  atomic_store(&slot->value, 3);
  return slot;
}

// A signal halod makes (a client's host signal, an alloca's) goes above a
// GPU signal still in flight; that GPU store (a plain write) lands after it
// and puts the lower value back. The GPU signal's completion restores the
// higher value and wakes its waiters again; later values pass it as usual.
static void test_reached_value_stands(void **state) {
  fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = hide_reached_value(fixture);
  uint32_t before = epoch(fixture);
  halo_hal_semaphore_signal_woken(&fixture->semaphore, 3);
  assert_int_equal(atomic_load(&slot->value), 5);
  assert_int_equal(epoch(fixture), before + 1);
  // A later GPU signal passes it: stored and woken by the device path.
  uint64_t previous;
  assert_null(
      halo_hal_semaphore_reserve_signal(&fixture->semaphore, 7, &previous));
  atomic_store(&slot->value, 7);
  halo_hal_semaphore_signal_woken(&fixture->semaphore, 7);
  assert_int_equal(atomic_load(&slot->value), 7);
  assert_int_equal(epoch(fixture), before + 1);
}

// A value reached wins over a later failure, also one a late GPU store hid
// before the failure came: a read for it is OK, not FAILED.
static void test_reached_value_outlives_failure(void **state) {
  fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = hide_reached_value(fixture);
  halo_hal_semaphore_fail(&fixture->semaphore,
                          halo_status_make(HALO_STATUS_DEVICE_LOST, "lost"));
  uint64_t value = 0;
  int32_t failure = 0;
  assert_int_equal(halo_timeline_slot_read(slot, atomic_load(&slot->generation),
                                           5, &value, &failure),
                   HALO_TIMELINE_WAIT_OK);
  assert_int_equal(value, 5);
  assert_int_equal(halo_timeline_slot_read(slot, atomic_load(&slot->generation),
                                           6, &value, &failure),
                   HALO_TIMELINE_WAIT_FAILED);
}

// Fired timepoints, in order (their user_data: an index).
static int order[16];
static int order_count;
static void on_fire_record(halo_hal_timepoint_t *timepoint,
                           halo_status_t status) {
  halo_status_free(status);
  order[order_count++] = (int)(intptr_t)timepoint->user_data;
}

// Timepoints added out of order, some of equal value, some removed (the
// first, one in the middle, the last): the others fire in value order,
// equal values in the order added, and a failure fails the rest in order.
static void test_timepoints_fire_in_value_order(void **state) {
  fixture_t *fixture = *state;
  static const uint64_t values[] = {5, 3, 3, 8, 1, 5, 9, 2};
  enum { COUNT = sizeof(values) / sizeof(values[0]) };
  halo_hal_timepoint_t timepoints[COUNT];
  for (int i = 0; i < COUNT; ++i) {
    timepoints[i] = (halo_hal_timepoint_t){.value = values[i],
                                           .callback = on_fire_record,
                                           .user_data = (void *)(intptr_t)i};
    halo_hal_semaphore_add_timepoint(&fixture->semaphore, &timepoints[i]);
  }
  // Sorted: 1(4) 2(7) 3(1) 3(2) 5(0) 5(5) 8(3) 9(6).
  halo_hal_semaphore_remove_timepoint(&fixture->semaphore, &timepoints[4]);
  halo_hal_semaphore_remove_timepoint(&fixture->semaphore, &timepoints[2]);
  halo_hal_semaphore_remove_timepoint(&fixture->semaphore, &timepoints[6]);
  halo_hal_semaphore_remove_timepoint(&fixture->semaphore, &timepoints[6]);
  order_count = 0;
  halo_hal_semaphore_signal(&fixture->semaphore, 3);
  assert_int_equal(order_count, 2);
  assert_int_equal(order[0], 7);
  assert_int_equal(order[1], 1);
  halo_hal_semaphore_signal(&fixture->semaphore, 5);
  assert_int_equal(order_count, 4);
  assert_int_equal(order[2], 0);
  assert_int_equal(order[3], 5);
  // Added after the others of its value and before a greater one.
  halo_hal_timepoint_t late = {.value = 8,
                               .callback = on_fire_record,
                               .user_data = (void *)(intptr_t)10};
  halo_hal_timepoint_t last = {.value = 12,
                               .callback = on_fire_record,
                               .user_data = (void *)(intptr_t)11};
  halo_hal_semaphore_add_timepoint(&fixture->semaphore, &last);
  halo_hal_semaphore_add_timepoint(&fixture->semaphore, &late);
  halo_hal_semaphore_fail(&fixture->semaphore,
                          halo_status_make(HALO_STATUS_ABORTED, "test"));
  assert_int_equal(order_count, 7);
  assert_int_equal(order[4], 3);
  assert_int_equal(order[5], 10);
  assert_int_equal(order[6], 11);
  assert_null(fixture->semaphore.timepoints.head);
  assert_null(fixture->semaphore.timepoints.tail);
  assert_false(host_waits(fixture));
}

// A session's waiting executions, all on one value, removed newest first
// (as its end cancels them): the list empties and nothing fires.
static void test_many_equal_timepoints_removed_newest_first(void **state) {
  fixture_t *fixture = *state;
  enum { COUNT = 65536 };
  halo_hal_timepoint_t *timepoints = calloc(COUNT, sizeof(*timepoints));
  fired = 0;
  for (int i = 0; i < COUNT; ++i) {
    timepoints[i].value = 1;
    timepoints[i].callback = on_fire;
    halo_hal_semaphore_add_timepoint(&fixture->semaphore, &timepoints[i]);
  }
  assert_ptr_equal(fixture->semaphore.timepoints.head, &timepoints[0].link);
  assert_ptr_equal(fixture->semaphore.timepoints.tail,
                   &timepoints[COUNT - 1].link);
  for (int i = COUNT - 1; i >= 0; --i) {
    halo_hal_semaphore_remove_timepoint(&fixture->semaphore, &timepoints[i]);
  }
  assert_null(fixture->semaphore.timepoints.head);
  assert_null(fixture->semaphore.timepoints.tail);
  assert_false(host_waits(fixture));
  halo_hal_semaphore_signal(&fixture->semaphore, 1);
  assert_int_equal(fired, 0);
  free(timepoints);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_signal_clears_once_every_timepoint_fired),
      T(test_reached_value_leaves_it_clear),
      T(test_remove_clears),
      T(test_failure_clears),
      T(test_timepoint_added_by_a_callback_keeps_it),
      T(test_activation_clears),
      T(test_signal_woken),
      T(test_reached_value_stands),
      T(test_reached_value_outlives_failure),
      T(test_timepoints_fire_in_value_order),
      T(test_many_equal_timepoints_removed_newest_first),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
