// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of timeline semaphores through libhalo in one process
// (the multi-process cases are in multiprocess_test.c): values only
// increase (a signal to a lower or equal value is INVALID_ARGUMENT, never
// ignored), values >= 2^63 are rejected, the first failure wins and reached
// values stay reached, timeouts, wait lists with ANY and ALL (an empty one
// is satisfied at once), export and import, and what the admin API shows.
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

#define MS HALO_TEST_MS

static halo_semaphore_t *create(halo_client_t *client, uint64_t value,
                                uint32_t flags) {
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, value, flags, &semaphore));
  assert_non_null(semaphore);
  return semaphore;
}

static uint64_t query(halo_semaphore_t *semaphore) {
  uint64_t value = 0;
  HALO_TEST_ASSERT_OK(halo_semaphore_query(semaphore, &value));
  return value;
}

// Asserts |status| has |code| and a message containing |fragment|.
static void expect_status(halo_status_t status, halo_status_code_t code,
                          const char *fragment) {
  halo_status_code_t actual = halo_status_code(status);
  const char *message = halo_status_message(status);
  if (actual != code || (fragment && !strstr(message, fragment))) {
    print_error("got %s (\"%s\"), expected %s with \"%s\"\n",
                halo_status_code_name(actual), message,
                halo_status_code_name(code), fragment ? fragment : "");
    halo_status_free(status);
    fail();
  }
  halo_status_free(status);
}

// A thread blocked in halo_semaphore_wait (or wait_list).
typedef struct blocked_wait_t {
  pthread_t thread;
  halo_semaphore_t *semaphores[4];
  uint64_t values[4];
  size_t count;
  halo_wait_mode_t mode;
  _Atomic pid_t tid;
  halo_status_t status;
  size_t index;
} blocked_wait_t;

static void *blocked_wait_main(void *arg) {
  blocked_wait_t *wait = arg;
  atomic_store(&wait->tid, (pid_t)syscall(SYS_gettid));
  if (wait->count == 1) {
    wait->status =
        halo_semaphore_wait(wait->semaphores[0], wait->values[0], 5000 * MS);
  } else {
    wait->status =
        halo_semaphore_wait_list(wait->count, wait->semaphores, wait->values,
                                 wait->mode, 5000 * MS, &wait->index);
  }
  return NULL;
}

// Starts the wait and returns once the thread sleeps in it.
static void blocked_wait_start(blocked_wait_t *wait) {
  wait->index = 99;
  assert_int_equal(pthread_create(&wait->thread, NULL, blocked_wait_main, wait),
                   0);
  while (atomic_load(&wait->tid) == 0) halo_test_sleep_ms(1);
  assert_true(halo_test_wait_until_sleeping(getpid(), atomic_load(&wait->tid),
                                            HALO_TEST_DEADLINE_MS));
}

static void blocked_wait_join(blocked_wait_t *wait) {
  assert_int_equal(pthread_join(wait->thread, NULL), 0);
}

// ---------------------------------------------------------------- values

static void test_create_and_query(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *zero = create(fixture->client, 0, 0);
  halo_semaphore_t *big = create(fixture->client, HALO_SEMAPHORE_MAX_VALUE, 0);
  assert_int_equal(query(zero), 0);
  assert_int_equal(query(big), HALO_SEMAPHORE_MAX_VALUE);
  assert_int_not_equal(halo_semaphore_handle(zero), 0);
  assert_int_not_equal(halo_semaphore_handle(zero), halo_semaphore_handle(big));
  halo_semaphore_t *bad = (halo_semaphore_t *)fixture;
  expect_status(halo_semaphore_create(fixture->client,
                                      HALO_SEMAPHORE_MAX_VALUE + 1, 0, &bad),
                HALO_STATUS_INVALID_ARGUMENT, NULL);
  assert_null(bad);
  halo_semaphore_release(big);
  halo_semaphore_release(zero);
}

