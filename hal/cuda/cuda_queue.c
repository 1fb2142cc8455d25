// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// CUDA queues: each queue on a stream of the device's pool (taken on the
// submission thread at its first execution, of the client's priority
// mapped into the device's range, and kept until the queue is destroyed;
// several queues share a stream when there are more queues than streams:
// cuda_stream_pool.h), executions handed from the loop thread to the
// device's submission thread, GPU semaphore stores, and the two completion
// paths. Nothing here assumes a stream is one queue's: each queue's
// executions are in order on its stream, stores and fences compare
// streams, not queues, and a queue's destroy waits for its own executions
// only (their completions), never for its stream.
//
// Threads:
// - execute, create and destroy run on the daemon's loop thread: execute
//   posts the execution to the device's submission thread; a queue takes
//   its stream from the pool and gives it back there too. Where the device
//   is idle (the submission thread asleep, no task within its spin window:
//   halo_hal_cuda_thread_run_or_post) execute runs the submission thread's
//   task itself, so that the execution does not wait for that thread's
//   wake-up (tens of microseconds after a long sleep on a virtual machine);
//   set-up (a first issue, no free graph instance, a first stream) and the
//   end of a failure (it may wait for the stream) go on on the submission
//   thread. Work seen to be short is then also waited for on the loop
//   thread, up to 1.5 times its last duration, where the completion path
//   sleeps (halo_hal_cuda_execution_finish_on_caller): an idle device
//   answers a lone execution as a launch and a synchronize would, and its
//   completion callback runs within execute. Under load (tasks within the
//   window) nothing runs on the loop thread. The submission thread does the
//   same for a short execution it issued itself where no other task is
//   posted to it and the completion path sleeps (the poller waiting for the
//   sleeper on another queue's long work, say): it polls the execution's
//   event and gives up the wait as soon as a task is posted.
// - the submission thread issues the command buffer (cuda_command_buffer.c),
//   stores every signal's value (but one that would land below a higher
//   value: halo_hal_cuda_signal_behind) from the stream (cuStreamWriteValue64
//   into the semaphore's registered page, default flags: the store fences the
//   work before it, like __threadfence_system(); never
//   CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER), so a waiter spinning on the
//   slot sees it at once, records one pooled event after it, and hands the
//   execution to the completion path. The host completion path then runs
//   as on every driver: the deferred queue's retire signals the semaphore,
//   which bumps the epoch and wakes futex sleepers (a value the GPU stored
//   already is accepted and still wakes: hal/semaphore.c).
// - completion (device option |completion|, config key cuda_completion):
//   THREAD: one completion thread per device polls the pending events
//     (cuEventQuery; only the oldest pending execution of each stream, since
//     a stream completes in order, whichever queues share it: the pending
//     list is in the submission thread's enqueue order). An execution whose
//     signals the GPU stores is first watched through the stores themselves (a
//     load from the semaphore page, no driver call): its event is queried once
//     they landed, else only every 100 us, so that polling does not contend for
//     the context's lock with the submission thread's launches. When the
//     stores land the poller wakes the slots' futex sleepers at once (an
//     epoch bump), ahead of the host path's signal on the loop thread. It spins
//     (sched_yield between polls) for 50 us after new work expected to be
//     short (its recording's last duration as seen here within 150 us: the
//     spin and the longest nap; unknown counts as short) or after a completion
//     that came within 50 us of the progress before it
//     (halo_clock_spin_window_ns: long work is not spun on), then naps with
//     exponential backoff from 2 us to at most 100 us between polls, on its
//     condition variable so that new work wakes it at once. It never blocks in
//     the driver: a pending execution of one queue must never hold up the
//     completion of another (queues are unordered). For an exact wake on
//     long-running work, a second thread (the sleeper) blocks in
//     cuEventSynchronize (a BLOCKING_SYNC event: no spinning) on the oldest
//     unfinished event of work not known to be short and wakes the poller
//     when it returns; while every pending execution is on that event's
//     stream the poller does not nap in steps but waits for the sleeper or
//     new work. Work seen to be short records a plain event, which costs the
//     submission thread less (halo_hal_cuda_execution_event_pool), and is
//     polled to its end. Idle (nothing pending),
//     both sleep on condition variables: no CPU. Hundreds of queues cost one
//     poll of each pending stream's oldest event per round, not a thread each;
//   HOST_FUNC: the design card's cuLaunchHostFunc on the callback stream
//     beside the queue's stream in the pool (a host function blocks the work
//     after it in its stream, so never the queue's own), after a
//     cuStreamWaitEvent on the execution's event. The host function makes no
//     driver call. Host functions are not called once the context has failed,
//     so the same completion thread watches the oldest pending event every 10
//     ms for a sticky error.
// GPU-to-GPU waits (hal/fence.h): an execution asked for a fence
// (out_fence) gets one at execute; the submission thread binds it to the
// execution's event right after recording it (or fails it with the
// producer's error if the execution fails first). An execution that waits
// on fences issues cuStreamWaitEvent on each bound fence's event before
// its work; a fence not bound yet means its producer is parked (every
// graph instance busy): the consumer parks on the fence and is posted
// again when the producer binds or fails it. A failed fence fails the
// consumer with the producer's error. Fences are the device's: every
// queue of the device (one context) can wait for any of them.
// HALO_CUDA_GPU_WAITS=0 in halod's environment turns them off (every wait
// then goes through the host), to compare.
//
// Ordering of GPU stores: two GPU signals of one semaphore must never land
// backwards. A store issued on another stream than the previous store of
// the same semaphore waits (cuStreamWaitEvent) for the event recorded after
// that store, unless it has completed already; the last event per
// semaphore lives in a map on the submission thread (one event serving
// every later wait: cuda_event_pool.h). A store below a higher one issued
// before it (an execution parked while another queue's later signal went
// ahead) or below the slot's value is left out, and its execution is seen
// to finish by its event (halo_hal_cuda_signal_behind).
//
// Faults: a failed driver call fails its execution with a status naming
// the call. One that failed after part of its work was enqueued is
// reported once that work finished, through the completion path (its event
// recorded after the work), so the submission thread does not wait for a
// stream that other queues may share. A sticky error (the context is
// unusable) reports the device lost (device->lost: the daemon fails every
// semaphore with DEVICE_LOST and restarts) and fails every pending and
// later execution with DEVICE_LOST.
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "common/clock.h"
#include "common/list.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/u64_map.h"
#include "hal/cuda/cuda_command_buffer.h"
#include "hal/cuda/cuda_event_pool.h"
#include "hal/cuda/cuda_stream_pool.h"

// THREAD completion: spin this long after new work or the last completion,
// then nap between polls from the first to the longest nap, doubling.
#define HALO_HAL_CUDA_COMPLETION_SPIN_NS 50000
#define HALO_HAL_CUDA_COMPLETION_NAP_FIRST_NS 2000
#define HALO_HAL_CUDA_COMPLETION_NAP_MAX_NS 100000
// THREAD completion: work expected to finish within this (its recording's
// last duration) is short: new short work restarts the spin, and its event
// is a plain one (halo_hal_cuda_execution_event_pool). Within the spin and
// the longest nap, so that a short execution seen late (at the end of a
// nap) still counts as short.
#define HALO_HAL_CUDA_SHORT_WORK_NS \
  (HALO_HAL_CUDA_COMPLETION_SPIN_NS + HALO_HAL_CUDA_COMPLETION_NAP_MAX_NS)
// Work seen to take at most WORK (its recording's last duration), issued
// on the caller because the device was idle (halo_hal_cuda_thread_run_or_post),
// is waited for there where the completion path would have to wake up for
// it (halo_hal_cuda_execution_finish_on_caller). A recording not seen to
// finish yet counts as taking UNKNOWN (under HOST_FUNC only these waits
// see short durations: host functions see their own wake-up too, and
// record only long work, halo_hal_cuda_host_function); one
// seen longer than WORK, within short work, is tried as unknown again every
// RETRY-th time, so that a duration seen late (by a completion path that
// had to wake up) does not shut it out for good.
#define HALO_HAL_CUDA_CALLER_WAIT_WORK_NS 20000
#define HALO_HAL_CUDA_CALLER_WAIT_SLACK_NS 5000
#define HALO_HAL_CUDA_CALLER_WAIT_UNKNOWN_NS 10000
#define HALO_HAL_CUDA_CALLER_WAIT_RETRY 4
// THREAD completion: an unfinished execution's event is queried when its
// GPU stores landed, else at most this often (each query takes the
// context's lock, which the submission thread's launches need too). An
// execution without an event is watched through its stores; the device is
// asked for a sticky error (a stream query: the error is the context's)
// at most this often in all, not per execution: with 64 tenants on one
// worker every execution outlived it, a query each at the launch rate.
#define HALO_HAL_CUDA_COMPLETION_QUERY_NS 100000
// HOST_FUNC completion: how often the watchdog looks for a sticky error.
#define HALO_HAL_CUDA_WATCHDOG_NS 10000000
// Prune completed entries of the GPU store order map past this size.
#define HALO_HAL_CUDA_SIGNAL_ORDER_PRUNE 256

typedef struct halo_hal_cuda_queue_t halo_hal_cuda_queue_t;
typedef struct halo_hal_cuda_execution_t halo_hal_cuda_execution_t;

// The last GPU store of one semaphore (submission thread).
typedef struct halo_hal_cuda_signal_order_t {
  // Recorded after the store; NULL after an execution that recorded no
  // event (halo_hal_cuda_execution_needs_event): one is recorded on
  // |stream| when a later store on another stream must wait for it.
  halo_hal_cuda_event_t *event;
  CUstream stream;
  uint64_t value;  // the value it stores
  // Its slot's generation then (halo_hal_cuda_signal_order_current).
  uint32_t generation;
} halo_hal_cuda_signal_order_t;

typedef struct halo_hal_cuda_queue_shared_t {
  halo_hal_cuda_device_t *device;
  uint32_t queue_count;  // loop thread
  // Events recorded after each execution (halo_hal_cuda_execution_event_pool):
  // plain ones, and BLOCKING_SYNC ones for work the sleeper may wait on.
  halo_hal_cuda_event_pool_t events;
  halo_hal_cuda_event_pool_t sleep_events;
  atomic_bool lost;
  // The executions issued so far (each takes the next as its
  // |issue_sequence|, any issuing thread).
  _Atomic uint64_t issued;
  // THREAD: when the device is next asked for a sticky error on behalf of
  // the executions watched through their stores (the poller's, and a
  // caller's that waits for it).
  _Atomic int64_t next_sticky_query_ns;
  // The completion thread.
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t mutex;
  pthread_cond_t cond;  // CLOCK_MONOTONIC (the poller's timed naps)
  bool stopping;
  // THREAD: the sleeper (under |mutex|): the event handed to it, whether
  // it is waiting on one, and whether it returned since the poller looked.
  pthread_t sleeper;
  bool sleeper_started;
  pthread_cond_t sleeper_cond;
  halo_hal_cuda_event_t *sleeper_event;
  bool sleeper_busy;
  bool sleeper_woke;
  // THREAD: the poller waits on |cond| (idle, a nap, or for the sleeper).
  bool poller_asleep;
  // THREAD: executions handed over, not yet taken by the thread.
  halo_hal_cuda_execution_t *inbox_head;
  halo_hal_cuda_execution_t *inbox_tail;
  // THREAD: the inbox holds something (set with it, under |mutex|): with
  // work pending the poller's rounds look here, not at the mutex, which the
  // submission thread's hand-overs take.
  atomic_bool inbox_pending;
  // HOST_FUNC: executions whose host function has not run (doubly linked,
  // oldest first; halo_hal_cuda_execution_t by watch_link), and those the
  // watchdog failed after a sticky error, whose host functions will never
  // run (linked by next; freed at teardown).
  halo_list_t watch;
  halo_hal_cuda_execution_t *orphans;
  // Submission thread only: slot device address -> signal order.
  halo_u64_map_t signal_order;
  halo_hal_cuda_task_t teardown_task;
} halo_hal_cuda_queue_shared_t;

