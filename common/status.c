// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Status objects: a code plus a heap message. NULL is OK.
#include "common/status.h"

#include <stdio.h>
#include <stdlib.h>

struct halo_status_s {
  halo_status_code_t code;
  char message[];
};

// Returned when allocating a status fails; never freed.
static struct {
  halo_status_code_t code;
  char message[32];
} halo__status_oom = {HALO_STATUS_RESOURCE_EXHAUSTED, "out of memory"};

static bool halo__status_is_static(halo_status_t status) {
  return (void *)status == (void *)&halo__status_oom;
}

halo_status_t halo_status_makev(halo_status_code_t code, const char *format,
                                va_list args) {
  if (code == HALO_STATUS_OK) return NULL;
  va_list copy;
  va_copy(copy, args);
  int length = vsnprintf(NULL, 0, format, copy);
  va_end(copy);
  if (length < 0) length = 0;
  halo_status_t status = malloc(sizeof(*status) + (size_t)length + 1);
  if (!status) return (halo_status_t)&halo__status_oom;
  status->code = code;
  vsnprintf(status->message, (size_t)length + 1, format, args);
  return status;
}

halo_status_t halo_status_make(halo_status_code_t code, const char *format,
                               ...) {
  va_list args;
  va_start(args, format);
  halo_status_t status = halo_status_makev(code, format, args);
  va_end(args);
  return status;
}

halo_status_code_t halo_status_code(halo_status_t status) {
  return status ? status->code : HALO_STATUS_OK;
}

const char *halo_status_message(halo_status_t status) {
  return status ? status->message : "";
}

const char *halo_status_code_name(halo_status_code_t code) {
  static const char *const names[HALO_STATUS_CODE_COUNT] = {
      "OK",
      "CANCELLED",
      "UNKNOWN",
      "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",
      "NOT_FOUND",
      "ALREADY_EXISTS",
      "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION",
      "ABORTED",
      "OUT_OF_RANGE",
      "UNIMPLEMENTED",
      "INTERNAL",
      "UNAVAILABLE",
      "DATA_LOSS",
      "UNAUTHENTICATED",
      "DEVICE_LOST",
      "SESSION_LOST",
  };
  if ((unsigned)code >= HALO_STATUS_CODE_COUNT) return "UNKNOWN_CODE";
  return names[code];
}

halo_status_t halo_status_annotate(halo_status_t status, const char *format,
                                   ...) {
  if (!status) return NULL;
  char prefix[512];
  va_list args;
  va_start(args, format);
  vsnprintf(prefix, sizeof(prefix), format, args);
  va_end(args);
  halo_status_t annotated =
      halo_status_make(status->code, "%s: %s", prefix, status->message);
  halo_status_free(status);
  return annotated;
}

void halo_status_free(halo_status_t status) {
  if (status && !halo__status_is_static(status)) free(status);
}

halo_status_code_t halo_status_consume_code(halo_status_t status) {
  halo_status_code_t code = halo_status_code(status);
  halo_status_free(status);
  return code;
}

halo_status_code_t halo_status_code_from_errno(int error_number) {
  switch (error_number) {
    case 0:
      return HALO_STATUS_OK;
    case EINVAL:
    case EBADF:
      return HALO_STATUS_INVALID_ARGUMENT;
    case ENOENT:
    case ESRCH:
      return HALO_STATUS_NOT_FOUND;
    case EEXIST:
      return HALO_STATUS_ALREADY_EXISTS;
    case EPERM:
    case EACCES:
      return HALO_STATUS_PERMISSION_DENIED;
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
    case ENFILE:
    case EAGAIN:
    case EFBIG:
      return HALO_STATUS_RESOURCE_EXHAUSTED;
    case ETIMEDOUT:
      return HALO_STATUS_DEADLINE_EXCEEDED;
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case ENOTCONN:
      return HALO_STATUS_UNAVAILABLE;
    case ECANCELED:
    case EINTR:
      return HALO_STATUS_CANCELLED;
    case ENOSYS:
    case EOPNOTSUPP:
      return HALO_STATUS_UNIMPLEMENTED;
    case ERANGE:
    case EOVERFLOW:
      return HALO_STATUS_OUT_OF_RANGE;
    default:
      return HALO_STATUS_INTERNAL;
  }
}
