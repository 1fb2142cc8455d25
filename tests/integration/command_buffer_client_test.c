// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of libhalo's command buffers, executables and queues:
// record-time errors found by the client (they name the command index and
// the argument), errors only the daemon can find (entry points, unknown
// handles, binding tables against the recording's slot requirements),
// queue_execute's checks, and real work through the driver under test
// (HALO_TEST_DRIVER: local, or cuda for the cuda.* variant): a vector add
// executed with three binding tables, offsets that compose, fills, updates
// and copies, a dispatch of a zero grid as a no-op, the memo cache, and a
// recording's entry lookups (one control call to the worker per entry).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/halo_test.h"

static halo_buffer_t *create_buffer(halo_client_t *client, uint64_t size) {
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE,
                                         size, 0, &buffer));
  return buffer;
}

// The test kernels of the driver under test (tests/kernels/).
static halo_executable_t *load_kernels(halo_client_t *client) {
  return halo_test_load_kernels(client);
}

// ---------------------------------------------------------------- recording

static void test_begin_checks_flags_and_capacity(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_command_buffer_t *command_buffer = (halo_command_buffer_t *)1;
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_begin(fixture->client, 0, 0, 0, &command_buffer),
      HALO_STATUS_INVALID_ARGUMENT, "exactly one of ONE_SHOT");
  assert_null(command_buffer);
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_begin(
          fixture->client, 0,
          HALO_COMMAND_BUFFER_ONE_SHOT | HALO_COMMAND_BUFFER_REUSABLE, 0,
          &command_buffer),
      HALO_STATUS_INVALID_ARGUMENT, "flags 0x3");
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_begin(
                              fixture->client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                              HALO_MAX_BINDINGS + 1, &command_buffer),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "binding capacity 4097");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_begin(NULL, 0, HALO_COMMAND_BUFFER_REUSABLE, 0,
                                &command_buffer),
      HALO_STATUS_INVALID_ARGUMENT, "client");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_begin(fixture->client, 0,
                                HALO_COMMAND_BUFFER_REUSABLE, 0, NULL),
      HALO_STATUS_INVALID_ARGUMENT, "out_command_buffer");
  command_buffer = halo_test_begin(
      fixture->client, HALO_COMMAND_BUFFER_REUSABLE, HALO_MAX_BINDINGS);
  halo_command_buffer_release(command_buffer);
}

static void test_record_errors_name_command_and_argument(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_buffer_t *buffer = create_buffer(fixture->client, 64);
  halo_command_buffer_t *cb =
      halo_test_begin(fixture->client, HALO_COMMAND_BUFFER_REUSABLE, 4);
  uint32_t pattern = 0x01020304;

  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_fill(cb, halo_binding_ref(0, 0, 16), &pattern, 3),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 0 (fill): pattern size 3 is not 1, 2 or 4");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_fill(cb, halo_binding_ref(0, 0, 16), NULL, 4),
      HALO_STATUS_INVALID_ARGUMENT, "command 0 (fill): pattern is NULL");
  HALO_TEST_ASSERT_OK(halo_command_buffer_barrier(cb));
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_fill(cb, halo_binding_ref(9, 0, 16), &pattern, 4),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 1 (fill): target: slot 9 out of range (binding "
      "capacity 4)");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_fill(cb, halo_binding_ref(0, 2, 16), &pattern, 4),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 1 (fill): target: offset 2 is not a multiple of the "
      "pattern size 4");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_fill(cb, halo_binding_ref(0, 0, 6), &pattern, 4),
      HALO_STATUS_INVALID_ARGUMENT,
      "target: length 6 is not a multiple of the pattern size 4");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_fill(cb, halo_binding_ref(0, 0, HALO_WHOLE_BUFFER),
                               &pattern, 4),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 1 (fill): target: an indirect reference (slot 0) needs an "
      "explicit length");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_fill(cb, halo_binding_ref(0, 0, 0), &pattern, 4),
      HALO_STATUS_INVALID_ARGUMENT, "command 1 (fill): target: zero length");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_fill(cb, halo_buffer_ref(buffer, 32, 64), &pattern,
                               4),
      HALO_STATUS_OUT_OF_RANGE,
      "command 1 (fill): target: range [32, +64) does not fit "
      "buffer");

  char big[HALO_MAX_UPDATE_BYTES + 1] = {0};
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_update(cb, big, sizeof(big),
                                 halo_binding_ref(0, 0, sizeof(big))),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 1 (update): update of 65537 bytes (1 .. 65536)");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_update(cb, big, 8, halo_binding_ref(0, 0, 16)),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 1 (update): target length 16 differs from the 8 bytes");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_update(cb, NULL, 8, halo_binding_ref(0, 0, 8)),
      HALO_STATUS_INVALID_ARGUMENT, "command 1 (update): data is NULL");

  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_copy(cb, halo_binding_ref(0, 0, 8),
                               halo_buffer_ref(buffer, 0, 16)),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 1 (copy): source has 8 bytes, target 16");
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_copy(cb, halo_binding_ref(4, 0, 8),
                               halo_buffer_ref(buffer, 0, 8)),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 1 (copy): source: slot 4 out of range");
  // Two slots without a length: neither side's length is known.
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_copy(cb, halo_binding_ref(0, 0, HALO_WHOLE_BUFFER),
                               halo_binding_ref(1, 8, HALO_WHOLE_BUFFER)),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 1 (copy): source: an indirect reference (slot 0) needs an "
      "explicit length");

  // A buffer of another client means nothing in this session.
  halo_client_t *other = halo_test_connect(&fixture->daemon, 10000);
  halo_buffer_t *foreign = create_buffer(other, 64);
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_fill(
                              cb, halo_buffer_ref(foreign, 0, 64), &pattern, 4),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "command 1 (fill): target: buffer 0x");
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_fill(
                              cb, halo_buffer_ref(foreign, 0, 64), &pattern, 4),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "belongs to another client");
  halo_client_close(other);

  // None of the failed calls recorded anything: the next command is 1.
  HALO_TEST_ASSERT_OK(halo_command_buffer_copy(cb, halo_binding_ref(0, 0, 8),
                                               halo_buffer_ref(buffer, 0, 8)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_copy(
      cb, halo_buffer_ref(buffer, 8, HALO_WHOLE_BUFFER),
      halo_binding_ref(1, 0, 56)));
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_fill(cb, halo_binding_ref(5, 0, 4), &pattern, 4),
      HALO_STATUS_INVALID_ARGUMENT, "command 3 (fill): target: slot 5");
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_barrier(NULL),
                          HALO_STATUS_INVALID_ARGUMENT, "command_buffer");
  halo_command_buffer_release(cb);
  halo_buffer_release(buffer);
}

