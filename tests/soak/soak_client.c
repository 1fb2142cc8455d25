// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The client processes of scripts/soak: each runs for a while against a
// running halod and prints what it did.
//
//   halo-soak-client ADDRESS load KERNELS SECONDS
//       Loads KERNELS (an ELF with the entry "add": the test kernels) and,
//       until SECONDS have passed, runs checked vector adds (bench/
//       checked_add.h: execute, wait, check). Every 32 steps it also makes
//       and drops what a real client would: a re-recorded add (a memo hit),
//       a semaphore exported and imported back, a host-visible buffer
//       written and read, and a queue-ordered alloca and dealloca. Prints
//       "load: N steps". scripts/soak SIGKILLs some of these mid-work.
//   halo-soak-client ADDRESS replay FUZZ_KERNELS SECONDS CORPUS...
//       Replays the request harness's inputs (tests/fuzz/request_fuzz.c;
//       CORPUS: files or directories) at the socket, over and over until
//       SECONDS have passed: each input in a session of its own that first
//       loads FUZZ_KERNELS (so that the input's handles name what they name
//       in the harness, once the session tag in them is made this
//       session's) and sends the input's requests as they are, except that
//       one in four gets a random byte changed. ELF executables are left
//       out, as the harness does. Prints "replay: N inputs, M requests".
//   halo-soak-client ADDRESS replay-live FUZZ_KERNELS SECONDS CORPUS...
//       The same in one session for the whole run: what the inputs create
//       stays (up to the session's quotas), as with a fuzzer that keeps its
//       sessions open.
//
// Exit status: 0 when everything it checked held, 1 otherwise (the reason
// on stderr), 2 for bad arguments.
#include <dirent.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checked_add.h"
#include "common/wire.h"
#include "halo/halo.h"

#define SOAK_TIMEOUT_NS (30ll * 1000000000ll)
// The session tag of the fuzz harness's handles (tests/fuzz/fuzz_halod.h).
#define SOAK_FUZZ_TAG 0xf00000ull

static int64_t soak_now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000000ll + now.tv_nsec;
}

// Prints |status| with |what| and exits 1, or frees nothing if OK.
static void soak_check(halo_status_t status, const char *what) {
  if (!status) return;
  fprintf(stderr, "halo-soak-client (pid %d): %s: %s: %s\n", (int)getpid(),
          what, halo_status_code_name(halo_status_code(status)),
          halo_status_message(status));
  halo_status_free(status);
  exit(1);
}

// ------------------------------------------------------------------- load

// The objects a client makes and drops besides its adds.
static void soak_churn(halo_client_t *client, halo_executable_t *executable,
                       halo_queue_t *queue) {
  halo_checked_add_t add;
  soak_check(halo_checked_add_open(&add, client, executable), "re-record");
  soak_check(halo_checked_add_step(&add, 1, SOAK_TIMEOUT_NS), "re-recorded");
  halo_command_buffer_release(add.cb);
  halo_buffer_release(add.a);
  halo_buffer_release(add.b);
  halo_buffer_release(add.c);
  halo_semaphore_release(add.done);

  halo_semaphore_t *semaphore, *imported;
  soak_check(
      halo_semaphore_create(client, 0, HALO_OBJECT_FLAG_EXPORTABLE, &semaphore),
      "semaphore");
  halo_token_t token;
  soak_check(halo_semaphore_export(semaphore, &token), "export");
  soak_check(halo_semaphore_import(client, &token, &imported), "import");
  soak_check(halo_semaphore_signal(semaphore, 1), "signal");
  soak_check(halo_semaphore_wait(imported, 1, SOAK_TIMEOUT_NS), "wait");
  halo_semaphore_release(imported);

  halo_buffer_t *buffer;
  soak_check(halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE, 65536, 0,
                                &buffer),
             "buffer");
  char bytes[256], back[256];
  memset(bytes, 0x5a, sizeof(bytes));
  soak_check(halo_buffer_write(buffer, 1024, bytes, sizeof(bytes)), "write");
  soak_check(halo_buffer_read(buffer, 1024, back, sizeof(back)), "read");
  if (memcmp(bytes, back, sizeof(bytes)) != 0) {
    fprintf(stderr, "halo-soak-client: a buffer read back differs\n");
    exit(1);
  }
  halo_buffer_release(buffer);

  halo_buffer_t *scratch;
  halo_semaphore_value_t allocated = {semaphore, 2}, freed = {semaphore, 3};
  soak_check(halo_queue_alloca(queue, NULL, 0, &allocated, 1,
                               HALO_MEMORY_DEVICE, 1 << 20, &scratch),
             "alloca");
  soak_check(halo_queue_dealloca(queue, &allocated, 1, &freed, 1, scratch),
             "dealloca");
  halo_buffer_release(scratch);
  soak_check(halo_semaphore_wait(semaphore, 3, SOAK_TIMEOUT_NS), "freed");
  halo_semaphore_release(semaphore);
}

