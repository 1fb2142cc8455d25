// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/buffer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"
#include "daemon/device_call.h"
#include "daemon/domain_quota.h"
#include "daemon/session.h"
#include "daemon/workers.h"

// Whether a host-visible buffer of |size| goes on an arena of its own.
static bool halod_buffer_exclusive(const halod_t *daemon, uint64_t size,
                                   bool exportable) {
  return exportable || size > daemon->config.arena_bytes / 2;
}

// Places |size| bytes on one of the session's shared arenas, creating one
// when none has room; exportable or large buffers get an exclusive arena.
static halo_status_t halod_buffer_place(halod_t *daemon,
                                        halod_session_t *session, uint64_t size,
                                        bool exportable,
                                        halod_arena_t **out_arena,
                                        uint64_t *out_offset) {
  *out_arena = NULL;
  *out_offset = 0;
  bool exclusive = halod_buffer_exclusive(daemon, size, exportable);
  if (!exclusive) {
    for (uint32_t i = 0; i < session->arena_count; ++i) {
      bool placed = false;
      HALO_RETURN_IF_ERROR(
          halod_arena_allocate(session->arenas[i], size, &placed, out_offset));
      if (placed) {
        *out_arena = session->arenas[i];
        return NULL;
      }
    }
  }
  halod_arena_t *arena = NULL;
  HALO_RETURN_IF_ERROR(halod_arena_create(
      daemon, session->domain, exclusive ? size : daemon->config.arena_bytes,
      exclusive, session->id, &arena));
  if (!exclusive) {
    halo_status_t status = halod_session_add_arena(session, arena);
    if (status) {
      halod_arena_destroy(daemon, arena);
      return status;
    }
  }
  *out_offset = halod_arena_place_first(arena, size);
  *out_arena = arena;
  return NULL;
}

// Checks a buffer's device, memory type, size and |session|'s quota for it;
// |out_hal_device|: the device of the session's trust domain.
static halo_status_t halod_buffer_check(halod_t *daemon,
                                        halod_session_t *session,
                                        uint32_t device, uint32_t memory_type,
                                        uint64_t size,
                                        halo_hal_device_t **out_hal_device) {
  *out_hal_device = NULL;
  HALO_RETURN_IF_ERROR(
      halod_domain_device(daemon, session->domain, device, out_hal_device));
  if (size == 0 || size > HALOD_BUFFER_MAX_SIZE) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "buffer size %llu is outside [1, 2^40]",
                            (unsigned long long)size);
  }
  bool host = memory_type == HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE;
  if (!host && memory_type != HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "unknown memory type %u", memory_type);
  }
  uint64_t used = host ? session->host_bytes : session->device_bytes;
  uint64_t quota = host ? daemon->config.session_host_bytes
                        : daemon->config.session_device_bytes;
  if (size > quota || used > quota - size) {
    return halo_status_make(
        HALO_STATUS_RESOURCE_EXHAUSTED,
        "%s buffer of %llu bytes exceeds the session's "
        "quota %s (%llu of %llu bytes in use)",
        host ? "host-visible" : "device", (unsigned long long)size,
        host ? "session-host-bytes" : "session-device-bytes",
        (unsigned long long)used, (unsigned long long)quota);
  }
  char doing[64];
  snprintf(doing, sizeof(doing), "a %s buffer of %llu bytes",
           host ? "host-visible" : "device", (unsigned long long)size);
  return halod_domain_quota_check(daemon, session, host, size, doing);
}

static halod_buffer_t *halod_buffer_new(halod_t *daemon,
                                        halod_session_t *session,
                                        uint32_t device, uint32_t memory_type,
                                        uint64_t size, bool exportable) {
  halod_buffer_t *buffer = calloc(1, sizeof(*buffer));
  if (!buffer) return NULL;
  buffer->refcount = 1;
  buffer->id = halod_next_id(daemon);
  buffer->memory_type = memory_type;
  buffer->device = device;
  buffer->size = size;
  buffer->owner_session = session->id;
  buffer->exportable = exportable;
  return buffer;
}

// Counts a new buffer (its bytes charged to |session| already where
// |charged|).
static void halod_buffer_count(halod_t *daemon, halod_session_t *session,
                               const halod_buffer_t *buffer, bool charged) {
  halod_device_stats_t *stats = &daemon->stats.devices[buffer->device];
  ++stats->buffers;
  if (!charged) {
    halod_domain_quota_charge(session, buffer->arena != NULL, buffer->size);
  }
  if (buffer->arena) {
    stats->host_bytes += buffer->size;
  } else {
    stats->device_bytes += buffer->size;
  }
}

