// Framed messages over the supervisor-worker socket (see the header).
#include "hal/remote/remote_link.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/status.h"

#define HALO_REMOTE_MAX_PARTS 8

void halo_remote_link_initialize(halo_remote_link_t *link, int fd) {
  link->fd = fd;
  pthread_mutex_init(&link->send_mutex, NULL);
}

void halo_remote_link_deinitialize(halo_remote_link_t *link) {
  if (link->fd >= 0) close(link->fd);
  link->fd = -1;
  pthread_mutex_destroy(&link->send_mutex);
}

// Sends every byte of |iov|; the descriptor goes with the first chunk.
static halo_status_t halo_remote_link_send_all(int socket_fd, struct iovec *iov,
                                               int count, int fd) {
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
      return halo_status_from_errno(errno, "sending to the device worker");
    }
    fd = -1;
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

halo_status_t halo_remote_link_send(halo_remote_link_t *link, uint32_t type,
                                    uint64_t id,
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
  pthread_mutex_lock(&link->send_mutex);
  halo_status_t status =
      link->fd < 0 ? halo_status_make(HALO_STATUS_UNAVAILABLE,
                                      "the device worker is gone")
                   : halo_remote_link_send_all(link->fd, iov, count, fd);
  pthread_mutex_unlock(&link->send_mutex);
  return status;
}

// Reads exactly |size| bytes; the first read may carry a descriptor.
static halo_status_t halo_remote_link_read_all(int socket_fd, void *data,
                                               size_t size, int *inout_fd) {
  char *bytes = data;
  while (size > 0) {
    union {
      struct cmsghdr header;
      char bytes[CMSG_SPACE(sizeof(int))];
    } control;
    struct iovec iov = {.iov_base = bytes, .iov_len = size};
    struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1};
    if (inout_fd) {
      message.msg_control = control.bytes;
      message.msg_controllen = sizeof(control.bytes);
    }
    ssize_t got = recvmsg(socket_fd, &message, MSG_CMSG_CLOEXEC);
    if (got < 0) {
      if (errno == EINTR) continue;
      return halo_status_from_errno(errno, "receiving from the device link");
    }
    if (got == 0) {
      return halo_status_make(HALO_STATUS_UNAVAILABLE,
                              "the device link closed");
    }
    if (inout_fd) {
      for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&message); cmsg;
           cmsg = CMSG_NXTHDR(&message, cmsg)) {
        if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
          int fd = -1;
          memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
          if (*inout_fd >= 0) close(*inout_fd);
          *inout_fd = fd;
        }
      }
    }
    bytes += got;
    size -= (size_t)got;
  }
  return NULL;
}

halo_status_t halo_remote_link_receive(halo_remote_link_t *link,
                                       halo_remote_header_t *out_header,
                                       void **out_payload, int *out_fd) {
  *out_payload = NULL;
  *out_fd = -1;
  halo_status_t status = halo_remote_link_read_all(link->fd, out_header,
                                                   sizeof(*out_header), out_fd);
  if (status) return status;
  if (out_header->length > HALO_REMOTE_MAX_PAYLOAD) {
    if (*out_fd >= 0) close(*out_fd);
    *out_fd = -1;
    return halo_status_make(HALO_STATUS_DATA_LOSS,
                            "a device link message of %llu bytes",
                            (unsigned long long)out_header->length);
  }
  if (out_header->length == 0) return NULL;
  void *payload = malloc(out_header->length);
  if (!payload) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "oom (a device link message of %llu bytes)",
                              (unsigned long long)out_header->length);
  } else {
    status =
        halo_remote_link_read_all(link->fd, payload, out_header->length, NULL);
  }
  if (status) {
    free(payload);
    if (*out_fd >= 0) close(*out_fd);
    *out_fd = -1;
    return status;
  }
  *out_payload = payload;
  return NULL;
}

static int64_t halo_remote_link_now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000000ll + now.tv_nsec;
}

bool halo_remote_link_wait(halo_remote_link_t *link, int64_t spin_ns,
                           int timeout_ms) {
  struct pollfd poll_fd = {.fd = link->fd, .events = POLLIN};
  int64_t spin_until = halo_remote_link_now_ns() + spin_ns;
  do {
    if (poll(&poll_fd, 1, 0) == 1) return true;
  } while (spin_ns > 0 && halo_remote_link_now_ns() < spin_until);
  int ready;
  do {
    ready = poll(&poll_fd, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  return ready > 0;
}
