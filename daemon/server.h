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

#include "halo/status.h"

typedef struct halod_server_t halod_server_t;
typedef struct halod_server_context_t halod_server_context_t;

typedef enum halod_server_event_kind_e {
  HALOD_SERVER_EVENT_REQUEST = 0,
  HALOD_SERVER_EVENT_PIPE_ADDED = 1,
  HALOD_SERVER_EVENT_PIPE_REMOVED = 2,
} halod_server_event_kind_t;

// One queued event. For requests, |context| must be answered exactly once
// with halod_server_reply(); |message| is owned by the handler.
typedef struct halod_server_event_t {
  struct halod_server_event_t *next;
  halod_server_event_kind_t kind;
  uint32_t pipe_id;
  uint64_t peer_uid;  // pipe events only (peer credentials)
  uint64_t peer_pid;
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
  halod_server_handler_fn handler;
  void *user_data;
} halod_server_options_t;

// Loop thread. Binds and starts listening.
halo_status_t halod_server_create(uv_loop_t *loop,
                                  const halod_server_options_t *options,
                                  halod_server_t **out_server);

// Loop thread. Stops accepting, closes the socket (waits for nng callbacks
// to finish), drops queued requests and frees the server.
void halod_server_destroy(halod_server_t *server);

// Any thread. Sends |reply| (ownership passes) for the request |context|
// was serving and makes the context receive again.
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

// Closes a client's pipe (e.g. after a protocol violation).
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
