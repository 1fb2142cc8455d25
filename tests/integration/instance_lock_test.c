// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// One halod per client socket (daemon/instance_lock.h): of two halods
// started at the same instant on one socket exactly one serves, the other
// exits 1 naming the lock file; a client cannot take the lock, not even
// root with the socket directory mounted read-only and a read lock waiting
// for each halod's end; the lock file a SIGKILLed halod left (and its
// device workers, which never hold it) does not block the next start; a
// file system without unnamed files gets the lock all the same.
#include <dirent.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>

#include "tests/integration/ops_support.h"
#include "tests/support/halo_test.h"

#ifndef HALO_TEST_HALOD
#error "HALO_TEST_HALOD must name the halod executable"
#endif

typedef struct lock_fixture_t {
  ops_daemon_t daemon;
  char lock_path[200];  // DIR/halo.sock.lock
} lock_fixture_t;

static int lock_setup(void **state) {
  lock_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  ops_daemon_prepare(&fixture->daemon);
  snprintf(fixture->lock_path, sizeof(fixture->lock_path), "%s/halo.sock.lock",
           fixture->daemon.dir);
  *state = fixture;
  return 0;
}

static int lock_teardown(void **state) {
  lock_fixture_t *fixture = *state;
  ops_daemon_cleanup(&fixture->daemon);
  free(fixture);
  return 0;
}

// Whether a client of |listen| connects (its fd channel included) and
// pings.
static bool lock_client_served(const char *listen) {
  halo_client_options_t options = {.address = listen,
                                   .request_timeout_ms = 2000};
  halo_client_t *client = NULL;
  halo_status_t status = halo_client_connect(&options, &client);
  if (!status) status = halo_client_ping(client);
  if (status)
    print_message("client of %s: %s\n", listen, halo_status_message(status));
  bool served = !status;
  halo_status_free(status);
  if (client) halo_client_close(client);
  return served;
}

// SIGKILLs |daemon|'s halod and reaps it.
static void lock_kill(ops_daemon_t *daemon) {
  kill(daemon->pid, SIGKILL);
  waitpid(daemon->pid, NULL, 0);
  daemon->pid = 0;
}

// The number of files in |directory| whose name starts with |prefix|.
static int lock_count_files(const char *directory, const char *prefix) {
  DIR *dir = opendir(directory);
  assert_non_null(dir);
  int count = 0;
  for (struct dirent *entry; (entry = readdir(dir));) {
    if (strncmp(entry->d_name, prefix, strlen(prefix)) == 0) ++count;
  }
  closedir(dir);
  return count;
}

// "ASAN_OPTIONS=..." for a halod with listen_delay preloaded (a library
// built without ASan: ASan would refuse to come after it): the test's own
// options and verify_asan_link_order=0.
static void lock_asan_options(char *out, size_t size) {
  const char *asan = getenv("ASAN_OPTIONS");
  snprintf(out, size, "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
           asan ? asan : "", asan && *asan ? ":" : "");
}

