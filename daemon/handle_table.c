// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/handle_table.h"

#include <stdlib.h>
#include <string.h>

#define HALOD_HANDLE_INDEX_BITS 20
#define HALOD_HANDLE_GENERATION_BITS 12
#define HALOD_HANDLE_MAX_INDEX ((1u << HALOD_HANDLE_INDEX_BITS) - 1)

const char *halod_object_type_name(uint32_t type) {
  switch (type) {
    case HALOD_OBJECT_BUFFER:
      return "buffer";
    case HALOD_OBJECT_SEMAPHORE:
      return "semaphore";
    case HALOD_OBJECT_EXECUTABLE:
      return "executable";
    case HALOD_OBJECT_COMMAND_BUFFER:
      return "command buffer";
    case HALOD_OBJECT_QUEUE:
      return "queue";
    default:
      return "unknown object";
  }
}

static uint64_t halod_handle_make(const halod_handle_table_t *table,
                                  uint32_t type, uint32_t generation,
                                  uint32_t index) {
  return ((uint64_t)table->session_tag << 40) | ((uint64_t)type << 32) |
         ((uint64_t)(generation & 0xfff) << 20) | (uint64_t)(index + 1);
}

void halod_handle_table_initialize(halod_handle_table_t *table,
                                   uint64_t session_id, uint32_t limit) {
  memset(table, 0, sizeof(*table));
  table->session_tag = (uint32_t)(session_id & 0xffffff);
  table->limit =
      limit < HALOD_HANDLE_MAX_INDEX ? limit : HALOD_HANDLE_MAX_INDEX;
}

void halod_handle_table_deinitialize(halod_handle_table_t *table) {
  free(table->entries);
  memset(table, 0, sizeof(*table));
}

halo_status_t halod_handle_table_insert(halod_handle_table_t *table,
                                        uint32_t type, void *object,
                                        uint64_t *out_handle) {
  *out_handle = 0;
  if (table->live >= table->limit) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "session holds %u handles (its quota; release "
                            "objects first)",
                            table->live);
  }
  uint32_t index;
  if (table->free_head) {
    index = table->free_head - 1;
    table->free_head = table->entries[index].next_free;
  } else {
    if (table->capacity == table->limit) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "handle table full (%u)", table->capacity);
    }
    uint32_t capacity = table->capacity ? table->capacity * 2 : 64;
    if (capacity > table->limit) capacity = table->limit;
    halod_handle_entry_t *entries =
        realloc(table->entries, capacity * sizeof(*entries));
    if (!entries) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "handle table of %u entries", capacity);
    }
    memset(entries + table->capacity, 0,
           (capacity - table->capacity) * sizeof(*entries));
    table->entries = entries;
    // Chain the new entries into the free list, lowest index first.
    for (uint32_t i = capacity; i-- > table->capacity + 1;) {
      entries[i].next_free = table->free_head;
      table->free_head = i + 1;
    }
    index = table->capacity;
    table->capacity = capacity;
  }
  halod_handle_entry_t *entry = &table->entries[index];
  entry->object = object;
  entry->type = type;
  entry->next_free = 0;
  ++table->live;
  *out_handle = halod_handle_make(table, type, entry->generation, index);
  return NULL;
}

static halo_status_t halod_handle_table_find(const halod_handle_table_t *table,
                                             uint64_t handle, uint32_t type,
                                             uint32_t *out_index) {
  *out_index = 0;
  uint32_t tag = (uint32_t)(handle >> 40);
  uint32_t handle_type = (uint32_t)(handle >> 32) & 0xff;
  uint32_t generation = (uint32_t)(handle >> 20) & 0xfff;
  uint32_t index_plus_one = (uint32_t)handle & HALOD_HANDLE_MAX_INDEX;
  if (handle == 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "handle 0 is not a %s handle (missing handle?)",
                            halod_object_type_name(type));
  }
  if (tag != table->session_tag) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "handle 0x%llx does not belong to this session "
                            "(handles are valid only in the session that "
                            "created or imported them)",
                            (unsigned long long)handle);
  }
  if (handle_type != type) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "handle 0x%llx is a %s handle, expected a %s",
                            (unsigned long long)handle,
                            halod_object_type_name(handle_type),
                            halod_object_type_name(type));
  }
  uint32_t index = index_plus_one - 1;
  if (index_plus_one == 0 || index >= table->capacity ||
      !table->entries[index].object ||
      (table->entries[index].generation & 0xfff) != generation ||
      table->entries[index].type != type) {
    return halo_status_make(HALO_STATUS_NOT_FOUND,
                            "%s handle 0x%llx is stale or unknown (released "
                            "already?)",
                            halod_object_type_name(type),
                            (unsigned long long)handle);
  }
  *out_index = index;
  return NULL;
}

halo_status_t halod_handle_table_lookup(const halod_handle_table_t *table,
                                        uint64_t handle, uint32_t type,
                                        void **out_object) {
  *out_object = NULL;
  uint32_t index;
  halo_status_t status = halod_handle_table_find(table, handle, type, &index);
  if (status) return status;
  *out_object = table->entries[index].object;
  return NULL;
}

halo_status_t halod_handle_table_remove(halod_handle_table_t *table,
                                        uint64_t handle, uint32_t type,
                                        void **out_object) {
  *out_object = NULL;
  uint32_t index;
  halo_status_t status = halod_handle_table_find(table, handle, type, &index);
  if (status) return status;
  halod_handle_entry_t *entry = &table->entries[index];
  *out_object = entry->object;
  entry->object = NULL;
  entry->type = 0;
  ++entry->generation;
  entry->next_free = table->free_head;
  table->free_head = index + 1;
  --table->live;
  return NULL;
}
