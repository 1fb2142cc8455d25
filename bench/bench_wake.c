// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-bench-wake: what waking a sleeping thread costs on this machine, the
// price of every hand-over to a thread that has gone to sleep (the CUDA
// submission thread, the completion poller, a worker's loop). One thread
// sleeps on a condition variable; the other lets it sleep for a gap, then
// signals it. Per gap: the latency from the signal to the sleeper running
// (p50 / p90 / p99) and the signaller's own cost (lock, signal, unlock).
// Then a FUTEX_WAKE with nobody waiting and a sched_yield, each per call.
// No GPU, no halod.
//
//   halo-bench-wake [--iterations N]
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench_common.h"

static struct {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool signalled;
  bool asleep;  // the sleeper waits on |cond| (under |mutex|)
  bool stop;
  _Atomic int64_t woke_ns;
} wake = {.mutex = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void *bench_sleeper(void *unused) {
  (void)unused;
  pthread_mutex_lock(&wake.mutex);
  for (;;) {
    wake.asleep = true;
    while (!wake.signalled && !wake.stop) {
      pthread_cond_wait(&wake.cond, &wake.mutex);
    }
    wake.asleep = false;
    if (wake.stop) break;
    wake.signalled = false;
    atomic_store(&wake.woke_ns, bench_now_ns());
  }
  pthread_mutex_unlock(&wake.mutex);
  return NULL;
}

static bool bench_sleeper_asleep(void) {
  pthread_mutex_lock(&wake.mutex);
  bool asleep = wake.asleep && !wake.signalled;
  pthread_mutex_unlock(&wake.mutex);
  return asleep;
}

int main(int argc, char **argv) {
  int iterations = 300;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: halo-bench-wake [--iterations N]\n");
      return 2;
    }
  }
  if (iterations < 10) iterations = 10;
  struct utsname uts;
  uname(&uts);
  printf("halo-bench-wake: %ld online CPUs, Linux %s\n",
         sysconf(_SC_NPROCESSORS_ONLN), uts.release);
  pthread_t sleeper;
  if (pthread_create(&sleeper, NULL, bench_sleeper, NULL) != 0) {
    fprintf(stderr, "halo-bench-wake: pthread_create failed\n");
    return 1;
  }
  double *latency = calloc((size_t)iterations, sizeof(double));
  double *cost = calloc((size_t)iterations, sizeof(double));
  if (!latency || !cost) return 1;
  printf("  %-34s %10s %10s %10s %12s\n", "condition variable, asleep for",
         "p50 us", "p90 us", "p99 us", "signal p50");
  const int64_t gaps_ns[] = {20000, 200000, 2000000};
  for (size_t g = 0; g < sizeof(gaps_ns) / sizeof(gaps_ns[0]); ++g) {
    for (int i = 0; i < iterations; ++i) {
      while (!bench_sleeper_asleep()) sched_yield();
      int64_t asleep_since = bench_now_ns();
      while (bench_now_ns() - asleep_since < gaps_ns[g]) {
      }
      atomic_store(&wake.woke_ns, 0);
      int64_t start = bench_now_ns();
      pthread_mutex_lock(&wake.mutex);
      wake.signalled = true;
      pthread_cond_signal(&wake.cond);
      pthread_mutex_unlock(&wake.mutex);
      int64_t signalled = bench_now_ns();
      int64_t woke;
      while ((woke = atomic_load(&wake.woke_ns)) == 0) {
      }
      latency[i] = (double)(woke - start) / 1e3;
      cost[i] = (double)(signalled - start) / 1e3;
    }
    bench_summary_t costs = bench_summarize(cost, iterations);
    bench_summarize(latency, iterations);  // sorts
    char name[48];
    snprintf(name, sizeof(name), "%lld us", (long long)(gaps_ns[g] / 1000));
    printf("  %-34s %10.1f %10.1f %10.1f %12.1f\n", name,
           latency[iterations / 2], latency[iterations * 9 / 10],
           latency[iterations * 99 / 100], costs.p50);
  }
  pthread_mutex_lock(&wake.mutex);
  wake.stop = true;
  pthread_cond_signal(&wake.cond);
  pthread_mutex_unlock(&wake.mutex);
  pthread_join(sleeper, NULL);

  uint32_t *word = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (word == MAP_FAILED) return 1;
  const int calls = 100000;
  int64_t start = bench_now_ns();
  for (int i = 0; i < calls; ++i) {
    syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
  }
  printf("  %-34s %10.2f us per call\n", "FUTEX_WAKE, nobody waiting",
         (double)(bench_now_ns() - start) / calls / 1e3);
  start = bench_now_ns();
  for (int i = 0; i < calls; ++i) sched_yield();
  printf("  %-34s %10.2f us per call\n", "sched_yield",
         (double)(bench_now_ns() - start) / calls / 1e3);
  munmap(word, 4096);
  free(latency);
  free(cost);
  return 0;
}
