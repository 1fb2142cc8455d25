// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the search for semaphores nothing can advance any more
// (daemon/semaphore_orphans.c), on semaphores and submissions built here
// and the real deferred queue (hal/deferred_queue.c: host actions, so no
// device): a reference the test takes stands for a session's handle.
// - a semaphore only waits hold is found alone; one a handle holds is not;
// - a submission that waits on the semaphore it signals, and cycles of two
//   and three semaphores (with a branch out of the cycle), are found
//   whole;
// - a cycle is not found while a handle holds one of its semaphores, while
//   a signaler of one of them waits on a held semaphore, or while issued
//   work (its waits met) will signal one of them;
// - a semaphore that only a submission blocked on the set signals, nobody
//   waiting on it, is found with the set;
// - a cycle of 400 semaphores is found whole by a release's walk, one of
//   1500 (past the walk's budget) by the search without a budget from its
//   semaphore or from all of them, and no walk leaves a mark;
// - waits count toward the budget; a semaphore nothing signals needs no
//   walk however many waits it has;
// - the description lists at most 8 ids.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "daemon/semaphore_orphans.h"

#include <stdlib.h>
#include <string.h>

#include "common/timeline.h"
#include "hal/deferred_queue.h"

enum { kSemaphores = 2048, kSubmissions = 2200 };

typedef struct fixture_t {
  halo_timeline_page_t *pages[kSemaphores / HALO_TIMELINE_SLOTS_PER_PAGE];
  halod_semaphore_t semaphores[kSemaphores];
  uint32_t semaphore_count;
  halo_hal_deferred_queue_t queue;
  halod_submission_t *submissions[kSubmissions];
  uint32_t submission_count;
} fixture_t;

static void wake(void *wake_data) {
  (void)wake_data;
}

static int setup(void **state) {
  fixture_t *fixture = calloc(1, sizeof(*fixture));
  halo_hal_deferred_queue_initialize(&fixture->queue, wake, NULL);
  *state = fixture;
  return 0;
}

// A new healthy semaphore at value 0 that nothing holds yet.
static halod_semaphore_t *semaphore_new(fixture_t *fixture) {
  uint32_t index = fixture->semaphore_count++;
  assert_true(index < kSemaphores);
  uint32_t page = index / HALO_TIMELINE_SLOTS_PER_PAGE;
  if (!fixture->pages[page]) {
    fixture->pages[page] = aligned_alloc(64, sizeof(halo_timeline_page_t));
    halo_timeline_page_initialize(fixture->pages[page], 1);
  }
  halo_timeline_slot_t *slot =
      &fixture->pages[page]->slots[index % HALO_TIMELINE_SLOTS_PER_PAGE];
  halo_timeline_slot_activate(slot, 0);
  halod_semaphore_t *semaphore = &fixture->semaphores[index];
  semaphore->id = 100 + index;
  halo_hal_semaphore_initialize(&semaphore->hal, slot, 0);
  return semaphore;
}

// One that a handle (the test's reference) holds.
static halod_semaphore_t *semaphore_held(fixture_t *fixture) {
  halod_semaphore_t *semaphore = semaphore_new(fixture);
  semaphore->refcount = 1;
  return semaphore;
}

static void submission_on_issue(halo_hal_action_t *action) {
  halod_semaphore_orphans_stop_waiting((halod_submission_t *)action);
}

// Issued: it stays on its "device" until the test completes it.
static void submission_run_on_host(halo_hal_action_t *action) {
  (void)action;
}

static void submission_on_retire(halo_hal_action_t *action) {
  halod_submission_t *submission = (halod_submission_t *)action;
  halod_semaphore_orphans_stop_waiting(submission);
  for (uint32_t i = 0; i < submission->semaphore_count; ++i) {
    --submission->semaphores[i]->refcount;
  }
  halo_status_free(action->failure);
  action->failure = NULL;
  submission->semaphore_count = 0;  // retired
}

