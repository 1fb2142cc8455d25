// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of session-recording-bytes, the per-session quota on
// what command buffers' recordings cost halod and the device worker (a
// ONE_SHOT recording of 65,536 barriers kept about 11 MB in each, and
// nothing bounded how many a session kept). A session records command
// buffers until refused with RESOURCE_EXHAUSTED naming the quota and the
// bytes in use, as many as the quota holds by halod's own count; it keeps
// working; a command buffer released makes room for one more; another
// session is unaffected; a memoized recording another session prepared is
// charged to each session that holds it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

#define QUOTA "4M"
#define QUOTA_BYTES 4194304ull
#define BARRIERS 1000  // per recording: about 320 KB, halod's and worker's
#define FLOOD_MAX 100  // bound on the recordings a flood creates

// An ended recording of a fill of |tag| (recordings of different tags are
// not shared) and BARRIERS barriers; the status of end(). On failure the
// command buffer is released and |*out| NULL.
static halo_status_t record(halo_client_t *client, uint32_t flags, uint32_t tag,
                            halo_command_buffer_t **out) {
  halo_command_buffer_t *command_buffer = halo_test_begin(client, flags, 1);
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      command_buffer, halo_binding_ref(0, 0, 4), &tag, sizeof(tag)));
  for (uint32_t i = 0; i < BARRIERS; ++i) {
    HALO_TEST_ASSERT_OK(halo_command_buffer_barrier(command_buffer));
  }
  halo_status_t status = halo_command_buffer_end(command_buffer);
  if (status) {
    halo_command_buffer_release(command_buffer);
    command_buffer = NULL;
  }
  *out = command_buffer;
  return status;
}

static void expect_refused(halo_status_t status, const char *what) {
  static const char *const kSubstrings[] = {
      "exceeds the session's quota session-recording-bytes",
      "of 4194304 bytes in use", NULL};
  halo_test_expect_status_all(status, HALO_STATUS_RESOURCE_EXHAUSTED,
                              kSubstrings, what);
}

