// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo: connection, handshake, fd channel, shared mappings.
#include "client/client.h"

#include <errno.h>
#include <fcntl.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/bounded_call.h"
#include "common/clock.h"
#include "common/fd_channel.h"
#include "common/memfd.h"
#include "common/mutex.h"
#include "common/status.h"

uint32_t halo_abi_version(void) {
  return HALO_ABI_VERSION;
}

const char *halo_version_string(void) {
  return HALO_VERSION_STRING;
}

// ---------------------------------------------------------------- fork
//
// A child forked (without exec) by a process that connected a client holds
// a copy of it: its connection, fd channel and submission ring are the
// parent's session (the child's records would be the parent's, and its
// copy of the ring's tail would make the parent's next records overwrite
// ones halod took). And nng cannot be used at all in a process forked after
// it was initialized: nng 1.5.2 panics ("nng is not fork-reentrant safe")
// at its next use, a close or a new socket included, even once every
// socket is closed.
//
// So libhalo records the process that first opens an nng socket
// (|halo_client_nng_pid|), after registering pthread_atfork handlers whose
// child handler marks every process forked from then on
// (|halo_client_forked|; a child's children inherit the mark). In a marked
// process halo_client_connect refuses to start, and every client there is a
// copy from an ancestor (halo_client_inherited): its calls fail before they
// touch nng, the fd channel, the ring or the shared memory, and its close is
// local. The mark makes the check one load on the hot paths, where comparing
// getpid() with the client's |pid| would cost a system call per record
// (about 0.5 us). A child made without the atfork handlers (a raw clone(2))
// is not seen.
//
// The child also frees its copies one by one (halo_buffer_release ...),
// and those take the client's |state_mutex| (its object list and
// mappings): had another thread of the parent held it at the fork, the
// child would wait for ever, on a list or map that thread left halfway.
// So the prepare handler takes |state_mutex| of every live client (the
// registry below) and the parent and child handlers give them back: fork()
// waits for those short sections (a list link, a map lookup), and the child
// gets each client's state whole and its lock free. The locks held across a
// round trip to halod (|call_mutex|, |fd_mutex|, the ring's, held up to the
// request timeout) are not taken, or fork() could wait that long: the child
// never takes them, since every path to them checks halo_client_inherited
// first (halo_client_check_process), and its close does not destroy them.
static _Atomic pid_t halo_client_nng_pid;  // 0: libhalo has not used nng
static atomic_bool halo_client_forked;
static pthread_once_t halo_client_fork_watch = PTHREAD_ONCE_INIT;
static int halo_client_fork_watch_error;  // pthread_atfork's

// Every client of this process from its connect to its close, linked
// through |registry_next|, under |halo_client_registry_mutex|, which is
// taken before any client's |state_mutex| (the fork handlers), never while
// one is held.
static pthread_mutex_t halo_client_registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static halo_client_t *halo_client_registry;

static void halo_client_register(halo_client_t *client) {
  pthread_mutex_lock(&halo_client_registry_mutex);
  client->registry_next = halo_client_registry;
  client->registry_prev = NULL;
  if (halo_client_registry) halo_client_registry->registry_prev = client;
  halo_client_registry = client;
  pthread_mutex_unlock(&halo_client_registry_mutex);
}

static void halo_client_unregister(halo_client_t *client) {
  pthread_mutex_lock(&halo_client_registry_mutex);
  if (client->registry_prev) {
    client->registry_prev->registry_next = client->registry_next;
  } else if (halo_client_registry == client) {
    halo_client_registry = client->registry_next;
  }
  if (client->registry_next) {
    client->registry_next->registry_prev = client->registry_prev;
  }
  client->registry_prev = client->registry_next = NULL;
  pthread_mutex_unlock(&halo_client_registry_mutex);
}

// The forking thread, before fork(): every client's state, whole.
static void halo_client_on_fork_prepare(void) {
  pthread_mutex_lock(&halo_client_registry_mutex);
  for (halo_client_t *client = halo_client_registry; client;
       client = client->registry_next) {
    pthread_mutex_lock(&client->state_mutex);
  }
}

// After fork(), in the parent and in the child (whose one thread is the
// copy of the one that took them).
static void halo_client_on_fork_release(void) {
  for (halo_client_t *client = halo_client_registry; client;
       client = client->registry_next) {
    pthread_mutex_unlock(&client->state_mutex);
  }
  pthread_mutex_unlock(&halo_client_registry_mutex);
}

static void halo_client_on_fork_child(void) {
  atomic_store_explicit(&halo_client_forked, true, memory_order_relaxed);
  halo_client_on_fork_release();
}

static void halo_client_watch_forks(void) {
  halo_client_fork_watch_error =
      pthread_atfork(halo_client_on_fork_prepare, halo_client_on_fork_release,
                     halo_client_on_fork_child);
}

// Before libhalo's first use of nng in a connect: NULL, with this process's
// pid in *|out_pid|, where this process may use nng (the one that first
// did, or none did yet, which it then claims); FAILED_PRECONDITION in a
// process forked after libhalo used nng (in it or in an ancestor).
static halo_status_t halo_client_claim_nng(pid_t *out_pid) {
  pid_t self = getpid();
  *out_pid = self;
  pid_t owner = atomic_load(&halo_client_nng_pid);
  if (owner == 0) {
    // The handler first: a fork between the claim and nng's use is marked.
    pthread_once(&halo_client_fork_watch, halo_client_watch_forks);
    if (halo_client_fork_watch_error != 0) {
      return halo_status_from_errno(halo_client_fork_watch_error,
                                    "pthread_atfork (libhalo watches for "
                                    "fork(), after which nng cannot be "
                                    "used)");
    }
    if (atomic_compare_exchange_strong(&halo_client_nng_pid, &owner, self)) {
      owner = self;
    }
  }
  if (owner == self && !atomic_load(&halo_client_forked)) return NULL;
  return halo_status_make(
      HALO_STATUS_FAILED_PRECONDITION,
      "libhalo cannot connect in process %d: it was forked (fork() without "
      "exec) after process %d, its parent or an ancestor, used libhalo, and "
      "nng, the messaging library under libhalo's socket, cannot be used in "
      "a process forked after it was initialized (it would abort, \"nng is "
      "not fork-reentrant safe\"), even where the parent closed its clients "
      "before forking. What works: exec a program in the child (fork then "
      "exec, or posix_spawn) and connect there, or fork before the parent "
      "first connects. Clients inherited from the parent cannot be used "
      "here either; halo_client_close frees this process's copy of one "
      "without touching the parent's session",
      (int)self, (int)owner);
}

