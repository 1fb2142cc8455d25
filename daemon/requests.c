// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
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
#include "daemon/device_call.h"
#include "daemon/executable.h"
#include "daemon/operation.h"
#include "daemon/queue.h"
#include "daemon/request_lanes.h"
#include "daemon/request_scan.h"
#include "daemon/semaphore.h"
#include "daemon/session.h"
#include "daemon/submission.h"
#include "daemon/workers.h"
#include "hal/remote/remote_device.h"

// A reply's message, packed in a frame of its own: the ASan tree's
// LeakSanitizer suppression for nng's lost reply names this function
// (tests/lsan.supp), so that no other allocation is covered.
__attribute__((noinline)) static halo_status_t halod_reply_pack(
    const Halo__Wire__Response *response, nng_msg **out_message) {
  halo_status_t status = halo_wire_pack(&response->base, out_message);
  // Not a tail call: this frame stays on the stack while nng allocates.
  __asm__ volatile("" ::: "memory");
  return status;
}

void halod_reply(halod_server_context_t *context,
                 const Halo__Wire__Response *response) {
  nng_msg *message = NULL;
  halo_status_t status = halod_reply_pack(response, &message);
  if (status) {
    HALO_LOG_ERROR("cannot pack a response: %s", halo_status_message(status));
    halo_status_free(status);
    // Still answer so the context serves again: an empty message does not
    // decode, and the client reports that.
    if (nng_msg_alloc(&message, 0) != 0) return;
  }
  halod_server_reply(context, message);
}

void halod_reply_retry(halod_server_context_t *context, halo_status_t status,
                       uint32_t retry_after_ms) {
  Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
  response.code = (int32_t)halo_status_code(status);
  if (status) response.message = (char *)halo_status_message(status);
  response.has_retry_after_ms = retry_after_ms > 0;
  response.retry_after_ms = retry_after_ms;
  halod_reply(context, &response);
  halo_status_free(status);
}

void halod_reply_status(halod_server_context_t *context, halo_status_t status) {
  halod_reply_retry(context, status, 0);
}

// The most of a client's failure message (SemaphoreFail) halod keeps.
#define HALOD_FAILURE_MESSAGE_BYTES 1024

