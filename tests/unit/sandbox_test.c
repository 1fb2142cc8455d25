// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The read-only sandbox (common/sandbox.h), against the real kernel: a
// thread that entered it reads beneath the paths it was given and nothing
// else; writes, creates, truncates and removes nothing; connects to no TCP
// port and signals no process outside it (where the kernel's Landlock has
// those rights); the rest of the process keeps its access. On a kernel
// without Landlock (unit.sandbox_without_landlock_test and
// unit.sandbox_landlock_disabled_test run it so, under the seccomp filter
// of tests/support/without_landlock.c) entering fails and says why, and
// nothing runs inside.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "common/sandbox.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/status.h"
#include "tests/support/landlock_refusal.h"

typedef struct tree_t {
  char root[64];
  char allowed[96];     // a directory the sandbox may read
  char allowed_h[128];  // allowed/a.h
  char nested_h[160];   // allowed/sub/b.h
  char truncated[128];  // allowed/t.h, for truncate(2)
  char one[96];         // a file the sandbox may read, outside allowed/
  char secret[96];      // a file it may not
} tree_t;

static void write_file(const char *path, const char *text) {
  FILE *file = fopen(path, "w");
  assert_non_null(file);
  assert_int_equal(fputs(text, file) >= 0, 1);
  assert_int_equal(fclose(file), 0);
}

static void tree_make(tree_t *tree) {
  snprintf(tree->root, sizeof(tree->root), "/tmp/halo-sandbox-XXXXXX");
  assert_non_null(mkdtemp(tree->root));
  snprintf(tree->allowed, sizeof(tree->allowed), "%s/allowed", tree->root);
  assert_int_equal(mkdir(tree->allowed, 0700), 0);
  char sub[128];
  snprintf(sub, sizeof(sub), "%s/sub", tree->allowed);
  assert_int_equal(mkdir(sub, 0700), 0);
  snprintf(tree->allowed_h, sizeof(tree->allowed_h), "%s/a.h", tree->allowed);
  snprintf(tree->nested_h, sizeof(tree->nested_h), "%s/b.h", sub);
  snprintf(tree->truncated, sizeof(tree->truncated), "%s/t.h", tree->allowed);
  snprintf(tree->one, sizeof(tree->one), "%s/one.txt", tree->root);
  snprintf(tree->secret, sizeof(tree->secret), "%s/secret.txt", tree->root);
  write_file(tree->allowed_h, "allowed");
  write_file(tree->nested_h, "nested");
  write_file(tree->truncated, "truncated");
  write_file(tree->one, "one");
  write_file(tree->secret, "secret");
}

static void tree_remove(const tree_t *tree) {
  char command[160];
  snprintf(command, sizeof(command), "rm -rf %s", tree->root);
  assert_int_equal(system(command), 0);
}

