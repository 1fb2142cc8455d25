// halod's configuration: one table of entries (name, default, bounds, help)
// from which flag parsing, the config file, validation and --help all come.
//
// Loop thread only.
#ifndef HALOD_CONFIG_H_
#define HALOD_CONFIG_H_

#include <stdint.h>
#include <stdio.h>

#include "halo/status.h"

typedef struct halod_config_t {
  char listen[512];
  char admin[512];
  char driver[16];
  char log_level[16];
  char config_file[512];
  uint32_t socket_mode;  // octal, for the client and admin sockets
  uint64_t max_message_bytes;
  uint32_t contexts;  // nng rep contexts per socket
  uint64_t arena_bytes;
  uint64_t session_host_bytes;    // quota of host-visible bytes per session
  uint64_t session_device_bytes;  // quota of device bytes per session
  uint32_t session_handles;       // quota of live handles per session
  char native_code[16];           // owner | any | none
  uint32_t session_pending;       // quota of unfinished submissions
  char cuda_completion[16];       // thread | host_func
  char cache_directory[256];      // compiled GPU code; "" for none
} halod_config_t;

// Sets every entry to its default.
void halod_config_initialize(halod_config_t *config);

// Parses argv (flags override the file named by --config, which is read
// first). Returns INVALID_ARGUMENT naming the flag or line that was wrong.
// |out_exit| is set when --help/--version was handled (exit 0).
halo_status_t halod_config_parse(halod_config_t *config, int argc, char **argv,
                                 int *out_exit);

// Writes the flag reference (the same table) to |stream|.
void halod_config_print_help(FILE *stream);

#endif  // HALOD_CONFIG_H_
