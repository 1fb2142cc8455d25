// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A CUDA device: the GPU's primary context, its device information, the
// stream priority range, a transfer stream for control-plane copies, two
// driver threads (submission and reaper, cuda_thread.c) and the pool of
// streams its queues share (cuda_stream_pool.c).
#include "hal/cuda/cuda_device.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/status.h"
#include "hal/cuda/cuda_command_buffer.h"

static const halo_hal_device_vtable_t halo_hal_cuda_device_vtable;

bool halo_hal_cuda_device_isa(const halo_hal_device_t *device) {
  return device && device->vtable == &halo_hal_cuda_device_vtable;
}

halo_hal_cuda_device_t *halo_hal_cuda_device_cast(halo_hal_device_t *device) {
  return halo_hal_cuda_device_isa(device) ? (halo_hal_cuda_device_t *)device
                                          : NULL;
}

halo_status_t halo_hal_cuda_device_make_current(
    halo_hal_cuda_device_t *device) {
  HALO_CUDA_RETURN_IF_ERROR(device->cu, cuCtxSetCurrent, device->context);
  return NULL;
}

bool halo_hal_cuda_driver_probe(const char *cache_directory, char *out_reason,
                                size_t reason_size, uint32_t *out_count) {
  *out_count = 0;
  out_reason[0] = '\0';
  if (cache_directory && *cache_directory) {
    // The driver's own PTX JIT cache (fatbins carrying only PTX, ...) lives
    // beside ours, unless the environment points it elsewhere; the driver
    // reads the variable in cuInit.
    char path[512];
    snprintf(path, sizeof(path), "%s/nv", cache_directory);
    halo_status_t status = halo_hal_cuda_make_directory(path);
    if (status) {
      HALO_LOG_WARN("cuda: cache directory: %s; CUDA_CACHE_PATH unchanged",
                    halo_status_message(status));
      halo_status_free(status);
    } else if (setenv("CUDA_CACHE_PATH", path, 0) == 0 &&
               strcmp(getenv("CUDA_CACHE_PATH"), path) != 0) {
      HALO_LOG_INFO("cuda: CUDA_CACHE_PATH stays %s (set in the environment)",
                    getenv("CUDA_CACHE_PATH"));
    }
  }
  const halo_hal_cuda_symbols_t *cu = NULL;
  halo_status_t status = halo_hal_cuda_symbols_load(&cu);
  if (status) {
    snprintf(out_reason, reason_size, "%s", halo_status_message(status));
    halo_status_free(status);
    return false;
  }
  int count = 0;
  CUresult result = cu->cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS || count <= 0) {
    status = halo_hal_cuda_result_to_status(cu, result, "cuDeviceGetCount");
    snprintf(out_reason, reason_size, "%s",
             status ? halo_status_message(status) : "no CUDA device");
    halo_status_free(status);
    return false;
  }
  *out_count = (uint32_t)count;
  return true;
}

static halo_status_t halo_hal_cuda_device_attribute(
    halo_hal_cuda_device_t *device, CUdevice_attribute attribute,
    const char *name, int *out_value) {
  CUresult result =
      device->cu->cuDeviceGetAttribute(out_value, attribute, device->device);
  if (result != CUDA_SUCCESS) {
    return halo_status_annotate(halo_hal_cuda_result_to_status(
                                    device->cu, result, "cuDeviceGetAttribute"),
                                "CUDA device %u: %s", device->ordinal, name);
  }
  return NULL;
}

// Fills the device information and checks what the driver relies on.
static halo_status_t halo_hal_cuda_device_query(
    halo_hal_cuda_device_t *device) {
  const halo_hal_cuda_symbols_t *cu = device->cu;
  halo_hal_device_info_t *info = &device->base.info;
  snprintf(info->driver, sizeof(info->driver), "cuda");
  HALO_CUDA_RETURN_IF_ERROR(cu, cuDeviceGetName, info->name,
                            (int)sizeof(info->name), device->device);
  size_t bytes = 0;
  HALO_CUDA_RETURN_IF_ERROR(cu, cuDeviceTotalMem, &bytes, device->device);
  info->memory_bytes = bytes;
  int major = 0, minor = 0, sms = 0, pools = 0, host_pointer = 0, uva = 0;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_attribute(
      device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
      "compute capability", &major));
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_attribute(
      device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
      "compute capability", &minor));
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_attribute(
      device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count",
      &sms));
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_attribute(
      device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, "memory pools",
      &pools));
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_attribute(
      device, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
      "host pointers for registered memory", &host_pointer));
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_attribute(
      device, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "unified addressing",
      &uva));
  // CU_DEVICE_ATTRIBUTE_MPS_ENABLED (133; cuda.h names it from CUDA 12.5):
  // an older driver does not know it.
  int mps = 0;
  info->mps_known = cu->cuDeviceGetAttribute(&mps, (CUdevice_attribute)133,
                                             device->device) == CUDA_SUCCESS;
  info->mps = info->mps_known && mps != 0;
  info->compute_major = (uint32_t)major;
  info->compute_minor = (uint32_t)minor;
  info->multiprocessor_count = (uint32_t)sms;
  device->arch = major * 10 + minor;
  if (!pools) {
    return halo_status_make(HALO_STATUS_UNIMPLEMENTED,
                            "CUDA device %u (%s) has no stream-ordered memory "
                            "pools; halo needs them",
                            device->ordinal, info->name);
  }
  if (!uva) {
    return halo_status_make(HALO_STATUS_UNIMPLEMENTED,
                            "CUDA device %u (%s) has no unified addressing; "
                            "halo needs it",
                            device->ordinal, info->name);
  }
  (void)host_pointer;  // cuMemHostGetDevicePointer covers either answer
  if (cu->cuDeviceGetPCIBusId(device->pci_bus_id,
                              (int)sizeof(device->pci_bus_id),
                              device->device) != CUDA_SUCCESS) {
    device->pci_bus_id[0] = '\0';
  }
  return NULL;
}

