// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The worker side of the device link: serves one real device (CUDA or
// local) to the supervisor (hal/remote/remote_device.h).
//
// Threads: the main thread reads the link and runs every request in order,
// except executable creation (NVRTC, PTX JIT, dlopen), which runs on a
// thread of its own so executions keep flowing, and drains the submission
// rings the supervisor delegated (hal/remote/remote_ring.h); completions
// arrive on the driver's threads (the rings' reporter thread sends those of
// ring executions). A usage reporter thread wakes every
// HALO_REMOTE_USAGE_INTERVAL_NS: where the driver reports its usage
// (halo_hal_device_query_usage) it sends USAGE when that changed, and ALIVE
// (the worker's liveness message, remote_link.h) on every wake-up where it
// sent no USAGE. Object
// tables are guarded by one mutex; the link's send side by its own.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "common/timeline.h"
#include "common/u64_map.h"
#include "hal/remote/remote_device.h"
#include "hal/remote/remote_link.h"
#include "hal/remote/remote_ring.h"

typedef struct halo_remote_server_t {
  halo_hal_device_t *device;
  halo_remote_link_t link;
  pthread_mutex_t mutex;  // the tables
  uint64_t next_id;
  halo_u64_map_t executables;      // id -> halo_hal_executable_t
  halo_u64_map_t command_buffers;  // id -> halo_hal_command_buffer_t
  halo_u64_map_t queues;           // id -> halo_hal_queue_t
  halo_u64_map_t fences;           // supervisor's id -> halo_hal_fence_t
  halo_u64_map_t registrations;    // key -> halo_remote_mapping_t
  halo_remote_rings_t *rings;      // the sessions' submission rings
  // The usage reporter (also the liveness message's sender): it waits on
  // |usage_cond| between looks until |usage_stopping| (under
  // |usage_mutex|).
  pthread_t usage_reporter;
  bool usage_running;
  pthread_mutex_t usage_mutex;
  pthread_cond_t usage_cond;  // CLOCK_MONOTONIC
  bool usage_stopping;
} halo_remote_server_t;

// What an execution keeps until it completes.
typedef struct halo_remote_running_t {
  halo_remote_server_t *server;
  uint64_t id;
  halo_hal_binding_t *bindings;
  halo_hal_execution_signal_t *signals;
} halo_remote_running_t;

static halo_remote_server_t *halo_remote_server_instance;

static void halo_remote_reply(halo_remote_server_t *server, uint64_t id,
                              halo_status_t status, uint64_t value0,
                              uint64_t value1, const void *data,
                              size_t data_size) {
  if (!id) {
    if (status) {
      HALO_LOG_WARN("worker: %s", halo_status_message(status));
      halo_status_free(status);
    }
    return;
  }
  halo_remote_reply_t reply = {
      .code = (int32_t)halo_status_code(status),
      .values = {value0, value1},
  };
  const char *message = halo_status_message(status);
  reply.message_length = status ? (uint32_t)strlen(message) : 0;
  halo_remote_part_t parts[3] = {{&reply, sizeof(reply)},
                                 {message, reply.message_length},
                                 {data, status ? 0 : data_size}};
  halo_status_free(halo_remote_link_send(&server->link, HALO_REMOTE_REPLY, id,
                                         parts, 3, -1));
  halo_status_free(status);
}

static halo_status_t halo_remote_short(uint32_t type) {
  return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                          "a worker request of type %u is too short", type);
}

static uint64_t halo_remote_server_put(halo_remote_server_t *server,
                                       halo_u64_map_t *map, void *object,
                                       halo_status_t *out_status) {
  pthread_mutex_lock(&server->mutex);
  uint64_t id = ++server->next_id;
  *out_status = halo_u64_map_put(map, id, object);
  pthread_mutex_unlock(&server->mutex);
  return id;
}

static void *halo_remote_server_get(halo_remote_server_t *server,
                                    halo_u64_map_t *map, uint64_t id) {
  pthread_mutex_lock(&server->mutex);
  void *object = halo_u64_map_get(map, id);
  pthread_mutex_unlock(&server->mutex);
  return object;
}

// ---------------------------------------------------------------- memory

