// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// HALO_TEST_POLL, for every test: unit tests too (they link the common
// code only, not tests/support/halo_test.c).
#ifndef HALO_TESTS_SUPPORT_TEST_POLL_H_
#define HALO_TESTS_SUPPORT_TEST_POLL_H_

#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "common/clock.h"

// Polls |condition| every millisecond until it holds or |timeout_ms|
// passes; evaluates to whether it held.
#define HALO_TEST_POLL(condition, timeout_ms)                  \
  ({                                                           \
    int64_t halo__deadline =                                   \
        halo_clock_now_ns() + (int64_t)(timeout_ms)*1000000ll; \
    bool halo__held;                                           \
    while (!(halo__held = (condition)) &&                      \
           halo_clock_now_ns() < halo__deadline) {             \
      usleep(1000);                                            \
    }                                                          \
    halo__held;                                                \
  })

#endif  // HALO_TESTS_SUPPORT_TEST_POLL_H_
