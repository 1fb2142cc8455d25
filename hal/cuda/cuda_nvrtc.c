// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// CUDA C through NVRTC (halo_hal_cuda_nvrtc_compile), in a read-only
// sandbox. NVRTC opens whatever file an #include or a -I option names, with
// the rights of the process that compiles: without a sandbox a tenant's
// source could read any file halod's user can read (another tenant's cached
// code, a Kubernetes service account's token) into the compile log it gets
// back. So each compile runs on a thread of its own that Landlock lets read
// only the CUDA toolkit's headers (common/sandbox.h); an #include of
// anything else fails with "cannot open source file ...: Permission
// denied". The toolkit's include directories are passed as -I, so that
// <cuda_fp16.h> and (CUDA 13) <cuda/std/...> need no option of the
// client's.
//
// NVRTC loads libnvrtc-builtins.so.<major>.<minor> (and with it libstdc++)
// at each compile; the sandbox could not open them, so they are loaded
// once, before the first compile, and stay loaded. A host without Landlock
// (Linux before 5.13, not enabled at boot, a seccomp filter that refuses
// it) compiles no CUDA C: FAILED_PRECONDITION says why, and PTX, CUBIN and
// FATBIN still load.
//
// Thread-safety: thread-safe.
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/sandbox.h"
#include "common/status.h"
#include "hal/cuda/cuda_device.h"

// Compiler logs come back whole; this only bounds a runaway one.
#define HALO_HAL_CUDA_NVRTC_MAX_LOG_BYTES (1u << 20)
// NVRTC's front end recurses deeply on heavy templates (CCCL).
#define HALO_HAL_CUDA_NVRTC_STACK_BYTES ((size_t)64 << 20)
// Toolkit include directories: the one beside NVRTC's library, and
// /usr/local/cuda's.
#define HALO_HAL_CUDA_NVRTC_MAX_INCLUDES 2

// What every compile of the process shares, made once.
typedef struct halo_hal_cuda_nvrtc_setup_t {
  pthread_once_t once;
  halo_status_t failure;             // why no compile can run (NULL: none)
  char library_directory[PATH_MAX];  // NVRTC's, resolved ("" unknown)
  // The builtins library, loaded before the first compile; a failure is
  // tried again at the next compile (it may have been a passing one: no
  // descriptor or memory left).
  pthread_mutex_t builtins_mutex;
  bool builtins_loaded;
  uint32_t include_count;
  char includes[HALO_HAL_CUDA_NVRTC_MAX_INCLUDES][PATH_MAX];
  // -I options: each include directory, and its cccl/ where it has one.
  uint32_t option_count;
  char options[2 * HALO_HAL_CUDA_NVRTC_MAX_INCLUDES][PATH_MAX + 16];
} halo_hal_cuda_nvrtc_setup_t;

static halo_hal_cuda_nvrtc_setup_t halo_hal_cuda_nvrtc_setup = {
    .once = PTHREAD_ONCE_INIT, .builtins_mutex = PTHREAD_MUTEX_INITIALIZER};

