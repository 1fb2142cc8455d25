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
void halod_requests_on_event(void *user_data, halod_server_event_t *event);

#endif  // HALOD_REQUESTS_H_
