// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Executions on the CUDA driver through halod (label cuda; exits 77 without
// a GPU): two clients launching one memoized recording concurrently with
// their own tables, the binding strategies (SetParams on indirect BUFFER
// arguments, the device binding table) against direct launches, barriers as
// graph edges (two branches joined), dispatch_indirect, a dispatch of a zero
// grid (a no-op), a GPU-to-GPU wait (a consumer on one queue waiting for a
// producer's semaphore on another, released to the GPU before the producer
// finished), the device worker's reports waking nobody a second time (a
// semaphore's futex word moves once per execution), and a kernel that
// faults: a waiter in another process wakes with DEVICE_LOST within a
// second, the message naming the CUDA error without asking the exiting
// daemon, and halod exits non-zero; under --cuda-graph-bytes 8M, the bound
// at work and what an operator sees of it (`haloctl workers`, the
// metrics). Each group runs against a halod of its own, with the
// completion thread and with cuLaunchHostFunc.
//
// The kernels are CUDA C compiled by halod's NVRTC path; where the host
// has no Landlock (halod then refuses CUDA C;
// integration.cuda_execute_without_landlock_test runs it so), PTX
// compiled from them in this process. With
// HALO_TEST_FAKE_CUDA=1 and the fake libcuda.so.1 on LD_LIBRARY_PATH
// (ctest integration.cuda_execute_fake_test) everything but the GPU runs:
// halod, its CUDA driver, the daemon's paths, on host versions of the
// kernels.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/admin.h"
#include "client/client.h"
#include "common/sandbox.h"
#include "common/timeline.h"
#include "hal/device.h"
#include "hal/registry.h"
#include "halo/halo.h"
#include "tests/support/fake_cuda_image.h"
#include "tests/support/nvrtc_ptx.h"

static const char kKernels[] =
    "extern \"C\" __global__ void axpy(const float *x, float *y, float a,\n"
    "                                  unsigned n) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n"
    // The same through the binding table: slots of x and y.
    "extern \"C\" __global__ void axpy_table(\n"
    "    const unsigned long long *table, float a, unsigned n,\n"
    "    unsigned x_slot, unsigned y_slot) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  const float *x = (const float *)table[x_slot];\n"
    "  float *y = (float *)table[y_slot];\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n"
    // y = a * x after |ns| of the GPU's global timer in every block: long
    // enough for two clients' executions to overlap.
    "extern \"C\" __global__ void slow_scale(const float *x, float *y,\n"
    "                                        float a, unsigned n,\n"
    "                                        unsigned long long ns) {\n"
    "  if (threadIdx.x == 0) {\n"
    "    unsigned long long start, now;\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(start));\n"
    "    do {\n"
    "      asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(now));\n"
    "    } while (now - start < ns);\n"
    "  }\n"
    "  __syncthreads();\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i];\n"
    "}\n"
    "extern \"C\" __global__ void add(const float *a, const float *b,\n"
    "                                 float *c, unsigned n) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) c[i] = a[i] + b[i];\n"
    "}\n"
    "extern \"C\" __global__ void scale_add(const float *x, float *y,\n"
    "                                       float a, float b, unsigned n) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + b;\n"
    "}\n"
    // Writes through a pointer the host made up: an illegal address.
    "extern \"C\" __global__ void fault(unsigned long long address) {\n"
    "  *(volatile unsigned long long *)address = 1;\n"
    "}\n";

#define N 4096u
#define BLOCK 256u
#define TIMEOUT_NS (20ll * 1000000000ll)

static struct {
  pid_t pid;
  char dir[64];
  char listen[160];
  char admin[160];
  const char *completion;
} daemon_state;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void expect_ok_at(halo_status_t status, const char *what, int line) {
  if (status) {
    fail_msg("line %d: %s: %s: %s", line, what,
             halo_status_code_name(halo_status_code(status)),
             halo_status_message(status));
  }
}
#define expect_ok(expr) expect_ok_at((expr), #expr, __LINE__)

static halo_client_t *connect_client(void) {
  halo_client_options_t options = {.address = daemon_state.listen,
                                   .request_timeout_ms = 60000};
  halo_client_t *client = NULL;
  expect_ok(halo_client_connect(&options, &client));
  return client;
}

// The device worker holds back completion reports that nothing in halod
// waits for up to this long (the most halod takes): a completion halod
// does wait for (deferred work) must still reach it at once, which
// test_gpu_to_gpu_wait checks.
#define LINGER_US "1000000"

// Starts halod --driver cuda with |completion| and waits until a client
// connects.
static int daemon_start_bounded(const char *completion,
                                const char *graph_bytes);
static int daemon_start(const char *completion) {
  return daemon_start_bounded(completion, NULL);
}

// The same with --cuda-graph-bytes |graph_bytes| (NULL: the default).
static int daemon_start_bounded(const char *completion,
                                const char *graph_bytes) {
  memset(&daemon_state, 0, sizeof(daemon_state));
  daemon_state.completion = completion;
  snprintf(daemon_state.dir, sizeof(daemon_state.dir),
           "/tmp/halo-cuda-exec-XXXXXX");
  if (!mkdtemp(daemon_state.dir)) return -1;
  snprintf(daemon_state.listen, sizeof(daemon_state.listen),
           "ipc://%s/halo.sock", daemon_state.dir);
  snprintf(daemon_state.admin, sizeof(daemon_state.admin),
           "ipc://%s/admin.sock", daemon_state.dir);
  char cache[128];
  snprintf(cache, sizeof(cache), "%s/cache", daemon_state.dir);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    // halod goes with this test, also when a sanitizer ends it (else halod
    // would hold ctest's output pipe until the test's timeout).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    execl(HALO_TEST_HALOD, HALO_TEST_HALOD, "--listen", daemon_state.listen,
          "--admin", daemon_state.admin, "--driver", "cuda",
          "--cuda-completion", completion, "--cache-directory", cache,
          "--worker-report-linger-us", LINGER_US, "--log-level", "info",
          graph_bytes ? "--cuda-graph-bytes" : (char *)NULL, graph_bytes,
          (char *)NULL);
    _exit(127);
  }
  daemon_state.pid = pid;
  int64_t deadline = now_ns() + 60ll * 1000000000ll;
  while (now_ns() < deadline) {
    int wait_status;
    if (waitpid(pid, &wait_status, WNOHANG) == pid) {
      daemon_state.pid = 0;
      fprintf(stderr, "halod exited during start-up (0x%x)\n", wait_status);
      return -1;
    }
    halo_client_options_t options = {.address = daemon_state.listen,
                                     .request_timeout_ms = 2000};
    halo_client_t *client = NULL;
    halo_status_t status = halo_client_connect(&options, &client);
    if (!status) {
      halo_client_close(client);
      return 0;
    }
    halo_status_free(status);
    usleep(20000);
  }
  return -1;
}

// Waits up to |timeout_ms| for halod to exit; returns its wait status, or
// -1 if it did not exit.
static int daemon_wait(int timeout_ms) {
  int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;
  while (daemon_state.pid > 0) {
    int wait_status;
    pid_t reaped = waitpid(daemon_state.pid, &wait_status, WNOHANG);
    if (reaped == daemon_state.pid) {
      daemon_state.pid = 0;
      return wait_status;
    }
    if (now_ns() > deadline) return -1;
    usleep(1000);
  }
  return -1;
}

static void daemon_stop(void) {
  if (daemon_state.pid > 0) {
    kill(daemon_state.pid, SIGTERM);
    if (daemon_wait(30000) == -1 && daemon_state.pid > 0) {
      kill(daemon_state.pid, SIGKILL);
      daemon_wait(5000);
    }
  }
  char command[128];
  snprintf(command, sizeof(command), "rm -rf %s", daemon_state.dir);
  if (daemon_state.dir[0] && system(command) != 0) {
    fprintf(stderr, "could not remove %s\n", daemon_state.dir);
  }
}

static int setup_thread(void **state) {
  (void)state;
  return daemon_start("thread");
}
static int setup_host_func(void **state) {
  (void)state;
  return daemon_start("host_func");
}
static int teardown(void **state) {
  (void)state;
  daemon_stop();
  return 0;
}

// The fake driver's CUBIN (HALO_TEST_FAKE_CUDA=1), made by main before
// any client thread reads it.
static uint8_t fake_image[HALO_FAKE_CUDA_IMAGE_SIZE];

// The kernels as PTX, compiled here by main where this host has no
// Landlock (halod then refuses CUDA C); NULL elsewhere.
static char *kernels_ptx;
static size_t kernels_ptx_size;

// The kernels: CUDA C for NVRTC (or its PTX, kernels_ptx), or with
// HALO_TEST_FAKE_CUDA=1 (halod on the fake libcuda.so.1 of
// tests/unit/hal_cuda_fake_driver.c, no GPU) the fake's library, which
// holds host versions of the same kernels.
static halo_executable_params_t kernel_params(void) {
  const char *fake = getenv("HALO_TEST_FAKE_CUDA");
  halo_executable_params_t params = {
      .format = HALO_EXECUTABLE_FORMAT_CUDA_SOURCE,
      .data = kKernels,
      .size = sizeof(kKernels) - 1,
  };
  if (fake && strcmp(fake, "1") == 0) {
    params.format = HALO_EXECUTABLE_FORMAT_CUBIN;
    params.data = fake_image;
    params.size = sizeof(fake_image);
  } else if (kernels_ptx) {
    params.format = HALO_EXECUTABLE_FORMAT_PTX;
    params.data = kernels_ptx;
    params.size = kernels_ptx_size;
  }
  return params;
}

static halo_executable_t *load_kernels(halo_client_t *client) {
  halo_executable_params_t params = kernel_params();
  halo_executable_t *executable = NULL;
  expect_ok(halo_executable_create(client, 0, &params, &executable));
  return executable;
}