static void halo_remote_on_register(halo_remote_server_t *server,
                                    const halo_remote_header_t *header,
                                    const void *payload, int *inout_fd) {
  halo_remote_register_t request;
  if (header->length < sizeof(request) || *inout_fd < 0) {
    halo_remote_reply(server, header->id,
                      halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                       "register_host without a memfd"),
                      0, 0, NULL, 0);
    return;
  }
  memcpy(&request, payload, sizeof(request));
  halo_remote_mapping_t *mapping = calloc(1, sizeof(*mapping));
  void *pointer = mmap(NULL, request.size, PROT_READ | PROT_WRITE, MAP_SHARED,
                       *inout_fd, 0);
  close(*inout_fd);
  *inout_fd = -1;
  halo_status_t status = NULL;
  uint64_t address = 0;
  if (!mapping) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  } else if (pointer == MAP_FAILED) {
    pointer = NULL;
    status = halo_status_from_errno(errno, "worker: mapping %llu bytes",
                                    (unsigned long long)request.size);
  }
  halo_hal_allocator_t *allocator = server->device->allocator;
  if (!status) {
    status = allocator->vtable->register_host(allocator, pointer, request.size,
                                              -1, &address);
  }
  if (!status) {
    mapping->pointer = pointer;
    mapping->size = request.size;
    pthread_mutex_lock(&server->mutex);
    status = halo_u64_map_put(&server->registrations, request.key, mapping);
    pthread_mutex_unlock(&server->mutex);
    if (status) allocator->vtable->unregister_host(allocator, pointer);
  }
  if (status) {
    if (pointer) munmap(pointer, request.size);
    free(mapping);
  }
  halo_remote_reply(server, header->id, status, address, 0, NULL, 0);
}

static void halo_remote_on_unregister(halo_remote_server_t *server,
                                      const void *payload, uint64_t length) {
  halo_remote_register_t request;
  if (length < sizeof(request)) return;
  memcpy(&request, payload, sizeof(request));
  pthread_mutex_lock(&server->mutex);
  halo_remote_mapping_t *mapping =
      halo_u64_map_remove(&server->registrations, request.key);
  pthread_mutex_unlock(&server->mutex);
  if (!mapping) return;
  halo_hal_allocator_t *allocator = server->device->allocator;
  // As in the supervisor (daemon/semaphore.c, daemon/arena.c): a driver
  // that unregisters later (the CUDA reaper) takes that into account.
  allocator->vtable->unregister_host(allocator, mapping->pointer);
  munmap(mapping->pointer, mapping->size);
  free(mapping);
}

static void halo_remote_on_memory(halo_remote_server_t *server,
                                  const halo_remote_header_t *header,
                                  const void *payload) {
  halo_hal_allocator_t *allocator = server->device->allocator;
  if (header->type == HALO_REMOTE_ALLOCATE ||
      header->type == HALO_REMOTE_DEALLOCATE) {
    halo_remote_allocate_t request;
    if (header->length < sizeof(request)) {
      halo_remote_reply(server, header->id, halo_remote_short(header->type), 0,
                        0, NULL, 0);
      return;
    }
    memcpy(&request, payload, sizeof(request));
    if (header->type == HALO_REMOTE_DEALLOCATE) {
      allocator->vtable->deallocate(allocator, request.address, request.size);
      return;
    }
    uint64_t address = 0;
    halo_status_t status =
        allocator->vtable->allocate(allocator, request.size, &address);
    halo_remote_reply(server, header->id, status, address, 0, NULL, 0);
    return;
  }
  halo_remote_memory_t request;
  if (header->length < sizeof(request)) {
    halo_remote_reply(server, header->id, halo_remote_short(header->type), 0, 0,
                      NULL, 0);
    return;
  }
  memcpy(&request, payload, sizeof(request));
  if (header->type == HALO_REMOTE_WRITE) {
    if (header->length - sizeof(request) != request.length) {
      halo_remote_reply(server, header->id, halo_remote_short(header->type), 0,
                        0, NULL, 0);
      return;
    }
    halo_status_t status = allocator->vtable->write(
        allocator, request.address, (const char *)payload + sizeof(request),
        request.length);
    halo_remote_reply(server, header->id, status, 0, 0, NULL, 0);
    return;
  }
  void *data = malloc(request.length ? request.length : 1);
  halo_status_t status =
      data ? allocator->vtable->read(allocator, request.address, data,
                                     request.length)
           : halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  halo_remote_reply(server, header->id, status, 0, 0, data, request.length);
  free(data);
}

// ---------------------------------------------------------------- executables

