// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// One halod per client socket. A second halod started on the same --listen
// path (by hand to "check" it, a start script run twice, a DaemonSet's
// surge pod) must fail before it touches any path: the fd channel beside
// the client socket is created before nng's listener finds the address in
// use, and removing a live halod's fd channel would leave it serving no new
// client. halod holds an exclusive flock(2) on PATH.lock (the client
// socket's path and ".lock") for as long as it runs, with its pid in it;
// the process's exit releases it, whatever the way it ends. The file stays
// (removing it would let a starting halod lock a file another just
// replaced). Main thread, at start.
#ifndef HALOD_INSTANCE_LOCK_H_
#define HALOD_INSTANCE_LOCK_H_

#include "common/status.h"

// Locks the client socket |address| ("ipc://PATH") for this process; the
// descriptor stays open (close-on-exec) until the process exits.
// FAILED_PRECONDITION naming the other halod's pid where one holds it, or
// the errno of the lock file otherwise.
halo_status_t halod_instance_lock(const char *address);

#endif  // HALOD_INSTANCE_LOCK_H_