// A reply under construction: status plus body.
typedef struct halod_request_t {
  halod_t *daemon;
  halod_session_t *session;
  Halo__Wire__Response response;
  // Answered elsewhere (an executable load finishes off the loop thread,
  // a device call's after step on the loop: daemon/device_call.h).
  halod_server_context_t *context;
  bool deferred;
  // The decoded request; |wire_taken|: a device call keeps it (a write's
  // bytes) and frees it.
  Halo__Wire__Request *wire;
  bool wire_taken;
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

uint32_t halod_fill_device_infos(const halod_t *daemon,
                                 Halo__Wire__DeviceInfo *infos,
                                 Halo__Wire__DeviceInfo **pointers) {
  for (uint32_t i = 0; i < daemon->hal.device_count; ++i) {
    const halo_hal_device_info_t *device = halod_device_info(daemon, i);
    Halo__Wire__DeviceInfo *info = &infos[i];
    halo__wire__device_info__init(info);
    info->ordinal = i;
    info->driver = (char *)device->driver;
    info->name = (char *)device->name;
    info->memory_bytes = device->memory_bytes;
    info->has_compute_major = info->has_compute_minor = true;
    info->compute_major = device->compute_major;
    info->compute_minor = device->compute_minor;
    info->has_multiprocessor_count = true;
    info->multiprocessor_count = device->multiprocessor_count;
    pointers[i] = info;
  }
  return daemon->hal.device_count;
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
  Halo__Wire__ExecutableParametersReply parameters;
  Halo__Wire__Parameter parameter[HALO_HAL_MAX_PARAMS];
  Halo__Wire__Parameter *parameter_pointers[HALO_HAL_MAX_PARAMS];
  Halo__Wire__QueueReply queue;
  Halo__Wire__QueueExecuteReply queue_execute;
  uint8_t token[16];
  void *heap;  // freed after packing
  // The decoded spans of a queue operation (daemon/operation.h): inline
  // when they fit, else |spans| (values) and |heap| (bindings).
  halod_op_binding_t bindings[16];
  halod_op_value_t values[16];
  void *spans;
} halod_reply_bodies_t;

// |count| elements of |size| bytes: |inline_storage| (|capacity| of them)
// when they fit, else a heap block left in |*owned| (freed with the bodies).
static void *halod_request_span(void *inline_storage, size_t capacity,
                                size_t count, size_t size, void **owned) {
  if (count <= capacity) return inline_storage;
  *owned = calloc(count, size);
  return *owned;
}

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

// ------------------------------------------------------------ device calls
// Requests whose control call to a device worker runs off the loop
// (daemon/device_call.h): the handler checks and holds what the call needs,
// the call's after step (on the loop) makes the objects and answers.

// Starts |call| for |request|, which is answered by its after step.
static halo_status_t halod_request_call(halod_request_t *request,
                                        halod_device_call_t *call) {
  request->deferred = true;
  halod_device_call_start(request->daemon, request->session, request->context,
                          call);
  return NULL;
}

// A device buffer's write or read.
typedef struct halod_copy_call_t {
  halod_device_call_t call;
  halod_buffer_t *buffer;  // held while the call runs
  uint64_t address;
  uint64_t length;
  Halo__Wire__Request *write;  // a write's request: its bytes (owned)
  void *read;                  // a read's bytes
  halo_status_t status;
} halod_copy_call_t;

static void halod_copy_call_work(halod_device_call_t *call) {
  halod_copy_call_t *copy = (halod_copy_call_t *)call;
  halo_hal_allocator_t *allocator = call->device->allocator;
  copy->status = copy->write
                     ? allocator->vtable->write(
                           allocator, copy->address,
                           copy->write->buffer_write->data.data, copy->length)
                     : allocator->vtable->read(allocator, copy->address,
                                               copy->read, copy->length);
}

static void halod_copy_call_done(halod_t *daemon, halod_device_call_t *call,
                                 halod_session_t *session) {
  halod_copy_call_t *copy = (halod_copy_call_t *)call;
  halo_status_t status = copy->status;
  if (!status) status = halod_device_call_session_gone(call, session);
  if (status || copy->write) {
    halod_device_call_reply_status(call, status);
  } else {
    Halo__Wire__BufferReadReply reply = HALO__WIRE__BUFFER_READ_REPLY__INIT;
    reply.data.data = copy->read;
    reply.data.len = copy->length;
    Halo__Wire__Response response = HALO__WIRE__RESPONSE__INIT;
    response.body_case = HALO__WIRE__RESPONSE__BODY_BUFFER_READ;
    response.buffer_read = &reply;
    halod_device_call_reply(call, &response);
  }
  halod_buffer_release(daemon, copy->buffer);
  if (copy->write) halo__wire__request__free_unpacked(copy->write, NULL);
  free(copy->read);
  free(copy);
}

// Writes or reads [offset, offset + length) of device buffer |buffer|
// through a device call (|write|: the request whose bytes it writes, which
// the call takes).
static halo_status_t halod_request_copy(halod_request_t *request,
                                        halod_buffer_t *buffer, uint64_t offset,
                                        uint64_t length, bool write) {
  halod_copy_call_t *copy = calloc(1, sizeof(*copy));
  if (copy && !write) copy->read = malloc(length ? length : 1);
  if (!copy || (!write && !copy->read)) {
    free(copy);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  copy->call.device = buffer->hal_device;
  copy->call.work = halod_copy_call_work;
  copy->call.done = halod_copy_call_done;
  copy->call.what = write ? "a buffer write" : "a buffer read";
  halod_buffer_retain(buffer);
  copy->buffer = buffer;
  copy->address = buffer->device_address + offset;
  copy->length = length;
  if (write) {
    request->wire_taken = true;
    copy->write = request->wire;
  }
  return halod_request_call(request, &copy->call);
}

// A device buffer's allocation (BufferCreate).
typedef struct halod_allocate_call_t {
  halod_device_call_t call;
  uint32_t device;
  uint64_t size;  // charged to the session already (halod_buffer_reserve)
  bool exportable;
  uint64_t address;
  halo_status_t status;
} halod_allocate_call_t;

static void halod_allocate_call_work(halod_device_call_t *call) {
  halod_allocate_call_t *allocate = (halod_allocate_call_t *)call;
  halo_hal_allocator_t *allocator = call->device->allocator;
  allocate->status = allocator->vtable->allocate(allocator, allocate->size,
                                                 &allocate->address);
}

static void halod_reply_buffer(halod_request_t *request,
                               const halod_buffer_t *buffer, uint64_t handle,
                               uint64_t submission_id,
                               halod_reply_bodies_t *bodies);

static void halod_allocate_call_done(halod_t *daemon, halod_device_call_t *call,
                                     halod_session_t *session) {
  halod_allocate_call_t *allocate = (halod_allocate_call_t *)call;
  halo_status_t status = allocate->status;
  halod_buffer_t *buffer = NULL;
  if (!status) status = halod_device_call_session_gone(call, session);
  if (!status) {
    status = halod_buffer_adopt(daemon, session, allocate->device,
                                allocate->size, allocate->exportable,
                                call->device, allocate->address, &buffer);
  }
  if (status) {
    // Nothing of it stays: the memory (if the device allocated it) and the
    // bytes reserved for it go back.
    if (!allocate->status && allocate->address) {
      halo_hal_allocator_t *allocator = call->device->allocator;
      allocator->vtable->deallocate(allocator, allocate->address,
                                    allocate->size);
    }
    if (session) halod_buffer_unreserve(session, allocate->size);
    halod_device_call_reply_status(call, status);
    free(allocate);
    return;
  }
  // The buffer is the session's now: a failed handle releases it.
  uint64_t handle = 0;
  status = halod_session_add_buffer(daemon, session, buffer, &handle);
  halod_reply_bodies_t *bodies = status ? NULL : calloc(1, sizeof(*bodies));
  if (!status && !bodies) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  if (status) {
    halod_device_call_reply_status(call, status);
  } else {
    halod_request_t request = {.daemon = daemon, .session = session};
    halo__wire__response__init(&request.response);
    halod_reply_buffer(&request, buffer, handle, 0, bodies);
    halod_device_call_reply(call, &request.response);
  }
  free(bodies);
  free(allocate);
}

// A new semaphore page's or host arena's registration with the domain's
// workers (SemaphoreCreate, BufferCreate of host-visible memory that needs
// one): the page or arena is opened on the loop, registered off it, and
// finished (sealed, published, the session's) by the after step.
typedef struct halod_host_call_t {
  halod_device_call_t call;
  halod_host_registration_t registration;
  halod_timeline_page_t *page;  // a semaphore's, or
  halod_arena_t *arena;         // a host-visible buffer's
  uint32_t device;
  uint64_t size;  // the buffer's, charged to the session already
  uint64_t initial_value;
  bool exportable;
} halod_host_call_t;

static void halod_host_call_work(halod_device_call_t *call) {
  halod_host_registration_run(&((halod_host_call_t *)call)->registration);
}

static void halod_reply_semaphore(halod_request_t *request,
                                  const halod_semaphore_t *semaphore,
                                  uint64_t handle,
                                  halod_reply_bodies_t *bodies);

static void halod_host_call_done(halod_t *daemon, halod_device_call_t *call,
                                 halod_session_t *session) {
  halod_host_call_t *host = (halod_host_call_t *)call;
  halo_status_t status = halod_device_call_session_gone(call, session);
  if (status) {
    if (host->page) {
      halod_semaphore_page_abandon(daemon, host->page, &host->registration);
    } else {
      halod_buffer_arena_abandon(daemon, session, host->size, host->arena,
                                 &host->registration);
    }
    halod_device_call_reply_status(call, status);
    free(host);
    return;
  }
  halod_semaphore_t *semaphore = NULL;
  halod_buffer_t *buffer = NULL;
  uint64_t handle = 0;
  if (host->page) {
    status = halod_semaphore_create_on_page(
        daemon, session, host->page, &host->registration, host->initial_value,
        host->exportable, &semaphore);
    if (!status) {
      status = halod_session_add_semaphore(daemon, session, semaphore, &handle);
    }
  } else {
    status = halod_buffer_create_on_arena(
        daemon, session, host->device, host->size, host->exportable,
        host->arena, &host->registration, &buffer);
    if (!status) {
      status = halod_session_add_buffer(daemon, session, buffer, &handle);
    }
  }
  halod_reply_bodies_t *bodies = status ? NULL : calloc(1, sizeof(*bodies));
  if (!status && !bodies) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  if (status) {
    halod_device_call_reply_status(call, status);
  } else {
    halod_request_t request = {.daemon = daemon, .session = session};
    halo__wire__response__init(&request.response);
    if (semaphore) {
      halod_reply_semaphore(&request, semaphore, handle, bodies);
    } else {
      halod_reply_buffer(&request, buffer, handle, 0, bodies);
    }
    halod_device_call_reply(call, &request.response);
  }
  free(bodies);
  free(host);
}

// Starts the registration of |host|'s page or arena, opened already.
static halo_status_t halod_request_host_call(halod_request_t *request,
                                             halod_host_call_t *host) {
  host->call.device = host->registration.devices[0];
  host->call.work = halod_host_call_work;
  host->call.done = halod_host_call_done;
  host->call.what = host->page ? "a semaphore page's registration"
                               : "a host arena's registration";
  return halod_request_call(request, &host->call);
}

// ------------------------------------------------------------- the handlers
// One per request body: each decodes its body into the operation below it
// and fills the reply's body.

typedef halo_status_t (*halod_request_fn)(halod_request_t *request,
                                          const Halo__Wire__Request *wire,
                                          halod_reply_bodies_t *bodies);

static halo_status_t halod_request_hello(halod_request_t *request,
                                         const Halo__Wire__Request *wire,
                                         halod_reply_bodies_t *bodies) {
  halo__wire__hello_reply__init(&bodies->hello);
  return halod_hello(request, wire->hello, &bodies->hello);
}

static halo_status_t halod_request_ping(halod_request_t *request,
                                        const Halo__Wire__Request *wire,
                                        halod_reply_bodies_t *bodies) {
  halo__wire__ping_reply__init(&bodies->ping);
  if (wire->ping->has_payload) {
    bodies->ping.has_payload = true;
    bodies->ping.payload = wire->ping->payload;
  }
  request->response.body_case = HALO__WIRE__RESPONSE__BODY_PING;
  request->response.ping = &bodies->ping;
  return NULL;
}

static halo_status_t halod_request_device_list(halod_request_t *request,
                                               const Halo__Wire__Request *wire,
                                               halod_reply_bodies_t *bodies) {
  (void)wire;
  halo__wire__device_list_reply__init(&bodies->device_list);
  bodies->device_list.n_devices = halod_fill_device_infos(
      request->daemon, bodies->device_infos, bodies->device_info_pointers);
  bodies->device_list.devices = bodies->device_info_pointers;
  request->response.body_case = HALO__WIRE__RESPONSE__BODY_DEVICE_LIST;
  request->response.device_list = &bodies->device_list;
  return NULL;
}

// Replies with the buffer of the session's |handle| (|submission_id|: an
// alloca's, 0 for none).
static void halod_reply_buffer(halod_request_t *request,
                               const halod_buffer_t *buffer, uint64_t handle,
                               uint64_t submission_id,
                               halod_reply_bodies_t *bodies) {
  Halo__Wire__BufferReply *reply = &bodies->buffer;
  halo__wire__buffer_reply__init(reply);
  reply->handle = handle;
  reply->size = buffer->size;
  reply->memory_type = (Halo__Wire__MemoryType)buffer->memory_type;
  if (buffer->arena) {
    Halo__Wire__HostPlacement *placement = &bodies->placement;
    halo__wire__host_placement__init(placement);
    placement->arena_id = buffer->arena->id;
    placement->arena_size = buffer->arena->size;
    placement->offset = buffer->offset;
    reply->placement = placement;
  }
  if (submission_id) {
    bodies->buffer.has_submission_id = true;
    bodies->buffer.submission_id = submission_id;
  }
  request->response.body_case = HALO__WIRE__RESPONSE__BODY_BUFFER;
  request->response.buffer = &bodies->buffer;
}

static halo_status_t halod_request_buffer_create(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  const Halo__Wire__BufferCreate *create = wire->buffer_create;
  if (create->flags & ~1u) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "BufferCreate: unknown flags 0x%x",
                            create->flags & ~1u);
  }
  if (create->memory_type == HALO__WIRE__MEMORY_TYPE__MEMORY_DEVICE) {
    // Allocated by the domain's worker, off the loop.
    halod_allocate_call_t *allocate = calloc(1, sizeof(*allocate));
    if (!allocate) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    }
    halo_status_t status =
        halod_buffer_reserve(request->daemon, request->session, create->device,
                             create->size, &allocate->call.device);
    if (status) {
      free(allocate);
      return status;
    }
    allocate->call.work = halod_allocate_call_work;
    allocate->call.done = halod_allocate_call_done;
    allocate->call.what = "a buffer allocation";
    allocate->device = create->device;
    allocate->size = create->size;
    allocate->exportable = create->flags & 1u;
    return halod_request_call(request, &allocate->call);
  }
  if (create->memory_type == HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE &&
      halod_workers_enabled(request->daemon) &&
      halod_buffer_needs_arena(request->daemon, request->session, create->size,
                               create->flags & 1u)) {
    // A new arena, registered with the domain's workers off the loop.
    halod_host_call_t *host = calloc(1, sizeof(*host));
    if (!host) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    halo_status_t status = halod_buffer_arena_open(
        request->daemon, request->session, create->device, create->size,
        create->flags & 1u, &host->arena, &host->registration);
    if (status) {
      free(host);
      return status;
    }
    host->device = create->device;
    host->size = create->size;
    host->exportable = create->flags & 1u;
    return halod_request_host_call(request, host);
  }
  halod_buffer_t *buffer = NULL;
  HALO_RETURN_IF_ERROR(
      halod_buffer_create(request->daemon, request->session, create->device,
                          (uint32_t)create->memory_type, create->size,
                          create->flags & 1u, &buffer));
  uint64_t handle;
  HALO_RETURN_IF_ERROR(halod_session_add_buffer(
      request->daemon, request->session, buffer, &handle));
  halod_reply_buffer(request, buffer, handle, 0, bodies);
  return NULL;
}

