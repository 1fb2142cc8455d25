// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The submission ring (normative layout; docs/architecture.md "Submission
// ring"): one per session, in a memfd the daemon creates, sealed against
// shrinking and growing (HALO_SEALS_FIXED_SIZE) and mapped read-write by
// both ends. The client (single producer; libhalo serializes its threads)
// builds each record in private memory, seals it with a checksum
// (halo_ring_record_seal), copies it into the ring and publishes it by
// advancing |tail|; the daemon's loop thread (single consumer) copies each
// record out, verifies the checksum on its copy (halo_ring_record_verify),
// validates the copy and advances |head| once it has processed it. The
// memory is untrusted: the daemon keeps its own head, record sequence,
// capacity and checksum key and never reads a shared field back as truth.
//
// The checksum catches a record that changed between libhalo writing it
// and the daemon copying it out (another thread of the client writing into
// the ring): such a record is rejected with DATA_LOSS instead of running
// as changed. It is no authentication: the key is in the shared header, and
// a client may write what it likes into its own session anyway.
//
// Doorbell (io_uring style): before it stops polling a ring the daemon sets
// HALO_RING_FLAG_NEED_WAKEUP, issues a full fence and re-reads |tail|; the
// client, after publishing |tail|, issues a full fence and rings the
// session's eventfd only if the flag is set. Either the daemon sees the new
// tail or the client sees the flag: no lost wake-up.
//
// Both ends are on one host: host byte order, naturally aligned fields.
#ifndef HALO_COMMON_RING_H_
#define HALO_COMMON_RING_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

#define HALO_RING_MAGIC 0x676e6972u  // "ring"
// 2: record checksums (|checksum_key|, halo_ring_record_header_t.checksum)
// and a capacity set by halod (ring-bytes).
// 3: ALLOCA and DEALLOCA records, and the header's |result| of an ALLOCA.
#define HALO_RING_VERSION 3u
// The header takes one page; records follow it.
#define HALO_RING_HEADER_BYTES 4096u
// Records are multiples of 16 bytes and at most this long; a longer
// queue_execute goes over the socket.
#define HALO_RING_RECORD_ALIGN 16u
#define HALO_RING_MAX_RECORD_BYTES 16384u
// Bytes of records: a power of two in [MIN, MAX] (halod's ring-bytes). At
// least twice the longest record, so that a record and the PAD before it
// always fit.
#define HALO_RING_DEFAULT_CAPACITY (64u * 1024u)
#define HALO_RING_MIN_CAPACITY (2u * HALO_RING_MAX_RECORD_BYTES)
#define HALO_RING_MAX_CAPACITY (16u * 1024u * 1024u)
// The key of the records' checksums (crypto_shorthash_KEYBYTES).
#define HALO_RING_KEY_BYTES 16u

// |flags| bits. NEED_WAKEUP: the daemon stopped polling, ring the doorbell.
// BROKEN: the daemon found a framing error, or the session ended or was
// lost, and reads this ring no more (|error_message| says why); later
// operations go over the socket.
#define HALO_RING_FLAG_NEED_WAKEUP 1u
#define HALO_RING_FLAG_BROKEN 2u

// What an ALLOCA record yields (the fields of a BufferReply the client does
// not know already).
typedef struct halo_ring_alloca_result_t {
  uint64_t handle;  // the new buffer's, in the session's handle table
  uint64_t submission_id;
  // A host-visible buffer's placement (as HostPlacement); 0 for device
  // memory.
  uint64_t arena_id;
  uint64_t arena_size;
  uint64_t offset;
} halo_ring_alloca_result_t;

typedef struct halo_ring_header_t {
  // Written by the daemon at creation.
  uint32_t magic;
  uint32_t version;
  uint32_t capacity;          // record bytes after the header
  uint32_t max_record_bytes;  // HALO_RING_MAX_RECORD_BYTES
  // Random per ring: the key of the records' checksums.
  uint8_t checksum_key[HALO_RING_KEY_BYTES];
  uint8_t reserved0[32];
  // Client: bytes published (monotonic; offset = tail % capacity).
  _Alignas(64) _Atomic uint64_t tail;
  uint8_t reserved1[56];
  // Daemon: bytes consumed, advanced after each record was processed.
  _Alignas(64) _Atomic uint64_t head;
  uint8_t reserved2[56];
  // Daemon: HALO_RING_FLAG_*.
  _Alignas(64) _Atomic uint32_t flags;
  // Of the last rejected record (halo_status_code_t). Atomic (relaxed, a
  // plain mov / ldr, str): halod stores it again when the session ends or
  // is lost (before BROKEN), which may race with a client reading the
  // verdict of its last record; |error_message| may then mix the two texts.
  _Atomic int32_t error_code;
  // Daemon: sequence + 1 of the last rejected record (0: none), stored
  // (release) after |error_code| and |error_message| and before |head|
  // passes the record.
  _Atomic uint64_t error_sequence;
  char error_message[240];
  // Daemon: sequence + 1 of the last record that has a result (0: none),
  // stored (release) after |alloca_result| and before |head| passes the
  // record. Only a record the client waits for has one (the client holds
  // the ring until it read it), so one slot serves.
  _Alignas(64) _Atomic uint64_t result_sequence;
  halo_ring_alloca_result_t alloca_result;
} halo_ring_header_t;