bool halo_client_inherited(const halo_client_t *client) {
  (void)client;  // every client in a marked process is a copy
  return atomic_load_explicit(&halo_client_forked, memory_order_relaxed);
}

halo_status_t halo_client_check_process(const halo_client_t *client) {
  if (!halo_client_inherited(client)) return NULL;
  return halo_status_make(
      HALO_STATUS_FAILED_PRECONDITION,
      "this client was connected by process %d; a forked child (this is "
      "process %d) cannot use it: its connection, fd channel and submission "
      "ring are that process's session, and nng cannot be used after a "
      "fork. Connect a client of its own in a process that has not used "
      "libhalo (e.g. after exec: fork then exec, or posix_spawn); "
      "halo_client_close frees this copy without touching the parent's "
      "session",
      (int)client->pid, (int)getpid());
}

// nng thread (its reaper): the pipe to halod went away (daemon exit or
// crash, or halod refused the connection). Every later call fails fast; a
// call in flight is aborted instead of waiting for its timeout; the dialer
// closes (halo_wire_connection_lost says why).
static void halo_client_on_pipe_removed(nng_pipe pipe, nng_pipe_ev event,
                                        void *arg) {
  (void)event;
  halo_client_t *client = arg;
  halo_wire_connection_lost(pipe, &client->lost, client->aio);
}

bool halo_client_daemon_exited(const halo_client_t *client) {
  if (client->daemon_pidfd < 0) return false;
  struct pollfd fd = {.fd = client->daemon_pidfd, .events = POLLIN};
  return poll(&fd, 1, 0) > 0;
}

halo_status_t halo_client_lost_status(const halo_client_t *client) {
  return halo_status_make(HALO_STATUS_UNAVAILABLE,
                          "the connection to halod at %s is lost; reconnect",
                          client->address);
}

int64_t halo_client_deadline_ns(const halo_client_t *client,
                                int64_t *deadline_ns) {
  if (*deadline_ns == 0) {
    *deadline_ns =
        halo_clock_deadline_ns((int64_t)client->request_timeout_ms * 1000000);
  }
  return *deadline_ns;
}

bool halo_client_lock_until(const halo_client_t *client, pthread_mutex_t *mutex,
                            int64_t *deadline_ns) {
  // The call takes its deadline only once it has to wait.
  if (pthread_mutex_trylock(mutex) == 0) return true;
  return halo_mutex_lock_until(mutex,
                               halo_client_deadline_ns(client, deadline_ns));
}

halo_status_t halo_client_deadline_status(const halo_client_t *client,
                                          const char *what) {
  return halo_status_make(HALO_STATUS_DEADLINE_EXCEEDED,
                          "halod at %s did not answer within the request "
                          "timeout of %d ms (waiting for %s)",
                          client->address, client->request_timeout_ms, what);
}

// What a socket request waits for before it is sent, besides the ring's
// drain (HALO_CLIENT_WAIT_RING_DRAIN), named in the DEADLINE_EXCEEDED of a
// call whose timeout the wait used up.
#define HALO_CLIENT_WAIT_SOCKET \
  "other threads' requests on the socket, which halod did not answer"

uint64_t halo_client_max_message_bytes(const halo_client_t *client) {
  return client->max_message_bytes ? client->max_message_bytes
                                   : HALO_WIRE_MAX_MESSAGE_BYTES;
}

uint64_t halo_client_write_chunk_bytes(const halo_client_t *client) {
  uint64_t chunk = HALO_WIRE_MAX_CHUNK_BYTES;
  // halod's max-message-bytes is at least 4096: room is left either way.
  if (client->max_message_bytes > HALO_CLIENT_WRITE_FRAMING_BYTES &&
      client->max_message_bytes - HALO_CLIENT_WRITE_FRAMING_BYTES < chunk) {
    chunk = client->max_message_bytes - HALO_CLIENT_WRITE_FRAMING_BYTES;
  }
  return chunk;
}

// Refuses |request| where its message would exceed what halod accepts: nng
// would drop the connection, ending the session and everything it holds,
// and halod could not say why.
static halo_status_t halo_client_check_size(
    const halo_client_t *client, const halo_wire_request_t *request) {
  if (client->max_message_bytes == 0) return NULL;  // before Hello's reply
  size_t size = halo__wire__request__get_packed_size(request);
  if (size + HALO_CLIENT_MESSAGE_HEADER_BYTES <= client->max_message_bytes) {
    return NULL;
  }
  const ProtobufCFieldDescriptor *field =
      protobuf_c_message_descriptor_get_field(&halo__wire__request__descriptor,
                                              (unsigned)request->body_case);
  return halo_status_make(
      HALO_STATUS_RESOURCE_EXHAUSTED,
      "request %s of %zu bytes (with nng's header) exceeds the %llu bytes "
      "halod at %s accepts in one message (its setting max-message-bytes); "
      "not sent: a larger message would end the session. Send less in one "
      "request (a smaller recording, fewer bindings) or raise "
      "max-message-bytes",
      field ? field->name : "?", size + HALO_CLIENT_MESSAGE_HEADER_BYTES,
      (unsigned long long)client->max_message_bytes, client->address);
}

halo_status_t halo_client_call(halo_client_t *client,
                               const halo_wire_request_t *request,
                               halo_wire_response_t **out_response) {
  return halo_client_call_until(client, request, 0, out_response);
}

