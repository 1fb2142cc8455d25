// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Fuzzes the submission ring's record parser (daemon/ring.c; the layout is
// common/ring.h) and the operations it feeds: each input is the bytes a
// client publishes into its session's ring, which the daemon copies out,
// checks and runs as it would a real client's. The session (an in-process
// halod, tests/fuzz/fuzz_halod.h) holds the kit of tests/fuzz/
// fuzz_frames.h first, so records can name live buffers, semaphores, a
// queue and a command buffer.
//
// Input: a 4-byte header, then records.
//   bytes 0-1: where the records start, in 16-byte units from the ring's
//              start (modulo its capacity): the harness first publishes
//              PAD records up to there, so that inputs reach the ring's end
//              and the PAD before a record that would not fit.
//   bytes 2-3: a signed 16-bit adjustment of the published tail, in bytes
//              (0: the tail is the end of the records).
// The records are copied into the ring from the start position on (wrapping
// at its end). The harness walks them by their length fields as the daemon
// would and fixes two things a fuzzer cannot compute: each record's
// sequence is taken as relative to the first record's (the PAD records
// before it come first), and a record whose checksum field is 0 is sealed
// with the ring's key (any other value stays, and the daemon rejects the
// record as changed). The walk stops at the first impossible length; the
// bytes after it are copied as they are.
//
// The daemon must consume every published record or break the ring,
// without a crash; after the session ends it must hold nothing of it.
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/ring.h"
#include "daemon/ring.h"
#include "daemon/session.h"
#include "tests/fuzz/fuzz_frames.h"
#include "tests/fuzz/fuzz_halod.h"

#define RING_FUZZ_HEADER_BYTES 4u
// Loop turns the daemon may take to consume what was published.
#define RING_FUZZ_MAX_TURNS 100000

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct ring_fuzz_t {
  halod_session_t *session;
  halo_ring_header_t *header;
  uint8_t *records;
  uint64_t map_size;
  uint32_t capacity;
  uint64_t tail;      // published so far
  uint32_t sequence;  // of the next record
} ring_fuzz_t;

static void ring_fuzz_fail(const char *what) __attribute__((noreturn));
static void ring_fuzz_fail(const char *what) {
  fprintf(stderr, "ring harness: %s\n", what);
  abort();
}

// Creates the kit's objects: every one must succeed.
static void ring_fuzz_kit(halod_session_t *session) {
  halo_fuzz_frames_t frames = {0};
  halo_fuzz_frames_kit(&frames);
  size_t offset = 0;
  while (offset + 2 <= frames.size) {
    size_t length =
        (size_t)frames.data[offset] | (size_t)frames.data[offset + 1] << 8;
    offset += 2;
    if (halo_fuzz_request_bytes(session, frames.data + offset, length, NULL) !=
        HALO_STATUS_OK) {
      ring_fuzz_fail("a request of the kit failed");
    }
    offset += length;
  }
  halo_fuzz_frames_free(&frames);
}

// Copies |size| bytes into the ring at byte |position| of the stream
// (wrapping at the ring's end).
static void ring_fuzz_write(ring_fuzz_t *ring, uint64_t position,
                            const uint8_t *bytes, size_t size) {
  while (size > 0) {
    uint32_t offset = (uint32_t)(position % ring->capacity);
    size_t chunk = ring->capacity - offset;
    if (chunk > size) chunk = size;
    memcpy(ring->records + offset, bytes, chunk);
    position += chunk;
    bytes += chunk;
    size -= chunk;
  }
}

// Publishes |tail| and rings the doorbell, then runs the loop until the
// daemon consumed everything or broke the ring; false if it broke it.
static bool ring_fuzz_publish(ring_fuzz_t *ring, uint64_t tail) {
  ring->tail = tail;
  atomic_store_explicit(&ring->header->tail, tail, memory_order_release);
  uint64_t one = 1;
  if (write(halod_ring_doorbell(ring->session), &one, sizeof(one)) !=
      sizeof(one)) {
    ring_fuzz_fail("cannot ring the doorbell");
  }
  for (int turn = 0; turn < RING_FUZZ_MAX_TURNS; ++turn) {
    halo_fuzz_run_nowait();
    if (atomic_load(&ring->header->flags) & HALO_RING_FLAG_BROKEN) {
      return false;
    }
    if (atomic_load_explicit(&ring->header->head, memory_order_acquire) ==
        tail) {
      return true;
    }
  }
  ring_fuzz_fail(
      "the daemon neither consumed the published records nor "
      "broke the ring");
}

