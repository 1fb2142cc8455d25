// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A lost device (docs/architecture.md "CUDA driver"): a sticky CUDA error
// (illegal address, launch failure, trap) poisons every context of the process,
// so no later work can run and only a new process recovers. The driver reports
// it from one of its threads; the loop then fails every semaphore with
// DEVICE_LOST and a message naming the device, the error and the
// submissions that were in flight on the lost device (a single culprit is
// generally unknowable), logs the same, and exits with status 1 so that the
// service manager restarts halod. Clients waiting on a semaphore wake with
// DEVICE_LOST; later calls get UNAVAILABLE (the daemon is gone), never a
// hang.
//
// Loop thread, except the driver's callback.
#ifndef HALOD_DEVICE_LOST_H_
#define HALOD_DEVICE_LOST_H_

#include "daemon/daemon.h"

// Opens the loop handle, before the deferred queue's completion handle:
// libuv runs pending handles in the order they were opened, so a lost
// device is handled (and the process exits) before the completions of the
// failed executions retire them, and the message still names them.
void halod_device_lost_start(halod_t *daemon);

// Installs the lost callback on every device that can be lost (CUDA),
// once the registry is up.
void halod_device_lost_watch(halod_t *daemon);

// Closes the loop handle (halod_stop).
void halod_device_lost_unwatch(halod_t *daemon);

#endif  // HALOD_DEVICE_LOST_H_
