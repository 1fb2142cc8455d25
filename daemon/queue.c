// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/queue.h"

#include <stdlib.h>

#include "common/status.h"
#include "daemon/ring_worker.h"
#include "daemon/session.h"
#include "daemon/workers.h"

halo_status_t halod_queue_adopt(halod_t *daemon, halod_session_t *session,
                                uint32_t device, int32_t priority,
                                halo_hal_device_t *hal_device,
                                halo_hal_queue_t *hal,
                                halod_queue_t **out_queue) {
  *out_queue = NULL;
  halod_queue_t *queue = calloc(1, sizeof(*queue));
  if (!queue) {
    halo_hal_queue_destroy(hal);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  queue->hal = hal;
  queue->refcount = 1;
  queue->id = halod_next_id(daemon);
  queue->session_id = session->id;
  queue->device = device;
  halod_device_retain(hal_device);
  queue->hal_device = hal_device;
  queue->priority = priority;
  halo_list_push_front(&session->queues, &queue->session_link);
  queue->all_next = daemon->stats.queues;
  if (queue->all_next) queue->all_next->all_prev = queue;
  daemon->stats.queues = queue;
  *out_queue = queue;
  return NULL;
}

halo_status_t halod_queue_create(halod_t *daemon, halod_session_t *session,
                                 uint32_t device, int32_t priority,
                                 halod_queue_t **out_queue) {
  *out_queue = NULL;
  halo_hal_device_t *hal_device = NULL;
  HALO_RETURN_IF_ERROR(
      halod_domain_device(daemon, session->domain, device, &hal_device));
  halo_hal_queue_t *hal = NULL;
  halo_status_t status =
      hal_device->vtable->create_queue(hal_device, priority, &hal);
  if (status) {
    return halo_status_annotate(status, "creating a queue on device %u",
                                device);
  }
  return halod_queue_adopt(daemon, session, device, priority, hal_device, hal,
                           out_queue);
}

void halod_queue_retain(halod_queue_t *queue) {
  ++queue->refcount;
}

void halod_queue_release(halod_t *daemon, halod_queue_t *queue) {
  if (--queue->refcount > 0) return;
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions.by_id, queue->session_id);
  if (session) {
    halo_list_remove(&session->queues, &queue->session_link);
    session->retired_submitted += halod_queue_submitted(queue);
    session->retired_completed += queue->completed;
    session->retired_failed += queue->failed;
  }
  halod_device_stats_t *device = &daemon->stats.devices[queue->device];
  device->retired_submitted += halod_queue_submitted(queue);
  device->retired_completed += queue->completed;
  device->retired_failed += queue->failed;
  if (queue->all_prev) {
    queue->all_prev->all_next = queue->all_next;
  } else {
    daemon->stats.queues = queue->all_next;
  }
  if (queue->all_next) queue->all_next->all_prev = queue->all_prev;
  // Every submission holds a reference, so nothing runs on it any more.
  halo_hal_queue_destroy(queue->hal);
  halod_device_release(queue->hal_device);
  free(queue);
}

void halod_queue_record_latency(halod_t *daemon, halod_queue_t *queue,
                                int64_t ns) {
  queue->latency_ns_total += ns;
  halod_latency_record(&queue->latency, ns);
  halod_latency_record(&daemon->stats.devices[queue->device].latency, ns);
}

uint64_t halod_queue_submitted(const halod_queue_t *queue) {
  return queue->completed + queue->failed + queue->waiting + queue->in_flight +
         queue->ring_taken;
}

uint32_t halod_queue_in_flight(const halod_queue_t *queue) {
  return queue->in_flight + queue->ring_in_flight;
}

uint32_t halod_work_in_flight(halod_t *daemon, uint32_t *out_per_device) {
  uint32_t total = halod_ring_workers_sync(daemon, out_per_device);
  for (const halod_queue_t *queue = daemon->stats.queues; queue;
       queue = queue->all_next) {
    total += queue->in_flight;
    if (out_per_device) out_per_device[queue->device] += queue->in_flight;
  }
  return total;
}
