// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// CUDA C compiles in their read-only sandbox (hal/cuda/cuda_nvrtc.c), with
// the real NVRTC and no GPU (NVRTC needs none: the device here is only an
// architecture). A source compiles, <cuda_fp16.h> is found without an
// option, and an #include of a file outside the CUDA toolkit's headers is
// refused whether it names the file or a -I option leads to it, while the
// rest of the process still reads the file. Skipped where NVRTC is not
// installed. The client's options are those that shape the code, none that
// reads or writes a file.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "common/sandbox.h"
#include "hal/cuda/cuda_device.h"
#include "tests/support/fake_cuda_image.h"
#include "tests/support/landlock_refusal.h"

static const char kKernel[] =
    "extern \"C\" __global__ void scale(float *x, float a) {\n"
    "  x[threadIdx.x] *= a;\n"
    "}\n";

// A header that compiles, with a marker that must not reach the log.
static const char kSecret[] =
    "__device__ int halo_secret_value = 271828;  // SECRET-MARKER\n";

static halo_hal_cuda_device_t device;
static char directory[64];
static char secret_path[96];

static int setup(void **state) {
  (void)state;
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = NULL;
  halo_status_t status = halo_hal_cuda_nvrtc_load(&nvrtc);
  if (status) {
    print_message("no NVRTC here: %s\n", halo_status_message(status));
    halo_status_free(status);
  }
  device.nvrtc = nvrtc;
  device.arch = 80;
  snprintf(directory, sizeof(directory), "/tmp/halo-nvrtc-XXXXXX");
  assert_non_null(mkdtemp(directory));
  snprintf(secret_path, sizeof(secret_path), "%s/secret.h", directory);
  FILE *file = fopen(secret_path, "w");
  assert_non_null(file);
  assert_true(fputs(kSecret, file) >= 0);
  assert_int_equal(fclose(file), 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unlink(secret_path);
  rmdir(directory);
  return 0;
}

static halo_status_t compile(const char *source, const char *const *options,
                             uint32_t option_count,
                             halo_hal_cuda_image_t *out_image) {
  halo_hal_executable_params_t params = {
      .format = HALO_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE,
      .data = source,
      .size = strlen(source),
      .options = options,
      .option_count = option_count,
  };
  memset(out_image, 0, sizeof(*out_image));
  return halo_hal_cuda_nvrtc_compile(&device, &params, out_image);
}

// NVRTC installed and a sandbox possible, else skipped (and where NVRTC is
// there but the sandbox is not, a compile says why: run so as
// unit.hal_cuda_nvrtc_without_landlock_test and _landlock_disabled_test).
static void require_sandboxed_nvrtc(void) {
  if (!device.nvrtc) skip();
  char reason[160];
  if (halo_sandbox_abi(reason, sizeof(reason)) != 0) return;
  halo_hal_cuda_image_t image;
  halo_test_expect_landlock_refusal(compile(kKernel, NULL, 0, &image), reason);
  skip();
}

static void test_source_compiles(void **state) {
  (void)state;
  require_sandboxed_nvrtc();
  halo_hal_cuda_image_t image;
  halo_status_t status = compile(kKernel, NULL, 0, &image);
  if (status) print_message("%s\n", halo_status_message(status));
  assert_null(status);
  assert_true(image.compiled);
  assert_true(image.size > 0);
  assert_ptr_equal(image.data, image.owned);
  free(image.owned);
  // Many kernels: a CUBIN larger than a pipe holds (64 KiB) comes whole.
  size_t capacity = 256 * 1024, used = 0;
  char *many = malloc(capacity);
  assert_non_null(many);
  for (int i = 0; i < 200; ++i) {
    used += (size_t)snprintf(
        many + used, capacity - used,
        "extern \"C\" __global__ void k%d(float *x, float a) {\n"
        "#pragma unroll\n"
        "  for (int j = 0; j < 16; ++j) x[threadIdx.x * 16 + j] *= a + j;\n"
        "}\n",
        i);
  }
  status = compile(many, NULL, 0, &image);
  free(many);
  if (status) print_message("%s\n", halo_status_message(status));
  assert_null(status);
  print_message("200 kernels: a CUBIN of %zu bytes\n", image.size);
  assert_true(image.size > 64 * 1024);
  free(image.owned);
}

// The toolkit's headers are readable and on the include path.
static void test_toolkit_header_is_found(void **state) {
  (void)state;
  require_sandboxed_nvrtc();
  struct stat info;
  if (stat("/usr/local/cuda/include/cuda_fp16.h", &info) != 0) {
    print_message("no /usr/local/cuda/include/cuda_fp16.h here\n");
    skip();
  }
  static const char source[] =
      "#include <cuda_fp16.h>\n"
      "extern \"C\" __global__ void half_one(__half *x) {\n"
      "  x[0] = __float2half(1.0f);\n"
      "}\n";
  halo_hal_cuda_image_t image;
  halo_status_t status = compile(source, NULL, 0, &image);
  if (status) print_message("%s\n", halo_status_message(status));
  assert_null(status);
  assert_true(image.size > 0);
  free(image.owned);
}

// |why|: what NVRTC adds where it names the file (a search of the include
// path names none).
static void expect_refused(halo_status_t status, const char *why) {
  assert_non_null(status);
  const char *message = halo_status_message(status);
  print_message("%s\n", message);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(message, "cannot open source file"));
  if (why) assert_non_null(strstr(message, why));
  assert_null(strstr(message, "SECRET-MARKER"));
  halo_status_free(status);
}

