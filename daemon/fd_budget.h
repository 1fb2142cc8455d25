// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Descriptor budget: every semaphore page and host arena is a memfd that
// halod keeps open, so a session could use up halod's descriptors inside
// its handle quota (each exportable semaphore has a page of its own). Two
// limits, both settings:
// - session-fds: pages and arenas created for one session and still open;
// - fd-reserve: a page or arena never takes one of the top fd-reserve
//   descriptor numbers under RLIMIT_NOFILE. Linux hands out the lowest free
//   number, so a memfd numbered there means fewer than fd-reserve remain,
//   and they stay for new connections and the admin socket.
//
// Loop thread only.
#ifndef HALOD_FD_BUDGET_H_
#define HALOD_FD_BUDGET_H_

#include <stdint.h>

#include "daemon/daemon.h"

// RESOURCE_EXHAUSTED naming session-fds when session |owner_session| (0:
// none) holds its quota; |what| names the object ("a semaphore page").
halo_status_t halod_fd_budget_check_session(halod_t *daemon,
                                            uint64_t owner_session,
                                            const char *what);

// RESOURCE_EXHAUSTED naming fd-reserve when the new descriptor |fd| lies
// within fd-reserve of RLIMIT_NOFILE (the caller closes it).
halo_status_t halod_fd_budget_check_descriptor(halod_t *daemon, int fd,
                                               const char *what);

// A page or arena of |owner_session| was created / destroyed.
void halod_fd_budget_charge(halod_t *daemon, uint64_t owner_session);
void halod_fd_budget_credit(halod_t *daemon, uint64_t owner_session);

#endif  // HALOD_FD_BUDGET_H_
