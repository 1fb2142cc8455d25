// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// CUDA command buffers: a validated recording prepared once (loop thread,
// no driver call) and executed on the device's submission thread.
//
// Graph recordings (REUSABLE, and ONE_SHOT ones with a dispatch_indirect)
// become CUDA graphs with real dependency edges: the commands between two
// barriers form a stage, every node of a stage depends on the previous
// stage (on its one node, or on an empty join node when it has several),
// so independent commands run concurrently ("Commands between barriers may
// run concurrently", halo.h). fill becomes a memset node, copy a memcpy
// node, update a DtoD memcpy node from the recording's inline bytes
// (uploaded once to device memory), dispatch a kernel node, and
// dispatch_indirect a device-updatable kernel node preceded by a one-thread
// node of the built-in PTX kernel below, which reads the three counts and
// sets the node's grid (cudaGraphKernelNodeSetGridDim), disabling the node
// for a zero or out-of-range count.
//
// The recording is memoized, not one exec: launches of one CUgraphExec
// never overlap, even across streams, so each recording owns a pool of up
// to device->graph_instances instances (own CUgraph/CUgraphExec,
// own device binding-table slot and pinned staging), shared by every
// session that recorded the same thing. An execution takes a free instance
// (creates one when none is free, parks when the bound is reached),
// updates it and launches it on its queue's stream; the instance is busy
// until the execution's completion.
//
// Binding strategy, per argument, from how the client recorded it:
// - BUFFER arguments (and fill/copy/update targets and sources) with an
//   indirect reference are re-pointed with cuGraphExec*SetParams, only on
//   the nodes whose slots' resolved addresses changed since that
//   instance's last launch (no GPU cost; CPU per changed node);
// - BINDING_TABLE arguments point at the instance's device table, a fixed
//   address per instance, so they are never re-pointed: the table's
//   binding_capacity addresses are copied (cuMemcpyHtoDAsync from the
//   instance's pinned staging, on the same stream, before the launch) when
//   they changed since the instance's last launch (O(bindings) CPU, one
//   indirection per kernel on the GPU).
//
// Completion stores in the graph (device->graph_stores: on unless
// HALO_CUDA_GRAPH_STORES=0): each instance's graph ends in one node of the
// built-in store kernel below, after the recording's last stage (so after
// all of its work). While the node is on (from a backlog of tasks waiting
// for the submission thread until that thread sleeps: cuda_queue.c), before
// each launch the submission thread writes the execution's stores
// (semaphore slot address, value) into the instance's ticket, a few words
// of pinned host memory the kernel reads (none where they do not go there:
// they then follow on the stream); the kernel fences system-wide and
// stores each value, as cuStreamWriteValue64 with default flags would. Such
// an execution costs one cuGraphLaunch instead of a launch and a
// cuStreamWriteValue64 per signal (about 2 us of the submission thread
// each). Otherwise the node is disabled (cuGraphNodeSetEnabled when that
// changes; it would add about 3.5 us to the execution's latency on the
// GPU) and the stores follow on the stream. The ticket is the instance's
// alone: an instance is busy until its execution completed, and launches
// of one CUgraphExec never overlap.
//
// ONE_SHOT recordings replay on the stream directly, in order, which also
// honours every barrier; a BINDING_TABLE then lives in stream-ordered
// memory allocated and freed on the stream around the commands; their
// stores follow on the stream (the queue's).
//
// This file holds a recording's preparation, its realization (the built-in
// kernels), the pool of its graph instances (building, taking, giving back,
// re-pointing them), stream replay, issue and retire. The instances' device
// memory counts against a bound for the whole device (cuda-graph-bytes):
// reserving an instance's bytes, trimming other recordings' idle instances
// and waiting for room are cuda_graph_memory.c's. The command buffer's
// layout, which that file reads, is in cuda_command_buffer_internal.h.
#include "hal/cuda/cuda_command_buffer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/mutex.h"
#include "common/status.h"
#include "hal/cuda/cuda_command_buffer_internal.h"
#include "hal/cuda/cuda_graph_memory.h"
#include "halo/halo.h"

// Each argument value gets its own slot, aligned for any type a kernel may
// read it as (the driver copies the parameter's size from it).
#define HALO_HAL_CUDA_VALUE_ALIGNMENT 16u
// The kernel parameters a dispatch may take here, as laid out (each
// argument 16-byte aligned: at least the kernel's own). Past about 16 KiB
// the driver sets aside gigabytes per context for a graph's parameters
// (4 GiB with 16 KiB, 8 GiB with 32,000 bytes, however few nodes and
// instances), which no bound per instance could count.
#define HALO_HAL_CUDA_MAX_PARAMETER_BYTES 8192u
_Static_assert(HALO_HAL_CUDA_MAX_PARAMETER_BYTES ==
                   HALO_MAX_CUDA_PARAMETER_BYTES,
               "the limit halo.h documents");

// Built with `nvcc -arch=compute_75 -ptx` from:
//   extern "C" __global__ void halo_indirect_set_grid(
//       cudaGraphDeviceNode_t node, const unsigned *counts, unsigned max_x,
//       unsigned max_yz) {
//     unsigned x = counts[0], y = counts[1], z = counts[2];
//     bool ok = x != 0 && y != 0 && z != 0 && x <= max_x && y <= max_yz &&
//               z <= max_yz;
//     if (ok) cudaGraphKernelNodeSetGridDim(node, dim3(x, y, z));
//     cudaGraphKernelNodeSetEnabled(node, ok);
//   }
// The device-side graph update calls are driver builtins: plain PTX loaded
// with cuModuleLoadData resolves them (no -rdc, no cudadevrt).
static const char halo_hal_cuda_builtin_ptx[] =
    ".version 9.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".extern .func (.param .b32 func_retval0) cudaGraphKernelNodeSetGridDim\n"
    "(\n"
    "  .param .b64 cudaGraphKernelNodeSetGridDim_param_0,\n"
    "  .param .align 4 .b8 cudaGraphKernelNodeSetGridDim_param_1[12]\n"
    ");\n"
    ".extern .func (.param .b32 func_retval0) cudaGraphKernelNodeSetEnabled\n"
    "(\n"
    "  .param .b64 cudaGraphKernelNodeSetEnabled_param_0,\n"
    "  .param .b32 cudaGraphKernelNodeSetEnabled_param_1\n"
    ");\n"
    ".visible .entry halo_indirect_set_grid(\n"
    "  .param .u64 halo_indirect_set_grid_param_0,\n"
    "  .param .u64 halo_indirect_set_grid_param_1,\n"
    "  .param .u32 halo_indirect_set_grid_param_2,\n"
    "  .param .u32 halo_indirect_set_grid_param_3\n"
    ")\n"
    "{\n"
    "  .reg .pred %p<13>;\n"
    "  .reg .b32 %r<9>;\n"
    "  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [halo_indirect_set_grid_param_0];\n"
    "  ld.param.u64 %rd2, [halo_indirect_set_grid_param_1];\n"
    "  ld.param.u32 %r4, [halo_indirect_set_grid_param_2];\n"
    "  ld.param.u32 %r5, [halo_indirect_set_grid_param_3];\n"
    "  cvta.to.global.u64 %rd3, %rd2;\n"
    "  ld.global.u32 %r1, [%rd3];\n"
    "  setp.ne.s32 %p2, %r1, 0;\n"
    "  ld.global.u32 %r2, [%rd3+4];\n"
    "  setp.ne.s32 %p3, %r2, 0;\n"
    "  and.pred %p4, %p2, %p3;\n"
    "  ld.global.u32 %r3, [%rd3+8];\n"
    "  setp.ne.s32 %p5, %r3, 0;\n"
    "  and.pred %p6, %p4, %p5;\n"
    "  setp.le.u32 %p7, %r1, %r4;\n"
    "  and.pred %p8, %p7, %p6;\n"
    "  setp.le.u32 %p9, %r2, %r5;\n"
    "  and.pred %p10, %p9, %p8;\n"
    "  setp.le.u32 %p11, %r3, %r5;\n"
    "  and.pred %p1, %p11, %p10;\n"
    "  not.pred %p12, %p1;\n"
    "  @%p12 bra $L__BB0_2;\n"
    "  {\n"
    "  .param .b64 param0;\n"
    "  st.param.b64 [param0+0], %rd1;\n"
    "  .param .align 4 .b8 param1[12];\n"
    "  st.param.b32 [param1+0], %r1;\n"
    "  st.param.b32 [param1+4], %r2;\n"
    "  st.param.b32 [param1+8], %r3;\n"
    "  .param .b32 retval0;\n"
    "  call.uni (retval0), cudaGraphKernelNodeSetGridDim, (param0, param1);\n"
    "  ld.param.b32 %r6, [retval0+0];\n"
    "  }\n"
    "$L__BB0_2:\n"
    "  selp.u32 %r7, 1, 0, %p1;\n"
    "  {\n"
    "  .param .b64 param0;\n"
    "  st.param.b64 [param0+0], %rd1;\n"
    "  .param .b32 param1;\n"
    "  st.param.b32 [param1+0], %r7;\n"
    "  .param .b32 retval0;\n"
    "  call.uni (retval0), cudaGraphKernelNodeSetEnabled, (param0, param1);\n"
    "  ld.param.b32 %r8, [retval0+0];\n"
    "  }\n"
    "  ret;\n"
    "}\n";

// Built with `nvcc -arch=compute_75 -ptx` from (the version and target
// then lowered: it uses nothing newer):
//   extern "C" __global__ void halo_store_signals(
//       const volatile unsigned long long *ticket) {
//     unsigned long long count = ticket[0];
//     for (unsigned long long i = 0; i < count && i < 7; ++i) {
//       unsigned long long address = ticket[1 + 2 * i];
//       unsigned long long value = ticket[2 + 2 * i];
//       __threadfence_system();
//       *(volatile unsigned long long *)address = value;
//     }
//   }
// One thread: every read of the ticket comes before the fence ahead of the
// last store, so once every store landed the ticket is no longer read.
static const char halo_hal_cuda_store_ptx[] =
    ".version 7.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry halo_store_signals(\n"
    "  .param .u64 halo_store_signals_param_0\n"
    ")\n"
    "{\n"
    "  .reg .pred %p<5>;\n"
    "  .reg .b64 %rd<13>;\n"
    "  ld.param.u64 %rd7, [halo_store_signals_param_0];\n"
    "  cvta.to.global.u64 %rd11, %rd7;\n"
    "  ld.volatile.global.u64 %rd2, [%rd11];\n"
    "  setp.eq.s64 %p1, %rd2, 0;\n"
    "  @%p1 bra $L__BB0_3;\n"
    "  mov.u64 %rd12, 1;\n"
    "$L__BB0_2:\n"
    "  ld.volatile.global.u64 %rd9, [%rd11+8];\n"
    "  add.s64 %rd5, %rd11, 16;\n"
    "  ld.volatile.global.u64 %rd10, [%rd11+16];\n"
    "  membar.sys;\n"
    "  st.volatile.u64 [%rd9], %rd10;\n"
    "  setp.lt.u64 %p2, %rd12, 7;\n"
    "  setp.lt.u64 %p3, %rd12, %rd2;\n"
    "  and.pred %p4, %p3, %p2;\n"
    "  add.s64 %rd12, %rd12, 1;\n"
    "  mov.u64 %rd11, %rd5;\n"
    "  @%p4 bra $L__BB0_2;\n"
    "$L__BB0_3:\n"
    "  ret;\n"
    "}\n";

