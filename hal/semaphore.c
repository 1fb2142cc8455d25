// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "hal/semaphore.h"

#include <stdlib.h>
#include <string.h>

#include "common/list.h"
#include "common/status.h"

void halo_hal_semaphore_initialize(halo_hal_semaphore_t *semaphore,
                                   halo_timeline_slot_t *slot,
                                   uint64_t initial_value) {
  memset(semaphore, 0, sizeof(*semaphore));
  semaphore->slot = slot;
  semaphore->reached = initial_value;
  atomic_store_explicit(&slot->pending, initial_value, memory_order_release);
}

// Drops the recorded fences at or below |value| (UINT64_MAX: all).
static void halo_hal_semaphore_drop_fences(halo_hal_semaphore_t *semaphore,
                                           uint64_t value) {
  while (semaphore->fences && semaphore->fences->value <= value) {
    halo_hal_semaphore_fence_t *entry = semaphore->fences;
    semaphore->fences = entry->next;
    --semaphore->fence_count;
    halo_hal_fence_release(entry->fence);
    free(entry);
  }
  if (!semaphore->fences) semaphore->fences_tail = NULL;
}

// The timepoint of |link| (NULL: none).
static halo_hal_timepoint_t *halo_hal_timepoint_of(halo_list_link_t *link) {
  return HALO_LIST_ENTRY(link, halo_hal_timepoint_t, link);
}

// The timepoints' search tree (halo_hal_semaphore_t): an AVL tree whose
// nodes are the timepoints themselves, so nothing is allocated. Its order
// is the list's: a new timepoint goes after every one of equal value in
// both, and rotations and removals keep the order of the rest.

static uint32_t halo_hal_tree_height(const halo_hal_timepoint_t *node) {
  return node ? node->height : 0;
}

static void halo_hal_tree_update(halo_hal_timepoint_t *node) {
  uint32_t left = halo_hal_tree_height(node->left);
  uint32_t right = halo_hal_tree_height(node->right);
  node->height = 1 + (left > right ? left : right);
}

// Puts |child| (may be NULL) where |old| hangs from |parent| (NULL: the
// root).
static void halo_hal_tree_replace(halo_hal_semaphore_t *semaphore,
                                  halo_hal_timepoint_t *parent,
                                  halo_hal_timepoint_t *old,
                                  halo_hal_timepoint_t *child) {
  if (!parent) {
    semaphore->timepoint_root = child;
  } else if (parent->left == old) {
    parent->left = child;
  } else {
    parent->right = child;
  }
  if (child) child->parent = parent;
}

// Rotates |node|'s right child up into its place; returns that child.
static halo_hal_timepoint_t *halo_hal_tree_rotate_left(
    halo_hal_semaphore_t *semaphore, halo_hal_timepoint_t *node) {
  halo_hal_timepoint_t *up = node->right;
  node->right = up->left;
  if (up->left) up->left->parent = node;
  halo_hal_tree_replace(semaphore, node->parent, node, up);
  up->left = node;
  node->parent = up;
  halo_hal_tree_update(node);
  halo_hal_tree_update(up);
  return up;
}

// Rotates |node|'s left child up into its place; returns that child.
static halo_hal_timepoint_t *halo_hal_tree_rotate_right(
    halo_hal_semaphore_t *semaphore, halo_hal_timepoint_t *node) {
  halo_hal_timepoint_t *up = node->left;
  node->left = up->right;
  if (up->right) up->right->parent = node;
  halo_hal_tree_replace(semaphore, node->parent, node, up);
  up->right = node;
  node->parent = up;
  halo_hal_tree_update(node);
  halo_hal_tree_update(up);
  return up;
}

// Restores the heights and the balance from |node| (NULL: nothing) up,
// after a node was attached below it or taken from below it: as far as
// subtree heights change, O(log n) at most.
static void halo_hal_tree_rebalance(halo_hal_semaphore_t *semaphore,
                                    halo_hal_timepoint_t *node) {
  while (node) {
    uint32_t height = node->height;
    uint32_t left = halo_hal_tree_height(node->left);
    uint32_t right = halo_hal_tree_height(node->right);
    if (left > right + 1) {
      if (halo_hal_tree_height(node->left->left) <
          halo_hal_tree_height(node->left->right)) {
        halo_hal_tree_rotate_left(semaphore, node->left);
      }
      node = halo_hal_tree_rotate_right(semaphore, node);
    } else if (right > left + 1) {
      if (halo_hal_tree_height(node->right->right) <
          halo_hal_tree_height(node->right->left)) {
        halo_hal_tree_rotate_right(semaphore, node->right);
      }
      node = halo_hal_tree_rotate_left(semaphore, node);
    } else {
      halo_hal_tree_update(node);
    }
    // Balanced here, and the same height as before: nothing above changes.
    if (node->height == height) return;
    node = node->parent;
  }
}

