// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A stand-alone probe (no halo code) of what one process issues when an
// execution's completion store is made on the stream (a graph launch, then
// cuStreamWriteValue64: what halo does while no task waits, or with
// HALO_CUDA_GRAPH_STORES=0), by a kernel node at the end of the graph
// reading the value from a ticket the host writes before the launch
// (halo's stores in the graph), by a batch mem-op node re-set before each
// launch, by the store kernel node behind a programmatic edge (launched
// once the kernel's blocks all began, or all finished, and waiting on the
// GPU with griddepcontrol.wait: sm_90), or with the store node disabled;
// and, in closed loops, the stream store made by a second thread while the
// first only launches (mode 8), and the store kernel reading its ticket's
// count and first pair at once, with and without its fence (9, 10: the
// fence only measured, never to be dropped); and without a graph: the
// kernel by cuLaunchKernel, then the store kernel launched with the value
// as its parameter (11) or cuStreamWriteValue64 (12), a one-dispatch
// recording's path without cuGraphLaunch; and a graph ending in an event
// record node, polled with cuEventQuery by the issuing thread (13) or by a
// relay thread that then stores the value as the store kernel would (15:
// halo's completion thread in place of the GPU's store), or in a memset
// node writing 1 into a word the host clears before the launch (14).
// It prints the host's issue cost per execution, the latency of one
// tenant's closed loop (0 and 20 us kernels), and the steps/s of 8 and 16
// tenants (20 us kernels) issued by one thread or by a thread each; the
// mem-op node is in all three.
// docs/performance.md quotes it. Not built by CMake (it needs nvcc, and
// CUDA 13 for the edge-data cudaGraphAddDependencies); on a GPU machine:
//   nvcc -O2 -arch=sm_90 bench/probes/store_node.cu -lcuda -o /tmp/sn
//   /tmp/sn            (LAT_ONLY=1: the one-tenant latencies only;
//                       LOOPS="64:16:1:0 64:64:1:0": only those closed
//                       loops, K:STREAMS:MODE:THREADS; THREADS 0: one
//                       issuing thread, 1: a thread per tenant, N >= 2: N
//                       issuing threads, each polling a share of tenants)
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
__global__ void spin(u64 ns, u64 *out) {
  u64 t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
  if (threadIdx.x == 0 && out) *out = t;
}
// halo's store kernel: ticket = count, then (address, value) pairs.
__device__ void store_ticket(const volatile u64 *ticket) {
  u64 count = ticket[0];
  for (u64 i = 0; i < count && i < 7; ++i) {
    u64 address = ticket[1 + 2 * i];
    u64 value = ticket[2 + 2 * i];
    __threadfence_system();
    *(volatile u64 *)address = value;
  }
}
__global__ void store(const volatile u64 *ticket) {
  store_ticket(ticket);
}
// The ticket's first pair read with its count, before the count is known
// (a ticket always has room for it): one round trip over PCIe to the host's
// pinned ticket instead of two after another. |fence| 0 (no
// __threadfence_system before the store) only to measure the fence.
template <bool fence>
__global__ void store_eager(const volatile u64 *ticket) {
  u64 count = ticket[0];
  u64 address = ticket[1];
  u64 value = ticket[2];
  for (u64 i = 0; i < count && i < 7; ++i) {
    if (i > 0) {
      address = ticket[1 + 2 * i];
      value = ticket[2 + 2 * i];
    }
    if (fence) __threadfence_system();
    *(volatile u64 *)address = value;
  }
}
// The same, launched early through a programmatic edge (the user kernel's
// launch-completion or programmatic port): it waits for the kernel's
// completion and memory on the GPU (griddepcontrol.wait), which was to take
// its own launch off the latency (measured: 0.35-0.5 us of the node's 3 us
// saved with a 0 us kernel, none with a 20 us one).
__global__ void store_pdl(const volatile u64 *ticket) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  store_ticket(ticket);
}
// Without a graph: the store kernel launched after the kernel on the same
// stream, its address and value as parameters (no ticket).
__global__ void store_value(u64 address, u64 value) {
  __threadfence_system();
  *(volatile u64 *)address = value;
}
enum Mode {
  WRITE = 0,
  STORE_NODE = 1,
  MEMOP_SET = 2,
  EVENT = 3,
  STORE_OFF = 4,
  STORE_PDL = 5,
  STORE_PDL_PROG = 6,
  MEMOP_FIXED = 7,
  WRITE_SPLIT = 8,
  STORE_EAGER = 9,
  STORE_EAGER_NOFENCE = 10,
  LAUNCH_STORE = 11,
  LAUNCH_WRITE = 12,
  EVENT_NODE = 13,
  MEMSET_FIXED = 14,
  EVENT_RELAY = 15
};
static const char *names[] = {"graph + cuStreamWriteValue64",
                              "graph with store kernel node (ticket)",
                              "graph with memop node, SetParams per launch",
                              "graph + cuEventRecord",
                              "store node disabled + cuStreamWriteValue64",
                              "store node, programmatic edge (launch order)",
                              "store node, programmatic edge (programmatic)",
                              "graph with memop node writing 1, host resets",
                              "graph, cuStreamWriteValue64 on a 2nd thread",
                              "store node, count and first pair read at once",
                              "store node read at once, no fence (unsafe)",
                              "cuLaunchKernel + store kernel launch",
                              "cuLaunchKernel + cuStreamWriteValue64",
                              "graph with event record node, cuEventQuery",
                              "graph with memset node writing 1, host resets",
                              "event record node, a relay thread stores"};
