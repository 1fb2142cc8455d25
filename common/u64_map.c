// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/u64_map.h"

#include <stdbool.h>
#include <stdlib.h>

static size_t halo__u64_hash(uint64_t key) {
  // splitmix64 finalizer.
  key ^= key >> 30;
  key *= 0xbf58476d1ce4e5b9ull;
  key ^= key >> 27;
  key *= 0x94d049bb133111ebull;
  key ^= key >> 31;
  return (size_t)key;
}

void halo_u64_map_initialize(halo_u64_map_t *map) {
  map->entries = NULL;
  map->capacity = 0;
  map->count = 0;
}

void halo_u64_map_deinitialize(halo_u64_map_t *map) {
  free(map->entries);
  halo_u64_map_initialize(map);
}

static halo_u64_map_entry_t *halo__u64_map_find(const halo_u64_map_t *map,
                                                uint64_t key) {
  if (map->capacity == 0) return NULL;
  size_t mask = map->capacity - 1;
  for (size_t i = halo__u64_hash(key) & mask;; i = (i + 1) & mask) {
    halo_u64_map_entry_t *entry = &map->entries[i];
    if (entry->key == key) return entry;
    if (entry->key == 0) return NULL;
  }
}

static void halo__u64_map_insert_new(halo_u64_map_t *map, uint64_t key,
                                     void *value) {
  size_t mask = map->capacity - 1;
  size_t i = halo__u64_hash(key) & mask;
  while (map->entries[i].key != 0) i = (i + 1) & mask;
  map->entries[i].key = key;
  map->entries[i].value = value;
  ++map->count;
}

halo_status_t halo_u64_map_put(halo_u64_map_t *map, uint64_t key, void *value) {
  halo_u64_map_entry_t *existing = halo__u64_map_find(map, key);
  if (existing) {
    existing->value = value;
    return NULL;
  }
  if ((map->count + 1) * 4 > map->capacity * 3) {
    size_t capacity = map->capacity ? map->capacity * 2 : 16;
    halo_u64_map_entry_t *entries = calloc(capacity, sizeof(*entries));
    if (!entries) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "map of %zu entries", capacity);
    }
    halo_u64_map_t grown = {entries, capacity, 0};
    for (size_t i = 0; i < map->capacity; ++i) {
      if (map->entries[i].key) {
        halo__u64_map_insert_new(&grown, map->entries[i].key,
                                 map->entries[i].value);
      }
    }
    free(map->entries);
    *map = grown;
  }
  halo__u64_map_insert_new(map, key, value);
  return NULL;
}

void *halo_u64_map_get(const halo_u64_map_t *map, uint64_t key) {
  halo_u64_map_entry_t *entry = halo__u64_map_find(map, key);
  return entry ? entry->value : NULL;
}

void *halo_u64_map_remove(halo_u64_map_t *map, uint64_t key) {
  halo_u64_map_entry_t *entry = halo__u64_map_find(map, key);
  if (!entry) return NULL;
  void *value = entry->value;
  size_t mask = map->capacity - 1;
  size_t hole = (size_t)(entry - map->entries);
  // Backward-shift: move later entries of the probe run into the hole.
  for (size_t i = (hole + 1) & mask; map->entries[i].key; i = (i + 1) & mask) {
    size_t home = halo__u64_hash(map->entries[i].key) & mask;
    // Move if |home| is not cyclically in (hole, i].
    bool in_range =
        (hole <= i) ? (home > hole && home <= i) : (home > hole || home <= i);
    if (!in_range) {
      map->entries[hole] = map->entries[i];
      hole = i;
    }
  }
  map->entries[hole].key = 0;
  map->entries[hole].value = NULL;
  --map->count;
  return value;
}
