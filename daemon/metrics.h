// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Prometheus metrics: the text exposition format (0.0.4) that `haloctl
// metrics` prints and the OpenMetrics 1.0 text that /metrics may serve
// (daemon/metrics_http.h), and a writer that puts the Prometheus text into
// a node-exporter textfile-collector file every metrics-interval seconds
// (written beside it, then renamed, so the collector never reads half a
// file; removed when halod stops).
//
// Labels are bounded: per device, never per session or process
// (per-session detail is haloctl's: clients, queues; per worker, haloctl
// workers): the device workers' usage is summed up per device.
//
// Loop thread only.
#ifndef HALOD_METRICS_H_
#define HALOD_METRICS_H_

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct halod_t halod_t;

typedef enum halod_metrics_format_e {
  HALOD_METRICS_PROMETHEUS,   // text/plain; version=0.0.4
  HALOD_METRICS_OPENMETRICS,  // application/openmetrics-text; version=1.0.0
} halod_metrics_format_t;

typedef struct halod_metrics_t {
  uv_timer_t timer;
  bool timer_active;  // initialized (closed by halod_metrics_stop)
  uint64_t interval_ms;
  bool failing;       // the last write failed (logged once until one succeeds)
  char written[512];  // the textfile written last; "" for none
  // Unix time halod started (halo_start_time_seconds), worked out once at
  // the first render: the same in every scrape. 0 until then.
  double start_time_seconds;
} halod_metrics_t;

// Every metric of |daemon| as exposition text in |format|; the caller
// frees it. NULL when out of memory.
char *halod_metrics_render(halod_t *daemon, halod_metrics_format_t format);

// Starts (or, after a reload, restarts or stops) the textfile writer as the
// metrics-textfile and metrics-interval settings say; writes once at once.
void halod_metrics_configure(halod_t *daemon);
// Stops the writer and removes the file it wrote (a stopped halod has no
// metrics; node-exporter would report a stale file's values as current).
void halod_metrics_stop(halod_t *daemon);

// Writes the metrics to metrics-textfile now. False (and the reason in
// the log, once until a write succeeds) if it could not.
bool halod_metrics_write_textfile(halod_t *daemon);

#endif  // HALOD_METRICS_H_
