// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The CUDA driver's entry points, resolved at run time: libcuda.so.1 through
// dlopen and cuGetProcAddress, each symbol at the API version of the variant
// cuda.h declares under its name (so a CUDA 12 driver and a CUDA 13 driver
// both hand over the prototype we call); NVRTC through dlopen, optional
// (libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so: those the driver can run).
// halod links no CUDA library: without a driver the CUDA HAL reports
// UNAVAILABLE with the reason and the daemon serves the local driver.
//
// Every symbol used anywhere in hal/cuda/ is listed once below (an X-macro
// table expanded into the struct and into the resolver). Names are cuda.h's
// public names: cuda.h maps e.g. cuMemHostRegister to cuMemHostRegister_v2,
// so the struct field and the call site both expand to the versioned name,
// while the string given to cuGetProcAddress is the base name (the version
// argument picks the variant).
//
// Supported drivers: CUDA 12.4 (driver 550) and newer, CUDA 13.x; halod is
// built against cuda.h 12.4 or newer (docs/installation.md).
//
// Thread-safety: the tables are immutable once loaded; loading is once per
// process (pthread_once).
#ifndef HALO_HAL_CUDA_CUDA_SYMBOLS_H_
#define HALO_HAL_CUDA_CUDA_SYMBOLS_H_

#include <cuda.h>
#include <nvrtc.h>
#include <stdbool.h>
#include <stddef.h>

#include "halo/status.h"

// The oldest driver halo runs on: the newest version in the table below
// (cuFuncGetParamInfo and the module and library enumerations, CUDA 12.4).
#define HALO_HAL_CUDA_MIN_DRIVER_VERSION 12040
#if CUDA_VERSION < HALO_HAL_CUDA_MIN_DRIVER_VERSION
#error "halo's CUDA driver needs cuda.h from CUDA 12.4 or newer"
#endif

