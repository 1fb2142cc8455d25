// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The link between halod (the supervisor) and a device worker process: one
// Unix stream socket carrying framed messages, with a file descriptor
// attached to a message where one travels (SCM_RIGHTS on its header).
//
// Both ends are the same halod binary (the supervisor starts the worker as
// `halod --worker`), so payloads are plain C structs of this header; the
// worker's first message carries HALO_REMOTE_LINK_VERSION and the size of
// the structs so that a mismatch is refused, not misread.
//
// Messages, supervisor -> worker, with the payload that follows the header:
//   ALLOCATE        halo_remote_allocate_t               reply: address
//   DEALLOCATE      halo_remote_allocate_t               no reply
//   WRITE           halo_remote_memory_t + bytes         reply
//   READ            halo_remote_memory_t                 reply: bytes
//   REGISTER_HOST   halo_remote_register_t + memfd       reply: address
//   UNREGISTER_HOST halo_remote_register_t               no reply
//   CREATE_EXECUTABLE halo_remote_executable_t + options + code
//                                                        reply: id, origin
//   LOOKUP_ENTRY    halo_remote_object_t + name          reply: entry info
//   PREPARE         halo_remote_prepare_t + commands + args + data
//                                                        reply: id
//   CREATE_QUEUE    halo_remote_queue_t                  reply: id, fences
//   DESTROY         halo_remote_object_t (executable, command buffer,
//                   queue or fence)                      no reply
//   EXECUTE         halo_remote_execute_t + bindings + signals + fence ids
//                                                        COMPLETE later
// worker -> supervisor:
//   READY           halo_remote_ready_t (or FAILED: a message)
//   REPLY           halo_remote_reply_t + message + data
//   COMPLETE        halo_remote_complete_t + message
//   LOST            a message: the device is lost; the worker exits next.
//   USAGE           halo_hal_device_usage_t (hal/device.h): what the device
//                   holds of its bounded resources (graph instances' memory
//                   and its bound). Sent by the worker's usage reporter once
//                   after READY and then whenever the figures changed, at
//                   most once per HALO_REMOTE_USAGE_INTERVAL_NS; never by a
//                   worker whose driver reports none (query_usage NULL).
//                   The supervisor keeps the last one (the device's
//                   query_usage answers it); a payload of another size, or
//                   with |reserved| set, is refused
//                   (halo_remote_usage_decode) and logged.
//   ALIVE           no payload: the worker's liveness message. The usage
//                   reporter thread (started in every worker, whether its
//                   driver reports usage or not) wakes every
//                   HALO_REMOTE_USAGE_INTERVAL_NS and sends ALIVE on each
//                   wake-up where it sent no USAGE, whatever the worker's
//                   other threads do. So the supervisor hears something at
//                   least once a second from a worker that runs; one it
//                   hears nothing from for the hang bound (worker-hang-ms)
//                   is stopped or frozen, and killed as hung
//                   (remote_device.h). It carries nothing else; the
//                   supervisor ignores its payload.
//
// The session's submission ring, delegated to the worker (hot path without
// the supervisor; docs/architecture.md "Rings in the worker"). None has a
// reply but a RING_DETACH sent as a call; supervisor -> worker:
//   RING_FLIGHT     + the flight table's memfd (halo_remote_flight_t), once,
//                   before the first RING_ATTACH
//   RING_ATTACH     halo_remote_ring_attach_t + the ring's memfd
//   RING_DOORBELL   halo_remote_ring_session_t + the session's eventfd
//   RING_GRANT      halo_remote_ring_grant_t (+ binding_capacity
//                   halo_remote_ring_slot_t for a command buffer)
//   RING_REVOKE     halo_remote_ring_revoke_t
//   RING_RESUME     halo_remote_ring_position_t: the bounced record is done
//   RING_DETACH     halo_remote_ring_session_t: the session ended. Sent
//                   as a call (a nonzero id: the session was lost while
//                   this worker lives), it is answered by a REPLY whose
//                   values are the ring's head and sequence after the last
//                   record the worker took; it reads the ring no further,
//                   and the supervisor refuses the records from there on
//                   (NOT_FOUND: the worker never held the ring)
// worker -> supervisor:
//   RING_BOUNCE     halo_remote_ring_position_t: the record there is the
//                   supervisor's; the worker reads the ring no further
//                   until RING_RESUME
//   RING_COMPLETE   one or more completions back to back, each
//                   halo_remote_ring_complete_t + signal_count
//                   halo_remote_ring_value_t + message_length bytes of
//                   message (no padding between them)
//   RING_RELEASED   uint64_t grant ids: revoked grants no execution uses
//   RING_REFUSED    halo_remote_ring_session_t: the worker could not take
//                   the ring of a RING_ATTACH (not a ring it can map, out
//                   of memory); halod drains it again
// The worker's reporter thread sends both, in the order the executions
// completed and the grants were released: an execution's completion comes
// before the RING_RELEASED of any grant it used.
//
// What the worker takes itself: an EXECUTE record whose every handle is
// granted, that passes the checks the supervisor would make (binding
// ranges, slot lengths and alignment, values below 2^63, no semaphore
// signaled twice), whose waits are reached in their slots and whose
// signals are above their slot's value and |pending| (which it raises),
// while the session has fewer than |pending_limit| such executions in
// flight and the flight table has room. PAD records it skips. Everything
// else (other records, a changed checksum, an unknown handle, a failed
// check, a wait not reached) it bounces: the supervisor processes that one
// record as it always did (and says why it refuses it), grants what the
// record used, and resumes the worker after it. So the worker refuses no
// record itself; only the driver may refuse an execution the worker took
// (its verdict then goes to the ring's header, as halod's would, and the
// execution completes as failed).
//
// One-way messages (no reply awaited) may be posted instead of sent
// (halo_remote_link_post): a post never waits for the peer. What cannot go
// at once (another thread is sending, the socket is full) waits in the
// link's outbox, in order, and a writer thread of the link's own sends it.
// A send (a call's request) sends what the outbox holds first. So halod's
// loop, which posts, never waits on a worker that stopped reading.
//
// Thread-safety: a link's send side is guarded by its own mutexes (any
// thread sends or posts); one thread receives.
#ifndef HALO_HAL_REMOTE_REMOTE_LINK_H_
#define HALO_HAL_REMOTE_REMOTE_LINK_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hal/command_buffer.h"
#include "hal/device.h"
#include "halo/status.h"