static void test_record_limits(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_command_buffer_t *cb =
      halo_test_begin(fixture->client, HALO_COMMAND_BUFFER_REUSABLE, 1);
  static char bytes[HALO_MAX_UPDATE_BYTES];
  // 16 updates of 64 KiB are exactly the inline limit.
  for (uint32_t i = 0; i < HALO_MAX_INLINE_BYTES / HALO_MAX_UPDATE_BYTES; ++i) {
    HALO_TEST_ASSERT_OK(halo_command_buffer_update(
        cb, bytes, sizeof(bytes), halo_binding_ref(0, 0, sizeof(bytes))));
  }
  uint8_t pattern = 1;
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_fill(cb, halo_binding_ref(0, 0, 4), &pattern, 1),
      HALO_STATUS_RESOURCE_EXHAUSTED,
      "command 16 (fill): 1 inline bytes would bring the recording to "
      "1048577, over the limit of 1048576");
  halo_command_buffer_release(cb);

  cb = halo_test_begin(fixture->client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  for (uint32_t i = 0; i < HALO_MAX_COMMANDS; ++i) {
    halo_status_t status = halo_command_buffer_barrier(cb);
    if (status) HALO_TEST_ASSERT_OK(status);
  }
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_barrier(cb), HALO_STATUS_RESOURCE_EXHAUSTED,
      "command 65536 (barrier): a recording holds at most 65536 "
      "commands");
  halo_command_buffer_release(cb);
}

