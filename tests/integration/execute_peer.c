// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The client process of execute_test's multi-process tests: it connects to
// halod with libhalo after it starts (a fresh program, exec'd by the test:
// nng cannot be used in a child forked after its parent used it), records
// and executes command buffers on device 0 (KERNELS: the test kernels of
// the driver under test, format from the extension) and exits with 0 when
// everything it checked held.
//
//   execute_peer ADDRESS load KERNELS COUNT [STOP_TOKEN]
//       Loads KERNELS, records c = a + b over 256 floats (slots 0, 1, 2),
//       prints "ready" and executes it COUNT times, alternating two queues,
//       with a new binding table each time: execution i adds an input
//       region to execution i - 1's output, waits for the semaphore to
//       reach i - 1 and signals i; up to 4 are submitted ahead. Every value
//       is waited for and every result checked (a wrong order gives wrong
//       sums). With STOP_TOKEN it goes on past COUNT
//       until that imported semaphore reaches 1. Prints "done N".
//   execute_peer ADDRESS chain S1_TOKEN S3_TOKEN CODE CAUSE
//       Imports s1 and s3, creates an exportable s2, submits Y (a fill)
//       waiting for s1 >= 1 and signaling s2 = 1, prints "token S2". Then
//       waits for s1, s2 and s3 to reach 1: each must fail with CODE and a
//       message containing CAUSE, and Y's fill must never have run. Prints
//       "checked" before releasing anything.
//   execute_peer ADDRESS victim KERNELS GO_TOKEN DONE_TOKEN
//       Puts work in flight and stays until killed: chains of submissions
//       waiting on a semaphore nobody signals (submitted in reverse order,
//       so each waits before its signal), one waiting for the imported GO
//       and signaling the imported DONE, sleeping kernels, and a `gate`
//       kernel that runs until word 1 of an exportable buffer is set. Prints
//       "ready GATE_BUFFER_TOKEN" once the gate kernel runs.
//   execute_peer ADDRESS alloca KERNELS
//       Leaves queue-ordered allocations behind, then stays until killed:
//       allocas of device and host-visible memory waiting on a semaphore
//       nobody signals, executions binding them waiting on the allocas'
//       signals, deallocas waiting on those executions; a dealloca waiting
//       only for an execution that waits on that semaphore; and an alloca whose
//       buffer a `sleepy` kernel (1 s) is using, already deallocated (the
//       memory waits for the kernel). Prints "ready" once all is submitted.
//
// Setup failures exit with PEER_EXIT_SETUP + code, failed checks with
// PEER_EXIT_MISMATCH (or the status code of the failed call); the reason
// goes to stderr.
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "halo/halo.h"

#define PEER_EXIT_USAGE 64
#define PEER_EXIT_MISMATCH 65
#define PEER_EXIT_SETUP 100

// Every wait of the peer ends within this.
#define PEER_TIMEOUT_NS (20ll * 1000000000ll)

static const char *peer_command = "?";

static int peer_report(halo_status_t status, const char *what) {
  halo_status_code_t code = halo_status_code(status);
  if (code != HALO_STATUS_OK) {
    fprintf(stderr, "execute_peer %s (pid %d): %s: %s: %s\n", peer_command,
            (int)getpid(), what, halo_status_code_name(code),
            halo_status_message(status));
  }
  halo_status_free(status);
  return (int)code;
}

static void peer_setup_check(halo_status_t status, const char *what) {
  int code = peer_report(status, what);
  if (code != 0) exit(PEER_EXIT_SETUP + code);
}

static _Noreturn void peer_mismatch(const char *format, ...)
    __attribute__((format(printf, 1, 2)));
static _Noreturn void peer_mismatch(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "execute_peer %s (pid %d): ", peer_command, (int)getpid());
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  exit(PEER_EXIT_MISMATCH);
}

static uint64_t peer_parse_u64(const char *text) {
  char *end = NULL;
  unsigned long long value = strtoull(text, &end, 0);
  if (!*text || *end) {
    fprintf(stderr, "execute_peer: not a number: %s\n", text);
    exit(PEER_EXIT_USAGE);
  }
  return (uint64_t)value;
}

