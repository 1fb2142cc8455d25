// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halod: the halo GPU device server. Runs in the foreground (systemd style).
#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#ifdef HALO_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

#include "common/log.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/executable.h"
#include "daemon/fd_budget.h"
#include "daemon/oom_score.h"
#include "daemon/server.h"
#include "daemon/worker_process.h"
#include "daemon/workers.h"

// Exit statuses (docs/operations.md, "Exit status"): 0 stopped by SIGTERM
// or SIGINT (or --help, --version, --print-config); 1 a failure at run time
// or a start that failed for another reason (the socket's directory, an
// error of the driver); 2 the configuration: a bad value or file, or a start
// that the configuration makes impossible (a group that does not exist or
// that halod is not in, driver cuda without CUDA).
#define HALOD_EXIT_FAILURE 1
#define HALOD_EXIT_CONFIGURATION 2

// cuda-connections: CUDA_DEVICE_MAX_CONNECTIONS for every context halod
// and its workers create (they inherit the environment), unless it is set.
static void halod_apply_cuda_connections(const halod_config_t *config) {
  if (config->cuda_connections == 0) return;
  const char *set = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (set) {
    HALO_LOG_INFO(
        "cuda-connections %u ignored: CUDA_DEVICE_MAX_CONNECTIONS is %s in "
        "halod's environment",
        config->cuda_connections, set);
    return;
  }
  char value[16];
  snprintf(value, sizeof(value), "%u", config->cuda_connections);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", value, 1);
}

// loads: libuv's thread pool runs the executable loads (the compiles and
// JITs, or a device worker's answer), 4 threads unless UV_THREADPOOL_SIZE
// says otherwise. Each load waiting may have a thread, so that one trust
// domain's slow loads (domain-loads of them) never queue another's behind
// them. Set before libuv's first work starts its pool.
static void halod_apply_loads(const halod_config_t *config) {
  if (getenv("UV_THREADPOOL_SIZE")) return;
  char value[16];
  snprintf(value, sizeof(value), "%u", config->loads);
  setenv("UV_THREADPOOL_SIZE", value, 1);
}

// nice: the niceness of halod, set before it starts a thread, so that
// every thread it starts and every device worker it spawns inherits it
// (Linux keeps a niceness per thread).
static void halod_apply_nice(const halod_config_t *config) {
  errno = 0;
  int current = getpriority(PRIO_PROCESS, 0);
  bool known = errno == 0;
  if (known && current == config->nice) return;
  if (setpriority(PRIO_PROCESS, 0, config->nice) == 0) return;
  int error = errno;
  char running[16] = "its own";
  if (known) snprintf(running, sizeof(running), "%d", current);
  HALO_LOG_WARN(
      "nice %d not applied (%s): lowering the niceness takes CAP_SYS_NICE or "
      "RLIMIT_NICE (systemd: Nice= in the unit; Kubernetes: the SYS_NICE "
      "capability); halod and its workers run at %s niceness, so clients "
      "that spin on a busy CPU can delay their issue and completion threads",
      config->nice, strerror(error), running);
}

// oom-score-adj: halod's score for the kernel's choice of a process to
// kill under memory pressure, set before it spawns a device worker (each
// worker raises its own above it: halod_oom_score_raise_worker).
static void halod_apply_oom_score_adj(const halod_config_t *config) {
  int current = 0;
  bool known = halod_oom_score_read(&current);
  if (known && current == config->oom_score_adj) return;
  if (halod_oom_score_write(config->oom_score_adj)) return;
  int error = errno;
  char running[16] = "its own";
  if (known) snprintf(running, sizeof(running), "%d", current);
  HALO_LOG_WARN(
      "oom-score-adj %d not applied (%s): lowering it takes CAP_SYS_RESOURCE "
      "(systemd: OOMScoreAdjust= in the unit; Kubernetes: the SYS_RESOURCE "
      "capability); halod keeps %s, and under memory pressure the kernel may "
      "kill it, ending every tenant's sessions, before a device worker",
      config->oom_score_adj, strerror(error), running);
}

