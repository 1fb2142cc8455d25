// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halod's lifecycle: start, signals, stop; exports.
#include "daemon/daemon.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "common/timeline.h"
#include "daemon/buffer.h"
#include "daemon/cache.h"
#include "daemon/device_call.h"
#include "daemon/device_lost.h"
#include "daemon/executable.h"
#include "daemon/fd_server.h"
#include "daemon/instance_lock.h"
#include "daemon/requests.h"
#include "daemon/ring.h"
#include "daemon/ring_worker.h"
#include "daemon/semaphore.h"
#include "daemon/session.h"
#include "daemon/submission.h"
#include "daemon/trust_domain.h"
#include "daemon/workers.h"

uint64_t halod_next_id(halod_t *daemon) {
  return ++daemon->next_id;
}

static uint64_t halod_token_key(const uint8_t *token) {
  uint64_t key;
  memcpy(&key, token, sizeof(key));
  return key ? key : 1;
}

halo_status_t halod_export_create(halod_t *daemon, uint32_t type, void *object,
                                  uint8_t out_token[16]) {
  halod_export_t *entry = calloc(1, sizeof(*entry));
  if (!entry) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  // A fresh random token; retry on the (astronomically unlikely) collision of
  // its first 8 bytes with a live export.
  do {
    if (getrandom(entry->token, sizeof(entry->token), 0) != 16) {
      free(entry);
      return halo_status_from_errno(errno, "getrandom for an export token");
    }
  } while (
      halo_u64_map_get(&daemon->shared.exports, halod_token_key(entry->token)));
  entry->type = type;
  entry->object = object;
  halo_status_t status = halo_u64_map_put(&daemon->shared.exports,
                                          halod_token_key(entry->token), entry);
  if (status) {
    free(entry);
    return status;
  }
  memcpy(out_token, entry->token, 16);
  return NULL;
}

halo_status_t halod_export_lookup(halod_t *daemon, const uint8_t *token,
                                  size_t token_length, uint32_t type,
                                  void **out_object) {
  *out_object = NULL;
  if (token_length != 16) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "token of %zu bytes (tokens have 16)",
                            token_length);
  }
  halod_export_t *entry =
      halo_u64_map_get(&daemon->shared.exports, halod_token_key(token));
  if (!entry || memcmp(entry->token, token, 16) != 0 || entry->type != type) {
    return halo_status_make(HALO_STATUS_NOT_FOUND,
                            "no live exported %s has this token",
                            halod_object_type_name(type));
  }
  *out_object = entry->object;
  return NULL;
}

void halod_export_remove(halod_t *daemon, const uint8_t token[16]) {
  free(halo_u64_map_remove(&daemon->shared.exports, halod_token_key(token)));
}

// A signal handler in libuv runs on the loop: the work can happen here.
// Driver threads: a completion is in the deferred queue's inbox.
static void halod_wake_loop(void *wake_data) {
  uv_async_send((uv_async_t *)wake_data);
}

static void halod_on_completion(uv_async_t *async) {
  halod_t *daemon = async->data;
  halo_hal_deferred_queue_drain(&daemon->work.deferred);
}

static void halod_on_signal(uv_signal_t *handle, int signum) {
  halod_t *daemon = handle->data;
  HALO_LOG_INFO("received %s; shutting down", strsignal(signum));
  halod_stop(daemon);
}

// SIGHUP: re-read the config file (and the flags again) and apply what can
// change at run time; daemon/config.c logs each change, and each setting
// left for the next start.
static void halod_on_reload(uv_signal_t *handle, int signum) {
  (void)signum;
  halod_t *daemon = handle->data;
  halod_systemd_reloading(0);
  halod_config_t *next = malloc(sizeof(*next));
  halo_status_t status =
      next ? halod_config_reload(&daemon->config, next)
           : halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  if (status) {
    HALO_LOG_ERROR("reload: keeping the running configuration: %s",
                   halo_status_message(status));
    halo_status_free(status);
  } else {
    daemon->config = *next;
    halod_server_set_pipe_limits(
        daemon->client_server, daemon->config.connections,
        daemon->config.uid_connections + HALOD_UID_REFUSED_OPEN,
        daemon->config.uid_domains);
    halo_log_set_level(
        (halo_log_level_t)halo_log_level_parse(daemon->config.log_level));
    halod_metrics_configure(daemon);
    halod_cache_trim(daemon);
    halod_domains_end_idle(daemon);  // idle-domains
    HALO_LOG_INFO("reload: done (%s)", daemon->config.config_file[0]
                                           ? daemon->config.config_file
                                           : "no config file; flags only");
  }
  free(next);
  halod_systemd_reloading(1);
}

