// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The CUDA driver's command buffers and queues on a fake driver
// (hal_cuda_fake_driver.c: no GPU needed, so this runs everywhere the
// driver is built): results of graph and stream executions with both
// binding strategies, barriers as edges, dispatch_indirect, the instance
// pool under concurrent executions (never two launches of one exec at
// once, parking past the bound), GPU semaphore stores and their order
// across streams, independent queues (a long execution on one never delays
// the completion of a short one on another), an idle device's executions
// issued and waited for on the caller (its context made current there; set-up
// and failures finished on the submission thread; back to back they go to
// that thread), GPU-to-GPU waits through the
// deferred queue (a consumer released on its producer's fence before the
// producer finished, a producer parked in the instance pool, a producer
// failing before it reached the device, a semaphore failed after the
// consumer was released), and a sticky error (the device reported lost
// once, pending and later executions failing with DEVICE_LOST) — each
// under the completion thread and under cuLaunchHostFunc. Run under ASan
// it checks the lifetimes (execution references, instances, events,
// fences) as well.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/status.h"
#include "hal/cuda/cuda_command_buffer.h"
#include "hal/cuda/cuda_device.h"
#include "hal/deferred_queue.h"
#include "hal/semaphore.h"
#include "tests/unit/hal_cuda_fake_driver.h"

#define N 1024u
// Streams per priority level of the device's pool (cuda-streams).
#define STREAMS 4
// The test device's bound on graph instances per recording (small, so
// that the pool's parking is reached).
#define TEST_GRAPH_INSTANCES 8

//===----------------------------------------------------------------------===//
// Kernels of the fake driver
//===----------------------------------------------------------------------===//

static void kernel_axpy(void **args, uint64_t threads) {
  const float *x = *(float **)args[0];
  float *y = *(float **)args[1];
  float a = *(float *)args[2];
  uint32_t n = *(uint32_t *)args[3];
  for (uint64_t i = 0; i < threads && i < n; ++i) y[i] = a * x[i] + y[i];
}

static void kernel_axpy_table(void **args, uint64_t threads) {
  const uint64_t *table = *(uint64_t **)args[0];
  float a = *(float *)args[1];
  uint32_t n = *(uint32_t *)args[2];
  const float *x = (const float *)(uintptr_t)table[*(uint32_t *)args[3]];
  float *y = (float *)(uintptr_t)table[*(uint32_t *)args[4]];
  for (uint64_t i = 0; i < threads && i < n; ++i) y[i] = a * x[i] + y[i];
}

static void kernel_scale_add(void **args, uint64_t threads) {
  const float *x = *(float **)args[0];
  float *y = *(float **)args[1];
  float a = *(float *)args[2], b = *(float *)args[3];
  uint32_t n = *(uint32_t *)args[4];
  for (uint64_t i = 0; i < threads && i < n; ++i) y[i] = a * x[i] + b;
}

static void kernel_add(void **args, uint64_t threads) {
  const float *a = *(float **)args[0];
  const float *b = *(float **)args[1];
  float *c = *(float **)args[2];
  uint32_t n = *(uint32_t *)args[3];
  for (uint64_t i = 0; i < threads && i < n; ++i) c[i] = a[i] + b[i];
}

// y = x + 1 after |us| microseconds.
static void kernel_slow(void **args, uint64_t threads) {
  const float *x = *(float **)args[0];
  float *y = *(float **)args[1];
  uint32_t n = *(uint32_t *)args[2];
  uint32_t us = *(uint32_t *)args[3];
  if (us) usleep(us);  // usleep(0) may sleep the timer slack (50 us)
  for (uint64_t i = 0; i < threads && i < n; ++i) y[i] = x[i] + 1.0f;
}

// The sticky error the fault kernel leaves, and its name: a kernel's
// illegal address under the completion thread, the MPS server ending the
// client under host functions (a context as dead).
static struct {
  CUresult result;
  const char *name;
} fault_kind = {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"};

static void kernel_fault(void **args, uint64_t threads) {
  (void)args;
  (void)threads;
  fake_driver_set_sticky(fault_kind.result);
}

// log[1 + log[0]++] = value: the order in which a stream ran the appends.
static void kernel_append(void **args, uint64_t threads) {
  (void)threads;
  uint32_t *log = *(uint32_t **)args[0];
  log[1 + log[0]++] = *(uint32_t *)args[1];
}

// The gate: a kernel that holds its stream until the test opens the gate
// (gate_open), so that an execution stays pending as long as a test needs.
static struct {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool open;
  int entered;  // gate kernels that started running
} gate = {.mutex = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void kernel_gate(void **args, uint64_t threads) {
  (void)args;
  (void)threads;
  pthread_mutex_lock(&gate.mutex);
  ++gate.entered;
  pthread_cond_broadcast(&gate.cond);
  while (!gate.open) pthread_cond_wait(&gate.cond, &gate.mutex);
  pthread_mutex_unlock(&gate.mutex);
}

enum {
  KERNEL_AXPY,
  KERNEL_AXPY_TABLE,
  KERNEL_SCALE_ADD,
  KERNEL_ADD,
  KERNEL_SLOW,
  KERNEL_FAULT,
  KERNEL_APPEND,
  KERNEL_GATE,
  KERNEL_COUNT,
};

static const fake_kernel_t kKernels[KERNEL_COUNT] = {
    {"axpy", kernel_axpy, 4, {8, 8, 4, 4}},
    {"axpy_table", kernel_axpy_table, 5, {8, 4, 4, 4, 4}},
    {"scale_add", kernel_scale_add, 5, {8, 8, 4, 4, 4}},
    {"add", kernel_add, 4, {8, 8, 8, 4}},
    {"slow", kernel_slow, 4, {8, 8, 4, 4}},
    {"fault", kernel_fault, 1, {8}},
    {"append", kernel_append, 2, {8, 4}},
    {"gate", kernel_gate, 1, {8}},
};

//===----------------------------------------------------------------------===//
// A device on the fake driver
//===----------------------------------------------------------------------===//

static struct {
  halo_hal_cuda_device_t *device;
  halo_hal_executable_t *executable;
  uint32_t ordinals[KERNEL_COUNT];
  const char *mode;
  atomic_int lost_reports;
} state;

static void on_lost(void *user_data, halo_hal_cuda_device_t *device,
                    halo_status_t status) {
  (void)user_data;
  (void)device;
  atomic_fetch_add(&state.lost_reports, 1);
  halo_status_free(status);
}

static int device_open(halo_hal_cuda_completion_mode_t mode) {
  unsetenv("HALO_CUDA_GPU_WAITS");  // the GPU-to-GPU wait tests need them
  const halo_hal_cuda_symbols_t *cu =
      fake_driver_initialize(kKernels, KERNEL_COUNT);
  fake_driver_set_sticky(CUDA_SUCCESS);
  fake_driver_reset_counters();
  halo_hal_cuda_device_t *device = calloc(1, sizeof(*device));
  device->cu = cu;
  device->options.completion = mode;
  device->options.stream_count = STREAMS;
  device->eventless_completion = true;
  device->issue_on_caller = true;
  device->graph_stores = true;
  device->graph_instances = TEST_GRAPH_INSTANCES;
  device->instance_affinity =
      true;  // as halod's devices (HALO_CUDA_INSTANCE_AFFINITY)
  pthread_mutex_init(&device->ticket_mutex, NULL);
  pthread_mutex_init(&device->graph_mutex, NULL);
  device->graph_bytes_limit = HALO_HAL_CUDA_DEFAULT_GRAPH_BYTES;
  device->context = (CUcontext)(uintptr_t)0x1000;
  device->stream_priority_least = 0;
  device->stream_priority_greatest = -5;
  device->arch = 90;
  snprintf(device->base.info.name, sizeof(device->base.info.name), "fake GPU");
  pthread_mutex_init(&device->transfer_mutex, NULL);
  pthread_mutex_init(&device->registration_mutex, NULL);
  halo_hal_cuda_allocator_initialize(device);
  device->base.allocator = &device->allocator;
  device->lost = on_lost;
  if (cu->cuStreamCreateWithPriority(&device->transfer_stream,
                                     CU_STREAM_NON_BLOCKING, 0)) {
    return -1;
  }
  halo_status_t status = halo_hal_cuda_thread_start(
      &device->submission, "halo-fake-sub", cu, device->context,
      HALO_HAL_CUDA_SUBMISSION_SPIN_NS);
  if (!status) {
    status = halo_hal_cuda_thread_start(&device->reaper, "halo-fake-reap", cu,
                                        device->context, 0);
  }
  if (!status) status = halo_hal_cuda_device_open_streams(device);
  static uint8_t image[FAKE_CUDA_IMAGE_SIZE];
  fake_driver_image(image);
  halo_hal_executable_params_t params = {
      .format = HALO_HAL_EXECUTABLE_FORMAT_CUBIN,
      .data = image,
      .size = sizeof(image),
  };
  if (!status) {
    status =
        halo_hal_cuda_executable_create(device, &params, &state.executable);
  }
  for (int i = 0; !status && i < KERNEL_COUNT; ++i) {
    halo_hal_entry_info_t info;
    status = halo_hal_executable_lookup_entry(state.executable,
                                              kKernels[i].name, &info);
    if (!status) state.ordinals[i] = info.ordinal;
  }
  if (status) {
    fprintf(stderr, "device_open: %s\n", halo_status_message(status));
    halo_status_free(status);
    return -1;
  }
  state.device = device;
  atomic_store(&state.lost_reports, 0);
  return 0;
}

static int setup_thread(void **unused) {
  (void)unused;
  state.mode = "thread";
  fault_kind.result = CUDA_ERROR_ILLEGAL_ADDRESS;
  fault_kind.name = "CUDA_ERROR_ILLEGAL_ADDRESS";
  return device_open(HALO_HAL_CUDA_COMPLETION_THREAD);
}

static int setup_host_func(void **unused) {
  (void)unused;
  state.mode = "host_func";
  fault_kind.result = CUDA_ERROR_MPS_CLIENT_TERMINATED;
  fault_kind.name = "CUDA_ERROR_MPS_CLIENT_TERMINATED";
  return device_open(HALO_HAL_CUDA_COMPLETION_HOST_FUNC);
}

static int device_close(void **unused) {
  (void)unused;
  halo_hal_cuda_device_t *device = state.device;
  if (!device) return 0;
  halo_hal_executable_destroy(state.executable);
  halo_hal_cuda_thread_stop(&device->submission);
  halo_hal_cuda_thread_stop(&device->reaper);
  fake_driver_set_sticky(CUDA_SUCCESS);
  halo_hal_cuda_stream_pool_deinitialize(&device->streams);
  device->cu->cuStreamSynchronize(device->transfer_stream);
  device->cu->cuStreamDestroy(device->transfer_stream);
  fake_driver_quiesce();
  if (device->builtin_module)
    device->cu->cuModuleUnload(device->builtin_module);
  halo_hal_cuda_tickets_free(device);
  pthread_mutex_destroy(&device->ticket_mutex);
  // Every command buffer was reaped: no graph memory is counted.
  uint64_t graph_bytes = 0;
  uint32_t graph_instances = 0;
  halo_hal_cuda_device_graph_usage(device, &graph_bytes, &graph_instances);
  assert_int_equal(graph_bytes, 0);
  assert_int_equal(graph_instances, 0);
  assert_true(halo_list_empty(&device->graph_holders));
  pthread_mutex_destroy(&device->graph_mutex);
  halo_status_free(device->builtin_failure);
  pthread_mutex_destroy(&device->transfer_mutex);
  pthread_mutex_destroy(&device->registration_mutex);
  free(device);
  state.device = NULL;
  fake_counters_t counters = fake_driver_counters();
  assert_int_equal(counters.exec_overlaps, 0);
  assert_int_equal(counters.destroyed_pending, 0);
  assert_int_equal(counters.missing_uploads, 0);
  assert_int_equal(counters.store_regressions, 0);
  return 0;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static uint64_t device_allocate(uint64_t bytes) {
  halo_hal_allocator_t *allocator = state.device->base.allocator;
  uint64_t address = 0;
  halo_status_t status =
      allocator->vtable->allocate(allocator, bytes, &address);
  assert_null(status);
  return address;
}

static void device_free(uint64_t address, uint64_t bytes) {
  halo_hal_allocator_t *allocator = state.device->base.allocator;
  allocator->vtable->deallocate(allocator, address, bytes);
}

static float *floats(uint64_t address) {
  return (float *)(uintptr_t)address;
}

// A recording under construction.
typedef struct recorder_t {
  halo_hal_recording_t recording;
  uint32_t command_capacity;
  uint32_t arg_capacity;
  uint32_t data_capacity;
} recorder_t;

static void recorder_begin(recorder_t *recorder, uint32_t flags,
                           uint32_t binding_capacity) {
  memset(recorder, 0, sizeof(*recorder));
  recorder->recording.flags = flags;
  recorder->recording.binding_capacity = binding_capacity;
  recorder->command_capacity = 4096;
  recorder->arg_capacity = 8192;
  recorder->data_capacity = 1u << 20;
  recorder->recording.commands =
      calloc(recorder->command_capacity, sizeof(halo_hal_command_t));
  recorder->recording.args =
      calloc(recorder->arg_capacity, sizeof(halo_hal_dispatch_arg_t));
  recorder->recording.data = calloc(recorder->data_capacity, 1);
}

static uint32_t recorder_data(recorder_t *recorder, const void *data,
                              uint32_t size) {
  uint32_t offset = recorder->recording.data_size;
  memcpy(recorder->recording.data + offset, data, size);
  recorder->recording.data_size += size;
  return offset;
}

static halo_hal_command_t *recorder_command(recorder_t *recorder,
                                            uint32_t type) {
  halo_hal_command_t *command =
      &recorder->recording.commands[recorder->recording.command_count++];
  command->type = type;
  return command;
}

static halo_hal_buffer_ref_t slot_ref(uint32_t slot, uint64_t length) {
  halo_hal_buffer_ref_t ref = {.slot = slot, .length = length};
  return ref;
}
static halo_hal_buffer_ref_t direct_ref(uint64_t address, uint64_t length) {
  halo_hal_buffer_ref_t ref = {
      .slot = HALO_HAL_SLOT_DIRECT, .address = address, .length = length};
  return ref;
}

typedef struct arg_t {
  uint32_t kind;
  halo_hal_buffer_ref_t ref;
  const void *data;
  uint32_t size;
} arg_t;

static arg_t arg_buffer(halo_hal_buffer_ref_t ref) {
  arg_t arg = {.kind = HALO_HAL_ARG_BUFFER, .ref = ref};
  return arg;
}
static arg_t arg_constant(const void *data, uint32_t size) {
  arg_t arg = {.kind = HALO_HAL_ARG_CONSTANT, .data = data, .size = size};
  return arg;
}
static arg_t arg_table(void) {
  arg_t arg = {.kind = HALO_HAL_ARG_BINDING_TABLE};
  return arg;
}

static halo_hal_command_t *recorder_dispatch(recorder_t *recorder, int kernel,
                                             uint32_t blocks, const arg_t *args,
                                             uint32_t arg_count) {
  halo_hal_command_t *command =
      recorder_command(recorder, HALO_HAL_COMMAND_DISPATCH);
  command->executable = state.executable;
  command->entry_ordinal = state.ordinals[kernel];
  command->grid[0] = blocks;
  command->grid[1] = command->grid[2] = 1;
  command->block[0] = 64;
  command->block[1] = command->block[2] = 1;
  command->arg_first = recorder->recording.arg_count;
  command->arg_count = arg_count;
  for (uint32_t i = 0; i < arg_count; ++i) {
    halo_hal_dispatch_arg_t *arg =
        &recorder->recording.args[recorder->recording.arg_count++];
    arg->kind = args[i].kind;
    arg->ref = args[i].ref;
    if (args[i].kind == HALO_HAL_ARG_CONSTANT) {
      arg->data_size = args[i].size;
      arg->data_offset = recorder_data(recorder, args[i].data, args[i].size);
    }
  }
  return command;
}

static void recorder_barrier(recorder_t *recorder) {
  recorder_command(recorder, HALO_HAL_COMMAND_BARRIER);
}

static void recorder_fill(recorder_t *recorder, halo_hal_buffer_ref_t target,
                          const void *pattern, uint32_t size) {
  halo_hal_command_t *command =
      recorder_command(recorder, HALO_HAL_COMMAND_FILL);
  command->target = target;
  command->data_size = size;
  command->data_offset = recorder_data(recorder, pattern, size);
}

static void recorder_update(recorder_t *recorder, const void *data,
                            uint32_t size, halo_hal_buffer_ref_t target) {
  halo_hal_command_t *command =
      recorder_command(recorder, HALO_HAL_COMMAND_UPDATE);
  command->target = target;
  command->data_size = size;
  command->data_offset = recorder_data(recorder, data, size);
}

static void recorder_copy(recorder_t *recorder, halo_hal_buffer_ref_t source,
                          halo_hal_buffer_ref_t target) {
  halo_hal_command_t *command =
      recorder_command(recorder, HALO_HAL_COMMAND_COPY);
  command->source = source;
  command->target = target;
}

static halo_hal_command_buffer_t *recorder_end(recorder_t *recorder) {
  halo_hal_command_buffer_t *command_buffer = NULL;
  halo_status_t status = halo_hal_cuda_command_buffer_prepare(
      state.device, &recorder->recording, &command_buffer);
  if (status) {
    fail_msg("prepare: %s", halo_status_message(status));
  }
  return command_buffer;
}

// One execution's completion.
typedef struct completion_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool done;
  halo_status_code_t code;
  char message[512];
  // For GPU stores: the word and the value it must hold when the
  // completion arrives.
  volatile uint64_t *word;
  uint64_t value;
  bool stored_first;
  // A timeline slot whose epoch the completion records (NULL: none).
  halo_timeline_slot_t *slot;
  uint32_t slot_epoch;
  // The completions of one queue, counted (NULL: not counted): whether
  // this one came |position|-th, as submitted.
  atomic_uint *order;
  uint32_t position;
  bool in_order;
  pthread_t thread;  // the thread that completed it
} completion_t;

static void completion_init(completion_t *completion) {
  memset(completion, 0, sizeof(*completion));
  pthread_mutex_init(&completion->mutex, NULL);
  pthread_cond_init(&completion->cond, NULL);
}

static void on_complete(void *user_data, halo_status_t status) {
  completion_t *completion = user_data;
  pthread_mutex_lock(&completion->mutex);
  completion->code = halo_status_code(status);
  snprintf(completion->message, sizeof(completion->message), "%s",
           status ? halo_status_message(status) : "");
  if (completion->word) {
    completion->stored_first =
        __atomic_load_n(completion->word, __ATOMIC_ACQUIRE) >=
        completion->value;
  }
  if (completion->slot) {
    completion->slot_epoch =
        atomic_load_explicit(&completion->slot->epoch, memory_order_acquire);
  }
  if (completion->order) {
    completion->in_order =
        atomic_fetch_add(completion->order, 1) == completion->position;
  }
  completion->thread = pthread_self();
  completion->done = true;
  pthread_cond_signal(&completion->cond);
  pthread_mutex_unlock(&completion->mutex);
  halo_status_free(status);
}

static halo_status_code_t completion_wait(completion_t *completion) {
  pthread_mutex_lock(&completion->mutex);
  while (!completion->done) {
    pthread_cond_wait(&completion->cond, &completion->mutex);
  }
  pthread_mutex_unlock(&completion->mutex);
  pthread_cond_destroy(&completion->cond);
  pthread_mutex_destroy(&completion->mutex);
  return completion->code;
}

static halo_hal_queue_t *queue_new(void) {
  halo_hal_queue_t *queue = NULL;
  halo_status_t status = halo_hal_cuda_queue_create(state.device, 0, &queue);
  assert_null(status);
  return queue;
}

// An execution of |command_buffer| on |queue| after |waits| (device
// fences), its own fence in |out_fence| (NULL: none).
static void execute_fenced(halo_hal_queue_t *queue,
                           halo_hal_command_buffer_t *command_buffer,
                           const halo_hal_binding_t *bindings, uint32_t count,
                           halo_hal_fence_t *const *waits, uint32_t wait_count,
                           halo_hal_fence_t **out_fence,
                           const halo_hal_execution_signal_t *signals,
                           uint32_t signal_count, completion_t *completion) {
  halo_hal_execution_t execution = {
      .command_buffer = command_buffer,
      .bindings = bindings,
      .binding_count = count,
      .completion = on_complete,
      .user_data = completion,
      .signals = signals,
      .signal_count = signal_count,
      .wait_fences = waits,
      .wait_fence_count = wait_count,
      .out_fence = out_fence,
  };
  halo_status_t status = halo_hal_queue_execute(queue, &execution);
  if (status) fail_msg("execute: %s", halo_status_message(status));
}

static void execute(halo_hal_queue_t *queue,
                    halo_hal_command_buffer_t *command_buffer,
                    const halo_hal_binding_t *bindings, uint32_t count,
                    const halo_hal_execution_signal_t *signals,
                    uint32_t signal_count, completion_t *completion) {
  execute_fenced(queue, command_buffer, bindings, count, NULL, 0, NULL, signals,
                 signal_count, completion);
}

static void execute_and_wait(halo_hal_queue_t *queue,
                             halo_hal_command_buffer_t *command_buffer,
                             const halo_hal_binding_t *bindings,
                             uint32_t count) {
  completion_t completion;
  completion_init(&completion);
  execute(queue, command_buffer, bindings, count, NULL, 0, &completion);
  if (completion_wait(&completion) != HALO_STATUS_OK) {
    fail_msg("[%s] execution failed: %s", state.mode, completion.message);
  }
}

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

// SetParams (indirect BUFFER arguments), the device binding table, stream
// replay and a direct graph agree, over rounds that re-point every node.
static void test_binding_strategies(void **unused) {
  (void)unused;
  enum { INPUTS = 3, WAYS = 4 };
  uint64_t x[INPUTS], y[WAYS];
  for (int k = 0; k < INPUTS; ++k) {
    x[k] = device_allocate(N * 4);
    for (uint32_t i = 0; i < N; ++i) {
      floats(x[k])[i] = (float)(k + 1) * 0.5f + (float)i;
    }
  }
  for (int w = 0; w < WAYS; ++w) y[w] = device_allocate(N * 4);
  float a = 2.0f;
  uint32_t n = N, x_slot = 0, y_slot = 1;
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 2);
  arg_t by_params[4] = {arg_buffer(slot_ref(0, 0)), arg_buffer(slot_ref(1, 0)),
                        arg_constant(&a, 4), arg_constant(&n, 4)};
  recorder_dispatch(&recorder, KERNEL_AXPY, N / 64, by_params, 4);
  halo_hal_command_buffer_t *params_buffer = recorder_end(&recorder);
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 2);
  arg_t by_table[5] = {arg_table(), arg_constant(&a, 4), arg_constant(&n, 4),
                       arg_constant(&x_slot, 4), arg_constant(&y_slot, 4)};
  recorder_dispatch(&recorder, KERNEL_AXPY_TABLE, N / 64, by_table, 5);
  halo_hal_command_buffer_t *table_buffer = recorder_end(&recorder);
  halo_hal_queue_t *queue = queue_new();
  fake_driver_reset_counters();
  for (int round = 0; round < 6; ++round) {
    int k = round % INPUTS;
    for (int w = 0; w < WAYS; ++w) {
      for (uint32_t i = 0; i < N; ++i) floats(y[w])[i] = (float)round;
    }
    halo_hal_binding_t bindings[2] = {{x[k], N * 4}, {y[0], N * 4}};
    execute_and_wait(queue, params_buffer, bindings, 2);
    bindings[1].address = y[1];
    execute_and_wait(queue, table_buffer, bindings, 2);
    for (int direct = 0; direct < 2; ++direct) {
      recorder_begin(
          &recorder,
          direct ? HALO_HAL_RECORDING_REUSABLE : HALO_HAL_RECORDING_ONE_SHOT,
          0);
      arg_t args[4] = {arg_buffer(direct_ref(x[k], N * 4)),
                       arg_buffer(direct_ref(y[2 + direct], N * 4)),
                       arg_constant(&a, 4), arg_constant(&n, 4)};
      recorder_dispatch(&recorder, KERNEL_AXPY, N / 64, args, 4);
      halo_hal_command_buffer_t *direct_buffer = recorder_end(&recorder);
      execute_and_wait(queue, direct_buffer, NULL, 0);
      halo_hal_command_buffer_destroy(direct_buffer);
    }
    for (uint32_t i = 0; i < N; ++i) {
      float expected = a * ((float)(k + 1) * 0.5f + (float)i) + (float)round;
      for (int w = 0; w < WAYS; ++w) {
        if (floats(y[w])[i] != expected) {
          fail_msg("[%s] round %d way %d: y[%u] = %g, expected %g", state.mode,
                   round, w, i, floats(y[w])[i], expected);
        }
      }
    }
  }
  fake_counters_t counters = fake_driver_counters();
  // 6 rounds: the first x rebinds nothing (the instance was built with
  // it), each later round re-points the one dispatch of the SetParams
  // recording; the table recording is never re-pointed.
  assert_int_equal(counters.exec_set_params, 5);
  // ONE_SHOT replays with cuLaunchKernel; graphs launch.
  assert_int_equal(counters.kernel_launches, 6);
  assert_int_equal(counters.graph_launches, 6 * 3);
  halo_hal_queue_destroy(queue);
  halo_hal_command_buffer_destroy(params_buffer);
  halo_hal_command_buffer_destroy(table_buffer);
  for (int k = 0; k < INPUTS; ++k) device_free(x[k], N * 4);
  for (int w = 0; w < WAYS; ++w) device_free(y[w], N * 4);
}

