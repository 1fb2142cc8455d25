// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Framed messages over the supervisor-worker socket (see the header).
#include "hal/remote/remote_link.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/status.h"
#include "common/tsan.h"

#define HALO_REMOTE_MAX_PARTS 8

void halo_remote_link_initialize(halo_remote_link_t *link, int fd) {
  memset(link, 0, sizeof(*link));
  link->fd = fd;
  pthread_mutex_init(&link->send_mutex, NULL);
}

halo_status_t halo_remote_link_limit_sends(halo_remote_link_t *link,
                                           int64_t timeout_ns) {
  struct timeval limit = {
      .tv_sec = (time_t)(timeout_ns / 1000000000),
      .tv_usec = (suseconds_t)(timeout_ns % 1000000000) / 1000};
  if (setsockopt(link->fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit))) {
    return halo_status_from_errno(errno, "SO_SNDTIMEO on a worker link");
  }
  link->send_limit_ns = timeout_ns;
  return NULL;
}

void halo_remote_link_deinitialize(halo_remote_link_t *link) {
  if (link->fd >= 0) close(link->fd);
  link->fd = -1;
  for (uint32_t i = 0; i < link->fd_count; ++i) close(link->fds[i]);
  link->fd_count = 0;
  free(link->in);
  link->in = NULL;
  pthread_mutex_destroy(&link->send_mutex);
}

// Sends every byte of |iov|; the descriptor goes with the first chunk.
// |out_started|: whether any byte went (a failure after that leaves a
// partial message on the stream). |limit_ns| (0: none): the socket's
// SO_SNDTIMEO, which ends a write that made no progress for that long, and
// the bound on the whole message (a write cut short by the timeout returns
// what it wrote, and the next would wait as long again).
static halo_status_t halo_remote_link_send_all(int socket_fd, struct iovec *iov,
                                               int count, int fd,
                                               int64_t limit_ns,
                                               bool *out_started) {
  *out_started = false;
  int64_t deadline_ns = limit_ns > 0 ? halo_clock_now_ns() + limit_ns : 0;
  union {
    struct cmsghdr header;
    char bytes[CMSG_SPACE(sizeof(int))];
  } control;
  while (count > 0) {
    struct msghdr message = {.msg_iov = iov, .msg_iovlen = (size_t)count};
    if (fd >= 0) {
      memset(&control, 0, sizeof(control));
      message.msg_control = control.bytes;
      message.msg_controllen = sizeof(control.bytes);
      struct cmsghdr *cmsg = CMSG_FIRSTHDR(&message);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
    }
    ssize_t sent = sendmsg(socket_fd, &message, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // The socket's send time limit passed (the link is blocking).
        return halo_status_make(HALO_STATUS_DEADLINE_EXCEEDED,
                                "sending to the device worker: it read "
                                "nothing within the send time limit");
      }
      return halo_status_from_errno(errno, "sending to the device worker");
    }
    fd = -1;
    if (sent > 0) *out_started = true;
    if (deadline_ns && halo_clock_now_ns() >= deadline_ns) {
      size_t total = 0;
      for (int i = 0; i < count; ++i) total += iov[i].iov_len;
      if ((size_t)sent < total) {
        return halo_status_make(HALO_STATUS_DEADLINE_EXCEEDED,
                                "sending to the device worker: it read too "
                                "little within the send time limit");
      }
    }
    size_t left = (size_t)sent;
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = (char *)iov->iov_base + left;
      iov->iov_len -= left;
    }
  }
  return NULL;
}

