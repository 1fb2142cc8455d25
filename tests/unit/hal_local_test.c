// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the local (CPU) driver through the HAL interfaces: ELF
// executables loaded from memfds, command buffers prepared from hand-built
// recordings, and executions on queues over the worker pool (fill, copy,
// update, dispatch with BUFFER / CONSTANT / BINDING_TABLE arguments,
// dispatch_indirect), each completion observed exactly once.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/device.h"
#include "hal/local/local_device.h"
#include "hal/registry.h"

//===----------------------------------------------------------------------===//
// Fixture: one device and the test kernels, shared by every test
//===----------------------------------------------------------------------===//

typedef struct fixture_t {
  halo_hal_device_t *device;
  void *kernels;  // bytes of test_kernels_a.so
  uint64_t kernels_size;
  halo_hal_executable_t *executable;
} fixture_t;

static fixture_t fixture;

static void *read_file(const char *path, uint64_t *out_size) {
  FILE *file = fopen(path, "rb");
  if (!file) fail_msg("cannot open %s", path);
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  void *data = malloc((size_t)size);
  assert_non_null(data);
  assert_int_equal(fread(data, 1, (size_t)size, file), (size_t)size);
  fclose(file);
  *out_size = (uint64_t)size;
  return data;
}

static void expect_ok(halo_status_t status) {
  if (status) {
    fail_msg("%s: %s", halo_status_code_name(halo_status_code(status)),
             halo_status_message(status));
  }
}

static halo_hal_executable_t *load(const void *data, uint64_t size) {
  halo_hal_executable_params_t params = {
      .format = HALO_HAL_EXECUTABLE_FORMAT_ELF, .data = data, .size = size};
  halo_hal_executable_t *executable = NULL;
  expect_ok(fixture.device->vtable->create_executable(fixture.device, &params,
                                                      &executable));
  return executable;
}

static uint32_t entry(halo_hal_executable_t *executable, const char *name) {
  halo_hal_entry_info_t info;
  expect_ok(halo_hal_executable_lookup_entry(executable, name, &info));
  // Only `add` and `crash` declare their parameters
  // (HALO_LOCAL_KERNEL_PARAMS).
  if (strcmp(name, "add") == 0) {
    assert_int_equal(info.param_count, 4);
  } else if (strcmp(name, "crash") == 0) {
    assert_int_equal(info.param_count, 0);
  } else {
    assert_int_equal(info.param_count, HALO_HAL_PARAMS_UNKNOWN);
  }
  return info.ordinal;
}

static int group_setup(void **state) {
  (void)state;
  expect_ok(halo_hal_local_device_create(&fixture.device));
  fixture.kernels = read_file(HALO_TEST_KERNELS_A, &fixture.kernels_size);
  fixture.executable = load(fixture.kernels, fixture.kernels_size);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  halo_hal_executable_destroy(fixture.executable);
  fixture.device->vtable->destroy(fixture.device);
  free(fixture.kernels);
  return 0;
}

//===----------------------------------------------------------------------===//
// Recordings built by hand
//===----------------------------------------------------------------------===//

typedef struct builder_t {
  halo_hal_recording_t recording;
} builder_t;

static void builder_begin(builder_t *builder, uint32_t binding_capacity) {
  memset(builder, 0, sizeof(*builder));
  builder->recording.flags = HALO_HAL_RECORDING_REUSABLE;
  builder->recording.binding_capacity = binding_capacity;
}

static halo_hal_buffer_ref_t direct(const void *pointer, uint64_t length) {
  return (halo_hal_buffer_ref_t){.slot = HALO_HAL_SLOT_DIRECT,
                                 .address = (uint64_t)(uintptr_t)pointer,
                                 .length = length};
}

static halo_hal_buffer_ref_t indirect(uint32_t slot, uint64_t offset,
                                      uint64_t length) {
  return (halo_hal_buffer_ref_t){
      .slot = slot, .offset = offset, .length = length};
}

static uint32_t add_data(builder_t *builder, const void *data, uint32_t size) {
  halo_hal_recording_t *recording = &builder->recording;
  recording->data = realloc(recording->data, recording->data_size + size);
  assert_non_null(recording->data);
  memcpy(recording->data + recording->data_size, data, size);
  uint32_t offset = recording->data_size;
  recording->data_size += size;
  return offset;
}

// Returns the index of a new zeroed command of |type|.
static uint32_t add_command(builder_t *builder, uint32_t type) {
  halo_hal_recording_t *recording = &builder->recording;
  recording->commands =
      realloc(recording->commands,
              (recording->command_count + 1) * sizeof(*recording->commands));
  assert_non_null(recording->commands);
  halo_hal_command_t *command = &recording->commands[recording->command_count];
  memset(command, 0, sizeof(*command));
  command->type = type;
  return recording->command_count++;
}

static void add_fill(builder_t *builder, halo_hal_buffer_ref_t target,
                     const void *pattern, uint32_t pattern_size) {
  uint32_t offset = add_data(builder, pattern, pattern_size);
  uint32_t index = add_command(builder, HALO_HAL_COMMAND_FILL);
  halo_hal_command_t *command = &builder->recording.commands[index];
  command->target = target;
  command->data_offset = offset;
  command->data_size = pattern_size;
}

static void add_copy(builder_t *builder, halo_hal_buffer_ref_t source,
                     halo_hal_buffer_ref_t target) {
  uint32_t index = add_command(builder, HALO_HAL_COMMAND_COPY);
  builder->recording.commands[index].source = source;
  builder->recording.commands[index].target = target;
}

static void add_update(builder_t *builder, halo_hal_buffer_ref_t target,
                       const void *data, uint32_t size) {
  uint32_t offset = add_data(builder, data, size);
  uint32_t index = add_command(builder, HALO_HAL_COMMAND_UPDATE);
  halo_hal_command_t *command = &builder->recording.commands[index];
  command->target = target;
  command->data_offset = offset;
  command->data_size = size;
}

