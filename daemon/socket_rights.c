// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/socket_rights.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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

// Adds the inode of each listening Unix socket bound to |path| in this
// network namespace (/proc/net/unix: "Num RefCount Protocol Flags Type St
// Inode Path"; __SO_ACCEPTCON in Flags marks a listener; a connection
// accepted from it shows the same path without it) to |inodes|. Returns
// how many, at most |capacity|, or -errno.
static int halod_socket_listener_inodes(const char *path, unsigned long *inodes,
                                        int capacity) {
  FILE *table = fopen("/proc/net/unix", "re");
  if (!table) return -errno;
  enum { kAcceptConnections = 0x10000 };  // __SO_ACCEPTCON
  char line[sizeof(((struct sockaddr_un *)0)->sun_path) + 128];
  int count = 0;
  while (count < capacity && fgets(line, sizeof(line), table)) {
    unsigned long flags, inode;
    int path_at = 0;
    if (sscanf(line, "%*s %*x %*x %lx %*x %*x %lu %n", &flags, &inode,
               &path_at) != 2 ||
        !path_at || !(flags & kAcceptConnections)) {
      continue;
    }
    char *bound = line + path_at;
    bound[strcspn(bound, "\n")] = '\0';
    if (strcmp(bound, path) == 0) inodes[count++] = inode;
  }
  fclose(table);
  return count;
}

// Whether the descriptor named |name| in /proc/self/fd is a socket with one
// of |inodes|. Reads the link only: the descriptor itself is not touched, so
// one that another thread is accepting, reading or closing is left alone.
static int halod_socket_fd_is(int directory, const char *name,
                              const unsigned long *inodes, int count) {
  char target[64];
  ssize_t length = readlinkat(directory, name, target, sizeof(target) - 1);
  if (length <= 0) return 0;
  target[length] = '\0';
  unsigned long inode;
  char end;
  if (sscanf(target, "socket:[%lu%c", &inode, &end) != 2 || end != ']') {
    return 0;
  }
  for (int i = 0; i < count; ++i) {
    if (inodes[i] == inode) return 1;
  }
  return 0;
}

int halod_socket_refuse_rights_at(const char *path) {
  unsigned long inodes[8];
  int count = halod_socket_listener_inodes(path, inodes, 8);
  if (count < 0) return -count;
  if (count == 0) return ENOENT;
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
    if (halod_socket_fd_is(dirfd(directory), entry->d_name, inodes, count)) {
      result = halod_socket_refuse_rights((int)fd);
      break;
    }
  }
  closedir(directory);
  return result;
}
