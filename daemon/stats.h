// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halod's counters for haloctl and the Prometheus metrics: latency
// histograms, per-device totals that outlive the queues they came from, and
// the list of every live queue (a queue can outlive its session while its
// issued work runs).
//
// Counters are only ever incremented (Prometheus counters must not go
// backwards): a queue's totals move into its device's totals when it is
// freed.
//
// Loop thread only.
#ifndef HALOD_STATS_H_
#define HALOD_STATS_H_

#include <stddef.h>
#include <stdint.h>

#include "hal/device.h"

// Log-linear buckets of nanoseconds: 8 per power of two (12.5% wide), from
// 0 up to 2^41 ns (about 36 minutes; longer lands in the last bucket).
#define HALOD_LATENCY_SUB_BUCKETS 8
#define HALOD_LATENCY_BUCKET_COUNT (40 * HALOD_LATENCY_SUB_BUCKETS)

typedef struct halod_latency_t {
  uint64_t count;
  uint64_t sum_ns;
  uint32_t buckets[HALOD_LATENCY_BUCKET_COUNT];
} halod_latency_t;

void halod_latency_record(halod_latency_t *latency, int64_t ns);
// The |quantile| (0..1) in nanoseconds: the middle of the bucket it falls
// in (within 6.25%); 0 without samples.
double halod_latency_quantile_ns(const halod_latency_t *latency,
                                 double quantile);
// Samples of at most |bound_ns| (bucket upper bounds at or below it; a
// bucket that straddles the bound counts by its lower half).
uint64_t halod_latency_count_at_most(const halod_latency_t *latency,
                                     double bound_ns);

// Totals of one device.
typedef struct halod_device_stats_t {
  // Of queues already freed (live queues add their own).
  uint64_t retired_submitted;
  uint64_t retired_completed;
  uint64_t retired_failed;
  // Issue -> completion of every completed submission on the device.
  halod_latency_t latency;
  // Bytes of live buffers on the device.
  uint64_t device_bytes;
  uint64_t host_bytes;  // host-visible buffers of the device
  uint32_t buffers;
} halod_device_stats_t;

typedef struct halod_queue_t halod_queue_t;

typedef struct halod_stats_t {
  uint64_t sessions_total;        // sessions ever created
  uint64_t sessions_killed;       // by haloctl kill-client
  uint64_t workers_started;       // device worker processes (daemon/workers.h)
  uint64_t workers_lost;          // ... that died or were replaced
  uint64_t client_faults;         // charged to client processes (fault budget)
  uint64_t sessions_refused;      // over the fault budget
  uint64_t sessions_uid_limited;  // over uid-connections
  uint64_t sessions_uid_fds_limited;  // their uid held uid-fds descriptors
  uint64_t sessions_limited;          // over connections (closed at once)
  uint64_t sessions_hello_timed_out;  // closed: no Hello in hello-timeout-ms
  uint64_t executable_hits;
  uint64_t executable_misses;
  uint64_t loads_refused;  // past loads or domain-loads, for now
  // Requests refused for now past calls or domain-calls (waiting places).
  uint64_t calls_refused;
  // Idle trust domains ended past idle-domains, their cached entries
  // dropped (daemon/trust_domain.h).
  uint64_t idle_domains_ended;
  halod_queue_t *queues;  // every live queue (halod_queue_t.all_next)
  halod_device_stats_t devices[HALO_HAL_MAX_DEVICES];
} halod_stats_t;

#endif  // HALOD_STATS_H_
