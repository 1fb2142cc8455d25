#include "daemon/executable.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/session.h"

#define HALOD_MAX_EXECUTABLE_OPTIONS 256

static const char *halod_executable_format_name(uint32_t format) {
  switch (format) {
    case HALO_HAL_EXECUTABLE_FORMAT_ELF:
      return "ELF";
    case HALO_HAL_EXECUTABLE_FORMAT_PTX:
      return "PTX";
    case HALO_HAL_EXECUTABLE_FORMAT_CUBIN:
      return "CUBIN";
    case HALO_HAL_EXECUTABLE_FORMAT_FATBIN:
      return "FATBIN";
    case HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE:
      return "CUDA source";
    default:
      return NULL;
  }
}

// Native code runs inside halod (until per-domain workers exist): only
// sessions the operator trusts may load it.
static halo_status_t halod_executable_check_trust(halod_t *daemon,
                                                  halod_session_t *session) {
  const char *policy = daemon->config.native_code;
  if (strcmp(policy, "any") == 0) return NULL;
  if (strcmp(policy, "owner") == 0 &&
      (session->uid == 0 || session->uid == (uint32_t)geteuid())) {
    return NULL;
  }
  return halo_status_make(HALO_STATUS_PERMISSION_DENIED,
                          "loading native code (ELF) is not allowed for uid "
                          "%u (halod's native-code setting is '%s')",
                          session->uid, policy);
}

static void halod_executable_hash(const Halo__Wire__ExecutableCreate *request,
                                  halo_hash_t *out_hash) {
  halo_hasher_t hasher;
  halo_hasher_initialize(&hasher);
  halo_hasher_update_u64(&hasher, request->device);
  halo_hasher_update_u64(&hasher, (uint64_t)request->format);
  halo_hasher_update_u64(&hasher, request->n_options);
  for (size_t i = 0; i < request->n_options; ++i) {
    halo_hasher_update_bytes(&hasher, request->options[i],
                             strlen(request->options[i]));
  }
  halo_hasher_update_bytes(&hasher, request->data.data, request->data.len);
  halo_hasher_finalize(&hasher, out_hash);
}

halo_status_t halod_executable_create(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__ExecutableCreate *request,
    halod_executable_t **out_executable, bool *out_cached) {
  *out_executable = NULL;
  *out_cached = false;
  uint32_t format = (uint32_t)request->format;
  const char *format_name = halod_executable_format_name(format);
  if (!format_name) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "unknown executable format %u", format);
  }
  if (request->device >= daemon->hal.device_count) {
    return halo_status_make(HALO_STATUS_OUT_OF_RANGE,
                            "device %u does not exist (the daemon has %u)",
                            request->device, daemon->hal.device_count);
  }
  if (request->data.len == 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the %s executable is empty", format_name);
  }
  if (request->n_options > HALOD_MAX_EXECUTABLE_OPTIONS) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%zu compiler options (at most %d)",
                            request->n_options, HALOD_MAX_EXECUTABLE_OPTIONS);
  }
  if (format == HALO_HAL_EXECUTABLE_FORMAT_ELF) {
    HALO_RETURN_IF_ERROR(halod_executable_check_trust(daemon, session));
  }
  halo_hash_t hash;
  halod_executable_hash(request, &hash);
  halod_executable_t *existing =
      halo_u64_map_get(&daemon->executables, halo_hash_key(&hash));
  if (existing && memcmp(existing->hash.bytes, hash.bytes, sizeof(hash)) == 0) {
    ++existing->refcount;
    *out_executable = existing;
    *out_cached = true;
    return NULL;
  }
  if (existing) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "executable hash prefix collision; not loaded");
  }

  halod_executable_t *executable = calloc(1, sizeof(*executable));
  if (!executable) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  halo_hal_device_t *device = daemon->hal.devices[request->device];
  halo_hal_executable_params_t params = {
      .format = format,
      .data = request->data.data,
      .size = request->data.len,
      .options = (const char *const *)request->options,
      .option_count = (uint32_t)request->n_options,
  };
  int64_t start = halo_clock_now_ns();
  halo_status_t status =
      device->vtable->create_executable(device, &params, &executable->hal);
  if (!status) {
    executable->refcount = 1;
    executable->id = halod_next_id(daemon);
    executable->device = request->device;
    executable->format = format;
    executable->hash = hash;
    halo_hash_format(&hash, executable->hash_text);
    executable->load_ns = halo_clock_now_ns() - start;
    status = halo_u64_map_put(&daemon->executables, halo_hash_key(&hash),
                              executable);
    if (status) halo_hal_executable_destroy(executable->hal);
  }
  if (status) {
    free(executable);
    return halo_status_annotate(status, "loading a %s executable of %zu bytes",
                                format_name, request->data.len);
  }
  HALO_LOG_INFO(
      "executable %.16s: %s, %zu bytes, loaded on device %u in "
      "%.3f ms (session %llu)",
      executable->hash_text, format_name, request->data.len, request->device,
      (double)executable->load_ns / 1e6, (unsigned long long)session->id);
  *out_executable = executable;
  return NULL;
}

void halod_executable_retain(halod_executable_t *executable) {
  ++executable->refcount;
}

void halod_executable_release(halod_t *daemon, halod_executable_t *executable) {
  if (--executable->refcount > 0) return;
  halo_u64_map_remove(&daemon->executables, halo_hash_key(&executable->hash));
  halo_hal_executable_destroy(executable->hal);
  free(executable);
}
