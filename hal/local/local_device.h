// The local (CPU) driver: the embedded default without a GPU, and what CI
// exercises. Executables are ELF shared objects loaded from a memfd copy;
// queues run released executions on a worker thread pool.
#ifndef HALO_HAL_LOCAL_LOCAL_DEVICE_H_
#define HALO_HAL_LOCAL_LOCAL_DEVICE_H_

#include "hal/device.h"

void halo_hal_local_allocator_initialize(halo_hal_allocator_t *allocator);

#endif  // HALO_HAL_LOCAL_LOCAL_DEVICE_H_
