// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Semaphores nothing can advance any more (daemon/semaphore.h says what
// can): found after a release, so that the waits on them fail instead of
// waiting, and holding what their submissions hold, for the life of halod.
//
// A semaphore is *free* when every reference to it is a waiting
// submission's (accepted, not issued: its |waiting_references| are its
// |refcount|): no session holds it and so none can signal it from the
// host, no device worker has a grant on it, and no issued work (on a
// device queue, or a host action under way) will signal it. Only its
// waiting signalers could then advance it, once their waits are met. The
// orphans of a release of semaphore S are the greatest set O of free
// semaphores reachable from S such that every waiting signaler of every
// member of O has a wait not yet met on a member of O: nothing outside O
// can advance a member, so none ever moves. With one member and no
// signaler, this is a semaphore only waits hold; with one member and
// signalers, a submission that waits on the semaphore it signals (waits
// for 5, signals 6); with more, cycles (x waits on a and signals b, y
// waits on b and signals a), across sessions too where semaphores are
// exported (a token imports a semaphore only while someone holds it: it
// keeps nothing).
//
// Reachable: from a free semaphore to the signals of the waiting
// submissions linked on it (their waits not met), as long as those are
// free. Only a release can make a set orphaned (a submission's waits only
// ever get met, and only a release turns a reference into nothing or
// leaves only waiting submissions'), and only one that leaves S free with
// waits linked: a set orphaned by S's release holds S, and every member
// of it that has waits is reachable from S (the rest was orphaned before
// and found then). So looking from S after each of its releases finds
// every orphan.
//
// Loop thread only.
#ifndef HALOD_SEMAPHORE_ORPHANS_H_
#define HALOD_SEMAPHORE_ORPHANS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/u64_map.h"
#include "daemon/semaphore.h"
#include "daemon/submission.h"
#include "halo/status.h"

// |submission| was accepted and waits: its references count in its
// semaphores' |waiting_references| and its signals' |waiting_signals|,
// until halod_semaphore_orphans_stop_waiting (issued, or retired).
// Each a no-op when it already did.
void halod_semaphore_orphans_start_waiting(halod_submission_t *submission);
void halod_semaphore_orphans_stop_waiting(halod_submission_t *submission);

// The orphans of a release of |released| (which is alive), in the order
// found, |released| first; none when it is not free or has no waits
// linked. Not retained: the caller retains them before anything changes.
typedef struct halod_semaphore_orphans_t {
  halod_semaphore_t **semaphores;
  uint32_t count;
  // The walk took its budget of steps and stopped, finding none: look
  // again with halod_semaphore_orphans_find_from.
  bool incomplete;
} halod_semaphore_orphans_t;

// The steps one release's walk takes at most: a semaphore, a waiting
// submission and each of its signals, a wait linked on a semaphore of the
// walk, each one (the settling takes at most as many again). Each walk is
// linear in what it reaches, but one client can make every release of a
// long chain reach the rest of it (free semaphores released from the
// chain's end, each then reaching all released before it): quadratic in
// all, on the loop every tenant shares (16,000 such releases took 15 s of
// it on a 2-CPU VM), and a semaphore may have hundreds of thousands of
// waits linked. Past the budget a walk stops, and halod walks again from
// the semaphores whose walks stopped, without a budget, at most once a
// second (halod_semaphore_orphans_find_from). A semaphore that no waiting
// submission signals needs no walk: it is an orphan alone, at once.
#define HALOD_SEMAPHORE_ORPHANS_BUDGET 4096

// Finds them (RESOURCE_EXHAUSTED, and none, if out of memory for the
// walk). It changes nothing: it reads the semaphores' references and
// timepoints and the waiting submissions' waits and signals, and uses
// their |walk_index| (0 again when it returns).
//
// Cost: O(F + W + G), F the free semaphores reachable from |released|,
// W the waits linked on them and G the signals of the waiting submissions
// those waits belong to; with O(F + G) memory for the walk. Nothing
// outside that is looked at, so the usual release, of a semaphore that a
// session still holds or that no submission waits on, costs O(1). Each
// member, each waiting submission and each of their signals is visited a
// bounded number of times (the fixed point counts, per semaphore, the
// signals of waiting signalers still blocked on the set, and per
// submission, its unmet waits on the set; a semaphore leaves the set once,
// a submission unblocks once). F, W and G are bounded by the pending work
// of the sessions whose submissions link those semaphores
// (session-pending, and 8 waits and signals per pending submission).
halo_status_t halod_semaphore_orphans_find(halod_semaphore_t *released,
                                           halod_semaphore_orphans_t *out);

// The orphans of releases of |roots| (semaphore ids; NULL: every semaphore)
// among |semaphores| (semaphore id -> halod_semaphore_t, halod_shared_t's;
// a root no longer there is skipped): the same search from all of them at
// once, without a budget. Cost: O(R + F + W + G), R the roots and F, W, G
// as above over all reached from them.
halo_status_t halod_semaphore_orphans_find_from(
    const halo_u64_map_t *semaphores, const halo_u64_map_t *roots,
    halod_semaphore_orphans_t *out);
void halod_semaphore_orphans_free(halod_semaphore_orphans_t *orphans);

// Writes "semaphore 5", "semaphores 5 and 7", "semaphores 5, 7 and 9" (at
// most 8 ids, then "and N more") into |text|.
void halod_semaphore_orphans_describe(const halod_semaphore_orphans_t *orphans,
                                      char *text, size_t size);

#endif  // HALOD_SEMAPHORE_ORPHANS_H_
