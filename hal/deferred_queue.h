// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The deferred queue: executions accepted from clients wait here until every
// semaphore they wait on reaches its value (wait-before-signal is legal),
// then go to their device queue; completions come back from driver threads
// through an inbox the loop drains. A failed wait or a failed execution
// fails the action's signal semaphores with the cause. Driver-independent.
//
// Host actions (|run_on_host|: queue-ordered alloca and dealloca) have no
// device work: once their waits are met on the host they run on the loop
// thread and complete through halo_hal_deferred_queue_complete, whose
// outcome is applied to their signals like an execution's.
//
// GPU-to-GPU waits (hal/fence.h): a wait not reached yet is *covered* when
// device work already handed to a queue of the same fence domain will reach
// it (the semaphore records that work's fence when it is issued). An action
// whose every remaining wait is covered is released at once with those
// fences: the device orders it after them, without a host round trip. A
// value a client will signal from the host never covers a wait: such
// actions stay here until the value is reached.
// Semantics of an action released early: it retires only after each
// covered wait was reached on the host as well (so its signals land after
// those of the work it waited on). If a covered wait fails instead (the
// producer failed, or its semaphore was failed), the action's signals fail
// too, naming that failure, even though the device may have run the work
// already (its device stores of the values may have landed: a waiter that
// saw a value before the failure saw work that did run).
//
// No recursion through chains: an action's outcome applied to its signals
// may release (or fail) the actions that wait on them, and theirs the next
// ones, and a fence offered may release the next device work. Those steps
// (applying an outcome and handing the action back; offering an issued
// action's fence) run in a loop once the outermost call into the deferred
// queue (submit, complete, cancel, drain, or a semaphore firing or offering
// into an action's wait) is about to return, not inside the step that set
// them off: a chain of actions, each waiting on the one before, once
// recursed as deep as it was long, and one client's chain of allocas failed
// at once overflowed halod's stack (a 1 MiB stack at 10,000 links; 8 MiB
// held 65,000, and a client may keep session-pending in every session).
// The queued outcomes run before the queued offers, each kind in the order
// queued: an action's outcome reaches its signals, and its owner gets it
// back, before those of the actions it releases or fails (before, the
// owner of the last action in a chain got it back first).
//
// Loop thread, except halo_hal_deferred_queue_post_completion (any thread).
#ifndef HALO_HAL_DEFERRED_QUEUE_H_
#define HALO_HAL_DEFERRED_QUEUE_H_

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/list.h"
#include "hal/queue.h"
#include "hal/semaphore.h"

typedef struct halo_hal_deferred_queue_t halo_hal_deferred_queue_t;
typedef struct halo_hal_action_t halo_hal_action_t;

typedef enum halo_hal_action_state_e {
  HALO_HAL_ACTION_WAITING = 0,  // some waits not met yet
  HALO_HAL_ACTION_ISSUED = 1,   // handed to the device queue
  HALO_HAL_ACTION_RETIRED = 2,
} halo_hal_action_state_t;

typedef struct halo_hal_action_wait_t {
  halo_hal_timepoint_t timepoint;  // first: the callback finds the wait
  halo_hal_action_t *action;
  halo_hal_semaphore_t *semaphore;
  // Internal.
  bool reached;             // the timepoint fired (reached or failed)
  bool covered;             // a device fence covers it (see above)
  halo_hal_fence_t *fence;  // the covering fence until the action issues
} halo_hal_action_wait_t;

typedef struct halo_hal_action_signal_t {
  halo_hal_semaphore_t *semaphore;
  uint64_t value;
} halo_hal_action_signal_t;

// Called on the loop thread once the action is done (signals applied or
// failed): the owner releases what the action held, frees |failure| (NULL
// on success) and frees the action.
typedef void (*halo_hal_action_retire_fn)(halo_hal_action_t *action);

