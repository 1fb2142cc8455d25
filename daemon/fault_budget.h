// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Fault budget: device faults charged to client processes, and the refusal
// of a process that keeps faulting (fault-budget, fault-budget-window-s).
//
// A lost device worker (daemon/workers.h) loses every session of its trust
// domain, and the clients reconnect as new sessions: a fault is therefore
// counted per client process, told apart from a later process with the same
// pid by its start time (as haloctl kill-client does), not per session.
//
// Who is charged when a worker is lost (daemon/workers.c decides; the rule
// is here so that it is written down once):
//   - the watchdog killed it (submission-deadline-ms): the process of each
//     execution past the deadline, and no other;
//   - otherwise (a crash, a sticky device error, a kill from outside): every
//     process with an execution in flight on that worker, once per loss
//     however many it had. Neither a crashed worker nor a sticky CUDA error
//     names the execution that faulted (the worker's LOST message carries
//     only the driver's error text), so no single culprit can be picked;
//   - nothing in flight (the worker died idle, or while loading an
//     executable): nobody.
// Clients of other trust domains never share the worker, so they are never
// charged. Executions whose session already ended still charge their
// process (a client cannot escape by disconnecting before the fault lands).
//
// A process with fault-budget faults or more within the last
// fault-budget-window-s seconds is refused: its new sessions get
// RESOURCE_EXHAUSTED on every request (Hello first) until enough of its
// faults are older than the window, or an operator forgives it (haloctl
// forgive-client). fault-budget 0 charges but never refuses.
//
// Bounded: a process's entry goes once its newest fault left the window,
// and at most HALOD_FAULT_BUDGET_MAX_PROCESSES are kept (the one whose
// newest fault is oldest is dropped first).
//
// Loop thread only.
#ifndef HALOD_FAULT_BUDGET_H_
#define HALOD_FAULT_BUDGET_H_

#include <stddef.h>
#include <stdint.h>

#include "common/u64_map.h"
#include "daemon/config.h"
#include "halo/status.h"

// The largest fault-budget (each process keeps that many fault times).
#define HALOD_FAULT_BUDGET_MAX 64
#define HALOD_FAULT_BUDGET_MAX_PROCESSES 4096

// One client process: a pid names one process together with its start time
// (clock ticks since boot, /proc/PID/stat; 0 if it could not be read).
typedef struct halod_client_process_t {
  uint32_t pid;
  uint32_t uid;
  uint64_t start;
} halod_client_process_t;

typedef struct halod_fault_budget_t {
  halo_u64_map_t records;  // pid + 1 -> the process's recent faults (owned)
} halod_fault_budget_t;

void halod_fault_budget_initialize(halod_fault_budget_t *budget);
// Frees what it counts.
void halod_fault_budget_deinitialize(halod_fault_budget_t *budget);

// Charges |process| one fault at |now_ns| (monotonic); returns its faults
// within the window, this one included.
uint32_t halod_fault_budget_charge(halod_fault_budget_t *budget,
                                   const halod_config_t *config,
                                   const halod_client_process_t *process,
                                   int64_t now_ns);

// |process|'s faults within the window at |now_ns|.
uint32_t halod_fault_budget_count(halod_fault_budget_t *budget,
                                  const halod_config_t *config,
                                  const halod_client_process_t *process,
                                  int64_t now_ns);

// NULL, or RESOURCE_EXHAUSTED saying that |process| is over its budget,
// since when it is refused and until when, and how an operator clears it.
halo_status_t halod_fault_budget_check(halod_fault_budget_t *budget,
                                       const halod_config_t *config,
                                       const halod_client_process_t *process,
                                       int64_t now_ns);

// Forgets the faults of the process with |pid| (haloctl forgive-client);
// returns how many of them were within the window (0: none known).
uint32_t halod_fault_budget_forgive(halod_fault_budget_t *budget,
                                    const halod_config_t *config, uint32_t pid,
                                    int64_t now_ns);

#endif  // HALOD_FAULT_BUDGET_H_
