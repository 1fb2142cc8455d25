// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/cache.h"

#include <stddef.h>

#include "daemon/command_buffer.h"
#include "daemon/daemon.h"
#include "daemon/executable.h"
#include "daemon/trust_domain.h"
#include "daemon/workers.h"

void halod_cache_lru_initialize(halod_cache_lru_t *lru,
                                halod_cache_destroy_fn destroy) {
  halo_list_initialize(&lru->list);
  lru->count = 0;
  lru->bytes = 0;
  lru->evictions = 0;
  lru->destroy = destroy;
}

bool halod_cache_keeps(const halod_t *daemon, halo_hal_device_t *device,
                       uint32_t bound) {
  if (bound == 0 || daemon->stopping || !device) return false;
  if (!halod_workers_enabled(daemon)) return true;  // the shared device
  const halo_u64_map_t *domains = &daemon->sessions.domains;
  for (size_t i = 0; i < domains->capacity; ++i) {
    if (!domains->entries[i].key) continue;
    const halod_domain_t *domain = domains->entries[i].value;
    for (uint32_t d = 0; d < HALO_HAL_MAX_DEVICES; ++d) {
      if (domain->workers[d].device == device) return true;
    }
  }
  return false;
}

// The entry link of the list link |link| (NULL: none).
static halod_cache_link_t *halod_cache_link_of(halo_list_link_t *link) {
  return HALO_LIST_ENTRY(link, halod_cache_link_t, link);
}

void halod_cache_lru_take(halod_cache_lru_t *lru, halod_cache_link_t *link) {
  if (!link->listed) return;
  halo_list_remove(&lru->list, &link->link);
  link->listed = false;
  --lru->count;
  lru->bytes -= link->bytes;
}

// Destroys |victim|, listed in |lru|, as an eviction.
static void halod_cache_lru_evict_one(halod_t *daemon, halod_cache_lru_t *lru,
                                      halod_cache_link_t *victim) {
  halod_cache_lru_take(lru, victim);
  ++lru->evictions;
  lru->destroy(daemon, victim);
}

// Destroys the least recently used entries of |lru| past |bound| entries or
// |byte_bound| bytes; whether it destroyed any.
static bool halod_cache_lru_evict(halod_t *daemon, halod_cache_lru_t *lru,
                                  uint32_t bound, uint64_t byte_bound) {
  bool evicted = false;
  while ((lru->count > bound || lru->bytes > byte_bound) && lru->list.tail) {
    halod_cache_lru_evict_one(daemon, lru, halod_cache_link_of(lru->list.tail));
    evicted = true;
  }
  return evicted;
}

void halod_cache_lru_add(halod_t *daemon, halod_cache_lru_t *lru,
                         halod_cache_link_t *link, uint32_t bound,
                         uint64_t byte_bound) {
  halo_list_push_front(&lru->list, &link->link);
  link->listed = true;
  ++lru->count;
  lru->bytes += link->bytes;
  if (halod_cache_lru_evict(daemon, lru, bound, byte_bound)) {
    halod_domains_end_idle(daemon);
  }
}

void halod_cache_trim(halod_t *daemon) {
  // Recordings first: they hold executables.
  bool evicted = halod_cache_lru_evict(daemon, &daemon->cache.memo_lru,
                                       daemon->config.memo_cache_entries,
                                       daemon->config.memo_cache_bytes);
  evicted |= halod_cache_lru_evict(daemon, &daemon->cache.executable_lru,
                                   daemon->config.executable_cache_entries,
                                   UINT64_MAX);
  if (evicted) halod_domains_end_idle(daemon);
  halod_cache_bound_executable_bytes(daemon);
}

void halod_cache_hold_bound(halod_t *daemon) {
  ++daemon->cache.bound_held;
}

void halod_cache_release_bound(halod_t *daemon) {
  if (--daemon->cache.bound_held == 0) {
    halod_cache_bound_executable_bytes(daemon);
  }
}

