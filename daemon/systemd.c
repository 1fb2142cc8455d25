#include "daemon/systemd.h"

#include <stdint.h>
#include <stdio.h>

#include "common/log.h"

#ifdef HALO_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

static void halod_systemd_on_watchdog(uv_timer_t *timer) {
  (void)timer;
  sd_notify(0, "WATCHDOG=1");
}

void halod_systemd_ready(halod_systemd_t *systemd, uv_loop_t *loop,
                         const char *status) {
  sd_notifyf(0, "READY=1\nSTATUS=%s", status);
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    uv_timer_init(loop, &systemd->watchdog);
    uint64_t interval_ms = usec / 2000;
    if (interval_ms == 0) interval_ms = 1;
    uv_timer_start(&systemd->watchdog, halod_systemd_on_watchdog, 0,
                   interval_ms);
    systemd->watchdog_active = 1;
    HALO_LOG_INFO("systemd watchdog: pinging every %llu ms",
                  (unsigned long long)interval_ms);
  }
}

void halod_systemd_status(const char *status) {
  sd_notifyf(0, "STATUS=%s", status);
}

void halod_systemd_stopping(halod_systemd_t *systemd) {
  sd_notify(0, "STOPPING=1");
  if (systemd->watchdog_active) {
    uv_timer_stop(&systemd->watchdog);
    uv_close((uv_handle_t *)&systemd->watchdog, NULL);
    systemd->watchdog_active = 0;
  }
}

void halod_systemd_reloading(int done) {
  sd_notify(0, done ? "READY=1" : "RELOADING=1");
}

#else  // !HALO_HAVE_SYSTEMD

void halod_systemd_ready(halod_systemd_t *systemd, uv_loop_t *loop,
                         const char *status) {
  (void)systemd;
  (void)loop;
  (void)status;
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