static bool halo_hal_cuda_is_directory(const char *path) {
  struct stat info;
  return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

// Adds the include directory |path| (resolved; skipped where it is not a
// directory or is already there).
static void halo_hal_cuda_nvrtc_add_include(const char *path) {
  char resolved[PATH_MAX];
  if (!realpath(path, resolved) || !halo_hal_cuda_is_directory(resolved)) {
    return;
  }
  halo_hal_cuda_nvrtc_setup_t *setup = &halo_hal_cuda_nvrtc_setup;
  for (uint32_t i = 0; i < setup->include_count; ++i) {
    if (strcmp(setup->includes[i], resolved) == 0) return;
  }
  if (setup->include_count == HALO_HAL_CUDA_NVRTC_MAX_INCLUDES) return;
  memcpy(setup->includes[setup->include_count++], resolved,
         strlen(resolved) + 1);
  snprintf(setup->options[setup->option_count++], sizeof(setup->options[0]),
           "-I%s", resolved);
  char cccl[PATH_MAX + 8];
  snprintf(cccl, sizeof(cccl), "%s/cccl", resolved);
  if (halo_hal_cuda_is_directory(cccl)) {
    snprintf(setup->options[setup->option_count++], sizeof(setup->options[0]),
             "-I%s", cccl);
  }
}

// What does not change from one compile to the next: whether a sandbox
// can be made, and the toolkit's include directories.
static void halo_hal_cuda_nvrtc_setup_once(void) {
  halo_hal_cuda_nvrtc_setup_t *setup = &halo_hal_cuda_nvrtc_setup;
  char reason[160];
  int abi = halo_sandbox_abi(reason, sizeof(reason));
  if (abi == 0) {
    setup->failure = halo_status_make(
        HALO_STATUS_FAILED_PRECONDITION,
        "halod compiles CUDA C only in a read-only sandbox (Landlock), and "
        "this host cannot make one: %s; load PTX, CUBIN or FATBIN compiled "
        "on the client instead",
        reason);
    return;
  }
  if (abi > HALO_SANDBOX_KNOWN_ABI) {
    HALO_LOG_WARN(
        "Landlock ABI %d is newer than halo knows (%d): rights it "
        "adds are not taken from NVRTC's sandbox",
        abi, HALO_SANDBOX_KNOWN_ABI);
  }
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = NULL;
  halo_status_t status = halo_hal_cuda_nvrtc_load(&nvrtc);
  if (status) {
    setup->failure = status;
    return;
  }
  Dl_info info;
  char library[PATH_MAX];
  if (dladdr(*(void **)&nvrtc->nvrtcCompileProgram, &info) && info.dli_fname &&
      realpath(info.dli_fname, library)) {
    char *slash = strrchr(library, '/');
    if (slash) {
      *slash = '\0';
      memcpy(setup->library_directory, library, strlen(library) + 1);
      snprintf(slash, sizeof(library) - (size_t)(slash - library),
               "/../include");
      halo_hal_cuda_nvrtc_add_include(library);
    }
  }
  halo_hal_cuda_nvrtc_add_include("/usr/local/cuda/include");
  HALO_LOG_INFO(
      "CUDA C: NVRTC %d.%d compiles in a read-only sandbox "
      "(Landlock ABI %d); include directories: %s%s%s",
      nvrtc->major, nvrtc->minor, abi,
      setup->include_count > 0 ? setup->includes[0] : "none",
      setup->include_count > 1 ? ", " : "",
      setup->include_count > 1 ? setup->includes[1] : "");
}

// NVRTC loads libnvrtc-builtins.so.<major>.<minor> (and libstdc++ with it)
// at each compile: loaded here first, outside the sandbox, and never
// closed, NVRTC's own dlopen finds it loaded and opens no file.
static halo_status_t halo_hal_cuda_nvrtc_load_builtins(
    const halo_hal_cuda_nvrtc_symbols_t *nvrtc) {
  halo_hal_cuda_nvrtc_setup_t *setup = &halo_hal_cuda_nvrtc_setup;
  pthread_mutex_lock(&setup->builtins_mutex);
  halo_status_t status = NULL;
  if (!setup->builtins_loaded) {
    char name[64];
    snprintf(name, sizeof(name), "libnvrtc-builtins.so.%d.%d", nvrtc->major,
             nvrtc->minor);
    // By name (as NVRTC looks it up), else beside NVRTC's library. Each
    // failure's text is copied at once: the next dlopen frees it.
    char by_name[256] = "", by_path[256] =
                                "not tried (NVRTC's directory "
                                "unknown)";
    void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char *error = dlerror();
      snprintf(by_name, sizeof(by_name), "%s", error ? error : "failed");
    }
    size_t directory = strlen(setup->library_directory);
    char path[PATH_MAX + 64];
    if (!library && directory > 0 &&
        directory + 1 + strlen(name) < sizeof(path)) {
      memcpy(path, setup->library_directory, directory);
      path[directory] = '/';
      memcpy(path + directory + 1, name, strlen(name) + 1);
      library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (!library) {
        const char *error = dlerror();
        snprintf(by_path, sizeof(by_path), "%s", error ? error : "failed");
      }
    }
    if (library) {
      setup->builtins_loaded = true;
    } else {
      status = halo_status_make(
          HALO_STATUS_FAILED_PRECONDITION,
          "NVRTC %d.%d (%s) cannot compile: its %s could not be loaded: by "
          "name: %s; beside NVRTC: %s",
          nvrtc->major, nvrtc->minor, nvrtc->soname, name, by_name, by_path);
    }
  }
  pthread_mutex_unlock(&setup->builtins_mutex);
  return status;
}

