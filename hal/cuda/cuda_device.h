// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The CUDA driver (hal/cuda/): one primary context per GPU, device memory
// from the device's stream-ordered pool, host-visible memory registered
// with cuMemHostRegister(DEVICEMAP|PORTABLE), executables from PTX, CUBIN,
// FATBIN or CUDA C (NVRTC), REUSABLE command buffers memoized as pools of
// CUDA graph instances, queues over a pool of shared streams.
//
// Threads (docs/architecture.md "CUDA driver"; the driver calls that stall the
// device are in its facts table). Per device:
// - the submission thread (cuda_thread.c): launches, graph parameter
//   updates, binding-table copies, GPU semaphore stores, in submission order;
// - the completion thread (cuda_queue.c): turns finished GPU work into
//   completion callbacks, polling without ever blocking in the driver, with
//   a sleeper thread that blocks on the oldest unfinished event for an
//   exact wake (or cuLaunchHostFunc callbacks on a dedicated stream:
//   HALO_HAL_CUDA_COMPLETION_HOST_FUNC);
// - the reaper (cuda_thread.c): the calls that wait for every stream of the
//   device (cuModuleUnload, cuMemHostUnregister, ...), batched, so a stall
//   never holds up the loop thread or a launch.
// The daemon's loop thread makes no driver call that can stall: executables
// are created off the loop (daemon/executable.c), frees and unregistrations
// go to the reaper.
//
// Thread-safety: as hal/device.h.
#ifndef HALO_HAL_CUDA_CUDA_DEVICE_H_
#define HALO_HAL_CUDA_CUDA_DEVICE_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"
#include "common/list.h"
#include "hal/cuda/cuda_stream_pool.h"
#include "hal/cuda/cuda_symbols.h"
#include "hal/device.h"

// ---- cuda_thread.c: a thread that runs posted tasks in order with the
// device's context current.

typedef struct halo_hal_cuda_task_t halo_hal_cuda_task_t;
typedef void (*halo_hal_cuda_task_fn)(halo_hal_cuda_task_t *task);
struct halo_hal_cuda_task_t {
  halo_hal_cuda_task_t *next;
  halo_hal_cuda_task_fn run;  // owns the task from here on
  // A parked execution woken by a returned graph instance: one instance (or
  // the right to create one) is kept for it (cuda_command_buffer.c).
  bool promised;
  // When it first waited for room in the device's graph memory bound
  // (cuda_graph_memory.c; 0: never).
  int64_t room_since_ns;
};

// A line of tasks, first in first out, linked by their |next|.
typedef struct halo_hal_cuda_tasks_t {
  halo_hal_cuda_task_t *head;
  halo_hal_cuda_task_t *tail;
} halo_hal_cuda_tasks_t;

static inline void halo_hal_cuda_tasks_push(halo_hal_cuda_tasks_t *tasks,
                                            halo_hal_cuda_task_t *task) {
  task->next = NULL;
  if (tasks->tail) {
    tasks->tail->next = task;
  } else {
    tasks->head = task;
  }
  tasks->tail = task;
}

// First in line (before the others).
static inline void halo_hal_cuda_tasks_push_front(halo_hal_cuda_tasks_t *tasks,
                                                  halo_hal_cuda_task_t *task) {
  task->next = tasks->head;
  tasks->head = task;
  if (!tasks->tail) tasks->tail = task;
}

// The first task (NULL: none), off the line.
static inline halo_hal_cuda_task_t *halo_hal_cuda_tasks_pop(
    halo_hal_cuda_tasks_t *tasks) {
  halo_hal_cuda_task_t *task = tasks->head;
  if (task) {
    tasks->head = task->next;
    if (!tasks->head) tasks->tail = NULL;
    task->next = NULL;
  }
  return task;
}

// Every task, still linked in order; the line is empty after.
static inline halo_hal_cuda_task_t *halo_hal_cuda_tasks_take_all(
    halo_hal_cuda_tasks_t *tasks) {
  halo_hal_cuda_task_t *head = tasks->head;
  tasks->head = tasks->tail = NULL;
  return head;
}

