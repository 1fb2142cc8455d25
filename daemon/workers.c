// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Device workers: start, probe, loss (see the header).
#include "daemon/workers.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/command_buffer.h"
#include "daemon/device_lost.h"
#include "daemon/executable.h"
#include "daemon/fault_budget.h"
#include "daemon/queue.h"
#include "daemon/ring_worker.h"
#include "daemon/semaphore.h"
#include "daemon/session.h"
#include "daemon/submission.h"
#include "daemon/trust_domain.h"
#include "hal/registry.h"
#include "hal/remote/remote_device.h"
#include "hal/remote/remote_link.h"

// Lost workers reported by their reader threads, handled on the loop.
struct halod_workers_state_t {
  bool enabled;
  char driver[16];  // the driver the workers run: local | cuda
  halo_hal_device_info_t infos[HALO_HAL_MAX_DEVICES];
  uv_async_t lost_async;
  pthread_mutex_t mutex;
  // In the order reported, each with the reference its report took; as
  // many as are lost at once (a GPU-wide fault may end every domain's
  // worker together, one per client process with trust-domain process).
  halo_hal_device_t **lost;
  uint32_t lost_count;
  uint32_t lost_capacity;
  // halod_workers_stop closed |lost_async|: a loss reported later is
  // completed by its reader thread (nothing on the loop waits for it).
  bool lost_closed;
  // Spare workers per device (worker-spares): started ahead, taken by the
  // next domain that needs one, so that starting a domain's worker (a CUDA
  // context: ~190 ms on an H100) does not hold up the loop.
  halo_hal_device_t *spares[HALO_HAL_MAX_DEVICES][HALOD_WORKER_SPARES_MAX];
};

bool halod_workers_enabled(const halod_t *daemon) {
  return daemon->workers && daemon->workers->enabled;
}

const halo_hal_device_info_t *halod_device_info(const halod_t *daemon,
                                                uint32_t index) {
  if (halod_workers_enabled(daemon)) return &daemon->workers->infos[index];
  return &daemon->hal.devices[index]->info;
}

void halod_device_retain(halo_hal_device_t *device) {
  if (halo_hal_remote_device_is(device)) halo_hal_remote_device_retain(device);
}

void halod_device_release(halo_hal_device_t *device) {
  if (halo_hal_remote_device_is(device)) device->vtable->destroy(device);
}

// A reader thread.
static void halod_workers_on_lost(void *user_data, halo_hal_device_t *device) {
  halod_t *daemon = user_data;
  struct halod_workers_state_t *state = daemon->workers;
  pthread_mutex_lock(&state->mutex);
  if (!state->lost_closed && state->lost_count == state->lost_capacity) {
    uint32_t capacity = state->lost_capacity ? 2 * state->lost_capacity : 16;
    halo_hal_device_t **grown =
        realloc(state->lost, capacity * sizeof(*state->lost));
    if (grown) {
      state->lost = grown;
      state->lost_capacity = capacity;
    }
  }
  bool closed = state->lost_closed;
  bool queued = !closed && state->lost_count < state->lost_capacity;
  if (queued) {
    state->lost[state->lost_count++] = device;  // with the reference given
    uv_async_send(&state->lost_async);
  }
  pthread_mutex_unlock(&state->mutex);
  if (!queued) {
    // After halod's stop closed the loop's side (a worker it killed for a
    // load still running, halod_executable_stop_loads), or out of memory:
    // never leave the work in flight hanging.
    // The loss is logged here: the loop, which logs the others, does not
    // see it.
    char reason[512];
    halo_hal_remote_device_lost(device, reason, sizeof(reason));
    if (closed) {
      HALO_LOG_ERROR("%s (halod stopping)", reason);
    } else {
      HALO_LOG_ERROR(
          "%s; out of memory queueing it for halod's loop: its executions "
          "in flight fail, but the loss of its trust domain's sessions is "
          "not handled",
          reason);
    }
    halo_hal_remote_device_complete_lost(device);
    device->vtable->destroy(device);
  }
}

