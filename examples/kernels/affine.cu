// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The CUDA twin of affine.c: x[i] = scale * x[i] + offset for i < n, in
// place, one thread per element. Arguments: x (BUFFER), n (CONSTANT
// uint32), scale and offset (CONSTANT float). Built by nvcc to
// bin/affine.ptx where the build has nvcc, and copied as is to
// bin/affine.cu; when device 0 is a GPU halo-pipeline loads the PTX, or
// without one sends this source, which halod compiles with NVRTC. So it
// stays NVRTC-clean: no #include (NVRTC has no host headers), and
// extern "C", so that the entry point keeps its name.
extern "C" __global__ void affine(float *x, unsigned n, float scale,
                                  float offset) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = scale * x[i] + offset;
}
