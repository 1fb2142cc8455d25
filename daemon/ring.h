// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The daemon's end of the sessions' submission rings (layout and protocol
// in common/ring.h, design in docs/architecture.md "Submission ring"). A
// ring is created when its session asks for it over the fd channel; its
// doorbell eventfd is watched by the loop (uv_poll). Rings with work are
// drained round-robin, a bounded number of records each per loop
// iteration, and polled for the configured window (ring-poll-us) after
// their last record before they ask for the doorbell again: an idle daemon
// sleeps in epoll.
//
// A ring has the capacity configured (ring-bytes) when it is created and a
// random checksum key. Every record is copied out, its checksum verified on
// the copy (a mismatch rejects it with DATA_LOSS: it changed after libhalo
// wrote it), then validated through the same functions as the socket's
// requests: as operations (daemon/operation.h). A rejected asynchronous
// queue_execute or queue_dealloca fails its signal semaphores with the reason
// (the dealloca still drops its buffer's handle), a synchronous record's
// verdict goes to the header, and an accepted queue_alloca (always synchronous)
// leaves the new buffer in the header's |alloca_result|; a framing error (a
// tail out of bounds, a record of impossible length or out of sequence) breaks
// the ring: it is read no more and the semaphores the session created fail with
// the reason. Other sessions never notice.
//
// Loop thread only.
#ifndef HALOD_RING_H_
#define HALOD_RING_H_

#include <stdint.h>

#include "daemon/daemon.h"

typedef struct halod_ring_t halod_ring_t;

// Raises RLIMIT_NOFILE to its hard limit (each session holds a socket, an
// fd channel connection and a doorbell) and prepares the drain loop.
halo_status_t halod_rings_start(halod_t *daemon);
void halod_rings_stop(halod_t *daemon);

// Creates |session|'s ring (once) and returns its memfd, which the caller
// sends and then closes with halod_ring_memfd_sent. FAILED_PRECONDITION if
// the session has one already.
halo_status_t halod_ring_create(halod_t *daemon, halod_session_t *session,
                                int *out_memfd, uint64_t *out_size);
// The session's doorbell eventfd (owned by the ring; -1 if no ring).
int halod_ring_doorbell(const halod_session_t *session);
// The worker draining |session|'s ring bounced the record at |head|
// (|sequence|): processes it as halod always did, grants what an accepted
// execute used and resumes the worker after it.
void halod_ring_take_bounced(halod_t *daemon, halod_session_t *session,
                             halo_hal_device_t *worker, uint64_t head,
                             uint64_t sequence);
// The worker |worker| could not take |session|'s ring (RING_REFUSED):
// halod drains it again, from where it handed it over.
void halod_ring_take_back(halod_session_t *session, halo_hal_device_t *worker);
// |handle| (of halod_object_type_t |type|) left |session|'s table: the
// worker draining its ring forgets it.
void halod_ring_revoke(halod_session_t *session, uint64_t handle,
                       uint32_t type);
// Revokes every grant the worker draining |session|'s ring holds (drain:
// it then hands every record to halod).
void halod_ring_revoke_all(halod_session_t *session);
// Stops reading the ring and frees it (session end).
void halod_ring_destroy(halod_t *daemon, halod_session_t *session);

// The session is lost (halod_session_lose): the records it published that
// its consumer (halod, or a device worker) never took are read and refused
// with |code| and |reason| (an asynchronous execute's or dealloca's
// signals fail, as its waiting work's do), and the ring ends. Only those
// published by then, at most a ring's worth: a client that goes on writing
// its ring does not keep halod reading it. Where the
// worker draining it lives (a session of several devices, lost with
// another device's worker), it is asked where it stopped first: a control
// call off the loop (daemon/device_call.h), after which the records are
// refused (with DEVICE_LOST and the session's lost reason) and the ring
// ends; meanwhile it takes no bounce. A session that ends before the
// answer drops them with its ring.
void halod_ring_lose(halod_t *daemon, halod_session_t *session,
                     halo_status_code_t code, const char *reason);

#endif  // HALOD_RING_H_