static void test_dispatch_errors(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_executable_t *executable = load_kernels(fixture->client);
  halo_buffer_t *buffer = create_buffer(fixture->client, 64);
  halo_command_buffer_t *cb =
      halo_test_begin(fixture->client, HALO_COMMAND_BUFFER_REUSABLE, 4);
  uint32_t n = 16;
  halo_dispatch_arg_t args[HALO_MAX_DISPATCH_ARGS + 1] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(0, 0, 64), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(buffer, 0, 64), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(9, 0, 64), NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
  };
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "add",
      .grid = {1, 1, 1},
      .block = {16, 1, 1},
      .args = args,
      .arg_count = 4,
  };
  for (int i = 0; i < 3; ++i)
    HALO_TEST_ASSERT_OK(halo_command_buffer_barrier(cb));
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_dispatch(cb, &params), HALO_STATUS_INVALID_ARGUMENT,
      "command 3 (dispatch): argument 2: slot 9 out of range "
      "(binding capacity 4)");
  args[2].ref = halo_binding_ref(2, 0, 64);

  // A zero grid is a no-op (test_zero_grid_dispatch_is_a_noop); a zero
  // block is an error.
  params.block[2] = 0;
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch(cb, &params),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "command 3 (dispatch): block[2] is 0");
  params.block[2] = 1;

  params.entry = NULL;
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch(cb, &params),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "command 3 (dispatch): entry is NULL");
  params.entry = "add";
  params.executable = NULL;
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch(cb, &params),
                          HALO_STATUS_INVALID_ARGUMENT, "executable is NULL");
  params.executable = executable;
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch(cb, NULL),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "command 3 (dispatch): params is NULL");

  params.arg_count = HALO_MAX_DISPATCH_ARGS + 1;
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch(cb, &params),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "65 arguments exceed the limit of 64");
  params.arg_count = 4;
  args[3].size = 0;
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch(cb, &params),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "argument 3: constant of 0 bytes (1 .. 4096)");
  args[3].size = HALO_MAX_CONSTANT_BYTES + 1;
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch(cb, &params),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "argument 3: constant of 4097 bytes");
  args[3].size = sizeof(n);
  args[3].data = NULL;
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch(cb, &params),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "argument 3: constant data is NULL");
  args[3].data = &n;
  args[1].kind = (halo_dispatch_arg_kind_t)7;
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_dispatch(cb, &params), HALO_STATUS_INVALID_ARGUMENT,
      "argument 1: kind 7 is not a halo_dispatch_arg_kind_t");
  args[1].kind = HALO_DISPATCH_ARG_BUFFER;
  args[1].ref = halo_buffer_ref(buffer, 65, 0);
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_dispatch(cb, &params), HALO_STATUS_OUT_OF_RANGE,
      "command 3 (dispatch): argument 1: range [65, +0) does not "
      "fit buffer");
  args[1].ref = halo_buffer_ref(buffer, 0, HALO_WHOLE_BUFFER);

  // dispatch_indirect: the count is exactly three uint32_t, 4-aligned.
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_dispatch_indirect(cb, &params,
                                            halo_buffer_ref(buffer, 0, 8)),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 3 (dispatch_indirect): workgroup_count: 8 bytes "
      "referenced, it must be exactly 12");
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch_indirect(
                              cb, &params, halo_buffer_ref(buffer, 2, 12)),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "workgroup_count: offset 2 is not a multiple of 4");
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch_indirect(
                              cb, &params, halo_buffer_ref(buffer, 60, 12)),
                          HALO_STATUS_OUT_OF_RANGE,
                          "workgroup_count: range [60, +12)");

  // The corrected dispatch records (grid of an indirect one is not read).
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  params.grid[0] = 0;
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch_indirect(
      cb, &params, halo_buffer_ref(buffer, 0, HALO_WHOLE_BUFFER)));
  params.grid[0] = 1;

  // A binding table argument needs a binding table.
  halo_command_buffer_t *no_table =
      halo_test_begin(fixture->client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  halo_dispatch_arg_t table_args[2] = {
      {HALO_DISPATCH_ARG_BINDING_TABLE, {0}, NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
  };
  halo_dispatch_params_t table_params = params;
  table_params.entry = "add_table";
  table_params.args = table_args;
  table_params.arg_count = 2;
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_dispatch(no_table, &table_params),
      HALO_STATUS_INVALID_ARGUMENT,
      "command 0 (dispatch): argument 0: BINDING_TABLE with a "
      "binding capacity of 0");
  halo_command_buffer_release(no_table);

  // An executable of another client.
  halo_client_t *other = halo_test_connect(&fixture->daemon, 10000);
  halo_executable_t *foreign = load_kernels(other);
  // Same bytes: one executable in the daemon, one content hash.
  assert_string_equal(halo_executable_content_hash(foreign),
                      halo_executable_content_hash(executable));
  assert_int_equal(strlen(halo_executable_content_hash(executable)), 64);
  params.executable = foreign;
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch(cb, &params),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "command 5 (dispatch): executable 0x");
  halo_client_close(other);

  halo_command_buffer_release(cb);
  halo_buffer_release(buffer);
  halo_executable_release(executable);
}

static void test_executable_from_file_errors(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_executable_t *executable = (halo_executable_t *)1;
  HALO_TEST_EXPECT_STATUS(
      halo_executable_create_from_file(fixture->client, 0, "/tmp/kernels.weird",
                                       0, &executable),
      HALO_STATUS_INVALID_ARGUMENT,
      "cannot tell the format of /tmp/kernels.weird");
  assert_null(executable);
  HALO_TEST_EXPECT_STATUS(
      halo_executable_create_from_file(
          fixture->client, 0, "/nonexistent/dir/kernels.so", 0, &executable),
      HALO_STATUS_NOT_FOUND,
      "opening /nonexistent/dir/kernels.so: No such file");
  // A directory opens but does not read.
  halo_status_t status = halo_executable_create_from_file(
      fixture->client, 0, "/tmp", HALO_EXECUTABLE_FORMAT_ELF, &executable);
  assert_non_null(status);
  if (!strstr(halo_status_message(status), "reading /tmp: Is a directory")) {
    print_error("from_file(/tmp): %s\n", halo_status_message(status));
    fail();
  }
  halo_status_free(status);
  halo_executable_params_t params = {.format = HALO_EXECUTABLE_FORMAT_ELF};
  HALO_TEST_EXPECT_STATUS(
      halo_executable_create(fixture->client, 0, &params, &executable),
      HALO_STATUS_INVALID_ARGUMENT, "an executable needs data");
  params.data =
      "not an ELF file, but long enough for the header of one. "
      "not an ELF file, but long enough for the header of one.";
  params.size = strlen(params.data);
  if (halo_test_driver_is("cuda")) {
    // A GPU takes no ELF; bytes that are not PTX do not load.
    HALO_TEST_EXPECT_STATUS(
        halo_executable_create(fixture->client, 0, &params, &executable),
        HALO_STATUS_UNIMPLEMENTED, "cannot load ELF");
    params.format = HALO_EXECUTABLE_FORMAT_PTX;
    HALO_TEST_EXPECT_STATUS(
        halo_executable_create(fixture->client, 0, &params, &executable),
        HALO_STATUS_INVALID_ARGUMENT, NULL);
    assert_null(executable);
  }
  HALO_TEST_LOCAL_ONLY("the ELF loader's message for bytes that are not ELF");
  // Bytes that are not a shared object: the loader's message comes back.
  HALO_TEST_EXPECT_STATUS(
      halo_executable_create(fixture->client, 0, &params, &executable),
      HALO_STATUS_INVALID_ARGUMENT, "not an ELF file (bad magic");
  assert_null(executable);
}

