// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The device abstraction (HAL): a device creates executables, prepares
// command buffers and creates queues; its allocator owns device memory and
// host registrations. One folder per driver: hal/local/ (CPU) and hal/cuda/.
//
// Thread-safety: devices are thread-safe (the CUDA driver will call them from
// its submission thread). The registry that probes the drivers and creates
// the devices is hal/registry.h.
#ifndef HALO_HAL_DEVICE_H_
#define HALO_HAL_DEVICE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hal/allocator.h"
#include "hal/command_buffer.h"
#include "hal/executable.h"
#include "hal/queue.h"
#include "halo/status.h"

typedef struct halo_hal_device_t halo_hal_device_t;

typedef struct halo_hal_device_info_t {
  char driver[16];
  char name[128];
  uint64_t memory_bytes;
  uint32_t compute_major;
  uint32_t compute_minor;
  uint32_t multiprocessor_count;
  // Whether contexts on it are clients of an MPS server (CUDA; mps_known
  // false where the driver cannot say).
  bool mps_known;
  bool mps;
} halo_hal_device_info_t;

typedef enum halo_hal_executable_format_e {
  HALO_HAL_EXECUTABLE_FORMAT_ELF = 1,
  HALO_HAL_EXECUTABLE_FORMAT_PTX = 2,
  HALO_HAL_EXECUTABLE_FORMAT_CUBIN = 3,
  HALO_HAL_EXECUTABLE_FORMAT_FATBIN = 4,
  HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE = 5,
} halo_hal_executable_format_t;

typedef struct halo_hal_executable_params_t {
  uint32_t format;  // halo_hal_executable_format_t
  const void *data;
  uint64_t size;
  const char *const *options;
  uint32_t option_count;
} halo_hal_executable_params_t;

// What a device's driver holds of its bounded resources, for operators
// (halo_hal_device_query_usage). Graphs: the device memory that the
// instantiated forms of prepared command buffers take (CUDA graph
// instances), by the driver's estimate, how many there are, and the bound
// the driver keeps them under (0: none).
typedef struct halo_hal_device_usage_t {
  uint64_t graph_bytes;
  uint64_t graph_bytes_limit;
  uint32_t graph_instances;
  uint32_t reserved;  // 0
} halo_hal_device_usage_t;

typedef struct halo_hal_device_vtable_t {
  void (*destroy)(halo_hal_device_t *device);
  // UNIMPLEMENTED for formats the driver does not take; INVALID_ARGUMENT
  // with the loader's or compiler's log when the code does not load.
  halo_status_t (*create_executable)(halo_hal_device_t *device,
                                     const halo_hal_executable_params_t *params,
                                     halo_hal_executable_t **out_executable);
  // Prepares |recording| (moved into the command buffer on success; left to
  // the caller on failure).
  halo_status_t (*prepare_command_buffer)(
      halo_hal_device_t *device, halo_hal_recording_t *recording,
      halo_hal_command_buffer_t **out_command_buffer);
  halo_status_t (*create_queue)(halo_hal_device_t *device, int32_t priority,
                                halo_hal_queue_t **out_queue);
  // Optional (NULL: the driver has nothing to report). Fills |out_usage|
  // and returns true, or returns false where there is nothing to report
  // yet. Any thread; never waits for the device (a short lock at most).
  bool (*query_usage)(halo_hal_device_t *device,
                      halo_hal_device_usage_t *out_usage);
} halo_hal_device_vtable_t;

struct halo_hal_device_t {
  const halo_hal_device_vtable_t *vtable;
  halo_hal_allocator_t *allocator;
  halo_hal_device_info_t info;
};

// |device|'s usage (halo_hal_device_vtable_t.query_usage): false, with
// |out_usage| zeroed, where its driver reports none.
static inline bool halo_hal_device_query_usage(
    halo_hal_device_t *device, halo_hal_device_usage_t *out_usage) {
  *out_usage = (halo_hal_device_usage_t){0};
  return device->vtable->query_usage &&
         device->vtable->query_usage(device, out_usage);
}

// The most devices one registry (hal/registry.h) serves: the daemon sizes
// its per-device tables with it.
#define HALO_HAL_MAX_DEVICES 16

#endif  // HALO_HAL_DEVICE_H_