static int64_t peer_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static halo_semaphore_t *peer_import_semaphore(halo_client_t *client,
                                               const char *text) {
  halo_token_t token;
  peer_setup_check(halo_token_parse(text, &token), "parse token");
  halo_semaphore_t *semaphore = NULL;
  peer_setup_check(halo_semaphore_import(client, &token, &semaphore),
                   "import semaphore");
  return semaphore;
}

static halo_semaphore_t *peer_semaphore(halo_client_t *client, uint32_t flags) {
  halo_semaphore_t *semaphore = NULL;
  peer_setup_check(halo_semaphore_create(client, 0, flags, &semaphore),
                   "create semaphore");
  return semaphore;
}

static halo_buffer_t *peer_buffer(halo_client_t *client, uint64_t size,
                                  uint32_t flags) {
  halo_buffer_t *buffer = NULL;
  peer_setup_check(halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE, size,
                                      flags, &buffer),
                   "create buffer");
  return buffer;
}

static void peer_print_token(const char *label, const halo_token_t *token) {
  char text[33];
  halo_token_format(token, text);
  printf("%s %s\n", label, text);
  fflush(stdout);
}

static void peer_execute(halo_queue_t *queue, halo_command_buffer_t *cb,
                         const halo_binding_t *bindings, size_t binding_count,
                         const halo_semaphore_value_t *waits, size_t wait_count,
                         const halo_semaphore_value_t *signals,
                         size_t signal_count) {
  peer_setup_check(halo_queue_execute(queue, cb, bindings, binding_count, waits,
                                      wait_count, signals, signal_count),
                   "execute");
}

// halo_command_buffer_begin on device 0 (exits on failure).
static halo_command_buffer_t *peer_begin(halo_client_t *client, uint32_t flags,
                                         uint32_t binding_capacity) {
  halo_command_buffer_t *cb = NULL;
  peer_setup_check(
      halo_command_buffer_begin(client, 0, flags, binding_capacity, &cb),
      "begin");
  return cb;
}

// Records a fill of |target| with |pattern| (|pattern_length| bytes), ended.
static halo_command_buffer_t *peer_record_fill(
    halo_client_t *client, uint32_t flags, uint32_t binding_capacity,
    halo_buffer_ref_t target, const void *pattern, size_t pattern_length) {
  halo_command_buffer_t *cb = peer_begin(client, flags, binding_capacity);
  peer_setup_check(
      halo_command_buffer_fill(cb, target, pattern, pattern_length), "fill");
  peer_setup_check(halo_command_buffer_end(cb), "end");
  return cb;
}

// Records one thread of the test kernels' "sleepy" entry: it sleeps
// |microseconds| with |word| (4 bytes) as its buffer argument; ended.
static halo_command_buffer_t *peer_record_sleepy(
    halo_client_t *client, halo_executable_t *executable, uint32_t flags,
    uint32_t binding_capacity, halo_buffer_ref_t word, uint32_t microseconds) {
  halo_command_buffer_t *cb = peer_begin(client, flags, binding_capacity);
  halo_dispatch_arg_t args[2] = {
      {HALO_DISPATCH_ARG_BUFFER, word, NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &microseconds, sizeof(microseconds)},
  };
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "sleepy",
      .grid = {1, 1, 1},
      .block = {1, 1, 1},
      .args = args,
      .arg_count = 2,
  };
  peer_setup_check(halo_command_buffer_dispatch(cb, &params), "dispatch");
  peer_setup_check(halo_command_buffer_end(cb), "end");
  return cb;
}

// ---------------------------------------------------------------- load

enum {
  LOAD_N = 256,     // floats per region
  LOAD_INPUTS = 8,  // input regions
  LOAD_WINDOW = 4,  // executions ahead of the last one checked
};

// Records c = a + b over LOAD_N floats, a, b, c in slots 0, 1, 2.
static halo_command_buffer_t *peer_record_add(halo_client_t *client,
                                              halo_executable_t *executable) {
  static const uint32_t n = LOAD_N;
  uint64_t bytes = LOAD_N * sizeof(float);
  halo_command_buffer_t *cb =
      peer_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 3);
  halo_dispatch_arg_t args[4] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(0, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(1, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(2, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
  };
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "add",
      .grid = {LOAD_N / 64, 1, 1},
      .block = {64, 1, 1},
      .args = args,
      .arg_count = 4,
  };
  peer_setup_check(halo_command_buffer_dispatch(cb, &params), "dispatch");
  peer_setup_check(halo_command_buffer_end(cb), "end");
  return cb;
}