// A slot the recording uses left unbound (the daemon refuses that first;
// the driver still checks): the execution fails naming the command, the
// argument and the slot, on a graph and on the stream; the graph's
// instance reservation is given back.
static void test_unbound_slot(void **unused) {
  (void)unused;
  uint64_t x = device_allocate(N * 4);
  float a = 1.0f;
  uint32_t n = N;
  halo_hal_queue_t *queue = queue_new();
  for (int one_shot = 0; one_shot < 2; ++one_shot) {
    recorder_t recorder;
    recorder_begin(
        &recorder,
        one_shot ? HALO_HAL_RECORDING_ONE_SHOT : HALO_HAL_RECORDING_REUSABLE,
        2);
    arg_t args[4] = {arg_buffer(slot_ref(0, 0)), arg_buffer(slot_ref(1, 0)),
                     arg_constant(&a, 4), arg_constant(&n, 4)};
    recorder_dispatch(&recorder, KERNEL_AXPY, N / 64, args, 4);
    halo_hal_command_buffer_t *command_buffer = recorder_end(&recorder);
    for (int round = 0; round < 2; ++round) {
      halo_hal_binding_t bindings[2] = {{x, N * 4}, {0, 0}};
      completion_t completion;
      completion_init(&completion);
      execute(queue, command_buffer, bindings, 2, NULL, 0, &completion);
      assert_int_equal(completion_wait(&completion),
                       HALO_STATUS_FAILED_PRECONDITION);
      assert_non_null(strstr(completion.message,
                             "command 0 (dispatch): argument 1: binding "
                             "slot 1 is unbound"));
    }
    halo_hal_command_buffer_destroy(command_buffer);
  }
  halo_hal_queue_destroy(queue);
  device_free(x, N * 4);
}

// fill + update | barrier | two branches | barrier | join | barrier | copy.
static halo_hal_command_buffer_t *diamond(uint32_t flags) {
  static float inline_values[N];
  for (uint32_t i = 0; i < N; ++i) inline_values[i] = (float)i;
  static const float one = 1.0f, three = 3.0f, zero = 0.0f, unit = 1.0f,
                     ten = 10.0f;
  static const uint32_t n = N;
  recorder_t recorder;
  recorder_begin(&recorder, flags, 6);
  recorder_fill(&recorder, slot_ref(0, N * 4), &one, 4);
  recorder_update(&recorder, inline_values, N * 4, slot_ref(1, N * 4));
  recorder_barrier(&recorder);
  arg_t c[5] = {arg_buffer(slot_ref(0, 0)), arg_buffer(slot_ref(2, 0)),
                arg_constant(&three, 4), arg_constant(&zero, 4),
                arg_constant(&n, 4)};
  arg_t d[5] = {arg_buffer(slot_ref(1, 0)), arg_buffer(slot_ref(3, 0)),
                arg_constant(&unit, 4), arg_constant(&ten, 4),
                arg_constant(&n, 4)};
  recorder_dispatch(&recorder, KERNEL_SCALE_ADD, N / 64, c, 5);
  recorder_dispatch(&recorder, KERNEL_SCALE_ADD, N / 64, d, 5);
  recorder_barrier(&recorder);
  arg_t join[4] = {arg_buffer(slot_ref(2, 0)), arg_buffer(slot_ref(3, 0)),
                   arg_buffer(slot_ref(4, 0)), arg_constant(&n, 4)};
  recorder_dispatch(&recorder, KERNEL_ADD, N / 64, join, 4);
  recorder_barrier(&recorder);
  recorder_copy(&recorder, slot_ref(4, N * 4), slot_ref(5, N * 4));
  return recorder_end(&recorder);
}

static void test_barriers_and_transfers(void **unused) {
  (void)unused;
  uint64_t buffers[2][6];
  for (int s = 0; s < 2; ++s) {
    for (int b = 0; b < 6; ++b) buffers[s][b] = device_allocate(N * 4);
  }
  halo_hal_command_buffer_t *graph = diamond(HALO_HAL_RECORDING_REUSABLE);
  halo_hal_queue_t *queue = queue_new();
  for (int round = 0; round < 5; ++round) {
    int s = round % 2;
    halo_hal_command_buffer_t *command_buffer =
        round < 4 ? graph : diamond(HALO_HAL_RECORDING_ONE_SHOT);
    halo_hal_binding_t bindings[6];
    for (int b = 0; b < 6; ++b) {
      bindings[b].address = buffers[s][b];
      bindings[b].length = N * 4;
      memset(floats(buffers[s][b]), 0xff, N * 4);
    }
    execute_and_wait(queue, command_buffer, bindings, 6);
    for (uint32_t i = 0; i < N; ++i) {
      if (floats(buffers[s][5])[i] != 13.0f + (float)i) {
        fail_msg("[%s] round %d: F[%u] = %g, expected %g", state.mode, round, i,
                 floats(buffers[s][5])[i], 13.0f + (float)i);
      }
    }
    if (command_buffer != graph)
      halo_hal_command_buffer_destroy(command_buffer);
  }
  halo_hal_queue_destroy(queue);
  halo_hal_command_buffer_destroy(graph);
  for (int s = 0; s < 2; ++s) {
    for (int b = 0; b < 6; ++b) device_free(buffers[s][b], N * 4);
  }
}

static void test_dispatch_indirect(void **unused) {
  (void)unused;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  uint64_t counts = device_allocate(16);
  for (uint32_t i = 0; i < N; ++i) floats(x)[i] = 2.0f;
  float a = 1.0f;
  uint32_t n = N;
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 3);
  arg_t args[4] = {arg_buffer(slot_ref(0, 0)), arg_buffer(slot_ref(1, 0)),
                   arg_constant(&a, 4), arg_constant(&n, 4)};
  halo_hal_command_t *command =
      recorder_dispatch(&recorder, KERNEL_AXPY, 0, args, 4);
  command->type = HALO_HAL_COMMAND_DISPATCH_INDIRECT;
  command->grid[1] = command->grid[2] = 0;
  command->workgroup_count = slot_ref(2, 12);
  halo_hal_command_buffer_t *command_buffer = recorder_end(&recorder);
  halo_hal_queue_t *queue = queue_new();
  uint32_t blocks[4] = {N / 64, N / 64 / 2, 0, N / 64 / 4};
  for (int round = 0; round < 4; ++round) {
    for (uint32_t i = 0; i < N; ++i) floats(y)[i] = 1.0f;
    uint32_t *grid = (uint32_t *)(uintptr_t)counts;
    grid[0] = blocks[round];
    grid[1] = grid[2] = 1;
    // Round 3 binds the same buffers at another offset: every node is
    // re-pointed from the host (the graph must be uploaded again).
    uint64_t shift = round == 3 ? 64 * 4 : 0;
    halo_hal_binding_t bindings[3] = {
        {x + shift, N * 4 - shift}, {y + shift, N * 4 - shift}, {counts, 16}};
    execute_and_wait(queue, command_buffer, bindings, 3);
    for (uint32_t i = 0; i < N; ++i) {
      uint32_t first = (uint32_t)(shift / 4);
      float expected =
          i >= first && i - first < blocks[round] * 64 ? 3.0f : 1.0f;
      if (floats(y)[i] != expected) {
        fail_msg("[%s] round %d (%u blocks): y[%u] = %g, expected %g",
                 state.mode, round, blocks[round], i, floats(y)[i], expected);
      }
    }
  }
  halo_hal_queue_destroy(queue);
  halo_hal_command_buffer_destroy(command_buffer);
  device_free(x, N * 4);
  device_free(y, N * 4);
  device_free(counts, 16);
}

// 24 executions of one recording at once over three queues, each with its
// own buffers: at most TEST_GRAPH_INSTANCES instances, the
// rest park; never two launches of one exec pending.
static void test_instance_pool(void **unused) {
  (void)unused;
  enum { EXECUTIONS = 24, QUEUES = 3 };
  uint32_t n = N;
  uint32_t us = 2000;
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 2);
  arg_t args[4] = {arg_buffer(slot_ref(0, 0)), arg_buffer(slot_ref(1, 0)),
                   arg_constant(&n, 4), arg_constant(&us, 4)};
  recorder_dispatch(&recorder, KERNEL_SLOW, N / 64, args, 4);
  halo_hal_command_buffer_t *command_buffer = recorder_end(&recorder);
  halo_hal_queue_t *queues[QUEUES];
  for (int q = 0; q < QUEUES; ++q) queues[q] = queue_new();
  uint64_t x[EXECUTIONS], y[EXECUTIONS];
  static halo_hal_binding_t bindings[EXECUTIONS][2];
  static completion_t completions[EXECUTIONS];
  fake_driver_reset_counters();
  for (int e = 0; e < EXECUTIONS; ++e) {
    x[e] = device_allocate(N * 4);
    y[e] = device_allocate(N * 4);
    for (uint32_t i = 0; i < N; ++i) floats(x[e])[i] = (float)(e * 1000 + i);
    bindings[e][0] = (halo_hal_binding_t){x[e], N * 4};
    bindings[e][1] = (halo_hal_binding_t){y[e], N * 4};
    completion_init(&completions[e]);
  }
  for (int e = 0; e < EXECUTIONS; ++e) {
    execute(queues[e % QUEUES], command_buffer, bindings[e], 2, NULL, 0,
            &completions[e]);
  }
  for (int e = 0; e < EXECUTIONS; ++e) {
    if (completion_wait(&completions[e]) != HALO_STATUS_OK) {
      fail_msg("[%s] execution %d: %s", state.mode, e, completions[e].message);
    }
    for (uint32_t i = 0; i < N; ++i) {
      if (floats(y[e])[i] != (float)(e * 1000 + i) + 1.0f) {
        fail_msg("[%s] execution %d: y[%u] = %g", state.mode, e, i,
                 floats(y[e])[i]);
      }
    }
  }
  fake_counters_t counters = fake_driver_counters();
  print_message(
      "[%s] %d concurrent executions of one recording on %d "
      "queues: %d graph instances, %d SetParams\n",
      state.mode, EXECUTIONS, QUEUES, counters.instantiations,
      counters.exec_set_params);
  assert_true(counters.instantiations >= 2);
  assert_true(counters.instantiations <= TEST_GRAPH_INSTANCES);
  assert_int_equal(counters.exec_overlaps, 0);
  for (int q = 0; q < QUEUES; ++q) halo_hal_queue_destroy(queues[q]);
  halo_hal_command_buffer_destroy(command_buffer);
  for (int e = 0; e < EXECUTIONS; ++e) {
    device_free(x[e], N * 4);
    device_free(y[e], N * 4);
  }
}

// cuda-graph-bytes: the device memory the device's graph instances take
// (halo's estimate) stays within the bound. A recording's executions past
// what fits wait for its own instances; a recording that needs its first
// instance gets the room of other recordings' idle ones (destroyed), and
// fails RESOURCE_EXHAUSTED naming the bound when none is idle or one
// instance is larger than the bound.

// A recording of |dispatches| slow dispatches (|us| each) with no barrier
// between them (one stage: each is counted as running beside the others).
// Their count of elements is 0: executions at once write nothing of |y|.
static halo_hal_command_buffer_t *graph_bytes_recording(uint32_t dispatches,
                                                        uint64_t x, uint64_t y,
                                                        uint32_t *us) {
  static uint32_t n = 0;
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 0);
  arg_t args[4] = {arg_buffer(direct_ref(x, N * 4)),
                   arg_buffer(direct_ref(y, N * 4)), arg_constant(&n, 4),
                   arg_constant(us, 4)};
  for (uint32_t i = 0; i < dispatches; ++i) {
    recorder_dispatch(&recorder, KERNEL_SLOW, 1, args, 4);
  }
  return recorder_end(&recorder);
}

static uint64_t graph_bytes_used(uint32_t *out_instances) {
  uint64_t bytes = 0;
  uint32_t instances = 0;
  halo_hal_cuda_device_graph_usage(state.device, &bytes, &instances);
  if (out_instances) *out_instances = instances;
  return bytes;
}

// Runs one execution of |command_buffer| on |queue|; its status code, its
// message in |message|.
static halo_status_code_t graph_bytes_run(
    halo_hal_queue_t *queue, halo_hal_command_buffer_t *command_buffer,
    char *message, size_t message_size) {
  completion_t completion;
  completion_init(&completion);
  execute(queue, command_buffer, NULL, 0, NULL, 0, &completion);
  halo_status_code_t code = completion_wait(&completion);
  snprintf(message, message_size, "%s", completion.message);
  return code;
}

static void test_graph_bytes_bound(void **unused) {
  (void)unused;
  halo_hal_cuda_device_t *device = state.device;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  uint32_t slow_us = 20000, fast_us = 0;
  halo_hal_command_buffer_t *small = graph_bytes_recording(1, x, y, &slow_us);
  halo_hal_command_buffer_t *wide = graph_bytes_recording(8, x, y, &fast_us);
  halo_hal_queue_t *queues[3];
  for (int q = 0; q < 3; ++q) queues[q] = queue_new();
  char message[512];
  fake_counters_t before = fake_driver_counters();

  // One instance of each: what the estimate gives them.
  assert_int_equal(graph_bytes_run(queues[0], small, message, sizeof(message)),
                   HALO_STATUS_OK);
  uint32_t instances = 0;
  uint64_t small_bytes = graph_bytes_used(&instances);
  assert_int_equal(instances, 1);
  assert_int_equal(graph_bytes_run(queues[0], wide, message, sizeof(message)),
                   HALO_STATUS_OK);
  uint64_t wide_bytes = graph_bytes_used(&instances) - small_bytes;
  assert_int_equal(instances, 2);
  // Eight dispatches beside each other cost far more than one alone.
  assert_true(wide_bytes > 4 * small_bytes);
  print_message(
      "[%s] graph instance estimates: 1 dispatch %llu KiB, 8 "
      "beside each other %llu KiB\n",
      state.mode, (unsigned long long)(small_bytes >> 10),
      (unsigned long long)(wide_bytes >> 10));

  // The bound holds two instances of |small| beside |wide|'s: 12
  // concurrent executions of |small| on three queues wait for its own two
  // instances (|wide|'s idle one is destroyed for the second) and all
  // complete, in each queue's order.
  device->graph_bytes_limit = 2 * small_bytes + small_bytes / 2;
  enum { EXECUTIONS = 12 };
  static completion_t completions[EXECUTIONS];
  atomic_uint order[3];
  for (int q = 0; q < 3; ++q) atomic_init(&order[q], 0);
  for (int e = 0; e < EXECUTIONS; ++e) {
    completion_init(&completions[e]);
    completions[e].order = &order[e % 3];
    completions[e].position = (uint32_t)(e / 3);
    execute(queues[e % 3], small, NULL, 0, NULL, 0, &completions[e]);
  }
  for (int e = 0; e < EXECUTIONS; ++e) {
    if (completion_wait(&completions[e]) != HALO_STATUS_OK) {
      fail_msg("[%s] execution %d: %s", state.mode, e, completions[e].message);
    }
    assert_true(completions[e].in_order);
  }
  assert_true(graph_bytes_used(&instances) <= device->graph_bytes_limit);
  assert_int_equal(instances, 2);
  fake_counters_t after = fake_driver_counters();
  // The two of |small| and |wide|'s, and |small|'s second: no more.
  assert_int_equal(after.instantiations - before.instantiations, 3);

  // |wide| has no instance now and one does not fit beside |small|'s two
  // while they are busy: it waits for one of them to come back, which then
  // goes to make room for it.
  device->graph_bytes_limit = 2 * small_bytes + wide_bytes - 1;
  uint64_t waits = halo_hal_cuda_device_graph_room_waits(device);
  completion_t busy[2];
  for (int b = 0; b < 2; ++b) {
    completion_init(&busy[b]);
    execute(queues[b], small, NULL, 0, NULL, 0, &busy[b]);
  }
  halo_status_code_t code =
      graph_bytes_run(queues[2], wide, message, sizeof(message));
  for (int b = 0; b < 2; ++b) {
    assert_int_equal(completion_wait(&busy[b]), HALO_STATUS_OK);
  }
  if (code != HALO_STATUS_OK) {
    fail_msg("[%s] a recording waiting for room: %d: %s", state.mode, (int)code,
             message);
  }
  // (It did wait: |small|'s executions take 20 ms.)
  assert_true(halo_hal_cuda_device_graph_room_waits(device) > waits);
  assert_true(graph_bytes_used(&instances) <= device->graph_bytes_limit);
  assert_int_equal(instances, 2);
  // A retry that finds no room 1 s or more after the first wait fails,
  // naming the bound and the wait (the others' instances kept busy that
  // long: a recording's executions may keep finding its instance idle
  // before the waiter does). Two recordings of |small|'s size busy for
  // 1.1 and 1.6 s: when the first comes back, the second's instance leaves
  // no room for |wide|'s.
  device->graph_bytes_limit = small_bytes + wide_bytes - 1;
  uint32_t first_us = 1100000, second_us = 1600000;
  halo_hal_command_buffer_t *slow[2] = {
      graph_bytes_recording(1, x, y, &first_us),
      graph_bytes_recording(1, x, y, &second_us)};
  completion_t slow_busy[2];
  for (int b = 0; b < 2; ++b) {
    completion_init(&slow_busy[b]);
    execute(queues[b], slow[b], NULL, 0, NULL, 0, &slow_busy[b]);
  }
  code = graph_bytes_run(queues[2], wide, message, sizeof(message));
  for (int b = 0; b < 2; ++b) {
    assert_int_equal(completion_wait(&slow_busy[b]), HALO_STATUS_OK);
  }
  if (code != HALO_STATUS_RESOURCE_EXHAUSTED ||
      !strstr(message, "cuda-graph-bytes") || !strstr(message, "waited 1 s")) {
    fail_msg("[%s] a recording waiting for room too long: %d: %s", state.mode,
             (int)code, message);
  }
  // Once they are idle, their instances go for |wide|'s.
  assert_int_equal(graph_bytes_run(queues[2], wide, message, sizeof(message)),
                   HALO_STATUS_OK);
  assert_true(graph_bytes_used(&instances) <= device->graph_bytes_limit);
  for (int b = 0; b < 2; ++b) halo_hal_command_buffer_destroy(slow[b]);
  halo_hal_cuda_thread_flush(&device->reaper);
  device->graph_bytes_limit = 2 * small_bytes + wide_bytes - 1;
  assert_int_equal(graph_bytes_run(queues[0], small, message, sizeof(message)),
                   HALO_STATUS_OK);
  graph_bytes_used(&instances);
  assert_int_equal(instances, 2);

  // One instance larger than the bound: it fails at once, naming it, and
  // no idle instance is destroyed for it.
  device->graph_bytes_limit = wide_bytes - 1;
  uint64_t used = graph_bytes_used(&instances);
  halo_hal_command_buffer_t *wider = graph_bytes_recording(9, x, y, &fast_us);
  code = graph_bytes_run(queues[0], wider, message, sizeof(message));
  if (code != HALO_STATUS_RESOURCE_EXHAUSTED ||
      !strstr(message, "larger than cuda-graph-bytes")) {
    fail_msg("[%s] a recording larger than the bound: %d: %s", state.mode,
             (int)code, message);
  }
  uint32_t instances_after = 0;
  assert_int_equal(graph_bytes_used(&instances_after), used);
  assert_int_equal(instances_after, instances);
  // |small| still runs, on its idle instance.
  before = fake_driver_counters();
  assert_int_equal(graph_bytes_run(queues[0], small, message, sizeof(message)),
                   HALO_STATUS_OK);
  after = fake_driver_counters();
  assert_int_equal(after.instantiations, before.instantiations);

  device->graph_bytes_limit = HALO_HAL_CUDA_DEFAULT_GRAPH_BYTES;
  for (int q = 0; q < 3; ++q) halo_hal_queue_destroy(queues[q]);
  halo_hal_command_buffer_destroy(wider);
  halo_hal_command_buffer_destroy(wide);
  halo_hal_command_buffer_destroy(small);
  // The reaper destroyed them and gave their bytes back.
  halo_hal_cuda_thread_flush(&device->reaper);
  assert_int_equal(graph_bytes_used(&instances), 0);
  assert_int_equal(instances, 0);
  device_free(x, N * 4);
  device_free(y, N * 4);
}

