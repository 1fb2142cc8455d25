// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "tests/support/halo_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/admin.h"

#ifndef HALO_TEST_HALOD
#error "HALO_TEST_HALOD must name the halod executable"
#endif
#ifndef HALO_TEST_PEER
#error "HALO_TEST_PEER must name the semaphore_peer executable"
#endif
#ifndef HALO_TEST_KERNELS_LOCAL
#error "HALO_TEST_KERNELS_LOCAL must name the local test kernels (ELF)"
#endif
#ifndef HALO_TEST_KERNELS_CUDA
#define HALO_TEST_KERNELS_CUDA ""  // built without nvcc
#endif

int64_t halo_test_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

void halo_test_sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000,
                        .tv_nsec = (long)(ms % 1000) * 1000000l};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void halo_test_assert_status(halo_status_t status, halo_status_code_t code,
                             const char *expression, const char *file,
                             int line) {
  halo_status_code_t actual = halo_status_code(status);
  if (actual == code) {
    halo_status_free(status);
    return;
  }
  print_error("%s:%d: %s\n  returned %s (\"%s\"), expected %s\n", file, line,
              expression, halo_status_code_name(actual),
              halo_status_message(status), halo_status_code_name(code));
  halo_status_free(status);
  _fail(file, line);
}

void halo_test_expect_status(halo_status_t status, halo_status_code_t code,
                             const char *substring, const char *expression,
                             const char *file, int line) {
  halo_status_code_t actual = halo_status_code(status);
  const char *message = status ? halo_status_message(status) : "";
  if (actual == code && (!substring || strstr(message, substring))) {
    halo_status_free(status);
    return;
  }
  print_error("%s:%d: %s returned %s '%s'; expected %s with '%s'\n", file, line,
              expression, halo_status_code_name(actual), message,
              halo_status_code_name(code), substring ? substring : "");
  halo_status_free(status);
  _fail(file, line);
}

// ---------------------------------------------------------------- daemon

static int halo__remove_entry(const char *path, const struct stat *st, int type,
                              struct FTW *ftw) {
  (void)st;
  (void)type;
  (void)ftw;
  remove(path);
  return 0;
}

static void halo__remove_tree(const char *dir) {
  if (dir[0]) nftw(dir, halo__remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

// Forks and execs |argv| with the death signal set; |stdout_fd| and
// |stderr_fd| (or -1: inherited) become the child's stdout and stderr.
static pid_t halo__fork_exec(const char *const *argv, int stdout_fd,
                             int stderr_fd) {
  pid_t parent = getpid();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    if (stdout_fd >= 0 && dup2(stdout_fd, STDOUT_FILENO) < 0) _exit(126);
    if (stderr_fd >= 0 && dup2(stderr_fd, STDERR_FILENO) < 0) _exit(126);
    execv(argv[0], (char *const *)argv);
    dprintf(STDERR_FILENO, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

static bool halo__daemon_answers(const halo_test_daemon_t *daemon) {
  halo_admin_t *admin = NULL;
  halo_status_t status =
      halo_admin_connect(daemon->admin_address, 1000, &admin);
  if (status) {
    halo_status_free(status);
    return false;
  }
  halo_wire_response_t *response = NULL;
  status = halo_admin_status(admin, &response);
  bool ok = status == NULL && response && response->admin_status;
  halo_status_free(status);
  if (response) halo__wire__response__free_unpacked(response, NULL);
  halo_admin_close(admin);
  return ok;
}

// Makes |daemon|'s private directory and names its sockets; false (errno
// set) if the directory cannot be made.
static bool halo__daemon_prepare(halo_test_daemon_t *daemon) {
  memset(daemon, 0, sizeof(*daemon));
  snprintf(daemon->dir, sizeof(daemon->dir), "/tmp/halo-test-XXXXXX");
  if (!mkdtemp(daemon->dir)) {
    daemon->dir[0] = '\0';
    return false;
  }
  // Traversable by others: the uid test connects from another uid.
  if (chmod(daemon->dir, 0755) != 0) return false;
  snprintf(daemon->socket_path, sizeof(daemon->socket_path), "%s/halo.sock",
           daemon->dir);
  snprintf(daemon->listen_address, sizeof(daemon->listen_address), "ipc://%s",
           daemon->socket_path);
  snprintf(daemon->admin_address, sizeof(daemon->admin_address),
           "ipc://%s/admin.sock", daemon->dir);
  snprintf(daemon->fd_channel_path, sizeof(daemon->fd_channel_path), "%s.fd",
           daemon->socket_path);
  return true;
}

// Starts halod for |daemon| with the test driver and |extra_args| (NULL or
// NULL-terminated); |stderr_fd| (or -1) becomes its stderr.
static void halo__daemon_spawn_wrapped(halo_test_daemon_t *daemon,
                                       int stderr_fd,
                                       const char *const *wrapper,
                                       const char *const *extra_args) {
  const char *argv[40];
  size_t argc = 0;
  for (size_t i = 0; wrapper && wrapper[i]; ++i) {
    assert_true(argc < 16);
    argv[argc++] = wrapper[i];
  }
  const char *base[] = {HALO_TEST_HALOD,
                        "--listen",
                        daemon->listen_address,
                        "--admin",
                        daemon->admin_address,
                        "--driver",
                        halo_test_driver(),
                        "--log-level",
                        "info"};
  for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); ++i) {
    argv[argc++] = base[i];
  }
  for (size_t i = 0; extra_args && extra_args[i]; ++i) {
    assert_true(argc < sizeof(argv) / sizeof(argv[0]) - 1);
    argv[argc++] = extra_args[i];
  }
  argv[argc] = NULL;
  daemon->pid = halo__fork_exec(argv, -1, stderr_fd);
}

static void halo__daemon_spawn(halo_test_daemon_t *daemon, int stderr_fd,
                               const char *const *extra_args) {
  halo__daemon_spawn_wrapped(daemon, stderr_fd, NULL, extra_args);
}

// Whether |daemon| has its sockets and answers an admin request.
static bool halo__daemon_ready(const halo_test_daemon_t *daemon) {
  struct stat st;
  return stat(daemon->socket_path, &st) == 0 &&
         stat(daemon->fd_channel_path, &st) == 0 &&
         halo__daemon_answers(daemon);
}

// How long halod may take to answer: a GPU driver's initialization (cuInit,
// a context per device) can take seconds.
static int halo__daemon_start_timeout_ms(void) {
  return halo_test_driver_is("local") ? 10000 : 60000;
}

void halo_test_daemon_start(halo_test_daemon_t *daemon) {
  halo_test_daemon_start_with_args(daemon, NULL);
}

void halo_test_daemon_start_with_args(halo_test_daemon_t *daemon,
                                      const char *const *extra_args) {
  halo_test_daemon_start_wrapped(daemon, NULL, extra_args);
}

void halo_test_daemon_start_wrapped(halo_test_daemon_t *daemon,
                                    const char *const *wrapper,
                                    const char *const *extra_args) {
  halo_test_require_driver();
  if (!halo__daemon_prepare(daemon)) {
    print_error("private directory %s: %s\n", daemon->dir, strerror(errno));
    fail();
  }
  halo__daemon_spawn_wrapped(daemon, -1, wrapper, extra_args);
  int timeout_ms = halo__daemon_start_timeout_ms();
  int64_t deadline = halo_test_now_ns() + timeout_ms * HALO_TEST_MS;
  for (;;) {
    int wait_status;
    if (waitpid(daemon->pid, &wait_status, WNOHANG) == daemon->pid) {
      daemon->pid = 0;
      print_error(
          "halod --driver %s exited during start-up (wait status 0x%x; its "
          "log is above)\n",
          halo_test_driver(), wait_status);
      fail();
    }
    if (halo__daemon_ready(daemon)) return;
    if (halo_test_now_ns() > deadline) {
      print_error(
          "halod --driver %s (pid %d) did not answer on %s within %d "
          "ms\n",
          halo_test_driver(), daemon->pid, daemon->admin_address, timeout_ms);
      fail();
    }
    halo_test_sleep_ms(5);
  }
}

// Waits up to |timeout_ms| for |pid| to exit; returns its wait status or -1.
static int halo__wait_pid(pid_t pid, int timeout_ms) {
  int64_t deadline = halo_test_now_ns() + (int64_t)timeout_ms * HALO_TEST_MS;
  for (;;) {
    int wait_status;
    pid_t reaped = waitpid(pid, &wait_status, WNOHANG);
    if (reaped == pid) return wait_status;
    if (reaped < 0 && errno != EINTR) return -1;
    if (halo_test_now_ns() > deadline) return -1;
    halo_test_sleep_ms(1);
  }
}

// Signals the daemon and reaps it; false (with the reason in |why|) unless
// it exits with status 0 within HALO_TEST_DEADLINE_MS.
static bool halo__daemon_stop(halo_test_daemon_t *daemon, int signal_number,
                              char *why, size_t why_size) {
  if (kill(daemon->pid, signal_number) != 0) {
    snprintf(why, why_size, "kill(%d, %d): %s", daemon->pid, signal_number,
             strerror(errno));
    return false;
  }
  int wait_status = halo__wait_pid(daemon->pid, HALO_TEST_DEADLINE_MS);
  if (wait_status == -1) {
    kill(daemon->pid, SIGKILL);
    waitpid(daemon->pid, NULL, 0);
    daemon->pid = 0;
    snprintf(why, why_size, "halod did not exit within %d ms of signal %d",
             HALO_TEST_DEADLINE_MS, signal_number);
    return false;
  }
  daemon->pid = 0;
  if (WIFSIGNALED(wait_status)) {
    snprintf(why, why_size, "halod died of signal %d after signal %d",
             WTERMSIG(wait_status), signal_number);
    return false;
  }
  if (WEXITSTATUS(wait_status) != 0) {
    snprintf(why, why_size,
             "halod exited with status %d after signal %d (under ASan: "
             "look for its leak report above)",
             WEXITSTATUS(wait_status), signal_number);
    return false;
  }
  return true;
}

void halo_test_daemon_stop(halo_test_daemon_t *daemon, int signal_number) {
  assert_true(daemon->pid > 0);
  char why[256];
  if (!halo__daemon_stop(daemon, signal_number, why, sizeof(why))) {
    print_error("%s\n", why);
    fail();
  }
}

void halo_test_daemon_kill(halo_test_daemon_t *daemon) {
  if (daemon->pid <= 0) return;
  assert_return_code(kill(daemon->pid, SIGKILL), errno);
  assert_int_equal(waitpid(daemon->pid, NULL, 0), daemon->pid);
  daemon->pid = 0;
}

void halo_test_daemon_cleanup(halo_test_daemon_t *daemon) {
  if (daemon->pid > 0) {
    kill(daemon->pid, SIGKILL);
    waitpid(daemon->pid, NULL, 0);
    daemon->pid = 0;
  }
  halo__remove_tree(daemon->dir);
  daemon->dir[0] = '\0';
}

halo_client_t *halo_test_connect(const halo_test_daemon_t *daemon,
                                 int32_t timeout_ms) {
  halo_client_options_t options = {
      .address = daemon->listen_address,
      .client_name = "halo-test",
      .request_timeout_ms = timeout_ms,
  };
  halo_client_t *client = NULL;
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &client));
  assert_non_null(client);
  return client;
}

