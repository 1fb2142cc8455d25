// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Submission rings drained by the device worker (docs/architecture.md
// "Rings in the worker"): with ring-consumer = worker (the default) the
// domain's worker takes a session's executions from its ring itself once
// halod granted it what they use; records it cannot take go back to halod,
// which answers them exactly as before. Real halod, real worker processes.
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/client.h"
#include "common/fd_channel.h"
#include "tests/support/halo_test.h"

#define DEADLINE_NS (10ll * 1000 * HALO_TEST_MS)
#define STEPS 200

typedef struct fixture_t {
  halo_test_daemon_t daemon;
} fixture_t;

static int setup(void **state) {
  fixture_t *fixture = calloc(1, sizeof(*fixture));
  halo_test_daemon_start(&fixture->daemon);
  *state = fixture;
  return 0;
}

// halod started with |args| (NULL-terminated).
static int setup_with(void **state, const char **args) {
  fixture_t *fixture = calloc(1, sizeof(*fixture));
  halo_test_daemon_start_with_args(&fixture->daemon, args);
  *state = fixture;
  return 0;
}

static int setup_halod_consumer(void **state) {
  const char *args[] = {"--ring-consumer", "halod", NULL};
  return setup_with(state, args);
}

static int setup_deadline(void **state) {
  const char *args[] = {"--submission-deadline-ms", "500", NULL};
  return setup_with(state, args);
}

static int setup_process_domains(void **state) {
  const char *args[] = {"--trust-domain", "process", NULL};
  return setup_with(state, args);
}

static int teardown(void **state) {
  fixture_t *fixture = *state;
  halo_test_daemon_stop(&fixture->daemon, SIGTERM);
  halo_test_daemon_cleanup(&fixture->daemon);
  free(fixture);
  return 0;
}

static uint64_t worker_executions(const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo_test_admin_status(daemon);
  uint64_t count = response->admin_status->ring_worker_executions;
  halo__wire__response__free_unpacked(response, NULL);
  return count;
}

// A recording that fills binding slot 0 (16 bytes) with |pattern|.
static halo_command_buffer_t *fill_slot(halo_client_t *client,
                                        uint32_t pattern) {
  halo_command_buffer_t *cb;
  HALO_TEST_ASSERT_OK(halo_command_buffer_begin(
      client, 0, HALO_COMMAND_BUFFER_REUSABLE, 1, &cb));
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(cb, halo_binding_ref(0, 0, 16),
                                               &pattern, sizeof(pattern)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  return cb;
}

// Executes |cb| on the default queue |steps| times back to back, bound to
// |buffer|, signaling |done| 1 .. |steps|, and waits for the last.
static void run_steps(halo_command_buffer_t *cb, halo_buffer_t *buffer,
                      halo_semaphore_t *done, uint64_t steps) {
  halo_binding_t binding = {buffer, 0, HALO_WHOLE_BUFFER};
  for (uint64_t step = 1; step <= steps; ++step) {
    halo_semaphore_value_t signal = {done, step};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, &signal, 1));
  }
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, steps, DEADLINE_NS));
}

// A device buffer, a recording that fills it with a pattern (fill_slot)
// and the semaphore its steps signal, of one client.
typedef struct filler_t {
  halo_buffer_t *buffer;
  halo_command_buffer_t *cb;
  halo_semaphore_t *done;
} filler_t;

static void filler_open(halo_client_t *client, uint32_t pattern,
                        filler_t *out) {
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &out->buffer));
  out->cb = fill_slot(client, pattern);
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &out->done));
}

static void expect_filled(halo_buffer_t *buffer, uint32_t pattern) {
  uint32_t words[4] = {0};
  HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, 0, words, sizeof(words)));
  for (int i = 0; i < 4; ++i) assert_int_equal(words[i], pattern);
}

// Steady executions with a new binding each step: after the first (which
// halod takes and grants), the worker takes them; every one runs.
static void test_worker_takes_steady_executions(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_buffer_t *buffers[2];
  for (int i = 0; i < 2; ++i) {
    HALO_TEST_ASSERT_OK(
        halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &buffers[i]));
  }
  halo_command_buffer_t *cb = fill_slot(client, 0x11223344u);
  halo_semaphore_t *done;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  uint64_t before = worker_executions(&fixture->daemon);
  for (uint64_t step = 1; step <= STEPS; ++step) {
    halo_binding_t binding = {buffers[step % 2], 0, HALO_WHOLE_BUFFER};
    halo_semaphore_value_t signal = {done, step};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, &signal, 1));
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, step, DEADLINE_NS));
  }
  expect_filled(buffers[0], 0x11223344u);
  expect_filled(buffers[1], 0x11223344u);
  uint64_t taken = worker_executions(&fixture->daemon) - before;
  // The first execution of each new handle goes through halod.
  assert_true(taken >= STEPS - 4);
  assert_true(taken <= STEPS);
  halo_semaphore_release(done);
  halo_command_buffer_release(cb);
  for (int i = 0; i < 2; ++i) halo_buffer_release(buffers[i]);
  halo_client_close(client);
}