// The worker's command line (its driver options are halod's).
// Starts a worker for device |index|; |wait|: until it reports its device.
static halo_status_t halod_worker_spawn(halod_t *daemon, uint32_t index,
                                        const char *domain_name,
                                        int64_t start_timeout_ns, bool wait,
                                        halo_hal_device_t **out_device) {
  struct halod_workers_state_t *state = daemon->workers;
  char device_text[16];
  snprintf(device_text, sizeof(device_text), "%u", index);
  char poll_text[16];
  snprintf(poll_text, sizeof(poll_text), "%u", daemon->config.worker_poll_us);
  const char *argv[32];
  int argc = 0;
  argv[argc++] = "halod";
  argv[argc++] = "--worker";
  argv[argc++] = "--driver";
  argv[argc++] = state->driver;
  argv[argc++] = "--device";
  argv[argc++] = device_text;
  argv[argc++] = "--poll-us";
  argv[argc++] = poll_text;
  char linger_text[16];
  snprintf(linger_text, sizeof(linger_text), "%u",
           daemon->config.worker_report_linger_us);
  argv[argc++] = "--report-linger-us";
  argv[argc++] = linger_text;
  argv[argc++] = "--log-level";
  argv[argc++] = daemon->config.log_level;
  char supervisor_text[16];
  snprintf(supervisor_text, sizeof(supervisor_text), "%d", (int)getpid());
  argv[argc++] = "--supervisor";
  argv[argc++] = supervisor_text;
  if (daemon->config.cuda_completion[0]) {
    argv[argc++] = "--cuda-completion";
    argv[argc++] = daemon->config.cuda_completion;
  }
  char streams_text[16];
  snprintf(streams_text, sizeof(streams_text), "%u",
           daemon->config.cuda_streams);
  argv[argc++] = "--cuda-streams";
  argv[argc++] = streams_text;
  char graph_bytes_text[24];
  snprintf(graph_bytes_text, sizeof(graph_bytes_text), "%llu",
           (unsigned long long)daemon->config.cuda_graph_bytes);
  argv[argc++] = "--cuda-graph-bytes";
  argv[argc++] = graph_bytes_text;
  char compile_text[16];
  snprintf(compile_text, sizeof(compile_text), "%u",
           daemon->config.cuda_compile_deadline_ms);
  argv[argc++] = "--cuda-compile-deadline-ms";
  argv[argc++] = compile_text;
  if (daemon->config.cache_directory[0]) {
    argv[argc++] = "--cache-directory";
    argv[argc++] = daemon->config.cache_directory;
  }
  argv[argc] = NULL;
  char label[160];
  if (strcmp(domain_name, "spare") == 0 || strcmp(domain_name, "probe") == 0) {
    snprintf(label, sizeof(label), "device %u, %s worker", index, domain_name);
  } else {
    snprintf(label, sizeof(label), "device %u, trust domain %s", index,
             domain_name);
  }
  halo_hal_remote_options_t options = {
      .program = "/proc/self/exe",
      .argv = argv,
      .label = label,
      .deadline_ns = (int64_t)daemon->config.submission_deadline_ms * 1000000ll,
      .hang_ns = (int64_t)daemon->config.worker_hang_ms * 1000000ll,
      .compile_ns =
          (int64_t)daemon->config.cuda_compile_deadline_ms * 1000000ll,
      .start_timeout_ns = start_timeout_ns,
      .poll_ns = (int64_t)daemon->config.worker_poll_us * 1000,
      .lost = halod_workers_on_lost,
      .lost_user_data = daemon,
      .ring = halod_ring_workers_on_message,
      .ring_user_data = daemon,
  };
  return wait ? halo_hal_remote_device_create(&options, out_device)
              : halo_hal_remote_device_start(&options, out_device);
}

typedef struct halod_workers_failure_t {
  halod_t *daemon;
  halo_hal_device_t *device;
  const char *reason;
  const char *in_flight;
  // The actions the watchdog found past the submission deadline, gathered
  // in one walk of the worker's executions (a walk per submission was
  // quadratic on the loop: 16,000 in flight, 2.3 s). Out of memory for
  // one, it fails as lost, without the deadline's words.
  halo_u64_map_t overdue;
} halod_workers_failure_t;

static void halod_workers_note_overdue(void *visit_data, void *user_data,
                                       bool overdue) {
  halod_workers_failure_t *failure = visit_data;
  if (!overdue || !user_data) return;
  halo_status_free(halo_u64_map_put(&failure->overdue,
                                    (uint64_t)(uintptr_t)user_data, user_data));
}

// What a client whose work was lost should do, as a suffix of its
// message: rebuild, or (its process now over its fault budget) nothing,
// since its reconnect will be refused.
static void halod_workers_reconnect_advice(
    halod_t *daemon, const halod_client_process_t *process, int64_t now,
    char *out, size_t capacity) {
  halo_status_t refused = halod_fault_budget_check(
      &daemon->sessions.fault_budget, &daemon->config, process, now);
  snprintf(
      out, capacity, "%s%s",
      refused ? ", and a reconnect is refused: " : " (reconnect and rebuild)",
      refused ? halo_status_message(refused) : "");
  halo_status_free(refused);
}