typedef struct halo_hal_cuda_thread_t {
  pthread_t thread;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  halo_hal_cuda_tasks_t tasks;
  bool stopping;
  bool started;
  // With the queue empty the thread spins this long (checking |posted|)
  // before it sleeps on |cond|, where one of the last two tasks came within
  // this long (halo_clock_gaps_spin_ns): under load a post then costs no
  // futex wake on either side. 0: sleep at once (the reaper).
  int64_t spin_ns;
  _Atomic uint64_t posted;  // tasks posted so far
  // Tasks posted and not started yet (halo_hal_cuda_thread_waiting).
  _Atomic uint32_t waiting;
  bool sleeping;  // waiting on |cond| (under |mutex|)
  // How many times the thread began waiting on |cond| (a spurious wake-up
  // waits again and counts again); a poster running a task for it does not
  // count (halo_hal_cuda_thread_sleeps).
  _Atomic uint64_t sleeps;
  // The gaps before the last two tasks, posted or run by a poster (under
  // |mutex|; halo_clock_gaps_spin_ns), and whether a poster runs a task
  // itself now (halo_hal_cuda_thread_run_or_post: the thread waits for it
  // before its next batch).
  halo_clock_gaps_t gaps;
  bool caller_running;
  const halo_hal_cuda_symbols_t *cu;
  CUcontext context;
  char name[16];  // pthread name, e.g. "halo-cu0-submit"
} halo_hal_cuda_thread_t;

// How long the submission thread spins for the next task before it
// sleeps (the ring poller's default window, ring-poll-us, is the same).
#define HALO_HAL_CUDA_SUBMISSION_SPIN_NS 50000
// Executions issued in a row with no task waiting after which the graphs'
// store node is disabled again (device->graph_stores_quiet). Under 8
// tenants a worker's submission thread is busy 60-80% of the time: so long
// a run without a backlog does not happen there.
#define HALO_HAL_CUDA_GRAPH_STORES_QUIET 64

halo_status_t halo_hal_cuda_thread_start(halo_hal_cuda_thread_t *thread,
                                         const char *name,
                                         const halo_hal_cuda_symbols_t *cu,
                                         CUcontext context, int64_t spin_ns);
// Any thread. Runs |task| after every task posted before it.
void halo_hal_cuda_thread_post(halo_hal_cuda_thread_t *thread,
                               halo_hal_cuda_task_t *task);
// The loop thread. Runs |task| on the caller, now, where the device is
// idle: the thread asleep with nothing queued, and with |task| arriving now
// neither of the last two tasks came within spin_ns of the end of the one
// before (|gaps|: the rule by which the thread spins; a task run here
// counts as the thread's own).
// A post would cost such a task the thread's wake-up, tens of microseconds
// after a long sleep on a virtual machine. The thread's context is made
// current on the caller, and the thread runs nothing meanwhile, so the
// task keeps the thread's order and owns what the thread owns. Else posts
// it: under load the work stays pipelined on the thread. Returns whether
// the caller ran it. A task run here must not wait for the thread
// (halo_hal_cuda_thread_flush).
bool halo_hal_cuda_thread_run_or_post(halo_hal_cuda_thread_t *thread,
                                      halo_hal_cuda_task_t *task);
// Any thread: how many tasks wait for |thread| (posted, not started): the
// submission thread's backlog.
uint32_t halo_hal_cuda_thread_waiting(const halo_hal_cuda_thread_t *thread);
// Any thread: how many times |thread| began waiting on its condition so far
// (a change: it was idle past its spin in between).
uint64_t halo_hal_cuda_thread_sleeps(const halo_hal_cuda_thread_t *thread);
// Whether the calling thread is running a task of |thread| for it
// (halo_hal_cuda_thread_run_or_post).
bool halo_hal_cuda_thread_on_caller(const halo_hal_cuda_thread_t *thread);
// Runs the tasks already posted, then joins.
void halo_hal_cuda_thread_stop(halo_hal_cuda_thread_t *thread);
// [added by the device/allocator/executable engineer] Any thread but
// |thread| itself. Returns once every task posted before it has run.
void halo_hal_cuda_thread_flush(halo_hal_cuda_thread_t *thread);

// ---- cuda_device.c

// How finished GPU work reaches the host (config key cuda_completion).
typedef enum halo_hal_cuda_completion_mode_e {
  HALO_HAL_CUDA_COMPLETION_THREAD = 0,     // a thread waits on events
  HALO_HAL_CUDA_COMPLETION_HOST_FUNC = 1,  // cuLaunchHostFunc callbacks
} halo_hal_cuda_completion_mode_t;

