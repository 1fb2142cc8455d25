// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-bench-tenants: many tenants on one GPU (T8) and the GPU memory each
// one costs (M1): N client processes each looping (a ~20 us kernel, wait
// for it), halo beside the native ways to share a GPU.
//
//   halo-bench-tenants --impl halo|native|streams [--clients N]
//       [--seconds S] [--kernel-us US] [--label TEXT] [--address ADDR]
//       [--csv FILE] [--allow-failures] [--setup-timeout S]
//
// --impl
//   halo     N processes, each a libhalo client of halod (--address, else
//            $HALO_ADDRESS): one REUSABLE command buffer of one dispatch of
//            the kernel (CUDA C, compiled once by halod), executed with the
//            process's own counter buffer bound, halo_semaphore_wait for the
//            value it signals, again.
//   native   N processes, each with its own CUDA context (the primary
//            context of device 0): cuLaunchKernel + cuStreamSynchronize, in
//            plain driver API calls. Under NVIDIA MPS when the caller set
//            CUDA_MPS_PIPE_DIRECTORY to a running control daemon's (--label
//            mps names it so in the output; scripts/gpu-bench does both).
//   streams  one process, one context, N threads each with its own stream,
//            the native loop.
// The kernel: one block of 32 threads spinning on %globaltimer for
// --kernel-us (default 20), then counting into the client's buffer.
//
// Every client process is forked before it touches CUDA or libhalo (this
// parent uses neither; it reads GPU memory through NVML, dlopen'ed). The
// first client sets up alone, then the others; all warm up, then start
// together on a futex in shared memory and loop for --seconds (default 3).
//
// Figures (stdout, and rows of bench_common.h's CSV with --csv):
//   T8  steps/s of all clients together (all steps / (the last client's end
//       - the common start)), per client min and max, the step's p50/p99
//       over every client, the clients' CPU per step (getrusage, all
//       threads), halod's CPU per step (/proc, halo only).
//   M1  GPU memory in use on device 0 (NVML) before the clients, with the
//       first client set up (read once the figure has held still for 0.6 s,
//       at most 5 s: what the first client set going in the background,
//       such as halod's replacement of the spare worker its first session
//       took, counts as the first client's), with all N: per additional
//       client = (all - first) / (N - 1); NVML's per-process figures for the
//       client processes (halo's hold no context: NVML does not list them) and
//       for halod with 1 and with N clients.
// --memory-stages (halo): the clients after the first pause after each
// step of their set-up (connect, executable, buffer, command buffer, queue,
// semaphore, warm-up) while the parent reads the GPU memory in use: M1
// split by what a client asks halod for.
// Native clients load modules as CUDA does by default (LAZY) unless
// CUDA_MODULE_LOADING is set (halod loads EAGER).
// --allow-failures: clients that fail to set up (MPS refuses clients past
// its limit) are counted and named, the others measured; otherwise a
// failed client fails the case (exit 1).
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "hal/cuda/cuda_symbols.h"
#include "halo/halo.h"

#define TENANTS_MAX_CLIENTS 128
#define TENANTS_RING 32768  // step durations kept per client (the last ones)
#define TENANTS_WARMUP 50   // steps before a client reports ready

static const char kKernel[] =
    "extern \"C\" __global__ void spin(unsigned long long *counter,\n"
    "                                  unsigned long long ns) {\n"
    "  unsigned long long start, now;\n"
    "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(start));\n"
    "  do {\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(now));\n"
    "  } while (now - start < ns);\n"
    "  if (threadIdx.x == 0) atomicAdd(counter, 1ull);\n"
    "}\n";

typedef enum impl_e { IMPL_HALO, IMPL_NATIVE, IMPL_STREAMS } impl_t;

static struct {
  impl_t impl;
  int clients;
  double seconds;
  double kernel_us;
  const char *label;
  const char *address;
  const char *csv;
  bool allow_failures;
  bool memory_stages;
  double setup_timeout;
} options = {.clients = 8, .seconds = 3, .kernel_us = 20, .setup_timeout = 60};

// What one client reports, in shared memory.
typedef enum client_state_e {
  CLIENT_SETTING_UP = 0,
  CLIENT_READY = 1,
  CLIENT_FAILED = 2,
} client_state_t;

typedef struct client_slot_t {
  _Atomic int32_t state;  // client_state_t
  int32_t pid;
  int32_t daemon_pid;  // halo: halod's, from the fd channel
  int64_t count;       // measured steps
  int64_t end_ns;
  int64_t cpu_ns;  // the process's CPU in the loop (streams: slot 0 only)
  char error[512];
  float samples_us[TENANTS_RING];
} client_slot_t;

typedef struct shared_t {
  alignas(64) _Atomic uint32_t settled;   // clients ready or failed
  alignas(64) _Atomic uint32_t phase;     // futex: 1 once all may set up
  alignas(64) _Atomic uint32_t go;        // futex: 1 once deadline_ns is set
  alignas(64) _Atomic uint32_t finished;  // clients out of their loop
  alignas(64) _Atomic uint32_t release;   // futex: 1 once they may close
  _Atomic uint32_t stage_count[8];        // --memory-stages: clients there
  int64_t deadline_ns;
  client_slot_t clients[TENANTS_MAX_CLIENTS];
} shared_t;

static shared_t *g_shared;

// --memory-stages (halo): the clients after the first stop after each step
// of their set-up until the parent has read the GPU memory in use.
enum { kStageCount = 7 };
static const char *const kStages[kStageCount] = {
    "connect",
    "executable (a content-hash hit)",
    "device buffer (256 B)",
    "command buffer (recorded; a memo hit)",
    "queue",
    "semaphore",
    "first executions (warm-up)",
};