#define HALO_REMOTE_LINK_VERSION 11u
// Longest payload a link accepts: a binding table, a recording or a buffer
// read of the daemon's largest message.
#define HALO_REMOTE_MAX_PAYLOAD (1ull << 31)

typedef enum halo_remote_message_type_e {
  HALO_REMOTE_ALLOCATE = 1,
  HALO_REMOTE_DEALLOCATE = 2,
  HALO_REMOTE_WRITE = 3,
  HALO_REMOTE_READ = 4,
  HALO_REMOTE_REGISTER_HOST = 5,
  HALO_REMOTE_UNREGISTER_HOST = 6,
  HALO_REMOTE_CREATE_EXECUTABLE = 7,
  HALO_REMOTE_LOOKUP_ENTRY = 8,
  HALO_REMOTE_PREPARE = 9,
  HALO_REMOTE_CREATE_QUEUE = 10,
  HALO_REMOTE_DESTROY = 11,
  HALO_REMOTE_EXECUTE = 12,
  HALO_REMOTE_RING_FLIGHT = 13,
  HALO_REMOTE_RING_ATTACH = 14,
  HALO_REMOTE_RING_DOORBELL = 15,
  HALO_REMOTE_RING_GRANT = 16,
  HALO_REMOTE_RING_REVOKE = 17,
  HALO_REMOTE_RING_RESUME = 18,
  HALO_REMOTE_RING_DETACH = 19,
  HALO_REMOTE_READY = 32,
  HALO_REMOTE_FAILED = 33,
  HALO_REMOTE_REPLY = 34,
  HALO_REMOTE_COMPLETE = 35,
  HALO_REMOTE_LOST = 36,
  HALO_REMOTE_RING_BOUNCE = 37,
  HALO_REMOTE_RING_COMPLETE = 38,
  HALO_REMOTE_RING_RELEASED = 39,
  HALO_REMOTE_RING_REFUSED = 40,
  HALO_REMOTE_USAGE = 41,
  HALO_REMOTE_ALIVE = 42,
} halo_remote_message_type_t;