// Accepts a submission that waits on |waits| for |wait_values| and
// signals |signals| with |signal_values| (NULL-terminated arrays), as
// halod_submission_accept does: references taken, counted as waiting,
// handed to the deferred queue.
static halod_submission_t *submit(fixture_t *fixture,
                                  halod_semaphore_t *const *waits,
                                  const uint64_t *wait_values,
                                  halod_semaphore_t *const *signals,
                                  const uint64_t *signal_values) {
  uint32_t wait_count = 0;
  uint32_t signal_count = 0;
  while (waits && waits[wait_count]) ++wait_count;
  while (signals && signals[signal_count]) ++signal_count;
  halod_submission_t *submission = calloc(1, sizeof(*submission));
  assert_true(fixture->submission_count < kSubmissions);
  fixture->submissions[fixture->submission_count++] = submission;
  submission->semaphores =
      calloc(wait_count + signal_count + 1, sizeof(*submission->semaphores));
  halo_hal_action_t *action = &submission->action;
  action->waits = calloc(wait_count + 1, sizeof(*action->waits));
  action->signals = calloc(signal_count + 1, sizeof(*action->signals));
  for (uint32_t i = 0; i < wait_count; ++i) {
    ++waits[i]->refcount;
    submission->semaphores[submission->semaphore_count++] = waits[i];
    action->waits[i].semaphore = &waits[i]->hal;
    action->waits[i].timepoint.value = wait_values[i];
  }
  action->wait_count = wait_count;
  for (uint32_t i = 0; i < signal_count; ++i) {
    ++signals[i]->refcount;
    submission->semaphores[submission->semaphore_count++] = signals[i];
    action->signals[i].semaphore = &signals[i]->hal;
    action->signals[i].value = signal_values[i];
  }
  action->signal_count = signal_count;
  action->retire = submission_on_retire;
  action->on_issue = submission_on_issue;
  action->run_on_host = submission_run_on_host;
  halod_semaphore_orphans_start_waiting(submission);
  halo_hal_deferred_queue_submit(&fixture->queue, action);
  return submission;
}

// One wait and one signal (NULL: none).
static halod_submission_t *submit1(fixture_t *fixture, halod_semaphore_t *wait,
                                   uint64_t wait_value,
                                   halod_semaphore_t *signal,
                                   uint64_t signal_value) {
  halod_semaphore_t *waits[] = {wait, NULL};
  halod_semaphore_t *signals[] = {signal, NULL};
  return submit(fixture, waits, &wait_value, signals, &signal_value);
}

// The handle's reference goes (without the check halod runs then).
static void drop_handle(halod_semaphore_t *semaphore) {
  assert_true(semaphore->refcount > 0);
  --semaphore->refcount;
}

// Fails unless the orphans of a release of |released| are exactly
// |expected| (NULL-terminated), |released| first.
static void expect_orphans(fixture_t *fixture, halod_semaphore_t *released,
                           halod_semaphore_t *const *expected) {
  halod_semaphore_orphans_t orphans;
  assert_null(halod_semaphore_orphans_find(released, &orphans));
  uint32_t count = 0;
  while (expected[count]) ++count;
  assert_int_equal(orphans.count, count);
  if (count > 0) assert_ptr_equal(orphans.semaphores[0], released);
  for (uint32_t i = 0; i < count; ++i) {
    bool found = false;
    for (uint32_t j = 0; j < orphans.count; ++j) {
      found = found || orphans.semaphores[j] == expected[i];
    }
    assert_true(found);
  }
  halod_semaphore_orphans_free(&orphans);
  // No mark is left behind.
  for (uint32_t i = 0; i < fixture->semaphore_count; ++i) {
    assert_int_equal(fixture->semaphores[i].walk_index, 0);
  }
  for (uint32_t i = 0; i < fixture->submission_count; ++i) {
    assert_int_equal(fixture->submissions[i]->walk_index, 0);
  }
}

