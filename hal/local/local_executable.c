// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Local executables: a client's ELF shared object, copied into a sealed
// memfd (the daemon's own copy: the client cannot change the bytes after
// the check) and dlopen'ed from /proc/self/fd/N.
//
// The memfd stays open as long as the object is loaded. glibc matches
// dlopen names against loaded objects before it opens the file, so closing
// the descriptor right after dlopen would let the next executable reuse the
// number, and dlopen("/proc/self/fd/N") would hand back the earlier object
// instead of loading the new bytes. Holding the descriptor reserves the
// name; an object that outlives dlclose (DF_1_NODELETE, unique symbols)
// still holds its name, which the RTLD_NOLOAD probe below detects.
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/status.h"
#include "hal/local/local_device.h"

typedef struct halo_hal_local_executable_entry_t {
  char *name;
  halo_hal_local_entry_fn function;
  // HALO_LOCAL_KERNEL_PARAMS, or NULL: the parameters are unknown.
  const halo_local_kernel_params_t *params;
} halo_hal_local_executable_entry_t;

typedef struct halo_hal_local_executable_t {
  halo_hal_executable_t base;
  void *handle;  // dlopen
  int fd;        // the memfd the object was loaded from (reserves its name)
  struct link_map *link_map;
  pthread_mutex_t mutex;  // guards the entry table
  halo_hal_local_executable_entry_t *entries;
  uint32_t entry_count;
  uint32_t entry_capacity;
} halo_hal_local_executable_t;

static const halo_hal_executable_vtable_t halo_hal_local_executable_vtable;

#if defined(__x86_64__)
#define HALO_HAL_LOCAL_ELF_MACHINE EM_X86_64
#define HALO_HAL_LOCAL_ELF_MACHINE_NAME "x86-64"
#elif defined(__aarch64__)
#define HALO_HAL_LOCAL_ELF_MACHINE EM_AARCH64
#define HALO_HAL_LOCAL_ELF_MACHINE_NAME "AArch64"
#elif defined(__riscv) && __riscv_xlen == 64
#define HALO_HAL_LOCAL_ELF_MACHINE EM_RISCV
#define HALO_HAL_LOCAL_ELF_MACHINE_NAME "RISC-V"
#elif defined(__powerpc64__)
#define HALO_HAL_LOCAL_ELF_MACHINE EM_PPC64
#define HALO_HAL_LOCAL_ELF_MACHINE_NAME "PowerPC64"
#elif defined(__s390x__)
#define HALO_HAL_LOCAL_ELF_MACHINE EM_S390
#define HALO_HAL_LOCAL_ELF_MACHINE_NAME "s390x"
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HALO_HAL_LOCAL_ELF_DATA ELFDATA2LSB
#else
#define HALO_HAL_LOCAL_ELF_DATA ELFDATA2MSB
#endif

// Rejects what is plainly not a shared object for this host before the
// dynamic loader sees it (its messages for these cases are obscure).
static halo_status_t halo_hal_local_executable_check_elf(const void *data,
                                                         uint64_t size) {
  if (!data || size < sizeof(Elf64_Ehdr)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "local executable: %llu bytes is too short for "
                            "an ELF header (%zu bytes)",
                            (unsigned long long)size, sizeof(Elf64_Ehdr));
  }
  Elf64_Ehdr header;
  memcpy(&header, data, sizeof(header));
  if (memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "local executable: not an ELF file (bad magic "
                            "%02x %02x %02x %02x); the local driver takes "
                            "ELF shared objects",
                            header.e_ident[0], header.e_ident[1],
                            header.e_ident[2], header.e_ident[3]);
  }
  if (header.e_ident[EI_CLASS] != ELFCLASS64) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "local executable: ELF class %u, the local "
                            "driver takes 64-bit objects",
                            header.e_ident[EI_CLASS]);
  }
  if (header.e_ident[EI_DATA] != HALO_HAL_LOCAL_ELF_DATA) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "local executable: byte order %u does not match "
                            "the host's",
                            header.e_ident[EI_DATA]);
  }
#ifdef HALO_HAL_LOCAL_ELF_MACHINE
  if (header.e_machine != HALO_HAL_LOCAL_ELF_MACHINE) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "local executable: built for ELF machine %u, "
                            "this host is " HALO_HAL_LOCAL_ELF_MACHINE_NAME
                            " (machine %u)",
                            header.e_machine, HALO_HAL_LOCAL_ELF_MACHINE);
  }
