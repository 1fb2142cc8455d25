// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/server.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/transport/ipc/ipc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/bounded_call.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "common/u64_map.h"
#include "common/wire.h"
#include "daemon/socket_rights.h"

typedef enum halod_server_context_state_e {
  HALOD_CONTEXT_RECEIVING,
  HALOD_CONTEXT_SERVING,  // request handed to the loop
  HALOD_CONTEXT_SENDING,
  HALOD_CONTEXT_STOPPED,  // closed (or refusing nothing): receives no more
  HALOD_CONTEXT_PARKED,   // a spare, until a held request needs its place
} halod_server_context_state_t;

struct halod_server_context_t {
  halod_server_t *server;  // NULL for a detached context
  nng_ctx ctx;
  nng_aio *aio;
  halod_server_context_state_t state;  // under the server's |mutex|
  uint32_t pipe_id;                    // of the request it serves or answers
  // Its pipe's tenant (daemon/tenant.h; UINT64_MAX: the pipe is gone).
  uint64_t tenant;
  bool hurried;  // its reply may not wait on its client (uid_replies)
  // Its request is answered late (halod_server_hold): a spare receives in
  // its place, and it parks once its reply is sent.
  bool held;
  // A detached context's receiver of replies.
  halod_server_reply_fn detached_reply;
  void *detached_user_data;
};

struct halod_server_t {
  char address[160];  // for the log
  nng_socket socket;
  nng_listener listener;
  uv_async_t async;
  halod_server_handler_fn handler;
  void *user_data;
  // |contexts| receiving plus |spares| parked; a held request's context
  // is replaced by a parked one (halod_server_hold).
  uint32_t context_count;
  halod_server_context_t *contexts;
  // A reply not taken by its client within |reply_timeout_ms| is dropped:
  // rep0 queues a reply behind the one its pipe is writing, so a client
  // that never reads would hold the context for ever.
  int32_t reply_timeout_ms;
  // A pipe holds at most |pipe_requests| contexts (serving or answering);
  // the next request is answered with |busy| (a copy), or dropped when one
  // of its replies already waits on the client.
  uint32_t pipe_requests;
  // Replies of one uid's connections that may wait on their clients at
  // once; a further one of that uid that does not go out within
  // HALOD_SERVER_HURRIED_REPLY_MS is dropped. Several connections of one
  // user can then hold at most this many contexts, not |pipe_requests|
  // each. Per uid, not per tenant: the contexts are every user's, and the
  // pods of one uid together must not hold them all.
  uint32_t uid_replies;
  nng_msg *busy;
  _Atomic uint64_t replies_dropped;
  _Atomic uint64_t requests_refused;
  _Atomic uint64_t requests_dropped;
  // The queue from nng threads to the loop (FIFO).
  pthread_mutex_t mutex;
  halod_server_event_t *head;
  halod_server_event_t *tail;
  // Under |mutex|: the pipes admitted and not yet removed (pipe id ->
  // tenant, never 0), and how many of them each tenant holds (tenant ->
  // count). A pipe's PIPE_ADDED, its requests and its PIPE_REMOVED are
  // queued under the same lock as the changes to |pipes|, so the loop sees
  // them in that order.
  halo_u64_map_t pipes;
  halo_u64_map_t tenant_pipes;
  // Under |mutex|: how many cgroup tenants with pipes each uid has (uid + 1
  // -> count). Past |max_uid_tenants| a new cgroup's pipes count against
  // the uid's own tenant.
  halo_u64_map_t uid_tenants;
  uint32_t max_pipes;         // 0: no limit
  uint32_t max_tenant_pipes;  // 0: no limit
  uint32_t max_uid_tenants;   // 0: no limit
  halod_tenancy_t tenancy;
  // Stopped (halod_server_stop): requests are answered with |refusal| (a
  // copy each) from nng's threads, nothing reaches the loop.
  bool closing;
  nng_msg *refusal;
  _Atomic int64_t last_request_ns;  // CLOCK_MONOTONIC
  halod_server_t *next_abandoned;
};

static void halod_server_send(halod_server_context_t *context, nng_msg *reply);

// Servers whose socket did not close in time: nng's threads may still use
// them, so they are never freed (and stay reachable for LeakSanitizer).
static halod_server_t *halod_server_abandoned;

void halod_server_event_free(halod_server_event_t *event) {
  if (!event) return;
  if (event->message) nng_msg_free(event->message);
  free(event);
}