static void expect_none(fixture_t *fixture, halod_semaphore_t *released) {
  halod_semaphore_t *none[] = {NULL};
  expect_orphans(fixture, released, none);
}

static int teardown(void **state) {
  fixture_t *fixture = *state;
  // Failing every semaphore retires the waiting submissions; issued ones
  // complete.
  for (uint32_t i = 0; i < fixture->semaphore_count; ++i) {
    halo_hal_semaphore_fail(
        &fixture->semaphores[i].hal,
        halo_status_make(HALO_STATUS_ABORTED, "the test ended"));
  }
  for (uint32_t i = 0; i < fixture->submission_count; ++i) {
    halod_submission_t *submission = fixture->submissions[i];
    if (submission->action.state == HALO_HAL_ACTION_ISSUED) {
      halo_hal_deferred_queue_post_completion(&submission->action, NULL);
    }
  }
  halo_hal_deferred_queue_drain(&fixture->queue);
  for (uint32_t i = 0; i < fixture->submission_count; ++i) {
    halod_submission_t *submission = fixture->submissions[i];
    assert_int_equal(submission->action.state, HALO_HAL_ACTION_RETIRED);
    free(submission->semaphores);
    free(submission->action.waits);
    free(submission->action.signals);
    free(submission);
  }
  for (uint32_t i = 0; i < fixture->semaphore_count; ++i) {
    halod_semaphore_t *semaphore = &fixture->semaphores[i];
    assert_int_equal(semaphore->waiting_references, 0);
    assert_int_equal(semaphore->waiting_signals, 0);
    halo_hal_semaphore_deinitialize(&semaphore->hal);
  }
  halo_hal_deferred_queue_deinitialize(&fixture->queue);
  for (size_t i = 0; i < sizeof(fixture->pages) / sizeof(fixture->pages[0]);
       ++i) {
    free(fixture->pages[i]);
  }
  free(fixture);
  return 0;
}

static void test_semaphore_only_waits_hold(void **state) {
  fixture_t *fixture = *state;
  halod_semaphore_t *s = semaphore_held(fixture);
  halod_semaphore_t *t = semaphore_held(fixture);
  submit1(fixture, s, 5, t, 1);
  submit1(fixture, s, 7, NULL, 0);
  assert_int_equal(s->waiting_references, 2);
  assert_int_equal(s->waiting_signals, 0);
  expect_none(fixture, s);  // its handle could signal it
  drop_handle(s);
  halod_semaphore_t *expected[] = {s, NULL};
  expect_orphans(fixture, s, expected);
  // Nothing waits on t: it is never looked at.
  drop_handle(t);
  expect_none(fixture, t);
}

static void test_semaphore_its_own_waiter_signals(void **state) {
  fixture_t *fixture = *state;
  halod_semaphore_t *s = semaphore_held(fixture);
  halod_semaphore_t *t = semaphore_held(fixture);
  halod_semaphore_t *waits[] = {s, NULL};
  uint64_t wait_values[] = {5};
  halod_semaphore_t *signals[] = {s, t, NULL};
  uint64_t signal_values[] = {6, 1};
  submit(fixture, waits, wait_values, signals, signal_values);
  assert_int_equal(s->waiting_signals, 1);
  expect_none(fixture, s);
  drop_handle(s);
  halod_semaphore_t *expected[] = {s, NULL};
  expect_orphans(fixture, s, expected);
}

static void test_cycle_of_two(void **state) {
  fixture_t *fixture = *state;
  halod_semaphore_t *a = semaphore_held(fixture);
  halod_semaphore_t *b = semaphore_held(fixture);
  halod_semaphore_t *t = semaphore_held(fixture);
  halod_semaphore_t *x_waits[] = {a, NULL};
  uint64_t ones[] = {1, 1};
  halod_semaphore_t *x_signals[] = {b, t, NULL};
  submit(fixture, x_waits, ones, x_signals, ones);
  submit1(fixture, b, 1, a, 1);
  drop_handle(a);
  expect_none(fixture, a);  // b's handle could signal b, which runs x
  drop_handle(b);
  halod_semaphore_t *expected[] = {b, a, NULL};
  expect_orphans(fixture, b, expected);
  halod_semaphore_t *from_a[] = {a, b, NULL};
  expect_orphans(fixture, a, from_a);
}

