// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Closing descriptors a client controls without stopping halod's loop.
//
// The last close of a descriptor can block for as long as its other end
// likes: a TCP socket with SO_LINGER and unsent data waits out its linger
// time (forever, at the largest), a FUSE file waits for its daemon to answer
// FLUSH, and a Unix socket's close releases the descriptors still queued on
// it, each such close in the closing thread. A client can pass any of these
// over the fd channel, close its own copy and leave halod holding the last
// reference; closed on the loop, it would stop every tenant (and systemd's
// watchdog would then kill halod).
//
// So every descriptor a client passed, and every fd channel connection
// whose queue may still hold messages, is closed off the loop: a socket's
// linger is switched off first (most then close at once), and each uid's
// descriptors are closed in order by a thread of that uid's own, which
// ends when they are all closed. One uid's close that blocks holds up only
// that uid's. A uid with HALOD_FD_CLOSER_UID_LIMIT descriptors not yet
// closed gets no new fd channel connection, and its open ones are closed
// before anything more is read from them (halod_fd_closer_pending), so one
// uid cannot make halod hold descriptors without bound. Where the kernel
// refuses passed descriptors (daemon/socket_rights.h) no connection can
// hold any, and connections close on the loop; elsewhere every connection
// closes on its uid's thread.
//
// Thread-safe, but for halod_fd_closer_set_rights_refused and
// halod_fd_closer_close_connection: one thread (halod's loop).
#ifndef HALOD_FD_CLOSER_H_
#define HALOD_FD_CLOSER_H_

#include <stdbool.h>
#include <stdint.h>

#include "halo/status.h"

#define HALOD_FD_CLOSER_UID_LIMIT 1024

typedef struct halod_fd_closer_t halod_fd_closer_t;

halo_status_t halod_fd_closer_create(halod_fd_closer_t **out_closer);
// Another reference to |closer|, for one who may outlive its creator's.
halod_fd_closer_t *halod_fd_closer_retain(halod_fd_closer_t *closer);
// Drops a reference; closes under way hold their own, so the last of them
// frees the closer after the last reference went.
void halod_fd_closer_destroy(halod_fd_closer_t *closer);

// Closes |fd|, which a client of |uid| may control, off the calling
// thread. If no thread can start, it stays queued for the uid's next (a
// warning says so) rather than closed here. |uid| UINT32_MAX: not known.
void halod_fd_closer_close(halod_fd_closer_t *closer, int fd, uint32_t uid);

// Closes |fd|, a connection socket of |uid|: here if nothing can be
// queued on it with descriptors (the kernel refuses them), else as
// halod_fd_closer_close.
void halod_fd_closer_close_connection(halod_fd_closer_t *closer, int fd,
                                      uint32_t uid);

// The listening socket refuses passed descriptors: connections close here.
void halod_fd_closer_set_rights_refused(halod_fd_closer_t *closer);

// |uid|'s descriptors not yet closed (queued, or in a close).
uint32_t halod_fd_closer_pending(halod_fd_closer_t *closer, uint32_t uid);

#endif  // HALOD_FD_CLOSER_H_