struct halo_hal_cuda_queue_t {
  halo_hal_queue_t base;
  halo_hal_cuda_device_t *device;
  halo_hal_cuda_queue_shared_t *shared;
  int32_t priority;
  int cuda_priority;
  // Submission thread: the pool's stream this queue took at its first
  // execution (NULL before), and that stream's handles. Set before the
  // completion path sees an execution of the queue, then constant.
  halo_hal_cuda_stream_t *pooled;
  CUstream stream;
  CUstream callback_stream;  // HOST_FUNC
  pthread_mutex_t mutex;
  pthread_cond_t idle;  // in_flight reached 0
  uint32_t in_flight;
  // Executions not waited for on the caller because their recording was
  // seen longer than that allows (halo_hal_cuda_execution_finish_on_caller).
  uint32_t caller_skips;
  // Submission thread (or its caller while it runs nothing): the queue's
  // execution that parked (for a wait fence or a graph instance), and those
  // run after it, held in order (by held_link) until it goes on:
  // issued before it on the queue's stream, a later execution's GPU store
  // of a semaphore would land before the earlier one's lower value, which
  // then hides it from its watchers for ever.
  halo_hal_cuda_execution_t *held_by;
  halo_list_t held;
  halo_hal_cuda_task_t destroy_task;
};

// A fence of one execution's device work (hal/fence.h). The fields below
// |base| belong to the submission thread.
typedef struct halo_hal_cuda_fence_t {
  halo_hal_fence_t base;
  halo_hal_cuda_event_t *event;  // bound: recorded after the producer's work
  CUstream stream;               // where it was recorded
  halo_status_t failure;         // failed: the producer never recorded it
  // Executions waiting for it to be bound or failed (linked by
  // parked_next); each holds a reference to the fence.
  halo_hal_cuda_execution_t *parked;
} halo_hal_cuda_fence_t;

struct halo_hal_cuda_execution_t {
  halo_hal_cuda_task_t task;  // first: the submission thread hands it back
  halo_hal_cuda_queue_t *queue;
  halo_hal_execution_t execution;
  halo_hal_cuda_issue_t issue;
  halo_hal_cuda_event_t *event;  // recorded after the work and the stores
  // Set on the submission thread before the completion path gets the
  // execution: it failed after part of its work was enqueued, and the
  // completion path reports a copy of this once that work finished (freed
  // with the execution).
  halo_status_t failure;
  // Its own fence until the submission thread binds or fails it (one
  // reference), and the fences it waits on (one reference each, released
  // at completion); |waits_enqueued| of them are waited on already.
  halo_hal_cuda_fence_t *fence;
  halo_hal_cuda_fence_t **wait_fences;
  uint32_t wait_fence_count;
  uint32_t waits_enqueued;
  halo_hal_cuda_execution_t *parked_next;  // in a fence's parked list
  halo_list_link_t held_link;              // in its queue's held list
  // THREAD: in the inbox, then the poller's list; HOST_FUNC: in the
  // orphans.
  halo_hal_cuda_execution_t *next;
  halo_list_link_t watch_link;  // HOST_FUNC: in shared->watch
  bool watched;                 // in shared->watch (under shared->mutex)
  atomic_bool completed;        // the completion callback ran (exactly once)
  // References: the submission's (run, then the completion path it hands
  // the execution to), and under HOST_FUNC the watch list's (then the
  // orphan list's, once the watchdog failed it). |host_reference|: the
  // host function holds the submission's; whoever clears it releases it
  // (the host function, or the teardown of a lost device whose host
  // functions never run).
  atomic_uint references;
  atomic_bool host_reference;
  // THREAD completion (the poller): when the event is queried next even if
  // the GPU stores have not landed, and whether the stores' sleepers were
  // woken already (also by execution_complete, on any path).
  int64_t next_query_ns;
  atomic_bool stores_woken;
  // When it was issued (before a wait on the caller) or else reached the
  // poller's inbox: its duration runs from here.
  int64_t handed_ns;
  // Failed while run on the caller: the submission thread ends it.
  halo_status_t caller_failure;
  // Its place among the device's issues (shared->issued), taken when its
  // work was issued: which of two executions on a stream runs first.
  uint64_t issue_sequence;
  // Set on the submission thread before the completion path gets the
  // execution: the signals whose GPU store was left out, behind a higher
  // value (halo_hal_cuda_signal_behind), a bit each (|left_out_word| for up
  // to 64 signals, else allocated with the execution). With any, its event
  // tells when it finished, queried each round (such a slot may stay below
  // its value until the higher store lands).
  uint64_t *left_out;
  uint64_t left_out_word;
};

static const halo_hal_queue_vtable_t halo_hal_cuda_queue_vtable;

//===----------------------------------------------------------------------===//
// Completion (any thread)
//===----------------------------------------------------------------------===//

static void halo_hal_cuda_execution_release(
    halo_hal_cuda_execution_t *execution) {
  if (atomic_fetch_sub_explicit(&execution->references, 1,
                                memory_order_acq_rel) == 1) {
    halo_status_free(execution->failure);
    free(execution->wait_fences);
    if (execution->left_out != &execution->left_out_word) {
      free(execution->left_out);
    }
    free(execution);
  }
}

// Any thread, no driver call: the last reference to a fence went.
static void halo_hal_cuda_fence_destroy(halo_hal_fence_t *base) {
  halo_hal_cuda_fence_t *fence = (halo_hal_cuda_fence_t *)base;
  if (fence->event) halo_hal_cuda_event_release(fence->event);
  halo_status_free(fence->failure);
  free(fence);
}

static const halo_hal_fence_vtable_t halo_hal_cuda_fence_vtable = {
    .destroy = halo_hal_cuda_fence_destroy,
};

// Once: wakes the futex sleepers of each of |execution|'s slots (an epoch
// bump: the GPU wrote the value), ahead of the host path's signal on the
// loop thread: a client asleep on its semaphore does not wait for the loop
// thread. For an execution a device worker took from a ring this is the
// only wake (halod's handling of the report moves no epoch:
// halo_hal_semaphore_signal_woken). A slot still below its value (a store
// left out: its higher one not landed yet) wakes early, which is harmless:
// waiters look again.
static void halo_hal_cuda_execution_wake_stores(
    halo_hal_cuda_execution_t *execution) {
  if (atomic_exchange(&execution->stores_woken, true)) return;
  const halo_hal_execution_t *hal = &execution->execution;
  for (uint32_t i = 0; i < hal->signal_count; ++i) {
    const halo_hal_execution_signal_t *signal = &hal->signals[i];
    if (signal->device_address && signal->slot) {
      halo_timeline_slot_notify(signal->slot);
    }
  }
}

// Whether every GPU store of |execution| that has a host view landed
// (true when none has one); then wakes the slots' sleepers. A later or a
// host signal may also have raised the value: that wakes early (harmless)
// and completes nothing by itself (the event decides, or the poller's
// halo_hal_cuda_execution_passed_on_stream).
static bool halo_hal_cuda_execution_stores_landed(
    halo_hal_cuda_execution_t *execution) {
  const halo_hal_execution_t *hal = &execution->execution;
  for (uint32_t i = 0; i < hal->signal_count; ++i) {
    const halo_hal_execution_signal_t *signal = &hal->signals[i];
    if (!signal->device_address || !signal->slot) continue;
    if (atomic_load_explicit(&signal->slot->value, memory_order_acquire) <
        signal->value) {
      return false;
    }
  }
  halo_hal_cuda_execution_wake_stores(execution);
  return true;
}

// Whether a GPU store of |execution|'s signals was left out.
static bool halo_hal_cuda_execution_left_out_any(
    const halo_hal_cuda_execution_t *execution) {
  uint32_t words = (execution->execution.signal_count + 63) / 64;
  for (uint32_t w = 0; w < words; ++w) {
    if (execution->left_out[w]) return true;
  }
  return false;
}

// Reports the outcome once (the first caller wins; later ones free their
// |status|). No driver call: legal in a host function.
static void halo_hal_cuda_execution_complete(
    halo_hal_cuda_execution_t *execution, halo_status_t status) {
  bool expected = false;
  if (!atomic_compare_exchange_strong(&execution->completed, &expected, true)) {
    halo_status_free(status);
    return;
  }
  halo_hal_cuda_queue_t *queue = execution->queue;
  if (!status && execution->failure) {
    status = halo_status_make(halo_status_code(execution->failure), "%s",
                              halo_status_message(execution->failure));
  }
  // Finished work: the stores it made landed; wake their sleepers now.
  if (!status) halo_hal_cuda_execution_wake_stores(execution);
  halo_hal_cuda_command_buffer_retire(&execution->issue);
  if (execution->event) {
    halo_hal_cuda_event_release(execution->event);
    execution->event = NULL;
  }
  // The submission thread resolved its own fence before any path that
  // completes it; the fences it waited on are done with.
  for (uint32_t i = 0; i < execution->wait_fence_count; ++i) {
    halo_hal_fence_release(&execution->wait_fences[i]->base);
    execution->wait_fences[i] = NULL;
  }
  execution->wait_fence_count = 0;
  execution->execution.completion(execution->execution.user_data, status);
  // Last: once in_flight drops, destroy may free the queue.
  pthread_mutex_lock(&queue->mutex);
  if (--queue->in_flight == 0) pthread_cond_broadcast(&queue->idle);
  pthread_mutex_unlock(&queue->mutex);
}

// A sticky error: the context is gone for good. The first report goes to
// the daemon (device->lost, with the error in device->lost_result: 0 when
// unknown); every later execution fails at once.
static void halo_hal_cuda_queue_report_lost(
    halo_hal_cuda_queue_shared_t *shared, const halo_status_t status,
    CUresult result) {
  if (atomic_exchange(&shared->lost, true)) return;
  halo_hal_cuda_device_t *device = shared->device;
  device->lost_result = (int32_t)result;
  halo_status_t copy = halo_status_make(
      HALO_STATUS_DEVICE_LOST, "CUDA device %u (%s) lost: %s", device->ordinal,
      device->base.info.name, halo_status_message(status));
  HALO_LOG_ERROR("%s", halo_status_message(copy));
  if (device->lost) {
    device->lost(device->lost_user_data, device, copy);
  } else {
    halo_status_free(copy);
  }
}

static halo_status_t halo_hal_cuda_queue_lost_status(
    halo_hal_cuda_queue_shared_t *shared) {
  return halo_status_make(HALO_STATUS_DEVICE_LOST,
                          "CUDA device %u was lost (a sticky error poisoned "
                          "its context); halod restarts",
                          shared->device->ordinal);
}