// c -> d -> e -> c, and f, which only c's waiter signals, waited on by a
// submission that signals a held u. A waiter on f is outside the cycle but
// f is in the set: nothing else can advance it.
static void test_cycle_of_three_with_a_branch(void **state) {
  fixture_t *fixture = *state;
  halod_semaphore_t *c = semaphore_new(fixture);
  halod_semaphore_t *d = semaphore_held(fixture);
  halod_semaphore_t *e = semaphore_new(fixture);
  halod_semaphore_t *f = semaphore_new(fixture);
  halod_semaphore_t *u = semaphore_held(fixture);
  halod_semaphore_t *c_waits[] = {c, NULL};
  uint64_t twos[] = {2, 1};
  halod_semaphore_t *c_signals[] = {d, f, NULL};
  submit(fixture, c_waits, twos, c_signals, twos);
  submit1(fixture, d, 2, e, 2);
  submit1(fixture, e, 2, c, 2);
  submit1(fixture, f, 1, u, 1);
  expect_none(fixture, c);
  expect_none(fixture, f);
  drop_handle(d);
  halod_semaphore_t *expected[] = {d, e, c, f, NULL};
  expect_orphans(fixture, d, expected);
}

// A signaler of the cycle that waits on a held gate keeps it: the gate's
// handle can run it. Once the gate goes, the gate is an orphan at once
// (nothing signals it); its failure fails that signaler, and with it the
// cycle it signals.
static void test_cycle_kept_by_a_signaler_waiting_on_a_held_gate(void **state) {
  fixture_t *fixture = *state;
  halod_semaphore_t *a = semaphore_new(fixture);
  halod_semaphore_t *b = semaphore_new(fixture);
  halod_semaphore_t *gate = semaphore_held(fixture);
  submit1(fixture, a, 1, b, 1);
  submit1(fixture, b, 1, a, 1);
  halod_semaphore_t *waits[] = {gate, NULL};
  uint64_t one[] = {1};
  halod_semaphore_t *signals[] = {a, NULL};
  uint64_t two[] = {2};
  submit(fixture, waits, one, signals, two);
  expect_none(fixture, a);
  expect_none(fixture, b);
  drop_handle(gate);
  halod_semaphore_t *expected[] = {gate, NULL};
  expect_orphans(fixture, gate, expected);
}

// Work issued (its waits met: on the device, or a host action under way)
// that signals a keeps the cycle: it will advance a.
static void test_cycle_kept_by_issued_work(void **state) {
  fixture_t *fixture = *state;
  halod_semaphore_t *a = semaphore_new(fixture);
  halod_semaphore_t *b = semaphore_new(fixture);
  halod_submission_t *issued = submit1(fixture, NULL, 0, a, 3);
  assert_int_equal(issued->action.state, HALO_HAL_ACTION_ISSUED);
  assert_int_equal(a->waiting_references, 0);
  halod_submission_t *x = submit1(fixture, a, 1, b, 1);
  submit1(fixture, b, 1, a, 1);
  expect_none(fixture, a);
  expect_none(fixture, b);
  // Its completion (a = 3) issues x.
  halo_hal_deferred_queue_post_completion(&issued->action, NULL);
  halo_hal_deferred_queue_drain(&fixture->queue);
  assert_int_equal(halo_hal_semaphore_value(&a->hal), 3);
  assert_int_equal(x->action.state, HALO_HAL_ACTION_ISSUED);
}

