// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The fault budget's bookkeeping (daemon/fault_budget.c) on a clock the
// test sets: faults counted per process within the window, the refusal at
// fault-budget and until when, expiry, a reused pid, forgiveness, budget 0,
// and the bounds (fault times per process, processes kept).
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "daemon/fault_budget.h"

#include <string.h>

#define S 1000000000ll  // nanoseconds

typedef struct fixture_t {
  halod_fault_budget_t budget;
  halod_config_t config;
} fixture_t;

static int setup(void **state) {
  static fixture_t fixture;
  memset(&fixture, 0, sizeof(fixture));
  fixture.config.fault_budget = 3;
  fixture.config.fault_budget_window_s = 10;
  halod_fault_budget_initialize(&fixture.budget);
  *state = &fixture;
  return 0;
}

static int teardown(void **state) {
  fixture_t *fixture = *state;
  halod_fault_budget_deinitialize(&fixture->budget);
  return 0;
}

static const halod_client_process_t kProcess = {
    .pid = 4242, .uid = 1001, .start = 777};

// Fails unless |process| is refused at |now| with a message holding every
// one of |substrings| (NULL-terminated).
static void expect_refused(fixture_t *fixture,
                           const halod_client_process_t *process, int64_t now,
                           const char *const *substrings) {
  halo_status_t status = halod_fault_budget_check(
      &fixture->budget, &fixture->config, process, now);
  assert_non_null(status);
  assert_int_equal(halo_status_code(status), HALO_STATUS_RESOURCE_EXHAUSTED);
  for (const char *const *s = substrings; s && *s; ++s) {
    if (!strstr(halo_status_message(status), *s)) {
      print_error("\"%s\" not in: %s\n", *s, halo_status_message(status));
      halo_status_free(status);
      fail();
    }
  }
  halo_status_free(status);
}

static void expect_accepted(fixture_t *fixture,
                            const halod_client_process_t *process,
                            int64_t now) {
  halo_status_t status = halod_fault_budget_check(
      &fixture->budget, &fixture->config, process, now);
  if (status) {
    print_error("refused: %s\n", halo_status_message(status));
    halo_status_free(status);
    fail();
  }
}

static uint32_t charge(fixture_t *fixture,
                       const halod_client_process_t *process, int64_t now) {
  return halod_fault_budget_charge(&fixture->budget, &fixture->config, process,
                                   now);
}

static uint32_t count(fixture_t *fixture, const halod_client_process_t *process,
                      int64_t now) {
  return halod_fault_budget_count(&fixture->budget, &fixture->config, process,
                                  now);
}

static void test_refused_at_the_budget_until_a_fault_ages_out(void **state) {
  fixture_t *fixture = *state;
  int64_t t0 = 1000 * S;
  expect_accepted(fixture, &kProcess, t0);
  assert_int_equal(charge(fixture, &kProcess, t0), 1);
  assert_int_equal(charge(fixture, &kProcess, t0 + 1 * S), 2);
  expect_accepted(fixture, &kProcess, t0 + 1 * S);
  assert_int_equal(charge(fixture, &kProcess, t0 + 2 * S), 3);
  static const char *const refused[] = {
      "client pid 4242 (uid 1001) caused 3 device faults in the last 10 s "
      "(fault-budget=3): refused until ",
      "(in 8 s); an operator can clear it with haloctl forgive-client 4242",
      NULL};
  expect_refused(fixture, &kProcess, t0 + 2 * S, refused);
  // Until the oldest of the three leaves the window (t0 + 10 s).
  expect_refused(fixture, &kProcess, t0 + 10 * S - 1, NULL);
  expect_accepted(fixture, &kProcess, t0 + 10 * S);
  assert_int_equal(count(fixture, &kProcess, t0 + 10 * S), 2);
  // A fourth fault refuses it again, until the second ages out (t0 + 11 s;
  // the message rounds up).
  assert_int_equal(charge(fixture, &kProcess, t0 + 10 * S + S / 2), 3);
  static const char *const again[] = {"(in 1 s)", NULL};
  expect_refused(fixture, &kProcess, t0 + 10 * S + S / 2, again);
  expect_accepted(fixture, &kProcess, t0 + 11 * S);
  // All gone after a quiet window.
  assert_int_equal(count(fixture, &kProcess, t0 + 21 * S), 0);
}

