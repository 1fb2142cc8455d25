// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Sessions: one per client connection (nng pipe). Created when the pipe
// arrives, destroyed when it goes (exit or crash), releasing everything the
// client held. uid and pid come from the pipe's peer credentials.
//
// Loop thread only.
#ifndef HALOD_SESSION_H_
#define HALOD_SESSION_H_

#include <stdbool.h>
#include <stdint.h>

#include "common/list.h"
#include "common/u64_map.h"
#include "daemon/arena.h"
#include "daemon/daemon.h"
#include "daemon/fault_budget.h"
#include "daemon/handle_table.h"
#include "daemon/semaphore.h"

typedef struct halod_fd_connection_t halod_fd_connection_t;
typedef struct halod_buffer_t halod_buffer_t;
typedef struct halod_queue_t halod_queue_t;
typedef struct halod_submission_t halod_submission_t;
typedef struct halod_ring_t halod_ring_t;
typedef struct halod_device_call_t halod_device_call_t;

// What the fd channel may hand a session: pages and arenas it holds objects
// on. Keys: kind << 56 | id. HALOD_GRANT_BUFFER (never served) counts the
// session's handles on a buffer another session created, whose bytes it is
// charged (halod_session_add_buffer).
typedef enum halod_grant_kind_e {
  HALOD_GRANT_PAGE = 1,
  HALOD_GRANT_ARENA = 2,
  HALOD_GRANT_BUFFER = 3,
} halod_grant_kind_t;

struct halod_session_t {
  uint64_t id;
  uint32_t pipe_id;
  uint32_t uid;
  uint32_t pid;
  // What its connection counts against uid-connections, uid-fds and the
  // fd channel's bounds (daemon/tenant.h): its uid, or its uid in its
  // cgroup.
  uint64_t tenant;
  halod_client_process_t process;  // pid, uid and the process's start time
  // NULL for a session refused over the fault budget (it has no devices).
  halod_domain_t *domain;
  bool hello_done;
  bool closing;  // its pipe is being closed (no Hello in time)
  // Its trust domain's device worker was lost (daemon/workers.h): every
  // request but Hello gets SESSION_LOST with this reason. NULL: alive.
  char *lost_reason;
  // Its process was over the fault budget when it connected
  // (daemon/fault_budget.h): every request, Hello first, gets
  // RESOURCE_EXHAUSTED with this reason; a peer halod cannot identify
  // (daemon/trust_domain.h) gets PERMISSION_DENIED. NULL: accepted.
  char *refused_reason;
  halo_status_code_t refused_code;
  uint32_t faults;  // device faults charged to it
  uint8_t token[16];
  char client_name[64];
  int64_t created_ns;
  // When its time to say Hello (hello-timeout-ms) began: its creation, or
  // the end of its wait for its worker's start.
  int64_t hello_since_ns;
  // Its trust domain's workers are starting (daemon/session.c): its
  // requests wait behind that, on places of their own.
  bool starting;
  // The trust domain (base key) whose places its waiting requests hold
  // (halod_device_call_park), kept should the session lose its domain, and
  // how many of them, the first ones, wait on places for a start.
  uint64_t place_key;
  uint32_t start_parked;
  uint64_t requests;
  // The control call to a device worker one of its requests waits for
  // (daemon/device_call.h); NULL: none. Its requests that arrive meanwhile
  // wait in |waiting| (server events, in order) and are served after it.
  halod_device_call_t *call;
  halod_server_event_t *waiting_head;
  halod_server_event_t *waiting_tail;
  // Its lane (daemon/request_lanes.h): its trust domain's base key, fixed
  // when it starts (a session refused a domain: its uid's), and how many of
  // its events wait there.
  uint64_t lane_key;
  uint32_t lane_events;

