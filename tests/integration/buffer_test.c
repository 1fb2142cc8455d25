// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of buffers through libhalo: host-visible buffers
// (shared memory mapped by client and daemon, sub-allocated from
// per-session arenas; exportable ones on their own memfd), device buffers
// (read and written through the daemon in chunks), ranges, sizes, export
// and import, and the admin API's counters.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

static halo_buffer_t *create(halo_client_t *client, halo_memory_type_t type,
                             uint64_t size, uint32_t flags) {
  halo_buffer_t *buffer = NULL;
  HALO_TEST_ASSERT_OK(
      halo_buffer_create(client, 0, type, size, flags, &buffer));
  assert_non_null(buffer);
  assert_int_equal(halo_buffer_size(buffer), size);
  assert_int_equal(halo_buffer_memory_type(buffer), type);
  assert_int_not_equal(halo_buffer_handle(buffer), 0);
  return buffer;
}

static void fill_pattern(uint8_t *bytes, size_t length, unsigned seed) {
  for (size_t i = 0; i < length; ++i) {
    bytes[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 12)) & 0xff);
  }
}

static void test_host_visible_read_write(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_buffer_t *buffer =
      create(fixture->client, HALO_MEMORY_HOST_VISIBLE, 10000, 0);
  uint8_t *host = halo_buffer_host_pointer(buffer);
  assert_non_null(host);
  // Fresh memory reads as zero.
  uint8_t zeros[10000] = {0};
  assert_memory_equal(host, zeros, sizeof(zeros));
  uint8_t data[10000];
  fill_pattern(data, sizeof(data), 1);
  HALO_TEST_ASSERT_OK(halo_buffer_write(buffer, 0, data, sizeof(data)));
  assert_memory_equal(host, data, sizeof(data));
  host[5000] = 0x77;
  uint8_t back[100];
  HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, 4950, back, sizeof(back)));
  assert_int_equal(back[50], 0x77);
  assert_memory_equal(back, data + 4950, 50);
  halo_buffer_release(buffer);
}

static void test_device_read_write_in_chunks(void **state) {
  halo_test_fixture_t *fixture = *state;
  // More than three wire chunks, not a multiple of one.
  size_t size = 3 * HALO_WIRE_MAX_CHUNK_BYTES + 12345;
  halo_buffer_t *buffer = create(fixture->client, HALO_MEMORY_DEVICE, size, 0);
  assert_null(halo_buffer_host_pointer(buffer));
  uint8_t *data = malloc(size);
  uint8_t *back = malloc(size);
  assert_non_null(data);
  assert_non_null(back);
  fill_pattern(data, size, 2);
  HALO_TEST_ASSERT_OK(halo_buffer_write(buffer, 0, data, size));
  memset(back, 0, size);
  HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, 0, back, size));
  assert_memory_equal(back, data, size);
  // Unaligned partial reads and writes straddling chunk boundaries.
  uint64_t offset = HALO_WIRE_MAX_CHUNK_BYTES - 3;
  uint8_t patch[10] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  HALO_TEST_ASSERT_OK(halo_buffer_write(buffer, offset, patch, sizeof(patch)));
  memcpy(data + offset, patch, sizeof(patch));
  HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, offset - 100, back, 1000));
  assert_memory_equal(back, data + offset - 100, 1000);
  // Zero-length access at the end is fine.
  HALO_TEST_ASSERT_OK(halo_buffer_read(buffer, size, back, 0));
  free(data);
  free(back);
  halo_buffer_release(buffer);
}

static void test_out_of_range(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_memory_type_t types[2] = {HALO_MEMORY_HOST_VISIBLE, HALO_MEMORY_DEVICE};
  for (int t = 0; t < 2; ++t) {
    halo_buffer_t *buffer = create(fixture->client, types[t], 4096, 0);
    uint8_t bytes[16] = {0};
    HALO_TEST_ASSERT_CODE(halo_buffer_write(buffer, 4090, bytes, 16),
                          HALO_STATUS_OUT_OF_RANGE);
    HALO_TEST_ASSERT_CODE(halo_buffer_read(buffer, 4096, bytes, 1),
                          HALO_STATUS_OUT_OF_RANGE);
    // offset + length overflows 64 bits.
    HALO_TEST_ASSERT_CODE(halo_buffer_read(buffer, UINT64_MAX, bytes, 2),
                          HALO_STATUS_OUT_OF_RANGE);
    HALO_TEST_ASSERT_CODE(halo_buffer_write(buffer, UINT64_MAX - 7, bytes, 16),
                          HALO_STATUS_OUT_OF_RANGE);
    HALO_TEST_ASSERT_OK(halo_buffer_write(buffer, 4080, bytes, 16));
    halo_buffer_release(buffer);
  }
}

