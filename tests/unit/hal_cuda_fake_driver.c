// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The fake CUDA driver (see the header).
#include "tests/unit/hal_cuda_fake_driver.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hal/cuda/cuda_command_buffer.h"

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

struct CUfunc_st {
  // NULL: a built-in kernel, the grid setter or (|store|) the completion
  // store kernel.
  const fake_kernel_t *kernel;
  bool store;
};

typedef enum fake_node_type_e {
  FAKE_NODE_KERNEL,
  FAKE_NODE_MEMSET,
  FAKE_NODE_MEMCPY,
  FAKE_NODE_EMPTY,
} fake_node_type_t;

struct CUgraphNode_st {
  fake_node_type_t type;
  struct CUgraphNode_st *origin;  // in exec copies: the graph's node
  CUfunction function;
  uint32_t grid[3];
  uint32_t block[3];
  uint8_t *blob;  // parameter values
  bool updatable;
  bool enabled;
  CUDA_MEMSET_NODE_PARAMS memset;
  CUDA_MEMCPY3D memcpy;
};

struct CUgraph_st {
  struct CUgraphNode_st **nodes;
  int count;
  int capacity;
  bool updatable;
};

struct CUgraphExec_st {
  struct CUgraphNode_st *nodes;  // copies, index-aligned with the graph's
  int count;
  bool updatable;
  bool needs_upload;
  int pending;  // launches enqueued and not finished
  // Destroyed with launches pending (counted: halo must not, but after a
  // sticky error it may): as the driver, freed after the last of them
  // (fake_exec_free), not under it.
  bool destroyed;
};

static void fake_exec_free(struct CUgraphExec_st *exec) {
  for (int i = 0; i < exec->count; ++i) free(exec->nodes[i].blob);
  free(exec->nodes);
  free(exec);
}

struct CUevent_st {
  uint64_t recorded;
  uint64_t completed;
  unsigned flags;  // cuEventCreate's
  // Records and waits enqueued and not finished, and whether it was
  // destroyed: as the driver, a destroyed event's pending operations still
  // run; it is freed after the last (fake_event_release).
  int ops;
  bool destroyed;
};

typedef enum fake_op_type_e {
  FAKE_OP_KERNEL,
  FAKE_OP_MEMSET,
  FAKE_OP_MEMCPY,
  FAKE_OP_STORE,
  FAKE_OP_RECORD,
  FAKE_OP_WAIT,
  FAKE_OP_HOST,
  FAKE_OP_GRAPH,
  FAKE_OP_FREE,
} fake_op_type_t;

typedef struct fake_op_t {
  struct fake_op_t *next;
  fake_op_type_t type;
  struct CUgraphNode_st node;  // KERNEL / MEMSET / MEMCPY (a copy)
  uint8_t *source_copy;        // MEMCPY from pageable memory
  uint64_t address;            // STORE, FREE
  uint64_t value;
  CUevent event;  // RECORD / WAIT
  uint64_t sequence;
  CUhostFn function;  // HOST
  void *data;
  CUgraphExec exec;  // GRAPH
  struct CUgraphNode_st *snapshot;
  int snapshot_count;
} fake_op_t;

struct CUstream_st {
  pthread_t thread;
  fake_op_t *head;
  fake_op_t *tail;
  bool destroyed;
  uint64_t enqueued;
  uint64_t done;
  uint64_t used_generation;  // the counters' generation it was last used in
};

struct CUlib_st {
  int unused;
};
struct CUmod_st {
  bool builtin;
  bool store;  // the completion store kernel's module
};
struct CUctx_st {
  int unused;
};

#define FAKE_MAX_PINNED 1024
#define FAKE_MAX_STORES 1024

