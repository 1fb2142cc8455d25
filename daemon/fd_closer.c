// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/fd_closer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/status.h"
#include "common/u64_map.h"

struct halod_fd_closer_t {
  pthread_mutex_t mutex;
  halo_u64_map_t pending;  // uid -> closes not returned (as uintptr_t)
  // halod's, each fd channel connection's and each close's under way: the
  // last frees.
  _Atomic uint32_t references;
};

typedef struct halod_fd_close_t {
  halod_fd_closer_t *closer;
  int fd;
  uint32_t uid;
} halod_fd_close_t;

halo_status_t halod_fd_closer_create(halod_fd_closer_t **out_closer) {
  *out_closer = NULL;
  halod_fd_closer_t *closer = calloc(1, sizeof(*closer));
  if (!closer) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  pthread_mutex_init(&closer->mutex, NULL);
  halo_u64_map_initialize(&closer->pending);
  atomic_init(&closer->references, 1);
  *out_closer = closer;
  return NULL;
}

static void halod_fd_closer_release(halod_fd_closer_t *closer) {
  if (atomic_fetch_sub(&closer->references, 1) != 1) return;
  halo_u64_map_deinitialize(&closer->pending);
  pthread_mutex_destroy(&closer->mutex);
  free(closer);
}

halod_fd_closer_t *halod_fd_closer_retain(halod_fd_closer_t *closer) {
  atomic_fetch_add(&closer->references, 1);
  return closer;
}

void halod_fd_closer_destroy(halod_fd_closer_t *closer) {
  if (closer) halod_fd_closer_release(closer);
}

// Adds |delta| to |uid|'s closes not returned. Mutex held.
static halo_status_t halod_fd_closer_count_locked(halod_fd_closer_t *closer,
                                                  uint32_t uid, int delta) {
  uintptr_t count = (uintptr_t)halo_u64_map_get(&closer->pending, uid);
  count = (uintptr_t)((intptr_t)count + delta);
  if (count == 0) {
    halo_u64_map_remove(&closer->pending, uid);
    return NULL;
  }
  return halo_u64_map_put(&closer->pending, uid, (void *)count);
}

static void *halod_fd_closer_main(void *arg) {
  halod_fd_close_t *close_task = arg;
  halod_fd_closer_t *closer = close_task->closer;
  close(close_task->fd);
  pthread_mutex_lock(&closer->mutex);
  // Lowering a present count never allocates.
  halo_status_free(halod_fd_closer_count_locked(closer, close_task->uid, -1));
  pthread_mutex_unlock(&closer->mutex);
  free(close_task);
  halod_fd_closer_release(closer);
  return NULL;
}

void halod_fd_closer_close(halod_fd_closer_t *closer, int fd, uint32_t uid) {
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
    // A socket then closes at once however much it has unsent: what it
    // has is sent in the background, or dropped with the socket.
    struct linger off = {.l_onoff = 0, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
  }
  halod_fd_close_t *close_task = malloc(sizeof(*close_task));
  halo_status_t status =
      close_task ? NULL
                 : halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  if (!status) {
    *close_task = (halod_fd_close_t){.closer = closer, .fd = fd, .uid = uid};
    pthread_mutex_lock(&closer->mutex);
    status = halod_fd_closer_count_locked(closer, uid, 1);
    pthread_mutex_unlock(&closer->mutex);
  }
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attributes, 64 * 1024);
  if (!status) {
    atomic_fetch_add(&closer->references, 1);
    pthread_t thread;
    int error =
        pthread_create(&thread, &attributes, halod_fd_closer_main, close_task);
    if (error) {
      atomic_fetch_sub(&closer->references, 1);
      pthread_mutex_lock(&closer->mutex);
      halo_status_free(halod_fd_closer_count_locked(closer, uid, -1));
      pthread_mutex_unlock(&closer->mutex);
      status = halo_status_from_errno(error, "starting a thread to close it");
    }
  }
  pthread_attr_destroy(&attributes);
  if (status) {
    free(close_task);
    HALO_LOG_WARN(
        "left descriptor %d of uid %u open: %s (its close might block "
        "halod's loop)",
        fd, uid, halo_status_message(status));
    halo_status_free(status);
  }
}

void halod_fd_closer_close_connection(halod_fd_closer_t *closer, int fd,
                                      uint32_t uid) {
  char byte;
  ssize_t peeked;
  do {
    peeked = recv(fd, &byte, sizeof(byte), MSG_PEEK | MSG_DONTWAIT);
  } while (peeked < 0 && errno == EINTR);
  if (peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    close(fd);  // nothing queued: nothing to release but the socket
    return;
  }
  halod_fd_closer_close(closer, fd, uid);
}

uint32_t halod_fd_closer_pending(halod_fd_closer_t *closer, uint32_t uid) {
  pthread_mutex_lock(&closer->mutex);
  uintptr_t count = (uintptr_t)halo_u64_map_get(&closer->pending, uid);
  pthread_mutex_unlock(&closer->mutex);
  return (uint32_t)count;
}