// X(name, version, fallback), one per driver symbol: |version| is the CUDA
// API version at which cuGetProcAddress returns the variant that cuda.h
// (12.4 and newer, up to the CUDA_VERSION built against) declares under
// |name|, never below 12000 (the table's floor: for an entry point older
// than 12.0, 12000 returns the same variant). Each is asked for at exactly
// that version, the lowest that has it, so no newer driver can hand over
// a variant with another prototype. |fallback|, where not 0, is an older
// version whose variant has the same prototype: used when the driver does
// not have the one at |version| (cuEventElapsedTime_v2 is CUDA 12.8; a
// 12.4 driver has only the first). tests/unit/cuda_symbol_versions.cmake
// checks every version against the cudaTypedefs.h of the headers built
// against.
//
// Never list cuCtxSynchronize, cuCtxGetDevice or cuStreamGetCtx: at API
// version 13000 cuGetProcAddress returns their _v2 variants (which take a
// CUcontext), while cuda.h declares the v1 prototypes under the base name;
// the call then passes garbage for the context (seen on the H100:
// cuCtxSynchronize() failed with CUDA_ERROR_CONTEXT_IS_DESTROYED). Use
// stream synchronization instead.
// clang-format off
#define HALO_HAL_CUDA_DRIVER_SYMBOLS(X)                                      \
  /* initialization, devices, contexts */                                    \
  X(cuInit, 12000, 0)                                                        \
  X(cuDriverGetVersion, 12000, 0)                                            \
  X(cuGetErrorName, 12000, 0)                                                \
  X(cuGetErrorString, 12000, 0)                                              \
  X(cuDeviceGetCount, 12000, 0)                                              \
  X(cuDeviceGet, 12000, 0)                                                   \
  X(cuDeviceGetName, 12000, 0)                                               \
  X(cuDeviceTotalMem, 12000, 0)                                              \
  X(cuDeviceGetAttribute, 12000, 0)                                          \
  X(cuDevicePrimaryCtxRetain, 12000, 0)                                      \
  X(cuDevicePrimaryCtxRelease, 12000, 0)                                     \
  X(cuCtxSetCurrent, 12000, 0)                                               \
  X(cuCtxGetCurrent, 12000, 0)                                               \
  X(cuCtxGetStreamPriorityRange, 12000, 0)                                   \
  /* streams and events */                                                   \
  X(cuStreamCreateWithPriority, 12000, 0)                                    \
  X(cuStreamDestroy, 12000, 0)                                               \
  X(cuStreamSynchronize, 12000, 0)                                           \
  X(cuStreamQuery, 12000, 0)                                                 \
  X(cuStreamWaitEvent, 12000, 0)                                             \
  X(cuStreamWriteValue64, 12000, 0)                                          \
  X(cuLaunchHostFunc, 12000, 0)                                              \
  X(cuEventCreate, 12000, 0)                                                 \
  X(cuEventDestroy, 12000, 0)                                                \
  X(cuEventRecord, 12000, 0)                                                 \
  X(cuEventQuery, 12000, 0)                                                  \
  X(cuEventSynchronize, 12000, 0)                                            \
  X(cuEventElapsedTime, 12080, 12000)                                        \
  /* modules and kernels */                                                  \
  X(cuModuleLoadData, 12000, 0)                                              \
  X(cuModuleUnload, 12000, 0)                                                \
  X(cuModuleGetFunction, 12000, 0)                                           \
  X(cuFuncGetParamInfo, 12040, 0)                                            \
  X(cuFuncGetAttribute, 12000, 0)                                            \
  X(cuFuncSetAttribute, 12000, 0)                                            \
  X(cuLaunchKernel, 12000, 0)                                                \
  /* memory */                                                               \
  X(cuDeviceGetDefaultMemPool, 12000, 0)                                     \
  X(cuMemPoolSetAttribute, 12000, 0)                                         \
  X(cuMemPoolTrimTo, 12000, 0)                                               \
  X(cuMemAllocAsync, 12000, 0)                                               \
  X(cuMemFreeAsync, 12000, 0)                                                \
  X(cuMemGetInfo, 12000, 0)                                                  \
  X(cuMemcpyAsync, 12000, 0)                                                 \
  X(cuMemcpyHtoDAsync, 12000, 0)                                             \
  X(cuMemcpyDtoHAsync, 12000, 0)                                             \
  X(cuMemsetD8Async, 12000, 0)                                               \
  X(cuMemsetD16Async, 12000, 0)                                              \
  X(cuMemsetD32Async, 12000, 0)                                              \
  X(cuMemHostRegister, 12000, 0)                                             \
  X(cuMemHostUnregister, 12000, 0)                                           \
  X(cuMemHostGetDevicePointer, 12000, 0)                                     \
  /* graphs */                                                               \
  X(cuGraphCreate, 12000, 0)                                                 \
  X(cuGraphDestroy, 12000, 0)                                                \
  X(cuGraphAddKernelNode, 12000, 0)                                          \
  X(cuGraphAddMemsetNode, 12000, 0)                                          \
  X(cuGraphAddMemcpyNode, 12000, 0)                                          \
  X(cuGraphAddEmptyNode, 12000, 0)                                           \
  X(cuGraphAddNode, 12030, 0)                                                \
  X(cuGraphInstantiateWithFlags, 12000, 0)                                   \
  X(cuGraphExecDestroy, 12000, 0)                                            \
  X(cuGraphLaunch, 12000, 0)                                                 \
  X(cuGraphUpload, 12000, 0)                                                 \
  X(cuGraphExecKernelNodeSetParams, 12000, 0)                                \
  X(cuGraphExecMemsetNodeSetParams, 12000, 0)                                \
  X(cuGraphExecMemcpyNodeSetParams, 12000, 0)                                \
  X(cuGraphExecNodeSetParams, 12020, 0)                                      \
  X(cuGraphNodeSetEnabled, 12000, 0)                                         \
  /* added by cuda_executable.c / cuda_compiler.c (additive): libraries, */  \
  /* module enumeration, the driver's PTX linker */                          \
  X(cuModuleLoadDataEx, 12000, 0)                                            \
  X(cuModuleGetFunctionCount, 12040, 0)                                      \
  X(cuModuleEnumerateFunctions, 12040, 0)                                    \
  X(cuFuncGetName, 12030, 0)                                                 \
  X(cuLibraryLoadData, 12000, 0)                                             \
  X(cuLibraryUnload, 12000, 0)                                               \
  X(cuLibraryGetModule, 12000, 0)                                            \
  X(cuLibraryGetKernelCount, 12040, 0)                                       \
  X(cuLibraryEnumerateKernels, 12040, 0)                                     \
  X(cuKernelGetName, 12030, 0)                                               \
  X(cuKernelGetFunction, 12000, 0)                                           \
  X(cuKernelGetParamInfo, 12040, 0)                                          \
  X(cuLibraryGetKernel, 12000, 0)                                            \
  X(cuLinkCreate, 12000, 0)                                                  \
  X(cuLinkAddData, 12000, 0)                                                 \
  X(cuLinkComplete, 12000, 0)                                                \
  X(cuLinkDestroy, 12000, 0)                                                 \
  X(cuDeviceGetPCIBusId, 12000, 0)                                           \
  /* added by cuda_command_buffer.c / cuda_queue.c (additive): pinned */     \
  /* binding-table staging, device-updatable kernel nodes */                 \
  X(cuMemAllocHost, 12000, 0)                                                \
  X(cuMemFreeHost, 12000, 0)                                                 \
  X(cuGraphKernelNodeSetParams, 12000, 0)                                    \
  X(cuGraphKernelNodeSetAttribute, 12000, 0)                                 \
  X(cuGraphKernelNodeGetAttribute, 12000, 0)

