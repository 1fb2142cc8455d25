// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Control calls to a trust domain's device worker, off the loop thread
// (docs/architecture.md "Device workers"). A control call (an allocation,
// a buffer's write or read, an entry lookup, a recording's preparation, a
// queue's creation) is a round trip to the worker process, which answers
// after whatever its device does first (a long kernel ahead of a
// synchronous copy), or not at all while it is stopped or hung (bounded:
// after 30 s it is killed as hung, hal/remote/remote_device.c). Made on the
// loop, it held every other session and domain for that long.
//
// So the loop does a request's bookkeeping before the call (checks, quotas,
// the references the call holds: its objects are not freed meanwhile) and
// after it (handles, the reply), and the call itself (|work|: the HAL calls
// on the device, nothing of the daemon's state) runs on a call thread. Each
// device has one call at a time (a worker answers its control calls in
// order anyway) and a FIFO of those waiting, so a slow or hung worker holds
// one thread, never libuv's pool that executable loads run on, and other
// devices' calls never wait behind it. Threads start as devices need them
// and end after a few idle seconds.
//
// A session has at most one call in flight (halod_session_t.call): its
// requests that arrive meanwhile wait, in order, and are served once the
// call's request was answered (daemon/requests.c), so that each sees what
// the ones before it did, as when the loop made the call itself.
//
// A device in halod itself (device-workers inline) is called on the loop,
// as before (its driver may keep per-thread state); the after step still
// runs from the loop, later.
//
// Loop thread only, except where it says otherwise.
#ifndef HALOD_DEVICE_CALL_H_
#define HALOD_DEVICE_CALL_H_

#include <stdbool.h>
#include <stdint.h>

#include "daemon/daemon.h"

typedef struct halod_device_call_t halod_device_call_t;

struct halod_device_call_t {
  // Set by the caller before halod_device_call_start.
  // The device it calls (held from the start until after |done|).
  halo_hal_device_t *device;
  // A call thread (the loop for a device in halod): the HAL calls on
  // |device|; reads and writes the call's own fields only.
  void (*work)(halod_device_call_t *call);
  // The loop, once |work| returned: the bookkeeping after the call and the
  // reply on |context| (NULL: halod's stop answered the request already;
  // only release). |session| is the request's, NULL if it ended meanwhile.
  // Frees the call.
  void (*done)(halod_t *daemon, halod_device_call_t *call,
               halod_session_t *session);
  // For messages: "a buffer write".
  const char *what;

  // Set by halod_device_call_start.
  uint64_t session_id;
  halod_server_context_t *context;
  int64_t started_ns;
  halod_device_call_t *next;  // in its device's FIFO, or handed back
  // halod stopped before its work ran, or the request was refused for
  // want of a place: |done| must not use its results
  // (halod_device_call_session_gone says so).
  bool cancelled;
  // The trust domain (base key) whose place the request holds while the
  // call waits; 0: none.
  uint64_t domain_key;
};

// Starts |call| for the request of |session| that |context| answers: the
// session's next requests wait until |done| ran. |session| NULL: a call of
// no request (a lost session's ring detach) that no request waits for.
// After halod's stop, |done| runs at once, cancelled. The request needs a
// place to wait: one of calls in all, of domain-calls of its trust domain,
// on a spare context (halod_server_hold) so that requests waiting on
// workers never hold the contexts others need. Without one the request is
// refused for now (RESOURCE_EXHAUSTED with retry_after_ms, which libhalo
// follows) and |done| runs, cancelled, to release what it held.
void halod_device_call_start(halod_t *daemon, halod_session_t *session,
                             halod_server_context_t *context,
                             halod_device_call_t *call);

// Replies on the call's context with |status| (consumed), or only frees it
// where the stop answered the request already.
void halod_device_call_reply_status(halod_device_call_t *call,
                                    halo_status_t status);
void halod_device_call_reply(halod_device_call_t *call,
                             const Halo__Wire__Response *response);

// Why the call's request cannot succeed any more although the call may
// have: its session ended (UNAVAILABLE) or was lost (SESSION_LOST with the
// reason) meanwhile, or halod stopped before it ran (UNAVAILABLE). NULL if
// none of them.
halo_status_t halod_device_call_session_gone(const halod_device_call_t *call,
                                             const halod_session_t *session);

// A host mapping's registration with the devices of a trust domain (a new
// semaphore page, a host arena: REGISTER_HOST, a control call to each
// worker), made by a call's work: halod_host_registration_run registers
// |pointer| (|size| bytes of memfd |fd|) with |devices| in order, up to the
// first failure (|status|); |addresses| of the |registered| first ones.
// Any thread; the devices are held by whoever fills it.
typedef struct halod_host_registration_t {
  void *pointer;
  uint64_t size;
  int fd;
  uint32_t count;
  halo_hal_device_t *devices[HALO_HAL_MAX_DEVICES];
  uint64_t addresses[HALO_HAL_MAX_DEVICES];
  uint32_t registered;
  halo_status_t status;
} halod_host_registration_t;
void halod_host_registration_run(halod_host_registration_t *registration);
// Undoes a registration never finished: unregisters |pointer| from the
// devices it was registered with, releases its devices, drops its status.
void halod_host_registration_undo(halod_host_registration_t *registration,
                                  void *pointer);
// Whether any of its devices is a worker's (else registering takes no
// control call: done on the loop).
bool halod_host_registration_remote(
    const halod_host_registration_t *registration);

// halod_start, before the sockets.
halo_status_t halod_device_calls_start(halod_t *daemon);
// halod_stop, before the sockets close: answers every request waiting for
// a call (a session's requests waiting behind one too) with UNAVAILABLE.
// Calls not started are dropped; those running get until |deadline_ns|
// (CLOCK_MONOTONIC), after which their workers are killed (the call ends
// with the link), and until the stop's deadline to return. A call still
// running then is left to the process exit.
void halod_device_calls_stop(halod_t *daemon, int64_t deadline_ns);
// halod_stop, at the end: the loop's handle closes; the threads end.
void halod_device_calls_close(halod_t *daemon);

// Calls started and not done yet (halo_worker_control_calls_waiting).
uint32_t halod_device_calls_waiting(const halod_t *daemon);
// Requests holding a place (halo_worker_requests_waiting).
uint32_t halod_device_calls_placed(const halod_t *daemon);

// A request of |session| on |context| that arrived while the session waits
// for a call: it waits too, on a place of its own (see
// halod_device_call_start): true; or it is refused for now, answered
// RESOURCE_EXHAUSTED with retry_after_ms naming calls or domain-calls:
// false. halod_device_call_unpark gives the place back once it is taken
// from the waiting (served, or answered as its session ends or halod
// stops).
bool halod_device_call_park(halod_t *daemon, halod_session_t *session,
                            halod_server_context_t *context);
void halod_device_call_unpark(halod_t *daemon, halod_session_t *session);

#endif  // HALOD_DEVICE_CALL_H_
