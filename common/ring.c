// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The submission ring's record checksum (common/ring.h), shared by libhalo
// (which seals) and halod and its device workers (which verify) so that
// they cannot disagree, and the daemon side's verdict on a record.
#include "common/ring.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "common/status.h"

_Static_assert(HALO_RING_KEY_BYTES == crypto_shorthash_KEYBYTES,
               "the ring key is a crypto_shorthash key");
_Static_assert(crypto_shorthash_BYTES == sizeof(uint64_t),
               "crypto_shorthash is 64 bits");

halo_status_t halo_ring_library_initialize(void) {
  if (sodium_init() < 0) {
    return halo_status_make(HALO_STATUS_INTERNAL, "libsodium failed to start");
  }
  return NULL;
}

void halo_ring_key_generate(uint8_t out_key[HALO_RING_KEY_BYTES]) {
  crypto_shorthash_keygen(out_key);
}

void halo_ring_report_error(halo_ring_header_t *header, uint64_t sequence,
                            halo_status_t status) {
  atomic_store_explicit(&header->error_code, (int32_t)halo_status_code(status),
                        memory_order_relaxed);
  snprintf(header->error_message, sizeof(header->error_message), "%s",
           halo_status_message(status));
  atomic_store_explicit(&header->error_sequence, sequence + 1,
                        memory_order_release);
}

bool halo_ring_capacity_valid(uint64_t capacity) {
  return capacity >= HALO_RING_MIN_CAPACITY &&
         capacity <= HALO_RING_MAX_CAPACITY && (capacity & (capacity - 1)) == 0;
}

uint64_t halo_ring_record_checksum(const uint8_t key[HALO_RING_KEY_BYTES],
                                   void *record) {
  halo_ring_record_header_t header;
  memcpy(&header, record, sizeof(header));
  size_t length = header.type == HALO_RING_RECORD_PAD ? sizeof(header)
                                                      : (size_t)header.length;
  if (length < sizeof(header)) length = sizeof(header);
  // crypto_shorthash takes one contiguous message: the checksum field is
  // zeroed in place for the hash, then put back.
  uint8_t *checksum =
      (uint8_t *)record + offsetof(halo_ring_record_header_t, checksum);
  uint64_t zero = 0;
  memcpy(checksum, &zero, sizeof(zero));
  uint8_t out[crypto_shorthash_BYTES];
  crypto_shorthash(out, record, length, key);
  memcpy(checksum, &header.checksum, sizeof(header.checksum));
  uint64_t value;
  memcpy(&value, out, sizeof(value));
  return value;
}

void halo_ring_record_seal(const uint8_t key[HALO_RING_KEY_BYTES],
                           void *record) {
  uint64_t value = halo_ring_record_checksum(key, record);
  memcpy((uint8_t *)record + offsetof(halo_ring_record_header_t, checksum),
         &value, sizeof(value));
}

bool halo_ring_record_verify(const uint8_t key[HALO_RING_KEY_BYTES],
                             void *record) {
  halo_ring_record_header_t header;
  memcpy(&header, record, sizeof(header));
  return halo_ring_record_checksum(key, record) == header.checksum;
}
