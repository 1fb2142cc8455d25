// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/session.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/buffer.h"
#include "daemon/command_buffer.h"
#include "daemon/device_call.h"
#include "daemon/domain_quota.h"
#include "daemon/executable.h"
#include "daemon/fd_budget.h"
#include "daemon/fd_server.h"
#include "daemon/queue.h"
#include "daemon/requests.h"
#include "daemon/ring.h"
#include "daemon/server.h"
#include "daemon/submission.h"
#include "daemon/trust_domain.h"
#include "daemon/workers.h"
#include "hal/remote/remote_device.h"

uint64_t halod_session_process_start(uint32_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/stat", pid);
  FILE *file = fopen(path, "r");
  if (!file) return 0;
  char text[1024];
  size_t length = fread(text, 1, sizeof(text) - 1, file);
  fclose(file);
  text[length] = '\0';
  // After the command name (which may hold spaces and parentheses), field
  // 3 is the state; the start time is field 22.
  char *field = strrchr(text, ')');
  unsigned long long start = 0;
  for (int i = 2; field && i < 22; ++i) field = strchr(field + 1, ' ');
  if (!field || sscanf(field + 1, "%llu", &start) != 1) return 0;
  return start;
}

// NULL, or why |session|'s process is refused (the fault budget).
static char *halod_session_refusal(halod_t *daemon,
                                   const halod_session_t *session) {
  halo_status_t status =
      halod_fault_budget_check(&daemon->sessions.fault_budget, &daemon->config,
                               &session->process, halo_clock_now_ns());
  if (!status) return NULL;
  char *reason = strdup(halo_status_message(status));
  halo_status_free(status);
  return reason ? reason : strdup("over the fault budget");
}

_Static_assert(sizeof(uintptr_t) >= sizeof(uint64_t),
               "by_tenant keeps two 32-bit counts in a map value");

// |tenant|'s entry of by_tenant (a tenant is never 0): its sessions in the
// low 32 bits, its descriptors in the high 32.
static uint64_t halod_tenant_entry(const halod_sessions_t *sessions,
                                   uint64_t tenant) {
  return (uint64_t)(uintptr_t)halo_u64_map_get(&sessions->by_tenant, tenant);
}

static halo_status_t halod_tenant_entry_set(halod_sessions_t *sessions,
                                            uint64_t tenant, uint64_t entry) {
  if (!entry) {
    halo_u64_map_remove(&sessions->by_tenant, tenant);
    return NULL;
  }
  return halo_u64_map_put(&sessions->by_tenant, tenant,
                          (void *)(uintptr_t)entry);
}

uint32_t halod_tenant_sessions(const halod_sessions_t *sessions,
                               uint64_t tenant) {
  return (uint32_t)halod_tenant_entry(sessions, tenant);
}

static halo_status_t halod_tenant_sessions_add(halod_sessions_t *sessions,
                                               uint64_t tenant, int32_t delta) {
  uint64_t entry = halod_tenant_entry(sessions, tenant);
  uint32_t count = (uint32_t)entry + (uint32_t)delta;
  return halod_tenant_entry_set(sessions, tenant, (entry >> 32 << 32) | count);
}

uint32_t halod_tenant_fds(const halod_sessions_t *sessions, uint64_t tenant) {
  return (uint32_t)(halod_tenant_entry(sessions, tenant) >> 32);
}

void halod_tenant_fds_add(halod_sessions_t *sessions, uint64_t tenant,
                          int32_t delta) {
  uint64_t entry = halod_tenant_entry(sessions, tenant);
  uint32_t fds = (uint32_t)(entry >> 32) + (uint32_t)delta;
  // The tenant has a session (the one charged), so its key is there and
  // replacing a present key never allocates.
  halo_status_free(halod_tenant_entry_set(
      sessions, tenant, ((uint64_t)fds << 32) | (uint32_t)entry));
}

