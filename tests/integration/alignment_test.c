// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The alignment of kernel buffer arguments (halo.h,
// HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS): a binding whose address a
// dispatch passes to a kernel must be 16-byte aligned, refused at execute
// with INVALID_ARGUMENT naming the binding, its slot and offset; a direct
// or indirect reference at an unaligned offset is refused at end(); a
// BINDING_TABLE argument makes every bound slot a kernel argument; fills
// need only their pattern's alignment; a recording with
// UNALIGNED_BINDINGS takes any offset (and is not memoized together with
// the same commands recorded without it). Registered twice: over the
// submission ring (alignment_test) and over the socket
// (alignment_test_socket, HALO_RING=0): both reach the same validation.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/halo_test.h"

#define N 64u

typedef struct context_t {
  halo_client_t *client;
  halo_executable_t *executable;
  halo_buffer_t *a, *b, *c;  // N floats + 64 bytes of room each
  halo_semaphore_t *done;
  uint64_t value;
} context_t;

static void context_open(context_t *context, halo_test_fixture_t *fixture) {
  memset(context, 0, sizeof(*context));
  context->client = halo_test_connect(&fixture->daemon, 0);
  context->executable = halo_test_load_kernels(context->client);
  uint64_t size = N * sizeof(float) + 64;
  context->a = halo_test_create_buffer(context->client,
                                       HALO_MEMORY_HOST_VISIBLE, size, 0);
  context->b = halo_test_create_buffer(context->client,
                                       HALO_MEMORY_HOST_VISIBLE, size, 0);
  context->c = halo_test_create_buffer(context->client,
                                       HALO_MEMORY_HOST_VISIBLE, size, 0);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_create(context->client, 0, 0, &context->done));
}

static void context_close(context_t *context) {
  halo_semaphore_release(context->done);
  halo_buffer_release(context->a);
  halo_buffer_release(context->b);
  halo_buffer_release(context->c);
  halo_executable_release(context->executable);
  halo_client_close(context->client);
}

// a[i] = i, b[i] = 2i at byte |offset| of a and b; c cleared.
static void fill_inputs(context_t *context, uint64_t offset) {
  float *a = (float *)((char *)halo_buffer_host_pointer(context->a) + offset);
  float *b = (float *)((char *)halo_buffer_host_pointer(context->b) + offset);
  for (uint32_t i = 0; i < N; ++i) {
    a[i] = (float)i;
    b[i] = (float)(2 * i);
  }
  memset(halo_buffer_host_pointer(context->c), 0, N * sizeof(float) + 64);
}

static void check_sum(context_t *context, uint64_t offset) {
  const float *c =
      (const float *)((char *)halo_buffer_host_pointer(context->c) + offset);
  for (uint32_t i = 0; i < N; ++i) assert_true(c[i] == (float)(3 * i));
}

// Executes |cb| with a, b, c bound at |offset| (bytes) and waits for it.
static halo_status_t execute_at(context_t *context, halo_command_buffer_t *cb,
                                uint64_t offset) {
  uint64_t bytes = N * sizeof(float);
  halo_binding_t bindings[3] = {{context->a, offset, bytes},
                                {context->b, offset, bytes},
                                {context->c, offset, bytes}};
  halo_semaphore_value_t signal = {context->done, context->value + 1};
  halo_status_t status =
      halo_queue_execute(NULL, cb, bindings, 3, NULL, 0, &signal, 1);
  if (status) return status;
  ++context->value;
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(
      context->done, context->value, HALO_TEST_DEADLINE_MS * HALO_TEST_MS));
  return NULL;
}

