// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Run-time loading of the CUDA driver and NVRTC (cuda_symbols.h): dlopen,
// then every driver symbol through cuGetProcAddress at the API version of
// the variant our cuda.h declares (the table in cuda_symbols.h), so that a
// CUDA 12.4+ or 13 driver hands us the variant whose signature matches.
// Nothing here links against CUDA.
#include "hal/cuda/cuda_symbols.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

// The outcome of a one-time load, replayed to every caller.
typedef struct halo_hal_cuda_load_result_t {
  halo_status_code_t code;
  char message[512];
} halo_hal_cuda_load_result_t;

static pthread_once_t halo_hal_cuda_driver_once = PTHREAD_ONCE_INIT;
static halo_hal_cuda_symbols_t halo_hal_cuda_driver_symbols;
static halo_hal_cuda_load_result_t halo_hal_cuda_driver_result;

static pthread_once_t halo_hal_cuda_nvrtc_once = PTHREAD_ONCE_INIT;
static halo_hal_cuda_nvrtc_symbols_t halo_hal_cuda_nvrtc_table;
static halo_hal_cuda_load_result_t halo_hal_cuda_nvrtc_result;

static void halo_hal_cuda_load_fail(halo_hal_cuda_load_result_t *result,
                                    const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void halo_hal_cuda_load_fail(halo_hal_cuda_load_result_t *result,
                                    const char *format, ...) {
  va_list args;
  va_start(args, format);
  result->code = HALO_STATUS_UNAVAILABLE;
  vsnprintf(result->message, sizeof(result->message), format, args);
  va_end(args);
}

static halo_status_t halo_hal_cuda_load_status(
    const halo_hal_cuda_load_result_t *result) {
  if (result->code == HALO_STATUS_OK) return NULL;
  return halo_status_make(result->code, "%s", result->message);
}

// Runs once: fills halo_hal_cuda_driver_symbols or records why not.
static void halo_hal_cuda_driver_load_once(void) {
  halo_hal_cuda_load_result_t *result = &halo_hal_cuda_driver_result;
  halo_hal_cuda_symbols_t *cu = &halo_hal_cuda_driver_symbols;
  // Lazy loading defers a kernel's upload to its first launch, which then
  // waits for every running kernel of the context (docs/performance.md "CUDA
  // driver (H100)"): load eagerly, at a time we choose, off the launch path.
  // The variable is read by cuInit, so it must be set before.
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);

  dlerror();
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *error = dlerror();
    halo_hal_cuda_load_fail(result, "no CUDA driver: dlopen libcuda.so.1: %s",
                            error ? error : "(no reason given)");
    return;
  }
  // cuda.h renames cuGetProcAddress to cuGetProcAddress_v2; resolve the
  // exported name the macro expands to.
  __typeof__(cuGetProcAddress) *get_proc_address = NULL;
  *(void **)&get_proc_address = dlsym(library, "cuGetProcAddress_v2");
  __typeof__(cuDriverGetVersion) *driver_get_version = NULL;
  *(void **)&driver_get_version = dlsym(library, "cuDriverGetVersion");
  if (!get_proc_address || !driver_get_version) {
    halo_hal_cuda_load_fail(result,
                            "libcuda.so.1 has no cuGetProcAddress_v2 (a "
                            "driver older than CUDA 12.0); halo needs a "
                            "driver for CUDA %d.%d or newer",
                            HALO_HAL_CUDA_MIN_DRIVER_VERSION / 1000,
                            HALO_HAL_CUDA_MIN_DRIVER_VERSION % 1000 / 10);
    return;  // the library stays loaded: harmless, and dlclose is not
  }
  int version = 0;
  CUresult rc = driver_get_version(&version);
  // Kept even when the load fails below (NVRTC's soname follows it).
  if (rc == CUDA_SUCCESS) cu->driver_version = version;
  if (rc != CUDA_SUCCESS || version < HALO_HAL_CUDA_MIN_DRIVER_VERSION) {
    halo_hal_cuda_load_fail(result,
                            "the CUDA driver supports CUDA %d.%d (error %d); "
                            "halo needs a driver for CUDA %d.%d or newer",
                            version / 1000, version % 1000 / 10, (int)rc,
                            HALO_HAL_CUDA_MIN_DRIVER_VERSION / 1000,
                            HALO_HAL_CUDA_MIN_DRIVER_VERSION % 1000 / 10);
    return;
  }

  // Each X expands to one lookup: the string is the base name (# does not
  // expand macros), the field the versioned name cuda.h maps it to; at
  // |api| first, then at |fallback| (the same prototype, older) if the
  // driver has no variant at |api|.
