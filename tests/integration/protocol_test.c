// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of the daemon's handling of bad input on the client
// socket, with raw nng requests: malformed bytes, truncated protobuf, a
// Request without a body, an unknown request type, requests before Hello,
// a bad Hello, an oversized message (the daemon's NNG_OPT_RECVMAXSZ drops
// that pipe), admin requests on the client socket, and every request type
// with bad fields. Each gets a clear error (a code and a message naming
// the problem) and a second, normal client keeps working throughout.
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/support/halo_test.h"
#include "tests/support/proto_fill.h"

typedef struct protocol_fixture_t {
  halo_test_fixture_t base;  // first: the shared teardown frees it
  halo_test_raw_t raw;
} protocol_fixture_t;

static int protocol_setup(void **state) {
  protocol_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  halo_test_daemon_start(&fixture->base.daemon);
  fixture->base.client = halo_test_connect(&fixture->base.daemon, 0);
  halo_test_raw_open(&fixture->raw, fixture->base.daemon.listen_address, 0);
  // nng_dial returns once the client side is connected; halod makes the raw
  // pipe's session when its loop sees the pipe. Tests that count sessions
  // take their baseline after that.
  assert_true(halo_test_admin_expect_session_count(&fixture->base.daemon, 2,
                                                   HALO_TEST_DEADLINE_MS));
  return 0;
}

static int protocol_teardown(void **state) {
  protocol_fixture_t *fixture = *state;
  halo_test_raw_close(&fixture->raw);
  return halo_test_fixture_teardown(state);
}

// The normal client still gets answers, and can still create and use
// objects.
static void expect_daemon_serves(protocol_fixture_t *fixture) {
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->base.client));
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(
      halo_semaphore_create(fixture->base.client, 0, 0, &semaphore));
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 1));
  halo_semaphore_release(semaphore);
}

#define EXPECT(response, code, substring) \
  HALO_TEST_EXPECT_ERROR((response), (code), (substring))

// ---------------------------------------------------------------- framing

static void test_malformed_bytes(void **state) {
  protocol_fixture_t *fixture = *state;
  halo_test_raw_hello(&fixture->raw);
  static const uint8_t garbage[][8] = {
      {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
      {0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},  // bad wire type
      {0x0a, 0x7f, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06},  // length past end
      {'h', 'e', 'l', 'l', 'o', '!', '\n', 0},
  };
  for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); ++i) {
    EXPECT(halo_test_raw_call_bytes(&fixture->raw, garbage[i], 8),
           HALO_STATUS_INVALID_ARGUMENT, "decode");
    expect_daemon_serves(fixture);
  }
  // The malformed requests did not cost the raw session its Hello.
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Ping ping = HALO__WIRE__PING__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_PING;
  request.ping = &ping;
  halo__wire__response__free_unpacked(
      HALO_TEST_EXPECT_OK(halo_test_raw_call(&fixture->raw, &request)), NULL);
}

static void test_random_garbage_flood(void **state) {
  protocol_fixture_t *fixture = *state;
  halo_test_raw_hello(&fixture->raw);
  srand(99);
  uint8_t bytes[512];
  for (int round = 0; round < 300; ++round) {
    size_t length = 1 + (size_t)(rand() % (int)sizeof(bytes));
    for (size_t i = 0; i < length; ++i) bytes[i] = (uint8_t)rand();
    halo_wire_response_t *response =
        halo_test_raw_call_bytes(&fixture->raw, bytes, length);
    // Random bytes rarely form a valid request; whatever they form, the
    // daemon answers (it never crashes or hangs).
    halo__wire__response__free_unpacked(response, NULL);
  }
  expect_daemon_serves(fixture);
}

static void test_truncated_request(void **state) {
  protocol_fixture_t *fixture = *state;
  halo_test_raw_hello(&fixture->raw);
  // A valid SemaphoreCreate, cut short at every length.
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__SemaphoreCreate create = HALO__WIRE__SEMAPHORE_CREATE__INIT;
  create.initial_value = 1ull << 40;
  create.has_flags = true;
  create.flags = 1;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE;
  request.semaphore_create = &create;
  size_t length = halo__wire__request__get_packed_size(&request);
  uint8_t *bytes = malloc(length);
  assert_non_null(bytes);
  halo__wire__request__pack(&request, bytes);
  for (size_t cut = 1; cut < length; ++cut) {
    EXPECT(halo_test_raw_call_bytes(&fixture->raw, bytes, cut),
           HALO_STATUS_INVALID_ARGUMENT, NULL);
  }
  free(bytes);
  // None of them created a semaphore.
  halo_wire_response_t *response =
      halo_test_admin_semaphores(&fixture->base.daemon);
  assert_int_equal(response->admin_semaphores->n_semaphores, 0);
  halo__wire__response__free_unpacked(response, NULL);
  expect_daemon_serves(fixture);
}

static void test_request_without_body(void **state) {
  protocol_fixture_t *fixture = *state;
  halo_test_raw_hello(&fixture->raw);
  // An empty message is a Request with no body.
  EXPECT(halo_test_raw_call_bytes(&fixture->raw, "", 0),
         HALO_STATUS_INVALID_ARGUMENT, "body");
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_INVALID_ARGUMENT, "body");
  expect_daemon_serves(fixture);
}