// c = a + b through slots 0..2 with the `add` kernel, recorded with |flags|.
static halo_command_buffer_t *record_add(context_t *context, uint32_t flags) {
  static const uint32_t n = N;
  halo_command_buffer_t *cb = halo_test_begin(context->client, flags, 3);
  uint64_t bytes = N * sizeof(float);
  halo_dispatch_arg_t args[4] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(0, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(1, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(2, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
  };
  halo_dispatch_params_t params = {.executable = context->executable,
                                   .entry = "add",
                                   .grid = {1, 1, 1},
                                   .block = {N, 1, 1},
                                   .args = args,
                                   .arg_count = 4};
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  return cb;
}

static void test_unaligned_binding_refused_at_execute(void **state) {
  context_t context;
  context_open(&context, *state);
  halo_command_buffer_t *cb =
      record_add(&context, HALO_COMMAND_BUFFER_REUSABLE);
  // Aligned offsets run.
  fill_inputs(&context, 0);
  HALO_TEST_ASSERT_OK(execute_at(&context, cb, 0));
  check_sum(&context, 0);
  fill_inputs(&context, 16);
  HALO_TEST_ASSERT_OK(execute_at(&context, cb, 16));
  check_sum(&context, 16);
  // Offsets 4 and 8 are refused, naming the binding, slot and offset.
  const char *parts4[] = {"binding 0",
                          "offset 4",
                          "slot 0",
                          "16-byte",
                          "HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS",
                          NULL};
  halo_test_expect_status_all(execute_at(&context, cb, 4),
                              HALO_STATUS_INVALID_ARGUMENT, parts4,
                              "an execute at offset 4");
  const char *parts8[] = {"binding 0", "offset 8", NULL};
  halo_test_expect_status_all(execute_at(&context, cb, 8),
                              HALO_STATUS_INVALID_ARGUMENT, parts8,
                              "an execute at offset 8");
  // Nothing ran: the semaphore is where it was and the session serves on.
  uint64_t value = 0;
  HALO_TEST_ASSERT_OK(halo_semaphore_query(context.done, &value));
  assert_int_equal(value, context.value);
  HALO_TEST_ASSERT_OK(execute_at(&context, cb, 32));
  halo_command_buffer_release(cb);
  context_close(&context);
}

static void test_unaligned_bindings_flag_allows_them(void **state) {
  context_t context;
  context_open(&context, *state);
  halo_command_buffer_t *aligned =
      record_add(&context, HALO_COMMAND_BUFFER_REUSABLE);
  halo_command_buffer_t *cb =
      record_add(&context, HALO_COMMAND_BUFFER_REUSABLE |
                               HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS);
  // The same commands under another rule: not the same memo entry.
  assert_false(halo_command_buffer_memo_hit(cb));
  fill_inputs(&context, 4);
  HALO_TEST_ASSERT_OK(execute_at(&context, cb, 4));
  check_sum(&context, 4);
  // A second recording with the flag shares the first.
  halo_command_buffer_t *again =
      record_add(&context, HALO_COMMAND_BUFFER_REUSABLE |
                               HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS);
  assert_true(halo_command_buffer_memo_hit(again));
  halo_command_buffer_release(again);
  halo_command_buffer_release(cb);
  halo_command_buffer_release(aligned);
  // A flag besides it is still refused.
  halo_command_buffer_t *bad = NULL;
  HALO_TEST_ASSERT_CODE(
      halo_command_buffer_begin(context.client, 0, 8, 0, &bad),
      HALO_STATUS_INVALID_ARGUMENT);
  context_close(&context);
}

// References recorded at an unaligned offset fail at end().
static void test_unaligned_references_refused_at_end(void **state) {
  context_t context;
  context_open(&context, *state);
  static const uint32_t n = N;
  uint64_t bytes = N * sizeof(float);
  const uint32_t flags[2] = {
      HALO_COMMAND_BUFFER_ONE_SHOT,
      HALO_COMMAND_BUFFER_ONE_SHOT | HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS};
  for (int direct = 0; direct < 2; ++direct) {
    for (int f = 0; f < 2; ++f) {
      halo_command_buffer_t *cb = halo_test_begin(context.client, flags[f], 3);
      halo_dispatch_arg_t args[4] = {
          {HALO_DISPATCH_ARG_BUFFER,
           direct ? halo_buffer_ref(context.a, 4, bytes)
                  : halo_binding_ref(0, 4, bytes),
           NULL, 0},
          {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(1, 0, bytes), NULL, 0},
          {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(2, 0, bytes), NULL, 0},
          {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
      };
      halo_dispatch_params_t params = {.executable = context.executable,
                                       .entry = "add",
                                       .grid = {1, 1, 1},
                                       .block = {N, 1, 1},
                                       .args = args,
                                       .arg_count = 4};
      halo_status_t status = halo_command_buffer_dispatch(cb, &params);
      if (!status) status = halo_command_buffer_end(cb);
      if (f == 0) {
        const char *parts[] = {"command 0 (dispatch)", "argument 0", "offset 4",
                               "16-byte", NULL};
        halo_test_expect_status_all(status, HALO_STATUS_INVALID_ARGUMENT, parts,
                                    "a direct reference at offset 4");
      } else {
        HALO_TEST_ASSERT_OK(status);
      }
      halo_command_buffer_release(cb);
    }
  }
  context_close(&context);
}

// A BINDING_TABLE argument hands the kernel every slot's address.
static void test_binding_table_argument_checks_every_slot(void **state) {
  context_t context;
  context_open(&context, *state);
  static const uint32_t n = N;
  for (int unaligned = 0; unaligned < 2; ++unaligned) {
    uint32_t flags = HALO_COMMAND_BUFFER_REUSABLE |
                     (unaligned ? HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS : 0);
    halo_command_buffer_t *cb = halo_test_begin(context.client, flags, 3);
    halo_dispatch_arg_t args[2] = {
        {HALO_DISPATCH_ARG_BINDING_TABLE, {0}, NULL, 0},
        {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
    };
    halo_dispatch_params_t params = {.executable = context.executable,
                                     .entry = "add_table",
                                     .grid = {1, 1, 1},
                                     .block = {N, 1, 1},
                                     .args = args,
                                     .arg_count = 2};
    HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
    HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
    fill_inputs(&context, 0);
    HALO_TEST_ASSERT_OK(execute_at(&context, cb, 0));
    check_sum(&context, 0);
    fill_inputs(&context, 4);
    if (unaligned) {
      HALO_TEST_ASSERT_OK(execute_at(&context, cb, 4));
      check_sum(&context, 4);
    } else {
      const char *parts[] = {"binding 0", "offset 4", "slot 0", NULL};
      halo_test_expect_status_all(execute_at(&context, cb, 4),
                                  HALO_STATUS_INVALID_ARGUMENT, parts,
                                  "a table-bound slot at offset 4");
    }
    halo_command_buffer_release(cb);
  }
  context_close(&context);
}

// Fills, copies and updates are not kernel arguments: their own element
// alignment is all they need.
static void test_fill_needs_only_its_pattern_alignment(void **state) {
  context_t context;
  context_open(&context, *state);
  halo_command_buffer_t *cb =
      halo_test_begin(context.client, HALO_COMMAND_BUFFER_REUSABLE, 1);
  uint32_t pattern = 0x01020304u;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(cb, halo_binding_ref(0, 0, 8),
                                               &pattern, sizeof(pattern)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  memset(halo_buffer_host_pointer(context.a), 0, 64);
  halo_binding_t binding = {context.a, 4, 8};
  halo_semaphore_value_t signal = {context.done, context.value + 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, &signal, 1));
  ++context.value;
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(
      context.done, context.value, HALO_TEST_DEADLINE_MS * HALO_TEST_MS));
  const uint32_t *words = halo_buffer_host_pointer(context.a);
  assert_int_equal(words[0], 0);
  assert_int_equal(words[1], pattern);
  assert_int_equal(words[2], pattern);
  assert_int_equal(words[3], 0);
  halo_command_buffer_release(cb);
  context_close(&context);
}

int main(void) {
  halo_test_require_driver();
  const struct CMUnitTest tests[] = {
#define TEST(name)                                               \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
      TEST(test_unaligned_binding_refused_at_execute),
      TEST(test_unaligned_bindings_flag_allows_them),
      TEST(test_unaligned_references_refused_at_end),
      TEST(test_binding_table_argument_checks_every_slot),
      TEST(test_fill_needs_only_its_pattern_alignment),
#undef TEST
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
