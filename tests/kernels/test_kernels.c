// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Test kernels for the local driver (tests/unit/hal_local_test.c and any
// test that loads an ELF executable). Each entry runs once per workgroup.
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "halo/local_kernel.h"

#ifndef TEST_KERNELS_WHICH
#define TEST_KERNELS_WHICH 0
#endif

static uint32_t linear_id(const halo_dispatch_state_t *state) {
  return state->workgroup_id[0] +
         state->workgroup_count[0] *
             (state->workgroup_id[1] +
              state->workgroup_count[1] * state->workgroup_id[2]);
}

// c[i] = a[i] + b[i] for i < n; args: a, b, c (BUFFER), n (uint32).
// Declared, so halod checks its dispatches and reports its parameters (as
// CUDA does for the twin in test_kernels.cu).
HALO_LOCAL_KERNEL_PARAMS(add, 8, 8, 8, 4);
HALO_LOCAL_KERNEL(add) {
  const float *a = HALO_ARG(state, 0, const float *);
  const float *b = HALO_ARG(state, 1, const float *);
  float *c = HALO_ARG(state, 2, float *);
  uint32_t n = HALO_ARG(state, 3, uint32_t);
  uint32_t first = state->workgroup_id[0] * state->workgroup_size[0];
  for (uint32_t i = first; i < first + state->workgroup_size[0] && i < n; ++i) {
    c[i] = a[i] + b[i];
  }
}

// The same through the binding table: table[0..2] are a, b, c; args:
// BINDING_TABLE, n (uint32).
HALO_LOCAL_KERNEL(add_table) {
  const uint64_t *table = HALO_ARG(state, 0, const uint64_t *);
  uint32_t n = HALO_ARG(state, 1, uint32_t);
  const float *a = (const float *)(uintptr_t)table[0];
  const float *b = (const float *)(uintptr_t)table[1];
  float *c = (float *)(uintptr_t)table[2];
  uint32_t first = state->workgroup_id[0] * state->workgroup_size[0];
  for (uint32_t i = first; i < first + state->workgroup_size[0] && i < n; ++i) {
    c[i] = a[i] + b[i];
  }
}

// out[i] = table[i] for i < count; args: out (BUFFER), BINDING_TABLE,
// count (uint32).
HALO_LOCAL_KERNEL(table_probe) {
  uint64_t *out = HALO_ARG(state, 0, uint64_t *);
  const uint64_t *table = HALO_ARG(state, 1, const uint64_t *);
  uint32_t count = HALO_ARG(state, 2, uint32_t);
  for (uint32_t i = 0; i < count; ++i) out[i] = table[i];
}

// Per workgroup l (x fastest): out[4l..4l+2] = id, out[4l+3] += 1; counts
// (BUFFER, 3 uint32) = workgroup_count; args: out, counts.
HALO_LOCAL_KERNEL(ids) {
  uint32_t *out = HALO_ARG(state, 0, uint32_t *);
  uint32_t *counts = HALO_ARG(state, 1, uint32_t *);
  uint32_t l = linear_id(state);
  out[4 * l + 0] = state->workgroup_id[0];
  out[4 * l + 1] = state->workgroup_id[1];
  out[4 * l + 2] = state->workgroup_id[2];
  __atomic_fetch_add(&out[4 * l + 3], 1, __ATOMIC_RELAXED);
  for (int d = 0; d < 3; ++d) {
    __atomic_store_n(&counts[d], state->workgroup_count[d], __ATOMIC_RELAXED);
  }
}

// Fills its shared memory with l + i and sums it back: out[l] = the sum;
// args: out (BUFFER).
HALO_LOCAL_KERNEL(shared_sum) {
  uint32_t *out = HALO_ARG(state, 0, uint32_t *);
  uint32_t *shared = state->shared_memory;
  uint32_t count = state->shared_memory_bytes / sizeof(uint32_t);
  uint32_t l = linear_id(state);
  for (uint32_t i = 0; i < count; ++i) shared[i] = l + i;
  uint32_t sum = 0;
  for (uint32_t i = 0; i < count; ++i) sum += shared[i];
  out[l] = sum;
}

// Constants of assorted sizes; args: out (BUFFER, 4 uint64), uint8,
// uint64, double, uint16.
HALO_LOCAL_KERNEL(constants) {
  uint64_t *out = HALO_ARG(state, 0, uint64_t *);
  out[0] = HALO_ARG(state, 1, uint8_t);
  out[1] = HALO_ARG(state, 2, uint64_t);
  double d = HALO_ARG(state, 3, double);
  memcpy(&out[2], &d, sizeof(d));
  out[3] = HALO_ARG(state, 4, uint16_t);
}

// *out = which copy of this file this is; args: out (BUFFER).
HALO_LOCAL_KERNEL(which) {
  uint32_t *out = HALO_ARG(state, 0, uint32_t *);
  *out = TEST_KERNELS_WHICH;
}

