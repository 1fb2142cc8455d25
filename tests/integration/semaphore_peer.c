// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A second (third, ...) client process for the multi-process tests: it
// connects to halod with libhalo, does what its command line says and exits
// with the halo status code of the operation under test, so the test can
// assert on it.
//
//   semaphore_peer ADDRESS wait TOKEN VALUE TIMEOUT_MS
//       Imports the semaphore, prints "ready", waits for VALUE (TIMEOUT_MS
//       < 0: for ever), prints "done CODE". Exit: the wait's status code.
//   semaphore_peer ADDRESS signal TOKEN VALUE
//   semaphore_peer ADDRESS fail TOKEN CODE
//       Imports the semaphore and signals it / fails it with CODE.
//   semaphore_peer ADDRESS produce DATA_TOKEN ACK_TOKEN BUFFER_TOKEN COUNT
//   semaphore_peer ADDRESS consume DATA_TOKEN ACK_TOKEN BUFFER_TOKEN COUNT
//       Producer: for i = 1..COUNT waits for ACK >= i-1, writes i * 7919
//       into the shared buffer and signals DATA to i. Consumer: waits for
//       DATA >= i, checks the buffer holds i * 7919 and signals ACK to i.
//       Exit 0, a status code, or PEER_EXIT_MISMATCH.
//   semaphore_peer ADDRESS create INITIAL_VALUE
//       Creates an exportable semaphore, prints "token HEX" and sleeps until
//       killed.
//   semaphore_peer ADDRESS hold
//       Creates host-visible and device buffers (one exportable) and
//       semaphores (one exportable), prints "ready SESSION_ID" and sleeps
//       until killed.
//   semaphore_peer ADDRESS own-wait
//       Creates a semaphore at 0, prints "ready" and waits for 1 for ever;
//       prints "done CODE MESSAGE" when the wait returns.
//   semaphore_peer ADDRESS queued-wait
//       As own-wait, but the semaphore waited for is the signal of queued
//       work (an alloca) that waits on another semaphore of the peer.
//   semaphore_peer ADDRESS ping
//       Prints "ready", then pings halod once for each line on its stdin and
//       prints "pinged CODE" when the answer came. Exit 0 at the end of
//       stdin.
//
// Setup failures (connect, import) exit with PEER_EXIT_SETUP + code, usage
// errors with PEER_EXIT_USAGE; the reason goes to stderr.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "halo/halo.h"

#define PEER_EXIT_USAGE 64
#define PEER_EXIT_MISMATCH 65
#define PEER_EXIT_SETUP 100

static const char *peer_command = "?";

static int peer_report(halo_status_t status, const char *what) {
  halo_status_code_t code = halo_status_code(status);
  if (code != HALO_STATUS_OK) {
    fprintf(stderr, "semaphore_peer %s (pid %d): %s: %s: %s\n", peer_command,
            (int)getpid(), what, halo_status_code_name(code),
            halo_status_message(status));
  }
  halo_status_free(status);
  return (int)code;
}

static void peer_setup_check(halo_status_t status, const char *what) {
  int code = peer_report(status, what);
  if (code != 0) exit(PEER_EXIT_SETUP + code);
}

static uint64_t peer_parse_u64(const char *text) {
  char *end = NULL;
  unsigned long long value = strtoull(text, &end, 0);
  if (!*text || *end) {
    fprintf(stderr, "semaphore_peer: not a number: %s\n", text);
    exit(PEER_EXIT_USAGE);
  }
  return (uint64_t)value;
}

static halo_semaphore_t *peer_import_semaphore(halo_client_t *client,
                                               const char *text) {
  halo_token_t token;
  peer_setup_check(halo_token_parse(text, &token), "parse token");
  halo_semaphore_t *semaphore = NULL;
  peer_setup_check(halo_semaphore_import(client, &token, &semaphore),
                   "import semaphore");
  return semaphore;
}

static halo_buffer_t *peer_import_buffer(halo_client_t *client,
                                         const char *text) {
  halo_token_t token;
  peer_setup_check(halo_token_parse(text, &token), "parse token");
  halo_buffer_t *buffer = NULL;
  peer_setup_check(halo_buffer_import(client, &token, &buffer),
                   "import buffer");
  return buffer;
}

