// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Control calls off the loop (see the header).
#include "daemon/device_call.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/requests.h"
#include "daemon/session.h"
#include "daemon/workers.h"
#include "hal/remote/remote_device.h"

// How long a call thread waits for another call before it ends.
#define HALOD_DEVICE_CALL_LINGER_NS (5000ll * 1000000)

typedef struct halod_device_calls_t halod_device_calls_t;

// A call thread: idle, it waits on its own |cond| for a call the loop hands
// it (|call|), so that a hand-off never wakes a thread that is busy.
typedef struct halod_call_thread_t {
  halod_device_calls_t *calls;
  struct halod_call_thread_t *next;  // idle list
  pthread_cond_t cond;
  halod_device_call_t *call;
} halod_call_thread_t;

// A device's calls: the one running (on a thread) and those waiting for it
// to be done. Loop only.
typedef struct halod_device_queue_t {
  halo_hal_device_t *device;
  halod_device_call_t *running;
  halod_device_call_t *head;
  halod_device_call_t *tail;
} halod_device_queue_t;

struct halod_device_calls_t {
  halod_t *daemon;
  uv_async_t async;
  // Loop only.
  halo_u64_map_t queues;  // device address -> halod_device_queue_t
  uint32_t waiting;       // started, not done
  bool stopped;           // halod_device_calls_stop ran
  // Requests waiting for workers (calls, domain-calls): a trust domain's
  // base key -> how many of its requests hold a place (uintptr_t), and all
  // of them: those waiting for a call, and those waiting for their
  // worker's start (a pool of its own, as large, so that domains starting
  // at once never take the places of domains that are up).
  halo_u64_map_t places;
  uint32_t placed;
  uint32_t start_placed;
  // Under |mutex|, shared with the threads.
  pthread_mutex_t mutex;
  halod_call_thread_t *idle;
  uint32_t threads;
  halod_device_call_t *done_head;  // calls whose work returned, in order
  halod_device_call_t *done_tail;
  bool closing;      // threads end once idle
  bool closed;       // |async| is closing: nothing is sent on it any more
  bool handle_gone;  // ... and closed: the last thread frees this
};

static void halod_device_calls_free(halod_device_calls_t *calls) {
  pthread_mutex_destroy(&calls->mutex);
  free(calls);
}

// Under |mutex|: hands |call| back to the loop.
static void halod_device_calls_push_done_locked(halod_device_calls_t *calls,
                                                halod_device_call_t *call) {
  call->next = NULL;
  if (calls->done_tail) {
    calls->done_tail->next = call;
  } else {
    calls->done_head = call;
  }
  calls->done_tail = call;
  if (!calls->closed) uv_async_send(&calls->async);
}

static void *halod_call_thread_main(void *argument) {
  halod_call_thread_t *self = argument;
  halod_device_calls_t *calls = self->calls;
  pthread_mutex_lock(&calls->mutex);
  for (;;) {
    halod_device_call_t *call = self->call;
    if (call) {
      self->call = NULL;
      pthread_mutex_unlock(&calls->mutex);
      call->work(call);
      pthread_mutex_lock(&calls->mutex);
      halod_device_calls_push_done_locked(calls, call);
      self->next = calls->idle;
      calls->idle = self;
    }
    struct timespec deadline = halo_clock_timespec(
        halo_clock_deadline_ns(HALOD_DEVICE_CALL_LINGER_NS));
    while (!self->call && !calls->closing) {
      if (pthread_cond_timedwait(&self->cond, &calls->mutex, &deadline) ==
          ETIMEDOUT) {
        break;
      }
    }
    if (self->call) continue;
    // Idle too long, or halod stops: leave the idle list and end.
    halod_call_thread_t **link = &calls->idle;
    while (*link && *link != self) link = &(*link)->next;
    if (*link) *link = self->next;
    break;
  }
  bool last = --calls->threads == 0 && calls->handle_gone;
  pthread_mutex_unlock(&calls->mutex);
  pthread_cond_destroy(&self->cond);
  free(self);
  if (last) halod_device_calls_free(calls);
  return NULL;
}

