// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-bench-cuda: the CUDA driver's costs beside native driver-API
// baselines measured in the same run, in the same process, on the same GPU.
//
//   halo-bench-cuda [--iterations N] [--steps N] [--completion MODE]
//   halo-bench-cuda --address ADDR [--label TEXT] [--iterations N]
//                   [--steps N]
//
// Without --address (in process, no daemon): the HAL's CUDA device is
// created here for each completion path (MODE: thread, host_func or both,
// the default) and driven as halod drives it: queue execute() on this
// thread (what halod's loop thread does after validating a request), the
// execution's completion callback on a driver thread, the GPU's store of the
// signal value into a registered host page. The native baselines use the
// same context, the same CUfunctions and the same symbol table (plain
// driver API calls, no halo code in between).
//
// Cases (microseconds; p50, p99, mean over the iterations after a warm-up):
//   small kernel, submit -> observed completion (one block of 32 threads):
//     native launch+sync     cuLaunchKernel + cuStreamSynchronize
//     native launch+store    cuLaunchKernel + cuStreamWriteValue64 into a
//                            registered host page, host spins on the word
//     halo GPU store seen    execute() until this thread sees the value the
//                            GPU stored into the semaphore page
//     halo completion        execute() until the completion callback ran
//                            (back to back, so the executions take the
//                            submission thread; on an idle device execute()
//                            may issue and wait for one itself, as in the
//                            two-queue case below)
//   one execution's driver calls: what halo's submission thread issues for
//   one execution of a one-node recording whose binding changed
//   (cuGraphExecKernelNodeSetParams, cuGraphLaunch, cuStreamWriteValue64,
//   cuEventRecord, cuEventQuery), each call's CPU time; then the same five
//   calls issued by T = 1, 2, 4, 8 threads of the one context, each with its
//   own stream and graph: steps issued per second in all (the streams are
//   drained every 64 steps) and CPU per step. --calls-only stops after it.
//   two queues: the same small kernel on queue B, submitted while queue A
//   runs a 2 ms kernel (submitted 200 us before); B's execute() until B's
//   completion callback. Queues are unordered: B must not wait for A.
//   Each iteration then steps the native small kernel beside a 2 ms kernel
//   and alone (launch + synchronize), so that the anchors see the same CPU
//   as B's figure: "native launch+sync, same loop" and "native beside a 2
//   ms kernel, same loop" under each case.
//   1000-dispatch command buffer, a chain (a barrier between dispatches,
//   one block of 128 threads each), 16 bindings, all 16 changed every step
//   (two sets of 16 buffers, alternating), submit -> completion per step:
//     native stream          1000 cuLaunchKernel + cuStreamSynchronize
//     native graph           cuGraphLaunch of the chain (fixed addresses)
//     native graph+SetParams every node re-pointed, then cuGraphLaunch;
//                            also with the completion seen through an
//                            event (cuEventSynchronize, as halo's
//                            completion thread sees it), and with SetParams
//                            and launch done by a thread woken for each
//                            step (as halo's submission thread)
//     native graph+table     the table kernels, 16 addresses copied
//                            (cuMemcpyHtoDAsync from pinned), cuGraphLaunch
//     halo SetParams         the recording with indirect BUFFER arguments
//     halo binding table     the recording with BINDING_TABLE arguments
//                            (each also until the GPU's store of its
//                            signal was seen, before the completion path)
//
// With --address: the same recordings through a running halod (libhalo,
// nng control plane): halo_queue_execute + halo_semaphore_wait, and the
// small kernel also with a client spinning on halo_semaphore_query (it sees
// the GPU's store). --label names the daemon's setting in the output, and
// halod's CPU per execution (/proc/PID of halo_client_daemon_pid) is
// reported for each case.
//
// --csv FILE appends every figure as a row of bench_common.h's CSV
// (workload L1 for the small kernel, S1 for the chain; scripts/gpu-bench).
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "hal/cuda/cuda_device.h"
#include "hal/device.h"
#include "halo/halo.h"

static const char kKernels[] =
    "extern \"C\" __global__ void tiny(float *p) {\n"
    "  if (threadIdx.x == 0) p[0] += 1.0f;\n"
    "}\n"
    "extern \"C\" __global__ void step(const float *x, float *y) {\n"
    "  y[threadIdx.x] = x[threadIdx.x] * 0.5f + 1.0f;\n"
    "}\n"
    "extern \"C\" __global__ void step_table(\n"
    "    const unsigned long long *table, unsigned x, unsigned y) {\n"
    "  const float *in = (const float *)table[x];\n"
    "  float *out = (float *)table[y];\n"
    "  out[threadIdx.x] = in[threadIdx.x] * 0.5f + 1.0f;\n"
    "}\n"
    // y = a * x after |ns| of the GPU's global timer (the two-queue case).
    "extern \"C\" __global__ void slow_scale(const float *x, float *y,\n"
    "                                        float a, unsigned n,\n"
    "                                        unsigned long long ns) {\n"
    "  unsigned long long start, now;\n"
    "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(start));\n"
    "  do {\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(now));\n"
    "  } while (now - start < ns);\n"
    "  if (threadIdx.x < n) y[threadIdx.x] = a * x[threadIdx.x];\n"
    "}\n";

// With HALO_TEST_FAKE_CUDA=1 (and the fake libcuda.so.1 of
// tests/unit/hal_cuda_fake_driver.c on LD_LIBRARY_PATH) the kernels come
// from the fake's library instead: a smoke test without a GPU, whose
// figures mean nothing.
static halo_hal_executable_params_t bench_kernel_params(void) {
  static uint8_t fake_image[BENCH_FAKE_IMAGE_SIZE];
  halo_hal_executable_params_t params = {
      .format = HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE,
      .data = kKernels,
      .size = sizeof(kKernels) - 1,
  };
  const char *fake = getenv("HALO_TEST_FAKE_CUDA");
  if (fake && strcmp(fake, "1") == 0) {
    bench_fake_image(fake_image, 0);
    params.format = HALO_HAL_EXECUTABLE_FORMAT_CUBIN;
    params.data = fake_image;
    params.size = sizeof(fake_image);
  }
  return params;
}

#define CHAIN 1000u
#define SLOTS 16u
#define STEP_THREADS 128u

static struct {
  int iterations;
  int steps;
  const char *completion;
  const char *address;
  const char *label;
  const char *csv;
  bool calls_only;
} options = {.iterations = 2000, .steps = 200, .completion = "both"};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void die(const char *what, halo_status_t status) {
  fprintf(stderr, "halo-bench-cuda: %s: %s: %s\n", what,
          halo_status_code_name(halo_status_code(status)),
          halo_status_message(status));
  exit(1);
}
#define CHECK(what, expr)                        \
  do {                                           \
    halo_status_t check__status = (expr);        \
    if (check__status) die(what, check__status); \
  } while (0)

static const halo_hal_cuda_symbols_t *cu;

static void cu_check(CUresult result, const char *call) {
  if (result != CUDA_SUCCESS) {
    die("driver call", halo_hal_cuda_result_to_status(cu, result, call));
  }
}
#define CU(call, ...) cu_check(cu->call(__VA_ARGS__), #call)

//===----------------------------------------------------------------------===//
// Samples
//===----------------------------------------------------------------------===//

typedef struct samples_t {
  double *us;
  int count;
} samples_t;

