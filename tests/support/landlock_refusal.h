// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// What the tests expect where the host has no Landlock (or runs under
// tests/support/without_landlock.c): halo refuses what it runs only in its
// sandbox, saying why. Include after <cmocka.h>.
#ifndef HALO_TESTS_SUPPORT_LANDLOCK_REFUSAL_H_
#define HALO_TESTS_SUPPORT_LANDLOCK_REFUSAL_H_

#include <string.h>

#include "halo/status.h"

// Checks that |status| is FAILED_PRECONDITION naming Landlock and |reason|
// (halo_sandbox_abi's), and frees it.
static inline void halo_test_expect_landlock_refusal(halo_status_t status,
                                                     const char *reason) {
  assert_non_null(status);
  print_message("without Landlock: %s\n", halo_status_message(status));
  assert_int_equal(halo_status_code(status), HALO_STATUS_FAILED_PRECONDITION);
  assert_non_null(strstr(halo_status_message(status), "Landlock"));
  assert_non_null(strstr(halo_status_message(status), reason));
  halo_status_free(status);
}

#endif  // HALO_TESTS_SUPPORT_LANDLOCK_REFUSAL_H_
