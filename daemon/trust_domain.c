// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/trust_domain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/cache.h"
#include "daemon/cgroup.h"
#include "daemon/ring_worker.h"
#include "daemon/session.h"
#include "daemon/workers.h"
#include "hal/remote/remote_device.h"

// The uid the kernel reports for a peer whose uid halod's user namespace
// does not map (/proc/sys/kernel/overflowuid), or UINT32_MAX where halod
// runs in the initial user namespace (every uid is mapped). Read once.
static uint32_t halod_unmapped_uid(void) {
  static bool known;
  static uint32_t unmapped = UINT32_MAX;
  if (known) return unmapped;
  known = true;
  unsigned inside = 0, outside = 0, count = 0;
  FILE *map = fopen("/proc/self/uid_map", "r");
  bool initial = map &&
                 fscanf(map, "%u %u %u", &inside, &outside, &count) == 3 &&
                 inside == 0 && outside == 0 && count == UINT32_MAX;
  if (map) fclose(map);
  if (initial) return unmapped;
  unmapped = 65534;
  FILE *overflow = fopen("/proc/sys/kernel/overflowuid", "r");
  if (overflow) {
    unsigned value;
    if (fscanf(overflow, "%u", &value) == 1) unmapped = value;
    fclose(overflow);
  }
  return unmapped;
}

halo_status_t halod_domain_identify(const halod_t *daemon,
                                    const halod_client_process_t *process,
                                    halod_domain_identity_t *out_identity) {
  memset(out_identity, 0, sizeof(*out_identity));
  uint32_t uid = process->uid;
  uint32_t pid = process->pid;
  if (pid == 0) {
    return halo_status_make(
        HALO_STATUS_PERMISSION_DENIED,
        "halod cannot see the client's process (its peer pid is 0: the "
        "client runs in a pid namespace outside halod's); run halod in the "
        "host's pid namespace (Kubernetes: hostPID: true)");
  }
  if (uid == halod_unmapped_uid()) {
    return halo_status_make(
        HALO_STATUS_PERMISSION_DENIED,
        "the client's uid is not mapped into halod's user namespace (halod "
        "sees the overflow uid %u); run halod in the host's user namespace, "
        "or map the client's uid into halod's",
        uid);
  }
  const char *mode = daemon->config.trust_domain;
  if (strcmp(mode, "process") == 0) {
    if (process->start == 0) {
      return halo_status_make(
          HALO_STATUS_PERMISSION_DENIED,
          "trust-domain process: halod cannot read when the client's process "
          "(pid %u) started (/proc/%u/stat), so it cannot tell it from a "
          "later process with the same pid",
          pid, pid);
    }
    // The pid and the start time: a later process with the pid has a key
    // of its own (probing, halod_domain_find, only on a hash collision).
    halo_hasher_t hasher;
    halo_hasher_initialize(&hasher);
    halo_hasher_update_u64(&hasher, pid);
    halo_hasher_update_u64(&hasher, process->start);
    halo_hash_t hash;
    halo_hasher_finalize(&hasher, &hash);
    uint64_t hashed = halo_hash_key(&hash) & ((1ull << 48) - 1);
    out_identity->key = 1ull << 62 | hashed;
    out_identity->process_start = process->start;
    out_identity->process_uid = uid;
    snprintf(out_identity->name, sizeof(out_identity->name), "pid:%u", pid);
    return NULL;
  }
  if (strcmp(mode, "cgroup") == 0) {
    char path[HALOD_DOMAIN_NAME_BYTES - 32];
    halo_status_t status = halod_cgroup_of_process(
        pid, daemon->config.trust_domain_cgroup_trim, path, sizeof(path));
    if (status) {
      halo_status_t refusal = halo_status_make(
          HALO_STATUS_PERMISSION_DENIED,
          "trust-domain cgroup: halod cannot tell the client's trust "
          "domain: %s",
          halo_status_message(status));
      halo_status_free(status);
      return refusal;
    }
    snprintf(out_identity->name, sizeof(out_identity->name), "uid:%u,cgroup:%s",
             uid, path);
    // One domain per (uid, cgroup): a cgroup never joins users that the
    // default keeps apart.
    halo_hasher_t hasher;
    halo_hasher_initialize(&hasher);
    halo_hasher_update_u64(&hasher, uid);
    halo_hasher_update_bytes(&hasher, path, strlen(path));
    halo_hash_t hash;
    halo_hasher_finalize(&hasher, &hash);
    out_identity->key = halo_hash_key(&hash) | 1ull << 63;
    return NULL;
  }
  out_identity->key = (uint64_t)uid + 1;
  snprintf(out_identity->name, sizeof(out_identity->name), "uid:%u", uid);
  return NULL;
}

