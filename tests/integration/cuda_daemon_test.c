// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halod on the CUDA driver (label cuda): device information over the wire,
// CUDA source compiled in the daemon with the whole log back on failure,
// dispatch arguments checked against the kernel's real parameters at
// record time, two clients sharing one load, and (once the CUDA queues
// exist) a module load and an admin status answered while another client's
// kernel runs for 3 s. Exits 77 (skipped) without a GPU. Where the host
// has no Landlock (integration.cuda_daemon_without_landlock_test runs it
// so), halod refuses CUDA C naming Landlock, and the kernels load as PTX.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/admin.h"
#include "common/sandbox.h"
#include "hal/device.h"
#include "hal/registry.h"
#include "halo/halo.h"
#include "tests/support/landlock_refusal.h"
#include "tests/support/nvrtc_ptx.h"

static struct {
  pid_t pid;
  char dir[64];
  char listen[160];
  char admin[160];
  char *source;
  size_t source_size;
  // Where this host has no Landlock, halod refuses CUDA C: the kernels
  // compiled to PTX here, loaded instead. NULL where it has.
  char *ptx;
  size_t ptx_size;
} daemon_state;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void expect_ok_at(halo_status_t status, const char *what) {
  if (status) {
    fail_msg("%s: %s: %s", what,
             halo_status_code_name(halo_status_code(status)),
             halo_status_message(status));
  }
}
#define expect_ok(expr) expect_ok_at((expr), #expr)

static double admin_status_ms(void) {
  double start = now_ms();
  halo_admin_t *admin = NULL;
  expect_ok(halo_admin_connect(daemon_state.admin, 5000, &admin));
  halo_wire_response_t *response = NULL;
  expect_ok(halo_admin_status(admin, &response));
  halo__wire__response__free_unpacked(response, NULL);
  halo_admin_close(admin);
  return now_ms() - start;
}

static bool admin_answers(void) {
  halo_admin_t *admin = NULL;
  halo_status_t status = halo_admin_connect(daemon_state.admin, 500, &admin);
  if (status) {
    halo_status_free(status);
    return false;
  }
  halo_wire_response_t *response = NULL;
  status = halo_admin_status(admin, &response);
  bool ok = !status;
  halo_status_free(status);
  if (response) halo__wire__response__free_unpacked(response, NULL);
  halo_admin_close(admin);
  return ok;
}

