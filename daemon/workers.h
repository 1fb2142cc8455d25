// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Device workers (docs/architecture.md "Device workers"): with
// device-workers=process (the default) halod is a supervisor and each
// (device, trust domain) is served by a `halod --worker` process that owns
// the device context (hal/remote/). A trust domain's devices start with its
// first session; when a worker dies (a sticky CUDA error, a native kernel's
// crash, SIGKILL, OOM, the submission deadline), the supervisor:
//   1. fails the signals of the submissions that were in flight on it with
//      DEVICE_LOST (DEADLINE_EXCEEDED for the one past the deadline),
//      naming the device, the domain and each submission (session, pid,
//      command buffer);
//   2. loses every session of the domain: their semaphores fail with
//      DEVICE_LOST, their objects are released, and every later request
//      gets SESSION_LOST with the reason (a client reconnects and rebuilds);
//   3. starts a fresh worker when the domain's next session connects.
// Other domains never notice. With device-workers=inline, devices live in
// halod as before (daemon/device_lost.c: a fault ends halod).
//
// Loop thread, except where a function says otherwise.
#ifndef HALOD_WORKERS_H_
#define HALOD_WORKERS_H_

#include <stdbool.h>
#include <stdint.h>

#include "daemon/daemon.h"

// Most spare workers per device (worker-spares).
#define HALOD_WORKER_SPARES_MAX 4

// Creates the devices (inline) or probes them with one worker per device
// (process): fills daemon->hal's drivers and device count and the infos.
halo_status_t halod_workers_start(halod_t *daemon);
// After every session went: waits for the workers to exit (bounded).
void halod_workers_stop(halod_t *daemon);

// After the loop ended: waits until every worker was reaped, at most until
// |deadline_ns| (CLOCK_MONOTONIC; a worker left then dies with halod:
// PR_SET_PDEATHSIG). Any thread.
void halod_workers_wait(int64_t deadline_ns);

// Whether device work runs in worker processes.
bool halod_workers_enabled(const halod_t *daemon);

// The info of device |index| (< daemon->hal.device_count).
const halo_hal_device_info_t *halod_device_info(const halod_t *daemon,
                                                uint32_t index);

// The domain's device |index|, its worker started if need be (blocks until
// the worker is ready). UNAVAILABLE with the worker's reason if it cannot.
halo_status_t halod_domain_device(halod_t *daemon, halod_domain_t *domain,
                                  uint32_t index,
                                  halo_hal_device_t **out_device);
// Starts every device of |domain| that has no worker (a new domain, or one
// whose worker was lost).
halo_status_t halod_domain_start_devices(halod_t *daemon,
                                         halod_domain_t *domain);
// Releases the domain's devices (its last session ended).
void halod_domain_stop_devices(halod_t *daemon, halod_domain_t *domain);

// References on a device for objects that outlive their session (pages,
// arenas, buffers): a worker's proxy stays until the last goes. No-ops for
// inline devices (the registry owns them).
void halod_device_retain(halo_hal_device_t *device);
void halod_device_release(halo_hal_device_t *device);

// What haloctl workers shows of one worker (valid during the visit).
typedef struct halod_worker_view_t {
  uint32_t device;
  const char *domain;      // "uid:1000", "pid:42"; "" for a spare
  int32_t pid;             // 0: none running (lost, not yet replaced)
  const char *state;       // "serving" | "spare" | "starting" | "lost"
  uint32_t sessions;       // of its domain
  uint32_t started;        // workers the domain has started on this device
  uint32_t faults;         // workers the domain has lost on this device
  const char *last_fault;  // "" for none
  // The worker's last usage report (hal/device.h; a CUDA worker's graph
  // memory and cuda-graph-bytes), if it made one.
  bool usage_known;
  halo_hal_device_usage_t usage;
} halod_worker_view_t;

// Visits every worker: each domain's per device (a domain whose worker was
// lost shows "lost" until its next session starts one) and the spares.
// Nothing with device-workers inline.
void halod_workers_visit(halod_t *daemon,
                         void (*visit)(void *user_data,
                                       const halod_worker_view_t *view),
                         void *user_data);

#endif  // HALOD_WORKERS_H_
