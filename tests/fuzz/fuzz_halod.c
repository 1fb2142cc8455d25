// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "tests/fuzz/fuzz_halod.h"

#include <nng/nng.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "common/log.h"
#include "daemon/config.h"
#include "daemon/requests.h"
#include "daemon/server.h"
#include "daemon/session.h"
#include "daemon/workers.h"

// Pipe ids of the sessions (no nng pipe has them: nobody connects to the
// harness's sockets).
#define HALO_FUZZ_ANCHOR_PIPE 1u
#define HALO_FUZZ_PIPE 2u

typedef struct halo_fuzz_state_t {
  bool started;
  uv_loop_t loop;
  halod_t daemon;
  char directory[64];
  char listen[128];
  char admin[128];
  char *argv[32];
  // Replies of the detached context (one request at a time).
  halod_server_context_t *context;
  nng_msg *reply;
  uint32_t replies;
  // HALO_FUZZ_VERBOSE=1: every reply's status goes to stderr (to see what
  // an input reaches).
  bool verbose;
  // The harness kernels (ELF).
  uint8_t *kernels;
  size_t kernels_size;
} halo_fuzz_state_t;

static halo_fuzz_state_t halo_fuzz_state;

static void halo_fuzz_fail(const char *format, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void halo_fuzz_fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "halo fuzz harness: ");
  vfprintf(stderr, format, args);
  fprintf(stderr, "\n");
  va_end(args);
  abort();
}

static void halo_fuzz_on_reply(void *user_data, nng_msg *reply) {
  halo_fuzz_state_t *state = user_data;
  if (++state->replies > 1 || state->reply) {
    halo_fuzz_fail("a request was answered twice");
  }
  state->reply = reply;
}

static void halo_fuzz_read_kernels(halo_fuzz_state_t *state) {
  FILE *file = fopen(HALO_FUZZ_KERNELS, "rb");
  if (!file) halo_fuzz_fail("cannot open %s", HALO_FUZZ_KERNELS);
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  state->kernels = malloc(size > 0 ? (size_t)size : 1);
  if (size <= 0 || !state->kernels ||
      fread(state->kernels, 1, (size_t)size, file) != (size_t)size) {
    halo_fuzz_fail("cannot read %s", HALO_FUZZ_KERNELS);
  }
  state->kernels_size = (size_t)size;
  fclose(file);
}

static void halo_fuzz_stop(void) {
  halo_fuzz_state_t *state = &halo_fuzz_state;
  if (!state->started) return;
  state->started = false;
  halod_stop(&state->daemon);
  uv_run(&state->loop, UV_RUN_DEFAULT);
  halod_workers_wait(state->daemon.stop_deadline_ns);
  uv_loop_close(&state->loop);
  halod_server_context_destroy_detached(state->context);
  free(state->kernels);
  const char *names[] = {"halo.sock", "halo.sock.fd", "halo.sock.lock",
                         "admin.sock"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    char path[192];
    snprintf(path, sizeof(path), "%.64s/%s", state->directory, names[i]);
    unlink(path);
  }
  rmdir(state->directory);
}

// Hands |event| to the client socket's handler, which frees it.
static void halo_fuzz_pipe_event(halod_server_event_kind_t kind,
                                 uint32_t pipe_id) {
  halod_server_event_t *event = calloc(1, sizeof(*event));
  if (!event) halo_fuzz_fail("oom");
  event->kind = kind;
  event->pipe_id = pipe_id;
  event->peer_uid = getuid();
  event->peer_pid = (uint64_t)getpid();
  halod_requests_on_event(&halo_fuzz_state.daemon, event);
}

// Hello, then the harness kernels: their handle is the session's first.
static void halo_fuzz_session_start(halod_session_t *session,
                                    uint64_t *out_executable) {
  halo_fuzz_state_t *state = &halo_fuzz_state;
  Halo__Wire__Hello hello = HALO__WIRE__HELLO__INIT;
  hello.protocol_version = HALO_PROTOCOL_VERSION;
  hello.client_name = "halo-fuzz";
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_HELLO;
  request.hello = &hello;
  if (halo_fuzz_request(session, &request, NULL) != HALO_STATUS_OK) {
    halo_fuzz_fail("Hello failed");
  }
  Halo__Wire__ExecutableCreate create = HALO__WIRE__EXECUTABLE_CREATE__INIT;
  create.device = 0;
  create.format = HALO__WIRE__EXECUTABLE_FORMAT__EXECUTABLE_FORMAT_ELF;
  create.data.data = state->kernels;
  create.data.len = state->kernels_size;
  request.body_case = HALO__WIRE__REQUEST__BODY_EXECUTABLE_CREATE;
  request.executable_create = &create;
  Halo__Wire__Response *response = NULL;
  int32_t code = halo_fuzz_request(session, &request, &response);
  if (code != HALO_STATUS_OK || !response->executable) {
    halo_fuzz_fail("loading %s: %s", HALO_FUZZ_KERNELS,
                   response->message ? response->message : "no executable");
  }
  *out_executable = response->executable->handle;
  halo__wire__response__free_unpacked(response, NULL);
}