static void test_unknown_request_type(void **state) {
  protocol_fixture_t *fixture = *state;
  halo_test_raw_hello(&fixture->raw);
  // Field 1000 (no such body), and field 1001 as a varint.
  static const uint8_t unknown_message[] = {0xc2, 0x3e, 0x02, 0x08, 0x05};
  static const uint8_t unknown_varint[] = {0xc8, 0x3e, 0x01};
  static const halo_status_code_t codes[] = {HALO_STATUS_INVALID_ARGUMENT,
                                             HALO_STATUS_UNIMPLEMENTED};
  halo_test_expect_error_in(
      halo_test_raw_call_bytes(&fixture->raw, unknown_message,
                               sizeof(unknown_message)),
      codes, 2, "request", __FILE__, __LINE__);
  halo_test_expect_error_in(
      halo_test_raw_call_bytes(&fixture->raw, unknown_varint,
                               sizeof(unknown_varint)),
      codes, 2, "request", __FILE__, __LINE__);
  expect_daemon_serves(fixture);
}

static void test_request_before_hello(void **state) {
  protocol_fixture_t *fixture = *state;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__SemaphoreCreate create = HALO__WIRE__SEMAPHORE_CREATE__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE;
  request.semaphore_create = &create;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_FAILED_PRECONDITION, "Hello");
  Halo__Wire__Ping ping = HALO__WIRE__PING__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_PING;
  request.ping = &ping;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_FAILED_PRECONDITION, "Hello");
  expect_daemon_serves(fixture);
  // Then Hello works on the same session.
  halo_test_raw_hello(&fixture->raw);
  halo__wire__response__free_unpacked(
      HALO_TEST_EXPECT_OK(halo_test_raw_call(&fixture->raw, &request)), NULL);
}

static void test_bad_hello(void **state) {
  protocol_fixture_t *fixture = *state;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Hello hello = HALO__WIRE__HELLO__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_HELLO;
  request.hello = &hello;
  hello.protocol_version = HALO_PROTOCOL_VERSION + 1;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_FAILED_PRECONDITION, "version");
  hello.protocol_version = 0;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_FAILED_PRECONDITION, "version");
  expect_daemon_serves(fixture);
  // A good Hello, then a second one.
  halo_test_raw_hello(&fixture->raw);
  hello.protocol_version = HALO_PROTOCOL_VERSION;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_FAILED_PRECONDITION, "Hello");
  // Hello without its required field does not decode.
  static const uint8_t no_version[] = {0x0a, 0x03, 0x12, 0x01, 'x'};
  EXPECT(
      halo_test_raw_call_bytes(&fixture->raw, no_version, sizeof(no_version)),
      HALO_STATUS_INVALID_ARGUMENT, NULL);
  expect_daemon_serves(fixture);
}

// Packs a Ping request with |payload_length| bytes of payload.
static uint8_t *pack_ping(size_t payload_length, size_t *out_length) {
  uint8_t *payload = malloc(payload_length ? payload_length : 1);
  assert_non_null(payload);
  memset(payload, 0x5c, payload_length);
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Ping ping = HALO__WIRE__PING__INIT;
  ping.has_payload = true;
  ping.payload.data = payload;
  ping.payload.len = payload_length;
  request.body_case = HALO__WIRE__REQUEST__BODY_PING;
  request.ping = &ping;
  size_t length = halo__wire__request__get_packed_size(&request);
  uint8_t *bytes = malloc(length);
  assert_non_null(bytes);
  halo__wire__request__pack(&request, bytes);
  free(payload);
  *out_length = length;
  return bytes;
}

static void test_oversized_message_drops_pipe(void **state) {
  // Spoken at the level of nng's ipc framing (nng's own client would refuse
  // to build such messages, and nng 1.5 leaks a pipe its peer drops).
  protocol_fixture_t *fixture = *state;
  const char *path = fixture->base.daemon.socket_path;
  uint32_t baseline = halo_test_admin_session_count(&fixture->base.daemon);
  int fd = halo_test_ipc_open_session(path);
  size_t length;
  assert_int_equal(halo_test_admin_session_count(&fixture->base.daemon),
                   baseline + 1);
  // Just under the limit works: a Ping echoes 3 MiB.
  uint8_t *ping = pack_ping(3u << 20, &length);
  halo_wire_response_t *response =
      HALO_TEST_EXPECT_OK(halo_test_ipc_call(fd, 2, ping, length));
  free(ping);
  assert_int_equal(response->ping->payload.len, 3u << 20);
  halo__wire__response__free_unpacked(response, NULL);

  // Announcing one byte over the limit is enough: the daemon drops the pipe
  // (and with it the session) without reading the body.
  uint8_t id[4] = {0x80, 0, 0, 3};
  halo_test_ipc_send_frame(fd, HALO_WIRE_MAX_MESSAGE_BYTES + 1, id, sizeof(id));
  bool closed = halo_test_ipc_wait_closed(fd, HALO_TEST_DEADLINE_MS);
  close(fd);
  if (!closed) {
    print_error("halod kept the pipe of a %u-byte message\n",
                HALO_WIRE_MAX_MESSAGE_BYTES + 1);
    fail();
  }
  assert_true(halo_test_admin_expect_session_count(
      &fixture->base.daemon, baseline, HALO_TEST_DEADLINE_MS));
  expect_daemon_serves(fixture);

  // A whole oversized message, sent for real, is dropped the same way.
  fd = halo_test_ipc_connect(path);
  uint8_t *big = pack_ping(HALO_WIRE_MAX_MESSAGE_BYTES, &length);
  uint8_t *frame = malloc(length + 4);
  assert_non_null(frame);
  memcpy(frame, id, 4);
  memcpy(frame + 4, big, length);
  free(big);
  halo_test_ipc_send_frame(fd, length + 4, frame, length + 4);
  free(frame);
  closed = halo_test_ipc_wait_closed(fd, HALO_TEST_DEADLINE_MS);
  close(fd);
  assert_true(closed);
  expect_daemon_serves(fixture);

  // The daemon states its limit in Hello.
  halo_test_raw_hello(&fixture->raw);  // asserts max_message_bytes == 4 MiB
}