// Links |timepoint| (in neither) into the tree and the list, after every
// timepoint of a value at or below its own.
static void halo_hal_semaphore_link(halo_hal_semaphore_t *semaphore,
                                    halo_hal_timepoint_t *timepoint) {
  halo_hal_timepoint_t *parent = NULL;
  halo_hal_timepoint_t *before = NULL;  // the last at or below its value
  halo_hal_timepoint_t **place = &semaphore->timepoint_root;
  while (*place) {
    parent = *place;
    if (timepoint->value < parent->value) {
      place = &parent->left;
    } else {
      before = parent;
      place = &parent->right;
    }
  }
  timepoint->parent = parent;
  timepoint->left = timepoint->right = NULL;
  timepoint->height = 1;
  *place = timepoint;
  halo_list_insert_after(&semaphore->timepoints, before ? &before->link : NULL,
                         &timepoint->link);
  timepoint->linked = true;
  ++semaphore->timepoint_count;
  halo_hal_tree_rebalance(semaphore, parent);
}

// Takes |timepoint| (linked) out of the tree and the list.
static void halo_hal_semaphore_unlink(halo_hal_semaphore_t *semaphore,
                                      halo_hal_timepoint_t *timepoint) {
  halo_hal_timepoint_t *parent = timepoint->parent;
  halo_hal_timepoint_t *rebalance_from;
  if (timepoint->left && timepoint->right) {
    // Its successor (the leftmost of its right subtree, which has no left
    // child) takes its place: the order of the rest stays.
    halo_hal_timepoint_t *successor = timepoint->right;
    while (successor->left) successor = successor->left;
    if (successor->parent == timepoint) {
      rebalance_from = successor;
    } else {
      rebalance_from = successor->parent;
      halo_hal_tree_replace(semaphore, successor->parent, successor,
                            successor->right);
      successor->right = timepoint->right;
      successor->right->parent = successor;
    }
    successor->left = timepoint->left;
    successor->left->parent = successor;
    successor->height = timepoint->height;
    halo_hal_tree_replace(semaphore, parent, timepoint, successor);
  } else {
    halo_hal_tree_replace(semaphore, parent, timepoint,
                          timepoint->left ? timepoint->left : timepoint->right);
    rebalance_from = parent;
  }
  halo_hal_tree_rebalance(semaphore, rebalance_from);
  timepoint->parent = timepoint->left = timepoint->right = NULL;
  timepoint->height = 0;
  // The add_fence walks under way go on past it.
  for (halo_hal_fence_walk_t *walk = semaphore->fence_walks; walk;
       walk = walk->outer) {
    if (walk->next == timepoint) {
      walk->next = halo_hal_timepoint_of(timepoint->link.next);
    }
  }
  halo_list_remove(&semaphore->timepoints, &timepoint->link);
  timepoint->linked = false;
  --semaphore->timepoint_count;
}

// The first timepoint (in the list's order) of a value above |value|.
static halo_hal_timepoint_t *halo_hal_semaphore_first_above(
    const halo_hal_semaphore_t *semaphore, uint64_t value) {
  halo_hal_timepoint_t *found = NULL;
  halo_hal_timepoint_t *node = semaphore->timepoint_root;
  while (node) {
    if (node->value > value) {
      found = node;
      node = node->left;
    } else {
      node = node->right;
    }
  }
  return found;
}

// Keeps the slot's host_waits word in step with the timepoints list (after
// every change of it; callbacks may have added some).
static void halo_hal_semaphore_update_host_waits(
    halo_hal_semaphore_t *semaphore) {
  halo_timeline_slot_set_host_waits(semaphore->slot,
                                    !halo_list_empty(&semaphore->timepoints));
}

