// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// CUDA executables: code built by cuda_compiler.c (PTX and CUDA C become a
// CUBIN, CUBIN and FATBIN pass through), loaded into the device's context
// as a CUlibrary (default) or a CUmodule (device->loader). Every kernel is
// enumerated at creation, off the daemon's loop thread, with its CUfunction
// for the context and its parameter sizes (cuFuncGetParamInfo /
// cuKernelGetParamInfo), so that lookup_entry makes no driver call and the
// daemon can check dispatch arguments at record time.
//
// Unloading waits for the device's running kernels (docs/performance.md "CUDA
// driver (H100)"), so destroy hands it to the reaper.
//
// Thread-safety: creation on any thread (it makes the context current);
// immutable afterwards.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "hal/cuda/cuda_device.h"

#define HALO_HAL_CUDA_LOAD_LOG_BYTES (16u * 1024)
// More parameters than any kernel can take (4 KiB-32 KiB of parameter
// space, at least one byte each); bounds the probing loop.
#define HALO_HAL_CUDA_PARAM_PROBE_LIMIT 32768

typedef struct halo_hal_cuda_entry_t {
  char *name;
  CUfunction function;  // in the device's context
  CUkernel kernel;      // library loader only
  uint32_t param_count;
  uint32_t param_sizes[HALO_HAL_MAX_PARAMS];
  uint32_t param_offsets[HALO_HAL_MAX_PARAMS];
} halo_hal_cuda_entry_t;

typedef struct halo_hal_cuda_executable_t {
  halo_hal_executable_t base;
  halo_hal_cuda_task_t unload_task;  // the reaper's, at destroy
  halo_hal_cuda_device_t *device;
  CUlibrary library;
  CUmodule module;
  halo_hal_cuda_entry_t *entries;
  uint32_t entry_count;
  halo_hal_cuda_executable_info_t info;
} halo_hal_cuda_executable_t;

static const halo_hal_executable_vtable_t halo_hal_cuda_executable_vtable;

static void halo_hal_cuda_executable_free(
    halo_hal_cuda_executable_t *executable) {
  for (uint32_t i = 0; i < executable->entry_count; ++i) {
    free(executable->entries[i].name);
  }
  free(executable->entries);
  free(executable);
}

// Reaper thread (or the creating thread on a failed creation).
static void halo_hal_cuda_executable_unload(halo_hal_cuda_task_t *task) {
  halo_hal_cuda_executable_t *executable =
      (halo_hal_cuda_executable_t *)((char *)task -
                                     offsetof(halo_hal_cuda_executable_t,
                                              unload_task));
  const halo_hal_cuda_symbols_t *cu = executable->device->cu;
  CUresult result = CUDA_SUCCESS;
  const char *call = NULL;
  if (executable->library) {
    call = "cuLibraryUnload";
    result = cu->cuLibraryUnload(executable->library);
  } else if (executable->module) {
    call = "cuModuleUnload";
    result = cu->cuModuleUnload(executable->module);
  }
  if (result != CUDA_SUCCESS) {
    halo_status_t status = halo_hal_cuda_result_to_status(cu, result, call);
    HALO_LOG_ERROR("CUDA device %u: unloading an executable: %s",
                   executable->device->ordinal, halo_status_message(status));
    halo_status_free(status);
  }
  halo_hal_cuda_executable_free(executable);
}

// Probes the parameters of one kernel: |get| is cuFuncGetParamInfo or
// cuKernelGetParamInfo on |handle|. The driver answers INVALID_VALUE past
// the last parameter.
static halo_status_t halo_hal_cuda_entry_params(
    const halo_hal_cuda_symbols_t *cu, halo_hal_cuda_entry_t *entry,
    CUresult (*get)(const halo_hal_cuda_symbols_t *, void *, size_t, size_t *,
                    size_t *),
    void *handle, const char *call) {
  uint32_t count = 0;
  for (; count < HALO_HAL_CUDA_PARAM_PROBE_LIMIT; ++count) {
    size_t offset = 0, size = 0;
    CUresult result = get(cu, handle, count, &offset, &size);
    if (result == CUDA_ERROR_INVALID_VALUE) break;
    if (result != CUDA_SUCCESS) {
      // Code without parameter information (an old compiler's CUBIN): the
      // daemon then cannot check arguments, as on the local driver.
      halo_status_t status = halo_hal_cuda_result_to_status(cu, result, call);
      HALO_LOG_DEBUG(
          "kernel '%s': parameter %u: %s; its parameters are "
          "unknown",
          entry->name, count, halo_status_message(status));
      halo_status_free(status);
      entry->param_count = HALO_HAL_PARAMS_UNKNOWN;
      return NULL;
    }
    if (count < HALO_HAL_MAX_PARAMS) {
      entry->param_sizes[count] = (uint32_t)size;
      entry->param_offsets[count] = (uint32_t)offset;
    }
  }
  entry->param_count = count;
  return NULL;
}

