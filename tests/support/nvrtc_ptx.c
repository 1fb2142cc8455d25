// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "nvrtc_ptx.h"

#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "hal/cuda/cuda_symbols.h"

halo_status_t halo_test_nvrtc_ptx(const char *source, size_t size,
                                  char **out_ptx, size_t *out_size) {
  *out_ptx = NULL;
  *out_size = 0;
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = NULL;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_nvrtc_load(&nvrtc));
  char *text = malloc(size + 1);
  if (!text) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  memcpy(text, source, size);
  text[size] = '\0';
  nvrtcProgram program = NULL;
  nvrtcResult result =
      nvrtc->nvrtcCreateProgram(&program, text, "halo_test.cu", 0, NULL, NULL);
  free(text);
  if (result != NVRTC_SUCCESS) {
    return halo_status_make(HALO_STATUS_INTERNAL, "nvrtcCreateProgram: %s",
                            nvrtc->nvrtcGetErrorString(result));
  }
  halo_status_t status = NULL;
  result = nvrtc->nvrtcCompileProgram(program, 0, NULL);
  if (result != NVRTC_SUCCESS) {
    size_t log_size = 0;
    char *log = NULL;
    if (nvrtc->nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS &&
        (log = calloc(1, log_size + 1))) {
      nvrtc->nvrtcGetProgramLog(program, log);
    }
    status = halo_status_make(
        HALO_STATUS_INVALID_ARGUMENT, "nvrtcCompileProgram: %s\n%s",
        nvrtc->nvrtcGetErrorString(result), log ? log : "");
    free(log);
  }
  size_t ptx_size = 0;
  if (!status) {
    result = nvrtc->nvrtcGetPTXSize(program, &ptx_size);
    if (result != NVRTC_SUCCESS) {
      status = halo_status_make(HALO_STATUS_INTERNAL, "nvrtcGetPTXSize: %s",
                                nvrtc->nvrtcGetErrorString(result));
    } else if (ptx_size == 0) {
      status = halo_status_make(HALO_STATUS_INTERNAL,
                                "nvrtcGetPTXSize: NVRTC made no PTX");
    }
  }
  char *ptx = NULL;
  if (!status) {
    // The size counts the terminating NUL.
    ptx = malloc(ptx_size);
    if (!ptx) {
      status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    } else if ((result = nvrtc->nvrtcGetPTX(program, ptx)) != NVRTC_SUCCESS) {
      status = halo_status_make(HALO_STATUS_INTERNAL, "nvrtcGetPTX: %s",
                                nvrtc->nvrtcGetErrorString(result));
      free(ptx);
      ptx = NULL;
    }
  }
  nvrtc->nvrtcDestroyProgram(&program);
  if (status) return status;
  ptx[ptx_size - 1] = '\0';
  *out_ptx = ptx;
  *out_size = strlen(ptx);
  return NULL;
}