// How often the worker's usage reporter looks at its device's usage (and
// sends USAGE if it changed, else ALIVE).
#define HALO_REMOTE_USAGE_INTERVAL_NS 1000000000ll

typedef enum halo_remote_object_kind_e {
  HALO_REMOTE_OBJECT_EXECUTABLE = 1,
  HALO_REMOTE_OBJECT_COMMAND_BUFFER = 2,
  HALO_REMOTE_OBJECT_QUEUE = 3,
  HALO_REMOTE_OBJECT_FENCE = 4,
} halo_remote_object_kind_t;

typedef struct halo_remote_header_t {
  uint32_t type;  // halo_remote_message_type_t
  uint32_t reserved;
  uint64_t id;      // request id (0: no reply wanted) or execution id
  uint64_t length;  // payload bytes after the header
} halo_remote_header_t;

typedef struct halo_remote_ready_t {
  uint32_t version;
  uint32_t header_size;
  uint32_t execute_size;
  uint32_t command_size;
  int32_t pid;
  uint32_t reserved;
  halo_hal_device_info_t info;
} halo_remote_ready_t;

typedef struct halo_remote_reply_t {
  int32_t code;  // halo_status_code_t
  uint32_t message_length;
  uint64_t values[2];
  // message_length bytes of message, then the rest of the payload is data.
} halo_remote_reply_t;

typedef struct halo_remote_allocate_t {
  uint64_t address;
  uint64_t size;
} halo_remote_allocate_t;

typedef struct halo_remote_memory_t {
  uint64_t address;
  uint64_t length;
} halo_remote_memory_t;

typedef struct halo_remote_register_t {
  uint64_t key;  // the supervisor's address of the mapping
  uint64_t size;
} halo_remote_register_t;

typedef struct halo_remote_executable_t {
  uint32_t format;
  uint32_t option_count;
  uint64_t options_size;  // NUL-terminated options, back to back
  uint64_t code_size;
} halo_remote_executable_t;

typedef struct halo_remote_object_t {
  uint32_t kind;  // halo_remote_object_kind_t
  uint32_t reserved;
  uint64_t id;
} halo_remote_object_t;

typedef struct halo_remote_prepare_t {
  uint32_t flags;
  uint32_t binding_capacity;
  uint32_t command_count;  // halo_hal_command_t, executable = its remote id
  uint32_t arg_count;
  uint32_t data_size;
  uint32_t reserved;
} halo_remote_prepare_t;

typedef struct halo_remote_queue_t {
  int32_t priority;
  uint32_t reserved;
} halo_remote_queue_t;

// A signal: |slot_key| the supervisor's address of the registered page
// holding the slot (0: none), |slot_offset| the slot's offset in it.
typedef struct halo_remote_signal_t {
  uint64_t device_address;
  uint64_t value;
  uint64_t slot_key;
  uint64_t slot_offset;
} halo_remote_signal_t;

typedef struct halo_remote_execute_t {
  uint64_t queue;
  uint64_t command_buffer;
  uint64_t out_fence;  // 0: none wanted; else the id the fence will have
  uint32_t binding_count;
  uint32_t signal_count;
  uint32_t wait_fence_count;  // uint64_t fence ids after the signals
  uint32_t reserved;
} halo_remote_execute_t;

typedef struct halo_remote_complete_t {
  int32_t code;
  uint32_t message_length;
} halo_remote_complete_t;

// A USAGE message's payload of |length| bytes, checked (the worker is
// trusted less than the supervisor): INVALID_ARGUMENT, naming what is
// wrong, where it is not one halo_hal_device_usage_t with |reserved| 0.
halo_status_t halo_remote_usage_decode(const void *payload, uint64_t length,
                                       halo_hal_device_usage_t *out_usage);

