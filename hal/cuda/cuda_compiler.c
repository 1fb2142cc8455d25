// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// From what a client sends to what the loader takes (cuda_device.h,
// halo_hal_cuda_compiler_build): CUDA C through NVRTC and PTX through the
// driver's JIT linker (cuLink*), both to a CUBIN for the device's
// architecture, cached on disk so that a restart or a second client skips
// the compile (NVRTC ~20 ms, PTX JIT ~100 ms: docs/performance.md "CUDA driver
// (H100)").
//
// Disk cache: <cache_directory>/kernels/<key>.cubin, key = BLAKE2b-256 of
// the format, the bytes, the options, the GPU architecture, the driver's
// version and NVRTC's. Each file starts with a header holding the hash of
// its payload, checked on every read: a torn or corrupted file is a miss
// (and is replaced), never a bad load. Files are written to a temporary
// name and renamed, so readers never see a partial file; two daemons (or
// threads) compiling the same key both write and the last rename wins.
//
// Thread-safety: thread-safe; the caller has the device's context current.
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "hal/cuda/cuda_device.h"

// A cache file: the magic, the key it was stored under (a file copied or
// renamed onto another key's name is no hit there), the payload's hash,
// the payload. v1 files (no key) are replaced as they are met.
#define HALO_HAL_CUDA_CACHE_MAGIC "halo-cubin-v2\n\0\0"  // 16 bytes
#define HALO_HAL_CUDA_CACHE_MAGIC_V1 "halo-cubin-v1\n\0\0"
#define HALO_HAL_CUDA_CACHE_HEADER_BYTES (16 + 2 * HALO_HASH_BYTES)
#define HALO_HAL_CUDA_JIT_LOG_BYTES (64u * 1024)

halo_status_t halo_hal_cuda_make_directory(const char *path) {
  char copy[1024];
  if (snprintf(copy, sizeof(copy), "%s", path) >= (int)sizeof(copy)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "directory path too long: %s", path);
  }
  for (char *slash = copy + 1; *slash; ++slash) {
    if (*slash != '/') continue;
    *slash = '\0';
    if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
      return halo_status_from_errno(errno, "mkdir %s", copy);
    }
    *slash = '/';
  }
  if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
    return halo_status_from_errno(errno, "mkdir %s", copy);
  }
  return NULL;
}

