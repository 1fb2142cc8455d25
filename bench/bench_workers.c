// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-bench-workers: what a crashing tenant costs the others, and what
// its own recovery costs, with halod's worker processes
// (--device-workers process, the default) and one trust domain per client
// process (halod started by the caller with --trust-domain process and
// --fault-budget 0: the attacker faults once per round).
//
//   halo-bench-workers --address ipc://... --driver local|cuda
//                      [--kernels PATH] [--rounds N] [--csv FILE]
//
// A victim (a forked child: its own process, so its own domain) loops a
// small vector add + semaphore wait for the whole run. The attacker (this
// process) runs `crash` once per round and waits for DEVICE_LOST (its
// worker died), then closes its client, connects again (halod starts a fresh
// worker for the domain), loads the kernels and runs one `add` to
// completion.
//
// Reported:
// 1. Blast radius: the victim's steps, failures (expected 0), steps/s and
//    largest gap between consecutive step completions during the rounds.
// 2. Recovery: restart-to-first-execution (close + connect + load + record
//    + execute + wait) p50/p99/max in ms, and its parts' p50 (connect
//    includes the worker's start).
//
// Kernels: --driver local loads the ELF at --kernels (tests/kernels'
// test_kernels_a.so: `add`, `crash`); --driver cuda has halod compile CUDA C
// source (NVRTC) with an `add` and a `crash` that stores to address 0x10.
//
// Every wait is bounded (10 s); anything unexpected exits non-zero.
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "checked_add.h"
#include "halo/halo.h"

#define WAIT_NS (10000ll * 1000000ll)  // every semaphore wait
#define REQUEST_TIMEOUT_MS 10000       // every request to halod
#define N 256                          // floats of the vector adds
#define ROUNDS_MAX 100000

static const char kCudaSource[] =
    "extern \"C\" __global__ void add(const float *a, const float *b,\n"
    "                                 float *c, unsigned n) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) c[i] = a[i] + b[i];\n"
    "}\n"
    "extern \"C\" __global__ void crash(void) {\n"
    "  *(volatile int *)0x10 = 1;\n"
    "}\n";

static struct {
  const char *address;
  const char *driver;
  const char *kernels;
  const char *csv;
  int rounds;
  bool cuda;
} options = {.rounds = 20};

// Shared between the attacker (parent) and the victim (child).
typedef struct shared_t {
  _Atomic uint32_t ready;      // victim: set up, first step done
  _Atomic uint32_t measuring;  // attacker: the rounds are on
  _Atomic uint32_t stop;       // attacker: leave the loop
  _Atomic uint32_t done;       // victim: left the loop, figures final
  // Victim's figures, during the rounds.
  int64_t steps, failures, max_gap_ns;
  int64_t window_start_ns, window_end_ns;
  int64_t total_steps;
  char error[512];  // setup failure or the first failed step's status
} shared_t;

static shared_t *g_shared;
static pid_t g_victim;

static void die(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "halo-bench-workers: ");
  vfprintf(stderr, format, args);
  fprintf(stderr, "\n");
  va_end(args);
  if (g_victim > 0) {
    kill(g_victim, SIGKILL);
    waitpid(g_victim, NULL, 0);
  }
  exit(1);
}

// "CODE_NAME: message" of |status| into |out| (one line); frees it.
static void describe(halo_status_t status, char *out, size_t size) {
  snprintf(out, size, "%s: %s", halo_status_code_name(halo_status_code(status)),
           halo_status_message(status));
  for (char *p = out; *p; ++p) {
    if (*p == '\n' || *p == '\r') *p = ' ';
  }
  halo_status_free(status);
}

static void die_status(halo_status_t status, const char *what) {
  char text[512];
  describe(status, text, sizeof(text));
  die("%s: %s", what, text);
}

// ---------------------------------------------------------------- kernels

static halo_status_t load_kernels(halo_client_t *client,
                                  halo_executable_t **out_executable) {
  if (!options.cuda) {
    return halo_executable_create_from_file(
        client, 0, options.kernels, HALO_EXECUTABLE_FORMAT_ELF, out_executable);
  }
  halo_executable_params_t params = {
      .format = HALO_EXECUTABLE_FORMAT_CUDA_SOURCE,
      .data = kCudaSource,
      .size = sizeof(kCudaSource) - 1,
  };
  return halo_executable_create(client, 0, &params, out_executable);
}

