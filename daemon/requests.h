// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The client socket's requests (protobuf over nng): each body is decoded by
// its handler in a table indexed by body number; queue operations become
// the transport-neutral operations of daemon/operation.h, which the
// submission ring (daemon/ring.h) produces too. Loop thread only.
#ifndef HALOD_REQUESTS_H_
#define HALOD_REQUESTS_H_

#include "daemon/daemon.h"
#include "daemon/server.h"

// The client server's event handler (daemon/server.h): pipes become
// sessions, requests are decoded, dispatched and answered.
// Requests, and a connection's end behind its requests, wait in their
// trust domain's lane (daemon/request_lanes.h) and are served from there.
void halod_requests_on_event(void *user_data, halod_server_event_t *event);

// Serving from the lanes starts (before the client socket's first event).
void halod_requests_start(halod_t *daemon);
// After halod_server_stop: requests still waiting in lanes are answered
// UNAVAILABLE (HALOD_STOPPING_MESSAGE), sessions whose connection ended
// end, and the lanes serve no more.
void halod_requests_stop(halod_t *daemon);

// A session's requests that arrived while one of its requests waited for a
// device worker's control call (daemon/device_call.h) wait in order:
// halod_requests_resume serves them once that one was answered (until one
// of them waits for a call again); halod_requests_refuse_waiting answers
// them with |code| and |message| instead (the session ends, halod stops).
// Each waits on a place of its own (halod_device_call_park), or is refused
// for now.
void halod_requests_resume(halod_t *daemon, halod_session_t *session);
void halod_requests_refuse_waiting(halod_t *daemon, halod_session_t *session,
                                   halo_status_code_t code,
                                   const char *message);

#endif  // HALOD_REQUESTS_H_
