// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The local driver's allocator: device memory is the daemon's own heap and
// host memory needs no registration (its device address is its pointer).
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "hal/local/local_device.h"

static halo_status_t halo_hal_local_allocator_allocate(
    halo_hal_allocator_t *allocator, uint64_t size, uint64_t *out_address) {
  (void)allocator;
  *out_address = 0;
  // HALO_HAL_ALLOCATION_ALIGNMENT, as cuMemAlloc gives: malloc's own
  // alignment is 16 bytes at best (jemalloc, halod's, gives 8 for the
  // smallest sizes), and a kernel's vectorized load may need more. (Not a
  // mapping of its own for large ones: a session's thousands of buffers
  // would then take as many of the process's vm.max_map_count mappings.)
  void *memory = NULL;
  if (posix_memalign(&memory, HALO_HAL_ALLOCATION_ALIGNMENT,
                     size ? (size_t)size : 1) != 0) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "local device: cannot allocate %llu bytes",
                            (unsigned long long)size);
  }
  // Zeroed: one session never sees another's old bytes.
  memset(memory, 0, (size_t)size);
  *out_address = (uint64_t)(uintptr_t)memory;
  return NULL;
}

static void halo_hal_local_allocator_deallocate(halo_hal_allocator_t *allocator,
                                                uint64_t address,
                                                uint64_t size) {
  (void)allocator;
  (void)size;
  free((void *)(uintptr_t)address);
}

static halo_status_t halo_hal_local_allocator_write(
    halo_hal_allocator_t *allocator, uint64_t address, const void *data,
    uint64_t length) {
  (void)allocator;
  memcpy((void *)(uintptr_t)address, data, (size_t)length);
  return NULL;
}

static halo_status_t halo_hal_local_allocator_read(
    halo_hal_allocator_t *allocator, uint64_t address, void *out_data,
    uint64_t length) {
  (void)allocator;
  memcpy(out_data, (const void *)(uintptr_t)address, (size_t)length);
  return NULL;
}

static halo_status_t halo_hal_local_allocator_register_host(
    halo_hal_allocator_t *allocator, void *pointer, uint64_t size, int fd,
    uint64_t *out_address) {
  (void)allocator;
  (void)fd;
  (void)size;
  *out_address = (uint64_t)(uintptr_t)pointer;
  return NULL;
}

static void halo_hal_local_allocator_unregister_host(
    halo_hal_allocator_t *allocator, void *pointer) {
  (void)allocator;
  (void)pointer;
}

static const halo_hal_allocator_vtable_t halo_hal_local_allocator_vtable = {
    .allocate = halo_hal_local_allocator_allocate,
    .deallocate = halo_hal_local_allocator_deallocate,
    .write = halo_hal_local_allocator_write,
    .read = halo_hal_local_allocator_read,
    .register_host = halo_hal_local_allocator_register_host,
    .unregister_host = halo_hal_local_allocator_unregister_host,
};

void halo_hal_local_allocator_initialize(halo_hal_allocator_t *allocator) {
  allocator->vtable = &halo_hal_local_allocator_vtable;
}
