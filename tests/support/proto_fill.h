// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Test support: fills protobuf-c messages (the wire protocol's) with
// non-default values, field by field from their descriptors, so tests cover
// every message type, including ones added after the test was written.
//
// Uses cmocka assertions: call from a test only.
#ifndef HALO_TESTS_SUPPORT_PROTO_FILL_H_
#define HALO_TESTS_SUPPORT_PROTO_FILL_H_

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

// The allocations of one filled message tree, freed together.
typedef struct halo_test_allocations_t {
  void *blocks[512];
  size_t count;
} halo_test_allocations_t;

void halo_test_allocations_free(halo_test_allocations_t *allocations);

// Sets every field of |message| (oneof members excepted) to a non-default
// value: numbers with the top bit set (so handles, sizes and devices are
// invalid), the last value of enums, the field name for strings, 16 bytes
// for bytes; repeated fields get two elements. Stops at depth 4.
void halo_test_proto_fill(ProtobufCMessage *message, int depth,
                          halo_test_allocations_t *allocations);

// Sets |envelope|'s oneof member |field| (a message) to a filled body.
void halo_test_proto_fill_oneof(ProtobufCMessage *envelope,
                                const ProtobufCFieldDescriptor *field,
                                halo_test_allocations_t *allocations);

#endif  // HALO_TESTS_SUPPORT_PROTO_FILL_H_
