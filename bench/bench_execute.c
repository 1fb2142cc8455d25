// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-bench-execute: executions on the local (CPU) driver against a running
// halod, each case beside native baselines measured in the same run.
//
//   halo-bench-execute [--address ADDR] [--csv FILE] [--iterations N]
//                      [--seconds S] [--processes LIST]
//                      [--native-spin-us US] KERNEL.so
//
// The work of one execution: one dispatch of vector_add over 256 floats
// (examples/kernels/vector_add.c, built as bin/vector_add.so), one
// workgroup. halo: each process records one REUSABLE command buffer with the
// dispatch's buffers as binding slots 0..2 (memoized by halod: the second
// process on gets a memo hit), executes it with a binding table of three
// host-visible buffers of its own and waits on the semaphore the execution
// signals before it submits the next: one execution in flight per process.
//
// Cases:
//   latency     one process, --iterations executions (default 3000) after a
//               warm-up: halo_queue_execute until halo_semaphore_wait
//               returns.
//   throughput  N processes at once for each N of --processes (default
//               1,4,8), each looping for --seconds (default 3): executions
//               per second of all processes together (all executions / (the
//               last process's end - the common start)) and of each process.
//
// Baselines: the same loops, the same kernel (dlopen), the same number of
// processes, no halo.
//   native handoff  each process starts a worker thread; each step hands the
//                   dispatch to it and waits for its completion, as a client
//                   hands an execution to halod's worker and waits on its
//                   semaphore: a store + FUTEX_WAKE (only when the other side
//                   sleeps) each way, the waiting side in FUTEX_WAIT at once.
//                   The ratios are against this baseline. halo's waits spin
//                   up to 20 us first, but at halo's 100+ us per step they
//                   sleep anyway; --native-spin-us 20 makes the baseline spin
//                   as long (with an idle CPU per thread a handoff is then a
//                   cache-line transfer, 0.2 us; with more threads than CPUs
//                   the spinning collapses and the figures swing by 10x).
//   native direct   the loop calls the kernel itself: the work alone.
//
// Every process is forked before it connects (this parent never uses
// libhalo), so nothing uses nng's state across fork(). The processes of a
// case set up and warm up, then start together on a futex in shared memory.
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <halo/halo.h>
#include <halo/local_kernel.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

#define BENCH_N 256               // floats per buffer
#define BENCH_MAX_PROCESSES 64    // --processes values
#define BENCH_MAX_CASES 8         // values in --processes
#define BENCH_RING 65536          // samples kept per process (the last ones)
#define BENCH_WARMUP 200          // steps before a process reports ready
#define BENCH_SETUP_TIMEOUT_S 60  // connect + load + warm-up of a case
#define BENCH_LATENCY_CAP_S 60    // the latency case stops here whatever
#define BENCH_STEP_TIMEOUT_NS (10ll * 1000 * 1000 * 1000)

typedef enum bench_impl_e {
  BENCH_IMPL_HALO = 0,
  BENCH_IMPL_HANDOFF = 1,
  BENCH_IMPL_DIRECT = 2,
  BENCH_IMPL_COUNT = 3,
} bench_impl_t;

// Names in the report and the CSV (impl, method).
static const char *const kImplLabel[BENCH_IMPL_COUNT] = {
    "halo: execute + wait",
    "  native: futex handoff to a thread",
    "  native: kernel called directly",
};
static const char *const kImplCsv[BENCH_IMPL_COUNT] = {"halo", "native",
                                                       "native-direct"};
static const char *const kImplMethod[BENCH_IMPL_COUNT] = {
    "halo_queue_execute + halo_semaphore_wait",
    "futex handoff to a worker thread and back",
    "kernel called directly",
};

typedef void (*bench_kernel_t)(const halo_dispatch_state_t *state);

// What one process of a case reports, in shared memory.
typedef struct bench_process_t {
  int64_t count;   // measured steps
  int64_t end_ns;  // when its measured loop ended
  int64_t cpu_ns;  // CPU time of the process (all threads) in that loop
  int32_t daemon_pid;
  char error[256];
  int64_t samples[BENCH_RING];  // step i's duration at i % BENCH_RING
} bench_process_t;

// Shared by the parent and every process of a case (anonymous, MAP_SHARED).
typedef struct bench_shared_t {
  alignas(64) _Atomic uint32_t ready;  // processes set up and warmed up
  alignas(64) _Atomic uint32_t go;     // futex: 1 once start_ns is set
  int64_t start_ns;
  int64_t deadline_ns;
  int64_t max_count;  // steps per process
  bench_process_t processes[BENCH_MAX_PROCESSES];
} bench_shared_t;

