// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo command buffers: the recording is accumulated on the client as
// wire commands and sent to the daemon once, at end(). Each record call
// checks what can be checked locally (limits, slots, pattern sizes, direct
// ranges against the buffer's size, objects of another client) so the
// caller gets an early error naming the command index and the argument; the
// daemon validates the whole recording again at end() and answers with the
// same kind of message.
//
// A record call that fails leaves the recording as it was: the caller may
// go on recording. A failed end() leaves the command buffer unusable (only
// release it).
//
// The executables and directly referenced buffers of a recording must stay
// alive until end() returns: the recording holds their handles only. After
// end() the daemon holds its own references.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/status.h"

typedef enum halo_command_buffer_state_e {
  HALO_COMMAND_BUFFER_RECORDING = 0,
  HALO_COMMAND_BUFFER_ENDED = 1,
  HALO_COMMAND_BUFFER_FAILED = 2,  // end() failed
} halo_command_buffer_state_t;

// A bump allocator for the recording's wire messages (commands, refs,
// arguments, inline bytes): everything is freed in one go after end().
typedef struct halo_recording_chunk_t {
  struct halo_recording_chunk_t *next;
  size_t used;
  size_t capacity;
  max_align_t data[];
} halo_recording_chunk_t;

#define HALO_RECORDING_CHUNK_BYTES (64u * 1024u)

struct halo_command_buffer_s {
  halo_object_link_t link;  // first: halo_client_close walks links
  halo_client_t *client;
  uint32_t device;
  uint32_t flags;
  uint32_t binding_capacity;
  halo_command_buffer_state_t state;
  // The recording (freed once end() has sent it).
  Halo__Wire__Command **commands;
  uint32_t command_count;
  uint32_t command_capacity;
  uint64_t inline_bytes;  // fill patterns, update bytes, constants
  halo_recording_chunk_t *chunks;
  // After end().
  uint64_t handle;
  bool memo_hit;
};

// Zeroed, max-aligned memory that lives until the recording is freed; NULL
// when out of memory.
static void *halo_command_buffer_allocate(halo_command_buffer_t *command_buffer,
                                          size_t size) {
  size = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
  halo_recording_chunk_t *chunk = command_buffer->chunks;
  if (!chunk || chunk->capacity - chunk->used < size) {
    size_t capacity =
        size > HALO_RECORDING_CHUNK_BYTES ? size : HALO_RECORDING_CHUNK_BYTES;
    chunk = malloc(sizeof(*chunk) + capacity);
    if (!chunk) return NULL;
    chunk->used = 0;
    chunk->capacity = capacity;
    if (size > HALO_RECORDING_CHUNK_BYTES && command_buffer->chunks) {
      // A large block gets its own chunk behind the current one, which
      // keeps its free space for the small blocks to come.
      chunk->next = command_buffer->chunks->next;
      command_buffer->chunks->next = chunk;
    } else {
      chunk->next = command_buffer->chunks;
      command_buffer->chunks = chunk;
    }
  }
  void *pointer = (uint8_t *)chunk->data + chunk->used;
  chunk->used += size;
  memset(pointer, 0, size);
  return pointer;
}

static void halo_command_buffer_free_recording(
    halo_command_buffer_t *command_buffer) {
  halo_recording_chunk_t *chunk = command_buffer->chunks;
  while (chunk) {
    halo_recording_chunk_t *next = chunk->next;
    free(chunk);
    chunk = next;
  }
  command_buffer->chunks = NULL;
  free(command_buffer->commands);
  command_buffer->commands = NULL;
  command_buffer->command_capacity = 0;
}

