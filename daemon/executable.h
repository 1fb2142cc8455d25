// Executables in the daemon: loaded once per (device, content hash) and
// shared by every session that loads the same bytes with the same options.
//
// Loop thread only.
#ifndef HALOD_EXECUTABLE_H_
#define HALOD_EXECUTABLE_H_

#include <stdbool.h>
#include <stdint.h>

#include "common/hash.h"
#include "daemon/daemon.h"
#include "hal/executable.h"

typedef struct halod_executable_t {
  uint32_t refcount;  // handles + command buffers using it
  uint64_t id;
  uint32_t device;
  uint32_t format;
  halo_hash_t hash;
  char hash_text[65];
  halo_hal_executable_t *hal;
  int64_t load_ns;  // how long the driver took to load it
} halod_executable_t;

// Loads (or finds) the executable. |out_cached| tells whether it was
// already loaded. PERMISSION_DENIED for native code from a session the
// native-code setting does not trust.
halo_status_t halod_executable_create(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__ExecutableCreate *request,
    halod_executable_t **out_executable, bool *out_cached);
void halod_executable_retain(halod_executable_t *executable);
void halod_executable_release(halod_t *daemon, halod_executable_t *executable);

#endif  // HALOD_EXECUTABLE_H_
