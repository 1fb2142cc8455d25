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
  if (!session) return NULL;
  if (session->memfds >= daemon->config.session_fds) {
    return halo_status_make(
        HALO_STATUS_RESOURCE_EXHAUSTED,
        "%s would exceed the session's quota session-fds (%u of %u "
        "descriptors in use: semaphore pages, an exportable semaphore's "
        "each, host arenas, and those of imported semaphores and buffers; "
        "release semaphores or buffers first)",
        what, session->memfds, daemon->config.session_fds);
  }
  uint32_t tenant_fds = halod_tenant_fds(&daemon->sessions, session->tenant);
  if (tenant_fds < daemon->config.uid_fds) return NULL;
  char tenant[HALOD_TENANT_WORDS_BYTES];
  halod_tenant_describe(halod_tenancy(daemon), session->tenant, session->pid,
                        tenant, sizeof(tenant));
  return halo_status_make(
      HALO_STATUS_RESOURCE_EXHAUSTED,
      "%s would exceed the quota uid-fds of %s (%u of %u descriptors "
      "in use by all its sessions together, each counted as session-fds "
      "counts it; this session holds %u; release semaphores or buffers, or "
      "end other sessions, first)",
      what, tenant, tenant_fds, daemon->config.uid_fds, session->memfds);
}

halo_status_t halod_fd_budget_check_tenant(halod_t *daemon,
                                           const halod_session_t *session,
                                           uint32_t tenant_sessions) {
  uint32_t tenant_fds = halod_tenant_fds(&daemon->sessions, session->tenant);
  if (tenant_fds < daemon->config.uid_fds) return NULL;
  ++daemon->stats.sessions_uid_fds_limited;
  char tenant[HALOD_TENANT_WORDS_BYTES];
  halod_tenant_describe(halod_tenancy(daemon), session->tenant, session->pid,
                        tenant, sizeof(tenant));
  return halo_status_make(
      HALO_STATUS_RESOURCE_EXHAUSTED,
      "%s holds %u descriptors of halod's in its %u sessions (semaphore "
      "pages, host arenas, imports), the quota uid-fds (%u): a new session "
      "could create nothing; release semaphores or buffers, or end sessions, "
      "first",
      tenant, tenant_fds, tenant_sessions, daemon->config.uid_fds);
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

void halod_fd_budget_add(halod_t *daemon, halod_session_t *session,
                         int32_t delta) {
  if (delta < 0 && session->memfds < (uint32_t) - (int64_t)delta) {
    delta = -(int32_t)session->memfds;  // never below zero
  }
  if (!delta) return;
  session->memfds += (uint32_t)delta;
  halod_tenant_fds_add(&daemon->sessions, session->tenant, delta);
}

void halod_fd_budget_charge(halod_t *daemon, uint64_t owner_session) {
  halod_session_t *session = halod_fd_budget_owner(daemon, owner_session);
  if (session) halod_fd_budget_add(daemon, session, 1);
}

void halod_fd_budget_credit(halod_t *daemon, uint64_t owner_session) {
  halod_session_t *session = halod_fd_budget_owner(daemon, owner_session);
  if (session) halod_fd_budget_add(daemon, session, -1);
}

void halod_fd_budget_check_limits(const halod_config_t *config) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_max == RLIM_INFINITY)
    return;
  // One tenant's descriptors: its pages and arenas; per session past the
  // nng connection, a ring's memfd and doorbell; the refused connections
  // still open; its fd channel connections.
  uint64_t connections = (uint64_t)config->uid_connections;
  uint64_t one_tenant = (uint64_t)config->uid_fds + 3 * connections +
                        HALOD_UID_REFUSED_OPEN + config->fd_channel_connections;
  if (one_tenant + config->fd_reserve < (uint64_t)limit.rlim_max) return;
  HALO_LOG_WARN(
      "one uid (under trust-domain cgroup, one uid in one cgroup) may hold "
      "up to %llu descriptors (uid-fds %u; 3 for each of uid-connections %u "
      "and 1 for 16 more; fd-channel-connections %u), which with fd-reserve "
      "(%u) is all of halod's open-file limit (%llu): one user could keep "
      "every other out. Lower uid-fds or uid-connections, or raise the "
      "limit (LimitNOFILE=)",
      (unsigned long long)one_tenant, config->uid_fds, config->uid_connections,
      config->fd_channel_connections, config->fd_reserve,
      (unsigned long long)limit.rlim_max);
}
