// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// daemon/instance_lock.c under contention: processes take the lock over and
// over, each holding it for a moment and exiting, while readers read-lock
// each lock file they can open (waiting for each holder's end, as a root
// client of a read-only mount could): never do two processes hold it at
// once, every attempt either takes it or finds it held, and nothing of a
// replacement is left behind.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/fd_server.h"
#include "daemon/instance_lock.h"

// The probe naming the holder is fd_server.c's; none serves here.
halo_status_t halod_fd_server_check_free(const char *path, const char *listen,
                                         bool *out_stale) {
  (void)path;
  (void)listen;
  *out_stale = false;
  return NULL;
}

enum {
  kContenders = 6,
  kReaders = 2,
  kRunMs = 3000,
  kExitTaken = 0,
  kExitHeld = 1,
  kExitError = 2,
  kExitTwoHolders = 3,
};

static int64_t race_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void race_sleep_us(long us) {
  struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};
  nanosleep(&ts, NULL);
}

// One attempt, in a process of its own: the lock is the process's.
static int race_attempt(const char *listen, const char *fd_channel,
                        const char *marker) {
  halo_status_t status = halod_instance_lock_take(listen, fd_channel);
  if (status) {
    bool held = halo_status_code(status) == HALO_STATUS_FAILED_PRECONDITION;
    if (!held) fprintf(stderr, "%s\n", halo_status_message(status));
    halo_status_free(status);
    return held ? kExitHeld : kExitError;
  }
  int fd = open(marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return kExitTwoHolders;
  close(fd);
  race_sleep_us(rand() % 2000);
  unlink(marker);
  return kExitTaken;  // exiting lets go of the lock
}

// A reader: read-locks whatever file |path| names, waiting for its holder,
// holds it a moment (sometimes keeps it), and goes again, until killed.
static void race_reader(const char *path) {
  int kept = 0;  // descriptors left open, their read locks held
  for (;;) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      race_sleep_us(100);
      continue;
    }
    struct flock lock = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_OFD_SETLKW, &lock) == 0 && rand() % 2) {
      race_sleep_us(rand() % 3000);  // else let go at once
    }
    if (rand() % 4 == 0 && kept < 64) {
      ++kept;
    } else {
      close(fd);
    }
  }
}

static void test_one_holder_at_a_time_under_readers(void **state) {
  (void)state;
  char dir[] = "/tmp/halo-lock-race-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char listen[128], fd_channel[128], lock_path[128], marker[128];
  snprintf(listen, sizeof(listen), "ipc://%s/h.sock", dir);
  snprintf(fd_channel, sizeof(fd_channel), "%s/h.sock.fd", dir);
  snprintf(lock_path, sizeof(lock_path), "%s/h.sock.lock", dir);
  snprintf(marker, sizeof(marker), "%s/holder", dir);
  pid_t readers[kReaders];
  for (int i = 0; i < kReaders; ++i) {
    readers[i] = fork();
    assert_true(readers[i] >= 0);
    if (readers[i] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      srand((unsigned)getpid());
      race_reader(lock_path);
    }
  }
  pid_t running[kContenders] = {0};
  int counts[4] = {0};
  int64_t end = race_now_ms() + kRunMs;
  for (;;) {
    bool any = false;
    for (int i = 0; i < kContenders; ++i) {
      int status;
      if (running[i] && waitpid(running[i], &status, WNOHANG) == running[i]) {
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitError;
        ++counts[code <= kExitTwoHolders ? code : kExitError];
        running[i] = 0;
      }
      if (!running[i] && race_now_ms() < end) {
        running[i] = fork();
        assert_true(running[i] >= 0);
        if (running[i] == 0) {
          srand((unsigned)getpid());
          _exit(race_attempt(listen, fd_channel, marker));
        }
      }
      any = any || running[i];
    }
    if (!any) break;
    race_sleep_us(200);
  }
  for (int i = 0; i < kReaders; ++i) {
    kill(readers[i], SIGKILL);
    waitpid(readers[i], NULL, 0);
  }
  print_message("taken %d, held %d, errors %d, two holders %d\n",
                counts[kExitTaken], counts[kExitHeld], counts[kExitError],
                counts[kExitTwoHolders]);
  assert_int_equal(counts[kExitTwoHolders], 0);
  assert_int_equal(counts[kExitError], 0);
  assert_true(counts[kExitTaken] > 0);
  // One lock file; no replacement left.
  DIR *listing = opendir(dir);
  assert_non_null(listing);
  int lock_files = 0;
  for (struct dirent *entry; (entry = readdir(listing));) {
    if (strncmp(entry->d_name, "h.sock.lock", strlen("h.sock.lock")) == 0) {
      ++lock_files;
    }
  }
  closedir(listing);
  assert_int_equal(lock_files, 1);
  char command[128];
  snprintf(command, sizeof(command), "rm -rf '%s'", dir);
  assert_int_equal(system(command), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_holder_at_a_time_under_readers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