static CUresult halo_hal_cuda_func_param_info(const halo_hal_cuda_symbols_t *cu,
                                              void *handle, size_t index,
                                              size_t *offset, size_t *size) {
  return cu->cuFuncGetParamInfo((CUfunction)handle, index, offset, size);
}

static CUresult halo_hal_cuda_kernel_param_info(
    const halo_hal_cuda_symbols_t *cu, void *handle, size_t index,
    size_t *offset, size_t *size) {
  return cu->cuKernelGetParamInfo((CUkernel)handle, index, offset, size);
}

static halo_status_t halo_hal_cuda_executable_allocate_entries(
    halo_hal_cuda_executable_t *executable, unsigned count) {
  executable->entries =
      calloc(count ? count : 1, sizeof(halo_hal_cuda_entry_t));
  if (!executable->entries) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  return NULL;
}

static halo_status_t halo_hal_cuda_entry_set_name(halo_hal_cuda_entry_t *entry,
                                                  const char *name) {
  entry->name = strdup(name ? name : "");
  if (!entry->name) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  return NULL;
}

// The library loader: context-independent handles, loaded into the
// (current) context eagerly (CUDA_MODULE_LOADING=EAGER).
static halo_status_t halo_hal_cuda_executable_load_library(
    halo_hal_cuda_executable_t *executable, const void *image,
    CUjit_option *options, void **values, unsigned option_count) {
  const halo_hal_cuda_symbols_t *cu = executable->device->cu;
  HALO_CUDA_RETURN_IF_ERROR(cu, cuLibraryLoadData, &executable->library, image,
                            options, values, option_count, NULL, NULL, 0);
  // A CUBIN of another architecture loads with no error and no kernels;
  // loading its module into the context fails as the module loader does
  // (CUDA_ERROR_NO_BINARY_FOR_GPU), naming why.
  CUmodule module = NULL;
  HALO_CUDA_RETURN_IF_ERROR(cu, cuLibraryGetModule, &module,
                            executable->library);
  unsigned count = 0;
  HALO_CUDA_RETURN_IF_ERROR(cu, cuLibraryGetKernelCount, &count,
                            executable->library);
  HALO_RETURN_IF_ERROR(
      halo_hal_cuda_executable_allocate_entries(executable, count));
  CUkernel *kernels = calloc(count ? count : 1, sizeof(CUkernel));
  if (!kernels) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  halo_status_t status = halo_hal_cuda_result_to_status(
      cu, cu->cuLibraryEnumerateKernels(kernels, count, executable->library),
      "cuLibraryEnumerateKernels");
  for (unsigned i = 0; !status && i < count; ++i) {
    halo_hal_cuda_entry_t *entry = &executable->entries[i];
    ++executable->entry_count;
    entry->kernel = kernels[i];
    const char *name = NULL;
    status = halo_hal_cuda_result_to_status(
        cu, cu->cuKernelGetName(&name, kernels[i]), "cuKernelGetName");
    if (!status) status = halo_hal_cuda_entry_set_name(entry, name);
    if (!status) {
      status = halo_hal_cuda_result_to_status(
          cu, cu->cuKernelGetFunction(&entry->function, kernels[i]),
          "cuKernelGetFunction");
    }
    if (!status) {
      status =
          halo_hal_cuda_entry_params(cu, entry, halo_hal_cuda_kernel_param_info,
                                     kernels[i], "cuKernelGetParamInfo");
    }
  }
  free(kernels);
  return status;
}

