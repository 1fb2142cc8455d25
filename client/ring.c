// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo's end of the submission ring (common/ring.h): a single producer
// (|ring.mutex| serializes the client's threads) that builds each record in
// its private scratch, seals it with the ring's checksum, copies it into
// the ring, publishes it by storing |tail| and rings the doorbell only when
// the daemon asked for it.
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "common/clock.h"
#include "common/fd_channel.h"
#include "common/log.h"
#include "common/status.h"

// Spin this long on the ring (space, consumption) before sleeping.
#define HALO_RING_SPIN_NS 20000
#define HALO_RING_SLEEP_MAX_NS 1000000

halo_status_t halo_client_fd_get(halo_client_t *client, uint32_t kind,
                                 uint64_t id, int *out_fd, uint64_t *out_size);

// Checks the layout of the mapped ring (|size| bytes) and takes the
// capacity and checksum key from its header, once: the header is shared
// memory and is not read for them again.
static halo_status_t halo_ring_adopt_header(halo_client_ring_t *ring,
                                            const halo_ring_header_t *header,
                                            uint64_t size) {
  if (header->magic != HALO_RING_MAGIC) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "not a submission ring (magic %#x)", header->magic);
  }
  if (header->version != HALO_RING_VERSION) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "halod's submission ring has layout version %u, "
                            "this libhalo speaks version %u",
                            header->version, HALO_RING_VERSION);
  }
  uint32_t capacity = header->capacity;
  if (!halo_ring_capacity_valid(capacity) ||
      capacity > size - HALO_RING_HEADER_BYTES) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "ring capacity %u is not a power of two from %u "
                            "to %u within the %llu-byte mapping",
                            capacity, HALO_RING_MIN_CAPACITY,
                            HALO_RING_MAX_CAPACITY, (unsigned long long)size);
  }
  ring->capacity = capacity;
  memcpy(ring->key, header->checksum_key, sizeof(ring->key));
  return NULL;
}

void halo_client_ring_open(halo_client_t *client) {
  halo_client_ring_t *ring = &client->ring;
  const char *env = getenv("HALO_RING");
  if (env && strcmp(env, "0") == 0) return;
  int memfd = -1;
  uint64_t size = 0;
  halo_status_t status =
      halo_client_fd_get(client, HALO_FD_REQUEST_RING, 0, &memfd, &size);
  void *pointer = MAP_FAILED;
  if (!status && size <= HALO_RING_HEADER_BYTES) {
    status = halo_status_make(HALO_STATUS_INTERNAL, "ring of %llu bytes",
                              (unsigned long long)size);
  }
  if (!status) {
    pointer = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (pointer == MAP_FAILED) status = halo_status_from_errno(errno, "mmap");
  }
  if (memfd >= 0) close(memfd);
  if (!status) {
    status = halo_ring_adopt_header(ring, pointer, size);
    if (!status) status = halo_ring_library_initialize();
    if (status) {
      // Another halod or libhalo version: say why the ring is not used.
      HALO_LOG_WARN(
          "libhalo: session %llu: the submission ring is not used, "
          "queue_execute, queue_alloca, queue_dealloca and semaphore "
          "signals go over the socket: %s",
          (unsigned long long)client->session_id, halo_status_message(status));
    }
  }
  if (!status) {
    status = halo_client_fd_get(client, HALO_FD_REQUEST_DOORBELL, 0,
                                &ring->doorbell, NULL);
  }
  if (status) {
    // An older halod, or no descriptors left: the socket serves.
    halo_status_free(status);
    if (pointer != MAP_FAILED) munmap(pointer, size);
    return;
  }
  const char *async = getenv("HALO_RING_ASYNC");
  ring->async = async && strcmp(async, "1") == 0;
  ring->header = pointer;
  ring->records = (uint8_t *)pointer + HALO_RING_HEADER_BYTES;
  ring->map_size = size;
  ring->tail = atomic_load(&ring->header->tail);
}

void halo_client_ring_close(halo_client_t *client) {
  halo_client_ring_t *ring = &client->ring;
  if (ring->header) munmap(ring->header, ring->map_size);
  ring->header = NULL;
  if (ring->doorbell >= 0) close(ring->doorbell);
  ring->doorbell = -1;
}

static bool halo_ring_broken(const halo_client_ring_t *ring) {
  return atomic_load_explicit(&ring->header->flags, memory_order_acquire) &
         HALO_RING_FLAG_BROKEN;
}

