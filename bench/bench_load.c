// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-bench-load: loading executables through halod (C1), first and
// cached, beside a process that compiles and loads them itself.
//
//   halo-bench-load --phase cold|warm [--address ADDR] [--salt TEXT]
//                   [--csv FILE]
//
// The code: a few small kernels in CUDA C (the text gets --salt in a
// comment, so that a long-running halod or a kept cache never saw it), and
// the same kernels as PTX (NVRTC here, for the device's compute capability
// that halod reports: the client needs no context for that).
//
// --phase cold, against a halod just started with an empty cache directory
// (scripts/gpu-bench starts it; CUDA_CACHE_PATH unset, so the driver's JIT
// cache is below it too):
//   halod  CUDA C source, first load   halo_executable_create: NVRTC in
//                                      halod, then the load
//          PTX, first load             the driver's JIT linker (halod
//                                      caches the CUBIN), then the load
//          ... from another client     the same bytes from a second
//                                      session: halod's content-hash hit
//                                      (median of 5)
//   native (a forked process with a context of its own, CUDA_CACHE_PATH an
//          empty folder): cuInit + the primary context; NVRTC to CUBIN +
//          cuLibraryLoadData; cuLibraryLoadData of the PTX (JIT), then again
//          (the driver's JIT cache)
// --phase warm, against a halod restarted with the same cache directory:
//   halod  CUDA C source, after a restart   the CUBIN from halod's disk cache
//          PTX, after a restart             the same
// Milliseconds, measured by the client (request included).
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "hal/cuda/cuda_symbols.h"
#include "halo/halo.h"

static const char kKernels[] =
    "extern \"C\" __global__ void c1_axpy(const float *x, float *y, float a,\n"
    "                                     unsigned n) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n"
    "extern \"C\" __global__ void c1_sum(const float *x, float *out,\n"
    "                                    unsigned n) {\n"
    "  __shared__ float partial[256];\n"
    "  float s = 0;\n"
    "  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "       i += gridDim.x * blockDim.x) s += x[i];\n"
    "  partial[threadIdx.x] = s;\n"
    "  __syncthreads();\n"
    "  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {\n"
    "    if (threadIdx.x < w) partial[threadIdx.x] += partial[threadIdx.x + "
    "w];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (threadIdx.x == 0) atomicAdd(out, partial[0]);\n"
    "}\n"
    "extern \"C\" __global__ void c1_softmax(const float *x, float *y,\n"
    "                                        unsigned cols) {\n"
    "  const float *row = x + blockIdx.x * cols;\n"
    "  float *out = y + blockIdx.x * cols;\n"
    "  float m = -1e30f, s = 0;\n"
    "  for (unsigned c = threadIdx.x; c < cols; c += blockDim.x)\n"
    "    m = fmaxf(m, row[c]);\n"
    "  for (int o = 16; o > 0; o /= 2)\n"
    "    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));\n"
    "  for (unsigned c = threadIdx.x; c < cols; c += blockDim.x)\n"
    "    s += __expf(row[c] - m);\n"
    "  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, "
    "o);\n"
    "  for (unsigned c = threadIdx.x; c < cols; c += blockDim.x)\n"
    "    out[c] = __expf(row[c] - m) / s;\n"
    "}\n"
    "extern \"C\" __global__ void c1_gemm(const float *a, const float *b,\n"
    "                                     float *c, unsigned n) {\n"
    "  __shared__ float ta[16][16], tb[16][16];\n"
    "  unsigned r = blockIdx.y * 16 + threadIdx.y;\n"
    "  unsigned k = blockIdx.x * 16 + threadIdx.x;\n"
    "  float acc = 0;\n"
    "  for (unsigned t = 0; t < n; t += 16) {\n"
    "    ta[threadIdx.y][threadIdx.x] = a[r * n + t + threadIdx.x];\n"
    "    tb[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + k];\n"
    "    __syncthreads();\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 16; ++i) acc += ta[threadIdx.y][i] * "
    "tb[i][threadIdx.x];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  c[r * n + k] = acc;\n"
    "}\n";

static struct {
  const char *phase;
  const char *address;
  const char *salt;
  const char *csv;
} options = {.salt = ""};