// Binding-table staging slots per pinned allocation (a recording's 64
// instances: 8 allocations, as its 8 instances had before).
#define HALO_HAL_CUDA_STAGING_PER_CHUNK 8

// The ticket: a count, then (address, value) pairs; its last word holds
// its device address. A free ticket links to the next by its first word.
#define HALO_HAL_CUDA_TICKET_WORDS 16
#define HALO_HAL_CUDA_TICKET_DEVICE_WORD (HALO_HAL_CUDA_TICKET_WORDS - 1)
_Static_assert(1 + 2 * HALO_HAL_CUDA_GRAPH_STORES_MAX <=
                   HALO_HAL_CUDA_TICKET_DEVICE_WORD,
               "a ticket holds its stores and its device address");
// Tickets per pinned slab (64 KiB): each pinned allocation is mapped into
// the device's address space, which costs device memory per allocation.
#define HALO_HAL_CUDA_TICKETS_PER_SLAB 512

typedef struct halo_hal_cuda_ticket_slab_t {
  struct halo_hal_cuda_ticket_slab_t *next;
  void *host;
} halo_hal_cuda_ticket_slab_t;

// Submission thread: a ticket for a new instance (count 0), from the free
// list or a new slab.
static halo_status_t halo_hal_cuda_ticket_take(halo_hal_cuda_device_t *device,
                                               uint64_t **out_ticket) {
  *out_ticket = NULL;
  pthread_mutex_lock(&device->ticket_mutex);
  uint64_t *ticket = device->free_tickets;
  if (ticket) device->free_tickets = (uint64_t *)(uintptr_t)ticket[0];
  pthread_mutex_unlock(&device->ticket_mutex);
  if (!ticket) {
    const halo_hal_cuda_symbols_t *cu = device->cu;
    halo_hal_cuda_ticket_slab_t *slab = calloc(1, sizeof(*slab));
    if (!slab) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "oom for a slab of completion tickets");
    }
    size_t bytes = HALO_HAL_CUDA_TICKETS_PER_SLAB * HALO_HAL_CUDA_TICKET_WORDS *
                   sizeof(uint64_t);
    CUresult result = cu->cuMemAllocHost(&slab->host, bytes);
    CUdeviceptr device_address = 0;
    const char *call = "cuMemAllocHost";
    if (result == CUDA_SUCCESS) {
      call = "cuMemHostGetDevicePointer";
      result = cu->cuMemHostGetDevicePointer(&device_address, slab->host, 0);
      if (result != CUDA_SUCCESS) cu->cuMemFreeHost(slab->host);
    }
    if (result != CUDA_SUCCESS) {
      free(slab);
      return halo_status_annotate(
          halo_hal_cuda_result_to_status(cu, result, call),
          "a slab of completion tickets (%zu bytes)", bytes);
    }
    uint64_t *words = slab->host;
    for (uint32_t i = 0; i < HALO_HAL_CUDA_TICKETS_PER_SLAB; ++i) {
      uint64_t *each = words + (size_t)i * HALO_HAL_CUDA_TICKET_WORDS;
      each[HALO_HAL_CUDA_TICKET_DEVICE_WORD] =
          device_address +
          (uint64_t)i * HALO_HAL_CUDA_TICKET_WORDS * sizeof(uint64_t);
    }
    // The first ticket is this instance's; the others go to the free list.
    ticket = words;
    pthread_mutex_lock(&device->ticket_mutex);
    slab->next = device->ticket_slabs;
    device->ticket_slabs = slab;
    for (uint32_t i = HALO_HAL_CUDA_TICKETS_PER_SLAB - 1; i >= 1; --i) {
      uint64_t *each = words + (size_t)i * HALO_HAL_CUDA_TICKET_WORDS;
      each[0] = (uint64_t)(uintptr_t)device->free_tickets;
      device->free_tickets = each;
    }
    pthread_mutex_unlock(&device->ticket_mutex);
  }
  ticket[0] = 0;
  *out_ticket = ticket;
  return NULL;
}

// Any thread: |ticket| back to the free list (its instance is destroyed).
static void halo_hal_cuda_ticket_give(halo_hal_cuda_device_t *device,
                                      uint64_t *ticket) {
  pthread_mutex_lock(&device->ticket_mutex);
  ticket[0] = (uint64_t)(uintptr_t)device->free_tickets;
  device->free_tickets = ticket;
  pthread_mutex_unlock(&device->ticket_mutex);
}

void halo_hal_cuda_tickets_free(halo_hal_cuda_device_t *device) {
  while (device->ticket_slabs) {
    halo_hal_cuda_ticket_slab_t *slab = device->ticket_slabs;
    device->ticket_slabs = slab->next;
    device->cu->cuMemFreeHost(slab->host);
    free(slab);
  }
  device->free_tickets = NULL;
}

static const halo_hal_command_buffer_vtable_t
    halo_hal_cuda_command_buffer_vtable;

bool halo_hal_cuda_command_buffer_isa(
    const halo_hal_command_buffer_t *command_buffer) {
  return command_buffer &&
         command_buffer->vtable == &halo_hal_cuda_command_buffer_vtable;
}

static uint32_t halo_hal_cuda_value_bytes(const halo_hal_dispatch_arg_t *arg) {
  uint32_t size = arg->kind == HALO_HAL_ARG_CONSTANT ? arg->data_size : 8;
  return (size + HALO_HAL_CUDA_VALUE_ALIGNMENT - 1) &
         ~(HALO_HAL_CUDA_VALUE_ALIGNMENT - 1);
}

// A failed driver call of command |index|: "command 3 (dispatch):
// cuGraphAddKernelNode: CUDA_ERROR_...: ...".
static halo_status_t halo_hal_cuda_command_error(
    const halo_hal_cuda_command_buffer_t *command_buffer, uint32_t index,
    CUresult result, const char *call) {
  const halo_hal_command_t *command =
      &command_buffer->base.recording.commands[index];
  return halo_status_annotate(
      halo_hal_cuda_result_to_status(command_buffer->device->cu, result, call),
      "command %u (%s)", index, halo_hal_command_type_name(command->type));
}

#define HALO_CUDA_COMMAND_RETURN_IF_ERROR(command_buffer, index, call, ...)  \
  do {                                                                       \
    CUresult halo__result = (command_buffer)->device->cu->call(__VA_ARGS__); \
    if (halo__result != CUDA_SUCCESS) {                                      \
      return halo_hal_cuda_command_error((command_buffer), (index),          \
                                         halo__result, #call);               \
    }                                                                        \
  } while (0)

//===----------------------------------------------------------------------===//
// Prepare (loop thread: checks and tables, no driver call)
//===----------------------------------------------------------------------===//

// The structure is checked by halo_hal_recording_check_command; here only
// what the CUDA driver derives: functions, which features the graph needs.
static halo_status_t halo_hal_cuda_check_command(
    halo_hal_cuda_command_buffer_t *command_buffer, uint32_t index) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  HALO_RETURN_IF_ERROR(halo_hal_recording_check_command(recording, index));
  const halo_hal_command_t *command = &recording->commands[index];
  if (command->type == HALO_HAL_COMMAND_UPDATE) {
    command_buffer->has_update = true;
  }
  if (command->type != HALO_HAL_COMMAND_DISPATCH &&
      command->type != HALO_HAL_COMMAND_DISPATCH_INDIRECT) {
    return NULL;
  }
  for (uint32_t i = 0; i < command->arg_count; ++i) {
    if (recording->args[command->arg_first + i].kind ==
        HALO_HAL_ARG_BINDING_TABLE) {
      command_buffer->uses_binding_table = true;
    }
  }
  if (command->type == HALO_HAL_COMMAND_DISPATCH_INDIRECT) {
    command_buffer->has_indirect = true;
  }
  halo_status_t status = halo_hal_cuda_executable_function(
      command->executable, command->entry_ordinal,
      &command_buffer->functions[index]);
  if (status) {
    return halo_status_annotate(status, "command %u (%s)", index,
                                halo_hal_command_type_name(command->type));
  }
  if (command->arg_count > command_buffer->max_arg_count) {
    command_buffer->max_arg_count = command->arg_count;
  }
  return NULL;
}

// Calls |visit| for every binding slot command |index| references (a slot
// may repeat).
typedef void (*halo_hal_cuda_slot_visit_fn)(
    halo_hal_cuda_command_buffer_t *command_buffer, uint32_t slot,
    uint32_t index);

static void halo_hal_cuda_visit_slots(
    halo_hal_cuda_command_buffer_t *command_buffer, uint32_t index,
    halo_hal_cuda_slot_visit_fn visit) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  const halo_hal_command_t *command = &recording->commands[index];
  switch (command->type) {
    case HALO_HAL_COMMAND_COPY:
      if (command->source.slot != HALO_HAL_SLOT_DIRECT) {
        visit(command_buffer, command->source.slot, index);
      }
      __attribute__((fallthrough));
    case HALO_HAL_COMMAND_FILL:
    case HALO_HAL_COMMAND_UPDATE:
      if (command->target.slot != HALO_HAL_SLOT_DIRECT) {
        visit(command_buffer, command->target.slot, index);
      }
      break;
    case HALO_HAL_COMMAND_DISPATCH_INDIRECT:
      if (command->workgroup_count.slot != HALO_HAL_SLOT_DIRECT) {
        visit(command_buffer, command->workgroup_count.slot, index);
      }
      __attribute__((fallthrough));
    case HALO_HAL_COMMAND_DISPATCH:
      for (uint32_t i = 0; i < command->arg_count; ++i) {
        const halo_hal_dispatch_arg_t *arg =
            &recording->args[command->arg_first + i];
        if (arg->kind == HALO_HAL_ARG_BUFFER &&
            arg->ref.slot != HALO_HAL_SLOT_DIRECT) {
          visit(command_buffer, arg->ref.slot, index);
        }
      }
      break;
    default:
      break;
  }
}

static void halo_hal_cuda_count_slot(
    halo_hal_cuda_command_buffer_t *command_buffer, uint32_t slot,
    uint32_t index) {
  // Counted once per command: the stamp marks the last command counted.
  if (command_buffer->command_stamps[slot] == index + 1) return;
  command_buffer->command_stamps[slot] = index + 1;
  ++command_buffer->slot_first[slot + 1];
}

static void halo_hal_cuda_place_slot(
    halo_hal_cuda_command_buffer_t *command_buffer, uint32_t slot,
    uint32_t index) {
  if (command_buffer->command_stamps[slot] == index + 1) return;
  command_buffer->command_stamps[slot] = index + 1;
  // slot_first[slot] runs ahead while placing; restored afterwards.
  command_buffer->slot_commands[command_buffer->slot_first[slot]++] = index;
}