// The admin socket's bound is far below the client socket's: its requests
// are a few bytes, and a larger message is dropped with its connection
// before halod reads it, while the admin socket goes on answering.
static void test_oversized_admin_message_drops_pipe(void **state) {
  protocol_fixture_t *fixture = *state;
  const char *path = fixture->base.daemon.admin_address + strlen("ipc://");
  uint8_t id[4] = {0x80, 0, 0, 3};
  int fd = halo_test_ipc_connect(path);
  halo_test_ipc_send_frame(fd, 65536 + 1, id, sizeof(id));
  bool closed = halo_test_ipc_wait_closed(fd, HALO_TEST_DEADLINE_MS);
  close(fd);
  if (!closed) {
    print_error("halod kept the admin pipe of a 65537-byte message\n");
    fail();
  }
  // One under the client socket's limit too: the admin socket's is lower.
  fd = halo_test_ipc_connect(path);
  halo_test_ipc_send_frame(fd, 1u << 20, id, sizeof(id));
  assert_true(halo_test_ipc_wait_closed(fd, HALO_TEST_DEADLINE_MS));
  close(fd);
  halo_wire_response_t *response =
      halo_test_admin_status(&fixture->base.daemon);
  halo__wire__response__free_unpacked(response, NULL);
  expect_daemon_serves(fixture);
}

static void test_bad_framing_drops_pipe(void **state) {
  protocol_fixture_t *fixture = *state;
  const char *path = fixture->base.daemon.socket_path;
  uint32_t baseline = halo_test_admin_session_count(&fixture->base.daemon);
  // A frame of an unknown type.
  int fd = halo_test_ipc_connect(path);
  static const uint8_t bad_type[9] = {7, 0, 0, 0, 0, 0, 0, 0, 4};
  (void)send(fd, bad_type, sizeof(bad_type), MSG_NOSIGNAL);
  assert_true(halo_test_ipc_wait_closed(fd, HALO_TEST_DEADLINE_MS));
  close(fd);
  // A request without the request id header nng's req0 puts first.
  fd = halo_test_ipc_connect(path);
  static const uint8_t no_id[2] = {0x12, 0x00};
  halo_test_ipc_send_frame(fd, sizeof(no_id), no_id, sizeof(no_id));
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  // Dropped or ignored, never answered as a request.
  if (poll(&pfd, 1, 200) > 0) {
    char byte;
    assert_true(recv(fd, &byte, 1, MSG_DONTWAIT) <= 0);
  }
  close(fd);
  // A wrong greeting (another protocol: pub0).
  int raw = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(raw >= 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  strcpy(address.sun_path, path);
  assert_int_equal(connect(raw, (struct sockaddr *)&address, sizeof(address)),
                   0);
  static const uint8_t pub0[8] = {0, 'S', 'P', 0, 0, 0x20, 0, 0};
  assert_int_equal(send(raw, pub0, sizeof(pub0), MSG_NOSIGNAL), 8);
  uint8_t greeting[8];
  assert_int_equal(recv(raw, greeting, sizeof(greeting), MSG_WAITALL), 8);
  assert_true(halo_test_ipc_wait_closed(raw, HALO_TEST_DEADLINE_MS));
  close(raw);
  expect_daemon_serves(fixture);
  // None of them left a session behind.
  assert_true(halo_test_admin_expect_session_count(
      &fixture->base.daemon, baseline, HALO_TEST_DEADLINE_MS));
}

static void test_large_write_is_chunked_under_the_limit(void **state) {
  protocol_fixture_t *fixture = *state;
  // A device buffer write of more than one message goes in chunks: fine.
  size_t size = HALO_WIRE_MAX_MESSAGE_BYTES + 12345;
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_buffer_create(fixture->base.client, 0,
                                         HALO_MEMORY_DEVICE, size, 0, &buffer));
  uint8_t *data = calloc(1, size);
  assert_non_null(data);
  data[size - 1] = 0x42;
  HALO_TEST_ASSERT_OK(halo_buffer_write(buffer, 0, data, size));
  uint8_t last = 0;
  HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, size - 1, &last, 1));
  assert_int_equal(last, 0x42);
  free(data);
  halo_buffer_release(buffer);
  expect_daemon_serves(fixture);
}

static void test_admin_requests_on_client_socket(void **state) {
  protocol_fixture_t *fixture = *state;
  halo_test_raw_hello(&fixture->raw);
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__AdminStatus status = HALO__WIRE__ADMIN_STATUS__INIT;
  Halo__Wire__AdminSessions sessions = HALO__WIRE__ADMIN_SESSIONS__INIT;
  Halo__Wire__AdminSemaphores semaphores = HALO__WIRE__ADMIN_SEMAPHORES__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_ADMIN_STATUS;
  request.admin_status = &status;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_PERMISSION_DENIED, "admin");
  request.body_case = HALO__WIRE__REQUEST__BODY_ADMIN_SESSIONS;
  request.admin_sessions = &sessions;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_PERMISSION_DENIED, "admin");
  request.body_case = HALO__WIRE__REQUEST__BODY_ADMIN_SEMAPHORES;
  request.admin_semaphores = &semaphores;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_PERMISSION_DENIED, "admin");
  expect_daemon_serves(fixture);
}

