// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The CUDA twin of vector_add.c: c[i] = a[i] + b[i] for i < n, one thread
// per element. Arguments: a, b, c (BUFFER), n (CONSTANT uint32). Built by
// nvcc to bin/vector_add.ptx where the build has nvcc, and copied as is to
// bin/vector_add.cu; when device 0 is a GPU halo-vector-add loads the PTX,
// or without one sends this source, which halod compiles with NVRTC. So it
// stays NVRTC-clean: no #include (NVRTC has no host headers), and
// extern "C", so that the entry point keeps its name.
extern "C" __global__ void vector_add(const float *a, const float *b,
                                      float *c, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
