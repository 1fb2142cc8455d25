// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of the execution model on the driver under test
// (HALO_TEST_DRIVER: local, or cuda for the cuda.* variant), with a real
// halod, real client processes and libhalo:
// - fills (1-, 2- and 4-byte patterns) and copies at odd offsets and
//   lengths touch exactly the bytes asked for, on host-visible and device
//   buffers, directly and through binding tables (guard bytes around);
// - the validation errors command_buffer_client_test does not cover name
//   the binding, slot and command; a failed execution names its command
//   and fails what waits on it;
// - a submission waiting on an unsignaled semaphore completes correctly
//   after its client released the command buffer, executable, queue and
//   every buffer it binds (the result is read through another client's
//   import);
// - a semaphore nobody can signal any more (no session holds it, no pending
//   submission signals it: its last handle was released, or its last
//   signaler retired below the value) fails the waits on it with ABORTED
//   naming it, and so the executions and what they would have signaled;
//   one an importer or a pending signaler still holds is left alone;
// - a diamond of dependencies across two queues, submitted in reverse, runs
//   in dependency order;
// - a failure travels along a chain of three submissions across two
//   processes with its code and message;
// - 8 client processes x 1000 executions, every signal observed and every
//   result checked, leave the daemon with nothing;
// - a client killed with work waiting and executing leaves the daemon clean
//   while another client's executions go on correctly.
//
// Client processes are tests/integration/execute_peer, exec'd: a child
// forked from this process could not use libhalo (nng is not fork-safe once
// the parent used it, and the harness uses it to start halod).
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

#ifndef EXECUTE_TEST_PEER
#error "EXECUTE_TEST_PEER must name the execute_peer executable"
#endif

#define MS HALO_TEST_MS
#define DEADLINE_NS (HALO_TEST_DEADLINE_MS * HALO_TEST_MS)

static halo_buffer_t *create_host(halo_client_t *client, uint64_t size) {
  return halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE, size, 0);
}

static halo_semaphore_t *create_semaphore(halo_client_t *client,
                                          uint32_t flags) {
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, flags, &semaphore));
  return semaphore;
}

// The test kernels of the driver under test (tests/kernels/); the peers
// load the same file (halo_test_kernels_path()).
static halo_executable_t *load_kernels(halo_client_t *client) {
  return halo_test_load_kernels(client);
}

static void export_semaphore(halo_semaphore_t *semaphore, char text[33]) {
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_semaphore_export(semaphore, &token));
  halo_token_format(&token, text);
}

static halo_semaphore_t *import_semaphore(halo_client_t *client,
                                          const char *text) {
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_token_parse(text, &token));
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_import(client, &token, &semaphore));
  return semaphore;
}

static void assert_floats(const float *actual, const float *expected,
                          uint32_t n, const char *what) {
  for (uint32_t i = 0; i < n; ++i) {
    if (actual[i] != expected[i]) {
      print_error("%s[%u] = %f, expected %f\n", what, i, (double)actual[i],
                  (double)expected[i]);
      fail();
    }
  }
}

// Starts execute_peer with |args| (NULL-terminated) in |process|.
static void spawn_execute_peer(halo_test_fixture_t *fixture,
                               halo_test_process_t *process,
                               const char *const *args) {
  const char *argv[16];
  size_t count = 0;
  argv[count++] = EXECUTE_TEST_PEER;
  argv[count++] = fixture->daemon.listen_address;
  for (; *args; ++args) {
    assert_true(count < 15);
    argv[count++] = *args;
  }
  argv[count] = NULL;
  halo_test_spawn(process, argv);
}

// ---------------------------------------------------------------- bytes

enum {
  BYTES_SIZE = 96,  // of every buffer the byte tests touch
  BYTES_GUARD = 0xee,
};

// Writes |bytes| over the whole buffer (host-visible or device).
static void bytes_store(halo_buffer_t *buffer, const uint8_t *bytes) {
  HALO_TEST_ASSERT_OK(halo_buffer_write(buffer, 0, bytes, BYTES_SIZE));
}

static void bytes_assert(halo_buffer_t *buffer, const uint8_t *expected,
                         const char *what) {
  uint8_t actual[BYTES_SIZE];
  HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, 0, actual, BYTES_SIZE));
  for (int i = 0; i < BYTES_SIZE; ++i) {
    if (actual[i] != expected[i]) {
      print_error("%s: byte %d is 0x%02x, expected 0x%02x\n", what, i,
                  actual[i], expected[i]);
      fail();
    }
  }
}

// Executes the ended ONE_SHOT |cb| with |bindings|, waits for it and
// releases it.
static void run_once(halo_command_buffer_t *cb, const halo_binding_t *bindings,
                     size_t binding_count, halo_semaphore_t *done,
                     uint64_t *value) {
  ++*value;
  halo_semaphore_value_t signal = {done, *value};
  HALO_TEST_ASSERT_OK(halo_queue_execute(NULL, cb, bindings, binding_count,
                                         NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, *value, DEADLINE_NS));
  halo_command_buffer_release(cb);
}

typedef struct fill_case_t {
  uint32_t pattern_size;
  uint64_t offset;  // absolute, in the buffer
  uint64_t length;  // HALO_WHOLE_BUFFER: to the end (direct only)
  // Through slot 0 bound at |binding_offset| (the reference's offset is
  // offset - binding_offset).
  bool indirect;
  uint64_t binding_offset;
} fill_case_t;