// A status for |result| of |call| on a finished execution's event; reports
// the device lost for a sticky error.
static halo_status_t halo_hal_cuda_queue_event_status(
    halo_hal_cuda_queue_shared_t *shared, CUresult result, const char *call) {
  halo_status_t status =
      halo_hal_cuda_result_to_status(shared->device->cu, result, call);
  if (halo_hal_cuda_result_is_sticky(result)) {
    halo_hal_cuda_queue_report_lost(shared, status, result);
  }
  return status;
}

//===----------------------------------------------------------------------===//
// The completion thread
//===----------------------------------------------------------------------===//

static void halo_hal_cuda_nap(int64_t ns) {
  struct timespec delay = {.tv_sec = 0, .tv_nsec = ns};
  nanosleep(&delay, NULL);
}

// Waits on |cond| (CLOCK_MONOTONIC) for at most |ns|; |mutex| held.
static void halo_hal_cuda_cond_nap(pthread_cond_t *cond, pthread_mutex_t *mutex,
                                   int64_t ns) {
  struct timespec until = halo_clock_timespec(halo_clock_now_ns() + ns);
  pthread_cond_timedwait(cond, mutex, &until);
}

// Fails every execution of |list| (singly linked by next) with a copy of
// |status|.
static void halo_hal_cuda_fail_list(halo_hal_cuda_execution_t *list,
                                    halo_status_t status) {
  while (list) {
    halo_hal_cuda_execution_t *next = list->next;
    halo_hal_cuda_execution_complete(
        list, halo_status_make(halo_status_code(status), "%s",
                               halo_status_message(status)));
    halo_hal_cuda_execution_release(list);
    list = next;
  }
}