// Gives |call| to an idle thread, or to a new one. False if no thread
// could be started and none is idle.
static bool halod_device_calls_hand_off(halod_device_calls_t *calls,
                                        halod_device_call_t *call) {
  pthread_mutex_lock(&calls->mutex);
  halod_call_thread_t *thread = calls->idle;
  if (thread) {
    calls->idle = thread->next;
    thread->call = call;
    pthread_cond_signal(&thread->cond);
    pthread_mutex_unlock(&calls->mutex);
    return true;
  }
  pthread_mutex_unlock(&calls->mutex);
  thread = calloc(1, sizeof(*thread));
  if (!thread) return false;
  thread->calls = calls;
  thread->call = call;
  halo_clock_cond_initialize(&thread->cond);
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  pthread_mutex_lock(&calls->mutex);
  ++calls->threads;
  pthread_mutex_unlock(&calls->mutex);
  pthread_t id;
  int error = pthread_create(&id, &attributes, halod_call_thread_main, thread);
  pthread_attr_destroy(&attributes);
  if (error) {
    pthread_mutex_lock(&calls->mutex);
    --calls->threads;
    pthread_mutex_unlock(&calls->mutex);
    pthread_cond_destroy(&thread->cond);
    free(thread);
    HALO_LOG_WARN("no thread for a device call (%s); making it on the loop",
                  strerror(error));
    return false;
  }
  return true;
}

// Runs |call| now (on the loop) and hands it back as a thread would.
static void halod_device_calls_run_here(halod_device_calls_t *calls,
                                        halod_device_call_t *call) {
  call->work(call);
  pthread_mutex_lock(&calls->mutex);
  halod_device_calls_push_done_locked(calls, call);
  pthread_mutex_unlock(&calls->mutex);
}

// Starts the next call of |queue| (its running one is done), or forgets
// the queue when none waits.
static void halod_device_queue_next(halod_device_calls_t *calls,
                                    halod_device_queue_t *queue) {
  queue->running = queue->head;
  if (!queue->running) {
    halo_u64_map_remove(&calls->queues, (uint64_t)(uintptr_t)queue->device);
    free(queue);
    return;
  }
  queue->head = queue->running->next;
  if (!queue->head) queue->tail = NULL;
  queue->running->next = NULL;
  if (!halod_device_calls_hand_off(calls, queue->running)) {
    halod_device_calls_run_here(calls, queue->running);
  }
}

// ---------------------------------------------------------------- places

// How long a client refused for want of a place waits before it asks again
// (libhalo does, until its request's timeout).
#define HALOD_DEVICE_CALL_RETRY_MS 20

static uint32_t halod_device_calls_domain_placed(
    const halod_device_calls_t *calls, uint64_t domain_key) {
  return (uint32_t)(uintptr_t)halo_u64_map_get(&calls->places, domain_key);
}

static halo_status_t halod_device_calls_count_place(halod_device_calls_t *calls,
                                                    uint64_t domain_key,
                                                    bool start, int32_t delta) {
  uint32_t placed = halod_device_calls_domain_placed(calls, domain_key);
  placed += (uint32_t)delta;
  if (placed == 0) {
    halo_u64_map_remove(&calls->places, domain_key);
  } else {
    HALO_RETURN_IF_ERROR(halo_u64_map_put(&calls->places, domain_key,
                                          (void *)(uintptr_t)placed));
  }
  if (start) {
    calls->start_placed += (uint32_t)delta;
  } else {
    calls->placed += (uint32_t)delta;
  }
  return NULL;
}

// A place for |session|'s request on |context|, which is about to wait for
// a device worker (its own call, or its session's call ahead of it): within
// domain-calls of its trust domain and calls in all, and a spare context
// that receives in its place (halod_server_hold), so that requests waiting
// on a slow or stopped worker never hold the contexts other domains need.
// A request that holds its context already (it waited behind its session's
// call and now makes its own) only counts again. A request waiting for its
// session's worker to start (|start|) takes a place of the start's pool.
// Else the refusal for now (not answered yet).
static halo_status_t halod_device_calls_take_place(
    halod_device_calls_t *calls, halod_session_t *session,
    halod_server_context_t *context, bool start) {
  const halod_config_t *config = &calls->daemon->config;
  uint64_t domain_key = session->domain->base_key;
  bool held = halod_server_held(context);
  if (!held) {
    uint32_t placed = halod_device_calls_domain_placed(calls, domain_key);
    if (placed >= config->domain_calls) {
      return halo_status_make(
          HALO_STATUS_RESOURCE_EXHAUSTED,
          "trust domain %s has %u requests waiting for its device workers "
          "(domain-calls %u); send it again later",
          session->domain->name, placed, config->domain_calls);
    }
    uint32_t pool = start ? calls->start_placed : calls->placed;
    if (pool >= config->calls || !halod_server_hold(context)) {
      return halo_status_make(
          HALO_STATUS_RESOURCE_EXHAUSTED,
          "every one of halod's %u places for requests waiting on %s is "
          "taken (calls); send it again later",
          config->calls,
          start ? "their device worker's start" : "device workers");
    }
  }
  return halod_device_calls_count_place(calls, domain_key, start, 1);
}

