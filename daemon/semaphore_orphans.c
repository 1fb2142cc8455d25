// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Semaphores nothing can advance any more (see the header). Loop thread.
#include "daemon/semaphore_orphans.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/status.h"
#include "hal/deferred_queue.h"

// The semaphore signal |index| of |submission| names (its semaphores are
// its waits', then its signals').
static halod_semaphore_t *halod_orphans_signal(
    const halod_submission_t *submission, uint32_t index) {
  return submission->semaphores[submission->action.wait_count + index];
}

void halod_semaphore_orphans_start_waiting(halod_submission_t *submission) {
  if (submission->waiting_counted) return;
  submission->waiting_counted = true;
  for (uint32_t i = 0; i < submission->semaphore_count; ++i) {
    ++submission->semaphores[i]->waiting_references;
  }
  for (uint32_t i = 0; i < submission->action.signal_count; ++i) {
    ++halod_orphans_signal(submission, i)->waiting_signals;
  }
}

void halod_semaphore_orphans_stop_waiting(halod_submission_t *submission) {
  if (!submission->waiting_counted) return;
  submission->waiting_counted = false;
  for (uint32_t i = 0; i < submission->semaphore_count; ++i) {
    --submission->semaphores[i]->waiting_references;
  }
  for (uint32_t i = 0; i < submission->action.signal_count; ++i) {
    --halod_orphans_signal(submission, i)->waiting_signals;
  }
}

// Every reference a waiting submission's (see the header), and healthy.
static bool halod_orphans_free_semaphore(const halod_semaphore_t *semaphore) {
  return semaphore->refcount == semaphore->waiting_references &&
         halo_hal_semaphore_failure(&semaphore->hal) == 0;
}

// A free semaphore reached: a member of the set until some waiting
// signaler of it turns out not to be blocked on the set.
typedef struct halod_orphans_node_t {
  halod_semaphore_t *semaphore;
  // Signals of it by waiting submissions blocked on the set (of its
  // |waiting_signals|).
  uint32_t blocked_signals;
  bool removed;
} halod_orphans_node_t;

// A waiting submission linked on a member: blocked while some of its
// unmet waits are on members.
typedef struct halod_orphans_waiter_t {
  halod_submission_t *submission;
  uint32_t blocking;  // its linked waits on members
} halod_orphans_waiter_t;

typedef struct halod_orphans_walk_t {
  halod_orphans_node_t *nodes;  // |walk_index| - 1 of their semaphore
  uint32_t node_count;
  uint32_t node_capacity;
  halod_orphans_waiter_t *waiters;  // |walk_index| - 1 of their submission
  uint32_t waiter_count;
  uint32_t waiter_capacity;
  uint32_t *removed;  // nodes left the set, their waiters not yet updated
  uint32_t removed_count;
  // Steps taken: a node, a waiter and each of its signals, a wait linked
  // on a node. The settling takes at most as many again.
  uint32_t steps;
  uint32_t budget;   // steps at most (0: no budget)
  bool over_budget;  // stopped there
} halod_orphans_walk_t;

// Whether |walk| may take |steps| more (else it stops).
static bool halod_orphans_step(halod_orphans_walk_t *walk, uint32_t steps) {
  if (!walk->budget || steps <= walk->budget - walk->steps) {
    walk->steps += steps;
    return true;
  }
  walk->over_budget = true;
  return false;
}

// Grows |*items| (of |item_size| bytes, |*capacity| of them) for one more.
static bool halod_orphans_grow(void **items, uint32_t *capacity,
                               size_t item_size) {
  uint32_t grown = *capacity ? *capacity * 2 : 16;
  void *more = realloc(*items, (size_t)grown * item_size);
  if (!more) return false;
  *items = more;
  *capacity = grown;
  return true;
}

static bool halod_orphans_add_node(halod_orphans_walk_t *walk,
                                   halod_semaphore_t *semaphore) {
  if (!halod_orphans_step(walk, 1)) return false;
  if (walk->node_count == walk->node_capacity &&
      !halod_orphans_grow((void **)&walk->nodes, &walk->node_capacity,
                          sizeof(*walk->nodes))) {
    return false;
  }
  walk->nodes[walk->node_count] =
      (halod_orphans_node_t){.semaphore = semaphore};
  semaphore->walk_index = ++walk->node_count;
  return true;
}