// 0 where |path| opens with |flags| (and reads |expect| where set), else
// the errno.
static int try_open(const char *path, int flags, const char *expect) {
  int fd = open(path, flags | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  int result = 0;
  if (expect) {
    char text[32] = {0};
    ssize_t got = read(fd, text, sizeof(text) - 1);
    result = got >= 0 && strcmp(text, expect) == 0 ? 0 : -1;
  }
  close(fd);
  return result;
}

// What the sandboxed call saw: 0 or an errno each.
typedef struct seen_t {
  const tree_t *tree;
  uint16_t port;  // a TCP port listening on 127.0.0.1 (0: none)
  bool ran;
  int read_allowed, read_nested, list_allowed, read_one;
  int read_secret, list_root, write_allowed, create_in_allowed;
  int remove_in_allowed, connect_tcp;
  int truncate_allowed;  // truncate(2): its own right from ABI 3
  pid_t outsider;        // a process outside the sandbox (0: none)
  int signal_outsider;   // kill(outsider, 0): scoped from ABI 6
} seen_t;

static int try_connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  struct sockaddr_in address = {.sin_family = AF_INET,
                                .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int result = connect(fd, (struct sockaddr *)&address, sizeof(address)) == 0
                   ? 0
                   : errno;
  close(fd);
  return result;
}

static void look(void *arg) {
  seen_t *seen = arg;
  const tree_t *tree = seen->tree;
  seen->ran = true;
  seen->read_allowed = try_open(tree->allowed_h, O_RDONLY, "allowed");
  seen->read_nested = try_open(tree->nested_h, O_RDONLY, "nested");
  seen->list_allowed = try_open(tree->allowed, O_RDONLY | O_DIRECTORY, NULL);
  seen->read_one = try_open(tree->one, O_RDONLY, "one");
  seen->read_secret = try_open(tree->secret, O_RDONLY, NULL);
  seen->list_root = try_open(tree->root, O_RDONLY | O_DIRECTORY, NULL);
  seen->write_allowed = try_open(tree->allowed_h, O_WRONLY, NULL);
  char path[160];
  snprintf(path, sizeof(path), "%s/new.h", tree->allowed);
  seen->create_in_allowed = try_open(path, O_WRONLY | O_CREAT, NULL);
  seen->remove_in_allowed = unlink(tree->nested_h) == 0 ? 0 : errno;
  if (seen->port) seen->connect_tcp = try_connect(seen->port);
  seen->truncate_allowed = truncate(tree->truncated, 1) == 0 ? 0 : errno;
  if (seen->outsider > 0) {
    seen->signal_outsider = kill(seen->outsider, 0) == 0 ? 0 : errno;
  }
}

// Runs |fn|(|arg|) on a thread of its own that enters the sandbox of
// |paths| first (not at all where entering fails: that status).
typedef struct sandboxed_call_t {
  const char *const *paths;
  size_t count;
  void (*fn)(void *arg);
  void *arg;
  halo_status_t status;
} sandboxed_call_t;

static void *sandboxed_main(void *arg) {
  sandboxed_call_t *call = arg;
  call->status = halo_sandbox_enter(call->paths, call->count);
  if (!call->status) call->fn(call->arg);
  return NULL;
}

static halo_status_t run_sandboxed(const char *const *paths, size_t count,
                                   void (*fn)(void *arg), void *arg) {
  sandboxed_call_t call = {paths, count, fn, arg, NULL};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, sandboxed_main, &call), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);
  return call.status;
}

// A TCP socket listening on 127.0.0.1; its port in |out_port|.
static int listen_tcp(uint16_t *out_port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in address = {.sin_family = AF_INET,
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(fd, (struct sockaddr *)&address, sizeof(address)), 0);
  assert_int_equal(listen(fd, 4), 0);
  socklen_t size = sizeof(address);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&address, &size), 0);
  *out_port = ntohs(address.sin_port);
  return fd;
}

static void test_reads_only_beneath_its_paths(void **state) {
  (void)state;
  tree_t tree;
  tree_make(&tree);
  char missing[128];
  snprintf(missing, sizeof(missing), "%s/missing", tree.root);
  const char *paths[] = {tree.allowed, tree.one, missing};
  seen_t seen = {.tree = &tree};
  char reason[160];
  int abi = halo_sandbox_abi(reason, sizeof(reason));
  int listener = -1;
  if (abi >= 4) listener = listen_tcp(&seen.port);
  // A child of the test's, outside the sandbox, for the signal scope.
  pid_t outsider = fork();
  assert_true(outsider >= 0);
  if (outsider == 0) {
    pause();
    _exit(0);
  }
  seen.outsider = outsider;
  halo_status_t status = run_sandboxed(paths, 3, look, &seen);
  kill(outsider, SIGKILL);
  assert_int_equal(waitpid(outsider, NULL, 0), outsider);
  if (abi == 0) {
    // A kernel without Landlock: nothing ran, and the error says why.
    halo_test_expect_landlock_refusal(status, reason);
    assert_false(seen.ran);
    tree_remove(&tree);
    return;
  }
  print_message("Landlock ABI %d\n", abi);
  assert_null(status);
  assert_true(seen.ran);
  assert_int_equal(seen.read_allowed, 0);
  assert_int_equal(seen.read_nested, 0);
  assert_int_equal(seen.list_allowed, 0);
  assert_int_equal(seen.read_one, 0);
  assert_int_equal(seen.read_secret, EACCES);
  assert_int_equal(seen.list_root, EACCES);
  assert_int_equal(seen.write_allowed, EACCES);
  assert_int_equal(seen.create_in_allowed, EACCES);
  assert_int_equal(seen.remove_in_allowed, EACCES);
  if (abi >= 3) assert_int_equal(seen.truncate_allowed, EACCES);
  if (abi >= 4) assert_int_equal(seen.connect_tcp, EACCES);
  if (abi >= 6) assert_int_equal(seen.signal_outsider, EPERM);
  // The test's own thread kept its access.
  assert_int_equal(try_open(tree.secret, O_RDONLY, "secret"), 0);
  assert_int_equal(try_open(tree.allowed_h, O_WRONLY, NULL), 0);
  if (listener >= 0) {
    assert_int_equal(try_connect(seen.port), 0);
    close(listener);
  }
  // A second call in the same process is sandboxed the same (the first
  // call's thread took its restriction with it).
  seen_t again = {.tree = &tree};
  assert_null(run_sandboxed(paths, 2, look, &again));
  assert_int_equal(again.read_allowed, 0);
  assert_int_equal(again.read_secret, EACCES);
  tree_remove(&tree);
}

