// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/command_buffer.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "daemon/device_call.h"
#include "daemon/queue.h"
#include "daemon/session.h"
#include "hal/device.h"
#include "hal/remote/remote_device.h"

// An entry point a recording's dispatch names that its executable's proxy
// did not know: looked up by a control call to the worker, off the loop,
// before the recording is validated (halod_command_buffer_create).
typedef struct halod_entry_lookup_t {
  halod_executable_t *executable;  // held
  const char *name;                // in the request
  halo_hal_entry_info_t info;
  halo_status_t status;
} halod_entry_lookup_t;

typedef struct halod_entry_lookups_t {
  halod_entry_lookup_t *items;
  uint32_t count;
  uint32_t capacity;
  halo_u64_map_t index;  // halod_entry_lookup_key -> first item's index + 1
} halod_entry_lookups_t;

// Collects what a recording needs while it is validated.
typedef struct halod_recorder_t {
  halod_t *daemon;
  halod_session_t *session;
  uint32_t device;
  halo_hal_device_t *hal_device;  // the session's trust domain's
  halo_hal_recording_t recording;
  uint32_t command_capacity;  // of recording.commands, as allocated
  uint32_t arg_capacity;
  uint32_t data_capacity;
  halod_slot_requirement_t *slots;
  halod_executable_t **executables;
  uint32_t executable_count;
  uint32_t executable_capacity;
  halod_buffer_t **buffers;
  uint32_t buffer_count;
  uint32_t buffer_capacity;
  // The buffers and executables above (their addresses): a recording may
  // name tens of thousands of buffers, each checked once.
  halo_u64_map_t kept;
  halo_hasher_t hasher;
  // Of every buffer a dispatch argument passes: HALOD_DISPATCH_ALIGNMENT,
  // or 1 with HALOD_COMMAND_BUFFER_UNALIGNED_BINDINGS.
  uint32_t dispatch_alignment;
  bool binding_table_passed;  // a dispatch takes the whole table
  // Entries looked up off the loop for this recording (NULL: none).
  const halod_entry_lookups_t *lookups;
  // For error messages.
  uint32_t index;
  const char *what;
} halod_recorder_t;

static const char *halod_command_name(uint32_t type) {
  switch (type) {
    case HALO__WIRE__COMMAND_TYPE__COMMAND_FILL:
      return "fill";
    case HALO__WIRE__COMMAND_TYPE__COMMAND_COPY:
      return "copy";
    case HALO__WIRE__COMMAND_TYPE__COMMAND_UPDATE:
      return "update";
    case HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH:
      return "dispatch";
    case HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH_INDIRECT:
      return "dispatch_indirect";
    case HALO__WIRE__COMMAND_TYPE__COMMAND_BARRIER:
      return "barrier";
    default:
      return "unknown";
  }
}

// An error about the command being validated: "command 3 (dispatch): ...".
static halo_status_t halod_recorder_error(halod_recorder_t *recorder,
                                          halo_status_code_t code,
                                          const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static halo_status_t halod_recorder_error(halod_recorder_t *recorder,
                                          halo_status_code_t code,
                                          const char *format, ...) {
  char message[768];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  return halo_status_make(code, "command %u (%s): %s", recorder->index,
                          recorder->what, message);
}

static halo_status_t halod_recorder_annotate(halod_recorder_t *recorder,
                                             halo_status_t status) {
  return halo_status_annotate(status, "command %u (%s)", recorder->index,
                              recorder->what);
}

static halo_status_t halod_recorder_append_data(halod_recorder_t *recorder,
                                                const uint8_t *data,
                                                size_t size,
                                                uint32_t *out_offset) {
  halo_hal_recording_t *recording = &recorder->recording;
  if (size > HALOD_MAX_INLINE_BYTES - recording->data_size) {
    return halod_recorder_error(recorder, HALO_STATUS_RESOURCE_EXHAUSTED,
                                "inline bytes of the recording exceed %u",
                                HALOD_MAX_INLINE_BYTES);
  }
  if (recording->data_size + size > recorder->data_capacity) {
    uint32_t capacity = recorder->data_capacity ? recorder->data_capacity : 256;
    while (capacity < recording->data_size + size) capacity *= 2;
    uint8_t *data_grown = realloc(recording->data, capacity);
    if (!data_grown)
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    recording->data = data_grown;
    recorder->data_capacity = capacity;
  }
  *out_offset = recording->data_size;
  if (size) memcpy(recording->data + recording->data_size, data, size);
  recording->data_size += (uint32_t)size;
  halo_hasher_update_bytes(&recorder->hasher, data, size);
  return NULL;
}

// Whether |object| (a buffer or an executable) is kept already; if not,
// marks it so.
static halo_status_t halod_recorder_mark(halod_recorder_t *recorder,
                                         const void *object, bool *out_kept) {
  uint64_t key = (uint64_t)(uintptr_t)object;
  *out_kept = halo_u64_map_get(&recorder->kept, key) != NULL;
  if (*out_kept) return NULL;
  return halo_u64_map_put(&recorder->kept, key, (void *)object);
}

// The capacity an array of |count| (of |capacity|) needs for one more.
static uint32_t halod_recorder_room(uint32_t count, uint32_t capacity) {
  return count < capacity ? capacity : capacity ? capacity * 2 : 8;
}

static halo_status_t halod_recorder_keep_buffer(halod_recorder_t *recorder,
                                                halod_buffer_t *buffer) {
  bool kept;
  halo_status_t status = halod_recorder_mark(recorder, buffer, &kept);
  if (status || kept) return status;
  uint32_t capacity =
      halod_recorder_room(recorder->buffer_count, recorder->buffer_capacity);
  if (capacity != recorder->buffer_capacity) {
    halod_buffer_t **grown =
        realloc(recorder->buffers, capacity * sizeof(*grown));
    if (!grown) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    recorder->buffers = grown;
    recorder->buffer_capacity = capacity;
  }
  halod_buffer_retain(buffer);
  recorder->buffers[recorder->buffer_count++] = buffer;
  return NULL;
}

static halo_status_t halod_recorder_keep_executable(
    halod_recorder_t *recorder, halod_executable_t *executable) {
  bool kept;
  halo_status_t status = halod_recorder_mark(recorder, executable, &kept);
  if (status || kept) return status;
  uint32_t capacity = halod_recorder_room(recorder->executable_count,
                                          recorder->executable_capacity);
  if (capacity != recorder->executable_capacity) {
    halod_executable_t **grown =
        realloc(recorder->executables, capacity * sizeof(*grown));
    if (!grown) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    recorder->executables = grown;
    recorder->executable_capacity = capacity;
  }
  halod_executable_retain(recorder->daemon, executable);
  recorder->executables[recorder->executable_count++] = executable;
  return NULL;
}

// Why a kernel argument must be aligned, and how a recording opts out.
static const char halod_dispatch_alignment_hint[] =
    " (a kernel's buffer argument: vectorized loads fault on a lesser "
    "address; HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS allows it)";

typedef enum halod_ref_use_e {
  HALOD_REF_BYTES,    // the command touches exactly ref.length bytes
  HALOD_REF_ADDRESS,  // only the address matters (dispatch arguments)
} halod_ref_use_t;

// Resolves |wire| into |out_ref|: direct references are checked against
// the buffer now; indirect ones add to the slot's requirements.
static halo_status_t halod_recorder_resolve_ref(
    halod_recorder_t *recorder, const Halo__Wire__BufferRef *wire,
    const char *role, halod_ref_use_t use, uint32_t alignment,
    halo_hal_buffer_ref_t *out_ref) {
  memset(out_ref, 0, sizeof(*out_ref));
  if (!wire) {
    return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                "%s: missing buffer reference", role);
  }
  bool whole = wire->length == UINT64_MAX;
  if (wire->buffer != 0) {
    void *object;
    halo_status_t status =
        halod_handle_table_lookup(&recorder->session->handles, wire->buffer,
                                  HALOD_OBJECT_BUFFER, &object);
    if (status) {
      return halo_status_annotate(status, "command %u (%s): %s",
                                  recorder->index, recorder->what, role);
    }
    halod_buffer_t *buffer = object;
    uint64_t address;
    status = halod_buffer_device_address(buffer, recorder->hal_device,
                                         recorder->device, &address);
    if (status) {
      return halo_status_annotate(status, "command %u (%s): %s",
                                  recorder->index, recorder->what, role);
    }
    uint64_t length =
        whole ? buffer->size -
                    (wire->offset <= buffer->size ? wire->offset : buffer->size)
              : wire->length;
    if (wire->offset > buffer->size || length > buffer->size - wire->offset ||
        (use == HALOD_REF_BYTES && length == 0)) {
      return halod_recorder_error(
          recorder, HALO_STATUS_OUT_OF_RANGE,
          "%s: range [%llu, +%llu) does not fit buffer handle 0x%llx of "
          "%llu bytes",
          role, (unsigned long long)wire->offset, (unsigned long long)length,
          (unsigned long long)wire->buffer, (unsigned long long)buffer->size);
    }
    if ((address + wire->offset) % alignment != 0) {
      return halod_recorder_error(
          recorder, HALO_STATUS_INVALID_ARGUMENT,
          "%s: offset %llu is not %u-byte aligned%s", role,
          (unsigned long long)wire->offset, alignment,
          use == HALOD_REF_ADDRESS ? halod_dispatch_alignment_hint : "");
    }
    HALO_RETURN_IF_ERROR(halod_recorder_keep_buffer(recorder, buffer));
    out_ref->slot = HALO_HAL_SLOT_DIRECT;
    out_ref->address = address + wire->offset;
    out_ref->offset = 0;
    out_ref->length = length;
    halo_hasher_update_u64(&recorder->hasher, 1);
    halo_hasher_update_u64(&recorder->hasher, buffer->id);
  } else {
    uint32_t capacity = recorder->recording.binding_capacity;
    if (wire->slot >= capacity) {
      return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                  "%s: slot %u out of range (binding "
                                  "capacity %u)",
                                  role, wire->slot, capacity);
    }
    if (whole && use == HALOD_REF_BYTES) {
      return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                  "%s: an indirect reference (slot %u) needs "
                                  "an explicit length",
                                  role, wire->slot);
    }
    if (use == HALOD_REF_BYTES && wire->length == 0) {
      return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                  "%s: zero length", role);
    }
    if (!whole && wire->length > UINT64_MAX - wire->offset) {
      return halod_recorder_error(recorder, HALO_STATUS_OUT_OF_RANGE,
                                  "%s: offset + length overflows", role);
    }
    if (wire->offset % alignment != 0) {
      return halod_recorder_error(
          recorder, HALO_STATUS_INVALID_ARGUMENT,
          "%s: offset %llu in slot %u is not %u-byte aligned%s", role,
          (unsigned long long)wire->offset, wire->slot, alignment,
          use == HALOD_REF_ADDRESS ? halod_dispatch_alignment_hint : "");
    }
    halod_slot_requirement_t *slot = &recorder->slots[wire->slot];
    uint64_t end = whole ? wire->offset + 1 : wire->offset + wire->length;
    if (end > slot->min_length) slot->min_length = end;
    if (alignment > slot->alignment) slot->alignment = alignment;
    slot->used = true;
    out_ref->slot = wire->slot;
    out_ref->offset = wire->offset;
    out_ref->length = wire->length;
    halo_hasher_update_u64(&recorder->hasher, 2);
    halo_hasher_update_u64(&recorder->hasher, wire->slot);
  }
  halo_hasher_update_u64(&recorder->hasher, wire->offset);
  halo_hasher_update_u64(&recorder->hasher, wire->length);
  return NULL;
}

