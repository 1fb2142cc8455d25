// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Fault containment between trust domains (device-workers=process, the
// default): halod runs each (device, trust domain)'s device work in a
// worker process of its own, so a native kernel that crashes, a worker
// killed from outside or an execution past its deadline takes down only
// that domain's worker. halod (the supervisor) survives, fails the work
// that was in flight, restarts the worker and serves on. Local driver only:
// the `crash` and `spin` kernels are tests/kernels/test_kernels.c's.
//
// Every case but the last starts halod with --trust-domain process (one
// domain per client process). The attacker is this test process; the
// victim is another process (this program re-executed with --victim),
// looping vector adds with its results checked, each wait bounded:
// - crash: the attacker dispatches `crash` (a real SIGSEGV): its wait
//   returns DEVICE_LOST naming the worker and the trust domain; halod is
//   still running and its admin socket answers; the attacker's next
//   requests on the old client return SESSION_LOST; after reconnecting it
//   runs a vector add correctly; the victim completed every step, some
//   after the crash;
// - killed worker: the attacker's worker (the one halod's admin socket
//   lists for the attacker's domain, pid:<this process>, as `haloctl
//   workers` does; a live child of halod) is SIGKILLed while it runs `spin`
//   (no deadline): the same outcome, and halod reaps the dead worker;
// - deadline: with --submission-deadline-ms 500 the attacker's `spin`
//   fails with DEADLINE_EXCEEDED naming the deadline, within a few seconds
//   and not before 500 ms; the victim completed every step; a reconnect
//   works;
// - fault budget (--fault-budget 3): each case above charges the attacker's
//   process one fault and the victim none; an attacker whose `crash`
//   loses its worker three times has its lost session say that a reconnect
//   is refused, and its next connections get RESOURCE_EXHAUSTED on Hello
//   naming its pid, the faults, the window, until when and `haloctl
//   forgive-client`, without a worker started for it; the victim completed
//   every step and was never charged; once forgiven, it connects again;
// - one domain (--trust-domain uid, the default): two client processes of
//   one uid share a worker, so the attacker's crash loses the other
//   session too (its wait or next request returns DEVICE_LOST or
//   SESSION_LOST); it rebuilds by reconnecting.
// - parts of one domain (--workers-per-domain 2): the victim and the
//   attacker, two processes of one uid, are on parts uid:U#0 and uid:U#1
//   with different workers, and the attacker's second session joins its
//   part; the attacker may import the victim's exported device buffer but
//   binding it is refused with PERMISSION_DENIED naming
//   workers-per-domain; the attacker's crash loses its part (both its
//   sessions) and not the victim's, whose worker stays and whose steps all
//   complete.
// - a lost session's ring fed on and on (--trust-domain process): while
//   its worker is killed, a thread of the attacker keeps its ring full of
//   well-formed records; halod refuses those it had been given when the
//   session was lost and reads no further, so its loop keeps serving (the
//   admin socket answers within a second throughout, the victim completes
//   its steps), and the ring is marked broken.
// - a reused pid (--trust-domain process, root only): a session whose
//   process ended (a forked child holds its connection) keeps its domain
//   "pid:N"; a later process given the same pid (clone3's set_tid) gets a
//   domain and a worker of its own, not the first process's.
//
// Against a halod without worker processes the crash kills halod itself;
// these tests then fail saying so.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checked_add.h"
#include "client/admin.h"
#include "client/client.h"
#include "common/ring.h"
#include "tests/support/halo_test.h"

#define MS HALO_TEST_MS
// Every semaphore wait in this test, parent or child, ends within this.
#define WAIT_NS (10000 * MS)
#define N 256  // floats of the vector adds
// The victim stops by itself after this even if never told to.
#define VICTIM_MAX_NS (30000 * MS)
// Steps the victim must complete after the attacker's loss was observed.
#define VICTIM_MIN_STEPS_AFTER 3

// ---------------------------------------------------------------- vector add
//
// Used by the victims (plain libhalo: no cmocka in a child) and by the
// attacker after reconnecting: three host-visible buffers, c = a + b
// recorded once (REUSABLE), executed and waited for at each step.

typedef struct adder_t {
  halo_executable_t *executable;
  halo_checked_add_t add;
} adder_t;

static halo_status_t adder_open(adder_t *adder, halo_client_t *client,
                                const char *kernels) {
  memset(adder, 0, sizeof(*adder));
  halo_status_t status = halo_executable_create_from_file(client, 0, kernels, 0,
                                                          &adder->executable);
  if (!status) {
    status = halo_checked_add_open(&adder->add, client, adder->executable);
  }
  return status;
}

static halo_status_t adder_step(adder_t *adder, uint64_t step) {
  return halo_checked_add_step(&adder->add, step, WAIT_NS);
}

// ---------------------------------------------------------------- victim
//
//   containment_test --victim ADDRESS KERNELS DIR MODE
//
// Connects, loads KERNELS, prints "ready" after a first correct vector add
// and goes on, one step at a time, until DIR/stop exists, a step fails or
// VICTIM_MAX_NS passed. Counts the steps that began after DIR/crashed
// existed. Prints "done STEPS AFTER CODE MESSAGE" (CODE: the failed step's
// status code, 0 if none). MODE "rebuild": after a failed step, closes the
// client, connects again and runs one step: prints "rebuilt CODE MESSAGE".
// Setup failures print "setup CODE MESSAGE" and exit 2.

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static bool file_exists(const char *dir, const char *name) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  return access(path, F_OK) == 0;
}

// Prints "LABEL CODE MESSAGE" (the message on one line) and frees |status|.
static void victim_print(const char *label, halo_status_t status) {
  char message[300];
  snprintf(message, sizeof(message), "%s", halo_status_message(status));
  for (char *p = message; *p; ++p) {
    if (*p == '\n' || *p == '\r') *p = ' ';
  }
  printf("%s %d %s\n", label, (int)halo_status_code(status), message);
  fflush(stdout);
  if (status) {
    fprintf(stderr, "containment victim (pid %d): %s: %s: %s\n", (int)getpid(),
            label, halo_status_code_name(halo_status_code(status)), message);
  }
  halo_status_free(status);
}