// "command <index> (<name>): <message>" for the command being recorded.
static halo_status_t halo_command_buffer_error(
    const halo_command_buffer_t *command_buffer, const char *name,
    halo_status_code_t code, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static halo_status_t halo_command_buffer_error(
    const halo_command_buffer_t *command_buffer, const char *name,
    halo_status_code_t code, const char *format, ...) {
  char message[512];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  return halo_status_make(code, "command %u (%s): %s",
                          command_buffer->command_count, name, message);
}

#define HALO_COMMAND_CHECK(cond, ...)                                       \
  do {                                                                      \
    if (!(cond)) {                                                          \
      return halo_command_buffer_error(                                     \
          command_buffer, name, HALO_STATUS_INVALID_ARGUMENT, __VA_ARGS__); \
    }                                                                       \
  } while (0)

// Checks that one more command named |name| may be recorded.
static halo_status_t halo_command_buffer_check_recording(
    const halo_command_buffer_t *command_buffer, const char *name) {
  HALO_CHECK_ARG(command_buffer, "command_buffer must not be NULL");
  if (command_buffer->state != HALO_COMMAND_BUFFER_RECORDING) {
    return halo_command_buffer_error(
        command_buffer, name, HALO_STATUS_FAILED_PRECONDITION,
        "the command buffer was ended; nothing can be recorded after end()");
  }
  if (command_buffer->command_count >= HALO_MAX_COMMANDS) {
    return halo_command_buffer_error(
        command_buffer, name, HALO_STATUS_RESOURCE_EXHAUSTED,
        "a recording holds at most %u commands", HALO_MAX_COMMANDS);
  }
  return NULL;
}

// Checks that |inline_bytes| more bytes of inline data (fill pattern,
// update bytes, constants) fit in the recording.
static halo_status_t halo_command_buffer_check_inline(
    const halo_command_buffer_t *command_buffer, const char *name,
    uint64_t inline_bytes) {
  if (inline_bytes > HALO_MAX_INLINE_BYTES - command_buffer->inline_bytes) {
    return halo_command_buffer_error(
        command_buffer, name, HALO_STATUS_RESOURCE_EXHAUSTED,
        "%llu inline bytes would bring the recording to %llu, over the "
        "limit of %u",
        (unsigned long long)inline_bytes,
        (unsigned long long)(command_buffer->inline_bytes + inline_bytes),
        HALO_MAX_INLINE_BYTES);
  }
  return NULL;
}

// How a command uses a reference (as in the daemon's validation).
typedef enum halo_ref_use_e {
  // The command touches exactly the referenced bytes (fill, copy, update,
  // workgroup count): the length must be known and nonzero.
  HALO_REF_BYTES = 0,
  // Only the address matters (a dispatch argument).
  HALO_REF_ADDRESS = 1,
} halo_ref_use_t;

// Checks |ref|, named |what| ("target", "argument 2") in errors: a slot
// within the binding capacity, or a buffer of this client whose size covers
// the range.
static halo_status_t halo_command_buffer_check_ref(
    const halo_command_buffer_t *command_buffer, const char *name,
    const char *what, const halo_buffer_ref_t *ref, halo_ref_use_t use) {
  if (!ref->buffer) {
    HALO_COMMAND_CHECK(ref->slot < command_buffer->binding_capacity,
                       "%s: slot %u out of range (binding capacity %u)", what,
                       ref->slot, command_buffer->binding_capacity);
    HALO_COMMAND_CHECK(
        use != HALO_REF_BYTES || ref->length != HALO_WHOLE_BUFFER,
        "%s: an indirect reference (slot %u) needs an explicit "
        "length",
        what, ref->slot);
    HALO_COMMAND_CHECK(use != HALO_REF_BYTES || ref->length > 0,
                       "%s: zero length", what);
    HALO_COMMAND_CHECK(ref->length == HALO_WHOLE_BUFFER ||
                           ref->length <= UINT64_MAX - ref->offset,
                       "%s: offset + length overflows", what);
    return NULL;
  }
  const halo_buffer_t *buffer = ref->buffer;
  HALO_COMMAND_CHECK(halo_buffer_client(buffer) == command_buffer->client,
                     "%s: buffer 0x%llx belongs to another client", what,
                     (unsigned long long)halo_buffer_handle(buffer));
  uint64_t size = halo_buffer_size(buffer);
  uint64_t length = ref->length == HALO_WHOLE_BUFFER
                        ? size - (ref->offset <= size ? ref->offset : size)
                        : ref->length;
  if (ref->offset > size || length > size - ref->offset) {
    return halo_command_buffer_error(
        command_buffer, name, HALO_STATUS_OUT_OF_RANGE,
        "%s: range [%llu, +%llu) does not fit buffer 0x%llx of %llu bytes",
        what, (unsigned long long)ref->offset, (unsigned long long)length,
        (unsigned long long)halo_buffer_handle(buffer),
        (unsigned long long)size);
  }
  HALO_COMMAND_CHECK(use != HALO_REF_BYTES || length > 0, "%s: zero length",
                     what);
  return NULL;
}

// The length |ref| covers if it can be told at record time (a direct ref,
// or an explicit length); UINT64_MAX otherwise.
static uint64_t halo_buffer_ref_known_length(const halo_buffer_ref_t *ref) {
  if (ref->length != HALO_WHOLE_BUFFER) return ref->length;
  if (ref->buffer) return halo_buffer_size(ref->buffer) - ref->offset;
  return UINT64_MAX;
}

static Halo__Wire__BufferRef *halo_command_buffer_wire_ref(
    halo_command_buffer_t *command_buffer, const halo_buffer_ref_t *ref) {
  Halo__Wire__BufferRef *wire =
      halo_command_buffer_allocate(command_buffer, sizeof(*wire));
  if (!wire) return NULL;
  *wire = (Halo__Wire__BufferRef)HALO__WIRE__BUFFER_REF__INIT;
  if (ref->buffer) {
    wire->has_buffer = true;
    wire->buffer = halo_buffer_handle(ref->buffer);
  } else {
    wire->has_slot = true;
    wire->slot = ref->slot;
  }
  wire->offset = ref->offset;
  wire->length = ref->length;
  return wire;
}

// A copy of |size| bytes at |data| in the recording's memory.
static void *halo_command_buffer_copy_bytes(
    halo_command_buffer_t *command_buffer, const void *data, size_t size) {
  void *copy = halo_command_buffer_allocate(command_buffer, size);
  if (copy) memcpy(copy, data, size);
  return copy;
}

// A new command of |type| in the recording's memory (appended by
// halo_command_buffer_append once complete).
static Halo__Wire__Command *halo_command_buffer_new_command(
    halo_command_buffer_t *command_buffer, Halo__Wire__CommandType type) {
  Halo__Wire__Command *command =
      halo_command_buffer_allocate(command_buffer, sizeof(*command));
  if (!command) return NULL;
  *command = (Halo__Wire__Command)HALO__WIRE__COMMAND__INIT;
  command->type = type;
  return command;
}

static halo_status_t halo_command_buffer_append(
    halo_command_buffer_t *command_buffer, Halo__Wire__Command *command,
    uint64_t inline_bytes) {
  if (!command) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  if (command_buffer->command_count == command_buffer->command_capacity) {
    uint32_t capacity = command_buffer->command_capacity
                            ? command_buffer->command_capacity * 2
                            : 16;
    Halo__Wire__Command **commands =
        realloc(command_buffer->commands, capacity * sizeof(*commands));
    if (!commands) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    }
    command_buffer->commands = commands;
    command_buffer->command_capacity = capacity;
  }
  command_buffer->commands[command_buffer->command_count++] = command;
  command_buffer->inline_bytes += inline_bytes;
  return NULL;
}

