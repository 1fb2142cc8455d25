// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Command buffers in the HAL: the daemon validates a client's recording into
// a halo_hal_recording_t (driver-independent, addresses resolved, indirect
// references kept as slots) and the device prepares it once into a
// halo_hal_command_buffer_t (local: resolved entry functions; CUDA: graph
// instances). Each execution supplies a binding table of resolved
// addresses.
//
// Thread-safety: a prepared command buffer is immutable and may be executed
// by several queues at once.
#ifndef HALO_HAL_COMMAND_BUFFER_H_
#define HALO_HAL_COMMAND_BUFFER_H_

#include <stdbool.h>
#include <stdint.h>

#include "hal/executable.h"
#include "halo/status.h"

typedef enum halo_hal_command_type_e {
  HALO_HAL_COMMAND_FILL = 1,
  HALO_HAL_COMMAND_COPY = 2,
  HALO_HAL_COMMAND_UPDATE = 3,
  HALO_HAL_COMMAND_DISPATCH = 4,
  HALO_HAL_COMMAND_DISPATCH_INDIRECT = 5,
  HALO_HAL_COMMAND_BARRIER = 6,
} halo_hal_command_type_t;

#define HALO_HAL_SLOT_DIRECT UINT32_MAX

// A resolved buffer reference. Direct: |address| is the device address of
// the referenced bytes. Indirect: binding |slot|; the bytes start at
// bindings[slot].address + |offset|.
typedef struct halo_hal_buffer_ref_t {
  uint32_t slot;
  uint64_t address;
  uint64_t offset;
  uint64_t length;
} halo_hal_buffer_ref_t;

typedef enum halo_hal_arg_kind_e {
  HALO_HAL_ARG_BUFFER = 0,
  HALO_HAL_ARG_CONSTANT = 1,
  HALO_HAL_ARG_BINDING_TABLE = 2,
} halo_hal_arg_kind_t;

typedef struct halo_hal_dispatch_arg_t {
  uint32_t kind;  // halo_hal_arg_kind_t
  halo_hal_buffer_ref_t ref;
  uint32_t data_offset;  // CONSTANT: bytes in recording->data
  uint32_t data_size;
} halo_hal_dispatch_arg_t;

typedef struct halo_hal_command_t {
  uint32_t type;  // halo_hal_command_type_t
  halo_hal_buffer_ref_t target;
  halo_hal_buffer_ref_t source;
  uint32_t data_offset;  // fill pattern, update bytes: in recording->data
  uint32_t data_size;
  halo_hal_executable_t *executable;
  uint32_t entry_ordinal;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_memory_bytes;
  uint32_t arg_first;  // into recording->args
  uint32_t arg_count;
  halo_hal_buffer_ref_t workgroup_count;  // dispatch_indirect
} halo_hal_command_t;

#define HALO_HAL_RECORDING_ONE_SHOT 1u
#define HALO_HAL_RECORDING_REUSABLE 2u

typedef struct halo_hal_recording_t {
  uint32_t flags;
  uint32_t binding_capacity;
  halo_hal_command_t *commands;
  uint32_t command_count;
  halo_hal_dispatch_arg_t *args;
  uint32_t arg_count;
  uint8_t *data;
  uint32_t data_size;
} halo_hal_recording_t;

// Frees the arrays of |recording| (not the executables it points at).
void halo_hal_recording_deinitialize(halo_hal_recording_t *recording);

// "fill", "copy", ..., "unknown".
const char *halo_hal_command_type_name(uint32_t type);

// Checks the driver-independent structure of command |index| of |recording|:
// slots within the binding capacity, direct references not null, inline
// bytes and argument ranges inside the recording, fill patterns of 1, 2 or
// 4 bytes dividing the target, equal copy lengths, update sizes, CONSTANT
// arguments of 1..HALO_MAX_CONSTANT_BYTES, BINDING_TABLE arguments only with
// bindings, indirect workgroup counts of 12 bytes, no zero block (or direct
// grid) dimension and an executable for dispatches. The daemon validated the
// recording already (daemon/command_buffer.c) and left out direct dispatches
// with a zero grid dimension (no-ops); drivers call this at prepare for what
// they rely on. Errors are INVALID_ARGUMENT naming the command index, type
// and argument.
halo_status_t halo_hal_recording_check_command(
    const halo_hal_recording_t *recording, uint32_t index);

// One entry of an execution's binding table. |address| 0: unbound.
typedef struct halo_hal_binding_t {
  uint64_t address;
  uint64_t length;
} halo_hal_binding_t;

typedef struct halo_hal_command_buffer_t halo_hal_command_buffer_t;

typedef struct halo_hal_command_buffer_vtable_t {
  void (*destroy)(halo_hal_command_buffer_t *command_buffer);
} halo_hal_command_buffer_vtable_t;

struct halo_hal_command_buffer_t {
  const halo_hal_command_buffer_vtable_t *vtable;
  // Owned by the command buffer (moved in by prepare).
  halo_hal_recording_t recording;
};

static inline void halo_hal_command_buffer_destroy(
    halo_hal_command_buffer_t *command_buffer) {
  command_buffer->vtable->destroy(command_buffer);
}

// The address a reference resolves to under |bindings| (0 if unbound).
static inline uint64_t halo_hal_buffer_ref_resolve(
    const halo_hal_buffer_ref_t *ref, const halo_hal_binding_t *bindings) {
  if (ref->slot == HALO_HAL_SLOT_DIRECT) return ref->address;
  if (bindings[ref->slot].address == 0) return 0;
  return bindings[ref->slot].address + ref->offset;
}

#endif  // HALO_HAL_COMMAND_BUFFER_H_
