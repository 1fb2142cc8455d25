// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/fd_budget.h"

#include <sys/resource.h>

#include "common/log.h"
#include "common/status.h"
#include "daemon/session.h"

static halod_session_t *halod_fd_budget_owner(halod_t *daemon,
                                              uint64_t owner_session) {
  return owner_session
             ? halo_u64_map_get(&daemon->sessions.by_id, owner_session)
             : NULL;
}

halo_status_t halod_fd_budget_check_session(halod_t *daemon,
                                            uint64_t owner_session,
                                            const char *what) {
  halod_session_t *session = halod_fd_budget_owner(daemon, owner_session);
  if (!session || session->memfds < daemon->config.session_fds) return NULL;
  return halo_status_make(
      HALO_STATUS_RESOURCE_EXHAUSTED,
      "%s would exceed the session's quota session-fds (%u of %u "
      "descriptors in use: semaphore pages, an exportable semaphore's each, "
      "host arenas, and those of imported semaphores and buffers; release "
      "semaphores or buffers first)",
      what, session->memfds, daemon->config.session_fds);
}

halo_status_t halod_fd_budget_check_descriptor(halod_t *daemon, int fd,
                                               const char *what) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return NULL;
  uint64_t reserve = daemon->config.fd_reserve;
  if ((uint64_t)fd + reserve < (uint64_t)limit.rlim_cur) return NULL;
  HALO_LOG_WARN(
      "refused %s: descriptor %d is within fd-reserve (%llu) of "
      "RLIMIT_NOFILE (%llu)",
      what, fd, (unsigned long long)reserve,
      (unsigned long long)limit.rlim_cur);
  return halo_status_make(
      HALO_STATUS_RESOURCE_EXHAUSTED,
      "%s: halod is out of descriptors (descriptor %d is within fd-reserve, "
      "%llu, of its limit of %llu open files; the reserve is kept for "
      "connections)",
      what, fd, (unsigned long long)reserve,
      (unsigned long long)limit.rlim_cur);
}

void halod_fd_budget_charge(halod_t *daemon, uint64_t owner_session) {
  halod_session_t *session = halod_fd_budget_owner(daemon, owner_session);
  if (session) ++session->memfds;
}

void halod_fd_budget_credit(halod_t *daemon, uint64_t owner_session) {
  halod_session_t *session = halod_fd_budget_owner(daemon, owner_session);
  if (session && session->memfds > 0) --session->memfds;
}
