// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/instance_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

halo_status_t halod_instance_lock(const char *address) {
  const char *path = address;
  if (strncmp(path, "ipc://", strlen("ipc://")) == 0) {
    path += strlen("ipc://");
  }
  char lock_path[PATH_MAX];
  if ((size_t)snprintf(lock_path, sizeof(lock_path), "%s.lock", path) >=
      sizeof(lock_path)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the lock file path of %s is too long", address);
  }
  int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return halo_status_from_errno(errno, "opening the lock file %s", lock_path);
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    char text[32] = {0};
    ssize_t length = pread(fd, text, sizeof(text) - 1, 0);
    close(fd);
    if (error != EWOULDBLOCK) {
      return halo_status_from_errno(error, "locking %s", lock_path);
    }
    long pid = length > 0 ? strtol(text, NULL, 10) : 0;
    char who[48] = "another halod";
    if (pid > 0) snprintf(who, sizeof(who), "another halod (pid %ld)", pid);
    return halo_status_make(
        HALO_STATUS_FAILED_PRECONDITION,
        "%s serves %s already (it holds %s): stop it first, or give this "
        "one another --listen",
        who, address, lock_path);
  }
  char text[32];
  int length = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)length, 0) != length) {
    // The lock holds all the same; only the message of a second halod
    // would miss the pid.
  }
  return NULL;  // |fd| stays open: the lock lives as long as the process
}