// ring-consumer = halod: every record through halod, as before.
static void test_halod_consumer_takes_everything(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  filler_t filler;
  filler_open(client, 0x55667788u, &filler);
  run_steps(filler.cb, filler.buffer, filler.done, 50);
  expect_filled(filler.buffer, 0x55667788u);
  assert_int_equal(worker_executions(&fixture->daemon), 0);
  halo_client_close(client);  // releases what it holds
}

// Once the worker takes the session's executions, a record it must not run
// goes back to halod, which refuses it with the message it always gave;
// the ring carries on, and the worker takes the next good one.
static void test_bounced_records_get_halods_verdict(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_buffer_t *buffer, *small;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &buffer));
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &small));
  halo_command_buffer_t *cb = fill_slot(client, 0x01020304u);
  halo_semaphore_t *done;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  run_steps(cb, buffer, done, 10);
  halo_binding_t binding = {buffer, 0, HALO_WHOLE_BUFFER};
  uint64_t taken = worker_executions(&fixture->daemon);
  assert_true(taken >= 8);
  // A value that does not increase.
  halo_semaphore_value_t stale = {done, 10};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, &stale, 1),
      HALO_STATUS_INVALID_ARGUMENT, "not greater than");
  // A binding too short for what the recording fills (granted buffer, new
  // range).
  halo_binding_t short_binding = {small, 56, 8};
  halo_semaphore_value_t signal = {done, 11};
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, &short_binding, 1, NULL, 0, &signal, 1),
      HALO_STATUS_INVALID_ARGUMENT, "needs at least 16");
  // An unbound slot the recording uses.
  HALO_TEST_EXPECT_STATUS(
      halo_queue_execute(NULL, cb, NULL, 0, NULL, 0, &signal, 1),
      HALO_STATUS_INVALID_ARGUMENT, "missing");
  // A buffer the worker was granted, released after its execution: the
  // worker forgets it (revoked) and halod frees it once the worker let go.
  halo_buffer_t *gone;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &gone));
  halo_binding_t gone_binding = {gone, 0, HALO_WHOLE_BUFFER};
  for (uint64_t step = 11; step <= 12; ++step) {
    halo_semaphore_value_t next = {done, step};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, cb, &gone_binding, 1, NULL, 0, &next, 1));
  }
  halo_buffer_release(gone);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, 12, DEADLINE_NS));
  // The ring is fine, and the worker takes good records again: halod runs
  // what the client writes until the worker's resume reaches it (a record
  // at a time here, at most 100), then the worker takes every one.
  uint64_t step = 12;
  uint64_t before = worker_executions(&fixture->daemon);
  while (worker_executions(&fixture->daemon) == before && step < 112) {
    halo_semaphore_value_t next = {done, ++step};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, &next, 1));
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, step, DEADLINE_NS));
  }
  before = worker_executions(&fixture->daemon);
  for (uint64_t last = step + 8; step < last;) {
    halo_semaphore_value_t next = {done, ++step};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, &next, 1));
  }
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, step, DEADLINE_NS));
  assert_false(atomic_load(&client->ring.header->flags) &
               HALO_RING_FLAG_BROKEN);
  assert_true(worker_executions(&fixture->daemon) - before >= 8);
  expect_filled(buffer, 0x01020304u);
  halo_semaphore_release(done);
  halo_command_buffer_release(cb);
  halo_buffer_release(buffer);
  halo_buffer_release(small);
  halo_client_close(client);
}