// A dispatch of |name| from the fixture's executable; add arguments next.
static uint32_t add_dispatch(builder_t *builder, const char *name, uint32_t gx,
                             uint32_t gy, uint32_t gz, uint32_t block_x) {
  uint32_t ordinal = entry(fixture.executable, name);
  uint32_t index = add_command(builder, HALO_HAL_COMMAND_DISPATCH);
  halo_hal_command_t *command = &builder->recording.commands[index];
  command->executable = fixture.executable;
  command->entry_ordinal = ordinal;
  command->grid[0] = gx;
  command->grid[1] = gy;
  command->grid[2] = gz;
  command->block[0] = block_x;
  command->block[1] = 1;
  command->block[2] = 1;
  command->arg_first = builder->recording.arg_count;
  return index;
}

static halo_hal_dispatch_arg_t *add_arg(builder_t *builder, uint32_t command,
                                        uint32_t kind) {
  halo_hal_recording_t *recording = &builder->recording;
  recording->args = realloc(
      recording->args, (recording->arg_count + 1) * sizeof(*recording->args));
  assert_non_null(recording->args);
  halo_hal_dispatch_arg_t *arg = &recording->args[recording->arg_count++];
  memset(arg, 0, sizeof(*arg));
  arg->kind = kind;
  recording->commands[command].arg_count++;
  return arg;
}

static void arg_buffer(builder_t *builder, uint32_t command,
                       halo_hal_buffer_ref_t ref) {
  add_arg(builder, command, HALO_HAL_ARG_BUFFER)->ref = ref;
}

static void arg_constant(builder_t *builder, uint32_t command, const void *data,
                         uint32_t size) {
  // Appended before the argument: add_data may move recording->data only.
  uint32_t offset = add_data(builder, data, size);
  halo_hal_dispatch_arg_t *arg =
      add_arg(builder, command, HALO_HAL_ARG_CONSTANT);
  arg->data_offset = offset;
  arg->data_size = size;
}

static void arg_u32(builder_t *builder, uint32_t command, uint32_t value) {
  arg_constant(builder, command, &value, sizeof(value));
}

static void arg_table(builder_t *builder, uint32_t command) {
  add_arg(builder, command, HALO_HAL_ARG_BINDING_TABLE);
}

static halo_hal_command_buffer_t *prepare(builder_t *builder) {
  halo_hal_command_buffer_t *command_buffer = NULL;
  expect_ok(fixture.device->vtable->prepare_command_buffer(
      fixture.device, &builder->recording, &command_buffer));
  // Moved: the caller's recording is left empty.
  assert_null(builder->recording.commands);
  assert_int_equal(builder->recording.command_count, 0);
  return command_buffer;
}

//===----------------------------------------------------------------------===//
// Executions and their completions
//===----------------------------------------------------------------------===//

typedef struct waiter_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t completed;
} waiter_t;

typedef struct outcome_t {
  waiter_t *waiter;
  atomic_uint calls;
  halo_status_code_t code;
  char message[512];
} outcome_t;

static void waiter_initialize(waiter_t *waiter) {
  pthread_mutex_init(&waiter->mutex, NULL);
  pthread_cond_init(&waiter->cond, NULL);
  waiter->completed = 0;
}

static void waiter_deinitialize(waiter_t *waiter) {
  pthread_cond_destroy(&waiter->cond);
  pthread_mutex_destroy(&waiter->mutex);
}

static void waiter_wait(waiter_t *waiter, uint32_t count) {
  pthread_mutex_lock(&waiter->mutex);
  while (waiter->completed < count) {
    pthread_cond_wait(&waiter->cond, &waiter->mutex);
  }
  pthread_mutex_unlock(&waiter->mutex);
}

static void on_complete(void *user_data, halo_status_t status) {
  outcome_t *outcome = user_data;
  outcome->code = halo_status_code(status);
  snprintf(outcome->message, sizeof(outcome->message), "%s",
           halo_status_message(status));
  halo_status_free(status);
  atomic_fetch_add(&outcome->calls, 1);
  pthread_mutex_lock(&outcome->waiter->mutex);
  outcome->waiter->completed++;
  pthread_cond_broadcast(&outcome->waiter->cond);
  pthread_mutex_unlock(&outcome->waiter->mutex);
}

static void submit(halo_hal_queue_t *queue,
                   halo_hal_command_buffer_t *command_buffer,
                   const halo_hal_binding_t *bindings, uint32_t binding_count,
                   outcome_t *outcome) {
  halo_hal_execution_t execution = {
      .command_buffer = command_buffer,
      .bindings = bindings,
      .binding_count = binding_count,
      .completion = on_complete,
      .user_data = outcome,
  };
  expect_ok(halo_hal_queue_execute(queue, &execution));
}

static halo_hal_queue_t *create_queue(int32_t priority) {
  halo_hal_queue_t *queue = NULL;
  expect_ok(
      fixture.device->vtable->create_queue(fixture.device, priority, &queue));
  return queue;
}

// Executes once and waits; returns the outcome's code (message in |out|).
static halo_status_code_t run(halo_hal_command_buffer_t *command_buffer,
                              const halo_hal_binding_t *bindings,
                              uint32_t binding_count, char *out_message,
                              size_t message_size) {
  halo_hal_queue_t *queue = create_queue(0);
  waiter_t waiter;
  waiter_initialize(&waiter);
  outcome_t outcome = {.waiter = &waiter};
  submit(queue, command_buffer, bindings, binding_count, &outcome);
  waiter_wait(&waiter, 1);
  halo_hal_queue_destroy(queue);
  assert_int_equal(atomic_load(&outcome.calls), 1);
  waiter_deinitialize(&waiter);
  if (out_message) snprintf(out_message, message_size, "%s", outcome.message);
  return outcome.code;
}

static void run_ok(halo_hal_command_buffer_t *command_buffer,
                   const halo_hal_binding_t *bindings, uint32_t binding_count) {
  char message[512];
  halo_status_code_t code =
      run(command_buffer, bindings, binding_count, message, sizeof(message));
  if (code != HALO_STATUS_OK) {
    fail_msg("%s: %s", halo_status_code_name(code), message);
  }
}

static halo_hal_binding_t bind(const void *pointer, uint64_t length) {
  return (halo_hal_binding_t){.address = (uint64_t)(uintptr_t)pointer,
                              .length = length};
}

//===----------------------------------------------------------------------===//
// Executables
//===----------------------------------------------------------------------===//

