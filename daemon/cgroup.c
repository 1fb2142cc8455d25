// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/cgroup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

halo_status_t halod_cgroup_parse(const char *text, char *out_path,
                                 size_t size) {
  if (size) out_path[0] = '\0';
  // Lines are "hierarchy-id:controllers:path"; cgroup v2's is "0::path".
  for (const char *line = text; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t length = end ? (size_t)(end - line) : strlen(line);
    if (length >= 3 && memcmp(line, "0::", 3) == 0) {
      const char *path = line + 3;
      size_t path_length = length - 3;
      if (path_length == 0 || path[0] != '/') {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "cgroup line '%.*s' has no absolute path",
                                (int)(length > 200 ? 200 : length), line);
      }
      if (path_length >= size) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "cgroup path of %zu bytes is longer than %zu",
                                path_length, size ? size - 1 : 0);
      }
      memcpy(out_path, path, path_length);
      out_path[path_length] = '\0';
      return NULL;
    }
    line = end ? end + 1 : NULL;
  }
  return halo_status_make(HALO_STATUS_NOT_FOUND,
                          "no cgroup v2 line (\"0::\"): the host mounts "
                          "cgroup v1 only");
}

void halod_cgroup_trim(char *path, uint32_t components) {
  // Trailing slashes never occur in /proc's paths; ignore them anyway.
  size_t length = strlen(path);
  while (length > 1 && path[length - 1] == '/') path[--length] = '\0';
  for (uint32_t i = 0; i < components && length > 1; ++i) {
    char *slash = strrchr(path, '/');
    if (!slash) break;
    length = slash == path ? 1 : (size_t)(slash - path);
    path[length] = '\0';
  }
}

halo_status_t halod_cgroup_of_process(uint32_t pid, uint32_t trim,
                                      char *out_path, size_t size) {
  char file_name[64];
  snprintf(file_name, sizeof(file_name), "/proc/%u/cgroup", pid);
  FILE *file = fopen(file_name, "r");
  if (!file) {
    return halo_status_from_errno(errno, "reading the cgroup of pid %u (%s)",
                                  pid, file_name);
  }
  // A line per v1 hierarchy (a dozen) and the v2 line, each path at most
  // PATH_MAX: 64 KiB holds any real file.
  enum { capacity = 65536 };
  char *text = malloc(capacity);
  if (!text) {
    fclose(file);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  size_t length = fread(text, 1, capacity - 1, file);
  fclose(file);
  text[length] = '\0';
  halo_status_t status = halod_cgroup_parse(text, out_path, size);
  free(text);
  if (status) {
    return halo_status_annotate(status, "the cgroup of pid %u (%s)", pid,
                                file_name);
  }
  halod_cgroup_trim(out_path, trim);
  return NULL;
}
