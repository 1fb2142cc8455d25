// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-nvrtc: one CUDA C compile in a process of its own. The CUDA driver
// (hal/cuda/cuda_nvrtc.c) starts one for each compile, hands it the request
// as its standard input (hal/cuda/cuda_nvrtc_protocol.h) and reads the
// CUBIN, or why there is none, from its standard output.
//
// Why a process: NVRTC runs a tenant's source through a C++ front end and
// an optimizer. In its own process a crash (or an abort, as NVRTC does on
// some options) ends only this compile, and a compile that runs too long is
// killed at the driver's deadline; and nothing of the process that serves
// the device is there to read: the descriptors it holds (its trust
// domain's shared memory, reachable as /proc/self/fd/N from a thread of
// its own) are closed before anything is read, and the memory it holds is
// not this process's.
//
// The whole process is in the read-only sandbox (common/sandbox.h) before
// NVRTC sees the source: it may read only the paths the request names (the
// CUDA toolkit's headers) and write nothing; and behind a system call
// filter (syscall_filter.h): no socket, no signal to another process, no
// new process. NVRTC's library and its builtins
// (libnvrtc-builtins.so.<major>.<minor>, which NVRTC loads at each compile)
// are loaded before, with one thread in the process.
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/sandbox.h"
#include "common/status.h"
#include "hal/cuda/cuda_nvrtc_protocol.h"
#include "hal/cuda/cuda_symbols.h"
#include "hal/cuda/nvrtc_helper/syscall_filter.h"

#if defined(__SANITIZE_ADDRESS__)
// Under AddressSanitizer (a test build): LeakSanitizer's check at exit reads
// /proc/self/task and /proc/self/maps, which the sandbox keeps closed, and
// fails the process. Memory errors are still found; a process that lives
// for one compile has nothing to leak past it.
const char *__asan_default_options(void);
__attribute__((visibility("default"))) const char *__asan_default_options(
    void) {
  return "detect_leaks=0";
}
#endif

// Compiler logs come back whole; this only bounds a runaway one.
#define HALO_NVRTC_MAX_LOG_BYTES (1u << 20)
// NVRTC's front end recurses deeply on heavy templates (CCCL).
#define HALO_NVRTC_STACK_BYTES ((size_t)64 << 20)

// Writes the reply: |status| (freed), else the CUBIN. A driver that is gone
// or stopped reading ends the process.
static void halo_nvrtc_reply(halo_status_t status, const void *cubin,
                             size_t cubin_size) {
  const char *payload = status ? halo_status_message(status) : cubin;
  halo_status_t wrote = halo_hal_cuda_nvrtc_reply_write(
      STDOUT_FILENO,
      status ? (int32_t)halo_status_code(status) : HALO_STATUS_OK, payload,
      status ? strlen(payload) : cubin_size);
  halo_status_free(status);
  if (wrote) exit(3);
}

// The request, whole (standard input is a memfd: it ends).
static halo_status_t halo_nvrtc_read_request(char **out_data,
                                             size_t *out_size) {
  size_t capacity = 1 << 16, size = 0;
  char *data = malloc(capacity);
  if (!data) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  for (;;) {
    if (size + 1 == capacity) {
      if (capacity >= HALO_HAL_CUDA_NVRTC_MAX_REQUEST_BYTES) {
        free(data);
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "the compile's request is over %zu bytes",
                                HALO_HAL_CUDA_NVRTC_MAX_REQUEST_BYTES);
      }
      char *grown = realloc(data, capacity * 2);
      if (!grown) {
        free(data);
        return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
      }
      data = grown;
      capacity *= 2;
    }
    ssize_t got = read(STDIN_FILENO, data + size, capacity - 1 - size);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int error = errno;
      free(data);
      return halo_status_from_errno(error, "reading the compile's request");
    }
    if (got == 0) break;
    size += (size_t)got;
  }
  *out_data = data;  // one byte to spare, for the source's NUL
  *out_size = size;
  return NULL;
}