static void test_bad_elf(void **state) {
  (void)state;
  uint8_t random_bytes[4096];
  srand(42);
  for (size_t i = 0; i < sizeof(random_bytes); ++i) {
    random_bytes[i] = (uint8_t)rand();
  }
  halo_hal_executable_params_t params = {
      .format = HALO_HAL_EXECUTABLE_FORMAT_ELF,
      .data = random_bytes,
      .size = sizeof(random_bytes)};
  halo_hal_executable_t *executable = (halo_hal_executable_t *)1;
  halo_status_t status = fixture.device->vtable->create_executable(
      fixture.device, &params, &executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "not an ELF file"));
  assert_null(executable);
  halo_status_free(status);

  // A valid header over a truncated object: the loader's own reason.
  params.data = fixture.kernels;
  params.size = 256;
  status = fixture.device->vtable->create_executable(fixture.device, &params,
                                                     &executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "dynamic loader"));
  assert_null(executable);
  halo_status_free(status);

  // Too short for a header at all.
  params.size = 10;
  status = fixture.device->vtable->create_executable(fixture.device, &params,
                                                     &executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(status);

  // A 32-bit class and a foreign machine are named as such.
  uint8_t *copy = malloc(fixture.kernels_size);
  assert_non_null(copy);
  memcpy(copy, fixture.kernels, fixture.kernels_size);
  params.data = copy;
  params.size = fixture.kernels_size;
  copy[4] = 1;  // ELFCLASS32
  status = fixture.device->vtable->create_executable(fixture.device, &params,
                                                     &executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "64-bit"));
  halo_status_free(status);
  copy[4] = 2;
  copy[18] ^= 0x55;  // e_machine
  status = fixture.device->vtable->create_executable(fixture.device, &params,
                                                     &executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "machine"));
  halo_status_free(status);
  free(copy);
}

static void test_other_formats_unimplemented(void **state) {
  (void)state;
  const char ptx[] = ".version 8.0\n";
  halo_hal_executable_params_t params = {
      .format = HALO_HAL_EXECUTABLE_FORMAT_PTX, .data = ptx, .size = 13};
  halo_hal_executable_t *executable = NULL;
  halo_status_t status = fixture.device->vtable->create_executable(
      fixture.device, &params, &executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNIMPLEMENTED);
  assert_non_null(strstr(halo_status_message(status), "PTX"));
  assert_non_null(strstr(halo_status_message(status), "ELF shared objects"));
  halo_status_free(status);
}

static void test_lookup_entry(void **state) {
  (void)state;
  halo_hal_entry_info_t info;
  halo_status_t status =
      halo_hal_executable_lookup_entry(fixture.executable, "no_such", &info);
  assert_int_equal(halo_status_code(status), HALO_STATUS_NOT_FOUND);
  assert_non_null(strstr(halo_status_message(status), "'no_such'"));
  halo_status_free(status);
  // A symbol of libc, reachable through the object's dependencies, is not
  // one of its entries.
  status =
      halo_hal_executable_lookup_entry(fixture.executable, "memcpy", &info);
  assert_int_equal(halo_status_code(status), HALO_STATUS_NOT_FOUND);
  halo_status_free(status);
  status = halo_hal_executable_lookup_entry(fixture.executable,
                                            "not_a_function", &info);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "not a function"));
  halo_status_free(status);
  // The same name, the same ordinal; another name, another one.
  uint32_t add = entry(fixture.executable, "add");
  uint32_t ids = entry(fixture.executable, "ids");
  assert_int_equal(entry(fixture.executable, "add"), add);
  assert_int_not_equal(add, ids);
  // `add` declares (8, 8, 8, 4): offsets as CUDA lays out scalars.
  expect_ok(halo_hal_executable_lookup_entry(fixture.executable, "add", &info));
  assert_int_equal(info.param_count, 4);
  const uint32_t sizes[4] = {8, 8, 8, 4}, offsets[4] = {0, 8, 16, 24};
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(info.param_sizes[i], sizes[i]);
    assert_int_equal(info.param_offsets[i], offsets[i]);
  }
  (void)entry(fixture.executable, "crash");
}

// Objects loaded one after the other, some destroyed in between, are each
// their own code: dlopen names (/proc/self/fd/N) must not collide, neither
// with a live object nor with one that was never unloaded (c: -z nodelete).
static void test_executables_are_distinct(void **state) {
  (void)state;
  uint64_t sizes[3] = {fixture.kernels_size, 0, 0};
  void *bytes[3] = {fixture.kernels, read_file(HALO_TEST_KERNELS_B, &sizes[1]),
                    read_file(HALO_TEST_KERNELS_C, &sizes[2])};
  uint32_t out = 0;
  for (int round = 0; round < 6; ++round) {
    // Rotate the load order, so that each object in turn gets the lowest
    // free descriptor, the one an earlier round's object was named after.
    halo_hal_executable_t *executables[3];
    for (int k = 0; k < 3; ++k) {
      int i = (k + round) % 3;
      executables[i] = load(bytes[i], sizes[i]);
    }
    for (int i = 0; i < 3; ++i) {
      builder_t builder;
      builder_begin(&builder, 0);
      halo_hal_entry_info_t info;
      expect_ok(
          halo_hal_executable_lookup_entry(executables[i], "which", &info));
      uint32_t index = add_command(&builder, HALO_HAL_COMMAND_DISPATCH);
      halo_hal_command_t *command = &builder.recording.commands[index];
      command->executable = executables[i];
      command->entry_ordinal = info.ordinal;
      command->grid[0] = command->grid[1] = command->grid[2] = 1;
      command->block[0] = command->block[1] = command->block[2] = 1;
      arg_buffer(&builder, index, direct(&out, sizeof(out)));
      halo_hal_command_buffer_t *command_buffer = prepare(&builder);
      out = 0;
      run_ok(command_buffer, NULL, 0);
      assert_int_equal(out, (uint32_t)(i + 1));
      halo_hal_command_buffer_destroy(command_buffer);
    }
    for (int k = 0; k < 3; ++k) {
      halo_hal_executable_destroy(executables[(k + 2 * round) % 3]);
    }
  }
  free(bytes[1]);
  free(bytes[2]);
}

//===----------------------------------------------------------------------===//
// Dispatches
//===----------------------------------------------------------------------===//

#define N 1000

