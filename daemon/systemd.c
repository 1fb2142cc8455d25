// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/systemd.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#ifdef HALO_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

static void halod_systemd_on_watchdog(uv_timer_t *timer) {
  (void)timer;
  sd_notify(0, "WATCHDOG=1");
}

static void halod_systemd_refresh_status(halod_systemd_t *systemd) {
  char text[sizeof(systemd->last_status)];
  systemd->summary(systemd->summary_data, text, sizeof(text));
  if (strcmp(text, systemd->last_status) == 0) return;
  memcpy(systemd->last_status, text, sizeof(text));
  sd_notifyf(0, "STATUS=%s", text);
}

static void halod_systemd_on_status(uv_timer_t *timer) {
  halod_systemd_refresh_status(timer->data);
}

void halod_systemd_ready(halod_systemd_t *systemd, uv_loop_t *loop,
                         halod_systemd_summary_fn summary, void *summary_data) {
  systemd->summary = summary;
  systemd->summary_data = summary_data;
  summary(summary_data, systemd->last_status, sizeof(systemd->last_status));
  sd_notifyf(0, "READY=1\nSTATUS=%s", systemd->last_status);
  const char *notify_socket = getenv("NOTIFY_SOCKET");
  if (!notify_socket || !*notify_socket) return;
  uv_timer_init(loop, &systemd->status);
  systemd->status.data = systemd;
  uv_timer_start(&systemd->status, halod_systemd_on_status,
                 HALOD_SYSTEMD_STATUS_INTERVAL_MS,
                 HALOD_SYSTEMD_STATUS_INTERVAL_MS);
  systemd->status_active = true;
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    uv_timer_init(loop, &systemd->watchdog);
    uint64_t interval_ms = usec / 2000;
    if (interval_ms == 0) interval_ms = 1;
    uv_timer_start(&systemd->watchdog, halod_systemd_on_watchdog, 0,
                   interval_ms);
    systemd->watchdog_active = true;
    HALO_LOG_INFO("systemd watchdog: pinging every %llu ms",
                  (unsigned long long)interval_ms);
  }
}

void halod_systemd_status(const char *status) {
  sd_notifyf(0, "STATUS=%s", status);
}

void halod_systemd_stopping(halod_systemd_t *systemd) {
  sd_notify(0, "STOPPING=1\nSTATUS=stopping");
  if (systemd->watchdog_active) {
    uv_timer_stop(&systemd->watchdog);
    uv_close((uv_handle_t *)&systemd->watchdog, NULL);
    systemd->watchdog_active = false;
  }
  if (systemd->status_active) {
    uv_timer_stop(&systemd->status);
    uv_close((uv_handle_t *)&systemd->status, NULL);
    systemd->status_active = false;
  }
}

void halod_systemd_reloading(int done) {
  sd_notify(0, done ? "READY=1" : "RELOADING=1");
}

#else  // !HALO_HAVE_SYSTEMD

void halod_systemd_ready(halod_systemd_t *systemd, uv_loop_t *loop,
                         halod_systemd_summary_fn summary, void *summary_data) {
  (void)systemd;
  (void)loop;
  (void)summary;
  (void)summary_data;
}
void halod_systemd_status(const char *status) {
  (void)status;
}
void halod_systemd_stopping(halod_systemd_t *systemd) {
  (void)systemd;
}
void halod_systemd_reloading(int done) {
  (void)done;
}

#endif  // HALO_HAVE_SYSTEMD
