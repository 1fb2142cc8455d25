// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of handles, with raw nng requests: a handle is valid
// only in the session that received it. Another session's handle, a stale
// (released) handle, a handle of the wrong type, 0, or a random number gets
// an error whose message names the handle; never a crash, and never an
// effect on the object it happens to name elsewhere.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/halo_test.h"

typedef struct handle_fixture_t {
  halo_test_fixture_t base;  // first: the shared teardown frees it
  halo_test_raw_t a;
  halo_test_raw_t b;
} handle_fixture_t;

static int handle_setup(void **state) {
  handle_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  halo_test_daemon_start(&fixture->base.daemon);
  fixture->base.client = halo_test_connect(&fixture->base.daemon, 0);
  halo_test_raw_open(&fixture->a, fixture->base.daemon.listen_address, 0);
  halo_test_raw_hello(&fixture->a);
  halo_test_raw_open(&fixture->b, fixture->base.daemon.listen_address, 0);
  halo_test_raw_hello(&fixture->b);
  return 0;
}

static int handle_teardown(void **state) {
  handle_fixture_t *fixture = *state;
  halo_test_raw_close(&fixture->a);
  halo_test_raw_close(&fixture->b);
  return halo_test_fixture_teardown(state);
}

static void expect_daemon_serves(handle_fixture_t *fixture) {
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->base.client));
}

// Codes a bad handle may get.
static const halo_status_code_t bad_handle_codes[] = {
    HALO_STATUS_INVALID_ARGUMENT, HALO_STATUS_NOT_FOUND};

#define EXPECT_BAD_HANDLE(response)                                    \
  halo_test_expect_error_in((response), bad_handle_codes, 2, "handle", \
                            __FILE__, __LINE__)

static uint64_t query_value(halo_test_raw_t *raw, uint64_t handle) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__SemaphoreQuery query = HALO__WIRE__SEMAPHORE_QUERY__INIT;
  query.handle = handle;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY;
  request.semaphore_query = &query;
  halo_wire_response_t *response =
      HALO_TEST_EXPECT_OK(halo_test_raw_call(raw, &request));
  uint64_t value = response->semaphore_query->value;
  halo__wire__response__free_unpacked(response, NULL);
  return value;
}

static halo_wire_response_t *release_semaphore(halo_test_raw_t *raw,
                                               uint64_t handle) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__SemaphoreRelease release = HALO__WIRE__SEMAPHORE_RELEASE__INIT;
  release.handle = handle;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_RELEASE;
  request.semaphore_release = &release;
  return halo_test_raw_call(raw, &request);
}

static halo_wire_response_t *release_buffer(halo_test_raw_t *raw,
                                            uint64_t handle) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__BufferRelease release = HALO__WIRE__BUFFER_RELEASE__INIT;
  release.handle = handle;
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE;
  request.buffer_release = &release;
  return halo_test_raw_call(raw, &request);
}

static halo_wire_response_t *write_buffer(halo_test_raw_t *raw,
                                          uint64_t handle) {
  static uint8_t data[4] = {1, 2, 3, 4};
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__BufferWrite write = HALO__WIRE__BUFFER_WRITE__INIT;
  write.handle = handle;
  write.offset = 0;
  write.data.data = data;
  write.data.len = sizeof(data);
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_WRITE;
  request.buffer_write = &write;
  return halo_test_raw_call(raw, &request);
}

static void test_wrong_type(void **state) {
  handle_fixture_t *fixture = *state;
  // Session a holds only a buffer: no semaphore handle can match.
  uint64_t buffer = halo_test_raw_buffer_create(
      &fixture->a, 4096, HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE, 0, NULL);
  EXPECT_BAD_HANDLE(halo_test_raw_semaphore_signal(&fixture->a, buffer, 1));
  EXPECT_BAD_HANDLE(release_semaphore(&fixture->a, buffer));
  // And the other way round.
  uint64_t semaphore =
      halo_test_raw_semaphore_create(&fixture->b, 0, 0, NULL, NULL);
  EXPECT_BAD_HANDLE(write_buffer(&fixture->b, semaphore));
  EXPECT_BAD_HANDLE(release_buffer(&fixture->b, semaphore));
  // Both objects are intact.
  halo__wire__response__free_unpacked(
      HALO_TEST_EXPECT_OK(write_buffer(&fixture->a, buffer)), NULL);
  halo__wire__response__free_unpacked(
      HALO_TEST_EXPECT_OK(
          halo_test_raw_semaphore_signal(&fixture->b, semaphore, 1)),
      NULL);
  expect_daemon_serves(fixture);
}