// Records a plain event (nothing sleeps on it) on |stream| now, after the
// work enqueued there, into *out_event; NULL there on failure, with the
// result (CUDA_ERROR_OUT_OF_MEMORY when no event could be had).
static CUresult halo_hal_cuda_record_event_now(
    halo_hal_cuda_queue_shared_t *shared, CUstream stream,
    halo_hal_cuda_event_t **out_event) {
  halo_status_t status =
      halo_hal_cuda_event_pool_acquire(&shared->events, out_event);
  if (status) {
    halo_status_free(status);
    *out_event = NULL;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult result =
      shared->device->cu->cuEventRecord((*out_event)->handle, stream);
  if (result != CUDA_SUCCESS) {
    halo_hal_cuda_event_release(*out_event);
    *out_event = NULL;
  }
  return result;
}

// The poller: whether each slot of |execution| that is past its value
// holds exactly the value a later execution on the same stream signals
// there (one in the poller's list after |execution|, issued after it). That
// execution is still pending, so only its own store can have put the value
// there (a value is reserved by one submission, no host signal may go at or
// below a pending one, and halod signals it only after its completion):
// its work finished, and |execution|'s before it, since the stream runs in
// order. A client that waits for each step before its next submits the
// next one as soon as it sees its value, so a poller that looks late
// (descheduled for a step) finds the slot one value on; without this it
// recorded an event then, after the next step's work, saw that step's slot
// past in its turn, and stayed a step behind with a driver call per
// execution (T8's slow rounds: docs/performance.md). Best effort: where the
// later execution is not in the list yet (handed over after this round
// began), the event is recorded as before.
static bool halo_hal_cuda_execution_passed_on_stream(
    const halo_hal_cuda_execution_t *execution) {
  const halo_hal_execution_t *hal = &execution->execution;
  CUstream stream = execution->queue->stream;
  for (uint32_t i = 0; i < hal->signal_count; ++i) {
    const halo_timeline_slot_t *slot = hal->signals[i].slot;
    uint64_t value = atomic_load_explicit(&slot->value, memory_order_acquire);
    if (value == hal->signals[i].value) continue;
    bool passed = false;
    for (const halo_hal_cuda_execution_t *later = execution->next;
         later && !passed; later = later->next) {
      if (later->queue->stream != stream ||
          later->issue_sequence <= execution->issue_sequence) {
        continue;
      }
      const halo_hal_execution_t *other = &later->execution;
      for (uint32_t j = 0; j < other->signal_count && !passed; ++j) {
        passed =
            other->signals[j].slot == slot && other->signals[j].value == value;
      }
    }
    if (!passed) return false;
  }
  return true;
}

// THREAD completion, an execution without an event
// (halo_hal_cuda_execution_needs_event): CUDA_SUCCESS once every slot holds
// exactly its value (its own stores landed, so its work finished before
// them) or the value of a later execution on its stream
// (halo_hal_cuda_execution_passed_on_stream), CUDA_ERROR_NOT_READY while
// one is below. A slot past its value otherwise (a host signal) hides
// whether its store landed, and a failed semaphore may be left behind:
// then an event recorded now on its stream comes after the work, and the
// execution is watched through it from now on. Its stream is asked for a
// sticky error once the device's next query is due (every
// HALO_HAL_CUDA_COMPLETION_QUERY_NS for all such executions; *call names
// what failed).
static CUresult halo_hal_cuda_execution_poll_stores(
    halo_hal_cuda_queue_shared_t *shared, halo_hal_cuda_execution_t *execution,
    int64_t round_ns, const char **call) {
  const halo_hal_execution_t *hal = &execution->execution;
  bool below = false, past = false, failed = false;
  for (uint32_t i = 0; i < hal->signal_count; ++i) {
    const halo_timeline_slot_t *slot = hal->signals[i].slot;
    uint64_t value = atomic_load_explicit(&slot->value, memory_order_acquire);
    below |= value < hal->signals[i].value;
    past |= value > hal->signals[i].value;
    failed |= atomic_load_explicit(&slot->failure, memory_order_acquire) != 0;
  }
  if (!below && !failed &&
      (!past || halo_hal_cuda_execution_passed_on_stream(execution))) {
    halo_hal_cuda_execution_stores_landed(execution);  // wakes the sleepers
    return CUDA_SUCCESS;
  }
  const halo_hal_cuda_symbols_t *cu = shared->device->cu;
  CUstream stream = execution->queue->stream;
  if (!below || failed) {
    *call = "cuEventRecord";
    CUresult result =
        halo_hal_cuda_record_event_now(shared, stream, &execution->event);
    if (result == CUDA_ERROR_OUT_OF_MEMORY) return CUDA_ERROR_NOT_READY;
    if (result != CUDA_SUCCESS) return result;  // (tried again next round)
    execution->next_query_ns = round_ns + HALO_HAL_CUDA_COMPLETION_QUERY_NS;
    *call = "cuEventQuery";
    return cu->cuEventQuery(execution->event->handle);
  }
  // An execution younger than the interval, or the device asked lately:
  // nothing to ask.
  if (round_ns < execution->next_query_ns) return CUDA_ERROR_NOT_READY;
  int64_t due =
      atomic_load_explicit(&shared->next_sticky_query_ns, memory_order_relaxed);
  if (round_ns < due || !atomic_compare_exchange_strong_explicit(
                            &shared->next_sticky_query_ns, &due,
                            round_ns + HALO_HAL_CUDA_COMPLETION_QUERY_NS,
                            memory_order_relaxed, memory_order_relaxed)) {
    return CUDA_ERROR_NOT_READY;
  }
  *call = "cuStreamQuery";
  CUresult result = cu->cuStreamQuery(stream);
  // Idle or busy, the stores say when it finished; any error fails it (an
  // error outside the sticky list too: this execution has no event whose
  // query would report it, so it would otherwise wait for ever).
  return result == CUDA_SUCCESS ? CUDA_ERROR_NOT_READY : result;
}

// Whether |execution| finished (CUDA_SUCCESS), not yet
// (CUDA_ERROR_NOT_READY) or failed (*call names what failed): through its
// stores where it recorded no event; else the GPU stores landing (a load
// from host memory, no driver call) say when to query its event, which is
// still queried every HALO_HAL_CUDA_COMPLETION_QUERY_NS (for an error, or a
// store that another signal's value hides). The poller's look, and the
// caller's that waits for it (halo_hal_cuda_execution_finish_on_caller).
static CUresult halo_hal_cuda_execution_query(
    halo_hal_cuda_queue_shared_t *shared, halo_hal_cuda_execution_t *execution,
    int64_t now_ns, const char **call) {
  *call = "cuEventQuery";
  if (!execution->event) {
    return halo_hal_cuda_execution_poll_stores(shared, execution, now_ns, call);
  }
  if (!halo_hal_cuda_execution_left_out_any(execution) &&
      !halo_hal_cuda_execution_stores_landed(execution) &&
      now_ns < execution->next_query_ns) {
    return CUDA_ERROR_NOT_READY;
  }
  execution->next_query_ns = now_ns + HALO_HAL_CUDA_COMPLETION_QUERY_NS;
  return shared->device->cu->cuEventQuery(execution->event->handle);
}

// THREAD completion: the poller. Never blocks in the driver (see the top
// of the file).
static void halo_hal_cuda_completion_poll(
    halo_hal_cuda_queue_shared_t *shared) {
  // Timed naps of a few microseconds: without this the kernel's default
  // timer slack (50 us) would stretch each of them.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  halo_hal_cuda_execution_t *head = NULL;
  halo_hal_cuda_execution_t **tail = &head;
  // Rounds go on from the device's previous completion thread: the pool's
  // streams keep the rounds in which they were blocked.
  halo_hal_cuda_stream_pool_t *streams = &shared->device->streams;
  uint64_t round = streams->poll_round;
  int64_t progress_ns = halo_clock_now_ns();
  // The gap before the previous completion: from the progress before it
  // (new work or a completion) to it (halo_clock_spin_window_ns).
  int64_t previous_gap_ns = 0;
  int64_t nap_ns = 0;
  bool stopping = false;
  for (;;) {
    // With work pending and nothing new handed over, a round takes no lock
    // (stopping matters once nothing is pending).
    if (!head ||
        atomic_load_explicit(&shared->inbox_pending, memory_order_acquire)) {
      pthread_mutex_lock(&shared->mutex);
      while (!shared->inbox_head && !head && !shared->stopping) {
        shared->poller_asleep = true;
        pthread_cond_wait(&shared->cond, &shared->mutex);
        shared->poller_asleep = false;
      }
      if (shared->inbox_head) {
        // New work: spin again if any of it is expected to be short (its
        // recording's last duration as seen here; unknown counts as short);
        // where all of it is expected to take longer and nothing else is
        // pending, wait for it without spinning.
        bool short_work = false;
        for (halo_hal_cuda_execution_t *fresh = shared->inbox_head;
             fresh && !short_work; fresh = fresh->next) {
          short_work = halo_hal_cuda_command_buffer_expected_ns(
                           fresh->execution.command_buffer) <=
                       HALO_HAL_CUDA_SHORT_WORK_NS;
        }
        if (short_work) {
          previous_gap_ns = 0;
        } else if (!head) {
          previous_gap_ns = INT64_MAX;
        }
        *tail = shared->inbox_head;
        tail = &shared->inbox_tail->next;
        shared->inbox_head = shared->inbox_tail = NULL;
        atomic_store_explicit(&shared->inbox_pending, false,
                              memory_order_relaxed);
        progress_ns = halo_clock_now_ns();
        nap_ns = 0;
      }
      shared->sleeper_woke = false;
      stopping = shared->stopping;
      pthread_mutex_unlock(&shared->mutex);
      if (!head && stopping) break;
    }
    streams->poll_round = ++round;
    int64_t round_ns = halo_clock_now_ns();
    bool progress = false;
    uint32_t blocked_streams = 0;
    halo_hal_cuda_execution_t *first_blocked = NULL;
    halo_status_t lost = NULL;
    for (halo_hal_cuda_execution_t **link = &head; *link;) {
      halo_hal_cuda_execution_t *execution = *link;
      halo_hal_cuda_stream_t *stream = execution->queue->pooled;
      if (stream->blocked_round == round) {  // an older one is still running
        link = &execution->next;
        continue;
      }
      const char *call;
      CUresult result =
          halo_hal_cuda_execution_query(shared, execution, round_ns, &call);
      if (result == CUDA_ERROR_NOT_READY) {
        stream->blocked_round = round;
        ++blocked_streams;
        // Only a BLOCKING_SYNC event goes to the sleeper (see
        // halo_hal_cuda_execution_event_pool).
        if (!first_blocked && execution->event &&
            halo_hal_cuda_event_blocks(execution->event)) {
          first_blocked = execution;
        }
        link = &execution->next;
        continue;
      }
      *link = execution->next;
      if (!*link) tail = link;
      execution->next = NULL;
      if (result == CUDA_SUCCESS) {
        halo_hal_cuda_command_buffer_record_duration(
            execution->execution.command_buffer,
            round_ns - execution->handed_ns);
      }
      halo_status_t status = NULL;
      if (result != CUDA_SUCCESS) {
        status = halo_hal_cuda_queue_event_status(shared, result, call);
        if (halo_hal_cuda_result_is_sticky(result)) {
          lost = halo_status_make(halo_status_code(status), "%s",
                                  halo_status_message(status));
        }
      }
      halo_hal_cuda_execution_complete(execution, status);
      halo_hal_cuda_execution_release(execution);
      progress = true;
      if (lost) break;
    }
    if (lost) {
      // Nothing pending will finish: fail all of it now.
      halo_hal_cuda_fail_list(head, lost);
      head = NULL;
      tail = &head;
      halo_status_free(lost);
      continue;
    }
    int64_t now = halo_clock_now_ns();
    if (progress) {
      previous_gap_ns = now - progress_ns;
      progress_ns = now;
      nap_ns = 0;
      continue;
    }
    if (!head) continue;
    if (now - progress_ns <
        halo_clock_spin_window_ns(previous_gap_ns,
                                  HALO_HAL_CUDA_COMPLETION_SPIN_NS)) {
      sched_yield();
      continue;
    }
    // Nothing finished for a while: the oldest unfinished event goes to the
    // sleeper (an exact wake when it finishes), and the poller naps, longer
    // each time; new work or the sleeper's return ends a nap early. Where
    // every pending execution is on that event's stream (one stream
    // blocked), nothing can finish before the sleeper returns: the poller
    // waits for it (or new work) without a timeout.
    nap_ns = nap_ns ? nap_ns * 2 : HALO_HAL_CUDA_COMPLETION_NAP_FIRST_NS;
    if (nap_ns > HALO_HAL_CUDA_COMPLETION_NAP_MAX_NS) {
      nap_ns = HALO_HAL_CUDA_COMPLETION_NAP_MAX_NS;
    }
    pthread_mutex_lock(&shared->mutex);
    if (first_blocked && shared->sleeper_started && !shared->sleeper_busy) {
      halo_hal_cuda_event_retain(first_blocked->event);
      shared->sleeper_event = first_blocked->event;
      shared->sleeper_busy = true;
      pthread_cond_signal(&shared->sleeper_cond);
    }
    // The sleeper returned since the round looked: look again first.
    bool sleeper_woke = shared->sleeper_woke;
    shared->sleeper_woke = false;
    if (!shared->inbox_head && !shared->stopping && !sleeper_woke) {
      shared->poller_asleep = true;
      if (blocked_streams == 1 && shared->sleeper_busy) {
        pthread_cond_wait(&shared->cond, &shared->mutex);
      } else {
        halo_hal_cuda_cond_nap(&shared->cond, &shared->mutex, nap_ns);
      }
      shared->poller_asleep = false;
    }
    pthread_mutex_unlock(&shared->mutex);
  }
}

// THREAD completion: the sleeper blocks in cuEventSynchronize on the event
// the poller hands it (holding a reference, so the pool cannot reuse it),
// then wakes the poller. Whatever the result, the poller's next query
// finds it (an error included).
static void *halo_hal_cuda_sleeper_main(void *arg) {
  halo_hal_cuda_queue_shared_t *shared = arg;
  char name[16];
  snprintf(name, sizeof(name), "halo-cu%u-sleep", shared->device->ordinal);
  pthread_setname_np(pthread_self(), name);
  halo_status_t status = halo_hal_cuda_device_make_current(shared->device);
  if (status) {
    HALO_LOG_ERROR("%s: %s", name, halo_status_message(status));
    halo_status_free(status);
  }
  const halo_hal_cuda_symbols_t *cu = shared->device->cu;
  pthread_mutex_lock(&shared->mutex);
  for (;;) {
    while (!shared->sleeper_event && !shared->stopping) {
      pthread_cond_wait(&shared->sleeper_cond, &shared->mutex);
    }
    halo_hal_cuda_event_t *event = shared->sleeper_event;
    shared->sleeper_event = NULL;
    if (!event) break;  // stopping
    pthread_mutex_unlock(&shared->mutex);
    cu->cuEventSynchronize(event->handle);
    halo_hal_cuda_event_release(event);
    pthread_mutex_lock(&shared->mutex);
    shared->sleeper_busy = false;
    shared->sleeper_woke = true;
    pthread_cond_broadcast(&shared->cond);
  }
  pthread_mutex_unlock(&shared->mutex);
  return NULL;
}

// HOST_FUNC: the execution of |link|, in shared->watch (NULL: none).
static halo_hal_cuda_execution_t *halo_hal_cuda_watched_of(
    halo_list_link_t *link) {
  return HALO_LIST_ENTRY(link, halo_hal_cuda_execution_t, watch_link);
}

// HOST_FUNC: host functions complete executions; this thread only watches
// for a sticky error (host functions never run after one).
static void halo_hal_cuda_completion_watch(
    halo_hal_cuda_queue_shared_t *shared) {
  const halo_hal_cuda_symbols_t *cu = shared->device->cu;
  pthread_mutex_lock(&shared->mutex);
  while (!shared->stopping) {
    if (halo_list_empty(&shared->watch)) {
      pthread_cond_wait(&shared->cond, &shared->mutex);
      continue;
    }
    halo_hal_cuda_event_t *event =
        halo_hal_cuda_watched_of(shared->watch.head)->event;
    halo_hal_cuda_event_retain(event);
    pthread_mutex_unlock(&shared->mutex);
    CUresult result = cu->cuEventQuery(event->handle);
    halo_hal_cuda_event_release(event);
    // Only a sticky error stops host functions: after any other the
    // executions' host functions still run and complete them (failing them
    // here would let their recordings and graph instances go while their
    // launches are pending, and the host functions touch them after).
    if (halo_hal_cuda_result_is_sticky(result)) {
      halo_status_t status =
          halo_hal_cuda_queue_event_status(shared, result, "cuEventQuery");
      pthread_mutex_lock(&shared->mutex);
      halo_list_t list = halo_list_take_all(&shared->watch);
      for (halo_list_link_t *link = list.head; link; link = link->next) {
        halo_hal_cuda_watched_of(link)->watched = false;
      }
      pthread_mutex_unlock(&shared->mutex);
      // Their host functions never run now: fail them here. Each keeps the
      // watch list's reference on the orphan list until teardown. (|list|
      // is this thread's alone: nothing else touches an execution's
      // watch_link once |watched| is false.)
      while (!halo_list_empty(&list)) {
        halo_hal_cuda_execution_t *execution =
            halo_hal_cuda_watched_of(list.head);
        halo_list_remove(&list, &execution->watch_link);
        halo_hal_cuda_execution_complete(
            execution, halo_status_make(halo_status_code(status), "%s",
                                        halo_status_message(status)));
        pthread_mutex_lock(&shared->mutex);
        execution->next = shared->orphans;
        shared->orphans = execution;
        pthread_mutex_unlock(&shared->mutex);
      }
      halo_status_free(status);
      pthread_mutex_lock(&shared->mutex);
      continue;
    }
    halo_hal_cuda_nap(HALO_HAL_CUDA_WATCHDOG_NS);
    pthread_mutex_lock(&shared->mutex);
  }
  pthread_mutex_unlock(&shared->mutex);
}

static void *halo_hal_cuda_completion_main(void *arg) {
  halo_hal_cuda_queue_shared_t *shared = arg;
  char name[16];
  snprintf(name, sizeof(name), "halo-cu%u-done", shared->device->ordinal);
  pthread_setname_np(pthread_self(), name);
  halo_status_t status = halo_hal_cuda_device_make_current(shared->device);
  if (status) {
    // Every query then fails and names the call.
    HALO_LOG_ERROR("%s: %s", name, halo_status_message(status));
    halo_status_free(status);
  }
  if (shared->device->options.completion ==
      HALO_HAL_CUDA_COMPLETION_HOST_FUNC) {
    halo_hal_cuda_completion_watch(shared);
  } else {
    halo_hal_cuda_completion_poll(shared);
  }
  return NULL;
}

static void CUDA_CB halo_hal_cuda_host_function(void *user_data) {
  halo_hal_cuda_execution_t *execution = user_data;
  halo_hal_cuda_queue_shared_t *shared = execution->queue->shared;
  int64_t now = halo_clock_now_ns();
  bool unlinked = false;
  pthread_mutex_lock(&shared->mutex);
  if (execution->watched) {
    halo_list_remove(&shared->watch, &execution->watch_link);
    execution->watched = false;
    unlinked = true;
  }
  pthread_mutex_unlock(&shared->mutex);
  if (unlinked) {
    // This host function completes the execution (the watchdog did not
    // fail it first), so its recording is still alive. The work's duration
    // plus this thread's wake-up, which stays well within short work on a
    // GPU: recorded where it says the work is long, so that an issuing
    // thread stops waiting for it in vain (finish_on_caller gave up after
    // its own short wait and recorded that), and where the recording was
    // seen long, so that one late wake-up does not shut short work out for
    // good.
    halo_hal_command_buffer_t *command_buffer =
        execution->execution.command_buffer;
    int64_t took = now - execution->handed_ns;
    if (took > HALO_HAL_CUDA_SHORT_WORK_NS ||
        halo_hal_cuda_command_buffer_expected_ns(command_buffer) >
            HALO_HAL_CUDA_SHORT_WORK_NS) {
      halo_hal_cuda_command_buffer_record_duration(command_buffer, took);
    }
  }
  halo_hal_cuda_execution_complete(execution, NULL);
  if (unlinked) halo_hal_cuda_execution_release(execution);  // the watch's
  if (atomic_exchange(&execution->host_reference, false)) {
    halo_hal_cuda_execution_release(execution);  // the submission's
  }
}

//===----------------------------------------------------------------------===//
// Shared state (loop thread; teardown on the submission thread)
//===----------------------------------------------------------------------===//

static halo_status_t halo_hal_cuda_queue_shared_acquire(
    halo_hal_cuda_device_t *device, halo_hal_cuda_queue_shared_t **out_shared) {
  *out_shared = NULL;
  halo_hal_cuda_queue_shared_t *shared = device->queue_shared;
  if (shared) {
    ++shared->queue_count;
    *out_shared = shared;
    return NULL;
  }
  shared = calloc(1, sizeof(*shared));
  if (!shared) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  shared->device = device;
  halo_hal_cuda_event_pool_initialize(&shared->events, device->cu, 0);
  halo_hal_cuda_event_pool_initialize(&shared->sleep_events, device->cu,
                                      CU_EVENT_BLOCKING_SYNC);
  halo_mutex_initialize(&shared->mutex);
  halo_clock_cond_initialize(&shared->cond);
  pthread_cond_init(&shared->sleeper_cond, NULL);
  halo_u64_map_initialize(&shared->signal_order);
  atomic_init(&shared->lost, false);
  atomic_init(&shared->issued, 0);
  int error = pthread_create(&shared->thread, NULL,
                             halo_hal_cuda_completion_main, shared);
  if (error == 0) {
    shared->thread_started = true;
    if (device->options.completion == HALO_HAL_CUDA_COMPLETION_THREAD) {
      error = pthread_create(&shared->sleeper, NULL, halo_hal_cuda_sleeper_main,
                             shared);
      shared->sleeper_started = error == 0;
    }
  }
  if (error != 0) {
    pthread_mutex_lock(&shared->mutex);
    shared->stopping = true;
    pthread_cond_broadcast(&shared->cond);
    pthread_mutex_unlock(&shared->mutex);
    if (shared->thread_started) pthread_join(shared->thread, NULL);
    halo_u64_map_deinitialize(&shared->signal_order);
    pthread_cond_destroy(&shared->sleeper_cond);
    pthread_cond_destroy(&shared->cond);
    pthread_mutex_destroy(&shared->mutex);
    halo_hal_cuda_event_pool_deinitialize(&shared->events);
    halo_hal_cuda_event_pool_deinitialize(&shared->sleep_events);
    free(shared);
    return halo_status_from_errno(error,
                                  "starting the completion threads of CUDA "
                                  "device %u",
                                  device->ordinal);
  }
  shared->queue_count = 1;
  device->queue_shared = shared;
  *out_shared = shared;
  return NULL;
}

// Submission thread: the driver objects go.
static void halo_hal_cuda_queue_shared_teardown(halo_hal_cuda_task_t *task) {
  halo_hal_cuda_queue_shared_t *shared =
      (halo_hal_cuda_queue_shared_t *)((char *)task -
                                       offsetof(halo_hal_cuda_queue_shared_t,
                                                teardown_task));
  // A lost device's host functions never ran: their references go now.
  while (shared->orphans) {
    halo_hal_cuda_execution_t *orphan = shared->orphans;
    shared->orphans = orphan->next;
    if (atomic_exchange(&orphan->host_reference, false)) {
      halo_hal_cuda_execution_release(orphan);
    }
    halo_hal_cuda_execution_release(orphan);
  }
  for (size_t i = 0; i < shared->signal_order.capacity; ++i) {
    if (!shared->signal_order.entries[i].key) continue;
    halo_hal_cuda_signal_order_t *order = shared->signal_order.entries[i].value;
    if (order->event) halo_hal_cuda_event_release(order->event);
    free(order);
  }
  halo_u64_map_deinitialize(&shared->signal_order);
  halo_hal_cuda_event_pool_deinitialize(&shared->events);
  halo_hal_cuda_event_pool_deinitialize(&shared->sleep_events);
  pthread_cond_destroy(&shared->sleeper_cond);
  pthread_cond_destroy(&shared->cond);
  pthread_mutex_destroy(&shared->mutex);
  free(shared);
}

static void halo_hal_cuda_queue_shared_release(
    halo_hal_cuda_queue_shared_t *shared) {
  if (--shared->queue_count > 0) return;
  halo_hal_cuda_device_t *device = shared->device;
  device->queue_shared = NULL;
  // Nothing is pending (every queue waited for its executions).
  pthread_mutex_lock(&shared->mutex);
  shared->stopping = true;
  pthread_cond_broadcast(&shared->cond);
  pthread_cond_broadcast(&shared->sleeper_cond);
  pthread_mutex_unlock(&shared->mutex);
  if (shared->thread_started) pthread_join(shared->thread, NULL);
  if (shared->sleeper_started) pthread_join(shared->sleeper, NULL);
  shared->teardown_task.run = halo_hal_cuda_queue_shared_teardown;
  halo_hal_cuda_thread_post(&device->submission, &shared->teardown_task);
}

//===----------------------------------------------------------------------===//
// Submission thread
//===----------------------------------------------------------------------===//

// The queue's first execution takes the pool's stream of its priority with
// the fewest queues on it (creating that priority's streams if none of its
// queues ran yet).
static halo_status_t halo_hal_cuda_queue_take_stream(
    halo_hal_cuda_queue_t *queue) {
  if (queue->pooled) return NULL;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_stream_pool_acquire(
      &queue->device->streams, queue->cuda_priority, &queue->pooled));
  queue->stream = queue->pooled->stream;
  queue->callback_stream = queue->pooled->callback_stream;
  return NULL;
}

