// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/arena.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "common/memfd.h"
#include "common/status.h"
#include "daemon/device_call.h"
#include "daemon/fd_budget.h"
#include "daemon/workers.h"

static uint64_t halod_align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

// Unregisters the mapping from the devices it reached and drops them.
static void halod_arena_unregister(halod_arena_t *arena) {
  for (uint32_t i = 0; i < arena->registered; ++i) {
    halo_hal_allocator_t *allocator = arena->devices[i]->allocator;
    allocator->vtable->unregister_host(allocator, arena->mapping);
    halod_device_release(arena->devices[i]);
    arena->devices[i] = NULL;
  }
  arena->registered = 0;
}

// An arena opened and never finished goes (not charged).
static void halod_arena_discard(halod_arena_t *arena,
                                halod_host_registration_t *registration) {
  halod_host_registration_undo(registration, arena->mapping);
  if (arena->mapping) munmap(arena->mapping, arena->size);
  if (arena->fd >= 0) close(arena->fd);
  halod_free_ranges_deinitialize(&arena->free_ranges);
  free(arena);
}

halo_status_t halod_arena_open(halod_t *daemon, halod_domain_t *domain,
                               uint64_t size, bool exclusive,
                               uint64_t owner_session,
                               halod_arena_t **out_arena,
                               halod_host_registration_t *registration) {
  *out_arena = NULL;
  memset(registration, 0, sizeof(*registration));
  registration->fd = -1;
  size = halod_align_up(size, 4096);
  HALO_RETURN_IF_ERROR(
      halod_fd_budget_check_session(daemon, owner_session, "a host arena"));
  halod_arena_t *arena = calloc(1, sizeof(*arena));
  if (!arena) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  arena->id = halod_next_id(daemon);
  arena->size = size;
  arena->exclusive = exclusive;
  arena->owner_session = owner_session;
  arena->fd = -1;
  halo_status_t status = halo_memfd_create("halo-arena", size, &arena->fd);
  if (!status) {
    status =
        halod_fd_budget_check_descriptor(daemon, arena->fd, "a host arena");
  }
  // Sealed before the daemon maps it, and checked: nobody can truncate the
  // memory under the daemon's mapping (SIGBUS).
  if (!status) status = halo_memfd_seal(arena->fd, HALO_SEALS_FIXED_SIZE);
  if (!status)
    status = halo_memfd_check_seals(arena->fd, HALO_SEALS_FIXED_SIZE);
  if (!status) {
    status = halo_memfd_map(arena->fd, size, PROT_READ | PROT_WRITE,
                            &arena->mapping);
  }
  for (uint32_t i = 0; !status && i < daemon->hal.device_count; ++i) {
    halo_hal_device_t *device = NULL;
    status = halod_domain_device(daemon, domain, i, &device);
    if (status) break;
    halod_device_retain(device);
    registration->devices[registration->count++] = device;
  }
  if (!status) status = halod_free_ranges_initialize(&arena->free_ranges, size);
  if (status) {
    registration->registered = 0;
    halod_arena_discard(arena, registration);
    return halo_status_annotate(status, "creating a host arena of %llu bytes",
                                (unsigned long long)size);
  }
  registration->pointer = arena->mapping;
  registration->size = size;
  registration->fd = arena->fd;
  // Charged from now, while its registration runs off the loop: others the
  // session or its uid open meanwhile see it.
  halod_fd_budget_charge(daemon, owner_session);
  *out_arena = arena;
  return NULL;
}

void halod_arena_abandon(halod_t *daemon, halod_arena_t *arena,
                         halod_host_registration_t *registration) {
  halod_fd_budget_credit(daemon, arena->owner_session);
  halod_arena_discard(arena, registration);
}

halo_status_t halod_arena_finish(halod_t *daemon, halod_arena_t *arena,
                                 halod_host_registration_t *registration) {
  uint64_t size = arena->size;
  halo_status_t status = registration->status;
  registration->status = NULL;
  if (!status) {
    status = halo_u64_map_put(&daemon->shared.arenas, arena->id, arena);
  }
  if (status) {
    halod_arena_abandon(daemon, arena, registration);
    return halo_status_annotate(status, "creating a host arena of %llu bytes",
                                (unsigned long long)size);
  }
  for (uint32_t i = 0; i < registration->count; ++i) {
    arena->devices[i] = registration->devices[i];  // held
    arena->device_addresses[i] = registration->addresses[i];
  }
  arena->registered = registration->count;
  registration->count = registration->registered = 0;
  return NULL;
}

halo_status_t halod_arena_create(halod_t *daemon, halod_domain_t *domain,
                                 uint64_t size, bool exclusive,
                                 uint64_t owner_session,
                                 halod_arena_t **out_arena) {
  halod_host_registration_t registration;
  HALO_RETURN_IF_ERROR(halod_arena_open(daemon, domain, size, exclusive,
                                        owner_session, out_arena,
                                        &registration));
  halod_host_registration_run(&registration);
  halo_status_t status = halod_arena_finish(daemon, *out_arena, &registration);
  if (status) *out_arena = NULL;
  return status;
}

void halod_arena_destroy(halod_t *daemon, halod_arena_t *arena) {
  halo_u64_map_remove(&daemon->shared.arenas, arena->id);
  halod_fd_budget_credit(daemon, arena->owner_session);
  halod_arena_unregister(arena);
  munmap(arena->mapping, arena->size);
  close(arena->fd);
  halod_free_ranges_deinitialize(&arena->free_ranges);
  free(arena);
}

halo_status_t halod_arena_allocate(halod_arena_t *arena, uint64_t size,
                                   bool *out_placed, uint64_t *out_offset) {
  size = halod_align_up(size, HALOD_ARENA_ALIGNMENT);
  halo_status_t status =
      halod_free_ranges_take(&arena->free_ranges, size, out_placed, out_offset);
  if (status) {
    return halo_status_annotate(status, "placing %llu bytes on arena %llu",
                                (unsigned long long)size,
                                (unsigned long long)arena->id);
  }
  if (*out_placed) ++arena->live;
  return NULL;
}

uint64_t halod_arena_place_first(halod_arena_t *arena, uint64_t size) {
  bool placed = false;
  uint64_t offset = 0;
  halo_status_t status = halod_arena_allocate(arena, size, &placed, &offset);
  if (status || !placed) {  // one free range, the whole arena: never
    HALO_LOG_ERROR("arena %llu: its first %llu bytes not placed: %s",
                   (unsigned long long)arena->id, (unsigned long long)size,
                   status ? halo_status_message(status) : "no room");
    abort();
  }
  return offset;
}

bool halod_arena_fits(const halod_arena_t *arena, uint64_t size) {
  return halod_free_ranges_fits(&arena->free_ranges,
                                halod_align_up(size, HALOD_ARENA_ALIGNMENT));
}

void halod_arena_free(halod_t *daemon, halod_arena_t *arena, uint64_t offset,
                      uint64_t size) {
  --arena->live;
  if (arena->live == 0 && (arena->exclusive || arena->owner_session == 0)) {
    halod_arena_destroy(daemon, arena);
    return;
  }
  halod_free_ranges_give(&arena->free_ranges, offset,
                         halod_align_up(size, HALOD_ARENA_ALIGNMENT));
}

void halod_arena_orphan(halod_t *daemon, halod_arena_t *arena) {
  arena->owner_session = 0;
  if (arena->live == 0) halod_arena_destroy(daemon, arena);
}
