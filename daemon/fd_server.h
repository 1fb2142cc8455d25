// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The fd channel server (protocol in common/fd_channel.h): a Unix
// SOCK_SEQPACKET socket beside the nng socket. A connection authenticates
// with its session id and token; the daemon checks that the connection's
// peer credentials (SO_PEERCRED) are the session's, then hands out memfds of
// pages and arenas the session holds objects on.
//
// Limits (settings, live): a uid may hold fd-channel-connections
// connections, fd-channel-unauthenticated of them not yet authenticated;
// past either a new connection gets a RESOURCE_EXHAUSTED reply naming the
// setting and is closed. A connection not authenticated within
// fd-channel-auth-ms is closed. When accept fails for want of descriptors
// (EMFILE) the pending connection is accepted on a spare descriptor and
// closed, so the listening socket does not stay readable and spin the loop.
//
// Loop thread only.
#ifndef HALOD_FD_SERVER_H_
#define HALOD_FD_SERVER_H_

#include "daemon/daemon.h"

// |socket_group|: as halod_server_options_t's (NULL or "": halod's group).
halo_status_t halod_fd_server_create(halod_t *daemon, const char *path,
                                     uint32_t socket_mode,
                                     const char *socket_group,
                                     halod_fd_server_t **out_server);
// Whether a process serves an fd channel at |path|: a halod running on the
// same client socket, whose sockets a second halod must leave alone (it
// would remove a live halod's fd channel as a stale one). Connecting tells:
// a stale socket refuses. Its pid in *|out_pid| (0 where the kernel cannot
// tell it: another pid namespace). Any thread.
bool halod_fd_server_in_use(const char *path, pid_t *out_pid);

// Closes the channel and every connection (a request in flight fails at
// once: the connections are shut down before they close).
void halod_fd_server_destroy(halod_fd_server_t *server);

// Closes every connection authenticated as |session|.
void halod_fd_server_drop_session(halod_fd_server_t *server,
                                  halod_session_t *session);

#endif  // HALOD_FD_SERVER_H_
