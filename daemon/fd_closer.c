// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/fd_closer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/status.h"
#include "common/u64_map.h"

// One uid's descriptors waiting to be closed, in order, by its one thread.
typedef struct halod_fd_close_queue_t {
  struct halod_fd_closer_t *closer;
  uint32_t uid;
  int *fds;
  size_t head, count, capacity;  // a ring of |capacity|
  bool closing;                  // its thread is in a close
  bool running;                  // it has a thread
} halod_fd_close_queue_t;

struct halod_fd_closer_t {
  pthread_mutex_t mutex;
  halo_u64_map_t queues;  // uid + 1 (the map's keys are never 0) -> queue
  // halod_fd_closer_set_rights_refused; set and read by the caller's
  // thread (halod's loop) only.
  bool inline_connections;
  int64_t warned_s;  // when a thread last failed to start
  // halod's, each fd channel connection's and each uid's thread: the last
  // frees.
  _Atomic uint32_t references;
};

halo_status_t halod_fd_closer_create(halod_fd_closer_t **out_closer) {
  *out_closer = NULL;
  halod_fd_closer_t *closer = calloc(1, sizeof(*closer));
  if (!closer) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  pthread_mutex_init(&closer->mutex, NULL);
  halo_u64_map_initialize(&closer->queues);
  atomic_init(&closer->references, 1);
  *out_closer = closer;
  return NULL;
}

halod_fd_closer_t *halod_fd_closer_retain(halod_fd_closer_t *closer) {
  atomic_fetch_add(&closer->references, 1);
  return closer;
}

void halod_fd_closer_destroy(halod_fd_closer_t *closer) {
  if (!closer || atomic_fetch_sub(&closer->references, 1) != 1) return;
  // No thread holds a reference: every queue has drained and gone, but for
  // one whose thread never started (its descriptors are halod's to the end).
  halo_u64_map_deinitialize(&closer->queues);
  pthread_mutex_destroy(&closer->mutex);
  free(closer);
}

void halod_fd_closer_set_rights_refused(halod_fd_closer_t *closer) {
  closer->inline_connections = true;
}

static void *halod_fd_closer_main(void *arg) {
  halod_fd_close_queue_t *queue = arg;
  halod_fd_closer_t *closer = queue->closer;
  pthread_mutex_lock(&closer->mutex);
  while (queue->count > 0) {
    int fd = queue->fds[queue->head];
    queue->head = (queue->head + 1) % queue->capacity;
    --queue->count;
    queue->closing = true;
    pthread_mutex_unlock(&closer->mutex);
    close(fd);
    pthread_mutex_lock(&closer->mutex);
    queue->closing = false;
  }
  halo_u64_map_remove(&closer->queues, (uint64_t)queue->uid + 1);
  pthread_mutex_unlock(&closer->mutex);
  free(queue->fds);
  free(queue);
  halod_fd_closer_destroy(closer);
  return NULL;
}

// |uid|'s queue, made if need be. Mutex held; NULL on oom.
static halod_fd_close_queue_t *halod_fd_closer_queue_locked(
    halod_fd_closer_t *closer, uint32_t uid) {
  uint64_t key = (uint64_t)uid + 1;
  halod_fd_close_queue_t *queue = halo_u64_map_get(&closer->queues, key);
  if (queue) return queue;
  queue = calloc(1, sizeof(*queue));
  if (!queue) return NULL;
  queue->closer = closer;
  queue->uid = uid;
  halo_status_t status = halo_u64_map_put(&closer->queues, key, queue);
  if (status) {
    halo_status_free(status);
    free(queue);
    return NULL;
  }
  return queue;
}

// Appends |fd| to |queue|. Mutex held.
static bool halod_fd_closer_push_locked(halod_fd_close_queue_t *queue, int fd) {
  if (queue->count == queue->capacity) {
    size_t capacity = queue->capacity ? queue->capacity * 2 : 16;
    int *fds = malloc(capacity * sizeof(*fds));
    if (!fds) return false;
    for (size_t i = 0; i < queue->count; ++i) {
      fds[i] = queue->fds[(queue->head + i) % queue->capacity];
    }
    free(queue->fds);
    queue->fds = fds;
    queue->head = 0;
    queue->capacity = capacity;
  }
  queue->fds[(queue->head + queue->count) % queue->capacity] = fd;
  ++queue->count;
  return true;
}

void halod_fd_closer_close(halod_fd_closer_t *closer, int fd, uint32_t uid) {
  // A socket then closes at once however much it has unsent (sent in the
  // background, or dropped with it). No fstat first: that of a FUSE file
  // asks its daemon, which need not answer; this fails with ENOTSOCK.
  struct linger off = {.l_onoff = 0, .l_linger = 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
  pthread_mutex_lock(&closer->mutex);
  halod_fd_close_queue_t *queue = halod_fd_closer_queue_locked(closer, uid);
  const char *failure = NULL;
  if (!queue || !halod_fd_closer_push_locked(queue, fd)) {
    failure = "out of memory (a descriptor left open for good)";
  } else if (!queue->running) {
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attributes, 64 * 1024);
    atomic_fetch_add(&closer->references, 1);
    pthread_t thread;
    if (pthread_create(&thread, &attributes, halod_fd_closer_main, queue) ==
        0) {
      queue->running = true;
    } else {
      // Queued: the next descriptor of the uid tries again.
      atomic_fetch_sub(&closer->references, 1);
      failure = "no thread could start (queued for the uid's next)";
    }
    pthread_attr_destroy(&attributes);
  }
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  bool warn = failure && now.tv_sec != closer->warned_s;
  if (warn) closer->warned_s = now.tv_sec;
  pthread_mutex_unlock(&closer->mutex);
  if (warn) {
    HALO_LOG_WARN("closing descriptors of uid %u off the loop: %s", uid,
                  failure);
  }
}

void halod_fd_closer_close_connection(halod_fd_closer_t *closer, int fd,
                                      uint32_t uid) {
  // Without the kernel's refusal no look at the queue can tell: a peer
  // may send a descriptor between the look and the close.
  if (closer->inline_connections) {
    close(fd);  // nothing can be queued on it with descriptors
    return;
  }
  halod_fd_closer_close(closer, fd, uid);
}

uint32_t halod_fd_closer_pending(halod_fd_closer_t *closer, uint32_t uid) {
  pthread_mutex_lock(&closer->mutex);
  halod_fd_close_queue_t *queue =
      halo_u64_map_get(&closer->queues, (uint64_t)uid + 1);
  size_t pending = queue ? queue->count + (queue->closing ? 1 : 0) : 0;
  pthread_mutex_unlock(&closer->mutex);
  return pending > UINT32_MAX ? UINT32_MAX : (uint32_t)pending;
}