// The loader (cuda_device.h): HALO_CUDA_LOADER=module|library overrides
// the default, for measurements (docs/architecture.md).
static halo_hal_cuda_loader_t halo_hal_cuda_device_loader(void) {
  const char *loader = getenv("HALO_CUDA_LOADER");
  if (loader && strcmp(loader, "module") == 0) {
    return HALO_HAL_CUDA_LOADER_MODULE;
  }
  if (loader && strcmp(loader, "library") == 0) {
    return HALO_HAL_CUDA_LOADER_LIBRARY;
  }
  return HALO_HAL_CUDA_LOADER_LIBRARY;
}

static void halo_hal_cuda_device_destroy(halo_hal_device_t *base_device) {
  halo_hal_cuda_device_t *device = (halo_hal_cuda_device_t *)base_device;
  const halo_hal_cuda_symbols_t *cu = device->cu;
  // Queues and executables were destroyed before (hal/device.h); their
  // last tasks run here.
  halo_hal_cuda_thread_stop(&device->submission);
  halo_hal_cuda_thread_stop(&device->reaper);
  if (device->context) {
    cu->cuCtxSetCurrent(device->context);
    // Every queue released its stream (hal/device.h: queues go first).
    halo_hal_cuda_stream_pool_deinitialize(&device->streams);
    if (device->transfer_stream) {
      cu->cuStreamSynchronize(device->transfer_stream);
      cu->cuStreamDestroy(device->transfer_stream);
    }
    if (device->pool) cu->cuMemPoolTrimTo(device->pool, 0);
    halo_hal_cuda_tickets_free(device);
    if (device->registrations) {
      HALO_LOG_WARN("CUDA device %u: host registrations left at destroy",
                    device->ordinal);
    }
    cu->cuCtxSetCurrent(NULL);
    cu->cuDevicePrimaryCtxRelease(device->device);
  }
  // dispatch_indirect's built-in kernel (cuda_command_buffer.c): its
  // module goes with the context, the reason it did not load with us.
  halo_status_free(device->builtin_failure);
  pthread_mutex_destroy(&device->registration_mutex);
  pthread_mutex_destroy(&device->transfer_mutex);
  pthread_mutex_destroy(&device->ticket_mutex);
  pthread_mutex_destroy(&device->graph_mutex);
  free(device);
}

static halo_status_t halo_hal_cuda_device_create_executable(
    halo_hal_device_t *base_device, const halo_hal_executable_params_t *params,
    halo_hal_executable_t **out_executable) {
  return halo_hal_cuda_executable_create((halo_hal_cuda_device_t *)base_device,
                                         params, out_executable);
}

static halo_status_t halo_hal_cuda_device_prepare_command_buffer(
    halo_hal_device_t *base_device, halo_hal_recording_t *recording,
    halo_hal_command_buffer_t **out_command_buffer) {
  return halo_hal_cuda_command_buffer_prepare(
      (halo_hal_cuda_device_t *)base_device, recording, out_command_buffer);
}

static halo_status_t halo_hal_cuda_device_create_queue(
    halo_hal_device_t *base_device, int32_t priority,
    halo_hal_queue_t **out_queue) {
  return halo_hal_cuda_queue_create((halo_hal_cuda_device_t *)base_device,
                                    priority, out_queue);
}