// Fails the signals of one submission in flight on a lost worker: before it
// completes (the first failure wins), so that the message names them all.
// After the charges: a process now over its fault budget learns that its
// reconnect will be refused.
static void halod_workers_fail_one(void *user_data, halod_session_t *session,
                                   halod_submission_t *submission) {
  const halod_workers_failure_t *failure = user_data;
  halod_t *daemon = failure->daemon;
  bool overdue =
      halo_u64_map_get(&failure->overdue,
                       (uint64_t)(uintptr_t)&submission->action) != NULL;
  char advice[512];
  halod_workers_reconnect_advice(daemon, &submission->process,
                                 halo_clock_now_ns(), advice, sizeof(advice));
  for (uint32_t s = submission->action.wait_count;
       s < submission->semaphore_count; ++s) {
    halod_semaphore_t *semaphore = submission->semaphores[s];
    if (overdue) {
      halod_semaphore_fail(
          semaphore, HALO_STATUS_DEADLINE_EXCEEDED,
          "submission %llu (session %llu, pid %u) ran past the submission "
          "deadline of %u ms (submission-deadline-ms) on %s; the worker was "
          "replaced and the domain's sessions are lost%s",
          (unsigned long long)submission->id, (unsigned long long)session->id,
          session->pid, daemon->config.submission_deadline_ms, failure->reason,
          advice);
    } else {
      halod_semaphore_fail(semaphore, HALO_STATUS_DEVICE_LOST,
                           "%s; submissions in flight: %s; the domain's "
                           "sessions are lost%s",
                           failure->reason, failure->in_flight, advice);
    }
  }
}

// The executions in flight on a lost worker, to charge (the rule is in
// daemon/fault_budget.h).
typedef struct halod_workers_charges_t {
  halod_submission_t **submissions;  // borrowed: retired after the charges
  size_t count;
  size_t capacity;
  bool overdue;  // some ran past the deadline: only those are charged
  bool failed;   // out of memory: nobody is charged
} halod_workers_charges_t;

// Under the device's mutex: only collects.
static void halod_workers_collect_charge(void *visit_data, void *user_data,
                                         bool overdue) {
  halod_workers_charges_t *charges = visit_data;
  if (charges->failed || (charges->overdue && !overdue)) return;
  if (overdue && !charges->overdue) {
    charges->overdue = true;
    charges->count = 0;  // the watchdog named the culprits
  }
  if (charges->count == charges->capacity) {
    size_t capacity = charges->capacity ? charges->capacity * 2 : 16;
    halod_submission_t **grown =
        realloc(charges->submissions, capacity * sizeof(*grown));
    if (!grown) {
      charges->failed = true;
      return;
    }
    charges->submissions = grown;
    charges->capacity = capacity;
  }
  // The deferred queue's executions carry their action, and halod's only
  // actions are the first member of its submissions (daemon/submission.h).
  _Static_assert(offsetof(halod_submission_t, action) == 0,
                 "a submission starts with its action");
  charges->submissions[charges->count++] = (halod_submission_t *)user_data;
}

// The ring executions the worker had in flight (its flight table).
typedef struct halod_workers_ring_charges_t {
  halo_hal_device_t *device;
  uint64_t sessions[64];  // the first 64 are charged
  uint32_t count;
  bool overdue;  // some ran past the deadline: only those are charged
} halod_workers_ring_charges_t;

static void halod_workers_collect_ring_charge(
    void *visit_data, uint64_t id,
    const struct halo_remote_flight_entry_t *entry) {
  (void)id;
  // One that completed (its report not sent yet) was not in flight.
  if (!halo_remote_flight_entry_running(entry)) return;
  halod_workers_ring_charges_t *charges = visit_data;
  uint64_t session = entry->session;
  bool overdue =
      halo_hal_remote_device_flight_overdue(charges->device, entry->issued_ns);
  if (charges->overdue && !overdue) return;
  if (overdue && !charges->overdue) {
    charges->overdue = true;
    charges->count = 0;
  }
  if (charges->count < 64) charges->sessions[charges->count++] = session;
}

// Whether |key| was in |seen| with |value| already; records it if not.
static bool halod_workers_seen(halo_u64_map_t *seen, uint64_t key,
                               uintptr_t value) {
  if ((uintptr_t)halo_u64_map_get(seen, key) == value) return true;
  halo_status_free(halo_u64_map_put(seen, key, (void *)value));
  return false;
}