// A source that includes |path| and uses what the secret header declares
// (unsandboxed, it compiles: the header is valid CUDA C) is refused.
static void expect_include_refused(const char *path, const char *why) {
  char source[512];
  snprintf(source, sizeof(source),
           "#include \"%s\"\n"
           "extern \"C\" __global__ void leak(int *x) {\n"
           "  x[0] = halo_secret_value;\n"
           "}\n",
           path);
  halo_hal_cuda_image_t image;
  expect_refused(compile(source, NULL, 0, &image), why);
  assert_null(image.owned);
}

// This process reads the secret header at |path|.
static void expect_secret_readable(const char *path) {
  FILE *file = fopen(path, "r");
  assert_non_null(file);
  char text[sizeof(kSecret)] = {0};
  assert_int_equal(fread(text, 1, sizeof(text) - 1, file), sizeof(text) - 1);
  fclose(file);
  assert_string_equal(text, kSecret);
}

static void test_include_outside_the_toolkit_is_refused(void **state) {
  (void)state;
  require_sandboxed_nvrtc();
  expect_include_refused(secret_path, "Permission denied");
  halo_hal_cuda_image_t image;
  // Through an include directory of the client's own.
  char option[96];
  snprintf(option, sizeof(option), "-I%s", directory);
  const char *options[] = {option};
  static const char by_option[] =
      "#include \"secret.h\"\n"
      "extern \"C\" __global__ void leak(int *x) {\n"
      "  x[0] = halo_secret_value;\n"
      "}\n";
  expect_refused(compile(by_option, options, 1, &image), NULL);
  // The sandbox was the compile's process's alone: this one still reads it.
  expect_secret_readable(secret_path);
}

// The compile runs in a process of its own, which has none of this one's
// descriptors: a memfd this process holds (inheritable, as a worker's
// trust-domain memory could be) is not there to include as
// /proc/self/fd/N, and the sandbox keeps the compiler out of this
// process's /proc/<pid>/fd, while this process reads the memfd through
// either path.
static void test_descriptors_stay_out(void **state) {
  (void)state;
  require_sandboxed_nvrtc();
  int fd = memfd_create("halo-test-secret", 0);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, kSecret, strlen(kSecret)),
                   (ssize_t)strlen(kSecret));
  char paths[2][64];
  snprintf(paths[0], sizeof(paths[0]), "/proc/self/fd/%d", fd);
  snprintf(paths[1], sizeof(paths[1]), "/proc/%ld/fd/%d", (long)getpid(), fd);
  for (int i = 0; i < 2; ++i) {
    expect_secret_readable(paths[i]);
    expect_include_refused(paths[i], NULL);
  }
  close(fd);
}

