// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The deferred queue (see the header). Loop thread, except
// halo_hal_action_on_complete (a driver thread, or the loop thread within
// halo_hal_queue_execute: it only posts to the inbox either way).
#include "hal/deferred_queue.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/status.h"

void halo_hal_deferred_queue_initialize(halo_hal_deferred_queue_t *queue,
                                        halo_hal_wake_fn wake,
                                        void *wake_data) {
  pthread_mutex_init(&queue->mutex, NULL);
  queue->inbox_head = queue->inbox_tail = NULL;
  queue->wake = wake;
  queue->wake_data = wake_data;
  queue->waiting = 0;
  queue->issued = 0;
  queue->depth = 0;
  halo_list_initialize(&queue->offers);
  halo_list_initialize(&queue->finishes);
}

void halo_hal_deferred_queue_deinitialize(halo_hal_deferred_queue_t *queue) {
  halo_hal_deferred_queue_drain(queue);
  pthread_mutex_destroy(&queue->mutex);
}

// Drops the covering fences the action still holds.
static void halo_hal_action_release_fences(halo_hal_action_t *action) {
  for (uint32_t i = 0; i < action->wait_count; ++i) {
    halo_hal_fence_release(action->waits[i].fence);
    action->waits[i].fence = NULL;
  }
}

// Unlinks the timepoints that have not fired.
static void halo_hal_action_remove_timepoints(halo_hal_action_t *action) {
  for (uint32_t i = 0; i < action->wait_count; ++i) {
    halo_hal_semaphore_remove_timepoint(action->waits[i].semaphore,
                                        &action->waits[i].timepoint);
  }
}

// Retires the action: it leaves the waits and the counts now; applying its
// outcome to its signals and handing it back (halo_hal_action_finish) run
// once the step under way returned (the header's top).
static void halo_hal_action_retire(halo_hal_action_t *action) {
  halo_hal_deferred_queue_t *queue = action->deferred_queue;
  if (action->state == HALO_HAL_ACTION_WAITING) {
    --queue->waiting;
  } else if (action->state == HALO_HAL_ACTION_ISSUED) {
    --queue->issued;
  }
  action->state = HALO_HAL_ACTION_RETIRED;
  halo_hal_action_remove_timepoints(action);
  halo_hal_action_release_fences(action);
  if (!action->failure && action->wait_failure) {
    action->failure = halo_status_annotate(
        action->wait_failure,
        "the submission was released on the device after work it waited "
        "for, which then failed");
    action->wait_failure = NULL;
  }
  halo_status_free(action->wait_failure);
  action->wait_failure = NULL;
  if (action->offer_fence) {
    // Its fence not offered yet: the outcome reaches (or fails) the values
    // now.
    halo_list_remove(&queue->offers, &action->offer_link);
    halo_hal_fence_release(action->offer_fence);
    action->offer_fence = NULL;
  }
  halo_list_push_back(&queue->finishes, &action->finish_link);
}

// Applies a retired action's outcome to its signal semaphores (which may
// release or fail the actions waiting on them: their steps queue behind
// this one) and hands the action back.
static void halo_hal_action_finish(halo_hal_action_t *action) {
  for (uint32_t i = 0; i < action->signal_count; ++i) {
    halo_hal_action_signal_t *signal = &action->signals[i];
    if (action->failure) {
      halo_hal_semaphore_fail(
          signal->semaphore,
          halo_status_make(halo_status_code(action->failure), "%s",
                           halo_status_message(action->failure)));
    } else {
      halo_hal_semaphore_signal(signal->semaphore, signal->value);
    }
  }
  action->retire(action);
}

// Offers an issued action's fence to the waits on the values it signals:
// device work that waits for them can now be released on the fence (their
// issues queue their own offers behind this one).
static void halo_hal_action_offer(halo_hal_action_t *action) {
  halo_hal_fence_t *fence = action->offer_fence;
  action->offer_fence = NULL;
  for (uint32_t i = 0; i < action->signal_count; ++i) {
    halo_hal_semaphore_add_fence(action->signals[i].semaphore,
                                 action->signals[i].value, fence);
  }
  halo_hal_fence_release(fence);
}