// Charges the processes (once each) and sessions whose work was in flight
// on the lost |device|.
static void halod_workers_charge(halod_t *daemon, halo_hal_device_t *device) {
  halod_workers_charges_t charges = {0};
  halo_hal_remote_device_visit_in_flight(device, halod_workers_collect_charge,
                                         &charges);
  if (charges.failed) {
    HALO_LOG_ERROR("fault budget: out of memory: nobody charged");
  }
  // And those the worker took from rings itself. Past the deadline, only
  // the overdue ones of either kind are charged.
  halod_workers_ring_charges_t ring = {.device = device};
  halo_hal_remote_device_visit_flight(device, halod_workers_collect_ring_charge,
                                      &ring);
  if (ring.overdue && !charges.overdue) charges.count = 0;
  if (charges.overdue && !ring.overdue) ring.count = 0;
  charges.overdue = charges.overdue || ring.overdue;
  halo_u64_map_t sessions, processes;  // seen: id -> 1, pid + 1 -> start + 1
  halo_u64_map_initialize(&sessions);
  halo_u64_map_initialize(&processes);
  int64_t now = halo_clock_now_ns();
  size_t total = (charges.failed ? 0 : charges.count) + ring.count;
  for (size_t i = 0; i < total; ++i) {
    bool from_ring = charges.failed || i >= charges.count;
    halod_session_t *session =
        from_ring ? halo_u64_map_get(
                        &daemon->sessions.by_id,
                        ring.sessions[i - (charges.failed ? 0 : charges.count)])
                  : halo_u64_map_get(&daemon->sessions.by_id,
                                     charges.submissions[i]->session_id);
    if (from_ring && !session) continue;
    const halod_client_process_t *process =
        from_ring ? &session->process : &charges.submissions[i]->process;
    if (session && !halod_workers_seen(&sessions, session->id, 1)) {
      ++session->faults;
    }
    if (halod_workers_seen(&processes, (uint64_t)process->pid + 1,
                           (uintptr_t)process->start + 1)) {
      continue;
    }
    uint32_t faults = halod_fault_budget_charge(&daemon->sessions.fault_budget,
                                                &daemon->config, process, now);
    ++daemon->stats.client_faults;
    HALO_LOG_WARN(
        "fault budget: client pid %u (uid %u) charged a device fault%s: %u "
        "in the last %u s (fault-budget %u%s)",
        process->pid, process->uid,
        charges.overdue ? " (past the submission deadline)" : "", faults,
        daemon->config.fault_budget_window_s, daemon->config.fault_budget,
        daemon->config.fault_budget ? "" : ": no limit");
    if (faults == daemon->config.fault_budget) {
      // Once, as it crosses the budget: each refused connection is logged
      // at debug level only (a client may retry in a loop).
      halo_status_t refused = halod_fault_budget_check(
          &daemon->sessions.fault_budget, &daemon->config, process, now);
      if (refused) {
        HALO_LOG_WARN("fault budget: %s", halo_status_message(refused));
      }
      halo_status_free(refused);
    }
  }
  halo_u64_map_deinitialize(&sessions);
  halo_u64_map_deinitialize(&processes);
  free(charges.submissions);
}

static void halod_workers_refill(halod_t *daemon, uint32_t index);