static halo_status_t victim_connect(const char *address, const char *kernels,
                                    halo_client_t **out_client,
                                    adder_t *adder) {
  halo_client_options_t options = {.address = address,
                                   .client_name = "containment-victim",
                                   .request_timeout_ms = 10000};
  halo_status_t status = halo_client_connect(&options, out_client);
  if (!status) status = adder_open(adder, *out_client, kernels);
  return status;
}

static int victim_main(const char *address, const char *kernels,
                       const char *dir, const char *mode) {
  halo_client_t *client = NULL;
  adder_t adder;
  halo_status_t status = victim_connect(address, kernels, &client, &adder);
  uint64_t steps = 0;
  if (!status) status = adder_step(&adder, steps++);
  if (status) {
    victim_print("setup", status);
    return 2;
  }
  // MODE "export": a device buffer exported for the test to import; its
  // token follows "ready".
  halo_buffer_t *exported = NULL;
  if (strcmp(mode, "export") == 0) {
    halo_token_t token;
    status = halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 4096,
                                HALO_OBJECT_FLAG_EXPORTABLE, &exported);
    if (!status) status = halo_buffer_export(exported, &token);
    if (status) {
      victim_print("setup", status);
      return 2;
    }
    printf("ready ");
    for (size_t i = 0; i < sizeof(token.bytes); ++i) {
      printf("%02x", token.bytes[i]);
    }
  } else {
    printf("ready");
  }
  printf("\n");
  fflush(stdout);
  uint64_t after = 0;
  int64_t give_up = now_ns() + VICTIM_MAX_NS;
  while (!file_exists(dir, "stop") && now_ns() < give_up) {
    bool crashed = file_exists(dir, "crashed");
    status = adder_step(&adder, steps);
    if (status) break;
    ++steps;
    if (crashed) ++after;
  }
  char label[64];
  snprintf(label, sizeof(label), "done %" PRIu64 " %" PRIu64, steps, after);
  bool failed = status != NULL;
  victim_print(label, status);
  if (failed && strcmp(mode, "rebuild") == 0) {
    halo_client_close(client);
    client = NULL;
    status = victim_connect(address, kernels, &client, &adder);
    if (!status) status = adder_step(&adder, steps);
    victim_print("rebuilt", status);
  }
  halo_buffer_release(exported);
  halo_client_close(client);
  return 0;
}

// ---------------------------------------------------------------- harness

typedef struct victim_report_t {
  unsigned long long steps, after;
  int code;
  char message[400];
} victim_report_t;

// Starts a victim (MODE "stop", "rebuild" or "export") and waits for its
// "ready"; with "export", fills |out_token| from the line (else NULL).
static void victim_start_exporting(halo_test_fixture_t *fixture,
                                   halo_test_process_t *process,
                                   const char *mode, halo_token_t *out_token) {
  const char *argv[] = {"/proc/self/exe",  // this test, run again

                        "--victim",
                        fixture->daemon.listen_address,
                        halo_test_kernels_path(),
                        fixture->daemon.dir,
                        mode,
                        NULL};
  halo_test_spawn(process, argv);
  char line[512];
  halo_test_read_line(process, line, sizeof(line), 20000);
  bool ready =
      out_token ? strncmp(line, "ready ", 6) == 0 : strcmp(line, "ready") == 0;
  for (size_t i = 0; ready && out_token && i < sizeof(out_token->bytes); ++i) {
    unsigned byte = 0;
    ready = sscanf(line + 6 + 2 * i, "%2x", &byte) == 1;
    out_token->bytes[i] = (uint8_t)byte;
  }
  if (!ready) {
    print_error("victim %d did not start: %s\n", process->pid, line);
    fail();
  }
}

static void victim_start(halo_test_fixture_t *fixture,
                         halo_test_process_t *process, const char *mode) {
  victim_start_exporting(fixture, process, mode, NULL);
}

static void touch(const halo_test_fixture_t *fixture, const char *name) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", fixture->daemon.dir, name);
  int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  close(fd);
}

// Reads the victim's "done" line (it ends by itself after a failure, or
// after DIR/stop appears).
static void victim_read_report(halo_test_process_t *process,
                               victim_report_t *report) {
  char line[512];
  halo_test_read_line(process, line, sizeof(line), 30000);
  int consumed = 0;
  memset(report, 0, sizeof(*report));
  if (sscanf(line, "done %llu %llu %d %n", &report->steps, &report->after,
             &report->code, &consumed) < 3) {
    print_error("victim %d: unexpected report: %s\n", process->pid, line);
    fail();
  }
  snprintf(report->message, sizeof(report->message), "%s", line + consumed);
  print_message(
      "victim %d: %llu steps, %llu after the attacker's loss; %s%s%s\n",
      process->pid, report->steps, report->after,
      report->code ? halo_status_code_name(report->code) : "no failure",
      report->code ? ": " : "", report->message);
}

// Stops a victim that should have noticed nothing and checks its report:
// no failed step, and steps completed after the attacker's loss.
static void victim_expect_unaffected(halo_test_fixture_t *fixture,
                                     halo_test_process_t *process) {
  // Let it run on for a while after the attacker's loss.
  int64_t until = halo_test_now_ns() + 500 * MS;
  while (halo_test_now_ns() < until) halo_test_sleep_ms(10);
  touch(fixture, "stop");
  victim_report_t report;
  victim_read_report(process, &report);
  if (report.code != 0) {
    print_error(
        "the victim (another trust domain) failed a step after %llu good "
        "ones: %s: %s\n",
        report.steps, halo_status_code_name(report.code), report.message);
    fail();
  }
  assert_true(report.after >= VICTIM_MIN_STEPS_AFTER);
  assert_int_equal(halo_test_process_wait(process, HALO_TEST_DEADLINE_MS), 0);
}