// Whether |execution|'s recording was seen to finish, within short work.
static bool halo_hal_cuda_execution_seen_short(
    const halo_hal_cuda_execution_t *execution) {
  int64_t expected = halo_hal_cuda_command_buffer_expected_ns(
      execution->execution.command_buffer);
  return expected != 0 && expected <= HALO_HAL_CUDA_SHORT_WORK_NS;
}

// The pool of the event recorded after |execution|'s work. The sleeper
// waits only on BLOCKING_SYNC events: cuEventSynchronize on another spins
// a core for as long as the GPU works (the primary context's default
// scheduling spins while the process has fewer contexts than CPUs:
// halod's CPU per step on the H100 was the step's whole length, 946 of
// 1188 us, before these events). But recording a BLOCKING_SYNC event
// costs the submission thread 2.2 us instead of 0.6 (H100, driver 580),
// and the driver's event thread 2 us more per execution: a third of the
// submission thread's time per small execution. So only work the poller
// may hand the sleeper gets one: under THREAD completion, a recording not
// yet seen to finish or seen to take longer than short work; work seen to
// be short is polled to its end (spin, then naps of at most
// HALO_HAL_CUDA_COMPLETION_NAP_MAX_NS).
static halo_hal_cuda_event_pool_t *halo_hal_cuda_execution_event_pool(
    const halo_hal_cuda_execution_t *execution) {
  halo_hal_cuda_queue_t *queue = execution->queue;
  if (queue->device->options.completion == HALO_HAL_CUDA_COMPLETION_THREAD &&
      !halo_hal_cuda_execution_seen_short(execution)) {
    return &queue->shared->sleep_events;
  }
  return &queue->shared->events;
}

// Records an event on |order|'s stream, after its store, where it has none.
// On failure |order| keeps none (a later store then orders after nothing;
// its own calls report the device's state).
static void halo_hal_cuda_signal_order_record(
    halo_hal_cuda_queue_shared_t *shared, halo_hal_cuda_signal_order_t *order) {
  if (!order->event) {
    halo_hal_cuda_record_event_now(shared, order->stream, &order->event);
  }
}

// Drops the entries whose stores completed long ago.
static void halo_hal_cuda_signal_order_prune(
    halo_hal_cuda_queue_shared_t *shared) {
  const halo_hal_cuda_symbols_t *cu = shared->device->cu;
  halo_u64_map_t *map = &shared->signal_order;
  uint64_t *done = calloc(map->count + 1, sizeof(uint64_t));
  if (!done) return;
  size_t done_count = 0;
  for (size_t i = 0; i < map->capacity; ++i) {
    if (!map->entries[i].key) continue;
    halo_hal_cuda_signal_order_t *order = map->entries[i].value;
    if (!order->event) {
      // Its store's landing is known through an event only: one recorded
      // now comes after it (and is looked at in the next prune).
      halo_hal_cuda_signal_order_record(shared, order);
      continue;
    }
    if (cu->cuEventQuery(order->event->handle) == CUDA_SUCCESS) {
      done[done_count++] = map->entries[i].key;
    }
  }
  for (size_t i = 0; i < done_count; ++i) {
    halo_hal_cuda_signal_order_t *order = halo_u64_map_remove(map, done[i]);
    halo_hal_cuda_event_release(order->event);
    free(order);
  }
  free(done);
}

// Whether |order| is of the semaphore |signal| signals now, not of one
// that used the slot before (retired, its slot's generation bumped: the
// values of the slot's next semaphore start again).
static bool halo_hal_cuda_signal_order_current(
    const halo_hal_cuda_signal_order_t *order,
    const halo_hal_execution_signal_t *signal) {
  return !signal->slot ||
         order->generation == atomic_load_explicit(&signal->slot->generation,
                                                   memory_order_acquire);
}

// Whether |signal|'s GPU store would land below its semaphore's value: the
// slot holds a higher value already (a host signal went past it), or a
// store of a higher value was issued before it (*order: an execution that
// parked while another queue's later signal of the semaphore went ahead;
// landed, it shows in the slot). Such a store is left out: landing after
// the higher one, a plain write, it would put the lower value back, and a
// watcher of the higher value, or an execution watched through its stores,
// would wait for ever. The execution records an event instead
// (halo_hal_cuda_execution_needs_event), and the host path signals its
// value once it finished (a signal never lowers a value). An entry of a
// semaphore that used the slot before is dropped (*order NULL).
static bool halo_hal_cuda_signal_behind(
    halo_hal_cuda_queue_shared_t *shared, halo_hal_cuda_signal_order_t **order,
    const halo_hal_execution_signal_t *signal) {
  if (signal->slot &&
      atomic_load_explicit(&signal->slot->value, memory_order_acquire) >
          signal->value) {
    return true;
  }
  if (*order && !halo_hal_cuda_signal_order_current(*order, signal)) {
    halo_u64_map_remove(&shared->signal_order, signal->device_address);
    if ((*order)->event) halo_hal_cuda_event_release((*order)->event);
    free(*order);
    *order = NULL;
  }
  return *order && (*order)->value > signal->value;
}

// Whether the previous GPU store of |signal|'s semaphore (|order|) was
// issued on another stream than |queue|'s and may not have landed: the
// next store must wait for it (halo_hal_cuda_execution_store_signals).
static bool halo_hal_cuda_signal_needs_order(
    halo_hal_cuda_queue_t *queue, const halo_hal_execution_signal_t *signal,
    const halo_hal_cuda_signal_order_t *order) {
  // A store that recorded no event needs none once its slot shows exactly
  // its value (past it, a host signal may hide whether it landed).
  bool landed = order && !order->event && signal->slot &&
                atomic_load_explicit(&signal->slot->value,
                                     memory_order_acquire) == order->value;
  return order && order->stream != queue->stream && !landed;
}

// The last GPU store of the semaphore of |execution|'s signal |index|
// (*out_order, if one is kept), and whether its own store is left out
// (halo_hal_cuda_signal_behind), then marked so.
static bool halo_hal_cuda_execution_leaves_out(
    halo_hal_cuda_execution_t *execution, uint32_t index,
    halo_hal_cuda_signal_order_t **out_order) {
  halo_hal_cuda_queue_shared_t *shared = execution->queue->shared;
  const halo_hal_execution_signal_t *signal =
      &execution->execution.signals[index];
  *out_order = halo_u64_map_get(&shared->signal_order, signal->device_address);
  if (!halo_hal_cuda_signal_behind(shared, out_order, signal)) return false;
  execution->left_out[index / 64] |= 1ull << (index % 64);
  return true;
}

