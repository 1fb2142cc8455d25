// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The driver registry: probes the drivers and creates the devices the
// daemon serves.
#include "hal/registry.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#ifdef HALO_HAVE_CUDA
#include "hal/cuda/cuda_device.h"
#endif

// Probes CUDA; |out_count| receives the number of GPUs.
static bool halo_hal_cuda_probe_devices(const char *cache_directory,
                                        char *out_reason, size_t reason_size,
                                        uint32_t *out_count) {
  *out_count = 0;
#ifdef HALO_HAVE_CUDA
  return halo_hal_cuda_driver_probe(cache_directory, out_reason, reason_size,
                                    out_count);
#else
  (void)cache_directory;
  snprintf(out_reason, reason_size,
           "halod was built without cuda.h (the CUDA driver is not part of "
           "this build)");
  return false;
#endif
}

bool halo_hal_cuda_probe(char *out_reason, size_t reason_size) {
  uint32_t count = 0;
  return halo_hal_cuda_probe_devices(NULL, out_reason, reason_size, &count);
}

bool halo_hal_cuda_probe_count(char *out_reason, size_t reason_size,
                               uint32_t *out_count) {
  return halo_hal_cuda_probe_devices(NULL, out_reason, reason_size, out_count);
}

#ifdef HALO_HAVE_CUDA
// One device per GPU, or GPU |options|->device_filter's alone; on failure
// the devices created so far are destroyed.
static halo_status_t halo_hal_registry_create_cuda_devices(
    const halo_hal_registry_options_t *options, uint32_t count,
    halo_hal_registry_t *registry) {
  halo_hal_cuda_device_options_t cuda_options;
  memset(&cuda_options, 0, sizeof(cuda_options));
  const char *completion = options->cuda_completion;
  if (!completion || !*completion || strcmp(completion, "thread") == 0) {
    cuda_options.completion = HALO_HAL_CUDA_COMPLETION_THREAD;
  } else if (strcmp(completion, "host_func") == 0) {
    cuda_options.completion = HALO_HAL_CUDA_COMPLETION_HOST_FUNC;
  } else {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "cuda completion mode '%s' (expected thread or "
                            "host_func)",
                            completion);
  }
  cuda_options.stream_count = options->cuda_streams;
  cuda_options.graph_bytes = options->cuda_graph_bytes;
  cuda_options.compile_timeout_ms = options->cuda_compile_deadline_ms;
  if (options->cache_directory) {
    snprintf(cuda_options.cache_directory, sizeof(cuda_options.cache_directory),
             "%s", options->cache_directory);
  }
  uint32_t first = 0;
  if (options->has_device_filter) {
    if (options->device_filter >= count) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "device %u out of range: driver cuda has %u "
                              "GPU(s)",
                              options->device_filter, count);
    }
    first = options->device_filter;
    count = first + 1;
  } else if (count > HALO_HAL_MAX_DEVICES) {
    HALO_LOG_WARN("cuda: %u GPUs, serving the first %d", count,
                  HALO_HAL_MAX_DEVICES);
    count = HALO_HAL_MAX_DEVICES;
  }
  for (uint32_t i = first; i < count; ++i) {
    halo_hal_device_t *device = NULL;
    halo_status_t status =
        halo_hal_cuda_device_create(i, &cuda_options, &device);
    if (status) {
      halo_hal_registry_deinitialize(registry);
      return status;
    }
    registry->devices[registry->device_count++] = device;
  }
  return NULL;
}
#endif

halo_status_t halo_hal_registry_initialize_with_options(
    const halo_hal_registry_options_t *options, halo_hal_registry_t *registry) {
  memset(registry, 0, sizeof(*registry));
  const char *driver_name = options->driver ? options->driver : "auto";
  bool want_cuda = strcmp(driver_name, "cuda") == 0;
  bool want_local = strcmp(driver_name, "local") == 0;
  if (!want_cuda && !want_local && strcmp(driver_name, "auto") != 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "unknown driver '%s' (expected auto, local or "
                            "cuda)",
                            driver_name);
  }
  halo_hal_driver_info_t *cuda = &registry->drivers[0];
  halo_hal_driver_info_t *local = &registry->drivers[1];
  cuda->name = "cuda";
  local->name = "local";
  local->available = true;
  // --driver local never touches the GPU driver.
  uint32_t gpu_count = 0;
  if (want_local) {
    snprintf(cuda->reason, sizeof(cuda->reason), "not probed (driver local)");
  } else {
    cuda->available =
        halo_hal_cuda_probe_devices(options->cache_directory, cuda->reason,
                                    sizeof(cuda->reason), &gpu_count);
  }
  if (want_cuda && !cuda->available) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE,
                            "driver cuda unavailable: %s", cuda->reason);
  }
#ifdef HALO_HAVE_CUDA
  if (cuda->available && !want_local) {
    halo_status_t status =
        halo_hal_registry_create_cuda_devices(options, gpu_count, registry);
    if (!status) return NULL;
    // auto: a GPU that cannot be served leaves the local driver, unless the
    // filter asks for a device the local driver does not have.
    if (want_cuda || halo_status_code(status) == HALO_STATUS_INVALID_ARGUMENT ||
        (options->has_device_filter && options->device_filter != 0)) {
      return status;
    }
    snprintf(cuda->reason, sizeof(cuda->reason), "%s",
             halo_status_message(status));
    cuda->available = false;
    HALO_LOG_WARN("driver cuda: %s; serving the local driver", cuda->reason);
    halo_status_free(status);
  }
#endif
  // The local driver has one device, 0.
  if (options->has_device_filter && options->device_filter != 0) {
    if (want_local) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "device %u out of range: driver local has 1 "
                              "device",
                              options->device_filter);
    }
    // auto with CUDA unavailable: no GPU.
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "device %u out of range: 0 GPUs (driver cuda "
                            "unavailable: %s) and driver local has 1 device",
                            options->device_filter, cuda->reason);
  }
  halo_hal_device_t *device = NULL;
  HALO_RETURN_IF_ERROR(halo_hal_local_device_create(&device));
  registry->devices[registry->device_count++] = device;
  return NULL;
}

halo_status_t halo_hal_registry_initialize(const char *driver_name,
                                           halo_hal_registry_t *registry) {
  halo_hal_registry_options_t options = {.driver = driver_name};
  return halo_hal_registry_initialize_with_options(&options, registry);
}

void halo_hal_registry_deinitialize(halo_hal_registry_t *registry) {
  for (uint32_t i = 0; i < registry->device_count; ++i) {
    registry->devices[i]->vtable->destroy(registry->devices[i]);
  }
  registry->device_count = 0;
}
