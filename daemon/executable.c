// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/executable.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/session.h"
#include "daemon/workers.h"
#include "hal/remote/remote_device.h"

static const char *halod_executable_format_name(uint32_t format) {
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
      return NULL;
  }
}

// Native code runs inside halod (until per-domain workers exist): only
// sessions the operator trusts may load it.
static halo_status_t halod_executable_check_trust(halod_t *daemon,
                                                  halod_session_t *session) {
  const char *policy = daemon->config.native_code;
  if (strcmp(policy, "any") == 0) return NULL;
  if (strcmp(policy, "owner") == 0 &&
      (session->uid == 0 || session->uid == (uint32_t)geteuid())) {
    return NULL;
  }
  return halo_status_make(HALO_STATUS_PERMISSION_DENIED,
                          "loading native code (ELF) is not allowed for uid "
                          "%u (halod's native-code setting is '%s')",
                          session->uid, policy);
}

// Content, options and the device it loads on: executables are shared by
// the sessions of one trust domain (each domain's device is its own worker).
static void halod_executable_hash(const Halo__Wire__ExecutableCreate *request,
                                  const halo_hal_device_t *device,
                                  halo_hash_t *out_hash) {
  halo_hasher_t hasher;
  halo_hasher_initialize(&hasher);
  halo_hasher_update_u64(&hasher, request->device);
  halo_hasher_update_u64(&hasher, (uint64_t)(uintptr_t)device);
  halo_hasher_update_u64(&hasher, (uint64_t)request->format);
  halo_hasher_update_u64(&hasher, request->n_options);
  for (size_t i = 0; i < request->n_options; ++i) {
    halo_hasher_update_bytes(&hasher, request->options[i],
                             strlen(request->options[i]));
  }
  halo_hasher_update_bytes(&hasher, request->data.data, request->data.len);
  halo_hasher_finalize(&hasher, out_hash);
}

// A request waiting for a load.
struct halod_executable_waiter_t {
  halod_executable_waiter_t *next;
  halod_server_context_t *context;
  uint64_t session_id;
  uint64_t domain_key;  // its session's trust domain (base_key: every part)
  bool cached;          // it found the load already under way
};

// One load in flight on a libuv worker. The worker reads the copies below
// and writes the results; the loop reads the results only after the worker
// is done (uv's after-work callback, or |done| in halod_stop).
struct halod_executable_load_t {
  uv_work_t work;
  halod_t *daemon;
  halod_executable_load_t *next;  // daemon->cache.loads
  halod_executable_t *executable;
  halo_hal_device_t *device;
  uint32_t device_index;
  // Copies of the request (freed once its handler returns).
  uint32_t format;
  void *data;
  size_t size;
  char **options;
  uint32_t option_count;
  // Results.
  halo_hal_executable_t *hal;
  halo_status_t status;
  int64_t load_ns;
  atomic_bool done;
  bool abandoned;  // dropped by halod_stop
  bool cancelled;  // by halod_stop before it started
  bool killed;     // halod_stop killed its device worker
};

static halo_status_t halod_executable_check(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__ExecutableCreate *request) {
  uint32_t format = (uint32_t)request->format;
  const char *format_name = halod_executable_format_name(format);
  if (!format_name) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "unknown executable format %u", format);
  }
  if (request->device >= daemon->hal.device_count) {
    return halo_status_make(HALO_STATUS_OUT_OF_RANGE,
                            "device %u does not exist (the daemon has %u)",
                            request->device, daemon->hal.device_count);
  }
  if (request->data.len == 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the %s executable is empty", format_name);
  }
  if (request->n_options > HALOD_MAX_EXECUTABLE_OPTIONS) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%zu compiler options (at most %u)",
                            request->n_options, HALOD_MAX_EXECUTABLE_OPTIONS);
  }
  if (format == HALO_HAL_EXECUTABLE_FORMAT_ELF) {
    HALO_RETURN_IF_ERROR(halod_executable_check_trust(daemon, session));
  }
  return NULL;
}

// Answers |context| with a new handle of |session| on |executable|, whose
// reference for that handle the caller took.
static void halod_executable_reply(halod_t *daemon, halod_session_t *session,
                                   halod_executable_t *executable,
                                   halod_server_context_t *context,
                                   bool cached) {
  uint64_t handle = 0;
  halo_status_t status = halod_session_add_object(
      daemon, session, HALOD_OBJECT_EXECUTABLE, executable, &handle);
  if (status) {
    halod_reply_status(context, status);
    return;
  }
  Halo__Wire__ExecutableReply reply = HALO__WIRE__EXECUTABLE_REPLY__INIT;
  reply.handle = handle;
  reply.content_hash = executable->hash_text;
  reply.cached = cached;
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.body_case = HALO__WIRE__RESPONSE__BODY_EXECUTABLE;
  response.executable = &reply;
  halod_reply(context, &response);
}

