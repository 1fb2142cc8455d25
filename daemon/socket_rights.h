// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Refusing descriptors that clients would pass to halod.
//
// Clients pass halod no descriptor, on any socket. One passed anyway is
// installed in halod by the kernel as the message is read, and its last
// close can block for as long as the client likes (daemon/fd_closer.h),
// in whichever of halod's threads reads it: nng's reader discards what a
// message carries. From Linux 6.16 a Unix socket can refuse them
// (SO_PASSRIGHTS off; a connection inherits it from the listening socket at
// connect): the client's sendmsg then fails with EPERM and nothing reaches
// halod. On older kernels the fd channel still closes what it is passed off
// its loop; nng's sockets cannot (see docs/security.md).
#ifndef HALOD_SOCKET_RIGHTS_H_
#define HALOD_SOCKET_RIGHTS_H_

// Sets SO_PASSRIGHTS off on the listening socket |fd|. Returns 0, or the
// errno (ENOPROTOOPT: a kernel before 6.16).
int halod_socket_refuse_rights(int fd);

// The same for the listening Unix socket of this process bound to |path|
// (one nng created: nng does not give out its descriptor). It is found by
// its inode (/proc/net/unix, /proc/self/fd links) without a call on any
// other descriptor: nng's threads accept and close connections meanwhile.
// Returns 0, the errno, or ENOENT if no such socket is open.
int halod_socket_refuse_rights_at(const char *path);

#endif  // HALOD_SOCKET_RIGHTS_H_
