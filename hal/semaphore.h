// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Host timeline semaphores: a slot in a shared page (common/timeline.h)
// plus the timepoints that wait on it in the daemon (deferred executions).
// Driver-independent: the CUDA driver stores values from the GPU into the
// same slot and then reports completion, which signals here.
//
// Device fences (hal/fence.h): when an execution that signals value v is
// handed to a device queue that has fences, the deferred queue records
// "v is reached when fence F fires" here (add_fence). A timepoint with a
// |covered| callback is offered such a fence of a value at or above its
// own, so that device work waiting for it can be released at once and
// wait on the device. The fences are dropped when the value reaches them
// or the semaphore fails: a recorded fence always belongs to work not yet
// retired. At most HALO_HAL_SEMAPHORE_MAX_FENCES are recorded at a time;
// past that a fence is not recorded, and what waits for its value waits
// through the host, as it does when a queue has no fences.
//
// Cost, on the loop every tenant shares: recording a fence of a value above
// every recorded one (signals come in increasing order, so nearly always)
// is O(1), another O(HALO_HAL_SEMAPHORE_MAX_FENCES) at most; the offer
// visits only the timepoints above the highest recorded fence of its
// domain below its value (those at or below it were offered that fence,
// or found it when they were added), each once, plus O(log n) to find the
// first. Before, every fence was offered to every timepoint at or below
// its value and its insert walked the list: a client that kept many
// signals of one semaphore in flight (up to session-pending) made each
// submission cost as many steps as it had in flight, quadratic in all.
//
// Loop thread only.
#ifndef HALO_HAL_SEMAPHORE_H_
#define HALO_HAL_SEMAPHORE_H_

#include <stdbool.h>
#include <stdint.h>

#include "common/list.h"
#include "common/timeline.h"
#include "hal/fence.h"
#include "halo/status.h"

typedef struct halo_hal_timepoint_t halo_hal_timepoint_t;

// Called when the semaphore reaches the timepoint's value (|status| NULL) or
// fails before it (|status| the failure, owned by the callee). The timepoint
// is unlinked before the call.
typedef void (*halo_hal_timepoint_fn)(halo_hal_timepoint_t *timepoint,
                                      halo_status_t status);

// Optional: called when device work that will reach the timepoint's value
// was issued with |fence| (borrowed: retain it to keep it). The timepoint
// stays linked; |callback| still fires when the value is reached or the
// semaphore fails.
typedef void (*halo_hal_timepoint_covered_fn)(halo_hal_timepoint_t *timepoint,
                                              halo_hal_fence_t *fence);

struct halo_hal_timepoint_t {
  halo_list_link_t link;  // internal: in the semaphore's timepoints
  // Internal: the semaphore's search tree of its timepoints (see
  // halo_hal_semaphore_t's |timepoint_root|).
  halo_hal_timepoint_t *parent;
  halo_hal_timepoint_t *left;
  halo_hal_timepoint_t *right;
  uint32_t height;  // of its subtree: 1 for a leaf
  uint64_t value;
  halo_hal_timepoint_fn callback;
  halo_hal_timepoint_covered_fn covered;  // NULL: not interested
  void *user_data;
  bool linked;
};

// At most this many fences recorded on one semaphore (see above).
#define HALO_HAL_SEMAPHORE_MAX_FENCES 1024

// A pending device signal: |value| is reached when |fence| fires.
typedef struct halo_hal_semaphore_fence_t {
  struct halo_hal_semaphore_fence_t *next;
  uint64_t value;
  halo_hal_fence_t *fence;  // a reference
} halo_hal_semaphore_fence_t;

// Internal: an add_fence offer in progress. |next| is the timepoint it
// offers the fence to next; taking a timepoint out of the semaphore moves
// every walk's |next| past it, so a callback may remove any timepoint, and
// a callback's own add_fence on the semaphore runs a walk inside this one.
typedef struct halo_hal_fence_walk_t {
  struct halo_hal_fence_walk_t *outer;  // the walk this one runs inside
  halo_hal_timepoint_t *next;
} halo_hal_fence_walk_t;

typedef struct halo_hal_semaphore_t {
  halo_timeline_slot_t *slot;
  char *failure_message;  // set by the first failure
  // Sorted by value (equal values in the order added), linked both ways,
  // and the same timepoints, in the same order, as a balanced search tree
  // (AVL: heights of sibling subtrees differ by at most 1) keyed by value,
  // where a timepoint goes after every one of equal value. The tree finds
  // where a new timepoint goes in O(log n) whatever order values come in:
  // a walk of the list for it, from either end, lets one client that adds
  // values below (or above) all the others make every add cost as many
  // steps as timepoints are linked, quadratic in all, on the loop every
  // tenant shares. Removing a timepoint (it fired, or its owner took it
  // out) costs O(log n); the list keeps walks in order O(1) per step.
  halo_list_t timepoints;                // of halo_hal_timepoint_t, by link
  halo_hal_timepoint_t *timepoint_root;  // the tree; NULL when empty
  uint32_t timepoint_count;              // linked
  // Sorted by value (equal values in the order added), above the value.
  halo_hal_semaphore_fence_t *fences;
  halo_hal_semaphore_fence_t *fences_tail;  // the highest; NULL when none
  uint32_t fence_count;
  halo_hal_fence_walk_t *fence_walks;  // the innermost walk; NULL when none
  // The highest value reached, by any signal halod made (a client's host
  // signal, an alloca's, a completion's). Those go above every pending
  // signal, so a GPU store of a lower value still in flight (a plain write
  // into the slot) can land after one and put the lower value back; each
  // later signal, the completion of that GPU store's execution included,
  // and a failure restore this one.
  uint64_t reached;
} halo_hal_semaphore_t;

