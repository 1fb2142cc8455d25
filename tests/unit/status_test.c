// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the status type (include/halo/status.h,
// common/status.h): construction, codes and their names, annotation, errno
// mapping, ownership.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "common/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo/status.h"

static void test_ok_is_null(void **state) {
  (void)state;
  assert_null(halo_ok_status());
  assert_null(halo_status_make(HALO_STATUS_OK, "ignored %d", 1));
  assert_int_equal(halo_status_code(NULL), HALO_STATUS_OK);
  assert_string_equal(halo_status_message(NULL), "");
  assert_int_equal(halo_status_consume_code(NULL), HALO_STATUS_OK);
  halo_status_free(NULL);  // must be a no-op
}

static void test_make_formats_message(void **state) {
  (void)state;
  halo_status_t status =
      halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                       "binding %u out of range (%s)", 7u, "capacity 4");
  assert_non_null(status);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_string_equal(halo_status_message(status),
                      "binding 7 out of range (capacity 4)");
  halo_status_free(status);
}

static halo_status_t make_with_va_list(halo_status_code_t code,
                                       const char *format, ...) {
  va_list args;
  va_start(args, format);
  halo_status_t status = halo_status_makev(code, format, args);
  va_end(args);
  return status;
}

static void test_makev(void **state) {
  (void)state;
  halo_status_t status = make_with_va_list(
      HALO_STATUS_NOT_FOUND, "handle %llu of %s", 42ull, "semaphore");
  assert_int_equal(halo_status_code(status), HALO_STATUS_NOT_FOUND);
  assert_string_equal(halo_status_message(status), "handle 42 of semaphore");
  halo_status_free(status);
  assert_null(make_with_va_list(HALO_STATUS_OK, "x"));
}

static void test_long_message_is_kept_whole(void **state) {
  (void)state;
  size_t length = 10000;
  char *text = malloc(length + 1);
  assert_non_null(text);
  for (size_t i = 0; i < length; ++i) text[i] = (char)('a' + i % 26);
  text[length] = '\0';
  halo_status_t status = halo_status_make(HALO_STATUS_DATA_LOSS, "%s", text);
  assert_string_equal(halo_status_message(status), text);
  status = halo_status_annotate(status, "while %s", "reading");
  assert_int_equal(strlen(halo_status_message(status)),
                   length + strlen("while reading: "));
  halo_status_free(status);
  free(text);
}

static void test_code_names(void **state) {
  (void)state;
  static const char *const expected[HALO_STATUS_CODE_COUNT] = {
      "OK",
      "CANCELLED",
      "UNKNOWN",
      "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",
      "NOT_FOUND",
      "ALREADY_EXISTS",
      "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION",
      "ABORTED",
      "OUT_OF_RANGE",
      "UNIMPLEMENTED",
      "INTERNAL",
      "UNAVAILABLE",
      "DATA_LOSS",
      "UNAUTHENTICATED",
      "DEVICE_LOST",
      "SESSION_LOST",
  };
  for (int code = 0; code < HALO_STATUS_CODE_COUNT; ++code) {
    assert_string_equal(halo_status_code_name((halo_status_code_t)code),
                        expected[code]);
  }
  // The values are the wire's: they must never move.
  assert_int_equal(HALO_STATUS_INVALID_ARGUMENT, 3);
  assert_int_equal(HALO_STATUS_UNAVAILABLE, 14);
  assert_int_equal(HALO_STATUS_SESSION_LOST, 18);
  assert_string_equal(
      halo_status_code_name((halo_status_code_t)HALO_STATUS_CODE_COUNT),
      "UNKNOWN_CODE");
  assert_string_equal(halo_status_code_name((halo_status_code_t)-1),
                      "UNKNOWN_CODE");
  assert_string_equal(halo_status_code_name((halo_status_code_t)1000),
                      "UNKNOWN_CODE");
}

static void test_every_code_round_trips(void **state) {
  (void)state;
  for (int code = 1; code < HALO_STATUS_CODE_COUNT; ++code) {
    halo_status_t status =
        halo_status_make((halo_status_code_t)code, "code %d", code);
    assert_non_null(status);
    assert_int_equal(halo_status_code(status), code);
    assert_int_equal(halo_status_consume_code(status), code);
  }
}