static void test_other_sessions_handle(void **state) {
  handle_fixture_t *fixture = *state;
  uint64_t semaphore =
      halo_test_raw_semaphore_create(&fixture->a, 10, 0, NULL, NULL);
  uint64_t buffer = halo_test_raw_buffer_create(
      &fixture->a, 4096, HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE, 0, NULL);
  // Session b holds nothing: a's handles mean nothing there.
  EXPECT_BAD_HANDLE(halo_test_raw_semaphore_signal(&fixture->b, semaphore, 11));
  EXPECT_BAD_HANDLE(release_semaphore(&fixture->b, semaphore));
  EXPECT_BAD_HANDLE(write_buffer(&fixture->b, buffer));
  EXPECT_BAD_HANDLE(release_buffer(&fixture->b, buffer));
  // Even when b holds objects of its own (its handles may look alike).
  uint64_t own = halo_test_raw_semaphore_create(&fixture->b, 0, 0, NULL, NULL);
  uint64_t own_buffer = halo_test_raw_buffer_create(
      &fixture->b, 4096, HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE, 0, NULL);
  if (own != semaphore) {
    EXPECT_BAD_HANDLE(
        halo_test_raw_semaphore_signal(&fixture->b, semaphore, 11));
  }
  if (own_buffer != buffer) {
    EXPECT_BAD_HANDLE(release_buffer(&fixture->b, buffer));
  }
  // a's objects are untouched.
  assert_int_equal(query_value(&fixture->a, semaphore), 10);
  halo__wire__response__free_unpacked(
      HALO_TEST_EXPECT_OK(write_buffer(&fixture->a, buffer)), NULL);
  Halo__Wire__SessionInfo info;
  halo_wire_response_t *sessions =
      halo_test_admin_sessions(&fixture->base.daemon);
  memset(&info, 0, sizeof(info));
  for (size_t i = 0; i < sessions->admin_sessions->n_sessions; ++i) {
    if (sessions->admin_sessions->sessions[i]->session_id ==
        fixture->a.session_id) {
      info = *sessions->admin_sessions->sessions[i];
    }
  }
  halo__wire__response__free_unpacked(sessions, NULL);
  assert_int_equal(info.semaphores, 1);
  assert_int_equal(info.buffers, 1);
  expect_daemon_serves(fixture);
}

static void test_stale_handle(void **state) {
  handle_fixture_t *fixture = *state;
  uint64_t semaphore =
      halo_test_raw_semaphore_create(&fixture->a, 0, 0, NULL, NULL);
  halo__wire__response__free_unpacked(
      HALO_TEST_EXPECT_OK(release_semaphore(&fixture->a, semaphore)), NULL);
  EXPECT_BAD_HANDLE(halo_test_raw_semaphore_signal(&fixture->a, semaphore, 1));
  EXPECT_BAD_HANDLE(release_semaphore(&fixture->a, semaphore));  // twice
  // A new object may reuse the slot; the old handle still does not reach
  // it.
  uint64_t fresh =
      halo_test_raw_semaphore_create(&fixture->a, 0, 0, NULL, NULL);
  if (fresh != semaphore) {
    EXPECT_BAD_HANDLE(
        halo_test_raw_semaphore_signal(&fixture->a, semaphore, 1));
    assert_int_equal(query_value(&fixture->a, fresh), 0);
  }
  uint64_t buffer = halo_test_raw_buffer_create(
      &fixture->a, 64, HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE, 0, NULL);
  halo__wire__response__free_unpacked(
      HALO_TEST_EXPECT_OK(release_buffer(&fixture->a, buffer)), NULL);
  EXPECT_BAD_HANDLE(write_buffer(&fixture->a, buffer));
  EXPECT_BAD_HANDLE(release_buffer(&fixture->a, buffer));
  expect_daemon_serves(fixture);
}