// ---------------------------------------------------------------- rings

// The signals a flight entry names.
#define HALO_REMOTE_FLIGHT_SIGNALS 4u

// Shared by the supervisor (creates it, reads it after a loss) and the
// worker (writes it): the ring executions the worker took and has not
// reported yet, so that a worker that dies still names them. An entry is
// free while |id| is 0; the worker fills the other fields (|completed| 0),
// then stores |id| (release). When the execution completes, the worker
// stores its outcome in |completed| (release); just before the
// RING_COMPLETE that reports it goes, the report's sequence number in
// |report|; once it was sent, |id| 0. The supervisor, which applies the
// reports in the order sent, thus tells an entry whose report it applied
// already (the worker has not freed it yet) from one whose report is still
// to come or never left. A lost worker's entry is thus
// either running (its signals fail with the loss) or completed but perhaps
// not reported (the supervisor applies the outcome: the values, or the
// code).
//
// The supervisor reads an entry while the worker runs as a sequence lock:
// |id| (acquire), the fields, an acquire fence, |id| again (relaxed); the
// fields are the execution's only if |id| held. The worker clears |id|
// (release) before the entry is freed and, taking it again, issues a
// release fence before it stores the new fields. The fields read while the
// worker runs (|queue_grant|, |issued_ns|, |completed|) are atomics, stored
// and loaded relaxed (a plain mov / ldr, str): their loads race with the
// refill by design (as plain fields they would be a data race, which the
// compiler may split or re-read); so is |report|. The others are read only
// once the worker was reaped.
typedef struct halo_remote_flight_entry_t {
  _Atomic uint64_t id;  // the execution's id (HALO_REMOTE_RING_ID_BIT set)
  uint64_t session;     // the supervisor's session id
  _Atomic uint64_t queue_grant;  // the QUEUE grant it runs on
  uint64_t command_buffer_grant;
  _Atomic int64_t issued_ns;  // CLOCK_MONOTONIC
  // Its signals' SEMAPHORE grants and values (|signal_count| of them: the
  // worker leaves an execution with more than HALO_REMOTE_FLIGHT_SIGNALS
  // to halod).
  uint32_t signal_count;
  // 0 while it runs; HALO_REMOTE_FLIGHT_COMPLETED | its status code
  // (halo_status_code_t, 0: OK) once it completed.
  _Atomic uint32_t completed;
  // 0 until its RING_COMPLETE is about to be sent; then that report's
  // sequence number (halo_remote_ring_complete_t |report|).
  _Atomic uint32_t report;
  uint64_t signal_grants[HALO_REMOTE_FLIGHT_SIGNALS];
  uint64_t signal_values[HALO_REMOTE_FLIGHT_SIGNALS];
} halo_remote_flight_entry_t;

#define HALO_REMOTE_FLIGHT_COMPLETED (1u << 31)

// Whether |entry| (its |id| read non-zero) still runs: not completed.
static inline bool halo_remote_flight_entry_running(
    const halo_remote_flight_entry_t *entry) {
  return (atomic_load_explicit(&entry->completed, memory_order_acquire) &
          HALO_REMOTE_FLIGHT_COMPLETED) == 0;
}

typedef struct halo_remote_flight_t {
  uint32_t capacity;  // entries
  uint32_t reserved;
  // The messages the supervisor sent or posted on the link since (and
  // with) RING_FLIGHT, each counted before its first byte is sent, or when
  // it is queued in the outbox (halo_remote_link_send_counted): the worker's
  // ring loop compares it with the messages it took instead of polling the
  // socket each round, and waits for the ones counted but not arrived yet.
  _Atomic uint64_t link_sent;
  uint64_t reserved_words[6];
  halo_remote_flight_entry_t entries[];
} halo_remote_flight_t;

_Static_assert(sizeof(halo_remote_flight_t) == 64,
               "the flight table's header is one cache line");

