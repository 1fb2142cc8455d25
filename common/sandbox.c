// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A read-only Landlock sandbox for the thread that enters it (sandbox.h).
// The kernel ABI's constants and structures are written out here rather
// than taken from <linux/landlock.h>: the build machine's headers may
// predate the kernel that runs halod (Debian 12's know ABI 2), and every
// right the running kernel knows must be handled, or it stays allowed.
#include "common/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/status.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

enum {
  HALO_LANDLOCK_CREATE_RULESET_VERSION = 1,
  HALO_LANDLOCK_RULE_PATH_BENEATH = 1,
};

// File system rights, by the ABI that added them.
#define HALO_LANDLOCK_FS_READ_FILE (1ull << 2)
#define HALO_LANDLOCK_FS_READ_DIR (1ull << 3)
#define HALO_LANDLOCK_FS_ABI1 ((1ull << 13) - 1)  // execute .. make_sym
#define HALO_LANDLOCK_FS_REFER (1ull << 13)       // ABI 2
#define HALO_LANDLOCK_FS_TRUNCATE (1ull << 14)    // ABI 3
#define HALO_LANDLOCK_FS_IOCTL_DEV (1ull << 15)   // ABI 5
// TCP bind and connect (ABI 4).
#define HALO_LANDLOCK_NET_ALL 3ull
// Abstract unix sockets and signals outside the domain (ABI 6).
#define HALO_LANDLOCK_SCOPE_ALL 3ull

struct halo_landlock_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};

struct halo_landlock_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

int halo_sandbox_abi(char *out_reason, size_t reason_size) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
                     HALO_LANDLOCK_CREATE_RULESET_VERSION);
  if (abi > 0) return (int)abi;
  int error = errno;
  snprintf(out_reason, reason_size, "%s",
           error == ENOSYS ? "this kernel has no Landlock (Linux 5.13 and "
                             "later have it), or a seccomp filter refuses "
                             "its calls"
           : error == EOPNOTSUPP
               ? "Landlock is built into this kernel but not enabled "
                 "(add landlock to the lsm= boot parameter)"
               : strerror(error));
  return 0;
}

// The ruleset of |abi|: every right it knows is handled; reading is allowed
// beneath each of |paths| that exists.
static halo_status_t halo_sandbox_ruleset(int abi, const char *const *paths,
                                          size_t count, int *out_fd) {
  struct halo_landlock_ruleset_attr attr = {.handled_access_fs =
                                                HALO_LANDLOCK_FS_ABI1};
  size_t attr_size = sizeof(attr.handled_access_fs);
  if (abi >= 2) attr.handled_access_fs |= HALO_LANDLOCK_FS_REFER;
  if (abi >= 3) attr.handled_access_fs |= HALO_LANDLOCK_FS_TRUNCATE;
  if (abi >= 5) attr.handled_access_fs |= HALO_LANDLOCK_FS_IOCTL_DEV;
  if (abi >= 4) {
    attr.handled_access_net = HALO_LANDLOCK_NET_ALL;
    attr_size = offsetof(struct halo_landlock_ruleset_attr, scoped);
  }
  if (abi >= 6) {
    attr.scoped = HALO_LANDLOCK_SCOPE_ALL;
    attr_size = sizeof(attr);
  }
  int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
  if (ruleset < 0) {
    return halo_status_from_errno(errno, "creating a Landlock ruleset");
  }
  for (size_t i = 0; i < count; ++i) {
    int fd = open(paths[i], O_PATH | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) continue;
    if (fd < 0) {
      int error = errno;
      close(ruleset);
      return halo_status_from_errno(error, "opening %s for the sandbox",
                                    paths[i]);
    }
    // A directory's rule may name directory rights, a file's may not.
    struct stat info;
    bool directory = fstat(fd, &info) == 0 && S_ISDIR(info.st_mode);
    struct halo_landlock_path_beneath_attr rule = {
        .allowed_access = HALO_LANDLOCK_FS_READ_FILE |
                          (directory ? HALO_LANDLOCK_FS_READ_DIR : 0),
        .parent_fd = fd,
    };
    long added = syscall(SYS_landlock_add_rule, ruleset,
                         HALO_LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    int error = errno;
    close(fd);
    if (added != 0) {
      close(ruleset);
      return halo_status_from_errno(error, "allowing %s in the sandbox",
                                    paths[i]);
    }
  }
  *out_fd = ruleset;
  return NULL;
}

halo_status_t halo_sandbox_enter(const char *const *paths, size_t count) {
  char reason[160];
  int abi = halo_sandbox_abi(reason, sizeof(reason));
  if (abi == 0) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "no Landlock sandbox: %s", reason);
  }
  int ruleset = -1;
  HALO_RETURN_IF_ERROR(halo_sandbox_ruleset(abi, paths, count, &ruleset));
  // Both apply to this thread alone (and threads it starts): no_new_privs
  // lets a thread without CAP_SYS_ADMIN restrict itself.
  halo_status_t status = NULL;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    status = halo_status_from_errno(errno, "prctl(PR_SET_NO_NEW_PRIVS)");
  } else if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
    status = halo_status_from_errno(errno, "landlock_restrict_self");
  }
  close(ruleset);
  return status;
}