// Two halods on one socket, each with its admin socket, exec'd at the same
// instant (both wait on one pipe until it closes): exactly one serves, the
// other exits 1 naming the lock file, also where a reader holds the lock
// file they find (both then replace it at once). In every other round each
// listen() of theirs waits 30 ms (listen_delay.c): a socket bound but not
// yet listening refuses connects, as a stale one does. Before the lock,
// in each such round both took the other's sockets for stale, removed
// them and bound their own: both ran, on each other's socket files.
static void test_two_halods_started_at_once_one_serves(void **state) {
  lock_fixture_t *fixture = *state;
  char asan_options[512];
  lock_asan_options(asan_options, sizeof(asan_options));
  const char *const slow[] = {"LD_PRELOAD=" LISTEN_DELAY_LIBRARY,
                              "HALO_TEST_LISTEN_DELAY_MS=30", asan_options,
                              NULL};
  char **environments[2] = {ops_environment(NULL), ops_environment(slow)};
  enum { ROUNDS = 50 };
  int served = 0, both = 0, neither = 0, unnamed = 0;
  for (int round = 0; round < ROUNDS; ++round) {
    // In rounds 2 and 3 of every 4, a reader holds the lock file the last
    // round left: both halods replace it at once.
    int reader = -1;
    if (round % 4 >= 2) {
      reader = open(fixture->lock_path, O_RDONLY | O_CLOEXEC);
      assert_true(reader >= 0);
      struct flock lock = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
      assert_int_equal(fcntl(reader, F_OFD_SETLK, &lock), 0);
    }
    ops_daemon_t daemons[2];
    memset(daemons, 0, sizeof(daemons));
    int gate[2];
    assert_int_equal(pipe2(gate, O_CLOEXEC), 0);
    for (int i = 0; i < 2; ++i) {
      ops_daemon_t *daemon = &daemons[i];
      snprintf(daemon->dir, sizeof(daemon->dir), "%s", fixture->daemon.dir);
      snprintf(daemon->listen, sizeof(daemon->listen), "%s",
               fixture->daemon.listen);
      snprintf(daemon->admin, sizeof(daemon->admin), "ipc://%s/admin%d.sock",
               fixture->daemon.dir, i);
      snprintf(daemon->log_path, sizeof(daemon->log_path), "%s/halod%d.log",
               fixture->daemon.dir, i);
      const char *argv[] = {HALO_TEST_HALOD, "--listen",    daemon->listen,
                            "--admin",       daemon->admin, "--driver",
                            "local",         NULL};
      int log = open(daemon->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                     0644);
      assert_true(log >= 0);
      pid_t pid = fork();
      assert_true(pid >= 0);
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char byte;
        close(gate[1]);
        while (read(gate[0], &byte, 1) < 0 && errno == EINTR) {
        }
        if (dup2(log, STDERR_FILENO) < 0) _exit(126);
        execve(argv[0], (char *const *)argv, environments[round % 2]);
        _exit(127);
      }
      close(log);
      daemon->pid = pid;
    }
    close(gate[0]);
    close(gate[1]);  // both go
    // Each either exits or answers on its admin socket.
    bool answers[2] = {false, false};
    int codes[2] = {-1, -1};
    int64_t deadline = ops_now_ms() + 10000;
    while ((codes[0] < 0 && !answers[0]) || (codes[1] < 0 && !answers[1])) {
      assert_true(ops_now_ms() < deadline);
      for (int i = 0; i < 2; ++i) {
        int status;
        if (codes[i] < 0 && waitpid(daemons[i].pid, &status, WNOHANG) > 0) {
          codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
          daemons[i].pid = 0;
        } else if (codes[i] < 0 && !answers[i]) {
          answers[i] = ops_daemon_answers(&daemons[i]);
        }
      }
      ops_sleep_ms(2);
    }
    int running = (codes[0] < 0) + (codes[1] < 0);
    if (running == 2) ++both;
    if (running == 0) ++neither;
    if (running == 1) {
      int winner = codes[0] < 0 ? 0 : 1;
      if (lock_client_served(daemons[winner].listen)) ++served;
      char *log = ops_read_file(daemons[1 - winner].log_path);
      if (codes[1 - winner] != 1 || !strstr(log, fixture->lock_path)) {
        print_message("round %d: the second exited %d:\n%s\n", round,
                      codes[1 - winner], log);
        ++unnamed;
      }
      free(log);
    }
    for (int i = 0; i < 2; ++i) {
      if (daemons[i].pid) assert_int_equal(ops_daemon_stop(&daemons[i]), 0);
    }
    if (reader >= 0) close(reader);
    // Nothing of a replacement is left beside the lock file.
    assert_int_equal(lock_count_files(fixture->daemon.dir, "halo.sock.lock"),
                     1);
  }
  print_message(
      "%d rounds: one served a client in %d; both ran in %d, neither in %d; "
      "the second's exit did not name the lock file in %d\n",
      ROUNDS, served, both, neither, unnamed);
  free(environments[0]);
  free(environments[1]);
  assert_int_equal(served, ROUNDS);
  assert_int_equal(unnamed, 0);
}

