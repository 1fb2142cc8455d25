// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the wire protocol (proto/halo.proto, common/wire.h):
// encode/decode round trips of every Request and Response body type (the
// test fails when the protocol grows a body it does not cover), decoding of
// malformed and truncated bytes, and halo_wire_call's handling of error /
// unknown-code / undecodable responses (against an in-process nng rep
// socket). A request's size is bounded by libhalo against the limit halod
// states in Hello (client_contract_test), not by the wire layer.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "common/wire.h"

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "tests/support/proto_fill.h"

// ---------------------------------------------------------------- helpers

// Packs |message| and returns the bytes (caller frees) and their length.
static uint8_t *pack(const ProtobufCMessage *message, size_t *out_length) {
  size_t length = protobuf_c_message_get_packed_size(message);
  uint8_t *bytes = malloc(length ? length : 1);
  assert_non_null(bytes);
  assert_int_equal(protobuf_c_message_pack(message, bytes), length);
  *out_length = length;
  return bytes;
}

// Packs |message|, unpacks it, packs the copy again and asserts the two
// encodings are identical (protobuf-c encodes deterministically, so equal
// bytes mean equal messages). Returns the decoded copy.
static ProtobufCMessage *round_trip(const ProtobufCMessage *message) {
  size_t length;
  uint8_t *bytes = pack(message, &length);
  ProtobufCMessage *decoded =
      protobuf_c_message_unpack(message->descriptor, NULL, length, bytes);
  assert_non_null(decoded);
  size_t again_length;
  uint8_t *again = pack(decoded, &again_length);
  assert_int_equal(again_length, length);
  assert_memory_equal(again, bytes, length);
  free(again);
  free(bytes);
  return decoded;
}

static uint8_t token_bytes[16] = {1, 2,  3,  4,  5,  6,  7,  8,
                                  9, 10, 11, 12, 13, 14, 15, 16};

// ---------------------------------------------------------------- requests

// Every Request body, filled with non-default values.
typedef struct request_bodies_t {
  Halo__Wire__Hello hello;
  Halo__Wire__Ping ping;
  Halo__Wire__DeviceList device_list;
  Halo__Wire__BufferCreate buffer_create;
  Halo__Wire__BufferRelease buffer_release;
  Halo__Wire__BufferWrite buffer_write;
  Halo__Wire__BufferRead buffer_read;
  Halo__Wire__Export buffer_export;
  Halo__Wire__Import buffer_import;
  Halo__Wire__SemaphoreCreate semaphore_create;
  Halo__Wire__SemaphoreSignal semaphore_signal;
  Halo__Wire__SemaphoreFail semaphore_fail;
  Halo__Wire__SemaphoreQuery semaphore_query;
  Halo__Wire__SemaphoreRelease semaphore_release;
  Halo__Wire__Export semaphore_export;
  Halo__Wire__Import semaphore_import;
  Halo__Wire__AdminStatus admin_status;
  Halo__Wire__AdminSessions admin_sessions;
  Halo__Wire__AdminSemaphores admin_semaphores;
  uint8_t payload[300];
} request_bodies_t;

