// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Fills protobuf-c messages field by field from their descriptors (see
// proto_fill.h).
#include "tests/support/proto_fill.h"

// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdlib.h>

static const uint8_t halo__fill_bytes[16] = {1, 2,  3,  4,  5,  6,  7,  8,
                                             9, 10, 11, 12, 13, 14, 15, 16};

static void halo__fill_value(const ProtobufCFieldDescriptor *field, void *slot,
                             int depth, halo_test_allocations_t *allocations);

static void *halo__allocate(halo_test_allocations_t *allocations, size_t size) {
  assert_true(allocations->count < 512);
  void *block = calloc(1, size ? size : 1);
  assert_non_null(block);
  allocations->blocks[allocations->count++] = block;
  return block;
}

void halo_test_allocations_free(halo_test_allocations_t *allocations) {
  for (size_t i = 0; i < allocations->count; ++i) free(allocations->blocks[i]);
  allocations->count = 0;
}

// Stores one non-default value of |field|'s type at |slot|.
static void halo__fill_value(const ProtobufCFieldDescriptor *field, void *slot,
                             int depth, halo_test_allocations_t *allocations) {
  switch (field->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
      *(int32_t *)slot = -(int32_t)field->id - 1;
      break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      *(uint32_t *)slot = 0x80000000u + field->id;
      break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
      *(int64_t *)slot = -(int64_t)(1ll << 40) - field->id;
      break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
      *(uint64_t *)slot = (1ull << 63) + field->id;
      break;
    case PROTOBUF_C_TYPE_FLOAT:
      *(float *)slot = 1.5f;
      break;
    case PROTOBUF_C_TYPE_DOUBLE:
      *(double *)slot = 2.25;
      break;
    case PROTOBUF_C_TYPE_BOOL:
      *(protobuf_c_boolean *)slot = 1;
      break;
    case PROTOBUF_C_TYPE_ENUM: {
      // The last declared value: valid and (usually) not the default.
      const ProtobufCEnumDescriptor *enum_descriptor = field->descriptor;
      *(int *)slot =
          enum_descriptor->values[enum_descriptor->n_values - 1].value;
      break;
    }
    case PROTOBUF_C_TYPE_STRING:
      *(char **)slot = (char *)field->name;
      break;
    case PROTOBUF_C_TYPE_BYTES: {
      ProtobufCBinaryData *bytes = slot;
      bytes->data = (uint8_t *)halo__fill_bytes;
      bytes->len = sizeof(halo__fill_bytes);
      break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
      const ProtobufCMessageDescriptor *descriptor = field->descriptor;
      ProtobufCMessage *child =
          halo__allocate(allocations, descriptor->sizeof_message);
      protobuf_c_message_init(descriptor, child);
      halo_test_proto_fill(child, depth + 1, allocations);
      *(ProtobufCMessage **)slot = child;
      break;
    }
  }
}

static size_t halo__value_size(const ProtobufCFieldDescriptor *field) {
  switch (field->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
      return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
      return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
      return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL:
      return sizeof(protobuf_c_boolean);
    default:
      return 4;
  }
}

// Sets every field of |message| (oneof members excepted) to a non-default
// value; repeated fields get two elements. Deep trees stop at depth 4.
void halo_test_proto_fill(ProtobufCMessage *message, int depth,
                          halo_test_allocations_t *allocations) {
  const ProtobufCMessageDescriptor *descriptor = message->descriptor;
  for (unsigned i = 0; i < descriptor->n_fields; ++i) {
    const ProtobufCFieldDescriptor *field = &descriptor->fields[i];
    if (field->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) continue;
    char *slot = (char *)message + field->offset;
    if (field->label == PROTOBUF_C_LABEL_REPEATED) {
      if (depth >= 4) continue;
      size_t size = halo__value_size(field);
      char *array = halo__allocate(allocations, 2 * size);
      halo__fill_value(field, array, depth, allocations);
      halo__fill_value(field, array + size, depth, allocations);
      *(void **)slot = array;
      *(size_t *)((char *)message + field->quantifier_offset) = 2;
      continue;
    }
    if (field->label == PROTOBUF_C_LABEL_OPTIONAL && depth >= 4) continue;
    halo__fill_value(field, slot, depth, allocations);
    if (field->label == PROTOBUF_C_LABEL_OPTIONAL &&
        field->type != PROTOBUF_C_TYPE_STRING &&
        field->type != PROTOBUF_C_TYPE_MESSAGE) {
      *(protobuf_c_boolean *)((char *)message + field->quantifier_offset) = 1;
    }
  }
}

// Sets |envelope|'s oneof member |field| to a filled body.
void halo_test_proto_fill_oneof(ProtobufCMessage *envelope,
                                const ProtobufCFieldDescriptor *field,
                                halo_test_allocations_t *allocations) {
  assert_true(field->flags & PROTOBUF_C_FIELD_FLAG_ONEOF);
  assert_int_equal(field->type, PROTOBUF_C_TYPE_MESSAGE);
  halo__fill_value(field, (char *)envelope + field->offset, 0, allocations);
  *(uint32_t *)((char *)envelope + field->quantifier_offset) = field->id;
}