// The loop: a worker was lost (idle domains held: see
// halod_workers_handle_lost).
static void halod_workers_handle_lost_held(halod_t *daemon,
                                           halo_hal_device_t *device) {
  char reason[512];
  halo_hal_remote_device_lost(device, reason, sizeof(reason));
  // Its domain, if it still uses this worker.
  halod_domain_t *domain = NULL;
  uint32_t index = 0;
  for (size_t i = 0; !domain && i < daemon->sessions.domains.capacity; ++i) {
    if (!daemon->sessions.domains.entries[i].key) continue;
    halod_domain_t *candidate = daemon->sessions.domains.entries[i].value;
    for (uint32_t d = 0; d < daemon->hal.device_count; ++d) {
      if (candidate->workers[d].device == device) {
        domain = candidate;
        index = d;
      }
    }
  }
  static char in_flight[4096];
  uint32_t count = halod_submission_describe_issued(daemon, device, in_flight,
                                                    sizeof(in_flight), 32);
  // The executions the worker took from rings itself (it held grants for
  // them, released now: the worker is gone).
  static char ring_flight[2048];
  uint32_t ring_count = halod_ring_workers_on_lost(
      daemon, device, reason, ring_flight, sizeof(ring_flight));
  if (ring_count) {
    size_t used = count ? strlen(in_flight) : 0;
    snprintf(in_flight + used, sizeof(in_flight) - used, "%s%s",
             count ? ", " : "", ring_flight);
    count += ring_count;
  }
  HALO_LOG_ERROR("%s; %u submission(s) in flight: %s", reason, count,
                 in_flight);
  if (!daemon->stopping) {
    halod_workers_charge(daemon, device);
    halod_workers_failure_t failure = {.daemon = daemon,
                                       .device = device,
                                       .reason = reason,
                                       .in_flight = in_flight};
    halo_u64_map_initialize(&failure.overdue);
    halo_hal_remote_device_visit_in_flight(device, halod_workers_note_overdue,
                                           &failure);
    halod_submission_for_each_issued(daemon, device, halod_workers_fail_one,
                                     &failure);
    halo_u64_map_deinitialize(&failure.overdue);
  }
  halo_hal_remote_device_complete_lost(device);
  // Completions were posted; apply them now, while the sessions still hold
  // what the submissions name. (A loss handled at the end of halod's stop,
  // after the deferred queue went, had nothing in flight in it.)
  if (!daemon->work.deferred_closed) {
    halo_hal_deferred_queue_drain(&daemon->work.deferred);
  }
  if (!domain) {
    // A spare that died (never used): replace it.
    for (uint32_t d = 0; d < daemon->hal.device_count; ++d) {
      for (uint32_t k = 0; k < HALOD_WORKER_SPARES_MAX; ++k) {
        if (daemon->workers->spares[d][k] != device) continue;
        daemon->workers->spares[d][k] = NULL;
        halod_device_release(device);
        if (!daemon->stopping) halod_workers_refill(daemon, d);
      }
    }
    return;
  }
  halod_worker_t *worker = &domain->workers[index];
  ++worker->faults;
  snprintf(worker->last_fault, sizeof(worker->last_fault), "%s", reason);
  worker->device = NULL;
  ++daemon->stats.workers_lost;
  // What the caches kept of the worker is gone with it (a fresh worker has
  // none of its state).
  halod_cache_drop_device(daemon, device);
  // Every session of the domain shared the context: all are lost. A
  // session whose process is now over its fault budget says so: its
  // reconnect will be refused.
  int64_t now = halo_clock_now_ns();
  for (size_t i = 0; i < daemon->sessions.by_id.capacity; ++i) {
    if (!daemon->sessions.by_id.entries[i].key) continue;
    halod_session_t *session = daemon->sessions.by_id.entries[i].value;
    if (session->domain != domain) continue;
    char advice[512];
    halod_workers_reconnect_advice(daemon, &session->process, now, advice,
                                   sizeof(advice));
    char session_reason[1536];
    int length = snprintf(
        session_reason, sizeof(session_reason),
        "%s; in flight: %s; every session of trust domain %s is lost%s", reason,
        in_flight, domain->name, advice);
    if (length >= (int)sizeof(session_reason)) {
      // Cut short (a long list in flight, which the log above has whole).
      memcpy(session_reason + sizeof(session_reason) - 4, "...", 4);
    }
    halod_session_lose(daemon, session, session_reason);
  }
  halod_device_release(device);
  // A domain that stayed only for its cached entries ends with them.
  halod_domains_end_idle(daemon);
}

// The loop: a worker was lost. The loss handles the worker's last reports
// first (halod_ring_workers_on_lost), which may end the domain it looks at
// (a grant's release ends an idle one): domains end after, not during.
static void halod_workers_handle_lost(halod_t *daemon,
                                      halo_hal_device_t *device) {
  halod_domains_hold_idle(daemon);
  halod_workers_handle_lost_held(daemon, device);
  halod_domains_release_idle(daemon);
}

static void halod_workers_on_lost_async(uv_async_t *async) {
  halod_t *daemon = async->data;
  struct halod_workers_state_t *state = daemon->workers;
  for (;;) {
    // All reported so far at once (more may come while they are handled).
    pthread_mutex_lock(&state->mutex);
    halo_hal_device_t **lost = state->lost;
    uint32_t count = state->lost_count;
    state->lost = NULL;
    state->lost_count = state->lost_capacity = 0;
    pthread_mutex_unlock(&state->mutex);
    if (count == 0) {
      free(lost);
      break;
    }
    for (uint32_t i = 0; i < count; ++i) {
      halod_workers_handle_lost(daemon, lost[i]);
      halod_device_release(lost[i]);  // the reference the report took
    }
    free(lost);
  }
}