// Under |server|'s mutex: appends |event| to the loop's queue; false once the
// server stopped (|event| stays the caller's). The caller wakes the loop
// (uv_async_send) once it has let go of the mutex.
static bool halod_server_enqueue_locked(halod_server_t *server,
                                        halod_server_event_t *event) {
  if (server->closing) return false;
  if (server->tail) {
    server->tail->next = event;
  } else {
    server->head = event;
  }
  server->tail = event;
  return true;
}

_Static_assert(sizeof(uintptr_t) >= sizeof(uint64_t),
               "|pipes| keeps a tenant key in a map value");

// Under |server|'s mutex: the pipes |tenant| holds.
static uint32_t halod_server_tenant_pipes_locked(const halod_server_t *server,
                                                 uint64_t tenant) {
  return (uint32_t)(uintptr_t)halo_u64_map_get(&server->tenant_pipes, tenant);
}

// Under |server|'s mutex: the cgroup tenants with pipes |uid| has.
static uint32_t halod_server_uid_tenants_locked(const halod_server_t *server,
                                                uint32_t uid) {
  return (uint32_t)(uintptr_t)halo_u64_map_get(&server->uid_tenants,
                                               (uint64_t)uid + 1);
}

// Under |server|'s mutex: one cgroup tenant more or fewer for |uid|
// (adding may fail, out of memory; removing never allocates).
static halo_status_t halod_server_uid_tenants_add_locked(halod_server_t *server,
                                                         uint32_t uid,
                                                         int32_t delta) {
  uint32_t count =
      halod_server_uid_tenants_locked(server, uid) + (uint32_t)delta;
  if (!count) {
    halo_u64_map_remove(&server->uid_tenants, (uint64_t)uid + 1);
    return NULL;
  }
  return halo_u64_map_put(&server->uid_tenants, (uint64_t)uid + 1,
                          (void *)(uintptr_t)count);
}

// Under |server|'s mutex: counts |pipe_id| as one of |tenant|'s.
static halo_status_t halod_server_pipe_add_locked(halod_server_t *server,
                                                  uint32_t pipe_id,
                                                  uint64_t tenant) {
  uint32_t count = halod_server_tenant_pipes_locked(server, tenant);
  bool new_cgroup = count == 0 && !halod_tenant_is_uid(tenant);
  if (new_cgroup) {
    HALO_RETURN_IF_ERROR(halod_server_uid_tenants_add_locked(
        server, halod_tenant_uid(tenant), 1));
  }
  halo_status_t status =
      halo_u64_map_put(&server->pipes, pipe_id, (void *)(uintptr_t)tenant);
  if (!status) {
    status = halo_u64_map_put(&server->tenant_pipes, tenant,
                              (void *)(uintptr_t)(count + 1));
    if (status) halo_u64_map_remove(&server->pipes, pipe_id);
  }
  if (status && new_cgroup) {
    halo_status_free(halod_server_uid_tenants_add_locked(
        server, halod_tenant_uid(tenant), -1));
  }
  return status;
}

// Under |server|'s mutex: forgets |pipe_id|; false if it was not admitted.
static bool halod_server_pipe_remove_locked(halod_server_t *server,
                                            uint32_t pipe_id) {
  uint64_t tenant =
      (uint64_t)(uintptr_t)halo_u64_map_remove(&server->pipes, pipe_id);
  if (!tenant) return false;
  uint32_t count = halod_server_tenant_pipes_locked(server, tenant);
  if (count <= 1) {
    halo_u64_map_remove(&server->tenant_pipes, tenant);
    if (!halod_tenant_is_uid(tenant)) {
      halo_status_free(halod_server_uid_tenants_add_locked(
          server, halod_tenant_uid(tenant), -1));
    }
  } else {
    // Replacing a present key never allocates.
    halo_status_free(halo_u64_map_put(&server->tenant_pipes, tenant,
                                      (void *)(uintptr_t)(count - 1)));
  }
  return true;
}

typedef enum halod_server_push_e {
  HALOD_SERVER_PUSHED,
  HALOD_SERVER_PUSH_STOPPED,  // the server stopped
  HALOD_SERVER_PUSH_GONE,     // the request's pipe was removed already
} halod_server_push_t;

