// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Clients in containers (issue 16): real namespaces made with unshare(1),
// a real halod, and clients that are this program re-executed (--client).
//
// - A client in its own user, pid, mount and network namespaces, reaching
//   halod through the socket directory bind-mounted read-only at another
//   path (halod's own path hidden under a tmpfs), connects, fills and copies a
//   buffer on the device, waits on a semaphore and reads the bytes back. It
//   sees halod's pid as 0 (outside its pid namespace); halod sees the client's
//   host pid and uid 0 (the namespace's root maps to root).
// - Two "pods" of one uid: cgroups pod-a (two containers, c1 and c2) and
//   pod-b (one) under this test's own cgroup v2; with trust-domain cgroup
//   and trust-domain-cgroup-trim 1, pod-a's clients share one trust domain
//   and pod-b's gets another. Skipped (the case) where cgroup v2 is not
//   mounted or not writable here.
// - The same pods at their per-tenant bounds: pod-a holding all its
//   unauthenticated fd channel connections, then all its uid-connections,
//   is refused naming the setting and its cgroup, while pod-b (same uid)
//   connects and works; and a cgroup past uid-domains counts as its uid.
// - halod in a pid namespace of its own: a client outside it has pid 0 in
//   halod's view and is refused with PERMISSION_DENIED saying why.
// - halod in a user namespace that maps only root: a client of uid 1000 is
//   the overflow uid there and is refused with PERMISSION_DENIED saying why.
//
// The whole program exits 77 (skipped) where unshare(1) is missing or may
// not create these namespaces (no privileges, user namespaces disabled).
// Local driver.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "halo/halo.h"
#include "tests/support/halo_test.h"

#define BUFFER_BYTES (1u << 20)

static char g_unshare[PATH_MAX];  // unshare(1)
static char g_self[PATH_MAX];     // this program
// Clients started and not yet reaped: a failed test's teardown kills them.
static pid_t g_started[8];

// --------------------------------------------------------------- client

// Prints "error CODE: message" and returns 3 (the test reads both).
static int client_fail(const char *what, halo_status_t status) {
  printf("error %s: %s: %s\n", halo_status_code_name(halo_status_code(status)),
         what, halo_status_message(status));
  fflush(stdout);
  halo_status_free(status);
  return 3;
}

#define CLIENT_CHECK(what, expr)                       \
  do {                                                 \
    halo_status_t client_status_ = (expr);             \
    if (client_status_) {                              \
      int code_ = client_fail((what), client_status_); \
      if (client) halo_client_close(client);           \
      return code_;                                    \
    }                                                  \
  } while (0)

// Connects (HALO_ADDRESS), fills a device buffer with |pattern|, copies it
// to a host-visible one, waits for the semaphore the execution signals and
// checks every word. Prints "session ID daemon-pid PID self-pid PID", then
// waits for stdin to close (the test looks at halod's sessions meanwhile).
static int client_main(uint32_t pattern) {
  halo_client_t *client = NULL;
  halo_client_options_t options = {.client_name = "namespace-test"};
  CLIENT_CHECK("connect", halo_client_connect(&options, &client));
  halo_buffer_t *device = NULL, *host = NULL;
  halo_semaphore_t *done = NULL;
  halo_command_buffer_t *commands = NULL;
  CLIENT_CHECK("device buffer",
               halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, BUFFER_BYTES,
                                  0, &device));
  CLIENT_CHECK("host buffer",
               halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE,
                                  BUFFER_BYTES, 0, &host));
  CLIENT_CHECK("semaphore", halo_semaphore_create(client, 0, 0, &done));
  CLIENT_CHECK("begin",
               halo_command_buffer_begin(
                   client, 0, HALO_COMMAND_BUFFER_ONE_SHOT, 0, &commands));
  CLIENT_CHECK("fill", halo_command_buffer_fill(
                           commands, halo_buffer_ref(device, 0, BUFFER_BYTES),
                           &pattern, sizeof(pattern)));
  CLIENT_CHECK("barrier", halo_command_buffer_barrier(commands));
  CLIENT_CHECK("copy", halo_command_buffer_copy(
                           commands, halo_buffer_ref(device, 0, BUFFER_BYTES),
                           halo_buffer_ref(host, 0, BUFFER_BYTES)));
  CLIENT_CHECK("end", halo_command_buffer_end(commands));
  halo_semaphore_value_t signal = {done, 1};
  CLIENT_CHECK("execute", halo_queue_execute(NULL, commands, NULL, 0, NULL, 0,
                                             &signal, 1));
  CLIENT_CHECK("wait", halo_semaphore_wait(done, 1, 10ll * 1000000000));
  const uint32_t *words = halo_buffer_host_pointer(host);
  if (!words) {
    printf("error INTERNAL: the host-visible buffer has no mapping\n");
    return 3;
  }
  for (uint32_t i = 0; i < BUFFER_BYTES / 4; ++i) {
    if (words[i] != pattern) {
      printf("error DATA_LOSS: word %u is 0x%08x, expected 0x%08x\n", i,
             words[i], pattern);
      return 3;
    }
  }
  printf("session %llu daemon-pid %d self-pid %d\n",
         (unsigned long long)halo_client_session_id(client),
         (int)halo_client_daemon_pid(client), (int)getpid());
  fflush(stdout);
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  halo_command_buffer_release(commands);
  halo_semaphore_release(done);
  halo_buffer_release(host);
  halo_buffer_release(device);
  halo_client_close(client);
  return 0;
}