void halo_hal_semaphore_deinitialize(halo_hal_semaphore_t *semaphore) {
  halo_hal_semaphore_drop_fences(semaphore, UINT64_MAX);
  if (!halo_list_empty(&semaphore->timepoints)) {
    halo_hal_semaphore_fail(
        semaphore,
        halo_status_make(HALO_STATUS_ABORTED, "the semaphore was destroyed"));
  }
  free(semaphore->failure_message);
  semaphore->failure_message = NULL;
}

uint64_t halo_hal_semaphore_value(const halo_hal_semaphore_t *semaphore) {
  return atomic_load_explicit(&semaphore->slot->value, memory_order_acquire);
}

uint64_t halo_hal_semaphore_pending(const halo_hal_semaphore_t *semaphore) {
  return atomic_load_explicit(&semaphore->slot->pending, memory_order_acquire);
}

int32_t halo_hal_semaphore_failure(const halo_hal_semaphore_t *semaphore) {
  return atomic_load_explicit(&semaphore->slot->failure, memory_order_acquire);
}

halo_status_t halo_hal_semaphore_failure_status(
    const halo_hal_semaphore_t *semaphore) {
  int32_t failure = halo_hal_semaphore_failure(semaphore);
  if (failure == 0) return NULL;
  return halo_status_make((halo_status_code_t)failure, "%s",
                          semaphore->failure_message
                              ? semaphore->failure_message
                              : halo_status_code_name(failure));
}

// A signal value at or below what a pending submission will signal.
static halo_status_t halo_hal_semaphore_pending_refusal(uint64_t value,
                                                        uint64_t pending) {
  return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                          "signal value %llu is not greater than %llu, "
                          "which a pending submission will signal (values "
                          "only increase)",
                          (unsigned long long)value,
                          (unsigned long long)pending);
}

halo_status_t halo_hal_semaphore_check_signal(
    const halo_hal_semaphore_t *semaphore, uint64_t value) {
  if (halo_hal_semaphore_failure(semaphore) != 0) {
    halo_status_t failure = halo_hal_semaphore_failure_status(semaphore);
    halo_status_t status = halo_status_make(
        HALO_STATUS_FAILED_PRECONDITION,
        "the semaphore has failed (%s: %s); it cannot be signaled",
        halo_status_code_name(halo_status_code(failure)),
        halo_status_message(failure));
    halo_status_free(failure);
    return status;
  }
  if (value > HALO_TIMELINE_MAX_VALUE) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "signal value %llu is >= 2^63",
                            (unsigned long long)value);
  }
  uint64_t current = halo_hal_semaphore_value(semaphore);
  if (value <= current) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "signal value %llu is not greater than the "
                            "current value %llu (values only increase)",
                            (unsigned long long)value,
                            (unsigned long long)current);
  }
  uint64_t pending = halo_hal_semaphore_pending(semaphore);
  if (value <= pending) {
    return halo_hal_semaphore_pending_refusal(value, pending);
  }
  return NULL;
}

halo_status_t halo_hal_semaphore_reserve_signal(halo_hal_semaphore_t *semaphore,
                                                uint64_t value,
                                                uint64_t *out_previous) {
  *out_previous = halo_hal_semaphore_pending(semaphore);
  HALO_RETURN_IF_ERROR(halo_hal_semaphore_check_signal(semaphore, value));
  uint64_t pending = *out_previous;
  for (;;) {
    if (pending >= value) {
      return halo_hal_semaphore_pending_refusal(value, pending);
    }
    if (atomic_compare_exchange_weak_explicit(
            &semaphore->slot->pending, &pending, value, memory_order_acq_rel,
            memory_order_acquire)) {
      *out_previous = pending;
      return NULL;
    }
  }
}

void halo_hal_semaphore_unreserve(halo_hal_semaphore_t *semaphore,
                                  uint64_t value, uint64_t previous) {
  halo_timeline_slot_unreserve(semaphore->slot, value, previous);
}

