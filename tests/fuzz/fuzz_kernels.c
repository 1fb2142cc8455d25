// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The fuzz harnesses' executable for the local driver: one entry point
// that touches nothing, so that a dispatch the fuzzer records runs whatever
// its arguments and bindings (tests/fuzz/fuzz_halod.h).
#include "halo/local_kernel.h"

HALO_LOCAL_KERNEL(noop) {
  (void)state;
}
