// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halod's state. One libuv loop thread owns all of it; nng threads hand it
// requests through daemon/server.c's queue. Every function declared in
// daemon/*.h runs on the loop thread unless it says otherwise.
#ifndef HALOD_DAEMON_H_
#define HALOD_DAEMON_H_

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/u64_map.h"
#include "common/wire.h"
#include "daemon/cache.h"
#include "daemon/config.h"
#include "daemon/fault_budget.h"
#include "daemon/metrics.h"
#include "daemon/metrics_http.h"
#include "daemon/request_lanes.h"
#include "daemon/server.h"
#include "daemon/stats.h"
#include "daemon/stop_watchdog.h"
#include "daemon/systemd.h"
#include "hal/deferred_queue.h"
#include "hal/device.h"
#include "hal/registry.h"

typedef struct halod_fd_server_t halod_fd_server_t;
typedef struct halod_session_t halod_session_t;
typedef struct halod_executable_load_t halod_executable_load_t;
typedef struct halod_rings_t halod_rings_t;

// The device-owning part of a trust domain on one device. With
// device-workers=process it is the proxy of the `halod --worker` process
// that holds the domain's context there: its queues, streams, executables,
// prepared graphs and memory (daemon/workers.h, hal/remote/); inline, the
// registry's device, shared by every domain.
typedef struct halod_worker_t {
  halo_hal_device_t *device;  // owned (process); NULL: not started, or lost
  uint32_t started;           // worker processes started for it
  uint32_t faults;            // worker processes lost
  char last_fault[512];       // how the last one ended
} halod_worker_t;

// Clients that share a device context can read each other's memory, so they
// must trust each other: sessions are grouped into trust domains (default:
// one per uid), and each domain has a worker per device
// (daemon/trust_domain.h).
// With workers-per-domain above 1 a trust domain is served by several of
// these, its parts: each has its own workers (contexts), and a client
// process's sessions all go to one part.
typedef struct halod_domain_t {
  uint64_t key;       // of this part: the identity's for part 0
  uint64_t base_key;  // halod_domain_identity_t's
  uint32_t part;      // 0 .. workers-per-domain - 1
  uint32_t uid;
  // trust-domain process: when the process started (0 in other modes);
  // with |uid|, what tells it from a later process with the same pid.
  uint64_t process_start;
  // "uid:N", "pid:N", "uid:N,cgroup:PATH"; with workers-per-domain above 1
  // "#PART" follows (owned)
  char *name;
  uint32_t sessions;
  // When its last served session ended, as halod_sessions_t.idle_endings
  // counted it then (a refused session's end leaves it; one never served
  // takes its refused one's). Of the domains without sessions, the lowest
  // goes first past idle-domains.
  uint64_t idle_since;
  // Its cached entries were dropped past idle-domains: counted
  // (halo_idle_domains_ended_total) when it ends.
  bool past_idle_bound;
  halod_worker_t workers[HALO_HAL_MAX_DEVICES];
} halod_domain_t;

// An exported object: the token maps to the object while it lives.
typedef struct halod_export_t {
  uint8_t token[16];
  uint32_t type;  // halod_object_type_t
  void *object;
} halod_export_t;

// The sessions and who may open one (daemon/session.c, daemon/workers.c).
typedef struct halod_sessions_t {
  halo_u64_map_t by_pipe;  // pipe id -> session
  halo_u64_map_t by_id;    // session id -> session
  halo_u64_map_t domains;  // domain key -> halod_domain_t
  // halod_domains_hold_idle: while held, idle domains end only at the
  // release (a caller still looks at one).
  uint32_t end_idle_held;
  bool end_idle_wanted;
  uint64_t idle_endings;  // served sessions of domains ended (idle_since)
  // Processes haloctl kill-client ended: pid -> start time + 1. Their new
  // connections are refused (nng would dial again on its own).
  halo_u64_map_t killed_processes;
  // Device faults charged to client processes: those over fault-budget are
  // refused (daemon/fault_budget.h).
  halod_fault_budget_t fault_budget;
  // Per tenant (daemon/tenant.h), as a uintptr_t: its open sessions,
  // refused ones included, in the low 32 bits (past uid-connections new ones
  // are refused, daemon/session.h), and in the high 32 the descriptors its
  // sessions hold against uid-fds (daemon/fd_budget.h).
  halo_u64_map_t by_tenant;
  // Per trust domain (a session's lane key): the bytes its sessions hold
  // together (daemon/domain_quota.h).
  halo_u64_map_t domain_usage;
  // Closes connections that sent no Hello within hello-timeout-ms
  // (halod_sessions_start).
  uv_timer_t hello_timer;
  bool hello_timer_active;
} halod_sessions_t;

