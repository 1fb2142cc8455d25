// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The checks made of a CUBIN or FATBIN before the CUDA driver's loader,
// which takes no size, reads it (hal/cuda/cuda_image_check.c). No GPU, no
// NVRTC: nvcc's images from the fuzz corpus (tests/fuzz/corpus/cubin, each
// behind its format byte) pass, every mutation there that crashed the
// driver is refused, and each damaged copy of an image, made here field by
// field, is refused naming the format and what is wrong.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <dirent.h>
#include <elf.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "hal/cuda/cuda_device.h"

// The CUBINs and FATBINs pass through the CUDA driver's build unchanged,
// so the device needs nothing: no context, no NVRTC.
static halo_hal_cuda_device_t device;

typedef struct halo_test_image_t {
  uint8_t *data;
  size_t size;
} halo_test_image_t;

// The corpus file |name|'s image (its format byte dropped: its lowest bit
// picks FATBIN over CUBIN), whose size goes to *out_size; free() it.
static uint8_t *read_corpus_format(const char *name, size_t *out_size,
                                   uint32_t *out_format) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", HALO_TEST_CUBIN_CORPUS, name);
  FILE *file = fopen(path, "rb");
  assert_non_null(file);
  assert_int_equal(fseek(file, 0, SEEK_END), 0);
  long size = ftell(file);
  assert_true(size > 1);
  rewind(file);
  uint8_t *bytes = malloc((size_t)size);
  assert_non_null(bytes);
  assert_int_equal(fread(bytes, 1, (size_t)size, file), (size_t)size);
  fclose(file);
  *out_format = bytes[0] & 1 ? HALO_HAL_EXECUTABLE_FORMAT_FATBIN
                             : HALO_HAL_EXECUTABLE_FORMAT_CUBIN;
  memmove(bytes, bytes + 1, (size_t)size - 1);
  *out_size = (size_t)size - 1;
  return bytes;
}

static uint8_t *read_corpus(const char *name, size_t *out_size) {
  uint32_t format = 0;
  return read_corpus_format(name, out_size, &format);
}

// A CUBIN's ELF tables must lie within it (the driver reads them without a
// size, and crashed on tables that point outside): nvcc's CUBIN passes,
// each damaged copy is refused naming what is wrong, before the driver.
static halo_status_t check_image(uint32_t format, const uint8_t *bytes,
                                 size_t size) {
  halo_hal_executable_params_t params = {
      .format = format, .data = bytes, .size = size};
  halo_hal_cuda_image_t image;
  halo_status_t status = halo_hal_cuda_compiler_build(&device, &params, &image);
  if (!status) {
    // Passed through to the loader as it is.
    assert_ptr_equal(image.data, bytes);
    assert_null(image.owned);
  }
  return status;
}

static halo_status_t check_cubin(const uint8_t *bytes, size_t size) {
  return check_image(HALO_HAL_EXECUTABLE_FORMAT_CUBIN, bytes, size);
}

// Every image of the corpus: nvcc's and Triton's pass, and each mutation
// that crashed libcuda 580 on an H200 (crashed-driver-*) is refused.
static void test_corpus(void **state) {
  (void)state;
  DIR *directory = opendir(HALO_TEST_CUBIN_CORPUS);
  assert_non_null(directory);
  unsigned passed = 0, refused = 0;
  struct dirent *entry;
  while ((entry = readdir(directory))) {
    if (entry->d_name[0] == '.') continue;
    size_t size = 0;
    uint32_t format = 0;
    uint8_t *bytes = read_corpus_format(entry->d_name, &size, &format);
    halo_status_t status = check_image(format, bytes, size);
    bool crashed = strncmp(entry->d_name, "crashed-driver-", 15) == 0;
    print_message("%s: %s\n", entry->d_name,
                  status ? halo_status_message(status) : "passes");
    if (crashed) {
      assert_non_null(status);
      assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
      ++refused;
    } else {
      assert_null(status);
      ++passed;
    }
    halo_status_free(status);
    free(bytes);
  }
  closedir(directory);
  assert_true(passed >= 6);
  assert_true(refused >= 6);
}

