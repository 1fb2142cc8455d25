// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/timeline.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX_32
#define FUTEX_32 2
struct futex_waitv {
  uint64_t val;
  uint64_t uaddr;
  uint32_t flags;
  uint32_t __reserved;
};
#endif

static void halo__futex_wake_all(_Atomic uint32_t *word) {
  // Shared (not FUTEX_PRIVATE_FLAG): waiters are in other processes.
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void halo_timeline_page_initialize(halo_timeline_page_t *page,
                                   uint64_t incarnation) {
  memset(page, 0, sizeof(*page));
  page->header.magic = HALO_TIMELINE_PAGE_MAGIC;
  page->header.incarnation = incarnation;
  page->header.slot_count = HALO_TIMELINE_SLOTS_PER_PAGE;
}

uint32_t halo_timeline_slot_activate(halo_timeline_slot_t *slot,
                                     uint64_t initial_value) {
  // The slot's last semaphore, if any, was retired (its generation bumped):
  // a waiter still holding that generation reads the slot as a sequence
  // lock (halo_timeline_slot_read: generation, value and failure, an
  // acquire fence, generation again) and must see the bump before it sees
  // any reset below, or it would take the new semaphore's value (or its
  // cleared failure) for its own. The release fence orders the bump
  // (before it on this thread, or handed over through halod's loop) before
  // the relaxed stores below; a compiler barrier on x86, dmb on Arm.
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&slot->value, initial_value, memory_order_relaxed);
  atomic_store_explicit(&slot->pending, initial_value, memory_order_relaxed);
  atomic_store_explicit(&slot->failure, 0, memory_order_relaxed);
  atomic_store_explicit(&slot->failure_reason, 0, memory_order_relaxed);
  atomic_store_explicit(&slot->failure_device, 0, memory_order_relaxed);
  atomic_store_explicit(&slot->failure_detail, 0, memory_order_relaxed);
  atomic_store_explicit(&slot->failure_count, 0, memory_order_relaxed);
  atomic_store_explicit(&slot->host_waits, 0, memory_order_relaxed);
  // The release orders the resets above before anyone sees the generation.
  uint32_t generation =
      atomic_load_explicit(&slot->generation, memory_order_relaxed);
  atomic_store_explicit(&slot->generation, generation, memory_order_release);
  return generation;
}

// Raises |*word| to |value| if it is below (compare-and-swap: never below
// what another writer stored meanwhile); returns whether it did, and in
// |out_previous| (optional) the value it replaced.
static bool halo__raise(_Atomic uint64_t *word, uint64_t value,
                        uint64_t *out_previous) {
  uint64_t current = atomic_load_explicit(word, memory_order_acquire);
  while (current < value) {
    if (atomic_compare_exchange_weak_explicit(word, &current, value,
                                              memory_order_acq_rel,
                                              memory_order_acquire)) {
      if (out_previous) *out_previous = current;
      return true;
    }
  }
  return false;
}

bool halo_timeline_slot_reserve(halo_timeline_slot_t *slot, uint64_t value,
                                uint64_t *out_previous) {
  return halo__raise(&slot->pending, value, out_previous);
}

void halo_timeline_slot_unreserve(halo_timeline_slot_t *slot, uint64_t value,
                                  uint64_t previous) {
  uint64_t expected = value;
  atomic_compare_exchange_strong_explicit(&slot->pending, &expected, previous,
                                          memory_order_acq_rel,
                                          memory_order_relaxed);
}

void halo_timeline_slot_notify(halo_timeline_slot_t *slot) {
  atomic_fetch_add_explicit(&slot->epoch, 1, memory_order_acq_rel);
  halo__futex_wake_all(&slot->epoch);
}

void halo_timeline_slot_set_host_waits(halo_timeline_slot_t *slot, bool waits) {
  uint32_t word = waits ? 1 : 0;
  if (atomic_load_explicit(&slot->host_waits, memory_order_relaxed) != word) {
    atomic_store_explicit(&slot->host_waits, word, memory_order_seq_cst);
  }
  if (waits) atomic_thread_fence(memory_order_seq_cst);
}

