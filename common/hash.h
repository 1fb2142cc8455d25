// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Content hashes: BLAKE2b-256 (libsodium). Executables and recordings are
// shared across sessions by hash, so it must resist deliberate collisions.
//
// Thread-compatible (one hasher per thread).
#ifndef HALO_COMMON_HASH_H_
#define HALO_COMMON_HASH_H_

#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

#define HALO_HASH_BYTES 32

typedef struct halo_hash_t {
  uint8_t bytes[HALO_HASH_BYTES];
} halo_hash_t;

typedef struct halo_hasher_t {
  _Alignas(64) uint8_t state[384];  // crypto_generichash_state
} halo_hasher_t;

// Once per process (sodium_init). INTERNAL if libsodium cannot start.
halo_status_t halo_hash_library_initialize(void);

void halo_hasher_initialize(halo_hasher_t *hasher);
void halo_hasher_update(halo_hasher_t *hasher, const void *data, size_t size);
// Framed values: a length prefix keeps ("ab","c") and ("a","bc") apart.
void halo_hasher_update_bytes(halo_hasher_t *hasher, const void *data,
                              size_t size);
void halo_hasher_update_u64(halo_hasher_t *hasher, uint64_t value);
void halo_hasher_finalize(halo_hasher_t *hasher, halo_hash_t *out_hash);

// 64 hex digits and a NUL.
void halo_hash_format(const halo_hash_t *hash, char out_text[65]);
// The first 8 bytes as a map key (never 0).
uint64_t halo_hash_key(const halo_hash_t *hash);

#endif  // HALO_COMMON_HASH_H_