static void halod_summary(void *user_data, char *out_text, size_t capacity) {
  halod_admin_summary(user_data, out_text, capacity);
}

void halod_shared_initialize(halod_shared_t *shared) {
  halo_u64_map_initialize(&shared->pages);
  halo_u64_map_initialize(&shared->arenas);
  halo_u64_map_initialize(&shared->semaphores);
  halo_u64_map_initialize(&shared->exports);
}

void halod_shared_deinitialize(halod_shared_t *shared) {
  halo_u64_map_deinitialize(&shared->pages);
  halo_u64_map_deinitialize(&shared->arenas);
  halo_u64_map_deinitialize(&shared->semaphores);
  halo_u64_map_deinitialize(&shared->exports);
}

// A packed response of |code| and |text|, answered by the server's own
// threads; NULL if it does not pack (logged, naming |without|: what then
// goes without it).
static nng_msg *halod_packed_status(halo_status_code_t code, const char *text,
                                    const char *without) {
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.code = code;
  response.message = (char *)text;
  nng_msg *message = NULL;
  halo_status_t status = halo_wire_pack(&response.base, &message);
  if (status) {
    HALO_LOG_WARN("%s: %s", without, halo_status_message(status));
    halo_status_free(status);
  }
  return message;
}

// The answer to a request over session-requests (NULL: such requests are
// then dropped).
static nng_msg *halod_busy_reply(uint32_t session_requests) {
  char text[200];
  snprintf(text, sizeof(text),
           "this connection already has session-requests (%u) requests in "
           "flight; wait for their replies",
           session_requests);
  return halod_packed_status(HALO_STATUS_RESOURCE_EXHAUSTED, text,
                             "requests over session-requests will be dropped");
}