// Executions waiting for room in the bound are served in the order they
// came: one that needs its recording's first instance, waiting while other
// recordings' instances are in use, is not overtaken by executions that
// came after it, though they fit where it does not. A relay of
// recordings, each of which needs its first instance while the one before
// it runs (so one of theirs is always in use, and each one idle after it
// ran may go): |wide|, waiting for room for its first instance, gets it
// once the relay's first is idle, the relay's next waiting behind it
// (before, the relay's recordings kept taking the room the ones before
// them left, and |wide| failed after 1 s).
static void test_graph_room_first_come(void **unused) {
  (void)unused;
  halo_hal_cuda_device_t *device = state.device;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  uint32_t slow_us = 50000, fast_us = 0;
  halo_hal_queue_t *relay_queue = queue_new(), *wide_queue = queue_new();
  char message[512];
  // The estimate of one instance of each shape, by probes gone after.
  halo_hal_command_buffer_t *probes[2] = {
      graph_bytes_recording(1, x, y, &fast_us),
      graph_bytes_recording(8, x, y, &fast_us)};
  uint64_t probe_bytes[2];
  for (int p = 0; p < 2; ++p) {
    assert_int_equal(
        graph_bytes_run(relay_queue, probes[p], message, sizeof(message)),
        HALO_STATUS_OK);
    probe_bytes[p] = graph_bytes_used(NULL);
  }
  uint64_t small_bytes = probe_bytes[0];
  uint64_t wide_bytes = probe_bytes[1] - probe_bytes[0];
  for (int p = 0; p < 2; ++p) halo_hal_command_buffer_destroy(probes[p]);
  halo_hal_cuda_thread_flush(&device->reaper);
  uint32_t instances = 0;
  assert_int_equal(graph_bytes_used(&instances), 0);
  // |wide| fits only where none of the relay's instances is left.
  device->graph_bytes_limit = wide_bytes + small_bytes - 1;
  enum { RELAY = 26 };  // 1.3 s of 50 ms executions
  halo_hal_command_buffer_t *relay[RELAY];
  static completion_t relay_done[RELAY];
  for (int i = 0; i < RELAY; ++i) {
    relay[i] = graph_bytes_recording(1, x, y, &slow_us);
  }
  halo_hal_command_buffer_t *wide = graph_bytes_recording(8, x, y, &fast_us);
  uint64_t waits = halo_hal_cuda_device_graph_room_waits(device);
  completion_init(&relay_done[0]);
  execute(relay_queue, relay[0], NULL, 0, NULL, 0, &relay_done[0]);
  completion_t wide_done;
  completion_init(&wide_done);
  execute(wide_queue, wide, NULL, 0, NULL, 0, &wide_done);
  for (int i = 1; i < RELAY; ++i) {
    completion_init(&relay_done[i]);
    execute(relay_queue, relay[i], NULL, 0, NULL, 0, &relay_done[i]);
    if (completion_wait(&relay_done[i - 1]) != HALO_STATUS_OK) {
      fail_msg("[%s] relay %d: %s", state.mode, i - 1,
               relay_done[i - 1].message);
    }
  }
  if (completion_wait(&relay_done[RELAY - 1]) != HALO_STATUS_OK) {
    fail_msg("[%s] relay %d: %s", state.mode, RELAY - 1,
             relay_done[RELAY - 1].message);
  }
  if (completion_wait(&wide_done) != HALO_STATUS_OK) {
    fail_msg("[%s] a recording waiting for room, overtaken by later ones: %s",
             state.mode, wide_done.message);
  }
  // (It did wait: the relay's first was in use.)
  assert_true(halo_hal_cuda_device_graph_room_waits(device) > waits);
  assert_true(graph_bytes_used(&instances) <= device->graph_bytes_limit);
  device->graph_bytes_limit = HALO_HAL_CUDA_DEFAULT_GRAPH_BYTES;
  halo_hal_queue_destroy(relay_queue);
  halo_hal_queue_destroy(wide_queue);
  for (int i = 0; i < RELAY; ++i) halo_hal_command_buffer_destroy(relay[i]);
  halo_hal_command_buffer_destroy(wide);
  halo_hal_cuda_thread_flush(&device->reaper);
  assert_int_equal(graph_bytes_used(&instances), 0);
  device_free(x, N * 4);
  device_free(y, N * 4);
}

// Trimming destroys the idle instances it chose without the device's
// graph_mutex held (the driver's teardown may wait for the device): the
// usage query (the daemon's loop thread asks it) and the reaper, which
// take the mutex, go on meanwhile, even where the reaper frees the
// recording whose instance is being destroyed; the bytes of the destroyed
// instance go back once it is gone, and no one runs it meanwhile.
static void test_graph_trim_outside_the_mutex(void **unused) {
  (void)unused;
  halo_hal_cuda_device_t *device = state.device;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  uint32_t fast_us = 0;
  halo_hal_command_buffer_t *idle = graph_bytes_recording(1, x, y, &fast_us);
  halo_hal_command_buffer_t *next = graph_bytes_recording(1, x, y, &fast_us);
  halo_hal_queue_t *queue = queue_new();
  char message[512];
  assert_int_equal(graph_bytes_run(queue, idle, message, sizeof(message)),
                   HALO_STATUS_OK);
  uint32_t instances = 0;
  uint64_t small_bytes = graph_bytes_used(&instances);
  assert_int_equal(instances, 1);
  // Room for one: |next|'s first instance takes the room of |idle|'s.
  device->graph_bytes_limit = small_bytes;
  // Long enough that the query and the reaper, which take microseconds,
  // finish within it even on a loaded machine (a sanitizer build).
  enum { DESTROY_MS = 1500 };
  fake_driver_set_exec_destroy_ns(DESTROY_MS * 1000000ll);
  completion_t done;
  completion_init(&done);
  execute(queue, next, NULL, 0, NULL, 0, &done);
  int64_t deadline = halo_clock_now_ns() + 5000000000ll;
  while (!fake_driver_exec_destroys_running()) {
    if (halo_clock_now_ns() > deadline) fail_msg("[%s] no trim", state.mode);
    usleep(1000);
  }
  // While the driver tears |idle|'s instance down: its bytes still count,
  // the query answers at once, and the reaper frees |idle| meanwhile.
  int64_t start = halo_clock_now_ns();
  assert_int_equal(graph_bytes_used(&instances), small_bytes);
  assert_int_equal(instances, 1);
  halo_hal_command_buffer_destroy(idle);
  halo_hal_cuda_thread_flush(&device->reaper);
  int64_t took_ms = (halo_clock_now_ns() - start) / 1000000;
  int running = fake_driver_exec_destroys_running();
  print_message(
      "[%s] during a trim's teardown (%d ms): the query and the reaper took "
      "%lld ms\n",
      state.mode, DESTROY_MS, (long long)took_ms);
  if (!running) {
    fail_msg(
        "[%s] the usage query and the reaper waited %lld ms for a trim's "
        "teardown (graph_mutex held over cuGraphExecDestroy)",
        state.mode, (long long)took_ms);
  }
  if (completion_wait(&done) != HALO_STATUS_OK) {
    fail_msg("[%s] after a trim: %s", state.mode, done.message);
  }
  fake_driver_set_exec_destroy_ns(0);
  assert_int_equal(graph_bytes_used(&instances), small_bytes);
  assert_int_equal(instances, 1);
  // |next| runs again on its instance; nothing else was built.
  fake_counters_t before = fake_driver_counters();
  assert_int_equal(graph_bytes_run(queue, next, message, sizeof(message)),
                   HALO_STATUS_OK);
  fake_counters_t after = fake_driver_counters();
  assert_int_equal(after.instantiations, before.instantiations);
  device->graph_bytes_limit = HALO_HAL_CUDA_DEFAULT_GRAPH_BYTES;
  halo_hal_queue_destroy(queue);
  halo_hal_command_buffer_destroy(next);
  halo_hal_cuda_thread_flush(&device->reaper);
  assert_int_equal(graph_bytes_used(&instances), 0);
  assert_int_equal(instances, 0);
  device_free(x, N * 4);
  device_free(y, N * 4);
}

// A page of host memory registered with the device (GPU stores land in
// it); |out_address| is its device address.
static void *host_page_register(uint64_t *out_address) {
  halo_hal_allocator_t *allocator = state.device->base.allocator;
  void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(page != MAP_FAILED);
  assert_null(
      allocator->vtable->register_host(allocator, page, 4096, -1, out_address));
  return page;
}

static void host_page_unregister(void *page) {
  halo_hal_allocator_t *allocator = state.device->base.allocator;
  allocator->vtable->unregister_host(allocator, page);
  // The reaper unregisters (the fake does nothing); the page stays mapped
  // until the device's threads have stopped: unmapped at teardown.
  halo_hal_cuda_thread_flush(&state.device->reaper);
  munmap(page, 4096);
}

// An execution that waits for an instance at the bound holds its queue: a
// later execution of the same queue, of another recording, is issued after
// it (else its GPU store of the semaphore they signal would land first and
// the earlier, lower value after it, hiding the later one for ever).
static void test_bound_wait_holds_its_queue(void **unused) {
  (void)unused;
  halo_hal_cuda_device_t *device = state.device;
  uint64_t page_address = 0;
  void *page = host_page_register(&page_address);
  volatile uint64_t *word = (volatile uint64_t *)page + 8;
  uint64_t word_address = page_address + 64;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  uint32_t slow_us = 20000, fast_us = 0;
  halo_hal_command_buffer_t *big = graph_bytes_recording(8, x, y, &slow_us);
  halo_hal_command_buffer_t *small = graph_bytes_recording(1, x, y, &fast_us);
  halo_hal_queue_t *q0 = queue_new(), *q1 = queue_new();
  char message[512];
  assert_int_equal(graph_bytes_run(q0, big, message, sizeof(message)),
                   HALO_STATUS_OK);
  assert_int_equal(graph_bytes_run(q0, small, message, sizeof(message)),
                   HALO_STATUS_OK);
  // Room for one instance of each: |big|'s second must wait for its first.
  device->graph_bytes_limit = graph_bytes_used(NULL);
  fake_counters_t before = fake_driver_counters();
  completion_t first, second, third;
  atomic_uint order;
  atomic_init(&order, 0);
  completion_init(&first);
  completion_init(&second);
  completion_init(&third);
  second.order = third.order = &order;
  second.position = 0;
  third.position = 1;
  halo_hal_execution_signal_t signals[2] = {{word_address, 1, NULL},
                                            {word_address, 2, NULL}};
  execute(q0, big, NULL, 0, NULL, 0, &first);
  execute(q1, big, NULL, 0, &signals[0], 1, &second);
  execute(q1, small, NULL, 0, &signals[1], 1, &third);
  assert_int_equal(completion_wait(&first), HALO_STATUS_OK);
  assert_int_equal(completion_wait(&second), HALO_STATUS_OK);
  assert_int_equal(completion_wait(&third), HALO_STATUS_OK);
  assert_true(second.in_order);
  assert_true(third.in_order);
  assert_int_equal(*word, 2);
  fake_counters_t after = fake_driver_counters();
  assert_int_equal(after.store_regressions, before.store_regressions);
  assert_true(graph_bytes_used(NULL) <= device->graph_bytes_limit);
  device->graph_bytes_limit = HALO_HAL_CUDA_DEFAULT_GRAPH_BYTES;
  halo_hal_queue_destroy(q0);
  halo_hal_queue_destroy(q1);
  halo_hal_command_buffer_destroy(big);
  halo_hal_command_buffer_destroy(small);
  device_free(x, N * 4);
  device_free(y, N * 4);
  host_page_unregister(page);
  // The fake remembers the stores it saw: a fresh tally (as
  // test_parked_executions_keep_queue_order).
  fake_driver_reset_counters();
}

// A word signaled 1 by an execution parked on a wait fence (its producer,
// on |q0|, parked for a graph instance: every instance of |busy| in use
// on |fills|) on |q1|, then 2 by an execution of another recording on
// |q1| or |q2| (|second_queue|): the GPU stores must go 1 then 2.
typedef struct parked_case_t {
  void *page;
  uint64_t page_address;
  volatile uint64_t *word;  // at 64
  uint64_t x, y;
  uint32_t slow_us, fast_us;
  halo_hal_command_buffer_t *busy, *consumer, *other;
  halo_hal_queue_t *fills, *q0, *q1, *q2;
  fake_counters_t before;
} parked_case_t;

static void parked_case_open(parked_case_t *c) {
  memset(c, 0, sizeof(*c));
  c->page = host_page_register(&c->page_address);
  c->word = (volatile uint64_t *)c->page + 8;
  c->x = device_allocate(N * 4);
  c->y = device_allocate(N * 4);
  c->slow_us = 30000;
  c->busy = graph_bytes_recording(1, c->x, c->y, &c->slow_us);
  c->consumer = graph_bytes_recording(1, c->x, c->y, &c->fast_us);
  c->other = graph_bytes_recording(2, c->x, c->y, &c->fast_us);
  c->fills = queue_new();
  c->q0 = queue_new();
  c->q1 = queue_new();
  c->q2 = queue_new();
  char message[512];
  // Each recording has an instance already: only |busy| lacks one below.
  assert_int_equal(
      graph_bytes_run(c->q1, c->consumer, message, sizeof(message)),
      HALO_STATUS_OK);
  assert_int_equal(graph_bytes_run(c->q2, c->other, message, sizeof(message)),
                   HALO_STATUS_OK);
  c->before = fake_driver_counters();
}

static void parked_case_run(parked_case_t *c, halo_hal_queue_t *second_queue) {
  static completion_t fill[TEST_GRAPH_INSTANCES];
  for (int f = 0; f < TEST_GRAPH_INSTANCES; ++f) {
    completion_init(&fill[f]);
    execute(c->fills, c->busy, NULL, 0, NULL, 0, &fill[f]);
  }
  completion_t producer, first, second;
  completion_init(&producer);
  completion_init(&first);
  completion_init(&second);
  halo_hal_fence_t *fence = NULL;
  execute_fenced(c->q0, c->busy, NULL, 0, NULL, 0, &fence, NULL, 0, &producer);
  uint64_t word_address = c->page_address + 64;
  halo_hal_execution_signal_t signals[2] = {{word_address, 1, NULL},
                                            {word_address, 2, NULL}};
  execute_fenced(c->q1, c->consumer, NULL, 0, &fence, 1, NULL, &signals[0], 1,
                 &first);
  execute(second_queue, c->other, NULL, 0, &signals[1], 1, &second);
  assert_int_equal(completion_wait(&second), HALO_STATUS_OK);
  assert_int_equal(completion_wait(&producer), HALO_STATUS_OK);
  assert_int_equal(completion_wait(&first), HALO_STATUS_OK);
  for (int f = 0; f < TEST_GRAPH_INSTANCES; ++f) {
    assert_int_equal(completion_wait(&fill[f]), HALO_STATUS_OK);
  }
  halo_hal_fence_release(fence);
  assert_int_equal(*c->word, 2);
}

static void parked_case_close(parked_case_t *c) {
  fake_counters_t after = fake_driver_counters();
  assert_int_equal(after.store_regressions, c->before.store_regressions);
  halo_hal_queue_destroy(c->fills);
  halo_hal_queue_destroy(c->q0);
  halo_hal_queue_destroy(c->q1);
  halo_hal_queue_destroy(c->q2);
  halo_hal_command_buffer_destroy(c->busy);
  halo_hal_command_buffer_destroy(c->consumer);
  halo_hal_command_buffer_destroy(c->other);
  device_free(c->x, N * 4);
  device_free(c->y, N * 4);
  host_page_unregister(c->page);
  fake_driver_reset_counters();
}

// An execution parked on a wait fence (its producer parked for a graph
// instance) holds its queue too: the queue's next execution, of another
// recording, signaling the same semaphore higher, is issued after it, so
// the semaphore's GPU stores go 1 then 2.
static void test_fence_wait_holds_its_queue(void **unused) {
  (void)unused;
  static parked_case_t c;
  parked_case_open(&c);
  parked_case_run(&c, c.q1);
  parked_case_close(&c);
}