// FNV-1a of |name| with |executable|'s address, never 0 (a map key).
static uint64_t halod_entry_lookup_key(const halod_executable_t *executable,
                                       const char *name) {
  uint64_t key = 14695981039346656037ull ^ (uint64_t)(uintptr_t)executable;
  for (const unsigned char *c = (const unsigned char *)name; *c; ++c) {
    key = (key ^ *c) * 1099511628211ull;
  }
  return key ? key : 1;
}

static const halod_entry_lookup_t *halod_entry_lookups_find(
    const halod_entry_lookups_t *lookups, const halod_executable_t *executable,
    const char *name) {
  if (!lookups) return NULL;
  uintptr_t first = (uintptr_t)halo_u64_map_get(
      &lookups->index, halod_entry_lookup_key(executable, name));
  // Another pair of the same key was added after it (a collision): looked
  // for from there.
  for (uint32_t i = first ? (uint32_t)first - 1 : lookups->count;
       i < lookups->count; ++i) {
    const halod_entry_lookup_t *lookup = &lookups->items[i];
    if (lookup->executable == executable && strcmp(lookup->name, name) == 0) {
      return lookup;
    }
  }
  return NULL;
}

// Adds |executable|'s entry |name| (once).
static halo_status_t halod_entry_lookups_add(halod_t *daemon,
                                             halod_entry_lookups_t *lookups,
                                             halod_executable_t *executable,
                                             const char *name) {
  if (halod_entry_lookups_find(lookups, executable, name)) return NULL;
  if (lookups->count == lookups->capacity) {
    uint32_t capacity = lookups->capacity ? 2 * lookups->capacity : 4;
    halod_entry_lookup_t *grown =
        realloc(lookups->items, capacity * sizeof(*grown));
    if (!grown) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    lookups->items = grown;
    lookups->capacity = capacity;
  }
  uint64_t key = halod_entry_lookup_key(executable, name);
  if (!halo_u64_map_get(&lookups->index, key)) {
    HALO_RETURN_IF_ERROR(halo_u64_map_put(
        &lookups->index, key, (void *)(uintptr_t)(lookups->count + 1)));
  }
  halod_entry_lookup_t *lookup = &lookups->items[lookups->count++];
  memset(lookup, 0, sizeof(*lookup));
  halod_executable_retain(daemon, executable);
  lookup->executable = executable;
  lookup->name = name;
  return NULL;
}

static void halod_entry_lookups_release(halod_t *daemon,
                                        halod_entry_lookups_t *lookups) {
  for (uint32_t i = 0; i < lookups->count; ++i) {
    halod_executable_release(daemon, lookups->items[i].executable);
    halo_status_free(lookups->items[i].status);
  }
  free(lookups->items);
  halo_u64_map_deinitialize(&lookups->index);
  memset(lookups, 0, sizeof(*lookups));
}

// Whether |executable|'s entry |name| is known without a control call: an
// executable of a device in halod looks it up itself, a worker's proxy
// keeps those it found (hal/remote/remote_device.h).
static bool halod_entry_known(const halod_executable_t *executable,
                              const char *name) {
  halo_hal_entry_info_t info;
  return !halo_hal_remote_executable_is(executable->hal) ||
         halo_hal_remote_executable_known_entry(executable->hal, name, &info);
}

