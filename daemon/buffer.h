// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Buffers in the daemon: host-visible (a range of an arena) or device
// memory (allocated through the HAL device). Charged to the creating
// session's quotas.
//
// Loop thread only.
#ifndef HALOD_BUFFER_H_
#define HALOD_BUFFER_H_

#include <stdbool.h>
#include <stdint.h>

#include "daemon/arena.h"
#include "daemon/daemon.h"

typedef struct halod_buffer_t {
  uint32_t refcount;  // handles in sessions (+ in-flight work, later)
  uint64_t id;
  uint32_t memory_type;  // HALO__WIRE__MEMORY_TYPE__*
  uint32_t device;
  uint64_t size;
  halod_arena_t *arena;  // host-visible
  uint64_t offset;
  uint64_t device_address;  // device memory
  // Device memory: the device (of the owner's trust domain) it lives on
  // (held).
  halo_hal_device_t *hal_device;
  uint64_t owner_session;  // charged session; 0 once it ended
  bool exportable;
  bool exported;
  uint8_t token[16];
  // Called once the last reference went and the memory was freed (the
  // buffer itself is gone by then): a queue_dealloca waiting for it
  // (daemon/submission.c). NULL: nobody waits.
  void (*on_freed)(void *user_data);
  void *on_freed_data;
} halod_buffer_t;

#define HALOD_BUFFER_MAX_SIZE (1ull << 40)

halo_status_t halod_buffer_create(halod_t *daemon, halod_session_t *session,
                                  uint32_t device, uint32_t memory_type,
                                  uint64_t size, bool exportable,
                                  halod_buffer_t **out_buffer);
// Device memory allocated by a control call off the loop (daemon/requests.c,
// daemon/device_call.h): halod_buffer_reserve checks what
// halod_buffer_create checks and charges |size| to the session's device
// bytes at once (no other allocation of the session passes the quota while
// the call runs); halod_buffer_adopt makes the buffer of the memory the
// device allocated at |address|, those bytes charged already; a failed
// call's bytes go back with halod_buffer_unreserve.
halo_status_t halod_buffer_reserve(halod_t *daemon, halod_session_t *session,
                                   uint32_t device, uint64_t size,
                                   halo_hal_device_t **out_hal_device);
void halod_buffer_unreserve(halod_session_t *session, uint64_t size);
halo_status_t halod_buffer_adopt(halod_t *daemon, halod_session_t *session,
                                 uint32_t device, uint64_t size,
                                 bool exportable, halo_hal_device_t *hal_device,
                                 uint64_t address, halod_buffer_t **out_buffer);
// A host-visible buffer that needs a new arena (halod_buffer_needs_arena:
// an exclusive one, or none of the session's has room) is made in steps,
// so that the arena's registration with the domain's devices (a control
// call to each worker) runs off the loop: halod_buffer_arena_open checks
// what halod_buffer_create checks, charges |size| to the session's host
// bytes and opens the arena (daemon/arena.h); once the registration ran,
// halod_buffer_create_on_arena finishes the arena and places the buffer on
// it (on error both go, and the bytes), or halod_buffer_arena_abandon
// drops them (|session| NULL: it ended).
struct halod_host_registration_t;
bool halod_buffer_needs_arena(const halod_t *daemon,
                              const halod_session_t *session, uint64_t size,
                              bool exportable);
halo_status_t halod_buffer_arena_open(
    halod_t *daemon, halod_session_t *session, uint32_t device, uint64_t size,
    bool exportable, halod_arena_t **out_arena,
    struct halod_host_registration_t *out_registration);
halo_status_t halod_buffer_create_on_arena(
    halod_t *daemon, halod_session_t *session, uint32_t device, uint64_t size,
    bool exportable, halod_arena_t *arena,
    struct halod_host_registration_t *registration,
    halod_buffer_t **out_buffer);
void halod_buffer_arena_abandon(halod_t *daemon, halod_session_t *session,
                                uint64_t size, halod_arena_t *arena,
                                struct halod_host_registration_t *registration);
void halod_buffer_retain(halod_buffer_t *buffer);
// The last release frees the memory (and uncharges the owner), then calls
// |on_freed|.
void halod_buffer_release(halod_t *daemon, halod_buffer_t *buffer);

// OUT_OF_RANGE unless [offset, offset + length) lies inside the buffer.
halo_status_t halod_buffer_check_range(const halod_buffer_t *buffer,
                                       uint64_t offset, uint64_t length);

// The address |hal_device| (device |index| of some trust domain) reaches
// the buffer at: host-visible buffers are registered with every device of
// their owner's domain; device buffers only with their own device. Memory
// of another trust domain is refused (PERMISSION_DENIED): it lives in
// another worker process.
halo_status_t halod_buffer_device_address(const halod_buffer_t *buffer,
                                          const halo_hal_device_t *hal_device,
                                          uint32_t index,
                                          uint64_t *out_address);

halo_status_t halod_buffer_write(halod_buffer_t *buffer, uint64_t offset,
                                 const void *data, uint64_t length);
halo_status_t halod_buffer_read(halod_buffer_t *buffer, uint64_t offset,
                                void *out_data, uint64_t length);

#endif  // HALOD_BUFFER_H_
