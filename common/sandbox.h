// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A read-only sandbox: a thread that enters it (and every thread it starts
// from then on) may, by Landlock (Linux 5.13 and later), read only beneath
// the paths it was given, and write, create, remove or execute nothing on
// the file system; where the kernel's Landlock is new enough, also connect
// or bind no TCP port (ABI 4, Linux 6.7) and signal no process and reach no
// abstract unix socket outside it (ABI 6, Linux 6.12). UDP and named unix
// sockets stay open. The process's other threads keep their access. What
// it does not cover: files the process already has open on Landlock's
// internal mounts (memfds, pipes), which stay reachable as /proc/self/fd/N.
//
// halod compiles a client's CUDA C source this way, in a process of its
// own (halo-nvrtc, which enters before it starts any thread and holds no
// descriptor but its request, its reply and its standard error): NVRTC
// opens whatever an #include names, so without it a tenant could read any
// file halod's user can read (another tenant's cached code, a service
// account's token) into a compile error's log.
#ifndef HALO_COMMON_SANDBOX_H_
#define HALO_COMMON_SANDBOX_H_

#include <stddef.h>

#include "halo/status.h"

// The newest Landlock ABI whose rights this code knows (7, Linux 6.15):
// rights a newer kernel adds are not taken from the sandbox.
#define HALO_SANDBOX_KNOWN_ABI 7

// Restricts the calling thread, and the threads it starts from then on, to
// reading the files beneath the |count| |paths| (a directory's whole tree,
// or one file); a path that does not exist is skipped. FAILED_PRECONDITION,
// naming why, where the kernel has no Landlock (too old, not enabled at
// boot, or a seccomp filter refuses it); other errors name what failed (a
// path that cannot be opened). Where it fails the thread's file access is
// as it was (no_new_privs may have been set).
halo_status_t halo_sandbox_enter(const char *const *paths, size_t count);

// The Landlock ABI version this kernel offers; 0 (none) fills |out_reason|
// with why.
int halo_sandbox_abi(char *out_reason, size_t reason_size);

#endif  // HALO_COMMON_SANDBOX_H_