static void test_client_requests_on_admin_socket(void **state) {
  protocol_fixture_t *fixture = *state;
  halo_test_raw_t admin;
  halo_test_raw_open(&admin, fixture->base.daemon.admin_address, 0);
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__SemaphoreCreate create = HALO__WIRE__SEMAPHORE_CREATE__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE;
  request.semaphore_create = &create;
  halo_wire_response_t *response = halo_test_raw_call(&admin, &request);
  assert_int_not_equal(response->code, HALO_STATUS_OK);
  assert_non_null(response->message);
  assert_true(response->message[0] != '\0');
  halo__wire__response__free_unpacked(response, NULL);
  static const uint8_t garbage[] = {0xff, 0xff, 0xff};
  response = halo_test_raw_call_bytes(&admin, garbage, sizeof(garbage));
  assert_int_not_equal(response->code, HALO_STATUS_OK);
  halo__wire__response__free_unpacked(response, NULL);
  halo_test_raw_close(&admin);
  expect_daemon_serves(fixture);
}

// ---------------------------------------------------------------- bad fields

static void test_every_request_type_with_bad_fields(void **state) {
  protocol_fixture_t *fixture = *state;
  halo_test_raw_t *raw = &fixture->raw;
  halo_test_raw_hello(raw);
  uint64_t semaphore = halo_test_raw_semaphore_create(raw, 5, 0, NULL, NULL);
  uint64_t buffer = halo_test_raw_buffer_create(
      raw, 4096, HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE, 0, NULL);
  uint64_t device_buffer = halo_test_raw_buffer_create(
      raw, 4096, HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE, 0, NULL);
  Halo__Wire__Request request;
  uint8_t short_token[3] = {1, 2, 3};
  uint8_t unknown_token[16];
  memset(unknown_token, 0xee, sizeof(unknown_token));
  uint8_t data[8] = {0};

#define RESET()                                            \
  do {                                                     \
    Halo__Wire__Request empty = HALO__WIRE__REQUEST__INIT; \
    request = empty;                                       \
  } while (0)

  // BufferCreate: size 0, too big, unknown device, unknown memory type,
  // unknown flags.
  {
    Halo__Wire__BufferCreate body = HALO__WIRE__BUFFER_CREATE__INIT;
    RESET();
    request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_CREATE;
    request.buffer_create = &body;
    body.memory_type = HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE;
    body.size = 0;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "size");
    body.size = (1ull << 40) + 1;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "size");
    body.size = 64;
    body.device = 1000;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_OUT_OF_RANGE,
           "device");
    body.device = 0;
    body.memory_type = (Halo__Wire__MemoryType)77;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "memory type");
    body.memory_type = HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE;
    body.has_flags = true;
    body.flags = 0x80;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "flags");
  }
  // BufferRelease: unknown handle, wrong type.
  {
    Halo__Wire__BufferRelease body = HALO__WIRE__BUFFER_RELEASE__INIT;
    RESET();
    request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE;
    request.buffer_release = &body;
    body.handle = 0;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "handle");
    body.handle = semaphore;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "handle");
  }
  // BufferWrite: past the end, offset overflow, on a device buffer too.
  {
    Halo__Wire__BufferWrite body = HALO__WIRE__BUFFER_WRITE__INIT;
    RESET();
    request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_WRITE;
    request.buffer_write = &body;
    body.data.data = data;
    body.data.len = sizeof(data);
    uint64_t handles[2] = {buffer, device_buffer};
    for (int i = 0; i < 2; ++i) {
      body.handle = handles[i];
      body.offset = 4096 - 4;
      EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_OUT_OF_RANGE, NULL);
      body.offset = UINT64_MAX - 2;
      EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_OUT_OF_RANGE, NULL);
    }
    body.handle = semaphore;
    body.offset = 0;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "handle");
  }
  // BufferRead: past the end, overflow, more than a chunk.
  {
    Halo__Wire__BufferRead body = HALO__WIRE__BUFFER_READ__INIT;
    RESET();
    request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_READ;
    request.buffer_read = &body;
    body.handle = device_buffer;
    body.offset = 4000;
    body.length = 200;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_OUT_OF_RANGE, NULL);
    body.offset = UINT64_MAX;
    body.length = 2;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_OUT_OF_RANGE, NULL);
    body.offset = 0;
    body.length = HALO_WIRE_MAX_CHUNK_BYTES + 1;
    static const halo_status_code_t codes[] = {HALO_STATUS_INVALID_ARGUMENT,
                                               HALO_STATUS_OUT_OF_RANGE};
    halo_test_expect_error_in(halo_test_raw_call(raw, &request), codes, 2, NULL,
                              __FILE__, __LINE__);
    body.length = UINT64_MAX;
    halo_test_expect_error_in(halo_test_raw_call(raw, &request), codes, 2, NULL,
                              __FILE__, __LINE__);
  }
  // Export of a non-exportable buffer / semaphore, and of wrong types.
  {
    Halo__Wire__Export body = HALO__WIRE__EXPORT__INIT;
    RESET();
    request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_EXPORT;
    request.buffer_export = &body;
    body.handle = buffer;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_FAILED_PRECONDITION,
           "exportable");
    body.handle = semaphore;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "handle");
    RESET();
    request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_EXPORT;
    request.semaphore_export = &body;
    body.handle = semaphore;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_FAILED_PRECONDITION,
           "exportable");
    body.handle = buffer;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "handle");
  }
  // Import: a token of the wrong length, an unknown token.
  {
    Halo__Wire__Import body = HALO__WIRE__IMPORT__INIT;
    Halo__Wire__Request__BodyCase cases[2] = {
        HALO__WIRE__REQUEST__BODY_BUFFER_IMPORT,
        HALO__WIRE__REQUEST__BODY_SEMAPHORE_IMPORT};
    for (int i = 0; i < 2; ++i) {
      RESET();
      request.body_case = cases[i];
      if (i == 0) {
        request.buffer_import = &body;
      } else {
        request.semaphore_import = &body;
      }
      body.token.data = short_token;
      body.token.len = sizeof(short_token);
      static const halo_status_code_t codes[] = {HALO_STATUS_INVALID_ARGUMENT,
                                                 HALO_STATUS_NOT_FOUND};
      halo_test_expect_error_in(halo_test_raw_call(raw, &request), codes, 2,
                                "token", __FILE__, __LINE__);
      body.token.data = NULL;
      body.token.len = 0;
      halo_test_expect_error_in(halo_test_raw_call(raw, &request), codes, 2,
                                "token", __FILE__, __LINE__);
      body.token.data = unknown_token;
      body.token.len = sizeof(unknown_token);
      EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_NOT_FOUND, NULL);
    }
  }
  // SemaphoreCreate: initial value >= 2^63, unknown flags.
  {
    Halo__Wire__SemaphoreCreate body = HALO__WIRE__SEMAPHORE_CREATE__INIT;
    RESET();
    request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE;
    request.semaphore_create = &body;
    body.initial_value = 1ull << 63;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           NULL);
    body.initial_value = 0;
    body.has_flags = true;
    body.flags = 2;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "flags");
  }
  // SemaphoreSignal: equal, lower, >= 2^63, wrong handle type.
  {
    EXPECT(halo_test_raw_semaphore_signal(raw, semaphore, 5),
           HALO_STATUS_INVALID_ARGUMENT, "5");
    EXPECT(halo_test_raw_semaphore_signal(raw, semaphore, 4),
           HALO_STATUS_INVALID_ARGUMENT, NULL);
    EXPECT(halo_test_raw_semaphore_signal(raw, semaphore, 1ull << 63),
           HALO_STATUS_INVALID_ARGUMENT, NULL);
    EXPECT(halo_test_raw_semaphore_signal(raw, buffer, 6),
           HALO_STATUS_INVALID_ARGUMENT, "handle");
  }
  // SemaphoreFail: code OK, negative, out of range, wrong handle type.
  {
    Halo__Wire__SemaphoreFail body = HALO__WIRE__SEMAPHORE_FAIL__INIT;
    RESET();
    request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_FAIL;
    request.semaphore_fail = &body;
    body.handle = semaphore;
    body.message = "bad code";
    int32_t bad_codes[3] = {0, -1, 1000};
    for (int i = 0; i < 3; ++i) {
      body.code = bad_codes[i];
      EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
             "code");
    }
    body.code = HALO_STATUS_ABORTED;
    body.handle = buffer;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "handle");
  }
  // SemaphoreQuery and SemaphoreRelease: wrong handle type, handle 0.
  {
    Halo__Wire__SemaphoreQuery query = HALO__WIRE__SEMAPHORE_QUERY__INIT;
    RESET();
    request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY;
    request.semaphore_query = &query;
    query.handle = buffer;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "handle");
    query.handle = 0;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "handle");
    Halo__Wire__SemaphoreRelease release = HALO__WIRE__SEMAPHORE_RELEASE__INIT;
    RESET();
    request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_RELEASE;
    request.semaphore_release = &release;
    release.handle = device_buffer;
    EXPECT(halo_test_raw_call(raw, &request), HALO_STATUS_INVALID_ARGUMENT,
           "handle");
  }