static void test_fills_and_copies_touch_exactly_their_bytes(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  static const uint8_t patterns[5][4] = {
      [1] = {0x5a}, [2] = {0x12, 0x34}, [4] = {0xa1, 0xb2, 0xc3, 0xd4}};
  static const fill_case_t fills[] = {
      {1, 0, 1, false, 0},
      {1, 1, 1, false, 0},
      {1, 3, 5, false, 0},
      {1, 7, 13, false, 0},
      {1, 95, 1, false, 0},
      {1, 0, BYTES_SIZE, false, 0},
      {1, 5, 7, true, 3},
      {1, 1, 95, true, 1},
      {1, 9, 1, true, 9},
      {2, 0, 2, false, 0},
      {2, 2, 6, false, 0},
      {2, 6, 10, false, 0},
      {2, 94, 2, false, 0},
      {2, 10, 34, false, 0},
      {2, 6, 6, true, 2},
      {2, 6, 90, true, 6},
      {2, 14, HALO_WHOLE_BUFFER, false, 0},
      {4, 0, 4, false, 0},
      {4, 4, 4, false, 0},
      {4, 8, 12, false, 0},
      {4, 92, 4, false, 0},
      {4, 12, 80, false, 0},
      {4, 0, BYTES_SIZE, false, 0},
      {4, 12, 20, true, 4},
      {4, 12, 84, true, 8},
      {4, 20, HALO_WHOLE_BUFFER, false, 0},
  };
  halo_semaphore_t *done = create_semaphore(client, 0);
  uint64_t value = 0;
  uint8_t guard[BYTES_SIZE];
  memset(guard, BYTES_GUARD, sizeof(guard));
  for (int device = 0; device < 2; ++device) {
    halo_memory_type_t type =
        device ? HALO_MEMORY_DEVICE : HALO_MEMORY_HOST_VISIBLE;
    for (size_t c = 0; c < sizeof(fills) / sizeof(fills[0]); ++c) {
      const fill_case_t *fill = &fills[c];
      halo_buffer_t *target =
          halo_test_create_buffer(client, type, BYTES_SIZE, 0);
      bytes_store(target, guard);
      const uint8_t *pattern = patterns[fill->pattern_size];
      uint64_t length = fill->length == HALO_WHOLE_BUFFER
                            ? BYTES_SIZE - fill->offset
                            : fill->length;
      halo_command_buffer_t *cb =
          halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 1);
      halo_buffer_ref_t ref =
          fill->indirect
              ? halo_binding_ref(0, fill->offset - fill->binding_offset, length)
              : halo_buffer_ref(target, fill->offset, fill->length);
      HALO_TEST_ASSERT_OK(
          halo_command_buffer_fill(cb, ref, pattern, fill->pattern_size));
      HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
      halo_binding_t binding = {target, fill->binding_offset,
                                HALO_WHOLE_BUFFER};
      run_once(cb, &binding, fill->indirect ? 1 : 0, done, &value);
      uint8_t expected[BYTES_SIZE];
      memset(expected, BYTES_GUARD, sizeof(expected));
      for (uint64_t i = 0; i < length; ++i) {
        expected[fill->offset + i] = pattern[i % fill->pattern_size];
      }
      char what[160];
      snprintf(what, sizeof(what),
               "%s fill case %zu (%u-byte pattern, [%llu, +%llu), %s)",
               device ? "device" : "host-visible", c, fill->pattern_size,
               (unsigned long long)fill->offset, (unsigned long long)length,
               fill->indirect ? "indirect" : "direct");
      bytes_assert(target, expected, what);
      halo_buffer_release(target);
    }
  }

  // Copies: source and target offset, length; a nonzero binding offset
  // makes that side indirect (slot 0 source, slot 1 target).
  static const struct {
    uint64_t source_offset, target_offset, length;
    uint64_t source_binding, target_binding;
  } copies[] = {
      {1, 3, 1, 0, 0},   {3, 5, 7, 0, 0},   {7, 0, 13, 0, 0},
      {0, 1, 63, 0, 0},  {5, 9, 31, 0, 0},  {13, 2, 81, 0, 0},
      {0, 0, 96, 0, 0},  {95, 0, 1, 0, 0},  {0, 95, 1, 0, 0},
      {5, 11, 17, 3, 0}, {1, 13, 29, 0, 7}, {9, 21, 45, 5, 11},
  };
  uint8_t source_bytes[BYTES_SIZE];
  for (int i = 0; i < BYTES_SIZE; ++i) {
    // Never the guard byte, never 0.
    source_bytes[i] = (uint8_t)(1 + (i * 37) % 200);
  }
  for (int types = 0; types < 4; ++types) {
    halo_memory_type_t source_type =
        types & 1 ? HALO_MEMORY_DEVICE : HALO_MEMORY_HOST_VISIBLE;
    halo_memory_type_t target_type =
        types & 2 ? HALO_MEMORY_DEVICE : HALO_MEMORY_HOST_VISIBLE;
    for (size_t c = 0; c < sizeof(copies) / sizeof(copies[0]); ++c) {
      halo_buffer_t *source =
          halo_test_create_buffer(client, source_type, BYTES_SIZE, 0);
      halo_buffer_t *target =
          halo_test_create_buffer(client, target_type, BYTES_SIZE, 0);
      bytes_store(source, source_bytes);
      bytes_store(target, guard);
      uint64_t length = copies[c].length;
      uint64_t source_binding = copies[c].source_binding;
      uint64_t target_binding = copies[c].target_binding;
      halo_buffer_ref_t from =
          source_binding
              ? halo_binding_ref(0, copies[c].source_offset - source_binding,
                                 length)
              : halo_buffer_ref(source, copies[c].source_offset, length);
      halo_buffer_ref_t to =
          target_binding
              ? halo_binding_ref(1, copies[c].target_offset - target_binding,
                                 length)
              : halo_buffer_ref(target, copies[c].target_offset, length);
      halo_command_buffer_t *cb =
          halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 2);
      HALO_TEST_ASSERT_OK(halo_command_buffer_copy(cb, from, to));
      HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
      halo_binding_t bindings[2] = {
          {source_binding ? source : NULL, source_binding,
           source_binding ? HALO_WHOLE_BUFFER : 0},
          {target_binding ? target : NULL, target_binding,
           target_binding ? HALO_WHOLE_BUFFER : 0},
      };
      run_once(cb, bindings, 2, done, &value);
      uint8_t expected[BYTES_SIZE];
      memset(expected, BYTES_GUARD, sizeof(expected));
      memcpy(expected + copies[c].target_offset,
             source_bytes + copies[c].source_offset, length);
      char what[160];
      snprintf(
          what, sizeof(what), "copy case %zu (%s [%llu, +%llu) -> %s at %llu)",
          c, source_type ? "host-visible" : "device",
          (unsigned long long)copies[c].source_offset,
          (unsigned long long)length, target_type ? "host-visible" : "device",
          (unsigned long long)copies[c].target_offset);
      bytes_assert(target, expected, what);
      bytes_assert(source, source_bytes, "copy source");
      halo_buffer_release(source);
      halo_buffer_release(target);
    }
  }
  halo_semaphore_release(done);
}

// ---------------------------------------------------------------- errors

// The checks command_buffer_client_test leaves out: dispatch argument slots
// against their bindings, alignment a fill's slot needs, slots out of range
// for indirect workgroup counts, copy and update targets. (Argument counts
// cannot be checked on the CPU driver: an ELF symbol has no parameter list;
// the driver reports HALO_HAL_PARAMS_UNKNOWN.)
static void test_validation_errors_name_binding_slot_and_command(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_executable_t *executable = load_kernels(client);
  halo_buffer_t *small = create_host(client, 64);
  halo_buffer_t *large = create_host(client, 4096);

  // Record time: slots past the capacity in every kind of reference.
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 3);
  uint8_t bytes[8] = {0};
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_copy(cb, halo_buffer_ref(large, 0, 8),
                               halo_binding_ref(3, 0, 8)),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 0 (copy): target: slot 3 out of range (binding "
      "capacity 3)");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_update(cb, bytes, 8, halo_binding_ref(7, 0, 8)),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 0 (update): target: slot 7 out of range");
  uint32_t n = 100;
  halo_dispatch_arg_t args[4] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(0, 0, 400), NULL, 0},
      // Slot 1 needs 16 + 384 = 400 bytes.
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(1, 16, 384), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(2, 0, 400), NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
  };
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "add",
      .grid = {2, 1, 1},
      .block = {64, 1, 1},
      .args = args,
      .arg_count = 4,
  };
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_dispatch_indirect(cb, &params,
                                            halo_binding_ref(5, 0, 12)),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 0 (dispatch_indirect): workgroup_count: slot 5 out of "
      "range (binding capacity 3)");
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));

  // Execute time: what the daemon finds against the slots' requirements.
  halo_binding_t bindings[4] = {
      {large, 0, 400},
      {small, 0, HALO_WHOLE_BUFFER},
      {large, 2048, 400},
      {large, 0, 0},
  };
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 3, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT,
      "binding 1: 64 bytes bound, but the command buffer needs at "
      "least 400 in slot 1");
  bindings[1] = (halo_binding_t){large, 3800, HALO_WHOLE_BUFFER};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 3, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT,
      "binding 1: 296 bytes bound, but the command buffer needs at "
      "least 400 in slot 1");
  bindings[1] = (halo_binding_t){large, 1024, 400};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 2, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT,
      "binding 2: missing, but the command buffer uses slot 2 (at "
      "least 400 bytes)");
  bindings[1] = (halo_binding_t){NULL, 0, 0};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 3, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT,
      "binding 1: missing, but the command buffer uses slot 1");
  bindings[1] = (halo_binding_t){large, 1024, 400};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 4, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT,
      "4 bindings exceed the command buffer's binding capacity 3");
  // None of the refused submissions ran or stayed: the corrected one runs.
  halo_semaphore_t *done = create_semaphore(client, 0);
  float *host = halo_buffer_host_pointer(large);
  for (int i = 0; i < 1024; ++i) host[i] = (float)i;
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, bindings, 3, NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, 1, DEADLINE_NS));
  for (uint32_t i = 0; i < n; ++i) {
    // a = floats 0.., b = bytes 1024 + 16 on (float 260 on).
    assert_true(host[512 + i] == (float)i + (float)(260 + i));
  }
  halo_command_buffer_release(cb);

  // A slot filled with a 4-byte pattern needs 4-byte aligned bindings.
  cb = halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 1);
  uint32_t pattern = 0x01020304;
  HALO_TEST_ASSERT_OK(
      halo_command_buffer_fill(cb, halo_binding_ref(0, 8, 16), &pattern, 4));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  halo_binding_t binding = {large, 2, 64};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT,
      "binding 0: offset 2 is not 4-byte aligned, as slot 0 needs");
  halo_command_buffer_release(cb);

  halo_semaphore_release(done);
  halo_buffer_release(small);
  halo_buffer_release(large);
  halo_executable_release(executable);
}

