// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-bench-control: the control plane's latencies against a running halod,
// each beside a native baseline measured in the same run.
//
//   halo-bench-control [--address ADDR] [--csv FILE] [--iterations N]
//                      [--wake-iterations N] [--connect-iterations N]
//                      [--case-seconds S]
//
// Cases (all processes on one host, CLOCK_MONOTONIC throughout):
//   ping      halo_client_ping round trip | raw nng req/rep over ipc:// to an
//             echo process (64-byte messages), no halo in between; the two
//             alternate in blocks of 250.
//   signal    halo_semaphore_signal round trip with nobody waiting, and (from
//             the wake case) with a waiter asleep or spinning.
//   idle ping the same two, with a 1 ms pause before each request: what a
//             client that talks to the daemon now and then sees, once the
//             threads on the path (and, in a VM, their CPUs) went idle.
//   wake      a waiter process imports an exported semaphore and waits for
//             k+1; this process pauses 1 ms, then calls
//             halo_semaphore_signal(k+1). Latency = the waiter's wake time -
//             the time the signal call began (the signal request's trip to
//             halod + halod's store + FUTEX_WAKE + the waiter's wake-up). Two
//             variants: the waiter asleep in halo_semaphore_wait (past its
//             spin, in FUTEX_WAIT) and the waiter spinning on the mapped slot
//             (halo_semaphore_query), which sees the store at once: the
//             difference is the cost of waking a sleeping waiter.
//             Native: the same two processes on a shared memfd word, a store
//             + FUTEX_WAKE against FUTEX_WAIT (or a spin).
//   connect   halo_client_connect and halo_client_close | nng req socket
//             open + dial + one round trip + close against the echo process.
//
// Every case runs a bounded number of iterations after a warm-up and stops
// early at --case-seconds (the ping cases: both halves together), so a whole
// run stays under a minute even on a loaded machine.
//
// The helper processes are this executable again (fork + exec of
// /proc/self/exe with a hidden --role argument), so no process forks with
// nng's threads running and then keeps using them.
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <signal.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "common/wire.h"
#include "halo/halo.h"

// Fixed descriptor numbers the helper processes find their shared memory
// and their pipe at (dup2 in the child clears close-on-exec).
#define BENCH_CHILD_SHM_FD 100
#define BENCH_CHILD_PIPE_FD 101

#define BENCH_MAX_SAMPLES 100000
#define BENCH_NATIVE_MESSAGE_BYTES 64
// How long the parent waits for one step of a helper before giving up.
#define BENCH_STEP_TIMEOUT_MS 15000
// How long a waiter waits for one signal before giving up.
#define BENCH_WAIT_TIMEOUT_NS (10ll * 1000 * 1000 * 1000)
// The wake cases pause this long before each signal: far past the client's
// ~20 us spin, so a halo_semaphore_wait waiter is in FUTEX_WAIT. The idle
// ping case pauses as long before each request.
#define BENCH_PAUSE_BEFORE_SIGNAL_NS 1000000

typedef enum bench_wake_mode_e {
  BENCH_WAKE_ASLEEP = 0,
  BENCH_WAKE_SPINNING = 1,
} bench_wake_mode_t;

// Shared by the parent and a waiter process (a memfd).
typedef struct bench_shared_t {
  alignas(64) _Atomic uint32_t futex_word;  // the native baseline's word
  alignas(64) _Atomic uint32_t stop;        // set before the last signal
  uint32_t mode;                            // bench_wake_mode_t
  halo_token_t token;                       // the semaphore to import
  char error[512];                          // the waiter's failure, if any
  int64_t wake_ns[BENCH_MAX_SAMPLES];       // when iteration i woke
} bench_shared_t;

typedef struct bench_options_t {
  const char *address;
  const char *csv_path;
  int ping_iterations;
  int wake_iterations;
  int connect_iterations;
  double case_seconds;
} bench_options_t;

static char g_self_path[PATH_MAX];

// ------------------------------------------------------------------ utilities

