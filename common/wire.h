// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The wire protocol (proto/halo.proto) over nng: encoding, decoding and one
// request/response round trip. Used by libhalo, haloctl and halod.
#ifndef HALO_COMMON_WIRE_H_
#define HALO_COMMON_WIRE_H_

#include <nng/nng.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "halo.pb-c.h"
#include "halo/status.h"

// Protocol version exchanged in Hello; bumped on incompatible changes.
#define HALO_PROTOCOL_VERSION 1

// The largest message halod accepts by default (its max-message-bytes,
// NNG_OPT_RECVMAXSZ). A halod states its own in Hello's reply, and libhalo
// refuses a request above that before sending (client/client.c).
#define HALO_WIRE_MAX_MESSAGE_BYTES (4u << 20)

// Largest payload of one BufferWrite/BufferRead chunk.
#define HALO_WIRE_MAX_CHUNK_BYTES (1u << 20)

typedef Halo__Wire__Request halo_wire_request_t;
typedef Halo__Wire__Response halo_wire_response_t;

// Packs |message| (a protobuf-c message) into a new nng message.
halo_status_t halo_wire_pack(const ProtobufCMessage *message,
                             nng_msg **out_msg);

// Maps an nng error to a status ("<what>: <nng_strerror>").
halo_status_t halo_wire_status_from_nng(int nng_error, const char *what);
// A failed nng_dial (or the set-up around it) of |target| ("no halod at
// ADDRESS"): "TARGET: dial: ERROR", then what to change, in parentheses:
// |denied| where the socket's mode refused this process, |absent| where
// nothing listens there.
halo_status_t halo_wire_dial_failed(int nng_error, const char *target,
                                    const char *denied, const char *absent);

// Dials |address| on the client |socket| (nng_dial, blocking) for one
// connection, never dialed again once lost: the socket's reconnect times are
// set to an hour, and its pipe-removal callback (NNG_PIPE_EV_REM_POST) is
// |on_removed| with |arg|, or halo_wire_connection_lost alone when NULL;
// |on_removed| calls halo_wire_connection_lost. Returns nng's error.
int halo_wire_dial_once(nng_socket socket, const char *address,
                        nng_pipe_cb on_removed, void *arg);
// halo_wire_dial_once, bounded: nng's dial returns once halod completed
// the connection's handshake, or after nng's own 10 s, and a halod that is
// stopped (SIGSTOP, a debugger, a frozen host) has the kernel accept the
// connection and never answers. The dial runs on a thread of its own;
// once |timeout_ns| passed, |socket| is closed (which ends the dial),
// *|out_timed_out| set and NNG_ETIMEDOUT returned: the caller must not
// close |socket| again. Without a thread, the dial as nng bounds it.
int halo_wire_dial_within(nng_socket socket, const char *address,
                          nng_pipe_cb on_removed, void *arg, int64_t timeout_ns,
                          bool *out_timed_out);

// The work of a removal callback of halo_wire_dial_once, on nng's thread:
// sets |*lost| and aborts |aio| with NNG_ECONNSHUT (each may be NULL; see
// halo_wire_call), then closes the pipe's dialer. nng 1.5.2 would dial again
// at once about every other time (its back-off, RECONNMINT, is taken modulo
// a random number cast to int, which is negative half the time), and a
// client closing while such a connection was still exchanging nng's greeting
// made halod's listener stop accepting for good (docs/architecture.md).
void halo_wire_connection_lost(nng_pipe pipe, _Atomic bool *lost, nng_aio *aio);

// Sends |request| on |ctx| using |aio| (its timeout set by the caller) and
// waits for the response. On success |out_response| is a response with
// code OK (free it with halo__wire__response__free_unpacked(r, NULL)).
// A response with another code becomes the returned status.
// |lost| (may be NULL): set by the caller's pipe-removal callback, which
// then aborts |aio| with NNG_ECONNSHUT. The call checks it after starting
// each step and aborts the step itself, so a removal that came just before
// the step started still ends it at once (req0 would otherwise hold the
// request for a pipe that never comes, until the timeout).
halo_status_t halo_wire_call(nng_ctx ctx, nng_aio *aio,
                             const _Atomic bool *lost,
                             const halo_wire_request_t *request,
                             halo_wire_response_t **out_response);

// halo_wire_call within |deadline_ns| (CLOCK_MONOTONIC): each send and
// receive gets what is left of it as its timeout (not the aio's timeout
// anew), and when halod refused the request for now (a response with
// retry_after_ms), it is sent again after that wait (at most
// HALO_WIRE_RETRY_MAX_MS) if the wait ends before the deadline; the last
// refusal is returned where no time is left for another, or where the
// request sent again ran out of time.
halo_status_t halo_wire_call_retrying(nng_ctx ctx, nng_aio *aio,
                                      const _Atomic bool *lost,
                                      const halo_wire_request_t *request,
                                      int64_t deadline_ns,
                                      halo_wire_response_t **out_response);

#define HALO_WIRE_RETRY_MAX_MS 1000

#endif  // HALO_COMMON_WIRE_H_
