// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The CUDA driver's entry points, resolved at run time: libcuda.so.1 through
// dlopen and cuGetProcAddress at a pinned API version (the cuda.h we build
// against, CUDA_VERSION), NVRTC (libnvrtc.so.13) through dlopen, optional.
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
// Thread-safety: the tables are immutable once loaded; loading is once per
// process (pthread_once).
#ifndef HALO_HAL_CUDA_CUDA_SYMBOLS_H_
#define HALO_HAL_CUDA_CUDA_SYMBOLS_H_

#include <cuda.h>
#include <nvrtc.h>
#include <stdbool.h>
#include <stddef.h>

#include "halo/status.h"

// The API version every driver symbol is resolved at.
#define HALO_HAL_CUDA_API_VERSION CUDA_VERSION

// Never list cuCtxSynchronize, cuCtxGetDevice or cuStreamGetCtx: at API
// version 13000 cuGetProcAddress returns their _v2 variants (which take a
// CUcontext), while cuda.h declares the v1 prototypes under the base name;
// the call then passes garbage for the context (seen on the H100:
// cuCtxSynchronize() failed with CUDA_ERROR_CONTEXT_IS_DESTROYED). Use
// stream synchronization instead.
// clang-format off
#define HALO_HAL_CUDA_DRIVER_SYMBOLS(X)                                      \
  /* initialization, devices, contexts */                                   \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)     \
  X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)                     \
  X(cuDeviceTotalMem) X(cuDeviceGetAttribute)                               \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                  \
  X(cuCtxSetCurrent) X(cuCtxGetCurrent)                                     \
  X(cuCtxGetStreamPriorityRange)                                            \
  /* streams and events */                                                  \
  X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamSynchronize)   \
  X(cuStreamQuery) X(cuStreamWaitEvent) X(cuStreamWriteValue64)             \
  X(cuLaunchHostFunc)                                                       \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)       \
  X(cuEventSynchronize) X(cuEventElapsedTime)                               \
  /* modules and kernels */                                                 \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)              \
  X(cuFuncGetParamInfo) X(cuFuncGetAttribute) X(cuFuncSetAttribute)        \
  X(cuLaunchKernel)                                                         \
  /* memory */                                                              \
  X(cuDeviceGetDefaultMemPool) X(cuMemPoolSetAttribute)                     \
  X(cuMemPoolTrimTo)                                                        \
  X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemGetInfo)                      \
  X(cuMemcpyAsync) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)                \
  X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async)                \
  X(cuMemHostRegister) X(cuMemHostUnregister) X(cuMemHostGetDevicePointer)  \
  /* graphs */                                                              \
  X(cuGraphCreate) X(cuGraphDestroy) X(cuGraphAddKernelNode)                \
  X(cuGraphAddMemsetNode) X(cuGraphAddMemcpyNode) X(cuGraphAddEmptyNode)    \
  X(cuGraphAddNode) X(cuGraphInstantiateWithFlags) X(cuGraphExecDestroy)    \
  X(cuGraphLaunch) X(cuGraphUpload)                                         \
  X(cuGraphExecKernelNodeSetParams) X(cuGraphExecMemsetNodeSetParams)       \
  X(cuGraphExecMemcpyNodeSetParams) X(cuGraphExecNodeSetParams)          \
  /* added by cuda_executable.c / cuda_compiler.c (additive): libraries, */ \
  /* module enumeration, the driver's PTX linker */                         \
  X(cuModuleLoadDataEx) X(cuModuleGetFunctionCount)                         \
  X(cuModuleEnumerateFunctions) X(cuFuncGetName)                            \
  X(cuLibraryLoadData) X(cuLibraryUnload) X(cuLibraryGetKernelCount)        \
  X(cuLibraryEnumerateKernels) X(cuKernelGetName) X(cuKernelGetFunction)    \
  X(cuKernelGetParamInfo) X(cuLibraryGetKernel)                             \
  X(cuLinkCreate) X(cuLinkAddData) X(cuLinkComplete) X(cuLinkDestroy)       \
  X(cuDeviceGetPCIBusId)                                                    \
  /* added by cuda_command_buffer.c / cuda_queue.c (additive): pinned */    \
  /* binding-table staging, device-updatable kernel nodes */                \
  X(cuMemAllocHost) X(cuMemFreeHost) X(cuGraphKernelNodeSetParams)          \
  X(cuGraphKernelNodeSetAttribute) X(cuGraphKernelNodeGetAttribute)

#define HALO_HAL_CUDA_NVRTC_SYMBOLS(X)                                       \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram)              \
  X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize)   \
  X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)               \
  X(nvrtcGetPTXSize) X(nvrtcGetPTX)
// clang-format on

#define HALO_HAL_CUDA_SYMBOL_FIELD(name) __typeof__(name) *name;

typedef struct halo_hal_cuda_symbols_t {
  HALO_HAL_CUDA_DRIVER_SYMBOLS(HALO_HAL_CUDA_SYMBOL_FIELD)
  int driver_version;  // cuDriverGetVersion, e.g. 13000
} halo_hal_cuda_symbols_t;

typedef struct halo_hal_cuda_nvrtc_symbols_t {
  HALO_HAL_CUDA_NVRTC_SYMBOLS(HALO_HAL_CUDA_SYMBOL_FIELD)
  int major;
  int minor;
} halo_hal_cuda_nvrtc_symbols_t;

// Loads libcuda.so.1, resolves every driver symbol and calls cuInit(0)
// (after setting CUDA_MODULE_LOADING=EAGER unless the environment already
// sets it), once per process. UNAVAILABLE with the reason (no library, a
// missing symbol, a driver older than HALO_HAL_CUDA_API_VERSION, cuInit's
// error, no device) otherwise; the same outcome on every later call.
halo_status_t halo_hal_cuda_symbols_load(
    const halo_hal_cuda_symbols_t **out_symbols);

// NVRTC, once per process; UNAVAILABLE with the reason when
// libnvrtc.so.13 cannot be loaded (CUDA C sources are then refused).
halo_status_t halo_hal_cuda_nvrtc_load(
    const halo_hal_cuda_nvrtc_symbols_t **out_symbols);

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