// A copy of the |format| image |original| of |size| bytes with the |width|
// bytes at |offset| set to |value| (little-endian, as ELF's and the
// FATBIN's fields), checked as |damaged_size| bytes: refused, naming the
// format and |named|.
static void expect_image_refused(uint32_t format, const uint8_t *original,
                                 size_t size, size_t offset, uint64_t value,
                                 size_t width, size_t damaged_size,
                                 const char *named) {
  uint8_t *copy = malloc(size);
  assert_non_null(copy);
  memcpy(copy, original, size);
  memcpy(copy + offset, &value, width);
  halo_status_t status = check_image(format, copy, damaged_size);
  assert_non_null(status);
  print_message("%s\n", halo_status_message(status));
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  const char *message = halo_status_message(status);
  assert_non_null(strstr(message, format == HALO_HAL_EXECUTABLE_FORMAT_CUBIN
                                      ? "CUBIN executable"
                                      : "FATBIN executable"));
  assert_true(strstr(message, "is damaged") ||
              strstr(message, "is a damaged ELF image"));
  assert_non_null(strstr(message, named));
  halo_status_free(status);
  free(copy);
}

static void expect_damaged(const uint8_t *cubin, size_t size, size_t offset,
                           uint64_t value, size_t width, size_t damaged_size,
                           const char *named) {
  expect_image_refused(HALO_HAL_EXECUTABLE_FORMAT_CUBIN, cubin, size, offset,
                       value, width, damaged_size, named);
}

// Damages, one at a time, the symbol tables, the sh_info links and (where
// |with_relocations|, which it must have) the relocation tables of the
// CUBIN |cubin| of |size| bytes, and the NOBITS sections' offsets; each
// copy must be refused naming what is wrong.
static void expect_damaged_tables(const uint8_t *cubin, size_t size,
                                  bool with_relocations) {
  Elf64_Ehdr header;
  memcpy(&header, cubin, sizeof(header));
  bool symbols = false, info_links = false, relocations = false;
  for (size_t i = 1; i < header.e_shnum; ++i) {
    size_t at = header.e_shoff + i * sizeof(Elf64_Shdr);
    Elf64_Shdr section;
    memcpy(&section, cubin + at, sizeof(section));
    if (section.sh_type == SHT_SYMTAB && section.sh_size >= 48) {
      // Symbol 1's name, its section (an index past them crashed libcuda
      // 580), then the table's entry size.
      size_t symbol = section.sh_offset + sizeof(Elf64_Sym);
      expect_damaged(cubin, size, symbol + offsetof(Elf64_Sym, st_name),
                     0xfffffff0u, 4, size, "st_name");
      expect_damaged(cubin, size, symbol + offsetof(Elf64_Sym, st_shndx),
                     0xfeff, 2, size, "st_shndx");
      expect_damaged(cubin, size, at + offsetof(Elf64_Shdr, sh_entsize), 16, 8,
                     size, "sh_entsize");
      symbols = true;
    }
    if (section.sh_flags & SHF_INFO_LINK) {
      // A link to a section past them (crashed libcuda 580).
      expect_damaged(cubin, size, at + offsetof(Elf64_Shdr, sh_info), 0xfeff, 4,
                     size, "sh_info");
      info_links = true;
    }
    if (section.sh_type == SHT_RELA && section.sh_size >= sizeof(Elf64_Rela)) {
      expect_damaged(
          cubin, size, section.sh_offset + offsetof(Elf64_Rela, r_info),
          ELF64_R_INFO(0xffffffu, 1), 8, size, "relocation's symbol");
      // A place past its section (crashed libcuda 580).
      expect_damaged(cubin, size,
                     section.sh_offset + offsetof(Elf64_Rela, r_offset),
                     0x40000000u, 8, size, "r_offset");
      relocations = true;
    }
    if (section.sh_type == SHT_NOBITS) {
      // Taking no bytes of the file, it still starts within it.
      expect_damaged(cubin, size, at + offsetof(Elf64_Shdr, sh_offset),
                     size + 1, 8, size, "section's contents");
    }
  }
  assert_true(symbols);
  assert_true(info_links);
  assert_int_equal(relocations, with_relocations);
}