typedef struct halo_hal_cuda_device_options_t {
  halo_hal_cuda_completion_mode_t completion;
  // Streams per priority level that the device's queues share (config key
  // cuda-streams; cuda_stream_pool.h); 0: HALO_HAL_CUDA_DEFAULT_STREAMS.
  uint32_t stream_count;
  // Compiled code on disk ("" for none); CUDA_CACHE_PATH points below it.
  char cache_directory[256];
  // Device memory the graph instances of the device's recordings may take,
  // by halo's estimate per instance (config key cuda-graph-bytes;
  // cuda_graph_memory.c); 0: HALO_HAL_CUDA_DEFAULT_GRAPH_BYTES.
  uint64_t graph_bytes;
  // The program that compiles CUDA C, one process per compile (cuda_nvrtc.c;
  // "": halo-nvrtc beside the running program, else where halo installs
  // it).
  char compiler[256];
  // How long one CUDA C compile may run before its process is killed and
  // the load fails DEADLINE_EXCEEDED; 0:
  // HALO_HAL_CUDA_DEFAULT_COMPILE_TIMEOUT_MS.
  uint32_t compile_timeout_ms;
} halo_hal_cuda_device_options_t;

// The default bound of one CUDA C compile (240 s; halod's
// cuda-compile-deadline-ms, whose wait for a worker's executable load is
// this and 60 s more).
#define HALO_HAL_CUDA_DEFAULT_COMPILE_TIMEOUT_MS 240000u

// The default bound of the graph instances' device memory (4 GiB).
#define HALO_HAL_CUDA_DEFAULT_GRAPH_BYTES (4ull << 30)

typedef struct halo_hal_cuda_device_t halo_hal_cuda_device_t;

// ---- [added by the device/allocator/executable engineer; additive only:
// new fields at the end of halo_hal_cuda_device_t, new functions below it]
// How executables are loaded into the context (cuda_executable.c): as
// CUlibrary (context-independent; CUkernel handles, cuLaunchKernel accepts
// a CUkernel cast to CUfunction) or as CUmodule. Either way every entry has
// a CUfunction for the device's context (halo_hal_cuda_executable_function).
typedef enum halo_hal_cuda_loader_e {
  HALO_HAL_CUDA_LOADER_LIBRARY = 0,
  HALO_HAL_CUDA_LOADER_MODULE = 1,
} halo_hal_cuda_loader_t;

// A host registration (cuda_allocator.c): the allocator registers its own
// alias of the caller's MAP_SHARED mapping, so that the caller may unmap
// its view right after unregister_host while the reaper unregisters the
// alias later (cuMemHostUnregister waits for the device's running work).
typedef struct halo_hal_cuda_host_registration_t
    halo_hal_cuda_host_registration_t;

// Called on a driver thread when the device hit a sticky error: the context
// is unusable and the process must restart (docs/architecture.md "CUDA
// driver"). |status| (owned by the callee) names the error; the daemon fails
// every semaphore with DEVICE_LOST naming the submissions in flight and exits
// non-zero.
typedef void (*halo_hal_cuda_lost_fn)(void *user_data,
                                      halo_hal_cuda_device_t *device,
                                      halo_status_t status);