// Probes with one short-lived worker per device: the device infos, and a
// driver that does not work in a worker fails at start, not at the first
// client.
static halo_status_t halod_workers_probe(halod_t *daemon) {
  struct halod_workers_state_t *state = daemon->workers;
  halo_hal_registry_t *registry = &daemon->hal;
  memset(registry, 0, sizeof(*registry));
  const char *driver = daemon->config.driver;
  registry->drivers[0].name = "cuda";
  registry->drivers[1].name = "local";
  registry->drivers[1].available = true;
  uint32_t gpu_count = 0;
  if (strcmp(driver, "local") == 0) {
    snprintf(registry->drivers[0].reason, sizeof(registry->drivers[0].reason),
             "not probed (driver local)");
  } else {
    registry->drivers[0].available = halo_hal_cuda_probe_count(
        registry->drivers[0].reason, sizeof(registry->drivers[0].reason),
        &gpu_count);
  }
  if (strcmp(driver, "cuda") == 0 && !registry->drivers[0].available) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE,
                            "driver cuda unavailable: %s",
                            registry->drivers[0].reason);
  }
  bool cuda = registry->drivers[0].available && strcmp(driver, "local") != 0;
  snprintf(state->driver, sizeof(state->driver), "%s", cuda ? "cuda" : "local");
  uint32_t count = cuda ? gpu_count : 1;
  if (count > HALO_HAL_MAX_DEVICES) count = HALO_HAL_MAX_DEVICES;
  for (uint32_t i = 0; i < count; ++i) {
    halo_hal_device_t *device = NULL;
    halo_status_t status = halod_worker_spawn(
        daemon, i, "probe", 120ll * 1000000000ll, true, &device);
    if (status && cuda && i == 0 && strcmp(driver, "auto") == 0) {
      // auto: a GPU that cannot be served leaves the local driver.
      snprintf(registry->drivers[0].reason, sizeof(registry->drivers[0].reason),
               "%s", halo_status_message(status));
      registry->drivers[0].available = false;
      HALO_LOG_WARN("driver cuda: %s; serving the local driver",
                    registry->drivers[0].reason);
      halo_status_free(status);
      snprintf(state->driver, sizeof(state->driver), "local");
      cuda = false;
      count = 1;
      status = halod_worker_spawn(daemon, 0, "probe", 120ll * 1000000000ll,
                                  true, &device);
    }
    if (status) return status;
    state->infos[i] = device->info;
    // The probe is the first spare (or goes).
    if (daemon->config.worker_spares > 0) {
      char label[64];
      snprintf(label, sizeof(label), "device %u, spare worker", i);
      halo_hal_remote_device_set_label(device, label);
      state->spares[i][0] = device;
    } else {
      device->vtable->destroy(device);
    }
  }
  registry->device_count = count;
  return NULL;
}

halo_status_t halod_workers_start(halod_t *daemon) {
  struct halod_workers_state_t *state = calloc(1, sizeof(*state));
  if (!state) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  daemon->workers = state;
  pthread_mutex_init(&state->mutex, NULL);
  state->lost_async.data = daemon;
  uv_async_init(daemon->loop, &state->lost_async, halod_workers_on_lost_async);
  state->enabled = strcmp(daemon->config.device_workers, "process") == 0;
  // The parts a domain gets (halod_domain_parts): workers-per-domain means
  // nothing without workers, or with a domain per process.
  uint32_t parts = halod_domain_parts(daemon);
  if (daemon->config.workers_per_domain > parts) {
    HALO_LOG_WARN(
        "workers-per-domain %u ignored with device-workers %s and "
        "trust-domain %s: %s",
        daemon->config.workers_per_domain, daemon->config.device_workers,
        daemon->config.trust_domain,
        state->enabled ? "a domain is one process, whose sessions share a "
                         "worker"
                       : "device work runs in halod itself");
  }
  if (state->enabled) {
    HALO_RETURN_IF_ERROR(halod_workers_probe(daemon));
    HALO_LOG_INFO(
        "device workers: %u process%s per device and trust domain "
        "(trust-domain %s, driver %s)",
        parts, parts == 1 ? "" : "es", daemon->config.trust_domain,
        state->driver);
    for (uint32_t i = 0; parts > 1 && i < daemon->hal.device_count; ++i) {
      if (!state->infos[i].mps_known || state->infos[i].mps) continue;
      HALO_LOG_WARN(
          "workers-per-domain %u without MPS on device %u: the workers' "
          "contexts take turns on the GPU (time-sliced) instead of running "
          "together; run an MPS control daemon for halod's workers",
          parts, i);
    }
    return NULL;
  }
  halo_hal_registry_options_t options = {
      .driver = daemon->config.driver,
      .cuda_completion = daemon->config.cuda_completion,
      .cuda_streams = daemon->config.cuda_streams,
      .cuda_graph_bytes = daemon->config.cuda_graph_bytes,
      .cuda_compile_deadline_ms = daemon->config.cuda_compile_deadline_ms,
      .cache_directory = daemon->config.cache_directory,
  };
  HALO_RETURN_IF_ERROR(
      halo_hal_registry_initialize_with_options(&options, &daemon->hal));
  halod_device_lost_watch(daemon);
  return NULL;
}