static void test_signal_only_increases(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *semaphore = create(fixture->client, 5, 0);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 6));
  assert_int_equal(query(semaphore), 6);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 1000));
  assert_int_equal(query(semaphore), 1000);
  // Equal and lower values are rejected, never ignored; the value stays.
  expect_status(halo_semaphore_signal(semaphore, 1000),
                HALO_STATUS_INVALID_ARGUMENT, "1000");
  expect_status(halo_semaphore_signal(semaphore, 7),
                HALO_STATUS_INVALID_ARGUMENT, NULL);
  expect_status(halo_semaphore_signal(semaphore, 0),
                HALO_STATUS_INVALID_ARGUMENT, NULL);
  assert_int_equal(query(semaphore), 1000);
  // Values >= 2^63 are rejected.
  expect_status(halo_semaphore_signal(semaphore, 1ull << 63),
                HALO_STATUS_INVALID_ARGUMENT, NULL);
  expect_status(halo_semaphore_signal(semaphore, UINT64_MAX),
                HALO_STATUS_INVALID_ARGUMENT, NULL);
  assert_int_equal(query(semaphore), 1000);
  // 2^63 - 1 is the last value.
  HALO_TEST_ASSERT_OK(
      halo_semaphore_signal(semaphore, HALO_SEMAPHORE_MAX_VALUE));
  assert_int_equal(query(semaphore), HALO_SEMAPHORE_MAX_VALUE);
  expect_status(halo_semaphore_signal(semaphore, HALO_SEMAPHORE_MAX_VALUE),
                HALO_STATUS_INVALID_ARGUMENT, NULL);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(semaphore, HALO_SEMAPHORE_MAX_VALUE, 0));
  halo_semaphore_release(semaphore);
}

// ---------------------------------------------------------------- waits

static void test_wait_timeouts(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *semaphore = create(fixture->client, 3, 0);
  // Reached: OK even with a zero timeout.
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(semaphore, 3, 0));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(semaphore, 0, 0));
  // Not reached: a zero timeout polls once.
  int64_t start = halo_test_now_ns();
  HALO_TEST_ASSERT_CODE(halo_semaphore_wait(semaphore, 4, 0),
                        HALO_STATUS_DEADLINE_EXCEEDED);
  assert_true(halo_test_now_ns() - start < 100 * MS);
  // 100 ms: not earlier, not much later.
  start = halo_test_now_ns();
  HALO_TEST_ASSERT_CODE(halo_semaphore_wait(semaphore, 4, 100 * MS),
                        HALO_STATUS_DEADLINE_EXCEEDED);
  int64_t elapsed = halo_test_now_ns() - start;
  assert_true(elapsed >= 100 * MS);
  assert_true(elapsed < 1000 * MS);
  // A timed-out wait changes nothing.
  assert_int_equal(query(semaphore), 3);
  halo_semaphore_release(semaphore);
}

static void test_signal_wakes_waiting_thread(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *semaphore = create(fixture->client, 0, 0);
  blocked_wait_t wait = {.semaphores = {semaphore}, .values = {2}, .count = 1};
  blocked_wait_start(&wait);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 1));
  // Below its value: it sleeps again.
  assert_true(halo_test_wait_until_sleeping(getpid(), atomic_load(&wait.tid),
                                            HALO_TEST_DEADLINE_MS));
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 2));
  blocked_wait_join(&wait);
  HALO_TEST_ASSERT_OK(wait.status);
  halo_semaphore_release(semaphore);
}

static void test_wait_list_any(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *other = halo_test_connect(&fixture->daemon, 0);
  // Semaphores of two clients in one list.
  blocked_wait_t wait = {
      .semaphores = {create(fixture->client, 0, 0), create(other, 0, 0),
                     create(fixture->client, 0, 0)},
      .values = {1, 1, 1},
      .count = 3,
      .mode = HALO_WAIT_ANY};
  blocked_wait_start(&wait);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(wait.semaphores[1], 1));
  blocked_wait_join(&wait);
  HALO_TEST_ASSERT_OK(wait.status);
  assert_int_equal(wait.index, 1);
  // Already satisfied: at once. A NULL index is fine.
  size_t index = 99;
  HALO_TEST_ASSERT_OK(halo_semaphore_wait_list(3, wait.semaphores, wait.values,
                                               HALO_WAIT_ANY, 0, &index));
  assert_int_equal(index, 1);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait_list(3, wait.semaphores, wait.values,
                                               HALO_WAIT_ANY, 0, NULL));
  // None satisfied within the timeout.
  uint64_t higher[3] = {5, 5, 5};
  int64_t start = halo_test_now_ns();
  HALO_TEST_ASSERT_CODE(
      halo_semaphore_wait_list(3, wait.semaphores, higher, HALO_WAIT_ANY,
                               50 * MS, &index),
      HALO_STATUS_DEADLINE_EXCEEDED);
  assert_true(halo_test_now_ns() - start >= 50 * MS);
  for (int i = 0; i < 3; ++i) halo_semaphore_release(wait.semaphores[i]);
  halo_client_close(other);
}