// Work halod holds (a wait not reached when the record came, so the worker
// bounced it) is released by a signal the worker's own execution stores:
// the worker reports it, halod signals the semaphore and issues the work.
static void test_halod_work_waits_on_worker_signal(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_buffer_t *buffer, *second;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &buffer));
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &second));
  halo_command_buffer_t *producer = fill_slot(client, 0xaaaaaaaau);
  halo_command_buffer_t *consumer = fill_slot(client, 0xbbbbbbbbu);
  halo_semaphore_t *ready, *done;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &ready));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  halo_binding_t binding = {buffer, 0, HALO_WHOLE_BUFFER};
  halo_binding_t second_binding = {second, 0, HALO_WHOLE_BUFFER};
  // Warm up both so that the worker holds every handle.
  for (uint64_t step = 1; step <= 4; ++step) {
    halo_semaphore_value_t signal = {ready, step};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, producer, &binding, 1, NULL, 0, &signal, 1));
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(ready, step, DEADLINE_NS));
    halo_semaphore_value_t wait = {ready, step};
    halo_semaphore_value_t consumed = {done, step};
    HALO_TEST_ASSERT_OK(halo_queue_execute(NULL, consumer, &second_binding, 1,
                                           &wait, 1, &consumed, 1));
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, step, DEADLINE_NS));
  }
  for (uint64_t step = 5; step <= 40; ++step) {
    // The consumer first: its wait is not reached, halod holds it.
    halo_semaphore_value_t wait = {ready, step};
    halo_semaphore_value_t consumed = {done, step};
    HALO_TEST_ASSERT_OK(halo_queue_execute(NULL, consumer, &second_binding, 1,
                                           &wait, 1, &consumed, 1));
    halo_semaphore_value_t signal = {ready, step};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, producer, &binding, 1, NULL, 0, &signal, 1));
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, step, DEADLINE_NS));
  }
  expect_filled(buffer, 0xaaaaaaaau);
  expect_filled(second, 0xbbbbbbbbu);
  assert_true(worker_executions(&fixture->daemon) >= 36);
  halo_semaphore_release(ready);
  halo_semaphore_release(done);
  halo_command_buffer_release(producer);
  halo_command_buffer_release(consumer);
  halo_buffer_release(buffer);
  halo_buffer_release(second);
  halo_client_close(client);
}

// A process whose executions the worker took from its ring leaves its
// recording to the next process of its trust domain, as over halod's path:
// the domain keeps its worker while the worker still holds grants, and the
// recording reaches the cache once they are released.
static void test_work_outlives_the_process(void **state) {
  fixture_t *fixture = *state;
  char domain[32];
  snprintf(domain, sizeof(domain), "uid:%u", (unsigned)getuid());
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_buffer_t *buffer;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 64, 0, &buffer));
  halo_command_buffer_t *cb = fill_slot(client, 0x0badcafeu);
  assert_int_equal(halo_command_buffer_memo_hit(cb), 0);
  halo_semaphore_t *done;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  run_steps(cb, buffer, done, 20);
  assert_true(worker_executions(&fixture->daemon) >= 18);
  pid_t worker = halo_test_admin_worker_pid(&fixture->daemon, domain);
  assert_true(worker > 0);
  halo_client_close(client);  // without releasing: the session's end does
  // Time for the session's end, the worker's release of its grants and
  // halod's decision on the domain.
  halo_test_sleep_ms(300);
  assert_int_equal(halo_test_admin_worker_pid(&fixture->daemon, domain),
                   worker);
  halo_client_t *next = halo_test_connect(&fixture->daemon, 0);
  halo_command_buffer_t *again = fill_slot(next, 0x0badcafeu);
  assert_int_equal(halo_command_buffer_memo_hit(again), 1);
  halo_command_buffer_release(again);
  halo_client_close(next);
}

// A client running a REUSABLE recording of the test kernels' `armed` entry
// on a host-visible word (|flags|: [0] the mode, [1] set once an armed run
// started), signaling |done|.
typedef struct armed_t {
  halo_client_t *client;
  halo_executable_t *executable;
  halo_buffer_t *word;
  uint32_t *flags;
  halo_command_buffer_t *cb;
  halo_semaphore_t *done;
} armed_t;

// Connects and runs the recording harmlessly |steps| times (signals 1 ..
// |steps|): halod takes the first and grants it, the worker the others.
static void armed_start(fixture_t *fixture, uint64_t steps, armed_t *out) {
  out->client = halo_test_connect(&fixture->daemon, 0);
  out->executable = halo_test_load_kernels(out->client);
  out->word =
      halo_test_create_buffer(out->client, HALO_MEMORY_HOST_VISIBLE, 8, 0);
  out->flags = halo_buffer_host_pointer(out->word);
  halo_dispatch_arg_t args[1] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(out->word, 0, 8), NULL, 0},
  };
  halo_dispatch_params_t params = {
      .executable = out->executable,
      .entry = "armed",
      .grid = {1, 1, 1},
      .block = {1, 1, 1},
      .args = args,
      .arg_count = 1,
  };
  out->cb = halo_test_begin(out->client, HALO_COMMAND_BUFFER_REUSABLE, 0);
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(out->cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(out->cb));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(out->client, 0, 0, &out->done));
  for (uint64_t step = 1; step <= steps; ++step) {
    halo_semaphore_value_t signal = {out->done, step};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, out->cb, NULL, 0, NULL, 0, &signal, 1));
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(out->done, step, DEADLINE_NS));
  }
}

