// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/fd_server.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fd_channel.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/arena.h"
#include "daemon/fd_closer.h"
#include "daemon/ring.h"
#include "daemon/semaphore.h"
#include "daemon/session.h"
#include "daemon/socket_rights.h"

struct halod_fd_connection_t {
  uv_poll_t poll;
  halod_fd_server_t *server;
  halod_fd_closer_t *closer;  // a reference of its own
  int fd;
  uint32_t peer_uid;
  uint32_t peer_pid;
  uint64_t tenant;           // what it counts against (daemon/tenant.h)
  uint64_t accepted_ms;      // uv_now: closed unless AUTH comes in time
  halod_session_t *session;  // NULL until AUTH succeeds
  // Links: all connections of the server; connections of one session.
  halod_fd_connection_t *next;
  halod_fd_connection_t *prev;
  halod_fd_connection_t *session_next;
};

struct halod_fd_server_t {
  halod_t *daemon;
  uv_poll_t poll;
  int fd;
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  // The socket file it bound (device and inode): removed at the end only
  // if still there, not one another halod put in its place meanwhile.
  dev_t bound_dev;
  ino_t bound_ino;
  halod_fd_connection_t *connections;
  // Closes connections not authenticated within fd-channel-auth-ms.
  uv_timer_t auth_timer;
  // Kept open to be closed when accept fails with EMFILE: the pending
  // connection is then accepted and closed, instead of staying readable
  // and spinning the loop.
  int spare_fd;
  // A pidfd of halod itself, passed to an authenticated DAEMON request: the
  // client's sign that halod is gone, valid in any pid namespace.
  int pidfd;
  // Closes what clients control off the loop (daemon/fd_closer.h).
  halod_fd_closer_t *closer;
  int open_handles;    // poll and timer; freed when both closed
  uint64_t refused;    // connections refused since the last warning
  uint64_t warned_ms;  // uv_now of the last warning
};

static void halod_fd_connection_on_closed(uv_handle_t *handle) {
  halod_fd_connection_t *connection = handle->data;
  // Its own reference: the server may be gone by now.
  halod_fd_closer_close_connection(connection->closer, connection->fd,
                                   connection->peer_uid);
  halod_fd_closer_destroy(connection->closer);
  free(connection);
}

static void halod_fd_connection_close(halod_fd_connection_t *connection) {
  halod_fd_server_t *server = connection->server;
  if (connection->prev) {
    connection->prev->next = connection->next;
  } else {
    server->connections = connection->next;
  }
  if (connection->next) connection->next->prev = connection->prev;
  if (connection->session) {
    halod_fd_connection_t **link = &connection->session->fd_connections;
    while (*link && *link != connection) link = &(*link)->session_next;
    if (*link) *link = connection->session_next;
    connection->session = NULL;
  }
  uv_poll_stop(&connection->poll);
  uv_close((uv_handle_t *)&connection->poll, halod_fd_connection_on_closed);
}

// Sends a reply of |status| (taken) with descriptor |fd| (-1: none) on the
// fd channel connection |socket_fd|.
static void halod_fd_send_reply(int socket_fd, halo_status_t status, int fd,
                                uint64_t size) {
  halo_fd_reply_t reply;
  memset(&reply, 0, sizeof(reply));
  reply.code = (int32_t)halo_status_code(status);
  reply.size = size;
  snprintf(reply.message, sizeof(reply.message), "%s",
           halo_status_message(status));
  halo_status_free(status);
  halo_status_t send_status =
      halo_fd_send(socket_fd, &reply, sizeof(reply), fd);
  if (send_status) {
    // The client closed its end (it exited, or its request timed out and
    // it connected a new channel): nobody waits for the reply. Otherwise
    // (its receive queue full, out of memory, descriptors in flight past
    // the limit) the reply is lost and the client's request times out: a
    // real failure, warned of at most once a second (a client that floods
    // the channel without reading must not flood the log).
    static int64_t warned_ns;
    static uint64_t unwarned;
    if (halo_status_code(send_status) == HALO_STATUS_UNAVAILABLE) {
      HALO_LOG_DEBUG("fd channel: %s", halo_status_message(send_status));
    } else if (halo_clock_due(&warned_ns, halo_clock_now_ns(), 1000000000)) {
      HALO_LOG_WARN(
          "fd channel: a reply was not sent (%s); the client's request "
          "will time out (%llu more such since the last warning)",
          halo_status_message(send_status), (unsigned long long)unwarned);
      unwarned = 0;
    } else {
      ++unwarned;
    }
    halo_status_free(send_status);
  }
}

