// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo buffers: host-visible ones are mapped from the session's arenas;
// device ones are reached through the daemon in chunks. Buffers of
// halo_queue_alloca are built here too (halo_buffer_from_buffer_reply), and
// halo_queue_dealloca marks them deallocated.
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/status.h"

struct halo_buffer_s {
  halo_object_link_t link;  // first: halo_client_close walks links
  halo_client_t *client;
  uint64_t handle;
  uint64_t size;
  halo_memory_type_t memory_type;
  uint64_t arena_id;  // host-visible only
  uint8_t *host_pointer;
  // halo_queue_dealloca took the daemon's handle: the buffer is only
  // released locally from then on.
  atomic_bool deallocated;
};

halo_status_t halo_buffer_from_buffer_reply(
    halo_client_t *client, const Halo__Wire__BufferReply *reply,
    halo_buffer_t **out_buffer) {
  *out_buffer = NULL;
  halo_buffer_t *buffer = calloc(1, sizeof(*buffer));
  if (!buffer) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  buffer->client = client;
  buffer->handle = reply->handle;
  buffer->size = reply->size;
  buffer->memory_type = (halo_memory_type_t)reply->memory_type;
  halo_status_t status = NULL;
  if (buffer->memory_type == HALO_MEMORY_HOST_VISIBLE) {
    const Halo__Wire__HostPlacement *placement = reply->placement;
    if (!placement || placement->offset > placement->arena_size ||
        buffer->size > placement->arena_size - placement->offset) {
      status = halo_status_make(HALO_STATUS_INTERNAL,
                                "halod sent a host buffer without a valid "
                                "placement");
    } else {
      void *arena = NULL;
      status = halo_client_map_arena(client, placement->arena_id,
                                     placement->arena_size, &arena);
      if (!status) {
        buffer->arena_id = placement->arena_id;
        buffer->host_pointer = (uint8_t *)arena + placement->offset;
      }
    }
  }
  if (status) {
    // The daemon holds a handle we cannot use: give it back.
    Halo__Wire__BufferRelease release = HALO__WIRE__BUFFER_RELEASE__INIT;
    release.handle = buffer->handle;
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
    request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE;
    request.buffer_release = &release;
    halo_status_free(halo_client_call_status(client, &request));
    free(buffer);
    return status;
  }
  halo_client_track(client, &buffer->link, HALO_OBJECT_BUFFER);
  *out_buffer = buffer;
  return NULL;
}

// Builds a halo_buffer_t from a response carrying a BufferReply.
static halo_status_t halo_buffer_from_reply(
    halo_client_t *client, const halo_wire_response_t *response,
    halo_buffer_t **out_buffer) {
  *out_buffer = NULL;
  if (response->body_case != HALO__WIRE__RESPONSE__BODY_BUFFER) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "halod answered with no buffer");
  }
  return halo_buffer_from_buffer_reply(client, response->buffer, out_buffer);
}

halo_status_t halo_buffer_create(halo_client_t *client, uint32_t device,
                                 halo_memory_type_t memory_type, uint64_t size,
                                 uint32_t flags, halo_buffer_t **out_buffer) {
  HALO_CHECK_ARG(out_buffer, "out_buffer must not be NULL");
  *out_buffer = NULL;
  HALO_CHECK_ARG(client, "client must not be NULL");
  HALO_CHECK_ARG(memory_type == HALO_MEMORY_DEVICE ||
                     memory_type == HALO_MEMORY_HOST_VISIBLE,
                 "memory_type %d is not a halo_memory_type_t", memory_type);
  HALO_CHECK_ARG((flags & ~HALO_OBJECT_FLAG_EXPORTABLE) == 0,
                 "unknown buffer flags 0x%x", flags);
  Halo__Wire__BufferCreate create = HALO__WIRE__BUFFER_CREATE__INIT;
  create.device = device;
  create.size = size;
  create.memory_type = (Halo__Wire__MemoryType)memory_type;
  create.has_flags = true;
  create.flags = flags;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_CREATE;
  request.buffer_create = &create;
  halo_wire_response_t *response;
  HALO_RETURN_IF_ERROR(halo_client_call(client, &request, &response));
  halo_status_t status = halo_buffer_from_reply(client, response, out_buffer);
  halo__wire__response__free_unpacked(response, NULL);
  return status;
}

