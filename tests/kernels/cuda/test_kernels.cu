// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Kernels of the CUDA driver's tests (tests/unit/hal_cuda_test.c,
// tests/integration/cuda_daemon_test.c, halo-cuda-load-stall). Built by
// nvcc at build time into PTX, CUBIN and FATBIN when nvcc is found, and
// compiled by NVRTC in halod from this very file otherwise.
// extern "C": entry points are looked up by these names.

// A parameter of 20 bytes, passed by value.
struct halo_test_pod {
  int x[5];
};

extern "C" __global__ void halo_test_add(const float *a, const float *b,
                                         float *c, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// Parameters of sizes 1, 8, 8, 20 and 2 (cuFuncGetParamInfo's answer).
extern "C" __global__ void halo_test_params(char c, double d, const void *p,
                                            halo_test_pod s, short h) {
  if (c == 127 && d < 0 && p && s.x[0] == h) asm volatile("trap;");
}

// Spins for |ns| nanoseconds of the GPU's global timer (one thread is
// enough to keep a stream busy), then writes how long it spun.
extern "C" __global__ void halo_test_spin(unsigned long long ns,
                                          unsigned long long *out) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
  if (out) *out = now - start;
}

#ifdef HALO_TEST_SCALE
// Only with -DHALO_TEST_SCALE=<float>: NVRTC options reach the compiler.
extern "C" __global__ void halo_test_scale(float *x, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= HALO_TEST_SCALE;
}
#endif