static void halod_fd_reply(halod_fd_connection_t *connection,
                           halo_status_t status, int fd, uint64_t size) {
  halod_fd_send_reply(connection->fd, status, fd, size);
}

static halo_status_t halod_fd_authenticate(halod_fd_connection_t *connection,
                                           const halo_fd_request_t *request) {
  halod_t *daemon = connection->server->daemon;
  if (connection->session) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "fd channel already authenticated");
  }
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions.by_id, request->id);
  // The same answer for an unknown session and a wrong token: no oracle.
  bool token_ok = false;
  if (session) {
    uint8_t difference = 0;
    for (size_t i = 0; i < sizeof(session->token); ++i) {
      difference |= session->token[i] ^ request->token[i];
    }
    token_ok = difference == 0;
  }
  if (!session || !token_ok || !session->hello_done) {
    return halo_status_make(HALO_STATUS_UNAUTHENTICATED,
                            "unknown session or wrong token");
  }
  if (session->uid != connection->peer_uid ||
      session->pid != connection->peer_pid) {
    HALO_LOG_WARN(
        "fd channel: pid %u uid %u presented the token of session "
        "%llu (pid %u uid %u); refused",
        connection->peer_pid, connection->peer_uid,
        (unsigned long long)session->id, session->pid, session->uid);
    return halo_status_make(HALO_STATUS_PERMISSION_DENIED,
                            "peer credentials (pid %u, uid %u) are not those "
                            "of the session",
                            connection->peer_pid, connection->peer_uid);
  }
  connection->session = session;
  connection->session_next = session->fd_connections;
  session->fd_connections = connection;
  return NULL;
}

static void halod_fd_serve(halod_fd_connection_t *connection,
                           const halo_fd_request_t *request) {
  halod_t *daemon = connection->server->daemon;
  if (request->magic != HALO_FD_CHANNEL_MAGIC) {
    halod_fd_reply(connection,
                   halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                    "bad magic 0x%x", request->magic),
                   -1, 0);
    return;
  }
  if (request->kind == HALO_FD_REQUEST_AUTH) {
    halod_fd_reply(connection, halod_fd_authenticate(connection, request), -1,
                   0);
    return;
  }
  halod_session_t *session = connection->session;
  if (!session) {
    halod_fd_reply(
        connection,
        halo_status_make(HALO_STATUS_UNAUTHENTICATED, "authenticate first"), -1,
        0);
    return;
  }
  if (request->kind == HALO_FD_REQUEST_SEMAPHORE_PAGE) {
    halod_timeline_page_t *page =
        halo_u64_map_get(&daemon->shared.pages, request->id);
    if (!page ||
        !halod_session_is_granted(session, HALOD_GRANT_PAGE, request->id)) {
      halod_fd_reply(connection,
                     halo_status_make(HALO_STATUS_PERMISSION_DENIED,
                                      "semaphore page %llu: the session holds "
                                      "no semaphore on it",
                                      (unsigned long long)request->id),
                     -1, 0);
      return;
    }
    halod_fd_reply(connection, NULL, page->fd, HALO_TIMELINE_PAGE_SIZE);
    return;
  }
  if (request->kind == HALO_FD_REQUEST_ARENA) {
    halod_arena_t *arena =
        halo_u64_map_get(&daemon->shared.arenas, request->id);
    if (!arena ||
        !halod_session_is_granted(session, HALOD_GRANT_ARENA, request->id)) {
      halod_fd_reply(connection,
                     halo_status_make(HALO_STATUS_PERMISSION_DENIED,
                                      "arena %llu: the session holds no "
                                      "buffer on it",
                                      (unsigned long long)request->id),
                     -1, 0);
      return;
    }
    halod_fd_reply(connection, NULL, arena->fd, arena->size);
    return;
  }
  if (request->kind == HALO_FD_REQUEST_RING) {
    // The daemon keeps only its mapping: the memfd goes to the client.
    int memfd;
    uint64_t size;
    halo_status_t status = halod_ring_create(daemon, session, &memfd, &size);
    halod_fd_reply(connection, status, status ? -1 : memfd, size);
    if (memfd >= 0) close(memfd);
    return;
  }
  if (request->kind == HALO_FD_REQUEST_DAEMON) {
    halod_fd_reply(connection, NULL, connection->server->pidfd, 0);
    return;
  }
  if (request->kind == HALO_FD_REQUEST_DOORBELL) {
    int doorbell = halod_ring_doorbell(session);
    halod_fd_reply(connection,
                   doorbell < 0
                       ? halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                                          "the session "
                                          "has no submission ring")
                       : NULL,
                   doorbell, 0);
    return;
  }
  halod_fd_reply(connection,
                 halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                  "unknown request kind %u", request->kind),
                 -1, 0);
}