  halod_handle_table_t handles;
  halo_u64_map_t grants;  // key -> count (as uintptr_t)
  uint32_t buffers;
  uint32_t semaphores;
  uint64_t host_bytes;
  uint64_t device_bytes;
  // Its trust domain's byte count (daemon/domain_quota.h), which
  // host_bytes and device_bytes are part of; NULL for a refused session.
  struct halod_domain_usage_t *domain_usage;
  // Semaphore pages and host arenas created for it and still open, each a
  // descriptor of halod's (daemon/fd_budget.h).
  uint32_t memfds;

  halod_timeline_page_t **pages;  // private semaphore pages
  uint32_t page_count;
  halod_arena_t **arenas;  // shared host arenas
  uint32_t arena_count;

  halod_fd_connection_t *fd_connections;  // closed with the session
  halod_ring_t *ring;    // submission ring (daemon/ring.h); NULL until asked
  bool ring_handed_out;  // once per session, also after the ring's end

  uint32_t executables;
  uint32_t command_buffers;
  // The recordings of its command buffers, charged against
  // session-recording-bytes (daemon/command_buffer.h).
  uint64_t recording_bytes;
  // Every queue of the session, by halod_queue_t's |session_link|: a
  // session's end releases each of its queues, each unlinked in O(1).
  halo_list_t queues;
  halod_queue_t *default_queues[HALO_HAL_MAX_DEVICES];
  // Its submissions not yet retired, newest first (halod_submission_t, by
  // session_link).
  halo_list_t submissions;
  uint32_t pending_submissions;
  // Totals of the session's queues already freed (daemon/queue.c).
  uint64_t retired_submitted;
  uint64_t retired_completed;
  uint64_t retired_failed;
};

// The session of a connection halod's server admitted (every one gets
// one). A refused one has no trust domain and answers every request with
// why (refused_reason): PERMISSION_DENIED for a process haloctl
// kill-client ended, RESOURCE_EXHAUSTED naming uid-connections once its
// tenant (|tenant|, daemon/tenant.h, as the server counted its connection)
// has that many sessions (the server closes the tenant's connections past
// HALOD_UID_REFUSED_OPEN more as they arrive) or naming connections, the
// reason a peer halod cannot identify or a trust domain that cannot start
// is refused, the fault budget. Fails only when out of memory.
halo_status_t halod_session_create(halod_t *daemon, uint32_t pipe_id,
                                   uint32_t uid, uint32_t pid, uint64_t tenant,
                                   halod_session_t **out_session);

// When process |pid| started (/proc/PID/stat, clock ticks since boot); 0 if
// it cannot be read. With the pid it names one process (pids are reused).
uint64_t halod_session_process_start(uint32_t pid);
// Fails every semaphore the session created with |code| and the message;
// |info| (or NULL) first goes into their slots, for waiters that cannot ask
// (halo_timeline_failure_reason_t).
void halod_session_fail_semaphores(halod_session_t *session,
                                   const halo_timeline_failure_info_t *info,
                                   halo_status_code_t code, const char *format,
                                   ...) __attribute__((format(printf, 4, 5)));

// The session's device worker was lost: its semaphores fail with
// DEVICE_LOST and |reason|, everything it holds is released, and later
// requests get SESSION_LOST. The client reconnects to rebuild.
void halod_session_lose(halod_t *daemon, halod_session_t *session,
                        const char *reason);

void halod_session_destroy(halod_t *daemon, halod_session_t *session);

// Open sessions of |tenant|, refused ones included.
uint32_t halod_tenant_sessions(const halod_sessions_t *sessions,
                               uint64_t tenant);

// The descriptors the sessions of |tenant| hold together, each counted as
// its session counts it (memfds), and a change of that count
// (daemon/fd_budget.h: only while the tenant has a session, which the map's
// entry needs; never allocates).
uint32_t halod_tenant_fds(const halod_sessions_t *sessions, uint64_t tenant);
void halod_tenant_fds_add(halod_sessions_t *sessions, uint64_t tenant,
                          int32_t delta);