// Connects a client (HALO_ADDRESS; not with |bare|: no session), then
// |count| times to the fd channel at |path| sending nothing (connections
// not yet authenticated); prints "held COUNT refused K", K those halod
// answered within 300 ms (a refusal: an admitted one gets nothing until
// it authenticates), then waits for stdin to close.
static int hold_main(const char *path, int count, bool bare) {
  halo_client_t *client = NULL;
  halo_client_options_t options = {.client_name = "namespace-test-holder"};
  if (!bare) CLIENT_CHECK("connect", halo_client_connect(&options, &client));
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof(address.sun_path), "%s", path);
  struct pollfd fds[8];
  if (count < 0 || count > 8) count = 8;
  for (int i = 0; i < count; ++i) {
    fds[i] = (struct pollfd){.events = POLLIN | POLLRDHUP};
    fds[i].fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fds[i].fd < 0 ||
        connect(fds[i].fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
      printf("error connect: %s: %s\n", path, strerror(errno));
      if (client) halo_client_close(client);
      return 3;
    }
  }
  usleep(300 * 1000);
  int refused = poll(fds, (nfds_t)count, 0);
  printf("held %d refused %d\n", count, refused < 0 ? -1 : refused);
  fflush(stdout);
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  if (client) halo_client_close(client);
  return 0;
}

// Opens |count| connections to halod's client socket (HALO_ADDRESS) that
// say nothing (each a session until hello-timeout-ms); prints "raw COUNT",
// then waits for stdin to close.
static int raw_main(int count) {
  const char *address = getenv("HALO_ADDRESS");
  nng_socket sockets[8];
  if (!address || count < 0 || count > 8) return 2;
  for (int i = 0; i < count; ++i) {
    int rv = nng_req0_open(&sockets[i]);
    if (rv == 0) rv = nng_dial(sockets[i], address, NULL, 0);
    if (rv != 0) {
      printf("error dial: %s: %s\n", address, nng_strerror(rv));
      return 3;
    }
  }
  printf("raw %d\n", count);
  fflush(stdout);
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  for (int i = 0; i < count; ++i) nng_close(sockets[i]);
  return 0;
}

// ---------------------------------------------------------------- helpers

// |name| on PATH into |out|; false if not found.
static bool find_program(const char *name, char *out, size_t size) {
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/sbin:/usr/bin:/sbin:/bin";
  char copy[4096];
  snprintf(copy, sizeof(copy), "%s", path);
  for (char *save = NULL, *dir = strtok_r(copy, ":", &save); dir;
       dir = strtok_r(NULL, ":", &save)) {
    snprintf(out, size, "%s/%s", dir, name);
    if (access(out, X_OK) == 0) return true;
  }
  return false;
}

