// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// What halo checks of a CUBIN or FATBIN before the CUDA driver's loader
// reads it (cuda_device.h, halo_hal_cuda_image_check). cuModuleLoadData
// takes no size: it reads an ELF image's tables wherever their indices and
// offsets point, and a FATBIN's entries wherever their sizes say, and
// decompresses a compressed entry into the size its header declares. A
// client's damaged image crashed libcuda 580 in the device worker, so
// every table, entry, offset in an entry's header and compressed stream
// the driver is known to follow must lie within the bytes sent, and every
// ELF image (a FATBIN's compressed ones decompressed here first) must pass
// the ELF checks. What NVIDIA's own sections hold, and what a PTX entry's
// text says, is the driver's to read.
//
// Thread-safety: thread-safe (no state).
#include <elf.h>
#include <limits.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/status.h"
#include "hal/cuda/cuda_device.h"

// e_machine of a CUDA ELF image.
#define HALO_HAL_CUDA_ELF_MACHINE_CUDA 190

// Section |index|'s header of the ELF image at |bytes| (its section table
// already checked to lie within the image).
static Elf64_Shdr halo_hal_cuda_elf_section(const uint8_t *bytes,
                                            const Elf64_Ehdr *header,
                                            uint64_t index) {
  Elf64_Shdr section;
  memcpy(&section, bytes + header->e_shoff + index * sizeof(section),
         sizeof(section));
  return section;
}

// Whether section |index| of |count| is a string table that lies within
// the |size| bytes and ends in a NUL (so that every name in it does).
static bool halo_hal_cuda_elf_string_table(const uint8_t *bytes, uint64_t size,
                                           const Elf64_Ehdr *header,
                                           uint64_t count, uint64_t index,
                                           uint64_t *out_size) {
  if (index >= count) return false;
  Elf64_Shdr table = halo_hal_cuda_elf_section(bytes, header, index);
  if (table.sh_type != SHT_STRTAB || table.sh_size == 0 ||
      table.sh_offset > size || table.sh_size > size - table.sh_offset) {
    return false;
  }
  *out_size = table.sh_size;
  return bytes[table.sh_offset + table.sh_size - 1] == '\0';
}

