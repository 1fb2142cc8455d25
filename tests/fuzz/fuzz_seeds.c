// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Writes the seed corpora of the fuzz harnesses (tests/fuzz/corpus/request
// and tests/fuzz/corpus/ring): inputs that a well-behaved client would
// send, and a few that a broken one would, each reaching a different part of
// the validation. Handles are those of a fuzz session (tests/fuzz/
// fuzz_halod.h); the ring seeds' records have checksum 0, which the ring
// harness seals.
//
//   halo-fuzz-seeds DIRECTORY          writes DIRECTORY/request/* and ring/*
//   halo-fuzz-seeds --check DIRECTORY  fails unless they hold these bytes
//
// ctest runs the check (fuzz.seeds), so the committed seeds follow the
// protocol; regenerate them after a change with
//   build/bin/halo-fuzz-seeds tests/fuzz/corpus
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/ring.h"
#include "daemon/handle_table.h"
#include "tests/fuzz/fuzz_frames.h"
#include "tests/fuzz/fuzz_halod.h"

static bool seeds_check;
static int seeds_failures;
static const char *seeds_directory;

static void seeds_output(const char *corpus, const char *name,
                         const uint8_t *data, size_t size) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s/%s", seeds_directory, corpus, name);
  if (seeds_check) {
    FILE *file = fopen(path, "rb");
    uint8_t *existing = malloc(size + 1);
    size_t got = file && existing ? fread(existing, 1, size + 1, file) : 0;
    bool same = file && got == size && memcmp(existing, data, size) == 0;
    if (file) fclose(file);
    free(existing);
    if (!same) {
      fprintf(stderr,
              "%s: missing or not what halo-fuzz-seeds writes (regenerate "
              "the corpus: halo-fuzz-seeds tests/fuzz/corpus)\n",
              path);
      ++seeds_failures;
    }
    return;
  }
  char folder[1024];
  snprintf(folder, sizeof(folder), "%s/%s", seeds_directory, corpus);
  mkdir(seeds_directory, 0777);
  mkdir(folder, 0777);
  FILE *file = fopen(path, "wb");
  if (!file || fwrite(data, 1, size, file) != size) {
    fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
    ++seeds_failures;
  }
  if (file) fclose(file);
}

// ------------------------------------------------------------ request seeds

static uint64_t handle(uint32_t type, uint32_t slot) {
  return halo_fuzz_handle(type, slot);
}
#define BUFFER(slot) handle(HALOD_OBJECT_BUFFER, (slot))
#define SEMAPHORE(slot) handle(HALOD_OBJECT_SEMAPHORE, (slot))
#define QUEUE(slot) handle(HALOD_OBJECT_QUEUE, (slot))
#define COMMAND_BUFFER(slot) handle(HALOD_OBJECT_COMMAND_BUFFER, (slot))

#define KIT_HOST BUFFER(HALO_FUZZ_SLOT_HOST_BUFFER)
#define KIT_DEVICE BUFFER(HALO_FUZZ_SLOT_DEVICE_BUFFER)
#define KIT_A SEMAPHORE(HALO_FUZZ_SLOT_SEMAPHORE_A)
#define KIT_B SEMAPHORE(HALO_FUZZ_SLOT_SEMAPHORE_B)
#define KIT_QUEUE QUEUE(HALO_FUZZ_SLOT_QUEUE)
#define KIT_COMMANDS COMMAND_BUFFER(HALO_FUZZ_SLOT_COMMAND_BUFFER)

static const halo_fuzz_binding_t kKitBindings[2] = {
    {0, 0, UINT64_MAX}, {0, 0, HALO_FUZZ_KIT_BUFFER_BYTES}};

static void kit_bindings(halo_fuzz_binding_t out[2]) {
  memcpy(out, kKitBindings, sizeof(kKitBindings));
  out[0].buffer = KIT_HOST;
  out[1].buffer = KIT_DEVICE;
}

