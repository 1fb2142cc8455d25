// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Per-session handle tables. A handle is a 64-bit value valid only in the
// session that received it:
//   bits 63..40 session tag, 39..32 object type, 31..20 generation,
//   19..0 index + 1 (so no handle is 0).
// Another session's handle, a stale (released) handle or one of the wrong
// type is an error whose message names the handle; never a crash.
//
// Loop thread only.
#ifndef HALOD_HANDLE_TABLE_H_
#define HALOD_HANDLE_TABLE_H_

#include <stdint.h>

#include "halo/status.h"

typedef enum halod_object_type_e {
  HALOD_OBJECT_BUFFER = 1,
  HALOD_OBJECT_SEMAPHORE = 2,
  HALOD_OBJECT_EXECUTABLE = 3,
  HALOD_OBJECT_COMMAND_BUFFER = 4,
  HALOD_OBJECT_QUEUE = 5,
} halod_object_type_t;

const char *halod_object_type_name(uint32_t type);

typedef struct halod_handle_entry_t {
  void *object;  // NULL when free
  uint32_t generation;
  uint32_t type;
  uint32_t next_free;  // index + 1 of the next free entry, 0 = none
} halod_handle_entry_t;

typedef struct halod_handle_table_t {
  halod_handle_entry_t *entries;
  uint32_t capacity;
  uint32_t live;
  uint32_t limit;  // quota of live handles
  uint32_t free_head;
  uint32_t session_tag;  // low 24 bits of the session id
} halod_handle_table_t;

void halod_handle_table_initialize(halod_handle_table_t *table,
                                   uint64_t session_id, uint32_t limit);
void halod_handle_table_deinitialize(halod_handle_table_t *table);

// RESOURCE_EXHAUSTED past the quota.
halo_status_t halod_handle_table_insert(halod_handle_table_t *table,
                                        uint32_t type, void *object,
                                        uint64_t *out_handle);

// INVALID_ARGUMENT (another session's, wrong type) or NOT_FOUND (stale,
// unknown), naming |handle| and what the caller expected.
halo_status_t halod_handle_table_lookup(const halod_handle_table_t *table,
                                        uint64_t handle, uint32_t type,
                                        void **out_object);

// Looks up and removes.
halo_status_t halod_handle_table_remove(halod_handle_table_t *table,
                                        uint64_t handle, uint32_t type,
                                        void **out_object);

#endif  // HALOD_HANDLE_TABLE_H_