struct halo_hal_cuda_device_t {
  halo_hal_device_t base;
  halo_hal_allocator_t allocator;
  const halo_hal_cuda_symbols_t *cu;
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc;  // NULL: no NVRTC
  halo_hal_cuda_device_options_t options;
  uint32_t ordinal;
  CUdevice device;
  CUcontext context;  // the primary context, retained
  CUmemoryPool pool;  // the device's default pool, release threshold raised
  CUstream transfer_stream;  // buffer reads/writes of the control plane
  int arch;                  // compute capability as 90 for sm_90
  int stream_priority_least;
  int stream_priority_greatest;
  halo_hal_cuda_thread_t submission;
  halo_hal_cuda_thread_t reaper;
  halo_hal_cuda_lost_fn lost;
  void *lost_user_data;
  // ---- [added] Fields below belong to cuda_device.c / cuda_allocator.c /
  // cuda_executable.c.
  // Guards transfer_stream: control-plane copies, allocations and frees
  // (stream-ordered, then synchronized, so memory is usable on any stream).
  pthread_mutex_t transfer_mutex;
  halo_hal_cuda_loader_t loader;
  pthread_mutex_t registration_mutex;  // guards registrations
  halo_hal_cuda_host_registration_t *registrations;
  char pci_bus_id[32];
  // ---- [added by the command buffer/queue engineer] Fields below belong to
  // cuda_command_buffer.c and cuda_queue.c.
  // dispatch_indirect's built-in grid-setting kernel, loaded on first use
  // (submission thread only); unloaded with the context. |builtin_failure|
  // keeps why it did not load.
  CUmodule builtin_module;
  CUfunction builtin_set_grid;
  uint32_t builtin_max_grid[2];  // x, and the smaller of y and z
  halo_status_t builtin_failure;
  // An execution prefers a free graph instance already bound to its
  // addresses (cuda_command_buffer.c). HALO_CUDA_INSTANCE_AFFINITY=0 in
  // halod's environment turns it off (a diagnostic, to compare).
  bool instance_affinity;
  // Short executions whose signals the GPU stores record no event: the
  // stores tell the completion thread (cuda_queue.c).
  // HALO_CUDA_EVENTLESS=0 in halod's environment turns it off (a
  // diagnostic, to compare).
  bool eventless_completion;
  // An execution offered while the submission thread sleeps idle is issued
  // on the caller (halo_hal_cuda_thread_run_or_post) and, seen to be short,
  // waited for there (cuda_queue.c). HALO_CUDA_ISSUE_ON_CALLER=0 in halod's
  // environment turns it off (a diagnostic, to compare).
  bool issue_on_caller;
  // A short execution the submission thread issued with no other task
  // waiting for it is waited for there, where the completion path sleeps
  // (cuda_queue.c). HALO_CUDA_WAIT_ON_SUBMISSION=0 in halod's environment
  // turns it off (a diagnostic, to compare).
  bool wait_on_submission;
  // What the device's queues share (completion thread, event pool, the
  // order of GPU semaphore stores): created with the first queue, destroyed
  // with the last (loop thread).
  struct halo_hal_cuda_queue_shared_t *queue_shared;
  // [added by the queue engineer] The sticky CUresult that lost the device
  // (0 when unknown), set on the driver thread before |lost| is called.
  int32_t lost_result;
  // The streams the device's queues share (cuda_stream_pool.h): created on
  // the submission thread when the device is opened
  // (halo_hal_cuda_device_open_streams), destroyed with the device.
  halo_hal_cuda_stream_pool_t streams;
  // Completion stores inside the graphs (cuda_command_buffer.c): each graph
  // instance ends in a node of a built-in kernel that stores the signals'
  // values from the instance's ticket, so that an execution costs one
  // cuGraphLaunch, not a launch and a cuStreamWriteValue64 per signal.
  // |store_kernel| is loaded when the device is opened (submission thread:
  // halo_hal_cuda_store_kernel); NULL after |store_tried| where it did not
  // load (the stores then follow the graph). On unless HALO_CUDA_GRAPH_STORES=0
  // in halod's environment. The node is enabled from when tasks are seen
  // waiting for the submission thread until that thread next sleeps (the
  // device idle past its spin) or HALO_HAL_CUDA_GRAPH_STORES_QUIET
  // executions in a row were issued with none waiting (a lone client
  // stepping faster than the spin keeps the thread awake):
  // |graph_stores_busy|, the thread's sleeps when tasks last waited
  // (|graph_stores_sleeps|) and the executions issued since with none
  // waiting (|graph_stores_quiet|); the submission thread's, and its
  // caller's while it runs nothing. Toggling the node per execution as the
  // backlog comes and goes cost more than the node.
  bool graph_stores;
  bool store_tried;
  CUfunction store_kernel;
  bool graph_stores_busy;
  uint64_t graph_stores_sleeps;
  uint32_t graph_stores_quiet;
  // The instances' tickets, carved from pinned slabs (one cuMemAllocHost
  // per slab, freed with the device: halo_hal_cuda_tickets_free): free
  // tickets and the slabs, under |ticket_mutex| (instances are made on the
  // submission thread and destroyed on the reaper).
  pthread_mutex_t ticket_mutex;
  uint64_t *free_tickets;
  struct halo_hal_cuda_ticket_slab_t *ticket_slabs;
  // Graph instances per recording at most (cuda_command_buffer.c): how many
  // executions of one recording may be in flight at once.
  // HALO_CUDA_GRAPH_INSTANCES=N in halod's environment sets it (1..4096;
  // default HALO_HAL_CUDA_GRAPH_INSTANCES).
  uint32_t graph_instances;
  // The graph instances' device memory (cuda_graph_memory.c): the bound
  // (|options|.graph_bytes), what the instances built take by halo's
  // estimate, and the command buffers that hold instances (their idle ones
  // are destroyed to make room for another recording's), under
  // |graph_mutex| (instances are made on the submission thread and
  // destroyed there or on the reaper).
  pthread_mutex_t graph_mutex;
  uint64_t graph_bytes_limit;
  uint64_t graph_bytes;
  uint32_t graph_instance_count;
  halo_list_t graph_holders;  // by holder_link, oldest first
  int64_t graph_logged_ns;    // when the bound was last logged as reached
  // Executions whose recording has no instance and found no room while
  // other recordings' instances were in use, in the order they came
  // (linked by next; served first come, first served by |graph_wake_task|
  // on the submission thread when an instance is given back or bytes go
  // back: the first that still finds no room keeps its place, and other
  // reservations wait behind the line), how many waited so far, and their
  // count (with an execution deciding whether to wait), read without the
  // mutex by the gives.
  halo_hal_cuda_tasks_t graph_waiters;
  uint64_t graph_room_waits;
  _Atomic uint32_t graph_waiter_count;
  halo_hal_cuda_task_t graph_wake_task;
  atomic_bool graph_wake_posted;  // |graph_wake_task| posted, not yet run
};

