// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Timeline semaphores in the daemon: daemon-owned pages (sealed memfds that
// clients can map read-only only) holding the slots of common/timeline.h,
// and the semaphore objects that own the slots.
//
// A session's private semaphores share its private pages; an exportable
// semaphore gets a page of its own (mapping a page exposes every slot on it).
// Loop thread only.
#ifndef HALOD_SEMAPHORE_H_
#define HALOD_SEMAPHORE_H_

#include <stdbool.h>
#include <stdint.h>

#include "common/timeline.h"
#include "daemon/daemon.h"
#include "hal/semaphore.h"

typedef struct halod_timeline_page_t {
  uint64_t id;
  int fd;
  halo_timeline_page_t *mapping;  // read-write, the daemon's own
  uint64_t used_mask;             // bit i: slot i in use
  uint32_t used;
  bool exclusive;          // one exportable semaphore
  uint64_t owner_session;  // private pages: the session; 0 once it ended
  // The page on each device (allocator register_host), so that the device
  // can store signal values into its slots (CUDA: cuStreamWriteValue64).
  uint64_t device_addresses[HALO_HAL_MAX_DEVICES];
  // The devices it is registered with: its creator's trust domain's (held).
  halo_hal_device_t *devices[HALO_HAL_MAX_DEVICES];
  uint32_t registered;
} halod_timeline_page_t;

// What can advance a semaphore (signal or fail it): a session's handle to
// it (its creator's or an importer's), a pending submission that signals
// it and can still run, or an execution a device worker took from a ring
// (its grant). Each holds references: a handle one, a submission one per
// wait and per signal it names, a grant one, a walk
// (halod_semaphores_retain_all) one for its duration. A submission waiting
// (accepted, not yet issued) counts its references in
// |waiting_references| (its signals also in |waiting_signals|); every
// timepoint linked on the semaphore (hal/semaphore.h) is a wait of a
// pending submission not met yet, which holds a reference for it.
//
// A semaphore all of whose references are waiting submissions' can only be
// advanced by those that signal it, once their own waits are met. After
// every release that leaves such a semaphore with waits linked, halod
// looks for the semaphores nothing can advance any more
// (daemon/semaphore_orphans.h): those that no session (nor grant, nor
// issued work) holds and whose pending signalers all wait, unmet, on one
// of them: on the semaphore itself (a submission that waits for 5 and
// signals 6), or around a cycle (x waits on a and signals b, y waits on b
// and signals a). Each is failed at once with ABORTED, naming it, the
// values waited for and why, which fails those submissions and what they
// would signal, instead of letting them wait forever. A token of an
// exported semaphore does not count: it imports the semaphore while
// someone holds it, and goes with it once the waits are failed. Ring
// executions a worker took never wait (it takes only those whose waits
// are reached), so no wait hides behind a grant.
typedef struct halod_semaphore_t {
  // Handles in sessions, submissions' waits and signals, workers' grants.
  uint32_t refcount;
  uint64_t id;
  halod_timeline_page_t *page;
  uint32_t slot_index;
  uint32_t generation;
  halo_timeline_slot_t *slot;
  uint64_t creator_session;  // 0 once the creator released or ended
  uint32_t creator_pid;
  bool exportable;
  bool exported;
  uint8_t token[16];
  // Of |refcount|: the references of submissions waiting (accepted, not
  // issued), and how many of those are signals.
  uint32_t waiting_references;
  uint32_t waiting_signals;
  // Its place in a walk of daemon/semaphore_orphans.c plus 1; 0 outside.
  uint32_t walk_index;
  // Value checks, failure message and the timepoints of deferred work.
  halo_hal_semaphore_t hal;
} halod_semaphore_t;

halo_status_t halod_semaphore_create(halod_t *daemon, halod_session_t *session,
                                     uint64_t initial_value, bool exportable,
                                     halod_semaphore_t **out_semaphore);

