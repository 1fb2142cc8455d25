// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-vector-add: one memoized command buffer executed three times with
// three binding tables. Records a dispatch of the vector_add kernel whose
// buffers are binding slots 0..2, then binds a different (a, b, c) each
// time, waits on a semaphore the submission signals, and checks c.
//
//   halo-vector-add [KERNEL]
//
// KERNEL (.so, .ptx, .cubin, .fatbin or .cu) defaults to the kernel for
// device 0's driver, beside the binary:
//   local (CPU) driver: vector_add.so, kernels/vector_add.c built as a shared
//     object. Native code runs inside halod (or its device worker), so
//     halod loads it only for clients of its own uid and root unless its
//     native-code setting is `any` (halod.conf(5)): the client image's
//     programs (uid 1000) need native-code = any in a local-driver halod.
//   cuda driver: vector_add.ptx (kernels/vector_add.cu compiled by nvcc) if
//     the build had nvcc, else the CUDA C source vector_add.cu itself, which
//     halod compiles for its GPU with NVRTC. The build puts both beside the
//     binary; the client image (built without nvcc) ships the .cu.
#include <halo/halo.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 4096
#define RUNS 3

// The default kernel NAME.EXTENSION for |driver|, in the binary's directory
// (see the header).
static void default_kernel(const char *driver, const char *name, char *path,
                           size_t size) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n > 0 ? n : 0] = '\0';
  const char *directory = dirname(self);
  if (strcmp(driver, "cuda") != 0) {
    snprintf(path, size, "%s/%s.so", directory, name);
    return;
  }
  snprintf(path, size, "%s/%s.ptx", directory, name);
  if (access(path, R_OK) == 0) return;
  printf(
      "no %s.ptx beside the binary: sending the CUDA C source %s.cu, "
      "which halod compiles with NVRTC\n",
      name, name);
  snprintf(path, size, "%s/%s.cu", directory, name);
}

static int fail(const char *what, halo_status_t status) {
  fprintf(stderr, "halo-vector-add: %s: %s: %s\n", what,
          halo_status_code_name(halo_status_code(status)),
          halo_status_message(status));
  halo_status_free(status);
  return 1;
}

#define CHECK(what, expr)                      \
  do {                                         \
    halo_status_t status_ = (expr);            \
    if (status_) return fail((what), status_); \
  } while (0)

int main(int argc, char **argv) {
  halo_client_t *client;
  CHECK("connect", halo_client_connect(NULL, &client));
  halo_device_info_t device;
  CHECK("device info", halo_client_device_info(client, 0, &device));
  printf("device 0: %s (driver %s)\n", device.name, device.driver);

  // The kernel for that driver: an ELF shared object for the CPU; PTX, or
  // else CUDA C, for a GPU.
  char kernel_path[PATH_MAX];
  if (argc > 1) {
    snprintf(kernel_path, sizeof(kernel_path), "%s", argv[1]);
  } else {
    default_kernel(device.driver, "vector_add", kernel_path,
                   sizeof(kernel_path));
  }
  halo_executable_t *executable;
  halo_status_t load =
      halo_executable_create_from_file(client, 0, kernel_path, 0, &executable);
  if (load) {
    if (halo_status_code(load) == HALO_STATUS_PERMISSION_DENIED) {
      fprintf(stderr,
              "halo-vector-add: halod loads native code (.so) only for its "
              "own uid and root unless its native-code setting is any\n");
    }
    return fail("load kernel", load);
  }
  printf("loaded %s (content hash %.16s)\n", kernel_path,
         halo_executable_content_hash(executable));

  // Record once: c = a + b with a, b, c in binding slots 0, 1, 2.
  halo_command_buffer_t *command_buffer;
  CHECK("begin",
        halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE, 3,
                                  &command_buffer));
  uint32_t n = N;
  halo_dispatch_arg_t args[4] = {
      {.kind = HALO_DISPATCH_ARG_BUFFER,
       .ref = halo_binding_ref(0, 0, N * sizeof(float))},
      {.kind = HALO_DISPATCH_ARG_BUFFER,
       .ref = halo_binding_ref(1, 0, N * sizeof(float))},
      {.kind = HALO_DISPATCH_ARG_BUFFER,
       .ref = halo_binding_ref(2, 0, N * sizeof(float))},
      {.kind = HALO_DISPATCH_ARG_CONSTANT, .data = &n, .size = sizeof(n)},
  };
  halo_dispatch_params_t dispatch = {
      .executable = executable,
      .entry = "vector_add",
      .grid = {N / 256, 1, 1},
      .block = {256, 1, 1},
      .args = args,
      .arg_count = 4,
  };
  CHECK("dispatch", halo_command_buffer_dispatch(command_buffer, &dispatch));
  CHECK("end", halo_command_buffer_end(command_buffer));
  printf("recorded 1 dispatch (memo %s)\n",
         halo_command_buffer_memo_hit(command_buffer) ? "hit" : "miss");

  halo_semaphore_t *done;
  CHECK("semaphore", halo_semaphore_create(client, 0, 0, &done));
  for (int run = 0; run < RUNS; ++run) {
    halo_buffer_t *buffers[3];
    for (int i = 0; i < 3; ++i) {
      CHECK("buffer", halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE,
                                         N * sizeof(float), 0, &buffers[i]));
    }
    float *a = halo_buffer_host_pointer(buffers[0]);
    float *b = halo_buffer_host_pointer(buffers[1]);
    float *c = halo_buffer_host_pointer(buffers[2]);
    for (int i = 0; i < N; ++i) {
      a[i] = (float)i;
      b[i] = (float)(run + 1) * 1000.0f;
    }
    halo_binding_t bindings[3];
    for (int i = 0; i < 3; ++i) {
      bindings[i] = (halo_binding_t){buffers[i], 0, HALO_WHOLE_BUFFER};
    }
    halo_semaphore_value_t signal = {done, (uint64_t)run + 1};
    CHECK("execute", halo_queue_execute(NULL, command_buffer, bindings, 3, NULL,
                                        0, &signal, 1));
    CHECK("wait",
          halo_semaphore_wait(done, (uint64_t)run + 1, 5ll * 1000000000));
    int wrong = 0;
    for (int i = 0; i < N; ++i) {
      if (c[i] != (float)i + (float)(run + 1) * 1000.0f) ++wrong;
    }
    printf("run %d: c = a + b over %d floats with binding table %d: %s\n",
           run + 1, N, run + 1, wrong ? "WRONG" : "correct");
    for (int i = 0; i < 3; ++i) halo_buffer_release(buffers[i]);
    if (wrong) {
      fprintf(stderr, "halo-vector-add: %d wrong results\n", wrong);
      return 1;
    }
  }
  halo_semaphore_release(done);
  halo_command_buffer_release(command_buffer);
  halo_executable_release(executable);
  halo_client_close(client);
  return 0;
}