// Every call into the queue on the loop (the public ones, and the
// semaphores' callbacks into an action's waits) runs between enter and
// leave; the outermost leave runs the queued steps in a loop, each inside
// it, so that what a step sets off queues behind it instead of running
// within it.
static void halo_hal_deferred_queue_enter(halo_hal_deferred_queue_t *queue) {
  ++queue->depth;
}

static void halo_hal_deferred_queue_leave(halo_hal_deferred_queue_t *queue) {
  if (queue->depth == 1) {
    // Outcomes first: a failure already known fails the actions waiting on
    // it before a fence offered meanwhile could release one of them to the
    // device (as when the failure was applied within its retirement).
    for (;;) {
      halo_list_link_t *link = queue->finishes.head;
      if (link) {
        halo_list_remove(&queue->finishes, link);
        halo_hal_action_finish(
            HALO_LIST_ENTRY(link, halo_hal_action_t, finish_link));
        continue;
      }
      link = queue->offers.head;
      if (!link) break;
      halo_list_remove(&queue->offers, link);
      halo_hal_action_offer(
          HALO_LIST_ENTRY(link, halo_hal_action_t, offer_link));
    }
  }
  --queue->depth;
}

// The device queue reported the outcome (drained on the loop). An action
// released early on device fences retires once its covered waits resolved.
static void halo_hal_action_on_outcome(halo_hal_action_t *action) {
  action->completed = true;
  if (action->pending_waits > 0) return;  // the last wait retires it
  halo_hal_action_retire(action);
}

// Driver thread (or any thread): the action's work finished.
static void halo_hal_action_on_complete(void *user_data, halo_status_t status) {
  halo_hal_action_t *action = user_data;
  halo_hal_deferred_queue_t *queue = action->deferred_queue;
  action->completed_ns = halo_clock_now_ns();
  action->failure = status;
  action->inbox_next = NULL;
  pthread_mutex_lock(&queue->mutex);
  if (queue->inbox_tail) {
    queue->inbox_tail->inbox_next = action;
  } else {
    queue->inbox_head = action;
  }
  queue->inbox_tail = action;
  // Read before unlocking: once the action is in the inbox the loop may
  // drain it and deinitialize the queue.
  halo_hal_wake_fn wake = queue->wake;
  void *wake_data = queue->wake_data;
  pthread_mutex_unlock(&queue->mutex);
  wake(wake_data);
}

static void halo_hal_action_issue(halo_hal_action_t *action) {
  halo_hal_deferred_queue_t *queue = action->deferred_queue;
  --queue->waiting;
  ++queue->issued;
  action->state = HALO_HAL_ACTION_ISSUED;
  action->issued_ns = halo_clock_now_ns();
  if (action->on_issue) action->on_issue(action);
  if (action->run_on_host) {
    action->run_on_host(action);  // may retire it
    return;
  }
  // The fences of the waits not reached yet (every one of them covered).
  halo_hal_fence_t *stack_fences[8];
  halo_hal_fence_t **fences = stack_fences;
  uint32_t fence_count = 0;
  if (action->pending_waits > 8) {
    fences = calloc(action->pending_waits, sizeof(*fences));
  }
  if (!fences) {
    action->failure = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                                       "oom for the submission's fences");
    halo_hal_action_retire(action);
    return;
  }
  for (uint32_t i = 0; i < action->wait_count; ++i) {
    halo_hal_action_wait_t *wait = &action->waits[i];
    if (!wait->reached && wait->fence) fences[fence_count++] = wait->fence;
  }
  halo_hal_fence_t *fence = NULL;
  action->execution.completion = halo_hal_action_on_complete;
  action->execution.user_data = action;
  action->execution.wait_fences = fences;
  action->execution.wait_fence_count = fence_count;
  action->execution.out_fence = action->queue->fence_domain ? &fence : NULL;
  halo_status_t status =
      halo_hal_queue_execute(action->queue, &action->execution);
  action->execution.wait_fences = NULL;
  action->execution.wait_fence_count = 0;
  action->execution.out_fence = NULL;
  if (fences != stack_fences) free(fences);
  // The driver retained the fences it waits on.
  halo_hal_action_release_fences(action);
  if (status) {
    action->failure = halo_status_annotate(status, "starting the execution");
    halo_hal_action_retire(action);
    return;
  }
  if (!fence) return;
  // Offered once this step returned (halo_hal_action_offer).
  action->offer_fence = fence;
  halo_list_push_back(&queue->offers, &action->offer_link);
}