static halo_status_t halod_request_buffer_release(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  (void)bodies;
  return halod_session_release_buffer(request->daemon, request->session,
                                      wire->buffer_release->handle);
}

static halo_status_t halod_request_buffer_write(halod_request_t *request,
                                                const Halo__Wire__Request *wire,
                                                halod_reply_bodies_t *bodies) {
  (void)bodies;
  const Halo__Wire__BufferWrite *write = wire->buffer_write;
  halod_buffer_t *buffer;
  HALO_RETURN_IF_ERROR(
      halod_buffer_lookup(request->session, write->handle, &buffer));
  if (!buffer->arena) {
    // Device memory: written by the buffer's worker, off the loop.
    HALO_RETURN_IF_ERROR(
        halod_buffer_check_range(buffer, write->offset, write->data.len));
    return halod_request_copy(request, buffer, write->offset, write->data.len,
                              true);
  }
  return halod_buffer_write(buffer, write->offset, write->data.data,
                            write->data.len);
}

static halo_status_t halod_request_buffer_read(halod_request_t *request,
                                               const Halo__Wire__Request *wire,
                                               halod_reply_bodies_t *bodies) {
  const Halo__Wire__BufferRead *read = wire->buffer_read;
  halod_buffer_t *buffer;
  HALO_RETURN_IF_ERROR(
      halod_buffer_lookup(request->session, read->handle, &buffer));
  if (read->length > HALO_WIRE_MAX_CHUNK_BYTES) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "BufferRead of %llu bytes exceeds the chunk "
                            "limit of %u",
                            (unsigned long long)read->length,
                            HALO_WIRE_MAX_CHUNK_BYTES);
  }
  HALO_RETURN_IF_ERROR(
      halod_buffer_check_range(buffer, read->offset, read->length));
  if (!buffer->arena) {
    // Device memory: read by the buffer's worker, off the loop.
    return halod_request_copy(request, buffer, read->offset, read->length,
                              false);
  }
  bodies->heap = malloc(read->length ? read->length : 1);
  if (!bodies->heap) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  HALO_RETURN_IF_ERROR(
      halod_buffer_read(buffer, read->offset, bodies->heap, read->length));
  halo__wire__buffer_read_reply__init(&bodies->buffer_read);
  bodies->buffer_read.data.data = bodies->heap;
  bodies->buffer_read.data.len = read->length;
  request->response.body_case = HALO__WIRE__RESPONSE__BODY_BUFFER_READ;
  request->response.buffer_read = &bodies->buffer_read;
  return NULL;
}

static void halod_reply_token(halod_request_t *request,
                              halod_reply_bodies_t *bodies) {
  halo__wire__export_reply__init(&bodies->exported);
  bodies->exported.token.data = bodies->token;
  bodies->exported.token.len = 16;
  request->response.body_case = HALO__WIRE__RESPONSE__BODY_EXPORTED;
  request->response.exported = &bodies->exported;
}

static halo_status_t halod_request_buffer_export(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  uint64_t handle = wire->buffer_export->handle;
  halod_buffer_t *buffer;
  HALO_RETURN_IF_ERROR(halod_buffer_lookup(request->session, handle, &buffer));
  HALO_RETURN_IF_ERROR(halod_export_object(
      request->daemon, HALOD_OBJECT_BUFFER, buffer, handle, buffer->exportable,
      &buffer->exported, buffer->token, bodies->token));
  halod_reply_token(request, bodies);
  return NULL;
}

