// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo internals shared by client.c and the object files (buffer.c,
// semaphore.c, executable.c, command_buffer.c, queue.c).
#ifndef HALO_CLIENT_CLIENT_H_
#define HALO_CLIENT_CLIENT_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/ring.h"
#include "common/timeline.h"
#include "common/u64_map.h"
#include "common/wire.h"
#include "halo/halo.h"

// A memfd mapping shared by the objects on it (semaphore page or arena).
typedef struct halo_mapping_t {
  void *pointer;
  uint64_t size;
  uint32_t references;
} halo_mapping_t;

// The kinds of objects a client tracks; each has a *_release_link below.
typedef enum halo_object_kind_e {
  HALO_OBJECT_BUFFER = 0,
  HALO_OBJECT_SEMAPHORE = 1,
  HALO_OBJECT_EXECUTABLE = 2,
  HALO_OBJECT_COMMAND_BUFFER = 3,
  HALO_OBJECT_QUEUE = 4,
} halo_object_kind_t;

// Objects the client still holds (released by halo_client_close).
typedef struct halo_object_link_t {
  struct halo_object_link_t *prev;
  struct halo_object_link_t *next;
  halo_object_kind_t kind;
} halo_object_link_t;

// The producer end of the session's submission ring (common/ring.h).
typedef struct halo_client_ring_t {
  pthread_mutex_t mutex;       // one producer at a time
  halo_ring_header_t *header;  // NULL: no ring, the socket carries all
  uint8_t *records;
  uint64_t map_size;
  // Read from the header once, at open (the header is shared memory).
  uint32_t capacity;                 // record bytes, a power of two
  uint8_t key[HALO_RING_KEY_BYTES];  // of the records' checksums
  int doorbell;                      // eventfd
  uint64_t tail;      // bytes published (ours; the header's is a copy)
  uint64_t sequence;  // of the next record
  // $HALO_RING_ASYNC=1: queue_execute does not wait for the daemon's
  // verdict (rejections fail the signal semaphores instead).
  bool async;
  // Each record is built and sealed here, then copied into the ring.
  _Alignas(16) uint8_t scratch[HALO_RING_MAX_RECORD_BYTES];
} halo_client_ring_t;

#define HALO_CLIENT_ADDRESS_BYTES 512

struct halo_client_s {
  // The process that connected the client (getpid() at connect). A child
  // it forks holds a copy of the client, whose connection, fd channel and
  // submission ring are still this process's session: there every call
  // fails (halo_client_check_process) and close is local.
  pid_t pid;
  nng_socket socket;
  bool socket_closed;  // by a dial that timed out
  nng_ctx ctx;
  nng_aio *aio;
  pthread_mutex_t call_mutex;  // one request at a time on |ctx|
  int request_timeout_ms;      // each call's; refusals for now retry within it
  _Atomic bool lost;           // the connection to halod is gone
  uint64_t session_id;
  uint8_t token[16];
  uint64_t incarnation;
  // The largest message halod accepts (its max-message-bytes, from Hello;
  // 0 until then): a larger one makes nng drop the connection, and with it
  // the session, so halo_client_call refuses to send it.
  uint64_t max_message_bytes;
  char address[HALO_CLIENT_ADDRESS_BYTES];
  // The fd channel and the daemon's liveness. Under |fd_mutex|: the
  // channel (-1 after a request on it failed or timed out: the next request
  // connects a new one, to |fd_channel_path|, the path connect reached).
  pthread_mutex_t fd_mutex;
  int fd_channel;
  char fd_channel_path[HALO_CLIENT_ADDRESS_BYTES + 4];  // + ".fd"
  int32_t daemon_pid;
  int daemon_pidfd;
  // Mappings and live objects, under |state_mutex|. Held only for short
  // sections that wait for nothing (never across a request): fork() takes
  // it in every live client (client.c), so that a forked child, whose
  // releases take it, finds it free and the state whole.
  pthread_mutex_t state_mutex;
  halo_u64_map_t pages;        // page id -> halo_mapping_t
  halo_u64_map_t arenas;       // arena id -> halo_mapping_t
  halo_object_link_t objects;  // sentinel
  halo_client_ring_t ring;
  // In client.c's registry of live clients, whose |state_mutex| a fork()
  // takes and gives back (so that a forked child finds it free).
  struct halo_client_s *registry_prev;
  struct halo_client_s *registry_next;
};

// Opens the session's submission ring unless $HALO_RING is "0" (or the
// daemon has none): afterwards queue_execute and semaphore signals go
// through it. Failing to get one is not an error: the socket serves.
void halo_client_ring_open(halo_client_t *client);
void halo_client_ring_close(halo_client_t *client);
// Whether the ring carries records now (open and not broken).
bool halo_client_ring_usable(halo_client_t *client);
// Waits until the daemon consumed every published record, so a socket
// request never overtakes a ring record (halo_client_call does this), at
// most until the call's deadline (halo_client_deadline_ns).
halo_status_t halo_client_ring_flush(halo_client_t *client,
                                     int64_t *deadline_ns);
