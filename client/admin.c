// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "client/admin.h"

#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/status.h"

struct halo_admin_s {
  nng_socket socket;
  nng_ctx ctx;
  nng_aio *aio;
  _Atomic bool lost;  // the connection to halod is gone
  bool closed;        // |socket| is closed already (a dial that timed out)
};

// nng thread: the connection went away (halod stopped). Calls fail at once,
// and nng does not dial again (halo_wire_connection_lost).
static void halo_admin_on_pipe_removed(nng_pipe pipe, nng_pipe_ev event,
                                       void *arg) {
  (void)event;
  halo_admin_t *admin = arg;
  halo_wire_connection_lost(pipe, &admin->lost, admin->aio);
}

const char *halo_admin_default_address(const char *address) {
  if (address && *address) return address;
  const char *env = getenv("HALO_ADMIN_ADDRESS");
  if (env && *env) return env;
  return "ipc:///run/halo-admin/admin.sock";
}

halo_status_t halo_admin_connect(const char *address, int timeout_ms,
                                 halo_admin_t **out_admin) {
  *out_admin = NULL;
  address = halo_admin_default_address(address);
  halo_admin_t *admin = calloc(1, sizeof(*admin));
  if (!admin) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  int rv = nng_req0_open(&admin->socket);
  if (rv == 0) {
    nng_socket_set_ms(admin->socket, NNG_OPT_REQ_RESENDTIME,
                      NNG_DURATION_INFINITE);
    // Listings of a busy daemon exceed nng's default limit; the daemon is
    // trusted here.
    nng_socket_set_size(admin->socket, NNG_OPT_RECVMAXSZ, 256u << 20);
    rv = nng_aio_alloc(&admin->aio, NULL, NULL);
  }
  if (rv == 0) rv = nng_ctx_open(&admin->ctx, admin->socket);
  int timeout = timeout_ms > 0 ? timeout_ms : 10000;
  bool timed_out = false;
  if (rv == 0) {
    rv = halo_wire_dial_within(admin->socket, address,
                               halo_admin_on_pipe_removed, admin,
                               (int64_t)timeout * 1000000, &timed_out);
    admin->closed = timed_out;
  }
  if (timed_out) {
    halo_status_t status = halo_status_make(
        HALO_STATUS_DEADLINE_EXCEEDED,
        "admin socket %s: dial: halod did not complete the connection within "
        "%d ms (is it stopped, or too busy to answer?)",
        address, timeout);
    halo_admin_close(admin);
    return status;
  }
  if (rv != 0) {
    char target[320];
    snprintf(target, sizeof(target), "admin socket %s", address);
    halo_status_t status = halo_wire_dial_failed(
        rv, target,
        "the admin socket belongs to halod's admin-group, `halo-admin` in "
        "the packages: run haloctl as root or as a member",
        "is halod running, and is this its --admin address? "
        "HALO_ADMIN_ADDRESS or --admin names it");
    halo_admin_close(admin);
    return status;
  }
  nng_aio_set_timeout(admin->aio, timeout);
  *out_admin = admin;
  return NULL;
}

void halo_admin_close(halo_admin_t *admin) {
  if (!admin) return;
  // The socket first: its removal callback may still abort the aio.
  if (!admin->closed) nng_close(admin->socket);
  if (admin->aio) nng_aio_free(admin->aio);
  free(admin);
}

halo_status_t halo_admin_call(halo_admin_t *admin,
                              const halo_wire_request_t *request,
                              halo_wire_response_t **out_response) {
  return halo_wire_call(admin->ctx, admin->aio, &admin->lost, request,
                        out_response);
}

halo_status_t halo_admin_status(halo_admin_t *admin,
                                halo_wire_response_t **out_response) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__AdminStatus body = HALO__WIRE__ADMIN_STATUS__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_ADMIN_STATUS;
  request.admin_status = &body;
  return halo_admin_call(admin, &request, out_response);
}