halo_status_t halo_client_call_until(halo_client_t *client,
                                     const halo_wire_request_t *request,
                                     int64_t limit_ns,
                                     halo_wire_response_t **out_response) {
  *out_response = NULL;
  // Before any nng call: a forked child must not reach the parent's session.
  HALO_RETURN_IF_ERROR(halo_client_check_process(client));
  HALO_RETURN_IF_ERROR(halo_client_check_size(client, request));
  if (atomic_load(&client->lost)) return halo_client_lost_status(client);
  // A call with a limit of its own takes its deadline at once, so that the
  // ring's drain and other threads' requests wait no longer than it either.
  int64_t timeout_ns = (int64_t)client->request_timeout_ms * 1000000;
  int64_t deadline_ns = 0;
  int64_t start_ns = 0;  // known now where limited, else from the deadline
  if (limit_ns > 0) {
    int64_t own = halo_client_deadline_ns(client, &deadline_ns);
    start_ns = own - timeout_ns;
    if (limit_ns < own) deadline_ns = limit_ns;
  }
  // Nothing sent on the socket may overtake a record in the ring.
  HALO_RETURN_IF_ERROR(halo_client_ring_flush(client, &deadline_ns));
  // The drain took the call's deadline if it had to wait (so its start is
  // known); where it used up the timeout, it is what the message names.
  int64_t drained_ns = 0;
  if (deadline_ns != 0) {
    int64_t now = halo_clock_now_ns();
    if (now >= deadline_ns) {
      return halo_client_deadline_status(client, HALO_CLIENT_WAIT_RING_DRAIN);
    }
    if (!start_ns) start_ns = deadline_ns - timeout_ns;
    drained_ns = now - start_ns;
  }
  // One request at a time on the socket: the time a call waits here for
  // other threads' requests counts toward its timeout, as does the ring's
  // drain, so that no call outlasts its request timeout (with halod stopped,
  // the 64th of 64 threads would otherwise wait 64 timeouts).
  if (!halo_client_lock_until(client, &client->call_mutex, &deadline_ns)) {
    return halo_client_deadline_status(client, HALO_CLIENT_WAIT_SOCKET);
  }
  int64_t deadline = halo_client_deadline_ns(client, &deadline_ns);
  if (!start_ns) start_ns = deadline - timeout_ns;
  int64_t sent_ns = halo_clock_now_ns();
  if (sent_ns >= deadline) {
    pthread_mutex_unlock(&client->call_mutex);
    return halo_client_deadline_status(client, HALO_CLIENT_WAIT_SOCKET);
  }
  // Each step gets what is left of |deadline| (halo_wire_call_retrying).
  // A request halod refused for now (an executable load past its bounds on
  // loads waiting) is sent again while the call's timeout has not passed.
  halo_status_t status = halo_wire_call_retrying(
      client->ctx, client->aio, &client->lost, request, deadline, out_response);
  pthread_mutex_unlock(&client->call_mutex);
  if (status && atomic_load(&client->lost) &&
      halo_status_code(status) != HALO_STATUS_UNAVAILABLE) {
    halo_status_free(status);
    return halo_client_lost_status(client);
  }
  if (halo_status_code(status) == HALO_STATUS_DEADLINE_EXCEEDED &&
      halo_clock_now_ns() >= deadline) {
    // The call's own timeout ran out waiting for the reply (not a code
    // halod answered): say how much of it went before the request was sent.
    int64_t waited_ns = sent_ns - start_ns;
    char what[256] = "its reply to the request";
    if (waited_ns >= 1000000) {
      snprintf(what, sizeof(what),
               "its reply to the request, sent %lld ms into the timeout "
               "(%lld ms waiting for halod to take the submission ring's "
               "records, %lld ms for other threads' requests on the socket)",
               (long long)(waited_ns / 1000000),
               (long long)(drained_ns / 1000000),
               (long long)((waited_ns - drained_ns) / 1000000));
    }
    halo_status_free(status);
    status = halo_client_deadline_status(client, what);
  }
  return status;
}

halo_status_t halo_client_call_status(halo_client_t *client,
                                      const halo_wire_request_t *request) {
  halo_wire_response_t *response = NULL;
  halo_status_t status = halo_client_call(client, request, &response);
  if (response) halo__wire__response__free_unpacked(response, NULL);
  return status;
}

halo_status_t halo_client_export(halo_client_t *client,
                                 const halo_wire_request_t *request,
                                 halo_token_t *out_token) {
  halo_wire_response_t *response;
  HALO_RETURN_IF_ERROR(halo_client_call(client, request, &response));
  halo_status_t status = NULL;
  if (response->body_case != HALO__WIRE__RESPONSE__BODY_EXPORTED ||
      response->exported->token.len != sizeof(out_token->bytes)) {
    status = halo_status_make(HALO_STATUS_INTERNAL,
                              "halod answered an export with no token");
  } else {
    memcpy(out_token->bytes, response->exported->token.data,
           sizeof(out_token->bytes));
  }
  halo__wire__response__free_unpacked(response, NULL);
  return status;
}

// Polls |fd| for |events| until one comes or |deadline_ns| passes: 1
// (an event, or the socket hung up or failed: the next call on it says
// which), 0 (the deadline passed) or -errno (poll failed).
static int halo_client_poll_until(int fd, short events, int64_t deadline_ns) {
  for (;;) {
    int64_t remaining = deadline_ns - halo_clock_now_ns();
    if (remaining <= 0) return 0;
    int64_t ms = (remaining + 999999) / 1000000;
    struct pollfd poll_fd = {.fd = fd, .events = events};
    int rv = poll(&poll_fd, 1, ms > INT32_MAX ? INT32_MAX : (int)ms);
    if (rv > 0) return 1;
    if (rv < 0 && errno != EINTR) return -errno;
  }
}

// Waits until the fd channel |fd| has something to read (a reply, or its
// end); false if |deadline_ns| passes first.
static bool halo_client_fd_readable(int fd, int64_t deadline_ns) {
  // A failed poll: the receive says why.
  return halo_client_poll_until(fd, POLLIN, deadline_ns) != 0;
}