typedef struct halo_remote_load_t {
  halo_remote_server_t *server;
  uint64_t id;
  void *payload;
  uint64_t length;
} halo_remote_load_t;

static void *halo_remote_load_main(void *argument) {
  halo_remote_load_t *load = argument;
  halo_remote_server_t *server = load->server;
  halo_remote_executable_t request;
  memcpy(&request, load->payload, sizeof(request));
  const char *options = (const char *)load->payload + sizeof(request);
  const char **option_list = calloc(
      request.option_count ? request.option_count : 1, sizeof(*option_list));
  halo_status_t status =
      option_list ? NULL
                  : halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  uint64_t offset = 0;
  for (uint32_t i = 0; !status && i < request.option_count; ++i) {
    const char *option = options + offset;
    size_t length = strnlen(option, request.options_size - offset);
    if (offset + length >= request.options_size) {
      status = halo_remote_short(HALO_REMOTE_CREATE_EXECUTABLE);
      break;
    }
    option_list[i] = option;
    offset += length + 1;
  }
  halo_hal_executable_t *executable = NULL;
  if (!status) {
    halo_hal_executable_params_t params = {
        .format = request.format,
        .data = options + request.options_size,
        .size = request.code_size,
        .options = option_list,
        .option_count = request.option_count,
    };
    status = server->device->vtable->create_executable(server->device, &params,
                                                       &executable);
  }
  uint64_t id = 0;
  if (!status) {
    id = halo_remote_server_put(server, &server->executables, executable,
                                &status);
    if (status) halo_hal_executable_destroy(executable);
  }
  uint32_t origin = executable && !status ? executable->origin : 0;
  halo_remote_reply(server, load->id, status, id, origin, NULL, 0);
  free(option_list);
  free(load->payload);
  free(load);
  return NULL;
}

// Takes |payload|.
static void halo_remote_on_create_executable(halo_remote_server_t *server,
                                             const halo_remote_header_t *header,
                                             void *payload) {
  halo_remote_executable_t request;
  if (header->length < sizeof(request)) {
    free(payload);
    halo_remote_reply(server, header->id, halo_remote_short(header->type), 0, 0,
                      NULL, 0);
    return;
  }
  memcpy(&request, payload, sizeof(request));
  if (sizeof(request) + request.options_size + request.code_size !=
      header->length) {
    free(payload);
    halo_remote_reply(server, header->id, halo_remote_short(header->type), 0, 0,
                      NULL, 0);
    return;
  }
  halo_remote_load_t *load = calloc(1, sizeof(*load));
  pthread_t thread;
  if (load) {
    load->server = server;
    load->id = header->id;
    load->payload = payload;
    load->length = header->length;
    if (pthread_create(&thread, NULL, halo_remote_load_main, load) == 0) {
      pthread_detach(thread);
      return;
    }
  }
  free(load);
  free(payload);
  halo_remote_reply(server, header->id,
                    halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                                     "worker: no thread for a load"),
                    0, 0, NULL, 0);
}

static void halo_remote_on_lookup(halo_remote_server_t *server,
                                  const halo_remote_header_t *header,
                                  const void *payload) {
  halo_remote_object_t object;
  if (header->length <= sizeof(object) ||
      ((const char *)payload)[header->length - 1] != '\0') {
    halo_remote_reply(server, header->id, halo_remote_short(header->type), 0, 0,
                      NULL, 0);
    return;
  }
  memcpy(&object, payload, sizeof(object));
  halo_hal_executable_t *executable =
      halo_remote_server_get(server, &server->executables, object.id);
  halo_hal_entry_info_t info;
  memset(&info, 0, sizeof(info));
  halo_status_t status =
      executable
          ? halo_hal_executable_lookup_entry(
                executable, (const char *)payload + sizeof(object), &info)
          : halo_status_make(HALO_STATUS_NOT_FOUND, "worker: executable %llu",
                             (unsigned long long)object.id);
  halo_remote_reply(server, header->id, status, 0, 0, &info, sizeof(info));
}

// ---------------------------------------------------------------- recordings