static halo_buffer_t *new_buffer(halo_client_t *client, uint64_t size) {
  halo_buffer_t *buffer = NULL;
  expect_ok(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, size, 0, &buffer));
  return buffer;
}

static void write_floats(halo_buffer_t *buffer, const float *values,
                         uint32_t count) {
  expect_ok(halo_buffer_write(buffer, 0, values, count * sizeof(float)));
}

static void read_floats(halo_buffer_t *buffer, float *values, uint32_t count) {
  expect_ok(halo_buffer_read(buffer, 0, values, count * sizeof(float)));
}

static void fill_floats(halo_buffer_t *buffer, float value) {
  static float values[N];
  for (uint32_t i = 0; i < N; ++i) values[i] = value;
  write_floats(buffer, values, N);
}

// Executes |command_buffer| with |bindings| and waits for |semaphore| to
// reach |value|.
static halo_status_t execute_and_wait(halo_queue_t *queue,
                                      halo_command_buffer_t *command_buffer,
                                      const halo_binding_t *bindings,
                                      size_t binding_count,
                                      halo_semaphore_t *semaphore,
                                      uint64_t value) {
  halo_semaphore_value_t signal = {semaphore, value};
  halo_status_t status = halo_queue_execute(queue, command_buffer, bindings,
                                            binding_count, NULL, 0, &signal, 1);
  if (status) return status;
  return halo_semaphore_wait(semaphore, value, TIMEOUT_NS);
}

static halo_dispatch_arg_t buffer_arg(halo_buffer_ref_t ref) {
  halo_dispatch_arg_t arg = {.kind = HALO_DISPATCH_ARG_BUFFER, .ref = ref};
  return arg;
}
static halo_dispatch_arg_t constant_arg(const void *data, size_t size) {
  halo_dispatch_arg_t arg = {
      .kind = HALO_DISPATCH_ARG_CONSTANT, .data = data, .size = size};
  return arg;
}

// A slow_scale dispatch (y = a * x after |ns| of the GPU's timer) of slot 0
// (x) and slot 1 (y), N floats, with |a|, |n| and |ns| as its constants;
// |args| (5) and the constants must outlive its recording.
static halo_dispatch_params_t slow_scale_dispatch(halo_executable_t *executable,
                                                  halo_dispatch_arg_t *args,
                                                  const float *a,
                                                  const uint32_t *n,
                                                  const uint64_t *ns) {
  args[0] = buffer_arg(halo_binding_ref(0, 0, HALO_WHOLE_BUFFER));
  args[1] = buffer_arg(halo_binding_ref(1, 0, HALO_WHOLE_BUFFER));
  args[2] = constant_arg(a, sizeof(*a));
  args[3] = constant_arg(n, sizeof(*n));
  args[4] = constant_arg(ns, sizeof(*ns));
  return (halo_dispatch_params_t){.executable = executable,
                                  .entry = "slow_scale",
                                  .grid = {N / BLOCK, 1, 1},
                                  .block = {BLOCK, 1, 1},
                                  .args = args,
                                  .arg_count = 5};
}

// A REUSABLE recording of one slow_scale dispatch (a = 2, |ns| of the
// GPU's timer) of slots 0 (x) and 1 (y).
static halo_command_buffer_t *record_slow_scale(halo_client_t *client,
                                                halo_executable_t *executable,
                                                uint64_t ns) {
  float two = 2.0f;
  uint32_t n = N;
  halo_dispatch_arg_t args[5];
  halo_dispatch_params_t dispatch =
      slow_scale_dispatch(executable, args, &two, &n, &ns);
  halo_command_buffer_t *command_buffer = NULL;
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                      2, &command_buffer));
  expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
  expect_ok(halo_command_buffer_end(command_buffer));
  return command_buffer;
}

//===----------------------------------------------------------------------===//
// Two clients, one recording, their own tables
//===----------------------------------------------------------------------===//

typedef struct shared_client_t {
  int index;
  pthread_barrier_t *barrier;
  int iterations;
  int memo_hit;
  int mismatches;
  char failure[512];
} shared_client_t;

static void *shared_client_thread(void *arg) {
  shared_client_t *me = arg;
  halo_client_options_t options = {.address = daemon_state.listen,
                                   .request_timeout_ms = 60000};
  halo_client_t *client = NULL;
  halo_status_t status = halo_client_connect(&options, &client);
  halo_executable_t *executable = NULL;
  halo_queue_t *queue = NULL;
  halo_command_buffer_t *command_buffer = NULL;
  halo_semaphore_t *semaphore = NULL;
  halo_buffer_t *x[2] = {NULL, NULL}, *y[2] = {NULL, NULL};
  if (!status) {
    halo_executable_params_t params = kernel_params();
    status = halo_executable_create(client, 0, &params, &executable);
  }
  if (!status) status = halo_queue_create(client, 0, 0, &queue);
  if (!status) status = halo_semaphore_create(client, 0, 0, &semaphore);
  for (int i = 0; i < 2 && !status; ++i) {
    status = halo_buffer_create(client, 0, HALO_MEMORY_DEVICE,
                                N * sizeof(float), 0, &x[i]);
    if (!status) {
      status = halo_buffer_create(client, 0, HALO_MEMORY_DEVICE,
                                  N * sizeof(float), 0, &y[i]);
    }
  }
  // The same recording in both clients: slots only, same constants.
  float a = 3.0f;
  uint32_t n = N;
  uint64_t ns = 300000;  // 0.3 ms
  halo_dispatch_arg_t args[5];
  halo_dispatch_params_t dispatch =
      slow_scale_dispatch(executable, args, &a, &n, &ns);
  // Both record at the same moment: one of them finds the other's.
  pthread_barrier_wait(me->barrier);
  if (!status) {
    status = halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                       2, &command_buffer);
  }
  if (!status) status = halo_command_buffer_dispatch(command_buffer, &dispatch);
  if (!status) status = halo_command_buffer_end(command_buffer);
  if (!status) me->memo_hit = halo_command_buffer_memo_hit(command_buffer);
  pthread_barrier_wait(me->barrier);
  static float values[2][N];
  float *input = values[me->index];
  for (int iteration = 0; iteration < me->iterations && !status; ++iteration) {
    int pair = iteration % 2;
    float base = (float)(me->index * 100000 + iteration * 10);
    for (uint32_t i = 0; i < N; ++i) input[i] = base + (float)(i % 7);
    status = halo_buffer_write(x[pair], 0, input, N * sizeof(float));
    halo_binding_t bindings[2] = {{x[pair], 0, HALO_WHOLE_BUFFER},
                                  {y[pair], 0, HALO_WHOLE_BUFFER}};
    if (!status) {
      status = execute_and_wait(queue, command_buffer, bindings, 2, semaphore,
                                (uint64_t)iteration + 1);
    }
    float output[N];
    if (!status) {
      status = halo_buffer_read(y[pair], 0, output, sizeof(output));
    }
    for (uint32_t i = 0; !status && i < N; ++i) {
      if (output[i] != a * input[i]) {
        if (me->mismatches++ == 0) {
          snprintf(me->failure, sizeof(me->failure),
                   "client %d iteration %d: y[%u] = %g, expected %g", me->index,
                   iteration, i, output[i], a * input[i]);
        }
      }
    }
  }
  if (status) {
    snprintf(me->failure, sizeof(me->failure), "client %d: %s: %s", me->index,
             halo_status_code_name(halo_status_code(status)),
             halo_status_message(status));
    halo_status_free(status);
    me->mismatches = -1;
  }
  halo_client_close(client);
  return NULL;
}

// The kernels' parameters as cuFuncGetParamInfo reports them, through
// halod and its worker; a second load of the same code is a cache hit.
static void test_parameters_and_cache_hit(void **state) {
  (void)state;
  halo_client_t *client = connect_client();
  halo_executable_t *first = load_kernels(client);
  halo_executable_t *second = load_kernels(client);
  assert_true(halo_executable_cache_hit(second));
  halo_parameter_t parameters[8];
  size_t count = 0;
  expect_ok(halo_executable_parameters(second, "add", parameters, 8, &count));
  assert_int_equal(count, 4);
  const uint32_t sizes[4] = {8, 8, 8, 4}, offsets[4] = {0, 8, 16, 24};
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(parameters[i].size, sizes[i]);
    assert_int_equal(parameters[i].offset, offsets[i]);
  }
  halo_status_t status =
      halo_executable_parameters(first, "missing", parameters, 8, &count);
  assert_int_equal(halo_status_code(status), HALO_STATUS_NOT_FOUND);
  halo_status_free(status);
  halo_executable_release(second);
  halo_executable_release(first);
  halo_client_close(client);
}

static void test_two_clients_share_a_recording(void **state) {
  (void)state;
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, 2);
  shared_client_t clients[2] = {
      {.index = 0, .barrier = &barrier, .iterations = 40},
      {.index = 1, .barrier = &barrier, .iterations = 40},
  };
  pthread_t threads[2];
  int64_t start = now_ns();
  for (int i = 0; i < 2; ++i) {
    pthread_create(&threads[i], NULL, shared_client_thread, &clients[i]);
  }
  for (int i = 0; i < 2; ++i) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&barrier);
  print_message(
      "[%s] two clients x 40 executions of one recording: %.1f ms; "
      "memo hits %d/%d\n",
      daemon_state.completion, (double)(now_ns() - start) / 1e6,
      clients[0].memo_hit, clients[1].memo_hit);
  for (int i = 0; i < 2; ++i) {
    if (clients[i].mismatches) fail_msg("%s", clients[i].failure);
  }
  // One of the two recorded second and shared the prepared recording.
  assert_int_equal(clients[0].memo_hit + clients[1].memo_hit, 1);
}

