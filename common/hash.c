// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/hash.h"

#include <sodium.h>
#include <string.h>

#include "common/status.h"

_Static_assert(sizeof(crypto_generichash_state) <= sizeof(halo_hasher_t),
               "hasher state fits");

halo_status_t halo_hash_library_initialize(void) {
  if (sodium_init() < 0) {
    return halo_status_make(HALO_STATUS_INTERNAL, "libsodium failed to start");
  }
  return NULL;
}

void halo_hasher_initialize(halo_hasher_t *hasher) {
  crypto_generichash_init((crypto_generichash_state *)hasher->state, NULL, 0,
                          HALO_HASH_BYTES);
}

void halo_hasher_update(halo_hasher_t *hasher, const void *data, size_t size) {
  crypto_generichash_update((crypto_generichash_state *)hasher->state, data,
                            size);
}

void halo_hasher_update_u64(halo_hasher_t *hasher, uint64_t value) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = (uint8_t)(value >> (8 * i));
  halo_hasher_update(hasher, bytes, sizeof(bytes));
}

void halo_hasher_update_bytes(halo_hasher_t *hasher, const void *data,
                              size_t size) {
  halo_hasher_update_u64(hasher, size);
  if (size) halo_hasher_update(hasher, data, size);
}

void halo_hasher_finalize(halo_hasher_t *hasher, halo_hash_t *out_hash) {
  crypto_generichash_final((crypto_generichash_state *)hasher->state,
                           out_hash->bytes, HALO_HASH_BYTES);
}

void halo_hash_format(const halo_hash_t *hash, char out_text[65]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < HALO_HASH_BYTES; ++i) {
    out_text[2 * i] = digits[hash->bytes[i] >> 4];
    out_text[2 * i + 1] = digits[hash->bytes[i] & 15];
  }
  out_text[64] = '\0';
}

uint64_t halo_hash_key(const halo_hash_t *hash) {
  uint64_t key;
  memcpy(&key, hash->bytes, sizeof(key));
  return key ? key : 1;
}
