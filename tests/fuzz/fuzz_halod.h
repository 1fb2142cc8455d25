// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// An in-process halod for the fuzz harnesses of tests/fuzz/: halod_start on
// a private libuv loop (local driver, device-workers inline, small quotas,
// sockets in a private directory) whose sessions get their requests
// through the client socket's handler (daemon/requests.h) without nng: a
// pipe event opens a session, each request is a request event answered on a
// detached context (daemon/server.h), a pipe event ends the session.
//
// Every fuzz session has the same id (HALO_FUZZ_SESSION_ID), so its handles
// are the same from one input to the next and a seed can name them
// (halo_fuzz_handle). A session starts with Hello done and the harness
// kernels (tests/fuzz/fuzz_kernels.c: entry points that do nothing) loaded:
// handle HALO_FUZZ_EXECUTABLE. Closing it runs the loop until its work has
// retired and then checks that nothing of it is left in the daemon (no
// semaphore, page, arena, export or memo entry): a leaked reference aborts
// like a crash.
//
// Thread-compatible: the caller's thread is halod's loop thread.
#ifndef HALO_TESTS_FUZZ_FUZZ_HALOD_H_
#define HALO_TESTS_FUZZ_FUZZ_HALOD_H_

#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"
#include "daemon/daemon.h"
#include "daemon/handle_table.h"

// The id of every fuzz session (its handles carry the low 24 bits); above
// any id the daemon hands out before the first one.
#define HALO_FUZZ_SESSION_ID 0xf00000u

// The handle of a fuzz session's object in table slot |index| (the first
// object a session creates after the executable is slot 1, then 2, ...),
// as daemon/handle_table.h lays handles out (generation 0: never reused).
static inline uint64_t halo_fuzz_handle(uint32_t type, uint32_t index) {
  return ((uint64_t)(HALO_FUZZ_SESSION_ID & 0xffffff) << 40) |
         ((uint64_t)type << 32) | (uint64_t)(index + 1);
}

// The harness kernels, loaded by every fuzz session first (slot 0).
#define HALO_FUZZ_EXECUTABLE halo_fuzz_handle(HALOD_OBJECT_EXECUTABLE, 0)
// Their one entry point: does nothing, whatever its arguments.
#define HALO_FUZZ_ENTRY "noop"

// The daemon, started on the first call (with an anchor session that keeps
// the harness kernels loaded); exits the process if it cannot start.
// Stopped at exit.
halod_t *halo_fuzz_halod(void);

// Opens a fuzz session: Hello done, the harness kernels loaded.
halod_session_t *halo_fuzz_session_open(void);

// Hands |size| bytes to the client socket's handler as a request of
// |session| and runs the loop until it is answered; returns the reply's
// status code. Aborts if the reply does not decode or never comes.
// |out_response| (optional) receives the reply (free it with
// halo__wire__response__free_unpacked).
int32_t halo_fuzz_request_bytes(halod_session_t *session, const void *bytes,
                                size_t size,
                                Halo__Wire__Response **out_response);

// The same for a request message (packed first).
int32_t halo_fuzz_request(halod_session_t *session,
                          const Halo__Wire__Request *request,
                          Halo__Wire__Response **out_response);

// Runs the loop once without blocking (completions, submission rings).
void halo_fuzz_run_nowait(void);

// Runs the loop until every issued execution has completed and retired
// (the harness kernels return at once).
void halo_fuzz_finish_issued(void);

// Lets |session|'s issued work finish, ends the session as a closed
// connection does, runs the loop until its work has retired and checks that
// the daemon holds nothing of it.
void halo_fuzz_session_close(halod_session_t *session);

#endif  // HALO_TESTS_FUZZ_FUZZ_HALOD_H_