// A failure only the execution finds (an indirect workgroup count read from
// the buffer) fails the signal semaphore with a message naming the command,
// and fails the submission that waits on it; that one never runs.
static void test_execution_failure_names_command_and_propagates(void **state) {
  // The CUDA driver disables a dispatch whose indirect count is out of
  // range instead of failing it (hal/cuda/cuda_command_buffer.c);
  // cuda_execute_test covers that.
  HALO_TEST_LOCAL_ONLY("an indirect workgroup count over 65535 fails");
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_executable_t *executable = load_kernels(client);
  halo_buffer_t *buffer = create_host(client, 256);
  uint32_t *words = halo_buffer_host_pointer(buffer);
  words[0] = 70000;  // over the local driver's 65535 per dimension
  words[1] = 1;
  words[2] = 1;
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  uint8_t marker = 0x77;
  HALO_TEST_ASSERT_OK(
      halo_command_buffer_fill(cb, halo_buffer_ref(buffer, 64, 4), &marker, 1));
  HALO_TEST_ASSERT_OK(halo_command_buffer_barrier(cb));
  halo_dispatch_arg_t args[2] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(buffer, 128, 64), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(buffer, 192, 12), NULL, 0},
  };
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "ids",
      .grid = {1, 1, 1},
      .block = {1, 1, 1},
      .args = args,
      .arg_count = 2,
  };
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch_indirect(
      cb, &params, halo_buffer_ref(buffer, 0, 12)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));

  halo_command_buffer_t *after =
      halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  uint8_t other = 0x33;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      after, halo_buffer_ref(buffer, 224, 32), &other, 1));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(after));

  halo_semaphore_t *first = create_semaphore(client, 0);
  halo_semaphore_t *second = create_semaphore(client, 0);
  halo_semaphore_value_t wait = {first, 1};
  halo_semaphore_value_t signal = {second, 1};
  // The dependent one first: it waits before the failure happens.
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, after, NULL, 0, &wait, 1, &signal, 1));
  HALO_TEST_ASSERT_OK(halo_queue_execute(NULL, cb, NULL, 0, NULL, 0, &wait, 1));
  const char *cause =
      "command 2 (dispatch_indirect): workgroup count 70000x1x1 read from "
      "the buffer exceeds 65535 per dimension";
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(first, 1, DEADLINE_NS),
                          HALO_STATUS_OUT_OF_RANGE, cause);
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(second, 1, DEADLINE_NS),
                          HALO_STATUS_OUT_OF_RANGE, cause);
  uint64_t value = 7;
  HALO_TEST_EXPECT_STATUS(halo_semaphore_query(second, &value),
                          HALO_STATUS_OUT_OF_RANGE,
                          "a wait of the submission failed");
  assert_int_equal(value, 0);
  const uint8_t *bytes = halo_buffer_host_pointer(buffer);
  for (int i = 224; i < 256; ++i) assert_int_equal(bytes[i], 0);
  halo_command_buffer_release(cb);
  halo_command_buffer_release(after);
  halo_semaphore_release(first);
  halo_semaphore_release(second);
  halo_buffer_release(buffer);
  halo_executable_release(executable);
}

// ---------------------------------------------------------------- lifetime

// The number of buffers the daemon lists for session |session_id|.
static uint32_t session_buffers(const halo_test_daemon_t *daemon,
                                uint64_t session_id) {
  halo_wire_response_t *response = halo_test_admin_sessions(daemon);
  uint32_t buffers = UINT32_MAX;
  for (size_t i = 0; i < response->admin_sessions->n_sessions; ++i) {
    if (response->admin_sessions->sessions[i]->session_id == session_id) {
      buffers = response->admin_sessions->sessions[i]->buffers;
    }
  }
  halo__wire__response__free_unpacked(response, NULL);
  return buffers;
}

static void test_waiting_submission_outlives_released_objects(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_client_t *reader = halo_test_connect(&fixture->daemon, 10000);
  enum { N = 2000 };
  uint64_t bytes = N * sizeof(float);
  halo_executable_t *executable = load_kernels(client);
  uint32_t n = N;
  halo_command_buffer_t *cb =
      halo_test_record_vector_add(client, executable, &n);
  static float a_values[N];
  static float b_values[N];
  static float sentinel[N];
  static float expected[N];
  for (int i = 0; i < N; ++i) {
    a_values[i] = (float)(i + 1);
    b_values[i] = (float)(3 * (i + 1));
    sentinel[i] = -1.0f;
    expected[i] = (float)(4 * (i + 1));
  }
  // a on the device, b host-visible, c host-visible and exportable.
  halo_buffer_t *a =
      halo_test_create_buffer(client, HALO_MEMORY_DEVICE, bytes, 0);
  halo_buffer_t *b = create_host(client, bytes);
  halo_buffer_t *c = halo_test_create_buffer(
      client, HALO_MEMORY_HOST_VISIBLE, bytes, HALO_OBJECT_FLAG_EXPORTABLE);
  HALO_TEST_ASSERT_OK(halo_buffer_write(a, 0, a_values, bytes));
  HALO_TEST_ASSERT_OK(halo_buffer_write(b, 0, b_values, bytes));
  HALO_TEST_ASSERT_OK(halo_buffer_write(c, 0, sentinel, bytes));
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_buffer_export(c, &token));
  halo_buffer_t *c_import = NULL;
  HALO_TEST_ASSERT_OK(halo_buffer_import(reader, &token, &c_import));
  halo_semaphore_t *go = create_semaphore(client, 0);
  halo_semaphore_t *done =
      create_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  char done_text[33];
  export_semaphore(done, done_text);
  halo_semaphore_t *done_import = import_semaphore(reader, done_text);
  halo_queue_t *queue = NULL;
  HALO_TEST_ASSERT_OK(halo_queue_create(client, 0, 0, &queue));

  halo_binding_t bindings[3] = {{a, 0, HALO_WHOLE_BUFFER},
                                {b, 0, HALO_WHOLE_BUFFER},
                                {c, 0, HALO_WHOLE_BUFFER}};
  halo_semaphore_value_t wait = {go, 1};
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(queue, cb, bindings, 3, &wait, 1, &signal, 1));
  // Everything the submission uses, released by its client (the semaphore
  // it signals too: the creator's release hands it to the importer).
  halo_command_buffer_release(cb);
  halo_executable_release(executable);
  halo_queue_release(queue);
  halo_buffer_release(a);
  halo_buffer_release(b);
  halo_buffer_release(c);
  halo_semaphore_release(done);
  uint64_t session_id = halo_client_session_id(client);
  assert_true(
      HALO_TEST_POLL(session_buffers(&fixture->daemon, session_id) == 0, 1000));
  // New buffers of the same sizes, filled with garbage: had the daemon
  // freed a, b or c, these would take their memory.
  halo_buffer_t *churn[6];
  static float garbage[N];
  for (int i = 0; i < N; ++i) garbage[i] = 1e9f;
  for (int i = 0; i < 6; ++i) {
    churn[i] = halo_test_create_buffer(
        client, i % 2 ? HALO_MEMORY_DEVICE : HALO_MEMORY_HOST_VISIBLE, bytes,
        i == 4 ? HALO_OBJECT_FLAG_EXPORTABLE : 0);
    HALO_TEST_ASSERT_OK(halo_buffer_write(churn[i], 0, garbage, bytes));
  }
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(done_import, 1, 50 * MS),
                          HALO_STATUS_DEADLINE_EXCEEDED, NULL);
  assert_floats(halo_buffer_host_pointer(c_import), sentinel, N,
                "c before the signal");

  HALO_TEST_ASSERT_OK(halo_semaphore_signal(go, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done_import, 1, DEADLINE_NS));
  assert_floats(halo_buffer_host_pointer(c_import), expected, N, "c");
  for (int i = 0; i < 6; ++i) halo_buffer_release(churn[i]);
  halo_semaphore_release(go);
  halo_semaphore_release(done_import);
  halo_buffer_release(c_import);
  halo_client_close(reader);
}

// ---------------------------------------------------------------- orphans

// A ONE_SHOT fill of |buffer|'s first 4 bytes, executed on the default
// queue after |waits|, signaling |signals|; released.
static void execute_fill_sync(halo_client_t *client, halo_buffer_t *buffer,
                              const halo_semaphore_value_t *waits,
                              size_t wait_count,
                              const halo_semaphore_value_t *signals,
                              size_t signal_count) {
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  uint32_t pattern = 0x5a5a5a5a;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      cb, halo_buffer_ref(buffer, 0, 4), &pattern, sizeof(pattern)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  HALO_TEST_ASSERT_OK(halo_queue_execute(NULL, cb, NULL, 0, waits, wait_count,
                                         signals, signal_count));
  halo_command_buffer_release(cb);
}

// The same after |wait| (NULL: none), signaling |signal|.
static void execute_fill(halo_client_t *client, halo_buffer_t *buffer,
                         const halo_semaphore_value_t *wait,
                         const halo_semaphore_value_t *signal) {
  execute_fill_sync(client, buffer, wait, wait ? 1 : 0, signal, 1);
}