// The existing lock file's mode is 0600: another uid cannot open it at all.
static void expect_private_lock_file(const lock_fixture_t *fixture) {
  struct stat st;
  assert_int_equal(stat(fixture->lock_path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_mode & 07777, 0600);
}

// A child that, in a mount namespace of its own where the socket directory
// is mounted read-only, plays a root client: it checks that it cannot open
// the lock file for writing (EROFS) nor write-lock it through a read-only
// descriptor (EBADF), then read-locks it, waiting for each halod to let it
// go (F_OFD_SETLKW), and writes a byte to |report| each time it holds one.
// Exits when |report| breaks.
static pid_t lock_spawn_reader(const lock_fixture_t *fixture, int report) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGPIPE, SIG_DFL);
  const char *dir = fixture->daemon.dir;
  if (unshare(CLONE_NEWNS) != 0 ||
      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount(dir, dir, NULL, MS_BIND, NULL) != 0 ||
      mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) {
    dprintf(STDERR_FILENO, "read-only mount of %s: %s\n", dir, strerror(errno));
    _exit(77);
  }
  for (;;) {
    if (open(fixture->lock_path, O_RDWR | O_CLOEXEC) >= 0 || errno != EROFS) {
      dprintf(STDERR_FILENO, "O_RDWR on the read-only mount: %s\n",
              strerror(errno));
      _exit(2);
    }
    int fd = open(fixture->lock_path, O_RDONLY | O_CLOEXEC);  // kept open
    if (fd < 0) _exit(3);
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_OFD_SETLK, &lock) == 0 || errno != EBADF) _exit(4);
    lock.l_type = F_RDLCK;
    while (fcntl(fd, F_OFD_SETLKW, &lock) != 0) {
      if (errno != EINTR) _exit(5);
    }
    if (write(report, "r", 1) != 1) _exit(0);
    // Holds it; takes the next halod's file once that one ends.
    for (;;) {
      struct stat opened, named;
      if (fstat(fd, &opened) != 0) _exit(6);
      if (stat(fixture->lock_path, &named) == 0 &&
          named.st_ino != opened.st_ino) {
        break;
      }
      usleep(1000);
    }
  }
}

// Waits until the reader reports a read lock held (false: it exited, its
// code in *|out_code|).
static bool lock_reader_holds(pid_t reader, int report, int *out_code) {
  int64_t deadline = ops_now_ms() + 5000;
  while (ops_now_ms() < deadline) {
    char byte;
    if (read(report, &byte, 1) == 1) return true;
    int status;
    if (waitpid(reader, &status, WNOHANG) == reader) {
      *out_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
      return false;
    }
    ops_sleep_ms(5);
  }
  *out_code = -1;
  return false;
}

