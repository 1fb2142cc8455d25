// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/fd_channel.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/status.h"

ssize_t halo_fd_sendmsg(int socket_fd, struct iovec *iov, int count, int fd,
                        int flags) {
  struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)count};
  union {
    char buffer[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  if (fd >= 0) {
    memset(&control, 0, sizeof(control));
    msg.msg_control = control.buffer;
    msg.msg_controllen = sizeof(control.buffer);
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  }
  return sendmsg(socket_fd, &msg, flags);
}

halo_status_t halo_fd_send(int socket_fd, const void *data, size_t length,
                           int fd) {
  struct iovec iov = {.iov_base = (void *)data, .iov_len = length};
  ssize_t sent;
  do {
    sent = halo_fd_sendmsg(socket_fd, &iov, 1, fd, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return halo_status_from_errno(errno, "fd channel sendmsg");
  if ((size_t)sent != length) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "fd channel sendmsg: short write %zd of %zu", sent,
                            length);
  }
  return NULL;
}

halo_status_t halo_fd_recv_all(int socket_fd, void *data, size_t length,
                               int fds[HALO_FD_MAX_PASSED], size_t *out_count) {
  *out_count = 0;
  struct iovec iov = {.iov_base = data, .iov_len = length};
  union {
    char buffer[CMSG_SPACE(sizeof(int) * HALO_FD_MAX_PASSED)];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buffer,
                       .msg_controllen = sizeof(control.buffer)};
  ssize_t received;
  do {
    received = recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  if (received < 0) return halo_status_from_errno(errno, "fd channel recvmsg");
  for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg;
       cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
      continue;
    }
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count && *out_count < HALO_FD_MAX_PASSED; ++i) {
      memcpy(&fds[(*out_count)++], CMSG_DATA(cmsg) + i * sizeof(int),
             sizeof(int));
    }
  }
  if (received == 0) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE,
                            "fd channel closed by peer");
  }
  if ((size_t)received != length || (msg.msg_flags & MSG_TRUNC)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "fd channel message of %zd bytes, expected %zu",
                            received, length);
  }
  return NULL;
}

halo_status_t halo_fd_recv(int socket_fd, void *data, size_t length,
                           int *out_fd) {
  *out_fd = -1;
  int fds[HALO_FD_MAX_PASSED];
  size_t count = 0;
  halo_status_t status = halo_fd_recv_all(socket_fd, data, length, fds, &count);
  for (size_t i = status ? 0 : 1; i < count; ++i) close(fds[i]);
  if (!status && count > 0) *out_fd = fds[0];
  return status;
}