static void halo_hal_action_fail(halo_hal_action_t *action,
                                 halo_status_t status) {
  halo_status_free(action->failure);
  action->failure = status;
  halo_hal_action_retire(action);
}

// |status| (owned), the failure of a semaphore an action waits on, as the
// action's own: said once how it arrived. A failure that came along a
// chain of submissions, each waiting on the one before, carries the words
// already; a prefix per link would grow the message with the chain, and
// copying it at each link cost O(links^2).
static halo_status_t halo_hal_action_wait_failed(halo_status_t status) {
  static const char kPrefix[] = "a wait of the submission failed";
  if (strncmp(halo_status_message(status), kPrefix, sizeof(kPrefix) - 1) == 0) {
    return status;
  }
  return halo_status_annotate(status, "%s", kPrefix);
}

// halo_hal_action_on_wait, inside the queue.
static void halo_hal_action_wait_fired(halo_hal_action_wait_t *wait,
                                       halo_status_t status) {
  halo_hal_action_t *action = wait->action;
  if (wait->reached || action->state == HALO_HAL_ACTION_RETIRED) {
    halo_status_free(status);
    return;
  }
  wait->reached = true;
  --action->pending_waits;
  if (!wait->covered) --action->uncovered_waits;
  if (action->state == HALO_HAL_ACTION_ISSUED) {
    // Released early on this wait's fence: the outcome waits for it.
    if (status && !action->wait_failure) {
      action->wait_failure = halo_hal_action_wait_failed(status);
    } else {
      halo_status_free(status);
    }
    if (action->pending_waits == 0 && action->completed) {
      halo_hal_action_retire(action);
    }
    return;
  }
  if (status) {
    halo_hal_action_fail(action, halo_hal_action_wait_failed(status));
    return;
  }
  if (action->uncovered_waits == 0) halo_hal_action_issue(action);
}

static void halo_hal_action_on_wait(halo_hal_timepoint_t *timepoint,
                                    halo_status_t status) {
  halo_hal_action_wait_t *wait = (halo_hal_action_wait_t *)timepoint;
  halo_hal_deferred_queue_t *queue = wait->action->deferred_queue;
  halo_hal_deferred_queue_enter(queue);
  halo_hal_action_wait_fired(wait, status);
  halo_hal_deferred_queue_leave(queue);
}

// Marks |wait| covered by |fence| (borrowed).
static void halo_hal_action_cover(halo_hal_action_wait_t *wait,
                                  halo_hal_fence_t *fence) {
  halo_hal_fence_retain(fence);
  wait->fence = fence;
  wait->covered = true;
  --wait->action->uncovered_waits;
}

static void halo_hal_action_on_covered(halo_hal_timepoint_t *timepoint,
                                       halo_hal_fence_t *fence) {
  halo_hal_action_wait_t *wait = (halo_hal_action_wait_t *)timepoint;
  halo_hal_action_t *action = wait->action;
  if (action->state != HALO_HAL_ACTION_WAITING || wait->reached ||
      wait->covered || fence->domain != action->queue->fence_domain) {
    return;
  }
  halo_hal_deferred_queue_t *queue = action->deferred_queue;
  halo_hal_deferred_queue_enter(queue);
  halo_hal_action_cover(wait, fence);
  if (action->uncovered_waits == 0) halo_hal_action_issue(action);
  halo_hal_deferred_queue_leave(queue);
}