// What is wrong with the ELF structure of the CUBIN of |size| bytes at
// |bytes| (first: whether it is one, by its magic), or NULL. The driver reads
// it without knowing the size, and indices and offsets that point outside the
// image crashed it (libcuda 580 segfaulted in cuModuleLoadData on an
// e_shentsize of 0, an e_shstrndx of 0xffff, a symbol's st_shndx or an sh_info
// of 0xfeff, and a relocation's offset past its section). So: a 64-bit
// little-endian image for EM_CUDA, executable or relocatable (both load), whose
// header, section and program tables, and every section's and segment's
// contents lie within the bytes; a section name table and the string tables of
// its symbol tables that are string tables within the bytes, ending in a NUL,
// with every name in them; symbols in sections that exist; sh_info links
// (SHF_INFO_LINK) to sections that exist; relocation tables that name symbols
// that exist and places within their sections (8 bytes, or an instruction's 16
// in code). Symbol and relocation tables are read once over (their bytes
// together no more than the image's), so a check takes time linear in the size.
// What the sections hold beyond that (NVIDIA's own sections) is the driver's to
// read.
static const char *halo_hal_cuda_elf_problem(const uint8_t *bytes,
                                             uint64_t size) {
  Elf64_Ehdr header;
  if (size < SELFMAG || memcmp(bytes, ELFMAG, SELFMAG) != 0) {
    return "it has no ELF magic";
  }
  if (size < sizeof(header)) return "it is shorter than an ELF header";
  memcpy(&header, bytes, sizeof(header));
  if (header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB ||
      header.e_machine != HALO_HAL_CUDA_ELF_MACHINE_CUDA) {
    return "it is not a 64-bit little-endian CUDA ELF image";
  }
  if (header.e_ehsize != sizeof(Elf64_Ehdr)) {
    return "its ELF header's size (e_ehsize) is not 64";
  }
  if (header.e_type != ET_EXEC && header.e_type != ET_REL) {
    return "it is neither an executable nor a relocatable image (e_type)";
  }
  if (header.e_shoff == 0) return "it has no section table";
  if (header.e_shentsize != sizeof(Elf64_Shdr)) {
    return "its section header size (e_shentsize) is not 64";
  }
  if (header.e_shoff > size || size - header.e_shoff < sizeof(Elf64_Shdr)) {
    return "its section table (e_shoff) lies past its end";
  }
  // Past 0xff00 sections the count, and the name table's index, are in
  // section 0 (ELF's extended numbering).
  Elf64_Shdr first = halo_hal_cuda_elf_section(bytes, &header, 0);
  uint64_t count = header.e_shnum ? header.e_shnum : first.sh_size;
  uint64_t names_index =
      header.e_shstrndx == SHN_XINDEX ? first.sh_link : header.e_shstrndx;
  if (count == 0 || (size - header.e_shoff) / sizeof(Elf64_Shdr) < count) {
    return "its section table (e_shoff, e_shnum) lies past its end";
  }
  uint64_t names_size = 0;
  if (!halo_hal_cuda_elf_string_table(bytes, size, &header, count, names_index,
                                      &names_size)) {
    return "its section name table (e_shstrndx) is not a string table "
           "within it that ends in a NUL";
  }
  uint64_t scanned = 0;  // bytes of symbol and relocation tables read
  for (uint64_t i = 0; i < count; ++i) {
    Elf64_Shdr section = halo_hal_cuda_elf_section(bytes, &header, i);
    // Sections that take no bytes of the file still start within it.
    uint64_t file_size = section.sh_type == SHT_NOBITS ? 0 : section.sh_size;
    if (section.sh_offset > size || file_size > size - section.sh_offset) {
      return "a section's contents lie past its end";
    }
    if (section.sh_name >= names_size) {
      return "a section's name (sh_name) lies past its section name table";
    }
    if ((section.sh_flags & SHF_INFO_LINK) && section.sh_info >= count) {
      return "a section's link (sh_info) is not one of its sections";
    }
    bool symbols =
        section.sh_type == SHT_SYMTAB || section.sh_type == SHT_DYNSYM;
    bool relocations =
        section.sh_type == SHT_REL || section.sh_type == SHT_RELA;
    if (!symbols && !relocations) continue;
    scanned += section.sh_size;  // no overflow: each is within |size|
    if (scanned > size) {
      return "its symbol and relocation tables overlap";
    }
    if (symbols) {
      uint64_t strings_size = 0;
      if (section.sh_entsize != sizeof(Elf64_Sym) ||
          section.sh_size % sizeof(Elf64_Sym) != 0) {
        return "a symbol table's entries (sh_entsize) are not 24 bytes";
      }
      if (!halo_hal_cuda_elf_string_table(bytes, size, &header, count,
                                          section.sh_link, &strings_size)) {
        return "a symbol table's names (sh_link) are not a string table "
               "within it that ends in a NUL";
      }
      for (uint64_t at = 0; at < section.sh_size; at += sizeof(Elf64_Sym)) {
        Elf64_Sym symbol;
        memcpy(&symbol, bytes + section.sh_offset + at, sizeof(symbol));
        if (symbol.st_name >= strings_size) {
          return "a symbol's name (st_name) lies past its string table";
        }
        if (symbol.st_shndx >= count && symbol.st_shndx != SHN_ABS &&
            symbol.st_shndx != SHN_COMMON) {
          return "a symbol's section (st_shndx) is not one of its sections";
        }
      }
      continue;
    }
    uint64_t entry =
        section.sh_type == SHT_REL ? sizeof(Elf64_Rel) : sizeof(Elf64_Rela);
    if (section.sh_entsize != entry || section.sh_size % entry != 0) {
      return "a relocation table's entries (sh_entsize) are not whole";
    }
    if (section.sh_link >= count || section.sh_info >= count) {
      return "a relocation table's links (sh_link, sh_info) are not its "
             "sections";
    }
    Elf64_Shdr table =
        halo_hal_cuda_elf_section(bytes, &header, section.sh_link);
    if (table.sh_type != SHT_SYMTAB && table.sh_type != SHT_DYNSYM) {
      return "a relocation table's symbols (sh_link) are not a symbol table";
    }
    Elf64_Shdr target =
        halo_hal_cuda_elf_section(bytes, &header, section.sh_info);
    uint64_t reach = target.sh_flags & SHF_EXECINSTR ? 16 : 8;
    uint64_t symbol_count = table.sh_size / sizeof(Elf64_Sym);
    for (uint64_t at = 0; at < section.sh_size; at += entry) {
      Elf64_Rel relocation;  // where Elf64_Rela has the same fields
      memcpy(&relocation, bytes + section.sh_offset + at, sizeof(relocation));
      if (ELF64_R_SYM(relocation.r_info) >= symbol_count) {
        return "a relocation's symbol is not in its symbol table";
      }
      if (target.sh_size < reach ||
          relocation.r_offset > target.sh_size - reach) {
        return "a relocation's place (r_offset) lies past its section";
      }
    }
  }
  if (header.e_phnum == 0) return NULL;
  if (header.e_phnum == PN_XNUM) {
    return "its program header count (e_phnum) is extended, which halo does "
           "not read";
  }
  if (header.e_phentsize != sizeof(Elf64_Phdr)) {
    return "its program header size (e_phentsize) is not 56";
  }
  if (header.e_phoff > size ||
      (size - header.e_phoff) / sizeof(Elf64_Phdr) < header.e_phnum) {
    return "its program header table (e_phoff, e_phnum) lies past its end";
  }
  for (uint64_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    memcpy(&segment, bytes + header.e_phoff + i * sizeof(segment),
           sizeof(segment));
    if (segment.p_offset > size || segment.p_filesz > size - segment.p_offset) {
      return "a segment's contents lie past its end";
    }
  }
  return NULL;
}