halo_status_t halo_command_buffer_begin(
    halo_client_t *client, uint32_t device, uint32_t flags,
    uint32_t binding_capacity, halo_command_buffer_t **out_command_buffer) {
  HALO_CHECK_ARG(out_command_buffer, "out_command_buffer must not be NULL");
  *out_command_buffer = NULL;
  HALO_CHECK_ARG(client, "client must not be NULL");
  uint32_t mode = flags & ~HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS;
  HALO_CHECK_ARG(mode == HALO_COMMAND_BUFFER_ONE_SHOT ||
                     mode == HALO_COMMAND_BUFFER_REUSABLE,
                 "command buffer flags 0x%x: pass exactly one of ONE_SHOT "
                 "(0x%x) and REUSABLE (0x%x), optionally with "
                 "UNALIGNED_BINDINGS (0x%x)",
                 flags, HALO_COMMAND_BUFFER_ONE_SHOT,
                 HALO_COMMAND_BUFFER_REUSABLE,
                 HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS);
  HALO_CHECK_ARG(binding_capacity <= HALO_MAX_BINDINGS,
                 "binding capacity %u exceeds the limit of %u",
                 binding_capacity, HALO_MAX_BINDINGS);
  // Recording is local, but its end() could never reach halod from a
  // forked child: refused at once.
  HALO_RETURN_IF_ERROR(halo_client_check_process(client));
  halo_command_buffer_t *command_buffer = calloc(1, sizeof(*command_buffer));
  if (!command_buffer) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  command_buffer->client = client;
  command_buffer->device = device;
  command_buffer->flags = flags;
  command_buffer->binding_capacity = binding_capacity;
  halo_client_track(client, &command_buffer->link, HALO_OBJECT_COMMAND_BUFFER);
  *out_command_buffer = command_buffer;
  return NULL;
}