static const char *halo_hal_cuda_format_name(uint32_t format) {
  switch (format) {
    case HALO_HAL_EXECUTABLE_FORMAT_PTX:
      return "PTX";
    case HALO_HAL_EXECUTABLE_FORMAT_CUBIN:
      return "CUBIN";
    case HALO_HAL_EXECUTABLE_FORMAT_FATBIN:
      return "FATBIN";
    case HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE:
      return "CUDA source";
    case HALO_HAL_EXECUTABLE_FORMAT_ELF:
      return "ELF";
    default:
      return "unknown";
  }
}

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
// |bytes|, or NULL. The driver reads it without knowing the size, and
// indices and offsets that point outside the image crashed it (libcuda 580
// segfaulted in cuModuleLoadData on an e_shentsize of 0, an e_shstrndx of
// 0xffff, a symbol's st_shndx or an sh_info of 0xfeff, and a relocation's
// offset past its section). So: a 64-bit little-endian image for EM_CUDA,
// executable or relocatable (both load), whose header, section and program
// tables, and every section's and segment's contents lie within the bytes;
// a section name table and the string tables of its symbol tables that are
// string tables within the bytes, ending in a NUL, with every name in
// them; symbols in sections that exist; sh_info links (SHF_INFO_LINK) to
// sections that exist; relocation tables that name symbols that exist and
// places within their sections (8 bytes, or an instruction's 16 in code).
// Symbol and relocation tables are read once over (their bytes together no
// more than the image's), so a check takes time linear in the size. What
// the sections hold beyond that (NVIDIA's own sections) is the driver's to
// read.
static const char *halo_hal_cuda_elf_problem(const uint8_t *bytes,
                                             uint64_t size) {
  Elf64_Ehdr header;
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
// layout): a 16-byte header (the magic, a version, the header's size, the
// size of the entries after it), then entries, each a header (its
// kind, 1 PTX or 2 ELF, a version, the header's size, the contents' size,
// then fields halo does not read) and its contents. What is wrong with the
// FATBIN of |size| bytes at |bytes| (written to |out_problem|), or false:
// the driver reads it without knowing the size, so every entry must lie
// within the bytes, and each uncompressed ELF image inside must pass
// halo_hal_cuda_elf_problem. Compressed images are the driver's to read.
static bool halo_hal_cuda_fatbin_problem(const uint8_t *bytes, uint64_t size,
                                         char *out_problem, size_t capacity) {
  uint16_t header_size = 0;
  uint64_t entries_size = 0;
  memcpy(&header_size, bytes + 6, sizeof(header_size));
  memcpy(&entries_size, bytes + 8, sizeof(entries_size));
  if (header_size < 16 || header_size > size) {
    snprintf(out_problem, capacity, "its header's size (%u) is not within it",
             header_size);
    return true;
  }
  if (entries_size > size - header_size) {
    snprintf(out_problem, capacity, "its entries (%llu bytes) lie past its end",
             (unsigned long long)entries_size);
    return true;
  }
  uint64_t end = header_size + entries_size;
  uint64_t offset = header_size;
  for (unsigned index = 0; offset < end; ++index) {
    if (end - offset < 16) {
      snprintf(out_problem, capacity,
               "entry %u's header lies past its entries' end", index);
      return true;
    }
    uint16_t kind = 0;
    uint32_t entry_header_size = 0;
    uint64_t contents_size = 0;
    memcpy(&kind, bytes + offset, sizeof(kind));
    memcpy(&entry_header_size, bytes + offset + 4, sizeof(entry_header_size));
    memcpy(&contents_size, bytes + offset + 8, sizeof(contents_size));
    if (entry_header_size < 16 || entry_header_size > end - offset) {
      snprintf(out_problem, capacity,
               "entry %u's header (%u bytes) is not within its entries", index,
               entry_header_size);
      return true;
    }
    if (contents_size > end - offset - entry_header_size) {
      snprintf(out_problem, capacity,
               "entry %u's contents (%llu bytes) lie past its entries' end",
               index, (unsigned long long)contents_size);
      return true;
    }
    const uint8_t *contents = bytes + offset + entry_header_size;
    if (kind == 2 && contents_size >= 4 &&
        memcmp(contents,
               "\x7f"
               "ELF",
               4) == 0) {
      const char *problem = halo_hal_cuda_elf_problem(contents, contents_size);
      if (problem) {
        snprintf(out_problem, capacity, "entry %u's ELF image: %s", index,
                 problem);
        return true;
      }
    }
    offset += entry_header_size + contents_size;
  }
  return false;
}

// The driver takes anything that parses as PTX text in place of a CUBIN
// (and has loaded arbitrary bytes as an empty image), so a client's
// mislabelled or damaged binary is refused here: a CUBIN is an ELF image
// that passes halo_hal_cuda_elf_problem, a FATBIN starts with the fatbin
// magic and passes halo_hal_cuda_fatbin_problem.
#define HALO_HAL_CUDA_FATBIN_MAGIC 0xBA55ED50u
static halo_status_t halo_hal_cuda_check_binary_header(
    const halo_hal_executable_params_t *params) {
  const uint8_t *bytes = params->data;
  if (params->format == HALO_HAL_EXECUTABLE_FORMAT_CUBIN) {
    if (params->size < 4 || memcmp(bytes,
                                   "\x7f"
                                   "ELF",
                                   4) != 0) {
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
  char problem[160];
  if (halo_hal_cuda_fatbin_problem(bytes, params->size, problem,
                                   sizeof(problem))) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the FATBIN executable (%llu bytes) is damaged: %s",
                            (unsigned long long)params->size, problem);
  }
  return NULL;
}

//===----------------------------------------------------------------------===//
// Disk cache
//===----------------------------------------------------------------------===//

typedef struct halo_hal_cuda_cache_key_t {
  char path[1024];   // "" when there is no cache directory
  halo_hash_t hash;  // the path's name
} halo_hal_cuda_cache_key_t;

static void halo_hal_cuda_cache_key(halo_hal_cuda_device_t *device,
                                    const halo_hal_executable_params_t *params,
                                    halo_hal_cuda_cache_key_t *out_key) {
  out_key->path[0] = '\0';
  if (!device->options.cache_directory[0]) return;
  halo_hasher_t hasher;
  halo_hasher_initialize(&hasher);
  static const char kDomain[] = "halo cuda compiled code v1";
  halo_hasher_update_bytes(&hasher, kDomain, sizeof(kDomain) - 1);
  halo_hasher_update_u64(&hasher, params->format);
  halo_hasher_update_bytes(&hasher, params->data, (size_t)params->size);
  halo_hasher_update_u64(&hasher, params->option_count);
  for (uint32_t i = 0; i < params->option_count; ++i) {
    halo_hasher_update_bytes(&hasher, params->options[i],
                             strlen(params->options[i]));
  }
  halo_hasher_update_u64(&hasher, (uint64_t)device->arch);
  halo_hasher_update_u64(&hasher, (uint64_t)device->cu->driver_version);
  if (params->format == HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE &&
      device->nvrtc) {
    halo_hasher_update_u64(&hasher, (uint64_t)device->nvrtc->major);
    halo_hasher_update_u64(&hasher, (uint64_t)device->nvrtc->minor);
  }
  halo_hasher_finalize(&hasher, &out_key->hash);
  char text[65];
  halo_hash_format(&out_key->hash, text);
  snprintf(out_key->path, sizeof(out_key->path), "%s/kernels/%s.cubin",
           device->options.cache_directory, text);
}

static void halo_hal_cuda_payload_hash(const void *data, size_t size,
                                       halo_hash_t *out_hash) {
  halo_hasher_t hasher;
  halo_hasher_initialize(&hasher);
  halo_hasher_update_bytes(&hasher, data, size);
  halo_hasher_finalize(&hasher, out_hash);
}

// A hit fills |out_image|; a miss (or a bad file, which is removed) leaves
// it empty. Never fails: the cache is an optimization.
static void halo_hal_cuda_cache_read(const halo_hal_cuda_cache_key_t *key,
                                     halo_hal_cuda_image_t *out_image) {
  if (!key->path[0]) return;
  // Non-blocking: a FIFO in the file's place must not hold the load.
  int fd = open(key->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  struct stat info;
  if (fstat(fd, &info) != 0) {
    close(fd);
    return;  // a miss
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    // The compile's write replaces a FIFO or socket; not a directory.
    HALO_LOG_WARN("cuda cache: %s is not a regular file; compiling instead%s",
                  key->path,
                  S_ISDIR(info.st_mode) ? " (a directory: remove it)" : "");
    return;
  }
  uint8_t *bytes = NULL;
  size_t size = (size_t)info.st_size;
  bool good = info.st_size > HALO_HAL_CUDA_CACHE_HEADER_BYTES &&
              info.st_size < (1ll << 31);
  if (good) {
    bytes = malloc(size);
    if (!bytes) {  // out of memory: a miss, the file is not to blame
      close(fd);
      return;
    }
  }
  size_t done = 0;
  while (good && done < size) {
    ssize_t n = read(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      good = false;
      break;
    }
    done += (size_t)n;
  }
  close(fd);
  const char *why = "damaged";
  if (good && memcmp(bytes, HALO_HAL_CUDA_CACHE_MAGIC, 16) != 0) {
    good = false;
    if (memcmp(bytes, HALO_HAL_CUDA_CACHE_MAGIC_V1, 16) == 0) {
      why = "of an older halo (v1)";
    }
  }
  if (good && memcmp(bytes + 16, key->hash.bytes, HALO_HASH_BYTES) != 0) {
    good = false;
    why = "another key's (copied or renamed there)";
  }
  if (good) {
    halo_hash_t hash;
    halo_hal_cuda_payload_hash(bytes + HALO_HAL_CUDA_CACHE_HEADER_BYTES,
                               size - HALO_HAL_CUDA_CACHE_HEADER_BYTES, &hash);
    good =
        memcmp(bytes + 16 + HALO_HASH_BYTES, hash.bytes, HALO_HASH_BYTES) == 0;
  }
  if (good) {
    // The loader takes no size: what it is given must be a CUBIN by its
    // header (bytes it took for PTX text would be read to a NUL).
    halo_hal_executable_params_t payload = {
        .format = HALO_HAL_EXECUTABLE_FORMAT_CUBIN,
        .data = bytes + HALO_HAL_CUDA_CACHE_HEADER_BYTES,
        .size = size - HALO_HAL_CUDA_CACHE_HEADER_BYTES};
    halo_status_t status = halo_hal_cuda_check_binary_header(&payload);
    if (status) {
      halo_status_free(status);
      good = false;
      why = "no CUBIN";
    }
  }
  if (!good) {
    free(bytes);
    HALO_LOG_WARN("cuda cache: %s is %s; removing it", key->path, why);
    unlink(key->path);
    return;
  }
  out_image->owned = bytes;
  out_image->data = bytes + HALO_HAL_CUDA_CACHE_HEADER_BYTES;
  out_image->size = size - HALO_HAL_CUDA_CACHE_HEADER_BYTES;
  out_image->from_disk_cache = true;
  out_image->compiled = true;
}

static bool halo_hal_cuda_write_all(int fd, const void *data, size_t size) {
  const uint8_t *bytes = data;
  while (size > 0) {
    ssize_t n = write(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= (size_t)n;
  }
  return true;
}

// Best effort: a failure is logged, the compiled code is used anyway.
static void halo_hal_cuda_cache_write(const halo_hal_cuda_cache_key_t *key,
                                      const void *data, size_t size) {
  if (!key->path[0]) return;
  char directory[1024];
  snprintf(directory, sizeof(directory), "%s", key->path);
  char *slash = strrchr(directory, '/');
  if (slash) *slash = '\0';
  halo_status_t status = halo_hal_cuda_make_directory(directory);
  char temporary[1100];
  snprintf(temporary, sizeof(temporary), "%s.tmp.%d.%lu", key->path,
           (int)getpid(), (unsigned long)pthread_self());
  int fd = -1;
  if (!status) {
    fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) status = halo_status_from_errno(errno, "open %s", temporary);
  }
  if (!status) {
    uint8_t header[HALO_HAL_CUDA_CACHE_HEADER_BYTES];
    memcpy(header, HALO_HAL_CUDA_CACHE_MAGIC, 16);
    memcpy(header + 16, key->hash.bytes, HALO_HASH_BYTES);
    halo_hash_t hash;
    halo_hal_cuda_payload_hash(data, size, &hash);
    memcpy(header + 16 + HALO_HASH_BYTES, hash.bytes, HALO_HASH_BYTES);
    if (!halo_hal_cuda_write_all(fd, header, sizeof(header)) ||
        !halo_hal_cuda_write_all(fd, data, size)) {
      status =
          halo_status_from_errno(errno ? errno : EIO, "write %s", temporary);
    }
  }
  if (fd >= 0 && close(fd) != 0 && !status) {
    status = halo_status_from_errno(errno, "close %s", temporary);
  }
  if (!status && rename(temporary, key->path) != 0) {
    status = halo_status_from_errno(errno, "rename to %s", key->path);
  }
  if (status) {
    if (fd >= 0) unlink(temporary);
    HALO_LOG_WARN("cuda cache: not stored: %s", halo_status_message(status));
    halo_status_free(status);
  }
}

//===----------------------------------------------------------------------===//
// PTX: the driver's JIT linker
//===----------------------------------------------------------------------===//

// The PTX options halo understands, as JIT options.
static halo_status_t halo_hal_cuda_ptx_options(
    const halo_hal_executable_params_t *params, CUjit_option *options,
    void **values, unsigned *count) {
  for (uint32_t i = 0; i < params->option_count; ++i) {
    const char *option = params->options[i];
    unsigned value = 0;
    char tail = 0;
    if (sscanf(option, "--maxrregcount=%u%c", &value, &tail) == 1) {
      options[*count] = CU_JIT_MAX_REGISTERS;
    } else if ((sscanf(option, "-O%u%c", &value, &tail) == 1 ||
                sscanf(option, "--opt-level=%u%c", &value, &tail) == 1) &&
               value <= 4) {
      options[*count] = CU_JIT_OPTIMIZATION_LEVEL;
    } else if (strcmp(option, "-lineinfo") == 0 ||
               strcmp(option, "--generate-line-info") == 0) {
      options[*count] = CU_JIT_GENERATE_LINE_INFO;
      value = 1;
    } else {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "PTX option '%s' is not supported (PTX takes "
                              "-O<0-4>, --maxrregcount=N, -lineinfo)",
                              option);
    }
    values[*count] = (void *)(uintptr_t)value;
    ++*count;
  }
  return NULL;
}

static halo_status_t halo_hal_cuda_ptx_link(
    halo_hal_cuda_device_t *device, const halo_hal_executable_params_t *params,
    halo_hal_cuda_image_t *out_image) {
  const halo_hal_cuda_symbols_t *cu = device->cu;
  CUjit_option options[8 + HALO_HAL_MAX_PARAMS];
  void *values[8 + HALO_HAL_MAX_PARAMS];
  unsigned count = 0;
  if (params->option_count > HALO_HAL_MAX_PARAMS) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%u PTX options (at most %d)", params->option_count,
                            HALO_HAL_MAX_PARAMS);
  }
  char *log = calloc(1, HALO_HAL_CUDA_JIT_LOG_BYTES);
  // PTX must end with a NUL for the linker.
  char *ptx = malloc((size_t)params->size + 1);
  if (!log || !ptx) {
    free(log);
    free(ptx);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  memcpy(ptx, params->data, (size_t)params->size);
  ptx[params->size] = '\0';
  options[count] = CU_JIT_ERROR_LOG_BUFFER;
  values[count++] = log;
  options[count] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
  values[count++] = (void *)(uintptr_t)HALO_HAL_CUDA_JIT_LOG_BYTES;
  halo_status_t status =
      halo_hal_cuda_ptx_options(params, options, values, &count);
  CUlinkState link = NULL;
  const char *call = "cuLinkCreate";
  CUresult result = CUDA_SUCCESS;
  if (!status) result = cu->cuLinkCreate(count, options, values, &link);
  if (!status && result == CUDA_SUCCESS) {
    call = "cuLinkAddData";
    result =
        cu->cuLinkAddData(link, CU_JIT_INPUT_PTX, ptx, (size_t)params->size + 1,
                          "halo.ptx", 0, NULL, NULL);
  }
  void *cubin = NULL;
  size_t cubin_size = 0;
  if (!status && result == CUDA_SUCCESS) {
    call = "cuLinkComplete";
    result = cu->cuLinkComplete(link, &cubin, &cubin_size);
  }
  if (!status && result != CUDA_SUCCESS) {
    status = halo_hal_cuda_result_to_status(cu, result, call);
    if (log[0]) {
      status = halo_status_annotate(
          status, "PTX JIT for sm_%d failed; the JIT log:\n%s\n", device->arch,
          log);
    }
    if (halo_status_code(status) == HALO_STATUS_INTERNAL) {
      // Whatever the driver says, bad PTX is the client's input.
      halo_status_t wrapped = halo_status_make(
          HALO_STATUS_INVALID_ARGUMENT, "%s", halo_status_message(status));
      halo_status_free(status);
      status = wrapped;
    }
  }
  if (!status) {
    void *copy = malloc(cubin_size ? cubin_size : 1);
    if (!copy) {
      status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    } else {
      memcpy(copy, cubin, cubin_size);
      out_image->owned = copy;
      out_image->data = copy;
      out_image->size = cubin_size;
      out_image->compiled = true;
    }
  }
  if (link) cu->cuLinkDestroy(link);
  free(ptx);
  free(log);
  return status;
}