#endif
  if (header.e_type != ET_DYN) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "local executable: ELF type %u is not a shared "
                            "object (build it with -shared -fPIC)",
                            header.e_type);
  }
  return NULL;
}

// Copies |data| into a memfd sealed against every change.
static halo_status_t halo_hal_local_executable_copy(const void *data,
                                                    uint64_t size,
                                                    int *out_fd) {
  *out_fd = -1;
  int fd =
      memfd_create("halo-local-executable", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return halo_status_from_errno(errno, "local executable: memfd_create");
  }
  const uint8_t *bytes = data;
  uint64_t written = 0;
  while (written < size) {
    ssize_t n = write(fd, bytes + written, (size_t)(size - written));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int error = n < 0 ? errno : EIO;
      close(fd);
      return halo_status_from_errno(
          error, "local executable: writing %llu bytes to its memfd",
          (unsigned long long)size);
    }
    written += (uint64_t)n;
  }
  if (fcntl(fd, F_ADD_SEALS,
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    int error = errno;
    close(fd);
    return halo_status_from_errno(error, "local executable: sealing its memfd");
  }
  *out_fd = fd;
  return NULL;
}

// Gives |*fd| a number no loaded object is named after (see the top).
static halo_status_t halo_hal_local_executable_reserve_name(int *fd, char *path,
                                                            size_t path_size) {
  int stale[16];
  int stale_count = 0;
  halo_status_t status = NULL;
  for (;;) {
    snprintf(path, path_size, "/proc/self/fd/%d", *fd);
    void *loaded = dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!loaded) break;
    dlclose(loaded);
    if (stale_count == (int)(sizeof(stale) / sizeof(stale[0]))) {
      status = halo_status_make(HALO_STATUS_INTERNAL,
                                "local executable: no free name to load it "
                                "under (%s and %d more are held by objects "
                                "that were never unloaded)",
                                path, stale_count);
      break;
    }
    // Keep the taken number open so that the duplicate gets another one.
    int moved = fcntl(*fd, F_DUPFD_CLOEXEC, 0);
    if (moved < 0) {
      status = halo_status_from_errno(errno, "local executable: dup");
      break;
    }
    stale[stale_count++] = *fd;
    *fd = moved;
  }
  for (int i = 0; i < stale_count; ++i) close(stale[i]);
  return status;
}

halo_status_t halo_hal_local_executable_create(
    const halo_hal_executable_params_t *params,
    halo_hal_executable_t **out_executable) {
  *out_executable = NULL;
  if (params->format != HALO_HAL_EXECUTABLE_FORMAT_ELF) {
    static const char *const names[] = {
        [HALO_HAL_EXECUTABLE_FORMAT_PTX] = "PTX",
        [HALO_HAL_EXECUTABLE_FORMAT_CUBIN] = "CUBIN",
        [HALO_HAL_EXECUTABLE_FORMAT_FATBIN] = "FATBIN",
        [HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE] = "CUDA source",
    };
    const char *name = params->format < sizeof(names) / sizeof(names[0]) &&
                               names[params->format]
                           ? names[params->format]
                           : "unknown";
    return halo_status_make(HALO_STATUS_UNIMPLEMENTED,
                            "the local driver cannot load %s executables "
                            "(format %u); it takes ELF shared objects",
                            name, params->format);
  }
  HALO_RETURN_IF_ERROR(
      halo_hal_local_executable_check_elf(params->data, params->size));

  halo_hal_local_executable_t *executable = calloc(1, sizeof(*executable));
  if (!executable) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  executable->base.vtable = &halo_hal_local_executable_vtable;
  executable->fd = -1;
  pthread_mutex_init(&executable->mutex, NULL);

  char path[64];
  halo_status_t status = halo_hal_local_executable_copy(
      params->data, params->size, &executable->fd);
  if (!status) {
    status = halo_hal_local_executable_reserve_name(&executable->fd, path,
                                                    sizeof(path));
  }
  if (!status) {
    dlerror();  // clear
    executable->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!executable->handle) {
      const char *error = dlerror();
      status = halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "local executable: the dynamic loader "
                                "refused it: %s",
                                error ? error : "(no reason given)");
    }
  }
  if (!status &&
      dlinfo(executable->handle, RTLD_DI_LINKMAP, &executable->link_map) != 0) {
    const char *error = dlerror();
    status =
        halo_status_make(HALO_STATUS_INTERNAL, "local executable: dlinfo: %s",
                         error ? error : "(no reason given)");
  }
  if (status) {
    halo_hal_executable_destroy(&executable->base);
    return status;
  }
  *out_executable = &executable->base;
  return NULL;
}