// |counter| NULL: halo_remote_link_send.
halo_status_t halo_remote_link_send_counted(halo_remote_link_t *link,
                                            _Atomic uint64_t *counter,
                                            uint32_t type, uint64_t id,
                                            const halo_remote_part_t *parts,
                                            uint32_t part_count, int fd) {
  if (part_count + 1 > HALO_REMOTE_MAX_PARTS) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "a worker message of %u parts", part_count);
  }
  halo_remote_header_t header = {.type = type, .id = id};
  struct iovec iov[HALO_REMOTE_MAX_PARTS];
  iov[0].iov_base = &header;
  iov[0].iov_len = sizeof(header);
  int count = 1;
  for (uint32_t i = 0; i < part_count; ++i) {
    header.length += parts[i].size;
    if (parts[i].size == 0) continue;
    iov[count].iov_base = (void *)parts[i].data;
    iov[count].iov_len = parts[i].size;
    ++count;
  }
  // The two processes of a link order their work by its messages: a worker's
  // driver thread sends COMPLETE (a load thread, REPLY) once it is done with
  // the objects it used, and the supervisor sends DESTROY or DEALLOCATE for
  // them only after that, which the worker's receiving thread carries out.
  // That order passes through the other process, where ThreadSanitizer
  // cannot see it, and TSan took each such free for a race with the driver
  // thread's last read. Under TSan every send releases and every receive
  // acquires the link, which is the order the protocol gives: a message
  // received may answer any message this process sent before it.
  HALO_TSAN_RELEASE(link);
  pthread_mutex_lock(&link->send_mutex);
  if (counter) link->sent = counter;
  halo_status_t status = NULL;
  if (link->fd < 0) {
    status =
        halo_status_make(HALO_STATUS_UNAVAILABLE, "the device worker is gone");
  } else {
    // Counted first (see halo_remote_link_send_counted). A send that fails
    // before its first byte (a bad descriptor to pass, no memory) takes
    // its count back: the link stays usable. One that fails after it left
    // a partial message, which no receiver can frame, or that found the
    // peer not reading within the time limit: the link is shut down, and
    // the receiver sees its end.
    if (link->sent) {
      atomic_fetch_add_explicit(link->sent, 1, memory_order_seq_cst);
    }
    bool started = false;
    status = halo_remote_link_send_all(link->fd, iov, count, fd,
                                       link->send_limit_ns, &started);
    bool hung =
        status && halo_status_code(status) == HALO_STATUS_DEADLINE_EXCEEDED;
    if (status && !started && !hung && link->sent) {
      atomic_fetch_sub_explicit(link->sent, 1, memory_order_seq_cst);
    } else if (status && (started || hung)) {
      shutdown(link->fd, SHUT_RDWR);
    }
  }
  pthread_mutex_unlock(&link->send_mutex);
  return status;
}

halo_status_t halo_remote_link_send(halo_remote_link_t *link, uint32_t type,
                                    uint64_t id,
                                    const halo_remote_part_t *parts,
                                    uint32_t part_count, int fd) {
  return halo_remote_link_send_counted(link, NULL, type, id, parts, part_count,
                                       fd);
}

void halo_remote_link_stop_counting(halo_remote_link_t *link) {
  pthread_mutex_lock(&link->send_mutex);
  link->sent = NULL;
  pthread_mutex_unlock(&link->send_mutex);
}

void halo_remote_link_count_receives(halo_remote_link_t *link,
                                     const _Atomic uint64_t *counter,
                                     uint64_t received) {
  link->peer_sent = counter;
  link->received = received;
}

// One read of at most |size| bytes into |data|; descriptors that come with
// it join the link's queue. 0 bytes: the peer closed.
static halo_status_t halo_remote_link_read(halo_remote_link_t *link, void *data,
                                           size_t size, size_t *out_read) {
  union {
    struct cmsghdr header;
    char bytes[CMSG_SPACE(sizeof(int) * HALO_REMOTE_LINK_MAX_FDS)];
  } control;
  struct iovec iov = {.iov_base = data, .iov_len = size};
  struct msghdr message = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = control.bytes,
                           .msg_controllen = sizeof(control.bytes)};
  ssize_t got;
  do {
    got = recvmsg(link->fd, &message, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    return halo_status_from_errno(errno, "receiving from the device link");
  }
  for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&message); cmsg;
       cmsg = CMSG_NXTHDR(&message, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
      continue;
    }
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t k = 0; k < count; ++k) {
      int fd;
      memcpy(&fd, CMSG_DATA(cmsg) + k * sizeof(int), sizeof(int));
      if (link->fd_count < HALO_REMOTE_LINK_MAX_FDS) {
        link->fds[link->fd_count++] = fd;
      } else {
        close(fd);
      }
    }
  }
  *out_read = (size_t)got;
  if (got == 0) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE, "the device link closed");
  }
  return NULL;
}

