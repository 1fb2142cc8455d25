// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/instance_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/fd_server.h"

// The lock's descriptor: open until the process exits.
static int halod_instance_lock_fd = -1;

enum {
  // Replacements nested: a replacement's own lock file held by readers too
  // (a halod killed within its replacement, and a reader quick to take the
  // file it left).
  kHalodLockMaxDepth = 4,
  // Rounds of one step, each after another halod changed the files.
  kHalodLockMaxRounds = 64,
  kHalodLockPathBytes = 256,
};

typedef enum halod_lock_outcome_t {
  HALOD_LOCK_TAKEN,    // this halod holds it
  HALOD_LOCK_HELD,     // another halod holds it
  HALOD_LOCK_CHANGED,  // the file changed meanwhile: look again
} halod_lock_outcome_t;

// A lock of |type| over the whole of |fd|'s file: 0, or the errno (EAGAIN
// where another lock conflicts).
static int halod_lock_set(int fd, short type) {
  struct flock lock = {.l_type = type, .l_whence = SEEK_SET};
  if (fcntl(fd, F_OFD_SETLK, &lock) == 0) return 0;
  return errno == EACCES ? EAGAIN : errno;
}

// Whether |path| names |fd|'s file.
static bool halod_lock_names(int fd, const char *path) {
  struct stat opened, named;
  return fstat(fd, &opened) == 0 && lstat(path, &named) == 0 &&
         opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
}

// A new lock file of |path| not yet linked there: unnamed (O_TMPFILE), or
// where the file system has no unnamed files (overlayfs before Linux 6.6),
// |path|.new.RANDOM, created exclusively (*|out_named| its name; a name of
// another halod's, in another pid namespace too, is never touched): a
// process that may open it could take a read lock in the moment before
// halod's write lock, and halod then makes another.
static int halod_lock_new_file(const char *directory, const char *path,
                               char *out_named, size_t size) {
  out_named[0] = '\0';
  int fd = open(directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR)) return fd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce)) {
      nonce = (uint64_t)getpid() << 32 | (uint64_t)attempt;
    }
    if (snprintf(out_named, size, "%s.new.%016llx", path,
                 (unsigned long long)nonce) >= (int)size) {
      out_named[0] = '\0';
      errno = ENAMETOOLONG;
      return -1;
    }
    fd = open(out_named, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC,
              0600);
    if (fd >= 0) return fd;
    if (errno != EEXIST) break;
  }
  out_named[0] = '\0';
  return -1;
}

// A new lock file in |directory|, write-locked before anyone can open it,
// linked as |path| unless a file is there (EEXIST: *|out_fd| -1).
static halo_status_t halod_lock_create(const char *directory, const char *path,
                                       int *out_fd) {
  *out_fd = -1;
  char named[kHalodLockPathBytes + 32];
  int fd = halod_lock_new_file(directory, path, named, sizeof(named));
  if (fd < 0) {
    int error = errno;
    return halo_status_from_errno(
        error,
        "cannot create the lock file %s in %s (halod binds its sockets "
        "there: it must be able to write there)",
        path, directory);
  }
  int error = halod_lock_set(fd, F_WRLCK);  // nobody else can reach it
  char self[32];
  snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
  if (!error && named[0] && link(named, path) != 0) {
    error = errno;
  } else if (!error && !named[0] &&
             linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW) != 0) {
    error = errno;
  }
  if (named[0]) unlink(named);        // this halod's own name for it
  if (error == EAGAIN && named[0]) {  // a reader was quicker: once more
    close(fd);
    return NULL;
  }
  if (!error && !halod_lock_names(fd, path)) {  // replaced meanwhile
    close(fd);
    return NULL;
  }
  if (error == EEXIST) {
    close(fd);
    return NULL;
  }
  if (error) {
    close(fd);
    return halo_status_from_errno(error, "cannot create the lock file %s",
                                  path);
  }
  *out_fd = fd;
  return NULL;
}

static halo_status_t halod_lock_take(const char *directory, const char *path,
                                     int depth, int *out_fd);

// The lock file |fd| opened as |path| held by read locks only: no halod
// holds it, and it is replaced by a new one. A read lock of this halod's
// keeps every halod's write lock off it meanwhile; the right to replace it
// is the lock file PATH.INODE, which one halod holds at a time.
static halo_status_t halod_lock_replace(const char *directory, const char *path,
                                        int depth, int fd,
                                        halod_lock_outcome_t *out_outcome,
                                        int *out_fd) {
  *out_outcome = HALOD_LOCK_CHANGED;
  *out_fd = -1;
  int error = halod_lock_set(fd, F_RDLCK);
  if (error) {  // EAGAIN: a write lock came; the next round says whose
    return error == EAGAIN ? NULL
                           : halo_status_from_errno(
                                 error, "lock file %s: a read lock", path);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return halo_status_from_errno(errno, "lock file %s: fstat", path);
  }
  if (depth == kHalodLockMaxDepth) {
    return halo_status_make(
        HALO_STATUS_FAILED_PRECONDITION,
        "lock file %s: read locks of processes that are not halods hold it "
        "and %d of its replacements; remove them (%s and the files beside "
        "it that start so) once no halod runs there",
        path, depth, path);
  }
  char next[kHalodLockPathBytes];
  if (snprintf(next, sizeof(next), "%s.%llu", path,
               (unsigned long long)st.st_ino) >= (int)sizeof(next)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "lock file %s: its path is too long", path);
  }
  int next_fd = -1;
  HALO_RETURN_IF_ERROR(halod_lock_take(directory, next, depth + 1, &next_fd));
  if (next_fd < 0) {  // another halod replaces it
    *out_outcome = HALOD_LOCK_HELD;
    return NULL;
  }
  // Only the holder of |next| renames a file over |path|, and this halod's
  // read lock keeps |fd|'s file free: if |path| still names it, nobody
  // holds what is replaced.
  if (!halod_lock_names(fd, path)) {  // another halod replaced it first
    unlink(next);
    close(next_fd);
    return NULL;
  }
  if (rename(next, path) != 0) {
    halo_status_t status = halo_status_from_errno(
        errno, "lock file %s: renaming %s over it", path, next);
    unlink(next);
    close(next_fd);
    return status;
  }
  *out_outcome = HALOD_LOCK_TAKEN;
  *out_fd = next_fd;
  return NULL;
}