static void test_vector_add_direct(void **state) {
  (void)state;
  float *a = malloc(N * sizeof(float));
  float *b = malloc(N * sizeof(float));
  float *c = calloc(N, sizeof(float));
  for (int i = 0; i < N; ++i) {
    a[i] = (float)i;
    b[i] = (float)(2 * i);
  }
  builder_t builder;
  builder_begin(&builder, 0);
  uint32_t d = add_dispatch(&builder, "add", (N + 63) / 64, 1, 1, 64);
  arg_buffer(&builder, d, direct(a, N * sizeof(float)));
  arg_buffer(&builder, d, direct(b, N * sizeof(float)));
  arg_buffer(&builder, d, direct(c, N * sizeof(float)));
  arg_u32(&builder, d, N);
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);
  run_ok(command_buffer, NULL, 0);
  for (int i = 0; i < N; ++i) assert_true(c[i] == (float)(3 * i));
  halo_hal_command_buffer_destroy(command_buffer);
  free(a);
  free(b);
  free(c);
}

// One command buffer, three binding tables; each binding's address carries
// an entry offset and each reference adds its own offset.
static void test_vector_add_bindings(void **state) {
  (void)state;
  enum { ENTRY_OFFSET = 32, REF_OFFSET = 16, PAD = ENTRY_OFFSET + REF_OFFSET };
  builder_t builder;
  builder_begin(&builder, 3);
  uint32_t d = add_dispatch(&builder, "add", (N + 127) / 128, 1, 1, 128);
  for (uint32_t slot = 0; slot < 3; ++slot) {
    arg_buffer(&builder, d, indirect(slot, REF_OFFSET, N * sizeof(float)));
  }
  arg_u32(&builder, d, N);
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);

  for (int round = 0; round < 3; ++round) {
    uint8_t *buffers[3];
    for (int k = 0; k < 3; ++k) {
      buffers[k] = calloc(1, PAD + N * sizeof(float));
    }
    float *a = (float *)(buffers[0] + PAD);
    float *b = (float *)(buffers[1] + PAD);
    float *c = (float *)(buffers[2] + PAD);
    for (int i = 0; i < N; ++i) {
      a[i] = (float)(i * (round + 1));
      b[i] = (float)round;
    }
    halo_hal_binding_t bindings[3];
    for (int k = 0; k < 3; ++k) {
      bindings[k] = bind(buffers[k] + ENTRY_OFFSET, REF_OFFSET + N * 4);
    }
    run_ok(command_buffer, bindings, 3);
    for (int i = 0; i < N; ++i) {
      assert_true(c[i] == (float)(i * (round + 1) + round));
    }
    // Nothing before the referenced range was touched.
    for (int i = 0; i < PAD; ++i) assert_int_equal(buffers[2][i], 0);
    for (int k = 0; k < 3; ++k) free(buffers[k]);
  }
  halo_hal_command_buffer_destroy(command_buffer);
}

static void test_binding_table_argument(void **state) {
  (void)state;
  float a[N], b[N], c[N];
  for (int i = 0; i < N; ++i) {
    a[i] = (float)i;
    b[i] = 0.5f;
    c[i] = 0;
  }
  uint64_t probe[5];
  memset(probe, 0xAB, sizeof(probe));
  builder_t builder;
  builder_begin(&builder, 5);
  uint32_t d = add_dispatch(&builder, "add_table", (N + 99) / 100, 1, 1, 100);
  arg_table(&builder, d);
  arg_u32(&builder, d, N);
  d = add_dispatch(&builder, "table_probe", 1, 1, 1, 1);
  arg_buffer(&builder, d, direct(probe, sizeof(probe)));
  arg_table(&builder, d);
  arg_u32(&builder, d, 5);
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);
  // Slot 3 is unbound: the table reads 0 there.
  halo_hal_binding_t bindings[5] = {
      bind(a, sizeof(a)), bind(b, sizeof(b)), bind(c, sizeof(c)), {0, 0},
      bind(probe, 8),
  };
  run_ok(command_buffer, bindings, 5);
  for (int i = 0; i < N; ++i) assert_true(c[i] == (float)i + 0.5f);
  for (int i = 0; i < 5; ++i) assert_int_equal(probe[i], bindings[i].address);
  halo_hal_command_buffer_destroy(command_buffer);
}

static void test_constants(void **state) {
  (void)state;
  uint64_t out[4] = {0};
  builder_t builder;
  builder_begin(&builder, 0);
  // A stray byte first, so that the constants sit at odd data offsets.
  add_data(&builder, "x", 1);
  uint32_t d = add_dispatch(&builder, "constants", 1, 1, 1, 1);
  arg_buffer(&builder, d, direct(out, sizeof(out)));
  uint8_t c0 = 0xC3;
  uint64_t c1 = 0x0123456789ABCDEFull;
  double c2 = 3.25;
  uint16_t c3 = 0xBEEF;
  arg_constant(&builder, d, &c0, sizeof(c0));
  arg_constant(&builder, d, &c1, sizeof(c1));
  arg_constant(&builder, d, &c2, sizeof(c2));
  arg_constant(&builder, d, &c3, sizeof(c3));
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);
  run_ok(command_buffer, NULL, 0);
  assert_int_equal(out[0], c0);
  assert_int_equal(out[1], c1);
  double d2;
  memcpy(&d2, &out[2], sizeof(d2));
  assert_true(d2 == c2);
  assert_int_equal(out[3], c3);
  halo_hal_command_buffer_destroy(command_buffer);
}

