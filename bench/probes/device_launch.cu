// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A stand-alone probe (no halo code): can the GPU issue small executions
// for many tenants faster than one process's host threads can?
//
// Host issue (the baseline): each tenant's thread launches its own graph
// (a 1-block kernel) on its own stream and stores the step's value with
// cuStreamWriteValue64 into a host-mapped word it spins on; this is what one
// process (and so one halo worker) can issue at best.
//
// Device issue: the tenants' threads only write a request word in
// host-mapped memory and spin on their done word. A scheduler kernel (one
// warp, a lane per tenant, itself a node of a device-launchable graph) polls
// the request words and launches the tenant's work graph from the GPU
// (cudaGraphLaunch with cudaStreamGraphFireAndForget; a sibling launch,
// cudaStreamGraphFireAndForgetAsSibling, was refused with invalid argument
// from this host-launched scheduler); the work graph is the kernel, then a
// one-thread store kernel that writes the value the scheduler left in device
// memory to the done word. No driver call per step on the host. Every |per_run|
// launches the scheduler ends and tail-launches itself (a graph may launch a
// bounded number of fire-and-forget graphs per execution, 120: with 0,
// never, the 121st launch fails with invalid argument).
//
// It prints, per mode: one tenant's step latency (0 and 20 us kernels) and
// the steps/s of 8, 16 and 64 tenants (20 us kernels), each tenant a
// host thread in a closed loop. Not built by CMake (it needs nvcc and the
// device runtime); on a GPU machine:
//   nvcc -O2 -arch=sm_90 -rdc=true bench/probes/device_launch.cu
//        -lcudadevrt -lcuda -o /tmp/dl    (one command)
//   /tmp/dl [SECONDS [PER_RUN]]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "probe.h"
enum { kMaxTenants = 64, kStride = 8 };  // a 64-byte line per tenant's word