// Root in a client pod with the socket directory mounted read-only can open
// the lock file read-only, and a read lock blocks a write lock: it waits
// for each halod to end and takes the file at once. Each next halod still
// starts (it replaces a file only readers hold) and serves; no replaced
// file is left behind. A uid other than halod's cannot open the file.
static void test_read_lock_of_a_client_does_not_block_a_start(void **state) {
  lock_fixture_t *fixture = *state;
  if (geteuid() != 0) {
    print_message("not root: no read-only mount of the socket directory\n");
    skip();
  }
  ops_daemon_t *daemon = &fixture->daemon;
  ops_daemon_start(daemon, NULL, NULL);
  expect_private_lock_file(fixture);
  // Another uid: the directory open to it, the file not.
  assert_int_equal(chmod(daemon->dir, 0755), 0);
  pid_t other = fork();
  assert_true(other >= 0);
  if (other == 0) {
    if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      _exit(77);
    }
    int fd = open(fixture->lock_path, O_RDONLY | O_CLOEXEC);
    _exit(fd < 0 && errno == EACCES ? 0 : 1);
  }
  assert_int_equal(ops_wait(other, 5000), 0);

  int report[2];
  assert_int_equal(pipe2(report, O_CLOEXEC | O_NONBLOCK), 0);
  pid_t reader = lock_spawn_reader(fixture, report[1]);
  close(report[1]);
  for (int restart = 0; restart < 3; ++restart) {
    // The reader waits on this halod's file; it gets it at the kill.
    ops_sleep_ms(50);
    struct stat held;
    assert_int_equal(stat(fixture->lock_path, &held), 0);
    lock_kill(daemon);
    int code = 0;
    if (!lock_reader_holds(reader, report[0], &code)) {
      if (code == 77) skip();
      print_error("the reader did not take a read lock (exit %d)\n", code);
      fail();
    }
    ops_daemon_start(daemon, NULL, NULL);
    assert_true(lock_client_served(daemon->listen));
    expect_private_lock_file(fixture);
    struct stat replaced;  // the reader's is not the lock file any more
    assert_int_equal(stat(fixture->lock_path, &replaced), 0);
    assert_true(replaced.st_ino != held.st_ino);
    assert_int_equal(lock_count_files(daemon->dir, "halo.sock.lock"), 1);
  }
  assert_int_equal(ops_daemon_stop(daemon), 0);
  kill(reader, SIGKILL);
  waitpid(reader, NULL, 0);
  close(report[0]);
}

// Whether process |pid| has a descriptor open on the file |path| names
// (by its inode: the link of a file created unnamed reads "/#INODE").
static bool lock_process_has_open(pid_t pid, const char *path) {
  struct stat file;
  assert_int_equal(stat(path, &file), 0);
  char fds[64];
  snprintf(fds, sizeof(fds), "/proc/%d/fd", (int)pid);
  DIR *dir = opendir(fds);
  if (!dir) return false;
  bool found = false;
  for (struct dirent *entry; !found && (entry = readdir(dir));) {
    char link[PATH_MAX];
    snprintf(link, sizeof(link), "%s/%s", fds, entry->d_name);
    struct stat st;
    found = entry->d_name[0] != '.' && stat(link, &st) == 0 &&
            st.st_dev == file.st_dev && st.st_ino == file.st_ino;
  }
  closedir(dir);
  return found;
}

// The children of |parent| (at most |capacity|); returns how many.
static int lock_children(pid_t parent, pid_t *out_children, int capacity) {
  DIR *proc = opendir("/proc");
  assert_non_null(proc);
  int count = 0;
  for (struct dirent *entry; count < capacity && (entry = readdir(proc));) {
    int pid = atoi(entry->d_name);
    if (pid <= 0) continue;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    char *status = ops_read_file(path);
    const char *ppid = strstr(status, "\nPPid:\t");
    if (ppid && atoi(ppid + 7) == (int)parent) out_children[count++] = pid;
    free(status);
  }
  closedir(proc);
  return count;
}

// halod holds the lock file open, its device workers do not (close-on-exec):
// a SIGKILLed halod's lock ends with it even while its workers finish, and
// the next halod starts at once on the file it left.
static void test_lock_of_a_killed_halod_does_not_block_a_start(void **state) {
  lock_fixture_t *fixture = *state;
  ops_daemon_t *daemon = &fixture->daemon;
  ops_daemon_start(daemon, NULL, NULL);
  assert_true(lock_client_served(daemon->listen));
  assert_true(lock_process_has_open(daemon->pid, fixture->lock_path));
  pid_t workers[16];
  int count = lock_children(daemon->pid, workers, 16);
  print_message("halod %d has %d child process(es)\n", (int)daemon->pid, count);
  for (int i = 0; i < count; ++i) {
    assert_false(lock_process_has_open(workers[i], fixture->lock_path));
  }
  for (int restart = 0; restart < 3; ++restart) {
    lock_kill(daemon);
    ops_daemon_start(daemon, NULL, NULL);
    assert_true(lock_client_served(daemon->listen));
  }
  assert_int_equal(ops_daemon_stop(daemon), 0);
  // A clean stop leaves the lock file (empty; the next halod takes it).
  assert_int_equal(lock_count_files(daemon->dir, "halo.sock.lock"), 1);
  ops_daemon_start(daemon, NULL, NULL);
  assert_int_equal(ops_daemon_stop(daemon), 0);
}

