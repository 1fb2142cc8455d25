// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// CPU-driver kernels of the Python tests (compiled by conftest.py with
// cc -shared -fPIC -O2 -I include). Each entry runs once per
// workgroup, possibly on several threads at once. Each declares its
// parameters (HALO_LOCAL_KERNEL_PARAMS, as CUDA knows kernels.cu's), so
// dispatches are checked at record time and Executable.parameters()
// answers; crash declares none (parameters() is UNIMPLEMENTED for it).
#include <stdint.h>

#include "halo/local_kernel.h"

// c[i] = a[i] + b[i] for i < n; args: a, b, c (BUFFER), n (uint32).
HALO_LOCAL_KERNEL_PARAMS(add, 8, 8, 8, 4);
HALO_LOCAL_KERNEL(add) {
  const float *a = HALO_ARG(state, 0, const float *);
  const float *b = HALO_ARG(state, 1, const float *);
  float *c = HALO_ARG(state, 2, float *);
  uint32_t n = HALO_ARG(state, 3, uint32_t);
  uint32_t first = state->workgroup_id[0] * state->workgroup_size[0];
  for (uint32_t i = first; i < first + state->workgroup_size[0] && i < n; ++i) {
    c[i] = a[i] + b[i];
  }
}

// c[i] = a[i] + (b ? b[i] : 1) for i < n: b may be a null pointer (None in
// Python); args: a, b, c (BUFFER), n (uint32).
HALO_LOCAL_KERNEL_PARAMS(add_optional, 8, 8, 8, 4);
HALO_LOCAL_KERNEL(add_optional) {
  const float *a = HALO_ARG(state, 0, const float *);
  const float *b = HALO_ARG(state, 1, const float *);
  float *c = HALO_ARG(state, 2, float *);
  uint32_t n = HALO_ARG(state, 3, uint32_t);
  uint32_t first = state->workgroup_id[0] * state->workgroup_size[0];
  for (uint32_t i = first; i < first + state->workgroup_size[0] && i < n; ++i) {
    c[i] = a[i] + (b ? b[i] : 1.0f);
  }
}

// y[i] = a * x[i] + y[i] for i < n; args: a (float), x, y (BUFFER),
// n (uint64).
HALO_LOCAL_KERNEL_PARAMS(saxpy, 4, 8, 8, 8);
HALO_LOCAL_KERNEL(saxpy) {
  float a = HALO_ARG(state, 0, float);
  const float *x = HALO_ARG(state, 1, const float *);
  float *y = HALO_ARG(state, 2, float *);
  uint64_t n = HALO_ARG(state, 3, uint64_t);
  uint64_t first = (uint64_t)state->workgroup_id[0] * state->workgroup_size[0];
  for (uint64_t i = first; i < first + state->workgroup_size[0] && i < n; ++i) {
    y[i] = a * x[i] + y[i];
  }
}

// Through the binding table: table[0..2] are a, b, c; args: BINDING_TABLE,
// n (uint32).
HALO_LOCAL_KERNEL_PARAMS(add_table, 8, 4);
HALO_LOCAL_KERNEL(add_table) {
  const uint64_t *table = HALO_ARG(state, 0, const uint64_t *);
  uint32_t n = HALO_ARG(state, 1, uint32_t);
  const float *a = (const float *)(uintptr_t)table[0];
  const float *b = (const float *)(uintptr_t)table[1];
  float *c = (float *)(uintptr_t)table[2];
  uint32_t first = state->workgroup_id[0] * state->workgroup_size[0];
  for (uint32_t i = first; i < first + state->workgroup_size[0] && i < n; ++i) {
    c[i] = a[i] + b[i];
  }
}

// out[3 * l + d] = workgroup_count[d] for the workgroup l (x fastest);
// args: out (BUFFER of uint32).
HALO_LOCAL_KERNEL_PARAMS(counts, 8);
HALO_LOCAL_KERNEL(counts) {
  uint32_t *out = HALO_ARG(state, 0, uint32_t *);
  uint32_t l = state->workgroup_id[0] +
               state->workgroup_count[0] *
                   (state->workgroup_id[1] +
                    state->workgroup_count[1] * state->workgroup_id[2]);
  for (int d = 0; d < 3; ++d) out[3 * l + d] = state->workgroup_count[d];
}

// out[0] and out[1] = the addresses passed as the two parameters Triton
// appends to a kernel's own (global scratch, profile scratch):
// test_triton_launch.py's check that each launch in flight gets its own
// scratch memory; args: out (BUFFER of uint64), two pointers.
HALO_LOCAL_KERNEL_PARAMS(scratch_address, 8, 8, 8);
HALO_LOCAL_KERNEL(scratch_address) {
  uint64_t *out = HALO_ARG(state, 0, uint64_t *);
  out[0] = (uint64_t)(uintptr_t)HALO_ARG(state, 1, void *);
  out[1] = (uint64_t)(uintptr_t)HALO_ARG(state, 2, void *);
}

// Writes to address 16: a real SIGSEGV in the trust domain's device worker
// (tests/test_containment.py); no arguments.
HALO_LOCAL_KERNEL(crash) {
  (void)state;
  int *volatile target = (int *)16;
  *target = 1;
}
