// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Many device workers lost at once (a GPU-wide fault, or one client's fatal
// fault under MPS, ends every domain's worker together): halod handles
// every loss on its loop, however many are reported while the loop is busy.
// Until halod's queue of lost workers grew on demand it held 64: a loss
// reported past that was completed off the loop and never handled, so its
// trust domain's sessions were never lost (the next semaphore_create
// returned OK, device buffers DEVICE_LOST forever) and `haloctl workers`
// showed the domain "starting" with no pid.
//
// halod runs with --trust-domain process (a domain, hence a worker, per
// client process) and CLIENTS client processes (this program re-executed
// with --client). To have the losses wait for the loop, halod's loop thread
// is stopped alone (ptrace, halo_test_pause_loop; its other threads run
// on). While it waits, the KILLED workers of all clients but one (the
// bystander) are SIGKILLed and reaped by halod's reader threads, each of
// which reports its loss; then the loop goes on. Where the test may not
// trace halod (not root), all of halod is stopped instead: its readers
// then reap and report once it continues, while the loop runs, and may be
// taken one by one. Then:
// - the bystander creates a device buffer (its worker was not touched);
// - every killed domain's client finds its session lost: its next request
//   (semaphore_create) fails with SESSION_LOST (or DEVICE_LOST) naming its
//   trust domain and its worker's pid;
// - halod lists every killed domain's worker as "lost" (none "starting"
//   without a pid);
// - each of them reconnects and creates a semaphore, and halod lists a new
//   serving worker for every domain;
// - every client exits normally and halod exits 0 at SIGTERM (the fixture's
//   teardown). Local driver (cheap workers).
//
// Clients: `mass_loss_test --client ADDRESS` connects, creates a semaphore
// and prints "ready"; then for each line on its stdin: "buffer" (a device
// buffer: prints "buffer CODE MESSAGE"), "check" (semaphore_create on its
// first client: "lost CODE MESSAGE"), "rebuild" (closes that client,
// connects again, creates a semaphore: "rebuilt CODE MESSAGE"); at EOF it
// closes its client and exits 0.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

#define MS HALO_TEST_MS
// Workers killed at once: more than the 64 lost workers halod's loop
// could once have waiting.
#define KILLED 70
#define CLIENTS (KILLED + 1)  // and the bystander
// Request timeout of the clients: halod serializes their Hellos (each
// takes a worker) on two cores under ASan.
#define CLIENT_TIMEOUT_MS 60000
// Bound of each phase (every client's line).
#define PHASE_MS 60000
// halod's loop stays stopped at most this long.
#define STALL_BOUND_MS 15000
// After the killed workers were reaped, time for their reader threads to
// report the losses (a few microseconds each after the reap).
#define REPORT_MS 300

// ---------------------------------------------------------------- client

static void client_print(const char *label, halo_status_t status) {
  char message[3000];
  snprintf(message, sizeof(message), "%s", halo_status_message(status));
  for (char *p = message; *p; ++p) {
    if (*p == '\n' || *p == '\r') *p = ' ';
  }
  printf("%s %d %s\n", label, (int)halo_status_code(status), message);
  fflush(stdout);
  halo_status_free(status);
}

static halo_status_t client_open(const char *address,
                                 halo_client_t **out_client) {
  halo_client_options_t options = {.address = address,
                                   .client_name = "mass-loss-client",
                                   .request_timeout_ms = CLIENT_TIMEOUT_MS};
  *out_client = NULL;
  halo_status_t status = halo_client_connect(&options, out_client);
  halo_semaphore_t *semaphore = NULL;
  if (!status) status = halo_semaphore_create(*out_client, 0, 0, &semaphore);
  halo_semaphore_release(semaphore);
  return status;
}