// Rate-limited to one warning a second: a flood must not flood the log.
static void halod_fd_server_warn_refused(halod_fd_server_t *server,
                                         const char *reason) {
  ++server->refused;
  uint64_t now = uv_now(server->daemon->loop);
  if (server->warned_ms && now - server->warned_ms < 1000) return;
  HALO_LOG_WARN(
      "fd channel: refused %llu connection(s) since the last "
      "warning; the latest: %s",
      (unsigned long long)server->refused, reason);
  server->refused = 0;
  server->warned_ms = now;
}

static void halod_fd_connection_on_readable(uv_poll_t *poll, int status,
                                            int events) {
  halod_fd_connection_t *connection = poll->data;
  if (status < 0 || (events & UV_DISCONNECT)) {
    halod_fd_connection_close(connection);
    return;
  }
  if (halod_fd_closer_pending(connection->closer, connection->peer_uid) >=
      HALOD_FD_CLOSER_UID_LIMIT) {
    // Its uid's descriptors are not closing: read nothing more of it.
    halod_fd_server_warn_refused(
        connection->server,
        "a connection of a uid whose descriptors halod is still closing "
        "(connection closed)");
    halod_fd_connection_close(connection);
    return;
  }
  halo_fd_request_t request;
  int passed[HALO_FD_MAX_PASSED];
  size_t passed_count = 0;
  halo_status_t recv_status = halo_fd_recv_all(
      connection->fd, &request, sizeof(request), passed, &passed_count);
  if (passed_count > 0) {
    // Clients pass nothing: such a connection is closed, and what it passed
    // closed off the loop (a close can block as long as the client likes).
    for (size_t i = 0; i < passed_count; ++i) {
      halod_fd_closer_close(connection->server->closer, passed[i],
                            connection->peer_uid);
    }
    halo_status_free(recv_status);
    halod_fd_server_warn_refused(
        connection->server,
        "a client passed descriptors on the fd channel (clients pass none)");
    halod_fd_send_reply(
        connection->fd,
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                         "%zu descriptor(s) passed with a "
                         "request; clients pass none (connection closed)",
                         passed_count),
        -1, 0);
    halod_fd_connection_close(connection);
    return;
  }
  if (recv_status) {
    halo_status_code_t code = halo_status_code(recv_status);
    if (code == HALO_STATUS_UNAVAILABLE ||
        code == HALO_STATUS_RESOURCE_EXHAUSTED) {
      // Closed, or EAGAIN (spurious wake-up).
      halo_status_free(recv_status);
      if (code == HALO_STATUS_UNAVAILABLE)
        halod_fd_connection_close(connection);
      return;
    }
    halod_fd_reply(connection, recv_status, -1, 0);
    return;
  }
  // A client reads each reply before its next request. One that does not
  // would have halod queue replies, with their descriptors, without bound:
  // descriptors in flight count against halod's user's open-file limit
  // (RLIMIT_NOFILE, without CAP_SYS_RESOURCE), and past it halod could pass
  // no descriptor to anyone, its device workers included.
  int unread = 0;
  if (ioctl(connection->fd, SIOCOUTQ, &unread) == 0 && unread > 0) {
    halod_fd_server_warn_refused(
        connection->server,
        "a client sent a request before reading the reply to its last one "
        "(connection closed)");
    halod_fd_connection_close(connection);
    return;
  }
  halod_fd_serve(connection, &request);
}

