// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The request of a CUDA C compile, written by the CUDA driver and read by
// halo-nvrtc (cuda_nvrtc_protocol.h).
#include "hal/cuda/cuda_nvrtc_protocol.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"

halo_status_t halo_hal_cuda_nvrtc_write_all(int fd, const void *data,
                                            size_t size) {
  const char *next = data;
  while (size > 0) {
    ssize_t wrote = write(fd, next, size);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      return halo_status_from_errno(wrote < 0 ? errno : EIO,
                                    "writing a compile's request or reply");
    }
    next += wrote;
    size -= (size_t)wrote;
  }
  return NULL;
}

static halo_status_t halo_hal_cuda_nvrtc_write_string(int fd,
                                                      const char *text) {
  return halo_hal_cuda_nvrtc_write_all(fd, text, strlen(text) + 1);
}

static halo_status_t halo_hal_cuda_nvrtc_write_count(int fd, uint32_t count) {
  char text[16];
  snprintf(text, sizeof(text), "%u", count);
  return halo_hal_cuda_nvrtc_write_string(fd, text);
}

halo_status_t halo_hal_cuda_nvrtc_request_write(
    int fd, const halo_hal_cuda_nvrtc_request_t *request) {
  char arch[16];
  snprintf(arch, sizeof(arch), "%d", request->arch);
  const char *head[] = {HALO_HAL_CUDA_NVRTC_PROTOCOL, request->soname,
                        request->directory, arch};
  for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); ++i) {
    HALO_RETURN_IF_ERROR(halo_hal_cuda_nvrtc_write_string(fd, head[i]));
  }
  HALO_RETURN_IF_ERROR(
      halo_hal_cuda_nvrtc_write_count(fd, request->path_count));
  for (uint32_t i = 0; i < request->path_count; ++i) {
    HALO_RETURN_IF_ERROR(
        halo_hal_cuda_nvrtc_write_string(fd, request->paths[i]));
  }
  HALO_RETURN_IF_ERROR(
      halo_hal_cuda_nvrtc_write_count(fd, request->option_count));
  for (uint32_t i = 0; i < request->option_count; ++i) {
    HALO_RETURN_IF_ERROR(
        halo_hal_cuda_nvrtc_write_string(fd, request->options[i]));
  }
  return halo_hal_cuda_nvrtc_write_all(fd, request->source,
                                       request->source_size);
}

halo_status_t halo_hal_cuda_nvrtc_reply_write(int fd, int32_t code,
                                              const void *payload,
                                              uint64_t size) {
  halo_hal_cuda_nvrtc_reply_t reply = {
      .magic = HALO_HAL_CUDA_NVRTC_REPLY_MAGIC, .code = code, .size = size};
  HALO_RETURN_IF_ERROR(
      halo_hal_cuda_nvrtc_write_all(fd, &reply, sizeof(reply)));
  return halo_hal_cuda_nvrtc_write_all(fd, payload, (size_t)size);
}

// Reads the parse's next NUL-ended string.
typedef struct halo_hal_cuda_nvrtc_reader_t {
  char *next;
  char *end;
} halo_hal_cuda_nvrtc_reader_t;

static halo_status_t halo_hal_cuda_nvrtc_read_string(
    halo_hal_cuda_nvrtc_reader_t *reader, const char *what, char **out) {
  char *nul = memchr(reader->next, '\0', (size_t)(reader->end - reader->next));
  if (!nul) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the compile's request ends inside its %s", what);
  }
  *out = reader->next;
  reader->next = nul + 1;
  return NULL;
}

static halo_status_t halo_hal_cuda_nvrtc_read_strings(
    halo_hal_cuda_nvrtc_reader_t *reader, const char *what, uint32_t *out_count,
    const char *const **out_strings) {
  char *text = NULL;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_nvrtc_read_string(reader, what, &text));
  char *end = NULL;
  errno = 0;
  unsigned long count = strtoul(text, &end, 10);
  if (text[0] < '0' || text[0] > '9' || errno || *end != '\0' ||
      count > HALO_HAL_CUDA_NVRTC_MAX_STRINGS) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the compile's request has '%.32s' as its count "
                            "of %s (at most %u)",
                            text, what, HALO_HAL_CUDA_NVRTC_MAX_STRINGS);
  }
  char **strings = calloc(count ? count : 1, sizeof(char *));
  if (!strings) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  for (unsigned long i = 0; i < count; ++i) {
    halo_status_t status =
        halo_hal_cuda_nvrtc_read_string(reader, what, &strings[i]);
    if (status) {
      free(strings);
      return status;
    }
  }
  *out_count = (uint32_t)count;
  *out_strings = (const char *const *)strings;
  return NULL;
}

halo_status_t halo_hal_cuda_nvrtc_request_parse(
    char *data, size_t size, size_t capacity,
    halo_hal_cuda_nvrtc_request_t *out_request) {
  memset(out_request, 0, sizeof(*out_request));
  if (capacity <= size) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the compile's request has no room for its "
                            "source's NUL");
  }
  halo_hal_cuda_nvrtc_reader_t reader = {data, data + size};
  char *protocol = NULL, *soname = NULL, *directory = NULL, *arch = NULL;
  HALO_RETURN_IF_ERROR(
      halo_hal_cuda_nvrtc_read_string(&reader, "protocol", &protocol));
  if (strcmp(protocol, HALO_HAL_CUDA_NVRTC_PROTOCOL) != 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the compile's request speaks '%.32s', not '%s'",
                            protocol, HALO_HAL_CUDA_NVRTC_PROTOCOL);
  }
  HALO_RETURN_IF_ERROR(
      halo_hal_cuda_nvrtc_read_string(&reader, "NVRTC library", &soname));
  HALO_RETURN_IF_ERROR(
      halo_hal_cuda_nvrtc_read_string(&reader, "NVRTC directory", &directory));
  HALO_RETURN_IF_ERROR(
      halo_hal_cuda_nvrtc_read_string(&reader, "architecture", &arch));
  char *end = NULL;
  long value = strtol(arch, &end, 10);
  if (arch[0] < '0' || arch[0] > '9' || *end != '\0' || value <= 0 ||
      value > 10000) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the compile's request has '%.32s' as its "
                            "architecture",
                            arch);
  }
  out_request->soname = soname;
  out_request->directory = directory;
  out_request->arch = (int)value;
  halo_status_t status = halo_hal_cuda_nvrtc_read_strings(
      &reader, "paths", &out_request->path_count, &out_request->paths);
  if (!status) {
    status = halo_hal_cuda_nvrtc_read_strings(
        &reader, "options", &out_request->option_count, &out_request->options);
  }
  if (status) {
    halo_hal_cuda_nvrtc_request_free(out_request);
    return status;
  }
  out_request->source = reader.next;
  out_request->source_size = (size_t)(reader.end - reader.next);
  reader.end[0] = '\0';
  return NULL;
}

void halo_hal_cuda_nvrtc_request_free(halo_hal_cuda_nvrtc_request_t *request) {
  free((void *)request->paths);
  free((void *)request->options);
  request->paths = NULL;
  request->options = NULL;
}