static void test_wait_list_all(void **state) {
  halo_test_fixture_t *fixture = *state;
  blocked_wait_t wait = {.semaphores = {create(fixture->client, 0, 0),
                                        create(fixture->client, 0, 0)},
                         .values = {1, 2},
                         .count = 2,
                         .mode = HALO_WAIT_ALL};
  blocked_wait_start(&wait);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(wait.semaphores[1], 2));
  // One of two: still waiting.
  assert_true(halo_test_wait_until_sleeping(getpid(), atomic_load(&wait.tid),
                                            HALO_TEST_DEADLINE_MS));
  HALO_TEST_ASSERT_CODE(
      halo_semaphore_wait_list(2, wait.semaphores, wait.values, HALO_WAIT_ALL,
                               0, NULL),
      HALO_STATUS_DEADLINE_EXCEEDED);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(wait.semaphores[0], 1));
  blocked_wait_join(&wait);
  HALO_TEST_ASSERT_OK(wait.status);
  for (int i = 0; i < 2; ++i) halo_semaphore_release(wait.semaphores[i]);
}

static void test_wait_list_arguments(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *semaphores[HALO_WAIT_MAX_COUNT + 1];
  uint64_t values[HALO_WAIT_MAX_COUNT + 1];
  for (int i = 0; i <= HALO_WAIT_MAX_COUNT; ++i) {
    semaphores[i] = create(fixture->client, 1, 0);
    values[i] = 1;
  }
  // The most a list may hold works; one more is INVALID_ARGUMENT.
  HALO_TEST_ASSERT_OK(halo_semaphore_wait_list(HALO_WAIT_MAX_COUNT, semaphores,
                                               values, HALO_WAIT_ALL, 0, NULL));
  HALO_TEST_ASSERT_CODE(
      halo_semaphore_wait_list(HALO_WAIT_MAX_COUNT + 1, semaphores, values,
                               HALO_WAIT_ALL, 0, NULL),
      HALO_STATUS_INVALID_ARGUMENT);
  HALO_TEST_ASSERT_CODE(
      halo_semaphore_wait_list(2, NULL, values, HALO_WAIT_ALL, 0, NULL),
      HALO_STATUS_INVALID_ARGUMENT);
  HALO_TEST_ASSERT_CODE(
      halo_semaphore_wait_list(2, semaphores, NULL, HALO_WAIT_ALL, 0, NULL),
      HALO_STATUS_INVALID_ARGUMENT);
  // An empty list is satisfied at once in either mode, even with no time
  // to wait; the arrays may be NULL and the index names no semaphore.
  size_t index = 7;
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait_list(0, NULL, NULL, HALO_WAIT_ALL, 0, &index));
  assert_int_equal(index, 0);
  index = 7;
  HALO_TEST_ASSERT_OK(halo_semaphore_wait_list(0, NULL, NULL, HALO_WAIT_ANY,
                                               HALO_TIMEOUT_INFINITE, &index));
  assert_int_equal(index, 0);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait_list(0, semaphores, values, HALO_WAIT_ANY, 0, NULL));
  HALO_TEST_ASSERT_CODE(
      halo_semaphore_wait_list(0, NULL, NULL, (halo_wait_mode_t)2, 0, NULL),
      HALO_STATUS_INVALID_ARGUMENT);
  for (int i = 0; i <= HALO_WAIT_MAX_COUNT; ++i) {
    halo_semaphore_release(semaphores[i]);
  }
}

// ---------------------------------------------------------------- failure

