// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-nvrtc's seccomp filter (syscall_filter.h), a classic BPF program
// built at run time: it compares a signal's target with this process's
// pid.
#include "hal/cuda/nvrtc_helper/syscall_filter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/status.h"

#if defined(__x86_64__)
#define HALO_NVRTC_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define HALO_NVRTC_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "halo-nvrtc's system call filter knows x86-64 and arm64"
#endif

// The low 32 bits of a system call's first and second arguments
// (little-endian).
#define HALO_NVRTC_ARG0 offsetof(struct seccomp_data, args[0])
#define HALO_NVRTC_ARG1 offsetof(struct seccomp_data, args[1])
// The first system call number Linux 6.14 does not have (x86-64 and arm64
// share the numbers from 424 on).
#define HALO_NVRTC_FIRST_UNKNOWN 467

#define HALO_NVRTC_MAX_FILTER 160

typedef struct halo_nvrtc_filter_t {
  struct sock_filter code[HALO_NVRTC_MAX_FILTER];
  unsigned short length;
} halo_nvrtc_filter_t;

static void halo_nvrtc_emit(halo_nvrtc_filter_t *filter,
                            struct sock_filter instruction) {
  if (filter->length < HALO_NVRTC_MAX_FILTER) {
    filter->code[filter->length] = instruction;
  }
  ++filter->length;  // past the end: refused at install
}

static void halo_nvrtc_jump(halo_nvrtc_filter_t *filter, uint16_t condition,
                            uint32_t value, uint8_t if_true, uint8_t if_false) {
  halo_nvrtc_emit(
      filter, (struct sock_filter)BPF_JUMP(BPF_JMP | condition | BPF_K, value,
                                           if_true, if_false));
}

static void halo_nvrtc_load(halo_nvrtc_filter_t *filter, uint32_t offset) {
  halo_nvrtc_emit(
      filter, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset));
}

static void halo_nvrtc_return(halo_nvrtc_filter_t *filter, uint32_t value) {
  halo_nvrtc_emit(filter, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, value));
}

// The accumulator holds the system call's number here, and after each
// check.
static void halo_nvrtc_refuse(halo_nvrtc_filter_t *filter, long number,
                              int error) {
  halo_nvrtc_jump(filter, BPF_JEQ, (uint32_t)number, 0, 1);
  halo_nvrtc_return(filter, SECCOMP_RET_ERRNO | error);
}

// |number| with a first argument other than |self| is refused; with it,
// allowed.
static void halo_nvrtc_only_self(halo_nvrtc_filter_t *filter, long number,
                                 pid_t self) {
  halo_nvrtc_jump(filter, BPF_JEQ, (uint32_t)number, 0, 4);
  halo_nvrtc_load(filter, HALO_NVRTC_ARG0);
  halo_nvrtc_jump(filter, BPF_JEQ, (uint32_t)self, 1, 0);
  halo_nvrtc_return(filter, SECCOMP_RET_ERRNO | EPERM);
  halo_nvrtc_return(filter, SECCOMP_RET_ALLOW);
}

// |number| with a first argument of 0 (itself) or |self| is allowed; with
// another, refused.
static void halo_nvrtc_only_self_or_zero(halo_nvrtc_filter_t *filter,
                                         long number, pid_t self) {
  halo_nvrtc_jump(filter, BPF_JEQ, (uint32_t)number, 0, 5);
  halo_nvrtc_load(filter, HALO_NVRTC_ARG0);
  halo_nvrtc_jump(filter, BPF_JEQ, 0, 2, 0);
  halo_nvrtc_jump(filter, BPF_JEQ, (uint32_t)self, 1, 0);
  halo_nvrtc_return(filter, SECCOMP_RET_ERRNO | EPERM);
  halo_nvrtc_return(filter, SECCOMP_RET_ALLOW);
}