// Fails unless |status| has |code| and its message contains every one of
// |substrings| (NULL-terminated); prints it either way, frees it.
void halo_test_expect_status_all(halo_status_t status, halo_status_code_t code,
                                 const char *const *substrings,
                                 const char *what) {
  const char *message = halo_status_message(status);
  print_message("%s: %s: %s\n", what,
                halo_status_code_name(halo_status_code(status)), message);
  bool ok = halo_status_code(status) == code;
  for (const char *const *s = substrings; ok && s && *s; ++s) {
    ok = strstr(message, *s) != NULL;
  }
  if (!ok) {
    print_error("%s: expected %s", what, halo_status_code_name(code));
    for (const char *const *s = substrings; s && *s; ++s) {
      print_error(" with \"%s\"", *s);
    }
    print_error(" in the message, got %s: %s\n",
                halo_status_code_name(halo_status_code(status)), message);
    halo_status_free(status);
    fail();
  }
  halo_status_free(status);
}

int halo_test_fixture_setup_with(void **state, const char *const *args,
                                 bool connect) {
  halo_test_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  halo_test_daemon_start_with_args(&fixture->daemon, args);
  if (connect) fixture->client = halo_test_connect(&fixture->daemon, 10000);
  return 0;
}

int halo_test_fixture_setup(void **state) {
  return halo_test_fixture_setup_with(state, NULL, true);
}

int halo_test_fixture_teardown(void **state) {
  halo_test_fixture_t *fixture = *state;
  if (!fixture) return 0;
  for (int i = 0; i < HALO_TEST_MAX_PEERS; ++i) {
    halo_test_process_cleanup(&fixture->peers[i]);
  }
  halo_client_close(fixture->client);
  fixture->client = NULL;
  bool stopped = true;
  char why[256] = "";
  if (fixture->daemon.pid > 0) {
    // A test that failed while it held halod stopped (SIGSTOP) left it so:
    // SIGTERM would wait behind the stop until the deadline.
    kill(fixture->daemon.pid, SIGCONT);
    stopped = halo__daemon_stop(&fixture->daemon, SIGTERM, why, sizeof(why));
  }
  halo_test_daemon_cleanup(&fixture->daemon);
  free(fixture);
  *state = NULL;
  if (!stopped) {
    print_error("%s\n", why);
    fail();
  }
  return 0;
}

// ---------------------------------------------------------------- drivers

const char *halo_test_driver(void) {
  const char *driver = getenv("HALO_TEST_DRIVER");
  return driver && driver[0] ? driver : "local";
}

bool halo_test_driver_is(const char *name) {
  return strcmp(halo_test_driver(), name) == 0;
}