#define HALO_REMOTE_FLIGHT_ENTRIES 4096u
#define HALO_REMOTE_FLIGHT_BYTES  \
  (sizeof(halo_remote_flight_t) + \
   HALO_REMOTE_FLIGHT_ENTRIES * sizeof(halo_remote_flight_entry_t))
// Ids of executions the worker took from a ring have this bit set (the
// supervisor's own ids never do).
#define HALO_REMOTE_RING_ID_BIT (1ull << 63)

typedef struct halo_remote_ring_session_t {
  uint64_t session;
} halo_remote_ring_session_t;

typedef struct halo_remote_ring_attach_t {
  uint64_t session;
  uint64_t map_size;  // header page + capacity: the memfd's size
  uint64_t head;      // bytes consumed so far: where the worker starts
  uint64_t sequence;  // the sequence of the record at |head|
  uint32_t capacity;  // record bytes, a power of two
  // The session's executions the worker may have in flight (session-
  // pending); past it, records are bounced.
  uint32_t pending_limit;
  uint8_t key[16];  // the records' checksum key (HALO_RING_KEY_BYTES)
} halo_remote_ring_attach_t;

typedef struct halo_remote_ring_position_t {
  uint64_t session;
  uint64_t head;      // the record's offset (bytes consumed before it)
  uint64_t sequence;  // its sequence
} halo_remote_ring_position_t;

typedef enum halo_remote_grant_kind_e {
  HALO_REMOTE_GRANT_QUEUE = 1,
  HALO_REMOTE_GRANT_COMMAND_BUFFER = 2,
  HALO_REMOTE_GRANT_BUFFER = 3,
  HALO_REMOTE_GRANT_SEMAPHORE = 4,
} halo_remote_grant_kind_t;

// A session's handle as the worker resolves it in ring records. The grant
// holds the supervisor's reference on the object until the worker sends
// RING_RELEASED for it (after a RING_REVOKE or RING_DETACH, once no
// execution of the worker uses it).
typedef struct halo_remote_ring_grant_t {
  uint64_t session;
  // The session's handle; a QUEUE grant of handle 0 is the session's
  // default queue on this device.
  uint64_t handle;
  uint64_t grant;  // the supervisor's id for it (RING_RELEASED names it)
  uint32_t kind;   // halo_remote_grant_kind_t
  // COMMAND_BUFFER: its binding table's slots, whose requirements follow.
  uint32_t binding_capacity;
  // QUEUE, COMMAND_BUFFER: the worker's object id (as in EXECUTE).
  // BUFFER: its device address on this worker. SEMAPHORE: the slot's page
  // key (as halo_remote_signal_t.slot_key).
  uint64_t object;
  // BUFFER: its size in bytes. SEMAPHORE: the slot's offset in the page.
  uint64_t size;
  // SEMAPHORE: the address the device stores its value at (0: none).
  uint64_t device_address;
} halo_remote_ring_grant_t;

// A command buffer's binding slot: a binding must cover |min_length| bytes
// at an address aligned to |alignment| if |used|.
typedef struct halo_remote_ring_slot_t {
  uint64_t min_length;
  uint32_t alignment;
  uint32_t used;
} halo_remote_ring_slot_t;

typedef struct halo_remote_ring_revoke_t {
  uint64_t session;
  uint64_t handle;
  uint32_t kind;  // halo_remote_grant_kind_t
  uint32_t reserved;
} halo_remote_ring_revoke_t;

// An execution the worker took from a ring completed (or failed).
typedef struct halo_remote_ring_complete_t {
  uint64_t session;
  uint64_t id;  // HALO_REMOTE_RING_ID_BIT set
  uint64_t queue_grant;
  uint64_t command_buffer_grant;
  int64_t issued_ns;
  int64_t completed_ns;
  int32_t code;  // halo_status_code_t: the signals fail with it
  // The status's message after the values (its first 4096 bytes at most).
  uint32_t message_length;
  uint32_t signal_count;
  // The worker's sequence of reports (1, 2, ...; wrapping), in the order it
  // sends them; the flight entry names it too from just before the send
  // (halo_remote_flight_entry_t |report|).
  uint32_t report;
} halo_remote_ring_complete_t;