// Why a connection of |process| is refused before its trust domain is
// looked at, or NULL: its process was killed, or halod (or its tenant) has
// as many connections as the limits allow. halod's server closes
// connections past connections, and past uid-connections +
// HALOD_UID_REFUSED_OPEN of a tenant, as they arrive: the last two are
// reached here only when a reload lowered the limits below the connections
// open.
static halo_status_t halod_session_admission(halod_t *daemon,
                                             const halod_session_t *session,
                                             uint32_t tenant_sessions) {
  const halod_client_process_t *process = &session->process;
  uintptr_t killed = (uintptr_t)halo_u64_map_get(
      &daemon->sessions.killed_processes, process->pid);
  if (killed) {
    if (killed == process->start + 1) {
      return halo_status_make(HALO_STATUS_PERMISSION_DENIED,
                              "process %u was killed by an administrator "
                              "(haloctl kill-client); it may connect again "
                              "once restarted",
                              process->pid);
    }
    halo_u64_map_remove(&daemon->sessions.killed_processes,
                        process->pid);  // another process
  }
  if (daemon->sessions.by_pipe.count >= daemon->config.connections) {
    ++daemon->stats.sessions_limited;
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "halod already has %zu connections, the limit "
                            "connections (%u)",
                            daemon->sessions.by_pipe.count,
                            daemon->config.connections);
  }
  if (tenant_sessions >= daemon->config.uid_connections) {
    ++daemon->stats.sessions_uid_limited;
    char tenant[HALOD_TENANT_WORDS_BYTES];
    halod_tenant_describe(halod_tenancy(daemon), session->tenant, process->pid,
                          tenant, sizeof(tenant));
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "%s already has %u connections to halod, the "
                            "limit uid-connections",
                            tenant, tenant_sessions);
  }
  // A tenant holding all its descriptors would get a session that could
  // not create even its first semaphore, while the connection itself (its
  // fd channel connection, its ring) takes descriptors kept for others.
  return halod_fd_budget_check_tenant(daemon, session, tenant_sessions);
}

// Takes |status| (non-NULL) as |session|'s refusal: code and message.
static void halod_session_refuse(halod_session_t *session,
                                 halo_status_t status) {
  session->refused_code = halo_status_code(status);
  session->refused_reason = strdup(halo_status_message(status));
  if (!session->refused_reason) {
    session->refused_code = HALO_STATUS_RESOURCE_EXHAUSTED;
    session->refused_reason = strdup("oom");
  }
  halo_status_free(status);
}

// ------------------------------------------------------------ worker start

// A session's wait for its trust domain's device workers to start (a new
// domain, or one whose worker was lost), made off the loop as device calls
// of no request (daemon/device_call.h), one device after another: a start
// takes a CUDA context's creation (tens of milliseconds), and a wedged
// driver or MPS server holds it until the start's timeout (30 s; 120 s for
// a spare), which on the loop held every domain. The session's requests
// (its Hello first) wait behind the calls, in order, on places of their
// own (halod_device_call_park: |starting|); other sessions and domains are
// served meanwhile. A worker that does not start is replaced once (as a
// spare that died starting was); a second failure refuses the session with
// why.
typedef struct halod_session_start_t {
  halod_device_call_t call;  // waits for devices[next]
  uint32_t count;
  uint32_t next;
  uint32_t indices[HALO_HAL_MAX_DEVICES];
  halo_hal_device_t *devices[HALO_HAL_MAX_DEVICES];  // held
  bool replaced;  // a worker that did not start was replaced once
  halo_status_t status;
} halod_session_start_t;

// A call thread.
static void halod_session_start_work(halod_device_call_t *call) {
  halod_session_start_t *start = (halod_session_start_t *)call;
  start->status = halo_hal_remote_device_wait_ready(call->device);
}

// The loop: |start|'s worker of device |index| did not start (|status|):
// it leaves the domain's slot, and once per session a new one starts in
// its place (true: waited for next). Takes |status| where it returns true.
static bool halod_session_start_replace(halod_t *daemon,
                                        halod_session_t *session,
                                        halod_session_start_t *start,
                                        halo_status_t status) {
  uint32_t index = start->indices[start->next];
  halo_hal_device_t *failed = start->devices[start->next];
  halod_worker_t *worker = &session->domain->workers[index];
  if (worker->device == failed) {
    // Never started: not a loss (no fault is charged for it).
    worker->device = NULL;
    halod_device_release(failed);
  }
  if (start->replaced) return false;
  halo_hal_device_t *fresh = NULL;
  halo_status_t again =
      halod_domain_device(daemon, session->domain, index, &fresh);
  if (again) {
    halo_status_free(again);
    return false;
  }
  HALO_LOG_WARN("session %llu: trust domain %s: %s; starting another worker",
                (unsigned long long)session->id, session->domain->name,
                halo_status_message(status));
  halo_status_free(status);
  start->replaced = true;
  halod_device_retain(fresh);
  halod_device_release(failed);
  start->devices[start->next] = fresh;
  return true;
}

static void halod_session_start_done(halod_t *daemon, halod_device_call_t *call,
                                     halod_session_t *session) {
  halod_session_start_t *start = (halod_session_start_t *)call;
  halo_status_t status = start->status;
  start->status = NULL;
  bool going =
      session && session->domain && !call->cancelled && !daemon->stopping;
  if (going && status &&
      halod_session_start_replace(daemon, session, start, status)) {
    status = NULL;
  } else if (going && !status) {
    ++start->next;
  }
  if (going && !status && start->next < start->count) {
    // The next device's worker (or the one that replaced a failed one).
    call->device = start->devices[start->next];
    halod_device_call_start(daemon, session, NULL, call);
    return;
  }
  if (session) {
    session->starting = false;
    // Hello's time (hello-timeout-ms) counts from now.
    session->hello_since_ns = halo_clock_now_ns();
  }
  if (going && status) {
    // As when the loop waited for the start: the session answers every
    // request with why (an error of halod's or of the device, logged).
    status = halo_status_annotate(status, "starting the worker of device %u",
                                  start->indices[start->next]);
    HALO_LOG_ERROR("session %llu (uid %u, pid %u): trust domain %s: %s",
                   (unsigned long long)session->id, session->uid, session->pid,
                   session->domain->name, halo_status_message(status));
    halod_session_refuse(session, status);
    status = NULL;
    halod_domain_release_refused(daemon, session->domain);
    session->domain = NULL;
  }
  halo_status_free(status);
  for (uint32_t i = 0; i < start->count; ++i) {
    halod_device_release(start->devices[i]);
  }
  free(start);
}