// A semaphore signaled on two queues, 1 on the first and 2 on the second:
// the first's execution parks (its wait fence's producer waits for a graph
// instance) and the second's is issued before it. The first's GPU store
// is then left out (it would put 1 back over 2 and hide 2 from its
// watchers for ever); it completes through its event. Likewise a store
// below the value its slot holds already (a host signal went past it).
static void test_store_behind_a_later_signal(void **unused) {
  (void)unused;
  static parked_case_t c;
  parked_case_open(&c);
  parked_case_run(&c, c.q2);
  void *page = c.page;
  uint64_t page_address = c.page_address;
  halo_hal_queue_t *q0 = c.q0, *q1 = c.q1;
  halo_hal_command_buffer_t *busy = c.busy, *consumer = c.consumer;
  // Past |word| (at 64).
  halo_timeline_slot_t *slot = (halo_timeline_slot_t *)page + 2;
  uint64_t value_address = page_address + 2 * sizeof(halo_timeline_slot_t) +
                           (uint64_t)offsetof(halo_timeline_slot_t, value);
  // A host signal took the slot to 5: a store of 3 is left out, 6 is not.
  atomic_store(&slot->value, 5);
  halo_hal_execution_signal_t three = {value_address, 3, slot};
  halo_hal_execution_signal_t six = {value_address, 6, slot};
  completion_t behind, ahead;
  completion_init(&behind);
  completion_init(&ahead);
  execute(q1, consumer, NULL, 0, &three, 1, &behind);
  assert_int_equal(completion_wait(&behind), HALO_STATUS_OK);
  assert_int_equal(atomic_load(&slot->value), 5);
  execute(q1, consumer, NULL, 0, &six, 1, &ahead);
  assert_int_equal(completion_wait(&ahead), HALO_STATUS_OK);
  assert_int_equal(atomic_load(&slot->value), 6);
  // A store left out for its slot's value alone does not become the
  // semaphore's last: a later store on another stream still waits for the
  // one made before it (8, still running: 11 must not land before it).
  halo_hal_execution_signal_t eight = {value_address, 8, slot};
  halo_hal_execution_signal_t nine = {value_address, 9, slot};
  halo_hal_execution_signal_t eleven = {value_address, 11, slot};
  completion_t running, skipped, later;
  completion_init(&running);
  completion_init(&skipped);
  completion_init(&later);
  halo_hal_fence_t *running_fence = NULL;  // (it records an event)
  execute_fenced(q0, busy, NULL, 0, NULL, 0, &running_fence, &eight, 1,
                 &running);
  atomic_store(&slot->value, 10);
  execute(q1, consumer, NULL, 0, &nine, 1, &skipped);
  execute(q1, consumer, NULL, 0, &eleven, 1, &later);
  assert_int_equal(completion_wait(&running), HALO_STATUS_OK);
  assert_int_equal(completion_wait(&skipped), HALO_STATUS_OK);
  assert_int_equal(completion_wait(&later), HALO_STATUS_OK);
  assert_int_equal(atomic_load(&slot->value), 11);
  halo_hal_fence_release(running_fence);
  // An execution with a store left out (12, behind 13 still running) wakes
  // the sleepers of its other slots when it finishes, its store of 7 made.
  halo_timeline_slot_t *second_slot = (halo_timeline_slot_t *)page + 3;
  uint64_t other_address = page_address + 3 * sizeof(halo_timeline_slot_t) +
                           (uint64_t)offsetof(halo_timeline_slot_t, value);
  halo_hal_execution_signal_t thirteen = {value_address, 13, slot};
  halo_hal_execution_signal_t both[2] = {{value_address, 12, slot},
                                         {other_address, 7, second_slot}};
  completion_t higher, lower;
  completion_init(&higher);
  completion_init(&lower);
  lower.slot = second_slot;
  uint32_t epoch = atomic_load(&second_slot->epoch);
  execute_fenced(q0, busy, NULL, 0, NULL, 0, &running_fence, &thirteen, 1,
                 &higher);
  execute(q1, consumer, NULL, 0, both, 2, &lower);
  assert_int_equal(completion_wait(&lower), HALO_STATUS_OK);
  assert_int_equal(atomic_load(&second_slot->value), 7);
  assert_true(lower.slot_epoch != epoch);
  assert_int_equal(completion_wait(&higher), HALO_STATUS_OK);
  assert_int_equal(atomic_load(&slot->value), 13);
  halo_hal_fence_release(running_fence);
  parked_case_close(&c);
}

// A dispatch whose kernel parameters take more than 8 KiB (as laid out) is
// refused when prepared, naming the command and the bytes: past about 16
// KiB the driver sets aside gigabytes per context for them.
static void test_parameter_bytes_bound(void **unused) {
  (void)unused;
  static uint8_t big[4096];
  uint32_t n = N, us = 0;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  for (int constants = 0; constants < 3; ++constants) {
    recorder_t recorder;
    recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 0);
    arg_t args[7] = {arg_buffer(direct_ref(x, N * 4)),
                     arg_buffer(direct_ref(y, N * 4)), arg_constant(&n, 4),
                     arg_constant(&us, 4)};
    for (int c = 0; c < constants; ++c) {
      args[4 + c] = arg_constant(big, sizeof(big));
    }
    recorder_dispatch(&recorder, KERNEL_SLOW, 1, args, 4 + constants);
    halo_hal_command_buffer_t *command_buffer = NULL;
    halo_status_t status = halo_hal_cuda_command_buffer_prepare(
        state.device, &recorder.recording, &command_buffer);
    if (constants < 2) {
      // 64 and 4,160 bytes: taken.
      if (status) fail_msg("prepare: %s", halo_status_message(status));
      halo_hal_command_buffer_destroy(command_buffer);
      continue;
    }
    // 8,256 bytes.
    if (halo_status_code(status) != HALO_STATUS_INVALID_ARGUMENT ||
        !strstr(halo_status_message(status), "command 0 (dispatch)") ||
        !strstr(halo_status_message(status), "8256 bytes of kernel")) {
      fail_msg("a dispatch of 8256 bytes of parameters: %s",
               status ? halo_status_message(status) : "(prepared)");
    }
    halo_status_free(status);
    // The recording stayed the caller's.
    halo_hal_recording_deinitialize(&recorder.recording);
  }
  // Exactly the bound (two 4096-byte constants alone): taken.
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 0);
  arg_t bound[2] = {arg_constant(big, sizeof(big)),
                    arg_constant(big, sizeof(big))};
  recorder_dispatch(&recorder, KERNEL_SLOW, 1, bound, 2);
  halo_hal_command_buffer_t *command_buffer = NULL;
  halo_status_t status = halo_hal_cuda_command_buffer_prepare(
      state.device, &recorder.recording, &command_buffer);
  if (status) fail_msg("8192 bytes: %s", halo_status_message(status));
  halo_hal_command_buffer_destroy(command_buffer);
  device_free(x, N * 4);
  device_free(y, N * 4);
}

// More executions of one queue than its recording has graph instances,
// submitted back to back: those parked for an instance issue in the
// queue's order (a later one never takes the instance given back for an
// earlier parked one), so their GPU stores never go backwards and each
// completes, in order. Before, a later execution on the submission thread
// could take the instance freed for the earlier one woken meanwhile: the
// earlier one's store then overwrote the later value, and the later
// execution, watched through its store, never completed.
static void test_parked_executions_keep_queue_order(void **unused) {
  (void)unused;
  uint64_t page_address = 0;
  void *page = host_page_register(&page_address);
  volatile uint64_t *word = (volatile uint64_t *)page + 8;
  uint64_t word_address = page_address + 64;
  uint32_t n = N;
  uint32_t slow_us = 20;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 0);
  arg_t args[4] = {arg_buffer(direct_ref(x, N * 4)),
                   arg_buffer(direct_ref(y, N * 4)), arg_constant(&n, 4),
                   arg_constant(&slow_us, 4)};
  recorder_dispatch(&recorder, KERNEL_SLOW, 1, args, 4);
  halo_hal_command_buffer_t *command_buffer = recorder_end(&recorder);
  halo_hal_queue_t *queue = queue_new();
  fake_counters_t before = fake_driver_counters();
  // Three rounds of 2000: without the order kept, a run failed about one
  // round in four on the development VM.
  enum { COUNT = 2000, ROUNDS = 3 };
  static completion_t completions[COUNT];
  static halo_hal_execution_signal_t signals[COUNT];
  for (uint32_t round = 0; round < ROUNDS; ++round) {
    atomic_uint order = 0;
    for (uint32_t i = 0; i < COUNT; ++i) {
      completion_init(&completions[i]);
      completions[i].order = &order;
      completions[i].position = i;
      signals[i] = (halo_hal_execution_signal_t){
          word_address, (uint64_t)round * COUNT + i + 1, NULL};
      execute(queue, command_buffer, NULL, 0, &signals[i], 1, &completions[i]);
    }
    uint32_t out_of_order = 0;
    for (uint32_t i = 0; i < COUNT; ++i) {
      assert_int_equal(completion_wait(&completions[i]), HALO_STATUS_OK);
      if (!completions[i].in_order) ++out_of_order;
    }
    assert_int_equal(out_of_order, 0);
    assert_int_equal(*word, (uint64_t)(round + 1) * COUNT);
  }
  fake_counters_t after = fake_driver_counters();
  assert_true(after.instantiations - before.instantiations <=
              TEST_GRAPH_INSTANCES);
  assert_int_equal(after.store_regressions, before.store_regressions);
  halo_hal_queue_destroy(queue);
  halo_hal_command_buffer_destroy(command_buffer);
  device_free(x, N * 4);
  device_free(y, N * 4);
  host_page_unregister(page);
  // The fake remembers the stores it saw (the first 1024): a later test's
  // page at this address would start below them. The group's checks so
  // far, then a fresh tally.
  after = fake_driver_counters();
  assert_int_equal(after.exec_overlaps, 0);
  assert_int_equal(after.destroyed_pending, 0);
  assert_int_equal(after.missing_uploads, 0);
  assert_int_equal(after.store_regressions, 0);
  fake_driver_reset_counters();
}

// A slow execution on one queue signals value 1, a fast one on another
// queue value 2 of the same semaphore right after: the second store waits
// for the first (never backwards), and each store lands before its
// completion is reported.
static void test_gpu_stores(void **unused) {
  (void)unused;
  uint64_t page_address = 0;
  void *page = host_page_register(&page_address);
  volatile uint64_t *word = (volatile uint64_t *)page + 8;
  uint64_t word_address = page_address + 64;
  uint32_t n = N;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  uint64_t y2 = device_allocate(N * 4);
  recorder_t recorder;
  uint32_t slow_us = 30000, fast_us = 0;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 0);
  arg_t slow_args[4] = {arg_buffer(direct_ref(x, N * 4)),
                        arg_buffer(direct_ref(y, N * 4)), arg_constant(&n, 4),
                        arg_constant(&slow_us, 4)};
  recorder_dispatch(&recorder, KERNEL_SLOW, 1, slow_args, 4);
  halo_hal_command_buffer_t *slow = recorder_end(&recorder);
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 0);
  arg_t fast_args[4] = {arg_buffer(direct_ref(x, N * 4)),
                        arg_buffer(direct_ref(y2, N * 4)), arg_constant(&n, 4),
                        arg_constant(&fast_us, 4)};
  recorder_dispatch(&recorder, KERNEL_SLOW, 1, fast_args, 4);
  halo_hal_command_buffer_t *fast = recorder_end(&recorder);
  halo_hal_queue_t *first = queue_new(), *second = queue_new();
  for (int round = 0; round < 3; ++round) {
    uint64_t base = (uint64_t)round * 2;
    halo_hal_execution_signal_t one = {word_address, base + 1, NULL};
    halo_hal_execution_signal_t two = {word_address, base + 2, NULL};
    completion_t a, b;
    completion_init(&a);
    completion_init(&b);
    a.word = b.word = word;
    a.value = base + 1;
    b.value = base + 2;
    execute(first, slow, NULL, 0, &one, 1, &a);
    execute(second, fast, NULL, 0, &two, 1, &b);
    assert_int_equal(completion_wait(&b), HALO_STATUS_OK);
    assert_int_equal(completion_wait(&a), HALO_STATUS_OK);
    assert_true(a.stored_first);
    assert_true(b.stored_first);
    assert_int_equal(*word, base + 2);
  }
  fake_counters_t counters = fake_driver_counters();
  assert_int_equal(counters.store_regressions, 0);
  halo_hal_queue_destroy(first);
  halo_hal_queue_destroy(second);
  halo_hal_command_buffer_destroy(slow);
  halo_hal_command_buffer_destroy(fast);
  device_free(x, N * 4);
  device_free(y, N * 4);
  device_free(y2, N * 4);
  host_page_unregister(page);
}

// |signals| set to store |value| into the first |count| (at most 16) words
// of |page| (device address |page_address|), and |completion| to check
// that the last holds it when it arrives.
static void signal_words(halo_hal_execution_signal_t *signals,
                         completion_t *completion, void *page,
                         uint64_t page_address, uint32_t count,
                         uint64_t value) {
  assert_true(count <= 16);
  for (uint32_t i = 0; i < count; ++i) {
    signals[i] =
        (halo_hal_execution_signal_t){page_address + 8 * i, value, NULL};
  }
  completion_init(completion);
  completion->word = (volatile uint64_t *)page + count - 1;
  completion->value = value;
}

// Each of the first |count| words of |page| holds |value|.
static void assert_words(const void *page, uint32_t count, uint64_t value) {
  for (uint32_t i = 0; i < count; ++i) {
    assert_int_equal(((const volatile uint64_t *)page)[i], value);
  }
}

// Runs |command_buffer| on |queue| once, signalling |count| words of
// |page| (device address |page_address|) to |value|, and checks each word
// holds it when the completion arrives.
static void execute_signalling(halo_hal_queue_t *queue,
                               halo_hal_command_buffer_t *command_buffer,
                               void *page, uint64_t page_address,
                               uint32_t count, uint64_t value) {
  halo_hal_execution_signal_t signals[16];
  completion_t completion;
  signal_words(signals, &completion, page, page_address, count, value);
  execute(queue, command_buffer, NULL, 0, signals, count, &completion);
  assert_int_equal(completion_wait(&completion), HALO_STATUS_OK);
  assert_true(completion.stored_first);
  assert_words(page, count, value);
}

// A GPU store into a timeline slot wakes the slot's futex sleepers (an
// epoch bump) before the execution's completion is reported: a client
// asleep on its semaphore does not wait for the daemon's host path, which
// signals only after the completion.
static void test_gpu_store_wakes_sleepers(void **unused) {
  (void)unused;
  uint64_t page_address = 0;
  void *page = host_page_register(&page_address);
  halo_timeline_slot_t *slot = (halo_timeline_slot_t *)page + 1;
  uint64_t value_address = page_address + sizeof(halo_timeline_slot_t) +
                           (uint64_t)offsetof(halo_timeline_slot_t, value);
  uint32_t n = N, us = 2000;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 0);
  arg_t args[4] = {arg_buffer(direct_ref(x, N * 4)),
                   arg_buffer(direct_ref(y, N * 4)), arg_constant(&n, 4),
                   arg_constant(&us, 4)};
  recorder_dispatch(&recorder, KERNEL_SLOW, 1, args, 4);
  halo_hal_command_buffer_t *slow = recorder_end(&recorder);
  halo_hal_queue_t *queue = queue_new();
  for (uint64_t value = 1; value <= 3; ++value) {
    uint32_t before = atomic_load_explicit(&slot->epoch, memory_order_acquire);
    halo_hal_execution_signal_t signal = {value_address, value, slot};
    completion_t completion;
    completion_init(&completion);
    completion.word = (volatile uint64_t *)&slot->value;
    completion.value = value;
    completion.slot = slot;
    execute(queue, slow, NULL, 0, &signal, 1, &completion);
    assert_int_equal(completion_wait(&completion), HALO_STATUS_OK);
    assert_true(completion.stored_first);
    // Woken exactly once by the driver for this store, before the report.
    assert_int_equal(completion.slot_epoch, before + 1);
    assert_int_equal(atomic_load(&slot->value), value);
  }
  halo_hal_queue_destroy(queue);
  halo_hal_command_buffer_destroy(slow);
  device_free(x, N * 4);
  device_free(y, N * 4);
  host_page_unregister(page);
}

static bool completion_done(completion_t *completion) {
  pthread_mutex_lock(&completion->mutex);
  bool done = completion->done;
  pthread_mutex_unlock(&completion->mutex);
  return done;
}

// A recording of the slow kernel over slots 0 (x) and 1 (y): y = x + 1
// after |us| microseconds.
static halo_hal_command_buffer_t *slow_recording(uint32_t *n, uint32_t *us) {
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 2);
  arg_t args[4] = {arg_buffer(slot_ref(0, 0)), arg_buffer(slot_ref(1, 0)),
                   arg_constant(n, 4), arg_constant(us, 4)};
  recorder_dispatch(&recorder, KERNEL_SLOW, N / 64, args, 4);
  return recorder_end(&recorder);
}

// Queues are unordered: a long execution pending on queue A must not hold
// up the completion of a short one submitted after it on queue B (the
// completion thread used to block in cuEventSynchronize on A's event when
// A's stream was the only one pending).
static void test_independent_queues(void **unused) {
  (void)unused;
  uint32_t n = N, long_us = 300000, short_us = 0;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  uint64_t y2 = device_allocate(N * 4);
  halo_hal_command_buffer_t *slow = slow_recording(&n, &long_us);
  halo_hal_command_buffer_t *fast = slow_recording(&n, &short_us);
  halo_hal_queue_t *a = queue_new(), *b = queue_new();
  halo_hal_binding_t slow_bindings[2] = {{x, N * 4}, {y, N * 4}};
  halo_hal_binding_t fast_bindings[2] = {{x, N * 4}, {y2, N * 4}};
  completion_t long_done;
  completion_init(&long_done);
  execute(a, slow, slow_bindings, 2, NULL, 0, &long_done);
  // Long past the completion thread's spin: it is waiting on A by now.
  usleep(30000);
  double worst_ms = 0;
  for (int round = 0; round < 3; ++round) {
    completion_t short_done;
    completion_init(&short_done);
    int64_t start = halo_clock_now_ns();
    execute(b, fast, fast_bindings, 2, NULL, 0, &short_done);
    assert_int_equal(completion_wait(&short_done), HALO_STATUS_OK);
    double ms = (double)(halo_clock_now_ns() - start) / 1e6;
    if (ms > worst_ms) worst_ms = ms;
    // B completed while A is still running.
    assert_false(completion_done(&long_done));
    usleep(20000);
  }
  print_message(
      "[%s] a short execution on queue B completed %.2f ms (worst of 3) "
      "after its submission while a 300 ms one was pending on queue A\n",
      state.mode, worst_ms);
  assert_true(worst_ms < 100.0);
  assert_int_equal(completion_wait(&long_done), HALO_STATUS_OK);
  halo_hal_queue_destroy(a);
  halo_hal_queue_destroy(b);
  halo_hal_command_buffer_destroy(slow);
  halo_hal_command_buffer_destroy(fast);
  device_free(x, N * 4);
  device_free(y, N * 4);
  device_free(y2, N * 4);
}

// The event after each execution: recording a BLOCKING_SYNC one costs the
// submission thread several times a plain one, so under THREAD completion
// only work the sleeper may wait on gets one (a recording not seen to
// finish yet, or seen to be long); work seen to be short gets a plain event
// and is polled to its end. The sleeper never synchronizes on a plain event
// (that would spin a core). HOST_FUNC needs no sleeper: plain events only.
static void test_event_kinds(void **unused) {
  (void)unused;
  bool thread =
      state.device->options.completion == HALO_HAL_CUDA_COMPLETION_THREAD;
  uint32_t n = N, long_us = 20000, short_us = 0;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  halo_hal_command_buffer_t *slow = slow_recording(&n, &long_us);
  halo_hal_command_buffer_t *fast = slow_recording(&n, &short_us);
  halo_hal_queue_t *queue = queue_new();
  halo_hal_binding_t bindings[2] = {{x, N * 4}, {y, N * 4}};
  fake_driver_reset_counters();
  // The first execution of a recording: its duration is not known yet.
  execute_and_wait(queue, fast, bindings, 2);
  assert_int_equal(fake_driver_counters().blocking_records, thread ? 1 : 0);
  // Seen to be short: plain events.
  enum { kFastRounds = 20 };
  for (int i = 0; i < kFastRounds; ++i) {
    // The duration the poller saw, set here: a slow machine or a sanitizer
    // cannot make it long.
    halo_hal_cuda_command_buffer_record_duration(fast, 1000);
    execute_and_wait(queue, fast, bindings, 2);
  }
  fake_counters_t counters = fake_driver_counters();
  print_message(
      "[%s] %d of %d short executions recorded a BLOCKING_SYNC "
      "event\n",
      state.mode, counters.blocking_records, kFastRounds + 1);
  assert_int_equal(counters.blocking_records, thread ? 1 : 0);
  // A recording seen to take 20 ms keeps BLOCKING_SYNC events, which the
  // sleeper waits on.
  fake_driver_reset_counters();
  for (int i = 0; i < 3; ++i) execute_and_wait(queue, slow, bindings, 2);
  counters = fake_driver_counters();
  assert_int_equal(counters.blocking_records, thread ? 3 : 0);
  assert_int_equal(counters.spin_syncs, 0);
  halo_hal_queue_destroy(queue);
  halo_hal_command_buffer_destroy(slow);
  halo_hal_command_buffer_destroy(fast);
  device_free(x, N * 4);
  device_free(y, N * 4);
}

// Waits until the submission thread sleeps with nothing queued, then lets
// more than its spin window pass: the next execution finds the device idle.
static void submission_wait_idle(void) {
  halo_hal_cuda_thread_t *thread = &state.device->submission;
  for (;;) {
    pthread_mutex_lock(&thread->mutex);
    bool asleep = thread->sleeping && !thread->tasks.head;
    pthread_mutex_unlock(&thread->mutex);
    if (asleep) break;
    usleep(100);
  }
  int64_t until = halo_clock_now_ns() + 3 * HALO_HAL_CUDA_SUBMISSION_SPIN_NS;
  while (halo_clock_now_ns() < until) sched_yield();
}

// A queue, a one-element recording of the slow kernel without its sleep
// (fast) and its two buffers, for the tests of the caller path (which turn
// it on).
typedef struct caller_case_t {
  uint64_t x, y;
  halo_hal_command_buffer_t *fast;
  halo_hal_queue_t *queue;
  halo_hal_binding_t bindings[2];
} caller_case_t;

static void caller_case_open(caller_case_t *c) {
  uint32_t n = 1, short_us = 0;
  c->x = device_allocate(N * 4);
  c->y = device_allocate(N * 4);
  c->fast = slow_recording(&n, &short_us);
  c->queue = queue_new();
  c->bindings[0] = (halo_hal_binding_t){c->x, N * 4};
  c->bindings[1] = (halo_hal_binding_t){c->y, N * 4};
  state.device->issue_on_caller = true;
}

