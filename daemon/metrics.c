// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "daemon/command_buffer.h"
#include "daemon/daemon.h"
#include "daemon/device_call.h"
#include "daemon/executable.h"
#include "daemon/queue.h"
#include "daemon/ring_worker.h"
#include "daemon/session.h"
#include "daemon/trust_domain.h"
#include "daemon/workers.h"
#include "hal/remote/remote_device.h"

// A growing string; |failed| once an allocation failed.
typedef struct halod_text_t {
  char *data;
  size_t length;
  size_t capacity;
  bool failed;
  halod_metrics_format_t format;
} halod_text_t;

static void halod_text_append(halod_text_t *text, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void halod_text_append(halod_text_t *text, const char *format, ...) {
  if (text->failed) return;
  for (;;) {
    va_list args;
    va_start(args, format);
    size_t room = text->capacity - text->length;
    int n = vsnprintf(text->data ? text->data + text->length : NULL, room,
                      format, args);
    va_end(args);
    if (n < 0) {
      text->failed = true;
      return;
    }
    if ((size_t)n < room) {
      text->length += (size_t)n;
      return;
    }
    size_t capacity = text->capacity ? text->capacity * 2 : 8192;
    while (capacity - text->length <= (size_t)n) capacity *= 2;
    char *data = realloc(text->data, capacity);
    if (!data) {
      text->failed = true;
      return;
    }
    text->data = data;
    text->capacity = capacity;
  }
}

// A label value: backslash, double quote and newline escaped.
static void halod_text_label(halod_text_t *text, const char *value) {
  for (const char *c = value ? value : ""; *c; ++c) {
    if (*c == '\\') {
      halod_text_append(text, "\\\\");
    } else if (*c == '"') {
      halod_text_append(text, "\\\"");
    } else if (*c == '\n') {
      halod_text_append(text, "\\n");
    } else {
      halod_text_append(text, "%c", *c);
    }
  }
}

// HELP and TYPE of a family. OpenMetrics names a counter's family without
// its samples' "_total".
static void halod_text_header(halod_text_t *text, const char *name,
                              const char *type, const char *help) {
  size_t length = strlen(name);
  if (text->format == HALOD_METRICS_OPENMETRICS &&
      strcmp(type, "counter") == 0 && length > 6 &&
      strcmp(name + length - 6, "_total") == 0) {
    length -= 6;
  }
  halod_text_append(text, "# HELP %.*s %s\n# TYPE %.*s %s\n", (int)length, name,
                    help, (int)length, name, type);
}

// One sample without labels.
static void halod_text_sample(halod_text_t *text, const char *name,
                              const char *type, const char *help,
                              double value) {
  halod_text_header(text, name, type, help);
  halod_text_append(text, "%s %.17g\n", name, value);
}

// Upper bounds (seconds) of the latency histogram's buckets.
static const double kLatencyBounds[] = {
    1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
    2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1,    2.5,  5,      10,   30};

typedef struct halod_device_totals_t {
  uint64_t submitted;
  uint64_t completed;
  uint64_t failed;
  uint32_t pending;
  uint32_t in_flight;
} halod_device_totals_t;

static void halod_metrics_device_totals(halod_t *daemon,
                                        halod_device_totals_t *totals) {
  // In flight as haloctl status counts it: with what the workers took from
  // rings themselves. First: it brings the queues' counts of those up to
  // date, so that each counts as submitted from when it was taken.
  uint32_t in_flight[HALO_HAL_MAX_DEVICES];
  halod_work_in_flight(daemon, in_flight);
  for (uint32_t d = 0; d < daemon->hal.device_count; ++d) {
    const halod_device_stats_t *stats = &daemon->stats.devices[d];
    totals[d].submitted = stats->retired_submitted;
    totals[d].completed = stats->retired_completed;
    totals[d].failed = stats->retired_failed;
    totals[d].in_flight = in_flight[d];
  }
  for (halod_queue_t *queue = daemon->stats.queues; queue;
       queue = queue->all_next) {
    halod_device_totals_t *t = &totals[queue->device];
    t->submitted += halod_queue_submitted(queue);
    t->completed += queue->completed;
    t->failed += queue->failed;
    t->pending += queue->waiting;
  }
}

static void halod_metrics_devices(halod_t *daemon, halod_text_t *text) {
  halod_device_totals_t totals[HALO_HAL_MAX_DEVICES];
  memset(totals, 0, sizeof(totals));
  halod_metrics_device_totals(daemon, totals);
  uint32_t count = daemon->hal.device_count;

  halod_text_header(text, "halo_device_info", "gauge",
                    "A device halod serves (value 1).");
  for (uint32_t d = 0; d < count; ++d) {
    const halo_hal_device_info_t *info = halod_device_info(daemon, d);
    halod_text_append(text, "halo_device_info{device=\"%u\",driver=\"", d);
    halod_text_label(text, info->driver);
    halod_text_append(text, "\",name=\"");
    halod_text_label(text, info->name);
    halod_text_append(text, "\"} 1\n");
  }
  halod_text_header(text, "halo_device_memory_total_bytes", "gauge",
                    "Memory of the device.");
  for (uint32_t d = 0; d < count; ++d) {
    halod_text_append(
        text, "halo_device_memory_total_bytes{device=\"%u\"} %" PRIu64 "\n", d,
        halod_device_info(daemon, d)->memory_bytes);
  }
  halod_text_header(text, "halo_device_allocated_bytes", "gauge",
                    "Bytes of live buffers on the device, by memory type.");
  for (uint32_t d = 0; d < count; ++d) {
    const halod_device_stats_t *stats = &daemon->stats.devices[d];
    halod_text_append(text,
                      "halo_device_allocated_bytes{device=\"%u\",memory="
                      "\"device\"} %" PRIu64
                      "\nhalo_device_allocated_bytes{device=\"%u\",memory="
                      "\"host_visible\"} %" PRIu64 "\n",
                      d, stats->device_bytes, d, stats->host_bytes);
  }
  halod_text_header(text, "halo_device_buffers", "gauge",
                    "Live buffers on the device.");
  for (uint32_t d = 0; d < count; ++d) {
    halod_text_append(text, "halo_device_buffers{device=\"%u\"} %u\n", d,
                      daemon->stats.devices[d].buffers);
  }

  static const struct {
    const char *name;
    const char *type;
    const char *help;
    size_t offset;
    bool is_32;
  } kSeries[] = {
      {"halo_submissions_total", "counter",
       "Submissions accepted, with the executions the device's workers "
       "took from submission rings themselves (counted when taken).",
       offsetof(halod_device_totals_t, submitted), false},
      {"halo_completions_total", "counter",
       "Submissions that completed successfully.",
       offsetof(halod_device_totals_t, completed), false},
      {"halo_failures_total", "counter",
       "Submissions that failed (a failed wait, a device error, a cancel).",
       offsetof(halod_device_totals_t, failed), false},
      {"halo_pending_submissions", "gauge",
       "Submissions waiting on semaphores.",
       offsetof(halod_device_totals_t, pending), true},
      {"halo_in_flight_submissions", "gauge",
       "Submissions issued to the device and not completed, with those its "
       "device workers took from submission rings themselves.",
       offsetof(halod_device_totals_t, in_flight), true},
  };
  for (size_t s = 0; s < sizeof(kSeries) / sizeof(kSeries[0]); ++s) {
    halod_text_header(text, kSeries[s].name, kSeries[s].type, kSeries[s].help);
    for (uint32_t d = 0; d < count; ++d) {
      const char *field = (const char *)&totals[d] + kSeries[s].offset;
      uint64_t value = kSeries[s].is_32 ? *(const uint32_t *)field
                                        : *(const uint64_t *)field;
      halod_text_append(text, "%s{device=\"%u\"} %" PRIu64 "\n",
                        kSeries[s].name, d, value);
    }
  }

  halod_text_header(text, "halo_execution_latency_seconds", "histogram",
                    "Issue to completion of completed submissions (bucket "
                    "counts exact to within 12.5% of a bound).");
  for (uint32_t d = 0; d < count; ++d) {
    const halod_latency_t *latency = &daemon->stats.devices[d].latency;
    for (size_t b = 0; b < sizeof(kLatencyBounds) / sizeof(kLatencyBounds[0]);
         ++b) {
      halod_text_append(
          text,
          "halo_execution_latency_seconds_bucket{device=\"%u\",le=\"%g\"} "
          "%" PRIu64 "\n",
          d, kLatencyBounds[b],
          halod_latency_count_at_most(latency, kLatencyBounds[b] * 1e9));
    }
    halod_text_append(text,
                      "halo_execution_latency_seconds_bucket{device=\"%u\","
                      "le=\"+Inf\"} %" PRIu64
                      "\nhalo_execution_latency_seconds_sum{device=\"%u\"} "
                      "%.9f\nhalo_execution_latency_seconds_count{device="
                      "\"%u\"} %" PRIu64 "\n",
                      d, latency->count, d, (double)latency->sum_ns / 1e9, d,
                      latency->count);
  }
}

// The device workers' usage reports summed up per device
// (halod_metrics_workers), against halod's own cuda-graph-bytes.
typedef struct halod_metrics_worker_totals_t {
  uint64_t bound;
  bool known[HALO_HAL_MAX_DEVICES];
  uint64_t bytes[HALO_HAL_MAX_DEVICES];      // all its workers'
  uint64_t bytes_max[HALO_HAL_MAX_DEVICES];  // the most one worker takes
  uint64_t instances[HALO_HAL_MAX_DEVICES];
} halod_metrics_worker_totals_t;

static void halod_metrics_worker_add(void *user_data,
                                     const halod_worker_view_t *view) {
  halod_metrics_worker_totals_t *totals = user_data;
  const halo_hal_device_usage_t *usage = &view->usage;
  // Spares have run nothing; a report of another bound than halod gave its
  // workers is not a worker of this halod's telling (a worker is trusted
  // less than halod: it must not move the bound the alerts compare with).
  if (!view->usage_known || view->device >= HALO_HAL_MAX_DEVICES ||
      !view->domain || !view->domain[0] ||
      usage->graph_bytes_limit != totals->bound) {
    return;
  }
  uint32_t d = view->device;
  totals->known[d] = true;
  // Saturating: one report cannot wrap the sums past the others.
  totals->bytes[d] = totals->bytes[d] + usage->graph_bytes < totals->bytes[d]
                         ? UINT64_MAX
                         : totals->bytes[d] + usage->graph_bytes;
  if (usage->graph_bytes > totals->bytes_max[d]) {
    totals->bytes_max[d] = usage->graph_bytes;
  }
  totals->instances[d] += usage->graph_instances;
}

// What the device workers' drivers reported of their usage (CUDA: the
// graph instances' memory against cuda-graph-bytes, a bound per worker),
// per device: labels stay bounded (a worker per trust domain, with
// trust-domain process one per client process, would make a series each;
// haloctl workers shows each worker). Nothing for a device whose workers
// reported none.
static void halod_metrics_workers(halod_t *daemon, halod_text_t *text) {
  halod_metrics_worker_totals_t totals;
  memset(&totals, 0, sizeof(totals));
  totals.bound = daemon->config.cuda_graph_bytes;
  halod_workers_visit(daemon, halod_metrics_worker_add, &totals);
  const struct {
    const char *name;
    const char *help;
    const uint64_t *values;  // per device (NULL: the bound, every device's)
  } families[] = {
      {"halo_worker_graph_bytes",
       "Device memory the CUDA graph instances of the device workers' "
       "recordings take, by halo's estimate, all workers of the device "
       "(their last reports, at most about a second old).",
       totals.bytes},
      {"halo_worker_graph_bytes_max",
       "The most CUDA graph instance memory one device worker of the device "
       "takes: the one closest to its bound.",
       totals.bytes_max},
      {"halo_worker_graph_bytes_limit",
       "The bound on one device worker's CUDA graph instance memory "
       "(cuda-graph-bytes): past it idle instances of other recordings are "
       "destroyed, executions wait, or fail RESOURCE_EXHAUSTED.",
       NULL},
      {"halo_worker_graph_instances",
       "CUDA graph instances the device workers of the device hold (in use "
       "or idle).",
       totals.instances},
  };
  for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); ++f) {
    halod_text_header(text, families[f].name, "gauge", families[f].help);
    for (uint32_t d = 0; d < HALO_HAL_MAX_DEVICES; ++d) {
      if (!totals.known[d]) continue;
      halod_text_append(
          text, "%s{device=\"%u\"} %" PRIu64 "\n", families[f].name, d,
          families[f].values ? families[f].values[d] : totals.bound);
    }
  }
}

