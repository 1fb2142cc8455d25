// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/tenant.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/cgroup.h"

#define HALOD_TENANT_PATH_BYTES 4096

// Hashed before each path: a client that may choose its cgroup's path (a
// delegated cgroup tree) cannot look offline for one whose 31 bits meet
// another pod's, and so count against that pod's bounds.
static uint8_t halod_tenant_secret[32];
static pthread_once_t halod_tenant_secret_once = PTHREAD_ONCE_INIT;

static void halod_tenant_secret_make(void) {
  ssize_t got;
  do {  // interrupted by a signal while the kernel gathers entropy at boot
    got = getrandom(halod_tenant_secret, sizeof(halod_tenant_secret), 0);
  } while (got < 0 && errno == EINTR);
  if (got != (ssize_t)sizeof(halod_tenant_secret)) {
    // No getrandom (Linux before 3.17): the paths' hashes are unkeyed;
    // tenants are told apart all the same.
    HALO_LOG_WARN(
        "tenants: no random key for the cgroup paths' hashes (getrandom: "
        "%s); a client choosing its cgroup path could aim at another pod's "
        "tenant",
        got < 0 ? strerror(errno) : "short read");
    memset(halod_tenant_secret, 0, sizeof(halod_tenant_secret));
  }
}

uint64_t halod_tenant_of(halod_tenancy_t tenancy, uint32_t uid, uint32_t pid) {
  uint64_t tenant = halod_tenant_of_uid(uid);
  if (!tenancy.by_cgroup || pid == 0) return tenant;
  char path[HALOD_TENANT_PATH_BYTES];
  halo_status_t status =
      halod_cgroup_of_process(pid, tenancy.cgroup_trim, path, sizeof(path));
  if (status) {
    halo_status_free(status);
    return tenant;
  }
  pthread_once(&halod_tenant_secret_once, halod_tenant_secret_make);
  halo_hasher_t hasher;
  halo_hasher_initialize(&hasher);
  halo_hasher_update_bytes(&hasher, halod_tenant_secret,
                           sizeof(halod_tenant_secret));
  halo_hasher_update_bytes(&hasher, path, strlen(path));
  halo_hash_t hash;
  halo_hasher_finalize(&hasher, &hash);
  // 31 bits of the path's hash; 0 is kept for "no cgroup" (the uid alone).
  uint64_t bits = halo_hash_key(&hash) & 0x7fffffffu;
  if (bits == 0) bits = 1;
  return tenant | bits << 32;
}

void halod_tenant_describe(halod_tenancy_t tenancy, uint64_t tenant,
                           uint32_t pid, char *out, size_t size) {
  uint32_t uid = halod_tenant_uid(tenant);
  if (!tenancy.by_cgroup || halod_tenant_is_uid(tenant)) {
    snprintf(out, size, "uid %u", uid);
    return;
  }
  char path[HALOD_TENANT_PATH_BYTES];
  halo_status_t status =
      pid ? halod_cgroup_of_process(pid, tenancy.cgroup_trim, path,
                                    sizeof(path))
          : halo_status_make(HALO_STATUS_NOT_FOUND, "no pid");
  if (status) {
    halo_status_free(status);
    snprintf(out, size, "uid %u in its cgroup", uid);
    return;
  }
  snprintf(out, size, "uid %u in cgroup %s", uid, path);
}