// Fails unless a wait on |semaphore| for |value| ends with ABORTED, well
// within the deadline, saying that a semaphore of this process nobody
// holds any more left |waited| (e.g. "1 wait of pending submissions stood
// for value 5") unmet, and |why| nothing else can advance it; its query
// says the same.
static void expect_abandoned(halo_semaphore_t *semaphore, uint64_t value,
                             const char *waited, const char *why) {
  char creator[64];
  snprintf(creator, sizeof(creator), "(created by pid %d,", (int)getpid());
  const char *const substrings[] = {"a wait of the submission failed",
                                    creator,
                                    "lost the last holder or pending signaler",
                                    waited,
                                    "no session holds it",
                                    why,
                                    "nothing can signal it any more",
                                    NULL};
  int64_t start_ns = halo_test_now_ns();
  halo_test_expect_status_all(
      halo_semaphore_wait(semaphore, value, DEADLINE_NS), HALO_STATUS_ABORTED,
      substrings, "the wait on the signal semaphore");
  assert_true(halo_test_now_ns() - start_ns < DEADLINE_NS / 2);
  uint64_t current = 7;
  halo_test_expect_status_all(halo_semaphore_query(semaphore, &current),
                              HALO_STATUS_ABORTED, substrings, "its query");
  assert_int_equal(current, 0);
}

// The same for a semaphore that no pending submission signals.
static void expect_orphan_failure(halo_semaphore_t *semaphore, uint64_t value,
                                  const char *waited) {
  expect_abandoned(semaphore, value, waited, "no pending submission signals");
}

// Fails unless |semaphore| stays below |value| and healthy for 100 ms.
static void expect_still_waiting(halo_semaphore_t *semaphore, uint64_t value) {
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(semaphore, value, 100 * MS),
                          HALO_STATUS_DEADLINE_EXCEEDED, NULL);
}

// An execution waits on w, created by its client and never exported; the
// client releases w, its only handle. Nothing can signal w any more: the
// waits on it fail (ABORTED, naming w and the value waited for), so the
// execution fails and so does s, which it would have signaled, and s's
// waiter wakes at once instead of at its own timeout. The same for an
// exportable w whose token was never imported: a token does not keep a
// semaphore nobody holds (it goes with the semaphore). The daemon keeps
// serving, and the semaphores go.
static void test_released_semaphore_fails_the_waits_nothing_can_meet(
    void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  uint32_t baseline = halo_test_admin_semaphore_count(&fixture->daemon);
  halo_buffer_t *buffer = create_host(client, 64);

  halo_semaphore_t *w = create_semaphore(client, 0);
  halo_semaphore_t *s = create_semaphore(client, 0);
  halo_semaphore_value_t wait = {w, 5};
  halo_semaphore_value_t signal = {s, 1};
  execute_fill(client, buffer, &wait, &signal);
  expect_still_waiting(s, 1);
  halo_semaphore_release(w);
  expect_orphan_failure(s, 1,
                        "1 wait of pending submissions stood for value 5");

  // Exportable and exported, its token never imported; two waiters.
  halo_semaphore_t *x = create_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_semaphore_export(x, &token));
  halo_semaphore_t *t = create_semaphore(client, 0);
  halo_semaphore_value_t wait_x = {x, 3};
  halo_semaphore_value_t signal_t1 = {t, 1};
  halo_semaphore_value_t signal_t2 = {t, 2};
  execute_fill(client, buffer, &wait_x, &signal_t1);
  execute_fill(client, buffer, &wait_x, &signal_t2);
  expect_still_waiting(t, 1);
  halo_semaphore_release(x);
  expect_orphan_failure(t, 2,
                        "2 waits of pending submissions stood for value 3");
  halo_semaphore_t *late = NULL;
  HALO_TEST_EXPECT_STATUS(halo_semaphore_import(client, &token, &late),
                          HALO_STATUS_NOT_FOUND, "no live exported semaphore");

  // The daemon keeps serving.
  halo_semaphore_t *done = create_semaphore(client, 0);
  halo_semaphore_value_t signal_done = {done, 1};
  execute_fill(client, buffer, NULL, &signal_done);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, 1, DEADLINE_NS));
  halo_semaphore_release(done);
  halo_semaphore_release(s);
  halo_semaphore_release(t);
  halo_buffer_release(buffer);
  assert_true(HALO_TEST_POLL(
      halo_test_admin_semaphore_count(&fixture->daemon) == baseline, 1000));
}

// A semaphore that only pending work still holds stays as long as some of
// that work will signal it; once the last signaler retired below the value
// the others wait for, their waits fail the same way.
static void test_semaphore_orphaned_when_its_last_signaler_retires(
    void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_buffer_t *buffer = create_host(client, 64);
  halo_semaphore_t *gate = create_semaphore(client, 0);
  halo_semaphore_t *w = create_semaphore(client, 0);
  halo_semaphore_t *s = create_semaphore(client, 0);
  halo_semaphore_value_t wait_gate = {gate, 1};
  halo_semaphore_value_t signal_w = {w, 3};
  halo_semaphore_value_t wait_w = {w, 5};
  halo_semaphore_value_t signal_s = {s, 1};
  execute_fill(client, buffer, &wait_w, &signal_s);
  execute_fill(client, buffer, &wait_gate, &signal_w);
  halo_semaphore_release(w);
  expect_still_waiting(s, 1);  // the signaler of w=3 is pending
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(gate, 1));
  expect_orphan_failure(s, 1,
                        "1 wait of pending submissions stood for value 5");
  halo_semaphore_release(s);
  halo_semaphore_release(gate);
  halo_buffer_release(buffer);
}

// Not failed while something could still advance it: a session that
// imported it, or a pending submission that will signal it (waiting
// itself, on a semaphore the client signals later).
static void test_released_semaphore_kept_while_it_can_advance(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_client_t *importer = halo_test_connect(&fixture->daemon, 0);
  halo_buffer_t *buffer = create_host(client, 64);

  // Held by an importer, which signals it after the creator released it.
  halo_semaphore_t *w = create_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  char text[33];
  export_semaphore(w, text);
  halo_semaphore_t *w_import = import_semaphore(importer, text);
  halo_semaphore_t *s = create_semaphore(client, 0);
  halo_semaphore_value_t wait_w = {w, 1};
  halo_semaphore_value_t signal_s = {s, 1};
  execute_fill(client, buffer, &wait_w, &signal_s);
  halo_semaphore_release(w);
  expect_still_waiting(s, 1);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(w_import, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(s, 1, DEADLINE_NS));
  halo_semaphore_release(w_import);

  // Signaled by a pending submission that waits for the gate.
  halo_semaphore_t *gate = create_semaphore(client, 0);
  halo_semaphore_t *v = create_semaphore(client, 0);
  halo_semaphore_value_t wait_gate = {gate, 1};
  halo_semaphore_value_t signal_v = {v, 4};
  halo_semaphore_value_t wait_v = {v, 4};
  halo_semaphore_value_t signal_s2 = {s, 2};
  execute_fill(client, buffer, &wait_v, &signal_s2);
  execute_fill(client, buffer, &wait_gate, &signal_v);
  halo_semaphore_release(v);
  expect_still_waiting(s, 2);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(gate, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(s, 2, DEADLINE_NS));

  halo_semaphore_release(gate);
  halo_semaphore_release(s);
  halo_buffer_release(buffer);
  halo_client_close(importer);
}

// The phrases that say a semaphore's only pending signalers wait on it
// (SELF), or on it and on one another through semaphores no session holds
// (CYCLE).
#define SELF "its only pending signaler waits on it ("
#define CYCLE "on it or on semaphores only such waiting signalers could advance"
// halod's search over all semaphores after a walk past its budget
// (HALOD_SEMAPHORE_ORPHAN_SWEEP_MS).
#define HALOD_TEST_SWEEP_MS 1000

// Polls until the daemon holds |baseline| semaphores again and no
// submission of a live session is pending.
static void expect_semaphores_back_to(const halo_test_daemon_t *daemon,
                                      uint32_t baseline) {
  uint32_t pending = 1;
  assert_true(HALO_TEST_POLL(
      (halo_test_admin_queue_totals(daemon, &pending, NULL),
       pending == 0 && halo_test_admin_semaphore_count(daemon) == baseline),
      HALO_TEST_DEADLINE_MS));
}

// A submission waits on s for 5 and signals s = 6 (and t = 1). Once its
// client released s, only that submission could advance s, and it waits
// for s: its wait fails at once, naming s and saying so, and so does t.
// Before, the submission, s and what the submission held stayed in halod
// for its life, and t's waiter waited for its own timeout.
static void test_semaphore_only_its_own_waiter_signals_fails(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  uint32_t baseline = halo_test_admin_semaphore_count(&fixture->daemon);
  halo_buffer_t *buffer = create_host(client, 64);
  halo_semaphore_t *s = create_semaphore(client, 0);
  halo_semaphore_t *t = create_semaphore(client, 0);
  halo_semaphore_value_t wait = {s, 5};
  halo_semaphore_value_t signals[] = {{s, 6}, {t, 1}};
  execute_fill_sync(client, buffer, &wait, 1, signals, 2);
  expect_still_waiting(t, 1);
  halo_semaphore_release(s);
  expect_abandoned(t, 1, "1 wait of pending submissions stood for value 5",
                   SELF);
  halo_semaphore_release(t);
  halo_buffer_release(buffer);
  expect_semaphores_back_to(&fixture->daemon, baseline);
}