static void caller_case_close(caller_case_t *c) {
  halo_hal_queue_destroy(c->queue);
  halo_hal_command_buffer_destroy(c->fast);
  device_free(c->x, N * 4);
  device_free(c->y, N * 4);
}

// An execution offered while the submission thread sleeps idle (nothing
// offered within its spin window) is issued on the caller, with the
// device's context made current there (the fake fails a launch without
// one); seen to be short, it is also waited for and completed there, so
// that no thread has to wake up for it. Offered back to back (load), the
// executions go to the submission thread, pipelined, and complete on the
// completion path.
static void test_idle_issue_on_caller(void **unused) {
  (void)unused;
  caller_case_t c;
  caller_case_open(&c);
  // This thread has no context current: issuing here makes the device's.
  assert_int_equal(state.device->cu->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
  // Offers long apart (the first may still go to the thread: the offer
  // before it may have come within the window). Seen to be short, each is
  // waited for and completed here where it finishes within twice its
  // duration (the fake's streams spin meanwhile, as a GPU that is awake; a
  // round may still miss on a busy machine: rounds go on until three
  // completed here).
  fake_driver_set_stream_spin(2000000);
  enum { kRounds = 40 };
  int issued_here = 0, here = 0, rounds = 0;
  for (; rounds < kRounds && here < 3; ++rounds) {
    submission_wait_idle();
    halo_hal_cuda_command_buffer_record_duration(c.fast, 20000);
    int launches = fake_driver_thread_launches();
    completion_t done;
    completion_init(&done);
    execute(c.queue, c.fast, c.bindings, 2, NULL, 0, &done);
    issued_here += fake_driver_thread_launches() - launches;
    pthread_mutex_lock(&done.mutex);
    if (done.done && pthread_equal(done.thread, pthread_self())) ++here;
    pthread_mutex_unlock(&done.mutex);
    assert_int_equal(completion_wait(&done), HALO_STATUS_OK);
  }
  fake_driver_set_stream_spin(0);
  // A recording not issued before: its set-up (module functions, a graph
  // instance, pinned staging) is the submission thread's, even with the
  // device idle; issued once, it is issued here.
  uint32_t n = 1, short_us = 0;
  halo_hal_command_buffer_t *fresh = slow_recording(&n, &short_us);
  for (int round = 0; round < 2; ++round) {
    submission_wait_idle();
    int launches = fake_driver_thread_launches();
    completion_t done;
    completion_init(&done);
    execute(c.queue, fresh, c.bindings, 2, NULL, 0, &done);
    assert_int_equal(fake_driver_thread_launches(), launches + round);
    assert_int_equal(completion_wait(&done), HALO_STATUS_OK);
  }
  halo_hal_command_buffer_destroy(fresh);
  // Back to back: the first may go here, the rest to the submission thread.
  enum { kBurst = 40 };
  completion_t burst[kBurst];
  int launches = fake_driver_thread_launches();
  for (int i = 0; i < kBurst; ++i) {
    completion_init(&burst[i]);
    execute(c.queue, c.fast, c.bindings, 2, NULL, 0, &burst[i]);
  }
  int burst_here = fake_driver_thread_launches() - launches;
  int completed_here = 0;
  for (int i = 0; i < kBurst; ++i) {
    assert_int_equal(completion_wait(&burst[i]), HALO_STATUS_OK);
    if (pthread_equal(burst[i].thread, pthread_self())) ++completed_here;
  }
  print_message(
      "[%s] offers long apart: %d of %d issued here, %d completed here; back "
      "to back, %d of %d issued and %d completed here\n",
      state.mode, issued_here, rounds, here, burst_here, kBurst,
      completed_here);
  assert_true(issued_here >= rounds - 1);
  assert_true(here >= 1);
  assert_true(burst_here <= kBurst / 5);
  assert_true(completed_here <= kBurst / 5);
  caller_case_close(&c);
}

// Issued by the submission thread (not on the caller), offers long apart:
// the completion path has gone to sleep between them (THREAD: the poller
// idle; HOST_FUNC: always the driver's thread), so the submission thread,
// with nothing else posted, waits for each short execution itself and
// completes it there instead of waking the completion path. Off
// (wait_on_submission false), none completes there.
static void test_short_work_finished_on_submission(void **unused) {
  (void)unused;
  caller_case_t c;
  caller_case_open(&c);
  state.device->issue_on_caller = false;
  fake_driver_set_stream_spin(2000000);
  // On: rounds until three completed there (a round may miss on a busy
  // machine); off: ten rounds.
  int on_submission[2] = {0, 0}, rounds[2] = {0, 0};
  for (int wait = 1; wait >= 0; --wait) {
    state.device->wait_on_submission = wait;
    int most = wait ? 40 : 10;
    for (; rounds[wait] < most && !(wait && on_submission[wait] >= 3);
         ++rounds[wait]) {
      submission_wait_idle();
      halo_hal_cuda_command_buffer_record_duration(c.fast, 20000);
      completion_t done;
      completion_init(&done);
      execute(c.queue, c.fast, c.bindings, 2, NULL, 0, &done);
      assert_int_equal(completion_wait(&done), HALO_STATUS_OK);
      if (pthread_equal(done.thread, state.device->submission.thread)) {
        ++on_submission[wait];
      }
    }
  }
  fake_driver_set_stream_spin(0);
  print_message(
      "[%s] offers long apart on the submission thread: %d of %d completed "
      "there; with the wait off, %d of %d\n",
      state.mode, on_submission[1], rounds[1], on_submission[0], rounds[0]);
  assert_true(on_submission[1] >= 1);
  assert_int_equal(on_submission[0], 0);
  state.device->wait_on_submission = true;
  state.device->issue_on_caller = true;
  caller_case_close(&c);
}

// Long work (past short work) is seen to be long on both completion paths,
// from its first execution on an idle device: the issuing thread then
// stops waiting for it itself (before, under HOST_FUNC only those waits
// recorded durations: one gave up after its own ~20 us and recorded that,
// so every 4th execution of a long recording was waited for in vain).
static void test_long_work_seen_long(void **unused) {
  (void)unused;
  caller_case_t c;
  caller_case_open(&c);
  uint32_t n = 1, long_us = 2000;
  halo_hal_command_buffer_t *slow = slow_recording(&n, &long_us);
  for (int round = 0; round < 3; ++round) {
    submission_wait_idle();
    completion_t done;
    completion_init(&done);
    execute(c.queue, slow, c.bindings, 2, NULL, 0, &done);
    assert_int_equal(completion_wait(&done), HALO_STATUS_OK);
  }
  int64_t expected = halo_hal_cuda_command_buffer_expected_ns(slow);
  print_message("[%s] a 2 ms recording is expected to take %.1f us\n",
                state.mode, (double)expected / 1e3);
  assert_true(expected >= 1000000);
  halo_hal_command_buffer_destroy(slow);
  caller_case_close(&c);
}

// A test's own driver table: *|copy| starts as the device's (returned, to
// put back), and driver_table_use installs a table once the device's
// submission thread and reaper have done what they had (both read it). A
// queue's completion thread keeps the table it started with: install
// before opening the queue, put back after closing it.
static const halo_hal_cuda_symbols_t *driver_table_copy(
    halo_hal_cuda_symbols_t *copy) {
  *copy = *state.device->cu;
  return state.device->cu;
}

static void driver_table_use(const halo_hal_cuda_symbols_t *table) {
  submission_wait_idle();
  halo_hal_cuda_thread_flush(&state.device->reaper);
  state.device->cu = table;
}

// A failure deferred until the work enqueued before it finished (here the
// signal's store call fails after the launch) is measured from when it
// was handed on, as any execution: its recording is not then seen to take
// as long as the machine has been up (the host function measured from an
// unset start).
static atomic_bool test_writes_fail;
static CUresult (*test_real_write)(CUstream, CUdeviceptr, cuuint64_t,
                                   unsigned int);
static CUresult test_failing_write(CUstream stream, CUdeviceptr address,
                                   cuuint64_t value, unsigned int flags) {
  if (atomic_load(&test_writes_fail)) return CUDA_ERROR_INVALID_VALUE;
  return test_real_write(stream, address, value, flags);
}

static void test_deferred_failure_duration(void **unused) {
  (void)unused;
  // The failing call and the stores on the stream (so that it comes after
  // the launch) in place before the queue's threads start, which read the
  // device's table; the failure armed later.
  static halo_hal_cuda_symbols_t failing;
  const halo_hal_cuda_symbols_t *saved = driver_table_copy(&failing);
  test_real_write = failing.cuStreamWriteValue64;
  failing.cuStreamWriteValue64 = test_failing_write;
  atomic_store(&test_writes_fail, false);
  driver_table_use(&failing);
  bool stores = state.device->graph_stores;
  state.device->graph_stores = false;
  caller_case_t c;
  caller_case_open(&c);
  uint64_t page_address = 0;
  void *page = host_page_register(&page_address);
  halo_hal_execution_signal_t signal = {page_address, 1, NULL};
  completion_t done;
  completion_init(&done);
  execute(c.queue, c.fast, c.bindings, 2, &signal, 1, &done);
  assert_int_equal(completion_wait(&done), HALO_STATUS_OK);
  atomic_store(&test_writes_fail, true);
  signal.value = 2;
  completion_init(&done);
  execute(c.queue, c.fast, c.bindings, 2, &signal, 1, &done);
  halo_status_code_t code = completion_wait(&done);
  atomic_store(&test_writes_fail, false);
  submission_wait_idle();
  int64_t expected = halo_hal_cuda_command_buffer_expected_ns(c.fast);
  print_message("[%s] the deferred failure: %s; expected duration %.1f us\n",
                state.mode, halo_status_code_name(code),
                (double)expected / 1e3);
  assert_int_not_equal(code, HALO_STATUS_OK);
  assert_true(expected < 1000000000);
  host_page_unregister(page);
  caller_case_close(&c);
  driver_table_use(saved);
  state.device->graph_stores = stores;
}

// HOST_FUNC: a query of the watched event that fails without a sticky
// error (here INVALID_HANDLE, once) leaves the executions to their host
// functions, which still run: the watchdog fails none of them (it did,
// and then the recording and its graph instance could go while the launch
// was pending, with its host function touching them after).
static CUresult (*test_real_query)(CUevent);
static atomic_bool test_queries_armed;
static atomic_int test_failed_queries;
static CUresult test_failing_query(CUevent event) {
  if (atomic_load(&test_queries_armed) &&
      atomic_fetch_add(&test_failed_queries, 1) == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return test_real_query(event);
}

static void test_watchdog_ignores_passing_errors(void **unused) {
  (void)unused;
  if (strcmp(state.mode, "host_func") != 0) {
    skip();  // the watchdog is HOST_FUNC's
  }
  // The failing query in place before the queue's completion thread starts
  // (it keeps the table it started with); armed after the set-up.
  static halo_hal_cuda_symbols_t failing;
  const halo_hal_cuda_symbols_t *saved = driver_table_copy(&failing);
  test_real_query = failing.cuEventQuery;
  failing.cuEventQuery = test_failing_query;
  atomic_store(&test_queries_armed, false);
  atomic_store(&test_failed_queries, 0);
  driver_table_use(&failing);
  caller_case_t c;
  caller_case_open(&c);
  uint32_t n = 1, long_us = 60000;
  halo_hal_command_buffer_t *slow = slow_recording(&n, &long_us);
  execute_and_wait(c.queue, slow, c.bindings, 2);  // set up: one instance
  fake_counters_t before = fake_driver_counters();
  atomic_store(&test_queries_armed, true);
  completion_t done;
  completion_init(&done);
  execute(c.queue, slow, c.bindings, 2, NULL, 0, &done);
  halo_status_code_t code = completion_wait(&done);
  atomic_store(&test_queries_armed, false);
  halo_hal_command_buffer_destroy(slow);  // as halod does once it retired
  fake_counters_t after = fake_driver_counters();
  print_message(
      "[%s] %d queries (the first failed); completed with %s; instances "
      "destroyed while pending: %d\n",
      state.mode, atomic_load(&test_failed_queries),
      halo_status_code_name(code),
      after.destroyed_pending - before.destroyed_pending);
  assert_true(atomic_load(&test_failed_queries) >= 1);
  assert_int_equal(code, HALO_STATUS_OK);
  assert_int_equal(after.destroyed_pending - before.destroyed_pending, 0);
  caller_case_close(&c);
  driver_table_use(saved);
}

static void gate_close(void);
static void gate_open(void);
static void gate_wait_entered(int count);

// One gate kernel (kernel_gate): it holds its stream until gate_open.
static halo_hal_command_buffer_t *gate_recording(uint32_t flags) {
  uint64_t unused = 0;
  recorder_t recorder;
  recorder_begin(&recorder, flags, 0);
  arg_t args[1] = {arg_constant(&unused, 8)};
  recorder_dispatch(&recorder, KERNEL_GATE, 1, args, 1);
  return recorder_end(&recorder);
}

// On an idle device: an execution that fails while its caller issues it
// (here an unbound binding slot) is finished on the submission thread (its
// end may wait for the stream), with the error; and one issued on the
// caller while an older one of its queue is still running is not waited
// for there (a queue completes in order): it completes after the older
// one, on the completion path.
static void test_caller_failure_and_order(void **unused) {
  (void)unused;
  caller_case_t c;
  caller_case_open(&c);
  execute_and_wait(c.queue, c.fast, c.bindings, 2);  // issued once: no set-up
  // A failure on the caller.
  submission_wait_idle();
  halo_hal_binding_t unbound[2] = {{c.x, N * 4}, {0, 0}};
  int launches = fake_driver_thread_launches();
  completion_t failed;
  completion_init(&failed);
  execute(c.queue, c.fast, unbound, 2, NULL, 0, &failed);
  assert_int_equal(completion_wait(&failed), HALO_STATUS_FAILED_PRECONDITION);
  assert_non_null(strstr(failed.message, "binding slot 1 is unbound"));
  assert_false(pthread_equal(failed.thread, pthread_self()));
  assert_int_equal(fake_driver_thread_launches(), launches);
  // Two in flight on one queue: the second is not waited for here.
  halo_hal_command_buffer_t *gated =
      gate_recording(HALO_HAL_RECORDING_REUSABLE);
  gate_open();
  execute_and_wait(c.queue, gated, NULL, 0);  // issued once: no set-up
  gate_close();
  atomic_uint order = 0;
  completion_t held, behind;
  completion_init(&held);
  completion_init(&behind);
  held.order = behind.order = &order;
  held.position = 0;
  behind.position = 1;
  execute(c.queue, gated, NULL, 0, NULL, 0, &held);
  gate_wait_entered(1);
  submission_wait_idle();
  halo_hal_cuda_command_buffer_record_duration(c.fast, 1000);
  execute(c.queue, c.fast, c.bindings, 2, NULL, 0, &behind);
  assert_false(completion_done(&behind));
  gate_open();
  assert_int_equal(completion_wait(&held), HALO_STATUS_OK);
  assert_int_equal(completion_wait(&behind), HALO_STATUS_OK);
  assert_true(held.in_order);
  assert_true(behind.in_order);
  assert_false(pthread_equal(behind.thread, pthread_self()));
  halo_hal_command_buffer_destroy(gated);
  caller_case_close(&c);
}

// Executes |command_buffer| (its duration set as seen to be short) with
// one signal of |value| into |slot| (at |value_address| on the device) and
// waits: it completes, and after the GPU's store.
static void execute_short_and_wait(halo_hal_queue_t *queue,
                                   halo_hal_command_buffer_t *command_buffer,
                                   uint64_t value_address, uint64_t value,
                                   halo_timeline_slot_t *slot) {
  halo_hal_cuda_command_buffer_record_duration(command_buffer, 1000);
  halo_hal_execution_signal_t signal = {value_address, value, slot};
  completion_t completion;
  completion_init(&completion);
  completion.word = (volatile uint64_t *)&slot->value;
  completion.value = value;
  execute(queue, command_buffer, NULL, 0, &signal, 1, &completion);
  assert_int_equal(completion_wait(&completion), HALO_STATUS_OK);
  assert_true(completion.stored_first);
}

// A task that holds the submission thread until released: executions
// offered meanwhile queue up behind it (a backlog).
typedef struct blocker_t {
  halo_hal_cuda_task_t task;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool started;
  bool open;
} blocker_t;

static void blocker_run(halo_hal_cuda_task_t *task) {
  blocker_t *blocker = (blocker_t *)task;
  pthread_mutex_lock(&blocker->mutex);
  blocker->started = true;
  pthread_cond_broadcast(&blocker->cond);
  while (!blocker->open) pthread_cond_wait(&blocker->cond, &blocker->mutex);
  pthread_mutex_unlock(&blocker->mutex);
}

static void blocker_hold(blocker_t *blocker) {
  memset(blocker, 0, sizeof(*blocker));
  blocker->task.run = blocker_run;
  pthread_mutex_init(&blocker->mutex, NULL);
  pthread_cond_init(&blocker->cond, NULL);
  halo_hal_cuda_thread_post(&state.device->submission, &blocker->task);
  pthread_mutex_lock(&blocker->mutex);
  while (!blocker->started) pthread_cond_wait(&blocker->cond, &blocker->mutex);
  pthread_mutex_unlock(&blocker->mutex);
}

static void blocker_release(blocker_t *blocker) {
  pthread_mutex_lock(&blocker->mutex);
  blocker->open = true;
  pthread_cond_broadcast(&blocker->cond);
  pthread_mutex_unlock(&blocker->mutex);
}

// After blocker_release, once what queued behind it was issued (a flush
// posted earlier would have counted as waiting).
static void blocker_destroy(blocker_t *blocker) {
  halo_hal_cuda_thread_flush(&state.device->submission);  // it returned
  pthread_cond_destroy(&blocker->cond);
  pthread_mutex_destroy(&blocker->mutex);
}

// Offers BACKLOG executions of |command_buffer| on |queue| while the
// submission thread is held, each signalling |count| words of |page| to
// the next value after *value, then releases the thread: each issues with
// the ones after it waiting. Checks every word holds its value at each
// completion.
enum { BACKLOG = 3 };
static void execute_backlog(halo_hal_queue_t *queue,
                            halo_hal_command_buffer_t *command_buffer,
                            void *page, uint64_t page_address, uint32_t count,
                            uint64_t *value) {
  static halo_hal_execution_signal_t signals[BACKLOG][16];
  static completion_t completions[BACKLOG];
  blocker_t blocker;
  blocker_hold(&blocker);
  for (int e = 0; e < BACKLOG; ++e) {
    signal_words(signals[e], &completions[e], page, page_address, count,
                 ++*value);
    execute(queue, command_buffer, NULL, 0, signals[e], count, &completions[e]);
  }
  blocker_release(&blocker);
  for (int e = 0; e < BACKLOG; ++e) {
    assert_int_equal(completion_wait(&completions[e]), HALO_STATUS_OK);
    assert_true(completions[e].stored_first);
  }
  blocker_destroy(&blocker);
  assert_words(page, count, *value);
}

// Waits until |command_buffer| has a free graph instance: the poller gives
// an execution's instance back just after its completion callback, so an
// execution offered right after the callback may find it busy and build
// another.
static void wait_instance_free(halo_hal_command_buffer_t *command_buffer) {
  for (int i = 0;
       i < 5000 && !halo_hal_cuda_command_buffer_issues_at_once(command_buffer);
       ++i) {
    usleep(1000);
  }
  assert_true(halo_hal_cuda_command_buffer_issues_at_once(command_buffer));
}

// A graph recording's stores are made by the store node at the end of its
// graph (no cuStreamWriteValue64) from when other tasks wait for the
// submission thread as it issues (a backlog) until that thread next sleeps
// or HALO_HAL_CUDA_GRAPH_STORES_QUIET executions in a row found none
// waiting, the store kernel loaded when the device was opened; an execution
// issued after that stores from the stream, its instance's store node
// disabled (cuGraphNodeSetEnabled only when that changes). More signals
// than a ticket holds, a store that must wait for another stream's store of
// its semaphore (the node then stays on, storing nothing), a stream replay
// (ONE_SHOT) and a store kernel that does not load store from the stream
// too. Every value lands before its completion either way.
static void test_graph_stores(void **unused) {
  (void)unused;
  uint64_t page_address = 0;
  void *page = host_page_register(&page_address);
  uint32_t n = N, us = 0;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  arg_t args[4] = {arg_buffer(direct_ref(x, N * 4)),
                   arg_buffer(direct_ref(y, N * 4)), arg_constant(&n, 4),
                   arg_constant(&us, 4)};
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 0);
  recorder_dispatch(&recorder, KERNEL_SLOW, 1, args, 4);
  halo_hal_command_buffer_t *graph = recorder_end(&recorder);
  recorder_begin(&recorder, HALO_HAL_RECORDING_ONE_SHOT, 0);
  recorder_dispatch(&recorder, KERNEL_SLOW, 1, args, 4);
  halo_hal_command_buffer_t *replay = recorder_end(&recorder);
  halo_hal_queue_t *queue = queue_new();
  uint64_t value = 0;
  // Opening the device loaded it (before any work: a load waits for the
  // context's running kernels).
  assert_true(state.device->store_tried);
  assert_non_null(state.device->store_kernel);
  // No backlog seen before this test's (nothing runs on the thread now).
  state.device->graph_stores_busy = false;
  fake_driver_reset_counters();

  // Alone: from the stream; the first instance has its node disabled once
  // (the second execution takes it again).
  for (int round = 0; round < 2; ++round) {
    execute_signalling(queue, graph, page, page_address, 1, ++value);
    wait_instance_free(graph);
  }
  fake_counters_t counters = fake_driver_counters();
  assert_non_null(state.device->store_kernel);
  assert_int_equal(counters.write_values, 2);
  assert_int_equal(counters.graph_stores, 0);
  assert_int_equal(counters.node_toggles, 1);

  // A backlog: every execution by the store node, the last (none waiting
  // behind it) too: the thread has not slept since.
  fake_driver_reset_counters();
  execute_backlog(queue, graph, page, page_address, 2, &value);
  counters = fake_driver_counters();
  assert_int_equal(counters.graph_stores, 2 * BACKLOG);
  assert_int_equal(counters.write_values, 0);
  // The most a ticket holds; then one more: every store from the stream,
  // the node left enabled (storing nothing).
  fake_driver_reset_counters();
  execute_backlog(queue, graph, page, page_address,
                  HALO_HAL_CUDA_GRAPH_STORES_MAX, &value);
  counters = fake_driver_counters();
  assert_int_equal(counters.graph_stores,
                   HALO_HAL_CUDA_GRAPH_STORES_MAX * BACKLOG);
  assert_int_equal(counters.write_values, 0);
  fake_driver_reset_counters();
  execute_backlog(queue, graph, page, page_address,
                  HALO_HAL_CUDA_GRAPH_STORES_MAX + 1, &value);
  counters = fake_driver_counters();
  assert_int_equal(counters.graph_stores, 0);
  assert_int_equal(counters.store_node_runs, BACKLOG);
  assert_int_equal(counters.write_values,
                   (HALO_HAL_CUDA_GRAPH_STORES_MAX + 1) * BACKLOG);
  assert_int_equal(counters.node_toggles, 0);
  // Two queues on two streams signalling one word in a backlog: the second
  // store must wait for the first's (the slot gives no value to compare):
  // it goes on the stream after the wait, its node on and storing nothing.
  {
    // The second queue's recording writes a buffer of its own: the fake
    // driver runs the two streams' kernels at once (as a GPU would), and
    // two writers of one buffer would race.
    uint64_t y2 = device_allocate(N * 4);
    arg_t apart_args[4] = {arg_buffer(direct_ref(x, N * 4)),
                           arg_buffer(direct_ref(y2, N * 4)),
                           arg_constant(&n, 4), arg_constant(&us, 4)};
    recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 0);
    recorder_dispatch(&recorder, KERNEL_SLOW, 1, apart_args, 4);
    halo_hal_command_buffer_t *apart = recorder_end(&recorder);
    halo_hal_queue_t *other = queue_new();
    halo_hal_execution_signal_t first_signal[1], second_signal[1];
    completion_t first, second;
    signal_words(first_signal, &first, page, page_address, 1, ++value);
    signal_words(second_signal, &second, page, page_address, 1, ++value);
    blocker_t blocker;
    blocker_hold(&blocker);
    fake_driver_reset_counters();
    execute(queue, graph, NULL, 0, first_signal, 1, &first);
    execute(other, apart, NULL, 0, second_signal, 1, &second);
    blocker_release(&blocker);
    assert_int_equal(completion_wait(&first), HALO_STATUS_OK);
    assert_int_equal(completion_wait(&second), HALO_STATUS_OK);
    blocker_destroy(&blocker);
    counters = fake_driver_counters();
    assert_int_equal(counters.graph_stores, 1);
    assert_int_equal(counters.write_values, 1);
    assert_int_equal(counters.store_node_runs, 2);
    assert_words(page, 1, value);
    halo_hal_queue_destroy(other);
    halo_hal_command_buffer_destroy(apart);
    device_free(y2, N * 4);
  }
  // A stream replay: from the stream.
  fake_driver_reset_counters();
  execute_backlog(queue, replay, page, page_address, 1, &value);
  counters = fake_driver_counters();
  assert_int_equal(counters.graph_stores, 0);
  assert_int_equal(counters.write_values, BACKLOG);
  // A launch without signals leaves none behind in the ticket (its node
  // is on or off as the thread slept or not: either way nothing stored).
  completion_t plain;
  completion_init(&plain);
  fake_driver_reset_counters();
  execute(queue, graph, NULL, 0, NULL, 0, &plain);
  assert_int_equal(completion_wait(&plain), HALO_STATUS_OK);
  assert_int_equal(fake_driver_counters().graph_stores, 0);
  // The thread kept awake (a spin longer than this part): after a backlog
  // the node stays on for executions issued alone, until
  // HALO_HAL_CUDA_GRAPH_STORES_QUIET of them in a row found none waiting.
  pthread_mutex_lock(&state.device->submission.mutex);
  state.device->submission.spin_ns = 1000000000LL;
  pthread_mutex_unlock(&state.device->submission.mutex);
  execute_backlog(queue, graph, page, page_address, 1, &value);
  fake_driver_reset_counters();
  execute_signalling(queue, graph, page, page_address, 1, ++value);
  counters = fake_driver_counters();
  assert_int_equal(counters.store_node_runs, 1);
  assert_int_equal(counters.graph_stores, 1);
  for (int i = 0; i < HALO_HAL_CUDA_GRAPH_STORES_QUIET; ++i) {
    execute_signalling(queue, graph, page, page_address, 1, ++value);
  }
  fake_driver_reset_counters();
  execute_signalling(queue, graph, page, page_address, 1, ++value);
  counters = fake_driver_counters();
  assert_int_equal(counters.store_node_runs, 0);
  assert_int_equal(counters.write_values, 1);
  pthread_mutex_lock(&state.device->submission.mutex);
  state.device->submission.spin_ns = HALO_HAL_CUDA_SUBMISSION_SPIN_NS;
  pthread_mutex_unlock(&state.device->submission.mutex);
  // Once the thread slept after a backlog: alone from the stream again,
  // its node disabled.
  execute_backlog(queue, graph, page, page_address, 1, &value);
  assert_true(state.device->graph_stores_busy);
  // The thread's sleeps when it saw the backlog (set before the backlog's
  // completions).
  uint64_t sleeps = state.device->graph_stores_sleeps;
  for (int i = 0; i < 5000 && halo_hal_cuda_thread_sleeps(
                                  &state.device->submission) == sleeps;
       ++i) {
    usleep(1000);
  }
  assert_int_not_equal(halo_hal_cuda_thread_sleeps(&state.device->submission),
                       sleeps);
  fake_driver_reset_counters();
  execute_signalling(queue, graph, page, page_address, 1, ++value);
  counters = fake_driver_counters();
  assert_int_equal(counters.store_node_runs, 0);
  assert_int_equal(counters.graph_stores, 0);
  assert_int_equal(counters.write_values, 1);
  // Its instance's node disabled now, unless an earlier lone execution
  // (the one without signals) had disabled it already.
  assert_true(counters.node_toggles <= 1);

  // A device whose store kernel did not load at its opening (loaded again
  // here, nothing running on the submission thread): no store node, stores
  // from the stream though backlogged (a new recording: new instances).
  fake_driver_fail_store_kernel(true);
  state.device->store_tried = false;
  state.device->store_kernel = NULL;
  assert_null(halo_hal_cuda_store_kernel(state.device));
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 0);
  recorder_dispatch(&recorder, KERNEL_SLOW, 1, args, 4);
  halo_hal_command_buffer_t *plain_graph = recorder_end(&recorder);
  execute_signalling(queue, plain_graph, page, page_address, 1, ++value);
  fake_driver_reset_counters();
  execute_backlog(queue, plain_graph, page, page_address, 2, &value);
  counters = fake_driver_counters();
  assert_null(state.device->store_kernel);
  assert_true(state.device->store_tried);
  assert_int_equal(counters.write_values, 2 * BACKLOG);
  assert_int_equal(counters.graph_stores, 0);
  assert_int_equal(counters.node_toggles, 0);
  fake_driver_fail_store_kernel(false);
  state.device->store_tried = false;  // loaded again for the next tests
  assert_non_null(halo_hal_cuda_store_kernel(state.device));

  halo_hal_queue_destroy(queue);
  halo_hal_command_buffer_destroy(graph);
  halo_hal_command_buffer_destroy(replay);
  halo_hal_command_buffer_destroy(plain_graph);
  device_free(x, N * 4);
  device_free(y, N * 4);
  host_page_unregister(page);
}