static halo_status_t halod_request_buffer_import(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  const ProtobufCBinaryData *token = &wire->buffer_import->token;
  void *object;
  HALO_RETURN_IF_ERROR(halod_export_lookup(
      request->daemon, token->data, token->len, HALOD_OBJECT_BUFFER, &object));
  halod_buffer_t *buffer = object;
  halod_buffer_retain(buffer);
  uint64_t handle;
  HALO_RETURN_IF_ERROR(halod_session_add_buffer(
      request->daemon, request->session, buffer, &handle));
  halod_reply_buffer(request, buffer, handle, 0, bodies);
  return NULL;
}

static void halod_reply_semaphore(halod_request_t *request,
                                  const halod_semaphore_t *semaphore,
                                  uint64_t handle,
                                  halod_reply_bodies_t *bodies) {
  Halo__Wire__SemaphoreReply *reply = &bodies->semaphore;
  halo__wire__semaphore_reply__init(reply);
  reply->handle = handle;
  reply->page_id = semaphore->page->id;
  reply->slot = semaphore->slot_index;
  reply->generation = semaphore->generation;
  request->response.body_case = HALO__WIRE__RESPONSE__BODY_SEMAPHORE;
  request->response.semaphore = &bodies->semaphore;
}

static halo_status_t halod_request_semaphore_create(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  const Halo__Wire__SemaphoreCreate *create = wire->semaphore_create;
  if (create->flags & ~1u) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "SemaphoreCreate: unknown flags 0x%x",
                            create->flags & ~1u);
  }
  if (halod_workers_enabled(request->daemon) &&
      halod_semaphore_needs_page(request->session, create->flags & 1u)) {
    // A new page, registered with the domain's workers off the loop.
    halod_host_call_t *host = calloc(1, sizeof(*host));
    if (!host) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    halo_status_t status = halod_semaphore_page_open(
        request->daemon, request->session, create->initial_value,
        create->flags & 1u, &host->page, &host->registration);
    if (status) {
      free(host);
      return status;
    }
    host->initial_value = create->initial_value;
    host->exportable = create->flags & 1u;
    return halod_request_host_call(request, host);
  }
  halod_semaphore_t *semaphore;
  HALO_RETURN_IF_ERROR(halod_semaphore_create(request->daemon, request->session,
                                              create->initial_value,
                                              create->flags & 1u, &semaphore));
  uint64_t handle;
  HALO_RETURN_IF_ERROR(halod_session_add_semaphore(
      request->daemon, request->session, semaphore, &handle));
  halod_reply_semaphore(request, semaphore, handle, bodies);
  return NULL;
}

static halo_status_t halod_request_semaphore_signal(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  (void)bodies;
  halod_op_value_t signal = {.semaphore = wire->semaphore_signal->handle,
                             .value = wire->semaphore_signal->value};
  return halod_op_signal(request->daemon, request->session, &signal);
}

static halo_status_t halod_request_semaphore_fail(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  (void)bodies;
  const Halo__Wire__SemaphoreFail *fail = wire->semaphore_fail;
  halod_semaphore_t *semaphore;
  HALO_RETURN_IF_ERROR(
      halod_semaphore_lookup(request->session, fail->handle, &semaphore));
  if (fail->code <= 0 || fail->code >= HALO_STATUS_CODE_COUNT) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "SemaphoreFail: code %d is not a failure "
                            "status code (1..%d)",
                            fail->code, HALO_STATUS_CODE_COUNT - 1);
  }
  // Kept as long as the semaphore lives, and copied to every waiter's
  // failure: a message of a request's size on each of a session's
  // semaphores would be gigabytes of halod's charged to no quota. Cut at a
  // UTF-8 character's start.
  const char *message = fail->message ? fail->message : "";
  size_t length = strlen(message);
  size_t kept = length;
  if (kept > HALOD_FAILURE_MESSAGE_BYTES) {
    kept = HALOD_FAILURE_MESSAGE_BYTES;
    while (kept > 0 && ((unsigned char)message[kept] & 0xc0) == 0x80) --kept;
  }
  if (kept < length) {
    halod_semaphore_fail(semaphore, (halo_status_code_t)fail->code,
                         "%.*s... (%zu bytes cut; the client's message had "
                         "%zu)",
                         (int)kept, message, length - kept, length);
  } else {
    halod_semaphore_fail(semaphore, (halo_status_code_t)fail->code, "%s",
                         message);
  }
  return NULL;
}

static halo_status_t halod_request_semaphore_query(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  halod_semaphore_t *semaphore;
  HALO_RETURN_IF_ERROR(halod_semaphore_lookup(
      request->session, wire->semaphore_query->handle, &semaphore));
  halo__wire__semaphore_query_reply__init(&bodies->semaphore_query);
  bodies->semaphore_query.value = halod_semaphore_value(semaphore);
  bodies->semaphore_query.failure_code = halod_semaphore_failure(semaphore);
  bodies->semaphore_query.failure_message = semaphore->hal.failure_message;
  request->response.body_case = HALO__WIRE__RESPONSE__BODY_SEMAPHORE_QUERY;
  request->response.semaphore_query = &bodies->semaphore_query;
  return NULL;
}

static halo_status_t halod_request_semaphore_release(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  (void)bodies;
  return halod_session_release_semaphore(request->daemon, request->session,
                                         wire->semaphore_release->handle);
}

static halo_status_t halod_request_semaphore_export(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  uint64_t handle = wire->semaphore_export->handle;
  halod_semaphore_t *semaphore;
  HALO_RETURN_IF_ERROR(
      halod_semaphore_lookup(request->session, handle, &semaphore));
  HALO_RETURN_IF_ERROR(
      halod_export_object(request->daemon, HALOD_OBJECT_SEMAPHORE, semaphore,
                          handle, semaphore->exportable, &semaphore->exported,
                          semaphore->token, bodies->token));
  halod_reply_token(request, bodies);
  return NULL;
}

static halo_status_t halod_request_semaphore_import(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  const ProtobufCBinaryData *token = &wire->semaphore_import->token;
  void *object;
  HALO_RETURN_IF_ERROR(halod_export_lookup(request->daemon, token->data,
                                           token->len, HALOD_OBJECT_SEMAPHORE,
                                           &object));
  halod_semaphore_t *semaphore = object;
  halod_semaphore_retain(semaphore);
  uint64_t handle;
  HALO_RETURN_IF_ERROR(halod_session_add_semaphore(
      request->daemon, request->session, semaphore, &handle));
  halod_reply_semaphore(request, semaphore, handle, bodies);
  return NULL;
}

static halo_status_t halod_request_executable_create(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  (void)bodies;
  // Compiles and loads run off the loop; the reply comes from there.
  request->deferred = true;
  halod_executable_load(request->daemon, request->session,
                        wire->executable_create, request->context);
  return NULL;
}

static halo_status_t halod_request_executable_release(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  (void)bodies;
  return halod_session_release_object(request->daemon, request->session,
                                      HALOD_OBJECT_EXECUTABLE,
                                      wire->executable_release->handle);
}

