// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A stand-in libnvrtc.so.12 for hal_cuda_loader_test (beside the fake
// libcuda.so.1): NVRTC 12.4 by nvrtcVersion, every other entry point fails.
// The loader must pick it for a CUDA 12 driver even where a real
// libnvrtc.so.13 is installed.
typedef int nvrtcResult;

#define FAKE_EXPORT __attribute__((visibility("default")))

FAKE_EXPORT nvrtcResult nvrtcVersion(int *major, int *minor) {
  *major = 12;
  *minor = 4;
  return 0;
}

FAKE_EXPORT const char *nvrtcGetErrorString(nvrtcResult result) {
  (void)result;
  return "fake NVRTC";
}

static nvrtcResult fake_unsupported(void) {
  return 8;  // NVRTC_ERROR_INTERNAL_ERROR
}

#define FAKE_UNSUPPORTED(name)         \
  FAKE_EXPORT nvrtcResult name(void) { \
    return fake_unsupported();         \
  }
FAKE_UNSUPPORTED(nvrtcCreateProgram)
FAKE_UNSUPPORTED(nvrtcDestroyProgram)
FAKE_UNSUPPORTED(nvrtcCompileProgram)
FAKE_UNSUPPORTED(nvrtcGetProgramLogSize)
FAKE_UNSUPPORTED(nvrtcGetProgramLog)
FAKE_UNSUPPORTED(nvrtcGetCUBINSize)
FAKE_UNSUPPORTED(nvrtcGetCUBIN)
FAKE_UNSUPPORTED(nvrtcGetPTXSize)
FAKE_UNSUPPORTED(nvrtcGetPTX)