static void halo_remote_on_prepare(halo_remote_server_t *server,
                                   const halo_remote_header_t *header,
                                   const void *payload) {
  halo_remote_prepare_t request;
  halo_hal_recording_t recording;
  memset(&recording, 0, sizeof(recording));
  halo_status_t status = NULL;
  if (header->length < sizeof(request)) {
    status = halo_remote_short(header->type);
  } else {
    memcpy(&request, payload, sizeof(request));
    uint64_t commands_size =
        (uint64_t)request.command_count * sizeof(halo_hal_command_t);
    uint64_t args_size =
        (uint64_t)request.arg_count * sizeof(halo_hal_dispatch_arg_t);
    if (sizeof(request) + commands_size + args_size + request.data_size !=
        header->length) {
      status = halo_remote_short(header->type);
    } else {
      const char *bytes = (const char *)payload + sizeof(request);
      recording.flags = request.flags;
      recording.binding_capacity = request.binding_capacity;
      recording.command_count = request.command_count;
      recording.arg_count = request.arg_count;
      recording.data_size = request.data_size;
      recording.commands = malloc(commands_size ? commands_size : 1);
      recording.args = malloc(args_size ? args_size : 1);
      recording.data = malloc(request.data_size ? request.data_size : 1);
      if (!recording.commands || !recording.args || !recording.data) {
        status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
      } else {
        memcpy(recording.commands, bytes, commands_size);
        memcpy(recording.args, bytes + commands_size, args_size);
        memcpy(recording.data, bytes + commands_size + args_size,
               request.data_size);
      }
      for (uint32_t i = 0; !status && i < recording.command_count; ++i) {
        uint64_t id = (uint64_t)(uintptr_t)recording.commands[i].executable;
        if (!id) continue;
        recording.commands[i].executable =
            halo_remote_server_get(server, &server->executables, id);
        if (!recording.commands[i].executable) {
          status = halo_status_make(HALO_STATUS_NOT_FOUND,
                                    "worker: command %u names executable %llu",
                                    i, (unsigned long long)id);
        }
      }
    }
  }
  halo_hal_command_buffer_t *command_buffer = NULL;
  if (!status) {
    status = server->device->vtable->prepare_command_buffer(
        server->device, &recording, &command_buffer);
  }
  uint64_t id = 0;
  if (!status) {
    id = halo_remote_server_put(server, &server->command_buffers,
                                command_buffer, &status);
    if (status) halo_hal_command_buffer_destroy(command_buffer);
  }
  halo_hal_recording_deinitialize(&recording);  // empty once moved
  halo_remote_reply(server, header->id, status, id, 0, NULL, 0);
}

// ---------------------------------------------------------------- queues

static void halo_remote_on_create_queue(halo_remote_server_t *server,
                                        const halo_remote_header_t *header,
                                        const void *payload) {
  halo_remote_queue_t request;
  if (header->length < sizeof(request)) {
    halo_remote_reply(server, header->id, halo_remote_short(header->type), 0, 0,
                      NULL, 0);
    return;
  }
  memcpy(&request, payload, sizeof(request));
  halo_hal_queue_t *queue = NULL;
  halo_status_t status = server->device->vtable->create_queue(
      server->device, request.priority, &queue);
  uint64_t id = 0;
  if (!status) {
    id = halo_remote_server_put(server, &server->queues, queue, &status);
    if (status) halo_hal_queue_destroy(queue);
  }
  halo_remote_reply(server, header->id, status, id,
                    queue && !status && queue->fence_domain ? 1 : 0, NULL, 0);
}

static void halo_remote_on_destroy(halo_remote_server_t *server,
                                   const void *payload, uint64_t length) {
  halo_remote_object_t object;
  if (length < sizeof(object)) return;
  memcpy(&object, payload, sizeof(object));
  pthread_mutex_lock(&server->mutex);
  void *removed = NULL;
  switch (object.kind) {
    case HALO_REMOTE_OBJECT_EXECUTABLE:
      removed = halo_u64_map_remove(&server->executables, object.id);
      break;
    case HALO_REMOTE_OBJECT_COMMAND_BUFFER:
      removed = halo_u64_map_remove(&server->command_buffers, object.id);
      break;
    case HALO_REMOTE_OBJECT_QUEUE:
      removed = halo_u64_map_remove(&server->queues, object.id);
      break;
    case HALO_REMOTE_OBJECT_FENCE:
      removed = halo_u64_map_remove(&server->fences, object.id);
      break;
  }
  pthread_mutex_unlock(&server->mutex);
  if (!removed) return;
  switch (object.kind) {
    case HALO_REMOTE_OBJECT_EXECUTABLE:
      halo_hal_executable_destroy(removed);
      break;
    case HALO_REMOTE_OBJECT_COMMAND_BUFFER:
      halo_hal_command_buffer_destroy(removed);
      break;
    case HALO_REMOTE_OBJECT_QUEUE:
      halo_hal_queue_destroy(removed);
      break;
    case HALO_REMOTE_OBJECT_FENCE:
      halo_hal_fence_release(removed);
      break;
  }
}