// Fills |request|'s reply with the parameters |info| tells of |executable|'s
// entry |name|.
static halo_status_t halod_reply_parameters(
    halod_request_t *request, const halod_executable_t *executable,
    const char *name, const halo_hal_entry_info_t *info,
    halod_reply_bodies_t *bodies) {
  if (info->param_count == HALO_HAL_PARAMS_UNKNOWN) {
    return halo_status_make(
        HALO_STATUS_UNIMPLEMENTED,
        "the %s driver cannot tell the parameters of entry '%s' of "
        "executable %.16s (a local kernel declares them with "
        "HALO_LOCAL_KERNEL_PARAMS; a CUBIN may lack parameter information)",
        halod_device_info(request->daemon, executable->device)->driver, name,
        executable->hash_text);
  }
  halo__wire__executable_parameters_reply__init(&bodies->parameters);
  uint32_t known = info->param_count < HALO_HAL_MAX_PARAMS
                       ? info->param_count
                       : HALO_HAL_MAX_PARAMS;
  for (uint32_t i = 0; i < known; ++i) {
    halo__wire__parameter__init(&bodies->parameter[i]);
    bodies->parameter[i].offset = info->param_offsets[i];
    bodies->parameter[i].size = info->param_sizes[i];
    bodies->parameter_pointers[i] = &bodies->parameter[i];
  }
  bodies->parameters.count = info->param_count;
  bodies->parameters.n_parameters = known;
  bodies->parameters.parameters = bodies->parameter_pointers;
  request->response.body_case =
      HALO__WIRE__RESPONSE__BODY_EXECUTABLE_PARAMETERS;
  request->response.executable_parameters = &bodies->parameters;
  return NULL;
}

// An entry point's lookup by its worker (ExecutableParameters of an entry
// the executable's proxy did not know yet).
typedef struct halod_lookup_call_t {
  halod_device_call_t call;
  halod_executable_t *executable;  // held
  Halo__Wire__Request *wire;       // the entry's name (owned)
  halo_hal_entry_info_t info;
  halo_status_t status;
} halod_lookup_call_t;

static void halod_lookup_call_work(halod_device_call_t *call) {
  halod_lookup_call_t *lookup = (halod_lookup_call_t *)call;
  lookup->status = halo_hal_executable_lookup_entry(
      lookup->executable->hal, lookup->wire->executable_parameters->entry,
      &lookup->info);
}

static void halod_lookup_call_done(halod_t *daemon, halod_device_call_t *call,
                                   halod_session_t *session) {
  halod_lookup_call_t *lookup = (halod_lookup_call_t *)call;
  halo_status_t status = lookup->status;
  if (!status) status = halod_device_call_session_gone(call, session);
  halod_reply_bodies_t *bodies = status ? NULL : calloc(1, sizeof(*bodies));
  if (!status && !bodies) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  halod_request_t request = {.daemon = daemon, .session = session};
  halo__wire__response__init(&request.response);
  if (!status) {
    status = halod_reply_parameters(&request, lookup->executable,
                                    lookup->wire->executable_parameters->entry,
                                    &lookup->info, bodies);
  }
  if (status) {
    halod_device_call_reply_status(call, status);
  } else {
    halod_device_call_reply(call, &request.response);
  }
  free(bodies);
  halod_executable_release(daemon, lookup->executable);
  halo__wire__request__free_unpacked(lookup->wire, NULL);
  free(lookup);
}

static halo_status_t halod_request_executable_parameters(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  const Halo__Wire__ExecutableParameters *query = wire->executable_parameters;
  void *object;
  HALO_RETURN_IF_ERROR(
      halod_handle_table_lookup(&request->session->handles, query->handle,
                                HALOD_OBJECT_EXECUTABLE, &object));
  halod_executable_t *executable = object;
  if (!query->entry || !*query->entry) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "no entry point named");
  }
  halo_hal_entry_info_t info;
  if (halo_hal_remote_executable_is(executable->hal) &&
      !halo_hal_remote_executable_known_entry(executable->hal, query->entry,
                                              &info)) {
    // Asked of the executable's worker, off the loop.
    halo_hal_device_t *device = NULL;
    HALO_RETURN_IF_ERROR(halod_domain_device(request->daemon,
                                             request->session->domain,
                                             executable->device, &device));
    halod_lookup_call_t *lookup = calloc(1, sizeof(*lookup));
    if (!lookup) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    lookup->call.device = device;
    lookup->call.work = halod_lookup_call_work;
    lookup->call.done = halod_lookup_call_done;
    lookup->call.what = "an entry point's lookup";
    halod_executable_retain(request->daemon, executable);
    lookup->executable = executable;
    request->wire_taken = true;
    lookup->wire = request->wire;
    return halod_request_call(request, &lookup->call);
  }
  HALO_RETURN_IF_ERROR(
      halo_hal_executable_lookup_entry(executable->hal, query->entry, &info));
  return halod_reply_parameters(request, executable, query->entry, &info,
                                bodies);
}

static halo_status_t halod_request_command_buffer_create(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  (void)wire;
  (void)bodies;
  // Answered by daemon/command_buffer.c: at once, or after a control call
  // to the session's worker (off the loop), which keeps the request.
  request->deferred = true;
  request->wire_taken = true;
  halod_command_buffer_create(request->daemon, request->session, request->wire,
                              request->context);
  return NULL;
}

static halo_status_t halod_request_command_buffer_release(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  (void)bodies;
  return halod_session_release_object(request->daemon, request->session,
                                      HALOD_OBJECT_COMMAND_BUFFER,
                                      wire->command_buffer_release->handle);
}

// A queue's creation by its worker (QueueCreate).
typedef struct halod_queue_call_t {
  halod_device_call_t call;
  uint32_t device;
  int32_t priority;
  halo_hal_queue_t *hal;
  halo_status_t status;
} halod_queue_call_t;

static void halod_queue_call_work(halod_device_call_t *call) {
  halod_queue_call_t *create = (halod_queue_call_t *)call;
  create->status = call->device->vtable->create_queue(
      call->device, create->priority, &create->hal);
}

// Replies with the queue of |session|'s |handle|.
static void halod_reply_queue(halod_request_t *request, uint64_t handle,
                              halod_reply_bodies_t *bodies) {
  halo__wire__queue_reply__init(&bodies->queue);
  bodies->queue.handle = handle;
  request->response.body_case = HALO__WIRE__RESPONSE__BODY_QUEUE;
  request->response.queue = &bodies->queue;
}

static void halod_queue_call_done(halod_t *daemon, halod_device_call_t *call,
                                  halod_session_t *session) {
  halod_queue_call_t *create = (halod_queue_call_t *)call;
  halo_status_t status = create->status;
  if (status) {
    status = halo_status_annotate(status, "creating a queue on device %u",
                                  create->device);
  }
  if (!status) status = halod_device_call_session_gone(call, session);
  halod_queue_t *queue = NULL;
  if (status) {
    if (create->hal) halo_hal_queue_destroy(create->hal);
  } else {
    status =
        halod_queue_adopt(daemon, session, create->device, create->priority,
                          call->device, create->hal, &queue);
  }
  uint64_t handle = 0;
  if (!status) {
    // A failed handle releases the queue.
    status = halod_session_add_object(daemon, session, HALOD_OBJECT_QUEUE,
                                      queue, &handle);
  }
  halod_reply_bodies_t *bodies = status ? NULL : calloc(1, sizeof(*bodies));
  if (!status && !bodies) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  if (status) {
    halod_device_call_reply_status(call, status);
  } else {
    queue->handle = handle;
    halod_request_t request = {.daemon = daemon, .session = session};
    halo__wire__response__init(&request.response);
    halod_reply_queue(&request, handle, bodies);
    halod_device_call_reply(call, &request.response);
  }
  free(bodies);
  free(create);
}