// nng thread. Queues the request |event| for the loop, unless the server
// stopped or its pipe's removal is queued already: nothing of a pipe may
// reach the loop after its PIPE_REMOVED (its session would never end).
// Otherwise |event| stays the caller's.
static halod_server_push_t halod_server_push_request(
    halod_server_t *server, halod_server_event_t *event) {
  pthread_mutex_lock(&server->mutex);
  halod_server_push_t result = HALOD_SERVER_PUSH_GONE;
  if (halo_u64_map_get(&server->pipes, event->pipe_id)) {
    result = halod_server_enqueue_locked(server, event)
                 ? HALOD_SERVER_PUSHED
                 : HALOD_SERVER_PUSH_STOPPED;
  } else if (server->closing) {
    result = HALOD_SERVER_PUSH_STOPPED;
  }
  pthread_mutex_unlock(&server->mutex);
  if (result == HALOD_SERVER_PUSHED) uv_async_send(&server->async);
  return result;
}

// Any thread. Answers the request |context| serves with a copy of the
// refusal, or (no refusal) leaves the context stopped: its client's request
// then ends when the socket closes.
static void halod_server_refuse(halod_server_context_t *context) {
  nng_msg *reply = NULL;
  if (context->server->refusal &&
      nng_msg_dup(&reply, context->server->refusal) == 0) {
    halod_server_reply(context, reply);
    return;
  }
  pthread_mutex_lock(&context->server->mutex);
  context->state = HALOD_CONTEXT_STOPPED;
  pthread_mutex_unlock(&context->server->mutex);
}

// Loop thread: drain everything queued so far (uv_async_send coalesces).
static void halod_server_on_async(uv_async_t *async) {
  halod_server_t *server = async->data;
  pthread_mutex_lock(&server->mutex);
  halod_server_event_t *event = server->head;
  server->head = server->tail = NULL;
  pthread_mutex_unlock(&server->mutex);
  while (event) {
    halod_server_event_t *next = event->next;
    event->next = NULL;
    server->handler(server->user_data, event);
    event = next;
  }
}

// Any thread: |context| receives its next request.
static void halod_server_receive(halod_server_context_t *context) {
  pthread_mutex_lock(&context->server->mutex);
  context->state = HALOD_CONTEXT_RECEIVING;
  pthread_mutex_unlock(&context->server->mutex);
  nng_aio_set_timeout(context->aio, NNG_DURATION_INFINITE);
  nng_ctx_recv(context->ctx, context->aio);
}

// nng thread. Takes a request from |pipe_id| for |context|: SERVING, or
// SENDING the |busy| refusal (*|out_busy|), or false (drop it: the pipe is
// at its limit and a reply of its already waits on the client, so another
// would only wait too).
static bool halod_server_admit(halod_server_context_t *context,
                               uint32_t pipe_id, nng_msg **out_busy) {
  halod_server_t *server = context->server;
  *out_busy = NULL;
  uint32_t held = 0;
  bool waiting = false;
  pthread_mutex_lock(&server->mutex);
  for (uint32_t i = 0; i < server->context_count; ++i) {
    halod_server_context_t *other = &server->contexts[i];
    if (other->pipe_id != pipe_id) continue;
    if (other->state == HALOD_CONTEXT_SERVING) ++held;
    if (other->state == HALOD_CONTEXT_SENDING) ++held, waiting = true;
  }
  context->pipe_id = pipe_id;
  // The pipe may be gone already (then nobody takes the reply).
  context->tenant =
      (uint64_t)(uintptr_t)halo_u64_map_get(&server->pipes, pipe_id);
  if (!context->tenant) context->tenant = UINT64_MAX;
  bool admitted = held < server->pipe_requests;
  if (admitted) {
    context->state = HALOD_CONTEXT_SERVING;
  } else if (!waiting && server->busy) {
    context->state = HALOD_CONTEXT_SENDING;
  }
  pthread_mutex_unlock(&server->mutex);
  if (admitted) return true;
  if (!waiting && server->busy) {
    if (nng_msg_dup(out_busy, server->busy) == 0) {
      atomic_fetch_add(&server->requests_refused, 1);
      return true;
    }
    pthread_mutex_lock(&server->mutex);
    context->state = HALOD_CONTEXT_RECEIVING;
    pthread_mutex_unlock(&server->mutex);
  }
  atomic_fetch_add(&server->requests_dropped, 1);
  HALO_LOG_DEBUG(
      "%s: pipe %u: request dropped (session-requests %u in "
      "flight, a reply waiting on the client)",
      server->address, pipe_id, server->pipe_requests);
  return false;
}

// nng thread: |context| has sent its reply. If it was held, a spare took
// its place receiving, so it parks (true) instead of receiving again.
static bool halod_server_park(halod_server_context_t *context) {
  halod_server_t *server = context->server;
  pthread_mutex_lock(&server->mutex);
  bool held = context->held;
  if (held) {
    context->held = false;
    context->state = HALOD_CONTEXT_PARKED;
  }
  pthread_mutex_unlock(&server->mutex);
  return held;
}

