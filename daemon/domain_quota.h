// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Byte quotas of a trust domain: the host-visible and device bytes that all
// sessions of one trust domain hold together (domain-host-bytes,
// domain-device-bytes; 0: no bound). session-host-bytes and
// session-device-bytes bound one session, but a domain's sessions are as
// many as its processes open (uid-connections), so without these one uid,
// one pod or one process could take the GPU memory every other domain
// needs. A buffer is counted as the session quotas count it: by its
// creator while it holds it and by each session that imported it, so one
// that two sessions of a domain hold counts twice.
//
// A session joins its domain's count when it starts (its lane key: its
// domain's base key, every part of it; a refused session's uid's) and
// leaves it when it ends, giving back what it still held. Loop thread only.
#ifndef HALOD_DOMAIN_QUOTA_H_
#define HALOD_DOMAIN_QUOTA_H_

#include <stdbool.h>
#include <stdint.h>

#include "daemon/daemon.h"

typedef struct halod_domain_usage_t {
  uint64_t key;  // the sessions' lane key
  uint32_t sessions;
  uint64_t host_bytes;
  uint64_t device_bytes;
} halod_domain_usage_t;

// |session| (its lane_key set) joins its domain's count (created at the
// first session); RESOURCE_EXHAUSTED if that cannot be allocated.
halo_status_t halod_domain_quota_join(halod_t *daemon,
                                      halod_session_t *session);
// |session| ends: what it still counts goes back, and the last session's
// leave frees the count.
void halod_domain_quota_leave(halod_t *daemon, halod_session_t *session);

// RESOURCE_EXHAUSTED naming domain-host-bytes or domain-device-bytes
// (|host|) if |size| more bytes would put |session|'s domain over it;
// |doing| says what ("a device buffer of 4096 bytes").
halo_status_t halod_domain_quota_check(const halod_t *daemon,
                                       const halod_session_t *session,
                                       bool host, uint64_t size,
                                       const char *doing);

// |session| holds |size| bytes more / fewer, counted in it and its domain.
void halod_domain_quota_charge(halod_session_t *session, bool host,
                               uint64_t size);
void halod_domain_quota_credit(halod_session_t *session, bool host,
                               uint64_t size);

#endif  // HALOD_DOMAIN_QUOTA_H_