// Symbol tables that overlap, each read whole, would make a check's time
// grow with their count times their size: refused once the tables read
// pass the image's size. A made image: header, names, strings, a
// table of 42 empty symbols, and eight symbol tables over it.
static void test_overlapping_tables_are_refused(void **state) {
  (void)state;
  enum {
    kNames = 64,
    kStrings = 80,
    kTable = 96,
    kTableBytes = 42 * 24,
    kSections = 96 + 42 * 24,
    kCount = 11
  };
  size_t size = kSections + kCount * sizeof(Elf64_Shdr);
  uint8_t *image = calloc(1, size);
  assert_non_null(image);
  Elf64_Ehdr header = {.e_type = ET_EXEC,
                       .e_machine = 190,
                       .e_shoff = kSections,
                       .e_ehsize = sizeof(Elf64_Ehdr),
                       .e_shentsize = sizeof(Elf64_Shdr),
                       .e_shnum = kCount,
                       .e_shstrndx = 1};
  memcpy(header.e_ident, ELFMAG, SELFMAG);
  header.e_ident[EI_CLASS] = ELFCLASS64;
  header.e_ident[EI_DATA] = ELFDATA2LSB;
  memcpy(image, &header, sizeof(header));
  memcpy(image + kNames, "\0.n\0.s\0.t", 10);
  Elf64_Shdr sections[kCount] = {[1] = {.sh_name = 1,
                                        .sh_type = SHT_STRTAB,
                                        .sh_offset = kNames,
                                        .sh_size = 10},
                                 [2] = {.sh_name = 4,
                                        .sh_type = SHT_STRTAB,
                                        .sh_offset = kStrings,
                                        .sh_size = 1}};
  for (int i = 3; i < kCount; ++i) {
    sections[i] = (Elf64_Shdr){.sh_name = 7,
                               .sh_type = SHT_SYMTAB,
                               .sh_offset = kTable,
                               .sh_size = kTableBytes,
                               .sh_link = 2,
                               .sh_entsize = sizeof(Elf64_Sym)};
  }
  memcpy(image + kSections, sections, sizeof(sections));
  halo_status_t status = check_cubin(image, size);
  assert_non_null(status);
  print_message("%s\n", halo_status_message(status));
  assert_non_null(strstr(halo_status_message(status), "overlap"));
  halo_status_free(status);
  // One table over them is an image like any other.
  header.e_shnum = 4;
  memcpy(image, &header, sizeof(header));
  assert_null(check_cubin(image, size));
  free(image);
}