#undef RESET

  // After all that, the objects are unharmed.
  Halo__Wire__Request query_request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__SemaphoreQuery query = HALO__WIRE__SEMAPHORE_QUERY__INIT;
  query.handle = semaphore;
  query_request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY;
  query_request.semaphore_query = &query;
  halo_wire_response_t *response =
      HALO_TEST_EXPECT_OK(halo_test_raw_call(raw, &query_request));
  assert_int_equal(response->semaphore_query->value, 5);
  assert_int_equal(response->semaphore_query->failure_code, 0);
  halo__wire__response__free_unpacked(response, NULL);
  halo_wire_response_t *sessions =
      halo_test_admin_sessions(&fixture->base.daemon);
  uint32_t buffers = 0;
  for (size_t i = 0; i < sessions->admin_sessions->n_sessions; ++i) {
    Halo__Wire__SessionInfo *session = sessions->admin_sessions->sessions[i];
    if (session->session_id == raw->session_id) buffers = session->buffers;
  }
  halo__wire__response__free_unpacked(sessions, NULL);
  assert_int_equal(buffers, 2);
  expect_daemon_serves(fixture);
}

static void test_every_request_type_survives_generic_bad_fields(void **state) {
  // Every request type the protocol has (later ones too), once with every
  // field at its default (handles 0, sizes 0, ...) and once with every field
  // out of range (top bits set), before and after Hello: each gets an
  // answer that decodes, errors carry a message, and the daemon keeps
  // serving the other client.
  protocol_fixture_t *fixture = *state;
  const ProtobufCMessageDescriptor *descriptor =
      &halo__wire__request__descriptor;
  for (int hello_done = 0; hello_done < 2; ++hello_done) {
    if (hello_done) halo_test_raw_hello(&fixture->raw);
    for (unsigned i = 0; i < descriptor->n_fields; ++i) {
      const ProtobufCFieldDescriptor *field = &descriptor->fields[i];
      for (int filled = 0; filled < 2; ++filled) {
        halo_test_allocations_t allocations = {.count = 0};
        Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
        if (filled) {
          halo_test_proto_fill_oneof(&request.base, field, &allocations);
        } else {
          const ProtobufCMessageDescriptor *body = field->descriptor;
          ProtobufCMessage *message =
              calloc(1, body->sizeof_message);  // freed with allocations
          assert_non_null(message);
          allocations.blocks[allocations.count++] = message;
          protobuf_c_message_init(body, message);
          *(ProtobufCMessage **)((char *)&request + field->offset) = message;
          *(uint32_t *)((char *)&request + field->quantifier_offset) =
              field->id;
        }
        halo_wire_response_t *response =
            halo_test_raw_call(&fixture->raw, &request);
        halo_test_allocations_free(&allocations);
        if (!hello_done &&
            field->id >= HALO__WIRE__REQUEST__BODY_ADMIN_STATUS) {
          // Admin requests are refused as such, before Hello too (haloctl
          // pointed at the client socket is told it reached that).
          assert_int_equal(response->code, HALO_STATUS_PERMISSION_DENIED);
        } else if (!hello_done &&
                   field->id != HALO__WIRE__REQUEST__BODY_HELLO) {
          // Before Hello everything else but Hello is refused.
          assert_int_equal(response->code, HALO_STATUS_FAILED_PRECONDITION);
        }
        if (response->code != HALO_STATUS_OK &&
            (!response->message || !response->message[0])) {
          print_error(
              "%s (%s fields): %s without a message\n", field->name,
              filled ? "filled" : "default",
              halo_status_code_name((halo_status_code_t)response->code));
          halo__wire__response__free_unpacked(response, NULL);
          fail();
        }
        halo__wire__response__free_unpacked(response, NULL);
      }
      HALO_TEST_ASSERT_OK(halo_client_ping(fixture->base.client));
    }
  }
  expect_daemon_serves(fixture);
}