static int soak_load(const char *address, const char *kernels, double seconds) {
  halo_client_options_t options = {.address = address,
                                   .client_name = "halo-soak-client"};
  halo_client_t *client;
  soak_check(halo_client_connect(&options, &client), "connect");
  halo_executable_t *executable;
  soak_check(halo_executable_create_from_file(
                 client, 0, kernels, HALO_EXECUTABLE_FORMAT_ELF, &executable),
             "load the kernels");
  halo_queue_t *queue;
  soak_check(halo_queue_create(client, 0, 0, &queue), "queue");
  halo_checked_add_t add;
  soak_check(halo_checked_add_open(&add, client, executable), "record");
  int64_t end = soak_now_ns() + (int64_t)(seconds * 1e9);
  uint64_t steps = 0;
  while (soak_now_ns() < end) {
    ++steps;
    soak_check(halo_checked_add_step(&add, steps, SOAK_TIMEOUT_NS), "add");
    if (steps % 32 == 0) soak_churn(client, executable, queue);
  }
  printf("load: %llu steps\n", (unsigned long long)steps);
  halo_client_close(client);
  return 0;
}

// ----------------------------------------------------------------- replay

typedef struct soak_replay_t {
  nng_socket socket;
  uint64_t tag;  // this session's handle tag
  uint64_t requests;
  uint32_t random;
} soak_replay_t;

static uint32_t soak_random(soak_replay_t *replay) {
  replay->random = replay->random * 1103515245u + 12345u;
  return replay->random >> 8;
}

// Sends |size| bytes as a request and waits for the reply; false if the
// connection failed (halod gone: the caller reports it).
static bool soak_call(soak_replay_t *replay, const void *bytes, size_t size,
                      Halo__Wire__Response **out_response) {
  if (out_response) *out_response = NULL;
  nng_msg *message;
  if (nng_msg_alloc(&message, 0) != 0 ||
      nng_msg_append(message, bytes, size) != 0) {
    return false;
  }
  if (nng_sendmsg(replay->socket, message, 0) != 0) {
    nng_msg_free(message);
    return false;
  }
  nng_msg *reply;
  if (nng_recvmsg(replay->socket, &reply, 0) != 0) return false;
  ++replay->requests;
  Halo__Wire__Response *response = halo__wire__response__unpack(
      NULL, nng_msg_len(reply), nng_msg_body(reply));
  nng_msg_free(reply);
  if (!response) {
    fprintf(stderr, "halo-soak-client: a reply does not decode\n");
    exit(1);
  }
  if (out_response) {
    *out_response = response;
  } else {
    halo__wire__response__free_unpacked(response, NULL);
  }
  return true;
}

static bool soak_call_message(soak_replay_t *replay,
                              const Halo__Wire__Request *request,
                              Halo__Wire__Response **out_response) {
  size_t size = protobuf_c_message_get_packed_size(&request->base);
  uint8_t *bytes = malloc(size ? size : 1);
  if (!bytes) return false;
  protobuf_c_message_pack(&request->base, bytes);
  bool sent = soak_call(replay, bytes, size, out_response);
  free(bytes);
  return sent;
}