// The lock file that |fd| opened as |path| (closed by this call unless
// taken).
static halo_status_t halod_lock_take_file(const char *directory,
                                          const char *path, int depth, int fd,
                                          halod_lock_outcome_t *out_outcome,
                                          int *out_fd) {
  *out_outcome = HALOD_LOCK_CHANGED;
  *out_fd = -1;
  halo_status_t status = NULL;
  struct stat st;
  int error = fstat(fd, &st) != 0 ? errno : 0;
  if (!error && !S_ISREG(st.st_mode)) error = EINVAL;
  if (!error) error = halod_lock_set(fd, F_WRLCK);
  if (!error) {
    if (halod_lock_names(fd, path)) {  // else: replaced meanwhile
      *out_outcome = HALOD_LOCK_TAKEN;
      *out_fd = fd;
      return NULL;
    }
  } else if (error == EAGAIN) {
    struct flock holder = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_OFD_GETLK, &holder) != 0) {
      status = halo_status_from_errno(errno, "lock file %s: F_OFD_GETLK", path);
    } else if (holder.l_type == F_WRLCK) {
      *out_outcome = HALOD_LOCK_HELD;
    } else if (holder.l_type == F_RDLCK) {
      status =
          halod_lock_replace(directory, path, depth, fd, out_outcome, out_fd);
    }  // F_UNLCK: let go meanwhile
  } else {
    status = halo_status_from_errno(
        error, "lock file %s: %s", path,
        error == EINVAL ? "not a regular file" : "a write lock");
  }
  close(fd);
  return status;
}

// Takes the lock file |path| in |directory|, |depth| replacements down:
// *|out_fd| the write-locked descriptor of the file |path| names, or -1
// where another halod holds it.
static halo_status_t halod_lock_take(const char *directory, const char *path,
                                     int depth, int *out_fd) {
  *out_fd = -1;
  for (int round = 0; round < kHalodLockMaxRounds; ++round) {
    HALO_RETURN_IF_ERROR(halod_lock_create(directory, path, out_fd));
    if (*out_fd >= 0) return NULL;
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) continue;  // replaced meanwhile
    if (fd < 0) {
      int error = errno;
      return halo_status_from_errno(
          error, "cannot open the lock file %s for writing%s", path,
          error == EACCES
              ? " (another user's? remove it if no halod runs there)"
              : "");
    }
    halod_lock_outcome_t outcome;
    HALO_RETURN_IF_ERROR(
        halod_lock_take_file(directory, path, depth, fd, &outcome, out_fd));
    if (outcome != HALOD_LOCK_CHANGED) return NULL;
  }
  return halo_status_make(HALO_STATUS_UNAVAILABLE,
                          "lock file %s: changed under this halod %d times "
                          "in a row; try again",
                          path, kHalodLockMaxRounds);
}

halo_status_t halod_instance_lock_take(const char *listen,
                                       const char *fd_channel_path) {
  if (halod_instance_lock_fd >= 0) return NULL;
  const char *socket_path = listen + strlen("ipc://");
  char path[kHalodLockPathBytes];
  char directory[kHalodLockPathBytes];
  if (snprintf(path, sizeof(path), "%s.lock", socket_path) >=
      (int)sizeof(path)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the lock file of %s: its path is too long",
                            listen);
  }
  const char *slash = strrchr(socket_path, '/');
  if (!slash) {
    strcpy(directory, ".");
  } else {
    int length = slash == socket_path ? 1 : (int)(slash - socket_path);
    snprintf(directory, sizeof(directory), "%.*s", length, socket_path);
  }
  int fd = -1;
  HALO_RETURN_IF_ERROR(halod_lock_take(directory, path, 0, &fd));
  if (fd >= 0) {
    halod_instance_lock_fd = fd;
    return NULL;
  }
  // Another halod holds it: its pid where its fd channel answers.
  bool stale = false;
  halo_status_t serving =
      halod_fd_server_check_free(fd_channel_path, listen, &stale);
  if (halo_status_code(serving) == HALO_STATUS_FAILED_PRECONDITION) {
    halo_status_t status = halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                                            "%s (it holds the lock file %s)",
                                            halo_status_message(serving), path);
    halo_status_free(serving);
    return status;
  }
  halo_status_free(serving);
  return halo_status_make(
      HALO_STATUS_FAILED_PRECONDITION,
      "another halod holds the lock file %s of %s (it is starting or "
      "stopping: its fd channel %s does not answer): stop it first, or give "
      "this one another --listen",
      path, listen, fd_channel_path);
}