static void bench_sleep_ns(int64_t ns) {
  struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void bench_die(const char *format, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void bench_die(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fputs("halo-bench-control: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  exit(1);
}

// Exits with |what| and the status's message if |status| is an error.
static void bench_check(halo_status_t status, const char *what) {
  if (!status) return;
  bench_die("%s: %s: %s", what, halo_status_code_name(halo_status_code(status)),
            halo_status_message(status));
}

static int64_t *bench_samples_alloc(int count) {
  int64_t *samples = calloc((size_t)count, sizeof(int64_t));
  if (!samples) bench_die("out of memory");
  return samples;
}

// Writes all of |size| bytes (a pipe: 4-byte writes are atomic).
static bool bench_write_all(int fd, const void *data, size_t size) {
  const char *p = data;
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= (size_t)n;
  }
  return true;
}

// Reads one uint32 from a helper's pipe, waiting at most
// BENCH_STEP_TIMEOUT_MS. Returns false on EOF, error or timeout.
static bool bench_read_u32(int fd, uint32_t *out_value) {
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  int rv;
  do {
    rv = poll(&pfd, 1, BENCH_STEP_TIMEOUT_MS);
  } while (rv < 0 && errno == EINTR);
  if (rv <= 0) return false;
  ssize_t n;
  do {
    n = read(fd, out_value, sizeof(*out_value));
  } while (n < 0 && errno == EINTR);
  return n == (ssize_t)sizeof(*out_value);
}

// ------------------------------------------------------------------ helpers

// Starts this executable as |role| with |shm_fd| and |pipe_fd| at the fixed
// numbers (-1: none) and |address| as --address.
static pid_t bench_spawn(const char *role, int shm_fd, int pipe_fd,
                         const char *address) {
  char *argv[] = {g_self_path, "--role",        (char *)role,
                  "--address", (char *)address, NULL};
  pid_t pid = fork();
  if (pid < 0) bench_die("fork: %s", strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    if (shm_fd >= 0 && dup2(shm_fd, BENCH_CHILD_SHM_FD) < 0) _exit(126);
    if (pipe_fd >= 0 && dup2(pipe_fd, BENCH_CHILD_PIPE_FD) < 0) _exit(126);
    execv(g_self_path, argv);
    _exit(127);
  }
  return pid;
}

// Waits for |pid|; returns true if it exited with status 0.
static bool bench_reap(pid_t pid, const char *what) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "halo-bench-control: waitpid %s: %s\n", what,
              strerror(errno));
      return false;
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  if (WIFEXITED(status)) {
    fprintf(stderr, "halo-bench-control: %s exited with status %d\n", what,
            WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    fprintf(stderr, "halo-bench-control: %s killed by signal %d\n", what,
            WTERMSIG(status));
  }
  return false;
}

static bench_shared_t *bench_shared_create(int *out_fd) {
  int fd = memfd_create("halo-bench-control", MFD_CLOEXEC);
  if (fd < 0) bench_die("memfd_create: %s", strerror(errno));
  if (ftruncate(fd, sizeof(bench_shared_t)) != 0) {
    bench_die("ftruncate: %s", strerror(errno));
  }
  bench_shared_t *shared = mmap(NULL, sizeof(bench_shared_t),
                                PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (shared == MAP_FAILED) bench_die("mmap: %s", strerror(errno));
  *out_fd = fd;
  return shared;
}

static bench_shared_t *bench_shared_map_child(void) {
  bench_shared_t *shared =
      mmap(NULL, sizeof(bench_shared_t), PROT_READ | PROT_WRITE, MAP_SHARED,
           BENCH_CHILD_SHM_FD, 0);
  if (shared == MAP_FAILED) {
    fprintf(stderr, "halo-bench-control waiter: mmap: %s\n", strerror(errno));
    exit(1);
  }
  return shared;
}

// Records |status| as the waiter's failure and exits.
static void bench_waiter_fail(bench_shared_t *shared, const char *what,
                              halo_status_t status) {
  snprintf(shared->error, sizeof(shared->error), "%s: %s: %s", what,
           halo_status_code_name(halo_status_code(status)),
           halo_status_message(status));
  halo_status_free(status);
  exit(1);
}

// Role "halo-waiter": imports the semaphore, then for i = 0, 1, ...:
// announces i on the pipe, waits for value i+1 (halo_semaphore_wait, or a
// spin on halo_semaphore_query), stamps the wake time; until told to stop.
static int bench_role_halo_waiter(const char *address) {
  bench_shared_t *shared = bench_shared_map_child();
  halo_client_options_t options = {.address = address,
                                   .client_name = "halo-bench-waiter"};
  halo_client_t *client = NULL;
  halo_status_t status = halo_client_connect(&options, &client);
  if (status) bench_waiter_fail(shared, "connect", status);
  halo_semaphore_t *semaphore = NULL;
  status = halo_semaphore_import(client, &shared->token, &semaphore);
  if (status) bench_waiter_fail(shared, "semaphore import", status);
  bool spin = shared->mode == BENCH_WAKE_SPINNING;
  for (uint32_t i = 0; i < BENCH_MAX_SAMPLES; ++i) {
    if (!bench_write_all(BENCH_CHILD_PIPE_FD, &i, sizeof(i))) exit(1);
    uint64_t target = (uint64_t)i + 1;
    if (spin) {
      int64_t deadline = bench_now_ns() + BENCH_WAIT_TIMEOUT_NS;
      for (uint64_t n = 1;; ++n) {
        uint64_t value = 0;
        status = halo_semaphore_query(semaphore, &value);
        if (status) bench_waiter_fail(shared, "semaphore query", status);
        if (value >= target) break;
        if ((n & 0xffff) == 0 && bench_now_ns() > deadline) {
          bench_waiter_fail(
              shared, "spin",
              halo_status_make(HALO_STATUS_DEADLINE_EXCEEDED,
                               "value %" PRIu64 " never came", target));
        }
      }
    } else {
      status = halo_semaphore_wait(semaphore, target, BENCH_WAIT_TIMEOUT_NS);
      if (status) bench_waiter_fail(shared, "semaphore wait", status);
    }
    shared->wake_ns[i] = bench_now_ns();
    if (atomic_load(&shared->stop)) break;
  }
  halo_semaphore_release(semaphore);
  halo_client_close(client);
  return 0;
}

// Role "futex-waiter": the same loop on a plain shared word.
static int bench_role_futex_waiter(void) {
  bench_shared_t *shared = bench_shared_map_child();
  bool spin = shared->mode == BENCH_WAKE_SPINNING;
  for (uint32_t i = 0; i < BENCH_MAX_SAMPLES; ++i) {
    if (!bench_write_all(BENCH_CHILD_PIPE_FD, &i, sizeof(i))) exit(1);
    uint32_t target = i + 1;
    for (;;) {
      uint32_t seen =
          atomic_load_explicit(&shared->futex_word, memory_order_acquire);
      if (seen >= target) break;
      if (spin) continue;
      struct timespec slice = {.tv_sec = 1};
      syscall(SYS_futex, &shared->futex_word, FUTEX_WAIT, seen, &slice, NULL,
              0);
    }
    shared->wake_ns[i] = bench_now_ns();
    if (atomic_load(&shared->stop)) break;
  }
  return 0;
}

// Role "nng-echo": a rep socket that sends every message back. Writes one
// word on the pipe once it listens.
static int bench_role_nng_echo(const char *address) {
  nng_socket socket;
  int rv = nng_rep0_open(&socket);
  if (rv == 0) rv = nng_listen(socket, address, NULL, 0);
  if (rv != 0) {
    fprintf(stderr, "halo-bench-control echo: listen %s: %s\n", address,
            nng_strerror(rv));
    return 1;
  }
  uint32_t ready = 1;
  if (!bench_write_all(BENCH_CHILD_PIPE_FD, &ready, sizeof(ready))) return 1;
  for (;;) {
    nng_msg *msg = NULL;
    rv = nng_recvmsg(socket, &msg, 0);
    if (rv == NNG_ECLOSED) break;
    if (rv != 0) continue;
    if (nng_sendmsg(socket, msg, 0) != 0) nng_msg_free(msg);
  }
  return 0;
}

// ------------------------------------------------------------------ stats

typedef struct bench_stats_t {
  int count;
  double p50_us, p99_us, mean_us, min_us, max_us;
} bench_stats_t;

static int bench_compare_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

// Nearest-rank percentiles of |samples| (sorted in place), in microseconds.
static bench_stats_t bench_stats_compute(int64_t *samples, int count) {
  bench_stats_t stats = {.count = count};
  if (count <= 0) return stats;
  qsort(samples, (size_t)count, sizeof(int64_t), bench_compare_i64);
  double sum = 0;
  for (int i = 0; i < count; ++i) sum += (double)samples[i];
  int p50 = (int)ceil(0.50 * count) - 1;
  int p99 = (int)ceil(0.99 * count) - 1;
  stats.p50_us = (double)samples[p50 < 0 ? 0 : p50] / 1e3;
  stats.p99_us = (double)samples[p99 < 0 ? 0 : p99] / 1e3;
  stats.mean_us = sum / count / 1e3;
  stats.min_us = (double)samples[0] / 1e3;
  stats.max_us = (double)samples[count - 1] / 1e3;
  return stats;
}

// One line of the report: a halo figure and, where there is one, its native
// baseline.
typedef struct bench_report_row_t {
  const char *name;
  const char *native_name;  // NULL: no baseline
  bench_stats_t halo;
  bench_stats_t native;
} bench_report_row_t;

#define BENCH_MAX_ROWS 16

typedef struct bench_report_t {
  bench_report_row_t rows[BENCH_MAX_ROWS];
  int row_count;
} bench_report_t;

static bench_report_row_t *bench_report_add(bench_report_t *report,
                                            const char *name,
                                            const char *native_name) {
  if (report->row_count == BENCH_MAX_ROWS) bench_die("too many rows");
  bench_report_row_t *row = &report->rows[report->row_count++];
  memset(row, 0, sizeof(*row));
  row->name = name;
  row->native_name = native_name;
  return row;
}

static void bench_report_print(const bench_report_t *report, FILE *out) {
  fprintf(out, "%-40s %6s %9s %9s %9s %9s %9s\n", "case (microseconds)", "n",
          "p50", "p99", "mean", "min", "max");
  for (int i = 0; i < report->row_count; ++i) {
    const bench_report_row_t *row = &report->rows[i];
    const bench_stats_t *h = &row->halo;
    fprintf(out, "%-40s %6d %9.1f %9.1f %9.1f %9.1f %9.1f\n", row->name,
            h->count, h->p50_us, h->p99_us, h->mean_us, h->min_us, h->max_us);
    if (!row->native_name) continue;
    const bench_stats_t *n = &row->native;
    char label[64];
    snprintf(label, sizeof(label), "  native: %s", row->native_name);
    fprintf(out, "%-40s %6d %9.1f %9.1f %9.1f %9.1f %9.1f\n", label, n->count,
            n->p50_us, n->p99_us, n->mean_us, n->min_us, n->max_us);
    fprintf(out, "%-40s %6s %8.1fx %8.1fx %8.1fx\n", "  halo / native", "",
            n->p50_us > 0 ? h->p50_us / n->p50_us : NAN,
            n->p99_us > 0 ? h->p99_us / n->p99_us : NAN,
            n->mean_us > 0 ? h->mean_us / n->mean_us : NAN);
  }
}

// CSV fields are quoted: case names contain commas.
static void bench_csv_row(FILE *out, const char *name, const char *impl,
                          const char *method, const bench_stats_t *s,
                          const bench_stats_t *base) {
  while (*name == ' ') ++name;
  fprintf(out, "\"%s\",%s,\"%s\",%d,%.3f,%.3f,%.3f,%.3f,%.3f,", name, impl,
          method, s->count, s->p50_us, s->p99_us, s->mean_us, s->min_us,
          s->max_us);
  if (base && base->p50_us > 0 && base->p99_us > 0) {
    fprintf(out, "%.3f,%.3f,,\n", s->p50_us / base->p50_us,
            s->p99_us / base->p99_us);
  } else {
    fputs(",,,\n", out);
  }
}

// One line per measurement; a native baseline shares its halo line's case
// name (impl "native", method says what was measured); ratio_* are halo /
// native on the halo line. per_second and ratio_per_second stay empty here:
// halo-bench-execute fills them (its rows follow in scripts/bench's CSV).
static void bench_report_write_csv(const bench_report_t *report,
                                   const char *path) {
  FILE *out = fopen(path, "w");
  if (!out) bench_die("cannot write %s: %s", path, strerror(errno));
  fputs(
      "case,impl,method,n,p50_us,p99_us,mean_us,min_us,max_us,ratio_p50,"
      "ratio_p99,per_second,ratio_per_second\n",
      out);
  for (int i = 0; i < report->row_count; ++i) {
    const bench_report_row_t *row = &report->rows[i];
    bench_csv_row(out, row->name, "halo", "halo", &row->halo,
                  row->native_name ? &row->native : NULL);
    if (row->native_name) {
      bench_csv_row(out, row->name, "native", row->native_name, &row->native,
                    NULL);
    }
  }
  if (fclose(out) != 0) bench_die("writing %s: %s", path, strerror(errno));
}

// ------------------------------------------------------------------ cases

// A loop bound: |iterations| measured after |warmup|, stopping at
// |deadline_ns| whatever the count.
static int bench_warmup_for(int iterations) {
  int warmup = iterations / 10;
  return warmup < 10 ? 10 : warmup > 1000 ? 1000 : warmup;
}

// The echo process and a req socket dialed to it.
typedef struct bench_echo_t {
  pid_t pid;
  char dir[PATH_MAX];
  char address[PATH_MAX + 16];
} bench_echo_t;

static void bench_echo_start(bench_echo_t *echo) {
  const char *tmp = getenv("TMPDIR");
  snprintf(echo->dir, sizeof(echo->dir), "%s/halo-bench.XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(echo->dir)) bench_die("mkdtemp: %s", strerror(errno));
  snprintf(echo->address, sizeof(echo->address), "ipc://%s/echo.sock",
           echo->dir);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) bench_die("pipe: %s", strerror(errno));
  echo->pid = bench_spawn("nng-echo", -1, pipe_fds[1], echo->address);
  close(pipe_fds[1]);
  uint32_t ready = 0;
  if (!bench_read_u32(pipe_fds[0], &ready)) {
    bench_die("the nng echo process did not start");
  }
  close(pipe_fds[0]);
}

static void bench_echo_stop(bench_echo_t *echo) {
  kill(echo->pid, SIGTERM);
  int status;
  while (waitpid(echo->pid, &status, 0) < 0 && errno == EINTR) {
  }
  char path[PATH_MAX + 16];
  snprintf(path, sizeof(path), "%s/echo.sock", echo->dir);
  unlink(path);
  rmdir(echo->dir);
}

static void bench_nng_round_trip(nng_socket socket) {
  nng_msg *msg = NULL;
  int rv = nng_msg_alloc(&msg, BENCH_NATIVE_MESSAGE_BYTES);
  if (rv == 0) {
    memset(nng_msg_body(msg), 0x5a, BENCH_NATIVE_MESSAGE_BYTES);
    rv = nng_sendmsg(socket, msg, 0);
    if (rv != 0) nng_msg_free(msg);
  }
  if (rv == 0) rv = nng_recvmsg(socket, &msg, 0);
  if (rv != 0) bench_die("native nng round trip: %s", nng_strerror(rv));
  if (nng_msg_len(msg) != BENCH_NATIVE_MESSAGE_BYTES) {
    bench_die("native nng round trip: echo returned %zu bytes",
              nng_msg_len(msg));
  }
  nng_msg_free(msg);
}

static nng_socket bench_nng_dial(const char *address) {
  nng_socket socket;
  int rv = nng_req0_open(&socket);
  if (rv == 0) rv = halo_wire_dial_once(socket, address, NULL, NULL);
  if (rv != 0) bench_die("native nng dial %s: %s", address, nng_strerror(rv));
  nng_socket_set_ms(socket, NNG_OPT_RECVTIMEO, BENCH_STEP_TIMEOUT_MS);
  return socket;
}

typedef struct bench_ping_result_t {
  bench_stats_t halo;
  bench_stats_t native;
} bench_ping_result_t;

// halo_client_ping against a raw nng round trip to the echo process, in
// alternating blocks so that load from elsewhere on the machine falls on
// both alike.
static bench_ping_result_t bench_case_ping(const bench_options_t *options,
                                           halo_client_t *client,
                                           const bench_echo_t *echo) {
  enum { kBlock = 250 };
  nng_socket socket = bench_nng_dial(echo->address);
  int n = options->ping_iterations;
  int warmup = bench_warmup_for(n);
  for (int i = 0; i < warmup; ++i) {
    bench_check(halo_client_ping(client), "ping");
    bench_nng_round_trip(socket);
  }
  int64_t *halo_ns = bench_samples_alloc(n);
  int64_t *native_ns = bench_samples_alloc(n);
  // Both halves share the case's time budget.
  int64_t deadline = bench_now_ns() + (int64_t)(options->case_seconds * 1e9);
  int halo_count = 0;
  int native_count = 0;
  while ((halo_count < n || native_count < n) && bench_now_ns() < deadline) {
    for (int i = 0; i < kBlock && halo_count < n; ++i) {
      int64_t start = bench_now_ns();
      bench_check(halo_client_ping(client), "ping");
      halo_ns[halo_count++] = bench_now_ns() - start;
    }
    for (int i = 0; i < kBlock && native_count < n; ++i) {
      int64_t start = bench_now_ns();
      bench_nng_round_trip(socket);
      native_ns[native_count++] = bench_now_ns() - start;
    }
  }
  nng_close(socket);
  bench_ping_result_t result = {
      .halo = bench_stats_compute(halo_ns, halo_count),
      .native = bench_stats_compute(native_ns, native_count),
  };
  free(halo_ns);
  free(native_ns);
  return result;
}

// As bench_case_ping, with a pause before each round trip, alternating in
// blocks of 50.
static bench_ping_result_t bench_case_ping_idle(const bench_options_t *options,
                                                halo_client_t *client,
                                                const bench_echo_t *echo) {
  enum { kBlock = 50 };
  nng_socket socket = bench_nng_dial(echo->address);
  int n = options->wake_iterations;
  for (int i = 0; i < 10; ++i) {
    bench_check(halo_client_ping(client), "ping");
    bench_nng_round_trip(socket);
  }
  int64_t *halo_ns = bench_samples_alloc(n);
  int64_t *native_ns = bench_samples_alloc(n);
  int64_t deadline = bench_now_ns() + (int64_t)(options->case_seconds * 1e9);
  int halo_count = 0;
  int native_count = 0;
  while ((halo_count < n || native_count < n) && bench_now_ns() < deadline) {
    for (int i = 0; i < kBlock && halo_count < n; ++i) {
      bench_sleep_ns(BENCH_PAUSE_BEFORE_SIGNAL_NS);
      int64_t start = bench_now_ns();
      bench_check(halo_client_ping(client), "ping");
      halo_ns[halo_count++] = bench_now_ns() - start;
    }
    for (int i = 0; i < kBlock && native_count < n; ++i) {
      bench_sleep_ns(BENCH_PAUSE_BEFORE_SIGNAL_NS);
      int64_t start = bench_now_ns();
      bench_nng_round_trip(socket);
      native_ns[native_count++] = bench_now_ns() - start;
    }
  }
  nng_close(socket);
  bench_ping_result_t result = {
      .halo = bench_stats_compute(halo_ns, halo_count),
      .native = bench_stats_compute(native_ns, native_count),
  };
  free(halo_ns);
  free(native_ns);
  return result;
}

// halo_semaphore_signal with nobody waiting: a request like ping plus the
// daemon's handle lookup, checks, store and FUTEX_WAKE of an empty queue.
static bench_stats_t bench_case_signal_alone(const bench_options_t *options,
                                             halo_client_t *client) {
  halo_semaphore_t *semaphore = NULL;
  bench_check(halo_semaphore_create(client, 0, 0, &semaphore),
              "semaphore create");
  int n = options->ping_iterations;
  int warmup = bench_warmup_for(n);
  int64_t *samples = bench_samples_alloc(n);
  uint64_t value = 0;
  for (int i = 0; i < warmup; ++i) {
    bench_check(halo_semaphore_signal(semaphore, ++value), "semaphore signal");
  }
  int64_t deadline = bench_now_ns() + (int64_t)(options->case_seconds * 1e9);
  int count = 0;
  while (count < n && bench_now_ns() < deadline) {
    int64_t start = bench_now_ns();
    bench_check(halo_semaphore_signal(semaphore, ++value), "semaphore signal");
    samples[count++] = bench_now_ns() - start;
  }
  halo_semaphore_release(semaphore);
  bench_stats_t stats = bench_stats_compute(samples, count);
  free(samples);
  return stats;
}

typedef struct bench_wake_result_t {
  bench_stats_t wake;
  bench_stats_t signal_call;  // halo only: the signal request's round trip
} bench_wake_result_t;

// Runs one waiter process (|native|: futex-waiter, else halo-waiter) in
// |mode| and measures signal -> wake.
static bench_wake_result_t bench_case_wake(const bench_options_t *options,
                                           halo_client_t *client, bool native,
                                           bench_wake_mode_t mode) {
  int shm_fd = -1;
  bench_shared_t *shared = bench_shared_create(&shm_fd);
  shared->mode = mode;
  halo_semaphore_t *semaphore = NULL;
  if (!native) {
    bench_check(halo_semaphore_create(client, 0, HALO_OBJECT_FLAG_EXPORTABLE,
                                      &semaphore),
                "semaphore create");
    bench_check(halo_semaphore_export(semaphore, &shared->token),
                "semaphore export");
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) bench_die("pipe: %s", strerror(errno));
  const char *role = native ? "futex-waiter" : "halo-waiter";
  pid_t pid = bench_spawn(role, shm_fd, pipe_fds[1], options->address);
  close(pipe_fds[1]);

  int warmup = bench_warmup_for(options->wake_iterations);
  if (warmup > 50) warmup = 50;
  int total = warmup + options->wake_iterations;
  if (total > BENCH_MAX_SAMPLES - 1) total = BENCH_MAX_SAMPLES - 1;
  int64_t *signal_ns = bench_samples_alloc(total);
  int64_t *call_ns = bench_samples_alloc(total);
  int64_t deadline = 0;
  int done = 0;  // iterations signaled (and, once the next ready came, woken)
  for (;;) {
    uint32_t ready = 0;
    if (!bench_read_u32(pipe_fds[0], &ready) || ready != (uint32_t)done) {
      bench_reap(pid, role);
      bench_die("%s (%s) stopped at iteration %d: %s", role,
                mode == BENCH_WAKE_ASLEEP ? "asleep" : "spinning", done,
                shared->error[0] ? shared->error : "no message");
    }
    if (done == warmup) {
      deadline = bench_now_ns() + (int64_t)(options->case_seconds * 1e9);
    }
    bool last = done == total || (deadline && bench_now_ns() > deadline);
    if (last) atomic_store(&shared->stop, 1);
    // Both variants pause, so they differ only in the waiter's state (the
    // pause also lets this host's CPUs go idle: see the idle ping case).
    if (!last) bench_sleep_ns(BENCH_PAUSE_BEFORE_SIGNAL_NS);
    uint64_t value = (uint64_t)done + 1;
    int64_t start = bench_now_ns();
    if (native) {
      atomic_store_explicit(&shared->futex_word, (uint32_t)value,
                            memory_order_release);
      bench_futex(&shared->futex_word, FUTEX_WAKE, INT_MAX, NULL);
    } else {
      bench_check(halo_semaphore_signal(semaphore, value), "semaphore signal");
    }
    int64_t end = bench_now_ns();
    if (last) break;
    signal_ns[done] = start;
    call_ns[done] = end - start;
    ++done;
  }
  close(pipe_fds[0]);
  if (!bench_reap(pid, role)) {
    bench_die("%s: %s", role, shared->error[0] ? shared->error : "failed");
  }
  int count = done - warmup;
  int64_t *latency = bench_samples_alloc(count > 0 ? count : 1);
  for (int i = 0; i < count; ++i) {
    latency[i] = shared->wake_ns[warmup + i] - signal_ns[warmup + i];
  }
  bench_wake_result_t result = {
      .wake = bench_stats_compute(latency, count),
      .signal_call = bench_stats_compute(call_ns + warmup, count),
  };
  free(latency);
  free(signal_ns);
  free(call_ns);
  halo_semaphore_release(semaphore);
  munmap(shared, sizeof(*shared));
  close(shm_fd);
  return result;
}

typedef struct bench_connect_result_t {
  bench_stats_t connect;
  bench_stats_t close;
  bench_stats_t both;
} bench_connect_result_t;

static bench_connect_result_t bench_case_halo_connect(
    const bench_options_t *options) {
  int n = options->connect_iterations;
  int warmup = bench_warmup_for(n) > 20 ? 20 : bench_warmup_for(n);
  int64_t *connect_ns = bench_samples_alloc(n);
  int64_t *close_ns = bench_samples_alloc(n);
  int64_t *both_ns = bench_samples_alloc(n);
  halo_client_options_t client_options = {.address = options->address,
                                          .client_name = "halo-bench-connect"};
  int64_t deadline = 0;
  int count = 0;
  for (int i = 0; count < n; ++i) {
    if (i == warmup) {
      deadline = bench_now_ns() + (int64_t)(options->case_seconds * 1e9);
    }
    if (deadline && bench_now_ns() > deadline) break;
    halo_client_t *client = NULL;
    int64_t t0 = bench_now_ns();
    bench_check(halo_client_connect(&client_options, &client), "connect");
    int64_t t1 = bench_now_ns();
    halo_client_close(client);
    int64_t t2 = bench_now_ns();
    if (i < warmup) continue;
    connect_ns[count] = t1 - t0;
    close_ns[count] = t2 - t1;
    both_ns[count] = t2 - t0;
    ++count;
  }
  bench_connect_result_t result = {
      .connect = bench_stats_compute(connect_ns, count),
      .close = bench_stats_compute(close_ns, count),
      .both = bench_stats_compute(both_ns, count),
  };
  free(connect_ns);
  free(close_ns);
  free(both_ns);
  return result;
}

static bench_stats_t bench_case_native_connect(const bench_options_t *options,
                                               const bench_echo_t *echo) {
  int n = options->connect_iterations;
  int warmup = bench_warmup_for(n) > 20 ? 20 : bench_warmup_for(n);
  int64_t *samples = bench_samples_alloc(n);
  int64_t deadline = 0;
  int count = 0;
  for (int i = 0; count < n; ++i) {
    if (i == warmup) {
      deadline = bench_now_ns() + (int64_t)(options->case_seconds * 1e9);
    }
    if (deadline && bench_now_ns() > deadline) break;
    int64_t start = bench_now_ns();
    nng_socket socket = bench_nng_dial(echo->address);
    bench_nng_round_trip(socket);
    nng_close(socket);
    int64_t end = bench_now_ns();
    if (i >= warmup) samples[count++] = end - start;
  }
  bench_stats_t stats = bench_stats_compute(samples, count);
  free(samples);
  return stats;
}

// ------------------------------------------------------------------ main

static void bench_print_machine(FILE *out, const bench_options_t *options,
                                int32_t daemon_pid) {
  bench_print_header(out, "halo-bench-control", halo_version_string(),
                     daemon_pid, options->address);
  fprintf(out,
          "iterations (after warm-up, capped at %.0f s a case): ping %d, "
          "wake %d, connect %d\n\n",
          options->case_seconds, options->ping_iterations,
          options->wake_iterations, options->connect_iterations);
}

static void bench_usage(FILE *out) {
  fputs(
      "usage: halo-bench-control [--address ADDR] [--csv FILE]\n"
      "                          [--iterations N] [--wake-iterations N]\n"
      "                          [--connect-iterations N] [--case-seconds S]\n"
      "\n"
      "Measures halod's control plane (no-op round trip, semaphore signal to\n"
      "waiter wake across processes, connect time) beside native baselines\n"
      "(raw nng req/rep over ipc://, raw futex ping between processes).\n"
      "\n"
      "  --address ADDR          halod's client socket (default: "
      "$HALO_ADDRESS,\n"
      "                          else ipc:///run/halo/halo.sock)\n"
      "  --csv FILE              also write the figures as CSV\n"
      "  --iterations N          ping round trips (default 10000)\n"
      "  --wake-iterations N     signals per wake case (default 500)\n"
      "  --connect-iterations N  connects (default 300)\n"
      "  --case-seconds S        stop any case after S seconds (default 5)\n",
      out);
}

static int bench_parse_count(const char *flag, const char *text, int max) {
  char *end = NULL;
  long value = strtol(text, &end, 10);
  if (!*text || *end || value < 1 || value > max) {
    fprintf(stderr, "halo-bench-control: %s wants 1..%d, got '%s'\n", flag, max,
            text);
    exit(2);
  }
  return (int)value;
}

int main(int argc, char **argv) {
  enum {
    kOptAddress = 256,
    kOptCsv,
    kOptIterations,
    kOptWakeIterations,
    kOptConnectIterations,
    kOptCaseSeconds,
    kOptRole,
  };
  static const struct option kLongOptions[] = {
      {"address", required_argument, NULL, kOptAddress},
      {"csv", required_argument, NULL, kOptCsv},
      {"iterations", required_argument, NULL, kOptIterations},
      {"wake-iterations", required_argument, NULL, kOptWakeIterations},
      {"connect-iterations", required_argument, NULL, kOptConnectIterations},
      {"case-seconds", required_argument, NULL, kOptCaseSeconds},
      {"role", required_argument, NULL, kOptRole},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  bench_options_t options = {
      .ping_iterations = 10000,
      .wake_iterations = 500,
      .connect_iterations = 300,
      .case_seconds = 5,
  };
  const char *role = NULL;
  int opt;
  while ((opt = getopt_long(argc, argv, "h", kLongOptions, NULL)) != -1) {
    switch (opt) {
      case kOptAddress:
        options.address = optarg;
        break;
      case kOptCsv:
        options.csv_path = optarg;
        break;
      case kOptIterations:
        options.ping_iterations =
            bench_parse_count("--iterations", optarg, 1000000);
        break;
      case kOptWakeIterations:
        options.wake_iterations =
            bench_parse_count("--wake-iterations", optarg, 50000);
        break;
      case kOptConnectIterations:
        options.connect_iterations =
            bench_parse_count("--connect-iterations", optarg, 100000);
        break;
      case kOptCaseSeconds: {
        char *end = NULL;
        options.case_seconds = strtod(optarg, &end);
        if (!*optarg || *end || !(options.case_seconds > 0) ||
            options.case_seconds > 60) {
          fprintf(stderr,
                  "halo-bench-control: --case-seconds wants (0, 60], got "
                  "'%s'\n",
                  optarg);
          return 2;
        }
        break;
      }
      case kOptRole:
        role = optarg;
        break;
      case 'h':
        bench_usage(stdout);
        return 0;
      default:
        bench_usage(stderr);
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "halo-bench-control: unexpected argument '%s'\n",
            argv[optind]);
    bench_usage(stderr);
    return 2;
  }
  if (!options.address || !*options.address) {
    const char *env = getenv("HALO_ADDRESS");
    options.address = env && *env ? env : "ipc:///run/halo/halo.sock";
  }

  if (role) {
    if (strcmp(role, "halo-waiter") == 0) {
      return bench_role_halo_waiter(options.address);
    }
    if (strcmp(role, "futex-waiter") == 0) return bench_role_futex_waiter();
    if (strcmp(role, "nng-echo") == 0) {
      return bench_role_nng_echo(options.address);
    }
    fprintf(stderr, "halo-bench-control: unknown role '%s'\n", role);
    return 2;
  }

  ssize_t length =
      readlink("/proc/self/exe", g_self_path, sizeof(g_self_path) - 1);
  if (length <= 0) bench_die("readlink /proc/self/exe: %s", strerror(errno));
  g_self_path[length] = '\0';
  signal(SIGPIPE, SIG_IGN);

  halo_client_options_t client_options = {.address = options.address,
                                          .client_name = "halo-bench-control"};
  halo_client_t *client = NULL;
  halo_status_t status = halo_client_connect(&client_options, &client);
  if (status) {
    bench_die("cannot connect to halod at %s: %s", options.address,
              halo_status_message(status));
  }
  bench_print_machine(stdout, &options, halo_client_daemon_pid(client));
  fflush(stdout);

  bench_report_t report = {0};
  bench_echo_t echo;
  bench_echo_start(&echo);

  bench_ping_result_t ping = bench_case_ping(&options, client, &echo);
  bench_report_row_t *row = bench_report_add(
      &report, "no-op request round trip", "nng req/rep ipc, 64 B");
  row->halo = ping.halo;
  row->native = ping.native;
  bench_ping_result_t idle = bench_case_ping_idle(&options, client, &echo);
  row = bench_report_add(&report, "no-op round trip, 1 ms idle before",
                         "nng req/rep, 1 ms idle before");
  row->halo = idle.halo;
  row->native = idle.native;

  bench_wake_result_t asleep =
      bench_case_wake(&options, client, false, BENCH_WAKE_ASLEEP);
  bench_wake_result_t asleep_native =
      bench_case_wake(&options, client, true, BENCH_WAKE_ASLEEP);
  row = bench_report_add(&report, "signal -> wake, waiter asleep",
                         "store + FUTEX_WAKE -> WAIT");
  row->halo = asleep.wake;
  row->native = asleep_native.wake;

  bench_wake_result_t spinning =
      bench_case_wake(&options, client, false, BENCH_WAKE_SPINNING);
  bench_wake_result_t spinning_native =
      bench_case_wake(&options, client, true, BENCH_WAKE_SPINNING);
  row = bench_report_add(&report, "signal -> wake, waiter spinning",
                         "store -> spinning load");
  row->halo = spinning.wake;
  row->native = spinning_native.wake;

  row = bench_report_add(&report, "signal call, back-to-back, no waiter", NULL);
  row->halo = bench_case_signal_alone(&options, client);
  row =
      bench_report_add(&report, "signal call, 1 ms idle, waiter asleep", NULL);
  row->halo = asleep.signal_call;
  row = bench_report_add(&report, "signal call, 1 ms idle, waiter spins", NULL);
  row->halo = spinning.signal_call;

  bench_connect_result_t connect = bench_case_halo_connect(&options);
  row = bench_report_add(&report, "connect + close",
                         "nng open+dial+req/rep+close");
  row->halo = connect.both;
  row->native = bench_case_native_connect(&options, &echo);
  row = bench_report_add(&report, "  of which connect", NULL);
  row->halo = connect.connect;
  row = bench_report_add(&report, "  of which close", NULL);
  row->halo = connect.close;

  bench_echo_stop(&echo);
  halo_client_close(client);

  bench_report_print(&report, stdout);
  if (options.csv_path) {
    bench_report_write_csv(&report, options.csv_path);
    printf("\nCSV written to %s\n", options.csv_path);
  }
  return 0;
}