static struct {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  CUresult sticky;
  const fake_kernel_t *kernels;
  uint32_t kernel_count;
  struct CUfunc_st *functions;
  struct CUfunc_st builtin;
  struct CUfunc_st store_builtin;
  bool store_kernel_fails;  // fake_driver_fail_store_kernel
  struct CUlib_st library;
  fake_counters_t counters;
  uint64_t counters_generation;  // bumped by every reset (streams_used)
  int live_streams;
  struct {
    void *pointer;
    size_t size;
  } pinned[FAKE_MAX_PINNED];
  int pinned_count;
  struct {
    uint64_t address;
    uint64_t value;
  } stores[FAKE_MAX_STORES];
  int store_count;
  // Operations enqueued so far, and how long an idle stream thread spins
  // for the next before it sleeps (fake_driver_set_stream_spin).
  _Atomic uint64_t enqueued;
  _Atomic int64_t stream_spin_ns;
  // cuGraphExecDestroy's time (fake_driver_set_exec_destroy_ns) and the
  // calls running now (fake_driver_exec_destroys_running).
  _Atomic int64_t exec_destroy_ns;
  atomic_int exec_destroys_running;
} fake = {.mutex = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static halo_hal_cuda_symbols_t fake_symbols;

// The graph snapshot a stream thread runs (for the grid setter).
static __thread struct CUgraphNode_st *fake_current_snapshot;
static __thread int fake_current_snapshot_count;

static CUresult fake_sticky(void) {
  pthread_mutex_lock(&fake.mutex);
  CUresult result = fake.sticky;
  pthread_mutex_unlock(&fake.mutex);
  return result;
}

#define FAKE_RETURN_IF_STICKY()            \
  do {                                     \
    CUresult fake__sticky = fake_sticky(); \
    if (fake__sticky) return fake__sticky; \
  } while (0)

void fake_driver_set_sticky(CUresult result) {
  pthread_mutex_lock(&fake.mutex);
  if (!result || !fake.sticky) fake.sticky = result;
  pthread_cond_broadcast(&fake.cond);
  pthread_mutex_unlock(&fake.mutex);
}

fake_counters_t fake_driver_counters(void) {
  pthread_mutex_lock(&fake.mutex);
  fake_counters_t counters = fake.counters;
  pthread_mutex_unlock(&fake.mutex);
  return counters;
}

void fake_driver_reset_counters(void) {
  pthread_mutex_lock(&fake.mutex);
  memset(&fake.counters, 0, sizeof(fake.counters));
  ++fake.counters_generation;
  fake.store_count = 0;
  pthread_mutex_unlock(&fake.mutex);
}

void fake_driver_quiesce(void) {
  pthread_mutex_lock(&fake.mutex);
  while (fake.live_streams > 0) pthread_cond_wait(&fake.cond, &fake.mutex);
  pthread_mutex_unlock(&fake.mutex);
}

static uint32_t fake_param_count(CUfunction function) {
  if (function->store) return 1;
  return function->kernel ? function->kernel->param_count : 4;
}
static uint32_t fake_param_size(CUfunction function, uint32_t index) {
  if (function->kernel) return function->kernel->param_sizes[index];
  static const uint32_t sizes[4] = {8, 8, 4, 4};
  return function->store ? 8 : sizes[index];
}

static uint8_t *fake_blob(CUfunction function, void **params) {
  size_t total = 0;
  for (uint32_t i = 0; i < fake_param_count(function); ++i) {
    total += fake_param_size(function, i);
  }
  uint8_t *blob = calloc(total + 1, 1);
  size_t offset = 0;
  for (uint32_t i = 0; i < fake_param_count(function); ++i) {
    memcpy(blob + offset, params[i], fake_param_size(function, i));
    offset += fake_param_size(function, i);
  }
  return blob;
}

static uint8_t *fake_blob_copy(CUfunction function, const uint8_t *blob) {
  size_t total = 0;
  for (uint32_t i = 0; i < fake_param_count(function); ++i) {
    total += fake_param_size(function, i);
  }
  uint8_t *copy = malloc(total + 1);
  memcpy(copy, blob, total);
  return copy;
}

static void fake_node_copy(struct CUgraphNode_st *to,
                           const struct CUgraphNode_st *from) {
  *to = *from;
  if (from->type == FAKE_NODE_KERNEL) {
    to->blob = fake_blob_copy(from->function, from->blob);
  }
}

//===----------------------------------------------------------------------===//
// Running operations (stream threads)
//===----------------------------------------------------------------------===//

// The built-in grid setter of dispatch_indirect: (device node, counts,
// max x, max y/z).
static void fake_set_grid(void **args) {
  struct CUgraphNode_st *target = *(struct CUgraphNode_st **)args[0];
  const uint32_t *counts = *(const uint32_t **)args[1];
  uint32_t max_x = *(const uint32_t *)args[2];
  uint32_t max_yz = *(const uint32_t *)args[3];
  bool ok = counts[0] && counts[1] && counts[2] && counts[0] <= max_x &&
            counts[1] <= max_yz && counts[2] <= max_yz;
  for (int i = 0; i < fake_current_snapshot_count; ++i) {
    struct CUgraphNode_st *node = &fake_current_snapshot[i];
    if (node->origin != target) continue;
    if (ok) memcpy(node->grid, counts, sizeof(node->grid));
    node->enabled = ok;
  }
}

// A 64-bit GPU store (cuStreamWriteValue64, the store kernel): counted,
// checked against the last store at its address, made.
static void fake_store(uint64_t address, uint64_t value) {
  pthread_mutex_lock(&fake.mutex);
  ++fake.counters.stores;
  for (int i = fake.store_count - 1; i >= 0; --i) {
    if (fake.stores[i].address != address) continue;
    if (fake.stores[i].value > value) ++fake.counters.store_regressions;
    break;
  }
  if (fake.store_count < FAKE_MAX_STORES) {
    fake.stores[fake.store_count].address = address;
    fake.stores[fake.store_count].value = value;
    ++fake.store_count;
  }
  pthread_mutex_unlock(&fake.mutex);
  __atomic_store_n((uint64_t *)(uintptr_t)address, value, __ATOMIC_RELEASE);
}

// The built-in completion store kernel: (ticket), one thread, at most
// HALO_HAL_CUDA_GRAPH_STORES_MAX stores.
static void fake_store_signals(void **args) {
  pthread_mutex_lock(&fake.mutex);
  ++fake.counters.store_node_runs;
  pthread_mutex_unlock(&fake.mutex);
  const uint64_t *ticket = *(const uint64_t **)args[0];
  uint64_t count = __atomic_load_n(&ticket[0], __ATOMIC_ACQUIRE);
  for (uint64_t i = 0; i < count && i < HALO_HAL_CUDA_GRAPH_STORES_MAX; ++i) {
    fake_store(__atomic_load_n(&ticket[1 + 2 * i], __ATOMIC_RELAXED),
               __atomic_load_n(&ticket[2 + 2 * i], __ATOMIC_RELAXED));
    pthread_mutex_lock(&fake.mutex);
    ++fake.counters.graph_stores;
    pthread_mutex_unlock(&fake.mutex);
  }
}

static void fake_run_kernel(const struct CUgraphNode_st *node) {
  CUfunction function = node->function;
  void *args[8];
  size_t offset = 0;
  for (uint32_t i = 0; i < fake_param_count(function); ++i) {
    args[i] = node->blob + offset;
    offset += fake_param_size(function, i);
  }
  if (function->store) {
    fake_store_signals(args);
    return;
  }
  if (!function->kernel) {
    fake_set_grid(args);
    return;
  }
  uint64_t threads = (uint64_t)node->grid[0] * node->grid[1] * node->grid[2] *
                     node->block[0] * node->block[1] * node->block[2];
  function->kernel->run(args, threads);
}

static void fake_run_memset(const CUDA_MEMSET_NODE_PARAMS *params) {
  for (size_t i = 0; i < params->width; ++i) {
    if (params->elementSize == 1) {
      ((uint8_t *)(uintptr_t)params->dst)[i] = (uint8_t)params->value;
    } else if (params->elementSize == 2) {
      ((uint16_t *)(uintptr_t)params->dst)[i] = (uint16_t)params->value;
    } else {
      ((uint32_t *)(uintptr_t)params->dst)[i] = params->value;
    }
  }
}

static void fake_run_node(const struct CUgraphNode_st *node) {
  switch (node->type) {
    case FAKE_NODE_KERNEL:
      if (node->enabled) fake_run_kernel(node);
      break;
    case FAKE_NODE_MEMSET:
      fake_run_memset(&node->memset);
      break;
    case FAKE_NODE_MEMCPY:
      memmove((void *)(uintptr_t)node->memcpy.dstDevice,
              (const void *)(uintptr_t)node->memcpy.srcDevice,
              node->memcpy.WidthInBytes);
      break;
    case FAKE_NODE_EMPTY:
      break;
  }
}

static void fake_op_free(fake_op_t *op) {
  free(op->node.blob);
  free(op->source_copy);
  for (int i = 0; i < op->snapshot_count; ++i) free(op->snapshot[i].blob);
  free(op->snapshot);
  free(op);
}

// Runs |op| (the fake's mutex not held); false if a sticky error stops it.
static void fake_run_op(fake_op_t *op) {
  switch (op->type) {
    case FAKE_OP_KERNEL:
      fake_run_kernel(&op->node);
      break;
    case FAKE_OP_MEMSET:
      fake_run_memset(&op->node.memset);
      break;
    case FAKE_OP_MEMCPY:
      memmove((void *)(uintptr_t)op->node.memcpy.dstDevice,
              op->source_copy
                  ? op->source_copy
                  : (const void *)(uintptr_t)op->node.memcpy.srcDevice,
              op->node.memcpy.WidthInBytes);
      break;
    case FAKE_OP_STORE:
      fake_store(op->address, op->value);
      break;
    case FAKE_OP_HOST:
      op->function(op->data);
      pthread_mutex_lock(&fake.mutex);
      ++fake.counters.host_functions;
      pthread_mutex_unlock(&fake.mutex);
      break;
    case FAKE_OP_GRAPH:
      fake_current_snapshot = op->snapshot;
      fake_current_snapshot_count = op->snapshot_count;
      for (int i = 0; i < op->snapshot_count && !fake_sticky(); ++i) {
        fake_run_node(&op->snapshot[i]);
      }
      fake_current_snapshot = NULL;
      fake_current_snapshot_count = 0;
      break;
    case FAKE_OP_FREE:
      free((void *)(uintptr_t)op->address);
      break;
    default:
      break;
  }
}

static int64_t fake_now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

void fake_driver_set_stream_spin(int64_t ns) {
  atomic_store(&fake.stream_spin_ns, ns);
}

void fake_driver_set_exec_destroy_ns(int64_t ns) {
  atomic_store(&fake.exec_destroy_ns, ns);
}

int fake_driver_exec_destroys_running(void) {
  return atomic_load(&fake.exec_destroys_running);
}

// Under fake.mutex: one pending operation of |event| finished (or was
// never enqueued).
static void fake_event_release(CUevent event) {
  if (--event->ops == 0 && event->destroyed) free(event);
}

static void *fake_stream_main(void *arg) {
  struct CUstream_st *stream = arg;
  pthread_mutex_lock(&fake.mutex);
  for (;;) {
    bool spun = false;
    while (!stream->head && !stream->destroyed) {
      int64_t spin_ns = atomic_load(&fake.stream_spin_ns);
      if (spin_ns > 0 && !spun) {
        // As a GPU that is not asleep: the next operation starts at once.
        spun = true;
        uint64_t seen = atomic_load(&fake.enqueued);
        pthread_mutex_unlock(&fake.mutex);
        int64_t until = fake_now_ns() + spin_ns;
        while (atomic_load(&fake.enqueued) == seen && fake_now_ns() < until) {
          sched_yield();
        }
        pthread_mutex_lock(&fake.mutex);
        continue;
      }
      pthread_cond_wait(&fake.cond, &fake.mutex);
    }
    if (!stream->head) break;
    fake_op_t *op = stream->head;
    stream->head = op->next;
    if (!stream->head) stream->tail = NULL;
    if (op->type == FAKE_OP_WAIT) {
      while (op->event->completed < op->sequence && !fake.sticky) {
        pthread_cond_wait(&fake.cond, &fake.mutex);
      }
    }
    bool run = !fake.sticky;
    if (run && op->type == FAKE_OP_RECORD) {
      if (op->event->completed < op->sequence) {
        op->event->completed = op->sequence;
      }
    }
    pthread_mutex_unlock(&fake.mutex);
    if (run) fake_run_op(op);
    pthread_mutex_lock(&fake.mutex);
    struct CUgraphExec_st *freed = NULL;
    if (op->type == FAKE_OP_GRAPH && --op->exec->pending == 0 &&
        op->exec->destroyed) {
      freed = op->exec;
    }
    if (op->type == FAKE_OP_RECORD || op->type == FAKE_OP_WAIT) {
      fake_event_release(op->event);
    }
    ++stream->done;
    pthread_cond_broadcast(&fake.cond);
    pthread_mutex_unlock(&fake.mutex);
    fake_op_free(op);
    if (freed) fake_exec_free(freed);
    pthread_mutex_lock(&fake.mutex);
  }
  --fake.live_streams;
  pthread_cond_broadcast(&fake.cond);
  pthread_mutex_unlock(&fake.mutex);
  free(stream);
  return NULL;
}

static CUresult fake_enqueue(CUstream stream, fake_op_t *op) {
  if (!stream) {
    fake_op_free(op);
    return CUDA_ERROR_INVALID_HANDLE;  // halo never uses the legacy stream
  }
  pthread_mutex_lock(&fake.mutex);
  if (fake.sticky) {
    CUresult result = fake.sticky;
    pthread_mutex_unlock(&fake.mutex);
    fake_op_free(op);
    return result;
  }
  if (op->type == FAKE_OP_GRAPH) {
    if (op->exec->pending > 0) ++fake.counters.exec_overlaps;
    ++op->exec->pending;
  }
  if (stream->used_generation != fake.counters_generation) {
    stream->used_generation = fake.counters_generation;
    ++fake.counters.streams_used;
  }
  op->next = NULL;
  atomic_fetch_add(&fake.enqueued, 1);
  if (stream->tail) {
    stream->tail->next = op;
  } else {
    stream->head = op;
  }
  stream->tail = op;
  ++stream->enqueued;
  pthread_cond_broadcast(&fake.cond);
  pthread_mutex_unlock(&fake.mutex);
  return CUDA_SUCCESS;
}

static fake_op_t *fake_op_new(fake_op_type_t type) {
  fake_op_t *op = calloc(1, sizeof(*op));
  op->type = type;
  return op;
}

//===----------------------------------------------------------------------===//
// The API
//===----------------------------------------------------------------------===//

static CUresult fake_cuGetErrorName(CUresult error, const char **name) {
  switch (error) {
    case CUDA_SUCCESS:
      *name = "CUDA_SUCCESS";
      break;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      *name = "CUDA_ERROR_ILLEGAL_ADDRESS";
      break;
    case CUDA_ERROR_MPS_CLIENT_TERMINATED:
      *name = "CUDA_ERROR_MPS_CLIENT_TERMINATED";
      break;
    case CUDA_ERROR_NOT_READY:
      *name = "CUDA_ERROR_NOT_READY";
      break;
    case CUDA_ERROR_INVALID_VALUE:
      *name = "CUDA_ERROR_INVALID_VALUE";
      break;
    default:
      *name = "CUDA_ERROR_FAKE";
  }
  return CUDA_SUCCESS;
}

static CUresult fake_cuGetErrorString(CUresult error, const char **text) {
  *text = error == CUDA_ERROR_ILLEGAL_ADDRESS
              ? "an illegal memory access was encountered"
              : "(fake driver)";
  return CUDA_SUCCESS;
}

// The calling thread's current context, and the launches it made.
static _Thread_local CUcontext fake_current_context;
static _Thread_local int fake_thread_launches;

static CUresult fake_cuCtxSetCurrent(CUcontext context) {
  fake_current_context = context;
  return CUDA_SUCCESS;
}

static CUresult fake_cuCtxGetCurrent(CUcontext *context) {
  *context = fake_current_context;
  return CUDA_SUCCESS;
}

int fake_driver_thread_launches(void) {
  return fake_thread_launches;
}

// A launch needs a current context on the calling thread.
#define FAKE_RETURN_IF_NO_CONTEXT()                               \
  do {                                                            \
    if (!fake_current_context) return CUDA_ERROR_INVALID_CONTEXT; \
    ++fake_thread_launches;                                       \
  } while (0)

static CUresult fake_cuDeviceGetAttribute(int *value,
                                          CUdevice_attribute attribute,
                                          CUdevice device) {
  (void)device;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      *value = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      *value = 65535;
      break;
    default:
      *value = 0;
  }
  return CUDA_SUCCESS;
}

