// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Pieces shared by the benchmarks of bench/: clocks, CPU time of this
// process and of another (halod), futexes, percentiles, and the CSV rows
// that scripts/gpu-bench gathers into one table (bench/plot.py).
//
// Thread-safety: the CSV writer is for one thread of one process at a time;
// the rest is thread-safe.
#ifndef HALO_BENCH_BENCH_COMMON_H_
#define HALO_BENCH_BENCH_COMMON_H_

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "tests/support/fake_cuda_image.h"

// The first lines of a benchmark's report: "PROGRAM VERSION, DATE UTC:
// halod pid PID at ADDRESS" and "host: N online CPUs, CPU model, Linux
// RELEASE".
void bench_print_header(FILE *out, const char *program, const char *version,
                        int32_t daemon_pid, const char *address);

// CLOCK_MONOTONIC in nanoseconds (one clock for every process of a host).
int64_t bench_now_ns(void);

// CPU time (user + system) of this process, all threads.
int64_t bench_self_cpu_ns(void);

// CPU time of process |pid|, all its threads: the sum of
// /proc/PID/task/*/schedstat (nanoseconds), else /proc/PID/stat's utime +
// stime (clock ticks: 10 ms). -1 if neither can be read.
int64_t bench_process_cpu_ns(pid_t pid);

// One thread of a process: its id, name (comm), CPU time and the times it
// was switched onto a CPU (/proc/PID/task/TID/schedstat: nanoseconds run,
// and run periods: a thread that sleeps between steps is switched in again
// each step, one that spins is not).
typedef struct bench_task_t {
  pid_t tid;
  char name[20];
  int64_t ns;
  int64_t switches;
} bench_task_t;

// The threads of |pid|, at most |capacity|; their count.
int bench_tasks(pid_t pid, bench_task_t *out_tasks, int capacity);

// The child processes of |pid| (/proc/PID/task/PID/children), at most
// |capacity|; their count.
int bench_children(pid_t pid, pid_t *out_children, int capacity);

// Prints, per thread name, the CPU each thread group spent and the times
// it was switched in between two bench_tasks snapshots, divided by |per|
// (e.g. steps), to |file| with |indent|. Threads that ended in between are
// not counted.
void bench_tasks_print_delta(void *file, const char *indent,
                             const bench_task_t *before, int before_count,
                             const bench_task_t *after, int after_count,
                             double per);

// The threads of an optional client process, a daemon and the daemon's
// children (its device workers): two snapshots give where the CPU went.
enum { BENCH_TREE_PROCESSES = 8, BENCH_TREE_TASKS = 128 };
typedef struct bench_tree_t {
  int process_count;
  bool has_client;  // pids[0] is the client
  pid_t pids[BENCH_TREE_PROCESSES];
  int counts[BENCH_TREE_PROCESSES];
  bench_task_t tasks[BENCH_TREE_PROCESSES][BENCH_TREE_TASKS];
} bench_tree_t;

// Snapshots |client_pid| (0: none), |daemon_pid| and its children.
void bench_tree_take(bench_tree_t *tree, pid_t client_pid, pid_t daemon_pid);

// Per process present in both snapshots, bench_tasks_print_delta under a
// line naming it (client, halod, halod's child).
void bench_tree_print(void *file, const char *indent,
                      const bench_tree_t *before, const bench_tree_t *after,
                      double per);

long bench_futex(_Atomic uint32_t *word, int op, uint32_t value,
                 const struct timespec *timeout);

typedef struct bench_summary_t {
  int64_t count;
  double p50, p99, mean, min, max;
} bench_summary_t;

// Sorts |us| (|count| samples in microseconds) and summarizes them; all
// zero when |count| is 0.
bench_summary_t bench_summarize(double *us, int64_t count);

// One row of the CSV (bench/plot.py reads it). NAN leaves a figure empty.
//   workload   L1, S1, T8, M1 or C1 (the names)
//   name       what was measured
//   impl       native, mps, streams (one process, a stream per client),
//              hal (halo's CUDA driver in process), halod (through halod)
//   clients    client processes (or threads) of the case
//   n          samples or steps
//   per_second rate: steps/s of all clients together
//   cpu_us     the clients' CPU per step (or a native enqueue's)
//   daemon_cpu_us  halod's CPU per step
//   memory_mib GPU memory
//   ms         a duration in milliseconds (loads)
//   note       free text
typedef struct bench_row_t {
  const char *workload;
  const char *name;
  const char *impl;
  int clients;
  int64_t n;
  double p50_us, p99_us, mean_us, per_second, cpu_us, daemon_cpu_us;
  double memory_mib, ms;
  const char *note;
} bench_row_t;

// A row with every figure NAN.
bench_row_t bench_row(const char *workload, const char *name, const char *impl);

// Opens |path| for appending (the header goes first into an empty file);
// exits on failure. Without it bench_csv_write does nothing.
void bench_csv_open(const char *path, const char *program);
void bench_csv_write(const bench_row_t *row);
void bench_csv_close(void);

// HALO_TEST_FAKE_CUDA=1: the kernels come from the fake driver of
// tests/unit/hal_cuda_fake_driver.c (a smoke test without a GPU; the
// figures mean nothing). Its CUBIN is tests/support/fake_cuda_image.h's;
// |variant| changes a byte the fake ignores (distinct content hashes).
bool bench_fake_cuda(void);
#define BENCH_FAKE_IMAGE_SIZE HALO_FAKE_CUDA_IMAGE_SIZE
void bench_fake_image(uint8_t out_image[BENCH_FAKE_IMAGE_SIZE],
                      uint8_t variant);

#endif  // HALO_BENCH_BENCH_COMMON_H_
