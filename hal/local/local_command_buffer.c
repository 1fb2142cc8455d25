// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Local command buffers: a recording plus its dispatches' entry functions,
// resolved once at prepare; and the interpreter that runs an execution of
// one on a worker (fill, copy, update, dispatch, dispatch_indirect,
// barrier), spreading a dispatch's workgroups over the pool.
//
// The daemon has validated the recording and the execution's binding table;
// prepare still checks the recording's structure (indices, data ranges,
// slots) and execution checks every resolved address and bound range, so a
// malformed input fails the execution instead of crashing the daemon.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "common/tsan.h"
#include "hal/local/local_device.h"

typedef struct halo_hal_local_command_buffer_t {
  halo_hal_command_buffer_t base;
  // Parallel to recording.commands: the entry of each dispatch, else NULL.
  halo_hal_local_entry_fn *entries;
  // The most any one dispatch needs: argument pointers, value bytes.
  uint32_t max_arg_count;
  uint32_t max_value_bytes;
  bool uses_binding_table;
} halo_hal_local_command_buffer_t;

static const halo_hal_command_buffer_vtable_t
    halo_hal_local_command_buffer_vtable;

// Each argument value gets its own slot aligned for any scalar or vector
// type a kernel may read it as (constants are packed in recording->data).
#define HALO_HAL_LOCAL_VALUE_ALIGNMENT 16u

static uint32_t halo_hal_local_value_bytes(const halo_hal_dispatch_arg_t *arg) {
  uint32_t size = arg->kind == HALO_HAL_ARG_CONSTANT ? arg->data_size : 8;
  return (size + HALO_HAL_LOCAL_VALUE_ALIGNMENT - 1) &
         ~(HALO_HAL_LOCAL_VALUE_ALIGNMENT - 1);
}

//===----------------------------------------------------------------------===//
// Prepare
//===----------------------------------------------------------------------===//

// The structure is checked by halo_hal_recording_check_command; here only
// what the local driver derives: entry functions, the largest argument list.
static halo_status_t halo_hal_local_check_command(
    halo_hal_local_command_buffer_t *command_buffer, uint32_t index) {
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  HALO_RETURN_IF_ERROR(halo_hal_recording_check_command(recording, index));
  const halo_hal_command_t *command = &recording->commands[index];
  if (command->type != HALO_HAL_COMMAND_DISPATCH &&
      command->type != HALO_HAL_COMMAND_DISPATCH_INDIRECT) {
    return NULL;
  }
  uint32_t value_bytes = 0;
  for (uint32_t i = 0; i < command->arg_count; ++i) {
    const halo_hal_dispatch_arg_t *arg =
        &recording->args[command->arg_first + i];
    if (arg->kind == HALO_HAL_ARG_BINDING_TABLE) {
      command_buffer->uses_binding_table = true;
    }
    value_bytes += halo_hal_local_value_bytes(arg);
  }
  halo_status_t status = halo_hal_local_executable_entry(
      command->executable, command->entry_ordinal,
      &command_buffer->entries[index]);
  if (status) {
    return halo_status_annotate(status, "command %u (%s)", index,
                                halo_hal_command_type_name(command->type));
  }
  if (command->arg_count > command_buffer->max_arg_count) {
    command_buffer->max_arg_count = command->arg_count;
  }
  if (value_bytes > command_buffer->max_value_bytes) {
    command_buffer->max_value_bytes = value_bytes;
  }
  return NULL;
}

static void halo_hal_local_command_buffer_destroy(
    halo_hal_command_buffer_t *base_command_buffer) {
  halo_hal_local_command_buffer_t *command_buffer =
      (halo_hal_local_command_buffer_t *)base_command_buffer;
  halo_hal_recording_deinitialize(&command_buffer->base.recording);
  free(command_buffer->entries);
  free(command_buffer);
}