// The allocator halod and its device workers run on (the same binary), for
// the start-up log: jemalloc where the build links it (HALO_JEMALLOC; not
// under a sanitizer). The C library's malloc could still serve malloc (a
// preloaded allocator, say): jemalloc's count of this thread's allocations
// then does not move across a malloc.
static void halod_log_allocator(void) {
#ifdef HALO_HAVE_JEMALLOC
  const char *version = NULL;
  size_t size = sizeof(version);
  uint64_t before = 0, after = 0;
  size_t count_size = sizeof(before);
  bool answered =
      mallctl("version", (void *)&version, &size, NULL, 0) == 0 && version &&
      mallctl("thread.allocated", &before, &count_size, NULL, 0) == 0;
  void *volatile probe = malloc(4096);  // volatile: never elided
  answered = answered && probe &&
             mallctl("thread.allocated", &after, &count_size, NULL, 0) == 0;
  free(probe);
  if (answered && after > before) {
    HALO_LOG_INFO("allocator: jemalloc %s", version);
  } else {
    HALO_LOG_WARN(
        "allocator: halod is linked with jemalloc but another malloc serves "
        "it (a preloaded allocator?): its workers' threads may contend on "
        "that allocator's locks");
  }
#else
  HALO_LOG_INFO("allocator: the C library's malloc (built without jemalloc)");
#endif
}

// Whether halod may give a socket it owns to group |gid|: it is a member
// (its effective group or a supplementary one), or it has CAP_CHOWN.
static bool halod_may_give_to_group(gid_t gid) {
  if (gid == getegid()) return true;
  gid_t groups[1024];
  int count = getgroups((int)(sizeof(groups) / sizeof(groups[0])), groups);
  for (int i = 0; i < count; ++i) {
    if (groups[i] == gid) return true;
  }
  struct __user_cap_header_struct header = {
      .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
  memset(data, 0, sizeof(data));
  // Unknown (more than 1024 groups, no capget): chown says at start.
  if (count < 0 || syscall(SYS_capget, &header, data) != 0) return true;
  return (data[CAP_TO_INDEX(CAP_CHOWN)].effective & CAP_TO_MASK(CAP_CHOWN)) !=
         0;
}

// Checks that the group of setting |name| (|group|, "" for halod's own)
// exists and that halod may give |sockets| to it, before anything starts;
// the error names the setting. |*out_configuration|: the configuration's
// fault (no such group, or not halod's), not a lookup that failed.
static halo_status_t halod_check_group(const halod_config_t *config,
                                       const char *name, const char *group,
                                       const char *sockets,
                                       bool *out_configuration) {
  *out_configuration = false;
  if (!group[0]) return NULL;
  gid_t gid = 0;
  halo_status_t status = halod_server_resolve_group(group, &gid);
  // INVALID_ARGUMENT: there is no such group.
  *out_configuration =
      status && halo_status_code(status) == HALO_STATUS_INVALID_ARGUMENT;
  if (*out_configuration) {  // say what it was for
    halo_status_t named =
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT, "%s, to give %s to",
                         halo_status_message(status), sockets);
    halo_status_free(status);
    status = named;
  }
  if (!status && !halod_may_give_to_group(gid)) {
    *out_configuration = true;
    status = halo_status_make(
        HALO_STATUS_PERMISSION_DENIED,
        "halod (uid %u) is not a member of group %s (gid %u), so it cannot "
        "give %s to it: make it one (SupplementaryGroups=%s in the unit), or "
        "name a group it is in",
        (unsigned)geteuid(), group, (unsigned)gid, sockets, group);
  }
  return halod_config_annotate(config, name, status);
}

// Whether halod_start failed because the configuration asks for a driver
// that is unavailable here (driver cuda without CUDA or without a GPU).
static bool halod_driver_unavailable(const halod_t *daemon,
                                     const halod_config_t *config) {
  if (strcmp(config->driver, "auto") == 0) return false;
  for (int i = 0; i < HALO_HAL_DRIVER_COUNT; ++i) {
    const halo_hal_driver_info_t *driver = &daemon->hal.drivers[i];
    if (driver->name && strcmp(driver->name, config->driver) == 0) {
      return !driver->available;
    }
  }
  return false;
}