void halod_workers_stop(halod_t *daemon) {
  struct halod_workers_state_t *state = daemon->workers;
  if (!state) return;
  if (state->lost_async.loop) {
    // Reports still queued: their work completes now; later ones complete
    // on their reader threads.
    pthread_mutex_lock(&state->mutex);
    state->lost_closed = true;
    pthread_mutex_unlock(&state->mutex);
    halod_workers_on_lost_async(&state->lost_async);
    uv_close((uv_handle_t *)&state->lost_async, NULL);
  }
  for (uint32_t d = 0; d < HALO_HAL_MAX_DEVICES; ++d) {
    for (uint32_t k = 0; k < HALOD_WORKER_SPARES_MAX; ++k) {
      if (state->spares[d][k]) halod_device_release(state->spares[d][k]);
      state->spares[d][k] = NULL;
    }
  }
  // Workers end once the loop has run the last callbacks that hold them
  // (loads finishing): main() waits for them (halod_workers_wait). Inline
  // devices still running executions or loads (halod_stop stopped waiting
  // for them) are left to the process exit.
  if (!state->enabled && daemon->work.deferred.issued == 0 &&
      !halod_executable_inline_loads_running(daemon)) {
    halo_hal_registry_deinitialize(&daemon->hal);
  }
}

// Starts spares for device |index| where a slot is empty or its spare died
// (without waiting: the loop goes on).
static void halod_workers_refill(halod_t *daemon, uint32_t index) {
  struct halod_workers_state_t *state = daemon->workers;
  for (uint32_t k = 0; k < daemon->config.worker_spares; ++k) {
    halo_hal_device_t **slot = &state->spares[index][k];
    if (*slot && halo_hal_remote_device_lost(*slot, NULL, 0)) {
      halod_device_release(*slot);
      *slot = NULL;
    }
    if (*slot) continue;
    halo_status_t status = halod_worker_spawn(
        daemon, index, "spare", 120ll * 1000000000ll, false, slot);
    if (status) {
      HALO_LOG_WARN("device %u: no spare worker: %s", index,
                    halo_status_message(status));
      halo_status_free(status);
    }
  }
}

// A spare of device |index| that is up, or NULL.
// A spare of device |index|: one that is up, else one still starting (the
// caller waits for it rather than starting yet another context), else NULL.
static halo_hal_device_t *halod_workers_take_spare(halod_t *daemon,
                                                   uint32_t index) {
  struct halod_workers_state_t *state = daemon->workers;
  halo_hal_device_t **starting = NULL;
  for (uint32_t k = 0; k < daemon->config.worker_spares; ++k) {
    halo_hal_device_t **slot = &state->spares[index][k];
    if (!*slot) continue;
    if (halo_hal_remote_device_is_ready(*slot)) {
      halo_hal_device_t *spare = *slot;
      *slot = NULL;
      return spare;
    }
    if (!starting && !halo_hal_remote_device_lost(*slot, NULL, 0)) {
      starting = slot;
    }
  }
  if (!starting) return NULL;
  halo_hal_device_t *spare = *starting;
  *starting = NULL;
  return spare;
}

halo_status_t halod_domain_device(halod_t *daemon, halod_domain_t *domain,
                                  uint32_t index,
                                  halo_hal_device_t **out_device) {
  *out_device = NULL;
  if (index >= daemon->hal.device_count) {
    return halo_status_make(HALO_STATUS_OUT_OF_RANGE,
                            "device %u does not exist (the daemon has %u)",
                            index, daemon->hal.device_count);
  }
  if (!halod_workers_enabled(daemon)) {
    domain->workers[index].device = daemon->hal.devices[index];
    *out_device = domain->workers[index].device;
    return NULL;
  }
  if (!domain->workers[index].device) {
    // Never waited for here, on the loop: a worker may still be starting
    // (a CUDA context takes tens of milliseconds, a wedged driver until the
    // start's timeout). The session that needs it waits off the loop
    // (halod_session_create), and its requests behind it.
    int64_t started = halo_clock_now_ns();
    char label[160];
    snprintf(label, sizeof(label), "device %u, trust domain %s", index,
             domain->name);
    halo_hal_device_t *spare = halod_workers_take_spare(daemon, index);
    halo_status_t status = NULL;
    if (spare && halo_hal_remote_device_lost(spare, NULL, 0)) {
      halod_device_release(spare);  // it died starting: start another
      spare = NULL;
    }
    if (spare) {
      halo_hal_remote_device_set_label(spare, label);
      domain->workers[index].device = spare;
    } else {
      status = halod_worker_spawn(daemon, index, domain->name, 0, false,
                                  &domain->workers[index].device);
    }
    halod_workers_refill(daemon, index);
    if (status) {
      return halo_status_annotate(status,
                                  "starting the worker of device %u for "
                                  "trust domain %s",
                                  index, domain->name);
    }
    ++domain->workers[index].started;
    ++daemon->stats.workers_started;
    bool ready = halo_hal_remote_device_is_ready(domain->workers[index].device);
    HALO_LOG_INFO(
        "device %u, trust domain %s: worker pid %d %s in %.1f ms", index,
        domain->name,
        (int)halo_hal_remote_device_pid(domain->workers[index].device),
        spare ? (ready ? "(a spare) taken" : "(a spare, still starting) taken")
              : "starting",
        (double)(halo_clock_now_ns() - started) / 1e6);
  }
  *out_device = domain->workers[index].device;
  return NULL;
}