// Builds the slot -> commands table (two passes over the references).
static halo_status_t halo_hal_cuda_build_slot_table(
    halo_hal_cuda_command_buffer_t *command_buffer) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  uint32_t capacity = recording->binding_capacity;
  command_buffer->slot_first = calloc(capacity + 2, sizeof(uint32_t));
  uint32_t *stamps = calloc(capacity + 1, sizeof(uint32_t));
  if (!command_buffer->slot_first || !stamps) {
    free(stamps);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "oom for the binding slot table");
  }
  command_buffer->command_stamps = stamps;  // borrowed while building
  for (uint32_t i = 0; i < recording->command_count; ++i) {
    halo_hal_cuda_visit_slots(command_buffer, i, halo_hal_cuda_count_slot);
  }
  for (uint32_t s = 0; s < capacity; ++s) {
    command_buffer->slot_first[s + 1] += command_buffer->slot_first[s];
  }
  uint32_t total = command_buffer->slot_first[capacity];
  command_buffer->has_patches = total > 0;
  command_buffer->slot_commands = calloc(total + 1, sizeof(uint32_t));
  if (!command_buffer->slot_commands) {
    free(stamps);
    command_buffer->command_stamps = NULL;
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "oom for the binding slot table");
  }
  memset(stamps, 0, (capacity + 1) * sizeof(uint32_t));
  for (uint32_t i = 0; i < recording->command_count; ++i) {
    halo_hal_cuda_visit_slots(command_buffer, i, halo_hal_cuda_place_slot);
  }
  // Each slot_first[s] now holds the end of slot s: shift back.
  for (uint32_t s = capacity; s > 0; --s) {
    command_buffer->slot_first[s] = command_buffer->slot_first[s - 1];
  }
  command_buffer->slot_first[0] = 0;
  free(stamps);
  command_buffer->command_stamps = NULL;
  return NULL;
}

// Lays out every dispatch's argument values and fills in what is known at
// record time (constants, direct addresses).
static halo_status_t halo_hal_cuda_build_values(
    halo_hal_cuda_command_buffer_t *command_buffer) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  uint32_t total = 0;
  for (uint32_t i = 0; i < recording->command_count; ++i) {
    const halo_hal_command_t *command = &recording->commands[i];
    if (command->type != HALO_HAL_COMMAND_DISPATCH &&
        command->type != HALO_HAL_COMMAND_DISPATCH_INDIRECT) {
      continue;
    }
    command_buffer->command_values[i] = total;
    for (uint32_t a = 0; a < command->arg_count; ++a) {
      const halo_hal_dispatch_arg_t *arg =
          &recording->args[command->arg_first + a];
      command_buffer->arg_values[command->arg_first + a] = total;
      total += halo_hal_cuda_value_bytes(arg);
    }
    uint32_t size = total - command_buffer->command_values[i];
    if (size > HALO_HAL_CUDA_MAX_PARAMETER_BYTES) {
      return halo_status_make(
          HALO_STATUS_INVALID_ARGUMENT,
          "command %u (%s): its %u arguments take %u bytes of kernel "
          "parameters (each 16-byte aligned); the CUDA driver takes at most "
          "%u here (past about 16 KiB the driver sets aside gigabytes of "
          "device memory per context for them): pass large data in a buffer",
          i, halo_hal_command_type_name(command->type), command->arg_count,
          size, HALO_HAL_CUDA_MAX_PARAMETER_BYTES);
    }
    command_buffer->command_value_sizes[i] = size;
    if (size > command_buffer->max_command_values) {
      command_buffer->max_command_values = size;
    }
  }
  command_buffer->values_size = total;
  command_buffer->values = calloc(total + HALO_HAL_CUDA_VALUE_ALIGNMENT, 1);
  if (!command_buffer->values) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "oom for %u bytes of argument values", total);
  }
  for (uint32_t i = 0; i < recording->arg_count; ++i) {
    const halo_hal_dispatch_arg_t *arg = &recording->args[i];
    uint8_t *value = command_buffer->values + command_buffer->arg_values[i];
    if (arg->kind == HALO_HAL_ARG_CONSTANT) {
      memcpy(value, recording->data + arg->data_offset, arg->data_size);
    } else if (arg->kind == HALO_HAL_ARG_BUFFER &&
               arg->ref.slot == HALO_HAL_SLOT_DIRECT) {
      memcpy(value, &arg->ref.address, sizeof(uint64_t));
    }
  }
  return NULL;
}

static void halo_hal_cuda_command_buffer_free(
    halo_hal_cuda_command_buffer_t *command_buffer) {
  halo_hal_recording_deinitialize(&command_buffer->base.recording);
  free(command_buffer->functions);
  free(command_buffer->command_values);
  free(command_buffer->command_value_sizes);
  free(command_buffer->arg_values);
  free(command_buffer->values);
  free(command_buffer->slot_first);
  free(command_buffer->slot_commands);
  free(command_buffer->command_stamps);
  free(command_buffer->scratch_pointers);
  free(command_buffer->scratch_values);
  free(command_buffer->stage_previous);
  free(command_buffer->stage_current);
  free(command_buffer->staging_chunks);
  free(command_buffer->free_instances);
  free(command_buffer->staging_free);
  pthread_mutex_destroy(&command_buffer->mutex);
  free(command_buffer);
}

halo_status_t halo_hal_cuda_command_buffer_prepare(
    halo_hal_cuda_device_t *device, halo_hal_recording_t *recording,
    halo_hal_command_buffer_t **out_command_buffer) {
  *out_command_buffer = NULL;
  if (recording->command_count && !recording->commands) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "recording of %u commands without commands",
                            recording->command_count);
  }
  if (recording->flags != HALO_HAL_RECORDING_ONE_SHOT &&
      recording->flags != HALO_HAL_RECORDING_REUSABLE) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "recording flags 0x%x: exactly one of ONE_SHOT "
                            "or REUSABLE",
                            recording->flags);
  }
  halo_hal_cuda_command_buffer_t *command_buffer =
      calloc(1, sizeof(*command_buffer));
  if (!command_buffer) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  halo_mutex_initialize(&command_buffer->mutex);
  command_buffer->base.vtable = &halo_hal_cuda_command_buffer_vtable;
  command_buffer->device = device;
  // Checked in place; the recording stays the caller's until this succeeds.
  command_buffer->base.recording = *recording;
  uint32_t count = recording->command_count ? recording->command_count : 1;
  uint32_t args = recording->arg_count ? recording->arg_count : 1;
  command_buffer->functions = calloc(count, sizeof(CUfunction));
  command_buffer->command_values = calloc(count, sizeof(uint32_t));
  command_buffer->command_value_sizes = calloc(count, sizeof(uint32_t));
  command_buffer->arg_values = calloc(args, sizeof(uint32_t));
  halo_status_t status = NULL;
  if (!command_buffer->functions || !command_buffer->command_values ||
      !command_buffer->command_value_sizes || !command_buffer->arg_values) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  for (uint32_t i = 0; !status && i < recording->command_count; ++i) {
    status = halo_hal_cuda_check_command(command_buffer, i);
  }
  if (!status) status = halo_hal_cuda_build_values(command_buffer);
  if (!status) status = halo_hal_cuda_build_slot_table(command_buffer);
  if (!status) {
    command_buffer->use_graph =
        recording->flags == HALO_HAL_RECORDING_REUSABLE ||
        command_buffer->has_indirect;
    command_buffer->command_stamps = calloc(count, sizeof(uint32_t));
    command_buffer->scratch_pointers =
        calloc(command_buffer->max_arg_count + 1, sizeof(void *));
    command_buffer->scratch_values =
        calloc(command_buffer->max_command_values + 16, 1);
    command_buffer->stage_previous = calloc(count, sizeof(CUgraphNode));
    command_buffer->stage_current = calloc(count, sizeof(CUgraphNode));
    // Graph recordings: room for every instance the pool may hold.
    uint32_t instances =
        command_buffer->use_graph ? device->graph_instances : 0;
    command_buffer->instance_limit = instances;
    if (instances == 0) instances = 1;
    command_buffer->free_instances =
        calloc(instances, sizeof(halo_hal_cuda_free_instance_t));
    command_buffer->staging_free = calloc(
        (instances + HALO_HAL_CUDA_STAGING_PER_CHUNK - 1) /
            HALO_HAL_CUDA_STAGING_PER_CHUNK * HALO_HAL_CUDA_STAGING_PER_CHUNK,
        sizeof(uint64_t *));
    command_buffer->instance_bytes =
        halo_hal_cuda_instance_bytes(command_buffer);
    if (!command_buffer->command_stamps || !command_buffer->scratch_pointers ||
        !command_buffer->scratch_values || !command_buffer->stage_previous ||
        !command_buffer->stage_current || !command_buffer->free_instances ||
        !command_buffer->staging_free) {
      status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    }
  }
  if (status) {
    // The recording's arrays go back to the caller untouched.
    memset(&command_buffer->base.recording, 0,
           sizeof(command_buffer->base.recording));
    halo_hal_cuda_command_buffer_free(command_buffer);
    return status;
  }
  memset(recording, 0, sizeof(*recording));
  *out_command_buffer = &command_buffer->base;
  return NULL;
}

//===----------------------------------------------------------------------===//
// Destroy (loop thread; the driver calls run on the reaper)
//===----------------------------------------------------------------------===//

void halo_hal_cuda_instance_destroy(halo_hal_cuda_device_t *device,
                                    halo_hal_cuda_graph_instance_t *instance) {
  const halo_hal_cuda_symbols_t *cu = device->cu;
  if (instance->exec) cu->cuGraphExecDestroy(instance->exec);
  if (instance->graph) cu->cuGraphDestroy(instance->graph);
  if (instance->table) {
    device->base.allocator->vtable->deallocate(
        device->base.allocator, instance->table, instance->table_bytes);
  }
  if (instance->ticket) {
    halo_hal_cuda_ticket_give(device, (uint64_t *)instance->ticket);
  }
  free(instance->nodes);
  free(instance->setter_nodes);
  free(instance->device_nodes);
  free(instance->bound);
  free(instance);
}

// Reaper thread: graph teardown and frees may wait for the device.
static void halo_hal_cuda_command_buffer_reap(halo_hal_cuda_task_t *task) {
  halo_hal_cuda_command_buffer_t *command_buffer =
      (halo_hal_cuda_command_buffer_t *)((char *)task -
                                         offsetof(
                                             halo_hal_cuda_command_buffer_t,
                                             reap_task));
  // Off the device's holders first (nothing trims its instances after),
  // its bytes back at once: a recording that needs its first instance
  // meanwhile gets it (the device briefly past the bound while the driver
  // tears these down) rather than fail for want of room.
  halo_hal_cuda_device_t *device = command_buffer->device;
  pthread_mutex_lock(&device->graph_mutex);
  halo_hal_cuda_graph_instance_t *instance = command_buffer->all_instances;
  uint32_t built = 0;
  for (halo_hal_cuda_graph_instance_t *i = instance; i; i = i->all_next) {
    ++built;
  }
  command_buffer->all_instances = NULL;
  halo_hal_cuda_graph_release_locked(command_buffer, built);
  pthread_mutex_unlock(&device->graph_mutex);
  if (built) halo_hal_cuda_graph_wake(device);
  while (instance) {
    halo_hal_cuda_graph_instance_t *next = instance->all_next;
    halo_hal_cuda_instance_destroy(device, instance);
    instance = next;
  }
  if (command_buffer->data_device) {
    halo_hal_allocator_t *allocator = command_buffer->device->base.allocator;
    allocator->vtable->deallocate(allocator, command_buffer->data_device,
                                  command_buffer->base.recording.data_size);
  }
  for (uint32_t i = 0; i < command_buffer->staging_chunk_count; ++i) {
    command_buffer->device->cu->cuMemFreeHost(
        command_buffer->staging_chunks[i]);
  }
  halo_hal_cuda_command_buffer_free(command_buffer);
}

