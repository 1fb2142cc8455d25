// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The device-wide bound on the graph instances' device memory (config key
// cuda-graph-bytes, device->graph_bytes_limit): halo's estimate of what
// one instance of a recording takes on the device, and, under the device's
// graph_mutex, the bytes and instances of every recording counted against
// the bound, with the command buffers holding instances (the holders, in
// the order they first held one). An execution that needs a new instance
// reserves its bytes on the submission thread (halo_hal_cuda_graph_reserve);
// past the bound the idle instances of the device's other recordings are
// destroyed if enough of them can go (taken out of their pools under the
// mutex, destroyed with it dropped, their bytes taken off once they are
// gone: the driver's teardown may wait for the device, and the usage
// queries and the reaper need the mutex); with still no room it waits for
// its recording's own instances, or, when its recording has none, on the
// device's line of executions waiting for room.
//
// The line is first come, first served. Each time an instance is given
// back or bytes go back, the wake task runs its waiters again, one at a
// time from the first (halo_hal_cuda_graph_wake_run): the one in its turn
// tries as any reservation does, and the first that finds no room keeps
// its place, the others waiting behind it for the next wake. While the
// line holds executions, every other reservation waits behind them, even
// where it would fit: one whose recording has instances waits for those,
// one whose recording has none joins the line; none destroys an idle
// instance for itself. So room that comes back goes to the oldest waiter (else
// the executions after it, each fitting where it does not, could take it again
// and again, and it failed after HALO_HAL_CUDA_GRAPH_ROOM_WAIT_NS). Executions
// that reuse their recording's free instances need no room and do not wait: a
// waiter whose room is held by instances their recordings keep reusing still
// fails after that long. The usage queries
// (halo_hal_cuda_device_graph_usage, _room_waits) serve the device's
// query_usage and the tests.
//
// The pool of one recording's instances (take, give, park) is
// cuda_command_buffer.c's; this file reads the pools of the holders (under
// each one's mutex) to trim them.
#include "hal/cuda/cuda_graph_memory.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "common/clock.h"
#include "common/list.h"
#include "common/log.h"

//===----------------------------------------------------------------------===//
// halo's estimate of one instance (any thread, no driver call)
//===----------------------------------------------------------------------===//

// What one graph instance takes on the device, by the driver's own
// allocations for it (not the graph's host objects), measured on an H200
// (driver 580; bench/probes/graph_memory.cu, docs/performance.md): about
// 100 KiB an instance, 103-120 KiB a node that shares its stage with others
// (independent nodes run concurrently), 2.5 KiB a node alone in its stage
// (a chain), linear in the number of instances; fills and copies as much as
// dispatches. A dispatch's kernel parameters add to its node: 2 KiB a node
// with 1 KiB of them, 10 KiB with 4 KiB, 43 KiB with 8 KiB in a chain.
// halo's estimate rounds up: 5 bytes a parameter byte.
#define HALO_HAL_CUDA_INSTANCE_BASE_BYTES (128ull << 10)
#define HALO_HAL_CUDA_CONCURRENT_NODE_BYTES (120ull << 10)
#define HALO_HAL_CUDA_SERIAL_NODE_BYTES (4ull << 10)
#define HALO_HAL_CUDA_PARAMETER_BYTE_BYTES 5ull
// An execution whose recording has no instance waits for room in the bound
// while other recordings' instances are in use (or executions wait before
// it), trying again as each comes back; a try this long after its first
// wait that finds no room fails it (halo_hal_cuda_graph_wait_locked).
#define HALO_HAL_CUDA_GRAPH_ROOM_WAIT_NS 1000000000ll

static uint64_t halo_hal_cuda_stage_bytes(uint32_t commands, uint32_t nodes,
                                          uint64_t parameter_bytes) {
  return nodes * (commands > 1 ? HALO_HAL_CUDA_CONCURRENT_NODE_BYTES
                               : HALO_HAL_CUDA_SERIAL_NODE_BYTES) +
         parameter_bytes * HALO_HAL_CUDA_PARAMETER_BYTE_BYTES;
}