// The input region execution |i| adds to the previous execution's output.
static uint32_t load_input(uint64_t i) {
  return (uint32_t)((i * 5 + i / LOAD_INPUTS + 3) % LOAD_INPUTS);
}

// Waits for execution |i| and checks its output region against what the
// chain of executions 1..i must have produced.
static int load_check(halo_semaphore_t *done, const float *out,
                      const float *expected, uint64_t i) {
  int code = peer_report(halo_semaphore_wait(done, i, PEER_TIMEOUT_NS), "wait");
  if (code) {
    fprintf(stderr, "execute_peer load: execution %" PRIu64 " not observed\n",
            i);
    return code;
  }
  const float *c = out + (i % LOAD_WINDOW) * LOAD_N;
  const float *e = expected + (i % LOAD_WINDOW) * LOAD_N;
  for (uint32_t j = 0; j < LOAD_N; ++j) {
    if (c[j] != e[j]) {
      peer_mismatch("execution %" PRIu64 ": c[%u] = %f, expected %f", i, j,
                    (double)c[j], (double)e[j]);
    }
  }
  return 0;
}

static int peer_load(halo_client_t *client, char **args, int arg_count) {
  if (arg_count != 2 && arg_count != 3) return PEER_EXIT_USAGE;
  uint64_t count = peer_parse_u64(args[1]);
  halo_semaphore_t *stop =
      arg_count == 3 ? peer_import_semaphore(client, args[2]) : NULL;
  halo_executable_t *executable = NULL;
  peer_setup_check(
      halo_executable_create_from_file(client, 0, args[0], 0, &executable),
      "load kernels");
  halo_command_buffer_t *cb = peer_record_add(client, executable);
  uint64_t region = LOAD_N * sizeof(float);
  halo_buffer_t *in = peer_buffer(client, LOAD_INPUTS * region, 0);
  halo_buffer_t *out = peer_buffer(client, LOAD_WINDOW * region, 0);
  float *host_in = halo_buffer_host_pointer(in);
  for (uint32_t r = 0; r < LOAD_INPUTS; ++r) {
    for (uint32_t j = 0; j < LOAD_N; ++j) {
      // Small integers: the running sums stay exact in a float.
      host_in[r * LOAD_N + j] = (float)(8 * r + j % 8 + 1);
    }
  }
  const float *host_out = halo_buffer_host_pointer(out);
  halo_queue_t *queue = NULL;
  peer_setup_check(halo_queue_create(client, 0, 0, &queue), "create queue");
  halo_semaphore_t *done = peer_semaphore(client, 0);
  printf("ready\n");
  fflush(stdout);

  // Execution i adds an input region to execution i - 1's output (the
  // first to input region 0): a result is right only if the executions ran
  // in order, each after the one it waits for.
  static float expected[LOAD_WINDOW * LOAD_N];
  int64_t deadline = peer_now_ns() + PEER_TIMEOUT_NS;
  uint64_t i = 0;
  for (;;) {
    if (i >= count) {
      if (!stop) break;
      uint64_t value = 0;
      int code = peer_report(halo_semaphore_query(stop, &value), "query stop");
      if (code) return code;
      if (value >= 1) break;
      if (peer_now_ns() > deadline) peer_mismatch("stop never came");
    }
    ++i;
    // The region execution i writes was last written by i - WINDOW.
    if (i > LOAD_WINDOW) {
      int code = load_check(done, host_out, expected, i - LOAD_WINDOW);
      if (code) return code;
    }
    uint64_t previous = i > 1 ? ((i - 1) % LOAD_WINDOW) * region : 0;
    halo_binding_t bindings[3] = {
        {i > 1 ? out : in, previous, region},
        {in, load_input(i) * region, region},
        {out, (i % LOAD_WINDOW) * region, region},
    };
    const float *a =
        i > 1 ? expected + ((i - 1) % LOAD_WINDOW) * LOAD_N : host_in;
    const float *b = host_in + load_input(i) * LOAD_N;
    float *c = expected + (i % LOAD_WINDOW) * LOAD_N;
    for (uint32_t j = 0; j < LOAD_N; ++j) c[j] = a[j] + b[j];
    halo_semaphore_value_t wait = {done, i - 1};
    halo_semaphore_value_t signal = {done, i};
    int code =
        peer_report(halo_queue_execute(i % 2 ? queue : NULL, cb, bindings, 3,
                                       &wait, i > 1 ? 1 : 0, &signal, 1),
                    "execute");
    if (code) return code;
  }
  for (uint64_t j = i > LOAD_WINDOW ? i - LOAD_WINDOW + 1 : 1; j <= i; ++j) {
    int code = load_check(done, host_out, expected, j);
    if (code) return code;
  }
  printf("done %" PRIu64 "\n", i);
  fflush(stdout);
  halo_semaphore_release(done);
  halo_semaphore_release(stop);
  halo_queue_release(queue);
  halo_buffer_release(in);
  halo_buffer_release(out);
  halo_command_buffer_release(cb);
  halo_executable_release(executable);
  return 0;
}

