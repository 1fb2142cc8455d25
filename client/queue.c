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
// fills |messages| and |wire| (|count| entries each) from them. |owner|
// names the object whose client they must belong to.
static halo_status_t halo_queue_semaphore_values(
    halo_client_t *client, const char *owner, const char *what,
    const halo_semaphore_value_t *values, size_t count,
    Halo__Wire__SemaphoreValue *messages, Halo__Wire__SemaphoreValue **wire) {
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
    messages[i] = (Halo__Wire__SemaphoreValue)HALO__WIRE__SEMAPHORE_VALUE__INIT;
    messages[i].semaphore = halo_semaphore_handle(semaphore);
    messages[i].value = values[i].value;
    wire[i] = &messages[i];
  }
  return NULL;
}

// Checks the binding table and fills |messages| and |wire| from it. An entry
// whose buffer is NULL must be all zero: it leaves its slot unbound (sent as
// buffer 0), which is fine for slots the recording does not use; the daemon
// refuses an unbound slot the recording needs. Entries past
// |binding_count| (up to the capacity) are unbound too.
static halo_status_t halo_queue_bindings(halo_client_t *client,
                                         const halo_binding_t *bindings,
                                         size_t binding_count,
                                         Halo__Wire__Binding *messages,
                                         Halo__Wire__Binding **wire) {
  HALO_CHECK_ARG(bindings || binding_count == 0,
                 "bindings is NULL but binding_count is %zu", binding_count);
  for (size_t i = 0; i < binding_count; ++i) {
    const halo_binding_t *binding = &bindings[i];
    messages[i] = (Halo__Wire__Binding)HALO__WIRE__BINDING__INIT;
    wire[i] = &messages[i];
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
    if (binding->offset > size || (binding->length != HALO_WHOLE_BUFFER &&
                                   binding->length > size - binding->offset)) {
      return halo_status_make(
          HALO_STATUS_OUT_OF_RANGE,
          "bindings[%zu]: range [%llu, +%llu) does not fit buffer 0x%llx of "
          "%llu bytes",
          i, (unsigned long long)binding->offset,
          (unsigned long long)binding->length,
          (unsigned long long)halo_buffer_handle(buffer),
          (unsigned long long)size);
    }
    messages[i].buffer = halo_buffer_handle(buffer);
    messages[i].offset = binding->offset;
    messages[i].length = binding->length;
  }
  return NULL;
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
  // Each entry takes at least 4 bytes on the wire: larger counts can only
  // be wrong, and bounding them keeps the sizes below from overflowing.
  const size_t max_values = HALO_WIRE_MAX_MESSAGE_BYTES / 4;
  HALO_CHECK_ARG(wait_count <= max_values && signal_count <= max_values,
                 "%zu waits and %zu signals cannot fit in one request",
                 wait_count, signal_count);
  // One heap block for the wire messages and their pointer arrays.
  size_t value_count = wait_count + signal_count;
  size_t bytes = binding_count * (sizeof(Halo__Wire__Binding) +
                                  sizeof(Halo__Wire__Binding *)) +
                 value_count * (sizeof(Halo__Wire__SemaphoreValue) +
                                sizeof(Halo__Wire__SemaphoreValue *));
  void *block = bytes ? malloc(bytes) : NULL;
  if (bytes && !block) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  Halo__Wire__Binding *binding_messages = block;
  Halo__Wire__SemaphoreValue *wait_messages =
      (Halo__Wire__SemaphoreValue *)(binding_messages + binding_count);
  Halo__Wire__SemaphoreValue *signal_messages = wait_messages + wait_count;
  Halo__Wire__Binding **binding_wire =
      (Halo__Wire__Binding **)(signal_messages + signal_count);
  Halo__Wire__SemaphoreValue **wait_wire =
      (Halo__Wire__SemaphoreValue **)(binding_wire + binding_count);
  Halo__Wire__SemaphoreValue **signal_wire = wait_wire + wait_count;

  halo_status_t status = halo_queue_bindings(
      info.client, bindings, binding_count, binding_messages, binding_wire);
  if (!status) {
    status = halo_queue_semaphore_values(info.client, "command buffer", "waits",
                                         waits, wait_count, wait_messages,
                                         wait_wire);
  }
  if (!status) {
    status = halo_queue_semaphore_values(info.client, "command buffer",
                                         "signals", signals, signal_count,
                                         signal_messages, signal_wire);
  }
  if (!status) {
    Halo__Wire__QueueExecute execute = HALO__WIRE__QUEUE_EXECUTE__INIT;
    execute.has_queue = true;
    execute.queue = queue ? queue->handle : 0;
    execute.command_buffer = info.handle;
    execute.n_bindings = binding_count;
    execute.bindings = binding_wire;
    execute.n_waits = wait_count;
    execute.waits = wait_wire;
    execute.n_signals = signal_count;
    execute.signals = signal_wire;
    // The ring when the session has one (what only the daemon can check
    // then fails the signal semaphores, halo.h); else, or for a record too
    // long for it, the socket, after the ring drained.
    bool used = false;
    status = halo_client_ring_execute(info.client, &execute, &used);
    if (!status && !used) {
      Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
      request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_EXECUTE;
      request.queue_execute = &execute;
      halo_wire_response_t *response = NULL;
      status = halo_client_call(info.client, &request, &response);
      if (!status &&
          response->body_case != HALO__WIRE__RESPONSE__BODY_QUEUE_EXECUTE) {
        status = halo_status_make(HALO_STATUS_INTERNAL,
                                  "halod answered QueueExecute with another "
                                  "body");
      }
      if (response) halo__wire__response__free_unpacked(response, NULL);
    }
  }
  free(block);
  return status;
}