bool halo_timeline_slot_host_waits(halo_timeline_slot_t *slot) {
  atomic_thread_fence(memory_order_seq_cst);
  return atomic_load_explicit(&slot->host_waits, memory_order_seq_cst) != 0;
}

bool halo_timeline_slot_signal(halo_timeline_slot_t *slot, uint64_t value) {
  if (!halo__raise(&slot->value, value, NULL)) return false;
  halo_timeline_slot_notify(slot);
  return true;
}

bool halo_timeline_slot_fail(halo_timeline_slot_t *slot,
                             halo_status_code_t code) {
  int32_t expected = 0;
  bool first = atomic_compare_exchange_strong_explicit(
      &slot->failure, &expected, (int32_t)code, memory_order_acq_rel,
      memory_order_acquire);
  if (first) halo_timeline_slot_notify(slot);
  return first;
}

void halo_timeline_slot_set_failure_info(
    halo_timeline_slot_t *slot, const halo_timeline_failure_info_t *info) {
  if (atomic_load_explicit(&slot->failure, memory_order_acquire) != 0) return;
  // Relaxed: halo_timeline_slot_fail's compare-exchange (acq_rel) publishes
  // them with the failure.
  atomic_store_explicit(&slot->failure_reason, info->reason,
                        memory_order_relaxed);
  atomic_store_explicit(&slot->failure_device, info->device,
                        memory_order_relaxed);
  atomic_store_explicit(&slot->failure_detail, info->detail,
                        memory_order_relaxed);
  atomic_store_explicit(&slot->failure_count, info->count,
                        memory_order_relaxed);
}

halo_timeline_failure_info_t halo_timeline_slot_failure_info(
    const halo_timeline_slot_t *slot) {
  halo_timeline_slot_t *s = (halo_timeline_slot_t *)slot;
  halo_timeline_failure_info_t info = {0};
  if (atomic_load_explicit(&s->failure, memory_order_acquire) == 0) {
    return info;
  }
  info.reason = atomic_load_explicit(&s->failure_reason, memory_order_relaxed);
  info.device = atomic_load_explicit(&s->failure_device, memory_order_relaxed);
  info.detail = atomic_load_explicit(&s->failure_detail, memory_order_relaxed);
  info.count = atomic_load_explicit(&s->failure_count, memory_order_relaxed);
  return info;
}

void halo_timeline_slot_retire(halo_timeline_slot_t *slot) {
  atomic_fetch_add_explicit(&slot->generation, 1, memory_order_acq_rel);
  halo_timeline_slot_notify(slot);
}

halo_timeline_wait_result_t halo_timeline_slot_read(
    const halo_timeline_slot_t *slot, uint32_t generation, uint64_t target,
    uint64_t *out_value, int32_t *out_failure) {
  halo_timeline_slot_t *s = (halo_timeline_slot_t *)slot;
  uint32_t before = atomic_load_explicit(&s->generation, memory_order_acquire);
  uint64_t value = atomic_load_explicit(&s->value, memory_order_acquire);
  int32_t failure = atomic_load_explicit(&s->failure, memory_order_acquire);
  atomic_thread_fence(memory_order_acquire);
  uint32_t after = atomic_load_explicit(&s->generation, memory_order_relaxed);
  *out_value = value;
  *out_failure = failure;
  if (before != generation || after != generation) {
    return HALO_TIMELINE_WAIT_RETIRED;
  }
  // A value already reached wins over a later failure: the work it stood for
  // did complete.
  if (value >= target) return HALO_TIMELINE_WAIT_OK;
  if (failure != 0) return HALO_TIMELINE_WAIT_FAILED;
  return HALO_TIMELINE_WAIT_OK;
}

