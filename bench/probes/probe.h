// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// What the stand-alone probes of this folder share: a check of a driver
// call (CD) and of a runtime call (CK, where cuda_runtime.h came first),
// each printing the call and its error and exiting, and a clock in
// seconds. Header-only: each probe is still built on its own.
#ifndef HALO_BENCH_PROBES_PROBE_H_
#define HALO_BENCH_PROBES_PROBE_H_

#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

typedef unsigned long long u64;

#define CD(x)                                               \
  do {                                                      \
    CUresult r_ = (x);                                      \
    if (r_) {                                               \
      const char *s_;                                       \
      cuGetErrorString(r_, &s_);                            \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_); \
      exit(1);                                              \
    }                                                       \
  } while (0)

#ifdef __CUDA_RUNTIME_H__
#define CK(x)                                          \
  do {                                                 \
    cudaError_t e_ = (x);                              \
    if (e_) {                                          \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, \
             cudaGetErrorString(e_));                  \
      exit(1);                                         \
    }                                                  \
  } while (0)
#endif

static inline double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#endif  // HALO_BENCH_PROBES_PROBE_H_