static void test_error_message_names_the_handle(void **state) {
  handle_fixture_t *fixture = *state;
  uint64_t semaphore =
      halo_test_raw_semaphore_create(&fixture->a, 0, 0, NULL, NULL);
  halo_wire_response_t *response =
      halo_test_raw_semaphore_signal(&fixture->b, semaphore, 1);
  assert_int_not_equal(response->code, HALO_STATUS_OK);
  // The number itself, in decimal or hex.
  char decimal[32];
  char hex[32];
  snprintf(decimal, sizeof(decimal), "%" PRIu64, semaphore);
  snprintf(hex, sizeof(hex), "%" PRIx64, semaphore);
  const char *message = response->message ? response->message : "";
  if (!strstr(message, decimal) && !strstr(message, hex)) {
    print_error("message \"%s\" does not name handle %s (0x%s)\n", message,
                decimal, hex);
    halo__wire__response__free_unpacked(response, NULL);
    fail();
  }
  halo__wire__response__free_unpacked(response, NULL);
}

static void test_random_handles(void **state) {
  handle_fixture_t *fixture = *state;
  uint64_t semaphore =
      halo_test_raw_semaphore_create(&fixture->a, 0, 0, NULL, NULL);
  uint64_t buffer = halo_test_raw_buffer_create(
      &fixture->a, 4096, HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE, 0, NULL);
  srand(2024);
  for (int i = 0; i < 300; ++i) {
    uint64_t handle =
        ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 11) ^ (uint64_t)rand();
    if (i % 3 == 0) handle = (uint64_t)i;  // small numbers too
    if (handle == semaphore || handle == buffer) continue;
    EXPECT_BAD_HANDLE(
        halo_test_raw_semaphore_signal(&fixture->a, handle, 1000 + i));
    EXPECT_BAD_HANDLE(write_buffer(&fixture->a, handle));
  }
  EXPECT_BAD_HANDLE(halo_test_raw_semaphore_signal(&fixture->a, UINT64_MAX, 1));
  EXPECT_BAD_HANDLE(halo_test_raw_semaphore_signal(&fixture->a, 0, 1));
  assert_int_equal(query_value(&fixture->a, semaphore), 0);
  expect_daemon_serves(fixture);
}

static void test_imported_handle_is_per_session(void **state) {
  handle_fixture_t *fixture = *state;
  // a exports, b imports: b's handle is b's, a's stays a's.
  uint64_t original =
      halo_test_raw_semaphore_create(&fixture->a, 3, 1, NULL, NULL);
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Export export_body = HALO__WIRE__EXPORT__INIT;
  export_body.handle = original;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_EXPORT;
  request.semaphore_export = &export_body;
  halo_wire_response_t *exported =
      HALO_TEST_EXPECT_OK(halo_test_raw_call(&fixture->a, &request));
  assert_int_equal(exported->body_case, HALO__WIRE__RESPONSE__BODY_EXPORTED);
  Halo__Wire__Import import_body = HALO__WIRE__IMPORT__INIT;
  import_body.token = exported->exported->token;
  Halo__Wire__Request import_request = HALO__WIRE__REQUEST__INIT;
  import_request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_IMPORT;
  import_request.semaphore_import = &import_body;
  halo_wire_response_t *imported =
      HALO_TEST_EXPECT_OK(halo_test_raw_call(&fixture->b, &import_request));
  halo__wire__response__free_unpacked(exported, NULL);
  uint64_t copy = imported->semaphore->handle;
  halo__wire__response__free_unpacked(imported, NULL);
  assert_int_equal(query_value(&fixture->b, copy), 3);
  if (copy != original) {
    EXPECT_BAD_HANDLE(halo_test_raw_semaphore_signal(&fixture->b, original, 4));
    EXPECT_BAD_HANDLE(halo_test_raw_semaphore_signal(&fixture->a, copy, 4));
  }
  // b releasing its copy leaves a's handle working, and b's copy is stale.
  halo__wire__response__free_unpacked(
      HALO_TEST_EXPECT_OK(release_semaphore(&fixture->b, copy)), NULL);
  EXPECT_BAD_HANDLE(halo_test_raw_semaphore_signal(&fixture->b, copy, 4));
  halo__wire__response__free_unpacked(
      HALO_TEST_EXPECT_OK(
          halo_test_raw_semaphore_signal(&fixture->a, original, 4)),
      NULL);
  assert_int_equal(query_value(&fixture->a, original), 4);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name) \
  cmocka_unit_test_setup_teardown(name, handle_setup, handle_teardown)
  const struct CMUnitTest tests[] = {
      T(test_wrong_type),     T(test_other_sessions_handle),
      T(test_stale_handle),   T(test_error_message_names_the_handle),
      T(test_random_handles), T(test_imported_handle_is_per_session),
  };
#undef T
  return cmocka_run_group_tests_name("handle", tests, NULL, NULL);
}
