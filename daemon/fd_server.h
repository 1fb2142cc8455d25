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
// Whether the fd channel's |path| is free for this halod: NULL where no
// socket is there (*|out_stale| false) or a stale one (true: connecting is
// refused, nobody serves it; the caller removes it).
// FAILED_PRECONDITION naming the halod that serves it (its pid where the
// kernel tells it), which a second halod must leave alone: it would remove
// a live halod's fd channel as a stale one; |listen| (may be NULL) names
// that halod's client socket in the message. The errno where connecting
// cannot tell (Permission denied). Any thread.
halo_status_t halod_fd_server_check_free(const char *path, const char *listen,
                                         bool *out_stale);

// Closes the channel and every connection (a request in flight fails at
// once: the connections are shut down before they close).
void halod_fd_server_destroy(halod_fd_server_t *server);

// Closes every connection authenticated as |session|.
void halod_fd_server_drop_session(halod_fd_server_t *server,
                                  halod_session_t *session);

#endif  // HALOD_FD_SERVER_H_