// What the drain waits for, as a DEADLINE_EXCEEDED names it (where the
// drain used up the call's timeout).
#define HALO_CLIENT_WAIT_RING_DRAIN                                       \
  "halod to take the records in the submission ring, which a request on " \
  "the socket may not overtake"
// A queue operation as libhalo checked it, before a transport carries it:
// handles and plain values, which the submission ring writes as a record
// (its layout is the same: one copy) and the socket as a protobuf request
// (client/queue.c). Spans are borrowed for the call.
typedef struct halo_client_value_t {
  uint64_t semaphore;  // handle
  uint64_t value;
} halo_client_value_t;

typedef struct halo_client_binding_t {
  uint64_t buffer;  // handle; 0: the slot is unbound
  uint64_t offset;
  uint64_t length;  // HALO_WHOLE_BUFFER: to the end
} halo_client_binding_t;

// |values|: the waits, then the signals.
typedef struct halo_client_sync_t {
  const halo_client_value_t *values;
  size_t wait_count;
  size_t signal_count;
} halo_client_sync_t;

typedef struct halo_client_execute_t {
  uint64_t queue;  // 0: the command buffer's device's default queue
  uint64_t command_buffer;
  const halo_client_binding_t *bindings;
  size_t binding_count;
  halo_client_sync_t sync;
} halo_client_execute_t;

typedef struct halo_client_alloca_t {
  uint64_t queue;
  uint64_t size;
  uint32_t memory_type;  // halo_memory_type_t
  halo_client_sync_t sync;
} halo_client_alloca_t;

typedef struct halo_client_dealloca_t {
  uint64_t queue;
  uint64_t buffer;
  halo_client_sync_t sync;
} halo_client_dealloca_t;

// Appends an EXECUTE record (waits for space: backpressure). *out_used is
// false when the ring cannot take it (none, broken, record too long): the
// caller sends the request over the socket instead.
halo_status_t halo_client_ring_execute(halo_client_t *client,
                                       const halo_client_execute_t *execute,
                                       bool *out_used);
// Appends an ALLOCA record, waits for the daemon's verdict (always: the
// call returns the new handle) and copies the new buffer's handle,
// submission and placement to |out_result|. *out_used as for execute.
halo_status_t halo_client_ring_alloca(halo_client_t *client,
                                      const halo_client_alloca_t *alloca,
                                      halo_ring_alloca_result_t *out_result,
                                      bool *out_used);
// Appends a DEALLOCA record; waits for the verdict unless $HALO_RING_ASYNC
// (then a rejection fails its signals and still drops the handle).
halo_status_t halo_client_ring_dealloca(halo_client_t *client,
                                        const halo_client_dealloca_t *dealloca,
                                        bool *out_used);
// Appends a SIGNAL record and waits until the daemon processed it,
// returning its status (as the socket's reply would).
halo_status_t halo_client_ring_signal(halo_client_t *client, uint64_t handle,
                                      uint64_t value, bool *out_used);

// The end (CLOCK_MONOTONIC) of a call's request timeout: *|deadline_ns|,
// or, while that is 0, now plus the client's request timeout, which is
// stored there. A call takes its deadline when it first waits for halod
// (for room or a verdict in the ring, for the ring to drain, for its reply,
// for another thread's call to end) and every later wait of the call ends
// there too: halo.h's request timeout bounds the whole call.
int64_t halo_client_deadline_ns(const halo_client_t *client,
                                int64_t *deadline_ns);
// Locks |mutex| (the ring's, the socket's: held by a thread waiting for
// halod) unless the call's deadline passes first; false then.
bool halo_client_lock_until(const halo_client_t *client, pthread_mutex_t *mutex,
                            int64_t *deadline_ns);
// DEADLINE_EXCEEDED: halod did not answer within the request timeout while
// the call waited for |what|.
halo_status_t halo_client_deadline_status(const halo_client_t *client,
                                          const char *what);

// Whether this process was forked (fork(2) without exec) after libhalo
// used nng in its parent or an ancestor: every client here, |client|
// included, is then a copy of one of theirs (client.c says how this is
// told without a system call).
bool halo_client_inherited(const halo_client_t *client);
// NULL in the process that connected |client|; in a forked child
// (halo_client_inherited), FAILED_PRECONDITION naming the process that
// connected it and what to do instead. Every entry point that reaches halod
// (the socket, the fd channel, the submission ring) or the session's shared
// memory calls it before anything else: the parent's session must never
// see the child, and nng aborts the child at its first use.
halo_status_t halo_client_check_process(const halo_client_t *client);

// UNAVAILABLE: the connection to halod is lost (|lost|); reconnect.
halo_status_t halo_client_lost_status(const halo_client_t *client);

// Whether halod has exited: its pidfd is readable (a poll, a system call;
// false where the client has no pidfd of it).
bool halo_client_daemon_exited(const halo_client_t *client);

// What a message takes besides its packed request: nng's header (req0's
// 4-byte request id, which halod's max-message-bytes counts too), with room
// to spare.
#define HALO_CLIENT_MESSAGE_HEADER_BYTES 16
// What a BufferWrite request takes besides its data: the Request's tag and
// length, the handle, the offset and the data's tag and length (each
// varint at most 10 bytes), and the message header.
#define HALO_CLIENT_WRITE_FRAMING_BYTES (48 + HALO_CLIENT_MESSAGE_HEADER_BYTES)