static int group_setup(void **state) {
  (void)state;
  snprintf(daemon_state.dir, sizeof(daemon_state.dir),
           "/tmp/halo-cuda-daemon-XXXXXX");
  assert_non_null(mkdtemp(daemon_state.dir));
  snprintf(daemon_state.listen, sizeof(daemon_state.listen),
           "ipc://%s/halo.sock", daemon_state.dir);
  snprintf(daemon_state.admin, sizeof(daemon_state.admin),
           "ipc://%s/admin.sock", daemon_state.dir);
  char cache[128];
  snprintf(cache, sizeof(cache), "%s/cache", daemon_state.dir);
  FILE *file = fopen(HALO_TEST_CUDA_SOURCE, "rb");
  assert_non_null(file);
  fseek(file, 0, SEEK_END);
  daemon_state.source_size = (size_t)ftell(file);
  fseek(file, 0, SEEK_SET);
  daemon_state.source = malloc(daemon_state.source_size + 1);
  assert_int_equal(
      fread(daemon_state.source, 1, daemon_state.source_size, file),
      daemon_state.source_size);
  fclose(file);
  char reason[160];
  if (halo_sandbox_abi(reason, sizeof(reason)) == 0) {
    print_message("no Landlock here (%s): the kernels load as PTX\n", reason);
    expect_ok(halo_test_nvrtc_ptx(daemon_state.source, daemon_state.source_size,
                                  &daemon_state.ptx, &daemon_state.ptx_size));
  }
  daemon_state.pid = fork();
  if (daemon_state.pid == 0) {
    execl(HALO_TEST_HALOD, HALO_TEST_HALOD, "--listen", daemon_state.listen,
          "--admin", daemon_state.admin, "--driver", "cuda",
          "--cache-directory", cache, "--log-level", "debug", (char *)NULL);
    _exit(127);
  }
  double deadline = now_ms() + 30000;
  while (!admin_answers()) {
    int status;
    if (waitpid(daemon_state.pid, &status, WNOHANG) == daemon_state.pid) {
      fail_msg("halod --driver cuda exited during start-up (status 0x%x)",
               status);
    }
    if (now_ms() > deadline) fail_msg("halod did not answer within 30 s");
    usleep(20000);
  }
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  if (daemon_state.pid > 0) {
    kill(daemon_state.pid, SIGTERM);
    int status = 0;
    waitpid(daemon_state.pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  free(daemon_state.source);
  free(daemon_state.ptx);
  char command[128];
  snprintf(command, sizeof(command), "rm -rf %s", daemon_state.dir);
  assert_int_equal(system(command), 0);
  return 0;
}

static halo_client_t *connect_client(void) {
  halo_client_options_t options = {.address = daemon_state.listen,
                                   .client_name = "cuda_daemon_test"};
  halo_client_t *client = NULL;
  expect_ok(halo_client_connect(&options, &client));
  return client;
}

static halo_status_t load_source(halo_client_t *client, const char *source,
                                 size_t size, const char *const *options,
                                 size_t option_count,
                                 halo_executable_t **out_executable) {
  halo_executable_params_t params = {
      .format = HALO_EXECUTABLE_FORMAT_CUDA_SOURCE,
      .data = source,
      .size = size,
      .options = options,
      .option_count = option_count};
  return halo_executable_create(client, 0, &params, out_executable);
}

// Loads the test kernels: as CUDA C, or where halod cannot compile CUDA C
// (no Landlock here) as the PTX compiled from them in group_setup.
// |unique| (or NULL) makes a load that shares no earlier one: a define of
// the CUDA C, a comment in the PTX.
static halo_status_t load_kernels(halo_client_t *client, const char *unique,
                                  halo_executable_t **out_executable) {
  if (!daemon_state.ptx) {
    char define[96];
    snprintf(define, sizeof(define), "-D%s", unique ? unique : "");
    const char *options[] = {define};
    return load_source(client, daemon_state.source, daemon_state.source_size,
                       options, unique ? 1 : 0, out_executable);
  }
  size_t size = daemon_state.ptx_size + (unique ? strlen(unique) : 0) + 8;
  char *text = malloc(size);
  assert_non_null(text);
  snprintf(text, size, "%s%s%s%s", daemon_state.ptx, unique ? "\n// " : "",
           unique ? unique : "", unique ? "\n" : "");
  halo_executable_params_t params = {
      .format = HALO_EXECUTABLE_FORMAT_PTX, .data = text, .size = strlen(text)};
  halo_status_t status =
      halo_executable_create(client, 0, &params, out_executable);
  free(text);
  return status;
}

static void test_device_is_cuda(void **state) {
  (void)state;
  halo_client_t *client = connect_client();
  halo_device_info_t info;
  expect_ok(halo_client_device_info(client, 0, &info));
  print_message("device 0: %s %s, %u SMs\n", info.driver, info.name,
                info.multiprocessor_count);
  assert_string_equal(info.driver, "cuda");
  halo_client_close(client);
}

static void test_compile_log_reaches_the_client(void **state) {
  (void)state;
  halo_client_t *client = connect_client();
  static const char broken[] =
      "extern \"C\" __global__ void f(int *x) { x[0] = undefined_thing; }\n";
  halo_executable_t *executable = NULL;
  halo_status_t status =
      load_source(client, broken, sizeof(broken) - 1, NULL, 0, &executable);
  if (daemon_state.ptx) {
    // No Landlock: the refusal, naming it and why, reaches the client.
    char reason[160];
    halo_sandbox_abi(reason, sizeof(reason));
    halo_test_expect_landlock_refusal(status, reason);
    halo_client_close(client);
    skip();
  }
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "undefined_thing"));
  halo_status_free(status);
  halo_client_close(client);
}

