// The client socket's requests: decoded on the loop thread, dispatched by
// body type, answered with a status and a body.
#include "daemon/requests.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "daemon/buffer.h"
#include "daemon/command_buffer.h"
#include "daemon/daemon.h"
#include "daemon/executable.h"
#include "daemon/queue.h"
#include "daemon/semaphore.h"
#include "daemon/session.h"
#include "daemon/submission.h"
#include "daemon/workers.h"

void halod_reply(halod_server_context_t *context,
                 const Halo__Wire__Response *response) {
  nng_msg *message = NULL;
  halo_status_t status = halo_wire_pack(&response->base, &message);
  if (status) {
    HALO_LOG_ERROR("cannot pack a response: %s", halo_status_message(status));
    halo_status_free(status);
    // Still answer so the context serves again: an empty message does not
    // decode, and the client reports that.
    if (nng_msg_alloc(&message, 0) != 0) return;
  }
  halod_server_reply(context, message);
}

void halod_reply_status(halod_server_context_t *context, halo_status_t status) {
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.code = (int32_t)halo_status_code(status);
  if (status) response.message = (char *)halo_status_message(status);
  halod_reply(context, &response);
  halo_status_free(status);
}

// A reply under construction: status plus body.
typedef struct halod_request_t {
  halod_t *daemon;
  halod_session_t *session;
  Halo__Wire__Response response;
  // Answered elsewhere (an executable load finishes off the loop thread).
  halod_server_context_t *context;
  bool deferred;
} halod_request_t;

static halo_status_t halod_hello(halod_request_t *request,
                                 const Halo__Wire__Hello *hello,
                                 Halo__Wire__HelloReply *reply) {
  halod_session_t *session = request->session;
  if (session->hello_done) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "Hello was already received on this session");
  }
  if (request->daemon->draining) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE,
                            "halod is draining before a restart (haloctl "
                            "drain); connect again once it is back");
  }
  if (hello->protocol_version != HALO_PROTOCOL_VERSION) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "protocol version %u is not supported (halod "
                            "speaks %u); use a matching libhalo",
                            hello->protocol_version, HALO_PROTOCOL_VERSION);
  }
  if (hello->client_name) {
    snprintf(session->client_name, sizeof(session->client_name), "%s",
             hello->client_name);
  }
  session->hello_done = true;
  reply->protocol_version = HALO_PROTOCOL_VERSION;
  reply->daemon_version = HALO_VERSION_STRING;
  reply->session_id = session->id;
  reply->session_token.data = session->token;
  reply->session_token.len = sizeof(session->token);
  reply->fd_channel_path = request->daemon->fd_channel_path;
  reply->incarnation = request->daemon->incarnation;
  reply->trust_domain = session->domain->name;
  reply->max_message_bytes = request->daemon->config.max_message_bytes;
  request->response.body_case = HALO__WIRE__RESPONSE__BODY_HELLO;
  request->response.hello = reply;
  return NULL;
}

void halod_fill_device_info(const halo_hal_device_info_t *device,
                            uint32_t ordinal, Halo__Wire__DeviceInfo *info) {
  halo__wire__device_info__init(info);
  info->ordinal = ordinal;
  info->driver = (char *)device->driver;
  info->name = (char *)device->name;
  info->memory_bytes = device->memory_bytes;
  info->has_compute_major = info->has_compute_minor = true;
  info->compute_major = device->compute_major;
  info->compute_minor = device->compute_minor;
  info->has_multiprocessor_count = true;
  info->multiprocessor_count = device->multiprocessor_count;
}

static halo_status_t halod_semaphore_lookup(halod_session_t *session,
                                            uint64_t handle,
                                            halod_semaphore_t **out) {
  return halod_handle_table_lookup(&session->handles, handle,
                                   HALOD_OBJECT_SEMAPHORE, (void **)out);
}

static halo_status_t halod_buffer_lookup(halod_session_t *session,
                                         uint64_t handle,
                                         halod_buffer_t **out) {
  return halod_handle_table_lookup(&session->handles, handle,
                                   HALOD_OBJECT_BUFFER, (void **)out);
}