halo_status_t halo_command_buffer_fill(halo_command_buffer_t *command_buffer,
                                       halo_buffer_ref_t target,
                                       const void *pattern,
                                       size_t pattern_size) {
  static const char name[] = "fill";
  HALO_RETURN_IF_ERROR(
      halo_command_buffer_check_recording(command_buffer, name));
  HALO_COMMAND_CHECK(pattern, "pattern is NULL");
  HALO_COMMAND_CHECK(
      pattern_size == 1 || pattern_size == 2 || pattern_size == 4,
      "pattern size %zu is not 1, 2 or 4", pattern_size);
  HALO_RETURN_IF_ERROR(
      halo_command_buffer_check_inline(command_buffer, name, pattern_size));
  HALO_RETURN_IF_ERROR(halo_command_buffer_check_ref(
      command_buffer, name, "target", &target, HALO_REF_BYTES));
  HALO_COMMAND_CHECK(target.offset % pattern_size == 0,
                     "target: offset %llu is not a multiple of the pattern "
                     "size %zu",
                     (unsigned long long)target.offset, pattern_size);
  uint64_t length = halo_buffer_ref_known_length(&target);
  HALO_COMMAND_CHECK(length == UINT64_MAX || length % pattern_size == 0,
                     "target: length %llu is not a multiple of the pattern "
                     "size %zu",
                     (unsigned long long)length, pattern_size);
  Halo__Wire__Command *command = halo_command_buffer_new_command(
      command_buffer, HALO__WIRE__COMMAND_TYPE__COMMAND_FILL);
  if (command) {
    command->target = halo_command_buffer_wire_ref(command_buffer, &target);
    command->has_data = true;
    command->data.len = pattern_size;
    command->data.data =
        halo_command_buffer_copy_bytes(command_buffer, pattern, pattern_size);
    if (!command->target || !command->data.data) command = NULL;
  }
  return halo_command_buffer_append(command_buffer, command, pattern_size);
}

