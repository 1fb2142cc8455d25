// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A local (CPU) driver kernel written in C++, as a C++ project writes one
// with halo/local_kernel.h (ISO C++17, -pedantic, no old-style casts): its
// entry and its declared parameters must reach halod under their C names
// (integration.parameters_test runs it). c[i] = a[i] + b[i] for i < n, as
// test_kernels.c's `add`.
#include <cstdint>

#include "halo/local_kernel.h"

HALO_LOCAL_KERNEL_PARAMS(add, 8, 8, 8, 4);
HALO_LOCAL_KERNEL(add) {
  const float *a = HALO_ARG(state, 0, const float *);
  const float *b = HALO_ARG(state, 1, const float *);
  float *c = HALO_ARG(state, 2, float *);
  std::uint32_t n = HALO_ARG(state, 3, std::uint32_t);
  std::uint32_t first = state->workgroup_id[0] * state->workgroup_size[0];
  for (std::uint32_t i = first; i < first + state->workgroup_size[0] && i < n;
       ++i) {
    c[i] = a[i] + b[i];
  }
}

HALO_LOCAL_KERNEL_NO_PARAMS(nothing);
HALO_LOCAL_KERNEL(nothing) {
  static_cast<void>(state);
}