// A compile in |compiler| (a path), for at most |timeout_ms| (0: the
// default).
static halo_status_t compile_in(const char *compiler, uint32_t timeout_ms,
                                const char *source,
                                halo_hal_cuda_image_t *out_image) {
  snprintf(device.options.compiler, sizeof(device.options.compiler), "%s",
           compiler);
  device.options.compile_timeout_ms = timeout_ms;
  halo_status_t status = compile(source, NULL, 0, out_image);
  device.options.compiler[0] = '\0';
  device.options.compile_timeout_ms = 0;
  return status;
}

static void expect_error(halo_status_t status, halo_status_code_t code,
                         const char *part, const char *other_part) {
  assert_non_null(status);
  const char *message = halo_status_message(status);
  print_message("%s\n", message);
  assert_int_equal(halo_status_code(status), code);
  assert_non_null(strstr(message, part));
  if (other_part) assert_non_null(strstr(message, other_part));
  halo_status_free(status);
}

// No compiler process is left behind: this process has no child.
static void expect_no_child(void) {
  errno = 0;
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
  assert_int_equal(errno, ECHILD);
}

// A compiler that crashes ends its compile, which fails naming the signal
// and what it wrote; this process goes on compiling.
static void test_compiler_crash_ends_only_its_compile(void **state) {
  (void)state;
  require_sandboxed_nvrtc();
  halo_hal_cuda_image_t image;
  expect_error(
      compile_in(HALO_TEST_FAKE_NVRTC, 0, "// halo-test: crash\n", &image),
      HALO_STATUS_INTERNAL, "ended on signal 6",
      "fake NVRTC: crashing as asked");
  assert_null(image.owned);
  expect_no_child();
  assert_null(compile(kKernel, NULL, 0, &image));
  assert_true(image.size > 0);
  free(image.owned);
}

// A compile past the device's compile timeout is killed, and fails
// DEADLINE_EXCEEDED naming the timeout.
static void test_compile_past_its_timeout_is_killed(void **state) {
  (void)state;
  require_sandboxed_nvrtc();
  halo_hal_cuda_image_t image;
  expect_error(
      compile_in(HALO_TEST_FAKE_NVRTC, 300, "// halo-test: hang\n", &image),
      HALO_STATUS_DEADLINE_EXCEEDED, "compile timeout (300 ms)", NULL);
  assert_null(image.owned);
  expect_no_child();
}

// What is not a whole reply is an error naming what came, and a reply that
// says it is over the bound is not read to its end.
static void test_bad_replies_are_refused(void **state) {
  (void)state;
  require_sandboxed_nvrtc();
  halo_hal_cuda_image_t image;
  expect_error(
      compile_in(HALO_TEST_FAKE_NVRTC, 0, "// halo-test: garbage\n", &image),
      HALO_STATUS_INTERNAL, "no whole reply", NULL);
  expect_error(
      compile_in(HALO_TEST_FAKE_NVRTC, 0, "// halo-test: exit\n", &image),
      HALO_STATUS_INTERNAL, "exited with status 7", NULL);
  expect_error(
      compile_in(HALO_TEST_FAKE_NVRTC, 0, "// halo-test: huge\n", &image),
      HALO_STATUS_INTERNAL, "a reply over its bound", "was stopped");
  expect_error(
      compile_in(HALO_TEST_FAKE_NVRTC, 0, "// halo-test: long\n", &image),
      HALO_STATUS_INTERNAL, "longer than its header says", NULL);
  // A CUBIN the driver's loader would read past the end of, sent by a
  // compiler a crafted source took over, never reaches the loader.
  expect_error(
      compile_in(HALO_TEST_FAKE_NVRTC, 0, "// halo-test: damaged\n", &image),
      HALO_STATUS_INTERNAL,
      "replied with a CUBIN the driver must not read: the CUBIN "
      "executable (240 bytes) is a damaged ELF image",
      "its section table (e_shoff) lies past its end");
  assert_null(image.owned);
  // A code halo-nvrtc never answers with is the compiler's fault.
  expect_error(
      compile_in(HALO_TEST_FAKE_NVRTC, 0, "// halo-test: code\n", &image),
      HALO_STATUS_INTERNAL, "the CUDA C compiler answered: lost", NULL);
  assert_null(image.owned);
  expect_no_child();
  // One that closes its output and error and goes on is still ended at the
  // timeout.
  expect_error(
      compile_in(HALO_TEST_FAKE_NVRTC, 300, "// halo-test: vanish\n", &image),
      HALO_STATUS_DEADLINE_EXCEEDED, "compile timeout (300 ms)", NULL);
  expect_no_child();
  // A compiler that is not there names where it was looked for.
  expect_error(compile_in("/nonexistent/halo-nvrtc", 0, kKernel, &image),
               HALO_STATUS_NOT_FOUND, "/nonexistent/halo-nvrtc", NULL);
}