static void test_failure_semantics(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *semaphore = create(fixture->client, 0, 0);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 3));
  blocked_wait_t wait = {.semaphores = {semaphore}, .values = {4}, .count = 1};
  blocked_wait_start(&wait);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_fail(semaphore, HALO_STATUS_DATA_LOSS, "disk on fire"));
  blocked_wait_join(&wait);
  // The waiter for a value not reached gets the failure, with its message.
  expect_status(wait.status, HALO_STATUS_DATA_LOSS, "disk on fire");
  // A value reached before the failure stays reached.
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(semaphore, 3, 0));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(semaphore, 1, 1000 * MS));
  // New waits for unreached values fail at once, whatever the timeout.
  int64_t start = halo_test_now_ns();
  expect_status(halo_semaphore_wait(semaphore, 5, 3000 * MS),
                HALO_STATUS_DATA_LOSS, NULL);
  assert_true(halo_test_now_ns() - start < 1000 * MS);
  // Query returns the failure and still the value.
  uint64_t value = 0;
  expect_status(halo_semaphore_query(semaphore, &value), HALO_STATUS_DATA_LOSS,
                NULL);
  assert_int_equal(value, 3);
  // The first failure wins; later ones return OK and change nothing.
  HALO_TEST_ASSERT_OK(
      halo_semaphore_fail(semaphore, HALO_STATUS_ABORTED, "second"));
  expect_status(halo_semaphore_wait(semaphore, 4, 0), HALO_STATUS_DATA_LOSS,
                NULL);
  // Signals after the failure are FAILED_PRECONDITION.
  expect_status(halo_semaphore_signal(semaphore, 10),
                HALO_STATUS_FAILED_PRECONDITION, NULL);
  value = 0;
  halo_status_free(halo_semaphore_query(semaphore, &value));
  assert_int_equal(value, 3);
  halo_semaphore_release(semaphore);
}

static void test_fail_with_ok_code_is_rejected(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *semaphore = create(fixture->client, 0, 0);
  expect_status(halo_semaphore_fail(semaphore, HALO_STATUS_OK, "not a failure"),
                HALO_STATUS_INVALID_ARGUMENT, NULL);
  expect_status(
      halo_semaphore_fail(semaphore, (halo_status_code_t)999, "unknown code"),
      HALO_STATUS_INVALID_ARGUMENT, NULL);
  // Still healthy.
  assert_int_equal(query(semaphore), 0);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 1));
  halo_semaphore_release(semaphore);
}

static void test_wait_list_ends_on_failure(void **state) {
  halo_test_fixture_t *fixture = *state;
  blocked_wait_t wait = {.semaphores = {create(fixture->client, 0, 0),
                                        create(fixture->client, 0, 0)},
                         .values = {1, 1},
                         .count = 2,
                         .mode = HALO_WAIT_ALL};
  blocked_wait_start(&wait);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_fail(wait.semaphores[1], HALO_STATUS_DEVICE_LOST, "gpu"));
  blocked_wait_join(&wait);
  expect_status(wait.status, HALO_STATUS_DEVICE_LOST, NULL);
  // ANY: a failure of a semaphore not yet satisfied ends the wait too.
  expect_status(halo_semaphore_wait_list(2, wait.semaphores, wait.values,
                                         HALO_WAIT_ANY, 0, NULL),
                HALO_STATUS_DEVICE_LOST, NULL);
  for (int i = 0; i < 2; ++i) halo_semaphore_release(wait.semaphores[i]);
}

// ---------------------------------------------------------------- export

static void test_export_requires_flag(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *semaphore = create(fixture->client, 0, 0);
  halo_token_t token;
  expect_status(halo_semaphore_export(semaphore, &token),
                HALO_STATUS_FAILED_PRECONDITION, "EXPORTABLE");
  halo_semaphore_release(semaphore);
}

static void test_import_unknown_token(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_token_t token;
  memset(&token, 0x42, sizeof(token));
  halo_semaphore_t *semaphore = (halo_semaphore_t *)fixture;
  expect_status(halo_semaphore_import(fixture->client, &token, &semaphore),
                HALO_STATUS_NOT_FOUND, NULL);
  assert_null(semaphore);
  // A buffer's token does not import as a semaphore.
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_buffer_create(fixture->client, 0,
                                         HALO_MEMORY_HOST_VISIBLE, 64,
                                         HALO_OBJECT_FLAG_EXPORTABLE, &buffer));
  HALO_TEST_ASSERT_OK(halo_buffer_export(buffer, &token));
  expect_status(halo_semaphore_import(fixture->client, &token, &semaphore),
                HALO_STATUS_NOT_FOUND, NULL);
  halo_buffer_release(buffer);
}