static void request_bodies_init(request_bodies_t *b) {
  for (size_t i = 0; i < sizeof(b->payload); ++i) {
    b->payload[i] = (uint8_t)(i * 7);
  }
  Halo__Wire__Hello hello = HALO__WIRE__HELLO__INIT;
  hello.protocol_version = HALO_PROTOCOL_VERSION;
  hello.client_name = "wire-test";
  b->hello = hello;
  Halo__Wire__Ping ping = HALO__WIRE__PING__INIT;
  ping.has_payload = true;
  ping.payload.data = b->payload;
  ping.payload.len = sizeof(b->payload);
  b->ping = ping;
  Halo__Wire__DeviceList device_list = HALO__WIRE__DEVICE_LIST__INIT;
  b->device_list = device_list;
  Halo__Wire__BufferCreate buffer_create = HALO__WIRE__BUFFER_CREATE__INIT;
  buffer_create.device = 3;
  buffer_create.size = (1ull << 40);
  buffer_create.memory_type = HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE;
  buffer_create.has_flags = true;
  buffer_create.flags = 1;
  b->buffer_create = buffer_create;
  Halo__Wire__BufferRelease buffer_release = HALO__WIRE__BUFFER_RELEASE__INIT;
  buffer_release.handle = UINT64_MAX;
  b->buffer_release = buffer_release;
  Halo__Wire__BufferWrite buffer_write = HALO__WIRE__BUFFER_WRITE__INIT;
  buffer_write.handle = 17;
  buffer_write.offset = 4095;
  buffer_write.data.data = b->payload;
  buffer_write.data.len = sizeof(b->payload);
  b->buffer_write = buffer_write;
  Halo__Wire__BufferRead buffer_read = HALO__WIRE__BUFFER_READ__INIT;
  buffer_read.handle = 18;
  buffer_read.offset = 1;
  buffer_read.length = HALO_WIRE_MAX_CHUNK_BYTES;
  b->buffer_read = buffer_read;
  Halo__Wire__Export export_ = HALO__WIRE__EXPORT__INIT;
  export_.handle = 19;
  b->buffer_export = export_;
  export_.handle = 29;
  b->semaphore_export = export_;
  Halo__Wire__Import import = HALO__WIRE__IMPORT__INIT;
  import.token.data = token_bytes;
  import.token.len = sizeof(token_bytes);
  b->buffer_import = import;
  b->semaphore_import = import;
  Halo__Wire__SemaphoreCreate semaphore_create =
      HALO__WIRE__SEMAPHORE_CREATE__INIT;
  semaphore_create.initial_value = (uint64_t)INT64_MAX;
  semaphore_create.has_flags = true;
  semaphore_create.flags = 1;
  b->semaphore_create = semaphore_create;
  Halo__Wire__SemaphoreSignal semaphore_signal =
      HALO__WIRE__SEMAPHORE_SIGNAL__INIT;
  semaphore_signal.handle = 21;
  semaphore_signal.value = 1ull << 62;
  b->semaphore_signal = semaphore_signal;
  Halo__Wire__SemaphoreFail semaphore_fail = HALO__WIRE__SEMAPHORE_FAIL__INIT;
  semaphore_fail.handle = 22;
  semaphore_fail.code = HALO_STATUS_DEVICE_LOST;
  semaphore_fail.message = "kernel trapped";
  b->semaphore_fail = semaphore_fail;
  Halo__Wire__SemaphoreQuery semaphore_query =
      HALO__WIRE__SEMAPHORE_QUERY__INIT;
  semaphore_query.handle = 23;
  b->semaphore_query = semaphore_query;
  Halo__Wire__SemaphoreRelease semaphore_release =
      HALO__WIRE__SEMAPHORE_RELEASE__INIT;
  semaphore_release.handle = 24;
  b->semaphore_release = semaphore_release;
  Halo__Wire__AdminStatus admin_status = HALO__WIRE__ADMIN_STATUS__INIT;
  b->admin_status = admin_status;
  Halo__Wire__AdminSessions admin_sessions = HALO__WIRE__ADMIN_SESSIONS__INIT;
  b->admin_sessions = admin_sessions;
  Halo__Wire__AdminSemaphores admin_semaphores =
      HALO__WIRE__ADMIN_SEMAPHORES__INIT;
  b->admin_semaphores = admin_semaphores;
}

// Sets |request|'s body to the one of |body_case|; false if the case is not
// known to this test.
static bool request_set_body(Halo__Wire__Request *request,
                             Halo__Wire__Request__BodyCase body_case,
                             request_bodies_t *b) {
  Halo__Wire__Request empty = HALO__WIRE__REQUEST__INIT;
  *request = empty;
  request->body_case = body_case;
  switch (body_case) {
    case HALO__WIRE__REQUEST__BODY_HELLO:
      request->hello = &b->hello;
      return true;
    case HALO__WIRE__REQUEST__BODY_PING:
      request->ping = &b->ping;
      return true;
    case HALO__WIRE__REQUEST__BODY_DEVICE_LIST:
      request->device_list = &b->device_list;
      return true;
    case HALO__WIRE__REQUEST__BODY_BUFFER_CREATE:
      request->buffer_create = &b->buffer_create;
      return true;
    case HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE:
      request->buffer_release = &b->buffer_release;
      return true;
    case HALO__WIRE__REQUEST__BODY_BUFFER_WRITE:
      request->buffer_write = &b->buffer_write;
      return true;
    case HALO__WIRE__REQUEST__BODY_BUFFER_READ:
      request->buffer_read = &b->buffer_read;
      return true;
    case HALO__WIRE__REQUEST__BODY_BUFFER_EXPORT:
      request->buffer_export = &b->buffer_export;
      return true;
    case HALO__WIRE__REQUEST__BODY_BUFFER_IMPORT:
      request->buffer_import = &b->buffer_import;
      return true;
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE:
      request->semaphore_create = &b->semaphore_create;
      return true;
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_SIGNAL:
      request->semaphore_signal = &b->semaphore_signal;
      return true;
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_FAIL:
      request->semaphore_fail = &b->semaphore_fail;
      return true;
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY:
      request->semaphore_query = &b->semaphore_query;
      return true;
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_RELEASE:
      request->semaphore_release = &b->semaphore_release;
      return true;
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_EXPORT:
      request->semaphore_export = &b->semaphore_export;
      return true;
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_IMPORT:
      request->semaphore_import = &b->semaphore_import;
      return true;
    case HALO__WIRE__REQUEST__BODY_ADMIN_STATUS:
      request->admin_status = &b->admin_status;
      return true;
    case HALO__WIRE__REQUEST__BODY_ADMIN_SESSIONS:
      request->admin_sessions = &b->admin_sessions;
      return true;
    case HALO__WIRE__REQUEST__BODY_ADMIN_SEMAPHORES:
      request->admin_semaphores = &b->admin_semaphores;
      return true;
    default:
      return false;
  }
}