static samples_t samples_new(int capacity) {
  samples_t samples = {.us = calloc((size_t)capacity, sizeof(double))};
  if (!samples.us)
    die("samples", halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom"));
  return samples;
}

static void samples_add(samples_t *samples, int64_t ns) {
  samples->us[samples->count++] = (double)ns / 1000.0;
}

typedef struct summary_t {
  double p50, p99, mean, min;
} summary_t;

// The last case not indented (the CSV names an indented case after it).
static char csv_case[96];

// Prints (and writes to the CSV) a case; |daemon_cpu_us| (NAN: none) is
// halod's CPU per sample.
static summary_t samples_report_cpu(const char *name, samples_t *samples,
                                    double daemon_cpu_us) {
  summary_t summary = {0};
  if (samples->count == 0) return summary;
  bench_summary_t all = bench_summarize(samples->us, samples->count);
  summary = (summary_t){all.p50, all.p99, all.mean, all.min};
  printf("  %-44s %6d %10.1f %10.1f %10.1f %10.1f\n", name, samples->count,
         summary.p50, summary.p99, summary.mean, summary.min);
  if (!isnan(daemon_cpu_us)) {
    printf("    %-42s %17.1f\n", "halod CPU per execution", daemon_cpu_us);
  }
  fflush(stdout);
  char csv_name[160];
  if (name[0] == ' ') {
    snprintf(csv_name, sizeof(csv_name), "%s / %s", csv_case, name + 2);
  } else {
    snprintf(csv_case, sizeof(csv_case), "%s", name);
    snprintf(csv_name, sizeof(csv_name), "%s", name);
  }
  // S1: the chain's cases; L1: the small kernel's.
  bool chain = strstr(csv_name, "16 changed") || strstr(csv_name, "graph") ||
               strstr(csv_name, "1000");
  bench_row_t row = bench_row(chain ? "S1" : "L1", csv_name,
                              strncmp(name, "halod", 5) == 0   ? "halod"
                              : strncmp(name, "halo ", 5) == 0 ? "hal"
                                                               : "native");
  row.clients = 1;
  row.n = samples->count;
  row.p50_us = all.p50;
  row.p99_us = all.p99;
  row.mean_us = all.mean;
  row.per_second = 1e6 / all.mean;
  row.daemon_cpu_us = daemon_cpu_us;
  bench_csv_write(&row);
  free(samples->us);
  samples->us = NULL;
  return summary;
}

static summary_t samples_report(const char *name, samples_t *samples) {
  return samples_report_cpu(name, samples, NAN);
}

// halod's CPU time since |since| (bench_process_cpu_ns), per one of |count|
// samples; NAN if it cannot be read.
static double daemon_cpu_per(pid_t pid, int64_t since, int count) {
  int64_t now = pid > 0 ? bench_process_cpu_ns(pid) : -1;
  if (now < 0 || since < 0 || count <= 0) return NAN;
  return (double)(now - since) / 1e3 / count;
}

static void header(const char *title) {
  printf("\n%s\n  %-44s %6s %10s %10s %10s %10s\n", title, "case (us)", "n",
         "p50", "p99", "mean", "min");
}

//===----------------------------------------------------------------------===//
// In process: the HAL's CUDA device and native baselines
//===----------------------------------------------------------------------===//

typedef struct bench_device_t {
  halo_hal_device_t *device;
  halo_hal_cuda_device_t *cuda;
  halo_hal_allocator_t *allocator;
  halo_hal_executable_t *executable;
  uint32_t tiny, step, step_table, slow_scale;  // entry ordinals
  CUfunction tiny_function, step_function, step_table_function;
  uint64_t counter;         // tiny's float
  uint64_t sets[2][SLOTS];  // the chain's buffers
  volatile uint64_t *page;  // registered host page (GPU stores)
  uint64_t page_address;
} bench_device_t;

static void bench_device_open(bench_device_t *bench,
                              halo_hal_cuda_completion_mode_t mode) {
  memset(bench, 0, sizeof(*bench));
  halo_hal_cuda_device_options_t device_options;
  memset(&device_options, 0, sizeof(device_options));
  device_options.completion = mode;
  CHECK("creating the CUDA device",
        halo_hal_cuda_device_create(0, &device_options, &bench->device));
  bench->cuda = halo_hal_cuda_device_cast(bench->device);
  bench->allocator = bench->device->allocator;
  CHECK("make current", halo_hal_cuda_device_make_current(bench->cuda));
  halo_hal_executable_params_t params = bench_kernel_params();
  CHECK("compiling the kernels",
        bench->device->vtable->create_executable(bench->device, &params,
                                                 &bench->executable));
  const char *names[3] = {"tiny", "step", "step_table"};
  uint32_t *ordinals[3] = {&bench->tiny, &bench->step, &bench->step_table};
  CUfunction *functions[3] = {&bench->tiny_function, &bench->step_function,
                              &bench->step_table_function};
  for (int i = 0; i < 3; ++i) {
    halo_hal_entry_info_t info;
    CHECK(names[i],
          halo_hal_executable_lookup_entry(bench->executable, names[i], &info));
    *ordinals[i] = info.ordinal;
    CHECK(names[i], halo_hal_cuda_executable_function(
                        bench->executable, info.ordinal, functions[i]));
  }
  halo_hal_entry_info_t slow_info;
  CHECK("slow_scale", halo_hal_executable_lookup_entry(
                          bench->executable, "slow_scale", &slow_info));
  bench->slow_scale = slow_info.ordinal;
  CHECK("allocate", bench->allocator->vtable->allocate(bench->allocator, 256,
                                                       &bench->counter));
  for (int s = 0; s < 2; ++s) {
    for (uint32_t i = 0; i < SLOTS; ++i) {
      CHECK("allocate", bench->allocator->vtable->allocate(
                            bench->allocator, STEP_THREADS * sizeof(float),
                            &bench->sets[s][i]));
    }
  }
  void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    die("mmap", halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "mmap"));
  }
  bench->page = page;
  CHECK("register_host",
        bench->allocator->vtable->register_host(bench->allocator, page, 4096,
                                                -1, &bench->page_address));
}

static void bench_device_close(bench_device_t *bench) {
  bench->allocator->vtable->unregister_host(bench->allocator,
                                            (void *)bench->page);
  bench->allocator->vtable->deallocate(bench->allocator, bench->counter, 256);
  for (int s = 0; s < 2; ++s) {
    for (uint32_t i = 0; i < SLOTS; ++i) {
      bench->allocator->vtable->deallocate(bench->allocator, bench->sets[s][i],
                                           STEP_THREADS * sizeof(float));
    }
  }
  halo_hal_executable_destroy(bench->executable);
  bench->device->vtable->destroy(bench->device);
  munmap((void *)bench->page, 4096);
}

static void spin_us(int64_t us) {
  int64_t until = now_ns() + us * 1000;
  while (now_ns() < until) {
  }
}

// ---- native baselines

// The native small kernel's launch + synchronize, alone or beside a 2 ms
// kernel on another stream (launched 200 us before, as queue A's in
// halo_two_queues): queue B's anchors. Stepped by the same loop as halo's
// queue B too, so that both see the same CPU (a process's launches are
// 1-5 us slower on some of the machine's CPUs than on others, for the
// whole run).
typedef struct native_pair_t {
  CUstream stream, busy;
  CUfunction tiny, slow;
  CUdeviceptr counter, x, y;
  float a;
  uint32_t n;
  uint64_t long_ns;
} native_pair_t;

static void native_pair_open(native_pair_t *pair, bench_device_t *bench) {
  *pair = (native_pair_t){.tiny = bench->tiny_function,
                          .counter = bench->counter,
                          .x = bench->sets[1][0],
                          .y = bench->sets[1][1],
                          .a = 0.5f,
                          .n = 32,
                          .long_ns = 2000000};
  CHECK("slow_scale", halo_hal_cuda_executable_function(
                          bench->executable, bench->slow_scale, &pair->slow));
  CU(cuStreamCreateWithPriority, &pair->stream, CU_STREAM_NON_BLOCKING, 0);
  CU(cuStreamCreateWithPriority, &pair->busy, CU_STREAM_NON_BLOCKING, 0);
}

