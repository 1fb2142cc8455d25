// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the deferred queue's steps (hal/deferred_queue.h): what an
// action's outcome or an issued action's fence sets off runs in a loop
// after the call that set it off, not inside it. Over a fake device queue
// whose executions hand out fences of one domain and complete only when the
// test posts their completion. The chains run on a thread with a 256 KiB
// stack: before, each link of a chain recursed (an outcome into the next
// action's retirement, a fence into the next action's issue and its fence),
// and chains this long overflowed it.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "hal/deferred_queue.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeline.h"

// ---------------------------------------------------------------- fakes

static const char kDomain = 'd';
static int fences_alive;

static void fake_fence_destroy(halo_hal_fence_t *fence) {
  --fences_alive;
  free(fence);
}
static const halo_hal_fence_vtable_t kFenceVtable = {fake_fence_destroy};

typedef struct test_action_t {
  halo_hal_action_t action;  // first: the callbacks find it
  halo_hal_action_wait_t waits[1];
  halo_hal_action_signal_t signals[1];
  int index;
  bool executed;
  bool retired;
  halo_status_code_t code;
} test_action_t;

// The fake queue: execute fails for |failing|, completes at once (posts the
// completion) for |completing|, and otherwise hands out a fence.
static test_action_t *failing;
static test_action_t *completing;
static int executed;

static halo_status_t fake_execute(halo_hal_queue_t *queue,
                                  const halo_hal_execution_t *execution) {
  (void)queue;
  test_action_t *test = execution->user_data;
  if (test == failing) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE, "the execute failed");
  }
  test->executed = true;
  ++executed;
  if (execution->out_fence) {
    halo_hal_fence_t *fence = calloc(1, sizeof(*fence));
    if (!fence) abort();  // no cmocka assert off the test's thread
    fence->vtable = &kFenceVtable;
    atomic_init(&fence->references, 1);
    fence->domain = &kDomain;
    ++fences_alive;
    *execution->out_fence = fence;
  }
  if (test == completing) execution->completion(execution->user_data, NULL);
  return NULL;
}

static void fake_queue_destroy(halo_hal_queue_t *queue) {
  (void)queue;
}
static const halo_hal_queue_vtable_t kQueueVtable = {fake_queue_destroy,
                                                     fake_execute};
static halo_hal_queue_t fenced_queue = {&kQueueVtable, &kDomain};
static halo_hal_queue_t plain_queue = {&kQueueVtable, NULL};  // no fences

static void wake(void *unused) {
  (void)unused;
}

// ---------------------------------------------------------------- fixture

enum { SEMAPHORES = 34 };
static halo_hal_deferred_queue_t deferred;
static halo_timeline_page_t *page;
static halo_hal_semaphore_t semaphores[SEMAPHORES];
static int retired;
static int retired_twice;  // counted here, checked on the test's thread
static int retire_order[8];
static void (*on_retired)(test_action_t *test);

static int setup(void **state) {
  (void)state;
  page = aligned_alloc(64, sizeof(halo_timeline_page_t));
  halo_timeline_page_initialize(page, 1);
  for (int i = 0; i < SEMAPHORES; ++i) {
    halo_timeline_slot_activate(&page->slots[i], 0);
    halo_hal_semaphore_initialize(&semaphores[i], &page->slots[i], 0);
  }
  halo_hal_deferred_queue_initialize(&deferred, wake, NULL);
  failing = completing = NULL;
  executed = retired = retired_twice = 0;
  fences_alive = 0;
  on_retired = NULL;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  halo_hal_deferred_queue_deinitialize(&deferred);
  for (int i = 0; i < SEMAPHORES; ++i) {
    halo_hal_semaphore_deinitialize(&semaphores[i]);
  }
  assert_int_equal(fences_alive, 0);
  assert_int_equal(retired_twice, 0);
  free(page);
  return 0;
}

static void test_retire(halo_hal_action_t *action) {
  test_action_t *test = (test_action_t *)action;
  if (test->retired) ++retired_twice;
  test->retired = true;
  test->code = halo_status_code(action->failure);
  halo_status_free(action->failure);
  action->failure = NULL;
  if (retired < 8) retire_order[retired] = test->index;
  ++retired;
  if (on_retired) on_retired(test);
}