static void test_export_import_between_clients(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *other = halo_test_connect(&fixture->daemon, 0);
  halo_semaphore_t *original =
      create(fixture->client, 7, HALO_OBJECT_FLAG_EXPORTABLE);
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_semaphore_export(original, &token));
  halo_semaphore_t *imported = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_import(other, &token, &imported));
  assert_int_equal(query(imported), 7);
  // The importer can signal; the creator sees it, and the reverse.
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(imported, 8));
  assert_int_equal(query(original), 8);
  blocked_wait_t wait = {.semaphores = {imported}, .values = {9}, .count = 1};
  blocked_wait_start(&wait);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(original, 9));
  blocked_wait_join(&wait);
  HALO_TEST_ASSERT_OK(wait.status);
  // Monotonicity holds across holders.
  expect_status(halo_semaphore_signal(imported, 9),
                HALO_STATUS_INVALID_ARGUMENT, NULL);
  // The admin API shows one semaphore with two holders.
  halo_wire_response_t *response = halo_test_admin_semaphores(&fixture->daemon);
  Halo__Wire__AdminSemaphoresReply *reply = response->admin_semaphores;
  assert_int_equal(reply->n_semaphores, 1);
  assert_int_equal(reply->semaphores[0]->value, 9);
  assert_int_equal(reply->semaphores[0]->holders, 2);
  assert_true(reply->semaphores[0]->exportable);
  assert_int_equal(reply->semaphores[0]->owner_session,
                   halo_client_session_id(fixture->client));
  halo__wire__response__free_unpacked(response, NULL);
  // The importer releasing its reference leaves the creator's intact.
  halo_semaphore_release(imported);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(original, 10));
  assert_int_equal(query(original), 10);
  halo_semaphore_release(original);
  halo_client_close(other);
}

static void test_creator_release_keeps_importer_working(void **state) {
  // An explicit release by the creator is not the end of its session: the
  // importer keeps a working semaphore.
  halo_test_fixture_t *fixture = *state;
  halo_client_t *creator = halo_test_connect(&fixture->daemon, 0);
  halo_semaphore_t *original = create(creator, 1, HALO_OBJECT_FLAG_EXPORTABLE);
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_semaphore_export(original, &token));
  halo_semaphore_t *imported = NULL;
  HALO_TEST_ASSERT_OK(
      halo_semaphore_import(fixture->client, &token, &imported));
  halo_semaphore_release(original);
  assert_int_equal(query(imported), 1);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(imported, 2));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(imported, 2, 0));
  halo_semaphore_release(imported);
  halo_client_close(creator);
}

static void test_creator_closing_aborts_importers(void **state) {
  // The creator's session ends (an orderly halo_client_close here; SIGKILL
  // in multiprocess_test.c) while another client holds the semaphore:
  // halo.h and docs/protocol.md say the daemon fails it with ABORTED.
  halo_test_fixture_t *fixture = *state;
  halo_client_t *creator = halo_test_connect(&fixture->daemon, 0);
  halo_semaphore_t *original = create(creator, 0, HALO_OBJECT_FLAG_EXPORTABLE);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(original, 2));
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_semaphore_export(original, &token));
  halo_semaphore_t *imported = NULL;
  HALO_TEST_ASSERT_OK(
      halo_semaphore_import(fixture->client, &token, &imported));
  blocked_wait_t wait = {.semaphores = {imported}, .values = {3}, .count = 1};
  blocked_wait_start(&wait);
  halo_client_close(creator);
  blocked_wait_join(&wait);
  expect_status(wait.status, HALO_STATUS_ABORTED, NULL);
  // Reached values stay reached.
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(imported, 2, 0));
  uint64_t value = 0;
  expect_status(halo_semaphore_query(imported, &value), HALO_STATUS_ABORTED,
                NULL);
  assert_int_equal(value, 2);
  halo_semaphore_release(imported);
}

// ---------------------------------------------------------------- scale

static void test_many_semaphores_are_independent(void **state) {
  // More than fit on one page (63 slots).
  halo_test_fixture_t *fixture = *state;
  enum { COUNT = 200 };
  halo_semaphore_t **semaphores = calloc(COUNT, sizeof(*semaphores));
  assert_non_null(semaphores);
  for (int i = 0; i < COUNT; ++i) {
    semaphores[i] = create(fixture->client, (uint64_t)i, 0);
  }
  for (int i = 0; i < COUNT; i += 3) {
    HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphores[i], 1000 + i));
  }
  for (int i = 0; i < COUNT; ++i) {
    assert_int_equal(query(semaphores[i]),
                     i % 3 == 0 ? 1000 + (uint64_t)i : (uint64_t)i);
  }
  Halo__Wire__SessionInfo info;
  assert_true(halo_test_admin_find_session(&fixture->daemon, getpid(), &info));
  assert_int_equal(info.semaphores, COUNT);
  for (int i = 0; i < COUNT; ++i) halo_semaphore_release(semaphores[i]);
  free(semaphores);
  assert_true(halo_test_admin_find_session(&fixture->daemon, getpid(), &info));
  assert_int_equal(info.semaphores, 0);
  halo_wire_response_t *response = halo_test_admin_semaphores(&fixture->daemon);
  assert_int_equal(response->admin_semaphores->n_semaphores, 0);
  halo__wire__response__free_unpacked(response, NULL);
}

