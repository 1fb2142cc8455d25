// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Executable loads and the requests of everyone else: a load waits for its
// compile or JIT on an nng context of its own (loads), so that loads never
// hold the contexts other requests need, and one trust domain has at most
// domain-loads of them waiting; past that a load is refused for now
// (RESOURCE_EXHAUSTED with retry_after_ms), and libhalo sends it again until
// its request timeout. The slow loads are a local-driver kernel whose dlopen
// sleeps $HALO_TEST_SLOW_LOAD_MS (halod's workers inherit it).
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/halo_test.h"

enum {
  MAX_ATTACKERS = 8,  // processes, each a trust domain
  MAX_CONNECTIONS = 8,
  SLOW_LOAD_MS = 2000,  // each attack load
  CALL_BOUND_MS = 1500,
};

static const char kWaiting[] = "halo_executable_loads_waiting ";
static const char kRefused[] = "halo_executable_loads_refused_total ";

// HALO_TEST_TIME_SCALE (the TSan tree: 5).
static int64_t time_scale(void) {
  const char *text = getenv("HALO_TEST_TIME_SCALE");
  int64_t scale = text ? strtoll(text, NULL, 10) : 1;
  return scale > 0 ? scale : 1;
}

// The bytes of the ELF at |path| with |tag| appended (a content of its own:
// the loader ignores trailing bytes). Free with free().
static uint8_t *read_elf(const char *path, uint32_t tag, size_t *out_size) {
  FILE *file = fopen(path, "rb");
  assert_non_null(file);
  fseek(file, 0, SEEK_END);
  size_t size = (size_t)ftell(file);
  fseek(file, 0, SEEK_SET);
  uint8_t *data = calloc(1, size + sizeof(tag));
  assert_non_null(data);
  assert_int_equal(fread(data, 1, size, file), size);
  fclose(file);
  memcpy(data + size, &tag, sizeof(tag));
  *out_size = size + sizeof(tag);
  return data;
}

static void fill_create(Halo__Wire__ExecutableCreate *create,
                        Halo__Wire__Request *request, uint8_t *data,
                        size_t size) {
  *create = (Halo__Wire__ExecutableCreate)HALO__WIRE__EXECUTABLE_CREATE__INIT;
  create->device = 0;
  create->format = HALO__WIRE__EXECUTABLE_FORMAT__EXECUTABLE_FORMAT_ELF;
  create->data.data = data;
  create->data.len = size;
  *request = (Halo__Wire__Request)HALO__WIRE__REQUEST__INIT;
  request->body_case = HALO__WIRE__REQUEST__BODY_EXECUTABLE_CREATE;
  request->executable_create = create;
}

static void start_daemon(halo_test_daemon_t *daemon, const char *slow_ms,
                         const char *const *extra_args) {
  setenv("HALO_TEST_SLOW_LOAD_MS", slow_ms, 1);
  halo_test_daemon_start_with_args(daemon, extra_args);
  unsetenv("HALO_TEST_SLOW_LOAD_MS");
}

// Polls halod's metric |name| until it is at least |least| (or fails).
static uint64_t wait_metric(const halo_test_daemon_t *daemon, const char *name,
                            uint64_t least) {
  int64_t deadline = halo_clock_now_ns() + 10000ll * 1000000 * time_scale();
  for (;;) {
    uint64_t value = halo_test_admin_metric(daemon, name);
    if (value >= least || halo_clock_now_ns() > deadline) return value;
    usleep(10 * 1000);
  }
}

// A child process (a trust domain of its own with trust-domain process):
// |connections| sessions (at most MAX_CONNECTIONS) each send |loads| slow
// loads, all of different bytes (|tag| and up), and read nothing; then it
// writes a byte to |ready_fd| and holds its connections until |hold_fd|
// closes.
static void attacker_main(const char *path, uint32_t connections,
                          uint32_t loads, uint32_t tag, int ready_fd,
                          int hold_fd) {
  int fds[MAX_CONNECTIONS];
  for (uint32_t c = 0; c < connections; ++c) {
    fds[c] = halo_test_ipc_open_session(path);
    for (uint32_t i = 0; i < loads; ++i) {
      size_t size;
      uint8_t *data =
          read_elf(LOAD_PLACES_TEST_SLOW, tag + c * loads + i, &size);
      Halo__Wire__ExecutableCreate create;
      Halo__Wire__Request request;
      fill_create(&create, &request, data, size);
      if (!halo_test_ipc_send_request(fds[c], 100 + i, &request)) _exit(4);
      free(data);
    }
  }
  if (write(ready_fd, "r", 1) != 1) _exit(5);
  char byte;
  while (read(hold_fd, &byte, 1) > 0) {
  }
  for (uint32_t c = 0; c < connections; ++c) close(fds[c]);
  _exit(0);
}

