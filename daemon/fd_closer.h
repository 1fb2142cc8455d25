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
// whose queue still holds messages, is closed on a thread of its own
// (detached; a socket's linger is switched off first, so that most return
// at once), counted for the client's uid until its close returns. A uid
// with HALOD_FD_CLOSER_UID_LIMIT closes not returned gets no new fd channel
// connection (halod_fd_closer_pending), so one uid cannot make halod hold
// descriptors or threads without bound, and its closes never hold up
// another uid's. (A close that does not block returns in microseconds: a
// uid reaches the limit only with closes that block.) An empty
// connection's close cannot block and stays on the loop.
//
// Thread-safe.
#ifndef HALOD_FD_CLOSER_H_
#define HALOD_FD_CLOSER_H_

#include <stdbool.h>
#include <stdint.h>

#include "halo/status.h"

#define HALOD_FD_CLOSER_UID_LIMIT 64

typedef struct halod_fd_closer_t halod_fd_closer_t;

halo_status_t halod_fd_closer_create(halod_fd_closer_t **out_closer);
// Another reference to |closer|, for one who may outlive its creator's.
halod_fd_closer_t *halod_fd_closer_retain(halod_fd_closer_t *closer);
// Drops a reference; closes under way hold their own, so the last of them
// frees the closer after the last reference went.
void halod_fd_closer_destroy(halod_fd_closer_t *closer);

// Closes |fd|, which a client of |uid| may control, off the calling
// thread. If no thread can be started the descriptor is left open (a
// warning says so) rather than closed here.
void halod_fd_closer_close(halod_fd_closer_t *closer, int fd, uint32_t uid);

// Closes |fd|, a connection socket of |uid|: here if its receive queue is
// empty (nothing queued whose release could block), else as
// halod_fd_closer_close.
void halod_fd_closer_close_connection(halod_fd_closer_t *closer, int fd,
                                      uint32_t uid);

// The closes of |uid|'s descriptors that have not returned.
uint32_t halod_fd_closer_pending(halod_fd_closer_t *closer, uint32_t uid);

#endif  // HALOD_FD_CLOSER_H_