// Where |session|'s domain has a worker still starting, its requests wait
// for it (halod_session_start_t).
static void halod_session_await_workers(halod_t *daemon,
                                        halod_session_t *session) {
  halod_session_start_t *start = NULL;
  for (uint32_t i = 0; i < HALO_HAL_MAX_DEVICES; ++i) {
    halo_hal_device_t *device = session->domain->workers[i].device;
    if (!device || !halo_hal_remote_device_is(device) ||
        halo_hal_remote_device_is_ready(device)) {
      continue;
    }
    if (!start) start = calloc(1, sizeof(*start));
    if (!start) {
      // Without memory for the call, waited for here (as before).
      HALO_LOG_WARN(
          "session %llu: out of memory; waiting for its worker on "
          "the loop",
          (unsigned long long)session->id);
      halo_status_free(halo_hal_remote_device_wait_ready(device));
      continue;
    }
    halod_device_retain(device);
    start->indices[start->count] = i;
    start->devices[start->count++] = device;
  }
  if (!start) return;
  session->starting = true;
  start->call.device = start->devices[0];
  start->call.work = halod_session_start_work;
  start->call.done = halod_session_start_done;
  start->call.what = "a session's wait for its worker to start";
  halod_device_call_start(daemon, session, NULL, &start->call);
}