// halo_hal_semaphore_signal; |woken|: the sleepers of a value the slot
// holds already were woken by whoever stored it.
static void halo_hal_semaphore_reach(halo_hal_semaphore_t *semaphore,
                                     uint64_t value, bool woken) {
  halo_timeline_slot_reserve(semaphore->slot, value, NULL);
  // A signal halod made passed |value| while its GPU store was in flight:
  // that store (a plain write) put the lower value back; the higher one
  // stands, and its waiters wake again (halo_hal_semaphore_t's |reached|).
  if (semaphore->reached > value) value = semaphore->reached;
  semaphore->reached = value;
  if (!halo_timeline_slot_signal(semaphore->slot, value) && !woken) {
    // The device stored the value already (a GPU signal): accepted, and
    // sleepers still need the epoch bump and the wake.
    halo_timeline_slot_notify(semaphore->slot);
  }
  halo_hal_semaphore_drop_fences(semaphore, value);
  // Fire the timepoints now reached (the list is sorted by value).
  for (;;) {
    halo_hal_timepoint_t *timepoint =
        halo_hal_timepoint_of(semaphore->timepoints.head);
    if (!timepoint || timepoint->value > value) break;
    halo_hal_semaphore_unlink(semaphore, timepoint);
    timepoint->callback(timepoint, NULL);
  }
  halo_hal_semaphore_update_host_waits(semaphore);
}

void halo_hal_semaphore_signal(halo_hal_semaphore_t *semaphore,
                               uint64_t value) {
  halo_hal_semaphore_reach(semaphore, value, false);
}

void halo_hal_semaphore_signal_woken(halo_hal_semaphore_t *semaphore,
                                     uint64_t value) {
  halo_hal_semaphore_reach(semaphore, value, true);
}

void halo_hal_semaphore_fail(halo_hal_semaphore_t *semaphore,
                             halo_status_t status) {
  halo_status_code_t code = halo_status_code(status);
  if (code == HALO_STATUS_OK) code = HALO_STATUS_UNKNOWN;
  if (halo_hal_semaphore_failure(semaphore) == 0) {
    // A value reached wins over a later failure: first put back one that a
    // late GPU store hid (|reached|).
    halo_timeline_slot_signal(semaphore->slot, semaphore->reached);
    free(semaphore->failure_message);
    semaphore->failure_message = strdup(halo_status_message(status));
    halo_timeline_slot_fail(semaphore->slot, code);
  }
  halo_status_free(status);
  halo_hal_semaphore_drop_fences(semaphore, UINT64_MAX);
  // Every timepoint still linked lies beyond the value: it fails.
  while (!halo_list_empty(&semaphore->timepoints)) {
    halo_hal_timepoint_t *timepoint =
        halo_hal_timepoint_of(semaphore->timepoints.head);
    halo_hal_semaphore_unlink(semaphore, timepoint);
    timepoint->callback(timepoint,
                        halo_hal_semaphore_failure_status(semaphore));
  }
  halo_hal_semaphore_update_host_waits(semaphore);
}

void halo_hal_semaphore_add_timepoint(halo_hal_semaphore_t *semaphore,
                                      halo_hal_timepoint_t *timepoint) {
  timepoint->link.prev = timepoint->link.next = NULL;
  timepoint->parent = timepoint->left = timepoint->right = NULL;
  timepoint->height = 0;
  timepoint->linked = false;
  // Announced before the value is read: a device worker whose execution
  // stores the value after this read sees the word and reports at once.
  halo_timeline_slot_set_host_waits(semaphore->slot, true);
  if (halo_hal_semaphore_value(semaphore) >= timepoint->value) {
    timepoint->callback(timepoint, NULL);
    halo_hal_semaphore_update_host_waits(semaphore);
    return;
  }
  if (halo_hal_semaphore_failure(semaphore) != 0) {
    timepoint->callback(timepoint,
                        halo_hal_semaphore_failure_status(semaphore));
    halo_hal_semaphore_update_host_waits(semaphore);
    return;
  }
  halo_hal_semaphore_link(semaphore, timepoint);
}

void halo_hal_semaphore_remove_timepoint(halo_hal_semaphore_t *semaphore,
                                         halo_hal_timepoint_t *timepoint) {
  if (!timepoint->linked) return;
  halo_hal_semaphore_unlink(semaphore, timepoint);
  halo_hal_semaphore_update_host_waits(semaphore);
}