static bool halo__owner_dead(const int *liveness_fds, size_t count) {
  struct pollfd pfds[128];
  nfds_t watched = 0;
  for (size_t i = 0; i < count && watched < 128; ++i) {
    if (liveness_fds[i] < 0) continue;
    pfds[watched++] = (struct pollfd){.fd = liveness_fds[i], .events = POLLIN};
  }
  return watched > 0 && poll(pfds, watched, 0) > 0;
}

// Sleeps until one of |words| differs from |seen| or |deadline_ns|.
static void halo__futex_wait_any(_Atomic uint32_t *const *words,
                                 const uint32_t *seen, size_t count,
                                 int64_t deadline_ns) {
  if (count == 1) {
    int64_t remaining = deadline_ns - halo_clock_now_ns();
    if (remaining <= 0) return;
    struct timespec ts = halo_clock_timespec(remaining);
    syscall(SYS_futex, (uint32_t *)words[0], FUTEX_WAIT, seen[0], &ts, NULL, 0);
    return;
  }
  struct futex_waitv waiters[128];
  for (size_t i = 0; i < count; ++i) {
    waiters[i].val = seen[i];
    waiters[i].uaddr = (uintptr_t)words[i];
    waiters[i].flags = FUTEX_32;  // shared: no FUTEX_PRIVATE_FLAG
    waiters[i].__reserved = 0;
  }
  struct timespec abs = halo_clock_timespec(deadline_ns);
  long rc = syscall(SYS_futex_waitv, waiters, (unsigned)count, 0, &abs,
                    CLOCK_MONOTONIC);
  if (rc < 0 && errno == ENOSYS) {
    // Kernels before 5.16: poll the first word in short slices.
    int64_t slice = deadline_ns - halo_clock_now_ns();
    if (slice > 1000000) slice = 1000000;
    if (slice <= 0) return;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = slice};
    syscall(SYS_futex, (uint32_t *)words[0], FUTEX_WAIT, seen[0], &ts, NULL, 0);
  }
}

int64_t halo_timeline_spin_window_ns(int64_t previous_ns, int64_t max_ns) {
  int64_t spin = HALO_TIMELINE_SPIN_NS;
  if (previous_ns > 0 && previous_ns <= max_ns && 2 * previous_ns > spin) {
    spin = 2 * previous_ns;
  }
  return spin < max_ns ? spin : max_ns;
}

bool halo_timeline_spin_max_parse(const char *text, int64_t *out_ns) {
  if (!text || *text < '0' || *text > '9') return false;
  char *end = NULL;
  errno = 0;
  long long us = strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || us < 0 ||
      us > HALO_TIMELINE_SPIN_MAX_LIMIT_NS / 1000) {
    return false;
  }
  *out_ns = (int64_t)us * 1000;
  return true;
}

int64_t halo_timeline_spin_max_ns(void) {
  static _Atomic int64_t cached = -1;
  int64_t value = atomic_load_explicit(&cached, memory_order_relaxed);
  if (value < 0) {
    value = HALO_TIMELINE_SPIN_MAX_NS;
    const char *text = getenv("HALO_WAIT_SPIN_MAX_US");
    if (text && !halo_timeline_spin_max_parse(text, &value)) {
      HALO_LOG_WARN(
          "HALO_WAIT_SPIN_MAX_US=%s is not a number of microseconds from 0 "
          "to %lld: waits spin up to the default %lld us",
          text, (long long)(HALO_TIMELINE_SPIN_MAX_LIMIT_NS / 1000),
          (long long)(HALO_TIMELINE_SPIN_MAX_NS / 1000));
    }
    atomic_store_explicit(&cached, value, memory_order_relaxed);
  }
  return value;
}

int64_t halo_timeline_spin_ns(int64_t previous_ns) {
  return halo_timeline_spin_window_ns(previous_ns, halo_timeline_spin_max_ns());
}

// How long this thread's last wait that returned OK took.
static _Thread_local int64_t halo__timeline_previous_wait_ns;

