// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A stand-alone probe (no halo code) of the device memory a CUDA graph's
// instances take: graphs of N kernel, memset or memcpy nodes (dispatches,
// fills, copies) in stages (a chain, as a recording's dependent commands,
// up to one stage of N independent ones), K instances each (instantiated,
// uploaded and launched once, as halo's pool makes them),
// the device's free memory read with cuMemGetInfo before and after.
// halo's recording quota (session-recording-bytes) counts a recording's
// bytes as kept by halod and the worker; this measures what the driver
// adds on the device per instance and node, which that quota does not see.
// docs/performance.md quotes it. Not built by CMake (it needs nvcc); on a
// GPU machine:
//   nvcc -O2 -arch=sm_90 bench/probes/graph_memory.cu -lcuda -o /tmp/gm
//   /tmp/gm 1024 8 1 16   (1024 nodes in stages of 8, a sink, 16
//                          instances; one case per process)
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "probe.h"

__global__ void touch(u64 *out) {
  if (threadIdx.x == 0 && out) *out += 1;
}

// A kernel whose parameters take |N| bytes (a dispatch's constants).
template <int N>
struct Bytes {
  char b[N];
};
template <int N>
__global__ void wide_parameters(Bytes<N> bytes) {
  if (threadIdx.x == 0 && bytes.b[0] == 7) bytes.b[1] = 1;
}
static Bytes<32000> g_bytes;

// The kernel taking |bytes| of parameters (one of the sizes below), or
// NULL.
static const void *parameter_kernel(int bytes) {
  switch (bytes) {
    case 1024:
      return (const void *)wide_parameters<1024>;
    case 4000:
      return (const void *)wide_parameters<4000>;
    case 4096:
      return (const void *)wide_parameters<4096>;
    case 8192:
      return (const void *)wide_parameters<8192>;
    case 16384:
      return (const void *)wide_parameters<16384>;
    case 32000:
      return (const void *)wide_parameters<32000>;
  }
  return nullptr;
}

static size_t free_bytes() {
  CK(cudaDeviceSynchronize());
  size_t free_now = 0, total = 0;
  CD(cuMemGetInfo(&free_now, &total));
  return free_now;
}

// One graph of |nodes| kernel nodes in stages of |stage| (1: a chain, as
// dependent dispatches; |nodes|: one stage, as dispatches with no barrier
// between them), each stage after the previous one (on its one node, or on
// an empty join node when it has several: how halo builds a recording's
// graph); |sink|: a last kernel node after the last stage (halo's store
// node).
// |kind|: 'k' kernel nodes (dispatches; |parameter_bytes| 0: an 8-byte
// pointer, else that many bytes of parameters), 's' memset nodes of 4 KiB
// (fills), 'c' device-to-device memcpy nodes of 4 KiB (copies, updates)
// from |source|.
static cudaGraph_t build(int nodes, int stage, bool sink, char kind,
                         int parameter_bytes, u64 *out, u64 *source) {
  cudaGraph_t graph;
  CK(cudaGraphCreate(&graph, 0));
  cudaMemsetParams fill = {};
  fill.dst = out;
  fill.value = 7;
  fill.elementSize = 4;
  fill.width = 1024;
  fill.height = 1;
  cudaMemcpy3DParms copy = {};
  copy.srcPtr = make_cudaPitchedPtr(source, 4096, 4096, 1);
  copy.dstPtr = make_cudaPitchedPtr(out, 4096, 4096, 1);
  copy.extent = make_cudaExtent(4096, 1, 1);
  copy.kind = cudaMemcpyDeviceToDevice;
  cudaKernelNodeParams p = {};
  void *args[1] = {&out};
  p.func = (void *)touch;
  p.gridDim = dim3(1);
  p.blockDim = dim3(32);
  p.kernelParams = args;
  cudaKernelNodeParams wide = p;
  void *wide_args[1] = {&g_bytes};
  if (parameter_bytes) {
    wide.func = (void *)parameter_kernel(parameter_bytes);
    wide.kernelParams = wide_args;
  }
  std::vector<cudaGraphNode_t> previous, current;
  for (int i = 0; i < nodes; ++i) {
    if (i % stage == 0 && i > 0) {
      previous.swap(current);
      current.clear();
      if (previous.size() > 1) {
        cudaGraphNode_t join;
        CK(cudaGraphAddEmptyNode(&join, graph, previous.data(),
                                 previous.size()));
        previous.assign(1, join);
      }
    }
    cudaGraphNode_t node;
    if (kind == 's') {
      CK(cudaGraphAddMemsetNode(&node, graph, previous.data(), previous.size(),
                                &fill));
    } else if (kind == 'c') {
      CK(cudaGraphAddMemcpyNode(&node, graph, previous.data(), previous.size(),
                                &copy));
    } else {
      CK(cudaGraphAddKernelNode(&node, graph, previous.data(), previous.size(),
                                parameter_bytes ? &wide : &p));
    }
    current.push_back(node);
  }
  if (sink) {
    cudaGraphNode_t node;
    CK(cudaGraphAddKernelNode(&node, graph, current.data(), current.size(),
                              &p));
  }
  return graph;
}