const char *halo_test_kernels_path(void) {
  const char *path = getenv("HALO_TEST_KERNELS");
  if (path && path[0]) return path;
  return halo_test_driver_is("local") ? HALO_TEST_KERNELS_LOCAL
                                      : HALO_TEST_KERNELS_CUDA;
}

halo_executable_t *halo_test_load_kernels(halo_client_t *client) {
  const char *path = halo_test_kernels_path();
  if (!path[0]) {
    print_error(
        "no test kernels for driver %s: the build found no nvcc (set "
        "HALO_TEST_KERNELS to a .ptx, .cubin or .fatbin of "
        "tests/kernels/test_kernels.cu)\n",
        halo_test_driver());
    fail();
  }
  halo_executable_t *executable = NULL;
  halo_status_t status =
      halo_executable_create_from_file(client, 0, path, 0, &executable);
  if (status) {
    print_error(
        "loading the test kernels on device 0 (driver %s) from %s: "
        "%s: %s\n",
        halo_test_driver(), path,
        halo_status_code_name(halo_status_code(status)),
        halo_status_message(status));
    halo_status_free(status);
    fail();
  }
  assert_non_null(executable);
  return executable;
}

void halo_test_local_only(const char *reason, const char *file, int line) {
  if (halo_test_driver_is("local")) return;
  print_message("%s:%d: skipped on driver %s (local driver only): %s\n", file,
                line, halo_test_driver(), reason);
  _skip(file, line);
}

// Appends what can be read now from the non-blocking |fd| to |log| (at
// most |capacity| - 1 bytes in all, NUL-terminated).
static void halo__read_log(int fd, char *log, size_t capacity, size_t *length) {
  char chunk[4096];
  for (;;) {
    ssize_t got = read(fd, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return;
    size_t room = capacity - 1 - *length;
    size_t take = (size_t)got < room ? (size_t)got : room;
    memcpy(log + *length, chunk, take);
    *length += take;
    log[*length] = '\0';
  }
}

// Prints device 0 of the daemon at |address| (what the tests run on).
static void halo__print_device(const char *address) {
  halo_client_options_t options = {.address = address,
                                   .client_name = "halo-test probe"};
  halo_client_t *client = NULL;
  halo_device_info_t info;
  halo_status_t status = halo_client_connect(&options, &client);
  if (!status) status = halo_client_device_info(client, 0, &info);
  if (status) {
    printf("halo-test: device 0: %s: %s\n",
           halo_status_code_name(halo_status_code(status)),
           halo_status_message(status));
  } else {
    printf(
        "halo-test: device 0: %s %s (compute %u.%u, %u multiprocessors, "
        "%llu MiB)\n",
        info.driver, info.name, info.compute_major, info.compute_minor,
        info.multiprocessor_count,
        (unsigned long long)(info.memory_bytes >> 20));
  }
  halo_status_free(status);
  halo_client_close(client);
}

void halo_test_require_driver(void) {
  static bool checked;
  if (checked) return;
  checked = true;
  const char *driver = halo_test_driver();
  if (!halo_test_driver_is("local") && !halo_test_driver_is("cuda")) {
    fprintf(stderr, "halo-test: HALO_TEST_DRIVER=%s: expected local or cuda\n",
            driver);
    exit(2);
  }
  if (halo_test_driver_is("local")) return;
  const char *kernels = halo_test_kernels_path();
  printf("halo-test: driver %s; halod %s; test kernels %s\n", driver,
         HALO_TEST_HALOD,
         kernels[0] ? kernels : "(none: no nvcc in the build)");
  fflush(stdout);

  // One halod with the driver, its log on a pipe: does it start?
  halo_test_daemon_t daemon;
  int pipe_fds[2];
  if (!halo__daemon_prepare(&daemon) || pipe2(pipe_fds, O_CLOEXEC) != 0) {
    fprintf(stderr, "halo-test: probing driver %s: %s\n", driver,
            strerror(errno));
    halo__remove_tree(daemon.dir);
    exit(1);
  }
  fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  halo__daemon_spawn(&daemon, pipe_fds[1], NULL);
  close(pipe_fds[1]);
  static char log[16384];
  size_t length = 0;
  int64_t start = halo_test_now_ns();
  int64_t deadline = start + halo__daemon_start_timeout_ms() * HALO_TEST_MS;
  int wait_status = 0;
  bool exited = false;
  bool answered = false;
  while (!exited && !answered && halo_test_now_ns() < deadline) {
    halo__read_log(pipe_fds[0], log, sizeof(log), &length);
    if (waitpid(daemon.pid, &wait_status, WNOHANG) == daemon.pid) {
      daemon.pid = 0;
      exited = true;
    } else if (halo__daemon_ready(&daemon)) {
      answered = true;
    } else {
      halo_test_sleep_ms(10);
    }
  }
  double elapsed_ms = (double)(halo_test_now_ns() - start) / 1e6;

  if (answered) {
    printf("halo-test: halod --driver %s answered after %.0f ms\n", driver,
           elapsed_ms);
    halo__print_device(daemon.listen_address);
    fflush(stdout);
    kill(daemon.pid, SIGTERM);
    wait_status = halo__wait_pid(daemon.pid, HALO_TEST_DEADLINE_MS);
    if (wait_status == -1) {
      kill(daemon.pid, SIGKILL);
      waitpid(daemon.pid, NULL, 0);
    }
    halo__read_log(pipe_fds[0], log, sizeof(log), &length);
    close(pipe_fds[0]);
    halo__remove_tree(daemon.dir);
    if (wait_status == -1 || !WIFEXITED(wait_status) ||
        WEXITSTATUS(wait_status) != 0) {
      fprintf(stderr,
              "%shalo-test: halod --driver %s did not stop cleanly on "
              "SIGTERM (wait status 0x%x)\n",
              log, driver, wait_status);
      exit(1);
    }
    return;
  }

  if (!exited) {
    kill(daemon.pid, SIGKILL);
    waitpid(daemon.pid, NULL, 0);
  }
  halo__read_log(pipe_fds[0], log, sizeof(log), &length);
  close(pipe_fds[0]);
  halo__remove_tree(daemon.dir);
  fputs(log, stderr);
  char unavailable[64];
  snprintf(unavailable, sizeof(unavailable), "driver %s unavailable", driver);
  const char *reason = exited ? strstr(log, unavailable) : NULL;
  if (reason) {
    size_t line = strcspn(reason, "\n");
    printf("SKIP: halod cannot serve driver %s here: %.*s\n", driver, (int)line,
           reason);
    exit(HALO_TEST_EXIT_SKIPPED);
  }
  if (exited) {
    fprintf(stderr,
            "halo-test: halod --driver %s exited during start-up (wait "
            "status 0x%x; its log is above)\n",
            driver, wait_status);
  } else {
    fprintf(stderr,
            "halo-test: halod --driver %s did not answer within %.0f ms (its "
            "log is above)\n",
            driver, elapsed_ms);
  }
  exit(1);
}

// ---------------------------------------------------------------- admin

typedef halo_status_t (*halo__admin_call_t)(halo_admin_t *,
                                            halo_wire_response_t **);

static halo_wire_response_t *halo__admin(const halo_test_daemon_t *daemon,
                                         halo__admin_call_t call) {
  halo_admin_t *admin = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_connect(daemon->admin_address, 5000, &admin));
  halo_wire_response_t *response = NULL;
  halo_status_t status = call(admin, &response);
  halo_admin_close(admin);
  HALO_TEST_ASSERT_OK(status);
  assert_non_null(response);
  return response;
}