// process_* as the Prometheus client libraries export them, from
// /proc/self (halod itself; device workers are processes of their own).
static void halod_metrics_process(halod_text_t *text) {
  long ticks = sysconf(_SC_CLK_TCK);
  long page = sysconf(_SC_PAGESIZE);
  char stat[1024] = "";
  FILE *file = fopen("/proc/self/stat", "re");
  if (file) {
    size_t n = fread(stat, 1, sizeof(stat) - 1, file);
    stat[n] = '\0';
    fclose(file);
  }
  // Fields after the command's closing parenthesis, from field 3 (state).
  unsigned long long fields[22] = {0};
  const char *c = strrchr(stat, ')');
  if (c && ticks > 0 && page > 0) {
    c += 2;  // ") "
    ++c;     // state
    for (int f = 4; f <= 24 && *c; ++f) {
      fields[f - 3] = strtoull(c, (char **)&c, 10);
    }
  }
  unsigned long long boot = 0;
  file = fopen("/proc/stat", "re");
  if (file) {
    char line[256];
    while (fgets(line, sizeof(line), file)) {
      if (sscanf(line, "btime %llu", &boot) == 1) break;
    }
    fclose(file);
  }
  double cpu =
      ticks > 0 ? (double)(fields[14 - 3] + fields[15 - 3]) / (double)ticks : 0;
  halod_text_sample(text, "process_cpu_seconds_total", "counter",
                    "User and system CPU time of halod, in seconds.", cpu);
  halod_text_sample(text, "process_virtual_memory_bytes", "gauge",
                    "Virtual memory size of halod.", (double)fields[23 - 3]);
  halod_text_sample(text, "process_resident_memory_bytes", "gauge",
                    "Resident memory size of halod.",
                    (double)fields[24 - 3] * (double)(page > 0 ? page : 0));
  halod_text_sample(
      text, "process_start_time_seconds", "gauge",
      "Start time of halod since the Unix epoch, in seconds.",
      ticks > 0 ? (double)boot + (double)fields[22 - 3] / (double)ticks : 0);
  long open_fds = 0;
  DIR *directory = opendir("/proc/self/fd");
  if (directory) {
    while (readdir(directory)) ++open_fds;
    open_fds -= 3;  // ".", ".." and the directory's own descriptor
    closedir(directory);
  }
  halod_text_sample(text, "process_open_fds", "gauge",
                    "Open file descriptors of halod.",
                    (double)(open_fds > 0 ? open_fds : 0));
  struct rlimit limit;
  double max_fds =
      getrlimit(RLIMIT_NOFILE, &limit) == 0 ? (double)limit.rlim_cur : 0;
  halod_text_sample(text, "process_max_fds", "gauge",
                    "Most open file descriptors halod may have "
                    "(RLIMIT_NOFILE).",
                    max_fds);
}