void halod_cache_bound_executable_bytes(halod_t *daemon) {
  halod_cache_t *cache = &daemon->cache;
  if (cache->bound_held) return;
  ++cache->bound_held;
  bool evicted = false;
  while (cache->unheld_executable_bytes >
         daemon->config.executable_cache_bytes) {
    // Executables nothing holds first; then the least recently used
    // recording holding an executable no session holds, which releases its
    // executables (into their list, where the next turns find them).
    halod_cache_lru_t *lru = &cache->executable_lru;
    halod_cache_link_t *victim = halod_cache_link_of(lru->list.tail);
    if (!victim) {
      lru = &cache->memo_lru;
      for (victim = halod_cache_link_of(lru->list.tail); victim;
           victim = halod_cache_link_of(victim->link.prev)) {
        if (halod_memo_entry_holds_unheld(victim)) break;
      }
    }
    if (!victim) break;
    halod_cache_lru_evict_one(daemon, lru, victim);
    evicted = true;
  }
  --cache->bound_held;
  if (evicted) halod_domains_end_idle(daemon);
}

static bool halod_cache_lru_holds(const halod_cache_lru_t *lru,
                                  const halo_hal_device_t *device) {
  for (const halo_list_link_t *link = lru->list.head; link; link = link->next) {
    if (HALO_LIST_ENTRY(link, halod_cache_link_t, link)->device == device) {
      return true;
    }
  }
  return false;
}

bool halod_cache_holds_device(const halod_t *daemon,
                              const halo_hal_device_t *device) {
  return halod_cache_lru_holds(&daemon->cache.memo_lru, device) ||
         halod_cache_lru_holds(&daemon->cache.executable_lru, device);
}

// Destroys the entries of |lru| of |device| (NULL: every entry).
static void halod_cache_lru_drop(halod_t *daemon, halod_cache_lru_t *lru,
                                 const halo_hal_device_t *device) {
  halod_cache_link_t *link = halod_cache_link_of(lru->list.head);
  while (link) {
    halod_cache_link_t *next = halod_cache_link_of(link->link.next);
    if (!device || link->device == device) {
      halod_cache_lru_take(lru, link);
      // A recording releases its executables: they may join the executable
      // list, after |next| (which stays valid: only the front grows, and
      // no bound evicts meanwhile: halod_cache_drop_device).
      lru->destroy(daemon, link);
    }
    link = next;
  }
}

// Destroys the entries of |device| (NULL: every entry), recordings first
// (they hold executables). The bytes' bound and idle domains' ends wait
// until both walks are done: run within one, they could destroy the entry
// the walk goes to next.
void halod_cache_drop_device(halod_t *daemon, const halo_hal_device_t *device) {
  // Nor does a domain end (its entries dropped) or idle-domains drop any.
  halod_domains_hold_idle(daemon);
  halod_cache_hold_bound(daemon);
  halod_cache_lru_drop(daemon, &daemon->cache.memo_lru, device);
  halod_cache_lru_drop(daemon, &daemon->cache.executable_lru, device);
  halod_cache_release_bound(daemon);
  halod_domains_release_idle(daemon);
}

void halod_cache_clear(halod_t *daemon) {
  halod_cache_drop_device(daemon, NULL);
}

void halod_cache_initialize(halod_cache_t *cache) {
  halo_u64_map_initialize(&cache->executables);
  halo_u64_map_initialize(&cache->memo);
  halo_u64_map_initialize(&cache->preparing);
  cache->loads = NULL;
  cache->memo_hits = cache->memo_misses = 0;
  cache->unheld_executable_bytes = 0;
  cache->bound_held = 0;
  halod_cache_lru_initialize(&cache->executable_lru, halod_executable_evict);
  halod_cache_lru_initialize(&cache->memo_lru, halod_memo_entry_evict);
}

void halod_cache_deinitialize(halod_cache_t *cache) {
  halo_u64_map_deinitialize(&cache->executables);
  halo_u64_map_deinitialize(&cache->memo);
  halo_u64_map_deinitialize(&cache->preparing);
}