// ---------------------------------------------------------------- daemon
// checks

static void test_daemon_validation_errors(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_executable_t *executable = load_kernels(fixture->client);
  uint32_t n = 4;
  halo_dispatch_arg_t args[4] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(0, 0, 16), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(1, 0, 16), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(2, 0, 16), NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
  };
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "no_such_entry",
      .grid = {1, 1, 1},
      .block = {4, 1, 1},
      .args = args,
      .arg_count = 4,
  };
  // An unknown entry point: only the daemon can tell.
  halo_command_buffer_t *cb =
      halo_test_begin(fixture->client, HALO_COMMAND_BUFFER_REUSABLE, 3);
  HALO_TEST_ASSERT_OK(halo_command_buffer_barrier(cb));
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  halo_status_t status = halo_command_buffer_end(cb);
  assert_non_null(status);
  if (!strstr(halo_status_message(status), "command 1 (dispatch)") ||
      !strstr(halo_status_message(status), "no_such_entry")) {
    print_error("end: %s\n", halo_status_message(status));
    fail();
  }
  halo_status_free(status);
  // A failed end leaves nothing to record into, end or execute.
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_barrier(cb),
                          HALO_STATUS_FAILED_PRECONDITION,
                          "command 2 (barrier): the command buffer was ended");
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_end(cb),
                          HALO_STATUS_FAILED_PRECONDITION, "already ended");
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, NULL, 0, NULL, 0, NULL, 0),
      HALO_STATUS_FAILED_PRECONDITION, "end() failed");
  assert_false(halo_command_buffer_memo_hit(cb));
  halo_command_buffer_release(cb);

  // A device the daemon does not have.
  halo_command_buffer_t *far = NULL;
  HALO_TEST_ASSERT_OK(halo_command_buffer_begin(
      fixture->client, 7, HALO_COMMAND_BUFFER_ONE_SHOT, 0, &far));
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_end(far),
                          HALO_STATUS_OUT_OF_RANGE, "device 7");
  halo_command_buffer_release(far);

  // A direct buffer released before end(): its handle is gone.
  halo_buffer_t *buffer = create_buffer(fixture->client, 16);
  cb = halo_test_begin(fixture->client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  uint8_t pattern = 7;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      cb, halo_buffer_ref(buffer, 0, 16), &pattern, 1));
  halo_buffer_release(buffer);
  status = halo_command_buffer_end(cb);
  assert_non_null(status);
  if (!strstr(halo_status_message(status), "command 0 (fill): target")) {
    print_error("end: %s\n", halo_status_message(status));
    fail();
  }
  halo_status_free(status);
  halo_command_buffer_release(cb);
  halo_executable_release(executable);
}

// ---------------------------------------------------------------- execution

