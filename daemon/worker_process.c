// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// `halod --worker`: a device worker process (docs/architecture.md "Device
// workers"). The supervisor starts one per (device, trust domain) with the
// link's socket as descriptor 3; it creates its one device (a CUDA context, or
// the local driver that runs the domain's native kernels) and serves it over
// the link (hal/remote/remote_device.h) until the supervisor closes it.
//
//   halod --worker --driver local|cuda --device N [--cuda-completion M]
//         [--cuda-streams N] [--cache-directory DIR] [--log-level LEVEL]
//         [--poll-us US] [--report-linger-us US]
#include "daemon/worker_process.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/oom_score.h"
#include "hal/registry.h"
#include "hal/remote/remote_device.h"
#include "hal/remote/remote_link.h"
#ifdef HALO_HAVE_CUDA
#include "hal/cuda/cuda_device.h"
#endif

#define HALOD_WORKER_FD 3

#ifdef HALO_HAVE_CUDA
// A driver thread: the context is poisoned; the supervisor takes it from
// here (fails the work in flight, starts a new worker).
static void halod_worker_on_lost(void *user_data,
                                 halo_hal_cuda_device_t *device,
                                 halo_status_t status) {
  (void)user_data;
  (void)device;
  halo_hal_remote_serve_lost(halo_status_message(status));
}
#endif

// Tells the supervisor why the worker cannot serve, then exits.
static int halod_worker_fail(const char *message) {
  halo_remote_link_t link;
  halo_remote_link_initialize(&link, HALOD_WORKER_FD);
  halo_remote_part_t part = {message, strlen(message)};
  halo_status_free(
      halo_remote_link_send(&link, HALO_REMOTE_FAILED, 0, &part, 1, -1));
  halo_remote_link_deinitialize(&link);
  fprintf(stderr, "halod worker: %s\n", message);
  return 1;
}

int halod_worker_main(int argc, char **argv) {
  // The supervisor's end is the only way in: if it dies, so does the
  // worker. Terminal signals go to the whole process group; the worker ends
  // when the supervisor closes the link, not before.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Named as halod: started through /proc/self/exe its name would be "exe"
  // (ps -C halod, pgrep -x halod and top would not list it).
  prctl(PR_SET_NAME, "halod", 0, 0, 0);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  const char *driver = "local";
  const char *completion = NULL;
  const char *cache_directory = NULL;
  const char *log_level = "info";
  long device_index = 0;
  long streams = 0;
  unsigned long long graph_bytes = 0;
  long compile_deadline_ms = 0;
  long poll_us = 0;
  long linger_us = 0;
  long supervisor = 0;
  for (int i = 1; i < argc; ++i) {
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--worker") == 0) continue;
    if (!value) return halod_worker_fail("a worker flag without its value");
    if (strcmp(argv[i], "--driver") == 0) {
      driver = value;
    } else if (strcmp(argv[i], "--device") == 0) {
      device_index = strtol(value, NULL, 10);
    } else if (strcmp(argv[i], "--cuda-completion") == 0) {
      completion = value;
    } else if (strcmp(argv[i], "--cuda-streams") == 0) {
      streams = strtol(value, NULL, 10);
    } else if (strcmp(argv[i], "--cuda-graph-bytes") == 0) {
      graph_bytes = strtoull(value, NULL, 10);
    } else if (strcmp(argv[i], "--cuda-compile-deadline-ms") == 0) {
      compile_deadline_ms = strtol(value, NULL, 10);
    } else if (strcmp(argv[i], "--cache-directory") == 0) {
      cache_directory = value;
    } else if (strcmp(argv[i], "--poll-us") == 0) {
      poll_us = strtol(value, NULL, 10);
    } else if (strcmp(argv[i], "--report-linger-us") == 0) {
      linger_us = strtol(value, NULL, 10);
    } else if (strcmp(argv[i], "--log-level") == 0) {
      log_level = value;
    } else if (strcmp(argv[i], "--supervisor") == 0) {
      supervisor = strtol(value, NULL, 10);
    } else {
      char message[256];
      snprintf(message, sizeof(message), "unknown worker flag %s", argv[i]);
      return halod_worker_fail(message);
    }
    ++i;
  }
  // The supervisor died before PR_SET_PDEATHSIG took hold: the worker was
  // reparented. Its pid comes on the command line, not as "not 1": in a
  // container halod itself may be pid 1.
  if (getppid() != (pid_t)supervisor) return 1;
  halo_log_set_level((halo_log_level_t)halo_log_level_parse(log_level));
  // Before the device's memory: under memory pressure, this worker before
  // halod (daemon/oom_score.h).
  halod_oom_score_raise_worker();
  halo_hal_registry_options_t options = {
      .driver = driver,
      .cuda_completion = completion,
      .cuda_streams = (uint32_t)streams,
      .cuda_graph_bytes = graph_bytes,
      .cuda_compile_deadline_ms = (uint32_t)compile_deadline_ms,
      .cache_directory = cache_directory,
      .has_device_filter = true,
      .device_filter = (uint32_t)device_index,
  };
  halo_hal_registry_t registry;
  halo_status_t status =
      halo_hal_registry_initialize_with_options(&options, &registry);
  if (status) {
    int code = halod_worker_fail(halo_status_message(status));
    halo_status_free(status);
    return code;
  }
  halo_hal_device_t *device = registry.devices[0];
#ifdef HALO_HAVE_CUDA
  halo_hal_cuda_device_t *cuda = halo_hal_cuda_device_cast(device);
  if (cuda) cuda->lost = halod_worker_on_lost;
#endif
  int code =
      halo_hal_remote_serve(device, HALOD_WORKER_FD, (int64_t)poll_us * 1000,
                            (int64_t)linger_us * 1000);
  // No teardown: work may still be in flight on the driver's threads, and
  // the process's end releases the context and every mapping.
  fflush(NULL);
  _exit(code);
}