halo_status_t halo_command_buffer_copy(halo_command_buffer_t *command_buffer,
                                       halo_buffer_ref_t source,
                                       halo_buffer_ref_t target) {
  static const char name[] = "copy";
  HALO_RETURN_IF_ERROR(
      halo_command_buffer_check_recording(command_buffer, name));
  // HALO_WHOLE_BUFFER on one side takes the other side's length (the wire
  // form has explicit lengths wherever one side has one). Where neither
  // side has one and only one is a slot, the slot takes the rest of the
  // direct side's buffer.
  if (source.length == HALO_WHOLE_BUFFER &&
      target.length == HALO_WHOLE_BUFFER && !source.buffer != !target.buffer) {
    halo_buffer_ref_t *direct = source.buffer ? &source : &target;
    if (direct->offset <= halo_buffer_size(direct->buffer)) {
      direct->length = halo_buffer_ref_known_length(direct);
    }
  }
  if (source.length == HALO_WHOLE_BUFFER) source.length = target.length;
  if (target.length == HALO_WHOLE_BUFFER) target.length = source.length;
  HALO_RETURN_IF_ERROR(halo_command_buffer_check_ref(
      command_buffer, name, "source", &source, HALO_REF_BYTES));
  HALO_RETURN_IF_ERROR(halo_command_buffer_check_ref(
      command_buffer, name, "target", &target, HALO_REF_BYTES));
  uint64_t source_length = halo_buffer_ref_known_length(&source);
  uint64_t target_length = halo_buffer_ref_known_length(&target);
  HALO_COMMAND_CHECK(
      source_length == target_length, "source has %llu bytes, target %llu",
      (unsigned long long)source_length, (unsigned long long)target_length);
  Halo__Wire__Command *command = halo_command_buffer_new_command(
      command_buffer, HALO__WIRE__COMMAND_TYPE__COMMAND_COPY);
  if (command) {
    command->source = halo_command_buffer_wire_ref(command_buffer, &source);
    command->target = halo_command_buffer_wire_ref(command_buffer, &target);
    if (!command->source || !command->target) command = NULL;
  }
  return halo_command_buffer_append(command_buffer, command, 0);
}

halo_status_t halo_command_buffer_update(halo_command_buffer_t *command_buffer,
                                         const void *data, size_t size,
                                         halo_buffer_ref_t target) {
  static const char name[] = "update";
  HALO_RETURN_IF_ERROR(
      halo_command_buffer_check_recording(command_buffer, name));
  HALO_COMMAND_CHECK(data, "data is NULL");
  HALO_COMMAND_CHECK(size > 0 && size <= HALO_MAX_UPDATE_BYTES,
                     "update of %zu bytes (1 .. %u)", size,
                     HALO_MAX_UPDATE_BYTES);
  HALO_RETURN_IF_ERROR(
      halo_command_buffer_check_inline(command_buffer, name, size));
  HALO_COMMAND_CHECK(
      target.length == HALO_WHOLE_BUFFER || target.length == size,
      "target length %llu differs from the %zu bytes of data",
      (unsigned long long)target.length, size);
  // The update writes exactly |size| bytes: that is the range checked and
  // sent, whatever the target's length said.
  target.length = size;
  HALO_RETURN_IF_ERROR(halo_command_buffer_check_ref(
      command_buffer, name, "target", &target, HALO_REF_BYTES));
  Halo__Wire__Command *command = halo_command_buffer_new_command(
      command_buffer, HALO__WIRE__COMMAND_TYPE__COMMAND_UPDATE);
  if (command) {
    command->target = halo_command_buffer_wire_ref(command_buffer, &target);
    command->has_data = true;
    command->data.len = size;
    command->data.data =
        halo_command_buffer_copy_bytes(command_buffer, data, size);
    if (!command->target || !command->data.data) command = NULL;
  }
  return halo_command_buffer_append(command_buffer, command, size);
}