static CUresult fake_cuStreamCreateWithPriority(CUstream *out, unsigned flags,
                                                int priority) {
  (void)flags;
  (void)priority;
  FAKE_RETURN_IF_STICKY();
  struct CUstream_st *stream = calloc(1, sizeof(*stream));
  pthread_mutex_lock(&fake.mutex);
  ++fake.live_streams;
  ++fake.counters.streams_created;
  stream->used_generation = fake.counters_generation - 1;  // not used yet
  pthread_mutex_unlock(&fake.mutex);
  pthread_create(&stream->thread, NULL, fake_stream_main, stream);
  pthread_detach(stream->thread);
  *out = stream;
  return CUDA_SUCCESS;
}

// Like the driver: returns at once; the stream finishes its work first.
static CUresult fake_cuStreamDestroy(CUstream stream) {
  pthread_mutex_lock(&fake.mutex);
  stream->destroyed = true;
  pthread_cond_broadcast(&fake.cond);
  pthread_mutex_unlock(&fake.mutex);
  return CUDA_SUCCESS;
}

static CUresult fake_cuStreamSynchronize(CUstream stream) {
  pthread_mutex_lock(&fake.mutex);
  while (stream->done < stream->enqueued && !fake.sticky) {
    pthread_cond_wait(&fake.cond, &fake.mutex);
  }
  CUresult result = fake.sticky;
  pthread_mutex_unlock(&fake.mutex);
  return result;
}