halo_status_t halod_session_create(halod_t *daemon, uint32_t pipe_id,
                                   uint32_t uid, uint32_t pid, uint64_t tenant,
                                   halod_session_t **out_session) {
  *out_session = NULL;
  halod_session_t *session = calloc(1, sizeof(*session));
  halod_domain_identity_t *identity = malloc(sizeof(*identity));
  if (!session || !identity) {
    free(session);
    free(identity);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  session->id = halod_next_id(daemon);
  session->pipe_id = pipe_id;
  session->uid = uid;
  session->pid = pid;
  session->tenant = tenant;
  session->process = (halod_client_process_t){
      .pid = pid, .uid = uid, .start = halod_session_process_start(pid)};
  session->created_ns = halo_clock_now_ns();
  session->hello_since_ns = session->created_ns;
  halo_u64_map_initialize(&session->grants);
  halod_handle_table_initialize(&session->handles, session->id,
                                daemon->config.session_handles);
  if (getrandom(session->token, sizeof(session->token), 0) !=
      (ssize_t)sizeof(session->token)) {
    int error = errno;
    halod_handle_table_deinitialize(&session->handles);
    free(identity);
    free(session);
    return halo_status_from_errno(error, "getrandom for a session token");
  }
  // A refused connection gets a session all the same, without a trust
  // domain (a refused process starts no worker), whose every request fails
  // with why (refused_reason): a closed connection would not tell the
  // client, and closing it could lose a message arriving on it
  // (halod_server_close_pipe). In order: a killed process or a limit, a
  // peer halod cannot identify (another pid or user namespace than halod
  // can see: warned, a deployment mistake), the fault budget, a domain past
  // its uid's uid-domains.
  uint32_t tenant_sessions = halod_tenant_sessions(&daemon->sessions, tenant);
  halo_log_level_t refused_level = HALO_LOG_DEBUG;
  session->refused_code = HALO_STATUS_RESOURCE_EXHAUSTED;
  halo_status_t refusal =
      halod_session_admission(daemon, session, tenant_sessions);
  if (refusal) {
    halod_session_refuse(session, refusal);
  } else if ((refusal =
                  halod_domain_identify(daemon, &session->process, identity))) {
    ++daemon->stats.sessions_refused;
    refused_level = HALO_LOG_WARN;
    halod_session_refuse(session, refusal);
  } else if ((session->refused_reason =
                  halod_session_refusal(daemon, session))) {
    ++daemon->stats.sessions_refused;
  } else if ((refusal = halod_domain_admit(daemon, identity, uid))) {
    ++daemon->stats.sessions_refused;
    halod_session_refuse(session, refusal);
  }
  halo_status_t status =
      halo_u64_map_put(&daemon->sessions.by_pipe, pipe_id, session);
  if (!status) {
    status = halo_u64_map_put(&daemon->sessions.by_id, session->id, session);
    if (status) halo_u64_map_remove(&daemon->sessions.by_pipe, pipe_id);
  }
  if (!status) {
    status = halod_tenant_sessions_add(&daemon->sessions, tenant, 1);
    if (status) {
      halo_u64_map_remove(&daemon->sessions.by_pipe, pipe_id);
      halo_u64_map_remove(&daemon->sessions.by_id, session->id);
    }
  }
  if (status) {
    free(identity);
    halod_handle_table_deinitialize(&session->handles);
    halo_u64_map_deinitialize(&session->grants);
    free(session->refused_reason);
    free(session);
    return status;
  }
  if (!session->refused_reason) {
    halo_status_t acquired = halod_domain_acquire(
        daemon, identity, &session->process, &session->domain);
    if (acquired) {
      // Its trust domain's worker did not start, say: an error of halod's.
      HALO_LOG_ERROR("session %llu (uid %u, pid %u): %s",
                     (unsigned long long)session->id, uid, pid,
                     halo_status_message(acquired));
      halod_session_refuse(session, acquired);
    }
  }
  free(identity);
  // Its requests' lane (daemon/request_lanes.h), for good: its domain's, a
  // refused session's its tenant's (a domain key equal to it by chance
  // would only share the lane).
  session->lane_key = session->domain ? session->domain->base_key : tenant;
  if (!session->refused_reason) {
    // Acquiring the domain handles a loss of its worker that the loop had
    // not handled yet, which may have charged this process.
    session->refused_reason = halod_session_refusal(daemon, session);
    if (session->refused_reason) {
      ++daemon->stats.sessions_refused;
      halod_domain_release_refused(daemon, session->domain);
      session->domain = NULL;
    }
  }
  if (!session->refused_reason) {
    halo_status_t joined = halod_domain_quota_join(daemon, session);
    if (joined) {
      halod_session_refuse(session, joined);
      halod_domain_release_refused(daemon, session->domain);
      session->domain = NULL;
    }
  }
  ++daemon->stats.sessions_total;
  if (session->refused_reason) {
    // At debug: a refused client may retry in a loop (the fault budget is
    // logged once at warn when the process crossed it, daemon/workers.c).
    halo_log(refused_level, "session %llu: refused (uid %u, pid %u): %s",
             (unsigned long long)session->id, uid, pid,
             session->refused_reason);
  } else {
    HALO_LOG_INFO("session %llu: connected (uid %u, pid %u, domain %s)",
                  (unsigned long long)session->id, uid, pid,
                  session->domain->name);
    halod_session_await_workers(daemon, session);
  }
  *out_session = session;
  return NULL;
}

void halod_session_destroy(halod_t *daemon, halod_session_t *session) {
  // Requests waiting behind a device call (daemon/device_call.h) are
  // answered (their connection is gone: nng drops the replies, and their
  // contexts serve again); the call itself finds no session when it
  // returns and only releases what it held.
  halod_requests_refuse_waiting(daemon, session, HALO_STATUS_UNAVAILABLE,
                                "the session ended");
  session->call = NULL;
  // Close the fd channel first: no memfd of this session may stay reachable.
  halod_fd_server_drop_session(daemon->fd_server, session);
  // Records not yet read are dropped, as a request in flight on a closed
  // socket is.
  halod_ring_destroy(daemon, session);
  // Work still waiting on semaphores can never be asked for again: it fails
  // (and fails what it would have signaled). Issued work completes and
  // retires on its own; it holds references to all it uses.
  halod_submission_cancel_session(daemon, session);
  // Semaphores the session created and others still hold are failed: only
  // they could be waiting, and nobody they trust may signal them any more.
  for (uint32_t i = 0; i < session->handles.capacity; ++i) {
    halod_handle_entry_t *entry = &session->handles.entries[i];
    if (!entry->object) continue;
    if (entry->type == HALOD_OBJECT_SEMAPHORE) {
      halod_semaphore_t *semaphore = entry->object;
      if (semaphore->creator_session == session->id) {
        semaphore->creator_session = 0;
        if (semaphore->refcount > 1) {
          halod_semaphore_fail(semaphore, HALO_STATUS_ABORTED,
                               "the creator of semaphore %llu (session %llu, "
                               "pid %u) ended",
                               (unsigned long long)semaphore->id,
                               (unsigned long long)session->id, session->pid);
        }
      }
      halod_semaphore_release(daemon, semaphore);
    } else if (entry->type == HALOD_OBJECT_BUFFER) {
      halod_buffer_t *buffer = entry->object;
      if (buffer->owner_session == session->id) buffer->owner_session = 0;
      halod_buffer_release(daemon, buffer);
    } else {
      halod_object_release(daemon, entry->type, entry->object);
    }
  }
  for (uint32_t i = 0; i < HALO_HAL_MAX_DEVICES; ++i) {
    if (session->default_queues[i]) {
      halod_queue_release(daemon, session->default_queues[i]);
    }
  }
  // Queues kept alive by issued work no longer belong to a session.
  halo_list_t queues = halo_list_take_all(&session->queues);
  for (halo_list_link_t *link = queues.head; link;) {
    halo_list_link_t *next = link->next;
    link->prev = link->next = NULL;
    HALO_LIST_ENTRY(link, halod_queue_t, session_link)->session_id = 0;
    link = next;
  }
  for (uint32_t i = 0; i < session->page_count; ++i) {
    halod_timeline_page_orphan(daemon, session->pages[i]);
  }
  for (uint32_t i = 0; i < session->arena_count; ++i) {
    halod_arena_orphan(daemon, session->arenas[i]);
  }
  HALO_LOG_INFO("session %llu: ended (pid %u, %llu requests)",
                (unsigned long long)session->id, session->pid,
                (unsigned long long)session->requests);
  halo_u64_map_remove(&daemon->sessions.by_pipe, session->pipe_id);
  halo_u64_map_remove(&daemon->sessions.by_id, session->id);
  // What it still counts goes back to its tenant: its imports went with its
  // handles, and pages and arenas of its own that others still use are
  // charged to them (their imports).
  halod_fd_budget_add(daemon, session, -(int32_t)session->memfds);
  halod_domain_quota_leave(daemon, session);
  // Lowering a count never allocates.
  halo_status_free(
      halod_tenant_sessions_add(&daemon->sessions, session->tenant, -1));
  if (session->domain) halod_domain_release(daemon, session->domain);
  free(session->lost_reason);
  free(session->refused_reason);
  free(session->pages);
  free(session->arenas);
  halod_handle_table_deinitialize(&session->handles);
  halo_u64_map_deinitialize(&session->grants);
  free(session);
}

void halod_session_fail_semaphores(halod_session_t *session,
                                   const halo_timeline_failure_info_t *info,
                                   halo_status_code_t code, const char *format,
                                   ...) {
  char message[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  // Two passes: failing one semaphore fails the work waiting on it, and so
  // what that work would have signaled, which may be another of the
  // session's semaphores, failed before this loop reaches it. Each carries
  // the reason before any fails (a semaphore failed already keeps its own:
  // the first failure wins).
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t h = 0; h < session->handles.capacity; ++h) {
      halod_handle_entry_t *entry = &session->handles.entries[h];
      if (!entry->object || entry->type != HALOD_OBJECT_SEMAPHORE) continue;
      halod_semaphore_t *semaphore = entry->object;
      if (semaphore->creator_session != session->id) continue;
      if (pass == 1) {
        halod_semaphore_fail(semaphore, code, "%s", message);
      } else if (info && halod_semaphore_failure(semaphore) == 0) {
        halo_timeline_slot_set_failure_info(semaphore->hal.slot, info);
      }
    }
  }
}