halo_status_t halo_hal_local_command_buffer_prepare(
    halo_hal_recording_t *recording,
    halo_hal_command_buffer_t **out_command_buffer) {
  *out_command_buffer = NULL;
  if (recording->command_count && !recording->commands) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "recording of %u commands without commands",
                            recording->command_count);
  }
  halo_hal_local_command_buffer_t *command_buffer =
      calloc(1, sizeof(*command_buffer));
  halo_hal_local_entry_fn *entries =
      calloc(recording->command_count ? recording->command_count : 1,
             sizeof(*entries));
  if (!command_buffer || !entries) {
    free(command_buffer);
    free(entries);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  command_buffer->base.vtable = &halo_hal_local_command_buffer_vtable;
  command_buffer->entries = entries;
  // Checked in place; the recording stays the caller's until this succeeds.
  command_buffer->base.recording = *recording;
  for (uint32_t i = 0; i < recording->command_count; ++i) {
    halo_status_t status = halo_hal_local_check_command(command_buffer, i);
    if (status) {
      free(entries);
      free(command_buffer);
      return status;
    }
  }
  memset(recording, 0, sizeof(*recording));
  *out_command_buffer = &command_buffer->base;
  return NULL;
}

bool halo_hal_local_command_buffer_isa(
    const halo_hal_command_buffer_t *command_buffer) {
  return command_buffer &&
         command_buffer->vtable == &halo_hal_local_command_buffer_vtable;
}

static const halo_hal_command_buffer_vtable_t
    halo_hal_local_command_buffer_vtable = {
        .destroy = halo_hal_local_command_buffer_destroy,
};

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

// What one execution needs while it runs (one worker, commands in order).
typedef struct halo_hal_local_run_t {
  const halo_hal_local_command_buffer_t *command_buffer;
  const halo_hal_execution_t *execution;
  int32_t priority;
  halo_hal_local_worker_t *worker;
  uint32_t index;  // of the command running
  // One block: argument pointers, argument values, binding table.
  void **args;
  uint8_t *values;
  uint64_t *binding_table;
} halo_hal_local_run_t;

static halo_status_t halo_hal_local_run_error(const halo_hal_local_run_t *run,
                                              halo_status_code_t code,
                                              const char *what) {
  const halo_hal_command_t *command =
      &run->command_buffer->base.recording.commands[run->index];
  return halo_status_make(code, "command %u (%s): %s", run->index,
                          halo_hal_command_type_name(command->type), what);
}

// The address of |ref| under the execution's bindings, checking that
// |length| bytes from it lie inside the binding (|length| 0: the address
// only). 0 with an error if the slot is unbound or too short.
static halo_status_t halo_hal_local_run_resolve(
    const halo_hal_local_run_t *run, const halo_hal_buffer_ref_t *ref,
    const char *role, uint64_t length, uint64_t *out_address) {
  *out_address = 0;
  const halo_hal_execution_t *execution = run->execution;
  const halo_hal_command_t *command =
      &run->command_buffer->base.recording.commands[run->index];
  const char *name = halo_hal_command_type_name(command->type);
  if (ref->slot == HALO_HAL_SLOT_DIRECT) {
    if (ref->address == 0) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "command %u (%s): %s has a null address",
                              run->index, name, role);
    }
    *out_address = ref->address;
    return NULL;
  }
  if (ref->slot >= execution->binding_count || !execution->bindings ||
      execution->bindings[ref->slot].address == 0) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "command %u (%s): %s: binding slot %u is unbound",
                            run->index, name, role, ref->slot);
  }
  const halo_hal_binding_t *binding = &execution->bindings[ref->slot];
  if (length && (ref->offset > binding->length ||
                 length > binding->length - ref->offset)) {
    return halo_status_make(HALO_STATUS_OUT_OF_RANGE,
                            "command %u (%s): %s: [%llu, +%llu) does not fit "
                            "binding slot %u of %llu bytes",
                            run->index, name, role,
                            (unsigned long long)ref->offset,
                            (unsigned long long)length, ref->slot,
                            (unsigned long long)binding->length);
  }
  *out_address = halo_hal_buffer_ref_resolve(ref, execution->bindings);
  return NULL;
}

// Device work (fills, copies, updates, kernels and the counts of an
// indirect dispatch) reads and writes device memory, which is the
// client's: two executions that write one buffer without a semaphore
// between them race as they would on a GPU (local queues are unordered),
// and a client may read a buffer while work writes it. ThreadSanitizer
// models threads on a CPU, not a device, so in TSan builds a worker's
// accesses to device memory are left out between these two (its locks and
// every access outside them are tracked; ASan still catches freed memory).
#define HALO_HAL_LOCAL_DEVICE_ACCESS_BEGIN() HALO_TSAN_IGNORE_BEGIN()
#define HALO_HAL_LOCAL_DEVICE_ACCESS_END() HALO_TSAN_IGNORE_END()

