// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The layout of a CUDA command buffer and of its graph instances
// (cuda_command_buffer.c), for the driver's files that work on them beside
// it: cuda_graph_memory.c (the device-wide bound on the instances' device
// memory, which trims other recordings' idle instances). The queues use
// cuda_command_buffer.h only.
//
// Thread-safety: as each field says (the pool's fields under the command
// buffer's mutex, the holders' under the device's graph_mutex).
#ifndef HALO_HAL_CUDA_CUDA_COMMAND_BUFFER_INTERNAL_H_
#define HALO_HAL_CUDA_CUDA_COMMAND_BUFFER_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/list.h"
#include "hal/cuda/cuda_command_buffer.h"
#include "hal/cuda/cuda_device.h"

// A free instance in the pool, and a copy of its key (the instance's own:
// a take compares the keys in one array, not one instance after another).
typedef struct halo_hal_cuda_free_instance_t {
  uint64_t key;
  halo_hal_cuda_graph_instance_t *instance;
} halo_hal_cuda_free_instance_t;

struct halo_hal_cuda_graph_instance_t {
  halo_hal_cuda_graph_instance_t *all_next;
  CUgraph graph;
  CUgraphExec exec;
  // Per command: its node (dispatch_indirect: the dispatch's node), the
  // grid-setting node and the device handle of dispatch_indirects.
  CUgraphNode *nodes;
  CUgraphNode *setter_nodes;
  CUgraphDeviceNode *device_nodes;
  // binding_capacity addresses the nodes and the device table hold.
  uint64_t *bound;
  uint64_t table;        // device binding table (BINDING_TABLE recordings)
  uint64_t table_bytes;  // its size (binding_capacity addresses)
  uint64_t *staging;     // its pinned host copy
  bool table_valid;      // the device table holds |bound|
  bool needs_upload;     // cuGraphUpload before the next launch
  // The store node's ticket (pinned; NULL: the graph has no store node).
  // Its words are atomics: the device reads them (the host writes them only
  // while no launch of the instance is pending).
  _Atomic uint64_t *ticket;
  // The store node, and whether it is enabled in |exec| (it is after
  // instantiation): disabled, it costs the launch nothing.
  CUgraphNode store_node;
  bool store_enabled;
  // The key of what |bound| (and a valid table) hold, set when an issue
  // re-pointed it (halo_hal_cuda_binding_key; 0: none to be found by, or
  // forgotten): the pool files the instance under it when it comes back.
  uint64_t key;
};

typedef struct halo_hal_cuda_command_buffer_t {
  halo_hal_command_buffer_t base;
  halo_hal_cuda_device_t *device;
  // The last execution's duration (halo_hal_cuda_command_buffer_expected_ns).
  _Atomic int64_t expected_ns;
  bool use_graph;
  bool uses_binding_table;
  bool has_indirect;
  bool has_update;
  bool has_patches;  // some command references a binding slot
  // Per command: dispatch function, first value byte, value bytes.
  CUfunction *functions;
  uint32_t *command_values;
  uint32_t *command_value_sizes;
  // Per argument (parallel to recording.args): its value's offset.
  uint32_t *arg_values;
  uint8_t *values;  // template: constants and direct addresses filled in
  uint32_t values_size;
  uint32_t max_arg_count;
  uint32_t max_command_values;
  // Commands per binding slot (CSR): slot s is used by
  // slot_commands[slot_first[s] .. slot_first[s + 1]).
  uint32_t *slot_first;
  uint32_t *slot_commands;

  // Submission thread only.
  bool realized;
  uint64_t data_device;  // the recording's inline bytes (graph updates)
  uint32_t stamp;
  uint32_t *command_stamps;
  void **scratch_pointers;
  uint8_t *scratch_values;
  CUgraphNode *stage_previous;
  CUgraphNode *stage_current;

  // The instance pool (any thread). The free instances, oldest first, each
  // with the key of what it is bound to (halo_hal_cuda_binding_key: 0 for
  // none worth finding again): a take compares keys, not every free
  // instance's bindings, while the completion path's gives wait for the
  // mutex (64 tenants of one recording: 64 free instances).
  pthread_mutex_t mutex;
  halo_hal_cuda_free_instance_t *free_instances;
  uint32_t free_count;
  uint32_t instance_limit;  // the device's graph_instances when prepared
  halo_hal_cuda_graph_instance_t *all_instances;
  uint32_t instance_count;  // created or being created
  // Submission thread (the reaper frees them): the instances' pinned
  // staging of the binding table, HALO_HAL_CUDA_STAGING_PER_CHUNK tables
  // per pinned allocation (each pinned allocation costs device memory), and
  // the slots no instance holds (a new chunk's, a destroyed instance's),
  // room for every slot of the chunks the pool's bound may need.
  uint8_t **staging_chunks;
  uint32_t staging_chunk_count;
  uint64_t **staging_free;
  uint32_t staging_free_count;
  // halo's estimate of one instance's device memory
  // (halo_hal_cuda_instance_bytes), and the command buffer's place on the
  // device's |graph_holders| while it has instances (the device's
  // graph_mutex).
  uint64_t instance_bytes;
  bool holding;
  halo_list_link_t holder_link;
  halo_hal_cuda_tasks_t parked;
  // Parked executions woken (posted again) and not yet run: a free
  // instance, or the right to create one, is kept for each.
  uint32_t promised;
  halo_hal_cuda_task_t reap_task;  // destroy on the reaper
} halo_hal_cuda_command_buffer_t;

// The reaper (a destroyed recording's), or the submission thread (a failed
// creation, trimming: cuda_graph_memory.c): destroys |instance|, which no
// pool holds any more (its graph and exec, device binding table and
// ticket; the driver's teardown may wait for the device). The instance
// holds all it needs of its recording: trimming destroys it with no lock
// held, while the reaper may free its command buffer.
void halo_hal_cuda_instance_destroy(halo_hal_cuda_device_t *device,
                                    halo_hal_cuda_graph_instance_t *instance);

// Submission thread: a staging slot back to |command_buffer|'s free ones.
void halo_hal_cuda_staging_give(halo_hal_cuda_command_buffer_t *command_buffer,
                                uint64_t *staging);

#endif  // HALO_HAL_CUDA_CUDA_COMMAND_BUFFER_INTERNAL_H_
