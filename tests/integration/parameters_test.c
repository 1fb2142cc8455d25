// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halo_executable_parameters through a real halod (its device worker
// answers the lookup): the test kernels' `add` has four parameters, three
// pointers and a uint32 (local: its HALO_LOCAL_KERNEL_PARAMS declaration;
// CUDA: cuFuncGetParamInfo of the nvcc-built twin); the count alone, a
// short capacity, an unknown entry (NOT_FOUND naming it), an undeclared
// local kernel (UNIMPLEMENTED) and a declared kernel of no parameters. The
// declaration also makes halod check dispatches of `add` at record time.
// A local kernel written in C++ loads and runs (its symbols have C names).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/halo_test.h"

static void test_add_has_four_parameters(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *executable = halo_test_load_kernels(client);
  halo_parameter_t parameters[8];
  memset(parameters, 0xff, sizeof(parameters));
  size_t count = 99;
  HALO_TEST_ASSERT_OK(
      halo_executable_parameters(executable, "add", parameters, 8, &count));
  assert_int_equal(count, 4);
  const uint32_t sizes[4] = {8, 8, 8, 4};
  const uint32_t offsets[4] = {0, 8, 16, 24};
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(parameters[i].size, sizes[i]);
    assert_int_equal(parameters[i].offset, offsets[i]);
  }
  // Untouched past the count.
  assert_int_equal(parameters[4].size, 0xffffffffu);

  // The count alone, then a capacity shorter than the list.
  count = 0;
  HALO_TEST_ASSERT_OK(
      halo_executable_parameters(executable, "add", NULL, 0, &count));
  assert_int_equal(count, 4);
  memset(parameters, 0, sizeof(parameters));
  HALO_TEST_ASSERT_OK(
      halo_executable_parameters(executable, "add", parameters, 2, &count));
  assert_int_equal(count, 4);
  assert_int_equal(parameters[1].offset, 8);
  assert_int_equal(parameters[2].size, 0);

  // Bad arguments are named.
  halo_status_t status =
      halo_executable_parameters(executable, "add", NULL, 3, &count);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "out_parameters"));
  halo_status_free(status);
  status = halo_executable_parameters(executable, "", parameters, 8, &count);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(status);

  // An entry the executable does not have.
  status = halo_executable_parameters(executable, "no_such_kernel", parameters,
                                      8, &count);
  assert_int_equal(halo_status_code(status), HALO_STATUS_NOT_FOUND);
  assert_non_null(strstr(halo_status_message(status), "no_such_kernel"));
  assert_int_equal(count, 0);
  halo_status_free(status);

  halo_executable_release(executable);
  halo_client_close(client);
}

static void test_local_declarations(void **state) {
  HALO_TEST_LOCAL_ONLY("HALO_LOCAL_KERNEL_PARAMS is the local driver's");
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *executable = halo_test_load_kernels(client);
  halo_parameter_t parameters[4];
  size_t count = 99;
  // Declared with HALO_LOCAL_KERNEL_NO_PARAMS.
  HALO_TEST_ASSERT_OK(
      halo_executable_parameters(executable, "crash", parameters, 4, &count));
  assert_int_equal(count, 0);
  // Not declared: the driver cannot tell.
  halo_status_t status =
      halo_executable_parameters(executable, "ids", parameters, 4, &count);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNIMPLEMENTED);
  assert_non_null(strstr(halo_status_message(status), "'ids'"));
  assert_non_null(
      strstr(halo_status_message(status), "HALO_LOCAL_KERNEL_PARAMS"));
  halo_status_free(status);
  halo_executable_release(executable);
  halo_client_close(client);
}

// The declaration checks dispatches at record time, as CUDA's parameter
// information does: a wrong count or size fails end() naming the entry.
static void test_declared_parameters_check_dispatches(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *executable = halo_test_load_kernels(client);
  uint64_t n64 = 16;
  halo_dispatch_arg_t args[4] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(0, 0, 64), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(1, 0, 64), NULL, 0},
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(2, 0, 64), NULL, 0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, &n64, sizeof(n64)},  // 8, not 4
  };
  halo_dispatch_params_t params = {.executable = executable,
                                   .entry = "add",
                                   .grid = {1, 1, 1},
                                   .block = {16, 1, 1},
                                   .args = args,
                                   .arg_count = 4};
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 3);
  halo_status_t status = halo_command_buffer_dispatch(cb, &params);
  if (!status) status = halo_command_buffer_end(cb);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "parameter 3"));
  halo_status_free(status);
  halo_command_buffer_release(cb);

  params.arg_count = 3;
  cb = halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 3);
  status = halo_command_buffer_dispatch(cb, &params);
  if (!status) status = halo_command_buffer_end(cb);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "takes 4 parameters"));
  halo_status_free(status);
  halo_command_buffer_release(cb);
  halo_executable_release(executable);
  halo_client_close(client);
}

// A local kernel written in C++ (tests/kernels/cxx_kernel.cpp): halod finds
// its entry and its declaration by their C names, and runs it. Before
// HALO_LOCAL_KERNEL gave the entry C linkage, its symbol was C++'s mangled
// name and the dispatch failed NOT_FOUND ("no entry point 'add'").
static void test_cxx_local_kernel(void **state) {
  HALO_TEST_LOCAL_ONLY("a C++ kernel is an ELF shared object");
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *executable = NULL;
  HALO_TEST_ASSERT_OK(halo_executable_create_from_file(
      client, 0, HALO_TEST_KERNELS_CXX, 0, &executable));
  halo_parameter_t parameters[8];
  size_t count = 99;
  HALO_TEST_ASSERT_OK(
      halo_executable_parameters(executable, "add", parameters, 8, &count));
  assert_int_equal(count, 4);
  assert_int_equal(parameters[3].size, 4);
  assert_int_equal(parameters[3].offset, 24);
  HALO_TEST_ASSERT_OK(
      halo_executable_parameters(executable, "nothing", parameters, 8, &count));
  assert_int_equal(count, 0);

  enum { N = 1000 };
  uint32_t n = N;
  halo_command_buffer_t *cb =
      halo_test_record_vector_add(client, executable, &n);
  halo_buffer_t *buffers[3];
  float *host[3];
  for (int k = 0; k < 3; ++k) {
    buffers[k] = halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE,
                                         N * sizeof(float), 0);
    host[k] = halo_buffer_host_pointer(buffers[k]);
  }
  for (int i = 0; i < N; ++i) {
    host[0][i] = (float)i;
    host[1][i] = 0.5f;
    host[2][i] = -1.0f;
  }
  halo_binding_t bindings[3];
  for (int k = 0; k < 3; ++k) {
    bindings[k] = (halo_binding_t){buffers[k], 0, HALO_WHOLE_BUFFER};
  }
  halo_semaphore_t *done = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, bindings, 3, NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, 1, 10ll * 1000000000));
  for (int i = 0; i < N; ++i) {
    if (host[2][i] != (float)i + 0.5f) {
      fail_msg("c[%d] = %g, expected %g", i, host[2][i], (float)i + 0.5f);
    }
  }
  halo_semaphore_release(done);
  for (int k = 0; k < 3; ++k) halo_buffer_release(buffers[k]);
  halo_command_buffer_release(cb);
  halo_executable_release(executable);
  halo_client_close(client);
}

int main(void) {
  halo_test_require_driver();
  const struct CMUnitTest tests[] = {
#define TEST(name)                                               \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
      TEST(test_add_has_four_parameters),
      TEST(test_local_declarations),
      TEST(test_declared_parameters_check_dispatches),
      TEST(test_cxx_local_kernel),
#undef TEST
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