// Fails unless halod is still running (not even a zombie) and its admin
// socket answers.
static void expect_daemon_alive(halo_test_daemon_t *daemon, const char *when) {
  assert_true(daemon->pid > 0);
  int wait_status = 0;
  pid_t reaped = waitpid(daemon->pid, &wait_status, WNOHANG);
  if (reaped == daemon->pid) {
    daemon->pid = 0;
    if (WIFSIGNALED(wait_status)) {
      print_error(
          "halod died of signal %d (%s) %s: the fault was not contained in "
          "its trust domain's worker\n",
          WTERMSIG(wait_status), strsignal(WTERMSIG(wait_status)), when);
    } else {
      print_error("halod exited with status %d %s\n", WEXITSTATUS(wait_status),
                  when);
    }
    fail();
  }
  assert_int_equal(kill(daemon->pid, 0), 0);
  halo_wire_response_t *response = halo_test_admin_status(daemon);
  halo__wire__response__free_unpacked(response, NULL);
  print_message("halod (pid %d) is running %s; it lists %u sessions\n",
                daemon->pid, when, halo_test_admin_session_count(daemon));
}

static const char *const worker_lost[] = {"worker", "trust domain", NULL};

// Fails unless halod lists a session of |pid| and charged that process
// |process_faults| device faults (within the fault budget's window) and its
// listed sessions |session_faults| in all.
static void expect_faults(const halo_test_daemon_t *daemon, pid_t pid,
                          uint32_t process_faults, uint32_t session_faults,
                          const char *who) {
  uint32_t process = 0, session = 0;
  bool listed = halo_test_admin_client_faults(daemon, pid, &process, &session);
  print_message(
      "%s (pid %d): %u fault(s) charged to the process, %u to its "
      "sessions\n",
      who, (int)pid, process, session);
  if (!listed || process != process_faults || session != session_faults) {
    print_error(
        "%s (pid %d): expected %u fault(s) charged to the process and "
        "%u to its sessions%s\n",
        who, (int)pid, process_faults, session_faults,
        listed ? "" : "; halod lists no session of it");
    halo_test_admin_print_sessions(daemon);
    fail();
  }
}

// The attacker's objects: its kernels, a host-visible word (the `spin`
// kernel's started flag) and a semaphore.
typedef struct attacker_t {
  halo_client_t *client;  // fixture->client
  halo_executable_t *executable;
  halo_buffer_t *word;
  halo_semaphore_t *done;
} attacker_t;

static void attacker_open(halo_test_fixture_t *fixture, attacker_t *attacker) {
  memset(attacker, 0, sizeof(*attacker));
  fixture->client = halo_test_connect(&fixture->daemon, 10000);
  attacker->client = fixture->client;
  attacker->executable = halo_test_load_kernels(attacker->client);
  attacker->word = halo_test_create_buffer(
      attacker->client, HALO_MEMORY_HOST_VISIBLE, sizeof(uint32_t), 0);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_create(attacker->client, 0, 0, &attacker->done));
  // Its domain works before the attack (and has its worker).
  adder_t adder;
  HALO_TEST_ASSERT_OK(
      adder_open(&adder, attacker->client, halo_test_kernels_path()));
  HALO_TEST_ASSERT_OK(adder_step(&adder, 1));
}

// Executes one workgroup of |entry| (`crash`: no args; `spin`: the started
// word), signaling done = 1.
static void attacker_submit(attacker_t *attacker, const char *entry) {
  uint32_t *started = halo_buffer_host_pointer(attacker->word);
  __atomic_store_n(started, 0, __ATOMIC_RELEASE);
  bool spin = strcmp(entry, "spin") == 0;
  halo_dispatch_arg_t args[1] = {
      {HALO_DISPATCH_ARG_BUFFER,
       halo_buffer_ref(attacker->word, 0, sizeof(uint32_t)), NULL, 0},
  };
  halo_dispatch_params_t params = {
      .executable = attacker->executable,
      .entry = entry,
      .grid = {1, 1, 1},
      .block = {1, 1, 1},
      .args = spin ? args : NULL,
      .arg_count = spin ? 1 : 0,
  };
  halo_command_buffer_t *cb =
      halo_test_begin(attacker->client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  halo_semaphore_value_t signal = {attacker->done, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, NULL, 0, NULL, 0, &signal, 1));
  halo_command_buffer_release(cb);
}

// After the attacker's loss: its old session answers SESSION_LOST; closing
// it and connecting again gives a session whose vector add is correct.
static void attacker_rebuild(halo_test_fixture_t *fixture, attacker_t *attacker,
                             bool expect_session_lost) {
  if (expect_session_lost) {
    halo_buffer_t *buffer = NULL;
    halo_test_expect_status_all(
        halo_buffer_create(attacker->client, 0, HALO_MEMORY_HOST_VISIBLE, 64, 0,
                           &buffer),
        HALO_STATUS_SESSION_LOST, NULL,
        "the attacker's next request on its old client");
    halo_semaphore_t *semaphore = NULL;
    halo_test_expect_status_all(
        halo_semaphore_create(attacker->client, 0, 0, &semaphore),
        HALO_STATUS_SESSION_LOST, NULL,
        "the attacker's semaphore_create on its old client");
  }
  halo_client_close(attacker->client);
  fixture->client = halo_test_connect(&fixture->daemon, 10000);
  attacker->client = fixture->client;
  adder_t adder;
  HALO_TEST_ASSERT_OK(
      adder_open(&adder, attacker->client, halo_test_kernels_path()));
  for (uint64_t step = 0; step < 3; ++step) {
    HALO_TEST_ASSERT_OK(adder_step(&adder, step));
  }
  print_message("the attacker reconnected: vector adds correct\n");
}

// The attacker's `crash` kernel: its wait fails with DEVICE_LOST naming the
// worker and the domain, halod survives, and DIR/crashed marks the moment
// for the victim.
static void attacker_crash(halo_test_fixture_t *fixture, attacker_t *attacker) {
  attacker_submit(attacker, "crash");
  halo_status_t status = halo_semaphore_wait(attacker->done, 1, WAIT_NS);
  expect_daemon_alive(&fixture->daemon, "after the attacker's crash");
  touch(fixture, "crashed");
  halo_test_expect_status_all(status, HALO_STATUS_DEVICE_LOST, worker_lost,
                              "the attacker's wait for its crashing execution");
}

// ---------------------------------------------------------------- /proc

// Whether |pid| is no longer a child of |parent| (exited and reaped).
static bool reaped_by(pid_t pid, pid_t parent) {
  pid_t ppid = 0;
  return !halo_test_proc_stat(pid, NULL, &ppid) || ppid != parent;
}

