// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// What the CUDA driver and its compiler process, halo-nvrtc, say to each
// other (cuda_nvrtc.c starts one per CUDA C compile; nvrtc_helper/).
//
// The request is the compiler's standard input, a sealed memfd: NUL-ended
// strings (the protocol's name, NVRTC's soname, NVRTC's directory, the
// target architecture, the count of readable paths and each path, the
// count of options and each option), then the source to its end. The reply
// is its standard output: a halo_hal_cuda_nvrtc_reply_t, then |size| bytes
// (the CUBIN where |code| is HALO_STATUS_OK, else the error's message).
// Both ends are the same build of halo; each checks what it reads.
#ifndef HALO_HAL_CUDA_CUDA_NVRTC_PROTOCOL_H_
#define HALO_HAL_CUDA_CUDA_NVRTC_PROTOCOL_H_

#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

// The request's first string.
#define HALO_HAL_CUDA_NVRTC_PROTOCOL "halo-nvrtc 1"
// The reply's |magic|.
#define HALO_HAL_CUDA_NVRTC_REPLY_MAGIC 0x31524e48u  // "HNR1"
// Bounds of what either end reads (a request holds at most a wire
// message's source; a CUBIN of a whole library is tens of MiB, and the
// worker holds a reply whole while it reads it).
#define HALO_HAL_CUDA_NVRTC_MAX_REQUEST_BYTES ((size_t)256 << 20)
#define HALO_HAL_CUDA_NVRTC_MAX_REPLY_BYTES ((uint64_t)256 << 20)
#define HALO_HAL_CUDA_NVRTC_MAX_STRINGS 4096

typedef struct halo_hal_cuda_nvrtc_request_t {
  const char *soname;     // NVRTC's library, e.g. "libnvrtc.so.13"
  const char *directory;  // where it lies ("" unknown): its builtins' too
  int arch;               // e.g. 90 for sm_90
  uint32_t path_count;    // what the compile may read
  const char *const *paths;
  uint32_t option_count;  // NVRTC's options, in order
  const char *const *options;
  const char *source;  // NUL-ended in a parsed request
  size_t source_size;
} halo_hal_cuda_nvrtc_request_t;

typedef struct halo_hal_cuda_nvrtc_reply_t {
  uint32_t magic;  // HALO_HAL_CUDA_NVRTC_REPLY_MAGIC
  int32_t code;    // a halo_status_code_t
  uint64_t size;   // the bytes that follow
} halo_hal_cuda_nvrtc_reply_t;

// Writes the |size| bytes of |data| to |fd|, all of them (a blocking
// descriptor), or an error naming what failed.
halo_status_t halo_hal_cuda_nvrtc_write_all(int fd, const void *data,
                                            size_t size);

// Writes a reply: |code| (a halo_status_code_t) and the |size| bytes of
// |payload| (the CUBIN, or the error's message).
halo_status_t halo_hal_cuda_nvrtc_reply_write(int fd, int32_t code,
                                              const void *payload,
                                              uint64_t size);

// Writes |request| to |fd| (all of it, or an error naming what failed).
halo_status_t halo_hal_cuda_nvrtc_request_write(
    int fd, const halo_hal_cuda_nvrtc_request_t *request);

// Parses the |size| bytes of |data| (|capacity| bytes long: at least one
// more, for the source's NUL) into |out_request|, whose strings point into
// |data| and whose |paths| and |options| arrays are allocated (free them
// with halo_hal_cuda_nvrtc_request_free). INVALID_ARGUMENT naming the part
// that is wrong.
halo_status_t halo_hal_cuda_nvrtc_request_parse(
    char *data, size_t size, size_t capacity,
    halo_hal_cuda_nvrtc_request_t *out_request);
void halo_hal_cuda_nvrtc_request_free(halo_hal_cuda_nvrtc_request_t *request);

#endif  // HALO_HAL_CUDA_CUDA_NVRTC_PROTOCOL_H_
