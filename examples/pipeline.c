// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-pipeline: two processes, one buffer, ordered by timeline semaphores.
//
// The producer (the process you start) connects, creates a host-visible
// buffer of ITEMS slots and two timeline semaphores, `filled` and `done`,
// all exportable, and starts the consumer: this executable again (fork +
// exec) with the three export tokens on its command line. The consumer
// connects on its own, imports them, and submits ITEMS executions of the
// affine kernel (x = 2x + 1 in place) up front: execution k works on slot k,
// WAITS for filled >= k and signals done = k. Nothing is filled yet, so
// every execution is held in halod. The consumer tells the producer
// "submitted" over a pipe; only then does the producer, for k = 1..ITEMS,
// fill slot k, signal filled = k, wait for done >= k (a futex wait on shared
// memory, no message to halod) and check slot k.
//
//   producer                    halod                        consumer
//   create buffer, semaphores
//   fork + exec (tokens) ---------------------------------> import, submit
//                               executions 1..3 wait  <---- (wait filled>=k)
//   read "submitted" <------------------------------------- write "submitted"
//   fill slot 1, signal filled=1 -> run execution 1 -> signal done=1
//   wait done>=1, check slot 1, fill slot 2, ...
//
//   halo-pipeline [KERNEL]
//
// KERNEL (.so, .ptx, .cubin, .fatbin or .cu) defaults to the kernel for
// device 0's driver, beside the binary; the producer picks it and passes
// it to the consumer, which loads it:
//   local (CPU) driver: affine.so, kernels/affine.c built as a shared
//     object. Native code runs inside halod (or its device worker), so
//     halod loads it only for clients of its own uid and root unless its
//     native-code setting is `any` (halod.conf(5)): the client image's
//     programs (uid 1000) need native-code = any in a local-driver halod.
//   cuda driver: affine.ptx (kernels/affine.cu compiled by nvcc) if
//     the build had nvcc, else the CUDA C source affine.cu itself, which
//     halod compiles for its GPU with NVRTC. The build puts both beside the
//     binary; the client image (built without nvcc) ships the .cu.
//
// Exits non-zero on any error or wrong value. libhalo (nng) must not be used
// across fork(): the child calls only exec, so the consumer starts from a
// fresh image and makes its own connection.
#include <errno.h>
#include <fcntl.h>
#include <halo/halo.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ITEMS 3
#define WIDTH 4096  // floats per slot
#define SLOT_BYTES (WIDTH * sizeof(float))
#define SECONDS (1000ll * 1000 * 1000)  // in halo's nanosecond timeouts

static const char *g_role = "producer";