// The attacker's worker: the one halod lists for this process's trust
// domain (--trust-domain process: "pid:<pid>"), which must be a live child
// of halod. (Not "a child that appeared with the attacker's session": the
// domain takes a spare that was already running, and a fresh spare starts.)
static pid_t find_attacker_worker(const halo_test_daemon_t *daemon) {
  char domain[32];
  snprintf(domain, sizeof(domain), "pid:%d", (int)getpid());
  pid_t worker = halo_test_admin_worker_pid(daemon, domain);
  if (worker == 0) {
    print_error(
        "halod lists no worker process for the attacker's trust domain %s "
        "(device-workers process?)\n",
        domain);
    fail();
  }
  if (!halo_test_is_live_child(worker, daemon->pid)) {
    print_error(
        "the worker halod lists for %s, pid %d, is not a live child of halod "
        "(pid %d)\n",
        domain, (int)worker, (int)daemon->pid);
    fail();
  }
  print_message("the attacker's trust domain %s: worker pid %d\n", domain,
                (int)worker);
  return worker;
}

// ---------------------------------------------------------------- ring feeder
//
// A thread of the attacker that writes well-formed SIGNAL records (sealed,
// in sequence) into its session's ring as fast as halod takes them,
// publishing each batch, for as long as it is let or until halod marks the
// ring broken. It bypasses libhalo (a hostile client need not use it).

typedef struct ring_feeder_t {
  halo_client_ring_t *ring;
  uint64_t semaphore;  // handle the SIGNAL records name
  int64_t until_ns;
  atomic_bool stop;
  uint64_t records;  // written
  bool broken;       // halod marked the ring broken
  pthread_t thread;
} ring_feeder_t;

static void *ring_feeder_main(void *argument) {
  ring_feeder_t *feeder = argument;
  halo_client_ring_t *ring = feeder->ring;
  halo_ring_header_t *header = ring->header;
  uint64_t tail = ring->tail;
  uint64_t sequence = ring->sequence;
  _Alignas(16) uint8_t record[HALO_RING_SIGNAL_LENGTH];
  while (!atomic_load(&feeder->stop) && halo_test_now_ns() < feeder->until_ns) {
    if (atomic_load(&header->flags) & HALO_RING_FLAG_BROKEN) {
      feeder->broken = true;
      break;
    }
    uint64_t head = atomic_load(&header->head);
    bool wrote = false;
    // The capacity is a multiple of the record: none straddles the end.
    while (tail + HALO_RING_SIGNAL_LENGTH - head <= ring->capacity) {
      halo_ring_record_header_t record_header = {
          .type = HALO_RING_RECORD_SIGNAL,
          .length = HALO_RING_SIGNAL_LENGTH,
          .sequence = (uint32_t)sequence};
      halo_ring_semaphore_value_t signal = {feeder->semaphore, sequence + 1};
      memcpy(record, &record_header, sizeof(record_header));
      memcpy(record + sizeof(record_header), &signal, sizeof(signal));
      halo_ring_record_seal(ring->key, record);
      memcpy(ring->records + (tail & (ring->capacity - 1)), record,
             sizeof(record));
      tail += sizeof(record);
      ++sequence;
      ++feeder->records;
      wrote = true;
    }
    if (!wrote) continue;
    atomic_store(&header->tail, tail);
    if (atomic_load(&header->flags) & HALO_RING_FLAG_NEED_WAKEUP) {
      uint64_t one = 1;
      if (write(ring->doorbell, &one, sizeof(one)) < 0) break;
    }
  }
  return NULL;
}

// The longest admin status round trip while polling for |ms| (each bounded
// by a second: -1 if one failed).
static int64_t admin_slowest_ms(const halo_test_daemon_t *daemon, int ms) {
  int64_t slowest = 0;
  int64_t until = halo_test_now_ns() + ms * MS;
  while (halo_test_now_ns() < until) {
    int64_t start = halo_test_now_ns();
    halo_admin_t *admin = NULL;
    halo_wire_response_t *response = NULL;
    halo_status_t status =
        halo_admin_connect(daemon->admin_address, 1000, &admin);
    if (!status) status = halo_admin_status(admin, &response);
    if (admin) halo_admin_close(admin);
    if (response) halo__wire__response__free_unpacked(response, NULL);
    if (status) {
      print_error("halod's admin socket: %s\n", halo_status_message(status));
      halo_status_free(status);
      return -1;
    }
    int64_t took = (halo_test_now_ns() - start) / MS;
    if (took > slowest) slowest = took;
    halo_test_sleep_ms(20);
  }
  return slowest;
}

// ---------------------------------------------------------------- fixtures

// The attacker connects in the test (after the victim started).
static int setup_with(void **state, const char *const *args) {
  return halo_test_fixture_setup_with(state, args, false);
}

static int setup_process_domains(void **state) {
  static const char *const args[] = {"--trust-domain", "process", NULL};
  return setup_with(state, args);
}

static int setup_deadline(void **state) {
  static const char *const args[] = {"--trust-domain", "process",
                                     "--submission-deadline-ms", "500", NULL};
  return setup_with(state, args);
}

static int setup_fault_budget(void **state) {
  static const char *const args[] = {"--trust-domain",
                                     "process",
                                     "--fault-budget",
                                     "3",
                                     "--fault-budget-window-s",
                                     "600",
                                     NULL};
  return setup_with(state, args);
}

static int setup_two_parts(void **state) {
  static const char *const args[] = {"--workers-per-domain", "2", NULL};
  return setup_with(state, args);
}

static int setup_uid_domain(void **state) {
  static const char *const args[] = {NULL};  // --trust-domain uid: default
  return setup_with(state, args);
}

// ---------------------------------------------------------------- tests