// ---------------------------------------------------------------- executions

static void halo_remote_send_complete(halo_remote_server_t *server, uint64_t id,
                                      halo_status_t status) {
  if (halo_status_code(status) == HALO_STATUS_DEVICE_LOST) {
    // The device is lost: this process ends, and the supervisor fails the
    // execution with the loss (see halo_remote_ring_on_complete).
    halo_status_free(status);
    return;
  }
  halo_remote_complete_t complete = {.code = (int32_t)halo_status_code(status)};
  const char *message = halo_status_message(status);
  complete.message_length = status ? (uint32_t)strlen(message) : 0;
  halo_remote_part_t parts[2] = {{&complete, sizeof(complete)},
                                 {message, complete.message_length}};
  halo_status_free(halo_remote_link_send(&server->link, HALO_REMOTE_COMPLETE,
                                         id, parts, 2, -1));
  halo_status_free(status);
}

static void halo_remote_running_free(halo_remote_running_t *running) {
  free(running->bindings);
  free(running->signals);
  free(running);
}

// A driver thread (or the loop thread, within halo_hal_queue_execute).
static void halo_remote_on_execution_complete(void *user_data,
                                              halo_status_t status) {
  halo_remote_running_t *running = user_data;
  halo_remote_send_complete(running->server, running->id, status);
  halo_remote_running_free(running);
}

static void halo_remote_on_execute(halo_remote_server_t *server,
                                   const halo_remote_header_t *header,
                                   const void *payload) {
  halo_remote_execute_t request;
  if (header->length < sizeof(request)) {
    halo_remote_send_complete(server, header->id,
                              halo_remote_short(header->type));
    return;
  }
  memcpy(&request, payload, sizeof(request));
  uint64_t bindings_size =
      (uint64_t)request.binding_count * sizeof(halo_hal_binding_t);
  uint64_t signals_size =
      (uint64_t)request.signal_count * sizeof(halo_remote_signal_t);
  uint64_t fences_size = (uint64_t)request.wait_fence_count * sizeof(uint64_t);
  if (sizeof(request) + bindings_size + signals_size + fences_size !=
      header->length) {
    halo_remote_send_complete(server, header->id,
                              halo_remote_short(header->type));
    return;
  }
  const char *bytes = (const char *)payload + sizeof(request);
  halo_remote_running_t *running = calloc(1, sizeof(*running));
  halo_hal_fence_t *wait_inline[8];
  halo_hal_fence_t **waits =
      request.wait_fence_count <= 8
          ? wait_inline
          : calloc(request.wait_fence_count, sizeof(*waits));
  halo_status_t status = NULL;
  if (running) {
    running->server = server;
    running->id = header->id;
    running->bindings = malloc(bindings_size ? bindings_size : 1);
    running->signals = calloc(request.signal_count ? request.signal_count : 1,
                              sizeof(*running->signals));
  }
  if (!running || !running->bindings || !running->signals || !waits) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  pthread_mutex_lock(&server->mutex);
  halo_hal_queue_t *queue = halo_u64_map_get(&server->queues, request.queue);
  halo_hal_command_buffer_t *command_buffer =
      halo_u64_map_get(&server->command_buffers, request.command_buffer);
  if (!status && (!queue || !command_buffer)) {
    status = halo_status_make(HALO_STATUS_NOT_FOUND,
                              "worker: queue %llu or command buffer %llu",
                              (unsigned long long)request.queue,
                              (unsigned long long)request.command_buffer);
  }
  for (uint32_t i = 0; !status && i < request.signal_count; ++i) {
    halo_remote_signal_t signal;
    memcpy(&signal, bytes + bindings_size + i * sizeof(signal), sizeof(signal));
    running->signals[i].device_address = signal.device_address;
    running->signals[i].value = signal.value;
    if (signal.slot_key) {
      halo_remote_mapping_t *mapping =
          halo_u64_map_get(&server->registrations, signal.slot_key);
      if (mapping &&
          signal.slot_offset + sizeof(halo_timeline_slot_t) <= mapping->size) {
        running->signals[i].slot =
            (halo_timeline_slot_t *)((char *)mapping->pointer +
                                     signal.slot_offset);
      }
    }
  }
  for (uint32_t i = 0; !status && i < request.wait_fence_count; ++i) {
    uint64_t fence_id;
    memcpy(&fence_id,
           bytes + bindings_size + signals_size + i * sizeof(fence_id),
           sizeof(fence_id));
    waits[i] = halo_u64_map_get(&server->fences, fence_id);
    if (!waits[i]) {
      // Its producer never reached the device: this work must not run.
      status = halo_status_make(HALO_STATUS_ABORTED,
                                "the execution it waits for on the device "
                                "did not start");
    }
  }
  pthread_mutex_unlock(&server->mutex);
  if (status) {
    if (running) halo_remote_running_free(running);
    if (waits != wait_inline) free(waits);
    halo_remote_send_complete(server, header->id, status);
    return;
  }
  memcpy(running->bindings, bytes, bindings_size);
  halo_hal_fence_t *out_fence = NULL;
  halo_hal_execution_t execution = {
      .command_buffer = command_buffer,
      .bindings = running->bindings,
      .binding_count = request.binding_count,
      .completion = halo_remote_on_execution_complete,
      .user_data = running,
      .signals = running->signals,
      .signal_count = request.signal_count,
      .wait_fences = waits,
      .wait_fence_count = request.wait_fence_count,
      .out_fence = request.out_fence ? &out_fence : NULL,
  };
  status = halo_hal_queue_execute(queue, &execution);
  if (waits != wait_inline) free(waits);
  if (status) {
    halo_remote_running_free(running);
    halo_remote_send_complete(server, header->id, status);
    return;
  }
  if (out_fence) {
    pthread_mutex_lock(&server->mutex);
    halo_status_t put =
        halo_u64_map_put(&server->fences, request.out_fence, out_fence);
    pthread_mutex_unlock(&server->mutex);
    if (put) {
      halo_status_free(put);
      halo_hal_fence_release(out_fence);
    }
  }
}