// An action on |queue| waiting for semaphore |wait| to reach |wait_value|
// and signaling |signal| to |signal_value|.
static void test_submit_on(halo_hal_queue_t *queue, test_action_t *test,
                           int index, int wait, uint64_t wait_value, int signal,
                           uint64_t signal_value) {
  memset(test, 0, sizeof(*test));
  test->index = index;
  test->action.queue = queue;
  test->action.retire = test_retire;
  test->action.execution.user_data = test;
  test->waits[0].semaphore = &semaphores[wait];
  test->waits[0].timepoint.value = wait_value;
  test->action.waits = test->waits;
  test->action.wait_count = 1;
  test->signals[0].semaphore = &semaphores[signal];
  test->signals[0].value = signal_value;
  test->action.signals = test->signals;
  test->action.signal_count = 1;
  halo_hal_deferred_queue_submit(&deferred, &test->action);
}

// The same on the fenced queue.
static void test_submit(test_action_t *test, int index, int wait,
                        uint64_t wait_value, int signal,
                        uint64_t signal_value) {
  test_submit_on(&fenced_queue, test, index, wait, wait_value, signal,
                 signal_value);
}

// Runs |body| on a thread with a 256 KiB stack. |body| asserts nothing
// (cmocka's failures jump to the test's own thread): it leaves what it saw
// for the test to check.
static void run_on_small_stack(void *(*body)(void *), void *argument) {
  pthread_attr_t attributes;
  assert_int_equal(pthread_attr_init(&attributes), 0);
  assert_int_equal(pthread_attr_setstacksize(&attributes, 256 << 10), 0);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, &attributes, body, argument), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);
  pthread_attr_destroy(&attributes);
}

// ---------------------------------------------------------------- chains

// Each link waits on the one before (the first on the gate) through the
// semaphores 1..32 in turn, so that no semaphore holds more fences than it
// records (HALO_HAL_SEMAPHORE_MAX_FENCES).
enum { CHAIN = 20000, GATE = 0, RING = 32 };

static int chain_semaphore(int link) {
  return 1 + link % RING;
}
static uint64_t chain_value(int link) {
  return (uint64_t)(link / RING) + 1;
}

static void chain_submit(test_action_t *chain) {
  for (int i = 0; i < CHAIN; ++i) {
    test_submit(&chain[i], i, i ? chain_semaphore(i - 1) : GATE,
                i ? chain_value(i - 1) : 1, chain_semaphore(i), chain_value(i));
  }
}

// Released link after link on the device through the fences, without one
// completion (|executed_before_completions|); then completed in order.
static int executed_before_completions;
static void *fenced_chain(void *argument) {
  test_action_t *chain = argument;
  chain_submit(chain);
  halo_hal_semaphore_signal(&semaphores[GATE], 1);
  executed_before_completions = executed;
  for (int i = 0; i < CHAIN; ++i) {
    halo_hal_deferred_queue_post_completion(&chain[i].action, NULL);
  }
  halo_hal_deferred_queue_drain(&deferred);
  return NULL;
}

// Runs |body| over a new chain on a small stack; checks that every link
// retired with |code|. The caller frees the chain.
static test_action_t *chain_run(void *(*body)(void *),
                                halo_status_code_t code) {
  test_action_t *chain = calloc(CHAIN, sizeof(*chain));
  assert_non_null(chain);
  run_on_small_stack(body, chain);
  assert_int_equal(retired, CHAIN);
  for (int i = 0; i < CHAIN; ++i) {
    assert_true(chain[i].retired);
    assert_int_equal(chain[i].code, code);
  }
  return chain;
}

static void test_fenced_chain_issues_and_retires_in_a_loop(void **state) {
  (void)state;
  test_action_t *chain = chain_run(fenced_chain, HALO_STATUS_OK);
  assert_int_equal(executed_before_completions, CHAIN);
  assert_int_equal(
      halo_hal_semaphore_value(&semaphores[chain_semaphore(CHAIN - 1)]),
      chain_value(CHAIN - 1));
  assert_int_equal(deferred.waiting, 0);
  assert_int_equal(deferred.issued, 0);
  free(chain);
}