static void test_crash_is_contained_in_its_domain(void **state) {
  halo_test_fixture_t *fixture = *state;
  HALO_TEST_LOCAL_ONLY("the crash kernel is an ELF for the local driver");
  halo_test_process_t *victim = &fixture->peers[0];
  victim_start(fixture, victim, "stop");
  attacker_t attacker;
  attacker_open(fixture, &attacker);
  uint64_t started =
      halo_test_admin_metric(&fixture->daemon, "halo_workers_started_total ");
  assert_true(started >= 2);  // the victim's domain and the attacker's

  attacker_crash(fixture, &attacker);
  // The fault is charged to the attacker (its execution was in flight),
  // never to the victim (another domain, another worker).
  expect_faults(&fixture->daemon, getpid(), 1, 1, "the attacker");
  expect_faults(&fixture->daemon, victim->pid, 0, 0, "the victim");
  assert_int_equal(
      halo_test_admin_metric(&fixture->daemon, "halo_workers_lost_total "), 1);
  attacker_rebuild(fixture, &attacker, true);
  victim_expect_unaffected(fixture, victim);
  expect_daemon_alive(&fixture->daemon, "at the end");
}

static void test_killed_worker_is_contained_in_its_domain(void **state) {
  halo_test_fixture_t *fixture = *state;
  HALO_TEST_LOCAL_ONLY("the spin kernel is an ELF for the local driver");
  halo_test_process_t *victim = &fixture->peers[0];
  victim_start(fixture, victim, "stop");
  attacker_t attacker;
  attacker_open(fixture, &attacker);

  attacker_submit(&attacker, "spin");
  const uint32_t *started = halo_buffer_host_pointer(attacker.word);
  if (!HALO_TEST_POLL(__atomic_load_n(started, __ATOMIC_ACQUIRE) == 1,
                      HALO_TEST_DEADLINE_MS)) {
    print_error("the attacker's spin kernel did not start\n");
    fail();
  }
  pid_t worker = find_attacker_worker(&fixture->daemon);
  print_message("SIGKILL to the attacker's worker, pid %d\n", worker);
  assert_int_equal(kill(worker, SIGKILL), 0);
  halo_status_t status = halo_semaphore_wait(attacker.done, 1, WAIT_NS);
  expect_daemon_alive(&fixture->daemon, "after its worker was killed");
  touch(fixture, "crashed");
  halo_test_expect_status_all(
      status, HALO_STATUS_DEVICE_LOST, worker_lost,
      "the attacker's wait for its execution in the killed worker");
  expect_faults(&fixture->daemon, getpid(), 1, 1, "the attacker");
  expect_faults(&fixture->daemon, victim->pid, 0, 0, "the victim");
  if (!HALO_TEST_POLL(reaped_by(worker, fixture->daemon.pid),
                      HALO_TEST_DEADLINE_MS)) {
    print_error("halod did not reap its killed worker %d\n", worker);
    fail();
  }
  attacker_rebuild(fixture, &attacker, true);
  victim_expect_unaffected(fixture, victim);
  expect_daemon_alive(&fixture->daemon, "at the end");
}

static void test_deadline_replaces_a_spinning_worker(void **state) {
  halo_test_fixture_t *fixture = *state;
  HALO_TEST_LOCAL_ONLY("the spin kernel is an ELF for the local driver");
  halo_test_process_t *victim = &fixture->peers[0];
  victim_start(fixture, victim, "stop");
  attacker_t attacker;
  attacker_open(fixture, &attacker);

  int64_t submitted = halo_test_now_ns();
  attacker_submit(&attacker, "spin");
  halo_status_t status = halo_semaphore_wait(attacker.done, 1, WAIT_NS);
  int64_t elapsed_ms = (halo_test_now_ns() - submitted) / MS;
  expect_daemon_alive(&fixture->daemon, "after the deadline");
  touch(fixture, "crashed");
  print_message("the attacker's spin ended after %lld ms\n",
                (long long)elapsed_ms);
  static const char *const deadline[] = {"deadline", NULL};
  halo_test_expect_status_all(status, HALO_STATUS_DEADLINE_EXCEEDED, deadline,
                              "the attacker's wait for its spinning execution");
  expect_faults(&fixture->daemon, getpid(), 1, 1, "the attacker");
  expect_faults(&fixture->daemon, victim->pid, 0, 0, "the victim");
  // Not before the deadline (500 ms), and well within the wait's 10 s.
  assert_true(elapsed_ms >= 450);
  assert_true(elapsed_ms < 5000);
  attacker_rebuild(fixture, &attacker, false);
  victim_expect_unaffected(fixture, victim);
  expect_daemon_alive(&fixture->daemon, "at the end");
}

static void test_fault_budget_refuses_a_repeat_offender(void **state) {
  halo_test_fixture_t *fixture = *state;
  HALO_TEST_LOCAL_ONLY("the crash kernel is an ELF for the local driver");
  halo_test_process_t *victim = &fixture->peers[0];
  victim_start(fixture, victim, "stop");
  pid_t self = getpid();
  char pid_text[32];
  snprintf(pid_text, sizeof(pid_text), "client pid %d ", (int)self);
  char forgive[64];
  snprintf(forgive, sizeof(forgive), "haloctl forgive-client %d", (int)self);
  const char *const refused[] = {
      pid_text, "caused 3 device faults in the last 600 s",
      "(fault-budget=3): refused until", forgive, NULL};
  // fault-budget 3: each crash loses the attacker's session and charges its
  // process; reconnecting works until the third.
  for (uint32_t round = 1; round <= 3; ++round) {
    attacker_t attacker;
    attacker_open(fixture, &attacker);
    attacker_submit(&attacker, "crash");
    halo_status_t status = halo_semaphore_wait(attacker.done, 1, WAIT_NS);
    if (round == 1) touch(fixture, "crashed");
    static const char *const last_lost[] = {"worker", "trust domain",
                                            "a reconnect is refused", NULL};
    halo_test_expect_status_all(
        status, HALO_STATUS_DEVICE_LOST, round < 3 ? worker_lost : last_lost,
        "the attacker's wait for its crashing execution");
    expect_faults(&fixture->daemon, self, round, 1, "the attacker");
    expect_faults(&fixture->daemon, victim->pid, 0, 0, "the victim");
    // The lost session says whether a reconnect will be refused.
    halo_semaphore_t *semaphore = NULL;
    status = halo_semaphore_create(attacker.client, 0, 0, &semaphore);
    if (round < 3) {
      static const char *const rebuild[] = {"reconnect and rebuild", NULL};
      halo_test_expect_status_all(
          status, HALO_STATUS_SESSION_LOST, rebuild,
          "the attacker's next request on its lost session");
    } else {
      halo_test_expect_status_all(
          status, HALO_STATUS_SESSION_LOST, refused,
          "the attacker's next request after its third fault");
    }
    halo_client_close(attacker.client);
    fixture->client = NULL;
  }
  // Over budget: a new connection gets RESOURCE_EXHAUSTED on Hello saying
  // why, until when, and how an operator clears it; no worker starts for it.
  halo_client_options_t options = {.address = fixture->daemon.listen_address,
                                   .client_name = "containment-attacker",
                                   .request_timeout_ms = 10000};
  for (int attempt = 0; attempt < 2; ++attempt) {
    halo_client_t *client = NULL;
    halo_status_t status = halo_client_connect(&options, &client);
    assert_null(client);
    halo_test_expect_status_all(
        status, HALO_STATUS_RESOURCE_EXHAUSTED, refused,
        "the attacker's reconnect over its fault budget");
  }
  char domain[32];
  snprintf(domain, sizeof(domain), "pid:%d", (int)self);
  assert_int_equal(halo_test_admin_worker_pid(&fixture->daemon, domain), 0);
  // The victim, of another domain, was never charged and never stopped.
  expect_faults(&fixture->daemon, victim->pid, 0, 0, "the victim");
  victim_expect_unaffected(fixture, victim);

  // The operator forgives it (haloctl forgive-client): it connects again.
  assert_int_equal(
      halo_test_admin_forgive_client(&fixture->daemon, (uint32_t)self), 3);
  attacker_t attacker;
  attacker_open(fixture, &attacker);
  expect_faults(&fixture->daemon, self, 0, 0, "the forgiven attacker");
  expect_daemon_alive(&fixture->daemon, "at the end");
}