halo_wire_response_t *halo_test_admin_status(const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo__admin(daemon, halo_admin_status);
  assert_non_null(response->admin_status);
  return response;
}

halo_wire_response_t *halo_test_admin_sessions(
    const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo__admin(daemon, halo_admin_sessions);
  assert_non_null(response->admin_sessions);
  return response;
}

halo_wire_response_t *halo_test_admin_semaphores(
    const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo__admin(daemon, halo_admin_semaphores);
  assert_non_null(response->admin_semaphores);
  return response;
}

uint64_t halo_test_metric_in(const char *text, const char *name) {
  // A sample's line starts with its name (# HELP and # TYPE lines do not).
  const char *line = strncmp(text, name, strlen(name)) == 0 ? text : NULL;
  for (const char *at = text; !line && (at = strstr(at, name)); ++at) {
    if (at[-1] == '\n') line = at;
  }
  if (!line) {
    print_error("no metric %s in:\n%s\n", name, text);
    fail();
  }
  return strtoull(line + strlen(name), NULL, 10);
}

uint64_t halo_test_admin_metric(const halo_test_daemon_t *daemon,
                                const char *name) {
  halo_wire_response_t *response = halo__admin(daemon, halo_admin_metrics);
  assert_non_null(response->admin_metrics);
  uint64_t value = halo_test_metric_in(response->admin_metrics->text, name);
  halo__wire__response__free_unpacked(response, NULL);
  return value;
}

uint32_t halo_test_admin_session_count(const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo_test_admin_status(daemon);
  uint32_t sessions = response->admin_status->sessions;
  halo__wire__response__free_unpacked(response, NULL);
  return sessions;
}

bool halo_test_admin_find_session(const halo_test_daemon_t *daemon, pid_t pid,
                                  Halo__Wire__SessionInfo *out_info) {
  halo_wire_response_t *response = halo_test_admin_sessions(daemon);
  bool found = false;
  for (size_t i = 0; i < response->admin_sessions->n_sessions; ++i) {
    Halo__Wire__SessionInfo *info = response->admin_sessions->sessions[i];
    if ((pid_t)info->pid != pid) continue;
    found = true;
    if (out_info) {
      *out_info = *info;
      out_info->trust_domain = NULL;
      out_info->client_name = NULL;
      out_info->lost = NULL;
      out_info->refused = NULL;
      out_info->n_device_usage = 0;
      out_info->device_usage = NULL;
    }
    break;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return found;
}

bool halo_test_admin_client_faults(const halo_test_daemon_t *daemon, pid_t pid,
                                   uint32_t *out_process_faults,
                                   uint32_t *out_session_faults) {
  halo_wire_response_t *response = halo_test_admin_sessions(daemon);
  bool found = false;
  uint32_t process_faults = 0, session_faults = 0;
  for (size_t i = 0; i < response->admin_sessions->n_sessions; ++i) {
    const Halo__Wire__SessionInfo *info = response->admin_sessions->sessions[i];
    if ((pid_t)info->pid != pid) continue;
    found = true;
    if (info->process_faults > process_faults) {
      process_faults = info->process_faults;
    }
    session_faults += info->faults;
  }
  halo__wire__response__free_unpacked(response, NULL);
  if (out_process_faults) *out_process_faults = process_faults;
  if (out_session_faults) *out_session_faults = session_faults;
  return found;
}

uint32_t halo_test_admin_forgive_client(const halo_test_daemon_t *daemon,
                                        uint32_t pid) {
  halo_admin_t *admin = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_connect(daemon->admin_address, 5000, &admin));
  halo_wire_response_t *response = NULL;
  halo_status_t status = halo_admin_forgive_client(admin, pid, &response);
  halo_admin_close(admin);
  if (halo_status_code(status) == HALO_STATUS_NOT_FOUND) {
    halo_status_free(status);
    return 0;
  }
  HALO_TEST_ASSERT_OK(status);
  assert_non_null(response->admin_forgive_client);
  uint32_t faults = response->admin_forgive_client->faults;
  halo__wire__response__free_unpacked(response, NULL);
  return faults;
}

void halo_test_admin_print_sessions(const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo_test_admin_sessions(daemon);
  for (size_t i = 0; i < response->admin_sessions->n_sessions; ++i) {
    Halo__Wire__SessionInfo *info = response->admin_sessions->sessions[i];
    print_error(
        "  session %llu: pid %u uid %u client \"%s\" age %.3f s, "
        "%llu requests, %u buffers, %u semaphores\n",
        (unsigned long long)info->session_id, info->pid, info->uid,
        info->client_name ? info->client_name : "", info->age_seconds,
        (unsigned long long)info->requests, info->buffers, info->semaphores);
  }
  halo__wire__response__free_unpacked(response, NULL);
}

bool halo_test_admin_expect_session_count(const halo_test_daemon_t *daemon,
                                          uint32_t count, int timeout_ms) {
  if (HALO_TEST_POLL(halo_test_admin_session_count(daemon) == count,
                     timeout_ms)) {
    return true;
  }
  print_error("halod lists %u sessions after %d ms, expected %u:\n",
              halo_test_admin_session_count(daemon), timeout_ms, count);
  halo_test_admin_print_sessions(daemon);
  return false;
}

halo_wire_response_t *halo_test_admin_queues(const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo__admin(daemon, halo_admin_queues);
  assert_non_null(response->admin_queues);
  return response;
}

void halo_test_admin_queue_totals(const halo_test_daemon_t *daemon,
                                  uint32_t *out_pending,
                                  uint32_t *out_in_flight) {
  halo_wire_response_t *response = halo_test_admin_queues(daemon);
  uint32_t pending = 0;
  uint32_t in_flight = 0;
  for (size_t i = 0; i < response->admin_queues->n_queues; ++i) {
    pending += response->admin_queues->queues[i]->pending;
    in_flight += response->admin_queues->queues[i]->in_flight;
  }
  halo__wire__response__free_unpacked(response, NULL);
  if (out_pending) *out_pending = pending;
  if (out_in_flight) *out_in_flight = in_flight;
}

uint32_t halo_test_admin_semaphore_count(const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo_test_admin_semaphores(daemon);
  uint32_t count = (uint32_t)response->admin_semaphores->n_semaphores;
  halo__wire__response__free_unpacked(response, NULL);
  return count;
}

halo_wire_response_t *halo_test_admin_workers(
    const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo__admin(daemon, halo_admin_workers);
  assert_non_null(response->admin_workers);
  return response;
}