// A BINDING_TABLE recording with more instances than one pinned staging
// chunk holds: 20 executions queued behind a gated one on the same stream
// each build an instance (20 allowed here), whose binding tables are
// staged in 3 chunks; every execution's table reaches its own instance
// (the fake reads pinned sources when the copy runs, as a GPU does), so
// each result is its own.
static void test_binding_table_instances(void **unused) {
  (void)unused;
  enum { EXECUTIONS = 20 };
  uint32_t saved_bound = state.device->graph_instances;
  state.device->graph_instances = EXECUTIONS;
  float a = 2.0f;
  uint32_t n = N, x_slot = 0, y_slot = 1;
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 2);
  arg_t by_table[5] = {arg_table(), arg_constant(&a, 4), arg_constant(&n, 4),
                       arg_constant(&x_slot, 4), arg_constant(&y_slot, 4)};
  recorder_dispatch(&recorder, KERNEL_AXPY_TABLE, N / 64, by_table, 5);
  halo_hal_command_buffer_t *table_buffer = recorder_end(&recorder);
  halo_hal_command_buffer_t *gated =
      gate_recording(HALO_HAL_RECORDING_REUSABLE);
  halo_hal_queue_t *queue = queue_new();
  uint64_t x[EXECUTIONS], y[EXECUTIONS];
  static halo_hal_binding_t bindings[EXECUTIONS][2];
  static completion_t completions[EXECUTIONS];
  for (int e = 0; e < EXECUTIONS; ++e) {
    x[e] = device_allocate(N * 4);
    y[e] = device_allocate(N * 4);
    for (uint32_t i = 0; i < N; ++i) {
      floats(x[e])[i] = (float)(e * 1000 + i);
      floats(y[e])[i] = 0.0f;
    }
    bindings[e][0] = (halo_hal_binding_t){x[e], N * 4};
    bindings[e][1] = (halo_hal_binding_t){y[e], N * 4};
    completion_init(&completions[e]);
  }
  fake_driver_reset_counters();
  gate_close();
  completion_t held;
  completion_init(&held);
  execute(queue, gated, NULL, 0, NULL, 0, &held);
  gate_wait_entered(1);
  for (int e = 0; e < EXECUTIONS; ++e) {
    execute(queue, table_buffer, bindings[e], 2, NULL, 0, &completions[e]);
  }
  halo_hal_cuda_thread_flush(&state.device->submission);  // all issued
  gate_open();
  assert_int_equal(completion_wait(&held), HALO_STATUS_OK);
  for (int e = 0; e < EXECUTIONS; ++e) {
    if (completion_wait(&completions[e]) != HALO_STATUS_OK) {
      fail_msg("[%s] execution %d: %s", state.mode, e, completions[e].message);
    }
    for (uint32_t i = 0; i < N; ++i) {
      float expected = a * (float)(e * 1000 + i);
      if (floats(y[e])[i] != expected) {
        fail_msg("[%s] execution %d: y[%u] = %g, expected %g", state.mode, e, i,
                 floats(y[e])[i], expected);
      }
    }
  }
  state.device->graph_instances = saved_bound;
  // One instance each, and the gated recording's.
  assert_int_equal(fake_driver_counters().instantiations, EXECUTIONS + 1);
  halo_hal_queue_destroy(queue);
  halo_hal_command_buffer_destroy(table_buffer);
  halo_hal_command_buffer_destroy(gated);
  for (int e = 0; e < EXECUTIONS; ++e) {
    device_free(x[e], N * 4);
    device_free(y[e], N * 4);
  }
}

// A slot on a registered host page, a gated recording and a queue: what
// the eventless-completion tests drive (the gate open).
typedef struct gated_slot_t {
  void *page;
  halo_timeline_slot_t *slot;
  uint64_t value_address;
  halo_hal_command_buffer_t *gated;
  halo_hal_queue_t *queue;
} gated_slot_t;

static gated_slot_t gated_slot_open(void) {
  gated_slot_t fixture;
  uint64_t page_address = 0;
  fixture.page = host_page_register(&page_address);
  fixture.slot = (halo_timeline_slot_t *)fixture.page + 1;
  fixture.value_address = page_address + sizeof(halo_timeline_slot_t) +
                          (uint64_t)offsetof(halo_timeline_slot_t, value);
  fixture.gated = gate_recording(HALO_HAL_RECORDING_REUSABLE);
  fixture.queue = queue_new();
  gate_open();
  return fixture;
}

static void gated_slot_close(gated_slot_t *fixture) {
  halo_hal_queue_destroy(fixture->queue);
  halo_hal_command_buffer_destroy(fixture->gated);
  host_page_unregister(fixture->page);
}

// Under THREAD completion a short execution whose signals the GPU stores
// into slots records no event: the poller completes it when every slot
// holds exactly its value. A slot seen past the value (here a host write,
// as a higher signal would) must not complete it while its work runs: the
// poller then records an event after the work and waits for that.
static void test_eventless_completion(void **unused) {
  (void)unused;
  bool thread =
      state.device->options.completion == HALO_HAL_CUDA_COMPLETION_THREAD;
  gated_slot_t fixture = gated_slot_open();
  halo_timeline_slot_t *slot = fixture.slot;
  uint64_t value_address = fixture.value_address;
  halo_hal_command_buffer_t *gated = fixture.gated;
  halo_hal_queue_t *queue = fixture.queue;
  fake_driver_reset_counters();
  enum { kOpenRounds = 8 };
  uint64_t value = 0;
  for (int i = 0; i < kOpenRounds; ++i) {
    execute_short_and_wait(queue, gated, value_address, ++value, slot);
  }
  fake_counters_t counters = fake_driver_counters();
  print_message("[%s] %d events recorded for %d short executions\n", state.mode,
                counters.event_records, kOpenRounds);
  assert_int_equal(counters.event_records, thread ? 0 : kOpenRounds);
  // Held by the gate, its slot moved past its value by someone else.
  gate_close();
  halo_hal_cuda_command_buffer_record_duration(gated, 1000);
  halo_hal_execution_signal_t signal = {value_address, ++value, slot};
  completion_t held;
  completion_init(&held);
  execute(queue, gated, NULL, 0, &signal, 1, &held);
  gate_wait_entered(1);
  atomic_store_explicit(&slot->value, value + 1, memory_order_release);
  usleep(30000);
  bool early = completion_done(&held);
  gate_open();
  assert_int_equal(completion_wait(&held), HALO_STATUS_OK);
  if (early) {
    fail_msg(
        "[%s] an execution completed while its work was held, its "
        "slot past its value",
        state.mode);
  }
  // The slot serves another semaphore (retired and put in service again):
  // its values start again, below what the last store left, and each must
  // still be stored by the GPU and complete its execution.
  atomic_fetch_add(&slot->generation, 1);
  atomic_store_explicit(&slot->value, 0, memory_order_release);
  for (uint64_t again = 1; again <= 3; ++again) {
    execute_short_and_wait(queue, gated, value_address, again, slot);
  }
  assert_int_equal(atomic_load(&slot->value), 3);
  gated_slot_close(&fixture);
}

// A poller that looks late finds an eventless execution's slot one value
// on: the next execution on the same stream (a client submits its next step
// as soon as it sees its value) stored it. That proves the first one's work
// finished (the stream runs in order), so it completes with no event: an
// event recorded then would come after the next step's work and leave the
// poller a step behind, with a driver call per execution. Each round holds
// A at the gate with B (the next value, the same queue) behind it, long
// enough for the poller to nap (up to 100 us between looks), then opens
// the gate: both stores land within a nap, so the poller mostly sees A's
// slot at B's value.
static void test_eventless_passed_on_stream(void **unused) {
  (void)unused;
  bool thread =
      state.device->options.completion == HALO_HAL_CUDA_COMPLETION_THREAD;
  gated_slot_t f = gated_slot_open();
  uint64_t value = 0;
  execute_short_and_wait(f.queue, f.gated, f.value_address, ++value, f.slot);
  enum { kRounds = 6 };
  int events = 0;
  for (int round = 0; round < kRounds; ++round) {
    gate_close();
    halo_hal_cuda_command_buffer_record_duration(f.gated, 1000);
    halo_hal_execution_signal_t signals[2] = {
        {f.value_address, value + 1, f.slot},
        {f.value_address, value + 2, f.slot}};
    value += 2;
    completion_t held, next;
    completion_init(&held);
    completion_init(&next);
    // Each completes after its own store landed, A before B.
    atomic_uint order = 0;
    held.word = next.word = (volatile uint64_t *)&f.slot->value;
    held.value = signals[0].value;
    next.value = signals[1].value;
    held.order = next.order = &order;
    held.position = 0;
    next.position = 1;
    execute(f.queue, f.gated, NULL, 0, &signals[0], 1, &held);
    gate_wait_entered(1);
    execute(f.queue, f.gated, NULL, 0, &signals[1], 1, &next);
    // B handed to the poller, which then naps (up to 100 us) on A.
    submission_wait_idle();
    usleep(20000);
    if (completion_done(&held) || completion_done(&next)) {
      fail_msg("[%s] round %d: an execution completed while A was held",
               state.mode, round);
    }
    fake_driver_reset_counters();
    gate_open();
    assert_int_equal(completion_wait(&held), HALO_STATUS_OK);
    assert_int_equal(completion_wait(&next), HALO_STATUS_OK);
    assert_true(held.stored_first && next.stored_first);
    assert_true(held.in_order && next.in_order);
    events += fake_driver_counters().event_records;
  }
  assert_int_equal(atomic_load(&f.slot->value), value);
  print_message("[%s] %d events recorded after the gate opened, %d rounds\n",
                state.mode, events, kRounds);
  if (thread) assert_int_equal(events, 0);
  gated_slot_close(&f);
}

//===----------------------------------------------------------------------===//
// The device's stream pool
//===----------------------------------------------------------------------===//

#define POOL_QUEUES (STREAMS + 1)
#define POOL_EXECUTIONS 16
#define LOG_BYTES 256u

// Streams one queue's work occupies: its stream, and under cuLaunchHostFunc
// the callback stream beside it (its host function: the pool tests turn off
// the issue on the caller, which completes a lone short execution on an idle
// device without one).
static int streams_per_queue(void) {
  return state.device->options.completion == HALO_HAL_CUDA_COMPLETION_HOST_FUNC
             ? 2
             : 1;
}

// One queue of the pool tests: a log its appends write (device memory:
// the count, then the values), a semaphore word its executions store to
// from the GPU (1, 2, ...), and its executions in submission order.
typedef struct pool_queue_t {
  halo_hal_queue_t *queue;
  uint64_t log;
  volatile uint64_t *word;
  uint64_t word_address;
  atomic_uint order;  // completions so far
  uint32_t submitted;
  uint32_t finished;  // checked by pool_wait
  halo_hal_execution_signal_t signals[POOL_EXECUTIONS];
  halo_hal_command_buffer_t *command_buffers[POOL_EXECUTIONS];
  completion_t completions[POOL_EXECUTIONS];
} pool_queue_t;

static struct {
  void *page;  // the semaphore words, registered with the device
  uint64_t page_address;
  pool_queue_t queues[POOL_QUEUES];
} pool;

// A queue of |priority| with the semaphore word |index| of the page.
static void pool_queue_open(pool_queue_t *pq, uint32_t index,
                            int32_t priority) {
  memset(pq, 0, sizeof(*pq));
  atomic_init(&pq->order, 0);
  assert_null(halo_hal_cuda_queue_create(state.device, priority, &pq->queue));
  pq->log = device_allocate(LOG_BYTES);
  memset((void *)(uintptr_t)pq->log, 0, LOG_BYTES);
  pq->word = (volatile uint64_t *)pool.page + index;
  pq->word_address = pool.page_address + index * sizeof(uint64_t);
}

static void pool_queue_close(pool_queue_t *pq) {
  if (pq->queue) halo_hal_queue_destroy(pq->queue);
  pq->queue = NULL;
  device_free(pq->log, LOG_BYTES);
}

// |count| queues of priority 0, then the fake driver's counters reset.
static void pool_open(uint32_t count) {
  pool.page = host_page_register(&pool.page_address);
  for (uint32_t q = 0; q < count; ++q) pool_queue_open(&pool.queues[q], q, 0);
  fake_driver_reset_counters();
}

static void pool_close(uint32_t count) {
  for (uint32_t q = 0; q < count; ++q) pool_queue_close(&pool.queues[q]);
  host_page_unregister(pool.page);
}

// Executes |command_buffer| (owned from here on) on |pq|'s queue, storing
// the queue's next value into its word from the GPU.
static void pool_submit(pool_queue_t *pq,
                        halo_hal_command_buffer_t *command_buffer) {
  assert_true(pq->submitted < POOL_EXECUTIONS);
  uint32_t e = pq->submitted++;
  pq->command_buffers[e] = command_buffer;
  pq->signals[e] = (halo_hal_execution_signal_t){pq->word_address, e + 1, NULL};
  completion_t *completion = &pq->completions[e];
  completion_init(completion);
  completion->word = pq->word;
  completion->value = e + 1;
  completion->order = &pq->order;
  completion->position = e;
  execute(pq->queue, command_buffer, NULL, 0, &pq->signals[e], 1, completion);
}