// Any thread: the graph instances' memory by halo's estimate and its
// bound, cuda-graph-bytes (cuda_graph_memory.c).
static bool halo_hal_cuda_device_query_usage(
    halo_hal_device_t *base_device, halo_hal_device_usage_t *out_usage) {
  halo_hal_cuda_device_t *device = (halo_hal_cuda_device_t *)base_device;
  halo_hal_cuda_device_graph_usage(device, &out_usage->graph_bytes,
                                   &out_usage->graph_instances);
  out_usage->graph_bytes_limit = device->graph_bytes_limit;
  return true;
}

static const halo_hal_device_vtable_t halo_hal_cuda_device_vtable = {
    .destroy = halo_hal_cuda_device_destroy,
    .create_executable = halo_hal_cuda_device_create_executable,
    .prepare_command_buffer = halo_hal_cuda_device_prepare_command_buffer,
    .create_queue = halo_hal_cuda_device_create_queue,
    .query_usage = halo_hal_cuda_device_query_usage,
};

// Everything after the allocation; |device| is destroyed by the caller on
// failure.
static halo_status_t halo_hal_cuda_device_initialize(
    halo_hal_cuda_device_t *device) {
  const halo_hal_cuda_symbols_t *cu = device->cu;
  HALO_CUDA_RETURN_IF_ERROR(cu, cuDeviceGet, &device->device,
                            (int)device->ordinal);
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_query(device));
  CUcontext context = NULL;
  HALO_CUDA_RETURN_IF_ERROR(cu, cuDevicePrimaryCtxRetain, &context,
                            device->device);
  device->context = context;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_make_current(device));
  HALO_CUDA_RETURN_IF_ERROR(cu, cuCtxGetStreamPriorityRange,
                            &device->stream_priority_least,
                            &device->stream_priority_greatest);
  // Device memory comes from the default pool; keep freed memory in the
  // pool instead of returning it to the OS at every synchronization.
  HALO_CUDA_RETURN_IF_ERROR(cu, cuDeviceGetDefaultMemPool, &device->pool,
                            device->device);
  cuuint64_t threshold = UINT64_MAX;
  HALO_CUDA_RETURN_IF_ERROR(cu, cuMemPoolSetAttribute, device->pool,
                            CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
  // Never the legacy default stream: it synchronizes with every blocking
  // stream of the context.
  HALO_CUDA_RETURN_IF_ERROR(cu, cuStreamCreateWithPriority,
                            &device->transfer_stream, CU_STREAM_NON_BLOCKING,
                            0);
  char name[16];
  snprintf(name, sizeof(name), "halo-cu%u-sub", device->ordinal);
  HALO_RETURN_IF_ERROR(
      halo_hal_cuda_thread_start(&device->submission, name, cu, device->context,
                                 HALO_HAL_CUDA_SUBMISSION_SPIN_NS));
  snprintf(name, sizeof(name), "halo-cu%u-reap", device->ordinal);
  HALO_RETURN_IF_ERROR(halo_hal_cuda_thread_start(&device->reaper, name, cu,
                                                  device->context, 0));
  return halo_hal_cuda_device_open_streams(device);
}

typedef struct halo_hal_cuda_open_streams_task_t {
  halo_hal_cuda_task_t task;
  halo_hal_cuda_device_t *device;
  halo_status_t status;
} halo_hal_cuda_open_streams_task_t;

// Submission thread: the stream pool, then the store kernel.
static void halo_hal_cuda_open_streams_run(halo_hal_cuda_task_t *base_task) {
  halo_hal_cuda_open_streams_task_t *task =
      (halo_hal_cuda_open_streams_task_t *)base_task;
  halo_hal_cuda_device_t *device = task->device;
  uint32_t count = device->options.stream_count ? device->options.stream_count
                                                : HALO_HAL_CUDA_DEFAULT_STREAMS;
  task->status = halo_hal_cuda_stream_pool_initialize(
      device->cu, count,
      device->options.completion == HALO_HAL_CUDA_COMPLETION_HOST_FUNC,
      device->stream_priority_least, device->stream_priority_greatest,
      &device->streams);
  // Now, while the context runs nothing: later, the load would wait for
  // whatever kernel runs (architecture: loads stall behind running work).
  halo_hal_cuda_store_kernel(device);
}

halo_status_t halo_hal_cuda_device_open_streams(
    halo_hal_cuda_device_t *device) {
  halo_hal_cuda_open_streams_task_t task = {
      .task.run = halo_hal_cuda_open_streams_run,
      .device = device,
  };
  halo_hal_cuda_thread_post(&device->submission, &task.task);
  // The task ran (and wrote the pool) before flush returns.
  halo_hal_cuda_thread_flush(&device->submission);
  return task.status;
}

bool halo_hal_cuda_diagnostic_on(const char *name) {
  const char *value = getenv(name);
  return !value || strcmp(value, "0") != 0;
}