static void die(const char *format, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fputs("halo-bench-tenants: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  exit(1);
}

static void futex_wait_for(_Atomic uint32_t *word, uint32_t value) {
  while (atomic_load(word) < value) {
    struct timespec slice = {.tv_sec = 1};
    bench_futex(word, FUTEX_WAIT, atomic_load(word), &slice);
  }
}

static void futex_set(_Atomic uint32_t *word, uint32_t value) {
  atomic_store(word, value);
  bench_futex(word, FUTEX_WAKE, INT_MAX, NULL);
}

//===----------------------------------------------------------------------===//
// GPU memory through NVML (dlopen; nothing here creates a context)
//===----------------------------------------------------------------------===//

typedef struct nvml_memory_t {
  unsigned long long total, free, used;
} nvml_memory_t;

// nvmlProcessInfo_t of the _v3 calls.
typedef struct nvml_process_t {
  unsigned int pid;
  unsigned long long used;  // bytes; ULLONG_MAX: not available
  unsigned int gpu_instance, compute_instance;
} nvml_process_t;

static struct {
  void *device;
  int (*memory)(void *device, nvml_memory_t *out);
  int (*processes)(void *device, unsigned *count, nvml_process_t *out);
  int (*mps_processes)(void *device, unsigned *count, nvml_process_t *out);
  char why[160];  // empty when NVML works
} nvml;

static void nvml_open(void) {
  void *library = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!library) {
    snprintf(nvml.why, sizeof(nvml.why), "NVML: %s", dlerror());
    return;
  }
  int (*init)(void) = (int (*)(void))dlsym(library, "nvmlInit_v2");
  int (*handle)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(
      library, "nvmlDeviceGetHandleByIndex_v2");
  nvml.memory = (int (*)(void *, nvml_memory_t *))dlsym(
      library, "nvmlDeviceGetMemoryInfo");
  nvml.processes = (int (*)(void *, unsigned *, nvml_process_t *))dlsym(
      library, "nvmlDeviceGetComputeRunningProcesses_v3");
  nvml.mps_processes = (int (*)(void *, unsigned *, nvml_process_t *))dlsym(
      library, "nvmlDeviceGetMPSComputeRunningProcesses_v3");
  int result = -1;
  if (!init || !handle || !nvml.memory || (result = init()) != 0 ||
      (result = handle(0, &nvml.device)) != 0) {
    snprintf(nvml.why, sizeof(nvml.why), "NVML: not usable (error %d)", result);
    nvml.device = NULL;
  }
}

// GPU memory in use on device 0, MiB; NAN without NVML.
static double nvml_used_mib(void) {
  nvml_memory_t memory;
  if (!nvml.device || nvml.memory(nvml.device, &memory) != 0) return NAN;
  return (double)memory.used / (1024.0 * 1024.0);
}

// Returns once device 0's memory in use has read the same (within 0.5
// MiB) 200, 400 and 600 ms after a first read, or after about 5 s; at once
// without NVML or when a read fails. Returns the nanoseconds it waited.
static int64_t nvml_wait_still(void) {
  if (!nvml.device) return 0;
  int64_t start = bench_now_ns();
  double last = nvml_used_mib();
  for (int still = 0;
       still < 3 && !isnan(last) && bench_now_ns() - start < 5000000000ll;) {
    usleep(200000);
    double now = nvml_used_mib();
    still = fabs(now - last) < 0.5 ? still + 1 : 0;
    last = now;
  }
  return bench_now_ns() - start;
}

// Processes on device 0 (compute and MPS lists together), at most |cap|.
static int nvml_list(nvml_process_t *out, int cap) {
  if (!nvml.device) return 0;
  int total = 0;
  int (*lists[2])(void *, unsigned *, nvml_process_t *) = {nvml.processes,
                                                           nvml.mps_processes};
  for (int l = 0; l < 2; ++l) {
    if (!lists[l]) continue;
    unsigned count = (unsigned)(cap - total);
    int base = total;
    if (lists[l](nvml.device, &count, out + base) != 0) continue;
    // Appended unless listed already (an MPS client may be in both).
    for (unsigned i = 0; i < count; ++i) {
      nvml_process_t process = out[base + (int)i];
      bool seen = false;
      for (int j = 0; j < total; ++j) seen |= out[j].pid == process.pid;
      if (!seen) out[total++] = process;
    }
  }
  return total;
}

typedef struct memory_snapshot_t {
  double used_mib;
  nvml_process_t processes[512];
  int process_count;
} memory_snapshot_t;

static void memory_snapshot(memory_snapshot_t *out) {
  out->used_mib = nvml_used_mib();
  out->process_count = nvml_list(out->processes, 512);
}

// |pid|'s GPU memory in |snapshot|, MiB: 0 if not listed, NAN if NVML does
// not say.
static double memory_of(const memory_snapshot_t *snapshot, pid_t pid,
                        bool *out_listed) {
  for (int i = 0; i < snapshot->process_count; ++i) {
    if ((pid_t)snapshot->processes[i].pid != pid) continue;
    if (out_listed) *out_listed = true;
    unsigned long long used = snapshot->processes[i].used;
    return used == ULLONG_MAX ? NAN : (double)used / (1024.0 * 1024.0);
  }
  if (out_listed) *out_listed = false;
  return 0;
}

//===----------------------------------------------------------------------===//
// One client's loop
//===----------------------------------------------------------------------===//

typedef struct worker_t {
  client_slot_t *slot;
  // halo
  halo_client_t *client;
  halo_executable_t *executable;
  halo_buffer_t *counter;
  halo_command_buffer_t *command_buffer;
  halo_queue_t *queue;
  halo_semaphore_t *semaphore;
  uint64_t value;
  // native
  CUstream stream;
  CUdeviceptr counter_address;
  uint64_t kernel_ns;
  void *params[2];
} worker_t;

