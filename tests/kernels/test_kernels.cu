// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// CUDA twins of test_kernels.c, for the integration tests' cuda.* variants
// (HALO_TEST_DRIVER=cuda; tests/support/halo_test.h picks this file's PTX).
// Built by nvcc (tests/kernels/CMakeLists.txt) into PTX and a FATBIN.
//
// Same entry names (extern "C": looked up unmangled), same parameters and
// the same results as the local kernels. A local kernel runs once per
// workgroup: workgroup_id/count/size are blockIdx/gridDim/blockDim here.
// Element-wise kernels use every thread; per-workgroup kernels (ids,
// shared_sum, sleepy, rendezvous, gate, order, ...) do their work on
// thread 0 of each block, as the local kernel does once per workgroup.

#ifndef TEST_KERNELS_WHICH
#define TEST_KERNELS_WHICH 0
#endif

// The local kernels' linear workgroup index: x fastest.
__device__ static unsigned linear_id() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}

__device__ static bool first_thread() {
  return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
}

// Nanoseconds of the GPU's global timer.
__device__ static unsigned long long now_ns() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

// A load the compiler may not cache: |word| may be written by other blocks
// or by the host (host-visible buffers are mapped host memory).
__device__ static unsigned load_volatile(const unsigned *word) {
  return *(const volatile unsigned *)word;
}

// c[i] = a[i] + b[i] for i < n; args: a, b, c (BUFFER), n (uint32).
extern "C" __global__ void add(const float *a, const float *b, float *c,
                               unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// The same through the binding table: table[0..2] are a, b, c; args:
// BINDING_TABLE, n (uint32).
extern "C" __global__ void add_table(const unsigned long long *table,
                                     unsigned n) {
  const float *a = (const float *)table[0];
  const float *b = (const float *)table[1];
  float *c = (float *)table[2];
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// out[i] = table[i] for i < count; args: out (BUFFER), BINDING_TABLE,
// count (uint32).
extern "C" __global__ void table_probe(unsigned long long *out,
                                       const unsigned long long *table,
                                       unsigned count) {
  if (!first_thread()) return;
  for (unsigned i = 0; i < count; ++i) out[i] = table[i];
}

// Per block l (x fastest): out[4l..4l+2] = blockIdx, out[4l+3] += 1;
// counts (BUFFER, 3 uint32) = gridDim; args: out, counts.
extern "C" __global__ void ids(unsigned *out, unsigned *counts) {
  if (!first_thread()) return;
  unsigned l = linear_id();
  out[4 * l + 0] = blockIdx.x;
  out[4 * l + 1] = blockIdx.y;
  out[4 * l + 2] = blockIdx.z;
  atomicAdd(&out[4 * l + 3], 1u);
  counts[0] = gridDim.x;
  counts[1] = gridDim.y;
  counts[2] = gridDim.z;
}

// Fills the block's dynamic shared memory (the dispatch's
// shared_memory_bytes) with l + i and sums it back: out[l] = the sum;
// args: out (BUFFER).
extern "C" __global__ void shared_sum(unsigned *out) {
  extern __shared__ unsigned shared[];
  if (!first_thread()) return;
  unsigned bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  unsigned count = bytes / sizeof(unsigned);
  unsigned l = linear_id();
  for (unsigned i = 0; i < count; ++i) shared[i] = l + i;
  unsigned sum = 0;
  for (unsigned i = 0; i < count; ++i) sum += shared[i];
  out[l] = sum;
}

// Constants of assorted sizes; args: out (BUFFER, 4 uint64), uint8,
// uint64, double, uint16.
extern "C" __global__ void constants(unsigned long long *out, unsigned char a,
                                     unsigned long long b, double d,
                                     unsigned short h) {
  if (!first_thread()) return;
  out[0] = a;
  out[1] = b;
  out[2] = (unsigned long long)__double_as_longlong(d);
  out[3] = h;
}

// *out = which copy of this file this is; args: out (BUFFER).
extern "C" __global__ void which(unsigned *out) {
  if (first_thread()) *out = TEST_KERNELS_WHICH;
}

// Sleeps |microseconds| (of the global timer), then counts itself; per
// block. args: counter (BUFFER, uint32), microseconds (uint32).
extern "C" __global__ void sleepy(unsigned *counter, unsigned microseconds) {
  if (!first_thread()) return;
  unsigned long long start = now_ns();
  while (now_ns() - start < 1000ull * microseconds) __nanosleep(1000);
  atomicAdd(counter, 1u);
}

// Each block arrives, then waits (at most 10 s) for all n to have arrived:
// out[l] = 1 only if they ran at the same time. args: arrived (BUFFER,
// uint32), n (uint32), out (BUFFER, uint32 per block).
extern "C" __global__ void rendezvous(unsigned *arrived, unsigned n,
                                      unsigned *out) {
  if (!first_thread()) return;
  atomicAdd(arrived, 1u);
  __threadfence_system();
  unsigned long long deadline = now_ns() + 10000000000ull;
  while (load_volatile(arrived) < n && now_ns() < deadline) __nanosleep(1000);
  out[linear_id()] = load_volatile(arrived) >= n;
}

// Counts itself as started, then holds its block until *gate is set (by
// the host, at most 10 s); args: started (BUFFER, uint32), gate (BUFFER,
// uint32).
extern "C" __global__ void gate(unsigned *started, const unsigned *flag) {
  if (!first_thread()) return;
  atomicAdd(started, 1u);
  __threadfence_system();
  unsigned long long deadline = now_ns() + 10000000000ull;
  while (!load_volatile(flag) && now_ns() < deadline) __nanosleep(10000);
}

// *out = the next number of a shared sequence (per block); args: sequence
// (BUFFER, uint32), out (BUFFER, uint32).
extern "C" __global__ void order(unsigned *sequence, unsigned *out) {
  if (first_thread()) *out = atomicAdd(sequence, 1u);
}

// Not an entry point: looking it up as a kernel must fail.
extern "C" __device__ int not_a_function = 7;