// ------------------------------------------------------------ decoding cost

// Packs |request| into a new buffer (free it).
static uint8_t *pack_request(const Halo__Wire__Request *request,
                             size_t *out_length) {
  size_t length = halo__wire__request__get_packed_size(request);
  uint8_t *bytes = malloc(length ? length : 1);
  assert_non_null(bytes);
  halo__wire__request__pack(request, bytes);
  *out_length = length;
  return bytes;
}

// Sends a CommandBufferCreate of |count| copies of |command| and returns
// the response.
static halo_wire_response_t *call_command_buffer_create(
    protocol_fixture_t *fixture, Halo__Wire__Command *command, size_t count) {
  Halo__Wire__Command **commands = calloc(count, sizeof(*commands));
  assert_non_null(commands);
  for (size_t i = 0; i < count; ++i) commands[i] = command;
  Halo__Wire__CommandBufferCreate create =
      HALO__WIRE__COMMAND_BUFFER_CREATE__INIT;
  create.flags = HALO_COMMAND_BUFFER_REUSABLE;
  create.n_commands = count;
  create.commands = commands;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_CREATE;
  request.command_buffer_create = &create;
  size_t length;
  uint8_t *bytes = pack_request(&request, &length);
  free(commands);
  halo_wire_response_t *response =
      halo_test_raw_call_bytes(&fixture->raw, bytes, length);
  free(bytes);
  return response;
}

// Sends |count| copies of the |unit_length| bytes at |unit| as one request
// (a field repeated |count| times) and returns the response.
static halo_wire_response_t *call_repeated_bytes(protocol_fixture_t *fixture,
                                                 const uint8_t *unit,
                                                 size_t unit_length,
                                                 size_t count) {
  uint8_t *bytes = malloc(unit_length * count);
  assert_non_null(bytes);
  for (size_t i = 0; i < count; ++i) {
    memcpy(bytes + i * unit_length, unit, unit_length);
  }
  halo_wire_response_t *response =
      halo_test_raw_call_bytes(&fixture->raw, bytes, unit_length * count);
  free(bytes);
  return response;
}

// Sends a QueueExecute of |bindings| bindings, |waits| waits and |signals|
// signals (of handles that do not exist) and returns the response.
static halo_wire_response_t *call_queue_execute(protocol_fixture_t *fixture,
                                                size_t bindings, size_t waits,
                                                size_t signals) {
  Halo__Wire__Binding binding = HALO__WIRE__BINDING__INIT;
  Halo__Wire__SemaphoreValue value = HALO__WIRE__SEMAPHORE_VALUE__INIT;
  size_t values = waits + signals;
  Halo__Wire__Binding **binding_list =
      calloc(bindings + 1, sizeof(*binding_list));
  Halo__Wire__SemaphoreValue **value_list =
      calloc(values + 1, sizeof(*value_list));
  assert_non_null(binding_list);
  assert_non_null(value_list);
  for (size_t i = 0; i < bindings; ++i) binding_list[i] = &binding;
  for (size_t i = 0; i < values; ++i) value_list[i] = &value;
  Halo__Wire__QueueExecute execute = HALO__WIRE__QUEUE_EXECUTE__INIT;
  execute.command_buffer = 0x7777;
  execute.n_bindings = bindings;
  execute.bindings = binding_list;
  execute.n_waits = waits;
  execute.waits = value_list;
  execute.n_signals = signals;
  execute.signals = value_list + waits;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_EXECUTE;
  request.queue_execute = &execute;
  halo_wire_response_t *response = halo_test_raw_call(&fixture->raw, &request);
  free(binding_list);
  free(value_list);
  return response;
}

