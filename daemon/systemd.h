// systemd glue: Type=notify readiness, status lines, the watchdog. No-ops
// when halod is not run by systemd (no $NOTIFY_SOCKET) or was built without
// libsystemd.
//
// Loop thread only.
#ifndef HALOD_SYSTEMD_H_
#define HALOD_SYSTEMD_H_

#include <uv.h>

typedef struct halod_systemd_t {
  uv_timer_t watchdog;
  int watchdog_active;
} halod_systemd_t;

// READY=1 (listeners are up) and starts watchdog pings at half of
// $WATCHDOG_USEC if systemd asked for them.
void halod_systemd_ready(halod_systemd_t *systemd, uv_loop_t *loop,
                         const char *status);
// STATUS=<text>.
void halod_systemd_status(const char *status);
// STOPPING=1 and stops the watchdog timer.
void halod_systemd_stopping(halod_systemd_t *systemd);
// RELOADING=1 ... READY=1 around a reload.
void halod_systemd_reloading(int done);

#endif  // HALOD_SYSTEMD_H_
