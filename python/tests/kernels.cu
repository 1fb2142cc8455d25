// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// CUDA twins of kernels.c for the Python tests under HALO_TEST_DRIVER=cuda:
// built to PTX by nvcc (tests/kernels/CMakeLists.txt: python_kernels.ptx
// in the build tree; conftest.py compiles it itself when that is missing).
// Same entry names, parameters and results; a local kernel's workgroup is a
// block here (workgroup_id/count/size are blockIdx/gridDim/blockDim).

// c[i] = a[i] + b[i] for i < n; args: a, b, c (BUFFER), n (uint32).
extern "C" __global__ void add(const float *a, const float *b, float *c,
                               unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// c[i] = a[i] + (b ? b[i] : 1) for i < n: b may be a null pointer (None in
// Python).
extern "C" __global__ void add_optional(const float *a, const float *b,
                                        float *c, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + (b ? b[i] : 1.0f);
}

// y[i] = a * x[i] + y[i] for i < n; args: a (float), x, y (BUFFER),
// n (uint64).
extern "C" __global__ void saxpy(float a, const float *x, float *y,
                                 unsigned long long n) {
  unsigned long long i =
      (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Through the binding table: table[0..2] are a, b, c; args: BINDING_TABLE,
// n (uint32).
extern "C" __global__ void add_table(const unsigned long long *table,
                                     unsigned n) {
  const float *a = (const float *)table[0];
  const float *b = (const float *)table[1];
  float *c = (float *)table[2];
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// out[3 * l + d] = gridDim[d] for the block l (x fastest); args: out
// (BUFFER of uint32).
extern "C" __global__ void counts(unsigned *out) {
  if (threadIdx.x || threadIdx.y || threadIdx.z) return;
  unsigned l = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  out[3 * l + 0] = gridDim.x;
  out[3 * l + 1] = gridDim.y;
  out[3 * l + 2] = gridDim.z;
}

// out[0] and out[1] = the addresses passed as the two parameters Triton
// appends to a kernel's own (global scratch, profile scratch).
extern "C" __global__ void scratch_address(unsigned long long *out,
                                           void *global_scratch,
                                           void *profile_scratch) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out[0] = (unsigned long long)global_scratch;
    out[1] = (unsigned long long)profile_scratch;
  }
}