// Every execution has retired (the daemon holds a reference until then), so
// every instance is free.
static void halo_hal_cuda_command_buffer_destroy(
    halo_hal_command_buffer_t *base_command_buffer) {
  halo_hal_cuda_command_buffer_t *command_buffer =
      (halo_hal_cuda_command_buffer_t *)base_command_buffer;
  // A graph recording goes through the reaper, whatever it holds now: its
  // instances leave the device's bound under the device's graph_mutex,
  // which trimming (the submission thread) may hold, and this thread
  // (halod's loop, the worker's) should not wait for.
  if (!command_buffer->use_graph && !command_buffer->data_device &&
      !command_buffer->staging_chunk_count) {
    halo_hal_cuda_command_buffer_free(command_buffer);
    return;
  }
  command_buffer->reap_task.run = halo_hal_cuda_command_buffer_reap;
  halo_hal_cuda_thread_post(&command_buffer->device->reaper,
                            &command_buffer->reap_task);
}

static const halo_hal_command_buffer_vtable_t
    halo_hal_cuda_command_buffer_vtable = {
        .destroy = halo_hal_cuda_command_buffer_destroy,
};

//===----------------------------------------------------------------------===//
// Realize (submission thread, once per recording)
//===----------------------------------------------------------------------===//

// Loads the built-in module |ptx| (unloaded with the context: the device
// never unloads it while running) and its function |name|. On failure
// *out_call names the call that failed, |log| holds the JIT's error log
// and nothing stays loaded.
static CUresult halo_hal_cuda_builtin_module_load(
    halo_hal_cuda_device_t *device, const char *ptx, const char *name,
    CUmodule *out_module, CUfunction *out_function, const char **out_call,
    char *log, size_t log_size) {
  const halo_hal_cuda_symbols_t *cu = device->cu;
  log[0] = '\0';
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, (void *)(uintptr_t)log_size};
  *out_module = NULL;
  *out_function = NULL;
  *out_call = "cuModuleLoadDataEx";
  CUresult result = cu->cuModuleLoadDataEx(out_module, ptx, 2, options, values);
  if (result != CUDA_SUCCESS) {
    *out_module = NULL;
    return result;
  }
  *out_call = "cuModuleGetFunction";
  result = cu->cuModuleGetFunction(out_function, *out_module, name);
  if (result != CUDA_SUCCESS) {
    cu->cuModuleUnload(*out_module);
    *out_module = NULL;
    *out_function = NULL;
  }
  return result;
}

// Loads the built-in grid-setting kernel of dispatch_indirect (once per
// device; a failure is kept and reported by every later attempt).
static halo_status_t halo_hal_cuda_builtin_load(
    halo_hal_cuda_device_t *device) {
  if (device->builtin_set_grid) return NULL;
  if (device->builtin_failure) {
    return halo_status_make(halo_status_code(device->builtin_failure), "%s",
                            halo_status_message(device->builtin_failure));
  }
  const halo_hal_cuda_symbols_t *cu = device->cu;
  char log[2048];
  CUmodule module = NULL;
  CUfunction function = NULL;
  const char *call = NULL;
  CUresult result = halo_hal_cuda_builtin_module_load(
      device, halo_hal_cuda_builtin_ptx, "halo_indirect_set_grid", &module,
      &function, &call, log, sizeof(log));
  halo_status_t status = NULL;
  if (result != CUDA_SUCCESS && strcmp(call, "cuModuleLoadDataEx") == 0) {
    halo_status_t cause = halo_hal_cuda_result_to_status(cu, result, call);
    status = halo_status_make(
        HALO_STATUS_UNIMPLEMENTED,
        "dispatch_indirect is unavailable on CUDA device %u: its built-in "
        "grid-setting kernel (device-updatable kernel nodes) does not load: "
        "%s%s%s",
        device->ordinal, halo_status_message(cause),
        log[0] ? "; JIT log: " : "", log);
    halo_status_free(cause);
  } else if (result != CUDA_SUCCESS) {
    status =
        halo_status_annotate(halo_hal_cuda_result_to_status(cu, result, call),
                             "the built-in kernel of dispatch_indirect");
  }
  int grid[3] = {0, 0, 0};
  if (!status) {
    CUdevice_attribute attributes[3] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                                        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
    for (int d = 0; d < 3 && !status; ++d) {
      result =
          cu->cuDeviceGetAttribute(&grid[d], attributes[d], device->device);
      if (result != CUDA_SUCCESS) {
        status =
            halo_hal_cuda_result_to_status(cu, result, "cuDeviceGetAttribute");
      }
    }
  }
  if (status) {
    if (module) cu->cuModuleUnload(module);
    HALO_LOG_WARN("CUDA device %u: %s", device->ordinal,
                  halo_status_message(status));
    device->builtin_failure = status;
    return halo_status_make(halo_status_code(status), "%s",
                            halo_status_message(status));
  }
  // Unloaded with the context (the device never unloads it while running).
  device->builtin_module = module;
  device->builtin_set_grid = function;
  device->builtin_max_grid[0] = (uint32_t)grid[0];
  device->builtin_max_grid[1] =
      (uint32_t)(grid[1] < grid[2] ? grid[1] : grid[2]);
  return NULL;
}

CUfunction halo_hal_cuda_store_kernel(halo_hal_cuda_device_t *device) {
  if (device->store_tried) return device->store_kernel;
  device->store_tried = true;
  if (!device->graph_stores) return NULL;
  char log[2048];
  CUmodule module = NULL;
  CUfunction function = NULL;
  const char *call = NULL;
  CUresult result = halo_hal_cuda_builtin_module_load(
      device, halo_hal_cuda_store_ptx, "halo_store_signals", &module, &function,
      &call, log, sizeof(log));
  if (result != CUDA_SUCCESS) {
    halo_status_t status =
        halo_hal_cuda_result_to_status(device->cu, result, call);
    HALO_LOG_WARN(
        "CUDA device %u: the built-in completion store kernel does not load "
        "(%s%s%s): each execution's semaphore stores follow its graph on the "
        "stream (cuStreamWriteValue64)",
        device->ordinal, halo_status_message(status),
        log[0] ? "; JIT log: " : "", log);
    halo_status_free(status);
    return NULL;
  }
  device->store_kernel = function;
  return function;
}

static halo_status_t halo_hal_cuda_command_buffer_realize(
    halo_hal_cuda_command_buffer_t *command_buffer) {
  if (command_buffer->realized) return NULL;
  halo_hal_cuda_device_t *device = command_buffer->device;
  const halo_hal_cuda_symbols_t *cu = device->cu;
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  // Dynamic shared memory above the default 48 KiB needs the function's
  // opt-in (kept at the largest any recording asked for).
  for (uint32_t i = 0; i < recording->command_count; ++i) {
    const halo_hal_command_t *command = &recording->commands[i];
    if (!command_buffer->functions[i] ||
        command->shared_memory_bytes <= 48u * 1024u) {
      continue;
    }
    int current = 0;
    cu->cuFuncGetAttribute(&current,
                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                           command_buffer->functions[i]);
    if ((uint32_t)current < command->shared_memory_bytes) {
      HALO_CUDA_COMMAND_RETURN_IF_ERROR(
          command_buffer, i, cuFuncSetAttribute, command_buffer->functions[i],
          CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
          (int)command->shared_memory_bytes);
    }
  }
  if (command_buffer->has_indirect) {
    HALO_RETURN_IF_ERROR(halo_hal_cuda_builtin_load(device));
  }
  if (command_buffer->use_graph && command_buffer->has_update &&
      !command_buffer->data_device) {
    // update commands copy from here (DtoD memcpy nodes).
    halo_hal_allocator_t *allocator = device->base.allocator;
    uint64_t address = 0;
    HALO_RETURN_IF_ERROR(
        allocator->vtable->allocate(allocator, recording->data_size, &address));
    halo_status_t status = allocator->vtable->write(
        allocator, address, recording->data, recording->data_size);
    if (status) {
      allocator->vtable->deallocate(allocator, address, recording->data_size);
      return halo_status_annotate(status,
                                  "uploading the recording's %u inline bytes",
                                  recording->data_size);
    }
    command_buffer->data_device = address;
  }
  command_buffer->realized = true;
  return NULL;
}

//===----------------------------------------------------------------------===//
// Node parameters (submission thread)
//===----------------------------------------------------------------------===//

// The address |ref| of command |index| resolves to under |execution|.
// |role| names the reference in an error ("argument %u" with |argument|
// for dispatch arguments, else UINT32_MAX); formatted only then: this runs
// for every re-pointed node.
static halo_status_t halo_hal_cuda_resolve(
    const halo_hal_cuda_command_buffer_t *command_buffer, uint32_t index,
    const char *role, uint32_t argument, const halo_hal_buffer_ref_t *ref,
    const halo_hal_execution_t *execution, uint64_t *out_address) {
  if (ref->slot == HALO_HAL_SLOT_DIRECT) {
    *out_address = ref->address;
    return NULL;
  }
  if (ref->slot < execution->binding_count && execution->bindings &&
      execution->bindings[ref->slot].address != 0) {
    *out_address = execution->bindings[ref->slot].address + ref->offset;
    return NULL;
  }
  *out_address = 0;
  char name[32];
  if (argument != UINT32_MAX) {
    snprintf(name, sizeof(name), "%s %u", role, argument);
    role = name;
  }
  return halo_status_make(
      HALO_STATUS_FAILED_PRECONDITION,
      "command %u (%s): %s: binding slot %u is unbound", index,
      halo_hal_command_type_name(
          command_buffer->base.recording.commands[index].type),
      role, ref->slot);
}

// The kernelParams of dispatch |index| in the scratch area (valid until the
// next call): constants, resolved buffers, |table| for BINDING_TABLE.
static halo_status_t halo_hal_cuda_kernel_params(
    halo_hal_cuda_command_buffer_t *command_buffer, uint32_t index,
    const halo_hal_execution_t *execution, uint64_t table, void ***out_params) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  const halo_hal_command_t *command = &recording->commands[index];
  uint32_t base = command_buffer->command_values[index];
  uint8_t *values = command_buffer->scratch_values;
  memcpy(values, command_buffer->values + base,
         command_buffer->command_value_sizes[index]);
  for (uint32_t a = 0; a < command->arg_count; ++a) {
    const halo_hal_dispatch_arg_t *arg =
        &recording->args[command->arg_first + a];
    uint8_t *value =
        values + (command_buffer->arg_values[command->arg_first + a] - base);
    command_buffer->scratch_pointers[a] = value;
    if (arg->kind == HALO_HAL_ARG_BUFFER &&
        arg->ref.slot != HALO_HAL_SLOT_DIRECT) {
      uint64_t address;
      HALO_RETURN_IF_ERROR(halo_hal_cuda_resolve(command_buffer, index,
                                                 "argument", a, &arg->ref,
                                                 execution, &address));
      memcpy(value, &address, sizeof(address));
    } else if (arg->kind == HALO_HAL_ARG_BINDING_TABLE) {
      memcpy(value, &table, sizeof(table));
    }
  }
  *out_params = command_buffer->scratch_pointers;
  return NULL;
}

static void halo_hal_cuda_kernel_node_params(
    const halo_hal_command_t *command, CUfunction function, void **params,
    CUDA_KERNEL_NODE_PARAMS *out_params) {
  memset(out_params, 0, sizeof(*out_params));
  out_params->func = function;
  out_params->gridDimX = command->grid[0] ? command->grid[0] : 1;
  out_params->gridDimY = command->grid[1] ? command->grid[1] : 1;
  out_params->gridDimZ = command->grid[2] ? command->grid[2] : 1;
  out_params->blockDimX = command->block[0];
  out_params->blockDimY = command->block[1];
  out_params->blockDimZ = command->block[2];
  out_params->sharedMemBytes = command->shared_memory_bytes;
  out_params->kernelParams = params;
}