// One launch + synchronize of the small kernel (|beside|: while the 2 ms
// kernel runs), in nanoseconds; returns once the 2 ms kernel finished too.
static int64_t native_pair_step(native_pair_t *pair, bool beside) {
  if (beside) {
    void *slow_params[5] = {&pair->x, &pair->y, &pair->a, &pair->n,
                            &pair->long_ns};
    CU(cuLaunchKernel, pair->slow, 1, 1, 1, 32, 1, 1, 0, pair->busy,
       slow_params, NULL);
    spin_us(200);
  }
  void *params[1] = {&pair->counter};
  int64_t start = now_ns();
  CU(cuLaunchKernel, pair->tiny, 1, 1, 1, 32, 1, 1, 0, pair->stream, params,
     NULL);
  CU(cuStreamSynchronize, pair->stream);
  int64_t took = now_ns() - start;
  if (beside) CU(cuStreamSynchronize, pair->busy);
  return took;
}

static void native_pair_close(native_pair_t *pair) {
  CU(cuStreamDestroy, pair->busy);
  CU(cuStreamDestroy, pair->stream);
}

static void native_small_kernel(bench_device_t *bench) {
  CUstream stream;
  CU(cuStreamCreateWithPriority, &stream, CU_STREAM_NON_BLOCKING, 0);
  void *params[1] = {&bench->counter};
  int warmup = options.iterations / 10 + 10;
  samples_t sync = samples_new(options.iterations);
  samples_t store = samples_new(options.iterations);
  for (int i = -warmup; i < options.iterations; ++i) {
    int64_t start = now_ns();
    CU(cuLaunchKernel, bench->tiny_function, 1, 1, 1, 32, 1, 1, 0, stream,
       params, NULL);
    CU(cuStreamSynchronize, stream);
    if (i >= 0) samples_add(&sync, now_ns() - start);
  }
  volatile uint64_t *word = &bench->page[8];
  for (int i = -warmup; i < options.iterations; ++i) {
    uint64_t value = (uint64_t)(i + warmup + 1);
    int64_t start = now_ns();
    CU(cuLaunchKernel, bench->tiny_function, 1, 1, 1, 32, 1, 1, 0, stream,
       params, NULL);
    CU(cuStreamWriteValue64, stream, (CUdeviceptr)(bench->page_address + 64),
       value, CU_STREAM_WRITE_VALUE_DEFAULT);
    while (atomic_load_explicit((_Atomic uint64_t *)word,
                                memory_order_acquire) < value) {
    }
    if (i >= 0) samples_add(&store, now_ns() - start);
  }
  CU(cuStreamSynchronize, stream);
  CU(cuStreamDestroy, stream);
  // queue B's anchor in the same conditions: the small kernel launched and
  // synchronized on one stream while a 2 ms kernel runs on another.
  native_pair_t pair;
  native_pair_open(&pair, bench);
  int rounds = options.iterations < 300 ? options.iterations : 300;
  samples_t beside = samples_new(rounds);
  for (int i = -5; i < rounds; ++i) {
    int64_t ns = native_pair_step(&pair, true);
    if (i >= 0) samples_add(&beside, ns);
  }
  native_pair_close(&pair);
  samples_report("native launch+sync", &sync);
  samples_report("native launch+store, host spins", &store);
  samples_report("native launch+sync while another stream runs 2 ms", &beside);
}

// ---- what one execution costs a submission thread in driver calls, and
// how that work scales over threads of one context

// One thread's graph (one tiny kernel node), stream and event.
typedef struct call_worker_t {
  bench_device_t *bench;
  CUstream stream;
  CUgraph graph;
  CUgraphNode node;
  CUgraphExec exec;
  CUevent event;
  uint64_t slot;  // device address of this worker's word on the page
  int steps;
  pthread_t thread;
  pthread_barrier_t *start;
  int64_t cpu_ns;  // issuing only
} call_worker_t;

// The tiny kernel on the counter, one block of 32 threads; |params| (one
// entry) must outlive the use of the result.
static CUDA_KERNEL_NODE_PARAMS call_node_params(bench_device_t *bench,
                                                void *params[1]) {
  CUDA_KERNEL_NODE_PARAMS node;
  memset(&node, 0, sizeof(node));
  params[0] = &bench->counter;
  node.func = bench->tiny_function;
  node.gridDimX = node.gridDimY = node.gridDimZ = 1;
  node.blockDimX = 32;
  node.blockDimY = node.blockDimZ = 1;
  node.kernelParams = params;
  return node;
}

static void call_worker_open(call_worker_t *worker, bench_device_t *bench,
                             int index) {
  memset(worker, 0, sizeof(*worker));
  worker->bench = bench;
  worker->slot = bench->page_address + 256 + 8 * (uint64_t)index;
  CU(cuStreamCreateWithPriority, &worker->stream, CU_STREAM_NON_BLOCKING, 0);
  CU(cuGraphCreate, &worker->graph, 0);
  void *params[1];
  CUDA_KERNEL_NODE_PARAMS node = call_node_params(bench, params);
  CU(cuGraphAddKernelNode, &worker->node, worker->graph, NULL, 0, &node);
  CU(cuGraphInstantiateWithFlags, &worker->exec, worker->graph, 0);
  CU(cuEventCreate, &worker->event, CU_EVENT_DISABLE_TIMING);
}

static void call_worker_close(call_worker_t *worker) {
  CU(cuStreamSynchronize, worker->stream);
  CU(cuEventDestroy, worker->event);
  CU(cuGraphExecDestroy, worker->exec);
  CU(cuGraphDestroy, worker->graph);
  CU(cuStreamDestroy, worker->stream);
}

// What halo's submission thread issues for one execution of a one-node
// recording whose binding changed: SetParams, launch, the semaphore store,
// the completion event. |costs| (NULL: not timed one by one) gets each
// call's time.
static void call_worker_step(call_worker_t *worker, int i, samples_t *costs) {
  void *params[1];
  CUDA_KERNEL_NODE_PARAMS node = call_node_params(worker->bench, params);
  int64_t t0 = now_ns();
  CU(cuGraphExecKernelNodeSetParams, worker->exec, worker->node, &node);
  int64_t t1 = now_ns();
  CU(cuGraphLaunch, worker->exec, worker->stream);
  int64_t t2 = now_ns();
  CU(cuStreamWriteValue64, worker->stream, (CUdeviceptr)worker->slot,
     (uint64_t)i + 1, CU_STREAM_WRITE_VALUE_DEFAULT);
  int64_t t3 = now_ns();
  CU(cuEventRecord, worker->event, worker->stream);
  int64_t t4 = now_ns();
  CUresult query = cu->cuEventQuery(worker->event);
  int64_t t5 = now_ns();
  if (query != CUDA_SUCCESS && query != CUDA_ERROR_NOT_READY) {
    cu_check(query, "cuEventQuery");
  }
  if (costs) {
    samples_add(&costs[0], t1 - t0);
    samples_add(&costs[1], t2 - t1);
    samples_add(&costs[2], t3 - t2);
    samples_add(&costs[3], t4 - t3);
    samples_add(&costs[4], t5 - t4);
    samples_add(&costs[5], t5 - t0);
  }
}

// Steps issued in batches; the stream is drained between batches (not
// timed), so the launch queue never fills.
#define CALL_BATCH 64

static void *call_worker_main(void *arg) {
  call_worker_t *worker = arg;
  CHECK("make current", halo_hal_cuda_device_make_current(worker->bench->cuda));
  pthread_barrier_wait(worker->start);
  for (int i = 0; i < worker->steps; ++i) {
    int64_t start = now_ns();
    call_worker_step(worker, i, NULL);
    worker->cpu_ns += now_ns() - start;
    if (i % CALL_BATCH == CALL_BATCH - 1) {
      CU(cuStreamSynchronize, worker->stream);
    }
  }
  CU(cuStreamSynchronize, worker->stream);
  return NULL;
}

