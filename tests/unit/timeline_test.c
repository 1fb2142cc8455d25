// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the timeline slot protocol (common/timeline.h), without a
// daemon: waiters on threads of this process and in forked children sharing
// a memfd page, the writer in this process. Covers signal, fail (first
// failure wins, reached values stay OK), retire, timeouts, ANY and ALL, the
// liveness fd, and lost wake-ups under a ping-pong.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "common/timeline.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/memfd.h"

#define MS (1000000ll)
#define DEADLINE_MS 5000

// ---------------------------------------------------------------- helpers

typedef struct page_fixture_t {
  int fd;
  halo_timeline_page_t *page;  // read-write mapping (the "daemon" side)
} page_fixture_t;

static int page_setup(void **state) {
  page_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  halo_status_t status =
      halo_memfd_create("timeline-test", HALO_TIMELINE_PAGE_SIZE, &fixture->fd);
  assert_null(status);
  void *mapping = NULL;
  assert_null(halo_memfd_map(fixture->fd, HALO_TIMELINE_PAGE_SIZE,
                             PROT_READ | PROT_WRITE, &mapping));
  fixture->page = mapping;
  halo_timeline_page_initialize(fixture->page, 77);
  // As the daemon does: clients may only map it read-only from now on.
  assert_null(halo_memfd_seal(fixture->fd, HALO_SEALS_DAEMON_OWNED));
  *state = fixture;
  return 0;
}

static int page_teardown(void **state) {
  page_fixture_t *fixture = *state;
  munmap(fixture->page, HALO_TIMELINE_PAGE_SIZE);
  close(fixture->fd);
  free(fixture);
  return 0;
}

static pid_t current_tid(void) {
  return (pid_t)syscall(SYS_gettid);
}

// Whether thread |tid| of |pid| sleeps in a futex call (or, if /proc hides
// the call, sleeps at all).
static bool sleeping_in_futex(pid_t pid, pid_t tid) {
  char path[96];
  char text[256];
  snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t got = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (got > 0) {
      text[got] = '\0';
      if (strncmp(text, "running", 7) == 0) return false;
      long number = strtol(text, NULL, 10);
      return number == SYS_futex || number == 449 /* futex_waitv */;
    }
  }
  snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t got = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (got <= 0) return false;
  text[got] = '\0';
  const char *paren = strrchr(text, ')');
  return paren && paren[1] == ' ' && paren[2] == 'S';
}

static void sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * MS};
  nanosleep(&ts, NULL);
}

// Polls until |pid|/|tid| sleeps; fails the test after DEADLINE_MS.
static void await_sleeping(pid_t pid, pid_t tid) {
  int64_t deadline = halo_clock_now_ns() + DEADLINE_MS * MS;
  while (!sleeping_in_futex(pid, tid)) {
    if (halo_clock_now_ns() > deadline) {
      print_error("thread %d of %d never went to sleep\n", tid, pid);
      fail();
    }
    sleep_ms(1);
  }
}

// A waiter on its own thread.
typedef struct waiter_t {
  pthread_t thread;
  halo_timeline_wait_target_t targets[4];
  size_t count;
  bool wait_any;
  int64_t deadline_ns;
  int liveness_fd;
  _Atomic pid_t tid;
  _Atomic bool done;
  halo_timeline_wait_result_t result;
  size_t index;
  int32_t failure;
  int64_t finished_ns;
} waiter_t;

static void *waiter_main(void *arg) {
  waiter_t *waiter = arg;
  atomic_store(&waiter->tid, current_tid());
  waiter->result = halo_timeline_wait(
      waiter->targets, waiter->count, waiter->wait_any, waiter->deadline_ns,
      waiter->liveness_fd, &waiter->index, &waiter->failure);
  waiter->finished_ns = halo_clock_now_ns();
  atomic_store(&waiter->done, true);
  return NULL;
}

// Starts a waiter on |count| targets and returns once it sleeps.
static void waiter_start(waiter_t *waiter,
                         const halo_timeline_wait_target_t *targets,
                         size_t count, bool wait_any) {
  memset(waiter, 0, sizeof(*waiter));
  memcpy(waiter->targets, targets, count * sizeof(*targets));
  waiter->count = count;
  waiter->wait_any = wait_any;
  waiter->deadline_ns = INT64_MAX;
  waiter->liveness_fd = -1;
  assert_int_equal(pthread_create(&waiter->thread, NULL, waiter_main, waiter),
                   0);
  while (atomic_load(&waiter->tid) == 0) sched_yield();
  await_sleeping(getpid(), atomic_load(&waiter->tid));
  assert_false(atomic_load(&waiter->done));
}

static void waiter_join(waiter_t *waiter) {
  int64_t deadline = halo_clock_now_ns() + DEADLINE_MS * MS;
  while (!atomic_load(&waiter->done)) {
    if (halo_clock_now_ns() > deadline) {
      print_error("waiter did not wake within %d ms\n", DEADLINE_MS);
      fail();  // the thread leaks; the process is failing anyway
    }
    sleep_ms(1);
  }
  assert_int_equal(pthread_join(waiter->thread, NULL), 0);
}