static halo_status_t connect_client(const char *name,
                                    halo_client_t **out_client) {
  halo_client_options_t client_options = {
      .address = options.address,
      .client_name = name,
      .request_timeout_ms = REQUEST_TIMEOUT_MS,
  };
  return halo_client_connect(&client_options, out_client);
}

// ---------------------------------------------------------------- victim

// Connects, loads, runs a first step; NULL or why not.
static halo_status_t victim_setup(halo_client_t **client,
                                  halo_executable_t **executable,
                                  halo_checked_add_t *adder) {
  halo_status_t status = connect_client("bench-workers-victim", client);
  if (!status) status = load_kernels(*client, executable);
  if (!status) status = halo_checked_add_open(adder, *client, *executable);
  if (!status) status = halo_checked_add_step(adder, 0, WAIT_NS);
  return status;
}

static int victim_main(void) {
  halo_client_t *client = NULL;
  halo_executable_t *executable = NULL;
  halo_checked_add_t adder;
  halo_status_t status = victim_setup(&client, &executable, &adder);
  if (status) {
    describe(status, g_shared->error, sizeof(g_shared->error));
    return 2;
  }
  atomic_store(&g_shared->ready, 1);
  uint64_t step = 1;
  int64_t last = 0;  // the previous completion in the window; 0: none
  // A runaway bound: the parent always stops it long before.
  int64_t give_up = bench_now_ns() + 3600ll * 1000000000ll;
  while (!atomic_load(&g_shared->stop) && bench_now_ns() < give_up) {
    status = halo_checked_add_step(&adder, step, WAIT_NS);
    int64_t now = bench_now_ns();
    bool measuring = atomic_load(&g_shared->measuring) != 0;
    if (status) {
      if (measuring) ++g_shared->failures;
      if (!g_shared->error[0]) {
        describe(status, g_shared->error, sizeof(g_shared->error));
      } else {
        halo_status_free(status);
      }
      // Start over on a new session (an unexpected path: counted above).
      halo_client_close(client);
      client = NULL;
      status = victim_setup(&client, &executable, &adder);
      if (status) {
        char text[512];
        describe(status, text, sizeof(text));
        fprintf(stderr, "halo-bench-workers: victim: rebuild failed: %s\n",
                text);
        halo_client_close(client);
        atomic_store(&g_shared->done, 1);
        return 3;
      }
      last = 0;
      ++step;
      continue;
    }
    ++step;
    ++g_shared->total_steps;
    if (measuring) {
      ++g_shared->steps;
      if (last && now - last > g_shared->max_gap_ns) {
        g_shared->max_gap_ns = now - last;
      }
      last = now;
    } else {
      last = 0;
    }
  }
  halo_client_close(client);
  atomic_store(&g_shared->done, 1);
  return 0;
}

// ---------------------------------------------------------------- attacker

// Executes one workgroup of `crash` (no args), signaling done = 1, and
// waits: DEVICE_LOST naming the worker expected (from the execute itself or
// from the wait).
static void attack(halo_client_t *client, halo_executable_t *executable,
                   int round) {
  halo_semaphore_t *done = NULL;
  halo_status_t status = halo_semaphore_create(client, 0, 0, &done);
  if (status) die_status(status, "attacker: semaphore_create");
  halo_command_buffer_t *cb = NULL;
  status = halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_ONE_SHOT, 0,
                                     &cb);
  if (status) die_status(status, "attacker: command_buffer_begin");
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "crash",
      .grid = {1, 1, 1},
      .block = {1, 1, 1},
  };
  status = halo_command_buffer_dispatch(cb, &params);
  if (!status) status = halo_command_buffer_end(cb);
  if (status) die_status(status, "attacker: recording crash");
  halo_semaphore_value_t signal = {done, 1};
  status = halo_queue_execute(NULL, cb, NULL, 0, NULL, 0, &signal, 1);
  if (!status) status = halo_semaphore_wait(done, 1, WAIT_NS);
  if (!status) die("round %d: crash completed without an error", round);
  if (halo_status_code(status) != HALO_STATUS_DEVICE_LOST ||
      !strstr(halo_status_message(status), "worker")) {
    char what[64];
    snprintf(what, sizeof(what),
             "round %d: crash: expected DEVICE_LOST naming the worker", round);
    die_status(status, what);
  }
  halo_status_free(status);
  // The old client's objects go with halo_client_close.
}

enum { kClose, kConnect, kLoad, kFirst, kTotal, kParts };
static const char *const kPartNames[kParts] = {
    "close", "connect (worker start)", "load kernels",
    "record + execute + wait", "restart to first execution"};