static void armed_finish(armed_t *armed) {
  halo_semaphore_release(armed->done);
  halo_command_buffer_release(armed->cb);
  halo_buffer_release(armed->word);
  halo_executable_release(armed->executable);
  halo_client_close(armed->client);
}

static uint32_t in_flight(const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo_test_admin_status(daemon);
  uint32_t count = response->admin_status->in_flight;
  halo__wire__response__free_unpacked(response, NULL);
  return count;
}

// An execution the worker took from the ring and still runs counts as in
// flight in haloctl status (and so for haloctl drain), as halod's own do.
static void test_status_counts_worker_executions(void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  fixture_t *fixture = *state;
  armed_t armed;
  armed_start(fixture, 2, &armed);
  uint32_t *flags = armed.flags;
  uint64_t taken = worker_executions(&fixture->daemon);
  assert_int_equal(in_flight(&fixture->daemon), 0);
  __atomic_store_n(&flags[0], 3, __ATOMIC_RELEASE);
  halo_semaphore_value_t signal = {armed.done, 3};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, armed.cb, NULL, 0, NULL, 0, &signal, 1));
  assert_true(
      HALO_TEST_POLL(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) == 1, 5000));
  assert_int_equal(in_flight(&fixture->daemon), 1);
  __atomic_store_n(&flags[0], 0, __ATOMIC_RELEASE);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(armed.done, 3, DEADLINE_NS));
  assert_true(HALO_TEST_POLL(in_flight(&fixture->daemon) == 0, 5000));
  // It was the worker's (halod's own executions are counted elsewhere).
  assert_int_equal(worker_executions(&fixture->daemon), taken + 1);
  armed_finish(&armed);
}

static uint64_t in_flight_metric(const halo_test_daemon_t *daemon) {
  return halo_test_admin_metric(daemon,
                                "halo_in_flight_submissions{device=\"0\"} ");
}

// The metric halo_in_flight_submissions counts what haloctl status counts:
// an execution the worker took from the ring and still runs, as halod's
// own (a dashboard or drain alert on it must not read less than status).
static void test_metric_counts_worker_executions(void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  fixture_t *fixture = *state;
  armed_t armed;
  armed_start(fixture, 2, &armed);
  uint32_t *flags = armed.flags;
  uint64_t taken = worker_executions(&fixture->daemon);
  assert_int_equal(in_flight(&fixture->daemon), 0);
  assert_int_equal(in_flight_metric(&fixture->daemon), 0);
  __atomic_store_n(&flags[0], 3, __ATOMIC_RELEASE);
  halo_semaphore_value_t signal = {armed.done, 3};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, armed.cb, NULL, 0, NULL, 0, &signal, 1));
  assert_true(
      HALO_TEST_POLL(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) == 1, 5000));
  // It spins until released: both count it, and only it.
  assert_int_equal(in_flight(&fixture->daemon), 1);
  assert_int_equal(in_flight_metric(&fixture->daemon), 1);
  __atomic_store_n(&flags[0], 0, __ATOMIC_RELEASE);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(armed.done, 3, DEADLINE_NS));
  assert_true(HALO_TEST_POLL(in_flight(&fixture->daemon) == 0 &&
                                 in_flight_metric(&fixture->daemon) == 0,
                             5000));
  // It was the worker's, not halod's.
  assert_int_equal(worker_executions(&fixture->daemon), taken + 1);
  armed_finish(&armed);
}

