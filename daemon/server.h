// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// An nng rep socket served by a pool of contexts. nng's threads never touch
// daemon state: each received request and each pipe event is queued and the
// loop thread is woken with uv_async_send (which coalesces, so the loop
// drains the whole queue each time). The loop answers with
// halod_server_reply().
#ifndef HALOD_SERVER_H_
#define HALOD_SERVER_H_

#include <nng/nng.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "daemon/tenant.h"
#include "halo/status.h"

typedef struct halod_server_t halod_server_t;
typedef struct halod_server_context_t halod_server_context_t;

// The loop sees each admitted pipe's events in order: PIPE_ADDED first
// (before the pipe receives anything), then its requests, then
// PIPE_REMOVED, after which nothing of it comes. A refused pipe gets
// PIPE_REFUSED only.
typedef enum halod_server_event_kind_e {
  HALOD_SERVER_EVENT_REQUEST = 0,
  HALOD_SERVER_EVENT_PIPE_ADDED = 1,
  HALOD_SERVER_EVENT_PIPE_REMOVED = 2,
  // Closed as it arrived (|refusal| says why), before it received anything.
  HALOD_SERVER_EVENT_PIPE_REFUSED = 3,
} halod_server_event_kind_t;

typedef enum halod_server_refusal_e {
  HALOD_SERVER_REFUSED_PIPES,         // max_pipes in all were open
  HALOD_SERVER_REFUSED_TENANT_PIPES,  // max_tenant_pipes of its tenant were
                                      // open
  HALOD_SERVER_REFUSED_NO_MEMORY,
} halod_server_refusal_t;

// One queued event. For requests, |context| must be answered exactly once
// with halod_server_reply(); |message| is owned by the handler.
typedef struct halod_server_event_t {
  struct halod_server_event_t *next;
  halod_server_event_kind_t kind;
  uint32_t pipe_id;
  uint64_t peer_uid;  // PIPE_ADDED and PIPE_REFUSED (peer credentials)
  uint64_t peer_pid;
  uint64_t tenant;  // PIPE_ADDED and PIPE_REFUSED (daemon/tenant.h)
  halod_server_refusal_t refusal;  // PIPE_REFUSED only
  uint32_t pipes;  // PIPE_REFUSED: the pipes open (in all, or the tenant's)
  halod_server_context_t *context;  // requests only
  nng_msg *message;                 // requests only
} halod_server_event_t;

// Called on the loop thread for each event; the handler frees |event|
// with halod_server_event_free().
typedef void (*halod_server_handler_fn)(void *user_data,
                                        halod_server_event_t *event);

typedef struct halod_server_options_t {
  const char *address;
  uint32_t socket_mode;
  // Group (name or number) the socket is given; NULL or "" keeps halod's.
  const char *socket_group;
  uint64_t max_message_bytes;
  uint32_t contexts;
  // Milliseconds a reply may wait for its client to take it before it is
  // dropped (0: 2000).
  uint32_t reply_timeout_ms;
  // Requests one connection may have served or answered at once (0:
  // |contexts|); the next is answered with a copy of |busy| (a packed
  // response), or dropped when one of its replies waits on the client.
  uint32_t pipe_requests;
  // Replies of one uid's connections that may wait on their clients at
  // once (0: no limit); per uid, whatever the tenants (the contexts are
  // every user's). With that many being sent, a further reply of the uid
  // that cannot go out within HALOD_SERVER_HURRIED_REPLY_MS is dropped, so
  // connections of one user that do not read together hold hardly more
  // contexts than this. A client that reads is hardly ever hurt: its reply
  // goes out at once, unless its connection is still writing the previous
  // one (a client that got that reply and sent its next request before
  // nng's thread noticed the write's end). Only if its uid has uid_replies
  // replies being sent at that moment (a user's non-reader, or many busy
  // connections whose sends nng has not completed yet) and nng's thread
  // lags HALOD_SERVER_HURRIED_REPLY_MS is its reply dropped; its call then
  // times out. nng's rep contexts cannot send a reply twice, so a dropped
  // reply cannot be retried.
  uint32_t uid_replies;
  // Contexts kept parked beside |contexts|, for requests answered late
  // (halod_server_hold).
  uint32_t spares;
  const nng_msg *busy;
  // Pipes open at once in all, and of one tenant (0: no limit); a further
  // one is closed as it arrives (PIPE_REFUSED).
  uint32_t max_pipes;
  uint32_t max_tenant_pipes;
  // How a pipe's peer credentials make its tenant, and how many cgroup
  // tenants with pipes one uid may have (0: no limit); a pipe of a further
  // cgroup of the uid counts against the uid's own tenant
  // (halod_tenant_of_uid), so that a uid making cgroups cannot multiply
  // its bounds without end.
  halod_tenancy_t tenancy;
  uint32_t max_uid_tenants;
  halod_server_handler_fn handler;
  void *user_data;
} halod_server_options_t;