static const char *halo_client_fd_kind_name(uint32_t kind) {
  switch (kind) {
    case HALO_FD_REQUEST_AUTH:
      return "AUTH";
    case HALO_FD_REQUEST_SEMAPHORE_PAGE:
      return "SEMAPHORE_PAGE";
    case HALO_FD_REQUEST_ARENA:
      return "ARENA";
    case HALO_FD_REQUEST_RING:
      return "RING";
    case HALO_FD_REQUEST_DOORBELL:
      return "DOORBELL";
    case HALO_FD_REQUEST_DAEMON:
      return "DAEMON";
    default:
      return "?";
  }
}

// The fd channel sits beside the client socket: halod binds it at the
// socket's path plus ".fd". The path halod reports is its own view; in
// another mount namespace (a container with halod's socket directory mounted
// elsewhere) it names nothing, or something else. So the client derives the
// path from the address it dialed, and tries halod's only where that one
// does not exist (an address that reaches the socket through a symbolic
// link). "" if the address gives no path.
static void halo_client_fd_channel_path(const halo_client_t *client, char *out,
                                        size_t size) {
  const char *socket_path = client->address + strlen("ipc://");
  int length = snprintf(out, size, "%s.fd", socket_path);
  if (length < 0 || (size_t)length >= size) out[0] = '\0';
}

// Waits until the connect in progress on |fd| is done or |deadline_ns|
// passes: its error (SO_ERROR; 0 connected), or ETIMEDOUT.
static int halo_client_await_connect(int fd, int64_t deadline_ns) {
  int rv = halo_client_poll_until(fd, POLLOUT, deadline_ns);
  if (rv == 0) return ETIMEDOUT;
  if (rv < 0) return -rv;
  int error = 0;
  socklen_t length = sizeof(error);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
    return errno;
  }
  return error;
}

// Connects the fd channel socket |fd| (non-blocking) to |path| by
// |deadline_ns|. A blocking connect() waits for as long as halod's backlog
// of fd channel connections is full (halod accepts them on its loop: a
// stopped or overloaded halod leaves them waiting), past the request
// timeout. On Linux a non-blocking connect to a Unix socket whose backlog
// is full fails EAGAIN, not EINPROGRESS: it is tried again, after short
// sleeps, until the deadline.
static halo_status_t halo_client_connect_fd_channel(const halo_client_t *client,
                                                    int fd, const char *path,
                                                    int64_t deadline_ns) {
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof(address.sun_path)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "fd channel path '%s' is too long", path);
  }
  strcpy(address.sun_path, path);
  int64_t pause_ns = 1000000;  // doubled to 16 ms
  for (;;) {
    int error = 0;
    if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
      error = errno;
    }
    if (error == EINPROGRESS || error == EALREADY) {
      error = halo_client_await_connect(fd, deadline_ns);
    }
    if (error == 0 || error == EISCONN) return NULL;
    if (error != EAGAIN && error != EINTR && error != ETIMEDOUT) {
      return halo_status_from_errno(error, "connecting the fd channel %s",
                                    path);
    }
    int64_t remaining = deadline_ns - halo_clock_now_ns();
    if (error == ETIMEDOUT || remaining <= 0) {
      return halo_status_make(
          HALO_STATUS_DEADLINE_EXCEEDED,
          "halod at %s did not accept the connection to its fd channel %s "
          "within the request timeout of %d ms (its backlog of connections "
          "waiting is full: halod is stopped or overloaded)",
          client->address, path, client->request_timeout_ms);
    }
    struct timespec pause =
        halo_clock_timespec(pause_ns < remaining ? pause_ns : remaining);
    nanosleep(&pause, NULL);
    if (pause_ns < 16000000) pause_ns *= 2;
  }
}

// Closes the fd channel after a request on it failed; the next request
// connects a new one (halo_client_fd_request). |fd_mutex| held.
static void halo_client_fd_break(halo_client_t *client) {
  if (client->fd_channel < 0) return;
  close(client->fd_channel);
  client->fd_channel = -1;
}

// Sends |request| on the fd channel and receives its reply (and the
// descriptor passed with it, *|out_fd|; -1 if none) by |deadline_ns|:
// halod answers the fd channel on its loop, as it does the socket, and a
// stopped or hung halod must not hold the call (or, at connect, the AUTH)
// for ever. |fd_mutex| held, the channel open.
//
// A request whose reply does not come in time, or whose send or receive
// fails, breaks the channel: it is closed here, and the next request
// connects a new one. The protocol numbers no requests, so a reply that
// came after its request timed out would be read as the next request's;
// and one may never come (halod drops a reply it fails to send), so
// waiting for it before the next request would leave the channel unusable
// for good. On a new connection neither can happen: the late reply, if
// any, goes to the closed one.
static halo_status_t halo_client_fd_exchange(halo_client_t *client,
                                             const halo_fd_request_t *request,
                                             int64_t deadline_ns,
                                             halo_fd_reply_t *out_reply,
                                             int *out_fd) {
  *out_fd = -1;
  halo_status_t status =
      halo_fd_send(client->fd_channel, request, sizeof(*request), -1);
  if (status && halo_status_code(status) == HALO_STATUS_UNAVAILABLE &&
      halo_client_fd_readable(client->fd_channel, deadline_ns)) {
    // halod refused the connection as it arrived (a limit of the fd
    // channel), before this request reached it, and closed it: its reply
    // says why, and waits to be read (a closed channel is readable at
    // once, so this does not wait).
    halo_status_t refused =
        halo_fd_recv(client->fd_channel, out_reply, sizeof(*out_reply), out_fd);
    if (!refused && out_reply->code != HALO_STATUS_OK) {
      halo_status_free(status);
      halo_client_fd_break(client);
      return NULL;
    }
    halo_status_free(refused);
    if (*out_fd >= 0) close(*out_fd);
    *out_fd = -1;
  }
  if (!status) {
    if (halo_client_fd_readable(client->fd_channel, deadline_ns)) {
      status = halo_fd_recv(client->fd_channel, out_reply, sizeof(*out_reply),
                            out_fd);
    } else {
      char what[96];
      snprintf(what, sizeof(what), "its reply to fd channel request %s %llu",
               halo_client_fd_kind_name(request->kind),
               (unsigned long long)request->id);
      status = halo_client_deadline_status(client, what);
    }
  }
  if (status) halo_client_fd_break(client);
  return status;
}