_Static_assert(sizeof(halo_ring_header_t) <= HALO_RING_HEADER_BYTES,
               "the header fits its page");

typedef enum halo_ring_record_type_e {
  // Skips to the end of the ring (a record never wraps).
  HALO_RING_RECORD_PAD = 1,
  // halo_ring_execute_t, then binding_count halo_ring_binding_t, then
  // wait_count and signal_count halo_ring_semaphore_value_t.
  HALO_RING_RECORD_EXECUTE = 2,
  // halo_ring_semaphore_value_t: a host signal.
  HALO_RING_RECORD_SIGNAL = 3,
  // halo_ring_alloca_t, then wait_count and signal_count
  // halo_ring_semaphore_value_t: a queue-ordered allocation. Always
  // synchronous: the client waits for |head| to pass it and reads the
  // buffer from |alloca_result| (or the verdict from |error_*|).
  HALO_RING_RECORD_ALLOCA = 4,
  // halo_ring_dealloca_t, then wait_count and signal_count
  // halo_ring_semaphore_value_t: a queue-ordered deallocation.
  HALO_RING_RECORD_DEALLOCA = 5,
} halo_ring_record_type_t;

typedef struct halo_ring_record_header_t {
  uint16_t type;      // halo_ring_record_type_t
  uint16_t length;    // bytes including this header; multiple of 16
  uint32_t sequence;  // 0, 1, 2, ... per ring (modulo 2^32), PAD included
  // halo_ring_record_checksum of the record.
  uint64_t checksum;
} halo_ring_record_header_t;

_Static_assert(sizeof(halo_ring_record_header_t) == HALO_RING_RECORD_ALIGN,
               "a PAD record is a bare header and may be 16 bytes long");
_Static_assert(HALO_RING_MAX_RECORD_BYTES <= UINT16_MAX,
               "record lengths fit in 16 bits");

// Objects are named by the session's handles, exactly as on the socket.
typedef struct halo_ring_execute_t {
  uint64_t queue;  // 0: the default queue of the command buffer's device
  uint64_t command_buffer;
  uint32_t binding_count;
  uint32_t wait_count;
  uint32_t signal_count;
  uint32_t flags;  // HALO_RING_EXECUTE_*
} halo_ring_execute_t;

// The client does not wait for the daemon's verdict on this record: a
// rejection fails the record's signal semaphores with the reason (without
// the flag, the client waits for |head| to pass the record and returns the
// verdict from |error_*| as the socket's reply would; the semaphores stay).
#define HALO_RING_EXECUTE_ASYNC 1u

typedef struct halo_ring_alloca_t {
  uint64_t queue;  // a queue handle (no default queue: 0 is refused)
  uint64_t size;
  uint32_t memory_type;  // halo_memory_type_t (Halo__Wire__MemoryType)
  uint32_t wait_count;
  uint32_t signal_count;
  uint32_t flags;  // none defined: 0
} halo_ring_alloca_t;

// With HALO_RING_EXECUTE_ASYNC in |flags| the client does not wait for the
// verdict, as for EXECUTE: a rejection fails the record's signal
// semaphores with the reason and still drops the handle |buffer| (the
// client forgot it when it published the record).
typedef struct halo_ring_dealloca_t {
  uint64_t queue;  // a queue handle (no default queue: 0 is refused)
  uint64_t buffer;
  uint32_t wait_count;
  uint32_t signal_count;
  uint32_t flags;     // HALO_RING_EXECUTE_ASYNC
  uint32_t reserved;  // 0
} halo_ring_dealloca_t;

