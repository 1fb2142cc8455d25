// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The CUBIN the fake CUDA driver (tests/unit/hal_cuda_fake_driver.c, no
// GPU) loads its library from, for the tests and benchmarks that run on
// it: a 64-bit executable ELF image for EM_CUDA whose tables lie within it
// (what halod checks a CUBIN for: a section table at byte 112 with an
// empty section and the section name table, at byte 96), and the text
// "halo-fake-library" at byte 64, which the fake looks for.
#ifndef HALO_TESTS_SUPPORT_FAKE_CUDA_IMAGE_H_
#define HALO_TESTS_SUPPORT_FAKE_CUDA_IMAGE_H_

#include <stdint.h>
#include <string.h>

// A 64-bit executable ELF image for EM_CUDA whose tables lie within it
// that carries |payload_size| bytes between its ELF header and its
// section name table: the payload at byte 64, the name table after it,
// the section table (an empty section and the name table) after that at a
// multiple of 8. Also what a test's fake CUDA C compiler answers with
// (halod checks what the compiler sends as it checks a client's CUBIN).
static inline size_t halo_fake_cuda_wrapped_size(size_t payload_size) {
  return ((64 + payload_size + 11 + 7) & ~(size_t)7) + 128;
}

// Writes the wrapped image of |payload| into |out_image|
// (halo_fake_cuda_wrapped_size(|payload_size|) bytes).
static inline void halo_fake_cuda_wrap(uint8_t *out_image, const void *payload,
                                       size_t payload_size) {
  size_t size = halo_fake_cuda_wrapped_size(payload_size);
  uint64_t names = 64 + payload_size, table = size - 128, names_size = 11;
  uint16_t ehsize = 64, shentsize = 64, shnum = 2, shstrndx = 1;
  uint32_t name = 1, strtab = 3;
  memset(out_image, 0, size);
  memcpy(out_image,
         "\x7f"
         "ELF",
         4);
  out_image[4] = 2;                   // ELFCLASS64
  out_image[5] = 1;                   // ELFDATA2LSB
  out_image[16] = 2;                  // e_type: ET_EXEC
  out_image[18] = 190;                // e_machine: EM_CUDA
  memcpy(out_image + 40, &table, 8);  // e_shoff
  memcpy(out_image + 52, &ehsize, 2);
  memcpy(out_image + 58, &shentsize, 2);
  memcpy(out_image + 60, &shnum, 2);
  memcpy(out_image + 62, &shstrndx, 2);
  memcpy(out_image + 64, payload, payload_size);
  memcpy(out_image + names, "\0.shstrtab", names_size);
  uint8_t *section = out_image + table + 64;  // section 1, the names
  memcpy(section, &name, 4);                  // sh_name
  memcpy(section + 4, &strtab, 4);            // sh_type: SHT_STRTAB
  memcpy(section + 24, &names, 8);            // sh_offset
  memcpy(section + 32, &names_size, 8);       // sh_size
}

#define HALO_FAKE_CUDA_IMAGE_SIZE 240

// Fills |out_image|: the wrapped image of 32 bytes holding
// "halo-fake-library" (so the section table is at byte 112, the name
// table at byte 96); |variant| sets byte 90, which the fake ignores
// (distinct content hashes for one library).
static inline void halo_fake_cuda_image(
    uint8_t out_image[HALO_FAKE_CUDA_IMAGE_SIZE], uint8_t variant) {
  uint8_t payload[32] = "halo-fake-library";
  payload[90 - 64] = variant;
  halo_fake_cuda_wrap(out_image, payload, sizeof(payload));
}

// The payload of the wrapped image |image| of |size| bytes (its size in
// *out_payload_size), or NULL where |image| is not one.
static inline const uint8_t *halo_fake_cuda_unwrap(const void *image,
                                                   size_t size,
                                                   size_t *out_payload_size) {
  const uint8_t *bytes = image;
  uint64_t table = 0, names = 0;
  if (size < 64 + 11 + 128 || memcmp(bytes,
                                     "\x7f"
                                     "ELF",
                                     4) != 0) {
    return NULL;
  }
  memcpy(&table, bytes + 40, 8);
  if (table != size - 128) return NULL;
  memcpy(&names, bytes + table + 64 + 24, 8);
  if (names < 64 || names > table) return NULL;
  *out_payload_size = names - 64;
  return bytes + 64;
}

#endif  // HALO_TESTS_SUPPORT_FAKE_CUDA_IMAGE_H_