static halo_timeline_wait_target_t target(halo_timeline_slot_t *slot,
                                          uint32_t generation, uint64_t value) {
  halo_timeline_wait_target_t result = {
      .slot = slot, .generation = generation, .value = value};
  return result;
}

// ---------------------------------------------------------------- layout

// The spin window follows the thread's previous wait: twice it, within
// [SPIN_NS, cap]; only the minimum after a long (or no) wait; never past
// the cap (0: no spin at all).
static void test_spin_follows_the_previous_wait(void **state) {
  (void)state;
  const int64_t cap = HALO_TIMELINE_SPIN_MAX_NS;
  assert_int_equal(halo_timeline_spin_window_ns(0, cap), HALO_TIMELINE_SPIN_NS);
  assert_int_equal(halo_timeline_spin_window_ns(1000, cap),
                   HALO_TIMELINE_SPIN_NS);
  assert_int_equal(halo_timeline_spin_window_ns(30000, cap), 60000);
  assert_int_equal(halo_timeline_spin_window_ns(400000, cap), 800000);
  assert_int_equal(halo_timeline_spin_window_ns(cap * 3 / 4, cap), cap);
  assert_int_equal(halo_timeline_spin_window_ns(cap, cap), cap);
  assert_int_equal(halo_timeline_spin_window_ns(cap + 1, cap),
                   HALO_TIMELINE_SPIN_NS);
  assert_int_equal(halo_timeline_spin_window_ns(50000000, cap),
                   HALO_TIMELINE_SPIN_NS);
  // A lower cap (HALO_WAIT_SPIN_MAX_US=200).
  assert_int_equal(halo_timeline_spin_window_ns(150000, 200000), 200000);
  assert_int_equal(halo_timeline_spin_window_ns(250000, 200000),
                   HALO_TIMELINE_SPIN_NS);
  // Below the minimum: the cap wins; 0 sleeps at once.
  assert_int_equal(halo_timeline_spin_window_ns(0, 5000), 5000);
  assert_int_equal(halo_timeline_spin_window_ns(3000, 5000), 5000);
  assert_int_equal(halo_timeline_spin_window_ns(0, 0), 0);
  assert_int_equal(halo_timeline_spin_window_ns(100000, 0), 0);
  // This process's cap: the default unless the environment sets one.
  if (!getenv("HALO_WAIT_SPIN_MAX_US")) {
    assert_int_equal(halo_timeline_spin_max_ns(), cap);
    assert_int_equal(halo_timeline_spin_ns(30000), 60000);
  }
}

// HALO_WAIT_SPIN_MAX_US: whole microseconds within limits, else refused
// (the default stays).
static void test_spin_cap_from_the_environment(void **state) {
  (void)state;
  int64_t ns = -7;
  assert_true(halo_timeline_spin_max_parse("0", &ns));
  assert_int_equal(ns, 0);
  assert_true(halo_timeline_spin_max_parse("200", &ns));
  assert_int_equal(ns, 200000);
  assert_true(halo_timeline_spin_max_parse("100000", &ns));
  assert_int_equal(ns, HALO_TIMELINE_SPIN_MAX_LIMIT_NS);
  ns = -7;
  const char *refused[] = {"",    "-1", "100001", "2ms",
                           "1.5", " 5", "abc",    "99999999999999999999999"};
  for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); ++i) {
    assert_false(halo_timeline_spin_max_parse(refused[i], &ns));
    assert_int_equal(ns, -7);
  }
  assert_false(halo_timeline_spin_max_parse(NULL, &ns));
}