static void test_a_reused_pid_starts_clean(void **state) {
  fixture_t *fixture = *state;
  for (int i = 0; i < 3; ++i) charge(fixture, &kProcess, 5 * S);
  expect_refused(fixture, &kProcess, 5 * S, NULL);
  halod_client_process_t later = kProcess;
  later.start = kProcess.start + 1;
  expect_accepted(fixture, &later, 5 * S);
  assert_int_equal(count(fixture, &later, 5 * S), 0);
  // Charging the later process replaces the earlier one's faults.
  assert_int_equal(charge(fixture, &later, 6 * S), 1);
  assert_int_equal(count(fixture, &kProcess, 6 * S), 0);
}

static void test_forgive(void **state) {
  fixture_t *fixture = *state;
  for (int i = 0; i < 4; ++i) charge(fixture, &kProcess, 5 * S);
  assert_int_equal(halod_fault_budget_forgive(&fixture->budget,
                                              &fixture->config, 4242, 5 * S),
                   4);
  expect_accepted(fixture, &kProcess, 5 * S);
  assert_int_equal(halod_fault_budget_forgive(&fixture->budget,
                                              &fixture->config, 4242, 5 * S),
                   0);
}

static void test_budget_zero_counts_but_never_refuses(void **state) {
  fixture_t *fixture = *state;
  fixture->config.fault_budget = 0;
  for (int i = 0; i < 10; ++i) charge(fixture, &kProcess, 5 * S);
  assert_int_equal(count(fixture, &kProcess, 5 * S), 10);
  expect_accepted(fixture, &kProcess, 5 * S);
  // A reload that sets a budget applies to the faults already counted.
  fixture->config.fault_budget = 10;
  expect_refused(fixture, &kProcess, 5 * S, NULL);
}

static void test_bounded(void **state) {
  fixture_t *fixture = *state;
  // At most HALOD_FAULT_BUDGET_MAX fault times per process.
  fixture->config.fault_budget = HALOD_FAULT_BUDGET_MAX;
  for (int i = 0; i < HALOD_FAULT_BUDGET_MAX + 10; ++i) {
    charge(fixture, &kProcess, 5 * S + i);
  }
  assert_int_equal(count(fixture, &kProcess, 6 * S), HALOD_FAULT_BUDGET_MAX);
  expect_refused(fixture, &kProcess, 6 * S, NULL);
  // At most HALOD_FAULT_BUDGET_MAX_PROCESSES processes: the one whose newest
  // fault is oldest goes first.
  for (uint32_t i = 0; i < HALOD_FAULT_BUDGET_MAX_PROCESSES; ++i) {
    halod_client_process_t other = {.pid = 10000 + i, .uid = 1, .start = 1};
    charge(fixture, &other, 7 * S + i);
  }
  assert_int_equal(count(fixture, &kProcess, 8 * S), 0);
  halod_client_process_t first = {.pid = 10000, .uid = 1, .start = 1};
  halod_client_process_t last = {
      .pid = 10000 + HALOD_FAULT_BUDGET_MAX_PROCESSES - 1,
      .uid = 1,
      .start = 1};
  assert_int_equal(count(fixture, &first, 8 * S), 1);
  assert_int_equal(count(fixture, &last, 8 * S), 1);
  // Expired processes go before any that is still counted.
  fixture->config.fault_budget_window_s = 1;
  halod_client_process_t late = {.pid = 99999, .uid = 1, .start = 1};
  charge(fixture, &late, 100 * S);
  assert_int_equal(count(fixture, &late, 100 * S), 1);
  assert_int_equal(count(fixture, &last, 100 * S), 0);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_refused_at_the_budget_until_a_fault_ages_out),
      T(test_a_reused_pid_starts_clean),
      T(test_forgive),
      T(test_budget_zero_counts_but_never_refuses),
      T(test_bounded),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
