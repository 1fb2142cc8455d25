#include "daemon/server.h"

#include <errno.h>
#include <grp.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/transport/ipc/ipc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/status.h"
#include "common/wire.h"

typedef enum halod_server_context_state_e {
  HALOD_CONTEXT_RECEIVING,
  HALOD_CONTEXT_SERVING,  // request handed to the loop
  HALOD_CONTEXT_SENDING,
} halod_server_context_state_t;

struct halod_server_context_t {
  halod_server_t *server;  // NULL for a detached context
  nng_ctx ctx;
  nng_aio *aio;
  halod_server_context_state_t state;
  // A detached context's receiver of replies.
  halod_server_reply_fn detached_reply;
  void *detached_user_data;
};

struct halod_server_t {
  nng_socket socket;
  nng_listener listener;
  uv_async_t async;
  halod_server_handler_fn handler;
  void *user_data;
  uint32_t context_count;
  halod_server_context_t *contexts;
  // The queue from nng threads to the loop (FIFO).
  pthread_mutex_t mutex;
  halod_server_event_t *head;
  halod_server_event_t *tail;
  bool closing;
};

void halod_server_event_free(halod_server_event_t *event) {
  if (!event) return;
  if (event->message) nng_msg_free(event->message);
  free(event);
}

// nng thread.
static void halod_server_push(halod_server_t *server,
                              halod_server_event_t *event) {
  pthread_mutex_lock(&server->mutex);
  bool closing = server->closing;
  if (!closing) {
    if (server->tail) {
      server->tail->next = event;
    } else {
      server->head = event;
    }
    server->tail = event;
  }
  pthread_mutex_unlock(&server->mutex);
  if (closing) {
    halod_server_event_free(event);
    return;
  }
  uv_async_send(&server->async);
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

// nng thread.
static void halod_server_on_aio(void *arg) {
  halod_server_context_t *context = arg;
  halod_server_t *server = context->server;
  int rv = nng_aio_result(context->aio);
  switch (context->state) {
    case HALOD_CONTEXT_SENDING:
      if (rv != 0) {
        nng_msg_free(nng_aio_get_msg(context->aio));
        nng_aio_set_msg(context->aio, NULL);
      }
      if (rv == NNG_ECLOSED) return;
      context->state = HALOD_CONTEXT_RECEIVING;
      nng_ctx_recv(context->ctx, context->aio);
      return;
    case HALOD_CONTEXT_RECEIVING: {
      if (rv == NNG_ECLOSED) return;
      if (rv != 0) {
        nng_ctx_recv(context->ctx, context->aio);
        return;
      }
      nng_msg *message = nng_aio_get_msg(context->aio);
      halod_server_event_t *event = calloc(1, sizeof(*event));
      if (!event) {
        nng_msg_free(message);
        nng_ctx_recv(context->ctx, context->aio);
        return;
      }
      event->kind = HALOD_SERVER_EVENT_REQUEST;
      event->pipe_id = (uint32_t)nng_pipe_id(nng_msg_get_pipe(message));
      event->context = context;
      event->message = message;
      context->state = HALOD_CONTEXT_SERVING;
      halod_server_push(server, event);
      return;
    }
    case HALOD_CONTEXT_SERVING:
      return;
  }
}

// nng thread: a client connected or went away.
static void halod_server_on_pipe(nng_pipe pipe, nng_pipe_ev kind, void *arg) {
  halod_server_t *server = arg;
  halod_server_event_t *event = calloc(1, sizeof(*event));
  if (!event) return;
  event->pipe_id = (uint32_t)nng_pipe_id(pipe);
  if (kind == NNG_PIPE_EV_ADD_POST) {
    event->kind = HALOD_SERVER_EVENT_PIPE_ADDED;
    // Peer credentials come from the socket (SO_PEERCRED), never from a
    // message.
    if (nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_UID, &event->peer_uid) ||
        nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_PID, &event->peer_pid)) {
      HALO_LOG_WARN("pipe %u: no peer credentials; closing it", event->pipe_id);
      free(event);
      nng_pipe_close(pipe);
      return;
    }
  } else {
    event->kind = HALOD_SERVER_EVENT_PIPE_REMOVED;
  }
  halod_server_push(server, event);
}

void halod_server_reply(halod_server_context_t *context, nng_msg *reply) {
  if (context->detached_reply) {
    context->detached_reply(context->detached_user_data, reply);
    return;
  }
  context->state = HALOD_CONTEXT_SENDING;
  nng_aio_set_msg(context->aio, reply);
  nng_ctx_send(context->ctx, context->aio);
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

void halod_server_close_pipe(uint32_t pipe_id) {
  nng_pipe pipe = NNG_PIPE_INITIALIZER;
  pipe.id = pipe_id;
  nng_pipe_close(pipe);
}

halo_status_t halod_server_create(uv_loop_t *loop,
                                  const halod_server_options_t *options,
                                  halod_server_t **out_server) {
  *out_server = NULL;
  halod_server_t *server = calloc(1, sizeof(*server));
  if (!server) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  server->handler = options->handler;
  server->user_data = options->user_data;
  pthread_mutex_init(&server->mutex, NULL);
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
  nng_pipe_notify(server->socket, NNG_PIPE_EV_ADD_POST, halod_server_on_pipe,
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
    goto fail;
  }
  if (grouped) {
    status = halod_server_set_socket_group(options->address + strlen("ipc://"),
                                           options->socket_group,
                                           options->socket_mode);
    if (status) goto fail;
  }
  server->context_count = options->contexts;
  server->contexts = calloc(options->contexts, sizeof(*server->contexts));
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
    context->state = HALOD_CONTEXT_RECEIVING;
    nng_ctx_recv(context->ctx, context->aio);
  }
  *out_server = server;
  return NULL;

fail:
  halod_server_destroy(server);
  return status;
}

static void halod_server_on_async_closed(uv_handle_t *handle) {
  halod_server_t *server = handle->data;
  pthread_mutex_destroy(&server->mutex);
  free(server);
}

void halod_server_destroy(halod_server_t *server) {
  if (!server) return;
  pthread_mutex_lock(&server->mutex);
  server->closing = true;
  pthread_mutex_unlock(&server->mutex);
  // Closing the socket aborts every aio and waits for running callbacks.
  nng_close(server->socket);
  for (uint32_t i = 0; server->contexts && i < server->context_count; ++i) {
    if (server->contexts[i].aio) {
      nng_aio_stop(server->contexts[i].aio);
      nng_aio_free(server->contexts[i].aio);
    }
  }
  free(server->contexts);
  halod_server_event_t *event = server->head;
  while (event) {
    halod_server_event_t *next = event->next;
    halod_server_event_free(event);
    event = next;
  }
  server->head = server->tail = NULL;
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