typedef struct client_t {
  pid_t pid;
  int stdin_fd;   // closed to let the client end
  int stdout_fd;  // its report
  char line[512];
} client_t;

// Starts a client: |cgroup_dir| ("" for none) receives it first, then it
// runs `/bin/sh -c SCRIPT` with HALO_ADDRESS=|address| behind |wrapper|
// (NULL-terminated), and the script execs `$0 --client PATTERN`
// (this program is $0).
static void client_start(client_t *client, const char *const *wrapper,
                         const char *cgroup_dir, const char *script,
                         const char *address, uint32_t pattern, uid_t uid) {
  // Close-on-exec: a later client must not hold this one's stdin open.
  int in[2], out[2];
  assert_int_equal(pipe2(in, O_CLOEXEC), 0);
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  char pattern_text[16];
  snprintf(pattern_text, sizeof(pattern_text), "%u", pattern);
  const char *argv[32];
  size_t argc = 0;
  for (size_t i = 0; wrapper && wrapper[i]; ++i) argv[argc++] = wrapper[i];
  argv[argc++] = "/bin/sh";
  argv[argc++] = "-c";
  argv[argc++] = script;
  argv[argc++] = g_self;
  argv[argc++] = pattern_text;
  argv[argc] = NULL;
  pid_t parent = getpid();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    if (cgroup_dir[0]) {
      char procs[PATH_MAX];
      snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgroup_dir);
      int fd = open(procs, O_WRONLY);
      if (fd < 0 || write(fd, "0\n", 2) != 2) {
        printf("error cgroup: joining %s: %s\n", cgroup_dir, strerror(errno));
        _exit(125);
      }
      close(fd);
    }
    if (uid != 0 && (setgid(uid) != 0 || setuid(uid) != 0)) _exit(124);
    setenv("HALO_ADDRESS", address, 1);
    execv(argv[0], (char *const *)argv);
    printf("error exec: %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  for (size_t i = 0; i < sizeof(g_started) / sizeof(g_started[0]); ++i) {
    if (g_started[i] <= 0) {
      g_started[i] = pid;
      break;
    }
  }
  client->pid = pid;
  client->stdin_fd = in[1];
  client->stdout_fd = out[0];
  client->line[0] = '\0';
}

// Reads the client's first line (its report) into client->line.
static void client_read_line(client_t *client) {
  size_t length = 0;
  int64_t deadline = halo_test_now_ns() + 20000 * HALO_TEST_MS;
  while (length + 1 < sizeof(client->line) && halo_test_now_ns() < deadline) {
    char byte;
    ssize_t got = read(client->stdout_fd, &byte, 1);
    if (got <= 0 || byte == '\n') break;
    client->line[length++] = byte;
  }
  client->line[length] = '\0';
  print_message("client %d: %s\n", client->pid, client->line);
}