// Every workgroup of a 3-D grid runs exactly once, with its own shared
// memory, spread over the pool.
static void test_grid_and_shared_memory(void **state) {
  (void)state;
  enum { GX = 37, GY = 5, GZ = 3, TOTAL = GX * GY * GZ, SHARED = 4096 };
  uint32_t *ids = calloc(4 * TOTAL, sizeof(uint32_t));
  uint32_t counts[3] = {0};
  uint32_t *sums = calloc(TOTAL, sizeof(uint32_t));
  builder_t builder;
  builder_begin(&builder, 0);
  uint32_t d = add_dispatch(&builder, "ids", GX, GY, GZ, 1);
  arg_buffer(&builder, d, direct(ids, 16 * TOTAL));
  arg_buffer(&builder, d, direct(counts, sizeof(counts)));
  d = add_dispatch(&builder, "shared_sum", GX, GY, GZ, 1);
  builder.recording.commands[d].shared_memory_bytes = SHARED;
  arg_buffer(&builder, d, direct(sums, 4 * TOTAL));
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);
  for (int round = 1; round <= 2; ++round) {
    run_ok(command_buffer, NULL, 0);
    for (uint32_t z = 0, l = 0; z < GZ; ++z) {
      for (uint32_t y = 0; y < GY; ++y) {
        for (uint32_t x = 0; x < GX; ++x, ++l) {
          assert_int_equal(ids[4 * l + 0], x);
          assert_int_equal(ids[4 * l + 1], y);
          assert_int_equal(ids[4 * l + 2], z);
          assert_int_equal(ids[4 * l + 3], (uint32_t)round);
          uint32_t n = SHARED / 4;
          assert_int_equal(sums[l], l * n + n * (n - 1) / 2);
        }
      }
    }
    assert_int_equal(counts[0], GX);
    assert_int_equal(counts[1], GY);
    assert_int_equal(counts[2], GZ);
  }
  halo_hal_command_buffer_destroy(command_buffer);
  free(ids);
  free(sums);
}

// The counts are read when the command runs: an update earlier in the same
// execution sets them, and they reach the command through a binding with
// entry offset + reference offset.
static void test_dispatch_indirect(void **state) {
  (void)state;
  enum { MAX_GROUPS = 64 };
  uint32_t *ids = calloc(4 * MAX_GROUPS, sizeof(uint32_t));
  uint32_t seen[3] = {0};
  uint8_t count_buffer[64];
  memset(count_buffer, 0, sizeof(count_buffer));
  const uint32_t entry_offset = 8, ref_offset = 12;

  builder_t builder;
  builder_begin(&builder, 1);
  uint32_t counts[3] = {3, 2, 2};
  add_update(&builder, indirect(0, ref_offset, 12), counts, sizeof(counts));
  uint32_t d = add_dispatch(&builder, "ids", 0, 0, 0, 1);
  builder.recording.commands[d].type = HALO_HAL_COMMAND_DISPATCH_INDIRECT;
  builder.recording.commands[d].workgroup_count = indirect(0, ref_offset, 12);
  arg_buffer(&builder, d, direct(ids, 16 * MAX_GROUPS));
  arg_buffer(&builder, d, direct(seen, sizeof(seen)));
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);
  halo_hal_binding_t binding = bind(count_buffer + entry_offset, 32);
  run_ok(command_buffer, &binding, 1);
  uint32_t stored[3];
  memcpy(stored, count_buffer + entry_offset + ref_offset, sizeof(stored));
  assert_memory_equal(stored, counts, sizeof(counts));
  assert_int_equal(seen[0], 3);
  assert_int_equal(seen[1], 2);
  assert_int_equal(seen[2], 2);
  for (uint32_t l = 0; l < MAX_GROUPS; ++l) {
    assert_int_equal(ids[4 * l + 3], l < 12 ? 1u : 0u);
  }
  halo_hal_command_buffer_destroy(command_buffer);

  // Counts written by the host between executions; zero runs nothing; past
  // the limit fails with OUT_OF_RANGE naming the command.
  builder_begin(&builder, 1);
  d = add_dispatch(&builder, "ids", 0, 0, 0, 1);
  builder.recording.commands[d].type = HALO_HAL_COMMAND_DISPATCH_INDIRECT;
  builder.recording.commands[d].workgroup_count = indirect(0, 4, 12);
  arg_buffer(&builder, d, direct(ids, 16 * MAX_GROUPS));
  arg_buffer(&builder, d, direct(seen, sizeof(seen)));
  command_buffer = prepare(&builder);
  uint32_t words[4] = {0, 5, 1, 1};  // counts start at byte 4
  binding = bind(words, sizeof(words));
  memset(ids, 0, 16 * MAX_GROUPS);
  words[1] = 5;
  words[2] = 0;
  run_ok(command_buffer, &binding, 1);
  for (uint32_t l = 0; l < MAX_GROUPS; ++l) assert_int_equal(ids[4 * l + 3], 0);
  words[2] = 1;
  run_ok(command_buffer, &binding, 1);
  for (uint32_t l = 0; l < MAX_GROUPS; ++l) {
    assert_int_equal(ids[4 * l + 3], l < 5 ? 1u : 0u);
  }
  words[3] = HALO_HAL_LOCAL_MAX_INDIRECT_COUNT + 1;
  char message[512];
  assert_int_equal(run(command_buffer, &binding, 1, message, sizeof(message)),
                   HALO_STATUS_OUT_OF_RANGE);
  assert_non_null(strstr(message, "command 0 (dispatch_indirect)"));
  halo_hal_command_buffer_destroy(command_buffer);
  free(ids);
}

//===----------------------------------------------------------------------===//
// Transfers
//===----------------------------------------------------------------------===//

enum { BYTES = 512, BACKGROUND = 0xEE };

static void test_fill_patterns(void **state) {
  (void)state;
  uint8_t *buffer = malloc(BYTES);
  uint8_t *bound = malloc(BYTES);
  uint8_t expected[BYTES];
  memset(buffer, BACKGROUND, BYTES);
  memset(bound, BACKGROUND, BYTES);
  memset(expected, BACKGROUND, BYTES);
  const uint8_t p1 = 0x11;
  const uint8_t p2[2] = {0x21, 0x22};
  const uint8_t p4[4] = {0x41, 0x42, 0x43, 0x44};
  struct {
    const uint8_t *pattern;
    uint32_t size;
    uint32_t offset;
    uint32_t length;
  } fills[] = {
      {&p1, 1, 3, 5},   {p2, 2, 17, 6},    {p4, 4, 33, 12}, {p4, 4, 61, 200},
      {&p1, 1, 300, 1}, {p2, 2, 303, 130}, {p4, 4, 441, 4},
  };
  builder_t builder;
  builder_begin(&builder, 1);
  for (size_t i = 0; i < sizeof(fills) / sizeof(fills[0]); ++i) {
    add_fill(&builder, direct(buffer + fills[i].offset, fills[i].length),
             fills[i].pattern, fills[i].size);
    // The same through a binding (entry offset 2, reference offset added).
    add_fill(&builder, indirect(0, fills[i].offset - 2, fills[i].length),
             fills[i].pattern, fills[i].size);
    for (uint32_t k = 0; k < fills[i].length; ++k) {
      expected[fills[i].offset + k] = fills[i].pattern[k % fills[i].size];
    }
  }
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);
  halo_hal_binding_t binding = bind(bound + 2, BYTES - 2);
  run_ok(command_buffer, &binding, 1);
  assert_memory_equal(buffer, expected, BYTES);
  assert_memory_equal(bound, expected, BYTES);
  halo_hal_command_buffer_destroy(command_buffer);
  free(buffer);
  free(bound);
}