static void native_call_costs(bench_device_t *bench) {
  static const char *const names[6] = {
      "  cuGraphExecKernelNodeSetParams (1 node)",
      "  cuGraphLaunch (1 node)",
      "  cuStreamWriteValue64",
      "  cuEventRecord",
      "  cuEventQuery (not finished)",
      "  all five (one execution's calls)",
  };
  call_worker_t worker;
  call_worker_open(&worker, bench, 0);
  samples_t costs[6];
  for (int c = 0; c < 6; ++c) costs[c] = samples_new(options.iterations);
  int warmup = options.iterations / 10 + 10;
  for (int i = -warmup; i < options.iterations; ++i) {
    call_worker_step(&worker, i + warmup, i >= 0 ? costs : NULL);
    if ((i + warmup) % CALL_BATCH == CALL_BATCH - 1) {
      CU(cuStreamSynchronize, worker.stream);
    }
  }
  call_worker_close(&worker);
  snprintf(csv_case, sizeof(csv_case), "driver calls of one execution");
  for (int c = 0; c < 6; ++c) samples_report(names[c], &costs[c]);
  // The same calls from T threads of one context, each on its own stream
  // and graph: steps issued per second in all.
  printf("  %-44s %10s %12s %14s\n", "issuing threads, one context", "steps",
         "steps/s", "CPU us / step");
  static const int thread_counts[4] = {1, 2, 4, 8};
  for (int t = 0; t < 4; ++t) {
    int threads = thread_counts[t];
    call_worker_t workers[8];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int w = 0; w < threads; ++w) {
      call_worker_open(&workers[w], bench, w);
      workers[w].steps = options.iterations * 2;
      workers[w].start = &start;
      pthread_create(&workers[w].thread, NULL, call_worker_main, &workers[w]);
    }
    pthread_barrier_wait(&start);
    int64_t begin = now_ns();
    int64_t cpu = 0;
    for (int w = 0; w < threads; ++w) {
      pthread_join(workers[w].thread, NULL);
      cpu += workers[w].cpu_ns;
    }
    double seconds = (double)(now_ns() - begin) / 1e9;
    int total = threads * options.iterations * 2;
    for (int w = 0; w < threads; ++w) call_worker_close(&workers[w]);
    pthread_barrier_destroy(&start);
    char name[64];
    snprintf(name, sizeof(name), "  %d thread%s", threads,
             threads == 1 ? "" : "s");
    printf("  %-44s %10d %12.0f %14.2f\n", name, total, total / seconds,
           (double)cpu / 1e3 / total);
    bench_row_t row = bench_row("calls", name + 2, "native");
    row.clients = threads;
    row.n = total;
    row.per_second = total / seconds;
    row.mean_us = (double)cpu / 1e3 / total;
    bench_csv_write(&row);
  }
}

// The chain's graph: node i runs |function| on |params_of(i)|.
static void native_chain_params(bench_device_t *bench, int set, uint32_t i,
                                bool table, uint64_t *table_address,
                                uint32_t slots[2], void *params[3]) {
  slots[0] = i % SLOTS;
  slots[1] = (i + 1) % SLOTS;
  if (table) {
    params[0] = table_address;
    params[1] = &slots[0];
    params[2] = &slots[1];
  } else {
    params[0] = &bench->sets[set][slots[0]];
    params[1] = &bench->sets[set][slots[1]];
  }
}

// Re-points every node of the direct chain at buffer set |set| and
// launches it.
static void native_set_params_launch(bench_device_t *bench, CUgraphExec exec,
                                     CUgraphNode *nodes, int set,
                                     CUstream stream) {
  for (uint32_t i = 0; i < CHAIN; ++i) {
    uint32_t slots[2];
    void *params[3];
    native_chain_params(bench, set, i, false, NULL, slots, params);
    CUDA_KERNEL_NODE_PARAMS node;
    memset(&node, 0, sizeof(node));
    node.func = bench->step_function;
    node.gridDimX = node.gridDimY = node.gridDimZ = 1;
    node.blockDimX = STEP_THREADS;
    node.blockDimY = node.blockDimZ = 1;
    node.kernelParams = params;
    CU(cuGraphExecKernelNodeSetParams, exec, nodes[i], &node);
  }
  CU(cuGraphLaunch, exec, stream);
}

// A thread that sleeps on a condition variable between steps, like
// halo's submission thread.
typedef struct native_worker_t {
  bench_device_t *bench;
  CUgraphExec exec;
  CUgraphNode *nodes;
  CUstream stream;
  pthread_t thread;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  int set;    // -1: idle
  bool done;  // the step was launched
  bool stopping;
} native_worker_t;

static void *native_worker_main(void *arg) {
  native_worker_t *worker = arg;
  CHECK("make current", halo_hal_cuda_device_make_current(worker->bench->cuda));
  pthread_mutex_lock(&worker->mutex);
  for (;;) {
    while (worker->set < 0 && !worker->stopping) {
      pthread_cond_wait(&worker->cond, &worker->mutex);
    }
    if (worker->stopping) break;
    int set = worker->set;
    pthread_mutex_unlock(&worker->mutex);
    native_set_params_launch(worker->bench, worker->exec, worker->nodes, set,
                             worker->stream);
    pthread_mutex_lock(&worker->mutex);
    worker->set = -1;
    worker->done = true;
    pthread_cond_broadcast(&worker->cond);
  }
  pthread_mutex_unlock(&worker->mutex);
  return NULL;
}

static void native_worker_start(native_worker_t *worker) {
  pthread_mutex_init(&worker->mutex, NULL);
  pthread_cond_init(&worker->cond, NULL);
  worker->set = -1;
  pthread_create(&worker->thread, NULL, native_worker_main, worker);
}

// Hands step |set| to the worker and returns once it launched.
static void native_worker_step(native_worker_t *worker, int set) {
  pthread_mutex_lock(&worker->mutex);
  worker->done = false;
  worker->set = set;
  pthread_cond_broadcast(&worker->cond);
  while (!worker->done) pthread_cond_wait(&worker->cond, &worker->mutex);
  pthread_mutex_unlock(&worker->mutex);
}

static void native_worker_stop(native_worker_t *worker) {
  pthread_mutex_lock(&worker->mutex);
  worker->stopping = true;
  pthread_cond_broadcast(&worker->cond);
  pthread_mutex_unlock(&worker->mutex);
  pthread_join(worker->thread, NULL);
  pthread_cond_destroy(&worker->cond);
  pthread_mutex_destroy(&worker->mutex);
}