// The waits and signals of an alloca or dealloca as wire messages, in one
// heap block (freed by the caller).
typedef struct halo_queue_values_t {
  void *block;
  Halo__Wire__SemaphoreValue **waits;
  Halo__Wire__SemaphoreValue **signals;
} halo_queue_values_t;

static halo_status_t halo_queue_values(halo_queue_t *queue,
                                       const halo_semaphore_value_t *waits,
                                       size_t wait_count,
                                       const halo_semaphore_value_t *signals,
                                       size_t signal_count,
                                       halo_queue_values_t *out_values) {
  memset(out_values, 0, sizeof(*out_values));
  const size_t max_values = HALO_WIRE_MAX_MESSAGE_BYTES / 4;
  HALO_CHECK_ARG(wait_count <= max_values && signal_count <= max_values,
                 "%zu waits and %zu signals cannot fit in one request",
                 wait_count, signal_count);
  size_t count = wait_count + signal_count;
  void *block = malloc((count + 1) * (sizeof(Halo__Wire__SemaphoreValue) +
                                      sizeof(Halo__Wire__SemaphoreValue *)));
  if (!block) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  Halo__Wire__SemaphoreValue *messages = block;
  Halo__Wire__SemaphoreValue **wire =
      (Halo__Wire__SemaphoreValue **)(messages + count + 1);
  halo_status_t status = halo_queue_semaphore_values(
      queue->client, "queue", "waits", waits, wait_count, messages, wire);
  if (!status) {
    status = halo_queue_semaphore_values(
        queue->client, "queue", "signals", signals, signal_count,
        messages + wait_count, wire + wait_count);
  }
  if (status) {
    free(block);
    return status;
  }
  out_values->block = block;
  out_values->waits = wire;
  out_values->signals = wire + wait_count;
  return NULL;
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
  halo_queue_values_t values;
  HALO_RETURN_IF_ERROR(halo_queue_values(queue, waits, wait_count, signals,
                                         signal_count, &values));
  Halo__Wire__QueueAlloca alloca = HALO__WIRE__QUEUE_ALLOCA__INIT;
  alloca.queue = queue->handle;
  alloca.memory_type = (Halo__Wire__MemoryType)memory_type;
  alloca.size = size;
  alloca.n_waits = wait_count;
  alloca.waits = values.waits;
  alloca.n_signals = signal_count;
  alloca.signals = values.signals;
  // The ring when the session has one: the call waits for the daemon's
  // verdict and takes the new handle from the ring's header.
  Halo__Wire__BufferReply reply = HALO__WIRE__BUFFER_REPLY__INIT;
  Halo__Wire__HostPlacement placement = HALO__WIRE__HOST_PLACEMENT__INIT;
  bool used = false;
  halo_status_t status = halo_client_ring_alloca(queue->client, &alloca, &reply,
                                                 &placement, &used);
  if (!status && used) {
    status = halo_buffer_from_buffer_reply(queue->client, &reply, out_buffer);
  } else if (!status) {
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
    request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_ALLOCA;
    request.queue_alloca = &alloca;
    halo_wire_response_t *response = NULL;
    status = halo_client_call(queue->client, &request, &response);
    if (!status && response->body_case != HALO__WIRE__RESPONSE__BODY_BUFFER) {
      status = halo_status_make(HALO_STATUS_INTERNAL,
                                "halod answered QueueAlloca with another "
                                "body");
    }
    if (!status) {
      status = halo_buffer_from_buffer_reply(queue->client, response->buffer,
                                             out_buffer);
    }
    if (response) halo__wire__response__free_unpacked(response, NULL);
  }
  free(values.block);
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
  halo_queue_values_t values;
  HALO_RETURN_IF_ERROR(halo_queue_values(queue, waits, wait_count, signals,
                                         signal_count, &values));
  Halo__Wire__QueueDealloca dealloca = HALO__WIRE__QUEUE_DEALLOCA__INIT;
  dealloca.queue = queue->handle;
  dealloca.buffer = halo_buffer_handle(buffer);
  dealloca.n_waits = wait_count;
  dealloca.waits = values.waits;
  dealloca.n_signals = signal_count;
  dealloca.signals = values.signals;
  bool used = false;
  halo_status_t status =
      halo_client_ring_dealloca(queue->client, &dealloca, &used);
  if (!status && !used) {
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
    request.body_case = HALO__WIRE__REQUEST__BODY_QUEUE_DEALLOCA;
    request.queue_dealloca = &dealloca;
    halo_wire_response_t *response = NULL;
    status = halo_client_call(queue->client, &request, &response);
    if (!status &&
        response->body_case != HALO__WIRE__RESPONSE__BODY_QUEUE_EXECUTE) {
      status = halo_status_make(HALO_STATUS_INTERNAL,
                                "halod answered QueueDealloca with another "
                                "body");
    }
    if (response) halo__wire__response__free_unpacked(response, NULL);
  }
  // Accepted (or, asynchronously over the ring, handed over: the daemon
  // drops the handle even if it rejects the record).
  if (!status) halo_buffer_set_deallocated(buffer);
  free(values.block);
  return status;
}