static halo_status_t halod_request_queue_create(halod_request_t *request,
                                                const Halo__Wire__Request *wire,
                                                halod_reply_bodies_t *bodies) {
  const Halo__Wire__QueueCreate *create = wire->queue_create;
  halo_hal_device_t *device = NULL;
  HALO_RETURN_IF_ERROR(halod_domain_device(
      request->daemon, request->session->domain, create->device, &device));
  if (halo_hal_remote_device_is(device)) {
    // Created by the domain's worker, off the loop.
    halod_queue_call_t *call = calloc(1, sizeof(*call));
    if (!call) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    call->call.device = device;
    call->call.work = halod_queue_call_work;
    call->call.done = halod_queue_call_done;
    call->call.what = "a queue's creation";
    call->device = create->device;
    call->priority = create->priority;
    return halod_request_call(request, &call->call);
  }
  halod_queue_t *queue;
  HALO_RETURN_IF_ERROR(halod_queue_create(request->daemon, request->session,
                                          create->device, create->priority,
                                          &queue));
  uint64_t handle;
  HALO_RETURN_IF_ERROR(halod_session_add_object(
      request->daemon, request->session, HALOD_OBJECT_QUEUE, queue, &handle));
  queue->handle = handle;
  halod_reply_queue(request, handle, bodies);
  return NULL;
}

static halo_status_t halod_request_queue_release(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  (void)bodies;
  return halod_session_release_object(request->daemon, request->session,
                                      HALOD_OBJECT_QUEUE,
                                      wire->queue_release->handle);
}

// Decoded semaphore values (the bodies' storage).
static halo_status_t halod_request_values(
    halod_reply_bodies_t *bodies, Halo__Wire__SemaphoreValue *const *waits,
    size_t wait_count, Halo__Wire__SemaphoreValue *const *signals,
    size_t signal_count, halod_op_sync_t *out_sync) {
  size_t total = wait_count + signal_count;
  halod_op_value_t *values = halod_request_span(
      bodies->values, 16, total, sizeof(*values), &bodies->spans);
  if (!values) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  for (size_t i = 0; i < total; ++i) {
    const Halo__Wire__SemaphoreValue *value =
        i < wait_count ? waits[i] : signals[i - wait_count];
    values[i].semaphore = value->semaphore;
    values[i].value = value->value;
  }
  *out_sync = (halod_op_sync_t){.waits = values,
                                .wait_count = (uint32_t)wait_count,
                                .signals = values + wait_count,
                                .signal_count = (uint32_t)signal_count};
  return NULL;
}

static halo_status_t halod_request_queue_execute(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  const Halo__Wire__QueueExecute *execute = wire->queue_execute;
  halod_op_execute_t op = {.queue = execute->queue,
                           .command_buffer = execute->command_buffer,
                           .binding_count = (uint32_t)execute->n_bindings};
  if (execute->n_bindings > HALOD_MAX_BINDINGS) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%zu bindings (at most %u)", execute->n_bindings,
                            HALOD_MAX_BINDINGS);
  }
  HALO_RETURN_IF_ERROR(halod_request_values(bodies, execute->waits,
                                            execute->n_waits, execute->signals,
                                            execute->n_signals, &op.sync));
  halod_op_binding_t *bindings =
      halod_request_span(bodies->bindings, 16, execute->n_bindings,
                         sizeof(*bindings), &bodies->heap);
  if (!bindings) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  for (size_t i = 0; i < execute->n_bindings; ++i) {
    bindings[i].buffer = execute->bindings[i]->buffer;
    bindings[i].offset = execute->bindings[i]->offset;
    bindings[i].length = execute->bindings[i]->length;
  }
  op.bindings = bindings;
  uint64_t id;
  HALO_RETURN_IF_ERROR(
      halod_op_execute(request->daemon, request->session, &op, &id));
  halo__wire__queue_execute_reply__init(&bodies->queue_execute);
  bodies->queue_execute.submission_id = id;
  request->response.body_case = HALO__WIRE__RESPONSE__BODY_QUEUE_EXECUTE;
  request->response.queue_execute = &bodies->queue_execute;
  return NULL;
}

// A socket QueueAlloca whose allocation its worker made.
static void halod_request_alloca_finish(halod_t *daemon,
                                        halod_alloca_call_t *call,
                                        halod_session_t *session,
                                        halo_status_t status,
                                        const halod_buffer_t *buffer,
                                        uint64_t handle, uint64_t id) {
  halod_reply_bodies_t *bodies = status ? NULL : calloc(1, sizeof(*bodies));
  if (!status && !bodies) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  if (status) {
    halod_device_call_reply_status(&call->call, status);
  } else {
    halod_request_t request = {.daemon = daemon, .session = session};
    halo__wire__response__init(&request.response);
    halod_reply_buffer(&request, buffer, handle, id, bodies);
    halod_device_call_reply(&call->call, &request.response);
  }
  free(bodies);
}

static halo_status_t halod_request_queue_alloca(halod_request_t *request,
                                                const Halo__Wire__Request *wire,
                                                halod_reply_bodies_t *bodies) {
  const Halo__Wire__QueueAlloca *alloca = wire->queue_alloca;
  halod_op_alloca_t op = {.queue = alloca->queue,
                          .size = alloca->size,
                          .memory_type = (uint32_t)alloca->memory_type};
  HALO_RETURN_IF_ERROR(halod_request_values(bodies, alloca->waits,
                                            alloca->n_waits, alloca->signals,
                                            alloca->n_signals, &op.sync));
  halod_alloca_call_t *call = NULL;
  halod_buffer_t *buffer;
  uint64_t handle, id;
  HALO_RETURN_IF_ERROR(halod_op_alloca(request->daemon, request->session, &op,
                                       &call, &buffer, &handle, &id));
  if (call) {
    // Allocated by the worker, off the loop: answered when it returns.
    call->finish = halod_request_alloca_finish;
    return halod_request_call(request, &call->call);
  }
  halod_reply_buffer(request, buffer, handle, id, bodies);
  return NULL;
}

static halo_status_t halod_request_queue_dealloca(
    halod_request_t *request, const Halo__Wire__Request *wire,
    halod_reply_bodies_t *bodies) {
  const Halo__Wire__QueueDealloca *dealloca = wire->queue_dealloca;
  halod_op_dealloca_t op = {.queue = dealloca->queue,
                            .buffer = dealloca->buffer};
  HALO_RETURN_IF_ERROR(
      halod_request_values(bodies, dealloca->waits, dealloca->n_waits,
                           dealloca->signals, dealloca->n_signals, &op.sync));
  uint64_t id;
  HALO_RETURN_IF_ERROR(
      halod_op_dealloca(request->daemon, request->session, &op, &id));
  halo__wire__queue_execute_reply__init(&bodies->queue_execute);
  bodies->queue_execute.submission_id = id;
  request->response.body_case = HALO__WIRE__RESPONSE__BODY_QUEUE_EXECUTE;
  request->response.queue_execute = &bodies->queue_execute;
  return NULL;
}

// ---------------------------------------------------------------- dispatch

// May run before Hello (only Hello itself).
#define HALOD_REQUEST_BEFORE_HELLO 1u
// Served to a lost session (daemon/workers.h): it may still learn why its
// semaphores failed and release its handles.
#define HALOD_REQUEST_WHEN_LOST 2u

