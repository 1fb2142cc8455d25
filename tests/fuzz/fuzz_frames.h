// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Frames: the input format of the request harness (tests/fuzz/
// request_fuzz.c), each a 16-bit little-endian length and a packed
// halo.wire.Request. The builders below append one request each; the seed
// generator (fuzz_seeds.c) writes request inputs with them and the ring
// harness creates its session's objects with them.
//
// Thread-compatible.
#ifndef HALO_TESTS_FUZZ_FUZZ_FRAMES_H_
#define HALO_TESTS_FUZZ_FUZZ_FRAMES_H_

#include <stddef.h>
#include <stdint.h>

#include "common/ring.h"
#include "common/wire.h"

typedef struct halo_fuzz_frames_t {
  uint8_t *data;
  size_t size;
  size_t capacity;
} halo_fuzz_frames_t;

void halo_fuzz_frames_free(halo_fuzz_frames_t *frames);

// Appends |size| bytes as one frame (a malformed request, say).
void halo_fuzz_frames_append_bytes(halo_fuzz_frames_t *frames,
                                   const void *bytes, size_t size);
// Appends |request|, packed.
void halo_fuzz_frames_append(halo_fuzz_frames_t *frames,
                             const Halo__Wire__Request *request);

// The kit: objects the ring harness's sessions start with, and many request
// seeds, in these handle table slots of a fuzz session (after the harness
// kernels in slot 0; tests/fuzz/fuzz_halod.h).
enum {
  HALO_FUZZ_SLOT_HOST_BUFFER = 1,    // 4096 bytes, host-visible
  HALO_FUZZ_SLOT_DEVICE_BUFFER = 2,  // 4096 bytes, device memory
  HALO_FUZZ_SLOT_SEMAPHORE_A = 3,    // value 0
  HALO_FUZZ_SLOT_SEMAPHORE_B = 4,    // value 0, exportable
  HALO_FUZZ_SLOT_QUEUE = 5,          // on device 0
  // Reusable, 2 binding slots: fill slot 0, barrier, copy slot 0 to slot 1,
  // dispatch noop (the binding table, slot 1, a constant), update slot 1.
  HALO_FUZZ_SLOT_COMMAND_BUFFER = 6,
  HALO_FUZZ_SLOT_KIT_END = 7,  // the next object's slot
};
#define HALO_FUZZ_KIT_BUFFER_BYTES 4096u
void halo_fuzz_frames_kit(halo_fuzz_frames_t *frames);

// One request each.
void halo_fuzz_frames_buffer_create(halo_fuzz_frames_t *frames, uint64_t size,
                                    Halo__Wire__MemoryType memory_type,
                                    uint32_t flags);
void halo_fuzz_frames_semaphore_create(halo_fuzz_frames_t *frames,
                                       uint64_t initial_value, uint32_t flags);
void halo_fuzz_frames_semaphore_signal(halo_fuzz_frames_t *frames,
                                       uint64_t semaphore, uint64_t value);
void halo_fuzz_frames_queue_create(halo_fuzz_frames_t *frames);
// The kit's command buffer (|binding_capacity| slots, |direct|: its fill
// names |direct| instead of slot 0).
void halo_fuzz_frames_command_buffer_create(halo_fuzz_frames_t *frames,
                                            uint32_t binding_capacity,
                                            uint64_t direct);

// The ring's layouts (common/ring.h), for the socket's frames too.
typedef halo_ring_semaphore_value_t halo_fuzz_value_t;
typedef halo_ring_binding_t halo_fuzz_binding_t;

void halo_fuzz_frames_execute(halo_fuzz_frames_t *frames, uint64_t queue,
                              uint64_t command_buffer,
                              const halo_fuzz_binding_t *bindings,
                              size_t binding_count,
                              const halo_fuzz_value_t *waits, size_t wait_count,
                              const halo_fuzz_value_t *signals,
                              size_t signal_count);
void halo_fuzz_frames_alloca(halo_fuzz_frames_t *frames, uint64_t queue,
                             uint64_t size, Halo__Wire__MemoryType memory_type,
                             const halo_fuzz_value_t *waits, size_t wait_count,
                             const halo_fuzz_value_t *signals,
                             size_t signal_count);
void halo_fuzz_frames_dealloca(halo_fuzz_frames_t *frames, uint64_t queue,
                               uint64_t buffer, const halo_fuzz_value_t *waits,
                               size_t wait_count,
                               const halo_fuzz_value_t *signals,
                               size_t signal_count);

#endif  // HALO_TESTS_FUZZ_FUZZ_FRAMES_H_