// What a thread started after halo_sandbox_enter saw (0 or an errno).
static void *look_from_thread(void *arg) {
  const tree_t *tree = arg;
  return (void *)(intptr_t)try_open(tree->secret, O_RDONLY, NULL);
}

// halo_sandbox_enter restricts the thread that calls it, here a child
// process's only thread (as halo-nvrtc enters), and the threads it starts
// after: after it, the child reads beneath its paths and nothing else.
static void test_a_process_enters_whole(void **state) {
  (void)state;
  char reason[160];
  if (halo_sandbox_abi(reason, sizeof(reason)) == 0) {
    halo_test_expect_landlock_refusal(halo_sandbox_enter(NULL, 0), reason);
    return;
  }
  tree_t tree;
  tree_make(&tree);
  const char *paths[] = {tree.allowed};
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    halo_status_t status = halo_sandbox_enter(paths, 1);
    if (status) _exit(1);
    if (try_open(tree.allowed_h, O_RDONLY, "allowed") != 0) _exit(2);
    if (try_open(tree.secret, O_RDONLY, NULL) != EACCES) _exit(3);
    if (try_open(tree.allowed_h, O_WRONLY, NULL) != EACCES) _exit(4);
    pthread_t thread;
    void *seen = NULL;
    if (pthread_create(&thread, NULL, look_from_thread, &tree) != 0 ||
        pthread_join(thread, &seen) != 0) {
      _exit(5);
    }
    if ((intptr_t)seen != EACCES) _exit(6);
    _exit(0);
  }
  int wstatus = 0;
  assert_int_equal(waitpid(child, &wstatus, 0), child);
  assert_true(WIFEXITED(wstatus));
  assert_int_equal(WEXITSTATUS(wstatus), 0);
  tree_remove(&tree);
}

// A path that exists but cannot be opened is an error naming it, and
// nothing runs.
static void test_unopenable_path_is_named(void **state) {
  (void)state;
  char reason[160];
  if (halo_sandbox_abi(reason, sizeof(reason)) == 0) {
    print_message("no Landlock here: %s\n", reason);
    skip();
  }
  tree_t tree;
  tree_make(&tree);
  char below_file[128];
  snprintf(below_file, sizeof(below_file), "%s/below", tree.one);
  const char *paths[] = {below_file};
  seen_t seen = {.tree = &tree};
  halo_status_t status = run_sandboxed(paths, 1, look, &seen);
  assert_non_null(status);
  print_message("%s\n", halo_status_message(status));
  assert_non_null(strstr(halo_status_message(status), below_file));
  assert_non_null(strstr(halo_status_message(status), strerror(ENOTDIR)));
  assert_false(seen.ran);
  halo_status_free(status);
  tree_remove(&tree);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reads_only_beneath_its_paths),
      cmocka_unit_test(test_a_process_enters_whole),
      cmocka_unit_test(test_unopenable_path_is_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
