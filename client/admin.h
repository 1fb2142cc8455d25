// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The admin client: haloctl's (and the tests') connection to halod's admin
// socket. Not part of the public libhalo API; linked statically into haloctl
// and the tests (target halo_admin).
//
// Thread-compatible: one thread at a time per halo_admin_t.
#ifndef HALO_CLIENT_ADMIN_H_
#define HALO_CLIENT_ADMIN_H_

#include <stdbool.h>
#include <stdint.h>

#include "common/wire.h"

typedef struct halo_admin_s halo_admin_t;

// Address: |address|, else $HALO_ADMIN_ADDRESS, else
// "ipc:///run/halo-admin/admin.sock".
const char *halo_admin_default_address(const char *address);

halo_status_t halo_admin_connect(const char *address, int timeout_ms,
                                 halo_admin_t **out_admin);
void halo_admin_close(halo_admin_t *admin);

// One admin round trip. On success the caller frees |*out_response| with
// halo__wire__response__free_unpacked(response, NULL).
halo_status_t halo_admin_call(halo_admin_t *admin,
                              const halo_wire_request_t *request,
                              halo_wire_response_t **out_response);

// Convenience wrappers; the reply is inside |*out_response| (->admin_status
// etc.), freed as above.
halo_status_t halo_admin_status(halo_admin_t *admin,
                                halo_wire_response_t **out_response);
halo_status_t halo_admin_sessions(halo_admin_t *admin,
                                  halo_wire_response_t **out_response);
halo_status_t halo_admin_semaphores(halo_admin_t *admin,
                                    halo_wire_response_t **out_response);

halo_status_t halo_admin_memo_cache(halo_admin_t *admin,
                                    halo_wire_response_t **out_response);
halo_status_t halo_admin_queues(halo_admin_t *admin,
                                halo_wire_response_t **out_response);
halo_status_t halo_admin_buffers(halo_admin_t *admin,
                                 halo_wire_response_t **out_response);
halo_status_t halo_admin_executables(halo_admin_t *admin,
                                     halo_wire_response_t **out_response);
halo_status_t halo_admin_metrics(halo_admin_t *admin,
                                 halo_wire_response_t **out_response);
// The device worker processes: per (device, trust domain) and the spares.
halo_status_t halo_admin_workers(halo_admin_t *admin,
                                 halo_wire_response_t **out_response);
// Ends every session of process |pid| (NOT_FOUND if none).
halo_status_t halo_admin_kill_client(halo_admin_t *admin, uint32_t pid,
                                     halo_wire_response_t **out_response);
// Forgets the device faults charged to process |pid| (the fault budget;
// NOT_FOUND if none are counted).
halo_status_t halo_admin_forgive_client(halo_admin_t *admin, uint32_t pid,
                                        halo_wire_response_t **out_response);
// Starts draining (|cancel| false) or stops it; either way the reply says
// what work is left.
halo_status_t halo_admin_drain(halo_admin_t *admin, bool cancel,
                               halo_wire_response_t **out_response);

#endif  // HALO_CLIENT_ADMIN_H_