//===----------------------------------------------------------------------===//
// GPU-to-GPU waits
//===----------------------------------------------------------------------===//

// Spins on |semaphore| until it reaches |value|; returns when it saw it.
static int64_t spin_until(halo_semaphore_t *semaphore, uint64_t value) {
  int64_t deadline = now_ns() + TIMEOUT_NS;
  uint64_t seen = 0;
  while (seen < value) {
    expect_ok(halo_semaphore_query(semaphore, &seen));
    if (now_ns() > deadline)
      fail_msg("semaphore never reached %llu", (unsigned long long)value);
  }
  return now_ns();
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

// A producer (y = 2x after 5 ms on the GPU) on queue A signals S; a
// consumer (z = y + 1) on queue B waits for S and signals T. halod releases
// the consumer as soon as the producer is on the device, and the GPU orders
// them (an event wait): T follows S by the consumer's own time, not by a
// host round trip. Both orders of submission (consumer first: a wait
// before its signal).
static void test_gpu_to_gpu_wait(void **state) {
  (void)state;
  enum { ROUNDS = 20 };
  halo_client_t *client = connect_client();
  halo_executable_t *executable = load_kernels(client);
  halo_queue_t *queue_a = NULL, *queue_b = NULL;
  expect_ok(halo_queue_create(client, 0, 0, &queue_a));
  expect_ok(halo_queue_create(client, 0, 0, &queue_b));
  halo_semaphore_t *produced = NULL, *consumed = NULL;
  expect_ok(halo_semaphore_create(client, 0, 0, &produced));
  expect_ok(halo_semaphore_create(client, 0, 0, &consumed));
  halo_buffer_t *x = new_buffer(client, N * sizeof(float));
  halo_buffer_t *y = new_buffer(client, N * sizeof(float));
  halo_buffer_t *z = new_buffer(client, N * sizeof(float));
  float two = 2.0f, one = 1.0f;
  uint32_t n = N;
  uint64_t ns = 5000000;
  halo_dispatch_arg_t producer_args[5];
  halo_dispatch_params_t producer_dispatch =
      slow_scale_dispatch(executable, producer_args, &two, &n, &ns);
  halo_dispatch_arg_t consumer_args[5] = {
      buffer_arg(halo_binding_ref(0, 0, HALO_WHOLE_BUFFER)),
      buffer_arg(halo_binding_ref(1, 0, HALO_WHOLE_BUFFER)),
      constant_arg(&one, sizeof(one)), constant_arg(&one, sizeof(one)),
      constant_arg(&n, sizeof(n))};
  halo_dispatch_params_t consumer_dispatch = {.executable = executable,
                                              .entry = "scale_add",
                                              .grid = {N / BLOCK, 1, 1},
                                              .block = {BLOCK, 1, 1},
                                              .args = consumer_args,
                                              .arg_count = 5};
  halo_command_buffer_t *producer = NULL, *consumer = NULL;
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                      2, &producer));
  expect_ok(halo_command_buffer_dispatch(producer, &producer_dispatch));
  expect_ok(halo_command_buffer_end(producer));
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                      2, &consumer));
  expect_ok(halo_command_buffer_dispatch(consumer, &consumer_dispatch));
  expect_ok(halo_command_buffer_end(consumer));
  halo_binding_t producer_bindings[2] = {{x, 0, HALO_WHOLE_BUFFER},
                                         {y, 0, HALO_WHOLE_BUFFER}};
  halo_binding_t consumer_bindings[2] = {{y, 0, HALO_WHOLE_BUFFER},
                                         {z, 0, HALO_WHOLE_BUFFER}};
  static float input[N], output[N];
  double gaps_us[ROUNDS];
  for (int round = 0; round < ROUNDS; ++round) {
    for (uint32_t i = 0; i < N; ++i) input[i] = (float)(round * 10 + i % 13);
    write_floats(x, input, N);
    fill_floats(y, -1.0f);
    fill_floats(z, -1.0f);
    uint64_t value = (uint64_t)round + 1;
    halo_semaphore_value_t s = {produced, value}, t = {consumed, value};
    if (round % 2 == 0) {
      expect_ok(halo_queue_execute(queue_b, consumer, consumer_bindings, 2, &s,
                                   1, &t, 1));
      expect_ok(halo_queue_execute(queue_a, producer, producer_bindings, 2,
                                   NULL, 0, &s, 1));
    } else {
      expect_ok(halo_queue_execute(queue_a, producer, producer_bindings, 2,
                                   NULL, 0, &s, 1));
      expect_ok(halo_queue_execute(queue_b, consumer, consumer_bindings, 2, &s,
                                   1, &t, 1));
    }
    int64_t s_seen = spin_until(produced, value);
    int64_t t_seen = spin_until(consumed, value);
    gaps_us[round] = (double)(t_seen - s_seen) / 1e3;
    // A consumer halod deferred until the producer's value (the device
    // worker took the producer from the ring) is released by the worker's
    // report, which must not linger (LINGER_US).
    if (gaps_us[round] > 500000.0) {
      fail_msg(
          "[%s] round %d: the consumer's value came %.0f us after the "
          "producer's: its completion report lingered",
          daemon_state.completion, round, gaps_us[round]);
    }
    expect_ok(halo_semaphore_wait(consumed, value, TIMEOUT_NS));
    read_floats(z, output, N);
    for (uint32_t i = 0; i < N; ++i) {
      if (output[i] != 2.0f * input[i] + 1.0f) {
        fail_msg(
            "[%s] round %d: z[%u] = %g, expected %g (the consumer did "
            "not wait for the producer)",
            daemon_state.completion, round, i, output[i],
            2.0f * input[i] + 1.0f);
      }
    }
  }
  qsort(gaps_us, ROUNDS, sizeof(gaps_us[0]), compare_doubles);
  print_message(
      "[%s] GPU-to-GPU wait: the consumer's value seen %.1f us (median of "
      "%d; min %.1f, max %.1f) after the producer's\n",
      daemon_state.completion, gaps_us[ROUNDS / 2], ROUNDS, gaps_us[0],
      gaps_us[ROUNDS - 1]);
  halo_command_buffer_release(producer);
  halo_command_buffer_release(consumer);
  halo_client_close(client);
}

//===----------------------------------------------------------------------===//
// Binding strategies against direct launches
//===----------------------------------------------------------------------===//

static void test_binding_strategies_match_direct(void **state) {
  (void)state;
  halo_client_t *client = connect_client();
  halo_executable_t *executable = load_kernels(client);
  halo_queue_t *queue = NULL;
  expect_ok(halo_queue_create(client, 0, 0, &queue));
  halo_semaphore_t *semaphore = NULL;
  expect_ok(halo_semaphore_create(client, 0, 0, &semaphore));
  uint64_t value = 0;
  enum { INPUTS = 3, WAYS = 4 };
  halo_buffer_t *x[INPUTS];
  halo_buffer_t *y[WAYS];
  static float inputs[INPUTS][N];
  for (int k = 0; k < INPUTS; ++k) {
    x[k] = new_buffer(client, N * sizeof(float));
    for (uint32_t i = 0; i < N; ++i) {
      inputs[k][i] = (float)(k + 1) * 0.25f + (float)i * 0.001f;
    }
    write_floats(x[k], inputs[k], N);
  }
  for (int w = 0; w < WAYS; ++w) y[w] = new_buffer(client, N * sizeof(float));
  float a = 1.5f;
  uint32_t n = N;
  uint32_t x_slot = 0, y_slot = 1;
  // SetParams: indirect BUFFER arguments.
  halo_dispatch_arg_t set_params_args[4] = {
      buffer_arg(halo_binding_ref(0, 0, HALO_WHOLE_BUFFER)),
      buffer_arg(halo_binding_ref(1, 0, HALO_WHOLE_BUFFER)),
      constant_arg(&a, sizeof(a)),
      constant_arg(&n, sizeof(n)),
  };
  // The device binding table.
  halo_dispatch_arg_t table_args[5] = {
      {.kind = HALO_DISPATCH_ARG_BINDING_TABLE},
      constant_arg(&a, sizeof(a)),
      constant_arg(&n, sizeof(n)),
      constant_arg(&x_slot, sizeof(x_slot)),
      constant_arg(&y_slot, sizeof(y_slot)),
  };
  halo_dispatch_params_t dispatch = {.executable = executable,
                                     .grid = {N / BLOCK, 1, 1},
                                     .block = {BLOCK, 1, 1}};
  halo_command_buffer_t *by_params = NULL, *by_table = NULL;
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                      2, &by_params));
  dispatch.entry = "axpy";
  dispatch.args = set_params_args;
  dispatch.arg_count = 4;
  expect_ok(halo_command_buffer_dispatch(by_params, &dispatch));
  expect_ok(halo_command_buffer_end(by_params));
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                      2, &by_table));
  dispatch.entry = "axpy_table";
  dispatch.args = table_args;
  dispatch.arg_count = 5;
  expect_ok(halo_command_buffer_dispatch(by_table, &dispatch));
  expect_ok(halo_command_buffer_end(by_table));

  static float results[WAYS][N];
  for (int round = 0; round < 6; ++round) {
    int k = round % INPUTS;  // a different x every round: re-pointed
    float y0 = (float)round;
    for (int w = 0; w < WAYS; ++w) fill_floats(y[w], y0);
    halo_binding_t bindings[2] = {{x[k], 0, HALO_WHOLE_BUFFER},
                                  {y[0], 0, HALO_WHOLE_BUFFER}};
    expect_ok(
        execute_and_wait(queue, by_params, bindings, 2, semaphore, ++value));
    bindings[1].buffer = y[1];
    expect_ok(
        execute_and_wait(queue, by_table, bindings, 2, semaphore, ++value));
    // Direct references: replayed on the stream (ONE_SHOT) and as a graph
    // without patches (REUSABLE).
    for (int direct = 0; direct < 2; ++direct) {
      halo_dispatch_arg_t direct_args[4] = {
          buffer_arg(halo_buffer_ref(x[k], 0, HALO_WHOLE_BUFFER)),
          buffer_arg(halo_buffer_ref(y[2 + direct], 0, HALO_WHOLE_BUFFER)),
          constant_arg(&a, sizeof(a)),
          constant_arg(&n, sizeof(n)),
      };
      halo_command_buffer_t *direct_buffer = NULL;
      expect_ok(halo_command_buffer_begin(
          client, 0,
          direct ? HALO_COMMAND_BUFFER_REUSABLE : HALO_COMMAND_BUFFER_ONE_SHOT,
          0, &direct_buffer));
      dispatch.entry = "axpy";
      dispatch.args = direct_args;
      dispatch.arg_count = 4;
      expect_ok(halo_command_buffer_dispatch(direct_buffer, &dispatch));
      expect_ok(halo_command_buffer_end(direct_buffer));
      expect_ok(
          execute_and_wait(queue, direct_buffer, NULL, 0, semaphore, ++value));
      halo_command_buffer_release(direct_buffer);
    }
    for (int w = 0; w < WAYS; ++w) read_floats(y[w], results[w], N);
    for (uint32_t i = 0; i < N; ++i) {
      float expected = a * inputs[k][i] + y0;
      for (int w = 0; w < WAYS; ++w) {
        if (results[w][i] != results[2][i] ||
            fabsf(results[w][i] - expected) > 1e-3f) {
          fail_msg(
              "round %d way %d (0 SetParams, 1 table, 2 one-shot, 3 "
              "reusable direct): y[%u] = %.9g, one-shot %.9g, "
              "expected %.9g",
              round, w, i, results[w][i], results[2][i], expected);
        }
      }
    }
  }
  print_message(
      "[%s] SetParams, binding table, one-shot and reusable direct "
      "launches agree over 6 rounds of 3 inputs\n",
      daemon_state.completion);
  halo_command_buffer_release(by_params);
  halo_command_buffer_release(by_table);
  halo_client_close(client);
}