// Checks a dispatch's parameters; |out_inline_bytes| receives the bytes of
// its constants.
static halo_status_t halo_command_buffer_check_dispatch(
    const halo_command_buffer_t *command_buffer, const char *name,
    const halo_dispatch_params_t *params, uint64_t *out_inline_bytes) {
  *out_inline_bytes = 0;
  HALO_COMMAND_CHECK(params, "params is NULL");
  HALO_COMMAND_CHECK(params->executable, "executable is NULL");
  const halo_executable_t *executable = params->executable;
  HALO_COMMAND_CHECK(
      halo_executable_client(executable) == command_buffer->client,
      "executable 0x%llx belongs to another client",
      (unsigned long long)halo_executable_handle(executable));
  HALO_COMMAND_CHECK(
      halo_executable_device(executable) == command_buffer->device,
      "executable 0x%llx was loaded on device %u, the command buffer "
      "records for device %u",
      (unsigned long long)halo_executable_handle(executable),
      halo_executable_device(executable), command_buffer->device);
  HALO_COMMAND_CHECK(params->entry && params->entry[0], "entry is %s",
                     params->entry ? "empty" : "NULL");
  // A zero grid dimension makes a no-op dispatch (an indirect one reads its
  // grid at execution); a workgroup needs at least one thread.
  for (int i = 0; i < 3; ++i) {
    HALO_COMMAND_CHECK(params->block[i] > 0, "block[%d] is 0", i);
  }
  HALO_COMMAND_CHECK(params->arg_count <= HALO_MAX_DISPATCH_ARGS,
                     "%zu arguments exceed the limit of %u", params->arg_count,
                     HALO_MAX_DISPATCH_ARGS);
  HALO_COMMAND_CHECK(params->args || params->arg_count == 0,
                     "args is NULL but arg_count is %zu", params->arg_count);
  uint64_t inline_bytes = 0;
  for (size_t i = 0; i < params->arg_count; ++i) {
    const halo_dispatch_arg_t *arg = &params->args[i];
    char what[32];
    snprintf(what, sizeof(what), "argument %zu", i);
    switch (arg->kind) {
      case HALO_DISPATCH_ARG_BUFFER:
        HALO_RETURN_IF_ERROR(halo_command_buffer_check_ref(
            command_buffer, name, what, &arg->ref, HALO_REF_ADDRESS));
        break;
      case HALO_DISPATCH_ARG_CONSTANT:
        HALO_COMMAND_CHECK(arg->data, "%s: constant data is NULL", what);
        HALO_COMMAND_CHECK(
            arg->size > 0 && arg->size <= HALO_MAX_CONSTANT_BYTES,
            "%s: constant of %zu bytes (1 .. %u)", what, arg->size,
            HALO_MAX_CONSTANT_BYTES);
        inline_bytes += arg->size;
        break;
      case HALO_DISPATCH_ARG_BINDING_TABLE:
        HALO_COMMAND_CHECK(command_buffer->binding_capacity > 0,
                           "%s: BINDING_TABLE with a binding capacity of 0",
                           what);
        break;
      default:
        HALO_COMMAND_CHECK(false,
                           "%s: kind %d is not a halo_dispatch_arg_kind_t",
                           what, (int)arg->kind);
    }
  }
  *out_inline_bytes = inline_bytes;
  return NULL;
}