static halo_status_t halo_hal_cuda_executable_load_module(
    halo_hal_cuda_executable_t *executable, const void *image,
    CUjit_option *options, void **values, unsigned option_count) {
  const halo_hal_cuda_symbols_t *cu = executable->device->cu;
  HALO_CUDA_RETURN_IF_ERROR(cu, cuModuleLoadDataEx, &executable->module, image,
                            option_count, options, values);
  unsigned count = 0;
  HALO_CUDA_RETURN_IF_ERROR(cu, cuModuleGetFunctionCount, &count,
                            executable->module);
  HALO_RETURN_IF_ERROR(
      halo_hal_cuda_executable_allocate_entries(executable, count));
  CUfunction *functions = calloc(count ? count : 1, sizeof(CUfunction));
  if (!functions) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  halo_status_t status = halo_hal_cuda_result_to_status(
      cu, cu->cuModuleEnumerateFunctions(functions, count, executable->module),
      "cuModuleEnumerateFunctions");
  for (unsigned i = 0; !status && i < count; ++i) {
    halo_hal_cuda_entry_t *entry = &executable->entries[i];
    ++executable->entry_count;
    entry->function = functions[i];
    const char *name = NULL;
    status = halo_hal_cuda_result_to_status(
        cu, cu->cuFuncGetName(&name, functions[i]), "cuFuncGetName");
    if (!status) status = halo_hal_cuda_entry_set_name(entry, name);
    if (!status) {
      status =
          halo_hal_cuda_entry_params(cu, entry, halo_hal_cuda_func_param_info,
                                     functions[i], "cuFuncGetParamInfo");
    }
  }
  free(functions);
  return status;
}

// Loads |image| into a new |executable| of |device|; on failure frees
// it, with the loader's log in the error.
static halo_status_t halo_hal_cuda_executable_load(
    halo_hal_cuda_device_t *device, const halo_hal_cuda_image_t *image,
    halo_hal_cuda_executable_t **out_executable) {
  *out_executable = NULL;
  halo_hal_cuda_executable_t *executable = calloc(1, sizeof(*executable));
  char *log = calloc(1, HALO_HAL_CUDA_LOAD_LOG_BYTES);
  if (!executable || !log) {
    free(executable);
    free(log);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  executable->base.vtable = &halo_hal_cuda_executable_vtable;
  executable->device = device;
  executable->unload_task.run = halo_hal_cuda_executable_unload;
  // A FATBIN holding only PTX is JIT-compiled here (the driver's cache,
  // CUDA_CACHE_PATH, remembers it); its errors land in the log.
  CUjit_option options[2] = {CU_JIT_ERROR_LOG_BUFFER,
                             CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[2] = {log, (void *)(uintptr_t)HALO_HAL_CUDA_LOAD_LOG_BYTES};
  halo_status_t status = device->loader == HALO_HAL_CUDA_LOADER_MODULE
                             ? halo_hal_cuda_executable_load_module(
                                   executable, image->data, options, values, 2)
                             : halo_hal_cuda_executable_load_library(
                                   executable, image->data, options, values, 2);
  if (status) {
    if (log[0]) {
      status = halo_status_annotate(status, "the loader's log:\n%s\n", log);
    }
    if (halo_status_code(status) == HALO_STATUS_INTERNAL) {
      halo_status_t wrapped = halo_status_make(
          HALO_STATUS_INVALID_ARGUMENT, "%s", halo_status_message(status));
      halo_status_free(status);
      status = wrapped;
    }
    // Nothing of it ran; unloading here waits at most for running kernels.
    halo_hal_cuda_executable_unload(&executable->unload_task);
    free(log);
    return halo_status_annotate(status, "CUDA device %u: loading %zu bytes",
                                device->ordinal, image->size);
  }
  free(log);
  *out_executable = executable;
  return NULL;
}

halo_status_t halo_hal_cuda_executable_create(
    halo_hal_cuda_device_t *device, const halo_hal_executable_params_t *params,
    halo_hal_executable_t **out_executable) {
  *out_executable = NULL;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_make_current(device));
  int64_t start = 0, built = 0;
  halo_hal_cuda_image_t image;
  halo_hal_cuda_executable_t *executable = NULL;
  halo_status_t status = NULL;
  for (int attempt = 0;; ++attempt) {
    start = halo_clock_now_ns();
    HALO_RETURN_IF_ERROR(halo_hal_cuda_compiler_build(device, params, &image));
    built = halo_clock_now_ns();
    status = halo_hal_cuda_executable_load(device, &image, &executable);
    if (!status || attempt > 0 || !image.from_disk_cache ||
        halo_status_code(status) != HALO_STATUS_INVALID_ARGUMENT) {
      break;
    }
    // The cache's code, intact by its hashes, that the driver refuses (a
    // file halod's user wrote there, a driver that changed under one
    // version number): removed, and compiled once more.
    HALO_LOG_WARN(
        "CUDA device %u: the driver refused cached compiled code; removing "
        "it and compiling again: %s",
        device->ordinal, halo_status_message(status));
    halo_status_free(status);
    free(image.owned);
    halo_hal_cuda_compiler_forget(device, params);
  }
  int64_t loaded = halo_clock_now_ns();
  if (status) {
    free(image.owned);
    return status;
  }
  executable->info.from_disk_cache = image.from_disk_cache;
  executable->base.origin =
      image.from_disk_cache ? HALO_HAL_EXECUTABLE_ORIGIN_DISK_CACHE
      : image.compiled      ? HALO_HAL_EXECUTABLE_ORIGIN_COMPILED
                            : HALO_HAL_EXECUTABLE_ORIGIN_AS_GIVEN;
  executable->info.compiled = image.compiled;
  executable->info.compile_ns = built - start;
  executable->info.load_ns = loaded - built;
  executable->info.entry_count = executable->entry_count;
  free(image.owned);
  HALO_LOG_DEBUG(
      "CUDA device %u: executable with %u kernels: %s %.3f ms, load %.3f ms",
      device->ordinal, executable->entry_count,
      image.from_disk_cache ? "disk cache"
      : image.compiled      ? "compile"
                            : "-",
      (double)executable->info.compile_ns / 1e6,
      (double)executable->info.load_ns / 1e6);
  *out_executable = &executable->base;
  return NULL;
}

static void halo_hal_cuda_executable_destroy(
    halo_hal_executable_t *base_executable) {
  halo_hal_cuda_executable_t *executable =
      (halo_hal_cuda_executable_t *)base_executable;
  halo_hal_cuda_thread_post(&executable->device->reaper,
                            &executable->unload_task);
}

static halo_status_t halo_hal_cuda_executable_lookup_entry(
    halo_hal_executable_t *base_executable, const char *name,
    halo_hal_entry_info_t *out_info) {
  memset(out_info, 0, sizeof(*out_info));
  halo_hal_cuda_executable_t *executable =
      (halo_hal_cuda_executable_t *)base_executable;
  if (!name || !*name) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "CUDA executable: empty entry point name");
  }
  for (uint32_t i = 0; i < executable->entry_count; ++i) {
    const halo_hal_cuda_entry_t *entry = &executable->entries[i];
    if (strcmp(entry->name, name) != 0) continue;
    out_info->ordinal = i;
    out_info->param_count = entry->param_count;
    uint32_t known = entry->param_count < HALO_HAL_MAX_PARAMS
                         ? entry->param_count
                         : HALO_HAL_MAX_PARAMS;
    memcpy(out_info->param_sizes, entry->param_sizes,
           known * sizeof(out_info->param_sizes[0]));
    memcpy(out_info->param_offsets, entry->param_offsets,
           known * sizeof(out_info->param_offsets[0]));
    return NULL;
  }
  // Name the kernels there are: a C++ kernel without extern "C" has a
  // mangled name.
  char names[512] = "";
  size_t used = 0;
  for (uint32_t i = 0; i < executable->entry_count && used < sizeof(names);
       ++i) {
    int n = snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
                     executable->entries[i].name);
    if (n < 0) break;
    used += (size_t)n;
  }
  return halo_status_make(HALO_STATUS_NOT_FOUND,
                          "CUDA executable has no kernel '%s' (it has %u: %s)",
                          name, executable->entry_count,
                          executable->entry_count ? names : "none");
}