static void test_every_request_body_round_trips(void **state) {
  (void)state;
  // Every body the protocol has, including ones added after this test was
  // written, filled field by field from the descriptors.
  const ProtobufCMessageDescriptor *descriptor =
      &halo__wire__request__descriptor;
  unsigned bodies = 0;
  for (unsigned i = 0; i < descriptor->n_fields; ++i) {
    const ProtobufCFieldDescriptor *field = &descriptor->fields[i];
    assert_true(field->flags & PROTOBUF_C_FIELD_FLAG_ONEOF);
    halo_test_allocations_t allocations = {.count = 0};
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
    halo_test_proto_fill_oneof(&request.base, field, &allocations);
    Halo__Wire__Request *decoded =
        (Halo__Wire__Request *)round_trip(&request.base);
    assert_int_equal(decoded->body_case, field->id);
    halo__wire__request__free_unpacked(decoded, NULL);
    halo_test_allocations_free(&allocations);
    ++bodies;
  }
  assert_true(bodies >= 19);
  // The hand-filled bodies below (with values the daemon checks) round-trip
  // as well.
  request_bodies_t hand;
  request_bodies_init(&hand);
  for (unsigned i = 0; i < descriptor->n_fields; ++i) {
    Halo__Wire__Request request;
    if (!request_set_body(
            &request, (Halo__Wire__Request__BodyCase)descriptor->fields[i].id,
            &hand)) {
      continue;
    }
    Halo__Wire__Request *decoded =
        (Halo__Wire__Request *)round_trip(&request.base);
    halo__wire__request__free_unpacked(decoded, NULL);
  }
}

static void test_request_fields_survive(void **state) {
  (void)state;
  request_bodies_t bodies;
  request_bodies_init(&bodies);
  Halo__Wire__Request request;
  assert_true(request_set_body(&request, HALO__WIRE__REQUEST__BODY_BUFFER_WRITE,
                               &bodies));
  Halo__Wire__Request *decoded =
      (Halo__Wire__Request *)round_trip(&request.base);
  assert_int_equal(decoded->buffer_write->handle, 17);
  assert_int_equal(decoded->buffer_write->offset, 4095);
  assert_int_equal(decoded->buffer_write->data.len, sizeof(bodies.payload));
  assert_memory_equal(decoded->buffer_write->data.data, bodies.payload,
                      sizeof(bodies.payload));
  halo__wire__request__free_unpacked(decoded, NULL);

  assert_true(request_set_body(
      &request, HALO__WIRE__REQUEST__BODY_SEMAPHORE_FAIL, &bodies));
  decoded = (Halo__Wire__Request *)round_trip(&request.base);
  assert_int_equal(decoded->semaphore_fail->code, HALO_STATUS_DEVICE_LOST);
  assert_string_equal(decoded->semaphore_fail->message, "kernel trapped");
  halo__wire__request__free_unpacked(decoded, NULL);

  assert_true(request_set_body(
      &request, HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE, &bodies));
  decoded = (Halo__Wire__Request *)round_trip(&request.base);
  assert_int_equal(decoded->semaphore_create->initial_value, INT64_MAX);
  assert_true(decoded->semaphore_create->has_flags);
  assert_int_equal(decoded->semaphore_create->flags, 1);
  halo__wire__request__free_unpacked(decoded, NULL);

  assert_true(request_set_body(
      &request, HALO__WIRE__REQUEST__BODY_BUFFER_IMPORT, &bodies));
  decoded = (Halo__Wire__Request *)round_trip(&request.base);
  assert_int_equal(decoded->buffer_import->token.len, 16);
  assert_memory_equal(decoded->buffer_import->token.data, token_bytes, 16);
  halo__wire__request__free_unpacked(decoded, NULL);

  // Defaults: flags absent decodes as 0.
  Halo__Wire__SemaphoreCreate bare = HALO__WIRE__SEMAPHORE_CREATE__INIT;
  bare.initial_value = 5;
  Halo__Wire__SemaphoreCreate *bare_decoded =
      (Halo__Wire__SemaphoreCreate *)round_trip(&bare.base);
  assert_false(bare_decoded->has_flags);
  assert_int_equal(bare_decoded->flags, 0);
  halo__wire__semaphore_create__free_unpacked(bare_decoded, NULL);
}

// ---------------------------------------------------------------- responses

