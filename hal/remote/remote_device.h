// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A device served by a worker process (docs/architecture.md "Device workers"):
// the supervisor's view of one (device, trust domain). It implements the HAL
// device interface by forwarding every call over a link (remote_link.h) to
// a `halod --worker` process that owns the real device (a CUDA context, or
// the local driver running the domain's native kernels). A fault in the
// worker (a sticky CUDA error, a native kernel's segfault, SIGKILL, OOM)
// ends only that process: the proxy reports the loss, fails what was in
// flight and refuses further work, and the supervisor starts a new worker.
//
// Semaphore pages and arenas reach the worker as memfds (register_host's
// |fd|): GPU stores land in the same pages, and the worker wakes a slot's
// futex sleepers itself when its store has landed.
//
// Watchdog: an execution still in flight |deadline_ns| after it was issued
// gets its worker killed; it fails with DEADLINE_EXCEEDED, the others in
// flight with DEVICE_LOST.
//
// Hung workers: the hang bound (options' |hang_ns|, halod's worker-hang-ms,
// 20 s by default) bounds the worker's silence; a control call and a send
// get it or 30 s, whichever is longer (an executable's creation gets 300 s:
// compiles; a live worker may answer late behind a long kernel). The worker
// sends something at least once a second whatever its other threads do (its
// liveness message ALIVE, or USAGE; remote_link.h), so a worker the reader
// has heard nothing from for the bound, or that stopped that long halfway
// through a message, is stopped (SIGSTOP, a frozen cgroup): it is killed as
// hung, idle or not, and lost as one that crashed (its executions fail with
// DEVICE_LOST naming why). A reader that was held up itself with its workers
// (the whole service frozen) counts the silence afresh. The reader, idle,
// wakes every 250 ms to look; with messages flowing it does not. Messages
// without a reply (an execution, a destroy or deallocation, the ring's
// messages) are posted: they never wait for the worker, so the daemon's
// loop can send them (remote_link.h). A worker that reads none of them
// within a call's bound, or leaves the link's outbox full, is killed as
// hung, as one that does not answer a control call.
//
// The worker's usage reports (USAGE: its driver's graph memory and bound)
// are kept as they come: the device's query_usage answers the last one,
// without asking the worker, and false before the first (or for a worker
// whose driver reports none).
//
// Thread-safety: as the HAL interfaces say (devices thread-safe). Each
// proxy runs one reader thread for the link, which calls completions, the
// lost callback and, after a loss, waits for the last reference to go; its
// link runs a writer thread while its outbox holds messages.
#ifndef HALO_HAL_REMOTE_REMOTE_DEVICE_H_
#define HALO_HAL_REMOTE_REMOTE_DEVICE_H_

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "hal/device.h"
#include "halo/status.h"

// The worker was lost (its reader thread). The callee gets a reference to
// |device| (it releases it with the device's destroy) and must eventually
// call halo_hal_remote_device_complete_lost (on any thread; the daemon does
// it on its loop after naming the work in flight).
typedef void (*halo_hal_remote_lost_fn)(void *user_data,
                                        halo_hal_device_t *device);

// A ring message from the worker (RING_BOUNCE, RING_COMPLETE,
// RING_RELEASED, RING_REFUSED; hal/remote/remote_link.h), on the proxy's reader
// thread, in the order the worker sent them. The callee takes |payload|
// (malloc'd; NULL when |length| is 0).
typedef void (*halo_hal_remote_ring_fn)(void *user_data,
                                        halo_hal_device_t *device,
                                        uint32_t type, void *payload,
                                        uint64_t length);

// The hang bound where the options give none: below libhalo's default
// request timeout (30 s), so that a client whose request waits on a hung
// worker hears DEVICE_LOST naming the worker, not its own timeout.
#define HALO_REMOTE_DEFAULT_HANG_NS (20ll * 1000000000ll)