// Closes its stdin and reaps it; returns its exit code (-1: signaled).
static int client_finish(client_t *client) {
  close(client->stdin_fd);
  close(client->stdout_fd);
  int status = 0;
  assert_int_equal(waitpid(client->pid, &status, 0), client->pid);
  for (size_t i = 0; i < sizeof(g_started) / sizeof(g_started[0]); ++i) {
    if (g_started[i] == client->pid) g_started[i] = 0;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Parses "session ID daemon-pid P self-pid Q"; asserts the line is one.
static void client_report(const client_t *client, uint64_t *out_session,
                          int *out_daemon_pid, int *out_self_pid) {
  unsigned long long session = 0;
  int daemon_pid = -1, self_pid = -1;
  if (sscanf(client->line, "session %llu daemon-pid %d self-pid %d", &session,
             &daemon_pid, &self_pid) != 3) {
    print_error("client %d did not work: '%s'\n", client->pid, client->line);
    fail();
  }
  *out_session = session;
  *out_daemon_pid = daemon_pid;
  *out_self_pid = self_pid;
}

// halod's view of session |id|; asserts it is listed. Strings are copied
// into |trust_domain|.
static Halo__Wire__SessionInfo find_session(const halo_test_daemon_t *daemon,
                                            uint64_t id, char *trust_domain,
                                            size_t size) {
  halo_wire_response_t *response = halo_test_admin_sessions(daemon);
  Halo__Wire__SessionInfo found = HALO__WIRE__SESSION_INFO__INIT;
  bool listed = false;
  for (size_t i = 0; i < response->admin_sessions->n_sessions; ++i) {
    const Halo__Wire__SessionInfo *info = response->admin_sessions->sessions[i];
    if (info->session_id != id) continue;
    found = *info;
    snprintf(trust_domain, size, "%s", info->trust_domain);
    listed = true;
  }
  halo__wire__response__free_unpacked(response, NULL);
  if (!listed) {
    halo_test_admin_print_sessions(daemon);
    print_error("session %llu is not listed\n", (unsigned long long)id);
    fail();
  }
  found.trust_domain = NULL;
  found.client_name = NULL;
  return found;
}

// The namespaces of a container: user (root mapped to our uid), pid (with
// its own /proc), mount and network.
static const char *const *container_wrapper(void) {
  static const char *wrapper[] = {
      g_unshare,      "--user",       "--map-root-user", "--pid",   "--fork",
      "--kill-child", "--mount-proc", "--net",           "--mount", NULL};
  return wrapper;
}

// Inside the container: the socket directory at /mnt/halo (a tmpfs on /mnt
// first), read-only as a pod mounts it, halod's own directory hidden under
// a tmpfs, then the client.
static void container_script(const halo_test_daemon_t *daemon, char *out,
                             size_t size) {
  snprintf(out, size,
           "set -e; mount -t tmpfs none /mnt; mkdir /mnt/halo; "
           "mount --bind %s /mnt/halo; mount -o remount,bind,ro /mnt/halo; "
           "mount -t tmpfs none %s; "
           "test ! -e %s; exec \"$0\" --client \"$1\"",
           daemon->dir, daemon->dir, daemon->socket_path);
}

#define CONTAINER_ADDRESS "ipc:///mnt/halo/halo.sock"

// ------------------------------------------------------------------ tests

typedef struct fixture_t {
  halo_test_daemon_t daemon;
  char cgroup_base[PATH_MAX];  // "" unless created
} fixture_t;

static int setup(void **state) {
  fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  return 0;
}

static void remove_cgroups(const char *base) {
  if (!base[0]) return;
  const char *leaves[] = {"pod-a/c1", "pod-a/c2", "pod-b/c1",
                          "pod-a",    "pod-b",    ""};
  for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); ++i) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/%s", base, leaves[i]);
    // A cgroup is busy for a moment after its last process is reaped.
    HALO_TEST_POLL(rmdir(path) == 0 || errno == ENOENT, 2000);
  }
}

static int teardown(void **state) {
  fixture_t *fixture = *state;
  for (size_t i = 0; i < sizeof(g_started) / sizeof(g_started[0]); ++i) {
    if (g_started[i] <= 0) continue;
    kill(g_started[i], SIGKILL);
    waitpid(g_started[i], NULL, 0);
    g_started[i] = 0;
  }
  halo_test_daemon_cleanup(&fixture->daemon);
  remove_cgroups(fixture->cgroup_base);
  free(fixture);
  return 0;
}

static void test_client_in_container_namespaces_works(void **state) {
  fixture_t *fixture = *state;
  halo_test_daemon_start(&fixture->daemon);
  char script[1024];
  container_script(&fixture->daemon, script, sizeof(script));
  client_t client;
  client_start(&client, container_wrapper(), "", script, CONTAINER_ADDRESS,
               0x5a17c0deu, 0);
  client_read_line(&client);
  uint64_t session;
  int daemon_pid, self_pid;
  client_report(&client, &session, &daemon_pid, &self_pid);
  // The client is pid 1 of its namespace and cannot see halod.
  assert_int_equal(self_pid, 1);
  assert_int_equal(daemon_pid, 0);
  // halod sees its host pid (a descendant of the unshare child) and uid 0.
  char domain[256];
  Halo__Wire__SessionInfo info =
      find_session(&fixture->daemon, session, domain, sizeof(domain));
  assert_true(info.pid > 1);
  assert_int_not_equal(info.pid, (uint32_t)client.pid);
  assert_int_equal(info.uid, 0);
  assert_string_equal(domain, "uid:0");
  assert_int_equal(client_finish(&client), 0);
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 0,
                                                   HALO_TEST_DEADLINE_MS));
}