static void test_execute_errors(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_buffer_t *small = create_buffer(fixture->client, 8);
  halo_buffer_t *large = create_buffer(fixture->client, 64);
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(fixture->client, 0, 0, &semaphore));
  // Slot 0 needs 32 bytes; slot 1 is unused.
  halo_command_buffer_t *cb =
      halo_test_begin(fixture->client, HALO_COMMAND_BUFFER_ONE_SHOT, 2);
  uint32_t pattern = 0xabababab;
  HALO_TEST_ASSERT_OK(
      halo_command_buffer_fill(cb, halo_binding_ref(0, 16, 16), &pattern, 4));
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, NULL, 0, NULL, 0, NULL, 0),
      HALO_STATUS_FAILED_PRECONDITION, "still recording");
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_barrier(cb),
                          HALO_STATUS_FAILED_PRECONDITION,
                          "command 1 (barrier): the command buffer was ended");
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_end(cb),
                          HALO_STATUS_FAILED_PRECONDITION, "already ended");

  halo_binding_t bindings[3] = {
      {large, 0, HALO_WHOLE_BUFFER}, {NULL, 0, 0}, {NULL, 0, 0}};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 3, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT,
      "3 bindings exceed the command buffer's binding capacity 2");
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, NULL, 1, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT, "bindings is NULL");
  bindings[1].offset = 8;
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 2, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT, "bindings[1]: buffer is NULL but offset 8");
  bindings[1].offset = 0;
  bindings[0] = (halo_binding_t){large, 32, 64};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 2, NULL, 0, NULL, 0),
      HALO_STATUS_OUT_OF_RANGE,
      "bindings[0]: range [32, +64) does not fit buffer");
  // To the end of the buffer from past its end: the offset is named, not
  // HALO_WHOLE_BUFFER's value as a length.
  bindings[0] = (halo_binding_t){large, 128, HALO_WHOLE_BUFFER};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 2, NULL, 0, NULL, 0),
      HALO_STATUS_OUT_OF_RANGE,
      "bindings[0]: offset 128 is past the end of buffer 0x");
  // Missing or too small for what the recording needs: the daemon says.
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, NULL, 0, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT,
      "binding 0: missing, but the command buffer uses slot 0 (at "
      "least 32 bytes)");
  bindings[0] = (halo_binding_t){NULL, 0, 0};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 2, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT, "binding 0: missing");
  bindings[0] = (halo_binding_t){small, 0, HALO_WHOLE_BUFFER};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 1, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT,
      "binding 0: 8 bytes bound, but the command buffer needs at "
      "least 32 in slot 0");

  bindings[0] = (halo_binding_t){large, 0, HALO_WHOLE_BUFFER};
  halo_semaphore_value_t signal = {NULL, 1};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 1, NULL, 0, &signal, 1),
      HALO_STATUS_INVALID_ARGUMENT, "signals[0]: semaphore is NULL");
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 1, NULL, 1, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT, "waits is NULL");
  signal = (halo_semaphore_value_t){semaphore, HALO_SEMAPHORE_MAX_VALUE + 1};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 1, NULL, 0, &signal, 1),
      HALO_STATUS_INVALID_ARGUMENT, "signals[0]: value");

  // Objects of another client.
  halo_client_t *other = halo_test_connect(&fixture->daemon, 10000);
  halo_semaphore_t *foreign_semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(other, 0, 0, &foreign_semaphore));
  halo_buffer_t *foreign_buffer = create_buffer(other, 64);
  halo_queue_t *foreign_queue = NULL;
  HALO_TEST_ASSERT_OK(halo_queue_create(other, 0, 0, &foreign_queue));
  halo_semaphore_value_t foreign_wait = {foreign_semaphore, 1};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 1, &foreign_wait, 1, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT, "waits[0]: semaphore 0x");
  bindings[0].buffer = foreign_buffer;
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 1, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT,
      "belongs to another client than the command buffer");
  bindings[0].buffer = large;
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(foreign_queue, cb, bindings, 1, NULL, 0, NULL, 0),
      HALO_STATUS_INVALID_ARGUMENT, "queue 0x");
  halo_client_close(other);

  // The valid submission runs; a ONE_SHOT command buffer runs once.
  signal = (halo_semaphore_value_t){semaphore, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, bindings, 2, NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(semaphore, 1, HALO_TEST_DEADLINE_MS * HALO_TEST_MS));
  const uint8_t *host = halo_buffer_host_pointer(large);
  for (int i = 0; i < 64; ++i) {
    assert_int_equal(host[i], i >= 16 && i < 32 ? 0xab : 0);
  }
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, bindings, 1, NULL, 0, NULL, 0),
      HALO_STATUS_FAILED_PRECONDITION, "ONE_SHOT");

  halo_command_buffer_release(cb);
  halo_semaphore_release(semaphore);
  halo_buffer_release(small);
  halo_buffer_release(large);
}

static void test_vector_add_with_three_binding_tables(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_executable_t *executable = load_kernels(client);
  uint32_t n = 1000;
  size_t bytes = n * sizeof(float);
  halo_command_buffer_t *cb =
      halo_test_record_vector_add(client, executable, &n);
  // An identical recording shares the prepared one.
  halo_command_buffer_t *again =
      halo_test_record_vector_add(client, executable, &n);
  assert_true(halo_command_buffer_memo_hit(again));
  halo_command_buffer_release(again);

  halo_queue_t *queue = NULL;
  HALO_TEST_ASSERT_OK(halo_queue_create(client, 0, 0, &queue));
  halo_semaphore_t *done = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  // Inputs with 16 floats of slack in front: offsets in the table.
  halo_buffer_t *a = create_buffer(client, bytes + 64);
  halo_buffer_t *b = create_buffer(client, bytes);
  halo_buffer_t *c[3];
  float *host_a = halo_buffer_host_pointer(a);
  float *host_b = halo_buffer_host_pointer(b);
  for (uint32_t i = 0; i < n + 16; ++i) host_a[i] = (float)i;
  for (uint32_t i = 0; i < n; ++i) host_b[i] = (float)(2 * i);
  for (int run = 0; run < 3; ++run) {
    c[run] = create_buffer(client, bytes);
    halo_binding_t bindings[3] = {
        {a, (uint64_t)run * 32, bytes},  // a + 8 floats per run
        {b, 0, HALO_WHOLE_BUFFER},
        {c[run], 0, HALO_WHOLE_BUFFER},
    };
    halo_semaphore_value_t signal = {done, (uint64_t)run + 1};
    // Alternate the default queue and a created one.
    HALO_TEST_ASSERT_OK(halo_queue_execute(run == 1 ? queue : NULL, cb,
                                           bindings, 3, NULL, 0, &signal, 1));
  }
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(done, 3, HALO_TEST_DEADLINE_MS * HALO_TEST_MS));
  for (int run = 0; run < 3; ++run) {
    const float *host_c = halo_buffer_host_pointer(c[run]);
    for (uint32_t i = 0; i < n; ++i) {
      float expected = (float)(i + 8 * run) + (float)(2 * i);
      if (host_c[i] != expected) {
        print_error("run %d: c[%u] = %f, expected %f\n", run, i, host_c[i],
                    expected);
        fail();
      }
    }
    halo_buffer_release(c[run]);
  }
  halo_buffer_release(a);
  halo_buffer_release(b);
  halo_semaphore_release(done);
  halo_queue_release(queue);
  halo_command_buffer_release(cb);
  halo_executable_release(executable);
}