static void test_cubin_elf_tables_are_checked(void **state) {
  (void)state;
  size_t size = 0;
  uint8_t *cubin = read_corpus("cubin-sm90", &size);
  assert_null(check_cubin(cubin, size));
  Elf64_Ehdr header;
  memcpy(&header, cubin, sizeof(header));
  assert_true(header.e_shnum > 1);
  // The two fields that crashed libcuda 580.
  expect_damaged(cubin, size, offsetof(Elf64_Ehdr, e_shentsize), 0, 2, size,
                 "e_shentsize");
  expect_damaged(cubin, size, offsetof(Elf64_Ehdr, e_shstrndx), 0xffff, 2, size,
                 "e_shstrndx");
  expect_damaged(cubin, size, offsetof(Elf64_Ehdr, e_ehsize), 0, 2, size,
                 "e_ehsize");
  expect_damaged(cubin, size, offsetof(Elf64_Ehdr, e_shoff), size, 8, size,
                 "section table");
  // The last section that has contents, pointed past the end.
  size_t last = 0;
  for (size_t i = 1; i < header.e_shnum; ++i) {
    Elf64_Shdr section;
    memcpy(&section, cubin + header.e_shoff + i * sizeof(section),
           sizeof(section));
    if (section.sh_type != SHT_NOBITS && section.sh_size > 0) last = i;
  }
  assert_true(last > 0);
  expect_damaged(cubin, size,
                 header.e_shoff + last * sizeof(Elf64_Shdr) +
                     offsetof(Elf64_Shdr, sh_offset),
                 size, 8, size, "section's contents");
  if (header.e_phnum > 0) {
    expect_damaged(cubin, size, offsetof(Elf64_Ehdr, e_phentsize), 0, 2, size,
                   "e_phentsize");
  }
  // Cut short: its tables (at the end, as NVRTC writes them) lie past it.
  expect_damaged(cubin, size, 0, 0x464c457f, 4, size / 2, "past its end");
  // A shared object (ET_DYN): neither executable nor relocatable.
  expect_damaged(cubin, size, offsetof(Elf64_Ehdr, e_type), ET_DYN, 2, size,
                 "e_type");
  // A relocatable image (ET_REL, nvcc -rdc) loads: accepted.
  uint8_t *relocatable = malloc(size);
  assert_non_null(relocatable);
  memcpy(relocatable, cubin, size);
  uint16_t type = ET_REL;
  memcpy(relocatable + offsetof(Elf64_Ehdr, e_type), &type, 2);
  assert_null(check_cubin(relocatable, size));
  free(relocatable);
  // The names: the section name table made a NOBITS section (no bytes), a
  // section's name past it, a symbol's name past its string table.
  size_t names = header.e_shoff + header.e_shstrndx * sizeof(Elf64_Shdr);
  expect_damaged(cubin, size, names + offsetof(Elf64_Shdr, sh_type), SHT_NOBITS,
                 4, size, "e_shstrndx");
  expect_damaged(cubin, size,
                 header.e_shoff + last * sizeof(Elf64_Shdr) +
                     offsetof(Elf64_Shdr, sh_name),
                 0xfffffff0u, 4, size, "sh_name");
  expect_damaged_tables(cubin, size, true);  // nvcc's has relocations
  // ELF's extended numbering (past 0xff00 sections): the count and the
  // name table's index in section 0. The same image so is accepted.
  uint8_t *extended = malloc(size);
  assert_non_null(extended);
  memcpy(extended, cubin, size);
  uint16_t zero = 0, xindex = SHN_XINDEX;
  uint64_t count = header.e_shnum;
  uint32_t names_index = header.e_shstrndx;
  memcpy(extended + offsetof(Elf64_Ehdr, e_shnum), &zero, 2);
  memcpy(extended + offsetof(Elf64_Ehdr, e_shstrndx), &xindex, 2);
  memcpy(extended + header.e_shoff + offsetof(Elf64_Shdr, sh_size), &count, 8);
  memcpy(extended + header.e_shoff + offsetof(Elf64_Shdr, sh_link),
         &names_index, 4);
  assert_null(check_cubin(extended, size));
  free(extended);
  free(cubin);
  // With -G, more relocations (of its debug frames).
  cubin = read_corpus("cubin-sm90-debug", &size);
  assert_null(check_cubin(cubin, size));
  expect_damaged_tables(cubin, size, true);
  free(cubin);
}

// A FATBIN's entries must lie within it, and an ELF image in it must pass
// the CUBIN's checks: nvcc's CUBIN wrapped as a FATBIN (a 16-byte header,
// one entry: a 64-byte header of kind 2, ELF, then the image) passes; each
// damaged copy is refused naming what is wrong.
static void expect_damaged_fatbin(const uint8_t *fatbin, size_t size,
                                  size_t offset, uint64_t value, size_t width,
                                  const char *named) {
  expect_image_refused(HALO_HAL_EXECUTABLE_FORMAT_FATBIN, fatbin, size, offset,
                       value, width, size, named);
}

