#include "hal/device.h"

#include <stdio.h>
#include <string.h>

#include "common/status.h"

bool halo_hal_cuda_probe(char *out_reason, size_t reason_size) {
  // The CUDA driver (hal/cuda/) is not built yet; say so rather than pretend.
  snprintf(out_reason, reason_size,
           "the CUDA driver is not part of this build yet");
  return false;
}

halo_status_t halo_hal_registry_initialize(const char *driver_name,
                                           halo_hal_registry_t *registry) {
  memset(registry, 0, sizeof(*registry));
  halo_hal_driver_info_t *cuda = &registry->drivers[0];
  halo_hal_driver_info_t *local = &registry->drivers[1];
  cuda->name = "cuda";
  cuda->available = halo_hal_cuda_probe(cuda->reason, sizeof(cuda->reason));
  local->name = "local";
  local->available = true;

  bool want_cuda = strcmp(driver_name, "cuda") == 0;
  bool want_local = strcmp(driver_name, "local") == 0;
  if (!want_cuda && !want_local && strcmp(driver_name, "auto") != 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "unknown driver '%s' (expected auto, local or "
                            "cuda)",
                            driver_name);
  }
  if (want_cuda && !cuda->available) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE,
                            "driver cuda unavailable: %s", cuda->reason);
  }
  // Only the local driver creates devices until hal/cuda/ exists.
  halo_hal_device_t *device = NULL;
  HALO_RETURN_IF_ERROR(halo_hal_local_device_create(&device));
  registry->devices[registry->device_count++] = device;
  return NULL;
}

void halo_hal_registry_deinitialize(halo_hal_registry_t *registry) {
  for (uint32_t i = 0; i < registry->device_count; ++i) {
    registry->devices[i]->vtable->destroy(registry->devices[i]);
  }
  registry->device_count = 0;
}