halo_status_t halo_hal_cuda_executable_function(
    halo_hal_executable_t *base_executable, uint32_t ordinal,
    CUfunction *out_function) {
  *out_function = NULL;
  if (!base_executable ||
      base_executable->vtable != &halo_hal_cuda_executable_vtable) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "not an executable of the CUDA driver");
  }
  halo_hal_cuda_executable_t *executable =
      (halo_hal_cuda_executable_t *)base_executable;
  if (ordinal >= executable->entry_count) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "entry ordinal %u out of range (%u kernels)",
                            ordinal, executable->entry_count);
  }
  *out_function = executable->entries[ordinal].function;
  return NULL;
}

halo_status_t halo_hal_cuda_executable_query(
    halo_hal_executable_t *base_executable,
    halo_hal_cuda_executable_info_t *out_info) {
  memset(out_info, 0, sizeof(*out_info));
  if (!base_executable ||
      base_executable->vtable != &halo_hal_cuda_executable_vtable) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "not an executable of the CUDA driver");
  }
  *out_info = ((halo_hal_cuda_executable_t *)base_executable)->info;
  return NULL;
}

static const halo_hal_executable_vtable_t halo_hal_cuda_executable_vtable = {
    .destroy = halo_hal_cuda_executable_destroy,
    .lookup_entry = halo_hal_cuda_executable_lookup_entry,
};