__global__ void spin(u64 ns) {
  u64 t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
// The work graph's completion store: the value the scheduler left.
__global__ void finish(const u64 *ticket, volatile u64 *done) {
  __threadfence_system();
  *done = *ticket;
}

struct Sched {
  const volatile u64 *request;  // host-mapped, tenant t at [kStride * t]
  u64 *ticket;                  // device, [2 * t + slot]
  cudaGraphExec_t *work;        // device, [2 * t + slot]
  u64 *seen;                    // device, the last request launched
  const volatile int *stop;     // host-mapped
  int *error;                   // host-mapped: the first failed launch
  u64 *launches;                // device: launches, summed at each end
  u64 *runs;                    // device: scheduler executions
  int tenants;
  int per_run;
};

// One warp; lane t serves tenants t, t + 32 (up to 64). A launch is
// counted before it is made, so an execution of the scheduler never makes
// more than |per_run|; a request left over waits for the next execution.
__global__ void scheduler(Sched *s) {
  __shared__ volatile int count;
  __shared__ volatile int quit;
  __shared__ int reserved;
  int lane = threadIdx.x;
  if (lane == 0) {
    count = 0;
    quit = 0;
    reserved = 0;
    atomicAdd(s->runs, 1ull);
  }
  __syncwarp();
  int limit = s->per_run ? s->per_run : 0x7fffffff;
  for (;;) {
    for (int t = lane; t < s->tenants; t += 32) {
      u64 r = s->request[kStride * t];
      if (r == s->seen[t]) continue;
      if (atomicAdd(&reserved, 1) >= limit) break;
      s->seen[t] = r;
      int slot = (int)(r & 1);
      s->ticket[2 * t + slot] = r;
      __threadfence();
      cudaError_t e =
          cudaGraphLaunch(s->work[2 * t + slot], cudaStreamGraphFireAndForget);
      if (e != cudaSuccess) {
        atomicCAS(s->error, 0, (int)e);
        quit = 1;
      }
      atomicAdd((int *)&count, 1);
    }
    if (lane == 0 && *s->stop) quit = 1;
    __syncwarp();
    bool end = quit || count >= limit;
    __syncwarp();
    if (end) {
      if (lane == 0) {
        atomicAdd(s->launches, (u64)count);
        if (!quit) {
          cudaError_t e = cudaGraphLaunch(cudaGetCurrentGraphExec(),
                                          cudaStreamGraphTailLaunch);
          if (e != cudaSuccess) atomicCAS(s->error, 0, 1000 + (int)e);
        }
      }
      return;
    }
  }
}

struct Host {
  u64 *words;  // host-mapped: requests at [0, 64 * 8), done at [64 * 8, ...)
  u64 *words_dev;
  int *flags;  // host-mapped: stop, error
  int *flags_dev;
};

static volatile u64 *request_word(Host &h, int t) {
  return h.words + kStride * t;
}
static volatile u64 *done_word(Host &h, int t) {
  return h.words + kStride * (kMaxTenants + t);
}

// Device issue: the work graphs, the scheduler graph, launched once.
struct Device {
  cudaStream_t stream;
  cudaGraphExec_t work[2 * kMaxTenants];
  cudaGraphExec_t sched;
  Sched *params;
  u64 *device_words;  // ticket, seen, launches, runs
};

static void device_start(Device &d, Host &h, int tenants, u64 ns, int per_run) {
  CK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
  CK(cudaMalloc(&d.device_words, sizeof(u64) * (4 * kMaxTenants + 2)));
  CK(cudaMemset(d.device_words, 0, sizeof(u64) * (4 * kMaxTenants + 2)));
  u64 *ticket = d.device_words;
  u64 *seen = d.device_words + 2 * kMaxTenants;
  u64 *counters = d.device_words + 4 * kMaxTenants;
  for (int t = 0; t < tenants; ++t) {
    for (int slot = 0; slot < 2; ++slot) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeThreadLocal));
      spin<<<1, 32, 0, d.stream>>>(ns);
      finish<<<1, 1, 0, d.stream>>>(ticket + 2 * t + slot,
                                    h.words_dev + kStride * (kMaxTenants + t));
      CK(cudaStreamEndCapture(d.stream, &g));
      CK(cudaGraphInstantiate(&d.work[2 * t + slot], g,
                              cudaGraphInstantiateFlagDeviceLaunch));
      CK(cudaGraphUpload(d.work[2 * t + slot], d.stream));
      CK(cudaGraphDestroy(g));
    }
  }
  cudaGraphExec_t *work_dev;
  CK(cudaMalloc(&work_dev, sizeof(d.work)));
  CK(cudaMemcpy(work_dev, d.work, sizeof(d.work), cudaMemcpyHostToDevice));
  Sched s = {};
  s.request = h.words_dev;
  s.ticket = ticket;
  s.work = work_dev;
  s.seen = seen;
  s.stop = h.flags_dev;
  s.error = h.flags_dev + 1;
  s.launches = counters;
  s.runs = counters + 1;
  s.tenants = tenants;
  s.per_run = per_run;
  CK(cudaMalloc(&d.params, sizeof(s)));
  CK(cudaMemcpy(d.params, &s, sizeof(s), cudaMemcpyHostToDevice));
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeThreadLocal));
  scheduler<<<1, 32, 0, d.stream>>>(d.params);
  CK(cudaStreamEndCapture(d.stream, &g));
  CK(cudaGraphInstantiate(&d.sched, g, cudaGraphInstantiateFlagDeviceLaunch));
  CK(cudaGraphUpload(d.sched, d.stream));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamSynchronize(d.stream));
  CK(cudaGraphLaunch(d.sched, d.stream));
}

// Returns the launches counted; prints the error if any.
static u64 device_stop(Device &d, Host &h) {
  ((volatile int *)h.flags)[0] = 1;
  CK(cudaStreamSynchronize(d.stream));
  u64 counters[2];
  CK(cudaMemcpy(counters, d.device_words + 4 * kMaxTenants, sizeof(counters),
                cudaMemcpyDeviceToHost));
  int error = ((volatile int *)h.flags)[1];
  if (error) {
    printf("  device launch failed: %d (%s)\n", error,
           cudaGetErrorString((cudaError_t)(error % 1000)));
  }
  for (int i = 0; i < 2 * kMaxTenants; ++i) {
    if (d.work[i]) CK(cudaGraphExecDestroy(d.work[i]));
  }
  CK(cudaGraphExecDestroy(d.sched));
  CK(cudaFree(d.params));
  CK(cudaFree(d.device_words));
  CK(cudaStreamDestroy(d.stream));
  ((volatile int *)h.flags)[0] = 0;
  ((volatile int *)h.flags)[1] = 0;
  return counters[0];
}

// Host issue: a stream and a 1-kernel graph per tenant.
struct HostTenant {
  cudaStream_t stream;
  cudaGraphExec_t exec;
};