// ---------------------------------------------------------------- usage

// The usage reporter: sends the device's usage once, then again each time
// it is seen changed, looking every HALO_REMOTE_USAGE_INTERVAL_NS (a look
// is a short lock in the driver), until the server stops it; on each
// wake-up where it sent no USAGE (none changed, or a driver that reports
// none), ALIVE: the supervisor hears from a running worker at least once
// per interval, whatever its other threads do (remote_link.h).
static void *halo_remote_usage_main(void *argument) {
  halo_remote_server_t *server = argument;
  pthread_setname_np(pthread_self(), "halo-usage");
  halo_hal_device_usage_t sent;
  bool any_sent = false;
  pthread_mutex_lock(&server->usage_mutex);
  while (!server->usage_stopping) {
    pthread_mutex_unlock(&server->usage_mutex);
    halo_hal_device_usage_t usage;
    bool usage_sent = false;
    if (halo_hal_device_query_usage(server->device, &usage) &&
        (!any_sent || memcmp(&usage, &sent, sizeof(usage)) != 0)) {
      halo_remote_part_t part = {&usage, sizeof(usage)};
      halo_status_t status = halo_remote_link_send(
          &server->link, HALO_REMOTE_USAGE, 0, &part, 1, -1);
      if (status) {
        // The supervisor is gone (the worker ends), or this one did not
        // go: the next look sends it again.
        HALO_LOG_DEBUG("worker: sending USAGE: %s",
                       halo_status_message(status));
        halo_status_free(status);
      } else {
        sent = usage;
        any_sent = true;
        usage_sent = true;
      }
    }
    if (!usage_sent) {
      halo_remote_part_t part = {NULL, 0};
      halo_status_t status = halo_remote_link_send(
          &server->link, HALO_REMOTE_ALIVE, 0, &part, 0, -1);
      if (status) {
        HALO_LOG_DEBUG("worker: sending ALIVE: %s",
                       halo_status_message(status));
        halo_status_free(status);
      }
    }
    struct timespec until = halo_clock_timespec(halo_clock_now_ns() +
                                                HALO_REMOTE_USAGE_INTERVAL_NS);
    pthread_mutex_lock(&server->usage_mutex);
    while (!server->usage_stopping &&
           pthread_cond_timedwait(&server->usage_cond, &server->usage_mutex,
                                  &until) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&server->usage_mutex);
  return NULL;
}

// Main thread, after READY: starts the usage reporter, which is also the
// liveness message's sender (every worker runs it, whether its driver
// reports usage or not). A worker whose thread cannot start serves all the
// same, but its supervisor, hearing nothing while it is idle, kills it as
// hung after the hang bound (and starts another).
static void halo_remote_usage_start(halo_remote_server_t *server) {
  // The reporter takes no asynchronous signals: they stay with the main
  // thread.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  int error = pthread_create(&server->usage_reporter, NULL,
                             halo_remote_usage_main, server);
  pthread_sigmask(SIG_SETMASK, &previous, NULL);
  if (error) {
    HALO_LOG_WARN("worker: starting the usage reporter thread: %s",
                  strerror(error));
    return;
  }
  server->usage_running = true;
}

