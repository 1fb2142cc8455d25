// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The wire-format scan of a client request before protobuf-c decodes it
// (daemon/request_scan.h). The framing follows protobuf-c 1.4's unpack
// (protobuf-c.c: parse_tag_and_wiretype, scan_length_prefixed_data,
// count_packed_elements), so that bytes called malformed here are bytes
// protobuf-c refuses, and an element counted here is one it would allocate.
#include "daemon/request_scan.h"

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/wire.h"
#include "daemon/executable.h"
#include "daemon/submission.h"
#include "halo/halo.h"

// The proto's messages do not nest recursively (a request is at most five
// deep); a deeper one could only come from a schema change.
#define HALOD_SCAN_MAX_DEPTH 16
// Messages with more fields than this are not checked for a field given
// twice past their first fields (none reachable from a Request has).
#define HALOD_SCAN_MAX_FIELDS 128
// The elements of a message's first fields are counted for the path of a
// refusal (the repeated message fields of the proto are among them).
#define HALOD_SCAN_INDEXED_FIELDS 16

// The counters of a message: fields of one group share a bound.
typedef enum halod_scan_group_e {
  HALOD_SCAN_COMMANDS,
  HALOD_SCAN_ARGS,
  HALOD_SCAN_GRID,
  HALOD_SCAN_BLOCK,
  HALOD_SCAN_BINDINGS,
  HALOD_SCAN_SYNC,
  HALOD_SCAN_OPTIONS,
  HALOD_SCAN_GROUPS,
} halod_scan_group_t;

typedef struct halod_scan_bound_t {
  const ProtobufCMessageDescriptor *message;
  const char *field;  // a repeated field of |message|
  halod_scan_group_t group;
  uint32_t limit;  // elements of the group in one message
  const char *what;
} halod_scan_bound_t;

static const halod_scan_bound_t halod_scan_bounds[] = {
    {&halo__wire__command_buffer_create__descriptor, "commands",
     HALOD_SCAN_COMMANDS, HALOD_MAX_COMMANDS, "commands (HALO_MAX_COMMANDS)"},
    {&halo__wire__command__descriptor, "args", HALOD_SCAN_ARGS,
     HALOD_MAX_DISPATCH_ARGS, "dispatch arguments (HALO_MAX_DISPATCH_ARGS)"},
    {&halo__wire__command__descriptor, "grid", HALOD_SCAN_GRID, 3,
     "grid values"},
    {&halo__wire__command__descriptor, "block", HALOD_SCAN_BLOCK, 3,
     "block values"},
    {&halo__wire__queue_execute__descriptor, "bindings", HALOD_SCAN_BINDINGS,
     HALOD_MAX_BINDINGS, "bindings (HALO_MAX_BINDINGS)"},
    {&halo__wire__queue_execute__descriptor, "waits", HALOD_SCAN_SYNC,
     HALOD_SUBMISSION_MAX_SYNC, "waits and signals in all"},
    {&halo__wire__queue_execute__descriptor, "signals", HALOD_SCAN_SYNC,
     HALOD_SUBMISSION_MAX_SYNC, "waits and signals in all"},
    {&halo__wire__queue_alloca__descriptor, "waits", HALOD_SCAN_SYNC,
     HALOD_SUBMISSION_MAX_SYNC, "waits and signals in all"},
    {&halo__wire__queue_alloca__descriptor, "signals", HALOD_SCAN_SYNC,
     HALOD_SUBMISSION_MAX_SYNC, "waits and signals in all"},
    {&halo__wire__queue_dealloca__descriptor, "waits", HALOD_SCAN_SYNC,
     HALOD_SUBMISSION_MAX_SYNC, "waits and signals in all"},
    {&halo__wire__queue_dealloca__descriptor, "signals", HALOD_SCAN_SYNC,
     HALOD_SUBMISSION_MAX_SYNC, "waits and signals in all"},
    {&halo__wire__executable_create__descriptor, "options", HALOD_SCAN_OPTIONS,
     HALOD_MAX_EXECUTABLE_OPTIONS, "compiler options"},
};

#define HALOD_SCAN_BOUND_COUNT \
  (sizeof(halod_scan_bounds) / sizeof(halod_scan_bounds[0]))

// The bound of repeated |field| of |message|; NULL for none.
static const halod_scan_bound_t *halod_scan_bound(
    const ProtobufCMessageDescriptor *message,
    const ProtobufCFieldDescriptor *field) {
  for (size_t i = 0; i < HALOD_SCAN_BOUND_COUNT; ++i) {
    if (halod_scan_bounds[i].message == message &&
        strcmp(halod_scan_bounds[i].field, field->name) == 0) {
      return &halod_scan_bounds[i];
    }
  }
  return NULL;
}

// One step of the path to the message being scanned.
typedef struct halod_scan_step_t {
  const ProtobufCFieldDescriptor *field;
  size_t index;  // of the element of a repeated field; SIZE_MAX: none
} halod_scan_step_t;

