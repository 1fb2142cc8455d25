// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Round-robin lanes of client requests (daemon/request_lanes.h).
#include "daemon/request_lanes.h"

#include <stdlib.h>

#include "common/clock.h"

struct halod_request_lane_t {
  halod_request_lane_t *next;  // in the rotation
  uint64_t key;
  halod_server_event_t *head;
  halod_server_event_t *tail;
};

static void halod_request_lanes_append(halod_request_lanes_t *lanes,
                                       halod_request_lane_t *lane) {
  lane->next = NULL;
  if (lanes->tail) {
    lanes->tail->next = lane;
  } else {
    lanes->head = lane;
  }
  lanes->tail = lane;
}

// The lane of |key| with events waiting, NULL if none. There are at most as
// many as events waiting, which the server's contexts bound.
static halod_request_lane_t *halod_request_lanes_find(
    const halod_request_lanes_t *lanes, uint64_t key) {
  if (lanes->served && lanes->served->key == key) return lanes->served;
  for (halod_request_lane_t *lane = lanes->head; lane; lane = lane->next) {
    if (lane->key == key) return lane;
  }
  return NULL;
}

static void halod_request_lanes_on_idle(uv_idle_t *idle) {
  halod_request_lanes_t *lanes = idle->data;
  int64_t start = halo_clock_now_ns();
  do {
    halod_server_event_t *event = halod_request_lanes_pop(lanes);
    if (!event) break;
    lanes->serve(lanes->user_data, event);
  } while (lanes->started &&
           halo_clock_now_ns() - start < HALOD_REQUEST_LANES_SLICE_NS);
  if (lanes->started && lanes->events == 0) uv_idle_stop(&lanes->idle);
}

void halod_request_lanes_start(halod_request_lanes_t *lanes, uv_loop_t *loop,
                               halod_request_lanes_serve_fn serve,
                               void *user_data) {
  *lanes = (halod_request_lanes_t){.serve = serve, .user_data = user_data};
  if (!loop) return;
  uv_idle_init(loop, &lanes->idle);
  lanes->idle.data = lanes;
  lanes->started = true;
}

bool halod_request_lanes_push(halod_request_lanes_t *lanes, uint64_t key,
                              halod_server_event_t *event) {
  halod_request_lane_t *lane = halod_request_lanes_find(lanes, key);
  if (!lane) {
    lane = calloc(1, sizeof(*lane));
    if (!lane) return false;
    lane->key = key;
    halod_request_lanes_append(lanes, lane);
    ++lanes->lanes;
  }
  event->next = NULL;
  if (lane->tail) {
    lane->tail->next = event;
  } else {
    lane->head = event;
  }
  lane->tail = event;
  if (lanes->events++ == 0 && lanes->started) {
    uv_idle_start(&lanes->idle, halod_request_lanes_on_idle);
  }
  return true;
}

halod_server_event_t *halod_request_lanes_pop(halod_request_lanes_t *lanes) {
  if (lanes->served) {
    halod_request_lanes_append(lanes, lanes->served);
    lanes->served = NULL;
  }
  halod_request_lane_t *lane = lanes->head;
  if (!lane) return NULL;
  lanes->head = lane->next;
  if (!lanes->head) lanes->tail = NULL;
  halod_server_event_t *event = lane->head;
  lane->head = event->next;
  event->next = NULL;
  --lanes->events;
  if (lane->head) {
    lanes->served = lane;
  } else {
    free(lane);
    --lanes->lanes;
  }
  return event;
}

void halod_request_lanes_stop(halod_request_lanes_t *lanes) {
  if (!lanes->started) return;
  lanes->started = false;
  uv_idle_stop(&lanes->idle);
  uv_close((uv_handle_t *)&lanes->idle, NULL);
}
