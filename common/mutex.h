// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Mutexes of the hot paths that spinning threads share (a device worker's
// ring loop, its submission and completion threads, the reporter).
#ifndef HALO_COMMON_MUTEX_H_
#define HALO_COMMON_MUTEX_H_

#include <pthread.h>

// Initializes |mutex| as an adaptive mutex where the C library has one
// (glibc's PTHREAD_MUTEX_ADAPTIVE_NP), else a default one. An adaptive
// mutex found held spins a little before it sleeps in the kernel. The
// sections these mutexes guard last tens of nanoseconds, so a thread that
// finds one held gets it within the spin: no futex sleep for it and no
// futex wake for the holder, each a system call and a wake-up of several
// microseconds on a virtual machine. A default glibc mutex sleeps at the
// first failed try.
void halo_mutex_initialize(pthread_mutex_t *mutex);

#endif  // HALO_COMMON_MUTEX_H_