static void test_arguments_checked_at_record_time(void **state) {
  (void)state;
  halo_client_t *client = connect_client();
  halo_executable_t *executable = NULL;
  expect_ok(load_kernels(client, NULL, &executable));
  halo_buffer_t *buffer = NULL;
  expect_ok(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 4096, 0, &buffer));
  uint32_t n = 16;
  uint16_t short_n = 16;
  halo_dispatch_arg_t args[4] = {
      {.kind = HALO_DISPATCH_ARG_BUFFER, .ref = halo_buffer_ref(buffer, 0, 64)},
      {.kind = HALO_DISPATCH_ARG_BUFFER,
       .ref = halo_buffer_ref(buffer, 64, 64)},
      {.kind = HALO_DISPATCH_ARG_BUFFER,
       .ref = halo_buffer_ref(buffer, 128, 64)},
      {.kind = HALO_DISPATCH_ARG_CONSTANT, .data = &n, .size = sizeof(n)},
  };
  halo_dispatch_params_t dispatch = {.executable = executable,
                                     .entry = "halo_test_add",
                                     .grid = {1, 1, 1},
                                     .block = {32, 1, 1},
                                     .args = args,
                                     .arg_count = 3};
  // Too few arguments.
  halo_command_buffer_t *command_buffer = NULL;
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_ONE_SHOT,
                                      0, &command_buffer));
  expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
  halo_status_t status = halo_command_buffer_end(command_buffer);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  print_message("3 arguments: %s\n", halo_status_message(status));
  assert_non_null(strstr(halo_status_message(status), "takes 4 parameters"));
  halo_status_free(status);
  halo_command_buffer_release(command_buffer);
  // A constant of the wrong size.
  args[3].data = &short_n;
  args[3].size = sizeof(short_n);
  dispatch.arg_count = 4;
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_ONE_SHOT,
                                      0, &command_buffer));
  expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
  status = halo_command_buffer_end(command_buffer);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  print_message("2-byte n: %s\n", halo_status_message(status));
  assert_non_null(strstr(halo_status_message(status), "argument 3"));
  halo_status_free(status);
  halo_command_buffer_release(command_buffer);
  // Right: accepted by the checks (the command buffer itself is the CUDA
  // command buffer's business).
  args[3].data = &n;
  args[3].size = sizeof(n);
  expect_ok(halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_ONE_SHOT,
                                      0, &command_buffer));
  expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
  status = halo_command_buffer_end(command_buffer);
  print_message("4 right arguments: %s\n",
                status ? halo_status_message(status) : "OK");
  assert_true(!status || halo_status_code(status) == HALO_STATUS_UNIMPLEMENTED);
  halo_status_free(status);
  halo_command_buffer_release(command_buffer);
  halo_buffer_release(buffer);
  halo_executable_release(executable);
  halo_client_close(client);
}

typedef struct shared_load_t {
  const char *unique;  // load_kernels's
  char hash[65];
  double ms;
  halo_status_code_t code;
} shared_load_t;

static void *shared_load_thread(void *arg) {
  shared_load_t *load = arg;
  halo_client_t *client = connect_client();
  halo_executable_t *executable = NULL;
  double start = now_ms();
  halo_status_t status = load_kernels(client, load->unique, &executable);
  load->ms = now_ms() - start;
  load->code = halo_status_code(status);
  halo_status_free(status);
  if (executable) {
    snprintf(load->hash, sizeof(load->hash), "%s",
             halo_executable_content_hash(executable));
    halo_executable_release(executable);
  }
  halo_client_close(client);
  return NULL;
}

// Two clients load the same new source at once: one compile, both served.
static void test_two_clients_share_one_load(void **state) {
  (void)state;
  char unique[64];
  snprintf(unique, sizeof(unique), "HALO_TEST_SHARED=%d", (int)getpid());
  shared_load_t loads[2] = {{.unique = unique}, {.unique = unique}};
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i) {
    pthread_create(&threads[i], NULL, shared_load_thread, &loads[i]);
  }
  for (int i = 0; i < 2; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < 2; ++i) {
    assert_int_equal(loads[i].code, HALO_STATUS_OK);
    print_message("client %d: loaded in %.1f ms\n", i, loads[i].ms);
  }
  assert_string_equal(loads[0].hash, loads[1].hash);
}

