// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halod under systemd, without systemd:
//
//   systemd_test notify   A fake $NOTIFY_SOCKET receives READY=1 (only once
//                         both sockets answer) with a STATUS= summary,
//                         WATCHDOG=1 pings from the loop, RELOADING=1 and
//                         READY=1 around SIGHUP, STOPPING=1 at SIGTERM; under
//                         JOURNAL_STREAM log lines carry <N> priorities.
//   systemd_test verify   `systemd-analyze verify` passes on the configured
//                         halod.service with no warning, systemd-sysusers
//                         and systemd-tmpfiles accept halo's files. Exits 77
//                         (skipped) when systemd-analyze is not installed.
#include <sys/socket.h>
#include <sys/un.h>

#include "halo/halo.h"
#include "tests/integration/ops_support.h"

#ifndef HALO_TEST_HALOD
#error "HALO_TEST_HALOD must name the halod executable"
#endif
#ifndef HALO_TEST_UNIT
#error "HALO_TEST_UNIT must name the configured halod.service"
#endif
#ifndef HALO_TEST_SYSTEMD_DIR
#error "HALO_TEST_SYSTEMD_DIR must name the source's systemd/ folder"
#endif

#define SKIP_EXIT_CODE 77

// ---------------------------------------------------------------- notify

typedef struct notify_fixture_t {
  ops_daemon_t daemon;
  int socket_fd;
  char socket_path[100];  // fits sockaddr_un
} notify_fixture_t;

static int notify_setup(void **state) {
  notify_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  ops_daemon_prepare(&fixture->daemon);
  snprintf(fixture->socket_path, sizeof(fixture->socket_path), "%s/notify",
           fixture->daemon.dir);
  fixture->socket_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  assert_true(fixture->socket_fd >= 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof(address.sun_path), "%s",
           fixture->socket_path);
  assert_int_equal(
      bind(fixture->socket_fd, (struct sockaddr *)&address, sizeof(address)),
      0);
  *state = fixture;
  return 0;
}

static int notify_teardown(void **state) {
  notify_fixture_t *fixture = *state;
  ops_daemon_cleanup(&fixture->daemon);
  close(fixture->socket_fd);
  free(fixture);
  return 0;
}