// A REUSABLE recording of the test kernels' `armed` entry runs harmlessly
// (halod takes it and grants it), then, armed with |mode| (1 spin, 2
// crash), the worker takes it from the ring itself and it never completes:
// the wait fails with |code| naming the ring execution, the fault is
// charged to this process, halod carries on and a new session works.
static void fault_in_a_ring_execution(fixture_t *fixture, uint32_t mode,
                                      halo_status_code_t code,
                                      const char *substring) {
  armed_t armed;
  armed_start(fixture, 3, &armed);
  uint32_t *flags = armed.flags;
  halo_semaphore_t *done = armed.done;
  uint64_t taken = worker_executions(&fixture->daemon);
  assert_true(taken >= 2);
  __atomic_store_n(&flags[0], mode, __ATOMIC_RELEASE);
  halo_semaphore_value_t signal = {done, 4};
  halo_status_t status =
      halo_queue_execute(NULL, armed.cb, NULL, 0, NULL, 0, &signal, 1);
  const char *const expected[] = {"ring execution", substring, NULL};
  if (status) {
    // The worker died before it passed the record (a crash can be that
    // quick): the call itself reports the session's loss, naming it.
    halo_test_expect_status_all(status, HALO_STATUS_SESSION_LOST, expected,
                                "the execute of the faulting execution");
    status = halo_semaphore_wait(done, 4, DEADLINE_NS);
    assert_int_not_equal(halo_status_consume_code(status), HALO_STATUS_OK);
  } else {
    status = halo_semaphore_wait(done, 4, DEADLINE_NS);
    halo_test_expect_status_all(status, code, expected,
                                "the wait for the faulting ring execution");
  }
  assert_int_equal(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE), 1);
  uint32_t process_faults = 0;
  assert_true(halo_test_admin_client_faults(&fixture->daemon, getpid(),
                                            &process_faults, NULL));
  assert_int_equal(process_faults, 1);
  armed_finish(&armed);
  // halod serves the domain again, with a fresh worker.
  halo_client_t *next = halo_test_connect(&fixture->daemon, 0);
  HALO_TEST_ASSERT_OK(halo_client_ping(next));
  halo_client_close(next);
}

static void test_deadline_names_the_ring_execution(void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  fault_in_a_ring_execution(*state, 1, HALO_STATUS_DEADLINE_EXCEEDED,
                            "deadline");
}

static void test_crash_names_the_ring_execution(void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  fault_in_a_ring_execution(*state, 2, HALO_STATUS_DEVICE_LOST,
                            "Segmentation fault");
}

// Stops halod's loop thread (its main thread) while its other threads (the
// readers of its workers' links) go on, so that what they queue meanwhile
// waits for the loop together: with ptrace where the test may trace its
// child, else the whole process stops (the readers then read on SIGCONT,
// and the loop may take their messages one by one). Returns how.
static bool pause_loop(const halo_test_daemon_t *daemon) {
  pid_t pid = daemon->pid;
  if (halo_test_pause_loop(pid)) return true;
  print_message("ptrace unavailable (%s): stopping all of halod\n",
                strerror(errno));
  assert_int_equal(kill(pid, SIGSTOP), 0);
  return false;
}

static void resume_loop(const halo_test_daemon_t *daemon, bool traced) {
  if (traced) {
    halo_test_resume_loop(daemon->pid);
  } else {
    assert_int_equal(kill(daemon->pid, SIGCONT), 0);
  }
}