static halo_status_t halod_requests_check_draining(const halod_t *daemon) {
  if (daemon->draining) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE,
                            "halod is draining before a restart "
                            "(haloctl drain): no new submissions");
  }
  return NULL;
}

halo_status_t halod_requests_queue_execute(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__QueueExecute *request, uint64_t *out_submission_id) {
  *out_submission_id = 0;
  HALO_RETURN_IF_ERROR(halod_requests_check_draining(daemon));
  return halod_submission_create(daemon, session, request, out_submission_id);
}

halo_status_t halod_requests_queue_alloca(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__QueueAlloca *request, halod_buffer_t **out_buffer,
    uint64_t *out_handle, uint64_t *out_submission_id) {
  *out_buffer = NULL;
  *out_handle = 0;
  *out_submission_id = 0;
  HALO_RETURN_IF_ERROR(halod_requests_check_draining(daemon));
  return halod_submission_create_alloca(daemon, session, request, out_buffer,
                                        out_handle, out_submission_id);
}

halo_status_t halod_requests_queue_dealloca(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__QueueDealloca *request, uint64_t *out_submission_id) {
  *out_submission_id = 0;
  HALO_RETURN_IF_ERROR(halod_requests_check_draining(daemon));
  return halod_submission_create_dealloca(daemon, session, request,
                                          out_submission_id);
}

halo_status_t halod_requests_semaphore_signal(halod_t *daemon,
                                              halod_session_t *session,
                                              uint64_t handle, uint64_t value) {
  (void)daemon;
  halod_semaphore_t *semaphore;
  HALO_RETURN_IF_ERROR(halod_semaphore_lookup(session, handle, &semaphore));
  return halod_semaphore_signal(semaphore, value);
}

static void halod_fill_semaphore_reply(const halod_semaphore_t *semaphore,
                                       uint64_t handle,
                                       Halo__Wire__SemaphoreReply *reply) {
  reply->handle = handle;
  reply->page_id = semaphore->page->id;
  reply->slot = semaphore->slot_index;
  reply->generation = semaphore->generation;
}

static void halod_fill_buffer_reply(const halod_buffer_t *buffer,
                                    uint64_t handle,
                                    Halo__Wire__BufferReply *reply,
                                    Halo__Wire__HostPlacement *placement) {
  reply->handle = handle;
  reply->size = buffer->size;
  reply->memory_type = (Halo__Wire__MemoryType)buffer->memory_type;
  if (buffer->arena) {
    placement->arena_id = buffer->arena->id;
    placement->arena_size = buffer->arena->size;
    placement->offset = buffer->offset;
    reply->placement = placement;
  }
}

// Storage for reply bodies: lives until the response is packed.
typedef struct halod_reply_bodies_t {
  Halo__Wire__HelloReply hello;
  Halo__Wire__PingReply ping;
  Halo__Wire__DeviceListReply device_list;
  Halo__Wire__DeviceInfo device_infos[HALO_HAL_MAX_DEVICES];
  Halo__Wire__DeviceInfo *device_info_pointers[HALO_HAL_MAX_DEVICES];
  Halo__Wire__BufferReply buffer;
  Halo__Wire__HostPlacement placement;
  Halo__Wire__BufferReadReply buffer_read;
  Halo__Wire__ExportReply exported;
  Halo__Wire__SemaphoreReply semaphore;
  Halo__Wire__SemaphoreQueryReply semaphore_query;
  Halo__Wire__CommandBufferReply command_buffer;
  Halo__Wire__QueueReply queue;
  Halo__Wire__QueueExecuteReply queue_execute;
  uint8_t token[16];
  void *heap;  // freed after packing
} halod_reply_bodies_t;

// Exports |object| once (later exports return the same token) and copies
// its token to |out_token|. FAILED_PRECONDITION unless it was created
// exportable.
static halo_status_t halod_export_object(halod_t *daemon, uint32_t type,
                                         void *object, uint64_t handle,
                                         bool exportable, bool *exported,
                                         uint8_t token[16],
                                         uint8_t out_token[16]) {
  if (!exportable) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "%s handle 0x%llx was not created exportable "
                            "(HALO_OBJECT_FLAG_EXPORTABLE)",
                            halod_object_type_name(type),
                            (unsigned long long)handle);
  }
  if (!*exported) {
    HALO_RETURN_IF_ERROR(halod_export_create(daemon, type, object, token));
    *exported = true;
  }
  memcpy(out_token, token, 16);
  return NULL;
}