// Adds |submission| (waiting, first reached) and the free semaphores it
// signals that are not in the walk yet.
static bool halod_orphans_add_waiter(halod_orphans_walk_t *walk,
                                     halod_submission_t *submission) {
  if (!halod_orphans_step(walk, 1 + submission->action.signal_count)) {
    return false;
  }
  if (walk->waiter_count == walk->waiter_capacity &&
      !halod_orphans_grow((void **)&walk->waiters, &walk->waiter_capacity,
                          sizeof(*walk->waiters))) {
    return false;
  }
  walk->waiters[walk->waiter_count] =
      (halod_orphans_waiter_t){.submission = submission};
  submission->walk_index = ++walk->waiter_count;
  for (uint32_t i = 0; i < submission->action.signal_count; ++i) {
    halod_semaphore_t *signaled = halod_orphans_signal(submission, i);
    if (!signaled->walk_index && halod_orphans_free_semaphore(signaled) &&
        !halod_orphans_add_node(walk, signaled)) {
      return false;
    }
  }
  return true;
}

// The waiting submission of |timepoint| (a wait of it not met), or NULL:
// a wait of one released early on a device fence (issued: it will run).
static halod_submission_t *halod_orphans_waiting_submission(
    const halo_hal_timepoint_t *timepoint) {
  halo_hal_action_t *action = halo_hal_deferred_queue_waiter(timepoint);
  if (!action || action->state != HALO_HAL_ACTION_WAITING) return NULL;
  return (halod_submission_t *)action;  // the action is its first member
}

// Reaches every free semaphore from the first node, counting each waiting
// submission's linked waits on them.
static bool halod_orphans_reach(halod_orphans_walk_t *walk) {
  for (uint32_t i = 0; i < walk->node_count; ++i) {
    const halo_hal_semaphore_t *hal = &walk->nodes[i].semaphore->hal;
    for (halo_hal_timepoint_t *timepoint =
             halo_hal_semaphore_next_timepoint(hal, NULL);
         timepoint;
         timepoint = halo_hal_semaphore_next_timepoint(hal, timepoint)) {
      if (!halod_orphans_step(walk, 1)) return false;
      halod_submission_t *submission =
          halod_orphans_waiting_submission(timepoint);
      if (!submission) continue;
      if (!submission->walk_index &&
          !halod_orphans_add_waiter(walk, submission)) {
        return false;
      }
      ++walk->waiters[submission->walk_index - 1].blocking;
    }
  }
  return true;
}

// Takes node |index| out of the set (once).
static void halod_orphans_remove(halod_orphans_walk_t *walk, uint32_t index) {
  if (walk->nodes[index].removed) return;
  walk->nodes[index].removed = true;
  walk->removed[walk->removed_count++] = index;
}

// One signal fewer of node |index| comes from a blocked submission: it
// leaves the set if some waiting signaler of it is not blocked.
static void halod_orphans_unblock_signal(halod_orphans_walk_t *walk,
                                         uint32_t index) {
  halod_orphans_node_t *node = &walk->nodes[index];
  --node->blocked_signals;
  if (node->blocked_signals < node->semaphore->waiting_signals) {
    halod_orphans_remove(walk, index);
  }
}

// The greatest fixed point: every member starts in the set, every waiter
// blocked (it was reached through a linked wait on a member); a member
// some of whose waiting signalers were not reached, or are not blocked any
// more, leaves the set, which unblocks the waiters whose last wait on the
// set was on it, whose signals then count no more; until nothing leaves.
static bool halod_orphans_settle(halod_orphans_walk_t *walk) {
  walk->removed = calloc(walk->node_count, sizeof(*walk->removed));
  if (!walk->removed) return false;
  for (uint32_t i = 0; i < walk->waiter_count; ++i) {
    const halod_submission_t *submission = walk->waiters[i].submission;
    for (uint32_t j = 0; j < submission->action.signal_count; ++j) {
      uint32_t index = halod_orphans_signal(submission, j)->walk_index;
      if (index) ++walk->nodes[index - 1].blocked_signals;
    }
  }
  for (uint32_t i = 0; i < walk->node_count; ++i) {
    if (walk->nodes[i].blocked_signals <
        walk->nodes[i].semaphore->waiting_signals) {
      halod_orphans_remove(walk, i);
    }
  }
  while (walk->removed_count > 0) {
    uint32_t index = walk->removed[--walk->removed_count];
    const halo_hal_semaphore_t *hal = &walk->nodes[index].semaphore->hal;
    for (halo_hal_timepoint_t *timepoint =
             halo_hal_semaphore_next_timepoint(hal, NULL);
         timepoint;
         timepoint = halo_hal_semaphore_next_timepoint(hal, timepoint)) {
      const halod_submission_t *submission =
          halod_orphans_waiting_submission(timepoint);
      if (!submission || --walk->waiters[submission->walk_index - 1].blocking) {
        continue;
      }
      for (uint32_t j = 0; j < submission->action.signal_count; ++j) {
        uint32_t signaled = halod_orphans_signal(submission, j)->walk_index;
        if (signaled) halod_orphans_unblock_signal(walk, signaled - 1);
      }
    }
  }
  return true;
}