typedef struct halo_remote_ring_value_t {
  uint64_t grant;  // a SEMAPHORE grant
  uint64_t value;
} halo_remote_ring_value_t;

#define HALO_REMOTE_LINK_BUFFER (64 * 1024)
#define HALO_REMOTE_LINK_MAX_FDS 16
// The outbox's default bound (halo_remote_link_limit_outbox): a peer that
// leaves this much unread, and has taken nothing of it for the send limit,
// while messages keep coming is hung. A control call's largest write or
// recording passes through the socket, not the outbox; these are
// executions, releases and ring messages, a few hundred bytes each (a
// session that ends with 65,536 handles posts as many releases at once,
// faster than any worker frees them: a peer that reads is never hung for
// that, up to HALO_REMOTE_OUTBOX_HARD times the bound).
#define HALO_REMOTE_OUTBOX_BYTES (16u << 20)
#define HALO_REMOTE_OUTBOX_FDS 256u
#define HALO_REMOTE_OUTBOX_HARD 16u
// How long the outbox's writer thread waits for more before it ends.
#define HALO_REMOTE_OUTBOX_IDLE_NS 1000000000ll

// A message posted but not sent yet: its bytes, header first, and its
// descriptor (a duplicate the outbox owns; -1: none, or sent with the
// message's first bytes).
typedef struct halo_remote_outbox_entry_t {
  struct halo_remote_outbox_entry_t *next;
  size_t size;
  size_t sent;  // bytes written already (the first entry only)
  int fd;
  uint8_t bytes[];
} halo_remote_outbox_entry_t;

// The link's peer counts as hung (halo_remote_link_on_hung): |status| says
// why; the callee does not take it. On the thread that found it.
typedef void (*halo_remote_link_hung_fn)(void *user_data, halo_status_t status);

typedef struct halo_remote_link_t {
  int fd;
  // Held while a message's bytes are written (and while the outbox's
  // first message is written).
  pthread_mutex_t send_mutex;
  // halo_remote_link_limit_sends's limit on one message's send (0: none).
  int64_t send_limit_ns;
  halo_remote_link_hung_fn hung_fn;
  void *hung_user_data;
  // The outbox (halo_remote_link_post), under |outbox_mutex|. Entries are
  // appended under it alone; the first is written, and removed, by the
  // holder of |send_mutex| (taken first). |failed|: the link was shut down
  // (a send failed, the peer hung): posts fail, and the outbox is emptied
  // (its descriptors closed) by the next holder of |send_mutex|.
  pthread_mutex_t outbox_mutex;
  pthread_cond_t outbox_cond;  // the writer's: an entry, or the end
  halo_remote_outbox_entry_t *outbox_head;
  halo_remote_outbox_entry_t *outbox_tail;
  size_t outbox_bytes;
  uint32_t outbox_fds;
  size_t outbox_limit_bytes;
  uint32_t outbox_limit_fds;
  // When the peer last took bytes of the outbox, or the outbox last became
  // non-empty (CLOCK_MONOTONIC).
  int64_t outbox_progress_ns;
  bool failed;
  bool writer_running;   // the writer thread works or waits for work
  bool writer_joinable;  // |writer| was started and not joined yet
  bool stopping;         // halo_remote_link_deinitialize: the writer ends
  pthread_t writer;
  // Receiving side (one thread): bytes read ahead, so that messages that
  // arrived together are taken with one read, and descriptors received
  // but not yet handed to their message (REGISTER_HOST, RING_FLIGHT,
  // RING_ATTACH, RING_DOORBELL; in order).
  uint8_t *in;
  size_t in_start;
  size_t in_end;
  int fds[HALO_REMOTE_LINK_MAX_FDS];
  uint32_t fd_count;
  // Messages counted in shared memory (halo_remote_link_send_counted,
  // halo_remote_link_count_receives); NULL: not counted.
  // The send side's count: set under both |send_mutex| and |outbox_mutex|,
  // read under either.
  _Atomic uint64_t *sent;
  const _Atomic uint64_t *peer_sent;  // the receiving side's view of it
  uint64_t received;                  // messages taken since counting began
  uint32_t looks;  // halo_remote_link_readable calls since its last poll
} halo_remote_link_t;