#define HALO_HAL_CUDA_NVRTC_SYMBOLS(X)                                       \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram)              \
  X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize)   \
  X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)               \
  X(nvrtcGetPTXSize) X(nvrtcGetPTX)
// clang-format on

#define HALO_HAL_CUDA_SYMBOL_FIELD(name) __typeof__(name) *name;
#define HALO_HAL_CUDA_DRIVER_SYMBOL_FIELD(name, version, fallback) \
  __typeof__(name) *name;

typedef struct halo_hal_cuda_symbols_t {
  HALO_HAL_CUDA_DRIVER_SYMBOLS(HALO_HAL_CUDA_DRIVER_SYMBOL_FIELD)
  int driver_version;  // cuDriverGetVersion, e.g. 13000
} halo_hal_cuda_symbols_t;

typedef struct halo_hal_cuda_nvrtc_symbols_t {
  HALO_HAL_CUDA_NVRTC_SYMBOLS(HALO_HAL_CUDA_SYMBOL_FIELD)
  int major;
  int minor;
  char soname[32];  // the library loaded, e.g. "libnvrtc.so.12"
} halo_hal_cuda_nvrtc_symbols_t;

// Loads libcuda.so.1, resolves every driver symbol and calls cuInit(0)
// (after setting CUDA_MODULE_LOADING=EAGER unless the environment already
// sets it), once per process. UNAVAILABLE with the reason (no library, a
// missing symbol, a driver older than HALO_HAL_CUDA_MIN_DRIVER_VERSION,
// cuInit's error, no device) otherwise; the same outcome on every later
// call.
halo_status_t halo_hal_cuda_symbols_load(
    const halo_hal_cuda_symbols_t **out_symbols);

// The CUDA driver's version (cuDriverGetVersion, e.g. 12040) as the load
// found it, even where the load then failed (no device); 0 without a
// driver. Loads the driver first (halo_hal_cuda_symbols_load).
int halo_hal_cuda_driver_version(void);

// The NVRTC sonames tried for a driver of |driver_version|, in order: the
// majors the driver can run (the PTX and CUBIN of NVRTC 13 need a CUDA 13
// driver), newest first, then the unversioned libnvrtc.so (whose major is
// checked after loading). 0 (no driver) tries all. Returns the count
// written to |out_names| (at most |capacity|).
size_t halo_hal_cuda_nvrtc_sonames(int driver_version, const char **out_names,
                                   size_t capacity);

// NVRTC, once per process: the first of halo_hal_cuda_nvrtc_sonames for
// the driver found that loads. UNAVAILABLE with the reason when none can
// be loaded or the one found is newer than the driver (CUDA C sources are
// then refused).
halo_status_t halo_hal_cuda_nvrtc_load(
    const halo_hal_cuda_nvrtc_symbols_t **out_symbols);

// Opens NVRTC's library |soname| (dlopen, never closed) and resolves its
// symbols and version into |out_symbols|: NOT_FOUND with dlopen's reason
// where it does not load, UNAVAILABLE where a symbol is missing or
// nvrtcVersion fails (cuda_nvrtc_library.c). Loads no CUDA driver.
halo_status_t halo_hal_cuda_nvrtc_open(
    const char *soname, halo_hal_cuda_nvrtc_symbols_t *out_symbols);

// A status for a failed driver call: the code mapped from |result|
// (CUDA_ERROR_OUT_OF_MEMORY -> RESOURCE_EXHAUSTED, invalid values ->
// INVALID_ARGUMENT, sticky errors -> DEVICE_LOST, ...), the message
// "<call>: <cuGetErrorName>: <cuGetErrorString>". NULL for CUDA_SUCCESS.
halo_status_t halo_hal_cuda_result_to_status(const halo_hal_cuda_symbols_t *cu,
                                             CUresult result, const char *call);

// True for the errors that leave the context unusable (illegal address,
// launch failure, trap, ...): the process must be restarted.
bool halo_hal_cuda_result_is_sticky(CUresult result);

// Calls |cu|->|call| and returns a status naming the call on failure.
#define HALO_CUDA_RETURN_IF_ERROR(cu, call, ...)                        \
  do {                                                                  \
    CUresult halo__result = (cu)->call(__VA_ARGS__);                    \
    if (halo__result != CUDA_SUCCESS) {                                 \
      return halo_hal_cuda_result_to_status((cu), halo__result, #call); \
    }                                                                   \
  } while (0)

#endif  // HALO_HAL_CUDA_CUDA_SYMBOLS_H_
