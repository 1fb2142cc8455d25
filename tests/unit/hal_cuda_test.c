// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the CUDA driver through the HAL (label cuda): the probe,
// device information, the allocator (device memory round trips, host
// registration and the reaper), executables from PTX, CUBIN, FATBIN and
// CUDA source (NVRTC, with defines), parameter information, the whole
// compile log on failure, and the disk cache. Without a GPU (or a driver)
// it exits 77, which ctest reports as skipped.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/hash.h"
#include "common/sandbox.h"
#include "hal/cuda/cuda_device.h"
#include "hal/device.h"
#include "hal/registry.h"
#include "tests/support/landlock_refusal.h"

//===----------------------------------------------------------------------===//
// Fixture
//===----------------------------------------------------------------------===//

typedef struct fixture_t {
  halo_hal_device_t *base;
  halo_hal_cuda_device_t *device;
  const halo_hal_cuda_symbols_t *cu;
  CUstream stream;
  char cache_directory[64];
  char *source;  // test_kernels.cu
  size_t source_size;
} fixture_t;

static fixture_t fixture;

static void expect_ok_at(halo_status_t status, const char *what) {
  if (status) {
    fail_msg("%s: %s: %s", what,
             halo_status_code_name(halo_status_code(status)),
             halo_status_message(status));
  }
}
#define expect_ok(expr) expect_ok_at((expr), #expr)

