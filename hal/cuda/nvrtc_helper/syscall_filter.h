// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The system calls halo-nvrtc gives up before NVRTC sees a source: a
// seccomp filter for what Landlock leaves open to a compiler that a source
// took over. Landlock keeps it from reading, writing or executing files
// and (from Linux 6.7) from TCP; it does not keep it from a named unix
// socket (halod's admin socket, whose group halod's user is in), from UDP,
// or before Linux 6.12 from signalling halod or another domain's worker,
// which run as the same user. So the filter refuses, with EPERM:
//   - sockets (socket, socketpair), io_uring (whose operations seccomp does
//     not see), SysV IPC, POSIX message queues and keyrings;
//   - signals to any process but itself (kill, tgkill, rt_sigqueueinfo,
//     rt_tgsigqueueinfo with another pid; tkill; pidfd_open,
//     pidfd_send_signal, pidfd_getfd; fcntl's F_SETOWN and F_SETOWN_EX,
//     whose owner gets a descriptor's signals);
//   - new processes (fork, vfork, clone without CLONE_THREAD; clone3, which
//     gets ENOSYS so that threads are made with clone), execve, unshare and
//     setns;
//   - ptrace, process_vm_readv/writev, process_madvise, kcmp, bpf,
//     userfaultfd, perf_event_open, migrate_pages and move_pages;
//   - another process's limits, CPUs or scheduling (prlimit64 and
//     sched_setaffinity but of itself; setpriority, sched_setscheduler,
//     sched_setparam, sched_setattr, ioprio_set);
//   - with ENOSYS, the system calls of kernels newer than it knows.
// Everything else is allowed: NVRTC's own system calls are not listed
// anywhere to allow them by. A system call of another ABI ends the process
// (int 0x80) or is refused (x32). Under a sanitizer, a report's symbols
// are lost (its symbolizer is a new process).
#ifndef HALO_HAL_CUDA_NVRTC_HELPER_SYSCALL_FILTER_H_
#define HALO_HAL_CUDA_NVRTC_HELPER_SYSCALL_FILTER_H_

#include "halo/status.h"

// Installs the filter on the calling thread, and the threads it starts
// from then on (sets no_new_privs). FAILED_PRECONDITION where the kernel
// takes no seccomp filter.
halo_status_t halo_nvrtc_syscall_filter_install(void);

#endif  // HALO_HAL_CUDA_NVRTC_HELPER_SYSCALL_FILTER_H_