// PAD records, sealed, up to byte |start| of the ring.
static bool ring_fuzz_pad_to(ring_fuzz_t *ring, uint64_t start) {
  uint64_t position = 0;
  while (position < start) {
    uint64_t length = start - position;
    if (length > HALO_RING_MAX_RECORD_BYTES)
      length = HALO_RING_MAX_RECORD_BYTES;
    _Alignas(16) uint8_t pad[sizeof(halo_ring_record_header_t)];
    halo_ring_record_header_t header = {.type = HALO_RING_RECORD_PAD,
                                        .length = (uint16_t)length,
                                        .sequence = ring->sequence++};
    memcpy(pad, &header, sizeof(header));
    halo_ring_record_seal(ring->header->checksum_key, pad);
    ring_fuzz_write(ring, position, pad, sizeof(pad));
    position += length;
  }
  return start == 0 || ring_fuzz_publish(ring, start);
}

// The records of the input in private memory, sequences made absolute and
// zero checksums sealed (see the top of the file).
static void ring_fuzz_prepare(ring_fuzz_t *ring, uint8_t *records,
                              size_t size) {
  size_t offset = 0;
  while (offset + sizeof(halo_ring_record_header_t) <= size) {
    halo_ring_record_header_t header;
    memcpy(&header, records + offset, sizeof(header));
    if (header.length < sizeof(header) ||
        header.length % HALO_RING_RECORD_ALIGN ||
        header.length > HALO_RING_MAX_RECORD_BYTES ||
        header.length > size - offset) {
      return;
    }
    header.sequence += ring->sequence;
    memcpy(records + offset, &header, sizeof(header));
    if (header.checksum == 0) {
      halo_ring_record_seal(ring->header->checksum_key, records + offset);
    }
    offset += header.length;
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  halo_fuzz_halod();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < RING_FUZZ_HEADER_BYTES) return 0;
  uint16_t start_units = (uint16_t)(data[0] | data[1] << 8);
  int16_t tail_adjust = (int16_t)(uint16_t)(data[2] | data[3] << 8);
  halod_t *daemon = halo_fuzz_halod();
  ring_fuzz_t ring = {.session = halo_fuzz_session_open()};
  ring_fuzz_kit(ring.session);
  int memfd;
  halo_status_t status =
      halod_ring_create(daemon, ring.session, &memfd, &ring.map_size);
  if (status) ring_fuzz_fail(halo_status_message(status));
  void *pointer =
      mmap(NULL, ring.map_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  close(memfd);
  if (pointer == MAP_FAILED) ring_fuzz_fail("cannot map the ring");
  ring.header = pointer;
  ring.records = (uint8_t *)pointer + HALO_RING_HEADER_BYTES;
  ring.capacity = ring.header->capacity;

  uint64_t start =
      (uint64_t)start_units * HALO_RING_RECORD_ALIGN % ring.capacity;
  size_t record_bytes = size - RING_FUZZ_HEADER_BYTES;
  if (record_bytes > ring.capacity) record_bytes = ring.capacity;
  if (ring_fuzz_pad_to(&ring, start) && record_bytes > 0) {
    uint8_t *records = malloc(record_bytes);
    if (!records) ring_fuzz_fail("oom");
    memcpy(records, data + RING_FUZZ_HEADER_BYTES, record_bytes);
    ring_fuzz_prepare(&ring, records, record_bytes);
    ring_fuzz_write(&ring, start, records, record_bytes);
    free(records);
    uint64_t tail = start + (record_bytes & ~(uint64_t)15);
    tail += (uint64_t)(int64_t)tail_adjust;
    ring_fuzz_publish(&ring, tail);
  }
  halo_fuzz_session_close(ring.session);
  munmap(pointer, ring.map_size);
  return 0;
}