// Appends |value| to |pq|'s log (a ONE_SHOT recording: replayed on the
// stream, no graph instance to park on).
static void pool_append(pool_queue_t *pq, uint32_t value) {
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_ONE_SHOT, 0);
  arg_t args[2] = {arg_buffer(direct_ref(pq->log, LOG_BYTES)),
                   arg_constant(&value, 4)};
  recorder_dispatch(&recorder, KERNEL_APPEND, 1, args, 2);
  pool_submit(pq, recorder_end(&recorder));
}

// An execution that holds |pq|'s stream until gate_open.
static void pool_gate(pool_queue_t *pq) {
  pool_submit(pq, gate_recording(HALO_HAL_RECORDING_ONE_SHOT));
}

static void gate_close(void) {
  pthread_mutex_lock(&gate.mutex);
  gate.open = false;
  gate.entered = 0;
  pthread_mutex_unlock(&gate.mutex);
}

static void gate_open(void) {
  pthread_mutex_lock(&gate.mutex);
  gate.open = true;
  pthread_cond_broadcast(&gate.cond);
  pthread_mutex_unlock(&gate.mutex);
}

// Until |count| gate kernels run (their streams are held from then on).
static void gate_wait_entered(int count) {
  pthread_mutex_lock(&gate.mutex);
  while (gate.entered < count) pthread_cond_wait(&gate.cond, &gate.mutex);
  pthread_mutex_unlock(&gate.mutex);
}

// Whether |completion| arrives within |ms| milliseconds (it may still be
// waited for with completion_wait afterwards).
static bool completion_done_within(completion_t *completion, int ms) {
  int64_t deadline = halo_clock_now_ns() + (int64_t)ms * 1000000;
  while (!completion_done(completion)) {
    if (halo_clock_now_ns() > deadline) return false;
    usleep(1000);
  }
  return true;
}

// Waits for every execution of |pq| submitted since the last call: each
// succeeded, completed in submission order, after its GPU store landed.
static void pool_wait(pool_queue_t *pq, uint32_t q) {
  for (; pq->finished < pq->submitted; ++pq->finished) {
    uint32_t e = pq->finished;
    completion_t *completion = &pq->completions[e];
    if (completion_wait(completion) != HALO_STATUS_OK) {
      fail_msg("[%s] queue %u execution %u: %s", state.mode, q, e,
               completion->message);
    }
    if (!completion->in_order) {
      fail_msg("[%s] queue %u: execution %u completed out of order", state.mode,
               q, e);
    }
    if (!completion->stored_first) {
      fail_msg("[%s] queue %u: execution %u completed before its GPU store",
               state.mode, q, e);
    }
    halo_hal_command_buffer_destroy(pq->command_buffers[e]);
  }
  assert_int_equal(*pq->word, pq->submitted);
}

// |pq|'s log holds |values| (|count| of them), in this order.
static void pool_expect_log(pool_queue_t *pq, uint32_t q,
                            const uint32_t *values, uint32_t count) {
  const uint32_t *log = (const uint32_t *)(uintptr_t)pq->log;
  if (log[0] != count) {
    fail_msg("[%s] queue %u ran %u appends, expected %u", state.mode, q, log[0],
             count);
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (log[1 + i] != values[i]) {
      fail_msg(
          "[%s] queue %u: append %u wrote %u, expected %u (out of "
          "order)",
          state.mode, q, i, log[1 + i], values[i]);
    }
  }
}

// STREAMS + 1 queues on a pool of STREAMS streams: their work occupies
// STREAMS streams (one queue shares), none is created at a queue's first
// execution (the pool was created with the device), and every execution
// completes in its queue's order, after its GPU store, its appends in
// order.
static void test_more_queues_than_streams(void **unused) {
  (void)unused;
  // Every execution to the completion path (HOST_FUNC: its callback stream
  // too).
  state.device->issue_on_caller = false;
  state.device->wait_on_submission = false;
  enum { ROUNDS = 4 };
  pool_open(POOL_QUEUES);
  for (uint32_t round = 0; round < ROUNDS; ++round) {
    for (uint32_t q = 0; q < POOL_QUEUES; ++q) {
      pool_append(&pool.queues[q], q * 100 + round);
    }
  }
  for (uint32_t q = 0; q < POOL_QUEUES; ++q) {
    pool_wait(&pool.queues[q], q);
    uint32_t values[ROUNDS];
    for (uint32_t round = 0; round < ROUNDS; ++round) {
      values[round] = q * 100 + round;
    }
    pool_expect_log(&pool.queues[q], q, values, ROUNDS);
  }
  fake_counters_t counters = fake_driver_counters();
  print_message("[%s] %d queues on a pool of %d: %d streams used, %d created\n",
                state.mode, POOL_QUEUES, STREAMS, counters.streams_used,
                counters.streams_created);
  assert_int_equal(counters.streams_created, 0);
  assert_int_equal(counters.streams_used, STREAMS * streams_per_queue());
  pool_close(POOL_QUEUES);
  state.device->issue_on_caller = true;
  state.device->wait_on_submission = true;
}

// Opens POOL_QUEUES queues and runs one execution on each, in order, so
// that each took its stream: queue 0 and queue STREAMS share stream 0,
// queue 1 has its own. Returns those three.
static void pool_open_shared(pool_queue_t **out_a, pool_queue_t **out_b,
                             pool_queue_t **out_other) {
  pool_open(POOL_QUEUES);
  // One at a time: queues on different submission threads would otherwise
  // take their streams in any order.
  for (uint32_t q = 0; q < POOL_QUEUES; ++q) {
    pool_append(&pool.queues[q], 0);
    pool_wait(&pool.queues[q], q);
  }
  *out_a = &pool.queues[0];
  *out_b = &pool.queues[STREAMS];
  *out_other = &pool.queues[1];
}

// Queue 0 and queue STREAMS share stream 0 (each queue took the stream
// with the fewest queues at its first execution, in order). Their
// executions interleave behind a gate on queue 0: queue STREAMS waits
// behind it (head-of-line, the documented cost of sharing), queue 1 on its
// own stream does not; opened, both keep their orders and complete.
static void test_shared_stream_order(void **unused) {
  (void)unused;
  pool_queue_t *a, *b, *other;
  pool_open_shared(&a, &b, &other);
  gate_close();
  pool_gate(a);
  gate_wait_entered(1);
  for (uint32_t i = 1; i <= 3; ++i) {
    pool_append(b, 10 + i);
    pool_append(a, i);
  }
  pool_append(other, 1);
  bool other_done =
      completion_done_within(&other->completions[other->submitted - 1], 5000);
  usleep(20000);
  uint32_t b_done = 0;
  for (uint32_t e = b->finished; e < b->submitted; ++e) {
    b_done += completion_done(&b->completions[e]);
  }
  gate_open();
  pool_wait(a, 0);
  pool_wait(b, STREAMS);
  pool_wait(other, 1);
  if (!other_done) {
    fail_msg("[%s] queue 1 (its own stream) waited for the gate on queue 0",
             state.mode);
  }
  if (b_done) {
    fail_msg(
        "[%s] %u execution(s) of queue %d completed while queue 0's "
        "gate held the stream they should share",
        state.mode, b_done, STREAMS);
  }
  const uint32_t a_values[] = {0, 1, 2, 3}, b_values[] = {0, 11, 12, 13};
  pool_expect_log(a, 0, a_values, 4);
  pool_expect_log(b, STREAMS, b_values, 4);
  pool_close(POOL_QUEUES);
}

typedef struct destroyer_t {
  halo_hal_queue_t *queue;
  completion_t done;
} destroyer_t;

static void *destroyer_main(void *arg) {
  destroyer_t *destroyer = arg;
  halo_hal_queue_destroy(destroyer->queue);
  on_complete(&destroyer->done, NULL);
  return NULL;
}

// Destroying queue 0 while queue STREAMS, on the same stream, has an
// execution held pending returns at once (it waits for queue 0's own
// executions, not for the stream), and the submission thread goes on:
// queue 1 still runs work meanwhile.
static void test_destroy_shared_stream(void **unused) {
  (void)unused;
  pool_queue_t *a, *b, *other;
  pool_open_shared(&a, &b, &other);
  gate_close();
  pool_gate(b);
  gate_wait_entered(1);
  destroyer_t destroyer = {.queue = a->queue};
  completion_init(&destroyer.done);
  a->queue = NULL;
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, destroyer_main, &destroyer),
                   0);
  bool destroyed = completion_done_within(&destroyer.done, 2000);
  pool_append(other, 1);
  bool other_done =
      completion_done_within(&other->completions[other->submitted - 1], 2000);
  bool b_pending = !completion_done(&b->completions[b->submitted - 1]);
  gate_open();
  pthread_join(thread, NULL);
  completion_wait(&destroyer.done);
  pool_wait(b, STREAMS);
  pool_wait(other, 1);
  if (!destroyed) {
    fail_msg(
        "[%s] destroying queue 0 waited for queue %d's pending work on "
        "their shared stream",
        state.mode, STREAMS);
  }
  if (!other_done) {
    fail_msg(
        "[%s] queue 1 could not run while queue 0 was destroyed (the "
        "submission thread waited for the shared stream)",
        state.mode);
  }
  assert_true(b_pending);
  pool_close(POOL_QUEUES);
}

// An execution on queue 0 fails after part of its work was enqueued (its
// second dispatch reads an unbound slot) while queue STREAMS, on the same
// stream, is held by a gate: the submission thread does not wait for the
// stream (queue 1 runs meanwhile), the failure is reported once the
// enqueued part ran (after the gate), and queue 0 goes on in order.
static void test_failure_on_shared_stream(void **unused) {
  (void)unused;
  pool_queue_t *a, *b, *other;
  pool_open_shared(&a, &b, &other);
  uint32_t seven = 7, eight = 8;
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_ONE_SHOT, 2);
  arg_t first[2] = {arg_buffer(direct_ref(a->log, LOG_BYTES)),
                    arg_constant(&seven, 4)};
  arg_t second[2] = {arg_buffer(slot_ref(1, 0)), arg_constant(&eight, 4)};
  recorder_dispatch(&recorder, KERNEL_APPEND, 1, first, 2);
  recorder_dispatch(&recorder, KERNEL_APPEND, 1, second, 2);
  halo_hal_command_buffer_t *failing = recorder_end(&recorder);
  halo_hal_binding_t bindings[2] = {{a->log, LOG_BYTES}, {0, 0}};
  gate_close();
  pool_gate(b);
  gate_wait_entered(1);
  completion_t failed;
  completion_init(&failed);
  execute(a->queue, failing, bindings, 2, NULL, 0, &failed);
  pool_append(other, 1);
  bool other_done =
      completion_done_within(&other->completions[other->submitted - 1], 2000);
  bool failed_early = completion_done(&failed);
  gate_open();
  halo_status_code_t code = completion_wait(&failed);
  pool_append(a, 9);
  pool_wait(a, 0);
  pool_wait(b, STREAMS);
  pool_wait(other, 1);
  print_message("[%s] failed on a shared stream: %s\n", state.mode,
                failed.message);
  if (!other_done) {
    fail_msg(
        "[%s] queue 1 could not run while a failed execution's work "
        "waited behind the gate (the submission thread waited for the "
        "shared stream)",
        state.mode);
  }
  if (failed_early) {
    fail_msg(
        "[%s] the failed execution completed before the work it "
        "enqueued ran",
        state.mode);
  }
  assert_int_equal(code, HALO_STATUS_FAILED_PRECONDITION);
  assert_non_null(strstr(failed.message,
                         "command 1 (dispatch): argument 0: binding slot 1 is "
                         "unbound"));
  const uint32_t a_values[] = {0, 7, 9};
  pool_expect_log(a, 0, a_values, 3);
  halo_hal_command_buffer_destroy(failing);
  pool_close(POOL_QUEUES);
}

// The least priority's streams exist from the device's opening on: a
// queue's first execution creates none. Another priority's STREAMS are
// created at once when its first queue runs, and its next queue takes one
// of them; a priority above the range is clamped to the greatest level.
static void test_streams_per_priority(void **unused) {
  (void)unused;
  // Every execution to the completion path (HOST_FUNC: its callback stream
  // too).
  state.device->issue_on_caller = false;
  state.device->wait_on_submission = false;
  pool.page = host_page_register(&pool.page_address);
  pool_queue_t *queues = pool.queues;
  const int32_t priorities[4] = {0, 1, 1, 100};
  // Streams created after each queue's first execution, per queue's worth.
  const int created[4] = {0, STREAMS, STREAMS, 2 * STREAMS};
  for (uint32_t q = 0; q < 4; ++q) {
    pool_queue_open(&queues[q], q, priorities[q]);
  }
  fake_driver_reset_counters();
  for (uint32_t q = 0; q < 4; ++q) {
    pool_append(&queues[q], q);
    pool_wait(&queues[q], q);
    int streams_created = fake_driver_counters().streams_created;
    if (streams_created != created[q] * streams_per_queue()) {
      fail_msg(
          "[%s] after the first execution of queue %u (priority %d): "
          "%d streams created, expected %d",
          state.mode, q, priorities[q], streams_created,
          created[q] * streams_per_queue());
    }
  }
  // Each queue on a stream of its own (two of priority 1).
  assert_int_equal(fake_driver_counters().streams_used,
                   4 * streams_per_queue());
  for (uint32_t q = 0; q < 4; ++q) pool_queue_close(&queues[q]);
  host_page_unregister(pool.page);
  state.device->issue_on_caller = true;
  state.device->wait_on_submission = true;
}

//===----------------------------------------------------------------------===//
// GPU-to-GPU waits through the deferred queue
//===----------------------------------------------------------------------===//

// The deferred queue and semaphores on a page registered with the device,
// as halod has them; this thread is the loop.
#define SEMAPHORES 4
// The mutex and condition variable live for the whole program: a driver
// thread may still be inside sync_wake (after posting the completion the
// test already drained) when a test closes its state.
static struct {
  halo_hal_deferred_queue_t deferred;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  int wakes;
  halo_timeline_page_t *page;
  uint64_t page_address;
  halo_hal_semaphore_t semaphores[SEMAPHORES];
} sync_state = {.mutex = PTHREAD_MUTEX_INITIALIZER,
                .cond = PTHREAD_COND_INITIALIZER};

enum { SEM_S = 0, SEM_T = 1 };

typedef struct test_action_t {
  halo_hal_action_t action;  // first: the retire callback finds it
  halo_hal_action_wait_t waits[1];
  halo_hal_action_signal_t signals[1];
  halo_hal_execution_signal_t device_signals[1];
  halo_hal_binding_t bindings[2];
  bool retired;
  uint64_t s_at_retire;  // semaphore SEM_S's host value when it retired
  halo_status_code_t code;
  char message[512];
} test_action_t;

static void sync_wake(void *unused) {
  (void)unused;
  pthread_mutex_lock(&sync_state.mutex);
  ++sync_state.wakes;
  pthread_cond_signal(&sync_state.cond);
  pthread_mutex_unlock(&sync_state.mutex);
}

static void sync_open(void) {
  halo_hal_allocator_t *allocator = state.device->base.allocator;
  pthread_mutex_lock(&sync_state.mutex);
  sync_state.wakes = 0;
  pthread_mutex_unlock(&sync_state.mutex);
  halo_hal_deferred_queue_initialize(&sync_state.deferred, sync_wake, NULL);
  void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(page != MAP_FAILED);
  sync_state.page = page;
  halo_timeline_page_initialize(sync_state.page, 1);
  assert_null(allocator->vtable->register_host(allocator, page, 4096, -1,
                                               &sync_state.page_address));
  for (int i = 0; i < SEMAPHORES; ++i) {
    halo_timeline_slot_activate(&sync_state.page->slots[i], 0);
    halo_hal_semaphore_initialize(&sync_state.semaphores[i],
                                  &sync_state.page->slots[i], 0);
  }
}

static void sync_close(void) {
  halo_hal_allocator_t *allocator = state.device->base.allocator;
  for (int i = 0; i < SEMAPHORES; ++i) {
    assert_null(sync_state.semaphores[i].fences);  // all dropped
    halo_hal_semaphore_deinitialize(&sync_state.semaphores[i]);
  }
  assert_int_equal(sync_state.deferred.waiting, 0);
  assert_int_equal(sync_state.deferred.issued, 0);
  halo_hal_deferred_queue_deinitialize(&sync_state.deferred);
  allocator->vtable->unregister_host(allocator, sync_state.page);
  halo_hal_cuda_thread_flush(&state.device->reaper);
  munmap(sync_state.page, 4096);
}

static void test_action_retire(halo_hal_action_t *action) {
  test_action_t *test = (test_action_t *)action;
  test->retired = true;
  test->s_at_retire = halo_hal_semaphore_value(&sync_state.semaphores[SEM_S]);
  test->code = halo_status_code(action->failure);
  snprintf(test->message, sizeof(test->message), "%s",
           action->failure ? halo_status_message(action->failure) : "");
  halo_status_free(action->failure);
  action->failure = NULL;
}

// Submits |command_buffer| on |queue| with |bindings|, waiting for
// semaphore |wait| (-1: none) to reach |wait_value| and signaling
// semaphore |signal| to |signal_value| (from the GPU and the host).
static void sync_submit(test_action_t *test, halo_hal_queue_t *queue,
                        halo_hal_command_buffer_t *command_buffer,
                        const halo_hal_binding_t bindings[2], int wait,
                        uint64_t wait_value, int signal,
                        uint64_t signal_value) {
  memset(test, 0, sizeof(*test));
  memcpy(test->bindings, bindings, sizeof(test->bindings));
  halo_hal_action_t *action = &test->action;
  action->queue = queue;
  action->execution.command_buffer = command_buffer;
  action->execution.bindings = test->bindings;
  action->execution.binding_count = 2;
  if (wait >= 0) {
    test->waits[0].semaphore = &sync_state.semaphores[wait];
    test->waits[0].timepoint.value = wait_value;
    action->waits = test->waits;
    action->wait_count = 1;
  }
  halo_hal_semaphore_t *semaphore = &sync_state.semaphores[signal];
  uint64_t previous;  // checked and reserved, as halod does
  assert_null(
      halo_hal_semaphore_reserve_signal(semaphore, signal_value, &previous));
  test->signals[0].semaphore = semaphore;
  test->signals[0].value = signal_value;
  action->signals = test->signals;
  action->signal_count = 1;
  test->device_signals[0].device_address =
      sync_state.page_address + offsetof(halo_timeline_page_t, slots) +
      (uint64_t)signal * sizeof(halo_timeline_slot_t);
  test->device_signals[0].value = signal_value;
  action->execution.signals = test->device_signals;
  action->execution.signal_count = 1;
  action->retire = test_action_retire;
  halo_hal_deferred_queue_submit(&sync_state.deferred, action);
}

// Runs the loop (drains completions) until |test| retired.
static void sync_run_until(test_action_t *test) {
  int64_t deadline = halo_clock_now_ns() + 10000000000ll;
  int seen = -1;
  while (!test->retired) {
    pthread_mutex_lock(&sync_state.mutex);
    while (sync_state.wakes == seen) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += 10000000;
      if (until.tv_nsec >= 1000000000) {
        until.tv_nsec -= 1000000000;
        ++until.tv_sec;
      }
      pthread_cond_timedwait(&sync_state.cond, &sync_state.mutex, &until);
      if (halo_clock_now_ns() > deadline) break;
    }
    seen = sync_state.wakes;
    pthread_mutex_unlock(&sync_state.mutex);
    halo_hal_deferred_queue_drain(&sync_state.deferred);
    if (halo_clock_now_ns() > deadline) fail_msg("action never retired");
  }
}

