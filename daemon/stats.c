// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/stats.h"

static uint32_t halod_latency_bucket(uint64_t ns) {
  if (ns < HALOD_LATENCY_SUB_BUCKETS) return (uint32_t)ns;
  uint32_t exponent = 63u - (uint32_t)__builtin_clzll(ns);  // >= 3
  if (exponent > 41) return HALOD_LATENCY_BUCKET_COUNT - 1;
  uint32_t sub = (uint32_t)(ns >> (exponent - 3)) & 7u;
  return (exponent - 2) * HALOD_LATENCY_SUB_BUCKETS + sub;
}

// [lower, upper) of bucket |index| in nanoseconds.
static void halod_latency_bucket_range(uint32_t index, double *out_lower,
                                       double *out_upper) {
  if (index < HALOD_LATENCY_SUB_BUCKETS) {
    *out_lower = index;
    *out_upper = index + 1;
    return;
  }
  uint32_t exponent = index / HALOD_LATENCY_SUB_BUCKETS + 2;
  uint32_t sub = index % HALOD_LATENCY_SUB_BUCKETS;
  double unit = (double)(1ull << (exponent - 3));
  *out_lower = (8 + sub) * unit;
  *out_upper = (9 + sub) * unit;
}

void halod_latency_record(halod_latency_t *latency, int64_t ns) {
  if (ns < 0) ns = 0;
  ++latency->count;
  latency->sum_ns += (uint64_t)ns;
  ++latency->buckets[halod_latency_bucket((uint64_t)ns)];
}

double halod_latency_quantile_ns(const halod_latency_t *latency,
                                 double quantile) {
  if (latency->count == 0) return 0.0;
  if (quantile < 0) quantile = 0;
  if (quantile > 1) quantile = 1;
  // The rank of the sample wanted, 1-based.
  uint64_t rank = (uint64_t)(quantile * (double)latency->count + 0.5);
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (uint32_t i = 0; i < HALOD_LATENCY_BUCKET_COUNT; ++i) {
    seen += latency->buckets[i];
    if (seen >= rank) {
      double lower, upper;
      halod_latency_bucket_range(i, &lower, &upper);
      return (lower + upper) / 2;
    }
  }
  return 0.0;
}

uint64_t halod_latency_count_at_most(const halod_latency_t *latency,
                                     double bound_ns) {
  uint64_t count = 0;
  for (uint32_t i = 0; i < HALOD_LATENCY_BUCKET_COUNT; ++i) {
    double lower, upper;
    halod_latency_bucket_range(i, &lower, &upper);
    if (upper <= bound_ns + 1) {
      count += latency->buckets[i];
    } else {
      if ((lower + upper) / 2 <= bound_ns) count += latency->buckets[i];
      break;
    }
  }
  return count;
}
