// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/semaphore.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "common/memfd.h"
#include "common/status.h"
#include "daemon/device_call.h"
#include "daemon/fd_budget.h"
#include "daemon/semaphore_orphans.h"
#include "daemon/session.h"
#include "daemon/workers.h"

// Unregisters the page from the devices it reached and drops them.
static void halod_timeline_page_unregister(halod_timeline_page_t *page,
                                           void *mapping) {
  for (uint32_t i = 0; i < page->registered; ++i) {
    halo_hal_allocator_t *allocator = page->devices[i]->allocator;
    allocator->vtable->unregister_host(allocator, mapping);
    halod_device_release(page->devices[i]);
    page->devices[i] = NULL;
  }
  page->registered = 0;
}

// Opens a page for |domain|: its memfd made and mapped read-write (not
// sealed, not registered, not published); |registration| lists the
// domain's devices (held) to register it with.
static halo_status_t halod_timeline_page_open(
    halod_t *daemon, halod_domain_t *domain, bool exclusive,
    uint64_t owner_session, halod_timeline_page_t **out_page,
    halod_host_registration_t *registration) {
  *out_page = NULL;
  memset(registration, 0, sizeof(*registration));
  registration->fd = -1;
  HALO_RETURN_IF_ERROR(
      halod_fd_budget_check_session(daemon, owner_session, "a semaphore page"));
  halod_timeline_page_t *page = calloc(1, sizeof(*page));
  if (!page) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  page->id = halod_next_id(daemon);
  page->exclusive = exclusive;
  page->owner_session = owner_session;
  page->fd = -1;
  void *mapping = NULL;
  halo_status_t status =
      halo_memfd_create("halo-semaphores", HALO_TIMELINE_PAGE_SIZE, &page->fd);
  if (!status) {
    status =
        halod_fd_budget_check_descriptor(daemon, page->fd, "a semaphore page");
  }
  // Map read-write before sealing: F_SEAL_FUTURE_WRITE then forbids any new
  // writable mapping (clients), while ours stays writable.
  if (!status) {
    status = halo_memfd_map(page->fd, HALO_TIMELINE_PAGE_SIZE,
                            PROT_READ | PROT_WRITE, &mapping);
  }
  for (uint32_t i = 0; !status && i < daemon->hal.device_count; ++i) {
    halo_hal_device_t *device = NULL;
    status = halod_domain_device(daemon, domain, i, &device);
    if (status) {
      status = halo_status_annotate(status, "registering it with device %u", i);
      break;
    }
    halod_device_retain(device);
    registration->devices[registration->count++] = device;
  }
  if (status) {
    for (uint32_t i = 0; i < registration->count; ++i) {
      halod_device_release(registration->devices[i]);
    }
    registration->count = 0;
    if (mapping) munmap(mapping, HALO_TIMELINE_PAGE_SIZE);
    if (page->fd >= 0) close(page->fd);
    free(page);
    return halo_status_annotate(status, "creating a semaphore page");
  }
  page->mapping = mapping;
  registration->pointer = mapping;
  registration->size = HALO_TIMELINE_PAGE_SIZE;
  registration->fd = page->fd;
  // Charged from now, while its registration runs off the loop: others the
  // session or its uid open meanwhile see it.
  halod_fd_budget_charge(daemon, owner_session);
  *out_page = page;
  return NULL;
}

// A page opened and never finished goes: what |registration| registered
// is unregistered, its devices dropped, its descriptor given back.
static void halod_timeline_page_abandon(
    halod_t *daemon, halod_timeline_page_t *page,
    halod_host_registration_t *registration) {
  halod_fd_budget_credit(daemon, page->owner_session);
  halod_host_registration_undo(registration, page->mapping);
  munmap(page->mapping, HALO_TIMELINE_PAGE_SIZE);
  close(page->fd);
  free(page);
}

// Registered with every device (|registration| ran: GPU stores of signal
// values land in the page), the page is sealed (docs/architecture.md
// "Shared memory") and published. On error it goes.
static halo_status_t halod_timeline_page_finish(
    halod_t *daemon, halod_timeline_page_t *page,
    halod_host_registration_t *registration) {
  halo_status_t status = registration->status;
  registration->status = NULL;
  if (!status) status = halo_memfd_seal(page->fd, HALO_SEALS_DAEMON_OWNED);
  if (!status) {
    status = halo_u64_map_put(&daemon->shared.pages, page->id, page);
  }
  if (status) {
    halod_timeline_page_abandon(daemon, page, registration);
    return halo_status_annotate(status, "creating a semaphore page");
  }
  for (uint32_t i = 0; i < registration->count; ++i) {
    page->devices[i] = registration->devices[i];  // held
    page->device_addresses[i] = registration->addresses[i];
  }
  page->registered = registration->count;
  registration->count = registration->registered = 0;
  halo_timeline_page_initialize(page->mapping, daemon->incarnation);
  return NULL;
}

