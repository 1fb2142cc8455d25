// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The driver registry: probes the drivers and creates the devices the
// daemon serves (hal/device.h is the device interface they implement).
//
// Thread-safety: the registry functions run on the loop thread.
#ifndef HALO_HAL_REGISTRY_H_
#define HALO_HAL_REGISTRY_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hal/device.h"
#include "halo/status.h"

// A driver as the daemon sees it: available or not, and why.
typedef struct halo_hal_driver_info_t {
  const char *name;
  bool available;
  char reason[256];
} halo_hal_driver_info_t;

#define HALO_HAL_DRIVER_COUNT 2

typedef struct halo_hal_registry_t {
  halo_hal_driver_info_t drivers[HALO_HAL_DRIVER_COUNT];
  halo_hal_device_t *devices[HALO_HAL_MAX_DEVICES];
  uint32_t device_count;
} halo_hal_registry_t;

// What the daemon's configuration says about the drivers. All zeros (with
// |driver| NULL: auto) is the default.
typedef struct halo_hal_registry_options_t {
  const char *driver;  // auto | local | cuda
  // CUDA: how finished GPU work reaches the host: "thread" (a completion
  // thread waits on events) or "host_func" (cuLaunchHostFunc callbacks).
  // NULL or "" for the default (thread).
  const char *cuda_completion;
  // CUDA: streams per priority level that a device's queues share; 0 for
  // the default (16).
  uint32_t cuda_streams;
  // CUDA: device memory a device's graph instances may take (halo's
  // estimate); 0 for the default (4 GiB).
  uint64_t cuda_graph_bytes;
  // How long one CUDA C compile may run (0: the driver's default).
  uint32_t cuda_compile_deadline_ms;
  // Compiled code on disk (CUDA: NVRTC and PTX JIT results; the driver's
  // CUDA_CACHE_PATH below it). NULL or "" for none.
  const char *cache_directory;
  // false: every device of the driver (one per GPU for cuda). true: only
  // device |device_filter| (GPU |device_filter| for cuda; the local driver
  // has device 0 only), created as the registry's device 0, for a process
  // that serves one device. A filter past the driver's devices is
  // INVALID_ARGUMENT.
  bool has_device_filter;
  uint32_t device_filter;
} halo_hal_registry_options_t;

// Probes the drivers and creates the devices of |options|->driver: "auto"
// picks the best available (cuda with one device per GPU, else local),
// "local" or "cuda" insist on one and fail with the driver's reason if it
// is unavailable.
halo_status_t halo_hal_registry_initialize_with_options(
    const halo_hal_registry_options_t *options, halo_hal_registry_t *registry);
// The same with default options.
halo_status_t halo_hal_registry_initialize(const char *driver_name,
                                           halo_hal_registry_t *registry);
void halo_hal_registry_deinitialize(halo_hal_registry_t *registry);

// Drivers.
halo_status_t halo_hal_local_device_create(halo_hal_device_t **out_device);
// Fills |out_reason| and returns false when CUDA is unavailable (no
// driver, no GPU, or a build without cuda.h).
bool halo_hal_cuda_probe(char *out_reason, size_t reason_size);
// The same, and |out_count| receives the number of GPUs (no context is
// created: a supervisor probes what its workers will serve).
bool halo_hal_cuda_probe_count(char *out_reason, size_t reason_size,
                               uint32_t *out_count);

#endif  // HALO_HAL_REGISTRY_H_