bool halod_server_hold(halod_server_context_t *context) {
  halod_server_t *server = context->server;
  if (!server) return true;  // detached: holds nobody's place
  halod_server_context_t *spare = NULL;
  pthread_mutex_lock(&server->mutex);
  if (context->held) {
    // Held already (a request that waited for a worker, then loads).
    pthread_mutex_unlock(&server->mutex);
    return true;
  }
  if (context->state == HALOD_CONTEXT_SERVING && !server->closing) {
    for (uint32_t i = 0; i < server->context_count; ++i) {
      if (server->contexts[i].state == HALOD_CONTEXT_PARKED) {
        spare = &server->contexts[i];
        break;
      }
    }
  }
  if (spare) {
    context->held = true;
    spare->state = HALOD_CONTEXT_RECEIVING;
  }
  pthread_mutex_unlock(&server->mutex);
  if (!spare) return false;
  nng_aio_set_timeout(spare->aio, NNG_DURATION_INFINITE);
  nng_ctx_recv(spare->ctx, spare->aio);
  return true;
}

bool halod_server_held(halod_server_context_t *context) {
  halod_server_t *server = context->server;
  if (!server) return false;
  pthread_mutex_lock(&server->mutex);
  bool held = context->held;
  pthread_mutex_unlock(&server->mutex);
  return held;
}

// nng thread.
static void halod_server_on_aio(void *arg) {
  halod_server_context_t *context = arg;
  halod_server_t *server = context->server;
  int rv = nng_aio_result(context->aio);
  pthread_mutex_lock(&server->mutex);
  halod_server_context_state_t state = context->state;
  pthread_mutex_unlock(&server->mutex);
  switch (state) {
    case HALOD_CONTEXT_SENDING:
      if (rv != 0) {
        nng_msg_free(nng_aio_get_msg(context->aio));
        nng_aio_set_msg(context->aio, NULL);
      }
      // Stopped, the context keeps receiving: each request is refused at
      // once instead of waiting for the socket's close.
      if (rv == NNG_ECLOSED) {
        pthread_mutex_lock(&server->mutex);
        context->state = HALOD_CONTEXT_STOPPED;
        pthread_mutex_unlock(&server->mutex);
        return;
      }
      if (rv == NNG_ETIMEDOUT) {
        atomic_fetch_add(&server->replies_dropped, 1);
        if (context->hurried) {
          HALO_LOG_DEBUG(
              "%s: pipe %u: reply dropped (the client did not take it "
              "within %d ms and its uid %u has uid-replies %u replies "
              "waiting)",
              server->address, context->pipe_id, HALOD_SERVER_HURRIED_REPLY_MS,
              halod_tenant_uid(context->tenant), server->uid_replies);
        } else {
          HALO_LOG_DEBUG(
              "%s: pipe %u: reply dropped (the client took none "
              "within reply-timeout-ms %d)",
              server->address, context->pipe_id, (int)server->reply_timeout_ms);
        }
      }
      if (halod_server_park(context)) return;
      halod_server_receive(context);
      return;
    case HALOD_CONTEXT_RECEIVING: {
      if (rv == NNG_ECLOSED) return;
      if (rv != 0) {
        nng_ctx_recv(context->ctx, context->aio);
        return;
      }
      atomic_store_explicit(&server->last_request_ns, halo_clock_now_ns(),
                            memory_order_relaxed);
      nng_msg *message = nng_aio_get_msg(context->aio);
      nng_pipe pipe = nng_msg_get_pipe(message);
      uint32_t pipe_id = (uint32_t)nng_pipe_id(pipe);
      nng_msg *busy = NULL;
      if (!halod_server_admit(context, pipe_id, &busy)) {
        nng_msg_free(message);
        nng_ctx_recv(context->ctx, context->aio);
        return;
      }
      if (busy) {
        nng_msg_free(message);
        halod_server_send(context, busy);
        return;
      }
      halod_server_event_t *event = calloc(1, sizeof(*event));
      if (!event) {
        nng_msg_free(message);
        halod_server_receive(context);
        return;
      }
      event->kind = HALOD_SERVER_EVENT_REQUEST;
      event->pipe_id = pipe_id;
      event->context = context;
      event->message = message;
      halod_server_push_t pushed = halod_server_push_request(server, event);
      if (pushed == HALOD_SERVER_PUSHED) return;
      halod_server_event_free(event);
      if (pushed == HALOD_SERVER_PUSH_STOPPED) {
        halod_server_refuse(context);
      } else {
        // Its connection is gone: nobody to answer.
        halod_server_receive(context);
      }
      return;
    }
    case HALOD_CONTEXT_SERVING:
    case HALOD_CONTEXT_STOPPED:
    case HALOD_CONTEXT_PARKED:
      return;
  }
}

