// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halod's configuration: one table of settings (name, type, bounds,
// default, whether SIGHUP applies it live, help) from which the flags, the
// config file (parsed by inih), validation, --help and --print-config all
// come, in the manner of redis's config table.
//
// Precedence: defaults, then the file named by --config, then the other
// flags. A bad value is an error naming the file and line (or the flag)
// and the setting.
//
// Loop thread only.
#ifndef HALOD_CONFIG_H_
#define HALOD_CONFIG_H_

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "halo/status.h"

#define HALOD_CONFIG_MAX_ENTRIES 80

// Most worker processes per (device, trust domain) (workers-per-domain).
#define HALOD_WORKERS_PER_DOMAIN_MAX 8

typedef struct halod_config_t {
  char listen[512];
  char admin[512];
  char driver[16];
  char log_level[16];
  char config_file[512];
  uint32_t socket_mode;   // octal, for the client and admin sockets
  char socket_group[64];  // group of the client sockets; "" for halod's
  char admin_group[64];   // group of the admin socket; "" for halod's
  uint64_t max_message_bytes;
  uint32_t contexts;          // nng rep contexts per socket
  uint32_t reply_timeout_ms;  // a reply not taken by then is dropped
  uint32_t session_requests;  // requests in flight per connection
  uint32_t uid_replies;       // replies waiting on clients per uid
  uint32_t loads;             // executable loads waiting, on spare contexts
  uint32_t domain_loads;      // of them, per trust domain
  uint32_t calls;             // requests waiting for workers, on spares
  uint32_t domain_calls;      // of them, per trust domain
  uint32_t connections;       // client socket connections in all
  uint32_t hello_timeout_ms;  // a connection without Hello is closed after
  uint64_t arena_bytes;
  uint64_t session_host_bytes;    // quota of host-visible bytes per session
  uint64_t session_device_bytes;  // quota of device bytes per session
  uint64_t domain_host_bytes;     // of all a trust domain's sessions (0: none)
  uint64_t domain_device_bytes;   // the same, device bytes
  uint64_t session_recording_bytes;     // quota of command buffers' recordings
  uint32_t session_handles;             // quota of live handles per session
  uint32_t session_fds;                 // quota of pages + arenas per session
  uint32_t uid_fds;                     // ... of all sessions of one uid
  uint32_t fd_reserve;                  // descriptors kept for connections
  uint32_t uid_connections;             // client-socket sessions per uid
  uint32_t uid_domains;                 // trust domains (parts) per uid
  uint32_t fd_channel_unauthenticated;  // per uid, not yet authenticated
  uint32_t fd_channel_connections;      // per uid, all
  uint32_t fd_channel_auth_ms;          // to authenticate, else closed
  char native_code[16];                 // owner | any | none
  uint32_t session_pending;             // quota of unfinished submissions
  uint32_t ring_poll_us;                // submission ring polling window
  uint64_t ring_bytes;                // submission ring capacity (power of two)
  char cuda_completion[16];           // thread | host_func
  uint32_t cuda_streams;              // streams per priority per device
  uint64_t cuda_graph_bytes;          // graph instances' memory per worker
  uint32_t cuda_compile_deadline_ms;  // one CUDA C compile, then killed
  char cache_directory[256];          // compiled GPU code; "" for none
  char device_workers[16];            // process | inline
  char trust_domain[16];              // uid | process | cgroup
  uint32_t trust_domain_cgroup_trim;  // cgroup path components dropped
  uint32_t submission_deadline_ms;    // 0: none
  uint32_t worker_hang_ms;            // a worker silent this long is hung
  uint32_t worker_poll_us;            // device link polling window
  uint32_t worker_report_linger_us;   // ring completions held back at most
  uint32_t worker_spares;             // started ahead, per device
  uint32_t workers_per_domain;        // worker processes per (device, domain)
  uint32_t cuda_connections;          // CUDA_DEVICE_MAX_CONNECTIONS; 0: unset
  int32_t nice;                       // halod's and its workers' niceness
  int32_t oom_score_adj;              // halod's; its workers' 500 above
  char ring_consumer[16];             // worker | halod
  uint32_t fault_budget;              // faults per client process; 0: no limit
  uint32_t fault_budget_window_s;     // ... within this many seconds
  uint32_t executable_cache_entries;  // released executables kept (LRU)
  uint32_t memo_cache_entries;        // released recordings kept (LRU)
  uint64_t memo_cache_bytes;          // ... and their bytes, at most
  uint64_t executable_cache_bytes;    // executables no session holds, bytes
  uint32_t idle_domains;              // idle domains kept for those entries
  char metrics_address[80];           // HTTP /metrics "HOST:PORT"; "" for off
  char metrics_textfile[512];         // node-exporter textfile; "" for none
  uint32_t metrics_interval;          // seconds between textfile writes

  // Not settings: where each value came from, and the command line (kept
  // for SIGHUP, which re-reads the file and applies the flags again).
  char sources[HALOD_CONFIG_MAX_ENTRIES][96];  // "" for the default
  int argc;
  char **argv;
} halod_config_t;

// Sets every entry to its default.
void halod_config_initialize(halod_config_t *config);

// Parses argv (flags override the file named by --config, which is read
// first). Returns INVALID_ARGUMENT naming the flag, or the file, line and
// setting, that was wrong. |out_exit| is set when --help, --version or
// --print-config was handled (exit 0). |argv| must outlive |config|.
halo_status_t halod_config_parse(halod_config_t *config, int argc, char **argv,
                                 int *out_exit);

// SIGHUP: re-reads the file and the flags of |current| into |out_next|.
// Settings that apply only at start keep their current values; each one
// that changed is logged as ignored, each live one that changed as
// applied. On error |out_next| is unusable and |current| stays in force.
halo_status_t halod_config_reload(const halod_config_t *current,
                                  halod_config_t *out_next);

// |status| (may be NULL; taken) annotated with where setting |name| came
// from, as every configuration error names it: "FILE:LINE: name: ...",
// "--name: ...", "name (from $CACHE_DIRECTORY): ..." for a value halod
// derived, or "name: ..." for its default.
halo_status_t halod_config_annotate(const halod_config_t *config,
                                    const char *name, halo_status_t status);

// Writes the effective configuration as a config file (every setting,
// with where non-default values came from).
void halod_config_print(const halod_config_t *config, FILE *stream);

// Writes the flag reference (the same table) to |stream|.
void halod_config_print_help(FILE *stream);

#endif  // HALOD_CONFIG_H_