// Makes every handle of the fuzz session's tag in |message| this session's
// (uint64 fields, in nested and repeated messages too).
static void soak_retag(soak_replay_t *replay, ProtobufCMessage *message) {
  const ProtobufCMessageDescriptor *descriptor = message->descriptor;
  for (unsigned i = 0; i < descriptor->n_fields; ++i) {
    const ProtobufCFieldDescriptor *field = &descriptor->fields[i];
    char *base = (char *)message + field->offset;
    size_t count = 1;
    if (field->label == PROTOBUF_C_LABEL_REPEATED) {
      count = *(size_t *)((char *)message + field->quantifier_offset);
      base = *(char **)base;
    } else if (field->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      uint32_t chosen =
          *(uint32_t *)((char *)message + field->quantifier_offset);
      if (chosen != field->id) continue;
    }
    for (size_t k = 0; base && k < count; ++k) {
      if (field->type == PROTOBUF_C_TYPE_UINT64) {
        uint64_t *value = (uint64_t *)base + k;
        if (*value >> 40 == SOAK_FUZZ_TAG) {
          *value = (*value & ((1ull << 40) - 1)) | replay->tag << 40;
        }
      } else if (field->type == PROTOBUF_C_TYPE_MESSAGE) {
        ProtobufCMessage *child = ((ProtobufCMessage **)base)[k];
        if (child) soak_retag(replay, child);
      }
    }
  }
}

// Connects, says Hello and loads |kernels| (the fuzz harness's native
// kernels). False if halod did not answer.
static bool soak_replay_open(soak_replay_t *replay, const char *address,
                             const uint8_t *kernels, size_t kernels_size) {
  if (nng_req0_open(&replay->socket) != 0) return false;
  nng_socket_set_ms(replay->socket, NNG_OPT_RECVTIMEO, 30000);
  nng_socket_set_ms(replay->socket, NNG_OPT_SENDTIMEO, 30000);
  if (halo_wire_dial_once(replay->socket, address, NULL, NULL) != 0) {
    nng_close(replay->socket);
    return false;
  }
  Halo__Wire__Hello hello = HALO__WIRE__HELLO__INIT;
  hello.protocol_version = HALO_PROTOCOL_VERSION;
  hello.client_name = "halo-soak-replay";
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_HELLO;
  request.hello = &hello;
  Halo__Wire__Response *response;
  bool alive = soak_call_message(replay, &request, &response);
  if (alive && response->code == 0 && response->hello) {
    replay->tag = response->hello->session_id & 0xffffff;
  }
  if (response) halo__wire__response__free_unpacked(response, NULL);
  Halo__Wire__ExecutableCreate create = HALO__WIRE__EXECUTABLE_CREATE__INIT;
  create.format = HALO__WIRE__EXECUTABLE_FORMAT__EXECUTABLE_FORMAT_ELF;
  create.data.data = (uint8_t *)kernels;
  create.data.len = kernels_size;
  request.body_case = HALO__WIRE__REQUEST__BODY_EXECUTABLE_CREATE;
  request.executable_create = &create;
  alive = alive && soak_call_message(replay, &request, NULL);
  if (!alive) nng_close(replay->socket);
  return alive;
}

// Sends the requests of one corpus input (|data|), handles retagged to the
// session, one in four with a random byte changed. False if halod did not
// answer one.
static bool soak_replay_input(soak_replay_t *replay, const uint8_t *data,
                              size_t size) {
  bool alive = true;
  size_t offset = 0;
  for (int frame = 0; alive && frame < 64 && offset + 2 <= size; ++frame) {
    size_t length = (size_t)data[offset] | (size_t)data[offset + 1] << 8;
    offset += 2;
    if (length > size - offset) length = size - offset;
    const uint8_t *bytes = data + offset;
    offset += length;
    Halo__Wire__Request *decoded =
        halo__wire__request__unpack(NULL, length, bytes);
    if (decoded &&
        decoded->body_case == HALO__WIRE__REQUEST__BODY_EXECUTABLE_CREATE &&
        decoded->executable_create->format ==
            HALO__WIRE__EXECUTABLE_FORMAT__EXECUTABLE_FORMAT_ELF) {
      halo__wire__request__free_unpacked(decoded, NULL);
      continue;
    }
    uint8_t *packed = NULL;
    size_t packed_size = length;
    if (decoded) {
      soak_retag(replay, &decoded->base);
      packed_size = protobuf_c_message_get_packed_size(&decoded->base);
      packed = malloc(packed_size ? packed_size : 1);
      if (packed) protobuf_c_message_pack(&decoded->base, packed);
      halo__wire__request__free_unpacked(decoded, NULL);
    } else {
      packed = malloc(length ? length : 1);
      if (packed) memcpy(packed, bytes, length);
    }
    if (!packed) break;
    if (packed_size && soak_random(replay) % 4 == 0) {
      packed[soak_random(replay) % packed_size] ^=
          (uint8_t)(1 + soak_random(replay) % 255);
    }
    alive = soak_call(replay, packed, packed_size, NULL);
    free(packed);
  }
  return alive;
}