halo_status_t halod_start(halod_t *daemon, uv_loop_t *loop,
                          const halod_config_t *config) {
  memset(daemon, 0, sizeof(*daemon));
  daemon->loop = loop;
  daemon->config = *config;
  daemon->start_ns = halo_clock_now_ns();
  if (getrandom(&daemon->incarnation, sizeof(daemon->incarnation), 0) != 8) {
    return halo_status_from_errno(errno, "getrandom for the incarnation");
  }
  // Before anything starts or any path is touched: one halod per client
  // socket (daemon/instance_lock.h). A halod serving it without the lock
  // (an older one) still keeps its sockets: its fd channel answers.
  snprintf(daemon->fd_channel_path, sizeof(daemon->fd_channel_path), "%s.fd",
           config->listen + strlen("ipc://"));
  HALO_RETURN_IF_ERROR(
      halod_instance_lock_take(config->listen, daemon->fd_channel_path));
  bool stale = false;  // removed when the fd channel is created
  HALO_RETURN_IF_ERROR(halod_fd_server_check_free(daemon->fd_channel_path,
                                                  config->listen, &stale));
  halod_sessions_initialize(&daemon->sessions);
  halod_shared_initialize(&daemon->shared);
  halod_cache_initialize(&daemon->cache);
  HALO_RETURN_IF_ERROR(halo_hash_library_initialize());
  daemon->work.completion_async.data = daemon;
  // Before the completion handle: a lost device is handled before the
  // completions that report it (libuv runs pending handles in this order).
  halod_device_lost_start(daemon);
  uv_async_init(loop, &daemon->work.completion_async, halod_on_completion);
  halo_hal_deferred_queue_initialize(&daemon->work.deferred, halod_wake_loop,
                                     &daemon->work.completion_async);

  halo_status_t status = halod_device_calls_start(daemon);
  if (!status) status = halod_workers_start(daemon);
  if (status) {
    halod_stop(daemon);  // closes the handles opened so far
    return status;
  }
  for (int i = 0; i < HALO_HAL_DRIVER_COUNT; ++i) {
    const halo_hal_driver_info_t *driver = &daemon->hal.drivers[i];
    if (driver->available) {
      HALO_LOG_INFO("driver %s: available", driver->name);
    } else if (strcmp(driver->name, "cuda") == 0 &&
               access("/dev/nvidiactl", F_OK) == 0) {
      // A GPU host serving the CPU driver (driver auto) is worth a warning:
      // journalctl -p warning shows it.
      HALO_LOG_WARN(
          "driver cuda: unavailable (%s), although this host has NVIDIA's "
          "device nodes (/dev/nvidiactl): serving the devices listed below",
          driver->reason);
    } else {
      HALO_LOG_INFO("driver %s: unavailable (%s)", driver->name,
                    driver->reason);
    }
  }
  for (uint32_t i = 0; i < daemon->hal.device_count; ++i) {
    const halo_hal_device_info_t *info = halod_device_info(daemon, i);
    HALO_LOG_INFO("device %u: %s %s", i, info->driver, info->name);
  }

  // The fd channel sits beside the client socket (fd_channel_path).
  status = halod_fd_server_create(daemon, daemon->fd_channel_path,
                                  config->socket_mode, config->socket_group,
                                  &daemon->fd_server);
  if (!status) status = halod_rings_start(daemon);
  if (!status) status = halod_ring_workers_start(daemon);
  halod_requests_start(daemon);
  nng_msg *busy = halod_busy_reply(config->session_requests);
  halod_server_options_t options = {
      .address = config->listen,
      .socket_mode = config->socket_mode,
      .socket_group = config->socket_group,
      .max_message_bytes = config->max_message_bytes,
      .contexts = config->contexts,
      .reply_timeout_ms = config->reply_timeout_ms,
      .pipe_requests = config->session_requests,
      .uid_replies = config->uid_replies,
      // calls twice: requests waiting for calls, and for workers' starts.
      .spares = config->loads + 2 * config->calls,
      .busy = busy,
      .max_pipes = config->connections,
      .max_tenant_pipes = config->uid_connections + HALOD_UID_REFUSED_OPEN,
      .tenancy = halod_tenancy_make(config->trust_domain,
                                    config->trust_domain_cgroup_trim),
      .max_uid_tenants = config->uid_domains,
      .handler = halod_requests_on_event,
      .user_data = daemon,
  };
  if (!status) {
    status = halod_server_create(loop, &options, &daemon->client_server);
  }
  if (!status) {
    options.address = config->admin;
    options.socket_group = config->admin_group;
    options.spares = 0;  // the admin socket loads and calls nothing
    options.max_pipes = options.max_tenant_pipes = 0;
    options.tenancy.by_cgroup = false;  // no per-tenant bound to count
    if (options.max_message_bytes > HALOD_ADMIN_MAX_MESSAGE_BYTES) {
      options.max_message_bytes = HALOD_ADMIN_MAX_MESSAGE_BYTES;
    }
    options.handler = halod_admin_on_event;
    status = halod_server_create(loop, &options, &daemon->admin_server);
  }
  if (busy) nng_msg_free(busy);
  if (!status && config->metrics_address[0]) {
    status = halod_metrics_http_start(daemon, loop, config->metrics_address,
                                      &daemon->metrics_http);
  }
  if (status) {
    halod_stop(daemon);
    return status;
  }
  daemon->sigterm.data = daemon->sigint.data = daemon->sighup.data = daemon;
  uv_signal_init(loop, &daemon->sigterm);
  uv_signal_init(loop, &daemon->sigint);
  uv_signal_init(loop, &daemon->sighup);
  uv_signal_start(&daemon->sigterm, halod_on_signal, SIGTERM);
  uv_signal_start(&daemon->sigint, halod_on_signal, SIGINT);
  uv_signal_start(&daemon->sighup, halod_on_reload, SIGHUP);
  halod_sessions_start(daemon);
  halod_semaphores_start(daemon);
  signal(SIGPIPE, SIG_IGN);
  HALO_LOG_INFO("ready: listening on %s, admin %s, fd channel %s (pid %d)",
                config->listen, config->admin, daemon->fd_channel_path,
                (int)getpid());
  halod_metrics_configure(daemon);
  halod_systemd_ready(&daemon->systemd, loop, halod_summary, daemon);
  return NULL;
}