// A socket directory halod cannot write in: it exits 1 naming the lock
// file, before it touches a socket.
static void test_directory_halod_cannot_write_in_fails_the_start(void **state) {
  lock_fixture_t *fixture = *state;
  if (geteuid() != 0) {
    print_message("not root: no read-only mount of the socket directory\n");
    skip();
  }
  const char *dir = fixture->daemon.dir;
  char script[600];
  snprintf(script, sizeof(script),
           "mount --make-rprivate / && mount --bind %s %s && "
           "mount -o remount,bind,ro %s && exec %s --listen %s --admin "
           "ipc:///tmp/halo-lock-test-admin-%d.sock --driver local",
           dir, dir, dir, HALO_TEST_HALOD, fixture->daemon.listen,
           (int)getpid());
  const char *argv[] = {
      "/usr/bin/unshare", "-m", "/bin/sh", "-c", script, NULL};
  if (access(argv[0], X_OK) != 0) {
    print_message("no %s\n", argv[0]);
    skip();
  }
  ops_result_t r;
  ops_run(argv, NULL, &r);
  char expected[600];
  snprintf(expected, sizeof(expected),
           "cannot start: cannot create the lock file %s in %s",
           fixture->lock_path, dir);
  OPS_EXPECT(&r, r.exit_code == 1 && strstr(r.err, expected) &&
                     strstr(r.err, "Read-only file system"));
  ops_result_free(&r);
}

// A file system without unnamed files (O_TMPFILE; overlayfs before Linux
// 6.6, here listen_delay.c's HALO_TEST_NO_TMPFILE): halod creates its lock
// file under a name of its own first, serves, a second halod exits 1
// naming the lock file, and no such name is left.
static void test_lock_without_unnamed_files(void **state) {
  lock_fixture_t *fixture = *state;
  ops_daemon_t *daemon = &fixture->daemon;
  char asan_options[512];
  lock_asan_options(asan_options, sizeof(asan_options));
  const char *const env[] = {"LD_PRELOAD=" LISTEN_DELAY_LIBRARY,
                             "HALO_TEST_NO_TMPFILE=1", asan_options, NULL};
  for (int start = 0; start < 2; ++start) {  // a new file, then the one left
    ops_daemon_start(daemon, NULL, env);
    assert_true(lock_client_served(daemon->listen));
    assert_int_equal(lock_count_files(daemon->dir, "halo.sock.lock"), 1);
    char admin[200];
    snprintf(admin, sizeof(admin), "ipc://%s/admin-second.sock", daemon->dir);
    const char *argv[] = {HALO_TEST_HALOD, "--listen", daemon->listen,
                          "--admin",       admin,      "--driver",
                          "local",         NULL};
    ops_result_t r;
    ops_run(argv, env, &r);
    OPS_EXPECT(&r, r.exit_code == 1 && strstr(r.err, fixture->lock_path));
    ops_result_free(&r);
    if (start == 0) {
      lock_kill(daemon);
    } else {
      assert_int_equal(ops_daemon_stop(daemon), 0);
    }
  }
  assert_int_equal(lock_count_files(daemon->dir, "halo.sock.lock"), 1);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, lock_setup, lock_teardown)
  const struct CMUnitTest tests[] = {
      T(test_two_halods_started_at_once_one_serves),
      T(test_read_lock_of_a_client_does_not_block_a_start),
      T(test_lock_of_a_killed_halod_does_not_block_a_start),
      T(test_directory_halod_cannot_write_in_fails_the_start),
      T(test_lock_without_unnamed_files),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