bool halo_client_ring_usable(halo_client_t *client) {
  return client->ring.header && !halo_ring_broken(&client->ring);
}

static bool halo_client_daemon_gone(halo_client_t *client) {
  return atomic_load(&client->lost) || halo_client_daemon_exited(client);
}

// Waits until the daemon's head reaches |target| (or the ring breaks):
// spins ~20 us, then sleeps in growing slices, watching the daemon, until
// the call's deadline (DEADLINE_EXCEEDED naming |what|: a stopped or hung
// halod must not hold the call for ever, as it does not over the socket).
static halo_status_t halo_ring_wait_head(halo_client_t *client, uint64_t target,
                                         int64_t *deadline_ns,
                                         const char *what) {
  halo_ring_header_t *header = client->ring.header;
  int64_t start = 0;
  int64_t sleep_ns = 10000;
  for (uint32_t i = 0;; ++i) {
    uint64_t head = atomic_load_explicit(&header->head, memory_order_acquire);
    if (head >= target || halo_ring_broken(&client->ring)) return NULL;
    if ((i & 63) != 63) continue;
    int64_t now = halo_clock_now_ns();
    if (!start) start = now;
    if (now - start < HALO_RING_SPIN_NS) continue;
    if (halo_client_daemon_gone(client)) {
      return halo_status_make(HALO_STATUS_UNAVAILABLE,
                              "halod went away with records in the "
                              "submission ring; reconnect");
    }
    int64_t deadline = halo_client_deadline_ns(client, deadline_ns);
    if (now >= deadline) return halo_client_deadline_status(client, what);
    struct timespec pause = {
        .tv_nsec = deadline - now < sleep_ns ? deadline - now : sleep_ns};
    nanosleep(&pause, NULL);
    if (sleep_ns < HALO_RING_SLEEP_MAX_NS) sleep_ns *= 2;
  }
}

halo_status_t halo_client_ring_flush(halo_client_t *client,
                                     int64_t *deadline_ns) {
  halo_client_ring_t *ring = &client->ring;
  if (!ring->header) return NULL;
  uint64_t tail =
      atomic_load_explicit(&ring->header->tail, memory_order_acquire);
  if (atomic_load_explicit(&ring->header->head, memory_order_acquire) >= tail)
    return NULL;
  return halo_ring_wait_head(client, tail, deadline_ns,
                             HALO_CLIENT_WAIT_RING_DRAIN);
}

// Makes room for a record of |length| bytes (with a PAD record before it
// if it would cross the ring's end) and returns where it goes. Ring mutex
// held.
static halo_status_t halo_ring_reserve(halo_client_t *client, uint32_t length,
                                       int64_t *deadline_ns,
                                       uint8_t **out_record) {
  halo_client_ring_t *ring = &client->ring;
  uint32_t offset = (uint32_t)(ring->tail & (ring->capacity - 1));
  uint32_t contiguous = ring->capacity - offset;
  // At most 2 * HALO_RING_MAX_RECORD_BYTES <= capacity: it always fits.
  uint64_t need = length + (length > contiguous ? contiguous : 0);
  // Backpressure: wait for the daemon to consume enough.
  uint64_t end = ring->tail + need;
  if (end > ring->capacity) {
    HALO_RETURN_IF_ERROR(halo_ring_wait_head(
        client, end - ring->capacity, deadline_ns,
        "room in the submission ring (halod did not take the records "
        "before)"));
  }
  if (length > contiguous) {
    // contiguous < length <= HALO_RING_MAX_RECORD_BYTES fits in 16 bits.
    halo_ring_record_header_t pad = {.type = HALO_RING_RECORD_PAD,
                                     .length = (uint16_t)contiguous,
                                     .sequence = (uint32_t)ring->sequence++};
    halo_ring_record_seal(ring->key, &pad);
    memcpy(ring->records + offset, &pad, sizeof(pad));
    ring->tail += contiguous;
    offset = 0;
  }
  *out_record = ring->records + offset;
  return NULL;
}

