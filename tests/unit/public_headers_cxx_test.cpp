// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The public headers from C++: every one compiles as strict ISO C++17
// (-pedantic, -Wold-style-cast, -Wzero-as-null-pointer-constant, -Werror),
// their inline helpers and macros give C's values and types, and libhalo's
// functions link by their C names.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
extern "C" {  // cmocka 1.1's header has no C++ guards
#include <cmocka.h>
}
// clang-format on

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "halo/halo.h"
#include "halo/local_kernel.h"
#include "halo/status.h"

static_assert(std::is_same<decltype(halo_ok_status()), halo_status_t>::value,
              "halo_ok_status() is a halo_status_t");
static_assert(HALO_SEMAPHORE_MAX_VALUE == INT64_MAX,
              "a semaphore's values are below 2^63");
static_assert(HALO_LOCAL_PARAM_COUNT(8, 8, 8, 4) == 4,
              "HALO_LOCAL_KERNEL_PARAMS counts its sizes at compile time");

HALO_LOCAL_KERNEL_PARAMS(scale, 8, 4);
HALO_LOCAL_KERNEL_NO_PARAMS(none);

static void test_helpers(void **unused) {
  static_cast<void>(unused);
  assert_null(halo_ok_status());
  halo_buffer_ref_t ref = halo_binding_ref(2, 16, 64);
  assert_null(ref.buffer);
  assert_int_equal(ref.slot, 2);
  assert_int_equal(ref.offset, 16);
  assert_int_equal(ref.length, 64);
  assert_int_equal(halo_local_params_scale.count, 2);
  assert_int_equal(halo_local_params_scale.sizes[0], 8);
  assert_int_equal(halo_local_params_scale.sizes[1], 4);
  assert_int_equal(halo_local_params_none.count, 0);
  float value = 2.5f;
  std::uint32_t n = 7;
  void *values[2] = {&value, &n};
  halo_dispatch_state_t state = {};
  state.args = values;
  state.arg_count = 2;
  assert_true(HALO_ARG(&state, 0, float) == 2.5f);
  assert_int_equal(HALO_ARG(&state, 1, std::uint32_t), 7);
}

// libhalo's functions, declared in extern "C" blocks, link from C++.
static void test_functions_link(void **unused) {
  static_cast<void>(unused);
  assert_string_equal(halo_status_code_name(HALO_STATUS_NOT_FOUND),
                      "NOT_FOUND");
  halo_status_t status =
      halo_status_make(HALO_STATUS_INVALID_ARGUMENT, "slot %d", 3);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_string_equal(halo_status_message(status), "slot 3");
  halo_status_free(status);
}

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_helpers),
      cmocka_unit_test(test_functions_link),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