// A semaphore that needs a new page (halod_semaphore_needs_page: an
// exportable one gets its own, else every page of the session is full) is
// made in steps, so that the page's registration with the domain's
// devices (a control call to each worker) runs off the loop
// (daemon/device_call.h): halod_semaphore_page_open makes the page (a
// memfd, mapped; |registration| lists the devices, held), which is neither
// sealed nor anyone's yet; once halod_host_registration_run ran,
// halod_semaphore_create_on_page seals it, makes it the session's (or the
// semaphore's own) and creates the semaphore on it, and
// halod_semaphore_page_abandon drops it instead (its session ended; what
// was registered is unregistered). The page goes on every error.
struct halod_host_registration_t;
bool halod_semaphore_needs_page(const halod_session_t *session,
                                bool exportable);
halo_status_t halod_semaphore_page_open(
    halod_t *daemon, halod_session_t *session, uint64_t initial_value,
    bool exportable, halod_timeline_page_t **out_page,
    struct halod_host_registration_t *out_registration);
halo_status_t halod_semaphore_create_on_page(
    halod_t *daemon, halod_session_t *session, halod_timeline_page_t *page,
    struct halod_host_registration_t *registration, uint64_t initial_value,
    bool exportable, halod_semaphore_t **out_semaphore);
void halod_semaphore_page_abandon(
    halod_t *daemon, halod_timeline_page_t *page,
    struct halod_host_registration_t *registration);
void halod_semaphore_retain(halod_semaphore_t *semaphore);
// Drops a reference; the last one destroys the semaphore. One that leaves
// only waits nothing can meet fails it, and the semaphores nothing can
// advance with it (see halod_semaphore_t).
void halod_semaphore_release(halod_t *daemon, halod_semaphore_t *semaphore);

// How long after a release's search for semaphores nothing can advance
// stopped at its budget halod searches again from where it stopped
// (daemon/semaphore_orphans.h).
#define HALOD_SEMAPHORE_ORPHAN_SWEEP_MS 1000

// Loop thread: the timer of that search, from halod's start to its stop.
void halod_semaphores_start(halod_t *daemon);
void halod_semaphores_stop(halod_t *daemon);

// Loop thread: searches again from |semaphore| (NULL: from every
// semaphore) within HALOD_SEMAPHORE_ORPHAN_SWEEP_MS, without a budget: its
// release's walk stopped at its budget, or failed for want of memory.
void halod_semaphore_orphans_later(halod_t *daemon,
                                   const halod_semaphore_t *semaphore);

// Every semaphore (only those |creator_session| created, unless it is 0),
// each retained, in an array of |*out_count| (NULL, 0 when out of memory):
// failing one may retire work that releases others, which moves the
// semaphore map's entries, so a loop that fails semaphores walks this
// instead. halod_semaphores_release_all releases them and frees it.
halod_semaphore_t **halod_semaphores_retain_all(halod_t *daemon,
                                                uint64_t creator_session,
                                                size_t *out_count);
void halod_semaphores_release_all(halod_t *daemon, halod_semaphore_t **all,
                                  size_t count);

// The device address of the semaphore's 64-bit value on |hal_device|,
// device |device| of some trust domain (0 if the page is not registered
// there: a semaphore of another domain is signaled by the host).
uint64_t halod_semaphore_device_address(const halod_semaphore_t *semaphore,
                                        const halo_hal_device_t *hal_device,
                                        uint32_t device);

uint64_t halod_semaphore_value(const halod_semaphore_t *semaphore);
int32_t halod_semaphore_failure(const halod_semaphore_t *semaphore);

// INVALID_ARGUMENT unless |value| < 2^63 is above the current value and
// every pending signal; FAILED_PRECONDITION if the semaphore failed.
halo_status_t halod_semaphore_signal(halod_semaphore_t *semaphore,
                                     uint64_t value);

// First failure wins; later calls are ignored. |code| must not be OK.
void halod_semaphore_fail(halod_semaphore_t *semaphore, halo_status_code_t code,
                          const char *format, ...)
    __attribute__((format(printf, 3, 4)));

// A session's private page ended with it: pages with live slots stay until
// their semaphores go.
void halod_timeline_page_orphan(halod_t *daemon, halod_timeline_page_t *page);

#endif  // HALOD_SEMAPHORE_H_
