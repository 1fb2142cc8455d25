// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "tests/fuzz/fuzz_frames.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/handle_table.h"
#include "tests/fuzz/fuzz_halod.h"

void halo_fuzz_frames_free(halo_fuzz_frames_t *frames) {
  free(frames->data);
  memset(frames, 0, sizeof(*frames));
}

void halo_fuzz_frames_append_bytes(halo_fuzz_frames_t *frames,
                                   const void *bytes, size_t size) {
  if (size > UINT16_MAX) {
    fprintf(stderr, "a frame of %zu bytes does not fit its length\n", size);
    abort();
  }
  if (frames->size + 2 + size > frames->capacity) {
    size_t capacity = frames->capacity ? frames->capacity : 1024;
    while (capacity < frames->size + 2 + size) capacity *= 2;
    uint8_t *data = realloc(frames->data, capacity);
    if (!data) abort();
    frames->data = data;
    frames->capacity = capacity;
  }
  frames->data[frames->size++] = (uint8_t)(size & 0xff);
  frames->data[frames->size++] = (uint8_t)(size >> 8);
  if (size) memcpy(frames->data + frames->size, bytes, size);
  frames->size += size;
}

void halo_fuzz_frames_append(halo_fuzz_frames_t *frames,
                             const Halo__Wire__Request *request) {
  size_t size = protobuf_c_message_get_packed_size(&request->base);
  uint8_t *bytes = malloc(size ? size : 1);
  if (!bytes) abort();
  protobuf_c_message_pack(&request->base, bytes);
  halo_fuzz_frames_append_bytes(frames, bytes, size);
  free(bytes);
}

void halo_fuzz_frames_buffer_create(halo_fuzz_frames_t *frames, uint64_t size,
                                    Halo__Wire__MemoryType memory_type,
                                    uint32_t flags) {
  Halo__Wire__BufferCreate create = HALO__WIRE__BUFFER_CREATE__INIT;
  create.device = 0;
  create.size = size;
  create.memory_type = memory_type;
  create.has_flags = flags != 0;
  create.flags = flags;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_CREATE;
  request.buffer_create = &create;
  halo_fuzz_frames_append(frames, &request);
}

void halo_fuzz_frames_semaphore_create(halo_fuzz_frames_t *frames,
                                       uint64_t initial_value, uint32_t flags) {
  Halo__Wire__SemaphoreCreate create = HALO__WIRE__SEMAPHORE_CREATE__INIT;
  create.initial_value = initial_value;
  create.has_flags = flags != 0;
  create.flags = flags;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE;
  request.semaphore_create = &create;
  halo_fuzz_frames_append(frames, &request);
}

void halo_fuzz_frames_semaphore_signal(halo_fuzz_frames_t *frames,
                                       uint64_t semaphore, uint64_t value) {
  Halo__Wire__SemaphoreSignal signal = HALO__WIRE__SEMAPHORE_SIGNAL__INIT;
  signal.handle = semaphore;
  signal.value = value;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_SIGNAL;
  request.semaphore_signal = &signal;
  halo_fuzz_frames_append(frames, &request);
}

void halo_fuzz_frames_queue_create(halo_fuzz_frames_t *frames) {
  Halo__Wire__QueueCreate create = HALO__WIRE__QUEUE_CREATE__INIT;
  create.device = 0;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_CREATE;
  request.queue_create = &create;
  halo_fuzz_frames_append(frames, &request);
}

static Halo__Wire__BufferRef halo_fuzz_ref(uint64_t buffer, uint32_t slot,
                                           uint64_t offset, uint64_t length) {
  Halo__Wire__BufferRef ref = HALO__WIRE__BUFFER_REF__INIT;
  ref.has_buffer = buffer != 0;
  ref.buffer = buffer;
  ref.has_slot = buffer == 0;
  ref.slot = slot;
  ref.offset = offset;
  ref.length = length;
  return ref;
}

