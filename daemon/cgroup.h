// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A client process's cgroup (v2), which separates containers and pods:
// trust-domain = cgroup keys trust domains by it (daemon/trust_domain.h).
// The path is the one halod sees in /proc/PID/cgroup, relative to halod's
// cgroup namespace.
//
// Stands alone (statuses only), so that tests/unit/cgroup_test.c parses
// fixtures. Any thread.
#ifndef HALOD_CGROUP_H_
#define HALOD_CGROUP_H_

#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

// The cgroup v2 path in |text|, the contents of /proc/PID/cgroup: the path of
// its "0::" line. NOT_FOUND if there is none (a host with cgroup v1 only),
// INVALID_ARGUMENT naming the line if it is malformed (not absolute, or
// longer than |size| - 1).
halo_status_t halod_cgroup_parse(const char *text, char *out_path, size_t size);

// Drops the last |components| components of |path| in place (so that the
// containers of a pod, one cgroup each below the pod's, share the pod's
// path); "/" is left when fewer remain.
void halod_cgroup_trim(char *path, uint32_t components);

// The cgroup v2 path of process |pid| (/proc/PID/cgroup) with the last
// |trim| components dropped. Errors name the pid and the file.
halo_status_t halod_cgroup_of_process(uint32_t pid, uint32_t trim,
                                      char *out_path, size_t size);

#endif  // HALOD_CGROUP_H_