// The entry |name| of |executable|: without a control call (its proxy knew
// it, or it is an executable of a device in halod), or from the lookups
// made for this recording before its validation. Never waits for a worker.
static halo_status_t halod_recorder_entry(halod_recorder_t *recorder,
                                          halod_executable_t *executable,
                                          const char *name,
                                          halo_hal_entry_info_t *out_info) {
  if (!halo_hal_remote_executable_is(executable->hal)) {
    return halo_hal_executable_lookup_entry(executable->hal, name, out_info);
  }
  if (halo_hal_remote_executable_known_entry(executable->hal, name, out_info)) {
    return NULL;
  }
  const halod_entry_lookup_t *lookup =
      halod_entry_lookups_find(recorder->lookups, executable, name);
  if (lookup) {
    *out_info = lookup->info;
    return lookup->status
               ? halo_status_make(halo_status_code(lookup->status), "%s",
                                  halo_status_message(lookup->status))
               : NULL;
  }
  return halo_status_make(HALO_STATUS_INTERNAL,
                          "entry '%s' of executable %.16s was not looked up",
                          name, executable->hash_text);
}

static halo_status_t halod_recorder_dispatch(halod_recorder_t *recorder,
                                             const Halo__Wire__Command *wire,
                                             halo_hal_command_t *command) {
  void *object;
  halo_status_t status =
      halod_handle_table_lookup(&recorder->session->handles, wire->executable,
                                HALOD_OBJECT_EXECUTABLE, &object);
  if (status) return halod_recorder_annotate(recorder, status);
  halod_executable_t *executable = object;
  if (executable->device != recorder->device) {
    return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                "executable %.16s is loaded on device %u, "
                                "the command buffer is for device %u",
                                executable->hash_text, executable->device,
                                recorder->device);
  }
  if (!wire->entry || !*wire->entry) {
    return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                "no entry point named");
  }
  halo_hal_entry_info_t info;
  status = halod_recorder_entry(recorder, executable, wire->entry, &info);
  if (status) return halod_recorder_annotate(recorder, status);
  HALO_RETURN_IF_ERROR(halod_recorder_keep_executable(recorder, executable));
  halo_hasher_update(&recorder->hasher, executable->hash.bytes,
                     HALO_HASH_BYTES);
  halo_hasher_update_bytes(&recorder->hasher, wire->entry, strlen(wire->entry));
  command->executable = executable->hal;
  command->entry_ordinal = info.ordinal;

  if (wire->n_grid != 3 || wire->n_block != 3) {
    return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                "grid and block need 3 values each (got %zu "
                                "and %zu)",
                                wire->n_grid, wire->n_block);
  }
  // A zero grid dimension is allowed (the dispatch is a no-op); a workgroup
  // of no threads is not.
  for (int i = 0; i < 3; ++i) {
    if (wire->block[i] == 0) {
      return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                  "block %ux%ux%u: every dimension must be "
                                  "at least 1",
                                  wire->block[0], wire->block[1],
                                  wire->block[2]);
    }
    command->grid[i] = wire->grid[i];
    command->block[i] = wire->block[i];
    halo_hasher_update_u64(&recorder->hasher, wire->grid[i]);
    halo_hasher_update_u64(&recorder->hasher, wire->block[i]);
  }
  if (wire->shared_memory_bytes > HALOD_MAX_SHARED_MEMORY_BYTES) {
    return halod_recorder_error(recorder, HALO_STATUS_OUT_OF_RANGE,
                                "%u bytes of shared memory (at most %u)",
                                wire->shared_memory_bytes,
                                HALOD_MAX_SHARED_MEMORY_BYTES);
  }
  command->shared_memory_bytes = wire->shared_memory_bytes;
  halo_hasher_update_u64(&recorder->hasher, wire->shared_memory_bytes);

  if (wire->n_args > HALOD_MAX_DISPATCH_ARGS) {
    return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                "%zu arguments (at most %d)", wire->n_args,
                                HALOD_MAX_DISPATCH_ARGS);
  }
  if (info.param_count != HALO_HAL_PARAMS_UNKNOWN &&
      info.param_count != wire->n_args) {
    return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                "entry '%s' takes %u parameters, %zu "
                                "arguments given",
                                wire->entry, info.param_count, wire->n_args);
  }
  halo_hal_recording_t *recording = &recorder->recording;
  if (recording->arg_count + wire->n_args > recorder->arg_capacity) {
    uint32_t capacity = recorder->arg_capacity ? recorder->arg_capacity : 16;
    while (capacity < recording->arg_count + wire->n_args) capacity *= 2;
    halo_hal_dispatch_arg_t *grown =
        realloc(recording->args, capacity * sizeof(*grown));
    if (!grown) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    recording->args = grown;
    recorder->arg_capacity = capacity;
  }
  command->arg_first = recording->arg_count;
  command->arg_count = (uint32_t)wire->n_args;
  halo_hasher_update_u64(&recorder->hasher, wire->n_args);
  for (size_t i = 0; i < wire->n_args; ++i) {
    const Halo__Wire__DispatchArg *arg_wire = wire->args[i];
    halo_hal_dispatch_arg_t *arg = &recording->args[recording->arg_count++];
    memset(arg, 0, sizeof(*arg));
    arg->kind = (uint32_t)arg_wire->kind;
    halo_hasher_update_u64(&recorder->hasher, arg->kind);
    uint64_t size = 8;  // a device address
    char role[32];
    snprintf(role, sizeof(role), "argument %zu", i);
    switch (arg_wire->kind) {
      case HALO__WIRE__DISPATCH_ARG_KIND__DISPATCH_ARG_BUFFER:
        HALO_RETURN_IF_ERROR(halod_recorder_resolve_ref(
            recorder, arg_wire->ref, role, HALOD_REF_ADDRESS,
            recorder->dispatch_alignment, &arg->ref));
        break;
      case HALO__WIRE__DISPATCH_ARG_KIND__DISPATCH_ARG_CONSTANT:
        if (!arg_wire->has_constant || arg_wire->constant.len == 0 ||
            arg_wire->constant.len > HALOD_MAX_CONSTANT_BYTES) {
          return halod_recorder_error(
              recorder, HALO_STATUS_INVALID_ARGUMENT,
              "argument %zu: a constant of %zu bytes (1..%d)", i,
              arg_wire->has_constant ? arg_wire->constant.len : 0,
              HALOD_MAX_CONSTANT_BYTES);
        }
        size = arg_wire->constant.len;
        arg->data_size = (uint32_t)size;
        HALO_RETURN_IF_ERROR(halod_recorder_append_data(
            recorder, arg_wire->constant.data, arg_wire->constant.len,
            &arg->data_offset));
        break;
      case HALO__WIRE__DISPATCH_ARG_KIND__DISPATCH_ARG_BINDING_TABLE:
        if (recording->binding_capacity == 0) {
          return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                      "argument %zu: BINDING_TABLE with a "
                                      "binding capacity of 0",
                                      i);
        }
        recorder->binding_table_passed = true;
        break;
      default:
        return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                    "argument %zu: unknown kind %d", i,
                                    (int)arg_wire->kind);
    }
    if (info.param_count != HALO_HAL_PARAMS_UNKNOWN &&
        info.param_sizes[i] != size) {
      return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                  "argument %zu: %llu bytes, but parameter "
                                  "%zu of '%s' has %u",
                                  i, (unsigned long long)size, i, wire->entry,
                                  info.param_sizes[i]);
    }
  }
  if (wire->type == HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH_INDIRECT) {
    if (!wire->workgroup_count || wire->workgroup_count->length != 12) {
      return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                  "workgroup_count must reference exactly 12 "
                                  "bytes (three uint32)");
    }
    HALO_RETURN_IF_ERROR(halod_recorder_resolve_ref(
        recorder, wire->workgroup_count, "workgroup_count", HALOD_REF_BYTES, 4,
        &command->workgroup_count));
  }
  return NULL;
}