static void halod_device_calls_refuse(halod_t *daemon, halod_session_t *session,
                                      halod_server_context_t *context,
                                      halo_status_t status) {
  ++daemon->stats.calls_refused;
  HALO_LOG_DEBUG("session %llu: %s", (unsigned long long)session->id,
                 halo_status_message(status));
  halod_reply_retry(context, status, HALOD_DEVICE_CALL_RETRY_MS);
}

bool halod_device_call_park(halod_t *daemon, halod_session_t *session,
                            halod_server_context_t *context) {
  halod_device_calls_t *calls = daemon->calls;
  if (!calls) return true;  // halod stops: answered with the others
  // A session waiting for its worker's start has no call of its own to
  // wait for: its requests all take the start's places.
  bool start = session->starting;
  halo_status_t status =
      halod_device_calls_take_place(calls, session, context, start);
  if (!status) {
    session->place_key = session->domain->base_key;
    if (start) ++session->start_parked;
    return true;
  }
  halod_device_calls_refuse(daemon, session, context, status);
  return false;
}

void halod_device_call_unpark(halod_t *daemon, halod_session_t *session) {
  // |place_key|: the session may have lost its domain meanwhile (its
  // worker did not start). Its requests leave in order: those parked
  // during its start first.
  halod_device_calls_t *calls = daemon->calls;
  if (!calls) return;
  bool start = session->start_parked > 0;
  if (start) --session->start_parked;
  halo_status_free(
      halod_device_calls_count_place(calls, session->place_key, start, -1));
}

// |call| will not run (its request answered already): handed back to the
// loop at once, cancelled, for its after step to release what it held.
static void halod_device_calls_cancel(halod_device_calls_t *calls,
                                      halod_device_call_t *call) {
  call->cancelled = true;
  pthread_mutex_lock(&calls->mutex);
  halod_device_calls_push_done_locked(calls, call);
  pthread_mutex_unlock(&calls->mutex);
}

static halo_status_t halod_device_calls_stopping(void) {
  return halo_status_make(HALO_STATUS_UNAVAILABLE, "%s",
                          HALOD_STOPPING_MESSAGE);
}

void halod_device_call_reply_status(halod_device_call_t *call,
                                    halo_status_t status) {
  if (!call->context) {
    halo_status_free(status);
    return;
  }
  halod_reply_status(call->context, status);
  call->context = NULL;
}

void halod_device_call_reply(halod_device_call_t *call,
                             const Halo__Wire__Response *response) {
  if (!call->context) return;
  halod_reply(call->context, response);
  call->context = NULL;
}

halo_status_t halod_device_call_session_gone(const halod_device_call_t *call,
                                             const halod_session_t *session) {
  if (call->cancelled) return halod_device_calls_stopping();
  if (!session) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE,
                            "the session ended while %s waited for its "
                            "device worker",
                            call->what);
  }
  if (session->lost_reason) {
    return halo_status_make(HALO_STATUS_SESSION_LOST, "%s",
                            session->lost_reason);
  }
  return NULL;
}

// The loop: what the calls of |calls| handed back, in order: each device's
// next call starts, then the call's after step, then its session's waiting
// requests.
static void halod_device_calls_finish(halod_device_calls_t *calls) {
  halod_t *daemon = calls->daemon;
  for (;;) {
    pthread_mutex_lock(&calls->mutex);
    halod_device_call_t *call = calls->done_head;
    if (call) {
      calls->done_head = call->next;
      if (!calls->done_head) calls->done_tail = NULL;
    }
    pthread_mutex_unlock(&calls->mutex);
    if (!call) return;
    call->next = NULL;
    halo_hal_device_t *device = call->device;
    halod_device_queue_t *queue =
        halo_u64_map_get(&calls->queues, (uint64_t)(uintptr_t)device);
    if (queue && queue->running == call) halod_device_queue_next(calls, queue);
    --calls->waiting;
    uint64_t session_id = call->session_id;
    halod_session_t *session =
        session_id ? halo_u64_map_get(&daemon->sessions.by_id, session_id)
                   : NULL;
    if (session && session->call == call) session->call = NULL;
    if (call->domain_key) {
      halo_status_free(
          halod_device_calls_count_place(calls, call->domain_key, false, -1));
      call->domain_key = 0;  // |done| may start it again (a next step)
    }
    call->done(daemon, call, session);
    halod_device_release(device);
    // Its session's next requests, now that this one was answered (the
    // session may have ended in the after step: looked up again).
    session = session_id ? halo_u64_map_get(&daemon->sessions.by_id, session_id)
                         : NULL;
    if (session && !session->call) halod_requests_resume(daemon, session);
  }
}