static void die(const char *what, halo_status_t status) {
  fprintf(stderr, "halo-bench-load: %s: %s: %s\n", what,
          halo_status_code_name(halo_status_code(status)),
          halo_status_message(status));
  exit(1);
}
#define CHECK(what, expr)                        \
  do {                                           \
    halo_status_t check__status = (expr);        \
    if (check__status) die(what, check__status); \
  } while (0)

static void report(const char *name, const char *impl, double ms,
                   const char *note) {
  printf("  %-62s %-7s %10.2f ms\n", name, impl, ms);
  bench_row_t row = bench_row("C1", name, impl);
  row.clients = 1;
  row.ms = ms;
  row.note = note;
  bench_csv_write(&row);
}

// The kernels' source with the salt, malloc'ed.
static char *source_text(void) {
  size_t size = sizeof(kKernels) + strlen(options.salt) + 32;
  char *text = malloc(size);
  if (!text) exit(1);
  snprintf(text, size, "// salt %s\n%s", options.salt, kKernels);
  return text;
}

// NVRTC: |source| to PTX (|arch| "compute_90") or to CUBIN ("sm_90");
// malloc'ed into |out_code| / |out_size|.
static halo_status_t compile(const char *source, const char *arch, bool ptx,
                             char **out_code, size_t *out_size) {
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = NULL;
  halo_status_t status = halo_hal_cuda_nvrtc_load(&nvrtc);
  if (status) return status;
  char option[64];
  snprintf(option, sizeof(option), "--gpu-architecture=%s", arch);
  const char *compile_options[1] = {option};
  nvrtcProgram program;
  if (nvrtc->nvrtcCreateProgram(&program, source, "c1.cu", 0, NULL, NULL) !=
      NVRTC_SUCCESS) {
    return halo_status_make(HALO_STATUS_INTERNAL, "nvrtcCreateProgram");
  }
  nvrtcResult result = nvrtc->nvrtcCompileProgram(program, 1, compile_options);
  size_t size = 0;
  if (result == NVRTC_SUCCESS) {
    result = ptx ? nvrtc->nvrtcGetPTXSize(program, &size)
                 : nvrtc->nvrtcGetCUBINSize(program, &size);
  }
  char *code = result == NVRTC_SUCCESS ? malloc(size) : NULL;
  if (code) {
    result = ptx ? nvrtc->nvrtcGetPTX(program, code)
                 : nvrtc->nvrtcGetCUBIN(program, code);
  }
  if (result != NVRTC_SUCCESS || !code) {
    char log[2048] = "";
    size_t log_size = 0;
    if (nvrtc->nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS &&
        log_size < sizeof(log)) {
      nvrtc->nvrtcGetProgramLog(program, log);
    }
    nvrtc->nvrtcDestroyProgram(&program);
    free(code);
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT, "NVRTC: %s\n%s",
                            nvrtc->nvrtcGetErrorString(result), log);
  }
  nvrtc->nvrtcDestroyProgram(&program);
  *out_code = code;
  *out_size = ptx ? strlen(code) + 1 : size;
  return NULL;
}

