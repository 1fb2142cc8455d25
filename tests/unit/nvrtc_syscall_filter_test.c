// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-nvrtc's system call filter (hal/cuda/nvrtc_helper/syscall_filter.h)
// against the real kernel, in a child process that installs it: sockets,
// io_uring, signals to another process, new processes, execve and ptrace
// are refused (fcntl's F_SETOWN, SysV IPC, keyrings, unshare, other
// processes' memory, bpf, userfaultfd and unknown calls too); signals to
// itself, threads and ordinary calls go on.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/status.h"
#include "hal/cuda/nvrtc_helper/syscall_filter.h"

static volatile sig_atomic_t got_signal;

static void on_signal(int signal_number) {
  (void)signal_number;
  got_signal = 1;
}

static void *thread_main(void *arg) {
  return arg;
}

// -1 with errno |error|, else false.
static bool refused(long result, int error) {
  return result == -1 && errno == error;
}

// The checks, in the filtered child: 0 when all hold, else the number of
// the first that did not.
static int child_checks(pid_t parent) {
  halo_status_t status = halo_nvrtc_syscall_filter_install();
  if (status) {
    fprintf(stderr, "%s\n", halo_status_message(status));
    return 1;
  }
  if (!refused(socket(AF_UNIX, SOCK_STREAM, 0), EPERM)) return 2;
  if (!refused(socket(AF_INET, SOCK_DGRAM, 0), EPERM)) return 3;
  int pair[2];
  if (!refused(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), EPERM)) return 4;
  if (!refused(kill(parent, 0), EPERM)) return 5;
  if (!refused(kill(0, 0), EPERM)) return 6;  // the process group
  if (!refused(syscall(SYS_tgkill, parent, parent, 0), EPERM)) return 7;
  if (!refused(fork(), EPERM)) return 8;
  // A path that is not there: ENOENT where execve is allowed.
  char *const argv[] = {"halo-test", NULL};
  if (!refused(execv("/nonexistent/halo-test", argv), EPERM)) return 9;
  if (!refused(ptrace(PTRACE_TRACEME, 0, NULL, NULL), EPERM)) return 10;
  if (!refused(syscall(SYS_io_uring_setup, 1, NULL), EPERM)) return 11;
  if (!refused(syscall(SYS_clone3, NULL, 0), ENOSYS)) return 12;
  if (!refused(syscall(SYS_pidfd_open, parent, 0), EPERM)) return 13;
  // A descriptor's owner gets its signals (F_SETSIG, O_ASYNC): no owner.
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return 20;
  if (!refused(fcntl(pipe_fds[0], F_SETOWN, parent), EPERM)) return 21;
  struct f_owner_ex owner = {.type = F_OWNER_PID, .pid = parent};
  if (!refused(fcntl(pipe_fds[0], F_SETOWN_EX, &owner), EPERM)) return 22;
  if (fcntl(pipe_fds[0], F_GETFL) < 0) return 23;  // other commands go on
  if (!refused(syscall(SYS_shmget, IPC_PRIVATE, 4096, IPC_CREAT | 0600),
               EPERM)) {
    return 24;
  }
  if (!refused(syscall(SYS_msgget, IPC_PRIVATE, IPC_CREAT | 0600), EPERM)) {
    return 25;
  }
  if (!refused(syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0),
               EPERM)) {
    return 26;
  }
  if (!refused(unshare(0), EPERM)) return 27;  // 0: allowed unfiltered
  siginfo_t info;
  memset(&info, 0, sizeof(info));
  info.si_code = SI_QUEUE;
  if (!refused(syscall(SYS_rt_sigqueueinfo, parent, SIGUSR1, &info), EPERM)) {
    return 28;
  }
  if (!refused(syscall(SYS_tkill, parent, 0), EPERM)) return 29;
  if (!refused(syscall(SYS_execveat, AT_FDCWD, "/nonexistent/halo-test", argv,
                       NULL, 0),
               EPERM)) {
    return 30;
  }
  // Its own memory: allowed unfiltered, whatever Yama says.
  char byte = 0, copy = 0;
  struct iovec local = {&copy, 1}, remote = {&byte, 1};
  if (!refused(
          syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0),
          EPERM)) {
    return 31;
  }
  if (!refused(syscall(SYS_bpf, 0, NULL, 0), EPERM)) return 32;
  // Flags it rejects (EINVAL) where it is allowed, even unprivileged.
  if (!refused(syscall(SYS_userfaultfd, 1 | 2), EPERM)) return 33;
  // A system call number past those it knows: on Linux 6.15 and later 467
  // is open_tree_attr, which answers EBADF to a descriptor of -1.
  if (!refused(syscall(467, -1, NULL, 0, NULL, 0), ENOSYS)) return 34;
  // Those below go on: close_range (436) of nothing.
  if (syscall(SYS_close_range, 1000, 1000, 0) != 0) return 35;
  // Another process's limits and CPUs, not its own.
  struct rlimit limit;
  if (!refused(syscall(SYS_prlimit64, parent, RLIMIT_NOFILE, NULL, &limit),
               EPERM)) {
    return 36;
  }
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 37;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return 38;
  if (!refused(sched_setaffinity(parent, sizeof(cpus), &cpus), EPERM)) {
    return 39;
  }
  if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0) return 40;
  if (!refused(setpriority(PRIO_PROCESS, (id_t)parent, 19), EPERM)) return 41;
  // What goes on: a signal to itself, a thread, an ordinary call.
  signal(SIGUSR1, on_signal);
  if (kill(getpid(), SIGUSR1) != 0 || !got_signal) return 14;
  got_signal = 0;
  if (raise(SIGUSR1) != 0 || !got_signal) return 15;
  pthread_t thread;
  static int token;
  void *result = NULL;
  if (pthread_create(&thread, NULL, thread_main, &token) != 0 ||
      pthread_join(thread, &result) != 0 || result != &token) {
    return 16;
  }
  if (getppid() != parent) return 17;
  return 0;
}

static void test_filter_refuses_what_it_lists(void **state) {
  (void)state;
  pid_t parent = getpid();
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) _exit(child_checks(parent));
  int wstatus = 0;
  assert_int_equal(waitpid(child, &wstatus, 0), child);
  assert_true(WIFEXITED(wstatus));
  print_message("the filtered child exited with %d\n", WEXITSTATUS(wstatus));
  assert_int_equal(WEXITSTATUS(wstatus), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_filter_refuses_what_it_lists),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