static void halod_device_calls_on_async(uv_async_t *async) {
  halod_device_calls_finish(async->data);
}

void halod_device_call_start(halod_t *daemon, halod_session_t *session,
                             halod_server_context_t *context,
                             halod_device_call_t *call) {
  halod_device_calls_t *calls = daemon->calls;
  call->session_id = session ? session->id : 0;
  call->context = context;
  call->started_ns = halo_clock_now_ns();
  call->next = NULL;
  call->domain_key = 0;
  if (!calls) {
    // After halod's stop closed them (or before its start made them):
    // nothing runs; the after step answers and releases at once.
    call->cancelled = true;
    call->session_id = 0;
    call->done(daemon, call, NULL);
    return;
  }
  halod_device_retain(call->device);
  ++calls->waiting;
  if (session) session->call = call;
  if (calls->stopped) {
    // Nothing runs after the stop's answer: the after step releases.
    halod_device_call_reply_status(call, halod_device_calls_stopping());
    halod_device_calls_cancel(calls, call);
    return;
  }
  if (!halo_hal_remote_device_is(call->device)) {
    // A device in halod: called here, as before (its after step still
    // comes from the loop, later, as a worker's would).
    halod_device_calls_run_here(calls, call);
    return;
  }
  if (context && session) {
    halo_status_t status =
        halod_device_calls_take_place(calls, session, context, false);
    if (status) {
      // Refused for now: nothing runs; the after step releases.
      halod_device_calls_refuse(daemon, session, context, status);
      call->context = NULL;
      halod_device_calls_cancel(calls, call);
      return;
    }
    call->domain_key = session->domain->base_key;
  }
  uint64_t key = (uint64_t)(uintptr_t)call->device;
  halod_device_queue_t *queue = halo_u64_map_get(&calls->queues, key);
  if (queue) {
    if (queue->tail) {
      queue->tail->next = call;
    } else {
      queue->head = call;
    }
    queue->tail = call;
    return;
  }
  queue = calloc(1, sizeof(*queue));
  halo_status_t status =
      queue ? halo_u64_map_put(&calls->queues, key, queue)
            : halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  if (status) {
    // Out of memory: the call is made here (it may wait for its worker).
    HALO_LOG_WARN("%s: %s; making the call on the loop", call->what,
                  halo_status_message(status));
    halo_status_free(status);
    free(queue);
    halod_device_calls_run_here(calls, call);
    return;
  }
  queue->device = call->device;
  queue->running = call;
  if (!halod_device_calls_hand_off(calls, call)) {
    halod_device_calls_run_here(calls, call);
  }
}

void halod_host_registration_run(halod_host_registration_t *registration) {
  registration->registered = 0;
  for (uint32_t i = 0; i < registration->count && !registration->status; ++i) {
    halo_hal_allocator_t *allocator = registration->devices[i]->allocator;
    registration->status = allocator->vtable->register_host(
        allocator, registration->pointer, registration->size, registration->fd,
        &registration->addresses[i]);
    if (registration->status) {
      registration->status = halo_status_annotate(
          registration->status, "registering it with device %u", i);
    } else {
      ++registration->registered;
    }
  }
}

void halod_host_registration_undo(halod_host_registration_t *registration,
                                  void *pointer) {
  for (uint32_t i = 0; i < registration->count; ++i) {
    if (i < registration->registered) {
      halo_hal_allocator_t *allocator = registration->devices[i]->allocator;
      allocator->vtable->unregister_host(allocator, pointer);
    }
    halod_device_release(registration->devices[i]);
  }
  registration->count = registration->registered = 0;
  halo_status_free(registration->status);
  registration->status = NULL;
}

bool halod_host_registration_remote(
    const halod_host_registration_t *registration) {
  for (uint32_t i = 0; i < registration->count; ++i) {
    if (halo_hal_remote_device_is(registration->devices[i])) return true;
  }
  return false;
}