halo_status_t halo_admin_sessions(halo_admin_t *admin,
                                  halo_wire_response_t **out_response) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__AdminSessions body = HALO__WIRE__ADMIN_SESSIONS__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_ADMIN_SESSIONS;
  request.admin_sessions = &body;
  return halo_admin_call(admin, &request, out_response);
}

halo_status_t halo_admin_semaphores(halo_admin_t *admin,
                                    halo_wire_response_t **out_response) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__AdminSemaphores body = HALO__WIRE__ADMIN_SEMAPHORES__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_ADMIN_SEMAPHORES;
  request.admin_semaphores = &body;
  return halo_admin_call(admin, &request, out_response);
}

halo_status_t halo_admin_memo_cache(halo_admin_t *admin,
                                    halo_wire_response_t **out_response) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__AdminMemoCache body = HALO__WIRE__ADMIN_MEMO_CACHE__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_ADMIN_MEMO_CACHE;
  request.admin_memo_cache = &body;
  return halo_admin_call(admin, &request, out_response);
}

halo_status_t halo_admin_queues(halo_admin_t *admin,
                                halo_wire_response_t **out_response) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__AdminQueues body = HALO__WIRE__ADMIN_QUEUES__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_ADMIN_QUEUES;
  request.admin_queues = &body;
  return halo_admin_call(admin, &request, out_response);
}

// Requests without fields.
#define HALO_ADMIN_SIMPLE(function, Type, TYPE, field)          \
  halo_status_t function(halo_admin_t *admin,                   \
                         halo_wire_response_t **out_response) { \
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;    \
    Halo__Wire__##Type body = HALO__WIRE__##TYPE##__INIT;       \
    request.body_case = HALO__WIRE__REQUEST__BODY_##TYPE;       \
    request.field = &body;                                      \
    return halo_admin_call(admin, &request, out_response);      \
  }

HALO_ADMIN_SIMPLE(halo_admin_buffers, AdminBuffers, ADMIN_BUFFERS,
                  admin_buffers)
HALO_ADMIN_SIMPLE(halo_admin_executables, AdminExecutables, ADMIN_EXECUTABLES,
                  admin_executables)
HALO_ADMIN_SIMPLE(halo_admin_metrics, AdminMetrics, ADMIN_METRICS,
                  admin_metrics)
HALO_ADMIN_SIMPLE(halo_admin_workers, AdminWorkers, ADMIN_WORKERS,
                  admin_workers)

halo_status_t halo_admin_kill_client(halo_admin_t *admin, uint32_t pid,
                                     halo_wire_response_t **out_response) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__AdminKillClient body = HALO__WIRE__ADMIN_KILL_CLIENT__INIT;
  body.pid = pid;
  request.body_case = HALO__WIRE__REQUEST__BODY_ADMIN_KILL_CLIENT;
  request.admin_kill_client = &body;
  return halo_admin_call(admin, &request, out_response);
}

halo_status_t halo_admin_forgive_client(halo_admin_t *admin, uint32_t pid,
                                        halo_wire_response_t **out_response) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__AdminForgiveClient body = HALO__WIRE__ADMIN_FORGIVE_CLIENT__INIT;
  body.pid = pid;
  request.body_case = HALO__WIRE__REQUEST__BODY_ADMIN_FORGIVE_CLIENT;
  request.admin_forgive_client = &body;
  return halo_admin_call(admin, &request, out_response);
}

halo_status_t halo_admin_drain(halo_admin_t *admin, bool cancel,
                               halo_wire_response_t **out_response) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__AdminDrain body = HALO__WIRE__ADMIN_DRAIN__INIT;
  body.has_cancel = true;
  body.cancel = cancel;
  request.body_case = HALO__WIRE__REQUEST__BODY_ADMIN_DRAIN;
  request.admin_drain = &body;
  return halo_admin_call(admin, &request, out_response);
}