void halod_session_lose(halod_t *daemon, halod_session_t *session,
                        const char *reason) {
  if (session->lost_reason) return;
  session->lost_reason = strdup(reason);
  if (!session->lost_reason) session->lost_reason = strdup("device lost");
  HALO_LOG_WARN("session %llu: lost (pid %u): %s",
                (unsigned long long)session->id, session->pid, reason);
  // The client's own waiters wake with the reason first.
  halod_session_fail_semaphores(session, NULL, HALO_STATUS_DEVICE_LOST, "%s",
                                reason);
  // Its ring and the work still waiting go: they could only reach the lost
  // worker. What they would have signaled fails. Handles stay until the client
  // releases them or disconnects (releases and semaphore queries are still
  // served, so that a waiter learns why), objects on the dead worker fail every
  // use.
  halod_ring_lose(daemon, session, HALO_STATUS_DEVICE_LOST, reason);
  halod_submission_cancel_session(daemon, session);
}

void halod_object_release(halod_t *daemon, uint32_t type, void *object) {
  switch (type) {
    case HALOD_OBJECT_BUFFER:
      halod_buffer_release(daemon, object);
      break;
    case HALOD_OBJECT_SEMAPHORE:
      halod_semaphore_release(daemon, object);
      break;
    case HALOD_OBJECT_EXECUTABLE:
      halod_executable_release(daemon, object);
      break;
    case HALOD_OBJECT_COMMAND_BUFFER:
      halod_command_buffer_release(daemon, object);
      break;
    case HALOD_OBJECT_QUEUE:
      halod_queue_release(daemon, object);
      break;
  }
}

static uint32_t *halod_session_counter(halod_session_t *session,
                                       uint32_t type) {
  static uint32_t none;
  switch (type) {
    case HALOD_OBJECT_EXECUTABLE:
      return &session->executables;
    case HALOD_OBJECT_COMMAND_BUFFER:
      return &session->command_buffers;
    default:
      none = 0;
      return &none;
  }
}

