// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Keeps halod's listeners accepting under nng before 1.6 (nng issue 1518,
// "Disconnect during negotiation breaks listener", fixed in 1.6.0; Debian
// bookworm ships 1.5.2).
//
// nng writes its 8-byte SP greeting on every connection it accepts. When
// the peer has already closed, that write fails with EPIPE, which nng
// reports as NNG_ECLOSED, and nng hands that error to the listener's
// pending accept. The listener takes NNG_ECLOSED for its own close and
// never accepts again: any local process allowed on the socket could stop
// halod taking new clients (connect, close at once; 200 in a row did it
// every time) until halod restarted.
//
// nng sends with sendmsg(2). halod's executable defines sendmsg, so the
// dynamic linker binds nng's calls (and every other library's) to this
// one, which calls the C library's and reports EPIPE as ECONNRESET. nng
// maps ECONNRESET to NNG_ECONNRESET, which its listener treats as the
// remote condition it is (counted, accept again at once), and which every
// other caller treats as the lost connection EPIPE also meant. Nothing else
// changes: the same bytes are sent, and a peer that is gone is gone either
// way. With nng 1.6 or later this file compiles to nothing.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <errno.h>
#include <nng/nng.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/socket.h>

#if NNG_MAJOR_VERSION == 1 && NNG_MINOR_VERSION < 6

typedef ssize_t (*halod_sendmsg_fn)(int, const struct msghdr *, int);

__attribute__((visibility("default"))) ssize_t sendmsg(
    int fd, const struct msghdr *message, int flags) {
  static _Atomic(halod_sendmsg_fn) next;
  halod_sendmsg_fn send = atomic_load_explicit(&next, memory_order_acquire);
  if (!send) {
    // The next definition in lookup order: the C library's, or a
    // sanitizer's interceptor in front of it.
    send = (halod_sendmsg_fn)dlsym(RTLD_NEXT, "sendmsg");
    if (!send) {
      errno = ENOSYS;
      return -1;
    }
    atomic_store_explicit(&next, send, memory_order_release);
  }
  ssize_t sent = send(fd, message, flags);
  if (sent < 0 && errno == EPIPE) errno = ECONNRESET;
  return sent;
}

#endif
