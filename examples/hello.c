// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-hello: the smallest complete halo client.
//
// Connects to halod, lists its devices, writes and reads back a host-visible
// and a device buffer, and wakes a second thread through a timeline
// semaphore. Prints each step and the time it took.
//
// Build: part of the halo build (build/bin/halo-hello), or on its own against
// an installed libhalo:
//   cc -o hello hello.c $(pkg-config --cflags --libs halo) -lpthread
// Run: HALO_ADDRESS=ipc:///path/to/halo.sock ./hello
// (without HALO_ADDRESS: ipc:///run/halo/halo.sock).
#include <halo/halo.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// Everything the example creates, so one function can release it all.
typedef struct hello_t {
  halo_client_t *client;
  halo_buffer_t *host_buffer;
  halo_buffer_t *device_buffer;
  halo_semaphore_t *semaphore;
} hello_t;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Prints one step and the time since |*clock_ns|, then restarts the clock.
static void step(int64_t *clock_ns, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void step(int64_t *clock_ns, const char *format, ...) {
  int64_t now = now_ns();
  char text[256];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  printf("%-60s %9.3f ms\n", text, (double)(now - *clock_ns) / 1e6);
  fflush(stdout);
  *clock_ns = now_ns();
}

// Fills |data| with a pattern that differs per |seed|.
static void fill_pattern(uint8_t *data, size_t length, uint32_t seed) {
  for (size_t i = 0; i < length; ++i) data[i] = (uint8_t)(i * 31 + seed);
}

// Writes a pattern into |buffer|, reads it back and compares.
static halo_status_t write_and_check(halo_buffer_t *buffer, uint32_t seed) {
  size_t size = (size_t)halo_buffer_size(buffer);
  uint8_t *expected = malloc(size);
  uint8_t *actual = malloc(size);
  halo_status_t status = NULL;
  if (!expected || !actual) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "allocating %zu bytes", size);
    goto done;
  }
  fill_pattern(expected, size, seed);
  status = halo_buffer_write(buffer, 0, expected, size);
  if (status) goto done;
  memset(actual, 0, size);
  status = halo_buffer_read(buffer, 0, actual, size);
  if (status) goto done;
  if (memcmp(expected, actual, size) != 0) {
    status = halo_status_make(HALO_STATUS_DATA_LOSS,
                              "buffer %" PRIu64 " read back other bytes",
                              halo_buffer_handle(buffer));
    goto done;
  }
  // A host-visible buffer is also mapped here: the bytes are in place.
  const uint8_t *mapped = halo_buffer_host_pointer(buffer);
  if (mapped && memcmp(mapped, expected, size) != 0) {
    status = halo_status_make(HALO_STATUS_DATA_LOSS,
                              "buffer %" PRIu64 ": mapping differs",
                              halo_buffer_handle(buffer));
  }
done:
  free(expected);
  free(actual);
  return status;
}

// The second thread: waits until the semaphore reaches 1.
typedef struct waiter_t {
  halo_semaphore_t *semaphore;
  halo_status_t status;
  int64_t woke_ns;
} waiter_t;

static void *waiter_main(void *arg) {
  waiter_t *waiter = arg;
  waiter->status = halo_semaphore_wait(waiter->semaphore, 1,
                                       10 * INT64_C(1000000000));  // 10 s
  waiter->woke_ns = now_ns();
  return NULL;
}

