// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Local queues: a priority and a count of executions in flight over the
// device's worker pool. Queues are unordered, so executions of one queue
// run concurrently; each execution runs on one worker, which calls its
// completion exactly once.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "hal/local/local_device.h"

typedef struct halo_hal_local_queue_t {
  halo_hal_queue_t base;
  halo_hal_local_worker_pool_t *pool;
  int32_t priority;
  pthread_mutex_t mutex;
  pthread_cond_t idle;  // in_flight reached 0
  uint32_t in_flight;
} halo_hal_local_queue_t;

typedef struct halo_hal_local_execution_t {
  halo_hal_local_task_t task;  // first: the pool hands this back
  halo_hal_local_queue_t *queue;
  halo_hal_execution_t execution;
} halo_hal_local_execution_t;

static void halo_hal_local_execution_run(halo_hal_local_task_t *task,
                                         halo_hal_local_worker_t *worker) {
  halo_hal_local_execution_t *execution = (halo_hal_local_execution_t *)task;
  halo_hal_local_queue_t *queue = execution->queue;
  halo_status_t status = halo_hal_local_command_buffer_run(
      &execution->execution, queue->priority, worker);
  execution->execution.completion(execution->execution.user_data, status);
  free(execution);
  // Last: once in_flight drops, destroy may free the queue.
  pthread_mutex_lock(&queue->mutex);
  if (--queue->in_flight == 0) pthread_cond_broadcast(&queue->idle);
  pthread_mutex_unlock(&queue->mutex);
}

static halo_status_t halo_hal_local_queue_execute(
    halo_hal_queue_t *base_queue, const halo_hal_execution_t *execution) {
  halo_hal_local_queue_t *queue = (halo_hal_local_queue_t *)base_queue;
  if (!halo_hal_local_command_buffer_isa(execution->command_buffer)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "local queue: the command buffer was not "
                            "prepared by the local driver");
  }
  if (!execution->completion) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "local queue: execution without a completion");
  }
  // Fewer bindings than the capacity: the missing slots read as unbound.
  halo_hal_local_execution_t *local = calloc(1, sizeof(*local));
  if (!local) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "local queue: oom for an execution");
  }
  local->task.run = halo_hal_local_execution_run;
  local->task.priority = queue->priority;
  local->queue = queue;
  local->execution = *execution;
  pthread_mutex_lock(&queue->mutex);
  ++queue->in_flight;
  pthread_mutex_unlock(&queue->mutex);
  halo_status_t status =
      halo_hal_local_worker_pool_submit(queue->pool, &local->task);
  if (status) {
    free(local);
    pthread_mutex_lock(&queue->mutex);
    if (--queue->in_flight == 0) pthread_cond_broadcast(&queue->idle);
    pthread_mutex_unlock(&queue->mutex);
    return status;
  }
  return NULL;
}

static void halo_hal_local_queue_destroy(halo_hal_queue_t *base_queue) {
  halo_hal_local_queue_t *queue = (halo_hal_local_queue_t *)base_queue;
  pthread_mutex_lock(&queue->mutex);
  while (queue->in_flight) pthread_cond_wait(&queue->idle, &queue->mutex);
  pthread_mutex_unlock(&queue->mutex);
  pthread_cond_destroy(&queue->idle);
  pthread_mutex_destroy(&queue->mutex);
  free(queue);
}

static const halo_hal_queue_vtable_t halo_hal_local_queue_vtable = {
    .destroy = halo_hal_local_queue_destroy,
    .execute = halo_hal_local_queue_execute,
};

halo_status_t halo_hal_local_queue_create(halo_hal_local_worker_pool_t *pool,
                                          int32_t priority,
                                          halo_hal_queue_t **out_queue) {
  *out_queue = NULL;
  halo_hal_local_queue_t *queue = calloc(1, sizeof(*queue));
  if (!queue) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  queue->base.vtable = &halo_hal_local_queue_vtable;
  queue->pool = pool;
  queue->priority = priority;
  pthread_mutex_init(&queue->mutex, NULL);
  pthread_cond_init(&queue->idle, NULL);
  *out_queue = &queue->base;
  return NULL;
}
