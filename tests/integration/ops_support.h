// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Helpers of the operations tests (haloctl_test, config_test,
// systemd_test): run a program and collect what it printed, start halod
// with arguments and an environment of the test's choosing, read its log.
//
// Call from a test only (cmocka assertions); single-threaded.
#ifndef HALO_TESTS_INTEGRATION_OPS_SUPPORT_H_
#define HALO_TESTS_INTEGRATION_OPS_SUPPORT_H_

// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/admin.h"

extern char **environ;

static inline int64_t ops_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void ops_sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

// The whole file at |path| (NUL-terminated; "" if it cannot be read).
static inline char *ops_read_file(const char *path) {
  size_t length = 0, capacity = 4096;
  char *text = malloc(capacity);
  assert_non_null(text);
  FILE *file = fopen(path, "r");
  if (file) {
    size_t n;
    while ((n = fread(text + length, 1, capacity - length - 1, file)) > 0) {
      length += n;
      if (capacity - length - 1 == 0) {
        capacity *= 2;
        text = realloc(text, capacity);
        assert_non_null(text);
      }
    }
    fclose(file);
  }
  text[length] = '\0';
  return text;
}

static inline void ops_write_file(const char *path, const char *text) {
  FILE *file = fopen(path, "w");
  assert_non_null(file);
  fputs(text, file);
  assert_int_equal(fclose(file), 0);
}

// |environ| plus |extra| ("NAME=value" strings, NULL-terminated; a name
// given there replaces the inherited one). Built before fork: a child of a
// process with threads (nng's) must not allocate.
static inline char **ops_environment(const char *const *extra) {
  size_t count = 0, extra_count = 0;
  while (environ[count]) ++count;
  while (extra && extra[extra_count]) ++extra_count;
  char **env = calloc(count + extra_count + 1, sizeof(char *));
  assert_non_null(env);
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) {
    bool replaced = false;
    for (size_t j = 0; j < extra_count; ++j) {
      size_t name = strcspn(extra[j], "=");
      if (strncmp(environ[i], extra[j], name + 1) == 0) replaced = true;
    }
    if (!replaced) env[n++] = environ[i];
  }
  for (size_t j = 0; j < extra_count; ++j) env[n++] = (char *)extra[j];
  return env;
}

