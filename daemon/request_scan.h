// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A client request's bounds, checked on its encoded bytes before
// protobuf-c decodes it. protobuf-c allocates a structure for every element
// of a repeated message field, every sub-message and every unknown field
// before halod sees a count: 4 MB of four-byte barrier commands decode to
// a million structures (about 200 MiB and a quarter of a second of the
// loop) only for the command count to be refused afterwards. The scan walks
// the wire format with the generated descriptors, allocating nothing, and
// stops at the first element past a bound, so such a request costs the
// loop a bounded scan. Loop thread (any thread: it touches no state).
#ifndef HALOD_REQUEST_SCAN_H_
#define HALOD_REQUEST_SCAN_H_

#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

// The unknown fields (of any message in it) one request may carry. A
// request type this halod does not know is one (it answers "no body").
#define HALOD_REQUEST_MAX_UNKNOWN_FIELDS 64

// The bounds of each repeated field a client request may carry, as halod
// enforces them after decoding too (HALO_MAX_COMMANDS, HALO_MAX_BINDINGS,
// HALO_MAX_DISPATCH_ARGS of halo.h, 3 grid and 3 block values, 1024 waits
// and signals of one submission in all, 256 compiler options): more is
// INVALID_ARGUMENT "request refused before decoding: PATH: more than N
// WHAT" (PATH names the field, e.g. "command_buffer_create.commands[7].args"),
// as is a field other than a repeated one given twice in one message
// (protobuf-c would decode and merge every copy; no client sends one) and
// more than HALOD_REQUEST_MAX_UNKNOWN_FIELDS unknown fields. Bytes that do
// not frame as protobuf (which protobuf-c refuses too) get
// halod_request_undecodable's error. NULL: protobuf-c may decode |bytes|.
halo_status_t halod_request_scan(const uint8_t *bytes, size_t length);

// INVALID_ARGUMENT: a request of |length| bytes does not decode.
halo_status_t halod_request_undecodable(size_t length);

#endif  // HALOD_REQUEST_SCAN_H_
