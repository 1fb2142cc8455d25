// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A driver thread of one device (cuda_device.h): runs posted tasks in
// order with the device's primary context current. The submission thread
// and the reaper are two of these. The reaper takes every task queued when
// it wakes as one batch, so that calls that each wait for the device's
// running work (cuModuleUnload, cuMemHostUnregister) wait once together.
// The submission thread spins a while (spin_ns) on an empty queue before
// it sleeps, so that under load the loop thread's post and the thread's
// next task cost no futex wake and no wake-up latency; idle, it sleeps. It
// spins only where one of the last two tasks came within that window
// (halo_clock_gaps_spin_ns): tasks a millisecond apart (a long step) cost
// a wake-up each, not 50 us of spinning each. Such a task need not wait for
// the wake-up: the poster may run it itself (halo_hal_cuda_thread_run_or_post).
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/status.h"
#include "hal/cuda/cuda_device.h"

static void *halo_hal_cuda_thread_main(void *arg) {
  halo_hal_cuda_thread_t *thread = arg;
  pthread_setname_np(pthread_self(), thread->name);
  CUresult result = thread->cu->cuCtxSetCurrent(thread->context);
  if (result != CUDA_SUCCESS) {
    // Tasks still run (and fail on their own calls, each with a status).
    halo_status_t status =
        halo_hal_cuda_result_to_status(thread->cu, result, "cuCtxSetCurrent");
    HALO_LOG_ERROR("%s: %s", thread->name, halo_status_message(status));
    halo_status_free(status);
  }
  pthread_mutex_lock(&thread->mutex);
  for (;;) {
    int64_t idle_since_ns = halo_clock_now_ns();
    thread->gaps.done_ns = idle_since_ns;
    int64_t spin_ns = halo_clock_gaps_spin_ns(&thread->gaps, thread->spin_ns);
    if (!thread->tasks.head && !thread->stopping && spin_ns > 0) {
      // Spin a while for the next task before sleeping (see spin_ns).
      uint64_t seen =
          atomic_load_explicit(&thread->posted, memory_order_relaxed);
      pthread_mutex_unlock(&thread->mutex);
      int64_t until = idle_since_ns + spin_ns;
      while (atomic_load_explicit(&thread->posted, memory_order_acquire) ==
                 seen &&
             halo_clock_now_ns() < until) {
        sched_yield();
      }
      pthread_mutex_lock(&thread->mutex);
    }
    // A poster running a task for the thread goes first.
    while ((!thread->tasks.head && !thread->stopping) ||
           thread->caller_running) {
      thread->sleeping = true;
      atomic_fetch_add_explicit(&thread->sleeps, 1, memory_order_relaxed);
      pthread_cond_wait(&thread->cond, &thread->mutex);
      thread->sleeping = false;
    }
    halo_hal_cuda_task_t *batch = halo_hal_cuda_tasks_take_all(&thread->tasks);
    if (!batch && thread->stopping) break;
    pthread_mutex_unlock(&thread->mutex);
    while (batch) {
      halo_hal_cuda_task_t *next = batch->next;
      batch->next = NULL;
      atomic_fetch_sub_explicit(&thread->waiting, 1, memory_order_relaxed);
      batch->run(batch);  // owns the task from here on
      batch = next;
    }
    pthread_mutex_lock(&thread->mutex);
  }
  pthread_mutex_unlock(&thread->mutex);
  return NULL;
}

halo_status_t halo_hal_cuda_thread_start(halo_hal_cuda_thread_t *thread,
                                         const char *name,
                                         const halo_hal_cuda_symbols_t *cu,
                                         CUcontext context, int64_t spin_ns) {
  memset(thread, 0, sizeof(*thread));
  thread->spin_ns = spin_ns;
  snprintf(thread->name, sizeof(thread->name), "%s", name);
  thread->cu = cu;
  thread->context = context;
  halo_mutex_initialize(&thread->mutex);
  pthread_cond_init(&thread->cond, NULL);
  int error =
      pthread_create(&thread->thread, NULL, halo_hal_cuda_thread_main, thread);
  if (error != 0) {
    pthread_cond_destroy(&thread->cond);
    pthread_mutex_destroy(&thread->mutex);
    return halo_status_from_errno(error, "starting the CUDA thread %s", name);
  }
  thread->started = true;
  return NULL;
}

// Under |thread->mutex|.
static void halo_hal_cuda_thread_enqueue(halo_hal_cuda_thread_t *thread,
                                         halo_hal_cuda_task_t *task,
                                         int64_t now_ns) {
  halo_clock_gaps_arrived(&thread->gaps, now_ns);
  halo_hal_cuda_tasks_push(&thread->tasks, task);
  atomic_fetch_add_explicit(&thread->waiting, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&thread->posted, 1, memory_order_release);
  if (thread->sleeping && !thread->caller_running) {
    pthread_cond_signal(&thread->cond);
  }
}

