// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A call that may never return, run on a thread of its own and waited for
// until a deadline. nng 1.5.2's nng_close can wait for ever (its ipc
// transport loses a pipe's receive when the pipe closes while a message is
// being read, and then no pipe of the process finishes closing: nng reaps
// them on one thread). halod's sockets and libhalo's close through this, so
// that neither a stopping daemon nor a client that reconnects hangs.
#ifndef HALO_COMMON_BOUNDED_CALL_H_
#define HALO_COMMON_BOUNDED_CALL_H_

#include <stdbool.h>
#include <stdint.h>

// Runs |fn|(|arg|) on a new thread and waits until it returned or
// CLOCK_MONOTONIC reached |deadline_ns|. True if it returned (or ran on the
// caller's thread because no thread could start); false if the deadline
// passed: it goes on alone, so |arg| and whatever |fn| touches must stay
// valid (a leak, not a hang).
bool halo_bounded_call(void (*fn)(void *arg), void *arg, int64_t deadline_ns);

#endif  // HALO_COMMON_BOUNDED_CALL_H_