int main(int argc, char **argv) {
  // oom_score_adj opened for writing first: once the process is not
  // dumpable its /proc/self files belong to root, and halod or a worker
  // that is not root (the unit's User=halo) could not open it.
  halod_oom_score_prepare();
  // Not dumpable: another process of halod's uid (a client pod running as
  // root, say) could otherwise ptrace it or take its descriptors with
  // pidfd_getfd through the pidfd halod hands to authenticated clients
  // (their liveness check): other sessions' arenas and semaphore pages, the
  // workers' links. Ptrace then needs CAP_SYS_PTRACE; no core dumps.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  // A file size limit (RLIMIT_FSIZE) would end the process with SIGXFSZ at
  // the first memfd sized past it, a client's host-visible buffer say:
  // ignored, the ftruncate fails (EFBIG) and that request with it.
  signal(SIGXFSZ, SIG_IGN);
  // A device worker process (daemon/workers.h) runs the same binary.
  if (argc > 1 && strcmp(argv[1], "--worker") == 0) {
    return halod_worker_main(argc, argv);
  }
  halod_config_t config;
  halod_config_initialize(&config);
  int exit_now = 0;
  halo_status_t status = halod_config_parse(&config, argc, argv, &exit_now);
  if (status) {
    fprintf(stderr, "halod: %s\n", halo_status_message(status));
    halo_status_free(status);
    return HALOD_EXIT_CONFIGURATION;
  }
  if (exit_now) return 0;
  halo_log_set_level((halo_log_level_t)halo_log_level_parse(config.log_level));
  bool configuration = false;
  status =
      halod_check_group(&config, "socket-group", config.socket_group,
                        "the client socket and its fd channel", &configuration);
  if (!status) {
    status = halod_check_group(&config, "admin-group", config.admin_group,
                               "the admin socket", &configuration);
  }
  if (status) {
    HALO_LOG_ERROR("cannot start: %s", halo_status_message(status));
    halo_status_free(status);
    return configuration ? HALOD_EXIT_CONFIGURATION : HALOD_EXIT_FAILURE;
  }
  halod_log_allocator();
  halod_apply_cuda_connections(&config);
  halod_apply_loads(&config);
  halod_apply_nice(&config);
  halod_apply_oom_score_adj(&config);
  halod_fd_budget_check_limits(&config);
  struct rlimit file_size;
  if (getrlimit(RLIMIT_FSIZE, &file_size) == 0 &&
      file_size.rlim_cur != RLIM_INFINITY) {
    HALO_LOG_WARN(
        "the file size limit (RLIMIT_FSIZE) is %llu bytes: halod's memory "
        "files past it cannot be created (host-visible arenas, arena-bytes "
        "%llu, and buffers; sessions' submission rings; semaphore pages; "
        "device workers' flight tables), and what needs them fails with "
        "RESOURCE_EXHAUSTED; lift it (ulimit -f unlimited, "
        "LimitFSIZE=infinity)",
        (unsigned long long)file_size.rlim_cur,
        (unsigned long long)config.arena_bytes);
  }

  uv_loop_t loop;
  uv_loop_init(&loop);
  static halod_t daemon;
  status = halod_start(&daemon, &loop, &config);
  if (status) {
    configuration = halod_driver_unavailable(&daemon, &config);
    if (configuration)
      status = halod_config_annotate(&config, "driver", status);
    HALO_LOG_ERROR("cannot start: %s", halo_status_message(status));
    halo_status_free(status);
    uv_run(&loop, UV_RUN_DEFAULT);  // let closing handles finish
    uv_loop_close(&loop);
    return configuration ? HALOD_EXIT_CONFIGURATION : HALOD_EXIT_FAILURE;
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  if (halod_executable_inline_loads_running(&daemon)) {
    // halod_stop stopped the loop with a load still running on a device in
    // halod itself (device-workers inline): the process exit ends it.
    HALO_LOG_WARN("stopped with an executable load still running; exiting");
    _exit(0);
  }
  halod_workers_wait(daemon.stop_deadline_ns);
  int rc = uv_loop_close(&loop);
  if (rc != 0)
    HALO_LOG_WARN("loop closed with handles open: %s", uv_strerror(rc));
  HALO_LOG_INFO("stopped");
  return 0;
}