static void test_null_arguments(void **state) {
  halo_test_fixture_t *fixture = *state;
  HALO_TEST_ASSERT_CODE(halo_semaphore_create(fixture->client, 0, 0, NULL),
                        HALO_STATUS_INVALID_ARGUMENT);
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_CODE(halo_semaphore_create(NULL, 0, 0, &semaphore),
                        HALO_STATUS_INVALID_ARGUMENT);
  HALO_TEST_ASSERT_CODE(halo_semaphore_signal(NULL, 1),
                        HALO_STATUS_INVALID_ARGUMENT);
  HALO_TEST_ASSERT_CODE(halo_semaphore_wait(NULL, 1, 0),
                        HALO_STATUS_INVALID_ARGUMENT);
  uint64_t value;
  HALO_TEST_ASSERT_CODE(halo_semaphore_query(NULL, &value),
                        HALO_STATUS_INVALID_ARGUMENT);
  halo_semaphore_release(NULL);
}

// ---------------------------------------------------------------- halod gone

// A wait on semaphores of two clients, each of its own halod, ends with
// UNAVAILABLE when either halod dies, as a wait on one semaphore does: not
// only the first semaphore's daemon is watched. Here the second one dies
// under an ALL wait that nothing else would end (it waits for 5 s; the
// death must end it well before).
static void test_wait_list_sees_each_daemon_die(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_test_daemon_t second = {0};
  halo_test_daemon_start(&second);
  halo_client_t *other = halo_test_connect(&second, 0);
  blocked_wait_t wait = {.count = 2, .mode = HALO_WAIT_ALL};
  wait.semaphores[0] = create(fixture->client, 0, 0);
  wait.semaphores[1] = create(other, 0, 0);
  wait.values[0] = wait.values[1] = 1;
  blocked_wait_start(&wait);
  pid_t pid = second.pid;
  int64_t killed_ns = halo_test_now_ns();
  halo_test_daemon_kill(&second);
  blocked_wait_join(&wait);
  assert_true(halo_test_now_ns() - killed_ns < 2000 * MS);
  char pid_text[32];
  snprintf(pid_text, sizeof(pid_text), "pid %d", (int)pid);
  expect_status(wait.status, HALO_STATUS_UNAVAILABLE, pid_text);
  assert_int_equal(wait.index, 1);
  // The same for ANY, and for a wait that only polls.
  wait =
      (blocked_wait_t){.count = 2,
                       .mode = HALO_WAIT_ANY,
                       .semaphores = {wait.semaphores[0], wait.semaphores[1]},
                       .values = {1, 1}};
  blocked_wait_main(&wait);
  expect_status(wait.status, HALO_STATUS_UNAVAILABLE, pid_text);
  expect_status(halo_semaphore_wait_list(2, wait.semaphores, wait.values,
                                         HALO_WAIT_ALL, 0, NULL),
                HALO_STATUS_UNAVAILABLE, pid_text);
  // The first daemon's semaphore still works alone.
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(wait.semaphores[0], 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(wait.semaphores[0], 1, 0));
  halo_semaphore_release(wait.semaphores[1]);
  halo_semaphore_release(wait.semaphores[0]);
  halo_client_close(other);
  halo_test_daemon_cleanup(&second);
}

// Once halod is gone (SIGKILL: it failed nothing), a query says so, as a
// wait does: UNAVAILABLE, not the value last written as if it were current.
static void test_query_sees_daemon_death(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_semaphore_t *semaphore = create(fixture->client, 3, 0);
  assert_int_equal(query(semaphore), 3);
  pid_t pid = fixture->daemon.pid;
  halo_test_daemon_kill(&fixture->daemon);
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(semaphore, 4, 1000 * MS),
                          HALO_STATUS_UNAVAILABLE, "exited");
  uint64_t value = 0;
  char pid_text[32];
  snprintf(pid_text, sizeof(pid_text), "pid %d", (int)pid);
  expect_status(halo_semaphore_query(semaphore, &value),
                HALO_STATUS_UNAVAILABLE, pid_text);
  // The last value seen is still given, for what it is worth.
  assert_int_equal(value, 3);
  halo_semaphore_release(semaphore);
}