// ---------------------------------------------------------------- chain

// Waits for |semaphore| to reach 1: it must fail with |code| and a message
// naming |cause|.
static void chain_expect_failure(halo_semaphore_t *semaphore, const char *name,
                                 halo_status_code_t code, const char *cause) {
  halo_status_t status = halo_semaphore_wait(semaphore, 1, PEER_TIMEOUT_NS);
  halo_status_code_t actual = halo_status_code(status);
  const char *message = status ? halo_status_message(status) : "";
  if (actual != code || !strstr(message, cause)) {
    peer_mismatch("%s: wait returned %s \"%s\"; expected %s naming \"%s\"",
                  name, halo_status_code_name(actual), message,
                  halo_status_code_name(code), cause);
  }
  halo_status_free(status);
  printf("%s %d\n", name, (int)actual);
  fflush(stdout);
}

static int peer_chain(halo_client_t *client, char **args, int arg_count) {
  if (arg_count != 4) return PEER_EXIT_USAGE;
  halo_semaphore_t *s1 = peer_import_semaphore(client, args[0]);
  halo_semaphore_t *s3 = peer_import_semaphore(client, args[1]);
  halo_status_code_t code = (halo_status_code_t)peer_parse_u64(args[2]);
  const char *cause = args[3];
  halo_semaphore_t *s2 = peer_semaphore(client, HALO_OBJECT_FLAG_EXPORTABLE);
  halo_buffer_t *buffer = peer_buffer(client, 64, 0);
  static const uint8_t pattern = 0x5a;
  halo_command_buffer_t *cb =
      peer_record_fill(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0,
                       halo_buffer_ref(buffer, 0, 64), &pattern, 1);
  halo_semaphore_value_t wait = {s1, 1};
  halo_semaphore_value_t signal = {s2, 1};
  peer_execute(NULL, cb, NULL, 0, &wait, 1, &signal, 1);
  halo_command_buffer_release(cb);
  halo_token_t token;
  peer_setup_check(halo_semaphore_export(s2, &token), "export s2");
  peer_print_token("token", &token);

  chain_expect_failure(s1, "s1", code, cause);
  chain_expect_failure(s2, "s2", code, cause);
  chain_expect_failure(s3, "s3", code, cause);
  const uint8_t *host = halo_buffer_host_pointer(buffer);
  for (int i = 0; i < 64; ++i) {
    if (host[i] != 0) peer_mismatch("Y ran: byte %d is 0x%02x", i, host[i]);
  }
  // Before anything is released: the test checks s2 is still the failure
  // that came down the chain, not the end of its creator.
  printf("checked\n");
  fflush(stdout);
  halo_buffer_release(buffer);
  halo_semaphore_release(s1);
  halo_semaphore_release(s2);
  halo_semaphore_release(s3);
  return 0;
}

// ---------------------------------------------------------------- victim