static bool fail(client_slot_t *slot, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static bool fail(client_slot_t *slot, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(slot->error, sizeof(slot->error), format, args);
  va_end(args);
  return false;
}

static bool fail_status(client_slot_t *slot, const char *what,
                        halo_status_t status) {
  fail(slot, "%s: %s: %s", what,
       halo_status_code_name(halo_status_code(status)),
       halo_status_message(status));
  halo_status_free(status);
  return false;
}

static void stage_reached(client_slot_t *slot, int stage) {
  if (!options.memory_stages || slot == &g_shared->clients[0]) return;
  atomic_fetch_add(&g_shared->stage_count[stage], 1);
  futex_wait_for(&g_shared->phase, (uint32_t)stage + 2);
}

#define TRY(slot, what, expr)                                     \
  do {                                                            \
    halo_status_t try__status = (expr);                           \
    if (try__status) return fail_status(slot, what, try__status); \
  } while (0)

// ---- halo

static bool halo_worker_setup(worker_t *worker) {
  client_slot_t *slot = worker->slot;
  halo_client_options_t client_options = {.address = options.address,
                                          .request_timeout_ms = 60000};
  TRY(slot, "connect", halo_client_connect(&client_options, &worker->client));
  stage_reached(slot, 0);
  slot->daemon_pid = halo_client_daemon_pid(worker->client);
  uint8_t fake_image[BENCH_FAKE_IMAGE_SIZE];
  halo_executable_params_t params = {
      .format = HALO_EXECUTABLE_FORMAT_CUDA_SOURCE,
      .data = kKernel,
      .size = sizeof(kKernel) - 1};
  bool fake = bench_fake_cuda();
  if (fake) {
    bench_fake_image(fake_image, 0);
    params.format = HALO_EXECUTABLE_FORMAT_CUBIN;
    params.data = fake_image;
    params.size = sizeof(fake_image);
  }
  TRY(slot, "executable",
      halo_executable_create(worker->client, 0, &params, &worker->executable));
  stage_reached(slot, 1);
  TRY(slot, "buffer",
      halo_buffer_create(worker->client, 0, HALO_MEMORY_DEVICE, 256, 0,
                         &worker->counter));
  stage_reached(slot, 2);
  TRY(slot, "begin",
      halo_command_buffer_begin(worker->client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                1, &worker->command_buffer));
  uint64_t ns = (uint64_t)(options.kernel_us * 1000);
  halo_dispatch_arg_t args[2] = {
      {.kind = HALO_DISPATCH_ARG_BUFFER,
       .ref = halo_binding_ref(0, 0, HALO_WHOLE_BUFFER)},
      {.kind = HALO_DISPATCH_ARG_CONSTANT, .data = &ns, .size = sizeof(ns)},
  };
  halo_dispatch_params_t dispatch = {.executable = worker->executable,
                                     .entry = fake ? "tiny" : "spin",
                                     .grid = {1, 1, 1},
                                     .block = {32, 1, 1},
                                     .args = args,
                                     .arg_count = fake ? 1 : 2};
  TRY(slot, "dispatch",
      halo_command_buffer_dispatch(worker->command_buffer, &dispatch));
  TRY(slot, "end", halo_command_buffer_end(worker->command_buffer));
  stage_reached(slot, 3);
  TRY(slot, "queue", halo_queue_create(worker->client, 0, 0, &worker->queue));
  stage_reached(slot, 4);
  TRY(slot, "semaphore",
      halo_semaphore_create(worker->client, 0, 0, &worker->semaphore));
  stage_reached(slot, 5);
  return true;
}

static bool halo_worker_step(worker_t *worker) {
  halo_binding_t binding = {worker->counter, 0, HALO_WHOLE_BUFFER};
  halo_semaphore_value_t signal = {worker->semaphore, ++worker->value};
  TRY(worker->slot, "execute",
      halo_queue_execute(worker->queue, worker->command_buffer, &binding, 1,
                         NULL, 0, &signal, 1));
  TRY(worker->slot, "wait",
      halo_semaphore_wait(worker->semaphore, worker->value,
                          HALO_TIMEOUT_INFINITE));
  return true;
}

// ---- native: plain driver API calls (the symbol table only dlopens
// libcuda and resolves the entry points).

static const halo_hal_cuda_symbols_t *cu;
static CUcontext g_context;
static CUfunction g_function;

static bool cu_fail(client_slot_t *slot, CUresult result, const char *call) {
  return fail_status(slot, "driver",
                     halo_hal_cuda_result_to_status(cu, result, call));
}

#define CU_TRY(slot, call, ...)                  \
  do {                                           \
    CUresult cu__result = cu->call(__VA_ARGS__); \
    if (cu__result != CUDA_SUCCESS) {            \
      return cu_fail(slot, cu__result, #call);   \
    }                                            \
  } while (0)

// Compiles the kernel for the device with NVRTC into |out_cubin| (malloc).
static bool native_compile(client_slot_t *slot, CUdevice device,
                           char **out_cubin) {
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = NULL;
  TRY(slot, "NVRTC", halo_hal_cuda_nvrtc_load(&nvrtc));
  int major = 0, minor = 0;
  CU_TRY(slot, cuDeviceGetAttribute, &major,
         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  CU_TRY(slot, cuDeviceGetAttribute, &minor,
         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  char arch[48];
  snprintf(arch, sizeof(arch), "--gpu-architecture=sm_%d%d", major, minor);
  const char *compile_options[1] = {arch};
  nvrtcProgram program;
  if (nvrtc->nvrtcCreateProgram(&program, kKernel, "spin.cu", 0, NULL, NULL) !=
      NVRTC_SUCCESS) {
    return fail(slot, "nvrtcCreateProgram failed");
  }
  nvrtcResult result = nvrtc->nvrtcCompileProgram(program, 1, compile_options);
  size_t size = 0;
  if (result == NVRTC_SUCCESS)
    result = nvrtc->nvrtcGetCUBINSize(program, &size);
  char *cubin = result == NVRTC_SUCCESS ? malloc(size) : NULL;
  if (cubin) result = nvrtc->nvrtcGetCUBIN(program, cubin);
  if (result != NVRTC_SUCCESS || !cubin) {
    char log[400] = "";
    size_t log_size = 0;
    if (nvrtc->nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS &&
        log_size < sizeof(log)) {
      nvrtc->nvrtcGetProgramLog(program, log);
    }
    fail(slot, "NVRTC: %s %s", nvrtc->nvrtcGetErrorString(result), log);
    free(cubin);
    nvrtc->nvrtcDestroyProgram(&program);
    return false;
  }
  nvrtc->nvrtcDestroyProgram(&program);
  *out_cubin = cubin;
  return true;
}

// The process's context (device 0's primary context) and the kernel.
static bool native_process_setup(client_slot_t *slot) {
  // CUDA's own default, which a process of its own gets (halo's loader
  // would set EAGER); CUDA_MODULE_LOADING=EAGER in the environment wins.
  setenv("CUDA_MODULE_LOADING", "LAZY", 0);
  TRY(slot, "loading CUDA", halo_hal_cuda_symbols_load(&cu));
  CUdevice device;
  CU_TRY(slot, cuDeviceGet, &device, 0);
  CU_TRY(slot, cuDevicePrimaryCtxRetain, &g_context, device);
  CU_TRY(slot, cuCtxSetCurrent, g_context);
  bool fake = bench_fake_cuda();
  uint8_t fake_image[BENCH_FAKE_IMAGE_SIZE];
  char *cubin = NULL;
  if (fake) {
    bench_fake_image(fake_image, 0);
  } else if (!native_compile(slot, device, &cubin)) {
    return false;
  }
  CUlibrary library;
  CUresult result =
      cu->cuLibraryLoadData(&library, fake ? (const void *)fake_image : cubin,
                            NULL, NULL, 0, NULL, NULL, 0);
  free(cubin);
  if (result != CUDA_SUCCESS) {
    return cu_fail(slot, result, "cuLibraryLoadData");
  }
  // By name among the library's kernels (the fake driver enumerates only).
  unsigned count = 0;
  CU_TRY(slot, cuLibraryGetKernelCount, &count, library);
  CUkernel kernels[16];
  if (count > 16) count = 16;
  CU_TRY(slot, cuLibraryEnumerateKernels, kernels, count, library);
  const char *want = fake ? "tiny" : "spin";
  for (unsigned i = 0; i < count; ++i) {
    const char *name = NULL;
    CU_TRY(slot, cuKernelGetName, &name, kernels[i]);
    if (name && strcmp(name, want) == 0) {
      CU_TRY(slot, cuKernelGetFunction, &g_function, kernels[i]);
      return true;
    }
  }
  return fail(slot, "no kernel %s in the library", want);
}

static bool native_worker_setup(worker_t *worker) {
  client_slot_t *slot = worker->slot;
  CU_TRY(slot, cuCtxSetCurrent, g_context);
  CU_TRY(slot, cuStreamCreateWithPriority, &worker->stream,
         CU_STREAM_NON_BLOCKING, 0);
  CU_TRY(slot, cuMemAllocAsync, &worker->counter_address, 256, worker->stream);
  CU_TRY(slot, cuMemsetD8Async, worker->counter_address, 0, 256,
         worker->stream);
  CU_TRY(slot, cuStreamSynchronize, worker->stream);
  worker->kernel_ns = (uint64_t)(options.kernel_us * 1000);
  worker->params[0] = &worker->counter_address;
  worker->params[1] = &worker->kernel_ns;
  return true;
}

static bool native_worker_step(worker_t *worker) {
  CU_TRY(worker->slot, cuLaunchKernel, g_function, 1, 1, 1, 32, 1, 1, 0,
         worker->stream, worker->params, NULL);
  CU_TRY(worker->slot, cuStreamSynchronize, worker->stream);
  return true;
}

// ---- the loop

static bool worker_step(worker_t *worker) {
  return options.impl == IMPL_HALO ? halo_worker_step(worker)
                                   : native_worker_step(worker);
}

// Sets up (after the process's own setup), warms up, reports ready, waits
// for the start, loops until the deadline. False with slot->error set.
static bool worker_run(worker_t *worker) {
  client_slot_t *slot = worker->slot;
  bool ok = options.impl == IMPL_HALO ? halo_worker_setup(worker)
                                      : native_worker_setup(worker);
  for (int i = 0; ok && i < TENANTS_WARMUP; ++i) ok = worker_step(worker);
  if (!ok) return false;
  if (options.impl == IMPL_HALO) stage_reached(slot, 6);
  atomic_store(&slot->state, CLIENT_READY);
  atomic_fetch_add(&g_shared->settled, 1);
  futex_wait_for(&g_shared->go, 1);
  // The process's CPU (streams: the process's main thread measures it).
  int64_t cpu = options.impl == IMPL_STREAMS ? 0 : bench_self_cpu_ns();
  int64_t deadline = g_shared->deadline_ns;
  int64_t count = 0;
  int64_t t = bench_now_ns();
  ok = true;
  while (ok && t < deadline) {
    ok = worker_step(worker);
    int64_t next = bench_now_ns();
    slot->samples_us[count % TENANTS_RING] = (float)(next - t) / 1000.0f;
    t = next;
    ++count;
  }
  slot->count = count;
  slot->end_ns = t;
  if (options.impl != IMPL_STREAMS) slot->cpu_ns = bench_self_cpu_ns() - cpu;
  // halod's CPU is read before any client closes (its per-session threads
  // end with the session, and their CPU time with them).
  atomic_fetch_add(&g_shared->finished, 1);
  futex_wait_for(&g_shared->release, 1);
  return ok;
}

static void worker_teardown(worker_t *worker) {
  if (options.impl == IMPL_HALO) {
    halo_client_close(worker->client);  // releases everything
  } else if (worker->stream) {
    cu->cuMemFreeAsync(worker->counter_address, worker->stream);
    cu->cuStreamSynchronize(worker->stream);
    cu->cuStreamDestroy(worker->stream);
  }
}

static void settle_failed(client_slot_t *slot) {
  atomic_store(&slot->state, CLIENT_FAILED);
  atomic_fetch_add(&g_shared->settled, 1);
}

// A forked client process (halo, native): client |index|.
static int client_process_main(int index) {
  client_slot_t *slot = &g_shared->clients[index];
  slot->pid = getpid();
  // The first client sets up alone (M1's "first client").
  if (index > 0) futex_wait_for(&g_shared->phase, 1);
  if (options.impl == IMPL_NATIVE && !native_process_setup(slot)) {
    settle_failed(slot);
    return 1;
  }
  worker_t worker = {.slot = slot};
  bool ok = worker_run(&worker);
  if (!ok && atomic_load(&slot->state) == CLIENT_SETTING_UP) {
    settle_failed(slot);
  }
  worker_teardown(&worker);
  return ok ? 0 : 1;
}

static void *stream_thread_main(void *arg) {
  worker_t *worker = arg;
  // The first stream sets up alone (M1's "first client").
  if (worker->slot != &g_shared->clients[0]) {
    futex_wait_for(&g_shared->phase, 1);
  }
  if (!worker_run(worker) &&
      atomic_load(&worker->slot->state) == CLIENT_SETTING_UP) {
    settle_failed(worker->slot);
  }
  return NULL;
}

// The one process of --impl streams: a thread and a stream per client.
static int streams_process_main(void) {
  int n = options.clients;
  for (int i = 0; i < n; ++i) g_shared->clients[i].pid = getpid();
  if (!native_process_setup(&g_shared->clients[0])) {
    for (int i = 0; i < n; ++i) {
      if (i) strcpy(g_shared->clients[i].error, g_shared->clients[0].error);
      settle_failed(&g_shared->clients[i]);
    }
    return 1;
  }
  worker_t *workers = calloc((size_t)n, sizeof(worker_t));
  pthread_t *threads = calloc((size_t)n, sizeof(pthread_t));
  if (!workers || !threads) return 1;
  for (int i = 0; i < n; ++i) {
    workers[i].slot = &g_shared->clients[i];
    pthread_create(&threads[i], NULL, stream_thread_main, &workers[i]);
  }
  futex_wait_for(&g_shared->go, 1);
  int64_t cpu = bench_self_cpu_ns();
  for (int i = 0; i < n; ++i) pthread_join(threads[i], NULL);
  g_shared->clients[0].cpu_ns = bench_self_cpu_ns() - cpu;
  bool ok = true;
  for (int i = 0; i < n; ++i) {
    ok &= workers[i].slot->error[0] == '\0';
    worker_teardown(&workers[i]);
  }
  return ok ? 0 : 1;
}

//===----------------------------------------------------------------------===//
// The parent: one case
//===----------------------------------------------------------------------===//

static const char *impl_name(void) {
  if (options.label) return options.label;
  return options.impl == IMPL_HALO     ? "halod"
         : options.impl == IMPL_NATIVE ? "native"
                                       : "streams";
}

static void kill_all(pid_t *pids, int count) {
  for (int i = 0; i < count; ++i) {
    if (pids[i] > 0) kill(pids[i], SIGKILL);
  }
  for (int i = 0; i < count; ++i) {
    if (pids[i] > 0) waitpid(pids[i], NULL, 0);
    pids[i] = 0;
  }
}

// Marks clients whose process ended during set-up as failed.
static void reap_during_setup(pid_t *pids, int process_count) {
  for (int p = 0; p < process_count; ++p) {
    int status;
    if (pids[p] <= 0 || waitpid(pids[p], &status, WNOHANG) != pids[p]) {
      continue;
    }
    pids[p] = 0;
    int first = options.impl == IMPL_STREAMS ? 0 : p;
    int last = options.impl == IMPL_STREAMS ? options.clients : p + 1;
    for (int i = first; i < last; ++i) {
      client_slot_t *slot = &g_shared->clients[i];
      if (atomic_load(&slot->state) != CLIENT_SETTING_UP) continue;
      if (!slot->error[0]) {
        snprintf(slot->error, sizeof(slot->error),
                 "exited during set-up (status 0x%x)", status);
      }
      settle_failed(slot);
    }
  }
}

// Waits until |want| clients settled (ready or failed); false on timeout.
static bool wait_settled(pid_t *pids, int process_count, uint32_t want,
                         int64_t deadline) {
  while (atomic_load(&g_shared->settled) < want) {
    reap_during_setup(pids, process_count);
    if (bench_now_ns() > deadline) return false;
    usleep(2000);
  }
  return true;
}

static int compare_floats(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static int run_case(void) {
  const int n = options.clients;
  const char *impl = impl_name();
  char name[96];
  snprintf(name, sizeof(name), "%d tenant%s, %.0f us kernel + wait", n,
           n == 1 ? "" : "s", options.kernel_us);
  memset(g_shared, 0, offsetof(shared_t, clients));
  for (int i = 0; i < n; ++i) {
    client_slot_t *slot = &g_shared->clients[i];
    memset(slot, 0, offsetof(client_slot_t, samples_us));
  }
  memory_snapshot_t *before = calloc(3, sizeof(memory_snapshot_t));
  if (!before) die("oom");
  memory_snapshot_t *first = before + 1, *all = before + 2;
  memory_snapshot(before);

  int process_count = options.impl == IMPL_STREAMS ? 1 : n;
  pid_t pids[TENANTS_MAX_CLIENTS] = {0};
  fflush(NULL);
  int64_t setup_start = bench_now_ns();
  for (int p = 0; p < process_count; ++p) {
    pids[p] = fork();
    if (pids[p] < 0) {
      pids[p] = 0;
      kill_all(pids, process_count);
      die("fork: %s", strerror(errno));
    }
    if (pids[p] == 0) {
      _exit(options.impl == IMPL_STREAMS ? streams_process_main()
                                         : client_process_main(p));
    }
  }
  int64_t deadline = setup_start + (int64_t)(options.setup_timeout * 1e9);
  // The first client alone, then the others.
  bool in_time = wait_settled(pids, process_count, 1, deadline);
  // The wait is not the set-up's: the others' deadline and the set-up
  // time reported leave it out.
  int64_t still_ns = in_time ? nvml_wait_still() : 0;
  deadline += still_ns;
  memory_snapshot(first);
  futex_set(&g_shared->phase, 1);
  // --memory-stages: GPU memory after each set-up step of the others.
  double stage_mib[kStageCount + 1] = {first->used_mib};
  bool staged = options.memory_stages && options.impl == IMPL_HALO && n > 1;
  for (int k = 0; staged && in_time && k < kStageCount; ++k) {
    for (;;) {
      reap_during_setup(pids, process_count);
      uint32_t failed_now = 0;
      for (int i = 1; i < n; ++i) {
        failed_now += atomic_load(&g_shared->clients[i].state) == CLIENT_FAILED;
      }
      if (atomic_load(&g_shared->stage_count[k]) + failed_now >=
          (uint32_t)(n - 1)) {
        break;
      }
      if (bench_now_ns() > deadline) {
        in_time = false;
        break;
      }
      usleep(1000);
    }
    stage_mib[k + 1] = nvml_used_mib();
    futex_set(&g_shared->phase, (uint32_t)k + 2);
  }
  if (staged) futex_set(&g_shared->phase, kStageCount + 2);
  in_time = in_time && wait_settled(pids, process_count, (uint32_t)n, deadline);
  double setup_s = (double)(bench_now_ns() - setup_start - still_ns) / 1e9;
  if (!in_time) {
    // Clients still setting up: failed (their processes are killed; with
    // streams the whole process goes).
    for (int i = 0; i < n; ++i) {
      client_slot_t *slot = &g_shared->clients[i];
      if (atomic_load(&slot->state) != CLIENT_SETTING_UP) continue;
      snprintf(slot->error, sizeof(slot->error),
               "not set up within %.0f s (killed)", options.setup_timeout);
      settle_failed(slot);
      int p = options.impl == IMPL_STREAMS ? 0 : i;
      if (pids[p] > 0) {
        kill(pids[p], SIGKILL);
        waitpid(pids[p], NULL, 0);
        pids[p] = 0;
      }
    }
  }
  memory_snapshot(all);
  int ready = 0, failed = 0;
  const char *first_error = NULL;
  for (int i = 0; i < n; ++i) {
    client_slot_t *slot = &g_shared->clients[i];
    if (atomic_load(&slot->state) == CLIENT_READY) {
      ++ready;
    } else {
      ++failed;
      if (!first_error) first_error = slot->error;
    }
  }
  char note[768] = "";
  if (failed) {
    snprintf(note, sizeof(note), "%d of %d clients failed to set up: %s",
             failed, n, first_error);
    fprintf(stderr, "halo-bench-tenants: %s [%s]: %s\n", impl,
            options.impl == IMPL_HALO ? "halo" : "native", note);
    if (!options.allow_failures || ready == 0) {
      g_shared->deadline_ns = 0;  // the ready ones leave at once
      futex_set(&g_shared->go, 1);
      kill_all(pids, process_count);
      bench_row_t row = bench_row("T8", name, impl);
      row.clients = n;
      row.note = note;
      bench_csv_write(&row);
      free(before);
      return 1;
    }
  }

  // The measured window.
  pid_t daemon_pid =
      options.impl == IMPL_HALO ? g_shared->clients[0].daemon_pid : 0;
  for (int i = 0; daemon_pid <= 0 && options.impl == IMPL_HALO && i < n; ++i) {
    daemon_pid = g_shared->clients[i].daemon_pid;
  }
  int64_t daemon_cpu = daemon_pid > 0 ? bench_process_cpu_ns(daemon_pid) : -1;
  // The threads of halod and its device workers, for where their CPU goes.
  bench_tree_t *trees = calloc(2, sizeof(bench_tree_t));
  if (!trees) die("oom");
  if (daemon_pid > 0) bench_tree_take(&trees[0], 0, daemon_pid);
  int64_t start = bench_now_ns();
  g_shared->deadline_ns = start + (int64_t)(options.seconds * 1e9);
  futex_set(&g_shared->go, 1);
  int64_t wait_deadline = g_shared->deadline_ns + 60 * 1000000000ll;
  for (;;) {
    // Out of the loop, or gone (a client that died in it).
    reap_during_setup(pids, process_count);
    uint32_t gone = 0;
    for (int i = 0; i < n; ++i) {
      int p = options.impl == IMPL_STREAMS ? 0 : i;
      gone += atomic_load(&g_shared->clients[i].state) == CLIENT_READY &&
              pids[p] == 0;
    }
    if (atomic_load(&g_shared->finished) + gone >= (uint32_t)ready) break;
    if (bench_now_ns() > wait_deadline) {
      kill_all(pids, process_count);
      die("%s: clients still running 60 s after the deadline", impl);
    }
    usleep(1000);
  }
  if (daemon_cpu >= 0) {
    int64_t after = bench_process_cpu_ns(daemon_pid);
    daemon_cpu = after >= 0 ? after - daemon_cpu : -1;
    bench_tree_take(&trees[1], 0, daemon_pid);
  }
  futex_set(&g_shared->release, 1);
  for (int p = 0; p < process_count; ++p) {
    while (pids[p] > 0) {
      int status;
      pid_t done = waitpid(pids[p], &status, WNOHANG);
      if (done == pids[p]) {
        pids[p] = 0;
      } else if (bench_now_ns() > wait_deadline) {
        kill_all(pids, process_count);
        die("%s: clients still running 60 s after the deadline", impl);
      } else {
        usleep(2000);
      }
    }
  }

  // Figures.
  int64_t steps = 0, cpu = 0, end = start, kept = 0;
  double rate_min = INFINITY, rate_max = 0;
  int measured = 0;
  for (int i = 0; i < n; ++i) {
    client_slot_t *slot = &g_shared->clients[i];
    if (atomic_load(&slot->state) != CLIENT_READY) continue;
    if (slot->error[0]) {
      die("%s: client %d failed in its loop: %s", impl, i, slot->error);
    }
    ++measured;
    steps += slot->count;
    cpu += slot->cpu_ns;
    if (slot->end_ns > end) end = slot->end_ns;
    double rate = (double)slot->count / ((double)(slot->end_ns - start) / 1e9);
    if (rate < rate_min) rate_min = rate;
    if (rate > rate_max) rate_max = rate;
    kept += slot->count < TENANTS_RING ? slot->count : TENANTS_RING;
  }
  float *all_samples = malloc((size_t)(kept ? kept : 1) * sizeof(float));
  if (!all_samples) die("oom");
  int64_t at = 0;
  for (int i = 0; i < n; ++i) {
    client_slot_t *slot = &g_shared->clients[i];
    if (atomic_load(&slot->state) != CLIENT_READY) continue;
    int64_t own = slot->count < TENANTS_RING ? slot->count : TENANTS_RING;
    memcpy(all_samples + at, slot->samples_us, (size_t)own * sizeof(float));
    at += own;
  }
  qsort(all_samples, (size_t)kept, sizeof(float), compare_floats);
  double total_us = 0;
  for (int64_t i = 0; i < kept; ++i) total_us += all_samples[i];
  double elapsed = (double)(end - start) / 1e9;
  double rate = elapsed > 0 ? (double)steps / elapsed : 0;
  double p50 = kept ? all_samples[kept / 2] : NAN;
  double p99 = kept ? all_samples[(int64_t)((double)(kept - 1) * 0.99)] : NAN;
  double mean = kept ? total_us / (double)kept : NAN;
  double cpu_per = steps ? (double)cpu / 1e3 / (double)steps : NAN;
  double daemon_per =
      daemon_cpu >= 0 && steps ? (double)daemon_cpu / 1e3 / (double)steps : NAN;
  free(all_samples);

  printf("%-8s %4d %4d %10lld %10.0f %9.0f %9.0f %8.1f %8.1f %8.1f %8.1f\n",
         impl, n, measured, (long long)steps, rate, rate_min, rate_max, p50,
         p99, cpu_per, daemon_per);
  if (trees[1].process_count > 0 && steps > 0) {
    printf("  CPU per step by thread (name x threads):\n");
    bench_tree_print(stdout, "    ", &trees[0], &trees[1], (double)steps);
  }
  free(trees);
  char t8_note[1024];
  const char *loading = getenv("CUDA_MODULE_LOADING");
  snprintf(t8_note, sizeof(t8_note),
           "per client %.0f-%.0f /s; set-up %.1f s%s%s%s%s", rate_min, rate_max,
           setup_s, options.impl == IMPL_HALO ? "" : "; CUDA_MODULE_LOADING=",
           options.impl == IMPL_HALO ? ""
           : loading                 ? loading
                                     : "LAZY",
           note[0] ? "; " : "", note);
  bench_row_t row = bench_row("T8", name, impl);
  row.clients = n;
  row.n = steps;
  row.p50_us = p50;
  row.p99_us = p99;
  row.mean_us = mean;
  row.per_second = rate;
  row.cpu_us = cpu_per;
  row.daemon_cpu_us = daemon_per;
  row.note = t8_note;
  bench_csv_write(&row);

  // M1: GPU memory. Every row names the case's client count.
  double base_mib = before->used_mib, first_mib = first->used_mib,
         all_mib = all->used_mib;
  double per_additional = ready > 1 ? (all_mib - first_mib) / (ready - 1) : NAN;
  // Client processes in NVML's list (halo's: none expected).
  int listed = 0;
  double listed_mib = 0;
  for (int i = 0; i < n; ++i) {
    client_slot_t *slot = &g_shared->clients[i];
    if (atomic_load(&slot->state) != CLIENT_READY) continue;
    if (options.impl == IMPL_STREAMS && i > 0) break;
    bool seen = false;
    double mib = memory_of(all, slot->pid, &seen);
    if (seen) {
      ++listed;
      listed_mib += mib;
    }
  }
  bool have_nvml = !nvml.why[0];
  double daemon_first = NAN, daemon_all = NAN;
  if (daemon_pid > 0 && have_nvml) {
    daemon_first = memory_of(first, daemon_pid, NULL);
    daemon_all = memory_of(all, daemon_pid, NULL);
  }
  printf(
      "  M1 %s: device used %.0f MiB before, %.0f with the first client, %.0f "
      "with %d; per additional client %.1f MiB; client processes listed by "
      "NVML: %d (%.1f MiB each)",
      impl, base_mib, first_mib, all_mib, ready, per_additional, listed,
      listed ? listed_mib / listed : 0.0);
  if (daemon_pid > 0) {
    printf("; halod %.0f MiB with 1 client, %.0f with %d", daemon_first,
           daemon_all, ready);
  }
  printf("%s%s\n", have_nvml ? "" : "; ", nvml.why);
  char m1_note[256];
  snprintf(m1_note, sizeof(m1_note),
           "%s%s%d of %d client processes listed by NVML%s",
           have_nvml ? "" : nvml.why, have_nvml ? "" : "; ", listed,
           options.impl == IMPL_STREAMS ? 1 : ready,
           options.impl == IMPL_HALO      ? " (a halo client holds no context)"
           : options.impl == IMPL_STREAMS ? " (one process)"
                                          : "");
  const struct {
    const char *name;
    double mib;
  } figures[] = {
      {"device used before", base_mib},
      {"device used with the first client", first_mib},
      {"device used with all", all_mib},
      {"first client", first_mib - base_mib},
      {"per additional client", per_additional},
      {"client process (NVML)",
       have_nvml ? (listed ? listed_mib / listed : 0) : NAN},
      {"halod with the first client (NVML)", daemon_first},
      {"halod with all (NVML)", daemon_all},
  };
  if (staged) {
    printf("  M1 %s: GPU memory per additional client by set-up step:", impl);
    for (int k = 0; k < kStageCount; ++k) {
      double mib = (stage_mib[k + 1] - stage_mib[k]) / (n - 1);
      printf("%s %s %.2f MiB", k ? "," : "", kStages[k], mib);
      char step_name[96];
      snprintf(step_name, sizeof(step_name), "set-up step: %s", kStages[k]);
      bench_row_t m1 = bench_row("M1", step_name, impl);
      m1.clients = ready;
      m1.memory_mib = mib;
      bench_csv_write(&m1);
    }
    printf("\n");
  }
  for (size_t i = 0; i < sizeof(figures) / sizeof(figures[0]); ++i) {
    if (options.impl != IMPL_HALO && strncmp(figures[i].name, "halod", 5) == 0)
      continue;
    bench_row_t m1 = bench_row("M1", figures[i].name, impl);
    m1.clients = ready;
    m1.memory_mib = figures[i].mib;
    if (strcmp(figures[i].name, "per additional client") == 0)
      m1.note = m1_note;
    bench_csv_write(&m1);
  }
  free(before);
  return 0;
}

int main(int argc, char **argv) {
  static const struct option long_options[] = {
      {"impl", required_argument, NULL, 'i'},
      {"clients", required_argument, NULL, 'n'},
      {"seconds", required_argument, NULL, 's'},
      {"kernel-us", required_argument, NULL, 'k'},
      {"label", required_argument, NULL, 'l'},
      {"address", required_argument, NULL, 'a'},
      {"csv", required_argument, NULL, 'c'},
      {"allow-failures", no_argument, NULL, 'f'},
      {"setup-timeout", required_argument, NULL, 't'},
      {"memory-stages", no_argument, NULL, 'm'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *impl = NULL;
  int option;
  while ((option = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
    switch (option) {
      case 'i':
        impl = optarg;
        break;
      case 'n':
        options.clients = atoi(optarg);
        break;
      case 's':
        options.seconds = atof(optarg);
        break;
      case 'k':
        options.kernel_us = atof(optarg);
        break;
      case 'l':
        options.label = optarg;
        break;
      case 'a':
        options.address = optarg;
        break;
      case 'c':
        options.csv = optarg;
        break;
      case 'f':
        options.allow_failures = true;
        break;
      case 't':
        options.setup_timeout = atof(optarg);
        break;
      case 'm':
        options.memory_stages = true;
        break;
      default:
        fprintf(stderr,
                "usage: halo-bench-tenants --impl halo|native|streams "
                "[--clients N] [--seconds S] [--kernel-us US]\n"
                "       [--label TEXT] [--address ADDR] [--csv FILE] "
                "[--allow-failures] [--setup-timeout S] "
                "[--memory-stages]\n");
        return option == 'h' ? 0 : 2;
    }
  }
  if (!impl || (strcmp(impl, "halo") && strcmp(impl, "native") &&
                strcmp(impl, "streams"))) {
    die("--impl halo, native or streams");
  }
  options.impl = strcmp(impl, "halo") == 0     ? IMPL_HALO
                 : strcmp(impl, "native") == 0 ? IMPL_NATIVE
                                               : IMPL_STREAMS;
  if (options.clients < 1 || options.clients > TENANTS_MAX_CLIENTS ||
      !(options.seconds > 0) || !(options.kernel_us >= 0) ||
      !(options.setup_timeout > 0)) {
    die("--clients 1..%d, --seconds > 0, --kernel-us >= 0, --setup-timeout "
        "> 0",
        TENANTS_MAX_CLIENTS);
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  g_shared = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_shared == MAP_FAILED) die("mmap: %s", strerror(errno));
  if (options.csv) bench_csv_open(options.csv, "halo-bench-tenants");
  nvml_open();
  printf("%-8s %4s %4s %10s %10s %9s %9s %8s %8s %8s %8s\n", "impl", "N", "ok",
         "steps", "steps/s", "min/cl", "max/cl", "p50 us", "p99 us", "cpu us",
         "halod us");
  int rc = run_case();
  bench_csv_close();
  return rc;
}