void halo_remote_link_initialize(halo_remote_link_t *link, int fd);
// Closes the socket (and descriptors received but never claimed); the
// outbox's writer ends (the socket is shut down first, so that it waits
// for nothing) and what the outbox holds is dropped, its descriptors
// closed. No other thread may send or post any more.
void halo_remote_link_deinitialize(halo_remote_link_t *link);

// Bounds how long one message's send may wait for the peer to read
// (SO_SNDTIMEO on each write, and the whole message's time across partial
// writes): past |timeout_ns| it fails with DEADLINE_EXCEEDED. Before any
// send, on the thread that made the link. Without it a send to a
// peer that stopped reading (stopped, or hung in a driver call) waits until
// the peer reads or dies, holding the send mutex, so every later send of
// the process waits too.
halo_status_t halo_remote_link_limit_sends(halo_remote_link_t *link,
                                           int64_t timeout_ns);

// What the link does when its peer counts as hung (a send, or the outbox's
// writer, found it read nothing within the send limit; or the outbox
// passed its bound): |hung| is called once, after the link was shut down
// (the device's proxy kills its worker). Before any send, as above.
void halo_remote_link_on_hung(halo_remote_link_t *link,
                              halo_remote_link_hung_fn hung, void *user_data);
// Bounds the outbox (default HALO_REMOTE_OUTBOX_BYTES and
// HALO_REMOTE_OUTBOX_FDS): a post that would queue more bytes, or more
// descriptors, fails with RESOURCE_EXHAUSTED and the peer counts as hung,
// unless the link has a send limit (halo_remote_link_limit_sends) and the
// peer took some of the outbox within it: a peer that reads, however
// slowly, is hung only past HALO_REMOTE_OUTBOX_HARD times the bound.
// Before any send, as above.
void halo_remote_link_limit_outbox(halo_remote_link_t *link, size_t bytes,
                                   uint32_t fds);

// Sends one message: |parts| byte ranges back to back as the payload, and
// |fd| (>= 0, still the caller's) attached, after what the outbox holds
// (each of those messages bounded as this one). Any thread. UNAVAILABLE
// when the peer is gone. DEADLINE_EXCEEDED when the socket has a send time
// limit (halo_remote_link_limit_sends) and the peer read nothing for that
// long: the link is then shut down (a peer that stopped reading is hung),
// so that no later send waits for it again; the caller handles the hang
// (halo_remote_link_on_hung is for posts).
typedef struct halo_remote_part_t {
  const void *data;
  size_t size;
} halo_remote_part_t;
halo_status_t halo_remote_link_send(halo_remote_link_t *link, uint32_t type,
                                    uint64_t id,
                                    const halo_remote_part_t *parts,
                                    uint32_t part_count, int fd);

// Shuts the link down, as a failed send that left a partial message does:
// later sends and posts fail, the outbox is dropped, and the peer's
// receive sees the end. For a sender that cannot go on without a message
// the peer never got. Any thread.
void halo_remote_link_shut_down(halo_remote_link_t *link);

// Posts one message (as halo_remote_link_send's arguments): it goes after
// every message sent or posted before, without waiting for the peer or for
// another thread's send. Written at once where the send lock is free, the
// outbox empty and the socket has room; else the rest is copied (|fd|
// duplicated) into the outbox, which a writer thread of the link's (started
// as needed, ending after HALO_REMOTE_OUTBOX_IDLE_NS idle) or the next
// send writes, each message bounded by the send limit as a send's (past
// it: the link is shut down, and halo_remote_link_on_hung's callback
// runs). Any thread. UNAVAILABLE once the link was shut down (the peer
// is gone or hung; what the outbox held is dropped then);
// RESOURCE_EXHAUSTED past the outbox's bound (the peer counts as hung) or
// out of memory.
halo_status_t halo_remote_link_post(halo_remote_link_t *link, uint32_t type,
                                    uint64_t id,
                                    const halo_remote_part_t *parts,
                                    uint32_t part_count, int fd);