// A lost session (daemon/workers.h) may still learn why its semaphores
// failed and release its handles.
static bool halod_request_allowed_when_lost(const Halo__Wire__Request *wire) {
  switch (wire->body_case) {
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY:
    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_RELEASE:
    case HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE:
    case HALO__WIRE__REQUEST__BODY_EXECUTABLE_RELEASE:
    case HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_RELEASE:
    case HALO__WIRE__REQUEST__BODY_QUEUE_RELEASE:
      return true;
    default:
      return false;
  }
}

static halo_status_t halod_dispatch(halod_request_t *request,
                                    const Halo__Wire__Request *wire,
                                    halod_reply_bodies_t *bodies) {
  halod_t *daemon = request->daemon;
  halod_session_t *session = request->session;
  Halo__Wire__Response *response = &request->response;
  if (wire->body_case == HALO__WIRE__REQUEST__BODY_HELLO) {
    halo__wire__hello_reply__init(&bodies->hello);
    return halod_hello(request, wire->hello, &bodies->hello);
  }
  if (!session->hello_done) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "the first request of a session must be Hello");
  }
  if (session->lost_reason && !halod_request_allowed_when_lost(wire)) {
    return halo_status_make(HALO_STATUS_SESSION_LOST, "%s",
                            session->lost_reason);
  }
  // Body numbers 100 and up are admin requests (proto/halo.proto).
  if (wire->body_case >= HALO__WIRE__REQUEST__BODY_ADMIN_STATUS) {
    return halo_status_make(HALO_STATUS_PERMISSION_DENIED,
                            "admin requests are served on the admin socket "
                            "only");
  }
  switch (wire->body_case) {
    case HALO__WIRE__REQUEST__BODY_PING:
      halo__wire__ping_reply__init(&bodies->ping);
      if (wire->ping->has_payload) {
        bodies->ping.has_payload = true;
        bodies->ping.payload = wire->ping->payload;
      }
      response->body_case = HALO__WIRE__RESPONSE__BODY_PING;
      response->ping = &bodies->ping;
      return NULL;

    case HALO__WIRE__REQUEST__BODY_DEVICE_LIST: {
      halo__wire__device_list_reply__init(&bodies->device_list);
      for (uint32_t i = 0; i < daemon->hal.device_count; ++i) {
        halod_fill_device_info(halod_device_info(daemon, i), i,
                               &bodies->device_infos[i]);
        bodies->device_info_pointers[i] = &bodies->device_infos[i];
      }
      bodies->device_list.n_devices = daemon->hal.device_count;
      bodies->device_list.devices = bodies->device_info_pointers;
      response->body_case = HALO__WIRE__RESPONSE__BODY_DEVICE_LIST;
      response->device_list = &bodies->device_list;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_BUFFER_CREATE: {
      const Halo__Wire__BufferCreate *create = wire->buffer_create;
      if (create->flags & ~1u) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "BufferCreate: unknown flags 0x%x",
                                create->flags & ~1u);
      }
      halod_buffer_t *buffer = NULL;
      HALO_RETURN_IF_ERROR(halod_buffer_create(
          daemon, session, create->device, (uint32_t)create->memory_type,
          create->size, create->flags & 1u, &buffer));
      uint64_t handle;
      HALO_RETURN_IF_ERROR(
          halod_session_add_buffer(daemon, session, buffer, &handle));
      halo__wire__buffer_reply__init(&bodies->buffer);
      halo__wire__host_placement__init(&bodies->placement);
      halod_fill_buffer_reply(buffer, handle, &bodies->buffer,
                              &bodies->placement);
      response->body_case = HALO__WIRE__RESPONSE__BODY_BUFFER;
      response->buffer = &bodies->buffer;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE:
      return halod_session_release_buffer(daemon, session,
                                          wire->buffer_release->handle);

    case HALO__WIRE__REQUEST__BODY_BUFFER_WRITE: {
      const Halo__Wire__BufferWrite *write = wire->buffer_write;
      halod_buffer_t *buffer;
      HALO_RETURN_IF_ERROR(
          halod_buffer_lookup(session, write->handle, &buffer));
      return halod_buffer_write(buffer, write->offset, write->data.data,
                                write->data.len);
    }

    case HALO__WIRE__REQUEST__BODY_BUFFER_READ: {
      const Halo__Wire__BufferRead *read = wire->buffer_read;
      halod_buffer_t *buffer;
      HALO_RETURN_IF_ERROR(halod_buffer_lookup(session, read->handle, &buffer));
      if (read->length > HALO_WIRE_MAX_CHUNK_BYTES) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "BufferRead of %llu bytes exceeds the chunk "
                                "limit of %u",
                                (unsigned long long)read->length,
                                HALO_WIRE_MAX_CHUNK_BYTES);
      }
      HALO_RETURN_IF_ERROR(
          halod_buffer_check_range(buffer, read->offset, read->length));
      bodies->heap = malloc(read->length ? read->length : 1);
      if (!bodies->heap) {
        return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
      }
      HALO_RETURN_IF_ERROR(
          halod_buffer_read(buffer, read->offset, bodies->heap, read->length));
      halo__wire__buffer_read_reply__init(&bodies->buffer_read);
      bodies->buffer_read.data.data = bodies->heap;
      bodies->buffer_read.data.len = read->length;
      response->body_case = HALO__WIRE__RESPONSE__BODY_BUFFER_READ;
      response->buffer_read = &bodies->buffer_read;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_BUFFER_EXPORT: {
      halod_buffer_t *buffer;
      HALO_RETURN_IF_ERROR(
          halod_buffer_lookup(session, wire->buffer_export->handle, &buffer));
      HALO_RETURN_IF_ERROR(halod_export_object(
          daemon, HALOD_OBJECT_BUFFER, buffer, wire->buffer_export->handle,
          buffer->exportable, &buffer->exported, buffer->token, bodies->token));
      goto reply_token;
    }

    case HALO__WIRE__REQUEST__BODY_BUFFER_IMPORT: {
      const ProtobufCBinaryData *token = &wire->buffer_import->token;
      void *object;
      HALO_RETURN_IF_ERROR(halod_export_lookup(daemon, token->data, token->len,
                                               HALOD_OBJECT_BUFFER, &object));
      halod_buffer_t *buffer = object;
      halod_buffer_retain(buffer);
      uint64_t handle;
      HALO_RETURN_IF_ERROR(
          halod_session_add_buffer(daemon, session, buffer, &handle));
      halo__wire__buffer_reply__init(&bodies->buffer);
      halo__wire__host_placement__init(&bodies->placement);
      halod_fill_buffer_reply(buffer, handle, &bodies->buffer,
                              &bodies->placement);
      response->body_case = HALO__WIRE__RESPONSE__BODY_BUFFER;
      response->buffer = &bodies->buffer;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE: {
      const Halo__Wire__SemaphoreCreate *create = wire->semaphore_create;
      if (create->flags & ~1u) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "SemaphoreCreate: unknown flags 0x%x",
                                create->flags & ~1u);
      }
      halod_semaphore_t *semaphore;
      HALO_RETURN_IF_ERROR(
          halod_semaphore_create(daemon, session, create->initial_value,
                                 create->flags & 1u, &semaphore));
      uint64_t handle;
      HALO_RETURN_IF_ERROR(
          halod_session_add_semaphore(daemon, session, semaphore, &handle));
      halo__wire__semaphore_reply__init(&bodies->semaphore);
      halod_fill_semaphore_reply(semaphore, handle, &bodies->semaphore);
      response->body_case = HALO__WIRE__RESPONSE__BODY_SEMAPHORE;
      response->semaphore = &bodies->semaphore;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_SIGNAL:
      return halod_requests_semaphore_signal(daemon, session,
                                             wire->semaphore_signal->handle,
                                             wire->semaphore_signal->value);

    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_FAIL: {
      const Halo__Wire__SemaphoreFail *fail = wire->semaphore_fail;
      halod_semaphore_t *semaphore;
      HALO_RETURN_IF_ERROR(
          halod_semaphore_lookup(session, fail->handle, &semaphore));
      if (fail->code <= 0 || fail->code >= HALO_STATUS_CODE_COUNT) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "SemaphoreFail: code %d is not a failure "
                                "status code (1..%d)",
                                fail->code, HALO_STATUS_CODE_COUNT - 1);
      }
      halod_semaphore_fail(semaphore, (halo_status_code_t)fail->code, "%s",
                           fail->message ? fail->message : "");
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY: {
      halod_semaphore_t *semaphore;
      HALO_RETURN_IF_ERROR(halod_semaphore_lookup(
          session, wire->semaphore_query->handle, &semaphore));
      halo__wire__semaphore_query_reply__init(&bodies->semaphore_query);
      bodies->semaphore_query.value = halod_semaphore_value(semaphore);
      bodies->semaphore_query.failure_code = halod_semaphore_failure(semaphore);
      bodies->semaphore_query.failure_message = semaphore->hal.failure_message;
      response->body_case = HALO__WIRE__RESPONSE__BODY_SEMAPHORE_QUERY;
      response->semaphore_query = &bodies->semaphore_query;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_RELEASE:
      return halod_session_release_semaphore(daemon, session,
                                             wire->semaphore_release->handle);

    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_EXPORT: {
      halod_semaphore_t *semaphore;
      HALO_RETURN_IF_ERROR(halod_semaphore_lookup(
          session, wire->semaphore_export->handle, &semaphore));
      HALO_RETURN_IF_ERROR(halod_export_object(
          daemon, HALOD_OBJECT_SEMAPHORE, semaphore,
          wire->semaphore_export->handle, semaphore->exportable,
          &semaphore->exported, semaphore->token, bodies->token));
      goto reply_token;
    }

    case HALO__WIRE__REQUEST__BODY_SEMAPHORE_IMPORT: {
      const ProtobufCBinaryData *token = &wire->semaphore_import->token;
      void *object;
      HALO_RETURN_IF_ERROR(halod_export_lookup(
          daemon, token->data, token->len, HALOD_OBJECT_SEMAPHORE, &object));
      halod_semaphore_t *semaphore = object;
      halod_semaphore_retain(semaphore);
      uint64_t handle;
      HALO_RETURN_IF_ERROR(
          halod_session_add_semaphore(daemon, session, semaphore, &handle));
      halo__wire__semaphore_reply__init(&bodies->semaphore);
      halod_fill_semaphore_reply(semaphore, handle, &bodies->semaphore);
      response->body_case = HALO__WIRE__RESPONSE__BODY_SEMAPHORE;
      response->semaphore = &bodies->semaphore;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_EXECUTABLE_CREATE:
      // Compiles and loads run off the loop; the reply comes from there.
      request->deferred = true;
      halod_executable_load(daemon, session, wire->executable_create,
                            request->context);
      return NULL;

    case HALO__WIRE__REQUEST__BODY_EXECUTABLE_RELEASE:
      return halod_session_release_object(daemon, session,
                                          HALOD_OBJECT_EXECUTABLE,
                                          wire->executable_release->handle);

    case HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_CREATE: {
      halod_command_buffer_t *command_buffer;
      HALO_RETURN_IF_ERROR(halod_command_buffer_create(
          daemon, session, wire->command_buffer_create, &command_buffer));
      uint64_t handle;
      HALO_RETURN_IF_ERROR(halod_session_add_object(daemon, session,
                                                    HALOD_OBJECT_COMMAND_BUFFER,
                                                    command_buffer, &handle));
      halo__wire__command_buffer_reply__init(&bodies->command_buffer);
      bodies->command_buffer.handle = handle;
      bodies->command_buffer.memo_hit = command_buffer->memo_hit;
      bodies->command_buffer.memo_key = command_buffer->entry->key_text;
      response->body_case = HALO__WIRE__RESPONSE__BODY_COMMAND_BUFFER;
      response->command_buffer = &bodies->command_buffer;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_RELEASE:
      return halod_session_release_object(daemon, session,
                                          HALOD_OBJECT_COMMAND_BUFFER,
                                          wire->command_buffer_release->handle);

    case HALO__WIRE__REQUEST__BODY_QUEUE_CREATE: {
      halod_queue_t *queue;
      HALO_RETURN_IF_ERROR(
          halod_queue_create(daemon, session, wire->queue_create->device,
                             wire->queue_create->priority, &queue));
      uint64_t handle;
      HALO_RETURN_IF_ERROR(halod_session_add_object(
          daemon, session, HALOD_OBJECT_QUEUE, queue, &handle));
      queue->handle = handle;
      halo__wire__queue_reply__init(&bodies->queue);
      bodies->queue.handle = handle;
      response->body_case = HALO__WIRE__RESPONSE__BODY_QUEUE;
      response->queue = &bodies->queue;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_QUEUE_RELEASE:
      return halod_session_release_object(daemon, session, HALOD_OBJECT_QUEUE,
                                          wire->queue_release->handle);

    case HALO__WIRE__REQUEST__BODY_QUEUE_EXECUTE: {
      uint64_t id;
      HALO_RETURN_IF_ERROR(halod_requests_queue_execute(
          daemon, session, wire->queue_execute, &id));
      halo__wire__queue_execute_reply__init(&bodies->queue_execute);
      bodies->queue_execute.submission_id = id;
      response->body_case = HALO__WIRE__RESPONSE__BODY_QUEUE_EXECUTE;
      response->queue_execute = &bodies->queue_execute;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_QUEUE_ALLOCA: {
      halod_buffer_t *buffer;
      uint64_t handle, id;
      HALO_RETURN_IF_ERROR(halod_requests_queue_alloca(
          daemon, session, wire->queue_alloca, &buffer, &handle, &id));
      halo__wire__buffer_reply__init(&bodies->buffer);
      halo__wire__host_placement__init(&bodies->placement);
      halod_fill_buffer_reply(buffer, handle, &bodies->buffer,
                              &bodies->placement);
      bodies->buffer.has_submission_id = true;
      bodies->buffer.submission_id = id;
      response->body_case = HALO__WIRE__RESPONSE__BODY_BUFFER;
      response->buffer = &bodies->buffer;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY_QUEUE_DEALLOCA: {
      uint64_t id;
      HALO_RETURN_IF_ERROR(halod_requests_queue_dealloca(
          daemon, session, wire->queue_dealloca, &id));
      halo__wire__queue_execute_reply__init(&bodies->queue_execute);
      bodies->queue_execute.submission_id = id;
      response->body_case = HALO__WIRE__RESPONSE__BODY_QUEUE_EXECUTE;
      response->queue_execute = &bodies->queue_execute;
      return NULL;
    }

    case HALO__WIRE__REQUEST__BODY__NOT_SET:
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "request has no body (unknown request type?)");

    default:
      return halo_status_make(HALO_STATUS_UNIMPLEMENTED,
                              "request type %d is not known to this halod",
                              (int)wire->body_case);
  }

reply_token:
  halo__wire__export_reply__init(&bodies->exported);
  bodies->exported.token.data = bodies->token;
  bodies->exported.token.len = 16;
  response->body_case = HALO__WIRE__RESPONSE__BODY_EXPORTED;
  response->exported = &bodies->exported;
  return NULL;
}

static halod_session_t *halod_session_for_pipe(halod_t *daemon,
                                               uint32_t pipe_id) {
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions_by_pipe, pipe_id);
  if (session) return session;
  // A request raced ahead of its pipe event: read the credentials now. A pipe
  // that is already gone fails here and gets no session.
  nng_pipe pipe = NNG_PIPE_INITIALIZER;
  pipe.id = pipe_id;
  uint64_t uid, pid;
  if (nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_UID, &uid) ||
      nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_PID, &pid)) {
    return NULL;
  }
  halo_status_t status = halod_session_create(daemon, pipe_id, (uint32_t)uid,
                                              (uint32_t)pid, &session);
  if (status) {
    halo_log(halo_status_code(status) == HALO_STATUS_PERMISSION_DENIED
                 ? HALO_LOG_DEBUG
                 : HALO_LOG_ERROR,
             "pipe %u: %s", pipe_id, halo_status_message(status));
    halo_status_free(status);
    halod_server_close_pipe(pipe_id);
    return NULL;
  }
  return session;
}

