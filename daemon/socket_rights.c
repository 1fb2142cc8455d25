// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/socket_rights.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83  // Linux 6.16's <asm-generic/socket.h>
#endif

int halod_socket_refuse_rights(int fd) {
  int off = 0;
  if (setsockopt(fd, SOL_SOCKET, SO_PASSRIGHTS, &off, sizeof(off)) != 0) {
    return errno;
  }
  return 0;
}

// Whether |fd| is a listening Unix socket bound to |path|.
static int halod_socket_listens_at(int fd, const char *path) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  int listening = 0;
  socklen_t length = sizeof(listening);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 ||
      !listening) {
    return 0;
  }
  struct sockaddr_un address;
  length = sizeof(address);
  memset(&address, 0, sizeof(address));
  if (getsockname(fd, (struct sockaddr *)&address, &length) != 0 ||
      address.sun_family != AF_UNIX) {
    return 0;
  }
  return strncmp(address.sun_path, path, sizeof(address.sun_path)) == 0;
}

int halod_socket_refuse_rights_at(const char *path) {
  DIR *directory = opendir("/proc/self/fd");
  if (!directory) return errno;
  int result = ENOENT;
  struct dirent *entry;
  while ((entry = readdir(directory)) != NULL) {
    char *end;
    long fd = strtol(entry->d_name, &end, 10);
    if (*end != '\0' || end == entry->d_name || fd == dirfd(directory)) {
      continue;
    }
    if (halod_socket_listens_at((int)fd, path)) {
      result = halod_socket_refuse_rights((int)fd);
      break;
    }
  }
  closedir(directory);
  return result;
}
