// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Submission rings drained by device workers (docs/architecture.md "Rings
// in the worker"; the messages in hal/remote/remote_link.h "rings"): the
// supervisor's side of what it granted to workers and what they report.
//
// A session's ring is handed to the worker of the first device its ring
// executions ran on (daemon/ring.c). From then on the worker takes the
// EXECUTE records whose handles it was granted and that pass every check
// itself; it bounces anything else to the supervisor, which processes that
// record as before, grants what an accepted execute used and resumes the
// worker. A grant holds the supervisor's reference on its object (queue,
// command buffer, buffer, semaphore) until the worker releases it, so no
// object a worker execution uses goes away under it. The worker reports
// each execution's completion; the supervisor then signals (or fails) its
// semaphores, so host waiters in the deferred queue and other domains see
// it, and counts it on its queue.
//
// Loop thread, except halod_ring_workers_on_message (a proxy's reader).
#ifndef HALOD_RING_WORKER_H_
#define HALOD_RING_WORKER_H_

#include <stdbool.h>
#include <stdint.h>

#include "daemon/daemon.h"
#include "daemon/operation.h"

typedef struct halod_ring_workers_t halod_ring_workers_t;

halo_status_t halod_ring_workers_start(halod_t *daemon);
// Releases every grant left (workers are gone or going).
void halod_ring_workers_stop(halod_t *daemon);

// halo_hal_remote_options_t.ring (a proxy's reader thread): queues the
// message for the loop.
void halod_ring_workers_on_message(void *user_data, halo_hal_device_t *device,
                                   uint32_t type, void *payload,
                                   uint64_t length);

// Grants |worker| what the accepted |op| of |session| used there: its
// queue, command buffer (REUSABLE only), bound buffers and semaphores (those
// whose page the worker has). Handles granted already are skipped
// (|granted|: handle -> grant, the ring's).
void halod_ring_workers_grant(halod_t *daemon, halod_session_t *session,
                              halo_hal_device_t *worker,
                              halo_u64_map_t *granted,
                              const halod_op_execute_t *op);

// |handle| left the session's table: if |granted| has it, the worker is
// told to forget it.
void halod_ring_workers_revoke(halo_hal_device_t *worker,
                               halo_u64_map_t *granted, uint64_t session,
                               uint64_t handle, uint32_t type);

// Revokes everything in |granted| (and empties it).
void halod_ring_workers_revoke_all(halo_hal_device_t *worker,
                                   halo_u64_map_t *granted, uint64_t session);

// A worker was lost (|reason|: its end): the ring executions it had in
// flight are named in |text| ("" if none), those past the deadline fail
// their signals with DEADLINE_EXCEEDED, and its grants are released.
// Returns how many executions there were. (Their processes are charged by
// daemon/workers.c, with halod's own.)
uint32_t halod_ring_workers_on_lost(halod_t *daemon, halo_hal_device_t *device,
                                    const char *reason, char *text,
                                    size_t size);

// Whether |worker| holds grants (objects it may still use, or that go to
// the caches once it releases them).
bool halod_ring_workers_hold(const halod_t *daemon,
                             const halo_hal_device_t *worker);

// Executions workers took from rings and have in flight now (the flight
// tables of the workers that hold grants, whether or not their domains
// still exist), in all; |out_per_device| (HALO_HAL_MAX_DEVICES counts, or
// NULL) gets them by device. On the way it brings the
// queues' counts of ring executions up to date (daemon/queue.h): an
// execution in a worker's flight table not seen before counts on its queue
// as submitted (halod_queue_t.ring_taken) until its completion reaches
// halod, or its worker is lost; one running counts in
// halod_queue_t.ring_in_flight (recounted on each call). haloctl status,
// clients, queues, drain and the metrics call it first
// (halod_work_in_flight), so that an execution counts as submitted when
// taken and in flight until completed, whichever consumer took it; halod's
// stop counts them with halod's.
uint32_t halod_ring_workers_sync(halod_t *daemon, uint32_t *out_per_device);

// Executions workers took from rings, since start (haloctl, metrics).
uint64_t halod_ring_workers_executions(const halod_t *daemon);

#endif  // HALOD_RING_WORKER_H_
