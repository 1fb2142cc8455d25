// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Fuzzes the client socket's request decoder and everything it validates
// (daemon/requests.c, daemon/operation.h and below): each input is a
// sequence of halo.wire.Request messages that one session sends to an
// in-process halod (tests/fuzz/fuzz_halod.h), with the objects it creates
// living from one request to the next, so that executions, allocas,
// semaphores and exports reach their validation with real handles.
//
// Input: up to 64 frames, each a 16-bit little-endian length and that many
// bytes (the last frame takes what is left). The bytes go to the handler
// as they are; the harness decodes them only to leave out, uncounted:
// - ExecutableCreate of ELF: the local driver dlopens it, i.e. runs the
//   client's native code by design (native-code in halod.conf); other
//   formats are sent and fail in the local driver's loader;
// - CommandBufferCreate with a dispatch of more than 4096 workgroups or an
//   indirect dispatch (whose count comes from buffer contents): the local
//   driver runs every workgroup, and 2^32 of them would hang the input.
//   The harness kernels do nothing, so any dispatch that runs is harmless.
// A BufferRead or BufferWrite waits until the executions issued so far
// have finished: host access while device work runs on the same memory is
// a race by design (a client orders it with semaphores, as on a GPU), and
// the inputs stay deterministic and free of races ThreadSanitizer would
// report where nothing is wrong. (Two executions in flight that write the
// same buffer race the same way: seeds avoid them.)
// Every reply must decode, carry a known status code and, if it is an
// error, a message; after the session ends the daemon must hold nothing of
// it (fuzz_halod.h).
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/fuzz/fuzz_halod.h"

#define REQUEST_FUZZ_MAX_FRAMES 64
#define REQUEST_FUZZ_MAX_WORKGROUPS 4096u

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool request_fuzz_dispatch_allowed(const Halo__Wire__Command *command) {
  if (command->type == HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH_INDIRECT) {
    return false;
  }
  if (command->type != HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH ||
      command->n_grid != 3) {
    return true;  // not run, or refused by the recorder
  }
  uint64_t total = 1;
  for (int i = 0; i < 3; ++i) {
    total *= command->grid[i] ? command->grid[i] : 1;
    if (total > REQUEST_FUZZ_MAX_WORKGROUPS) return false;
  }
  return true;
}

// Whether the harness sends these bytes (see the top of the file);
// |out_host_access|: the request reads or writes a buffer.
static bool request_fuzz_allowed(const uint8_t *bytes, size_t size,
                                 bool *out_host_access) {
  *out_host_access = false;
  Halo__Wire__Request *request = halo__wire__request__unpack(NULL, size, bytes);
  if (!request) return true;  // the handler refuses it
  bool allowed = true;
  *out_host_access =
      request->body_case == HALO__WIRE__REQUEST__BODY_BUFFER_READ ||
      request->body_case == HALO__WIRE__REQUEST__BODY_BUFFER_WRITE;
  if (request->body_case == HALO__WIRE__REQUEST__BODY_EXECUTABLE_CREATE) {
    allowed = request->executable_create->format !=
              HALO__WIRE__EXECUTABLE_FORMAT__EXECUTABLE_FORMAT_ELF;
  } else if (request->body_case ==
             HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_CREATE) {
    const Halo__Wire__CommandBufferCreate *create =
        request->command_buffer_create;
    for (size_t i = 0; allowed && i < create->n_commands; ++i) {
      allowed = request_fuzz_dispatch_allowed(create->commands[i]);
    }
  }
  halo__wire__request__free_unpacked(request, NULL);
  return allowed;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  halo_fuzz_halod();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  halod_session_t *session = halo_fuzz_session_open();
  size_t offset = 0;
  for (int frame = 0; frame < REQUEST_FUZZ_MAX_FRAMES && offset + 2 <= size;
       ++frame) {
    size_t length = (size_t)data[offset] | (size_t)data[offset + 1] << 8;
    offset += 2;
    if (length > size - offset) length = size - offset;
    const uint8_t *bytes = data + offset;
    offset += length;
    bool host_access;
    if (!request_fuzz_allowed(bytes, length, &host_access)) continue;
    if (host_access) halo_fuzz_finish_issued();
    halo_fuzz_request_bytes(session, bytes, length, NULL);
    // Completions of earlier executions, as the loop would run them
    // between requests.
    halo_fuzz_run_nowait();
  }
  halo_fuzz_session_close(session);
  return 0;
}
