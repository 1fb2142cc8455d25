#include "daemon/queue.h"

#include <stdlib.h>

#include "common/status.h"
#include "daemon/session.h"

halo_status_t halod_queue_create(halod_t *daemon, halod_session_t *session,
                                 uint32_t device, int32_t priority,
                                 halod_queue_t **out_queue) {
  *out_queue = NULL;
  if (device >= daemon->hal.device_count) {
    return halo_status_make(HALO_STATUS_OUT_OF_RANGE,
                            "device %u does not exist (the daemon has %u)",
                            device, daemon->hal.device_count);
  }
  halod_queue_t *queue = calloc(1, sizeof(*queue));
  if (!queue) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  halo_hal_device_t *hal_device = daemon->hal.devices[device];
  halo_status_t status =
      hal_device->vtable->create_queue(hal_device, priority, &queue->hal);
  if (status) {
    free(queue);
    return halo_status_annotate(status, "creating a queue on device %u",
                                device);
  }
  queue->refcount = 1;
  queue->id = halod_next_id(daemon);
  queue->session_id = session->id;
  queue->device = device;
  queue->priority = priority;
  queue->session_next = session->queues;
  session->queues = queue;
  *out_queue = queue;
  return NULL;
}

void halod_queue_retain(halod_queue_t *queue) {
  ++queue->refcount;
}

void halod_queue_release(halod_t *daemon, halod_queue_t *queue) {
  if (--queue->refcount > 0) return;
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions_by_id, queue->session_id);
  if (session) {
    halod_queue_t **link = &session->queues;
    while (*link && *link != queue) link = &(*link)->session_next;
    if (*link) *link = queue->session_next;
  }
  // Every submission holds a reference, so nothing runs on it any more.
  halo_hal_queue_destroy(queue->hal);
  free(queue);
}