// The recording bytes halod charges the sessions of this process, together
// (haloctl clients --json shows each session's as recording_bytes).
static uint64_t charged(const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo_test_admin_sessions(daemon);
  uint64_t bytes = 0;
  for (size_t i = 0; i < response->admin_sessions->n_sessions; ++i) {
    const Halo__Wire__SessionInfo *info = response->admin_sessions->sessions[i];
    if ((pid_t)info->pid != getpid()) continue;
    assert_true(info->has_recording_bytes);
    bytes += info->recording_bytes;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return bytes;
}

// The command buffer's recording runs: the session is still usable.
static void expect_executes(halo_client_t *client,
                            halo_command_buffer_t *command_buffer) {
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_buffer_t *buffer =
      halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE, 4096, 0);
  halo_semaphore_t *done = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  halo_binding_t binding = {buffer, 0, HALO_WHOLE_BUFFER};
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_ASSERT_OK(halo_queue_execute(NULL, command_buffer, &binding, 1,
                                         NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(done, 1, 5000 * HALO_TEST_MS));
  halo_semaphore_release(done);
  halo_buffer_release(buffer);
}

static void test_recording_quota(void **state) {
  const char *args[] = {"--session-recording-bytes", QUOTA, NULL};
  halo_test_fixture_setup_with(state, args, true);
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = fixture->client;
  halo_command_buffer_t **held = calloc(FLOOD_MAX, sizeof(*held));
  assert_non_null(held);

  // What one recording costs, by halod's count: the commands alone are
  // BARRIERS x about 170 bytes, in halod and again in the worker.
  HALO_TEST_ASSERT_OK(
      record(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0, &held[0]));
  uint64_t each = charged(&fixture->daemon);
  printf("one recording of %u barriers: %llu bytes charged\n", BARRIERS + 1,
         (unsigned long long)each);
  assert_true(each > (uint64_t)BARRIERS * 2 * 100);
  assert_true(each < QUOTA_BYTES / 4);

  // Until refused: exactly as many as the quota holds.
  uint32_t count = 1;
  halo_status_t status = NULL;
  for (; count < FLOOD_MAX; ++count) {
    status = record(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0, &held[count]);
    if (status) break;
  }
  assert_true(count < FLOOD_MAX);
  printf("session-recording-bytes %s: %u recordings, then refused\n", QUOTA,
         count);
  assert_int_equal(count, QUOTA_BYTES / each);
  assert_int_equal(charged(&fixture->daemon), count * each);
  expect_refused(status, "past the quota");

  // The session still works: it runs one of its recordings.
  expect_executes(client, held[0]);
  // Released, a recording's bytes are the session's again: one more fits,
  // and no more.
  halo_command_buffer_release(held[0]);
  assert_int_equal(charged(&fixture->daemon), (count - 1) * each);
  HALO_TEST_ASSERT_OK(
      record(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0, &held[0]));
  halo_command_buffer_t *extra = NULL;
  expect_refused(record(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0, &extra),
                 "full again");

  // Another session is unaffected: it records as many of its own.
  halo_client_t *other = halo_test_connect(&fixture->daemon, 10000);
  halo_command_buffer_t *shared = NULL;
  HALO_TEST_ASSERT_OK(record(other, HALO_COMMAND_BUFFER_REUSABLE, 7, &shared));
  assert_false(halo_command_buffer_memo_hit(shared));
  halo_command_buffer_t *mine = NULL;
  HALO_TEST_ASSERT_OK(record(other, HALO_COMMAND_BUFFER_ONE_SHOT, 0, &mine));
  expect_executes(other, mine);
  // The recording it prepared is charged to the full session as well, so
  // sharing it is refused there too.
  halo_command_buffer_t *hit = NULL;
  expect_refused(record(client, HALO_COMMAND_BUFFER_REUSABLE, 7, &hit),
                 "a memoized recording");
  halo_command_buffer_release(held[1]);
  HALO_TEST_ASSERT_OK(record(client, HALO_COMMAND_BUFFER_REUSABLE, 7, &hit));
  assert_true(halo_command_buffer_memo_hit(hit));
  // Both sessions are charged for it: the first holds count recordings
  // again, the other its shared one and its own.
  assert_int_equal(charged(&fixture->daemon), (count + 2) * each);

  // The first session ends with everything it held; the other goes on.
  halo_command_buffer_release(hit);
  for (uint32_t i = 0; i < count; ++i) {
    if (i != 1) halo_command_buffer_release(held[i]);
  }
  halo_client_close(client);
  fixture->client = NULL;
  // What the first session held went with it.
  assert_true(HALO_TEST_POLL(charged(&fixture->daemon) == 2 * each,
                             HALO_TEST_DEADLINE_MS));
  halo_command_buffer_t *again = NULL;
  HALO_TEST_ASSERT_OK(record(other, HALO_COMMAND_BUFFER_ONE_SHOT, 0, &again));
  halo_command_buffer_release(again);
  halo_command_buffer_release(mine);
  halo_command_buffer_release(shared);
  halo_client_close(other);
  free(held);
}

// One recording larger than the whole quota is refused in an empty
// session: before its commands are even kept where halod's count of them
// alone is past it, else once its inline bytes are counted too.
static void test_recording_larger_than_quota(void **state) {
  const char *args[] = {"--session-recording-bytes", "64K", NULL};
  halo_test_fixture_setup_with(state, args, true);
  halo_test_fixture_t *fixture = *state;
  halo_command_buffer_t *command_buffer = NULL;
  static const char *const kSubstrings[] = {
      "command buffer of at least", "(1001 commands)",
      "session-recording-bytes (0 of 65536 bytes in use", NULL};
  halo_test_expect_status_all(
      record(fixture->client, HALO_COMMAND_BUFFER_ONE_SHOT, 0, &command_buffer),
      HALO_STATUS_RESOURCE_EXHAUSTED, kSubstrings, "larger than the quota");
  assert_int_equal(charged(&fixture->daemon), 0);
  // Its commands fit, its inline bytes (kept in halod and the worker) do
  // not: refused once they are counted.
  command_buffer =
      halo_test_begin(fixture->client, HALO_COMMAND_BUFFER_ONE_SHOT, 1);
  static uint8_t bytes[60000];
  HALO_TEST_ASSERT_OK(halo_command_buffer_update(
      command_buffer, bytes, sizeof(bytes), halo_binding_ref(0, 0, 60000)));
  static const char *const kInline[] = {
      "command buffer of ", "bytes (1 command) exceeds the session's quota",
      "session-recording-bytes (0 of 65536 bytes in use", NULL};
  halo_status_t status = halo_command_buffer_end(command_buffer);
  assert_non_null(status);
  assert_null(strstr(halo_status_message(status), "at least"));
  halo_test_expect_status_all(status, HALO_STATUS_RESOURCE_EXHAUSTED, kInline,
                              "inline bytes past the quota");
  halo_command_buffer_release(command_buffer);
  assert_int_equal(charged(&fixture->daemon), 0);
  // A smaller one fits, and the session works.
  command_buffer =
      halo_test_begin(fixture->client, HALO_COMMAND_BUFFER_ONE_SHOT, 1);
  HALO_TEST_ASSERT_OK(halo_command_buffer_update(command_buffer, bytes, 1000,
                                                 halo_binding_ref(0, 0, 1000)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(command_buffer));
  assert_true(charged(&fixture->daemon) > 2000);
  expect_executes(fixture->client, command_buffer);
  halo_command_buffer_release(command_buffer);
  assert_int_equal(charged(&fixture->daemon), 0);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name) cmocka_unit_test_teardown(name, halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_recording_quota),
      T(test_recording_larger_than_quota),
  };
#undef T
  return cmocka_run_group_tests_name("recording_quota", tests, NULL, NULL);
}
