// The admin socket: what haloctl shows the operator. Read-only for now.
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/command_buffer.h"
#include "daemon/daemon.h"
#include "daemon/queue.h"
#include "daemon/semaphore.h"
#include "daemon/session.h"

static void halod_admin_status(halod_t *daemon,
                               halod_server_context_t *context) {
  Halo__Wire__AdminStatusReply reply = HALO__WIRE__ADMIN_STATUS_REPLY__INIT;
  reply.daemon_version = HALO_VERSION_STRING;
  reply.protocol_version = HALO_PROTOCOL_VERSION;
  reply.pid = (uint64_t)getpid();
  reply.uptime_seconds = (double)(halo_clock_now_ns() - daemon->start_ns) / 1e9;
  reply.sessions = (uint32_t)daemon->sessions_by_id.count;
  reply.incarnation = daemon->incarnation;
  reply.listen_address = daemon->config.listen;
  reply.trust_domains = (uint32_t)daemon->domains.count;

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
  for (uint32_t i = 0; i < daemon->hal.device_count; ++i) {
    const halo_hal_device_t *device = daemon->hal.devices[i];
    halo__wire__device_info__init(&devices[i]);
    devices[i].ordinal = i;
    devices[i].driver = (char *)device->info.driver;
    devices[i].name = (char *)device->info.name;
    devices[i].memory_bytes = device->info.memory_bytes;
    devices[i].has_compute_major = devices[i].has_compute_minor = true;
    devices[i].compute_major = device->info.compute_major;
    devices[i].compute_minor = device->info.compute_minor;
    devices[i].has_multiprocessor_count = true;
    devices[i].multiprocessor_count = device->info.multiprocessor_count;
    device_pointers[i] = &devices[i];
  }
  reply.n_devices = daemon->hal.device_count;
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

static void halod_admin_sessions(halod_t *daemon,
                                 halod_server_context_t *context) {
  size_t count = daemon->sessions_by_id.count;
  Halo__Wire__SessionInfo *infos;
  Halo__Wire__SessionInfo **pointers;
  if (!halod_admin_listing_allocate(context, count, sizeof(*infos),
                                    (void **)&infos, (void ***)&pointers)) {
    return;
  }
  int64_t now = halo_clock_now_ns();
  size_t n = 0;
  for (size_t i = 0; i < daemon->sessions_by_id.capacity; ++i) {
    if (!daemon->sessions_by_id.entries[i].key) continue;
    halod_session_t *session = daemon->sessions_by_id.entries[i].value;
    Halo__Wire__SessionInfo *info = &infos[n];
    halo__wire__session_info__init(info);
    info->session_id = session->id;
    info->uid = session->uid;
    info->pid = session->pid;
    info->trust_domain = session->domain->name;
    info->client_name = session->client_name;
    info->age_seconds = (double)(now - session->created_ns) / 1e9;
    info->buffers = session->buffers;
    info->semaphores = session->semaphores;
    info->host_bytes = session->host_bytes;
    info->device_bytes = session->device_bytes;
    info->arenas = session->arena_count;
    info->requests = session->requests;
    pointers[n++] = info;
  }
  Halo__Wire__AdminSessionsReply reply = HALO__WIRE__ADMIN_SESSIONS_REPLY__INIT;
  reply.n_sessions = n;
  reply.sessions = pointers;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_SESSIONS;
  response.admin_sessions = &reply;
  halod_reply(context, &response);
  free(infos);
  free(pointers);
}

static void halod_admin_semaphores(halod_t *daemon,
                                   halod_server_context_t *context) {
  size_t count = daemon->semaphores.count;
  Halo__Wire__SemaphoreInfo *infos;
  Halo__Wire__SemaphoreInfo **pointers;
  if (!halod_admin_listing_allocate(context, count, sizeof(*infos),
                                    (void **)&infos, (void ***)&pointers)) {
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < daemon->semaphores.capacity; ++i) {
    if (!daemon->semaphores.entries[i].key) continue;
    halod_semaphore_t *semaphore = daemon->semaphores.entries[i].value;
    Halo__Wire__SemaphoreInfo *info = &infos[n];
    halo__wire__semaphore_info__init(info);
    info->semaphore_id = semaphore->id;
    info->owner_session = semaphore->creator_session;
    info->value = halod_semaphore_value(semaphore);
    info->failure_code = halod_semaphore_failure(semaphore);
    info->holders = semaphore->refcount;
    info->exportable = semaphore->exportable;
    pointers[n++] = info;
  }
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

static void halod_admin_memo_cache(halod_t *daemon,
                                   halod_server_context_t *context) {
  size_t count = daemon->memo_cache.count;
  Halo__Wire__MemoEntry *infos;
  Halo__Wire__MemoEntry **pointers;
  if (!halod_admin_listing_allocate(context, count, sizeof(*infos),
                                    (void **)&infos, (void ***)&pointers)) {
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < daemon->memo_cache.capacity; ++i) {
    if (!daemon->memo_cache.entries[i].key) continue;
    halod_memo_entry_t *entry = daemon->memo_cache.entries[i].value;
    Halo__Wire__MemoEntry *info = &infos[n];
    halo__wire__memo_entry__init(info);
    info->key = entry->key_text;
    info->device = entry->device;
    info->commands = entry->command_count;
    info->hits = entry->hits;
    info->sharers = entry->sharers;
    pointers[n++] = info;
  }
  Halo__Wire__AdminMemoCacheReply reply =
      HALO__WIRE__ADMIN_MEMO_CACHE_REPLY__INIT;
  reply.n_entries = n;
  reply.entries = pointers;
  reply.hits = daemon->memo_hits;
  reply.misses = daemon->memo_misses;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_MEMO_CACHE;
  response.admin_memo_cache = &reply;
  halod_reply(context, &response);
  free(infos);
  free(pointers);
}

static void halod_admin_queues(halod_t *daemon,
                               halod_server_context_t *context) {
  size_t count = 0;
  for (size_t i = 0; i < daemon->sessions_by_id.capacity; ++i) {
    if (!daemon->sessions_by_id.entries[i].key) continue;
    halod_session_t *session = daemon->sessions_by_id.entries[i].value;
    for (halod_queue_t *q = session->queues; q; q = q->session_next) ++count;
  }
  Halo__Wire__QueueInfo *infos;
  Halo__Wire__QueueInfo **pointers;
  if (!halod_admin_listing_allocate(context, count, sizeof(*infos),
                                    (void **)&infos, (void ***)&pointers)) {
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < daemon->sessions_by_id.capacity; ++i) {
    if (!daemon->sessions_by_id.entries[i].key) continue;
    halod_session_t *session = daemon->sessions_by_id.entries[i].value;
    for (halod_queue_t *queue = session->queues; queue;
         queue = queue->session_next) {
      Halo__Wire__QueueInfo *info = &infos[n];
      halo__wire__queue_info__init(info);
      info->session_id = session->id;
      info->queue_handle = queue->handle;
      info->device = queue->device;
      info->pending = queue->waiting;
      info->in_flight = queue->in_flight;
      info->completed = queue->completed;
      info->failed = queue->failed;
      info->mean_latency_us =
          queue->completed
              ? (double)queue->latency_ns_total / (double)queue->completed / 1e3
              : 0.0;
      pointers[n++] = info;
    }
  }
  Halo__Wire__AdminQueuesReply reply = HALO__WIRE__ADMIN_QUEUES_REPLY__INIT;
  reply.n_queues = n;
  reply.queues = pointers;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_ADMIN_QUEUES;
  response.admin_queues = &reply;
  halod_reply(context, &response);
  free(infos);
  free(pointers);
}

void halod_admin_on_event(void *user_data, halod_server_event_t *event) {
  halod_t *daemon = user_data;
  if (event->kind != HALOD_SERVER_EVENT_REQUEST) {
    halod_server_event_free(event);
    return;
  }
  Halo__Wire__Request *wire = halo__wire__request__unpack(
      NULL, nng_msg_len(event->message), nng_msg_body(event->message));
  if (!wire) {
    halod_reply_status(event->context,
                       halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                        "admin request of %zu bytes does not "
                                        "decode",
                                        nng_msg_len(event->message)));
  } else if (wire->body_case == HALO__WIRE__REQUEST__BODY_ADMIN_STATUS) {
    halod_admin_status(daemon, event->context);
  } else if (wire->body_case == HALO__WIRE__REQUEST__BODY_ADMIN_SESSIONS) {
    halod_admin_sessions(daemon, event->context);
  } else if (wire->body_case == HALO__WIRE__REQUEST__BODY_ADMIN_SEMAPHORES) {
    halod_admin_semaphores(daemon, event->context);
  } else if (wire->body_case == HALO__WIRE__REQUEST__BODY_ADMIN_MEMO_CACHE) {
    halod_admin_memo_cache(daemon, event->context);
  } else if (wire->body_case == HALO__WIRE__REQUEST__BODY_ADMIN_QUEUES) {
    halod_admin_queues(daemon, event->context);
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
