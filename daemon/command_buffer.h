// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Command buffers in the daemon. A client's recording is validated (every
// error names the command index and argument) into a halo_hal_recording_t
// and prepared once by the device. REUSABLE recordings are memoized: an
// identical recording (same commands, same executables, same directly
// referenced buffers) from any session shares the prepared form. Each
// recording also yields per-slot requirements that every submission's
// binding table is checked against in O(bindings).
//
// Loop thread only.
#ifndef HALOD_COMMAND_BUFFER_H_
#define HALOD_COMMAND_BUFFER_H_

#include <stdbool.h>
#include <stdint.h>

#include "common/hash.h"
#include "daemon/buffer.h"
#include "daemon/daemon.h"
#include "daemon/executable.h"
#include "hal/command_buffer.h"

// What a recording needs of binding table slot i.
typedef struct halod_slot_requirement_t {
  uint64_t min_length;  // bytes the binding must cover
  uint32_t alignment;   // of the bound address
  bool used;
} halod_slot_requirement_t;

// A prepared recording, shared by every command buffer recorded the same.
typedef struct halod_memo_entry_t {
  halo_hash_t key;
  char key_text[65];
  uint32_t device;
  uint32_t flags;
  uint32_t sharers;  // command buffers using it
  uint64_t hits;     // times an identical recording found it
  bool in_cache;     // REUSABLE: in daemon->cache.memo
  // As recorded (no-op dispatches included; the device has only the rest).
  uint32_t command_count;
  uint32_t binding_capacity;
  halod_slot_requirement_t *slots;
  halo_hal_command_buffer_t *hal;
  halod_executable_t **executables;  // retained
  uint32_t executable_count;
  halod_buffer_t **buffers;  // directly referenced, retained
  uint32_t buffer_count;
  // Without sharers: kept in daemon->cache.memo_lru (REUSABLE recordings
  // that name no buffer directly: a buffer's id is never seen again).
  // lru.bytes: what halod keeps for it, and the worker's copy of the
  // recording where the device is a worker's; charged against
  // session-recording-bytes to each command buffer's session while held,
  // against memo-cache-bytes once released.
  halod_cache_link_t lru;
} halod_memo_entry_t;

typedef struct halod_command_buffer_t {
  uint32_t refcount;  // handle + submissions in flight
  uint64_t id;
  halod_memo_entry_t *entry;
  bool memo_hit;
  bool executed;  // ONE_SHOT: at most once
  // Charged entry->bytes against session-recording-bytes until the last
  // reference goes (submissions in flight keep the recording); the session
  // may have ended by then.
  uint64_t owner_session;
  // Holds the imported buffers of its recording charged to the owner
  // (halod_session_hold_import) from its handle's creation on.
  bool holds_imports;
} halod_command_buffer_t;

#define HALOD_MAX_COMMANDS 65536
#define HALOD_MAX_BINDINGS 4096
#define HALOD_MAX_DISPATCH_ARGS 64
#define HALOD_MAX_CONSTANT_BYTES 4096
#define HALOD_MAX_UPDATE_BYTES 65536
#define HALOD_MAX_INLINE_BYTES (1u << 20)
#define HALOD_MAX_SHARED_MEMORY_BYTES (228u << 10)
// halo.h's HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS: the recording's kernels
// take buffer arguments at any address.
#define HALOD_COMMAND_BUFFER_UNALIGNED_BINDINGS 4u
// What a kernel's buffer argument needs otherwise (HALO_DISPATCH_ALIGNMENT):
// vectorized loads (Triton's 128-bit ones) fault on a lesser address.
#define HALOD_DISPATCH_ALIGNMENT 16u

// Creates the command buffer |wire| asks for (a CommandBufferCreate, whose
// decoded request the call takes) for |session| and answers |context| (a
// CommandBufferReply with a new handle, or the error). The recording is
// validated on the loop, and shares an identical prepared one where there
// is one; a control call to the session's worker, where it takes one, runs
// off the loop (daemon/device_call.h): the lookup of the entry points its
// executables' proxies do not know yet (before the validation that uses
// them), the recording's preparation. The session is charged the
// recording's bytes (entry->bytes, also when shared) against
// session-recording-bytes until the command buffer's last reference goes
// (from the start of its preparation); past the quota the create is refused
// with RESOURCE_EXHAUSTED naming it, before the recording reaches the
// device.
void halod_command_buffer_create(halod_t *daemon, halod_session_t *session,
                                 Halo__Wire__Request *wire,
                                 halod_server_context_t *context);
void halod_command_buffer_retain(halod_command_buffer_t *command_buffer);
void halod_command_buffer_release(halod_t *daemon,
                                  halod_command_buffer_t *command_buffer);
// The memo cache's destroy function (daemon/cache.h).
void halod_memo_entry_evict(halod_t *daemon, halod_cache_link_t *link);
// Whether the kept recording around |link| holds an executable that no
// session holds (its eviction may free executable-cache-bytes).
bool halod_memo_entry_holds_unheld(const halod_cache_link_t *link);

#endif  // HALOD_COMMAND_BUFFER_H_
