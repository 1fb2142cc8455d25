// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Kernels for halo's local (CPU) driver.
//
// A local executable is an ELF shared object whose entry points have the
// signature `void entry(const halo_dispatch_state_t *state)`; compile it
// with `cc -shared -fPIC -O2` and load it with halo_executable_create
// (HALO_EXECUTABLE_FORMAT_ELF). The daemon calls the entry once per
// workgroup (possibly on several threads at once); |args| holds pointers to
// the argument values exactly like CUDA's kernelParams: for a BUFFER
// argument, args[i] points at a void* (the buffer's address); for a
// CONSTANT, at its bytes; for BINDING_TABLE, at a uint64_t* table.
//
// Example:
//   HALO_LOCAL_KERNEL(add) {
//     const float *a = HALO_ARG(state, 0, const float *);
//     float *c = HALO_ARG(state, 2, float *);
//     uint32_t n = HALO_ARG(state, 3, uint32_t);
//     uint32_t i0 = state->workgroup_id[0] * state->workgroup_size[0];
//     ...
//   }
#ifndef HALO_LOCAL_KERNEL_H_
#define HALO_LOCAL_KERNEL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct halo_dispatch_state_t {
  void *const *args;  // arg_count pointers to argument values
  uint32_t arg_count;
  uint32_t workgroup_id[3];
  uint32_t workgroup_count[3];
  uint32_t workgroup_size[3];
  void *shared_memory;  // shared_memory_bytes of scratch, per workgroup
  uint32_t shared_memory_bytes;
} halo_dispatch_state_t;

#define HALO_LOCAL_KERNEL(name)                     \
  __attribute__((visibility("default"))) void name( \
      const halo_dispatch_state_t *state)

// The value of argument |index| as |type|.
#define HALO_ARG(state, index, type) (*(type const *)(state)->args[index])

#ifdef __cplusplus
}
#endif

#endif  // HALO_LOCAL_KERNEL_H_