static void test_copy_and_update(void **state) {
  (void)state;
  uint8_t *source = malloc(BYTES);
  uint8_t *target = malloc(BYTES);
  uint8_t expected_source[BYTES], expected_target[BYTES];
  for (int i = 0; i < BYTES; ++i) source[i] = (uint8_t)(i * 7 + 1);
  memset(target, BACKGROUND, BYTES);
  memcpy(expected_source, source, BYTES);
  memcpy(expected_target, target, BYTES);

  builder_t builder;
  builder_begin(&builder, 2);
  // Direct, odd offset and length.
  add_copy(&builder, direct(source + 3, 13), direct(target + 50, 13));
  memcpy(expected_target + 50, expected_source + 3, 13);
  // Through bindings: slot 0 = source + 1, slot 1 = target + 5.
  add_copy(&builder, indirect(0, 100, 37), indirect(1, 200, 37));
  memcpy(expected_target + 205, expected_source + 101, 37);
  // Overlapping, within the source (memmove semantics).
  add_copy(&builder, direct(source + 5, 20), direct(source + 9, 20));
  memmove(expected_source + 9, expected_source + 5, 20);
  // Updates: odd offsets and lengths, direct and indirect.
  const uint8_t inline_bytes[7] = {1, 2, 3, 4, 5, 6, 7};
  add_update(&builder, direct(target + 301, 7), inline_bytes, 7);
  memcpy(expected_target + 301, inline_bytes, 7);
  add_update(&builder, indirect(1, 400, 3), inline_bytes + 2, 3);
  memcpy(expected_target + 405, inline_bytes + 2, 3);
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);
  halo_hal_binding_t bindings[2] = {bind(source + 1, BYTES - 1),
                                    bind(target + 5, BYTES - 5)};
  run_ok(command_buffer, bindings, 2);
  assert_memory_equal(source, expected_source, BYTES);
  assert_memory_equal(target, expected_target, BYTES);
  halo_hal_command_buffer_destroy(command_buffer);
  free(source);
  free(target);
}

//===----------------------------------------------------------------------===//
// Failures
//===----------------------------------------------------------------------===//

static void test_unbound_and_short_bindings_fail(void **state) {
  (void)state;
  uint8_t buffer[64];
  memset(buffer, 0, sizeof(buffer));
  const uint8_t pattern = 9;
  builder_t builder;
  builder_begin(&builder, 2);
  add_fill(&builder, direct(buffer, 8), &pattern, 1);
  add_fill(&builder, indirect(1, 0, 16), &pattern, 1);
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);
  char message[512];
  halo_hal_binding_t bindings[2] = {bind(buffer, 64), {0, 0}};
  assert_int_equal(run(command_buffer, bindings, 2, message, sizeof(message)),
                   HALO_STATUS_FAILED_PRECONDITION);
  assert_non_null(strstr(message, "command 1 (fill)"));
  assert_non_null(strstr(message, "slot 1 is unbound"));
  // Commands before the failure ran.
  assert_int_equal(buffer[7], 9);
  // Too few bindings given: the missing slot reads as unbound.
  assert_int_equal(run(command_buffer, bindings, 1, message, sizeof(message)),
                   HALO_STATUS_FAILED_PRECONDITION);
  // A binding shorter than the reference needs.
  bindings[1] = bind(buffer, 8);
  assert_int_equal(run(command_buffer, bindings, 2, message, sizeof(message)),
                   HALO_STATUS_OUT_OF_RANGE);
  assert_non_null(strstr(message, "command 1 (fill)"));
  halo_hal_command_buffer_destroy(command_buffer);
}

static void test_prepare_rejects(void **state) {
  (void)state;
  uint32_t out = 0;
  builder_t builder;
  builder_begin(&builder, 1);
  uint32_t d = add_dispatch(&builder, "which", 1, 1, 1, 1);
  arg_buffer(&builder, d, direct(&out, 4));
  builder.recording.commands[d].entry_ordinal = 1000;
  halo_hal_command_buffer_t *command_buffer = (halo_hal_command_buffer_t *)1;
  halo_status_t status = fixture.device->vtable->prepare_command_buffer(
      fixture.device, &builder.recording, &command_buffer);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "command 0"));
  assert_null(command_buffer);
  halo_status_free(status);
  // Left to the caller.
  assert_non_null(builder.recording.commands);
  assert_int_equal(builder.recording.command_count, 1);
  builder.recording.commands[d].entry_ordinal =
      entry(fixture.executable, "which");
  builder.recording.args[0].ref = indirect(5, 0, 4);  // capacity 1
  status = fixture.device->vtable->prepare_command_buffer(
      fixture.device, &builder.recording, &command_buffer);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "slot 5"));
  halo_status_free(status);
  halo_hal_recording_deinitialize(&builder.recording);
}

//===----------------------------------------------------------------------===//
// Concurrency
//===----------------------------------------------------------------------===//