typedef struct halod_request_handler_t {
  halod_request_fn serve;
  uint32_t flags;
} halod_request_handler_t;

// Indexed by body number (proto/halo.proto); admin requests (100 and up)
// are served on the admin socket (daemon/admin.c).
static const halod_request_handler_t halod_request_handlers[] = {
    [HALO__WIRE__REQUEST__BODY_HELLO] = {halod_request_hello,
                                         HALOD_REQUEST_BEFORE_HELLO},
    [HALO__WIRE__REQUEST__BODY_PING] = {halod_request_ping, 0},
    [HALO__WIRE__REQUEST__BODY_DEVICE_LIST] = {halod_request_device_list, 0},
    [HALO__WIRE__REQUEST__BODY_BUFFER_CREATE] = {halod_request_buffer_create,
                                                 0},
    [HALO__WIRE__REQUEST__BODY_BUFFER_RELEASE] = {halod_request_buffer_release,
                                                  HALOD_REQUEST_WHEN_LOST},
    [HALO__WIRE__REQUEST__BODY_BUFFER_WRITE] = {halod_request_buffer_write, 0},
    [HALO__WIRE__REQUEST__BODY_BUFFER_READ] = {halod_request_buffer_read, 0},
    [HALO__WIRE__REQUEST__BODY_BUFFER_EXPORT] = {halod_request_buffer_export,
                                                 0},
    [HALO__WIRE__REQUEST__BODY_BUFFER_IMPORT] = {halod_request_buffer_import,
                                                 0},
    [HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE] =
        {halod_request_semaphore_create, 0},
    [HALO__WIRE__REQUEST__BODY_SEMAPHORE_SIGNAL] =
        {halod_request_semaphore_signal, 0},
    [HALO__WIRE__REQUEST__BODY_SEMAPHORE_FAIL] = {halod_request_semaphore_fail,
                                                  0},
    [HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY] =
        {halod_request_semaphore_query, HALOD_REQUEST_WHEN_LOST},
    [HALO__WIRE__REQUEST__BODY_SEMAPHORE_RELEASE] =
        {halod_request_semaphore_release, HALOD_REQUEST_WHEN_LOST},
    [HALO__WIRE__REQUEST__BODY_SEMAPHORE_EXPORT] =
        {halod_request_semaphore_export, 0},
    [HALO__WIRE__REQUEST__BODY_SEMAPHORE_IMPORT] =
        {halod_request_semaphore_import, 0},
    [HALO__WIRE__REQUEST__BODY_EXECUTABLE_CREATE] =
        {halod_request_executable_create, 0},
    [HALO__WIRE__REQUEST__BODY_EXECUTABLE_RELEASE] =
        {halod_request_executable_release, HALOD_REQUEST_WHEN_LOST},
    [HALO__WIRE__REQUEST__BODY_EXECUTABLE_PARAMETERS] =
        {halod_request_executable_parameters, 0},
    [HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_CREATE] =
        {halod_request_command_buffer_create, 0},
    [HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_RELEASE] =
        {halod_request_command_buffer_release, HALOD_REQUEST_WHEN_LOST},
    [HALO__WIRE__REQUEST__BODY_QUEUE_CREATE] = {halod_request_queue_create, 0},
    [HALO__WIRE__REQUEST__BODY_QUEUE_RELEASE] = {halod_request_queue_release,
                                                 HALOD_REQUEST_WHEN_LOST},
    [HALO__WIRE__REQUEST__BODY_QUEUE_EXECUTE] = {halod_request_queue_execute,
                                                 0},
    [HALO__WIRE__REQUEST__BODY_QUEUE_ALLOCA] = {halod_request_queue_alloca, 0},
    [HALO__WIRE__REQUEST__BODY_QUEUE_DEALLOCA] = {halod_request_queue_dealloca,
                                                  0},
};

#define HALOD_REQUEST_HANDLER_COUNT \
  (sizeof(halod_request_handlers) / sizeof(halod_request_handlers[0]))

static halo_status_t halod_dispatch(halod_request_t *request,
                                    const Halo__Wire__Request *wire,
                                    halod_reply_bodies_t *bodies) {
  halod_session_t *session = request->session;
  if (session->refused_reason) {
    return halo_status_make(session->refused_code, "%s",
                            session->refused_reason);
  }
  uint32_t body = (uint32_t)wire->body_case;
  const halod_request_handler_t *handler =
      body < HALOD_REQUEST_HANDLER_COUNT && halod_request_handlers[body].serve
          ? &halod_request_handlers[body]
          : NULL;
  // Body numbers 100 and up are admin requests (proto/halo.proto): said
  // first, so that haloctl pointed at the client socket learns why.
  if (!handler && body >= HALO__WIRE__REQUEST__BODY_ADMIN_STATUS) {
    return halo_status_make(HALO_STATUS_PERMISSION_DENIED,
                            "admin requests are served on the admin socket "
                            "only (this is halod's client socket; haloctl "
                            "takes the admin socket's address as --admin or "
                            "$HALO_ADMIN_ADDRESS)");
  }
  uint32_t flags = handler ? handler->flags : 0;
  if (!session->hello_done && !(flags & HALOD_REQUEST_BEFORE_HELLO)) {
    return halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                            "the first request of a session must be Hello");
  }
  if (session->lost_reason &&
      !(flags & (HALOD_REQUEST_WHEN_LOST | HALOD_REQUEST_BEFORE_HELLO))) {
    return halo_status_make(HALO_STATUS_SESSION_LOST, "%s",
                            session->lost_reason);
  }
  if (handler) return handler->serve(request, wire, bodies);
  if (body == HALO__WIRE__REQUEST__BODY__NOT_SET) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "request has no body (unknown request type?)");
  }
  return halo_status_make(HALO_STATUS_UNIMPLEMENTED,
                          "request type %u is not known to this halod", body);
}

// Serves |session|'s request |event| (freed by the caller).
static void halod_requests_serve(halod_t *daemon, halod_session_t *session,
                                 halod_server_event_t *event) {
  ++session->requests;
  size_t length = nng_msg_len(event->message);
  const uint8_t *bytes = nng_msg_body(event->message);
  // What the request may make protobuf-c allocate is bounded first, on its
  // bytes: past a bound it is refused after a scan that allocates nothing
  // (daemon/request_scan.h), not decoded whole on the loop.
  halo_status_t refusal = halod_request_scan(bytes, length);
  if (refusal) {
    HALO_LOG_DEBUG("session %llu: request of %zu bytes: %s",
                   (unsigned long long)session->id, length,
                   halo_status_message(refusal));
    halod_reply_status(event->context, refusal);
    return;
  }
  Halo__Wire__Request *wire = halo__wire__request__unpack(NULL, length, bytes);
  if (!wire) {
    HALO_LOG_DEBUG("session %llu: undecodable request of %zu bytes",
                   (unsigned long long)session->id, length);
    halod_reply_status(event->context, halod_request_undecodable(length));
    return;
  }
  halod_request_t request = {.daemon = daemon,
                             .session = session,
                             .context = event->context,
                             .wire = wire};
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
  if (bodies) {
    free(bodies->heap);
    free(bodies->spans);
  }
  free(bodies);
  if (!request.wire_taken) halo__wire__request__free_unpacked(wire, NULL);
}