struct halo_hal_action_t {
  halo_hal_deferred_queue_t *deferred_queue;
  halo_hal_queue_t *queue;
  halo_hal_execution_t execution;  // completion fields set by the queue
  halo_hal_action_wait_t *waits;
  uint32_t wait_count;
  halo_hal_action_signal_t *signals;
  uint32_t signal_count;
  halo_hal_action_retire_fn retire;
  // Optional: called on the loop thread when the waits are met, just before
  // the action goes to its device queue.
  void (*on_issue)(halo_hal_action_t *action);
  // Optional: the action has no device work (queue-ordered alloca and
  // dealloca). Its waits are met on the host only (no device fence covers
  // them: nothing would run on the device to order after the fences), and
  // then, instead of |queue| executing anything, the loop calls
  // |run_on_host|, which completes the action with
  // halo_hal_deferred_queue_complete, at once or later.
  void (*run_on_host)(halo_hal_action_t *action);
  void *user_data;
  // Internal.
  halo_hal_action_state_t state;
  uint32_t pending_waits;    // waits whose timepoint has not fired
  uint32_t uncovered_waits;  // ... and that no device fence covers
  halo_status_t failure;     // why the action failed (owned)
  // Released early on device fences: the first covered wait that failed,
  // and whether the device queue reported the outcome already (retirement
  // then waits for the covered waits to resolve).
  halo_status_t wait_failure;
  bool completed;
  // Steps queued to run after the current one (see the top): offering
  // |offer_fence| (a reference; non-NULL while queued) to the waits of
  // its signals, and applying its outcome and handing it back (queued
  // once it retired).
  halo_list_link_t offer_link;
  halo_hal_fence_t *offer_fence;
  halo_list_link_t finish_link;
  halo_hal_action_t *inbox_next;
  int64_t issued_ns;
  int64_t completed_ns;
};

// Wakes the loop (uv_async_send); called from any thread.
typedef void (*halo_hal_wake_fn)(void *wake_data);

struct halo_hal_deferred_queue_t {
  pthread_mutex_t mutex;  // guards the inbox
  halo_hal_action_t *inbox_head;
  halo_hal_action_t *inbox_tail;
  halo_hal_wake_fn wake;
  void *wake_data;
  uint32_t waiting;  // actions not yet issued
  uint32_t issued;   // actions on a device queue
  // Calls into the queue under way on the loop (the outermost runs the
  // steps queued below), and those steps (of halo_hal_action_t, by
  // |offer_link| and |finish_link|).
  uint32_t depth;
  halo_list_t offers;
  halo_list_t finishes;
};

void halo_hal_deferred_queue_initialize(halo_hal_deferred_queue_t *queue,
                                        halo_hal_wake_fn wake, void *wake_data);
// Every action must have retired (issued ones complete first).
void halo_hal_deferred_queue_deinitialize(halo_hal_deferred_queue_t *queue);

// Accepts |action| (fields above "Internal" set; signal values already
// reserved by the caller): registers its waits and issues it as soon as
// they are met or covered by device fences — possibly before this returns,
// possibly retiring it at once if a wait already failed.
void halo_hal_deferred_queue_submit(halo_hal_deferred_queue_t *queue,
                                    halo_hal_action_t *action);

// Completes an issued action that runs on the host (|run_on_host|) with
// |status| (taken; NULL: success): its signals are applied (or failed) and
// it retires before the outermost call into the queue returns (the one
// that issued it). Only from |run_on_host| itself: an
// action that retires while its owner walks its own lists (cancelling a
// session's work) would pull the ground from under the walk.
void halo_hal_deferred_queue_complete(halo_hal_action_t *action,
                                      halo_status_t status);

// The same, later: the outcome is queued in the inbox like a device
// completion and applied when the loop next drains it. For a host action
// that finishes outside |run_on_host| (a dealloca whose memory is freed
// when another submission retires). Any thread.
void halo_hal_deferred_queue_post_completion(halo_hal_action_t *action,
                                             halo_status_t status);

// Fails a waiting action with |status| (taken): its timepoints are removed,
// its signals fail, it retires. Issued actions are left to complete.
void halo_hal_deferred_queue_cancel(halo_hal_action_t *action,
                                    halo_status_t status);

// The action whose wait |timepoint| is, if the deferred queue linked it
// (halo_hal_semaphore_next_timepoint walks a semaphore's); NULL otherwise.
halo_hal_action_t *halo_hal_deferred_queue_waiter(
    const halo_hal_timepoint_t *timepoint);

// Drains completions posted by driver threads (on the loop, after a wake).
void halo_hal_deferred_queue_drain(halo_hal_deferred_queue_t *queue);

#endif  // HALO_HAL_DEFERRED_QUEUE_H_
