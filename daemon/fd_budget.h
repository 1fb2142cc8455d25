// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Descriptor budget: every semaphore page and host arena is a memfd that
// halod keeps open, so a session could use up halod's descriptors inside
// its handle quota (each exportable semaphore has a page of its own). Three
// limits, all settings:
// - session-fds: pages and arenas created for one session and still open,
//   and those of other sessions' that it imported (it keeps them alive);
// - uid-fds: the same summed over all sessions of one tenant, a uid or
//   under trust-domain cgroup a uid in one cgroup (daemon/tenant.h; a page
//   that two sessions of the tenant hold counts for each), so that one
//   tenant's many sessions cannot take the descriptors others need. A
//   tenant holding that many gets no new session either: its connections would
//   take descriptors (nng's, the fd channel's, the ring's) and could do
//   nothing;
// - fd-reserve: a page or arena never takes one of the top fd-reserve
//   descriptor numbers under RLIMIT_NOFILE. Linux hands out the lowest free
//   number, so a memfd numbered there means fewer than fd-reserve remain,
//   and they stay for new connections and the admin socket.
//
// Loop thread only.
#ifndef HALOD_FD_BUDGET_H_
#define HALOD_FD_BUDGET_H_

#include <stdint.h>

#include "daemon/config.h"
#include "daemon/daemon.h"

// RESOURCE_EXHAUSTED naming session-fds when session |owner_session| (0:
// none) holds its quota, or naming uid-fds when its tenant holds its; |what|
// names the object ("a semaphore page").
halo_status_t halod_fd_budget_check_session(halod_t *daemon,
                                            uint64_t owner_session,
                                            const char *what);

// RESOURCE_EXHAUSTED naming uid-fds when the tenant of |session| (a new
// one, with |tenant_sessions| others open) holds its quota: the session is
// refused with that (counted in halod_stats_t.sessions_uid_fds_limited,
// the metric halo_sessions_uid_fds_limited_total).
halo_status_t halod_fd_budget_check_tenant(halod_t *daemon,
                                           const halod_session_t *session,
                                           uint32_t tenant_sessions);

// RESOURCE_EXHAUSTED naming fd-reserve when the new descriptor |fd| lies
// within fd-reserve of RLIMIT_NOFILE (the caller closes it).
halo_status_t halod_fd_budget_check_descriptor(halod_t *daemon, int fd,
                                               const char *what);

// A page or arena of |owner_session| was created / destroyed.
void halod_fd_budget_charge(halod_t *daemon, uint64_t owner_session);
void halod_fd_budget_credit(halod_t *daemon, uint64_t owner_session);
// |session| (and its tenant) holds |delta| descriptors more (fewer:
// negative).
void halod_fd_budget_add(halod_t *daemon, halod_session_t *session,
                         int32_t delta);

// At start: warns when one tenant could hold so many descriptors (uid-fds,
// and those of its connections as uid-connections and
// fd-channel-connections bound them) that it alone would use up halod's
// open-file limit.
void halod_fd_budget_check_limits(const halod_config_t *config);

#endif  // HALOD_FD_BUDGET_H_
