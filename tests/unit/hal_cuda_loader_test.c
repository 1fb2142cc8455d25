// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The CUDA driver's loader (hal/cuda/cuda_symbols.c) against a stand-in
// libcuda.so.1 (tests/kernels/cuda/fake_libcuda.c, found through
// LD_LIBRARY_PATH) and a stand-in libnvrtc.so.12 beside it: every symbol
// is asked for by its base name at its own API version (the table's, not
// the headers'), CUDA_MODULE_LOADING=EAGER is set before cuInit, and a
// driver without devices makes CUDA unavailable with the reason. A CUDA
// 12.4 driver loads (cuEventElapsedTime falls back to its older variant), a
// 12.3 one is refused naming both versions; NVRTC is tried by soname in
// the order the driver can run, so a CUDA 12 driver gets NVRTC 12 even
// where NVRTC 13 is installed. Each driver version is loaded in a child
// process (the loader runs once per process). Runs without a GPU (CI).
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hal/cuda/cuda_symbols.h"
#include "hal/device.h"
#include "hal/registry.h"

typedef int (*requested_fn)(int index, const char **out_name, int *out_version);
typedef const char *(*loading_fn)(void);

// The table's version and fallback for |name|; false if not in it.
static bool table_version(const char *name, int *out_version,
                          int *out_fallback) {
  static const struct {
    const char *name;
    int version;
    int fallback;
  } table[] = {
#define TABLE_ENTRY(symbol, version, fallback) {#symbol, version, fallback},
      HALO_HAL_CUDA_DRIVER_SYMBOLS(TABLE_ENTRY)
#undef TABLE_ENTRY
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i) {
    if (strcmp(table[i].name, name) == 0) {
      *out_version = table[i].version;
      *out_fallback = table[i].fallback;
      return true;
    }
  }
  return false;
}

// Runs |child| in a forked process with FAKE_CUDA_DRIVER_VERSION=|driver|;
// the child's assertions fail it (exit status 1).
static void run_with_driver(const char *driver, void (*child)(void)) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("FAKE_CUDA_DRIVER_VERSION", driver, 1);
    child();
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