// [added] Loads the driver (once) and counts the devices; false with the
// reason when CUDA is unavailable. Sets CUDA_CACHE_PATH below
// |cache_directory| (if not "") before the driver is initialized.
bool halo_hal_cuda_driver_probe(const char *cache_directory, char *out_reason,
                                size_t reason_size, uint32_t *out_count);

// Whether the behaviour that environment variable |name| can turn off (a
// diagnostic, to compare: HALO_CUDA_EVENTLESS=0 and the like in halod's
// environment) is on: unless |name| is "0".
bool halo_hal_cuda_diagnostic_on(const char *name);

// [added] Any thread: makes the device's context current on the calling
// thread (uv worker threads, the loop thread for non-stalling calls).
halo_status_t halo_hal_cuda_device_make_current(halo_hal_cuda_device_t *device);

// [added] The device of |device| if it is a CUDA one, else NULL.
halo_hal_cuda_device_t *halo_hal_cuda_device_cast(halo_hal_device_t *device);

halo_status_t halo_hal_cuda_device_create(
    uint32_t ordinal, const halo_hal_cuda_device_options_t *options,
    halo_hal_device_t **out_device);
// The thread that opens the device, once the submission thread runs:
// creates the stream pool of |options| on the submission thread and loads
// the built-in store kernel (halo_hal_cuda_store_kernel) there, and waits
// for it, so that they cost the device's opening, not a client's first
// execution. (halo_hal_cuda_device_create calls it; the device's
// destroy deinitializes the pool after the submission thread stopped.)
halo_status_t halo_hal_cuda_device_open_streams(halo_hal_cuda_device_t *device);
bool halo_hal_cuda_device_isa(const halo_hal_device_t *device);

// ---- cuda_allocator.c
void halo_hal_cuda_allocator_initialize(halo_hal_cuda_device_t *device);

// ---- cuda_executable.c
halo_status_t halo_hal_cuda_executable_create(
    halo_hal_cuda_device_t *device, const halo_hal_executable_params_t *params,
    halo_hal_executable_t **out_executable);
// The CUfunction of entry |ordinal| (from lookup_entry).
halo_status_t halo_hal_cuda_executable_function(
    halo_hal_executable_t *executable, uint32_t ordinal,
    CUfunction *out_function);
// [added] How an executable came to be (tests, logs, haloctl).
typedef struct halo_hal_cuda_executable_info_t {
  bool from_disk_cache;  // compiled code came from the cache directory
  bool compiled;         // NVRTC or PTX JIT ran (or was served from disk)
  int64_t compile_ns;    // NVRTC / PTX JIT, or reading the disk cache
  int64_t load_ns;       // loading into the context
  uint32_t entry_count;
} halo_hal_cuda_executable_info_t;
halo_status_t halo_hal_cuda_executable_query(
    halo_hal_executable_t *executable,
    halo_hal_cuda_executable_info_t *out_info);

