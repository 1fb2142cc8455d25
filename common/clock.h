// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Monotonic time in nanoseconds and deadline arithmetic.
#ifndef HALO_COMMON_CLOCK_H_
#define HALO_COMMON_CLOCK_H_

#include <stdint.h>

// CLOCK_MONOTONIC in nanoseconds.
int64_t halo_clock_now_ns(void);

// now + timeout, saturating at INT64_MAX (timeouts <= 0 mean "now").
int64_t halo_clock_deadline_ns(int64_t timeout_ns);

#endif  // HALO_COMMON_CLOCK_H_