pid_t halo_test_admin_worker_pid(const halo_test_daemon_t *daemon,
                                 const char *domain) {
  halo_wire_response_t *response = halo_test_admin_workers(daemon);
  pid_t pid = 0;
  for (size_t i = 0; i < response->admin_workers->n_workers && !pid; ++i) {
    const Halo__Wire__WorkerInfo *worker = response->admin_workers->workers[i];
    if (strcmp(worker->domain, domain) == 0 && worker->pid > 0) {
      pid = (pid_t)worker->pid;
    }
  }
  halo__wire__response__free_unpacked(response, NULL);
  return pid;
}

static bool halo_test_spare_ready(const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo_test_admin_workers(daemon);
  size_t count = response->admin_workers->n_workers;
  bool ready = count == 0;  // inline: no workers
  for (size_t i = 0; i < count && !ready; ++i) {
    ready = strcmp(response->admin_workers->workers[i]->state, "spare") == 0;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return ready;
}

bool halo_test_admin_wait_spare(const halo_test_daemon_t *daemon,
                                int timeout_ms) {
  return HALO_TEST_POLL(halo_test_spare_ready(daemon), timeout_ms);
}

// ---------------------------------------------------------------- raw client

void halo_test_raw_open(halo_test_raw_t *raw, const char *address,
                        int timeout_ms) {
  memset(raw, 0, sizeof(*raw));
  assert_int_equal(nng_req0_open(&raw->socket), 0);
  raw->open = true;
  if (timeout_ms <= 0) timeout_ms = 5000;
  assert_int_equal(
      nng_socket_set_ms(raw->socket, NNG_OPT_RECVTIMEO, timeout_ms), 0);
  assert_int_equal(
      nng_socket_set_ms(raw->socket, NNG_OPT_SENDTIMEO, timeout_ms), 0);
  // Never resend on our own: a request the daemon drops stays dropped.
  assert_int_equal(nng_socket_set_ms(raw->socket, NNG_OPT_REQ_RESENDTIME,
                                     NNG_DURATION_INFINITE),
                   0);
  int rv = nng_dial(raw->socket, address, NULL, 0);
  if (rv != 0) {
    print_error("nng_dial(%s): %s\n", address, nng_strerror(rv));
    fail();
  }
}

void halo_test_raw_close(halo_test_raw_t *raw) {
  if (!raw->open) return;
  nng_close(raw->socket);
  raw->open = false;
}

halo_wire_response_t *halo_test_raw_call_bytes(halo_test_raw_t *raw,
                                               const void *bytes,
                                               size_t length) {
  int rv = nng_send(raw->socket, (void *)bytes, length, 0);
  if (rv != 0) {
    print_error("nng_send of %zu bytes: %s\n", length, nng_strerror(rv));
    fail();
  }
  void *reply = NULL;
  size_t reply_length = 0;
  rv = nng_recv(raw->socket, &reply, &reply_length, NNG_FLAG_ALLOC);
  if (rv != 0) {
    print_error("no response from halod: %s\n", nng_strerror(rv));
    fail();
  }
  halo_wire_response_t *response =
      halo__wire__response__unpack(NULL, reply_length, reply);
  nng_free(reply, reply_length);
  if (!response) {
    print_error("halod's response of %zu bytes does not decode\n",
                reply_length);
    fail();
  }
  return response;
}

int halo_test_raw_send_bytes(halo_test_raw_t *raw, const void *bytes,
                             size_t length) {
  return nng_send(raw->socket, (void *)bytes, length, 0);
}

halo_wire_response_t *halo_test_raw_call(halo_test_raw_t *raw,
                                         const halo_wire_request_t *request) {
  size_t length = halo__wire__request__get_packed_size(request);
  uint8_t *bytes = malloc(length ? length : 1);
  assert_non_null(bytes);
  halo__wire__request__pack(request, bytes);
  halo_wire_response_t *response = halo_test_raw_call_bytes(raw, bytes, length);
  free(bytes);
  return response;
}

void halo_test_raw_hello(halo_test_raw_t *raw) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Hello hello = HALO__WIRE__HELLO__INIT;
  hello.protocol_version = HALO_PROTOCOL_VERSION;
  hello.client_name = "halo-test-raw";
  request.body_case = HALO__WIRE__REQUEST__BODY_HELLO;
  request.hello = &hello;
  halo_wire_response_t *response =
      HALO_TEST_EXPECT_OK(halo_test_raw_call(raw, &request));
  assert_int_equal(response->body_case, HALO__WIRE__RESPONSE__BODY_HELLO);
  Halo__Wire__HelloReply *reply = response->hello;
  assert_int_equal(reply->protocol_version, HALO_PROTOCOL_VERSION);
  assert_int_equal(reply->session_token.len, 16);
  assert_int_equal(reply->max_message_bytes, HALO_WIRE_MAX_MESSAGE_BYTES);
  raw->session_id = reply->session_id;
  memcpy(raw->session_token, reply->session_token.data, 16);
  assert_true(strlen(reply->fd_channel_path) < sizeof(raw->fd_channel_path));
  snprintf(raw->fd_channel_path, sizeof(raw->fd_channel_path), "%s",
           reply->fd_channel_path);
  halo__wire__response__free_unpacked(response, NULL);
}

static bool halo__contains_case(const char *haystack, const char *needle) {
  size_t length = strlen(needle);
  for (; *haystack; ++haystack) {
    if (strncasecmp(haystack, needle, length) == 0) return true;
  }
  return length == 0;
}

void halo_test_expect_error_in(halo_wire_response_t *response,
                               const halo_status_code_t *codes, size_t count,
                               const char *substring, const char *file,
                               int line) {
  bool code_ok = false;
  for (size_t i = 0; i < count; ++i) {
    if (response->code == (int32_t)codes[i]) code_ok = true;
  }
  const char *message = response->message ? response->message : "";
  bool message_ok =
      substring ? halo__contains_case(message, substring) : message[0] != '\0';
  if (code_ok && message_ok) {
    halo__wire__response__free_unpacked(response, NULL);
    return;
  }
  print_error("%s:%d: response %s (\"%s\"), expected %s", file, line,
              halo_status_code_name((halo_status_code_t)response->code),
              message, halo_status_code_name(codes[0]));
  for (size_t i = 1; i < count; ++i) {
    print_error(" or %s", halo_status_code_name(codes[i]));
  }
  print_error(" with a message %s%s%s\n", substring ? "containing \"" : "",
              substring ? substring : "(non-empty)", substring ? "\"" : "");
  halo__wire__response__free_unpacked(response, NULL);
  _fail(file, line);
}

void halo_test_expect_error(halo_wire_response_t *response,
                            halo_status_code_t code, const char *substring,
                            const char *file, int line) {
  halo_test_expect_error_in(response, &code, 1, substring, file, line);
}

halo_wire_response_t *halo_test_expect_ok(halo_wire_response_t *response,
                                          const char *file, int line) {
  if (response->code != HALO_STATUS_OK) {
    print_error("%s:%d: response %s (\"%s\"), expected OK\n", file, line,
                halo_status_code_name((halo_status_code_t)response->code),
                response->message ? response->message : "");
    halo__wire__response__free_unpacked(response, NULL);
    _fail(file, line);
  }
  return response;
}