// A direct dispatch with a zero grid dimension does nothing. The daemon
// drops it after validation, so drivers never see an empty grid (a CUDA
// kernel node with one is an error) and the HAL can stay strict.
static bool halod_command_is_noop(const halo_hal_command_t *command) {
  return command->type == HALO_HAL_COMMAND_DISPATCH &&
         (command->grid[0] == 0 || command->grid[1] == 0 ||
          command->grid[2] == 0);
}

static halo_status_t halod_recorder_command(halod_recorder_t *recorder,
                                            const Halo__Wire__Command *wire,
                                            halo_hal_command_t *command) {
  memset(command, 0, sizeof(*command));
  command->type = (uint32_t)wire->type;
  halo_hasher_update_u64(&recorder->hasher, command->type);
  switch (wire->type) {
    case HALO__WIRE__COMMAND_TYPE__COMMAND_FILL: {
      size_t pattern = wire->has_data ? wire->data.len : 0;
      if (pattern != 1 && pattern != 2 && pattern != 4) {
        return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                    "pattern of %zu bytes (1, 2 or 4)",
                                    pattern);
      }
      HALO_RETURN_IF_ERROR(halod_recorder_resolve_ref(
          recorder, wire->target, "target", HALOD_REF_BYTES, (uint32_t)pattern,
          &command->target));
      if (command->target.length % pattern != 0) {
        return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                    "target length %llu is not a multiple "
                                    "of the %zu-byte pattern",
                                    (unsigned long long)command->target.length,
                                    pattern);
      }
      command->data_size = (uint32_t)pattern;
      return halod_recorder_append_data(recorder, wire->data.data, pattern,
                                        &command->data_offset);
    }
    case HALO__WIRE__COMMAND_TYPE__COMMAND_COPY: {
      HALO_RETURN_IF_ERROR(halod_recorder_resolve_ref(recorder, wire->source,
                                                      "source", HALOD_REF_BYTES,
                                                      1, &command->source));
      HALO_RETURN_IF_ERROR(halod_recorder_resolve_ref(recorder, wire->target,
                                                      "target", HALOD_REF_BYTES,
                                                      1, &command->target));
      if (command->source.length != command->target.length) {
        return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                    "source has %llu bytes, target %llu",
                                    (unsigned long long)command->source.length,
                                    (unsigned long long)command->target.length);
      }
      return NULL;
    }
    case HALO__WIRE__COMMAND_TYPE__COMMAND_UPDATE: {
      size_t size = wire->has_data ? wire->data.len : 0;
      if (size == 0 || size > HALOD_MAX_UPDATE_BYTES) {
        return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                    "%zu inline bytes (1..%d)", size,
                                    HALOD_MAX_UPDATE_BYTES);
      }
      HALO_RETURN_IF_ERROR(halod_recorder_resolve_ref(recorder, wire->target,
                                                      "target", HALOD_REF_BYTES,
                                                      1, &command->target));
      if (command->target.length != size) {
        return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                    "%zu inline bytes for a target of %llu",
                                    size,
                                    (unsigned long long)command->target.length);
      }
      command->data_size = (uint32_t)size;
      return halod_recorder_append_data(recorder, wire->data.data, size,
                                        &command->data_offset);
    }
    case HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH:
    case HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH_INDIRECT:
      return halod_recorder_dispatch(recorder, wire, command);
    case HALO__WIRE__COMMAND_TYPE__COMMAND_BARRIER:
      return NULL;
    default:
      return halod_recorder_error(recorder, HALO_STATUS_INVALID_ARGUMENT,
                                  "unknown command type %d", (int)wire->type);
  }
}

static void halod_recorder_release(halod_recorder_t *recorder) {
  for (uint32_t i = 0; i < recorder->executable_count; ++i) {
    halod_executable_release(recorder->daemon, recorder->executables[i]);
  }
  for (uint32_t i = 0; i < recorder->buffer_count; ++i) {
    halod_buffer_release(recorder->daemon, recorder->buffers[i]);
  }
  free(recorder->executables);
  free(recorder->buffers);
  halo_u64_map_deinitialize(&recorder->kept);
  free(recorder->slots);
  halo_hal_recording_deinitialize(&recorder->recording);
}

// |entry|'s executables are held by a recording kept in the memo cache's
// list (|kept|), or no longer (executable-cache-bytes counts those that
// only kept recordings hold).
static void halod_memo_entry_keep_executables(halod_t *daemon,
                                              halod_memo_entry_t *entry,
                                              bool kept) {
  for (uint32_t i = 0; i < entry->executable_count; ++i) {
    halod_executable_kept(daemon, entry->executables[i], kept);
  }
}

// The bytes of |entry|'s executables that no session would hold once it is
// kept (it holds each once).
static uint64_t halod_memo_entry_own_executable_bytes(
    const halod_memo_entry_t *entry) {
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < entry->executable_count; ++i) {
    const halod_executable_t *executable = entry->executables[i];
    if (executable->refcount == executable->kept_holders + 1) {
      bytes += executable->bytes;
    }
  }
  return bytes;
}

static void halod_memo_entry_destroy(halod_t *daemon,
                                     halod_memo_entry_t *entry) {
  if (entry->in_cache) {
    halo_u64_map_remove(&daemon->cache.memo, halo_hash_key(&entry->key));
  }
  halo_hal_command_buffer_destroy(entry->hal);
  for (uint32_t i = 0; i < entry->executable_count; ++i) {
    halod_executable_release(daemon, entry->executables[i]);
  }
  for (uint32_t i = 0; i < entry->buffer_count; ++i) {
    halod_buffer_release(daemon, entry->buffers[i]);
  }
  free(entry->executables);
  free(entry->buffers);
  free(entry->slots);
  free(entry);
}

// ------------------------------------------------- session-recording-bytes

// What halod keeps for a recording of |command_capacity| commands besides
// its arrays of arguments and inline bytes: the commands' array as
// allocated (no-op dispatches included), the slots' requirements, the
// objects it holds, its memo entry and one command buffer.
static uint64_t halod_recording_bytes_in_halod(uint64_t command_capacity,
                                               uint64_t binding_capacity) {
  return command_capacity * sizeof(halo_hal_command_t) +
         (binding_capacity + 1) * sizeof(halod_slot_requirement_t) +
         sizeof(halod_memo_entry_t) + sizeof(halod_command_buffer_t);
}