// The result of a request of |kind| that got |reply| and descriptor |fd|
// (taken): halod's refusal, or the descriptor in *|out_fd| (-1 for AUTH,
// which passes none) and its size.
static halo_status_t halo_client_fd_reply_status(uint32_t kind,
                                                 halo_fd_reply_t *reply, int fd,
                                                 int *out_fd,
                                                 uint64_t *out_size) {
  *out_fd = -1;
  if (reply->code != HALO_STATUS_OK) {
    if (fd >= 0) close(fd);
    reply->message[sizeof(reply->message) - 1] = '\0';
    halo_status_code_t code = (unsigned)reply->code < HALO_STATUS_CODE_COUNT
                                  ? (halo_status_code_t)reply->code
                                  : HALO_STATUS_UNKNOWN;
    return halo_status_make(code, "fd channel: %s", reply->message);
  }
  if (kind == HALO_FD_REQUEST_AUTH && fd >= 0) {
    close(fd);  // AUTH passes none
    fd = -1;
  }
  if (kind != HALO_FD_REQUEST_AUTH && fd < 0) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "fd channel: reply carried no descriptor");
  }
  *out_fd = fd;
  if (out_size) *out_size = reply->size;
  return NULL;
}

// Connects an fd channel to |path| and authenticates it as the session's
// (AUTH), by |deadline_ns|; it is |client->fd_channel| then. |fd_mutex|
// held and no channel open.
static halo_status_t halo_client_fd_attach(halo_client_t *client,
                                           const char *path,
                                           int64_t deadline_ns) {
  // Non-blocking for the connect only (bounded by the request timeout); the
  // requests then send and receive blocking, after poll().
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return halo_status_from_errno(errno, "fd channel socket");
  halo_status_t status =
      halo_client_connect_fd_channel(client, fd, path, deadline_ns);
  if (!status) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      status = halo_status_from_errno(errno, "fd channel fcntl(O_NONBLOCK)");
    }
  }
  if (status) {
    close(fd);
    return status;
  }
  client->fd_channel = fd;
  halo_fd_request_t request;
  memset(&request, 0, sizeof(request));
  request.magic = HALO_FD_CHANNEL_MAGIC;
  request.kind = HALO_FD_REQUEST_AUTH;
  request.id = client->session_id;
  memcpy(request.token, client->token, sizeof(request.token));
  halo_fd_reply_t reply;
  int passed = -1;
  status =
      halo_client_fd_exchange(client, &request, deadline_ns, &reply, &passed);
  int ignored = -1;
  if (!status) {
    status = halo_client_fd_reply_status(HALO_FD_REQUEST_AUTH, &reply, passed,
                                         &ignored, NULL);
  }
  if (status) halo_client_fd_break(client);  // refused: of no use
  return status;
}

// Sends one fd channel request and receives the reply (and its fd), within
// the request timeout (halo_client_fd_exchange). Where an earlier request
// broke the channel, a new one is connected first, within the same
// timeout.
static halo_status_t halo_client_fd_request(halo_client_t *client,
                                            uint32_t kind, uint64_t id,
                                            int *out_fd, uint64_t *out_size) {
  *out_fd = -1;
  // The channel is the parent's in a forked child.
  HALO_RETURN_IF_ERROR(halo_client_check_process(client));
  halo_fd_request_t request;
  memset(&request, 0, sizeof(request));
  request.magic = HALO_FD_CHANNEL_MAGIC;
  request.kind = kind;
  request.id = id;
  int64_t deadline_ns = 0;
  if (!halo_client_lock_until(client, &client->fd_mutex, &deadline_ns)) {
    return halo_client_deadline_status(
        client,
        "another thread's fd channel request, which halod did not "
        "answer");
  }
  int64_t deadline = halo_client_deadline_ns(client, &deadline_ns);
  halo_status_t status = NULL;
  if (client->fd_channel < 0) {
    status = halo_status_annotate(
        halo_client_fd_attach(client, client->fd_channel_path, deadline),
        "connecting the fd channel anew (a request on it failed or timed "
        "out before)");
  }
  halo_fd_reply_t reply;
  int fd = -1;
  if (!status) {
    status = halo_client_fd_exchange(client, &request, deadline, &reply, &fd);
  }
  pthread_mutex_unlock(&client->fd_mutex);
  if (status) return status;
  return halo_client_fd_reply_status(kind, &reply, fd, out_fd, out_size);
}

halo_status_t halo_client_fd_get(halo_client_t *client, uint32_t kind,
                                 uint64_t id, int *out_fd, uint64_t *out_size);
halo_status_t halo_client_fd_get(halo_client_t *client, uint32_t kind,
                                 uint64_t id, int *out_fd, uint64_t *out_size) {
  return halo_client_fd_request(client, kind, id, out_fd, out_size);
}

static halo_status_t halo_client_open_fd_channel(halo_client_t *client,
                                                 const char *reported_path) {
  int64_t deadline_ns = 0;
  int64_t deadline = halo_client_deadline_ns(client, &deadline_ns);
  char path[sizeof(client->fd_channel_path)];
  halo_client_fd_channel_path(client, path, sizeof(path));
  pthread_mutex_lock(&client->fd_mutex);
  halo_status_t status =
      path[0] ? halo_client_fd_attach(client, path, deadline)
              : halo_status_make(HALO_STATUS_NOT_FOUND, "no path");
  if (status && halo_status_code(status) == HALO_STATUS_NOT_FOUND &&
      strcmp(path, reported_path) != 0) {
    halo_status_free(status);
    snprintf(path, sizeof(path), "%s", reported_path);
    status = halo_client_fd_attach(client, path, deadline);
  }
  // Where the channel is connected anew after a failed request.
  if (!status) {
    snprintf(client->fd_channel_path, sizeof(client->fd_channel_path), "%s",
             path);
  }
  // The daemon's pid comes from the kernel, not from a message: 0 where
  // halod is outside this process's pid namespace (a container).
  struct ucred credentials;
  socklen_t length = sizeof(credentials);
  if (!status && getsockopt(client->fd_channel, SOL_SOCKET, SO_PEERCRED,
                            &credentials, &length) != 0) {
    status = halo_status_from_errno(errno, "fd channel SO_PEERCRED");
  }
  pthread_mutex_unlock(&client->fd_mutex);
  if (status) return status;
  client->daemon_pid = credentials.pid;
  // A pidfd of halod tells waiters when the daemon is gone, in any pid
  // namespace. A halod without DAEMON requests refuses it: then the pid.
  int pidfd = -1;
  halo_status_free(
      halo_client_fd_request(client, HALO_FD_REQUEST_DAEMON, 0, &pidfd, NULL));
  if (pidfd < 0 && credentials.pid > 0) {
    // A halod that passes no pidfd, in this pid namespace.
    pidfd = (int)syscall(SYS_pidfd_open, credentials.pid, 0);
    if (pidfd < 0) {
      return halo_status_from_errno(errno, "pidfd_open(%d)", credentials.pid);
    }
  }
  if (pidfd < 0) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "halod passes no pidfd of itself on its fd "
                            "channel and runs in a pid namespace this process "
                            "cannot see: update halod");
  }
  client->daemon_pidfd = pidfd;
  return NULL;
}

