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
    halo_status_t status = halo_hal_cuda_image_check(&payload);
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
      HALO_RETURN_IF_ERROR(halo_hal_cuda_image_check(params));
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