// The bytes the recording of |recorder| costs once prepared: halod's arrays
// as allocated, and where its device is a worker's the worker's copy of the
// recording (commands, arguments and inline bytes, exactly as many as it
// has: halo_remote_on_prepare). What a driver builds from it (a CUDA graph)
// is not counted.
static uint64_t halod_recorder_bytes(const halod_recorder_t *recorder) {
  const halo_hal_recording_t *recording = &recorder->recording;
  uint64_t bytes =
      halod_recording_bytes_in_halod(recorder->command_capacity,
                                     recording->binding_capacity) +
      (uint64_t)recorder->arg_capacity * sizeof(halo_hal_dispatch_arg_t) +
      recorder->data_capacity +
      ((uint64_t)recorder->executable_capacity + recorder->buffer_capacity) *
          sizeof(void *);
  if (halo_hal_remote_device_is(recorder->hal_device)) {
    bytes += (uint64_t)recording->command_count * sizeof(halo_hal_command_t) +
             (uint64_t)recording->arg_count * sizeof(halo_hal_dispatch_arg_t) +
             recording->data_size;
  }
  return bytes;
}

// RESOURCE_EXHAUSTED naming session-recording-bytes if |bytes| (|least|: at
// least that many) more would pass the session's quota.
static halo_status_t halod_command_buffer_check_quota(halod_t *daemon,
                                                      halod_session_t *session,
                                                      uint64_t bytes,
                                                      size_t commands,
                                                      bool least) {
  uint64_t used = session->recording_bytes;
  uint64_t quota = daemon->config.session_recording_bytes;
  if (bytes <= quota && used <= quota - bytes) return NULL;
  return halo_status_make(
      HALO_STATUS_RESOURCE_EXHAUSTED,
      "command buffer of %s%llu bytes (%zu command%s) exceeds the session's "
      "quota session-recording-bytes (%llu of %llu bytes in use by its %u "
      "command buffers; release some first)",
      least ? "at least " : "", (unsigned long long)bytes, commands,
      commands == 1 ? "" : "s", (unsigned long long)used,
      (unsigned long long)quota, session->command_buffers);
}

// A command buffer's creation while a control call to its worker runs
// (daemon/device_call.h): first the lookups of entries its executables did
// not know, then (an identical recording was not prepared) the recording's
// preparation.
typedef struct halod_command_buffer_call_t {
  halod_device_call_t call;
  Halo__Wire__Request *wire;  // owned: the request being served
  halod_entry_lookups_t lookups;
  // The preparation: the validated recording, its key, mode and the bytes
  // charged to the session already.
  bool preparing;
  halod_recorder_t recorder;
  halo_hash_t key;
  uint32_t mode;
  uint64_t bytes;
  halo_hal_command_buffer_t *hal;
  halo_status_t status;
  // The session has no default queue on the device yet: the call creates
  // it too (executions of queue 0 then need no control call on the loop).
  bool default_queue;
  halo_hal_queue_t *queue_hal;
  halo_status_t queue_status;  // why the call made no queue
  // A memo hit waiting for that queue: answered with it (held).
  halod_command_buffer_t *shared;
} halod_command_buffer_call_t;

static void halod_command_buffer_reply_status(halod_server_context_t *context,
                                              halo_status_t status) {
  if (context) {
    halod_reply_status(context, status);
  } else {
    halo_status_free(status);
  }
}

static void halod_command_buffer_call_free(
    halod_t *daemon, halod_command_buffer_call_t *create) {
  if (create->preparing) halod_recorder_release(&create->recorder);
  if (create->queue_hal) halo_hal_queue_destroy(create->queue_hal);
  halo_status_free(create->queue_status);
  if (create->shared) halod_command_buffer_release(daemon, create->shared);
  halod_entry_lookups_release(daemon, &create->lookups);
  halo_status_free(create->status);
  halo__wire__request__free_unpacked(create->wire, NULL);
  free(create);
}

// Validates the recording of |request| into |recorder|: its key, mode and
// the bytes it costs once prepared in |out_key|, |out_mode|, |out_bytes|.
// On error the recorder is released.
static halo_status_t halod_command_buffer_validate(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__CommandBufferCreate *request,
    const halod_entry_lookups_t *lookups, halod_recorder_t *recorder,
    halo_hash_t *out_key, uint32_t *out_mode, uint64_t *out_bytes) {
  memset(recorder, 0, sizeof(*recorder));
  if (request->device >= daemon->hal.device_count) {
    return halo_status_make(HALO_STATUS_OUT_OF_RANGE,
                            "device %u does not exist (the daemon has %u)",
                            request->device, daemon->hal.device_count);
  }
  // The flags without UNALIGNED_BINDINGS: how the recording may run.
  uint32_t mode = request->flags & ~HALOD_COMMAND_BUFFER_UNALIGNED_BINDINGS;
  if (mode != HALO_HAL_RECORDING_ONE_SHOT &&
      mode != HALO_HAL_RECORDING_REUSABLE) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "command buffer flags 0x%x: exactly one of "
                            "ONE_SHOT (1) or REUSABLE (2), optionally with "
                            "UNALIGNED_BINDINGS (4)",
                            request->flags);
  }
  if (request->binding_capacity > HALOD_MAX_BINDINGS) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "binding capacity %u (at most %d)",
                            request->binding_capacity, HALOD_MAX_BINDINGS);
  }
  if (request->n_commands > HALOD_MAX_COMMANDS) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%zu commands (at most %d)", request->n_commands,
                            HALOD_MAX_COMMANDS);
  }
  // The commands' array alone may not fit: refused before it is allocated.
  HALO_RETURN_IF_ERROR(halod_command_buffer_check_quota(
      daemon, session,
      halod_recording_bytes_in_halod(request->n_commands + 1,
                                     request->binding_capacity),
      request->n_commands, true));
  recorder->daemon = daemon;
  recorder->session = session;
  recorder->lookups = lookups;
  recorder->device = request->device;
  recorder->hal_device = session->domain->workers[request->device].device;
  recorder->recording.flags = mode;
  recorder->dispatch_alignment =
      request->flags & HALOD_COMMAND_BUFFER_UNALIGNED_BINDINGS
          ? 1
          : HALOD_DISPATCH_ALIGNMENT;
  recorder->recording.binding_capacity = request->binding_capacity;
  recorder->slots =
      calloc(request->binding_capacity + 1, sizeof(*recorder->slots));
  recorder->command_capacity = (uint32_t)request->n_commands + 1;
  recorder->recording.commands =
      calloc(recorder->command_capacity, sizeof(*recorder->recording.commands));
  if (!recorder->slots || !recorder->recording.commands) {
    halod_recorder_release(recorder);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  halo_hasher_initialize(&recorder->hasher);
  halo_hasher_update_u64(&recorder->hasher, request->device);
  // Recordings are shared within a trust domain (each has its own device).
  halo_hasher_update_u64(&recorder->hasher,
                         (uint64_t)(uintptr_t)recorder->hal_device);
  halo_hasher_update_u64(&recorder->hasher, request->flags);
  halo_hasher_update_u64(&recorder->hasher, request->binding_capacity);
  halo_hasher_update_u64(&recorder->hasher, request->n_commands);
  halo_status_t status = NULL;
  uint32_t kept = 0;
  for (size_t i = 0; i < request->n_commands && !status; ++i) {
    recorder->index = (uint32_t)i;
    recorder->what = halod_command_name((uint32_t)request->commands[i]->type);
    halo_hal_command_t *command = &recorder->recording.commands[kept];
    status = halod_recorder_command(recorder, request->commands[i], command);
    if (!status && halod_command_is_noop(command)) {
      // Validated, hashed and holding its objects and slot requirements
      // like any other, but left out of what the device prepares. Its
      // arguments were the last appended; drivers lay out every argument of
      // a recording, so they go too. Its constants' bytes stay (unused):
      // they count toward the inline limit, as in libhalo.
      recorder->recording.arg_count = command->arg_first;
      continue;
    }
    ++kept;
  }
  recorder->recording.command_count = kept;
  for (uint32_t i = 0; i < request->binding_capacity; ++i) {
    halod_slot_requirement_t *slot = &recorder->slots[i];
    // A kernel given the whole table may pass any slot's address on.
    if (recorder->binding_table_passed &&
        slot->alignment < recorder->dispatch_alignment) {
      slot->alignment = recorder->dispatch_alignment;
    }
    if (slot->alignment == 0) slot->alignment = 1;
  }
  if (status) {
    halod_recorder_release(recorder);
    return status;
  }
  halo_hasher_finalize(&recorder->hasher, out_key);
  *out_mode = mode;
  *out_bytes = halod_recorder_bytes(recorder);
  return NULL;
}