halo_status_t halod_buffer_create(halod_t *daemon, halod_session_t *session,
                                  uint32_t device, uint32_t memory_type,
                                  uint64_t size, bool exportable,
                                  halod_buffer_t **out_buffer) {
  *out_buffer = NULL;
  halo_hal_device_t *hal_device = NULL;
  HALO_RETURN_IF_ERROR(halod_buffer_check(daemon, session, device, memory_type,
                                          size, &hal_device));
  bool host = memory_type == HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE;
  halod_buffer_t *buffer =
      halod_buffer_new(daemon, session, device, memory_type, size, exportable);
  if (!buffer) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  halo_status_t status;
  if (host) {
    status = halod_buffer_place(daemon, session, size, exportable,
                                &buffer->arena, &buffer->offset);
  } else {
    halo_hal_allocator_t *allocator = hal_device->allocator;
    status =
        allocator->vtable->allocate(allocator, size, &buffer->device_address);
    if (!status) {
      halod_device_retain(hal_device);
      buffer->hal_device = hal_device;
    }
  }
  if (status) {
    free(buffer);
    return status;
  }
  halod_buffer_count(daemon, session, buffer, false);
  *out_buffer = buffer;
  return NULL;
}

bool halod_buffer_needs_arena(const halod_t *daemon,
                              const halod_session_t *session, uint64_t size,
                              bool exportable) {
  if (halod_buffer_exclusive(daemon, size, exportable)) return true;
  for (uint32_t i = 0; i < session->arena_count; ++i) {
    if (halod_arena_fits(session->arenas[i], size)) return false;
  }
  return true;
}

halo_status_t halod_buffer_arena_open(
    halod_t *daemon, halod_session_t *session, uint32_t device, uint64_t size,
    bool exportable, halod_arena_t **out_arena,
    struct halod_host_registration_t *out_registration) {
  *out_arena = NULL;
  halo_hal_device_t *hal_device = NULL;
  HALO_RETURN_IF_ERROR(halod_buffer_check(
      daemon, session, device, HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE,
      size, &hal_device));
  bool exclusive = halod_buffer_exclusive(daemon, size, exportable);
  HALO_RETURN_IF_ERROR(halod_arena_open(
      daemon, session->domain, exclusive ? size : daemon->config.arena_bytes,
      exclusive, session->id, out_arena, out_registration));
  halod_domain_quota_charge(session, true, size);
  return NULL;
}

void halod_buffer_arena_abandon(
    halod_t *daemon, halod_session_t *session, uint64_t size,
    halod_arena_t *arena, struct halod_host_registration_t *registration) {
  if (session) halod_domain_quota_credit(session, true, size);
  halod_arena_abandon(daemon, arena, registration);
}

halo_status_t halod_buffer_create_on_arena(
    halod_t *daemon, halod_session_t *session, uint32_t device, uint64_t size,
    bool exportable, halod_arena_t *arena,
    struct halod_host_registration_t *registration,
    halod_buffer_t **out_buffer) {
  *out_buffer = NULL;
  halo_status_t status = halod_arena_finish(daemon, arena, registration);
  if (!status && !arena->exclusive) {
    status = halod_session_add_arena(session, arena);
    if (status) halod_arena_destroy(daemon, arena);
  }
  halod_buffer_t *buffer =
      status ? NULL
             : halod_buffer_new(daemon, session, device,
                                HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE,
                                size, exportable);
  if (!status && !buffer) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    if (arena->exclusive) halod_arena_destroy(daemon, arena);
  }
  if (status) {
    halod_domain_quota_credit(session, true, size);
    return status;
  }
  buffer->offset = halod_arena_place_first(arena, size);
  buffer->arena = arena;
  halod_buffer_count(daemon, session, buffer, true);
  *out_buffer = buffer;
  return NULL;
}

halo_status_t halod_buffer_reserve(halod_t *daemon, halod_session_t *session,
                                   uint32_t device, uint64_t size,
                                   halo_hal_device_t **out_hal_device) {
  HALO_RETURN_IF_ERROR(halod_buffer_check(
      daemon, session, device, HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE, size,
      out_hal_device));
  halod_domain_quota_charge(session, false, size);
  return NULL;
}

void halod_buffer_unreserve(halod_session_t *session, uint64_t size) {
  halod_domain_quota_credit(session, false, size);
}

halo_status_t halod_buffer_adopt(halod_t *daemon, halod_session_t *session,
                                 uint32_t device, uint64_t size,
                                 bool exportable, halo_hal_device_t *hal_device,
                                 uint64_t address,
                                 halod_buffer_t **out_buffer) {
  *out_buffer = NULL;
  halod_buffer_t *buffer = halod_buffer_new(
      daemon, session, device, HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE, size,
      exportable);
  if (!buffer) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  buffer->device_address = address;
  halod_device_retain(hal_device);
  buffer->hal_device = hal_device;
  halod_buffer_count(daemon, session, buffer, true);
  *out_buffer = buffer;
  return NULL;
}

void halod_buffer_retain(halod_buffer_t *buffer) {
  ++buffer->refcount;
}