void halo_hal_cuda_thread_post(halo_hal_cuda_thread_t *thread,
                               halo_hal_cuda_task_t *task) {
  int64_t now = halo_clock_now_ns();
  pthread_mutex_lock(&thread->mutex);
  halo_hal_cuda_thread_enqueue(thread, task, now);
  pthread_mutex_unlock(&thread->mutex);
}

// The thread whose task the calling thread runs (run_or_post), if any.
static _Thread_local const halo_hal_cuda_thread_t *halo__running_for;

bool halo_hal_cuda_thread_run_or_post(halo_hal_cuda_thread_t *thread,
                                      halo_hal_cuda_task_t *task) {
  int64_t now = halo_clock_now_ns();
  pthread_mutex_lock(&thread->mutex);
  // Idle: the thread asleep, and this task's arrival leaves neither of the
  // last two gaps within the spin window (the rule by which the thread
  // spins: tasks every 30 us keep going to the thread, which then spins
  // between them; tasks run here count as its own).
  halo_clock_gaps_t gaps = thread->gaps;
  halo_clock_gaps_arrived(&gaps, now);
  bool idle = thread->sleeping && !thread->tasks.head &&
              !thread->caller_running && !thread->stopping &&
              halo__running_for == NULL &&
              halo_clock_gaps_spin_ns(&gaps, thread->spin_ns) == 0;
  if (!idle) {
    halo_hal_cuda_thread_enqueue(thread, task, now);
    pthread_mutex_unlock(&thread->mutex);
    return false;
  }
  thread->gaps = gaps;
  thread->caller_running = true;
  pthread_mutex_unlock(&thread->mutex);
  CUcontext current = NULL;
  if (thread->cu->cuCtxGetCurrent(&current) != CUDA_SUCCESS ||
      current != thread->context) {
    // A failure here fails the task's own calls, each with a status.
    thread->cu->cuCtxSetCurrent(thread->context);
  }
  halo__running_for = thread;
  task->run(task);  // owns the task from here on
  halo__running_for = NULL;
  pthread_mutex_lock(&thread->mutex);
  thread->caller_running = false;
  // The next task's gap runs from the end of this one: tasks back to back
  // after a long one here go to the thread.
  thread->gaps.done_ns = halo_clock_now_ns();
  // What was posted meanwhile (the task's own posts included) is the
  // thread's now.
  if (thread->sleeping && (thread->tasks.head || thread->stopping)) {
    pthread_cond_signal(&thread->cond);
  }
  pthread_mutex_unlock(&thread->mutex);
  return true;
}

uint32_t halo_hal_cuda_thread_waiting(const halo_hal_cuda_thread_t *thread) {
  return atomic_load_explicit(&thread->waiting, memory_order_relaxed);
}

uint64_t halo_hal_cuda_thread_sleeps(const halo_hal_cuda_thread_t *thread) {
  return atomic_load_explicit(&thread->sleeps, memory_order_relaxed);
}

bool halo_hal_cuda_thread_on_caller(const halo_hal_cuda_thread_t *thread) {
  return halo__running_for == thread;
}

void halo_hal_cuda_thread_stop(halo_hal_cuda_thread_t *thread) {
  if (!thread->started) return;
  pthread_mutex_lock(&thread->mutex);
  thread->stopping = true;
  pthread_cond_signal(&thread->cond);
  pthread_mutex_unlock(&thread->mutex);
  pthread_join(thread->thread, NULL);
  pthread_cond_destroy(&thread->cond);
  pthread_mutex_destroy(&thread->mutex);
  thread->started = false;
}

typedef struct halo_hal_cuda_flush_task_t {
  halo_hal_cuda_task_t task;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool done;
} halo_hal_cuda_flush_task_t;

static void halo_hal_cuda_flush_task_run(halo_hal_cuda_task_t *base_task) {
  halo_hal_cuda_flush_task_t *task = (halo_hal_cuda_flush_task_t *)base_task;
  pthread_mutex_lock(&task->mutex);
  task->done = true;
  pthread_cond_signal(&task->cond);
  pthread_mutex_unlock(&task->mutex);
}

void halo_hal_cuda_thread_flush(halo_hal_cuda_thread_t *thread) {
  if (!thread->started) return;
  halo_hal_cuda_flush_task_t task = {.task.run = halo_hal_cuda_flush_task_run};
  pthread_mutex_init(&task.mutex, NULL);
  pthread_cond_init(&task.cond, NULL);
  halo_hal_cuda_thread_post(thread, &task.task);
  pthread_mutex_lock(&task.mutex);
  while (!task.done) pthread_cond_wait(&task.cond, &task.mutex);
  pthread_mutex_unlock(&task.mutex);
  pthread_cond_destroy(&task.cond);
  pthread_mutex_destroy(&task.mutex);
}