typedef struct bench_options_t {
  const char *address;
  const char *csv_path;
  const char *kernel_path;
  int iterations;
  double seconds;
  int process_counts[BENCH_MAX_CASES];
  int case_count;
} bench_options_t;

static bench_kernel_t g_kernel;
static int64_t g_spin_ns;  // --native-spin-us
static bench_shared_t *g_shared;

// ------------------------------------------------------------------ utilities

static void bench_die(const char *format, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void bench_die(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fputs("halo-bench-execute: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  exit(1);
}

// ------------------------------------------------------------------ the work

// One process's state for one implementation.
typedef struct bench_work_t {
  bench_impl_t impl;
  // The kernel's arguments (native), and the values the check expects.
  float *a, *b, *c;
  const float *arg_a, *arg_b;
  float *arg_c;
  uint32_t n;
  void *args[4];
  // halo.
  halo_client_t *client;
  halo_executable_t *executable;
  halo_command_buffer_t *command_buffer;
  halo_buffer_t *buffers[3];
  halo_semaphore_t *done;
  halo_binding_t bindings[3];
  uint64_t value;
  // native handoff: a worker thread and two events.
  pthread_t thread;
  alignas(64) _Atomic uint32_t submitted;
  _Atomic uint32_t submitted_sleepers;
  alignas(64) _Atomic uint32_t completed;
  _Atomic uint32_t completed_sleepers;
  _Atomic bool stop;
  uint32_t sequence;
} bench_work_t;

static void bench_kernel_call(bench_work_t *work) {
  halo_dispatch_state_t state = {
      .args = work->args,
      .arg_count = 4,
      .workgroup_count = {1, 1, 1},
      .workgroup_size = {BENCH_N, 1, 1},
  };
  g_kernel(&state);
}

// A native event: a sequence number a thread waits to reach. Signal stores
// and wakes only if someone sleeps; wait spins g_spin_ns (default 0), then
// sleeps.
// Sequentially consistent both ways (store value, load sleepers / add
// sleeper, load value), so no wake-up is lost.
static void bench_event_signal(_Atomic uint32_t *value,
                               _Atomic uint32_t *sleepers, uint32_t sequence) {
  atomic_store(value, sequence);
  if (atomic_load(sleepers)) {
    bench_futex(value, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
  }
}

static void bench_event_wait(_Atomic uint32_t *value,
                             _Atomic uint32_t *sleepers, uint32_t sequence) {
  int64_t spin_end = g_spin_ns > 0 ? bench_now_ns() + g_spin_ns : 0;
  while (atomic_load_explicit(value, memory_order_acquire) < sequence) {
    if (spin_end && bench_now_ns() < spin_end) continue;
    atomic_fetch_add(sleepers, 1);
    uint32_t seen = atomic_load(value);
    if (seen < sequence) bench_futex(value, FUTEX_WAIT_PRIVATE, seen, NULL);
    atomic_fetch_sub(sleepers, 1);
  }
}

static void *bench_handoff_worker(void *context) {
  bench_work_t *work = context;
  for (uint32_t sequence = 1;; ++sequence) {
    bench_event_wait(&work->submitted, &work->submitted_sleepers, sequence);
    if (atomic_load(&work->stop)) break;
    bench_kernel_call(work);
    bench_event_signal(&work->completed, &work->completed_sleepers, sequence);
  }
  return NULL;
}

// Records |status| as this process's failure; returns false.
static bool bench_work_fail(bench_process_t *self, const char *what,
                            halo_status_t status) {
  snprintf(self->error, sizeof(self->error), "%s: %s: %s", what,
           halo_status_code_name(halo_status_code(status)),
           halo_status_message(status));
  halo_status_free(status);
  return false;
}

#define BENCH_TRY(self, what, expr)                               \
  do {                                                            \
    halo_status_t status_ = (expr);                               \
    if (status_) return bench_work_fail((self), (what), status_); \
  } while (0)

static bool bench_halo_setup(bench_work_t *work, bench_process_t *self,
                             const bench_options_t *options) {
  halo_client_options_t client_options = {.address = options->address,
                                          .client_name = "halo-bench-execute"};
  BENCH_TRY(self, "connect",
            halo_client_connect(&client_options, &work->client));
  self->daemon_pid = halo_client_daemon_pid(work->client);
  BENCH_TRY(self, "load",
            halo_executable_create_from_file(
                work->client, 0, options->kernel_path, 0, &work->executable));
  BENCH_TRY(
      self, "begin",
      halo_command_buffer_begin(work->client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                3, &work->command_buffer));
  uint32_t n = BENCH_N;
  halo_dispatch_arg_t args[4] = {
      {.kind = HALO_DISPATCH_ARG_BUFFER,
       .ref = halo_binding_ref(0, 0, 4 * BENCH_N)},
      {.kind = HALO_DISPATCH_ARG_BUFFER,
       .ref = halo_binding_ref(1, 0, 4 * BENCH_N)},
      {.kind = HALO_DISPATCH_ARG_BUFFER,
       .ref = halo_binding_ref(2, 0, 4 * BENCH_N)},
      {.kind = HALO_DISPATCH_ARG_CONSTANT, .data = &n, .size = sizeof(n)},
  };
  halo_dispatch_params_t dispatch = {.executable = work->executable,
                                     .entry = "vector_add",
                                     .grid = {1, 1, 1},
                                     .block = {BENCH_N, 1, 1},
                                     .args = args,
                                     .arg_count = 4};
  BENCH_TRY(self, "dispatch",
            halo_command_buffer_dispatch(work->command_buffer, &dispatch));
  BENCH_TRY(self, "end", halo_command_buffer_end(work->command_buffer));
  for (int i = 0; i < 3; ++i) {
    BENCH_TRY(self, "buffer",
              halo_buffer_create(work->client, 0, HALO_MEMORY_HOST_VISIBLE,
                                 4 * BENCH_N, 0, &work->buffers[i]));
    work->bindings[i] =
        (halo_binding_t){work->buffers[i], 0, HALO_WHOLE_BUFFER};
  }
  work->a = halo_buffer_host_pointer(work->buffers[0]);
  work->b = halo_buffer_host_pointer(work->buffers[1]);
  work->c = halo_buffer_host_pointer(work->buffers[2]);
  BENCH_TRY(self, "semaphore",
            halo_semaphore_create(work->client, 0, 0, &work->done));
  return true;
}

static bool bench_work_setup(bench_work_t *work, bench_process_t *self,
                             const bench_options_t *options, int index) {
  if (work->impl == BENCH_IMPL_HALO) {
    if (!bench_halo_setup(work, self, options)) return false;
  } else {
    static float a[BENCH_N], b[BENCH_N], c[BENCH_N];
    work->a = a, work->b = b, work->c = c;
  }
  for (int i = 0; i < BENCH_N; ++i) {
    work->a[i] = (float)i;
    work->b[i] = (float)(2 * i + index);
    work->c[i] = -1.0f;
  }
  work->arg_a = work->a, work->arg_b = work->b, work->arg_c = work->c;
  work->n = BENCH_N;
  work->args[0] = &work->arg_a;
  work->args[1] = &work->arg_b;
  work->args[2] = &work->arg_c;
  work->args[3] = &work->n;
  if (work->impl == BENCH_IMPL_HANDOFF) {
    int rv = pthread_create(&work->thread, NULL, bench_handoff_worker, work);
    if (rv != 0) {
      snprintf(self->error, sizeof(self->error), "pthread_create: %s",
               strerror(rv));
      return false;
    }
  }
  return true;
}

// One execution, start to completion.
static bool bench_work_step(bench_work_t *work, bench_process_t *self) {
  switch (work->impl) {
    case BENCH_IMPL_HALO: {
      halo_semaphore_value_t signal = {work->done, ++work->value};
      BENCH_TRY(self, "execute",
                halo_queue_execute(NULL, work->command_buffer, work->bindings,
                                   3, NULL, 0, &signal, 1));
      BENCH_TRY(
          self, "wait",
          halo_semaphore_wait(work->done, signal.value, BENCH_STEP_TIMEOUT_NS));
      return true;
    }
    case BENCH_IMPL_HANDOFF: {
      uint32_t sequence = ++work->sequence;
      bench_event_signal(&work->submitted, &work->submitted_sleepers, sequence);
      bench_event_wait(&work->completed, &work->completed_sleepers, sequence);
      return true;
    }
    default:
      bench_kernel_call(work);
      return true;
  }
}

// Checks c = a + b (the work happened), then releases everything.
static bool bench_work_teardown(bench_work_t *work, bench_process_t *self) {
  int wrong = 0;
  for (int i = 0; i < BENCH_N; ++i) {
    if (work->c[i] != work->a[i] + work->b[i]) ++wrong;
  }
  if (work->impl == BENCH_IMPL_HANDOFF) {
    atomic_store(&work->stop, true);
    bench_event_signal(&work->submitted, &work->submitted_sleepers,
                       work->sequence + 1);
    pthread_join(work->thread, NULL);
  }
  halo_semaphore_release(work->done);
  for (int i = 0; i < 3; ++i) halo_buffer_release(work->buffers[i]);
  halo_command_buffer_release(work->command_buffer);
  halo_executable_release(work->executable);
  halo_client_close(work->client);
  if (wrong) {
    snprintf(self->error, sizeof(self->error), "%d wrong results of %d", wrong,
             BENCH_N);
  }
  return wrong == 0;
}

// A forked process of a case: sets up, warms up, reports ready, waits for
// the start, loops until the deadline or max_count, reports. Returns the
// exit status.
static int bench_process_main(const bench_options_t *options, bench_impl_t impl,
                              int index) {
  bench_process_t *self = &g_shared->processes[index];
  // Aligned: the handoff's events sit on their own cache lines.
  bench_work_t *work = aligned_alloc(64, sizeof(*work));
  if (!work) return 1;
  memset(work, 0, sizeof(*work));
  work->impl = impl;
  if (!bench_work_setup(work, self, options, index)) return 1;
  for (int i = 0; i < BENCH_WARMUP; ++i) {
    if (!bench_work_step(work, self)) return 1;
  }
  atomic_fetch_add(&g_shared->ready, 1);
  while (!atomic_load(&g_shared->go)) {
    struct timespec slice = {.tv_sec = 1};
    bench_futex(&g_shared->go, FUTEX_WAIT, 0, &slice);
  }
  int64_t deadline = g_shared->deadline_ns;
  int64_t max_count = g_shared->max_count;
  int64_t count = 0;
  int64_t cpu = bench_self_cpu_ns();
  int64_t t = bench_now_ns();
  while (count < max_count && t < deadline) {
    if (!bench_work_step(work, self)) return 1;
    int64_t next = bench_now_ns();
    self->samples[count % BENCH_RING] = next - t;
    t = next;
    ++count;
  }
  self->count = count;
  self->end_ns = t;
  self->cpu_ns = bench_self_cpu_ns() - cpu;
  bool ok = bench_work_teardown(work, self);
  free(work);
  return ok ? 0 : 1;
}

// ------------------------------------------------------------------ cases

typedef struct bench_stats_t {
  int64_t count;  // steps of all processes
  double p50_us, p99_us, mean_us, min_us, max_us;
  double per_second;  // all processes together
  double per_process_mean, per_process_min, per_process_max;
  double elapsed_s;      // the start until the last process ended
  double cpu_us;         // CPU of the processes per step, all threads
  double daemon_cpu_us;  // halod's CPU per step; -1: not measured
} bench_stats_t;

static int bench_compare_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

// Kills and reaps |count| processes (a case that failed).
static void bench_kill_all(const pid_t *pids, int count) {
  for (int i = 0; i < count; ++i) {
    if (pids[i] > 0) kill(pids[i], SIGKILL);
  }
  for (int i = 0; i < count; ++i) {
    if (pids[i] > 0) waitpid(pids[i], NULL, 0);
  }
}

// Dies with the first process's error (or how it ended).
static void bench_die_process(pid_t *pids, int count, int index, int status) {
  pids[index] = 0;
  bench_kill_all(pids, count);
  const char *error = g_shared->processes[index].error;
  if (*error) bench_die("process %d: %s", index, error);
  if (WIFSIGNALED(status)) {
    bench_die("process %d: killed by signal %d", index, WTERMSIG(status));
  }
  bench_die("process %d: exit status %d", index, WEXITSTATUS(status));
}

// Runs |count| processes of |impl| together: |max_count| steps each, or
// until |seconds| after the start.
static bench_stats_t bench_case_run(const bench_options_t *options,
                                    bench_impl_t impl, int count,
                                    int64_t max_count, double seconds) {
  memset(g_shared, 0, offsetof(bench_shared_t, processes));
  for (int i = 0; i < count; ++i) {
    g_shared->processes[i].count = 0;
    g_shared->processes[i].end_ns = 0;
    g_shared->processes[i].error[0] = '\0';
  }
  g_shared->max_count = max_count;
  pid_t pids[BENCH_MAX_PROCESSES] = {0};
  fflush(NULL);
  for (int i = 0; i < count; ++i) {
    pids[i] = fork();
    if (pids[i] < 0) {
      pids[i] = 0;
      bench_kill_all(pids, count);
      bench_die("fork: %s", strerror(errno));
    }
    if (pids[i] == 0) _exit(bench_process_main(options, impl, i));
  }

  // Every process set up and warmed up, or one failed.
  int64_t setup_deadline =
      bench_now_ns() + BENCH_SETUP_TIMEOUT_S * 1000000000ll;
  while (atomic_load(&g_shared->ready) < (uint32_t)count) {
    for (int i = 0; i < count; ++i) {
      int status;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        bench_die_process(pids, count, i, status);
      }
    }
    if (bench_now_ns() > setup_deadline) {
      bench_kill_all(pids, count);
      bench_die("%s: %d processes not ready after %d s", kImplCsv[impl], count,
                BENCH_SETUP_TIMEOUT_S);
    }
    usleep(1000);
  }

  // halod's CPU time over the case (all of halod: the case is alone).
  pid_t daemon_pid =
      impl == BENCH_IMPL_HALO ? g_shared->processes[0].daemon_pid : 0;
  int64_t daemon_cpu = daemon_pid > 0 ? bench_process_cpu_ns(daemon_pid) : -1;
  int64_t start = bench_now_ns();
  g_shared->start_ns = start;
  g_shared->deadline_ns = start + (int64_t)(seconds * 1e9);
  atomic_store(&g_shared->go, 1);
  bench_futex(&g_shared->go, FUTEX_WAKE, INT_MAX, NULL);
  for (int i = 0; i < count; ++i) {
    int status;
    while (waitpid(pids[i], &status, 0) < 0) {
      if (errno != EINTR) bench_die("waitpid: %s", strerror(errno));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      bench_die_process(pids, count, i, status);
    }
    pids[i] = 0;
  }
  if (daemon_cpu >= 0) {
    int64_t after = bench_process_cpu_ns(daemon_pid);
    daemon_cpu = after >= 0 ? after - daemon_cpu : -1;
  }

  // Figures: executions/s of all and of each; latency of every step kept.
  bench_stats_t stats = {.per_process_min = INFINITY};
  int64_t kept = 0, end = start, cpu = 0;
  double per_process_sum = 0;
  for (int i = 0; i < count; ++i) {
    const bench_process_t *process = &g_shared->processes[i];
    stats.count += process->count;
    cpu += process->cpu_ns;
    kept += process->count < BENCH_RING ? process->count : BENCH_RING;
    if (process->end_ns > end) end = process->end_ns;
    double rate =
        process->end_ns > start
            ? (double)process->count * 1e9 / (double)(process->end_ns - start)
            : 0;
    per_process_sum += rate;
    stats.per_process_min = fmin(stats.per_process_min, rate);
    stats.per_process_max = fmax(stats.per_process_max, rate);
  }
  stats.per_process_mean = per_process_sum / count;
  stats.per_second =
      end > start ? (double)stats.count * 1e9 / (double)(end - start) : 0;
  stats.elapsed_s = (double)(end - start) / 1e9;
  double steps = stats.count > 0 ? (double)stats.count : 1;
  stats.cpu_us = (double)cpu / 1e3 / steps;
  stats.daemon_cpu_us = daemon_cpu >= 0 ? (double)daemon_cpu / 1e3 / steps : -1;
  int64_t *samples = calloc((size_t)kept, sizeof(int64_t));
  if (!samples) bench_die("out of memory");
  int64_t n = 0;
  double sum = 0;
  for (int i = 0; i < count; ++i) {
    const bench_process_t *process = &g_shared->processes[i];
    int64_t own = process->count < BENCH_RING ? process->count : BENCH_RING;
    for (int64_t j = 0; j < own; ++j) {
      samples[n] = process->samples[j];
      sum += (double)samples[n++];
    }
  }
  if (n > 0) {
    // Nearest-rank percentiles, as halo-bench-control.
    qsort(samples, (size_t)n, sizeof(int64_t), bench_compare_i64);
    int64_t p50 = (int64_t)ceil(0.50 * (double)n) - 1;
    int64_t p99 = (int64_t)ceil(0.99 * (double)n) - 1;
    stats.p50_us = (double)samples[p50 < 0 ? 0 : p50] / 1e3;
    stats.p99_us = (double)samples[p99 < 0 ? 0 : p99] / 1e3;
    stats.mean_us = sum / (double)n / 1e3;
    stats.min_us = (double)samples[0] / 1e3;
    stats.max_us = (double)samples[n - 1] / 1e3;
  }
  free(samples);
  return stats;
}

// ------------------------------------------------------------------ report

// One case: every implementation with |processes| processes.
typedef struct bench_report_row_t {
  char name[64];
  int processes;
  bench_stats_t impl[BENCH_IMPL_COUNT];
} bench_report_row_t;

static double bench_ratio(double x, double y) {
  return y > 0 ? x / y : NAN;
}

static void bench_print_latency(const bench_report_row_t *row, int iterations) {
  printf("execute + wait, one process, %d steps (microseconds)\n", iterations);
  printf("%-40s %8s %9s %9s %9s %9s %9s\n", "case", "n", "p50", "p99", "mean",
         "min", "max");
  for (int i = 0; i < BENCH_IMPL_COUNT; ++i) {
    const bench_stats_t *s = &row->impl[i];
    printf("%-40s %8lld %9.2f %9.2f %9.2f %9.2f %9.2f\n", kImplLabel[i],
           (long long)s->count, s->p50_us, s->p99_us, s->mean_us, s->min_us,
           s->max_us);
  }
  const bench_stats_t *h = &row->impl[BENCH_IMPL_HALO];
  const bench_stats_t *n = &row->impl[BENCH_IMPL_HANDOFF];
  printf("%-40s %8s %8.1fx %8.1fx %8.1fx\n\n", "  halo / native handoff", "",
         bench_ratio(h->p50_us, n->p50_us), bench_ratio(h->p99_us, n->p99_us),
         bench_ratio(h->mean_us, n->mean_us));
}

// "cpu/step": CPU time of the case's processes (every thread) per step;
// "halod/step": halod's, for halo. Both in microseconds.
static void bench_print_throughput(const bench_report_row_t *rows, int count,
                                   double seconds) {
  printf(
      "executions per second, N processes at once for %.0f s, one execution "
      "in flight each\n",
      seconds);
  printf("%-36s %5s %9s %9s %9s %9s %9s %8s %8s %8s %8s\n", "case", "procs",
         "steps", "per s", "per proc", "proc min", "proc max", "p50 us",
         "p99 us", "cpu/step", "halod");
  for (int r = 0; r < count; ++r) {
    const bench_report_row_t *row = &rows[r];
    for (int i = 0; i < BENCH_IMPL_COUNT; ++i) {
      const bench_stats_t *s = &row->impl[i];
      char daemon[16] = "";
      if (s->daemon_cpu_us >= 0) {
        snprintf(daemon, sizeof(daemon), "%.1f", s->daemon_cpu_us);
      }
      printf("%-36s %5d %9lld %9.0f %9.0f %9.0f %9.0f %8.2f %8.2f %8.2f %8s\n",
             kImplLabel[i], row->processes, (long long)s->count, s->per_second,
             s->per_process_mean, s->per_process_min, s->per_process_max,
             s->p50_us, s->p99_us, s->cpu_us, daemon);
    }
    const bench_stats_t *h = &row->impl[BENCH_IMPL_HALO];
    const bench_stats_t *n = &row->impl[BENCH_IMPL_HANDOFF];
    printf(
        "  %d process%s: native handoff / halo %.0fx executions/s; "
        "halo / native handoff %.1fx p50, %.1fx p99\n",
        row->processes, row->processes == 1 ? "" : "es",
        bench_ratio(n->per_second, h->per_second),
        bench_ratio(h->p50_us, n->p50_us), bench_ratio(h->p99_us, n->p99_us));
    if (h->daemon_cpu_us >= 0) {
      printf(
          "  %d process%s: halo used %.2f CPUs (clients %.2f, halod %.2f) of "
          "%ld\n",
          row->processes, row->processes == 1 ? "" : "es",
          (h->cpu_us + h->daemon_cpu_us) * h->per_second / 1e6,
          h->cpu_us * h->per_second / 1e6,
          h->daemon_cpu_us * h->per_second / 1e6,
          sysconf(_SC_NPROCESSORS_ONLN));
    }
  }
}

// The CSV of halo-bench-control with two more columns: per_second (steps
// per second, all processes) and ratio_per_second (native / halo: like
// ratio_p50, how many times halo's cost). The native handoff is the
// baseline of the ratios; native-direct rows have none.
static void bench_write_csv(const char *path, const bench_report_row_t *rows,
                            int count) {
  FILE *out = fopen(path, "w");
  if (!out) bench_die("cannot write %s: %s", path, strerror(errno));
  fputs(
      "case,impl,method,n,p50_us,p99_us,mean_us,min_us,max_us,ratio_p50,"
      "ratio_p99,per_second,ratio_per_second\n",
      out);
  for (int r = 0; r < count; ++r) {
    const bench_report_row_t *row = &rows[r];
    const bench_stats_t *native = &row->impl[BENCH_IMPL_HANDOFF];
    for (int i = 0; i < BENCH_IMPL_COUNT; ++i) {
      const bench_stats_t *s = &row->impl[i];
      fprintf(out, "\"%s\",%s,\"%s\",%lld,%.3f,%.3f,%.3f,%.3f,%.3f,", row->name,
              kImplCsv[i], kImplMethod[i], (long long)s->count, s->p50_us,
              s->p99_us, s->mean_us, s->min_us, s->max_us);
      if (i == BENCH_IMPL_HALO) {
        fprintf(out, "%.3f,%.3f,%.1f,%.3f\n",
                bench_ratio(s->p50_us, native->p50_us),
                bench_ratio(s->p99_us, native->p99_us), s->per_second,
                bench_ratio(native->per_second, s->per_second));
      } else {
        fprintf(out, ",,%.1f,\n", s->per_second);
      }
    }
  }
  if (fclose(out) != 0) bench_die("writing %s: %s", path, strerror(errno));
}

static void bench_print_machine(const bench_options_t *options,
                                int32_t daemon_pid) {
  bench_print_header(stdout, "halo-bench-execute", halo_version_string(),
                     daemon_pid, options->address);
  printf(
      "work: one dispatch of vector_add over %d floats per step (%s);\n"
      "native handoff: a worker thread per process, store + FUTEX_WAKE each "
      "way,\n  %lld us spin before FUTEX_WAIT; %d warm-up steps per "
      "process\n\n",
      BENCH_N, options->kernel_path, (long long)(g_spin_ns / 1000),
      BENCH_WARMUP);
}

// ------------------------------------------------------------------ main

static void bench_usage(FILE *out) {
  fputs(
      "usage: halo-bench-execute [--address ADDR] [--csv FILE]\n"
      "                          [--iterations N] [--seconds S]\n"
      "                          [--processes LIST] KERNEL.so\n"
      "\n"
      "Executions of a memoized command buffer (one vector_add dispatch) on\n"
      "halod's local driver: execute + wait latency in one process, and\n"
      "executions per second with N client processes at once, each beside a\n"
      "native baseline (the kernel handed to a thread by a futex, and called\n"
      "directly). KERNEL.so is bin/vector_add.so of the build.\n"
      "\n"
      "  --address ADDR    halod's client socket (default: $HALO_ADDRESS,\n"
      "                    else ipc:///run/halo/halo.sock)\n"
      "  --csv FILE        also write the figures as CSV\n"
      "  --iterations N    steps of the latency case (default 3000)\n"
      "  --seconds S       length of each throughput case (default 3)\n"
      "  --processes LIST  process counts of the throughput cases (default "
      "1,4,8)\n"
      "  --native-spin-us US  the native handoff spins this long before\n"
      "                    FUTEX_WAIT (default 0; halo's waits spin 20)\n",
      out);
}

// "1,4,8": up to BENCH_MAX_CASES counts of 1..BENCH_MAX_PROCESSES.
static void bench_parse_processes(bench_options_t *options, const char *text) {
  options->case_count = 0;
  const char *p = text;
  bool ok = *p != '\0';
  while (ok && *p) {
    char *end = NULL;
    long value = strtol(p, &end, 10);
    ok = end != p && value >= 1 && value <= BENCH_MAX_PROCESSES &&
         options->case_count < BENCH_MAX_CASES && (!*end || *end == ',');
    if (ok) options->process_counts[options->case_count++] = (int)value;
    p = *end ? end + 1 : end;
  }
  if (!ok) {
    fprintf(stderr,
            "halo-bench-execute: --processes wants up to %d counts of 1..%d "
            "separated by commas, got '%s'\n",
            BENCH_MAX_CASES, BENCH_MAX_PROCESSES, text);
    exit(2);
  }
}

int main(int argc, char **argv) {
  enum {
    kOptAddress = 256,
    kOptCsv,
    kOptIterations,
    kOptSeconds,
    kOptProcesses,
    kOptNativeSpin,
  };
  static const struct option kLongOptions[] = {
      {"address", required_argument, NULL, kOptAddress},
      {"csv", required_argument, NULL, kOptCsv},
      {"iterations", required_argument, NULL, kOptIterations},
      {"seconds", required_argument, NULL, kOptSeconds},
      {"processes", required_argument, NULL, kOptProcesses},
      {"native-spin-us", required_argument, NULL, kOptNativeSpin},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  bench_options_t options = {.iterations = 3000, .seconds = 3};
  bench_parse_processes(&options, "1,4,8");
  int opt;
  while ((opt = getopt_long(argc, argv, "h", kLongOptions, NULL)) != -1) {
    char *end = NULL;
    switch (opt) {
      case kOptAddress:
        options.address = optarg;
        break;
      case kOptCsv:
        options.csv_path = optarg;
        break;
      case kOptIterations:
        options.iterations = (int)strtol(optarg, &end, 10);
        if (!*optarg || *end || options.iterations < 10 ||
            options.iterations > 10000000) {
          fprintf(stderr, "halo-bench-execute: --iterations wants 10..1e7\n");
          return 2;
        }
        break;
      case kOptSeconds:
        options.seconds = strtod(optarg, &end);
        if (!*optarg || *end || !(options.seconds > 0) ||
            options.seconds > 600) {
          fprintf(stderr, "halo-bench-execute: --seconds wants (0, 600]\n");
          return 2;
        }
        break;
      case kOptProcesses:
        bench_parse_processes(&options, optarg);
        break;
      case kOptNativeSpin: {
        long spin = strtol(optarg, &end, 10);
        if (!*optarg || *end || spin < 0 || spin > 1000000) {
          fprintf(stderr,
                  "halo-bench-execute: --native-spin-us wants 0..1e6\n");
          return 2;
        }
        g_spin_ns = spin * 1000;
        break;
      }
      case 'h':
        bench_usage(stdout);
        return 0;
      default:
        bench_usage(stderr);
        return 2;
    }
  }
  if (optind != argc - 1) {
    bench_usage(stderr);
    return 2;
  }
  options.kernel_path = argv[optind];
  if (!options.address || !*options.address) {
    const char *env = getenv("HALO_ADDRESS");
    options.address = env && *env ? env : "ipc:///run/halo/halo.sock";
  }

  // The native baselines' kernel; forked processes inherit it.
  void *library = dlopen(options.kernel_path, RTLD_NOW | RTLD_LOCAL);
  if (!library) bench_die("%s", dlerror());
  g_kernel = (bench_kernel_t)dlsym(library, "vector_add");
  if (!g_kernel) bench_die("no vector_add in %s", options.kernel_path);
  g_shared = mmap(NULL, sizeof(bench_shared_t), PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_shared == MAP_FAILED) bench_die("mmap: %s", strerror(errno));

  bench_report_row_t rows[1 + BENCH_MAX_CASES];
  memset(rows, 0, sizeof(rows));
  bench_report_row_t *latency = &rows[0];
  snprintf(latency->name, sizeof(latency->name), "execute + wait");
  latency->processes = 1;
  for (int i = 0; i < BENCH_IMPL_COUNT; ++i) {
    latency->impl[i] = bench_case_run(&options, (bench_impl_t)i, 1,
                                      options.iterations, BENCH_LATENCY_CAP_S);
    if (latency->impl[i].count < options.iterations) {
      bench_die("latency case: %lld steps in %d s",
                (long long)latency->impl[i].count, BENCH_LATENCY_CAP_S);
    }
  }
  bench_print_machine(&options, g_shared->processes[0].daemon_pid);
  bench_print_latency(latency, options.iterations);
  fflush(stdout);

  for (int c = 0; c < options.case_count; ++c) {
    bench_report_row_t *row = &rows[1 + c];
    row->processes = options.process_counts[c];
    snprintf(row->name, sizeof(row->name), "executions/s, %d process%s",
             row->processes, row->processes == 1 ? "" : "es");
    for (int i = 0; i < BENCH_IMPL_COUNT; ++i) {
      row->impl[i] = bench_case_run(&options, (bench_impl_t)i, row->processes,
                                    INT64_MAX, options.seconds);
    }
  }
  bench_print_throughput(rows + 1, options.case_count, options.seconds);
  if (options.csv_path) {
    bench_write_csv(options.csv_path, rows, 1 + options.case_count);
    printf("\nCSV written to %s\n", options.csv_path);
  }
  munmap(g_shared, sizeof(bench_shared_t));
  dlclose(library);
  return 0;
}