// The client's NVRTC options halod passes on: those that shape the code,
// none that reads or writes a file of its own (-time, --fdevice-time-trace,
// --pre-include, --create-pch: NVRTC aborts the process where it cannot
// write, and reading is the sandbox's to refuse) or picks the target.
static const struct {
  const char *name;
  // A prefix whose value follows in the same string (NVRTC would take the
  // next string as the value of a bare -D or one ending in a space).
  bool value;
} halo_hal_cuda_nvrtc_options[] = {
    {"-D", true},
    {"--define-macro=", true},
    {"-U", true},
    {"--undefine-macro=", true},
    {"-I", true},
    {"--include-path=", true},
    {"-std=", true},
    {"--std=", true},
    {"-use_fast_math", false},
    {"--use_fast_math", false},
    {"-ftz=", true},
    {"--ftz=", true},
    {"-prec-div=", true},
    {"--prec-div=", true},
    {"-prec-sqrt=", true},
    {"--prec-sqrt=", true},
    {"-fmad=", true},
    {"--fmad=", true},
    {"-maxrregcount=", true},
    {"--maxrregcount=", true},
    {"-dopt=", true},
    {"--dopt=", true},
    {"-lineinfo", false},
    {"--generate-line-info", false},
    {"-G", false},
    {"--device-debug", false},
    {"-default-device", false},
    {"--device-as-default-execution-space", false},
    {"-restrict", false},
    {"--restrict", false},
    {"-extra-device-vectorization", false},
    {"--extra-device-vectorization", false},
    {"-device-int128", false},
    {"--device-int128", false},
    {"-w", false},
    {"--disable-warnings", false},
    {"-diag-suppress=", true},
    {"--diag-suppress=", true},
    {"-diag-error=", true},
    {"--diag-error=", true},
    {"-diag-warn=", true},
    {"--diag-warn=", true},
    {"-Ofc=", true},
    {"--Ofast-compile=", true},
    {"-no-source-include", false},
    {"--no-source-include", false},
    {"-minimal", false},
    {"--minimal", false},
    {"-builtin-move-forward=", true},
    {"--builtin-move-forward=", true},
    {"-builtin-initializer-list=", true},
    {"--builtin-initializer-list=", true},
};

#define HALO_HAL_CUDA_NVRTC_OPTION_COUNT \
  (sizeof(halo_hal_cuda_nvrtc_options) / sizeof(halo_hal_cuda_nvrtc_options[0]))

// NULL where halod passes |option| on, else why not (INVALID_ARGUMENT
// naming it and what halod takes).
static halo_status_t halo_hal_cuda_nvrtc_check_option(const char *option) {
  for (size_t i = 0; i < HALO_HAL_CUDA_NVRTC_OPTION_COUNT; ++i) {
    const char *name = halo_hal_cuda_nvrtc_options[i].name;
    size_t length = strlen(name);
    if (!halo_hal_cuda_nvrtc_options[i].value) {
      if (strcmp(option, name) == 0) return NULL;
      continue;
    }
    if (strncmp(option, name, length) != 0) continue;
    char first = option[length];
    if (first != '\0' && first != ' ' && first != '\t') return NULL;
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "NVRTC option '%s' needs its value in the same "
                            "string, right after %s (as in -DNAME=1 or "
                            "-std=c++17)",
                            option, name);
  }
  char names[1024];
  size_t used = 0;
  for (size_t i = 0;
       i < HALO_HAL_CUDA_NVRTC_OPTION_COUNT && used < sizeof(names); ++i) {
    int written = snprintf(names + used, sizeof(names) - used, "%s%s",
                           i ? ", " : "", halo_hal_cuda_nvrtc_options[i].name);
    if (written > 0) used += (size_t)written;
  }
  return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                          "NVRTC option '%s' is not one halod passes on (none "
                          "that reads or writes a file); it takes: %s",
                          option, names);
}