static void native_chain(bench_device_t *bench) {
  CUstream stream;
  CU(cuStreamCreateWithPriority, &stream, CU_STREAM_NON_BLOCKING, 0);
  int warmup = options.steps / 10 + 3;
  // 1000 launches a step.
  samples_t launches = samples_new(options.steps);
  samples_t launches_cpu = samples_new(options.steps);
  for (int s = -warmup; s < options.steps; ++s) {
    int set = (s + warmup) % 2;
    int64_t start = now_ns();
    for (uint32_t i = 0; i < CHAIN; ++i) {
      uint32_t slots[2];
      void *params[3];
      native_chain_params(bench, set, i, false, NULL, slots, params);
      CU(cuLaunchKernel, bench->step_function, 1, 1, 1, STEP_THREADS, 1, 1, 0,
         stream, params, NULL);
    }
    int64_t enqueued = now_ns();
    CU(cuStreamSynchronize, stream);
    if (s >= 0) {
      samples_add(&launches, now_ns() - start);
      samples_add(&launches_cpu, enqueued - start);
    }
  }
  // Graphs: one of direct kernels (its nodes kept for SetParams), one of
  // table kernels.
  uint64_t table = 0;
  CHECK("allocate", bench->allocator->vtable->allocate(
                        bench->allocator, SLOTS * sizeof(uint64_t), &table));
  uint64_t *staging = NULL;
  CU(cuMemAllocHost, (void **)&staging, SLOTS * sizeof(uint64_t));
  CUgraph graphs[2];
  CUgraphExec execs[2];
  CUgraphNode *node_lists[2] = {calloc(CHAIN, sizeof(CUgraphNode)),
                                calloc(CHAIN, sizeof(CUgraphNode))};
  for (int g = 0; g < 2; ++g) {
    CUgraphNode *nodes = node_lists[g];
    CU(cuGraphCreate, &graphs[g], 0);
    for (uint32_t i = 0; i < CHAIN; ++i) {
      uint32_t slots[2];
      void *params[3];
      native_chain_params(bench, 0, i, g == 1, &table, slots, params);
      CUDA_KERNEL_NODE_PARAMS node;
      memset(&node, 0, sizeof(node));
      node.func = g == 1 ? bench->step_table_function : bench->step_function;
      node.gridDimX = node.gridDimY = node.gridDimZ = 1;
      node.blockDimX = STEP_THREADS;
      node.blockDimY = node.blockDimZ = 1;
      node.kernelParams = params;
      CU(cuGraphAddKernelNode, &nodes[i], graphs[g], i ? &nodes[i - 1] : NULL,
         i ? 1 : 0, &node);
    }
    CU(cuGraphInstantiateWithFlags, &execs[g], graphs[g], 0);
  }
  CUgraphNode *direct_nodes = node_lists[0];
  samples_t graph_only = samples_new(options.steps);
  samples_t graph_cpu = samples_new(options.steps);
  for (int s = -warmup; s < options.steps; ++s) {
    int64_t start = now_ns();
    CU(cuGraphLaunch, execs[0], stream);
    int64_t enqueued = now_ns();
    CU(cuStreamSynchronize, stream);
    if (s >= 0) {
      samples_add(&graph_only, now_ns() - start);
      samples_add(&graph_cpu, enqueued - start);
    }
  }
  // Three ways to re-point all 1000 nodes and wait: on this thread with a
  // stream sync; the same with the completion seen through an event (as
  // halo's completion thread sees it); SetParams and launch by a thread
  // woken for each step (as halo's submission thread).
  samples_t set_params = samples_new(options.steps);
  samples_t set_params_cpu = samples_new(options.steps);
  samples_t set_params_event = samples_new(options.steps);
  samples_t set_params_woken = samples_new(options.steps);
  CUevent event;
  CU(cuEventCreate, &event, CU_EVENT_DISABLE_TIMING);
  native_worker_t worker = {.bench = bench,
                            .exec = execs[0],
                            .nodes = direct_nodes,
                            .stream = stream};
  native_worker_start(&worker);
  for (int way = 0; way < 3; ++way) {
    for (int s = -warmup; s < options.steps; ++s) {
      int set = (s + warmup + 1) % 2;
      int64_t start = now_ns();
      if (way == 2) {
        native_worker_step(&worker, set);
      } else {
        native_set_params_launch(bench, execs[0], direct_nodes, set, stream);
      }
      int64_t enqueued = now_ns();
      if (way == 1) {
        CU(cuEventRecord, event, stream);
        CU(cuEventSynchronize, event);
      } else {
        CU(cuStreamSynchronize, stream);
      }
      if (s < 0) continue;
      samples_add(way == 0   ? &set_params
                  : way == 1 ? &set_params_event
                             : &set_params_woken,
                  now_ns() - start);
      if (way == 0) samples_add(&set_params_cpu, enqueued - start);
    }
  }
  native_worker_stop(&worker);
  CU(cuEventDestroy, event);
  samples_t by_table = samples_new(options.steps);
  samples_t by_table_cpu = samples_new(options.steps);
  for (int s = -warmup; s < options.steps; ++s) {
    int set = (s + warmup) % 2;
    int64_t start = now_ns();
    for (uint32_t i = 0; i < SLOTS; ++i) staging[i] = bench->sets[set][i];
    CU(cuMemcpyHtoDAsync, (CUdeviceptr)table, staging, SLOTS * sizeof(uint64_t),
       stream);
    CU(cuGraphLaunch, execs[1], stream);
    int64_t enqueued = now_ns();
    CU(cuStreamSynchronize, stream);
    if (s >= 0) {
      samples_add(&by_table, now_ns() - start);
      samples_add(&by_table_cpu, enqueued - start);
    }
  }
  samples_report("native stream: 1000 launches + sync", &launches);
  samples_report("  of which enqueueing (CPU)", &launches_cpu);
  samples_report("native graph launch + sync", &graph_only);
  samples_report("  of which enqueueing (CPU)", &graph_cpu);
  samples_report("native graph, 1000 SetParams + launch + sync", &set_params);
  samples_report("  of which SetParams + enqueueing (CPU)", &set_params_cpu);
  samples_report("  the same, completion seen by an event", &set_params_event);
  samples_report("  the same, SetParams by a woken thread", &set_params_woken);
  samples_report("native graph, table copy + launch + sync", &by_table);
  samples_report("  of which copy + enqueueing (CPU)", &by_table_cpu);
  for (int g = 0; g < 2; ++g) {
    CU(cuGraphExecDestroy, execs[g]);
    CU(cuGraphDestroy, graphs[g]);
  }
  free(node_lists[0]);
  free(node_lists[1]);
  CU(cuMemFreeHost, staging);
  bench->allocator->vtable->deallocate(bench->allocator, table,
                                       SLOTS * sizeof(uint64_t));
  CU(cuStreamDestroy, stream);
}

// ---- halo through the HAL

typedef struct bench_completion_t {
  _Atomic uint64_t done;  // the value of the last completed execution
  _Atomic int failed;
  uint64_t value;
} bench_completion_t;

static bench_completion_t completion;

static void bench_on_complete(void *user_data, halo_status_t status) {
  uint64_t value = (uint64_t)(uintptr_t)user_data;
  if (status) {
    fprintf(stderr, "halo-bench-cuda: execution %llu failed: %s\n",
            (unsigned long long)value, halo_status_message(status));
    halo_status_free(status);
    atomic_store(&completion.failed, 1);
  }
  atomic_store_explicit(&completion.done, value, memory_order_release);
}

// Spins until |word| shows |value|, the GPU store of the execution that
// completes with |value|. Its completion seen while the word still shows
// less means the store was never made (the driver leaves out one that
// would land below a higher value: the word must only go up): an error,
// not a wait for ever.
static void wait_store(volatile uint64_t *word, uint64_t value) {
  while (atomic_load_explicit((_Atomic uint64_t *)word, memory_order_acquire) <
         value) {
    if (atomic_load(&completion.failed)) exit(1);
    if (atomic_load_explicit(&completion.done, memory_order_acquire) >= value &&
        atomic_load_explicit((_Atomic uint64_t *)word, memory_order_acquire) <
            value) {
      fprintf(stderr,
              "halo-bench-cuda: execution %llu completed, its GPU store "
              "never landed (the word shows %llu)\n",
              (unsigned long long)value, (unsigned long long)*word);
      exit(1);
    }
  }
}

static void wait_completion(uint64_t value) {
  while (atomic_load_explicit(&completion.done, memory_order_acquire) < value) {
    if (atomic_load(&completion.failed)) exit(1);
  }
}

// A recording of |command_count| commands, |arg_count| arguments and
// |data_size| inline bytes, zeroed.
static halo_hal_recording_t recording_new(uint32_t binding_capacity,
                                          uint32_t command_count,
                                          uint32_t arg_count,
                                          uint32_t data_size) {
  halo_hal_recording_t recording = {
      .flags = HALO_HAL_RECORDING_REUSABLE,
      .binding_capacity = binding_capacity,
      .commands = calloc(command_count + 1, sizeof(halo_hal_command_t)),
      .command_count = command_count,
      .args = calloc(arg_count + 1, sizeof(halo_hal_dispatch_arg_t)),
      .arg_count = arg_count,
      .data = calloc(data_size + 1, 1),
      .data_size = data_size,
  };
  return recording;
}

