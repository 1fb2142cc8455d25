// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Timeline semaphore slots in shared memory: the layout and the protocol
// shared by the daemon (the only writer on the host side) and every client
// (read-only mappings). docs/architecture.md "Shared memory".
//
// Writer (daemon): store value (release), store failure if any, increment
// epoch, FUTEX_WAKE. GPU signals store the value with cuStreamWriteValue64;
// the host completion path then bumps the epoch and wakes sleepers.
// Waiter: read epoch (acquire), then generation / value / failure /
// generation (a seqlock against reuse), decide; only then FUTEX_WAIT(epoch,
// seen). The reverse order loses wake-ups.
//
// Thread-safety: every function is safe from any thread of any process.
#ifndef HALO_COMMON_TIMELINE_H_
#define HALO_COMMON_TIMELINE_H_

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

#define HALO_TIMELINE_PAGE_SIZE 4096u
#define HALO_TIMELINE_PAGE_MAGIC 0x68616c6f74696d65ull  // "halotime"
#define HALO_TIMELINE_MAX_VALUE ((uint64_t)INT64_MAX)

// Why a slot failed, beyond its status code, for a waiter that cannot ask
// the daemon (it is exiting): halo_timeline_slot_t.failure_reason.
typedef enum halo_timeline_failure_reason_e {
  HALO_TIMELINE_FAILURE_UNSPECIFIED = 0,  // ask the daemon for the message
  // The device was lost to a sticky error (its context is unusable) and
  // halod exits for a restart. failure_device: the device's ordinal;
  // failure_detail: the driver's error (CUDA: the CUresult; 0 unknown);
  // failure_count: the submissions in flight on the device (the culprit
  // is among them; the daemon log names them).
  HALO_TIMELINE_FAILURE_DEVICE_LOST = 1,
  // halod is stopping (SIGTERM, SIGINT): every semaphore fails with
  // UNAVAILABLE. No failure_* word is used.
  HALO_TIMELINE_FAILURE_DAEMON_STOPPING = 2,
  // An administrator ended the session that created the semaphore
  // (haloctl kill-client), whose connection closes at once: its own
  // waiters could not ask why. Status ABORTED; failure_detail: the
  // session's client pid.
  HALO_TIMELINE_FAILURE_SESSION_KILLED = 3,
} halo_timeline_failure_reason_t;

// One semaphore: one cache line. The failure_* words were reserved (zero)
// in earlier versions of the layout: readers that do not know them keep
// working, and a zero reason means "unspecified".
typedef struct halo_timeline_slot_t {
  alignas(64) _Atomic uint64_t value;
  _Atomic uint32_t epoch;       // the futex word; bumped on every change
  _Atomic int32_t failure;      // halo_status_code_t; 0 while healthy (sticky)
  _Atomic uint32_t generation;  // bumped when the slot is retired
  // Stored before |failure| (which is set with release ordering) and read
  // after it (acquire); meaningful only while |failure| is set.
  _Atomic uint32_t failure_reason;  // halo_timeline_failure_reason_t
  _Atomic uint32_t failure_device;
  _Atomic int32_t failure_detail;
  _Atomic uint32_t failure_count;
  // 1 while the owner of the semaphore's host state (halod) has timepoints
  // on it (work in its deferred queue waiting for a value): a device worker
  // reports the completion of an execution that signals it at once; otherwise
  // it may hold the report back a while and send it with others (the value
  // itself is in |value| already, stored by the GPU, and sleepers woke).
  // Was reserved (zero) before: a reader that does not know it ignores it.
  _Atomic uint32_t host_waits;
  // The highest value an accepted submission will signal (>= |value|).
  // halod and the domain's device workers (which take executions from
  // submission rings themselves) reserve values here with compare-and-
  // swap, so neither accepts a value the other has already promised.
  _Atomic uint64_t pending;
  uint32_t reserved[4];
} halo_timeline_slot_t;

// The failure_* words of a slot.
typedef struct halo_timeline_failure_info_t {
  uint32_t reason;  // halo_timeline_failure_reason_t
  uint32_t device;
  int32_t detail;
  uint32_t count;
} halo_timeline_failure_info_t;