// A request event: served now, or (its session waits for a device call)
// kept until the session's earlier requests were answered. Whether it took
// |event|.
static bool halod_requests_take(halod_t *daemon, halod_server_event_t *event) {
  // The server queues a pipe's PIPE_ADDED before its requests and nothing
  // after its PIPE_REMOVED: no session means none could be created.
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions.by_pipe, event->pipe_id);
  if (!session) {
    halod_reply_status(event->context,
                       halo_status_make(HALO_STATUS_UNAVAILABLE,
                                        "halod could not create a session for "
                                        "this connection (out of memory; see "
                                        "its log)"));
    return false;
  }
  if (session->call || session->waiting_head) {
    // It waits for the worker too: on a place of its own, or refused.
    if (!halod_device_call_park(daemon, session, event->context)) return false;
    event->next = NULL;
    if (session->waiting_tail) {
      session->waiting_tail->next = event;
    } else {
      session->waiting_head = event;
    }
    session->waiting_tail = event;
    return true;
  }
  halod_requests_serve(daemon, session, event);
  return false;
}

void halod_requests_resume(halod_t *daemon, halod_session_t *session) {
  uint64_t id = session->id;
  while (!session->call && session->waiting_head) {
    halod_server_event_t *event = session->waiting_head;
    session->waiting_head = event->next;
    if (!session->waiting_head) session->waiting_tail = NULL;
    event->next = NULL;
    halod_device_call_unpark(daemon, session);
    halod_requests_serve(daemon, session, event);
    halod_server_event_free(event);
    // A request does not end its own session; still, never a stale one.
    session = halo_u64_map_get(&daemon->sessions.by_id, id);
    if (!session) return;
  }
}

void halod_requests_refuse_waiting(halod_t *daemon, halod_session_t *session,
                                   halo_status_code_t code,
                                   const char *message) {
  while (session->waiting_head) {
    halod_server_event_t *event = session->waiting_head;
    session->waiting_head = event->next;
    halod_device_call_unpark(daemon, session);
    halod_reply_status(event->context, halo_status_make(code, "%s", message));
    halod_server_event_free(event);
  }
  session->waiting_tail = NULL;
}

// Loop thread: a connection closed as it arrived (daemon/server.c): only
// counted and logged, at debug since a flood may bring many.
static void halod_requests_refused(halod_t *daemon,
                                   const halod_server_event_t *event) {
  unsigned uid = (unsigned)event->peer_uid;
  switch (event->refusal) {
    case HALOD_SERVER_REFUSED_PIPES:
      ++daemon->stats.sessions_limited;
      HALO_LOG_DEBUG(
          "pipe %u (uid %u, pid %llu): halod already has %u connections, the "
          "limit connections (%u); closed as it arrived",
          event->pipe_id, uid, (unsigned long long)event->peer_pid,
          event->pipes, daemon->config.connections);
      break;
    case HALOD_SERVER_REFUSED_TENANT_PIPES:
      ++daemon->stats.sessions_uid_limited;
      HALO_LOG_DEBUG(
          "pipe %u (uid %u, pid %llu): its tenant already has %u "
          "connections, uid-connections (%u) and %u refused by name; closed "
          "as it arrived",
          event->pipe_id, uid, (unsigned long long)event->peer_pid,
          event->pipes, daemon->config.uid_connections, HALOD_UID_REFUSED_OPEN);
      break;
    case HALOD_SERVER_REFUSED_NO_MEMORY:
      HALO_LOG_ERROR("pipe %u (uid %u): out of memory; closed as it arrived",
                     event->pipe_id, uid);
      break;
  }
}

// An event taken from its lane (daemon/request_lanes.h): its session, which
// has one event fewer waiting there; NULL where the session ended already,
// or the event is its connection's end (which ends it now).
static halod_session_t *halod_requests_dequeued(halod_t *daemon,
                                                halod_server_event_t *event) {
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions.by_pipe, event->pipe_id);
  if (!session) return NULL;
  --session->lane_events;
  if (event->kind != HALOD_SERVER_EVENT_PIPE_REMOVED) return session;
  halod_session_destroy(daemon, session);
  return NULL;
}

// A session's request or the end of its connection, taken from its lane.
static void halod_requests_on_turn(void *user_data,
                                   halod_server_event_t *event) {
  halod_t *daemon = user_data;
  halod_session_t *session = halod_requests_dequeued(daemon, event);
  if (event->kind == HALOD_SERVER_EVENT_REQUEST) {
    if (!session) {
      // It ended while this waited (haloctl kill-client): nobody reads the
      // reply, but the context serves again once answered.
      halod_reply_status(event->context,
                         halo_status_make(HALO_STATUS_UNAVAILABLE,
                                          "this connection's session ended "
                                          "before its request was served"));
    } else if (halod_requests_take(daemon, event)) {
      return;  // waits for its turn
    }
  }
  halod_server_event_free(event);
}

// Queues |event| in |session|'s lane; false where that needed memory there
// was not (then it is served now).
static bool halod_requests_queue(halod_t *daemon, halod_session_t *session,
                                 halod_server_event_t *event) {
  if (!halod_request_lanes_push(&daemon->request_lanes, session->lane_key,
                                event)) {
    return false;
  }
  ++session->lane_events;
  return true;
}

void halod_requests_on_event(void *user_data, halod_server_event_t *event) {
  halod_t *daemon = user_data;
  halod_session_t *session =
      halo_u64_map_get(&daemon->sessions.by_pipe, event->pipe_id);
  switch (event->kind) {
    case HALOD_SERVER_EVENT_PIPE_ADDED: {
      // Every admitted connection gets a session, a refused one included
      // (it answers each request with why): closing the connection here
      // could lose a message arriving on it (halod_server_close_pipe).
      halo_status_t status = halod_session_create(
          daemon, event->pipe_id, (uint32_t)event->peer_uid,
          (uint32_t)event->peer_pid, event->tenant, &session);
      if (status) {
        HALO_LOG_ERROR("pipe %u: %s; its requests fail", event->pipe_id,
                       halo_status_message(status));
        halo_status_free(status);
      }
      break;
    }
    case HALOD_SERVER_EVENT_PIPE_REMOVED:
      // After the session's requests still waiting in its lane, if any.
      if (session && session->lane_events > 0 &&
          halod_requests_queue(daemon, session, event)) {
        return;
      }
      if (session) halod_session_destroy(daemon, session);
      break;
    case HALOD_SERVER_EVENT_PIPE_REFUSED:
      halod_requests_refused(daemon, event);
      break;
    case HALOD_SERVER_EVENT_REQUEST:
      if (session && halod_requests_queue(daemon, session, event)) return;
      if (halod_requests_take(daemon, event)) return;  // waits for its turn
      break;
  }
  halod_server_event_free(event);
}

void halod_requests_start(halod_t *daemon) {
  halod_request_lanes_start(&daemon->request_lanes, daemon->loop,
                            halod_requests_on_turn, daemon);
}

void halod_requests_stop(halod_t *daemon) {
  halod_request_lanes_stop(&daemon->request_lanes);
  halod_server_event_t *event;
  while ((event = halod_request_lanes_pop(&daemon->request_lanes))) {
    halod_requests_dequeued(daemon, event);
    if (event->kind == HALOD_SERVER_EVENT_REQUEST) {
      halod_reply_status(event->context,
                         halo_status_make(HALO_STATUS_UNAVAILABLE, "%s",
                                          HALOD_STOPPING_MESSAGE));
    }
    halod_server_event_free(event);
  }
}