halo_status_t halod_session_add_object(halod_t *daemon,
                                       halod_session_t *session, uint32_t type,
                                       void *object, uint64_t *out_handle) {
  halo_status_t status =
      halod_handle_table_insert(&session->handles, type, object, out_handle);
  if (status) {
    halod_object_release(daemon, type, object);
    return status;
  }
  ++*halod_session_counter(session, type);
  return NULL;
}

halo_status_t halod_session_release_object(halod_t *daemon,
                                           halod_session_t *session,
                                           uint32_t type, uint64_t handle) {
  void *object;
  HALO_RETURN_IF_ERROR(
      halod_handle_table_remove(&session->handles, handle, type, &object));
  halod_ring_revoke(session, handle, type);
  --*halod_session_counter(session, type);
  halod_object_release(daemon, type, object);
  return NULL;
}

static halo_status_t halod_session_append(void ***items, uint32_t *count,
                                          void *item) {
  void **grown = realloc(*items, (*count + 1) * sizeof(void *));
  if (!grown) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  grown[(*count)++] = item;
  *items = grown;
  return NULL;
}

halo_status_t halod_session_add_page(halod_session_t *session,
                                     halod_timeline_page_t *page) {
  return halod_session_append((void ***)&session->pages, &session->page_count,
                              page);
}

halo_status_t halod_session_add_arena(halod_session_t *session,
                                      halod_arena_t *arena) {
  return halod_session_append((void ***)&session->arenas, &session->arena_count,
                              arena);
}

static uint64_t halod_grant_key(halod_grant_kind_t kind, uint64_t id) {
  return ((uint64_t)kind << 56) | id;
}

// A grant's value: its count, and this bit where it charged the session a
// descriptor (halod_session_grant).
#define HALOD_GRANT_CHARGED ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1))

halo_status_t halod_session_grant(halod_t *daemon, halod_session_t *session,
                                  halod_grant_kind_t kind, uint64_t id,
                                  uint64_t owner_session, const char *what) {
  uint64_t key = halod_grant_key(kind, id);
  uintptr_t value = (uintptr_t)halo_u64_map_get(&session->grants, key);
  if (value || owner_session == session->id) {
    return halo_u64_map_put(&session->grants, key, (void *)(value + 1));
  }
  HALO_RETURN_IF_ERROR(
      halod_fd_budget_check_session(daemon, session->id, what));
  HALO_RETURN_IF_ERROR(halo_u64_map_put(&session->grants, key,
                                        (void *)(HALOD_GRANT_CHARGED | 1)));
  halod_fd_budget_add(daemon, session, 1);
  return NULL;
}

void halod_session_revoke(halod_t *daemon, halod_session_t *session,
                          halod_grant_kind_t kind, uint64_t id) {
  uint64_t key = halod_grant_key(kind, id);
  uintptr_t value = (uintptr_t)halo_u64_map_get(&session->grants, key);
  uintptr_t count = value & ~HALOD_GRANT_CHARGED;
  if (count <= 1) {
    halo_u64_map_remove(&session->grants, key);
    if (value & HALOD_GRANT_CHARGED) halod_fd_budget_add(daemon, session, -1);
  } else {
    halo_u64_map_put(&session->grants, key, (void *)(value - 1));
  }
}

bool halod_session_is_granted(const halod_session_t *session,
                              halod_grant_kind_t kind, uint64_t id) {
  return halo_u64_map_get(&session->grants, halod_grant_key(kind, id)) != NULL;
}

halo_status_t halod_session_add_semaphore(halod_t *daemon,
                                          halod_session_t *session,
                                          halod_semaphore_t *semaphore,
                                          uint64_t *out_handle) {
  halo_status_t status = halod_session_grant(
      daemon, session, HALOD_GRANT_PAGE, semaphore->page->id,
      semaphore->page->owner_session, "importing a semaphore's page");
  if (!status) {
    status = halod_handle_table_insert(
        &session->handles, HALOD_OBJECT_SEMAPHORE, semaphore, out_handle);
    if (status) {
      halod_session_revoke(daemon, session, HALOD_GRANT_PAGE,
                           semaphore->page->id);
    }
  }
  if (status) {
    halod_semaphore_release(daemon, semaphore);
    return status;
  }
  ++session->semaphores;
  return NULL;
}

// One more reference of |session| to |buffer|, which another session
// created, counted in the grants; the first charges its bytes. Only a new
// key allocates, so an error leaves nothing counted.
static halo_status_t halod_session_count_import(halod_session_t *session,
                                                const halod_buffer_t *buffer,
                                                uintptr_t count) {
  uint64_t key = halod_grant_key(HALOD_GRANT_BUFFER, buffer->id);
  HALO_RETURN_IF_ERROR(
      halo_u64_map_put(&session->grants, key, (void *)(count + 1)));
  if (count) return NULL;
  halod_domain_quota_charge(session, buffer->arena != NULL, buffer->size);
  return NULL;
}