static halo_status_t halo_hal_cuda_nvrtc_status(
    const halo_hal_cuda_nvrtc_symbols_t *nvrtc, nvrtcResult result,
    const char *call) {
  return halo_status_make(result == NVRTC_ERROR_OUT_OF_MEMORY
                              ? HALO_STATUS_RESOURCE_EXHAUSTED
                              : HALO_STATUS_INVALID_ARGUMENT,
                          "%s: %s", call, nvrtc->nvrtcGetErrorString(result));
}

// One compile, on the sandbox's thread.
typedef struct halo_hal_cuda_nvrtc_job_t {
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc;
  const char *source;
  const char *const *options;
  int option_count;
  int arch;
  halo_status_t status;
  void *cubin;
  size_t cubin_size;
} halo_hal_cuda_nvrtc_job_t;

static void halo_hal_cuda_nvrtc_run(void *arg) {
  halo_hal_cuda_nvrtc_job_t *job = arg;
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = job->nvrtc;
  nvrtcProgram program = NULL;
  halo_status_t status = NULL;
  nvrtcResult result = nvrtc->nvrtcCreateProgram(&program, job->source,
                                                 "halo.cu", 0, NULL, NULL);
  if (result != NVRTC_SUCCESS) {
    status = halo_hal_cuda_nvrtc_status(nvrtc, result, "nvrtcCreateProgram");
  }
  if (!status) {
    result =
        nvrtc->nvrtcCompileProgram(program, job->option_count, job->options);
    if (result != NVRTC_SUCCESS) {
      // The whole log goes back to the client (bounded only against a
      // runaway one).
      size_t log_size = 0;
      char *log = NULL;
      if (nvrtc->nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS &&
          log_size > 0) {
        log = calloc(1, log_size + 1);
        if (log && nvrtc->nvrtcGetProgramLog(program, log) != NVRTC_SUCCESS) {
          log[0] = '\0';
        }
        if (log && log_size > HALO_HAL_CUDA_NVRTC_MAX_LOG_BYTES) {
          log[HALO_HAL_CUDA_NVRTC_MAX_LOG_BYTES] = '\0';
        }
      }
      status = halo_status_make(
          HALO_STATUS_INVALID_ARGUMENT,
          "NVRTC %d.%d could not compile the CUDA source for sm_%d (%s); the "
          "compile log:\n%s",
          nvrtc->major, nvrtc->minor, job->arch,
          nvrtc->nvrtcGetErrorString(result), log && log[0] ? log : "(empty)");
      free(log);
    }
  }
  size_t size = 0;
  if (!status) {
    result = nvrtc->nvrtcGetCUBINSize(program, &size);
    if (result != NVRTC_SUCCESS || size == 0) {
      status =
          result != NVRTC_SUCCESS
              ? halo_hal_cuda_nvrtc_status(nvrtc, result, "nvrtcGetCUBINSize")
              : halo_status_make(HALO_STATUS_INTERNAL,
                                 "NVRTC produced no CUBIN");
    }
  }
  if (!status) {
    void *cubin = malloc(size);
    if (!cubin) {
      status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    } else if ((result = nvrtc->nvrtcGetCUBIN(program, cubin)) !=
               NVRTC_SUCCESS) {
      free(cubin);
      status = halo_hal_cuda_nvrtc_status(nvrtc, result, "nvrtcGetCUBIN");
    } else {
      job->cubin = cubin;
      job->cubin_size = size;
    }
  }
  if (program) nvrtc->nvrtcDestroyProgram(&program);
  job->status = status;
}