// Many executions of one command buffer on two queues, each with its own
// binding table: every completion arrives exactly once, every result is
// right.
static void test_concurrent_executions(void **state) {
  (void)state;
  enum { EXECUTIONS = 400, LENGTH = 256 };
  builder_t builder;
  builder_begin(&builder, 3);
  uint32_t d = add_dispatch(&builder, "add", LENGTH / 32, 1, 1, 32);
  for (uint32_t slot = 0; slot < 3; ++slot) {
    arg_buffer(&builder, d, indirect(slot, 0, LENGTH * sizeof(float)));
  }
  arg_u32(&builder, d, LENGTH);
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);

  float *a = malloc(LENGTH * sizeof(float));
  for (int i = 0; i < LENGTH; ++i) a[i] = (float)i;
  float *b = malloc(EXECUTIONS * sizeof(float) * LENGTH);
  float *c = calloc(EXECUTIONS, sizeof(float) * LENGTH);
  halo_hal_binding_t(*bindings)[3] = malloc(EXECUTIONS * sizeof(*bindings));
  outcome_t *outcomes = calloc(EXECUTIONS, sizeof(*outcomes));
  waiter_t waiter;
  waiter_initialize(&waiter);
  halo_hal_queue_t *queues[2] = {create_queue(0), create_queue(1)};
  for (int e = 0; e < EXECUTIONS; ++e) {
    for (int i = 0; i < LENGTH; ++i) b[e * LENGTH + i] = (float)e;
    bindings[e][0] = bind(a, LENGTH * sizeof(float));
    bindings[e][1] = bind(b + e * LENGTH, LENGTH * sizeof(float));
    bindings[e][2] = bind(c + e * LENGTH, LENGTH * sizeof(float));
    outcomes[e].waiter = &waiter;
    submit(queues[e % 2], command_buffer, bindings[e], 3, &outcomes[e]);
  }
  waiter_wait(&waiter, EXECUTIONS);
  halo_hal_queue_destroy(queues[0]);
  halo_hal_queue_destroy(queues[1]);
  for (int e = 0; e < EXECUTIONS; ++e) {
    assert_int_equal(atomic_load(&outcomes[e].calls), 1);
    assert_int_equal(outcomes[e].code, HALO_STATUS_OK);
    for (int i = 0; i < LENGTH; ++i) {
      assert_true(c[e * LENGTH + i] == (float)(i + e));
    }
  }
  assert_int_equal(waiter.completed, EXECUTIONS);
  waiter_deinitialize(&waiter);
  halo_hal_command_buffer_destroy(command_buffer);
  free(a);
  free(b);
  free(c);
  free(bindings);
  free(outcomes);
}

// The workgroups of one dispatch run at the same time on the pool: two
// workgroups that each wait for the other both see the other arrive.
static void test_workgroups_run_in_parallel(void **state) {
  (void)state;
  uint32_t arrived = 0;
  uint32_t out[2] = {0, 0};
  builder_t builder;
  builder_begin(&builder, 0);
  uint32_t d = add_dispatch(&builder, "rendezvous", 2, 1, 1, 1);
  arg_buffer(&builder, d, direct(&arrived, sizeof(arrived)));
  arg_u32(&builder, d, 2);
  arg_buffer(&builder, d, direct(out, sizeof(out)));
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);
  run_ok(command_buffer, NULL, 0);
  assert_int_equal(out[0], 1);
  assert_int_equal(out[1], 1);
  halo_hal_command_buffer_destroy(command_buffer);
}

static void spin_until(const uint32_t *value, uint32_t at_least) {
  for (int i = 0; i < 100000; ++i) {
    if (__atomic_load_n(value, __ATOMIC_ACQUIRE) >= at_least) return;
    usleep(100);
  }
  fail_msg("timed out waiting for %u (at %u)", at_least,
           __atomic_load_n(value, __ATOMIC_ACQUIRE));
}

// With every worker held, work queued on a higher-priority queue runs
// before work queued earlier on a lower-priority one.
static void test_priority(void **state) {
  (void)state;
  // The pool has max(2, online CPUs) workers.
  uint32_t workers = fixture.device->info.multiprocessor_count;
  if (workers < 2) workers = 2;
  uint32_t started = 0;
  uint32_t *gates = calloc(workers, sizeof(uint32_t));
  builder_t builder;
  builder_begin(&builder, 1);
  uint32_t d = add_dispatch(&builder, "gate", 1, 1, 1, 1);
  arg_buffer(&builder, d, direct(&started, sizeof(started)));
  arg_buffer(&builder, d, indirect(0, 0, 0));
  halo_hal_command_buffer_t *gate = prepare(&builder);
  uint32_t sequence = 0;
  uint32_t low_order = UINT32_MAX, high_order = UINT32_MAX;
  builder_begin(&builder, 1);
  d = add_dispatch(&builder, "order", 1, 1, 1, 1);
  arg_buffer(&builder, d, direct(&sequence, sizeof(sequence)));
  arg_buffer(&builder, d, indirect(0, 0, 0));
  halo_hal_command_buffer_t *order = prepare(&builder);

  waiter_t waiter;
  waiter_initialize(&waiter);
  outcome_t *outcomes = calloc(workers + 2, sizeof(*outcomes));
  halo_hal_binding_t *bindings = calloc(workers + 2, sizeof(*bindings));
  halo_hal_queue_t *low = create_queue(0);
  halo_hal_queue_t *high = create_queue(5);
  for (uint32_t i = 0; i < workers; ++i) {
    bindings[i] = bind(&gates[i], sizeof(uint32_t));
    outcomes[i].waiter = &waiter;
    submit(low, gate, &bindings[i], 1, &outcomes[i]);
  }
  spin_until(&started, workers);
  // Low first, then high: FIFO would run low first.
  bindings[workers] = bind(&low_order, sizeof(uint32_t));
  outcomes[workers].waiter = &waiter;
  submit(low, order, &bindings[workers], 1, &outcomes[workers]);
  bindings[workers + 1] = bind(&high_order, sizeof(uint32_t));
  outcomes[workers + 1].waiter = &waiter;
  submit(high, order, &bindings[workers + 1], 1, &outcomes[workers + 1]);
  // One worker freed: it takes the high-priority execution.
  __atomic_store_n(&gates[0], 1, __ATOMIC_RELEASE);
  spin_until(&sequence, 1);
  for (uint32_t i = 1; i < workers; ++i) {
    __atomic_store_n(&gates[i], 1, __ATOMIC_RELEASE);
  }
  waiter_wait(&waiter, workers + 2);
  halo_hal_queue_destroy(low);
  halo_hal_queue_destroy(high);
  assert_int_equal(high_order, 0);
  assert_int_equal(low_order, 1);
  for (uint32_t i = 0; i < workers + 2; ++i) {
    assert_int_equal(atomic_load(&outcomes[i].calls), 1);
    assert_int_equal(outcomes[i].code, HALO_STATUS_OK);
  }
  waiter_deinitialize(&waiter);
  halo_hal_command_buffer_destroy(gate);
  halo_hal_command_buffer_destroy(order);
  free(gates);
  free(outcomes);
  free(bindings);
}

