// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// memfd helpers: sealed anonymous shared memory, the only kind halo uses
// (no names in /dev/shm, no fchown).
#ifndef HALO_COMMON_MEMFD_H_
#define HALO_COMMON_MEMFD_H_

#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

// Seals of memory the client may write (arenas, rings): the size is fixed so
// nobody can truncate a mapping under the daemon (SIGBUS).
#define HALO_SEALS_FIXED_SIZE (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
// Seals of daemon-owned pages (semaphores): additionally no new writable
// mapping can be made, so clients can map them read-only only.
#define HALO_SEALS_DAEMON_OWNED \
  (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL)

// Creates a memfd of |size| bytes (close-on-exec, sealing allowed).
halo_status_t halo_memfd_create(const char *name, uint64_t size, int *out_fd);

// Adds |seals| (F_ADD_SEALS).
halo_status_t halo_memfd_seal(int fd, int seals);

// FAILED_PRECONDITION unless every seal of |required| is set on |fd|.
halo_status_t halo_memfd_check_seals(int fd, int required);

// Size of the file behind |fd| (fstat).
halo_status_t halo_memfd_size(int fd, uint64_t *out_size);

// mmap(MAP_SHARED) of |size| bytes with |prot|.
halo_status_t halo_memfd_map(int fd, uint64_t size, int prot, void **out_ptr);

#endif  // HALO_COMMON_MEMFD_H_
