// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The CUDA allocator: device memory from the device's default stream-ordered
// pool (cuMemAllocAsync/cuMemFreeAsync do not wait for running kernels,
// unlike cuMemFree), control-plane reads and writes as async copies on the
// transfer stream followed by a synchronization of that stream only, and
// host registrations with cuMemHostRegister(DEVICEMAP|PORTABLE).
//
// Host registrations and the reaper: cuMemHostUnregister waits until every
// running kernel of the context ends (docs/performance.md "CUDA driver
// (H100)"), so it runs on the reaper. The caller (daemon/arena.c) unmaps its
// mapping right after unregister_host returns, and the kernel may hand the same
// virtual addresses to the next mapping, whose registration would then fail
// with HOST_MEMORY_ALREADY_REGISTERED while the old one waits on the reaper. So
// the allocator never registers the caller's mapping itself: it registers
// an alias, a second mapping of the same shared pages (mremap with an old
// size of 0 duplicates a MAP_SHARED mapping), owns it, and the reaper
// unregisters and unmaps the alias. GPU writes land in the same pages, so
// the caller's view and every client's see them.
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "common/status.h"
#include "hal/cuda/cuda_device.h"

struct halo_hal_cuda_host_registration_t {
  halo_hal_cuda_task_t task;  // the reaper's, at unregistration
  halo_hal_cuda_device_t *device;
  halo_hal_cuda_host_registration_t *next;
  void *pointer;  // the caller's mapping
  void *alias;    // what is registered (== pointer when no alias was made)
  uint64_t size;
};

static halo_hal_cuda_device_t *halo_hal_cuda_allocator_device(
    halo_hal_allocator_t *allocator) {
  return (
      halo_hal_cuda_device_t *)((char *)allocator -
                                offsetof(halo_hal_cuda_device_t, allocator));
}

// Runs |copy|-like work on the transfer stream under its mutex, then waits
// for that stream alone.
static halo_status_t halo_hal_cuda_allocator_sync(
    halo_hal_cuda_device_t *device, const char *what) {
  CUresult result = device->cu->cuStreamSynchronize(device->transfer_stream);
  if (result != CUDA_SUCCESS) {
    return halo_status_annotate(halo_hal_cuda_result_to_status(
                                    device->cu, result, "cuStreamSynchronize"),
                                "CUDA device %u: %s", device->ordinal, what);
  }
  return NULL;
}

static halo_status_t halo_hal_cuda_allocator_allocate(
    halo_hal_allocator_t *allocator, uint64_t size, uint64_t *out_address) {
  *out_address = 0;
  halo_hal_cuda_device_t *device = halo_hal_cuda_allocator_device(allocator);
  const halo_hal_cuda_symbols_t *cu = device->cu;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_make_current(device));
  if (size == 0) size = 1;
  pthread_mutex_lock(&device->transfer_mutex);
  CUdeviceptr pointer = 0;
  CUresult result =
      cu->cuMemAllocAsync(&pointer, (size_t)size, device->transfer_stream);
  halo_status_t status = NULL;
  if (result != CUDA_SUCCESS) {
    status = halo_status_annotate(
        halo_hal_cuda_result_to_status(cu, result, "cuMemAllocAsync"),
        "CUDA device %u: allocating %llu bytes", device->ordinal,
        (unsigned long long)size);
  }
  // Zeroed: pool memory may hold another session's bytes. Then
  // synchronized, so the memory is usable on every stream.
  if (!status) {
    result =
        cu->cuMemsetD8Async(pointer, 0, (size_t)size, device->transfer_stream);
    if (result != CUDA_SUCCESS) {
      status = halo_status_annotate(
          halo_hal_cuda_result_to_status(cu, result, "cuMemsetD8Async"),
          "CUDA device %u: zeroing %llu new bytes", device->ordinal,
          (unsigned long long)size);
    }
    if (!status) {
      status = halo_hal_cuda_allocator_sync(device, "allocating");
    }
    if (status) {
      cu->cuMemFreeAsync(pointer, device->transfer_stream);
    }
  }
  pthread_mutex_unlock(&device->transfer_mutex);
  if (!status) *out_address = (uint64_t)pointer;
  return status;
}

