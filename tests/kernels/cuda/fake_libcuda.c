// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A stand-in libcuda.so.1 for hal_cuda_loader_test (no GPU needed): it
// answers cuGetProcAddress_v2 for every name, records what was asked for
// (names and API versions) and what the environment said at cuInit, and
// reports FAKE_CUDA_DEVICES devices (default 0). Every other entry point
// returns CUDA_SUCCESS and does nothing.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
#define FAKE_MAX_NAMES 512

static char fake_names[FAKE_MAX_NAMES][64];
static int fake_versions[FAKE_MAX_NAMES];
static int fake_name_count;
static char fake_module_loading_at_init[32] = "(cuInit not called)";

__attribute__((visibility("default"))) int fake_cuda_requested(
    int index, const char **out_name, int *out_version) {
  if (index < 0 || index >= fake_name_count) return 0;
  *out_name = fake_names[index];
  *out_version = fake_versions[index];
  return 1;
}

__attribute__((visibility("default"))) const char *
fake_cuda_module_loading_at_init(void) {
  return fake_module_loading_at_init;
}

static CUresult fake_success(void) {
  return 0;
}

static CUresult fake_cu_init(unsigned flags) {
  (void)flags;
  const char *mode = getenv("CUDA_MODULE_LOADING");
  snprintf(fake_module_loading_at_init, sizeof(fake_module_loading_at_init),
           "%s", mode ? mode : "(unset)");
  return 0;
}

static CUresult fake_device_get_count(int *count) {
  const char *devices = getenv("FAKE_CUDA_DEVICES");
  *count = devices ? atoi(devices) : 0;
  return 0;
}

static CUresult fake_get_error_name(CUresult error, const char **name) {
  *name = error == 0 ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return 0;
}

static CUresult fake_get_error_string(CUresult error, const char **text) {
  *text = error == 0 ? "no error" : "fake error";
  return 0;
}

// FAKE_CUDA_DRIVER_VERSION (default 13000): what cuDriverGetVersion says;
// cuGetProcAddress_v2 answers VERSION_NOT_SUFFICIENT for an API version
// above it, as a driver asked for a variant newer than itself.
static int fake_driver_version(void) {
  const char *version = getenv("FAKE_CUDA_DRIVER_VERSION");
  return version ? atoi(version) : 13000;
}

__attribute__((visibility("default"))) CUresult cuDriverGetVersion(
    int *version) {
  *version = fake_driver_version();
  return 0;
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char *symbol, void **pfn, int version, unsigned long long flags,
    int *status) {
  (void)flags;
  if (fake_name_count < FAKE_MAX_NAMES) {
    snprintf(fake_names[fake_name_count], sizeof(fake_names[0]), "%s", symbol);
    fake_versions[fake_name_count] = version;
    ++fake_name_count;
  }
  if (version > fake_driver_version()) {
    *pfn = NULL;
    if (status) *status = 2;  // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
    return 500;               // CUDA_ERROR_NOT_FOUND
  }
  if (strcmp(symbol, "cuInit") == 0) {
    *pfn = (void *)fake_cu_init;
  } else if (strcmp(symbol, "cuDeviceGetCount") == 0) {
    *pfn = (void *)fake_device_get_count;
  } else if (strcmp(symbol, "cuGetErrorName") == 0) {
    *pfn = (void *)fake_get_error_name;
  } else if (strcmp(symbol, "cuGetErrorString") == 0) {
    *pfn = (void *)fake_get_error_string;
  } else if (strcmp(symbol, "cuDriverGetVersion") == 0) {
    *pfn = (void *)cuDriverGetVersion;
  } else {
    *pfn = (void *)fake_success;
  }
  if (status) *status = 0;  // CU_GET_PROC_ADDRESS_SUCCESS
  return 0;
}