// nng thread, at NNG_PIPE_EV_ADD_PRE: |pipe| connected and has not received
// anything yet. Admitted, it is counted and PIPE_ADDED queued (before any of
// its requests can be); past |max_pipes| in all or |max_tenant_pipes| of
// its tenant it is closed here, before anything arrives on it: nng before 1.9
// lost a message arriving on a pipe that another thread closes, and then
// no pipe of the process ever finished closing (halod_server_close_pipe,
// daemon/nng_fixes.c).
static void halod_server_on_pipe_arrived(halod_server_t *server,
                                         nng_pipe pipe) {
  halod_server_event_t *event = calloc(1, sizeof(*event));
  if (!event) {
    nng_pipe_close(pipe);
    return;
  }
  event->pipe_id = (uint32_t)nng_pipe_id(pipe);
  // Peer credentials come from the socket (SO_PEERCRED), never from a
  // message.
  if (nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_UID, &event->peer_uid) ||
      nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_PID, &event->peer_pid)) {
    HALO_LOG_WARN("pipe %u: no peer credentials; closing it", event->pipe_id);
    free(event);
    nng_pipe_close(pipe);
    return;
  }
  // Under trust-domain cgroup this reads the peer's /proc/PID/cgroup: on
  // nng's thread, before the lock.
  uint64_t tenant = halod_tenant_of(server->tenancy, (uint32_t)event->peer_uid,
                                    (uint32_t)event->peer_pid);
  event->kind = HALOD_SERVER_EVENT_PIPE_REFUSED;
  pthread_mutex_lock(&server->mutex);
  if (!halod_tenant_is_uid(tenant) && server->max_uid_tenants &&
      halod_server_tenant_pipes_locked(server, tenant) == 0 &&
      halod_server_uid_tenants_locked(server, halod_tenant_uid(tenant)) >=
          server->max_uid_tenants) {
    // A cgroup more than its uid may have tenants: counted as the uid's.
    tenant = halod_tenant_of_uid(halod_tenant_uid(tenant));
  }
  event->tenant = tenant;
  uint32_t tenant_pipes =
      halod_server_tenant_pipes_locked(server, event->tenant);
  if (server->max_pipes && server->pipes.count >= server->max_pipes) {
    event->refusal = HALOD_SERVER_REFUSED_PIPES;
    event->pipes = (uint32_t)server->pipes.count;
  } else if (server->max_tenant_pipes &&
             tenant_pipes >= server->max_tenant_pipes) {
    event->refusal = HALOD_SERVER_REFUSED_TENANT_PIPES;
    event->pipes = tenant_pipes;
  } else {
    halo_status_t status =
        halod_server_pipe_add_locked(server, event->pipe_id, event->tenant);
    if (status) {
      event->refusal = HALOD_SERVER_REFUSED_NO_MEMORY;
      halo_status_free(status);
    } else {
      event->kind = HALOD_SERVER_EVENT_PIPE_ADDED;
    }
  }
  bool refused = event->kind == HALOD_SERVER_EVENT_PIPE_REFUSED;
  bool queued = halod_server_enqueue_locked(server, event);
  pthread_mutex_unlock(&server->mutex);
  if (queued) {
    uv_async_send(&server->async);
  } else {
    halod_server_event_free(event);
  }
  if (refused) nng_pipe_close(pipe);
}

// nng thread (the reaper, at NNG_PIPE_EV_REM_POST): an admitted |pipe| went
// away. Its requests already queued stay before PIPE_REMOVED; later ones are
// dropped (halod_server_push_request).
static void halod_server_on_pipe_removed(halod_server_t *server,
                                         nng_pipe pipe) {
  halod_server_event_t *event = calloc(1, sizeof(*event));
  uint32_t pipe_id = (uint32_t)nng_pipe_id(pipe);
  pthread_mutex_lock(&server->mutex);
  // Refused pipes (closed at their arrival) were never counted.
  bool admitted = halod_server_pipe_remove_locked(server, pipe_id);
  bool closing = server->closing;
  bool queued = false;
  if (admitted && event) {
    event->kind = HALOD_SERVER_EVENT_PIPE_REMOVED;
    event->pipe_id = pipe_id;
    queued = halod_server_enqueue_locked(server, event);
  }
  pthread_mutex_unlock(&server->mutex);
  if (queued) {
    uv_async_send(&server->async);
    return;
  }
  if (admitted && !event && !closing) {
    HALO_LOG_ERROR("pipe %u: out of memory: its session stays", pipe_id);
  }
  free(event);
}