//===----------------------------------------------------------------------===//
// Barriers as edges
//===----------------------------------------------------------------------===//

// Stage 1: fill A with 1.0, update B with i; barrier; stage 2, two
// independent branches: C = 3 A + 0, D = 1 B + 10; barrier; stage 3: E =
// C + D; barrier; stage 4: F = copy of E. F[i] = 13 + i.
static halo_command_buffer_t *record_diamond(halo_client_t *client,
                                             halo_executable_t *executable,
                                             uint32_t flags) {
  static float inline_bytes[N];
  for (uint32_t i = 0; i < N; ++i) inline_bytes[i] = (float)i;
  static const float one = 1.0f;
  static const float three = 3.0f, zero = 0.0f, unit = 1.0f, ten = 10.0f;
  static const uint32_t n = N;
  uint64_t bytes = N * sizeof(float);
  halo_command_buffer_t *command_buffer = NULL;
  expect_ok(halo_command_buffer_begin(client, 0, flags, 6, &command_buffer));
  expect_ok(halo_command_buffer_fill(command_buffer,
                                     halo_binding_ref(0, 0, bytes), &one, 4));
  expect_ok(halo_command_buffer_update(command_buffer, inline_bytes, bytes,
                                       halo_binding_ref(1, 0, bytes)));
  expect_ok(halo_command_buffer_barrier(command_buffer));
  halo_dispatch_arg_t branch_c[5] = {
      buffer_arg(halo_binding_ref(0, 0, bytes)),
      buffer_arg(halo_binding_ref(2, 0, bytes)),
      constant_arg(&three, 4),
      constant_arg(&zero, 4),
      constant_arg(&n, 4),
  };
  halo_dispatch_arg_t branch_d[5] = {
      buffer_arg(halo_binding_ref(1, 0, bytes)),
      buffer_arg(halo_binding_ref(3, 0, bytes)),
      constant_arg(&unit, 4),
      constant_arg(&ten, 4),
      constant_arg(&n, 4),
  };
  halo_dispatch_params_t dispatch = {.executable = executable,
                                     .entry = "scale_add",
                                     .grid = {N / BLOCK, 1, 1},
                                     .block = {BLOCK, 1, 1},
                                     .args = branch_c,
                                     .arg_count = 5};
  expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
  dispatch.args = branch_d;
  expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
  expect_ok(halo_command_buffer_barrier(command_buffer));
  halo_dispatch_arg_t join[4] = {
      buffer_arg(halo_binding_ref(2, 0, bytes)),
      buffer_arg(halo_binding_ref(3, 0, bytes)),
      buffer_arg(halo_binding_ref(4, 0, bytes)),
      constant_arg(&n, 4),
  };
  dispatch.entry = "add";
  dispatch.args = join;
  dispatch.arg_count = 4;
  expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
  expect_ok(halo_command_buffer_barrier(command_buffer));
  expect_ok(halo_command_buffer_copy(command_buffer,
                                     halo_binding_ref(4, 0, bytes),
                                     halo_binding_ref(5, 0, bytes)));
  expect_ok(halo_command_buffer_end(command_buffer));
  return command_buffer;
}

static void test_barriers_join_two_branches(void **state) {
  (void)state;
  halo_client_t *client = connect_client();
  halo_executable_t *executable = load_kernels(client);
  halo_queue_t *queue = NULL;
  expect_ok(halo_queue_create(client, 0, 0, &queue));
  halo_semaphore_t *semaphore = NULL;
  expect_ok(halo_semaphore_create(client, 0, 0, &semaphore));
  uint64_t value = 0;
  // Two sets of six buffers: the second round re-points every node (memset,
  // memcpy and kernel nodes).
  halo_buffer_t *buffers[2][6];
  for (int s = 0; s < 2; ++s) {
    for (int b = 0; b < 6; ++b) {
      buffers[s][b] = new_buffer(client, N * sizeof(float));
      fill_floats(buffers[s][b], -1.0f);
    }
  }
  halo_command_buffer_t *reusable =
      record_diamond(client, executable, HALO_COMMAND_BUFFER_REUSABLE);
  for (int round = 0; round < 4; ++round) {
    int s = round % 2;
    halo_command_buffer_t *command_buffer =
        round < 3
            ? reusable
            : record_diamond(client, executable, HALO_COMMAND_BUFFER_ONE_SHOT);
    halo_binding_t bindings[6];
    for (int b = 0; b < 6; ++b) {
      bindings[b] = (halo_binding_t){buffers[s][b], 0, HALO_WHOLE_BUFFER};
    }
    fill_floats(buffers[s][5], -1.0f);
    expect_ok(execute_and_wait(queue, command_buffer, bindings, 6, semaphore,
                               ++value));
    static float result[N];
    read_floats(buffers[s][5], result, N);
    for (uint32_t i = 0; i < N; ++i) {
      if (result[i] != 13.0f + (float)i) {
        fail_msg("round %d (%s): F[%u] = %g, expected %g", round,
                 round < 3 ? "graph" : "one-shot replay", i, result[i],
                 13.0f + (float)i);
      }
    }
    if (command_buffer != reusable) halo_command_buffer_release(command_buffer);
  }
  print_message(
      "[%s] fill+update | barrier | two branches | barrier | join "
      "| barrier | copy: right as a graph (3 rounds, 2 tables) and "
      "replayed\n",
      daemon_state.completion);
  halo_command_buffer_release(reusable);
  halo_client_close(client);
}

//===----------------------------------------------------------------------===//
// dispatch_indirect
//===----------------------------------------------------------------------===//

static void test_dispatch_indirect(void **state) {
  (void)state;
  halo_client_t *client = connect_client();
  halo_executable_t *executable = load_kernels(client);
  halo_queue_t *queue = NULL;
  expect_ok(halo_queue_create(client, 0, 0, &queue));
  halo_semaphore_t *semaphore = NULL;
  expect_ok(halo_semaphore_create(client, 0, 0, &semaphore));
  halo_buffer_t *x = new_buffer(client, N * sizeof(float));
  halo_buffer_t *y = new_buffer(client, N * sizeof(float));
  halo_buffer_t *counts = new_buffer(client, 16);
  fill_floats(x, 2.0f);
  float a = 1.0f;
  uint32_t n = N;
  halo_dispatch_arg_t args[4] = {
      buffer_arg(halo_binding_ref(0, 0, HALO_WHOLE_BUFFER)),
      buffer_arg(halo_binding_ref(1, 0, HALO_WHOLE_BUFFER)),
      constant_arg(&a, sizeof(a)),
      constant_arg(&n, sizeof(n)),
  };
  halo_dispatch_params_t dispatch = {.executable = executable,
                                     .entry = "axpy",
                                     .grid = {0, 0, 0},
                                     .block = {BLOCK, 1, 1},
                                     .args = args,
                                     .arg_count = 4};
  halo_command_buffer_t *command_buffer = NULL;
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                      3, &command_buffer));
  expect_ok(halo_command_buffer_dispatch_indirect(command_buffer, &dispatch,
                                                  halo_binding_ref(2, 0, 12)));
  expect_ok(halo_command_buffer_end(command_buffer));
  halo_binding_t bindings[3] = {{x, 0, HALO_WHOLE_BUFFER},
                                {y, 0, HALO_WHOLE_BUFFER},
                                {counts, 0, HALO_WHOLE_BUFFER}};
  // All blocks, then half of them, then none (a zero count skips it).
  uint32_t blocks[3] = {N / BLOCK, N / BLOCK / 2, 0};
  for (int round = 0; round < 3; ++round) {
    fill_floats(y, 1.0f);
    uint32_t grid[4] = {blocks[round], 1, 1, 0};
    expect_ok(halo_buffer_write(counts, 0, grid, sizeof(grid)));
    halo_status_t status = execute_and_wait(queue, command_buffer, bindings, 3,
                                            semaphore, (uint64_t)round + 1);
    if (halo_status_code(status) == HALO_STATUS_UNIMPLEMENTED) {
      print_message("dispatch_indirect: %s\n", halo_status_message(status));
      halo_status_free(status);
      halo_client_close(client);
      skip();
    }
    expect_ok(status);
    static float result[N];
    read_floats(y, result, N);
    uint32_t done = blocks[round] * BLOCK;
    for (uint32_t i = 0; i < N; ++i) {
      float expected = i < done ? 3.0f : 1.0f;
      if (result[i] != expected) {
        fail_msg("round %d (%u blocks): y[%u] = %g, expected %g", round,
                 blocks[round], i, result[i], expected);
      }
    }
  }
  print_message(
      "[%s] dispatch_indirect: grids of %u, %u and %u blocks read "
      "from the buffer on the GPU\n",
      daemon_state.completion, blocks[0], blocks[1], blocks[2]);
  halo_command_buffer_release(command_buffer);
  halo_client_close(client);
}