static void halo_hal_local_executable_destroy(
    halo_hal_executable_t *base_executable) {
  halo_hal_local_executable_t *executable =
      (halo_hal_local_executable_t *)base_executable;
  if (executable->handle) dlclose(executable->handle);
  if (executable->fd >= 0) close(executable->fd);
  for (uint32_t i = 0; i < executable->entry_count; ++i) {
    free(executable->entries[i].name);
  }
  free(executable->entries);
  pthread_mutex_destroy(&executable->mutex);
  free(executable);
}

// Symbol |name| of the object itself (not of a library it depends on,
// which dlsym on its handle would also search): its address and ELF symbol
// (NULL where dladdr1 cannot tell), or NULL when the object has none
// (|*out_owner| then names the object that has it, if one does).
static void *halo_hal_local_executable_own_symbol(
    halo_hal_local_executable_t *executable, const char *name,
    const ElfW(Sym) * *out_symbol, const char **out_owner) {
  *out_symbol = NULL;
  *out_owner = NULL;
  dlerror();  // clear
  void *symbol = dlsym(executable->handle, name);
  if (!symbol) return NULL;
  Dl_info info;
  struct link_map *owner = NULL;
  if (!dladdr1(symbol, &info, (void **)&owner, RTLD_DL_LINKMAP) ||
      owner != executable->link_map) {
    *out_owner = owner && owner->l_name && *owner->l_name ? owner->l_name
                                                          : "another object";
    return NULL;
  }
  if (!dladdr1(symbol, &info, (void **)out_symbol, RTLD_DL_SYMENT)) {
    *out_symbol = NULL;
  }
  return symbol;
}

// The function |name| of the object itself, or an error.
static halo_status_t halo_hal_local_executable_resolve(
    halo_hal_local_executable_t *executable, const char *name,
    halo_hal_local_entry_fn *out_function) {
  *out_function = NULL;
  const ElfW(Sym) *entry_symbol = NULL;
  const char *owner = NULL;
  void *symbol = halo_hal_local_executable_own_symbol(executable, name,
                                                      &entry_symbol, &owner);
  if (!symbol && owner) {
    return halo_status_make(HALO_STATUS_NOT_FOUND,
                            "local executable has no entry point '%s' (the "
                            "symbol comes from %s)",
                            name, owner);
  }
  if (!symbol) {
    return halo_status_make(HALO_STATUS_NOT_FOUND,
                            "local executable has no entry point '%s'", name);
  }
  if (entry_symbol) {
    unsigned type = ELF64_ST_TYPE(entry_symbol->st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "local executable: '%s' is not a function "
                              "(symbol type %u)",
                              name, type);
    }
  }
  // POSIX guarantees a function's dlsym result converts back.
  *(void **)out_function = symbol;
  return NULL;
}

// The declaration HALO_LOCAL_KERNEL_PARAMS made for entry |name| in the
// object itself; NULL with no error where there is none (another object's
// is not this entry's declaration).
static halo_status_t halo_hal_local_executable_params(
    halo_hal_local_executable_t *executable, const char *name,
    const halo_local_kernel_params_t **out_params) {
  *out_params = NULL;
  char symbol_name[512];
  int length =
      snprintf(symbol_name, sizeof(symbol_name), "halo_local_params_%s", name);
  if (length < 0 || (size_t)length >= sizeof(symbol_name)) return NULL;
  const ElfW(Sym) *params_symbol = NULL;
  const char *owner = NULL;
  const halo_local_kernel_params_t *params =
      halo_hal_local_executable_own_symbol(executable, symbol_name,
                                           &params_symbol, &owner);
  if (!params) return NULL;
  if (!params_symbol || ELF64_ST_TYPE(params_symbol->st_info) != STT_OBJECT ||
      params_symbol->st_size < sizeof(halo_local_kernel_params_t)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "local executable: '%s' is not a parameter "
                            "declaration (HALO_LOCAL_KERNEL_PARAMS)",
                            symbol_name);
  }
  if (params->count > HALO_LOCAL_MAX_PARAMS) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "local executable: '%s' declares %u parameters "
                            "(at most %d)",
                            symbol_name, params->count, HALO_LOCAL_MAX_PARAMS);
  }
  *out_params = params;
  return NULL;
}