typedef struct halod_scan_t {
  size_t length;  // the request's
  uint32_t unknown_fields;
  uint32_t depth;
  halod_scan_step_t path[HALOD_SCAN_MAX_DEPTH];
  halo_status_t status;  // set once the scan stops
} halod_scan_t;

halo_status_t halod_request_undecodable(size_t length) {
  return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                          "request of %zu bytes does not decode as a "
                          "halo.wire.Request (malformed or truncated)",
                          length);
}

static bool halod_scan_malformed(halod_scan_t *scan) {
  scan->status = halod_request_undecodable(scan->length);
  return false;
}

// Stops the scan with INVALID_ARGUMENT "request refused before decoding:
// PATH[.FIELD]: FORMAT..." (|field| NULL: the path alone).
static bool halod_scan_refuse(halod_scan_t *scan,
                              const ProtobufCFieldDescriptor *field,
                              const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static bool halod_scan_refuse(halod_scan_t *scan,
                              const ProtobufCFieldDescriptor *field,
                              const char *format, ...) {
  char path[256] = "";
  size_t used = 0;
  for (uint32_t i = 0; i <= scan->depth && used < sizeof(path); ++i) {
    const halod_scan_step_t *step = i < scan->depth
                                        ? &scan->path[i]
                                        : &(halod_scan_step_t){field, SIZE_MAX};
    if (!step->field) continue;
    int n = snprintf(path + used, sizeof(path) - used, "%s%s", used ? "." : "",
                     step->field->name);
    if (n > 0) used += (size_t)n;
    if (step->index != SIZE_MAX && used < sizeof(path)) {
      n = snprintf(path + used, sizeof(path) - used, "[%zu]", step->index);
      if (n > 0) used += (size_t)n;
    }
  }
  char what[256];
  va_list arguments;
  va_start(arguments, format);
  vsnprintf(what, sizeof(what), format, arguments);
  va_end(arguments);
  scan->status = halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                  "request refused before decoding: %s%s%s",
                                  path, path[0] ? ": " : "", what);
  return false;
}

// protobuf-c's parse_tag_and_wiretype: the bytes of the tag at |data|
// (|length| > 0), 0 if it is not one.
static size_t halod_scan_tag(const uint8_t *data, size_t length,
                             uint32_t *out_tag, uint8_t *out_wire_type) {
  if ((data[0] & 0xf8) == 0) return 0;  // field number 0
  *out_wire_type = data[0] & 7;
  uint32_t tag = (data[0] & 0x7fu) >> 3;
  if (!(data[0] & 0x80)) {
    *out_tag = tag;
    return 1;
  }
  size_t max = length > 5 ? 5 : length;
  unsigned shift = 4;
  for (size_t i = 1; i < max; ++i) {
    if (!(data[i] & 0x80)) {
      *out_tag = tag | (uint32_t)data[i] << shift;
      return i + 1;
    }
    tag |= (uint32_t)(data[i] & 0x7f) << shift;
    shift += 7;
  }
  return 0;
}

// The bytes of the field value at |data| (|length| of them left) of
// |wire_type|, and (length-delimited) of its length prefix; 0 if it does
// not frame.
static size_t halod_scan_value(const uint8_t *data, size_t length,
                               uint8_t wire_type, size_t *out_prefix) {
  *out_prefix = 0;
  switch (wire_type) {
    case PROTOBUF_C_WIRE_TYPE_VARINT: {
      size_t max = length < 10 ? length : 10;
      for (size_t i = 0; i < max; ++i) {
        if (!(data[i] & 0x80)) return i + 1;
      }
      return 0;
    }
    case PROTOBUF_C_WIRE_TYPE_64BIT:
      return length < 8 ? 0 : 8;
    case PROTOBUF_C_WIRE_TYPE_32BIT:
      return length < 4 ? 0 : 4;
    case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED: {
      size_t max = length < 5 ? length : 5;
      size_t value = 0;
      for (size_t i = 0; i < max; ++i) {
        value |= (size_t)(data[i] & 0x7f) << (7 * i);
        if (!(data[i] & 0x80)) {
          if (value > INT_MAX || i + 1 + value > length) return 0;
          *out_prefix = i + 1;
          return i + 1 + value;
        }
      }
      return 0;
    }
    default:
      return 0;  // groups and undefined wire types
  }
}

// protobuf-c's count_packed_elements: the elements of a packed |type|
// array of |length| bytes at |data|; false if it does not frame.
static bool halod_scan_packed(ProtobufCType type, const uint8_t *data,
                              size_t length, size_t *out_count) {
  switch (type) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
      *out_count = length / 4;
      return length % 4 == 0;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
      *out_count = length / 8;
      return length % 8 == 0;
    case PROTOBUF_C_TYPE_BOOL:
      *out_count = length;
      return true;
    default: {
      size_t count = 0;
      for (size_t i = 0; i < length; ++i) count += !(data[i] & 0x80);
      *out_count = count;
      return true;
    }
  }
}

static bool halod_scan_message(halod_scan_t *scan,
                               const ProtobufCMessageDescriptor *message,
                               const uint8_t *data, size_t length);