// A waiting submission's met wait does not block it: here x's wait on a
// held h is met, its other wait on b is not.
static void test_met_wait_does_not_block(void **state) {
  fixture_t *fixture = *state;
  halod_semaphore_t *a = semaphore_new(fixture);
  halod_semaphore_t *b = semaphore_new(fixture);
  halod_semaphore_t *h = semaphore_held(fixture);
  halo_hal_semaphore_signal(&h->hal, 1);
  halod_semaphore_t *x_waits[] = {h, b, NULL};
  uint64_t ones[] = {1, 1};
  halod_semaphore_t *x_signals[] = {a, NULL};
  submit(fixture, x_waits, ones, x_signals, ones);
  submit1(fixture, a, 1, b, 1);
  halod_semaphore_t *expected[] = {a, b, NULL};
  expect_orphans(fixture, a, expected);
  // While the handle holds h, x's reference to it keeps nothing: h has no
  // wait left.
  expect_none(fixture, h);
}

// A cycle whose walk stays within HALOD_SEMAPHORE_ORPHANS_BUDGET (400
// semaphores and 400 waiting submissions) is found by a release's walk.
static void test_long_cycle(void **state) {
  fixture_t *fixture = *state;
  enum { kLength = 400 };
  halod_semaphore_t *cycle[kLength];
  for (uint32_t i = 0; i < kLength; ++i) cycle[i] = semaphore_new(fixture);
  for (uint32_t i = 0; i < kLength; ++i) {
    submit1(fixture, cycle[i], 1, cycle[(i + 1) % kLength], 1);
  }
  halod_semaphore_orphans_t orphans;
  assert_null(halod_semaphore_orphans_find(cycle[kLength / 2], &orphans));
  assert_false(orphans.incomplete);
  assert_int_equal(orphans.count, kLength);
  assert_ptr_equal(orphans.semaphores[0], cycle[kLength / 2]);
  char text[256];
  halod_semaphore_orphans_describe(&orphans, text, sizeof(text));
  assert_string_equal(text,
                      "semaphores 300, 301, 302, 303, 304, 305, 306, 307 "
                      "and 392 more");
  halod_semaphore_orphans_free(&orphans);
  for (uint32_t i = 0; i < kLength; ++i) {
    assert_int_equal(cycle[i]->walk_index, 0);
  }
}

// A cycle past the budget: a release's walk stops there and finds nothing
// (incomplete, no walk mark left); the search from its semaphore without
// a budget, and the one from all semaphores, find the whole cycle, and
// nothing of a held semaphore beside it.
static void test_cycle_past_the_budget(void **state) {
  fixture_t *fixture = *state;
  enum { kLength = 1500 };
  halod_semaphore_t *cycle[kLength];
  halo_u64_map_t all;
  halo_u64_map_initialize(&all);
  for (uint32_t i = 0; i < kLength; ++i) {
    cycle[i] = semaphore_new(fixture);
    assert_null(halo_u64_map_put(&all, cycle[i]->id, cycle[i]));
  }
  for (uint32_t i = 0; i < kLength; ++i) {
    submit1(fixture, cycle[i], 1, cycle[(i + 1) % kLength], 1);
  }
  halod_semaphore_t *held = semaphore_held(fixture);
  halod_semaphore_t *gated = semaphore_new(fixture);
  submit1(fixture, held, 1, gated, 1);
  assert_null(halo_u64_map_put(&all, held->id, held));
  assert_null(halo_u64_map_put(&all, gated->id, gated));
  halod_semaphore_orphans_t orphans;
  assert_null(halod_semaphore_orphans_find(cycle[0], &orphans));
  assert_true(orphans.incomplete);
  assert_int_equal(orphans.count, 0);
  for (uint32_t i = 0; i < kLength; ++i) {
    assert_int_equal(cycle[i]->walk_index, 0);
  }
  halo_u64_map_t roots;
  halo_u64_map_initialize(&roots);
  assert_null(halo_u64_map_put(&roots, cycle[0]->id, (void *)1));
  assert_null(halo_u64_map_put(&roots, 999999, (void *)1));  // gone
  assert_null(halod_semaphore_orphans_find_from(&all, &roots, &orphans));
  halo_u64_map_deinitialize(&roots);
  assert_false(orphans.incomplete);
  assert_int_equal(orphans.count, kLength);
  halod_semaphore_orphans_free(&orphans);
  assert_null(halod_semaphore_orphans_find_from(&all, NULL, &orphans));
  assert_false(orphans.incomplete);
  assert_int_equal(orphans.count, kLength);
  for (uint32_t i = 0; i < orphans.count; ++i) {
    assert_int_not_equal(orphans.semaphores[i]->id, gated->id);
    assert_int_not_equal(orphans.semaphores[i]->id, held->id);
  }
  halod_semaphore_orphans_free(&orphans);
  for (uint32_t i = 0; i < kLength; ++i) {
    assert_int_equal(cycle[i]->walk_index, 0);
  }
  halo_u64_map_deinitialize(&all);
}

