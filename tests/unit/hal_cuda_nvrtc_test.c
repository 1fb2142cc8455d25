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

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

// After a compile that failed (|failed| holds nothing), no compiler
// process is left behind and the next compile works.
static void expect_next_compile_works(const halo_hal_cuda_image_t *failed) {
  assert_null(failed->owned);
  expect_no_child();
  halo_hal_cuda_image_t image;
  assert_null(compile(kKernel, NULL, 0, &image));
  assert_true(image.size > 0);
  free(image.owned);
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
  expect_next_compile_works(&image);
}

// A library loaded with NVRTC that starts a thread (preloaded here) would
// leave that thread outside the sandbox halo-nvrtc enters after loading:
// the compile is refused, naming the count, and the next one works.
// (Under ThreadSanitizer, whose runtime has a thread of its own, halo-nvrtc
// makes no such check.)
static void test_compiler_with_a_second_thread_is_refused(void **state) {
  (void)state;
  require_sandboxed_nvrtc();
#if defined(__SANITIZE_THREAD__)
  skip();
#else
  // Under AddressSanitizer the preloaded library comes before its runtime
  // in the list of libraries, which it would otherwise refuse.
  const char *asan = getenv("ASAN_OPTIONS");
  char *saved_asan = asan ? strdup(asan) : NULL;
  char options[1024];
  snprintf(options, sizeof(options), "%s%sverify_asan_link_order=0",
           asan ? asan : "", asan && asan[0] ? ":" : "");
  assert_int_equal(setenv("ASAN_OPTIONS", options, 1), 0);
  assert_int_equal(setenv("LD_PRELOAD", HALO_TEST_THREAD_AT_LOAD, 1), 0);
  halo_hal_cuda_image_t image;
  halo_status_t status = compile(kKernel, NULL, 0, &image);
  unsetenv("LD_PRELOAD");
  if (saved_asan) {
    setenv("ASAN_OPTIONS", saved_asan, 1);
  } else {
    unsetenv("ASAN_OPTIONS");
  }
  free(saved_asan);
  expect_error(status, HALO_STATUS_INTERNAL,
               "halo-nvrtc has 2 threads after loading NVRTC",
               "compiles nothing with a thread outside the sandbox");
  expect_next_compile_works(&image);
#endif
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_source_compiles),
      cmocka_unit_test(test_toolkit_header_is_found),
      cmocka_unit_test(test_include_outside_the_toolkit_is_refused),
      cmocka_unit_test(test_descriptors_stay_out),
      cmocka_unit_test(test_compiler_crash_ends_only_its_compile),
      cmocka_unit_test(test_compiler_with_a_second_thread_is_refused),
      cmocka_unit_test(test_compile_past_its_timeout_is_killed),
      cmocka_unit_test(test_bad_replies_are_refused),
      cmocka_unit_test(test_compiler_gets_no_other_descriptor),
      cmocka_unit_test(test_options),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