void halo_fuzz_frames_command_buffer_create(halo_fuzz_frames_t *frames,
                                            uint32_t binding_capacity,
                                            uint64_t direct) {
  static const uint8_t kPattern[4] = {1, 2, 3, 4};
  static const uint8_t kUpdate[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  static const uint8_t kConstant[4] = {42, 0, 0, 0};
  uint32_t grid[3] = {2, 1, 1}, block[3] = {1, 1, 1};

  Halo__Wire__BufferRef fill_target = halo_fuzz_ref(direct, 0, 0, 256);
  Halo__Wire__Command fill = HALO__WIRE__COMMAND__INIT;
  fill.type = HALO__WIRE__COMMAND_TYPE__COMMAND_FILL;
  fill.target = &fill_target;
  fill.has_data = true;
  fill.data.data = (uint8_t *)kPattern;
  fill.data.len = sizeof(kPattern);

  Halo__Wire__Command barrier = HALO__WIRE__COMMAND__INIT;
  barrier.type = HALO__WIRE__COMMAND_TYPE__COMMAND_BARRIER;

  Halo__Wire__BufferRef copy_source = halo_fuzz_ref(0, 0, 0, 256);
  Halo__Wire__BufferRef copy_target = halo_fuzz_ref(0, 1, 0, 256);
  Halo__Wire__Command copy = HALO__WIRE__COMMAND__INIT;
  copy.type = HALO__WIRE__COMMAND_TYPE__COMMAND_COPY;
  copy.source = &copy_source;
  copy.target = &copy_target;

  Halo__Wire__DispatchArg table = HALO__WIRE__DISPATCH_ARG__INIT;
  table.kind = HALO__WIRE__DISPATCH_ARG_KIND__DISPATCH_ARG_BINDING_TABLE;
  Halo__Wire__BufferRef argument_ref = halo_fuzz_ref(0, 1, 0, 64);
  Halo__Wire__DispatchArg argument = HALO__WIRE__DISPATCH_ARG__INIT;
  argument.kind = HALO__WIRE__DISPATCH_ARG_KIND__DISPATCH_ARG_BUFFER;
  argument.ref = &argument_ref;
  Halo__Wire__DispatchArg constant = HALO__WIRE__DISPATCH_ARG__INIT;
  constant.kind = HALO__WIRE__DISPATCH_ARG_KIND__DISPATCH_ARG_CONSTANT;
  constant.has_constant = true;
  constant.constant.data = (uint8_t *)kConstant;
  constant.constant.len = sizeof(kConstant);
  Halo__Wire__DispatchArg *args[] = {&table, &argument, &constant};
  Halo__Wire__Command dispatch = HALO__WIRE__COMMAND__INIT;
  dispatch.type = HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH;
  dispatch.has_executable = true;
  dispatch.executable = HALO_FUZZ_EXECUTABLE;
  dispatch.entry = HALO_FUZZ_ENTRY;
  dispatch.n_grid = 3;
  dispatch.grid = grid;
  dispatch.n_block = 3;
  dispatch.block = block;
  dispatch.n_args = 3;
  dispatch.args = args;

  Halo__Wire__BufferRef update_target = halo_fuzz_ref(0, 1, 64, 8);
  Halo__Wire__Command update = HALO__WIRE__COMMAND__INIT;
  update.type = HALO__WIRE__COMMAND_TYPE__COMMAND_UPDATE;
  update.target = &update_target;
  update.has_data = true;
  update.data.data = (uint8_t *)kUpdate;
  update.data.len = sizeof(kUpdate);

  Halo__Wire__Command *commands[] = {&fill, &barrier, &copy, &dispatch,
                                     &update};
  Halo__Wire__CommandBufferCreate create =
      HALO__WIRE__COMMAND_BUFFER_CREATE__INIT;
  create.device = 0;
  create.flags = 2;  // REUSABLE
  create.binding_capacity = binding_capacity;
  create.n_commands = sizeof(commands) / sizeof(commands[0]);
  create.commands = commands;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_CREATE;
  request.command_buffer_create = &create;
  halo_fuzz_frames_append(frames, &request);
}

void halo_fuzz_frames_kit(halo_fuzz_frames_t *frames) {
  halo_fuzz_frames_buffer_create(frames, HALO_FUZZ_KIT_BUFFER_BYTES,
                                 HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE,
                                 0);
  halo_fuzz_frames_buffer_create(frames, HALO_FUZZ_KIT_BUFFER_BYTES,
                                 HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE, 0);
  halo_fuzz_frames_semaphore_create(frames, 0, 0);
  halo_fuzz_frames_semaphore_create(frames, 0, 1);
  halo_fuzz_frames_queue_create(frames);
  halo_fuzz_frames_command_buffer_create(frames, 2, 0);
}

#define HALO_FUZZ_MAX_SPAN 32

// The waits and signals of a queue request as wire messages.
typedef struct halo_fuzz_sync_t {
  Halo__Wire__SemaphoreValue storage[2 * HALO_FUZZ_MAX_SPAN];
  Halo__Wire__SemaphoreValue *waits[HALO_FUZZ_MAX_SPAN];
  Halo__Wire__SemaphoreValue *signals[HALO_FUZZ_MAX_SPAN];
} halo_fuzz_sync_t;

static void halo_fuzz_sync(halo_fuzz_sync_t *sync,
                           const halo_fuzz_value_t *waits, size_t wait_count,
                           const halo_fuzz_value_t *signals,
                           size_t signal_count) {
  if (wait_count > HALO_FUZZ_MAX_SPAN || signal_count > HALO_FUZZ_MAX_SPAN) {
    abort();
  }
  for (size_t i = 0; i < wait_count + signal_count; ++i) {
    const halo_fuzz_value_t *value =
        i < wait_count ? &waits[i] : &signals[i - wait_count];
    Halo__Wire__SemaphoreValue *message = &sync->storage[i];
    halo__wire__semaphore_value__init(message);
    message->semaphore = value->semaphore;
    message->value = value->value;
    if (i < wait_count) {
      sync->waits[i] = message;
    } else {
      sync->signals[i - wait_count] = message;
    }
  }
}

void halo_fuzz_frames_execute(halo_fuzz_frames_t *frames, uint64_t queue,
                              uint64_t command_buffer,
                              const halo_fuzz_binding_t *bindings,
                              size_t binding_count,
                              const halo_fuzz_value_t *waits, size_t wait_count,
                              const halo_fuzz_value_t *signals,
                              size_t signal_count) {
  if (binding_count > HALO_FUZZ_MAX_SPAN || wait_count > HALO_FUZZ_MAX_SPAN ||
      signal_count > HALO_FUZZ_MAX_SPAN) {
    abort();
  }
  Halo__Wire__Binding binding_storage[HALO_FUZZ_MAX_SPAN];
  Halo__Wire__Binding *binding_pointers[HALO_FUZZ_MAX_SPAN];
  for (size_t i = 0; i < binding_count; ++i) {
    halo__wire__binding__init(&binding_storage[i]);
    binding_storage[i].buffer = bindings[i].buffer;
    binding_storage[i].offset = bindings[i].offset;
    binding_storage[i].length = bindings[i].length;
    binding_pointers[i] = &binding_storage[i];
  }
  halo_fuzz_sync_t sync;
  halo_fuzz_sync(&sync, waits, wait_count, signals, signal_count);
  Halo__Wire__QueueExecute execute = HALO__WIRE__QUEUE_EXECUTE__INIT;
  execute.has_queue = queue != 0;
  execute.queue = queue;
  execute.command_buffer = command_buffer;
  execute.n_bindings = binding_count;
  execute.bindings = binding_pointers;
  execute.n_waits = wait_count;
  execute.waits = sync.waits;
  execute.n_signals = signal_count;
  execute.signals = sync.signals;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_EXECUTE;
  request.queue_execute = &execute;
  halo_fuzz_frames_append(frames, &request);
}

void halo_fuzz_frames_alloca(halo_fuzz_frames_t *frames, uint64_t queue,
                             uint64_t size, Halo__Wire__MemoryType memory_type,
                             const halo_fuzz_value_t *waits, size_t wait_count,
                             const halo_fuzz_value_t *signals,
                             size_t signal_count) {
  halo_fuzz_sync_t sync;
  halo_fuzz_sync(&sync, waits, wait_count, signals, signal_count);
  Halo__Wire__QueueAlloca alloca = HALO__WIRE__QUEUE_ALLOCA__INIT;
  alloca.queue = queue;
  alloca.size = size;
  alloca.memory_type = memory_type;
  alloca.n_waits = wait_count;
  alloca.waits = sync.waits;
  alloca.n_signals = signal_count;
  alloca.signals = sync.signals;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_ALLOCA;
  request.queue_alloca = &alloca;
  halo_fuzz_frames_append(frames, &request);
}

void halo_fuzz_frames_dealloca(halo_fuzz_frames_t *frames, uint64_t queue,
                               uint64_t buffer, const halo_fuzz_value_t *waits,
                               size_t wait_count,
                               const halo_fuzz_value_t *signals,
                               size_t signal_count) {
  halo_fuzz_sync_t sync;
  halo_fuzz_sync(&sync, waits, wait_count, signals, signal_count);
  Halo__Wire__QueueDealloca dealloca = HALO__WIRE__QUEUE_DEALLOCA__INIT;
  dealloca.queue = queue;
  dealloca.buffer = buffer;
  dealloca.n_waits = wait_count;
  dealloca.waits = sync.waits;
  dealloca.n_signals = signal_count;
  dealloca.signals = sync.signals;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_DEALLOCA;
  request.queue_dealloca = &dealloca;
  halo_fuzz_frames_append(frames, &request);
}