// The compiler has its request, its reply's pipe and its standard error
// open, and none of this process's other descriptors (the fake lists
// them: the three, and the one it reads /proc/self/fd with).
static void test_compiler_gets_no_other_descriptor(void **state) {
  (void)state;
  require_sandboxed_nvrtc();
  int inheritable = memfd_create("halo-test-inheritable", 0);
  assert_true(inheritable >= 0);
  // With this process's standard input closed, so that the request or a
  // pipe could take descriptor 0.
  int saved_stdin = dup(STDIN_FILENO);
  assert_true(saved_stdin >= 0);
  close(STDIN_FILENO);
  halo_hal_cuda_image_t image;
  halo_status_t status =
      compile_in(HALO_TEST_FAKE_NVRTC, 0, "// halo-test: fds\n", &image);
  assert_int_equal(dup2(saved_stdin, STDIN_FILENO), STDIN_FILENO);
  close(saved_stdin);
  close(inheritable);
  if (status) print_message("%s\n", halo_status_message(status));
  assert_null(status);
  size_t text_size = 0;
  const uint8_t *text =
      halo_fake_cuda_unwrap(image.data, image.size, &text_size);
  assert_non_null(text);
  assert_int_equal(text_size, strlen("0 1 2 3 "));
  assert_memory_equal(text, "0 1 2 3 ", text_size);
  free(image.owned);
  // More on its standard error than the driver keeps is read and dropped,
  // not cut off (which would kill the compiler with SIGPIPE).
  status =
      compile_in(HALO_TEST_FAKE_NVRTC, 0, "// halo-test: chatty\n", &image);
  if (status) print_message("%s\n", halo_status_message(status));
  assert_null(status);
  text = halo_fake_cuda_unwrap(image.data, image.size, &text_size);
  assert_non_null(text);
  assert_int_equal(text_size, strlen("0 1 2 3 "));
  assert_memory_equal(text, "0 1 2 3 ", text_size);
  free(image.owned);
  // A reply far larger than a pipe holds comes whole.
  status = compile_in(HALO_TEST_FAKE_NVRTC, 0, "// halo-test: big\n", &image);
  if (status) print_message("%s\n", halo_status_message(status));
  assert_null(status);
  text = halo_fake_cuda_unwrap(image.data, image.size, &text_size);
  assert_non_null(text);
  assert_int_equal(text_size, 3 << 20);
  assert_int_equal(text[0], 'b');
  assert_int_equal(text[(3 << 20) - 1], 'b');
  free(image.owned);
  // The request comes sealed: nothing can change or resize it.
  status = compile_in(HALO_TEST_FAKE_NVRTC, 0, "// halo-test: seals\n", &image);
  assert_null(status);
  char seals_text[32] = {0};
  text = halo_fake_cuda_unwrap(image.data, image.size, &text_size);
  assert_non_null(text);
  memcpy(
      seals_text, text,
      text_size < sizeof(seals_text) - 1 ? text_size : sizeof(seals_text) - 1);
  int seals = atoi(seals_text);
  assert_true(seals >= 0);  // F_GET_SEALS answered
  int expected = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
  assert_int_equal(seals & expected, expected);
  free(image.owned);
}

