// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "hal/command_buffer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "halo/halo.h"

void halo_hal_recording_deinitialize(halo_hal_recording_t *recording) {
  free(recording->commands);
  free(recording->args);
  free(recording->data);
  memset(recording, 0, sizeof(*recording));
}

const char *halo_hal_command_type_name(uint32_t type) {
  switch (type) {
    case HALO_HAL_COMMAND_FILL:
      return "fill";
    case HALO_HAL_COMMAND_COPY:
      return "copy";
    case HALO_HAL_COMMAND_UPDATE:
      return "update";
    case HALO_HAL_COMMAND_DISPATCH:
      return "dispatch";
    case HALO_HAL_COMMAND_DISPATCH_INDIRECT:
      return "dispatch_indirect";
    case HALO_HAL_COMMAND_BARRIER:
      return "barrier";
    default:
      return "unknown";
  }
}

static halo_status_t halo_hal_recording_check_ref(
    const halo_hal_recording_t *recording, uint32_t index, const char *role,
    const halo_hal_buffer_ref_t *ref) {
  const char *name =
      halo_hal_command_type_name(recording->commands[index].type);
  if (ref->slot != HALO_HAL_SLOT_DIRECT &&
      ref->slot >= recording->binding_capacity) {
    return halo_status_make(
        HALO_STATUS_INVALID_ARGUMENT,
        "command %u (%s): %s slot %u out of range (binding capacity %u)", index,
        name, role, ref->slot, recording->binding_capacity);
  }
  if (ref->slot == HALO_HAL_SLOT_DIRECT && ref->address == 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "command %u (%s): %s has a null address", index,
                            name, role);
  }
  return NULL;
}

static halo_status_t halo_hal_recording_check_data(
    const halo_hal_recording_t *recording, uint32_t index, const char *role,
    uint32_t offset, uint32_t size) {
  if (offset > recording->data_size || size > recording->data_size - offset) {
    return halo_status_make(
        HALO_STATUS_INVALID_ARGUMENT,
        "command %u (%s): %s bytes [%u, +%u) outside the recording's %u data "
        "bytes",
        index, halo_hal_command_type_name(recording->commands[index].type),
        role, offset, size, recording->data_size);
  }
  return NULL;
}

static halo_status_t halo_hal_recording_check_dispatch(
    const halo_hal_recording_t *recording, uint32_t index) {
  const halo_hal_command_t *command = &recording->commands[index];
  const char *name = halo_hal_command_type_name(command->type);
  if (command->arg_first > recording->arg_count ||
      command->arg_count > recording->arg_count - command->arg_first) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "command %u (%s): arguments [%u, +%u) outside "
                            "the recording's %u",
                            index, name, command->arg_first, command->arg_count,
                            recording->arg_count);
  }
  for (uint32_t i = 0; i < command->arg_count; ++i) {
    const halo_hal_dispatch_arg_t *arg =
        &recording->args[command->arg_first + i];
    char role[32];
    snprintf(role, sizeof(role), "argument %u", i);
    switch (arg->kind) {
      case HALO_HAL_ARG_BUFFER:
        HALO_RETURN_IF_ERROR(
            halo_hal_recording_check_ref(recording, index, role, &arg->ref));
        break;
      case HALO_HAL_ARG_CONSTANT:
        if (arg->data_size == 0 || arg->data_size > HALO_MAX_CONSTANT_BYTES) {
          return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                  "command %u (%s): argument %u is a "
                                  "constant of %u bytes (1 to %u)",
                                  index, name, i, arg->data_size,
                                  (unsigned)HALO_MAX_CONSTANT_BYTES);
        }
        HALO_RETURN_IF_ERROR(halo_hal_recording_check_data(
            recording, index, role, arg->data_offset, arg->data_size));
        break;
      case HALO_HAL_ARG_BINDING_TABLE:
        if (recording->binding_capacity == 0) {
          return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                  "command %u (%s): argument %u is the "
                                  "binding table of a recording without "
                                  "bindings",
                                  index, name, i);
        }
        break;
      default:
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "command %u (%s): argument %u has unknown "
                                "kind %u",
                                index, name, i, arg->kind);
    }
  }
  if (command->type == HALO_HAL_COMMAND_DISPATCH_INDIRECT) {
    HALO_RETURN_IF_ERROR(halo_hal_recording_check_ref(
        recording, index, "workgroup_count", &command->workgroup_count));
    if (command->workgroup_count.length < 12) {
      return halo_status_make(
          HALO_STATUS_INVALID_ARGUMENT,
          "command %u (%s): workgroup_count references %llu bytes, three "
          "uint32 need 12",
          index, name, (unsigned long long)command->workgroup_count.length);
    }
  }
  for (int d = 0; d < 3; ++d) {
    if (command->block[d] == 0 ||
        (command->type == HALO_HAL_COMMAND_DISPATCH && command->grid[d] == 0)) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "command %u (%s): grid %ux%ux%u / block "
                              "%ux%ux%u has a zero dimension",
                              index, name, command->grid[0], command->grid[1],
                              command->grid[2], command->block[0],
                              command->block[1], command->block[2]);
    }
  }
  if (!command->executable) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "command %u (%s): no executable", index, name);
  }
  return NULL;
}

halo_status_t halo_hal_recording_check_command(
    const halo_hal_recording_t *recording, uint32_t index) {
  const halo_hal_command_t *command = &recording->commands[index];
  switch (command->type) {
    case HALO_HAL_COMMAND_FILL:
      if (command->data_size != 1 && command->data_size != 2 &&
          command->data_size != 4) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "command %u (fill): pattern of %u bytes (1, "
                                "2 or 4)",
                                index, command->data_size);
      }
      if (command->target.length % command->data_size != 0) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "command %u (fill): %llu bytes are not a "
                                "multiple of the %u-byte pattern",
                                index,
                                (unsigned long long)command->target.length,
                                command->data_size);
      }
      HALO_RETURN_IF_ERROR(halo_hal_recording_check_data(
          recording, index, "pattern", command->data_offset,
          command->data_size));
      return halo_hal_recording_check_ref(recording, index, "target",
                                          &command->target);
    case HALO_HAL_COMMAND_COPY:
      HALO_RETURN_IF_ERROR(halo_hal_recording_check_ref(
          recording, index, "source", &command->source));
      HALO_RETURN_IF_ERROR(halo_hal_recording_check_ref(
          recording, index, "target", &command->target));
      if (command->source.length != command->target.length) {
        return halo_status_make(
            HALO_STATUS_INVALID_ARGUMENT,
            "command %u (copy): source has %llu bytes, target %llu", index,
            (unsigned long long)command->source.length,
            (unsigned long long)command->target.length);
      }
      return NULL;
    case HALO_HAL_COMMAND_UPDATE:
      HALO_RETURN_IF_ERROR(halo_hal_recording_check_data(
          recording, index, "inline", command->data_offset,
          command->data_size));
      if (command->target.length != command->data_size) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "command %u (update): %u inline bytes for a "
                                "target of %llu",
                                index, command->data_size,
                                (unsigned long long)command->target.length);
      }
      return halo_hal_recording_check_ref(recording, index, "target",
                                          &command->target);
    case HALO_HAL_COMMAND_DISPATCH:
    case HALO_HAL_COMMAND_DISPATCH_INDIRECT:
      return halo_hal_recording_check_dispatch(recording, index);
    case HALO_HAL_COMMAND_BARRIER:
      return NULL;
    default:
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "command %u: unknown type %u", index,
                              command->type);
  }
}