// Publishes everything written up to |ring->tail| and rings the doorbell if
// the daemon asked for it. Ring mutex held.
static void halo_ring_publish(halo_client_ring_t *ring) {
  atomic_store_explicit(&ring->header->tail, ring->tail, memory_order_release);
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&ring->header->flags, memory_order_seq_cst) &
      HALO_RING_FLAG_NEED_WAKEUP) {
    uint64_t one = 1;
    ssize_t written = write(ring->doorbell, &one, sizeof(one));
    (void)written;  // EAGAIN: the counter is full, the daemon wakes anyway
  }
}

// Locks the ring mutex and reserves |length| bytes for the next record.
// When the ring takes it, returns NULL with the mutex held and *out_record
// set. Otherwise returns with the mutex unlocked and *out_record NULL: the
// status of a failed wait for room or for the mutex (held by another
// thread waiting for halod), UNAVAILABLE once the connection is lost, or
// NULL when the ring is broken (the caller goes over the socket).
static halo_status_t halo_ring_lock_reserve(halo_client_t *client,
                                            uint32_t length,
                                            int64_t *deadline_ns,
                                            uint8_t **out_record) {
  *out_record = NULL;
  // The ring is the parent's session in a forked child (and the child's
  // copy of |tail| would make the parent's next records overwrite its own):
  // execute, signal, alloca and dealloca all reserve here first.
  HALO_RETURN_IF_ERROR(halo_client_check_process(client));
  // halod is gone (the connection closed): nobody will read the record. A
  // synchronous call would learn it waiting for the verdict, an
  // asynchronous one not at all (until the ring is full).
  if (atomic_load(&client->lost)) return halo_client_lost_status(client);
  halo_client_ring_t *ring = &client->ring;
  if (!halo_client_lock_until(client, &ring->mutex, deadline_ns)) {
    return halo_client_deadline_status(
        client,
        "another thread's call on the submission ring, which waits for halod "
        "to take the records in it or to give its verdict on one");
  }
  uint8_t *record = NULL;
  halo_status_t status = NULL;
  if (!halo_ring_broken(ring)) {
    status = halo_ring_reserve(client, length, deadline_ns, &record);
  }
  if (status || !record || halo_ring_broken(ring)) {
    pthread_mutex_unlock(&ring->mutex);
    return status;
  }
  *out_record = record;
  return NULL;
}

// Seals the record of |length| bytes built in |ring->scratch|, copies it to
// |record| (reserved by halo_ring_lock_reserve) and publishes it. Ring mutex
// held.
static void halo_ring_commit(halo_client_ring_t *ring, uint8_t *record,
                             uint32_t length) {
  halo_ring_record_seal(ring->key, ring->scratch);
  memcpy(record, ring->scratch, length);
  ring->tail += length;
  halo_ring_publish(ring);
}

// libhalo's checked operations (client/client.h) are written as they are.
_Static_assert(sizeof(halo_client_binding_t) == sizeof(halo_ring_binding_t) &&
                   offsetof(halo_client_binding_t, buffer) ==
                       offsetof(halo_ring_binding_t, buffer) &&
                   offsetof(halo_client_binding_t, offset) ==
                       offsetof(halo_ring_binding_t, offset) &&
                   offsetof(halo_client_binding_t, length) ==
                       offsetof(halo_ring_binding_t, length),
               "halo_client_binding_t is not a ring binding");
_Static_assert(sizeof(halo_client_value_t) ==
                       sizeof(halo_ring_semaphore_value_t) &&
                   offsetof(halo_client_value_t, semaphore) ==
                       offsetof(halo_ring_semaphore_value_t, semaphore) &&
                   offsetof(halo_client_value_t, value) ==
                       offsetof(halo_ring_semaphore_value_t, value),
               "halo_client_value_t is not a ring semaphore value");

// Copies |count| elements of |size| bytes to |cursor|; returns the end.
static uint8_t *halo_ring_write(uint8_t *cursor, const void *elements,
                                size_t count, size_t size) {
  if (count) memcpy(cursor, elements, count * size);
  return cursor + count * size;
}