// The members left, in the order reached.
static bool halod_orphans_collect(const halod_orphans_walk_t *walk,
                                  halod_semaphore_orphans_t *out) {
  uint32_t count = 0;
  for (uint32_t i = 0; i < walk->node_count; ++i) {
    count += !walk->nodes[i].removed;
  }
  if (count == 0) return true;
  out->semaphores = calloc(count, sizeof(*out->semaphores));
  if (!out->semaphores) return false;
  for (uint32_t i = 0; i < walk->node_count; ++i) {
    if (!walk->nodes[i].removed) {
      out->semaphores[out->count++] = walk->nodes[i].semaphore;
    }
  }
  return true;
}

// Whether the search should start from |semaphore|: free, with waits.
static bool halod_orphans_root(const halod_semaphore_t *semaphore) {
  return halod_orphans_free_semaphore(semaphore) &&
         semaphore->hal.timepoint_count > 0;
}

// Runs |walk| from its nodes (the roots) and frees it: *|out| the orphans,
// or incomplete (over budget), or an error naming |what| (out of memory).
static halo_status_t halod_orphans_run(halod_orphans_walk_t *walk,
                                       bool roots_added, const char *what,
                                       halod_semaphore_orphans_t *out) {
  bool done = roots_added && halod_orphans_reach(walk) &&
              halod_orphans_settle(walk) && halod_orphans_collect(walk, out);
  bool over_budget = walk->over_budget;
  for (uint32_t i = 0; i < walk->node_count; ++i) {
    walk->nodes[i].semaphore->walk_index = 0;
  }
  for (uint32_t i = 0; i < walk->waiter_count; ++i) {
    walk->waiters[i].submission->walk_index = 0;
  }
  free(walk->nodes);
  free(walk->waiters);
  free(walk->removed);
  if (done) return NULL;
  halod_semaphore_orphans_free(out);
  if (over_budget) {
    out->incomplete = true;
    return NULL;
  }
  return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                          "oom walking the pending submissions that wait on "
                          "%s",
                          what);
}

halo_status_t halod_semaphore_orphans_find(halod_semaphore_t *released,
                                           halod_semaphore_orphans_t *out) {
  *out = (halod_semaphore_orphans_t){0};
  if (!halod_orphans_root(released)) return NULL;
  if (released->waiting_signals == 0) {
    // Nothing signals it: an orphan alone, however many wait, at once.
    out->semaphores = calloc(1, sizeof(*out->semaphores));
    if (!out->semaphores) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "oom listing semaphore %llu",
                              (unsigned long long)released->id);
    }
    out->semaphores[out->count++] = released;
    return NULL;
  }
  halod_orphans_walk_t walk = {.budget = HALOD_SEMAPHORE_ORPHANS_BUDGET};
  char what[48];
  snprintf(what, sizeof(what), "semaphore %llu",
           (unsigned long long)released->id);
  return halod_orphans_run(&walk, halod_orphans_add_node(&walk, released), what,
                           out);
}

halo_status_t halod_semaphore_orphans_find_from(
    const halo_u64_map_t *semaphores, const halo_u64_map_t *roots,
    halod_semaphore_orphans_t *out) {
  *out = (halod_semaphore_orphans_t){0};
  const halo_u64_map_t *from = roots ? roots : semaphores;
  halod_orphans_walk_t walk = {0};
  bool added = true;
  for (size_t i = 0; added && i < from->capacity; ++i) {
    uint64_t id = from->entries[i].key;
    halod_semaphore_t *semaphore = id ? halo_u64_map_get(semaphores, id) : NULL;
    if (semaphore && halod_orphans_root(semaphore)) {
      added = halod_orphans_add_node(&walk, semaphore);
    }
  }
  return halod_orphans_run(&walk, added, "the semaphores", out);
}

void halod_semaphore_orphans_free(halod_semaphore_orphans_t *orphans) {
  free(orphans->semaphores);
  orphans->semaphores = NULL;
  orphans->count = 0;
}

void halod_semaphore_orphans_describe(const halod_semaphore_orphans_t *orphans,
                                      char *text, size_t size) {
  enum { kListed = 8 };
  uint32_t listed = orphans->count < kListed ? orphans->count : kListed;
  size_t used = 0;
  int written =
      snprintf(text, size, "semaphore%s", orphans->count == 1 ? "" : "s");
  for (uint32_t i = 0; i < listed && written >= 0; ++i) {
    used += (size_t)written;
    if (used >= size) return;
    const char *separator = i == 0 ? " "
                            : i + 1 == listed && listed == orphans->count
                                ? " and "
                                : ", ";
    written = snprintf(text + used, size - used, "%s%llu", separator,
                       (unsigned long long)orphans->semaphores[i]->id);
  }
  if (written < 0) return;
  used += (size_t)written;
  if (listed < orphans->count && used < size) {
    snprintf(text + used, size - used, " and %u more", orphans->count - listed);
  }
}