// A request whose body is a message with just a handle (releases, queries,
// exports).
static void frames_handle(halo_fuzz_frames_t *frames,
                          Halo__Wire__Request__BodyCase body,
                          uint64_t handle_value) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = body;
  union {
    Halo__Wire__BufferRelease buffer_release;
    Halo__Wire__Export exported;
    Halo__Wire__SemaphoreQuery semaphore_query;
    Halo__Wire__SemaphoreRelease semaphore_release;
    Halo__Wire__ExecutableRelease executable_release;
    Halo__Wire__CommandBufferRelease command_buffer_release;
    Halo__Wire__QueueRelease queue_release;
  } body_message;
  switch (body) {
    case HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE:
      halo__wire__buffer_release__init(&body_message.buffer_release);
      body_message.buffer_release.handle = handle_value;
      request.buffer_release = &body_message.buffer_release;
      break;
    case HALO__WIRE__REQUEST__BODY_BUFFER_EXPORT:
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_EXPORT:
      halo__wire__export__init(&body_message.exported);
      body_message.exported.handle = handle_value;
      if (body == HALO__WIRE__REQUEST__BODY_BUFFER_EXPORT) {
        request.buffer_export = &body_message.exported;
      } else {
        request.semaphore_export = &body_message.exported;
      }
      break;
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY:
      halo__wire__semaphore_query__init(&body_message.semaphore_query);
      body_message.semaphore_query.handle = handle_value;
      request.semaphore_query = &body_message.semaphore_query;
      break;
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_RELEASE:
      halo__wire__semaphore_release__init(&body_message.semaphore_release);
      body_message.semaphore_release.handle = handle_value;
      request.semaphore_release = &body_message.semaphore_release;
      break;
    case HALO__WIRE__REQUEST__BODY_EXECUTABLE_RELEASE:
      halo__wire__executable_release__init(&body_message.executable_release);
      body_message.executable_release.handle = handle_value;
      request.executable_release = &body_message.executable_release;
      break;
    case HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_RELEASE:
      halo__wire__command_buffer_release__init(
          &body_message.command_buffer_release);
      body_message.command_buffer_release.handle = handle_value;
      request.command_buffer_release = &body_message.command_buffer_release;
      break;
    case HALO__WIRE__REQUEST__BODY_QUEUE_RELEASE:
      halo__wire__queue_release__init(&body_message.queue_release);
      body_message.queue_release.handle = handle_value;
      request.queue_release = &body_message.queue_release;
      break;
    default:
      abort();
  }
  halo_fuzz_frames_append(frames, &request);
}

static void frames_buffer_write(halo_fuzz_frames_t *frames, uint64_t buffer,
                                uint64_t offset, const void *data,
                                size_t size) {
  Halo__Wire__BufferWrite write = HALO__WIRE__BUFFER_WRITE__INIT;
  write.handle = buffer;
  write.offset = offset;
  write.data.data = (uint8_t *)data;
  write.data.len = size;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_WRITE;
  request.buffer_write = &write;
  halo_fuzz_frames_append(frames, &request);
}

static void frames_buffer_read(halo_fuzz_frames_t *frames, uint64_t buffer,
                               uint64_t offset, uint64_t length) {
  Halo__Wire__BufferRead read = HALO__WIRE__BUFFER_READ__INIT;
  read.handle = buffer;
  read.offset = offset;
  read.length = length;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_READ;
  request.buffer_read = &read;
  halo_fuzz_frames_append(frames, &request);
}

static void frames_import(halo_fuzz_frames_t *frames,
                          Halo__Wire__Request__BodyCase body, size_t length) {
  static const uint8_t kToken[32] = {0x5a, 1, 2, 3, 4, 5, 6, 7, 8};
  Halo__Wire__Import import = HALO__WIRE__IMPORT__INIT;
  import.token.data = (uint8_t *)kToken;
  import.token.len = length;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = body;
  if (body == HALO__WIRE__REQUEST__BODY_BUFFER_IMPORT) {
    request.buffer_import = &import;
  } else {
    request.semaphore_import = &import;
  }
  halo_fuzz_frames_append(frames, &request);
}

