// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Mutexes of the hot paths that spinning threads share (a device worker's
// ring loop, its submission and completion threads, the reporter), and a
// lock bounded by a CLOCK_MONOTONIC deadline.
#ifndef HALO_COMMON_MUTEX_H_
#define HALO_COMMON_MUTEX_H_

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

// Initializes |mutex| as an adaptive mutex where the C library has one
// (glibc's PTHREAD_MUTEX_ADAPTIVE_NP), else a default one. An adaptive
// mutex found held spins a little before it sleeps in the kernel. The
// sections these mutexes guard last tens of nanoseconds, so a thread that
// finds one held gets it within the spin: no futex sleep for it and no
// futex wake for the holder, each a system call and a wake-up of several
// microseconds on a virtual machine. A default glibc mutex sleeps at the
// first failed try.
void halo_mutex_initialize(pthread_mutex_t *mutex);

// Locks |mutex| unless |deadline_ns| (CLOCK_MONOTONIC, halo_clock_now_ns)
// passes first; false then. The wait is measured on the monotonic clock
// (pthread_mutex_clocklock, glibc 2.30): a step of the wall clock (NTP, an
// operator's date) neither ends it early nor makes it longer. A deadline
// already past still takes a free mutex.
bool halo_mutex_lock_until(pthread_mutex_t *mutex, int64_t deadline_ns);

#endif  // HALO_COMMON_MUTEX_H_