// Whether |domain| is |identity|'s (named |name|): the name, and for a
// process domain the process (its start time and uid), not only the pid.
static bool halod_domain_is(const halod_domain_t *domain,
                            const halod_domain_identity_t *identity,
                            const char *name) {
  return strcmp(domain->name, name) == 0 &&
         domain->process_start == identity->process_start &&
         (identity->process_start == 0 || domain->uid == identity->process_uid);
}

// Part |part| of |identity|'s domain named |name|: its entry, or NULL with
// *out_key the key to give it. Part 0 keeps the identity's key; another
// cgroup whose hash's key is taken (BLAKE2b: not in practice), a part's key
// that another domain's took, or a process domain's key still held by the
// domain of an earlier process with the same pid, moves on to a free key.
static halod_domain_t *halod_domain_find(
    halod_t *daemon, const halod_domain_identity_t *identity, uint32_t part,
    const char *name, uint64_t *out_key) {
  uint64_t key = identity->key ^ (uint64_t)part << 48;
  halod_domain_t *domain = halo_u64_map_get(&daemon->sessions.domains, key);
  while (domain && !halod_domain_is(domain, identity, name)) {
    key = (key + 1) | 1ull << 63;
    domain = halo_u64_map_get(&daemon->sessions.domains, key);
  }
  *out_key = key;
  return domain;
}

// The name of part |part| of |identity|'s domain (owned by the caller).
static char *halod_domain_part_name(const halod_t *daemon,
                                    const halod_domain_identity_t *identity,
                                    uint32_t part) {
  size_t length = strlen(identity->name) + 16;
  char *name = malloc(length);
  if (!name) return NULL;
  if (halod_domain_parts(daemon) > 1) {
    snprintf(name, length, "%s#%u", identity->name, part);
  } else {
    snprintf(name, length, "%s", identity->name);
  }
  return name;
}

uint32_t halod_domain_parts(const halod_t *daemon) {
  // A process's sessions share a part: a process domain has one.
  if (!halod_workers_enabled(daemon) ||
      strcmp(daemon->config.trust_domain, "process") == 0) {
    return 1;
  }
  return daemon->config.workers_per_domain;
}