static void frames_semaphore_fail(halo_fuzz_frames_t *frames,
                                  uint64_t semaphore, int32_t code) {
  Halo__Wire__SemaphoreFail fail = HALO__WIRE__SEMAPHORE_FAIL__INIT;
  fail.handle = semaphore;
  fail.code = code;
  fail.message = "failed by the seed";
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_FAIL;
  request.semaphore_fail = &fail;
  halo_fuzz_frames_append(frames, &request);
}

static void frames_simple(halo_fuzz_frames_t *frames,
                          Halo__Wire__Request__BodyCase body) {
  Halo__Wire__Ping ping = HALO__WIRE__PING__INIT;
  static const uint8_t kPayload[4] = {'p', 'i', 'n', 'g'};
  ping.has_payload = true;
  ping.payload.data = (uint8_t *)kPayload;
  ping.payload.len = sizeof(kPayload);
  Halo__Wire__DeviceList device_list = HALO__WIRE__DEVICE_LIST__INIT;
  Halo__Wire__Hello hello = HALO__WIRE__HELLO__INIT;
  hello.protocol_version = 1;
  Halo__Wire__AdminStatus admin = HALO__WIRE__ADMIN_STATUS__INIT;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = body;
  switch (body) {
    case HALO__WIRE__REQUEST__BODY_PING:
      request.ping = &ping;
      break;
    case HALO__WIRE__REQUEST__BODY_DEVICE_LIST:
      request.device_list = &device_list;
      break;
    case HALO__WIRE__REQUEST__BODY_HELLO:
      request.hello = &hello;
      break;
    case HALO__WIRE__REQUEST__BODY_ADMIN_STATUS:
      request.admin_status = &admin;
      break;
    default:
      abort();
  }
  halo_fuzz_frames_append(frames, &request);
}

static void frames_executable(halo_fuzz_frames_t *frames,
                              Halo__Wire__ExecutableFormat format) {
  static const char kPtx[] = ".version 7.0\n.target sm_75\n";
  Halo__Wire__ExecutableCreate create = HALO__WIRE__EXECUTABLE_CREATE__INIT;
  create.device = 0;
  create.format = format;
  create.data.data = (uint8_t *)kPtx;
  create.data.len = sizeof(kPtx) - 1;
  char *options[] = {"-DSEED=1"};
  create.n_options = 1;
  create.options = options;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_EXECUTABLE_CREATE;
  request.executable_create = &create;
  halo_fuzz_frames_append(frames, &request);
}

static void request_seed(const char *name, halo_fuzz_frames_t *frames) {
  seeds_output("request", name, frames->data, frames->size);
  halo_fuzz_frames_free(frames);
}

