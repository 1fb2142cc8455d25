// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// LD_PRELOADed into halod by worker_start_test: holds back the start of
// halod's device workers (halod --worker ...) as a wedged driver would (a
// CUDA context's creation that does not return): while the file that
// $HALO_TEST_WORKER_GATE names exists, a worker starting waits before it
// does anything; while that file says "fail", the worker exits 3 instead
// (a start that fails); where it says "once", the first worker to read it
// removes it and exits 3 (one start fails, the next goes). halod itself,
// and every other program the variable reaches, is left alone.
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Whether this process's command line has the argument "--worker".
static bool worker_start_gate_is_worker(void) {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[4096];
  ssize_t length = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (length <= 0) return false;
  text[length] = '\0';
  for (ssize_t i = 0; i < length; i += (ssize_t)strlen(text + i) + 1) {
    if (strcmp(text + i, "--worker") == 0) return true;
  }
  return false;
}

__attribute__((constructor)) static void worker_start_gate(void) {
  const char *path = getenv("HALO_TEST_WORKER_GATE");
  if (!path || !worker_start_gate_is_worker()) return;
  for (;;) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;  // open: the worker starts
    char word[8] = {0};
    ssize_t length = read(fd, word, sizeof(word) - 1);
    close(fd);
    if (length >= 4 && memcmp(word, "fail", 4) == 0) _exit(3);
    if (length >= 4 && memcmp(word, "once", 4) == 0 && unlink(path) == 0) {
      _exit(3);
    }
    usleep(10000);
  }
}
