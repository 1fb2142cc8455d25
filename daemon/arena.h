// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Host-visible arenas: memfds sealed against shrinking and growing, mapped by
// the daemon and by the client, registered with every device, and
// sub-allocated into buffers (vm.max_map_count is 65530: one mapping per
// buffer does not scale). Each session has its own shared arenas; an
// exportable buffer gets an exclusive arena (mapping an arena exposes every
// buffer on it).
//
// Loop thread only.
#ifndef HALOD_ARENA_H_
#define HALOD_ARENA_H_

#include <stdbool.h>
#include <stdint.h>

#include "daemon/daemon.h"
#include "daemon/free_ranges.h"

#define HALOD_ARENA_ALIGNMENT 256

typedef struct halod_arena_t {
  uint64_t id;
  int fd;
  void *mapping;
  uint64_t size;
  bool exclusive;
  uint64_t owner_session;  // 0 once the session ended
  uint32_t live;           // buffers placed on it
  // Where each device reaches the mapping (registered host memory), and
  // the devices it is registered with (the owner's trust domain's; held).
  uint64_t device_addresses[HALO_HAL_MAX_DEVICES];
  halo_hal_device_t *devices[HALO_HAL_MAX_DEVICES];
  uint32_t registered;
  // Coalesced, in a tree by offset (daemon/free_ranges.h); offsets and
  // sizes are multiples of HALOD_ARENA_ALIGNMENT.
  halod_free_ranges_t free_ranges;
} halod_arena_t;

// Registered with every device of |domain| (its sessions' devices).
halo_status_t halod_arena_create(halod_t *daemon, halod_domain_t *domain,
                                 uint64_t size, bool exclusive,
                                 uint64_t owner_session,
                                 halod_arena_t **out_arena);
// The same in steps, so that the registration (a control call to each of
// the domain's workers) runs off the loop (daemon/device_call.h):
// halod_arena_open makes the arena (a sealed memfd, mapped) and lists the
// devices in |registration| (held); once halod_host_registration_run ran,
// halod_arena_finish publishes it (on error it goes), or
// halod_arena_abandon drops it (what was registered is unregistered). Its
// descriptor counts against its session's session-fds and uid-fds from
// halod_arena_open on (daemon/fd_budget.h).
struct halod_host_registration_t;
halo_status_t halod_arena_open(halod_t *daemon, halod_domain_t *domain,
                               uint64_t size, bool exclusive,
                               uint64_t owner_session,
                               halod_arena_t **out_arena,
                               struct halod_host_registration_t *registration);
halo_status_t halod_arena_finish(
    halod_t *daemon, halod_arena_t *arena,
    struct halod_host_registration_t *registration);
void halod_arena_abandon(halod_t *daemon, halod_arena_t *arena,
                         struct halod_host_registration_t *registration);
void halod_arena_destroy(halod_t *daemon, halod_arena_t *arena);

// First fit: |size| rounded up to HALOD_ARENA_ALIGNMENT, from the start of
// the free range of the lowest offset that holds it, O(log n) for n free
// ranges; |*out_placed| false if none does. RESOURCE_EXHAUSTED, nothing
// placed, only without memory for the node the buffer's free may need
// (halod_arena_free never fails); never while nothing is placed on it, so
// a fresh arena's first buffer need not check.
halo_status_t halod_arena_allocate(halod_arena_t *arena, uint64_t size,
                                   bool *out_placed, uint64_t *out_offset);
// The first buffer of a fresh arena, created to hold |size|: at offset 0,
// and it cannot fail (nothing was placed on it). Returns the offset.
uint64_t halod_arena_place_first(halod_arena_t *arena, uint64_t size);
// Whether halod_arena_allocate would place |size| (the memory aside): O(1).
bool halod_arena_fits(const halod_arena_t *arena, uint64_t size);
// Returns the range (as allocated), coalesced with the free ranges on
// either side, O(log n); destroys the arena when it is empty and exclusive
// or orphaned.
void halod_arena_free(halod_t *daemon, halod_arena_t *arena, uint64_t offset,
                      uint64_t size);

// The session that owned a shared arena ended.
void halod_arena_orphan(halod_t *daemon, halod_arena_t *arena);

#endif  // HALOD_ARENA_H_