void halod_buffer_release(halod_t *daemon, halod_buffer_t *buffer) {
  if (--buffer->refcount > 0) return;
  if (buffer->exported) halod_export_remove(daemon, buffer->token);
  halod_session_t *owner =
      buffer->owner_session
          ? halo_u64_map_get(&daemon->sessions.by_id, buffer->owner_session)
          : NULL;
  halod_device_stats_t *stats = &daemon->stats.devices[buffer->device];
  --stats->buffers;
  if (buffer->arena) {
    stats->host_bytes -= buffer->size;
    if (owner) halod_domain_quota_credit(owner, true, buffer->size);
    halod_arena_free(daemon, buffer->arena, buffer->offset, buffer->size);
  } else {
    stats->device_bytes -= buffer->size;
    if (owner) halod_domain_quota_credit(owner, false, buffer->size);
    halo_hal_allocator_t *allocator = buffer->hal_device->allocator;
    allocator->vtable->deallocate(allocator, buffer->device_address,
                                  buffer->size);
    halod_device_release(buffer->hal_device);
  }
  void (*on_freed)(void *) = buffer->on_freed;
  void *on_freed_data = buffer->on_freed_data;
  free(buffer);
  if (on_freed) on_freed(on_freed_data);
}

halo_status_t halod_buffer_check_range(const halod_buffer_t *buffer,
                                       uint64_t offset, uint64_t length) {
  if (offset > buffer->size || length > buffer->size - offset) {
    return halo_status_make(
        HALO_STATUS_OUT_OF_RANGE,
        "range [%llu, %llu + %llu) exceeds buffer %llu of "
        "%llu bytes",
        (unsigned long long)offset, (unsigned long long)offset,
        (unsigned long long)length, (unsigned long long)buffer->id,
        (unsigned long long)buffer->size);
  }
  return NULL;
}

halo_status_t halod_buffer_write(halod_buffer_t *buffer, uint64_t offset,
                                 const void *data, uint64_t length) {
  HALO_RETURN_IF_ERROR(halod_buffer_check_range(buffer, offset, length));
  if (buffer->arena) {
    memcpy((char *)buffer->arena->mapping + buffer->offset + offset, data,
           (size_t)length);
    return NULL;
  }
  halo_hal_allocator_t *allocator = buffer->hal_device->allocator;
  return allocator->vtable->write(allocator, buffer->device_address + offset,
                                  data, length);
}

halo_status_t halod_buffer_read(halod_buffer_t *buffer, uint64_t offset,
                                void *out_data, uint64_t length) {
  HALO_RETURN_IF_ERROR(halod_buffer_check_range(buffer, offset, length));
  if (buffer->arena) {
    // From the memfd, not the mapping: a read through the mapping faults in
    // every page it touches, a page nobody wrote too, into halod's RSS (which
    // the kernel's choice of a process to kill counts) and, where no device
    // pinned the arena yet (the local driver), charged to halod's cgroup;
    // pread copies a hole as zeros and allocates nothing.
    uint64_t position = buffer->offset + offset;
    uint64_t done = 0;
    while (done < length) {
      ssize_t got = pread(buffer->arena->fd, (char *)out_data + done,
                          (size_t)(length - done), (off_t)(position + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        return halo_status_from_errno(got < 0 ? errno : EIO,
                                      "reading buffer %llu from its arena",
                                      (unsigned long long)buffer->id);
      }
      done += (uint64_t)got;
    }
    return NULL;
  }
  halo_hal_allocator_t *allocator = buffer->hal_device->allocator;
  return allocator->vtable->read(allocator, buffer->device_address + offset,
                                 out_data, length);
}

halo_status_t halod_buffer_device_address(const halod_buffer_t *buffer,
                                          const halo_hal_device_t *hal_device,
                                          uint32_t index,
                                          uint64_t *out_address) {
  *out_address = 0;
  if (buffer->arena) {
    if (index >= buffer->arena->registered ||
        buffer->arena->devices[index] != hal_device) {
      return halo_status_make(HALO_STATUS_PERMISSION_DENIED,
                              "buffer %llu is host memory of another trust "
                              "domain, or of another worker of this one "
                              "(workers-per-domain): device %u of this "
                              "session's worker cannot reach it",
                              (unsigned long long)buffer->id, index);
    }
    *out_address = buffer->arena->device_addresses[index] + buffer->offset;
    return NULL;
  }
  if (buffer->device != index) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "buffer %llu is device memory of device %u, not "
                            "of device %u",
                            (unsigned long long)buffer->id, buffer->device,
                            index);
  }
  if (buffer->hal_device != hal_device) {
    return halo_status_make(HALO_STATUS_PERMISSION_DENIED,
                            "buffer %llu is device memory of another trust "
                            "domain, or of another worker of this one "
                            "(workers-per-domain: a process's sessions share "
                            "a worker, other processes may not): it cannot be "
                            "bound here",
                            (unsigned long long)buffer->id);
  }
  *out_address = buffer->device_address;
  return NULL;
}
