// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo status: one type across the daemon, the HAL, the wire and the client.
//
// A halo_status_t is NULL for OK; any other value is a heap object carrying
// a code and a message that names what was wrong. Whoever receives a
// non-NULL status owns it and must pass it to halo_status_free() (or return
// it to its own caller). Codes map 1:1 to the wire (Response.code).
//
// Thread-safety: a status object is owned by one thread at a time; the
// functions below are thread-safe.
#ifndef HALO_STATUS_H_
#define HALO_STATUS_H_

#include <stdarg.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

// Marks the functions libhalo.so exports.
#define HALO_API __attribute__((visibility("default")))

typedef enum halo_status_code_e {
  HALO_STATUS_OK = 0,
  HALO_STATUS_CANCELLED = 1,
  HALO_STATUS_UNKNOWN = 2,
  HALO_STATUS_INVALID_ARGUMENT = 3,
  HALO_STATUS_DEADLINE_EXCEEDED = 4,
  HALO_STATUS_NOT_FOUND = 5,
  HALO_STATUS_ALREADY_EXISTS = 6,
  HALO_STATUS_PERMISSION_DENIED = 7,
  HALO_STATUS_RESOURCE_EXHAUSTED = 8,
  HALO_STATUS_FAILED_PRECONDITION = 9,
  HALO_STATUS_ABORTED = 10,
  HALO_STATUS_OUT_OF_RANGE = 11,
  HALO_STATUS_UNIMPLEMENTED = 12,
  HALO_STATUS_INTERNAL = 13,
  // The daemon is gone or stopping; reconnect when it is back. On SIGTERM
  // halod answers every request and wakes every semaphore waiter with it
  // at once ("halod is stopping"), then exits within 5 s.
  HALO_STATUS_UNAVAILABLE = 14,
  HALO_STATUS_DATA_LOSS = 15,
  HALO_STATUS_UNAUTHENTICATED = 16,
  // The device's context was lost (a GPU fault, or the trust domain's device
  // worker ended: crash, kill, submission deadline); work on it failed. The
  // message names the device, the trust domain and the work in flight.
  HALO_STATUS_DEVICE_LOST = 17,
  // The session was lost with its trust domain's device worker: every call
  // that asks halod fails with this code, except releases (of any object)
  // and halo_client_close. Calls that libhalo serves in the process, without
  // asking halod, still work on the session's objects until they are
  // released: halo_buffer_host_pointer and halo_buffer_read/write of
  // host-visible buffers (their shared memory stays mapped, so results of
  // work that completed before the loss can be read back, and inputs kept
  // for the new session), semaphore queries and waits (the semaphores the
  // session created read as failed with DEVICE_LOST and the reason),
  // halo_command_buffer_begin and the recording calls (the end, which asks
  // halod, fails), and the accessors (sizes, handles, ids). Rebuild: close
  // the client, connect again (a fresh worker serves the new session) and
  // load, allocate and record anew.
  HALO_STATUS_SESSION_LOST = 18,
} halo_status_code_t;

#define HALO_STATUS_CODE_COUNT 19

typedef struct halo_status_s *halo_status_t;

#ifdef __cplusplus
#define halo_ok_status() (static_cast<halo_status_t>(nullptr))
#else
#define halo_ok_status() ((halo_status_t)0)
#endif

// Returns a new status with |code| and a printf-style message. |code| OK
// returns NULL. Never fails: on allocation failure it returns a static
// RESOURCE_EXHAUSTED status that halo_status_free() ignores.
HALO_API halo_status_t halo_status_make(halo_status_code_t code,
                                        const char *format, ...)
    __attribute__((format(printf, 2, 3)));
HALO_API halo_status_t halo_status_makev(halo_status_code_t code,
                                         const char *format, va_list args);

// The code of |status| (OK for NULL).
HALO_API halo_status_code_t halo_status_code(halo_status_t status);

// The message of |status| ("" for NULL). Valid until the status is freed.
HALO_API const char *halo_status_message(halo_status_t status);

// "OK", "INVALID_ARGUMENT", ...; "UNKNOWN_CODE" for values out of range.
HALO_API const char *halo_status_code_name(halo_status_code_t code);

// Prefixes |status|'s message with a printf-style context ("while ...: ").
// Returns |status| (possibly reallocated); NULL stays NULL.
HALO_API halo_status_t halo_status_annotate(halo_status_t status,
                                            const char *format, ...)
    __attribute__((format(printf, 2, 3)));

// Frees |status|; NULL is fine.
HALO_API void halo_status_free(halo_status_t status);

// Frees |status| and returns its code: for callers that only branch on it.
HALO_API halo_status_code_t halo_status_consume_code(halo_status_t status);

#ifdef __cplusplus
}
#endif

#endif  // HALO_STATUS_H_