// The cgroup v2 mount point and this process's cgroup in it; false if
// cgroup v2 is not mounted or this process has no v2 cgroup.
static bool own_cgroup_v2(char *out, size_t size) {
  FILE *mounts = fopen("/proc/self/mountinfo", "r");
  if (!mounts) return false;
  char line[1024], mount_point[PATH_MAX] = "";
  while (fgets(line, sizeof(line), mounts)) {
    // "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS ... - FSTYPE SOURCE ..."
    char point[PATH_MAX], fstype[64];
    const char *separator = strstr(line, " - ");
    if (!separator || sscanf(separator, " - %63s", fstype) != 1) continue;
    if (strcmp(fstype, "cgroup2") != 0) continue;
    if (sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1) {
      snprintf(mount_point, sizeof(mount_point), "%s", point);
      break;
    }
  }
  fclose(mounts);
  if (!mount_point[0]) return false;
  FILE *cgroup = fopen("/proc/self/cgroup", "r");
  if (!cgroup) return false;
  char own[PATH_MAX] = "";
  while (fgets(line, sizeof(line), cgroup)) {
    if (strncmp(line, "0::", 3) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(own, sizeof(own), "%s", line + 3);
    }
  }
  fclose(cgroup);
  if (!own[0]) return false;
  snprintf(out, size, "%s%s", mount_point, strcmp(own, "/") ? own : "");
  return true;
}

// Makes pod-a (containers c1, c2) and pod-b (c1) under a cgroup of this
// test's own (fixture->cgroup_base); skips the test where cgroup v2 is not
// mounted or not writable here.
static void make_pods(fixture_t *fixture) {
  char own[2048];
  if (!own_cgroup_v2(own, sizeof(own))) {
    print_message("cgroup v2 is not mounted here; skipped\n");
    skip();
  }
  snprintf(fixture->cgroup_base, sizeof(fixture->cgroup_base),
           "%s/halo-namespace-test-%d", own, (int)getpid());
  if (mkdir(fixture->cgroup_base, 0755) != 0) {
    print_message(
        "cannot create a cgroup under %s (%s): not delegated to "
        "this user; skipped\n",
        own, strerror(errno));
    fixture->cgroup_base[0] = '\0';
    skip();
  }
  const char *leaves[] = {"pod-a", "pod-a/c1", "pod-a/c2", "pod-b", "pod-b/c1"};
  for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); ++i) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/%s", fixture->cgroup_base, leaves[i]);
    assert_int_equal(mkdir(path, 0755), 0);
  }
}