// The cap a fresh process of this test reads from HALO_WAIT_SPIN_MAX_US
// set to |value| (NULL: unset), and what it wrote to stderr.
static int64_t spin_cap_in_child(const char *value, char *err, size_t size) {
  int out_pipe[2], err_pipe[2];
  assert_int_equal(pipe(out_pipe), 0);
  assert_int_equal(pipe(err_pipe), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    if (value) {
      setenv("HALO_WAIT_SPIN_MAX_US", value, 1);
    } else {
      unsetenv("HALO_WAIT_SPIN_MAX_US");
    }
    char *args[] = {"timeline_test", "--print-spin-cap", NULL};
    execv("/proc/self/exe", args);
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  char out[64] = {0};
  ssize_t got = read(out_pipe[0], out, sizeof(out) - 1);
  size_t err_length = 0;
  for (ssize_t n;
       err_length + 1 < size &&
       (n = read(err_pipe[0], err + err_length, size - 1 - err_length)) > 0;) {
    err_length += (size_t)n;
  }
  err[err_length] = '\0';
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_true(got > 0);
  return strtoll(out, NULL, 10);
}

// A process takes its cap from HALO_WAIT_SPIN_MAX_US: 0 (never spin) and
// 500 us as given; a value that is no number of microseconds keeps the
// default and says so on stderr, naming the variable.
static void test_spin_cap_reaches_the_process(void **state) {
  (void)state;
  char err[1024];
  assert_int_equal(spin_cap_in_child(NULL, err, sizeof(err)),
                   HALO_TIMELINE_SPIN_MAX_NS);
  assert_int_equal(spin_cap_in_child("0", err, sizeof(err)), 0);
  assert_int_equal(spin_cap_in_child("500", err, sizeof(err)), 500000);
  assert_null(strstr(err, "HALO_WAIT_SPIN_MAX_US"));
  assert_int_equal(spin_cap_in_child("2ms", err, sizeof(err)),
                   HALO_TIMELINE_SPIN_MAX_NS);
  assert_non_null(strstr(err, "HALO_WAIT_SPIN_MAX_US=2ms"));
}

// Something done at most once an interval: due the first time, not again
// within the interval, due again once it passed (halo_clock_due).
static void test_clock_due_once_an_interval(void **state) {
  (void)state;
  int64_t last = 0;
  assert_true(halo_clock_due(&last, 5000, 1000));
  assert_int_equal(last, 5000);
  assert_false(halo_clock_due(&last, 5999, 1000));
  assert_int_equal(last, 5000);
  assert_true(halo_clock_due(&last, 6000, 1000));
  assert_int_equal(last, 6000);
}

// A serving thread spins its whole window after a gap within it, not at all
// after a longer one (halo_clock_spin_window_ns).
static void test_server_spin_follows_the_previous_gap(void **state) {
  (void)state;
  assert_int_equal(halo_clock_spin_window_ns(0, 50000), 50000);
  assert_int_equal(halo_clock_spin_window_ns(50000, 50000), 50000);
  assert_int_equal(halo_clock_spin_window_ns(50001, 50000), 0);
  assert_int_equal(halo_clock_spin_window_ns(1100000, 50000), 0);
  assert_int_equal(halo_clock_spin_window_ns(10, 0), 0);
  // Two gaps: either within the window spins (a long and a short gap
  // alternating), both past it does not.
  // Each gap runs from the end of the work before (done_ns) to the arrival.
  halo_clock_gaps_t gaps = {0, 0, 0};
  assert_int_equal(halo_clock_gaps_spin_ns(&gaps, 50000), 50000);
  gaps.done_ns = 1000000;
  halo_clock_gaps_arrived(&gaps, 3000000);  // 2 ms
  assert_int_equal(gaps.last_ns, 2000000);
  assert_int_equal(halo_clock_gaps_spin_ns(&gaps, 50000), 50000);
  gaps.done_ns = 3100000;
  halo_clock_gaps_arrived(&gaps, 6100000);  // 3 ms
  assert_int_equal(halo_clock_gaps_spin_ns(&gaps, 50000), 0);
  gaps.done_ns = 6500000;                   // the work took 400 us
  halo_clock_gaps_arrived(&gaps, 6508000);  // 8 us after it ended
  assert_int_equal(halo_clock_gaps_spin_ns(&gaps, 50000), 50000);
  gaps.done_ns = 6600000;
  halo_clock_gaps_arrived(&gaps, 8600000);  // 2 ms: the 8 us one still counts
  assert_int_equal(halo_clock_gaps_spin_ns(&gaps, 50000), 50000);
}

static void test_page_layout(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_page_t *page = fixture->page;
  assert_int_equal(page->header.magic, HALO_TIMELINE_PAGE_MAGIC);
  assert_int_equal(page->header.incarnation, 77);
  assert_int_equal(page->header.slot_count, HALO_TIMELINE_SLOTS_PER_PAGE);
  assert_int_equal(HALO_TIMELINE_SLOTS_PER_PAGE, 63);
  assert_int_equal(offsetof(halo_timeline_page_t, slots), 64);
  assert_int_equal((uintptr_t)&page->slots[1] - (uintptr_t)&page->slots[0], 64);
  // Every slot starts idle: value 0, no failure, generation 0.
  for (size_t i = 0; i < HALO_TIMELINE_SLOTS_PER_PAGE; ++i) {
    assert_int_equal(atomic_load(&page->slots[i].value), 0);
    assert_int_equal(atomic_load(&page->slots[i].failure), 0);
    assert_int_equal(atomic_load(&page->slots[i].generation), 0);
  }
}

// ---------------------------------------------------------------- one thread

static void test_activate_and_read(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[3];
  uint32_t generation = halo_timeline_slot_activate(slot, 5);
  uint64_t value = 0;
  int32_t failure = -1;
  assert_int_equal(
      halo_timeline_slot_read(slot, generation, 5, &value, &failure),
      HALO_TIMELINE_WAIT_OK);
  assert_int_equal(value, 5);
  assert_int_equal(failure, 0);
  // Below the target without failure is still OK (the caller compares).
  assert_int_equal(
      halo_timeline_slot_read(slot, generation, 6, &value, &failure),
      HALO_TIMELINE_WAIT_OK);
  assert_int_equal(value, 5);
  assert_int_equal(
      halo_timeline_slot_read(slot, generation + 1, 1, &value, &failure),
      HALO_TIMELINE_WAIT_RETIRED);
}

static void test_signal_advances_value_and_epoch(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[0];
  uint32_t generation = halo_timeline_slot_activate(slot, 0);
  uint32_t epoch = atomic_load(&slot->epoch);
  assert_true(halo_timeline_slot_signal(slot, 10));
  assert_int_equal(atomic_load(&slot->value), 10);
  assert_int_equal(atomic_load(&slot->epoch), epoch + 1);
  // Never below a value there already (a GPU store that landed first):
  // nothing changes, nobody wakes.
  assert_false(halo_timeline_slot_signal(slot, 7));
  assert_false(halo_timeline_slot_signal(slot, 10));
  assert_int_equal(atomic_load(&slot->value), 10);
  assert_int_equal(atomic_load(&slot->epoch), epoch + 1);
  halo_timeline_slot_signal(slot, HALO_TIMELINE_MAX_VALUE);
  assert_int_equal(atomic_load(&slot->epoch), epoch + 2);
  halo_timeline_wait_target_t t =
      target(slot, generation, HALO_TIMELINE_MAX_VALUE);
  size_t index;
  int32_t failure;
  assert_int_equal(halo_timeline_wait(&t, 1, false, 0, -1, &index, &failure),
                   HALO_TIMELINE_WAIT_OK);
}

static void test_wait_reached_value_returns_at_once(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[1];
  uint32_t generation = halo_timeline_slot_activate(slot, 9);
  halo_timeline_wait_target_t t = target(slot, generation, 9);
  size_t index = 99;
  int32_t failure = 99;
  // A deadline in the past still reports a reached value.
  assert_int_equal(halo_timeline_wait(&t, 1, false, 0, -1, &index, &failure),
                   HALO_TIMELINE_WAIT_OK);
  assert_int_equal(index, 0);
  assert_int_equal(failure, 0);
  assert_int_equal(
      halo_timeline_wait(NULL, 0, false, INT64_MAX, -1, &index, &failure),
      HALO_TIMELINE_WAIT_OK);
}

static void test_wait_times_out(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[2];
  uint32_t generation = halo_timeline_slot_activate(slot, 1);
  halo_timeline_wait_target_t t = target(slot, generation, 2);
  size_t index;
  int32_t failure;
  // Poll once.
  assert_int_equal(halo_timeline_wait(&t, 1, false, halo_clock_now_ns(), -1,
                                      &index, &failure),
                   HALO_TIMELINE_WAIT_TIMEOUT);
  // 50 ms: not earlier, and not much later.
  int64_t start = halo_clock_now_ns();
  assert_int_equal(
      halo_timeline_wait(&t, 1, false, start + 50 * MS, -1, &index, &failure),
      HALO_TIMELINE_WAIT_TIMEOUT);
  int64_t elapsed = halo_clock_now_ns() - start;
  assert_true(elapsed >= 50 * MS);
  assert_true(elapsed < 2000 * MS);
  // The same for a list (futex_waitv path).
  halo_timeline_slot_t *other = &fixture->page->slots[4];
  uint32_t other_generation = halo_timeline_slot_activate(other, 0);
  halo_timeline_wait_target_t ts[2] = {t, target(other, other_generation, 1)};
  start = halo_clock_now_ns();
  assert_int_equal(
      halo_timeline_wait(ts, 2, true, start + 50 * MS, -1, &index, &failure),
      HALO_TIMELINE_WAIT_TIMEOUT);
  elapsed = halo_clock_now_ns() - start;
  assert_true(elapsed >= 50 * MS);
  assert_true(elapsed < 2000 * MS);
}

static void test_first_failure_wins(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[5];
  uint32_t generation = halo_timeline_slot_activate(slot, 3);
  uint32_t epoch = atomic_load(&slot->epoch);
  assert_true(halo_timeline_slot_fail(slot, HALO_STATUS_DATA_LOSS));
  assert_int_equal(atomic_load(&slot->epoch), epoch + 1);
  assert_false(halo_timeline_slot_fail(slot, HALO_STATUS_ABORTED));
  assert_int_equal(atomic_load(&slot->failure), HALO_STATUS_DATA_LOSS);
  uint64_t value;
  int32_t failure;
  // A value reached before the failure stays reached.
  assert_int_equal(
      halo_timeline_slot_read(slot, generation, 3, &value, &failure),
      HALO_TIMELINE_WAIT_OK);
  assert_int_equal(
      halo_timeline_slot_read(slot, generation, 4, &value, &failure),
      HALO_TIMELINE_WAIT_FAILED);
  assert_int_equal(failure, HALO_STATUS_DATA_LOSS);
  assert_int_equal(value, 3);
  halo_timeline_wait_target_t t = target(slot, generation, 4);
  size_t index = 9;
  assert_int_equal(
      halo_timeline_wait(&t, 1, false, INT64_MAX, -1, &index, &failure),
      HALO_TIMELINE_WAIT_FAILED);
  assert_int_equal(index, 0);
  assert_int_equal(failure, HALO_STATUS_DATA_LOSS);
}

// ---------------------------------------------------------------- threads

static void test_signal_wakes_sleeping_thread(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[6];
  uint32_t generation = halo_timeline_slot_activate(slot, 0);
  halo_timeline_wait_target_t t = target(slot, generation, 10);
  waiter_t waiter;
  waiter_start(&waiter, &t, 1, false);
  // A signal below the target wakes it, and it goes back to sleep.
  halo_timeline_slot_signal(slot, 9);
  await_sleeping(getpid(), atomic_load(&waiter.tid));
  assert_false(atomic_load(&waiter.done));
  int64_t signaled = halo_clock_now_ns();
  halo_timeline_slot_signal(slot, 10);
  waiter_join(&waiter);
  assert_int_equal(waiter.result, HALO_TIMELINE_WAIT_OK);
  // Woken by the futex, not by the end of a 100 ms slice.
  assert_true(waiter.finished_ns - signaled < HALO_TIMELINE_SLICE_NS);
}

static void test_many_threads_wake_on_one_signal(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[7];
  uint32_t generation = halo_timeline_slot_activate(slot, 0);
  halo_timeline_wait_target_t t = target(slot, generation, 1);
  waiter_t waiters[8];
  for (int i = 0; i < 8; ++i) waiter_start(&waiters[i], &t, 1, false);
  halo_timeline_slot_signal(slot, 1);
  for (int i = 0; i < 8; ++i) {
    waiter_join(&waiters[i]);
    assert_int_equal(waiters[i].result, HALO_TIMELINE_WAIT_OK);
  }
}

static void test_fail_wakes_sleeping_thread(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[8];
  uint32_t generation = halo_timeline_slot_activate(slot, 1);
  halo_timeline_wait_target_t t = target(slot, generation, 2);
  waiter_t waiter;
  waiter_start(&waiter, &t, 1, false);
  assert_true(halo_timeline_slot_fail(slot, HALO_STATUS_DEVICE_LOST));
  waiter_join(&waiter);
  assert_int_equal(waiter.result, HALO_TIMELINE_WAIT_FAILED);
  assert_int_equal(waiter.failure, HALO_STATUS_DEVICE_LOST);
  assert_int_equal(waiter.index, 0);
}

static void test_retire_wakes_sleeping_thread(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[9];
  uint32_t generation = halo_timeline_slot_activate(slot, 0);
  halo_timeline_wait_target_t t = target(slot, generation, 1);
  waiter_t waiter;
  waiter_start(&waiter, &t, 1, false);
  halo_timeline_slot_retire(slot);
  waiter_join(&waiter);
  assert_int_equal(waiter.result, HALO_TIMELINE_WAIT_RETIRED);
  // The slot is reused under a new generation; old holders stay RETIRED
  // even once the new user signals past their value.
  uint32_t reused = halo_timeline_slot_activate(slot, 0);
  assert_int_not_equal(reused, generation);
  halo_timeline_slot_signal(slot, 5);
  size_t index;
  int32_t failure;
  assert_int_equal(
      halo_timeline_wait(&t, 1, false, INT64_MAX, -1, &index, &failure),
      HALO_TIMELINE_WAIT_RETIRED);
  halo_timeline_wait_target_t fresh = target(slot, reused, 5);
  assert_int_equal(
      halo_timeline_wait(&fresh, 1, false, INT64_MAX, -1, &index, &failure),
      HALO_TIMELINE_WAIT_OK);
}

static void test_notify_after_external_store(void **state) {
  // The GPU path: the value lands by a device store (no epoch bump), then
  // the host completion path calls notify.
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[10];
  uint32_t generation = halo_timeline_slot_activate(slot, 0);
  halo_timeline_wait_target_t t = target(slot, generation, 3);
  waiter_t waiter;
  waiter_start(&waiter, &t, 1, false);
  atomic_store(&slot->value, 3);
  halo_timeline_slot_notify(slot);
  waiter_join(&waiter);
  assert_int_equal(waiter.result, HALO_TIMELINE_WAIT_OK);
}

static void test_wait_any(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *a = &fixture->page->slots[11];
  halo_timeline_slot_t *b = &fixture->page->slots[12];
  halo_timeline_slot_t *c = &fixture->page->slots[13];
  halo_timeline_wait_target_t ts[3] = {
      target(a, halo_timeline_slot_activate(a, 0), 1),
      target(b, halo_timeline_slot_activate(b, 0), 1),
      target(c, halo_timeline_slot_activate(c, 0), 1)};
  waiter_t waiter;
  waiter_start(&waiter, ts, 3, true);
  halo_timeline_slot_signal(c, 1);
  waiter_join(&waiter);
  assert_int_equal(waiter.result, HALO_TIMELINE_WAIT_OK);
  assert_int_equal(waiter.index, 2);
  // Already satisfied: returns at once with that index.
  size_t index;
  int32_t failure;
  assert_int_equal(halo_timeline_wait(ts, 3, true, 0, -1, &index, &failure),
                   HALO_TIMELINE_WAIT_OK);
  assert_int_equal(index, 2);
}

static void test_wait_all(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *a = &fixture->page->slots[14];
  halo_timeline_slot_t *b = &fixture->page->slots[15];
  halo_timeline_wait_target_t ts[2] = {
      target(a, halo_timeline_slot_activate(a, 0), 2),
      target(b, halo_timeline_slot_activate(b, 0), 4)};
  waiter_t waiter;
  waiter_start(&waiter, ts, 2, false);
  halo_timeline_slot_signal(a, 2);
  // One of two is not enough: it sleeps again.
  await_sleeping(getpid(), atomic_load(&waiter.tid));
  assert_false(atomic_load(&waiter.done));
  halo_timeline_slot_signal(b, 3);
  await_sleeping(getpid(), atomic_load(&waiter.tid));
  assert_false(atomic_load(&waiter.done));
  halo_timeline_slot_signal(b, 4);
  waiter_join(&waiter);
  assert_int_equal(waiter.result, HALO_TIMELINE_WAIT_OK);
}

static void test_wait_all_ends_on_failure_of_one(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *a = &fixture->page->slots[16];
  halo_timeline_slot_t *b = &fixture->page->slots[17];
  halo_timeline_wait_target_t ts[2] = {
      target(a, halo_timeline_slot_activate(a, 0), 1),
      target(b, halo_timeline_slot_activate(b, 0), 1)};
  waiter_t waiter;
  waiter_start(&waiter, ts, 2, false);
  assert_true(halo_timeline_slot_fail(b, HALO_STATUS_ABORTED));
  waiter_join(&waiter);
  assert_int_equal(waiter.result, HALO_TIMELINE_WAIT_FAILED);
  assert_int_equal(waiter.index, 1);
  assert_int_equal(waiter.failure, HALO_STATUS_ABORTED);
}

static void test_wait_any_ends_on_retire_of_one(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *a = &fixture->page->slots[18];
  halo_timeline_slot_t *b = &fixture->page->slots[19];
  halo_timeline_wait_target_t ts[2] = {
      target(a, halo_timeline_slot_activate(a, 0), 1),
      target(b, halo_timeline_slot_activate(b, 0), 1)};
  waiter_t waiter;
  waiter_start(&waiter, ts, 2, true);
  halo_timeline_slot_retire(a);
  waiter_join(&waiter);
  assert_int_equal(waiter.result, HALO_TIMELINE_WAIT_RETIRED);
  assert_int_equal(waiter.index, 0);
}

static void test_liveness_fd_ends_wait(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[20];
  halo_timeline_wait_target_t t =
      target(slot, halo_timeline_slot_activate(slot, 0), 1);
  // The "daemon": a child that sleeps until killed.
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    for (;;) pause();
  }
  int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
  assert_true(pidfd >= 0);
  waiter_t waiter;
  memset(&waiter, 0, sizeof(waiter));
  waiter.targets[0] = t;
  waiter.count = 1;
  waiter.deadline_ns = INT64_MAX;
  waiter.liveness_fd = pidfd;
  assert_int_equal(pthread_create(&waiter.thread, NULL, waiter_main, &waiter),
                   0);
  while (atomic_load(&waiter.tid) == 0) sched_yield();
  await_sleeping(getpid(), atomic_load(&waiter.tid));
  int64_t killed = halo_clock_now_ns();
  assert_int_equal(kill(child, SIGKILL), 0);
  waiter_join(&waiter);
  assert_int_equal(waiter.result, HALO_TIMELINE_WAIT_OWNER_DEAD);
  // Noticed within about one sleep slice, never "for ever".
  assert_true(waiter.finished_ns - killed < 1000 * MS);
  assert_int_equal(waitpid(child, NULL, 0), child);
  close(pidfd);
}