static void test_binding_table_argument_and_offsets_compose(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_executable_t *executable = load_kernels(client);
  uint32_t n = 100;
  halo_buffer_t *buffer = create_buffer(client, 4096);
  float *host = halo_buffer_host_pointer(buffer);
  for (int i = 0; i < 1024; ++i) host[i] = (float)i;

  // add through a BUFFER argument: slot 0 at table offset 64 plus reference
  // offset 16 reads from byte 80 (float 20).
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 3);
  halo_dispatch_arg_t args[4] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(0, 16, 400), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(1, 0, 400), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(2, 0, 400), NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
  };
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "add",
      .grid = {4, 1, 1},
      .block = {32, 1, 1},
      .args = args,
      .arg_count = 4,
  };
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_barrier(cb));
  // Then the same through the binding table: c2 = a2 + b2, slots' offsets.
  halo_dispatch_arg_t table_args[2] = {
      {HALO_DISPATCH_ARG_BINDING_TABLE, {0}, NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
  };
  params.entry = "add_table";
  params.args = table_args;
  params.arg_count = 2;
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));

  halo_semaphore_t *done = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  // a at byte 64, b at byte 800 (float 200), c at byte 2048 (float 512).
  halo_binding_t bindings[3] = {
      {buffer, 64, 1024}, {buffer, 800, 400}, {buffer, 2048, 400}};
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, bindings, 3, NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(done, 1, HALO_TEST_DEADLINE_MS * HALO_TEST_MS));
  // The second dispatch overwrote c with table[0] (float 16 on) + b.
  for (uint32_t i = 0; i < n; ++i) {
    float expected = (float)(16 + i) + (float)(200 + i);
    if (host[512 + i] != expected) {
      print_error("c[%u] = %f, expected %f\n", i, host[512 + i], expected);
      fail();
    }
  }
  // Run only the first dispatch's arithmetic again to see the composed
  // reference offset: a fresh ONE_SHOT recording of it alone.
  halo_command_buffer_t *first =
      halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 3);
  params.entry = "add";
  params.args = args;
  params.arg_count = 4;
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(first, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(first));
  signal.value = 2;
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, first, bindings, 3, NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(done, 2, HALO_TEST_DEADLINE_MS * HALO_TEST_MS));
  for (uint32_t i = 0; i < n; ++i) {
    float expected = (float)(20 + i) + (float)(200 + i);
    if (host[512 + i] != expected) {
      print_error("c[%u] = %f, expected %f\n", i, host[512 + i], expected);
      fail();
    }
  }
  halo_command_buffer_release(first);
  halo_command_buffer_release(cb);
  halo_semaphore_release(done);
  halo_buffer_release(buffer);
  halo_executable_release(executable);
}