static void test_bad_create_arguments(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_buffer_t *buffer = (halo_buffer_t *)fixture;
  HALO_TEST_ASSERT_CODE(
      halo_buffer_create(fixture->client, 0, HALO_MEMORY_HOST_VISIBLE, 0, 0,
                         &buffer),
      HALO_STATUS_INVALID_ARGUMENT);
  assert_null(buffer);
  HALO_TEST_ASSERT_CODE(
      halo_buffer_create(fixture->client, 0, HALO_MEMORY_DEVICE,
                         (1ull << 40) + 1, 0, &buffer),
      HALO_STATUS_INVALID_ARGUMENT);
  HALO_TEST_ASSERT_CODE(halo_buffer_create(fixture->client, 99,
                                           HALO_MEMORY_DEVICE, 64, 0, &buffer),
                        HALO_STATUS_OUT_OF_RANGE);
  HALO_TEST_ASSERT_CODE(
      halo_buffer_create(fixture->client, 0, (halo_memory_type_t)7, 64, 0,
                         &buffer),
      HALO_STATUS_INVALID_ARGUMENT);
  HALO_TEST_ASSERT_CODE(
      halo_buffer_create(fixture->client, 0, HALO_MEMORY_DEVICE, 64, 0, NULL),
      HALO_STATUS_INVALID_ARGUMENT);
  // The session holds nothing after all that.
  Halo__Wire__SessionInfo info;
  assert_true(halo_test_admin_find_session(&fixture->daemon, getpid(), &info));
  assert_int_equal(info.buffers, 0);
  assert_int_equal(info.host_bytes, 0);
  assert_int_equal(info.device_bytes, 0);
}

static void test_export_import_host_visible(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *other = halo_test_connect(&fixture->daemon, 0);
  halo_buffer_t *original = create(fixture->client, HALO_MEMORY_HOST_VISIBLE,
                                   8192, HALO_OBJECT_FLAG_EXPORTABLE);
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_buffer_export(original, &token));
  halo_buffer_t *imported = NULL;
  HALO_TEST_ASSERT_OK(halo_buffer_import(other, &token, &imported));
  assert_int_equal(halo_buffer_size(imported), 8192);
  assert_int_equal(halo_buffer_memory_type(imported), HALO_MEMORY_HOST_VISIBLE);
  uint8_t *a = halo_buffer_host_pointer(original);
  uint8_t *b = halo_buffer_host_pointer(imported);
  assert_non_null(a);
  assert_non_null(b);
  // One memory, two mappings.
  a[0] = 1;
  b[8191] = 2;
  assert_int_equal(b[0], 1);
  assert_int_equal(a[8191], 2);
  uint8_t data[64];
  fill_pattern(data, sizeof(data), 3);
  HALO_TEST_ASSERT_OK(halo_buffer_write(imported, 100, data, sizeof(data)));
  assert_memory_equal(a + 100, data, sizeof(data));
  // The creator releasing its reference keeps the importer's alive.
  halo_buffer_release(original);
  uint8_t back[64];
  HALO_TEST_ASSERT_OK(halo_buffer_read(imported, 100, back, sizeof(back)));
  assert_memory_equal(back, data, sizeof(data));
  halo_buffer_release(imported);
  halo_client_close(other);
}

static void test_export_import_device(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *other = halo_test_connect(&fixture->daemon, 0);
  halo_buffer_t *original = create(fixture->client, HALO_MEMORY_DEVICE, 4096,
                                   HALO_OBJECT_FLAG_EXPORTABLE);
  uint8_t data[4096];
  fill_pattern(data, sizeof(data), 4);
  HALO_TEST_ASSERT_OK(halo_buffer_write(original, 0, data, sizeof(data)));
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_buffer_export(original, &token));
  halo_buffer_t *imported = NULL;
  HALO_TEST_ASSERT_OK(halo_buffer_import(other, &token, &imported));
  assert_null(halo_buffer_host_pointer(imported));
  uint8_t back[4096];
  HALO_TEST_ASSERT_OK(halo_buffer_read(imported, 0, back, sizeof(back)));
  assert_memory_equal(back, data, sizeof(data));
  halo_buffer_release(imported);
  halo_buffer_release(original);
  halo_client_close(other);
}

