// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration tests of memo-cache-bytes, the bound in bytes on the prepared
// REUSABLE recordings the memo cache keeps after their last release (a
// recording costs halod and its worker up to some 20 MiB each; bounded by
// memo-cache-entries alone, 256 released ones could pin 5 GiB, charged to no
// session). Each recording counts as session-recording-bytes counts it
// (haloctl clients' recording_bytes while held). Released recordings of
// known size: the cached bytes (halo_memo_cache_bytes, haloctl cache) never
// pass the bound; the least recently used goes first (a recording recorded
// again is a memo hit only if still kept); one larger than the bound is not
// kept, and leaves the others kept; a reload that lowers the bound trims at
// once, and 0 keeps nothing, like memo-cache-entries 0.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/admin.h"
#include "tests/support/halo_test.h"

#define BOUND "1M"
#define BOUND_BYTES 1048576ull
#define BARRIERS 1000  // per recording: about 320 KB, halod's and worker's

// An ended REUSABLE recording of a fill of |tag| (recordings of different
// tags are not shared, of one tag are) and |barriers| barriers.
static halo_command_buffer_t *record(halo_client_t *client, uint32_t tag,
                                     uint32_t barriers) {
  halo_command_buffer_t *command_buffer =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 1);
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      command_buffer, halo_binding_ref(0, 0, 4), &tag, sizeof(tag)));
  for (uint32_t i = 0; i < barriers; ++i) {
    HALO_TEST_ASSERT_OK(halo_command_buffer_barrier(command_buffer));
  }
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(command_buffer));
  return command_buffer;
}

// Records |tag| and whether it was a memo hit; releases it again.
static bool hit_and_release(halo_client_t *client, uint32_t tag) {
  halo_command_buffer_t *command_buffer = record(client, tag, BARRIERS);
  bool hit = halo_command_buffer_memo_hit(command_buffer);
  halo_command_buffer_release(command_buffer);
  return hit;
}

// The recording bytes halod charges this process's sessions: what the
// recordings held now cost (haloctl clients --json: recording_bytes).
static uint64_t charged(const halo_test_daemon_t *daemon) {
  halo_wire_response_t *response = halo_test_admin_sessions(daemon);
  uint64_t bytes = 0;
  for (size_t i = 0; i < response->admin_sessions->n_sessions; ++i) {
    const Halo__Wire__SessionInfo *info = response->admin_sessions->sessions[i];
    if ((pid_t)info->pid == getpid()) bytes += info->recording_bytes;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return bytes;
}

static uint64_t cached_bytes(const halo_test_daemon_t *daemon) {
  return halo_test_admin_metric(daemon, "halo_memo_cache_bytes ");
}

static uint64_t cached(const halo_test_daemon_t *daemon) {
  return halo_test_admin_metric(daemon, "halo_memo_cache_cached ");
}

static uint64_t evictions(const halo_test_daemon_t *daemon) {
  return halo_test_admin_metric(daemon, "halo_memo_cache_evictions_total ");
}

// haloctl cache's memo summary says the same as the metric.
static void expect_summary(const halo_test_daemon_t *daemon, uint64_t bytes,
                           uint64_t bound) {
  halo_admin_t *admin = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_connect(daemon->admin_address, 5000, &admin));
  halo_wire_response_t *response = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_memo_cache(admin, &response));
  const Halo__Wire__CacheSummary *memo = response->admin_memo_cache->memo;
  assert_non_null(memo);
  assert_true(memo->has_cached_bytes && memo->has_capacity_bytes);
  assert_int_equal(memo->cached_bytes, bytes);
  assert_int_equal(memo->capacity_bytes, bound);
  halo__wire__response__free_unpacked(response, NULL);
  halo_admin_close(admin);
}

// What one recording of BARRIERS barriers costs, by halod's count: the
// charge of it held, and once released the cache's bytes.
static uint64_t measure(halo_test_fixture_t *fixture, uint32_t tag) {
  halo_command_buffer_t *command_buffer =
      record(fixture->client, tag, BARRIERS);
  assert_false(halo_command_buffer_memo_hit(command_buffer));
  uint64_t each = charged(&fixture->daemon);
  assert_true(each > (uint64_t)BARRIERS * 2 * 100);
  assert_int_equal(cached_bytes(&fixture->daemon), 0);
  halo_command_buffer_release(command_buffer);
  assert_int_equal(cached_bytes(&fixture->daemon), each);
  assert_int_equal(cached(&fixture->daemon), 1);
  return each;
}

