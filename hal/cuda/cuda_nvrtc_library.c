// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// One NVRTC library opened by its name (halo_hal_cuda_nvrtc_open): what
// the CUDA driver's choice of NVRTC (cuda_symbols.c) and the compiler
// process halo-nvrtc, which opens the library the driver chose, share.
#include <dlfcn.h>
#include <string.h>

#include "common/status.h"
#include "hal/cuda/cuda_symbols.h"

halo_status_t halo_hal_cuda_nvrtc_open(
    const char *soname, halo_hal_cuda_nvrtc_symbols_t *out_symbols) {
  memset(out_symbols, 0, sizeof(*out_symbols));
  if (strlen(soname) >= sizeof(out_symbols->soname)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "NVRTC's library name '%.64s' is too long", soname);
  }
  dlerror();
  void *library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *error = dlerror();
    return halo_status_make(HALO_STATUS_NOT_FOUND, "%s",
                            error ? error : soname);
  }
  memcpy(out_symbols->soname, soname, strlen(soname) + 1);
#define HALO_HAL_CUDA_NVRTC_RESOLVE(name)                                  \
  {                                                                        \
    void *pointer = dlsym(library, #name);                                 \
    if (!pointer) {                                                        \
      return halo_status_make(HALO_STATUS_UNAVAILABLE, "%s has no " #name, \
                              soname);                                     \
    }                                                                      \
    *(void **)&out_symbols->name = pointer;                                \
  }
  HALO_HAL_CUDA_NVRTC_SYMBOLS(HALO_HAL_CUDA_NVRTC_RESOLVE)
#undef HALO_HAL_CUDA_NVRTC_RESOLVE
  if (out_symbols->nvrtcVersion(&out_symbols->major, &out_symbols->minor) !=
      NVRTC_SUCCESS) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE, "%s: nvrtcVersion failed",
                            soname);
  }
  return NULL;
}