// A producer P (y = x + 1 after 100 ms) on queue A signals S; a consumer C
// (z = y + 1) on queue B waits for S. C is released to its queue as soon
// as P is on the device (not when P completes), waits for P's event on the
// device, and computes from P's output; its signals land after P's. Both orders
// of submission (C before P: wait-before-signal; P before C).
static void test_gpu_waits(void **unused) {
  (void)unused;
  sync_open();
  uint32_t n = N, producer_us = 100000, consumer_us = 0;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  uint64_t z = device_allocate(N * 4);
  halo_hal_command_buffer_t *producer = slow_recording(&n, &producer_us);
  halo_hal_command_buffer_t *consumer = slow_recording(&n, &consumer_us);
  halo_hal_queue_t *a = queue_new(), *b = queue_new();
  halo_hal_binding_t p_bindings[2] = {{x, N * 4}, {y, N * 4}};
  halo_hal_binding_t c_bindings[2] = {{y, N * 4}, {z, N * 4}};
  fake_driver_reset_counters();
  for (int round = 0; round < 2; ++round) {
    for (uint32_t i = 0; i < N; ++i) {
      floats(x)[i] = (float)(round * 100 + (int)i);
      floats(y)[i] = -1.0f;
      floats(z)[i] = -1.0f;
    }
    uint64_t value = (uint64_t)round + 1;
    test_action_t p, c;
    if (round == 0) {
      sync_submit(&c, b, consumer, c_bindings, SEM_S, value, SEM_T, value);
      assert_int_equal(c.action.state, HALO_HAL_ACTION_WAITING);
      sync_submit(&p, a, producer, p_bindings, -1, 0, SEM_S, value);
    } else {
      sync_submit(&p, a, producer, p_bindings, -1, 0, SEM_S, value);
      sync_submit(&c, b, consumer, c_bindings, SEM_S, value, SEM_T, value);
    }
    // Released on P's fence while P still runs.
    assert_int_equal(c.action.state, HALO_HAL_ACTION_ISSUED);
    assert_false(p.retired);
    sync_run_until(&c);
    sync_run_until(&p);
    assert_int_equal(p.code, HALO_STATUS_OK);
    if (c.code != HALO_STATUS_OK) fail_msg("consumer: %s", c.message);
    // C's signals land after P's: when C retires, P's signal of S was
    // reached on the host. (Their retire callbacks may still run in either
    // order: P's signal of S can retire C before P's own callback runs.)
    if (c.s_at_retire < value) {
      fail_msg(
          "the consumer retired with S at %llu, before the producer's "
          "signal %llu",
          (unsigned long long)c.s_at_retire, (unsigned long long)value);
    }
    for (uint32_t i = 0; i < N; ++i) {
      float expected = (float)(round * 100 + (int)i) + 2.0f;
      if (floats(z)[i] != expected) {
        fail_msg(
            "[%s] round %d: z[%u] = %g, expected %g (the consumer did "
            "not wait for the producer)",
            state.mode, round, i, floats(z)[i], expected);
      }
    }
    assert_int_equal(halo_hal_semaphore_value(&sync_state.semaphores[SEM_T]),
                     value);
    assert_int_equal(halo_hal_semaphore_failure(&sync_state.semaphores[SEM_T]),
                     0);
  }
  assert_true(fake_driver_counters().stream_waits >= 2);
  halo_hal_queue_destroy(a);
  halo_hal_queue_destroy(b);
  halo_hal_command_buffer_destroy(producer);
  halo_hal_command_buffer_destroy(consumer);
  device_free(x, N * 4);
  device_free(y, N * 4);
  device_free(z, N * 4);
  sync_close();
}

// The producer parks in the instance pool (every instance of its recording
// busy): it has no event yet when its consumer, released on its fence,
// reaches the submission thread. The consumer parks on the fence and runs
// after the producer, on its output.
static void test_gpu_wait_on_parked_producer(void **unused) {
  (void)unused;
  enum { FILLERS = TEST_GRAPH_INSTANCES, QUEUES = 4 };
  sync_open();
  uint32_t n = N, busy_us = 60000, consumer_us = 0;
  halo_hal_command_buffer_t *busy = slow_recording(&n, &busy_us);
  halo_hal_command_buffer_t *consumer = slow_recording(&n, &consumer_us);
  halo_hal_queue_t *queues[QUEUES];
  for (int q = 0; q < QUEUES; ++q) queues[q] = queue_new();
  uint64_t x = device_allocate(N * 4);
  uint64_t y = device_allocate(N * 4), z = device_allocate(N * 4);
  for (uint32_t i = 0; i < N; ++i) floats(x)[i] = (float)i;
  // A scratch output per filler: they run at once on the fake driver's
  // stream threads (one shared output was a data race under TSan).
  // Bindings stay valid until completion.
  uint64_t scratch[FILLERS];
  halo_hal_binding_t filler_bindings[FILLERS][2];
  static completion_t fillers[FILLERS];
  fake_driver_reset_counters();
  for (int f = 0; f < FILLERS; ++f) {
    scratch[f] = device_allocate(N * 4);
    filler_bindings[f][0] = (halo_hal_binding_t){x, N * 4};
    filler_bindings[f][1] = (halo_hal_binding_t){scratch[f], N * 4};
    completion_init(&fillers[f]);
    execute(queues[f % QUEUES], busy, filler_bindings[f], 2, NULL, 0,
            &fillers[f]);
  }
  halo_hal_binding_t p_bindings[2] = {{x, N * 4}, {y, N * 4}};
  halo_hal_binding_t c_bindings[2] = {{y, N * 4}, {z, N * 4}};
  test_action_t p, c;
  sync_submit(&p, queues[0], busy, p_bindings, -1, 0, SEM_S, 1);
  sync_submit(&c, queues[1], consumer, c_bindings, SEM_S, 1, SEM_T, 1);
  assert_int_equal(c.action.state, HALO_HAL_ACTION_ISSUED);
  sync_run_until(&c);
  sync_run_until(&p);
  assert_int_equal(p.code, HALO_STATUS_OK);
  if (c.code != HALO_STATUS_OK) fail_msg("consumer: %s", c.message);
  for (uint32_t i = 0; i < N; ++i) {
    if (floats(z)[i] != (float)i + 2.0f) {
      fail_msg("[%s] z[%u] = %g, expected %g", state.mode, i, floats(z)[i],
               (float)i + 2.0f);
    }
  }
  for (int f = 0; f < FILLERS; ++f) {
    assert_int_equal(completion_wait(&fillers[f]), HALO_STATUS_OK);
  }
  // The busy recording's bound, and the consumer's one instance.
  assert_true(fake_driver_counters().instantiations <=
              TEST_GRAPH_INSTANCES + 1);
  for (int q = 0; q < QUEUES; ++q) halo_hal_queue_destroy(queues[q]);
  halo_hal_command_buffer_destroy(busy);
  halo_hal_command_buffer_destroy(consumer);
  device_free(x, N * 4);
  for (int f = 0; f < FILLERS; ++f) device_free(scratch[f], N * 4);
  device_free(y, N * 4);
  device_free(z, N * 4);
  sync_close();
}

// Failures reach a consumer released early: a producer that fails before
// its work reached the device fails the consumer with its error; a
// semaphore failed (by its owner) after the consumer was released fails
// the consumer's signals although the consumer ran.
static void test_gpu_wait_failures(void **unused) {
  (void)unused;
  sync_open();
  uint32_t n = N, producer_us = 100000, consumer_us = 0;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  uint64_t z = device_allocate(N * 4);
  halo_hal_command_buffer_t *producer = slow_recording(&n, &producer_us);
  halo_hal_command_buffer_t *consumer = slow_recording(&n, &consumer_us);
  halo_hal_queue_t *a = queue_new(), *b = queue_new();
  halo_hal_binding_t c_bindings[2] = {{y, N * 4}, {z, N * 4}};
  // 1. The producer's slot 1 is unbound: it fails on the submission thread,
  // after the consumer was released on its fence.
  halo_hal_binding_t unbound[2] = {{x, N * 4}, {0, 0}};
  test_action_t p, c;
  sync_submit(&p, a, producer, unbound, -1, 0, SEM_S, 1);
  sync_submit(&c, b, consumer, c_bindings, SEM_S, 1, SEM_T, 1);
  assert_int_equal(c.action.state, HALO_HAL_ACTION_ISSUED);
  sync_run_until(&c);
  sync_run_until(&p);
  print_message("[%s] consumer of a failed producer: %s\n", state.mode,
                c.message);
  assert_int_equal(p.code, HALO_STATUS_FAILED_PRECONDITION);
  assert_int_equal(c.code, HALO_STATUS_FAILED_PRECONDITION);
  assert_non_null(strstr(c.message, "waits for failed before it started"));
  assert_non_null(strstr(c.message, "binding slot 1 is unbound"));
  assert_int_equal(halo_hal_semaphore_failure(&sync_state.semaphores[SEM_T]),
                   HALO_STATUS_FAILED_PRECONDITION);
  sync_close();
  // 2. The producer runs; its semaphore is failed while it does, after the
  // consumer was released. The consumer runs on the device but its
  // signals fail, naming the failure.
  sync_open();
  halo_hal_binding_t p_bindings[2] = {{x, N * 4}, {y, N * 4}};
  for (uint32_t i = 0; i < N; ++i) floats(x)[i] = (float)i;
  sync_submit(&p, a, producer, p_bindings, -1, 0, SEM_S, 1);
  sync_submit(&c, b, consumer, c_bindings, SEM_S, 1, SEM_T, 1);
  assert_int_equal(c.action.state, HALO_HAL_ACTION_ISSUED);
  halo_hal_semaphore_fail(
      &sync_state.semaphores[SEM_S],
      halo_status_make(HALO_STATUS_ABORTED, "the owner gave up on it"));
  sync_run_until(&c);
  sync_run_until(&p);
  print_message("[%s] consumer of a failed semaphore: %s\n", state.mode,
                c.message);
  assert_int_equal(p.code, HALO_STATUS_OK);
  assert_int_equal(c.code, HALO_STATUS_ABORTED);
  assert_non_null(strstr(c.message, "the owner gave up on it"));
  assert_non_null(strstr(c.message, "released on the device"));
  assert_int_equal(halo_hal_semaphore_failure(&sync_state.semaphores[SEM_T]),
                   HALO_STATUS_ABORTED);
  // It did run, after the producer.
  for (uint32_t i = 0; i < N; ++i) assert_true(floats(z)[i] == (float)i + 2);
  sync_close();
  halo_hal_queue_destroy(a);
  halo_hal_queue_destroy(b);
  halo_hal_command_buffer_destroy(producer);
  halo_hal_command_buffer_destroy(consumer);
  device_free(x, N * 4);
  device_free(y, N * 4);
  device_free(z, N * 4);
}

// Executions watched through their GPU stores (no event), held on four
// queues for 60 ms: the device is asked for a sticky error about every
// 100 us in all, not every 100 us per execution (each query takes the
// context's lock from the submission thread's launches). Then they finish
// and complete.
static void test_sticky_queries_per_device(void **unused) {
  (void)unused;
  if (state.device->options.completion != HALO_HAL_CUDA_COMPLETION_THREAD) {
    return;  // host functions complete these; no stream is queried
  }
  enum { QUEUES = 4, HELD_MS = 60 };
  uint64_t page_address = 0;
  void *page = host_page_register(&page_address);
  halo_hal_command_buffer_t *gated =
      gate_recording(HALO_HAL_RECORDING_REUSABLE);
  halo_hal_queue_t *queues[QUEUES];
  halo_timeline_slot_t *slots[QUEUES];
  halo_hal_execution_signal_t signals[QUEUES];
  completion_t completions[QUEUES];
  gate_close();
  for (int q = 0; q < QUEUES; ++q) {
    queues[q] = queue_new();
    slots[q] = (halo_timeline_slot_t *)page + 1 + q;
    uint64_t value_address = page_address +
                             (uint64_t)(1 + q) * sizeof(halo_timeline_slot_t) +
                             (uint64_t)offsetof(halo_timeline_slot_t, value);
    signals[q] = (halo_hal_execution_signal_t){value_address, 1, slots[q]};
    completion_init(&completions[q]);
    // Seen short: no event (halo_hal_cuda_execution_needs_event).
    halo_hal_cuda_command_buffer_record_duration(gated, 1000);
    execute(queues[q], gated, NULL, 0, &signals[q], 1, &completions[q]);
  }
  gate_wait_entered(QUEUES);
  // The window is what elapsed between the two reads (a loaded machine
  // may sleep past HELD_MS).
  int64_t start_ns = halo_clock_now_ns();
  fake_counters_t before = fake_driver_counters();
  usleep(HELD_MS * 1000);
  fake_counters_t held = fake_driver_counters();
  int64_t elapsed_ns = halo_clock_now_ns() - start_ns;
  int queries = held.stream_queries - before.stream_queries;
  print_message("[%s] %d stream queries in %.1f ms, %d executions held\n",
                state.mode, queries, (double)elapsed_ns / 1e6, QUEUES);
  assert_int_equal(held.event_records, before.event_records);
  // One per 100 us at most (one per execution would be four), and some:
  // the device is still asked.
  assert_true(queries >= 1);
  assert_true(queries <= elapsed_ns / 100000 + 2);
  gate_open();
  for (int q = 0; q < QUEUES; ++q) {
    assert_int_equal(completion_wait(&completions[q]), HALO_STATUS_OK);
    assert_int_equal(atomic_load(&slots[q]->value), 1);
    halo_hal_queue_destroy(queues[q]);
  }
  halo_hal_command_buffer_destroy(gated);
  host_page_unregister(page);
}

// A kernel faults (or the MPS server ends the client: fault): its
// execution and the slow one pending on another queue fail with
// DEVICE_LOST, the device is reported lost once, and a later execution
// fails at once. Last in its group (the context stays lost).
static void test_sticky_error(void **unused) {
  (void)unused;
  uint32_t n = N, us = 50000;
  uint64_t x = device_allocate(N * 4), y = device_allocate(N * 4);
  uint64_t address = 0x10;
  recorder_t recorder;
  recorder_begin(&recorder, HALO_HAL_RECORDING_REUSABLE, 0);
  arg_t slow_args[4] = {arg_buffer(direct_ref(x, N * 4)),
                        arg_buffer(direct_ref(y, N * 4)), arg_constant(&n, 4),
                        arg_constant(&us, 4)};
  recorder_dispatch(&recorder, KERNEL_SLOW, 1, slow_args, 4);
  halo_hal_command_buffer_t *slow = recorder_end(&recorder);
  recorder_begin(&recorder, HALO_HAL_RECORDING_ONE_SHOT, 0);
  arg_t fault_args[1] = {arg_constant(&address, 8)};
  recorder_dispatch(&recorder, KERNEL_FAULT, 1, fault_args, 1);
  halo_hal_command_buffer_t *fault = recorder_end(&recorder);
  halo_hal_queue_t *first = queue_new(), *second = queue_new();
  completion_t pending, faulting, later;
  completion_init(&pending);
  completion_init(&faulting);
  completion_init(&later);
  execute(first, slow, NULL, 0, NULL, 0, &pending);
  usleep(5000);
  execute(second, fault, NULL, 0, NULL, 0, &faulting);
  assert_int_equal(completion_wait(&faulting), HALO_STATUS_DEVICE_LOST);
  assert_int_equal(completion_wait(&pending), HALO_STATUS_DEVICE_LOST);
  print_message("[%s] fault: %s\n", state.mode, faulting.message);
  assert_non_null(strstr(faulting.message, fault_kind.name));
  execute(first, slow, NULL, 0, NULL, 0, &later);
  assert_int_equal(completion_wait(&later), HALO_STATUS_DEVICE_LOST);
  assert_int_equal(atomic_load(&state.lost_reports), 1);
  // On a GPU nothing runs after a sticky error; the fake's slow kernel
  // finishes its sleep: let it, before its exec is destroyed.
  usleep(2 * us);
  halo_hal_queue_destroy(first);
  halo_hal_queue_destroy(second);
  halo_hal_command_buffer_destroy(slow);
  halo_hal_command_buffer_destroy(fault);
  fake_driver_set_sticky(CUDA_SUCCESS);
  device_free(x, N * 4);
  device_free(y, N * 4);
}

// Tenants sharing a recording each find their own instance again: 4 sets
// of bindings build 4 instances (each issued while the others are in
// flight), then take turns one at a time for 4 rounds in changing order:
// every execution finds the free instance already bound to its addresses
// (no SetParams). A fifth set takes the instance freed longest ago, not the
// newest: the set that ran last still finds its own afterwards.
static void test_instance_affinity(void **unused) {
  (void)unused;
  enum { SETS = 4 };
  uint32_t n = N;
  uint32_t us = 0;
  halo_hal_command_buffer_t *command_buffer = slow_recording(&n, &us);
  halo_hal_command_buffer_t *gated =
      gate_recording(HALO_HAL_RECORDING_REUSABLE);
  halo_hal_queue_t *queue = queue_new();
  uint64_t x[SETS + 1], y[SETS + 1];
  static halo_hal_binding_t bindings[SETS + 1][2];
  for (int e = 0; e <= SETS; ++e) {
    x[e] = device_allocate(N * 4);
    y[e] = device_allocate(N * 4);
    bindings[e][0] = (halo_hal_binding_t){x[e], N * 4};
    bindings[e][1] = (halo_hal_binding_t){y[e], N * 4};
  }
  // Behind a gated execution: each set builds its own instance.
  gate_close();
  completion_t held;
  completion_init(&held);
  execute(queue, gated, NULL, 0, NULL, 0, &held);
  gate_wait_entered(1);
  static completion_t completions[SETS];
  for (int e = 0; e < SETS; ++e) {
    completion_init(&completions[e]);
    execute(queue, command_buffer, bindings[e], 2, NULL, 0, &completions[e]);
  }
  halo_hal_cuda_thread_flush(&state.device->submission);
  gate_open();
  assert_int_equal(completion_wait(&held), HALO_STATUS_OK);
  for (int e = 0; e < SETS; ++e) {
    assert_int_equal(completion_wait(&completions[e]), HALO_STATUS_OK);
  }
  fake_counters_t built = fake_driver_counters();
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < SETS; ++i) {
      int e = (round % 2 ? SETS - 1 - i : i + round) % SETS;
      execute_and_wait(queue, command_buffer, bindings[e], 2);
    }
  }
  fake_counters_t counters = fake_driver_counters();
  assert_int_equal(counters.instantiations, built.instantiations);
  assert_int_equal(counters.exec_set_params, built.exec_set_params);
  // The last round ran sets 3, 2, 1, 0: set 3's instance is the oldest
  // free one. A new set re-points it; set 0 (the newest) keeps its own.
  execute_and_wait(queue, command_buffer, bindings[SETS], 2);
  fake_counters_t after_new = fake_driver_counters();
  assert_true(after_new.exec_set_params > counters.exec_set_params);
  execute_and_wait(queue, command_buffer, bindings[0], 2);
  assert_int_equal(fake_driver_counters().exec_set_params,
                   after_new.exec_set_params);
  execute_and_wait(queue, command_buffer, bindings[3], 2);
  fake_counters_t after_old = fake_driver_counters();
  assert_true(after_old.exec_set_params > after_new.exec_set_params);
  // Affinity off (HALO_CUDA_INSTANCE_AFFINITY=0, to compare): a take gets
  // the instance freed last, whatever it is bound to: two sets in turn
  // re-point it every time.
  state.device->instance_affinity = false;
  for (int i = 0; i < 4; ++i) {
    execute_and_wait(queue, command_buffer, bindings[i % 2], 2);
  }
  state.device->instance_affinity = true;
  assert_int_equal(fake_driver_counters().exec_set_params,
                   after_old.exec_set_params + 4);
  halo_hal_queue_destroy(queue);
  halo_hal_command_buffer_destroy(command_buffer);
  halo_hal_command_buffer_destroy(gated);
  for (int e = 0; e <= SETS; ++e) {
    device_free(x[e], N * 4);
    device_free(y[e], N * 4);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_binding_strategies),
      cmocka_unit_test(test_unbound_slot),
      cmocka_unit_test(test_barriers_and_transfers),
      cmocka_unit_test(test_dispatch_indirect),
      cmocka_unit_test(test_instance_pool),
      cmocka_unit_test(test_graph_bytes_bound),
      cmocka_unit_test(test_graph_trim_outside_the_mutex),
      cmocka_unit_test(test_graph_room_first_come),
      cmocka_unit_test(test_bound_wait_holds_its_queue),
      cmocka_unit_test(test_fence_wait_holds_its_queue),
      cmocka_unit_test(test_store_behind_a_later_signal),
      cmocka_unit_test(test_parameter_bytes_bound),
      cmocka_unit_test(test_gpu_stores),
      cmocka_unit_test(test_graph_stores),
      cmocka_unit_test(test_binding_table_instances),
      cmocka_unit_test(test_instance_affinity),
      cmocka_unit_test(test_gpu_store_wakes_sleepers),
      cmocka_unit_test(test_event_kinds),
      cmocka_unit_test(test_idle_issue_on_caller),
      cmocka_unit_test(test_short_work_finished_on_submission),
      cmocka_unit_test(test_long_work_seen_long),
      cmocka_unit_test(test_deferred_failure_duration),
      cmocka_unit_test(test_watchdog_ignores_passing_errors),
      cmocka_unit_test(test_caller_failure_and_order),
      cmocka_unit_test(test_eventless_completion),
      cmocka_unit_test(test_eventless_passed_on_stream),
      cmocka_unit_test(test_independent_queues),
      cmocka_unit_test(test_more_queues_than_streams),
      cmocka_unit_test(test_shared_stream_order),
      cmocka_unit_test(test_destroy_shared_stream),
      cmocka_unit_test(test_failure_on_shared_stream),
      cmocka_unit_test(test_streams_per_priority),
      cmocka_unit_test(test_gpu_waits),
      cmocka_unit_test(test_gpu_wait_on_parked_producer),
      cmocka_unit_test(test_parked_executions_keep_queue_order),
      cmocka_unit_test(test_gpu_wait_failures),
      cmocka_unit_test(test_sticky_queries_per_device),
      cmocka_unit_test(test_sticky_error),
  };
  int failed = 0;
  failed += _cmocka_run_group_tests("hal_cuda_queue (completion thread)", tests,
                                    sizeof(tests) / sizeof(tests[0]),
                                    setup_thread, device_close);
  failed += _cmocka_run_group_tests("hal_cuda_queue (cuLaunchHostFunc)", tests,
                                    sizeof(tests) / sizeof(tests[0]),
                                    setup_host_func, device_close);
  return failed ? 1 : 0;
}