// A ping-pong game: one side signals |ping| to i and waits for |pong| to
// reach i, the other the reverse, |rounds| times (two threads, or two
// processes). A lost wake-up still ends a wait at the end of a sleep slice
// (100 ms), so it shows as a slow round. The game is bounded at 10 s so that
// lost wake-ups show as a failure, not a crawl; a machine too loaded to
// finish in time (TSan on two oversubscribed CPUs) stops it early, and the
// rounds played still count.
typedef struct ping_pong_score_t {
  halo_timeline_wait_result_t result;
  uint64_t played;
  int slow_rounds;
  bool gave_up;
} ping_pong_score_t;

// The serving side. Stopped early (a failure, or the bound), it signals
// |ping| to |rounds|, so that the other side plays its remaining rounds at
// once.
static ping_pong_score_t ping_pong_serve(halo_timeline_slot_t *ping,
                                         halo_timeline_slot_t *pong,
                                         uint32_t pong_generation,
                                         uint64_t rounds) {
  ping_pong_score_t score = {.result = HALO_TIMELINE_WAIT_OK};
  int64_t give_up = halo_clock_now_ns() + 10000 * MS;
  for (uint64_t i = 1; i <= rounds && score.result == HALO_TIMELINE_WAIT_OK;
       ++i) {
    if (halo_clock_now_ns() > give_up) {
      score.gave_up = true;
      break;
    }
    int64_t start = halo_clock_now_ns();
    halo_timeline_slot_signal(ping, i);
    halo_timeline_wait_target_t t = target(pong, pong_generation, i);
    size_t index;
    int32_t failure;
    score.result = halo_timeline_wait(
        &t, 1, false, halo_clock_now_ns() + 5000 * MS, -1, &index, &failure);
    if (halo_clock_now_ns() - start >= HALO_TIMELINE_SLICE_NS * 8 / 10) {
      ++score.slow_rounds;
    }
    score.played = i;
  }
  if (score.gave_up || score.result != HALO_TIMELINE_WAIT_OK) {
    halo_timeline_slot_signal(ping, rounds);
  }
  return score;
}