char *halod_metrics_render(halod_t *daemon, halod_metrics_format_t format) {
  halod_text_t text = {.format = format};
  halod_text_header(&text, "halo_build_info", "gauge",
                    "halod's version and protocol (value 1).");
  halod_text_append(&text,
                    "halo_build_info{version=\"%s\",protocol=\"%d\"} 1\n",
                    HALO_VERSION_STRING, HALO_PROTOCOL_VERSION);
  if (daemon->metrics.start_time_seconds == 0) {
    // The wall clock now less the uptime, once: recomputed for every scrape
    // it would move a little each time (and a whole second where it dropped
    // the nanoseconds), and changes() of it would report restarts.
    struct timespec now_real;
    clock_gettime(CLOCK_REALTIME, &now_real);
    double uptime = (double)(halo_clock_now_ns() - daemon->start_ns) / 1e9;
    daemon->metrics.start_time_seconds =
        (double)now_real.tv_sec + (double)now_real.tv_nsec / 1e9 - uptime;
  }
  halod_text_sample(&text, "halo_start_time_seconds", "gauge",
                    "When halod started (Unix time).",
                    daemon->metrics.start_time_seconds);
  halod_text_sample(&text, "halo_draining", "gauge",
                    "1 while halod drains (haloctl drain).",
                    daemon->draining ? 1 : 0);
  halod_text_sample(&text, "halo_sessions_active", "gauge",
                    "Connected sessions.",
                    (double)daemon->sessions.by_id.count);
  halod_text_sample(&text, "halo_sessions_total", "counter",
                    "Sessions ever connected.",
                    (double)daemon->stats.sessions_total);
  halod_text_sample(&text, "halo_sessions_killed_total", "counter",
                    "Sessions ended by haloctl kill-client.",
                    (double)daemon->stats.sessions_killed);
  halod_text_sample(&text, "halo_sessions_refused_total", "counter",
                    "Sessions refused: their process was over fault-budget, "
                    "halod could not identify it, or its uid held "
                    "uid-domains trust domains.",
                    (double)daemon->stats.sessions_refused);
  halod_text_sample(&text, "halo_sessions_uid_limited_total", "counter",
                    "Connections refused: their uid had uid-connections "
                    "sessions.",
                    (double)daemon->stats.sessions_uid_limited);
  halod_text_sample(&text, "halo_sessions_uid_fds_limited_total", "counter",
                    "Connections refused at Hello: their uid held uid-fds "
                    "of halod's descriptors (semaphore pages, host arenas, "
                    "imports).",
                    (double)daemon->stats.sessions_uid_fds_limited);
  halod_text_sample(&text, "halo_connections_limited_total", "counter",
                    "Connections closed on arrival: halod had connections "
                    "sessions.",
                    (double)daemon->stats.sessions_limited);
  halod_text_sample(&text, "halo_hello_timeouts_total", "counter",
                    "Connections closed: no Hello within hello-timeout-ms.",
                    (double)daemon->stats.sessions_hello_timed_out);
  halod_server_counters_t server = halod_server_counters(daemon->client_server);
  halod_text_sample(&text, "halo_replies_dropped_total", "counter",
                    "Replies dropped: their client did not read them within "
                    "reply-timeout-ms (or within 50 ms, past uid-replies).",
                    (double)server.replies_dropped);
  halod_text_sample(&text, "halo_requests_refused_total", "counter",
                    "Requests answered RESOURCE_EXHAUSTED: their connection "
                    "had session-requests in flight.",
                    (double)server.requests_refused);
  halod_text_sample(&text, "halo_requests_dropped_total", "counter",
                    "Requests dropped unanswered: their connection had "
                    "session-requests in flight and a reply waiting on it.",
                    (double)server.requests_dropped);
  halod_text_sample(&text, "halo_client_faults_total", "counter",
                    "Device faults charged to client processes (fault-budget).",
                    (double)daemon->stats.client_faults);
  halod_text_sample(&text, "halo_workers_started_total", "counter",
                    "Device worker processes started for trust domains "
                    "(spares counted when a domain takes one).",
                    (double)daemon->stats.workers_started);
  halod_text_sample(
      &text, "halo_workers_lost_total", "counter",
      "Trust domains' device worker processes that died (crashed, "
      "killed, past submission-deadline-ms or worker-hang-ms) or "
      "were replaced.",
      (double)daemon->stats.workers_lost);
  halod_text_sample(&text, "halo_ring_worker_executions_total", "counter",
                    "Executions device workers took from submission rings "
                    "themselves (ring-consumer worker), without halod.",
                    (double)halod_ring_workers_executions(daemon));
  halod_text_sample(&text, "halo_worker_control_calls_total", "counter",
                    "Control calls halod made to device workers, each a "
                    "round trip (allocations, copies, host registrations, "
                    "loads, entry lookups, recordings' preparation, queues, "
                    "a lost session's ring).",
                    (double)halo_hal_remote_control_calls());
  halod_text_sample(&text, "halo_worker_control_calls_waiting", "gauge",
                    "Requests waiting for their control call to a device "
                    "worker, made off halod's loop (a session's later "
                    "requests wait behind its own).",
                    (double)halod_device_calls_waiting(daemon));
  halod_text_sample(&text, "halo_worker_requests_waiting", "gauge",
                    "Requests waiting for a device worker, each on a context "
                    "of its own (calls): their control call, or their "
                    "session's call ahead of them.",
                    (double)halod_device_calls_placed(daemon));
  halod_text_sample(&text, "halo_worker_requests_refused_total", "counter",
                    "Requests refused for now because calls, or "
                    "domain-calls of their trust domain, were waiting for "
                    "device workers already; libhalo sends them again.",
                    (double)daemon->stats.calls_refused);
  halod_text_sample(&text, "halo_trust_domains", "gauge",
                    "Trust domains (each part with workers-per-domain "
                    "above 1): with sessions, or kept for the cached "
                    "entries of their workers.",
                    (double)daemon->sessions.domains.count);
  halod_text_sample(&text, "halo_trust_domains_idle", "gauge",
                    "Trust domains without sessions: kept for the cached "
                    "entries of their workers (at most idle-domains), or "
                    "until work their sessions left in flight is done.",
                    (double)halod_domains_idle(daemon));
  halod_text_sample(&text, "halo_idle_domains_ended_total", "counter",
                    "Trust domains without sessions ended past idle-domains, "
                    "their cached entries dropped.",
                    (double)daemon->stats.idle_domains_ended);
  halod_text_sample(&text, "halo_semaphores", "gauge", "Live semaphores.",
                    (double)daemon->shared.semaphores.count);
  halod_text_sample(&text, "halo_executables", "gauge",
                    "Executables loaded (or loading).",
                    (double)daemon->cache.executables.count);
  halod_text_sample(&text, "halo_executable_cache_hits_total", "counter",
                    "Executable loads that found it loaded already.",
                    (double)daemon->stats.executable_hits);
  halod_text_sample(&text, "halo_executable_cache_misses_total", "counter",
                    "Executable loads that went to the driver.",
                    (double)daemon->stats.executable_misses);
  halod_text_sample(&text, "halo_executable_loads_waiting", "gauge",
                    "Requests waiting for an executable load (its compile "
                    "or JIT), each on a context of its own (loads).",
                    (double)halod_executable_loads_waiting(daemon));
  halod_text_sample(&text, "halo_executable_loads_refused_total", "counter",
                    "Executable loads refused for now (loads or "
                    "domain-loads waiting already); libhalo sends them again.",
                    (double)daemon->stats.loads_refused);
  halod_text_sample(&text, "halo_executable_cache_cached", "gauge",
                    "Executables kept after their last release (LRU).",
                    (double)daemon->cache.executable_lru.count);
  halod_text_sample(&text, "halo_executable_cache_evictions_total", "counter",
                    "Released executables evicted past "
                    "executable-cache-entries.",
                    (double)daemon->cache.executable_lru.evictions);
  halod_text_sample(&text, "halo_memo_cache_cached", "gauge",
                    "Recordings kept after their last release (LRU).",
                    (double)daemon->cache.memo_lru.count);
  halod_text_sample(&text, "halo_executable_cache_bytes", "gauge",
                    "Bytes of the executables no session holds: kept after "
                    "their last release, or held only by kept recordings "
                    "(at most executable-cache-bytes).",
                    (double)daemon->cache.unheld_executable_bytes);
  halod_text_sample(&text, "halo_memo_cache_bytes", "gauge",
                    "Bytes the recordings kept after their last release cost "
                    "halod and the workers (at most memo-cache-bytes).",
                    (double)daemon->cache.memo_lru.bytes);
  halod_text_sample(&text, "halo_memo_cache_evictions_total", "counter",
                    "Released recordings evicted past memo-cache-entries "
                    "or memo-cache-bytes.",
                    (double)daemon->cache.memo_lru.evictions);
  halod_text_sample(&text, "halo_memo_cache_entries", "gauge",
                    "Memoized recordings.", (double)daemon->cache.memo.count);
  halod_text_sample(&text, "halo_memo_cache_hits_total", "counter",
                    "Recordings that found an identical one memoized.",
                    (double)daemon->cache.memo_hits);
  halod_text_sample(&text, "halo_memo_cache_misses_total", "counter",
                    "Recordings prepared anew.",
                    (double)daemon->cache.memo_misses);
  halod_metrics_devices(daemon, &text);
  halod_metrics_workers(daemon, &text);
  halod_metrics_process(&text);
  if (format == HALOD_METRICS_OPENMETRICS) halod_text_append(&text, "# EOF\n");
  if (text.failed) {
    free(text.data);
    return NULL;
  }
  return text.data ? text.data : strdup("");
}