// Like the driver: a sticky error first, then whether the work is done.
static CUresult fake_cuStreamQuery(CUstream stream) {
  pthread_mutex_lock(&fake.mutex);
  ++fake.counters.stream_queries;
  CUresult result = fake.sticky                       ? fake.sticky
                    : stream->done < stream->enqueued ? CUDA_ERROR_NOT_READY
                                                      : CUDA_SUCCESS;
  pthread_mutex_unlock(&fake.mutex);
  return result;
}

static CUresult fake_cuEventCreate(CUevent *out, unsigned flags) {
  FAKE_RETURN_IF_STICKY();
  *out = calloc(1, sizeof(struct CUevent_st));
  (*out)->flags = flags;
  return CUDA_SUCCESS;
}

static CUresult fake_cuEventDestroy(CUevent event) {
  pthread_mutex_lock(&fake.mutex);
  event->destroyed = true;
  if (event->ops == 0) free(event);
  pthread_mutex_unlock(&fake.mutex);
  return CUDA_SUCCESS;
}

static CUresult fake_cuEventRecord(CUevent event, CUstream stream) {
  fake_op_t *op = fake_op_new(FAKE_OP_RECORD);
  op->event = event;
  pthread_mutex_lock(&fake.mutex);
  op->sequence = ++event->recorded;
  ++event->ops;
  ++fake.counters.event_records;
  if (event->flags & CU_EVENT_BLOCKING_SYNC) ++fake.counters.blocking_records;
  pthread_mutex_unlock(&fake.mutex);
  CUresult result = fake_enqueue(stream, op);
  if (result != CUDA_SUCCESS) {
    pthread_mutex_lock(&fake.mutex);
    --event->recorded;
    fake_event_release(event);
    pthread_mutex_unlock(&fake.mutex);
  }
  return result;
}

static CUresult fake_cuEventQuery(CUevent event) {
  pthread_mutex_lock(&fake.mutex);
  CUresult result = fake.sticky ? fake.sticky
                    : event->completed >= event->recorded
                        ? CUDA_SUCCESS
                        : CUDA_ERROR_NOT_READY;
  pthread_mutex_unlock(&fake.mutex);
  return result;
}

static CUresult fake_cuEventSynchronize(CUevent event) {
  pthread_mutex_lock(&fake.mutex);
  if (!(event->flags & CU_EVENT_BLOCKING_SYNC)) ++fake.counters.spin_syncs;
  uint64_t target = event->recorded;
  while (event->completed < target && !fake.sticky) {
    pthread_cond_wait(&fake.cond, &fake.mutex);
  }
  CUresult result = fake.sticky;
  pthread_mutex_unlock(&fake.mutex);
  return result;
}

static CUresult fake_cuStreamWaitEvent(CUstream stream, CUevent event,
                                       unsigned flags) {
  (void)flags;
  fake_op_t *op = fake_op_new(FAKE_OP_WAIT);
  op->event = event;
  pthread_mutex_lock(&fake.mutex);
  op->sequence = event->recorded;
  ++event->ops;
  if (event->completed < event->recorded) ++fake.counters.stream_waits;
  pthread_mutex_unlock(&fake.mutex);
  CUresult result = fake_enqueue(stream, op);
  if (result != CUDA_SUCCESS) {
    pthread_mutex_lock(&fake.mutex);
    fake_event_release(event);
    pthread_mutex_unlock(&fake.mutex);
  }
  return result;
}

static CUresult fake_cuStreamWriteValue64(CUstream stream, CUdeviceptr address,
                                          cuuint64_t value, unsigned flags) {
  if (flags != CU_STREAM_WRITE_VALUE_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fake.mutex);
  ++fake.counters.write_values;
  pthread_mutex_unlock(&fake.mutex);
  fake_op_t *op = fake_op_new(FAKE_OP_STORE);
  op->address = address;
  op->value = value;
  return fake_enqueue(stream, op);
}

static CUresult fake_cuLaunchHostFunc(CUstream stream, CUhostFn function,
                                      void *data) {
  fake_op_t *op = fake_op_new(FAKE_OP_HOST);
  op->function = function;
  op->data = data;
  return fake_enqueue(stream, op);
}

static CUresult fake_cuLaunchKernel(CUfunction function, unsigned gx,
                                    unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned shared,
                                    CUstream stream, void **params,
                                    void **extra) {
  (void)shared;
  if (extra || !function) return CUDA_ERROR_INVALID_VALUE;
  FAKE_RETURN_IF_STICKY();
  FAKE_RETURN_IF_NO_CONTEXT();
  fake_op_t *op = fake_op_new(FAKE_OP_KERNEL);
  op->node.type = FAKE_NODE_KERNEL;
  op->node.function = function;
  op->node.grid[0] = gx;
  op->node.grid[1] = gy;
  op->node.grid[2] = gz;
  op->node.block[0] = bx;
  op->node.block[1] = by;
  op->node.block[2] = bz;
  op->node.enabled = true;
  op->node.blob = fake_blob(function, params);
  pthread_mutex_lock(&fake.mutex);
  ++fake.counters.kernel_launches;
  pthread_mutex_unlock(&fake.mutex);
  return fake_enqueue(stream, op);
}

static CUresult fake_memset(CUdeviceptr dst, uint32_t value, uint32_t size,
                            size_t count, CUstream stream) {
  fake_op_t *op = fake_op_new(FAKE_OP_MEMSET);
  op->node.memset.dst = dst;
  op->node.memset.value = value;
  op->node.memset.elementSize = size;
  op->node.memset.width = count;
  op->node.memset.height = 1;
  return fake_enqueue(stream, op);
}
static CUresult fake_cuMemsetD8Async(CUdeviceptr dst, unsigned char value,
                                     size_t count, CUstream stream) {
  return fake_memset(dst, value, 1, count, stream);
}
static CUresult fake_cuMemsetD16Async(CUdeviceptr dst, unsigned short value,
                                      size_t count, CUstream stream) {
  return fake_memset(dst, value, 2, count, stream);
}
static CUresult fake_cuMemsetD32Async(CUdeviceptr dst, unsigned int value,
                                      size_t count, CUstream stream) {
  return fake_memset(dst, value, 4, count, stream);
}

static bool fake_is_pinned(const void *pointer) {
  pthread_mutex_lock(&fake.mutex);
  bool pinned = false;
  for (int i = 0; i < fake.pinned_count && !pinned; ++i) {
    const uint8_t *start = fake.pinned[i].pointer;
    pinned = (const uint8_t *)pointer >= start &&
             (const uint8_t *)pointer < start + fake.pinned[i].size;
  }
  pthread_mutex_unlock(&fake.mutex);
  return pinned;
}