// Which part of |identity|'s domain a session of |process| joins: the part
// its process's other sessions use, else the one with the fewest sessions.
// Returns that part's entry, or NULL with *out_name (owned by the caller)
// and *out_key for a new one; *out_part either way.
static halo_status_t halod_domain_choose_part(
    halod_t *daemon, const halod_domain_identity_t *identity,
    const halod_client_process_t *process, halod_domain_t **out_domain,
    uint32_t *out_part, char **out_name, uint64_t *out_key) {
  *out_domain = NULL;
  *out_part = 0;
  *out_name = NULL;
  uint32_t parts = halod_domain_parts(daemon);
  if (parts > 1) {
    // The process's sessions share a part: what one allocates another can
    // bind. (Connecting is rare: a walk over the sessions is fine.)
    size_t length = strlen(identity->name);
    for (size_t i = 0; i < daemon->sessions.by_id.capacity; ++i) {
      if (!daemon->sessions.by_id.entries[i].key) continue;
      const halod_session_t *session = daemon->sessions.by_id.entries[i].value;
      halod_domain_t *domain = session->domain;
      if (domain && domain->base_key == identity->key &&
          strncmp(domain->name, identity->name, length) == 0 &&
          domain->name[length] == '#' && session->process.pid == process->pid &&
          session->process.start == process->start) {
        *out_domain = domain;
        *out_part = domain->part;
        return NULL;
      }
    }
  }
  uint32_t best_sessions = UINT32_MAX;
  for (uint32_t part = 0; part < parts; ++part) {
    char *name = halod_domain_part_name(daemon, identity, part);
    if (!name) {
      free(*out_name);
      *out_name = NULL;
      *out_domain = NULL;
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    }
    uint64_t key;
    halod_domain_t *domain =
        halod_domain_find(daemon, identity, part, name, &key);
    uint32_t sessions = domain ? domain->sessions : 0;
    if (sessions >= best_sessions) {
      free(name);
      continue;
    }
    best_sessions = sessions;
    free(*out_name);
    *out_domain = domain;
    *out_part = part;
    *out_key = key;
    *out_name = name;
  }
  if (*out_domain) {
    free(*out_name);
    *out_name = NULL;
  }
  return NULL;
}

halo_status_t halod_domain_admit(const halod_t *daemon,
                                 const halod_domain_identity_t *identity,
                                 uint32_t uid) {
  if (!halod_workers_enabled(daemon)) return NULL;
  // The uid's domains' keys, each once (a domain counts once whatever its
  // parts): one walk over the domains, then over the uid's few keys (fewer
  // than uid-domains, but after a reload that lowered it).
  const halo_u64_map_t *domains = &daemon->sessions.domains;
  uint64_t *keys = NULL;
  uint32_t held = 0;
  uint32_t capacity = 0;
  for (size_t i = 0; i < domains->capacity; ++i) {
    if (!domains->entries[i].key) continue;
    const halod_domain_t *domain = domains->entries[i].value;
    if (domain->uid != uid) continue;
    if (domain->base_key == identity->key) {  // it has a part
      free(keys);
      return NULL;
    }
    bool counted = false;
    for (uint32_t k = 0; k < held && !counted; ++k) {
      counted = keys[k] == domain->base_key;
    }
    if (counted) continue;
    if (held == capacity) {
      capacity = capacity ? capacity * 2 : 16;
      uint64_t *more = realloc(keys, capacity * sizeof(*keys));
      if (!more) {
        free(keys);
        return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                                "oom counting uid %u's trust domains", uid);
      }
      keys = more;
    }
    keys[held++] = domain->base_key;
  }
  free(keys);
  if (held < daemon->config.uid_domains) return NULL;
  return halo_status_make(
      HALO_STATUS_RESOURCE_EXHAUSTED,
      "uid %u holds %u trust domains, the limit uid-domains, and trust "
      "domain %s would be one more: each has device workers of its own (on "
      "a GPU a context each, about 560 MiB of its memory); end the sessions "
      "of another of its domains first",
      uid, held, identity->name);
}

halo_status_t halod_domain_acquire(halod_t *daemon,
                                   const halod_domain_identity_t *identity,
                                   const halod_client_process_t *process,
                                   halod_domain_t **out_domain) {
  *out_domain = NULL;
  halod_domain_t *domain = NULL;
  uint32_t part = 0;
  char *name = NULL;
  uint64_t key = 0;
  HALO_RETURN_IF_ERROR(halod_domain_choose_part(daemon, identity, process,
                                                &domain, &part, &name, &key));
  if (!domain) {
    domain = calloc(1, sizeof(*domain));
    if (!domain) {
      free(name);
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    }
    domain->key = key;
    domain->base_key = identity->key;
    domain->part = part;
    domain->uid = process->uid;
    domain->process_start = identity->process_start;
    domain->name = name;
    halo_status_t status =
        halo_u64_map_put(&daemon->sessions.domains, key, domain);
    if (status) {
      free(domain->name);
      free(domain);
      return status;
    }
  }
  // A new domain, or one whose worker was lost: its devices start now, so
  // that its semaphore pages and arenas are registered with them.
  // Counted first: handling a lost worker ends idle domains, not this one.
  ++domain->sessions;
  halo_status_t status = halod_domain_start_devices(daemon, domain);
  if (status) {
    halod_domain_release_refused(daemon, domain);
    return status;
  }
  *out_domain = domain;
  return NULL;
}