static void test_two_pods_of_one_uid_get_two_trust_domains(void **state) {
  fixture_t *fixture = *state;
  make_pods(fixture);
  const char *args[] = {"--trust-domain", "cgroup",
                        "--trust-domain-cgroup-trim", "1", NULL};
  halo_test_daemon_start_with_args(&fixture->daemon, args);
  char script[1024];
  container_script(&fixture->daemon, script, sizeof(script));
  const char *pods[] = {"pod-a/c1", "pod-a/c2", "pod-b/c1"};
  client_t clients[3];
  for (int i = 0; i < 3; ++i) {
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/%s", fixture->cgroup_base, pods[i]);
    client_start(&clients[i], container_wrapper(), dir, script,
                 CONTAINER_ADDRESS, 0x01010101u * (uint32_t)(i + 1), 0);
  }
  char domains[3][512];
  for (int i = 0; i < 3; ++i) {
    client_read_line(&clients[i]);
    uint64_t session;
    int daemon_pid, self_pid;
    client_report(&clients[i], &session, &daemon_pid, &self_pid);
    Halo__Wire__SessionInfo info =
        find_session(&fixture->daemon, session, domains[i], sizeof(domains[i]));
    assert_int_equal(info.uid, 0);
  }
  // This test's cgroup as halod sees it (halod shares our cgroup
  // namespace): the path below the mount point.
  const char *relative = strstr(fixture->cgroup_base, "/halo-namespace-test-");
  char own_relative[PATH_MAX];
  FILE *cgroup = fopen("/proc/self/cgroup", "r");
  assert_non_null(cgroup);
  char line[PATH_MAX] = "";
  own_relative[0] = '\0';
  while (fgets(line, sizeof(line), cgroup)) {
    if (strncmp(line, "0::", 3) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(own_relative, sizeof(own_relative), "%s",
               strcmp(line + 3, "/") ? line + 3 : "");
    }
  }
  fclose(cgroup);
  char expected_a[PATH_MAX + 64], expected_b[PATH_MAX + 64];
  snprintf(expected_a, sizeof(expected_a), "uid:0,cgroup:%s%s/pod-a",
           own_relative, relative);
  snprintf(expected_b, sizeof(expected_b), "uid:0,cgroup:%s%s/pod-b",
           own_relative, relative);
  assert_string_equal(domains[0], expected_a);
  assert_string_equal(domains[1], expected_a);
  assert_string_equal(domains[2], expected_b);
  halo_wire_response_t *status = halo_test_admin_status(&fixture->daemon);
  assert_int_equal(status->admin_status->trust_domains, 2);
  halo__wire__response__free_unpacked(status, NULL);
  for (int i = 0; i < 3; ++i) assert_int_equal(client_finish(&clients[i]), 0);
}

// Starts this program in |pod| ("pod-a/c1") with |script| (whose $0 is
// this program and $1 |pattern|) and reads its first line.
static void pod_start(client_t *client, const fixture_t *fixture,
                      const char *pod, const char *script, uint32_t pattern) {
  char dir[PATH_MAX + 16];
  snprintf(dir, sizeof(dir), "%s/%s", fixture->cgroup_base, pod);
  client_start(client, NULL, dir, script, fixture->daemon.listen_address,
               pattern, 0);
  client_read_line(client);
}

#define POD_CLIENT "exec \"$0\" --client \"$1\""

// Asserts |client| was refused: its line names |code|, |setting| and its
// pod's cgroup; it exits 3.
static void expect_pod_refused(client_t *client, const char *code,
                               const char *setting, const char *pod) {
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "error %s: connect: ", code);
  if (strncmp(client->line, prefix, strlen(prefix)) != 0 ||
      !strstr(client->line, setting) || !strstr(client->line, pod)) {
    print_error("expected a refusal naming %s and %s: '%s'\n", setting, pod,
                client->line);
    fail();
  }
  assert_int_equal(client_finish(client), 3);
}

// Asserts |client| works (its report line).
static void expect_pod_works(const client_t *client) {
  uint64_t session;
  int daemon_pid, self_pid;
  client_report(client, &session, &daemon_pid, &self_pid);
}