static bool halo_hal_cuda_execution_is_left_out(
    const halo_hal_cuda_execution_t *execution, uint32_t index) {
  return (execution->left_out[index / 64] >> (index % 64)) & 1;
}

// Submission thread (or its caller while it runs nothing): whether the
// graphs' store node is enabled for |execution|, and its GPU stores for it.
// The node is on from when other tasks are seen waiting for the submission
// thread (its time per execution then bounds the device's rate, and the
// node saves it a cuStreamWriteValue64 per signal) until that thread next
// sleeps (the device idle past its spin) or HALO_HAL_CUDA_GRAPH_STORES_QUIET
// executions in a row were issued with none waiting; then a store's call
// delays nobody, while the node would add its start on the GPU, about 3.5
// us, to a lone execution's latency. Enabling and disabling it per
// execution as the backlog comes and goes cost more than it saved (T8 on
// an H100: docs/performance.md).
// The stores go into the node's ticket where there are at most
// HALO_HAL_CUDA_GRAPH_STORES_MAX and none must wait for an earlier store of
// its semaphore on another stream (such a wait goes before the store alone:
// halo_hal_cuda_execution_store_signals); else (*out_count 0) they follow
// on the stream and the node stays on, storing nothing.
static bool halo_hal_cuda_execution_graph_stores(
    halo_hal_cuda_execution_t *execution, halo_hal_cuda_store_t *stores,
    uint32_t *out_count) {
  *out_count = 0;
  halo_hal_cuda_queue_t *queue = execution->queue;
  halo_hal_cuda_device_t *device = queue->device;
  if (!device->store_kernel) return false;
  uint64_t sleeps = halo_hal_cuda_thread_sleeps(&device->submission);
  if (halo_hal_cuda_thread_waiting(&device->submission) > 0) {
    device->graph_stores_busy = true;
    device->graph_stores_sleeps = sleeps;
    device->graph_stores_quiet = 0;
  } else if (!device->graph_stores_busy ||
             sleeps != device->graph_stores_sleeps ||
             ++device->graph_stores_quiet >= HALO_HAL_CUDA_GRAPH_STORES_QUIET) {
    device->graph_stores_busy = false;
    return false;
  }
  const halo_hal_execution_t *hal = &execution->execution;
  uint32_t count = 0;
  for (uint32_t i = 0; i < hal->signal_count; ++i) {
    const halo_hal_execution_signal_t *signal = &hal->signals[i];
    if (!signal->device_address) continue;
    halo_hal_cuda_signal_order_t *order;
    if (halo_hal_cuda_execution_leaves_out(execution, i, &order)) continue;
    if (count == HALO_HAL_CUDA_GRAPH_STORES_MAX ||
        halo_hal_cuda_signal_needs_order(queue, signal, order)) {
      return true;
    }
    stores[count].address = signal->device_address;
    stores[count].value = signal->value;
    ++count;
  }
  *out_count = count;
  return true;
}

// Orders each GPU store after the previous store of the same semaphore made
// on another stream (if it may not have landed yet), then enqueues it.
static halo_status_t halo_hal_cuda_execution_store_signals(
    halo_hal_cuda_execution_t *execution, bool *enqueued) {
  halo_hal_cuda_queue_t *queue = execution->queue;
  halo_hal_cuda_queue_shared_t *shared = queue->shared;
  const halo_hal_cuda_symbols_t *cu = queue->device->cu;
  const halo_hal_execution_t *hal = &execution->execution;
  for (uint32_t i = 0; i < hal->signal_count; ++i) {
    const halo_hal_execution_signal_t *signal = &hal->signals[i];
    if (!signal->device_address) continue;
    halo_hal_cuda_signal_order_t *order;
    if (halo_hal_cuda_execution_leaves_out(execution, i, &order)) continue;
    if (halo_hal_cuda_signal_needs_order(queue, signal, order)) {
      halo_hal_cuda_signal_order_record(shared, order);
    }
    if (order && order->stream != queue->stream && order->event) {
      CUresult result = cu->cuEventQuery(order->event->handle);
      if (result == CUDA_ERROR_NOT_READY) {
        result = cu->cuStreamWaitEvent(queue->stream, order->event->handle, 0);
        if (result != CUDA_SUCCESS) {
          return halo_status_annotate(
              halo_hal_cuda_result_to_status(cu, result, "cuStreamWaitEvent"),
              "signal %u: ordering after the semaphore's previous GPU store",
              i);
        }
      } else if (result != CUDA_SUCCESS) {
        return halo_status_annotate(
            halo_hal_cuda_result_to_status(cu, result, "cuEventQuery"),
            "signal %u: the semaphore's previous GPU store", i);
      }
    }
    CUresult result = cu->cuStreamWriteValue64(
        queue->stream, (CUdeviceptr)signal->device_address, signal->value,
        CU_STREAM_WRITE_VALUE_DEFAULT);
    if (result != CUDA_SUCCESS) {
      return halo_status_annotate(
          halo_hal_cuda_result_to_status(cu, result, "cuStreamWriteValue64"),
          "signal %u: storing value %llu at 0x%llx", i,
          (unsigned long long)signal->value,
          (unsigned long long)signal->device_address);
    }
    *enqueued = true;
  }
  return NULL;
}

// After the event was recorded (or none: halo_hal_cuda_execution_needs_event):
// the execution's stores become the last of each signaled semaphore, but
// for those left out (halo_hal_cuda_signal_behind): the store made before
// stays the one a later store on another stream must wait for.
static void halo_hal_cuda_execution_note_signals(
    halo_hal_cuda_execution_t *execution) {
  halo_hal_cuda_queue_t *queue = execution->queue;
  halo_hal_cuda_queue_shared_t *shared = queue->shared;
  const halo_hal_execution_t *hal = &execution->execution;
  for (uint32_t i = 0; i < hal->signal_count; ++i) {
    uint64_t address = hal->signals[i].device_address;
    if (!address) continue;
    if (halo_hal_cuda_execution_is_left_out(execution, i)) continue;
    halo_hal_cuda_signal_order_t *order =
        halo_u64_map_get(&shared->signal_order, address);
    if (!order) {
      if (shared->signal_order.count >= HALO_HAL_CUDA_SIGNAL_ORDER_PRUNE) {
        halo_hal_cuda_signal_order_prune(shared);
      }
      order = calloc(1, sizeof(*order));
      if (!order) continue;  // no order kept: the next store waits for none
      halo_status_t status =
          halo_u64_map_put(&shared->signal_order, address, order);
      if (status) {
        halo_status_free(status);
        free(order);
        continue;
      }
    } else if (order->event) {
      halo_hal_cuda_event_release(order->event);
    }
    if (execution->event) halo_hal_cuda_event_retain(execution->event);
    order->event = execution->event;
    order->stream = queue->stream;
    order->value = hal->signals[i].value;
    const halo_timeline_slot_t *slot = hal->signals[i].slot;
    order->generation =
        slot ? atomic_load_explicit(&slot->generation, memory_order_acquire)
             : 0;
  }
}

// Whether |execution| records an event after its work. Under THREAD
// completion, work seen to be short whose every signal the GPU stores into
// a slot the host sees, and that hands out no fence, records none: its
// stores tell the poller when it finished (each slot holding exactly the
// execution's value: a value is reserved by one submission, so only this
// execution's store puts it there), which saves the submission thread the
// record and the poller the queries, both taking the context's lock. A
// slot seen past the value, unless a later execution on the stream is seen
// to have stored it, or a failed semaphore, gets an event recorded then,
// after the work (halo_hal_cuda_execution_poll_stores).
static bool halo_hal_cuda_execution_needs_event(
    const halo_hal_cuda_execution_t *execution) {
  const halo_hal_cuda_queue_t *queue = execution->queue;
  if (queue->device->options.completion != HALO_HAL_CUDA_COMPLETION_THREAD ||
      execution->fence || halo_hal_cuda_execution_left_out_any(execution) ||
      !queue->device->eventless_completion ||
      !halo_hal_cuda_execution_seen_short(execution)) {
    return true;
  }
  const halo_hal_execution_t *hal = &execution->execution;
  if (hal->signal_count == 0) return true;
  for (uint32_t i = 0; i < hal->signal_count; ++i) {
    if (!hal->signals[i].device_address || !hal->signals[i].slot) return true;
  }
  return false;
}

// Hands an issued execution to the completion path.
static halo_status_t halo_hal_cuda_execution_watch(
    halo_hal_cuda_execution_t *execution) {
  halo_hal_cuda_queue_t *queue = execution->queue;
  halo_hal_cuda_queue_shared_t *shared = queue->shared;
  const halo_hal_cuda_symbols_t *cu = queue->device->cu;
  // Set where the execution was issued; not yet for one whose failure is
  // deferred (halo_hal_cuda_execution_defer_failure). Both completion
  // paths measure from it.
  if (!execution->handed_ns) execution->handed_ns = halo_clock_now_ns();
  if (queue->device->options.completion != HALO_HAL_CUDA_COMPLETION_HOST_FUNC) {
    pthread_mutex_lock(&shared->mutex);
    execution->next = NULL;
    if (shared->inbox_tail) {
      shared->inbox_tail->next = execution;
    } else {
      shared->inbox_head = execution;
    }
    shared->inbox_tail = execution;
    atomic_store_explicit(&shared->inbox_pending, true, memory_order_release);
    if (shared->poller_asleep) pthread_cond_signal(&shared->cond);
    pthread_mutex_unlock(&shared->mutex);
    return NULL;
  }
  CUresult result = cu->cuStreamWaitEvent(queue->callback_stream,
                                          execution->event->handle, 0);
  if (result != CUDA_SUCCESS) {
    return halo_hal_cuda_result_to_status(cu, result, "cuStreamWaitEvent");
  }
  // The host function takes the submission's reference; the watch list
  // gets one of its own.
  atomic_fetch_add(&execution->references, 1);
  atomic_store(&execution->host_reference, true);
  pthread_mutex_lock(&shared->mutex);
  bool was_empty = halo_list_empty(&shared->watch);
  halo_list_push_back(&shared->watch, &execution->watch_link);
  execution->watched = true;
  if (was_empty) pthread_cond_signal(&shared->cond);
  pthread_mutex_unlock(&shared->mutex);
  result = cu->cuLaunchHostFunc(queue->callback_stream,
                                halo_hal_cuda_host_function, execution);
  if (result == CUDA_SUCCESS) return NULL;
  // Not enqueued: take it back from the watch list (unless the watchdog
  // already failed it) and drop the host function's reference.
  pthread_mutex_lock(&shared->mutex);
  bool unlinked = false;
  if (execution->watched) {
    halo_list_remove(&shared->watch, &execution->watch_link);
    execution->watched = false;
    unlinked = true;
  }
  pthread_mutex_unlock(&shared->mutex);
  // The submission's reference comes back to the caller, which completes
  // and releases it; the watch list's goes with the unlinking (else the
  // watchdog failed it and keeps it with the orphans).
  atomic_store(&execution->host_reference, false);
  if (unlinked) atomic_fetch_sub(&execution->references, 1);
  return halo_hal_cuda_result_to_status(cu, result, "cuLaunchHostFunc");
}

