// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Queues in the daemon: a session's default queue per device (created with
// its first command buffer on the device, off the loop where the device is
// a worker's: daemon/command_buffer.c; else on first use) and the queues it
// creates. Each wraps a HAL queue (local: the
// worker pool; CUDA: streams) and keeps the numbers haloctl shows.
//
// Loop thread only.
#ifndef HALOD_QUEUE_H_
#define HALOD_QUEUE_H_

#include <stdint.h>

#include "common/list.h"
#include "daemon/daemon.h"
#include "daemon/stats.h"
#include "hal/queue.h"

typedef struct halod_queue_t {
  uint32_t refcount;  // handle or default slot + submissions
  uint64_t id;
  uint64_t session_id;
  uint64_t handle;  // 0 for a default queue
  uint32_t device;
  int32_t priority;
  halo_hal_queue_t *hal;
  // The device (of the session's trust domain) it runs on (held).
  halo_hal_device_t *hal_device;
  // Statistics.
  uint32_t waiting;
  uint32_t in_flight;
  // Executions a device worker took from a submission ring itself that
  // halod saw in the worker's flight table (halod_ring_workers_sync) and
  // whose completion did not reach it yet: submitted, not yet completed or
  // failed (each holds a reference on the queue).
  uint32_t ring_taken;
  // Of those, the ones running at the last halod_ring_workers_sync.
  uint32_t ring_in_flight;
  uint64_t completed;
  uint64_t failed;
  int64_t latency_ns_total;  // issue -> completion, completed ones
  halod_latency_t latency;   // the same, as a histogram
  // In its session's |queues| while |session_id| names a live session.
  halo_list_link_t session_link;
  // Every live queue (daemon->stats.queues), sessions ended or not.
  struct halod_queue_t *all_prev;
  struct halod_queue_t *all_next;
} halod_queue_t;

halo_status_t halod_queue_create(halod_t *daemon, halod_session_t *session,
                                 uint32_t device, int32_t priority,
                                 halod_queue_t **out_queue);
// The queue of |hal|, a queue |hal_device| (the session's device |device|)
// created by a control call off the loop (daemon/device_call.h): what
// halod_queue_create does once the device made it. Takes |hal| (destroyed
// on failure).
halo_status_t halod_queue_adopt(halod_t *daemon, halod_session_t *session,
                                uint32_t device, int32_t priority,
                                halo_hal_device_t *hal_device,
                                halo_hal_queue_t *hal,
                                halod_queue_t **out_queue);
void halod_queue_retain(halod_queue_t *queue);
// The last release adds the queue's totals to its session's and its
// device's (daemon->stats), then frees it.
void halod_queue_release(halod_t *daemon, halod_queue_t *queue);

// A submission on |queue| completed |ns| after it was issued.
void halod_queue_record_latency(halod_t *daemon, halod_queue_t *queue,
                                int64_t ns);

// Submissions ever accepted on |queue|: halod's, and the executions device
// workers took from submission rings themselves, each from when it was
// taken (seen by halod_ring_workers_sync, or reported) on.
uint64_t halod_queue_submitted(const halod_queue_t *queue);

// Executions on |queue| issued to its device and not completed: halod's,
// and those its device worker took from the ring itself as of the last
// halod_ring_workers_sync.
uint32_t halod_queue_in_flight(const halod_queue_t *queue);

// Executions issued to devices and not completed yet: halod's, on every
// live queue (halod_queue_t.in_flight), and those device workers took from
// submission rings themselves (halod_ring_workers_sync, which it runs
// first, so that the queues' counts are current too). Returns them all;
// |out_per_device| (HALO_HAL_MAX_DEVICES counts, or NULL) gets them by
// device. What haloctl status and drain report as in flight and the metric
// halo_in_flight_submissions exports.
uint32_t halod_work_in_flight(halod_t *daemon, uint32_t *out_per_device);

#endif  // HALOD_QUEUE_H_