static void test_a_pod_at_its_bounds_leaves_another_pod_of_its_uid_alone(
    void **state) {
  fixture_t *fixture = *state;
  make_pods(fixture);
  const char *args[] = {"--trust-domain",
                        "cgroup",
                        "--trust-domain-cgroup-trim",
                        "1",
                        "--uid-connections",
                        "2",
                        "--fd-channel-unauthenticated",
                        "2",
                        "--fd-channel-auth-ms",
                        "60000",
                        NULL};
  halo_test_daemon_start_with_args(&fixture->daemon, args);
  // pod-a holds all the fd channel connections one tenant may leave
  // unauthenticated: another client of pod-a is refused, pod-b's is not.
  char hold[PATH_MAX];
  snprintf(hold, sizeof(hold), "exec \"$0\" --hold-fd %s 2",
           fixture->daemon.fd_channel_path);
  client_t holder, refused, b1;
  pod_start(&holder, fixture, "pod-a/c1", hold, 0);
  assert_string_equal(holder.line, "held 2 refused 0");
  pod_start(&refused, fixture, "pod-a/c2", POD_CLIENT, 0x0a0a0a0au);
  expect_pod_refused(&refused, "RESOURCE_EXHAUSTED",
                     "fd-channel-unauthenticated", "/pod-a");
  pod_start(&b1, fixture, "pod-b/c1", POD_CLIENT, 0x0b0b0b0bu);
  expect_pod_works(&b1);
  assert_int_equal(client_finish(&holder), 0);
  assert_true(halo_test_admin_expect_session_count(&fixture->daemon, 1,
                                                   HALO_TEST_DEADLINE_MS));
  // pod-a holds its uid-connections: its next session is refused, pod-b's
  // second is not (uid 0 then has four sessions, pod-b two).
  client_t a1, a2, b2;
  pod_start(&a1, fixture, "pod-a/c1", POD_CLIENT, 0x0a0a0a01u);
  expect_pod_works(&a1);
  pod_start(&a2, fixture, "pod-a/c2", POD_CLIENT, 0x0a0a0a02u);
  expect_pod_works(&a2);
  pod_start(&refused, fixture, "pod-a/c1", POD_CLIENT, 0x0a0a0a03u);
  expect_pod_refused(&refused, "RESOURCE_EXHAUSTED", "uid-connections",
                     "/pod-a");
  pod_start(&b2, fixture, "pod-b/c1", POD_CLIENT, 0x0b0b0b02u);
  expect_pod_works(&b2);
  client_t *working[] = {&b1, &a1, &a2, &b2};
  for (size_t i = 0; i < 4; ++i) {
    assert_int_equal(client_finish(working[i]), 0);
  }
  // fd channel connections from cgroups without a session count as their
  // uid's, whichever cgroup: pod-b's two fill the uid's allowance, pod-a's
  // next is refused (a cgroup cannot make tenants of its own this way).
  client_t bare_b, bare_a;
  snprintf(hold, sizeof(hold), "exec \"$0\" --hold-fd-bare %s 2",
           fixture->daemon.fd_channel_path);
  pod_start(&bare_b, fixture, "pod-b/c1", hold, 0);
  assert_string_equal(bare_b.line, "held 2 refused 0");
  snprintf(hold, sizeof(hold), "exec \"$0\" --hold-fd-bare %s 1",
           fixture->daemon.fd_channel_path);
  pod_start(&bare_a, fixture, "pod-a/c1", hold, 0);
  assert_string_equal(bare_a.line, "held 1 refused 1");
  assert_int_equal(client_finish(&bare_a), 0);
  assert_int_equal(client_finish(&bare_b), 0);
}

// With uid-domains 1, pod-b's session is refused naming uid-domains, and
// pod-b is a cgroup more than uid 0 may have tenants once pod-a has a
// session: pod-b's connections count as the uid's (a
// connection past uid-connections is refused naming the uid without a
// cgroup), so that a uid making cgroups cannot multiply its bounds.
static void test_cgroups_past_uid_domains_share_their_uids_bounds(
    void **state) {
  fixture_t *fixture = *state;
  make_pods(fixture);
  const char *args[] = {"--trust-domain",
                        "cgroup",
                        "--trust-domain-cgroup-trim",
                        "1",
                        "--uid-connections",
                        "2",
                        "--uid-domains",
                        "1",
                        NULL};
  halo_test_daemon_start_with_args(&fixture->daemon, args);
  client_t a1, raw, b1;
  pod_start(&a1, fixture, "pod-a/c1", POD_CLIENT, 0x0a0a0a01u);
  expect_pod_works(&a1);
  // pod-b would be a second trust domain of uid 0.
  pod_start(&b1, fixture, "pod-b/c1", POD_CLIENT, 0x0b0b0b01u);
  expect_pod_refused(&b1, "RESOURCE_EXHAUSTED", "the limit uid-domains",
                     "/pod-b would be one more");
  pod_start(&raw, fixture, "pod-b/c1", "exec \"$0\" --raw 2", 0);
  assert_string_equal(raw.line, "raw 2");
  pod_start(&b1, fixture, "pod-b/c1", POD_CLIENT, 0x0b0b0b01u);
  assert_string_equal(b1.line,
                      "error RESOURCE_EXHAUSTED: connect: uid 0 already has 2 "
                      "connections to halod, the limit uid-connections");
  assert_int_equal(client_finish(&b1), 3);
  assert_int_equal(client_finish(&raw), 0);
  assert_int_equal(client_finish(&a1), 0);
}

