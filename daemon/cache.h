// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The caches' memory of released entries: an executable whose last holder
// released it, and a prepared REUSABLE recording whose last command buffer
// went, stay loaded in a least-recently-used list bounded by
// executable-cache-entries and memo-cache-entries, so that the next client
// of the trust domain that loads the same code or records the same commands
// finds them (a process that loads, runs and exits leaves them for the
// next). Past the bound the least recently used entry is destroyed. An
// entry found again leaves the list; one released again goes to its front.
//
// The recordings' list is bounded in bytes too (memo-cache-bytes: a
// recording costs halod and its worker up to some 20 MiB each, charged to no
// session once released): past either bound the least recently used go,
// and a recording larger than the bytes' bound is not kept at all.
// Executables count 0 bytes in their list (its bound is a count); their
// images are bounded apart, with those that only kept recordings hold
// (executable-cache-bytes: a recording kept holds its executables loaded,
// and 256 of them held 990 MB where the list's bytes showed 0.5 MB).
//
// Entries belong to a device of a trust domain (a domain's worker, or with
// device-workers=inline the shared device): a worker that is lost takes its
// entries with it (a fresh worker has none of its state), and a domain
// whose last session ended stays, with its workers, while the lists hold
// entries of it (trust-domain uid only: a process domain never comes back).
//
// Loop thread only.
#ifndef HALOD_CACHE_H_
#define HALOD_CACHE_H_

#include <stdbool.h>
#include <stdint.h>

#include "common/list.h"
#include "hal/device.h"

typedef struct halod_t halod_t;
typedef struct halod_cache_lru_t halod_cache_lru_t;

// Embedded in each cached entry.
typedef struct halod_cache_link_t {
  // prev: towards the most recently used; next: towards the least.
  halo_list_link_t link;
  halo_hal_device_t *device;  // the entry's device (not held)
  // What the entry costs while listed, against its list's bytes' bound
  // (memo-cache-bytes); 0 for executables. Set before it is listed.
  uint64_t bytes;
  bool listed;  // in an LRU list now
} halod_cache_link_t;

// Destroys the entry around |link| (unlinked already).
typedef void (*halod_cache_destroy_fn)(halod_t *daemon,
                                       halod_cache_link_t *link);

struct halod_cache_lru_t {
  // Of halod_cache_link_t, by link. Head: the most recently used; tail:
  // the least recently used, evicted first.
  halo_list_t list;
  uint32_t count;
  uint64_t bytes;      // the listed entries' bytes
  uint64_t evictions;  // destroyed past the bounds
  halod_cache_destroy_fn destroy;
};

void halod_cache_lru_initialize(halod_cache_lru_t *lru,
                                halod_cache_destroy_fn destroy);

// Whether an entry of |device| released now is worth keeping: |bound| is
// not 0 and |device| is still the worker of a trust domain (or the shared
// device, inline).
bool halod_cache_keeps(const halod_t *daemon, halo_hal_device_t *device,
                       uint32_t bound);

// Puts |link| at the front and destroys the least recently used entries
// until at most |bound| entries of at most |byte_bound| bytes are left
// (|link| itself fits: the caller checked link->bytes <= |byte_bound|);
// domains left idle without entries then end.
void halod_cache_lru_add(halod_t *daemon, halod_cache_lru_t *lru,
                         halod_cache_link_t *link, uint32_t bound,
                         uint64_t byte_bound);

// Destroys the least recently used entries of both lists past their
// bounds (a reload lowered them: memo-cache-entries, memo-cache-bytes,
// executable-cache-entries, executable-cache-bytes); domains left idle
// without entries then end.
void halod_cache_trim(halod_t *daemon);

// While the executables no session holds (daemon->cache.
// unheld_executable_bytes: those listed, and those only listed recordings
// hold) pass executable-cache-bytes, destroys the least recently used
// listed executable, else the least recently used listed recording (its
// executables then go to their list, or go); domains left idle without
// entries then end. A call while one runs, or while held, returns at once
// (the one running goes on until the bytes fit; the last release runs it).
void halod_cache_bound_executable_bytes(halod_t *daemon);
// Holds that bound, so that a caller walking a list, or keeping a pointer
// to a listed entry, sees no entry evicted for bytes meanwhile; the last
// release applies it.
void halod_cache_hold_bound(halod_t *daemon);
void halod_cache_release_bound(halod_t *daemon);

// Takes |link| out of the list (its entry is used again).
void halod_cache_lru_take(halod_cache_lru_t *lru, halod_cache_link_t *link);

// Whether either list holds an entry of |device|.
bool halod_cache_holds_device(const halod_t *daemon,
                              const halo_hal_device_t *device);

// Destroys every listed entry of |device| (its worker is lost or its domain
// ends; NULL: every entry), recordings first (they hold executables).
void halod_cache_drop_device(halod_t *daemon, const halo_hal_device_t *device);

// Destroys every listed entry (halod_stop).
void halod_cache_clear(halod_t *daemon);

#endif  // HALOD_CACHE_H_