static void test_fill_update_copy(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_buffer_t *direct = create_buffer(client, 64);
  halo_buffer_t *bound = create_buffer(client, 64);
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 1);
  uint16_t pattern16 = 0x1122;
  uint8_t pattern8 = 0x5a;
  const char text[] = "halo";
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      cb, halo_buffer_ref(direct, 2, 6), &pattern16, 2));
  HALO_TEST_ASSERT_OK(
      halo_command_buffer_fill(cb, halo_binding_ref(0, 3, 5), &pattern8, 1));
  HALO_TEST_ASSERT_OK(halo_command_buffer_update(
      cb, text, 4, halo_buffer_ref(direct, 11, HALO_WHOLE_BUFFER)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_barrier(cb));
  // Odd offsets and length; the source's WHOLE_BUFFER takes 9 bytes.
  HALO_TEST_ASSERT_OK(halo_command_buffer_copy(
      cb, halo_buffer_ref(direct, 1, HALO_WHOLE_BUFFER),
      halo_binding_ref(0, 33, 9)));
  // Neither side with a length: the slot takes the direct side's rest of
  // its buffer (16 bytes from 48).
  HALO_TEST_ASSERT_OK(
      halo_command_buffer_copy(cb, halo_binding_ref(0, 0, HALO_WHOLE_BUFFER),
                               halo_buffer_ref(direct, 48, HALO_WHOLE_BUFFER)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  halo_semaphore_t *done = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  halo_binding_t binding = {bound, 4, HALO_WHOLE_BUFFER};
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(done, 1, HALO_TEST_DEADLINE_MS * HALO_TEST_MS));
  uint8_t expected_direct[64] = {0};
  memcpy(expected_direct + 2, &pattern16, 2);
  memcpy(expected_direct + 4, &pattern16, 2);
  memcpy(expected_direct + 6, &pattern16, 2);
  memcpy(expected_direct + 11, text, 4);
  uint8_t expected_bound[64] = {0};
  memset(expected_bound + 4 + 3, 0x5a, 5);
  memcpy(expected_bound + 4 + 33, expected_direct + 1, 9);
  memcpy(expected_direct + 48, expected_bound + 4, 16);
  assert_memory_equal(halo_buffer_host_pointer(direct), expected_direct, 64);
  assert_memory_equal(halo_buffer_host_pointer(bound), expected_bound, 64);
  halo_semaphore_release(done);
  halo_command_buffer_release(cb);
  halo_buffer_release(direct);
  halo_buffer_release(bound);
}

// A direct dispatch with a 0 in its grid is checked like any other (errors
// at record and end(), its slots required at execution) and does nothing:
// the other commands run and the execution signals, also when the no-op is
// all the recording holds.
static void test_zero_grid_dispatch_is_a_noop(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_executable_t *executable = load_kernels(client);
  uint32_t n = 64;
  uint64_t bytes = n * sizeof(float);
  halo_buffer_t *a = create_buffer(client, bytes);
  halo_buffer_t *b = create_buffer(client, bytes);
  halo_buffer_t *c = create_buffer(client, bytes);
  halo_buffer_t *untouched = create_buffer(client, bytes);
  float *host_a = halo_buffer_host_pointer(a);
  float *host_b = halo_buffer_host_pointer(b);
  for (uint32_t i = 0; i < n; ++i) {
    host_a[i] = (float)i;
    host_b[i] = (float)(2 * i);
  }
  // The no-op writes through slot 0, its sibling to c directly.
  halo_dispatch_arg_t args[4] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(a, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(b, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(0, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
  };
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "add",
      .grid = {1, 0, 1},
      .block = {64, 1, 1},
      .args = args,
      .arg_count = 4,
  };
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 1);
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_barrier(cb));
  params.grid[1] = 1;
  args[2].ref = halo_buffer_ref(c, 0, bytes);
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  // Errors of a zero-grid dispatch are still reported at record.
  params.grid[0] = 0;
  args[2].ref = halo_binding_ref(3, 0, bytes);
  HALO_TEST_EXPECT_STATUS(
      halo_command_buffer_dispatch(cb, &params), HALO_STATUS_INVALID_ARGUMENT,
      "command 3 (dispatch): argument 2: slot 3 out of range (binding "
      "capacity 1)");
  args[2].ref = halo_buffer_ref(untouched, 0, bytes);
  params.block[0] = 0;
  HALO_TEST_EXPECT_STATUS(halo_command_buffer_dispatch(cb, &params),
                          HALO_STATUS_INVALID_ARGUMENT,
                          "command 3 (dispatch): block[0] is 0");
  params.block[0] = 64;
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));

  // The no-op's slot is required like any other.
  halo_semaphore_t *done = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, NULL, 0, NULL, 0, &signal, 1),
      HALO_STATUS_INVALID_ARGUMENT,
      "binding 0: missing, but the command buffer uses slot 0");
  halo_binding_t binding = {untouched, 0, HALO_WHOLE_BUFFER};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(done, 1, HALO_TEST_DEADLINE_MS * HALO_TEST_MS));
  const float *host_c = halo_buffer_host_pointer(c);
  const float *host_untouched = halo_buffer_host_pointer(untouched);
  for (uint32_t i = 0; i < n; ++i) {
    if (host_c[i] != (float)(3 * i) || host_untouched[i] != 0.0f) {
      print_error("c[%u] = %f (expected %f), untouched[%u] = %f\n", i,
                  host_c[i], (float)(3 * i), i, host_untouched[i]);
      fail();
    }
  }

  // A recording of nothing but a no-op executes and signals.
  halo_command_buffer_t *only =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 0);
  params.grid[0] = params.grid[1] = params.grid[2] = 0;
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(only, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(only));
  signal.value = 2;
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, only, NULL, 0, NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(done, 2, HALO_TEST_DEADLINE_MS * HALO_TEST_MS));
  for (uint32_t i = 0; i < n; ++i) assert_true(host_untouched[i] == 0.0f);
  // The same recording shares it; an empty one does not (it holds no
  // executable or buffer).
  halo_command_buffer_t *again =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 0);
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(again, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(again));
  assert_true(halo_command_buffer_memo_hit(again));
  halo_command_buffer_t *empty =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 0);
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(empty));
  assert_false(halo_command_buffer_memo_hit(empty));

  // Errors only the daemon finds are still reported at end().
  halo_command_buffer_t *unknown =
      halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  params.entry = "no_such_entry";
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(unknown, &params));
  halo_status_t status = halo_command_buffer_end(unknown);
  assert_non_null(status);
  if (!strstr(halo_status_message(status), "command 0 (dispatch)") ||
      !strstr(halo_status_message(status), "no_such_entry")) {
    print_error("end: %s\n", halo_status_message(status));
    fail();
  }
  halo_status_free(status);

  halo_command_buffer_release(unknown);
  halo_command_buffer_release(empty);
  halo_command_buffer_release(again);
  halo_command_buffer_release(only);
  halo_command_buffer_release(cb);
  halo_semaphore_release(done);
  halo_buffer_release(untouched);
  halo_buffer_release(c);
  halo_buffer_release(b);
  halo_buffer_release(a);
  halo_executable_release(executable);
}