static halo_status_t halod_executable_add_waiter(
    halod_executable_t *executable, halod_session_t *session,
    halod_server_context_t *context, bool cached) {
  halod_executable_waiter_t *waiter = calloc(1, sizeof(*waiter));
  if (!waiter) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  waiter->context = context;
  waiter->session_id = session->id;
  waiter->domain_key = session->domain->base_key;
  waiter->cached = cached;
  // Appended: requests are answered in arrival order.
  halod_executable_waiter_t **link = &executable->waiters;
  while (*link) link = &(*link)->next;
  *link = waiter;
  return NULL;
}

static void halod_executable_load_free(halod_executable_load_t *load) {
  if (load->device) halod_device_release(load->device);
  for (uint32_t i = 0; i < load->option_count; ++i) free(load->options[i]);
  free(load->options);
  free(load->data);
  halo_status_free(load->status);
  free(load);
}

// libuv worker thread: the driver's work, nothing of the daemon's state.
static void halod_executable_load_work(uv_work_t *work) {
  halod_executable_load_t *load = work->data;
  halo_hal_executable_params_t params = {
      .format = load->format,
      .data = load->data,
      .size = load->size,
      .options = (const char *const *)load->options,
      .option_count = load->option_count,
  };
  int64_t start = halo_clock_now_ns();
  load->status = load->device->vtable->create_executable(load->device, &params,
                                                         &load->hal);
  load->load_ns = halo_clock_now_ns() - start;
  atomic_store_explicit(&load->done, true, memory_order_release);
}

static void halod_executable_unlink_load(halod_t *daemon,
                                         halod_executable_load_t *load) {
  halod_executable_load_t **link = &daemon->cache.loads;
  while (*link && *link != load) link = &(*link)->next;
  if (*link) *link = load->next;
}

// Loop thread: publish the executable (or the error) and answer every
// request that waited for it.
static void halod_executable_load_done(uv_work_t *work, int uv_status) {
  halod_executable_load_t *load = work->data;
  halod_t *daemon = load->daemon;
  halod_executable_unlink_load(daemon, load);
  if (load->abandoned) {
    // Finished after halod_stop gave up waiting for it.
    if (load->hal) halo_hal_executable_destroy(load->hal);
    halod_executable_load_free(load);
    return;
  }
  halod_executable_t *executable = load->executable;
  if (uv_status == UV_ECANCELED && !load->status) {
    load->status = halo_status_make(HALO_STATUS_CANCELLED,
                                    "the load was cancelled (halod is "
                                    "stopping)");
  }
  const char *format_name = halod_executable_format_name(executable->format);
  // A reference of our own while answering, so that a failed handle does
  // not free the executable under the next waiter; taken while it still
  // loads (no accounting: halod_executable_unheld).
  ++executable->refcount;
  executable->loading = false;
  halod_executable_waiter_t *waiter = executable->waiters;
  executable->waiters = NULL;
  if (load->status) {
    halo_status_t status = halo_status_annotate(
        load->status, "loading a %s executable of %zu bytes", format_name,
        load->size);
    load->status = NULL;
    HALO_LOG_DEBUG("executable %.16s: %s", executable->hash_text,
                   halo_status_message(status));
    halo_u64_map_remove(&daemon->cache.executables,
                        halo_hash_key(&executable->hash));
    free(executable);
    while (waiter) {
      halod_executable_waiter_t *next = waiter->next;
      halod_reply_status(waiter->context,
                         halo_status_make(halo_status_code(status), "%s",
                                          halo_status_message(status)));
      free(waiter);
      waiter = next;
    }
    halo_status_free(status);
    halod_executable_load_free(load);
    return;
  }
  executable->hal = load->hal;
  executable->load_ns = load->load_ns;
  HALO_LOG_INFO(
      "executable %.16s: %s, %zu bytes, loaded on device %u in "
      "%.3f ms",
      executable->hash_text, format_name, load->size, executable->device,
      (double)executable->load_ns / 1e6);
  while (waiter) {
    halod_executable_waiter_t *next = waiter->next;
    halod_session_t *session =
        halo_u64_map_get(&daemon->sessions.by_id, waiter->session_id);
    if (session) {
      halod_executable_retain(daemon, executable);
      halod_executable_reply(daemon, session, executable, waiter->context,
                             waiter->cached);
    } else {
      // The client went away while its executable loaded. The context is
      // answered anyway so that it serves again (nng drops the reply).
      halod_reply_status(waiter->context,
                         halo_status_make(HALO_STATUS_UNAVAILABLE,
                                          "the session ended while its "
                                          "executable loaded"));
    }
    free(waiter);
    waiter = next;
  }
  halod_executable_load_free(load);
  halod_executable_release(daemon, executable);
}