// The small kernel: tiny on slot 0, one block of 32 threads.
static halo_hal_command_buffer_t *tiny_prepare(bench_device_t *bench) {
  halo_hal_recording_t recording = recording_new(1, 1, 1, 0);
  halo_hal_command_t *command = &recording.commands[0];
  command->type = HALO_HAL_COMMAND_DISPATCH;
  command->executable = bench->executable;
  command->entry_ordinal = bench->tiny;
  command->grid[0] = command->grid[1] = command->grid[2] = 1;
  command->block[0] = 32;
  command->block[1] = command->block[2] = 1;
  command->arg_count = 1;
  recording.args[0].kind = HALO_HAL_ARG_BUFFER;
  recording.args[0].ref.slot = 0;
  halo_hal_command_buffer_t *command_buffer = NULL;
  CHECK("prepare", bench->device->vtable->prepare_command_buffer(
                       bench->device, &recording, &command_buffer));
  return command_buffer;
}

static void halo_small_kernel(bench_device_t *bench, const char *label) {
  halo_hal_command_buffer_t *command_buffer = tiny_prepare(bench);
  halo_hal_queue_t *queue = NULL;
  CHECK("queue", bench->device->vtable->create_queue(bench->device, 0, &queue));
  halo_hal_binding_t binding = {bench->counter, 256};
  halo_hal_execution_signal_t signal = {bench->page_address, 0, NULL};
  volatile uint64_t *word = bench->page;
  word[0] = 0;
  atomic_store(&completion.done, 0);
  int warmup = options.iterations / 10 + 10;
  samples_t stored = samples_new(options.iterations);
  samples_t completed = samples_new(options.iterations);
  for (int i = -warmup; i < options.iterations; ++i) {
    uint64_t value = (uint64_t)(i + warmup + 1);
    signal.value = value;
    halo_hal_execution_t execution = {
        .command_buffer = command_buffer,
        .bindings = &binding,
        .binding_count = 1,
        .completion = bench_on_complete,
        .user_data = (void *)(uintptr_t)value,
        .signals = &signal,
        .signal_count = 1,
    };
    int64_t start = now_ns();
    CHECK("execute", halo_hal_queue_execute(queue, &execution));
    wait_store(word, value);
    int64_t seen = now_ns();
    wait_completion(value);
    int64_t done = now_ns();
    if (i >= 0) {
      samples_add(&stored, seen - start);
      samples_add(&completed, done - start);
    }
  }
  char name[96];
  snprintf(name, sizeof(name), "halo [%s] GPU store seen", label);
  samples_report(name, &stored);
  snprintf(name, sizeof(name), "halo [%s] completion callback", label);
  samples_report(name, &completed);
  halo_hal_queue_destroy(queue);
  halo_hal_command_buffer_destroy(command_buffer);
}

static _Atomic int long_done;

static void bench_on_long_complete(void *user_data, halo_status_t status) {
  (void)user_data;
  if (status) {
    fprintf(stderr, "halo-bench-cuda: the long execution failed: %s\n",
            halo_status_message(status));
    halo_status_free(status);
    atomic_store(&completion.failed, 1);
  }
  atomic_store_explicit(&long_done, 1, memory_order_release);
}

// The small kernel on queue B while queue A runs a 2 ms kernel: B's
// completion must not wait for A's (queues are unordered).
static void halo_two_queues(bench_device_t *bench, const char *label) {
  const uint64_t long_ns = 2000000;
  halo_hal_recording_t recording = recording_new(2, 1, 5, 16);
  halo_hal_command_t *command = &recording.commands[0];
  command->type = HALO_HAL_COMMAND_DISPATCH;
  command->executable = bench->executable;
  command->entry_ordinal = bench->slow_scale;
  command->grid[0] = command->grid[1] = command->grid[2] = 1;
  command->block[0] = 32;
  command->block[1] = command->block[2] = 1;
  command->arg_count = 5;
  float a = 0.5f;
  uint32_t n = 32;
  memcpy(recording.data, &a, 4);
  memcpy(recording.data + 4, &n, 4);
  memcpy(recording.data + 8, &long_ns, 8);
  for (int i = 0; i < 2; ++i) {
    recording.args[i].kind = HALO_HAL_ARG_BUFFER;
    recording.args[i].ref.slot = (uint32_t)i;
  }
  uint32_t offsets[3] = {0, 4, 8}, sizes[3] = {4, 4, 8};
  for (int i = 0; i < 3; ++i) {
    recording.args[2 + i].kind = HALO_HAL_ARG_CONSTANT;
    recording.args[2 + i].data_offset = offsets[i];
    recording.args[2 + i].data_size = sizes[i];
  }
  halo_hal_command_buffer_t *slow = NULL;
  CHECK("prepare", bench->device->vtable->prepare_command_buffer(
                       bench->device, &recording, &slow));
  halo_hal_command_buffer_t *tiny = tiny_prepare(bench);
  halo_hal_queue_t *queue_a = NULL, *queue_b = NULL;
  CHECK("queue",
        bench->device->vtable->create_queue(bench->device, 0, &queue_a));
  CHECK("queue",
        bench->device->vtable->create_queue(bench->device, 0, &queue_b));
  halo_hal_binding_t slow_bindings[2] = {
      {bench->sets[1][0], STEP_THREADS * sizeof(float)},
      {bench->sets[1][1], STEP_THREADS * sizeof(float)}};
  halo_hal_binding_t tiny_binding = {bench->counter, 256};
  atomic_store(&completion.done, 0);
  int iterations = options.iterations < 300 ? options.iterations : 300;
  int warmup = 5;
  int a_first = 0;
  samples_t samples = samples_new(iterations);
  // The native anchors, stepped in the same loop (native_pair_t).
  native_pair_t pair;
  native_pair_open(&pair, bench);
  samples_t native_beside = samples_new(iterations);
  samples_t native_alone = samples_new(iterations);
  for (int i = -warmup; i < iterations; ++i) {
    uint64_t value = (uint64_t)(i + warmup + 1);
    atomic_store(&long_done, 0);
    halo_hal_execution_t long_execution = {
        .command_buffer = slow,
        .bindings = slow_bindings,
        .binding_count = 2,
        .completion = bench_on_long_complete,
    };
    CHECK("execute", halo_hal_queue_execute(queue_a, &long_execution));
    spin_us(200);  // A is on the GPU; the completion thread spun past it
    halo_hal_execution_t execution = {
        .command_buffer = tiny,
        .bindings = &tiny_binding,
        .binding_count = 1,
        .completion = bench_on_complete,
        .user_data = (void *)(uintptr_t)value,
    };
    int64_t start = now_ns();
    CHECK("execute", halo_hal_queue_execute(queue_b, &execution));
    wait_completion(value);
    int64_t done = now_ns();
    if (atomic_load_explicit(&long_done, memory_order_acquire)) ++a_first;
    while (!atomic_load_explicit(&long_done, memory_order_acquire)) {
      if (atomic_load(&completion.failed)) exit(1);
    }
    int64_t beside_ns = native_pair_step(&pair, true);
    int64_t alone_ns = native_pair_step(&pair, false);
    if (i >= 0) {
      samples_add(&samples, done - start);
      samples_add(&native_beside, beside_ns);
      samples_add(&native_alone, alone_ns);
    }
  }
  native_pair_close(&pair);
  char name[96];
  snprintf(name, sizeof(name), "halo [%s] queue B while A runs 2 ms", label);
  samples_report(name, &samples);
  samples_report("  native launch+sync, same loop", &native_alone);
  samples_report("  native beside a 2 ms kernel, same loop", &native_beside);
  printf("    %-42s %10d of %d\n", "A had finished before B (should be 0)",
         a_first, iterations + warmup);
  halo_hal_queue_destroy(queue_a);
  halo_hal_queue_destroy(queue_b);
  halo_hal_command_buffer_destroy(slow);
  halo_hal_command_buffer_destroy(tiny);
}

