// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Executables in the daemon: loaded once per (device, content hash) and
// shared by every session that loads the same bytes with the same options.
//
// Loading runs off the loop thread (a libuv worker: NVRTC, PTX JIT and the
// driver's module load can take from milliseconds to seconds, and a module
// load waits for the device's running kernels); the request is answered
// when it is done. Meanwhile the executable is in the daemon's map as
// loading: a second session loading the same bytes waits for the same load
// instead of starting another.
//
// Loop thread only.
#ifndef HALOD_EXECUTABLE_H_
#define HALOD_EXECUTABLE_H_

#include <stdbool.h>
#include <stdint.h>

#include "common/hash.h"
#include "daemon/cache.h"
#include "daemon/daemon.h"
#include "hal/executable.h"

// The compiler options one executable load may carry.
#define HALOD_MAX_EXECUTABLE_OPTIONS 256u

typedef struct halod_executable_waiter_t halod_executable_waiter_t;

typedef struct halod_executable_t {
  uint32_t refcount;  // handles + command buffers using it
  // Of |refcount|: the recordings kept in the memo cache's list that hold
  // it (daemon/command_buffer.h). Loaded, with every reference theirs (or
  // none, kept in the executable list), no session holds it: its |bytes|
  // count in daemon->cache.unheld_executable_bytes.
  uint32_t kept_holders;
  uint64_t bytes;  // its image as the client sent it
  uint64_t id;
  uint32_t device;
  uint32_t format;
  halo_hash_t hash;
  char hash_text[65];
  halo_hal_executable_t *hal;  // NULL while loading
  int64_t load_ns;             // how long the driver took to load it
  bool loading;
  halod_executable_waiter_t *waiters;  // requests answered when loaded
  uint64_t hits;                       // loads that found it
  // Released by every holder: kept in daemon->cache.executable_lru.
  halod_cache_link_t lru;
} halod_executable_t;

// Loads (or finds) the executable |request| describes for |session| and
// answers |context| (an ExecutableReply with a new handle, or the error):
// at once for an error or an executable already loaded, after the load
// otherwise. PERMISSION_DENIED for native code from a session the
// native-code setting does not trust.
void halod_executable_load(halod_t *daemon, halod_session_t *session,
                           const Halo__Wire__ExecutableCreate *request,
                           halod_server_context_t *context);
void halod_executable_retain(halod_t *daemon, halod_executable_t *executable);
// Whether no session holds |executable|: loaded (one still loading is held
// by its waiters' requests), with every reference a kept recording's.
bool halod_executable_unheld(const halod_executable_t *executable);
// The last release keeps the executable in the cache's LRU list
// (executable-cache-entries) where it may be found again; else it goes.
// One that no session holds any more counts against
// executable-cache-bytes.
void halod_executable_release(halod_t *daemon, halod_executable_t *executable);
// A recording holding |executable| (once per reference) joins the memo
// cache's list (|kept| true) or leaves it (found again, or evicted before
// its release). The caller bounds the bytes then
// (halod_cache_bound_executable_bytes), once its loop is done.
void halod_executable_kept(halod_t *daemon, halod_executable_t *executable,
                           bool kept);
// The executable cache's destroy function (daemon/cache.h).
void halod_executable_evict(halod_t *daemon, halod_cache_link_t *link);

// Called by halod_stop before the sockets close: answers every request
// waiting for a load with UNAVAILABLE and drops the loads' results. A load
// still running at |deadline_ns| (CLOCK_MONOTONIC) has its device worker
// killed (the load's call ends with it); one on a device in halod itself
// is left running (halod then exits without waiting for it: main.c).
void halod_executable_stop_loads(halod_t *daemon, int64_t deadline_ns);

// Whether a load still runs (started, not done) on a device in halod
// itself (device-workers inline): it uses that device until it is done.
bool halod_executable_inline_loads_running(const halod_t *daemon);

// Requests waiting for loads now (halo_executable_loads_waiting).
uint32_t halod_executable_loads_waiting(const halod_t *daemon);

#endif  // HALOD_EXECUTABLE_H_