// Submission x waits on a and signals b (and t), y waits on b and signals
// a. Once the client released a and b, only x and y could advance them,
// and each waits for the other: the waits fail at once, naming the cycle,
// and so does t. The same for a cycle of three (c, d, e) with a branch
// out of it (f, which only the cycle signals, and which a waiter outside
// the cycle waits on).
static void test_cycle_of_waiting_signalers_fails(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  uint32_t baseline = halo_test_admin_semaphore_count(&fixture->daemon);
  halo_buffer_t *buffer = create_host(client, 64);
  halo_semaphore_t *a = create_semaphore(client, 0);
  halo_semaphore_t *b = create_semaphore(client, 0);
  halo_semaphore_t *t = create_semaphore(client, 0);
  halo_semaphore_value_t wait_a = {a, 1};
  halo_semaphore_value_t wait_b = {b, 1};
  halo_semaphore_value_t x_signals[] = {{b, 1}, {t, 1}};
  halo_semaphore_value_t y_signal = {a, 1};
  execute_fill_sync(client, buffer, &wait_a, 1, x_signals, 2);
  execute_fill(client, buffer, &wait_b, &y_signal);
  halo_semaphore_release(a);
  expect_still_waiting(t, 1);  // the client can still signal b
  halo_semaphore_release(b);
  expect_abandoned(t, 1, "1 wait of pending submissions stood for value 1",
                   CYCLE);
  halo_semaphore_release(t);

  halo_semaphore_t *c = create_semaphore(client, 0);
  halo_semaphore_t *d = create_semaphore(client, 0);
  halo_semaphore_t *e = create_semaphore(client, 0);
  halo_semaphore_t *f = create_semaphore(client, 0);
  halo_semaphore_t *u = create_semaphore(client, 0);
  halo_semaphore_value_t wait_c = {c, 2};
  halo_semaphore_value_t wait_d = {d, 2};
  halo_semaphore_value_t wait_e = {e, 2};
  halo_semaphore_value_t wait_f = {f, 1};
  halo_semaphore_value_t c_signals[] = {{d, 2}, {f, 1}};
  halo_semaphore_value_t signal_e = {e, 2};
  halo_semaphore_value_t signal_c = {c, 2};
  halo_semaphore_value_t signal_u = {u, 1};
  execute_fill_sync(client, buffer, &wait_c, 1, c_signals, 2);
  execute_fill(client, buffer, &wait_d, &signal_e);
  execute_fill(client, buffer, &wait_e, &signal_c);
  execute_fill(client, buffer, &wait_f, &signal_u);
  halo_semaphore_release(f);
  halo_semaphore_release(c);
  halo_semaphore_release(e);
  expect_still_waiting(u, 1);  // the client can still signal d
  halo_semaphore_release(d);
  expect_abandoned(u, 1, "stood for value", CYCLE);
  halo_semaphore_release(u);
  halo_buffer_release(buffer);
  expect_semaphores_back_to(&fixture->daemon, baseline);
}

// A cycle of 1200 semaphores (x_i waits on s_i and signals s_i+1, the
// last s_0; x_0 signals t too): the walk of the last release stops at its
// budget (4,800 steps: each semaphore, submission, signal and wait), and
// the search from that semaphore a second later fails the cycle and t. Before
// the budget, a client releasing such a chain from its end made each release
// walk all released before it, on the loop every tenant shares.
static void test_cycle_past_the_walks_budget_fails_within_a_second(
    void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  uint32_t baseline = halo_test_admin_semaphore_count(&fixture->daemon);
  enum { kLength = 1200 };
  halo_buffer_t *buffer = create_host(client, 64);
  halo_semaphore_t *cycle[kLength];
  for (int i = 0; i < kLength; ++i) cycle[i] = create_semaphore(client, 0);
  halo_semaphore_t *t = create_semaphore(client, 0);
  for (int i = 0; i < kLength; ++i) {
    halo_semaphore_value_t wait = {cycle[i], 1};
    halo_semaphore_value_t signals[] = {{cycle[(i + 1) % kLength], 1}, {t, 1}};
    execute_fill_sync(client, buffer, &wait, 1, signals, i == 0 ? 2 : 1);
  }
  for (int i = 0; i < kLength; ++i) halo_semaphore_release(cycle[i]);
  int64_t start_ns = halo_test_now_ns();
  expect_abandoned(t, 1, "1 wait of pending submissions stood for value 1",
                   CYCLE);
  int64_t took_ms = (halo_test_now_ns() - start_ns) / HALO_TEST_MS;
  print_message("the cycle failed %lld ms after its last release\n",
                (long long)took_ms);
  assert_true(took_ms >= HALOD_TEST_SWEEP_MS / 2);  // by the search, later
  halo_semaphore_release(t);
  halo_buffer_release(buffer);
  expect_semaphores_back_to(&fixture->daemon, baseline);
}

// A cycle across two sessions of the domain, through exported semaphores:
// the client's x waits on a (the other session's, imported) and signals b
// (its own, exported) and t; the other session's y waits on b and signals
// a. Neither may advance once both sessions released their handles of a
// and b, though both sessions live on: the waits fail, and t with them.
static void test_cycle_across_sessions_fails(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_client_t *other = halo_test_connect(&fixture->daemon, 0);
  uint32_t baseline = halo_test_admin_semaphore_count(&fixture->daemon);
  halo_buffer_t *buffer = create_host(client, 64);
  halo_buffer_t *other_buffer = create_host(other, 64);
  char text[33];
  halo_semaphore_t *a = create_semaphore(other, HALO_OBJECT_FLAG_EXPORTABLE);
  export_semaphore(a, text);
  halo_semaphore_t *a_import = import_semaphore(client, text);
  halo_semaphore_t *b = create_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  export_semaphore(b, text);
  halo_semaphore_t *b_import = import_semaphore(other, text);
  halo_semaphore_t *t = create_semaphore(client, 0);
  halo_semaphore_value_t wait_a = {a_import, 1};
  halo_semaphore_value_t x_signals[] = {{b, 1}, {t, 1}};
  halo_semaphore_value_t wait_b = {b_import, 1};
  halo_semaphore_value_t y_signal = {a, 1};
  execute_fill_sync(client, buffer, &wait_a, 1, x_signals, 2);
  execute_fill(other, other_buffer, &wait_b, &y_signal);
  halo_semaphore_release(a_import);
  halo_semaphore_release(b);
  halo_semaphore_release(a);
  expect_still_waiting(t, 1);  // the other session can still signal b
  halo_semaphore_release(b_import);
  expect_abandoned(t, 1, "1 wait of pending submissions stood for value 1",
                   CYCLE);
  halo_semaphore_release(t);
  halo_buffer_release(buffer);
  halo_buffer_release(other_buffer);
  expect_semaphores_back_to(&fixture->daemon, baseline);
  halo_client_close(other);
}

// The session that holds a cycle's semaphores goes: the client created a
// and b, exported them to another session, which imported them, put x
// (waits on a, signals b and t) and y (waits on b, signals a) in its queue
// and released a and b. While the other session lives it may signal a or
// b, and the cycle waits; once it disconnected, the waits fail. (Had the
// creator held them to its end, its end would have failed them.)
static void test_cycle_fails_when_its_holder_disconnects(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_client_t *other = halo_test_connect(&fixture->daemon, 0);
  uint32_t baseline = halo_test_admin_semaphore_count(&fixture->daemon);
  halo_buffer_t *buffer = create_host(client, 64);
  char text[33];
  halo_semaphore_t *a = create_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  export_semaphore(a, text);
  import_semaphore(other, text);
  halo_semaphore_t *b = create_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  export_semaphore(b, text);
  import_semaphore(other, text);
  halo_semaphore_t *t = create_semaphore(client, 0);
  halo_semaphore_value_t wait_a = {a, 1};
  halo_semaphore_value_t x_signals[] = {{b, 1}, {t, 1}};
  halo_semaphore_value_t wait_b = {b, 1};
  halo_semaphore_value_t y_signal = {a, 1};
  execute_fill_sync(client, buffer, &wait_a, 1, x_signals, 2);
  execute_fill(client, buffer, &wait_b, &y_signal);
  halo_semaphore_release(a);
  halo_semaphore_release(b);
  expect_still_waiting(t, 1);
  halo_client_close(other);
  expect_abandoned(t, 1, "1 wait of pending submissions stood for value 1",
                   CYCLE);
  halo_semaphore_release(t);
  halo_buffer_release(buffer);
  expect_semaphores_back_to(&fixture->daemon, baseline);
}