//===----------------------------------------------------------------------===//
// A dispatch of a zero grid
//===----------------------------------------------------------------------===//

// A direct dispatch with a 0 in its grid does nothing (halod leaves it out
// of the recording: a kernel node with a zero grid is a CUDA error), while
// a sibling with other constants runs, as a graph and replayed; a recording
// of nothing else still executes and signals.
static void test_zero_grid_dispatch_is_a_noop(void **state) {
  (void)state;
  halo_client_t *client = connect_client();
  halo_executable_t *executable = load_kernels(client);
  halo_queue_t *queue = NULL;
  expect_ok(halo_queue_create(client, 0, 0, &queue));
  halo_semaphore_t *semaphore = NULL;
  expect_ok(halo_semaphore_create(client, 0, 0, &semaphore));
  uint64_t value = 0;
  halo_buffer_t *x = new_buffer(client, N * sizeof(float));
  halo_buffer_t *y = new_buffer(client, N * sizeof(float));
  fill_floats(x, 2.0f);
  halo_binding_t binding = {y, 0, HALO_WHOLE_BUFFER};
  float skipped_a = 5.0f, a = 1.0f;
  uint32_t n = N;
  // x direct: its address is laid out at prepare, where the arguments of a
  // dispatch left out must not land on it.
  halo_dispatch_arg_t args[4] = {
      buffer_arg(halo_buffer_ref(x, 0, HALO_WHOLE_BUFFER)),
      buffer_arg(halo_binding_ref(0, 0, HALO_WHOLE_BUFFER)),
      constant_arg(&skipped_a, sizeof(skipped_a)),
      constant_arg(&n, sizeof(n)),
  };
  halo_dispatch_params_t dispatch = {.executable = executable,
                                     .entry = "axpy",
                                     .block = {BLOCK, 1, 1},
                                     .args = args,
                                     .arg_count = 4};
  const uint32_t flags[2] = {HALO_COMMAND_BUFFER_REUSABLE,
                             HALO_COMMAND_BUFFER_ONE_SHOT};
  for (int round = 0; round < 2; ++round) {
    const char *how = round == 0 ? "graph" : "one-shot replay";
    // no-op (a = 5) | barrier | y = 1 * x + y | no-op
    halo_command_buffer_t *command_buffer = NULL;
    expect_ok(
        halo_command_buffer_begin(client, 0, flags[round], 1, &command_buffer));
    dispatch.grid[0] = N / BLOCK;
    dispatch.grid[1] = 0;
    dispatch.grid[2] = 1;
    args[2] = constant_arg(&skipped_a, sizeof(skipped_a));
    expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
    expect_ok(halo_command_buffer_barrier(command_buffer));
    dispatch.grid[1] = 1;
    args[2] = constant_arg(&a, sizeof(a));
    expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
    dispatch.grid[0] = 0;
    args[2] = constant_arg(&skipped_a, sizeof(skipped_a));
    expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
    expect_ok(halo_command_buffer_end(command_buffer));
    fill_floats(y, 1.0f);
    expect_ok(execute_and_wait(queue, command_buffer, &binding, 1, semaphore,
                               ++value));
    static float result[N];
    read_floats(y, result, N);
    for (uint32_t i = 0; i < N; ++i) {
      if (result[i] != 3.0f) {
        fail_msg("%s: y[%u] = %g, expected 3", how, i, result[i]);
      }
    }
    halo_command_buffer_release(command_buffer);

    // Nothing but a no-op.
    expect_ok(
        halo_command_buffer_begin(client, 0, flags[round], 1, &command_buffer));
    expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
    expect_ok(halo_command_buffer_end(command_buffer));
    expect_ok(execute_and_wait(queue, command_buffer, &binding, 1, semaphore,
                               ++value));
    read_floats(y, result, N);
    for (uint32_t i = 0; i < N; ++i) {
      if (result[i] != 3.0f) {
        fail_msg("%s, only a no-op: y[%u] = %g, expected 3", how, i, result[i]);
      }
    }
    halo_command_buffer_release(command_buffer);
  }
  print_message(
      "[%s] dispatches of a zero grid: skipped beside a sibling and "
      "alone, as a graph and replayed\n",
      daemon_state.completion);
  halo_client_close(client);
}

//===----------------------------------------------------------------------===//
// A fault
//===----------------------------------------------------------------------===//

// A child process imports |token|'s semaphore and waits for value 1; it
// reports the wait's status code and when it woke.
typedef struct fault_report_t {
  int32_t code;
  int64_t woke_ns;
  char message[400];
} fault_report_t;

// A fresh process (this test re-executed: nng must not cross a fork of a
// process that used it).
static int fault_waiter(const char *address, int token_fd, int report_fd) {
  halo_token_t token;
  fault_report_t report = {.code = -1};
  if (read(token_fd, &token, sizeof(token)) != (ssize_t)sizeof(token)) {
    return 2;
  }
  halo_client_options_t options = {.address = address,
                                   .request_timeout_ms = 10000};
  halo_client_t *client = NULL;
  halo_semaphore_t *semaphore = NULL;
  halo_status_t status = halo_client_connect(&options, &client);
  if (!status) status = halo_semaphore_import(client, &token, &semaphore);
  char ready = status ? 'x' : 'r';
  if (write(report_fd, &ready, 1) != 1) return 2;
  if (!status) status = halo_semaphore_wait(semaphore, 1, TIMEOUT_NS);
  report.woke_ns = now_ns();
  report.code = halo_status_code(status);
  snprintf(report.message, sizeof(report.message), "%s",
           status ? halo_status_message(status) : "");
  halo_status_free(status);
  if (write(report_fd, &report, sizeof(report)) != (ssize_t)sizeof(report)) {
    return 2;
  }
  // No close: the daemon is gone; exit without talking to it.
  _exit(0);
}

static void test_fault_wakes_waiters_with_device_lost(void **state) {
  (void)state;
  int token_pipe[2], report_pipe[2];
  assert_int_equal(pipe(token_pipe), 0);
  assert_int_equal(pipe(report_pipe), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    close(token_pipe[1]);
    close(report_pipe[0]);
    char token_fd[16], report_fd[16];
    snprintf(token_fd, sizeof(token_fd), "%d", token_pipe[0]);
    snprintf(report_fd, sizeof(report_fd), "%d", report_pipe[1]);
    execl("/proc/self/exe", "cuda_execute_test", "--fault-waiter",
          daemon_state.listen, token_fd, report_fd, (char *)NULL);
    _exit(127);
  }
  close(token_pipe[0]);
  close(report_pipe[1]);
  halo_client_t *client = connect_client();
  halo_executable_t *executable = load_kernels(client);
  halo_queue_t *queue = NULL;
  expect_ok(halo_queue_create(client, 0, 0, &queue));
  halo_semaphore_t *semaphore = NULL;
  expect_ok(halo_semaphore_create(client, 0, HALO_OBJECT_FLAG_EXPORTABLE,
                                  &semaphore));
  halo_token_t token;
  expect_ok(halo_semaphore_export(semaphore, &token));
  assert_int_equal(write(token_pipe[1], &token, sizeof(token)),
                   (ssize_t)sizeof(token));
  char ready = 0;
  assert_int_equal(read(report_pipe[0], &ready, 1), 1);
  assert_int_equal(ready, 'r');
  usleep(50000);  // the child is asleep in its wait by now

  uint64_t address = 0x10;  // nothing is mapped there
  halo_dispatch_arg_t args[1] = {constant_arg(&address, sizeof(address))};
  halo_dispatch_params_t dispatch = {.executable = executable,
                                     .entry = "fault",
                                     .grid = {1, 1, 1},
                                     .block = {1, 1, 1},
                                     .args = args,
                                     .arg_count = 1};
  halo_command_buffer_t *command_buffer = NULL;
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_ONE_SHOT,
                                      0, &command_buffer));
  expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
  expect_ok(halo_command_buffer_end(command_buffer));
  halo_semaphore_value_t signal = {semaphore, 1};
  int64_t submitted = now_ns();
  expect_ok(
      halo_queue_execute(queue, command_buffer, NULL, 0, NULL, 0, &signal, 1));
  halo_status_t own = halo_semaphore_wait(semaphore, 1, TIMEOUT_NS);
  int64_t own_woke = now_ns();
  fault_report_t report;
  assert_int_equal(read(report_pipe[0], &report, sizeof(report)),
                   (ssize_t)sizeof(report));
  int child_status = 0;
  waitpid(child, &child_status, 0);
  double child_ms = (double)(report.woke_ns - submitted) / 1e6;
  print_message(
      "[%s] fault: this client woke after %.1f ms with %s (%s); "
      "the other process after %.1f ms with %s (%s)\n",
      daemon_state.completion, (double)(own_woke - submitted) / 1e6,
      halo_status_code_name(halo_status_code(own)),
      own ? halo_status_message(own) : "", child_ms,
      halo_status_code_name(report.code), report.message);
  assert_int_equal(halo_status_code(own), HALO_STATUS_DEVICE_LOST);
  // halod names the error, the device, the trust domain's worker and the
  // submission in flight.
  assert_non_null(
      strstr(halo_status_message(own), "CUDA_ERROR_ILLEGAL_ADDRESS"));
  assert_non_null(strstr(halo_status_message(own), "device 0"));
  assert_non_null(strstr(halo_status_message(own), "worker"));
  assert_non_null(strstr(halo_status_message(own), "in flight"));
  halo_status_free(own);
  // The other process shares the trust domain (same uid), so its context.
  assert_int_equal(report.code, HALO_STATUS_DEVICE_LOST);
  assert_non_null(strstr(report.message, "CUDA_ERROR_ILLEGAL_ADDRESS"));
  // Woken by the same failure as this client, not by its own 20 s timeout:
  // within 1 s of this client's wake. (From the submission, the worker's
  // death and its reaping come first: seconds under TSan on a loaded
  // machine, which says nothing about the waiters.)
  assert_true(report.woke_ns - own_woke < 1000 * 1000000ll);
  assert_true(child_ms < 10000.0);
  // halod itself stays: only the domain's worker died.
  assert_int_equal(daemon_wait(300), -1);
  // This session is lost: later calls say so; a new one works.
  halo_status_t status = halo_client_ping(client);
  assert_int_equal(halo_status_code(status), HALO_STATUS_SESSION_LOST);
  assert_non_null(strstr(halo_status_message(status), "reconnect"));
  halo_status_free(status);
  halo_client_close(client);
  client = connect_client();
  expect_ok(halo_client_ping(client));
  halo_semaphore_t *fresh = NULL;
  expect_ok(halo_semaphore_create(client, 0, 0, &fresh));
  halo_semaphore_release(fresh);
  halo_client_close(client);
}