// ---- cuda_compiler.c [added]: NVRTC and the driver's PTX linker, with the
// disk cache. Any thread with the device's context current.
// Turns |params| into an image the loader takes (CUBIN or FATBIN): CUBIN
// and FATBIN pass through (*out_image == params->data, nothing to free);
// PTX is linked to a CUBIN by the driver's JIT and CUDA C compiled by NVRTC
// to a CUBIN for the device's architecture, both looked up in and written
// to the disk cache. INVALID_ARGUMENT with the whole compiler log when the
// code does not compile; UNIMPLEMENTED for CUDA C without NVRTC.
typedef struct halo_hal_cuda_image_t {
  const void *data;
  size_t size;
  void *owned;  // free() this (NULL when |data| is the caller's)
  bool from_disk_cache;
  bool compiled;
} halo_hal_cuda_image_t;
// mkdir -p |path| (mode 0700).
halo_status_t halo_hal_cuda_make_directory(const char *path);
halo_status_t halo_hal_cuda_compiler_build(
    halo_hal_cuda_device_t *device, const halo_hal_executable_params_t *params,
    halo_hal_cuda_image_t *out_image);
// Removes the disk cache's compiled code of |params| (a build's next
// lookup misses and compiles): for code the driver refused to load.
void halo_hal_cuda_compiler_forget(halo_hal_cuda_device_t *device,
                                   const halo_hal_executable_params_t *params);

// ---- cuda_image_check.c
// Checks the CUBIN or FATBIN |params| (format CUBIN or FATBIN) before the
// driver's loader, which takes no size, reads it: INVALID_ARGUMENT naming
// the format and what is wrong where a table, an entry or a compressed
// stream the driver would follow lies outside the bytes, or an ELF image
// (a FATBIN's compressed ones decompressed first) is damaged;
// RESOURCE_EXHAUSTED where there is no memory to decompress one.
halo_status_t halo_hal_cuda_image_check(
    const halo_hal_executable_params_t *params);

// ---- cuda_nvrtc.c
// Compiles the CUDA C source of |params| with NVRTC to a CUBIN for the
// device's architecture, in a process of its own (halo-nvrtc), in a
// read-only sandbox that lets it read only the CUDA toolkit's headers
// (FAILED_PRECONDITION where the host cannot make one, or halo-nvrtc is
// missing). INVALID_ARGUMENT with the whole compile log when it does not
// compile; DEADLINE_EXCEEDED past the device's compile timeout; INTERNAL
// naming the signal where NVRTC crashed; UNIMPLEMENTED without NVRTC.
halo_status_t halo_hal_cuda_nvrtc_compile(
    halo_hal_cuda_device_t *device, const halo_hal_executable_params_t *params,
    halo_hal_cuda_image_t *out_image);

// ---- cuda_command_buffer.c
halo_status_t halo_hal_cuda_command_buffer_prepare(
    halo_hal_cuda_device_t *device, halo_hal_recording_t *recording,
    halo_hal_command_buffer_t **out_command_buffer);
// Submission thread, when the device is opened (before any work: a module
// load waits for the context's running kernels): loads the built-in store
// kernel of the graphs' last node, once (device->store_tried). NULL
// (warned) where it does not load, or with HALO_CUDA_GRAPH_STORES=0: the
// stores then follow each graph on the stream.
CUfunction halo_hal_cuda_store_kernel(halo_hal_cuda_device_t *device);

// ---- cuda_graph_memory.c: the bound on the graph instances' device memory
// (cuda-graph-bytes; what the command buffers use of it is in
// cuda_graph_memory.h).
// Any thread: how many times an execution waited for room in the device's
// graph memory bound while other recordings' instances were in use.
uint64_t halo_hal_cuda_device_graph_room_waits(halo_hal_cuda_device_t *device);

// Any thread: the device memory the device's graph instances take by
// halo's estimate, and how many there are.
void halo_hal_cuda_device_graph_usage(halo_hal_cuda_device_t *device,
                                      uint64_t *out_bytes,
                                      uint32_t *out_instances);

// ---- cuda_queue.c
halo_status_t halo_hal_cuda_queue_create(halo_hal_cuda_device_t *device,
                                         int32_t priority,
                                         halo_hal_queue_t **out_queue);

#endif  // HALO_HAL_CUDA_CUDA_DEVICE_H_
