// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A stand-alone probe (no halo code) of what cuGraphLaunch costs the
// issuing thread by the flags its executable graph was instantiated with:
// none (halo's), CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH (a graph the
// GPU could launch too) and CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
// for a graph of one kernel node (a one-dispatch recording) and of two
// kernel nodes in a chain (the shape of a one-dispatch recording with
// halo's store node after it). Each graph is uploaded
// first; then 20,000 launches, the stream drained every 16 (the call's
// CPU time: p50, mean, p99), and 5,000 launches each followed by
// cuStreamSynchronize (p50). Twice over, to see the spread.
// docs/performance.md quotes it. Not built by CMake (it needs the CUDA
// driver's header); on a GPU machine:
//   g++ -O2 -I/usr/local/cuda/include bench/probes/graph_flags.cpp -lcuda
//     -o /tmp/gf && /tmp/gf
#include "probe.h"

namespace {

// One block of 32 threads that returns at once (the launch is measured,
// not the kernel).
const char kPtx[] =
    ".version 8.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry k(.param .u64 p) { ret; }\n";

struct Case {
  unsigned long long flags;
  const char *name;
};

const Case kCases[] = {
    {0, "none"},
    {CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH, "DEVICE_LAUNCH"},
    {CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY, "USE_NODE_PRIORITY"},
};

double percentile(std::vector<double> &v, double p) {
  std::sort(v.begin(), v.end());
  return v[(size_t)(p * (double)(v.size() - 1))];
}

void measure(CUfunction function, CUstream stream, int nodes, const Case &c) {
  CUgraph graph;
  CD(cuGraphCreate(&graph, 0));
  CUgraphNode previous = nullptr;
  u64 argument = 0;
  void *arguments[] = {&argument};
  for (int n = 0; n < nodes; ++n) {
    CUDA_KERNEL_NODE_PARAMS params = {};
    params.func = function;
    params.gridDimX = params.gridDimY = params.gridDimZ = 1;
    params.blockDimX = 32;
    params.blockDimY = params.blockDimZ = 1;
    params.kernelParams = arguments;
    CUgraphNode node;
    CD(cuGraphAddKernelNode(&node, graph, previous ? &previous : nullptr,
                            previous ? 1 : 0, &params));
    previous = node;
  }
  CUgraphExec exec;
  CD(cuGraphInstantiateWithFlags(&exec, graph, c.flags));
  CD(cuGraphUpload(exec, stream));
  CD(cuStreamSynchronize(stream));

  std::vector<double> launch(20000), step(5000);
  for (size_t i = 0; i < launch.size(); ++i) {
    double start = now();
    CD(cuGraphLaunch(exec, stream));
    launch[i] = (now() - start) * 1e6;
    if (i % 16 == 15) CD(cuStreamSynchronize(stream));
  }
  CD(cuStreamSynchronize(stream));
  for (double &s : step) {
    double start = now();
    CD(cuGraphLaunch(exec, stream));
    CD(cuStreamSynchronize(stream));
    s = (now() - start) * 1e6;
  }
  double sum = 0;
  for (double l : launch) sum += l;
  double mean = sum / (double)launch.size();
  double p50 = percentile(launch, 0.5), p99 = percentile(launch, 0.99);
  printf(
      "%d node(s), flags %-17s cuGraphLaunch p50 %5.2f us, mean %5.2f, "
      "p99 %5.2f; launch + sync p50 %5.2f us\n",
      nodes, c.name, p50, mean, p99, percentile(step, 0.5));
  CD(cuGraphExecDestroy(exec));
  CD(cuGraphDestroy(graph));
}

}  // namespace

int main() {
  CUdevice device;
  CUmodule module;
  CUfunction function;
  CUstream stream;
  probe_primary_context(&device);
  CD(cuModuleLoadData(&module, kPtx));
  CD(cuModuleGetFunction(&function, module, "k"));
  CD(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  for (int round = 0; round < 2; ++round) {
    for (int nodes = 1; nodes <= 2; ++nodes) {
      for (const Case &c : kCases) measure(function, stream, nodes, c);
    }
  }
  CD(cuStreamDestroy(stream));
  CD(cuModuleUnload(module));
  CD(cuDevicePrimaryCtxRelease(device));
  return 0;
}