static Halo__Wire__Command *halo_command_buffer_new_dispatch(
    halo_command_buffer_t *command_buffer, Halo__Wire__CommandType type,
    const halo_dispatch_params_t *params) {
  Halo__Wire__Command *command =
      halo_command_buffer_new_command(command_buffer, type);
  if (!command) return NULL;
  command->has_executable = true;
  command->executable = halo_executable_handle(params->executable);
  command->entry = halo_command_buffer_copy_bytes(command_buffer, params->entry,
                                                  strlen(params->entry) + 1);
  command->n_grid = 3;
  command->grid =
      halo_command_buffer_copy_bytes(command_buffer, params->grid, 12);
  command->n_block = 3;
  command->block =
      halo_command_buffer_copy_bytes(command_buffer, params->block, 12);
  command->has_shared_memory_bytes = true;
  command->shared_memory_bytes = params->shared_memory_bytes;
  command->n_args = params->arg_count;
  command->args = halo_command_buffer_allocate(
      command_buffer, params->arg_count * sizeof(*command->args));
  if (!command->entry || !command->grid || !command->block ||
      (params->arg_count && !command->args)) {
    return NULL;
  }
  for (size_t i = 0; i < params->arg_count; ++i) {
    const halo_dispatch_arg_t *arg = &params->args[i];
    Halo__Wire__DispatchArg *wire =
        halo_command_buffer_allocate(command_buffer, sizeof(*wire));
    if (!wire) return NULL;
    *wire = (Halo__Wire__DispatchArg)HALO__WIRE__DISPATCH_ARG__INIT;
    wire->kind = (Halo__Wire__DispatchArgKind)arg->kind;
    if (arg->kind == HALO_DISPATCH_ARG_BUFFER) {
      wire->ref = halo_command_buffer_wire_ref(command_buffer, &arg->ref);
      if (!wire->ref) return NULL;
    } else if (arg->kind == HALO_DISPATCH_ARG_CONSTANT) {
      wire->has_constant = true;
      wire->constant.len = arg->size;
      wire->constant.data =
          halo_command_buffer_copy_bytes(command_buffer, arg->data, arg->size);
      if (!wire->constant.data) return NULL;
    }
    command->args[i] = wire;
  }
  return command;
}

halo_status_t halo_command_buffer_dispatch(
    halo_command_buffer_t *command_buffer,
    const halo_dispatch_params_t *params) {
  static const char name[] = "dispatch";
  HALO_RETURN_IF_ERROR(
      halo_command_buffer_check_recording(command_buffer, name));
  uint64_t inline_bytes;
  HALO_RETURN_IF_ERROR(halo_command_buffer_check_dispatch(
      command_buffer, name, params, &inline_bytes));
  HALO_RETURN_IF_ERROR(
      halo_command_buffer_check_inline(command_buffer, name, inline_bytes));
  Halo__Wire__Command *command = halo_command_buffer_new_dispatch(
      command_buffer, HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH, params);
  return halo_command_buffer_append(command_buffer, command, inline_bytes);
}

halo_status_t halo_command_buffer_dispatch_indirect(
    halo_command_buffer_t *command_buffer, const halo_dispatch_params_t *params,
    halo_buffer_ref_t workgroup_count) {
  static const char name[] = "dispatch_indirect";
  HALO_RETURN_IF_ERROR(
      halo_command_buffer_check_recording(command_buffer, name));
  uint64_t inline_bytes;
  HALO_RETURN_IF_ERROR(halo_command_buffer_check_dispatch(
      command_buffer, name, params, &inline_bytes));
  HALO_RETURN_IF_ERROR(
      halo_command_buffer_check_inline(command_buffer, name, inline_bytes));
  // The count is three uint32_t: HALO_WHOLE_BUFFER means those 12 bytes.
  if (workgroup_count.length == HALO_WHOLE_BUFFER) workgroup_count.length = 12;
  HALO_COMMAND_CHECK(workgroup_count.length == 12,
                     "workgroup_count: %llu bytes referenced, it must be "
                     "exactly 12 (three uint32_t)",
                     (unsigned long long)workgroup_count.length);
  HALO_COMMAND_CHECK(workgroup_count.offset % 4 == 0,
                     "workgroup_count: offset %llu is not a multiple of 4",
                     (unsigned long long)workgroup_count.offset);
  HALO_RETURN_IF_ERROR(
      halo_command_buffer_check_ref(command_buffer, name, "workgroup_count",
                                    &workgroup_count, HALO_REF_BYTES));
  Halo__Wire__Command *command = halo_command_buffer_new_dispatch(
      command_buffer, HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH_INDIRECT,
      params);
  if (command) {
    command->workgroup_count =
        halo_command_buffer_wire_ref(command_buffer, &workgroup_count);
    if (!command->workgroup_count) command = NULL;
  }
  return halo_command_buffer_append(command_buffer, command, inline_bytes);
}