typedef struct halo_ring_binding_t {
  uint64_t buffer;  // 0: empty slot
  uint64_t offset;
  uint64_t length;  // UINT64_MAX: to the end
} halo_ring_binding_t;

typedef struct halo_ring_semaphore_value_t {
  uint64_t semaphore;
  uint64_t value;
} halo_ring_semaphore_value_t;

// Bytes of an EXECUTE record with these counts, rounded up to the record
// alignment; 0 if it exceeds HALO_RING_MAX_RECORD_BYTES.
static inline uint32_t halo_ring_execute_length(uint64_t binding_count,
                                                uint64_t wait_count,
                                                uint64_t signal_count) {
  uint64_t bytes =
      sizeof(halo_ring_record_header_t) + sizeof(halo_ring_execute_t) +
      binding_count * sizeof(halo_ring_binding_t) +
      (wait_count + signal_count) * sizeof(halo_ring_semaphore_value_t);
  if (binding_count > HALO_RING_MAX_RECORD_BYTES ||
      wait_count + signal_count > HALO_RING_MAX_RECORD_BYTES) {
    return 0;
  }
  bytes = (bytes + HALO_RING_RECORD_ALIGN - 1) &
          ~(uint64_t)(HALO_RING_RECORD_ALIGN - 1);
  return bytes <= HALO_RING_MAX_RECORD_BYTES ? (uint32_t)bytes : 0;
}

// Bytes of a record of |body_bytes| (after the record header) and these
// counts of semaphore values, rounded up to the record alignment; 0 if it
// exceeds HALO_RING_MAX_RECORD_BYTES. ALLOCA: sizeof(halo_ring_alloca_t);
// DEALLOCA: sizeof(halo_ring_dealloca_t).
static inline uint32_t halo_ring_values_length(uint32_t body_bytes,
                                               uint64_t wait_count,
                                               uint64_t signal_count) {
  if (wait_count + signal_count > HALO_RING_MAX_RECORD_BYTES) return 0;
  uint64_t bytes =
      sizeof(halo_ring_record_header_t) + body_bytes +
      (wait_count + signal_count) * sizeof(halo_ring_semaphore_value_t);
  bytes = (bytes + HALO_RING_RECORD_ALIGN - 1) &
          ~(uint64_t)(HALO_RING_RECORD_ALIGN - 1);
  return bytes <= HALO_RING_MAX_RECORD_BYTES ? (uint32_t)bytes : 0;
}

#define HALO_RING_SIGNAL_LENGTH                   \
  ((uint32_t)(sizeof(halo_ring_record_header_t) + \
              sizeof(halo_ring_semaphore_value_t)))

// Daemon (halod, or the device worker draining the ring): records the
// rejection of record |sequence| in the header for the client waiting on
// it: |error_code| and |error_message|, then |error_sequence| (release),
// all before |head| passes the record.
void halo_ring_report_error(halo_ring_header_t *header, uint64_t sequence,
                            halo_status_t status);

// Once per process before the functions below (sodium_init; thread-safe).
// INTERNAL if libsodium cannot start.
halo_status_t halo_ring_library_initialize(void);

// A fresh random checksum key (halod, at the ring's creation).
void halo_ring_key_generate(uint8_t out_key[HALO_RING_KEY_BYTES]);

// Whether |capacity| is a ring capacity: a power of two in
// [HALO_RING_MIN_CAPACITY, HALO_RING_MAX_CAPACITY].
bool halo_ring_capacity_valid(uint64_t capacity);

// The checksum of the record at |record| (a halo_ring_record_header_t, then
// its body), in memory that only the caller writes: SipHash-2-4
// (crypto_shorthash) keyed with |key| over the header with its |checksum|
// field read as zero and the body, |length| bytes in all; a PAD record
// covers its header alone (the bytes it skips are not content). Any record
// type: the type is not interpreted otherwise. The caller guarantees that
// |length| bytes are readable (the daemon checked the length before its
// copy). |record| is written to (|checksum| is zeroed while hashing) and
// restored.
uint64_t halo_ring_record_checksum(const uint8_t key[HALO_RING_KEY_BYTES],
                                   void *record);
// Client: stores the record's checksum in its header, on the private copy
// before it is written into the ring.
void halo_ring_record_seal(const uint8_t key[HALO_RING_KEY_BYTES],
                           void *record);
// Daemon: whether the checksum in the record's header (its private copy)
// matches the record.
bool halo_ring_record_verify(const uint8_t key[HALO_RING_KEY_BYTES],
                             void *record);

#endif  // HALO_COMMON_RING_H_