// The messages and bytes the outbox holds now. Any thread.
void halo_remote_link_outbox_size(halo_remote_link_t *link,
                                  uint32_t *out_messages, size_t *out_bytes);

// Waits until a message can be read: polls for |spin_ns| first (without
// sleeping: a message that follows the last one closely is taken at once,
// as the submission ring's and the CUDA submission thread's windows do),
// then sleeps in poll(2) for at most |timeout_ms| (-1: no limit). Returns
// whether the link is readable (or closed: the receive then says so).
bool halo_remote_link_wait(halo_remote_link_t *link, int64_t spin_ns,
                           int timeout_ms);

// Counting messages in shared memory, so that a receiver busy with other
// work learns of a message by a load, not a system call (the device
// worker's ring loop looks once per round). The sender counts each message
// in |*counter| (seq_cst) before its first byte goes, or as it is queued
// in the outbox: a message is counted before anything the sender does
// after sending or posting it (a reply to a client that follows a REVOKE
// is seen after the REVOKE's count), though its bytes may come later (the
// receiver waits for them: halo_remote_link_counted_ahead). A send that
// fails before its first byte takes its count back; one that fails after
// it shuts the link down (a partial message cannot be framed), as does a
// queued message that cannot be sent.
// halo_remote_link_send_counted sends one message and counts it and every
// later one, under one hold of the send mutex (no other message falls
// between the start of counting and it); halo_remote_link_stop_counting
// stops (before the counter's memory goes). Any thread.
halo_status_t halo_remote_link_send_counted(halo_remote_link_t *link,
                                            _Atomic uint64_t *counter,
                                            uint32_t type, uint64_t id,
                                            const halo_remote_part_t *parts,
                                            uint32_t part_count, int fd);
void halo_remote_link_stop_counting(halo_remote_link_t *link);
// The receiving side: |counter| is the peer's count and |received| the
// messages of it taken so far (the one that carried the counter included).
// The receiving thread only.
void halo_remote_link_count_receives(halo_remote_link_t *link,
                                     const _Atomic uint64_t *counter,
                                     uint64_t received);
// Whether a message can be read now, without waiting: bytes read ahead,
// else poll(2); counted, a look that finds the peer's count equal to the
// messages taken returns false without a system call, except every
// HALO_REMOTE_LINK_POLL_EVERY-th (so that a peer that closed the link is
// seen by a receiver that never sleeps). A count ahead is confirmed by the
// poll. The receiving thread only.
#define HALO_REMOTE_LINK_POLL_EVERY 1024u
bool halo_remote_link_readable(halo_remote_link_t *link);
// The peer's count now (0: not counted). The receiving thread only.
uint64_t halo_remote_link_counted(const halo_remote_link_t *link);
// Whether the peer counted messages this side has not taken yet, up to
// |counted| (an earlier halo_remote_link_counted; a count the peer took
// back since is not waited for): their bytes are on their way (being
// written, or in the peer's outbox), and the caller waits for them with
// halo_remote_link_wait before it acts on what the peer did after. The
// receiving thread only.
bool halo_remote_link_counted_ahead(const halo_remote_link_t *link,
                                    uint64_t counted);
// The next halo_remote_link_readable polls the socket (the caller saw it
// readable or closed, e.g. in a poll(2) of its own).
void halo_remote_link_poll_next(halo_remote_link_t *link);

// Receives one message; |out_payload| is malloc'd (NULL when empty) and
// |out_fd| receives the descriptor a REGISTER_HOST, RING_FLIGHT, RING_ATTACH
// or RING_DOORBELL message carries, else -1.
// UNAVAILABLE at the end of the stream (the peer closed or died). The receiving
// thread only.
halo_status_t halo_remote_link_receive(halo_remote_link_t *link,
                                       halo_remote_header_t *out_header,
                                       void **out_payload, int *out_fd);

#endif  // HALO_HAL_REMOTE_REMOTE_LINK_H_