halo_status_t halo_command_buffer_barrier(
    halo_command_buffer_t *command_buffer) {
  HALO_RETURN_IF_ERROR(
      halo_command_buffer_check_recording(command_buffer, "barrier"));
  Halo__Wire__Command *command = halo_command_buffer_new_command(
      command_buffer, HALO__WIRE__COMMAND_TYPE__COMMAND_BARRIER);
  return halo_command_buffer_append(command_buffer, command, 0);
}

halo_status_t halo_command_buffer_end(halo_command_buffer_t *command_buffer) {
  HALO_CHECK_ARG(command_buffer, "command_buffer must not be NULL");
  if (command_buffer->state != HALO_COMMAND_BUFFER_RECORDING) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "the command buffer was already ended");
  }
  Halo__Wire__CommandBufferCreate create =
      HALO__WIRE__COMMAND_BUFFER_CREATE__INIT;
  create.device = command_buffer->device;
  create.flags = command_buffer->flags;
  create.binding_capacity = command_buffer->binding_capacity;
  create.n_commands = command_buffer->command_count;
  create.commands = command_buffer->commands;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_CREATE;
  request.command_buffer_create = &create;
  halo_wire_response_t *response = NULL;
  halo_status_t status =
      halo_client_call(command_buffer->client, &request, &response);
  halo_command_buffer_free_recording(command_buffer);
  if (!status &&
      response->body_case != HALO__WIRE__RESPONSE__BODY_COMMAND_BUFFER) {
    status = halo_status_make(HALO_STATUS_INTERNAL,
                              "halod answered CommandBufferCreate with "
                              "another body");
  }
  if (status) {
    command_buffer->state = HALO_COMMAND_BUFFER_FAILED;
  } else {
    command_buffer->handle = response->command_buffer->handle;
    command_buffer->memo_hit = response->command_buffer->memo_hit;
    command_buffer->state = HALO_COMMAND_BUFFER_ENDED;
  }
  if (response) halo__wire__response__free_unpacked(response, NULL);
  return status;
}

int halo_command_buffer_memo_hit(const halo_command_buffer_t *command_buffer) {
  return command_buffer && command_buffer->memo_hit;
}

void halo_command_buffer_release_link(halo_object_link_t *link) {
  halo_command_buffer_t *command_buffer = (halo_command_buffer_t *)link;
  halo_client_t *client = command_buffer->client;
  halo_client_untrack(client, &command_buffer->link);
  if (command_buffer->state == HALO_COMMAND_BUFFER_ENDED) {
    Halo__Wire__CommandBufferRelease release =
        HALO__WIRE__COMMAND_BUFFER_RELEASE__INIT;
    release.handle = command_buffer->handle;
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
    request.body_case = HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_RELEASE;
    request.command_buffer_release = &release;
    // A failure here (daemon gone) leaves nothing to release: the daemon
    // frees a session's objects when its connection ends.
    halo_status_free(halo_client_call_status(client, &request));
  }
  halo_command_buffer_free_recording(command_buffer);
  free(command_buffer);
}

void halo_command_buffer_release(halo_command_buffer_t *command_buffer) {
  if (command_buffer) halo_command_buffer_release_link(&command_buffer->link);
}

halo_status_t halo_command_buffer_query_ended(
    const halo_command_buffer_t *command_buffer,
    halo_command_buffer_info_t *out_info) {
  memset(out_info, 0, sizeof(*out_info));
  switch (command_buffer->state) {
    case HALO_COMMAND_BUFFER_RECORDING:
      return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                              "the command buffer is still recording; call "
                              "halo_command_buffer_end first");
    case HALO_COMMAND_BUFFER_FAILED:
      return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                              "the command buffer's end() failed; it cannot "
                              "be executed");
    case HALO_COMMAND_BUFFER_ENDED:
      break;
  }
  out_info->client = command_buffer->client;
  out_info->device = command_buffer->device;
  out_info->handle = command_buffer->handle;
  out_info->binding_capacity = command_buffer->binding_capacity;
  return NULL;
}