// Each option halod passes on compiles (NVRTC takes it); one that reads or
// writes a file of its own is refused naming it, before NVRTC sees it
// (NVRTC aborted the worker on a --fdevice-time-trace it could not write),
// as is one whose value is missing or would be the next string's.
static void test_options(void **state) {
  (void)state;
  require_sandboxed_nvrtc();
  static const char scaled[] =
      "extern \"C\" __global__ void scale(float *x) {\n"
      "  x[threadIdx.x] *= SCALE;\n"
      "}\n";
  char include[128];
  snprintf(include, sizeof(include), "--include-path=%s", directory);
  const char *allowed[] = {"-DUNUSED=1",
                           "--define-macro=UNUSED=1",
                           "-UUNUSED",
                           "--undefine-macro=UNUSED",
                           include,
                           "-std=c++17",
                           "--std=c++17",
                           "-use_fast_math",
                           "--use_fast_math",
                           "-ftz=true",
                           "--ftz=true",
                           "-prec-div=false",
                           "--prec-div=false",
                           "-prec-sqrt=false",
                           "--prec-sqrt=false",
                           "-fmad=false",
                           "--fmad=false",
                           "-maxrregcount=64",
                           "--maxrregcount=64",
                           "-lineinfo",
                           "--generate-line-info",
                           "-G",
                           "--device-debug",
                           "-default-device",
                           "--device-as-default-execution-space",
                           "-restrict",
                           "--restrict",
                           "-extra-device-vectorization",
                           "--extra-device-vectorization",
                           "-device-int128",
                           "--device-int128",
                           "-w",
                           "--disable-warnings",
                           "-diag-suppress=177",
                           "--diag-suppress=177",
                           "-diag-warn=177",
                           "--diag-warn=177",
                           "-diag-error=177",
                           "--diag-error=177",
                           "-no-source-include",
                           "--no-source-include",
                           "-minimal",
                           "--minimal",
                           "-builtin-move-forward=true",
                           "--builtin-move-forward=true",
                           "-builtin-initializer-list=true",
                           "--builtin-initializer-list=true"};
  for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); ++i) {
    const char *options[] = {"-DSCALE=2.0f", allowed[i]};
    halo_hal_cuda_image_t image;
    halo_status_t status = compile(scaled, options, 2, &image);
    if (status) {
      print_message("%s: %s\n", allowed[i], halo_status_message(status));
    }
    assert_null(status);
    assert_true(image.size > 0);
    free(image.owned);
  }
  char trace[128], timing[128], pch[128], pre_include[160];
  snprintf(trace, sizeof(trace), "--fdevice-time-trace=%s/trace", directory);
  snprintf(timing, sizeof(timing), "-time=%s/time.csv", directory);
  snprintf(pch, sizeof(pch), "--create-pch=%s/p.pch", directory);
  snprintf(pre_include, sizeof(pre_include), "--pre-include=%s", secret_path);
  const char *refused[] = {trace,        timing,          pch,
                           pre_include,  "-optf=options", "-split-compile=4",
                           "-Xptxas=-v", "--lineinfo"};
  for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); ++i) {
    const char *options[] = {"-DSCALE=2.0f", refused[i]};
    halo_hal_cuda_image_t image;
    halo_status_t status = compile(scaled, options, 2, &image);
    assert_non_null(status);
    assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
    char quoted[200];
    snprintf(quoted, sizeof(quoted), "'%s' is not one halod passes on",
             refused[i]);
    assert_non_null(strstr(halo_status_message(status), quoted));
    // It lists what halod takes.
    assert_non_null(strstr(halo_status_message(status), "-use_fast_math"));
    halo_status_free(status);
  }
  {
    const char *options[] = {refused[0]};
    halo_hal_cuda_image_t image;
    halo_status_t status = compile(scaled, options, 1, &image);
    print_message("%s\n", halo_status_message(status));
    halo_status_free(status);
  }
  // A value NVRTC would take from the next string.
  const char *valueless[] = {"-I", "-D", "-I ", "-D\tX", "-std="};
  for (size_t i = 0; i < sizeof(valueless) / sizeof(valueless[0]); ++i) {
    const char *options[] = {valueless[i], "-DSCALE=2.0f"};
    halo_hal_cuda_image_t image;
    halo_status_t status = compile(scaled, options, 2, &image);
    assert_non_null(status);
    print_message("%s\n", halo_status_message(status));
    assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(halo_status_message(status), "in the same string"));
    halo_status_free(status);
  }
}

