// halo-bench-execute: execute + wait round trips on the local (CPU) driver.
// One REUSABLE command buffer (a vector_add dispatch over 256 floats) is
// executed with a fresh binding table each step; the client waits on the
// semaphore the submission signals. Native baseline in the same run: the
// same kernel called directly in this process (dlopen).
//
//   halo-bench-execute KERNEL.so [ITERATIONS]
#include <dlfcn.h>
#include <halo/halo.h>
#include <halo/local_kernel.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 256

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int compare(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static double percentile(int64_t *samples, int count, double p) {
  qsort(samples, (size_t)count, sizeof(*samples), compare);
  return (double)samples[(int)(p * (count - 1))] / 1e3;
}

static int fail(const char *what, halo_status_t status) {
  fprintf(stderr, "halo-bench-execute: %s: %s\n", what,
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
  if (argc < 2) {
    fprintf(stderr, "usage: halo-bench-execute KERNEL.so [ITERATIONS]\n");
    return 2;
  }
  int iterations = argc > 2 ? atoi(argv[2]) : 2000;
  if (iterations < 10) iterations = 10;
  int64_t *samples = calloc((size_t)iterations, sizeof(*samples));

  // Native: the kernel called in-process, every workgroup, no daemon.
  void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    fprintf(stderr, "halo-bench-execute: %s\n", dlerror());
    return 1;
  }
  void (*kernel)(const halo_dispatch_state_t *) =
      (void (*)(const halo_dispatch_state_t *))dlsym(library, "vector_add");
  if (!kernel) {
    fprintf(stderr, "halo-bench-execute: no vector_add in %s\n", argv[1]);
    return 1;
  }
  static float a[N], b[N], c[N];
  uint32_t n = N;
  const float *pa = a, *pb = b;
  float *pc = c;
  void *args[4] = {&pa, &pb, &pc, &n};
  for (int i = 0; i < iterations; ++i) {
    int64_t start = now_ns();
    halo_dispatch_state_t state = {
        .args = args,
        .arg_count = 4,
        .workgroup_count = {1, 1, 1},
        .workgroup_size = {N, 1, 1},
    };
    kernel(&state);
    samples[i] = now_ns() - start;
  }
  double native_p50 = percentile(samples, iterations, 0.5);
  double native_p99 = percentile(samples, iterations, 0.99);

  halo_client_t *client;
  CHECK("connect", halo_client_connect(NULL, &client));
  halo_executable_t *executable;
  CHECK("load",
        halo_executable_create_from_file(client, 0, argv[1], 0, &executable));
  halo_command_buffer_t *command_buffer;
  CHECK("begin",
        halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE, 3,
                                  &command_buffer));
  halo_dispatch_arg_t dispatch_args[4] = {
      {.kind = HALO_DISPATCH_ARG_BUFFER, .ref = halo_binding_ref(0, 0, 4 * N)},
      {.kind = HALO_DISPATCH_ARG_BUFFER, .ref = halo_binding_ref(1, 0, 4 * N)},
      {.kind = HALO_DISPATCH_ARG_BUFFER, .ref = halo_binding_ref(2, 0, 4 * N)},
      {.kind = HALO_DISPATCH_ARG_CONSTANT, .data = &n, .size = sizeof(n)},
  };
  halo_dispatch_params_t dispatch = {.executable = executable,
                                     .entry = "vector_add",
                                     .grid = {1, 1, 1},
                                     .block = {N, 1, 1},
                                     .args = dispatch_args,
                                     .arg_count = 4};
  CHECK("dispatch", halo_command_buffer_dispatch(command_buffer, &dispatch));
  CHECK("end", halo_command_buffer_end(command_buffer));
  halo_buffer_t *buffers[3];
  for (int i = 0; i < 3; ++i) {
    CHECK("buffer", halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE,
                                       4 * N, 0, &buffers[i]));
  }
  halo_semaphore_t *done;
  CHECK("semaphore", halo_semaphore_create(client, 0, 0, &done));
  halo_binding_t bindings[3];
  for (int i = 0; i < 3; ++i) {
    bindings[i] = (halo_binding_t){buffers[i], 0, HALO_WHOLE_BUFFER};
  }
  for (int i = 0; i < iterations; ++i) {
    halo_semaphore_value_t signal = {done, (uint64_t)i + 1};
    int64_t start = now_ns();
    CHECK("execute", halo_queue_execute(NULL, command_buffer, bindings, 3, NULL,
                                        0, &signal, 1));
    CHECK("wait",
          halo_semaphore_wait(done, (uint64_t)i + 1, 10ll * 1000000000));
    samples[i] = now_ns() - start;
  }
  double halo_p50 = percentile(samples, iterations, 0.5);
  double halo_p99 = percentile(samples, iterations, 0.99);
  printf("execute + wait, vector_add over %d floats, %d iterations (us)\n", N,
         iterations);
  printf("  %-36s p50 %9.2f  p99 %9.2f\n", "halo (local driver, via halod)",
         halo_p50, halo_p99);
  printf("  %-36s p50 %9.2f  p99 %9.2f\n", "native (kernel called in-process)",
         native_p50, native_p99);
  printf("  ratio p50 %.0fx\n", native_p50 > 0 ? halo_p50 / native_p50 : 0.0);
  halo_semaphore_release(done);
  for (int i = 0; i < 3; ++i) halo_buffer_release(buffers[i]);
  halo_command_buffer_release(command_buffer);
  halo_executable_release(executable);
  halo_client_close(client);
  dlclose(library);
  free(samples);
  return 0;
}