// halo's estimate of one graph instance of |command_buffer| (its argument
// values laid out): the base, each stage's nodes (a dispatch_indirect's
// two: its grid setter and the dispatch) and their kernel parameters, the
// store node and the device binding table.
uint64_t halo_hal_cuda_instance_bytes(
    const halo_hal_cuda_command_buffer_t *command_buffer) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  uint64_t bytes =
      HALO_HAL_CUDA_INSTANCE_BASE_BYTES + HALO_HAL_CUDA_SERIAL_NODE_BYTES;
  if (command_buffer->uses_binding_table) {
    bytes += (uint64_t)recording->binding_capacity * sizeof(uint64_t);
  }
  uint32_t commands = 0, nodes = 0;
  uint64_t parameter_bytes = 0;
  for (uint32_t i = 0; i < recording->command_count; ++i) {
    uint32_t type = recording->commands[i].type;
    if (type == HALO_HAL_COMMAND_BARRIER) {
      bytes += halo_hal_cuda_stage_bytes(commands, nodes, parameter_bytes);
      commands = nodes = 0;
      parameter_bytes = 0;
      continue;
    }
    ++commands;
    nodes += type == HALO_HAL_COMMAND_DISPATCH_INDIRECT ? 2 : 1;
    if (type == HALO_HAL_COMMAND_DISPATCH ||
        type == HALO_HAL_COMMAND_DISPATCH_INDIRECT) {
      parameter_bytes += command_buffer->command_value_sizes[i];
    }
  }
  return bytes + halo_hal_cuda_stage_bytes(commands, nodes, parameter_bytes);
}

//===----------------------------------------------------------------------===//
// The graph instances' device memory (the device's graph_mutex)
//===----------------------------------------------------------------------===//

// |count| of |command_buffer|'s instances are gone (or were never built):
// their bytes go back, and the command buffer leaves the holders when it
// has none left (|count| 0: only that).
void halo_hal_cuda_graph_release_locked(
    halo_hal_cuda_command_buffer_t *command_buffer, uint32_t count) {
  halo_hal_cuda_device_t *device = command_buffer->device;
  device->graph_bytes -= count * command_buffer->instance_bytes;
  device->graph_instance_count -= count;
  if (!command_buffer->holding || command_buffer->all_instances) return;
  halo_list_remove(&device->graph_holders, &command_buffer->holder_link);
  command_buffer->holding = false;
}

// The submission thread's turn through the device's waiters
// (halo_hal_cuda_graph_wake_run): the waiter it runs again now, which
// reserves ahead of those still in line, and whether it went back to the
// line (first in it).
static _Thread_local struct {
  halo_hal_cuda_task_t *turn;
  bool waits;
} halo__graph_retry;

// Submission thread: the device's wake task (halo_hal_cuda_graph_wake)
// runs the executions waiting for room in the bound again, first come
// first served: each in its turn, here rather than posted, taken off the
// line while the others stay in it, so that no reservation made meanwhile
// (its queue's executions held behind it, run after it) goes ahead of
// them. Until one finds no room: it keeps its place first in line, and
// the others wait behind it for the next wake. On the submission thread,
// like every reserve, so that no reserve is half way when the line
// changes.
static void halo_hal_cuda_graph_wake_run(halo_hal_cuda_task_t *task) {
  halo_hal_cuda_device_t *device =
      (halo_hal_cuda_device_t *)((char *)task - offsetof(halo_hal_cuda_device_t,
                                                         graph_wake_task));
  atomic_store(&device->graph_wake_posted, false);
  for (;;) {
    pthread_mutex_lock(&device->graph_mutex);
    halo_hal_cuda_task_t *waiter =
        halo_hal_cuda_tasks_pop(&device->graph_waiters);
    if (waiter) atomic_fetch_sub(&device->graph_waiter_count, 1);
    pthread_mutex_unlock(&device->graph_mutex);
    if (!waiter) break;
    halo__graph_retry.turn = waiter;
    halo__graph_retry.waits = false;
    waiter->run(waiter);  // owns the task from here on
    bool waits = halo__graph_retry.waits;
    halo__graph_retry.turn = NULL;
    if (waits) break;
  }
}

// Any thread, no driver call and no lock taken (a host function gives
// instances back): where executions wait for room in the bound (or one is
// deciding whether to), posts the device's wake task, once until it runs.
void halo_hal_cuda_graph_wake(halo_hal_cuda_device_t *device) {
  if (!atomic_load(&device->graph_waiter_count)) return;
  if (atomic_exchange(&device->graph_wake_posted, true)) return;
  device->graph_wake_task.run = halo_hal_cuda_graph_wake_run;
  halo_hal_cuda_thread_post(&device->submission, &device->graph_wake_task);
}

