// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// CUDA C compiled to PTX in a test's own process, with the NVRTC halod
// would use. For the CUDA tests on a host without Landlock, where halod
// refuses CUDA C (it compiles only in a Landlock sandbox): they load the
// same kernels as PTX instead, as a client there would.
#ifndef HALO_TESTS_SUPPORT_NVRTC_PTX_H_
#define HALO_TESTS_SUPPORT_NVRTC_PTX_H_

#include <stddef.h>

#include "halo/status.h"

// Compiles the |size| bytes of CUDA C at |source| for NVRTC's default
// virtual architecture (PTX the driver compiles for any newer GPU). On
// success *|out_ptx| is a malloc'd, NUL-terminated PTX of *|out_size|
// bytes (the NUL not counted); the caller frees it. Fails naming NVRTC's
// error and log.
halo_status_t halo_test_nvrtc_ptx(const char *source, size_t size,
                                  char **out_ptx, size_t *out_size);

#endif  // HALO_TESTS_SUPPORT_NVRTC_PTX_H_