// A FATBIN of one entry of |kind| (a 16-byte header, the entry's 64-byte
// header, then |contents|, padded to 8 bytes), whose header says
// |compressed|, |flags| and |expanded| as nvcc writes them (bytes 16, 40
// and 56 of the entry's header). Its size in *out_size; free() it.
static uint8_t *make_fatbin(uint16_t kind, const void *contents,
                            size_t contents_size, uint32_t compressed,
                            uint64_t flags, uint64_t expanded,
                            size_t *out_size) {
  uint64_t padded = (contents_size + 7) & ~(uint64_t)7;
  size_t size = 16 + 64 + padded;
  uint8_t *fatbin = calloc(1, size);
  assert_non_null(fatbin);
  uint32_t magic = 0xBA55ED50u, entry_header_size = 64;
  uint16_t version = 1, header_size = 16, entry_version = 0x101;
  uint64_t entries_size = 64 + padded;
  memcpy(fatbin, &magic, 4);
  memcpy(fatbin + 4, &version, 2);
  memcpy(fatbin + 6, &header_size, 2);
  memcpy(fatbin + 8, &entries_size, 8);
  uint8_t *entry = fatbin + 16;
  memcpy(entry, &kind, 2);
  memcpy(entry + 2, &entry_version, 2);
  memcpy(entry + 4, &entry_header_size, 4);
  memcpy(entry + 8, &padded, 8);
  memcpy(entry + 16, &compressed, 4);
  memcpy(entry + 40, &flags, 8);
  memcpy(entry + 56, &expanded, 8);
  memcpy(entry + 64, contents, contents_size);
  *out_size = size;
  return fatbin;
}

static void test_fatbin_entries_are_checked(void **state) {
  (void)state;
  halo_test_image_t image;
  image.data = read_corpus("cubin-sm90", &image.size);
  size_t size = 0;
  uint8_t *fatbin = make_fatbin(2, image.data, image.size, 0, 0x11, 0, &size);
  uint64_t entries_size = size - 16, contents_size = size - 80;
  assert_null(check_image(HALO_HAL_EXECUTABLE_FORMAT_FATBIN, fatbin, size));
  expect_damaged_fatbin(fatbin, size, 8, entries_size + 1, 8,
                        "lie past its end");
  expect_damaged_fatbin(fatbin, size, 6, 0, 2, "header's size");
  expect_damaged_fatbin(fatbin, size, 20, 8, 4, "entry 0's header");
  // Under 64 bytes, the driver would read the entry's flags and sizes from
  // its contents.
  expect_damaged_fatbin(fatbin, size, 20, 40, 4, "entry 0's header (40 bytes)");
  expect_damaged_fatbin(fatbin, size, 24, contents_size + 1, 8,
                        "entry 0's contents");
  // The image inside: the field that crashed libcuda 580 in a CUBIN.
  expect_damaged_fatbin(fatbin, size, 80 + offsetof(Elf64_Ehdr, e_shentsize), 0,
                        2, "entry 0's ELF image: its section header size");
  free(fatbin);
  free(image.data);
}

// |image| of |size| bytes compressed as nvcc compresses a FATBIN's entry
// (|flags| 0x8000: a Zstandard frame; 0x2000: an LZ4 block) into a
// FATBIN of one ELF entry declaring |expanded| bytes uncompressed.
static uint8_t *make_compressed_fatbin(const void *image, size_t image_size,
                                       uint64_t flags, uint64_t expanded,
                                       size_t *out_size) {
  size_t capacity = ZSTD_compressBound(image_size) + image_size / 255 + 16;
  char *stream = malloc(capacity);
  assert_non_null(stream);
  size_t compressed = 0;
  if (flags & 0x8000) {
    compressed = ZSTD_compress(stream, capacity, image, image_size, 3);
    assert_false(ZSTD_isError(compressed));
  } else {
    int got =
        LZ4_compress_default(image, stream, (int)image_size, (int)capacity);
    assert_true(got > 0);
    compressed = (size_t)got;
  }
  assert_true(compressed < image_size);
  uint8_t *fatbin = make_fatbin(2, stream, compressed, (uint32_t)compressed,
                                flags | 0x11, expanded, out_size);
  free(stream);
  return fatbin;
}