// Binds the execution's fence to its recorded event (|failure| NULL) or
// fails it with a copy of |failure|, and posts the executions parked on it
// again.
static void halo_hal_cuda_execution_resolve_fence(
    halo_hal_cuda_execution_t *execution, halo_status_t failure) {
  halo_hal_cuda_fence_t *fence = execution->fence;
  if (!fence) return;
  execution->fence = NULL;
  if (failure) {
    fence->failure = halo_status_make(halo_status_code(failure), "%s",
                                      halo_status_message(failure));
  } else {
    halo_hal_cuda_event_retain(execution->event);
    fence->event = execution->event;
    fence->stream = execution->queue->stream;
  }
  halo_hal_cuda_execution_t *parked = fence->parked;
  fence->parked = NULL;
  while (parked) {
    halo_hal_cuda_execution_t *next = parked->parked_next;
    parked->parked_next = NULL;
    halo_hal_cuda_thread_post(&execution->queue->device->submission,
                              &parked->task);
    parked = next;
  }
  halo_hal_fence_release(&fence->base);
}

// Orders the execution's work after the fences it waits on. A fence not
// bound yet (its producer is parked) parks the execution on it
// (*out_parked); a failed one fails the execution.
static halo_status_t halo_hal_cuda_execution_wait_fences(
    halo_hal_cuda_execution_t *execution, bool *out_parked) {
  halo_hal_cuda_queue_t *queue = execution->queue;
  const halo_hal_cuda_symbols_t *cu = queue->device->cu;
  *out_parked = false;
  for (; execution->waits_enqueued < execution->wait_fence_count;
       ++execution->waits_enqueued) {
    halo_hal_cuda_fence_t *fence =
        execution->wait_fences[execution->waits_enqueued];
    if (fence->failure) {
      return halo_status_make(halo_status_code(fence->failure),
                              "the device work this execution waits for "
                              "failed before it started: %s",
                              halo_status_message(fence->failure));
    }
    if (!fence->event) {
      execution->parked_next = fence->parked;
      fence->parked = execution;
      *out_parked = true;
      return NULL;
    }
    if (fence->stream == queue->stream) continue;  // in stream order already
    CUresult result =
        cu->cuStreamWaitEvent(queue->stream, fence->event->handle, 0);
    if (result != CUDA_SUCCESS) {
      return halo_status_annotate(
          halo_hal_cuda_result_to_status(cu, result, "cuStreamWaitEvent"),
          "waiting on the device for the work of wait fence %u",
          execution->waits_enqueued);
    }
  }
  return NULL;
}

// The CUresult of a sticky error that a status of DEVICE_LOST came from
// (the context returns it from every call now); 0 if none.
static CUresult halo_hal_cuda_queue_sticky_result(
    halo_hal_cuda_queue_t *queue) {
  if (!queue->stream) return CUDA_SUCCESS;
  CUresult result = queue->device->cu->cuStreamQuery(queue->stream);
  return halo_hal_cuda_result_is_sticky(result) ? result : CUDA_SUCCESS;
}

// An execution that failed (|*status|) after part of its work was enqueued
// and before its event was acquired: its event is recorded after that work
// and the execution goes to the completion path, which reports the failure
// once the work finished. The submission thread never waits for the
// stream, which other queues' work may occupy. False when the event could
// not be recorded or handed over: the caller then waits for the stream and
// completes the execution with |*status| (a copy, if it was moved).
static bool halo_hal_cuda_execution_defer_failure(
    halo_hal_cuda_execution_t *execution, halo_status_t *status) {
  halo_hal_cuda_queue_t *queue = execution->queue;
  const halo_hal_cuda_symbols_t *cu = queue->device->cu;
  halo_status_t event_status = halo_hal_cuda_event_pool_acquire(
      halo_hal_cuda_execution_event_pool(execution), &execution->event);
  if (event_status) {
    halo_status_free(event_status);
    return false;
  }
  if (cu->cuEventRecord(execution->event->handle, queue->stream) !=
      CUDA_SUCCESS) {
    return false;
  }
  // A store it enqueued before failing comes before its semaphore's later
  // ones; waiters on its fence fail now.
  halo_hal_cuda_execution_note_signals(execution);
  halo_hal_cuda_execution_resolve_fence(execution, *status);
  execution->failure = *status;
  *status = NULL;
  halo_status_t watch_status = halo_hal_cuda_execution_watch(execution);
  if (!watch_status) return true;
  halo_status_free(watch_status);
  *status = halo_status_make(halo_status_code(execution->failure), "%s",
                             halo_status_message(execution->failure));
  return false;
}

static void halo_hal_cuda_execution_fail(halo_hal_cuda_execution_t *execution,
                                         halo_status_t status);

// The submission thread's end of an execution that failed while its caller
// ran it (halo_hal_cuda_thread_run_or_post).
static void halo_hal_cuda_execution_fail_run(halo_hal_cuda_task_t *task) {
  halo_hal_cuda_execution_t *execution = (halo_hal_cuda_execution_t *)task;
  halo_status_t status = execution->caller_failure;
  execution->caller_failure = NULL;
  halo_hal_cuda_execution_fail(execution, status);
}

// An execution issued on the caller because the device was idle
// (halo_hal_cuda_thread_run_or_post), or by the submission thread with no
// other task waiting for it (|on_caller| false), seen to be short (or not
// seen yet: HALO_HAL_CUDA_CALLER_WAIT_UNKNOWN_NS): the issuing thread waits
// for it itself (up to 1.5 times its last duration plus
// HALO_HAL_CUDA_CALLER_WAIT_SLACK_NS, give or take a yield) and completes
// it, where the completion path is asleep (THREAD: the poller, e.g. waiting
// for the sleeper on another queue's long work; HOST_FUNC: the driver's
// thread that runs host functions) and waking it would cost the execution
// microseconds to tens of microseconds (a thread asleep for long on a
// virtual machine): an idle device answers as a launch and a synchronize
// would. The submission thread gives up the wait as soon as another task
// is posted to it (the execution then goes to the completion path), so
// that no queue's submission waits behind another's completion. Only the
// queue's one execution in flight (a queue completes in order). True when
// completed here; else it goes to the completion path (its error included,
// which that path reports).
static bool halo_hal_cuda_execution_finish_on_caller(
    halo_hal_cuda_execution_t *execution, bool on_caller) {
  halo_hal_cuda_queue_t *queue = execution->queue;
  halo_hal_cuda_queue_shared_t *shared = queue->shared;
  halo_hal_command_buffer_t *command_buffer =
      execution->execution.command_buffer;
  int64_t expected = halo_hal_cuda_command_buffer_expected_ns(command_buffer);
  if (expected > HALO_HAL_CUDA_SHORT_WORK_NS) return false;
  halo_hal_cuda_thread_t *submission = &queue->device->submission;
  if (!on_caller && (!queue->device->wait_on_submission ||
                     halo_hal_cuda_thread_waiting(submission) > 0)) {
    return false;
  }
  bool seen_long = expected > HALO_HAL_CUDA_CALLER_WAIT_WORK_NS;
  pthread_mutex_lock(&queue->mutex);
  bool alone = queue->in_flight == 1;
  bool retry = alone && seen_long &&
               ++queue->caller_skips % HALO_HAL_CUDA_CALLER_WAIT_RETRY == 0;
  pthread_mutex_unlock(&queue->mutex);
  if (!alone || (seen_long && !retry)) return false;
  if (expected == 0 || retry) expected = HALO_HAL_CUDA_CALLER_WAIT_UNKNOWN_NS;
  if (queue->device->options.completion == HALO_HAL_CUDA_COMPLETION_THREAD) {
    pthread_mutex_lock(&shared->mutex);
    bool asleep = shared->poller_asleep;
    pthread_mutex_unlock(&shared->mutex);
    if (!asleep) return false;  // the poller is spinning: it answers at once
  }
  int64_t deadline = execution->handed_ns + expected + expected / 2 +
                     HALO_HAL_CUDA_CALLER_WAIT_SLACK_NS;
  int64_t now = execution->handed_ns, before;
  CUresult result;
  bool posted = false;  // a task came for the submission thread
  for (bool first = true;; first = false) {
    // Between polls, a yield (as the poller's spin): a query takes the
    // context's lock, which other threads' calls need too.
    if (!first) sched_yield();
    before = now;
    now = halo_clock_now_ns();
    const char *call;
    result = halo_hal_cuda_execution_query(shared, execution, now, &call);
    if (result != CUDA_ERROR_NOT_READY || now >= deadline) break;
    posted = !on_caller && halo_hal_cuda_thread_waiting(submission) > 0;
    if (posted) break;
  }
  if (result != CUDA_SUCCESS) {
    // Longer than expected: what it took so far, so that the next one is
    // not waited for in vain.
    if (result == CUDA_ERROR_NOT_READY && !posted) {
      halo_hal_cuda_command_buffer_record_duration(command_buffer,
                                                   now - execution->handed_ns);
    }
    return false;
  }
  // It finished between the last two polls (a yield between them may take
  // long): the middle, not the end.
  halo_hal_cuda_command_buffer_record_duration(
      command_buffer, (before + now) / 2 - execution->handed_ns);
  halo_hal_cuda_execution_complete(execution, NULL);
  halo_hal_cuda_execution_release(execution);
  return true;
}

static bool halo_hal_cuda_execution_run_one(
    halo_hal_cuda_execution_t *execution);

// Runs |execution| in its queue's order: held behind the queue's parked
// execution, if any; once that one goes on, the executions held behind it
// run here, in order, until one of them parks in its turn.
static void halo_hal_cuda_execution_run(halo_hal_cuda_task_t *task) {
  halo_hal_cuda_execution_t *execution = (halo_hal_cuda_execution_t *)task;
  halo_hal_cuda_queue_t *queue = execution->queue;
  if (queue->held_by && queue->held_by != execution) {
    halo_list_push_back(&queue->held, &execution->held_link);
    return;
  }
  if (halo_hal_cuda_execution_run_one(execution)) {
    queue->held_by = execution;
    return;
  }
  if (queue->held_by != execution) return;
  // A parked execution resumes on the submission thread (its wake posts
  // it there), so the held ones run there too.
  queue->held_by = NULL;
  while (!halo_list_empty(&queue->held) && !queue->held_by) {
    halo_hal_cuda_execution_t *held =
        HALO_LIST_ENTRY(queue->held.head, halo_hal_cuda_execution_t, held_link);
    halo_list_remove(&queue->held, &held->held_link);
    if (halo_hal_cuda_execution_run_one(held)) queue->held_by = held;
  }
}