static halo_status_t halo_hal_local_run_fill(
    halo_hal_local_run_t *run, const halo_hal_command_t *command) {
  uint64_t address;
  HALO_RETURN_IF_ERROR(halo_hal_local_run_resolve(
      run, &command->target, "target", command->target.length, &address));
  const uint8_t *pattern =
      run->command_buffer->base.recording.data + command->data_offset;
  uint8_t *target = (uint8_t *)(uintptr_t)address;
  size_t length = (size_t)command->target.length;
  if (command->data_size == 1) {
    HALO_HAL_LOCAL_DEVICE_ACCESS_BEGIN();
    memset(target, pattern[0], length);
    HALO_HAL_LOCAL_DEVICE_ACCESS_END();
    return NULL;
  }
  // The pattern repeats from the target's first byte; 64 is a multiple of
  // every pattern size, so whole blocks keep the phase. A length that is not
  // a multiple of the pattern (the daemon rejects it) ends mid-pattern.
  uint8_t block[64];
  for (size_t i = 0; i < sizeof(block); i += command->data_size) {
    memcpy(block + i, pattern, command->data_size);
  }
  HALO_HAL_LOCAL_DEVICE_ACCESS_BEGIN();
  size_t done = 0;
  while (length - done >= sizeof(block)) {
    memcpy(target + done, block, sizeof(block));
    done += sizeof(block);
  }
  memcpy(target + done, block, length - done);
  HALO_HAL_LOCAL_DEVICE_ACCESS_END();
  return NULL;
}

static halo_status_t halo_hal_local_run_copy(
    halo_hal_local_run_t *run, const halo_hal_command_t *command) {
  uint64_t source, target;
  HALO_RETURN_IF_ERROR(halo_hal_local_run_resolve(
      run, &command->source, "source", command->target.length, &source));
  HALO_RETURN_IF_ERROR(halo_hal_local_run_resolve(
      run, &command->target, "target", command->target.length, &target));
  HALO_HAL_LOCAL_DEVICE_ACCESS_BEGIN();
  memmove((void *)(uintptr_t)target, (const void *)(uintptr_t)source,
          (size_t)command->target.length);
  HALO_HAL_LOCAL_DEVICE_ACCESS_END();
  return NULL;
}

static halo_status_t halo_hal_local_run_update(
    halo_hal_local_run_t *run, const halo_hal_command_t *command) {
  uint64_t target;
  HALO_RETURN_IF_ERROR(halo_hal_local_run_resolve(
      run, &command->target, "target", command->data_size, &target));
  HALO_HAL_LOCAL_DEVICE_ACCESS_BEGIN();
  memcpy((void *)(uintptr_t)target,
         run->command_buffer->base.recording.data + command->data_offset,
         command->data_size);
  HALO_HAL_LOCAL_DEVICE_ACCESS_END();
  return NULL;
}

// A dispatch whose workgroups several workers share. Participants claim
// chunks of workgroup indices; the owner (the execution's worker) waits for
// every claimed chunk to finish before the next command. Helper tasks that
// run late find no work left and only drop their reference, so the object
// is reference-counted (owner + each helper) and never touches the
// execution after the owner moves on.
typedef struct halo_hal_local_dispatch_t halo_hal_local_dispatch_t;

typedef struct halo_hal_local_dispatch_helper_t {
  halo_hal_local_task_t task;  // first: the pool hands this back
  halo_hal_local_dispatch_t *dispatch;
} halo_hal_local_dispatch_helper_t;

struct halo_hal_local_dispatch_t {
  atomic_uint references;
  atomic_uint_fast64_t next;  // first workgroup index not yet claimed
  atomic_uint_fast64_t done;  // workgroups finished
  uint64_t total;
  uint64_t chunk;
  pthread_mutex_t mutex;
  pthread_cond_t finished_cond;
  bool finished;  // done == total (under |mutex|)
  atomic_bool shared_memory_failed;
  // Read by participants only while they hold a claimed chunk.
  halo_hal_local_entry_fn entry;
  halo_dispatch_state_t state;  // template: workgroup_id unset
  uint32_t helper_count;
  halo_hal_local_dispatch_helper_t helpers[];
};