static _Noreturn void peer_victim(halo_client_t *client, char **args,
                                  int arg_count) {
  if (arg_count != 3) exit(PEER_EXIT_USAGE);
  halo_executable_t *executable = NULL;
  peer_setup_check(
      halo_executable_create_from_file(client, 0, args[0], 0, &executable),
      "load kernels");
  halo_semaphore_t *go = peer_import_semaphore(client, args[1]);
  halo_semaphore_t *done = peer_import_semaphore(client, args[2]);
  halo_semaphore_t *never = peer_semaphore(client, 0);
  halo_queue_t *queue = NULL;
  peer_setup_check(halo_queue_create(client, 0, 0, &queue), "create queue");
  halo_buffer_t *data = peer_buffer(client, 4096, 0);
  // Word 0: gate kernels started; word 1: the gate (set by the test).
  halo_buffer_t *gate = peer_buffer(client, 64, HALO_OBJECT_FLAG_EXPORTABLE);

  // Chains waiting on |never|: link k waits for chain[k - 1] and signals
  // chain[k]; the last link is submitted first.
  enum { CHAINS = 4, LINKS = 6 };
  static const uint32_t pattern = 0xfeedface;
  halo_command_buffer_t *fill =
      peer_record_fill(client, HALO_COMMAND_BUFFER_REUSABLE, 1,
                       halo_binding_ref(0, 0, 64), &pattern, sizeof(pattern));
  for (int c = 0; c < CHAINS; ++c) {
    halo_semaphore_t *links[LINKS];
    for (int k = 0; k < LINKS; ++k) links[k] = peer_semaphore(client, 0);
    for (int k = LINKS - 1; k >= 0; --k) {
      halo_binding_t binding = {data, (uint64_t)(c * LINKS + k) * 64, 64};
      halo_semaphore_value_t wait = {k ? links[k - 1] : never, 1};
      halo_semaphore_value_t signal = {links[k], 1};
      peer_execute(c % 2 ? queue : NULL, fill, &binding, 1, &wait, 1, &signal,
                   1);
    }
    // The submissions hold the semaphores.
    for (int k = 0; k < LINKS; ++k) halo_semaphore_release(links[k]);
  }
  // One waits for the test's GO and signals the test's DONE.
  halo_binding_t binding = {data, 2048, 64};
  halo_semaphore_value_t wait = {go, 1};
  halo_semaphore_value_t signal = {done, 1};
  peer_execute(queue, fill, &binding, 1, &wait, 1, &signal, 1);

  // Executing: sleeping kernels and the gate.
  halo_command_buffer_t *sleepy =
      peer_record_sleepy(client, executable, HALO_COMMAND_BUFFER_REUSABLE, 0,
                         halo_buffer_ref(data, 3072, 4), 100000);
  for (int i = 0; i < 3; ++i)
    peer_execute(queue, sleepy, NULL, 0, NULL, 0, NULL, 0);

  halo_command_buffer_t *gated =
      peer_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  halo_dispatch_arg_t gate_args[2] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(gate, 0, 4), NULL, 0},
      // 16: a kernel's buffer argument is 16-byte aligned (halo.h).
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(gate, 16, 4), NULL, 0},
  };
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "gate",
      .grid = {1, 1, 1},
      .block = {1, 1, 1},
      .args = gate_args,
      .arg_count = 2,
  };
  peer_setup_check(halo_command_buffer_dispatch(gated, &params), "dispatch");
  peer_setup_check(halo_command_buffer_end(gated), "end");
  halo_semaphore_t *gate_done = peer_semaphore(client, 0);
  halo_semaphore_value_t gate_signal = {gate_done, 1};
  peer_execute(NULL, gated, NULL, 0, NULL, 0, &gate_signal, 1);

  volatile uint32_t *words = halo_buffer_host_pointer(gate);
  int64_t deadline = peer_now_ns() + PEER_TIMEOUT_NS;
  while (__atomic_load_n(&words[0], __ATOMIC_ACQUIRE) == 0) {
    if (peer_now_ns() > deadline) peer_mismatch("the gate kernel never ran");
    usleep(1000);
  }
  halo_token_t token;
  peer_setup_check(halo_buffer_export(gate, &token), "export gate");
  peer_print_token("ready", &token);
  // Killed by the test (or with it); never longer than a minute.
  alarm(60);
  for (;;) pause();
}

// ---------------------------------------------------------------- alloca