static int client_main(const char *address) {
  halo_client_t *client = NULL;
  halo_status_t status = client_open(address, &client);
  if (status) {
    client_print("failed", status);
    halo_client_close(client);
    return 2;
  }
  printf("ready\n");
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof(line), stdin)) {
    if (strcmp(line, "buffer\n") == 0) {
      halo_buffer_t *buffer = NULL;
      status =
          halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 4096, 0, &buffer);
      halo_buffer_release(buffer);
      client_print("buffer", status);
    } else if (strcmp(line, "check\n") == 0) {
      halo_semaphore_t *semaphore = NULL;
      status = halo_semaphore_create(client, 0, 0, &semaphore);
      halo_semaphore_release(semaphore);
      client_print("lost", status);
    } else if (strcmp(line, "rebuild\n") == 0) {
      halo_client_close(client);
      client_print("rebuilt", client_open(address, &client));
    } else {
      printf("unknown %s", line);
      fflush(stdout);
    }
  }
  halo_client_close(client);
  return 0;
}

// ---------------------------------------------------------------- harness

typedef struct client_t {
  pid_t pid;   // 0 once reaped
  int input;   // its stdin's write end (-1: closed)
  int output;  // its stdout's read end (-1: closed)
  char buffer[4096];
  size_t length;
  char domain[32];  // "pid:PID"
  pid_t worker;     // its domain's worker before the kills
} client_t;

typedef struct mass_state_t {
  void *fixture;  // halo_test_fixture_t, as its setup and teardown take it
  client_t clients[CLIENTS];
  pid_t paused;  // halod, its loop paused (traced) or all of it stopped
  bool traced;
} mass_state_t;