void halo_buffer_release_link(halo_object_link_t *link) {
  halo_buffer_t *buffer = (halo_buffer_t *)link;
  halo_client_t *client = buffer->client;
  halo_client_untrack(client, &buffer->link);
  // After a dealloca the daemon holds no handle: nothing to send (and no
  // round trip on the hot path).
  if (!atomic_load(&buffer->deallocated)) {
    Halo__Wire__BufferRelease release = HALO__WIRE__BUFFER_RELEASE__INIT;
    release.handle = buffer->handle;
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
    request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE;
    request.buffer_release = &release;
    // A failure here (daemon gone) leaves nothing to release: the daemon
    // frees a session's objects when its connection ends.
    halo_status_free(halo_client_call_status(client, &request));
  }
  if (buffer->host_pointer) halo_client_unmap_arena(client, buffer->arena_id);
  free(buffer);
}

void halo_buffer_release(halo_buffer_t *buffer) {
  if (buffer) halo_buffer_release_link(&buffer->link);
}

uint64_t halo_buffer_size(const halo_buffer_t *buffer) {
  return buffer ? buffer->size : 0;
}

halo_memory_type_t halo_buffer_memory_type(const halo_buffer_t *buffer) {
  return buffer ? buffer->memory_type : HALO_MEMORY_DEVICE;
}

uint64_t halo_buffer_handle(const halo_buffer_t *buffer) {
  return buffer ? buffer->handle : 0;
}

halo_client_t *halo_buffer_client(const halo_buffer_t *buffer) {
  return buffer->client;
}

void *halo_buffer_host_pointer(const halo_buffer_t *buffer) {
  if (!buffer || atomic_load(&buffer->deallocated)) return NULL;
  // In a forked child the mapping is the parent session's memory.
  if (halo_client_inherited(buffer->client)) return NULL;
  return buffer->host_pointer;
}

halo_status_t halo_buffer_check_live(const halo_buffer_t *buffer) {
  if (atomic_load(&buffer->deallocated)) {
    return halo_status_make(HALO_STATUS_NOT_FOUND,
                            "buffer handle 0x%llx was deallocated "
                            "(halo_queue_dealloca); only "
                            "halo_buffer_release may follow",
                            (unsigned long long)buffer->handle);
  }
  return NULL;
}

void halo_buffer_set_deallocated(halo_buffer_t *buffer) {
  atomic_store(&buffer->deallocated, true);
}

static halo_status_t halo_buffer_check_range(const halo_buffer_t *buffer,
                                             uint64_t offset, uint64_t length) {
  HALO_RETURN_IF_ERROR(halo_buffer_check_live(buffer));
  if (offset > buffer->size || length > buffer->size - offset) {
    return halo_status_make(
        HALO_STATUS_OUT_OF_RANGE,
        "range [%llu, %llu + %llu) exceeds the buffer's "
        "%llu bytes",
        (unsigned long long)offset, (unsigned long long)offset,
        (unsigned long long)length, (unsigned long long)buffer->size);
  }
  return NULL;
}

halo_status_t halo_buffer_write(halo_buffer_t *buffer, uint64_t offset,
                                const void *data, uint64_t length) {
  HALO_CHECK_ARG(buffer, "buffer must not be NULL");
  HALO_CHECK_ARG(data || length == 0, "data must not be NULL");
  // A host-visible buffer's bytes are the parent session's in a forked
  // child, as a device buffer's requests would be.
  HALO_RETURN_IF_ERROR(halo_client_check_process(buffer->client));
  HALO_RETURN_IF_ERROR(halo_buffer_check_range(buffer, offset, length));
  if (buffer->host_pointer) {
    // |data| may be NULL for 0 bytes, which memcpy does not allow.
    if (length > 0) memcpy(buffer->host_pointer + offset, data, (size_t)length);
    return NULL;
  }
  const uint8_t *bytes = data;
  // Each chunk's request fits in a message halod accepts.
  uint64_t most = halo_client_write_chunk_bytes(buffer->client);
  uint64_t done = 0;
  do {
    uint64_t chunk = length - done;
    if (chunk > most) chunk = most;
    Halo__Wire__BufferWrite write = HALO__WIRE__BUFFER_WRITE__INIT;
    write.handle = buffer->handle;
    write.offset = offset + done;
    write.data.data = (uint8_t *)bytes + done;
    write.data.len = (size_t)chunk;
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
    request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_WRITE;
    request.buffer_write = &write;
    HALO_RETURN_IF_ERROR(halo_client_call_status(buffer->client, &request));
    done += chunk;
  } while (done < length);
  return NULL;
}

