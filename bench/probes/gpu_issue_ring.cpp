// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A stand-alone probe (no halo code, the driver API only) shaped like a
// halo worker: tenant threads each write a request word and spin on the
// word their step's completion store writes; ONE issuing thread polls the
// requests, writes the instance's ticket (halo's store kernel node at the
// end of each graph makes the store: no store call) and issues the step:
//   host issue: cuGraphLaunch on the tenant's stream;
//   GPU issue:  posts (sequence, instance) to a ring in host-mapped memory
//               that a scheduler kernel (gpu_issue_scheduler.cu) polls and
//               launches from the GPU; the host launches the scheduler
//               again whenever it is not running after a post.
// It prints one tenant's step p50 and the steps/s of 8, 16 and 64
// tenants (20 us kernels) for each, then times a module load made while
// the scheduler runs. Not built by CMake (it needs nvcc); on a GPU machine:
//   nvcc -arch=sm_90 -ptx bench/probes/gpu_issue_scheduler.cu -o /tmp/s.ptx
//   g++ -O2 -std=c++17 bench/probes/gpu_issue_ring.cpp
//       -I/usr/local/cuda/include -L/usr/local/cuda/lib64/stubs -lcuda
//       -lpthread -o /tmp/gir    (one command)
//   /tmp/gir /tmp/s.ptx
#include <cuda.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "probe.h"

enum { kRing = 1024, kMaxTenants = 64, kTicketWords = 16, kStride = 8 };

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  size_t n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = (char *)calloc(1, n + 1);
  if (fread(text, 1, n, f) != n) exit(1);
  fclose(f);
  return text;
}

