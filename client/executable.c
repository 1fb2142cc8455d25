// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo executables: the bytes go to the daemon once; the client keeps
// the handle and the daemon's content hash.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/status.h"

struct halo_executable_s {
  halo_object_link_t link;  // first: halo_client_close walks links
  halo_client_t *client;
  uint64_t handle;
  uint32_t device;
  bool cache_hit;
  char content_hash[65];
};

static bool halo_executable_format_is_valid(halo_executable_format_t format) {
  return format >= HALO_EXECUTABLE_FORMAT_ELF &&
         format <= HALO_EXECUTABLE_FORMAT_CUDA_SOURCE;
}

static void halo_executable_send_release(halo_client_t *client,
                                         uint64_t handle) {
  Halo__Wire__ExecutableRelease release = HALO__WIRE__EXECUTABLE_RELEASE__INIT;
  release.handle = handle;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_EXECUTABLE_RELEASE;
  request.executable_release = &release;
  // A failure here (daemon gone) leaves nothing to release: the daemon
  // frees a session's objects when its connection ends.
  halo_status_free(halo_client_call_status(client, &request));
}

halo_status_t halo_executable_create(halo_client_t *client, uint32_t device,
                                     const halo_executable_params_t *params,
                                     halo_executable_t **out_executable) {
  HALO_CHECK_ARG(out_executable, "out_executable must not be NULL");
  *out_executable = NULL;
  HALO_CHECK_ARG(client, "client must not be NULL");
  HALO_CHECK_ARG(params, "params must not be NULL");
  HALO_CHECK_ARG(halo_executable_format_is_valid(params->format),
                 "format %d is not a halo_executable_format_t",
                 (int)params->format);
  HALO_CHECK_ARG(params->data && params->size > 0,
                 "an executable needs data (data %s, size %zu)",
                 params->data ? "set" : "NULL", params->size);
  // Its size against halod's max-message-bytes is the request's, checked
  // with its framing when it is sent (RESOURCE_EXHAUSTED naming the limit).
  HALO_CHECK_ARG(params->options || params->option_count == 0,
                 "options is NULL but option_count is %zu",
                 params->option_count);
  for (size_t i = 0; i < params->option_count; ++i) {
    HALO_CHECK_ARG(params->options[i], "options[%zu] is NULL", i);
  }
  Halo__Wire__ExecutableCreate create = HALO__WIRE__EXECUTABLE_CREATE__INIT;
  create.device = device;
  create.format = (Halo__Wire__ExecutableFormat)params->format;
  create.data.data = (uint8_t *)params->data;
  create.data.len = params->size;
  create.n_options = params->option_count;
  create.options = (char **)params->options;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_EXECUTABLE_CREATE;
  request.executable_create = &create;
  halo_wire_response_t *response;
  HALO_RETURN_IF_ERROR(halo_client_call(client, &request, &response));
  halo_status_t status = NULL;
  const Halo__Wire__ExecutableReply *reply = response->executable;
  if (response->body_case != HALO__WIRE__RESPONSE__BODY_EXECUTABLE ||
      !reply->content_hash || strlen(reply->content_hash) != 64) {
    status = halo_status_make(HALO_STATUS_INTERNAL,
                              "halod answered ExecutableCreate with a "
                              "malformed reply");
    if (response->body_case == HALO__WIRE__RESPONSE__BODY_EXECUTABLE) {
      halo_executable_send_release(client, reply->handle);
    }
  }
  halo_executable_t *executable = NULL;
  if (!status) {
    executable = calloc(1, sizeof(*executable));
    if (!executable) {
      halo_executable_send_release(client, reply->handle);
      status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    }
  }
  if (!status) {
    executable->client = client;
    executable->handle = reply->handle;
    executable->device = device;
    executable->cache_hit = reply->cached;
    memcpy(executable->content_hash, reply->content_hash, 65);
    halo_client_track(client, &executable->link, HALO_OBJECT_EXECUTABLE);
    *out_executable = executable;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return status;
}

// The format a file name's extension says; 0 if it says none.
static halo_executable_format_t halo_executable_format_from_path(
    const char *path) {
  static const struct {
    const char *extension;
    halo_executable_format_t format;
  } kExtensions[] = {
      {".so", HALO_EXECUTABLE_FORMAT_ELF},
      {".ptx", HALO_EXECUTABLE_FORMAT_PTX},
      {".cubin", HALO_EXECUTABLE_FORMAT_CUBIN},
      {".fatbin", HALO_EXECUTABLE_FORMAT_FATBIN},
      {".cu", HALO_EXECUTABLE_FORMAT_CUDA_SOURCE},
  };
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(slash ? slash + 1 : path, '.');
  if (!dot) return (halo_executable_format_t)0;
  for (size_t i = 0; i < sizeof(kExtensions) / sizeof(kExtensions[0]); ++i) {
    if (strcmp(dot, kExtensions[i].extension) == 0) {
      return kExtensions[i].format;
    }
  }
  return (halo_executable_format_t)0;
}

// A failure of |what| (opening, reading) on |path| with |error| (an
// errno): a path that names no file (a directory, a path through a file,
// one too long or looping) is the caller's mistake, INVALID_ARGUMENT; the
// rest keep errno's code (NOT_FOUND, PERMISSION_DENIED, ...).
static halo_status_t halo_executable_file_error(int error, const char *what,
                                                const char *path) {
  switch (error) {
    case EISDIR:
    case ENOTDIR:
    case ENAMETOOLONG:
    case ELOOP:
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "%s %s: %s (the path must name an executable "
                              "file)",
                              what, path, strerror(error));
    default:
      return halo_status_from_errno(error, "%s %s", what, path);
  }
}