// Answers |context| (NULL: answered already) with a handle of |session| on
// |command_buffer|, whose bytes were charged to the session (a failed
// handle releases it, and them).
static void halod_command_buffer_answer(halod_t *daemon,
                                        halod_session_t *session,
                                        halod_command_buffer_t *command_buffer,
                                        halod_server_context_t *context) {
  uint64_t handle = 0;
  halod_memo_entry_t *entry = command_buffer->entry;
  bool hit = command_buffer->memo_hit;
  halo_status_t status = halod_session_add_object(
      daemon, session, HALOD_OBJECT_COMMAND_BUFFER, command_buffer, &handle);
  if (status) {
    halod_command_buffer_reply_status(context, status);
    return;
  }
  for (uint32_t i = 0; i < entry->buffer_count; ++i) {
    halod_session_hold_import(session, entry->buffers[i]);
  }
  command_buffer->holds_imports = true;
  if (!context) return;
  Halo__Wire__CommandBufferReply reply = HALO__WIRE__COMMAND_BUFFER_REPLY__INIT;
  reply.handle = handle;
  reply.memo_hit = hit;
  reply.memo_key = entry->key_text;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_COMMAND_BUFFER;
  response.command_buffer = &reply;
  halod_reply(context, &response);
}

// A new command buffer of |session| (NULL on oom).
static halod_command_buffer_t *halod_command_buffer_new(
    halod_t *daemon, halod_session_t *session) {
  halod_command_buffer_t *command_buffer = calloc(1, sizeof(*command_buffer));
  if (!command_buffer) return NULL;
  command_buffer->refcount = 1;
  command_buffer->id = halod_next_id(daemon);
  command_buffer->owner_session = session->id;
  return command_buffer;
}

static void halod_command_buffer_record(halod_t *daemon,
                                        halod_session_t *session,
                                        halod_command_buffer_call_t *create,
                                        halod_server_context_t *context);

// A call thread: the entries the recording names that its executables'
// proxies did not know.
static void halod_command_buffer_lookups_work(halod_device_call_t *call) {
  halod_command_buffer_call_t *create = (halod_command_buffer_call_t *)call;
  for (uint32_t i = 0; i < create->lookups.count; ++i) {
    halod_entry_lookup_t *lookup = &create->lookups.items[i];
    lookup->status = halo_hal_executable_lookup_entry(
        lookup->executable->hal, lookup->name, &lookup->info);
  }
}

// The loop, after one of a recording's calls: takes the request's context
// back from |create|, to go on with. NULL where the session ended or was
// lost meanwhile (or halod's stop answered the request): the request is
// answered and |create| freed.
static halod_server_context_t *halod_command_buffer_call_resume(
    halod_t *daemon, halod_command_buffer_call_t *create,
    halod_session_t *session) {
  halod_device_call_t *call = &create->call;
  halod_server_context_t *context = call->context;
  call->context = NULL;
  halo_status_t status = halod_device_call_session_gone(call, session);
  if (status || !context) {
    halod_command_buffer_reply_status(context, status);
    halod_command_buffer_call_free(daemon, create);
    return NULL;
  }
  return context;
}

static void halod_command_buffer_lookups_done(halod_t *daemon,
                                              halod_device_call_t *call,
                                              halod_session_t *session) {
  halod_command_buffer_call_t *create = (halod_command_buffer_call_t *)call;
  // Answered from here on by the recording's validation (or its
  // preparation's call).
  halod_server_context_t *context =
      halod_command_buffer_call_resume(daemon, create, session);
  if (context) halod_command_buffer_record(daemon, session, create, context);
}

// A call thread: the device prepares the recording.
static void halod_command_buffer_prepare_work(halod_device_call_t *call) {
  halod_command_buffer_call_t *create = (halod_command_buffer_call_t *)call;
  halo_hal_device_t *device = call->device;
  create->status = device->vtable->prepare_command_buffer(
      device, &create->recorder.recording, &create->hal);
  if (!create->status && create->default_queue) {
    // Without it, the session's executions of queue 0 on the device fail
    // until its next command buffer makes it (halod_submission_queue):
    // not this request's failure.
    create->queue_status =
        device->vtable->create_queue(device, 0, &create->queue_hal);
  }
}

// The session's default queue on the device, where the call created one
// and the session is still there without one.
static void halod_command_buffer_adopt_queue(
    halod_t *daemon, halod_session_t *session,
    halod_command_buffer_call_t *create, halo_hal_device_t *device) {
  halo_hal_queue_t *hal = create->queue_hal;
  create->queue_hal = NULL;
  uint32_t index = create->recorder.device;
  if (create->queue_status) {
    if (session) {
      HALO_LOG_WARN("session %llu: making its default queue on device %u: %s",
                    (unsigned long long)session->id, index,
                    halo_status_message(create->queue_status));
    }
    halo_status_free(create->queue_status);
    create->queue_status = NULL;
  }
  if (!hal) return;
  if (!session || session->lost_reason || session->default_queues[index]) {
    halo_hal_queue_destroy(hal);
    return;
  }
  halo_status_free(halod_queue_adopt(daemon, session, index, 0, device, hal,
                                     &session->default_queues[index]));
}

// A call thread: only the session's default queue (a memo hit).
static void halod_command_buffer_queue_work(halod_device_call_t *call) {
  halod_command_buffer_call_t *create = (halod_command_buffer_call_t *)call;
  create->queue_status =
      call->device->vtable->create_queue(call->device, 0, &create->queue_hal);
}

static void halod_command_buffer_answer(halod_t *daemon,
                                        halod_session_t *session,
                                        halod_command_buffer_t *command_buffer,
                                        halod_server_context_t *context);

static void halod_command_buffer_queue_done(halod_t *daemon,
                                            halod_device_call_t *call,
                                            halod_session_t *session) {
  halod_command_buffer_call_t *create = (halod_command_buffer_call_t *)call;
  halod_server_context_t *context = call->context;
  call->context = NULL;
  halod_command_buffer_adopt_queue(daemon, session, create, call->device);
  halo_status_t status = halod_device_call_session_gone(call, session);
  if (status) {
    halod_command_buffer_reply_status(context, status);
  } else {
    halod_command_buffer_t *command_buffer = create->shared;
    create->shared = NULL;
    halod_command_buffer_answer(daemon, session, command_buffer, context);
  }
  halod_command_buffer_call_free(daemon, create);
}

