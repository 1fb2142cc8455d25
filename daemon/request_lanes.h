// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The order in which halod's loop serves client requests: one lane (a FIFO
// of server events) per trust domain, served round-robin, in slices.
//
// One request can hold the loop for a tenth of a second and more (a
// recording of 20,000 dispatches of 14 arguments, the most a 4 MiB request
// carries from libhalo, decodes and validates in about 0.15 s on a 2-CPU
// VM), and served first come, first served a domain that keeps 12 such
// requests queued made every other domain's ping wait behind all of them
// (p50 1.5 s). With lanes a request waits for at most the request being
// served and one request of each other domain that has some waiting.
//
// A domain's requests stay in the order they arrived: a session's lane is
// fixed when the session starts (halod_session_t.lane_key). The lanes are
// served one request at a time in turn, for at most
// HALOD_REQUEST_LANES_SLICE_NS at once; then the loop looks at its sockets,
// rings and timers (a libuv idle handle keeps its poll from sleeping) and
// goes on, so a request that arrives meanwhile joins the rotation ahead of
// the lane just served. Loop thread only.
#ifndef HALOD_REQUEST_LANES_H_
#define HALOD_REQUEST_LANES_H_

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/server.h"

// How long one turn of the loop serves requests before it looks at its
// sockets again (at least one request is served each turn).
#define HALOD_REQUEST_LANES_SLICE_NS 1000000

typedef struct halod_request_lane_t halod_request_lane_t;

// Serves (and frees) |event|, taken from its lane.
typedef void (*halod_request_lanes_serve_fn)(void *user_data,
                                             halod_server_event_t *event);

typedef struct halod_request_lanes_t {
  // The lanes with events waiting, in the order they are served next.
  halod_request_lane_t *head;
  halod_request_lane_t *tail;
  // The lane served last, if it has more: it rejoins the rotation behind
  // every lane that got an event before the next is taken.
  halod_request_lane_t *served;
  uint32_t events;  // waiting, in all lanes
  uint32_t lanes;   // with events waiting
  uv_idle_t idle;
  bool started;
  halod_request_lanes_serve_fn serve;
  void *user_data;
} halod_request_lanes_t;

// Ready to queue and take events (halod_request_lanes_push, _pop) without a
// loop; |loop| (NULL: none) serves them with |serve| from then on.
void halod_request_lanes_start(halod_request_lanes_t *lanes, uv_loop_t *loop,
                               halod_request_lanes_serve_fn serve,
                               void *user_data);
// Queues |event| (|event|->next is the lane's from now on) last in |key|'s
// lane, and has the loop serve it. False, with nothing queued, where a new
// lane could not be allocated: the caller serves |event| itself (no event
// of |key| is waiting then, so the order holds).
bool halod_request_lanes_push(halod_request_lanes_t *lanes, uint64_t key,
                              halod_server_event_t *event);
// The next event to serve, in turn (NULL: none waits); the caller's.
halod_server_event_t *halod_request_lanes_pop(halod_request_lanes_t *lanes);
// Stops serving (events still waiting stay for halod_request_lanes_pop) and
// closes the loop's handle.
void halod_request_lanes_stop(halod_request_lanes_t *lanes);

#endif  // HALOD_REQUEST_LANES_H_
