// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A tenant: what halod's per-user bounds count under. These are
// uid-connections, uid-fds, fd-channel-connections and
// fd-channel-unauthenticated. uid-replies (the request contexts every user
// shares) and the descriptors halod is still closing for a client
// (daemon/fd_closer.h: a thread each) stay per uid.
//
// Under trust-domain uid or process, a tenant is a uid: the processes of
// one user can signal and trace each other, so they are one party. Under
// trust-domain cgroup it is a uid in one cgroup, trimmed as the trust
// domain's (a container, or with trust-domain-cgroup-trim a Kubernetes
// pod): pods that run as one uid cannot reach each other, and one of them
// holding a bound must not refuse the others. uid-domains stays per uid:
// it bounds the trust domains one user starts.
//
// A tenant is a 64-bit key: the uid in the low 32 bits, under trust-domain
// cgroup 31 bits of a hash of the cgroup path keyed with random bytes of
// halod's own above them, and the top bit set, so that no key is 0. Two
// cgroups of one uid whose hashes meet (about one pair in 2^31, by chance:
// nobody outside halod knows the key) are one tenant: they then share the
// bounds, as every cgroup of a uid would without tenants.
//
// Any thread.
#ifndef HALOD_TENANT_H_
#define HALOD_TENANT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// How halod tells tenants apart (trust-domain and its cgroup trim, both
// fixed at start).
typedef struct halod_tenancy_t {
  bool by_cgroup;        // trust-domain cgroup
  uint32_t cgroup_trim;  // trust-domain-cgroup-trim
} halod_tenancy_t;

static inline halod_tenancy_t halod_tenancy_make(const char *trust_domain,
                                                 uint32_t cgroup_trim) {
  return (halod_tenancy_t){.by_cgroup = strcmp(trust_domain, "cgroup") == 0,
                           .cgroup_trim = cgroup_trim};
}

// |uid|'s tenant for its process |pid| (the peer credentials of a
// connection). Under trust-domain cgroup it reads /proc/PID/cgroup; where
// that cannot be read, the uid alone (such a client's session is refused:
// its trust domain cannot be told either).
uint64_t halod_tenant_of(halod_tenancy_t tenancy, uint32_t uid, uint32_t pid);

// A client halod has no credentials of (its uid reads as UINT32_MAX).
#define HALOD_TENANT_UNKNOWN UINT64_MAX

static inline uint32_t halod_tenant_uid(uint64_t tenant) {
  return (uint32_t)tenant;
}

// |uid| as a tenant of its own, without a cgroup: every tenant under
// trust-domain uid or process, and under trust-domain cgroup a client whose
// cgroup cannot be read, or one of a uid that has uid-domains cgroup
// tenants already (daemon/server.h: a uid that makes cgroups, with a
// delegated cgroup tree, cannot multiply its bounds without end).
static inline uint64_t halod_tenant_of_uid(uint32_t uid) {
  return UINT64_C(1) << 63 | uid;
}

// Whether |tenant| is a uid alone (halod_tenant_of_uid).
static inline bool halod_tenant_is_uid(uint64_t tenant) {
  return (tenant >> 32 & 0x7fffffffu) == 0;
}

// Room for halod_tenant_describe's words (a cgroup path is cut there).
#define HALOD_TENANT_WORDS_BYTES 512

// |tenant| in words for a message: "uid 1000", or under trust-domain
// cgroup "uid 1000 in cgroup /kubepods/pod-a" (the cgroup of |pid| as it
// is now; "uid 1000 in its cgroup" where it cannot be read).
void halod_tenant_describe(halod_tenancy_t tenancy, uint64_t tenant,
                           uint32_t pid, char *out, size_t size);

#endif  // HALOD_TENANT_H_