//===----------------------------------------------------------------------===//
// halo_hal_cuda_compiler_build
//===----------------------------------------------------------------------===//

halo_status_t halo_hal_cuda_compiler_build(
    halo_hal_cuda_device_t *device, const halo_hal_executable_params_t *params,
    halo_hal_cuda_image_t *out_image) {
  memset(out_image, 0, sizeof(*out_image));
  const char *format_name = halo_hal_cuda_format_name(params->format);
  if (!params->data || params->size == 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the %s executable is empty", format_name);
  }
  switch (params->format) {
    case HALO_HAL_EXECUTABLE_FORMAT_CUBIN:
    case HALO_HAL_EXECUTABLE_FORMAT_FATBIN:
      if (params->option_count > 0) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "%s executables take no options ('%s' given); "
                                "options apply to PTX and CUDA source",
                                format_name, params->options[0]);
      }
      HALO_RETURN_IF_ERROR(halo_hal_cuda_check_binary_header(params));
      out_image->data = params->data;
      out_image->size = (size_t)params->size;
      return NULL;
    case HALO_HAL_EXECUTABLE_FORMAT_PTX:
    case HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE:
      break;
    default:
      return halo_status_make(HALO_STATUS_UNIMPLEMENTED,
                              "the CUDA driver cannot load %s executables "
                              "(format %u); it takes PTX, CUBIN, FATBIN and "
                              "CUDA source",
                              format_name, params->format);
  }
  HALO_RETURN_IF_ERROR(halo_hash_library_initialize());
  halo_hal_cuda_cache_key_t key;
  halo_hal_cuda_cache_key(device, params, &key);
  halo_hal_cuda_cache_read(&key, out_image);
  if (out_image->data) return NULL;
  halo_status_t status =
      params->format == HALO_HAL_EXECUTABLE_FORMAT_PTX
          ? halo_hal_cuda_ptx_link(device, params, out_image)
          : halo_hal_cuda_nvrtc_compile(device, params, out_image);
  if (status) {
    return halo_status_annotate(status, "CUDA device %u: %s of %llu bytes",
                                device->ordinal, format_name,
                                (unsigned long long)params->size);
  }
  halo_hal_cuda_cache_write(&key, out_image->data, out_image->size);
  return NULL;
}

void halo_hal_cuda_compiler_forget(halo_hal_cuda_device_t *device,
                                   const halo_hal_executable_params_t *params) {
  halo_hal_cuda_cache_key_t key;
  halo_hal_cuda_cache_key(device, params, &key);
  if (!key.path[0]) return;
  if (unlink(key.path) != 0 && errno != ENOENT) {
    HALO_LOG_WARN("cuda cache: removing %s: %s", key.path, strerror(errno));
  }
}