// The same chain, its gate failed before anything issued: every link fails.
static void *failed_chain(void *argument) {
  test_action_t *chain = argument;
  chain_submit(chain);
  halo_hal_semaphore_fail(&semaphores[GATE],
                          halo_status_make(HALO_STATUS_ABORTED, "gate failed"));
  return NULL;
}

static void test_failed_chain_retires_in_a_loop(void **state) {
  (void)state;
  test_action_t *chain = chain_run(failed_chain, HALO_STATUS_ABORTED);
  assert_int_equal(executed, 0);
  assert_int_not_equal(
      halo_hal_semaphore_failure(&semaphores[chain_semaphore(CHAIN - 1)]), 0);
  free(chain);
}

// ---------------------------------------------------------------- order

// P, on a queue without fences, completes and signals T: within its
// retirement R and A, both waiting on T, are released. R's execute fails (R
// signals S to 5); A issues (it signals S to 10, with a fence). C waits for
// S >= 5: R's failure reaches C before A's fence can release C to the
// device, and C fails without running, as it did when a failure was applied
// within its action's retirement.
enum { INIT = 0, T = 1, S = 2, Z = 3 };

static void test_known_failure_before_a_fence(void **state) {
  (void)state;
  test_action_t p, r, a, c;
  test_submit_on(&plain_queue, &p, 0, INIT, 1, T, 1);
  test_submit(&r, 1, T, 1, S, 5);
  test_submit(&a, 2, T, 1, S, 10);
  test_submit(&c, 3, S, 5, Z, 1);
  failing = &r;
  halo_hal_semaphore_signal(&semaphores[INIT], 1);
  assert_true(p.executed);
  halo_hal_deferred_queue_post_completion(&p.action, NULL);
  halo_hal_deferred_queue_drain(&deferred);
  assert_true(r.retired);
  assert_int_equal(r.code, HALO_STATUS_UNAVAILABLE);
  assert_true(c.retired);
  assert_false(c.executed);
  assert_int_equal(c.code, HALO_STATUS_UNAVAILABLE);
  assert_true(a.executed);
  assert_false(a.retired);
  // P's outcome first, then R's, then C's (which R's failed).
  assert_int_equal(retired, 3);
  assert_int_equal(retire_order[0], 0);
  assert_int_equal(retire_order[1], 1);
  assert_int_equal(retire_order[2], 3);
  halo_hal_deferred_queue_post_completion(&a.action, NULL);
  halo_hal_deferred_queue_drain(&deferred);
  assert_true(a.retired);
}

// An action that completes and retires before its fence was offered (its
// completion drained from inside another action's retirement, as halod
// drains after a worker's loss): the offer is dropped with its fence, and
// the action is handed back once. P (no fences) releases X and A within its
// retirement; X's execute fails, A's completes at once.
static test_action_t *drain_in_retire_of;
static void drain_in_retire(test_action_t *test) {
  if (test == drain_in_retire_of) halo_hal_deferred_queue_drain(&deferred);
}

static void test_retired_before_its_offer(void **state) {
  (void)state;
  test_action_t p, x, a;
  test_submit_on(&plain_queue, &p, 0, INIT, 1, T, 1);
  test_submit(&x, 1, T, 1, S, 1);
  test_submit(&a, 2, T, 1, S, 2);
  failing = &x;
  halo_hal_semaphore_signal(&semaphores[INIT], 1);
  completing = &a;  // its completion is in the inbox as it issues
  drain_in_retire_of = &x;
  on_retired = drain_in_retire;
  halo_hal_deferred_queue_post_completion(&p.action, NULL);
  halo_hal_deferred_queue_drain(&deferred);
  assert_true(x.retired);
  assert_int_equal(x.code, HALO_STATUS_UNAVAILABLE);
  assert_true(a.executed);
  assert_true(a.retired);
  assert_int_equal(a.code, HALO_STATUS_OK);
  assert_int_equal(retired, 3);
  assert_null(a.action.offer_fence);
  assert_null(semaphores[S].fences);
  assert_int_equal(fences_alive, 0);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_fenced_chain_issues_and_retires_in_a_loop),
      T(test_failed_chain_retires_in_a_loop),
      T(test_known_failure_before_a_fence),
      T(test_retired_before_its_offer),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