halo_status_t halo_buffer_read(halo_buffer_t *buffer, uint64_t offset,
                               void *out_data, uint64_t length) {
  HALO_CHECK_ARG(buffer, "buffer must not be NULL");
  HALO_CHECK_ARG(out_data || length == 0, "out_data must not be NULL");
  HALO_RETURN_IF_ERROR(halo_client_check_process(buffer->client));
  HALO_RETURN_IF_ERROR(halo_buffer_check_range(buffer, offset, length));
  if (buffer->host_pointer) {
    // |out_data| may be NULL for 0 bytes, which memcpy does not allow.
    if (length > 0)
      memcpy(out_data, buffer->host_pointer + offset, (size_t)length);
    return NULL;
  }
  uint8_t *bytes = out_data;
  uint64_t done = 0;
  // The requests are small whatever the chunk; max-message-bytes bounds
  // what halod receives, not its replies.
  while (done < length) {
    uint64_t chunk = length - done;
    if (chunk > HALO_WIRE_MAX_CHUNK_BYTES) chunk = HALO_WIRE_MAX_CHUNK_BYTES;
    Halo__Wire__BufferRead read = HALO__WIRE__BUFFER_READ__INIT;
    read.handle = buffer->handle;
    read.offset = offset + done;
    read.length = chunk;
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
    request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_READ;
    request.buffer_read = &read;
    halo_wire_response_t *response;
    HALO_RETURN_IF_ERROR(halo_client_call(buffer->client, &request, &response));
    halo_status_t status = NULL;
    if (response->body_case != HALO__WIRE__RESPONSE__BODY_BUFFER_READ ||
        response->buffer_read->data.len != chunk) {
      status = halo_status_make(HALO_STATUS_INTERNAL,
                                "halod answered BufferRead with a wrong body");
    } else {
      memcpy(bytes + done, response->buffer_read->data.data, (size_t)chunk);
    }
    halo__wire__response__free_unpacked(response, NULL);
    HALO_RETURN_IF_ERROR(status);
    done += chunk;
  }
  return NULL;
}

halo_status_t halo_buffer_export(halo_buffer_t *buffer,
                                 halo_token_t *out_token) {
  HALO_CHECK_ARG(out_token, "out_token must not be NULL");
  memset(out_token, 0, sizeof(*out_token));
  HALO_CHECK_ARG(buffer, "buffer must not be NULL");
  HALO_RETURN_IF_ERROR(halo_buffer_check_live(buffer));
  Halo__Wire__Export body = HALO__WIRE__EXPORT__INIT;
  body.handle = buffer->handle;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_EXPORT;
  request.buffer_export = &body;
  return halo_client_export(buffer->client, &request, out_token);
}

halo_status_t halo_buffer_import(halo_client_t *client,
                                 const halo_token_t *token,
                                 halo_buffer_t **out_buffer) {
  HALO_CHECK_ARG(out_buffer, "out_buffer must not be NULL");
  *out_buffer = NULL;
  HALO_CHECK_ARG(client, "client must not be NULL");
  HALO_CHECK_ARG(token, "token must not be NULL");
  Halo__Wire__Import body = HALO__WIRE__IMPORT__INIT;
  body.token.data = (uint8_t *)token->bytes;
  body.token.len = sizeof(token->bytes);
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_IMPORT;
  request.buffer_import = &body;
  halo_wire_response_t *response;
  HALO_RETURN_IF_ERROR(halo_client_call(client, &request, &response));
  halo_status_t status = halo_buffer_from_reply(client, response, out_buffer);
  halo__wire__response__free_unpacked(response, NULL);
  return status;
}