halo_status_t halod_domain_start_devices(halod_t *daemon,
                                         halod_domain_t *domain) {
  for (uint32_t i = 0; i < daemon->hal.device_count; ++i) {
    // A worker that died and whose loss the loop has not handled yet (a
    // client that saw its execution fail reconnects at once): handle it now,
    // so that the new session gets a fresh worker, not the dead one.
    halo_hal_device_t *device = domain->workers[i].device;
    if (device && halo_hal_remote_device_is(device) &&
        halo_hal_remote_device_lost(device, NULL, 0)) {
      halod_workers_handle_lost(daemon, device);
    }
  }
  for (uint32_t i = 0; i < daemon->hal.device_count; ++i) {
    halo_hal_device_t *device = NULL;
    HALO_RETURN_IF_ERROR(halod_domain_device(daemon, domain, i, &device));
  }
  return NULL;
}

void halod_domain_stop_devices(halod_t *daemon, halod_domain_t *domain) {
  for (uint32_t i = 0; i < HALO_HAL_MAX_DEVICES; ++i) {
    if (!domain->workers[i].device) continue;
    if (halod_workers_enabled(daemon))
      halod_device_release(domain->workers[i].device);
    domain->workers[i].device = NULL;
  }
}

void halod_workers_wait(int64_t deadline_ns) {
  uint32_t left = halo_hal_remote_wait_all(deadline_ns - halo_clock_now_ns());
  if (left) HALO_LOG_WARN("%u device worker(s) still running at exit", left);
}

void halod_workers_visit(halod_t *daemon,
                         void (*visit)(void *user_data,
                                       const halod_worker_view_t *view),
                         void *user_data) {
  if (!halod_workers_enabled(daemon)) return;
  for (size_t i = 0; i < daemon->sessions.domains.capacity; ++i) {
    if (!daemon->sessions.domains.entries[i].key) continue;
    const halod_domain_t *domain = daemon->sessions.domains.entries[i].value;
    for (uint32_t d = 0; d < daemon->hal.device_count; ++d) {
      const halod_worker_t *worker = &domain->workers[d];
      halo_hal_device_t *device = worker->device;
      if (!device && !worker->faults) continue;
      halod_worker_view_t view = {
          .device = d,
          .domain = domain->name,
          .pid = device ? (int32_t)halo_hal_remote_device_pid(device) : 0,
          .state = !device                                   ? "lost"
                   : halo_hal_remote_device_is_ready(device) ? "serving"
                                                             : "starting",
          .sessions = domain->sessions,
          .started = worker->started,
          .faults = worker->faults,
          .last_fault = worker->last_fault,
      };
      if (device) {
        view.usage_known = halo_hal_device_query_usage(device, &view.usage);
      }
      visit(user_data, &view);
    }
  }
  for (uint32_t d = 0; d < daemon->hal.device_count; ++d) {
    for (uint32_t k = 0; k < HALOD_WORKER_SPARES_MAX; ++k) {
      halo_hal_device_t *spare = daemon->workers->spares[d][k];
      if (!spare) continue;
      halod_worker_view_t view = {
          .device = d,
          .domain = "",
          .pid = (int32_t)halo_hal_remote_device_pid(spare),
          .state =
              halo_hal_remote_device_is_ready(spare) ? "spare" : "starting",
          .last_fault = "",
      };
      view.usage_known = halo_hal_device_query_usage(spare, &view.usage);
      visit(user_data, &view);
    }
  }
}