static halo_status_t hello_run(hello_t *hello) {
  int64_t clock = now_ns();
  halo_status_t status;

  // NULL options: the address comes from $HALO_ADDRESS, else
  // ipc:///run/halo/halo.sock.
  status = halo_client_connect(NULL, &hello->client);
  if (status) return halo_status_annotate(status, "connecting to halod");
  step(&clock, "connected: libhalo %s, session %" PRIu64 ", halod pid %d",
       halo_version_string(), halo_client_session_id(hello->client),
       (int)halo_client_daemon_pid(hello->client));

  uint32_t device_count = 0;
  status = halo_client_device_count(hello->client, &device_count);
  if (status) return halo_status_annotate(status, "counting devices");
  for (uint32_t i = 0; i < device_count; ++i) {
    halo_device_info_t info;
    status = halo_client_device_info(hello->client, i, &info);
    if (status) return halo_status_annotate(status, "device %u", i);
    step(&clock, "device %u: %s \"%s\", %" PRIu64 " MiB", info.ordinal,
         info.driver, info.name, info.memory_bytes >> 20);
  }

  // A host-visible buffer: shared memory mapped by this process and halod.
  const uint64_t host_size = 64 * 1024;
  status = halo_buffer_create(hello->client, 0, HALO_MEMORY_HOST_VISIBLE,
                              host_size, 0, &hello->host_buffer);
  if (status) return halo_status_annotate(status, "host-visible buffer");
  step(&clock, "created a host-visible buffer of %" PRIu64 " KiB at %p",
       host_size >> 10, halo_buffer_host_pointer(hello->host_buffer));
  status = write_and_check(hello->host_buffer, 1);
  if (status) return status;
  step(&clock, "wrote and read back %" PRIu64 " KiB (host-visible)",
       host_size >> 10);

  // A device buffer: only a handle here; reads and writes go through halod.
  const uint64_t device_size = 4 * 1024 * 1024;
  status = halo_buffer_create(hello->client, 0, HALO_MEMORY_DEVICE, device_size,
                              0, &hello->device_buffer);
  if (status) return halo_status_annotate(status, "device buffer");
  step(&clock,
       "created a device buffer of %" PRIu64 " MiB (handle 0x%" PRIx64 ")",
       device_size >> 20, halo_buffer_handle(hello->device_buffer));
  status = write_and_check(hello->device_buffer, 2);
  if (status) return status;
  step(&clock, "wrote and read back %" PRIu64 " MiB (device)",
       device_size >> 20);

  // A timeline semaphore at 0; a second thread waits for 1.
  status = halo_semaphore_create(hello->client, 0, 0, &hello->semaphore);
  if (status) return halo_status_annotate(status, "creating a semaphore");
  step(&clock, "created a semaphore (handle 0x%" PRIx64 ") at value 0",
       halo_semaphore_handle(hello->semaphore));

  waiter_t waiter = {.semaphore = hello->semaphore};
  pthread_t thread;
  if (pthread_create(&thread, NULL, waiter_main, &waiter) != 0) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "starting the waiter thread");
  }
  // Give the waiter time to fall asleep on the futex, so the signal below
  // really wakes it (waits spin only ~20 us).
  struct timespec pause = {.tv_nsec = 10 * 1000 * 1000};
  nanosleep(&pause, NULL);
  clock = now_ns();  // the step below times the signal and the wake-up
  int64_t signal_ns = clock;
  status = halo_semaphore_signal(hello->semaphore, 1);
  pthread_join(thread, NULL);
  if (status) {
    halo_status_free(waiter.status);
    return halo_status_annotate(status, "signaling the semaphore");
  }
  if (waiter.status) {
    return halo_status_annotate(waiter.status, "waiting on the semaphore");
  }
  step(&clock, "signaled 1; the waiting thread woke %.1f us later",
       (double)(waiter.woke_ns - signal_ns) / 1e3);

  uint64_t value = 0;
  status = halo_semaphore_query(hello->semaphore, &value);
  if (status) return halo_status_annotate(status, "querying the semaphore");
  step(&clock, "queried the semaphore: value %" PRIu64, value);
  return NULL;
}

// Releases in reverse order of creation; every call accepts NULL.
static void hello_release(hello_t *hello) {
  halo_semaphore_release(hello->semaphore);
  halo_buffer_release(hello->device_buffer);
  halo_buffer_release(hello->host_buffer);
  halo_client_close(hello->client);
  memset(hello, 0, sizeof(*hello));
}

int main(void) {
  hello_t hello = {0};
  halo_status_t status = hello_run(&hello);
  if (!status) {
    int64_t clock = now_ns();
    hello_release(&hello);
    step(&clock, "released everything and disconnected");
    return 0;
  }
  fprintf(stderr, "halo-hello: %s: %s\n",
          halo_status_code_name(halo_status_code(status)),
          halo_status_message(status));
  halo_status_free(status);
  hello_release(&hello);
  return 1;
}