static CUresult fake_copy(CUdeviceptr dst, const void *src, size_t bytes,
                          bool snapshot, CUstream stream) {
  fake_op_t *op = fake_op_new(FAKE_OP_MEMCPY);
  op->node.memcpy.dstDevice = dst;
  op->node.memcpy.srcDevice = (CUdeviceptr)(uintptr_t)src;
  op->node.memcpy.WidthInBytes = bytes;
  if (snapshot) {
    op->source_copy = malloc(bytes + 1);
    memcpy(op->source_copy, src, bytes);
  }
  return fake_enqueue(stream, op);
}
static CUresult fake_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src,
                                   size_t bytes, CUstream stream) {
  return fake_copy(dst, (const void *)(uintptr_t)src, bytes, false, stream);
}
// Pageable sources are staged at the call; pinned ones read when it runs.
static CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src,
                                       size_t bytes, CUstream stream) {
  return fake_copy(dst, src, bytes, !fake_is_pinned(src), stream);
}
static CUresult fake_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes,
                                       CUstream stream) {
  return fake_copy((CUdeviceptr)(uintptr_t)dst, (const void *)(uintptr_t)src,
                   bytes, false, stream);
}

static CUresult fake_cuMemAllocAsync(CUdeviceptr *out, size_t bytes,
                                     CUstream stream) {
  (void)stream;
  FAKE_RETURN_IF_STICKY();
  *out = (CUdeviceptr)(uintptr_t)calloc(1, bytes ? bytes : 1);
  return CUDA_SUCCESS;
}
static CUresult fake_cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  fake_op_t *op = fake_op_new(FAKE_OP_FREE);
  op->address = pointer;
  CUresult result = fake_enqueue(stream, op);
  if (result != CUDA_SUCCESS) free((void *)(uintptr_t)pointer);
  return result;
}

static CUresult fake_cuMemAllocHost(void **out, size_t bytes) {
  FAKE_RETURN_IF_STICKY();
  void *pointer = calloc(1, bytes ? bytes : 1);
  pthread_mutex_lock(&fake.mutex);
  if (fake.pinned_count < FAKE_MAX_PINNED) {
    fake.pinned[fake.pinned_count].pointer = pointer;
    fake.pinned[fake.pinned_count].size = bytes;
    ++fake.pinned_count;
  }
  pthread_mutex_unlock(&fake.mutex);
  *out = pointer;
  return CUDA_SUCCESS;
}
static CUresult fake_cuMemFreeHost(void *pointer) {
  pthread_mutex_lock(&fake.mutex);
  for (int i = 0; i < fake.pinned_count; ++i) {
    if (fake.pinned[i].pointer != pointer) continue;
    fake.pinned[i] = fake.pinned[--fake.pinned_count];
    break;
  }
  pthread_mutex_unlock(&fake.mutex);
  free(pointer);
  return CUDA_SUCCESS;
}

static CUresult fake_cuMemHostRegister(void *pointer, size_t bytes,
                                       unsigned flags) {
  (void)pointer;
  (void)bytes;
  (void)flags;
  FAKE_RETURN_IF_STICKY();
  return CUDA_SUCCESS;
}
static CUresult fake_cuMemHostUnregister(void *pointer) {
  (void)pointer;
  return CUDA_SUCCESS;
}
static CUresult fake_cuMemHostGetDevicePointer(CUdeviceptr *out, void *pointer,
                                               unsigned flags) {
  (void)flags;
  *out = (CUdeviceptr)(uintptr_t)pointer;
  return CUDA_SUCCESS;
}

// ---- graphs