// Waits until the daemon processed record |sequence| (ending at
// |ring->tail|) and returns its verdict. Ring mutex held.
static halo_status_t halo_ring_verdict(halo_client_t *client, uint64_t sequence,
                                       int64_t *deadline_ns) {
  halo_client_ring_t *ring = &client->ring;
  HALO_RETURN_IF_ERROR(halo_ring_wait_head(
      client, ring->tail, deadline_ns,
      "halod's verdict on the call's submission ring record; halod may "
      "still carry it out, as it may a timed-out request"));
  halo_ring_header_t *header = ring->header;
  if (atomic_load_explicit(&header->head, memory_order_acquire) < ring->tail) {
    // Broken before it read the record: a framing error (DATA_LOSS), or
    // halod stopped reading (the code a request would get now).
    int32_t code =
        atomic_load_explicit(&header->error_code, memory_order_relaxed);
    return halo_status_make(
        code == HALO_STATUS_UNAVAILABLE || code == HALO_STATUS_SESSION_LOST
            ? (halo_status_code_t)code
            : HALO_STATUS_DATA_LOSS,
        "%.*s", (int)sizeof(header->error_message), header->error_message);
  }
  if (atomic_load_explicit(&header->error_sequence, memory_order_acquire) !=
      sequence + 1) {
    return NULL;
  }
  // Read once: halod may store another code meanwhile (the session's end).
  int32_t code =
      atomic_load_explicit(&header->error_code, memory_order_relaxed);
  return halo_status_make(
      code > 0 && code < HALO_STATUS_CODE_COUNT ? (halo_status_code_t)code
                                                : HALO_STATUS_UNKNOWN,
      "%.*s", (int)sizeof(header->error_message), header->error_message);
}

halo_status_t halo_client_ring_execute(halo_client_t *client,
                                       const halo_client_execute_t *execute,
                                       bool *out_used) {
  *out_used = false;
  halo_client_ring_t *ring = &client->ring;
  if (!ring->header) return NULL;
  const halo_client_sync_t *sync = &execute->sync;
  uint32_t length = halo_ring_execute_length(
      execute->binding_count, sync->wait_count, sync->signal_count);
  if (length == 0) {
    // Too long for a record: over the socket, after the ring drained.
    return NULL;
  }
  int64_t deadline_ns = 0;
  uint8_t *record;
  halo_status_t status =
      halo_ring_lock_reserve(client, length, &deadline_ns, &record);
  if (!record) return status;
  uint64_t sequence = ring->sequence++;
  halo_ring_record_header_t header = {.type = HALO_RING_RECORD_EXECUTE,
                                      .length = (uint16_t)length,
                                      .sequence = (uint32_t)sequence};
  halo_ring_execute_t body = {
      .queue = execute->queue,
      .command_buffer = execute->command_buffer,
      .binding_count = (uint32_t)execute->binding_count,
      .wait_count = (uint32_t)sync->wait_count,
      .signal_count = (uint32_t)sync->signal_count,
      .flags = ring->async ? HALO_RING_EXECUTE_ASYNC : 0};
  // Built in private memory and sealed there: what the daemon verifies is
  // what this function wrote, whatever else writes into the ring.
  uint8_t *cursor = ring->scratch;
  memcpy(cursor, &header, sizeof(header));
  cursor += sizeof(header);
  memcpy(cursor, &body, sizeof(body));
  cursor += sizeof(body);
  cursor = halo_ring_write(cursor, execute->bindings, execute->binding_count,
                           sizeof(halo_ring_binding_t));
  cursor = halo_ring_write(cursor, sync->values,
                           sync->wait_count + sync->signal_count,
                           sizeof(halo_ring_semaphore_value_t));
  memset(cursor, 0, length - (size_t)(cursor - ring->scratch));
  halo_ring_commit(ring, record, length);
  if (!ring->async) status = halo_ring_verdict(client, sequence, &deadline_ns);
  pthread_mutex_unlock(&ring->mutex);
  *out_used = true;
  return status;
}

halo_status_t halo_client_ring_signal(halo_client_t *client, uint64_t handle,
                                      uint64_t value, bool *out_used) {
  *out_used = false;
  halo_client_ring_t *ring = &client->ring;
  if (!ring->header) return NULL;
  int64_t deadline_ns = 0;
  uint8_t *record;
  halo_status_t status = halo_ring_lock_reserve(client, HALO_RING_SIGNAL_LENGTH,
                                                &deadline_ns, &record);
  if (!record) return status;
  uint64_t sequence = ring->sequence++;
  halo_ring_record_header_t header = {.type = HALO_RING_RECORD_SIGNAL,
                                      .length = HALO_RING_SIGNAL_LENGTH,
                                      .sequence = (uint32_t)sequence};
  halo_ring_semaphore_value_t body = {.semaphore = handle, .value = value};
  memcpy(ring->scratch, &header, sizeof(header));
  memcpy(ring->scratch + sizeof(header), &body, sizeof(body));
  halo_ring_commit(ring, record, HALO_RING_SIGNAL_LENGTH);
  // The signal is synchronous, as over the socket: wait for the daemon to
  // process it and take its verdict from the header.
  status = halo_ring_verdict(client, sequence, &deadline_ns);
  pthread_mutex_unlock(&ring->mutex);
  *out_used = true;
  return status;
}