static void test_sessions_of_one_domain_share_fate(void **state) {
  halo_test_fixture_t *fixture = *state;
  HALO_TEST_LOCAL_ONLY("the crash kernel is an ELF for the local driver");
  // Another process of this uid: the same trust domain (--trust-domain
  // uid), so the same worker.
  halo_test_process_t *sharer = &fixture->peers[0];
  victim_start(fixture, sharer, "rebuild");
  attacker_t attacker;
  attacker_open(fixture, &attacker);

  attacker_crash(fixture, &attacker);
  attacker_rebuild(fixture, &attacker, true);
  // The sharer stops at its first failed step; if it noticed nothing, it
  // stops here.
  touch(fixture, "stop");
  victim_report_t report;
  victim_read_report(sharer, &report);
  if (report.code != HALO_STATUS_DEVICE_LOST &&
      report.code != HALO_STATUS_SESSION_LOST) {
    print_error(
        "the other session of the attacker's trust domain should have been "
        "lost (DEVICE_LOST or SESSION_LOST), got %s: %s\n",
        report.code ? halo_status_code_name(report.code) : "no failure",
        report.message);
    fail();
  }
  char line[512];
  halo_test_read_line(sharer, line, sizeof(line), 30000);
  print_message("sharer: %s\n", line);
  if (strncmp(line, "rebuilt 0 ", 10) != 0) {
    print_error("the sharer could not rebuild after reconnecting: %s\n", line);
    fail();
  }
  assert_int_equal(halo_test_process_wait(sharer, HALO_TEST_DEADLINE_MS), 0);
  expect_daemon_alive(&fixture->daemon, "at the end");
}

// The trust domain halod lists for the sessions of |pid| (all must agree)
// in |out|; returns how many it lists.
static uint32_t sessions_domain(const halo_test_daemon_t *daemon, pid_t pid,
                                char *out, size_t capacity) {
  out[0] = '\0';
  uint32_t count = 0;
  halo_wire_response_t *response = halo_test_admin_sessions(daemon);
  for (size_t i = 0; i < response->admin_sessions->n_sessions; ++i) {
    const Halo__Wire__SessionInfo *info = response->admin_sessions->sessions[i];
    if ((pid_t)info->pid != pid) continue;
    if (count++ == 0) {
      snprintf(out, capacity, "%s", info->trust_domain);
    } else if (strcmp(out, info->trust_domain) != 0) {
      print_error("the sessions of pid %d are in %s and %s\n", (int)pid, out,
                  info->trust_domain);
      fail();
    }
  }
  halo__wire__response__free_unpacked(response, NULL);
  return count;
}

