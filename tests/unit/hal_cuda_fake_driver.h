// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A fake CUDA driver for testing the CUDA driver's command buffers and
// queues without a GPU (tests/unit/hal_cuda_queue_test.c): the subset of
// the driver API that hal/cuda/ calls, implemented on the host with the
// semantics halo relies on.
//
// - Device memory is host memory; a CUdeviceptr is a host pointer. Host
//   registration is the identity.
// - Each stream is a thread running its operations in order: kernels (host
//   functions from a registry, called once with the whole grid), memsets,
//   copies (from pageable memory the source is read at the call, from
//   cuMemAllocHost memory when the copy runs, as on a GPU), value stores,
//   event records and waits, host functions, graph launches, frees.
// - Events carry a record count and a completed count (cuEventQuery,
//   cuEventSynchronize, cuStreamWaitEvent wait for the record made before
//   the call).
// - Graphs keep their nodes in creation order (a topological order, as
//   halo adds nodes after their dependencies); a launch runs a snapshot of
//   the exec's nodes, so cuGraphExec*SetParams affects only later launches.
//   Device-updatable kernel nodes and the built-in grid-setting kernel of
//   dispatch_indirect (and the completion store kernel, which stores the
//   values its ticket lists) are emulated; a graph with such nodes fails to
//   launch unless uploaded after instantiation and after every host update of
//   those nodes.
// - A kernel may set a sticky error: every later call returns it, no later
//   operation runs (host functions neither), events never complete.
// - Misuse halo must never commit is counted: a CUgraphExec launched while
//   an earlier launch of it is pending, an exec destroyed while pending.
//
// Thread-safety: like the driver (thread-safe).
#ifndef HALO_TESTS_UNIT_HAL_CUDA_FAKE_DRIVER_H_
#define HALO_TESTS_UNIT_HAL_CUDA_FAKE_DRIVER_H_

#include <stdbool.h>
#include <stdint.h>

#include "hal/cuda/cuda_symbols.h"
#include "tests/support/fake_cuda_image.h"

// A kernel of the fake: |args| point at the parameter values, |threads| is
// grid x block (every kernel of the tests is one-dimensional).
typedef void (*fake_kernel_fn)(void **args, uint64_t threads);

typedef struct fake_kernel_t {
  const char *name;
  fake_kernel_fn run;
  uint32_t param_count;
  uint32_t param_sizes[8];
} fake_kernel_t;

typedef struct fake_counters_t {
  int kernel_launches;    // cuLaunchKernel
  int graph_launches;     // cuGraphLaunch
  int instantiations;     // cuGraphInstantiateWithFlags
  int exec_set_params;    // cuGraphExec*SetParams
  int exec_overlaps;      // a launch while one of the same exec was pending
  int destroyed_pending;  // an exec destroyed with a launch pending
  int missing_uploads;    // a device-updatable graph launched not uploaded
  int host_functions;     // host functions run
  int store_regressions;  // a 64-bit store lower than the last at its address
  int stores;             // 64-bit GPU stores made (both kinds below)
  int write_values;       // cuStreamWriteValue64
  int graph_stores;       // stores made by the built-in store kernel of a graph
  int store_node_runs;  // runs of that kernel (its node enabled), stores or not
  int node_toggles;     // cuGraphNodeSetEnabled
  int stream_waits;     // cuStreamWaitEvent on an event not completed yet
  int event_records;    // cuEventRecord
  int blocking_records;  // cuEventRecord of a CU_EVENT_BLOCKING_SYNC event
  int spin_syncs;        // cuEventSynchronize on an event without BLOCKING_SYNC
  int streams_created;   // cuStreamCreateWithPriority
  int stream_queries;    // cuStreamQuery
  // Streams that had an operation enqueued since the counters were reset,
  // each counted once.
  int streams_used;
} fake_counters_t;

// The image the fake loads its library from
// (tests/support/fake_cuda_image.h).
#define FAKE_CUDA_IMAGE_SIZE HALO_FAKE_CUDA_IMAGE_SIZE
void fake_driver_image(uint8_t out_image[FAKE_CUDA_IMAGE_SIZE]);

// Installs |kernels| (the fake library loaded from a fake_driver_image)
// and returns the symbol table.
const halo_hal_cuda_symbols_t *fake_driver_initialize(
    const fake_kernel_t *kernels, uint32_t kernel_count);

// Sets the sticky error (from a kernel) or clears it (between tests).
void fake_driver_set_sticky(CUresult result);

fake_counters_t fake_driver_counters(void);
// Kernel and graph launches made by the calling thread (a launch without a
// current context fails with CUDA_ERROR_INVALID_CONTEXT).
int fake_driver_thread_launches(void);
void fake_driver_reset_counters(void);

// An idle stream thread spins |ns| for its next operation before it
// sleeps (0, the default: it sleeps at once).
void fake_driver_set_stream_spin(int64_t ns);

// cuGraphExecDestroy takes |ns| (0, the default: returns at once), as a
// driver's teardown that waits for the device; the calls taking that time
// now.
void fake_driver_set_exec_destroy_ns(int64_t ns);
int fake_driver_exec_destroys_running(void);

// Waits until every destroyed stream's thread has finished (teardown).
void fake_driver_quiesce(void);

// Whether the completion store kernel's module fails to load (for devices
// opened from now on; it loads by default).
void fake_driver_fail_store_kernel(bool fails);

#endif  // HALO_TESTS_UNIT_HAL_CUDA_FAKE_DRIVER_H_