// gm NODES STAGE SINK INSTANCES [KIND [PARAMETER_BYTES]]: one case per
// process (the driver keeps what it took for destroyed instances and hands
// it to the next ones, so a case after another reads low); KIND k (kernel
// nodes, the default), s (memset) or c (memcpy); PARAMETER_BYTES (kernel
// nodes): 1024, 4000, 4096, 8192, 16384 or 32000 bytes of parameters a
// node instead of one pointer.
int main(int argc, char **argv) {
  if (argc < 5 || argc > 7) {
    fprintf(stderr,
            "usage: %s NODES STAGE SINK(0/1) INSTANCES [k|s|c "
            "[PARAMETER_BYTES]]\n",
            argv[0]);
    return 2;
  }
  int parameter_bytes = argc == 7 ? atoi(argv[6]) : 0;
  if (parameter_bytes && !parameter_kernel(parameter_bytes)) {
    fprintf(stderr, "PARAMETER_BYTES: 1024, 4000, 4096, 8192, 16384, 32000\n");
    return 2;
  }
  int nodes = atoi(argv[1]), stage = atoi(argv[2]), sink = atoi(argv[3]),
      instances = atoi(argv[4]);
  char kind = argc >= 6 ? argv[5][0] : 'k';
  if (kind != 'k' && kind != 's' && kind != 'c') {
    fprintf(stderr, "KIND is k, s or c\n");
    return 2;
  }
  if (nodes < 1 || stage < 1 || instances < 1) {
    fprintf(stderr, "NODES, STAGE and INSTANCES are at least 1\n");
    return 2;
  }
  CK(cudaFree(0));
  u64 *out, *source;
  CK(cudaMalloc(&out, 4096));
  CK(cudaMalloc(&source, 4096));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // The graphs themselves first (host objects), then the instances.
  std::vector<cudaGraph_t> graphs;
  for (int k = 0; k < instances; ++k)
    graphs.push_back(
        build(nodes, stage, sink, kind, parameter_bytes, out, source));
  size_t before = free_bytes();
  double t0 = now();
  std::vector<cudaGraphExec_t> execs(instances);
  for (int k = 0; k < instances; ++k) {
    CK(cudaGraphInstantiate(&execs[k], graphs[k], 0));
    CK(cudaGraphUpload(execs[k], stream));
    CK(cudaGraphLaunch(execs[k], stream));
  }
  CK(cudaStreamSynchronize(stream));
  double seconds = now() - t0;
  size_t after = free_bytes();
  double mib = ((double)before - (double)after) / (1 << 20);
  printf(
      "%5d %s nodes (%5d B of parameters), stages of %5d%s, %3d instances: "
      "%9.2f MiB in all, "
      "%8.3f MiB an instance, %7.0f B a node; %8.3f ms an instance\n",
      nodes,
      kind == 's'   ? "memset"
      : kind == 'c' ? "memcpy"
                    : "kernel",
      kind == 'k' ? (parameter_bytes ? parameter_bytes : 8) : 0, stage,
      sink ? " + sink" : "", instances, mib, mib / instances,
      mib * (1 << 20) / instances / nodes, 1e3 * seconds / instances);
  return 0;
}