// The reply to every request halod does not serve any more.
static nng_msg *halod_stopping_reply(void) {
  return halod_packed_status(HALO_STATUS_UNAVAILABLE, HALOD_STOPPING_MESSAGE,
                             "stopping without a reply for requests");
}

// Fails every semaphore with UNAVAILABLE: every waiter, in every process,
// wakes now. The slots say why, so a waiter does not ask this daemon.
static void halod_stop_fail_semaphores(halod_t *daemon) {
  halo_timeline_failure_info_t info = {
      .reason = HALO_TIMELINE_FAILURE_DAEMON_STOPPING,
  };
  // Every slot's reason first: one failure fails others (the signals of
  // submissions waiting on it) before this loop reaches them.
  for (size_t i = 0; i < daemon->shared.semaphores.capacity; ++i) {
    if (!daemon->shared.semaphores.entries[i].key) continue;
    halod_semaphore_t *semaphore = daemon->shared.semaphores.entries[i].value;
    halo_timeline_slot_set_failure_info(semaphore->hal.slot, &info);
  }
  static const char reason[] = "halod is stopping (SIGTERM: a stop or restart)";
  size_t count = 0;
  halod_semaphore_t **all = halod_semaphores_retain_all(daemon, 0, &count);
  if (!all) {
    // Their waiters learn of the stop when halod exits (its pidfd).
    HALO_LOG_ERROR("stop: out of memory listing the semaphores to fail");
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    halod_semaphore_fail(all[i], HALO_STATUS_UNAVAILABLE, "%s", reason);
  }
  halod_semaphores_release_all(daemon, all, count);
}

// Waits (at most until |deadline_ns|) until no request reached either
// socket for HALOD_STOP_QUIET_NS: refused clients stop sending, and a
// socket closed while no message is on its way does not hit nng's close
// hang (halod_server_destroy).
static void halod_stop_wait_quiet(halod_t *daemon, int64_t deadline_ns) {
  for (;;) {
    int64_t last = halod_server_last_request_ns(daemon->client_server);
    int64_t admin = halod_server_last_request_ns(daemon->admin_server);
    if (admin > last) last = admin;
    int64_t now = halo_clock_now_ns();
    if (now - last >= HALOD_STOP_QUIET_NS || now >= deadline_ns) return;
    usleep(1000);
  }
}