// Accepts the pending connection with the spare descriptor and closes it:
// halod is out of descriptors.
static void halod_fd_server_shed(halod_fd_server_t *server, int error) {
  if (server->spare_fd >= 0) {
    close(server->spare_fd);
    int fd = accept4(server->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
      halod_fd_closer_close_connection(server->closer, fd, UINT32_MAX);
    }
    server->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  halod_fd_server_warn_refused(server, strerror(error));
}

// Reads what a connection of |uid| about to be closed sent (it does not
// wait: the connection is non-blocking); a descriptor it passed is closed
// off the loop (fd_closer.h).
static void halod_fd_server_drain(halod_fd_server_t *server, int fd,
                                  uint32_t uid) {
  for (int i = 0; i < 16; ++i) {
    halo_fd_request_t request;
    int passed[HALO_FD_MAX_PASSED];
    size_t count = 0;
    halo_status_t status =
        halo_fd_recv_all(fd, &request, sizeof(request), passed, &count);
    for (size_t k = 0; k < count; ++k) {
      halod_fd_closer_close(server->closer, passed[k], uid);
    }
    // A message of another size was read all the same; nothing more to
    // read (EAGAIN), or the end, stops.
    halo_status_code_t code = halo_status_code(status);
    halo_status_free(status);
    if (code != HALO_STATUS_OK && code != HALO_STATUS_INVALID_ARGUMENT) return;
  }
}

// The connections of |tenant|: all of them, and those not yet
// authenticated.
static void halod_fd_server_count(const halod_fd_server_t *server,
                                  uint64_t tenant, uint32_t *out_all,
                                  uint32_t *out_unauthenticated) {
  *out_all = 0;
  *out_unauthenticated = 0;
  for (const halod_fd_connection_t *connection = server->connections;
       connection; connection = connection->next) {
    if (connection->tenant != tenant) continue;
    ++*out_all;
    if (!connection->session) ++*out_unauthenticated;
  }
}

// RESOURCE_EXHAUSTED naming the setting if |tenant| (of process |pid|)
// holds its limit.
static halo_status_t halod_fd_server_admit(const halod_fd_server_t *server,
                                           uint64_t tenant, uint32_t pid) {
  const halod_config_t *config = &server->daemon->config;
  uint32_t all, unauthenticated;
  halod_fd_server_count(server, tenant, &all, &unauthenticated);
  // Per uid, whatever the tenants (daemon/fd_closer.h).
  uint32_t closing =
      halod_fd_closer_pending(server->closer, halod_tenant_uid(tenant));
  bool full = closing >= HALOD_FD_CLOSER_UID_LIMIT;
  if (all < config->fd_channel_connections && !full &&
      unauthenticated < config->fd_channel_unauthenticated) {
    return NULL;
  }
  char words[HALOD_TENANT_WORDS_BYTES];
  halod_tenant_describe(halod_tenancy(server->daemon), tenant, pid, words,
                        sizeof(words));
  if (all >= config->fd_channel_connections) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "%s holds %u connections, the limit "
                            "fd-channel-connections",
                            words, all);
  }
  if (full) {
    return halo_status_make(
        HALO_STATUS_RESOURCE_EXHAUSTED,
        "halod is still closing %u descriptors of uid %u that did not close "
        "at once (passed on the fd channel, or queued on its connections), "
        "the limit %u",
        closing, halod_tenant_uid(tenant), HALOD_FD_CLOSER_UID_LIMIT);
  }
  return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                          "%s holds %u connections not yet authenticated, "
                          "the limit fd-channel-unauthenticated",
                          words, unauthenticated);
}