halo_status_t halo_hal_cuda_nvrtc_compile(
    halo_hal_cuda_device_t *device, const halo_hal_executable_params_t *params,
    halo_hal_cuda_image_t *out_image) {
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = device->nvrtc;
  if (!nvrtc) {
    const halo_hal_cuda_nvrtc_symbols_t *unused = NULL;
    halo_status_t reason = halo_hal_cuda_nvrtc_load(&unused);
    halo_status_t status = halo_status_make(
        HALO_STATUS_UNIMPLEMENTED, "CUDA C sources need NVRTC in halod: %s",
        halo_status_message(reason));
    halo_status_free(reason);
    return status;
  }
  if (memchr(params->data, '\0', (size_t)params->size)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the CUDA source contains a NUL byte");
  }
  for (uint32_t i = 0; i < params->option_count; ++i) {
    const char *option = params->options[i];
    if (strncmp(option, "-arch", 5) == 0 ||
        strncmp(option, "--gpu-architecture", 18) == 0 ||
        strncmp(option, "-gencode", 8) == 0 || strcmp(option, "-dlto") == 0 ||
        strncmp(option, "--dlink-time-opt", 16) == 0 ||
        strcmp(option, "-ptx") == 0) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "NVRTC option '%s' is not allowed: halod "
                              "compiles for the device's architecture "
                              "(sm_%d) to a CUBIN",
                              option, device->arch);
    }
    HALO_RETURN_IF_ERROR(halo_hal_cuda_nvrtc_check_option(option));
  }
  halo_hal_cuda_nvrtc_setup_t *setup = &halo_hal_cuda_nvrtc_setup;
  pthread_once(&setup->once, halo_hal_cuda_nvrtc_setup_once);
  if (setup->failure) {
    return halo_status_make(halo_status_code(setup->failure), "%s",
                            halo_status_message(setup->failure));
  }
  HALO_RETURN_IF_ERROR(halo_hal_cuda_nvrtc_load_builtins(nvrtc));
  // The architecture, the toolkit's includes, the client's options.
  uint32_t count = params->option_count + 1 + setup->option_count;
  char *source = malloc((size_t)params->size + 1);
  const char **options = calloc(count, sizeof(char *));
  if (!source || !options) {
    free(source);
    free(options);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  memcpy(source, params->data, (size_t)params->size);
  source[params->size] = '\0';
  char arch[32];
  snprintf(arch, sizeof(arch), "--gpu-architecture=sm_%d", device->arch);
  // halod's first: a client's option cannot take one of them as its value.
  uint32_t next = 0;
  options[next++] = arch;
  for (uint32_t i = 0; i < setup->option_count; ++i) {
    options[next++] = setup->options[i];
  }
  for (uint32_t i = 0; i < params->option_count; ++i) {
    options[next++] = params->options[i];
  }
  const char *paths[HALO_HAL_CUDA_NVRTC_MAX_INCLUDES];
  for (uint32_t i = 0; i < setup->include_count; ++i) {
    paths[i] = setup->includes[i];
  }
  halo_hal_cuda_nvrtc_job_t job = {
      .nvrtc = nvrtc,
      .source = source,
      .options = options,
      .option_count = (int)count,
      .arch = device->arch,
  };
  halo_status_t status = halo_sandbox_run(paths, setup->include_count,
                                          HALO_HAL_CUDA_NVRTC_STACK_BYTES,
                                          halo_hal_cuda_nvrtc_run, &job);
  if (status) {
    status = halo_status_annotate(status, "compiling CUDA C in its sandbox");
  } else {
    status = job.status;
  }
  if (!status) {
    out_image->owned = job.cubin;
    out_image->data = job.cubin;
    out_image->size = job.cubin_size;
    out_image->compiled = true;
  }
  free(options);
  free(source);
  return status;
}