// NVRTC loads libnvrtc-builtins.so.<major>.<minor> (and libstdc++ with it)
// at each compile: loaded here first, outside the sandbox, and never
// closed, NVRTC's own dlopen finds it loaded and opens no file.
static halo_status_t halo_nvrtc_load_builtins(
    const halo_hal_cuda_nvrtc_symbols_t *nvrtc, const char *directory) {
  char name[64];
  snprintf(name, sizeof(name), "libnvrtc-builtins.so.%d.%d", nvrtc->major,
           nvrtc->minor);
  // By name (as NVRTC looks it up), else beside NVRTC's library. Each
  // failure's text is copied at once: the next dlopen frees it.
  char by_name[256] = "";
  char by_path[256] = "not tried (NVRTC's directory unknown)";
  if (dlopen(name, RTLD_NOW | RTLD_LOCAL)) return NULL;
  const char *error = dlerror();
  snprintf(by_name, sizeof(by_name), "%s", error ? error : "failed");
  if (directory[0]) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", directory, name);
    if (dlopen(path, RTLD_NOW | RTLD_LOCAL)) return NULL;
    error = dlerror();
    snprintf(by_path, sizeof(by_path), "%s", error ? error : "failed");
  }
  return halo_status_make(
      HALO_STATUS_FAILED_PRECONDITION,
      "NVRTC %d.%d (%s) cannot compile: its %s could not be loaded: by "
      "name: %s; beside NVRTC: %s",
      nvrtc->major, nvrtc->minor, nvrtc->soname, name, by_name, by_path);
}

// NVRTC's library (or one it loads) could start a thread when it is
// loaded: that thread would be outside the sandbox entered after, so the
// compile is refused. (ThreadSanitizer's runtime has a thread of its own.)
static halo_status_t halo_nvrtc_check_one_thread(void) {
#if defined(__SANITIZE_THREAD__)
  return NULL;
#else
  FILE *file = fopen("/proc/self/status", "r");
  if (!file) return halo_status_from_errno(errno, "reading /proc/self/status");
  char line[128];
  long threads = -1;
  while (fgets(line, sizeof(line), file)) {
    if (sscanf(line, "Threads: %ld", &threads) == 1) break;
  }
  fclose(file);
  if (threads == 1) return NULL;
  return halo_status_make(HALO_STATUS_INTERNAL,
                          "halo-nvrtc has %ld threads after loading NVRTC, "
                          "before its sandbox: it compiles nothing with a "
                          "thread outside the sandbox",
                          threads);
#endif
}

static halo_status_t halo_nvrtc_status(
    const halo_hal_cuda_nvrtc_symbols_t *nvrtc, nvrtcResult result,
    const char *call) {
  return halo_status_make(result == NVRTC_ERROR_OUT_OF_MEMORY
                              ? HALO_STATUS_RESOURCE_EXHAUSTED
                              : HALO_STATUS_INVALID_ARGUMENT,
                          "%s: %s", call, nvrtc->nvrtcGetErrorString(result));
}

// One compile, on a thread with NVRTC's stack.
typedef struct halo_nvrtc_job_t {
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc;
  const halo_hal_cuda_nvrtc_request_t *request;
  halo_status_t status;
  void *cubin;
  size_t cubin_size;
} halo_nvrtc_job_t;

// The compile's log, whole (bounded only against a runaway one).
static char *halo_nvrtc_log(const halo_hal_cuda_nvrtc_symbols_t *nvrtc,
                            nvrtcProgram program) {
  size_t log_size = 0;
  if (nvrtc->nvrtcGetProgramLogSize(program, &log_size) != NVRTC_SUCCESS ||
      log_size == 0) {
    return NULL;
  }
  char *log = calloc(1, log_size + 1);
  if (log && nvrtc->nvrtcGetProgramLog(program, log) != NVRTC_SUCCESS) {
    log[0] = '\0';
  }
  if (log && log_size > HALO_NVRTC_MAX_LOG_BYTES) {
    log[HALO_NVRTC_MAX_LOG_BYTES] = '\0';
  }
  return log;
}