// A CUBIN's ELF tables must lie within it (the driver reads them without a
// size, and crashed on tables that point outside): NVRTC's CUBIN passes,
// each damaged copy is refused naming what is wrong, before the driver.
static halo_status_t check_image(uint32_t format, const uint8_t *bytes,
                                 size_t size) {
  halo_hal_executable_params_t params = {
      .format = format, .data = bytes, .size = size};
  halo_hal_cuda_image_t image;
  halo_status_t status = halo_hal_cuda_compiler_build(&device, &params, &image);
  if (!status) assert_ptr_equal(image.data, bytes);
  return status;
}

static halo_status_t check_cubin(const uint8_t *bytes, size_t size) {
  return check_image(HALO_HAL_EXECUTABLE_FORMAT_CUBIN, bytes, size);
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
  require_sandboxed_nvrtc();
  halo_hal_cuda_image_t image;
  halo_status_t status = compile(kKernel, NULL, 0, &image);
  assert_null(status);
  const uint8_t *cubin = image.data;
  size_t size = image.size;
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
  expect_damaged_tables(cubin, size, false);
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
  free(image.owned);
  // With -G, NVRTC's CUBIN has relocations (of its debug frames).
  const char *debug[] = {"-G"};
  assert_null(compile(kKernel, debug, 1, &image));
  assert_null(check_cubin(image.data, image.size));
  expect_damaged_tables(image.data, image.size, true);
  free(image.owned);
}

// A FATBIN's entries must lie within it, and an ELF image in it must pass
// the CUBIN's checks: NVRTC's CUBIN wrapped as a FATBIN (a 16-byte header,
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
  require_sandboxed_nvrtc();
  halo_hal_cuda_image_t image;
  assert_null(compile(kKernel, NULL, 0, &image));
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
  free(image.owned);
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
  require_sandboxed_nvrtc();
  halo_hal_cuda_image_t image;
  assert_null(compile(kKernel, NULL, 0, &image));
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
             "entry 0's %s stream (%u bytes) does not decompress within its "
             "declared size (%zu bytes)",
             kMethods[m].name, compressed, image.size - 1);
    expect_damaged_fatbin(fatbin, size, 16 + 56, image.size - 1, 8, declared);
    // A stream past its entry's contents.
    expect_damaged_fatbin(fatbin, size, 16 + 16, contents_size + 1, 4,
                          "entry 0's compressed stream");
    // Flagged compressed both ways.
    expect_damaged_fatbin(fatbin, size, 16 + 40, 0x8000 | 0x2000 | 0x11, 8,
                          "both as LZ4 and Zstandard");
    // Declaring more than all compressed entries may decompress to.
    expect_damaged_fatbin(fatbin, size, 16 + 56, (1ull << 30) + 1, 8,
                          "past 1073741824 bytes");
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
  free(damaged);
  free(image.owned);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_source_compiles),
      cmocka_unit_test(test_toolkit_header_is_found),
      cmocka_unit_test(test_include_outside_the_toolkit_is_refused),
      cmocka_unit_test(test_descriptors_stay_out),
      cmocka_unit_test(test_compiler_crash_ends_only_its_compile),
      cmocka_unit_test(test_compile_past_its_timeout_is_killed),
      cmocka_unit_test(test_bad_replies_are_refused),
      cmocka_unit_test(test_compiler_gets_no_other_descriptor),
      cmocka_unit_test(test_options),
      cmocka_unit_test(test_cubin_elf_tables_are_checked),
      cmocka_unit_test(test_fatbin_entries_are_checked),
      cmocka_unit_test(test_compressed_fatbin_entries_are_checked),
      cmocka_unit_test(test_overlapping_tables_are_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