static void request_seeds(void) {
  halo_fuzz_binding_t bindings[2];
  kit_bindings(bindings);

  // The kit, one execution signaling A, and A's value.
  halo_fuzz_frames_t frames = {0};
  halo_fuzz_frames_kit(&frames);
  halo_fuzz_value_t signal_a = {KIT_A, 1};
  halo_fuzz_frames_execute(&frames, KIT_QUEUE, KIT_COMMANDS, bindings, 2, NULL,
                           0, &signal_a, 1);
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY, KIT_A);
  frames_buffer_read(&frames, KIT_HOST, 0, 256);
  request_seed("kit-execute", &frames);

  // Wait before signal: the execution waits for A, which the host signals
  // next; on the default queue (0).
  halo_fuzz_frames_kit(&frames);
  halo_fuzz_value_t wait_a = {KIT_A, 1}, signal_b = {KIT_B, 2};
  halo_fuzz_frames_execute(&frames, 0, KIT_COMMANDS, bindings, 2, &wait_a, 1,
                           &signal_b, 1);
  halo_fuzz_frames_semaphore_signal(&frames, KIT_A, 1);
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY, KIT_B);
  request_seed("wait-before-signal", &frames);

  // Queue-ordered alloca (slot 7), an execution on it, its dealloca.
  halo_fuzz_frames_kit(&frames);
  halo_fuzz_value_t alloca_signal = {KIT_A, 1};
  halo_fuzz_frames_alloca(&frames, KIT_QUEUE, 4096,
                          HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE, NULL, 0,
                          &alloca_signal, 1);
  halo_fuzz_binding_t on_alloca[2] = {
      {BUFFER(HALO_FUZZ_SLOT_KIT_END), 0, UINT64_MAX}, {KIT_DEVICE, 0, 4096}};
  halo_fuzz_value_t execute_signal = {KIT_A, 2};
  halo_fuzz_frames_execute(&frames, KIT_QUEUE, KIT_COMMANDS, on_alloca, 2,
                           &alloca_signal, 1, &execute_signal, 1);
  halo_fuzz_value_t dealloca_signal = {KIT_B, 1};
  halo_fuzz_frames_dealloca(&frames, KIT_QUEUE, BUFFER(HALO_FUZZ_SLOT_KIT_END),
                            &execute_signal, 1, &dealloca_signal, 1);
  halo_fuzz_frames_alloca(&frames, KIT_QUEUE, 1 << 20,
                          HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE, &wait_a, 1,
                          NULL, 0);
  request_seed("alloca-dealloca", &frames);

  // Buffers: create, write, read, export, imports with bad tokens,
  // release, and a read of the stale handle.
  static const uint8_t kBytes[16] = "0123456789abcdef";
  halo_fuzz_frames_buffer_create(
      &frames, 8192, HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE, 1);
  halo_fuzz_frames_buffer_create(&frames, 65536,
                                 HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE, 0);
  frames_buffer_write(&frames, BUFFER(1), 100, kBytes, sizeof(kBytes));
  frames_buffer_write(&frames, BUFFER(2), 65530, kBytes, sizeof(kBytes));
  frames_buffer_read(&frames, BUFFER(1), 96, 32);
  frames_buffer_read(&frames, BUFFER(2), 0, UINT64_MAX);
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_BUFFER_EXPORT, BUFFER(1));
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_BUFFER_EXPORT, BUFFER(2));
  frames_import(&frames, HALO__WIRE__REQUEST__BODY_BUFFER_IMPORT, 16);
  frames_import(&frames, HALO__WIRE__REQUEST__BODY_BUFFER_IMPORT, 9);
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE, BUFFER(1));
  frames_buffer_read(&frames, BUFFER(1), 0, 16);
  request_seed("buffers", &frames);

  // Semaphores: create, signal backwards, export, fail, query, release.
  halo_fuzz_frames_semaphore_create(&frames, 5, 1);
  halo_fuzz_frames_semaphore_create(&frames, 0, 0);
  halo_fuzz_frames_semaphore_signal(&frames, SEMAPHORE(1), 7);
  halo_fuzz_frames_semaphore_signal(&frames, SEMAPHORE(1), 6);
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_SEMAPHORE_EXPORT,
                SEMAPHORE(1));
  frames_import(&frames, HALO__WIRE__REQUEST__BODY_SEMAPHORE_IMPORT, 16);
  frames_semaphore_fail(&frames, SEMAPHORE(2), HALO_STATUS_ABORTED);
  frames_semaphore_fail(&frames, SEMAPHORE(1), 0);
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY,
                SEMAPHORE(2));
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_SEMAPHORE_RELEASE,
                SEMAPHORE(2));
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY,
                SEMAPHORE(2));
  request_seed("semaphores", &frames);

  // A command buffer whose fill names a buffer directly, executed; the
  // objects released while the work may still run.
  halo_fuzz_frames_kit(&frames);
  halo_fuzz_frames_command_buffer_create(&frames, 2, KIT_HOST);
  halo_fuzz_frames_execute(&frames, KIT_QUEUE,
                           COMMAND_BUFFER(HALO_FUZZ_SLOT_KIT_END), bindings, 2,
                           NULL, 0, &signal_a, 1);
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_RELEASE,
                COMMAND_BUFFER(HALO_FUZZ_SLOT_KIT_END));
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE, KIT_HOST);
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_QUEUE_RELEASE, KIT_QUEUE);
  frames_handle(&frames, HALO__WIRE__REQUEST__BODY_EXECUTABLE_RELEASE,
                HALO_FUZZ_EXECUTABLE);
  request_seed("direct-ref-release", &frames);

  // Executions the validation refuses: a wrong handle type, too few
  // bindings, a range past the buffer, a stale command buffer, a wait on a
  // buffer handle.
  halo_fuzz_frames_kit(&frames);
  halo_fuzz_frames_execute(&frames, KIT_QUEUE, KIT_HOST, bindings, 2, NULL, 0,
                           NULL, 0);
  halo_fuzz_frames_execute(&frames, KIT_QUEUE, KIT_COMMANDS, bindings, 1, NULL,
                           0, NULL, 0);
  halo_fuzz_binding_t past_end[2] = {{KIT_HOST, 4000, 200},
                                     {KIT_DEVICE, 0, 4096}};
  halo_fuzz_frames_execute(&frames, KIT_QUEUE, KIT_COMMANDS, past_end, 2, NULL,
                           0, NULL, 0);
  halo_fuzz_value_t wait_buffer = {KIT_HOST, 1};
  halo_fuzz_frames_execute(&frames, KIT_QUEUE, KIT_COMMANDS, bindings, 2,
                           &wait_buffer, 1, NULL, 0);
  halo_fuzz_frames_execute(&frames, KIT_QUEUE, COMMAND_BUFFER(40), bindings, 2,
                           NULL, 0, NULL, 0);
  request_seed("execute-refused", &frames);

  // Requests outside the happy path: ping, devices, a second Hello, an
  // admin request, an unknown body (field 99), undecodable bytes, an empty
  // request, a PTX executable (the local driver refuses it).
  frames_simple(&frames, HALO__WIRE__REQUEST__BODY_PING);
  frames_simple(&frames, HALO__WIRE__REQUEST__BODY_DEVICE_LIST);
  frames_simple(&frames, HALO__WIRE__REQUEST__BODY_HELLO);
  frames_simple(&frames, HALO__WIRE__REQUEST__BODY_ADMIN_STATUS);
  static const uint8_t kUnknown[] = {0x9a, 0x06, 0x00};  // field 99, empty
  halo_fuzz_frames_append_bytes(&frames, kUnknown, sizeof(kUnknown));
  static const uint8_t kGarbage[] = {0x52, 0xff, 0xff, 0xff, 0x0f, 0x01};
  halo_fuzz_frames_append_bytes(&frames, kGarbage, sizeof(kGarbage));
  halo_fuzz_frames_append_bytes(&frames, NULL, 0);
  frames_executable(&frames,
                    HALO__WIRE__EXECUTABLE_FORMAT__EXECUTABLE_FORMAT_PTX);
  request_seed("odd-requests", &frames);

  // More executions pending than the session may have (session-pending is
  // 32 in the harness): all wait for A, which never comes.
  halo_fuzz_frames_kit(&frames);
  for (int i = 0; i < 56; ++i) {
    halo_fuzz_frames_execute(&frames, KIT_QUEUE, KIT_COMMANDS, bindings, 2,
                             &wait_a, 1, NULL, 0);
  }
  request_seed("pending-quota", &frames);
}