static halo_hal_command_buffer_t *halo_chain_prepare(bench_device_t *bench,
                                                     bool table) {
  uint32_t per = table ? 3 : 2;
  // Dispatches with a barrier after each but the last.
  halo_hal_recording_t recording =
      recording_new(SLOTS, 2 * CHAIN - 1, per * CHAIN, table ? 8 * CHAIN : 0);
  uint32_t *data = (uint32_t *)recording.data;
  for (uint32_t i = 0; i < CHAIN; ++i) {
    halo_hal_command_t *command = &recording.commands[2 * i];
    if (i + 1 < CHAIN)
      recording.commands[2 * i + 1].type = HALO_HAL_COMMAND_BARRIER;
    command->type = HALO_HAL_COMMAND_DISPATCH;
    command->executable = bench->executable;
    command->entry_ordinal = table ? bench->step_table : bench->step;
    command->grid[0] = command->grid[1] = command->grid[2] = 1;
    command->block[0] = STEP_THREADS;
    command->block[1] = command->block[2] = 1;
    command->arg_first = per * i;
    command->arg_count = per;
    halo_hal_dispatch_arg_t *args = &recording.args[per * i];
    if (table) {
      args[0].kind = HALO_HAL_ARG_BINDING_TABLE;
      for (int a = 0; a < 2; ++a) {
        args[1 + a].kind = HALO_HAL_ARG_CONSTANT;
        args[1 + a].data_offset = (2 * i + (uint32_t)a) * 4;
        args[1 + a].data_size = 4;
        data[2 * i + (uint32_t)a] = (i + (uint32_t)a) % SLOTS;
      }
    } else {
      for (int a = 0; a < 2; ++a) {
        args[a].kind = HALO_HAL_ARG_BUFFER;
        args[a].ref.slot = (i + (uint32_t)a) % SLOTS;
        args[a].ref.length = STEP_THREADS * sizeof(float);
      }
    }
  }
  halo_hal_command_buffer_t *command_buffer = NULL;
  CHECK("prepare", bench->device->vtable->prepare_command_buffer(
                       bench->device, &recording, &command_buffer));
  return command_buffer;
}

static void halo_chain(bench_device_t *bench, const char *label) {
  halo_hal_queue_t *queue = NULL;
  CHECK("queue", bench->device->vtable->create_queue(bench->device, 0, &queue));
  halo_hal_binding_t bindings[2][SLOTS];
  for (int s = 0; s < 2; ++s) {
    for (uint32_t i = 0; i < SLOTS; ++i) {
      bindings[s][i].address = bench->sets[s][i];
      bindings[s][i].length = STEP_THREADS * sizeof(float);
    }
  }
  // Each step also signals a word of the page from the GPU (as halod's
  // executions do): the step until its store is seen, then until the
  // completion callback, tell the GPU's end from the completion path's.
  // The word's values only go up, across both cases: it is one timeline
  // (a signal without a host view, as this one, has only its GPU store,
  // which the driver leaves out where it would land below a higher value
  // stored before: hal/queue.h).
  volatile uint64_t *word = &bench->page[16];
  halo_hal_execution_signal_t signal = {bench->page_address + 128, 0, NULL};
  word[0] = 0;
  uint64_t base = 0;
  for (int table = 0; table < 2; ++table) {
    halo_hal_command_buffer_t *command_buffer =
        halo_chain_prepare(bench, table == 1);
    atomic_store(&completion.done, 0);
    int warmup = options.steps / 10 + 3;
    samples_t steps = samples_new(options.steps);
    samples_t stored = samples_new(options.steps);
    for (int s = -warmup; s < options.steps; ++s) {
      uint64_t value = base + (uint64_t)(s + warmup + 1);
      signal.value = value;
      halo_hal_execution_t execution = {
          .command_buffer = command_buffer,
          .bindings = bindings[(s + warmup) % 2],
          .binding_count = SLOTS,
          .completion = bench_on_complete,
          .user_data = (void *)(uintptr_t)value,
          .signals = &signal,
          .signal_count = 1,
      };
      int64_t start = now_ns();
      CHECK("execute", halo_hal_queue_execute(queue, &execution));
      wait_store(word, value);
      int64_t seen = now_ns();
      wait_completion(value);
      if (s >= 0) {
        samples_add(&steps, now_ns() - start);
        samples_add(&stored, seen - start);
      }
    }
    char name[96];
    snprintf(name, sizeof(name), "halo [%s] %s, 16 changed", label,
             table ? "binding table" : "SetParams");
    samples_report(name, &steps);
    samples_report("  until the GPU store was seen", &stored);
    halo_hal_command_buffer_destroy(command_buffer);
    base += (uint64_t)(warmup + options.steps);
  }
  halo_hal_queue_destroy(queue);
}

static void bench_in_process(void) {
  const char *modes[2] = {"thread", "host_func"};
  bool native_done = false;
  for (int m = 0; m < 2; ++m) {
    if (strcmp(options.completion, "both") != 0 &&
        strcmp(options.completion, modes[m]) != 0) {
      continue;
    }
    bench_device_t bench;
    bench_device_open(&bench, m == 0 ? HALO_HAL_CUDA_COMPLETION_THREAD
                                     : HALO_HAL_CUDA_COMPLETION_HOST_FUNC);
    if (!native_done) {
      printf("device: %s (sm_%d, %u SMs), driver %d.%d\n",
             bench.device->info.name, bench.cuda->arch,
             bench.device->info.multiprocessor_count, cu->driver_version / 1000,
             cu->driver_version % 1000 / 10);
      header("small kernel (1 block x 32 threads), submit -> completion");
      native_small_kernel(&bench);
      header(
          "one execution's driver calls (CPU time of each), then the "
          "same from T threads");
      native_call_costs(&bench);
      if (options.calls_only) {
        bench_device_close(&bench);
        return;
      }
    }
    halo_small_kernel(&bench, modes[m]);
    halo_two_queues(&bench, modes[m]);
    if (!native_done) {
      header("1000-dispatch chain, 16 bindings changed every step");
      native_chain(&bench);
    }
    halo_chain(&bench, modes[m]);
    native_done = true;
    bench_device_close(&bench);
  }
}

//===----------------------------------------------------------------------===//
// Through halod
//===----------------------------------------------------------------------===//