// The returning side: the first wait that does not end OK, else OK.
static halo_timeline_wait_result_t ping_pong_return(halo_timeline_slot_t *ping,
                                                    uint32_t ping_generation,
                                                    halo_timeline_slot_t *pong,
                                                    uint64_t rounds,
                                                    int32_t *out_failure) {
  *out_failure = 0;
  for (uint64_t i = 1; i <= rounds; ++i) {
    halo_timeline_wait_target_t t = target(ping, ping_generation, i);
    size_t index;
    halo_timeline_wait_result_t result = halo_timeline_wait(
        &t, 1, false, halo_clock_now_ns() + 5000 * MS, -1, &index, out_failure);
    if (result != HALO_TIMELINE_WAIT_OK) return result;
    halo_timeline_slot_signal(pong, i);
  }
  return HALO_TIMELINE_WAIT_OK;
}

// A round as slow as a sleep slice means a wake-up was lost (allow one for
// a scheduling hiccup of a loaded machine).
static void ping_pong_judge(const ping_pong_score_t *score, uint64_t rounds) {
  if (score->gave_up) {
    print_message(
        "stopped after %llu of %llu rounds (10 s): a loaded machine\n",
        (unsigned long long)score->played, (unsigned long long)rounds);
  }
  if (score->slow_rounds > 1) {
    print_error("%d of %llu rounds took a whole sleep slice: lost wake-ups\n",
                score->slow_rounds, (unsigned long long)score->played);
    fail();
  }
}