// halo_executable_create of |params| by |client|, milliseconds.
static double load_ms(halo_client_t *client,
                      const halo_executable_params_t *params,
                      const char *what) {
  halo_executable_t *executable = NULL;
  int64_t start = bench_now_ns();
  CHECK(what, halo_executable_create(client, 0, params, &executable));
  double ms = (double)(bench_now_ns() - start) / 1e6;
  halo_executable_release(executable);
  return ms;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// The median of 5 loads (cached ones).
static double load_median_ms(halo_client_t *client,
                             const halo_executable_params_t *params,
                             const char *what) {
  double ms[5];
  for (int i = 0; i < 5; ++i) ms[i] = load_ms(client, params, what);
  qsort(ms, 5, sizeof(double), compare_doubles);
  return ms[2];
}

//===----------------------------------------------------------------------===//
// Native: a process of its own compiles and loads (forked before anything
// touches CUDA)
//===----------------------------------------------------------------------===//

static const halo_hal_cuda_symbols_t *cu;

static double native_load_ms(const void *code, const char *what) {
  CUlibrary library;
  int64_t start = bench_now_ns();
  CUresult result =
      cu->cuLibraryLoadData(&library, code, NULL, NULL, 0, NULL, NULL, 0);
  double ms = (double)(bench_now_ns() - start) / 1e6;
  if (result != CUDA_SUCCESS) {
    die(what, halo_hal_cuda_result_to_status(cu, result, "cuLibraryLoadData"));
  }
  cu->cuLibraryUnload(library);
  return ms;
}

static int native_main(const char *source) {
  // An empty JIT cache of its own.
  char cache[] = "/tmp/halo-bench-load-cache.XXXXXX";
  if (!mkdtemp(cache)) {
    perror("mkdtemp");
    return 1;
  }
  setenv("CUDA_CACHE_PATH", cache, 1);
  int64_t start = bench_now_ns();
  CHECK("loading CUDA", halo_hal_cuda_symbols_load(&cu));
  CUdevice device;
  CUcontext context;
  if (cu->cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      cu->cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      cu->cuCtxSetCurrent(context) != CUDA_SUCCESS) {
    fprintf(stderr, "halo-bench-load: native: no context\n");
    return 1;
  }
  report("context: cuInit + the primary context", "native",
         (double)(bench_now_ns() - start) / 1e6, "a process of its own");
  int major = 0, minor = 0;
  cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                           device);
  cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                           device);
  char arch[16], virtual_arch[24];
  snprintf(arch, sizeof(arch), "sm_%d%d", major, minor);
  snprintf(virtual_arch, sizeof(virtual_arch), "compute_%d%d", major, minor);
  // The timed compile is this process's first use of NVRTC, as halod's
  // first load is (NVRTC initializes on first use); the PTX comes after.
  char *cubin = NULL;
  size_t cubin_size = 0;
  start = bench_now_ns();
  CHECK("NVRTC", compile(source, arch, false, &cubin, &cubin_size));
  double compile_ms = (double)(bench_now_ns() - start) / 1e6;
  double cubin_ms = native_load_ms(cubin, "CUBIN");
  char *ptx = NULL;
  size_t ptx_size = 0;
  CHECK("NVRTC to PTX", compile(source, virtual_arch, true, &ptx, &ptx_size));
  char note[96];
  snprintf(note, sizeof(note), "NVRTC %.1f ms + load %.2f ms", compile_ms,
           cubin_ms);
  report("CUDA C source: first load (NVRTC compile + load)", "native",
         compile_ms + cubin_ms, note);
  report("CUDA C source: load of the CUBIN alone", "native", cubin_ms, NULL);
  report("PTX: first load (driver JIT + load)", "native",
         native_load_ms(ptx, "PTX"), NULL);
  report("PTX: again (the driver's JIT cache)", "native",
         native_load_ms(ptx, "PTX"), NULL);
  free(cubin);
  free(ptx);
  char command[128];
  snprintf(command, sizeof(command), "rm -rf '%s'", cache);
  if (system(command) != 0) fprintf(stderr, "could not remove %s\n", cache);
  return 0;
}