halo_status_t halo_hal_cuda_device_create(
    uint32_t ordinal, const halo_hal_cuda_device_options_t *options,
    halo_hal_device_t **out_device) {
  *out_device = NULL;
  const halo_hal_cuda_symbols_t *cu = NULL;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_symbols_load(&cu));
  halo_hal_cuda_device_t *device = calloc(1, sizeof(*device));
  if (!device) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  device->base.vtable = &halo_hal_cuda_device_vtable;
  device->cu = cu;
  device->ordinal = ordinal;
  if (options) device->options = *options;
  device->instance_affinity =
      halo_hal_cuda_diagnostic_on("HALO_CUDA_INSTANCE_AFFINITY");
  device->eventless_completion =
      halo_hal_cuda_diagnostic_on("HALO_CUDA_EVENTLESS");
  device->issue_on_caller =
      halo_hal_cuda_diagnostic_on("HALO_CUDA_ISSUE_ON_CALLER");
  device->wait_on_submission =
      halo_hal_cuda_diagnostic_on("HALO_CUDA_WAIT_ON_SUBMISSION");
  // On unless HALO_CUDA_GRAPH_STORES=0: where tasks wait for the
  // submission thread (many tenants), a launch without a store call per
  // signal raised T64 through several workers over MPS by 2-14%; with none
  // waiting the node is disabled and costs nothing (docs/performance.md).
  device->graph_stores = halo_hal_cuda_diagnostic_on("HALO_CUDA_GRAPH_STORES");
  device->graph_instances = HALO_HAL_CUDA_GRAPH_INSTANCES;
  const char *instances = getenv("HALO_CUDA_GRAPH_INSTANCES");
  if (instances) {
    char *end = NULL;
    long value = strtol(instances, &end, 10);
    if (end != instances && *end == '\0' && value >= 1 && value <= 4096) {
      device->graph_instances = (uint32_t)value;
    } else {
      HALO_LOG_WARN(
          "CUDA device %u: HALO_CUDA_GRAPH_INSTANCES=%s is not 1 to "
          "4096: %u graph instances per recording",
          ordinal, instances, device->graph_instances);
    }
  }
  pthread_mutex_init(&device->ticket_mutex, NULL);
  pthread_mutex_init(&device->graph_mutex, NULL);
  device->graph_bytes_limit = device->options.graph_bytes
                                  ? device->options.graph_bytes
                                  : HALO_HAL_CUDA_DEFAULT_GRAPH_BYTES;
  device->loader = halo_hal_cuda_device_loader();
  pthread_mutex_init(&device->transfer_mutex, NULL);
  pthread_mutex_init(&device->registration_mutex, NULL);
  halo_hal_cuda_allocator_initialize(device);
  device->base.allocator = &device->allocator;
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = NULL;
  halo_status_t status = halo_hal_cuda_nvrtc_load(&nvrtc);
  if (status) {
    HALO_LOG_WARN("CUDA device %u: %s", ordinal, halo_status_message(status));
    halo_status_free(status);
  }
  device->nvrtc = nvrtc;
  status = halo_hal_cuda_device_initialize(device);
  if (status) {
    halo_hal_cuda_device_destroy(&device->base);
    return halo_status_annotate(status, "CUDA device %u", ordinal);
  }
  const char *connections = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  HALO_LOG_INFO(
      "CUDA device %u: %s (sm_%d, %u SMs, %.1f GiB, PCI %s), driver %d.%d, "
      "NVRTC %s, stream priorities %d..%d, %u streams per priority, "
      "completion %s, loader %s, MPS %s, work queues %s",
      ordinal, device->base.info.name, device->arch,
      device->base.info.multiprocessor_count,
      (double)device->base.info.memory_bytes / (1024.0 * 1024.0 * 1024.0),
      device->pci_bus_id[0] ? device->pci_bus_id : "?",
      cu->driver_version / 1000, cu->driver_version % 1000 / 10,
      nvrtc ? "yes" : "no", device->stream_priority_least,
      device->stream_priority_greatest, device->streams.stream_count,
      device->options.completion == HALO_HAL_CUDA_COMPLETION_HOST_FUNC
          ? "host_func"
          : "thread",
      device->loader == HALO_HAL_CUDA_LOADER_MODULE ? "module" : "library",
      !device->base.info.mps_known ? "unknown"
      : device->base.info.mps      ? "yes"
                                   : "no",
      connections ? connections : "the driver's default");
  if (device->base.info.mps && !connections) {
    HALO_LOG_WARN(
        "CUDA device %u: an MPS client gets few hardware work queues by "
        "default, so the work of this context's streams queues up behind "
        "each other: set halod's cuda-connections (16 for a few workers "
        "per GPU; the MPS server's pool bounds the sum over its clients)",
        ordinal);
  }
  *out_device = &device->base;
  return NULL;
}