// A FATBIN, as nvcc and fatbinary write it (NVIDIA does not document the
// layout; read off nvcc 13's output, all compress modes): a 16-byte header
// (the magic, a version, the header's size, the size of the entries after
// it), then entries, each a header and its contents. An entry's header, of
// at least 64 bytes (nvcc writes 64 to 168): its kind (16 bits at 0: 1
// PTX, 2 ELF, 0x10 another ELF), the header's size (32 bits at 4), the
// contents' size (64 bits at 8, padded to 8 bytes), the compressed
// stream's size (32 bits at 16), where in the header the place of the
// JIT's options is (32 bits at 20; there an offset and a size, 32 bits
// each), the object's name's offset and length in the header (32 bits
// each at 32 and 36), flags (64 bits at 40) and the size the stream
// decompresses to (64 bits at 56). Offsets count from the entry's start.
// The flags say whether the contents are compressed, and how: LZ4 blocks
// (nvcc 11 and 12, and nvcc 13's --compress-mode speed) or a Zstandard
// frame (nvcc 13's other modes).
#define HALO_HAL_CUDA_FATBIN_MAGIC 0xBA55ED50u
#define HALO_HAL_CUDA_FATBIN_ENTRY_MIN_HEADER 64u
#define HALO_HAL_CUDA_FATBIN_KIND_PTX 1u
#define HALO_HAL_CUDA_FATBIN_KIND_ELF 2u
#define HALO_HAL_CUDA_FATBIN_KIND_ELF_OTHER 0x10u
#define HALO_HAL_CUDA_FATBIN_LZ4 0x2000u
#define HALO_HAL_CUDA_FATBIN_ZSTD 0x8000u
// What a FATBIN's compressed entries may decompress to, all together: 128
// times the FATBIN's size (nvcc 13's entries compress 3-20 times, -G's
// debug images 34 times), at least 64 MiB (an image of zeros compresses
// further), at most 1 GiB (the largest message halod takes), so that a
// small FATBIN cannot make the worker decompress a gigabyte.
#define HALO_HAL_CUDA_FATBIN_EXPANSION 128u
#define HALO_HAL_CUDA_FATBIN_MIN_EXPANDED_BYTES (64ull << 20)
#define HALO_HAL_CUDA_FATBIN_MAX_EXPANDED_BYTES (1ull << 30)

// INVALID_ARGUMENT naming the FATBIN of |size| bytes and what is wrong.
#define HALO_HAL_CUDA_FATBIN_DAMAGED(size, format, ...)                      \
  halo_status_make(HALO_STATUS_INVALID_ARGUMENT,                             \
                   "the FATBIN executable (%llu bytes) is damaged: " format, \
                   (unsigned long long)(size), __VA_ARGS__)

