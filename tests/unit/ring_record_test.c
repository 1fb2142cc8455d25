// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The submission ring's record checksum (common/ring.c): a sealed record
// verifies, any changed bit does not, a PAD record covers its header alone,
// the key matters, the record is left as it was; ring capacities; and what
// the checksum costs per record (printed).
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/ring.h"

static const uint8_t kKey[HALO_RING_KEY_BYTES] = {
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static int setup(void **state) {
  (void)state;
  halo_status_t status = halo_ring_library_initialize();
  assert_null(status);
  return 0;
}

// An EXECUTE record with |bindings| bindings and |signals| signals, as
// libhalo lays it out; returns its length.
static uint32_t make_execute(uint8_t *record, uint32_t bindings,
                             uint32_t signals, uint64_t sequence) {
  uint32_t length = halo_ring_execute_length(bindings, 0, signals);
  assert_int_not_equal(length, 0);
  memset(record, 0, length);
  halo_ring_record_header_t header = {.type = HALO_RING_RECORD_EXECUTE,
                                      .length = (uint16_t)length,
                                      .sequence = (uint32_t)sequence};
  halo_ring_execute_t execute = {.queue = 0,
                                 .command_buffer = 0x100000007ull,
                                 .binding_count = bindings,
                                 .signal_count = signals,
                                 .flags = HALO_RING_EXECUTE_ASYNC};
  uint8_t *cursor = record;
  memcpy(cursor, &header, sizeof(header));
  cursor += sizeof(header);
  memcpy(cursor, &execute, sizeof(execute));
  cursor += sizeof(execute);
  for (uint32_t i = 0; i < bindings; ++i) {
    halo_ring_binding_t binding = {0x200000000ull + i, 64 * i, UINT64_MAX};
    memcpy(cursor, &binding, sizeof(binding));
    cursor += sizeof(binding);
  }
  for (uint32_t i = 0; i < signals; ++i) {
    halo_ring_semaphore_value_t value = {0x300000000ull + i, 1000 + i};
    memcpy(cursor, &value, sizeof(value));
    cursor += sizeof(value);
  }
  return length;
}

static void test_sealed_record_verifies_and_is_unchanged(void **state) {
  (void)state;
  _Alignas(16) uint8_t record[256];
  uint32_t length = make_execute(record, 1, 1, 41);
  assert_int_equal(length, 96);
  halo_ring_record_seal(kKey, record);
  halo_ring_record_header_t header;
  memcpy(&header, record, sizeof(header));
  assert_int_not_equal(header.checksum, 0);
  uint8_t before[256];
  memcpy(before, record, length);
  assert_true(halo_ring_record_verify(kKey, record));
  assert_int_equal(halo_ring_record_checksum(kKey, record), header.checksum);
  // Computing zeroes the checksum field in place for the hash and puts it
  // back.
  assert_memory_equal(record, before, length);
  // Sealing again gives the same checksum (the field is not hashed).
  halo_ring_record_seal(kKey, record);
  assert_memory_equal(record, before, length);
}

// Every single-bit change anywhere in the record, header included (type,
// length, sequence, the checksum itself), fails verification.
static void test_any_changed_bit_fails(void **state) {
  (void)state;
  _Alignas(16) uint8_t record[256];
  uint32_t length = make_execute(record, 2, 3, 7);
  halo_ring_record_seal(kKey, record);
  for (uint32_t byte = 0; byte < length; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      record[byte] ^= (uint8_t)(1u << bit);
      // A changed length is read from the record: keep what is read within
      // the buffer (the daemon checks the length before its copy).
      halo_ring_record_header_t header;
      memcpy(&header, record, sizeof(header));
      if (header.length <= sizeof(record)) {
        if (halo_ring_record_verify(kKey, record)) {
          fail_msg("flipping bit %d of byte %u went unnoticed", bit, byte);
        }
      }
      record[byte] ^= (uint8_t)(1u << bit);
    }
  }
  assert_true(halo_ring_record_verify(kKey, record));
}

static void test_key_matters(void **state) {
  (void)state;
  _Alignas(16) uint8_t record[256];
  make_execute(record, 1, 1, 0);
  halo_ring_record_seal(kKey, record);
  uint8_t other[HALO_RING_KEY_BYTES];
  memcpy(other, kKey, sizeof(other));
  other[15] ^= 1;
  assert_false(halo_ring_record_verify(other, record));
  // Random keys differ.
  uint8_t a[HALO_RING_KEY_BYTES], b[HALO_RING_KEY_BYTES];
  halo_ring_key_generate(a);
  halo_ring_key_generate(b);
  assert_memory_not_equal(a, b, sizeof(a));
}