static void halod_command_buffer_prepare_done(halod_t *daemon,
                                              halod_device_call_t *call,
                                              halod_session_t *session) {
  halod_command_buffer_call_t *create = (halod_command_buffer_call_t *)call;
  // Prepared (or not): identical recordings waiting behind it find the
  // entry, or prepare theirs.
  uint64_t key = halo_hash_key(&create->key);
  if (halo_u64_map_get(&daemon->cache.preparing, key) == create) {
    halo_u64_map_remove(&daemon->cache.preparing, key);
  }
  halod_server_context_t *context = call->context;
  call->context = NULL;
  halo_status_t status = create->status;
  create->status = NULL;
  if (status) {
    status = halo_status_annotate(status, "preparing the command buffer");
  }
  if (!status) status = halod_device_call_session_gone(call, session);
  halod_command_buffer_t *command_buffer =
      status ? NULL : halod_command_buffer_new(daemon, session);
  halod_memo_entry_t *entry = status ? NULL : calloc(1, sizeof(*entry));
  if (!status && (!command_buffer || !entry)) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  halod_command_buffer_adopt_queue(daemon, status ? NULL : session, create,
                                   call->device);
  if (status) {
    // Nothing of it stays: the prepared recording (if the device made it)
    // and the bytes charged for it go.
    if (create->hal) halo_hal_command_buffer_destroy(create->hal);
    if (session) session->recording_bytes -= create->bytes;
    free(command_buffer);
    free(entry);
    halod_command_buffer_reply_status(context, status);
    halod_command_buffer_call_free(daemon, create);
    return;
  }
  halod_recorder_t *recorder = &create->recorder;
  entry->hal = create->hal;
  entry->key = create->key;
  halo_hash_format(&create->key, entry->key_text);
  entry->device = recorder->device;
  entry->lru.device = recorder->hal_device;
  entry->flags = create->mode;
  entry->sharers = 1;
  // Charged to each session holding it, and against memo-cache-bytes once
  // released.
  entry->lru.bytes = create->bytes;
  const Halo__Wire__CommandBufferCreate *request =
      create->wire->command_buffer_create;
  entry->command_count = (uint32_t)request->n_commands;
  entry->binding_capacity = request->binding_capacity;
  entry->slots = recorder->slots;
  entry->executables = recorder->executables;
  entry->executable_count = recorder->executable_count;
  entry->buffers = recorder->buffers;
  entry->buffer_count = recorder->buffer_count;
  halo_u64_map_deinitialize(&recorder->kept);
  create->preparing = false;  // the entry has what the recorder held
  ++daemon->cache.memo_misses;
  // An identical recording prepared meanwhile (another session's) keeps its
  // place; this one works unshared.
  if (entry->flags == HALO_HAL_RECORDING_REUSABLE &&
      !halo_u64_map_get(&daemon->cache.memo, key)) {
    halo_status_t put = halo_u64_map_put(&daemon->cache.memo, key, entry);
    if (put) {
      halo_status_free(put);  // works, just unshared
    } else {
      entry->in_cache = true;
    }
  }
  command_buffer->entry = entry;
  halod_command_buffer_answer(daemon, session, command_buffer, context);
  halod_command_buffer_call_free(daemon, create);
}

// Validates |create|'s recording (its entries known by now) and answers
// |context| with its command buffer: at once where an identical recording
// was prepared, else once its worker prepared it (a control call, off the
// loop).
static void halod_command_buffer_place(halod_t *daemon,
                                       halod_session_t *session,
                                       halod_command_buffer_call_t *create,
                                       halod_server_context_t *context);

// A call thread: nothing. Queued on the device behind an identical
// recording's preparation, it returns after that one did.
static void halod_command_buffer_wait_work(halod_device_call_t *call) {
  (void)call;
}

static void halod_command_buffer_wait_done(halod_t *daemon,
                                           halod_device_call_t *call,
                                           halod_session_t *session) {
  halod_command_buffer_call_t *create = (halod_command_buffer_call_t *)call;
  halod_server_context_t *context =
      halod_command_buffer_call_resume(daemon, create, session);
  // The identical recording is prepared (shared now) or failed (prepared
  // here instead).
  if (context) halod_command_buffer_place(daemon, session, create, context);
}

// Validates |create|'s recording (its entries known by now) and places it.
static void halod_command_buffer_record(halod_t *daemon,
                                        halod_session_t *session,
                                        halod_command_buffer_call_t *create,
                                        halod_server_context_t *context) {
  const Halo__Wire__CommandBufferCreate *request =
      create->wire->command_buffer_create;
  halo_status_t status = halod_command_buffer_validate(
      daemon, session, request, &create->lookups, &create->recorder,
      &create->key, &create->mode, &create->bytes);
  // The recorder holds the executables it uses now.
  halod_entry_lookups_release(daemon, &create->lookups);
  if (status) {
    halod_command_buffer_reply_status(context, status);
    halod_command_buffer_call_free(daemon, create);
    return;
  }
  create->preparing = true;  // the recorder holds what it validated
  halod_command_buffer_place(daemon, session, create, context);
}