// Offsets of a local kernel's parameters as CUDA lays out scalars: each
// aligned to its size rounded up to a power of two, at most 8.
static void halo_hal_local_params_info(const halo_local_kernel_params_t *params,
                                       halo_hal_entry_info_t *out_info) {
  if (!params) {
    out_info->param_count = HALO_HAL_PARAMS_UNKNOWN;
    return;
  }
  out_info->param_count = params->count;
  uint64_t offset = 0;
  for (uint32_t i = 0; i < params->count; ++i) {
    uint32_t size = params->sizes[i];
    uint32_t alignment = 1;
    while (alignment < size && alignment < 8) alignment *= 2;
    offset = (offset + alignment - 1) & ~(uint64_t)(alignment - 1);
    out_info->param_sizes[i] = size;
    out_info->param_offsets[i] = (uint32_t)offset;
    offset += size;
  }
}

static halo_status_t halo_hal_local_executable_lookup_entry(
    halo_hal_executable_t *base_executable, const char *name,
    halo_hal_entry_info_t *out_info) {
  memset(out_info, 0, sizeof(*out_info));
  halo_hal_local_executable_t *executable =
      (halo_hal_local_executable_t *)base_executable;
  if (!name || !*name) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "local executable: empty entry point name");
  }
  halo_status_t status = NULL;
  pthread_mutex_lock(&executable->mutex);
  uint32_t ordinal = 0;
  while (ordinal < executable->entry_count &&
         strcmp(executable->entries[ordinal].name, name) != 0) {
    ++ordinal;
  }
  if (ordinal == executable->entry_count) {
    halo_hal_local_entry_fn function;
    const halo_local_kernel_params_t *params = NULL;
    status = halo_hal_local_executable_resolve(executable, name, &function);
    if (!status) {
      status = halo_hal_local_executable_params(executable, name, &params);
    }
    if (!status && executable->entry_count == executable->entry_capacity) {
      uint32_t capacity =
          executable->entry_capacity ? executable->entry_capacity * 2 : 8;
      halo_hal_local_executable_entry_t *grown =
          realloc(executable->entries, capacity * sizeof(*grown));
      if (grown) {
        executable->entries = grown;
        executable->entry_capacity = capacity;
      } else {
        status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
      }
    }
    char *copy = NULL;
    if (!status) {
      copy = strdup(name);
      if (!copy)
        status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
    }
    if (!status) {
      executable->entries[ordinal].name = copy;
      executable->entries[ordinal].function = function;
      executable->entries[ordinal].params = params;
      ++executable->entry_count;
    }
  }
  const halo_local_kernel_params_t *params =
      status ? NULL : executable->entries[ordinal].params;
  pthread_mutex_unlock(&executable->mutex);
  if (status) return status;
  out_info->ordinal = ordinal;
  halo_hal_local_params_info(params, out_info);
  return NULL;
}

halo_status_t halo_hal_local_executable_entry(
    halo_hal_executable_t *base_executable, uint32_t ordinal,
    halo_hal_local_entry_fn *out_function) {
  *out_function = NULL;
  if (!base_executable ||
      base_executable->vtable != &halo_hal_local_executable_vtable) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "not an executable of the local driver");
  }
  halo_hal_local_executable_t *executable =
      (halo_hal_local_executable_t *)base_executable;
  pthread_mutex_lock(&executable->mutex);
  uint32_t count = executable->entry_count;
  if (ordinal < count) *out_function = executable->entries[ordinal].function;
  pthread_mutex_unlock(&executable->mutex);
  if (ordinal >= count) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "entry ordinal %u out of range (%u entries "
                            "looked up)",
                            ordinal, count);
  }
  return NULL;
}

static const halo_hal_executable_vtable_t halo_hal_local_executable_vtable = {
    .destroy = halo_hal_local_executable_destroy,
    .lookup_entry = halo_hal_local_executable_lookup_entry,
};