static void test_parts_of_one_domain_are_contained(void **state) {
  halo_test_fixture_t *fixture = *state;
  HALO_TEST_LOCAL_ONLY("the crash kernel is an ELF for the local driver");
  // --workers-per-domain 2: another process of this uid joins the part
  // with the fewest sessions, so the victim (first) and the attacker get
  // one worker each.
  halo_test_process_t *victim = &fixture->peers[0];
  halo_token_t token;
  victim_start_exporting(fixture, victim, "export", &token);
  attacker_t attacker;
  attacker_open(fixture, &attacker);
  // The victim's device buffer lives in its part's worker: the attacker
  // may import it (a capability), not bind it.
  halo_buffer_t *foreign = NULL;
  HALO_TEST_ASSERT_OK(halo_buffer_import(attacker.client, &token, &foreign));
  halo_dispatch_arg_t arg = {HALO_DISPATCH_ARG_BUFFER,
                             halo_buffer_ref(foreign, 0, sizeof(uint32_t)),
                             NULL, 0};
  halo_dispatch_params_t params = {
      .executable = attacker.executable,
      .entry = "spin",
      .grid = {1, 1, 1},
      .block = {1, 1, 1},
      .args = &arg,
      .arg_count = 1,
  };
  halo_command_buffer_t *cb =
      halo_test_begin(attacker.client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  halo_status_t bound = halo_command_buffer_dispatch(cb, &params);
  if (!bound) bound = halo_command_buffer_end(cb);
  if (!bound) bound = halo_queue_execute(NULL, cb, NULL, 0, NULL, 0, NULL, 0);
  static const char *const other_worker[] = {"another worker",
                                             "workers-per-domain", NULL};
  halo_test_expect_status_all(bound, HALO_STATUS_PERMISSION_DENIED,
                              other_worker,
                              "binding a device buffer of another part");
  halo_command_buffer_release(cb);
  halo_buffer_release(foreign);
  // A second session of the attacker's process joins its part.
  halo_client_t *second = halo_test_connect(&fixture->daemon, 10000);
  HALO_TEST_ASSERT_OK(halo_client_ping(second));
  char victim_part[128], attacker_part[128], expected[64];
  assert_int_equal(sessions_domain(&fixture->daemon, victim->pid, victim_part,
                                   sizeof(victim_part)),
                   1);
  assert_int_equal(sessions_domain(&fixture->daemon, getpid(), attacker_part,
                                   sizeof(attacker_part)),
                   2);
  snprintf(expected, sizeof(expected), "uid:%u#0", (unsigned)getuid());
  assert_string_equal(victim_part, expected);
  snprintf(expected, sizeof(expected), "uid:%u#1", (unsigned)getuid());
  assert_string_equal(attacker_part, expected);
  pid_t victim_worker =
      halo_test_admin_worker_pid(&fixture->daemon, victim_part);
  pid_t attacker_worker =
      halo_test_admin_worker_pid(&fixture->daemon, attacker_part);
  assert_true(victim_worker > 0 && attacker_worker > 0);
  assert_int_not_equal(victim_worker, attacker_worker);
  print_message("the victim's part %s: worker %d; the attacker's %s: %d\n",
                victim_part, (int)victim_worker, attacker_part,
                (int)attacker_worker);

  attacker_crash(fixture, &attacker);
  // The attacker's other session shared the worker: lost too.
  halo_test_expect_status_all(halo_client_ping(second),
                              HALO_STATUS_SESSION_LOST, NULL,
                              "the attacker's second session");
  halo_client_close(second);
  expect_faults(&fixture->daemon, victim->pid, 0, 0, "the victim");
  attacker_rebuild(fixture, &attacker, true);
  // The victim's part never noticed: same worker, every step done.
  assert_int_equal(halo_test_admin_worker_pid(&fixture->daemon, victim_part),
                   victim_worker);
  victim_expect_unaffected(fixture, victim);
  expect_daemon_alive(&fixture->daemon, "at the end");
}

// ---------------------------------------------------------------- pid reuse

// A client that connects, makes its session do something, and prints
// "ready" (and, with |hold|, the pid of a child that keeps the connection
// open after this process ends, then ends: its session outlives it);
// without |hold| it then waits until its stdin closes.
static int reuser_main(const char *address, bool hold) {
  halo_client_options_t options = {.address = address,
                                   .client_name = "containment-reuser",
                                   .request_timeout_ms = 10000};
  halo_client_t *client = NULL;
  halo_semaphore_t *semaphore = NULL;
  halo_status_t status = halo_client_connect(&options, &client);
  if (!status) status = halo_semaphore_create(client, 0, 0, &semaphore);
  if (status) {
    printf("failed %s\n", halo_status_message(status));
    return 1;
  }
  if (hold) {
    pid_t holder = fork();
    if (holder == 0) {
      // Holds the connection's descriptors and makes no call (the parent's
      // threads are not here) until its stdin, the test's pipe, closes: at
      // the test's end, or its exit on a failure. Its output goes nowhere,
      // so that nothing waits for it to close.
      int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (null >= 0) {
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
      }
      char byte;
      while (read(STDIN_FILENO, &byte, 1) > 0) {
      }
      _exit(0);
    }
    printf("ready %d\n", (int)holder);
    fflush(stdout);
    _exit(0);  // no close: the connection stays with the holder
  }
  printf("ready 0\n");
  fflush(stdout);
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  halo_client_close(client);
  return 0;
}

// Starts this program as a reuser (|hold| as above) with pid |pid| (0: any;
// else clone3's set_tid, which needs CAP_SYS_ADMIN). Returns its pid, or -1
// where clone3 is refused; *out_stdin and *out_stdout are its stdin's write
// end and stdout's read end.
static pid_t reuser_start(const char *address, bool hold, pid_t pid,
                          int *out_stdin, int *out_stdout) {
  int in[2], out[2];
  assert_int_equal(pipe2(in, O_CLOEXEC), 0);
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  struct clone_args args = {.exit_signal = SIGCHLD};
  pid_t set_tid[1] = {pid};
  args.set_tid = (uint64_t)(uintptr_t)set_tid;
  args.set_tid_size = 1;
  fflush(NULL);
  // Any pid: a plain fork. That pid: clone3 (ENOSYS under a container's
  // default seccomp profile, EPERM without CAP_SYS_ADMIN or
  // CAP_CHECKPOINT_RESTORE, EINVAL or E2BIG before Linux 5.5, EEXIST where
  // another process took the pid meanwhile).
  long child = pid > 0 ? syscall(SYS_clone3, &args, sizeof(args)) : fork();
  if (child < 0) {
    // A kernel before 5.5 (no clone3 or set_tid), or a sandbox that
    // refuses it: the caller skips.
    print_message("clone3 (set_tid %d): %s\n", (int)pid, strerror(errno));
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    return -1;
  }
  if (child == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    char self[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (length <= 0) _exit(126);
    self[length] = '\0';
    execl(self, self, "--reuser", address, hold ? "hold" : "stay",
          (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  *out_stdin = in[1];
  *out_stdout = out[0];
  return (pid_t)child;
}

// Reads the reuser's "ready N" line; returns N.
static pid_t reuser_ready(int fd) {
  char line[256];
  size_t used = 0;
  while (used + 1 < sizeof(line)) {
    struct pollfd poll_fd = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&poll_fd, 1, HALO_TEST_DEADLINE_MS), 1);
    ssize_t got = read(fd, line + used, 1);
    if (got <= 0) break;
    if (line[used] == '\n') break;
    ++used;
  }
  line[used] = '\0';
  int holder = -1;
  if (sscanf(line, "ready %d", &holder) != 1) {
    print_error("the reuser said \"%s\", not ready\n", line);
    fail();
  }
  return (pid_t)holder;
}

// The workers halod lists for trust domain |domain|, and their sessions.
static uint32_t domain_workers(const halo_test_daemon_t *daemon,
                               const char *domain, uint32_t *out_sessions) {
  uint32_t count = 0;
  *out_sessions = 0;
  halo_wire_response_t *response = halo_test_admin_workers(daemon);
  for (size_t i = 0; i < response->admin_workers->n_workers; ++i) {
    const Halo__Wire__WorkerInfo *worker = response->admin_workers->workers[i];
    if (strcmp(worker->domain, domain) != 0) continue;
    ++count;
    *out_sessions += worker->sessions;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return count;
}

// A hostile client whose session is lost (its worker killed) while a
// thread of it keeps its ring full: halod refuses the records the ring held
// at the loss and reads no more; it never stays in that ring (before, it
// read record after record for as long as the client wrote them, and
// served nobody else meanwhile).
static void test_lost_ring_fed_on_does_not_stop_halod(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_test_process_t *victim = &fixture->peers[0];
  victim_start(fixture, victim, "stop");
  fixture->client = halo_test_connect(&fixture->daemon, 10000);
  halo_client_t *client = fixture->client;
  assert_non_null(client->ring.header);
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
  pid_t worker = find_attacker_worker(&fixture->daemon);

  static ring_feeder_t feeder;
  memset(&feeder, 0, sizeof(feeder));
  feeder.ring = &client->ring;
  feeder.semaphore = halo_semaphore_handle(semaphore);
  feeder.until_ns = halo_test_now_ns() + 6000 * MS;
  assert_int_equal(
      pthread_create(&feeder.thread, NULL, ring_feeder_main, &feeder), 0);
  halo_test_sleep_ms(200);  // halod drains it meanwhile
  print_message("SIGKILL to the attacker's worker, pid %d\n", worker);
  assert_int_equal(kill(worker, SIGKILL), 0);
  touch(fixture, "crashed");
  int64_t slowest = admin_slowest_ms(&fixture->daemon, 2000);
  atomic_store(&feeder.stop, true);
  pthread_join(feeder.thread, NULL);
  print_message(
      "the attacker wrote %llu ring records; its ring %s; halod's slowest "
      "admin answer meanwhile: %lld ms\n",
      (unsigned long long)feeder.records,
      feeder.broken ? "was marked broken" : "was never marked broken",
      (long long)slowest);
  if (slowest < 0 || slowest >= 1000) {
    print_error(
        "halod stopped serving while it read the lost session's ring, which "
        "its client kept writing\n");
    fail();
  }
  assert_true(feeder.broken);
  expect_daemon_alive(&fixture->daemon, "after the attacker's loss");
  HALO_TEST_EXPECT_STATUS(halo_client_ping(client), HALO_STATUS_SESSION_LOST,
                          NULL);
  victim_expect_unaffected(fixture, victim);
  halo_semaphore_release(semaphore);
}

// A process domain is its process's, not its pid's: a later process with
// the pid of one whose session is still open (a forked child holds it)
// must not join that domain, which would give it the first process's
// worker and device context (and with it that process's device memory).
static void test_reused_pid_gets_its_own_domain(void **state) {
  halo_test_fixture_t *fixture = *state;
  if (geteuid() != 0) {
    skip();  // clone3's set_tid needs CAP_SYS_ADMIN
  }
  const char *address = fixture->daemon.listen_address;
  // The holder outlives its parent: reparented here, so that this test
  // reaps it (an init that reaps nothing would keep it a zombie).
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int first_in, first_out;
  pid_t first = reuser_start(address, true, 0, &first_in, &first_out);
  assert_true(first > 0);
  pid_t holder = reuser_ready(first_out);
  int wait_status = 0;
  assert_int_equal(waitpid(first, &wait_status, 0), first);
  close(first_out);
  assert_true(holder > 0);  // holds the session until first_in closes
  char domain[32];
  snprintf(domain, sizeof(domain), "pid:%d", (int)first);
  uint32_t sessions = 0;
  assert_int_equal(domain_workers(&fixture->daemon, domain, &sessions), 1);
  assert_int_equal(sessions, 1);
  // The pid is free again (reaped); the holder keeps the session open.
  // halod tells processes apart by their start time, which /proc gives in
  // clock ticks (10 ms): the later process starts a tick or more after the
  // first, as any process that gets a reused pid does (the kernel hands
  // pids out in order: reuse takes a wrap of the pid space, or set_tid).
  usleep(30000);
  int second_in, second_out;
  pid_t second = reuser_start(address, false, first, &second_in, &second_out);
  if (second < 0) {
    close(first_in);  // the holder ends
    waitpid(holder, NULL, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    skip();  // no clone3 with set_tid here
  }
  assert_int_equal(second, first);
  reuser_ready(second_out);
  uint32_t workers = domain_workers(&fixture->daemon, domain, &sessions);
  print_message(
      "pid %d reused: halod lists %u worker(s) for %s with %u session(s)\n",
      (int)first, workers, domain, sessions);
  if (workers != 2 || sessions != 2) {
    print_error(
        "the second process with pid %d joined the first one's trust domain "
        "(%u worker(s) for %s, %u session(s)): it should have a domain and a "
        "worker of its own\n",
        (int)first, workers, domain, sessions);
  }
  close(second_in);  // the second reuser closes its client and ends
  assert_int_equal(waitpid(second, &wait_status, 0), second);
  assert_true(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
  close(first_in);                                     // the holder ends
  assert_int_equal(waitpid(holder, NULL, 0), holder);  // reparented here
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  assert_int_equal(workers, 2);
  assert_int_equal(sessions, 2);
  expect_daemon_alive(&fixture->daemon, "at the end");
}

int main(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[1], "--victim") == 0) {
    return victim_main(argv[2], argv[3], argv[4], argv[5]);
  }
  if (argc == 4 && strcmp(argv[1], "--reuser") == 0) {
    return reuser_main(argv[2], strcmp(argv[3], "hold") == 0);
  }
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_crash_is_contained_in_its_domain,
                                      setup_process_domains,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(
          test_killed_worker_is_contained_in_its_domain, setup_process_domains,
          halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_deadline_replaces_a_spinning_worker,
                                      setup_deadline,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(
          test_fault_budget_refuses_a_repeat_offender, setup_fault_budget,
          halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_sessions_of_one_domain_share_fate,
                                      setup_uid_domain,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_parts_of_one_domain_are_contained,
                                      setup_two_parts,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_lost_ring_fed_on_does_not_stop_halod,
                                      setup_process_domains,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_reused_pid_gets_its_own_domain,
                                      setup_process_domains,
                                      halo_test_fixture_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