uint64_t halo_hal_cuda_device_graph_room_waits(halo_hal_cuda_device_t *device) {
  pthread_mutex_lock(&device->graph_mutex);
  uint64_t waits = device->graph_room_waits;
  pthread_mutex_unlock(&device->graph_mutex);
  return waits;
}

void halo_hal_cuda_device_graph_usage(halo_hal_cuda_device_t *device,
                                      uint64_t *out_bytes,
                                      uint32_t *out_instances) {
  pthread_mutex_lock(&device->graph_mutex);
  *out_bytes = device->graph_bytes;
  *out_instances = device->graph_instance_count;
  pthread_mutex_unlock(&device->graph_mutex);
}

//===----------------------------------------------------------------------===//
// Reserving room (submission thread): trimming, waiting
//===----------------------------------------------------------------------===//

// Under |holder|'s mutex: its free instances that may go (none kept for a
// woken execution, none while one is parked).
static uint32_t halo_hal_cuda_graph_spare(
    const halo_hal_cuda_command_buffer_t *holder) {
  return !holder->parked.head && holder->free_count > holder->promised
             ? holder->free_count - holder->promised
             : 0;
}

// The device's graph_mutex held: whether |need| more bytes would fit once
// the spare instances of the device's recordings other than
// |command_buffer| went; |out_busy|: their instances that may not go (in
// use, being created, or kept for parked executions).
static bool halo_hal_cuda_graph_room_after_trim(
    halo_hal_cuda_command_buffer_t *command_buffer, uint64_t need,
    uint32_t *out_busy) {
  halo_hal_cuda_device_t *device = command_buffer->device;
  uint64_t spare_bytes = 0;
  uint32_t busy = 0;
  for (halo_list_link_t *link = device->graph_holders.head; link;
       link = link->next) {
    halo_hal_cuda_command_buffer_t *holder =
        HALO_LIST_ENTRY(link, halo_hal_cuda_command_buffer_t, holder_link);
    if (holder == command_buffer) continue;
    pthread_mutex_lock(&holder->mutex);
    uint32_t spare = halo_hal_cuda_graph_spare(holder);
    busy += holder->instance_count - spare;
    spare_bytes += (uint64_t)spare * holder->instance_bytes;
    pthread_mutex_unlock(&holder->mutex);
  }
  *out_busy = busy;
  return device->graph_bytes - spare_bytes + need <= device->graph_bytes_limit;
}

// The idle instances a trim took from their pools, to be destroyed with no
// lock held (halo_hal_cuda_graph_trim_finish): linked by all_next, their
// count and bytes, still counted in the device's bound until they are gone.
typedef struct halo_hal_cuda_graph_trim_t {
  halo_hal_cuda_graph_instance_t *gone;
  uint32_t count;
  uint64_t bytes;
} halo_hal_cuda_graph_trim_t;