static void halod_requests_serve(halod_t *daemon, halod_server_event_t *event) {
  halod_session_t *session = halod_session_for_pipe(daemon, event->pipe_id);
  if (!session) {
    halod_reply_status(
        event->context,
        halo_status_make(HALO_STATUS_UNAVAILABLE, "connection is closing"));
    return;
  }
  ++session->requests;
  Halo__Wire__Request *wire = halo__wire__request__unpack(
      NULL, nng_msg_len(event->message), nng_msg_body(event->message));
  if (!wire) {
    HALO_LOG_DEBUG("session %llu: undecodable request of %zu bytes",
                   (unsigned long long)session->id,
                   nng_msg_len(event->message));
    halod_reply_status(
        event->context,
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                         "request of %zu bytes does not decode as a "
                         "halo.wire.Request (malformed or truncated)",
                         nng_msg_len(event->message)));
    return;
  }
  halod_request_t request = {
      .daemon = daemon, .session = session, .context = event->context};
  halo__wire__response__init(&request.response);
  halod_reply_bodies_t *bodies = calloc(1, sizeof(*bodies));
  halo_status_t status =
      bodies ? halod_dispatch(&request, wire, bodies)
             : halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  if (status) {
    HALO_LOG_DEBUG("session %llu: request %d: %s",
                   (unsigned long long)session->id, (int)wire->body_case,
                   halo_status_message(status));
    halod_reply_status(event->context, status);
  } else if (!request.deferred) {
    halod_reply(event->context, &request.response);
  }
  if (bodies) free(bodies->heap);
  free(bodies);
  halo__wire__request__free_unpacked(wire, NULL);
}