// Copies what the worker needs of |request| into |load|.
static halo_status_t halod_executable_load_copy(
    halod_executable_load_t *load,
    const Halo__Wire__ExecutableCreate *request) {
  load->format = (uint32_t)request->format;
  load->size = request->data.len;
  load->data = malloc(load->size);
  load->options = calloc(request->n_options + 1, sizeof(char *));
  if (!load->data || !load->options) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  memcpy(load->data, request->data.data, load->size);
  for (size_t i = 0; i < request->n_options; ++i) {
    load->options[i] = strdup(request->options[i]);
    if (!load->options[i]) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    }
    ++load->option_count;
  }
  return NULL;
}

// Starts loading: the executable is in the map as loading, |session|'s
// request its first waiter.
static halo_status_t halod_executable_start_load(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__ExecutableCreate *request, const halo_hash_t *hash,
    halod_server_context_t *context) {
  halod_executable_t *executable = calloc(1, sizeof(*executable));
  halod_executable_load_t *load = calloc(1, sizeof(*load));
  halo_status_t status =
      executable && load
          ? halod_executable_load_copy(load, request)
          : halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  if (!status) {
    executable->id = halod_next_id(daemon);
    executable->device = request->device;
    executable->format = (uint32_t)request->format;
    executable->hash = *hash;
    halo_hash_format(hash, executable->hash_text);
    executable->loading = true;
    executable->bytes = request->data.len;
    executable->lru.device = session->domain->workers[request->device].device;
    status = halod_executable_add_waiter(executable, session, context, false);
  }
  if (!status) {
    status = halo_u64_map_put(&daemon->cache.executables, halo_hash_key(hash),
                              executable);
  }
  if (status) {
    if (executable) free(executable->waiters);
    free(executable);
    if (load) halod_executable_load_free(load);
    return status;
  }
  load->daemon = daemon;
  load->executable = executable;
  load->device = session->domain->workers[request->device].device;
  halod_device_retain(load->device);
  load->device_index = request->device;
  atomic_init(&load->done, false);
  load->work.data = load;
  int rc = uv_queue_work(daemon->loop, &load->work, halod_executable_load_work,
                         halod_executable_load_done);
  if (rc != 0) {
    halo_u64_map_remove(&daemon->cache.executables, halo_hash_key(hash));
    free(executable->waiters);
    free(executable);
    halod_executable_load_free(load);
    return halo_status_make(HALO_STATUS_INTERNAL, "uv_queue_work: %s",
                            uv_strerror(rc));
  }
  load->next = daemon->cache.loads;
  daemon->cache.loads = load;
  HALO_LOG_DEBUG(
      "executable %.16s: loading a %s of %zu bytes on device %u "
      "(session %llu)",
      executable->hash_text, halod_executable_format_name(executable->format),
      request->data.len, request->device, (unsigned long long)session->id);
  return NULL;
}

// How long a load refused for now asks its client to wait before sending
// it again.
#define HALOD_EXECUTABLE_RETRY_MS 20

// The requests of trust domain |domain_key| (every one for 0) waiting for
// a load.
static uint32_t halod_executable_domain_waiting(const halod_t *daemon,
                                                uint64_t domain_key) {
  uint32_t waiting = 0;
  for (const halod_executable_load_t *load = daemon->cache.loads; load;
       load = load->next) {
    if (load->abandoned) continue;
    for (const halod_executable_waiter_t *waiter = load->executable->waiters;
         waiter; waiter = waiter->next) {
      if (!domain_key || waiter->domain_key == domain_key) ++waiting;
    }
  }
  return waiting;
}

uint32_t halod_executable_loads_waiting(const halod_t *daemon) {
  return halod_executable_domain_waiting(daemon, 0);
}

