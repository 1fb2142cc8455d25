// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Two defects of the nng that Debian bookworm ships (1.5.2), each of which
// let one local process stop halod serving everyone, worked around where
// nng calls out through the dynamic linker: halod's executable defines the
// functions below, so nng's calls (made through its PLT) reach them, and
// each calls the next definition (nng's or the C library's, or a
// sanitizer's interceptor in front of it) and changes only what the defect
// needs. Built against an nng that has both fixes (1.9 or later), this file
// compiles to nothing; built against an older one, each wrapper also checks
// nng_version() at run time (libnng keeps its soname across 1.x, so a
// newer library may be installed later) and steps aside when the library
// has the fix.
//
// 1. A connection closed during nng's greeting stopped the listener (nng
//    issue 1518, fixed in 1.6.0). nng writes its 8-byte SP greeting on
//    every connection it accepts; when the peer has already closed, that
//    write fails with EPIPE, which nng reports as NNG_ECLOSED and hands to
//    the listener's pending accept, which takes it for its own close and
//    never accepts again (a process that connects and closes at once; 200
//    in a row did it every time). sendmsg below reports EPIPE as
//    ECONNRESET to libnng's calls only: nng maps it to NNG_ECONNRESET, after
//    which its listener accepts again at once, and a pipe's send ends the
//    pipe as before. Other callers (libuv, libmicrohttpd, halod's fd channel
//    and worker links, the CUDA driver) see EPIPE as always.
//
// 2. A transfer submitted on a closing connection was lost, and nng's
//    reaper thread waited for it for ever (fixed in 1.9.0, nng commit
//    aac4dc36, pull request 1824; nng 2.0 completes such a submission with
//    an error, commit d02a320c). nng's ipc transport moves a message in
//    steps: its receive callback reads the 9-byte header, then submits the
//    read of the body (nng_stream_recv); its send callback submits the rest
//    of a partial write (nng_stream_send). When another thread closes the
//    pipe in between (nng_pipe_close, or nng's own close after the other
//    direction failed: a client that exits with requests still arriving is
//    enough), the close has stopped that aio, and nni_aio_begin refuses the
//    submission: it sets NNG_ECANCELED and completes nothing. The
//    protocol's receive (or send) on the pipe then never ends, and the
//    reaper waits for it in rep0_pipe_stop for ever; from then on no pipe
//    of the process finishes closing (no removal reaches halod, every
//    session stays, nng_close never returns). nng_stream_recv and
//    nng_stream_send below call nng's and, when the aio's result reads
//    NNG_ECANCELED as the call returns, complete it with NNG_ECLOSED, what
//    a close gives a transfer it cancels: the transport's callback takes
//    its error path, fails the protocol's operation, submits nothing more,
//    and the pipe finishes closing.
//
//    Why a result of NNG_ECANCELED there can only be the refusal, never a
//    transfer that started and was then cancelled (which this would finish
//    a second time): the ipc transport submits with its lock held (the
//    pipe's, or the endpoint's during the greeting), and every path that
//    could complete a started transfer with NNG_ECANCELED either needs that
//    lock (its cancel callbacks) or runs only after the pipe's close has
//    stopped its aios (nni_aio_stop in ipc_pipe_stop), after which nothing
//    can start on them. halod uses nng's ipc transport only (config.c) and
//    the rep0 protocol only. The result is read without nng's lock; no
//    writer can store NNG_ECANCELED there concurrently.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <errno.h>
#include <nng/nng.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#if NNG_MAJOR_VERSION == 1 && NNG_MINOR_VERSION < 9

// The next definition of |name| after halod's (cached in |slot|); aborts
// if there is none (the process could not work without it).
static void *halod_nng_fixes_next(_Atomic(void *) *slot, const char *name) {
  void *next = atomic_load_explicit(slot, memory_order_acquire);
  if (!next) {
    next = dlsym(RTLD_NEXT, name);
    if (!next) {
      fprintf(stderr, "halod: no %s after halod's: %s\n", name, dlerror());
      abort();
    }
    atomic_store_explicit(slot, next, memory_order_release);
  }
  return next;
}

// Whether the nng loaded at run time is older than |minor| (1.x).
static bool halod_nng_older_than(int minor) {
  static atomic_int loaded_minor = -1;
  int loaded = atomic_load_explicit(&loaded_minor, memory_order_relaxed);
  if (loaded < 0) {
    int major = 0;
    loaded = 0;
    if (sscanf(nng_version(), "%d.%d", &major, &loaded) != 2 || major != 1) {
      loaded = 0;  // unknown: keep the workarounds
    }
    atomic_store_explicit(&loaded_minor, loaded, memory_order_relaxed);
  }
  return loaded < minor;
}

// Whether |address| (code) lies in the shared object that defines nng's
// functions.
static bool halod_nng_owns(const void *address) {
  static _Atomic(void *) version;
  Dl_info nng, caller;
  return dladdr(halod_nng_fixes_next(&version, "nng_version"), &nng) &&
         dladdr(address, &caller) && nng.dli_fbase == caller.dli_fbase;
}

typedef ssize_t (*halod_sendmsg_fn)(int, const struct msghdr *, int);

__attribute__((visibility("default"))) ssize_t sendmsg(
    int fd, const struct msghdr *message, int flags) {
  static _Atomic(void *) next;
  halod_sendmsg_fn real_sendmsg =
      (halod_sendmsg_fn)halod_nng_fixes_next(&next, "sendmsg");
  ssize_t sent = real_sendmsg(fd, message, flags);
  if (sent < 0 && errno == EPIPE) {
    bool remap =
        halod_nng_owns(__builtin_return_address(0)) && halod_nng_older_than(6);
    errno = remap ? ECONNRESET : EPIPE;  // the checks may have set it
  }
  return sent;
}

typedef void (*halod_stream_fn)(nng_stream *, nng_aio *);

// Submits |aio| on |stream| through nng's |name| (cached in |slot|),
// completing a refused submission with NNG_ECLOSED.
static void halod_nng_stream_submit(_Atomic(void *) *slot, const char *name,
                                    nng_stream *stream, nng_aio *aio) {
  halod_stream_fn submit = (halod_stream_fn)halod_nng_fixes_next(slot, name);
  submit(stream, aio);
  if (nng_aio_result(aio) == NNG_ECANCELED && halod_nng_older_than(9)) {
    nng_aio_finish(aio, NNG_ECLOSED);
  }
}

__attribute__((visibility("default"))) void nng_stream_recv(nng_stream *stream,
                                                            nng_aio *aio) {
  static _Atomic(void *) next;
  halod_nng_stream_submit(&next, "nng_stream_recv", stream, aio);
}

__attribute__((visibility("default"))) void nng_stream_send(nng_stream *stream,
                                                            nng_aio *aio) {
  static _Atomic(void *) next;
  halod_nng_stream_submit(&next, "nng_stream_send", stream, aio);
}

#endif
