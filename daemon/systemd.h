// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// systemd glue: Type=notify readiness, a STATUS= line kept current, the
// watchdog. No-ops when halod is not run by systemd (no $NOTIFY_SOCKET) or
// was built without libsystemd.
//
// Loop thread only.
#ifndef HALOD_SYSTEMD_H_
#define HALOD_SYSTEMD_H_

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

// Writes the one-line summary STATUS= carries.
typedef void (*halod_systemd_summary_fn)(void *user_data, char *out_text,
                                         size_t capacity);

typedef struct halod_systemd_t {
  uv_timer_t watchdog;
  bool watchdog_active;
  uv_timer_t status;
  bool status_active;
  halod_systemd_summary_fn summary;
  void *summary_data;
  char last_status[256];
} halod_systemd_t;

// How often STATUS= is refreshed (only sent when it changed).
#define HALOD_SYSTEMD_STATUS_INTERVAL_MS 2000

// READY=1 (both sockets listen) with STATUS=<summary>; starts watchdog
// pings at half of $WATCHDOG_USEC if systemd asked for them (from this, the
// loop thread, so a stuck loop stops them), and refreshes STATUS=.
void halod_systemd_ready(halod_systemd_t *systemd, uv_loop_t *loop,
                         halod_systemd_summary_fn summary, void *summary_data);
// STATUS=<text> at once.
void halod_systemd_status(const char *status);
// STOPPING=1 and stops the timers.
void halod_systemd_stopping(halod_systemd_t *systemd);
// RELOADING=1 ... READY=1 around a reload.
void halod_systemd_reloading(int done);

#endif  // HALOD_SYSTEMD_H_
