// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Internal helpers around the public halo_status_t (include/halo/status.h):
// early-return macros used by the daemon, the HAL and libhalo.
#ifndef HALO_COMMON_STATUS_H_
#define HALO_COMMON_STATUS_H_

#include <errno.h>
#include <string.h>

#include "halo/status.h"

#define HALO_RETURN_IF_ERROR(expr)           \
  do {                                       \
    halo_status_t halo__status_ = (expr);    \
    if (halo__status_) return halo__status_; \
  } while (0)

// Maps an errno value to the closest status code.
halo_status_code_t halo_status_code_from_errno(int error_number);

// A status for a failed OS call: "<what>: <strerror(errno)>".
#define halo_status_from_errno(error_number, ...)                       \
  halo_status_annotate(                                                 \
      halo_status_make(halo_status_code_from_errno(error_number), "%s", \
                       strerror(error_number)),                         \
      __VA_ARGS__)

#endif  // HALO_COMMON_STATUS_H_
