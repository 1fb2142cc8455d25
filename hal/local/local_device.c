// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The local (CPU) device: an allocator over the daemon's heap, executables
// from ELF shared objects, and one worker pool shared by its queues.
#include "hal/local/local_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/status.h"
#include "hal/registry.h"

typedef struct halo_hal_local_device_t {
  halo_hal_device_t base;
  halo_hal_allocator_t allocator;
  halo_hal_local_worker_pool_t *pool;
} halo_hal_local_device_t;

// Every queue of the device must have been destroyed (their executions have
// then completed); the pool's threads are joined here.
static void halo_hal_local_device_destroy(halo_hal_device_t *base_device) {
  halo_hal_local_device_t *device = (halo_hal_local_device_t *)base_device;
  halo_hal_local_worker_pool_destroy(device->pool);
  free(device);
}

static halo_status_t halo_hal_local_device_create_executable(
    halo_hal_device_t *device, const halo_hal_executable_params_t *params,
    halo_hal_executable_t **out_executable) {
  (void)device;
  return halo_hal_local_executable_create(params, out_executable);
}

static halo_status_t halo_hal_local_device_prepare_command_buffer(
    halo_hal_device_t *device, halo_hal_recording_t *recording,
    halo_hal_command_buffer_t **out_command_buffer) {
  (void)device;
  return halo_hal_local_command_buffer_prepare(recording, out_command_buffer);
}

static halo_status_t halo_hal_local_device_create_queue(
    halo_hal_device_t *base_device, int32_t priority,
    halo_hal_queue_t **out_queue) {
  halo_hal_local_device_t *device = (halo_hal_local_device_t *)base_device;
  return halo_hal_local_queue_create(device->pool, priority, out_queue);
}

static const halo_hal_device_vtable_t halo_hal_local_device_vtable = {
    .destroy = halo_hal_local_device_destroy,
    .create_executable = halo_hal_local_device_create_executable,
    .prepare_command_buffer = halo_hal_local_device_prepare_command_buffer,
    .create_queue = halo_hal_local_device_create_queue,
};

halo_status_t halo_hal_local_device_create(halo_hal_device_t **out_device) {
  *out_device = NULL;
  halo_hal_local_device_t *device = calloc(1, sizeof(*device));
  if (!device) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  device->base.vtable = &halo_hal_local_device_vtable;
  halo_hal_local_allocator_initialize(&device->allocator);
  device->base.allocator = &device->allocator;
  snprintf(device->base.info.driver, sizeof(device->base.info.driver), "local");
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) cpus = 1;
  // At least two workers, so that one long kernel never holds up every
  // other execution of the device.
  uint32_t threads = cpus < 2 ? 2 : (uint32_t)cpus;
  halo_status_t status = halo_hal_local_worker_pool_create(
      threads, HALO_HAL_LOCAL_WORKER_SPIN_NS, &device->pool);
  if (status) {
    free(device);
    return halo_status_annotate(status, "local device");
  }
  snprintf(device->base.info.name, sizeof(device->base.info.name),
           "CPU (%ld threads)", cpus);
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  device->base.info.memory_bytes = (uint64_t)pages * (uint64_t)page_size;
  device->base.info.multiprocessor_count = (uint32_t)cpus;
  *out_device = &device->base;
  return NULL;
}