static void test_every_response_body_round_trips(void **state) {
  (void)state;
  Halo__Wire__HelloReply hello = HALO__WIRE__HELLO_REPLY__INIT;
  hello.protocol_version = HALO_PROTOCOL_VERSION;
  hello.daemon_version = "0.1.0";
  hello.session_id = 99;
  hello.session_token.data = token_bytes;
  hello.session_token.len = 16;
  hello.fd_channel_path = "/run/halo/halo.sock.fd";
  hello.incarnation = 0x1234567890ull;
  hello.trust_domain = "uid:1000";
  hello.max_message_bytes = HALO_WIRE_MAX_MESSAGE_BYTES;
  Halo__Wire__PingReply ping = HALO__WIRE__PING_REPLY__INIT;
  Halo__Wire__DeviceInfo device = HALO__WIRE__DEVICE_INFO__INIT;
  device.ordinal = 0;
  device.driver = "local";
  device.name = "cpu";
  device.memory_bytes = 1ull << 34;
  device.has_multiprocessor_count = true;
  device.multiprocessor_count = 2;
  Halo__Wire__DeviceInfo *devices[] = {&device, &device};
  Halo__Wire__DeviceListReply device_list = HALO__WIRE__DEVICE_LIST_REPLY__INIT;
  device_list.n_devices = 2;
  device_list.devices = devices;
  Halo__Wire__HostPlacement placement = HALO__WIRE__HOST_PLACEMENT__INIT;
  placement.arena_id = 4;
  placement.arena_size = 1 << 24;
  placement.offset = 4096;
  Halo__Wire__BufferReply buffer = HALO__WIRE__BUFFER_REPLY__INIT;
  buffer.handle = 5;
  buffer.size = 100;
  buffer.memory_type = HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE;
  buffer.placement = &placement;
  Halo__Wire__BufferReadReply buffer_read = HALO__WIRE__BUFFER_READ_REPLY__INIT;
  buffer_read.data.data = token_bytes;
  buffer_read.data.len = 16;
  Halo__Wire__ExportReply exported = HALO__WIRE__EXPORT_REPLY__INIT;
  exported.token.data = token_bytes;
  exported.token.len = 16;
  Halo__Wire__SemaphoreReply semaphore = HALO__WIRE__SEMAPHORE_REPLY__INIT;
  semaphore.handle = 6;
  semaphore.page_id = 7;
  semaphore.slot = 62;
  semaphore.generation = 3;
  Halo__Wire__SemaphoreQueryReply query =
      HALO__WIRE__SEMAPHORE_QUERY_REPLY__INIT;
  query.value = 12;
  query.failure_code = HALO_STATUS_ABORTED;
  query.failure_message = "creator died";
  Halo__Wire__DriverInfo driver = HALO__WIRE__DRIVER_INFO__INIT;
  driver.name = "cuda";
  driver.available = false;
  driver.reason = "libcuda.so.1 not found";
  Halo__Wire__DriverInfo *drivers[] = {&driver};
  Halo__Wire__AdminStatusReply admin_status =
      HALO__WIRE__ADMIN_STATUS_REPLY__INIT;
  admin_status.daemon_version = "0.1.0";
  admin_status.protocol_version = HALO_PROTOCOL_VERSION;
  admin_status.pid = 4242;
  admin_status.uptime_seconds = 1.5;
  admin_status.n_drivers = 1;
  admin_status.drivers = drivers;
  admin_status.n_devices = 1;
  admin_status.devices = devices;
  admin_status.sessions = 3;
  admin_status.incarnation = 9;
  admin_status.listen_address = "ipc:///run/halo/halo.sock";
  admin_status.trust_domains = 1;
  Halo__Wire__SessionInfo session = HALO__WIRE__SESSION_INFO__INIT;
  session.session_id = 1;
  session.uid = 1000;
  session.pid = 77;
  session.trust_domain = "uid:1000";
  session.client_name = "worker";
  session.age_seconds = 0.25;
  session.buffers = 2;
  session.semaphores = 3;
  session.host_bytes = 8192;
  session.device_bytes = 1 << 20;
  session.arenas = 1;
  session.requests = 10;
  Halo__Wire__SessionInfo *sessions[] = {&session};
  Halo__Wire__AdminSessionsReply admin_sessions =
      HALO__WIRE__ADMIN_SESSIONS_REPLY__INIT;
  admin_sessions.n_sessions = 1;
  admin_sessions.sessions = sessions;
  Halo__Wire__SemaphoreInfo semaphore_info = HALO__WIRE__SEMAPHORE_INFO__INIT;
  semaphore_info.semaphore_id = 1;
  semaphore_info.owner_session = 2;
  semaphore_info.value = 3;
  semaphore_info.failure_code = 0;
  semaphore_info.holders = 2;
  semaphore_info.exportable = true;
  Halo__Wire__SemaphoreInfo *semaphore_infos[] = {&semaphore_info};
  Halo__Wire__AdminSemaphoresReply admin_semaphores =
      HALO__WIRE__ADMIN_SEMAPHORES_REPLY__INIT;
  admin_semaphores.n_semaphores = 1;
  admin_semaphores.semaphores = semaphore_infos;

  const ProtobufCMessageDescriptor *descriptor =
      &halo__wire__response__descriptor;
  unsigned bodies = 0;
  for (unsigned i = 0; i < descriptor->n_fields; ++i) {
    const ProtobufCFieldDescriptor *field = &descriptor->fields[i];
    if (!(field->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) continue;  // code...
    ++bodies;
    // Generic: every field filled from the descriptors.
    halo_test_allocations_t allocations = {.count = 0};
    Halo__Wire__Response generic = HALO__WIRE__RESPONSE__INIT;
    generic.code = HALO_STATUS_OK;
    halo_test_proto_fill_oneof(&generic.base, field, &allocations);
    Halo__Wire__Response *decoded =
        (Halo__Wire__Response *)round_trip(&generic.base);
    assert_int_equal(decoded->body_case, field->id);
    halo__wire__response__free_unpacked(decoded, NULL);
    halo_test_allocations_free(&allocations);
    // By hand, for the bodies this test knows.
    Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
    response.code = HALO_STATUS_OK;
    response.body_case = (Halo__Wire__Response__BodyCase)field->id;
    switch (response.body_case) {
      case HALO__WIRE__RESPONSE__BODY_HELLO:
        response.hello = &hello;
        break;
      case HALO__WIRE__RESPONSE__BODY_PING:
        response.ping = &ping;
        break;
      case HALO__WIRE__RESPONSE__BODY_DEVICE_LIST:
        response.device_list = &device_list;
        break;
      case HALO__WIRE__RESPONSE__BODY_BUFFER:
        response.buffer = &buffer;
        break;
      case HALO__WIRE__RESPONSE__BODY_BUFFER_READ:
        response.buffer_read = &buffer_read;
        break;
      case HALO__WIRE__RESPONSE__BODY_EXPORTED:
        response.exported = &exported;
        break;
      case HALO__WIRE__RESPONSE__BODY_SEMAPHORE:
        response.semaphore = &semaphore;
        break;
      case HALO__WIRE__RESPONSE__BODY_SEMAPHORE_QUERY:
        response.semaphore_query = &query;
        break;
      case HALO__WIRE__RESPONSE__BODY_ADMIN_STATUS:
        response.admin_status = &admin_status;
        break;
      case HALO__WIRE__RESPONSE__BODY_ADMIN_SESSIONS:
        response.admin_sessions = &admin_sessions;
        break;
      case HALO__WIRE__RESPONSE__BODY_ADMIN_SEMAPHORES:
        response.admin_semaphores = &admin_semaphores;
        break;
      default:
        continue;  // covered by the generic round trip above
    }
    decoded = (Halo__Wire__Response *)round_trip(&response.base);
    assert_int_equal(decoded->body_case, field->id);
    halo__wire__response__free_unpacked(decoded, NULL);
  }
  assert_true(bodies >= 11);

  // An error response: code and message, no body.
  Halo__Wire__Response error = HALO__WIRE__RESPONSE__INIT;
  error.code = HALO_STATUS_NOT_FOUND;
  error.message = "semaphore handle 7 not found";
  Halo__Wire__Response *decoded =
      (Halo__Wire__Response *)round_trip(&error.base);
  assert_int_equal(decoded->code, HALO_STATUS_NOT_FOUND);
  assert_string_equal(decoded->message, "semaphore handle 7 not found");
  assert_int_equal(decoded->body_case, HALO__WIRE__RESPONSE__BODY__NOT_SET);
  halo__wire__response__free_unpacked(decoded, NULL);
}

// ---------------------------------------------------------------- bad bytes

static void test_empty_request_has_no_body(void **state) {
  (void)state;
  Halo__Wire__Request *request = halo__wire__request__unpack(NULL, 0, NULL);
  assert_non_null(request);
  assert_int_equal(request->body_case, HALO__WIRE__REQUEST__BODY__NOT_SET);
  halo__wire__request__free_unpacked(request, NULL);
}

static void test_unknown_body_decodes_without_body(void **state) {
  (void)state;
  // Field 1000 (not a Request body; tag varint 0xc2 0x3e),
  // length-delimited, 2 bytes: what an unknown request type from a newer
  // client looks like.
  static const uint8_t unknown[] = {0xc2, 0x3e, 0x02, 0x08, 0x05};
  Halo__Wire__Request *request =
      halo__wire__request__unpack(NULL, sizeof(unknown), unknown);
  assert_non_null(request);
  assert_int_equal(request->body_case, HALO__WIRE__REQUEST__BODY__NOT_SET);
  halo__wire__request__free_unpacked(request, NULL);
}

static void test_missing_required_field_does_not_decode(void **state) {
  (void)state;
  // semaphore_signal (field 21) with an empty body: handle and value are
  // required.
  static const uint8_t bytes[] = {0xaa, 0x01, 0x00};
  assert_null(halo__wire__request__unpack(NULL, sizeof(bytes), bytes));
  // Hello without protocol_version.
  static const uint8_t hello[] = {0x0a, 0x03, 0x12, 0x01, 'x'};
  assert_null(halo__wire__request__unpack(NULL, sizeof(hello), hello));
}

static void test_truncated_messages_do_not_decode(void **state) {
  (void)state;
  const ProtobufCMessageDescriptor *descriptor =
      &halo__wire__request__descriptor;
  for (unsigned i = 0; i < descriptor->n_fields; ++i) {
    halo_test_allocations_t allocations = {.count = 0};
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
    halo_test_proto_fill_oneof(&request.base, &descriptor->fields[i],
                               &allocations);
    size_t length;
    uint8_t *bytes = pack(&request.base, &length);
    halo_test_allocations_free(&allocations);
    // The body is the Request's only field, so every non-empty strict
    // prefix cuts it and must fail (the empty one is a Request without a
    // body). None may crash or leak (ASan watches).
    for (size_t cut = 0; cut < length; ++cut) {
      Halo__Wire__Request *decoded =
          halo__wire__request__unpack(NULL, cut, bytes);
      if (cut == 0) {
        assert_non_null(decoded);
        assert_int_equal(decoded->body_case,
                         HALO__WIRE__REQUEST__BODY__NOT_SET);
      } else if (decoded) {
        print_error("body %s cut at %zu of %zu bytes decoded\n",
                    descriptor->fields[i].name, cut, length);
        halo__wire__request__free_unpacked(decoded, NULL);
        free(bytes);
        fail();
      }
      if (decoded) halo__wire__request__free_unpacked(decoded, NULL);
    }
    free(bytes);
  }
}

static void test_random_bytes_never_crash(void **state) {
  (void)state;
  srand(424242);
  uint8_t bytes[256];
  int decoded_count = 0;
  for (int round = 0; round < 20000; ++round) {
    size_t length = (size_t)(rand() % (int)sizeof(bytes));
    for (size_t i = 0; i < length; ++i) bytes[i] = (uint8_t)rand();
    Halo__Wire__Request *request =
        halo__wire__request__unpack(NULL, length, bytes);
    if (request) {
      ++decoded_count;
      halo__wire__request__free_unpacked(request, NULL);
    }
    Halo__Wire__Response *response =
        halo__wire__response__unpack(NULL, length, bytes);
    if (response) halo__wire__response__free_unpacked(response, NULL);
  }
  // Most random bytes are not a valid Request.
  assert_true(decoded_count < 20000);
}

// ---------------------------------------------------------------- wire.c

static void test_pack_into_nng_message(void **state) {
  (void)state;
  request_bodies_t bodies;
  request_bodies_init(&bodies);
  Halo__Wire__Request request;
  assert_true(
      request_set_body(&request, HALO__WIRE__REQUEST__BODY_PING, &bodies));
  nng_msg *msg = NULL;
  assert_null(halo_wire_pack(&request.base, &msg));
  assert_non_null(msg);
  assert_int_equal(nng_msg_len(msg),
                   halo__wire__request__get_packed_size(&request));
  Halo__Wire__Request *decoded =
      halo__wire__request__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
  assert_non_null(decoded);
  assert_int_equal(decoded->body_case, HALO__WIRE__REQUEST__BODY_PING);
  assert_memory_equal(decoded->ping->payload.data, bodies.payload,
                      sizeof(bodies.payload));
  halo__wire__request__free_unpacked(decoded, NULL);
  nng_msg_free(msg);
}

static void test_status_from_nng(void **state) {
  (void)state;
  static const struct {
    int error;
    halo_status_code_t code;
  } cases[] = {
      {NNG_ETIMEDOUT, HALO_STATUS_DEADLINE_EXCEEDED},
      {NNG_ECONNREFUSED, HALO_STATUS_UNAVAILABLE},
      {NNG_ECONNSHUT, HALO_STATUS_UNAVAILABLE},
      {NNG_ECLOSED, HALO_STATUS_UNAVAILABLE},
      {NNG_ENOENT, HALO_STATUS_UNAVAILABLE},
      {NNG_ECANCELED, HALO_STATUS_CANCELLED},
      {NNG_ENOMEM, HALO_STATUS_RESOURCE_EXHAUSTED},
      {NNG_EMSGSIZE, HALO_STATUS_INVALID_ARGUMENT},
      {NNG_EPERM, HALO_STATUS_PERMISSION_DENIED},
      {NNG_EINTERNAL, HALO_STATUS_INTERNAL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    halo_status_t status = halo_wire_status_from_nng(cases[i].error, "dial");
    assert_int_equal(halo_status_code(status), cases[i].code);
    char expected[128];
    snprintf(expected, sizeof(expected), "dial: %s",
             nng_strerror(cases[i].error));
    assert_string_equal(halo_status_message(status), expected);
    halo_status_free(status);
  }
}

// An in-process server answering each request with the next canned reply.
typedef struct canned_server_t {
  nng_socket socket;
  pthread_t thread;
  const uint8_t *replies[4];
  size_t lengths[4];
  size_t count;
  size_t served;
} canned_server_t;

static void *canned_server_main(void *arg) {
  canned_server_t *server = arg;
  for (size_t i = 0; i < server->count; ++i) {
    void *request = NULL;
    size_t length = 0;
    if (nng_recv(server->socket, &request, &length, NNG_FLAG_ALLOC) != 0) {
      return NULL;
    }
    nng_free(request, length);
    // nng_send needs a non-empty buffer pointer even for length 0.
    static const uint8_t nothing[1];
    const void *reply = server->lengths[i] ? server->replies[i] : nothing;
    if (nng_send(server->socket, (void *)reply, server->lengths[i], 0) != 0) {
      return NULL;
    }
    ++server->served;
  }
  return NULL;
}

static void test_wire_call_maps_responses(void **state) {
  (void)state;
  // 1: an error with a message; 2: an unknown code; 3: bytes that do not
  // decode; 4: OK with a body.
  Halo__Wire__Response error = HALO__WIRE__RESPONSE__INIT;
  error.code = HALO_STATUS_NOT_FOUND;
  error.message = "buffer handle 9 not found";
  size_t error_length;
  uint8_t *error_bytes = pack(&error.base, &error_length);
  Halo__Wire__Response unknown = HALO__WIRE__RESPONSE__INIT;
  unknown.code = 999;
  unknown.message = "from the future";
  size_t unknown_length;
  uint8_t *unknown_bytes = pack(&unknown.base, &unknown_length);
  static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0x01};
  Halo__Wire__Response ok = HALO__WIRE__RESPONSE__INIT;
  Halo__Wire__PingReply ping_reply = HALO__WIRE__PING_REPLY__INIT;
  ok.body_case = HALO__WIRE__RESPONSE__BODY_PING;
  ok.ping = &ping_reply;
  size_t ok_length;
  uint8_t *ok_bytes = pack(&ok.base, &ok_length);

  canned_server_t server = {
      .replies = {error_bytes, unknown_bytes, garbage, ok_bytes},
      .lengths = {error_length, unknown_length, sizeof(garbage), ok_length},
      .count = 4};
  assert_int_equal(nng_rep0_open(&server.socket), 0);
  assert_int_equal(nng_listen(server.socket, "inproc://wire-test", NULL, 0), 0);
  assert_int_equal(
      pthread_create(&server.thread, NULL, canned_server_main, &server), 0);

  nng_socket client;
  assert_int_equal(nng_req0_open(&client), 0);
  assert_int_equal(nng_dial(client, "inproc://wire-test", NULL, 0), 0);
  nng_ctx ctx;
  assert_int_equal(nng_ctx_open(&ctx, client), 0);
  nng_aio *aio = NULL;
  assert_int_equal(nng_aio_alloc(&aio, NULL, NULL), 0);
  nng_aio_set_timeout(aio, 5000);

  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Ping ping = HALO__WIRE__PING__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_PING;
  request.ping = &ping;
  halo_wire_response_t *response = (halo_wire_response_t *)1;

  halo_status_t status = halo_wire_call(ctx, aio, NULL, &request, &response);
  assert_null(response);
  assert_int_equal(halo_status_code(status), HALO_STATUS_NOT_FOUND);
  assert_string_equal(halo_status_message(status), "buffer handle 9 not found");
  halo_status_free(status);

  status = halo_wire_call(ctx, aio, NULL, &request, &response);
  assert_null(response);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNKNOWN);
  assert_non_null(strstr(halo_status_message(status), "from the future"));
  halo_status_free(status);

  status = halo_wire_call(ctx, aio, NULL, &request, &response);
  assert_null(response);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INTERNAL);
  assert_non_null(strstr(halo_status_message(status), "decode"));
  halo_status_free(status);

  status = halo_wire_call(ctx, aio, NULL, &request, &response);
  assert_null(status);
  assert_non_null(response);
  assert_int_equal(response->body_case, HALO__WIRE__RESPONSE__BODY_PING);
  halo__wire__response__free_unpacked(response, NULL);

  assert_int_equal(pthread_join(server.thread, NULL), 0);
  assert_int_equal(server.served, 4);
  nng_aio_free(aio);
  nng_close(client);
  nng_close(server.socket);
  free(error_bytes);
  free(unknown_bytes);
  free(ok_bytes);
}

