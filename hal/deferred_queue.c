#include "hal/deferred_queue.h"

#include <stdlib.h>

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
}

void halo_hal_deferred_queue_deinitialize(halo_hal_deferred_queue_t *queue) {
  halo_hal_deferred_queue_drain(queue);
  pthread_mutex_destroy(&queue->mutex);
}

// Applies the outcome to the signal semaphores and hands the action back.
static void halo_hal_action_retire(halo_hal_action_t *action) {
  halo_hal_deferred_queue_t *queue = action->deferred_queue;
  if (action->state == HALO_HAL_ACTION_WAITING) {
    --queue->waiting;
  } else if (action->state == HALO_HAL_ACTION_ISSUED) {
    --queue->issued;
  }
  action->state = HALO_HAL_ACTION_RETIRED;
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

// Driver thread: the device finished the action.
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
  pthread_mutex_unlock(&queue->mutex);
  queue->wake(queue->wake_data);
}

static void halo_hal_action_issue(halo_hal_action_t *action) {
  halo_hal_deferred_queue_t *queue = action->deferred_queue;
  --queue->waiting;
  ++queue->issued;
  action->state = HALO_HAL_ACTION_ISSUED;
  action->issued_ns = halo_clock_now_ns();
  if (action->on_issue) action->on_issue(action);
  action->execution.completion = halo_hal_action_on_complete;
  action->execution.user_data = action;
  halo_status_t status =
      halo_hal_queue_execute(action->queue, &action->execution);
  if (status) {
    action->failure = halo_status_annotate(status, "starting the execution");
    halo_hal_action_retire(action);
  }
}

static void halo_hal_action_fail(halo_hal_action_t *action,
                                 halo_status_t status) {
  for (uint32_t i = 0; i < action->wait_count; ++i) {
    halo_hal_semaphore_remove_timepoint(action->waits[i].semaphore,
                                        &action->waits[i].timepoint);
  }
  halo_status_free(action->failure);
  action->failure = status;
  halo_hal_action_retire(action);
}

static void halo_hal_action_on_wait(halo_hal_timepoint_t *timepoint,
                                    halo_status_t status) {
  halo_hal_action_wait_t *wait = (halo_hal_action_wait_t *)timepoint;
  halo_hal_action_t *action = wait->action;
  if (action->state != HALO_HAL_ACTION_WAITING) {
    halo_status_free(status);
    return;
  }
  if (status) {
    halo_hal_action_fail(
        action,
        halo_status_annotate(status, "a wait of the submission failed"));
    return;
  }
  if (--action->pending_waits == 0) halo_hal_action_issue(action);
}

void halo_hal_deferred_queue_submit(halo_hal_deferred_queue_t *queue,
                                    halo_hal_action_t *action) {
  action->deferred_queue = queue;
  action->state = HALO_HAL_ACTION_WAITING;
  action->failure = NULL;
  ++queue->waiting;
  // One extra count held while registering, so a wait met during
  // registration cannot issue the action before all are registered.
  action->pending_waits = action->wait_count + 1;
  for (uint32_t i = 0; i < action->wait_count; ++i) {
    halo_hal_action_wait_t *wait = &action->waits[i];
    wait->action = action;
    wait->timepoint.callback = halo_hal_action_on_wait;
    halo_hal_semaphore_add_timepoint(wait->semaphore, &wait->timepoint);
    if (action->state != HALO_HAL_ACTION_WAITING) return;  // failed
  }
  if (--action->pending_waits == 0) halo_hal_action_issue(action);
}

void halo_hal_deferred_queue_cancel(halo_hal_action_t *action,
                                    halo_status_t status) {
  if (action->state != HALO_HAL_ACTION_WAITING) {
    halo_status_free(status);
    return;
  }
  halo_hal_action_fail(action, status);
}

void halo_hal_deferred_queue_drain(halo_hal_deferred_queue_t *queue) {
  pthread_mutex_lock(&queue->mutex);
  halo_hal_action_t *action = queue->inbox_head;
  queue->inbox_head = queue->inbox_tail = NULL;
  pthread_mutex_unlock(&queue->mutex);
  while (action) {
    halo_hal_action_t *next = action->inbox_next;
    halo_hal_action_retire(action);
    action = next;
  }
}