void halo_hal_semaphore_initialize(halo_hal_semaphore_t *semaphore,
                                   halo_timeline_slot_t *slot,
                                   uint64_t initial_value);
// Fails the pending timepoints with ABORTED (the semaphore is going away).
void halo_hal_semaphore_deinitialize(halo_hal_semaphore_t *semaphore);

uint64_t halo_hal_semaphore_value(const halo_hal_semaphore_t *semaphore);
// The highest value an accepted submission will signal (>= the value): the
// slot's |pending|, which device workers taking ring records raise too.
uint64_t halo_hal_semaphore_pending(const halo_hal_semaphore_t *semaphore);
// 0 while healthy.
int32_t halo_hal_semaphore_failure(const halo_hal_semaphore_t *semaphore);

// INVALID_ARGUMENT unless |value| < 2^63 and above the current value and
// every pending signal; FAILED_PRECONDITION if the semaphore failed.
halo_status_t halo_hal_semaphore_check_signal(
    const halo_hal_semaphore_t *semaphore, uint64_t value);

// check_signal, then reserves |value| (raises the slot's pending) in the
// same compare-and-swap that checks it against what device workers
// reserved meanwhile; |out_previous| gets the pending value it replaced
// (for halo_hal_semaphore_unreserve if the submission is refused later).
halo_status_t halo_hal_semaphore_reserve_signal(halo_hal_semaphore_t *semaphore,
                                                uint64_t value,
                                                uint64_t *out_previous);
// Undoes a reserve_signal of |value| (see halo_timeline_slot_unreserve).
void halo_hal_semaphore_unreserve(halo_hal_semaphore_t *semaphore,
                                  uint64_t value, uint64_t previous);

// Advances to |value| (checked by the caller), wakes every waiter in every
// process and fires the timepoints it reaches. A value the device stored
// into the slot already (a GPU signal) is accepted the same way: the epoch
// still moves and sleepers still wake.
void halo_hal_semaphore_signal(halo_hal_semaphore_t *semaphore, uint64_t value);
// The same for a value whose store already woke the slot's sleepers (a
// device worker's completion path bumps the epoch once it sees its stores
// land): a value the slot holds already moves no epoch and wakes nobody, so
// that clients asleep for later values are not woken for nothing (under 64
// tenants that was a wake-up per report); one it does not hold yet is
// signaled as halo_hal_semaphore_signal does.
void halo_hal_semaphore_signal_woken(halo_hal_semaphore_t *semaphore,
                                     uint64_t value);

// Sets the sticky failure (first one wins; later ones are ignored), wakes
// waiters and fails every timepoint not yet reached. Takes |status|.
void halo_hal_semaphore_fail(halo_hal_semaphore_t *semaphore,
                             halo_status_t status);

// The failure as a new status (NULL if healthy).
halo_status_t halo_hal_semaphore_failure_status(
    const halo_hal_semaphore_t *semaphore);

// Registers |timepoint| (its value, callback and user_data set). Fires at
// once if already reached or failed. O(log n) in the timepoints linked.
void halo_hal_semaphore_add_timepoint(halo_hal_semaphore_t *semaphore,
                                      halo_hal_timepoint_t *timepoint);
// Unlinks a timepoint that has not fired: O(log n).
void halo_hal_semaphore_remove_timepoint(halo_hal_semaphore_t *semaphore,
                                         halo_hal_timepoint_t *timepoint);

// The timepoints linked now (none has fired: each lies above the value)
// and, when there are any, the lowest and highest value they wait for.
// O(1).
uint32_t halo_hal_semaphore_waiting(const halo_hal_semaphore_t *semaphore,
                                    uint64_t *out_lowest,
                                    uint64_t *out_highest);

// The timepoints linked now, in the order of their values: the first
// (|previous| NULL) or the one after |previous| (linked on |semaphore|);
// NULL past the last. O(1).
halo_hal_timepoint_t *halo_hal_semaphore_next_timepoint(
    const halo_hal_semaphore_t *semaphore,
    const halo_hal_timepoint_t *previous);

// Records that |value| is reached when |fence| fires (retained until the
// value is reached or the semaphore fails) and offers it to the linked
// timepoints at or below |value| that have a |covered| callback and were
// not offered a recorded fence of its domain at or above their value
// already (the callback takes the first fence of its domain it is
// offered). The callbacks may issue work (which may add fences and fire or
// remove timepoints of this semaphore): the walk goes on past what they
// removed; one they add is offered only if it lands ahead of the walk (one
// that wants fences asks halo_hal_semaphore_find_fence when it is added).
// Ignored if the semaphore failed or reached |value| already, or
// HALO_HAL_SEMAPHORE_MAX_FENCES are recorded.
void halo_hal_semaphore_add_fence(halo_hal_semaphore_t *semaphore,
                                  uint64_t value, halo_hal_fence_t *fence);

// The fence of |domain| that reaches |value| soonest (the lowest recorded
// value at or above it), borrowed; NULL if none.
halo_hal_fence_t *halo_hal_semaphore_find_fence(
    const halo_hal_semaphore_t *semaphore, uint64_t value, const void *domain);

#endif  // HALO_HAL_SEMAPHORE_H_