// --------------------------------------------------------------- ring seeds

typedef struct ring_seed_t {
  uint8_t data[8192];
  size_t size;
  uint32_t sequence;
} ring_seed_t;

static void ring_seed_begin(ring_seed_t *seed, uint16_t start_units,
                            int16_t tail_adjust) {
  memset(seed, 0, sizeof(*seed));
  uint16_t adjust = (uint16_t)tail_adjust;
  seed->data[0] = (uint8_t)(start_units & 0xff);
  seed->data[1] = (uint8_t)(start_units >> 8);
  seed->data[2] = (uint8_t)(adjust & 0xff);
  seed->data[3] = (uint8_t)(adjust >> 8);
  seed->size = 4;
}

// Appends a record of |type| with |body| (|body_size| bytes) and |values|,
// its length rounded up; |length| overrides it when not 0, |checksum| is
// left in the header (0: the harness seals the record).
static void ring_seed_record(ring_seed_t *seed, uint16_t type, const void *body,
                             size_t body_size, const halo_fuzz_value_t *values,
                             size_t value_count, uint16_t length,
                             uint64_t checksum) {
  size_t natural = halo_ring_values_length((uint32_t)body_size, value_count, 0);
  halo_ring_record_header_t header = {
      .type = type,
      .length = length ? length : (uint16_t)natural,
      .sequence = seed->sequence++,
      .checksum = checksum};
  uint8_t *cursor = seed->data + seed->size;
  memset(cursor, 0, natural);
  memcpy(cursor, &header, sizeof(header));
  if (body_size) memcpy(cursor + sizeof(header), body, body_size);
  if (value_count) {
    memcpy(cursor + sizeof(header) + body_size, values,
           value_count * sizeof(*values));
  }
  seed->size += natural;
}