// Fills |out| with |size| bytes: buffered ones first, then from the socket
// (small reads through the buffer, so that what follows is read ahead).
static halo_status_t halo_remote_link_take(halo_remote_link_t *link, void *out,
                                           size_t size) {
  char *bytes = out;
  while (size > 0) {
    size_t buffered = link->in_end - link->in_start;
    if (buffered > 0) {
      size_t n = buffered < size ? buffered : size;
      memcpy(bytes, link->in + link->in_start, n);
      link->in_start += n;
      bytes += n;
      size -= n;
      continue;
    }
    size_t got = 0;
    if (size >= HALO_REMOTE_LINK_BUFFER) {
      HALO_RETURN_IF_ERROR(halo_remote_link_read(link, bytes, size, &got));
      bytes += got;
      size -= got;
      continue;
    }
    if (!link->in) {
      link->in = malloc(HALO_REMOTE_LINK_BUFFER);
      if (!link->in) {
        return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
      }
    }
    link->in_start = link->in_end = 0;
    HALO_RETURN_IF_ERROR(
        halo_remote_link_read(link, link->in, HALO_REMOTE_LINK_BUFFER, &got));
    link->in_end = got;
  }
  return NULL;
}

// Whether a message of |type| carries a descriptor.
static bool halo_remote_link_carries_fd(uint32_t type) {
  switch (type) {
    case HALO_REMOTE_REGISTER_HOST:
    case HALO_REMOTE_RING_FLIGHT:
    case HALO_REMOTE_RING_ATTACH:
    case HALO_REMOTE_RING_DOORBELL:
      return true;
    default:
      return false;
  }
}

halo_status_t halo_remote_link_receive(halo_remote_link_t *link,
                                       halo_remote_header_t *out_header,
                                       void **out_payload, int *out_fd) {
  *out_payload = NULL;
  *out_fd = -1;
  HALO_RETURN_IF_ERROR(
      halo_remote_link_take(link, out_header, sizeof(*out_header)));
  if (link->peer_sent) ++link->received;
  // Under TSan: see halo_remote_link_send.
  HALO_TSAN_ACQUIRE(link);
  if (out_header->length > HALO_REMOTE_MAX_PAYLOAD) {
    return halo_status_make(HALO_STATUS_DATA_LOSS,
                            "a device link message of %llu bytes",
                            (unsigned long long)out_header->length);
  }
  if (out_header->length > 0) {
    void *payload = malloc(out_header->length);
    if (!payload) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "oom (a device link message of %llu bytes)",
                              (unsigned long long)out_header->length);
    }
    halo_status_t status =
        halo_remote_link_take(link, payload, out_header->length);
    if (status) {
      free(payload);
      return status;
    }
    *out_payload = payload;
  }
  // Descriptors travel only with REGISTER_HOST, RING_FLIGHT, RING_ATTACH and
  // RING_DOORBELL, one each, in order.
  if (halo_remote_link_carries_fd(out_header->type) && link->fd_count > 0) {
    *out_fd = link->fds[0];
    memmove(link->fds, link->fds + 1, (link->fd_count - 1) * sizeof(int));
    --link->fd_count;
  }
  return NULL;
}

static int64_t halo_remote_link_now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000000ll + now.tv_nsec;
}

bool halo_remote_link_readable(halo_remote_link_t *link) {
  if (link->in_end > link->in_start) return true;  // read ahead
  // Counted: nothing counted past the messages taken, nothing to read (but
  // every HALO_REMOTE_LINK_POLL_EVERY-th look polls: a peer that closed
  // the link). A count ahead is confirmed by a poll: a counted message
  // whose first byte is not on the socket yet is still being sent, so
  // nothing the peer did after sending it has happened yet, and it is
  // taken next time; a count behind is a peer that does not count.
  if (link->peer_sent &&
      atomic_load_explicit(link->peer_sent, memory_order_seq_cst) ==
          link->received &&
      ++link->looks < HALO_REMOTE_LINK_POLL_EVERY) {
    return false;
  }
  link->looks = 0;
  struct pollfd poll_fd = {.fd = link->fd, .events = POLLIN};
  return poll(&poll_fd, 1, 0) == 1;
}

void halo_remote_link_poll_next(halo_remote_link_t *link) {
  link->looks = HALO_REMOTE_LINK_POLL_EVERY;
}

bool halo_remote_link_wait(halo_remote_link_t *link, int64_t spin_ns,
                           int timeout_ms) {
  if (link->in_end > link->in_start) return true;  // read ahead
  struct pollfd poll_fd = {.fd = link->fd, .events = POLLIN};
  int64_t spin_until = halo_remote_link_now_ns() + spin_ns;
  do {
    if (poll(&poll_fd, 1, 0) == 1) return true;
  } while (spin_ns > 0 && halo_remote_link_now_ns() < spin_until);
  if (timeout_ms == 0) return false;  // looked just now (the loop's check)
  int ready;
  do {
    ready = poll(&poll_fd, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  return ready > 0;
}