// What a FATBIN's entries are checked with: the decompressed contents
// (reused entry by entry) and the Zstandard context.
typedef struct halo_hal_cuda_fatbin_scratch_t {
  uint8_t *buffer;
  uint64_t capacity;
  ZSTD_DCtx *zstd;
} halo_hal_cuda_fatbin_scratch_t;

// What is wrong with the places entry |entry|'s header (|header_size|
// bytes) gives within itself, or NULL: the JIT's options (the driver
// follows both offsets: wild ones segfaulted libcuda 580) and the
// object's name must lie within the header.
static const char *halo_hal_cuda_fatbin_header_problem(const uint8_t *entry,
                                                       uint32_t header_size) {
  uint32_t options_at = 0, name_at = 0, name_length = 0;
  memcpy(&options_at, entry + 20, sizeof(options_at));
  memcpy(&name_at, entry + 32, sizeof(name_at));
  memcpy(&name_length, entry + 36, sizeof(name_length));
  if (options_at != 0) {
    uint32_t place[2];  // the options' offset and size
    if (options_at > header_size - sizeof(place)) {
      return "the place of its JIT options (at 20) lies past its header";
    }
    memcpy(place, entry + options_at, sizeof(place));
    if (place[0] > header_size || place[1] > header_size - place[0]) {
      return "its JIT options lie past its header";
    }
  }
  if (name_length != 0 &&
      (name_at > header_size || name_length > header_size - name_at)) {
    return "its object's name (at 32, 36) lies past its header";
  }
  return NULL;
}

// Decompresses entry |index|'s |compressed| bytes at |stream| (|method|,
// one of the flags) into |scratch|'s buffer, which must then hold exactly
// |expanded| bytes, the size the entry declares (the driver decompresses
// into that size: a stream that ends short made libcuda 580 fail the load
// with CUDA_ERROR_UNKNOWN). Zstandard: one frame, the whole stream.
static halo_status_t halo_hal_cuda_fatbin_expand(
    uint64_t size, unsigned index, uint64_t method, const uint8_t *stream,
    uint32_t compressed, uint64_t expanded,
    halo_hal_cuda_fatbin_scratch_t *scratch) {
  if (expanded > scratch->capacity || !scratch->buffer) {
    uint8_t *grown = realloc(scratch->buffer, expanded ? expanded : 1);
    if (!grown) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "the FATBIN executable (%llu bytes): no memory "
                              "to decompress entry %u (%llu bytes) for its "
                              "checks",
                              (unsigned long long)size, index,
                              (unsigned long long)expanded);
    }
    scratch->buffer = grown;
    scratch->capacity = expanded;
  }
  const char *name = method == HALO_HAL_CUDA_FATBIN_ZSTD ? "Zstandard" : "LZ4";
  const char *why = "";
  uint64_t got = 0;
  if (method == HALO_HAL_CUDA_FATBIN_ZSTD) {
    if (!scratch->zstd && !(scratch->zstd = ZSTD_createDCtx())) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "the FATBIN executable (%llu bytes): no memory "
                              "for a Zstandard context",
                              (unsigned long long)size);
    }
    size_t frame = ZSTD_findFrameCompressedSize(stream, compressed);
    size_t result = ZSTD_isError(frame)
                        ? frame
                        : ZSTD_decompressDCtx(scratch->zstd, scratch->buffer,
                                              expanded, stream, compressed);
    if (ZSTD_isError(result)) {
      why = ZSTD_getErrorName(result);
    } else if (frame != compressed) {
      why = "more than one frame";
    }
    got = ZSTD_isError(result) ? 0 : result;
  } else {
    // LZ4 takes int sizes; the total's bound keeps |expanded| below
    // INT_MAX.
    int result =
        compressed > INT_MAX
            ? -1
            : LZ4_decompress_safe((const char *)stream, (char *)scratch->buffer,
                                  (int)compressed, (int)expanded);
    if (result < 0) why = "not a whole LZ4 block that fits";
    got = result < 0 ? 0 : (uint64_t)result;
  }
  if (!why[0] && got != expanded) why = "it decompresses to fewer bytes";
  if (why[0]) {
    return HALO_HAL_CUDA_FATBIN_DAMAGED(
        size,
        "entry %u's %s stream (%u bytes) does not decompress to its "
        "declared size (%llu bytes): %s",
        index, name, compressed, (unsigned long long)expanded, why);
  }
  return NULL;
}

