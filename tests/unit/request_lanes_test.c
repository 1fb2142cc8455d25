// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of daemon/request_lanes.c: the order in which halod's loop
// serves client requests (round-robin over trust domains, each domain's in
// the order they came), and the loop's slices, on a real libuv loop.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "daemon/request_lanes.h"

#include <stdlib.h>
#include <time.h>

// An event whose pipe id tells the test which it is.
static halod_server_event_t *event_new(uint32_t id) {
  halod_server_event_t *event = calloc(1, sizeof(*event));
  assert_non_null(event);
  event->pipe_id = id;
  return event;
}

// Pops every event, checking their ids against |expected|.
static void expect_pops(halod_request_lanes_t *lanes, const uint32_t *expected,
                        size_t count) {
  for (size_t i = 0; i < count; ++i) {
    halod_server_event_t *event = halod_request_lanes_pop(lanes);
    assert_non_null(event);
    assert_null(event->next);
    assert_int_equal(event->pipe_id, expected[i]);
    free(event);
  }
  assert_null(halod_request_lanes_pop(lanes));
  assert_int_equal(lanes->events, 0);
  assert_int_equal(lanes->lanes, 0);
}

// Each lane keeps its order; lanes take turns, one event each.
static void test_round_robin_keeps_each_lanes_order(void **state) {
  (void)state;
  halod_request_lanes_t lanes;
  halod_request_lanes_start(&lanes, NULL, NULL, NULL);
  assert_null(halod_request_lanes_pop(&lanes));
  // Domain 7's four requests arrive first, then 9's two, then 8's one.
  const uint64_t keys[] = {7, 7, 7, 7, 9, 9, 8};
  for (uint32_t i = 0; i < 7; ++i) {
    assert_true(halod_request_lanes_push(&lanes, keys[i], event_new(i + 1)));
  }
  assert_int_equal(lanes.events, 7);
  assert_int_equal(lanes.lanes, 3);
  const uint32_t expected[] = {1, 5, 7, 2, 6, 3, 4};
  expect_pops(&lanes, expected, 7);
}

// A domain that becomes busy while another is served goes ahead of the
// one just served: a request waits for at most one of each other domain.
static void test_new_lane_goes_ahead_of_the_lane_just_served(void **state) {
  (void)state;
  halod_request_lanes_t lanes;
  halod_request_lanes_start(&lanes, NULL, NULL, NULL);
  for (uint32_t i = 1; i <= 3; ++i) {
    assert_true(halod_request_lanes_push(&lanes, 1, event_new(i)));
  }
  halod_server_event_t *first = halod_request_lanes_pop(&lanes);
  assert_int_equal(first->pipe_id, 1);
  free(first);
  // While 1 was served, domain 2's request came, and another of domain 1.
  assert_true(halod_request_lanes_push(&lanes, 2, event_new(10)));
  assert_true(halod_request_lanes_push(&lanes, 1, event_new(4)));
  const uint32_t expected[] = {10, 2, 3, 4};
  expect_pops(&lanes, expected, 4);
  // An emptied lane is gone: its key starts a new one, last in turn.
  assert_true(halod_request_lanes_push(&lanes, 3, event_new(20)));
  assert_true(halod_request_lanes_push(&lanes, 1, event_new(21)));
  const uint32_t again[] = {20, 21};
  expect_pops(&lanes, again, 2);
}

typedef struct served_t {
  halod_request_lanes_t *lanes;
  uint32_t ids[16];
  uint32_t count;
  int sleep_ms;  // each event's service takes this long
} served_t;

static void serve(void *user_data, halod_server_event_t *event) {
  served_t *served = user_data;
  assert_true(served->count < 16);
  served->ids[served->count++] = event->pipe_id;
  free(event);
  if (served->sleep_ms > 0) {
    struct timespec pause = {0, served->sleep_ms * 1000000L};
    nanosleep(&pause, NULL);
  }
}

// The loop serves what was pushed, in turn, without being asked again, and
// stops looking once nothing waits (uv_run returns: no active handle).
static void test_loop_serves_every_event(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  served_t served = {0};
  halod_request_lanes_t lanes;
  halod_request_lanes_start(&lanes, &loop, serve, &served);
  const uint64_t keys[] = {5, 5, 6};
  for (uint32_t i = 0; i < 3; ++i) {
    assert_true(halod_request_lanes_push(&lanes, keys[i], event_new(i + 1)));
  }
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(served.count, 3);
  assert_int_equal(served.ids[0], 1);
  assert_int_equal(served.ids[1], 3);
  assert_int_equal(served.ids[2], 2);
  halod_request_lanes_stop(&lanes);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

// A turn of the loop serves requests for one slice at most: past it, the
// loop looks at its sockets before the next (at least one per turn).
static void test_one_slice_per_turn(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  // Each service takes twice a slice.
  served_t served = {.sleep_ms = 2 * HALOD_REQUEST_LANES_SLICE_NS / 1000000};
  halod_request_lanes_t lanes;
  halod_request_lanes_start(&lanes, &loop, serve, &served);
  for (uint32_t i = 1; i <= 3; ++i) {
    assert_true(halod_request_lanes_push(&lanes, 1, event_new(i)));
  }
  for (uint32_t turn = 1; turn <= 3; ++turn) {
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(served.count, turn);
  }
  assert_int_equal(lanes.events, 0);
  // Stopped with events waiting: they stay for the caller to answer.
  served.sleep_ms = 0;
  assert_true(halod_request_lanes_push(&lanes, 2, event_new(9)));
  halod_request_lanes_stop(&lanes);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(served.count, 3);
  const uint32_t left[] = {9};
  expect_pops(&lanes, left, 1);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_robin_keeps_each_lanes_order),
      cmocka_unit_test(test_new_lane_goes_ahead_of_the_lane_just_served),
      cmocka_unit_test(test_loop_serves_every_event),
      cmocka_unit_test(test_one_slice_per_turn),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