static void peer_print(const char *line) {
  fputs(line, stdout);
  fputc('\n', stdout);
  fflush(stdout);
}

static int64_t peer_timeout_ns(const char *text) {
  long long ms = strtoll(text, NULL, 0);
  if (ms < 0) return HALO_TIMEOUT_INFINITE;
  return (int64_t)ms * 1000000ll;
}

#define PEER_STEP_TIMEOUT_NS (10ll * 1000000000ll)

static int peer_produce_consume(halo_client_t *client, bool produce,
                                char **args) {
  halo_semaphore_t *data = peer_import_semaphore(client, args[0]);
  halo_semaphore_t *ack = peer_import_semaphore(client, args[1]);
  halo_buffer_t *buffer = peer_import_buffer(client, args[2]);
  uint64_t count = peer_parse_u64(args[3]);
  volatile uint64_t *shared = halo_buffer_host_pointer(buffer);
  if (!shared || halo_buffer_size(buffer) < sizeof(uint64_t)) {
    fprintf(stderr, "semaphore_peer: shared buffer not host-visible\n");
    return PEER_EXIT_SETUP;
  }
  peer_print("ready");
  for (uint64_t i = 1; i <= count; ++i) {
    if (produce) {
      int code = peer_report(
          halo_semaphore_wait(ack, i - 1, PEER_STEP_TIMEOUT_NS), "wait ack");
      if (code) return code;
      *shared = i * 7919;
      code = peer_report(halo_semaphore_signal(data, i), "signal data");
      if (code) return code;
    } else {
      int code = peer_report(halo_semaphore_wait(data, i, PEER_STEP_TIMEOUT_NS),
                             "wait data");
      if (code) return code;
      if (*shared != i * 7919) {
        fprintf(stderr, "semaphore_peer consume: step %llu read %llu\n",
                (unsigned long long)i, (unsigned long long)*shared);
        return PEER_EXIT_MISMATCH;
      }
      code = peer_report(halo_semaphore_signal(ack, i), "signal ack");
      if (code) return code;
    }
  }
  halo_buffer_release(buffer);
  halo_semaphore_release(ack);
  halo_semaphore_release(data);
  return 0;
}