// First cache line of every page.
typedef struct halo_timeline_page_header_t {
  alignas(64) uint64_t magic;
  uint64_t incarnation;  // the daemon's, so stale pages are recognizable
  uint32_t slot_count;
  uint32_t reserved[11];
} halo_timeline_page_header_t;

#define HALO_TIMELINE_SLOTS_PER_PAGE \
  ((HALO_TIMELINE_PAGE_SIZE - sizeof(halo_timeline_page_header_t)) / 64)

typedef struct halo_timeline_page_t {
  halo_timeline_page_header_t header;
  halo_timeline_slot_t slots[HALO_TIMELINE_SLOTS_PER_PAGE];
} halo_timeline_page_t;

_Static_assert(sizeof(halo_timeline_slot_t) == 64, "slot is a cache line");
_Static_assert(offsetof(halo_timeline_slot_t, pending) % 8 == 0,
               "pending is naturally aligned");
_Static_assert(sizeof(halo_timeline_page_t) <= HALO_TIMELINE_PAGE_SIZE,
               "page fits");

// ---- writer side (daemon)

// Initializes a fresh page.
void halo_timeline_page_initialize(halo_timeline_page_t *page,
                                   uint64_t incarnation);

// Puts |slot| in service with |initial_value| and no failure. Returns the
// generation waiters must see.
uint32_t halo_timeline_slot_activate(halo_timeline_slot_t *slot,
                                     uint64_t initial_value);

// Raises the value to |value| (compare-and-swap: never below a value stored
// meanwhile, as a GPU store is, with a plain write) and then wakes every
// waiter; returns whether it raised it (false: the value was there or
// beyond already, and nobody was woken).
bool halo_timeline_slot_signal(halo_timeline_slot_t *slot, uint64_t value);

// Raises |pending| to |value| if it is below (compare-and-swap); returns
// whether it did, and in |out_previous| (optional) the value it replaced,
// which is what halo_timeline_slot_unreserve restores. halod and device
// workers, any thread.
bool halo_timeline_slot_reserve(halo_timeline_slot_t *slot, uint64_t value,
                                uint64_t *out_previous);
// Undoes a reservation of |value| that raised |pending| from |previous|
// (a submission refused after it reserved), unless |pending| moved on
// since (another reservation stands above it).
void halo_timeline_slot_unreserve(halo_timeline_slot_t *slot, uint64_t value,
                                  uint64_t previous);

// Sets the sticky failure (first failure wins) and wakes every waiter.
// Returns false if the slot had failed already.
bool halo_timeline_slot_fail(halo_timeline_slot_t *slot,
                             halo_status_code_t code);

// Stores why the next failure happens (call just before failing the slot;
// the daemon is the only writer). Does nothing if the slot failed already,
// so the first failure keeps its reason.
void halo_timeline_slot_set_failure_info(
    halo_timeline_slot_t *slot, const halo_timeline_failure_info_t *info);

// Retires the slot: bumps the generation so waiters holding the old one
// return ABORTED, and wakes them.
void halo_timeline_slot_retire(halo_timeline_slot_t *slot);

// Bumps the epoch and wakes sleepers (after a GPU store of the value).
void halo_timeline_slot_notify(halo_timeline_slot_t *slot);

// Sets |host_waits| (halod). Setting it to true is a full fence: a value
// read after it either shows a store, or the storer's device worker sees the
// word.
void halo_timeline_slot_set_host_waits(halo_timeline_slot_t *slot, bool waits);
// Whether halod has timepoints on the slot (a device worker, after it saw
// the value stored: a full fence first, the pair of the setter's).
bool halo_timeline_slot_host_waits(halo_timeline_slot_t *slot);

// ---- waiter side (clients; the daemon for its own checks)

typedef struct halo_timeline_wait_target_t {
  const halo_timeline_slot_t *slot;
  uint32_t generation;  // expected generation
  uint64_t value;       // wait until slot value >= value
} halo_timeline_wait_target_t;

typedef enum halo_timeline_wait_result_e {
  HALO_TIMELINE_WAIT_OK = 0,
  HALO_TIMELINE_WAIT_FAILED,   // a target failed: see out_failure
  HALO_TIMELINE_WAIT_RETIRED,  // a target's slot was retired (destroyed)
  HALO_TIMELINE_WAIT_TIMEOUT,
  HALO_TIMELINE_WAIT_OWNER_DEAD,  // |liveness_fd| (a pidfd) became readable
} halo_timeline_wait_result_t;