// The references |session| holds to |buffer| (0: none, or its own).
static uintptr_t halod_session_import_count(const halod_session_t *session,
                                            const halod_buffer_t *buffer) {
  uint64_t key = halod_grant_key(HALOD_GRANT_BUFFER, buffer->id);
  return (uintptr_t)halo_u64_map_get(&session->grants, key);
}

// The bytes of |buffer|, which another session created, charged to
// |session| with its first handle on it (counted in the grants), refused
// past the session's quota.
static halo_status_t halod_session_charge_import(halod_t *daemon,
                                                 halod_session_t *session,
                                                 const halod_buffer_t *buffer) {
  if (buffer->owner_session == session->id) return NULL;  // charged already
  uintptr_t count = halod_session_import_count(session, buffer);
  bool host = buffer->arena != NULL;
  uint64_t used = host ? session->host_bytes : session->device_bytes;
  uint64_t quota = host ? daemon->config.session_host_bytes
                        : daemon->config.session_device_bytes;
  if (!count && (buffer->size > quota || used > quota - buffer->size)) {
    return halo_status_make(
        HALO_STATUS_RESOURCE_EXHAUSTED,
        "importing %s buffer %llu of %llu bytes would exceed the session's "
        "quota %s (%llu of %llu bytes in use; an imported buffer counts as "
        "the importer's own, which keeps it alive)",
        host ? "host-visible" : "device", (unsigned long long)buffer->id,
        (unsigned long long)buffer->size,
        host ? "session-host-bytes" : "session-device-bytes",
        (unsigned long long)used, (unsigned long long)quota);
  }
  if (!count) {
    char doing[96];
    snprintf(doing, sizeof(doing), "importing %s buffer %llu of %llu bytes",
             host ? "host-visible" : "device", (unsigned long long)buffer->id,
             (unsigned long long)buffer->size);
    HALO_RETURN_IF_ERROR(
        halod_domain_quota_check(daemon, session, host, buffer->size, doing));
  }
  return halod_session_count_import(session, buffer, count);
}

// One reference of |session| to |buffer| went (a handle, or a hold:
// halod_session_hold_import): the last to an imported one gives its bytes
// back.
static void halod_session_uncharge_import(halod_session_t *session,
                                          const halod_buffer_t *buffer) {
  uint64_t key = halod_grant_key(HALOD_GRANT_BUFFER, buffer->id);
  uintptr_t count = halod_session_import_count(session, buffer);
  if (!count) return;  // its own buffer
  if (count > 1) {
    // Replacing a present key never allocates.
    halo_status_free(
        halo_u64_map_put(&session->grants, key, (void *)(count - 1)));
    return;
  }
  halo_u64_map_remove(&session->grants, key);
  halod_domain_quota_credit(session, buffer->arena != NULL, buffer->size);
}

void halod_session_hold_import(halod_session_t *session,
                               const halod_buffer_t *buffer) {
  if (buffer->owner_session == session->id) return;  // charged as its own
  // Out of memory only for a new key: nothing counted, and the drop then
  // finds nothing to give back either.
  halo_status_free(halod_session_count_import(
      session, buffer, halod_session_import_count(session, buffer)));
}

void halod_session_drop_import(halod_t *daemon, uint64_t session_id,
                               const halod_buffer_t *buffer) {
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions.by_id, session_id);
  if (session) halod_session_uncharge_import(session, buffer);
}

halo_status_t halod_session_add_buffer(halod_t *daemon,
                                       halod_session_t *session,
                                       halod_buffer_t *buffer,
                                       uint64_t *out_handle) {
  halo_status_t status = halod_session_charge_import(daemon, session, buffer);
  if (status) {
    halod_buffer_release(daemon, buffer);
    return status;
  }
  if (buffer->arena) {
    status = halod_session_grant(
        daemon, session, HALOD_GRANT_ARENA, buffer->arena->id,
        buffer->arena->owner_session, "importing a buffer's arena");
  }
  if (!status) {
    status = halod_handle_table_insert(&session->handles, HALOD_OBJECT_BUFFER,
                                       buffer, out_handle);
    if (status && buffer->arena) {
      halod_session_revoke(daemon, session, HALOD_GRANT_ARENA,
                           buffer->arena->id);
    }
  }
  if (status) {
    halod_session_uncharge_import(session, buffer);
    halod_buffer_release(daemon, buffer);
    return status;
  }
  ++session->buffers;
  return NULL;
}