// A worker that reports a ring execution's completion and then dies: halod
// reads the report before it handles the loss, although both wait for its
// loop at once (its loop is paused meanwhile). The execution is no longer in
// the flight table, and its semaphore is one whose creator released it
// (so the sessions' loss would not fail it): without the report its value
// would never come, and another domain's waiter would sleep out its
// timeout.
static void test_report_before_loss_is_read(void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  fixture_t *fixture = *state;
  halo_client_t *creator = halo_test_connect(&fixture->daemon, 0);
  halo_semaphore_t *created;
  HALO_TEST_ASSERT_OK(
      halo_semaphore_create(creator, 0, HALO_OBJECT_FLAG_EXPORTABLE, &created));
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_semaphore_export(created, &token));
  char hex[2 * sizeof(token.bytes) + 1];
  halo_token_format(&token, hex);
  // Another trust domain (another process) waits for the value 3.
  halo_test_process_t waiter = {0};
  const char *waiter_args[] = {"wait", hex, "3", "5000", NULL};
  halo_test_spawn_peer(&waiter, fixture->daemon.listen_address, waiter_args);
  char line[128];
  halo_test_read_line(&waiter, line, sizeof(line), 5000);
  assert_string_equal(line, "ready");

  // The signaling session's executions do not wait for a verdict (halod
  // is stopped while they go).
  setenv("HALO_RING_ASYNC", "1", 1);
  armed_t armed;
  armed_start(fixture, 2, &armed);
  unsetenv("HALO_RING_ASYNC");
  halo_semaphore_t *imported;
  HALO_TEST_ASSERT_OK(halo_semaphore_import(armed.client, &token, &imported));
  uint32_t *flags = armed.flags;
  // Granted to the worker by an execution halod takes.
  for (uint64_t value = 1; value <= 2; ++value) {
    halo_semaphore_value_t signals[2] = {{imported, value},
                                         {armed.done, 2 + value}};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, armed.cb, NULL, 0, NULL, 0, signals, 2));
    HALO_TEST_ASSERT_OK(halo_semaphore_wait(imported, value, DEADLINE_NS));
  }
  halo_semaphore_release(created);  // no session created it any more
  HALO_TEST_ASSERT_OK(halo_client_ping(creator));

  bool traced = pause_loop(&fixture->daemon);
  // The worker takes it, runs it until released and reports it.
  __atomic_store_n(&flags[1], 0, __ATOMIC_RELEASE);
  __atomic_store_n(&flags[0], 3, __ATOMIC_RELEASE);
  halo_semaphore_value_t three = {imported, 3};
  halo_status_t status =
      halo_queue_execute(NULL, armed.cb, NULL, 0, NULL, 0, &three, 1);
  bool started =
      HALO_TEST_POLL(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) == 1, 5000);
  __atomic_store_n(&flags[0], 0, __ATOMIC_RELEASE);
  halo_test_sleep_ms(100);  // the report goes into halod's link
  // Then the worker crashes.
  __atomic_store_n(&flags[1], 0, __ATOMIC_RELEASE);
  __atomic_store_n(&flags[0], 2, __ATOMIC_RELEASE);
  halo_semaphore_value_t crash = {armed.done, 5};
  halo_status_t crashed =
      halo_queue_execute(NULL, armed.cb, NULL, 0, NULL, 0, &crash, 1);
  bool crash_started =
      HALO_TEST_POLL(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) == 1, 5000);
  halo_test_sleep_ms(200);  // the worker is gone, its loss posted
  resume_loop(&fixture->daemon, traced);
  HALO_TEST_ASSERT_OK(status);
  halo_status_free(crashed);
  assert_true(started);
  assert_true(crash_started);

  int code = halo_test_process_wait(&waiter, 10000);
  print_message("the other domain's wait for the released semaphore: %s\n",
                halo_status_code_name((halo_status_code_t)code));
  assert_int_equal(code, HALO_STATUS_OK);
  halo_test_process_cleanup(&waiter);
  halo_semaphore_release(imported);
  armed_finish(&armed);
  halo_client_close(creator);
}

// An asynchronous execute published to the worker's ring and never taken
// (the worker is stopped, then killed) after |steps| the worker took fails
// its signals with the session's loss, as a submission halod held would:
// another domain's semaphore it signals wakes its waiter with DEVICE_LOST,
// not at the waiter's timeout.
static void lost_session_fails_untaken_records(fixture_t *fixture,
                                               uint64_t steps) {
  // Another domain creates the semaphore, a third waits for 1.
  halo_test_process_t creator = {0}, waiter = {0};
  const char *creator_args[] = {"create", "0", NULL};
  halo_test_spawn_peer(&creator, fixture->daemon.listen_address, creator_args);
  char line[128];
  halo_test_read_line(&creator, line, sizeof(line), 5000);
  assert_int_equal(strncmp(line, "token ", 6), 0);
  const char *hex = line + 6;
  const char *waiter_args[] = {"wait", hex, "1", "5000", NULL};
  halo_test_spawn_peer(&waiter, fixture->daemon.listen_address, waiter_args);
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_token_parse(hex, &token));
  char ready[128];
  halo_test_read_line(&waiter, ready, sizeof(ready), 5000);
  assert_string_equal(ready, "ready");

  setenv("HALO_RING_ASYNC", "1", 1);
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  unsetenv("HALO_RING_ASYNC");
  halo_semaphore_t *foreign;
  HALO_TEST_ASSERT_OK(halo_semaphore_import(client, &token, &foreign));
  filler_t filler;
  filler_open(client, 7, &filler);
  run_steps(filler.cb, filler.buffer, filler.done, steps);  // the worker's
  char domain[32];
  snprintf(domain, sizeof(domain), "pid:%d", (int)getpid());
  pid_t worker = halo_test_admin_worker_pid(&fixture->daemon, domain);
  assert_true(worker > 0);

  assert_int_equal(kill(worker, SIGSTOP), 0);
  halo_binding_t binding = {filler.buffer, 0, HALO_WHOLE_BUFFER};
  halo_semaphore_value_t signal = {foreign, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, filler.cb, &binding, 1, NULL, 0, &signal, 1));
  assert_int_equal(kill(worker, SIGKILL), 0);
  int64_t start = halo_test_now_ns();
  int code = halo_test_process_wait(&waiter, 10000);
  print_message("the other domain's waiter: %s after %lld ms\n",
                halo_status_code_name((halo_status_code_t)code),
                (long long)((halo_test_now_ns() - start) / HALO_TEST_MS));
  assert_int_equal(code, HALO_STATUS_DEVICE_LOST);
  halo_test_process_cleanup(&waiter);
  halo_test_process_cleanup(&creator);
  halo_client_close(client);
}