struct T {
  cudaGraphExec_t exec;
  cudaGraph_t g;
  CUgraphNode memop;
  cudaGraphNode_t snode;
  cudaStream_t st;
  cudaEvent_t ev;
  volatile u64 *ticket;
  u64 *host_flag;
  CUdeviceptr dev_flag;
  CUcontext ctx;
  u64 ns;  // LAUNCH_*: the spin kernel's parameters
  u64 *dev_out;
  CUfunction spin_function, store_function;
};
static void make(T &t, Mode m, u64 ns, u64 *dev_out, u64 *host_flag,
                 CUdeviceptr dev_flag, u64 *ticket_host,
                 CUdeviceptr ticket_dev) {
  CK(cudaStreamCreateWithFlags(&t.st, cudaStreamNonBlocking));
  CK(cudaEventCreateWithFlags(&t.ev, cudaEventDisableTiming));
  t.host_flag = host_flag;
  t.dev_flag = dev_flag;
  t.ticket = ticket_host;
  CD(cuCtxGetCurrent(&t.ctx));
  t.ns = ns;
  t.dev_out = dev_out;
  CK(cudaGetFuncBySymbol((cudaFunction_t *)&t.spin_function, (void *)spin));
  CK(cudaGetFuncBySymbol((cudaFunction_t *)&t.store_function,
                         (void *)store_value));
  CK(cudaGraphCreate(&t.g, 0));
  cudaKernelNodeParams p = {};
  void *args[2] = {&ns, &dev_out};
  p.func = (void *)spin;
  p.gridDim = dim3(1);
  p.blockDim = dim3(32);
  p.kernelParams = args;
  cudaGraphNode_t n;
  CK(cudaGraphAddKernelNode(&n, t.g, nullptr, 0, &p));
  bool pdl = m == STORE_PDL || m == STORE_PDL_PROG;
  bool eager = m == STORE_EAGER || m == STORE_EAGER_NOFENCE;
  if (m == STORE_NODE || m == STORE_OFF || pdl || eager) {
    // One thread of the store kernel: after the spin kernel, or (pdl) with
    // a programmatic edge from it, added below.
    cudaKernelNodeParams q = {};
    void *qa[1] = {&ticket_dev};
    q.func = pdl                        ? (void *)store_pdl
             : m == STORE_EAGER         ? (void *)store_eager<true>
             : m == STORE_EAGER_NOFENCE ? (void *)store_eager<false>
                                        : (void *)store;
    q.gridDim = dim3(1);
    q.blockDim = dim3(1);
    q.kernelParams = qa;
    CK(cudaGraphAddKernelNode(&t.snode, t.g, pdl ? nullptr : &n, pdl ? 0 : 1,
                              &q));
  }
  if (pdl) {
    cudaGraphEdgeData e = {};
    e.from_port = m == STORE_PDL ? cudaGraphKernelNodePortLaunchCompletion
                                 : cudaGraphKernelNodePortProgrammatic;
    e.type = cudaGraphDependencyTypeProgrammatic;
    CK(cudaGraphAddDependencies(t.g, &n, &t.snode, &e, 1));
  } else if (m == EVENT_NODE || m == EVENT_RELAY) {
    CUgraphNode dep = (CUgraphNode)n, node;
    CD(cuGraphAddEventRecordNode(&node, (CUgraph)t.g, &dep, 1, (CUevent)t.ev));
  } else if (m == MEMSET_FIXED) {
    cudaMemsetParams ms = {};
    ms.dst = (void *)dev_flag;
    ms.value = 1;
    ms.elementSize = 4;
    ms.width = 1;
    ms.height = 1;
    cudaGraphNode_t node;
    CK(cudaGraphAddMemsetNode(&node, t.g, &n, 1, &ms));
  } else if (m == MEMOP_SET || m == MEMOP_FIXED) {
    CUstreamBatchMemOpParams op = {};
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    op.writeValue.address = dev_flag;
    op.writeValue.value64 = 1;
    CUDA_BATCH_MEM_OP_NODE_PARAMS bp = {};
    bp.ctx = t.ctx;
    bp.count = 1;
    bp.paramArray = &op;
    CUgraphNode dep = (CUgraphNode)n;
    CD(cuGraphAddBatchMemOpNode(&t.memop, (CUgraph)t.g, &dep, 1, &bp));
  }
  CK(cudaGraphInstantiate(&t.exec, t.g, 0));
  if (m == STORE_OFF) CK(cudaGraphNodeSetEnabled(t.exec, t.snode, 0));
}
// Whether the execution that stored |value| (MEMOP_FIXED: the constant 1
// into the word the host set to 0 before its launch) has landed.
static bool landed(const T &t, Mode m, u64 value) {
  if (m == EVENT_NODE) {
    CUresult r = cuEventQuery((CUevent)t.ev);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) CD(r);
    return r == CUDA_SUCCESS;
  }
  u64 word = *(volatile u64 *)t.host_flag;
  return m == MEMOP_FIXED || m == MEMSET_FIXED ? word == 1 : word == value;
}
// WRITE_SPLIT: the issuing thread launches and hands each store to a
// second thread (one producer, one consumer), which makes the
// cuStreamWriteValue64 on the same stream: the stream store's latency
// without its call on the issuing thread.
struct Store {
  CUstream stream;
  CUdeviceptr address;
  u64 value;
};
static Store g_stores[4096];
static std::atomic<u64> g_store_head{0}, g_store_tail{0};
static std::atomic<bool> g_store_stop{false};
static void store_thread_main(CUcontext ctx) {
  CD(cuCtxSetCurrent(ctx));
  u64 tail = g_store_tail.load();
  while (!g_store_stop.load(std::memory_order_acquire)) {
    if (g_store_head.load(std::memory_order_acquire) == tail) continue;
    const Store &s = g_stores[tail % 4096];
    CD(cuStreamWriteValue64(s.stream, s.address, s.value, 0));
    g_store_tail.store(++tail, std::memory_order_release);
  }
}
static void issue(T &t, Mode m, u64 value) {
  if (m == LAUNCH_STORE || m == LAUNCH_WRITE) {
    void *a[2] = {&t.ns, &t.dev_out};
    CD(cuLaunchKernel(t.spin_function, 1, 1, 1, 32, 1, 1, 0, (CUstream)t.st, a,
                      nullptr));
    if (m == LAUNCH_STORE) {
      u64 address = (u64)t.dev_flag;
      void *b[2] = {&address, &value};
      CD(cuLaunchKernel(t.store_function, 1, 1, 1, 1, 1, 1, 0, (CUstream)t.st,
                        b, nullptr));
    } else {
      CD(cuStreamWriteValue64((CUstream)t.st, t.dev_flag, value, 0));
    }
    return;
  }
  if (m == MEMOP_FIXED || m == MEMSET_FIXED) *(volatile u64 *)t.host_flag = 0;
  if (m == STORE_NODE || m == STORE_PDL || m == STORE_PDL_PROG ||
      m == STORE_EAGER || m == STORE_EAGER_NOFENCE) {
    t.ticket[0] = 1;
    t.ticket[1] = (u64)t.dev_flag;
    t.ticket[2] = value;
  }
  if (m == MEMOP_SET) {
    CUstreamBatchMemOpParams op = {};
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    op.writeValue.address = t.dev_flag;
    op.writeValue.value64 = value;
    CUDA_BATCH_MEM_OP_NODE_PARAMS bp = {};
    bp.ctx = t.ctx;
    bp.count = 1;
    bp.paramArray = &op;
    CD(cuGraphExecBatchMemOpNodeSetParams((CUgraphExec)t.exec, t.memop, &bp));
  }
  CK(cudaGraphLaunch(t.exec, t.st));
  if (m == WRITE || m == STORE_OFF)
    CD(cuStreamWriteValue64((CUstream)t.st, t.dev_flag, value, 0));
  if (m == WRITE_SPLIT) {
    u64 head = g_store_head.load(std::memory_order_relaxed);
    while (head - g_store_tail.load(std::memory_order_acquire) >= 4096) {
    }
    g_stores[head % 4096] = {(CUstream)t.st, t.dev_flag, value};
    g_store_head.store(head + 1, std::memory_order_release);
  }
  if (m == EVENT) CK(cudaEventRecord(t.ev, t.st));
  // EVENT_RELAY: the launch recorded the event; the relay may now copy
  // |value| to the word once the event is reached.
  if (m == EVENT_RELAY)
    __atomic_store_n(&((u64 *)t.ticket)[3], value, __ATOMIC_RELEASE);
}
// EVENT_RELAY: a second thread (halo's completion thread) polls each
// tenant's event after its launch and stores the launched value into the
// tenant's word (the semaphore page), as the store kernel would.
static std::atomic<bool> g_relay_stop{false};
static void relay_main(std::vector<T> *ts) {
  CD(cuCtxSetCurrent((*ts)[0].ctx));
  std::vector<u64> relayed(ts->size(), 0);
  while (!g_relay_stop.load(std::memory_order_acquire)) {
    for (size_t i = 0; i < ts->size(); ++i) {
      T &t = (*ts)[i];
      u64 launched = __atomic_load_n(&((u64 *)t.ticket)[3], __ATOMIC_ACQUIRE);
      if (launched == relayed[i]) continue;
      CUresult r = cuEventQuery((CUevent)t.ev);
      if (r == CUDA_ERROR_NOT_READY) continue;
      CD(r);
      *(volatile u64 *)t.host_flag = launched;
      relayed[i] = launched;
    }
  }
}
// A closed loop of 20 us kernels for 1.5 s: K tenants, each its own graph,
// on S streams (tenant i on stream i % S: queues sharing a stream, as
// halo's pool does past its streams); issued by one thread (halo's model),
// by THREADS threads each polling a share of the tenants, or by a thread
// each (THREADS 1).
template <class F1, class F2, class F3, class F4>
static void closed_loop(int K, int S, Mode m, int threads, u64 *dev, F1 flag,
                        F2 flagd, F3 tick, F4 tickd, u64 *host) {
  CK(cudaDeviceSynchronize());
  memset(host, 0, 1 << 20);
  std::vector<T> ts(K);
  for (int i = 0; i < K; i++)
    make(ts[i], m, 20000, dev + 64 * i, flag(1 + i), flagd(1 + i),
         (u64 *)tick(1 + i), tickd(1 + i));
  std::vector<cudaStream_t> own(K);
  for (int i = 0; i < K; i++) {
    own[i] = ts[i].st;
    if (S < K) ts[i].st = own[i % S];
  }
  std::thread storer, relay;
  if (m == EVENT_RELAY) {
    g_relay_stop = false;
    relay = std::thread(relay_main, &ts);
  }
  if (m == WRITE_SPLIT) {
    g_store_head = 0;
    g_store_tail = 0;
    g_store_stop = false;
    storer = std::thread(store_thread_main, ts[0].ctx);
  }
  double dur = 1.5, start = now();
  std::atomic<long> done{0};
  if (threads != 1) {
    // One issuing thread (0), or |threads| of them, thread j polling and
    // issuing tenants j, j + threads, ... (a submission thread each for a
    // share of the queues).
    int pollers = threads ? threads : 1;
    std::vector<std::thread> th;
    for (int j = 0; j < pollers; j++)
      th.emplace_back([&, j] {
        std::vector<u64> want(K, 0);
        long c = 0;
        for (int i = j; i < K; i += pollers) {
          want[i] = 1;
          issue(ts[i], m, 1);
        }
        while (now() - start < dur) {
          for (int i = j; i < K; i += pollers)
            if (landed(ts[i], m, want[i])) {
              c++;
              issue(ts[i], m, ++want[i]);
            }
        }
        done += c;
      });
    for (auto &x : th) x.join();
  } else {
    std::vector<std::thread> th;
    for (int i = 0; i < K; i++)
      th.emplace_back([&, i] {
        long c = 0;
        u64 v = 0;
        while (now() - start < dur) {
          issue(ts[i], m, ++v);
          while (!landed(ts[i], m, v)) {
          }
          c++;
        }
        done += c;
      });
    for (auto &x : th) x.join();
  }
  if (m == WRITE_SPLIT) {
    while (g_store_tail.load() != g_store_head.load()) {
    }
    g_store_stop = true;
    storer.join();
  }
  if (m == EVENT_RELAY) {
    g_relay_stop = true;
    relay.join();
  }
  CK(cudaDeviceSynchronize());
  char issuers[32];
  snprintf(issuers, sizeof(issuers), "%d threads", threads);
  printf("closed loop %2d tenants on %2d streams, %-44s %-13s: %9.0f steps/s\n",
         K, S < K ? S : K, names[m],
         threads == 0   ? "one thread"
         : threads == 1 ? "a thread each"
                        : issuers,
         done / dur);
  for (int i = 0; i < K; i++) {
    CK(cudaGraphExecDestroy(ts[i].exec));
    CK(cudaGraphDestroy(ts[i].g));
    CK(cudaStreamDestroy(own[i]));
  }
}
int main(int argc, char **argv) {
  int N = argc > 1 ? atoi(argv[1]) : 20000;
  CK(cudaFree(0));
  u64 *dev;
  CK(cudaMalloc(&dev, 4096 * 8));
  u64 *host;
  CK(cudaHostAlloc(&host, 1 << 20, cudaHostAllocMapped));
  CUdeviceptr hostd;
  CK(cudaHostGetDevicePointer((void **)&hostd, host, 0));
  // flags at host[0..511], tickets at host[4096 + 64*i]
  auto flag = [&](int i) { return host + 8 * i; };
  auto flagd = [&](int i) { return hostd + 64 * i; };
  auto tick = [&](int i) { return host + 4096 + 64 * i; };
  auto tickd = [&](int i) { return hostd + 8 * (4096 + 64 * i); };
  // LOOPS="K:S:MODE:THREADS ...": only these closed loops (K tenants on S
  // streams); else 8 and 16 tenants, each its own stream, in every mode
  // that stores, from one thread and from a thread each.
  if (const char *loops = getenv("LOOPS")) {
    for (const char *p = loops; *p;) {
      int K, S, m, threads, used = 0;
      // At most 64 tenants (the buffers above), 1..K streams, a mode that
      // stores (0-2, 4-15: not 3, the event; 8 only with one
      // issuing thread: its store thread takes from one producer).
      if (sscanf(p, "%d:%d:%d:%d%n", &K, &S, &m, &threads, &used) != 4 ||
          K < 1 || K > 64 || S < 1 || S > K || m < 0 || m > 15 || m == 3 ||
          threads < 0 || threads > K || (m == 8 && threads != 0)) {
        fprintf(stderr,
                "LOOPS: '%s' is not K:S:MODE:THREADS with 1 <= K "
                "<= 64, 1 <= S <= K, a storing mode and 0 <= THREADS <= K "
                "(mode 8: THREADS 0)\n",
                p);
        return 2;
      }
      closed_loop(K, S, (Mode)m, threads, dev, flag, flagd, tick, tickd, host);
      p += used;
      while (*p == ' ') ++p;
    }
    return 0;
  }
  for (int m : {0, 1, 2, 3, 5, 7, 11, 12, 13,
                14}) {  // host issue cost, 0 ns kernel, sync every 256
    T t;
    make(t, (Mode)m, 0, dev, flag(0), flagd(0), (u64 *)tick(0), tickd(0));
    issue(t, (Mode)m, 1);
    CK(cudaStreamSynchronize(t.st));
    double t0 = now();
    for (int i = 0; i < N; i++) {
      issue(t, (Mode)m, i + 2);
      if (i % 256 == 255) CK(cudaStreamSynchronize(t.st));
    }
    CK(cudaStreamSynchronize(t.st));
    double us = 1e6 * (now() - t0) / N;
    printf("issue cost %-48s %6.3f us (last value %llu, want %d)\n", names[m],
           us, m != 3 && m != 13 && m != 15 ? *(volatile u64 *)flag(0) : 0ull,
           m == 3 || m == 13   ? 0
           : m == 7 || m == 14 ? 1
                               : N + 1);
  }
  for (u64 ns : {0ull, 20000ull})
    for (int m : {0, 1, 2, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15}) {
      CK(cudaDeviceSynchronize());
      memset(host, 0, 1 << 20);
      T t;
      make(t, (Mode)m, ns, dev, flag(0), flagd(0), (u64 *)tick(0), tickd(0));
      std::vector<T> one(1, t);
      std::thread relay;
      if (m == EVENT_RELAY) {
        g_relay_stop = false;
        relay = std::thread(relay_main, &one);
      }
      u64 v = 0;
      std::vector<double> lat;
      for (int i = 0; i < 3000; i++) {
        double a = now();
        issue(t, (Mode)m, ++v);
        while (!landed(t, (Mode)m, v)) {
        }
        lat.push_back(now() - a);
      }
      if (m == EVENT_RELAY) {
        g_relay_stop = true;
        relay.join();
      }
      std::sort(lat.begin(), lat.end());
      printf("one tenant, %5llu ns kernel, %-44s p50 %6.2f us  p99 %6.2f us\n",
             ns, names[m], 1e6 * lat[lat.size() / 2],
             1e6 * lat[lat.size() * 99 / 100]);
    }
  if (getenv("LAT_ONLY")) return 0;
  for (int K : {8, 16})
    for (int m : {0, 1, 2, 5, 7, 11, 12, 13, 14, 15})
      for (int threads = 0; threads < 2; threads++)
        closed_loop(K, K, (Mode)m, threads, dev, flag, flagd, tick, tickd,
                    host);
  return 0;
}