static void halo_hal_local_dispatch_release(
    halo_hal_local_dispatch_t *dispatch) {
  if (atomic_fetch_sub_explicit(&dispatch->references, 1,
                                memory_order_acq_rel) != 1) {
    return;
  }
  pthread_cond_destroy(&dispatch->finished_cond);
  pthread_mutex_destroy(&dispatch->mutex);
  free(dispatch);
}

// Runs workgroups [first, first + count) of the dispatch described by
// |entry| and |state| (a template) on |worker|.
static bool halo_hal_local_run_workgroups(halo_hal_local_entry_fn entry,
                                          const halo_dispatch_state_t *state,
                                          uint64_t first, uint64_t count,
                                          halo_hal_local_worker_t *worker) {
  halo_dispatch_state_t local = *state;
  if (state->shared_memory_bytes) {
    local.shared_memory =
        halo_hal_local_worker_scratch(worker, state->shared_memory_bytes);
    if (!local.shared_memory) return false;
  }
  uint64_t x_count = state->workgroup_count[0];
  uint64_t xy_count = x_count * state->workgroup_count[1];
  for (uint64_t i = first; i < first + count; ++i) {
    local.workgroup_id[0] = (uint32_t)(i % x_count);
    local.workgroup_id[1] =
        (uint32_t)((i / x_count) % state->workgroup_count[1]);
    local.workgroup_id[2] = (uint32_t)(i / xy_count);
    HALO_HAL_LOCAL_DEVICE_ACCESS_BEGIN();
    entry(&local);
    HALO_HAL_LOCAL_DEVICE_ACCESS_END();
  }
  return true;
}

// Claims and runs chunks until none is left; true if this participant
// finished the last workgroup.
static bool halo_hal_local_dispatch_participate(
    halo_hal_local_dispatch_t *dispatch, halo_hal_local_worker_t *worker) {
  bool last = false;
  for (;;) {
    uint64_t first = atomic_fetch_add_explicit(&dispatch->next, dispatch->chunk,
                                               memory_order_relaxed);
    if (first >= dispatch->total) break;
    uint64_t count = dispatch->total - first < dispatch->chunk
                         ? dispatch->total - first
                         : dispatch->chunk;
    if (!halo_hal_local_run_workgroups(dispatch->entry, &dispatch->state, first,
                                       count, worker)) {
      // Counted as done so that the owner does not wait forever; the owner
      // fails the execution.
      atomic_store_explicit(&dispatch->shared_memory_failed, true,
                            memory_order_relaxed);
    }
    // Release: the workgroups' writes happen before the owner's next
    // command, which acquires |done| (through the mutex below).
    if (atomic_fetch_add_explicit(&dispatch->done, count,
                                  memory_order_acq_rel) +
            count ==
        dispatch->total) {
      last = true;
    }
  }
  if (last) {
    pthread_mutex_lock(&dispatch->mutex);
    dispatch->finished = true;
    pthread_cond_signal(&dispatch->finished_cond);
    pthread_mutex_unlock(&dispatch->mutex);
  }
  return last;
}

static void halo_hal_local_dispatch_helper_run(
    halo_hal_local_task_t *task, halo_hal_local_worker_t *worker) {
  halo_hal_local_dispatch_helper_t *helper =
      (halo_hal_local_dispatch_helper_t *)task;
  halo_hal_local_dispatch_t *dispatch = helper->dispatch;
  halo_hal_local_dispatch_participate(dispatch, worker);
  halo_hal_local_dispatch_release(dispatch);
}