// Submission thread, the device's graph_mutex held: takes idle instances
// of the device's other recordings out of their pools (the holders in the
// order they first held one, the oldest free ones of each, none kept for a
// woken execution or wanted by a parked one) into |out_trim| until |need|
// more bytes would fit in the bound once they are gone, and none if that
// many cannot go. Out of their pools and their recordings' lists, no
// execution takes them and the reaper does not see them; their staging
// slots stay with their command buffers, and a holder left with none
// leaves the holders. Their bytes still count: the caller destroys them
// with the mutex dropped (the driver's teardown may wait for the device,
// and the mutex serves the usage queries and the reaper meanwhile), then
// takes their bytes off. Returns the other recordings' instances that may
// not go, as it saw them (in use, being created, or kept for parked
// executions).
static uint32_t halo_hal_cuda_graph_trim_locked(
    halo_hal_cuda_command_buffer_t *command_buffer, uint64_t need,
    halo_hal_cuda_graph_trim_t *out_trim) {
  halo_hal_cuda_device_t *device = command_buffer->device;
  uint64_t limit = device->graph_bytes_limit;
  memset(out_trim, 0, sizeof(*out_trim));
  // Nothing goes unless enough can go: destroyed for nothing, an idle
  // instance would only be built again.
  uint32_t busy = 0;
  if (!halo_hal_cuda_graph_room_after_trim(command_buffer, need, &busy)) {
    return busy;
  }
  uint64_t left = device->graph_bytes;
  halo_list_link_t *link = device->graph_holders.head;
  while (link && left + need > limit) {
    halo_hal_cuda_command_buffer_t *holder =
        HALO_LIST_ENTRY(link, halo_hal_cuda_command_buffer_t, holder_link);
    link = link->next;  // before |holder| leaves the list
    if (holder == command_buffer) continue;
    pthread_mutex_lock(&holder->mutex);
    uint32_t spare = halo_hal_cuda_graph_spare(holder);
    while (spare > 0 && left + need > limit) {
      halo_hal_cuda_graph_instance_t *instance =
          holder->free_instances[0].instance;
      memmove(&holder->free_instances[0], &holder->free_instances[1],
              (holder->free_count - 1) * sizeof(holder->free_instances[0]));
      --holder->free_count;
      --holder->instance_count;
      --spare;
      halo_hal_cuda_graph_instance_t **slot = &holder->all_instances;
      while (*slot != instance) slot = &(*slot)->all_next;
      *slot = instance->all_next;
      halo_hal_cuda_staging_give(holder, instance->staging);
      instance->staging = NULL;
      instance->all_next = out_trim->gone;
      out_trim->gone = instance;
      ++out_trim->count;
      out_trim->bytes += holder->instance_bytes;
      left -= holder->instance_bytes;
    }
    pthread_mutex_unlock(&holder->mutex);
    halo_hal_cuda_graph_release_locked(holder, 0);
  }
  return busy;
}

// Submission thread, the device's graph_mutex not held: destroys what
// |trim| took (no command buffer is read: the reaper may have freed
// theirs).
static void halo_hal_cuda_graph_trim_finish(
    halo_hal_cuda_device_t *device, const halo_hal_cuda_graph_trim_t *trim) {
  halo_hal_cuda_graph_instance_t *gone = trim->gone;
  while (gone) {
    halo_hal_cuda_graph_instance_t *after = gone->all_next;
    halo_hal_cuda_instance_destroy(device, gone);
    gone = after;
  }
}

// Submission thread, the device's graph_mutex held (and the device's
// waiter count raised before the look that found no room:
// halo_hal_cuda_graph_reserve), no room for an instance of
// |command_buffer|, which has none: whether |waiter| waits for room (put
// last on the device's waiters, or back first where it was run again in
// its |turn|). It does while there is something to wait for (|wait_for|): other
// recordings' instances busy at the trim's look (in use, or kept for their
// parked executions), or executions already in line (each of which waits for
// such instances). Each comes back through halo_hal_cuda_instance_give (or is
// let go by halo_hal_cuda_command_buffer_forgo), which posts the wake task, as
// do a failed creation and a reaped recording giving their bytes back; one that
// came back after the look saw the raised count and posts it once this
// task is done. Not where there is nothing to wait for, or on a try
// HALO_HAL_CUDA_GRAPH_ROOM_WAIT_NS or more after the first wait
// (*out_waited).
static bool halo_hal_cuda_graph_wait_locked(
    halo_hal_cuda_command_buffer_t *command_buffer,
    halo_hal_cuda_task_t *waiter, bool turn, bool wait_for, bool *out_waited) {
  halo_hal_cuda_device_t *device = command_buffer->device;
  int64_t now = halo_clock_now_ns();
  *out_waited = waiter->room_since_ns &&
                now - waiter->room_since_ns >= HALO_HAL_CUDA_GRAPH_ROOM_WAIT_NS;
  if (!wait_for || *out_waited) return false;
  if (!waiter->room_since_ns) waiter->room_since_ns = now;
  if (turn) {
    // Its place, before the ones that came after it.
    halo_hal_cuda_tasks_push_front(&device->graph_waiters, waiter);
    halo__graph_retry.waits = true;
  } else {
    halo_hal_cuda_tasks_push(&device->graph_waiters, waiter);
  }
  ++device->graph_room_waits;
  return true;
}