bool halod_executable_inline_loads_running(const halod_t *daemon) {
  for (const halod_executable_load_t *load = daemon->cache.loads; load;
       load = load->next) {
    if (!load->cancelled && !halo_hal_remote_device_is(load->device) &&
        !atomic_load_explicit(&load->done, memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

// Whether |session|'s request on |context| may wait for a load: its trust
// domain has fewer than domain-loads waiting, and a spare context takes its
// place on the socket (loads), so that waiting loads never hold a context
// other requests need. Else it is refused for now (libhalo sends it again)
// and false returned.
static bool halod_executable_admit(halod_t *daemon, halod_session_t *session,
                                   halod_server_context_t *context) {
  uint32_t waiting =
      halod_executable_domain_waiting(daemon, session->domain->base_key);
  halo_status_t status = NULL;
  if (waiting >= daemon->config.domain_loads) {
    status = halo_status_make(
        HALO_STATUS_RESOURCE_EXHAUSTED,
        "trust domain %s has %u executable loads waiting (domain-loads %u); "
        "send it again later",
        session->domain->name, waiting, daemon->config.domain_loads);
  } else if (halod_executable_domain_waiting(daemon, 0) >=
                 daemon->config.loads ||
             !halod_server_hold(context)) {
    // Counted as well as held: the spares are shared with the requests
    // waiting for workers (calls), which count theirs.
    status = halo_status_make(
        HALO_STATUS_RESOURCE_EXHAUSTED,
        "every one of halod's %u places for executable loads is taken "
        "(loads); send it again later",
        daemon->config.loads);
  }
  if (!status) return true;
  ++daemon->stats.loads_refused;
  HALO_LOG_DEBUG("session %llu: %s", (unsigned long long)session->id,
                 halo_status_message(status));
  halod_reply_retry(context, status, HALOD_EXECUTABLE_RETRY_MS);
  return false;
}

void halod_executable_load(halod_t *daemon, halod_session_t *session,
                           const Halo__Wire__ExecutableCreate *request,
                           halod_server_context_t *context) {
  halo_status_t status = halod_executable_check(daemon, session, request);
  if (status) {
    halod_reply_status(context, status);
    return;
  }
  halo_hal_device_t *device = NULL;
  status =
      halod_domain_device(daemon, session->domain, request->device, &device);
  if (status) {
    halod_reply_status(context, status);
    return;
  }
  halo_hash_t hash;
  halod_executable_hash(request, device, &hash);
  halod_executable_t *existing =
      halo_u64_map_get(&daemon->cache.executables, halo_hash_key(&hash));
  if (existing && memcmp(existing->hash.bytes, hash.bytes, sizeof(hash)) != 0) {
    halod_reply_status(context,
                       halo_status_make(HALO_STATUS_INTERNAL,
                                        "executable hash prefix collision; "
                                        "not loaded"));
    return;
  }
  // Waiting for a load (this one's, or another session's of the same bytes)
  // needs a place (loads, domain-loads).
  if ((!existing || existing->loading) &&
      !halod_executable_admit(daemon, session, context)) {
    return;
  }
  if (existing) {
    ++daemon->stats.executable_hits;
    ++existing->hits;
  }
  if (existing && existing->loading) {
    // Another session's load of the same bytes is under way: share it.
    status = halod_executable_add_waiter(existing, session, context, true);
    if (status) halod_reply_status(context, status);
    return;
  }
  if (existing) {
    // Held by others, or kept after its last release: in use again.
    halod_cache_lru_take(&daemon->cache.executable_lru, &existing->lru);
    halod_executable_retain(daemon, existing);
    halod_executable_reply(daemon, session, existing, context, true);
    return;
  }
  ++daemon->stats.executable_misses;
  status =
      halod_executable_start_load(daemon, session, request, &hash, context);
  if (status) {
    halod_reply_status(
        context, halo_status_annotate(
                     status, "loading a %s executable of %zu bytes",
                     halod_executable_format_name((uint32_t)request->format),
                     request->data.len));
  }
}

void halod_executable_stop_loads(halod_t *daemon, int64_t deadline_ns) {
  // Every request waiting for a load is answered now. A load not started
  // never will be (its after-work callback still runs, with UV_ECANCELED);
  // its after-work callback drops what a started one returns.
  for (halod_executable_load_t *load = daemon->cache.loads; load;
       load = load->next) {
    if (load->abandoned) continue;
    load->cancelled = uv_cancel((uv_req_t *)&load->work) == 0;
    load->abandoned = true;
    halod_executable_t *executable = load->executable;
    halo_u64_map_remove(&daemon->cache.executables,
                        halo_hash_key(&executable->hash));
    while (executable->waiters) {
      halod_executable_waiter_t *next = executable->waiters->next;
      halod_reply_status(executable->waiters->context,
                         halo_status_make(HALO_STATUS_UNAVAILABLE,
                                          "halod is stopping (SIGTERM); the "
                                          "executable was not loaded"));
      free(executable->waiters);
      executable->waiters = next;
    }
    free(executable);
    load->executable = NULL;
  }
  // Started loads get until |deadline_ns| to finish.
  for (halod_executable_load_t *load = daemon->cache.loads; load;
       load = load->next) {
    while (!load->cancelled &&
           !atomic_load_explicit(&load->done, memory_order_acquire) &&
           halo_clock_now_ns() < deadline_ns) {
      usleep(1000);
    }
  }
  for (halod_executable_load_t *load = daemon->cache.loads; load;
       load = load->next) {
    if (atomic_load_explicit(&load->done, memory_order_acquire)) {
      if (load->hal) halo_hal_executable_destroy(load->hal);
      load->hal = NULL;
      continue;
    }
    if (load->cancelled) continue;
    bool remote = halo_hal_remote_device_is(load->device);
    bool killed = false;  // with an earlier load of the same worker
    for (halod_executable_load_t *other = daemon->cache.loads;
         remote && other != load; other = other->next) {
      killed |= other->killed && other->device == load->device;
    }
    load->killed = remote;
    if (killed) continue;
    if (remote) {
      // The load's call would keep the loop (and halod) waiting past the
      // stop's budget; its worker's end ends it.
      HALO_LOG_WARN(
          "an executable load still runs on device %u; killing its device "
          "worker (pid %d) and stopping without it",
          load->device_index, (int)halo_hal_remote_device_pid(load->device));
      halo_hal_remote_device_kill(load->device);
    } else {
      HALO_LOG_WARN(
          "an executable load still runs on device %u; stopping without it "
          "(halod exits without waiting for it)",
          load->device_index);
    }
  }
}

bool halod_executable_unheld(const halod_executable_t *executable) {
  return !executable->loading &&
         executable->refcount == executable->kept_holders;
}

// Changes |executable|'s references by |references| and its kept holders
// by |kept|, counting its bytes in or out of the unheld executables'.
static void halod_executable_count(halod_t *daemon,
                                   halod_executable_t *executable,
                                   int32_t references, int32_t kept) {
  bool was_unheld = halod_executable_unheld(executable);
  executable->refcount += (uint32_t)references;
  executable->kept_holders += (uint32_t)kept;
  bool unheld = halod_executable_unheld(executable);
  if (was_unheld && !unheld) {
    daemon->cache.unheld_executable_bytes -= executable->bytes;
  } else if (!was_unheld && unheld) {
    daemon->cache.unheld_executable_bytes += executable->bytes;
  }
}

void halod_executable_retain(halod_t *daemon, halod_executable_t *executable) {
  halod_executable_count(daemon, executable, 1, 0);
}

void halod_executable_kept(halod_t *daemon, halod_executable_t *executable,
                           bool kept) {
  halod_executable_count(daemon, executable, 0, kept ? 1 : -1);
}

static void halod_executable_destroy(halod_t *daemon,
                                     halod_executable_t *executable) {
  // Released by every holder: counted as unheld until now.
  daemon->cache.unheld_executable_bytes -= executable->bytes;
  uint64_t key = halo_hash_key(&executable->hash);
  if (halo_u64_map_get(&daemon->cache.executables, key) == executable) {
    halo_u64_map_remove(&daemon->cache.executables, key);
  }
  halo_hal_executable_destroy(executable->hal);
  free(executable);
}

void halod_executable_release(halod_t *daemon, halod_executable_t *executable) {
  halod_executable_count(daemon, executable, -1, 0);
  if (executable->refcount > 0) {
    // Held by kept recordings alone now, perhaps.
    if (halod_executable_unheld(executable)) {
      halod_cache_bound_executable_bytes(daemon);
    }
    return;
  }
  // Not kept where it alone is past executable-cache-bytes (it would evict
  // every other first).
  uint32_t bound = daemon->config.executable_cache_entries;
  if (halod_cache_keeps(daemon, executable->lru.device, bound) &&
      daemon->config.executable_cache_bytes > 0 &&
      executable->bytes <= daemon->config.executable_cache_bytes) {
    halod_cache_lru_add(daemon, &daemon->cache.executable_lru, &executable->lru,
                        bound, UINT64_MAX);
    halod_cache_bound_executable_bytes(daemon);
    return;
  }
  halod_executable_destroy(daemon, executable);
}

void halod_executable_evict(halod_t *daemon, halod_cache_link_t *link) {
  halod_executable_destroy(
      daemon,
      (halod_executable_t *)((char *)link - offsetof(halod_executable_t, lru)));
}
