// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The device worker's consumer of the sessions' submission rings
// (common/ring.h) that the supervisor delegates to it over the link
// (hal/remote/remote_link.h, "rings"): it takes the EXECUTE records whose
// every handle is granted and whose every check passes, runs them on the
// worker's device, and bounces every other record to the supervisor.
// Worker-internal (hal/remote/remote_server.c is its one user).
//
// Threads: the worker's main thread (the link's receiving thread) runs
// halo_remote_rings_on_message, _snapshot, _drain and _sleep: it alone
// reads the rings and changes the session and grant tables. The driver's
// threads run the completions of the executions taken: each queues its
// execution's RING_COMPLETE, then the RING_RELEASED of the revoked grants
// whose last use it held, as the main thread queues the RING_RELEASED of
// grants it revokes while no execution uses them. The rings' reporter
// thread sends what is queued, in order, whatever has queued up together in
// one message per run of a type, and sleeps while nothing is queued (the
// first report queued wakes it). One mutex guards what these threads
// share: the grants' use counts and revoked flags, the sessions' in-flight
// counts, the flight table's free list and the reporter's queue.
#ifndef HALO_HAL_REMOTE_REMOTE_RING_H_
#define HALO_HAL_REMOTE_REMOTE_RING_H_

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/u64_map.h"
#include "hal/remote/remote_link.h"
#include "halo/status.h"

// A host page the supervisor registered (REGISTER_HOST), as the worker
// mapped it: the server's |registrations| hold these.
typedef struct halo_remote_mapping_t {
  void *pointer;
  uint64_t size;
} halo_remote_mapping_t;

// The server's state the ring consumer resolves grants through. The maps
// are read under |mutex| (the server's tables mutex).
typedef struct halo_remote_ring_tables_t {
  halo_remote_link_t *link;
  pthread_mutex_t *mutex;
  const halo_u64_map_t *command_buffers;  // id -> halo_hal_command_buffer_t
  const halo_u64_map_t *queues;           // id -> halo_hal_queue_t
  const halo_u64_map_t *registrations;    // key -> halo_remote_mapping_t
  // How long a completion nothing in the supervisor waits for may wait to
  // be reported with others (0: at once).
  int64_t report_linger_ns;
  // The device stores each signal that has a device address into its slot
  // itself (CUDA); otherwise the supervisor's host path stores the values,
  // and every completion is reported at once.
  bool device_stores_signals;
} halo_remote_ring_tables_t;

typedef struct halo_remote_rings_t halo_remote_rings_t;

// Main thread, once. Initializes the ring library (checksums) and starts the
// reporter thread. The rings live as long as the worker process (no
// teardown: executions may be in flight when the link closes).
halo_status_t halo_remote_rings_create(const halo_remote_ring_tables_t *tables,
                                       halo_remote_rings_t **out_rings);

// Main thread: handles a RING_* message (|*inout_fd| is taken where the
// message carries one: set to -1). Returns false for any other type.
bool halo_remote_rings_on_message(halo_remote_rings_t *rings,
                                  const halo_remote_header_t *header,
                                  const void *payload, int *inout_fd);

// Main thread: notes each attached, unbounced ring's tail (acquire). Call
// before taking the link messages readable now, then drain: a record
// published after a reply of the supervisor is then processed only after
// every message the supervisor sent before that reply.
void halo_remote_rings_snapshot(halo_remote_rings_t *rings);

// Main thread: processes the records of each ring up to its snapshot tail
// (at most 16 per ring: busy sessions share the worker fairly). Returns
// whether any record was consumed, taken or bounced.
bool halo_remote_rings_drain(halo_remote_rings_t *rings);

// Main thread, idle: asks each attached, unbounced ring for its doorbell
// (HALO_RING_FLAG_NEED_WAKEUP, full fence, the tail read once more, as
// halod's loop does) and sleeps in poll(2) on |link_fd| and every
// doorbell, unless a ring has records already. On waking it drains the
// doorbells and clears the flags. Returns whether the link had an event
// (readable, or closed).
bool halo_remote_rings_sleep(halo_remote_rings_t *rings, int link_fd);

#endif  // HALO_HAL_REMOTE_REMOTE_RING_H_