// A recording of many dispatches of one entry asks the device worker for
// the entry once (its executable keeps what the worker found): each ask is
// a control call on halod's loop, so 4096 of them held every other session
// off the loop for the recording's whole validation.
static void test_dispatches_of_one_entry_ask_the_worker_once(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_executable_t *executable = load_kernels(client);
  uint32_t n = 64;
  uint64_t bytes = n * sizeof(float);
  halo_buffer_t *a = create_buffer(client, bytes);
  halo_buffer_t *b = create_buffer(client, bytes);
  halo_buffer_t *c = create_buffer(client, bytes);
  halo_dispatch_arg_t args[4] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(a, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(b, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(c, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
  };
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "add",
      .grid = {1, 1, 1},
      .block = {64, 1, 1},
      .args = args,
      .arg_count = 4,
  };
  const char *calls = "halo_worker_control_calls_total ";
  uint64_t before = halo_test_admin_metric(&fixture->daemon, calls);
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  for (int i = 0; i < 4096; ++i) {
    HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  }
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  uint64_t made = halo_test_admin_metric(&fixture->daemon, calls) - before;
  // The entry's lookup and the recording's preparation, not one a dispatch
  // (4097 without the executable's entries).
  print_message("control calls for a recording of 4096 dispatches: %llu\n",
                (unsigned long long)made);
  assert_true(made >= 1);
  assert_true(made < 16);
  halo_command_buffer_release(cb);
  halo_buffer_release(a);
  halo_buffer_release(b);
  halo_buffer_release(c);
  halo_executable_release(executable);
}

// Submissions wait for their semaphores (even one signaled after the
// submission) and the command buffer may be released right after.
static void test_wait_before_signal_then_release(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_buffer_t *buffer = create_buffer(client, 16);
  halo_semaphore_t *go = NULL;
  halo_semaphore_t *done = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &go));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  uint32_t pattern = 0xdeadbeef;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      cb, halo_buffer_ref(buffer, 0, 16), &pattern, 4));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  halo_semaphore_value_t wait = {go, 1};
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, NULL, 0, &wait, 1, &signal, 1));
  halo_command_buffer_release(cb);
  HALO_TEST_EXPECT_STATUS(halo_semaphore_wait(done, 1, 20 * HALO_TEST_MS),
                          HALO_STATUS_DEADLINE_EXCEEDED, NULL);
  const uint32_t *host = halo_buffer_host_pointer(buffer);
  assert_int_equal(host[0], 0);
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(go, 1));
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(done, 1, HALO_TEST_DEADLINE_MS * HALO_TEST_MS));
  for (int i = 0; i < 4; ++i) assert_int_equal(host[i], 0xdeadbeef);
  halo_semaphore_release(go);
  halo_semaphore_release(done);
  halo_buffer_release(buffer);
}

// halo_client_close frees every kind of object the caller did not release.
static void test_close_frees_unreleased_objects(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 10000);
  halo_executable_t *executable = load_kernels(client);
  halo_queue_t *queue = NULL;
  HALO_TEST_ASSERT_OK(halo_queue_create(client, 0, 0, &queue));
  halo_command_buffer_t *recording =
      halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 1);
  HALO_TEST_ASSERT_OK(halo_command_buffer_barrier(recording));
  uint32_t n = 8;
  halo_command_buffer_t *ended =
      halo_test_record_vector_add(client, executable, &n);
  (void)ended;
  create_buffer(client, 128);
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
  uint32_t before = halo_test_admin_session_count(&fixture->daemon);
  halo_client_close(client);
  assert_true(HALO_TEST_POLL(
      halo_test_admin_session_count(&fixture->daemon) == before - 1,
      HALO_TEST_DEADLINE_MS));
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
  const struct CMUnitTest tests[] = {
#define TEST(name)                                               \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
      TEST(test_begin_checks_flags_and_capacity),
      TEST(test_record_errors_name_command_and_argument),
      TEST(test_record_limits),
      TEST(test_dispatch_errors),
      TEST(test_executable_from_file_errors),
      TEST(test_daemon_validation_errors),
      TEST(test_execute_errors),
      TEST(test_vector_add_with_three_binding_tables),
      TEST(test_binding_table_argument_and_offsets_compose),
      TEST(test_fill_update_copy),
      TEST(test_zero_grid_dispatch_is_a_noop),
      TEST(test_dispatches_of_one_entry_ask_the_worker_once),
      TEST(test_wait_before_signal_then_release),
      TEST(test_close_frees_unreleased_objects),
#undef TEST
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
