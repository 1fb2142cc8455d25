// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The local driver's allocator: device memory is the daemon's own heap and
// host memory needs no registration (its device address is its pointer).
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/status.h"
#include "hal/local/local_device.h"

// From this size on, allocations are fresh anonymous mappings: zero pages
// the kernel supplies as they are touched, where a memset would touch (and
// commit) all of them at once, on the caller's thread.
#define HALO_HAL_LOCAL_MAPPED_BYTES (1u << 20)

static halo_status_t halo_hal_local_allocator_allocate(
    halo_hal_allocator_t *allocator, uint64_t size, uint64_t *out_address) {
  (void)allocator;
  *out_address = 0;
  // HALO_HAL_ALLOCATION_ALIGNMENT, as cuMemAlloc gives: malloc's own
  // alignment is 16 bytes at best (jemalloc, halod's, gives 8 for the
  // smallest sizes), and a kernel's vectorized load may need more. Zeroed
  // either way: one session never sees another's old bytes.
  void *memory = NULL;
  if (size >= HALO_HAL_LOCAL_MAPPED_BYTES) {
    memory = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) memory = NULL;
  } else if (posix_memalign(&memory, HALO_HAL_ALLOCATION_ALIGNMENT,
                            size ? (size_t)size : 1) == 0) {
    memset(memory, 0, (size_t)size);
  } else {
    memory = NULL;
  }
  if (!memory) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "local device: cannot allocate %llu bytes",
                            (unsigned long long)size);
  }
  *out_address = (uint64_t)(uintptr_t)memory;
  return NULL;
}

static void halo_hal_local_allocator_deallocate(halo_hal_allocator_t *allocator,
                                                uint64_t address,
                                                uint64_t size) {
  (void)allocator;
  if (size >= HALO_HAL_LOCAL_MAPPED_BYTES) {
    munmap((void *)(uintptr_t)address, (size_t)size);
  } else {
    free((void *)(uintptr_t)address);
  }
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