// In a child: a failed check exits 1 with the reason on stderr.
#define CHILD_CHECK(condition, ...)           \
  do {                                        \
    if (!(condition)) {                       \
      fprintf(stderr, __VA_ARGS__);           \
      fprintf(stderr, " (%s)\n", #condition); \
      _exit(1);                               \
    }                                         \
  } while (0)

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

static void test_symbols_by_base_name_at_their_versions(void **state) {
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
  int newest = 0;
  bool saw_host_register = false;
  bool saw_add_node = false;
  while (requested(count, &name, &version)) {
    // cuda.h maps e.g. cuMemHostRegister to cuMemHostRegister_v2: the
    // lookup must use the base name and let the version pick.
    if (strstr(name, "_v2") || strstr(name, "_v3") || strstr(name, "_ptsz")) {
      fail_msg("asked for a versioned name: %s", name);
    }
    // Each at its own version (a 13000 driver has every one of them), never
    // at the headers' CUDA_VERSION unless the table says so.
    int expected = 0;
    int fallback = 0;
    if (!table_version(name, &expected, &fallback)) {
      fail_msg("asked for %s, which is not in the table", name);
    }
    assert_int_equal(version, expected);
    assert_true(version >= 12000 && version <= CUDA_VERSION);
    if (version > newest) newest = version;
    if (strcmp(name, "cuMemHostRegister") == 0) {
      saw_host_register = true;
      assert_int_equal(version, 12000);
    }
    if (strcmp(name, "cuGraphAddNode") == 0) {
      saw_add_node = true;  // the variant with edge data: CUDA 12.3
      assert_int_equal(version, 12030);
    }
    ++count;
  }
  print_message("%d driver symbols resolved\n", count);
  assert_true(saw_host_register);
  assert_true(saw_add_node);
  // Every entry of the table, once; the oldest driver halo accepts is the
  // newest version any required entry needs.
  int expected = 0;
  int required = 0;
#define COUNT_SYMBOL(symbol, version, fallback) \
  ++expected;                                   \
  if ((fallback) == 0 && (version) > required) required = (version);
  HALO_HAL_CUDA_DRIVER_SYMBOLS(COUNT_SYMBOL)
#undef COUNT_SYMBOL
  assert_int_equal(count, expected);
  assert_int_equal(required, HALO_HAL_CUDA_MIN_DRIVER_VERSION);
  assert_true(newest >= required);
  assert_int_equal(halo_hal_cuda_driver_version(), 13000);
  dlclose(fake);
}

// A CUDA 12.4 driver: every symbol resolves (cuEventElapsedTime, asked at
// 12080 first, at its fallback 12000), so the load gets as far as the
// device count.
static void child_driver_12_4(void) {
  char reason[256];
  CHILD_CHECK(!halo_hal_cuda_probe(reason, sizeof(reason)), "probe passed");
  CHILD_CHECK(strstr(reason, "sees no device"), "reason: %s", reason);
  CHILD_CHECK(halo_hal_cuda_driver_version() == 12040, "driver version %d",
              halo_hal_cuda_driver_version());
  void *fake = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  requested_fn requested = (requested_fn)dlsym(fake, "fake_cuda_requested");
  const char *name;
  int version;
  int elapsed[2] = {0, 0};
  int elapsed_count = 0;
  for (int i = 0; requested(i, &name, &version); ++i) {
    CHILD_CHECK(version <= 12080, "%s at %d", name, version);
    if (strcmp(name, "cuEventElapsedTime") == 0 && elapsed_count < 2) {
      elapsed[elapsed_count++] = version;
    }
  }
  CHILD_CHECK(elapsed_count == 2 && elapsed[0] == 12080 && elapsed[1] == 12000,
              "cuEventElapsedTime asked %d times (%d, %d)", elapsed_count,
              elapsed[0], elapsed[1]);
}

static void test_cuda_12_4_driver(void **state) {
  (void)state;
  run_with_driver("12040", child_driver_12_4);
}

// A CUDA 12.3 driver lacks cuFuncGetParamInfo and the enumerations: refused
// before any lookup, naming its version and the one needed.
static void child_driver_12_3(void) {
  char reason[256];
  CHILD_CHECK(!halo_hal_cuda_probe(reason, sizeof(reason)), "probe passed");
  CHILD_CHECK(strstr(reason, "supports CUDA 12.3") &&
                  strstr(reason, "needs a driver for CUDA 12.4 or newer"),
              "reason: %s", reason);
}

static void test_cuda_12_3_driver_refused(void **state) {
  (void)state;
  run_with_driver("12030", child_driver_12_3);
}

static void test_nvrtc_soname_order(void **state) {
  (void)state;
  const char *names[4];
  assert_int_equal(halo_hal_cuda_nvrtc_sonames(13000, names, 4), 3);
  assert_string_equal(names[0], "libnvrtc.so.13");
  assert_string_equal(names[1], "libnvrtc.so.12");
  assert_string_equal(names[2], "libnvrtc.so");
  assert_int_equal(halo_hal_cuda_nvrtc_sonames(13020, names, 4), 3);
  assert_int_equal(halo_hal_cuda_nvrtc_sonames(12040, names, 4), 2);
  assert_string_equal(names[0], "libnvrtc.so.12");
  assert_string_equal(names[1], "libnvrtc.so");
  assert_int_equal(halo_hal_cuda_nvrtc_sonames(0, names, 4), 3);
  assert_string_equal(names[0], "libnvrtc.so.13");
  assert_int_equal(halo_hal_cuda_nvrtc_sonames(13000, names, 1), 1);
  assert_string_equal(names[0], "libnvrtc.so.13");
}

// A CUDA 12 driver loads NVRTC 12 (the fake beside the fake libcuda), even
// where a real libnvrtc.so.13 is installed.
static void child_nvrtc_for_12(void) {
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = NULL;
  halo_status_t status = halo_hal_cuda_nvrtc_load(&nvrtc);
  CHILD_CHECK(status == NULL, "nvrtc load: %s", halo_status_message(status));
  CHILD_CHECK(strcmp(nvrtc->soname, "libnvrtc.so.12") == 0 &&
                  nvrtc->major == 12 && nvrtc->minor == 4,
              "loaded %s, NVRTC %d.%d", nvrtc->soname, nvrtc->major,
              nvrtc->minor);
}

static void test_nvrtc_for_cuda_12_driver(void **state) {
  (void)state;
  run_with_driver("12040", child_nvrtc_for_12);
}

// A CUDA 13 driver takes libnvrtc.so.13 where it is installed, else falls
// back to libnvrtc.so.12 (the fake).
static void child_nvrtc_for_13(void) {
  void *real = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = NULL;
  halo_status_t status = halo_hal_cuda_nvrtc_load(&nvrtc);
  CHILD_CHECK(status == NULL, "nvrtc load: %s", halo_status_message(status));
  const char *expected = real ? "libnvrtc.so.13" : "libnvrtc.so.12";
  CHILD_CHECK(
      strcmp(nvrtc->soname, expected) == 0 && nvrtc->major == (real ? 13 : 12),
      "loaded %s (NVRTC %d.%d), expected %s", nvrtc->soname, nvrtc->major,
      nvrtc->minor, expected);
  fprintf(stderr, "CUDA 13 driver: %s, NVRTC %d.%d\n", nvrtc->soname,
          nvrtc->major, nvrtc->minor);
}

static void test_nvrtc_for_cuda_13_driver(void **state) {
  (void)state;
  run_with_driver("13000", child_nvrtc_for_13);
}

int main(void) {
  unsetenv("CUDA_MODULE_LOADING");
  // The children first: each loads the driver afresh only if this process
  // has not loaded it yet (the load runs once per process, and a child
  // inherits it).
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nvrtc_soname_order),
      cmocka_unit_test(test_cuda_12_4_driver),
      cmocka_unit_test(test_cuda_12_3_driver_refused),
      cmocka_unit_test(test_nvrtc_for_cuda_12_driver),
      cmocka_unit_test(test_nvrtc_for_cuda_13_driver),
      cmocka_unit_test(test_probe_without_devices),
      cmocka_unit_test(test_symbols_by_base_name_at_their_versions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