halo_status_t halod_session_release_semaphore(halod_t *daemon,
                                              halod_session_t *session,
                                              uint64_t handle) {
  void *object;
  HALO_RETURN_IF_ERROR(halod_handle_table_remove(
      &session->handles, handle, HALOD_OBJECT_SEMAPHORE, &object));
  halod_ring_revoke(session, handle, HALOD_OBJECT_SEMAPHORE);
  halod_semaphore_t *semaphore = object;
  halod_session_revoke(daemon, session, HALOD_GRANT_PAGE, semaphore->page->id);
  --session->semaphores;
  // An explicit release by the creator is not a crash: importers keep a
  // working semaphore.
  if (semaphore->creator_session == session->id) {
    semaphore->creator_session = 0;
  }
  halod_semaphore_release(daemon, semaphore);
  return NULL;
}

halo_status_t halod_session_remove_buffer(halod_t *daemon,
                                          halod_session_t *session,
                                          uint64_t handle,
                                          halod_buffer_t **out_buffer) {
  *out_buffer = NULL;
  void *object;
  HALO_RETURN_IF_ERROR(halod_handle_table_remove(&session->handles, handle,
                                                 HALOD_OBJECT_BUFFER, &object));
  halod_ring_revoke(session, handle, HALOD_OBJECT_BUFFER);
  halod_buffer_t *buffer = object;
  if (buffer->arena) {
    halod_session_revoke(daemon, session, HALOD_GRANT_ARENA, buffer->arena->id);
  }
  halod_session_uncharge_import(session, buffer);
  --session->buffers;
  *out_buffer = buffer;
  return NULL;
}

halo_status_t halod_session_release_buffer(halod_t *daemon,
                                           halod_session_t *session,
                                           uint64_t handle) {
  halod_buffer_t *buffer;
  HALO_RETURN_IF_ERROR(
      halod_session_remove_buffer(daemon, session, handle, &buffer));
  halod_buffer_release(daemon, buffer);
  return NULL;
}

// Loop thread: closes the connections past hello-timeout-ms without Hello.
// Their sessions end when nng reports the pipe removed.
static void halod_sessions_on_hello_timer(uv_timer_t *timer) {
  halod_t *daemon = timer->data;
  int64_t now = halo_clock_now_ns();
  int64_t timeout_ns = (int64_t)daemon->config.hello_timeout_ms * 1000000;
  const halo_u64_map_t *map = &daemon->sessions.by_id;
  for (size_t i = 0; i < map->capacity; ++i) {
    halod_session_t *session = map->entries[i].value;
    // A session waiting for its worker's start (its Hello behind it) has
    // its time from the start's end; one whose requests (its Hello among
    // them) wait in its domain's lane sent in time.
    if (!map->entries[i].key || !session || session->hello_done ||
        session->closing || session->call || session->lane_events > 0 ||
        now - session->hello_since_ns < timeout_ns) {
      continue;
    }
    session->closing = true;
    ++daemon->stats.sessions_hello_timed_out;
    HALO_LOG_DEBUG(
        "session %llu (pipe %u, pid %u, uid %u): no Hello within "
        "hello-timeout-ms (%u); closing the connection",
        (unsigned long long)session->id, session->pipe_id, session->pid,
        session->uid, daemon->config.hello_timeout_ms);
    halod_server_close_pipe(session->pipe_id);
  }
}

void halod_sessions_start(halod_t *daemon) {
  halod_sessions_t *sessions = &daemon->sessions;
  uint64_t period = daemon->config.hello_timeout_ms / 4;
  if (period < 10) period = 10;
  uv_timer_init(daemon->loop, &sessions->hello_timer);
  sessions->hello_timer.data = daemon;
  uv_timer_start(&sessions->hello_timer, halod_sessions_on_hello_timer, period,
                 period);
  sessions->hello_timer_active = true;
}

void halod_sessions_stop(halod_t *daemon) {
  halod_sessions_t *sessions = &daemon->sessions;
  if (!sessions->hello_timer_active) return;
  uv_timer_stop(&sessions->hello_timer);
  uv_close((uv_handle_t *)&sessions->hello_timer, NULL);
  sessions->hello_timer_active = false;
}

void halod_sessions_initialize(halod_sessions_t *sessions) {
  halo_u64_map_initialize(&sessions->by_pipe);
  halo_u64_map_initialize(&sessions->by_id);
  halo_u64_map_initialize(&sessions->domains);
  halo_u64_map_initialize(&sessions->killed_processes);
  halo_u64_map_initialize(&sessions->by_tenant);
  halo_u64_map_initialize(&sessions->domain_usage);
  halod_fault_budget_initialize(&sessions->fault_budget);
}

void halod_sessions_deinitialize(halod_sessions_t *sessions) {
  halo_u64_map_deinitialize(&sessions->by_pipe);
  halo_u64_map_deinitialize(&sessions->by_id);
  halo_u64_map_deinitialize(&sessions->domains);
  halo_u64_map_deinitialize(&sessions->killed_processes);
  halo_u64_map_deinitialize(&sessions->by_tenant);
  halo_u64_map_deinitialize(&sessions->domain_usage);
  halod_fault_budget_deinitialize(&sessions->fault_budget);
}