static void halod_fd_server_on_connection(uv_poll_t *poll, int status,
                                          int events) {
  (void)events;
  halod_fd_server_t *server = poll->data;
  if (status < 0) return;
  if (server->spare_fd < 0) {
    // Spent by a shed whose close went off the loop: take it again.
    server->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  int fd = accept4(server->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EMFILE || errno == ENFILE) halod_fd_server_shed(server, errno);
    return;
  }
  struct ucred credentials;
  socklen_t length = sizeof(credentials);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    halod_fd_closer_close_connection(server->closer, fd, UINT32_MAX);
    return;
  }
  // Under trust-domain cgroup this reads the peer's /proc/PID/cgroup. A
  // cgroup's connections count apart only while it has a session, whose
  // connection kept the client socket's bounds (uid-domains cgroup tenants
  // per uid among them; libhalo says Hello before it opens the fd
  // channel): others count as their uid's.
  uint64_t tenant = halod_tenant_of(halod_tenancy(server->daemon),
                                    credentials.uid, (uint32_t)credentials.pid);
  if (!halod_tenant_is_uid(tenant) &&
      halod_tenant_sessions(&server->daemon->sessions, tenant) == 0) {
    tenant = halod_tenant_of_uid(credentials.uid);
  }
  halo_status_t admit =
      halod_fd_server_admit(server, tenant, (uint32_t)credentials.pid);
  if (admit) {
    // The client reads this as the reply to its AUTH. What it sent already
    // is read first: a Unix socket closed with unread messages resets its
    // peer, which then loses the reply queued for it (ECONNRESET).
    halod_fd_server_warn_refused(server, halo_status_message(admit));
    halod_fd_send_reply(fd, admit, -1, 0);
    // Nothing more may arrive (the client's send then fails, EPIPE, and it
    // reads the reply waiting for it), and what did is read.
    shutdown(fd, SHUT_RD);
    halod_fd_server_drain(server, fd, credentials.uid);
    halod_fd_closer_close_connection(server->closer, fd, credentials.uid);
    return;
  }
  halod_fd_connection_t *connection = calloc(1, sizeof(*connection));
  if (!connection) {
    halod_fd_closer_close_connection(server->closer, fd, credentials.uid);
    return;
  }
  connection->server = server;
  connection->closer = halod_fd_closer_retain(server->closer);
  connection->fd = fd;
  connection->peer_uid = credentials.uid;
  connection->peer_pid = (uint32_t)credentials.pid;
  connection->tenant = tenant;
  connection->accepted_ms = uv_now(server->daemon->loop);
  connection->poll.data = connection;
  if (uv_poll_init(server->daemon->loop, &connection->poll, fd) != 0) {
    halod_fd_closer_close_connection(server->closer, fd, credentials.uid);
    halod_fd_closer_destroy(connection->closer);
    free(connection);
    return;
  }
  connection->next = server->connections;
  if (server->connections) server->connections->prev = connection;
  server->connections = connection;
  uv_poll_start(&connection->poll, UV_READABLE | UV_DISCONNECT,
                halod_fd_connection_on_readable);
}

static void halod_fd_server_arm(halod_fd_server_t *server);

