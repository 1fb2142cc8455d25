// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Fault budget: faults per client process, refusal over budget (see the
// header).
#include "daemon/fault_budget.h"

#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"
#include "common/status.h"

// One process's recent faults: the newest |count| fault times (monotonic),
// a ring written at |next|.
typedef struct halod_fault_record_t {
  halod_client_process_t process;
  uint32_t count;
  uint32_t next;
  int64_t times_ns[HALOD_FAULT_BUDGET_MAX];
} halod_fault_record_t;

static uint64_t halod_fault_budget_key(uint32_t pid) {
  return (uint64_t)pid + 1;
}

static int64_t halod_fault_budget_window_ns(const halod_config_t *config) {
  return (int64_t)config->fault_budget_window_s * 1000000000ll;
}

// The |k|th newest fault time (1: the newest; |k| <= record->count).
static int64_t halod_fault_record_time(const halod_fault_record_t *record,
                                       uint32_t k) {
  return record->times_ns[(record->next + HALOD_FAULT_BUDGET_MAX - k) %
                          HALOD_FAULT_BUDGET_MAX];
}

static uint32_t halod_fault_record_count(const halod_fault_record_t *record,
                                         int64_t window_ns, int64_t now_ns) {
  uint32_t n = 0;
  while (n < record->count &&
         now_ns - halod_fault_record_time(record, n + 1) < window_ns) {
    ++n;
  }
  return n;
}

void halod_fault_budget_initialize(halod_fault_budget_t *budget) {
  halo_u64_map_initialize(&budget->records);
}

void halod_fault_budget_deinitialize(halod_fault_budget_t *budget) {
  for (size_t i = 0; i < budget->records.capacity; ++i) {
    if (budget->records.entries[i].key) free(budget->records.entries[i].value);
  }
  halo_u64_map_deinitialize(&budget->records);
}

// |process|'s record, or NULL (none, or another process's with that pid).
static halod_fault_record_t *halod_fault_budget_find(
    halod_fault_budget_t *budget, const halod_client_process_t *process) {
  halod_fault_record_t *record =
      halo_u64_map_get(&budget->records, halod_fault_budget_key(process->pid));
  if (!record || record->process.start != process->start) return NULL;
  return record;
}

// Drops the records whose newest fault left the window; then, while
// |room_for| more would not fit, the one whose newest fault is oldest.
static void halod_fault_budget_expire(halod_fault_budget_t *budget,
                                      int64_t window_ns, int64_t now_ns,
                                      size_t room_for) {
  for (;;) {
    uint64_t expired[64];
    size_t n = 0;
    uint64_t oldest_key = 0;
    int64_t oldest_ns = 0;
    for (size_t i = 0; i < budget->records.capacity && n < 64; ++i) {
      uint64_t key = budget->records.entries[i].key;
      if (!key) continue;
      const halod_fault_record_t *record = budget->records.entries[i].value;
      int64_t newest = halod_fault_record_time(record, 1);
      if (now_ns - newest >= window_ns) expired[n++] = key;
      if (!oldest_key || newest < oldest_ns) {
        oldest_key = key;
        oldest_ns = newest;
      }
    }
    if (n == 0 && oldest_key &&
        budget->records.count + room_for > HALOD_FAULT_BUDGET_MAX_PROCESSES) {
      expired[n++] = oldest_key;
    }
    if (n == 0) return;
    for (size_t k = 0; k < n; ++k) {
      free(halo_u64_map_remove(&budget->records, expired[k]));
    }
  }
}

uint32_t halod_fault_budget_charge(halod_fault_budget_t *budget,
                                   const halod_config_t *config,
                                   const halod_client_process_t *process,
                                   int64_t now_ns) {
  int64_t window_ns = halod_fault_budget_window_ns(config);
  halod_fault_record_t *record = halod_fault_budget_find(budget, process);
  halod_fault_budget_expire(budget, window_ns, now_ns, record ? 0 : 1);
  record = halod_fault_budget_find(budget, process);
  if (!record) {
    // New, or the pid's earlier process (its record is replaced).
    free(halo_u64_map_remove(&budget->records,
                             halod_fault_budget_key(process->pid)));
    record = calloc(1, sizeof(*record));
    halo_status_t status =
        record ? halo_u64_map_put(&budget->records,
                                  halod_fault_budget_key(process->pid), record)
               : halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    if (status) {
      HALO_LOG_ERROR("fault budget: pid %u not charged: %s", process->pid,
                     halo_status_message(status));
      halo_status_free(status);
      free(record);
      return 0;
    }
    record->process = *process;
  }
  record->times_ns[record->next] = now_ns;
  record->next = (record->next + 1) % HALOD_FAULT_BUDGET_MAX;
  if (record->count < HALOD_FAULT_BUDGET_MAX) ++record->count;
  return halod_fault_record_count(record, window_ns, now_ns);
}

uint32_t halod_fault_budget_count(halod_fault_budget_t *budget,
                                  const halod_config_t *config,
                                  const halod_client_process_t *process,
                                  int64_t now_ns) {
  const halod_fault_record_t *record = halod_fault_budget_find(budget, process);
  if (!record) return 0;
  return halod_fault_record_count(record, halod_fault_budget_window_ns(config),
                                  now_ns);
}

halo_status_t halod_fault_budget_check(halod_fault_budget_t *budget,
                                       const halod_config_t *config,
                                       const halod_client_process_t *process,
                                       int64_t now_ns) {
  uint32_t limit = config->fault_budget;
  if (limit == 0) return NULL;
  const halod_fault_record_t *record = halod_fault_budget_find(budget, process);
  if (!record) return NULL;
  int64_t window_ns = halod_fault_budget_window_ns(config);
  uint32_t faults = halod_fault_record_count(record, window_ns, now_ns);
  if (faults < limit) return NULL;
  // Refused until the |limit|th newest fault leaves the window: then fewer
  // than |limit| remain in it.
  int64_t left_ns = halod_fault_record_time(record, limit) + window_ns - now_ns;
  int64_t left_s = (left_ns + 999999999ll) / 1000000000ll;
  time_t until = time(NULL) + (time_t)left_s;
  struct tm utc;
  char when[32] = "?";
  if (gmtime_r(&until, &utc)) {
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &utc);
  }
  return halo_status_make(
      HALO_STATUS_RESOURCE_EXHAUSTED,
      "client pid %u (uid %u) caused %u device faults in the last %u s "
      "(fault-budget=%u): refused until %s (in %lld s); an operator can "
      "clear it with haloctl forgive-client %u",
      process->pid, record->process.uid, faults, config->fault_budget_window_s,
      limit, when, (long long)left_s, process->pid);
}

uint32_t halod_fault_budget_forgive(halod_fault_budget_t *budget,
                                    const halod_config_t *config, uint32_t pid,
                                    int64_t now_ns) {
  halod_fault_record_t *record =
      halo_u64_map_remove(&budget->records, halod_fault_budget_key(pid));
  if (!record) return 0;
  uint32_t faults = halod_fault_record_count(
      record, halod_fault_budget_window_ns(config), now_ns);
  free(record);
  return faults;
}