#define HALO_HAL_CUDA_RESOLVE(name, api, fallback)                           \
  {                                                                          \
    CUdriverProcAddressQueryResult found =                                   \
        CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                                \
    void *pointer = NULL;                                                    \
    int asked = (api);                                                       \
    CUresult lookup = get_proc_address(#name, &pointer, asked,               \
                                       CU_GET_PROC_ADDRESS_DEFAULT, &found); \
    if ((lookup != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS ||   \
         !pointer) &&                                                        \
        (fallback) != 0) {                                                   \
      asked = (fallback);                                                    \
      pointer = NULL;                                                        \
      found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                          \
      lookup = get_proc_address(#name, &pointer, asked,                      \
                                CU_GET_PROC_ADDRESS_DEFAULT, &found);        \
    }                                                                        \
    if (lookup != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS ||    \
        !pointer) {                                                          \
      halo_hal_cuda_load_fail(result,                                        \
                              "the CUDA driver %d.%d has no " #name          \
                              " at API version %d (cuGetProcAddress: "       \
                              "error %d, query result %d)",                  \
                              version / 1000, version % 1000 / 10, asked,    \
                              (int)lookup, (int)found);                      \
      return;                                                                \
    }                                                                        \
    *(void **)&cu->name = pointer;                                           \
  }
  HALO_HAL_CUDA_DRIVER_SYMBOLS(HALO_HAL_CUDA_RESOLVE)
#undef HALO_HAL_CUDA_RESOLVE

  rc = cu->cuInit(0);
  if (rc != CUDA_SUCCESS) {
    const char *name = NULL;
    const char *text = NULL;
    cu->cuGetErrorName(rc, &name);
    cu->cuGetErrorString(rc, &text);
    halo_hal_cuda_load_fail(result, "cuInit: %s: %s",
                            name ? name : "unknown error",
                            text ? text : "(no description)");
    return;
  }
  int count = 0;
  rc = cu->cuDeviceGetCount(&count);
  if (rc != CUDA_SUCCESS || count == 0) {
    halo_hal_cuda_load_fail(result,
                            "the CUDA driver %d.%d sees no device "
                            "(cuDeviceGetCount: error %d, %d devices)",
                            version / 1000, version % 1000 / 10, (int)rc,
                            count);
    return;
  }
  result->code = HALO_STATUS_OK;
}

halo_status_t halo_hal_cuda_symbols_load(
    const halo_hal_cuda_symbols_t **out_symbols) {
  *out_symbols = NULL;
  pthread_once(&halo_hal_cuda_driver_once, halo_hal_cuda_driver_load_once);
  HALO_RETURN_IF_ERROR(halo_hal_cuda_load_status(&halo_hal_cuda_driver_result));
  *out_symbols = &halo_hal_cuda_driver_symbols;
  return NULL;
}

int halo_hal_cuda_driver_version(void) {
  pthread_once(&halo_hal_cuda_driver_once, halo_hal_cuda_driver_load_once);
  return halo_hal_cuda_driver_symbols.driver_version;
}

// The NVRTC majors halo knows, newest first.
static const struct {
  int major;
  const char *soname;
} halo_hal_cuda_nvrtc_majors[] = {
    {13, "libnvrtc.so.13"},
    {12, "libnvrtc.so.12"},
};

size_t halo_hal_cuda_nvrtc_sonames(int driver_version, const char **out_names,
                                   size_t capacity) {
  size_t count = 0;
  int driver_major = driver_version / 1000;
  for (size_t i = 0; i < sizeof(halo_hal_cuda_nvrtc_majors) /
                             sizeof(halo_hal_cuda_nvrtc_majors[0]);
       ++i) {
    if (driver_version != 0 &&
        halo_hal_cuda_nvrtc_majors[i].major > driver_major) {
      continue;
    }
    if (count < capacity)
      out_names[count] = halo_hal_cuda_nvrtc_majors[i].soname;
    ++count;
  }
  if (count < capacity) out_names[count] = "libnvrtc.so";
  ++count;
  return count < capacity ? count : capacity;
}