halo_status_t halod_device_calls_start(halod_t *daemon) {
  halod_device_calls_t *calls = calloc(1, sizeof(*calls));
  if (!calls) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  calls->daemon = daemon;
  pthread_mutex_init(&calls->mutex, NULL);
  halo_u64_map_initialize(&calls->queues);
  halo_u64_map_initialize(&calls->places);
  calls->async.data = calls;
  uv_async_init(daemon->loop, &calls->async, halod_device_calls_on_async);
  daemon->calls = calls;
  return NULL;
}

void halod_device_calls_stop(halod_t *daemon, int64_t deadline_ns) {
  halod_device_calls_t *calls = daemon->calls;
  if (!calls || calls->stopped) return;
  calls->stopped = true;
  // What came back already is done as usual.
  halod_device_calls_finish(calls);
  // Requests waiting behind a session's call are answered now.
  for (size_t i = 0; i < daemon->sessions.by_id.capacity; ++i) {
    if (!daemon->sessions.by_id.entries[i].key) continue;
    halod_session_t *session = daemon->sessions.by_id.entries[i].value;
    halod_requests_refuse_waiting(daemon, session, HALO_STATUS_UNAVAILABLE,
                                  HALOD_STOPPING_MESSAGE);
  }
  // Calls not started never will be; those running are answered now and
  // only released when they return.
  for (size_t i = 0; i < calls->queues.capacity; ++i) {
    if (!calls->queues.entries[i].key) continue;
    halod_device_queue_t *queue = calls->queues.entries[i].value;
    halod_device_call_reply_status(queue->running,
                                   halod_device_calls_stopping());
    pthread_mutex_lock(&calls->mutex);
    while (queue->head) {
      halod_device_call_t *call = queue->head;
      queue->head = call->next;
      call->cancelled = true;
      halod_device_call_reply_status(call, halod_device_calls_stopping());
      halod_device_calls_push_done_locked(calls, call);
    }
    queue->tail = NULL;
    pthread_mutex_unlock(&calls->mutex);
  }
  halod_device_calls_finish(calls);
  // Running calls get until |deadline_ns|; then their workers are killed.
  while (calls->queues.count > 0 && halo_clock_now_ns() < deadline_ns) {
    usleep(1000);
    halod_device_calls_finish(calls);
  }
  for (size_t i = 0; i < calls->queues.capacity; ++i) {
    if (!calls->queues.entries[i].key) continue;
    halod_device_queue_t *queue = calls->queues.entries[i].value;
    HALO_LOG_WARN(
        "%s still waits for its device worker (pid %d) %lld ms after it "
        "started; killing the worker and stopping without it",
        queue->running->what, (int)halo_hal_remote_device_pid(queue->device),
        (long long)((halo_clock_now_ns() - queue->running->started_ns) /
                    1000000));
    halo_hal_remote_device_kill(queue->device);
  }
  while (calls->queues.count > 0 &&
         halo_clock_now_ns() < daemon->stop_deadline_ns) {
    usleep(1000);
    halod_device_calls_finish(calls);
  }
  if (calls->queues.count > 0) {
    HALO_LOG_WARN("%zu device call(s) still running; exiting without them",
                  calls->queues.count);
  }
}

// The loop's handle is closed: the state goes with the last thread.
static void halod_device_calls_on_closed(uv_handle_t *handle) {
  halod_device_calls_t *calls = handle->data;
  pthread_mutex_lock(&calls->mutex);
  calls->handle_gone = true;
  bool none = calls->threads == 0;
  pthread_mutex_unlock(&calls->mutex);
  // Otherwise the last thread frees it (one still in a call that never
  // returned leaves it to the process exit).
  if (none) halod_device_calls_free(calls);
}

void halod_device_calls_close(halod_t *daemon) {
  halod_device_calls_t *calls = daemon->calls;
  if (!calls) return;
  daemon->calls = NULL;
  halo_u64_map_deinitialize(&calls->queues);
  halo_u64_map_deinitialize(&calls->places);
  pthread_mutex_lock(&calls->mutex);
  calls->closing = true;
  calls->closed = true;
  for (halod_call_thread_t *thread = calls->idle; thread;
       thread = thread->next) {
    pthread_cond_signal(&thread->cond);
  }
  pthread_mutex_unlock(&calls->mutex);
  uv_close((uv_handle_t *)&calls->async, halod_device_calls_on_closed);
}

uint32_t halod_device_calls_waiting(const halod_t *daemon) {
  return daemon->calls ? daemon->calls->waiting : 0;
}

uint32_t halod_device_calls_placed(const halod_t *daemon) {
  return daemon->calls ? daemon->calls->placed + daemon->calls->start_placed
                       : 0;
}