// Destroying a queue waits for its executions: every completion has run
// when destroy returns.
static void test_queue_destroy_waits(void **state) {
  (void)state;
  enum { EXECUTIONS = 6, GROUPS = 4 };
  uint32_t counter = 0;
  builder_t builder;
  builder_begin(&builder, 0);
  uint32_t d = add_dispatch(&builder, "sleepy", GROUPS, 1, 1, 1);
  arg_buffer(&builder, d, direct(&counter, sizeof(counter)));
  arg_u32(&builder, d, 20000);
  halo_hal_command_buffer_t *command_buffer = prepare(&builder);
  waiter_t waiter;
  waiter_initialize(&waiter);
  outcome_t outcomes[EXECUTIONS];
  memset(outcomes, 0, sizeof(outcomes));
  halo_hal_queue_t *queue = create_queue(0);
  for (int e = 0; e < EXECUTIONS; ++e) {
    outcomes[e].waiter = &waiter;
    submit(queue, command_buffer, NULL, 0, &outcomes[e]);
  }
  halo_hal_queue_destroy(queue);
  pthread_mutex_lock(&waiter.mutex);
  assert_int_equal(waiter.completed, EXECUTIONS);
  pthread_mutex_unlock(&waiter.mutex);
  for (int e = 0; e < EXECUTIONS; ++e) {
    assert_int_equal(atomic_load(&outcomes[e].calls), 1);
  }
  assert_int_equal(__atomic_load_n(&counter, __ATOMIC_RELAXED),
                   EXECUTIONS * GROUPS);
  waiter_deinitialize(&waiter);
  halo_hal_command_buffer_destroy(command_buffer);
}

// A device with work still queued on a queue that is then destroyed, and
// the device right after: the pool's threads join cleanly.
// Every allocation starts HALO_HAL_ALLOCATION_ALIGNMENT-aligned, the
// smallest and the largest included (malloc gives small blocks 16 bytes,
// jemalloc 8, so a 4-byte result buffer failed a dispatch's 16-byte argument
// check), and zeroed.
static void test_allocations_are_aligned(void **state) {
  (void)state;
  halo_hal_allocator_t *allocator = fixture.device->allocator;
  enum { COUNT = 64 };
  uint64_t addresses[COUNT];
  for (int i = 0; i < COUNT; ++i) {
    uint64_t size = (uint64_t)(i % 8) + 1;
    expect_ok(allocator->vtable->allocate(allocator, size, &addresses[i]));
    assert_int_equal(addresses[i] % HALO_HAL_ALLOCATION_ALIGNMENT, 0);
    const uint8_t *bytes = (const uint8_t *)(uintptr_t)addresses[i];
    for (uint64_t j = 0; j < size; ++j) assert_int_equal(bytes[j], 0);
  }
  for (int i = 0; i < COUNT; ++i) {
    allocator->vtable->deallocate(allocator, addresses[i],
                                  (uint64_t)(i % 8) + 1);
  }
  // A large one too: aligned, zeroed, writable.
  uint64_t large_size = 3u << 20, large = 0;
  expect_ok(allocator->vtable->allocate(allocator, large_size, &large));
  assert_int_equal(large % HALO_HAL_ALLOCATION_ALIGNMENT, 0);
  uint8_t *bytes = (uint8_t *)(uintptr_t)large;
  assert_int_equal(bytes[0], 0);
  assert_int_equal(bytes[large_size - 1], 0);
  bytes[large_size / 2] = 1;
  allocator->vtable->deallocate(allocator, large, large_size);
}

static void test_device_lifecycle(void **state) {
  (void)state;
  for (int i = 0; i < 3; ++i) {
    halo_hal_device_t *device = NULL;
    expect_ok(halo_hal_local_device_create(&device));
    assert_string_equal(device->info.driver, "local");
    halo_hal_queue_t *queue = NULL;
    expect_ok(device->vtable->create_queue(device, 0, &queue));
    halo_hal_queue_destroy(queue);
    device->vtable->destroy(device);
  }
}

// The registry with a device filter: the local driver has device 0 only,
// created as the registry's device 0; any other is INVALID_ARGUMENT naming
// it. Without a filter (zero options) the registry serves every device.
static void test_registry_device_filter(void **state) {
  (void)state;
  halo_hal_registry_t registry;
  halo_hal_registry_options_t options = {.driver = "local"};
  expect_ok(halo_hal_registry_initialize_with_options(&options, &registry));
  assert_int_equal(registry.device_count, 1);
  assert_string_equal(registry.devices[0]->info.driver, "local");
  halo_hal_registry_deinitialize(&registry);

  options.has_device_filter = true;
  options.device_filter = 0;
  expect_ok(halo_hal_registry_initialize_with_options(&options, &registry));
  assert_int_equal(registry.device_count, 1);
  assert_string_equal(registry.devices[0]->info.driver, "local");
  halo_hal_registry_deinitialize(&registry);

  options.device_filter = 1;
  halo_status_t status =
      halo_hal_registry_initialize_with_options(&options, &registry);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "device 1"));
  assert_non_null(strstr(halo_status_message(status), "1 device"));
  halo_status_free(status);
  assert_int_equal(registry.device_count, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_elf),
      cmocka_unit_test(test_other_formats_unimplemented),
      cmocka_unit_test(test_lookup_entry),
      cmocka_unit_test(test_executables_are_distinct),
      cmocka_unit_test(test_vector_add_direct),
      cmocka_unit_test(test_vector_add_bindings),
      cmocka_unit_test(test_binding_table_argument),
      cmocka_unit_test(test_constants),
      cmocka_unit_test(test_grid_and_shared_memory),
      cmocka_unit_test(test_dispatch_indirect),
      cmocka_unit_test(test_fill_patterns),
      cmocka_unit_test(test_copy_and_update),
      cmocka_unit_test(test_unbound_and_short_bindings_fail),
      cmocka_unit_test(test_prepare_rejects),
      cmocka_unit_test(test_concurrent_executions),
      cmocka_unit_test(test_workgroups_run_in_parallel),
      cmocka_unit_test(test_priority),
      cmocka_unit_test(test_queue_destroy_waits),
      cmocka_unit_test(test_allocations_are_aligned),
      cmocka_unit_test(test_device_lifecycle),
      cmocka_unit_test(test_registry_device_filter),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