//===----------------------------------------------------------------------===//
// The device worker's reports
//===----------------------------------------------------------------------===//

static uint32_t slot_epoch(const halo_semaphore_t *semaphore) {
  return atomic_load_explicit(&halo_semaphore_slot(semaphore)->epoch,
                              memory_order_acquire);
}

// An execution the worker takes from the ring wakes its semaphore's
// sleepers once, when the worker sees the device's store land. halod's
// handling of the report (up to the linger later) wakes nobody again: a
// second wake found clients asleep for their next value and woke them for
// nothing (under 64 tenants, one per report). The slot's epoch, the futex
// word sleepers wait on, moves once per wake.
static void test_reports_wake_nobody_again(void **state) {
  (void)state;
  enum { WARM_UP = 2, STEADY = 24 };
  // Past the linger: halod has handled every report made before.
  const useconds_t settle_us = (useconds_t)(atoll(LINGER_US) + 500000);
  halo_client_t *client = connect_client();
  halo_buffer_t *buffer = NULL;
  expect_ok(halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &buffer));
  halo_command_buffer_t *cb = NULL;
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                      1, &cb));
  uint32_t pattern = 0x5a5a5a5au;
  expect_ok(halo_command_buffer_fill(cb, halo_binding_ref(0, 0, 16), &pattern,
                                     sizeof(pattern)));
  expect_ok(halo_command_buffer_end(cb));
  halo_semaphore_t *done = NULL;
  expect_ok(halo_semaphore_create(client, 0, 0, &done));
  halo_binding_t binding = {buffer, 0, HALO_WHOLE_BUFFER};
  uint64_t step = 0;
  uint32_t before = 0;
  // The first goes through halod, which grants the worker what it used;
  // the steady ones the worker takes.
  for (int i = 0; i < WARM_UP + STEADY; ++i) {
    if (i == WARM_UP) {
      usleep(settle_us);
      before = slot_epoch(done);
    }
    halo_semaphore_value_t signal = {done, ++step};
    expect_ok(halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, &signal, 1));
    expect_ok(halo_semaphore_wait(done, step, TIMEOUT_NS));
  }
  usleep(settle_us);
  print_message("[%s] %d executions moved the epoch %u times\n",
                daemon_state.completion, STEADY, slot_epoch(done) - before);
  assert_int_equal(slot_epoch(done) - before, STEADY);
  halo_semaphore_release(done);
  halo_command_buffer_release(cb);
  halo_buffer_release(buffer);
  halo_client_close(client);
}

// A signal halod makes from the host goes above every pending value, so a
// GPU signal still in flight may be lower; its store, a plain write into
// the slot, lands after it. The higher value stands: halod restores it when
// the execution's completion reaches it (up to the worker's report linger
// later), so a waiter for it wakes instead of sleeping until its timeout on
// a value that went back. Twice: a client's host signal, then an alloca's.
// The executions come from the client's ring (a first one through halod
// grants the worker both semaphores) and signal the second semaphore after
// the first, so that the first's store has landed once the second's has;
// their kernel runs 1 s, so the host's signal comes first.
static void test_host_signal_outlasts_gpu_store(void **state) {
  (void)state;
  halo_client_t *client = connect_client();
  halo_executable_t *executable = load_kernels(client);
  halo_queue_t *queue = NULL;
  expect_ok(halo_queue_create(client, 0, 0, &queue));
  halo_buffer_t *x = new_buffer(client, N * sizeof(float));
  halo_buffer_t *y = new_buffer(client, N * sizeof(float));
  halo_command_buffer_t *slow =
      record_slow_scale(client, executable, 1000000000ull);
  halo_semaphore_t *signaled = NULL, *done = NULL;
  expect_ok(halo_semaphore_create(client, 0, 0, &signaled));
  expect_ok(halo_semaphore_create(client, 0, 0, &done));
  halo_binding_t bindings[2] = {{x, 0, HALO_WHOLE_BUFFER},
                                {y, 0, HALO_WHOLE_BUFFER}};
  // Per round: the value the GPU stores, the one halod stores meanwhile.
  const uint64_t gpu[3] = {1, 2, 11}, host[3] = {0, 10, 20};
  for (int round = 0; round < 3; ++round) {
    halo_semaphore_value_t signals[2] = {{signaled, gpu[round]},
                                         {done, (uint64_t)round + 1}};
    expect_ok(
        halo_queue_execute(queue, slow, bindings, 2, NULL, 0, signals, 2));
    if (round == 0) {  // through halod: the grants
      expect_ok(halo_semaphore_wait(done, 1, TIMEOUT_NS));
      continue;
    }
    halo_buffer_t *scratch = NULL;
    if (round == 1) {
      expect_ok(halo_semaphore_signal(signaled, host[round]));
    } else {
      halo_semaphore_value_t alloca_signal = {signaled, host[round]};
      expect_ok(halo_queue_alloca(queue, NULL, 0, &alloca_signal, 1,
                                  HALO_MEMORY_DEVICE, 256, &scratch));
    }
    uint64_t value = 0;
    expect_ok(halo_semaphore_query(signaled, &value));
    assert_int_equal(value, host[round]);  // the kernel still runs
    expect_ok(halo_semaphore_wait(done, (uint64_t)round + 1, TIMEOUT_NS));
    int64_t start = now_ns();
    halo_status_t status =
        halo_semaphore_wait(signaled, host[round], 5000000000ll);
    double ms = (double)(now_ns() - start) / 1e6;
    print_message("[%s] %s: the value stood again after %.1f ms (%s)\n",
                  daemon_state.completion,
                  round == 1 ? "a host signal" : "an alloca's signal", ms,
                  status ? halo_status_message(status) : "OK");
    expect_ok(status);
    expect_ok(halo_semaphore_query(signaled, &value));
    assert_int_equal(value, host[round]);
    if (scratch) halo_buffer_release(scratch);
  }
  halo_client_close(client);
}