uint64_t halo_test_raw_semaphore_create(halo_test_raw_t *raw,
                                        uint64_t initial_value, uint32_t flags,
                                        uint64_t *out_page_id,
                                        uint32_t *out_slot) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__SemaphoreCreate body = HALO__WIRE__SEMAPHORE_CREATE__INIT;
  body.initial_value = initial_value;
  body.has_flags = true;
  body.flags = flags;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE;
  request.semaphore_create = &body;
  halo_wire_response_t *response =
      HALO_TEST_EXPECT_OK(halo_test_raw_call(raw, &request));
  assert_int_equal(response->body_case, HALO__WIRE__RESPONSE__BODY_SEMAPHORE);
  uint64_t handle = response->semaphore->handle;
  if (out_page_id) *out_page_id = response->semaphore->page_id;
  if (out_slot) *out_slot = response->semaphore->slot;
  halo__wire__response__free_unpacked(response, NULL);
  return handle;
}

uint64_t halo_test_raw_buffer_create(halo_test_raw_t *raw, uint64_t size,
                                     Halo__Wire__MemoryType memory_type,
                                     uint32_t flags,
                                     Halo__Wire__HostPlacement *out_placement) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__BufferCreate body = HALO__WIRE__BUFFER_CREATE__INIT;
  body.device = 0;
  body.size = size;
  body.memory_type = memory_type;
  body.has_flags = true;
  body.flags = flags;
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_CREATE;
  request.buffer_create = &body;
  halo_wire_response_t *response =
      HALO_TEST_EXPECT_OK(halo_test_raw_call(raw, &request));
  assert_int_equal(response->body_case, HALO__WIRE__RESPONSE__BODY_BUFFER);
  assert_int_equal(response->buffer->size, size);
  uint64_t handle = response->buffer->handle;
  if (out_placement) {
    Halo__Wire__HostPlacement empty = HALO__WIRE__HOST_PLACEMENT__INIT;
    *out_placement = empty;
    if (memory_type == HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE) {
      assert_non_null(response->buffer->placement);
      *out_placement = *response->buffer->placement;
    }
  }
  halo__wire__response__free_unpacked(response, NULL);
  return handle;
}

halo_wire_response_t *halo_test_raw_semaphore_signal(halo_test_raw_t *raw,
                                                     uint64_t handle,
                                                     uint64_t value) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__SemaphoreSignal body = HALO__WIRE__SEMAPHORE_SIGNAL__INIT;
  body.handle = handle;
  body.value = value;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_SIGNAL;
  request.semaphore_signal = &body;
  return halo_test_raw_call(raw, &request);
}

// ---------------------------------------------------------------- raw ipc

// nng's ipc transport: an 8-byte greeting {0, 'S', 'P', 0, protocol (16 bits,
// big-endian), 0, 0} each way, then frames of {1, length (64 bits,
// big-endian), bytes}. req0 is protocol 0x30, rep0 0x31; a req0 message
// starts with a 4-byte request id whose top bit is set.
#define HALO__NNG_REQ0 0x30
#define HALO__NNG_REP0 0x31

static bool halo__write_all(int fd, const void *data, size_t length) {
  const char *bytes = data;
  while (length > 0) {
    ssize_t sent = send(fd, bytes, length, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    bytes += sent;
    length -= (size_t)sent;
  }
  return true;
}

static bool halo__read_all(int fd, void *data, size_t length) {
  char *bytes = data;
  while (length > 0) {
    ssize_t got = recv(fd, bytes, length, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    bytes += got;
    length -= (size_t)got;
  }
  return true;
}

int halo_test_ipc_connect(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct timeval timeout = {.tv_sec = 5};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  assert_true(strlen(path) < sizeof(address.sun_path));
  strcpy(address.sun_path, path);
  if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
    print_error("connect(%s): %s\n", path, strerror(errno));
    close(fd);
    fail();
  }
  const uint8_t greeting[8] = {0, 'S', 'P', 0, 0, HALO__NNG_REQ0, 0, 0};
  assert_true(halo__write_all(fd, greeting, sizeof(greeting)));
  uint8_t theirs[8];
  if (!halo__read_all(fd, theirs, sizeof(theirs))) {
    print_error("no nng greeting from %s\n", path);
    close(fd);
    fail();
  }
  const uint8_t expected[8] = {0, 'S', 'P', 0, 0, HALO__NNG_REP0, 0, 0};
  assert_memory_equal(theirs, expected, sizeof(expected));
  return fd;
}

bool halo_test_ipc_send_frame(int fd, uint64_t declared_length,
                              const void *data, size_t length) {
  uint8_t header[9];
  header[0] = 1;
  for (int i = 0; i < 8; ++i) {
    header[1 + i] = (uint8_t)(declared_length >> (56 - 8 * i));
  }
  return halo__write_all(fd, header, sizeof(header)) &&
         halo__write_all(fd, data, length);
}

bool halo_test_ipc_send_request(int fd, uint32_t request_id,
                                const Halo__Wire__Request *request) {
  size_t length = halo__wire__request__get_packed_size(request);
  uint8_t *frame = malloc(length + 4);
  assert_non_null(frame);
  uint32_t id = request_id | 0x80000000u;
  for (int i = 0; i < 4; ++i) frame[i] = (uint8_t)(id >> (24 - 8 * i));
  halo__wire__request__pack(request, frame + 4);
  bool sent = halo_test_ipc_send_frame(fd, length + 4, frame, length + 4);
  free(frame);
  return sent;
}

int halo_test_ipc_open_session(const char *path) {
  int fd = halo_test_ipc_connect(path);
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Hello hello = HALO__WIRE__HELLO__INIT;
  hello.protocol_version = HALO_PROTOCOL_VERSION;
  hello.client_name = "halo-test-ipc";
  request.body_case = HALO__WIRE__REQUEST__BODY_HELLO;
  request.hello = &hello;
  size_t length = halo__wire__request__get_packed_size(&request);
  uint8_t *body = malloc(length);
  assert_non_null(body);
  halo__wire__request__pack(&request, body);
  halo_wire_response_t *response = halo_test_ipc_call(fd, 1, body, length);
  free(body);
  halo__wire__response__free_unpacked(HALO_TEST_EXPECT_OK(response), NULL);
  return fd;
}

halo_wire_response_t *halo_test_ipc_call(int fd, uint32_t request_id,
                                         const void *body, size_t length) {
  uint8_t *frame = malloc(length + 4);
  assert_non_null(frame);
  uint32_t id = request_id | 0x80000000u;
  for (int i = 0; i < 4; ++i) frame[i] = (uint8_t)(id >> (24 - 8 * i));
  memcpy(frame + 4, body, length);
  bool sent = halo_test_ipc_send_frame(fd, length + 4, frame, length + 4);
  free(frame);
  assert_true(sent);
  uint8_t header[9];
  assert_true(halo__read_all(fd, header, sizeof(header)));
  assert_int_equal(header[0], 1);
  uint64_t reply_length = 0;
  for (int i = 0; i < 8; ++i)
    reply_length = (reply_length << 8) | header[1 + i];
  assert_true(reply_length >= 4 && reply_length < (64u << 20));
  uint8_t *reply = malloc(reply_length);
  assert_non_null(reply);
  assert_true(halo__read_all(fd, reply, reply_length));
  uint32_t echoed = ((uint32_t)reply[0] << 24) | ((uint32_t)reply[1] << 16) |
                    ((uint32_t)reply[2] << 8) | reply[3];
  assert_int_equal(echoed, id);
  halo_wire_response_t *response =
      halo__wire__response__unpack(NULL, reply_length - 4, reply + 4);
  free(reply);
  assert_non_null(response);
  return response;
}

bool halo_test_ipc_wait_closed(int fd, int timeout_ms) {
  int64_t deadline = halo_test_now_ns() + (int64_t)timeout_ms * HALO_TEST_MS;
  for (;;) {
    int remaining = (int)((deadline - halo_test_now_ns()) / HALO_TEST_MS);
    if (remaining <= 0) return false;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int ready = poll(&pfd, 1, remaining);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    char byte;
    ssize_t got = recv(fd, &byte, 1, MSG_DONTWAIT);
    if (got == 0) return true;
    if (got < 0 && errno != EAGAIN && errno != EINTR) return true;
    // Bytes arrived instead of a close: not what the caller expects.
    if (got > 0) return false;
  }
}

// ---------------------------------------------------------------- fd channel

int halo_test_fd_connect(const char *path) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct timeval timeout = {.tv_sec = 5};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof(address.sun_path)) {
    close(fd);
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy(address.sun_path, path);
  if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
    int error_number = errno;
    close(fd);
    errno = error_number;
    return -1;
  }
  return fd;
}