static void host_make(HostTenant &ht, u64 ns) {
  CK(cudaStreamCreateWithFlags(&ht.stream, cudaStreamNonBlocking));
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(ht.stream, cudaStreamCaptureModeThreadLocal));
  spin<<<1, 32, 0, ht.stream>>>(ns);
  CK(cudaStreamEndCapture(ht.stream, &g));
  CK(cudaGraphInstantiate(&ht.exec, g, 0));
  CK(cudaGraphDestroy(g));
}

static void host_step(HostTenant &ht, Host &h, int t, u64 value) {
  CK(cudaGraphLaunch(ht.exec, ht.stream));
  CD(cuStreamWriteValue64(
      (CUstream)ht.stream,
      (CUdeviceptr)(h.words_dev + kStride * (kMaxTenants + t)), value, 0));
}

enum Mode { HOST = 0, DEVICE = 1 };
static const char *mode_names[] = {"host issue (graph + cuStreamWriteValue64)",
                                   "device issue (fire-and-forget)"};

// A closed loop per tenant for |seconds|: steps/s of all, and p50 step.
static void run(Mode mode, int tenants, u64 ns, double seconds, int per_run,
                Host &h, double *rate, double *p50_us) {
  memset(h.words, 0, sizeof(u64) * kStride * 2 * kMaxTenants);
  Device d = {};
  std::vector<HostTenant> hosts(tenants);
  if (mode == HOST) {
    for (auto &ht : hosts) host_make(ht, ns);
  } else {
    device_start(d, h, tenants, ns, per_run);
  }
  std::atomic<bool> go{false}, halt{false};
  std::vector<u64> steps(tenants);
  std::vector<std::vector<float>> lat(tenants);
  std::vector<std::thread> threads;
  int device;
  CK(cudaGetDevice(&device));
  for (int t = 0; t < tenants; ++t) {
    threads.emplace_back([&, t] {
      CK(cudaSetDevice(device));
      lat[t].reserve(1 << 20);
      while (!go.load()) {
      }
      u64 value = 0;
      while (!halt.load(std::memory_order_relaxed)) {
        double a = now();
        ++value;
        if (mode == HOST) {
          host_step(hosts[t], h, t, value);
        } else {
          *request_word(h, t) = value;
        }
        while (*done_word(h, t) != value) {
          if (halt.load(std::memory_order_relaxed)) return;
        }
        if (lat[t].size() < lat[t].capacity()) {
          lat[t].push_back((float)(now() - a));
        }
        ++steps[t];
      }
    });
  }
  double elapsed = probe_run_for(go, halt, seconds);
  for (auto &th : threads) th.join();
  u64 total = probe_tally(steps, lat, elapsed, rate, p50_us);
  if (mode == HOST) {
    for (auto &ht : hosts) {
      CK(cudaStreamSynchronize(ht.stream));
      CK(cudaGraphExecDestroy(ht.exec));
      CK(cudaStreamDestroy(ht.stream));
    }
  } else {
    u64 launched = device_stop(d, h);
    if (launched + tenants < total) {
      printf("  launches %llu < steps %llu\n", launched, total);
    }
  }
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  int per_run = argc > 2 ? atoi(argv[2]) : 100;
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  Host h = {};
  CK(cudaHostAlloc(&h.words, sizeof(u64) * kStride * 2 * kMaxTenants,
                   cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer((void **)&h.words_dev, h.words, 0));
  CK(cudaHostAlloc(&h.flags, 64, cudaHostAllocMapped));
  memset(h.flags, 0, 64);
  CK(cudaHostGetDevicePointer((void **)&h.flags_dev, h.flags, 0));
  printf("scheduler ends and relaunches itself every %d launches%s\n", per_run,
         per_run ? "" : " (never)");
  for (int mode : {HOST, DEVICE}) {
    printf("%s\n", mode_names[mode]);
    for (u64 ns : {0ull, 20000ull}) {
      double rate, p50;
      run((Mode)mode, 1, ns, seconds / 2, per_run, h, &rate, &p50);
      printf("  1 tenant, %2llu us kernel: step p50 %6.2f us, %8.0f steps/s\n",
             ns / 1000, p50, rate);
    }
    for (int tenants : {8, 16, 64}) {
      double rate, p50;
      run((Mode)mode, tenants, 20000, seconds, per_run, h, &rate, &p50);
      printf("  %2d tenants, 20 us kernel: %8.0f steps/s, step p50 %6.2f us\n",
             tenants, rate, p50);
    }
  }
  return 0;
}