// Sends an ExecutableCreate (of bytes no loader takes) with |count| compiler
// options and returns the response.
static halo_wire_response_t *call_executable_create(protocol_fixture_t *fixture,
                                                    size_t count) {
  char **options = calloc(count + 1, sizeof(*options));
  assert_non_null(options);
  for (size_t i = 0; i < count; ++i) options[i] = "-DX=1";
  static uint8_t data[4] = {1, 2, 3, 4};
  Halo__Wire__ExecutableCreate create = HALO__WIRE__EXECUTABLE_CREATE__INIT;
  create.format = HALO__WIRE__EXECUTABLE_FORMAT__EXECUTABLE_FORMAT_PTX;
  create.data.data = data;
  create.data.len = sizeof(data);
  create.n_options = count;
  create.options = options;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_EXECUTABLE_CREATE;
  request.executable_create = &create;
  halo_wire_response_t *response = halo_test_raw_call(&fixture->raw, &request);
  free(options);
  return response;
}

// Asserts |response| is an error that did not come from the scan before
// decoding (the request was decoded and refused by what checks it), and
// frees it.
static void expect_decoded_error(halo_wire_response_t *response) {
  assert_non_null(response);
  assert_int_not_equal(response->code, HALO_STATUS_OK);
  assert_non_null(response->message);
  if (strstr(response->message, "before decoding")) {
    print_error("refused before decoding: %s\n", response->message);
    fail();
  }
  halo__wire__response__free_unpacked(response, NULL);
}

static void test_costly_decodes_are_refused_before_decoding(void **state) {
  // protobuf-c allocates a structure for every element of a repeated
  // field, every sub-message and every unknown field: 4 MB of four-byte
  // barrier commands decoded to a million structures (some 200 MiB and a
  // quarter of a second of halod's loop, which every client shares) before
  // the command count was refused. Requests past the bounds are refused on
  // their bytes, with an error naming the bound, each time they come, and
  // the other client is served between them.
  protocol_fixture_t *fixture = *state;
  halo_test_raw_hello(&fixture->raw);
  Halo__Wire__Command barrier = HALO__WIRE__COMMAND__INIT;
  barrier.type = HALO__WIRE__COMMAND_TYPE__COMMAND_BARRIER;
  for (int round = 0; round < 3; ++round) {
    EXPECT(call_command_buffer_create(fixture, &barrier, 1000000),
           HALO_STATUS_INVALID_ARGUMENT,
           "before decoding: command_buffer_create.commands: more than "
           "65536 commands (HALO_MAX_COMMANDS)");
    expect_daemon_serves(fixture);
  }
  EXPECT(call_command_buffer_create(fixture, &barrier, HALO_MAX_COMMANDS + 1),
         HALO_STATUS_INVALID_ARGUMENT, "more than 65536 commands");

  // A command's arguments, 100000 of them (a barrier's were decoded and
  // ignored).
  enum { kArgs = 100000 };
  Halo__Wire__DispatchArg arg = HALO__WIRE__DISPATCH_ARG__INIT;
  arg.kind = HALO__WIRE__DISPATCH_ARG_KIND__DISPATCH_ARG_BINDING_TABLE;
  Halo__Wire__DispatchArg **args = calloc(kArgs, sizeof(*args));
  assert_non_null(args);
  for (size_t i = 0; i < kArgs; ++i) args[i] = &arg;
  Halo__Wire__Command crowded = barrier;
  crowded.n_args = kArgs;
  crowded.args = args;
  Halo__Wire__Command *mixed[3] = {&barrier, &barrier, &crowded};
  Halo__Wire__CommandBufferCreate create =
      HALO__WIRE__COMMAND_BUFFER_CREATE__INIT;
  create.flags = HALO_COMMAND_BUFFER_REUSABLE;
  create.n_commands = 3;
  create.commands = mixed;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_CREATE;
  request.command_buffer_create = &create;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_INVALID_ARGUMENT,
         "before decoding: command_buffer_create.commands[2].args: more "
         "than 64 dispatch arguments (HALO_MAX_DISPATCH_ARGS)");
  crowded.n_args = HALO_MAX_DISPATCH_ARGS + 1;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_INVALID_ARGUMENT, "more than 64 dispatch arguments");
  crowded.n_args = 0;
  uint32_t values[4] = {1, 1, 1, 1};
  crowded.n_grid = 4;
  crowded.grid = values;
  EXPECT(halo_test_raw_call(&fixture->raw, &request),
         HALO_STATUS_INVALID_ARGUMENT,
         "commands[2].grid: more than 3 grid values");
  free(args);
  expect_daemon_serves(fixture);

  // An execution's bindings, waits and signals; an executable's options.
  EXPECT(call_queue_execute(fixture, HALO_MAX_BINDINGS + 1, 0, 0),
         HALO_STATUS_INVALID_ARGUMENT,
         "before decoding: queue_execute.bindings: more than 4096 bindings "
         "(HALO_MAX_BINDINGS)");
  EXPECT(call_queue_execute(fixture, 0, 600, 600), HALO_STATUS_INVALID_ARGUMENT,
         "queue_execute.signals: more than 1024 waits and signals in all");
  EXPECT(call_executable_create(fixture, 257), HALO_STATUS_INVALID_ARGUMENT,
         "executable_create.options: more than 256 compiler options");

  // A field that is not repeated, given 100000 times (protobuf-c decodes
  // each copy, a sub-message's merged into the last), and 100000 unknown
  // fields (each copied).
  static const uint8_t payload[] = {0x12, 0x03, 0x0a, 0x01, 0x5c};
  EXPECT(call_repeated_bytes(fixture, payload, sizeof(payload), 100000),
         HALO_STATUS_INVALID_ARGUMENT,
         "before decoding: ping: given more than once");
  static const uint8_t inner_payload[] = {0x0a, 0x01, 0x5c};
  uint8_t *ping = malloc(5 + sizeof(inner_payload) * 100000);
  assert_non_null(ping);
  size_t inner = sizeof(inner_payload) * 100000;
  ping[0] = 0x12;
  ping[1] = (uint8_t)(0x80 | (inner & 0x7f));
  ping[2] = (uint8_t)(0x80 | ((inner >> 7) & 0x7f));
  ping[3] = (uint8_t)((inner >> 14) & 0x7f);
  for (size_t i = 0; i < 100000; ++i) {
    memcpy(ping + 4 + i * sizeof(inner_payload), inner_payload,
           sizeof(inner_payload));
  }
  EXPECT(halo_test_raw_call_bytes(&fixture->raw, ping, 4 + inner),
         HALO_STATUS_INVALID_ARGUMENT,
         "before decoding: ping.payload: given more than once");
  free(ping);
  static const uint8_t unknown[] = {0xf8, 0x07, 0x01};  // field 127, varint
  EXPECT(call_repeated_bytes(fixture, unknown, sizeof(unknown), 100000),
         HALO_STATUS_INVALID_ARGUMENT,
         "before decoding: more than 64 unknown fields");
  expect_daemon_serves(fixture);
}