static void ring_seed_execute(ring_seed_t *seed, uint32_t flags,
                              const halo_fuzz_value_t *waits,
                              uint32_t wait_count,
                              const halo_fuzz_value_t *signals,
                              uint32_t signal_count, uint64_t checksum) {
  uint8_t body[sizeof(halo_ring_execute_t) + 2 * sizeof(halo_ring_binding_t)];
  halo_ring_execute_t execute = {.queue = KIT_QUEUE,
                                 .command_buffer = KIT_COMMANDS,
                                 .binding_count = 2,
                                 .wait_count = wait_count,
                                 .signal_count = signal_count,
                                 .flags = flags};
  halo_ring_binding_t bindings[2];
  kit_bindings(bindings);
  memcpy(body, &execute, sizeof(execute));
  memcpy(body + sizeof(execute), bindings, sizeof(bindings));
  halo_fuzz_value_t values[8];
  if (wait_count) memcpy(values, waits, wait_count * sizeof(*values));
  if (signal_count) {
    memcpy(values + wait_count, signals, signal_count * sizeof(*values));
  }
  ring_seed_record(seed, HALO_RING_RECORD_EXECUTE, body, sizeof(body), values,
                   wait_count + signal_count, 0, checksum);
}

static void ring_seed_signal(ring_seed_t *seed, uint64_t semaphore,
                             uint64_t value) {
  halo_ring_semaphore_value_t signal = {semaphore, value};
  ring_seed_record(seed, HALO_RING_RECORD_SIGNAL, &signal, sizeof(signal), NULL,
                   0, 0, 0);
}

static void ring_seed_write(const char *name, ring_seed_t *seed) {
  seeds_output("ring", name, seed->data, seed->size);
}