// A PAD record's body is the bytes it skips, not content: its checksum
// covers the header alone, which is all libhalo writes of it.
static void test_pad_covers_its_header(void **state) {
  (void)state;
  _Alignas(16) uint8_t record[512];
  memset(record, 0xa5, sizeof(record));
  halo_ring_record_header_t pad = {
      .type = HALO_RING_RECORD_PAD, .length = 512, .sequence = 9};
  memcpy(record, &pad, sizeof(pad));
  halo_ring_record_seal(kKey, record);
  record[300] ^= 0xff;  // stale bytes the PAD skips
  assert_true(halo_ring_record_verify(kKey, record));
  // A record turned into a PAD (or out of one) does not verify.
  record[0] = HALO_RING_RECORD_SIGNAL;
  assert_false(halo_ring_record_verify(kKey, record));
  record[0] = HALO_RING_RECORD_PAD;
  assert_true(halo_ring_record_verify(kKey, record));
  _Alignas(16) uint8_t execute[256];
  make_execute(execute, 1, 1, 9);
  halo_ring_record_seal(kKey, execute);
  execute[0] = HALO_RING_RECORD_PAD;
  assert_false(halo_ring_record_verify(kKey, execute));
}

static void test_capacity_bounds(void **state) {
  (void)state;
  assert_true(halo_ring_capacity_valid(HALO_RING_DEFAULT_CAPACITY));
  assert_true(halo_ring_capacity_valid(HALO_RING_MIN_CAPACITY));
  assert_true(halo_ring_capacity_valid(HALO_RING_MAX_CAPACITY));
  assert_true(halo_ring_capacity_valid(1u << 20));
  assert_false(halo_ring_capacity_valid(HALO_RING_MIN_CAPACITY / 2));
  assert_false(halo_ring_capacity_valid(2ull * HALO_RING_MAX_CAPACITY));
  assert_false(halo_ring_capacity_valid(HALO_RING_MIN_CAPACITY + 16));
  assert_false(halo_ring_capacity_valid(0));
  assert_true(HALO_RING_MIN_CAPACITY >= 2 * HALO_RING_MAX_RECORD_BYTES);
}

static int64_t now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

// Nanoseconds per seal of |record|: the best of 5 rounds of |iterations|
// (the machine may be busy).
static double seal_ns(uint8_t *record, int iterations) {
  double best = 1e18;
  volatile uint64_t sink = 0;
  for (int round = 0; round < 5; ++round) {
    int64_t start = now_ns();
    for (int i = 0; i < iterations; ++i) {
      halo_ring_record_seal(kKey, record);
      sink += record[8];
    }
    double ns = (double)(now_ns() - start) / iterations;
    if (ns < best) best = ns;
  }
  (void)sink;
  return best;
}

// What the checksum adds to a record on each end (libhalo seals, halod
// verifies: the same hash once each).
static void test_checksum_cost(void **state) {
  (void)state;
  static _Alignas(16) uint8_t record[HALO_RING_MAX_RECORD_BYTES];
  uint32_t typical = make_execute(record, 1, 1, 1);
  double typical_ns = seal_ns(record, 200000);
  // The longest EXECUTE record: as many bindings as fit.
  uint32_t bindings =
      (HALO_RING_MAX_RECORD_BYTES - sizeof(halo_ring_record_header_t) -
       sizeof(halo_ring_execute_t) - sizeof(halo_ring_semaphore_value_t)) /
      sizeof(halo_ring_binding_t);
  uint32_t longest = make_execute(record, bindings, 1, 1);
  double longest_ns = seal_ns(record, 2000);
  print_message(
      "ring record checksum (SipHash-2-4): %u-byte EXECUTE (1 binding, 1 "
      "signal) %.1f ns, %u-byte EXECUTE (%u bindings) %.1f ns\n",
      typical, typical_ns, longest, bindings, longest_ns);
  assert_true(typical_ns < 1000.0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sealed_record_verifies_and_is_unchanged),
      cmocka_unit_test(test_any_changed_bit_fails),
      cmocka_unit_test(test_key_matters),
      cmocka_unit_test(test_pad_covers_its_header),
      cmocka_unit_test(test_capacity_bounds),
      cmocka_unit_test(test_checksum_cost),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