static void test_export_requires_flag_and_import_needs_known_token(
    void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_buffer_t *buffer =
      create(fixture->client, HALO_MEMORY_HOST_VISIBLE, 64, 0);
  halo_token_t token;
  HALO_TEST_ASSERT_CODE(halo_buffer_export(buffer, &token),
                        HALO_STATUS_FAILED_PRECONDITION);
  halo_buffer_release(buffer);
  memset(&token, 0x17, sizeof(token));
  halo_buffer_t *imported = (halo_buffer_t *)fixture;
  HALO_TEST_ASSERT_CODE(halo_buffer_import(fixture->client, &token, &imported),
                        HALO_STATUS_NOT_FOUND);
  assert_null(imported);
  // A semaphore's token does not import as a buffer.
  halo_semaphore_t *semaphore = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(
      fixture->client, 0, HALO_OBJECT_FLAG_EXPORTABLE, &semaphore));
  HALO_TEST_ASSERT_OK(halo_semaphore_export(semaphore, &token));
  HALO_TEST_ASSERT_CODE(halo_buffer_import(fixture->client, &token, &imported),
                        HALO_STATUS_NOT_FOUND);
  halo_semaphore_release(semaphore);
  // A released exported buffer's token is dead.
  buffer = create(fixture->client, HALO_MEMORY_HOST_VISIBLE, 64,
                  HALO_OBJECT_FLAG_EXPORTABLE);
  HALO_TEST_ASSERT_OK(halo_buffer_export(buffer, &token));
  halo_buffer_release(buffer);
  HALO_TEST_ASSERT_CODE(halo_buffer_import(fixture->client, &token, &imported),
                        HALO_STATUS_NOT_FOUND);
}

static void test_admin_counts_and_arenas(void **state) {
  halo_test_fixture_t *fixture = *state;
  enum { COUNT = 100 };
  halo_buffer_t *buffers[COUNT];
  for (int i = 0; i < COUNT; ++i) {
    buffers[i] = create(fixture->client, HALO_MEMORY_HOST_VISIBLE, 4096, 0);
    // Distinct, non-overlapping memory.
    memset(halo_buffer_host_pointer(buffers[i]), i, 4096);
  }
  for (int i = 0; i < COUNT; ++i) {
    uint8_t *host = halo_buffer_host_pointer(buffers[i]);
    assert_int_equal(host[0], i);
    assert_int_equal(host[4095], i);
  }
  halo_buffer_t *device =
      create(fixture->client, HALO_MEMORY_DEVICE, 1 << 20, 0);
  Halo__Wire__SessionInfo info;
  assert_true(halo_test_admin_find_session(&fixture->daemon, getpid(), &info));
  assert_int_equal(info.buffers, COUNT + 1);
  assert_true(info.host_bytes >= COUNT * 4096ull);
  assert_true(info.device_bytes >= 1ull << 20);
  // Sub-allocated: far fewer arenas (mappings) than buffers.
  assert_true(info.arenas >= 1);
  assert_true(info.arenas <= 4);
  for (int i = 0; i < COUNT; ++i) halo_buffer_release(buffers[i]);
  halo_buffer_release(device);
  assert_true(halo_test_admin_find_session(&fixture->daemon, getpid(), &info));
  assert_int_equal(info.buffers, 0);
  assert_int_equal(info.host_bytes, 0);
  assert_int_equal(info.device_bytes, 0);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name)                                                  \
  cmocka_unit_test_setup_teardown(name, halo_test_fixture_setup, \
                                  halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_host_visible_read_write),
      T(test_device_read_write_in_chunks),
      T(test_out_of_range),
      T(test_bad_create_arguments),
      T(test_export_import_host_visible),
      T(test_export_import_device),
      T(test_export_requires_flag_and_import_needs_known_token),
      T(test_admin_counts_and_arenas),
  };
#undef T
  return cmocka_run_group_tests_name("buffer", tests, NULL, NULL);
}