// A worker that dies with ring executions in flight fails their signals
// with the loss, also a semaphore whose creator released it and that
// another client of the domain imported and signals (the sessions' loss
// fails only the semaphores each session created): its waiter wakes with
// DEVICE_LOST, it does not wait out its timeout. Both executions come from
// the client's ring (REUSABLE recordings, granted to the worker by a
// first execution each): a 300 ms kernel that signals |own| semaphores of
// the client's and then the imported one, and, on another queue, an
// indirect dispatch of the fault kernel (harmless while its grid is
// empty). With 4 own semaphores the imported one is the fifth signal, one
// more than a worker's record of an execution in flight holds: halod runs
// that execution itself, and its loss fails every signal all the same.
static void ring_loss_fails_released_semaphore(uint32_t own) {
  halo_client_t *creator = connect_client();
  halo_client_t *client = connect_client();
  halo_semaphore_t *created = NULL;
  expect_ok(
      halo_semaphore_create(creator, 0, HALO_OBJECT_FLAG_EXPORTABLE, &created));
  halo_token_t token;
  expect_ok(halo_semaphore_export(created, &token));
  halo_semaphore_value_t signals[5] = {{0}};
  assert_true(own < 5);
  for (uint32_t i = 0; i < own; ++i) {
    expect_ok(halo_semaphore_create(client, 0, 0, &signals[i].semaphore));
  }
  halo_semaphore_t *imported = NULL;
  expect_ok(halo_semaphore_import(client, &token, &imported));
  signals[own].semaphore = imported;
  halo_semaphore_release(created);  // no session created it any more
  halo_semaphore_t *faulted = NULL;
  expect_ok(halo_semaphore_create(client, 0, 0, &faulted));
  halo_executable_t *executable = load_kernels(client);
  halo_queue_t *fault_queue = NULL, *slow_queue = NULL;
  expect_ok(halo_queue_create(client, 0, 0, &fault_queue));
  expect_ok(halo_queue_create(client, 0, 0, &slow_queue));
  halo_buffer_t *grid = new_buffer(client, 16);
  halo_buffer_t *x = new_buffer(client, N * sizeof(float));
  halo_buffer_t *y = new_buffer(client, N * sizeof(float));
  uint64_t address = 0x10;  // nothing is mapped there
  halo_dispatch_arg_t fault_args[1] = {constant_arg(&address, sizeof(address))};
  halo_dispatch_params_t fault = {.executable = executable,
                                  .entry = "fault",
                                  .block = {1, 1, 1},
                                  .args = fault_args,
                                  .arg_count = 1};
  halo_command_buffer_t *faulting = NULL;
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                      1, &faulting));
  expect_ok(halo_command_buffer_dispatch_indirect(faulting, &fault,
                                                  halo_binding_ref(0, 0, 12)));
  expect_ok(halo_command_buffer_end(faulting));
  halo_command_buffer_t *slow =
      record_slow_scale(client, executable, 300000000ull);
  halo_binding_t grid_binding[1] = {{grid, 0, HALO_WHOLE_BUFFER}};
  halo_binding_t slow_bindings[2] = {{x, 0, HALO_WHOLE_BUFFER},
                                     {y, 0, HALO_WHOLE_BUFFER}};
  uint32_t counts[4] = {0, 0, 0, 0};
  expect_ok(halo_buffer_write(grid, 0, counts, sizeof(counts)));
  // First executions: through halod, which grants the worker what they
  // used; the next ones go from the ring to the worker.
  expect_ok(
      execute_and_wait(fault_queue, faulting, grid_binding, 1, faulted, 1));
  for (uint32_t i = 0; i <= own; ++i) signals[i].value = 1;
  expect_ok(halo_queue_execute(slow_queue, slow, slow_bindings, 2, NULL, 0,
                               signals, own + 1));
  expect_ok(halo_semaphore_wait(imported, 1, TIMEOUT_NS));
  counts[0] = counts[1] = counts[2] = 1;
  expect_ok(halo_buffer_write(grid, 0, counts, sizeof(counts)));
  for (uint32_t i = 0; i <= own; ++i) signals[i].value = 2;
  int64_t start = now_ns();
  expect_ok(halo_queue_execute(slow_queue, slow, slow_bindings, 2, NULL, 0,
                               signals, own + 1));
  // The fault may end the session before its own submission's verdict.
  halo_semaphore_value_t fault_signal = {faulted, 2};
  halo_status_free(halo_queue_execute(fault_queue, faulting, grid_binding, 1,
                                      NULL, 0, &fault_signal, 1));
  halo_status_t lost = halo_semaphore_wait(imported, 2, TIMEOUT_NS);
  double ms = (double)(now_ns() - start) / 1e6;
  print_message(
      "[%s] the released semaphore's waiter (signal %u of %u) woke after "
      "%.1f ms with %s (%s)\n",
      daemon_state.completion, own + 1, own + 1, ms,
      halo_status_code_name(halo_status_code(lost)),
      lost ? halo_status_message(lost) : "");
  assert_int_equal(halo_status_code(lost), HALO_STATUS_DEVICE_LOST);
  assert_non_null(strstr(halo_status_message(lost), "in flight"));
  assert_non_null(strstr(halo_status_message(lost), "worker"));
  halo_status_free(lost);
  halo_client_close(creator);
  halo_client_close(client);
}

static void test_ring_loss_fails_released_semaphore(void **state) {
  (void)state;
  ring_loss_fails_released_semaphore(0);
}

static void test_ring_loss_fails_fifth_signal(void **state) {
  (void)state;
  ring_loss_fails_released_semaphore(4);
}

//===----------------------------------------------------------------------===//
// cuda-graph-bytes
//===----------------------------------------------------------------------===//

// The graph memory bound (halod --cuda-graph-bytes 8M): a recording of 96
// dispatches with no barrier (about 11 MiB an instance by halo's
// estimate) fails RESOURCE_EXHAUSTED naming the bound; one of 24 (about 3
// MiB: two instances fit) runs 8 executions at once on 4 queues, right,
// those past its two instances waiting for one.
#define GRAPH_BYTES_BOUND "8M"

static int setup_graph_bytes(void **state) {
  (void)state;
  return daemon_start_bounded("thread", GRAPH_BYTES_BOUND);
}

static halo_command_buffer_t *record_parallel(halo_client_t *client,
                                              halo_executable_t *executable,
                                              uint32_t dispatches) {
  static const float a = 2.0f;
  static const uint32_t n = N;
  static const uint64_t ns = 200000;  // 0.2 ms: executions overlap
  halo_dispatch_arg_t args[5];
  halo_dispatch_params_t dispatch =
      slow_scale_dispatch(executable, args, &a, &n, &ns);
  halo_command_buffer_t *command_buffer = NULL;
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                      2, &command_buffer));
  for (uint32_t i = 0; i < dispatches; ++i) {
    expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
  }
  expect_ok(halo_command_buffer_end(command_buffer));
  return command_buffer;
}

static void test_graph_bytes_bound(void **state) {
  (void)state;
  halo_client_t *client = connect_client();
  halo_executable_t *executable = load_kernels(client);
  enum { QUEUES = 4, EXECUTIONS = 8 };
  halo_queue_t *queues[QUEUES];
  halo_semaphore_t *semaphores[QUEUES];
  for (int q = 0; q < QUEUES; ++q) {
    expect_ok(halo_queue_create(client, 0, 0, &queues[q]));
    expect_ok(halo_semaphore_create(client, 0, 0, &semaphores[q]));
  }
  halo_buffer_t *x = new_buffer(client, N * sizeof(float));
  static float values[N];
  for (uint32_t i = 0; i < N; ++i) values[i] = (float)i;
  write_floats(x, values, N);
  halo_buffer_t *y[EXECUTIONS];
  for (int e = 0; e < EXECUTIONS; ++e) {
    y[e] = new_buffer(client, N * sizeof(float));
    fill_floats(y[e], -1.0f);
  }

  halo_command_buffer_t *wide = record_parallel(client, executable, 96);
  halo_binding_t bindings[2] = {{x, 0, HALO_WHOLE_BUFFER},
                                {y[0], 0, HALO_WHOLE_BUFFER}};
  halo_status_t status =
      execute_and_wait(queues[0], wide, bindings, 2, semaphores[0], 1);
  if (halo_status_code(status) != HALO_STATUS_RESOURCE_EXHAUSTED ||
      !strstr(halo_status_message(status), "larger than cuda-graph-bytes")) {
    fail_msg("a recording past the bound: %s: %s",
             halo_status_code_name(halo_status_code(status)),
             status ? halo_status_message(status) : "(ok)");
  }
  print_message("[%s] 96 dispatches beside each other, bound %s: %s\n",
                daemon_state.completion, GRAPH_BYTES_BOUND,
                halo_status_message(status));
  halo_status_free(status);
  halo_command_buffer_release(wide);

  // The failed semaphore stays failed: fresh ones for the rest.
  halo_semaphore_release(semaphores[0]);
  expect_ok(halo_semaphore_create(client, 0, 0, &semaphores[0]));
  halo_command_buffer_t *narrow = record_parallel(client, executable, 24);
  uint64_t values_at[QUEUES] = {0};
  for (int e = 0; e < EXECUTIONS; ++e) {
    halo_binding_t table[2] = {{x, 0, HALO_WHOLE_BUFFER},
                               {y[e], 0, HALO_WHOLE_BUFFER}};
    halo_semaphore_value_t signal = {semaphores[e % QUEUES],
                                     ++values_at[e % QUEUES]};
    expect_ok(halo_queue_execute(queues[e % QUEUES], narrow, table, 2, NULL, 0,
                                 &signal, 1));
  }
  for (int q = 0; q < QUEUES; ++q) {
    expect_ok(halo_semaphore_wait(semaphores[q], values_at[q], TIMEOUT_NS));
  }
  static float result[N];
  for (int e = 0; e < EXECUTIONS; ++e) {
    read_floats(y[e], result, N);
    for (uint32_t i = 0; i < N; ++i) {
      if (result[i] != 2.0f * (float)i) {
        fail_msg("execution %d: y[%u] = %g, expected %g", e, i, result[i],
                 2.0f * (float)i);
      }
    }
  }
  print_message(
      "[%s] 24 dispatches beside each other, %d executions on %d "
      "queues within the bound: right\n",
      daemon_state.completion, EXECUTIONS, QUEUES);
  halo_command_buffer_release(narrow);
  for (int e = 0; e < EXECUTIONS; ++e) halo_buffer_release(y[e]);
  halo_buffer_release(x);
  for (int q = 0; q < QUEUES; ++q) {
    halo_semaphore_release(semaphores[q]);
    halo_queue_release(queues[q]);
  }
  halo_executable_release(executable);
  halo_client_close(client);
}

// The value of the sample that starts with |prefix| ("halo_x{...} ") in
// metrics |text|; fails the test if there is none.
static uint64_t metric_value(const char *text, const char *prefix) {
  const char *line = NULL;
  for (const char *at = strstr(text, prefix); at && !line;
       at = strstr(at + 1, prefix)) {
    if (at == text || at[-1] == '\n') line = at;
  }
  if (!line) fail_msg("no sample %s in:\n%s", prefix, text);
  return strtoull(line + strlen(prefix), NULL, 10);
}