static void halod_fd_server_on_auth_timer(uv_timer_t *timer) {
  halod_fd_server_t *server = timer->data;
  uint64_t now = uv_now(server->daemon->loop);
  uint64_t limit = server->daemon->config.fd_channel_auth_ms;
  uint32_t closed = 0;
  for (halod_fd_connection_t *connection = server->connections; connection;) {
    halod_fd_connection_t *next = connection->next;
    if (!connection->session && now - connection->accepted_ms >= limit) {
      halod_fd_connection_close(connection);
      ++closed;
    }
    connection = next;
  }
  if (closed) {
    HALO_LOG_DEBUG(
        "fd channel: closed %u connection(s) not authenticated "
        "within fd-channel-auth-ms (%llu)",
        closed, (unsigned long long)limit);
  }
  halod_fd_server_arm(server);
}

// Ticks four times per fd-channel-auth-ms (live: read at each tick).
static void halod_fd_server_arm(halod_fd_server_t *server) {
  uint64_t period = server->daemon->config.fd_channel_auth_ms / 4;
  if (period < 5) period = 5;
  uv_timer_start(&server->auth_timer, halod_fd_server_on_auth_timer, period, 0);
}

halo_status_t halod_fd_server_check_free(const char *path, const char *listen,
                                         bool *out_stale) {
  *out_stale = false;
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode)) return NULL;
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof(address.sun_path)) return NULL;  // bind says
  strcpy(address.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return halo_status_from_errno(errno, "fd channel %s: a probe socket", path);
  }
  int error = 0;
  if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
    error = errno;
  }
  pid_t serving = 0;
  if (error == 0 || error == EAGAIN) {  // EAGAIN: a full backlog, served
    struct ucred peer;
    socklen_t length = sizeof(peer);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0) {
      serving = peer.pid;
    }
  }
  close(fd);
  if (error == ECONNREFUSED) {
    *out_stale = true;
    return NULL;
  }
  if (error == ENOENT) return NULL;  // gone meanwhile: nothing to remove
  if (error != 0 && error != EAGAIN) {
    return halo_status_from_errno(
        error,
        "fd channel %s: a socket is there, and connecting to it cannot tell "
        "whether a halod serves it; remove it if it is stale",
        path);
  }
  char who[48] = "another halod";
  if (serving > 0) {
    snprintf(who, sizeof(who), "another halod (pid %d)", (int)serving);
  }
  return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                          "%s serves %s already (its fd channel %s answers): "
                          "stop it first, or give this one another --listen",
                          who, listen ? listen : path, path);
}