// Attacker processes, and the pipe that holds them.
typedef struct attack_t {
  pid_t pids[MAX_ATTACKERS];
  uint32_t count;
  int hold;  // its write end; closing it ends them
} attack_t;

// Starts |count| attacker processes (attacker_main) and waits until each
// sent its loads.
static void attack_start(attack_t *attack, const halo_test_daemon_t *daemon,
                         uint32_t count, uint32_t connections, uint32_t loads) {
  assert_true(count <= MAX_ATTACKERS && connections <= MAX_CONNECTIONS);
  int ready[2], hold[2];
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(hold), 0);
  attack->count = count;
  for (uint32_t a = 0; a < count; ++a) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(ready[0]);
      close(hold[1]);
      attacker_main(daemon->socket_path, connections, loads, 1000 + 100 * a,
                    ready[1], hold[0]);
    }
    attack->pids[a] = pid;
  }
  close(ready[1]);
  close(hold[0]);
  for (uint32_t a = 0; a < count; ++a) {
    char byte;
    assert_int_equal(read(ready[0], &byte, 1), 1);
  }
  close(ready[0]);
  attack->hold = hold[1];
}

static void attack_end(attack_t *attack) {
  close(attack->hold);
  for (uint32_t a = 0; a < attack->count; ++a) {
    int status = 0;
    assert_int_equal(waitpid(attack->pids[a], &status, 0), attack->pids[a]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
}

static int64_t elapsed_ms(int64_t start_ns) {
  return (halo_clock_now_ns() - start_ns) / 1000000;
}

// While the attack's loads wait, another domain's client (this process)
// connects, pings, creates a semaphore and loads an executable, each call
// within CALL_BOUND_MS; and the attack's loads still wait afterwards.
static void probe_during_attack(const halo_test_daemon_t *daemon) {
  int64_t bound_ms = CALL_BOUND_MS * time_scale();
  int64_t start = halo_clock_now_ns();
  halo_client_t *client = halo_test_connect(daemon, (int32_t)bound_ms);
  int64_t hello_ms = elapsed_ms(start);
  start = halo_clock_now_ns();
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  int64_t ping_ms = elapsed_ms(start);
  start = halo_clock_now_ns();
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
  halo_semaphore_release(semaphore);
  int64_t semaphore_ms = elapsed_ms(start);
  size_t size;
  uint8_t *data = read_elf(LOAD_PLACES_TEST_FAST, 7, &size);
  halo_executable_params_t params = {
      .format = HALO_EXECUTABLE_FORMAT_ELF, .data = data, .size = size};
  halo_executable_t *executable = NULL;
  start = halo_clock_now_ns();
  HALO_TEST_ASSERT_OK(halo_executable_create(client, 0, &params, &executable));
  int64_t load_ms = elapsed_ms(start);
  halo_executable_release(executable);
  free(data);
  print_message(
      "during the attack: hello %lld ms, ping %lld, semaphore %lld, load "
      "%lld (bound %lld)\n",
      (long long)hello_ms, (long long)ping_ms, (long long)semaphore_ms,
      (long long)load_ms, (long long)bound_ms);
  assert_true(hello_ms < bound_ms);
  assert_true(ping_ms < bound_ms);
  assert_true(semaphore_ms < bound_ms);
  assert_true(load_ms < bound_ms);
  halo_client_close(client);
  // All of it while the attack's loads still waited (each sleeps
  // SLOW_LOAD_MS in its dlopen, and a worker runs its loads one after
  // another).
  assert_true(halo_test_admin_metric(daemon, kWaiting) >= 1);
}

// Loads sleep SLOW_LOAD_MS (times the time scale: every attacker must
// have sent its loads before the first one ends).
static void start_attacked_daemon(halo_test_daemon_t *daemon) {
  char slow_ms[24];
  snprintf(slow_ms, sizeof(slow_ms), "%lld",
           (long long)(SLOW_LOAD_MS * time_scale()));
  start_daemon(daemon, slow_ms,
               (const char *const[]){"--trust-domain", "process", NULL});
}

// One trust domain sends 18 slow loads at once (more than contexts: before
// loads had places of their own, they held every context). Only
// domain-loads (4) of them wait, the rest are refused for now, and another
// domain is served meanwhile (before, every call waited for the slow
// loads, and the other domain's own load also queued behind them for
// libuv's 4 threads). The stop, with the loads still running, kills the
// workers running them and halod exits 0 in time.
static void test_one_domain_loads_do_not_stall_another(void **state) {
  (void)state;
  halo_test_daemon_t daemon = {0};
  start_attacked_daemon(&daemon);
  attack_t attack;
  // Each connection sends fewer than session-requests (4): a fourth could
  // be dropped while its Hello's reply is still being sent (halod counts
  // that reply as waiting on the client).
  attack_start(&attack, &daemon, 1, 6, 3);
  assert_int_equal(wait_metric(&daemon, kWaiting, 4), 4);
  assert_int_equal(wait_metric(&daemon, kRefused, 14), 14);
  probe_during_attack(&daemon);
  attack_end(&attack);
  halo_test_daemon_stop(&daemon, SIGTERM);
  halo_test_daemon_cleanup(&daemon);
}

// Five trust domains send 4 slow loads each: 20 wait at once, more than
// contexts (16), each on a context of its own (loads), and none is
// refused; another domain is still served (without the spare contexts the
// 20 loads would hold every context).
static void test_many_domains_loads_wait_beside_contexts(void **state) {
  (void)state;
  halo_test_daemon_t daemon = {0};
  start_attacked_daemon(&daemon);
  attack_t attack;
  attack_start(&attack, &daemon, 5, 2, 2);
  assert_int_equal(wait_metric(&daemon, kWaiting, 20), 20);
  assert_int_equal(halo_test_admin_metric(&daemon, kRefused), 0);
  probe_during_attack(&daemon);
  attack_end(&attack);
  halo_test_daemon_stop(&daemon, SIGTERM);
  halo_test_daemon_cleanup(&daemon);
}

// One client's load on a thread of its own. The thread calls no cmocka
// assertion (a failed one would jump to the main thread's test from
// another thread, and the loaders still at the barrier would wait for the
// failed one forever): the client and the bytes are ready before it starts,
// and the main thread checks what it stored.
typedef struct loader_t {
  halo_client_t *client;
  pthread_barrier_t *barrier;
  uint8_t *data;
  size_t size;
  halo_status_code_t code;
  char message[256];
} loader_t;

static void *loader_main(void *arg) {
  loader_t *loader = arg;
  halo_executable_params_t params = {.format = HALO_EXECUTABLE_FORMAT_ELF,
                                     .data = loader->data,
                                     .size = loader->size};
  halo_executable_t *executable = NULL;
  pthread_barrier_wait(loader->barrier);
  halo_status_t status =
      halo_executable_create(loader->client, 0, &params, &executable);
  loader->code = halo_status_code(status);
  snprintf(loader->message, sizeof(loader->message), "%s",
           halo_status_message(status));
  halo_status_free(status);
  if (executable) halo_executable_release(executable);
  return NULL;
}

enum { LOADERS = 3 };

static void run_loaders(const halo_test_daemon_t *daemon, int32_t timeout_ms,
                        loader_t *loaders) {
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, LOADERS);
  for (uint32_t i = 0; i < LOADERS; ++i) {
    loaders[i] = (loader_t){.client = halo_test_connect(daemon, timeout_ms),
                            .barrier = &barrier};
    loaders[i].data =
        read_elf(LOAD_PLACES_TEST_SLOW, 2000 + i, &loaders[i].size);
  }
  pthread_t threads[LOADERS];
  for (uint32_t i = 0; i < LOADERS; ++i) {
    assert_int_equal(
        pthread_create(&threads[i], NULL, loader_main, &loaders[i]), 0);
  }
  for (uint32_t i = 0; i < LOADERS; ++i) {
    pthread_join(threads[i], NULL);
    halo_client_close(loaders[i].client);
    free(loaders[i].data);
  }
  pthread_barrier_destroy(&barrier);
}

// One domain (the test's uid) loads 3 slow executables at once from 3
// clients with domain-loads 1: two are refused for now, libhalo sends them
// again, and every load succeeds.
static void test_refused_loads_are_sent_again(void **state) {
  (void)state;
  halo_test_daemon_t daemon = {0};
  start_daemon(&daemon, "300",
               (const char *const[]){"--domain-loads", "1", NULL});
  loader_t loaders[LOADERS];
  run_loaders(&daemon, 30000, loaders);
  for (uint32_t i = 0; i < LOADERS; ++i) {
    if (loaders[i].code != HALO_STATUS_OK) {
      print_error("loader %u: %s\n", i, loaders[i].message);
    }
    assert_int_equal(loaders[i].code, HALO_STATUS_OK);
  }
  assert_true(halo_test_admin_metric(&daemon, kRefused) >= 1);
  assert_int_equal(halo_test_admin_metric(&daemon, kWaiting), 0);
  halo_test_daemon_stop(&daemon, SIGTERM);
  halo_test_daemon_cleanup(&daemon);
}

// A session of its own sends one slow load (bytes |tag|) and does not wait
// for it; returns once halod has it waiting. Close the returned connection
// when done.
static int send_slow_load(const halo_test_daemon_t *daemon, uint32_t tag) {
  int fd = halo_test_ipc_open_session(daemon->socket_path);
  size_t size;
  uint8_t *data = read_elf(LOAD_PLACES_TEST_SLOW, tag, &size);
  Halo__Wire__ExecutableCreate create;
  Halo__Wire__Request request;
  fill_create(&create, &request, data, size);
  assert_true(halo_test_ipc_send_request(fd, 100, &request));
  free(data);
  assert_int_equal(wait_metric(daemon, kWaiting, 1), 1);
  return fd;
}

// Past domain-loads a load is refused for now with a message naming the
// setting and retry_after_ms (what a client without libhalo sees); a
// libhalo client whose timeout ends first gets that refusal, not a hang.
static void test_refusal_names_the_setting(void **state) {
  (void)state;
  halo_test_daemon_t daemon = {0};
  start_daemon(&daemon, "3000",
               (const char *const[]){"--domain-loads", "1", NULL});
  // One slow load waiting.
  int fd = send_slow_load(&daemon, 3000);
  size_t size;
  Halo__Wire__ExecutableCreate create;
  Halo__Wire__Request request;

  halo_test_raw_t raw;
  halo_test_raw_open(&raw, daemon.listen_address, 0);
  halo_test_raw_hello(&raw);
  uint8_t *data = read_elf(LOAD_PLACES_TEST_SLOW, 3001, &size);
  fill_create(&create, &request, data, size);
  halo_wire_response_t *response = halo_test_raw_call(&raw, &request);
  assert_true(response->has_retry_after_ms);
  assert_true(response->retry_after_ms > 0);
  HALO_TEST_EXPECT_ERROR(response, HALO_STATUS_RESOURCE_EXHAUSTED,
                         "domain-loads 1");
  halo_test_raw_close(&raw);

  halo_client_t *client = halo_test_connect(&daemon, 300);
  halo_executable_params_t params = {
      .format = HALO_EXECUTABLE_FORMAT_ELF, .data = data, .size = size};
  halo_executable_t *executable = NULL;
  int64_t start = halo_clock_now_ns();
  halo_status_t status =
      halo_executable_create(client, 0, &params, &executable);
  int64_t took_ms = elapsed_ms(start);
  HALO_TEST_EXPECT_STATUS(status, HALO_STATUS_RESOURCE_EXHAUSTED,
                          "domain-loads 1");
  assert_null(executable);
  assert_true(took_ms >= 200);
  assert_true(took_ms < 2000 * time_scale());
  free(data);
  halo_client_close(client);
  close(fd);
  halo_test_daemon_stop(&daemon, SIGTERM);
  halo_test_daemon_cleanup(&daemon);
}

// A load on a device in halod itself (device-workers inline) that runs
// past the stop's wait for loads: halod leaves it to the process exit and
// exits 0 in time (before, the loop waited for it until the stop's
// watchdog ended halod with status 1).
static void test_inline_load_does_not_hold_the_stop(void **state) {
  (void)state;
  halo_test_daemon_t daemon = {0};
  start_daemon(&daemon, "8000",
               (const char *const[]){"--device-workers", "inline", NULL});
  int fd = send_slow_load(&daemon, 4000);
  int64_t start = halo_clock_now_ns();
  halo_test_daemon_stop(&daemon, SIGTERM);
  print_message("stopped in %lld ms with the load running\n",
                (long long)elapsed_ms(start));
  close(fd);
  halo_test_daemon_cleanup(&daemon);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_domain_loads_do_not_stall_another),
      cmocka_unit_test(test_many_domains_loads_wait_beside_contexts),
      cmocka_unit_test(test_refused_loads_are_sent_again),
      cmocka_unit_test(test_refusal_names_the_setting),
      cmocka_unit_test(test_inline_load_does_not_hold_the_stop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