// The daemon frees a buffer only after every execution using it completed,
// so freeing in the transfer stream's order is safe.
static void halo_hal_cuda_allocator_deallocate(halo_hal_allocator_t *allocator,
                                               uint64_t address,
                                               uint64_t size) {
  (void)size;
  halo_hal_cuda_device_t *device = halo_hal_cuda_allocator_device(allocator);
  const halo_hal_cuda_symbols_t *cu = device->cu;
  halo_status_t status = halo_hal_cuda_device_make_current(device);
  if (!status) {
    pthread_mutex_lock(&device->transfer_mutex);
    CUresult result =
        cu->cuMemFreeAsync((CUdeviceptr)address, device->transfer_stream);
    pthread_mutex_unlock(&device->transfer_mutex);
    status = halo_hal_cuda_result_to_status(cu, result, "cuMemFreeAsync");
  }
  if (status) {
    HALO_LOG_ERROR("CUDA device %u: freeing 0x%llx: %s", device->ordinal,
                   (unsigned long long)address, halo_status_message(status));
    halo_status_free(status);
  }
}

static halo_status_t halo_hal_cuda_allocator_write(
    halo_hal_allocator_t *allocator, uint64_t address, const void *data,
    uint64_t length) {
  halo_hal_cuda_device_t *device = halo_hal_cuda_allocator_device(allocator);
  const halo_hal_cuda_symbols_t *cu = device->cu;
  if (length == 0) return NULL;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_make_current(device));
  pthread_mutex_lock(&device->transfer_mutex);
  CUresult result = cu->cuMemcpyHtoDAsync(
      (CUdeviceptr)address, data, (size_t)length, device->transfer_stream);
  halo_status_t status =
      result == CUDA_SUCCESS
          ? halo_hal_cuda_allocator_sync(device, "writing a buffer")
          : halo_status_annotate(
                halo_hal_cuda_result_to_status(cu, result, "cuMemcpyHtoDAsync"),
                "CUDA device %u: writing %llu bytes at 0x%llx", device->ordinal,
                (unsigned long long)length, (unsigned long long)address);
  pthread_mutex_unlock(&device->transfer_mutex);
  return status;
}

static halo_status_t halo_hal_cuda_allocator_read(
    halo_hal_allocator_t *allocator, uint64_t address, void *out_data,
    uint64_t length) {
  halo_hal_cuda_device_t *device = halo_hal_cuda_allocator_device(allocator);
  const halo_hal_cuda_symbols_t *cu = device->cu;
  if (length == 0) return NULL;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_make_current(device));
  pthread_mutex_lock(&device->transfer_mutex);
  CUresult result = cu->cuMemcpyDtoHAsync(
      out_data, (CUdeviceptr)address, (size_t)length, device->transfer_stream);
  halo_status_t status =
      result == CUDA_SUCCESS
          ? halo_hal_cuda_allocator_sync(device, "reading a buffer")
          : halo_status_annotate(
                halo_hal_cuda_result_to_status(cu, result, "cuMemcpyDtoHAsync"),
                "CUDA device %u: reading %llu bytes at 0x%llx", device->ordinal,
                (unsigned long long)length, (unsigned long long)address);
  pthread_mutex_unlock(&device->transfer_mutex);
  return status;
}

