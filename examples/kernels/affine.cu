// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The CUDA twin of affine.c: x[i] = scale * x[i] + offset for i < n, in
// place, one thread per element. Arguments: x (BUFFER), n (CONSTANT
// uint32), scale and offset (CONSTANT float). Built by nvcc to
// bin/affine.ptx; halo-pipeline loads it when device 0 is a GPU.
extern "C" __global__ void affine(float *x, unsigned n, float scale,
                                  float offset) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = scale * x[i] + offset;
}