int halo_test_fd_transact(int socket_fd, uint32_t kind, uint64_t id,
                          const uint8_t token[16], halo_fd_reply_t *out_reply,
                          int *out_fd) {
  *out_fd = -1;
  memset(out_reply, 0, sizeof(*out_reply));
  halo_fd_request_t request;
  memset(&request, 0, sizeof(request));
  request.magic = HALO_FD_CHANNEL_MAGIC;
  request.kind = kind;
  request.id = id;
  if (token) memcpy(request.token, token, sizeof(request.token));
  if (send(socket_fd, &request, sizeof(request), MSG_NOSIGNAL) !=
      (ssize_t)sizeof(request)) {
    return -1;
  }
  struct iovec iov = {.iov_base = out_reply, .iov_len = sizeof(*out_reply)};
  union {
    char buffer[CMSG_SPACE(sizeof(int) * 4)];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buffer,
                       .msg_controllen = sizeof(control.buffer)};
  ssize_t received;
  do {
    received = recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); received >= 0 && cmsg;
       cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
      continue;
    }
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int passed;
      memcpy(&passed, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      if (*out_fd < 0) {
        *out_fd = passed;
      } else {
        close(passed);  // more than one: the caller sees only the first
      }
    }
  }
  if (received < 0) return -1;
  if (received == 0) {
    errno = ECONNRESET;
    return -1;
  }
  if ((size_t)received != sizeof(*out_reply)) {
    errno = EPROTO;
    return -1;
  }
  return 0;
}

int halo_test_fd_open_session(const halo_test_raw_t *raw) {
  int socket_fd = halo_test_fd_connect(raw->fd_channel_path);
  if (socket_fd < 0) {
    print_error("connect(%s): %s\n", raw->fd_channel_path, strerror(errno));
    fail();
  }
  halo_fd_reply_t reply;
  int passed = -1;
  int rc =
      halo_test_fd_transact(socket_fd, HALO_FD_REQUEST_AUTH, raw->session_id,
                            raw->session_token, &reply, &passed);
  if (rc != 0) {
    print_error("fd channel AUTH: %s\n", strerror(errno));
    close(socket_fd);
    fail();
  }
  // AUTH passes no descriptor (a client that never asks for one gets none).
  if (passed >= 0) {
    close(passed);
    print_error("fd channel AUTH: the reply carried a descriptor\n");
    close(socket_fd);
    fail();
  }
  if (reply.code != HALO_STATUS_OK) {
    print_error("fd channel AUTH: %s (%.240s)\n",
                halo_status_code_name((halo_status_code_t)reply.code),
                reply.message);
    close(socket_fd);
    fail();
  }
  // DAEMON passes halod's pidfd (the client's liveness check).
  uint8_t no_token[16] = {0};
  rc = halo_test_fd_transact(socket_fd, HALO_FD_REQUEST_DAEMON, 0, no_token,
                             &reply, &passed);
  int daemon_pid = passed >= 0 ? halo_test_pidfd_pid(passed) : -1;
  if (passed >= 0) close(passed);
  if (rc != 0 || reply.code != HALO_STATUS_OK || daemon_pid <= 0) {
    print_error(
        "fd channel DAEMON: no pidfd of a live process (pid %d, code %d)\n",
        daemon_pid, (int)reply.code);
    close(socket_fd);
    fail();
  }
  return socket_fd;
}

int halo_test_pidfd_pid(int fd) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
  FILE *file = fopen(path, "r");
  if (!file) return -1;
  char line[256];
  int pid = -1;
  while (fgets(line, sizeof(line), file)) {
    if (sscanf(line, "Pid: %d", &pid) == 1) break;
  }
  fclose(file);
  return pid;
}

int halo_test_fd_get(int socket_fd, uint32_t kind, uint64_t id,
                     uint64_t *out_size) {
  halo_fd_reply_t reply;
  int passed = -1;
  int rc = halo_test_fd_transact(socket_fd, kind, id, NULL, &reply, &passed);
  if (rc != 0) {
    print_error("fd channel GET %u %llu: %s\n", kind, (unsigned long long)id,
                strerror(errno));
    fail();
  }
  if (reply.code != HALO_STATUS_OK || passed < 0) {
    print_error("fd channel GET %u %llu: %s (%.240s), fd %d\n", kind,
                (unsigned long long)id,
                halo_status_code_name((halo_status_code_t)reply.code),
                reply.message, passed);
    if (passed >= 0) close(passed);
    fail();
  }
  if (out_size) *out_size = reply.size;
  return passed;
}

// ---------------------------------------------------------------- processes

void halo_test_spawn(halo_test_process_t *process, const char *const *argv) {
  memset(process, 0, sizeof(*process));
  int pipe_fds[2];
  assert_return_code(pipe2(pipe_fds, O_CLOEXEC), errno);
  process->pid = halo__fork_exec(argv, pipe_fds[1], -1);
  close(pipe_fds[1]);
  process->stdout_fd = pipe_fds[0];
}