static void test_lost_session_fails_untaken_records(void **state) {
  lost_session_fails_untaken_records(*state, 3);
}

// ... after the worker went round the ring several times: halod, which
// learns the worker's head only at a bounce, finds where the worker
// stopped between its own last head and the client's tail (it took a
// position more than a ring ahead of its own for a broken ring, and the
// record's signals never came).
static void test_lost_session_fails_untaken_records_past_a_wrap(void **state) {
  lost_session_fails_untaken_records(*state, 2000);
}

// A lost session's ring ended with the loss, and it gets no other: a new
// one would run what the socket refuses (SESSION_LOST). Before the loss a
// second ring is refused as well (one per session).
static void test_lost_session_gets_no_second_ring(void **state) {
  fixture_t *fixture = *state;
  halo_test_raw_t raw;
  halo_test_raw_open(&raw, fixture->daemon.listen_address, 0);
  halo_test_raw_hello(&raw);
  int fd = halo_test_fd_open_session(&raw);
  uint64_t size = 0;
  close(halo_test_fd_get(fd, HALO_FD_REQUEST_RING, 0, &size));
  halo_fd_reply_t reply;
  int ring = -1;
  assert_int_equal(
      halo_test_fd_transact(fd, HALO_FD_REQUEST_RING, 0, NULL, &reply, &ring),
      0);
  assert_int_equal(reply.code, HALO_STATUS_FAILED_PRECONDITION);
  assert_int_equal(ring, -1);
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__QueueCreate create = HALO__WIRE__QUEUE_CREATE__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_CREATE;
  request.queue_create = &create;
  halo__wire__response__free_unpacked(
      HALO_TEST_EXPECT_OK(halo_test_raw_call(&raw, &request)), NULL);

  char domain[32];
  snprintf(domain, sizeof(domain), "pid:%d", (int)getpid());
  pid_t worker = halo_test_admin_worker_pid(&fixture->daemon, domain);
  assert_true(worker > 0);
  assert_int_equal(kill(worker, SIGKILL), 0);
  Halo__Wire__Request ping = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Ping ping_body = HALO__WIRE__PING__INIT;
  ping.body_case = HALO__WIRE__REQUEST__BODY_PING;
  ping.ping = &ping_body;
  bool lost = false;
  for (int i = 0; i < 250 && !lost; ++i) {
    halo_wire_response_t *response = halo_test_raw_call(&raw, &ping);
    lost = response->code == HALO_STATUS_SESSION_LOST;
    halo__wire__response__free_unpacked(response, NULL);
    if (!lost) halo_test_sleep_ms(20);
  }
  assert_true(lost);
  assert_int_equal(
      halo_test_fd_transact(fd, HALO_FD_REQUEST_RING, 0, NULL, &reply, &ring),
      0);
  print_message("a ring after the session's loss: %s: %s\n",
                halo_status_code_name((halo_status_code_t)reply.code),
                reply.message);
  assert_int_equal(reply.code, HALO_STATUS_SESSION_LOST);
  assert_int_equal(ring, -1);
  close(fd);
  halo_test_raw_close(&raw);
}