// Runs every workgroup of a dispatch, in parallel where the pool allows.
static halo_status_t halo_hal_local_run_workgroups_parallel(
    halo_hal_local_run_t *run, halo_hal_local_entry_fn entry,
    const halo_dispatch_state_t *state, uint64_t total) {
  halo_hal_local_worker_pool_t *pool = run->worker->pool;
  uint32_t threads = halo_hal_local_worker_pool_thread_count(pool);
  uint64_t helper_count = threads > 1 ? threads - 1 : 0;
  if (helper_count > total - 1) helper_count = total - 1;
  if (helper_count == 0) {
    if (!halo_hal_local_run_workgroups(entry, state, 0, total, run->worker)) {
      return halo_hal_local_run_error(run, HALO_STATUS_RESOURCE_EXHAUSTED,
                                      "cannot allocate shared memory");
    }
    return NULL;
  }
  halo_hal_local_dispatch_t *dispatch = calloc(
      1, sizeof(*dispatch) + helper_count * sizeof(dispatch->helpers[0]));
  if (!dispatch) {
    return halo_hal_local_run_error(run, HALO_STATUS_RESOURCE_EXHAUSTED,
                                    "cannot allocate the dispatch's state");
  }
  // Chunks of about a quarter of each participant's share balance uneven
  // workgroups without claiming one workgroup at a time.
  uint64_t chunk = total / ((helper_count + 1) * 4);
  dispatch->chunk = chunk ? chunk : 1;
  dispatch->total = total;
  dispatch->entry = entry;
  dispatch->state = *state;
  pthread_mutex_init(&dispatch->mutex, NULL);
  pthread_cond_init(&dispatch->finished_cond, NULL);
  atomic_init(&dispatch->next, 0);
  atomic_init(&dispatch->done, 0);
  atomic_init(&dispatch->shared_memory_failed, false);
  atomic_init(&dispatch->references, 1);
  for (uint64_t i = 0; i < helper_count; ++i) {
    halo_hal_local_dispatch_helper_t *helper = &dispatch->helpers[i];
    helper->task.run = halo_hal_local_dispatch_helper_run;
    helper->task.priority = run->priority;
    helper->dispatch = dispatch;
    atomic_fetch_add_explicit(&dispatch->references, 1, memory_order_relaxed);
    halo_status_t status =
        halo_hal_local_worker_pool_submit(pool, &helper->task);
    if (status) {
      // Fewer helpers: the owner does their share.
      halo_status_free(status);
      atomic_fetch_sub_explicit(&dispatch->references, 1, memory_order_relaxed);
      break;
    }
    ++dispatch->helper_count;
  }
  if (!halo_hal_local_dispatch_participate(dispatch, run->worker)) {
    pthread_mutex_lock(&dispatch->mutex);
    while (!dispatch->finished) {
      pthread_cond_wait(&dispatch->finished_cond, &dispatch->mutex);
    }
    pthread_mutex_unlock(&dispatch->mutex);
  }
  bool failed = atomic_load_explicit(&dispatch->shared_memory_failed,
                                     memory_order_relaxed);
  halo_hal_local_dispatch_release(dispatch);
  if (failed) {
    return halo_hal_local_run_error(run, HALO_STATUS_RESOURCE_EXHAUSTED,
                                    "cannot allocate shared memory");
  }
  return NULL;
}

static halo_status_t halo_hal_local_run_dispatch(
    halo_hal_local_run_t *run, const halo_hal_command_t *command) {
  const halo_hal_recording_t *recording = &run->command_buffer->base.recording;
  uint32_t counts[3] = {command->grid[0], command->grid[1], command->grid[2]};
  if (command->type == HALO_HAL_COMMAND_DISPATCH_INDIRECT) {
    uint64_t address;
    HALO_RETURN_IF_ERROR(halo_hal_local_run_resolve(
        run, &command->workgroup_count, "workgroup_count", sizeof(counts),
        &address));
    HALO_HAL_LOCAL_DEVICE_ACCESS_BEGIN();
    memcpy(counts, (const void *)(uintptr_t)address, sizeof(counts));
    HALO_HAL_LOCAL_DEVICE_ACCESS_END();
    if (counts[0] > HALO_HAL_LOCAL_MAX_INDIRECT_COUNT ||
        counts[1] > HALO_HAL_LOCAL_MAX_INDIRECT_COUNT ||
        counts[2] > HALO_HAL_LOCAL_MAX_INDIRECT_COUNT) {
      const char *name = halo_hal_command_type_name(command->type);
      return halo_status_make(HALO_STATUS_OUT_OF_RANGE,
                              "command %u (%s): workgroup count %ux%ux%u "
                              "read from the buffer exceeds %u per dimension",
                              run->index, name, counts[0], counts[1], counts[2],
                              HALO_HAL_LOCAL_MAX_INDIRECT_COUNT);
    }
  }
  uint64_t total;
  if (__builtin_mul_overflow((uint64_t)counts[0], (uint64_t)counts[1],
                             &total) ||
      __builtin_mul_overflow(total, (uint64_t)counts[2], &total)) {
    return halo_hal_local_run_error(run, HALO_STATUS_OUT_OF_RANGE,
                                    "workgroup count overflows 64 bits");
  }
  if (total == 0) return NULL;

  // Argument values, each in its own aligned slot; args[i] points at it.
  uint8_t *value = run->values;
  for (uint32_t i = 0; i < command->arg_count; ++i) {
    const halo_hal_dispatch_arg_t *arg =
        &recording->args[command->arg_first + i];
    run->args[i] = value;
    switch (arg->kind) {
      case HALO_HAL_ARG_BUFFER: {
        char role[32];
        snprintf(role, sizeof(role), "argument %u", i);
        uint64_t address;
        HALO_RETURN_IF_ERROR(
            halo_hal_local_run_resolve(run, &arg->ref, role, 0, &address));
        void *pointer = (void *)(uintptr_t)address;
        memcpy(value, &pointer, sizeof(pointer));
        break;
      }
      case HALO_HAL_ARG_CONSTANT:
        memcpy(value, recording->data + arg->data_offset, arg->data_size);
        break;
      case HALO_HAL_ARG_BINDING_TABLE:
        memcpy(value, &run->binding_table, sizeof(run->binding_table));
        break;
    }
    value += halo_hal_local_value_bytes(arg);
  }

  halo_dispatch_state_t state;
  memset(&state, 0, sizeof(state));
  state.args = run->args;
  state.arg_count = command->arg_count;
  for (int d = 0; d < 3; ++d) {
    state.workgroup_count[d] = counts[d];
    state.workgroup_size[d] = command->block[d];
  }
  state.shared_memory_bytes = command->shared_memory_bytes;
  return halo_hal_local_run_workgroups_parallel(
      run, run->command_buffer->entries[run->index], &state, total);
}

