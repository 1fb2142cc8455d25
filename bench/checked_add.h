// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A checked vector add through libhalo: c = a + b over
// HALO_CHECKED_ADD_N floats in three host-visible buffers, recorded once
// (REUSABLE) and executed, waited for and checked at each step. The
// steady tenant of halo-bench-workers and of the containment test (a
// client in another trust domain that must not notice a fault).
//
// Thread-compatible; plain libhalo (usable in a forked child).
#ifndef HALO_BENCH_CHECKED_ADD_H_
#define HALO_BENCH_CHECKED_ADD_H_

#include <stdint.h>

#include "halo/halo.h"

#define HALO_CHECKED_ADD_N 256

typedef struct halo_checked_add_t {
  halo_buffer_t *a, *b, *c;
  halo_command_buffer_t *cb;
  halo_semaphore_t *done;
  uint64_t value;
} halo_checked_add_t;

// Records the add with |executable|'s entry "add" (args a, b, c, n) on
// device 0. The objects go with |client|.
halo_status_t halo_checked_add_open(halo_checked_add_t *add,
                                    halo_client_t *client,
                                    halo_executable_t *executable);

// One execution with inputs that depend on |step| (a stale result shows),
// waited for at most |timeout_ns| and checked; errors name the step.
halo_status_t halo_checked_add_step(halo_checked_add_t *add, uint64_t step,
                                    int64_t timeout_ns);

#endif  // HALO_BENCH_CHECKED_ADD_H_