// Starts |argv| with stdout and stderr into files (either path NULL:
// /dev/null); the child dies with the test.
static inline pid_t ops_spawn(const char *const *argv, const char *const *env,
                              const char *stdout_path,
                              const char *stderr_path) {
  char **environment = ops_environment(env);
  int out = open(stdout_path ? stdout_path : "/dev/null",
                 O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = open(stderr_path ? stderr_path : "/dev/null",
                 O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(out >= 0 && err >= 0);
  pid_t parent = getpid();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    if (dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0) {
      _exit(126);
    }
    execve(argv[0], (char *const *)argv, environment);
    dprintf(STDERR_FILENO, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(out);
  close(err);
  free(environment);
  return pid;
}

// Waits up to |timeout_ms| for |pid| (then SIGKILLs it and fails); returns
// its exit code, or 128 + the signal that ended it.
static inline int ops_wait(pid_t pid, int timeout_ms) {
  int64_t deadline = ops_now_ms() + timeout_ms;
  int status = 0;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    assert_true(done == 0);
    if (ops_now_ms() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      print_error("process %d did not exit within %d ms\n", (int)pid,
                  timeout_ms);
      fail();
    }
    ops_sleep_ms(5);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

typedef struct ops_result_t {
  int exit_code;
  char *out;
  char *err;
} ops_result_t;

// Runs |argv| to completion (at most 20 s) with |env| added.
static inline void ops_run(const char *const *argv, const char *const *env,
                           ops_result_t *out_result) {
  char out_path[] = "/tmp/halo-ops-out-XXXXXX";
  char err_path[] = "/tmp/halo-ops-err-XXXXXX";
  int fd = mkstemp(out_path);
  assert_true(fd >= 0);
  close(fd);
  fd = mkstemp(err_path);
  assert_true(fd >= 0);
  close(fd);
  pid_t pid = ops_spawn(argv, env, out_path, err_path);
  out_result->exit_code = ops_wait(pid, 20000);
  out_result->out = ops_read_file(out_path);
  out_result->err = ops_read_file(err_path);
  unlink(out_path);
  unlink(err_path);
}

static inline void ops_result_free(ops_result_t *result) {
  free(result->out);
  free(result->err);
  result->out = result->err = NULL;
}

// Fails the test showing |result| unless |condition|.
#define OPS_EXPECT(result, condition)                                     \
  do {                                                                    \
    if (!(condition)) {                                                   \
      print_error("%s:%d: %s\n  exit %d\n  stdout:\n%s\n  stderr:\n%s\n", \
                  __FILE__, __LINE__, #condition, (result)->exit_code,    \
                  (result)->out, (result)->err);                          \
      fail();                                                             \
    }                                                                     \
  } while (0)

// ---------------------------------------------------------------- halod

typedef struct ops_daemon_t {
  pid_t pid;
  char dir[64];
  char listen[160];
  char admin[160];
  char log_path[160];
} ops_daemon_t;

// A private directory for a daemon's sockets, its log and the test's files.
static inline void ops_daemon_prepare(ops_daemon_t *daemon) {
  memset(daemon, 0, sizeof(*daemon));
  snprintf(daemon->dir, sizeof(daemon->dir), "/tmp/halo-ops-XXXXXX");
  assert_non_null(mkdtemp(daemon->dir));
  snprintf(daemon->listen, sizeof(daemon->listen), "ipc://%s/halo.sock",
           daemon->dir);
  snprintf(daemon->admin, sizeof(daemon->admin), "ipc://%s/admin.sock",
           daemon->dir);
  snprintf(daemon->log_path, sizeof(daemon->log_path), "%s/halod.log",
           daemon->dir);
}

static inline bool ops_daemon_answers(const ops_daemon_t *daemon) {
  halo_admin_t *admin = NULL;
  halo_status_t status = halo_admin_connect(daemon->admin, 1000, &admin);
  if (status) {
    halo_status_free(status);
    return false;
  }
  halo_wire_response_t *response = NULL;
  status = halo_admin_status(admin, &response);
  bool ok = !status && response && response->admin_status;
  halo_status_free(status);
  if (response) halo__wire__response__free_unpacked(response, NULL);
  halo_admin_close(admin);
  return ok;
}

// Starts `halod --driver local` on |daemon|'s sockets with |args| after
// them (NULL-terminated, may be NULL) and |env| added; stderr goes to
// daemon->log_path. Does not wait.
static inline void ops_daemon_spawn(ops_daemon_t *daemon,
                                    const char *const *args,
                                    const char *const *env) {
  const char *argv[32] = {HALO_TEST_HALOD, "--listen",    daemon->listen,
                          "--admin",       daemon->admin, "--driver",
                          "local"};
  size_t n = 7;
  while (args && *args && n < 31) argv[n++] = *args++;
  argv[n] = NULL;
  daemon->pid = ops_spawn(argv, env, NULL, daemon->log_path);
}

// Spawns and waits until the admin socket answers (at most 10 s).
static inline void ops_daemon_start(ops_daemon_t *daemon,
                                    const char *const *args,
                                    const char *const *env) {
  ops_daemon_spawn(daemon, args, env);
  int64_t deadline = ops_now_ms() + 10000;
  while (!ops_daemon_answers(daemon)) {
    if (ops_now_ms() > deadline || waitpid(daemon->pid, NULL, WNOHANG) != 0) {
      char *log = ops_read_file(daemon->log_path);
      print_error("halod did not start; its log:\n%s\n", log);
      free(log);
      fail();
    }
    ops_sleep_ms(10);
  }
}

// Whether the daemon's log contains |needle| within |timeout_ms|; prints
// the log if not.
static inline bool ops_daemon_log_has(const ops_daemon_t *daemon,
                                      const char *needle, int timeout_ms) {
  int64_t deadline = ops_now_ms() + timeout_ms;
  for (;;) {
    char *log = ops_read_file(daemon->log_path);
    bool found = strstr(log, needle) != NULL;
    if (found || ops_now_ms() > deadline) {
      if (!found) print_error("no \"%s\" in halod's log:\n%s\n", needle, log);
      free(log);
      return found;
    }
    free(log);
    ops_sleep_ms(10);
  }
}

// SIGTERM; returns halod's exit code.
static inline int ops_daemon_stop(ops_daemon_t *daemon) {
  if (!daemon->pid) return 0;
  kill(daemon->pid, SIGTERM);
  int code = ops_wait(daemon->pid, 10000);
  daemon->pid = 0;
  return code;
}

// Kills a daemon still running and removes the directory (one level).
static inline void ops_daemon_cleanup(ops_daemon_t *daemon) {
  if (daemon->pid) {
    kill(daemon->pid, SIGKILL);
    waitpid(daemon->pid, NULL, 0);
    daemon->pid = 0;
  }
  if (!daemon->dir[0]) return;
  char command[128];
  snprintf(command, sizeof(command), "rm -rf '%s'", daemon->dir);
  if (system(command) != 0) print_message("could not remove %s\n", daemon->dir);
  daemon->dir[0] = '\0';
}

// ---------------------------------------------------------------- JSON

// A strict JSON syntax check (RFC 8259) of one value followed by
// whitespace only; |*end| is where it stopped.
static inline bool ops_json_value(const char **p);

static inline void ops_json_space(const char **p) {
  while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r') ++*p;
}

static inline bool ops_json_string(const char **p) {
  if (**p != '"') return false;
  ++*p;
  while (**p && **p != '"') {
    if ((unsigned char)**p < 0x20) return false;
    if (**p == '\\') {
      ++*p;
      if (**p == 'u') {
        for (int i = 1; i <= 4; ++i) {
          char c = (*p)[i];
          if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                (c >= 'A' && c <= 'F'))) {
            return false;
          }
        }
        *p += 4;
      } else if (!strchr("\"\\/bfnrt", **p) || !**p) {
        return false;
      }
    }
    ++*p;
  }
  if (**p != '"') return false;
  ++*p;
  return true;
}

static inline bool ops_json_value(const char **p) {
  ops_json_space(p);
  char c = **p;
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    ++*p;
    ops_json_space(p);
    if (**p == close) {
      ++*p;
      return true;
    }
    for (;;) {
      ops_json_space(p);
      if (c == '{') {
        if (!ops_json_string(p)) return false;
        ops_json_space(p);
        if (**p != ':') return false;
        ++*p;
      }
      if (!ops_json_value(p)) return false;
      ops_json_space(p);
      if (**p == ',') {
        ++*p;
        continue;
      }
      if (**p != close) return false;
      ++*p;
      return true;
    }
  }
  if (c == '"') return ops_json_string(p);
  for (const char *word = "true\0false\0null\0"; *word;
       word += strlen(word) + 1) {
    if (strncmp(*p, word, strlen(word)) == 0) {
      *p += strlen(word);
      return true;
    }
  }
  const char *start = *p;
  if (**p == '-') ++*p;
  if (**p == '0') {
    ++*p;
  } else if (**p >= '1' && **p <= '9') {
    while (**p >= '0' && **p <= '9') ++*p;
  } else {
    *p = start;
    return false;
  }
  if (**p == '.') {
    ++*p;
    if (!(**p >= '0' && **p <= '9')) return false;
    while (**p >= '0' && **p <= '9') ++*p;
  }
  if (**p == 'e' || **p == 'E') {
    ++*p;
    if (**p == '+' || **p == '-') ++*p;
    if (!(**p >= '0' && **p <= '9')) return false;
    while (**p >= '0' && **p <= '9') ++*p;
  }
  return true;
}

// Whether |text| is one JSON document (and whitespace).
static inline bool ops_json_valid(const char *text) {
  const char *p = text;
  if (!ops_json_value(&p)) return false;
  ops_json_space(&p);
  return *p == '\0';
}

#endif  // HALO_TESTS_INTEGRATION_OPS_SUPPORT_H_