// Reads all of |path| into a new heap block (at most the message limit).
// Reads |path| whole; past |limit| bytes it is refused, naming halod's
// max-message-bytes (the bytes go in one request).
static halo_status_t halo_executable_read_file(const char *path, uint64_t limit,
                                               void **out_data,
                                               size_t *out_size) {
  *out_data = NULL;
  *out_size = 0;
  FILE *file = fopen(path, "rb");
  if (!file) return halo_executable_file_error(errno, "opening", path);
  halo_status_t status = NULL;
  size_t capacity = 64 * 1024;
  size_t size = 0;
  uint8_t *data = malloc(capacity);
  if (!data) status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  while (!status) {
    if (size == capacity) {
      if (capacity > limit) {
        status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                                  "%s is larger than the %llu bytes halod "
                                  "accepts in one message (its setting "
                                  "max-message-bytes)",
                                  path, (unsigned long long)limit);
        break;
      }
      uint8_t *grown = realloc(data, capacity * 2);
      if (!grown) {
        status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
        break;
      }
      data = grown;
      capacity *= 2;
    }
    size_t got = fread(data + size, 1, capacity - size, file);
    size += got;
    if (got == 0) {
      if (ferror(file))
        status = halo_executable_file_error(errno, "reading", path);
      break;
    }
  }
  fclose(file);
  if (status) {
    free(data);
    return status;
  }
  *out_data = data;
  *out_size = size;
  return NULL;
}

halo_status_t halo_executable_create_from_file(
    halo_client_t *client, uint32_t device, const char *path,
    halo_executable_format_t format, halo_executable_t **out_executable) {
  HALO_CHECK_ARG(out_executable, "out_executable must not be NULL");
  *out_executable = NULL;
  HALO_CHECK_ARG(client, "client must not be NULL");
  HALO_CHECK_ARG(path, "path must not be NULL");
  if (format == 0) {
    format = halo_executable_format_from_path(path);
    HALO_CHECK_ARG(format != 0,
                   "cannot tell the format of %s from its extension (.so, "
                   ".ptx, .cubin, .fatbin or .cu); pass a format",
                   path);
  }
  HALO_CHECK_ARG(halo_executable_format_is_valid(format),
                 "format %d is not a halo_executable_format_t", (int)format);
  // Before reading the file: the load could not reach halod from a forked
  // child (halo_executable_create's request would be refused).
  HALO_RETURN_IF_ERROR(halo_client_check_process(client));
  void *data;
  size_t size;
  HALO_RETURN_IF_ERROR(halo_executable_read_file(
      path, halo_client_max_message_bytes(client), &data, &size));
  if (size == 0) {
    free(data);
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT, "%s is empty", path);
  }
  halo_executable_params_t params = {
      .format = format,
      .data = data,
      .size = size,
  };
  halo_status_t status =
      halo_executable_create(client, device, &params, out_executable);
  free(data);
  if (status) status = halo_status_annotate(status, "loading %s", path);
  return status;
}

void halo_executable_release_link(halo_object_link_t *link) {
  halo_executable_t *executable = (halo_executable_t *)link;
  halo_client_untrack(executable->client, &executable->link);
  halo_executable_send_release(executable->client, executable->handle);
  free(executable);
}

void halo_executable_release(halo_executable_t *executable) {
  if (executable) halo_executable_release_link(&executable->link);
}

const char *halo_executable_content_hash(const halo_executable_t *executable) {
  return executable ? executable->content_hash : "";
}

halo_client_t *halo_executable_client(const halo_executable_t *executable) {
  return executable->client;
}

uint64_t halo_executable_handle(const halo_executable_t *executable) {
  return executable ? executable->handle : 0;
}

uint32_t halo_executable_device(const halo_executable_t *executable) {
  return executable->device;
}

int halo_executable_cache_hit(const halo_executable_t *executable) {
  return executable && executable->cache_hit;
}

halo_status_t halo_executable_parameters(halo_executable_t *executable,
                                         const char *entry,
                                         halo_parameter_t *out_parameters,
                                         size_t capacity, size_t *out_count) {
  HALO_CHECK_ARG(out_count, "out_count must not be NULL");
  *out_count = 0;
  HALO_CHECK_ARG(executable, "executable must not be NULL");
  HALO_CHECK_ARG(entry, "entry must not be NULL");
  HALO_CHECK_ARG(*entry, "entry must not be empty");
  HALO_CHECK_ARG(out_parameters || capacity == 0,
                 "out_parameters is NULL but capacity is %zu", capacity);
  Halo__Wire__ExecutableParameters query =
      HALO__WIRE__EXECUTABLE_PARAMETERS__INIT;
  query.handle = executable->handle;
  query.entry = (char *)entry;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_EXECUTABLE_PARAMETERS;
  request.executable_parameters = &query;
  halo_wire_response_t *response;
  HALO_RETURN_IF_ERROR(
      halo_client_call(executable->client, &request, &response));
  halo_status_t status = NULL;
  const Halo__Wire__ExecutableParametersReply *reply =
      response->executable_parameters;
  if (response->body_case != HALO__WIRE__RESPONSE__BODY_EXECUTABLE_PARAMETERS ||
      reply->n_parameters > reply->count) {
    status = halo_status_make(HALO_STATUS_INTERNAL,
                              "halod answered ExecutableParameters with a "
                              "malformed reply");
  } else {
    for (size_t i = 0; i < reply->n_parameters && i < capacity; ++i) {
      out_parameters[i].offset = reply->parameters[i]->offset;
      out_parameters[i].size = reply->parameters[i]->size;
    }
    *out_count = reply->count;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return status;
}