static void bench_daemon(void) {
  halo_client_options_t client_options = {.address = options.address,
                                          .request_timeout_ms = 60000};
  halo_client_t *client = NULL;
  CHECK("connect", halo_client_connect(&client_options, &client));
  pid_t daemon_pid = halo_client_daemon_pid(client);
  int64_t daemon_cpu = -1;
  // The threads around the chain's steps: where the CPU goes (static: two
  // snapshots are too large for the stack).
  static bench_tree_t tasks_before, tasks_after;
  halo_device_info_t info;
  CHECK("device", halo_client_device_info(client, 0, &info));
  printf("halod at %s [%s], device 0: %s %s\n", options.address,
         options.label ? options.label : "?", info.driver, info.name);
  halo_hal_executable_params_t hal_params = bench_kernel_params();
  halo_executable_params_t params = {
      .format = (halo_executable_format_t)hal_params.format,
      .data = hal_params.data,
      .size = (size_t)hal_params.size};
  halo_executable_t *executable = NULL;
  CHECK("executable", halo_executable_create(client, 0, &params, &executable));
  halo_queue_t *queue = NULL;
  CHECK("queue", halo_queue_create(client, 0, 0, &queue));
  halo_semaphore_t *semaphore = NULL;
  CHECK("semaphore", halo_semaphore_create(client, 0, 0, &semaphore));
  uint64_t value = 0;
  char name[96];
  const char *label = options.label ? options.label : "halod";

  header("through halod: small kernel, halo_queue_execute -> completion");
  halo_buffer_t *counter = NULL;
  CHECK("buffer",
        halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 256, 0, &counter));
  halo_dispatch_arg_t tiny_args[1] = {
      {.kind = HALO_DISPATCH_ARG_BUFFER,
       .ref = halo_binding_ref(0, 0, HALO_WHOLE_BUFFER)}};
  halo_dispatch_params_t tiny = {.executable = executable,
                                 .entry = "tiny",
                                 .grid = {1, 1, 1},
                                 .block = {32, 1, 1},
                                 .args = tiny_args,
                                 .arg_count = 1};
  halo_command_buffer_t *small = NULL;
  CHECK("begin", halo_command_buffer_begin(
                     client, 0, HALO_COMMAND_BUFFER_REUSABLE, 1, &small));
  CHECK("dispatch", halo_command_buffer_dispatch(small, &tiny));
  CHECK("end", halo_command_buffer_end(small));
  halo_binding_t counter_binding = {counter, 0, HALO_WHOLE_BUFFER};
  for (int spin = 0; spin < 2; ++spin) {
    int warmup = options.iterations / 10 + 10;
    samples_t samples = samples_new(options.iterations);
    // Per thread of the client, halod and its device workers: CPU and the
    // times each was switched in per execution (which side sleeps between
    // steps).
    static bench_tree_t l1_before;
    for (int i = -warmup; i < options.iterations; ++i) {
      if (i == 0) {
        daemon_cpu = bench_process_cpu_ns(daemon_pid);
        bench_tree_take(&l1_before, getpid(), daemon_pid);
      }
      halo_semaphore_value_t signal = {semaphore, ++value};
      int64_t start = now_ns();
      CHECK("execute", halo_queue_execute(queue, small, &counter_binding, 1,
                                          NULL, 0, &signal, 1));
      if (spin) {
        uint64_t seen = 0;
        while (seen < value) {
          CHECK("query", halo_semaphore_query(semaphore, &seen));
        }
      } else {
        CHECK("wait",
              halo_semaphore_wait(semaphore, value, HALO_TIMEOUT_INFINITE));
      }
      if (i >= 0) samples_add(&samples, now_ns() - start);
    }
    double cpu = daemon_cpu_per(daemon_pid, daemon_cpu, options.iterations);
    snprintf(name, sizeof(name), "halod [%s] execute + %s", label,
             spin ? "spin on query" : "semaphore wait");
    samples_report_cpu(name, &samples, cpu);
    static bench_tree_t l1_after;
    bench_tree_take(&l1_after, getpid(), daemon_pid);
    bench_tree_print(stdout, "    ", &l1_before, &l1_after, options.iterations);
  }
  // The completion must have retired before the next case reuses nothing:
  // a wait for the last value is enough.
  CHECK("wait", halo_semaphore_wait(semaphore, value, HALO_TIMEOUT_INFINITE));

  header("through halod: 1000-dispatch chain, 16 bindings changed per step");
  halo_buffer_t *sets[2][SLOTS];
  for (int s = 0; s < 2; ++s) {
    for (uint32_t i = 0; i < SLOTS; ++i) {
      CHECK("buffer",
            halo_buffer_create(client, 0, HALO_MEMORY_DEVICE,
                               STEP_THREADS * sizeof(float), 0, &sets[s][i]));
    }
  }
  halo_binding_t bindings[2][SLOTS];
  for (int s = 0; s < 2; ++s) {
    for (uint32_t i = 0; i < SLOTS; ++i) {
      bindings[s][i] = (halo_binding_t){sets[s][i], 0, HALO_WHOLE_BUFFER};
    }
  }
  for (int table = 0; table < 2; ++table) {
    halo_command_buffer_t *chain = NULL;
    CHECK("begin", halo_command_buffer_begin(
                       client, 0, HALO_COMMAND_BUFFER_REUSABLE, SLOTS, &chain));
    for (uint32_t i = 0; i < CHAIN; ++i) {
      uint32_t x = i % SLOTS, y = (i + 1) % SLOTS;
      halo_dispatch_arg_t args[3];
      halo_dispatch_params_t dispatch = {.executable = executable,
                                         .grid = {1, 1, 1},
                                         .block = {STEP_THREADS, 1, 1},
                                         .args = args};
      if (table) {
        args[0] =
            (halo_dispatch_arg_t){.kind = HALO_DISPATCH_ARG_BINDING_TABLE};
        args[1] = (halo_dispatch_arg_t){
            .kind = HALO_DISPATCH_ARG_CONSTANT, .data = &x, .size = 4};
        args[2] = (halo_dispatch_arg_t){
            .kind = HALO_DISPATCH_ARG_CONSTANT, .data = &y, .size = 4};
        dispatch.entry = "step_table";
        dispatch.arg_count = 3;
      } else {
        args[0] = (halo_dispatch_arg_t){
            .kind = HALO_DISPATCH_ARG_BUFFER,
            .ref = halo_binding_ref(x, 0, HALO_WHOLE_BUFFER)};
        args[1] = (halo_dispatch_arg_t){
            .kind = HALO_DISPATCH_ARG_BUFFER,
            .ref = halo_binding_ref(y, 0, HALO_WHOLE_BUFFER)};
        dispatch.entry = "step";
        dispatch.arg_count = 2;
      }
      CHECK("dispatch", halo_command_buffer_dispatch(chain, &dispatch));
      if (i + 1 < CHAIN) CHECK("barrier", halo_command_buffer_barrier(chain));
    }
    CHECK("end", halo_command_buffer_end(chain));
    int warmup = options.steps / 10 + 3;
    samples_t samples = samples_new(options.steps);
    for (int s = -warmup; s < options.steps; ++s) {
      if (s == 0) {
        daemon_cpu = bench_process_cpu_ns(daemon_pid);
        bench_tree_take(&tasks_before, getpid(), daemon_pid);
      }
      halo_semaphore_value_t signal = {semaphore, ++value};
      int64_t start = now_ns();
      CHECK("execute",
            halo_queue_execute(queue, chain, bindings[(s + warmup) % 2], SLOTS,
                               NULL, 0, &signal, 1));
      CHECK("wait",
            halo_semaphore_wait(semaphore, value, HALO_TIMEOUT_INFINITE));
      if (s >= 0) samples_add(&samples, now_ns() - start);
    }
    double cpu = daemon_cpu_per(daemon_pid, daemon_cpu, options.steps);
    bench_tree_take(&tasks_after, getpid(), daemon_pid);
    snprintf(name, sizeof(name), "halod [%s] %s, 16 changed", label,
             table ? "binding table" : "SetParams");
    samples_report_cpu(name, &samples, cpu);
    bench_tree_print(stdout, "    ", &tasks_before, &tasks_after,
                     options.steps);
    halo_command_buffer_release(chain);
  }
  halo_client_close(client);
}

int main(int argc, char **argv) {
  static const struct option long_options[] = {
      {"iterations", required_argument, NULL, 'i'},
      {"steps", required_argument, NULL, 's'},
      {"completion", required_argument, NULL, 'c'},
      {"address", required_argument, NULL, 'a'},
      {"label", required_argument, NULL, 'l'},
      {"csv", required_argument, NULL, 'v'},
      {"calls-only", no_argument, NULL, 'o'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int option;
  while ((option = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
    switch (option) {
      case 'i':
        options.iterations = atoi(optarg);
        break;
      case 's':
        options.steps = atoi(optarg);
        break;
      case 'c':
        options.completion = optarg;
        break;
      case 'a':
        options.address = optarg;
        break;
      case 'l':
        options.label = optarg;
        break;
      case 'v':
        options.csv = optarg;
        break;
      case 'o':
        options.calls_only = true;
        break;
      default:
        fprintf(stderr,
                "usage: halo-bench-cuda [--iterations N] [--steps N] "
                "[--completion thread|host_func|both] [--csv FILE]\n"
                "                       [--calls-only]\n"
                "       halo-bench-cuda --address ADDR [--label TEXT] "
                "[--iterations N] [--steps N] [--csv FILE]\n");
        return option == 'h' ? 0 : 2;
    }
  }
  if (options.iterations < 1 || options.steps < 1) {
    fprintf(stderr, "halo-bench-cuda: --iterations and --steps must be >= 1\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (options.csv) bench_csv_open(options.csv, "halo-bench-cuda");
  if (options.address) {
    bench_daemon();
    return 0;
  }
  CHECK("loading CUDA", halo_hal_cuda_symbols_load(&cu));
  bench_in_process();
  return 0;
}