static void client_start(client_t *client, const char *address) {
  memset(client, 0, sizeof(*client));
  client->input = client->output = -1;
  int in[2], out[2];
  assert_int_equal(pipe2(in, O_CLOEXEC), 0);
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  pid_t parent = getpid();
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
    if (getppid() != parent) _exit(126);
    if (dup2(in[0], STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0) {
      _exit(126);
    }
    execl("/proc/self/exe", "mass_loss_test", "--client", address,
          (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  client->pid = pid;
  client->input = in[1];
  client->output = out[0];
  snprintf(client->domain, sizeof(client->domain), "pid:%d", (int)pid);
}

static void client_send(client_t *client, const char *command) {
  size_t length = strlen(command);
  if (write(client->input, command, length) != (ssize_t)length) {
    print_error("client %d: writing \"%s\" to its stdin: %s\n",
                (int)client->pid, command, strerror(errno));
    fail();
  }
}

// Reads the client's next line (without its newline) by |deadline_ns|;
// fails the test if none comes.
static void client_read_line(client_t *client, char *out_line, size_t capacity,
                             int64_t deadline_ns) {
  for (;;) {
    char *newline = memchr(client->buffer, '\n', client->length);
    if (newline) {
      size_t length = (size_t)(newline - client->buffer);
      size_t kept = length < capacity ? length : capacity - 1;
      memcpy(out_line, client->buffer, kept);
      out_line[kept] = '\0';
      client->length -= length + 1;
      memmove(client->buffer, newline + 1, client->length);
      return;
    }
    if (client->length == sizeof(client->buffer)) {
      print_error("client %d: a line longer than %zu bytes\n", (int)client->pid,
                  sizeof(client->buffer));
      fail();
    }
    int64_t remaining_ms = (deadline_ns - halo_test_now_ns()) / MS;
    struct pollfd pfd = {.fd = client->output, .events = POLLIN};
    int ready = remaining_ms > 0 ? poll(&pfd, 1, (int)remaining_ms) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      print_error("client %d wrote no line in time\n", (int)client->pid);
      fail();
    }
    ssize_t got = read(client->output, client->buffer + client->length,
                       sizeof(client->buffer) - client->length);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      print_error("client %d closed its stdout before a line\n",
                  (int)client->pid);
      fail();
    }
    client->length += (size_t)got;
  }
}

// Reads a line "LABEL CODE MESSAGE"; returns CODE, |out_message| the rest.
static int client_read_result(client_t *client, const char *label,
                              char *out_message, size_t capacity,
                              int64_t deadline_ns) {
  char line[4096];
  client_read_line(client, line, sizeof(line), deadline_ns);
  size_t label_length = strlen(label);
  int code = -1, consumed = 0;
  if (strncmp(line, label, label_length) != 0 || line[label_length] != ' ' ||
      sscanf(line + label_length, " %d %n", &code, &consumed) < 1) {
    print_error("client %d: expected \"%s CODE MESSAGE\", got: %s\n",
                (int)client->pid, label, line);
    fail();
  }
  snprintf(out_message, capacity, "%s", line + label_length + consumed);
  return code;
}

// SIGKILLs and reaps a client still running; closes its pipes.
static void client_cleanup(client_t *client) {
  if (client->pid > 0) {
    kill(client->pid, SIGKILL);
    waitpid(client->pid, NULL, 0);
    client->pid = 0;
  }
  if (client->input >= 0) close(client->input);
  if (client->output >= 0) close(client->output);
  client->input = client->output = -1;
}

// Whether |pid| is no longer a child of |parent| (exited and reaped).
static bool reaped_by(pid_t pid, pid_t parent) {
  pid_t ppid = 0;
  return !halo_test_proc_stat(pid, NULL, &ppid) || ppid != parent;
}

// The worker halod lists for |domain|, and its state and faults.
static const Halo__Wire__WorkerInfo *find_worker(
    const halo_wire_response_t *response, const char *domain) {
  for (size_t i = 0; i < response->admin_workers->n_workers; ++i) {
    const Halo__Wire__WorkerInfo *worker = response->admin_workers->workers[i];
    if (strcmp(worker->domain, domain) == 0) return worker;
  }
  return NULL;
}

static void print_worker(const client_t *client,
                         const Halo__Wire__WorkerInfo *worker) {
  if (!worker) {
    print_error("  %s: no worker listed\n", client->domain);
    return;
  }
  print_error("  %s: worker pid %d, %s, %u session(s), %u fault(s)%s%s\n",
              client->domain, (int)worker->pid, worker->state, worker->sessions,
              worker->faults, worker->last_fault[0] ? ": " : "",
              worker->last_fault);
}

// ---------------------------------------------------------------- fixture

static int setup(void **state) {
  mass_state_t *mass = calloc(1, sizeof(*mass));
  assert_non_null(mass);
  for (int i = 0; i < CLIENTS; ++i) {
    mass->clients[i].input = mass->clients[i].output = -1;
  }
  *state = mass;
  // One trust domain (so one worker) per client process; spares ahead so
  // that CLIENTS domains get workers quickly. Their Hellos queue on halod's
  // loop, which takes a worker for each: under a sanitizer on two cores
  // the last may wait past the default hello-timeout-ms (10 s). Margin on
  // fd-channel-unauthenticated (64 by default; a client opens its channel
  // after its Hello), and uid-domains (64 by default: each client process
  // is a domain of the same uid). The other limits (uid-connections 1024,
  // connections, fd-channel-connections, fault-budget: nothing is in flight on
  // the killed workers) are far off.
  static const char *const args[] = {"--trust-domain",
                                     "process",
                                     "--worker-spares",
                                     "4",
                                     "--hello-timeout-ms",
                                     "60000",
                                     "--fd-channel-unauthenticated",
                                     "256",
                                     "--uid-domains",
                                     "256",
                                     NULL};
  return halo_test_fixture_setup_with(&mass->fixture, args, false);
}

static int teardown(void **state) {
  mass_state_t *mass = *state;
  if (!mass) return 0;
  // A loop left paused would hold halod's stop.
  if (mass->paused > 0) {
    if (mass->traced) {
      halo_test_resume_loop(mass->paused);
    } else {
      kill(mass->paused, SIGCONT);
    }
  }
  for (int i = 0; i < CLIENTS; ++i) client_cleanup(&mass->clients[i]);
  void *fixture = mass->fixture;
  free(mass);
  *state = NULL;
  // Stops halod with SIGTERM and asserts it exits 0.
  return fixture ? halo_test_fixture_teardown(&fixture) : 0;
}

// ---------------------------------------------------------------- test

static void test_every_lost_worker_loses_its_sessions(void **state) {
  mass_state_t *mass = *state;
  halo_test_fixture_t *fixture = mass->fixture;
  halo_test_daemon_t *daemon = &fixture->daemon;
  HALO_TEST_LOCAL_ONLY("a worker per client process: cheap on local only");
  client_t *clients = mass->clients;
  client_t *bystander = &clients[0];
  client_t *killed = &clients[1];
  int64_t started = halo_test_now_ns();

  // CLIENTS processes, each its own trust domain with a worker.
  for (int i = 0; i < CLIENTS; ++i) {
    client_start(&clients[i], daemon->listen_address);
  }
  int64_t deadline = halo_test_now_ns() + PHASE_MS * MS;
  for (int i = 0; i < CLIENTS; ++i) {
    char line[4096];
    client_read_line(&clients[i], line, sizeof(line), deadline);
    if (strcmp(line, "ready") != 0) {
      print_error("client %d did not start: %s\n", (int)clients[i].pid, line);
      fail();
    }
  }
  halo_wire_response_t *response = halo_test_admin_workers(daemon);
  for (int i = 0; i < CLIENTS; ++i) {
    const Halo__Wire__WorkerInfo *worker =
        find_worker(response, clients[i].domain);
    if (!worker || worker->pid <= 0 || strcmp(worker->state, "serving") != 0) {
      print_error("halod lists no serving worker for client %d:\n",
                  (int)clients[i].pid);
      print_worker(&clients[i], worker);
      fail();
    }
    clients[i].worker = (pid_t)worker->pid;
    assert_true(halo_test_is_live_child(clients[i].worker, daemon->pid));
  }
  halo__wire__response__free_unpacked(response, NULL);
  print_message("%d clients up, each with its worker, in %lld ms\n", CLIENTS,
                (long long)((halo_test_now_ns() - started) / MS));

  // Pause halod's loop; its reader threads go on.
  int64_t stalled = halo_test_now_ns();
  mass->traced = halo_test_pause_loop(daemon->pid);
  if (!mass->traced) {
    print_message("ptrace unavailable (%s): stopping all of halod\n",
                  strerror(errno));
    assert_int_equal(kill(daemon->pid, SIGSTOP), 0);
  }
  mass->paused = daemon->pid;

  // Kill the other workers while the loop waits; halod's reader threads
  // reap them and report the losses to the loop, which cannot take them
  // yet.
  for (int i = 0; i < KILLED; ++i) {
    assert_int_equal(kill(killed[i].worker, SIGKILL), 0);
  }
  for (int i = 0; mass->traced && i < KILLED; ++i) {
    if (!HALO_TEST_POLL(reaped_by(killed[i].worker, daemon->pid),
                        HALO_TEST_DEADLINE_MS)) {
      print_error("halod did not reap its killed worker %d (%s)\n",
                  (int)killed[i].worker, killed[i].domain);
      fail();
    }
  }
  if (mass->traced) halo_test_sleep_ms(REPORT_MS);
  int64_t stall_ms = (halo_test_now_ns() - stalled) / MS;
  if (mass->traced) {
    halo_test_resume_loop(daemon->pid);
  } else {
    assert_int_equal(kill(daemon->pid, SIGCONT), 0);
  }
  mass->paused = 0;
  print_message(
      "%d workers killed%s while halod's loop was paused; it went on after "
      "%lld ms\n",
      KILLED, mass->traced ? " and reaped" : "", (long long)stall_ms);
  assert_true(stall_ms <= STALL_BOUND_MS);
  // The bystander's domain was not touched: it still works.
  char message[4096];
  deadline = halo_test_now_ns() + PHASE_MS * MS;
  client_send(bystander, "buffer\n");
  int code = client_read_result(bystander, "buffer", message, sizeof(message),
                                deadline);
  if (code != HALO_STATUS_OK) {
    print_error("the bystander's device buffer: %s: %s\n",
                halo_status_code_name(code), message);
    fail();
  }

  // Every killed domain's session is lost: its next request says so.
  for (int i = 0; i < KILLED; ++i) client_send(&killed[i], "check\n");
  int not_lost = 0;
  for (int i = 0; i < KILLED; ++i) {
    code = client_read_result(&killed[i], "lost", message, sizeof(message),
                              deadline);
    char domain_text[64], worker_text[64];
    snprintf(domain_text, sizeof(domain_text), "trust domain %s",
             killed[i].domain);
    snprintf(worker_text, sizeof(worker_text), "worker (pid %d)",
             (int)killed[i].worker);
    bool lost =
        (code == HALO_STATUS_SESSION_LOST || code == HALO_STATUS_DEVICE_LOST) &&
        strstr(message, domain_text) && strstr(message, worker_text);
    if (i == 0 && lost) {
      print_message("client %d (%s), its worker %d killed: %s: %s\n",
                    (int)killed[i].pid, killed[i].domain, (int)killed[i].worker,
                    halo_status_code_name(code), message);
    }
    if (lost) continue;
    ++not_lost;
    print_error(
        "client %d (%s), its worker %d killed: semaphore_create should fail "
        "with SESSION_LOST or DEVICE_LOST naming \"%s\" and \"%s\", got %s: "
        "%s\n",
        (int)killed[i].pid, killed[i].domain, (int)killed[i].worker,
        domain_text, worker_text, code >= 0 ? halo_status_code_name(code) : "?",
        message);
  }
  // halod lists each killed domain's worker as lost, none as still
  // starting without a pid.
  response = halo_test_admin_workers(daemon);
  int not_listed_lost = 0;
  for (int i = 0; i < KILLED; ++i) {
    const Halo__Wire__WorkerInfo *worker =
        find_worker(response, killed[i].domain);
    if (worker && worker->pid == 0 && strcmp(worker->state, "lost") == 0 &&
        worker->faults == 1) {
      continue;
    }
    if (not_listed_lost++ == 0) {
      print_error("halod lists killed domains' workers as not lost:\n");
    }
    print_worker(&killed[i], worker);
  }
  halo__wire__response__free_unpacked(response, NULL);
  if (not_lost || not_listed_lost) {
    print_error(
        "of %d workers killed at once, %d domain(s) kept sessions that were "
        "not lost and halod lists %d not lost\n",
        KILLED, not_lost, not_listed_lost);
    fail();
  }
  print_message("all %d sessions lost, all %d workers listed lost\n", KILLED,
                KILLED);

  // Each reconnects, gets a new worker, and works.
  for (int i = 0; i < KILLED; ++i) client_send(&killed[i], "rebuild\n");
  deadline = halo_test_now_ns() + PHASE_MS * MS;
  int not_rebuilt = 0;
  for (int i = 0; i < KILLED; ++i) {
    code = client_read_result(&killed[i], "rebuilt", message, sizeof(message),
                              deadline);
    if (code != HALO_STATUS_OK) {
      print_error("client %d (%s) could not rebuild: %s: %s\n",
                  (int)killed[i].pid, killed[i].domain,
                  code >= 0 ? halo_status_code_name(code) : "?", message);
      ++not_rebuilt;
    }
  }
  assert_int_equal(not_rebuilt, 0);
  response = halo_test_admin_workers(daemon);
  int not_serving = 0;
  for (int i = 0; i < CLIENTS; ++i) {
    const Halo__Wire__WorkerInfo *worker =
        find_worker(response, clients[i].domain);
    bool serving = worker && worker->pid > 0 &&
                   strcmp(worker->state, "serving") == 0 &&
                   (i == 0 ? worker->pid == clients[i].worker
                           : worker->pid != clients[i].worker);
    if (serving) continue;
    if (not_serving++ == 0) {
      print_error("after the reconnects, domains without a new worker:\n");
    }
    print_worker(&clients[i], worker);
  }
  halo__wire__response__free_unpacked(response, NULL);
  assert_int_equal(not_serving, 0);
  print_message("all %d reconnected on new workers\n", KILLED);

  // Every client ends normally.
  for (int i = 0; i < CLIENTS; ++i) {
    close(clients[i].input);
    clients[i].input = -1;
  }
  deadline = halo_test_now_ns() + PHASE_MS * MS;
  for (int i = 0; i < CLIENTS; ++i) {
    pid_t pid = clients[i].pid;
    int wait_status = 0;
    if (!HALO_TEST_POLL(waitpid(pid, &wait_status, WNOHANG) == pid,
                        (deadline - halo_test_now_ns()) / MS)) {
      print_error("client %d did not exit\n", (int)pid);
      fail();
    }
    clients[i].pid = 0;  // reaped
    if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
      print_error("client %d ended with wait status 0x%x\n", (int)pid,
                  wait_status);
      fail();
    }
  }
  print_message("done in %lld ms\n",
                (long long)((halo_test_now_ns() - started) / MS));
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--client") == 0) {
    return client_main(argv[2]);
  }
  // A client that died must not take the test with it on a write.
  signal(SIGPIPE, SIG_IGN);
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_every_lost_worker_loses_its_sessions,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
