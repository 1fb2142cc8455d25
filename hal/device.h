// The device abstraction (HAL): one vtable per driver. This first cut covers
// what sessions and buffers need (device info, device memory, host memory
// registration); executables, command buffers and queues come with the
// execution model.
//
// Thread-safety: devices are thread-safe (the CUDA driver will call them from
// its submission thread); the registry functions run on the loop thread.
#ifndef HALO_HAL_DEVICE_H_
#define HALO_HAL_DEVICE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

typedef struct halo_hal_device_t halo_hal_device_t;

typedef struct halo_hal_device_info_t {
  char driver[16];
  char name[128];
  uint64_t memory_bytes;
  uint32_t compute_major;
  uint32_t compute_minor;
  uint32_t multiprocessor_count;
} halo_hal_device_info_t;

typedef struct halo_hal_device_vtable_t {
  void (*destroy)(halo_hal_device_t *device);
  // Device memory: an opaque address (a CUdeviceptr on CUDA).
  halo_status_t (*allocate)(halo_hal_device_t *device, uint64_t size,
                            uint64_t *out_address);
  void (*deallocate)(halo_hal_device_t *device, uint64_t address,
                     uint64_t size);
  halo_status_t (*write)(halo_hal_device_t *device, uint64_t address,
                         const void *data, uint64_t length);
  halo_status_t (*read)(halo_hal_device_t *device, uint64_t address,
                        void *out_data, uint64_t length);
  // Makes host memory (an arena mapping) reachable by the device.
  halo_status_t (*register_host)(halo_hal_device_t *device, void *pointer,
                                 uint64_t size);
  void (*unregister_host)(halo_hal_device_t *device, void *pointer);
} halo_hal_device_vtable_t;

struct halo_hal_device_t {
  const halo_hal_device_vtable_t *vtable;
  halo_hal_device_info_t info;
};

// A driver as the daemon sees it: available or not, and why.
typedef struct halo_hal_driver_info_t {
  const char *name;
  bool available;
  char reason[256];
} halo_hal_driver_info_t;

#define HALO_HAL_MAX_DEVICES 16
#define HALO_HAL_DRIVER_COUNT 2

typedef struct halo_hal_registry_t {
  halo_hal_driver_info_t drivers[HALO_HAL_DRIVER_COUNT];
  halo_hal_device_t *devices[HALO_HAL_MAX_DEVICES];
  uint32_t device_count;
} halo_hal_registry_t;

// Probes the drivers and creates the devices of |driver_name|: "auto" picks
// the best available (cuda, else local), "local" or "cuda" insist on one and
// fail with the driver's reason if it is unavailable.
halo_status_t halo_hal_registry_initialize(const char *driver_name,
                                           halo_hal_registry_t *registry);
void halo_hal_registry_deinitialize(halo_hal_registry_t *registry);

// Drivers.
halo_status_t halo_hal_local_device_create(halo_hal_device_t **out_device);
// Fills |out_reason| and returns false when CUDA is unavailable.
bool halo_hal_cuda_probe(char *out_reason, size_t reason_size);

#endif  // HALO_HAL_DEVICE_H_