// nng thread.
static void halod_server_on_pipe(nng_pipe pipe, nng_pipe_ev kind, void *arg) {
  if (kind == NNG_PIPE_EV_ADD_PRE) {
    halod_server_on_pipe_arrived(arg, pipe);
  } else {
    halod_server_on_pipe_removed(arg, pipe);
  }
}

// Any thread. Makes |context| SENDING and sends |reply|, hurried when its
// uid has uid_replies other replies being sent (a served request's reply
// and a busy refusal alike).
static void halod_server_send(halod_server_context_t *context, nng_msg *reply) {
  halod_server_t *server = context->server;
  uint32_t waiting = 0;
  pthread_mutex_lock(&server->mutex);
  if (server->uid_replies && context->tenant != UINT64_MAX) {
    uint32_t uid = halod_tenant_uid(context->tenant);
    for (uint32_t i = 0; i < server->context_count; ++i) {
      const halod_server_context_t *other = &server->contexts[i];
      if (other != context && other->state == HALOD_CONTEXT_SENDING &&
          other->tenant != UINT64_MAX &&
          halod_tenant_uid(other->tenant) == uid) {
        ++waiting;
      }
    }
  }
  context->state = HALOD_CONTEXT_SENDING;
  pthread_mutex_unlock(&server->mutex);
  context->hurried = server->uid_replies && waiting >= server->uid_replies;
  nng_aio_set_timeout(context->aio, context->hurried
                                        ? HALOD_SERVER_HURRIED_REPLY_MS
                                        : server->reply_timeout_ms);
  nng_aio_set_msg(context->aio, reply);
  nng_ctx_send(context->ctx, context->aio);
}

void halod_server_reply(halod_server_context_t *context, nng_msg *reply) {
  if (context->detached_reply) {
    context->detached_reply(context->detached_user_data, reply);
    return;
  }
  halod_server_send(context, reply);
}

halo_status_t halod_server_context_create_detached(
    halod_server_reply_fn reply, void *user_data,
    halod_server_context_t **out_context) {
  *out_context = NULL;
  halod_server_context_t *context = calloc(1, sizeof(*context));
  if (!context) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  context->state = HALOD_CONTEXT_SERVING;
  context->detached_reply = reply;
  context->detached_user_data = user_data;
  *out_context = context;
  return NULL;
}

void halod_server_context_destroy_detached(halod_server_context_t *context) {
  free(context);
}

void halod_server_set_pipe_limits(halod_server_t *server, uint32_t max_pipes,
                                  uint32_t max_tenant_pipes,
                                  uint32_t max_uid_tenants) {
  if (!server) return;
  pthread_mutex_lock(&server->mutex);
  server->max_pipes = max_pipes;
  server->max_tenant_pipes = max_tenant_pipes;
  server->max_uid_tenants = max_uid_tenants;
  pthread_mutex_unlock(&server->mutex);
}

void halod_server_close_pipe(uint32_t pipe_id) {
  nng_pipe pipe = NNG_PIPE_INITIALIZER;
  pipe.id = pipe_id;
  nng_pipe_close(pipe);
}

// A listen that failed because the socket's directory is missing says so
// (nng says "Entry not found"): halod does not make it (the unit's
// RuntimeDirectory= does, or the operator).
static void halod_server_name_missing_directory(const char *address,
                                                halo_status_t *status) {
  if (strncmp(address, "ipc://", 6) != 0) return;
  char directory[PATH_MAX];
  snprintf(directory, sizeof(directory), "%s", address + 6);
  char *slash = strrchr(directory, '/');
  if (!slash || slash == directory) return;
  *slash = '\0';
  struct stat st;
  if (stat(directory, &st) == 0) return;
  int error = errno;
  halo_status_t named = halo_status_make(
      halo_status_code(*status), "%s: listen: the socket's directory %s: %s%s",
      address, directory, strerror(error),
      error == ENOENT ? " (halod does not create it; halod.service's "
                        "RuntimeDirectory= does)"
                      : "");
  halo_status_free(*status);
  *status = named;
}