// Waits count toward the walk's budget: a semaphore that a waiting
// submission signals (gated on a held semaphore) with 5,000 waits linked
// from 10 submissions stops the walk (before, each release of it walked
// every wait); one that no waiting submission signals is an orphan at
// once however many waits it has.
static void test_many_waits(void **state) {
  fixture_t *fixture = *state;
  enum { kSubmitters = 10, kWaitsEach = 500 };
  halod_semaphore_t *waits[kWaitsEach + 1];
  uint64_t values[kWaitsEach];
  halod_semaphore_t *quiet = semaphore_new(fixture);
  halod_semaphore_t *s = semaphore_new(fixture);
  for (int round = 0; round < 2; ++round) {
    halod_semaphore_t *target = round == 0 ? s : quiet;
    for (int i = 0; i < kWaitsEach; ++i) waits[i] = target, values[i] = 1;
    waits[kWaitsEach] = NULL;
    for (int i = 0; i < kSubmitters; ++i) {
      submit(fixture, waits, values, NULL, NULL);
    }
  }
  halod_semaphore_t *gate = semaphore_held(fixture);
  submit1(fixture, gate, 1, s, 1);
  halod_semaphore_orphans_t orphans;
  assert_null(halod_semaphore_orphans_find(s, &orphans));
  assert_true(orphans.incomplete);
  assert_int_equal(orphans.count, 0);
  assert_int_equal(s->walk_index, 0);
  halod_semaphore_t *expected[] = {quiet, NULL};
  expect_orphans(fixture, quiet, expected);
}

static void test_describe(void **state) {
  (void)state;
  halod_semaphore_t semaphores[3] = {{.id = 5}, {.id = 7}, {.id = 9}};
  halod_semaphore_t *list[] = {&semaphores[0], &semaphores[1], &semaphores[2]};
  halod_semaphore_orphans_t orphans = {.semaphores = list, .count = 1};
  char text[64];
  halod_semaphore_orphans_describe(&orphans, text, sizeof(text));
  assert_string_equal(text, "semaphore 5");
  orphans.count = 2;
  halod_semaphore_orphans_describe(&orphans, text, sizeof(text));
  assert_string_equal(text, "semaphores 5 and 7");
  orphans.count = 3;
  halod_semaphore_orphans_describe(&orphans, text, sizeof(text));
  assert_string_equal(text, "semaphores 5, 7 and 9");
  char small[12];
  halod_semaphore_orphans_describe(&orphans, small, sizeof(small));
  assert_string_equal(small, "semaphores ");
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
      TEST(test_semaphore_only_waits_hold),
      TEST(test_semaphore_its_own_waiter_signals),
      TEST(test_cycle_of_two),
      TEST(test_cycle_of_three_with_a_branch),
      TEST(test_cycle_kept_by_a_signaler_waiting_on_a_held_gate),
      TEST(test_cycle_kept_by_issued_work),
      TEST(test_met_wait_does_not_block),
      TEST(test_long_cycle),
      TEST(test_cycle_past_the_budget),
      TEST(test_many_waits),
      cmocka_unit_test(test_describe),
#undef TEST
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