// A compressed entry (nvcc's -Xfatbin -compress-all: Zstandard, or LZ4
// under --compress-mode speed and before nvcc 13) is decompressed and its
// ELF image checked as an uncompressed one is: the driver decompresses it
// into the size its header declares and reads it as it reads a CUBIN.
static void test_compressed_fatbin_entries_are_checked(void **state) {
  (void)state;
  halo_test_image_t image;
  image.data = read_corpus("cubin-sm90", &image.size);
  uint8_t *damaged = malloc(image.size);
  assert_non_null(damaged);
  memcpy(damaged, image.data, image.size);
  memset(damaged + offsetof(Elf64_Ehdr, e_shentsize), 0, 2);
  static const struct {
    uint64_t flags;
    const char *name;
  } kMethods[] = {{0x8000, "Zstandard"}, {0x2000, "LZ4"}};
  for (size_t m = 0; m < sizeof(kMethods) / sizeof(kMethods[0]); ++m) {
    uint64_t flags = kMethods[m].flags;
    print_message("%s\n", kMethods[m].name);
    size_t size = 0;
    uint8_t *fatbin = make_compressed_fatbin(image.data, image.size, flags,
                                             image.size, &size);
    assert_null(check_image(HALO_HAL_EXECUTABLE_FORMAT_FATBIN, fatbin, size));
    uint32_t compressed = 0;
    uint64_t contents_size = 0;
    memcpy(&compressed, fatbin + 16 + 16, 4);
    memcpy(&contents_size, fatbin + 16 + 8, 8);
    // A stream that decompresses past the size its entry declares.
    char declared[160];
    snprintf(declared, sizeof(declared),
             "entry 0's %s stream (%u bytes) does not decompress to its "
             "declared size (%zu bytes)",
             kMethods[m].name, compressed, image.size - 1);
    expect_damaged_fatbin(fatbin, size, 16 + 56, image.size - 1, 8, declared);
    // A stream past its entry's contents.
    expect_damaged_fatbin(fatbin, size, 16 + 16, contents_size + 1, 4,
                          "entry 0's compressed stream");
    // Flagged compressed both ways.
    expect_damaged_fatbin(fatbin, size, 16 + 40, 0x8000 | 0x2000 | 0x11, 8,
                          "both as LZ4 and Zstandard");
    // A stream that ends short of the size its entry declares (the driver
    // then fails the load with CUDA_ERROR_UNKNOWN).
    expect_damaged_fatbin(fatbin, size, 16 + 56, image.size + 1, 8,
                          "it decompresses to fewer bytes");
    // Declaring more than all compressed entries of a FATBIN of this size
    // may decompress to: 64 MiB (128 times its size, at least 64 MiB).
    expect_damaged_fatbin(fatbin, size, 16 + 56, (64ull << 20) + 1, 8,
                          "past 67108864 bytes");
    // The same stream, not flagged compressed: no ELF image.
    expect_damaged_fatbin(fatbin, size, 16 + 40, 0x11, 8,
                          "entry 0's ELF image: it has no ELF magic");
    free(fatbin);
    // The field that crashed libcuda 580, inside a compressed image.
    fatbin =
        make_compressed_fatbin(damaged, image.size, flags, image.size, &size);
    halo_status_t status =
        check_image(HALO_HAL_EXECUTABLE_FORMAT_FATBIN, fatbin, size);
    assert_non_null(status);
    print_message("%s\n", halo_status_message(status));
    assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
    assert_non_null(
        strstr(halo_status_message(status),
               "entry 0's compressed ELF image: its section header size"));
    halo_status_free(status);
    free(fatbin);
  }
  // A FATBIN of 1 MiB's contents (its stream, then padding): its entries
  // may declare 128 times its size, not more.
  {
    size_t capacity = ZSTD_compressBound(image.size);
    uint8_t *contents = calloc(1, 1u << 20);
    assert_non_null(contents);
    size_t compressed =
        ZSTD_compress(contents, capacity, image.data, image.size, 3);
    assert_false(ZSTD_isError(compressed));
    size_t size = 0;
    uint8_t *fatbin = make_fatbin(2, contents, 1u << 20, (uint32_t)compressed,
                                  0x8011, image.size, &size);
    assert_null(check_image(HALO_HAL_EXECUTABLE_FORMAT_FATBIN, fatbin, size));
    char bound[64];
    snprintf(bound, sizeof(bound), "past %zu bytes (128 times its size",
             128 * size);
    expect_damaged_fatbin(fatbin, size, 16 + 56, 128 * size + 1, 8, bound);
    free(fatbin);
    free(contents);
  }
  // Zstandard: two frames where nvcc writes one.
  size_t capacity = 2 * ZSTD_compressBound(image.size);
  uint8_t *frames = malloc(capacity);
  assert_non_null(frames);
  size_t half = image.size / 2;
  size_t first = ZSTD_compress(frames, capacity, image.data, half, 3);
  assert_false(ZSTD_isError(first));
  size_t second = ZSTD_compress(frames + first, capacity - first,
                                image.data + half, image.size - half, 3);
  assert_false(ZSTD_isError(second));
  size_t size = 0;
  uint8_t *fatbin =
      make_fatbin(2, frames, first + second, (uint32_t)(first + second), 0x8011,
                  image.size, &size);
  expect_damaged_fatbin(fatbin, size, 0, 0xBA55ED50u, 4, "more than one frame");
  free(fatbin);
  free(frames);
  free(damaged);
  free(image.data);
}

