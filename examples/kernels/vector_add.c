// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A local (CPU) driver kernel: c[i] = a[i] + b[i] for i < n. Arguments:
// a, b, c (BUFFER), n (CONSTANT uint32). One call per workgroup.
#include <stdint.h>

#include "halo/local_kernel.h"

HALO_LOCAL_KERNEL(vector_add) {
  const float *a = HALO_ARG(state, 0, const float *);
  const float *b = HALO_ARG(state, 1, const float *);
  float *c = HALO_ARG(state, 2, float *);
  uint32_t n = HALO_ARG(state, 3, uint32_t);
  uint32_t first = state->workgroup_id[0] * state->workgroup_size[0];
  for (uint32_t i = first; i < first + state->workgroup_size[0] && i < n; ++i) {
    c[i] = a[i] + b[i];
  }
}