// Sleeps |microseconds|, then counts itself; args: counter (BUFFER, uint32),
// microseconds (uint32).
HALO_LOCAL_KERNEL(sleepy) {
  uint32_t *counter = HALO_ARG(state, 0, uint32_t *);
  usleep(HALO_ARG(state, 1, uint32_t));
  __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Waits (at most 10 s) until *flag is nonzero.
static void wait_for(const uint32_t *flag) {
  int64_t deadline = now_ms() + 10000;
  while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE) && now_ms() < deadline) {
    usleep(100);
  }
}

// Each workgroup arrives, then waits (at most 10 s) for all n to have
// arrived: out[l] = 1 only if they ran at the same time. args: arrived
// (BUFFER, uint32), n (uint32), out (BUFFER, uint32 per workgroup).
HALO_LOCAL_KERNEL(rendezvous) {
  uint32_t *arrived = HALO_ARG(state, 0, uint32_t *);
  uint32_t n = HALO_ARG(state, 1, uint32_t);
  uint32_t *out = HALO_ARG(state, 2, uint32_t *);
  __atomic_fetch_add(arrived, 1, __ATOMIC_ACQ_REL);
  int64_t deadline = now_ms() + 10000;
  while (__atomic_load_n(arrived, __ATOMIC_ACQUIRE) < n &&
         now_ms() < deadline) {
    usleep(100);
  }
  out[linear_id(state)] = __atomic_load_n(arrived, __ATOMIC_ACQUIRE) >= n;
}

// Counts itself as started, then holds its worker until *gate is set;
// args: started (BUFFER, uint32), gate (BUFFER, uint32).
HALO_LOCAL_KERNEL(gate) {
  uint32_t *started = HALO_ARG(state, 0, uint32_t *);
  const uint32_t *gate = HALO_ARG(state, 1, const uint32_t *);
  __atomic_fetch_add(started, 1, __ATOMIC_ACQ_REL);
  wait_for(gate);
}

// *out = the next number of a shared sequence; args: sequence (BUFFER,
// uint32), out (BUFFER, uint32).
HALO_LOCAL_KERNEL(order) {
  uint32_t *sequence = HALO_ARG(state, 0, uint32_t *);
  uint32_t *out = HALO_ARG(state, 1, uint32_t *);
  *out = __atomic_fetch_add(sequence, 1, __ATOMIC_ACQ_REL);
}

// Writes through a bad pointer (address 16): a real SIGSEGV in whatever process
// runs it (containment_test: a crash must take down only its trust domain's
// worker); no args (declared).
HALO_LOCAL_KERNEL_NO_PARAMS(crash);
HALO_LOCAL_KERNEL(crash) {
  (void)state;
  volatile uintptr_t bad = 16;  // nothing is mapped there
  *(volatile int *)bad = 1;
}

// Sets *started to 1, then spins for ever (the volatile counter keeps the
// compiler from removing the loop); only a kill ends it (containment_test:
// a killed worker, the submission deadline). args: started (BUFFER,
// uint32).
HALO_LOCAL_KERNEL(spin) {
  uint32_t *started = HALO_ARG(state, 0, uint32_t *);
  __atomic_store_n(started, 1, __ATOMIC_RELEASE);
  volatile uint64_t spins = 0;
  for (;;) spins = spins + 1;
}

// Does what word[0] says: 0 returns, 1 spins for ever (after word[1] = 1),
// 2 crashes (after word[1] = 1), 3 spins while word[0] stays 3 (after
// word[1] = 1). A REUSABLE recording of it runs harmlessly
// first (so that the device worker takes its next execution from the ring
// itself, ring_worker_test), then armed. args: word (BUFFER, uint32[2]).
HALO_LOCAL_KERNEL(armed) {
  uint32_t *word = HALO_ARG(state, 0, uint32_t *);
  uint32_t mode = __atomic_load_n(&word[0], __ATOMIC_ACQUIRE);
  if (mode == 0) return;
  __atomic_store_n(&word[1], 1, __ATOMIC_RELEASE);
  if (mode == 2) {
    volatile uintptr_t bad = 16;  // nothing is mapped there
    *(volatile int *)bad = 1;
  }
  if (mode == 3) {
    while (__atomic_load_n(&word[0], __ATOMIC_ACQUIRE) == 3) {
    }
    return;
  }
  volatile uint64_t spins = 0;
  for (;;) spins = spins + 1;
}

// Not an entry point: lookup_entry must refuse it.
__attribute__((visibility("default"))) int not_a_function = 7;

#ifdef TEST_KERNELS_SLOW_LOAD
#include <stdlib.h>
// Loads as slowly as a large compile: the loader's dlopen runs this, and it
// sleeps $HALO_TEST_SLOW_LOAD_MS (halod and its workers inherit it from the
// test) or 1000 ms.
__attribute__((constructor)) static void slow_load(void) {
  const char *text = getenv("HALO_TEST_SLOW_LOAD_MS");
  long ms = text ? strtol(text, NULL, 10) : 1000;
  struct timespec wait = {.tv_sec = ms / 1000,
                          .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&wait, &wait) != 0) {
  }
}
#endif