typedef struct ping_pong_t {
  halo_timeline_slot_t *ping;
  halo_timeline_slot_t *pong;
  uint32_t ping_generation;
  uint32_t pong_generation;
  uint64_t rounds;
  halo_timeline_wait_result_t result;
} ping_pong_t;

static void *pong_main(void *arg) {
  ping_pong_t *game = arg;
  int32_t failure;
  game->result = ping_pong_return(game->ping, game->ping_generation, game->pong,
                                  game->rounds, &failure);
  return NULL;
}

static void test_ping_pong_threads_lose_no_wakeup(void **state) {
  page_fixture_t *fixture = *state;
  ping_pong_t game = {.ping = &fixture->page->slots[21],
                      .pong = &fixture->page->slots[22],
                      .rounds = 20000};
  game.ping_generation = halo_timeline_slot_activate(game.ping, 0);
  game.pong_generation = halo_timeline_slot_activate(game.pong, 0);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, pong_main, &game), 0);
  ping_pong_score_t score =
      ping_pong_serve(game.ping, game.pong, game.pong_generation, game.rounds);
  assert_int_equal(pthread_join(thread, NULL), 0);
  assert_int_equal(score.result, HALO_TIMELINE_WAIT_OK);
  assert_int_equal(game.result, HALO_TIMELINE_WAIT_OK);
  assert_int_equal(atomic_load(&game.pong->value), game.rounds);
  ping_pong_judge(&score, game.rounds);
}