halod_t *halo_fuzz_halod(void) {
  halo_fuzz_state_t *state = &halo_fuzz_state;
  if (state->started) return &state->daemon;
  const char *tmp = getenv("TMPDIR");
  snprintf(state->directory, sizeof(state->directory), "%s/halo-fuzz-XXXXXX",
           tmp && tmp[0] && strlen(tmp) < 32 ? tmp : "/tmp");
  if (!mkdtemp(state->directory)) {
    halo_fuzz_fail("mkdtemp %s failed", state->directory);
  }
  snprintf(state->listen, sizeof(state->listen), "ipc://%.64s/halo.sock",
           state->directory);
  snprintf(state->admin, sizeof(state->admin), "ipc://%.64s/admin.sock",
           state->directory);
  // Small quotas keep an input's allocations and executions short; the ring
  // is the smallest there is, so that inputs reach its end and wrap.
  static const char *const kSettings[][2] = {
      {"--driver", "local"},
      {"--device-workers", "inline"},
      {"--log-level", "error"},
      {"--contexts", "1"},
      {"--arena-bytes", "1048576"},
      {"--session-host-bytes", "16777216"},
      {"--session-device-bytes", "16777216"},
      {"--session-handles", "256"},
      {"--session-pending", "32"},
      {"--ring-bytes", "32768"},
      {"--ring-poll-us", "0"},
  };
  int argc = 0;
  state->argv[argc++] = "halod";
  state->argv[argc++] = "--listen";
  state->argv[argc++] = state->listen;
  state->argv[argc++] = "--admin";
  state->argv[argc++] = state->admin;
  for (size_t i = 0; i < sizeof(kSettings) / sizeof(kSettings[0]); ++i) {
    state->argv[argc++] = (char *)kSettings[i][0];
    state->argv[argc++] = (char *)kSettings[i][1];
  }
  state->argv[argc] = NULL;
  halod_config_t config;
  halod_config_initialize(&config);
  int exit_now = 0;
  halo_status_t status =
      halod_config_parse(&config, argc, state->argv, &exit_now);
  if (status) halo_fuzz_fail("config: %s", halo_status_message(status));
  const char *verbose = getenv("HALO_FUZZ_VERBOSE");
  state->verbose = verbose && verbose[0] && strcmp(verbose, "0") != 0;
  halo_log_set_level(state->verbose ? HALO_LOG_DEBUG : HALO_LOG_ERROR);
  halo_fuzz_read_kernels(state);
  status = halod_server_context_create_detached(halo_fuzz_on_reply, state,
                                                &state->context);
  if (status) halo_fuzz_fail("%s", halo_status_message(status));
  uv_loop_init(&state->loop);
  status = halod_start(&state->daemon, &state->loop, &config);
  if (status) halo_fuzz_fail("halod_start: %s", halo_status_message(status));
  state->started = true;
  atexit(halo_fuzz_stop);
  // The anchor keeps the harness kernels loaded between inputs: every fuzz
  // session's load is a cache hit.
  halo_fuzz_pipe_event(HALOD_SERVER_EVENT_PIPE_ADDED, HALO_FUZZ_ANCHOR_PIPE);
  halod_session_t *anchor =
      halo_u64_map_get(&state->daemon.sessions.by_pipe, HALO_FUZZ_ANCHOR_PIPE);
  if (!anchor) halo_fuzz_fail("the anchor session was not created");
  if (state->daemon.next_id >= HALO_FUZZ_SESSION_ID - 1) {
    halo_fuzz_fail("ids reached HALO_FUZZ_SESSION_ID before the first input");
  }
  uint64_t executable;
  halo_fuzz_session_start(anchor, &executable);
  return &state->daemon;
}

halod_session_t *halo_fuzz_session_open(void) {
  halo_fuzz_state_t *state = &halo_fuzz_state;
  halod_t *daemon = halo_fuzz_halod();
  // The previous input's session and everything it made are gone (checked
  // in halo_fuzz_session_close), so its ids may be handed out again.
  daemon->next_id = HALO_FUZZ_SESSION_ID - 1;
  halo_fuzz_pipe_event(HALOD_SERVER_EVENT_PIPE_ADDED, HALO_FUZZ_PIPE);
  halod_session_t *session =
      halo_u64_map_get(&state->daemon.sessions.by_pipe, HALO_FUZZ_PIPE);
  if (!session || session->id != HALO_FUZZ_SESSION_ID) {
    halo_fuzz_fail("the fuzz session was not created with id 0x%x",
                   HALO_FUZZ_SESSION_ID);
  }
  uint64_t executable;
  halo_fuzz_session_start(session, &executable);
  if (executable != HALO_FUZZ_EXECUTABLE) {
    halo_fuzz_fail("the harness kernels got handle 0x%llx, not 0x%llx",
                   (unsigned long long)executable,
                   (unsigned long long)HALO_FUZZ_EXECUTABLE);
  }
  return session;
}

