// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Keeps nng before 1.9 from losing a transfer on a connection that is
// closing, which stopped its reaper thread for good.
//
// nng's ipc transport moves a message in steps: its receive callback reads
// the 9-byte header, then submits the read of the body (nng_stream_recv);
// its send callback submits the rest of a partial write (nng_stream_send).
// When another thread closes the pipe in between (nng_pipe_close, or nng's
// own close after the other direction failed: a client that exits with
// requests still arriving is enough), the close has stopped that aio, and
// nni_aio_begin refuses the submission, sets NNG_ECANCELED, and completes
// nothing: the transfer is lost, the protocol's receive (or send) on the
// pipe never ends, and nng's single reaper thread waits for it in
// rep0_pipe_stop for ever. From then on no pipe of the process finishes
// closing: no removal reaches halod, every session stays, and nng_close
// never returns. nng 1.9.0 ends such a wait (nng commit aac4dc36, pull
// request 1824: nni_aio_stop aborts a task that nothing will complete);
// nng 2.0 completes a submission on a stopped aio with an error
// (nni_aio_start, commit d02a320c).
//
// nng's transports call nng_stream_recv and nng_stream_send through the
// dynamic linker, so halod's executable defines both: each calls nng's and
// then, if the submission was refused that way (the aio's result is
// NNG_ECANCELED as the call returns: nni_aio_begin set it and nothing was
// started; a started transfer reads 0 until it ends, and ends with
// NNG_ECLOSED when a close cancels it), completes the aio with NNG_ECLOSED,
// what a close gives a transfer it cancels. The transport's callback then
// takes its error path: it fails the protocol's receive or send and submits
// nothing more, and the pipe finishes closing. With nng 1.9 or later this
// file compiles to nothing.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <nng/nng.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#if NNG_MAJOR_VERSION == 1 && NNG_MINOR_VERSION < 9

typedef void (*halod_stream_fn)(nng_stream *, nng_aio *);

// Submits |aio| on |stream| through nng's |name|, completing a refused
// submission with NNG_ECLOSED.
static void halod_stream_submit(_Atomic(halod_stream_fn) *next,
                                const char *name, nng_stream *stream,
                                nng_aio *aio) {
  halod_stream_fn submit = atomic_load_explicit(next, memory_order_acquire);
  if (!submit) {
    submit = (halod_stream_fn)dlsym(RTLD_NEXT, name);
    if (!submit) {
      fprintf(stderr, "halod: no %s in nng: %s\n", name, dlerror());
      abort();
    }
    atomic_store_explicit(next, submit, memory_order_release);
  }
  submit(stream, aio);
  if (nng_aio_result(aio) == NNG_ECANCELED) nng_aio_finish(aio, NNG_ECLOSED);
}

__attribute__((visibility("default"))) void nng_stream_recv(nng_stream *stream,
                                                            nng_aio *aio) {
  static _Atomic(halod_stream_fn) next;
  halod_stream_submit(&next, "nng_stream_recv", stream, aio);
}

__attribute__((visibility("default"))) void nng_stream_send(nng_stream *stream,
                                                            nng_aio *aio) {
  static _Atomic(halod_stream_fn) next;
  halod_stream_submit(&next, "nng_stream_send", stream, aio);
}

#endif