halo_status_t halo_nvrtc_syscall_filter_install(void) {
  halo_nvrtc_filter_t filter = {.length = 0};
  pid_t self = getpid();
  // Another architecture's system calls (a 32-bit ABI) end the process.
  halo_nvrtc_load(&filter, offsetof(struct seccomp_data, arch));
  halo_nvrtc_jump(&filter, BPF_JEQ, HALO_NVRTC_AUDIT_ARCH, 1, 0);
  halo_nvrtc_return(&filter, SECCOMP_RET_KILL_PROCESS);
  halo_nvrtc_load(&filter, offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
  // x32's numbers carry this bit.
  halo_nvrtc_jump(&filter, BPF_JGE, 0x40000000u, 0, 1);
  halo_nvrtc_return(&filter, SECCOMP_RET_ERRNO | EPERM);
  halo_nvrtc_refuse(&filter, __NR_fork, EPERM);
  halo_nvrtc_refuse(&filter, __NR_vfork, EPERM);
#endif
  // What no compile needs: system calls of later kernels, whatever they
  // may reach (glibc falls back from ENOSYS where it tries a new one).
  halo_nvrtc_jump(&filter, BPF_JGE, HALO_NVRTC_FIRST_UNKNOWN, 0, 1);
  halo_nvrtc_return(&filter, SECCOMP_RET_ERRNO | ENOSYS);
  static const long refused[] = {
      // Other processes: sockets, io_uring, SysV IPC, POSIX message
      // queues, keyrings.
      __NR_socket,
      __NR_socketpair,
      __NR_io_uring_setup,
      __NR_shmget,
      __NR_shmat,
      __NR_shmctl,
      __NR_msgget,
      __NR_msgsnd,
      __NR_msgrcv,
      __NR_msgctl,
      __NR_semget,
      __NR_semop,
      __NR_semtimedop,
      __NR_semctl,
      __NR_mq_open,
      __NR_mq_unlink,
      __NR_mq_timedsend,
      __NR_mq_timedreceive,
      __NR_mq_notify,
      __NR_mq_getsetattr,
      __NR_add_key,
      __NR_request_key,
      __NR_keyctl,
      // Signals but to itself (below), and other processes' pidfds.
      __NR_tkill,
      __NR_pidfd_open,
      __NR_pidfd_send_signal,
      __NR_pidfd_getfd,
      // New processes and programs, namespaces.
      __NR_execve,
      __NR_execveat,
      __NR_unshare,
      __NR_setns,
      // Other processes' memory and the kernel's own machinery.
      __NR_ptrace,
      __NR_process_vm_readv,
      __NR_process_vm_writev,
      __NR_process_madvise,
      __NR_kcmp,
      __NR_bpf,
      __NR_userfaultfd,
      __NR_perf_event_open,
      __NR_migrate_pages,
      __NR_move_pages,
      // Other processes' scheduling (halod's, another worker's).
      __NR_setpriority,
      __NR_sched_setscheduler,
      __NR_sched_setparam,
      __NR_sched_setattr,
      __NR_ioprio_set,
  };
  for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); ++i) {
    halo_nvrtc_refuse(&filter, refused[i], EPERM);
  }
  halo_nvrtc_refuse(&filter, __NR_clone3, ENOSYS);
  static const long signals[] = {__NR_kill, __NR_tgkill, __NR_rt_sigqueueinfo,
                                 __NR_rt_tgsigqueueinfo};
  for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); ++i) {
    halo_nvrtc_only_self(&filter, signals[i], self);
  }
  // Limits and CPUs: its own only (glibc's getrlimit is prlimit64 of 0).
  halo_nvrtc_only_self_or_zero(&filter, __NR_prlimit64, self);
  halo_nvrtc_only_self_or_zero(&filter, __NR_sched_setaffinity, self);
  // fcntl: no F_SETOWN or F_SETOWN_EX (a descriptor's owner gets its
  // signals, SIGKILL included, with F_SETSIG and O_ASYNC).
  halo_nvrtc_jump(&filter, BPF_JEQ, __NR_fcntl, 0, 5);
  halo_nvrtc_load(&filter, HALO_NVRTC_ARG1);
  halo_nvrtc_jump(&filter, BPF_JEQ, F_SETOWN, 2, 0);
  halo_nvrtc_jump(&filter, BPF_JEQ, F_SETOWN_EX, 1, 0);
  halo_nvrtc_return(&filter, SECCOMP_RET_ALLOW);
  halo_nvrtc_return(&filter, SECCOMP_RET_ERRNO | EPERM);
  // clone: threads only.
  halo_nvrtc_jump(&filter, BPF_JEQ, __NR_clone, 0, 4);
  halo_nvrtc_load(&filter, HALO_NVRTC_ARG0);
  halo_nvrtc_jump(&filter, BPF_JSET, CLONE_THREAD, 1, 0);
  halo_nvrtc_return(&filter, SECCOMP_RET_ERRNO | EPERM);
  halo_nvrtc_return(&filter, SECCOMP_RET_ALLOW);
  halo_nvrtc_return(&filter, SECCOMP_RET_ALLOW);
  if (filter.length > HALO_NVRTC_MAX_FILTER) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "halo-nvrtc's system call filter is %u "
                            "instructions, over its %d",
                            filter.length, HALO_NVRTC_MAX_FILTER);
  }
  struct sock_fprog program = {.len = filter.length, .filter = filter.code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return halo_status_from_errno(errno, "prctl(PR_SET_NO_NEW_PRIVS)");
  }
  // Every thread of the process at once (TSYNC), should there be others.
  long installed = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                           SECCOMP_FILTER_FLAG_TSYNC, &program);
  if (installed > 0) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "halo-nvrtc's system call filter: thread %ld "
                            "could not take it",
                            installed);
  }
  if (installed != 0) {
    int error = errno;
    return halo_status_make(
        error == EINVAL || error == ENOSYS ? HALO_STATUS_FAILED_PRECONDITION
                                           : HALO_STATUS_INTERNAL,
        "halo-nvrtc's system call filter (seccomp): %s", strerror(error));
  }
  return NULL;
}
