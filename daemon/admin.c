// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The admin socket: what haloctl shows the operator, and the few things it
// may do (kill a client, forgive one its device faults, drain before an
// upgrade).
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/command_buffer.h"
#include "daemon/daemon.h"
#include "daemon/executable.h"
#include "daemon/fault_budget.h"
#include "daemon/metrics.h"
#include "daemon/queue.h"
#include "daemon/ring.h"
#include "daemon/ring_worker.h"
#include "daemon/semaphore.h"
#include "daemon/session.h"
#include "daemon/submission.h"
#include "daemon/workers.h"

// Submissions waiting on semaphores, over every live queue, and executions
// issued to devices (halod's and what the workers took from rings
// themselves: halod_work_in_flight, as the metrics count them).
static void halod_admin_work_totals(halod_t *daemon, uint32_t *out_pending,
                                    uint32_t *out_in_flight) {
  uint32_t pending = 0;
  for (halod_queue_t *queue = daemon->stats.queues; queue;
       queue = queue->all_next) {
    pending += queue->waiting;
  }
  *out_pending = pending;
  *out_in_flight = halod_work_in_flight(daemon, NULL);
}

void halod_admin_summary(halod_t *daemon, char *out_text, size_t capacity) {
  uint32_t pending, in_flight;
  halod_admin_work_totals(daemon, &pending, &in_flight);
  snprintf(out_text, capacity,
           "%s%zu session(s), %u pending, %u in flight on %u device(s)",
           daemon->draining ? "draining: " : "", daemon->sessions.by_id.count,
           pending, in_flight, daemon->hal.device_count);
}

static void halod_admin_status(halod_t *daemon, const Halo__Wire__Request *wire,
                               halod_server_context_t *context) {
  (void)wire;
  Halo__Wire__AdminStatusReply reply = HALO__WIRE__ADMIN_STATUS_REPLY__INIT;
  reply.daemon_version = HALO_VERSION_STRING;
  reply.protocol_version = HALO_PROTOCOL_VERSION;
  reply.pid = (uint64_t)getpid();
  reply.uptime_seconds = (double)(halo_clock_now_ns() - daemon->start_ns) / 1e9;
  reply.sessions = (uint32_t)daemon->sessions.by_id.count;
  reply.incarnation = daemon->incarnation;
  reply.listen_address = daemon->config.listen;
  reply.trust_domains = (uint32_t)daemon->sessions.domains.count;
  reply.has_draining = true;
  reply.draining = daemon->draining;
  reply.has_pending = reply.has_in_flight = true;
  halod_admin_work_totals(daemon, &reply.pending, &reply.in_flight);
  reply.admin_address = daemon->config.admin;
  reply.has_ring_worker_executions = true;
  reply.ring_worker_executions = halod_ring_workers_executions(daemon);

  Halo__Wire__DriverInfo drivers[HALO_HAL_DRIVER_COUNT];
  Halo__Wire__DriverInfo *driver_pointers[HALO_HAL_DRIVER_COUNT];
  for (int i = 0; i < HALO_HAL_DRIVER_COUNT; ++i) {
    halo__wire__driver_info__init(&drivers[i]);
    drivers[i].name = (char *)daemon->hal.drivers[i].name;
    drivers[i].available = daemon->hal.drivers[i].available;
    if (!drivers[i].available)
      drivers[i].reason = daemon->hal.drivers[i].reason;
    driver_pointers[i] = &drivers[i];
  }
  reply.n_drivers = HALO_HAL_DRIVER_COUNT;
  reply.drivers = driver_pointers;

  Halo__Wire__DeviceInfo devices[HALO_HAL_MAX_DEVICES];
  Halo__Wire__DeviceInfo *device_pointers[HALO_HAL_MAX_DEVICES];
  reply.n_devices = halod_fill_device_infos(daemon, devices, device_pointers);
  reply.devices = device_pointers;

  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_STATUS;
  response.admin_status = &reply;
  halod_reply(context, &response);
}