// An execution with more signals than a worker's record of the executions
// in flight holds (4) goes to halod, which runs it (so that a lost worker
// never leaves one of its signals unfailed); the worker takes the
// one-signal executions between them.
static void test_many_signals_go_to_halod(void **state) {
  fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  filler_t filler;
  filler_open(client, 0x05050505u, &filler);
  run_steps(filler.cb, filler.buffer, filler.done, 3);
  halo_semaphore_value_t signals[5];
  for (int i = 0; i < 5; ++i) {
    HALO_TEST_ASSERT_OK(
        halo_semaphore_create(client, 0, 0, &signals[i].semaphore));
  }
  halo_binding_t binding = {filler.buffer, 0, HALO_WHOLE_BUFFER};
  uint64_t before = worker_executions(&fixture->daemon);
  for (uint64_t step = 1; step <= 10; ++step) {
    for (int i = 0; i < 5; ++i) signals[i].value = step;
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, filler.cb, &binding, 1, NULL, 0, signals, 5));
  }
  for (int i = 0; i < 5; ++i) {
    HALO_TEST_ASSERT_OK(
        halo_semaphore_wait(signals[i].semaphore, 10, DEADLINE_NS));
  }
  assert_int_equal(worker_executions(&fixture->daemon), before);
  // One signal: the worker's again.
  for (uint64_t step = 4; step <= 12; ++step) {
    halo_semaphore_value_t one = {filler.done, step};
    HALO_TEST_ASSERT_OK(
        halo_queue_execute(NULL, filler.cb, &binding, 1, NULL, 0, &one, 1));
  }
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(filler.done, 12, DEADLINE_NS));
  assert_true(
      HALO_TEST_POLL(worker_executions(&fixture->daemon) > before, 5000));
  expect_filled(filler.buffer, 0x05050505u);
  halo_client_close(client);
}

static int setup_no_caches(void **state) {
  const char *args[] = {"--executable-cache-entries", "0",
                        "--memo-cache-entries", "0", NULL};
  return setup_with(state, args);
}

// The domain's last session ended while the worker ran its execution (the
// grants keep the domain); the worker reports the completion and the
// grants' release, and dies. halod handles the reports first, and the
// release would end the idle domain that the loss is handling: it ends
// after the loss instead (under ASan a use after free otherwise), and
// halod serves on.
static void test_loss_after_idle_domain_reports(void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  fixture_t *fixture = *state;
  armed_t armed;
  armed_start(fixture, 2, &armed);
  // The flags stay writable after the client unmaps its buffer.
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t base = (uintptr_t)armed.flags & ~(uintptr_t)(page - 1);
  void *alias = mremap((void *)base, 0, (size_t)page, MREMAP_MAYMOVE);
  assert_true(alias != MAP_FAILED);
  uint32_t *flags =
      (uint32_t *)((uintptr_t)alias + ((uintptr_t)armed.flags - base));
  char domain[32];
  snprintf(domain, sizeof(domain), "uid:%u", (unsigned)getuid());
  pid_t worker = halo_test_admin_worker_pid(&fixture->daemon, domain);
  assert_true(worker > 0);
  __atomic_store_n(&flags[1], 0, __ATOMIC_RELEASE);
  __atomic_store_n(&flags[0], 3, __ATOMIC_RELEASE);
  halo_semaphore_value_t signal = {armed.done, 3};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, armed.cb, NULL, 0, NULL, 0, &signal, 1));
  assert_true(
      HALO_TEST_POLL(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) == 1, 5000));
  halo_client_close(armed.client);  // the domain has no session now
  halo_test_sleep_ms(300);
  bool traced = pause_loop(&fixture->daemon);
  __atomic_store_n(&flags[0], 0, __ATOMIC_RELEASE);  // completes
  halo_test_sleep_ms(300);  // COMPLETE and RELEASED are on the link
  assert_int_equal(kill(worker, SIGKILL), 0);
  halo_test_sleep_ms(300);
  resume_loop(&fixture->daemon, traced);
  assert_true(HALO_TEST_POLL(
      halo_test_admin_worker_pid(&fixture->daemon, domain) != worker, 5000));
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_client_close(client);
  munmap(alias, (size_t)page);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_worker_takes_steady_executions,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_halod_consumer_takes_everything,
                                      setup_halod_consumer, teardown),
      cmocka_unit_test_setup_teardown(test_bounced_records_get_halods_verdict,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_halod_work_waits_on_worker_signal,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_work_outlives_the_process, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_status_counts_worker_executions,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_metric_counts_worker_executions,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_deadline_names_the_ring_execution,
                                      setup_deadline, teardown),
      cmocka_unit_test_setup_teardown(test_crash_names_the_ring_execution,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_report_before_loss_is_read,
                                      setup_process_domains, teardown),
      cmocka_unit_test_setup_teardown(test_lost_session_fails_untaken_records,
                                      setup_process_domains, teardown),
      cmocka_unit_test_setup_teardown(
          test_lost_session_fails_untaken_records_past_a_wrap,
          setup_process_domains, teardown),
      cmocka_unit_test_setup_teardown(test_lost_session_gets_no_second_ring,
                                      setup_process_domains, teardown),
      cmocka_unit_test_setup_teardown(test_loss_after_idle_domain_reports,
                                      setup_no_caches, teardown),
      cmocka_unit_test_setup_teardown(test_many_signals_go_to_halod, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