// A server that refuses the first request for now after |refuse_ms|
// (retry_after_ms 20) and never answers the one sent again.
typedef struct refusing_server_t {
  nng_socket socket;
  pthread_t thread;
  int refuse_ms;
  _Atomic int received;
} refusing_server_t;

static void *refusing_server_main(void *arg) {
  refusing_server_t *server = arg;
  void *request = NULL;
  size_t length = 0;
  if (nng_recv(server->socket, &request, &length, NNG_FLAG_ALLOC) != 0) {
    return NULL;
  }
  nng_free(request, length);
  ++server->received;
  struct timespec pause = {.tv_sec = server->refuse_ms / 1000,
                           .tv_nsec = (server->refuse_ms % 1000) * 1000000l};
  nanosleep(&pause, NULL);
  Halo__Wire__Response refusal = HALO__WIRE__RESPONSE__INIT;
  refusal.code = HALO_STATUS_UNAVAILABLE;
  refusal.message = "busy: try again";
  refusal.has_retry_after_ms = true;
  refusal.retry_after_ms = 20;
  size_t refusal_length;
  uint8_t *refusal_bytes = pack(&refusal.base, &refusal_length);
  int rv = nng_send(server->socket, refusal_bytes, refusal_length, 0);
  free(refusal_bytes);
  if (rv != 0) return NULL;
  // The request sent again is read, never answered (until the socket
  // closes).
  if (nng_recv(server->socket, &request, &length, NNG_FLAG_ALLOC) == 0) {
    nng_free(request, length);
    ++server->received;
  }
  return NULL;
}