static halo_status_t halo_hal_cuda_memset_params(
    const halo_hal_cuda_command_buffer_t *command_buffer, uint32_t index,
    const halo_hal_execution_t *execution,
    CUDA_MEMSET_NODE_PARAMS *out_params) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  const halo_hal_command_t *command = &recording->commands[index];
  memset(out_params, 0, sizeof(*out_params));
  uint64_t target;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_resolve(command_buffer, index, "target",
                                             UINT32_MAX, &command->target,
                                             execution, &target));
  uint32_t value = 0;
  const uint8_t *pattern = recording->data + command->data_offset;
  if (command->data_size == 1) {
    value = pattern[0];
  } else if (command->data_size == 2) {
    uint16_t value16;
    memcpy(&value16, pattern, 2);
    value = value16;
  } else {
    memcpy(&value, pattern, 4);
  }
  out_params->dst = (CUdeviceptr)target;
  out_params->value = value;
  out_params->elementSize = command->data_size;
  out_params->width = (size_t)(command->target.length / command->data_size);
  out_params->height = 1;
  return NULL;
}

// copy: source -> target; update: the uploaded inline bytes -> target.
static halo_status_t halo_hal_cuda_memcpy_params(
    const halo_hal_cuda_command_buffer_t *command_buffer, uint32_t index,
    const halo_hal_execution_t *execution, CUDA_MEMCPY3D *out_params) {
  const halo_hal_command_t *command =
      &command_buffer->base.recording.commands[index];
  memset(out_params, 0, sizeof(*out_params));
  uint64_t source, target;
  if (command->type == HALO_HAL_COMMAND_UPDATE) {
    source = command_buffer->data_device + command->data_offset;
  } else {
    HALO_RETURN_IF_ERROR(halo_hal_cuda_resolve(command_buffer, index, "source",
                                               UINT32_MAX, &command->source,
                                               execution, &source));
  }
  HALO_RETURN_IF_ERROR(halo_hal_cuda_resolve(command_buffer, index, "target",
                                             UINT32_MAX, &command->target,
                                             execution, &target));
  out_params->srcMemoryType = CU_MEMORYTYPE_DEVICE;
  out_params->srcDevice = (CUdeviceptr)source;
  out_params->dstMemoryType = CU_MEMORYTYPE_DEVICE;
  out_params->dstDevice = (CUdeviceptr)target;
  out_params->WidthInBytes = (size_t)command->target.length;
  out_params->Height = 1;
  out_params->Depth = 1;
  return NULL;
}

// The grid-setting kernel's parameters for dispatch_indirect |index|.
typedef struct halo_hal_cuda_setter_args_t {
  CUgraphDeviceNode node;
  uint64_t counts;
  uint32_t max_x;
  uint32_t max_yz;
  void *pointers[4];
} halo_hal_cuda_setter_args_t;

static halo_status_t halo_hal_cuda_setter_params(
    const halo_hal_cuda_command_buffer_t *command_buffer, uint32_t index,
    const halo_hal_execution_t *execution, CUgraphDeviceNode node,
    halo_hal_cuda_setter_args_t *args, CUDA_KERNEL_NODE_PARAMS *out_params) {
  const halo_hal_cuda_device_t *device = command_buffer->device;
  const halo_hal_command_t *command =
      &command_buffer->base.recording.commands[index];
  HALO_RETURN_IF_ERROR(halo_hal_cuda_resolve(
      command_buffer, index, "workgroup_count", UINT32_MAX,
      &command->workgroup_count, execution, &args->counts));
  args->node = node;
  args->max_x = device->builtin_max_grid[0];
  args->max_yz = device->builtin_max_grid[1];
  args->pointers[0] = &args->node;
  args->pointers[1] = &args->counts;
  args->pointers[2] = &args->max_x;
  args->pointers[3] = &args->max_yz;
  memset(out_params, 0, sizeof(*out_params));
  out_params->func = device->builtin_set_grid;
  out_params->gridDimX = out_params->gridDimY = out_params->gridDimZ = 1;
  out_params->blockDimX = out_params->blockDimY = out_params->blockDimZ = 1;
  out_params->kernelParams = args->pointers;
  return NULL;
}

//===----------------------------------------------------------------------===//
// Graph instances (submission thread, except retire)
//===----------------------------------------------------------------------===//

// The dependencies of the next node: the previous stage's one node, or a
// join node (created on first use) when it has several.
typedef struct halo_hal_cuda_stages_t {
  CUgraphNode *previous;
  uint32_t previous_count;
  CUgraphNode *current;
  uint32_t current_count;
  CUgraphNode join;
} halo_hal_cuda_stages_t;

static halo_status_t halo_hal_cuda_stage_dependencies(
    halo_hal_cuda_command_buffer_t *command_buffer,
    halo_hal_cuda_graph_instance_t *instance, halo_hal_cuda_stages_t *stages,
    uint32_t index, const CUgraphNode **out_nodes, size_t *out_count) {
  if (stages->previous_count <= 1) {
    *out_nodes = stages->previous;
    *out_count = stages->previous_count;
    return NULL;
  }
  if (!stages->join) {
    HALO_CUDA_COMMAND_RETURN_IF_ERROR(
        command_buffer, index, cuGraphAddEmptyNode, &stages->join,
        instance->graph, stages->previous, stages->previous_count);
  }
  *out_nodes = &stages->join;
  *out_count = 1;
  return NULL;
}

static halo_status_t halo_hal_cuda_add_dispatch(
    halo_hal_cuda_command_buffer_t *command_buffer,
    halo_hal_cuda_graph_instance_t *instance, uint32_t index,
    const halo_hal_execution_t *execution, const CUgraphNode *dependencies,
    size_t dependency_count) {
  const halo_hal_command_t *command =
      &command_buffer->base.recording.commands[index];
  const halo_hal_cuda_symbols_t *cu = command_buffer->device->cu;
  bool indirect = command->type == HALO_HAL_COMMAND_DISPATCH_INDIRECT;
  halo_hal_cuda_setter_args_t setter_args;
  CUDA_KERNEL_NODE_PARAMS params;
  if (indirect) {
    // The setter first (its device node handle is filled in below).
    HALO_RETURN_IF_ERROR(halo_hal_cuda_setter_params(
        command_buffer, index, execution, NULL, &setter_args, &params));
    HALO_CUDA_COMMAND_RETURN_IF_ERROR(
        command_buffer, index, cuGraphAddKernelNode,
        &instance->setter_nodes[index], instance->graph, dependencies,
        dependency_count, &params);
    dependencies = &instance->setter_nodes[index];
    dependency_count = 1;
  }
  void **kernel_params;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_kernel_params(
      command_buffer, index, execution, instance->table, &kernel_params));
  halo_hal_cuda_kernel_node_params(command, command_buffer->functions[index],
                                   kernel_params, &params);
  HALO_CUDA_COMMAND_RETURN_IF_ERROR(command_buffer, index, cuGraphAddKernelNode,
                                    &instance->nodes[index], instance->graph,
                                    dependencies, dependency_count, &params);
  if (!indirect) return NULL;
  CUlaunchAttributeValue value;
  memset(&value, 0, sizeof(value));
  value.deviceUpdatableKernelNode.deviceUpdatable = 1;
  HALO_CUDA_COMMAND_RETURN_IF_ERROR(
      command_buffer, index, cuGraphKernelNodeSetAttribute,
      instance->nodes[index], CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE,
      &value);
  CUgraphDeviceNode device_node = value.deviceUpdatableKernelNode.devNode;
  CUlaunchAttributeValue read;
  memset(&read, 0, sizeof(read));
  if (cu->cuGraphKernelNodeGetAttribute(
          instance->nodes[index],
          CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE,
          &read) == CUDA_SUCCESS &&
      read.deviceUpdatableKernelNode.devNode) {
    device_node = read.deviceUpdatableKernelNode.devNode;
  }
  if (!device_node) {
    return halo_status_make(HALO_STATUS_UNIMPLEMENTED,
                            "command %u (dispatch_indirect): the driver gave "
                            "no device handle for a device-updatable kernel "
                            "node",
                            index);
  }
  instance->device_nodes[index] = device_node;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_setter_params(
      command_buffer, index, execution, device_node, &setter_args, &params));
  HALO_CUDA_COMMAND_RETURN_IF_ERROR(command_buffer, index,
                                    cuGraphKernelNodeSetParams,
                                    instance->setter_nodes[index], &params);
  return NULL;
}

// Adds every command's node(s) with the addresses |execution| resolves to.
static halo_status_t halo_hal_cuda_instance_build(
    halo_hal_cuda_command_buffer_t *command_buffer,
    halo_hal_cuda_graph_instance_t *instance,
    const halo_hal_execution_t *execution) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  halo_hal_cuda_device_t *device = command_buffer->device;
  halo_hal_cuda_stages_t stages = {
      .previous = command_buffer->stage_previous,
      .current = command_buffer->stage_current,
  };
  uint32_t node_count = 0;
  for (uint32_t i = 0; i < recording->command_count; ++i) {
    const halo_hal_command_t *command = &recording->commands[i];
    if (command->type == HALO_HAL_COMMAND_BARRIER) {
      if (stages.current_count > 0) {
        CUgraphNode *swap = stages.previous;
        stages.previous = stages.current;
        stages.previous_count = stages.current_count;
        stages.current = swap;
        stages.current_count = 0;
        stages.join = NULL;
      }
      continue;
    }
    const CUgraphNode *dependencies = NULL;
    size_t dependency_count = 0;
    HALO_RETURN_IF_ERROR(
        halo_hal_cuda_stage_dependencies(command_buffer, instance, &stages, i,
                                         &dependencies, &dependency_count));
    switch (command->type) {
      case HALO_HAL_COMMAND_FILL: {
        CUDA_MEMSET_NODE_PARAMS params;
        HALO_RETURN_IF_ERROR(
            halo_hal_cuda_memset_params(command_buffer, i, execution, &params));
        HALO_CUDA_COMMAND_RETURN_IF_ERROR(
            command_buffer, i, cuGraphAddMemsetNode, &instance->nodes[i],
            instance->graph, dependencies, dependency_count, &params,
            device->context);
        break;
      }
      case HALO_HAL_COMMAND_COPY:
      case HALO_HAL_COMMAND_UPDATE: {
        CUDA_MEMCPY3D params;
        HALO_RETURN_IF_ERROR(
            halo_hal_cuda_memcpy_params(command_buffer, i, execution, &params));
        HALO_CUDA_COMMAND_RETURN_IF_ERROR(
            command_buffer, i, cuGraphAddMemcpyNode, &instance->nodes[i],
            instance->graph, dependencies, dependency_count, &params,
            device->context);
        break;
      }
      case HALO_HAL_COMMAND_DISPATCH:
      case HALO_HAL_COMMAND_DISPATCH_INDIRECT:
        HALO_RETURN_IF_ERROR(
            halo_hal_cuda_add_dispatch(command_buffer, instance, i, execution,
                                       dependencies, dependency_count));
        break;
    }
    stages.current[stages.current_count++] = instance->nodes[i];
    ++node_count;
  }
  if (instance->ticket) {
    // The store node after the last stage (every earlier stage is its
    // ancestor); the recording ends with a barrier: the stage before it.
    const CUgraphNode *sinks = stages.current;
    size_t sink_count = stages.current_count;
    if (sink_count == 0) {
      sinks = stages.previous;
      sink_count = stages.previous_count;
    }
    CUdeviceptr ticket_device = (CUdeviceptr)atomic_load_explicit(
        &instance->ticket[HALO_HAL_CUDA_TICKET_DEVICE_WORD],
        memory_order_relaxed);
    void *params[] = {&ticket_device};
    CUDA_KERNEL_NODE_PARAMS store;
    memset(&store, 0, sizeof(store));
    store.func = device->store_kernel;
    store.gridDimX = store.gridDimY = store.gridDimZ = 1;
    store.blockDimX = store.blockDimY = store.blockDimZ = 1;
    store.kernelParams = params;
    CUresult result = device->cu->cuGraphAddKernelNode(
        &instance->store_node, instance->graph, sinks, sink_count, &store);
    if (result == CUDA_SUCCESS) {
      instance->store_enabled = true;
    } else {
      // No store node: its stores follow on the stream.
      halo_status_t status = halo_hal_cuda_result_to_status(
          device->cu, result, "cuGraphAddKernelNode");
      HALO_LOG_WARN("CUDA device %u: a graph instance without a store node: %s",
                    device->ordinal, halo_status_message(status));
      halo_status_free(status);
      halo_hal_cuda_ticket_give(device, (uint64_t *)instance->ticket);
      instance->ticket = NULL;
    }
  }
  if (!instance->ticket && node_count == 0) {
    // An empty recording still launches (and completes) as a graph.
    CUgraphNode empty;
    HALO_CUDA_RETURN_IF_ERROR(device->cu, cuGraphAddEmptyNode, &empty,
                              instance->graph, NULL, 0);
  }
  return NULL;
}