// Storage for a listing reply: |count| items of |item_size| bytes and as
// many pointers. Answers RESOURCE_EXHAUSTED and returns false without it.
static bool halod_admin_listing_allocate(halod_server_context_t *context,
                                         size_t count, size_t item_size,
                                         void **out_items,
                                         void ***out_pointers) {
  *out_items = calloc(count + 1, item_size);
  *out_pointers = calloc(count + 1, sizeof(void *));
  if (*out_items && *out_pointers) return true;
  free(*out_items);
  free(*out_pointers);
  halod_reply_status(context,
                     halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom"));
  return false;
}

// Per-device usage of one session: the buffers it owns (is charged for).
typedef struct halod_admin_usage_t {
  Halo__Wire__DeviceUsage items[HALO_HAL_MAX_DEVICES];
  Halo__Wire__DeviceUsage *pointers[HALO_HAL_MAX_DEVICES];
} halod_admin_usage_t;

static void halod_admin_session_devices(halod_t *daemon,
                                        const halod_session_t *session,
                                        halod_admin_usage_t *usage,
                                        Halo__Wire__SessionInfo *info) {
  uint32_t count = daemon->hal.device_count;
  for (uint32_t d = 0; d < count; ++d) {
    halo__wire__device_usage__init(&usage->items[d]);
    usage->items[d].device = d;
    usage->pointers[d] = &usage->items[d];
  }
  for (uint32_t i = 0; i < session->handles.capacity; ++i) {
    const halod_handle_entry_t *entry = &session->handles.entries[i];
    if (!entry->object || entry->type != HALOD_OBJECT_BUFFER) continue;
    const halod_buffer_t *buffer = entry->object;
    if (buffer->owner_session != session->id || buffer->device >= count) {
      continue;
    }
    Halo__Wire__DeviceUsage *item = &usage->items[buffer->device];
    ++item->buffers;
    if (buffer->arena) {
      item->host_bytes += buffer->size;
    } else {
      item->device_bytes += buffer->size;
    }
  }
  info->n_device_usage = count;
  info->device_usage = usage->pointers;
}

// The session's submissions, over its live queues and those it freed
// (halod_ring_workers_sync ran: with the executions its device workers took
// from its ring themselves).
static void halod_admin_session_work(const halod_session_t *session,
                                     Halo__Wire__SessionInfo *info) {
  info->has_queues = info->has_submissions = info->has_pending = true;
  info->has_in_flight = info->has_completed = info->has_failures = true;
  info->submissions = session->retired_submitted;
  info->completed = session->retired_completed;
  info->failures = session->retired_failed;
  for (const halo_list_link_t *link = session->queues.head; link;
       link = link->next) {
    const halod_queue_t *queue =
        HALO_LIST_ENTRY(link, halod_queue_t, session_link);
    ++info->queues;
    info->submissions += halod_queue_submitted(queue);
    info->completed += queue->completed;
    info->failures += queue->failed;
    info->pending += queue->waiting;
    info->in_flight += halod_queue_in_flight(queue);
  }
}

static void halod_admin_sessions(halod_t *daemon,
                                 const Halo__Wire__Request *wire,
                                 halod_server_context_t *context) {
  (void)wire;
  size_t count = daemon->sessions.by_id.count;
  Halo__Wire__SessionInfo *infos;
  Halo__Wire__SessionInfo **pointers;
  if (!halod_admin_listing_allocate(context, count, sizeof(*infos),
                                    (void **)&infos, (void ***)&pointers)) {
    return;
  }
  halod_admin_usage_t *usage = calloc(count + 1, sizeof(*usage));
  if (!usage) {
    free(infos);
    free(pointers);
    halod_reply_status(context,
                       halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom"));
    return;
  }
  int64_t now = halo_clock_now_ns();
  // The queues' counts of ring executions, current (as status counts).
  halod_ring_workers_sync(daemon, NULL);
  size_t n = 0;
  for (size_t i = 0; i < daemon->sessions.by_id.capacity; ++i) {
    if (!daemon->sessions.by_id.entries[i].key) continue;
    halod_session_t *session = daemon->sessions.by_id.entries[i].value;
    Halo__Wire__SessionInfo *info = &infos[n];
    halo__wire__session_info__init(info);
    info->session_id = session->id;
    info->uid = session->uid;
    info->pid = session->pid;
    info->trust_domain = session->domain ? session->domain->name : "";
    info->client_name = session->client_name;
    info->age_seconds = (double)(now - session->created_ns) / 1e9;
    info->buffers = session->buffers;
    info->semaphores = session->semaphores;
    info->host_bytes = session->host_bytes;
    info->device_bytes = session->device_bytes;
    info->arenas = session->arena_count;
    info->requests = session->requests;
    halod_admin_session_work(session, info);
    info->has_executables = info->has_command_buffers = true;
    info->executables = session->executables;
    info->command_buffers = session->command_buffers;
    info->has_recording_bytes = true;
    info->recording_bytes = session->recording_bytes;
    info->lost = session->lost_reason ? session->lost_reason : "";
    info->has_faults = info->has_process_faults = true;
    info->faults = session->faults;
    info->process_faults =
        halod_fault_budget_count(&daemon->sessions.fault_budget,
                                 &daemon->config, &session->process, now);
    info->refused = session->refused_reason ? session->refused_reason : "";
    halod_admin_session_devices(daemon, session, &usage[n], info);
    pointers[n++] = info;
  }
  Halo__Wire__AdminSessionsReply reply = HALO__WIRE__ADMIN_SESSIONS_REPLY__INIT;
  reply.n_sessions = n;
  reply.sessions = pointers;
  reply.has_fault_budget = reply.has_fault_budget_window_s = true;
  reply.fault_budget = daemon->config.fault_budget;
  reply.fault_budget_window_s = daemon->config.fault_budget_window_s;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_SESSIONS;
  response.admin_sessions = &reply;
  halod_reply(context, &response);
  free(infos);
  free(pointers);
  free(usage);
}

// Counts, per object id, the sessions holding a handle of |type| to it,
// leaving out the session whose id the object names as its owner
// (|owner_of| NULL: every session counts).
static halo_status_t halod_admin_count_holders(
    halod_t *daemon, uint32_t type, uint64_t (*id_of)(const void *object),
    uint64_t (*owner_of)(const void *object), halo_u64_map_t *out_counts) {
  halo_u64_map_initialize(out_counts);
  for (size_t i = 0; i < daemon->sessions.by_id.capacity; ++i) {
    if (!daemon->sessions.by_id.entries[i].key) continue;
    const halod_session_t *session = daemon->sessions.by_id.entries[i].value;
    for (uint32_t h = 0; h < session->handles.capacity; ++h) {
      const halod_handle_entry_t *entry = &session->handles.entries[h];
      if (!entry->object || entry->type != type) continue;
      if (owner_of && owner_of(entry->object) == session->id) continue;
      uint64_t id = id_of(entry->object);
      uintptr_t count = (uintptr_t)halo_u64_map_get(out_counts, id);
      HALO_RETURN_IF_ERROR(
          halo_u64_map_put(out_counts, id, (void *)(count + 1)));
    }
  }
  return NULL;
}

static uint64_t halod_admin_semaphore_id(const void *object) {
  return ((const halod_semaphore_t *)object)->id;
}
static uint64_t halod_admin_semaphore_owner(const void *object) {
  return ((const halod_semaphore_t *)object)->creator_session;
}
static uint64_t halod_admin_executable_id(const void *object) {
  return ((const halod_executable_t *)object)->id;
}

static void halod_admin_semaphores(halod_t *daemon,
                                   const Halo__Wire__Request *wire,
                                   halod_server_context_t *context) {
  (void)wire;
  size_t count = daemon->shared.semaphores.count;
  halo_u64_map_t importers;
  halo_status_t status = halod_admin_count_holders(
      daemon, HALOD_OBJECT_SEMAPHORE, halod_admin_semaphore_id,
      halod_admin_semaphore_owner, &importers);
  if (status) {
    halo_u64_map_deinitialize(&importers);
    halod_reply_status(context, status);
    return;
  }
  Halo__Wire__SemaphoreInfo *infos;
  Halo__Wire__SemaphoreInfo **pointers;
  if (!halod_admin_listing_allocate(context, count, sizeof(*infos),
                                    (void **)&infos, (void ***)&pointers)) {
    halo_u64_map_deinitialize(&importers);
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < daemon->shared.semaphores.capacity; ++i) {
    if (!daemon->shared.semaphores.entries[i].key) continue;
    halod_semaphore_t *semaphore = daemon->shared.semaphores.entries[i].value;
    Halo__Wire__SemaphoreInfo *info = &infos[n];
    halo__wire__semaphore_info__init(info);
    info->semaphore_id = semaphore->id;
    info->owner_session = semaphore->creator_session;
    info->value = halod_semaphore_value(semaphore);
    info->failure_code = halod_semaphore_failure(semaphore);
    info->holders = semaphore->refcount;
    info->exportable = semaphore->exportable;
    info->has_waiters = info->has_importers = true;
    for (const halo_list_link_t *link = semaphore->hal.timepoints.head; link;
         link = link->next) {
      ++info->waiters;
    }
    info->importers =
        (uint32_t)(uintptr_t)halo_u64_map_get(&importers, semaphore->id);
    info->failure_message = semaphore->hal.failure_message;
    if (semaphore->creator_session) {
      info->has_owner_pid = true;
      info->owner_pid = semaphore->creator_pid;
    }
    info->has_pending_value = true;
    info->pending_value = halo_hal_semaphore_pending(&semaphore->hal);
    pointers[n++] = info;
  }
  halo_u64_map_deinitialize(&importers);
  Halo__Wire__AdminSemaphoresReply reply =
      HALO__WIRE__ADMIN_SEMAPHORES_REPLY__INIT;
  reply.n_semaphores = n;
  reply.semaphores = pointers;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_SEMAPHORES;
  response.admin_semaphores = &reply;
  halod_reply(context, &response);
  free(infos);
  free(pointers);
}

// ------------------------------------------------------------ executables

typedef struct halod_admin_executable_list_t {
  Halo__Wire__ExecutableInfo *items;
  Halo__Wire__ExecutableInfo **pointers;
  size_t count;
} halod_admin_executable_list_t;

static const char *halod_admin_origin_name(uint32_t origin) {
  switch (origin) {
    case HALO_HAL_EXECUTABLE_ORIGIN_COMPILED:
      return "compiled";
    case HALO_HAL_EXECUTABLE_ORIGIN_DISK_CACHE:
      return "disk cache";
    default:
      return "as given";
  }
}

static const char *halod_admin_format_name(uint32_t format) {
  switch (format) {
    case HALO_HAL_EXECUTABLE_FORMAT_ELF:
      return "ELF";
    case HALO_HAL_EXECUTABLE_FORMAT_PTX:
      return "PTX";
    case HALO_HAL_EXECUTABLE_FORMAT_CUBIN:
      return "CUBIN";
    case HALO_HAL_EXECUTABLE_FORMAT_FATBIN:
      return "FATBIN";
    case HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE:
      return "CUDA source";
    default:
      return "unknown";
  }
}

static void halod_admin_executable_list_free(
    halod_admin_executable_list_t *list) {
  free(list->items);
  free(list->pointers);
}

static halo_status_t halod_admin_executable_list(
    halod_t *daemon, halod_admin_executable_list_t *out_list) {
  memset(out_list, 0, sizeof(*out_list));
  halo_u64_map_t sessions;
  halo_status_t status =
      halod_admin_count_holders(daemon, HALOD_OBJECT_EXECUTABLE,
                                halod_admin_executable_id, NULL, &sessions);
  size_t count = daemon->cache.executables.count;
  if (!status) {
    out_list->items = calloc(count + 1, sizeof(*out_list->items));
    out_list->pointers = calloc(count + 1, sizeof(*out_list->pointers));
    if (!out_list->items || !out_list->pointers) {
      halod_admin_executable_list_free(out_list);
      status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    }
  }
  if (status) {
    halo_u64_map_deinitialize(&sessions);
    return status;
  }
  size_t n = 0;
  for (size_t i = 0; i < daemon->cache.executables.capacity; ++i) {
    if (!daemon->cache.executables.entries[i].key) continue;
    halod_executable_t *executable = daemon->cache.executables.entries[i].value;
    Halo__Wire__ExecutableInfo *info = &out_list->items[n];
    halo__wire__executable_info__init(info);
    info->executable_id = executable->id;
    info->device = executable->device;
    info->format = (char *)halod_admin_format_name(executable->format);
    info->hash = executable->hash_text;
    info->users = executable->refcount;
    info->sessions =
        (uint32_t)(uintptr_t)halo_u64_map_get(&sessions, executable->id);
    info->state = executable->loading      ? "loading"
                  : executable->lru.listed ? "cached"
                                           : "loaded";
    info->has_hits = true;
    info->hits = executable->hits;
    info->origin =
        (char *)(executable->hal
                     ? halod_admin_origin_name(executable->hal->origin)
                     : "");
    info->load_ms = (double)executable->load_ns / 1e6;
    info->has_bytes = true;
    info->bytes = executable->bytes;
    out_list->pointers[n++] = info;
  }
  out_list->count = n;
  halo_u64_map_deinitialize(&sessions);
  return NULL;
}

static void halod_admin_executables(halod_t *daemon,
                                    const Halo__Wire__Request *wire,
                                    halod_server_context_t *context) {
  (void)wire;
  halod_admin_executable_list_t list;
  halo_status_t status = halod_admin_executable_list(daemon, &list);
  if (status) {
    halod_reply_status(context, status);
    return;
  }
  Halo__Wire__AdminExecutablesReply reply =
      HALO__WIRE__ADMIN_EXECUTABLES_REPLY__INIT;
  reply.n_executables = list.count;
  reply.executables = list.pointers;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_EXECUTABLES;
  response.admin_executables = &reply;
  halod_reply(context, &response);
  halod_admin_executable_list_free(&list);
}

// ------------------------------------------------------------ buffers

// Every buffer some session holds a handle to, once each.
static void halod_admin_buffers(halod_t *daemon,
                                const Halo__Wire__Request *wire,
                                halod_server_context_t *context) {
  (void)wire;
  size_t capacity = 0;
  for (size_t i = 0; i < daemon->sessions.by_id.capacity; ++i) {
    if (!daemon->sessions.by_id.entries[i].key) continue;
    const halod_session_t *session = daemon->sessions.by_id.entries[i].value;
    capacity += session->buffers + session->handles.live;
  }
  Halo__Wire__BufferInfo *infos;
  Halo__Wire__BufferInfo **pointers;
  if (!halod_admin_listing_allocate(context, capacity, sizeof(*infos),
                                    (void **)&infos, (void ***)&pointers)) {
    return;
  }
  halo_u64_map_t index;  // buffer id -> position + 1
  halo_u64_map_initialize(&index);
  halo_status_t status = NULL;
  size_t n = 0;
  for (size_t i = 0; !status && i < daemon->sessions.by_id.capacity; ++i) {
    if (!daemon->sessions.by_id.entries[i].key) continue;
    const halod_session_t *session = daemon->sessions.by_id.entries[i].value;
    for (uint32_t h = 0; !status && h < session->handles.capacity; ++h) {
      const halod_handle_entry_t *entry = &session->handles.entries[h];
      if (!entry->object || entry->type != HALOD_OBJECT_BUFFER) continue;
      const halod_buffer_t *buffer = entry->object;
      uintptr_t position = (uintptr_t)halo_u64_map_get(&index, buffer->id);
      if (position) {
        ++infos[position - 1].sessions;
        continue;
      }
      if (n == capacity) break;
      Halo__Wire__BufferInfo *info = &infos[n];
      halo__wire__buffer_info__init(info);
      info->buffer_id = buffer->id;
      info->owner_session = buffer->owner_session;
      info->device = buffer->device;
      info->memory_type = buffer->arena ? "host_visible" : "device";
      info->size = buffer->size;
      info->holders = buffer->refcount;
      info->sessions = 1;
      info->exportable = buffer->exportable;
      info->exported = buffer->exported;
      pointers[n] = info;
      status = halo_u64_map_put(&index, buffer->id, (void *)(n + 1));
      ++n;
    }
  }
  halo_u64_map_deinitialize(&index);
  if (status) {
    halod_reply_status(context, status);
  } else {
    Halo__Wire__AdminBuffersReply reply = HALO__WIRE__ADMIN_BUFFERS_REPLY__INIT;
    reply.n_buffers = n;
    reply.buffers = pointers;
    Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
    response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_BUFFERS;
    response.admin_buffers = &reply;
    halod_reply(context, &response);
  }
  free(infos);
  free(pointers);
}

// ------------------------------------------------------------ memo cache

// A cache's totals for haloctl cache: |entries| loaded, those of |lru| kept
// released, the bound and the lookups.
static Halo__Wire__CacheSummary halod_admin_cache_summary(
    size_t entries, const halod_cache_lru_t *lru, uint32_t capacity,
    uint64_t hits, uint64_t misses) {
  Halo__Wire__CacheSummary summary = HALO__WIRE__CACHE_SUMMARY__INIT;
  summary.entries = (uint32_t)entries;
  summary.cached = lru->count;
  summary.held = summary.entries - summary.cached;
  summary.capacity = capacity;
  summary.hits = hits;
  summary.misses = misses;
  summary.evictions = lru->evictions;
  return summary;
}

static void halod_admin_memo_cache(halod_t *daemon,
                                   const Halo__Wire__Request *wire,
                                   halod_server_context_t *context) {
  (void)wire;
  size_t count = daemon->cache.memo.count;
  Halo__Wire__MemoEntry *infos;
  Halo__Wire__MemoEntry **pointers;
  if (!halod_admin_listing_allocate(context, count, sizeof(*infos),
                                    (void **)&infos, (void ***)&pointers)) {
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < daemon->cache.memo.capacity; ++i) {
    if (!daemon->cache.memo.entries[i].key) continue;
    halod_memo_entry_t *entry = daemon->cache.memo.entries[i].value;
    Halo__Wire__MemoEntry *info = &infos[n];
    halo__wire__memo_entry__init(info);
    info->key = entry->key_text;
    info->device = entry->device;
    info->commands = entry->command_count;
    info->hits = entry->hits;
    info->sharers = entry->sharers;
    info->has_cached = true;
    info->cached = entry->lru.listed;
    pointers[n++] = info;
  }
  Halo__Wire__CacheSummary memo = halod_admin_cache_summary(
      daemon->cache.memo.count, &daemon->cache.memo_lru,
      daemon->config.memo_cache_entries, daemon->cache.memo_hits,
      daemon->cache.memo_misses);
  memo.has_cached_bytes = memo.has_capacity_bytes = true;
  memo.cached_bytes = daemon->cache.memo_lru.bytes;
  memo.capacity_bytes = daemon->config.memo_cache_bytes;
  Halo__Wire__CacheSummary executable = halod_admin_cache_summary(
      daemon->cache.executables.count, &daemon->cache.executable_lru,
      daemon->config.executable_cache_entries, daemon->stats.executable_hits,
      daemon->stats.executable_misses);
  // Those kept, and those only kept recordings hold.
  executable.has_cached_bytes = executable.has_capacity_bytes = true;
  executable.cached_bytes = daemon->cache.unheld_executable_bytes;
  executable.capacity_bytes = daemon->config.executable_cache_bytes;
  executable.has_held_by_cached = true;
  for (size_t i = 0; i < daemon->cache.executables.capacity; ++i) {
    if (!daemon->cache.executables.entries[i].key) continue;
    const halod_executable_t *held = daemon->cache.executables.entries[i].value;
    executable.held_by_cached += !held->lru.listed && held->refcount > 0 &&
                                 halod_executable_unheld(held);
  }
  Halo__Wire__AdminMemoCacheReply reply =
      HALO__WIRE__ADMIN_MEMO_CACHE_REPLY__INIT;
  reply.n_entries = n;
  reply.entries = pointers;
  reply.hits = daemon->cache.memo_hits;
  reply.misses = daemon->cache.memo_misses;
  halod_admin_executable_list_t executables;
  halo_status_t status = halod_admin_executable_list(daemon, &executables);
  if (status) {
    free(infos);
    free(pointers);
    halod_reply_status(context, status);
    return;
  }
  reply.n_executables = executables.count;
  reply.executables = executables.pointers;
  reply.has_executable_hits = reply.has_executable_misses = true;
  reply.executable_hits = daemon->stats.executable_hits;
  reply.executable_misses = daemon->stats.executable_misses;
  reply.cache_directory = daemon->config.cache_directory;
  reply.memo = &memo;
  reply.executable = &executable;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_MEMO_CACHE;
  response.admin_memo_cache = &reply;
  halod_reply(context, &response);
  halod_admin_executable_list_free(&executables);
  free(infos);
  free(pointers);
}

#define HALOD_ADMIN_MAX_PENDING_SHOWN 32

// Blocks a reply points into, freed after it is sent.
typedef struct halod_admin_blocks_t {
  void **blocks;
  size_t count;
  size_t capacity;
  bool failed;
} halod_admin_blocks_t;

static void *halod_admin_blocks_calloc(halod_admin_blocks_t *blocks,
                                       size_t count, size_t size) {
  if (blocks->failed) return NULL;
  if (blocks->count == blocks->capacity) {
    size_t capacity = blocks->capacity ? blocks->capacity * 2 : 16;
    void **grown = realloc(blocks->blocks, capacity * sizeof(void *));
    if (!grown) {
      blocks->failed = true;
      return NULL;
    }
    blocks->blocks = grown;
    blocks->capacity = capacity;
  }
  void *block = calloc(count + 1, size);
  if (!block) {
    blocks->failed = true;
    return NULL;
  }
  blocks->blocks[blocks->count++] = block;
  return block;
}

static void halod_admin_blocks_free(halod_admin_blocks_t *blocks) {
  for (size_t i = 0; i < blocks->count; ++i) free(blocks->blocks[i]);
  free(blocks->blocks);
}

// The daemon's semaphore around the HAL semaphore a wait names.
static const halod_semaphore_t *halod_admin_semaphore_of(
    const halo_hal_semaphore_t *hal) {
  return (const halod_semaphore_t *)((const char *)hal -
                                     offsetof(halod_semaphore_t, hal));
}

// A queue's waiting submissions of a live session, as one walk of its
// session's list (newest first) meets them: the last
// HALOD_ADMIN_MAX_PENDING_SHOWN kept, the oldest.
typedef struct halod_admin_pending_t {
  const halod_submission_t *shown[HALOD_ADMIN_MAX_PENDING_SHOWN];
  size_t seen;
} halod_admin_pending_t;

// Fills |pending| (queue -> halod_admin_pending_t) in one walk of every
// live session's submissions; false on oom. A walk of the session's list
// for each of its queues was quadratic on the loop (16,000 queues each with
// a waiting submission: 2 s).
static bool halod_admin_collect_pending(halod_t *daemon,
                                        halo_u64_map_t *pending) {
  const halo_u64_map_t *sessions = &daemon->sessions.by_id;
  for (size_t i = 0; i < sessions->capacity; ++i) {
    if (!sessions->entries[i].key) continue;
    const halod_session_t *session = sessions->entries[i].value;
    for (const halo_list_link_t *link = session->submissions.head; link;
         link = link->next) {
      const halod_submission_t *submission =
          HALO_LIST_ENTRY(link, halod_submission_t, session_link);
      if (!submission->queue ||
          submission->action.state != HALO_HAL_ACTION_WAITING) {
        continue;
      }
      uint64_t key = (uint64_t)(uintptr_t)submission->queue;
      halod_admin_pending_t *entry = halo_u64_map_get(pending, key);
      if (!entry) {
        entry = calloc(1, sizeof(*entry));
        halo_status_t status =
            entry ? halo_u64_map_put(pending, key, entry) : NULL;
        if (!entry || status) {
          halo_status_free(status);
          free(entry);
          return false;
        }
      }
      entry->shown[entry->seen % HALOD_ADMIN_MAX_PENDING_SHOWN] = submission;
      ++entry->seen;
    }
  }
  return true;
}

static void halod_admin_pending_free(halo_u64_map_t *pending) {
  for (size_t i = 0; i < pending->capacity; ++i) {
    if (pending->entries[i].key) free(pending->entries[i].value);
  }
  halo_u64_map_deinitialize(pending);
}

// The oldest waiting submissions of |queue| (at most
// HALOD_ADMIN_MAX_PENDING_SHOWN) with their waits, from |pending|.
static void halod_admin_queue_pending(const halo_u64_map_t *pending,
                                      halod_queue_t *queue, int64_t now,
                                      halod_admin_blocks_t *blocks,
                                      Halo__Wire__QueueInfo *info) {
  if (!queue->waiting || !queue->session_id) return;
  const halod_admin_pending_t *entry =
      halo_u64_map_get(pending, (uint64_t)(uintptr_t)queue);
  if (!entry) return;
  const halod_submission_t *const *shown = entry->shown;
  size_t seen = entry->seen;
  size_t count = seen < HALOD_ADMIN_MAX_PENDING_SHOWN
                     ? seen
                     : HALOD_ADMIN_MAX_PENDING_SHOWN;
  Halo__Wire__PendingAction *actions =
      halod_admin_blocks_calloc(blocks, count, sizeof(*actions));
  Halo__Wire__PendingAction **action_pointers =
      halod_admin_blocks_calloc(blocks, count, sizeof(*action_pointers));
  if (!actions || !action_pointers) return;
  for (size_t k = 0; k < count; ++k) {
    // Oldest first: the most recently stored slot is the oldest.
    const halod_submission_t *submission =
        shown[(seen - 1 - k) % HALOD_ADMIN_MAX_PENDING_SHOWN];
    Halo__Wire__PendingAction *action = &actions[k];
    halo__wire__pending_action__init(action);
    action->submission_id = submission->id;
    action->age_seconds = (double)(now - submission->accepted_ns) / 1e9;
    action->kind = (char *)halod_submission_kind_name(submission->kind);
    if (submission->kind != HALOD_SUBMISSION_EXECUTE) {
      action->has_buffer_id = true;
      action->buffer_id = submission->buffer_id;
    }
    uint32_t wait_count = submission->action.wait_count;
    Halo__Wire__PendingWait *waits =
        halod_admin_blocks_calloc(blocks, wait_count, sizeof(*waits));
    Halo__Wire__PendingWait **wait_pointers =
        halod_admin_blocks_calloc(blocks, wait_count, sizeof(*wait_pointers));
    if (!waits || !wait_pointers) return;
    for (uint32_t w = 0; w < wait_count; ++w) {
      const halo_hal_action_wait_t *wait = &submission->action.waits[w];
      const halod_semaphore_t *semaphore =
          halod_admin_semaphore_of(wait->semaphore);
      halo__wire__pending_wait__init(&waits[w]);
      waits[w].semaphore_id = semaphore->id;
      waits[w].value = wait->timepoint.value;
      waits[w].current = halod_semaphore_value(semaphore);
      waits[w].met = !wait->timepoint.linked;
      wait_pointers[w] = &waits[w];
    }
    action->n_waits = wait_count;
    action->waits = wait_pointers;
    action_pointers[k] = action;
  }
  info->n_pending_actions = count;
  info->pending_actions = action_pointers;
}

static void halod_admin_queues(halod_t *daemon, const Halo__Wire__Request *wire,
                               halod_server_context_t *context) {
  (void)wire;
  // The queues' counts of ring executions, current (as status counts).
  halod_ring_workers_sync(daemon, NULL);
  size_t count = 0;
  for (halod_queue_t *q = daemon->stats.queues; q; q = q->all_next) ++count;
  Halo__Wire__QueueInfo *infos;
  Halo__Wire__QueueInfo **pointers;
  if (!halod_admin_listing_allocate(context, count, sizeof(*infos),
                                    (void **)&infos, (void ***)&pointers)) {
    return;
  }
  halod_admin_blocks_t blocks = {0};
  halo_u64_map_t pending;
  halo_u64_map_initialize(&pending);
  if (!halod_admin_collect_pending(daemon, &pending)) blocks.failed = true;
  int64_t now = halo_clock_now_ns();
  size_t n = 0;
  for (halod_queue_t *queue = daemon->stats.queues; queue;
       queue = queue->all_next) {
    Halo__Wire__QueueInfo *info = &infos[n];
    halo__wire__queue_info__init(info);
    info->session_id = queue->session_id;
    info->queue_handle = queue->handle;
    info->device = queue->device;
    info->pending = queue->waiting;
    info->in_flight = halod_queue_in_flight(queue);
    info->completed = queue->completed;
    info->failed = queue->failed;
    info->mean_latency_us =
        queue->completed
            ? (double)queue->latency_ns_total / (double)queue->completed / 1e3
            : 0.0;
    info->has_latency_p50_us = info->has_latency_p99_us = true;
    info->latency_p50_us =
        halod_latency_quantile_ns(&queue->latency, 0.50) / 1e3;
    info->latency_p99_us =
        halod_latency_quantile_ns(&queue->latency, 0.99) / 1e3;
    info->has_priority = true;
    info->priority = queue->priority;
    info->has_session_live = true;
    info->session_live = queue->session_id != 0;
    halod_admin_queue_pending(&pending, queue, now, &blocks, info);
    pointers[n++] = info;
  }
  if (blocks.failed) {
    halod_reply_status(context,
                       halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom"));
  } else {
    Halo__Wire__AdminQueuesReply reply = HALO__WIRE__ADMIN_QUEUES_REPLY__INIT;
    reply.n_queues = n;
    reply.queues = pointers;
    Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
    response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_QUEUES;
    response.admin_queues = &reply;
    halod_reply(context, &response);
  }
  halod_admin_blocks_free(&blocks);
  halod_admin_pending_free(&pending);
  free(infos);
  free(pointers);
}

// ------------------------------------------------------------ actions

static void halod_admin_kill_client(halod_t *daemon,
                                    const Halo__Wire__Request *wire,
                                    halod_server_context_t *context) {
  const Halo__Wire__AdminKillClient *request = wire->admin_kill_client;
  // Collected first: destroying a session changes the map.
  size_t capacity = daemon->sessions.by_id.count;
  uint64_t *ids = calloc(capacity + 1, sizeof(*ids));
  if (!ids) {
    halod_reply_status(context,
                       halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom"));
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < daemon->sessions.by_id.capacity && n < capacity; ++i) {
    if (!daemon->sessions.by_id.entries[i].key) continue;
    const halod_session_t *session = daemon->sessions.by_id.entries[i].value;
    if (session->pid == request->pid) ids[n++] = session->id;
  }
  if (n == 0) {
    free(ids);
    halod_reply_status(context, halo_status_make(HALO_STATUS_NOT_FOUND,
                                                 "no session of process %u is "
                                                 "connected",
                                                 request->pid));
    return;
  }
  // nng in the client dials again on its own once its pipe closes: that
  // process's new connections are refused (until it exits).
  uint64_t start = halod_session_process_start(request->pid);
  if (start) {
    halo_status_free(halo_u64_map_put(&daemon->sessions.killed_processes,
                                      request->pid,
                                      (void *)(uintptr_t)(start + 1)));
  }
  for (size_t k = 0; k < n; ++k) {
    halod_session_t *session =
        halo_u64_map_get(&daemon->sessions.by_id, ids[k]);
    if (!session) continue;
    HALO_LOG_WARN(
        "session %llu: killed by an administrator (pid %u, %u submissions "
        "not completed)",
        (unsigned long long)session->id, session->pid,
        session->pending_submissions);
    // The client's own waiters wake with the reason, not just a lost
    // connection: every semaphore it created fails first, its slot saying
    // why (the connection closes before they could ask).
    halo_timeline_failure_info_t info = {
        .reason = HALO_TIMELINE_FAILURE_SESSION_KILLED,
        .detail = (int32_t)session->pid,
    };
    halod_session_fail_semaphores(session, &info, HALO_STATUS_ABORTED,
                                  "session %llu (pid %u) was killed by an "
                                  "administrator (haloctl kill-client)",
                                  (unsigned long long)session->id,
                                  session->pid);
    // Closed before the session goes: a request still queued for the pipe
    // then finds no connection instead of creating a new session.
    halod_server_close_pipe(session->pipe_id);
    halod_session_destroy(daemon, session);
    ++daemon->stats.sessions_killed;
  }
  Halo__Wire__AdminKillClientReply reply =
      HALO__WIRE__ADMIN_KILL_CLIENT_REPLY__INIT;
  reply.n_session_ids = n;
  reply.session_ids = ids;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_KILL_CLIENT;
  response.admin_kill_client = &reply;
  halod_reply(context, &response);
  free(ids);
}

static void halod_admin_forgive_client(halod_t *daemon,
                                       const Halo__Wire__Request *wire,
                                       halod_server_context_t *context) {
  const Halo__Wire__AdminForgiveClient *request = wire->admin_forgive_client;
  uint32_t faults = halod_fault_budget_forgive(&daemon->sessions.fault_budget,
                                               &daemon->config, request->pid,
                                               halo_clock_now_ns());
  if (faults == 0) {
    halod_reply_status(
        context,
        halo_status_make(HALO_STATUS_NOT_FOUND,
                         "no device fault of process %u is counted "
                         "(within fault-budget-window-s = %u s)",
                         request->pid, daemon->config.fault_budget_window_s));
    return;
  }
  HALO_LOG_WARN(
      "fault budget: client pid %u forgiven by an administrator (%u "
      "fault(s) forgotten); its new sessions are accepted",
      request->pid, faults);
  Halo__Wire__AdminForgiveClientReply reply =
      HALO__WIRE__ADMIN_FORGIVE_CLIENT_REPLY__INIT;
  reply.faults = faults;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_FORGIVE_CLIENT;
  response.admin_forgive_client = &reply;
  halod_reply(context, &response);
}

static void halod_admin_drain(halod_t *daemon, const Halo__Wire__Request *wire,
                              halod_server_context_t *context) {
  const Halo__Wire__AdminDrain *request = wire->admin_drain;
  bool draining = !request->cancel;
  if (draining != daemon->draining) {
    daemon->draining = draining;
    if (draining) {
      // Workers draining rings take nothing more: without grants they hand
      // every record to halod, which refuses it.
      for (size_t i = 0; i < daemon->sessions.by_id.capacity; ++i) {
        if (!daemon->sessions.by_id.entries[i].key) continue;
        halod_ring_revoke_all(daemon->sessions.by_id.entries[i].value);
      }
      HALO_LOG_WARN(
          "draining: new sessions and submissions are refused until a "
          "restart (or haloctl undrain)");
    } else {
      HALO_LOG_INFO("drain cancelled: accepting sessions and submissions");
    }
    char summary[256];
    halod_admin_summary(daemon, summary, sizeof(summary));
    halod_systemd_status(summary);
  }
  Halo__Wire__AdminDrainReply reply = HALO__WIRE__ADMIN_DRAIN_REPLY__INIT;
  reply.draining = daemon->draining;
  reply.sessions = (uint32_t)daemon->sessions.by_id.count;
  halod_admin_work_totals(daemon, &reply.pending, &reply.in_flight);
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_DRAIN;
  response.admin_drain = &reply;
  halod_reply(context, &response);
}

static void halod_admin_metrics(halod_t *daemon,
                                const Halo__Wire__Request *wire,
                                halod_server_context_t *context) {
  (void)wire;
  char *text = halod_metrics_render(daemon, HALOD_METRICS_PROMETHEUS);
  if (!text) {
    halod_reply_status(context,
                       halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom"));
    return;
  }
  Halo__Wire__AdminMetricsReply reply = HALO__WIRE__ADMIN_METRICS_REPLY__INIT;
  reply.text = text;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_METRICS;
  response.admin_metrics = &reply;
  halod_reply(context, &response);
  free(text);
}

// ------------------------------------------------------------ workers

typedef struct halod_admin_worker_list_t {
  Halo__Wire__WorkerInfo *items;
  Halo__Wire__WorkerInfo **pointers;
  size_t count;
  size_t capacity;
  bool failed;
} halod_admin_worker_list_t;

// The views' strings stay valid until the reply is sent (the loop thread
// changes nothing meanwhile): they are not copied.
static void halod_admin_worker_visit(void *user_data,
                                     const halod_worker_view_t *view) {
  halod_admin_worker_list_t *list = user_data;
  if (list->failed) return;
  if (list->count == list->capacity) {
    size_t capacity = list->capacity ? list->capacity * 2 : 16;
    Halo__Wire__WorkerInfo *items =
        realloc(list->items, capacity * sizeof(*items));
    if (!items) {
      list->failed = true;
      return;
    }
    list->items = items;
    list->capacity = capacity;
  }
  Halo__Wire__WorkerInfo *info = &list->items[list->count++];
  halo__wire__worker_info__init(info);
  info->device = view->device;
  info->domain = (char *)(view->domain ? view->domain : "");
  info->pid = view->pid;
  info->state = (char *)view->state;
  info->sessions = view->sessions;
  info->started = view->started;
  info->faults = view->faults;
  info->last_fault = (char *)(view->last_fault ? view->last_fault : "");
  if (view->usage_known) {
    info->has_graph_bytes = true;
    info->graph_bytes = view->usage.graph_bytes;
    info->has_graph_bytes_limit = true;
    info->graph_bytes_limit = view->usage.graph_bytes_limit;
    info->has_graph_instances = true;
    info->graph_instances = view->usage.graph_instances;
  }
}

static void halod_admin_workers(halod_t *daemon,
                                const Halo__Wire__Request *wire,
                                halod_server_context_t *context) {
  (void)wire;
  halod_admin_worker_list_t list = {0};
  halod_workers_visit(daemon, halod_admin_worker_visit, &list);
  if (!list.failed && list.count) {
    // Pointers last: the items moved while the list grew.
    list.pointers = calloc(list.count, sizeof(*list.pointers));
    if (!list.pointers) list.failed = true;
  }
  if (list.failed) {
    free(list.items);
    halod_reply_status(context,
                       halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom"));
    return;
  }
  for (size_t i = 0; i < list.count; ++i) list.pointers[i] = &list.items[i];
  Halo__Wire__AdminWorkersReply reply = HALO__WIRE__ADMIN_WORKERS_REPLY__INIT;
  reply.n_workers = list.count;
  reply.workers = list.pointers;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_WORKERS;
  response.admin_workers = &reply;
  halod_reply(context, &response);
  free(list.items);
  free(list.pointers);
}

typedef void (*halod_admin_fn)(halod_t *daemon, const Halo__Wire__Request *wire,
                               halod_server_context_t *context);

// Indexed by body number less HALO__WIRE__REQUEST__BODY_ADMIN_STATUS (admin
// bodies are numbered from 100, proto/halo.proto).
#define HALOD_ADMIN(body) \
  [HALO__WIRE__REQUEST__BODY_##body - HALO__WIRE__REQUEST__BODY_ADMIN_STATUS]
static const halod_admin_fn halod_admin_handlers[] = {
    HALOD_ADMIN(ADMIN_STATUS) = halod_admin_status,
    HALOD_ADMIN(ADMIN_SESSIONS) = halod_admin_sessions,
    HALOD_ADMIN(ADMIN_SEMAPHORES) = halod_admin_semaphores,
    HALOD_ADMIN(ADMIN_MEMO_CACHE) = halod_admin_memo_cache,
    HALOD_ADMIN(ADMIN_QUEUES) = halod_admin_queues,
    HALOD_ADMIN(ADMIN_BUFFERS) = halod_admin_buffers,
    HALOD_ADMIN(ADMIN_EXECUTABLES) = halod_admin_executables,
    HALOD_ADMIN(ADMIN_KILL_CLIENT) = halod_admin_kill_client,
    HALOD_ADMIN(ADMIN_FORGIVE_CLIENT) = halod_admin_forgive_client,
    HALOD_ADMIN(ADMIN_DRAIN) = halod_admin_drain,
    HALOD_ADMIN(ADMIN_METRICS) = halod_admin_metrics,
    HALOD_ADMIN(ADMIN_WORKERS) = halod_admin_workers,
};
#undef HALOD_ADMIN

void halod_admin_on_event(void *user_data, halod_server_event_t *event) {
  halod_t *daemon = user_data;
  if (event->kind != HALOD_SERVER_EVENT_REQUEST) {
    halod_server_event_free(event);
    return;
  }
  Halo__Wire__Request *wire = halo__wire__request__unpack(
      NULL, nng_msg_len(event->message), nng_msg_body(event->message));
  size_t index =
      wire ? (size_t)wire->body_case - HALO__WIRE__REQUEST__BODY_ADMIN_STATUS
           : SIZE_MAX;
  size_t count = sizeof(halod_admin_handlers) / sizeof(halod_admin_handlers[0]);
  if (!wire) {
    halod_reply_status(event->context,
                       halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                        "admin request of %zu bytes does not "
                                        "decode",
                                        nng_msg_len(event->message)));
  } else if (wire->body_case >= HALO__WIRE__REQUEST__BODY_ADMIN_STATUS &&
             index < count && halod_admin_handlers[index]) {
    halod_admin_handlers[index](daemon, wire, event->context);
  } else {
    halod_reply_status(event->context,
                       halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                        "request type %d is not an admin "
                                        "request",
                                        (int)wire->body_case));
  }
  if (wire) halo__wire__request__free_unpacked(wire, NULL);
  halod_server_event_free(event);
}