// While one client's kernel runs for 3 s, another client's load of a new
// module and the admin status answer. Needs the CUDA queues.
static void test_load_while_a_kernel_runs(void **state) {
  (void)state;
  halo_client_t *runner = connect_client();
  halo_queue_t *queue = NULL;
  halo_status_t status = halo_queue_create(runner, 0, 0, &queue);
  if (halo_status_code(status) == HALO_STATUS_UNIMPLEMENTED) {
    print_message("skipped: %s\n", halo_status_message(status));
    halo_status_free(status);
    halo_client_close(runner);
    skip();
  }
  expect_ok(status);
  halo_executable_t *executable = NULL;
  expect_ok(load_kernels(runner, NULL, &executable));
  uint64_t ns = 3000000000ull;
  uint64_t null_pointer = 0;
  halo_dispatch_arg_t args[2] = {
      {.kind = HALO_DISPATCH_ARG_CONSTANT, .data = &ns, .size = 8},
      {.kind = HALO_DISPATCH_ARG_CONSTANT, .data = &null_pointer, .size = 8},
  };
  halo_dispatch_params_t dispatch = {.executable = executable,
                                     .entry = "halo_test_spin",
                                     .grid = {1, 1, 1},
                                     .block = {1, 1, 1},
                                     .args = args,
                                     .arg_count = 2};
  halo_command_buffer_t *command_buffer = NULL;
  expect_ok(halo_command_buffer_begin(runner, 0, HALO_COMMAND_BUFFER_ONE_SHOT,
                                      0, &command_buffer));
  expect_ok(halo_command_buffer_dispatch(command_buffer, &dispatch));
  status = halo_command_buffer_end(command_buffer);
  if (halo_status_code(status) == HALO_STATUS_UNIMPLEMENTED) {
    print_message("skipped: %s\n", halo_status_message(status));
    halo_status_free(status);
    halo_client_close(runner);
    skip();
  }
  expect_ok(status);
  halo_semaphore_t *done = NULL;
  expect_ok(halo_semaphore_create(runner, 0, 0, &done));
  halo_semaphore_value_t signal = {done, 1};
  double started = now_ms();
  expect_ok(
      halo_queue_execute(queue, command_buffer, NULL, 0, NULL, 0, &signal, 1));
  usleep(200000);  // the kernel is running

  double admin_ms = admin_status_ms();
  char unique[64];
  snprintf(unique, sizeof(unique), "HALO_TEST_WHILE_BUSY=%d%ld", (int)getpid(),
           (long)time(NULL));
  shared_load_t load = {.unique = unique};
  shared_load_thread(&load);
  double admin_after_ms = admin_status_ms();
  double load_done_at = now_ms() - started;
  expect_ok(halo_semaphore_wait(done, 1, 30000000000ll));
  double kernel_ms = now_ms() - started;
  print_message(
      "kernel 3 s: done after %.0f ms; admin status %.1f ms and "
      "%.1f ms; another client's new module loaded in %.1f ms "
      "(answered %.0f ms after the kernel started)\n",
      kernel_ms, admin_ms, admin_after_ms, load.ms, load_done_at);
  assert_int_equal(load.code, HALO_STATUS_OK);
  assert_true(admin_ms < 1000);
  assert_true(admin_after_ms < 1000);
  halo_semaphore_release(done);
  halo_command_buffer_release(command_buffer);
  halo_executable_release(executable);
  halo_queue_release(queue);
  halo_client_close(runner);
}

int main(void) {
  char reason[256];
  if (!halo_hal_cuda_probe(reason, sizeof(reason))) {
    printf("SKIP: the CUDA driver is unavailable: %s\n", reason);
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_is_cuda),
      cmocka_unit_test(test_compile_log_reaches_the_client),
      cmocka_unit_test(test_arguments_checked_at_record_time),
      cmocka_unit_test(test_two_clients_share_one_load),
      cmocka_unit_test(test_load_while_a_kernel_runs),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