// How long a reply past uid_replies may wait for its client.
#define HALOD_SERVER_HURRIED_REPLY_MS 50

// Loop thread. Binds and starts listening.
halo_status_t halod_server_create(uv_loop_t *loop,
                                  const halod_server_options_t *options,
                                  halod_server_t **out_server);

// How long halod_server_create's failure path waits for the socket to
// close (halod_stop passes its own deadline).
#define HALOD_SERVER_CLOSE_TIMEOUT_NS (1000ll * 1000000)

// Loop thread. Stops serving: the handler gets no more events; every
// request not served yet (queued for the loop, or arriving later) is
// answered at once with a copy of |refusal| (a packed response; NULL: not
// answered, the request ends when the socket closes). Requests the loop
// holds (deferred replies) must still be answered, before
// halod_server_destroy. The contexts keep receiving (to refuse). Idempotent.
void halod_server_stop(halod_server_t *server, const nng_msg *refusal);

typedef struct halod_server_counters_t {
  uint64_t replies_dropped;   // not taken within reply_timeout_ms
  uint64_t requests_refused;  // answered with |busy|
  uint64_t requests_dropped;  // over the limit, a reply already waiting
} halod_server_counters_t;

// Any thread.
halod_server_counters_t halod_server_counters(const halod_server_t *server);

// Any thread. When the last request arrived (CLOCK_MONOTONIC; 0: none).
int64_t halod_server_last_request_ns(const halod_server_t *server);

// Loop thread. Stops serving (if not yet), closes the socket and frees the
// server. The close waits for nng's callbacks to finish, but not past
// |deadline_ns| (CLOCK_MONOTONIC): nng 1.5.2 can hang closing a connection
// (daemon/server.c says when); then the server is left to nng's threads
// (never freed) and halod goes on stopping.
void halod_server_destroy(halod_server_t *server, int64_t deadline_ns);

// Loop thread, for a request whose answer may take long (an executable
// load): a parked spare context starts receiving in |context|'s place, so
// that the socket still serves |contexts| other requests at once while this
// one waits; |context| parks once its reply is sent. False when no spare is
// parked (every spare holds a request, or the server stops): the request
// then keeps its context as any other does. True for a detached context,
// and for one held already.
bool halod_server_hold(halod_server_context_t *context);

// Loop thread. Whether |context| is held (halod_server_hold), so that a
// place it already has is not asked for twice. False for a detached one.
bool halod_server_held(halod_server_context_t *context);

// Any thread. Sends |reply| (ownership passes) for the request |context|
// was serving and makes the context receive again (or park: held).
void halod_server_reply(halod_server_context_t *context, nng_msg *reply);

void halod_server_event_free(halod_server_event_t *event);

// Resolves |group| (a name or a number) to its id. INVALID_ARGUMENT naming
// it if the system has no such group.
halo_status_t halod_server_resolve_group(const char *group, gid_t *out_gid);

// Gives the socket file at |path| to |group| (NULL or "": nothing) and
// then |mode|. The socket must have been created with at most mode 0700 so
// that nobody of its previous group could connect in between.
halo_status_t halod_server_set_socket_group(const char *path, const char *group,
                                            uint32_t mode);

// Any thread: new limits for pipes arriving from now on (those open stay).
void halod_server_set_pipe_limits(halod_server_t *server, uint32_t max_pipes,
                                  uint32_t max_tenant_pipes,
                                  uint32_t max_uid_tenants);

// Closes an admitted client's pipe. nng before 1.9 lost a message arriving
// on the pipe at that moment, and from then on no pipe of the process
// finished closing (nng's reaper waited for that receive for ever): halod's
// executable completes such a lost transfer with an error instead
// (daemon/nng_fixes.c). halod closes a pipe only when its client
// should be silent (no Hello within hello-timeout-ms) or an administrator
// asks (haloctl kill-client); a pipe past a limit is refused as it arrives,
// before it receives anything.
void halod_server_close_pipe(uint32_t pipe_id);

// Takes the reply to a request of a detached context (ownership passes).
typedef void (*halod_server_reply_fn)(void *user_data, nng_msg *reply);

// A context of no socket, for a harness that hands requests to a server's
// handler itself (tests/fuzz/): halod_server_reply() passes each reply to
// |reply| on the thread that answers. Any thread.
halo_status_t halod_server_context_create_detached(
    halod_server_reply_fn reply, void *user_data,
    halod_server_context_t **out_context);
// Once no request of |context| awaits its reply.
void halod_server_context_destroy_detached(halod_server_context_t *context);

#endif  // HALOD_SERVER_H_