// Why a request is refused once halod stops.
#define HALOD_STOPPING_MESSAGE \
  "halod is stopping (SIGTERM: a stop or restart); reconnect once it is back"

// Connections of a tenant (daemon/tenant.h) past uid-connections that
// still get a session answering every request with the setting's name;
// past them halod's server closes the tenant's connections as they arrive,
// so that one tenant holds a bounded number of descriptors.
#define HALOD_UID_REFUSED_OPEN 16

void halod_sessions_initialize(halod_sessions_t *sessions);
// Once every session has ended.
void halod_sessions_deinitialize(halod_sessions_t *sessions);

// What the supervisor shares through memory with clients and workers, and
// the tokens that let other sessions import it (daemon/semaphore.c,
// daemon/arena.c).
typedef struct halod_shared_t {
  halo_u64_map_t pages;       // page id -> halod_timeline_page_t
  halo_u64_map_t arenas;      // arena id -> halod_arena_t
  halo_u64_map_t semaphores;  // semaphore id -> halod_semaphore_t
  halo_u64_map_t exports;     // first 8 token bytes -> halod_export_t
  // Looks again for semaphores nothing can advance from the semaphores
  // whose release's walk stopped at its budget (|orphan_roots|, ids; or
  // from all of them: |orphan_sweep_all|), daemon/semaphore_orphans.h.
  uv_timer_t orphan_sweep;
  halo_u64_map_t orphan_roots;
  bool orphan_sweep_all;
  bool orphan_sweep_open;   // initialized, not closed
  bool orphan_sweep_armed;  // started
} halod_shared_t;
void halod_shared_initialize(halod_shared_t *shared);
// Once every object in it was released.
void halod_shared_deinitialize(halod_shared_t *shared);

// Device code and recordings, shared by the sessions of a trust domain
// (their keys include the domain's device): daemon/executable.c,
// daemon/command_buffer.c.
typedef struct halod_cache_t {
  halo_u64_map_t executables;  // content hash key -> halod_executable_t
  halo_u64_map_t memo;         // recording hash key -> halod_memo_entry_t
  // Recordings a worker prepares now (off the loop): hash key -> the
  // creation preparing it (daemon/command_buffer.c). An identical one
  // waits for it, then shares it.
  halo_u64_map_t preparing;
  halod_executable_load_t *loads;  // in flight (executable.c)
  uint64_t memo_hits;
  uint64_t memo_misses;
  // Released entries kept for later clients (daemon/cache.h).
  halod_cache_lru_t executable_lru;
  halod_cache_lru_t memo_lru;
  // The bytes of the executables no session holds: in executable_lru, or
  // held only by recordings in memo_lru (executable-cache-bytes).
  uint64_t unheld_executable_bytes;
  // halod_cache_hold_bound's holds, and one while the bound evicts.
  uint32_t bound_held;
} halod_cache_t;
void halod_cache_initialize(halod_cache_t *cache);
// Once loads have stopped and every entry was released.
void halod_cache_deinitialize(halod_cache_t *cache);

// Work in flight: submissions waiting on semaphores (the deferred queue,
// completions from driver threads) and the sessions' submission rings
// (daemon/submission.c, daemon/ring.c).
typedef struct halod_work_t {
  halo_hal_deferred_queue_t deferred;
  // halod_stop deinitialized |deferred| (nothing was in flight): a worker
  // loss handled after that has nothing in it to drain.
  bool deferred_closed;
  uv_async_t completion_async;
  halod_rings_t *rings;
  // What device workers were granted for the rings they drain
  // (daemon/ring_worker.c).
  struct halod_ring_workers_t *ring_workers;
} halod_work_t;

typedef struct halod_t {
  uv_loop_t *loop;
  halod_config_t config;
  halo_hal_registry_t hal;
  halod_server_t *client_server;
  halod_server_t *admin_server;
  // The client socket's requests, in their trust domains' lanes
  // (daemon/request_lanes.h, daemon/requests.h).
  halod_request_lanes_t request_lanes;
  halod_fd_server_t *fd_server;
  char fd_channel_path[512];
  uv_signal_t sigterm;
  uv_signal_t sigint;
  uv_signal_t sighup;
  halod_systemd_t systemd;
  uint64_t incarnation;
  int64_t start_ns;
  uint64_t next_id;  // sessions, pages, arenas, objects
  bool stopping;
  // Set by halod_stop: every wait of the stop ends by |stop_deadline_ns|
  // (CLOCK_MONOTONIC); the watchdog ends the process soon after.
  int64_t stop_deadline_ns;
  halod_stop_watchdog_t stop_watchdog;
  // haloctl drain: new sessions and submissions are refused.
  bool draining;
  halod_stats_t stats;
  halod_metrics_t metrics;
  halod_metrics_http_t *metrics_http;  // metrics-address; NULL when off
  halod_sessions_t sessions;
  halod_shared_t shared;
  halod_cache_t cache;
  halod_work_t work;
  // The device workers per (device, trust domain) and the spares
  // (daemon/workers.c).
  struct halod_workers_state_t *workers;
  // Control calls to devices, made off the loop (daemon/device_call.h).
  struct halod_device_calls_t *calls;
} halod_t;

