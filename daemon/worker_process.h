// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// `halod --worker`: the entry point of a device worker process
// (daemon/worker_process.c).
#ifndef HALOD_WORKER_PROCESS_H_
#define HALOD_WORKER_PROCESS_H_

// Serves one device over descriptor 3 until the supervisor closes it;
// does not return on success (the process exits).
int halod_worker_main(int argc, char **argv);

#endif  // HALOD_WORKER_PROCESS_H_