// Submission thread: the pinned staging of the next instance's binding
// table (|bytes|), a slot no instance holds; with none, a new chunk of
// HALO_HAL_CUDA_STAGING_PER_CHUNK slots (the reaper frees them).
static halo_status_t halo_hal_cuda_staging_slot(
    halo_hal_cuda_command_buffer_t *command_buffer, size_t bytes,
    uint64_t **out_staging) {
  *out_staging = NULL;
  if (command_buffer->staging_free_count == 0) {
    uint8_t **chunks =
        realloc(command_buffer->staging_chunks,
                (command_buffer->staging_chunk_count + 1) * sizeof(*chunks));
    if (!chunks) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "oom for binding-table staging");
    }
    command_buffer->staging_chunks = chunks;
    void *host = NULL;
    const halo_hal_cuda_symbols_t *cu = command_buffer->device->cu;
    CUresult result =
        cu->cuMemAllocHost(&host, bytes * HALO_HAL_CUDA_STAGING_PER_CHUNK);
    if (result != CUDA_SUCCESS) {
      return halo_hal_cuda_result_to_status(cu, result, "cuMemAllocHost");
    }
    chunks[command_buffer->staging_chunk_count++] = host;
    // Taken first to last.
    for (uint32_t i = HALO_HAL_CUDA_STAGING_PER_CHUNK; i-- > 0;) {
      command_buffer->staging_free[command_buffer->staging_free_count++] =
          (uint64_t *)((uint8_t *)host + i * bytes);
    }
  }
  *out_staging =
      command_buffer->staging_free[--command_buffer->staging_free_count];
  return NULL;
}

// A slot |staging| (NULL: none) no instance holds any more.
void halo_hal_cuda_staging_give(halo_hal_cuda_command_buffer_t *command_buffer,
                                uint64_t *staging) {
  if (!staging) return;
  command_buffer->staging_free[command_buffer->staging_free_count++] = staging;
}

static halo_status_t halo_hal_cuda_instance_create(
    halo_hal_cuda_command_buffer_t *command_buffer,
    const halo_hal_execution_t *execution,
    halo_hal_cuda_graph_instance_t **out_instance) {
  *out_instance = NULL;
  halo_hal_cuda_device_t *device = command_buffer->device;
  const halo_hal_cuda_symbols_t *cu = device->cu;
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  uint32_t capacity = recording->binding_capacity;
  uint32_t count = recording->command_count ? recording->command_count : 1;
  halo_hal_cuda_graph_instance_t *instance = calloc(1, sizeof(*instance));
  if (!instance) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "oom for a graph instance");
  }
  instance->nodes = calloc(count, sizeof(CUgraphNode));
  instance->bound = calloc(capacity + 1, sizeof(uint64_t));
  if (command_buffer->has_indirect) {
    instance->setter_nodes = calloc(count, sizeof(CUgraphNode));
    instance->device_nodes = calloc(count, sizeof(CUgraphDeviceNode));
  }
  halo_status_t status = NULL;
  if (!instance->nodes || !instance->bound ||
      (command_buffer->has_indirect &&
       (!instance->setter_nodes || !instance->device_nodes))) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "oom for a graph instance");
  }
  size_t table_bytes = (size_t)capacity * sizeof(uint64_t);
  if (!status && command_buffer->uses_binding_table) {
    halo_hal_allocator_t *allocator = device->base.allocator;
    status =
        allocator->vtable->allocate(allocator, table_bytes, &instance->table);
    if (!status) {
      instance->table_bytes = table_bytes;
      status = halo_hal_cuda_staging_slot(command_buffer, table_bytes,
                                          &instance->staging);
    }
    if (status) {
      status = halo_status_annotate(status,
                                    "the binding table of a graph instance "
                                    "(%u slots)",
                                    capacity);
    }
  }
  if (!status && device->store_kernel) {
    // Without a ticket the instance has no store node: its stores follow
    // on the stream, as with the option off.
    uint64_t *ticket = NULL;
    halo_status_t ticket_status = halo_hal_cuda_ticket_take(device, &ticket);
    if (!ticket_status) {
      instance->ticket = (_Atomic uint64_t *)ticket;
    } else {
      HALO_LOG_WARN("CUDA device %u: a graph instance without a store node: %s",
                    device->ordinal, halo_status_message(ticket_status));
      halo_status_free(ticket_status);
    }
  }
  if (!status) {
    CUresult result = cu->cuGraphCreate(&instance->graph, 0);
    if (result != CUDA_SUCCESS) {
      status = halo_hal_cuda_result_to_status(cu, result, "cuGraphCreate");
    }
  }
  if (!status) {
    status = halo_hal_cuda_instance_build(command_buffer, instance, execution);
  }
  if (!status) {
    CUresult result =
        cu->cuGraphInstantiateWithFlags(&instance->exec, instance->graph, 0);
    if (result != CUDA_SUCCESS) {
      instance->exec = NULL;
      status = halo_hal_cuda_result_to_status(cu, result,
                                              "cuGraphInstantiateWithFlags");
    }
  }
  if (status) {
    halo_hal_cuda_staging_give(command_buffer, instance->staging);
    halo_hal_cuda_instance_destroy(device, instance);
    return halo_status_annotate(status, "building a CUDA graph of %u commands",
                                recording->command_count);
  }
  for (uint32_t s = 0; s < capacity; ++s) {
    instance->bound[s] = s < execution->binding_count && execution->bindings
                             ? execution->bindings[s].address
                             : 0;
  }
  // Device-updatable nodes need an explicit upload before the first launch.
  instance->needs_upload = command_buffer->has_indirect;
  *out_instance = instance;
  return NULL;
}

// Whether |instance| is bound to exactly what |execution| binds (then it
// needs no SetParams and no table copy).
static bool halo_hal_cuda_instance_matches(
    const halo_hal_cuda_command_buffer_t *command_buffer,
    const halo_hal_cuda_graph_instance_t *instance,
    const halo_hal_execution_t *execution) {
  uint32_t capacity = command_buffer->base.recording.binding_capacity;
  if (!instance->table_valid && command_buffer->uses_binding_table) {
    return false;
  }
  for (uint32_t s = 0; s < capacity; ++s) {
    uint64_t address = s < execution->binding_count && execution->bindings
                           ? execution->bindings[s].address
                           : 0;
    if (address != instance->bound[s]) return false;
  }
  return true;
}

// The key of the addresses |execution| binds (a 64-bit mix; never 0), or 0
// where instances are not looked for by what they are bound to (affinity
// off, more than HALO_HAL_CUDA_AFFINITY_SLOTS slots).
static uint64_t halo_hal_cuda_binding_key(
    const halo_hal_cuda_command_buffer_t *command_buffer,
    const halo_hal_execution_t *execution) {
  uint32_t capacity = command_buffer->base.recording.binding_capacity;
  if (!command_buffer->device->instance_affinity ||
      capacity > HALO_HAL_CUDA_AFFINITY_SLOTS) {
    return 0;
  }
  uint64_t key = 0x9e3779b97f4a7c15ull;
  for (uint32_t s = 0; s < capacity; ++s) {
    uint64_t address = s < execution->binding_count && execution->bindings
                           ? execution->bindings[s].address
                           : 0;
    key = (key ^ address) * 0xff51afd7ed558ccdull;
    key ^= key >> 32;
  }
  return key ? key : 1;
}

// Takes a free instance, or reserves the right to create one; parks
// |waiter| when the pool is at its bound. Of the free instances it prefers
// the newest one filed under |key| and bound to what |execution| binds
// (clients sharing a recording each find "their" instance again: no
// SetParams, no table copy), else the oldest (the one its last user is
// least likely to come back for); with no key (affinity off), the newest.
// Parked executions go first, in the order they parked: an instance given
// back is kept for the one it wakes (|promised|), and while any is parked
// or woken a later execution parks behind them. Else a later execution of
// a queue could take the instance freed for an earlier one and be issued
// first: out of the queue's order, its GPU store then overwritten by the
// earlier one's lower value, which an execution watched through its store
// would wait for for ever.
static void halo_hal_cuda_instance_take(
    halo_hal_cuda_command_buffer_t *command_buffer,
    const halo_hal_execution_t *execution, uint64_t key,
    halo_hal_cuda_task_t *waiter, halo_hal_cuda_graph_instance_t **out_instance,
    bool *out_create, bool *out_parked) {
  *out_instance = NULL;
  *out_create = false;
  *out_parked = false;
  pthread_mutex_lock(&command_buffer->mutex);
  bool promised = waiter->promised;
  if (promised) {
    waiter->promised = false;
    --command_buffer->promised;
  }
  uint32_t count = command_buffer->free_count;
  uint32_t room =
      count + (command_buffer->instance_limit - command_buffer->instance_count);
  bool may = promised ||
             (!command_buffer->parked.head && room > command_buffer->promised);
  if (may && count > 0) {
    // Without a key (affinity off): the newest, as before there was one.
    uint32_t index = key ? 0 : count - 1;
    for (uint32_t i = count; key && i-- > 0;) {
      if (command_buffer->free_instances[i].key == key &&
          halo_hal_cuda_instance_matches(
              command_buffer, command_buffer->free_instances[i].instance,
              execution)) {
        index = i;
        break;
      }
    }
    *out_instance = command_buffer->free_instances[index].instance;
    memmove(&command_buffer->free_instances[index],
            &command_buffer->free_instances[index + 1],
            (count - index - 1) * sizeof(command_buffer->free_instances[0]));
    command_buffer->free_count = count - 1;
  } else if (may &&
             command_buffer->instance_count < command_buffer->instance_limit) {
    ++command_buffer->instance_count;
    *out_create = true;
  } else {
    halo_hal_cuda_tasks_push(&command_buffer->parked, waiter);
    *out_parked = true;
  }
  pthread_mutex_unlock(&command_buffer->mutex);
}