// How halod tells tenants apart (daemon/tenant.h), from its configuration.
static inline halod_tenancy_t halod_tenancy(const halod_t *daemon) {
  return halod_tenancy_make(daemon->config.trust_domain,
                            daemon->config.trust_domain_cgroup_trim);
}

// Starts everything: devices, sockets, signal handlers.
halo_status_t halod_start(halod_t *daemon, uv_loop_t *loop,
                          const halod_config_t *config);

// What halod_stop may take, from the signal to the exit: every wait it
// makes (the sockets' close, executions, device workers) ends by then.
#define HALOD_STOP_BUDGET_NS (4000ll * 1000000)
// The sockets close once no request came for HALOD_STOP_QUIET_NS (or
// HALOD_STOP_QUIET_MAX_NS after the signal), and get until
// HALOD_STOP_SOCKETS_NS after it to close (nng can hang there).
#define HALOD_STOP_QUIET_NS (20ll * 1000000)
#define HALOD_STOP_QUIET_MAX_NS (250ll * 1000000)
#define HALOD_STOP_SOCKETS_NS (1250ll * 1000000)
// Executable loads still running this long after the signal are dropped,
// and a device worker running one is killed (a compile or a native
// kernel's constructor can run for longer than the stop may take); a load
// on a device in halod itself is left running, and halod exits without
// waiting for it. So are device workers still in a control call made off
// the loop (daemon/device_call.h).
#define HALOD_STOP_LOADS_NS (1000ll * 1000000)
// The watchdog (daemon/stop_watchdog.h) ends the process this long after
// the signal if the stop is still not done: within the 5 s that clients
// and the service manager are promised.
#define HALOD_STOP_WATCHDOG_NS (4500ll * 1000000)

// Fails every semaphore and every request not answered yet with
// UNAVAILABLE (waiters wake at once), stops accepting, frees everything;
// the loop then runs out of handles and uv_run returns. Bounded: see
// HALOD_STOP_BUDGET_NS.
void halod_stop(halod_t *daemon);

uint64_t halod_next_id(halod_t *daemon);

// Exports: |out_token| receives a fresh random token mapped to |object|.
halo_status_t halod_export_create(halod_t *daemon, uint32_t type, void *object,
                                  uint8_t out_token[16]);
// NOT_FOUND unless |token| names a live export of |type|.
halo_status_t halod_export_lookup(halod_t *daemon, const uint8_t *token,
                                  size_t token_length, uint32_t type,
                                  void **out_object);
void halod_export_remove(halod_t *daemon, const uint8_t token[16]);

// Drops one reference of |object| of halod_object_type_t |type|
// (daemon/session.c).
void halod_object_release(halod_t *daemon, uint32_t type, void *object);

// Admin socket handler (daemon/admin.c; the client socket's is
// daemon/requests.h).
// The admin socket's message bound: its requests name a pid at most, so a
// larger one is nobody's (nng drops its connection before reading it).
#define HALOD_ADMIN_MAX_MESSAGE_BYTES 65536
void halod_admin_on_event(void *user_data, halod_server_event_t *event);
// One line for systemd's STATUS= and the log: sessions, pending and in-flight
// work, draining (daemon/admin.c).
void halod_admin_summary(halod_t *daemon, char *out_text, size_t capacity);

// The wire form of every device's info: |infos| and |pointers| hold
// HALO_HAL_MAX_DEVICES entries; returns the device count (daemon/requests.c).
uint32_t halod_fill_device_infos(const halod_t *daemon,
                                 Halo__Wire__DeviceInfo *infos,
                                 Halo__Wire__DeviceInfo **pointers);

// Packs |response| and replies on |context| (daemon/requests.c).
void halod_reply(halod_server_context_t *context,
                 const Halo__Wire__Response *response);
// Replies with just a status (consumed).
void halod_reply_status(halod_server_context_t *context, halo_status_t status);
// Refuses for now with |status| (consumed): the client may send the same
// request again after |retry_after_ms| (libhalo does, within its timeout).
void halod_reply_retry(halod_server_context_t *context, halo_status_t status,
                       uint32_t retry_after_ms);

#endif  // HALOD_DAEMON_H_