static void test_annotate_prefixes_and_keeps_code(void **state) {
  (void)state;
  halo_status_t status =
      halo_status_make(HALO_STATUS_PERMISSION_DENIED, "uid %d", 1000);
  status = halo_status_annotate(status, "fd channel AUTH of session %d", 3);
  assert_int_equal(halo_status_code(status), HALO_STATUS_PERMISSION_DENIED);
  assert_string_equal(halo_status_message(status),
                      "fd channel AUTH of session 3: uid 1000");
  status = halo_status_annotate(status, "connect");
  assert_string_equal(halo_status_message(status),
                      "connect: fd channel AUTH of session 3: uid 1000");
  halo_status_free(status);
  assert_null(halo_status_annotate(NULL, "nothing %d", 1));
}

static void test_code_from_errno(void **state) {
  (void)state;
  static const struct {
    int error_number;
    halo_status_code_t code;
  } cases[] = {
      {0, HALO_STATUS_OK},
      {EINVAL, HALO_STATUS_INVALID_ARGUMENT},
      {EBADF, HALO_STATUS_INVALID_ARGUMENT},
      {ENOENT, HALO_STATUS_NOT_FOUND},
      {ESRCH, HALO_STATUS_NOT_FOUND},
      {EEXIST, HALO_STATUS_ALREADY_EXISTS},
      {EPERM, HALO_STATUS_PERMISSION_DENIED},
      {EACCES, HALO_STATUS_PERMISSION_DENIED},
      {ENOMEM, HALO_STATUS_RESOURCE_EXHAUSTED},
      {EMFILE, HALO_STATUS_RESOURCE_EXHAUSTED},
      {ETIMEDOUT, HALO_STATUS_DEADLINE_EXCEEDED},
      {ECONNREFUSED, HALO_STATUS_UNAVAILABLE},
      {EPIPE, HALO_STATUS_UNAVAILABLE},
      {ECONNRESET, HALO_STATUS_UNAVAILABLE},
      {EINTR, HALO_STATUS_CANCELLED},
      {ENOSYS, HALO_STATUS_UNIMPLEMENTED},
      {ERANGE, HALO_STATUS_OUT_OF_RANGE},
      {EXDEV, HALO_STATUS_INTERNAL},  // anything unmapped
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    assert_int_equal(halo_status_code_from_errno(cases[i].error_number),
                     cases[i].code);
  }
}

static void test_status_from_errno_names_call_and_reason(void **state) {
  (void)state;
  halo_status_t status = halo_status_from_errno(EACCES, "open(%s)", "/x");
  assert_int_equal(halo_status_code(status), HALO_STATUS_PERMISSION_DENIED);
  char expected[256];
  snprintf(expected, sizeof(expected), "open(/x): %s", strerror(EACCES));
  assert_string_equal(halo_status_message(status), expected);
  halo_status_free(status);
}

static halo_status_t fails_at_step(int failing_step, int *out_steps) {
  *out_steps = 0;
  for (int step = 0; step < 3; ++step) {
    HALO_RETURN_IF_ERROR(
        step == failing_step
            ? halo_status_make(HALO_STATUS_ABORTED, "step %d", step)
            : NULL);
    ++*out_steps;
  }
  return NULL;
}

static void test_return_if_error(void **state) {
  (void)state;
  int steps;
  assert_null(fails_at_step(-1, &steps));
  assert_int_equal(steps, 3);
  halo_status_t status = fails_at_step(1, &steps);
  assert_int_equal(steps, 1);
  assert_string_equal(halo_status_message(status), "step 1");
  halo_status_free(status);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ok_is_null),
      cmocka_unit_test(test_make_formats_message),
      cmocka_unit_test(test_makev),
      cmocka_unit_test(test_long_message_is_kept_whole),
      cmocka_unit_test(test_code_names),
      cmocka_unit_test(test_every_code_round_trips),
      cmocka_unit_test(test_annotate_prefixes_and_keeps_code),
      cmocka_unit_test(test_code_from_errno),
      cmocka_unit_test(test_status_from_errno_names_call_and_reason),
      cmocka_unit_test(test_return_if_error),
  };
  return cmocka_run_group_tests_name("status", tests, NULL, NULL);
}