// Main thread, as the worker ends: stops the usage reporter (the link was
// shut down first, so that no send of its waits for the supervisor).
static void halo_remote_usage_stop(halo_remote_server_t *server) {
  if (!server->usage_running) return;
  pthread_mutex_lock(&server->usage_mutex);
  server->usage_stopping = true;
  pthread_cond_signal(&server->usage_cond);
  pthread_mutex_unlock(&server->usage_mutex);
  pthread_join(server->usage_reporter, NULL);
  server->usage_running = false;
}

// ---------------------------------------------------------------- serving

// Main thread: receives one message and carries it out.
static halo_status_t halo_remote_serve_one(halo_remote_server_t *server) {
  halo_remote_header_t header;
  void *payload = NULL;
  int received_fd = -1;
  halo_status_t status =
      halo_remote_link_receive(&server->link, &header, &payload, &received_fd);
  if (status) return status;
  switch (header.type) {
    case HALO_REMOTE_EXECUTE:
      halo_remote_on_execute(server, &header, payload);
      break;
    case HALO_REMOTE_ALLOCATE:
    case HALO_REMOTE_DEALLOCATE:
    case HALO_REMOTE_WRITE:
    case HALO_REMOTE_READ:
      halo_remote_on_memory(server, &header, payload);
      break;
    case HALO_REMOTE_REGISTER_HOST:
      halo_remote_on_register(server, &header, payload, &received_fd);
      break;
    case HALO_REMOTE_UNREGISTER_HOST:
      halo_remote_on_unregister(server, payload, header.length);
      break;
    case HALO_REMOTE_CREATE_EXECUTABLE:
      halo_remote_on_create_executable(server, &header, payload);
      payload = NULL;  // taken
      break;
    case HALO_REMOTE_LOOKUP_ENTRY:
      halo_remote_on_lookup(server, &header, payload);
      break;
    case HALO_REMOTE_PREPARE:
      halo_remote_on_prepare(server, &header, payload);
      break;
    case HALO_REMOTE_CREATE_QUEUE:
      halo_remote_on_create_queue(server, &header, payload);
      break;
    case HALO_REMOTE_DESTROY:
      halo_remote_on_destroy(server, payload, header.length);
      break;
    default:
      if (halo_remote_rings_on_message(server->rings, &header, payload,
                                       &received_fd)) {
        break;
      }
      halo_remote_reply(
          server, header.id,
          halo_status_make(HALO_STATUS_UNIMPLEMENTED, "worker: request type %u",
                           header.type),
          0, 0, NULL, 0);
      break;
  }
  if (received_fd >= 0) close(received_fd);
  free(payload);
  return NULL;
}

void halo_hal_remote_serve_lost(const char *message) {
  halo_remote_server_t *server = halo_remote_server_instance;
  if (server) {
    halo_remote_part_t part = {message, strlen(message)};
    halo_status_free(halo_remote_link_send(&server->link, HALO_REMOTE_LOST, 0,
                                           &part, 1, -1));
  }
  // The context is poisoned: no orderly teardown (driver calls may hang).
  _exit(3);
}