static void test_bytes_bound_and_order(void **state) {
  const char *args[] = {"--memo-cache-bytes", BOUND, NULL};
  halo_test_fixture_setup_with(state, args, true);
  halo_test_fixture_t *fixture = *state;
  halo_test_daemon_t *daemon = &fixture->daemon;
  halo_client_t *client = fixture->client;

  uint64_t each = measure(fixture, 0);
  uint64_t kept = BOUND_BYTES / each;
  printf(
      "one recording of %u barriers: %llu bytes; memo-cache-bytes %s "
      "keeps %llu\n",
      BARRIERS + 1, (unsigned long long)each, BOUND, (unsigned long long)kept);
  assert_int_equal(kept, 3);

  // Released one after another: never more than the bound, the oldest out.
  for (uint32_t tag = 1; tag <= 5; ++tag) {
    halo_command_buffer_release(record(client, tag, BARRIERS));
    uint64_t bytes = cached_bytes(daemon);
    assert_true(bytes <= BOUND_BYTES);
    assert_int_equal(bytes, (tag + 1 < kept ? tag + 1 : kept) * each);
  }
  assert_int_equal(cached(daemon), 3);  // 5, 4, 3 (most recent first)
  assert_int_equal(evictions(daemon), 3);
  expect_summary(daemon, 3 * each, BOUND_BYTES);

  // Used again, the least recently used becomes the most: the next
  // release evicts the one after it.
  assert_true(hit_and_release(client, 3));                   // 3, 5, 4
  halo_command_buffer_release(record(client, 6, BARRIERS));  // 6, 3, 5
  assert_int_equal(evictions(daemon), 4);
  assert_int_equal(cached_bytes(daemon), 3 * each);
  uint64_t hits = halo_test_admin_metric(daemon, "halo_memo_cache_hits_total ");
  halo_command_buffer_t *held[5];
  static const uint32_t kTags[5] = {5, 3, 6, 4, 2};
  for (uint32_t i = 0; i < 5; ++i) held[i] = record(client, kTags[i], BARRIERS);
  assert_true(halo_command_buffer_memo_hit(held[0]));
  assert_true(halo_command_buffer_memo_hit(held[1]));
  assert_true(halo_command_buffer_memo_hit(held[2]));
  assert_false(halo_command_buffer_memo_hit(held[3]));  // evicted by 6
  assert_false(halo_command_buffer_memo_hit(held[4]));  // evicted by 5
  assert_int_equal(
      halo_test_admin_metric(daemon, "halo_memo_cache_hits_total "), hits + 3);
  // Held again, they are not the cache's.
  assert_int_equal(cached(daemon), 0);
  assert_int_equal(cached_bytes(daemon), 0);
  for (uint32_t i = 0; i < 5; ++i) halo_command_buffer_release(held[i]);
  assert_int_equal(cached_bytes(daemon), 3 * each);  // 2, 4, 6

  // One recording larger than the bound is not kept, and evicts nothing.
  halo_command_buffer_t *big = record(client, 100, 4 * BARRIERS);
  uint64_t big_bytes = charged(daemon);
  printf("one recording of %u barriers: %llu bytes\n", 4 * BARRIERS + 1,
         (unsigned long long)big_bytes);
  assert_true(big_bytes > BOUND_BYTES);
  uint64_t evicted = evictions(daemon);
  halo_command_buffer_release(big);
  assert_int_equal(cached(daemon), 3);
  assert_int_equal(cached_bytes(daemon), 3 * each);
  assert_int_equal(evictions(daemon), evicted);
  big = record(client, 100, 4 * BARRIERS);
  assert_false(halo_command_buffer_memo_hit(big));
  halo_command_buffer_release(big);
  // What was kept still is.
  assert_true(hit_and_release(client, 4));
  assert_true(hit_and_release(client, 2));
  assert_true(hit_and_release(client, 6));
  assert_int_equal(cached_bytes(daemon), 3 * each);
}

// The daemon reading memo-cache-bytes from a config file that the test
// rewrites before SIGHUP.
static char reload_config[64];

static void write_config(const char *text) {
  FILE *file = fopen(reload_config, "w");
  assert_non_null(file);
  assert_true(fputs(text, file) >= 0);
  assert_int_equal(fclose(file), 0);
}

static void reload(halo_test_fixture_t *fixture, const char *text,
                   uint64_t bytes) {
  write_config(text);
  assert_int_equal(kill(fixture->daemon.pid, SIGHUP), 0);
  assert_true(HALO_TEST_POLL(cached_bytes(&fixture->daemon) == bytes,
                             HALO_TEST_DEADLINE_MS));
}

// A reload that lowers the bound trims at once, the most recently used
// kept; 0 keeps nothing (memo-cache-entries 0 alike).
static void test_reload_lowers_the_bound(void **state) {
  snprintf(reload_config, sizeof(reload_config), "/tmp/halo-memo-XXXXXX");
  int fd = mkstemp(reload_config);
  assert_true(fd >= 0);
  close(fd);
  write_config("memo-cache-bytes = " BOUND "\n");
  const char *args[] = {"--config", reload_config, NULL};
  halo_test_fixture_setup_with(state, args, true);
  halo_test_fixture_t *fixture = *state;
  halo_test_daemon_t *daemon = &fixture->daemon;
  halo_client_t *client = fixture->client;

  uint64_t each = measure(fixture, 0);
  for (uint32_t tag = 1; tag <= 2; ++tag) {
    halo_command_buffer_release(record(client, tag, BARRIERS));
  }
  assert_int_equal(cached_bytes(daemon), 3 * each);
  // 400K holds one of them: the most recently released.
  reload(fixture, "memo-cache-bytes = 400K\n", each);
  assert_int_equal(cached(daemon), 1);
  expect_summary(daemon, each, 400 * 1024);
  assert_false(hit_and_release(client, 1));  // evicted; kept now instead of 2
  assert_true(hit_and_release(client, 1));
  assert_false(hit_and_release(client, 2));

  // 0: the list empties, and a release keeps nothing.
  reload(fixture, "memo-cache-bytes = 0\n", 0);
  assert_int_equal(cached(daemon), 0);
  halo_command_buffer_release(record(client, 3, BARRIERS));
  assert_int_equal(cached(daemon), 0);
  assert_false(hit_and_release(client, 3));
  unlink(reload_config);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
#define T(name) cmocka_unit_test_teardown(name, halo_test_fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(test_bytes_bound_and_order),
      T(test_reload_lowers_the_bound),
  };
#undef T
  return cmocka_run_group_tests_name("memo_cache_bytes", tests, NULL, NULL);
}