int32_t halo_fuzz_request_bytes(halod_session_t *session, const void *bytes,
                                size_t size,
                                Halo__Wire__Response **out_response) {
  halo_fuzz_state_t *state = &halo_fuzz_state;
  if (out_response) *out_response = NULL;
  halod_server_event_t *event = calloc(1, sizeof(*event));
  if (!event || nng_msg_alloc(&event->message, 0) != 0 ||
      nng_msg_append(event->message, bytes, size) != 0) {
    halo_fuzz_fail("oom");
  }
  event->kind = HALOD_SERVER_EVENT_REQUEST;
  event->pipe_id = session->pipe_id;
  event->context = state->context;
  state->reply = NULL;
  state->replies = 0;
  halod_requests_on_event(&state->daemon, event);
  // A deferred reply (an executable load) comes from the loop.
  while (!state->reply) uv_run(&state->loop, UV_RUN_ONCE);
  Halo__Wire__Response *response = halo__wire__response__unpack(
      NULL, nng_msg_len(state->reply), nng_msg_body(state->reply));
  if (!response) {
    halo_fuzz_fail("a reply of %zu bytes does not decode as a Response",
                   nng_msg_len(state->reply));
  }
  nng_msg_free(state->reply);
  state->reply = NULL;
  int32_t code = response->code;
  if (state->verbose) {
    fprintf(stderr, "  request of %zu bytes: %s%s%s\n", size,
            halo_status_code_name((halo_status_code_t)code),
            response->message ? ": " : "",
            response->message ? response->message : "");
  }
  if (code < 0 || code >= HALO_STATUS_CODE_COUNT) {
    halo_fuzz_fail("a reply carries status code %d", code);
  }
  if (code != HALO_STATUS_OK && (!response->message || !response->message[0])) {
    halo_fuzz_fail("a reply with status code %d has no message", code);
  }
  if (out_response) {
    *out_response = response;
  } else {
    halo__wire__response__free_unpacked(response, NULL);
  }
  return code;
}

int32_t halo_fuzz_request(halod_session_t *session,
                          const Halo__Wire__Request *request,
                          Halo__Wire__Response **out_response) {
  size_t size = protobuf_c_message_get_packed_size(&request->base);
  uint8_t *bytes = malloc(size ? size : 1);
  if (!bytes) halo_fuzz_fail("oom");
  protobuf_c_message_pack(&request->base, bytes);
  int32_t code = halo_fuzz_request_bytes(session, bytes, size, out_response);
  free(bytes);
  return code;
}

void halo_fuzz_run_nowait(void) {
  uv_run(&halo_fuzz_state.loop, UV_RUN_NOWAIT);
}

void halo_fuzz_finish_issued(void) {
  halo_fuzz_state_t *state = &halo_fuzz_state;
  while (state->daemon.work.deferred.issued > 0) {
    uv_run(&state->loop, UV_RUN_ONCE);
  }
}

void halo_fuzz_session_close(halod_session_t *session) {
  halo_fuzz_state_t *state = &halo_fuzz_state;
  halod_t *daemon = &state->daemon;
  // Issued work finishes while the session lives (the harness kernels
  // return at once), so that its completions release what waits for it;
  // what still waits then is cancelled with the session.
  halo_fuzz_finish_issued();
  halo_fuzz_pipe_event(HALOD_SERVER_EVENT_PIPE_REMOVED, session->pipe_id);
  // Issued work completes on the driver's threads and retires on the loop.
  while (daemon->work.deferred.waiting > 0 ||
         daemon->work.deferred.issued > 0 || daemon->cache.loads) {
    uv_run(&state->loop, UV_RUN_ONCE);
  }
  // Handles closed on the way (a ring's doorbell) finish closing.
  uv_run(&state->loop, UV_RUN_NOWAIT);
  const struct {
    const char *what;
    size_t count;
    size_t expected;
  } left[] = {
      {"sessions", daemon->sessions.by_id.count, 1},
      {"semaphores", daemon->shared.semaphores.count, 0},
      {"semaphore pages", daemon->shared.pages.count, 0},
      {"arenas", daemon->shared.arenas.count, 0},
      {"exports", daemon->shared.exports.count, 0},
      // Released recordings and executables may stay in the caches' LRU
      // lists (daemon/cache.h); what no list holds must be gone.
      {"memo entries not cached", daemon->cache.memo.count,
       daemon->cache.memo_lru.count},
      {"executables not cached", daemon->cache.executables.count,
       1 + daemon->cache.executable_lru.count},
  };
  for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); ++i) {
    if (left[i].count != left[i].expected) {
      halo_fuzz_fail(
          "after the session ended and its work retired, halod holds %zu "
          "%s (expected %zu): a reference was leaked",
          left[i].count, left[i].what, left[i].expected);
    }
  }
}