// Under the pool's mutex, which it unlocks: wakes the first parked
// execution, if any, keeping an instance (or the right to create one) for
// it, and posts it to the submission thread.
static void halo_hal_cuda_instance_wake_locked(
    halo_hal_cuda_command_buffer_t *command_buffer) {
  halo_hal_cuda_task_t *waiter =
      halo_hal_cuda_tasks_pop(&command_buffer->parked);
  if (waiter) {
    waiter->promised = true;
    ++command_buffer->promised;
  }
  pthread_mutex_unlock(&command_buffer->mutex);
  if (waiter) {
    halo_hal_cuda_thread_post(&command_buffer->device->submission, waiter);
  }
}

// Returns |instance| (NULL: a reservation that was not used) and wakes the
// first parked execution, if any, keeping the instance (or the right to
// create one) for it. Any thread; no driver call.
static void halo_hal_cuda_instance_give(
    halo_hal_cuda_command_buffer_t *command_buffer,
    halo_hal_cuda_graph_instance_t *instance) {
  pthread_mutex_lock(&command_buffer->mutex);
  if (instance) {
    // Never more than the pool's bound (each free instance was counted).
    command_buffer->free_instances[command_buffer->free_count++] =
        (halo_hal_cuda_free_instance_t){instance->key, instance};
  } else {
    --command_buffer->instance_count;
  }
  halo_hal_cuda_instance_wake_locked(command_buffer);
  // Idle now unless kept for its own parked execution: another recording's
  // execution waiting for room may have it destroyed.
  if (instance) halo_hal_cuda_graph_wake(command_buffer->device);
}

// Re-points command |index| of |instance| at what |execution| binds.
static halo_status_t halo_hal_cuda_instance_update_command(
    halo_hal_cuda_command_buffer_t *command_buffer,
    halo_hal_cuda_graph_instance_t *instance, uint32_t index,
    const halo_hal_execution_t *execution) {
  const halo_hal_command_t *command =
      &command_buffer->base.recording.commands[index];
  halo_hal_cuda_device_t *device = command_buffer->device;
  switch (command->type) {
    case HALO_HAL_COMMAND_FILL: {
      CUDA_MEMSET_NODE_PARAMS params;
      HALO_RETURN_IF_ERROR(halo_hal_cuda_memset_params(command_buffer, index,
                                                       execution, &params));
      HALO_CUDA_COMMAND_RETURN_IF_ERROR(
          command_buffer, index, cuGraphExecMemsetNodeSetParams, instance->exec,
          instance->nodes[index], &params, device->context);
      return NULL;
    }
    case HALO_HAL_COMMAND_COPY:
    case HALO_HAL_COMMAND_UPDATE: {
      CUDA_MEMCPY3D params;
      HALO_RETURN_IF_ERROR(halo_hal_cuda_memcpy_params(command_buffer, index,
                                                       execution, &params));
      HALO_CUDA_COMMAND_RETURN_IF_ERROR(
          command_buffer, index, cuGraphExecMemcpyNodeSetParams, instance->exec,
          instance->nodes[index], &params, device->context);
      return NULL;
    }
    case HALO_HAL_COMMAND_DISPATCH_INDIRECT: {
      halo_hal_cuda_setter_args_t setter_args;
      CUDA_KERNEL_NODE_PARAMS params;
      HALO_RETURN_IF_ERROR(halo_hal_cuda_setter_params(
          command_buffer, index, execution, instance->device_nodes[index],
          &setter_args, &params));
      HALO_CUDA_COMMAND_RETURN_IF_ERROR(
          command_buffer, index, cuGraphExecKernelNodeSetParams, instance->exec,
          instance->setter_nodes[index], &params);
      // Host-side updates of a device-updatable node need a new upload.
      instance->needs_upload = true;
      __attribute__((fallthrough));
    }
    case HALO_HAL_COMMAND_DISPATCH: {
      void **kernel_params;
      HALO_RETURN_IF_ERROR(halo_hal_cuda_kernel_params(
          command_buffer, index, execution, instance->table, &kernel_params));
      CUDA_KERNEL_NODE_PARAMS params;
      halo_hal_cuda_kernel_node_params(
          command, command_buffer->functions[index], kernel_params, &params);
      HALO_CUDA_COMMAND_RETURN_IF_ERROR(
          command_buffer, index, cuGraphExecKernelNodeSetParams, instance->exec,
          instance->nodes[index], &params);
      return NULL;
    }
    default:
      return NULL;
  }
}

// Applies |execution|'s bindings to |instance|: SetParams on the commands
// whose slots changed, the binding table into the instance's slot.
static halo_status_t halo_hal_cuda_instance_update(
    halo_hal_cuda_command_buffer_t *command_buffer,
    halo_hal_cuda_graph_instance_t *instance,
    const halo_hal_execution_t *execution, CUstream stream,
    halo_hal_cuda_issue_t *issue) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  const halo_hal_cuda_symbols_t *cu = command_buffer->device->cu;
  uint32_t capacity = recording->binding_capacity;
  bool changed = false;
  if (++command_buffer->stamp == 0) {
    memset(command_buffer->command_stamps, 0,
           recording->command_count * sizeof(uint32_t));
    command_buffer->stamp = 1;
  }
  uint32_t stamp = command_buffer->stamp;
  for (uint32_t s = 0; s < capacity; ++s) {
    uint64_t address = s < execution->binding_count && execution->bindings
                           ? execution->bindings[s].address
                           : 0;
    if (address == instance->bound[s]) continue;
    changed = true;
    for (uint32_t j = command_buffer->slot_first[s];
         j < command_buffer->slot_first[s + 1]; ++j) {
      uint32_t index = command_buffer->slot_commands[j];
      if (command_buffer->command_stamps[index] == stamp) continue;
      command_buffer->command_stamps[index] = stamp;
      // A failure leaves the instance half re-pointed: the caller forgets
      // what it holds (halo_hal_cuda_instance_forget).
      HALO_RETURN_IF_ERROR(halo_hal_cuda_instance_update_command(
          command_buffer, instance, index, execution));
      ++issue->nodes_updated;
    }
    instance->bound[s] = address;
  }
  if (command_buffer->uses_binding_table &&
      (changed || !instance->table_valid)) {
    memcpy(instance->staging, instance->bound, capacity * sizeof(uint64_t));
    CUresult result =
        cu->cuMemcpyHtoDAsync((CUdeviceptr)instance->table, instance->staging,
                              capacity * sizeof(uint64_t), stream);
    if (result != CUDA_SUCCESS) {
      instance->table_valid = false;
      return halo_status_annotate(
          halo_hal_cuda_result_to_status(cu, result, "cuMemcpyHtoDAsync"),
          "copying the binding table (%u slots)", capacity);
    }
    issue->enqueued = true;
    issue->table_copied = true;
    instance->table_valid = true;
  }
  return NULL;
}

// After a failed update or launch nothing is known of what the nodes and
// the device table hold: the next execution re-points everything.
static void halo_hal_cuda_instance_forget(
    halo_hal_cuda_command_buffer_t *command_buffer,
    halo_hal_cuda_graph_instance_t *instance) {
  // An address no allocation has: every slot compares unequal next time.
  for (uint32_t s = 0; s < command_buffer->base.recording.binding_capacity;
       ++s) {
    instance->bound[s] = UINT64_MAX;
  }
  instance->table_valid = false;
  instance->key = 0;
}

// Writes |store_count| |stores| into |instance|'s ticket for its next
// launch.
static void halo_hal_cuda_instance_write_ticket(
    halo_hal_cuda_graph_instance_t *instance,
    const halo_hal_cuda_store_t *stores, uint32_t store_count) {
  for (uint32_t i = 0; i < store_count; ++i) {
    atomic_store_explicit(&instance->ticket[1 + 2 * i], stores[i].address,
                          memory_order_relaxed);
    atomic_store_explicit(&instance->ticket[2 + 2 * i], stores[i].value,
                          memory_order_relaxed);
  }
  // Released before the launch that makes the GPU read it.
  atomic_store_explicit(&instance->ticket[0], store_count,
                        memory_order_release);
}

// Gives back the right to create an instance that |waiter| holds and parks
// it first in line (it was: the parked one woken, or none parked), to be
// woken by the next instance of its recording given back; woken at once if
// one came back meanwhile.
static void halo_hal_cuda_instance_park_first(
    halo_hal_cuda_command_buffer_t *command_buffer,
    halo_hal_cuda_task_t *waiter) {
  pthread_mutex_lock(&command_buffer->mutex);
  --command_buffer->instance_count;
  halo_hal_cuda_tasks_push_front(&command_buffer->parked, waiter);
  if (command_buffer->free_count > command_buffer->promised) {
    halo_hal_cuda_instance_wake_locked(command_buffer);
  } else {
    pthread_mutex_unlock(&command_buffer->mutex);
  }
}

static halo_status_t halo_hal_cuda_issue_graph(
    halo_hal_cuda_command_buffer_t *command_buffer,
    const halo_hal_execution_t *execution, CUstream stream,
    const halo_hal_cuda_store_t *stores, uint32_t store_count,
    halo_hal_cuda_task_t *waiter, halo_hal_cuda_issue_t *issue,
    bool *out_parked) {
  const halo_hal_cuda_symbols_t *cu = command_buffer->device->cu;
  halo_hal_cuda_graph_instance_t *instance;
  bool create;
  uint64_t key = halo_hal_cuda_binding_key(command_buffer, execution);
  halo_hal_cuda_instance_take(command_buffer, execution, key, waiter, &instance,
                              &create, out_parked);
  if (*out_parked) return NULL;
  halo_status_t status = NULL;
  if (create) {
    uint64_t used = 0;
    bool waited = false;
    halo_hal_cuda_graph_room_t room =
        halo_hal_cuda_graph_reserve(command_buffer, waiter, &used, &waited);
    if (room == HALO_HAL_CUDA_GRAPH_ROOM_WAIT) {
      halo_hal_cuda_instance_park_first(command_buffer, waiter);
      *out_parked = true;
      return NULL;
    }
    if (room == HALO_HAL_CUDA_GRAPH_ROOM_WAIT_OTHERS) {
      // The right to create goes back; the waiter is the device's now.
      halo_hal_cuda_instance_give(command_buffer, NULL);
      *out_parked = true;
      return NULL;
    }
    if (room == HALO_HAL_CUDA_GRAPH_ROOM_NONE) {
      halo_hal_cuda_instance_give(command_buffer, NULL);
      halo_hal_cuda_device_t *device = command_buffer->device;
      uint64_t need = command_buffer->instance_bytes;
      uint64_t limit = device->graph_bytes_limit;
      if (need > limit) {
        return halo_status_make(
            HALO_STATUS_RESOURCE_EXHAUSTED,
            "CUDA device %u: one graph instance of this recording (%u "
            "commands, %llu KiB of device memory by halo's estimate: 120 KiB "
            "a command between two barriers with others, 4 KiB one alone) is "
            "larger than cuda-graph-bytes (%llu KiB)",
            device->ordinal, command_buffer->base.recording.command_count,
            (unsigned long long)(need >> 10),
            (unsigned long long)(limit >> 10));
      }
      return halo_status_make(
          HALO_STATUS_RESOURCE_EXHAUSTED,
          "CUDA device %u: a graph instance of this recording (%u commands, "
          "%llu KiB of device memory by halo's estimate) does not fit in "
          "cuda-graph-bytes (%llu KiB): %llu KiB are taken by other "
          "recordings' instances, %s",
          device->ordinal, command_buffer->base.recording.command_count,
          (unsigned long long)(need >> 10), (unsigned long long)(limit >> 10),
          (unsigned long long)(used >> 10),
          waited ? "still in use after this execution waited 1 s for them "
                   "(executions waiting for room are served in the order they "
                   "came)"
                 : "none of which can go (idle ones kept for executions "
                   "waiting for them) or comes back");
    }
    status =
        halo_hal_cuda_instance_create(command_buffer, execution, &instance);
    if (status) {
      // The reservation goes back; a parked execution tries in its turn, and
      // so do those waiting for room.
      pthread_mutex_lock(&command_buffer->device->graph_mutex);
      halo_hal_cuda_graph_release_locked(command_buffer, 1);
      pthread_mutex_unlock(&command_buffer->device->graph_mutex);
      halo_hal_cuda_instance_give(command_buffer, NULL);
      halo_hal_cuda_graph_wake(command_buffer->device);
      return status;
    }
    pthread_mutex_lock(&command_buffer->mutex);
    instance->all_next = command_buffer->all_instances;
    command_buffer->all_instances = instance;
    pthread_mutex_unlock(&command_buffer->mutex);
    issue->instance_created = true;
  }
  issue->instance = instance;
  status = halo_hal_cuda_instance_update(command_buffer, instance, execution,
                                         stream, issue);
  // Bound to what |execution| binds now (a failure below forgets it).
  if (!status) instance->key = key;
  if (!status && instance->needs_upload) {
    CUresult result = cu->cuGraphUpload(instance->exec, stream);
    if (result != CUDA_SUCCESS) {
      status = halo_hal_cuda_result_to_status(cu, result, "cuGraphUpload");
    } else {
      issue->enqueued = true;
      instance->needs_upload = false;
    }
  }
  bool in_graph = false;
  if (!status && instance->ticket) {
    // The store node only where the caller gives the stores (tasks wait
    // for the submission thread, or did lately): on the GPU it adds a
    // dependent kernel's start, about 3.5 us to the execution's latency;
    // disabled, nothing.
    bool want = stores != NULL;
    if (want != instance->store_enabled &&
        cu->cuGraphNodeSetEnabled(instance->exec, instance->store_node, want) ==
            CUDA_SUCCESS) {
      instance->store_enabled = want;
    }
    if (instance->store_enabled) {
      in_graph = want && store_count > 0;
      halo_hal_cuda_instance_write_ticket(instance, stores,
                                          in_graph ? store_count : 0);
    }
  }
  if (!status) {
    CUresult result = cu->cuGraphLaunch(instance->exec, stream);
    if (result != CUDA_SUCCESS) {
      status = halo_hal_cuda_result_to_status(cu, result, "cuGraphLaunch");
    } else {
      issue->enqueued = true;
      issue->stores_in_graph = in_graph;
    }
  }
  if (status) halo_hal_cuda_instance_forget(command_buffer, instance);
  return status;
}