void halod_requests_on_event(void *user_data, halod_server_event_t *event) {
  halod_t *daemon = user_data;
  switch (event->kind) {
    case HALOD_SERVER_EVENT_PIPE_ADDED: {
      if (halo_u64_map_get(&daemon->sessions_by_pipe, event->pipe_id)) break;
      // nng runs the ADD and REM callbacks on different threads, unordered:
      // a pipe whose removal was queued first gets no session.
      if (halo_u64_map_remove(&daemon->removed_pipes, event->pipe_id)) break;
      halod_session_t *session;
      halo_status_t status = halod_session_create(
          daemon, event->pipe_id, (uint32_t)event->peer_uid,
          (uint32_t)event->peer_pid, &session);
      if (status) {
        // A killed client dialing again is expected, and often.
        halo_log(halo_status_code(status) == HALO_STATUS_PERMISSION_DENIED
                     ? HALO_LOG_DEBUG
                     : HALO_LOG_ERROR,
                 "pipe %u: %s; closing it", event->pipe_id,
                 halo_status_message(status));
        halo_status_free(status);
        halod_server_close_pipe(event->pipe_id);
      }
      break;
    }
    case HALOD_SERVER_EVENT_PIPE_REMOVED: {
      halod_session_t *session =
          halo_u64_map_get(&daemon->sessions_by_pipe, event->pipe_id);
      if (session) {
        halod_session_destroy(daemon, session);
      } else {
        // Removed before its ADD event was handled (see above). Pipe ids are
        // not reused soon; the set is pruned when it grows large.
        if (daemon->removed_pipes.count > 4096) {
          halo_u64_map_deinitialize(&daemon->removed_pipes);
        }
        halo_status_free(halo_u64_map_put(&daemon->removed_pipes,
                                          event->pipe_id, (void *)1));
      }
      break;
    }
    case HALOD_SERVER_EVENT_REQUEST:
      halod_requests_serve(daemon, event);
      break;
  }
  halod_server_event_free(event);
}