// Checks the entries of the FATBIN of |size| bytes at |bytes|: every entry
// lies within the bytes, and the places its header gives within itself
// within the header; a compressed one's stream lies within its contents
// and decompresses to its declared size (all of them together within the
// expansion's bound); each ELF entry, compressed or not, is an ELF image
// that passes halo_hal_cuda_elf_problem; each PTX entry's text ends within
// it (a NUL).
static halo_status_t halo_hal_cuda_fatbin_check(const uint8_t *bytes,
                                                uint64_t size) {
  uint16_t header_size = 0;
  uint64_t entries_size = 0;
  memcpy(&header_size, bytes + 6, sizeof(header_size));
  memcpy(&entries_size, bytes + 8, sizeof(entries_size));
  if (header_size < 16 || header_size > size) {
    return HALO_HAL_CUDA_FATBIN_DAMAGED(
        size, "its header's size (%u) is not within it", header_size);
  }
  if (entries_size > size - header_size) {
    return HALO_HAL_CUDA_FATBIN_DAMAGED(size,
                                        "its entries (%llu bytes) lie past "
                                        "its end",
                                        (unsigned long long)entries_size);
  }
  uint64_t expansion_bound = HALO_HAL_CUDA_FATBIN_MAX_EXPANDED_BYTES;
  if (size < expansion_bound / HALO_HAL_CUDA_FATBIN_EXPANSION) {
    expansion_bound = size * HALO_HAL_CUDA_FATBIN_EXPANSION;
    if (expansion_bound < HALO_HAL_CUDA_FATBIN_MIN_EXPANDED_BYTES) {
      expansion_bound = HALO_HAL_CUDA_FATBIN_MIN_EXPANDED_BYTES;
    }
  }
  uint64_t end = header_size + entries_size;
  uint64_t offset = header_size;
  uint64_t expanded_total = 0;
  halo_hal_cuda_fatbin_scratch_t scratch = {0};
  halo_status_t status = NULL;
  for (unsigned index = 0; offset < end; ++index) {
    if (end - offset < HALO_HAL_CUDA_FATBIN_ENTRY_MIN_HEADER) {
      status = HALO_HAL_CUDA_FATBIN_DAMAGED(
          size, "entry %u's header lies past its entries' end", index);
      break;
    }
    uint16_t kind = 0;
    uint32_t entry_header_size = 0, compressed = 0;
    uint64_t contents_size = 0, flags = 0, expanded = 0;
    const uint8_t *entry = bytes + offset;
    memcpy(&kind, entry, sizeof(kind));
    memcpy(&entry_header_size, entry + 4, sizeof(entry_header_size));
    memcpy(&contents_size, entry + 8, sizeof(contents_size));
    memcpy(&compressed, entry + 16, sizeof(compressed));
    memcpy(&flags, entry + 40, sizeof(flags));
    memcpy(&expanded, entry + 56, sizeof(expanded));
    if (entry_header_size < HALO_HAL_CUDA_FATBIN_ENTRY_MIN_HEADER ||
        entry_header_size > end - offset) {
      status = HALO_HAL_CUDA_FATBIN_DAMAGED(
          size, "entry %u's header (%u bytes) is not within its entries", index,
          entry_header_size);
      break;
    }
    const char *problem =
        halo_hal_cuda_fatbin_header_problem(entry, entry_header_size);
    if (problem) {
      status = HALO_HAL_CUDA_FATBIN_DAMAGED(size, "entry %u's header: %s",
                                            index, problem);
      break;
    }
    if (contents_size > end - offset - entry_header_size) {
      status = HALO_HAL_CUDA_FATBIN_DAMAGED(
          size, "entry %u's contents (%llu bytes) lie past its entries' end",
          index, (unsigned long long)contents_size);
      break;
    }
    const uint8_t *contents = entry + entry_header_size;
    const uint8_t *image = contents;
    uint64_t image_size = contents_size;
    uint64_t method =
        flags & (HALO_HAL_CUDA_FATBIN_LZ4 | HALO_HAL_CUDA_FATBIN_ZSTD);
    if (method == (HALO_HAL_CUDA_FATBIN_LZ4 | HALO_HAL_CUDA_FATBIN_ZSTD)) {
      status = HALO_HAL_CUDA_FATBIN_DAMAGED(
          size, "entry %u is flagged compressed both as LZ4 and Zstandard",
          index);
      break;
    }
    if (method) {
      if (compressed > contents_size) {
        status = HALO_HAL_CUDA_FATBIN_DAMAGED(
            size,
            "entry %u's compressed stream (%u bytes) lies past its contents "
            "(%llu bytes)",
            index, compressed, (unsigned long long)contents_size);
        break;
      }
      if (expanded > expansion_bound - expanded_total) {
        status = HALO_HAL_CUDA_FATBIN_DAMAGED(
            size,
            "entry %u's declared uncompressed size (%llu bytes) takes its "
            "compressed entries past %llu bytes (128 times its size, at "
            "least 64 MiB, at most 1 GiB)",
            index, (unsigned long long)expanded,
            (unsigned long long)expansion_bound);
        break;
      }
      expanded_total += expanded;
      status = halo_hal_cuda_fatbin_expand(size, index, method, contents,
                                           compressed, expanded, &scratch);
      if (status) break;
      image = scratch.buffer;
      image_size = expanded;
    }
    const char *compressed_word = method ? "compressed " : "";
    if (kind == HALO_HAL_CUDA_FATBIN_KIND_ELF ||
        kind == HALO_HAL_CUDA_FATBIN_KIND_ELF_OTHER) {
      problem = halo_hal_cuda_elf_problem(image, image_size);
      if (problem) {
        status =
            HALO_HAL_CUDA_FATBIN_DAMAGED(size, "entry %u's %sELF image: %s",
                                         index, compressed_word, problem);
        break;
      }
    } else if (kind == HALO_HAL_CUDA_FATBIN_KIND_PTX &&
               !memchr(image, '\0', image_size)) {
      status = HALO_HAL_CUDA_FATBIN_DAMAGED(
          size, "entry %u's %sPTX text does not end within it (no NUL)", index,
          compressed_word);
      break;
    }
    offset += entry_header_size + contents_size;
  }
  free(scratch.buffer);
  ZSTD_freeDCtx(scratch.zstd);
  return status;
}

