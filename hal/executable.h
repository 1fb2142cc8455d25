// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Executables: code loaded on one device (a shared object on the local
// driver; a CUmodule on CUDA), entry points looked up by name.
//
// Thread-safety: immutable after creation; lookups are thread-safe.
#ifndef HALO_HAL_EXECUTABLE_H_
#define HALO_HAL_EXECUTABLE_H_

#include <stdint.h>

#include "halo/status.h"

typedef struct halo_hal_executable_t halo_hal_executable_t;

// What the driver knows of an entry's parameters (CUDA: cuFuncGetParamInfo;
// local: the kernel's HALO_LOCAL_KERNEL_PARAMS declaration).
// |param_count| HALO_HAL_PARAMS_UNKNOWN: the driver cannot tell (a local
// kernel without a declaration, a CUBIN without parameter information).
// Sizes and offsets are known for the first HALO_HAL_MAX_PARAMS parameters.
#define HALO_HAL_PARAMS_UNKNOWN UINT32_MAX
#define HALO_HAL_MAX_PARAMS 64
typedef struct halo_hal_entry_info_t {
  uint32_t ordinal;  // driver-specific index, stored in recorded commands
  uint32_t param_count;
  uint32_t param_sizes[HALO_HAL_MAX_PARAMS];
  // Byte offset of each parameter in the kernel's parameter block.
  uint32_t param_offsets[HALO_HAL_MAX_PARAMS];
} halo_hal_entry_info_t;

typedef struct halo_hal_executable_vtable_t {
  void (*destroy)(halo_hal_executable_t *executable);
  // NOT_FOUND naming |name| if the executable has no such entry.
  halo_status_t (*lookup_entry)(halo_hal_executable_t *executable,
                                const char *name,
                                halo_hal_entry_info_t *out_info);
} halo_hal_executable_vtable_t;

// How the driver came by an executable's code (haloctl executables).
typedef enum halo_hal_executable_origin_e {
  HALO_HAL_EXECUTABLE_ORIGIN_AS_GIVEN = 0,    // loaded as the client sent it
  HALO_HAL_EXECUTABLE_ORIGIN_COMPILED = 1,    // compiled or JIT-linked now
  HALO_HAL_EXECUTABLE_ORIGIN_DISK_CACHE = 2,  // compiled code from the cache
} halo_hal_executable_origin_t;

struct halo_hal_executable_t {
  const halo_hal_executable_vtable_t *vtable;
  uint32_t origin;  // halo_hal_executable_origin_t, set by the driver
};

static inline void halo_hal_executable_destroy(
    halo_hal_executable_t *executable) {
  executable->vtable->destroy(executable);
}

static inline halo_status_t halo_hal_executable_lookup_entry(
    halo_hal_executable_t *executable, const char *name,
    halo_hal_entry_info_t *out_info) {
  return executable->vtable->lookup_entry(executable, name, out_info);
}

#endif  // HALO_HAL_EXECUTABLE_H_
