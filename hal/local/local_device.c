// The local (CPU) device.
#include "hal/local/local_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/status.h"

typedef struct halo_hal_local_device_t {
  halo_hal_device_t base;
  halo_hal_allocator_t allocator;
} halo_hal_local_device_t;

static void halo_hal_local_device_destroy(halo_hal_device_t *device) {
  free(device);
}

static halo_status_t halo_hal_local_device_create_executable(
    halo_hal_device_t *device, const halo_hal_executable_params_t *params,
    halo_hal_executable_t **out_executable) {
  (void)device;
  (void)params;
  *out_executable = NULL;
  return halo_status_make(HALO_STATUS_UNIMPLEMENTED,
                          "local executables are not implemented yet");
}

static halo_status_t halo_hal_local_device_prepare_command_buffer(
    halo_hal_device_t *device, halo_hal_recording_t *recording,
    halo_hal_command_buffer_t **out_command_buffer) {
  (void)device;
  (void)recording;
  *out_command_buffer = NULL;
  return halo_status_make(HALO_STATUS_UNIMPLEMENTED,
                          "local command buffers are not implemented yet");
}

static halo_status_t halo_hal_local_device_create_queue(
    halo_hal_device_t *device, int32_t priority, halo_hal_queue_t **out_queue) {
  (void)device;
  (void)priority;
  *out_queue = NULL;
  return halo_status_make(HALO_STATUS_UNIMPLEMENTED,
                          "local queues are not implemented yet");
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
  snprintf(device->base.info.name, sizeof(device->base.info.name),
           "CPU (%ld threads)", cpus);
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  device->base.info.memory_bytes = (uint64_t)pages * (uint64_t)page_size;
  device->base.info.multiprocessor_count = (uint32_t)cpus;
  *out_device = &device->base;
  return NULL;
}