static halo_status_t halo_client_hello(halo_client_t *client,
                                       const char *client_name) {
  Halo__Wire__Hello hello = HALO__WIRE__HELLO__INIT;
  hello.protocol_version = HALO_PROTOCOL_VERSION;
  hello.client_name = (char *)client_name;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_HELLO;
  request.hello = &hello;
  halo_wire_response_t *response;
  halo_status_t status = halo_client_call(client, &request, &response);
  // The connection closed under the Hello (halod's answer, an error
  // included, leaves the aio's result 0).
  int closed = status ? nng_aio_result(client->aio) : 0;
  if (status && (atomic_load(&client->lost) || closed == NNG_ECONNRESET ||
                 closed == NNG_ECONNSHUT || closed == NNG_ECLOSED)) {
    // halod closes a connection past its limits as it arrives, before it
    // reads anything (a later close could lose a message arriving on it, in
    // nng 1.5.2): it cannot say why, so the client does.
    halo_status_t lost = halo_status_make(
        HALO_STATUS_UNAVAILABLE,
        "halod at %s closed the connection before answering Hello (%s): it "
        "stopped, or it refused the connection as it arrived, past its limit "
        "connections or past uid-connections for this uid (its metrics "
        "halo_connections_limited_total and halo_sessions_uid_limited_total "
        "count such refusals)",
        client->address, closed ? nng_strerror(closed) : "connection lost");
    halo_status_free(status);
    return lost;
  }
  HALO_RETURN_IF_ERROR(status);
  const Halo__Wire__HelloReply *reply = response->hello;
  if (response->body_case != HALO__WIRE__RESPONSE__BODY_HELLO ||
      reply->session_token.len != sizeof(client->token)) {
    status = halo_status_make(HALO_STATUS_INTERNAL,
                              "halod answered Hello with a malformed reply");
  } else {
    client->session_id = reply->session_id;
    client->incarnation = reply->incarnation;
    client->max_message_bytes = reply->max_message_bytes;
    memcpy(client->token, reply->session_token.data, sizeof(client->token));
    status = halo_client_open_fd_channel(client, reply->fd_channel_path);
    if (!status) halo_client_ring_open(client);
  }
  halo__wire__response__free_unpacked(response, NULL);
  return status;
}

halo_status_t halo_client_connect(const halo_client_options_t *options,
                                  halo_client_t **out_client) {
  HALO_CHECK_ARG(out_client, "out_client must not be NULL");
  *out_client = NULL;
  const char *address = options ? options->address : NULL;
  if (!address || !*address) address = getenv("HALO_ADDRESS");
  if (!address || !*address) address = "ipc:///run/halo/halo.sock";
  HALO_CHECK_ARG(!options || options->request_timeout_ms >= 0,
                 "options->request_timeout_ms is %d: a request timeout is "
                 "a number of milliseconds (0: the default, 30000)",
                 (int)options->request_timeout_ms);
  HALO_CHECK_ARG(strncmp(address, "ipc://", 6) == 0,
                 "address '%s' is not an ipc:// address (halo clients share "
                 "memory with the daemon)",
                 address);
  // Not in a child forked after libhalo used nng (nng would abort it).
  pid_t pid;
  HALO_RETURN_IF_ERROR(halo_client_claim_nng(&pid));
  halo_client_t *client = calloc(1, sizeof(*client));
  if (!client) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  client->pid = pid;
  snprintf(client->address, sizeof(client->address), "%s", address);
  client->fd_channel = -1;
  client->daemon_pidfd = -1;
  pthread_mutex_init(&client->call_mutex, NULL);
  pthread_mutex_init(&client->fd_mutex, NULL);
  pthread_mutex_init(&client->state_mutex, NULL);
  pthread_mutex_init(&client->ring.mutex, NULL);
  client->ring.doorbell = -1;
  halo_u64_map_initialize(&client->pages);
  halo_u64_map_initialize(&client->arenas);
  client->objects.next = client->objects.prev = &client->objects;
  // From here a fork takes its |state_mutex| (halo_client_on_fork_prepare).
  halo_client_register(client);

  int timeout_ms = options && options->request_timeout_ms > 0
                       ? options->request_timeout_ms
                       : 30000;
  client->request_timeout_ms = timeout_ms;
  int rv = nng_req0_open(&client->socket);
  if (rv == 0) {
    // A session is tied to one connection: never resend a request on a new
    // one, and do not redial behind the client's back.
    nng_socket_set_ms(client->socket, NNG_OPT_REQ_RESENDTIME,
                      NNG_DURATION_INFINITE);
    rv = nng_aio_alloc(&client->aio, NULL, NULL);
  }
  if (rv == 0) rv = nng_ctx_open(&client->ctx, client->socket);
  bool timed_out = false;
  if (rv == 0) {
    // Bounded by the request timeout: a stopped halod's kernel accepts the
    // connection and nng would wait its own 10 s.
    rv = halo_wire_dial_within(
        client->socket, address, halo_client_on_pipe_removed, client,
        (int64_t)client->request_timeout_ms * 1000000, &timed_out);
    client->socket_closed = timed_out;
  }
  halo_status_t status = NULL;
  if (timed_out) {
    status = halo_status_make(
        HALO_STATUS_DEADLINE_EXCEEDED,
        "halod at %s did not complete the connection within the request "
        "timeout of %d ms (is it stopped, or too busy to answer?)",
        address, timeout_ms);
  } else if (rv != 0) {
    char target[320];
    snprintf(target, sizeof(target), "no halod at %s", address);
    status = halo_wire_dial_failed(
        rv, target,
        "this process may not open halod's socket: it belongs to halod's "
        "socket-group, `halo` in the packages; add the user to that group, "
        "or a container's supplementalGroups",
        "is halod running, and listening there? HALO_ADDRESS or the "
        "program's address names the socket; the default is "
        "ipc:///run/halo/halo.sock");
  }
  if (!status) {
    char name[64] = "";
    const char *client_name = options ? options->client_name : NULL;
    if (!client_name) {
      FILE *comm = fopen("/proc/self/comm", "r");
      if (comm) {
        if (fgets(name, sizeof(name), comm)) name[strcspn(name, "\n")] = '\0';
        fclose(comm);
      }
      client_name = name;
    }
    status = halo_client_hello(client, client_name);
  }
  if (status) {
    halo_client_close(client);
    return status;
  }
  *out_client = client;
  return NULL;
}

