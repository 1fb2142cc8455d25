// The CUDA driver (hal/cuda/): one primary context per GPU, device memory
// from the device's stream-ordered pool, host-visible memory registered
// with cuMemHostRegister(DEVICEMAP|PORTABLE), executables from PTX, CUBIN,
// FATBIN or CUDA C (NVRTC), REUSABLE command buffers memoized as pools of
// CUDA graph instances, queues over streams.
//
// Threads (DESIGN.md "CUDA driver"; the driver calls that stall the device
// are in its facts table). Per device:
// - the submission thread (cuda_thread.c): launches, graph parameter
//   updates, binding-table copies, GPU semaphore stores, in submission order;
// - the completion thread (cuda_queue.c): turns finished GPU work into
//   completion callbacks (or cuLaunchHostFunc callbacks on a dedicated
//   stream: HALO_HAL_CUDA_COMPLETION_HOST_FUNC);
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
#include <stdbool.h>
#include <stdint.h>

#include "hal/cuda/cuda_symbols.h"
#include "hal/device.h"

// ---- cuda_thread.c: a thread that runs posted tasks in order with the
// device's context current.

typedef struct halo_hal_cuda_task_t halo_hal_cuda_task_t;
typedef void (*halo_hal_cuda_task_fn)(halo_hal_cuda_task_t *task);
struct halo_hal_cuda_task_t {
  halo_hal_cuda_task_t *next;
  halo_hal_cuda_task_fn run;  // owns the task from here on
};

typedef struct halo_hal_cuda_thread_t {
  pthread_t thread;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  halo_hal_cuda_task_t *head;
  halo_hal_cuda_task_t *tail;
  bool stopping;
  bool started;
  const halo_hal_cuda_symbols_t *cu;
  CUcontext context;
  char name[16];  // pthread name, e.g. "halo-cu0-submit"
} halo_hal_cuda_thread_t;

halo_status_t halo_hal_cuda_thread_start(halo_hal_cuda_thread_t *thread,
                                         const char *name,
                                         const halo_hal_cuda_symbols_t *cu,
                                         CUcontext context);
// Any thread. Runs |task| after every task posted before it.
void halo_hal_cuda_thread_post(halo_hal_cuda_thread_t *thread,
                               halo_hal_cuda_task_t *task);
// Runs the tasks already posted, then joins.
void halo_hal_cuda_thread_stop(halo_hal_cuda_thread_t *thread);

// ---- cuda_device.c

// How finished GPU work reaches the host (config key cuda_completion).
typedef enum halo_hal_cuda_completion_mode_e {
  HALO_HAL_CUDA_COMPLETION_THREAD = 0,     // a thread waits on events
  HALO_HAL_CUDA_COMPLETION_HOST_FUNC = 1,  // cuLaunchHostFunc callbacks
} halo_hal_cuda_completion_mode_t;

typedef struct halo_hal_cuda_device_options_t {
  halo_hal_cuda_completion_mode_t completion;
  // Compiled code on disk ("" for none); CUDA_CACHE_PATH points below it.
  char cache_directory[256];
} halo_hal_cuda_device_options_t;

typedef struct halo_hal_cuda_device_t halo_hal_cuda_device_t;

// Called on a driver thread when the device hit a sticky error: the context
// is unusable and the process must restart (DESIGN.md "Faults"). |status|
// (owned by the callee) names the error; the daemon fails every semaphore
// with DEVICE_LOST naming the submissions in flight and exits non-zero.
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
};

halo_status_t halo_hal_cuda_device_create(
    uint32_t ordinal, const halo_hal_cuda_device_options_t *options,
    halo_hal_device_t **out_device);
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

// ---- cuda_command_buffer.c
halo_status_t halo_hal_cuda_command_buffer_prepare(
    halo_hal_cuda_device_t *device, halo_hal_recording_t *recording,
    halo_hal_command_buffer_t **out_command_buffer);

// ---- cuda_queue.c
halo_status_t halo_hal_cuda_queue_create(halo_hal_cuda_device_t *device,
                                         int32_t priority,
                                         halo_hal_queue_t **out_queue);

#endif  // HALO_HAL_CUDA_CUDA_DEVICE_H_