static void *host_mapped(size_t bytes, CUdeviceptr *device) {
  void *host;
  CD(cuMemHostAlloc(&host, bytes,
                    CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  memset(host, 0, bytes);
  CD(cuMemHostGetDevicePointer(device, host, 0));
  return host;
}

static CUcontext context;
static CUfunction scheduler_fn, spin_fn, store_fn;
static volatile u64 *ring;  // the ring (gpu_issue_scheduler.cu)
static CUdeviceptr ring_device;
static u64 *tickets;  // per tenant two instances, a ticket each
static CUdeviceptr tickets_device;
static volatile u64 *done;  // per tenant, written by the GPU
static CUdeviceptr done_device;
static volatile u64 *request;  // per tenant, host only
static CUgraphExec scheduler_exec;
static CUstream scheduler_stream;
static CUgraphExec work[kMaxTenants * 2];
static CUstream streams[kMaxTenants];
static u64 posted, scheduler_launches, starts_at_launch = ~0ull;

static CUDA_KERNEL_NODE_PARAMS one_block(CUfunction f, unsigned threads,
                                         void **args) {
  CUDA_KERNEL_NODE_PARAMS p = {};
  p.func = f;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = threads;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  return p;
}

// Each tenant's two instances (alternating steps): the kernel, then the
// store node reading the instance's ticket.
static void make_work(u64 ns, bool device_launch) {
  for (int i = 0; i < kMaxTenants * 2; ++i) {
    CUgraph g;
    CD(cuGraphCreate(&g, 0));
    void *spin_args[] = {&ns};
    CUDA_KERNEL_NODE_PARAMS spin = one_block(spin_fn, 32, spin_args);
    CUdeviceptr ticket = tickets_device + 8 * kTicketWords * i;
    void *store_args[] = {&ticket};
    CUDA_KERNEL_NODE_PARAMS store = one_block(store_fn, 1, store_args);
    CUgraphNode spin_node, store_node;
    CD(cuGraphAddKernelNode(&spin_node, g, NULL, 0, &spin));
    CD(cuGraphAddKernelNode(&store_node, g, &spin_node, 1, &store));
    CD(cuGraphInstantiateWithFlags(
        &work[i], g,
        device_launch ? CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH : 0));
    if (device_launch) CD(cuGraphUpload(work[i], streams[i / 2]));
    CD(cuGraphDestroy(g));
  }
  CD(cuCtxSynchronize());
}

static void destroy_work() {
  for (int i = 0; i < kMaxTenants * 2; ++i) CD(cuGraphExecDestroy(work[i]));
}

// Posts |exec| to the ring; launches the scheduler where it is not running
// (a launch of ours not started yet will see the post; a redundant launch
// idles out).
static void check_launches() {
  if (ring[3]) {
    printf("a launch from the GPU failed: sequence %llu, cudaError_t %llu\n",
           ring[3] >> 16, ring[3] & 0xffff);
    exit(1);
  }
}

static void post(CUgraphExec exec) {
  u64 sequence = ++posted;
  while (sequence - ring[1] > kRing) {  // full
    check_launches();
    _mm_pause();
  }
  volatile u64 *entry = ring + 8 + 2 * ((sequence - 1) & (kRing - 1));
  entry[1] = (u64)exec;
  std::atomic_thread_fence(std::memory_order_release);
  entry[0] = sequence;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (ring[2] != 1 && ring[5] != starts_at_launch) {
    check_launches();
    starts_at_launch = ring[5];
    CD(cuGraphLaunch(scheduler_exec, scheduler_stream));
    ++scheduler_launches;
  }
}

// |tenants| closed loops for |seconds|: steps/s and the step's p50 (us).
static void run(bool gpu, int tenants, double seconds, double *rate,
                double *p50_us) {
  for (int t = 0; t < tenants; ++t) {
    request[kStride * t] = 0;
    done[kStride * t] = 0;
  }
  std::atomic<bool> go{false}, halt{false};
  std::vector<u64> steps(tenants);
  std::vector<std::vector<float>> latencies(tenants);
  std::vector<std::thread> threads;
  for (int t = 0; t < tenants; ++t) {
    threads.emplace_back([&, t] {
      latencies[t].reserve(1 << 20);
      while (!go) {
      }
      for (u64 value = 1; !halt.load(std::memory_order_relaxed); ++value) {
        double start = now();
        request[kStride * t] = value;
        while (done[kStride * t] != value) {
          if (halt.load(std::memory_order_relaxed)) return;
        }
        if (latencies[t].size() < latencies[t].capacity()) {
          latencies[t].push_back((float)(now() - start));
        }
        ++steps[t];
      }
    });
  }
  std::thread issuer([&] {
    CD(cuCtxSetCurrent(context));
    std::vector<u64> seen(tenants, 0);
    while (!halt.load(std::memory_order_relaxed)) {
      for (int t = 0; t < tenants; ++t) {
        u64 value = request[kStride * t];
        if (value == seen[t]) continue;
        seen[t] = value;
        int instance = t * 2 + (int)(value & 1);
        u64 *ticket = tickets + kTicketWords * instance;
        ticket[1] = done_device + 8 * kStride * t;
        ticket[2] = value;
        std::atomic_thread_fence(std::memory_order_release);
        ticket[0] = 1;
        if (gpu) {
          post(work[instance]);
        } else {
          CD(cuGraphLaunch(work[instance], streams[t]));
        }
      }
    }
  });
  double elapsed = probe_run_for(go, halt, seconds);
  for (auto &thread : threads) thread.join();
  issuer.join();
  probe_tally(steps, latencies, elapsed, rate, p50_us);
  CD(cuCtxSynchronize());
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s SCHEDULER.ptx [IDLE_NS]\n", argv[0]);
    return 2;
  }
  CD(cuInit(0));
  CUdevice device;
  CD(cuDeviceGet(&device, 0));
  CD(cuDevicePrimaryCtxRetain(&context, device));
  CD(cuCtxSetCurrent(context));
  char *ptx = read_file(argv[1]);
  CUmodule module;
  CD(cuModuleLoadData(&module, ptx));  // no libcudadevrt: a builtin
  CD(cuModuleGetFunction(&scheduler_fn, module, "halo_gpu_issue"));
  CD(cuModuleGetFunction(&spin_fn, module, "spin"));
  CD(cuModuleGetFunction(&store_fn, module, "store_ticket"));
  ring = (volatile u64 *)host_mapped(8 * (8 + 2 * kRing), &ring_device);
  tickets =
      (u64 *)host_mapped(8 * kTicketWords * 2 * kMaxTenants, &tickets_device);
  done = (volatile u64 *)host_mapped(8 * kStride * kMaxTenants, &done_device);
  request = (volatile u64 *)calloc(kStride * kMaxTenants, 8);
  CD(cuStreamCreate(&scheduler_stream, CU_STREAM_NON_BLOCKING));
  for (int t = 0; t < kMaxTenants; ++t) {
    CD(cuStreamCreate(&streams[t], CU_STREAM_NON_BLOCKING));
  }
  {
    CUgraph g;
    CD(cuGraphCreate(&g, 0));
    u64 mask = kRing - 1, idle_ns = argc > 2 ? atoll(argv[2]) : 50000;
    unsigned per_run = 100;
    void *args[] = {&ring_device, &mask, &idle_ns, &per_run};
    CUDA_KERNEL_NODE_PARAMS p = one_block(scheduler_fn, 32, args);
    CUgraphNode node;
    CD(cuGraphAddKernelNode(&node, g, NULL, 0, &p));
    CD(cuGraphInstantiateWithFlags(&scheduler_exec, g,
                                   CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH));
    CD(cuGraphUpload(scheduler_exec, scheduler_stream));
    CD(cuGraphDestroy(g));
  }
  ring[2] = 3;  // no scheduler yet
  for (int gpu = 0; gpu < 2; ++gpu) {
    const char *name = gpu ? "GPU issue " : "host issue";
    make_work(20000, gpu);
    double rate, p50;
    run(gpu, 1, 1.0, &rate, &p50);
    printf("%s  1 tenant, 20 us kernel: step p50 %.2f us, %.0f steps/s\n", name,
           p50, rate);
    for (int tenants : {8, 16, 64}) {
      run(gpu, tenants, 2.0, &rate, &p50);
      printf("%s %2d tenants: %.0f steps/s, step p50 %.2f us\n", name, tenants,
             rate, p50);
    }
    destroy_work();
  }
  printf(
      "scheduler launched from the host %llu times, %llu starts, %llu "
      "posts, failed launch word %llx\n",
      scheduler_launches, ring[5], posted, ring[3]);
  // A module load made while the scheduler runs (kept running by posts).
  make_work(20000, true);
  double load_ms = -1;
  std::thread loader([&] {
    CD(cuCtxSetCurrent(context));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CUmodule other;
    double start = now();
    CD(cuModuleLoadData(&other, ptx));
    load_ms = 1e3 * (now() - start);
    CD(cuModuleUnload(other));
  });
  double rate, p50;
  run(true, 8, 1.5, &rate, &p50);
  loader.join();
  printf("a module load during GPU issue (8 tenants, %.0f steps/s): %.1f ms\n",
         rate, load_ms);
  ring[0] = 1;  // stop
  CD(cuStreamSynchronize(scheduler_stream));
  destroy_work();
  return 0;
}