halo_status_t halod_fd_server_create(halod_t *daemon, const char *path,
                                     uint32_t socket_mode,
                                     const char *socket_group,
                                     halod_fd_server_t **out_server) {
  *out_server = NULL;
  halod_fd_server_t *server = calloc(1, sizeof(*server));
  if (!server) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  server->daemon = daemon;
  server->fd = -1;
  halo_status_t closer_status = halod_fd_closer_create(&server->closer);
  if (closer_status) {
    free(server);
    return closer_status;
  }
  server->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  server->pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
  if (server->pidfd < 0) {
    int error = errno;
    if (server->spare_fd >= 0) close(server->spare_fd);
    halod_fd_closer_destroy(server->closer);
    free(server);
    return halo_status_from_errno(error,
                                  "pidfd_open of halod itself (for the fd "
                                  "channel; Linux 5.3 or later)");
  }
  if (strlen(path) >= sizeof(server->path)) {
    if (server->spare_fd >= 0) close(server->spare_fd);
    close(server->pidfd);
    halod_fd_closer_destroy(server->closer);
    free(server);
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "fd channel path '%s' is longer than %zu bytes",
                            path, sizeof(server->path) - 1);
  }
  strcpy(server->path, path);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  strcpy(address.sun_path, path);
  // A stale socket of a previous run: only a socket is removed, and only
  // one nobody serves. halod_start looked before anything started (under
  // its instance lock); this looks again, as a halod that takes no lock
  // (an older version) may have bound it while this one started its
  // workers.
  bool stale = false;
  halo_status_t status = halod_fd_server_check_free(path, NULL, &stale);
  if (stale) unlink(path);
  server->fd = -1;  // refused above: nothing bound, nothing of theirs removed
  if (!status) {
    server->fd =
        socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (server->fd < 0) {
      status = halo_status_from_errno(errno, "fd channel socket");
    }
  }
  if (!status &&
      bind(server->fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
    status = halo_status_from_errno(errno, "fd channel bind %s", path);
  }
  if (!status && socket_group && socket_group[0]) {
    // Owner only until the group is set (see halod_server_set_socket_group).
    if (chmod(path, socket_mode & 0700) != 0) {
      status = halo_status_from_errno(errno, "fd channel chmod %s", path);
    } else {
      status = halod_server_set_socket_group(path, socket_group, socket_mode);
    }
  } else if (!status && chmod(path, socket_mode) != 0) {
    status = halo_status_from_errno(errno, "fd channel chmod %s", path);
  }
  if (!status) {
    // Clients pass nothing: where the kernel can, they cannot.
    int rights = halod_socket_refuse_rights(server->fd);
    if (rights) {
      HALO_LOG_DEBUG("fd channel: passed descriptors not refused: %s",
                     strerror(rights));
    } else {
      halod_fd_closer_set_rights_refused(server->closer);
    }
  }
  if (!status && listen(server->fd, 128) != 0) {
    status = halo_status_from_errno(errno, "fd channel listen %s", path);
  }
  struct stat bound;
  if (!status && lstat(path, &bound) == 0) {
    server->bound_dev = bound.st_dev;
    server->bound_ino = bound.st_ino;
  }
  if (status) {
    if (server->fd >= 0) close(server->fd);
    if (server->spare_fd >= 0) close(server->spare_fd);
    close(server->pidfd);
    halod_fd_closer_destroy(server->closer);
    free(server);
    return status;
  }
  server->poll.data = server;
  uv_poll_init(daemon->loop, &server->poll, server->fd);
  uv_poll_start(&server->poll, UV_READABLE, halod_fd_server_on_connection);
  server->auth_timer.data = server;
  uv_timer_init(daemon->loop, &server->auth_timer);
  server->open_handles = 2;
  halod_fd_server_arm(server);
  *out_server = server;
  return NULL;
}

static void halod_fd_server_on_closed(uv_handle_t *handle) {
  halod_fd_server_t *server = handle->data;
  if (--server->open_handles > 0) return;
  // Its own socket file only, before the socket closes (a halod starting
  // then finds it served, not stale).
  struct stat st;
  if (server->bound_ino && lstat(server->path, &st) == 0 &&
      st.st_dev == server->bound_dev && st.st_ino == server->bound_ino) {
    unlink(server->path);
  }
  close(server->fd);
  if (server->spare_fd >= 0) close(server->spare_fd);
  close(server->pidfd);
  halod_fd_closer_destroy(server->closer);
  free(server);
}

void halod_fd_server_destroy(halod_fd_server_t *server) {
  if (!server) return;
  // The descriptors close once the loop runs their close callbacks; their
  // clients learn now that no reply is coming.
  for (halod_fd_connection_t *connection = server->connections; connection;
       connection = connection->next) {
    shutdown(connection->fd, SHUT_RDWR);
  }
  while (server->connections) halod_fd_connection_close(server->connections);
  uv_poll_stop(&server->poll);
  uv_close((uv_handle_t *)&server->poll, halod_fd_server_on_closed);
  uv_timer_stop(&server->auth_timer);
  uv_close((uv_handle_t *)&server->auth_timer, halod_fd_server_on_closed);
}

void halod_fd_server_drop_session(halod_fd_server_t *server,
                                  halod_session_t *session) {
  if (!server) return;
  while (session->fd_connections) {
    halod_fd_connection_close(session->fd_connections);
  }
}
