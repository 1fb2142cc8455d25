// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// What the stand-alone probes of this folder share: a check of a driver
// call (CD) and of a runtime call (CK, where cuda_runtime.h came first),
// each printing the call and its error and exiting, and a clock in
// seconds, the tally of tenants' closed loops, and device 0's primary
// context. Header-only: each probe is still built on its own.
#ifndef HALO_BENCH_PROBES_PROBE_H_
#define HALO_BENCH_PROBES_PROBE_H_

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

typedef unsigned long long u64;

#define CD(x)                                          \
  do {                                                 \
    CUresult r_ = (x);                                 \
    if (r_) {                                          \
      const char *s_ = NULL;                           \
      cuGetErrorString(r_, &s_);                       \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, \
             s_ ? s_ : "an unknown CUresult");         \
      exit(1);                                         \
    }                                                  \
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

// Releases the tenants' closed loops (|go|), lets them run |seconds| and
// stops them (|halt|); returns the seconds they ran.
static inline double probe_run_for(std::atomic<bool> &go,
                                   std::atomic<bool> &halt, double seconds) {
  go = true;
  double start = now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  halt = true;
  return now() - start;
}

// Closed loops of |steps.size()| tenants over |elapsed| seconds, each
// tenant's step latencies (seconds) in |latencies|: the steps/s of all,
// and the p50 of every step (us). Returns the steps of all.
static inline u64 probe_tally(const std::vector<u64> &steps,
                              const std::vector<std::vector<float>> &latencies,
                              double elapsed, double *rate, double *p50_us) {
  u64 total = 0;
  std::vector<float> all;
  for (size_t t = 0; t < steps.size(); ++t) {
    total += steps[t];
    all.insert(all.end(), latencies[t].begin(), latencies[t].end());
  }
  std::sort(all.begin(), all.end());
  *rate = total / elapsed;
  *p50_us = all.empty() ? 0 : 1e6 * all[all.size() / 2];
  return total;
}

// Device 0's primary context, made current on this thread (the driver
// initialized first); |device| receives the device.
static inline CUcontext probe_primary_context(CUdevice *device) {
  CUcontext context;
  CD(cuInit(0));
  CD(cuDeviceGet(device, 0));
  CD(cuDevicePrimaryCtxRetain(&context, *device));
  CD(cuCtxSetCurrent(context));
  return context;
}

#endif  // HALO_BENCH_PROBES_PROBE_H_