static _Noreturn void peer_alloca(halo_client_t *client, char **args,
                                  int arg_count) {
  if (arg_count != 1) exit(PEER_EXIT_USAGE);
  halo_executable_t *executable = NULL;
  peer_setup_check(
      halo_executable_create_from_file(client, 0, args[0], 0, &executable),
      "load kernels");
  halo_queue_t *queue = NULL;
  peer_setup_check(halo_queue_create(client, 0, 0, &queue), "create queue");
  halo_semaphore_t *never = peer_semaphore(client, 0);
  static const uint32_t pattern = 0xfeedface;
  halo_command_buffer_t *fill =
      peer_record_fill(client, HALO_COMMAND_BUFFER_REUSABLE, 1,
                       halo_binding_ref(0, 0, 64), &pattern, sizeof(pattern));
  // Waiting: alloca -> execute -> dealloca, all behind |never|.
  for (int i = 0; i < 8; ++i) {
    halo_semaphore_t *step = peer_semaphore(client, 0);
    halo_semaphore_value_t wait = {never, 1};
    halo_semaphore_value_t signal = {step, 1};
    halo_buffer_t *buffer = NULL;
    peer_setup_check(
        halo_queue_alloca(queue, &wait, 1, &signal, 1,
                          i % 2 ? HALO_MEMORY_HOST_VISIBLE : HALO_MEMORY_DEVICE,
                          4096 * (uint64_t)(i + 1), &buffer),
        "alloca");
    halo_binding_t binding = {buffer, 0, 64};
    halo_semaphore_value_t executed = {step, 2};
    peer_execute(queue, fill, &binding, 1, &signal, 1, &executed, 1);
    halo_semaphore_value_t freed = {step, 3};
    peer_setup_check(
        halo_queue_dealloca(queue, &executed, 1, &freed, 1, buffer),
        "dealloca");
    halo_buffer_release(buffer);
    halo_semaphore_release(step);
  }
  // Deallocated at once, but bound by an execution that waits on |never|:
  // the dealloca is issued and waits for that execution, which the end of
  // the session cancels.
  {
    halo_buffer_t *held = NULL;
    peer_setup_check(halo_queue_alloca(queue, NULL, 0, NULL, 0,
                                       HALO_MEMORY_DEVICE, 4096, &held),
                     "alloca");
    halo_binding_t binding = {held, 0, 64};
    halo_semaphore_value_t wait = {never, 1};
    peer_execute(queue, fill, &binding, 1, &wait, 1, NULL, 0);
    peer_setup_check(halo_queue_dealloca(queue, NULL, 0, NULL, 0, held),
                     "dealloca");
    halo_buffer_release(held);
  }
  // In flight: a sleepy kernel uses a buffer already deallocated.
  halo_semaphore_t *ran = peer_semaphore(client, 0);
  halo_semaphore_value_t allocated = {ran, 1};
  halo_buffer_t *buffer = NULL;
  peer_setup_check(halo_queue_alloca(queue, NULL, 0, &allocated, 1,
                                     HALO_MEMORY_HOST_VISIBLE, 64, &buffer),
                   "alloca");
  halo_command_buffer_t *sleepy =
      peer_record_sleepy(client, executable, HALO_COMMAND_BUFFER_ONE_SHOT, 1,
                         halo_binding_ref(0, 0, 4), 1000000);
  halo_binding_t binding = {buffer, 0, 64};
  peer_execute(queue, sleepy, &binding, 1, &allocated, 1, NULL, 0);
  peer_setup_check(halo_queue_dealloca(queue, NULL, 0, NULL, 0, buffer),
                   "dealloca");
  printf("ready\n");
  fflush(stdout);
  alarm(60);
  for (;;) pause();
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: execute_peer ADDRESS COMMAND ARGS...\n");
    return PEER_EXIT_USAGE;
  }
  peer_command = argv[2];
  char **args = argv + 3;
  int arg_count = argc - 3;
  char name[64];
  snprintf(name, sizeof(name), "execute_peer %s", peer_command);
  halo_client_options_t options = {
      .address = argv[1], .client_name = name, .request_timeout_ms = 20000};
  halo_client_t *client = NULL;
  peer_setup_check(halo_client_connect(&options, &client), "connect");
  int code = PEER_EXIT_USAGE;
  if (strcmp(peer_command, "load") == 0) {
    code = peer_load(client, args, arg_count);
  } else if (strcmp(peer_command, "chain") == 0) {
    code = peer_chain(client, args, arg_count);
  } else if (strcmp(peer_command, "victim") == 0) {
    peer_victim(client, args, arg_count);
  } else if (strcmp(peer_command, "alloca") == 0) {
    peer_alloca(client, args, arg_count);
  }
  if (code == PEER_EXIT_USAGE) {
    fprintf(stderr, "execute_peer: bad command or argument count: %s\n",
            peer_command);
  }
  halo_client_close(client);
  return code;
}
