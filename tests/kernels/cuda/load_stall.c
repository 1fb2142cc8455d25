// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-cuda-load-stall: which driver calls wait for a long kernel running
// on another stream of the same context? Each call is timed alone (idle)
// and while halo_test_spin keeps a non-blocking stream busy for SPIN_MS; a
// call that waits for the kernel takes about the kernel's remaining time.
// Then the same for lazy module loading (a child process with
// CUDA_MODULE_LOADING=LAZY). The figures are in docs/architecture.md.
//
//   halo-cuda-load-stall TEST_KERNELS.cu [TEST_KERNELS.ptx]
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hal/cuda/cuda_device.h"
#include "hal/registry.h"

#define SPIN_MS 1000

static halo_hal_cuda_device_t *device;
static const halo_hal_cuda_symbols_t *cu;
static CUstream busy;  // runs the spin kernel
static CUstream side;  // everything else
static CUfunction spin;
static CUfunction tiny;
static const void *cubin;  // a CUBIN of test_kernels.cu
static char *ptx;          // nvcc's PTX, or NULL
static const char *source_path;
static bool lazy;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void check(CUresult result, const char *call) {
  if (result == CUDA_SUCCESS) return;
  halo_status_t status = halo_hal_cuda_result_to_status(cu, result, call);
  fprintf(stderr, "load-stall: %s\n", halo_status_message(status));
  exit(1);
}
#define CHECK(call, ...) check(cu->call(__VA_ARGS__), #call)

static void check_status(halo_status_t status, const char *what) {
  if (!status) return;
  fprintf(stderr, "load-stall: %s: %s\n", what, halo_status_message(status));
  exit(1);
}

static char *read_file(const char *path, size_t *out_size) {
  FILE *file = fopen(path, "rb");
  if (!file) return NULL;
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  char *data = malloc((size_t)size + 1);
  if (fread(data, 1, (size_t)size, file) != (size_t)size) exit(1);
  data[size] = '\0';
  fclose(file);
  if (out_size) *out_size = (size_t)size;
  return data;
}

static void start_spin(void) {
  unsigned long long ns = SPIN_MS * 1000000ull;
  void *out = NULL;
  void *args[] = {&ns, &out};
  CHECK(cuLaunchKernel, spin, 1, 1, 1, 1, 1, 1, 0, busy, args, NULL);
  usleep(30000);  // running, not just queued
}

// Waits for both streams (the symbol table has no cuCtxSynchronize:
// hal/cuda/cuda_symbols.h says why).
static void sync_streams(void) {
  CHECK(cuStreamSynchronize, busy);
  CHECK(cuStreamSynchronize, side);
}

// Times |op| idle, then under the spin kernel; prints both.
typedef void (*op_fn)(void);
static void measure(const char *name, op_fn op, op_fn undo) {
  double t0 = now_ms();
  op();
  double idle = now_ms() - t0;
  if (undo) undo();
  sync_streams();
  start_spin();
  t0 = now_ms();
  op();
  double busy_ms = now_ms() - t0;
  double spin_left = SPIN_MS - 30;
  CHECK(cuStreamSynchronize, busy);
  if (undo) undo();
  sync_streams();
  printf(
      "load-stall: %-5s %-46s idle %8.3f ms, under a running kernel "
      "%8.3f ms%s\n",
      lazy ? "lazy" : "eager", name, idle, busy_ms,
      busy_ms > 0.5 * spin_left ? "  <- WAITS for the kernel" : "");
  fflush(stdout);
}

// ---- the operations

static CUmodule module;
static CUlibrary library;
static CUkernel kernel;
static CUfunction function;
static void *host;