void halod_stop(halod_t *daemon) {
  if (daemon->stopping) return;
  daemon->stopping = true;
  int64_t start = halo_clock_now_ns();
  daemon->stop_deadline_ns = start + HALOD_STOP_BUDGET_NS;
  halod_stop_watchdog_start(&daemon->stop_watchdog,
                            start + HALOD_STOP_WATCHDOG_NS);
  halod_systemd_stopping(&daemon->systemd);
  halod_metrics_http_stop(daemon->metrics_http);
  daemon->metrics_http = NULL;
  halod_metrics_stop(daemon);
  halod_sessions_stop(daemon);
  halod_semaphores_stop(daemon);
  // Nothing of what follows touches nng before the clients know: first no
  // request reaches the loop any more, and those not served yet (queued,
  // or arriving from now on) are answered UNAVAILABLE at once.
  nng_msg *refusal = halod_stopping_reply();
  halod_server_stop(daemon->client_server, refusal);
  halod_server_stop(daemon->admin_server, refusal);
  if (refusal) nng_msg_free(refusal);
  // And those waiting in their domains' lanes.
  halod_requests_stop(daemon);
  // Every waiter wakes with UNAVAILABLE.
  halod_stop_fail_semaphores(daemon);
  // The fd channel's requests in flight fail too (it maps pages and
  // buffers: nothing to map any more).
  halod_fd_server_destroy(daemon->fd_server);
  daemon->fd_server = NULL;
  // Requests waiting for executable loads are answered too; the loads are
  // dropped.
  halod_stop_watchdog_set_phase(&daemon->stop_watchdog,
                                "stopping executable loads");
  halod_executable_stop_loads(daemon, start + HALOD_STOP_LOADS_NS);
  // And those waiting for a device worker's control call (or behind one).
  halod_stop_watchdog_set_phase(&daemon->stop_watchdog,
                                "stopping device calls");
  halod_device_calls_stop(daemon, start + HALOD_STOP_LOADS_NS);
  // Every request is answered now: the sockets close once quiet (bounded,
  // see halod_server_destroy).
  halod_stop_watchdog_set_phase(&daemon->stop_watchdog,
                                "closing the client and admin sockets");
  halod_stop_wait_quiet(daemon, start + HALOD_STOP_QUIET_MAX_NS);
  int64_t sockets_deadline = start + HALOD_STOP_SOCKETS_NS;
  halod_server_destroy(daemon->client_server, sockets_deadline);
  daemon->client_server = NULL;
  halod_server_destroy(daemon->admin_server, sockets_deadline);
  daemon->admin_server = NULL;
  // Sessions release everything they hold.
  halod_stop_watchdog_set_phase(&daemon->stop_watchdog, "releasing sessions");
  while (daemon->sessions.by_id.count > 0) {
    for (size_t i = 0; i < daemon->sessions.by_id.capacity; ++i) {
      if (daemon->sessions.by_id.entries[i].key) {
        halod_session_destroy(daemon, daemon->sessions.by_id.entries[i].value);
        break;
      }
    }
  }
  // Released entries kept for later clients go, and the domains that
  // stayed for them.
  halod_cache_clear(daemon);
  halod_domains_end_idle(daemon);
  // Issued work finishes (nothing preempts it; with device workers it ends
  // with them); its completions retire it. Not past the deadline: work
  // still running then is left to the process exit.
  halod_stop_watchdog_set_phase(&daemon->stop_watchdog,
                                "waiting for executions in flight");
  // And what workers took from rings themselves: their grants hold what
  // those use until they are done.
  while ((daemon->work.deferred.issued > 0 ||
          halod_ring_workers_sync(daemon, NULL) > 0) &&
         halo_clock_now_ns() < daemon->stop_deadline_ns) {
    halo_hal_deferred_queue_drain(&daemon->work.deferred);
    usleep(1000);
  }
  if (daemon->work.deferred.issued > 0) {
    HALO_LOG_WARN(
        "%u executions still running %lld ms after the signal; exiting "
        "without them",
        daemon->work.deferred.issued,
        (long long)((halo_clock_now_ns() - start) / 1000000));
  } else {
    halo_hal_deferred_queue_deinitialize(&daemon->work.deferred);
    daemon->work.deferred_closed = true;
  }
  halod_stop_watchdog_set_phase(&daemon->stop_watchdog, "freeing the rest");
  if (daemon->work.completion_async.loop) {
    uv_close((uv_handle_t *)&daemon->work.completion_async, NULL);
  }
  halod_device_calls_close(daemon);
  halod_ring_workers_stop(daemon);
  halod_rings_stop(daemon);
  if (daemon->sigterm.loop) {
    uv_close((uv_handle_t *)&daemon->sigterm, NULL);
    uv_close((uv_handle_t *)&daemon->sigint, NULL);
    uv_close((uv_handle_t *)&daemon->sighup, NULL);
  }
  halod_device_lost_unwatch(daemon);
  halod_workers_stop(daemon);
  // A load still running on a device in halod itself (a compile) would
  // keep the loop running until it ends: main() exits without it.
  if (halod_executable_inline_loads_running(daemon)) uv_stop(daemon->loop);
  halod_stop_watchdog_set_phase(&daemon->stop_watchdog,
                                "waiting for device workers to exit");
  halod_sessions_deinitialize(&daemon->sessions);
  halod_shared_deinitialize(&daemon->shared);
  halod_cache_deinitialize(&daemon->cache);
}