static void halo_hal_cuda_nvrtc_load_once(void) {
  halo_hal_cuda_load_result_t *result = &halo_hal_cuda_nvrtc_result;
  halo_hal_cuda_nvrtc_symbols_t *nvrtc = &halo_hal_cuda_nvrtc_table;
  int driver_version = halo_hal_cuda_driver_version();
  const char *names[4];
  size_t count = halo_hal_cuda_nvrtc_sonames(driver_version, names, 4);
  char tried[256] = "";
  size_t used = 0;
  halo_status_t status = NULL;
  for (size_t i = 0; i < count; ++i) {
    halo_status_free(status);
    status = halo_hal_cuda_nvrtc_open(names[i], nvrtc);
    if (!status || halo_status_code(status) != HALO_STATUS_NOT_FOUND) break;
    if (used < sizeof(tried)) {
      int written = snprintf(tried + used, sizeof(tried) - used, "%s%s",
                             used ? "; " : "", halo_status_message(status));
      if (written > 0) used += (size_t)written;
    }
  }
  if (status && halo_status_code(status) == HALO_STATUS_NOT_FOUND) {
    halo_status_free(status);
    halo_hal_cuda_load_fail(result,
                            "no NVRTC (CUDA C sources cannot be compiled): "
                            "dlopen: %s",
                            tried);
    return;
  }
  if (status) {
    halo_hal_cuda_load_fail(result, "%s", halo_status_message(status));
    halo_status_free(status);
    return;
  }
  // The unversioned name may be any major: code from a newer NVRTC than the
  // driver does not load.
  if (driver_version != 0 && nvrtc->major > driver_version / 1000) {
    halo_hal_cuda_load_fail(result,
                            "%s is NVRTC %d.%d, newer than the CUDA driver "
                            "%d.%d (install the NVRTC of the driver's major)",
                            nvrtc->soname, nvrtc->major, nvrtc->minor,
                            driver_version / 1000, driver_version % 1000 / 10);
    return;
  }
  result->code = HALO_STATUS_OK;
}

halo_status_t halo_hal_cuda_nvrtc_load(
    const halo_hal_cuda_nvrtc_symbols_t **out_symbols) {
  *out_symbols = NULL;
  pthread_once(&halo_hal_cuda_nvrtc_once, halo_hal_cuda_nvrtc_load_once);
  HALO_RETURN_IF_ERROR(halo_hal_cuda_load_status(&halo_hal_cuda_nvrtc_result));
  *out_symbols = &halo_hal_cuda_nvrtc_table;
  return NULL;
}

bool halo_hal_cuda_result_is_sticky(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_EXTERNAL_DEVICE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    // The MPS server ended this client ("the process must be terminated
    // and relaunched"): every later call fails the same.
    case CUDA_ERROR_MPS_CLIENT_TERMINATED:
      return true;
    default:
      return false;
  }
}

static halo_status_code_t halo_hal_cuda_result_code(CUresult result) {
  if (halo_hal_cuda_result_is_sticky(result)) return HALO_STATUS_DEVICE_LOST;
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_TOO_MANY_PEERS:
    case CUDA_ERROR_MPS_MAX_CLIENTS_REACHED:
    case CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED:
      return HALO_STATUS_RESOURCE_EXHAUSTED;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_SOURCE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND:
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
    case CUDA_ERROR_INVALID_RESOURCE_TYPE:
    case CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION:
      return HALO_STATUS_INVALID_ARGUMENT;
    case CUDA_ERROR_NOT_FOUND:
    case CUDA_ERROR_FILE_NOT_FOUND:
      return HALO_STATUS_NOT_FOUND;
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_JIT_COMPILATION_DISABLED:
    case CUDA_ERROR_CDP_NOT_SUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
      return HALO_STATUS_UNIMPLEMENTED;
    case CUDA_ERROR_NOT_PERMITTED:
    case CUDA_ERROR_DEVICE_NOT_LICENSED:
      return HALO_STATUS_PERMISSION_DENIED;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_MPS_CONNECTION_FAILED:
    case CUDA_ERROR_MPS_RPC_FAILURE:
    case CUDA_ERROR_MPS_SERVER_NOT_READY:
    case CUDA_ERROR_NOT_READY:
      return HALO_STATUS_UNAVAILABLE;
    case CUDA_ERROR_TIMEOUT:
      return HALO_STATUS_DEADLINE_EXCEEDED;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
    case CUDA_ERROR_CONTEXT_ALREADY_IN_USE:
    case CUDA_ERROR_ALREADY_MAPPED:
    case CUDA_ERROR_ALREADY_ACQUIRED:
      return HALO_STATUS_ALREADY_EXISTS;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
    case CUDA_ERROR_PEER_ACCESS_NOT_ENABLED:
    case CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE:
    case CUDA_ERROR_ILLEGAL_STATE:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    case CUDA_ERROR_CAPTURED_EVENT:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
    case CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE:
    case CUDA_ERROR_FUNCTION_NOT_LOADED:
      return HALO_STATUS_FAILED_PRECONDITION;
    default:
      return HALO_STATUS_INTERNAL;
  }
}

halo_status_t halo_hal_cuda_result_to_status(const halo_hal_cuda_symbols_t *cu,
                                             CUresult result,
                                             const char *call) {
  if (result == CUDA_SUCCESS) return NULL;
  const char *name = NULL;
  const char *text = NULL;
  if (cu) {
    cu->cuGetErrorName(result, &name);
    cu->cuGetErrorString(result, &text);
  }
  char fallback[32];
  if (!name) {
    snprintf(fallback, sizeof(fallback), "CUresult %d", (int)result);
    name = fallback;
  }
  return halo_status_make(halo_hal_cuda_result_code(result), "%s: %s: %s", call,
                          name, text ? text : "(no description)");
}