static void test_client_outside_halods_pid_namespace_is_refused(void **state) {
  fixture_t *fixture = *state;
  const char *wrapper[] = {g_unshare,      "--pid",        "--fork",
                           "--kill-child", "--mount-proc", NULL};
  halo_test_daemon_start_wrapped(&fixture->daemon, wrapper, NULL);
  halo_client_options_t options = {.address = fixture->daemon.listen_address};
  halo_client_t *client = NULL;
  HALO_TEST_EXPECT_STATUS(halo_client_connect(&options, &client),
                          HALO_STATUS_PERMISSION_DENIED,
                          "outside halod's); run halod in the host's pid "
                          "namespace");
  assert_null(client);
}

static void test_unmapped_uid_is_refused(void **state) {
  fixture_t *fixture = *state;
  if (geteuid() != 0) {
    print_message("not root: cannot run a client of another uid; skipped\n");
    skip();
  }
  // halod's user namespace maps only root.
  const char *wrapper[] = {g_unshare, "--user", "--map-root-user", NULL};
  const char *args[] = {"--socket-mode", "0666", NULL};
  halo_test_daemon_start_wrapped(&fixture->daemon, wrapper, args);
  client_t client;
  client_start(&client, NULL, "", "exec \"$0\" --client \"$1\"",
               fixture->daemon.listen_address, 1, 1000);
  client_read_line(&client);
  assert_int_equal(client_finish(&client), 3);
  if (!strstr(client.line, "error PERMISSION_DENIED") ||
      !strstr(client.line, "not mapped into halod's user namespace")) {
    print_error(
        "expected PERMISSION_DENIED naming the user namespace, got "
        "'%s'\n",
        client.line);
    fail();
  }
}

// Whether unshare(1) may create a container's namespaces here; if not,
// prints why.
static bool namespaces_permitted(void) {
  if (!find_program("unshare", g_unshare, sizeof(g_unshare))) {
    printf("unshare(1) is not installed (util-linux); skipped\n");
    return false;
  }
  char command[PATH_MAX + 128];
  snprintf(command, sizeof(command),
           "%s --user --map-root-user --pid --fork --mount-proc --net "
           "--mount /bin/sh -c 'mount -t tmpfs none /mnt' 2>&1",
           g_unshare);
  FILE *probe = popen(command, "r");
  char output[512] = "";
  size_t length = probe ? fread(output, 1, sizeof(output) - 1, probe) : 0;
  output[length] = '\0';
  int status = probe ? pclose(probe) : -1;
  if (status != 0) {
    printf(
        "unshare cannot create user, pid, mount and network namespaces "
        "here (%s); skipped\n",
        output[0] ? output : "no output");
    return false;
  }
  return true;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--client") == 0) {
    return client_main((uint32_t)strtoul(argv[2], NULL, 10));
  }
  if (argc >= 3 && strcmp(argv[1], "--raw") == 0) {
    return raw_main(atoi(argv[2]));
  }
  if (argc >= 4 && strcmp(argv[1], "--hold-fd") == 0) {
    return hold_main(argv[2], atoi(argv[3]), false);
  }
  if (argc >= 4 && strcmp(argv[1], "--hold-fd-bare") == 0) {
    return hold_main(argv[2], atoi(argv[3]), true);
  }
  ssize_t length = readlink("/proc/self/exe", g_self, sizeof(g_self) - 1);
  if (length <= 0) return 1;
  g_self[length] = '\0';
  if (!namespaces_permitted()) return HALO_TEST_EXIT_SKIPPED;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_client_in_container_namespaces_works,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_two_pods_of_one_uid_get_two_trust_domains, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_pod_at_its_bounds_leaves_another_pod_of_its_uid_alone, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_cgroups_past_uid_domains_share_their_uids_bounds, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_client_outside_halods_pid_namespace_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unmapped_uid_is_refused, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
