// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A local (CPU) driver kernel: x[i] = scale * x[i] + offset for i < n, in
// place. Arguments: x (BUFFER), n (CONSTANT uint32), scale and offset
// (CONSTANT float). One call per workgroup. Used by halo-pipeline.
#include <stdint.h>

#include "halo/local_kernel.h"

HALO_LOCAL_KERNEL(affine) {
  float *x = HALO_ARG(state, 0, float *);
  uint32_t n = HALO_ARG(state, 1, uint32_t);
  float scale = HALO_ARG(state, 2, float);
  float offset = HALO_ARG(state, 3, float);
  uint32_t first = state->workgroup_id[0] * state->workgroup_size[0];
  for (uint32_t i = first; i < first + state->workgroup_size[0] && i < n; ++i) {
    x[i] = scale * x[i] + offset;
  }
}
