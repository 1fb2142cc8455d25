// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo queues: create/release; queue_execute, which sends the command
// buffer's handle with a binding table and the semaphore values to wait on
// and to signal; queue_alloca and queue_dealloca (queue-ordered buffers).
// The daemon copies all of it; nothing here outlives the call.
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/status.h"

struct halo_queue_s {
  halo_object_link_t link;  // first: halo_client_close walks links
  halo_client_t *client;
  uint64_t handle;
  uint32_t device;
};

static void halo_queue_send_release(halo_client_t *client, uint64_t handle) {
  Halo__Wire__QueueRelease release = HALO__WIRE__QUEUE_RELEASE__INIT;
  release.handle = handle;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_RELEASE;
  request.queue_release = &release;
  // A failure here (daemon gone) leaves nothing to release: the daemon
  // frees a session's objects when its connection ends.
  halo_status_free(halo_client_call_status(client, &request));
}

halo_status_t halo_queue_create(halo_client_t *client, uint32_t device,
                                int32_t priority, halo_queue_t **out_queue) {
  HALO_CHECK_ARG(out_queue, "out_queue must not be NULL");
  *out_queue = NULL;
  HALO_CHECK_ARG(client, "client must not be NULL");
  Halo__Wire__QueueCreate create = HALO__WIRE__QUEUE_CREATE__INIT;
  create.device = device;
  create.has_priority = true;
  create.priority = priority;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_CREATE;
  request.queue_create = &create;
  halo_wire_response_t *response;
  HALO_RETURN_IF_ERROR(halo_client_call(client, &request, &response));
  halo_status_t status = NULL;
  if (response->body_case != HALO__WIRE__RESPONSE__BODY_QUEUE) {
    status = halo_status_make(HALO_STATUS_INTERNAL,
                              "halod answered QueueCreate with another body");
  }
  halo_queue_t *queue = NULL;
  if (!status) {
    queue = calloc(1, sizeof(*queue));
    if (!queue) {
      halo_queue_send_release(client, response->queue->handle);
      status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    }
  }
  if (!status) {
    queue->client = client;
    queue->handle = response->queue->handle;
    queue->device = device;
    halo_client_track(client, &queue->link, HALO_OBJECT_QUEUE);
    *out_queue = queue;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return status;
}

void halo_queue_release_link(halo_object_link_t *link) {
  halo_queue_t *queue = (halo_queue_t *)link;
  halo_client_untrack(queue->client, &queue->link);
  halo_queue_send_release(queue->client, queue->handle);
  free(queue);
}

void halo_queue_release(halo_queue_t *queue) {
  if (queue) halo_queue_release_link(&queue->link);
}

// Checks |count| semaphore values named |what| ("waits", "signals") and
// copies their handles and values to |out|. |owner| names the object whose
// client they must belong to.
static halo_status_t halo_queue_check_values(
    halo_client_t *client, const char *owner, const char *what,
    const halo_semaphore_value_t *values, size_t count,
    halo_client_value_t *out) {
  HALO_CHECK_ARG(values || count == 0, "%s is NULL but its count is %zu", what,
                 count);
  for (size_t i = 0; i < count; ++i) {
    const halo_semaphore_t *semaphore = values[i].semaphore;
    HALO_CHECK_ARG(semaphore, "%s[%zu]: semaphore is NULL", what, i);
    HALO_CHECK_ARG(halo_semaphore_client(semaphore) == client,
                   "%s[%zu]: semaphore 0x%llx belongs to another client "
                   "than the %s",
                   what, i,
                   (unsigned long long)halo_semaphore_handle(semaphore), owner);
    HALO_CHECK_ARG(values[i].value <= HALO_SEMAPHORE_MAX_VALUE,
                   "%s[%zu]: value %llu is >= 2^63", what, i,
                   (unsigned long long)values[i].value);
    out[i].semaphore = halo_semaphore_handle(semaphore);
    out[i].value = values[i].value;
  }
  return NULL;
}

// Checks the binding table and copies it to |out| as handles. An entry
// whose buffer is NULL must be all zero: it leaves its slot unbound (sent as
// buffer 0), which is fine for slots the recording does not use; the daemon
// refuses an unbound slot the recording needs. Entries past
// |binding_count| (up to the capacity) are unbound too.
static halo_status_t halo_queue_check_bindings(halo_client_t *client,
                                               const halo_binding_t *bindings,
                                               size_t binding_count,
                                               halo_client_binding_t *out) {
  HALO_CHECK_ARG(bindings || binding_count == 0,
                 "bindings is NULL but binding_count is %zu", binding_count);
  for (size_t i = 0; i < binding_count; ++i) {
    const halo_binding_t *binding = &bindings[i];
    out[i] = (halo_client_binding_t){0};
    if (!binding->buffer) {
      HALO_CHECK_ARG(binding->offset == 0 && binding->length == 0,
                     "bindings[%zu]: buffer is NULL but offset %llu / length "
                     "%llu are set (an unbound slot is all zero)",
                     i, (unsigned long long)binding->offset,
                     (unsigned long long)binding->length);
      continue;
    }
    const halo_buffer_t *buffer = binding->buffer;
    HALO_CHECK_ARG(halo_buffer_client(buffer) == client,
                   "bindings[%zu]: buffer 0x%llx belongs to another client "
                   "than the command buffer",
                   i, (unsigned long long)halo_buffer_handle(buffer));
    halo_status_t status = halo_buffer_check_live(buffer);
    if (status) return halo_status_annotate(status, "bindings[%zu]", i);
    uint64_t size = halo_buffer_size(buffer);
    if (binding->offset > size) {
      return halo_status_make(
          HALO_STATUS_OUT_OF_RANGE,
          "bindings[%zu]: offset %llu is past the end of buffer 0x%llx of "
          "%llu bytes",
          i, (unsigned long long)binding->offset,
          (unsigned long long)halo_buffer_handle(buffer),
          (unsigned long long)size);
    }
    if (binding->length != HALO_WHOLE_BUFFER &&
        binding->length > size - binding->offset) {
      return halo_status_make(
          HALO_STATUS_OUT_OF_RANGE,
          "bindings[%zu]: range [%llu, +%llu) does not fit buffer 0x%llx of "
          "%llu bytes",
          i, (unsigned long long)binding->offset,
          (unsigned long long)binding->length,
          (unsigned long long)halo_buffer_handle(buffer),
          (unsigned long long)size);
    }
    out[i].buffer = halo_buffer_handle(buffer);
    out[i].offset = binding->offset;
    out[i].length = binding->length;
  }
  return NULL;
}

// Storage for one operation's checked spans: inline for the common small
// case, else one heap block.
#define HALO_QUEUE_INLINE_SPAN 16
typedef struct halo_queue_spans_t {
  halo_client_binding_t bindings_inline[HALO_QUEUE_INLINE_SPAN];
  halo_client_value_t values_inline[HALO_QUEUE_INLINE_SPAN];
  halo_client_binding_t *bindings;
  halo_client_value_t *values;
  void *block;
} halo_queue_spans_t;

static halo_status_t halo_queue_spans_allocate(halo_queue_spans_t *spans,
                                               size_t binding_count,
                                               size_t value_count) {
  spans->block = NULL;
  spans->bindings = spans->bindings_inline;
  spans->values = spans->values_inline;
  size_t bytes = 0;
  if (binding_count > HALO_QUEUE_INLINE_SPAN) {
    bytes += binding_count * sizeof(halo_client_binding_t);
  }
  if (value_count > HALO_QUEUE_INLINE_SPAN) {
    bytes += value_count * sizeof(halo_client_value_t);
  }
  if (!bytes) return NULL;
  spans->block = malloc(bytes);
  if (!spans->block) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  uint8_t *cursor = spans->block;
  if (binding_count > HALO_QUEUE_INLINE_SPAN) {
    spans->bindings = (halo_client_binding_t *)cursor;
    cursor += binding_count * sizeof(halo_client_binding_t);
  }
  if (value_count > HALO_QUEUE_INLINE_SPAN) {
    spans->values = (halo_client_value_t *)cursor;
  }
  return NULL;
}

// Checks waits and signals into |spans->values| and describes them in
// |out_sync|. halod takes at most HALO_MAX_EXECUTE_SEMAPHORES of them in
// all (it refuses more, on the socket before decoding): refused here, with
// the counts, which also keeps the sizes below from overflowing.
static halo_status_t halo_queue_check_sync(
    halo_client_t *client, const char *owner,
    const halo_semaphore_value_t *waits, size_t wait_count,
    const halo_semaphore_value_t *signals, size_t signal_count,
    size_t binding_count, halo_queue_spans_t *spans,
    halo_client_sync_t *out_sync) {
  HALO_CHECK_ARG(wait_count <= HALO_MAX_EXECUTE_SEMAPHORES &&
                     signal_count <= HALO_MAX_EXECUTE_SEMAPHORES - wait_count,
                 "%zu waits and %zu signals: %llu in all, more than "
                 "HALO_MAX_EXECUTE_SEMAPHORES (%d) per submission",
                 wait_count, signal_count,
                 (unsigned long long)wait_count + signal_count,
                 HALO_MAX_EXECUTE_SEMAPHORES);
  HALO_RETURN_IF_ERROR(halo_queue_spans_allocate(spans, binding_count,
                                                 wait_count + signal_count));
  halo_status_t status = halo_queue_check_values(client, owner, "waits", waits,
                                                 wait_count, spans->values);
  if (!status) {
    status = halo_queue_check_values(client, owner, "signals", signals,
                                     signal_count, spans->values + wait_count);
  }
  if (status) {
    free(spans->block);
    spans->block = NULL;
    return status;
  }
  *out_sync = (halo_client_sync_t){.values = spans->values,
                                   .wait_count = wait_count,
                                   .signal_count = signal_count};
  return NULL;
}

// The socket's form of a checked operation: protobuf messages for its
// bindings and values, in one heap block (freed by the caller).
typedef struct halo_queue_wire_t {
  void *block;
  Halo__Wire__Binding **bindings;
  Halo__Wire__SemaphoreValue **waits;
  Halo__Wire__SemaphoreValue **signals;
} halo_queue_wire_t;

static halo_status_t halo_queue_wire(const halo_client_binding_t *bindings,
                                     size_t binding_count,
                                     const halo_client_sync_t *sync,
                                     halo_queue_wire_t *out) {
  size_t value_count = sync->wait_count + sync->signal_count;
  size_t bytes = binding_count * (sizeof(Halo__Wire__Binding) +
                                  sizeof(Halo__Wire__Binding *)) +
                 value_count * (sizeof(Halo__Wire__SemaphoreValue) +
                                sizeof(Halo__Wire__SemaphoreValue *));
  out->block = malloc(bytes ? bytes : 1);
  if (!out->block)
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  Halo__Wire__Binding *binding_messages = out->block;
  Halo__Wire__SemaphoreValue *value_messages =
      (Halo__Wire__SemaphoreValue *)(binding_messages + binding_count);
  out->bindings = (Halo__Wire__Binding **)(value_messages + value_count);
  out->waits = (Halo__Wire__SemaphoreValue **)(out->bindings + binding_count);
  out->signals = out->waits + sync->wait_count;
  for (size_t i = 0; i < binding_count; ++i) {
    binding_messages[i] = (Halo__Wire__Binding)HALO__WIRE__BINDING__INIT;
    binding_messages[i].buffer = bindings[i].buffer;
    binding_messages[i].offset = bindings[i].offset;
    binding_messages[i].length = bindings[i].length;
    out->bindings[i] = &binding_messages[i];
  }
  for (size_t i = 0; i < value_count; ++i) {
    value_messages[i] =
        (Halo__Wire__SemaphoreValue)HALO__WIRE__SEMAPHORE_VALUE__INIT;
    value_messages[i].semaphore = sync->values[i].semaphore;
    value_messages[i].value = sync->values[i].value;
    out->waits[i] = &value_messages[i];
  }
  return NULL;
}

// Sends |request| over the socket; its reply must have body |expected|
// (|what| names the request). |out_response|, if not NULL, receives it.
static halo_status_t halo_queue_call(halo_client_t *client,
                                     const Halo__Wire__Request *request,
                                     Halo__Wire__Response__BodyCase expected,
                                     const char *what,
                                     halo_wire_response_t **out_response) {
  halo_wire_response_t *response = NULL;
  halo_status_t status = halo_client_call(client, request, &response);
  if (!status && response->body_case != expected) {
    status = halo_status_make(HALO_STATUS_INTERNAL,
                              "halod answered %s with another body", what);
  }
  if (!status && out_response) {
    *out_response = response;
    return NULL;
  }
  if (response) halo__wire__response__free_unpacked(response, NULL);
  return status;
}

static halo_status_t halo_queue_send_execute(halo_client_t *client,
                                             const halo_client_execute_t *op) {
  halo_queue_wire_t wire;
  HALO_RETURN_IF_ERROR(
      halo_queue_wire(op->bindings, op->binding_count, &op->sync, &wire));
  Halo__Wire__QueueExecute execute = HALO__WIRE__QUEUE_EXECUTE__INIT;
  execute.has_queue = true;
  execute.queue = op->queue;
  execute.command_buffer = op->command_buffer;
  execute.n_bindings = op->binding_count;
  execute.bindings = wire.bindings;
  execute.n_waits = op->sync.wait_count;
  execute.waits = wire.waits;
  execute.n_signals = op->sync.signal_count;
  execute.signals = wire.signals;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_EXECUTE;
  request.queue_execute = &execute;
  halo_status_t status = halo_queue_call(
      client, &request, HALO__WIRE__RESPONSE__BODY_QUEUE_EXECUTE,
      "QueueExecute", NULL);
  free(wire.block);
  return status;
}

halo_status_t halo_queue_execute(
    halo_queue_t *queue, halo_command_buffer_t *command_buffer,
    const halo_binding_t *bindings, size_t binding_count,
    const halo_semaphore_value_t *waits, size_t wait_count,
    const halo_semaphore_value_t *signals, size_t signal_count) {
  HALO_CHECK_ARG(command_buffer, "command_buffer must not be NULL");
  halo_command_buffer_info_t info;
  HALO_RETURN_IF_ERROR(halo_command_buffer_query_ended(command_buffer, &info));
  if (queue) {
    HALO_CHECK_ARG(queue->client == info.client,
                   "queue 0x%llx belongs to another client than the command "
                   "buffer",
                   (unsigned long long)queue->handle);
    HALO_CHECK_ARG(queue->device == info.device,
                   "queue 0x%llx is on device %u, the command buffer on "
                   "device %u",
                   (unsigned long long)queue->handle, queue->device,
                   info.device);
  }
  HALO_CHECK_ARG(binding_count <= info.binding_capacity,
                 "%zu bindings exceed the command buffer's binding capacity "
                 "%u",
                 binding_count, info.binding_capacity);
  halo_queue_spans_t spans;
  halo_client_execute_t op = {.queue = queue ? queue->handle : 0,
                              .command_buffer = info.handle,
                              .binding_count = binding_count};
  HALO_RETURN_IF_ERROR(halo_queue_check_sync(
      info.client, "command buffer", waits, wait_count, signals, signal_count,
      binding_count, &spans, &op.sync));
  op.bindings = spans.bindings;
  halo_status_t status = halo_queue_check_bindings(
      info.client, bindings, binding_count, spans.bindings);
  // The ring when the session has one (what only the daemon can check then
  // fails the signal semaphores, halo.h); else, or for a record too long for
  // it, the socket, after the ring drained.
  bool used = false;
  if (!status) status = halo_client_ring_execute(info.client, &op, &used);
  if (!status && !used) status = halo_queue_send_execute(info.client, &op);
  free(spans.block);
  return status;
}

halo_status_t halo_queue_alloca(
    halo_queue_t *queue, const halo_semaphore_value_t *waits, size_t wait_count,
    const halo_semaphore_value_t *signals, size_t signal_count,
    halo_memory_type_t memory_type, uint64_t size, halo_buffer_t **out_buffer) {
  HALO_CHECK_ARG(out_buffer, "out_buffer must not be NULL");
  *out_buffer = NULL;
  HALO_CHECK_ARG(queue, "queue must not be NULL");
  HALO_CHECK_ARG(memory_type == HALO_MEMORY_DEVICE ||
                     memory_type == HALO_MEMORY_HOST_VISIBLE,
                 "memory_type %d is not a halo_memory_type_t", memory_type);
  halo_queue_spans_t spans;
  halo_client_alloca_t op = {.queue = queue->handle,
                             .size = size,
                             .memory_type = (uint32_t)memory_type};
  HALO_RETURN_IF_ERROR(halo_queue_check_sync(queue->client, "queue", waits,
                                             wait_count, signals, signal_count,
                                             0, &spans, &op.sync));
  // The ring when the session has one: the call waits for the daemon's
  // verdict and takes the new handle from the ring's header.
  halo_ring_alloca_result_t result = {0};
  bool used = false;
  halo_status_t status =
      halo_client_ring_alloca(queue->client, &op, &result, &used);
  if (!status && used) {
    Halo__Wire__BufferReply reply = HALO__WIRE__BUFFER_REPLY__INIT;
    Halo__Wire__HostPlacement placement = HALO__WIRE__HOST_PLACEMENT__INIT;
    reply.handle = result.handle;
    reply.size = size;
    reply.memory_type = (Halo__Wire__MemoryType)memory_type;
    reply.has_submission_id = true;
    reply.submission_id = result.submission_id;
    if (memory_type == HALO_MEMORY_HOST_VISIBLE) {
      placement.arena_id = result.arena_id;
      placement.arena_size = result.arena_size;
      placement.offset = result.offset;
      reply.placement = &placement;
    }
    status = halo_buffer_from_buffer_reply(queue->client, &reply, out_buffer);
  } else if (!status) {
    halo_queue_wire_t wire;
    status = halo_queue_wire(NULL, 0, &op.sync, &wire);
    if (!status) {
      Halo__Wire__QueueAlloca alloca = HALO__WIRE__QUEUE_ALLOCA__INIT;
      alloca.queue = op.queue;
      alloca.memory_type = (Halo__Wire__MemoryType)memory_type;
      alloca.size = size;
      alloca.n_waits = wait_count;
      alloca.waits = wire.waits;
      alloca.n_signals = signal_count;
      alloca.signals = wire.signals;
      Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
      request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_ALLOCA;
      request.queue_alloca = &alloca;
      halo_wire_response_t *response = NULL;
      status = halo_queue_call(queue->client, &request,
                               HALO__WIRE__RESPONSE__BODY_BUFFER, "QueueAlloca",
                               &response);
      if (!status) {
        status = halo_buffer_from_buffer_reply(queue->client, response->buffer,
                                               out_buffer);
        halo__wire__response__free_unpacked(response, NULL);
      }
      free(wire.block);
    }
  }
  free(spans.block);
  return status;
}

halo_status_t halo_queue_dealloca(halo_queue_t *queue,
                                  const halo_semaphore_value_t *waits,
                                  size_t wait_count,
                                  const halo_semaphore_value_t *signals,
                                  size_t signal_count, halo_buffer_t *buffer) {
  HALO_CHECK_ARG(queue, "queue must not be NULL");
  HALO_CHECK_ARG(buffer, "buffer must not be NULL");
  HALO_CHECK_ARG(halo_buffer_client(buffer) == queue->client,
                 "buffer 0x%llx belongs to another client than the queue",
                 (unsigned long long)halo_buffer_handle(buffer));
  HALO_RETURN_IF_ERROR(halo_buffer_check_live(buffer));
  halo_queue_spans_t spans;
  halo_client_dealloca_t op = {.queue = queue->handle,
                               .buffer = halo_buffer_handle(buffer)};
  HALO_RETURN_IF_ERROR(halo_queue_check_sync(queue->client, "queue", waits,
                                             wait_count, signals, signal_count,
                                             0, &spans, &op.sync));
  bool used = false;
  halo_status_t status = halo_client_ring_dealloca(queue->client, &op, &used);
  if (!status && !used) {
    halo_queue_wire_t wire;
    status = halo_queue_wire(NULL, 0, &op.sync, &wire);
    if (!status) {
      Halo__Wire__QueueDealloca dealloca = HALO__WIRE__QUEUE_DEALLOCA__INIT;
      dealloca.queue = op.queue;
      dealloca.buffer = op.buffer;
      dealloca.n_waits = wait_count;
      dealloca.waits = wire.waits;
      dealloca.n_signals = signal_count;
      dealloca.signals = wire.signals;
      Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
      request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_DEALLOCA;
      request.queue_dealloca = &dealloca;
      status = halo_queue_call(queue->client, &request,
                               HALO__WIRE__RESPONSE__BODY_QUEUE_EXECUTE,
                               "QueueDealloca", NULL);
      free(wire.block);
    }
  }
  // Accepted (or, asynchronously over the ring, handed over: the daemon
  // drops the handle even if it rejects the record).
  if (!status) halo_buffer_set_deallocated(buffer);
  free(spans.block);
  return status;
}
