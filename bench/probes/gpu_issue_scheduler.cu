// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The kernels of the ring-issue probe (gpu_issue_ring.cpp, which says how
// to build and run both): a scheduler that launches graph instances from
// the GPU as they are posted to a ring in host-mapped memory, a spin kernel
// and halo's completion store kernel. Compiled to PTX without -rdc: the
// device-side cudaGraphLaunch is a driver builtin, so the PTX loads with
// plain cuModuleLoadData.
//
// The ring (host-mapped 64-bit words): [0] stop (host), [1] head: entries
// taken (scheduler), [2] state: 1 running, 2 ending, 3 ended (scheduler),
// [3] a failed launch: (sequence << 16) | cudaError_t, sequence 0 for the
// scheduler's own tail launch (scheduler; the probe then stops),
// [5] starts (scheduler); entries from [8], (sequence, exec) pairs, the
// sequence of the i-th post (from 0) being i + 1.
#include <cuda_runtime.h>
typedef unsigned long long u64;
__device__ __forceinline__ u64 halo_now() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
extern "C" __global__ void halo_gpu_issue(volatile u64 *ring, u64 mask,
                                          u64 idle_ns, unsigned per_run) {
  // One warp. Each round lane i reads entry head + i (the host writes the
  // exec before the sequence); the run of posted entries from head is
  // launched by its lanes at once, at most |per_run| per execution of the
  // scheduler (a graph may launch at most 120 fire-and-forget graphs), after
  // which it tail-launches itself. It ends after |idle_ns| without a post.
  unsigned lane = threadIdx.x;
  u64 head = ring[1];
  unsigned launched = 0;
  if (lane == 0) {
    ring[5] = ring[5] + 1;
    ring[2] = 1;
    __threadfence_system();
  }
  __syncwarp();
  u64 idle_since = halo_now();
  for (;;) {
    u64 index = head + lane;
    const volatile u64 *entry = ring + 8 + 2 * (index & mask);
    // The sequence with acquire: the exec read after it is the one the
    // host wrote before it.
    u64 sequence;
    asm volatile("ld.acquire.sys.u64 %0, [%1];"
                 : "=l"(sequence)
                 : "l"(entry)
                 : "memory");
    bool posted = sequence == index + 1;
    unsigned ready = __ballot_sync(0xffffffffu, posted);
    unsigned run = ready == 0xffffffffu ? 32 : __ffs(~ready) - 1;
    if (run > per_run - launched) run = per_run - launched;
    if (run > 0) {
      int failed = 0;
      if (lane < run) {
        cudaGraphExec_t exec = (cudaGraphExec_t)entry[1];
        cudaError_t error = cudaGraphLaunch(exec, cudaStreamGraphFireAndForget);
        for (u64 t0 = halo_now();
             error == cudaErrorInvalidValue && halo_now() - t0 < 1000000;) {
          error = cudaGraphLaunch(exec, cudaStreamGraphFireAndForget);
        }
        if (error != cudaSuccess) {
          ring[3] = ((index + 1) << 16) | (u64)error;
          failed = 1;
        }
      }
      if (__any_sync(0xffffffffu, failed)) {
        if (lane == 0) ring[2] = 3;
        return;
      }
      head += run;
      launched += run;
      if (lane == 0) ring[1] = head;
      if (launched == per_run) {
        if (lane == 0) {
          cudaError_t error = cudaGraphLaunch(cudaGetCurrentGraphExec(),
                                              cudaStreamGraphTailLaunch);
          if (error != cudaSuccess) {
            ring[3] = (u64)error;  // sequence 0: the scheduler's own
            ring[2] = 3;
          }
        }
        return;
      }
      idle_since = halo_now();
      continue;
    }
    // Nothing posted at head: stop, or end after |idle_ns| idle. Before
    // ending, the state says so and the entry is read again: the host
    // reads the state after its post, so one of the two sees the other.
    if (ring[0] || halo_now() - idle_since > idle_ns) {
      int stay = 0;
      if (lane == 0) {
        ring[2] = 2;
        __threadfence_system();
        const volatile u64 *first = ring + 8 + 2 * (head & mask);
        if (!ring[0] && *first == head + 1) {
          ring[2] = 1;
          stay = 1;
        } else {
          ring[2] = 3;
        }
      }
      if (__shfl_sync(0xffffffffu, stay, 0)) continue;
      return;
    }
  }
}

// A kernel that spins |ns|, and halo's store kernel (a ticket: a count,
// then (address, value) pairs).
extern "C" __global__ void spin(u64 ns) {
  u64 t0 = halo_now();
  while (halo_now() - t0 < ns) {
  }
}
extern "C" __global__ void store_ticket(const volatile u64 *ticket) {
  u64 count = ticket[0];
  for (u64 i = 0; i < count && i < 7; ++i) {
    u64 address = ticket[1 + 2 * i];
    u64 value = ticket[2 + 2 * i];
    __threadfence_system();
    *(volatile u64 *)address = value;
  }
}
