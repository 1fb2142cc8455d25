// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libcuda.so.1 with two devices: the fake CUDA driver of
// tests/unit/hal_cuda_fake_driver.c (its library, HALO_FAKE_CUDA_LIBRARY,
// loaded from HALO_FAKE_CUDA_PATH), but cuDeviceGetCount says 2 and
// cuDeviceGet takes ordinals 0 and 1. The fake's other calls ignore the
// device, and halod gives each device a worker process of its own, so each
// worker has one fake device. A halod on it serves two devices without a
// GPU (ring_devices_test: sessions of several devices).
// clang-format off
#include <cuda.h>
// clang-format on

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define FAKE_DEVICE_COUNT 2

static void *fake_library;
static __typeof__(cuGetProcAddress) *fake_get_proc_address;
static __typeof__(cuDriverGetVersion) *fake_driver_get_version;
static pthread_once_t fake_once = PTHREAD_ONCE_INIT;

static void fake_load(void) {
  fake_library = dlopen(HALO_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!fake_library) {
    fprintf(stderr, "fake_cuda_devices: dlopen %s: %s\n", HALO_FAKE_CUDA_PATH,
            dlerror());
    return;
  }
  *(void **)&fake_get_proc_address = dlsym(fake_library, "cuGetProcAddress_v2");
  *(void **)&fake_driver_get_version =
      dlsym(fake_library, "cuDriverGetVersion");
}

static CUresult fake_devices_count(int *count) {
  *count = FAKE_DEVICE_COUNT;
  return CUDA_SUCCESS;
}

static CUresult fake_devices_get(CUdevice *device, int ordinal) {
  if (ordinal < 0 || ordinal >= FAKE_DEVICE_COUNT) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *device = ordinal;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuDriverGetVersion(
    int *version) {
  pthread_once(&fake_once, fake_load);
  if (!fake_driver_get_version) return CUDA_ERROR_NOT_INITIALIZED;
  return fake_driver_get_version(version);
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char *symbol, void **function, int version, cuuint64_t flags,
    CUdriverProcAddressQueryResult *status) {
  pthread_once(&fake_once, fake_load);
  if (!fake_get_proc_address) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result =
      fake_get_proc_address(symbol, function, version, flags, status);
  if (result != CUDA_SUCCESS) return result;
  if (strcmp(symbol, "cuDeviceGetCount") == 0) {
    *function = (void *)fake_devices_count;
  } else if (strcmp(symbol, "cuDeviceGet") == 0) {
    *function = (void *)fake_devices_get;
  }
  return result;
}
