// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A lost device: fail everything, name what was in flight, exit for a
// restart (see the header).
#include "daemon/device_lost.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/status.h"
#include "daemon/queue.h"
#include "daemon/semaphore.h"
#include "daemon/session.h"
#include "daemon/submission.h"
#ifdef HALO_HAVE_CUDA
#include "hal/cuda/cuda_device.h"
#endif

// One daemon per process: the driver's callback finds the loop here.
static struct {
  halod_t *daemon;
  uv_async_t async;
  bool watching;
  pthread_mutex_t mutex;
  halo_status_t status;  // the first report (owned)
  uint32_t device;
  int32_t result;  // the driver's error (CUresult; 0 unknown)
} halod_device_lost_state = {.mutex = PTHREAD_MUTEX_INITIALIZER};

// Loop thread.
static void halod_device_lost_on_async(uv_async_t *async) {
  halod_t *daemon = async->data;
  pthread_mutex_lock(&halod_device_lost_state.mutex);
  halo_status_t status = halod_device_lost_state.status;
  uint32_t device = halod_device_lost_state.device;
  int32_t result = halod_device_lost_state.result;
  pthread_mutex_unlock(&halod_device_lost_state.mutex);
  if (!status) return;
  static char in_flight[4096];
  uint32_t count = halod_submission_describe_issued(
      daemon, daemon->hal.devices[device], in_flight, sizeof(in_flight), 32);
  HALO_LOG_ERROR(
      "%s; %u submission(s) in flight on device %u: %s. Failing every "
      "semaphore with DEVICE_LOST and exiting (status 1) so that the "
      "service manager restarts halod",
      halo_status_message(status), count, device, in_flight);
  // The slot says why, too: a client that wakes cannot ask this daemon for
  // the message (it exits below), so libhalo builds one from these words.
  halo_timeline_failure_info_t info = {
      .reason = HALO_TIMELINE_FAILURE_DEVICE_LOST,
      .device = device,
      .detail = result,
      .count = count,
  };
  for (size_t i = 0; i < daemon->shared.semaphores.capacity; ++i) {
    if (!daemon->shared.semaphores.entries[i].key) continue;
    halod_semaphore_t *semaphore = daemon->shared.semaphores.entries[i].value;
    halo_timeline_slot_set_failure_info(semaphore->hal.slot, &info);
    halod_semaphore_fail(semaphore, HALO_STATUS_DEVICE_LOST,
                         "%s; submissions in flight on device %u: %s; halod "
                         "restarts (reconnect and rebuild)",
                         halo_status_message(status), device, in_flight);
  }
  halod_systemd_stopping(&daemon->systemd);
  fflush(NULL);
  // No orderly teardown: the context is poisoned, and driver calls made
  // while tearing it down may hang or fail. The semaphores' failures are in
  // shared memory already; clients see the daemon exit through its pidfd.
  _exit(1);
}

#ifdef HALO_HAVE_CUDA
// A driver thread.
static void halod_device_lost_on_cuda(void *user_data,
                                      halo_hal_cuda_device_t *device,
                                      halo_status_t status) {
  (void)user_data;
  pthread_mutex_lock(&halod_device_lost_state.mutex);
  if (!halod_device_lost_state.status) {
    halod_device_lost_state.status = status;
    halod_device_lost_state.device = device->ordinal;
    halod_device_lost_state.result = device->lost_result;
    status = NULL;
  }
  // Under the mutex: unwatch closes the handle only after it clears
  // |watching|.
  if (halod_device_lost_state.watching) {
    uv_async_send(&halod_device_lost_state.async);
  }
  pthread_mutex_unlock(&halod_device_lost_state.mutex);
  halo_status_free(status);
}
#endif

void halod_device_lost_start(halod_t *daemon) {
  halod_device_lost_state.daemon = daemon;
  halod_device_lost_state.async.data = daemon;
  uv_async_init(daemon->loop, &halod_device_lost_state.async,
                halod_device_lost_on_async);
  pthread_mutex_lock(&halod_device_lost_state.mutex);
  halod_device_lost_state.watching = true;
  pthread_mutex_unlock(&halod_device_lost_state.mutex);
}

void halod_device_lost_watch(halod_t *daemon) {
#ifdef HALO_HAVE_CUDA
  for (uint32_t i = 0; i < daemon->hal.device_count; ++i) {
    halo_hal_cuda_device_t *device =
        halo_hal_cuda_device_cast(daemon->hal.devices[i]);
    if (!device) continue;
    device->lost_user_data = daemon;
    device->lost = halod_device_lost_on_cuda;
  }
#else
  (void)daemon;
#endif
}

void halod_device_lost_unwatch(halod_t *daemon) {
  (void)daemon;
  pthread_mutex_lock(&halod_device_lost_state.mutex);
  bool watching = halod_device_lost_state.watching;
  halod_device_lost_state.watching = false;
  pthread_mutex_unlock(&halod_device_lost_state.mutex);
  if (watching) {
    uv_close((uv_handle_t *)&halod_device_lost_state.async, NULL);
  }
}
