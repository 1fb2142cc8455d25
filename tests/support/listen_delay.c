// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// LD_PRELOADed into halod by instance_lock_test: where
// $HALO_TEST_LISTEN_DELAY_MS is set, each listen() on a Unix socket waits
// that long first, so that a socket stays bound but not listening (it
// refuses connects, as a stale one does) for as long as the test likes:
// the moment in which two halods started together could both take the
// socket for stale before the lock. Where $HALO_TEST_NO_TMPFILE is set,
// open() of an unnamed file (O_TMPFILE) fails with EOPNOTSUPP, as on a file
// system without them (overlayfs before Linux 6.6).
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

__attribute__((visibility("default"))) int listen(int fd, int backlog) {
  static int (*next)(int, int);
  if (!next) next = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
  const char *delay = getenv("HALO_TEST_LISTEN_DELAY_MS");
  struct sockaddr_storage address;
  socklen_t length = sizeof(address);
  if (delay && getsockname(fd, (struct sockaddr *)&address, &length) == 0 &&
      address.ss_family == AF_UNIX) {
    long ms = atol(delay);
    struct timespec wait = {.tv_sec = ms / 1000,
                            .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&wait, NULL);
  }
  return next(fd, backlog);
}

// open() and open64() alike (the same function on 64-bit glibc, either
// symbol may be called).
static int open_next(const char *name, const char *path, int flags,
                     mode_t mode) {
  int (*next)(const char *, int, ...) =
      (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, name);
  if ((flags & O_TMPFILE) == O_TMPFILE && getenv("HALO_TEST_NO_TMPFILE")) {
    errno = EOPNOTSUPP;
    return -1;
  }
  return next(path, flags, mode);
}

// The mode argument of an open() with |flags| (read only where there is
// one), then the call: |name| the symbol called.
#define LISTEN_DELAY_OPEN(name, path, flags)                            \
  do {                                                                  \
    va_list arguments;                                                  \
    va_start(arguments, flags);                                         \
    mode_t mode = ((flags)&O_CREAT) || ((flags)&O_TMPFILE) == O_TMPFILE \
                      ? (mode_t)va_arg(arguments, int)                  \
                      : 0;                                              \
    va_end(arguments);                                                  \
    return open_next(name, path, flags, mode);                          \
  } while (0)

__attribute__((visibility("default"))) int open(const char *path, int flags,
                                                ...) {
  LISTEN_DELAY_OPEN("open", path, flags);
}

__attribute__((visibility("default"))) int open64(const char *path, int flags,
                                                  ...) {
  LISTEN_DELAY_OPEN("open64", path, flags);
}