// The places an entry's header gives within itself must lie within it:
// the JIT options' place (at 20; offsets there pointing far away
// segfaulted libcuda 580 in a PTX entry), the options it points to, and
// the object's name (at 32 and 36). A PTX entry's text must end (a NUL)
// within it; an ELF entry must hold an ELF image.
static void test_fatbin_entry_headers_are_checked(void **state) {
  (void)state;
  static const char kPtx[16] = ".version 8.0\n";
  size_t size = 0;
  uint8_t *fatbin = make_fatbin(1, kPtx, sizeof(kPtx), 0, 0x11, 0, &size);
  uint8_t *entry = fatbin + 16;
  // Options' place at 48 (offset, size), pointing at 8 bytes at 56; the
  // name's 4 bytes at 60.
  uint32_t options_at = 48, place[2] = {56, 8}, name[2] = {60, 4};
  memcpy(entry + 20, &options_at, 4);
  memcpy(entry + 48, place, sizeof(place));
  memcpy(entry + 32, name, sizeof(name));
  assert_null(check_image(HALO_HAL_EXECUTABLE_FORMAT_FATBIN, fatbin, size));
  expect_damaged_fatbin(fatbin, size, 16 + 20, 0x7ffffff0u, 4,
                        "entry 0's header: the place of its JIT options");
  expect_damaged_fatbin(fatbin, size, 16 + 20, 60, 4,
                        "the place of its JIT options");
  expect_damaged_fatbin(fatbin, size, 16 + 48, 0x7ffffff0u, 4,
                        "its JIT options lie past its header");
  expect_damaged_fatbin(fatbin, size, 16 + 52, 9, 4,
                        "its JIT options lie past its header");
  expect_damaged_fatbin(fatbin, size, 16 + 32, 0x7ffffff0u, 4,
                        "its object's name");
  expect_damaged_fatbin(fatbin, size, 16 + 36, 5, 4, "its object's name");
  // PTX text with no NUL in it.
  expect_damaged_fatbin(fatbin, size, 16 + 64 + 12, 0x2020202020202020ull, 4,
                        "PTX text does not end within it");
  free(fatbin);
  // An ELF entry that holds no ELF image.
  fatbin = make_fatbin(2, kPtx, sizeof(kPtx), 0, 0x11, 0, &size);
  expect_damaged_fatbin(fatbin, size, 0, 0xBA55ED50u, 4,
                        "entry 0's ELF image: it has no ELF magic");
  free(fatbin);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus),
      cmocka_unit_test(test_cubin_elf_tables_are_checked),
      cmocka_unit_test(test_overlapping_tables_are_refused),
      cmocka_unit_test(test_fatbin_entries_are_checked),
      cmocka_unit_test(test_fatbin_entry_headers_are_checked),
      cmocka_unit_test(test_compressed_fatbin_entries_are_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