bool halod_metrics_write_textfile(halod_t *daemon) {
  const char *path = daemon->config.metrics_textfile;
  if (!path[0]) return true;
  char *text = halod_metrics_render(daemon, HALOD_METRICS_PROMETHEUS);
  char temporary[sizeof(daemon->config.metrics_textfile) + 32];
  snprintf(temporary, sizeof(temporary), "%s.%d.tmp", path, (int)getpid());
  const char *failed = NULL;
  int error = 0;
  int fd = -1;
  if (!text) {
    failed = "rendering";
    error = ENOMEM;
  } else if ((fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                        0644)) < 0) {
    failed = "creating";
    error = errno;
  } else {
    size_t length = strlen(text);
    size_t done = 0;
    // 0644 whatever the umask (the systemd unit's 0007 would make it
    // 0640, which node-exporter's user cannot read).
    if (fchmod(fd, 0644) != 0) {
      failed = "making readable";
      error = errno;
      done = length;
    }
    while (done < length) {
      ssize_t n = write(fd, text + done, length - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        failed = "writing";
        error = n < 0 ? errno : EIO;
        break;
      }
      done += (size_t)n;
    }
    if (close(fd) != 0 && !failed) {
      failed = "writing";
      error = errno;
    }
    if (!failed && rename(temporary, path) != 0) {
      failed = "renaming";
      error = errno;
    }
    if (failed) unlink(temporary);
  }
  free(text);
  if (failed) {
    if (!daemon->metrics.failing) {
      HALO_LOG_WARN(
          "metrics: %s %s failed: %s (logged once until a write "
          "succeeds)",
          failed, temporary, strerror(error));
    }
    daemon->metrics.failing = true;
    return false;
  }
  if (daemon->metrics.failing) {
    HALO_LOG_INFO("metrics: writing %s again", path);
  }
  daemon->metrics.failing = false;
  snprintf(daemon->metrics.written, sizeof(daemon->metrics.written), "%s",
           path);
  return true;
}

