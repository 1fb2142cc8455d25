// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo-test-fake-nvrtc: a CUDA C compiler process that misbehaves as its
// source asks, started by the CUDA driver in halo-nvrtc's place
// (hal_cuda_nvrtc_test sets the device's compiler to it). It reads the
// request as halo-nvrtc does (hal/cuda/cuda_nvrtc_protocol.h), then:
//   "halo-test: crash"    writes a line to standard error and aborts
//                         (SIGABRT, as NVRTC does on some options)
//   "halo-test: hang"     never answers (the driver's timeout must end it)
//   "halo-test: garbage"  writes what is not a reply and exits 0
//   "halo-test: exit"     writes nothing and exits 7
//   "halo-test: huge"     claims a reply of 2^40 bytes
//   "halo-test: chatty"   writes 6000 bytes to standard error in two
//                         parts (past what the driver keeps), then answers
//                         as for "fds"
//   "halo-test: vanish"   closes its output and error and never ends
//   "halo-test: big"      answers OK with 3 MiB of 'b'
//   "halo-test: damaged"  answers OK with a CUBIN whose section table lies
//                         past its end (halod must refuse it)
//   "halo-test: code"     answers DEVICE_LOST (a code halo-nvrtc never
//                         sends)
//   "halo-test: long"     sends more than its reply's header says
//   "halo-test: seals"    answers OK with its request's seals (F_GET_SEALS
//                         of standard input), in decimal
//   "halo-test: fds"      answers OK with a text listing the descriptors
//                         it has open (/proc/self/fd)
// An OK answer's text is carried in a CUBIN that passes halod's checks
// (tests/support/fake_cuda_image.h: halo_fake_cuda_wrap), which the tests
// unwrap.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/cuda/cuda_nvrtc_protocol.h"
#include "tests/support/fake_cuda_image.h"

// What is not a reply, or not a whole one.
static void write_all(const void *data, size_t size) {
  halo_status_t status =
      halo_hal_cuda_nvrtc_write_all(STDOUT_FILENO, data, size);
  if (status) exit(3);
}

static void reply(int32_t code, const void *payload, size_t size) {
  halo_status_t status =
      halo_hal_cuda_nvrtc_reply_write(STDOUT_FILENO, code, payload, size);
  if (status) exit(3);
}

// An OK reply whose CUBIN carries |payload| (the tests unwrap it).
static void reply_wrapped(const void *payload, size_t size) {
  uint8_t *cubin = malloc(halo_fake_cuda_wrapped_size(size));
  if (!cubin) exit(3);
  halo_fake_cuda_wrap(cubin, payload, size);
  reply(HALO_STATUS_OK, cubin, halo_fake_cuda_wrapped_size(size));
  free(cubin);
}

int main(void) {
  static char data[1 << 20];
  size_t size = 0;
  ssize_t got;
  while (size < sizeof(data) - 1 &&
         (got = read(STDIN_FILENO, data + size, sizeof(data) - 1 - size)) > 0) {
    size += (size_t)got;
  }
  halo_hal_cuda_nvrtc_request_t request;
  halo_status_t status =
      halo_hal_cuda_nvrtc_request_parse(data, size, sizeof(data), &request);
  if (status) {
    fprintf(stderr, "fake NVRTC: %s\n", halo_status_message(status));
    return 4;
  }
  // The source stays in |data|.
  const char *source = request.source;
  halo_hal_cuda_nvrtc_request_free(&request);
  if (strstr(source, "halo-test: crash")) {
    fprintf(stderr, "fake NVRTC: crashing as asked\n");
    abort();
  }
  if (strstr(source, "halo-test: hang")) {
    for (;;) pause();
  }
  if (strstr(source, "halo-test: garbage")) {
    write_all("not a reply", 11);
    return 0;
  }
  if (strstr(source, "halo-test: exit")) return 7;
  if (strstr(source, "halo-test: vanish")) {
    close(STDOUT_FILENO);
    close(STDERR_FILENO);
    for (;;) pause();
  }
  if (strstr(source, "halo-test: chatty")) {
    static char words[3000];
    memset(words, 'w', sizeof(words));
    for (int part = 0; part < 2; ++part) {
      if (write(STDERR_FILENO, words, sizeof(words)) != sizeof(words)) {
        return 5;
      }
      usleep(100000);  // the driver reads the first part meanwhile
    }
  }
  if (strstr(source, "halo-test: huge")) {
    halo_hal_cuda_nvrtc_reply_t header = {
        .magic = HALO_HAL_CUDA_NVRTC_REPLY_MAGIC, .size = (uint64_t)1 << 40};
    write_all(&header, sizeof(header));
    static char chunk[1 << 16];
    for (;;) write_all(chunk, sizeof(chunk));
  }
  if (strstr(source, "halo-test: big")) {
    static char payload[3 << 20];
    memset(payload, 'b', sizeof(payload));
    reply_wrapped(payload, sizeof(payload));
    return 0;
  }
  if (strstr(source, "halo-test: damaged")) {
    // An OK reply whose CUBIN's section table lies past its end.
    uint8_t cubin[HALO_FAKE_CUDA_IMAGE_SIZE];
    halo_fake_cuda_image(cubin, 0);
    cubin[40] = 0xf0;
    reply(HALO_STATUS_OK, cubin, sizeof(cubin));
    return 0;
  }
  if (strstr(source, "halo-test: code")) {
    reply(HALO_STATUS_DEVICE_LOST, "lost", 4);
    return 0;
  }
  if (strstr(source, "halo-test: long")) {
    halo_hal_cuda_nvrtc_reply_t header = {
        .magic = HALO_HAL_CUDA_NVRTC_REPLY_MAGIC, .size = 4};
    write_all(&header, sizeof(header));
    write_all("longer", 6);
    return 0;
  }
  if (strstr(source, "halo-test: seals")) {
    char text[32];
    int length =
        snprintf(text, sizeof(text), "%d", fcntl(STDIN_FILENO, F_GET_SEALS));
    reply_wrapped(text, (size_t)length);
    return 0;
  }
  // "halo-test: fds", and anything else.
  char text[1024] = "";
  size_t used = 0;
  DIR *directory = opendir("/proc/self/fd");
  struct dirent *entry;
  while (directory && (entry = readdir(directory)) && used < sizeof(text)) {
    if (entry->d_name[0] == '.') continue;
    int written =
        snprintf(text + used, sizeof(text) - used, "%s ", entry->d_name);
    if (written > 0) used += (size_t)written;
  }
  if (directory) closedir(directory);
  if (used >= sizeof(text)) used = sizeof(text) - 1;
  reply_wrapped(text, used);
  return 0;
}