// How long halo_client_close waits for nng to close the socket. nng 1.5.2
// can stop its reaper for good when a connection closes while a message is
// half transferred (the daemon bounds its own close the same way); a client
// that reconnects to rebuild must not hang in the close of the old one.
#define HALO_CLIENT_CLOSE_TIMEOUT_MS 2000

// The socket's close (common/bounded_call.h): nng_close, then its aio.
static void halo_client_close_socket(void *argument) {
  halo_client_t *client = argument;
  if (!client->socket_closed) nng_close(client->socket);
  if (client->aio) nng_aio_free(client->aio);
}

void halo_client_close(halo_client_t *client) {
  if (!client) return;
  // Closing ends the session: the daemon releases everything the session
  // held in one go (and fails semaphores it created that others imported,
  // as for a crash). So no per-object release requests: the objects the
  // caller did not release are only freed and unmapped here.
  //
  // In a forked child the client is a copy of the parent's: its session is
  // the parent's and nng would abort the child. Only the child's memory,
  // mappings and descriptors go (the release requests fail before nng:
  // halo_client_call); the socket is left as it is, nothing is sent, and
  // nng's state in the child (its copy of the socket and aio) is never
  // touched, nor freed. |state_mutex| is free there and the state whole
  // (the fork handlers above); the locks held across round trips may have
  // been held by threads of the parent at the fork, and are not touched.
  bool inherited = halo_client_inherited(client);
  atomic_store(&client->lost, true);
  for (;;) {
    pthread_mutex_lock(&client->state_mutex);
    halo_object_link_t *link = client->objects.prev;
    pthread_mutex_unlock(&client->state_mutex);
    if (link == &client->objects) break;
    switch (link->kind) {
      case HALO_OBJECT_BUFFER:
        halo_buffer_release_link(link);
        break;
      case HALO_OBJECT_SEMAPHORE:
        halo_semaphore_release_link(link);
        break;
      case HALO_OBJECT_EXECUTABLE:
        halo_executable_release_link(link);
        break;
      case HALO_OBJECT_COMMAND_BUFFER:
        halo_command_buffer_release_link(link);
        break;
      case HALO_OBJECT_QUEUE:
        halo_queue_release_link(link);
        break;
    }
  }
  bool abandoned =
      !inherited &&
      !halo_bounded_call(
          halo_client_close_socket, client,
          halo_clock_now_ns() + HALO_CLIENT_CLOSE_TIMEOUT_MS * 1000000ll);
  halo_client_ring_close(client);
  if (client->fd_channel >= 0) close(client->fd_channel);
  if (client->daemon_pidfd >= 0) close(client->daemon_pidfd);
  halo_u64_map_deinitialize(&client->pages);
  halo_u64_map_deinitialize(&client->arenas);
  if (!inherited) {
    pthread_mutex_destroy(&client->call_mutex);
    pthread_mutex_destroy(&client->fd_mutex);
    pthread_mutex_destroy(&client->ring.mutex);
  }
  // Registered until its state lock goes: a fork meanwhile (another
  // thread's) waits for the object list's sections above instead of
  // leaving the child this client's list half unlinked and its lock held.
  halo_client_unregister(client);
  pthread_mutex_destroy(&client->state_mutex);
  // Abandoned, the close goes on with the client's socket and aio, and nng
  // may still run the pipe's removal callback, which sets |lost| and aborts
  // |aio|: the client stays allocated for them (a leak, not a use after
  // free).
  if (abandoned) return;
  free(client);
}

uint64_t halo_client_session_id(const halo_client_t *client) {
  return client ? client->session_id : 0;
}

int32_t halo_client_daemon_pid(const halo_client_t *client) {
  return client ? client->daemon_pid : 0;
}

halo_status_t halo_client_ping(halo_client_t *client) {
  HALO_CHECK_ARG(client, "client must not be NULL");
  Halo__Wire__Ping ping = HALO__WIRE__PING__INIT;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_PING;
  request.ping = &ping;
  return halo_client_call_status(client, &request);
}

static halo_status_t halo_client_devices(halo_client_t *client,
                                         halo_wire_response_t **out_response) {
  Halo__Wire__DeviceList list = HALO__WIRE__DEVICE_LIST__INIT;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_DEVICE_LIST;
  request.device_list = &list;
  HALO_RETURN_IF_ERROR(halo_client_call(client, &request, out_response));
  if ((*out_response)->body_case != HALO__WIRE__RESPONSE__BODY_DEVICE_LIST) {
    halo__wire__response__free_unpacked(*out_response, NULL);
    *out_response = NULL;
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "halod answered DeviceList with another body");
  }
  return NULL;
}

