// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The fd channel: a plain Unix SOCK_SEQPACKET socket beside the nng socket
// (nng cannot pass file descriptors). The client sends an AUTH message with
// its session id and token; the daemon checks that the connection's peer
// credentials (SO_PEERCRED) are those of the session's nng pipe. A DAEMON
// request then gets a pidfd of halod, the client's sign of the daemon's
// liveness in any pid namespace (SO_PEERCRED's pid is 0 where halod is
// outside the client's); it is asked for, so that a client that does not
// know it is not handed a descriptor it would never close. Each GET request
// names an object (semaphore page, arena) the session may see and the reply
// carries its memfd as SCM_RIGHTS.
//
// Messages are fixed-size little structs in host byte order (both ends are
// on one host).
#ifndef HALO_COMMON_FD_CHANNEL_H_
#define HALO_COMMON_FD_CHANNEL_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "halo/status.h"

#define HALO_FD_CHANNEL_MAGIC 0x68616c6fu  // "halo"

typedef enum halo_fd_request_kind_e {
  HALO_FD_REQUEST_AUTH = 1,
  HALO_FD_REQUEST_SEMAPHORE_PAGE = 2,
  HALO_FD_REQUEST_ARENA = 3,
  // The session's submission ring (memfd; once per session) and its
  // doorbell (eventfd). common/ring.h.
  HALO_FD_REQUEST_RING = 4,
  HALO_FD_REQUEST_DOORBELL = 5,
  // A pidfd of halod itself (after AUTH).
  HALO_FD_REQUEST_DAEMON = 6,
} halo_fd_request_kind_t;

typedef struct halo_fd_request_t {
  uint32_t magic;
  uint32_t kind;      // halo_fd_request_kind_t
  uint64_t id;        // AUTH: session id; GET: page or arena id
  uint8_t token[16];  // AUTH only
} halo_fd_request_t;

typedef struct halo_fd_reply_t {
  int32_t code;  // halo_status_code_t
  uint32_t reserved;
  uint64_t size;  // bytes of the memfd passed with the reply
  char message[240];
} halo_fd_reply_t;

// One sendmsg(2) of |iov| (|count| entries) with |flags|, and, if |fd| >=
// 0, the descriptor as SCM_RIGHTS; its result (errno set on -1). For any
// stream or datagram socket (the fd channel, a device worker's link).
ssize_t halo_fd_sendmsg(int socket_fd, struct iovec *iov, int count, int fd,
                        int flags);

// Sends |length| bytes and, if |fd| >= 0, the descriptor as SCM_RIGHTS.
halo_status_t halo_fd_send(int socket_fd, const void *data, size_t length,
                           int fd);

// The most descriptors one message can carry (the kernel's SCM_MAX_FD).
#define HALO_FD_MAX_PASSED 253

// Receives one message of exactly |length| bytes; a descriptor passed with
// it lands in |out_fd| (-1 if none). Closes any extra descriptors (for a
// peer trusted not to pass a descriptor whose close blocks: halod).
halo_status_t halo_fd_recv(int socket_fd, void *data, size_t length,
                           int *out_fd);

// As halo_fd_recv, but closes nothing: every descriptor passed with the
// message (up to HALO_FD_MAX_PASSED, all the kernel allows, so that none
// is closed by the kernel in this thread for want of room) lands in |fds|,
// their number in |*out_count|, whatever the status. For a peer that may
// pass descriptors whose last close blocks (daemon/fd_closer.h).
halo_status_t halo_fd_recv_all(int socket_fd, void *data, size_t length,
                               int fds[HALO_FD_MAX_PASSED], size_t *out_count);

#endif  // HALO_COMMON_FD_CHANNEL_H_