// A cycle one of whose semaphores a session still holds is left alone:
// x waits on a and signals b (and t), y waits on b and signals a = 2, and
// the client released b but holds a. It can signal a from the host (above
// y's pending 2), which runs x, then y: the cycle ends as it should.
static void test_cycle_kept_while_a_session_holds_it(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  uint32_t baseline = halo_test_admin_semaphore_count(&fixture->daemon);
  halo_buffer_t *buffer = create_host(client, 64);
  halo_semaphore_t *a = create_semaphore(client, 0);
  halo_semaphore_t *b = create_semaphore(client, 0);
  halo_semaphore_t *t = create_semaphore(client, 0);
  halo_semaphore_value_t wait_a = {a, 1};
  halo_semaphore_value_t wait_b = {b, 1};
  halo_semaphore_value_t x_signals[] = {{b, 1}, {t, 1}};
  halo_semaphore_value_t y_signal = {a, 2};
  execute_fill_sync(client, buffer, &wait_a, 1, x_signals, 2);
  execute_fill(client, buffer, &wait_b, &y_signal);
  halo_semaphore_release(b);
  expect_still_waiting(t, 1);
  uint64_t value = 7;
  HALO_TEST_ASSERT_OK(halo_semaphore_query(a, &value));
  assert_int_equal(value, 0);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(a, 3));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(t, 1, DEADLINE_NS));
  expect_semaphores_back_to(&fixture->daemon, baseline + 2);
  HALO_TEST_ASSERT_OK(halo_semaphore_query(a, &value));
  assert_int_equal(value, 3);
  halo_semaphore_release(a);
  halo_semaphore_release(t);
  halo_buffer_release(buffer);
  expect_semaphores_back_to(&fixture->daemon, baseline);
}

// ---------------------------------------------------------------- ordering

static void assert_queue_totals(const halo_test_daemon_t *daemon,
                                uint32_t pending, uint32_t in_flight) {
  uint32_t actual_pending = 0;
  uint32_t actual_in_flight = 0;
  bool held = HALO_TEST_POLL(
      (halo_test_admin_queue_totals(daemon, &actual_pending, &actual_in_flight),
       actual_pending == pending && actual_in_flight == in_flight),
      HALO_TEST_DEADLINE_MS);
  if (!held) {
    print_error("queues: %u pending, %u in flight; expected %u and %u\n",
                actual_pending, actual_in_flight, pending, in_flight);
    fail();
  }
}

// What the daemon holds, by the admin API and /proc.
typedef struct daemon_usage_t {
  uint32_t sessions;
  uint32_t semaphores;  // those kept only by unfinished submissions too
  uint32_t pending;     // submissions of live sessions' queues
  uint32_t in_flight;
  int memfds;  // buffer arenas, exportable buffers, semaphore pages
  int fds;
} daemon_usage_t;

static daemon_usage_t daemon_usage(const halo_test_daemon_t *daemon) {
  daemon_usage_t usage;
  usage.sessions = halo_test_admin_session_count(daemon);
  usage.semaphores = halo_test_admin_semaphore_count(daemon);
  halo_test_admin_queue_totals(daemon, &usage.pending, &usage.in_flight);
  usage.memfds = halo_test_count_memfds(daemon->pid);
  usage.fds = halo_test_count_fds(daemon->pid);
  return usage;
}

static bool daemon_usage_back_to(const daemon_usage_t *usage,
                                 const daemon_usage_t *baseline) {
  // Descriptors: at most as many as before (an admin connection of the
  // harness may still have been open when the baseline was taken).
  return usage->sessions == baseline->sessions &&
         usage->semaphores == baseline->semaphores && usage->pending == 0 &&
         usage->in_flight == 0 && usage->memfds <= baseline->memfds &&
         usage->fds <= baseline->fds;
}

// Polls until the daemon holds no more than |baseline| and nothing is
// pending or in flight; fails printing both otherwise.
static void assert_daemon_back_to(const halo_test_daemon_t *daemon,
                                  const daemon_usage_t *baseline) {
  daemon_usage_t usage;
  if (HALO_TEST_POLL((usage = daemon_usage(daemon),
                      daemon_usage_back_to(&usage, baseline)),
                     HALO_TEST_DEADLINE_MS)) {
    return;
  }
  print_error(
      "halod holds %u sessions, %u semaphores, %u submissions pending and "
      "%u in flight, %d memfds, %d fds; before: %u, %u, %u, %u, %d, %d\n",
      usage.sessions, usage.semaphores, usage.pending, usage.in_flight,
      usage.memfds, usage.fds, baseline->sessions, baseline->semaphores,
      baseline->pending, baseline->in_flight, baseline->memfds, baseline->fds);
  halo_test_admin_print_sessions(daemon);
  fail();
}

// A (queue 1) -> s1 -> B (queue 1) -> s2 -> D (queue 2)
//                   -> C (queue 2) -> s3 ->
// Submitted D, C, B, A, and A waits for the test's go: every wait is
// registered before its signal. Each step adds what the previous ones
// wrote, so any other order leaves a wrong value.
static void test_diamond_across_two_queues_submitted_in_reverse(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  enum { N = 4096 };
  uint64_t bytes = N * sizeof(float);
  halo_executable_t *executable = load_kernels(client);
  uint32_t n = N;
  halo_command_buffer_t *cb =
      halo_test_record_vector_add(client, executable, &n);
  halo_buffer_t *in = create_host(client, bytes);
  halo_buffer_t *v[4];  // va, vb, vc, vd
  float *x = halo_buffer_host_pointer(in);
  for (int i = 0; i < N; ++i) x[i] = (float)(i + 1);
  for (int k = 0; k < 4; ++k) {
    v[k] = create_host(client, bytes);
    float *host = halo_buffer_host_pointer(v[k]);
    for (int i = 0; i < N; ++i) host[i] = -1.0f;
  }
  halo_queue_t *q1 = NULL;
  halo_queue_t *q2 = NULL;
  HALO_TEST_ASSERT_OK(halo_queue_create(client, 0, 0, &q1));
  HALO_TEST_ASSERT_OK(halo_queue_create(client, 0, 0, &q2));
  halo_semaphore_t *go = create_semaphore(client, 0);
  halo_semaphore_t *s[4];  // s1, s2, s3, sd (D's)
  for (int k = 0; k < 4; ++k) s[k] = create_semaphore(client, 0);

#define BIND(buffer) {(buffer), 0, HALO_WHOLE_BUFFER}
  // D = vd <- vb + vc, on queue 2, waits s2 and s3.
  halo_binding_t d_bindings[3] = {BIND(v[1]), BIND(v[2]), BIND(v[3])};
  halo_semaphore_value_t d_waits[2] = {{s[1], 1}, {s[2], 1}};
  halo_semaphore_value_t d_signal = {s[3], 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(q2, cb, d_bindings, 3, d_waits, 2, &d_signal, 1));
  // C = vc <- va + va, on queue 2, waits s1, signals s3.
  halo_binding_t c_bindings[3] = {BIND(v[0]), BIND(v[0]), BIND(v[2])};
  halo_semaphore_value_t s1_wait = {s[0], 1};
  halo_semaphore_value_t c_signal = {s[2], 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(q2, cb, c_bindings, 3, &s1_wait, 1, &c_signal, 1));
  // B = vb <- va + x, on queue 1, waits s1, signals s2.
  halo_binding_t b_bindings[3] = {BIND(v[0]), BIND(in), BIND(v[1])};
  halo_semaphore_value_t b_signal = {s[1], 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(q1, cb, b_bindings, 3, &s1_wait, 1, &b_signal, 1));
  // A = va <- x + x, on queue 1, waits go, signals s1.
  halo_binding_t a_bindings[3] = {BIND(in), BIND(in), BIND(v[0])};
  halo_semaphore_value_t go_wait = {go, 1};
  halo_semaphore_value_t a_signal = {s[0], 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(q1, cb, a_bindings, 3, &go_wait, 1, &a_signal, 1));
#undef BIND

  // All four wait; nothing ran.
  assert_queue_totals(&fixture->daemon, 4, 0);
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(s[3], 1, 20 * MS),
                          HALO_STATUS_DEADLINE_EXCEEDED, NULL);
  for (int k = 0; k < 4; ++k) {
    uint64_t value = 9;
    HALO_TEST_ASSERT_OK(halo_semaphore_query(s[k], &value));
    assert_int_equal(value, 0);
    assert_true(((const float *)halo_buffer_host_pointer(v[k]))[0] == -1.0f);
  }

  HALO_TEST_ASSERT_OK(halo_semaphore_signal(go, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(s[3], 1, DEADLINE_NS));
  for (int k = 0; k < 3; ++k) {
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(s[k], 1, 0));
  }
  static const int factors[4] = {2, 3, 4, 7};  // va, vb, vc, vd
  static const char *const names[4] = {"va", "vb", "vc", "vd"};
  static float expected[N];
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < N; ++i) expected[i] = (float)(factors[k] * (i + 1));
    assert_floats(halo_buffer_host_pointer(v[k]), expected, N, names[k]);
  }
  assert_queue_totals(&fixture->daemon, 0, 0);

  for (int k = 0; k < 4; ++k) {
    halo_semaphore_release(s[k]);
    halo_buffer_release(v[k]);
  }
  halo_semaphore_release(go);
  halo_queue_release(q1);
  halo_queue_release(q2);
  halo_buffer_release(in);
  halo_command_buffer_release(cb);
  halo_executable_release(executable);
}

