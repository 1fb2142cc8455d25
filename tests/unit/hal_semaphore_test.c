// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the host side of a semaphore (hal/semaphore.h) that device
// workers read through the shared slot: the slot's host_waits word is 1
// exactly while timepoints are linked (added, fired by a signal, removed,
// failed, added again from a callback), so that a worker reports a
// completion halod waits for at once (hal/remote/remote_ring.c); a
// worker's report of a value the device stored wakes nobody again; and the
// timepoints' search tree stays the list's order, balanced, whatever order
// values are added, removed, reached or failed in.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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

// The timepoints' search tree (halo_hal_semaphore_t): its in-order walk
// is the list, node by node; every parent pointer, height and balance is
// right; the list is sorted by value, equal values in the order added
// (their user_data: increasing indices). Returns how many are linked.
static int tree_check(const halo_hal_timepoint_t *node,
                      const halo_hal_timepoint_t *parent,
                      const halo_list_link_t **next, int *count) {
  if (!node) return 0;
  assert_ptr_equal(node->parent, parent);
  int left = tree_check(node->left, node, next, count);
  assert_non_null(*next);
  assert_ptr_equal(*next, &node->link);  // in order: the list's next
  assert_true(node->linked);
  *next = (*next)->next;
  ++*count;
  int right = tree_check(node->right, node, next, count);
  assert_true(left - right <= 1 && right - left <= 1);
  int height = 1 + (left > right ? left : right);
  assert_int_equal(node->height, height);
  return height;
}

static int check_timepoints(fixture_t *fixture) {
  const halo_hal_semaphore_t *semaphore = &fixture->semaphore;
  const halo_list_link_t *next = semaphore->timepoints.head;
  int count = 0;
  int height = tree_check(semaphore->timepoint_root, NULL, &next, &count);
  assert_null(next);  // no link outside the tree
  const halo_hal_timepoint_t *previous = NULL;
  int listed = 0;
  for (const halo_list_link_t *link = semaphore->timepoints.head; link;
       link = link->next) {
    const halo_hal_timepoint_t *timepoint =
        (const halo_hal_timepoint_t *)((const char *)link -
                                       offsetof(halo_hal_timepoint_t, link));
    assert_ptr_equal(link->prev, previous ? &previous->link : NULL);
    if (previous) {
      assert_true(previous->value <= timepoint->value);
      if (previous->value == timepoint->value) {
        assert_true((intptr_t)previous->user_data <
                    (intptr_t)timepoint->user_data);
      }
    }
    previous = timepoint;
    ++listed;
  }
  assert_ptr_equal(semaphore->timepoints.tail,
                   previous ? &previous->link : NULL);
  assert_int_equal(listed, count);
  // AVL: a height within 1.44 log2(n + 2).
  int bound = 0;
  for (int n = count + 2; n > 1; n >>= 1) ++bound;
  assert_true(height * 100 <= 144 * (bound + 1));
  assert_int_equal(host_waits(fixture), count > 0);
  return count;
}

