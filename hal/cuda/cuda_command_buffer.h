// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// CUDA command buffers (cuda_command_buffer.c), the part the queues use.
//
// A prepared recording is shared by every session that recorded the same
// thing (the daemon's memo cache) and may be executed by several queues at
// once. Graph recordings (REUSABLE, and ONE_SHOT ones with a
// dispatch_indirect) own a pool of graph instances, each with its own
// CUgraph/CUgraphExec and device binding-table slot, because launches of
// one CUgraphExec never overlap, even across streams. ONE_SHOT recordings
// otherwise replay on the stream (cuLaunchKernel, cuMemset*Async,
// cuMemcpy*Async in order).
//
// Thread-safety: issue runs on the device's submission thread only; retire
// on any thread (a cuLaunchHostFunc callback included: no driver call).
#ifndef HALO_HAL_CUDA_CUDA_COMMAND_BUFFER_H_
#define HALO_HAL_CUDA_CUDA_COMMAND_BUFFER_H_

#include <stdbool.h>
#include <stdint.h>

#include "hal/cuda/cuda_device.h"

// At most this many graph instances per recording by default
// (device->graph_instances); an execution that finds all of them busy waits
// (parked, not blocking the submission thread) for the first one released.
// A recording shared by many clients (the memo cache) needs one per
// execution in flight: 64 clients in one closed loop each hold one.
#define HALO_HAL_CUDA_GRAPH_INSTANCES 64
// Recordings of at most this many binding slots look for a free instance
// already bound to an execution's addresses.
#define HALO_HAL_CUDA_AFFINITY_SLOTS 64

// A graph instance's ticket holds up to this many completion stores (the
// most the built-in store kernel makes); an execution with more signals
// stores them from the stream after the graph.
#define HALO_HAL_CUDA_GRAPH_STORES_MAX 7

typedef struct halo_hal_cuda_graph_instance_t halo_hal_cuda_graph_instance_t;

// One completion store: |value| into the 64-bit word at device address
// |address| (a semaphore's slot).
typedef struct halo_hal_cuda_store_t {
  uint64_t address;
  uint64_t value;
} halo_hal_cuda_store_t;

// What one issued execution holds until its work completed.
typedef struct halo_hal_cuda_issue_t {
  halo_hal_command_buffer_t *command_buffer;
  halo_hal_cuda_graph_instance_t *instance;  // NULL: replayed on the stream
  // Work was enqueued on the stream (even when issue failed later): the
  // caller must not retire before the stream has passed it.
  bool enqueued;
  // Statistics of this issue (benchmarks, logs).
  uint32_t nodes_updated;  // cuGraphExec*SetParams calls
  bool table_copied;       // binding table copied into the instance's slot
  bool instance_created;
  // The graph stores the stores it was given itself (its last node), after
  // all of its work: the caller issues none of them.
  bool stores_in_graph;
} halo_hal_cuda_issue_t;

bool halo_hal_cuda_command_buffer_isa(
    const halo_hal_command_buffer_t *command_buffer);

// Submission thread. Enqueues |execution|'s commands on |stream|. A graph
// recording takes a free instance (creating one, up to the bound, when none
// is free), re-points the nodes whose resolved arguments changed since that
// instance's last launch, copies the binding table into the instance's slot
// when the recording has BINDING_TABLE arguments and the table changed, and
// launches. When every instance is busy and the bound is reached, |waiter|
// is parked and *out_parked set (OK is returned, nothing is enqueued): the
// pool posts |waiter| to the submission thread again when an instance is
// released. |stores| are the execution's completion stores: where the
// instance ends in the store node (device->graph_stores) the node is
// enabled and they go into its ticket (out_issue->stores_in_graph set where
// |store_count| > 0); NULL disables the node. More than
// HALO_HAL_CUDA_GRAPH_STORES_MAX leave the node enabled with an empty
// ticket. Where they do not go there the caller issues them.
halo_status_t halo_hal_cuda_command_buffer_issue(
    halo_hal_command_buffer_t *command_buffer,
    const halo_hal_execution_t *execution, CUstream stream,
    const halo_hal_cuda_store_t *stores, uint32_t store_count,
    halo_hal_cuda_task_t *waiter, halo_hal_cuda_issue_t *out_issue,
    bool *out_parked);

// Submission thread (or the poster running its task): whether issuing
// |command_buffer| now needs no set-up (a module load, a graph instance's
// instantiation, pinned staging): it was issued before and, as a graph, has
// a free instance. Set-up stays off a loop thread that runs the task.
bool halo_hal_cuda_command_buffer_issues_at_once(
    halo_hal_command_buffer_t *command_buffer);

// Any thread, no driver call: |waiter|, an execution woken from the pool's
// parked ones, ends without issuing (it failed first): what the pool kept
// for it goes to the next parked execution. Nothing for one not woken.
void halo_hal_cuda_command_buffer_forgo(
    halo_hal_command_buffer_t *command_buffer, halo_hal_cuda_task_t *waiter);

// With the device's context current and nothing running: frees the pinned
// slabs of the instances' tickets (every instance destroyed before).
void halo_hal_cuda_tickets_free(halo_hal_cuda_device_t *device);
// Any thread, no driver call: the work of |issue| completed (or will never
// run); its instance goes back to the pool.
void halo_hal_cuda_command_buffer_retire(halo_hal_cuda_issue_t *issue);

// Any thread: how long the command buffer's last execution took from its
// hand-over to the completion path until the completion thread saw it done
// (0: none seen yet), and recording it. The completion thread spins after
// new work only for executions expected to end within its spin window.
int64_t halo_hal_cuda_command_buffer_expected_ns(
    const halo_hal_command_buffer_t *command_buffer);
void halo_hal_cuda_command_buffer_record_duration(
    halo_hal_command_buffer_t *command_buffer, int64_t duration_ns);

#endif  // HALO_HAL_CUDA_CUDA_COMMAND_BUFFER_H_
