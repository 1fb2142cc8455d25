// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Trust domains: which sessions may share a device context (and so read each
// other's device memory). trust-domain keys them by uid (default), by
// process, or by uid and cgroup (a container or pod: daemon/cgroup.h). Each
// domain has its device workers (daemon/workers.h).
//
// The peer is identified from the socket's credentials, translated by the
// kernel into halod's namespaces: a client in another pid namespace below
// halod's has a pid here; one outside it has pid 0, and a uid that halod's
// user namespace does not map is the overflow uid. Such peers are refused,
// never guessed at.
//
// Loop thread only.
#ifndef HALOD_TRUST_DOMAIN_H_
#define HALOD_TRUST_DOMAIN_H_

#include <stdint.h>

#include "daemon/daemon.h"

// Room for "uid:4294967295,cgroup:" and a cgroup path of PATH_MAX.
#define HALOD_DOMAIN_NAME_BYTES 4160

typedef struct halod_domain_identity_t {
  // uid: uid + 1; process: 1 << 62 | hash of (pid, start time) (48 bits);
  // cgroup: 1 << 63 | hash.
  uint64_t key;
  char name[HALOD_DOMAIN_NAME_BYTES];  // "uid:N", "pid:N", "uid:N,cgroup:P"
  // trust-domain process: the process's start time and uid, which a domain
  // found by key and name must have too (a pid is reused; a process domain
  // lives as long as its sessions, which a forked child may hold after the
  // process ended). 0 in the other modes.
  uint64_t process_start;
  uint32_t process_uid;
} halod_domain_identity_t;

// The trust domain of peer |process| (pid, uid and start time), as
// trust-domain says. PERMISSION_DENIED, saying why and what to change, for
// a peer halod cannot identify: pid 0 (outside halod's pid namespace), the
// overflow uid while halod runs in a user namespace (a uid it does not
// map), (process) a start time it cannot read, or (cgroup) an unreadable
// /proc/PID/cgroup.
halo_status_t halod_domain_identify(const halod_t *daemon,
                                    const halod_client_process_t *process,
                                    halod_domain_identity_t *out_identity);

// RESOURCE_EXHAUSTED naming uid-domains if |uid| holds that many trust
// domains and |identity| would be one more: each has device workers, a
// device context each, of its own (a new part of a domain that has one is
// no new domain: workers-per-domain bounds its parts). Without device
// workers domains share halod's devices and cost nothing. A session so
// refused gets no domain (daemon/session.h).
halo_status_t halod_domain_admit(const halod_t *daemon,
                                 const halod_domain_identity_t *identity,
                                 uint32_t uid);

// How many parts each trust domain has: workers-per-domain with device
// workers and trust-domain uid or cgroup, else 1.
uint32_t halod_domain_parts(const halod_t *daemon);

// The domain of |identity| for a session of |process|, created if need be,
// its device workers started (daemon/workers.h); counts a session in it.
// With workers-per-domain above 1 (and device workers), the part that
// |process|'s other sessions use, else the part with the fewest sessions.
halo_status_t halod_domain_acquire(halod_t *daemon,
                                   const halod_domain_identity_t *identity,
                                   const halod_client_process_t *process,
                                   halod_domain_t **out_domain);
// Counts a session out. After the last one the domain ends with its workers,
// unless the caches hold entries of its workers (daemon/cache.h) and it is
// a uid domain (its clients come back): then it stays until they
// are evicted, or until it is more than idle-domains such domains kept
// (halod_domains_end_idle). Other idle domains may end too.
void halod_domain_release(halod_t *daemon, halod_domain_t *domain);
// The same for a session refused after it acquired the domain (its worker
// did not start, its process is over fault-budget, its domain over a
// quota): an idle domain keeps its place among the idle ones, so that
// refused connections do not keep it from being the first to end.
void halod_domain_release_refused(halod_t *daemon, halod_domain_t *domain);
// The domains without sessions (kept for cached entries, or for work their
// sessions left in flight).
uint32_t halod_domains_idle(const halod_t *daemon);
// Ends the domains without sessions that no cached entry keeps (while
// held, at the last release instead). First bounds those kept for cached
// entries to idle-domains (each keeps its workers, on a GPU a context
// each): while more are kept, the one whose last session ended longest ago
// loses its entries, and ends here unless work its sessions left runs.
void halod_domains_end_idle(halod_t *daemon);
// Holds idle domains, so that a caller can keep a domain pointer across
// handlers that may end one (halod_domains_end_idle); the last release
// ends them if any call wanted to.
void halod_domains_hold_idle(halod_t *daemon);
void halod_domains_release_idle(halod_t *daemon);

#endif  // HALOD_TRUST_DOMAIN_H_
