// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/domain_quota.h"

#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "daemon/session.h"
#include "daemon/trust_domain.h"

halo_status_t halod_domain_quota_join(halod_t *daemon,
                                      halod_session_t *session) {
  halo_u64_map_t *usages = &daemon->sessions.domain_usage;
  halod_domain_usage_t *usage = halo_u64_map_get(usages, session->lane_key);
  if (!usage) {
    usage = calloc(1, sizeof(*usage));
    if (!usage) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "oom counting the trust domain's bytes");
    }
    usage->key = session->lane_key;
    halo_status_t status = halo_u64_map_put(usages, usage->key, usage);
    if (status) {
      free(usage);
      return status;
    }
  }
  ++usage->sessions;
  session->domain_usage = usage;
  return NULL;
}

void halod_domain_quota_leave(halod_t *daemon, halod_session_t *session) {
  halod_domain_usage_t *usage = session->domain_usage;
  if (!usage) return;
  session->domain_usage = NULL;
  usage->host_bytes -= session->host_bytes;
  usage->device_bytes -= session->device_bytes;
  if (--usage->sessions > 0) return;
  halo_u64_map_remove(&daemon->sessions.domain_usage, usage->key);
  free(usage);
}

halo_status_t halod_domain_quota_check(const halod_t *daemon,
                                       const halod_session_t *session,
                                       bool host, uint64_t size,
                                       const char *doing) {
  const halod_domain_usage_t *usage = session->domain_usage;
  uint64_t quota = host ? daemon->config.domain_host_bytes
                        : daemon->config.domain_device_bytes;
  if (!usage || quota == 0) return NULL;
  uint64_t used = host ? usage->host_bytes : usage->device_bytes;
  if (size <= quota && used <= quota - size) return NULL;
  // The domain's name without its part ("#1", where it has parts): the
  // count is every part's.
  const char *name = session->domain ? session->domain->name : "(none)";
  const char *part = halod_domain_parts(daemon) > 1 ? strrchr(name, '#') : NULL;
  int length = part ? (int)(part - name) : (int)strlen(name);
  return halo_status_make(
      HALO_STATUS_RESOURCE_EXHAUSTED,
      "%s would exceed the quota %s of trust domain %.*s (%llu of %llu "
      "bytes in use by its %u sessions together; this session holds %llu)",
      doing, host ? "domain-host-bytes" : "domain-device-bytes", length, name,
      (unsigned long long)used, (unsigned long long)quota, usage->sessions,
      (unsigned long long)(host ? session->host_bytes : session->device_bytes));
}

// Adds |delta| (wrapping: a credit is the charge's negation) to |session|'s
// bytes of the kind and to its domain's.
static void halod_domain_quota_add(halod_session_t *session, bool host,
                                   uint64_t delta) {
  halod_domain_usage_t *usage = session->domain_usage;
  *(host ? &session->host_bytes : &session->device_bytes) += delta;
  if (usage) *(host ? &usage->host_bytes : &usage->device_bytes) += delta;
}

void halod_domain_quota_charge(halod_session_t *session, bool host,
                               uint64_t size) {
  halod_domain_quota_add(session, host, size);
}

void halod_domain_quota_credit(halod_session_t *session, bool host,
                               uint64_t size) {
  halod_domain_quota_add(session, host, -size);
}