typedef struct halo_hal_remote_options_t {
  // The program to run (halod) and its command line, NULL-terminated. The
  // link's socket is passed as descriptor 3.
  const char *program;
  const char *const *argv;
  // Names the device and domain in messages: "device 0, trust domain uid:7".
  const char *label;
  int64_t deadline_ns;  // 0: no watchdog
  // The hang bound: the longest the worker may send nothing; a control
  // call (but an executable's creation) and a send to the worker get it or
  // 30 s, whichever is longer (0: HALO_REMOTE_DEFAULT_HANG_NS).
  int64_t hang_ns;
  // The worker's bound of one CUDA C compile (halod's
  // cuda-compile-deadline-ms): an executable's creation gets it and 60 s
  // more, at least HALO_REMOTE_COMPILE_TIMEOUT_NS (0: that).
  int64_t compile_ns;
  int64_t start_timeout_ns;  // 0: 30 s
  // After each message from the worker, how long the reader polls for the
  // next before it sleeps (completions that follow closely are taken at
  // once); the worker gets its own window on its command line.
  int64_t poll_ns;
  halo_hal_remote_lost_fn lost;  // NULL: in-flight work completes at once
  void *lost_user_data;
  halo_hal_remote_ring_fn ring;  // NULL: ring messages are dropped
  void *ring_user_data;
} halo_hal_remote_options_t;

// Starts the worker and returns at once; its reader thread takes the
// worker's first message (its device, or why it cannot serve). Calls made
// before then are answered once it is up.
halo_status_t halo_hal_remote_device_start(
    const halo_hal_remote_options_t *options, halo_hal_device_t **out_device);
// Waits until the worker reported its device: NULL, or why it never will.
halo_status_t halo_hal_remote_device_wait_ready(halo_hal_device_t *device);
// Whether it did (without waiting) and is not lost.
bool halo_hal_remote_device_is_ready(halo_hal_device_t *device);
// Start + wait_ready: the device's |info| is the worker's device's.
halo_status_t halo_hal_remote_device_create(
    const halo_hal_remote_options_t *options, halo_hal_device_t **out_device);

// Names the device and domain in later messages (a spare worker taken by
// a trust domain).
void halo_hal_remote_device_set_label(halo_hal_device_t *device,
                                      const char *label);

// Whether |device| is a remote one (the functions below take only those).
bool halo_hal_remote_device_is(const halo_hal_device_t *device);

// One more reference (halo_hal_device_t's destroy drops one): the proxy and
// its reader stay until the last one goes.
void halo_hal_remote_device_retain(halo_hal_device_t *device);

// Waits until every remote device of the process has been freed (their
// workers reaped), at most |timeout_ns|; returns how many are left.
uint32_t halo_hal_remote_wait_all(int64_t timeout_ns);

// The worker's pid (0 once reaped).
pid_t halo_hal_remote_device_pid(halo_hal_device_t *device);

// Control calls (requests with a reply) this process made to device workers
// since it started, every worker's (halo_worker_control_calls_total). Any
// thread.
uint64_t halo_hal_remote_control_calls(void);

// Whether the worker was lost, and why (a copy into |out_reason|). A worker
// that hung up its link counts as lost: this waits (at most 3 s) for its
// reader to record why.
bool halo_hal_remote_device_lost(halo_hal_device_t *device, char *out_reason,
                                 size_t capacity);

// Visits the executions still in flight on |device| (after a loss: until
// halo_hal_remote_device_complete_lost): each one's completion |user_data|
// and whether it ran past the deadline. |visit| runs under the device's
// mutex: it must not call into the device.
void halo_hal_remote_device_visit_in_flight(halo_hal_device_t *device,
                                            void (*visit)(void *visit_data,
                                                          void *user_data,
                                                          bool overdue),
                                            void *visit_data);

// How many executions are in flight on |device|: O(1).
uint32_t halo_hal_remote_device_in_flight(halo_hal_device_t *device);

// After a loss: completes every execution still in flight (DEADLINE_EXCEEDED
// for the overdue ones, DEVICE_LOST for the rest), once.
void halo_hal_remote_device_complete_lost(halo_hal_device_t *device);