void halo_test_read_line(halo_test_process_t *process, char *out_line,
                         size_t capacity, int timeout_ms) {
  int64_t deadline = halo_test_now_ns() + (int64_t)timeout_ms * HALO_TEST_MS;
  for (;;) {
    char *newline = memchr(process->buffer, '\n', process->length);
    if (newline) {
      size_t line_length = (size_t)(newline - process->buffer);
      assert_true(line_length < capacity);
      memcpy(out_line, process->buffer, line_length);
      out_line[line_length] = '\0';
      process->length -= line_length + 1;
      memmove(process->buffer, newline + 1, process->length);
      return;
    }
    assert_true(process->length < sizeof(process->buffer));
    int64_t remaining = (deadline - halo_test_now_ns()) / HALO_TEST_MS;
    if (remaining <= 0) {
      print_error("process %d wrote no line within %d ms\n", process->pid,
                  timeout_ms);
      fail();
    }
    struct pollfd pfd = {.fd = process->stdout_fd, .events = POLLIN};
    int ready = poll(&pfd, 1, (int)remaining);
    if (ready < 0 && errno == EINTR) continue;
    assert_true(ready >= 0);
    if (ready == 0) continue;
    ssize_t got = read(process->stdout_fd, process->buffer + process->length,
                       sizeof(process->buffer) - process->length);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      int code = -1;
      if (halo_test_process_exited(process) &&
          WIFEXITED(process->wait_status)) {
        code = WEXITSTATUS(process->wait_status);
      }
      print_error("process %d closed its stdout before a line (exit %d)\n",
                  process->pid, code);
      fail();
    }
    process->length += (size_t)got;
  }
}

bool halo_test_process_exited(halo_test_process_t *process) {
  if (process->pid <= 0) return true;
  int wait_status;
  pid_t reaped = waitpid(process->pid, &wait_status, WNOHANG);
  if (reaped != process->pid) return false;
  process->wait_status = wait_status;
  process->pid = 0;
  return true;
}

int halo_test_process_wait(halo_test_process_t *process, int timeout_ms) {
  pid_t pid = process->pid;
  if (!HALO_TEST_POLL(halo_test_process_exited(process), timeout_ms)) {
    print_error("process %d did not exit within %d ms\n", pid, timeout_ms);
    fail();
  }
  if (WIFSIGNALED(process->wait_status)) {
    print_error("process %d died of signal %d\n", pid,
                WTERMSIG(process->wait_status));
    fail();
  }
  return WEXITSTATUS(process->wait_status);
}

void halo_test_process_cleanup(halo_test_process_t *process) {
  if (process->pid > 0) {
    kill(process->pid, SIGKILL);
    waitpid(process->pid, &process->wait_status, 0);
    process->pid = 0;
  }
  if (process->stdout_fd > 0) {
    close(process->stdout_fd);
    process->stdout_fd = -1;
  }
}

const char *halo_test_peer_path(void) {
  return HALO_TEST_PEER;
}

void halo_test_spawn_peer(halo_test_process_t *process, const char *address,
                          const char *const *args) {
  const char *argv[32];
  size_t count = 0;
  argv[count++] = HALO_TEST_PEER;
  argv[count++] = address;
  for (; *args; ++args) {
    assert_true(count < 31);
    argv[count++] = *args;
  }
  argv[count] = NULL;
  halo_test_spawn(process, argv);
}

static bool halo__thread_sleeping(pid_t pid, pid_t tid) {
  char path[96];
  char text[256];
  snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t got = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (got > 0) {
      text[got] = '\0';
      long number = strtol(text, NULL, 10);
      if (strncmp(text, "running", 7) == 0) return false;
      return number == 202 /* futex */ || number == 449 /* futex_waitv */;
    }
  }
  // No syscall file (restricted /proc): fall back to the scheduler state.
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

bool halo_test_wait_until_sleeping(pid_t pid, pid_t tid, int timeout_ms) {
  return HALO_TEST_POLL(halo__thread_sleeping(pid, tid), timeout_ms);
}

bool halo_test_pause_loop(pid_t pid) {
  if (ptrace(PTRACE_SEIZE, pid, 0, 0) != 0) return false;
  int status = 0;
  if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) == 0 &&
      waitpid(pid, &status, __WALL) == pid) {
    return true;
  }
  int error = errno;
  ptrace(PTRACE_DETACH, pid, 0, 0);
  errno = error;
  return false;
}

void halo_test_resume_loop(pid_t pid) {
  assert_int_equal(ptrace(PTRACE_DETACH, pid, 0, 0), 0);
}

// ---------------------------------------------------------------- /proc

int halo_test_count_fds(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd", pid);
  DIR *dir = opendir(path);
  if (!dir) return -1;
  int count = 0;
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count;
}

int halo_test_count_memfds(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd", pid);
  DIR *dir = opendir(path);
  if (!dir) return -1;
  int count = 0;
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    if (entry->d_name[0] == '.') continue;
    char target[256];
    ssize_t length =
        readlinkat(dirfd(dir), entry->d_name, target, sizeof(target) - 1);
    if (length <= 0) continue;
    target[length] = '\0';
    if (strncmp(target, "/memfd:", 7) == 0) ++count;
  }
  closedir(dir);
  return count;
}

// ---------------------------------------------------------------- recording

halo_buffer_t *halo_test_create_buffer(halo_client_t *client,
                                       halo_memory_type_t type, uint64_t size,
                                       uint32_t flags) {
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, type, size, flags, &buffer));
  return buffer;
}

halo_command_buffer_t *halo_test_begin(halo_client_t *client, uint32_t flags,
                                       uint32_t binding_capacity) {
  halo_command_buffer_t *command_buffer = NULL;
  HALO_TEST_ASSERT_OK(halo_command_buffer_begin(
      client, 0, flags, binding_capacity, &command_buffer));
  return command_buffer;
}

halo_command_buffer_t *halo_test_record_vector_add(
    halo_client_t *client, halo_executable_t *executable, const uint32_t *n) {
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 3);
  uint64_t bytes = *n * sizeof(float);
  halo_dispatch_arg_t args[4] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(0, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(1, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(2, 0, bytes), NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, n, sizeof(*n)},
  };
  halo_dispatch_params_t params = {
      .executable = executable,
      .entry = "add",
      .grid = {(*n + 63) / 64, 1, 1},
      .block = {64, 1, 1},
      .args = args,
      .arg_count = 4,
  };
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  return cb;
}

bool halo_test_proc_stat(pid_t pid, char *out_state, pid_t *out_ppid) {
  char path[64], text[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t got = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (got <= 0) return false;
  text[got] = '\0';
  const char *end = strrchr(text, ')');  // the name may hold anything
  if (!end) return false;
  char state = 0;
  int ppid = 0;
  if (sscanf(end + 1, " %c %d", &state, &ppid) != 2) return false;
  if (out_state) *out_state = state;
  if (out_ppid) *out_ppid = ppid;
  return true;
}

const char *halo_test_prlimit(void) {
  if (access("/usr/bin/prlimit", X_OK) == 0) return "/usr/bin/prlimit";
  if (access("/bin/prlimit", X_OK) == 0) return "/bin/prlimit";
  return NULL;
}

bool halo_test_is_live_child(pid_t pid, pid_t parent) {
  char state = 0;
  pid_t ppid = 0;
  return halo_test_proc_stat(pid, &state, &ppid) && ppid == parent &&
         state != 'Z';
}