halo_status_t halod_server_create(uv_loop_t *loop,
                                  const halod_server_options_t *options,
                                  halod_server_t **out_server) {
  *out_server = NULL;
  halod_server_t *server = calloc(1, sizeof(*server));
  if (!server) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  snprintf(server->address, sizeof(server->address), "%s", options->address);
  server->handler = options->handler;
  server->user_data = options->user_data;
  pthread_mutex_init(&server->mutex, NULL);
  halo_u64_map_initialize(&server->pipes);
  halo_u64_map_initialize(&server->tenant_pipes);
  halo_u64_map_initialize(&server->uid_tenants);
  server->max_pipes = options->max_pipes;
  server->max_tenant_pipes = options->max_tenant_pipes;
  server->max_uid_tenants = options->max_uid_tenants;
  server->tenancy = options->tenancy;
  server->async.data = server;
  uv_async_init(loop, &server->async, halod_server_on_async);

  int rv = nng_rep0_open(&server->socket);
  halo_status_t status = NULL;
  if (rv != 0) {
    status = halo_wire_status_from_nng(rv, "nng_rep0_open");
    goto fail;
  }
  // nng's default receive limit is unlimited: a client could make the daemon
  // allocate any size. Larger messages drop the sender's pipe.
  nng_socket_set_size(server->socket, NNG_OPT_RECVMAXSZ,
                      (size_t)options->max_message_bytes);
  nng_pipe_notify(server->socket, NNG_PIPE_EV_ADD_PRE, halod_server_on_pipe,
                  server);
  nng_pipe_notify(server->socket, NNG_PIPE_EV_REM_POST, halod_server_on_pipe,
                  server);
  bool grouped = options->socket_group && options->socket_group[0];
  rv = nng_listener_create(&server->listener, server->socket, options->address);
  if (rv == 0) {
    // With a group to set, only the owner may connect until it is set.
    rv = nng_listener_set_int(
        server->listener, NNG_OPT_IPC_PERMISSIONS,
        (int)(grouped ? options->socket_mode & 0700 : options->socket_mode));
  }
  if (rv == 0) rv = nng_listener_start(server->listener, 0);
  if (rv != 0) {
    status = halo_status_annotate(halo_wire_status_from_nng(rv, "listen"), "%s",
                                  options->address);
    halod_server_name_missing_directory(options->address, &status);
    goto fail;
  }
  // Before the group lets clients in: their connections inherit it.
  int rights =
      halod_socket_refuse_rights_at(options->address + strlen("ipc://"));
  if (rights) {
    HALO_LOG_DEBUG("%s: passed descriptors not refused: %s", options->address,
                   strerror(rights));
  }
  if (grouped) {
    status = halod_server_set_socket_group(options->address + strlen("ipc://"),
                                           options->socket_group,
                                           options->socket_mode);
    if (status) goto fail;
  }
  server->reply_timeout_ms =
      options->reply_timeout_ms ? (int32_t)options->reply_timeout_ms : 2000;
  server->pipe_requests =
      options->pipe_requests ? options->pipe_requests : options->contexts;
  server->uid_replies = options->uid_replies;
  if (options->busy && nng_msg_dup(&server->busy, options->busy) != 0) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    goto fail;
  }
  server->context_count = options->contexts + options->spares;
  server->contexts = calloc(server->context_count, sizeof(*server->contexts));
  if (!server->contexts) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    goto fail;
  }
  for (uint32_t i = 0; i < server->context_count; ++i) {
    halod_server_context_t *context = &server->contexts[i];
    context->server = server;
    rv = nng_ctx_open(&context->ctx, server->socket);
    if (rv == 0) {
      rv = nng_aio_alloc(&context->aio, halod_server_on_aio, context);
    }
    if (rv != 0) {
      status = halo_wire_status_from_nng(rv, "nng context");
      goto fail;
    }
    if (i >= options->contexts) {
      context->state = HALOD_CONTEXT_PARKED;
      continue;
    }
    context->state = HALOD_CONTEXT_RECEIVING;
    nng_ctx_recv(context->ctx, context->aio);
  }
  *out_server = server;
  return NULL;

fail:
  halod_server_destroy(server,
                       halo_clock_deadline_ns(HALOD_SERVER_CLOSE_TIMEOUT_NS));
  return status;
}

static void halod_server_on_async_closed(uv_handle_t *handle) {
  halod_server_t *server = handle->data;
  pthread_mutex_destroy(&server->mutex);
  halo_u64_map_deinitialize(&server->pipes);
  halo_u64_map_deinitialize(&server->tenant_pipes);
  halo_u64_map_deinitialize(&server->uid_tenants);
  if (server->refusal) nng_msg_free(server->refusal);
  if (server->busy) nng_msg_free(server->busy);
  free(server);
}