// A failed semaphore's wait and query keep to their own time, halod stopped
// (SIGSTOP) as it is asked for the message: a poll (timeout 0) and a query
// return within a fraction of a second with the code alone, not after the
// request timeout (5 s here). Once halod answered, the message is kept:
// later queries say it without asking, halod stopped again.
// A halod the test stopped (SIGSTOP), resumed by the teardown should the
// test fail meanwhile.
static pid_t stopped_daemon;

static int resume_teardown(void **state) {
  if (stopped_daemon > 0) kill(stopped_daemon, SIGCONT);
  stopped_daemon = 0;
  return halo_test_fixture_teardown(state);
}

static void test_failed_semaphore_keeps_the_wait_timeout(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_options_t options = {.address = fixture->daemon.listen_address,
                                   .request_timeout_ms = 5000};
  halo_client_t *client = NULL;
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &client));
  halo_semaphore_t *semaphore = create(client, 0, 0);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_fail(semaphore, HALO_STATUS_INTERNAL, "the test's cause"));
  stopped_daemon = fixture->daemon.pid;
  assert_int_equal(kill(fixture->daemon.pid, SIGSTOP), 0);
  int64_t start = halo_test_now_ns();
  expect_status(halo_semaphore_wait(semaphore, 1, 0), HALO_STATUS_INTERNAL,
                "semaphore failed");
  int64_t polled_ms = (halo_test_now_ns() - start) / MS;
  start = halo_test_now_ns();
  uint64_t value = 0;
  expect_status(halo_semaphore_query(semaphore, &value), HALO_STATUS_INTERNAL,
                "semaphore failed");
  int64_t queried_ms = (halo_test_now_ns() - start) / MS;
  assert_int_equal(kill(fixture->daemon.pid, SIGCONT), 0);
  print_message("halod stopped: the poll took %lld ms, the query %lld ms\n",
                (long long)polled_ms, (long long)queried_ms);
  assert_true(polled_ms < 2000);
  assert_true(queried_ms < 2000);
  // halod back: the message (once halod served the lookups left behind),
  // then kept.
  assert_true(HALO_TEST_POLL(
      ({
        halo_status_t status = halo_semaphore_query(semaphore, &value);
        bool said = strstr(halo_status_message(status), "the test's cause");
        halo_status_free(status);
        said;
      }),
      HALO_TEST_DEADLINE_MS));
  assert_int_equal(kill(fixture->daemon.pid, SIGSTOP), 0);
  start = halo_test_now_ns();
  expect_status(halo_semaphore_wait(semaphore, 1, 0), HALO_STATUS_INTERNAL,
                "the test's cause");
  int64_t kept_ms = (halo_test_now_ns() - start) / MS;
  assert_int_equal(kill(fixture->daemon.pid, SIGCONT), 0);
  assert_true(kept_ms < 50);
  halo_semaphore_release(semaphore);
  halo_client_close(client);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name)                                                  \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_create_and_query),
      T(test_signal_only_increases),
      T(test_wait_timeouts),
      T(test_signal_wakes_waiting_thread),
      T(test_wait_list_any),
      T(test_wait_list_all),
      T(test_wait_list_arguments),
      T(test_failure_semantics),
      T(test_fail_with_ok_code_is_rejected),
      T(test_wait_list_ends_on_failure),
      T(test_export_requires_flag),
      T(test_import_unknown_token),
      T(test_export_import_between_clients),
      T(test_creator_release_keeps_importer_working),
      T(test_creator_closing_aborts_importers),
      T(test_many_semaphores_are_independent),
      cmocka_unit_test_setup_teardown(
          test_failed_semaphore_keeps_the_wait_timeout, halo_test_fixture_setup,
          resume_teardown),
      T(test_null_arguments),
      T(test_wait_list_sees_each_daemon_die),
      T(test_query_sees_daemon_death),
  };
#undef T
  return cmocka_run_group_tests_name("semaphore", tests, NULL, NULL);
}