halo_status_t halo_hal_local_command_buffer_run(
    const halo_hal_execution_t *execution, int32_t priority,
    halo_hal_local_worker_t *worker) {
  const halo_hal_local_command_buffer_t *command_buffer =
      (const halo_hal_local_command_buffer_t *)execution->command_buffer;
  const halo_hal_recording_t *recording = &command_buffer->base.recording;
  halo_hal_local_run_t run = {
      .command_buffer = command_buffer,
      .execution = execution,
      .priority = priority,
      .worker = worker,
  };
  uint32_t table_count =
      command_buffer->uses_binding_table ? recording->binding_capacity : 0;
  // Pointers first, rounded so that the values after them stay aligned.
  size_t pointer_bytes = (command_buffer->max_arg_count * sizeof(void *) +
                          HALO_HAL_LOCAL_VALUE_ALIGNMENT - 1) &
                         ~(size_t)(HALO_HAL_LOCAL_VALUE_ALIGNMENT - 1);
  size_t block_bytes = pointer_bytes + command_buffer->max_value_bytes +
                       table_count * sizeof(uint64_t);
  void *block = NULL;
  if (block_bytes) {
    if (posix_memalign(&block, HALO_HAL_LOCAL_VALUE_ALIGNMENT, block_bytes)) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "local execution: cannot allocate %zu bytes of "
                              "argument state",
                              block_bytes);
    }
    run.args = block;
    run.values = (uint8_t *)block + pointer_bytes;
    if (table_count) {
      run.binding_table =
          (uint64_t *)(run.values + command_buffer->max_value_bytes);
      for (uint32_t i = 0; i < table_count; ++i) {
        run.binding_table[i] =
            i < execution->binding_count && execution->bindings
                ? execution->bindings[i].address
                : 0;
      }
    }
  }
  halo_status_t status = NULL;
  for (uint32_t i = 0; i < recording->command_count && !status; ++i) {
    const halo_hal_command_t *command = &recording->commands[i];
    run.index = i;
    switch (command->type) {
      case HALO_HAL_COMMAND_FILL:
        status = halo_hal_local_run_fill(&run, command);
        break;
      case HALO_HAL_COMMAND_COPY:
        status = halo_hal_local_run_copy(&run, command);
        break;
      case HALO_HAL_COMMAND_UPDATE:
        status = halo_hal_local_run_update(&run, command);
        break;
      case HALO_HAL_COMMAND_DISPATCH:
      case HALO_HAL_COMMAND_DISPATCH_INDIRECT:
        status = halo_hal_local_run_dispatch(&run, command);
        break;
      case HALO_HAL_COMMAND_BARRIER:
        // Commands run in order on this worker, and a dispatch returns only
        // after all of its workgroups have.
        break;
    }
  }
  free(block);
  return status;
}