void halod_server_stop(halod_server_t *server, const nng_msg *refusal) {
  if (!server) return;
  nng_msg *copy = NULL;
  if (refusal && nng_msg_dup(&copy, refusal) != 0) copy = NULL;
  pthread_mutex_lock(&server->mutex);
  bool stopped = server->closing;
  server->closing = true;
  if (!stopped) server->refusal = copy;
  halod_server_event_t *event = server->head;
  server->head = server->tail = NULL;
  pthread_mutex_unlock(&server->mutex);
  if (stopped && copy) nng_msg_free(copy);
  // Requests the loop has not served yet are refused now, not dropped.
  while (event) {
    halod_server_event_t *next = event->next;
    if (event->kind == HALOD_SERVER_EVENT_REQUEST) {
      halod_server_refuse(event->context);
    }
    halod_server_event_free(event);
    event = next;
  }
}

halod_server_counters_t halod_server_counters(const halod_server_t *server) {
  halod_server_counters_t counters = {0};
  if (!server) return counters;
  halod_server_t *s = (halod_server_t *)server;
  counters.replies_dropped = atomic_load(&s->replies_dropped);
  counters.requests_refused = atomic_load(&s->requests_refused);
  counters.requests_dropped = atomic_load(&s->requests_dropped);
  return counters;
}

int64_t halod_server_last_request_ns(const halod_server_t *server) {
  if (!server) return 0;
  return atomic_load_explicit(&((halod_server_t *)server)->last_request_ns,
                              memory_order_relaxed);
}

// Closes the socket (aborts every aio, closes every pipe and waits for
// nng's callbacks), then frees the contexts' aios.
static void halod_server_close_socket(void *argument) {
  halod_server_t *server = argument;
  nng_close(server->socket);
  for (uint32_t i = 0; server->contexts && i < server->context_count; ++i) {
    if (server->contexts[i].aio) {
      nng_aio_stop(server->contexts[i].aio);
      nng_aio_free(server->contexts[i].aio);
    }
  }
}

void halod_server_destroy(halod_server_t *server, int64_t deadline_ns) {
  if (!server) return;
  halod_server_stop(server, NULL);
  // nng_close can wait for ever (common/bounded_call.h): halod waits for it
  // until |deadline_ns| at most.
  bool closed =
      halo_bounded_call(halod_server_close_socket, server, deadline_ns);
  if (!closed) {
    HALO_LOG_WARN(
        "%s: the socket did not close in time (nng did not finish closing "
        "its connections); going on without it: halod's exit closes them",
        server->address);
    server->next_abandoned = halod_server_abandoned;
    halod_server_abandoned = server;
    uv_close((uv_handle_t *)&server->async, NULL);
    return;
  }
  free(server->contexts);
  server->contexts = NULL;
  uv_close((uv_handle_t *)&server->async, halod_server_on_async_closed);
}

halo_status_t halod_server_resolve_group(const char *group, gid_t *out_gid) {
  char *end = NULL;
  errno = 0;
  unsigned long number = strtoul(group, &end, 10);
  if (group[0] >= '0' && group[0] <= '9' && !*end && !errno &&
      number < (unsigned long)(gid_t)-1) {
    *out_gid = (gid_t)number;
    return NULL;
  }
  struct group entry;
  struct group *found = NULL;
  char buffer[16384];
  int rv = getgrnam_r(group, &entry, buffer, sizeof(buffer), &found);
  if (rv != 0) {
    return halo_status_from_errno(rv, "looking up group '%s'", group);
  }
  if (!found) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "there is no group '%s' (create it: "
                            "systemd-sysusers, or groupadd --system)",
                            group);
  }
  *out_gid = found->gr_gid;
  return NULL;
}

halo_status_t halod_server_set_socket_group(const char *path, const char *group,
                                            uint32_t mode) {
  if (!group || !group[0]) return NULL;
  gid_t gid;
  HALO_RETURN_IF_ERROR(halod_server_resolve_group(group, &gid));
  if (chown(path, (uid_t)-1, gid) != 0) {
    return halo_status_from_errno(errno,
                                  "giving %s to group %s (halod must be a "
                                  "member: SupplementaryGroups=)",
                                  path, group);
  }
  if (chmod(path, mode) != 0) {
    return halo_status_from_errno(errno, "chmod %s", path);
  }
  return NULL;
}