static void *halo_nvrtc_compile(void *arg) {
  halo_nvrtc_job_t *job = arg;
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = job->nvrtc;
  const halo_hal_cuda_nvrtc_request_t *request = job->request;
  nvrtcProgram program = NULL;
  nvrtcResult result = nvrtc->nvrtcCreateProgram(&program, request->source,
                                                 "halo.cu", 0, NULL, NULL);
  if (result != NVRTC_SUCCESS) {
    job->status = halo_nvrtc_status(nvrtc, result, "nvrtcCreateProgram");
    return NULL;
  }
  result = nvrtc->nvrtcCompileProgram(program, (int)request->option_count,
                                      request->options);
  size_t size = 0;
  if (result != NVRTC_SUCCESS) {
    char *log = halo_nvrtc_log(nvrtc, program);
    job->status = halo_status_make(
        HALO_STATUS_INVALID_ARGUMENT,
        "NVRTC %d.%d could not compile the CUDA source for sm_%d (%s); the "
        "compile log:\n%s",
        nvrtc->major, nvrtc->minor, request->arch,
        nvrtc->nvrtcGetErrorString(result), log && log[0] ? log : "(empty)");
    free(log);
  } else if ((result = nvrtc->nvrtcGetCUBINSize(program, &size)) !=
             NVRTC_SUCCESS) {
    job->status = halo_nvrtc_status(nvrtc, result, "nvrtcGetCUBINSize");
  } else if (size == 0) {
    job->status =
        halo_status_make(HALO_STATUS_INTERNAL, "NVRTC produced no CUBIN");
  } else if (!(job->cubin = malloc(size))) {
    job->status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  } else if ((result = nvrtc->nvrtcGetCUBIN(program, job->cubin)) !=
             NVRTC_SUCCESS) {
    job->status = halo_nvrtc_status(nvrtc, result, "nvrtcGetCUBIN");
  } else {
    job->cubin_size = size;
  }
  nvrtc->nvrtcDestroyProgram(&program);
  return NULL;
}

// Runs |job| on a thread with NVRTC's stack (the process's own thread has
// what RLIMIT_STACK gave it).
static halo_status_t halo_nvrtc_run(halo_nvrtc_job_t *job) {
  pthread_attr_t attr;
  int error = pthread_attr_init(&attr);
  if (!error) {
    error = pthread_attr_setstacksize(&attr, HALO_NVRTC_STACK_BYTES);
    pthread_t thread;
    if (!error) error = pthread_create(&thread, &attr, halo_nvrtc_compile, job);
    if (!error) pthread_join(thread, NULL);
    pthread_attr_destroy(&attr);
  }
  if (error) return halo_status_from_errno(error, "starting NVRTC's thread");
  return job->status;
}

int main(int argc, char **argv) {
  // The compile is for the process that started it: when that goes, so
  // does this one (checked after the call, in case it went before).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  char *end = NULL;
  long parent = argc == 2 ? strtol(argv[1], &end, 10) : 0;
  if (argc != 2 || !end || *end != '\0' || parent <= 0) {
    fprintf(stderr,
            "halo-nvrtc: halod's CUDA C compiler; halod starts it, one "
            "process per compile (usage: halo-nvrtc PARENT_PID < request)\n");
    return 2;
  }
  if (getppid() != (pid_t)parent) return 2;
  // Nothing the parent held beyond the request and the reply's pipes
  // (posix_spawn closed them too; this holds whoever starts it).
  close_range(3, ~0u, 0);
  char *data = NULL;
  size_t size = 0;
  halo_status_t status = halo_nvrtc_read_request(&data, &size);
  halo_hal_cuda_nvrtc_request_t request = {0};
  if (!status) {
    status = halo_hal_cuda_nvrtc_request_parse(data, size, size + 1, &request);
  }
  halo_hal_cuda_nvrtc_symbols_t nvrtc;
  if (!status) status = halo_hal_cuda_nvrtc_open(request.soname, &nvrtc);
  if (!status) status = halo_nvrtc_load_builtins(&nvrtc, request.directory);
  if (!status) status = halo_nvrtc_check_one_thread();
  if (!status) status = halo_sandbox_enter(request.paths, request.path_count);
  if (!status) status = halo_nvrtc_syscall_filter_install();
  halo_nvrtc_job_t job = {.nvrtc = &nvrtc, .request = &request};
  if (!status) status = halo_nvrtc_run(&job);
  halo_nvrtc_reply(status, job.cubin, job.cubin_size);
  free(job.cubin);
  halo_hal_cuda_nvrtc_request_free(&request);
  free(data);
  return 0;
}