// The next datagram within |timeout_ms| into |out| (NUL-terminated); false
// if none came.
static bool notify_receive(notify_fixture_t *fixture, char *out,
                           size_t capacity, int timeout_ms) {
  struct timeval tv = {.tv_sec = timeout_ms / 1000,
                       .tv_usec = (timeout_ms % 1000) * 1000};
  setsockopt(fixture->socket_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ssize_t n = recv(fixture->socket_fd, out, capacity - 1, 0);
  if (n < 0) return false;
  out[n] = '\0';
  return true;
}

// Receives until a datagram contains |needle| (others are skipped) within
// |timeout_ms|; the datagram is left in |out|.
static bool notify_expect(notify_fixture_t *fixture, const char *needle,
                          char *out, size_t capacity, int timeout_ms) {
  int64_t deadline = ops_now_ms() + timeout_ms;
  while (ops_now_ms() < deadline) {
    if (!notify_receive(fixture, out, capacity,
                        (int)(deadline - ops_now_ms()) + 1)) {
      break;
    }
    if (strstr(out, needle)) return true;
  }
  print_error("no notification with \"%s\"\n", needle);
  return false;
}

static void test_notify_ready_status_watchdog(void **state) {
  notify_fixture_t *fixture = *state;
  char notify_env[240];
  snprintf(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s",
           fixture->socket_path);
  // systemd's watchdog every 300 ms: halod pings every 150 ms.
  const char *env[] = {notify_env, "WATCHDOG_USEC=300000", NULL};
  ops_daemon_spawn(&fixture->daemon, NULL, env);
  char message[512];
  assert_true(
      notify_expect(fixture, "READY=1", message, sizeof(message), 10000));
  // READY comes once both sockets listen, with the summary.
  assert_true(ops_daemon_answers(&fixture->daemon));
  assert_non_null(strstr(message, "STATUS="));
  assert_non_null(strstr(message,
                         "0 session(s), 0 pending, 0 in flight on 1 "
                         "device(s)"));
  int pings = 0;
  int64_t deadline = ops_now_ms() + 3000;
  while (pings < 3 && ops_now_ms() < deadline) {
    if (notify_receive(fixture, message, sizeof(message), 1000) &&
        strcmp(message, "WATCHDOG=1") == 0) {
      ++pings;
    }
  }
  assert_int_equal(pings, 3);
  assert_true(ops_daemon_log_has(
      &fixture->daemon, "systemd watchdog: pinging every 150 ms", 1000));
  // SIGHUP: RELOADING=1, then READY=1.
  kill(fixture->daemon.pid, SIGHUP);
  assert_true(
      notify_expect(fixture, "RELOADING=1", message, sizeof(message), 5000));
  assert_true(
      notify_expect(fixture, "READY=1", message, sizeof(message), 5000));
  // SIGTERM: STOPPING=1, exit 0.
  kill(fixture->daemon.pid, SIGTERM);
  assert_true(
      notify_expect(fixture, "STOPPING=1", message, sizeof(message), 5000));
  assert_int_equal(ops_wait(fixture->daemon.pid, 10000), 0);
  fixture->daemon.pid = 0;
}

static void test_status_follows_the_sessions(void **state) {
  notify_fixture_t *fixture = *state;
  char notify_env[240];
  snprintf(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s",
           fixture->socket_path);
  const char *env[] = {notify_env, NULL};
  ops_daemon_start(&fixture->daemon, NULL, env);
  char message[512];
  assert_true(
      notify_expect(fixture, "READY=1", message, sizeof(message), 5000));
  // A client connects: within the refresh interval STATUS= says so.
  halo_client_options_t options = {.address = fixture->daemon.listen};
  halo_client_t *client = NULL;
  halo_status_t status = halo_client_connect(&options, &client);
  assert_null(status);
  assert_true(notify_expect(fixture, "STATUS=1 session(s)", message,
                            sizeof(message), 5000));
  halo_client_close(client);
  assert_true(notify_expect(fixture, "STATUS=0 session(s)", message,
                            sizeof(message), 5000));
  assert_int_equal(ops_daemon_stop(&fixture->daemon), 0);
}

static void test_journal_priorities(void **state) {
  notify_fixture_t *fixture = *state;
  // JOURNAL_STREAM names stderr's device and inode when it is the journal.
  char path[200];
  snprintf(path, sizeof(path), "%s/halod.log", fixture->daemon.dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(fd >= 0);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  close(fd);
  char journal[80];
  snprintf(journal, sizeof(journal), "JOURNAL_STREAM=%llu:%llu",
           (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
  const char *env[] = {journal, NULL};
  ops_daemon_start(&fixture->daemon, NULL, env);
  assert_int_equal(ops_daemon_stop(&fixture->daemon), 0);
  char *log = ops_read_file(fixture->daemon.log_path);
  // Every line: "<6>" (info) or another priority, no timestamp.
  for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
    if (!(line[0] == '<' && line[1] >= '0' && line[1] <= '7' &&
          line[2] == '>')) {
      print_error("not a journal line: %s\n", line);
      fail();
    }
  }
  free(log);
}

// ---------------------------------------------------------------- verify

static bool verify_have(const char *program) {
  char command[200];
  snprintf(command, sizeof(command), "command -v %s >/dev/null 2>&1", program);
  return system(command) == 0;
}

static void test_unit_verifies(void **state) {
  (void)state;
  // The configured unit names the installed halod; point it at the one
  // just built so that verify finds an executable.
  char dir[] = "/tmp/halo-unit-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char unit_path[200];
  snprintf(unit_path, sizeof(unit_path), "%s/halod.service", dir);
  char *unit = ops_read_file(HALO_TEST_UNIT);
  char *exec = strstr(unit, "\nExecStart=");
  assert_non_null(exec);
  char *binary_end = exec + strlen("\nExecStart=") +
                     strcspn(exec + strlen("\nExecStart="), " \n");
  FILE *file = fopen(unit_path, "w");
  assert_non_null(file);
  fprintf(file, "%.*s\nExecStart=%s%s", (int)(exec - unit), unit,
          HALO_TEST_HALOD, binary_end);
  fclose(file);
  free(unit);

  ops_result_t r;
  const char *verify[] = {"/usr/bin/env", "systemd-analyze", "verify",
                          "--man=no",     unit_path,         NULL};
  ops_run(verify, (const char *const[]){"SYSTEMD_LOG_LEVEL=info", NULL}, &r);
  // Unknown settings and bad values are only warnings to verify: any
  // output is a failure here.
  OPS_EXPECT(&r, r.exit_code == 0 && !r.err[0] && !r.out[0]);
  ops_result_free(&r);

  // sysusers.d creates halo, halo-admin and the membership in a scratch
  // root; tmpfiles.d then resolves their names there.
  char root[220];
  snprintf(root, sizeof(root), "%s/root", dir);
  char etc[240];
  snprintf(etc, sizeof(etc), "%s/etc", root);
  assert_int_equal(mkdir(root, 0755), 0);
  assert_int_equal(mkdir(etc, 0755), 0);
  char root_flag[240];
  snprintf(root_flag, sizeof(root_flag), "--root=%s", root);
  const char *sysusers[] = {"/usr/bin/env", "systemd-sysusers", root_flag,
                            HALO_TEST_SYSTEMD_DIR "/halo.sysusers", NULL};
  ops_run(sysusers, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  ops_result_free(&r);
  char group_path[260];
  snprintf(group_path, sizeof(group_path), "%s/group", etc);
  char *group = ops_read_file(group_path);
  assert_non_null(strstr(group, "halo-admin:x:"));
  assert_non_null(strstr(group, ":halo\n"));  // halod is in halo-admin
  free(group);
  const char *tmpfiles[] = {"/usr/bin/env",
                            "systemd-tmpfiles",
                            root_flag,
                            "--create",
                            HALO_TEST_SYSTEMD_DIR "/halo.tmpfiles",
                            NULL};
  ops_run(tmpfiles, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && !strstr(r.err, "Failed"));
  ops_result_free(&r);

  char command[260];
  snprintf(command, sizeof(command), "rm -rf '%s'", dir);
  assert_int_equal(system(command), 0);
}

int main(int argc, char **argv) {
  const char *group = argc > 1 ? argv[1] : "";
  if (strcmp(group, "notify") == 0) {
#ifndef HALO_TEST_HAVE_SYSTEMD
    printf(
        "SKIP: halod was built without libsystemd (install "
        "libsystemd-dev): it sends no notifications\n");
    return SKIP_EXIT_CODE;
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_notify_ready_status_watchdog,
                                        notify_setup, notify_teardown),
        cmocka_unit_test_setup_teardown(test_status_follows_the_sessions,
                                        notify_setup, notify_teardown),
        cmocka_unit_test_setup_teardown(test_journal_priorities, notify_setup,
                                        notify_teardown),
    };
    return cmocka_run_group_tests_name("systemd notify", tests, NULL, NULL);
  }
  if (strcmp(group, "verify") == 0) {
    if (!verify_have("systemd-analyze") || !verify_have("systemd-sysusers") ||
        !verify_have("systemd-tmpfiles")) {
      printf(
          "SKIP: systemd-analyze, systemd-sysusers or systemd-tmpfiles "
          "is not installed (Debian package systemd; scripts/deps "
          "installs it)\n");
      return SKIP_EXIT_CODE;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unit_verifies),
    };
    return cmocka_run_group_tests_name("systemd verify", tests, NULL, NULL);
  }
  fprintf(stderr, "usage: systemd_test notify|verify\n");
  return 2;
}