halo_status_t halo_client_device_count(halo_client_t *client,
                                       uint32_t *out_count) {
  HALO_CHECK_ARG(out_count, "out_count must not be NULL");
  *out_count = 0;
  HALO_CHECK_ARG(client, "client must not be NULL");
  halo_wire_response_t *response;
  HALO_RETURN_IF_ERROR(halo_client_devices(client, &response));
  *out_count = (uint32_t)response->device_list->n_devices;
  halo__wire__response__free_unpacked(response, NULL);
  return NULL;
}

halo_status_t halo_client_device_info(halo_client_t *client, uint32_t ordinal,
                                      halo_device_info_t *out_info) {
  HALO_CHECK_ARG(out_info, "out_info must not be NULL");
  memset(out_info, 0, sizeof(*out_info));
  HALO_CHECK_ARG(client, "client must not be NULL");
  halo_wire_response_t *response;
  HALO_RETURN_IF_ERROR(halo_client_devices(client, &response));
  const Halo__Wire__DeviceListReply *list = response->device_list;
  halo_status_t status = NULL;
  if (ordinal >= list->n_devices) {
    status = halo_status_make(HALO_STATUS_OUT_OF_RANGE,
                              "device %u does not exist (halod has %zu)",
                              ordinal, list->n_devices);
  } else {
    const Halo__Wire__DeviceInfo *info = list->devices[ordinal];
    out_info->ordinal = info->ordinal;
    snprintf(out_info->driver, sizeof(out_info->driver), "%s", info->driver);
    snprintf(out_info->name, sizeof(out_info->name), "%s", info->name);
    out_info->memory_bytes = info->memory_bytes;
    out_info->compute_major = info->compute_major;
    out_info->compute_minor = info->compute_minor;
    out_info->multiprocessor_count = info->multiprocessor_count;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return status;
}

// Maps a memfd from the fd channel, shared by every object on it.
static halo_status_t halo_client_map(halo_client_t *client, halo_u64_map_t *map,
                                     uint32_t kind, uint64_t id,
                                     uint64_t expected_size, int prot,
                                     void **out_pointer) {
  *out_pointer = NULL;
  pthread_mutex_lock(&client->state_mutex);
  halo_mapping_t *mapping = halo_u64_map_get(map, id);
  if (mapping) {
    ++mapping->references;
    *out_pointer = mapping->pointer;
    pthread_mutex_unlock(&client->state_mutex);
    return NULL;
  }
  pthread_mutex_unlock(&client->state_mutex);

  int fd;
  uint64_t size;
  HALO_RETURN_IF_ERROR(halo_client_fd_request(client, kind, id, &fd, &size));
  halo_status_t status = NULL;
  if (expected_size && size != expected_size) {
    status = halo_status_make(HALO_STATUS_INTERNAL,
                              "fd channel: object %llu has %llu bytes, "
                              "expected %llu",
                              (unsigned long long)id, (unsigned long long)size,
                              (unsigned long long)expected_size);
  }
  void *pointer = NULL;
  if (!status) status = halo_memfd_map(fd, size, prot, &pointer);
  close(fd);
  if (status) return status;

  pthread_mutex_lock(&client->state_mutex);
  mapping = halo_u64_map_get(map, id);
  if (mapping) {
    // Another thread mapped it meanwhile: use theirs.
    ++mapping->references;
    *out_pointer = mapping->pointer;
    pthread_mutex_unlock(&client->state_mutex);
    munmap(pointer, size);
    return NULL;
  }
  mapping = calloc(1, sizeof(*mapping));
  if (mapping) {
    mapping->pointer = pointer;
    mapping->size = size;
    mapping->references = 1;
    status = halo_u64_map_put(map, id, mapping);
    if (status) free(mapping);
  } else {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  pthread_mutex_unlock(&client->state_mutex);
  if (status) {
    munmap(pointer, size);
    return status;
  }
  *out_pointer = pointer;
  return NULL;
}

static void halo_client_unmap(halo_client_t *client, halo_u64_map_t *map,
                              uint64_t id) {
  pthread_mutex_lock(&client->state_mutex);
  halo_mapping_t *mapping = halo_u64_map_get(map, id);
  if (mapping && --mapping->references == 0) {
    halo_u64_map_remove(map, id);
  } else {
    mapping = NULL;
  }
  pthread_mutex_unlock(&client->state_mutex);
  if (mapping) {
    munmap(mapping->pointer, mapping->size);
    free(mapping);
  }
}

halo_status_t halo_client_map_page(halo_client_t *client, uint64_t page_id,
                                   void **out_pointer) {
  // Read-only: the page is sealed against new writable mappings anyway.
  return halo_client_map(client, &client->pages, HALO_FD_REQUEST_SEMAPHORE_PAGE,
                         page_id, 0, PROT_READ, out_pointer);
}

void halo_client_unmap_page(halo_client_t *client, uint64_t page_id) {
  halo_client_unmap(client, &client->pages, page_id);
}

halo_status_t halo_client_map_arena(halo_client_t *client, uint64_t arena_id,
                                    uint64_t arena_size, void **out_pointer) {
  return halo_client_map(client, &client->arenas, HALO_FD_REQUEST_ARENA,
                         arena_id, arena_size, PROT_READ | PROT_WRITE,
                         out_pointer);
}

void halo_client_unmap_arena(halo_client_t *client, uint64_t arena_id) {
  halo_client_unmap(client, &client->arenas, arena_id);
}

void halo_client_track(halo_client_t *client, halo_object_link_t *link,
                       halo_object_kind_t kind) {
  link->kind = kind;
  pthread_mutex_lock(&client->state_mutex);
  link->prev = client->objects.prev;
  link->next = &client->objects;
  client->objects.prev->next = link;
  client->objects.prev = link;
  pthread_mutex_unlock(&client->state_mutex);
}

void halo_client_untrack(halo_client_t *client, halo_object_link_t *link) {
  pthread_mutex_lock(&client->state_mutex);
  link->prev->next = link->next;
  link->next->prev = link->prev;
  link->prev = link->next = link;
  pthread_mutex_unlock(&client->state_mutex);
}