#define expect_cu(call, ...)                                          \
  expect_ok_at(halo_hal_cuda_result_to_status(                        \
                   fixture.cu, fixture.cu->call(__VA_ARGS__), #call), \
               #call)

static char *read_file(const char *path, size_t *out_size) {
  FILE *file = fopen(path, "rb");
  if (!file) return NULL;
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  char *data = malloc((size_t)size + 1);
  assert_non_null(data);
  assert_int_equal(fread(data, 1, (size_t)size, file), (size_t)size);
  data[size] = '\0';
  fclose(file);
  *out_size = (size_t)size;
  return data;
}

// An nvcc-built kernel file (tests/kernels/cuda/), NULL if there is none or
// it is not for this GPU's architecture (PTX runs on newer ones too).
static char *nvcc_kernels(const char *extension, size_t *out_size) {
  if (!HALO_TEST_CUDA_NVCC) return NULL;
  bool portable = strcmp(extension, "ptx") == 0;
  if (!portable && fixture.device->arch != HALO_TEST_CUDA_ARCH) return NULL;
  if (portable && fixture.device->arch < HALO_TEST_CUDA_ARCH) return NULL;
  char path[512];
  snprintf(path, sizeof(path), "%s/test_kernels.%s", HALO_TEST_CUDA_DIR,
           extension);
  return read_file(path, out_size);
}

static int group_setup(void **state) {
  (void)state;
  snprintf(fixture.cache_directory, sizeof(fixture.cache_directory),
           "/tmp/halo-cuda-test-XXXXXX");
  assert_non_null(mkdtemp(fixture.cache_directory));
  halo_hal_cuda_device_options_t options = {
      .completion = HALO_HAL_CUDA_COMPLETION_THREAD};
  snprintf(options.cache_directory, sizeof(options.cache_directory), "%s",
           fixture.cache_directory);
  expect_ok(halo_hal_cuda_device_create(0, &options, &fixture.base));
  fixture.device = halo_hal_cuda_device_cast(fixture.base);
  assert_non_null(fixture.device);
  fixture.cu = fixture.device->cu;
  expect_ok(halo_hal_cuda_device_make_current(fixture.device));
  expect_cu(cuStreamCreateWithPriority, &fixture.stream, CU_STREAM_NON_BLOCKING,
            0);
  fixture.source = read_file(HALO_TEST_CUDA_SOURCE, &fixture.source_size);
  assert_non_null(fixture.source);
  return 0;
}

static void remove_tree(const char *path) {
  DIR *dir = opendir(path);
  if (dir) {
    struct dirent *entry;
    while ((entry = readdir(dir))) {
      if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
        continue;
      char child[1024];
      snprintf(child, sizeof(child), "%s/%s", path, entry->d_name);
      struct stat info;
      if (lstat(child, &info) == 0 && S_ISDIR(info.st_mode)) {
        remove_tree(child);
      } else {
        unlink(child);
      }
    }
    closedir(dir);
  }
  rmdir(path);
}

static int group_teardown(void **state) {
  (void)state;
  fixture.cu->cuCtxSetCurrent(fixture.device->context);
  fixture.cu->cuStreamDestroy(fixture.stream);
  fixture.base->vtable->destroy(fixture.base);
  free(fixture.source);
  remove_tree(fixture.cache_directory);
  return 0;
}

static halo_status_t load(uint32_t format, const void *data, size_t size,
                          const char *const *options, uint32_t option_count,
                          halo_hal_executable_t **out_executable) {
  halo_hal_executable_params_t params = {.format = format,
                                         .data = data,
                                         .size = size,
                                         .options = options,
                                         .option_count = option_count};
  return fixture.base->vtable->create_executable(fixture.base, &params,
                                                 out_executable);
}

static halo_hal_executable_t *load_source(const char *const *options,
                                          uint32_t option_count) {
  halo_hal_executable_t *executable = NULL;
  expect_ok(load(HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE, fixture.source,
                 fixture.source_size, options, option_count, &executable));
  return executable;
}

// CUDA C compiles only in a Landlock sandbox: on a host without Landlock
// (unit.hal_cuda_without_landlock_test runs this program so) a load of CUDA
// source is refused, naming Landlock and why, and the case is skipped.
static void require_cuda_c(void) {
  char reason[160];
  if (halo_sandbox_abi(reason, sizeof(reason)) != 0) return;
  halo_hal_executable_t *executable = NULL;
  halo_test_expect_landlock_refusal(
      load(HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE, fixture.source,
           fixture.source_size, NULL, 0, &executable),
      reason);
  assert_null(executable);
  skip();
}

// Runs halo_test_add of |executable| on the GPU and checks c = a + b.
static void check_add(halo_hal_executable_t *executable) {
  halo_hal_entry_info_t info;
  expect_ok(
      halo_hal_executable_lookup_entry(executable, "halo_test_add", &info));
  assert_int_equal(info.param_count, 4);
  for (int i = 0; i < 3; ++i) assert_int_equal(info.param_sizes[i], 8);
  assert_int_equal(info.param_sizes[3], 4);
  CUfunction function = NULL;
  expect_ok(
      halo_hal_cuda_executable_function(executable, info.ordinal, &function));
  enum { N = 1000 };
  halo_hal_allocator_t *allocator = fixture.base->allocator;
  uint64_t a, b, c;
  expect_ok(allocator->vtable->allocate(allocator, N * 4, &a));
  expect_ok(allocator->vtable->allocate(allocator, N * 4, &b));
  expect_ok(allocator->vtable->allocate(allocator, N * 4, &c));
  float host_a[N], host_b[N], host_c[N];
  for (int i = 0; i < N; ++i) {
    host_a[i] = (float)i;
    host_b[i] = 0.5f;
  }
  expect_ok(allocator->vtable->write(allocator, a, host_a, sizeof(host_a)));
  expect_ok(allocator->vtable->write(allocator, b, host_b, sizeof(host_b)));
  unsigned n = N;
  void *args[] = {&a, &b, &c, &n};
  expect_ok(halo_hal_cuda_device_make_current(fixture.device));
  expect_cu(cuLaunchKernel, function, (N + 127) / 128, 1, 1, 128, 1, 1, 0,
            fixture.stream, args, NULL);
  expect_cu(cuStreamSynchronize, fixture.stream);
  expect_ok(allocator->vtable->read(allocator, c, host_c, sizeof(host_c)));
  for (int i = 0; i < N; ++i) assert_true(host_c[i] == (float)i + 0.5f);
  allocator->vtable->deallocate(allocator, a, N * 4);
  allocator->vtable->deallocate(allocator, b, N * 4);
  allocator->vtable->deallocate(allocator, c, N * 4);
}

static void expect_params_kernel(halo_hal_executable_t *executable) {
  halo_hal_entry_info_t info;
  expect_ok(
      halo_hal_executable_lookup_entry(executable, "halo_test_params", &info));
  assert_int_equal(info.param_count, 5);
  static const uint32_t sizes[] = {1, 8, 8, 20, 2};
  for (int i = 0; i < 5; ++i) assert_int_equal(info.param_sizes[i], sizes[i]);
}

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

static void test_probe_and_registry(void **state) {
  (void)state;
  char reason[256];
  assert_true(halo_hal_cuda_probe(reason, sizeof(reason)));
  halo_hal_registry_t registry;
  halo_hal_registry_options_t options = {.driver = "cuda",
                                         .cuda_completion = "host_func"};
  expect_ok(halo_hal_registry_initialize_with_options(&options, &registry));
  assert_true(registry.drivers[0].available);
  assert_true(registry.device_count >= 1);
  uint32_t registry_gpu_count = registry.device_count;
  for (uint32_t i = 0; i < registry.device_count; ++i) {
    halo_hal_cuda_device_t *device =
        halo_hal_cuda_device_cast(registry.devices[i]);
    assert_non_null(device);
    assert_int_equal(device->ordinal, i);
    assert_int_equal(device->options.completion,
                     HALO_HAL_CUDA_COMPLETION_HOST_FUNC);
  }
  halo_hal_registry_deinitialize(&registry);
  // A device filter: the last GPU alone, as the registry's device 0.
  options.has_device_filter = true;
  options.device_filter = registry_gpu_count - 1;
  expect_ok(halo_hal_registry_initialize_with_options(&options, &registry));
  assert_int_equal(registry.device_count, 1);
  assert_int_equal(halo_hal_cuda_device_cast(registry.devices[0])->ordinal,
                   registry_gpu_count - 1);
  halo_hal_registry_deinitialize(&registry);
  options.device_filter = registry_gpu_count;
  halo_status_t filter_status =
      halo_hal_registry_initialize_with_options(&options, &registry);
  assert_int_equal(halo_status_code(filter_status),
                   HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(filter_status);
  options.has_device_filter = false;
  options.cuda_completion = "sometimes";
  halo_status_t status =
      halo_hal_registry_initialize_with_options(&options, &registry);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(status);
}

static void test_device_info(void **state) {
  (void)state;
  const halo_hal_device_info_t *info = &fixture.base->info;
  assert_string_equal(info->driver, "cuda");
  assert_true(strlen(info->name) > 0);
  assert_true(info->memory_bytes > (1ull << 30));
  assert_true(info->compute_major >= 5);
  assert_true(info->multiprocessor_count > 0);
  assert_int_equal(fixture.device->arch,
                   (int)(info->compute_major * 10 + info->compute_minor));
  assert_true(fixture.device->stream_priority_greatest <=
              fixture.device->stream_priority_least);
  assert_non_null(fixture.device->pool);
  assert_non_null(fixture.device->transfer_stream);
  print_message(
      "device: %s, sm_%d, %u SMs, %.1f GiB, priorities %d..%d, "
      "driver %d, NVRTC %s\n",
      info->name, fixture.device->arch, info->multiprocessor_count,
      (double)info->memory_bytes / (1 << 30),
      fixture.device->stream_priority_least,
      fixture.device->stream_priority_greatest, fixture.cu->driver_version,
      fixture.device->nvrtc ? "yes" : "no");
}

static void test_allocator_round_trip(void **state) {
  (void)state;
  halo_hal_allocator_t *allocator = fixture.base->allocator;
  enum { SIZE = 1 << 20 };
  uint64_t address = 0;
  expect_ok(allocator->vtable->allocate(allocator, SIZE, &address));
  assert_true(address != 0);
  uint8_t *bytes = malloc(SIZE);
  assert_non_null(bytes);
  // New memory is zeroed.
  memset(bytes, 0xff, SIZE);
  expect_ok(allocator->vtable->read(allocator, address, bytes, SIZE));
  for (int i = 0; i < SIZE; ++i) assert_int_equal(bytes[i], 0);
  for (int i = 0; i < SIZE; ++i) bytes[i] = (uint8_t)(i * 7);
  expect_ok(allocator->vtable->write(allocator, address, bytes, SIZE));
  uint8_t window[100];
  expect_ok(allocator->vtable->read(allocator, address + 4096, window,
                                    sizeof(window)));
  for (int i = 0; i < 100; ++i) {
    assert_int_equal(window[i], (uint8_t)((4096 + i) * 7));
  }
  allocator->vtable->deallocate(allocator, address, SIZE);
  free(bytes);
}

// Host registration: the device sees the caller's shared mapping; after
// unregister_host the caller unmaps at once, and the next mapping (often at
// the same address) registers while the reaper is still behind.
static void test_host_registration(void **state) {
  (void)state;
  halo_hal_allocator_t *allocator = fixture.base->allocator;
  const size_t size = 1 << 16;
  for (int round = 0; round < 3; ++round) {
    int fd = memfd_create("halo-cuda-test", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    uint8_t *mapping =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(mapping != MAP_FAILED);
    mapping[10] = 42;
    uint64_t device_address = 0;
    expect_ok(allocator->vtable->register_host(allocator, mapping, size, -1,
                                               &device_address));
    assert_true(device_address != 0);
    // A copy through the device address lands in the caller's view.
    uint8_t value = 0;
    expect_ok(
        allocator->vtable->read(allocator, device_address + 10, &value, 1));
    assert_int_equal(value, 42);
    uint8_t pattern[4] = {1, 2, 3, 4};
    expect_ok(
        allocator->vtable->write(allocator, device_address + 100, pattern, 4));
    assert_memory_equal(mapping + 100, pattern, 4);
    allocator->vtable->unregister_host(allocator, mapping);
    munmap(mapping, size);
    close(fd);
  }
  halo_hal_cuda_thread_flush(&fixture.device->reaper);
  assert_null(fixture.device->registrations);
}

static void test_cuda_source_executable(void **state) {
  (void)state;
  require_cuda_c();
  const char *options[] = {"-DHALO_TEST_SCALE=3.0f", "--use_fast_math"};
  halo_hal_executable_t *executable = load_source(options, 2);
  check_add(executable);
  expect_params_kernel(executable);
  halo_hal_entry_info_t info;
  expect_ok(
      halo_hal_executable_lookup_entry(executable, "halo_test_scale", &info));
  assert_int_equal(info.param_count, 2);
  CUfunction function;
  expect_ok(
      halo_hal_cuda_executable_function(executable, info.ordinal, &function));
  halo_hal_allocator_t *allocator = fixture.base->allocator;
  uint64_t x;
  float values[4] = {1, 2, 3, 4};
  expect_ok(allocator->vtable->allocate(allocator, sizeof(values), &x));
  expect_ok(allocator->vtable->write(allocator, x, values, sizeof(values)));
  unsigned n = 4;
  void *args[] = {&x, &n};
  expect_ok(halo_hal_cuda_device_make_current(fixture.device));
  expect_cu(cuLaunchKernel, function, 1, 1, 1, 32, 1, 1, 0, fixture.stream,
            args, NULL);
  expect_cu(cuStreamSynchronize, fixture.stream);
  expect_ok(allocator->vtable->read(allocator, x, values, sizeof(values)));
  for (int i = 0; i < 4; ++i) assert_true(values[i] == 3.0f * (float)(i + 1));
  allocator->vtable->deallocate(allocator, x, sizeof(values));
  // Without the define the kernel is not there.
  halo_hal_executable_t *plain = load_source(NULL, 0);
  halo_status_t status =
      halo_hal_executable_lookup_entry(plain, "halo_test_scale", &info);
  assert_int_equal(halo_status_code(status), HALO_STATUS_NOT_FOUND);
  assert_non_null(strstr(halo_status_message(status), "halo_test_add"));
  halo_status_free(status);
  halo_hal_executable_destroy(plain);
  halo_hal_executable_destroy(executable);
}

static void test_ptx_executable(void **state) {
  (void)state;
  size_t size = 0;
  char *ptx = nvcc_kernels("ptx", &size);
  if (!ptx) skip();
  halo_hal_executable_t *executable = NULL;
  const char *options[] = {"-O3"};
  expect_ok(
      load(HALO_HAL_EXECUTABLE_FORMAT_PTX, ptx, size, options, 1, &executable));
  halo_hal_cuda_executable_info_t info;
  expect_ok(halo_hal_cuda_executable_query(executable, &info));
  assert_true(info.compiled);
  check_add(executable);
  expect_params_kernel(executable);
  halo_hal_executable_destroy(executable);
  // An option PTX does not take.
  const char *bad[] = {"-DX=1"};
  halo_status_t status =
      load(HALO_HAL_EXECUTABLE_FORMAT_PTX, ptx, size, bad, 1, &executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "-DX=1"));
  halo_status_free(status);
  free(ptx);
}

// Makes |cubin|, built for the device, a CUBIN of an architecture of
// another major, which the device cannot run. The architecture (90 for
// sm_90) is in e_flags: bits 8-15 from ELF ABI version 8 (CUDA 13's), bits
// 0-7 before.
static void set_other_architecture(uint8_t *cubin) {
  size_t offset = cubin[EI_ABIVERSION] >= 8 ? 49 : 48;
  assert_int_equal(cubin[offset], fixture.device->arch);
  cubin[offset] = fixture.device->arch / 10 == 5 ? 70 : 50;
}

static void test_cubin_and_fatbin_executables(void **state) {
  (void)state;
  size_t size = 0;
  char *cubin = nvcc_kernels("cubin", &size);
  if (!cubin) skip();
  halo_hal_executable_t *executable = NULL;
  expect_ok(load(HALO_HAL_EXECUTABLE_FORMAT_CUBIN, cubin, size, NULL, 0,
                 &executable));
  check_add(executable);
  expect_params_kernel(executable);
  halo_hal_cuda_executable_info_t info;
  expect_ok(halo_hal_cuda_executable_query(executable, &info));
  assert_false(info.compiled);
  print_message("cubin load: %.3f ms\n", (double)info.load_ns / 1e6);
  halo_hal_executable_destroy(executable);
  // CUBIN takes no options.
  const char *options[] = {"-O3"};
  halo_status_t status = load(HALO_HAL_EXECUTABLE_FORMAT_CUBIN, cubin, size,
                              options, 1, &executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(status);
  // A CUBIN of another architecture: the library loader takes it with no
  // kernels; the load fails naming why.
  set_other_architecture((uint8_t *)cubin);
  status =
      load(HALO_HAL_EXECUTABLE_FORMAT_CUBIN, cubin, size, NULL, 0, &executable);
  assert_null(executable);
  print_message("another architecture's CUBIN: %s\n",
                halo_status_message(status));
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(
      strstr(halo_status_message(status), "CUDA_ERROR_NO_BINARY_FOR_GPU"));
  halo_status_free(status);
  free(cubin);

  // FATBINs: plain, every entry compressed as nvcc 13 compresses
  // (Zstandard), and as for --compress-mode speed (LZ4): halod checks each
  // decompressed ELF image before the driver reads it.
  static const char *const kFatbins[] = {"fatbin", "compressed.fatbin",
                                         "speed.fatbin"};
  for (size_t i = 0; i < sizeof(kFatbins) / sizeof(kFatbins[0]); ++i) {
    char *fatbin = nvcc_kernels(kFatbins[i], &size);
    assert_non_null(fatbin);
    uint64_t flags = 0;
    assert_true(size > 16 + 48);
    memcpy(&flags, fatbin + 16 + 40, sizeof(flags));  // the first entry's
    print_message("%s: %zu bytes, first entry's flags 0x%llx\n", kFatbins[i],
                  size, (unsigned long long)flags);
    if (i > 0) assert_true(flags & (0x8000 | 0x2000));
    if (strcmp(kFatbins[i], "speed.fatbin") == 0) assert_true(flags & 0x2000);
    expect_ok(load(HALO_HAL_EXECUTABLE_FORMAT_FATBIN, fatbin, size, NULL, 0,
                   &executable));
    check_add(executable);
    halo_hal_executable_destroy(executable);
    free(fatbin);
  }
}

static void test_nvrtc_error_log(void **state) {
  (void)state;
  require_cuda_c();
  static const char source[] =
      "extern \"C\" __global__ void broken(float *x) {\n"
      "  x[0] = undefined_thing;\n"
      "}\n"
      "extern \"C\" __global__ void also_broken(int *y) { y[0] = nope(); }\n";
  halo_hal_executable_t *executable = NULL;
  halo_status_t status = load(HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE, source,
                              sizeof(source) - 1, NULL, 0, &executable);
  assert_null(executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  const char *message = halo_status_message(status);
  print_message("NVRTC failure: %s\n", message);
  // The whole log: both errors, with file and line.
  assert_non_null(strstr(message, "undefined_thing"));
  assert_non_null(strstr(message, "nope"));
  assert_non_null(strstr(message, "halo.cu(2)"));
  halo_status_free(status);
  // An architecture option is the daemon's to pick.
  const char *options[] = {"-arch=sm_80"};
  status = load(HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE, fixture.source,
                fixture.source_size, options, 1, &executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(status);
  // The compile reads no file outside the CUDA toolkit's headers (its
  // sandbox), with a CUDA context current in the process.
  char path[] = "/tmp/halo-secret-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  static const char secret[] = "__device__ int halo_secret = 1;\n";
  assert_int_equal(write(fd, secret, sizeof(secret) - 1), sizeof(secret) - 1);
  close(fd);
  char including[256];
  snprintf(including, sizeof(including),
           "#include \"%s\"\n"
           "extern \"C\" __global__ void k(int *x) { x[0] = halo_secret; }\n",
           path);
  status = load(HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE, including,
                strlen(including), NULL, 0, &executable);
  unlink(path);
  assert_null(executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  print_message("an include outside the toolkit: %s\n",
                halo_status_message(status));
  assert_non_null(strstr(halo_status_message(status), "Permission denied"));
  halo_status_free(status);
}

static void test_ptx_error_log(void **state) {
  (void)state;
  static const char ptx[] =
      ".version 8.0\n.target sm_50\n.address_size 64\n"
      ".visible .entry bad(.param .u64 p)\n{\n  mov.u32 %r1, 1;\n  ret;\n}\n";
  halo_hal_executable_t *executable = NULL;
  halo_status_t status = load(HALO_HAL_EXECUTABLE_FORMAT_PTX, ptx,
                              sizeof(ptx) - 1, NULL, 0, &executable);
  assert_null(executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  print_message("PTX failure: %s\n", halo_status_message(status));
  assert_non_null(strstr(halo_status_message(status), "PTX"));
  halo_status_free(status);
}

// The path of the .cubin in |kernels| written last.
static void newest_cubin(const char *kernels, char *out, size_t capacity) {
  DIR *dir = opendir(kernels);
  assert_non_null(dir);
  struct dirent *entry;
  struct timespec newest = {0, 0};
  out[0] = '\0';
  while ((entry = readdir(dir))) {
    size_t length = strlen(entry->d_name);
    if (length < 6 || strcmp(entry->d_name + length - 6, ".cubin") != 0) {
      continue;
    }
    char candidate[512];
    snprintf(candidate, sizeof(candidate), "%s/%s", kernels, entry->d_name);
    struct stat at;
    assert_int_equal(stat(candidate, &at), 0);
    if (!out[0] || at.st_mtim.tv_sec > newest.tv_sec ||
        (at.st_mtim.tv_sec == newest.tv_sec &&
         at.st_mtim.tv_nsec > newest.tv_nsec)) {
      snprintf(out, capacity, "%s", candidate);
      newest = at.st_mtim;
    }
  }
  closedir(dir);
  assert_true(out[0] != '\0');
}

// Makes the compiled code no CUBIN by its header.
static void set_not_elf(uint8_t *code) {
  code[0] = 'X';
}

// Changes the compiled code in the disk cache's file |path| with |change|
// and recomputes the code's hash, so that the file is intact by its
// hashes. The file: 16 bytes of magic, the key's hash, the code's hash,
// the code (a CUBIN).
static void forge_cache_file(const char *path, void (*change)(uint8_t *)) {
  size_t size = 0;
  char *bytes = read_file(path, &size);
  assert_non_null(bytes);
  enum { kHeader = 16 + 2 * HALO_HASH_BYTES };
  assert_true(size > kHeader + 64);
  uint8_t *code = (uint8_t *)bytes + kHeader;
  change(code);
  halo_hasher_t hasher;
  halo_hasher_initialize(&hasher);
  halo_hasher_update_bytes(&hasher, code, size - kHeader);
  halo_hash_t hash;
  halo_hasher_finalize(&hasher, &hash);
  memcpy(bytes + 16 + HALO_HASH_BYTES, hash.bytes, HALO_HASH_BYTES);
  FILE *file = fopen(path, "wb");
  assert_non_null(file);
  assert_int_equal(fwrite(bytes, 1, size, file), size);
  fclose(file);
  free(bytes);
}

// Loads |options|'s source and checks where its code came from.
static void expect_load_from_disk(const char *const *options,
                                  bool from_disk_cache) {
  halo_hal_executable_t *executable = load_source(options, 1);
  halo_hal_cuda_executable_info_t info;
  expect_ok(halo_hal_cuda_executable_query(executable, &info));
  assert_int_equal(info.from_disk_cache, from_disk_cache);
  assert_true(info.compiled);
  check_add(executable);
  halo_hal_executable_destroy(executable);
}

static void test_disk_cache_hit(void **state) {
  (void)state;
  require_cuda_c();
  // Unique source text: a fresh key, whatever ran before.
  char define[64];
  snprintf(define, sizeof(define), "-DHALO_TEST_UNIQUE=%d%ld", (int)getpid(),
           (long)time(NULL));
  const char *options[] = {define};
  halo_hal_executable_t *first = load_source(options, 1);
  halo_hal_cuda_executable_info_t info;
  expect_ok(halo_hal_cuda_executable_query(first, &info));
  assert_true(info.compiled);
  assert_false(info.from_disk_cache);
  int64_t compile_ns = info.compile_ns;
  halo_hal_executable_destroy(first);

  halo_hal_executable_t *second = load_source(options, 1);
  expect_ok(halo_hal_cuda_executable_query(second, &info));
  assert_true(info.from_disk_cache);
  print_message("NVRTC %.2f ms, disk cache %.2f ms, load %.3f ms\n",
                (double)compile_ns / 1e6, (double)info.compile_ns / 1e6,
                (double)info.load_ns / 1e6);
  check_add(second);
  halo_hal_executable_destroy(second);

  // A damaged file is a miss, removed and rewritten.
  char kernels[128];
  snprintf(kernels, sizeof(kernels), "%s/kernels", fixture.cache_directory);
  DIR *dir = opendir(kernels);
  assert_non_null(dir);
  struct dirent *entry;
  int damaged = 0;
  while ((entry = readdir(dir))) {
    if (!strstr(entry->d_name, ".cubin")) continue;
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", kernels, entry->d_name);
    FILE *file = fopen(path, "r+b");
    assert_non_null(file);
    fseek(file, 100, SEEK_SET);
    fputc(0x5a, file);
    fputc(0xa5, file);
    fclose(file);
    ++damaged;
  }
  closedir(dir);
  assert_true(damaged >= 1);
  halo_hal_executable_t *third = load_source(options, 1);
  expect_ok(halo_hal_cuda_executable_query(third, &info));
  assert_false(info.from_disk_cache);
  check_add(third);
  halo_hal_executable_destroy(third);
  halo_hal_executable_t *fourth = load_source(options, 1);
  expect_ok(halo_hal_cuda_executable_query(fourth, &info));
  assert_true(info.from_disk_cache);
  halo_hal_executable_destroy(fourth);

  // Another key's file copied onto this key's name is no hit here (it would
  // be other code): a miss, removed and rewritten. And a FIFO in a file's
  // place is not waited on. This key's file is the newest (the third load
  // wrote it), the other key's the newest after its load.
  char path[512], other_path[512];
  newest_cubin(kernels, path, sizeof(path));
  char other_define[80];
  snprintf(other_define, sizeof(other_define), "%s1", define);
  const char *other_options[] = {other_define};
  halo_hal_executable_t *other = load_source(other_options, 1);
  halo_hal_executable_destroy(other);
  newest_cubin(kernels, other_path, sizeof(other_path));
  assert_string_not_equal(path, other_path);
  char command[1200];
  snprintf(command, sizeof(command), "cp '%s' '%s'", other_path, path);
  assert_int_equal(system(command), 0);
  halo_hal_executable_t *fifth = load_source(options, 1);
  expect_ok(halo_hal_cuda_executable_query(fifth, &info));
  assert_false(info.from_disk_cache);
  check_add(fifth);
  halo_hal_executable_destroy(fifth);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(mkfifo(path, 0600), 0);
  halo_hal_executable_t *sixth = load_source(options, 1);
  expect_ok(halo_hal_cuda_executable_query(sixth, &info));
  assert_false(info.from_disk_cache);
  check_add(sixth);
  halo_hal_executable_destroy(sixth);

  // Code that is no CUBIN by its header, intact by its hashes (the loader,
  // which takes no size, would read it as PTX text to a NUL): a miss,
  // removed and rewritten (the next load is a hit).
  forge_cache_file(path, set_not_elf);
  expect_load_from_disk(options, false);
  expect_load_from_disk(options, true);

  // A CUBIN the driver refuses, intact by its hashes (a file halod's user
  // wrote, a driver changed under one version number): another
  // architecture's. The load still succeeds, compiled once more, and the
  // file is rewritten.
  forge_cache_file(path, set_other_architecture);
  expect_load_from_disk(options, false);
  expect_load_from_disk(options, true);
}

static void test_format_rejections(void **state) {
  (void)state;
  halo_hal_executable_t *executable = NULL;
  static const char elf[] =
      "\x7f"
      "ELF not really";
  halo_status_t status = load(HALO_HAL_EXECUTABLE_FORMAT_ELF, elf, sizeof(elf),
                              NULL, 0, &executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNIMPLEMENTED);
  halo_status_free(status);
  static const char garbage[] = "this is not a cubin";
  status = load(HALO_HAL_EXECUTABLE_FORMAT_CUBIN, garbage, sizeof(garbage),
                NULL, 0, &executable);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  print_message("garbage CUBIN: %s\n", halo_status_message(status));
  halo_status_free(status);
  assert_null(executable);
}

int main(void) {
  char reason[256];
  if (!halo_hal_cuda_probe(reason, sizeof(reason))) {
    printf("SKIP: the CUDA driver is unavailable: %s\n", reason);
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_probe_and_registry),
      cmocka_unit_test(test_device_info),
      cmocka_unit_test(test_allocator_round_trip),
      cmocka_unit_test(test_host_registration),
      cmocka_unit_test(test_cuda_source_executable),
      cmocka_unit_test(test_ptx_executable),
      cmocka_unit_test(test_cubin_and_fatbin_executables),
      cmocka_unit_test(test_nvrtc_error_log),
      cmocka_unit_test(test_ptx_error_log),
      cmocka_unit_test(test_disk_cache_hit),
      cmocka_unit_test(test_format_rejections),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
