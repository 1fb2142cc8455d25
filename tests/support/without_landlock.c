// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Runs a command as on a host without Landlock, for the tests of what halo
// does there (halod refuses CUDA C, PTX and the rest still load):
//
//   without_landlock [--disabled] COMMAND [ARGS...]
//
// A seccomp filter, inherited by every process the command starts (halod
// among them), makes landlock_create_ruleset, landlock_add_rule and
// landlock_restrict_self fail with ENOSYS, as on a kernel older than Linux
// 5.13 or under a container runtime's filter that refuses them; with
// --disabled, with EOPNOTSUPP, as where Landlock is built but not in the
// lsm= boot list. Exits 126 when the filter cannot be installed, 127 when
// COMMAND cannot be run.
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

// Landlock's three calls are 444, 445 and 446 on every architecture (the
// numbers added after Linux 5.1 are shared).
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

int main(int argc, char **argv) {
  int first = 1;
  unsigned error = ENOSYS;
  if (argc > 1 && strcmp(argv[1], "--disabled") == 0) {
    error = EOPNOTSUPP;
    first = 2;
  }
  if (first >= argc) {
    fprintf(stderr, "usage: without_landlock [--disabled] COMMAND [ARGS...]\n");
    return 2;
  }
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, SYS_landlock_create_ruleset, 0, 2),
      BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, SYS_landlock_restrict_self, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | error),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {.len = sizeof(filter) / sizeof(filter[0]),
                               .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    fprintf(stderr, "without_landlock: installing the seccomp filter: %s\n",
            strerror(errno));
    return 126;
  }
  // The filter holds (Landlock's version query, flag 1, is refused).
  errno = 0;
  if (syscall(SYS_landlock_create_ruleset, NULL, 0, 1) != -1 ||
      errno != (int)error) {
    fprintf(stderr, "without_landlock: Landlock still answers (%s)\n",
            strerror(errno));
    return 126;
  }
  execvp(argv[first], argv + first);
  fprintf(stderr, "without_landlock: %s: %s\n", argv[first], strerror(errno));
  return 127;
}
