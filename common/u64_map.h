// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A hash map from nonzero uint64_t keys to pointers (open addressing, linear
// probing, backward-shift deletion). Used for sessions by pipe and by id,
// pages, arenas and export tokens.
//
// Thread-compatible.
#ifndef HALO_COMMON_U64_MAP_H_
#define HALO_COMMON_U64_MAP_H_

#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

typedef struct halo_u64_map_entry_t {
  uint64_t key;  // 0: empty
  void *value;
} halo_u64_map_entry_t;

typedef struct halo_u64_map_t {
  halo_u64_map_entry_t *entries;
  size_t capacity;  // power of two, or 0
  size_t count;
} halo_u64_map_t;

void halo_u64_map_initialize(halo_u64_map_t *map);
void halo_u64_map_deinitialize(halo_u64_map_t *map);

// Inserts or replaces. |key| must not be 0.
halo_status_t halo_u64_map_put(halo_u64_map_t *map, uint64_t key, void *value);
// NULL if absent.
void *halo_u64_map_get(const halo_u64_map_t *map, uint64_t key);
// Returns the removed value (NULL if absent).
void *halo_u64_map_remove(halo_u64_map_t *map, uint64_t key);

// Iteration: for (size_t i = 0; i < map->capacity; ++i) if
// (map->entries[i].key) ...; do not modify the map while iterating.

#endif  // HALO_COMMON_U64_MAP_H_