// ---------------------------------------------------------------- processes

// Exit code of a child: result * 32 + failure code (both small).
#define CHILD_EXIT(result, failure) ((int)(result)*32 + (int)(failure))
#define CHILD_EXIT_WRITABLE 200  // it got a writable mapping: seals broken
#define CHILD_EXIT_MAP 201

// Forks a child that maps the page read-only (as a client does), checks it
// cannot map it writable, waits for |value| on slot |slot_index| and exits
// with CHILD_EXIT(result, failure).
static pid_t fork_waiter(int fd, size_t slot_index, uint32_t generation,
                         uint64_t value) {
  pid_t child = fork();
  assert_true(child >= 0);
  if (child != 0) return child;
  void *writable = mmap(NULL, HALO_TIMELINE_PAGE_SIZE, PROT_READ | PROT_WRITE,
                        MAP_SHARED, fd, 0);
  if (writable != MAP_FAILED) _exit(CHILD_EXIT_WRITABLE);
  halo_timeline_page_t *page =
      mmap(NULL, HALO_TIMELINE_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
  if (page == MAP_FAILED) _exit(CHILD_EXIT_MAP);
  halo_timeline_wait_target_t t = {.slot = &page->slots[slot_index],
                                   .generation = generation,
                                   .value = value};
  size_t index;
  int32_t failure;
  halo_timeline_wait_result_t result = halo_timeline_wait(
      &t, 1, false, halo_clock_now_ns() + 10000 * MS, -1, &index, &failure);
  _exit(CHILD_EXIT(result, failure));
}

static int reap(pid_t child) {
  int64_t deadline = halo_clock_now_ns() + DEADLINE_MS * MS;
  int wait_status;
  for (;;) {
    pid_t reaped = waitpid(child, &wait_status, WNOHANG);
    if (reaped == child) break;
    if (halo_clock_now_ns() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, NULL, 0);
      print_error("child %d did not exit within %d ms\n", child, DEADLINE_MS);
      fail();
    }
    sleep_ms(1);
  }
  assert_true(WIFEXITED(wait_status));
  return WEXITSTATUS(wait_status);
}

static void test_processes_wake_on_signal(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[30];
  uint32_t generation = halo_timeline_slot_activate(slot, 0);
  pid_t children[4];
  for (int i = 0; i < 4; ++i) {
    children[i] = fork_waiter(fixture->fd, 30, generation, 7);
  }
  for (int i = 0; i < 4; ++i) await_sleeping(children[i], children[i]);
  halo_timeline_slot_signal(slot, 6);  // not yet
  for (int i = 0; i < 4; ++i) await_sleeping(children[i], children[i]);
  halo_timeline_slot_signal(slot, 7);
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(reap(children[i]), CHILD_EXIT(HALO_TIMELINE_WAIT_OK, 0));
  }
}