//===----------------------------------------------------------------------===//
// Stream replay (ONE_SHOT, submission thread)
//===----------------------------------------------------------------------===//

static halo_status_t halo_hal_cuda_replay_command(
    halo_hal_cuda_command_buffer_t *command_buffer, uint32_t index,
    const halo_hal_execution_t *execution, CUstream stream, uint64_t table) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  const halo_hal_command_t *command = &recording->commands[index];
  switch (command->type) {
    case HALO_HAL_COMMAND_FILL: {
      CUDA_MEMSET_NODE_PARAMS params;
      HALO_RETURN_IF_ERROR(halo_hal_cuda_memset_params(command_buffer, index,
                                                       execution, &params));
      if (params.elementSize == 1) {
        HALO_CUDA_COMMAND_RETURN_IF_ERROR(
            command_buffer, index, cuMemsetD8Async, params.dst,
            (unsigned char)params.value, params.width, stream);
      } else if (params.elementSize == 2) {
        HALO_CUDA_COMMAND_RETURN_IF_ERROR(
            command_buffer, index, cuMemsetD16Async, params.dst,
            (unsigned short)params.value, params.width, stream);
      } else {
        HALO_CUDA_COMMAND_RETURN_IF_ERROR(command_buffer, index,
                                          cuMemsetD32Async, params.dst,
                                          params.value, params.width, stream);
      }
      return NULL;
    }
    case HALO_HAL_COMMAND_COPY: {
      uint64_t source, target;
      HALO_RETURN_IF_ERROR(
          halo_hal_cuda_resolve(command_buffer, index, "source", UINT32_MAX,
                                &command->source, execution, &source));
      HALO_RETURN_IF_ERROR(
          halo_hal_cuda_resolve(command_buffer, index, "target", UINT32_MAX,
                                &command->target, execution, &target));
      HALO_CUDA_COMMAND_RETURN_IF_ERROR(
          command_buffer, index, cuMemcpyAsync, (CUdeviceptr)target,
          (CUdeviceptr)source, (size_t)command->target.length, stream);
      return NULL;
    }
    case HALO_HAL_COMMAND_UPDATE: {
      uint64_t target;
      HALO_RETURN_IF_ERROR(
          halo_hal_cuda_resolve(command_buffer, index, "target", UINT32_MAX,
                                &command->target, execution, &target));
      // Pageable source: the driver stages it before returning.
      HALO_CUDA_COMMAND_RETURN_IF_ERROR(
          command_buffer, index, cuMemcpyHtoDAsync, (CUdeviceptr)target,
          recording->data + command->data_offset, command->data_size, stream);
      return NULL;
    }
    case HALO_HAL_COMMAND_DISPATCH: {
      void **params;
      HALO_RETURN_IF_ERROR(halo_hal_cuda_kernel_params(
          command_buffer, index, execution, table, &params));
      HALO_CUDA_COMMAND_RETURN_IF_ERROR(
          command_buffer, index, cuLaunchKernel,
          command_buffer->functions[index], command->grid[0], command->grid[1],
          command->grid[2], command->block[0], command->block[1],
          command->block[2], command->shared_memory_bytes, stream, params,
          NULL);
      return NULL;
    }
    default:
      // Barriers: one stream runs everything in order. dispatch_indirect
      // never replays (it makes the recording a graph one).
      return NULL;
  }
}

static halo_status_t halo_hal_cuda_issue_replay(
    halo_hal_cuda_command_buffer_t *command_buffer,
    const halo_hal_execution_t *execution, CUstream stream,
    halo_hal_cuda_issue_t *issue) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  const halo_hal_cuda_symbols_t *cu = command_buffer->device->cu;
  CUdeviceptr table = 0;
  if (command_buffer->uses_binding_table) {
    uint32_t capacity = recording->binding_capacity;
    size_t bytes = (size_t)capacity * sizeof(uint64_t);
    uint64_t *host = malloc(bytes);
    if (!host) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "oom for a binding table of %u slots", capacity);
    }
    for (uint32_t s = 0; s < capacity; ++s) {
      host[s] = s < execution->binding_count && execution->bindings
                    ? execution->bindings[s].address
                    : 0;
    }
    CUresult result = cu->cuMemAllocAsync(&table, bytes, stream);
    if (result == CUDA_SUCCESS) {
      issue->enqueued = true;
      // Pageable source: staged before the call returns.
      result = cu->cuMemcpyHtoDAsync(table, host, bytes, stream);
      if (result != CUDA_SUCCESS) {
        cu->cuMemFreeAsync(table, stream);
        free(host);
        return halo_hal_cuda_result_to_status(cu, result, "cuMemcpyHtoDAsync");
      }
    }
    free(host);
    if (result != CUDA_SUCCESS) {
      return halo_hal_cuda_result_to_status(cu, result, "cuMemAllocAsync");
    }
  }
  halo_status_t status = NULL;
  for (uint32_t i = 0; i < recording->command_count && !status; ++i) {
    status = halo_hal_cuda_replay_command(command_buffer, i, execution, stream,
                                          (uint64_t)table);
    if (!status && recording->commands[i].type != HALO_HAL_COMMAND_BARRIER) {
      issue->enqueued = true;
    }
  }
  if (table) cu->cuMemFreeAsync(table, stream);
  return status;
}

//===----------------------------------------------------------------------===//
// Issue / retire
//===----------------------------------------------------------------------===//

halo_status_t halo_hal_cuda_command_buffer_issue(
    halo_hal_command_buffer_t *base_command_buffer,
    const halo_hal_execution_t *execution, CUstream stream,
    const halo_hal_cuda_store_t *stores, uint32_t store_count,
    halo_hal_cuda_task_t *waiter, halo_hal_cuda_issue_t *out_issue,
    bool *out_parked) {
  memset(out_issue, 0, sizeof(*out_issue));
  *out_parked = false;
  halo_hal_cuda_command_buffer_t *command_buffer =
      (halo_hal_cuda_command_buffer_t *)base_command_buffer;
  out_issue->command_buffer = base_command_buffer;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_command_buffer_realize(command_buffer));
  // More than a ticket holds: they follow on the stream (the node as asked).
  if (store_count > HALO_HAL_CUDA_GRAPH_STORES_MAX) store_count = 0;
  if (command_buffer->use_graph) {
    return halo_hal_cuda_issue_graph(command_buffer, execution, stream, stores,
                                     store_count, waiter, out_issue,
                                     out_parked);
  }
  return halo_hal_cuda_issue_replay(command_buffer, execution, stream,
                                    out_issue);
}

bool halo_hal_cuda_command_buffer_issues_at_once(
    halo_hal_command_buffer_t *base_command_buffer) {
  halo_hal_cuda_command_buffer_t *command_buffer =
      (halo_hal_cuda_command_buffer_t *)base_command_buffer;
  if (!command_buffer->realized) return false;
  if (!command_buffer->use_graph) return true;
  pthread_mutex_lock(&command_buffer->mutex);
  // One not kept for a woken execution, none parked before it.
  bool free_instance = !command_buffer->parked.head &&
                       command_buffer->free_count > command_buffer->promised;
  pthread_mutex_unlock(&command_buffer->mutex);
  return free_instance;
}

void halo_hal_cuda_command_buffer_forgo(
    halo_hal_command_buffer_t *base_command_buffer,
    halo_hal_cuda_task_t *waiter) {
  if (!waiter->promised) return;
  halo_hal_cuda_command_buffer_t *command_buffer =
      (halo_hal_cuda_command_buffer_t *)base_command_buffer;
  pthread_mutex_lock(&command_buffer->mutex);
  waiter->promised = false;
  --command_buffer->promised;
  // What was kept for it goes to the next in line, or is idle now: an
  // execution of another recording waiting for room may have it destroyed.
  halo_hal_cuda_instance_wake_locked(command_buffer);
  halo_hal_cuda_graph_wake(command_buffer->device);
}

void halo_hal_cuda_command_buffer_retire(halo_hal_cuda_issue_t *issue) {
  if (!issue->instance) return;
  halo_hal_cuda_command_buffer_t *command_buffer =
      (halo_hal_cuda_command_buffer_t *)issue->command_buffer;
  halo_hal_cuda_instance_give(command_buffer, issue->instance);
  issue->instance = NULL;
}

int64_t halo_hal_cuda_command_buffer_expected_ns(
    const halo_hal_command_buffer_t *command_buffer) {
  const halo_hal_cuda_command_buffer_t *cuda =
      (const halo_hal_cuda_command_buffer_t *)command_buffer;
  return atomic_load_explicit(&cuda->expected_ns, memory_order_relaxed);
}

void halo_hal_cuda_command_buffer_record_duration(
    halo_hal_command_buffer_t *command_buffer, int64_t duration_ns) {
  halo_hal_cuda_command_buffer_t *cuda =
      (halo_hal_cuda_command_buffer_t *)command_buffer;
  atomic_store_explicit(&cuda->expected_ns, duration_ns > 0 ? duration_ns : 1,
                        memory_order_relaxed);
}