static void op_tiny_launch(void) {
  CUdeviceptr none = 0;
  unsigned n = 0;
  void *args[] = {&none, &none, &none, &n};
  CHECK(cuLaunchKernel, tiny, 1, 1, 1, 32, 1, 1, 0, side, args, NULL);
  CHECK(cuStreamSynchronize, side);
}
static void op_module_load(void) {
  CHECK(cuModuleLoadData, &module, cubin);
}
static void op_module_get_function(void) {
  CHECK(cuModuleGetFunction, &function, module, "halo_test_add");
}
static void op_module_unload(void) {
  CHECK(cuModuleUnload, module);
  module = NULL;
}
static void op_module_load_ptx(void) {
  CHECK(cuModuleLoadData, &module, ptx);
}
static void op_library_load(void) {
  CHECK(cuLibraryLoadData, &library, cubin, NULL, NULL, 0, NULL, NULL, 0);
}
static void op_library_unload(void) {
  CHECK(cuLibraryUnload, library);
  library = NULL;
}
static void op_library_get_kernel(void) {
  CHECK(cuLibraryGetKernel, &kernel, library, "halo_test_add");
}
static void op_kernel_param_info(void) {
  size_t offset, size;
  CHECK(cuKernelGetParamInfo, kernel, 0, &offset, &size);
}
static void op_kernel_get_function(void) {
  CHECK(cuKernelGetFunction, &function, kernel);
}
static void op_first_launch(void) {
  CUdeviceptr none = 0;
  unsigned n = 0;
  void *args[] = {&none, &none, &none, &n};
  CHECK(cuLaunchKernel, function, 1, 1, 1, 32, 1, 1, 0, side, args, NULL);
  CHECK(cuStreamSynchronize, side);
}
static void op_link_ptx(void) {
  CUlinkState link;
  CHECK(cuLinkCreate, 0, NULL, NULL, &link);
  CHECK(cuLinkAddData, link, CU_JIT_INPUT_PTX, ptx, strlen(ptx) + 1, "t.ptx", 0,
        NULL, NULL);
  void *out;
  size_t size;
  CHECK(cuLinkComplete, link, &out, &size);
  CHECK(cuLinkDestroy, link);
}
static void op_alloc_free(void) {
  CUdeviceptr pointer;
  CHECK(cuMemAllocAsync, &pointer, 64 << 20, side);
  CHECK(cuMemFreeAsync, pointer, side);
  CHECK(cuStreamSynchronize, side);
}
static void op_host_register(void) {
  CHECK(cuMemHostRegister, host, 1 << 20,
        CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
}
static void op_host_unregister(void) {
  CHECK(cuMemHostUnregister, host);
}
static int variant;
static void op_hal_executable_source(void) {
  // What halod does for CUDA source: NVRTC + load + enumerate.
  char define[64];
  snprintf(define, sizeof(define), "-DHALO_TEST_VARIANT=%d", ++variant);
  const char *options[] = {define};
  size_t size;
  char *text = read_file(source_path, &size);
  halo_hal_executable_params_t params = {
      .format = HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE,
      .data = text,
      .size = size,
      .options = options,
      .option_count = 1};
  halo_hal_executable_t *executable = NULL;
  check_status(device->base.vtable->create_executable(&device->base, &params,
                                                      &executable),
               "create_executable");
  free(text);
  // Unloaded by the reaper: off the clock.
  halo_hal_executable_destroy(executable);
}

// A launch on another stream while a third thread loads a module.
static void *load_thread(void *arg) {
  (void)arg;
  cu->cuCtxSetCurrent(device->context);
  CUmodule loaded;
  double t0 = now_ms();
  CHECK(cuModuleLoadData, &loaded, cubin);
  double dt = now_ms() - t0;
  printf("load-stall: %-5s %-46s under a running kernel %8.3f ms\n",
         lazy ? "lazy" : "eager", "(thread B) cuModuleLoadData", dt);
  CHECK(cuModuleUnload, loaded);
  return NULL;
}
static void measure_launch_during_load(void) {
  start_spin();
  pthread_t thread;
  pthread_create(&thread, NULL, load_thread, NULL);
  usleep(20000);
  double t0 = now_ms();
  op_tiny_launch();
  double dt = now_ms() - t0;
  pthread_join(thread, NULL);
  CHECK(cuStreamSynchronize, busy);
  printf("load-stall: %-5s %-46s under a running kernel %8.3f ms%s\n",
         lazy ? "lazy" : "eager",
         "(thread A) launch+sync on a 3rd stream meanwhile", dt,
         dt > 0.5 * SPIN_MS ? "  <- WAITS" : "");
  fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s TEST_KERNELS.cu [TEST_KERNELS.ptx] [--lazy]\n",
            argv[0]);
    return 2;
  }
  source_path = argv[1];
  for (int i = 2; i < argc; ++i) {
    if (strcmp(argv[i], "--lazy") == 0) {
      lazy = true;
    } else {
      ptx = read_file(argv[i], NULL);
    }
  }
  char reason[256];
  if (!halo_hal_cuda_probe(reason, sizeof(reason))) {
    printf("load-stall: SKIP: %s\n", reason);
    return 77;
  }
  const char *mode = getenv("CUDA_MODULE_LOADING");
  printf("load-stall: CUDA_MODULE_LOADING=%s\n", mode ? mode : "(unset)");
  halo_hal_device_t *base;
  check_status(halo_hal_cuda_device_create(0, NULL, &base), "device");
  device = halo_hal_cuda_device_cast(base);
  cu = device->cu;
  check_status(halo_hal_cuda_device_make_current(device), "current");
  CHECK(cuStreamCreateWithPriority, &busy, CU_STREAM_NON_BLOCKING, 0);
  CHECK(cuStreamCreateWithPriority, &side, CU_STREAM_NON_BLOCKING, 0);

  size_t size;
  char *text = read_file(source_path, &size);
  halo_hal_executable_params_t params = {
      .format = HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE,
      .data = text,
      .size = size};
  halo_hal_cuda_image_t image;
  check_status(halo_hal_cuda_compiler_build(device, &params, &image), "NVRTC");
  cubin = image.data;
  CUmodule base_module;
  CHECK(cuModuleLoadData, &base_module, cubin);
  CHECK(cuModuleGetFunction, &spin, base_module, "halo_test_spin");
  CHECK(cuModuleGetFunction, &tiny, base_module, "halo_test_add");
  op_tiny_launch();  // loads it, lazily or not
  {
    unsigned long long ns = 1000;
    void *out = NULL;
    void *args[] = {&ns, &out};
    CHECK(cuLaunchKernel, spin, 1, 1, 1, 1, 1, 1, 0, busy, args, NULL);
    CHECK(cuStreamSynchronize, busy);
  }
  host = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

  measure("launch+sync on another stream", op_tiny_launch, NULL);
  if (!lazy) {
    measure("cuModuleLoadData (CUBIN)", op_module_load, op_module_unload);
    op_module_load();
    measure("cuModuleUnload", op_module_unload, op_module_load);
    op_module_unload();
    measure("cuLibraryLoadData (CUBIN)", op_library_load, op_library_unload);
    op_library_load();
    measure("cuLibraryGetKernel", op_library_get_kernel, NULL);
    measure("cuKernelGetParamInfo", op_kernel_param_info, NULL);
    measure("cuKernelGetFunction", op_kernel_get_function, NULL);
    measure("cuLibraryUnload", op_library_unload, op_library_load);
    op_library_unload();
    if (ptx) {
      measure("cuModuleLoadData (PTX, JIT)", op_module_load_ptx,
              op_module_unload);
      measure("cuLinkCreate/AddData/Complete (PTX to CUBIN)", op_link_ptx,
              NULL);
    }
    measure("cuMemAllocAsync+cuMemFreeAsync 64 MiB + sync", op_alloc_free,
            NULL);
    measure("cuMemHostRegister 1 MiB", op_host_register, op_host_unregister);
    op_host_register();
    measure("cuMemHostUnregister 1 MiB", op_host_unregister, op_host_register);
    op_host_unregister();
    measure("HAL create_executable (NVRTC + load)", op_hal_executable_source,
            NULL);
    halo_hal_cuda_thread_flush(&device->reaper);
    measure_launch_during_load();
  } else {
    // Each step of a lazily loaded library, in order, each under its own
    // running kernel.
    start_spin();
    double t0 = now_ms();
    op_library_load();
    double t1 = now_ms();
    op_library_get_kernel();
    double t2 = now_ms();
    op_kernel_param_info();
    double t3 = now_ms();
    CHECK(cuStreamSynchronize, busy);
    start_spin();
    double t4 = now_ms();
    op_kernel_get_function();
    double t5 = now_ms();
    CHECK(cuStreamSynchronize, busy);
    start_spin();
    double t6 = now_ms();
    op_first_launch();
    double t7 = now_ms();
    CHECK(cuStreamSynchronize, busy);
    printf(
        "load-stall: lazy  cuLibraryLoadData %.3f ms, cuLibraryGetKernel "
        "%.3f ms, cuKernelGetParamInfo %.3f ms, cuKernelGetFunction %.3f "
        "ms, first launch+sync %.3f ms (each under a running %d ms "
        "kernel)\n",
        t1 - t0, t2 - t1, t3 - t2, t5 - t4, t7 - t6, SPIN_MS);
    start_spin();
    t0 = now_ms();
    op_module_load();
    t1 = now_ms();
    op_module_get_function();
    t2 = now_ms();
    CHECK(cuStreamSynchronize, busy);
    start_spin();
    t3 = now_ms();
    op_first_launch();
    t4 = now_ms();
    CHECK(cuStreamSynchronize, busy);
    printf(
        "load-stall: lazy  cuModuleLoadData %.3f ms, cuModuleGetFunction "
        "%.3f ms, first launch+sync %.3f ms (under a running kernel)\n",
        t1 - t0, t2 - t1, t4 - t3);
  }
  fflush(stdout);

  if (!lazy) {
    // The same with lazy loading, in a fresh process (the mode is read by
    // cuInit).
    pid_t child = fork();
    if (child == 0) {
      setenv("CUDA_MODULE_LOADING", "LAZY", 1);
      char *args[] = {argv[0], argv[1], "--lazy", NULL};
      execv("/proc/self/exe", args);
      _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
  }
  free(image.owned);
  free(text);
  return 0;
}
