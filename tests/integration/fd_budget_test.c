// Integration tests of halod's descriptor budget (issue 14): a session that
// creates exportable semaphores (a memfd page each) until refused gets
// RESOURCE_EXHAUSTED naming session-fds, or fd-reserve once halod nears
// RLIMIT_NOFILE, while another client connects and works throughout.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "tests/support/halo_test.h"

#define FLOOD_MAX 2000  // bound on the semaphores a flood creates

static int start_daemon(void **state, const char *const *args) {
  halo_test_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  halo_test_daemon_start_with_args(&fixture->daemon, args);
  fixture->client = halo_test_connect(&fixture->daemon, 10000);
  return 0;
}

// Another client connects, creates a semaphore, signals and reads it.
static void expect_other_client_works(halo_test_fixture_t *fixture) {
  halo_client_t *other = halo_test_connect(&fixture->daemon, 10000);
  HALO_TEST_ASSERT_OK(halo_client_ping(other));
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(other, 0, 0, &semaphore));
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 7));
  uint64_t value = 0;
  HALO_TEST_ASSERT_OK(halo_semaphore_query(semaphore, &value));
  assert_int_equal(value, 7);
  halo_semaphore_release(semaphore);
  halo_client_close(other);
}

// Creates exportable semaphores until refused (at most FLOOD_MAX), checking
// that another client works every 50; returns how many were created.
static uint32_t flood(halo_test_fixture_t *fixture,
                      halo_semaphore_t **semaphores, const char *setting) {
  uint32_t count = 0;
  for (; count < FLOOD_MAX; ++count) {
    halo_status_t status = halo_semaphore_create(
        fixture->client, 0, HALO_OBJECT_FLAG_EXPORTABLE, &semaphores[count]);
    if (status) {
      HALO_TEST_EXPECT_STATUS(status, HALO_STATUS_RESOURCE_EXHAUSTED, setting);
      break;
    }
    if (count % 50 == 0) expect_other_client_works(fixture);
  }
  assert_true(count < FLOOD_MAX);
  return count;
}

static void test_session_fds(void **state) {
  const char *args[] = {"--session-fds", "100", NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t **semaphores = calloc(FLOOD_MAX, sizeof(*semaphores));
  assert_non_null(semaphores);
  int64_t start = halo_test_now_ns();
  uint32_t count = flood(fixture, semaphores, "session-fds");
  printf("session-fds 100: %u exportable semaphores, refused after %.1f ms\n",
         count, (double)(halo_test_now_ns() - start) / HALO_TEST_MS);
  assert_int_equal(count, 100);
  expect_other_client_works(fixture);
  // A page released is a descriptor back in the budget.
  halo_semaphore_release(semaphores[0]);
  HALO_TEST_ASSERT_OK(halo_semaphore_create(
      fixture->client, 0, HALO_OBJECT_FLAG_EXPORTABLE, &semaphores[0]));
  for (uint32_t i = 0; i < count; ++i) halo_semaphore_release(semaphores[i]);
  free(semaphores);
}

static void test_fd_reserve(void **state) {
  // halod raises its soft limit to the hard one (inherited from us); a
  // reserve of all but 200 descriptors leaves pages fewer than that.
  struct rlimit limit;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max == RLIM_INFINITY || limit.rlim_max < 1024 ||
      limit.rlim_max - 200 > (1u << 30)) {
    skip();
  }
  char reserve[32];
  snprintf(reserve, sizeof(reserve), "%llu",
           (unsigned long long)limit.rlim_max - 200);
  const char *args[] = {"--fd-reserve", reserve, "--session-fds", "1000", NULL};
  start_daemon(state, args);
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t **semaphores = calloc(FLOOD_MAX, sizeof(*semaphores));
  assert_non_null(semaphores);
  uint32_t count = flood(fixture, semaphores, "fd-reserve");
  printf("fd-reserve: %u exportable semaphores before refusal\n", count);
  assert_true(count > 0);
  // The reserve holds: a new client connects and is served, though halod
  // has no page to spare it until the flood's pages go.
  halo_client_t *other = halo_test_connect(&fixture->daemon, 10000);
  HALO_TEST_ASSERT_OK(halo_client_ping(other));
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_EXPECT_STATUS(halo_semaphore_create(other, 0, 0, &semaphore),
                          HALO_STATUS_RESOURCE_EXHAUSTED, "fd-reserve");
  halo_client_close(other);
  for (uint32_t i = 0; i < count; ++i) halo_semaphore_release(semaphores[i]);
  expect_other_client_works(fixture);
  free(semaphores);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name) cmocka_unit_test_teardown(name, halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_session_fds),
      T(test_fd_reserve),
  };
#undef T
  return cmocka_run_group_tests_name("fd_budget", tests, NULL, NULL);
}