int main(int argc, char **argv) {
  static const struct option long_options[] = {
      {"phase", required_argument, NULL, 'p'},
      {"address", required_argument, NULL, 'a'},
      {"salt", required_argument, NULL, 's'},
      {"csv", required_argument, NULL, 'c'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int option;
  while ((option = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
    switch (option) {
      case 'p':
        options.phase = optarg;
        break;
      case 'a':
        options.address = optarg;
        break;
      case 's':
        options.salt = optarg;
        break;
      case 'c':
        options.csv = optarg;
        break;
      default:
        fprintf(stderr,
                "usage: halo-bench-load --phase cold|warm [--address ADDR] "
                "[--salt TEXT] [--csv FILE]\n");
        return option == 'h' ? 0 : 2;
    }
  }
  if (!options.phase ||
      (strcmp(options.phase, "cold") && strcmp(options.phase, "warm"))) {
    fprintf(stderr, "halo-bench-load: --phase cold or warm\n");
    return 2;
  }
  bool cold = strcmp(options.phase, "cold") == 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (options.csv) bench_csv_open(options.csv, "halo-bench-load");

  // The native process is forked before this one touches NVRTC or libhalo
  // (CUDA must not be initialized before a fork); it starts when the halod
  // cases are done (a byte on |go|; end of file: it leaves).
  pid_t native = -1;
  int go[2] = {-1, -1};
  if (cold && !bench_fake_cuda()) {
    if (pipe(go) != 0) {
      perror("pipe");
      return 1;
    }
    fflush(NULL);
    native = fork();
    if (native == 0) {
      close(go[1]);
      char byte = 0;
      ssize_t got = read(go[0], &byte, 1);
      if (got != 1) _exit(1);
      char *text = source_text();
      int status = native_main(text);
      free(text);
      bench_csv_close();
      _exit(status);
    }
    close(go[0]);
    if (native < 0) perror("fork");
  }

  halo_client_options_t client_options = {.address = options.address,
                                          .request_timeout_ms = 120000};
  halo_client_t *client = NULL;
  CHECK("connect", halo_client_connect(&client_options, &client));
  halo_device_info_t info;
  CHECK("device", halo_client_device_info(client, 0, &info));

  // The two executables: CUDA C and PTX (fake: two fake CUBINs).
  char *source = source_text();
  char *ptx = NULL;
  size_t ptx_size = 0;
  uint8_t fake_images[2][BENCH_FAKE_IMAGE_SIZE];
  halo_executable_params_t source_params = {
      .format = HALO_EXECUTABLE_FORMAT_CUDA_SOURCE,
      .data = source,
      .size = strlen(source)};
  halo_executable_params_t ptx_params = {.format = HALO_EXECUTABLE_FORMAT_PTX};
  bool fake = bench_fake_cuda();
  if (fake) {
    for (int i = 0; i < 2; ++i) {
      bench_fake_image(fake_images[i], (uint8_t)(1 + i));
    }
    source_params.format = ptx_params.format = HALO_EXECUTABLE_FORMAT_CUBIN;
    source_params.data = fake_images[0];
    ptx_params.data = fake_images[1];
    source_params.size = ptx_params.size = BENCH_FAKE_IMAGE_SIZE;
  } else {
    char arch[24];
    snprintf(arch, sizeof(arch), "compute_%u%u", info.compute_major,
             info.compute_minor);
    int64_t start = bench_now_ns();
    CHECK("NVRTC to PTX", compile(source, arch, true, &ptx, &ptx_size));
    printf("  (PTX for %s made here by NVRTC in %.1f ms: %zu bytes)\n", arch,
           (double)(bench_now_ns() - start) / 1e6, ptx_size);
    ptx_params.data = ptx;
    ptx_params.size = ptx_size;
  }
  printf("halo-bench-load --phase %s: %s %s\n", options.phase, info.driver,
         info.name);

  if (cold) {
    report("CUDA C source: first load (NVRTC compile + load)", "halod",
           load_ms(client, &source_params, "CUDA C source"),
           "halo_executable_create; halod's log has its own figure");
    report("PTX: first load (driver JIT + load)", "halod",
           load_ms(client, &ptx_params, "PTX"), NULL);
    halo_client_t *other = NULL;
    CHECK("connect", halo_client_connect(&client_options, &other));
    // Kept loaded by the first client, so the second one's are hits.
    halo_executable_t *held[2] = {NULL, NULL};
    CHECK("source",
          halo_executable_create(client, 0, &source_params, &held[0]));
    CHECK("ptx", halo_executable_create(client, 0, &ptx_params, &held[1]));
    report("CUDA C source: the same bytes from another client", "halod",
           load_median_ms(other, &source_params, "CUDA C source"),
           "halod's content-hash hit; median of 5");
    report("PTX: the same bytes from another client", "halod",
           load_median_ms(other, &ptx_params, "PTX"),
           "halod's content-hash hit; median of 5");
    halo_executable_release(held[0]);
    halo_executable_release(held[1]);
    halo_client_close(other);
  } else {
    report("CUDA C source: after a halod restart (disk cache hit)", "halod",
           load_ms(client, &source_params, "CUDA C source"),
           "the CUBIN NVRTC made before the restart");
    report("PTX: after a halod restart (halod's disk cache)", "halod",
           load_ms(client, &ptx_params, "PTX"),
           "the CUBIN the driver's linker made before the restart");
  }
  halo_client_close(client);

  int rc = 0;
  if (native > 0) {
    fflush(NULL);
    int status = 0;
    if (write(go[1], "g", 1) != 1 || waitpid(native, &status, 0) != native ||
        !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "halo-bench-load: the native process failed\n");
      rc = 1;
    }
    close(go[1]);
  } else if (native < 0 && go[1] >= 0) {
    rc = 1;
  }
  free(source);
  free(ptx);
  bench_csv_close();
  return rc;
}