void halo_hal_deferred_queue_submit(halo_hal_deferred_queue_t *queue,
                                    halo_hal_action_t *action) {
  action->deferred_queue = queue;
  action->state = HALO_HAL_ACTION_WAITING;
  action->failure = NULL;
  action->wait_failure = NULL;
  action->completed = false;
  action->offer_fence = NULL;
  halo_hal_deferred_queue_enter(queue);
  ++queue->waiting;
  // Host actions take no fences: their waits are met on the host.
  const void *domain = action->run_on_host ? NULL : action->queue->fence_domain;
  // One extra count held while registering, so a wait met during
  // registration cannot issue the action before all are registered.
  action->pending_waits = action->wait_count + 1;
  action->uncovered_waits = action->wait_count + 1;
  for (uint32_t i = 0; i < action->wait_count; ++i) {
    halo_hal_action_wait_t *wait = &action->waits[i];
    wait->action = action;
    wait->reached = false;
    wait->covered = false;
    wait->fence = NULL;
    wait->timepoint.callback = halo_hal_action_on_wait;
    wait->timepoint.covered = domain ? halo_hal_action_on_covered : NULL;
    wait->timepoint.linked = false;
  }
  // A wait that failed already retires the action during registration: its
  // owner gets it back at the leave below, after the loop.
  for (uint32_t i = 0; i < action->wait_count; ++i) {
    halo_hal_action_wait_t *wait = &action->waits[i];
    halo_hal_semaphore_add_timepoint(wait->semaphore, &wait->timepoint);
    if (action->state != HALO_HAL_ACTION_WAITING) break;  // failed
    if (domain && !wait->reached) {
      halo_hal_fence_t *fence = halo_hal_semaphore_find_fence(
          wait->semaphore, wait->timepoint.value, domain);
      if (fence) halo_hal_action_cover(wait, fence);
    }
  }
  if (action->state == HALO_HAL_ACTION_WAITING) {
    --action->pending_waits;
    if (--action->uncovered_waits == 0) halo_hal_action_issue(action);
  }
  halo_hal_deferred_queue_leave(queue);
}

void halo_hal_deferred_queue_complete(halo_hal_action_t *action,
                                      halo_status_t status) {
  halo_hal_deferred_queue_t *queue = action->deferred_queue;
  halo_hal_deferred_queue_enter(queue);
  action->completed_ns = halo_clock_now_ns();
  halo_status_free(action->failure);
  action->failure = status;
  halo_hal_action_on_outcome(action);
  halo_hal_deferred_queue_leave(queue);
}

void halo_hal_deferred_queue_post_completion(halo_hal_action_t *action,
                                             halo_status_t status) {
  halo_hal_action_on_complete(action, status);
}

void halo_hal_deferred_queue_cancel(halo_hal_action_t *action,
                                    halo_status_t status) {
  if (action->state != HALO_HAL_ACTION_WAITING) {
    halo_status_free(status);
    return;
  }
  halo_hal_deferred_queue_t *queue = action->deferred_queue;
  halo_hal_deferred_queue_enter(queue);
  halo_hal_action_fail(action, status);
  halo_hal_deferred_queue_leave(queue);
}

halo_hal_action_t *halo_hal_deferred_queue_waiter(
    const halo_hal_timepoint_t *timepoint) {
  if (timepoint->callback != halo_hal_action_on_wait) return NULL;
  return ((const halo_hal_action_wait_t *)timepoint)->action;
}

void halo_hal_deferred_queue_drain(halo_hal_deferred_queue_t *queue) {
  pthread_mutex_lock(&queue->mutex);
  halo_hal_action_t *action = queue->inbox_head;
  queue->inbox_head = queue->inbox_tail = NULL;
  pthread_mutex_unlock(&queue->mutex);
  while (action) {
    halo_hal_action_t *next = action->inbox_next;
    halo_hal_deferred_queue_enter(queue);
    halo_hal_action_on_outcome(action);
    halo_hal_deferred_queue_leave(queue);
    action = next;
  }
}