static void test_largest_requests_still_decode(void **state) {
  // The bounds are those halod enforces after decoding: requests at them
  // decode and reach their checks as before.
  protocol_fixture_t *fixture = *state;
  halo_test_raw_hello(&fixture->raw);
  Halo__Wire__Command barrier = HALO__WIRE__COMMAND__INIT;
  barrier.type = HALO__WIRE__COMMAND_TYPE__COMMAND_BARRIER;
  halo_wire_response_t *response = HALO_TEST_EXPECT_OK(
      call_command_buffer_create(fixture, &barrier, HALO_MAX_COMMANDS));
  assert_int_equal(response->body_case,
                   HALO__WIRE__RESPONSE__BODY_COMMAND_BUFFER);
  halo__wire__response__free_unpacked(response, NULL);

  // A dispatch of 64 arguments and 3 grid and block values (of an
  // executable that does not exist).
  Halo__Wire__DispatchArg arg = HALO__WIRE__DISPATCH_ARG__INIT;
  arg.kind = HALO__WIRE__DISPATCH_ARG_KIND__DISPATCH_ARG_BINDING_TABLE;
  Halo__Wire__DispatchArg *args[HALO_MAX_DISPATCH_ARGS];
  for (size_t i = 0; i < HALO_MAX_DISPATCH_ARGS; ++i) args[i] = &arg;
  uint32_t values[3] = {1, 1, 1};
  Halo__Wire__Command dispatch = HALO__WIRE__COMMAND__INIT;
  dispatch.type = HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH;
  dispatch.has_executable = true;
  dispatch.executable = 0x7777;
  dispatch.entry = "main";
  dispatch.n_grid = dispatch.n_block = 3;
  dispatch.grid = dispatch.block = values;
  dispatch.n_args = HALO_MAX_DISPATCH_ARGS;
  dispatch.args = args;
  expect_decoded_error(call_command_buffer_create(fixture, &dispatch, 1));
  expect_decoded_error(call_queue_execute(fixture, HALO_MAX_BINDINGS, 0, 0));
  expect_decoded_error(call_queue_execute(fixture, 0, 512, 512));
  expect_decoded_error(call_executable_create(fixture, 256));

  // A Ping with 64 unknown fields (halod's bound) is a Ping.
  enum { kUnknown = 64 };
  static const uint8_t unknown[] = {0xf8, 0x07, 0x01};  // field 127, varint
  uint8_t ping[3 + sizeof(unknown) * kUnknown];
  size_t inner = sizeof(unknown) * kUnknown;  // 192: a two-byte length
  ping[0] = 0x12;
  ping[1] = (uint8_t)(0x80 | (inner & 0x7f));
  ping[2] = (uint8_t)(inner >> 7);
  for (size_t i = 0; i < kUnknown; ++i) {
    memcpy(ping + 3 + i * sizeof(unknown), unknown, sizeof(unknown));
  }
  response = HALO_TEST_EXPECT_OK(
      halo_test_raw_call_bytes(&fixture->raw, ping, sizeof(ping)));
  assert_int_equal(response->body_case, HALO__WIRE__RESPONSE__BODY_PING);
  halo__wire__response__free_unpacked(response, NULL);
  expect_daemon_serves(fixture);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name) \
  cmocka_unit_test_setup_teardown(name, protocol_setup, protocol_teardown)
  const struct CMUnitTest tests[] = {
      T(test_malformed_bytes),
      T(test_random_garbage_flood),
      T(test_truncated_request),
      T(test_request_without_body),
      T(test_unknown_request_type),
      T(test_request_before_hello),
      T(test_bad_hello),
      T(test_oversized_message_drops_pipe),
      T(test_oversized_admin_message_drops_pipe),
      T(test_bad_framing_drops_pipe),
      T(test_large_write_is_chunked_under_the_limit),
      T(test_admin_requests_on_client_socket),
      T(test_client_requests_on_admin_socket),
      T(test_every_request_type_with_bad_fields),
      T(test_every_request_type_survives_generic_bad_fields),
      T(test_costly_decodes_are_refused_before_decoding),
      T(test_largest_requests_still_decode),
  };
#undef T
  return cmocka_run_group_tests_name("protocol", tests, NULL, NULL);
}