// Appends a record of |type|: |body| (|body_bytes|, after the record
// header), then the waits and signals. Waits for the daemon's verdict when
// |wait_verdict|, and then copies the record's result to |out_result| if
// not NULL. *out_used is false when the ring cannot take the record (none,
// broken, too long): the caller goes over the socket.
static halo_status_t halo_ring_submit_values(
    halo_client_t *client, uint16_t type, const void *body, uint32_t body_bytes,
    const halo_client_sync_t *sync, bool wait_verdict,
    halo_ring_alloca_result_t *out_result, bool *out_used) {
  *out_used = false;
  halo_client_ring_t *ring = &client->ring;
  if (!ring->header) return NULL;
  uint32_t length =
      halo_ring_values_length(body_bytes, sync->wait_count, sync->signal_count);
  if (length == 0) return NULL;
  int64_t deadline_ns = 0;
  uint8_t *record;
  halo_status_t status =
      halo_ring_lock_reserve(client, length, &deadline_ns, &record);
  if (!record) return status;
  uint64_t sequence = ring->sequence++;
  halo_ring_record_header_t header = {
      .type = type, .length = (uint16_t)length, .sequence = (uint32_t)sequence};
  uint8_t *cursor = ring->scratch;
  memcpy(cursor, &header, sizeof(header));
  cursor += sizeof(header);
  memcpy(cursor, body, body_bytes);
  cursor += body_bytes;
  cursor = halo_ring_write(cursor, sync->values,
                           sync->wait_count + sync->signal_count,
                           sizeof(halo_ring_semaphore_value_t));
  memset(cursor, 0, length - (size_t)(cursor - ring->scratch));
  halo_ring_commit(ring, record, length);
  if (wait_verdict) status = halo_ring_verdict(client, sequence, &deadline_ns);
  if (!status && out_result) {
    // The verdict was OK: the result was stored before |head| passed.
    halo_ring_header_t *shared = ring->header;
    if (atomic_load_explicit(&shared->result_sequence, memory_order_acquire) !=
        sequence + 1) {
      status = halo_status_make(HALO_STATUS_INTERNAL,
                                "halod accepted submission ring record %llu "
                                "but left no result for it",
                                (unsigned long long)sequence);
    } else {
      memcpy(out_result, &shared->alloca_result, sizeof(*out_result));
    }
  }
  pthread_mutex_unlock(&ring->mutex);
  *out_used = true;
  return status;
}

halo_status_t halo_client_ring_alloca(halo_client_t *client,
                                      const halo_client_alloca_t *alloca,
                                      halo_ring_alloca_result_t *out_result,
                                      bool *out_used) {
  halo_ring_alloca_t body = {
      .queue = alloca->queue,
      .size = alloca->size,
      .memory_type = alloca->memory_type,
      .wait_count = (uint32_t)alloca->sync.wait_count,
      .signal_count = (uint32_t)alloca->sync.signal_count};
  // Always synchronous: the call returns the new handle.
  return halo_ring_submit_values(client, HALO_RING_RECORD_ALLOCA, &body,
                                 sizeof(body), &alloca->sync, true, out_result,
                                 out_used);
}

halo_status_t halo_client_ring_dealloca(halo_client_t *client,
                                        const halo_client_dealloca_t *dealloca,
                                        bool *out_used) {
  halo_client_ring_t *ring = &client->ring;
  halo_ring_dealloca_t body = {
      .queue = dealloca->queue,
      .buffer = dealloca->buffer,
      .wait_count = (uint32_t)dealloca->sync.wait_count,
      .signal_count = (uint32_t)dealloca->sync.signal_count,
      .flags = ring->async ? HALO_RING_EXECUTE_ASYNC : 0};
  return halo_ring_submit_values(client, HALO_RING_RECORD_DEALLOCA, &body,
                                 sizeof(body), &dealloca->sync, !ring->async,
                                 NULL, out_used);
}