static void test_processes_see_failure(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[31];
  uint32_t generation = halo_timeline_slot_activate(slot, 2);
  pid_t reached = fork_waiter(fixture->fd, 31, generation, 2);
  assert_int_equal(reap(reached), CHILD_EXIT(HALO_TIMELINE_WAIT_OK, 0));
  pid_t child = fork_waiter(fixture->fd, 31, generation, 3);
  await_sleeping(child, child);
  assert_true(halo_timeline_slot_fail(slot, HALO_STATUS_ABORTED));
  assert_int_equal(reap(child),
                   CHILD_EXIT(HALO_TIMELINE_WAIT_FAILED, HALO_STATUS_ABORTED));
  // After the failure: a reached value is still OK.
  reached = fork_waiter(fixture->fd, 31, generation, 2);
  assert_int_equal(reap(reached), CHILD_EXIT(HALO_TIMELINE_WAIT_OK, 0));
}

static void test_processes_see_retire(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[32];
  uint32_t generation = halo_timeline_slot_activate(slot, 0);
  pid_t child = fork_waiter(fixture->fd, 32, generation, 1);
  await_sleeping(child, child);
  halo_timeline_slot_retire(slot);
  assert_int_equal(reap(child), CHILD_EXIT(HALO_TIMELINE_WAIT_RETIRED, 0));
}

static void test_process_times_out(void **state) {
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *slot = &fixture->page->slots[33];
  uint32_t generation = halo_timeline_slot_activate(slot, 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    halo_timeline_page_t *page = mmap(NULL, HALO_TIMELINE_PAGE_SIZE, PROT_READ,
                                      MAP_SHARED, fixture->fd, 0);
    if (page == MAP_FAILED) _exit(CHILD_EXIT_MAP);
    halo_timeline_wait_target_t t = {
        .slot = &page->slots[33], .generation = generation, .value = 1};
    size_t index;
    int32_t failure;
    _exit(CHILD_EXIT(
        halo_timeline_wait(&t, 1, false, halo_clock_now_ns() + 100 * MS, -1,
                           &index, &failure),
        failure));
  }
  assert_int_equal(reap(child), CHILD_EXIT(HALO_TIMELINE_WAIT_TIMEOUT, 0));
}

static void test_process_ping_pong_loses_no_wakeup(void **state) {
  // Here the child writes too (through its inherited read-write mapping):
  // the protocol must hold for a writer in another process.
  page_fixture_t *fixture = *state;
  halo_timeline_slot_t *ping = &fixture->page->slots[34];
  halo_timeline_slot_t *pong = &fixture->page->slots[35];
  uint32_t ping_generation = halo_timeline_slot_activate(ping, 0);
  uint32_t pong_generation = halo_timeline_slot_activate(pong, 0);
  const uint64_t rounds = 5000;
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    int32_t failure;
    halo_timeline_wait_result_t result =
        ping_pong_return(ping, ping_generation, pong, rounds, &failure);
    _exit(CHILD_EXIT(result, failure));
  }
  ping_pong_score_t score =
      ping_pong_serve(ping, pong, pong_generation, rounds);
  if (score.result != HALO_TIMELINE_WAIT_OK) kill(child, SIGKILL);
  int code = reap(child);
  assert_int_equal(score.result, HALO_TIMELINE_WAIT_OK);
  assert_int_equal(code, 0);
  ping_pong_judge(&score, rounds);
}

int main(int argc, char **argv) {
  // A child of test_spin_cap_reaches_the_process: this process's cap.
  if (argc == 2 && strcmp(argv[1], "--print-spin-cap") == 0) {
    printf("%lld\n", (long long)halo_timeline_spin_max_ns());
    return 0;
  }
#define T(name) cmocka_unit_test_setup_teardown(name, page_setup, page_teardown)
  const struct CMUnitTest tests[] = {
      T(test_spin_follows_the_previous_wait),
      T(test_spin_cap_from_the_environment),
      T(test_spin_cap_reaches_the_process),
      T(test_clock_due_once_an_interval),
      T(test_server_spin_follows_the_previous_gap),
      T(test_page_layout),
      T(test_activate_and_read),
      T(test_signal_advances_value_and_epoch),
      T(test_wait_reached_value_returns_at_once),
      T(test_wait_times_out),
      T(test_first_failure_wins),
      T(test_signal_wakes_sleeping_thread),
      T(test_many_threads_wake_on_one_signal),
      T(test_fail_wakes_sleeping_thread),
      T(test_retire_wakes_sleeping_thread),
      T(test_notify_after_external_store),
      T(test_wait_any),
      T(test_wait_all),
      T(test_wait_all_ends_on_failure_of_one),
      T(test_wait_any_ends_on_retire_of_one),
      T(test_liveness_fd_ends_wait),
      T(test_ping_pong_threads_lose_no_wakeup),
      T(test_processes_wake_on_signal),
      T(test_processes_see_failure),
      T(test_processes_see_retire),
      T(test_process_times_out),
      T(test_process_ping_pong_loses_no_wakeup),
  };
#undef T
  return cmocka_run_group_tests_name("timeline", tests, NULL, NULL);
}