static CUresult fake_graph_add(CUgraph graph, struct CUgraphNode_st *node,
                               const CUgraphNode *dependencies, size_t count,
                               CUgraphNode *out) {
  // Dependencies come first (the order the fake runs nodes in).
  for (size_t i = 0; i < count; ++i) {
    bool found = false;
    for (int j = 0; j < graph->count && !found; ++j) {
      found = graph->nodes[j] == dependencies[i];
    }
    if (!found) {
      free(node->blob);
      free(node);
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (graph->count == graph->capacity) {
    graph->capacity = graph->capacity ? graph->capacity * 2 : 16;
    graph->nodes =
        realloc(graph->nodes, (size_t)graph->capacity * sizeof(*graph->nodes));
  }
  graph->nodes[graph->count++] = node;
  *out = node;
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphCreate(CUgraph *out, unsigned flags) {
  (void)flags;
  FAKE_RETURN_IF_STICKY();
  *out = calloc(1, sizeof(struct CUgraph_st));
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphDestroy(CUgraph graph) {
  for (int i = 0; i < graph->count; ++i) {
    free(graph->nodes[i]->blob);
    free(graph->nodes[i]);
  }
  free(graph->nodes);
  free(graph);
  return CUDA_SUCCESS;
}

static void fake_kernel_node_set(struct CUgraphNode_st *node,
                                 const CUDA_KERNEL_NODE_PARAMS *params) {
  free(node->blob);
  node->type = FAKE_NODE_KERNEL;
  node->function = params->func;
  node->grid[0] = params->gridDimX;
  node->grid[1] = params->gridDimY;
  node->grid[2] = params->gridDimZ;
  node->block[0] = params->blockDimX;
  node->block[1] = params->blockDimY;
  node->block[2] = params->blockDimZ;
  node->enabled = true;
  node->blob = fake_blob(params->func, params->kernelParams);
}

static CUresult fake_cuGraphAddKernelNode(
    CUgraphNode *out, CUgraph graph, const CUgraphNode *dependencies,
    size_t count, const CUDA_KERNEL_NODE_PARAMS *params) {
  FAKE_RETURN_IF_STICKY();
  if (!params->func || params->extra) return CUDA_ERROR_INVALID_VALUE;
  struct CUgraphNode_st *node = calloc(1, sizeof(*node));
  fake_kernel_node_set(node, params);
  return fake_graph_add(graph, node, dependencies, count, out);
}

static CUresult fake_cuGraphAddMemsetNode(CUgraphNode *out, CUgraph graph,
                                          const CUgraphNode *dependencies,
                                          size_t count,
                                          const CUDA_MEMSET_NODE_PARAMS *params,
                                          CUcontext context) {
  (void)context;
  FAKE_RETURN_IF_STICKY();
  if (params->height != 1 ||
      (params->elementSize != 1 && params->elementSize != 2 &&
       params->elementSize != 4)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  struct CUgraphNode_st *node = calloc(1, sizeof(*node));
  node->type = FAKE_NODE_MEMSET;
  node->memset = *params;
  return fake_graph_add(graph, node, dependencies, count, out);
}

static CUresult fake_cuGraphAddMemcpyNode(CUgraphNode *out, CUgraph graph,
                                          const CUgraphNode *dependencies,
                                          size_t count,
                                          const CUDA_MEMCPY3D *params,
                                          CUcontext context) {
  (void)context;
  FAKE_RETURN_IF_STICKY();
  if (params->srcMemoryType != CU_MEMORYTYPE_DEVICE ||
      params->dstMemoryType != CU_MEMORYTYPE_DEVICE || params->Height != 1 ||
      params->Depth != 1) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  struct CUgraphNode_st *node = calloc(1, sizeof(*node));
  node->type = FAKE_NODE_MEMCPY;
  node->memcpy = *params;
  return fake_graph_add(graph, node, dependencies, count, out);
}

static CUresult fake_cuGraphAddEmptyNode(CUgraphNode *out, CUgraph graph,
                                         const CUgraphNode *dependencies,
                                         size_t count) {
  FAKE_RETURN_IF_STICKY();
  struct CUgraphNode_st *node = calloc(1, sizeof(*node));
  node->type = FAKE_NODE_EMPTY;
  return fake_graph_add(graph, node, dependencies, count, out);
}

static CUresult fake_cuGraphKernelNodeSetParams(
    CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *params) {
  FAKE_RETURN_IF_STICKY();
  if (node->type != FAKE_NODE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  bool updatable = node->updatable;
  fake_kernel_node_set(node, params);
  node->updatable = updatable;
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphKernelNodeSetAttribute(
    CUgraphNode node, CUkernelNodeAttrID attribute,
    const CUkernelNodeAttrValue *value) {
  if (attribute != CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE ||
      node->type != FAKE_NODE_KERNEL ||
      value->deviceUpdatableKernelNode.deviceUpdatable != 1) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node->updatable = true;
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphKernelNodeGetAttribute(
    CUgraphNode node, CUkernelNodeAttrID attribute,
    CUkernelNodeAttrValue *value) {
  if (attribute != CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  memset(value, 0, sizeof(*value));
  value->deviceUpdatableKernelNode.deviceUpdatable = node->updatable;
  value->deviceUpdatableKernelNode.devNode =
      node->updatable ? (CUgraphDeviceNode)(void *)node : NULL;
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphInstantiateWithFlags(CUgraphExec *out,
                                                 CUgraph graph,
                                                 unsigned long long flags) {
  (void)flags;
  FAKE_RETURN_IF_STICKY();
  struct CUgraphExec_st *exec = calloc(1, sizeof(*exec));
  exec->count = graph->count;
  exec->nodes = calloc((size_t)graph->count + 1, sizeof(*exec->nodes));
  for (int i = 0; i < graph->count; ++i) {
    fake_node_copy(&exec->nodes[i], graph->nodes[i]);
    exec->nodes[i].origin = graph->nodes[i];
    if (graph->nodes[i]->updatable) exec->updatable = true;
  }
  exec->needs_upload = exec->updatable;
  pthread_mutex_lock(&fake.mutex);
  ++fake.counters.instantiations;
  pthread_mutex_unlock(&fake.mutex);
  *out = exec;
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphExecDestroy(CUgraphExec exec) {
  pthread_mutex_lock(&fake.mutex);
  bool pending = exec->pending > 0;
  if (pending) {
    ++fake.counters.destroyed_pending;
    exec->destroyed = true;  // the last launch's end frees it
  }
  pthread_mutex_unlock(&fake.mutex);
  int64_t ns = atomic_load(&fake.exec_destroy_ns);
  if (ns > 0) {
    // As a driver's teardown that waits for the device.
    atomic_fetch_add(&fake.exec_destroys_running, 1);
    struct timespec pause = {ns / 1000000000, ns % 1000000000};
    nanosleep(&pause, NULL);
    atomic_fetch_sub(&fake.exec_destroys_running, 1);
  }
  if (!pending) fake_exec_free(exec);
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphUpload(CUgraphExec exec, CUstream stream) {
  (void)stream;
  FAKE_RETURN_IF_STICKY();
  exec->needs_upload = false;
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  FAKE_RETURN_IF_STICKY();
  FAKE_RETURN_IF_NO_CONTEXT();
  if (exec->needs_upload) {
    pthread_mutex_lock(&fake.mutex);
    ++fake.counters.missing_uploads;
    pthread_mutex_unlock(&fake.mutex);
    return CUDA_ERROR_INVALID_VALUE;
  }
  fake_op_t *op = fake_op_new(FAKE_OP_GRAPH);
  op->exec = exec;
  op->snapshot_count = exec->count;
  op->snapshot = calloc((size_t)exec->count + 1, sizeof(*op->snapshot));
  for (int i = 0; i < exec->count; ++i) {
    fake_node_copy(&op->snapshot[i], &exec->nodes[i]);
  }
  pthread_mutex_lock(&fake.mutex);
  ++fake.counters.graph_launches;
  pthread_mutex_unlock(&fake.mutex);
  return fake_enqueue(stream, op);
}

static struct CUgraphNode_st *fake_exec_node(CUgraphExec exec,
                                             CUgraphNode node) {
  for (int i = 0; i < exec->count; ++i) {
    if (exec->nodes[i].origin == node) return &exec->nodes[i];
  }
  return NULL;
}

static void fake_count_set_params(void) {
  pthread_mutex_lock(&fake.mutex);
  ++fake.counters.exec_set_params;
  pthread_mutex_unlock(&fake.mutex);
}

static CUresult fake_cuGraphExecKernelNodeSetParams(
    CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *params) {
  FAKE_RETURN_IF_STICKY();
  struct CUgraphNode_st *copy = fake_exec_node(exec, node);
  if (!copy || copy->type != FAKE_NODE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  fake_kernel_node_set(copy, params);
  if (node->updatable) exec->needs_upload = true;
  fake_count_set_params();
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphNodeSetEnabled(CUgraphExec exec, CUgraphNode node,
                                           unsigned enabled) {
  FAKE_RETURN_IF_STICKY();
  struct CUgraphNode_st *copy = fake_exec_node(exec, node);
  if (!copy || copy->type != FAKE_NODE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  copy->enabled = enabled != 0;
  pthread_mutex_lock(&fake.mutex);
  ++fake.counters.node_toggles;
  pthread_mutex_unlock(&fake.mutex);
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphExecMemsetNodeSetParams(
    CUgraphExec exec, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *params,
    CUcontext context) {
  (void)context;
  FAKE_RETURN_IF_STICKY();
  struct CUgraphNode_st *copy = fake_exec_node(exec, node);
  if (!copy || copy->type != FAKE_NODE_MEMSET) return CUDA_ERROR_INVALID_VALUE;
  copy->memset = *params;
  fake_count_set_params();
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphExecMemcpyNodeSetParams(CUgraphExec exec,
                                                    CUgraphNode node,
                                                    const CUDA_MEMCPY3D *params,
                                                    CUcontext context) {
  (void)context;
  FAKE_RETURN_IF_STICKY();
  struct CUgraphNode_st *copy = fake_exec_node(exec, node);
  if (!copy || copy->type != FAKE_NODE_MEMCPY) return CUDA_ERROR_INVALID_VALUE;
  copy->memcpy = *params;
  fake_count_set_params();
  return CUDA_SUCCESS;
}

// ---- code

static CUresult fake_cuModuleLoadDataEx(CUmodule *out, const void *image,
                                        unsigned count, CUjit_option *options,
                                        void **values) {
  (void)count;
  (void)options;
  (void)values;
  FAKE_RETURN_IF_STICKY();
  // One module each, like the context's: halo never unloads them (they go
  // with the context).
  static struct CUmod_st module = {.builtin = true};
  static struct CUmod_st store_module = {.store = true};
  if (strstr((const char *)image, ".entry halo_store_signals")) {
    pthread_mutex_lock(&fake.mutex);
    bool fails = fake.store_kernel_fails;
    pthread_mutex_unlock(&fake.mutex);
    if (fails) return CUDA_ERROR_INVALID_PTX;
    *out = &store_module;
    return CUDA_SUCCESS;
  }
  if (!strstr((const char *)image, ".entry halo_indirect_set_grid")) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  *out = &module;
  return CUDA_SUCCESS;
}

static CUresult fake_cuModuleGetFunction(CUfunction *out, CUmodule module,
                                         const char *name) {
  if (module->store && strcmp(name, "halo_store_signals") == 0) {
    *out = &fake.store_builtin;
    return CUDA_SUCCESS;
  }
  if (!module->builtin || strcmp(name, "halo_indirect_set_grid") != 0) {
    return CUDA_ERROR_NOT_FOUND;
  }
  *out = &fake.builtin;
  return CUDA_SUCCESS;
}

void fake_driver_fail_store_kernel(bool fails) {
  pthread_mutex_lock(&fake.mutex);
  fake.store_kernel_fails = fails;
  pthread_mutex_unlock(&fake.mutex);
}

static CUresult fake_cuModuleUnload(CUmodule module) {
  (void)module;
  return CUDA_SUCCESS;
}

static CUresult fake_cuFuncGetAttribute(int *value, CUfunction_attribute attr,
                                        CUfunction function) {
  (void)attr;
  (void)function;
  *value = 48 * 1024;
  return CUDA_SUCCESS;
}

static CUresult fake_cuFuncSetAttribute(CUfunction function,
                                        CUfunction_attribute attr, int value) {
  (void)function;
  (void)attr;
  (void)value;
  return CUDA_SUCCESS;
}

void fake_driver_image(uint8_t out_image[FAKE_CUDA_IMAGE_SIZE]) {
  halo_fake_cuda_image(out_image, 0);
}

static CUresult fake_cuLibraryLoadData(CUlibrary *out, const void *code,
                                       CUjit_option *options, void **values,
                                       unsigned count,
                                       CUlibraryOption *library_options,
                                       void **library_values,
                                       unsigned library_count) {
  (void)options;
  (void)values;
  (void)count;
  (void)library_options;
  (void)library_values;
  (void)library_count;
  if (memcmp((const uint8_t *)code + 64, "halo-fake-library", 17) != 0) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  *out = &fake.library;
  return CUDA_SUCCESS;
}

static CUresult fake_cuLibraryUnload(CUlibrary library) {
  (void)library;
  return CUDA_SUCCESS;
}

static CUresult fake_cuLibraryGetModule(CUmodule *module, CUlibrary library) {
  (void)library;
  *module = (CUmodule)(void *)&fake.library;
  return CUDA_SUCCESS;
}

static CUresult fake_cuLibraryGetKernelCount(unsigned *count,
                                             CUlibrary library) {
  (void)library;
  *count = fake.kernel_count;
  return CUDA_SUCCESS;
}

static CUresult fake_cuLibraryEnumerateKernels(CUkernel *kernels,
                                               unsigned count,
                                               CUlibrary library) {
  (void)library;
  for (unsigned i = 0; i < count && i < fake.kernel_count; ++i) {
    kernels[i] = (CUkernel)(void *)&fake.functions[i];
  }
  return CUDA_SUCCESS;
}

static CUresult fake_cuKernelGetName(const char **name, CUkernel kernel) {
  *name = ((struct CUfunc_st *)(void *)kernel)->kernel->name;
  return CUDA_SUCCESS;
}

static CUresult fake_cuKernelGetFunction(CUfunction *out, CUkernel kernel) {
  *out = (struct CUfunc_st *)(void *)kernel;
  return CUDA_SUCCESS;
}

static CUresult fake_cuKernelGetParamInfo(CUkernel kernel, size_t index,
                                          size_t *offset, size_t *size) {
  const fake_kernel_t *definition =
      ((struct CUfunc_st *)(void *)kernel)->kernel;
  if (index >= definition->param_count) return CUDA_ERROR_INVALID_VALUE;
  size_t at = 0;
  for (size_t i = 0; i < index; ++i) at += definition->param_sizes[i];
  *offset = at;
  *size = definition->param_sizes[index];
  return CUDA_SUCCESS;
}

const halo_hal_cuda_symbols_t *fake_driver_initialize(
    const fake_kernel_t *kernels, uint32_t kernel_count) {
  fake.kernels = kernels;
  fake.kernel_count = kernel_count;
  fake.store_builtin.store = true;
  free(fake.functions);
  fake.functions = calloc(kernel_count + 1, sizeof(*fake.functions));
  for (uint32_t i = 0; i < kernel_count; ++i) {
    fake.functions[i].kernel = &kernels[i];
  }
  halo_hal_cuda_symbols_t *s = &fake_symbols;
  memset(s, 0, sizeof(*s));
  s->driver_version = 13000;
  s->cuGetErrorName = fake_cuGetErrorName;
  s->cuGetErrorString = fake_cuGetErrorString;
  s->cuCtxSetCurrent = fake_cuCtxSetCurrent;
  s->cuCtxGetCurrent = fake_cuCtxGetCurrent;
  s->cuDeviceGetAttribute = fake_cuDeviceGetAttribute;
  s->cuStreamCreateWithPriority = fake_cuStreamCreateWithPriority;
  s->cuStreamDestroy = fake_cuStreamDestroy;
  s->cuStreamSynchronize = fake_cuStreamSynchronize;
  s->cuStreamQuery = fake_cuStreamQuery;
  s->cuStreamWaitEvent = fake_cuStreamWaitEvent;
  s->cuStreamWriteValue64 = fake_cuStreamWriteValue64;
  s->cuLaunchHostFunc = fake_cuLaunchHostFunc;
  s->cuEventCreate = fake_cuEventCreate;
  s->cuEventDestroy = fake_cuEventDestroy;
  s->cuEventRecord = fake_cuEventRecord;
  s->cuEventQuery = fake_cuEventQuery;
  s->cuEventSynchronize = fake_cuEventSynchronize;
  s->cuLaunchKernel = fake_cuLaunchKernel;
  s->cuMemsetD8Async = fake_cuMemsetD8Async;
  s->cuMemsetD16Async = fake_cuMemsetD16Async;
  s->cuMemsetD32Async = fake_cuMemsetD32Async;
  s->cuMemcpyAsync = fake_cuMemcpyAsync;
  s->cuMemcpyHtoDAsync = fake_cuMemcpyHtoDAsync;
  s->cuMemcpyDtoHAsync = fake_cuMemcpyDtoHAsync;
  s->cuMemAllocAsync = fake_cuMemAllocAsync;
  s->cuMemFreeAsync = fake_cuMemFreeAsync;
  s->cuMemAllocHost = fake_cuMemAllocHost;
  s->cuMemFreeHost = fake_cuMemFreeHost;
  s->cuMemHostRegister = fake_cuMemHostRegister;
  s->cuMemHostUnregister = fake_cuMemHostUnregister;
  s->cuMemHostGetDevicePointer = fake_cuMemHostGetDevicePointer;
  s->cuGraphCreate = fake_cuGraphCreate;
  s->cuGraphDestroy = fake_cuGraphDestroy;
  s->cuGraphAddKernelNode = fake_cuGraphAddKernelNode;
  s->cuGraphAddMemsetNode = fake_cuGraphAddMemsetNode;
  s->cuGraphAddMemcpyNode = fake_cuGraphAddMemcpyNode;
  s->cuGraphAddEmptyNode = fake_cuGraphAddEmptyNode;
  s->cuGraphKernelNodeSetParams = fake_cuGraphKernelNodeSetParams;
  s->cuGraphKernelNodeSetAttribute = fake_cuGraphKernelNodeSetAttribute;
  s->cuGraphKernelNodeGetAttribute = fake_cuGraphKernelNodeGetAttribute;
  s->cuGraphInstantiateWithFlags = fake_cuGraphInstantiateWithFlags;
  s->cuGraphExecDestroy = fake_cuGraphExecDestroy;
  s->cuGraphUpload = fake_cuGraphUpload;
  s->cuGraphLaunch = fake_cuGraphLaunch;
  s->cuGraphNodeSetEnabled = fake_cuGraphNodeSetEnabled;
  s->cuGraphExecKernelNodeSetParams = fake_cuGraphExecKernelNodeSetParams;
  s->cuGraphExecMemsetNodeSetParams = fake_cuGraphExecMemsetNodeSetParams;
  s->cuGraphExecMemcpyNodeSetParams = fake_cuGraphExecMemcpyNodeSetParams;
  s->cuModuleLoadDataEx = fake_cuModuleLoadDataEx;
  s->cuModuleGetFunction = fake_cuModuleGetFunction;
  s->cuModuleUnload = fake_cuModuleUnload;
  s->cuFuncGetAttribute = fake_cuFuncGetAttribute;
  s->cuFuncSetAttribute = fake_cuFuncSetAttribute;
  s->cuLibraryLoadData = fake_cuLibraryLoadData;
  s->cuLibraryUnload = fake_cuLibraryUnload;
  s->cuLibraryGetModule = fake_cuLibraryGetModule;
  s->cuLibraryGetKernelCount = fake_cuLibraryGetKernelCount;
  s->cuLibraryEnumerateKernels = fake_cuLibraryEnumerateKernels;
  s->cuKernelGetName = fake_cuKernelGetName;
  s->cuKernelGetFunction = fake_cuKernelGetFunction;
  s->cuKernelGetParamInfo = fake_cuKernelGetParamInfo;
  return s;
}

//===----------------------------------------------------------------------===//
// As a library: libcuda.so.1 for halod and the integration tests
//===----------------------------------------------------------------------===//

#ifdef HALO_FAKE_CUDA_LIBRARY

// The kernels of the library (hal_cuda_fake_kernels.c).
extern const fake_kernel_t fake_library_kernels[];
extern const uint32_t fake_library_kernel_count;

static struct CUctx_st fake_context;
static int fake_pool;

static CUresult fake_cuInit(unsigned flags) {
  (void)flags;
  return CUDA_SUCCESS;
}
static CUresult fake_cuDeviceGetCount(int *count) {
  *count = 1;
  return CUDA_SUCCESS;
}
static CUresult fake_cuDeviceGet(CUdevice *device, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}
static CUresult fake_cuDeviceGetName(char *name, int length, CUdevice device) {
  (void)device;
  snprintf(name, (size_t)length, "halo fake CUDA device (no GPU)");
  return CUDA_SUCCESS;
}
static CUresult fake_cuDeviceTotalMem(size_t *bytes, CUdevice device) {
  (void)device;
  *bytes = (size_t)1 << 30;
  return CUDA_SUCCESS;
}
static CUresult fake_cuDeviceGetAttributeFull(int *value,
                                              CUdevice_attribute attribute,
                                              CUdevice device) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = 132;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      *value = 1;
      return CUDA_SUCCESS;
    default:
      return fake_cuDeviceGetAttribute(value, attribute, device);
  }
}
static CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *context,
                                              CUdevice device) {
  (void)device;
  *context = &fake_context;
  return CUDA_SUCCESS;
}
static CUresult fake_cuDevicePrimaryCtxRelease(CUdevice device) {
  (void)device;
  return CUDA_SUCCESS;
}
static CUresult fake_cuCtxGetStreamPriorityRange(int *least, int *greatest) {
  *least = 0;
  *greatest = -5;
  return CUDA_SUCCESS;
}
static CUresult fake_cuDeviceGetDefaultMemPool(CUmemoryPool *pool,
                                               CUdevice device) {
  (void)device;
  *pool = (CUmemoryPool)(void *)&fake_pool;
  return CUDA_SUCCESS;
}
static CUresult fake_cuMemPoolSetAttribute(CUmemoryPool pool,
                                           CUmemPool_attribute attribute,
                                           void *value) {
  (void)pool;
  (void)attribute;
  (void)value;
  return CUDA_SUCCESS;
}
static CUresult fake_cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  (void)pool;
  (void)keep;
  return CUDA_SUCCESS;
}
static CUresult fake_cuDeviceGetPCIBusId(char *id, int length,
                                         CUdevice device) {
  (void)device;
  snprintf(id, (size_t)length, "0000:00:00.0");
  return CUDA_SUCCESS;
}

// Every symbol halo resolves that the fake does not implement.
static CUresult fake_not_supported(void) {
  return CUDA_ERROR_NOT_SUPPORTED;
}

static pthread_once_t fake_library_once = PTHREAD_ONCE_INIT;

static void fake_library_initialize(void) {
  fake_driver_initialize(fake_library_kernels, fake_library_kernel_count);
  halo_hal_cuda_symbols_t *s = &fake_symbols;
  s->cuInit = fake_cuInit;
  s->cuDeviceGetCount = fake_cuDeviceGetCount;
  s->cuDeviceGet = fake_cuDeviceGet;
  s->cuDeviceGetName = fake_cuDeviceGetName;
  s->cuDeviceTotalMem = fake_cuDeviceTotalMem;
  s->cuDeviceGetAttribute = fake_cuDeviceGetAttributeFull;
  s->cuDevicePrimaryCtxRetain = fake_cuDevicePrimaryCtxRetain;
  s->cuDevicePrimaryCtxRelease = fake_cuDevicePrimaryCtxRelease;
  s->cuCtxGetStreamPriorityRange = fake_cuCtxGetStreamPriorityRange;
  s->cuDeviceGetDefaultMemPool = fake_cuDeviceGetDefaultMemPool;
  s->cuMemPoolSetAttribute = fake_cuMemPoolSetAttribute;
  s->cuMemPoolTrimTo = fake_cuMemPoolTrimTo;
  s->cuDeviceGetPCIBusId = fake_cuDeviceGetPCIBusId;
}

#define FAKE_EXPORT __attribute__((visibility("default")))

FAKE_EXPORT CUresult cuDriverGetVersion(int *version) {
  *version = 13000;
  return CUDA_SUCCESS;
}

#define FAKE_SYMBOL_ENTRY(name, version, fallback) \
  {#name, (void **)&fake_symbols.name},

FAKE_EXPORT CUresult
cuGetProcAddress_v2(const char *symbol, void **function, int version,
                    cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
  (void)version;
  (void)flags;
  pthread_once(&fake_library_once, fake_library_initialize);
  static const struct {
    const char *name;
    void **slot;
  } entries[] = {HALO_HAL_CUDA_DRIVER_SYMBOLS(FAKE_SYMBOL_ENTRY)};
  for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); ++i) {
    if (strcmp(entries[i].name, symbol) != 0) continue;
    *function =
        *entries[i].slot ? *entries[i].slot : (void *)fake_not_supported;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  *function = NULL;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

#endif  // HALO_FAKE_CUDA_LIBRARY
