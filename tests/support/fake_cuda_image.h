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

#define HALO_FAKE_CUDA_IMAGE_SIZE 240

// Fills |out_image|; |variant| sets byte 90, which the fake ignores
// (distinct content hashes for one library).
static inline void halo_fake_cuda_image(
    uint8_t out_image[HALO_FAKE_CUDA_IMAGE_SIZE], uint8_t variant) {
  memset(out_image, 0, HALO_FAKE_CUDA_IMAGE_SIZE);
  memcpy(out_image,
         "\x7f"
         "ELF",
         4);
  out_image[4] = 2;     // ELFCLASS64
  out_image[5] = 1;     // ELFDATA2LSB
  out_image[16] = 2;    // e_type: ET_EXEC
  out_image[18] = 190;  // e_machine: EM_CUDA, little-endian
  out_image[40] = 112;  // e_shoff: the section table, at byte 112
  out_image[52] = 64;   // e_ehsize
  out_image[58] = 64;   // e_shentsize
  out_image[60] = 2;    // e_shnum: an empty section and the name table
  out_image[62] = 1;    // e_shstrndx
  memcpy(out_image + 64, "halo-fake-library", 17);
  out_image[90] = variant;
  // The section name table, at byte 96, and its header (section 1).
  memcpy(out_image + 96, "\0.shstrtab", 11);
  out_image[176] = 1;   // sh_name
  out_image[180] = 3;   // sh_type: SHT_STRTAB
  out_image[200] = 96;  // sh_offset
  out_image[208] = 11;  // sh_size
}

#endif  // HALO_TESTS_SUPPORT_FAKE_CUDA_IMAGE_H_