static int fail(const char *what, halo_status_t status) {
  fprintf(stderr, "halo-pipeline %s: %s: %s: %s\n", g_role, what,
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

// The value the producer writes at index |i| of item |k|, and what the
// consumer's kernel makes of it (exact in float: below 2^24).
static float input_value(int k, int i) {
  return (float)(1000 * k + i);
}
static float expected_value(int k, int i) {
  return 2.0f * input_value(k, i) + 1.0f;
}

// ------------------------------------------------------------ the consumer

// halo-pipeline --consumer KERNEL REPORT_FD BUFFER FILLED DONE (tokens).
static int consumer_main(char **argv) {
  g_role = "consumer";
  const char *kernel_path = argv[2];
  int report_fd = atoi(argv[3]);
  halo_token_t tokens[3];
  for (int i = 0; i < 3; ++i) {
    CHECK("token", halo_token_parse(argv[4 + i], &tokens[i]));
  }

  halo_client_options_t options = {.client_name = "halo-pipeline-consumer"};
  halo_client_t *client;
  CHECK("connect", halo_client_connect(&options, &client));
  halo_buffer_t *buffer;
  halo_semaphore_t *filled, *done;
  CHECK("import buffer", halo_buffer_import(client, &tokens[0], &buffer));
  CHECK("import filled", halo_semaphore_import(client, &tokens[1], &filled));
  CHECK("import done", halo_semaphore_import(client, &tokens[2], &done));
  printf(
      "consumer: connected as session %llu, imported the buffer and both "
      "semaphores\n",
      (unsigned long long)halo_client_session_id(client));

  // Record once: x = 2x + 1 over binding slot 0 (one slot of the buffer).
  halo_executable_t *executable;
  halo_status_t load =
      halo_executable_create_from_file(client, 0, kernel_path, 0, &executable);
  if (load) {
    if (halo_status_code(load) == HALO_STATUS_PERMISSION_DENIED) {
      fprintf(stderr,
              "halo-pipeline consumer: halod loads native code (.so) only "
              "for its own uid and root unless its native-code setting is "
              "any\n");
    }
    return fail("load kernel", load);
  }
  halo_command_buffer_t *command_buffer;
  CHECK("begin",
        halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE, 1,
                                  &command_buffer));
  uint32_t n = WIDTH;
  float scale = 2.0f, offset = 1.0f;
  halo_dispatch_arg_t args[4] = {
      {.kind = HALO_DISPATCH_ARG_BUFFER,
       .ref = halo_binding_ref(0, 0, SLOT_BYTES)},
      {.kind = HALO_DISPATCH_ARG_CONSTANT, .data = &n, .size = sizeof(n)},
      {.kind = HALO_DISPATCH_ARG_CONSTANT, .data = &scale, .size = 4},
      {.kind = HALO_DISPATCH_ARG_CONSTANT, .data = &offset, .size = 4},
  };
  halo_dispatch_params_t dispatch = {
      .executable = executable,
      .entry = "affine",
      .grid = {WIDTH / 256, 1, 1},
      .block = {256, 1, 1},
      .args = args,
      .arg_count = 4,
  };
  CHECK("dispatch", halo_command_buffer_dispatch(command_buffer, &dispatch));
  CHECK("end", halo_command_buffer_end(command_buffer));

  // Submit every item now, before the producer has filled anything: each
  // execution binds its own slot and waits in halod for filled >= k.
  for (int k = 1; k <= ITEMS; ++k) {
    halo_binding_t binding = {buffer, (uint64_t)(k - 1) * SLOT_BYTES,
                              SLOT_BYTES};
    halo_semaphore_value_t wait = {filled, (uint64_t)k};
    halo_semaphore_value_t signal = {done, (uint64_t)k};
    CHECK("execute", halo_queue_execute(NULL, command_buffer, &binding, 1,
                                        &wait, 1, &signal, 1));
    printf(
        "consumer: submitted execution %d (slot %d): waits for filled >= "
        "%d, then signals done = %d\n",
        k, k, k, k);
  }

  // Only now may the producer fill: tell it so.
  char submitted = 'S';
  if (write(report_fd, &submitted, 1) != 1) {
    fprintf(stderr, "halo-pipeline consumer: write to the producer: %s\n",
            strerror(errno));
    return 1;
  }
  close(report_fd);

  // The session must outlive its submissions: wait for the last one.
  CHECK("wait done", halo_semaphore_wait(done, ITEMS, 30 * SECONDS));
  printf("consumer: done reached %d, closing the session\n", ITEMS);
  halo_command_buffer_release(command_buffer);
  halo_executable_release(executable);
  halo_semaphore_release(done);
  halo_semaphore_release(filled);
  halo_buffer_release(buffer);
  halo_client_close(client);
  return 0;
}

// ------------------------------------------------------------ the producer

typedef struct producer_t {
  halo_client_t *client;
  halo_buffer_t *buffer;
  halo_semaphore_t *filled;
  halo_semaphore_t *done;
  pid_t consumer_pid;  // 0: not started
  int report_fd;       // the pipe's read end; -1: none
} producer_t;

// Starts this executable as the consumer with the tokens of the buffer and
// both semaphores; it writes one byte on a pipe once it has submitted.
static int producer_start_consumer(producer_t *producer,
                                   const char *kernel_path) {
  halo_token_t tokens[3];
  CHECK("export buffer", halo_buffer_export(producer->buffer, &tokens[0]));
  CHECK("export filled", halo_semaphore_export(producer->filled, &tokens[1]));
  CHECK("export done", halo_semaphore_export(producer->done, &tokens[2]));
  char hex[3][33];
  for (int i = 0; i < 3; ++i) halo_token_format(&tokens[i], hex[i]);

  char self[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  int fds[2];
  if (length <= 0 || pipe2(fds, O_CLOEXEC) != 0) {
    fprintf(stderr, "halo-pipeline producer: readlink or pipe: %s\n",
            strerror(errno));
    return 1;
  }
  self[length] = '\0';
  char report_fd[16];
  snprintf(report_fd, sizeof(report_fd), "%d", fds[1]);
  char *argv[] = {self,      "--consumer", (char *)kernel_path,
                  report_fd, hex[0],       hex[1],
                  hex[2],    NULL};
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec (no libhalo).
    fcntl(fds[1], F_SETFD, 0);  // keep the write end open across exec
    execv(self, argv);
    _exit(127);
  }
  close(fds[1]);
  producer->report_fd = fds[0];
  if (pid < 0) {
    fprintf(stderr, "halo-pipeline producer: fork: %s\n", strerror(errno));
    return 1;
  }
  producer->consumer_pid = pid;
  printf(
      "producer: started the consumer (pid %d) with 3 export tokens on "
      "its command line (buffer %.8s..., filled %.8s..., done %.8s...)\n",
      (int)pid, hex[0], hex[1], hex[2]);
  return 0;
}

// Waits (at most 30 s) for the consumer's "submitted" byte.
static int producer_wait_submitted(producer_t *producer) {
  struct pollfd pfd = {.fd = producer->report_fd, .events = POLLIN};
  char byte = 0;
  int ready;
  do {
    ready = poll(&pfd, 1, 30 * 1000);
  } while (ready < 0 && errno == EINTR);
  if (ready <= 0 || read(producer->report_fd, &byte, 1) != 1 || byte != 'S') {
    fprintf(stderr,
            "halo-pipeline producer: the consumer did not report its "
            "submissions (%s)\n",
            ready == 0 ? "30 s passed" : "it exited first");
    return 1;
  }
  return 0;
}

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
      "producer: no %s.ptx beside the binary: the consumer sends the "
      "CUDA C source %s.cu, which halod compiles with NVRTC\n",
      name, name);
  snprintf(path, size, "%s/%s.cu", directory, name);
}