static halo_status_t halo_hal_cuda_allocator_register_host(
    halo_hal_allocator_t *allocator, void *pointer, uint64_t size, int fd,
    uint64_t *out_address) {
  (void)fd;
  *out_address = 0;
  halo_hal_cuda_device_t *device = halo_hal_cuda_allocator_device(allocator);
  const halo_hal_cuda_symbols_t *cu = device->cu;
  HALO_RETURN_IF_ERROR(halo_hal_cuda_device_make_current(device));
  halo_hal_cuda_host_registration_t *registration =
      calloc(1, sizeof(*registration));
  if (!registration) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  registration->device = device;
  registration->pointer = pointer;
  registration->size = size;
  // The alias (see the top); a private mapping cannot be duplicated, and is
  // then registered as it is (its unregistration still goes to the reaper).
  void *alias = mremap(pointer, 0, (size_t)size, MREMAP_MAYMOVE);
  if (alias == MAP_FAILED) {
    HALO_LOG_DEBUG(
        "CUDA device %u: no alias of %p (%s); registering it as "
        "it is",
        device->ordinal, pointer, strerror(errno));
    alias = pointer;
  }
  registration->alias = alias;
  halo_status_t status = NULL;
  CUresult result = cu->cuMemHostRegister(
      alias, (size_t)size,
      CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
  if (result != CUDA_SUCCESS) {
    status = halo_hal_cuda_result_to_status(cu, result, "cuMemHostRegister");
  }
  CUdeviceptr device_pointer = 0;
  if (!status) {
    result = cu->cuMemHostGetDevicePointer(&device_pointer, alias, 0);
    if (result != CUDA_SUCCESS) {
      status = halo_hal_cuda_result_to_status(cu, result,
                                              "cuMemHostGetDevicePointer");
      cu->cuMemHostUnregister(alias);  // nothing of it can be in use yet
    }
  }
  if (status) {
    if (alias != pointer) munmap(alias, (size_t)size);
    free(registration);
    return halo_status_annotate(status,
                                "CUDA device %u: registering %llu bytes of "
                                "host memory at %p",
                                device->ordinal, (unsigned long long)size,
                                pointer);
  }
  pthread_mutex_lock(&device->registration_mutex);
  registration->next = device->registrations;
  device->registrations = registration;
  pthread_mutex_unlock(&device->registration_mutex);
  *out_address = (uint64_t)device_pointer;
  return NULL;
}

// Reaper thread.
static void halo_hal_cuda_unregister_task_run(halo_hal_cuda_task_t *task) {
  halo_hal_cuda_host_registration_t *registration =
      (halo_hal_cuda_host_registration_t *)task;
  halo_hal_cuda_device_t *device = registration->device;
  CUresult result = device->cu->cuMemHostUnregister(registration->alias);
  if (result != CUDA_SUCCESS) {
    halo_status_t status = halo_hal_cuda_result_to_status(
        device->cu, result, "cuMemHostUnregister");
    HALO_LOG_ERROR("CUDA device %u: unregistering %p: %s", device->ordinal,
                   registration->alias, halo_status_message(status));
    halo_status_free(status);
  }
  if (registration->alias != registration->pointer) {
    munmap(registration->alias, (size_t)registration->size);
  }
  free(registration);
}

static void halo_hal_cuda_allocator_unregister_host(
    halo_hal_allocator_t *allocator, void *pointer) {
  halo_hal_cuda_device_t *device = halo_hal_cuda_allocator_device(allocator);
  pthread_mutex_lock(&device->registration_mutex);
  halo_hal_cuda_host_registration_t **link = &device->registrations;
  while (*link && (*link)->pointer != pointer) link = &(*link)->next;
  halo_hal_cuda_host_registration_t *registration = *link;
  if (registration) *link = registration->next;
  pthread_mutex_unlock(&device->registration_mutex);
  if (!registration) {
    HALO_LOG_ERROR("CUDA device %u: unregister_host(%p): not registered",
                   device->ordinal, pointer);
    return;
  }
  registration->task.run = halo_hal_cuda_unregister_task_run;
  halo_hal_cuda_thread_post(&device->reaper, &registration->task);
}

static const halo_hal_allocator_vtable_t halo_hal_cuda_allocator_vtable = {
    .allocate = halo_hal_cuda_allocator_allocate,
    .deallocate = halo_hal_cuda_allocator_deallocate,
    .write = halo_hal_cuda_allocator_write,
    .read = halo_hal_cuda_allocator_read,
    .register_host = halo_hal_cuda_allocator_register_host,
    .unregister_host = halo_hal_cuda_allocator_unregister_host,
};

void halo_hal_cuda_allocator_initialize(halo_hal_cuda_device_t *device) {
  device->allocator.vtable = &halo_hal_cuda_allocator_vtable;
}