static halo_status_t halod_timeline_page_create(
    halod_t *daemon, halod_domain_t *domain, bool exclusive,
    uint64_t owner_session, halod_timeline_page_t **out_page) {
  halod_host_registration_t registration;
  HALO_RETURN_IF_ERROR(halod_timeline_page_open(
      daemon, domain, exclusive, owner_session, out_page, &registration));
  halod_host_registration_run(&registration);
  halo_status_t status =
      halod_timeline_page_finish(daemon, *out_page, &registration);
  if (status) *out_page = NULL;
  return status;
}

static void halod_timeline_page_destroy(halod_t *daemon,
                                        halod_timeline_page_t *page) {
  halo_u64_map_remove(&daemon->shared.pages, page->id);
  halod_fd_budget_credit(daemon, page->owner_session);
  // Every submission that could store into the page has retired (they hold
  // its semaphores); the allocator unregisters off the loop thread.
  halod_timeline_page_unregister(page, page->mapping);
  munmap(page->mapping, HALO_TIMELINE_PAGE_SIZE);
  close(page->fd);
  free(page);
}

void halod_timeline_page_orphan(halod_t *daemon, halod_timeline_page_t *page) {
  page->owner_session = 0;
  if (page->used == 0) halod_timeline_page_destroy(daemon, page);
}

// One of the session's private pages with a free slot (NULL: none).
static halod_timeline_page_t *halod_semaphore_room(
    const halod_session_t *session) {
  for (uint32_t i = 0; i < session->page_count; ++i) {
    if (session->pages[i]->used < HALO_TIMELINE_SLOTS_PER_PAGE) {
      return session->pages[i];
    }
  }
  return NULL;
}

// Makes |page| (new: exclusive for |exportable|, else the session's) hold
// its creator's next semaphores.
static halo_status_t halod_semaphore_adopt_page(halod_t *daemon,
                                                halod_session_t *session,
                                                halod_timeline_page_t *page,
                                                bool exportable) {
  if (exportable) return NULL;
  halo_status_t status = halod_session_add_page(session, page);
  if (status) halod_timeline_page_destroy(daemon, page);
  return status;
}

// Finds a free slot: on a fresh exclusive page, or on one of the session's
// private pages (creating one when all are full).
static halo_status_t halod_semaphore_place(halod_t *daemon,
                                           halod_session_t *session,
                                           bool exportable,
                                           halod_timeline_page_t **out_page) {
  halod_timeline_page_t *page =
      exportable ? NULL : halod_semaphore_room(session);
  if (!page) {
    HALO_RETURN_IF_ERROR(halod_timeline_page_create(
        daemon, session->domain, exportable, session->id, &page));
    HALO_RETURN_IF_ERROR(
        halod_semaphore_adopt_page(daemon, session, page, exportable));
  }
  *out_page = page;
  return NULL;
}

static halo_status_t halod_semaphore_check_value(uint64_t initial_value) {
  if (initial_value > HALO_TIMELINE_MAX_VALUE) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "initial value %llu is >= 2^63",
                            (unsigned long long)initial_value);
  }
  return NULL;
}

