// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The HTTP /metrics endpoint (metrics-address): libmicrohttpd serves GET
// /metrics on its own thread, in the Prometheus text format (0.0.4) or, when
// the Accept header asks for it, OpenMetrics 1.0 text (ending "# EOF").
//
// Threads: the daemon's state belongs to the loop, so a scrape does not
// read it. The HTTP thread asks the loop for a snapshot (uv_async_send),
// the loop renders the text (daemon/metrics.h) and publishes it under a
// mutex, and the HTTP thread serves a copy. A loop that does not answer
// within 1 s (blocked: a control call waits up to 30 s for a hung worker)
// gets the scrape the last snapshot it rendered, so Prometheus keeps its
// series while something is wrong. Every response starts with the gauge
// halo_metrics_snapshot_age_seconds, the seconds since the loop rendered
// the snapshot served (about 0 when it answered the scrape), for alerting.
// Start renders the first snapshot, so there always is one to serve. Start
// and stop run on the loop thread.
//
// Slow or many clients: one client address holds at most 8 of the 64
// connections served at once, and a connection that has not completed a
// request 5 s after its accept or its last request is closed (a thread of
// its own watches the deadlines), so a client trickling its request cannot
// keep a scraper of another address out (docs/security.md).
#ifndef HALOD_METRICS_HTTP_H_
#define HALOD_METRICS_HTTP_H_

#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "halo/status.h"

typedef struct halod_t halod_t;
typedef struct halod_metrics_http_t halod_metrics_http_t;

// Parses metrics-address: "HOST:PORT", HOST an IPv4 address or an IPv6
// address in brackets ("[::1]:9400"), PORT 0..65535 (0: a free port, which
// the log names). The error says what is wrong with |text| (the caller
// names the setting).
halo_status_t halod_metrics_http_parse_address(const char *text,
                                               struct sockaddr_storage *out,
                                               socklen_t *out_length);

// Listens on |address| (metrics-address, not "") and serves |daemon|'s
// metrics. Loop thread.
halo_status_t halod_metrics_http_start(halod_t *daemon, uv_loop_t *loop,
                                       const char *address,
                                       halod_metrics_http_t **out_http);

// Stops serving (a scrape waiting for the loop gets a 503), waits for the
// HTTP thread to end and frees |http| once the loop closed its handle.
// Loop thread; NULL is fine.
void halod_metrics_http_stop(halod_metrics_http_t *http);

#endif  // HALOD_METRICS_HTTP_H_