// Scans the sub-message |field| of the message being scanned (|index|: of
// its repeated elements, SIZE_MAX for none).
static bool halod_scan_child(halod_scan_t *scan,
                             const ProtobufCFieldDescriptor *field,
                             size_t index, const uint8_t *data, size_t length) {
  if (scan->depth == HALOD_SCAN_MAX_DEPTH) {
    return halod_scan_refuse(scan, field, "nested more than %d messages deep",
                             HALOD_SCAN_MAX_DEPTH);
  }
  scan->path[scan->depth++] = (halod_scan_step_t){field, index};
  bool ok = halod_scan_message(scan, field->descriptor, data, length);
  --scan->depth;
  return ok;
}

// Scans one message of type |message|: every field frames, no field but a
// repeated one comes twice, the repeated ones keep their bounds, and the
// unknown ones of the request stay few; recurses into sub-messages.
static bool halod_scan_message(halod_scan_t *scan,
                               const ProtobufCMessageDescriptor *message,
                               const uint8_t *data, size_t length) {
  uint64_t seen[HALOD_SCAN_MAX_FIELDS / 64] = {0};
  // Set once a repeated field is met (most messages have none): the
  // elements of each bound's group, and of the first fields.
  bool counting = false;
  uint32_t counts[HALOD_SCAN_GROUPS];
  uint32_t elements[HALOD_SCAN_INDEXED_FIELDS];
  // The last repeated field met and its bound (elements come in runs).
  const ProtobufCFieldDescriptor *last_field = NULL;
  const halod_scan_bound_t *last_bound = NULL;
  const ProtobufCFieldDescriptor *found = NULL;
  size_t at = 0;
  while (at < length) {
    uint32_t tag = 0;
    uint8_t wire_type = 0;
    size_t tag_bytes = halod_scan_tag(data + at, length - at, &tag, &wire_type);
    if (!tag_bytes) return halod_scan_malformed(scan);
    at += tag_bytes;
    size_t prefix = 0;
    size_t value_bytes =
        halod_scan_value(data + at, length - at, wire_type, &prefix);
    if (!value_bytes) return halod_scan_malformed(scan);
    const uint8_t *value = data + at + prefix;
    size_t value_length = value_bytes - prefix;
    at += value_bytes;

    // Fields come in runs (repeated ones): the last one found is tried
    // first, as protobuf-c does.
    const ProtobufCFieldDescriptor *field =
        found && found->id == tag
            ? found
            : protobuf_c_message_descriptor_get_field(message, tag);
    if (!field) {
      if (++scan->unknown_fields > HALOD_REQUEST_MAX_UNKNOWN_FIELDS) {
        return halod_scan_refuse(scan, NULL,
                                 "more than %d unknown fields (the last: "
                                 "field %u of %s)",
                                 HALOD_REQUEST_MAX_UNKNOWN_FIELDS, tag,
                                 message->short_name);
      }
      continue;
    }
    found = field;
    bool length_prefixed = wire_type == PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
    bool is_message = field->type == PROTOBUF_C_TYPE_MESSAGE;
    size_t index = (size_t)(field - message->fields);
    if (field->label != PROTOBUF_C_LABEL_REPEATED) {
      if (index < HALOD_SCAN_MAX_FIELDS) {
        uint64_t bit = 1ull << (index % 64);
        if (seen[index / 64] & bit) {
          return halod_scan_refuse(scan, field, "given more than once");
        }
        seen[index / 64] |= bit;
      }
      if (is_message && length_prefixed &&
          !halod_scan_child(scan, field, SIZE_MAX, value, value_length)) {
        return false;
      }
      continue;
    }
    // A repeated field: one element, or a packed run of scalars.
    size_t count = 1;
    if (length_prefixed && field->type != PROTOBUF_C_TYPE_STRING &&
        field->type != PROTOBUF_C_TYPE_BYTES && !is_message &&
        !halod_scan_packed(field->type, value, value_length, &count)) {
      return halod_scan_malformed(scan);
    }
    if (!counting) {
      memset(counts, 0, sizeof(counts));
      memset(elements, 0, sizeof(elements));
      counting = true;
    }
    if (field != last_field) {
      last_field = field;
      last_bound = halod_scan_bound(message, field);
    }
    if (last_bound) {
      uint32_t *counted = &counts[last_bound->group];
      if (count > last_bound->limit - *counted) {
        return halod_scan_refuse(scan, field, "more than %u %s",
                                 last_bound->limit, last_bound->what);
      }
      *counted += (uint32_t)count;
    }
    if (is_message && length_prefixed) {
      size_t element =
          index < HALOD_SCAN_INDEXED_FIELDS ? elements[index]++ : SIZE_MAX;
      if (!halod_scan_child(scan, field, element, value, value_length)) {
        return false;
      }
    }
  }
  return true;
}

halo_status_t halod_request_scan(const uint8_t *bytes, size_t length) {
  halod_scan_t scan = {.length = length};
  halod_scan_message(&scan, &halo__wire__request__descriptor, bytes, length);
  return scan.status;
}
