// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Fuzzes the checks halod makes on a client's CUBIN and FATBIN before the
// CUDA driver reads them (hal/cuda/cuda_image_check.c): the driver takes
// no size, and ELF tables that point outside the image crashed it, so the
// checks must read nothing outside the bytes sent (nor outside what a
// FATBIN's compressed entry decompresses to), whatever they are, and let
// through only images whose tables lie within them.
//
// Input: one byte, whose lowest bit picks the format (0: CUBIN, 1:
// FATBIN), then the image. The image is copied into a buffer of its exact
// size, so that ASan sees any read past it. No GPU and no driver: a CUBIN
// or FATBIN passes through the checks to the loader unchanged, which the
// harness checks; a refusal must be INVALID_ARGUMENT naming the format.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/cuda/cuda_device.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static halo_hal_cuda_device_t fuzz_device;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  bool fatbin = data[0] & 1;
  size_t image_size = size - 1;
  uint8_t *image = malloc(image_size);
  if (!image) abort();
  memcpy(image, data + 1, image_size);
  halo_hal_executable_params_t params = {
      .format = fatbin ? HALO_HAL_EXECUTABLE_FORMAT_FATBIN
                       : HALO_HAL_EXECUTABLE_FORMAT_CUBIN,
      .data = image,
      .size = image_size};
  halo_hal_cuda_image_t out;
  halo_status_t status =
      halo_hal_cuda_compiler_build(&fuzz_device, &params, &out);
  if (!status) {
    // Passed through to the loader as it is.
    if (out.data != image || out.size != image_size || out.owned) abort();
  } else {
    const char *message = halo_status_message(status);
    // A refusal names the format; a FATBIN's compressed entries may also
    // find no memory to decompress into (under a fuzzer's malloc limit).
    bool refused = halo_status_code(status) == HALO_STATUS_INVALID_ARGUMENT;
    bool no_memory =
        fatbin && halo_status_code(status) == HALO_STATUS_RESOURCE_EXHAUSTED &&
        strstr(message, "no memory");
    if ((!refused && !no_memory) ||
        !strstr(message, fatbin ? "FATBIN" : "CUBIN")) {
      fprintf(stderr, "unexpected refusal: %s\n", message);
      abort();
    }
    halo_status_free(status);
  }
  free(image);
  return 0;
}
