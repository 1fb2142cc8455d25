// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The CUDA driver's loader (hal/cuda/cuda_symbols.c) against a stand-in
// libcuda.so.1 (tests/kernels/cuda/fake_libcuda.c, found through
// LD_LIBRARY_PATH): every symbol is asked for by its base name at the
// pinned API version, CUDA_MODULE_LOADING=EAGER is set before cuInit, and a
// driver without devices makes CUDA unavailable with the reason. Runs
// without a GPU (CI).
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "hal/cuda/cuda_symbols.h"
#include "hal/device.h"
#include "hal/registry.h"

typedef int (*requested_fn)(int index, const char **out_name, int *out_version);
typedef const char *(*loading_fn)(void);

static void test_probe_without_devices(void **state) {
  (void)state;
  char reason[256];
  assert_false(halo_hal_cuda_probe(reason, sizeof(reason)));
  print_message("reason: %s\n", reason);
  assert_non_null(strstr(reason, "sees no device"));
  // The registry: auto falls back to the local driver with the reason,
  // cuda insists and fails with it.
  halo_hal_registry_t registry;
  halo_status_t status = halo_hal_registry_initialize("auto", &registry);
  assert_null(status);
  assert_false(registry.drivers[0].available);
  assert_non_null(strstr(registry.drivers[0].reason, "sees no device"));
  assert_int_equal(registry.device_count, 1);
  assert_string_equal(registry.devices[0]->info.driver, "local");
  halo_hal_registry_deinitialize(&registry);
  status = halo_hal_registry_initialize("cuda", &registry);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNAVAILABLE);
  assert_non_null(strstr(halo_status_message(status), "sees no device"));
  halo_status_free(status);
}

static void test_symbols_by_base_name_at_the_pinned_version(void **state) {
  (void)state;
  void *fake = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(fake);
  requested_fn requested = (requested_fn)dlsym(fake, "fake_cuda_requested");
  loading_fn loading =
      (loading_fn)dlsym(fake, "fake_cuda_module_loading_at_init");
  assert_non_null(requested);
  assert_non_null(loading);
  assert_string_equal(loading(), "EAGER");
  const char *name;
  int version;
  int count = 0;
  bool saw_host_register = false;
  while (requested(count, &name, &version)) {
    // cuda.h maps e.g. cuMemHostRegister to cuMemHostRegister_v2: the
    // lookup must use the base name and let the version pick.
    if (strstr(name, "_v2") || strstr(name, "_v3") || strstr(name, "_ptsz")) {
      fail_msg("asked for a versioned name: %s", name);
    }
    assert_int_equal(version, HALO_HAL_CUDA_API_VERSION);
    if (strcmp(name, "cuMemHostRegister") == 0) saw_host_register = true;
    ++count;
  }
  print_message("%d driver symbols resolved\n", count);
  assert_true(saw_host_register);
  // Every entry of the table, once.
  int expected = 0;
#define COUNT_SYMBOL(name) ++expected;
  HALO_HAL_CUDA_DRIVER_SYMBOLS(COUNT_SYMBOL)
#undef COUNT_SYMBOL
  assert_int_equal(count, expected);
  dlclose(fake);
}

int main(void) {
  unsetenv("CUDA_MODULE_LOADING");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_probe_without_devices),
      cmocka_unit_test(test_symbols_by_base_name_at_the_pinned_version),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