// Runs `haloctl --admin ADDRESS ARGUMENTS` and returns its output (the
// caller frees it); fails the test unless it exits 0.
static char *run_haloctl(const char *arguments) {
  char command[512];
  snprintf(command, sizeof(command), "%s --admin %s %s", HALO_TEST_HALOCTL,
           daemon_state.admin, arguments);
  FILE *pipe = popen(command, "r");
  if (!pipe) fail_msg("popen %s: %s", command, strerror(errno));
  size_t capacity = 1 << 16, length = 0;
  char *out = calloc(1, capacity);
  assert_non_null(out);
  size_t n;
  while ((n = fread(out + length, 1, capacity - 1 - length, pipe)) > 0) {
    length += n;
  }
  int status = pclose(pipe);
  if (status != 0) fail_msg("%s: status 0x%x:\n%s", command, status, out);
  return out;
}

// What an operator sees of the bound: after executions, the worker's usage
// report (at most about a second later) shows in halod's admin reply of
// `haloctl workers`, in haloctl's table and JSON, and in the metrics: the
// graph instances' bytes and count, non-zero, and the bound of
// --cuda-graph-bytes 8M.
#define GRAPH_BYTES_BOUND_VALUE 8388608ull

static void test_graph_usage_shown(void **state) {
  (void)state;
  halo_client_t *client = connect_client();
  halo_executable_t *executable = load_kernels(client);
  halo_queue_t *queue = NULL;
  halo_semaphore_t *semaphore = NULL;
  expect_ok(halo_queue_create(client, 0, 0, &queue));
  expect_ok(halo_semaphore_create(client, 0, 0, &semaphore));
  halo_buffer_t *x = new_buffer(client, N * sizeof(float));
  halo_buffer_t *y = new_buffer(client, N * sizeof(float));
  fill_floats(x, 1.0f);
  halo_command_buffer_t *narrow = record_parallel(client, executable, 24);
  halo_binding_t bindings[2] = {{x, 0, HALO_WHOLE_BUFFER},
                                {y, 0, HALO_WHOLE_BUFFER}};
  for (uint64_t value = 1; value <= 2; ++value) {
    expect_ok(execute_and_wait(queue, narrow, bindings, 2, semaphore, value));
  }

  char domain[32];
  snprintf(domain, sizeof(domain), "uid:%d", (int)getuid());
  halo_admin_t *admin = NULL;
  expect_ok(halo_admin_connect(daemon_state.admin, 5000, &admin));
  uint64_t bytes = 0, limit = 0;
  uint32_t instances = 0;
  int64_t deadline = now_ns() + 10ll * 1000000000ll;
  while (instances == 0) {
    halo_wire_response_t *response = NULL;
    expect_ok(halo_admin_workers(admin, &response));
    const Halo__Wire__AdminWorkersReply *reply = response->admin_workers;
    for (size_t i = 0; i < reply->n_workers; ++i) {
      const Halo__Wire__WorkerInfo *w = reply->workers[i];
      if (w->device != 0 || strcmp(w->domain, domain) != 0) continue;
      if (w->has_graph_bytes && w->has_graph_bytes_limit &&
          w->has_graph_instances && w->graph_instances > 0) {
        bytes = w->graph_bytes;
        limit = w->graph_bytes_limit;
        instances = w->graph_instances;
      }
    }
    halo__wire__response__free_unpacked(response, NULL);
    if (instances == 0 && now_ns() > deadline) {
      fail_msg("no usage report with graph instances from the worker of %s",
               domain);
    }
    if (instances == 0) usleep(50000);
  }
  assert_int_equal(limit, GRAPH_BYTES_BOUND_VALUE);
  assert_true(bytes > 0 && bytes <= limit);
  print_message("[%s] worker of %s: %llu of %llu graph bytes in %u instances\n",
                daemon_state.completion, domain, (unsigned long long)bytes,
                (unsigned long long)limit, instances);

  // The metrics: the same figures per device (the only worker's).
  halo_wire_response_t *response = NULL;
  expect_ok(halo_admin_metrics(admin, &response));
  const char *text = response->admin_metrics->text;
  assert_int_equal(
      metric_value(text, "halo_worker_graph_bytes_limit{device=\"0\"} "),
      GRAPH_BYTES_BOUND_VALUE);
  uint64_t metric_bytes =
      metric_value(text, "halo_worker_graph_bytes{device=\"0\"} ");
  assert_true(metric_bytes > 0 && metric_bytes <= GRAPH_BYTES_BOUND_VALUE);
  assert_int_equal(
      metric_value(text, "halo_worker_graph_bytes_max{device=\"0\"} "),
      metric_bytes);
  assert_true(metric_value(text, "halo_worker_graph_instances{device=\"0\"} ") >
              0);
  assert_null(strstr(text, "halo_worker_graph_bytes{device=\"0\",domain"));
  halo__wire__response__free_unpacked(response, NULL);
  halo_admin_close(admin);

  // haloctl: JSON numbers in the domain's worker's object, and the
  // table's used/bound column.
  char *out = run_haloctl("--json workers");
  char key[64];
  snprintf(key, sizeof(key), "\"domain\":\"%s\",", domain);
  const char *object = strstr(out, key);
  const char *end = object ? strchr(object, '}') : NULL;
  if (!end)
    fail_msg("haloctl --json workers: no worker of %s: %s", domain, out);
  size_t length = (size_t)(end - object);
  char *worker = strndup(object, length);
  assert_non_null(worker);
  if (!strstr(worker, "\"graph_bytes_limit\":8388608,") ||
      !strstr(worker, "\"graph_instances\":") ||
      strstr(worker, "\"graph_instances\":0") ||
      strstr(worker, "\"graph_bytes\":0,") || strstr(worker, "null")) {
    fail_msg("haloctl --json workers: %s", out);
  }
  free(worker);
  free(out);
  out = run_haloctl("workers");
  if (!strstr(out, "GRAPH MEMORY") || !strstr(out, "/8.0 MiB (")) {
    fail_msg("haloctl workers:\n%s", out);
  }
  print_message("%s", out);
  free(out);

  halo_command_buffer_release(narrow);
  halo_buffer_release(y);
  halo_buffer_release(x);
  halo_semaphore_release(semaphore);
  halo_queue_release(queue);
  halo_executable_release(executable);
  halo_client_close(client);
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "--fault-waiter") == 0) {
    return fault_waiter(argv[2], atoi(argv[3]), atoi(argv[4]));
  }
  char reason[256];
  if (!halo_hal_cuda_probe(reason, sizeof(reason))) {
    printf("SKIP: the CUDA driver is unavailable: %s\n", reason);
    return 77;
  }
  const char *fake = getenv("HALO_TEST_FAKE_CUDA");
  halo_fake_cuda_image(fake_image, 0);
  if (!(fake && strcmp(fake, "1") == 0) &&
      halo_sandbox_abi(reason, sizeof(reason)) == 0) {
    halo_status_t status = halo_test_nvrtc_ptx(kKernels, sizeof(kKernels) - 1,
                                               &kernels_ptx, &kernels_ptx_size);
    if (status) {
      printf("FAIL: compiling the kernels to PTX: %s\n",
             halo_status_message(status));
      halo_status_free(status);
      return 1;
    }
    printf(
        "no Landlock here (%s): halod refuses CUDA C, the kernels load "
        "as PTX (%zu bytes)\n",
        reason, kernels_ptx_size);
  }
  const struct CMUnitTest work[] = {
      cmocka_unit_test(test_parameters_and_cache_hit),
      cmocka_unit_test(test_two_clients_share_a_recording),
      cmocka_unit_test(test_binding_strategies_match_direct),
      cmocka_unit_test(test_barriers_join_two_branches),
      cmocka_unit_test(test_dispatch_indirect),
      cmocka_unit_test(test_zero_grid_dispatch_is_a_noop),
      cmocka_unit_test(test_gpu_to_gpu_wait),
      cmocka_unit_test(test_reports_wake_nobody_again),
      cmocka_unit_test(test_host_signal_outlasts_gpu_store),
  };
  const struct CMUnitTest bounded[] = {
      cmocka_unit_test(test_graph_bytes_bound),
      cmocka_unit_test(test_graph_usage_shown),
  };
  const struct CMUnitTest fault[] = {
      cmocka_unit_test(test_fault_wakes_waiters_with_device_lost),
      cmocka_unit_test(test_ring_loss_fails_released_semaphore),
      cmocka_unit_test(test_ring_loss_fails_fifth_signal),
  };
  int failed = 0;
  failed += _cmocka_run_group_tests("cuda_execute (completion thread)", work,
                                    sizeof(work) / sizeof(work[0]),
                                    setup_thread, teardown);
  failed += _cmocka_run_group_tests("cuda_execute (cuLaunchHostFunc)", work,
                                    sizeof(work) / sizeof(work[0]),
                                    setup_host_func, teardown);
  failed += _cmocka_run_group_tests(
      "cuda_graph_bytes (completion thread)", bounded,
      sizeof(bounded) / sizeof(bounded[0]), setup_graph_bytes, teardown);
  failed += _cmocka_run_group_tests("cuda_fault (completion thread)", fault,
                                    sizeof(fault) / sizeof(fault[0]),
                                    setup_thread, teardown);
  failed += _cmocka_run_group_tests("cuda_fault (cuLaunchHostFunc)", fault,
                                    sizeof(fault) / sizeof(fault[0]),
                                    setup_host_func, teardown);
  free(kernels_ptx);
  return failed ? 1 : 0;
}