// ---------------------------------------------------------------- failure

// Process A (this one) submits X: waits s0, signals s1 (exported). Process
// B (a peer) imports s1 and submits Y: waits s1, signals s2 (exported). A
// imports s2 and submits Z: waits s2, signals s3 (exported to B). A fails
// s0: s1, s2 and s3 fail with its code and a message naming the cause, in
// both processes, and none of X, Y, Z runs.
static void test_failure_propagates_along_chain_across_processes(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  const halo_status_code_t code = HALO_STATUS_DATA_LOSS;
  const char *cause = "shard 7 of the weights failed its checksum";
  halo_semaphore_t *s0 = create_semaphore(client, 0);
  halo_semaphore_t *s1 = create_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  halo_semaphore_t *s3 = create_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  char s1_text[33];
  char s3_text[33];
  export_semaphore(s1, s1_text);
  export_semaphore(s3, s3_text);
  halo_buffer_t *buffer = create_host(client, 128);
  uint8_t pattern = 0x99;
  halo_command_buffer_t *x =
      halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  HALO_TEST_ASSERT_OK(
      halo_command_buffer_fill(x, halo_buffer_ref(buffer, 0, 64), &pattern, 1));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(x));
  halo_semaphore_value_t x_wait = {s0, 1};
  halo_semaphore_value_t x_signal = {s1, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, x, NULL, 0, &x_wait, 1, &x_signal, 1));
  halo_command_buffer_release(x);

  char code_text[16];
  snprintf(code_text, sizeof(code_text), "%d", (int)code);
  const char *args[] = {"chain", s1_text, s3_text, code_text, cause, NULL};
  halo_test_process_t *peer = &fixture->peers[0];
  spawn_execute_peer(fixture, peer, args);
  char line[128];
  halo_test_read_line(peer, line, sizeof(line), HALO_TEST_DEADLINE_MS);
  char s2_text[33];
  assert_int_equal(sscanf(line, "token %32s", s2_text), 1);
  halo_semaphore_t *s2 = import_semaphore(client, s2_text);
  halo_command_buffer_t *z =
      halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      z, halo_buffer_ref(buffer, 64, 64), &pattern, 1));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(z));
  halo_semaphore_value_t z_wait = {s2, 1};
  halo_semaphore_value_t z_signal = {s3, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, z, NULL, 0, &z_wait, 1, &z_signal, 1));
  halo_command_buffer_release(z);
  // Nothing moved yet.
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(s3, 1, 20 * MS),
                          HALO_STATUS_DEADLINE_EXCEEDED, NULL);

  int64_t start = halo_test_now_ns();
  HALO_TEST_ASSERT_OK(halo_semaphore_fail(s0, code, cause));
  halo_semaphore_t *chain[4] = {s0, s1, s2, s3};
  for (int k = 0; k < 4; ++k) {
    HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(chain[k], 1, DEADLINE_NS), code,
                            cause);
  }
  // Downstream of s0 the message says how the failure arrived.
  for (int k = 1; k < 4; ++k) {
    uint64_t value = 9;
    HALO_TEST_EXPECT_STATUS(halo_semaphore_query(chain[k], &value), code,
                            "a wait of the submission failed");
    assert_int_equal(value, 0);
  }
  int64_t elapsed_ms = (halo_test_now_ns() - start) / MS;
  assert_true(elapsed_ms < HALO_TEST_DEADLINE_MS);
  // And in the other process, each with the same code.
  for (int k = 1; k <= 3; ++k) {
    char expected[32];
    snprintf(expected, sizeof(expected), "s%d %d", k, (int)code);
    halo_test_read_line(peer, line, sizeof(line), HALO_TEST_DEADLINE_MS);
    assert_string_equal(line, expected);
  }
  halo_test_read_line(peer, line, sizeof(line), HALO_TEST_DEADLINE_MS);
  assert_string_equal(line, "checked");
  assert_int_equal(halo_test_process_wait(peer, HALO_TEST_DEADLINE_MS), 0);
  // The peer's end did not replace the failure s2 carries.
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(s2, 1, DEADLINE_NS), code, cause);
  const uint8_t *bytes = halo_buffer_host_pointer(buffer);
  for (int i = 0; i < 128; ++i) assert_int_equal(bytes[i], 0);
  for (int k = 0; k < 4; ++k) halo_semaphore_release(chain[k]);
  halo_buffer_release(buffer);
}

// A failure that travels a long chain of submissions (each waits on the
// semaphore the one before signals) says once how it arrived: the message
// at the end is the one after the first link, not a prefix per link (which
// made halod's loop copy O(links^2) bytes: 8,000 links stalled it 16 s).
static void test_failure_along_a_long_chain_keeps_its_message(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  enum { LINKS = 200 };
  const char *cause = "the tokenizer's table is corrupt";
  halo_semaphore_t *chain[LINKS + 1];
  for (int k = 0; k <= LINKS; ++k) chain[k] = create_semaphore(client, 0);
  halo_buffer_t *buffer = create_host(client, 64);
  uint8_t pattern = 0x5a;
  for (int k = 0; k < LINKS; ++k) {
    halo_command_buffer_t *cb =
        halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
    HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
        cb, halo_buffer_ref(buffer, 0, 64), &pattern, 1));
    HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
    halo_semaphore_value_t wait = {chain[k], 1};
    halo_semaphore_value_t signal = {chain[k + 1], 1};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, cb, NULL, 0, &wait, 1, &signal, 1));
    halo_command_buffer_release(cb);
  }
  HALO_TEST_ASSERT_OK(
      halo_semaphore_fail(chain[0], HALO_STATUS_DATA_LOSS, cause));
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(chain[LINKS], 1, DEADLINE_NS),
                          HALO_STATUS_DATA_LOSS, cause);
  uint64_t value = 9;
  halo_status_t first = halo_semaphore_query(chain[1], &value);
  halo_status_t last = halo_semaphore_query(chain[LINKS], &value);
  assert_int_equal(halo_status_code(last), HALO_STATUS_DATA_LOSS);
  print_message("after 1 link: %s\nafter %d: %s\n", halo_status_message(first),
                LINKS, halo_status_message(last));
  assert_string_equal(halo_status_message(last), halo_status_message(first));
  assert_non_null(strstr(halo_status_message(last), cause));
  halo_status_free(first);
  halo_status_free(last);
  const uint8_t *bytes = halo_buffer_host_pointer(buffer);
  for (int i = 0; i < 64; ++i) assert_int_equal(bytes[i], 0);
  for (int k = 0; k <= LINKS; ++k) halo_semaphore_release(chain[k]);
  halo_buffer_release(buffer);
}

// ---------------------------------------------------------------- load

// 8 processes x 1000 executions, in the plain and the ASan build alike:
// measured on the 2-core dev machine, 0.4-1.5 s plain and 0.7-2.2 s under
// ASan+UBSan (the longer ones with other work on both cores), far below
// the TIMEOUT, so nothing is scaled down under ASan.
#define LOAD_EXECUTIONS "1000"
enum { LOAD_PROCESSES = 8 };