// The semaphore on a free slot of |page|.
static halo_status_t halod_semaphore_make(halod_t *daemon,
                                          halod_session_t *session,
                                          halod_timeline_page_t *page,
                                          uint64_t initial_value,
                                          bool exportable,
                                          halod_semaphore_t **out_semaphore) {
  halod_semaphore_t *semaphore = calloc(1, sizeof(*semaphore));
  if (!semaphore) {
    // An exclusive page made for it goes with it.
    if (page->used == 0 && page->exclusive) {
      halod_timeline_page_destroy(daemon, page);
    }
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  semaphore->id = halod_next_id(daemon);
  halo_status_t status =
      halo_u64_map_put(&daemon->shared.semaphores, semaphore->id, semaphore);
  if (status) {
    free(semaphore);
    if (page->used == 0 && page->exclusive) {
      halod_timeline_page_destroy(daemon, page);
    }
    return status;
  }
  uint32_t slot = (uint32_t)__builtin_ctzll(~page->used_mask);
  page->used_mask |= 1ull << slot;
  ++page->used;
  semaphore->page = page;
  semaphore->slot_index = slot;
  semaphore->refcount = 1;
  semaphore->exportable = exportable;
  semaphore->creator_session = session->id;
  semaphore->creator_pid = session->pid;
  semaphore->slot = &semaphore->page->mapping->slots[semaphore->slot_index];
  semaphore->generation =
      halo_timeline_slot_activate(semaphore->slot, initial_value);
  halo_hal_semaphore_initialize(&semaphore->hal, semaphore->slot,
                                initial_value);
  *out_semaphore = semaphore;
  return NULL;
}

halo_status_t halod_semaphore_create(halod_t *daemon, halod_session_t *session,
                                     uint64_t initial_value, bool exportable,
                                     halod_semaphore_t **out_semaphore) {
  *out_semaphore = NULL;
  HALO_RETURN_IF_ERROR(halod_semaphore_check_value(initial_value));
  halod_timeline_page_t *page = NULL;
  HALO_RETURN_IF_ERROR(
      halod_semaphore_place(daemon, session, exportable, &page));
  return halod_semaphore_make(daemon, session, page, initial_value, exportable,
                              out_semaphore);
}

bool halod_semaphore_needs_page(const halod_session_t *session,
                                bool exportable) {
  return exportable || !halod_semaphore_room(session);
}

halo_status_t halod_semaphore_page_open(
    halod_t *daemon, halod_session_t *session, uint64_t initial_value,
    bool exportable, halod_timeline_page_t **out_page,
    halod_host_registration_t *out_registration) {
  *out_page = NULL;
  memset(out_registration, 0, sizeof(*out_registration));
  HALO_RETURN_IF_ERROR(halod_semaphore_check_value(initial_value));
  return halod_timeline_page_open(daemon, session->domain, exportable,
                                  session->id, out_page, out_registration);
}

void halod_semaphore_page_abandon(halod_t *daemon, halod_timeline_page_t *page,
                                  halod_host_registration_t *registration) {
  halod_timeline_page_abandon(daemon, page, registration);
}

halo_status_t halod_semaphore_create_on_page(
    halod_t *daemon, halod_session_t *session, halod_timeline_page_t *page,
    halod_host_registration_t *registration, uint64_t initial_value,
    bool exportable, halod_semaphore_t **out_semaphore) {
  *out_semaphore = NULL;
  HALO_RETURN_IF_ERROR(halod_timeline_page_finish(daemon, page, registration));
  HALO_RETURN_IF_ERROR(
      halod_semaphore_adopt_page(daemon, session, page, exportable));
  return halod_semaphore_make(daemon, session, page, initial_value, exportable,
                              out_semaphore);
}

void halod_semaphore_retain(halod_semaphore_t *semaphore) {
  ++semaphore->refcount;
}

// Fails |semaphore|, an orphan of a release (daemon/semaphore_orphans.h)
// with |members| ("semaphores 5 and 7") in the set of |count|, saying why
// nothing can signal it any more, unless it failed or lost its waits
// meanwhile (another orphan's failure, failing a waiter of both).
static void halod_semaphore_fail_orphan(halod_semaphore_t *semaphore,
                                        uint32_t count, const char *members) {
  uint64_t lowest;
  uint64_t highest;
  uint32_t waiting =
      halo_hal_semaphore_waiting(&semaphore->hal, &lowest, &highest);
  if (waiting == 0 || halod_semaphore_failure(semaphore) != 0) return;
  char values[64];
  if (lowest == highest) {
    snprintf(values, sizeof(values), "value %llu", (unsigned long long)lowest);
  } else {
    snprintf(values, sizeof(values), "values %llu to %llu",
             (unsigned long long)lowest, (unsigned long long)highest);
  }
  uint32_t signalers = semaphore->waiting_signals;
  const char *plural = signalers == 1 ? "" : "s";
  const char *verb = signalers == 1 ? "s" : "";
  char why[512];
  if (signalers == 0) {
    snprintf(why, sizeof(why),
             "no pending submission signals it (an export token does not "
             "keep it)");
  } else if (count == 1) {
    snprintf(why, sizeof(why),
             "its only pending signaler%s wait%s on it (an export token does "
             "not keep it)",
             plural, verb);
  } else {
    snprintf(why, sizeof(why),
             "its only pending signaler%s wait%s on it or on semaphores only "
             "such waiting signalers could advance (%s, none held by a "
             "session; an export token does not keep them)",
             plural, verb, members);
  }
  HALO_LOG_DEBUG(
      "semaphore %llu (created by pid %u): nothing can signal it any more "
      "(%s); failing the %u waits on it",
      (unsigned long long)semaphore->id, semaphore->creator_pid, members,
      waiting);
  halod_semaphore_fail(
      semaphore, HALO_STATUS_ABORTED,
      "semaphore %llu (created by pid %u, value %llu) lost the last holder "
      "or pending signaler that could advance it while %u wait%s of pending "
      "submissions stood for %s: no session holds it and %s; nothing can "
      "signal it any more",
      (unsigned long long)semaphore->id, semaphore->creator_pid,
      (unsigned long long)halod_semaphore_value(semaphore), waiting,
      waiting == 1 ? "" : "s", values, why);
}

// Fails |orphans| (and frees the list).
static void halod_semaphore_fail_orphans(halod_t *daemon,
                                         halod_semaphore_orphans_t *orphans);
static void halod_semaphore_on_orphan_sweep(uv_timer_t *timer);

void halod_semaphore_orphans_later(halod_t *daemon,
                                   const halod_semaphore_t *semaphore) {
  halod_shared_t *shared = &daemon->shared;
  if (!shared->orphan_sweep_open) return;
  if (!semaphore) {
    shared->orphan_sweep_all = true;
  } else if (!shared->orphan_sweep_all) {
    halo_status_t status =
        halo_u64_map_put(&shared->orphan_roots, semaphore->id, (void *)1);
    if (status) {  // out of memory: all of them, then
      halo_status_free(status);
      shared->orphan_sweep_all = true;
    }
  }
  if (shared->orphan_sweep_armed) return;
  shared->orphan_sweep_armed = true;
  uv_timer_start(&shared->orphan_sweep, halod_semaphore_on_orphan_sweep,
                 HALOD_SEMAPHORE_ORPHAN_SWEEP_MS, 0);
}

static void halod_semaphore_on_orphan_sweep(uv_timer_t *timer) {
  halod_t *daemon = timer->data;
  halod_shared_t *shared = &daemon->shared;
  shared->orphan_sweep_armed = false;
  // The roots are taken: releases from now on are roots of the next one.
  halo_u64_map_t roots = shared->orphan_roots;
  bool all = shared->orphan_sweep_all;
  halo_u64_map_initialize(&shared->orphan_roots);
  shared->orphan_sweep_all = false;
  halod_semaphore_orphans_t orphans;
  halo_status_t status = halod_semaphore_orphans_find_from(
      &shared->semaphores, all ? NULL : &roots, &orphans);
  halo_u64_map_deinitialize(&roots);
  if (status) {
    HALO_LOG_ERROR("%s; looking again at all of them in %d ms",
                   halo_status_message(status),
                   HALOD_SEMAPHORE_ORPHAN_SWEEP_MS);
    halo_status_free(status);
    halod_semaphore_orphans_later(daemon, NULL);
    return;
  }
  halod_semaphore_fail_orphans(daemon, &orphans);
}

void halod_semaphores_start(halod_t *daemon) {
  halod_shared_t *shared = &daemon->shared;
  uv_timer_init(daemon->loop, &shared->orphan_sweep);
  shared->orphan_sweep.data = daemon;
  shared->orphan_sweep_open = true;
  halo_u64_map_initialize(&shared->orphan_roots);
}

void halod_semaphores_stop(halod_t *daemon) {
  halod_shared_t *shared = &daemon->shared;
  if (!shared->orphan_sweep_open) return;
  uv_close((uv_handle_t *)&shared->orphan_sweep, NULL);
  halo_u64_map_deinitialize(&shared->orphan_roots);
  shared->orphan_sweep_open = shared->orphan_sweep_armed = false;
  shared->orphan_sweep_all = false;
}

// Fails the semaphores nothing can advance any more once |semaphore| lost
// a reference (daemon/semaphore_orphans.h: what it costs): called after
// every release that leaves it alive.
static void halod_semaphore_check_orphan(halod_t *daemon,
                                         halod_semaphore_t *semaphore) {
  if (daemon->stopping || halod_semaphore_failure(semaphore) != 0) return;
  halod_semaphore_orphans_t orphans;
  halo_status_t status = halod_semaphore_orphans_find(semaphore, &orphans);
  if (status) {
    HALO_LOG_ERROR("semaphore %llu: %s; looking again in %d ms",
                   (unsigned long long)semaphore->id,
                   halo_status_message(status),
                   HALOD_SEMAPHORE_ORPHAN_SWEEP_MS);
    halo_status_free(status);
    halod_semaphore_orphans_later(daemon, semaphore);
    return;
  }
  if (orphans.incomplete) halod_semaphore_orphans_later(daemon, semaphore);
  halod_semaphore_fail_orphans(daemon, &orphans);
}

static void halod_semaphore_fail_orphans(halod_t *daemon,
                                         halod_semaphore_orphans_t *orphans) {
  if (orphans->count == 0) return;
  char members[256];
  halod_semaphore_orphans_describe(orphans, members, sizeof(members));
  // Failing one retires the submissions that wait on it, which release
  // their references and fail what they signal (other orphans among
  // them): these keep every orphan until the failures went round. Called
  // within a retirement (a submission's release of its semaphores), the
  // failures go round only once that returns (hal/deferred_queue.h): each
  // orphan is then failed here with the set's message, not by the one
  // before it.
  for (uint32_t i = 0; i < orphans->count; ++i) {
    halod_semaphore_retain(orphans->semaphores[i]);
  }
  for (uint32_t i = 0; i < orphans->count; ++i) {
    halod_semaphore_fail_orphan(orphans->semaphores[i], orphans->count,
                                members);
  }
  for (uint32_t i = 0; i < orphans->count; ++i) {
    halod_semaphore_release(daemon, orphans->semaphores[i]);
  }
  halod_semaphore_orphans_free(orphans);
}

void halod_semaphore_release(halod_t *daemon, halod_semaphore_t *semaphore) {
  if (--semaphore->refcount > 0) {
    halod_semaphore_check_orphan(daemon, semaphore);
    return;
  }
  halo_hal_semaphore_deinitialize(&semaphore->hal);
  // Destroying a semaphore wakes its waiters: the generation moves on and
  // they return ABORTED. At shutdown the slot keeps the failure halod_stop
  // stored (UNAVAILABLE) so waiters report that instead; nothing reuses it.
  if (!daemon->stopping) halo_timeline_slot_retire(semaphore->slot);
  if (semaphore->exported) halod_export_remove(daemon, semaphore->token);
  halo_u64_map_remove(&daemon->shared.semaphores, semaphore->id);
  halod_timeline_page_t *page = semaphore->page;
  page->used_mask &= ~(1ull << semaphore->slot_index);
  --page->used;
  if (page->used == 0 && (page->exclusive || page->owner_session == 0)) {
    halod_timeline_page_destroy(daemon, page);
  }
  free(semaphore);
}

halod_semaphore_t **halod_semaphores_retain_all(halod_t *daemon,
                                                uint64_t creator_session,
                                                size_t *out_count) {
  halo_u64_map_t *map = &daemon->shared.semaphores;
  halod_semaphore_t **all = calloc(map->count + 1, sizeof(*all));
  size_t count = 0;
  for (size_t i = 0; all && i < map->capacity; ++i) {
    if (!map->entries[i].key) continue;
    halod_semaphore_t *semaphore = map->entries[i].value;
    if (creator_session && semaphore->creator_session != creator_session) {
      continue;
    }
    halod_semaphore_retain(semaphore);
    all[count++] = semaphore;
  }
  *out_count = count;
  return all;
}

void halod_semaphores_release_all(halod_t *daemon, halod_semaphore_t **all,
                                  size_t count) {
  for (size_t i = 0; i < count; ++i) halod_semaphore_release(daemon, all[i]);
  free(all);
}

uint64_t halod_semaphore_device_address(const halod_semaphore_t *semaphore,
                                        const halo_hal_device_t *hal_device,
                                        uint32_t device) {
  const halod_timeline_page_t *page = semaphore->page;
  if (device >= page->registered || page->devices[device] != hal_device ||
      !page->device_addresses[device]) {
    return 0;
  }
  return page->device_addresses[device] +
         offsetof(halo_timeline_page_t, slots) +
         (uint64_t)semaphore->slot_index * sizeof(halo_timeline_slot_t) +
         offsetof(halo_timeline_slot_t, value);
}

uint64_t halod_semaphore_value(const halod_semaphore_t *semaphore) {
  return halo_hal_semaphore_value(&semaphore->hal);
}

int32_t halod_semaphore_failure(const halod_semaphore_t *semaphore) {
  return halo_hal_semaphore_failure(&semaphore->hal);
}

halo_status_t halod_semaphore_signal(halod_semaphore_t *semaphore,
                                     uint64_t value) {
  uint64_t previous;
  HALO_RETURN_IF_ERROR(
      halo_hal_semaphore_reserve_signal(&semaphore->hal, value, &previous));
  halo_hal_semaphore_signal(&semaphore->hal, value);
  return NULL;
}

void halod_semaphore_fail(halod_semaphore_t *semaphore, halo_status_code_t code,
                          const char *format, ...) {
  if (code == HALO_STATUS_OK) code = HALO_STATUS_UNKNOWN;
  va_list args;
  va_start(args, format);
  halo_status_t status = halo_status_makev(code, format, args);
  va_end(args);
  halo_hal_semaphore_fail(&semaphore->hal, status);
}