uint32_t halo_hal_semaphore_waiting(const halo_hal_semaphore_t *semaphore,
                                    uint64_t *out_lowest,
                                    uint64_t *out_highest) {
  const halo_hal_timepoint_t *lowest =
      halo_hal_timepoint_of(semaphore->timepoints.head);
  const halo_hal_timepoint_t *highest =
      halo_hal_timepoint_of(semaphore->timepoints.tail);
  *out_lowest = lowest ? lowest->value : 0;
  *out_highest = highest ? highest->value : 0;
  return semaphore->timepoint_count;
}

halo_hal_timepoint_t *halo_hal_semaphore_next_timepoint(
    const halo_hal_semaphore_t *semaphore,
    const halo_hal_timepoint_t *previous) {
  return halo_hal_timepoint_of(previous ? previous->link.next
                                        : semaphore->timepoints.head);
}

// Where the offer of a fence of |domain| at |value| starts: false if a
// recorded fence of that domain at or above |value| was offered to (or
// found by) every timepoint it could cover already; else *|out_lowest| the
// value above which timepoints may still want it (0: from the first).
static bool halo_hal_semaphore_offer_from(const halo_hal_semaphore_t *semaphore,
                                          uint64_t value, const void *domain,
                                          uint64_t *out_lowest) {
  *out_lowest = 0;
  const halo_hal_semaphore_fence_t *tail = semaphore->fences_tail;
  if (tail && tail->value < value && tail->fence->domain == domain) {
    *out_lowest = tail->value;  // the usual case: the highest, and ours
    return true;
  }
  for (const halo_hal_semaphore_fence_t *entry = semaphore->fences; entry;
       entry = entry->next) {
    if (entry->fence->domain != domain) continue;
    if (entry->value >= value) return false;
    *out_lowest = entry->value;
  }
  return true;
}

void halo_hal_semaphore_add_fence(halo_hal_semaphore_t *semaphore,
                                  uint64_t value, halo_hal_fence_t *fence) {
  if (!fence || halo_hal_semaphore_failure(semaphore) != 0 ||
      halo_hal_semaphore_value(semaphore) >= value ||
      semaphore->fence_count >= HALO_HAL_SEMAPHORE_MAX_FENCES) {
    return;
  }
  uint64_t lowest;
  bool offer =
      halo_hal_semaphore_offer_from(semaphore, value, fence->domain, &lowest);
  halo_hal_semaphore_fence_t *entry = calloc(1, sizeof(*entry));
  if (!entry) return;  // the waits go through the host
  entry->value = value;
  entry->fence = fence;
  halo_hal_fence_retain(fence);
  halo_hal_semaphore_fence_t *tail = semaphore->fences_tail;
  if (!tail || tail->value <= value) {
    if (tail) {
      tail->next = entry;
    } else {
      semaphore->fences = entry;
    }
    semaphore->fences_tail = entry;
  } else {
    // Below the highest: after every one at or below it (it cannot go last).
    halo_hal_semaphore_fence_t **link = &semaphore->fences;
    while ((*link)->value <= value) link = &(*link)->next;
    entry->next = *link;
    *link = entry;
  }
  ++semaphore->fence_count;
  if (!offer) return;
  // Offer it to the timepoints above |lowest| up to |value|. A callback may
  // issue work that changes the list (fires, removes or adds timepoints,
  // adds fences): the walk's |next| moves past a timepoint taken out
  // (halo_hal_semaphore_unlink), so no timepoint is touched after its
  // callback.
  halo_hal_fence_walk_t walk = {
      .outer = semaphore->fence_walks,
      .next = lowest ? halo_hal_semaphore_first_above(semaphore, lowest)
                     : halo_hal_timepoint_of(semaphore->timepoints.head),
  };
  semaphore->fence_walks = &walk;
  while (walk.next && walk.next->value <= value) {
    halo_hal_timepoint_t *timepoint = walk.next;
    walk.next = halo_hal_timepoint_of(timepoint->link.next);
    if (timepoint->covered) timepoint->covered(timepoint, fence);
  }
  semaphore->fence_walks = walk.outer;
}

halo_hal_fence_t *halo_hal_semaphore_find_fence(
    const halo_hal_semaphore_t *semaphore, uint64_t value, const void *domain) {
  for (const halo_hal_semaphore_fence_t *entry = semaphore->fences; entry;
       entry = entry->next) {
    if (entry->value >= value && entry->fence->domain == domain) {
      return entry->fence;
    }
  }
  return NULL;
}
