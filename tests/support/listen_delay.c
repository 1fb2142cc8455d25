// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// LD_PRELOADed into halod by instance_lock_test: where
// $HALO_TEST_LISTEN_DELAY_MS is set, each listen() on a Unix socket waits
// that long first, so that a socket stays bound but not listening (it
// refuses connects, as a stale one does) for as long as the test likes:
// the moment in which two halods started together could both take the
// socket for stale before the lock.
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/socket.h>
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