int main(int argc, char **argv) {
  static const struct option long_options[] = {
      {"address", required_argument, NULL, 'a'},
      {"driver", required_argument, NULL, 'd'},
      {"kernels", required_argument, NULL, 'k'},
      {"rounds", required_argument, NULL, 'r'},
      {"csv", required_argument, NULL, 'c'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int option;
  while ((option = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
    switch (option) {
      case 'a':
        options.address = optarg;
        break;
      case 'd':
        options.driver = optarg;
        break;
      case 'k':
        options.kernels = optarg;
        break;
      case 'r':
        options.rounds = atoi(optarg);
        break;
      case 'c':
        options.csv = optarg;
        break;
      default:
        fprintf(stderr,
                "usage: halo-bench-workers --address ipc://... --driver "
                "local|cuda [--kernels PATH] [--rounds N] [--csv FILE]\n"
                "  halod must run with --trust-domain process "
                "--fault-budget 0; --kernels (local): test_kernels_a.so "
                "(add, crash)\n");
        return option == 'h' ? 0 : 2;
    }
  }
  if (!options.address) die("--address ipc://... is required");
  if (!options.driver ||
      (strcmp(options.driver, "local") && strcmp(options.driver, "cuda"))) {
    die("--driver local or cuda");
  }
  options.cuda = strcmp(options.driver, "cuda") == 0;
  if (!options.cuda && !options.kernels) die("--driver local needs --kernels");
  if (options.rounds < 1 || options.rounds > ROUNDS_MAX) {
    die("--rounds 1..%d", ROUNDS_MAX);
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  g_shared = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_shared == MAP_FAILED) die("mmap: %s", strerror(errno));
  memset(g_shared, 0, sizeof(*g_shared));

  // The victim first, before this process holds any halo state.
  fflush(NULL);
  g_victim = fork();
  if (g_victim < 0) die("fork: %s", strerror(errno));
  if (g_victim == 0) _exit(victim_main());
  int64_t deadline = bench_now_ns() + 30ll * 1000000000ll;
  while (!atomic_load(&g_shared->ready)) {
    int wstatus;
    if (waitpid(g_victim, &wstatus, WNOHANG) == g_victim) {
      g_victim = 0;
      die("victim: setup failed: %s", g_shared->error);
    }
    if (bench_now_ns() > deadline) die("victim: not set up within 30 s");
    usleep(1000);
  }

  // The attacker's first session.
  halo_client_t *client = NULL;
  halo_executable_t *executable = NULL;
  halo_checked_add_t adder;
  halo_status_t status = connect_client("bench-workers-attacker", &client);
  if (!status) status = load_kernels(client, &executable);
  if (!status) status = halo_checked_add_open(&adder, client, executable);
  if (!status) status = halo_checked_add_step(&adder, 0, WAIT_NS);
  if (status) die_status(status, "attacker: setup");
  bench_print_header(stdout, "halo-bench-workers", halo_version_string(),
                     halo_client_daemon_pid(client), options.address);
  printf("driver %s, %d rounds; victim pid %d, attacker pid %d\n",
         options.driver, options.rounds, (int)g_victim, (int)getpid());
  if (options.csv) bench_csv_open(options.csv, "halo-bench-workers");

  double *samples[kParts];
  for (int p = 0; p < kParts; ++p) {
    samples[p] = calloc((size_t)options.rounds, sizeof(double));
    if (!samples[p]) die("oom");
  }
  g_shared->window_start_ns = bench_now_ns();
  atomic_store(&g_shared->measuring, 1);
  for (int round = 0; round < options.rounds; ++round) {
    attack(client, executable, round);
    int64_t t0 = bench_now_ns();
    halo_client_close(client);
    client = NULL;
    executable = NULL;
    int64_t t1 = bench_now_ns();
    status = connect_client("bench-workers-attacker", &client);
    if (status) die_status(status, "attacker: reconnect");
    int64_t t2 = bench_now_ns();
    status = load_kernels(client, &executable);
    if (status) die_status(status, "attacker: load after reconnect");
    int64_t t3 = bench_now_ns();
    status = halo_checked_add_open(&adder, client, executable);
    if (!status)
      status = halo_checked_add_step(&adder, (uint64_t)round + 1, WAIT_NS);
    if (status) die_status(status, "attacker: first add after reconnect");
    int64_t t4 = bench_now_ns();
    samples[kClose][round] = (double)(t1 - t0) / 1e3;
    samples[kConnect][round] = (double)(t2 - t1) / 1e3;
    samples[kLoad][round] = (double)(t3 - t2) / 1e3;
    samples[kFirst][round] = (double)(t4 - t3) / 1e3;
    samples[kTotal][round] = (double)(t4 - t0) / 1e3;
  }
  atomic_store(&g_shared->measuring, 0);
  g_shared->window_end_ns = bench_now_ns();
  atomic_store(&g_shared->stop, 1);
  deadline = bench_now_ns() + 20ll * 1000000000ll;
  int wstatus = 0;
  for (;;) {
    pid_t got = waitpid(g_victim, &wstatus, WNOHANG);
    if (got == g_victim) break;
    if (got < 0) die("waitpid: %s", strerror(errno));
    if (bench_now_ns() > deadline) die("victim: still running 20 s after stop");
    usleep(1000);
  }
  g_victim = 0;
  halo_client_close(client);
  bool victim_ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;

  // Figures.
  double window_s =
      (double)(g_shared->window_end_ns - g_shared->window_start_ns) / 1e9;
  double victim_rate = window_s > 0 ? (double)g_shared->steps / window_s : 0;
  double max_gap_us = (double)g_shared->max_gap_ns / 1e3;
  bench_summary_t summary[kParts];
  for (int p = 0; p < kParts; ++p) {
    summary[p] = bench_summarize(samples[p], options.rounds);
  }
  printf(
      "\n1. blast radius (victim: another process = another trust domain, "
      "add + wait loop; %.2f s of rounds)\n",
      window_s);
  printf("  %-32s %12" PRId64 "\n", "victim steps", g_shared->steps);
  printf("  %-32s %12" PRId64 "%s\n", "victim failures", g_shared->failures,
         g_shared->failures ? "  (expected 0)" : "");
  printf("  %-32s %12.0f\n", "victim steps/s", victim_rate);
  printf("  %-32s %12.0f\n", "victim max step gap (us)", max_gap_us);
  if (g_shared->error[0])
    printf("  victim's first error: %s\n", g_shared->error);
  printf("\n2. recovery after DEVICE_LOST (%d rounds), ms\n", options.rounds);
  printf("  %-32s %9s %9s %9s\n", "", "p50", "p99", "max");
  for (int p = 0; p < kParts; ++p) {
    printf("  %-32s %9.3f %9.3f %9.3f\n", kPartNames[p], summary[p].p50 / 1e3,
           summary[p].p99 / 1e3, summary[p].max / 1e3);
  }

  char note[640];
  snprintf(note, sizeof(note), "driver %s; %d crashes in %.2f s%s%s",
           options.driver, options.rounds, window_s,
           g_shared->error[0] ? "; victim error: " : "", g_shared->error);
  bench_row_t row = bench_row("W1", "victim steps during crashes", "halod");
  row.clients = 2;
  row.n = g_shared->steps;
  row.per_second = victim_rate;
  row.note = note;
  bench_csv_write(&row);
  row = bench_row("W1", "victim failures", "halod");
  row.clients = 2;
  row.n = g_shared->failures;
  row.note = note;
  bench_csv_write(&row);
  row = bench_row("W1", "victim max step gap", "halod");
  row.clients = 2;
  row.n = g_shared->steps;
  row.p50_us = max_gap_us;  // the one figure: the largest gap
  row.note = "p50_us holds the largest gap between step completions";
  bench_csv_write(&row);
  for (int p = 0; p < kParts; ++p) {
    char name[96];
    snprintf(name, sizeof(name), "recovery: %s", kPartNames[p]);
    row = bench_row("W1", name, "halod");
    row.clients = 1;
    row.n = summary[p].count;
    row.p50_us = summary[p].p50;
    row.p99_us = summary[p].p99;
    row.mean_us = summary[p].mean;
    row.ms = summary[p].max / 1e3;
    row.note = "ms: the largest";
    bench_csv_write(&row);
  }
  bench_csv_close();
  for (int p = 0; p < kParts; ++p) free(samples[p]);

  int rc = 0;
  if (!victim_ok) {
    fprintf(stderr, "halo-bench-workers: the victim exited with status %d\n",
            wstatus);
    rc = 1;
  }
  if (g_shared->failures) {
    fprintf(stderr,
            "halo-bench-workers: the victim failed %" PRId64
            " steps during the rounds\n",
            g_shared->failures);
    rc = 1;
  }
  if (g_shared->steps == 0) {
    fprintf(stderr, "halo-bench-workers: the victim made no progress\n");
    rc = 1;
  }
  return rc;
}