// halo_wire_call_retrying ends at its deadline, however the time went: a
// request refused for now late in the call and sent again does not get a
// whole timeout of its own (nng applies an aio's timeout to each step
// anew), nor does the receive after a slow send; and where the one sent
// again runs out of time, the call returns the refusal.
static void test_wire_call_retrying_keeps_its_deadline(void **state) {
  (void)state;
  refusing_server_t server = {.refuse_ms = 400};
  assert_int_equal(nng_rep0_open(&server.socket), 0);
  assert_int_equal(
      nng_listen(server.socket, "inproc://wire-retry-test", NULL, 0), 0);
  assert_int_equal(
      pthread_create(&server.thread, NULL, refusing_server_main, &server), 0);
  nng_socket client;
  assert_int_equal(nng_req0_open(&client), 0);
  assert_int_equal(nng_dial(client, "inproc://wire-retry-test", NULL, 0), 0);
  nng_ctx ctx;
  assert_int_equal(nng_ctx_open(&ctx, client), 0);
  nng_aio *aio = NULL;
  assert_int_equal(nng_aio_alloc(&aio, NULL, NULL), 0);
  nng_aio_set_timeout(aio, 500);  // as a caller sets its request timeout
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Ping ping = HALO__WIRE__PING__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_PING;
  request.ping = &ping;
  halo_wire_response_t *response = NULL;
  int64_t start = halo_clock_now_ns();
  halo_status_t status = halo_wire_call_retrying(
      ctx, aio, NULL, &request, start + 500 * 1000000ll, &response);
  int64_t took_ms = (halo_clock_now_ns() - start) / 1000000;
  print_message("the call took %lld ms: %s\n", (long long)took_ms,
                halo_status_message(status));
  assert_null(response);
  // The refusal, which names what halod was short of, not the timeout.
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNAVAILABLE);
  assert_string_equal(halo_status_message(status), "busy: try again");
  assert_int_equal(server.received, 2);  // it was sent again
  assert_true(took_ms < 700);            // was 920: 400 + 20 + 500
  halo_status_free(status);
  nng_aio_free(aio);
  nng_close(client);
  nng_close(server.socket);
  assert_int_equal(pthread_join(server.thread, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_request_body_round_trips),
      cmocka_unit_test(test_request_fields_survive),
      cmocka_unit_test(test_every_response_body_round_trips),
      cmocka_unit_test(test_empty_request_has_no_body),
      cmocka_unit_test(test_unknown_body_decodes_without_body),
      cmocka_unit_test(test_missing_required_field_does_not_decode),
      cmocka_unit_test(test_truncated_messages_do_not_decode),
      cmocka_unit_test(test_random_bytes_never_crash),
      cmocka_unit_test(test_pack_into_nng_message),
      cmocka_unit_test(test_status_from_nng),
      cmocka_unit_test(test_wire_call_maps_responses),
      cmocka_unit_test(test_wire_call_retrying_keeps_its_deadline),
  };
  return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