// Loop thread. Starts closing the connections that complete no Hello within
// hello-timeout-ms (an idle connection costs halod a descriptor), checked
// every quarter of it. halod_sessions_stop ends that.
void halod_sessions_start(halod_t *daemon);
void halod_sessions_stop(halod_t *daemon);

halo_status_t halod_session_add_page(halod_session_t *session,
                                     halod_timeline_page_t *page);
halo_status_t halod_session_add_arena(halod_session_t *session,
                                      halod_arena_t *arena);

// Grants count handles: the fd channel serves a page or arena to a session
// only while it holds an object on it. The first grant of a page or arena
// another session created (|owner_session|: an imported semaphore's or
// buffer's) charges the session a descriptor against session-fds, and its
// tenant against uid-fds, until its last grant goes: the session keeps that
// memfd alive, whoever created it. RESOURCE_EXHAUSTED naming session-fds or
// uid-fds (and |what|) past the quota.
halo_status_t halod_session_grant(halod_t *daemon, halod_session_t *session,
                                  halod_grant_kind_t kind, uint64_t id,
                                  uint64_t owner_session, const char *what);
void halod_session_revoke(halod_t *daemon, halod_session_t *session,
                          halod_grant_kind_t kind, uint64_t id);
bool halod_session_is_granted(const halod_session_t *session,
                              halod_grant_kind_t kind, uint64_t id);

// Adds a handle for |semaphore| / |buffer| (taking over one reference) and
// its grant. A buffer another session created (an import) charges its
// bytes to |session| against session-host-bytes or session-device-bytes
// (once however many handles it holds on it, until the last goes): the
// importer keeps the memory alive, whether or not its creator stays;
// RESOURCE_EXHAUSTED naming the setting past the quota. On failure the
// reference is released.
halo_status_t halod_session_add_semaphore(halod_t *daemon,
                                          halod_session_t *session,
                                          halod_semaphore_t *semaphore,
                                          uint64_t *out_handle);
halo_status_t halod_session_add_buffer(halod_t *daemon,
                                       halod_session_t *session,
                                       halod_buffer_t *buffer,
                                       uint64_t *out_handle);

// An imported buffer stays charged to |session| while anything of the
// session holds it, not only a handle: a command buffer's recording (which
// submissions in flight keep) and an execution's binding each hold it
// (one more count on the import's grant, charged if it was the first), and
// drop it when they go (the last gives the bytes back; |session_id|: the
// session may have ended, its charges with it). Else a session that
// recorded an imported buffer and released its handle, its creator gone,
// kept the memory alive charged to nobody. No-op for the session's own.
void halod_session_hold_import(halod_session_t *session,
                               const halod_buffer_t *buffer);
void halod_session_drop_import(halod_t *daemon, uint64_t session_id,
                               const halod_buffer_t *buffer);

// Adds a handle for an executable, command buffer or queue (taking over one
// reference; released on failure).
halo_status_t halod_session_add_object(halod_t *daemon,
                                       halod_session_t *session, uint32_t type,
                                       void *object, uint64_t *out_handle);
// Removes such a handle and drops its reference.
halo_status_t halod_session_release_object(halod_t *daemon,
                                           halod_session_t *session,
                                           uint32_t type, uint64_t handle);

// Removes the handle and drops its reference.
halo_status_t halod_session_release_semaphore(halod_t *daemon,
                                              halod_session_t *session,
                                              uint64_t handle);
halo_status_t halod_session_release_buffer(halod_t *daemon,
                                           halod_session_t *session,
                                           uint64_t handle);
// Removes the handle and hands its reference to the caller (a
// queue_dealloca keeps the buffer until its waits are met).
halo_status_t halod_session_remove_buffer(halod_t *daemon,
                                          halod_session_t *session,
                                          uint64_t handle,
                                          halod_buffer_t **out_buffer);

#endif  // HALOD_SESSION_H_