// Submission thread, with the right to create an instance of
// |command_buffer| (halo_hal_cuda_instance_take) for |waiter|: reserves its
// bytes in the device's bound, destroying other recordings' idle instances
// to make room if need be; while executions wait for room, none is
// reserved (nor destroyed) for a later one: it waits behind them (for its
// recording's own instances where it has some). |out_used|: the bytes
// taken, reserved or not; |out_waited|: NONE after waiting for room as
// long as it may.
halo_hal_cuda_graph_room_t halo_hal_cuda_graph_reserve(
    halo_hal_cuda_command_buffer_t *command_buffer,
    halo_hal_cuda_task_t *waiter, uint64_t *out_used, bool *out_waited) {
  halo_hal_cuda_device_t *device = command_buffer->device;
  uint64_t need = command_buffer->instance_bytes;
  uint64_t limit = device->graph_bytes_limit;
  pthread_mutex_lock(&device->graph_mutex);
  // One larger than the bound never fits: nothing is destroyed for it, and
  // it waits for nothing.
  bool fits = need <= limit;
  bool reached = fits && device->graph_bytes + need > limit;
  // Executions wait for room: they go first, but for the one whose turn it
  // is (halo_hal_cuda_graph_wake_run), which is first (its turn is taken
  // here, once).
  bool turn = waiter == halo__graph_retry.turn;
  if (turn) halo__graph_retry.turn = NULL;
  bool line = fits && !turn && device->graph_waiters.head;
  uint64_t taken = device->graph_bytes;
  uint32_t instances = device->graph_instance_count;
  bool log = reached && halo_clock_due(&device->graph_logged_ns,
                                       halo_clock_now_ns(), 60000000000ll);
  // Raised before the trim: an instance given back from here on posts the
  // device's waiters (halo_hal_cuda_graph_wake), this one among them if it
  // waits (halo_hal_cuda_graph_wait_locked).
  bool counted = reached || line;
  if (counted) atomic_fetch_add(&device->graph_waiter_count, 1);
  halo_hal_cuda_graph_trim_t trim = {0};
  uint32_t busy = reached && !line ? halo_hal_cuda_graph_trim_locked(
                                         command_buffer, need, &trim)
                                   : 0;
  if (trim.count) {
    // Only this thread adds bytes: the room stays while the mutex is
    // dropped.
    pthread_mutex_unlock(&device->graph_mutex);
    halo_hal_cuda_graph_trim_finish(device, &trim);
    pthread_mutex_lock(&device->graph_mutex);
    device->graph_bytes -= trim.bytes;
    device->graph_instance_count -= trim.count;
  }
  halo_hal_cuda_graph_room_t room = HALO_HAL_CUDA_GRAPH_ROOM_NONE;
  *out_waited = false;
  if (fits && !line && device->graph_bytes <= limit - need) {
    device->graph_bytes += need;
    ++device->graph_instance_count;
    if (!command_buffer->holding) {
      // Last of the holders: trimming takes the oldest holders' first.
      command_buffer->holding = true;
      halo_list_push_back(&device->graph_holders, &command_buffer->holder_link);
    }
    room = HALO_HAL_CUDA_GRAPH_ROOM_RESERVED;
  } else {
    pthread_mutex_lock(&command_buffer->mutex);
    // Besides the right to create that this execution holds.
    bool own = command_buffer->instance_count > 1;
    pthread_mutex_unlock(&command_buffer->mutex);
    if (own) {
      room = HALO_HAL_CUDA_GRAPH_ROOM_WAIT;
    } else if (counted &&
               halo_hal_cuda_graph_wait_locked(command_buffer, waiter, turn,
                                               busy > 0 || line, out_waited)) {
      room = HALO_HAL_CUDA_GRAPH_ROOM_WAIT_OTHERS;
    }
  }
  // A waiter stays counted until the wake task takes it off the line.
  if (counted && room != HALO_HAL_CUDA_GRAPH_ROOM_WAIT_OTHERS) {
    atomic_fetch_sub(&device->graph_waiter_count, 1);
  }
  if (room != HALO_HAL_CUDA_GRAPH_ROOM_WAIT_OTHERS) waiter->room_since_ns = 0;
  *out_used = device->graph_bytes;
  pthread_mutex_unlock(&device->graph_mutex);
  if (log) {
    HALO_LOG_INFO(
        "CUDA device %u: graph instances reached cuda-graph-bytes (%llu of "
        "%llu KiB in %u instances, one more needs %llu KiB): idle instances "
        "of other recordings are destroyed to make room, and executions may "
        "wait for their recording's own (logged at most once a minute)",
        device->ordinal, (unsigned long long)(taken >> 10),
        (unsigned long long)(limit >> 10), instances,
        (unsigned long long)(need >> 10));
  }
  return room;
}