static _Noreturn void peer_hold(halo_client_t *client) {
  static const struct {
    halo_memory_type_t type;
    uint64_t size;
    uint32_t flags;
  } buffers[] = {
      {HALO_MEMORY_HOST_VISIBLE, 4096, 0},
      {HALO_MEMORY_HOST_VISIBLE, 1 << 20, 0},
      {HALO_MEMORY_HOST_VISIBLE, 65536, HALO_OBJECT_FLAG_EXPORTABLE},
      {HALO_MEMORY_DEVICE, 1 << 20, 0},
  };
  for (size_t i = 0; i < sizeof(buffers) / sizeof(buffers[0]); ++i) {
    halo_buffer_t *buffer = NULL;
    peer_setup_check(
        halo_buffer_create(client, 0, buffers[i].type, buffers[i].size,
                           buffers[i].flags, &buffer),
        "create buffer");
    void *host = halo_buffer_host_pointer(buffer);
    if (host) memset(host, 0xab, buffers[i].size);
  }
  for (int i = 0; i < 4; ++i) {
    halo_semaphore_t *semaphore = NULL;
    peer_setup_check(halo_semaphore_create(
                         client, (uint64_t)i,
                         i == 3 ? HALO_OBJECT_FLAG_EXPORTABLE : 0, &semaphore),
                     "create semaphore");
    if (i == 3) {
      halo_token_t token;
      peer_setup_check(halo_semaphore_export(semaphore, &token), "export");
    }
  }
  printf("ready %llu\n", (unsigned long long)halo_client_session_id(client));
  fflush(stdout);
  for (;;) pause();
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: semaphore_peer ADDRESS COMMAND ARGS...\n");
    return PEER_EXIT_USAGE;
  }
  peer_command = argv[2];
  const char *command = argv[2];
  char **args = argv + 3;
  int arg_count = argc - 3;
  halo_client_options_t options = {.address = argv[1],
                                   .client_name = "semaphore_peer",
                                   .request_timeout_ms = 10000};
  halo_client_t *client = NULL;
  peer_setup_check(halo_client_connect(&options, &client), "connect");
  int code = PEER_EXIT_USAGE;
  if (strcmp(command, "wait") == 0 && arg_count == 3) {
    halo_semaphore_t *semaphore = peer_import_semaphore(client, args[0]);
    uint64_t value = peer_parse_u64(args[1]);
    int64_t timeout_ns = peer_timeout_ns(args[2]);
    peer_print("ready");
    code =
        peer_report(halo_semaphore_wait(semaphore, value, timeout_ns), "wait");
    // Before any clean-up: the test times the wake-up by this line.
    printf("done %d\n", code);
    fflush(stdout);
    halo_semaphore_release(semaphore);
  } else if (strcmp(command, "signal") == 0 && arg_count == 2) {
    halo_semaphore_t *semaphore = peer_import_semaphore(client, args[0]);
    code = peer_report(
        halo_semaphore_signal(semaphore, peer_parse_u64(args[1])), "signal");
    halo_semaphore_release(semaphore);
  } else if (strcmp(command, "fail") == 0 && arg_count == 2) {
    halo_semaphore_t *semaphore = peer_import_semaphore(client, args[0]);
    code =
        peer_report(halo_semaphore_fail(
                        semaphore, (halo_status_code_t)peer_parse_u64(args[1]),
                        "failed by semaphore_peer"),
                    "fail");
    halo_semaphore_release(semaphore);
  } else if ((strcmp(command, "produce") == 0 ||
              strcmp(command, "consume") == 0) &&
             arg_count == 4) {
    code = peer_produce_consume(client, command[0] == 'p', args);
  } else if (strcmp(command, "create") == 0 && arg_count == 1) {
    halo_semaphore_t *semaphore = NULL;
    peer_setup_check(
        halo_semaphore_create(client, peer_parse_u64(args[0]),
                              HALO_OBJECT_FLAG_EXPORTABLE, &semaphore),
        "create");
    halo_token_t token;
    peer_setup_check(halo_semaphore_export(semaphore, &token), "export");
    char text[33];
    halo_token_format(&token, text);
    printf("token %s\n", text);
    fflush(stdout);
    for (;;) pause();
  } else if (strcmp(command, "hold") == 0 && arg_count == 0) {
    peer_hold(client);
  } else if ((strcmp(command, "own-wait") == 0 ||
              strcmp(command, "queued-wait") == 0) &&
             arg_count == 0) {
    // The gate first: halod fails a killed session's semaphores in the
    // order of their handles.
    halo_semaphore_t *gate = NULL;
    if (command[0] == 'q') {
      peer_setup_check(halo_semaphore_create(client, 0, 0, &gate), "create");
    }
    halo_semaphore_t *semaphore = NULL;
    peer_setup_check(halo_semaphore_create(client, 0, 0, &semaphore), "create");
    halo_queue_t *queue = NULL;
    halo_buffer_t *buffer = NULL;
    if (gate) {
      peer_setup_check(halo_queue_create(client, 0, 0, &queue), "queue");
      halo_semaphore_value_t wait = {gate, 1};
      halo_semaphore_value_t signal = {semaphore, 1};
      peer_setup_check(halo_queue_alloca(queue, &wait, 1, &signal, 1,
                                         HALO_MEMORY_DEVICE, 256, &buffer),
                       "alloca");
    }
    peer_print("ready");
    halo_status_t status =
        halo_semaphore_wait(semaphore, 1, HALO_TIMEOUT_INFINITE);
    code = (int)halo_status_code(status);
    printf("done %d %s\n", code, status ? halo_status_message(status) : "");
    fflush(stdout);
    halo_status_free(status);
    if (buffer) halo_buffer_release(buffer);
    if (queue) halo_queue_release(queue);
    if (gate) halo_semaphore_release(gate);
    halo_semaphore_release(semaphore);
  } else if (strcmp(command, "ping") == 0 && arg_count == 0) {
    peer_print("ready");
    char line[64];
    while (fgets(line, sizeof(line), stdin)) {
      halo_status_t status = halo_client_ping(client);
      printf("pinged %d\n", (int)halo_status_code(status));
      fflush(stdout);
      halo_status_free(status);
    }
    code = 0;
  } else {
    fprintf(stderr, "semaphore_peer: bad command or argument count: %s\n",
            command);
  }
  halo_client_close(client);
  return code;
}