// Ends |domain|: its workers go, and the cached entries of them.
static void halod_domain_free(halod_t *daemon, halod_domain_t *domain) {
  halo_hal_device_t *devices[HALO_HAL_MAX_DEVICES];
  for (uint32_t i = 0; i < HALO_HAL_MAX_DEVICES; ++i) {
    devices[i] = domain->workers[i].device;
  }
  halod_domain_stop_devices(daemon, domain);
  if (domain->past_idle_bound) ++daemon->stats.idle_domains_ended;
  halo_u64_map_remove(&daemon->sessions.domains, domain->key);
  free(domain->name);
  free(domain);
  // Compared, never used: the entries hold their own references.
  if (!halod_workers_enabled(daemon)) return;  // the devices are shared
  for (uint32_t i = 0; i < HALO_HAL_MAX_DEVICES; ++i) {
    if (devices[i]) halod_cache_drop_device(daemon, devices[i]);
  }
}

// Whether the worker |device| still runs work: executions halod issued to
// it, or ring executions it took itself (their grants).
static bool halod_worker_runs_work(const halod_t *daemon,
                                   halo_hal_device_t *device) {
  if (halod_ring_workers_hold(daemon, device)) return true;
  // O(1): asked at each retirement of an ended session's work (a walk of
  // the worker's executions each time was quadratic on the loop).
  return halo_hal_remote_device_in_flight(device) > 0;
}

// Whether |domain|, without sessions, stays: while its workers run work its
// sessions left in flight (an execution runs on after its client ended),
// so that the worker is still listed (haloctl workers) and ends with the
// domain once that work is done (halod_domains_end_idle, asked again as it
// retires), in every trust-domain mode; and under trust-domain uid for the
// cached entries of its workers (daemon/cache.h): a uid comes back. A
// process does not, and a cgroup names a pod (its id is in the path), which
// a restart replaces: an idle domain of either would keep a context on
// every device for nothing.
static bool halod_domain_stays_idle(const halod_t *daemon,
                                    const halod_domain_t *domain) {
  if (daemon->stopping || !halod_workers_enabled(daemon)) return false;
  bool uid = strcmp(daemon->config.trust_domain, "uid") == 0;
  for (uint32_t i = 0; i < HALO_HAL_MAX_DEVICES; ++i) {
    halo_hal_device_t *device = domain->workers[i].device;
    if (!device) continue;
    // Entries the worker still holds for a ring's executions reach the
    // caches once it releases them (then this is asked again).
    if (halod_worker_runs_work(daemon, device) ||
        (uid && halod_cache_holds_device(daemon, device))) {
      return true;
    }
  }
  return false;
}

// Counts a session out; |served|: it was (else it was refused, and the
// domain keeps its place among the idle ones).
static void halod_domain_count_out(halod_t *daemon, halod_domain_t *domain,
                                   bool served) {
  if (served || !domain->idle_since) {
    domain->idle_since = ++daemon->sessions.idle_endings;
  }
  if (served) domain->past_idle_bound = false;  // in use again since
  if (--domain->sessions > 0) return;
  if (!halod_domain_stays_idle(daemon, domain)) {
    halod_domain_free(daemon, domain);
    return;
  }
  halod_domains_end_idle(daemon);  // idle-domains
}

void halod_domain_release(halod_t *daemon, halod_domain_t *domain) {
  halod_domain_count_out(daemon, domain, true);
}

void halod_domain_release_refused(halod_t *daemon, halod_domain_t *domain) {
  halod_domain_count_out(daemon, domain, false);
}