// A deterministic sequence (xorshift64).
static uint64_t next_random(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

enum { kOrderCount = 4096 };

typedef enum order_e {
  ORDER_ASCENDING,
  ORDER_DESCENDING,
  ORDER_RANDOM,
  ORDER_EQUAL,
  ORDER_ZIGZAG,  // lowest, highest, next lowest, next highest, ...
  ORDER_FEW,     // random among 8 values: many equal runs
} order_t;

static uint64_t order_value(order_t order, int i, uint64_t *random) {
  switch (order) {
    case ORDER_ASCENDING:
      return 10 + (uint64_t)i;
    case ORDER_DESCENDING:
      return 10 + (uint64_t)(kOrderCount - i);
    case ORDER_RANDOM:
      return 10 + next_random(random) % (4 * kOrderCount);
    case ORDER_EQUAL:
      return 10;
    case ORDER_ZIGZAG:
      return 10 + (uint64_t)(i % 2 ? kOrderCount - i / 2 : i / 2);
    case ORDER_FEW:
      return 10 + next_random(random) % 8;
  }
  return 0;
}

// Fired timepoints (their user_data), with the failure code of each.
static int *fired_order;
static halo_status_code_t *fired_codes;
static int fired_order_count;
static void on_fire_log(halo_hal_timepoint_t *timepoint, halo_status_t status) {
  fired_codes[fired_order_count] = halo_status_code(status);
  fired_order[fired_order_count++] = (int)(intptr_t)timepoint->user_data;
  halo_status_free(status);
}

static halo_hal_timepoint_t *add_in_order(fixture_t *fixture, order_t order) {
  halo_hal_timepoint_t *timepoints = calloc(kOrderCount, sizeof(*timepoints));
  uint64_t random = 0x9e3779b97f4a7c15ull + (uint64_t)order;
  // Above what earlier rounds on the semaphore reached.
  uint64_t base = halo_hal_semaphore_value(&fixture->semaphore);
  fired_order = calloc(kOrderCount, sizeof(*fired_order));
  fired_codes = calloc(kOrderCount, sizeof(*fired_codes));
  fired_order_count = 0;
  for (int i = 0; i < kOrderCount; ++i) {
    timepoints[i].value = base + order_value(order, i, &random);
    timepoints[i].callback = on_fire_log;
    timepoints[i].user_data = (void *)(intptr_t)i;
    halo_hal_semaphore_add_timepoint(&fixture->semaphore, &timepoints[i]);
    if (i % 509 == 0) assert_int_equal(check_timepoints(fixture), i + 1);
  }
  assert_int_equal(check_timepoints(fixture), kOrderCount);
  return timepoints;
}

static void free_order(halo_hal_timepoint_t *timepoints) {
  free(timepoints);
  free(fired_order);
  free(fired_codes);
}

// Whether timepoint |a| fires before |b| (value, then the order added).
static bool fires_before(const halo_hal_timepoint_t *timepoints, int a, int b) {
  if (timepoints[a].value != timepoints[b].value) {
    return timepoints[a].value < timepoints[b].value;
  }
  return a < b;
}

// Signals in steps: each fires exactly the timepoints it reaches, in value
// order (equal values in the order added); the rest stay linked and
// ordered.
static void signal_all_in_steps(fixture_t *fixture,
                                const halo_hal_timepoint_t *timepoints,
                                int linked) {
  uint64_t value = halo_hal_semaphore_value(&fixture->semaphore);
  while (linked > 0) {
    value += 1 + value % 613;
    int before = fired_order_count;
    halo_hal_semaphore_signal(&fixture->semaphore, value);
    for (int i = before; i < fired_order_count; ++i) {
      assert_int_equal(fired_codes[i], HALO_STATUS_OK);
      assert_true(timepoints[fired_order[i]].value <= value);
      assert_false(timepoints[fired_order[i]].linked);
      if (i > 0) {
        assert_true(
            fires_before(timepoints, fired_order[i - 1], fired_order[i]));
      }
    }
    linked -= fired_order_count - before;
    assert_int_equal(check_timepoints(fixture), linked);
    const halo_list_link_t *head = fixture->semaphore.timepoints.head;
    if (head) {
      assert_true(
          ((const halo_hal_timepoint_t *)((const char *)head -
                                          offsetof(halo_hal_timepoint_t, link)))
              ->value > value);
    }
  }
  assert_null(fixture->semaphore.timepoint_root);
}

// Timepoints added in value orders a client may pick (ascending,
// descending, random, all equal, alternating ends, few distinct values):
// the list and tree stay one order, balanced, and signals release them in
// value order, equal values in the order added.
static void test_timepoint_orders_fire_in_value_order(void **state) {
  fixture_t *fixture = *state;
  for (order_t order = ORDER_ASCENDING; order <= ORDER_FEW; ++order) {
    halo_hal_timepoint_t *timepoints = add_in_order(fixture, order);
    signal_all_in_steps(fixture, timepoints, kOrderCount);
    assert_int_equal(fired_order_count, kOrderCount);
    free_order(timepoints);
  }
}

// Removed by their owners (in a random order, from the ends and the
// middle, twice over, again after they went): the rest keep their order
// and fire in it; a removed one never fires; one removed can be added
// again and takes its place among those of its value as a new one.
static void test_timepoint_removal_keeps_order(void **state) {
  fixture_t *fixture = *state;
  for (order_t order = ORDER_ASCENDING; order <= ORDER_FEW; ++order) {
    halo_hal_timepoint_t *timepoints = add_in_order(fixture, order);
    uint64_t random = 42 + (uint64_t)order;
    int linked = kOrderCount;
    for (int k = 0; k < 2 * kOrderCount / 3; ++k) {
      int i = (int)(next_random(&random) % kOrderCount);
      if (timepoints[i].linked) --linked;
      halo_hal_semaphore_remove_timepoint(&fixture->semaphore, &timepoints[i]);
      assert_false(timepoints[i].linked);
      if (k % 97 == 0) assert_int_equal(check_timepoints(fixture), linked);
    }
    assert_int_equal(check_timepoints(fixture), linked);
    // The first, the last and the root go too.
    const halo_list_link_t *ends[] = {fixture->semaphore.timepoints.head,
                                      fixture->semaphore.timepoints.tail,
                                      &fixture->semaphore.timepoint_root->link};
    for (size_t e = 0; e < sizeof(ends) / sizeof(ends[0]); ++e) {
      halo_hal_timepoint_t *timepoint =
          (halo_hal_timepoint_t *)((const char *)ends[e] -
                                   offsetof(halo_hal_timepoint_t, link));
      if (timepoint->linked) --linked;
      halo_hal_semaphore_remove_timepoint(&fixture->semaphore, timepoint);
      assert_int_equal(check_timepoints(fixture), linked);
    }
    // Removed ones added again (as new ones: they go after their equals).
    for (int i = 0; i < kOrderCount; i += 7) {
      if (timepoints[i].linked) continue;
      halo_hal_semaphore_remove_timepoint(&fixture->semaphore, &timepoints[i]);
      timepoints[i].user_data = (void *)(intptr_t)(kOrderCount + i);
      halo_hal_semaphore_add_timepoint(&fixture->semaphore, &timepoints[i]);
      ++linked;
    }
    assert_int_equal(check_timepoints(fixture), linked);
    int removed = kOrderCount - linked;
    uint64_t value = halo_hal_semaphore_value(&fixture->semaphore);
    while (fixture->semaphore.timepoints.head) {
      value += 1 + value % 613;
      int before = fired_order_count;
      halo_hal_semaphore_signal(&fixture->semaphore, value);
      for (int i = before; i < fired_order_count; ++i) {
        assert_int_equal(fired_codes[i], HALO_STATUS_OK);
        int index = fired_order[i] % kOrderCount;
        assert_true(timepoints[index].value <= value);
        if (i > 0) {
          const halo_hal_timepoint_t *a =
              &timepoints[fired_order[i - 1] % kOrderCount];
          assert_true(a->value < timepoints[index].value ||
                      (a->value == timepoints[index].value &&
                       fired_order[i - 1] < fired_order[i]));
        }
      }
      check_timepoints(fixture);
    }
    assert_int_equal(fired_order_count, kOrderCount - removed);
    free_order(timepoints);
  }
}

// A failure fails every timepoint still linked, in value order, with its
// status, and leaves nothing linked; one added after fails at once.
static void test_timepoint_failure_fails_all(void **state) {
  fixture_t *fixture = *state;
  halo_hal_timepoint_t *timepoints = add_in_order(fixture, ORDER_RANDOM);
  // Some reached first, some removed.
  halo_hal_semaphore_signal(&fixture->semaphore, 10 + kOrderCount);
  int reached = fired_order_count;
  assert_true(reached > 0 && reached < kOrderCount);
  int removed = 0;
  for (int i = 0; i < kOrderCount; i += 5) {
    if (!timepoints[i].linked) continue;
    halo_hal_semaphore_remove_timepoint(&fixture->semaphore, &timepoints[i]);
    ++removed;
  }
  assert_int_equal(check_timepoints(fixture), kOrderCount - reached - removed);
  halo_hal_semaphore_fail(&fixture->semaphore,
                          halo_status_make(HALO_STATUS_DATA_LOSS, "test"));
  assert_int_equal(fired_order_count, kOrderCount - removed);
  for (int i = reached; i < fired_order_count; ++i) {
    assert_int_equal(fired_codes[i], HALO_STATUS_DATA_LOSS);
    if (i > reached) {
      assert_true(fires_before(timepoints, fired_order[i - 1], fired_order[i]));
    }
  }
  assert_int_equal(check_timepoints(fixture), 0);
  assert_null(fixture->semaphore.timepoint_root);
  timepoints[0].value = 1ull << 40;
  halo_hal_semaphore_add_timepoint(&fixture->semaphore, &timepoints[0]);
  assert_int_equal(fired_order_count, kOrderCount - removed + 1);
  assert_int_equal(fired_codes[fired_order_count - 1], HALO_STATUS_DATA_LOSS);
  assert_int_equal(check_timepoints(fixture), 0);
  free_order(timepoints);
}

// Callbacks that take other timepoints out (a failed wait cancels its
// submission's other waits) and add new ones while a signal fires: those
// removed never fire, those added at or below the value fire at once,
// those above stay linked in order.
static halo_hal_timepoint_t *churn_timepoints;
static fixture_t *churn_fixture;
static int churn_added;
static void on_fire_churn(halo_hal_timepoint_t *timepoint,
                          halo_status_t status) {
  on_fire_log(timepoint, status);
  int i = (int)(intptr_t)timepoint->user_data;
  if (i >= kOrderCount) return;
  // Takes out one further along (may be gone already).
  halo_hal_semaphore_remove_timepoint(
      &churn_fixture->semaphore, &churn_timepoints[(i * 7 + 3) % kOrderCount]);
  if (i % 4 == 0 && churn_added < kOrderCount / 8) {
    halo_hal_timepoint_t *added = &churn_timepoints[kOrderCount + churn_added];
    added->value = timepoint->value + (uint64_t)(i % 3) * 50;
    added->callback = on_fire_log;
    added->user_data = (void *)(intptr_t)(kOrderCount + churn_added);
    ++churn_added;
    halo_hal_semaphore_add_timepoint(&churn_fixture->semaphore, added);
  }
}

static void test_timepoint_callbacks_change_the_tree(void **state) {
  fixture_t *fixture = *state;
  churn_fixture = fixture;
  churn_added = 0;
  churn_timepoints =
      calloc(kOrderCount + kOrderCount / 8, sizeof(*churn_timepoints));
  fired_order = calloc(2 * kOrderCount, sizeof(*fired_order));
  fired_codes = calloc(2 * kOrderCount, sizeof(*fired_codes));
  fired_order_count = 0;
  uint64_t random = 7;
  for (int i = 0; i < kOrderCount; ++i) {
    churn_timepoints[i].value = 10 + next_random(&random) % (2 * kOrderCount);
    churn_timepoints[i].callback = on_fire_churn;
    churn_timepoints[i].user_data = (void *)(intptr_t)i;
    halo_hal_semaphore_add_timepoint(&fixture->semaphore, &churn_timepoints[i]);
  }
  uint64_t value = 0;
  while (fixture->semaphore.timepoints.head) {
    value += 64;
    int before = fired_order_count;
    halo_hal_semaphore_signal(&fixture->semaphore, value);
    for (int i = before; i < fired_order_count; ++i) {
      const halo_hal_timepoint_t *timepoint = &churn_timepoints[fired_order[i]];
      assert_true(timepoint->value <= value);
      assert_false(timepoint->linked);
    }
    check_timepoints(fixture);
  }
  assert_true(churn_added > 0);
  // Each fired once at most.
  char *seen = calloc(kOrderCount + kOrderCount / 8, 1);
  for (int i = 0; i < fired_order_count; ++i) {
    assert_int_equal(seen[fired_order[i]], 0);
    seen[fired_order[i]] = 1;
  }
  free(seen);
  free(churn_timepoints);
  free(fired_order);
  free(fired_codes);
}

//===----------------------------------------------------------------------===//
// Device fences
//===----------------------------------------------------------------------===//

typedef struct test_fence_t {
  halo_hal_fence_t base;  // first
  uint64_t value;
} test_fence_t;

static int fences_destroyed;
static void test_fence_destroy(halo_hal_fence_t *fence) {
  (void)fence;
  ++fences_destroyed;
}
static const halo_hal_fence_vtable_t test_fence_vtable = {test_fence_destroy};

static void test_fence_init(test_fence_t *fence, const void *domain,
                            uint64_t value) {
  fence->base.vtable = &test_fence_vtable;
  atomic_init(&fence->base.references, 1);
  fence->base.domain = domain;
  fence->value = value;
}

// A timepoint that takes the first fence of its domain it is offered, as
// the deferred queue's waits do (hal/deferred_queue.c).
typedef struct fence_waiter_t {
  halo_hal_timepoint_t timepoint;  // first
  const void *domain;
  const test_fence_t *fence;  // the fence it took
  int offers;
} fence_waiter_t;

static long fence_offers;  // every waiter's, in all
// Set, each waiter that takes a fence also does this (a callback that
// changes the semaphore under the walk).
static void (*fence_waiter_then)(fence_waiter_t *waiter);

static void on_fence_waiter_fire(halo_hal_timepoint_t *timepoint,
                                 halo_status_t status) {
  (void)timepoint;
  halo_status_free(status);
}

static void on_fence_offered(halo_hal_timepoint_t *timepoint,
                             halo_hal_fence_t *fence) {
  fence_waiter_t *waiter = (fence_waiter_t *)timepoint;
  assert_true(timepoint->linked);  // never one a callback took out
  ++waiter->offers;
  ++fence_offers;
  if (waiter->fence || fence->domain != waiter->domain) return;
  waiter->fence = (const test_fence_t *)fence;
  if (fence_waiter_then) fence_waiter_then(waiter);
}

static void fence_waiter_add(fixture_t *fixture, fence_waiter_t *waiter,
                             const void *domain, uint64_t value) {
  memset(waiter, 0, sizeof(*waiter));
  waiter->domain = domain;
  waiter->timepoint.value = value;
  waiter->timepoint.callback = on_fence_waiter_fire;
  waiter->timepoint.covered = on_fence_offered;
  halo_hal_semaphore_add_timepoint(&fixture->semaphore, &waiter->timepoint);
}

static const char kDomainA = 'a';
static const char kDomainB = 'b';

// Every timepoint gets the soonest fence of its domain, and each is
// offered a fence of a domain once, not once per fence of a value above
// its own: N waiters of domain A and N of domain B at values 1..N, fences
// of A at 1..N, then one of B at N, offer 4N times in all (A's fence at v
// offers the two waiters at v; B's fence all 2N). Before, each fence was
// offered to every waiter at or below its value: N * N offers for A's
// fences alone, as many steps on halod's loop (a client with thousands of
// signals of one semaphore in flight made every submission cost thousands).
static void test_fences_offered_once_per_domain(void **state) {
  fixture_t *fixture = *state;
  enum { N = 1000 };
  fence_waiter_t *waiters = calloc(2 * N, sizeof(*waiters));
  test_fence_t *fences = calloc(N + 1, sizeof(*fences));
  fence_offers = 0;
  fence_waiter_then = NULL;
  fences_destroyed = 0;
  for (int i = 0; i < N; ++i) {
    fence_waiter_add(fixture, &waiters[2 * i], &kDomainA, (uint64_t)i + 1);
    fence_waiter_add(fixture, &waiters[2 * i + 1], &kDomainB, (uint64_t)i + 1);
  }
  for (int i = 0; i < N; ++i) {
    test_fence_init(&fences[i], &kDomainA, (uint64_t)i + 1);
    halo_hal_semaphore_add_fence(&fixture->semaphore, (uint64_t)i + 1,
                                 &fences[i].base);
    halo_hal_fence_release(&fences[i].base);  // the semaphore's stays
  }
  test_fence_init(&fences[N], &kDomainB, N);
  halo_hal_semaphore_add_fence(&fixture->semaphore, N, &fences[N].base);
  // B's fence at N again (a second execution at the same value) offers
  // nothing: every waiter it could cover has B's first one.
  long before = fence_offers;
  halo_hal_semaphore_add_fence(&fixture->semaphore, N, &fences[N].base);
  assert_int_equal(fence_offers, before);
  halo_hal_fence_release(&fences[N].base);
  assert_int_equal(fixture->semaphore.fence_count, N + 2);
  assert_true(fence_offers <= 4 * N);
  for (int i = 0; i < N; ++i) {
    assert_ptr_equal(waiters[2 * i].fence, &fences[i]);
    assert_ptr_equal(waiters[2 * i + 1].fence, &fences[N]);
  }
  // A waiter added now finds the soonest fence of its domain.
  assert_ptr_equal(
      halo_hal_semaphore_find_fence(&fixture->semaphore, 10, &kDomainA),
      &fences[9].base);
  assert_ptr_equal(
      halo_hal_semaphore_find_fence(&fixture->semaphore, 10, &kDomainB),
      &fences[N].base);
  // Reaching values drops their fences (the highest one too).
  halo_hal_semaphore_signal(&fixture->semaphore, N / 2);
  assert_int_equal(fences_destroyed, N / 2);
  assert_int_equal(fixture->semaphore.fence_count, N - N / 2 + 2);
  halo_hal_semaphore_signal(&fixture->semaphore, N);
  assert_int_equal(fences_destroyed, N + 1);
  assert_int_equal(fixture->semaphore.fence_count, 0);
  assert_null(fixture->semaphore.fences);
  assert_null(fixture->semaphore.fences_tail);
  free(waiters);
  free(fences);
}

// A fence recorded out of order (below the highest) goes in its place and
// is offered to the waiters above the highest fence of its domain below
// it; the list stays sorted, and one at the end again goes last.
static void test_fences_out_of_order(void **state) {
  fixture_t *fixture = *state;
  fence_offers = 0;
  fence_waiter_then = NULL;
  fences_destroyed = 0;
  fence_waiter_t waiters[6];
  for (int i = 0; i < 6; ++i) {
    fence_waiter_add(fixture, &waiters[i], &kDomainA, (uint64_t)(10 * (i + 1)));
  }
  test_fence_t f20, f50, f35, f60;
  test_fence_init(&f50, &kDomainB, 50);  // another domain's: taken by none
  halo_hal_semaphore_add_fence(&fixture->semaphore, 50, &f50.base);
  halo_hal_fence_release(&f50.base);  // the semaphore's stays
  test_fence_init(&f20, &kDomainA, 20);
  halo_hal_semaphore_add_fence(&fixture->semaphore, 20, &f20.base);
  halo_hal_fence_release(&f20.base);  // the semaphore's stays
  test_fence_init(&f35, &kDomainA, 35);
  halo_hal_semaphore_add_fence(&fixture->semaphore, 35, &f35.base);
  halo_hal_fence_release(&f35.base);  // the semaphore's stays
  test_fence_init(&f60, &kDomainA, 60);
  halo_hal_semaphore_add_fence(&fixture->semaphore, 60, &f60.base);
  halo_hal_fence_release(&f60.base);  // the semaphore's stays
  assert_ptr_equal(waiters[0].fence, &f20);
  assert_ptr_equal(waiters[1].fence, &f20);
  assert_ptr_equal(waiters[2].fence, &f35);
  assert_ptr_equal(waiters[3].fence, &f60);
  assert_ptr_equal(waiters[4].fence, &f60);
  assert_ptr_equal(waiters[5].fence, &f60);
  // 10 and 20 were offered 50 (B's, from the first) and 20; 30: 50 and
  // 35 (above A's 20); 40 and 50: 50 and 60 (above A's 35); 60: 60 only.
  static const int kOffers[6] = {2, 2, 2, 2, 2, 1};
  for (int i = 0; i < 6; ++i) assert_int_equal(waiters[i].offers, kOffers[i]);
  uint64_t order[4];
  int count = 0;
  for (const halo_hal_semaphore_fence_t *entry = fixture->semaphore.fences;
       entry; entry = entry->next) {
    order[count++] = entry->value;
  }
  assert_int_equal(count, 4);
  assert_int_equal(order[0], 20);
  assert_int_equal(order[1], 35);
  assert_int_equal(order[2], 50);
  assert_int_equal(order[3], 60);
  assert_int_equal(fixture->semaphore.fences_tail->value, 60);
  halo_hal_semaphore_signal(&fixture->semaphore, 60);
  assert_int_equal(fences_destroyed, 4);  // the semaphore's were the last
}

// Callbacks that change the semaphore under the walk: the first waiter to
// take the fence removes the next one (never offered then); a later one
// adds a fence of another domain on the same semaphore (a walk inside the
// walk), where a waiter that takes it removes the one the outer walk
// offers next. Every waiter still there gets its domain's fence, each
// offered each fence at most once.
static fixture_t *walk_fixture;
static fence_waiter_t walk_waiters[8];
static test_fence_t walk_inner_fence;
static void walk_waiter_then(fence_waiter_t *waiter) {
  if (waiter == &walk_waiters[0]) {
    halo_hal_semaphore_remove_timepoint(&walk_fixture->semaphore,
                                        &walk_waiters[1].timepoint);
  } else if (waiter == &walk_waiters[2]) {
    test_fence_init(&walk_inner_fence, &kDomainB, 8);
    halo_hal_semaphore_add_fence(&walk_fixture->semaphore, 8,
                                 &walk_inner_fence.base);
    halo_hal_fence_release(&walk_inner_fence.base);
  } else if (waiter == &walk_waiters[6]) {
    halo_hal_semaphore_remove_timepoint(&walk_fixture->semaphore,
                                        &walk_waiters[3].timepoint);
  }
}

static void test_fence_walk_survives_callbacks(void **state) {
  fixture_t *fixture = *state;
  walk_fixture = fixture;
  fence_offers = 0;
  fences_destroyed = 0;
  fence_waiter_then = walk_waiter_then;
  for (int i = 0; i < 8; ++i) {
    fence_waiter_add(fixture, &walk_waiters[i], i < 6 ? &kDomainA : &kDomainB,
                     (uint64_t)i + 1);
  }
  test_fence_t outer;
  test_fence_init(&outer, &kDomainA, 8);
  halo_hal_semaphore_add_fence(&fixture->semaphore, 8, &outer.base);
  halo_hal_fence_release(&outer.base);
  fence_waiter_then = NULL;
  assert_ptr_equal(walk_waiters[0].fence, &outer);
  assert_int_equal(walk_waiters[1].offers, 0);  // removed before its turn
  assert_null(walk_waiters[1].fence);
  assert_ptr_equal(walk_waiters[2].fence, &outer);
  // Offered the inner fence (not its domain), then removed under the outer
  // walk, which went on past it.
  assert_int_equal(walk_waiters[3].offers, 1);
  assert_null(walk_waiters[3].fence);
  assert_ptr_equal(walk_waiters[4].fence, &outer);
  assert_ptr_equal(walk_waiters[5].fence, &outer);
  assert_ptr_equal(walk_waiters[6].fence, &walk_inner_fence);
  assert_ptr_equal(walk_waiters[7].fence, &walk_inner_fence);
  for (int i = 0; i < 8; ++i) assert_true(walk_waiters[i].offers <= 2);
  assert_null(fixture->semaphore.fence_walks);
  halo_hal_semaphore_signal(&fixture->semaphore, 8);
  assert_int_equal(fences_destroyed, 2);
}

// At most HALO_HAL_SEMAPHORE_MAX_FENCES are recorded: past that a fence is
// neither kept nor offered (its waiters wait through the host), and room
// comes back as values are reached.
static void test_fences_bounded(void **state) {
  fixture_t *fixture = *state;
  enum { MAX = HALO_HAL_SEMAPHORE_MAX_FENCES };
  fence_offers = 0;
  fence_waiter_then = NULL;
  fences_destroyed = 0;
  test_fence_t *fences = calloc(MAX + 2, sizeof(*fences));
  for (int i = 0; i < MAX + 1; ++i) {
    test_fence_init(&fences[i], &kDomainA, (uint64_t)i + 1);
    halo_hal_semaphore_add_fence(&fixture->semaphore, (uint64_t)i + 1,
                                 &fences[i].base);
  }
  assert_int_equal(fixture->semaphore.fence_count, MAX);
  assert_int_equal(atomic_load(&fences[MAX].base.references), 1);  // not kept
  fence_waiter_t late;
  fence_waiter_add(fixture, &late, &kDomainA, MAX + 1);
  assert_null(
      halo_hal_semaphore_find_fence(&fixture->semaphore, MAX + 1, &kDomainA));
  halo_hal_semaphore_signal(&fixture->semaphore, 1);
  test_fence_init(&fences[MAX + 1], &kDomainA, MAX + 1);
  halo_hal_semaphore_add_fence(&fixture->semaphore, MAX + 1,
                               &fences[MAX + 1].base);
  assert_ptr_equal(late.fence, &fences[MAX + 1]);
  halo_hal_semaphore_signal(&fixture->semaphore, MAX + 1);
  assert_int_equal(fixture->semaphore.fence_count, 0);
  for (int i = 0; i < MAX + 2; ++i) {
    assert_int_equal(atomic_load(&fences[i].base.references), 1);
  }
  free(fences);
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
      T(test_timepoint_orders_fire_in_value_order),
      T(test_timepoint_removal_keeps_order),
      T(test_timepoint_failure_fails_all),
      T(test_timepoint_callbacks_change_the_tree),
      T(test_fences_offered_once_per_domain),
      T(test_fences_out_of_order),
      T(test_fence_walk_survives_callbacks),
      T(test_fences_bounded),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