// A wait spins (yielding between looks) before it sleeps on the futex: at
// least SPIN_NS, and up to twice what the calling thread's previous wait took
// when that was at most the cap (a thread that waits on GPU work of the same
// length again and again, as an inference loop does, then sees the value land
// while it still spins instead of paying a futex wake-up, as
// cuStreamSynchronize spins); after a longer wait, only SPIN_NS; never more
// than the cap (a cap below SPIN_NS is the window itself). The cap is
// SPIN_MAX_NS, or HALO_WAIT_SPIN_MAX_US in the client's environment (0: never
// spin, sleep at once). A wake-up costs the waking thread too: with 64
// clients on one device worker (16 CPUs, an H200) their steps took 250-450
// us, so with a 200 us cap every client slept every step and the worker's
// completion thread woke each one; with 2 ms, T64 went from 77-107k to
// 191-242k steps/s (docs/performance.md).
#define HALO_TIMELINE_SPIN_NS 20000        // spin at least this before sleeping
#define HALO_TIMELINE_SPIN_MAX_NS 2000000  // ... and at most this (default)
#define HALO_TIMELINE_SPIN_MAX_LIMIT_NS 100000000  // HALO_WAIT_SPIN_MAX_US's
#define HALO_TIMELINE_SLICE_NS 100000000  // sleep at most this, then recheck

// How long a wait spins after a previous wait of the same thread took
// |previous_ns| (0: none yet), with the cap |max_ns|: twice |previous_ns|
// within [SPIN_NS, max_ns] if |previous_ns| <= max_ns, else SPIN_NS; never
// more than |max_ns|.
int64_t halo_timeline_spin_window_ns(int64_t previous_ns, int64_t max_ns);
// The cap of this process: HALO_WAIT_SPIN_MAX_US (microseconds, 0 to
// SPIN_MAX_LIMIT_NS) if set and valid, else SPIN_MAX_NS. Read once.
int64_t halo_timeline_spin_max_ns(void);
// Parses HALO_WAIT_SPIN_MAX_US's |text| into |out_ns|; false (|out_ns|
// untouched) unless it is a decimal number of microseconds within limits.
bool halo_timeline_spin_max_parse(const char *text, int64_t *out_ns);
// halo_timeline_spin_window_ns with this process's cap.
int64_t halo_timeline_spin_ns(int64_t previous_ns);

// Reads one slot consistently: OK (value may be below target), RETIRED, or
// FAILED (failure set and value below |target|).
halo_timeline_wait_result_t halo_timeline_slot_read(
    const halo_timeline_slot_t *slot, uint32_t generation, uint64_t target,
    uint64_t *out_value, int32_t *out_failure);

// The failure's reason words (all zero while healthy or unspecified). Read
// after seeing the failure.
halo_timeline_failure_info_t halo_timeline_slot_failure_info(
    const halo_timeline_slot_t *slot);

// Waits for all (|wait_any| false) or any of |targets| (count <= 128) until
// |deadline_ns| (CLOCK_MONOTONIC). Spins for halo_timeline_spin_ns() of the
// thread's previous wait (one that returned OK), then
// futex-waits in slices of at most HALO_TIMELINE_SLICE_NS, polling
// |liveness_fd| (a pidfd of the daemon, or -1) between slices.
// |out_index|: the target that failed/retired, or with |wait_any| the one
// satisfied. |out_failure|: the failure code for FAILED.
halo_timeline_wait_result_t halo_timeline_wait(
    const halo_timeline_wait_target_t *targets, size_t count, bool wait_any,
    int64_t deadline_ns, int liveness_fd, size_t *out_index,
    int32_t *out_failure);
// The same, polling each of |liveness_fds| (|liveness_count| of them, at
// most 128; -1 entries are skipped) between slices: the daemons of
// semaphores of several clients. OWNER_DEAD where any is readable; the
// caller tells which.
halo_timeline_wait_result_t halo_timeline_wait_owners(
    const halo_timeline_wait_target_t *targets, size_t count, bool wait_any,
    int64_t deadline_ns, const int *liveness_fds, size_t liveness_count,
    size_t *out_index, int32_t *out_failure);

#endif  // HALO_COMMON_TIMELINE_H_