static void test_load_processes_times_executions(void **state) {
  halo_test_fixture_t *fixture = *state;
  daemon_usage_t baseline = daemon_usage(&fixture->daemon);
  int64_t start = halo_test_now_ns();
  const char *args[] = {"load", halo_test_kernels_path(), LOAD_EXECUTIONS,
                        NULL};
  for (int p = 0; p < LOAD_PROCESSES; ++p) {
    spawn_execute_peer(fixture, &fixture->peers[p], args);
  }
  char line[64];
  for (int p = 0; p < LOAD_PROCESSES; ++p) {
    halo_test_read_line(&fixture->peers[p], line, sizeof(line), 10000);
    assert_string_equal(line, "ready");
  }
  for (int p = 0; p < LOAD_PROCESSES; ++p) {
    halo_test_read_line(&fixture->peers[p], line, sizeof(line), 15000);
    assert_string_equal(line, "done " LOAD_EXECUTIONS);
    assert_int_equal(halo_test_process_wait(&fixture->peers[p], 10000), 0);
  }
  print_message("%d processes x %s executions: %.2f s\n", LOAD_PROCESSES,
                LOAD_EXECUTIONS, (double)(halo_test_now_ns() - start) / 1e9);
  // Nothing of theirs is left: sessions, submissions, semaphores, memory.
  assert_daemon_back_to(&fixture->daemon, &baseline);
  halo_client_close(fixture->client);
  fixture->client = NULL;
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 0, 5000));
  assert_int_equal(halo_test_admin_semaphore_count(&fixture->daemon), 0);
}

// ---------------------------------------------------------------- kill

// execute_peer's victim in |process|, waiting on |out|->go and signaling
// |out|->done (this process's, exported), once its gate kernel runs; the
// gate buffer imported (|out|->words[0]: gate kernels started; words[4],
// byte 16: the gate, which the test sets).
typedef struct victim_t {
  halo_semaphore_t *go;
  halo_semaphore_t *done;
  halo_buffer_t *gate;
  uint32_t *words;
} victim_t;

static void victim_start(halo_test_fixture_t *fixture,
                         halo_test_process_t *process, victim_t *out) {
  halo_client_t *client = fixture->client;
  out->go = create_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  out->done = create_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  char go_text[33];
  char done_text[33];
  export_semaphore(out->go, go_text);
  export_semaphore(out->done, done_text);
  const char *args[] = {"victim", halo_test_kernels_path(), go_text, done_text,
                        NULL};
  spawn_execute_peer(fixture, process, args);
  char line[128];
  halo_test_read_line(process, line, sizeof(line), 10000);
  char gate_text[33];
  assert_int_equal(sscanf(line, "ready %32s", gate_text), 1);
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_token_parse(gate_text, &token));
  HALO_TEST_ASSERT_OK(halo_buffer_import(client, &token, &out->gate));
  out->words = halo_buffer_host_pointer(out->gate);
}

// A victim process has chains of submissions waiting on a semaphore nobody
// signals (each link submitted before the one it waits for), one waiting
// for this process's go and signaling its done, sleeping kernels and a
// gate kernel running. It is SIGKILLed while another process executes and
// checks results. The waiting work is cancelled (done fails with ABORTED,
// naming the session's end), the running work finishes once the gate
// opens, and the daemon ends with what it had before.
static void test_killed_client_leaves_daemon_clean(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  daemon_usage_t baseline = daemon_usage(&fixture->daemon);

  halo_semaphore_t *stop =
      create_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  char stop_text[33];
  export_semaphore(stop, stop_text);

  halo_test_process_t *victim = &fixture->peers[0];
  halo_test_process_t *worker = &fixture->peers[1];
  victim_t started;
  victim_start(fixture, victim, &started);
  halo_semaphore_t *go = started.go;
  halo_semaphore_t *done = started.done;
  uint32_t *words = started.words;
  char line[128];
  assert_int_equal(__atomic_load_n(&words[0], __ATOMIC_ACQUIRE), 1);
  uint32_t pending = 0;
  uint32_t in_flight = 0;
  halo_test_admin_queue_totals(&fixture->daemon, &pending, &in_flight);
  assert_true(pending >= 4 * 6 + 1);
  assert_true(in_flight >= 1);

  const char *worker_args[] = {"load", halo_test_kernels_path(), "200",
                               stop_text, NULL};
  spawn_execute_peer(fixture, worker, worker_args);
  halo_test_read_line(worker, line, sizeof(line), 10000);
  assert_string_equal(line, "ready");
  halo_test_sleep_ms(20);

  assert_int_equal(kill(victim->pid, SIGKILL), 0);
  assert_true(
      HALO_TEST_POLL(halo_test_process_exited(victim), HALO_TEST_DEADLINE_MS));
  assert_true(WIFSIGNALED(victim->wait_status));
  // The submission that waited for go was cancelled and failed done.
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(done, 1, DEADLINE_NS),
                          HALO_STATUS_ABORTED, "its session");
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(done, 1, 0), HALO_STATUS_ABORTED,
                          "ended");
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(go, 1));
  // Its session is gone at once; the gate kernel still runs.
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 2, 5000));
  __atomic_store_n(&words[4], 1, __ATOMIC_RELEASE);  // byte 16
  halo_buffer_release(started.gate);

  HALO_TEST_ASSERT_OK(halo_semaphore_signal(stop, 1));
  halo_test_read_line(worker, line, sizeof(line), 10000);
  unsigned long long executions = 0;
  assert_int_equal(sscanf(line, "done %llu", &executions), 1);
  assert_true(executions >= 200);
  assert_int_equal(halo_test_process_wait(worker, 10000), 0);

  halo_semaphore_release(go);
  halo_semaphore_release(done);
  halo_semaphore_release(stop);
  assert_daemon_back_to(&fixture->daemon, &baseline);
}

// Under trust-domain process a client's domain ends with its last session,
// but work it left running keeps the domain and its worker: the worker
// stays listed (haloctl workers) while its gate kernel runs, and goes once
// the kernel returns. Before, the domain ended at once and its worker,
// still running the kernel, was listed nowhere (a kernel that never ends
// kept a context and a process that no haloctl command showed).
static void test_ended_domain_keeps_its_worker_while_work_runs(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_test_process_t *victim = &fixture->peers[0];
  victim_t started;
  victim_start(fixture, victim, &started);
  char domain[32];
  snprintf(domain, sizeof(domain), "pid:%d", (int)victim->pid);
  pid_t worker = halo_test_admin_worker_pid(&fixture->daemon, domain);
  assert_true(worker > 0);

  assert_int_equal(kill(victim->pid, SIGKILL), 0);
  assert_true(
      HALO_TEST_POLL(halo_test_process_exited(victim), HALO_TEST_DEADLINE_MS));
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1, 5000));
  // Its session ended; the gate kernel still runs on its worker, listed.
  halo_test_sleep_ms(200);
  assert_int_equal(halo_test_admin_worker_pid(&fixture->daemon, domain),
                   worker);
  assert_int_equal(kill(worker, 0), 0);

  __atomic_store_n(&started.words[4], 1, __ATOMIC_RELEASE);  // the gate
  halo_buffer_release(started.gate);
  // The kernel returns: the domain ends, and its worker with it.
  assert_true(
      HALO_TEST_POLL(halo_test_admin_worker_pid(&fixture->daemon, domain) == 0,
                     HALO_TEST_DEADLINE_MS));
  char proc[64];
  snprintf(proc, sizeof(proc), "/proc/%d", (int)worker);
  assert_true(HALO_TEST_POLL(access(proc, F_OK) != 0, HALO_TEST_DEADLINE_MS));
  halo_semaphore_release(started.go);
  halo_semaphore_release(started.done);
}

static int setup_process_domains(void **state) {
  static const char *const args[] = {"--trust-domain", "process", NULL};
  return halo_test_fixture_setup_with(state, args, true);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
  const struct CMUnitTest tests[] = {
#define TEST(name)                                               \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
      TEST(test_fills_and_copies_touch_exactly_their_bytes),
      TEST(test_validation_errors_name_binding_slot_and_command),
      TEST(test_execution_failure_names_command_and_propagates),
      TEST(test_waiting_submission_outlives_released_objects),
      TEST(test_released_semaphore_fails_the_waits_nothing_can_meet),
      TEST(test_semaphore_orphaned_when_its_last_signaler_retires),
      TEST(test_released_semaphore_kept_while_it_can_advance),
      TEST(test_semaphore_only_its_own_waiter_signals_fails),
      TEST(test_cycle_of_waiting_signalers_fails),
      TEST(test_cycle_past_the_walks_budget_fails_within_a_second),
      TEST(test_cycle_across_sessions_fails),
      TEST(test_cycle_fails_when_its_holder_disconnects),
      TEST(test_cycle_kept_while_a_session_holds_it),
      TEST(test_diamond_across_two_queues_submitted_in_reverse),
      TEST(test_failure_propagates_along_chain_across_processes),
      TEST(test_failure_along_a_long_chain_keeps_its_message),
      TEST(test_load_processes_times_executions),
      TEST(test_killed_client_leaves_daemon_clean),
      cmocka_unit_test_setup_teardown(
          test_ended_domain_keeps_its_worker_while_work_runs,
          setup_process_domains, halo_test_fixture_teardown),
#undef TEST
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