// The submission thread's task (or its caller's, the device idle): fence
// waits, issue, stores, event, fence, completion path. True if it parked
// (posted again when its wait fence resolves or an instance of its
// recording frees); else it was issued, failed, or posted to the
// submission thread from its caller.
static bool halo_hal_cuda_execution_run_one(
    halo_hal_cuda_execution_t *execution) {
  halo_hal_cuda_task_t *task = &execution->task;
  halo_hal_cuda_queue_t *queue = execution->queue;
  halo_hal_cuda_queue_shared_t *shared = queue->shared;
  const halo_hal_cuda_symbols_t *cu = queue->device->cu;
  bool on_caller = halo_hal_cuda_thread_on_caller(&queue->device->submission);
  if (on_caller &&
      (!queue->pooled || !halo_hal_cuda_command_buffer_issues_at_once(
                             execution->execution.command_buffer))) {
    // Set-up first (a stream, a module, a graph instance): the submission
    // thread's, not the loop thread's.
    halo_hal_cuda_thread_post(&queue->device->submission, task);
    return false;
  }
  halo_status_t status = NULL;
  if (atomic_load(&shared->lost)) {
    status = halo_hal_cuda_queue_lost_status(shared);
  }
  if (!status) status = halo_hal_cuda_queue_take_stream(queue);
  if (!status) {
    bool parked = false;
    status = halo_hal_cuda_execution_wait_fences(execution, &parked);
    if (!status && parked) return true;  // posted when the fence resolves
  }
  if (!status) {
    halo_hal_cuda_store_t stores[HALO_HAL_CUDA_GRAPH_STORES_MAX];
    uint32_t store_count = 0;
    // Decided again after a park.
    memset(execution->left_out, 0,
           (execution->execution.signal_count + 63) / 64 * sizeof(uint64_t));
    bool node_on =
        halo_hal_cuda_execution_graph_stores(execution, stores, &store_count);
    bool parked = false;
    status = halo_hal_cuda_command_buffer_issue(
        execution->execution.command_buffer, &execution->execution,
        queue->stream, node_on ? stores : NULL, store_count, &execution->task,
        &execution->issue, &parked);
    if (!status && parked) return true;  // posted when an instance frees
    execution->issue_sequence =
        atomic_fetch_add_explicit(&shared->issued, 1, memory_order_relaxed) + 1;
  }
  if (!status && !execution->issue.stores_in_graph) {
    status = halo_hal_cuda_execution_store_signals(execution,
                                                   &execution->issue.enqueued);
  }
  bool needs_event = halo_hal_cuda_execution_needs_event(execution);
  if (!status && needs_event) {
    status = halo_hal_cuda_event_pool_acquire(
        halo_hal_cuda_execution_event_pool(execution), &execution->event);
  }
  if (!status && needs_event) {
    CUresult result =
        cu->cuEventRecord(execution->event->handle, queue->stream);
    if (result != CUDA_SUCCESS) {
      status = halo_hal_cuda_result_to_status(cu, result, "cuEventRecord");
    }
  }
  if (!status) {
    halo_hal_cuda_execution_note_signals(execution);
    // Bound before the completion path can complete (and free) it.
    halo_hal_cuda_execution_resolve_fence(execution, NULL);
    execution->handed_ns = halo_clock_now_ns();
    // Queried (or its stream asked for a sticky error) only once its stores
    // landed, or 100 us from now: a short execution costs the poller no
    // driver call, which would take the context's lock from this thread's
    // next launch.
    execution->next_query_ns =
        execution->handed_ns + HALO_HAL_CUDA_COMPLETION_QUERY_NS;
    if (halo_hal_cuda_execution_finish_on_caller(execution, on_caller)) {
      return false;
    }
    status = halo_hal_cuda_execution_watch(execution);
    if (!status) return false;
  }
  if (on_caller) {
    // What follows may wait for the stream: the submission thread's work.
    execution->caller_failure = status;
    execution->task.run = halo_hal_cuda_execution_fail_run;
    halo_hal_cuda_thread_post(&queue->device->submission, &execution->task);
    return false;
  }
  halo_hal_cuda_execution_fail(execution, status);
  return false;
}

// The submission thread ends a failed execution: whatever was enqueued must
// finish before the instance and the execution's resources are released.
// The completion path waits for it unless the event itself failed (or the
// device is lost): then this thread does.
static void halo_hal_cuda_execution_fail(halo_hal_cuda_execution_t *execution,
                                         halo_status_t status) {
  halo_hal_cuda_queue_t *queue = execution->queue;
  halo_hal_cuda_queue_shared_t *shared = queue->shared;
  const halo_hal_cuda_symbols_t *cu = queue->device->cu;
  // Woken from the graph instances' parked executions and failed before it
  // took one: the next parked one gets it.
  halo_hal_cuda_command_buffer_forgo(execution->execution.command_buffer,
                                     &execution->task);
  if (execution->issue.enqueued && !execution->event &&
      halo_status_code(status) != HALO_STATUS_DEVICE_LOST &&
      halo_hal_cuda_execution_defer_failure(execution, &status)) {
    return;
  }
  if (execution->issue.enqueued && queue->stream) {
    cu->cuStreamSynchronize(queue->stream);
  }
  if (halo_status_code(status) == HALO_STATUS_DEVICE_LOST &&
      !atomic_load(&shared->lost)) {
    halo_hal_cuda_queue_report_lost(shared, status,
                                    halo_hal_cuda_queue_sticky_result(queue));
  }
  halo_hal_cuda_execution_resolve_fence(execution, status);
  halo_hal_cuda_execution_complete(execution, status);
  halo_hal_cuda_execution_release(execution);
}

//===----------------------------------------------------------------------===//
// The queue (loop thread)
//===----------------------------------------------------------------------===//

static halo_status_t halo_hal_cuda_queue_execute(
    halo_hal_queue_t *base_queue, const halo_hal_execution_t *execution) {
  halo_hal_cuda_queue_t *queue = (halo_hal_cuda_queue_t *)base_queue;
  if (execution->out_fence) *execution->out_fence = NULL;
  if (!halo_hal_cuda_command_buffer_isa(execution->command_buffer)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "CUDA queue: the command buffer was not prepared "
                            "by the CUDA driver");
  }
  if (!execution->completion) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "CUDA queue: execution without a completion");
  }
  for (uint32_t i = 0; i < execution->wait_fence_count; ++i) {
    if (execution->wait_fences[i]->domain != queue->device) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "CUDA queue: wait fence %u is not a fence of "
                              "CUDA device %u",
                              i, queue->device->ordinal);
    }
  }
  halo_hal_cuda_execution_t *cuda = calloc(1, sizeof(*cuda));
  halo_hal_cuda_fence_t *fence =
      execution->out_fence ? calloc(1, sizeof(*fence)) : NULL;
  halo_hal_cuda_fence_t **wait_fences =
      execution->wait_fence_count
          ? calloc(execution->wait_fence_count, sizeof(*wait_fences))
          : NULL;
  uint64_t *left_out =
      execution->signal_count > 64
          ? calloc((execution->signal_count + 63) / 64, sizeof(uint64_t))
          : NULL;
  if (!cuda || (execution->out_fence && !fence) ||
      (execution->wait_fence_count && !wait_fences) ||
      (execution->signal_count > 64 && !left_out)) {
    free(cuda);
    free(fence);
    free(wait_fences);
    free(left_out);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "CUDA queue: oom for an execution");
  }
  cuda->task.run = halo_hal_cuda_execution_run;
  cuda->left_out = left_out ? left_out : &cuda->left_out_word;
  cuda->queue = queue;
  cuda->execution = *execution;
  cuda->execution.wait_fences = NULL;
  cuda->execution.wait_fence_count = 0;
  cuda->execution.out_fence = NULL;
  for (uint32_t i = 0; i < execution->wait_fence_count; ++i) {
    halo_hal_fence_retain(execution->wait_fences[i]);
    wait_fences[i] = (halo_hal_cuda_fence_t *)execution->wait_fences[i];
  }
  cuda->wait_fences = wait_fences;
  cuda->wait_fence_count = execution->wait_fence_count;
  if (fence) {
    // One reference for the caller, one the execution resolves.
    fence->base.vtable = &halo_hal_cuda_fence_vtable;
    atomic_init(&fence->base.references, 2);
    fence->base.domain = queue->device;
    cuda->fence = fence;
    *execution->out_fence = &fence->base;
  }
  atomic_init(&cuda->completed, false);
  atomic_init(&cuda->references, 1);
  atomic_init(&cuda->host_reference, false);
  atomic_init(&cuda->stores_woken, false);
  pthread_mutex_lock(&queue->mutex);
  ++queue->in_flight;
  pthread_mutex_unlock(&queue->mutex);
  if (queue->device->issue_on_caller) {
    halo_hal_cuda_thread_run_or_post(&queue->device->submission, &cuda->task);
  } else {
    halo_hal_cuda_thread_post(&queue->device->submission, &cuda->task);
  }
  return NULL;
}

// Submission thread: after every execution of the queue. Its stream goes
// back to the pool (the device destroys it), whatever other queues still
// have pending on it.
static void halo_hal_cuda_queue_destroy_run(halo_hal_cuda_task_t *task) {
  halo_hal_cuda_queue_t *queue =
      (halo_hal_cuda_queue_t *)((char *)task -
                                offsetof(halo_hal_cuda_queue_t, destroy_task));
  if (queue->pooled) halo_hal_cuda_stream_pool_release(queue->pooled);
  pthread_cond_destroy(&queue->idle);
  pthread_mutex_destroy(&queue->mutex);
  free(queue);
}

static void halo_hal_cuda_queue_destroy(halo_hal_queue_t *base_queue) {
  halo_hal_cuda_queue_t *queue = (halo_hal_cuda_queue_t *)base_queue;
  pthread_mutex_lock(&queue->mutex);
  while (queue->in_flight) pthread_cond_wait(&queue->idle, &queue->mutex);
  pthread_mutex_unlock(&queue->mutex);
  halo_hal_cuda_queue_shared_t *shared = queue->shared;
  halo_hal_cuda_device_t *device = queue->device;
  queue->destroy_task.run = halo_hal_cuda_queue_destroy_run;
  halo_hal_cuda_thread_post(&device->submission, &queue->destroy_task);
  halo_hal_cuda_queue_shared_release(shared);
}

static const halo_hal_queue_vtable_t halo_hal_cuda_queue_vtable = {
    .destroy = halo_hal_cuda_queue_destroy,
    .execute = halo_hal_cuda_queue_execute,
};

// Client priorities are "higher runs first" (as on the local driver); CUDA
// stream priorities are "lower runs first" within [greatest, least]
// (H100: -5 .. 0). 0 maps to the default (least), each step above it one
// CUDA level up, clamped at the greatest; negative values map to least.
static int halo_hal_cuda_queue_map_priority(
    const halo_hal_cuda_device_t *device, int32_t priority) {
  int least = device->stream_priority_least;
  int greatest = device->stream_priority_greatest;
  int span = least - greatest;
  if (priority <= 0) return least;
  if (priority > span) priority = span;
  return least - priority;
}

halo_status_t halo_hal_cuda_queue_create(halo_hal_cuda_device_t *device,
                                         int32_t priority,
                                         halo_hal_queue_t **out_queue) {
  *out_queue = NULL;
  halo_hal_cuda_queue_t *queue = calloc(1, sizeof(*queue));
  if (!queue) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  halo_status_t status =
      halo_hal_cuda_queue_shared_acquire(device, &queue->shared);
  if (status) {
    free(queue);
    return status;
  }
  queue->base.vtable = &halo_hal_cuda_queue_vtable;
  // HALO_CUDA_GPU_WAITS=0 (a diagnostic, to compare): no fences, every
  // wait goes through the host.
  queue->base.fence_domain =
      halo_hal_cuda_diagnostic_on("HALO_CUDA_GPU_WAITS") ? device : NULL;
  queue->device = device;
  queue->priority = priority;
  queue->cuda_priority = halo_hal_cuda_queue_map_priority(device, priority);
  halo_mutex_initialize(&queue->mutex);
  pthread_cond_init(&queue->idle, NULL);
  *out_queue = &queue->base;
  return NULL;
}