// |kernel_arg|: KERNEL from the command line, or "" for the default kernel
// for device 0's driver.
static int producer_run(producer_t *producer, const char *kernel_arg) {
  halo_client_options_t options = {.client_name = "halo-pipeline-producer"};
  CHECK("connect", halo_client_connect(&options, &producer->client));
  halo_device_info_t device;
  CHECK("device info", halo_client_device_info(producer->client, 0, &device));
  char kernel_path[PATH_MAX];
  if (kernel_arg[0]) {
    snprintf(kernel_path, sizeof(kernel_path), "%s", kernel_arg);
  } else {
    // An ELF shared object for the CPU; PTX, or else CUDA C, for a GPU.
    default_kernel(device.driver, "affine", kernel_path, sizeof(kernel_path));
  }
  printf("producer: device 0: %s (driver %s), kernel %s\n", device.name,
         device.driver, kernel_path);
  CHECK("buffer",
        halo_buffer_create(producer->client, 0, HALO_MEMORY_HOST_VISIBLE,
                           ITEMS * SLOT_BYTES, HALO_OBJECT_FLAG_EXPORTABLE,
                           &producer->buffer));
  CHECK("semaphore",
        halo_semaphore_create(producer->client, 0, HALO_OBJECT_FLAG_EXPORTABLE,
                              &producer->filled));
  CHECK("semaphore",
        halo_semaphore_create(producer->client, 0, HALO_OBJECT_FLAG_EXPORTABLE,
                              &producer->done));
  printf(
      "producer: connected as session %llu; created a host-visible buffer "
      "of %d slots x %d floats and semaphores filled = 0, done = 0\n",
      (unsigned long long)halo_client_session_id(producer->client), ITEMS,
      WIDTH);

  if (producer_start_consumer(producer, kernel_path)) return 1;
  if (producer_wait_submitted(producer)) return 1;
  printf("producer: the consumer reports its %d executions submitted\n", ITEMS);

  // They must not run yet: done stays 0 while filled is 0.
  halo_status_t early = halo_semaphore_wait(producer->done, 1, SECONDS / 20);
  if (!early) {
    fprintf(stderr, "halo-pipeline producer: done reached 1 before filled\n");
    return 1;
  }
  if (halo_status_code(early) != HALO_STATUS_DEADLINE_EXCEEDED) {
    return fail("wait done", early);
  }
  halo_status_free(early);
  printf(
      "producer: 50 ms later done is still 0: the executions wait in "
      "halod for filled\n");

  float *slots = halo_buffer_host_pointer(producer->buffer);
  for (int k = 1; k <= ITEMS; ++k) {
    float *x = slots + (size_t)(k - 1) * WIDTH;
    for (int i = 0; i < WIDTH; ++i) x[i] = input_value(k, i);
    CHECK("signal filled", halo_semaphore_signal(producer->filled, k));
    CHECK("wait done", halo_semaphore_wait(producer->done, k, 10 * SECONDS));
    int wrong = 0;
    for (int i = 0; i < WIDTH; ++i) {
      if (x[i] != expected_value(k, i)) ++wrong;
    }
    printf(
        "producer: item %d: filled slot %d, signaled filled = %d, waited "
        "for done >= %d: x = 2x + 1 %s\n",
        k, k, k, k, wrong ? "WRONG" : "correct");
    if (wrong) {
      fprintf(stderr, "halo-pipeline producer: item %d: %d wrong values\n", k,
              wrong);
      return 1;
    }
  }
  return 0;
}

// Waits for the consumer (killing it first if the producer failed) and
// releases everything. Returns 1 if the consumer did not exit with 0.
static int producer_finish(producer_t *producer, int failed) {
  int consumer_failed = 0;
  if (producer->consumer_pid > 0) {
    if (failed) kill(producer->consumer_pid, SIGTERM);
    int status = 0;
    while (waitpid(producer->consumer_pid, &status, 0) < 0 && errno == EINTR) {
    }
    consumer_failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (consumer_failed && !failed) {
      fprintf(stderr, "halo-pipeline producer: the consumer failed\n");
    }
  }
  if (producer->report_fd >= 0) close(producer->report_fd);
  halo_semaphore_release(producer->done);
  halo_semaphore_release(producer->filled);
  halo_buffer_release(producer->buffer);
  halo_client_close(producer->client);
  return consumer_failed;
}

int main(int argc, char **argv) {
  // Both processes print to one stdout: one line at a time, in order.
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 7 && strcmp(argv[1], "--consumer") == 0) {
    return consumer_main(argv);
  }
  producer_t producer = {.report_fd = -1};
  int failed = producer_run(&producer, argc > 1 ? argv[1] : "");
  if (producer_finish(&producer, failed)) failed = 1;
  if (!failed) printf("producer: ok\n");
  return failed;
}