static uint8_t *soak_read_file(const char *path, size_t *out_size) {
  FILE *file = fopen(path, "rb");
  if (!file) return NULL;
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  uint8_t *data = malloc(size > 0 ? (size_t)size : 1);
  if (data && size > 0 && fread(data, 1, (size_t)size, file) != (size_t)size) {
    free(data);
    data = NULL;
  }
  fclose(file);
  *out_size = size > 0 ? (size_t)size : 0;
  return data;
}

// The files of |paths| (directories: their regular files).
static char **soak_list(char **paths, int count, size_t *out_count) {
  char **files = NULL;
  size_t n = 0;
  for (int i = 0; i < count; ++i) {
    struct stat info;
    if (stat(paths[i], &info) != 0) continue;
    if (!S_ISDIR(info.st_mode)) {
      files = realloc(files, (n + 1) * sizeof(*files));
      files[n++] = strdup(paths[i]);
      continue;
    }
    DIR *directory = opendir(paths[i]);
    struct dirent *entry;
    while (directory && (entry = readdir(directory))) {
      if (entry->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s", paths[i], entry->d_name);
      files = realloc(files, (n + 1) * sizeof(*files));
      files[n++] = strdup(path);
    }
    if (directory) closedir(directory);
  }
  *out_count = n;
  return files;
}

// |live|: every input in one session (what it creates accumulates, up to
// its quotas); else a session per input.
static int soak_replay(const char *address, const char *kernels_path,
                       double seconds, char **paths, int count, bool live) {
  size_t kernels_size;
  uint8_t *kernels = soak_read_file(kernels_path, &kernels_size);
  if (!kernels) {
    fprintf(stderr, "halo-soak-client: cannot read %s\n", kernels_path);
    return 1;
  }
  size_t file_count;
  char **files = soak_list(paths, count, &file_count);
  if (file_count == 0) {
    fprintf(stderr, "halo-soak-client: no corpus files\n");
    return 1;
  }
  soak_replay_t replay = {.random = (uint32_t)getpid()};
  int64_t end = soak_now_ns() + (int64_t)(seconds * 1e9);
  uint64_t inputs = 0;
  if (live && !soak_replay_open(&replay, address, kernels, kernels_size)) {
    fprintf(stderr, "halo-soak-client: halod did not answer\n");
    return 1;
  }
  while (soak_now_ns() < end) {
    const char *file = files[soak_random(&replay) % file_count];
    size_t size;
    uint8_t *data = soak_read_file(file, &size);
    if (!data) continue;
    bool alive =
        live || soak_replay_open(&replay, address, kernels, kernels_size);
    alive = alive && soak_replay_input(&replay, data, size);
    if (!live) nng_close(replay.socket);
    free(data);
    if (!alive) {
      fprintf(stderr, "halo-soak-client: halod stopped answering (input %s)\n",
              file);
      return 1;
    }
    ++inputs;
  }
  if (live) nng_close(replay.socket);
  printf("replay: %llu inputs, %llu requests\n", (unsigned long long)inputs,
         (unsigned long long)replay.requests);
  for (size_t i = 0; i < file_count; ++i) free(files[i]);
  free(files);
  free(kernels);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[2], "load") == 0) {
    return soak_load(argv[1], argv[3], atof(argv[4]));
  }
  if (argc >= 6 &&
      (strcmp(argv[2], "replay") == 0 || strcmp(argv[2], "replay-live") == 0)) {
    return soak_replay(argv[1], argv[3], atof(argv[4]), argv + 5, argc - 5,
                       strcmp(argv[2], "replay-live") == 0);
  }
  fprintf(stderr,
          "usage: %s ADDRESS load KERNELS SECONDS\n"
          "       %s ADDRESS replay|replay-live FUZZ_KERNELS SECONDS "
          "CORPUS...\n",
          argv[0], argv[0]);
  return 2;
}
