// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/bounded_call.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"

typedef struct halo_bounded_call_t {
  void (*fn)(void *arg);
  void *arg;
  pthread_mutex_t mutex;
  pthread_cond_t cond;  // CLOCK_MONOTONIC
  bool done;            // |fn| returned
  bool abandoned;       // the caller stopped waiting: the thread frees it
} halo_bounded_call_t;

static void halo_bounded_call_free(halo_bounded_call_t *call) {
  pthread_cond_destroy(&call->cond);
  pthread_mutex_destroy(&call->mutex);
  free(call);
}

static void *halo_bounded_call_main(void *argument) {
  halo_bounded_call_t *call = argument;
  call->fn(call->arg);
  pthread_mutex_lock(&call->mutex);
  call->done = true;
  bool abandoned = call->abandoned;
  pthread_cond_signal(&call->cond);
  pthread_mutex_unlock(&call->mutex);
  if (abandoned) halo_bounded_call_free(call);
  return NULL;
}

bool halo_bounded_call(void (*fn)(void *arg), void *arg, int64_t deadline_ns) {
  halo_bounded_call_t *call = calloc(1, sizeof(*call));
  if (!call) {
    fn(arg);
    return true;
  }
  call->fn = fn;
  call->arg = arg;
  pthread_mutex_init(&call->mutex, NULL);
  halo_clock_cond_initialize(&call->cond);
  pthread_t thread;
  if (pthread_create(&thread, NULL, halo_bounded_call_main, call) != 0) {
    halo_bounded_call_free(call);
    fn(arg);
    return true;
  }
  pthread_detach(thread);
  struct timespec deadline = halo_clock_timespec(deadline_ns);
  pthread_mutex_lock(&call->mutex);
  while (!call->done && pthread_cond_timedwait(&call->cond, &call->mutex,
                                               &deadline) != ETIMEDOUT) {
  }
  bool done = call->done;
  if (!done) call->abandoned = true;
  pthread_mutex_unlock(&call->mutex);
  if (done) halo_bounded_call_free(call);
  return done;
}