int halo_hal_remote_serve(halo_hal_device_t *device, int fd, int64_t poll_ns,
                          int64_t report_linger_ns) {
  // Not in this frame: the driver's threads (completions, the rings'
  // reporter) may still use the server after this returns, until the
  // process ends (once per process: the caller exits next).
  static halo_remote_server_t server;
  memset(&server, 0, sizeof(server));
  server.device = device;
  halo_remote_link_initialize(&server.link, fd);
  pthread_mutex_init(&server.mutex, NULL);
  pthread_mutex_init(&server.usage_mutex, NULL);
  halo_clock_cond_initialize(&server.usage_cond);
  halo_u64_map_initialize(&server.executables);
  halo_u64_map_initialize(&server.command_buffers);
  halo_u64_map_initialize(&server.queues);
  halo_u64_map_initialize(&server.fences);
  halo_u64_map_initialize(&server.registrations);
  halo_remote_server_instance = &server;
  halo_remote_ready_t ready = {
      .version = HALO_REMOTE_LINK_VERSION,
      .header_size = sizeof(halo_remote_header_t),
      .execute_size = sizeof(halo_remote_execute_t),
      .command_size = sizeof(halo_hal_command_t),
      .pid = getpid(),
      .info = device->info,
  };
  halo_remote_ring_tables_t tables = {
      .link = &server.link,
      .mutex = &server.mutex,
      .command_buffers = &server.command_buffers,
      .queues = &server.queues,
      .registrations = &server.registrations,
      .report_linger_ns = report_linger_ns,
      // The CUDA driver stores every signal with a device address from the
      // stream (hal/cuda/cuda_queue.c); the local driver leaves the values
      // to the supervisor's host path.
      .device_stores_signals = strcmp(device->info.driver, "cuda") == 0,
  };
  halo_status_t status = halo_remote_rings_create(&tables, &server.rings);
  if (!status) {
    halo_remote_part_t part = {&ready, sizeof(ready)};
    status =
        halo_remote_link_send(&server.link, HALO_REMOTE_READY, 0, &part, 1, -1);
  }
  if (!status) halo_remote_usage_start(&server);
  // Each round: the rings' tails first, then every link message readable
  // now, and those counted by then that have not arrived yet, then the
  // rings' records up to those tails (a REVOKE the supervisor sent before
  // its reply to a client is seen before any record the client published
  // after that reply: halod counts it in the flight table before sending
  // it, or as it queues it in the link's outbox, so the count this round
  // reads covers it; remote_link.h).
  // A round that finds nothing makes no system call and reads the clock
  // once: its start is the last round's end. Idle for |poll_ns|: sleep on the
  // link and the doorbells; at once where the last two pieces of work came
  // after longer gaps (halo_clock_gaps_spin_ns: a step every millisecond costs
  // a doorbell wake-up each, not a poll window each).
  int64_t now_ns = halo_clock_now_ns();
  int64_t last_work_ns = now_ns;
  halo_clock_gaps_t gaps = {0, 0, 0};
  while (!status) {
    int64_t round_ns = now_ns;
    halo_remote_rings_snapshot(server.rings);
    uint64_t counted = halo_remote_link_counted(&server.link);
    bool work = false;
    while (!status && halo_remote_link_readable(&server.link)) {
      status = halo_remote_serve_one(&server);
      work = true;
    }
    // A message counted but not arrived is on its way: being written, or
    // in halod's outbox behind a call's send, which this loop reads too
    // (so waiting here cannot hold halod's writer).
    while (!status && halo_remote_link_counted_ahead(&server.link, counted)) {
      if (halo_remote_link_wait(&server.link, 0, 1)) {
        status = halo_remote_serve_one(&server);
        work = true;
      }
    }
    if (status) break;
    if (halo_remote_rings_drain(server.rings)) work = true;
    now_ns = halo_clock_now_ns();
    if (work) {
      halo_clock_gaps_arrived(&gaps, round_ns);
      gaps.done_ns = now_ns;
      last_work_ns = now_ns;
    } else if (now_ns - last_work_ns >=
               halo_clock_gaps_spin_ns(&gaps, poll_ns)) {
      if (halo_remote_rings_sleep(server.rings, server.link.fd)) {
        halo_remote_link_poll_next(&server.link);  // a message, or its end
      }
      now_ns = halo_clock_now_ns();
    }
  }
  // The supervisor closed the link (or it broke): the worker ends. The
  // driver's objects go with the process; the driver is not torn down
  // object by object, since executions may still be in flight. The usage
  // reporter stops first: it would only find the link shut.
  shutdown(server.link.fd, SHUT_RDWR);
  halo_remote_usage_stop(&server);
  int exit_code = halo_status_code(status) == HALO_STATUS_UNAVAILABLE ? 0 : 1;
  if (exit_code) {
    HALO_LOG_ERROR("worker: %s", halo_status_message(status));
  }
  halo_status_free(status);
  return exit_code;
}