static void ring_seeds(void) {
  ring_seed_t seed;
  halo_fuzz_value_t signal_a = {KIT_A, 1}, wait_a = {KIT_A, 1};
  halo_fuzz_value_t signal_b = {KIT_B, 1};

  // A synchronous execution signaling A, then one waiting for it.
  ring_seed_begin(&seed, 0, 0);
  ring_seed_execute(&seed, 0, NULL, 0, &signal_a, 1, 0);
  ring_seed_execute(&seed, HALO_RING_EXECUTE_ASYNC, &wait_a, 1, &signal_b, 1,
                    0);
  ring_seed_write("execute", &seed);

  // Wait before signal: the host signal comes through the ring after the
  // execution that waits for it.
  ring_seed_begin(&seed, 0, 0);
  ring_seed_execute(&seed, HALO_RING_EXECUTE_ASYNC, &wait_a, 1, &signal_b, 1,
                    0);
  ring_seed_signal(&seed, KIT_A, 1);
  ring_seed_signal(&seed, KIT_A, 1);  // not above the value: refused
  ring_seed_write("wait-then-signal", &seed);

  // A queue-ordered alloca (slot 7) and its asynchronous dealloca, and a
  // dealloca of an unknown buffer.
  ring_seed_begin(&seed, 0, 0);
  halo_ring_alloca_t alloca = {
      .queue = KIT_QUEUE, .size = 4096, .memory_type = 1, .signal_count = 1};
  ring_seed_record(&seed, HALO_RING_RECORD_ALLOCA, &alloca, sizeof(alloca),
                   &signal_a, 1, 0, 0);
  halo_ring_dealloca_t dealloca = {.queue = KIT_QUEUE,
                                   .buffer = BUFFER(HALO_FUZZ_SLOT_KIT_END),
                                   .wait_count = 1,
                                   .signal_count = 1,
                                   .flags = HALO_RING_EXECUTE_ASYNC};
  halo_fuzz_value_t dealloca_values[2] = {{KIT_A, 1}, {KIT_B, 1}};
  ring_seed_record(&seed, HALO_RING_RECORD_DEALLOCA, &dealloca,
                   sizeof(dealloca), dealloca_values, 2, 0, 0);
  dealloca.buffer = BUFFER(40);
  ring_seed_record(&seed, HALO_RING_RECORD_DEALLOCA, &dealloca,
                   sizeof(dealloca), dealloca_values, 2, 0, 0);
  ring_seed_write("alloca-dealloca", &seed);

  // Records that start 48 bytes before the ring's end: a PAD to the end,
  // then an execution at the start.
  ring_seed_begin(&seed, (32768 - 48) / 16, 0);
  ring_seed_record(&seed, HALO_RING_RECORD_PAD, NULL, 0, NULL, 0, 48, 0);
  seed.size += 32;  // the bytes the PAD skips
  ring_seed_execute(&seed, 0, NULL, 0, &signal_a, 1, 0);
  ring_seed_write("pad-wrap", &seed);

  // Records changed after they were sealed (a checksum that does not
  // match): an asynchronous execution (its signal fails) and a dealloca.
  ring_seed_begin(&seed, 0, 0);
  ring_seed_execute(&seed, HALO_RING_EXECUTE_ASYNC, NULL, 0, &signal_a, 1,
                    0x1234);
  dealloca.buffer = KIT_DEVICE;
  ring_seed_record(&seed, HALO_RING_RECORD_DEALLOCA, &dealloca,
                   sizeof(dealloca), dealloca_values, 2, 0, 0x5678);
  ring_seed_signal(&seed, KIT_B, 3);
  ring_seed_write("changed-records", &seed);

  // Records the parser refuses one by one: an unknown type, a signal of the
  // wrong length, an execution whose counts do not fit its length, an
  // alloca with flags.
  ring_seed_begin(&seed, 0, 0);
  uint8_t filler[16] = {0};
  ring_seed_record(&seed, 9, filler, sizeof(filler), NULL, 0, 0, 0);
  ring_seed_record(&seed, HALO_RING_RECORD_SIGNAL, filler, sizeof(filler), NULL,
                   0, 0, 0);
  halo_ring_execute_t lying = {
      .queue = KIT_QUEUE, .command_buffer = KIT_COMMANDS, .binding_count = 100};
  ring_seed_record(&seed, HALO_RING_RECORD_EXECUTE, &lying, sizeof(lying), NULL,
                   0, 0, 0);
  alloca.flags = 1;
  ring_seed_record(&seed, HALO_RING_RECORD_ALLOCA, &alloca, sizeof(alloca),
                   &signal_a, 1, 0, 0);
  ring_seed_write("refused-records", &seed);

  // Framing errors that break the ring: a length not a multiple of 16, a
  // sequence out of order, a misaligned tail.
  ring_seed_begin(&seed, 0, 0);
  ring_seed_signal(&seed, KIT_A, 1);
  ring_seed_record(&seed, HALO_RING_RECORD_SIGNAL, filler, 16, NULL, 0, 40, 0);
  ring_seed_write("bad-length", &seed);
  ring_seed_begin(&seed, 0, 0);
  ring_seed_signal(&seed, KIT_A, 1);
  seed.sequence = 5;
  ring_seed_signal(&seed, KIT_A, 2);
  ring_seed_write("bad-sequence", &seed);
  ring_seed_begin(&seed, 3, 8);
  ring_seed_signal(&seed, KIT_A, 1);
  ring_seed_write("bad-tail", &seed);
}

int main(int argc, char **argv) {
  int arg = 1;
  if (arg < argc && strcmp(argv[arg], "--check") == 0) {
    seeds_check = true;
    ++arg;
  }
  if (arg + 1 != argc) {
    fprintf(stderr, "usage: %s [--check] DIRECTORY\n", argv[0]);
    return 2;
  }
  seeds_directory = argv[arg];
  request_seeds();
  ring_seeds();
  return seeds_failures ? 1 : 0;
}
