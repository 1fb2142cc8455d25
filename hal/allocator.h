// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Device memory and host memory registration. Device addresses are opaque
// 64-bit values (a CUdeviceptr on CUDA, a pointer on the local driver).
//
// Thread-safety: thread-safe.
#ifndef HALO_HAL_ALLOCATOR_H_
#define HALO_HAL_ALLOCATOR_H_

#include <stdint.h>

#include "halo/status.h"

typedef struct halo_hal_allocator_t halo_hal_allocator_t;

// Every device allocation starts at a multiple of this (cuMemAlloc's
// alignment), so offset 0 meets any kernel argument's alignment
// (HALO_DISPATCH_ALIGNMENT).
#define HALO_HAL_ALLOCATION_ALIGNMENT 256u

typedef struct halo_hal_allocator_vtable_t {
  halo_status_t (*allocate)(halo_hal_allocator_t *allocator, uint64_t size,
                            uint64_t *out_address);
  void (*deallocate)(halo_hal_allocator_t *allocator, uint64_t address,
                     uint64_t size);
  halo_status_t (*write)(halo_hal_allocator_t *allocator, uint64_t address,
                         const void *data, uint64_t length);
  halo_status_t (*read)(halo_hal_allocator_t *allocator, uint64_t address,
                        void *out_data, uint64_t length);
  // Makes host memory (an arena or semaphore page mapping) reachable by the
  // device and returns the device address of |pointer|. |fd| is the memfd
  // mapped at |pointer| from offset 0 (-1: none): a driver in another
  // process (hal/remote/) maps the same memory through it.
  halo_status_t (*register_host)(halo_hal_allocator_t *allocator, void *pointer,
                                 uint64_t size, int fd, uint64_t *out_address);
  void (*unregister_host)(halo_hal_allocator_t *allocator, void *pointer);
} halo_hal_allocator_vtable_t;

struct halo_hal_allocator_t {
  const halo_hal_allocator_vtable_t *vtable;
};

#endif  // HALO_HAL_ALLOCATOR_H_