static void halod_metrics_on_timer(uv_timer_t *timer) {
  halod_t *daemon = timer->data;
  halod_metrics_write_textfile(daemon);
}

// Removes the textfile written last, if any.
static void halod_metrics_remove_textfile(halod_metrics_t *metrics) {
  if (!metrics->written[0]) return;
  if (unlink(metrics->written) != 0 && errno != ENOENT) {
    HALO_LOG_WARN("metrics: removing %s: %s", metrics->written,
                  strerror(errno));
  }
  metrics->written[0] = '\0';
}

void halod_metrics_configure(halod_t *daemon) {
  halod_metrics_t *metrics = &daemon->metrics;
  uint64_t interval_ms = (uint64_t)daemon->config.metrics_interval * 1000;
  // A reload that moved or removed the file: the old one would go stale.
  if (strcmp(metrics->written, daemon->config.metrics_textfile) != 0) {
    halod_metrics_remove_textfile(metrics);
  }
  if (!daemon->config.metrics_textfile[0]) {
    if (metrics->timer_active) uv_timer_stop(&metrics->timer);
    return;
  }
  // Initialized once, closed only by halod_metrics_stop.
  if (!metrics->timer_active) {
    uv_timer_init(daemon->loop, &metrics->timer);
    metrics->timer.data = daemon;
    metrics->timer_active = true;
  }
  metrics->interval_ms = interval_ms;
  // Due at once, then every interval.
  uv_timer_start(&metrics->timer, halod_metrics_on_timer, 0, interval_ms);
  HALO_LOG_INFO("metrics: writing %s every %u s",
                daemon->config.metrics_textfile,
                daemon->config.metrics_interval);
}

void halod_metrics_stop(halod_t *daemon) {
  halod_metrics_t *metrics = &daemon->metrics;
  halod_metrics_remove_textfile(metrics);
  if (!metrics->timer_active) return;
  uv_timer_stop(&metrics->timer);
  uv_close((uv_handle_t *)&metrics->timer, NULL);
  metrics->timer_active = false;
}