// ---------------------------------------------------------------- rings
// The session rings a worker drains itself (remote_link.h "rings"): the
// daemon sends the RING_* messages and hears back through options.ring.

// Posts a RING_* message (|fd| >= 0 attached, still the caller's): it
// never waits for the worker (remote_link.h, halo_remote_link_post). Any
// thread. UNAVAILABLE or DEVICE_LOST once the worker is lost.
halo_status_t halo_hal_remote_device_send(halo_hal_device_t *device,
                                          uint32_t type, const void *payload,
                                          size_t length, const void *tail,
                                          size_t tail_length, int fd);

// Detaches |session|'s ring from the worker and waits for its answer
// (RING_DETACH as a call; loop thread): where it stopped reading, the ring's
// |out_head| and |out_sequence| after the last record it took. It takes no
// record after them, so the caller can refuse those. NOT_FOUND if the worker
// never held the ring; UNAVAILABLE or DEVICE_LOST if the worker is lost;
// DEADLINE_EXCEEDED if it did not answer within a control call's time (it
// is then killed as hung).
halo_status_t halo_hal_remote_device_ring_detach(halo_hal_device_t *device,
                                                 uint64_t session,
                                                 uint64_t *out_head,
                                                 uint64_t *out_sequence);

// Where the worker finds |slot|: the key of its registered page and the
// offset in it. False if the page is not registered with this worker (a
// semaphore of another trust domain).
bool halo_hal_remote_device_locate_slot(halo_hal_device_t *device,
                                        const void *slot, uint64_t *out_key,
                                        uint64_t *out_offset);

// Whether |executable| is a remote one (a worker's executable).
bool halo_hal_remote_executable_is(const halo_hal_executable_t *executable);
// The entry |name| of remote |executable| where its proxy knows it already
// (an earlier lookup found it), without a control call; false where a
// lookup would make one. Any thread.
bool halo_hal_remote_executable_known_entry(halo_hal_executable_t *executable,
                                            const char *name,
                                            halo_hal_entry_info_t *out_info);

// The worker's ids of a remote queue and command buffer (0: not remote).
uint64_t halo_hal_remote_queue_id(const halo_hal_queue_t *queue);
uint64_t halo_hal_remote_command_buffer_id(
    const halo_hal_command_buffer_t *command_buffer);

// Visits the ring executions the worker had in flight (its flight table,
// readable after its death): each one's id and entry (remote_link.h). Any
// thread.
struct halo_remote_flight_entry_t;
void halo_hal_remote_device_visit_flight(
    halo_hal_device_t *device,
    void (*visit)(void *visit_data, uint64_t id,
                  const struct halo_remote_flight_entry_t *entry),
    void *visit_data);

// Whether a ring execution issued at |issued_ns| was past the deadline when
// the watchdog fired (its culprit).
bool halo_hal_remote_device_flight_overdue(halo_hal_device_t *device,
                                           int64_t issued_ns);

// Kills the worker (SIGKILL) as a fault: for tests and the operator.
void halo_hal_remote_device_kill(halo_hal_device_t *device);

// The worker side (`halod --worker`): serves |device| over the link on
// descriptor |fd| until the supervisor closes it. Returns the exit status;
// once per process, which ends next without tearing the device down (the
// driver's threads may still be completing work and reporting it).
// After each message, the worker polls |poll_ns| for the next before it
// sleeps (where one of the last two came within that long). Completions of ring
// executions that nothing in the supervisor waits for are held back up to
// |report_linger_ns| and reported together (0: each at once;
// remote_ring.c).
int halo_hal_remote_serve(halo_hal_device_t *device, int fd, int64_t poll_ns,
                          int64_t report_linger_ns);

// The worker side: the device is lost (a sticky CUDA error). Tells the
// supervisor why and ends the process (any thread; does not return).
void halo_hal_remote_serve_lost(const char *message) __attribute__((noreturn));

#endif  // HALO_HAL_REMOTE_REMOTE_DEVICE_H_
