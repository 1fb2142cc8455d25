// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/status.h"

halo_status_t halo_memfd_create(const char *name, uint64_t size, int *out_fd) {
  *out_fd = -1;
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 && errno == EMFILE) {
    return halo_status_from_errno(
        errno,
        "memfd_create(%s): the process's open-file limit reached "
        "(RLIMIT_NOFILE: LimitNOFILE=; see connections, uid-fds and "
        "fd-reserve)",
        name);
  }
  if (fd < 0 && errno == ENFILE) {
    return halo_status_from_errno(
        errno, "memfd_create(%s): the system's open-file limit reached (%s)",
        name, "fs.file-max");
  }
  if (fd < 0) return halo_status_from_errno(errno, "memfd_create(%s)", name);
  if (ftruncate(fd, (off_t)size) != 0) {
    int error_number = errno;
    close(fd);
    if (error_number == EFBIG) {
      // Past RLIMIT_FSIZE (the process ignores SIGXFSZ, or it would end).
      return halo_status_from_errno(
          error_number,
          "ftruncate(%s, %llu): past the process's file size limit "
          "(RLIMIT_FSIZE: ulimit -f, systemd's LimitFSIZE=)",
          name, (unsigned long long)size);
    }
    return halo_status_from_errno(error_number, "ftruncate(%s, %llu)", name,
                                  (unsigned long long)size);
  }
  *out_fd = fd;
  return NULL;
}

halo_status_t halo_memfd_seal(int fd, int seals) {
  if (fcntl(fd, F_ADD_SEALS, seals) != 0) {
    return halo_status_from_errno(errno, "F_ADD_SEALS 0x%x", seals);
  }
  return NULL;
}

halo_status_t halo_memfd_check_seals(int fd, int required) {
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) return halo_status_from_errno(errno, "F_GET_SEALS");
  if ((seals & required) != required) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "memfd seals 0x%x lack required 0x%x", seals,
                            required & ~seals);
  }
  return NULL;
}

halo_status_t halo_memfd_size(int fd, uint64_t *out_size) {
  *out_size = 0;
  struct stat st;
  if (fstat(fd, &st) != 0) return halo_status_from_errno(errno, "fstat");
  *out_size = (uint64_t)st.st_size;
  return NULL;
}

halo_status_t halo_memfd_map(int fd, uint64_t size, int prot, void **out_ptr) {
  *out_ptr = NULL;
  void *ptr = mmap(NULL, (size_t)size, prot, MAP_SHARED, fd, 0);
  if (ptr == MAP_FAILED) {
    return halo_status_from_errno(errno, "mmap of %llu bytes",
                                  (unsigned long long)size);
  }
  *out_ptr = ptr;
  return NULL;
}