// Whether the caches hold an entry of a worker of |domain|.
static bool halod_domain_cached(const halod_t *daemon,
                                const halod_domain_t *domain) {
  for (uint32_t i = 0; i < HALO_HAL_MAX_DEVICES; ++i) {
    const halo_hal_device_t *device = domain->workers[i].device;
    if (device && halod_cache_holds_device(daemon, device)) return true;
  }
  return false;
}

// The domain without sessions, kept for cached entries, whose last session
// ended longest ago, if more than idle-domains such are kept; else NULL.
static halod_domain_t *halod_domain_idle_past_bound(const halod_t *daemon) {
  const halo_u64_map_t *domains = &daemon->sessions.domains;
  // Asked at each retirement of an ended session's work: no walk while
  // the domains, idle or not, are no more than the bound.
  if (domains->count <= daemon->config.idle_domains) return NULL;
  halod_domain_t *oldest = NULL;
  uint32_t kept = 0;
  for (size_t i = 0; i < domains->capacity; ++i) {
    if (!domains->entries[i].key) continue;
    halod_domain_t *domain = domains->entries[i].value;
    if (domain->sessions > 0 || !halod_domain_cached(daemon, domain)) continue;
    ++kept;
    if (!oldest || domain->idle_since < oldest->idle_since) oldest = domain;
  }
  return kept > daemon->config.idle_domains ? oldest : NULL;
}

// Drops the cached entries of the domains idle longest while more than
// idle-domains are kept for theirs: each then ends (halod_domains_end_idle)
// once no work of its sessions runs. Called held (a drop may end domains
// from within, |oldest| among them).
static void halod_domains_drop_past_bound(halod_t *daemon) {
  halod_domain_t *oldest;
  while ((oldest = halod_domain_idle_past_bound(daemon))) {
    HALO_LOG_DEBUG(
        "trust domain %s: idle, past idle-domains %u kept; its "
        "cached entries are dropped and it ends",
        oldest->name, daemon->config.idle_domains);
    oldest->past_idle_bound = true;
    for (uint32_t i = 0; i < HALO_HAL_MAX_DEVICES; ++i) {
      if (oldest->workers[i].device) {
        halod_cache_drop_device(daemon, oldest->workers[i].device);
      }
    }
  }
}

uint32_t halod_domains_idle(const halod_t *daemon) {
  const halo_u64_map_t *domains = &daemon->sessions.domains;
  uint32_t idle = 0;
  for (size_t i = 0; i < domains->capacity; ++i) {
    if (!domains->entries[i].key) continue;
    const halod_domain_t *domain = domains->entries[i].value;
    if (domain->sessions == 0) ++idle;
  }
  return idle;
}

void halod_domains_hold_idle(halod_t *daemon) {
  ++daemon->sessions.end_idle_held;
}

void halod_domains_release_idle(halod_t *daemon) {
  if (--daemon->sessions.end_idle_held > 0) return;
  if (!daemon->sessions.end_idle_wanted) return;
  daemon->sessions.end_idle_wanted = false;
  halod_domains_end_idle(daemon);
}

void halod_domains_end_idle(halod_t *daemon) {
  if (daemon->sessions.end_idle_held) {
    daemon->sessions.end_idle_wanted = true;
    return;
  }
  // Asked wherever a domain may have lost its last session or entries, or
  // (its work retiring, a ring's grants released) gained entries after it.
  ++daemon->sessions.end_idle_held;
  halod_domains_drop_past_bound(daemon);
  --daemon->sessions.end_idle_held;
  daemon->sessions.end_idle_wanted = false;  // done below
  bool ended = true;
  while (ended) {
    ended = false;
    halo_u64_map_t *domains = &daemon->sessions.domains;
    for (size_t i = 0; i < domains->capacity && !ended; ++i) {
      if (!domains->entries[i].key) continue;
      halod_domain_t *domain = domains->entries[i].value;
      if (domain->sessions > 0 || halod_domain_stays_idle(daemon, domain)) {
        continue;
      }
      halod_domain_free(daemon, domain);
      ended = true;  // the map changed: look again
    }
  }
}