static halo_timeline_wait_result_t halo__timeline_wait(
    const halo_timeline_wait_target_t *targets, size_t count, bool wait_any,
    int64_t deadline_ns, const int *liveness_fds, size_t liveness_count,
    int64_t spin_until, size_t *out_index, int32_t *out_failure);

halo_timeline_wait_result_t halo_timeline_wait(
    const halo_timeline_wait_target_t *targets, size_t count, bool wait_any,
    int64_t deadline_ns, int liveness_fd, size_t *out_index,
    int32_t *out_failure) {
  return halo_timeline_wait_owners(targets, count, wait_any, deadline_ns,
                                   &liveness_fd, 1, out_index, out_failure);
}

halo_timeline_wait_result_t halo_timeline_wait_owners(
    const halo_timeline_wait_target_t *targets, size_t count, bool wait_any,
    int64_t deadline_ns, const int *liveness_fds, size_t liveness_count,
    size_t *out_index, int32_t *out_failure) {
  *out_index = 0;
  *out_failure = 0;
  if (count == 0) return HALO_TIMELINE_WAIT_OK;
  if (count > 128) count = 128;
  int64_t start = halo_clock_now_ns();
  halo_timeline_wait_result_t result = halo__timeline_wait(
      targets, count, wait_any, deadline_ns, liveness_fds, liveness_count,
      start + halo_timeline_spin_ns(halo__timeline_previous_wait_ns), out_index,
      out_failure);
  if (result == HALO_TIMELINE_WAIT_OK) {
    halo__timeline_previous_wait_ns = halo_clock_now_ns() - start;
  }
  return result;
}

static halo_timeline_wait_result_t halo__timeline_wait(
    const halo_timeline_wait_target_t *targets, size_t count, bool wait_any,
    int64_t deadline_ns, const int *liveness_fds, size_t liveness_count,
    int64_t spin_until, size_t *out_index, int32_t *out_failure) {
  _Atomic uint32_t *words[128];
  uint32_t seen[128];
  for (;;) {
    // Epochs first (acquire), then the state: a change after this read bumps
    // the epoch and the futex wait below returns at once.
    size_t pending = 0;
    for (size_t i = 0; i < count; ++i) {
      halo_timeline_slot_t *slot = (halo_timeline_slot_t *)targets[i].slot;
      uint32_t epoch = atomic_load_explicit(&slot->epoch, memory_order_acquire);
      uint64_t value;
      int32_t failure;
      halo_timeline_wait_result_t result = halo_timeline_slot_read(
          slot, targets[i].generation, targets[i].value, &value, &failure);
      if (result != HALO_TIMELINE_WAIT_OK) {
        *out_index = i;
        *out_failure = failure;
        return result;
      }
      if (value >= targets[i].value) {
        if (wait_any) {
          *out_index = i;
          return HALO_TIMELINE_WAIT_OK;
        }
        continue;
      }
      words[pending] = &slot->epoch;
      seen[pending] = epoch;
      ++pending;
    }
    if (pending == 0) return HALO_TIMELINE_WAIT_OK;
    int64_t now = halo_clock_now_ns();
    if (now >= deadline_ns) return HALO_TIMELINE_WAIT_TIMEOUT;
    if (now < spin_until) {
      // Yield between looks, from the first: a thread that waits for the
      // GPU must not keep the daemon's threads, or another client whose
      // value just landed, off a busy CPU (8 clients on 8 CPUs: 17-19%
      // more steps/s than with a first 20 us of pure spinning; on an idle
      // CPU the yield returns at once, and latency is the same).
      sched_yield();
      continue;
    }
    if (halo__owner_dead(liveness_fds, liveness_count)) {
      return HALO_TIMELINE_WAIT_OWNER_DEAD;
    }
    int64_t slice_end = now + HALO_TIMELINE_SLICE_NS;
    if (slice_end > deadline_ns) slice_end = deadline_ns;
    halo__futex_wait_any(words, seen, pending, slice_end);
  }
}