// halod's max-message-bytes from Hello (HALO_WIRE_MAX_MESSAGE_BYTES, its
// default, before the reply).
uint64_t halo_client_max_message_bytes(const halo_client_t *client);

// The most data one BufferWrite carries: HALO_WIRE_MAX_CHUNK_BYTES, less
// where halod's max-message-bytes leaves less room (with the framing).
uint64_t halo_client_write_chunk_bytes(const halo_client_t *client);

// One request/response round trip (thread-safe). Frees nothing of
// |request|; the caller frees |*out_response|. A request that would not fit
// in a message halod accepts (max_message_bytes) is not sent:
// RESOURCE_EXHAUSTED naming the request, its size, the limit and halod's
// setting max-message-bytes, and the session goes on.
halo_status_t halo_client_call(halo_client_t *client,
                               const halo_wire_request_t *request,
                               halo_wire_response_t **out_response);
// The same, the reply awaited until |limit_ns| at most (CLOCK_MONOTONIC; 0:
// the request timeout alone), for a caller with a timeout of its own.
halo_status_t halo_client_call_until(halo_client_t *client,
                                     const halo_wire_request_t *request,
                                     int64_t limit_ns,
                                     halo_wire_response_t **out_response);

// Sends an export request (body set by the caller) and copies the token.
halo_status_t halo_client_export(halo_client_t *client,
                                 const halo_wire_request_t *request,
                                 halo_token_t *out_token);

// Same, for requests whose reply has no body.
halo_status_t halo_client_call_status(halo_client_t *client,
                                      const halo_wire_request_t *request);

// Maps (or reuses) page |page_id| read-only / arena |arena_id| read-write
// through the fd channel, counting a reference.
halo_status_t halo_client_map_page(halo_client_t *client, uint64_t page_id,
                                   void **out_pointer);
void halo_client_unmap_page(halo_client_t *client, uint64_t page_id);
halo_status_t halo_client_map_arena(halo_client_t *client, uint64_t arena_id,
                                    uint64_t arena_size, void **out_pointer);
void halo_client_unmap_arena(halo_client_t *client, uint64_t arena_id);

void halo_client_track(halo_client_t *client, halo_object_link_t *link,
                       halo_object_kind_t kind);
void halo_client_untrack(halo_client_t *client, halo_object_link_t *link);

// Release helpers for halo_client_close, one per halo_object_kind_t. Once
// the client is closing (|lost| set) their release requests fail fast and
// only the local state is freed.
void halo_buffer_release_link(halo_object_link_t *link);
void halo_semaphore_release_link(halo_object_link_t *link);
void halo_executable_release_link(halo_object_link_t *link);
void halo_command_buffer_release_link(halo_object_link_t *link);
void halo_queue_release_link(halo_object_link_t *link);

// The client an object belongs to (record and execute refuse objects of
// another client: their handles mean nothing in this session).
halo_client_t *halo_buffer_client(const halo_buffer_t *buffer);
halo_client_t *halo_semaphore_client(const halo_semaphore_t *semaphore);
// The semaphore's slot in this client's read-only mapping of its page (the
// value, the failure and the futex word its sleepers wait on).
const halo_timeline_slot_t *halo_semaphore_slot(
    const halo_semaphore_t *semaphore);
halo_client_t *halo_executable_client(const halo_executable_t *executable);
uint64_t halo_executable_handle(const halo_executable_t *executable);
uint32_t halo_executable_device(const halo_executable_t *executable);

// Builds a buffer from |reply| (BufferCreate, BufferImport, QueueAlloca),
// mapping its arena if it is host-visible; on failure the daemon's handle
// is given back.
halo_status_t halo_buffer_from_buffer_reply(
    halo_client_t *client, const Halo__Wire__BufferReply *reply,
    halo_buffer_t **out_buffer);
// NOT_FOUND, naming the handle, once halo_queue_dealloca took the buffer.
halo_status_t halo_buffer_check_live(const halo_buffer_t *buffer);
// halo_queue_dealloca took the daemon's handle: later uses fail with
// NOT_FOUND and the release is local only.
void halo_buffer_set_deallocated(halo_buffer_t *buffer);

// What queue.c needs of an ended command buffer.
typedef struct halo_command_buffer_info_t {
  halo_client_t *client;
  uint32_t device;
  uint64_t handle;
  uint32_t binding_capacity;
} halo_command_buffer_info_t;

// Fills |out_info|; FAILED_PRECONDITION if |command_buffer| was not ended
// successfully (still recording, or its end() failed).
halo_status_t halo_command_buffer_query_ended(
    const halo_command_buffer_t *command_buffer,
    halo_command_buffer_info_t *out_info);

#define HALO_CHECK_ARG(cond, ...)                                         \
  do {                                                                    \
    if (!(cond))                                                          \
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT, __VA_ARGS__); \
  } while (0)

#endif  // HALO_CLIENT_CLIENT_H_
