// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The kernels of the fake libcuda.so.1 (hal_cuda_fake_driver.c built with
// HALO_FAKE_CUDA_LIBRARY): host versions of the CUDA C kernels of
// tests/integration/cuda_execute_test.c and bench/bench_cuda.c, loaded from
// any CUBIN holding the text "halo-fake-library".
#include <stdint.h>
#include <unistd.h>

#include "tests/unit/hal_cuda_fake_driver.h"

static uint32_t fake_min(uint64_t threads, uint32_t n) {
  return threads < n ? (uint32_t)threads : n;
}

static void axpy(void **args, uint64_t threads) {
  const float *x = *(float **)args[0];
  float *y = *(float **)args[1];
  float a = *(float *)args[2];
  uint32_t n = fake_min(threads, *(uint32_t *)args[3]);
  for (uint32_t i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}

static void axpy_table(void **args, uint64_t threads) {
  const uint64_t *table = *(uint64_t **)args[0];
  float a = *(float *)args[1];
  uint32_t n = fake_min(threads, *(uint32_t *)args[2]);
  const float *x = (const float *)(uintptr_t)table[*(uint32_t *)args[3]];
  float *y = (float *)(uintptr_t)table[*(uint32_t *)args[4]];
  for (uint32_t i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}

static void slow_scale(void **args, uint64_t threads) {
  const float *x = *(float **)args[0];
  float *y = *(float **)args[1];
  float a = *(float *)args[2];
  uint32_t n = fake_min(threads, *(uint32_t *)args[3]);
  usleep((useconds_t)(*(uint64_t *)args[4] / 1000));
  for (uint32_t i = 0; i < n; ++i) y[i] = a * x[i];
}

static void add(void **args, uint64_t threads) {
  const float *a = *(float **)args[0];
  const float *b = *(float **)args[1];
  float *c = *(float **)args[2];
  uint32_t n = fake_min(threads, *(uint32_t *)args[3]);
  for (uint32_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

static void scale_add(void **args, uint64_t threads) {
  const float *x = *(float **)args[0];
  float *y = *(float **)args[1];
  float a = *(float *)args[2], b = *(float *)args[3];
  uint32_t n = fake_min(threads, *(uint32_t *)args[4]);
  for (uint32_t i = 0; i < n; ++i) y[i] = a * x[i] + b;
}

static void fault(void **args, uint64_t threads) {
  (void)args;
  (void)threads;
  fake_driver_set_sticky(CUDA_ERROR_ILLEGAL_ADDRESS);
}

static void tiny(void **args, uint64_t threads) {
  (void)threads;
  (*(float **)args[0])[0] += 1.0f;
}

static void step(void **args, uint64_t threads) {
  const float *x = *(float **)args[0];
  float *y = *(float **)args[1];
  for (uint64_t i = 0; i < threads; ++i) y[i] = x[i] * 0.5f + 1.0f;
}

static void step_table(void **args, uint64_t threads) {
  const uint64_t *table = *(uint64_t **)args[0];
  const float *x = (const float *)(uintptr_t)table[*(uint32_t *)args[1]];
  float *y = (float *)(uintptr_t)table[*(uint32_t *)args[2]];
  for (uint64_t i = 0; i < threads; ++i) y[i] = x[i] * 0.5f + 1.0f;
}

const fake_kernel_t fake_library_kernels[] = {
    {"axpy", axpy, 4, {8, 8, 4, 4}},
    {"axpy_table", axpy_table, 5, {8, 4, 4, 4, 4}},
    {"slow_scale", slow_scale, 5, {8, 8, 4, 4, 8}},
    {"add", add, 4, {8, 8, 8, 4}},
    {"scale_add", scale_add, 5, {8, 8, 4, 4, 4}},
    {"fault", fault, 1, {8}},
    {"tiny", tiny, 1, {8}},
    {"step", step, 2, {8, 8}},
    {"step_table", step_table, 3, {8, 4, 4}},
};
const uint32_t fake_library_kernel_count =
    sizeof(fake_library_kernels) / sizeof(fake_library_kernels[0]);
