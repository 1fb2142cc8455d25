// The CPU ("local") driver: device memory is the daemon's own heap; host
// memory needs no registration. The embedded default without a GPU, and
// what CI exercises.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"
#include "hal/device.h"

typedef struct halo_hal_local_device_t {
  halo_hal_device_t base;
} halo_hal_local_device_t;

static void halo_hal_local_device_destroy(halo_hal_device_t *device) {
  free(device);
}

static halo_status_t halo_hal_local_device_allocate(halo_hal_device_t *device,
                                                    uint64_t size,
                                                    uint64_t *out_address) {
  (void)device;
  *out_address = 0;
  // Zeroed like fresh device memory from a pool would not be: clients must
  // not rely on it, but it keeps one session from reading another's bytes.
  void *memory = calloc(1, (size_t)size);
  if (!memory) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "local device: cannot allocate %llu bytes",
                            (unsigned long long)size);
  }
  *out_address = (uint64_t)(uintptr_t)memory;
  return NULL;
}

static void halo_hal_local_device_deallocate(halo_hal_device_t *device,
                                             uint64_t address, uint64_t size) {
  (void)device;
  (void)size;
  free((void *)(uintptr_t)address);
}

static halo_status_t halo_hal_local_device_write(halo_hal_device_t *device,
                                                 uint64_t address,
                                                 const void *data,
                                                 uint64_t length) {
  (void)device;
  memcpy((void *)(uintptr_t)address, data, (size_t)length);
  return NULL;
}

static halo_status_t halo_hal_local_device_read(halo_hal_device_t *device,
                                                uint64_t address,
                                                void *out_data,
                                                uint64_t length) {
  (void)device;
  memcpy(out_data, (const void *)(uintptr_t)address, (size_t)length);
  return NULL;
}

static halo_status_t halo_hal_local_device_register_host(
    halo_hal_device_t *device, void *pointer, uint64_t size) {
  (void)device;
  (void)pointer;
  (void)size;
  return NULL;
}

static void halo_hal_local_device_unregister_host(halo_hal_device_t *device,
                                                  void *pointer) {
  (void)device;
  (void)pointer;
}

static const halo_hal_device_vtable_t halo_hal_local_device_vtable = {
    .destroy = halo_hal_local_device_destroy,
    .allocate = halo_hal_local_device_allocate,
    .deallocate = halo_hal_local_device_deallocate,
    .write = halo_hal_local_device_write,
    .read = halo_hal_local_device_read,
    .register_host = halo_hal_local_device_register_host,
    .unregister_host = halo_hal_local_device_unregister_host,
};

halo_status_t halo_hal_local_device_create(halo_hal_device_t **out_device) {
  *out_device = NULL;
  halo_hal_local_device_t *device = calloc(1, sizeof(*device));
  if (!device) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  device->base.vtable = &halo_hal_local_device_vtable;
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