// Answers |context| with the command buffer of |create|'s validated
// recording: at once where an identical one was prepared (shared), after
// an identical one being prepared (shared then), else once its worker
// prepared it (a control call, off the loop).
static void halod_command_buffer_place(halod_t *daemon,
                                       halod_session_t *session,
                                       halod_command_buffer_call_t *create,
                                       halod_server_context_t *context) {
  const Halo__Wire__CommandBufferCreate *request =
      create->wire->command_buffer_create;
  bool reusable = create->mode == HALO_HAL_RECORDING_REUSABLE;
  uint64_t key = halo_hash_key(&create->key);
  halod_memo_entry_t *entry =
      reusable ? halo_u64_map_get(&daemon->cache.memo, key) : NULL;
  if (entry &&
      memcmp(entry->key.bytes, create->key.bytes, HALO_HASH_BYTES) != 0) {
    entry = NULL;
  }
  // A shared recording is charged to each session holding it, as if it
  // were its own: what a session may hold does not depend on whether
  // another recorded the same first, and the recording stays while any
  // holder does.
  uint64_t bytes = entry ? entry->lru.bytes : create->bytes;
  halo_status_t status = halod_command_buffer_check_quota(
      daemon, session, bytes, request->n_commands, false);
  if (status) {
    halod_command_buffer_reply_status(context, status);
    halod_command_buffer_call_free(daemon, create);
    return;
  }
  // The session's first command buffer on a worker's device: its default
  // queue there is made by the same call.
  bool need_queue = halo_hal_remote_device_is(create->recorder.hal_device) &&
                    !session->default_queues[create->recorder.device];
  if (entry) {
    // An identical recording is prepared already (held, or kept after its
    // last release): share it.
    halod_command_buffer_t *command_buffer =
        halod_command_buffer_new(daemon, session);
    if (!command_buffer) {
      halod_command_buffer_reply_status(
          context, halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom"));
      halod_command_buffer_call_free(daemon, create);
      return;
    }
    if (entry->lru.listed) {
      halod_cache_lru_take(&daemon->cache.memo_lru, &entry->lru);
      halod_memo_entry_keep_executables(daemon, entry, false);
    }
    ++entry->sharers;
    ++entry->hits;
    ++daemon->cache.memo_hits;
    command_buffer->entry = entry;
    command_buffer->memo_hit = true;
    session->recording_bytes += entry->lru.bytes;
    if (!need_queue) {
      halod_command_buffer_answer(daemon, session, command_buffer, context);
      halod_command_buffer_call_free(daemon, create);
      return;
    }
    // Answered once the worker made the session's default queue.
    create->shared = command_buffer;
    create->call.device = create->recorder.hal_device;
    create->call.work = halod_command_buffer_queue_work;
    create->call.done = halod_command_buffer_queue_done;
    create->call.what = "a default queue's creation";
    halod_device_call_start(daemon, session, context, &create->call);
    return;
  }
  create->call.device = create->recorder.hal_device;
  halod_command_buffer_call_t *preparing =
      reusable ? halo_u64_map_get(&daemon->cache.preparing, key) : NULL;
  if (preparing && preparing != create &&
      memcmp(preparing->key.bytes, create->key.bytes, HALO_HASH_BYTES) == 0) {
    // An identical recording is being prepared (another session's, at the
    // same moment): this one waits behind it on the device, then shares it.
    create->call.work = halod_command_buffer_wait_work;
    create->call.done = halod_command_buffer_wait_done;
    create->call.what = "a recording waiting for an identical one";
    halod_device_call_start(daemon, session, context, &create->call);
    return;
  }
  if (reusable && !preparing) {
    halo_status_t put = halo_u64_map_put(&daemon->cache.preparing, key, create);
    halo_status_free(put);  // without it, identical ones are not shared
  }
  create->default_queue = need_queue;
  // Prepared by the session's worker, off the loop; its bytes are charged
  // meanwhile (the quota holds against the session's next recordings).
  session->recording_bytes += create->bytes;
  create->call.work = halod_command_buffer_prepare_work;
  create->call.done = halod_command_buffer_prepare_done;
  create->call.what = "a recording's preparation";
  halod_device_call_start(daemon, session, context, &create->call);
}

// The entries |request|'s dispatches name that their executables' proxies
// do not know (a lookup would be a control call), up to the first dispatch
// the validation refuses for its executable.
static halo_status_t halod_command_buffer_find_lookups(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__CommandBufferCreate *request,
    halod_entry_lookups_t *lookups) {
  if (request->device >= daemon->hal.device_count ||
      request->n_commands > HALOD_MAX_COMMANDS ||
      !session->domain->workers[request->device].device) {
    return NULL;  // the validation refuses it
  }
  for (size_t i = 0; i < request->n_commands; ++i) {
    const Halo__Wire__Command *wire = request->commands[i];
    if (wire->type != HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH &&
        wire->type != HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH_INDIRECT) {
      continue;
    }
    void *object = NULL;
    halo_status_t status = halod_handle_table_lookup(
        &session->handles, wire->executable, HALOD_OBJECT_EXECUTABLE, &object);
    halod_executable_t *executable = object;
    if (status || executable->device != request->device || !wire->entry ||
        !*wire->entry) {
      halo_status_free(status);
      break;
    }
    if (halod_entry_known(executable, wire->entry)) continue;
    HALO_RETURN_IF_ERROR(
        halod_entry_lookups_add(daemon, lookups, executable, wire->entry));
  }
  return NULL;
}

void halod_command_buffer_create(halod_t *daemon, halod_session_t *session,
                                 Halo__Wire__Request *wire,
                                 halod_server_context_t *context) {
  halod_command_buffer_call_t *create = calloc(1, sizeof(*create));
  if (!create) {
    halo__wire__request__free_unpacked(wire, NULL);
    halod_reply_status(context,
                       halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom"));
    return;
  }
  create->wire = wire;
  halo_u64_map_initialize(&create->lookups.index);
  const Halo__Wire__CommandBufferCreate *request = wire->command_buffer_create;
  halo_status_t status = halod_command_buffer_find_lookups(
      daemon, session, request, &create->lookups);
  if (status) {
    halod_reply_status(context, status);
    halod_command_buffer_call_free(daemon, create);
    return;
  }
  if (create->lookups.count == 0) {
    halod_command_buffer_record(daemon, session, create, context);
    return;
  }
  // Looked up by the worker, off the loop, before the validation.
  create->call.device = session->domain->workers[request->device].device;
  create->call.work = halod_command_buffer_lookups_work;
  create->call.done = halod_command_buffer_lookups_done;
  create->call.what = "the lookup of a recording's entry points";
  halod_device_call_start(daemon, session, context, &create->call);
}

void halod_command_buffer_retain(halod_command_buffer_t *command_buffer) {
  ++command_buffer->refcount;
}

void halod_command_buffer_release(halod_t *daemon,
                                  halod_command_buffer_t *command_buffer) {
  if (--command_buffer->refcount > 0) return;
  halod_memo_entry_t *entry = command_buffer->entry;
  halod_session_t *owner =
      halo_u64_map_get(&daemon->sessions.by_id, command_buffer->owner_session);
  if (owner) owner->recording_bytes -= entry->lru.bytes;
  if (command_buffer->holds_imports) {
    for (uint32_t i = 0; i < entry->buffer_count; ++i) {
      halod_session_drop_import(daemon, command_buffer->owner_session,
                                entry->buffers[i]);
    }
  }
  if (--entry->sharers == 0) {
    // Kept within memo-cache-entries and memo-cache-bytes; a recording
    // larger than the bytes' bound alone is not kept (0: none is), nor one
    // whose executables no session else holds are past
    // executable-cache-bytes alone (it would evict every other first).
    uint32_t bound = daemon->config.memo_cache_entries;
    uint64_t byte_bound = daemon->config.memo_cache_bytes;
    if (entry->in_cache && entry->buffer_count == 0 &&
        entry->lru.bytes <= byte_bound && byte_bound > 0 &&
        halod_memo_entry_own_executable_bytes(entry) <=
            daemon->config.executable_cache_bytes &&
        halod_cache_keeps(daemon, entry->lru.device, bound)) {
      // Its executables count as kept, then it is listed; the bytes' bound
      // waits until both are done (it may evict this one too, the least
      // recently used first). |entry| is not used after the addition: an
      // eviction there may end an idle domain, this one's, and drop it.
      halod_cache_hold_bound(daemon);
      halod_memo_entry_keep_executables(daemon, entry, true);
      halod_cache_lru_add(daemon, &daemon->cache.memo_lru, &entry->lru, bound,
                          byte_bound);
      halod_cache_release_bound(daemon);
    } else {
      halod_memo_entry_destroy(daemon, entry);
    }
  }
  free(command_buffer);
}

// The memo entry around the cache link |link|.
static halod_memo_entry_t *halod_memo_entry_of(const halod_cache_link_t *link) {
  return (halod_memo_entry_t *)((char *)link -
                                offsetof(halod_memo_entry_t, lru));
}

bool halod_memo_entry_holds_unheld(const halod_cache_link_t *link) {
  const halod_memo_entry_t *entry = halod_memo_entry_of(link);
  for (uint32_t i = 0; i < entry->executable_count; ++i) {
    if (halod_executable_unheld(entry->executables[i])) return true;
  }
  return false;
}

void halod_memo_entry_evict(halod_t *daemon, halod_cache_link_t *link) {
  halod_memo_entry_t *entry = halod_memo_entry_of(link);
  halod_memo_entry_keep_executables(daemon, entry, false);
  halod_memo_entry_destroy(daemon, entry);
}