// The driver takes anything that parses as PTX text in place of a CUBIN
// (and has loaded arbitrary bytes as an empty image), so a client's
// mislabelled or damaged binary is refused here: a CUBIN is an ELF image
// that passes halo_hal_cuda_elf_problem, a FATBIN starts with the fatbin
// magic and passes halo_hal_cuda_fatbin_check.
halo_status_t halo_hal_cuda_image_check(
    const halo_hal_executable_params_t *params) {
  const uint8_t *bytes = params->data;
  if (params->format == HALO_HAL_EXECUTABLE_FORMAT_CUBIN) {
    if (params->size < SELFMAG || memcmp(bytes, ELFMAG, SELFMAG) != 0) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "the CUBIN executable (%llu bytes) is not an "
                              "ELF image (no ELF magic); pass PTX text as "
                              "format PTX",
                              (unsigned long long)params->size);
    }
    const char *problem = halo_hal_cuda_elf_problem(bytes, params->size);
    if (problem) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "the CUBIN executable (%llu bytes) is a damaged "
                              "ELF image: %s",
                              (unsigned long long)params->size, problem);
    }
    return NULL;
  }
  uint32_t magic = 0;
  if (params->size >= sizeof(magic)) memcpy(&magic, bytes, sizeof(magic));
  if (params->size < 16 || magic != HALO_HAL_CUDA_FATBIN_MAGIC) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the FATBIN executable (%llu bytes) does not start "
                            "with the fatbin magic 0x%08x",
                            (unsigned long long)params->size,
                            HALO_HAL_CUDA_FATBIN_MAGIC);
  }
  return halo_hal_cuda_fatbin_check(bytes, params->size);
}
