// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The caches' LRU of released entries (docs/architecture.md "Caches"), on
// the local driver with device workers: a process that loads an executable,
// records a REUSABLE command buffer, runs it and exits leaves both for the
// next process of its trust domain (whose worker stays for them), which
// sees the hits (halo_executable_cache_hit, halo_command_buffer_memo_hit);
// executable-cache-entries and memo-cache-entries bound the lists and the
// least recently used entry goes first; 0 keeps nothing; a recording that
// names a buffer directly is never kept; a lost worker takes its entries
// with it. haloctl cache's summary (entries, held, cached, hits, misses,
// evictions, bytes) is checked through the admin socket.
// executable-cache-bytes bounds the bytes of the executables no session
// holds, those only kept recordings hold included: the listed executables
// go first, then kept recordings. idle-domains bounds the
// domains kept without sessions: past it the one idle longest ends, its
// entries dropped (a client of another uid, execute_peer run after setuid,
// makes the second domain: needs root, skipped otherwise); 0 ends a domain
// with its last session, and a reload that lowers it ends them at once.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/admin.h"
#include "tests/support/halo_test.h"

#ifndef EXECUTE_TEST_PEER
#error "EXECUTE_TEST_PEER must name the execute_peer executable"
#endif

// The daemon with |extra| arguments and no client of the fixture's own (a
// trust domain must be able to lose its last session).
static int setup_with(void **state, const char *const *extra) {
  return halo_test_fixture_setup_with(state, extra, false);
}

static int setup_default(void **state) {
  static const char *const extra[] = {NULL};
  return setup_with(state, extra);
}

static int setup_small(void **state) {
  static const char *const extra[] = {"--executable-cache-entries", "2",
                                      "--memo-cache-entries", "1", NULL};
  return setup_with(state, extra);
}

static int setup_none(void **state) {
  static const char *const extra[] = {"--executable-cache-entries", "0",
                                      "--memo-cache-entries", "0", NULL};
  return setup_with(state, extra);
}

// The daemon reading its bounds from a config file (|reload_config|) that a
// test rewrites before SIGHUP.
static char reload_config[64];

static void write_config(const char *text) {
  FILE *file = fopen(reload_config, "w");
  assert_non_null(file);
  assert_true(fputs(text, file) >= 0);
  assert_int_equal(fclose(file), 0);
}

static int setup_reload_from(void **state, const char *text) {
  snprintf(reload_config, sizeof(reload_config), "/tmp/halo-cache-XXXXXX");
  int fd = mkstemp(reload_config);
  assert_true(fd >= 0);
  close(fd);
  write_config(text);
  static const char *const extra[] = {"--config", reload_config, NULL};
  return setup_with(state, extra);
}

static int setup_reload(void **state) {
  return setup_reload_from(
      state, "executable-cache-entries = 8\nmemo-cache-entries = 8\n");
}

static int setup_reload_idle(void **state) {
  return setup_reload_from(state, "idle-domains = 1\n");
}

static int setup_no_idle(void **state) {
  static const char *const extra[] = {"--idle-domains", "0", NULL};
  return setup_with(state, extra);
}

// One idle domain kept; clients of another uid may load native code.
static int setup_one_idle(void **state) {
  static const char *const extra[] = {"--idle-domains", "1", "--native-code",
                                      "any", NULL};
  return setup_with(state, extra);
}

// The test kernels with |extra| trailing bytes: another content hash, the
// same code.
static uint8_t *read_kernels(size_t extra, size_t *out_size) {
  FILE *file = fopen(halo_test_kernels_path(), "rb");
  assert_non_null(file);
  fseek(file, 0, SEEK_END);
  size_t size = (size_t)ftell(file);
  fseek(file, 0, SEEK_SET);
  uint8_t *data = calloc(1, size + extra);
  assert_non_null(data);
  assert_int_equal(fread(data, 1, size, file), size);
  fclose(file);
  for (size_t i = 0; i < extra; ++i) data[size + i] = (uint8_t)(i + 1);
  *out_size = size + extra;
  return data;
}

static halo_executable_t *load(halo_client_t *client, size_t extra) {
  size_t size;
  uint8_t *data = read_kernels(extra, &size);
  halo_executable_params_t params = {
      .format = HALO_EXECUTABLE_FORMAT_ELF, .data = data, .size = size};
  halo_executable_t *executable = NULL;
  HALO_TEST_ASSERT_OK(halo_executable_create(client, 0, &params, &executable));
  free(data);
  return executable;
}

// The test kernels' size: what one executable (of extra 0) counts.
static size_t kernels_size(void) {
  FILE *file = fopen(halo_test_kernels_path(), "rb");
  assert_non_null(file);
  fseek(file, 0, SEEK_END);
  size_t size = (size_t)ftell(file);
  fclose(file);
  return size;
}

// executable-cache-bytes: room for |count| executables of a few extra
// bytes, not one more.
static int setup_room_for_executables(void **state, size_t count) {
  static char bound[32];
  snprintf(bound, sizeof(bound), "%zu", count * kernels_size() + 10);
  static const char *extra[] = {"--executable-cache-bytes", bound, NULL};
  return setup_with(state, extra);
}

static int setup_one_executable(void **state) {
  return setup_room_for_executables(state, 1);
}

static int setup_two_executables(void **state) {
  return setup_room_for_executables(state, 2);
}

static int setup_three_executables(void **state) {
  return setup_room_for_executables(state, 3);
}

// One recording kept, of trust domains of a process each.
static int setup_process_domains(void **state) {
  static const char *const extra[] = {"--trust-domain", "process",
                                      "--memo-cache-entries", "1", NULL};
  return setup_with(state, extra);
}

typedef struct summary_t {
  Halo__Wire__CacheSummary executable;
  Halo__Wire__CacheSummary memo;
} summary_t;

static summary_t cache_summary(const halo_test_daemon_t *daemon) {
  halo_admin_t *admin = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_connect(daemon->admin_address, 5000, &admin));
  halo_wire_response_t *response = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_memo_cache(admin, &response));
  const Halo__Wire__AdminMemoCacheReply *reply = response->admin_memo_cache;
  assert_non_null(reply->executable);
  assert_non_null(reply->memo);
  summary_t summary = {*reply->executable, *reply->memo};
  halo__wire__response__free_unpacked(response, NULL);
  halo_admin_close(admin);
  return summary;
}

// The admin state ("loaded", "cached") of the executable with |hash|; ""
// when the daemon does not have it.
static void executable_state(const halo_test_daemon_t *daemon, const char *hash,
                             char out[16]) {
  halo_admin_t *admin = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_connect(daemon->admin_address, 5000, &admin));
  halo_wire_response_t *response = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_executables(admin, &response));
  out[0] = '\0';
  for (size_t i = 0; i < response->admin_executables->n_executables; ++i) {
    const Halo__Wire__ExecutableInfo *info =
        response->admin_executables->executables[i];
    if (strcmp(info->hash, hash) == 0) snprintf(out, 16, "%s", info->state);
  }
  halo__wire__response__free_unpacked(response, NULL);
  halo_admin_close(admin);
}

#define N 64u

// A REUSABLE c = a + b over |n| floats through slots 0..2.
static halo_command_buffer_t *record(halo_client_t *client,
                                     halo_executable_t *executable,
                                     const uint32_t *n) {
  return halo_test_record_vector_add(client, executable, n);
}

// Runs |cb| once and checks the sums.
static void run(halo_client_t *client, halo_command_buffer_t *cb) {
  uint64_t bytes = N * sizeof(float);
  halo_buffer_t *a =
      halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE, bytes, 0);
  halo_buffer_t *b =
      halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE, bytes, 0);
  halo_buffer_t *c =
      halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE, bytes, 0);
  float *pa = halo_buffer_host_pointer(a), *pb = halo_buffer_host_pointer(b);
  for (uint32_t i = 0; i < N; ++i) {
    pa[i] = (float)i;
    pb[i] = 1.0f;
  }
  halo_semaphore_t *done = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  halo_binding_t bindings[3] = {{a, 0, bytes}, {b, 0, bytes}, {c, 0, bytes}};
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, bindings, 3, NULL, 0, &signal, 1));
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(done, 1, HALO_TEST_DEADLINE_MS * HALO_TEST_MS));
  const float *pc = halo_buffer_host_pointer(c);
  for (uint32_t i = 0; i < N; ++i) assert_true(pc[i] == (float)i + 1.0f);
  halo_semaphore_release(done);
  halo_buffer_release(a);
  halo_buffer_release(b);
  halo_buffer_release(c);
}

// The test's trust domain ("uid:N").
static const char *domain_name(void) {
  static char name[32];
  snprintf(name, sizeof(name), "uid:%u", (unsigned)getuid());
  return name;
}

static bool no_sessions(const halo_test_daemon_t *daemon) {
  return halo_test_admin_session_count(daemon) == 0;
}

// One process loads, records, runs and exits; the next one hits both
// caches and its worker is the same process.
static void test_next_session_hits(void **state) {
  halo_test_fixture_t *fixture = *state;
  static const uint32_t n = N;
  halo_client_t *first = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *executable = load(first, 0);
  assert_false(halo_executable_cache_hit(executable));
  char hash[65];
  snprintf(hash, sizeof(hash), "%s", halo_executable_content_hash(executable));
  halo_command_buffer_t *cb = record(first, executable, &n);
  assert_false(halo_command_buffer_memo_hit(cb));
  run(first, cb);
  pid_t worker = halo_test_admin_worker_pid(&fixture->daemon, domain_name());
  assert_true(worker > 0);
  halo_command_buffer_release(cb);
  halo_executable_release(executable);
  halo_client_close(first);
  assert_true(
      HALO_TEST_POLL(no_sessions(&fixture->daemon), HALO_TEST_DEADLINE_MS));

  // Kept: the memo entry holds the executable, so both are cached-or-held.
  summary_t summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.memo.entries, 1);
  assert_int_equal(summary.memo.cached, 1);
  assert_int_equal(summary.memo.held, 0);
  assert_int_equal(summary.executable.entries, 1);
  assert_int_equal(summary.executable.misses, 1);
  assert_int_equal(summary.executable.capacity, 64);
  assert_int_equal(summary.memo.capacity, 256);
  // Held, by the cached recording only (no session holds it).
  assert_int_equal(summary.executable.held, 1);
  assert_true(summary.executable.has_held_by_cached);
  assert_int_equal(summary.executable.held_by_cached, 1);
  // The domain's worker stayed for them.
  assert_int_equal(halo_test_admin_worker_pid(&fixture->daemon, domain_name()),
                   worker);

  halo_client_t *second = halo_test_connect(&fixture->daemon, 0);
  executable = load(second, 0);
  assert_true(halo_executable_cache_hit(executable));
  cb = record(second, executable, &n);
  assert_true(halo_command_buffer_memo_hit(cb));
  run(second, cb);
  summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.memo.held, 1);
  assert_int_equal(summary.memo.cached, 0);
  assert_int_equal(summary.memo.hits, 1);
  assert_int_equal(summary.executable.hits, 1);
  assert_int_equal(summary.executable.held_by_cached, 0);  // a session's
  assert_int_equal(halo_test_admin_worker_pid(&fixture->daemon, domain_name()),
                   worker);
  halo_command_buffer_release(cb);
  halo_executable_release(executable);
  // Released within the session: the memo entry holds the executable
  // (loaded); dropping the memo entry would make it cached.
  char state_text[16];
  executable_state(&fixture->daemon, hash, state_text);
  assert_string_equal(state_text, "loaded");
  halo_client_close(second);
}

// executable-cache-entries 2: three released, the least recently used
// goes; one found again leaves the list and comes back at its front.
static void test_executable_bound_and_order(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *e[3];
  char hashes[3][65];
  for (int i = 0; i < 3; ++i) {
    e[i] = load(client, (size_t)i + 1);
    snprintf(hashes[i], 65, "%s", halo_executable_content_hash(e[i]));
  }
  for (int i = 0; i < 3; ++i) halo_executable_release(e[i]);  // 0 first
  summary_t summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.executable.entries, 2);
  assert_int_equal(summary.executable.cached, 2);
  assert_int_equal(summary.executable.evictions, 1);
  char state_text[16];
  executable_state(&fixture->daemon, hashes[0], state_text);
  assert_string_equal(state_text, "");  // evicted: least recently used
  executable_state(&fixture->daemon, hashes[1], state_text);
  assert_string_equal(state_text, "cached");

  // 1 is found (a hit), 0 loads again (a miss); releasing 1 then 0 puts
  // them in front of 2, which goes.
  e[1] = load(client, 2);
  assert_true(halo_executable_cache_hit(e[1]));
  executable_state(&fixture->daemon, hashes[1], state_text);
  assert_string_equal(state_text, "loaded");
  e[0] = load(client, 1);
  assert_false(halo_executable_cache_hit(e[0]));
  halo_executable_release(e[1]);
  halo_executable_release(e[0]);
  executable_state(&fixture->daemon, hashes[2], state_text);
  assert_string_equal(state_text, "");
  executable_state(&fixture->daemon, hashes[0], state_text);
  assert_string_equal(state_text, "cached");
  executable_state(&fixture->daemon, hashes[1], state_text);
  assert_string_equal(state_text, "cached");
  summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.executable.evictions, 2);
  assert_int_equal(summary.executable.cached, 2);
  halo_client_close(client);
}

// memo-cache-entries 1: of two released recordings the older goes.
static void test_memo_bound(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *executable = load(client, 0);
  static const uint32_t n1 = 64, n2 = 128;
  halo_command_buffer_t *r1 = record(client, executable, &n1);
  halo_command_buffer_t *r2 = record(client, executable, &n2);
  halo_command_buffer_release(r1);
  halo_command_buffer_release(r2);
  summary_t summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.memo.entries, 1);
  assert_int_equal(summary.memo.evictions, 1);
  r2 = record(client, executable, &n2);
  assert_true(halo_command_buffer_memo_hit(r2));
  r1 = record(client, executable, &n1);
  assert_false(halo_command_buffer_memo_hit(r1));
  halo_command_buffer_release(r1);
  halo_command_buffer_release(r2);

  // A recording that names a buffer directly is not kept: no later
  // recording could name that buffer.
  halo_buffer_t *buffer =
      halo_test_create_buffer(client, HALO_MEMORY_DEVICE, 64, 0);
  halo_command_buffer_t *direct =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 0);
  uint32_t zero = 0;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      direct, halo_buffer_ref(buffer, 0, 64), &zero, sizeof(zero)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(direct));
  uint64_t evictions = cache_summary(&fixture->daemon).memo.evictions;
  halo_command_buffer_release(direct);
  summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.memo.entries, 1);  // r1's, cached
  assert_int_equal(summary.memo.cached, 1);
  assert_int_equal(summary.memo.evictions, evictions);
  halo_buffer_release(buffer);
  halo_executable_release(executable);
  halo_client_close(client);
}

// Both settings 0: nothing outlives its last holder.
static void test_zero_keeps_nothing(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *executable = load(client, 0);
  halo_executable_release(executable);
  summary_t summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.executable.entries, 0);
  executable = load(client, 0);
  assert_false(halo_executable_cache_hit(executable));
  static const uint32_t n = N;
  halo_command_buffer_t *cb = record(client, executable, &n);
  halo_command_buffer_release(cb);
  cb = record(client, executable, &n);
  assert_false(halo_command_buffer_memo_hit(cb));
  halo_command_buffer_release(cb);
  halo_executable_release(executable);
  halo_client_close(client);
}

// A reload that lowers a bound evicts the entries past it at once, not at
// the next release (0 empties the list).
static void test_reload_lowers_the_bound(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  for (size_t i = 0; i < 3; ++i) halo_executable_release(load(client, i));
  assert_int_equal(cache_summary(&fixture->daemon).executable.cached, 3);
  write_config("executable-cache-entries = 1\nmemo-cache-entries = 0\n");
  assert_int_equal(kill(fixture->daemon.pid, SIGHUP), 0);
  int64_t deadline = halo_test_now_ns() + 5000 * HALO_TEST_MS;
  while (cache_summary(&fixture->daemon).executable.cached > 1 &&
         halo_test_now_ns() < deadline) {
    halo_test_sleep_ms(20);
  }
  summary_t summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.executable.cached, 1);
  assert_int_equal(summary.executable.evictions, 2);
  // The one kept is the most recently released.
  halo_executable_t *executable = load(client, 2);
  assert_true(halo_executable_cache_hit(executable));
  halo_executable_release(executable);
  halo_client_close(client);
  unlink(reload_config);
}

// A worker lost while its domain idles takes the cached entries (a fresh
// worker has none of its state) and the domain ends.
static void test_lost_worker_drops_its_entries(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *executable = load(client, 0);
  halo_executable_release(executable);
  pid_t worker = halo_test_admin_worker_pid(&fixture->daemon, domain_name());
  assert_true(worker > 0);
  halo_client_close(client);
  assert_true(
      HALO_TEST_POLL(no_sessions(&fixture->daemon), HALO_TEST_DEADLINE_MS));
  assert_int_equal(cache_summary(&fixture->daemon).executable.cached, 1);
  assert_int_equal(kill(worker, SIGKILL), 0);
  assert_true(
      HALO_TEST_POLL(cache_summary(&fixture->daemon).executable.entries == 0,
                     HALO_TEST_DEADLINE_MS));
  assert_true(HALO_TEST_POLL(
      halo_test_admin_worker_pid(&fixture->daemon, domain_name()) == 0,
      HALO_TEST_DEADLINE_MS));
  client = halo_test_connect(&fixture->daemon, 0);
  executable = load(client, 0);
  assert_false(halo_executable_cache_hit(executable));
  halo_executable_release(executable);
  halo_client_close(client);
}

// executable-cache-bytes: three released executables of K + 1, K + 2 and
// K + 3 bytes within 2K + 10: the least recently used goes, the bytes show.
static void test_executable_bytes_bound(void **state) {
  halo_test_fixture_t *fixture = *state;
  uint64_t k = kernels_size();
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *held = load(client, 1);
  summary_t summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.executable.cached_bytes, 0);  // a session holds it
  assert_int_equal(summary.executable.capacity_bytes, 2 * k + 10);
  halo_executable_release(held);
  halo_executable_release(load(client, 2));
  summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.executable.cached, 2);
  assert_int_equal(summary.executable.cached_bytes, 2 * k + 3);
  halo_executable_release(load(client, 3));
  summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.executable.cached, 2);
  assert_int_equal(summary.executable.evictions, 1);
  assert_int_equal(summary.executable.cached_bytes, 2 * k + 5);
  // The first went; the last is there.
  halo_executable_t *executable = load(client, 3);
  assert_true(halo_executable_cache_hit(executable));
  assert_int_equal(cache_summary(&fixture->daemon).executable.cached_bytes,
                   k + 2);
  halo_executable_release(executable);
  executable = load(client, 1);
  assert_false(halo_executable_cache_hit(executable));
  halo_executable_release(executable);
  halo_client_close(client);
}

// executable-cache-bytes counts an executable that only a kept recording
// holds; past the bound a listed executable goes first, then a kept
// recording (its executable joins the list, then goes).
static void test_kept_recordings_executables_count(void **state) {
  halo_test_fixture_t *fixture = *state;
  static const uint32_t n = N;
  uint64_t k = kernels_size();
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *x = load(client, 0);
  halo_command_buffer_release(record(client, x, &n));
  halo_executable_release(x);
  // X is held by the kept recording alone: it counts, and is not listed.
  summary_t summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.memo.cached, 1);
  assert_int_equal(summary.executable.cached, 0);
  assert_int_equal(summary.executable.cached_bytes, k);

  // Y (K + 1) released: past the bound, and listed: it goes, not X.
  halo_executable_release(load(client, 1));
  summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.executable.evictions, 1);
  assert_int_equal(summary.executable.cached, 0);
  assert_int_equal(summary.memo.cached, 1);
  assert_int_equal(summary.executable.cached_bytes, k);

  // A second recording kept, of Z (K + 2): the first recording goes (the
  // list is empty), then X from the list.
  halo_executable_t *z = load(client, 2);
  halo_command_buffer_release(record(client, z, &n));
  halo_executable_release(z);
  summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.memo.cached, 1);
  assert_int_equal(summary.memo.evictions, 1);
  assert_int_equal(summary.executable.evictions, 2);
  assert_int_equal(summary.executable.cached_bytes, k + 2);
  // Z's recording is the one kept.
  z = load(client, 2);
  assert_true(halo_executable_cache_hit(z));
  halo_command_buffer_t *cb = record(client, z, &n);
  assert_true(halo_command_buffer_memo_hit(cb));
  assert_int_equal(cache_summary(&fixture->daemon).executable.cached_bytes, 0);
  halo_command_buffer_release(cb);
  halo_executable_release(z);
  halo_client_close(client);
}

// The bytes of every executable the daemon has (haloctl executables).
static uint64_t executables_bytes(const halo_test_daemon_t *daemon) {
  halo_admin_t *admin = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_connect(daemon->admin_address, 5000, &admin));
  halo_wire_response_t *response = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_executables(admin, &response));
  uint64_t bytes = 0;
  for (size_t i = 0; i < response->admin_executables->n_executables; ++i) {
    assert_true(response->admin_executables->executables[i]->has_bytes);
    bytes += response->admin_executables->executables[i]->bytes;
  }
  halo__wire__response__free_unpacked(response, NULL);
  halo_admin_close(admin);
  return bytes;
}

#define RANDOM_EXECUTABLES 6
#define RANDOM_RECORDINGS 4

// Random loads, recordings and releases of six executables of K .. K + 5
// bytes within 3K + 10: after every step the bytes no session holds are
// within the bound, and whenever the client holds nothing they are the
// bytes of every executable the daemon kept (each counted once, whether
// listed or held by kept recordings alone).
static void test_unheld_bytes_follow_random_use(void **state) {
  halo_test_fixture_t *fixture = *state;
  static const uint32_t n = N;
  const halo_test_daemon_t *daemon = &fixture->daemon;
  uint64_t bound = 3 * kernels_size() + 10;
  halo_client_t *client = halo_test_connect(daemon, 0);
  halo_executable_t *held[RANDOM_EXECUTABLES] = {0};
  halo_command_buffer_t *recordings[RANDOM_RECORDINGS] = {0};
  uint32_t seed = 20261201;
  uint32_t checks = 0;
  for (uint32_t step = 0; step < 400; ++step) {
    seed = seed * 1664525u + 1013904223u;
    uint32_t r = seed >> 8;
    uint32_t e = (r >> 2) % RANDOM_EXECUTABLES;
    uint32_t c = (r >> 6) % RANDOM_RECORDINGS;
    switch (r % 4) {
      case 0:
        if (!held[e]) held[e] = load(client, e);
        break;
      case 1:
        if (held[e]) halo_executable_release(held[e]);
        held[e] = NULL;
        break;
      case 2:
        if (!held[e]) break;
        if (recordings[c]) halo_command_buffer_release(recordings[c]);
        recordings[c] = record(client, held[e], &n);
        break;
      default:
        if (recordings[c]) halo_command_buffer_release(recordings[c]);
        recordings[c] = NULL;
        break;
    }
    summary_t summary = cache_summary(daemon);
    assert_true(summary.executable.cached_bytes <= bound);
    if (step % 50 != 49) continue;
    for (uint32_t i = 0; i < RANDOM_EXECUTABLES; ++i) {
      if (held[i]) halo_executable_release(held[i]);
      held[i] = NULL;
    }
    for (uint32_t i = 0; i < RANDOM_RECORDINGS; ++i) {
      if (recordings[i]) halo_command_buffer_release(recordings[i]);
      recordings[i] = NULL;
    }
    summary = cache_summary(daemon);
    assert_true(summary.executable.cached_bytes <= bound);
    assert_int_equal(summary.executable.cached_bytes,
                     executables_bytes(daemon));
    ++checks;
  }
  assert_int_equal(checks, 8);
  // Evicted on the way (six of K + i bytes do not fit in 3K + 10).
  summary_t summary = cache_summary(daemon);
  assert_true(summary.executable.evictions > 0);
  assert_true(summary.memo.evictions > 0);
  halo_client_close(client);
}

static bool no_worker(const halo_test_daemon_t *daemon, const char *domain) {
  return halo_test_admin_worker_pid(daemon, domain) == 0;
}

// An executable alone past executable-cache-bytes is not kept, and evicts
// nothing; nor is a recording whose executables no session else holds are.
static void test_larger_than_the_bound_is_not_kept(void **state) {
  halo_test_fixture_t *fixture = *state;
  static const uint32_t n = N;
  uint64_t k = kernels_size();
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_release(load(client, 1));
  halo_executable_release(load(client, 2));
  halo_executable_release(load(client, 2 * k));  // 3K bytes
  summary_t summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.executable.cached, 2);
  assert_int_equal(summary.executable.evictions, 0);
  assert_int_equal(summary.executable.entries, 2);
  assert_int_equal(summary.executable.cached_bytes, 2 * k + 3);
  // The recording's executable released first: neither is kept.
  halo_executable_t *large = load(client, 2 * k);
  halo_command_buffer_t *cb = record(client, large, &n);
  halo_executable_release(large);
  halo_command_buffer_release(cb);
  summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.memo.entries, 0);
  assert_int_equal(summary.executable.entries, 2);
  assert_int_equal(summary.executable.evictions, 0);
  halo_client_close(client);
}

// Past executable-cache-bytes, a kept recording whose executables a
// session holds frees nothing: the least recently used one that holds an
// executable no session holds goes instead.
static void test_recordings_that_free_nothing_stay(void **state) {
  halo_test_fixture_t *fixture = *state;
  static const uint32_t n = N;
  uint64_t k = kernels_size();
  halo_client_t *client = halo_test_connect(&fixture->daemon, 0);
  halo_executable_t *x = load(client, 0);  // held throughout
  halo_command_buffer_release(record(client, x, &n));
  halo_executable_t *w = load(client, 3);
  halo_command_buffer_release(record(client, w, &n));
  halo_executable_release(w);
  assert_int_equal(cache_summary(&fixture->daemon).executable.cached_bytes,
                   k + 3);
  // U's recording kept: past the bound; X's is the least recently used but
  // frees nothing, W's goes (then W from the list).
  halo_executable_t *u = load(client, 4);
  halo_command_buffer_release(record(client, u, &n));
  halo_executable_release(u);
  summary_t summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.memo.cached, 2);
  assert_int_equal(summary.memo.evictions, 1);
  assert_int_equal(summary.executable.cached_bytes, k + 4);
  halo_command_buffer_t *cb = record(client, x, &n);
  assert_true(halo_command_buffer_memo_hit(cb));
  halo_command_buffer_release(cb);
  halo_executable_release(x);
  halo_client_close(client);
}

// A REUSABLE recording of the test kernels' `sleepy` (|us| microseconds;
// slot 0 its counter).
static halo_command_buffer_t *record_sleepy(halo_client_t *client,
                                            halo_executable_t *executable,
                                            const uint32_t *us) {
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 1);
  halo_dispatch_arg_t args[2] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(0, 0, sizeof(uint32_t)), NULL,
       0},
      {HALO_DISPATCH_ARG_CONSTANT, {0}, us, sizeof(*us)},
  };
  halo_dispatch_params_t params = {.executable = executable,
                                   .entry = "sleepy",
                                   .grid = {1, 1, 1},
                                   .block = {1, 1, 1},
                                   .args = args,
                                   .arg_count = 2};
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  return cb;
}

// A session that keeps a recording of c = a + b (with |other|), executes
// one of `sleepy` for 0.5 s, releases everything and ends with it still
// running: the recording is kept only when that execution retires.
static void end_with_work_in_flight(const halo_test_daemon_t *daemon,
                                    bool other) {
  static const uint32_t n = N;
  static const uint32_t us = 500000;
  halo_client_t *client = halo_test_connect(daemon, 0);
  halo_executable_t *executable = load(client, 0);
  if (other) halo_command_buffer_release(record(client, executable, &n));
  halo_command_buffer_t *cb = record_sleepy(client, executable, &us);
  halo_buffer_t *counter = halo_test_create_buffer(
      client, HALO_MEMORY_HOST_VISIBLE, sizeof(uint32_t), 0);
  halo_binding_t binding = {counter, 0, sizeof(uint32_t)};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, &binding, 1, NULL, 0, NULL, 0));
  halo_command_buffer_release(cb);
  halo_buffer_release(counter);
  halo_executable_release(executable);
  halo_client_close(client);
  assert_true(HALO_TEST_POLL(no_sessions(daemon), HALO_TEST_DEADLINE_MS));
}

static bool nothing_cached(const halo_test_daemon_t *daemon) {
  summary_t summary = cache_summary(daemon);
  return summary.memo.entries == 0 && summary.executable.entries == 0;
}

// trust-domain process: the ended session's execution retires and its
// recording is kept, evicting the other (memo-cache-entries 1); the domain
// then ends (a process does not come back) with the recording just kept,
// and the bytes no session holds are 0 again (halod once read the freed
// recording here).
static void test_work_retiring_after_a_process_domain(void **state) {
  halo_test_fixture_t *fixture = *state;
  end_with_work_in_flight(&fixture->daemon, true);
  assert_true(
      HALO_TEST_POLL(nothing_cached(&fixture->daemon), HALO_TEST_DEADLINE_MS));
  summary_t summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.executable.cached_bytes, 0);
  assert_int_equal(summary.memo.evictions, 1);
  assert_int_equal(halo_test_admin_session_count(&fixture->daemon), 0);
}

// idle-domains 0: a domain whose session ended with work in flight gains
// its recording when the work retires, and ends then.
static void test_no_idle_domain_after_work(void **state) {
  halo_test_fixture_t *fixture = *state;
  end_with_work_in_flight(&fixture->daemon, false);
  assert_true(
      HALO_TEST_POLL(nothing_cached(&fixture->daemon), HALO_TEST_DEADLINE_MS));
  assert_true(HALO_TEST_POLL(no_worker(&fixture->daemon, domain_name()),
                             HALO_TEST_DEADLINE_MS));
}

// Loads an executable in a session of the test's own domain, releases it
// and ends the session: the domain is idle, the executable cached. Returns
// whether the load was a cache hit.
static bool load_and_leave(const halo_test_daemon_t *daemon) {
  halo_client_t *client = halo_test_connect(daemon, 0);
  halo_executable_t *executable = load(client, 0);
  bool hit = halo_executable_cache_hit(executable);
  halo_executable_release(executable);
  halo_client_close(client);
  assert_true(HALO_TEST_POLL(no_sessions(daemon), HALO_TEST_DEADLINE_MS));
  return hit;
}

// idle-domains 0: the domain ends with its last session, its cached
// entries with it, and its next client starts afresh.
static void test_no_idle_domain_kept(void **state) {
  halo_test_fixture_t *fixture = *state;
  assert_false(load_and_leave(&fixture->daemon));
  assert_true(HALO_TEST_POLL(no_worker(&fixture->daemon, domain_name()),
                             HALO_TEST_DEADLINE_MS));
  summary_t summary = cache_summary(&fixture->daemon);
  assert_int_equal(summary.executable.entries, 0);
  assert_int_equal(summary.executable.evictions, 0);  // dropped, not evicted
  assert_false(load_and_leave(&fixture->daemon));
}

// A reload lowering idle-domains to 0 ends the idle domain at once.
static void test_reload_ends_idle_domains(void **state) {
  halo_test_fixture_t *fixture = *state;
  assert_false(load_and_leave(&fixture->daemon));
  assert_true(halo_test_admin_worker_pid(&fixture->daemon, domain_name()) > 0);
  assert_int_equal(cache_summary(&fixture->daemon).executable.cached, 1);
  write_config("idle-domains = 0\n");
  assert_int_equal(kill(fixture->daemon.pid, SIGHUP), 0);
  assert_true(HALO_TEST_POLL(no_worker(&fixture->daemon, domain_name()),
                             HALO_TEST_DEADLINE_MS));
  assert_int_equal(cache_summary(&fixture->daemon).executable.entries, 0);
  unlink(reload_config);
}

// Runs execute_peer's "load" of |kernels| as uid and gid |uid| (65534:
// a trust domain of its own) and waits for it to succeed.
static void run_client_as(const halo_test_daemon_t *daemon, const char *kernels,
                          uid_t uid) {
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) {
      _exit(10);
    }
    execl(EXECUTE_TEST_PEER, EXECUTE_TEST_PEER, daemon->listen_address, "load",
          kernels, "1", (char *)NULL);
    _exit(127);
  }
  halo_test_process_t process = {.pid = child, .stdout_fd = -1};
  assert_int_equal(halo_test_process_wait(&process, HALO_TEST_DEADLINE_MS), 0);
}

// A copy of the test kernels that uid 65534 can read (the build tree's
// folders may not let it), with their extension (execute_peer takes the
// format from it).
static void copy_kernels(char *out_path, size_t capacity) {
  const char *dot = strrchr(halo_test_kernels_path(), '.');
  const char *extension = dot ? dot : "";
  snprintf(out_path, capacity, "/tmp/halo-idle-XXXXXX%s", extension);
  int fd = mkstemps(out_path, (int)strlen(extension));
  assert_true(fd >= 0);
  size_t size;
  uint8_t *data = read_kernels(0, &size);
  assert_int_equal(write(fd, data, size), (ssize_t)size);
  free(data);
  assert_int_equal(fchmod(fd, 0644), 0);
  close(fd);
}

// idle-domains 1: the test's domain idles, then a client of another uid
// leaves its own idle; the test's, idle longer, ends (its next load
// misses). Then the test's domain idles again and the other uid's ends.
static void test_longest_idle_domain_ends_first(void **state) {
  halo_test_fixture_t *fixture = *state;
  if (geteuid() != 0) {
    print_message("skipped: not root (setuid to another uid)\n");
    skip();
  }
  const halo_test_daemon_t *daemon = &fixture->daemon;
  // The other uid reaches the client socket and its fd channel.
  assert_int_equal(chmod(daemon->socket_path, 0666), 0);
  assert_int_equal(chmod(daemon->fd_channel_path, 0666), 0);
  char kernels[64];
  copy_kernels(kernels, sizeof(kernels));

  assert_false(load_and_leave(daemon));
  assert_true(halo_test_admin_worker_pid(daemon, domain_name()) > 0);
  run_client_as(daemon, kernels, 65534);
  assert_true(
      HALO_TEST_POLL(no_worker(daemon, domain_name()), HALO_TEST_DEADLINE_MS));
  assert_true(halo_test_admin_worker_pid(daemon, "uid:65534") > 0);

  // Its entries went with it; the other uid's stayed.
  assert_false(load_and_leave(daemon));
  assert_true(
      HALO_TEST_POLL(no_worker(daemon, "uid:65534"), HALO_TEST_DEADLINE_MS));
  assert_true(halo_test_admin_worker_pid(daemon, domain_name()) > 0);
  // Kept for its entries: the next load is a hit.
  assert_true(load_and_leave(daemon));
  unlink(kernels);
}

// Two idle domains kept; one device fault makes a process refused; clients
// of other uids may load native code.
static int setup_two_idle_one_fault(void **state) {
  static const char *const extra[] = {"--idle-domains",
                                      "2",
                                      "--fault-budget",
                                      "1",
                                      "--native-code",
                                      "any",
                                      NULL};
  return setup_with(state, extra);
}

// This process crashes its domain's worker (the test kernels' `crash`): a
// device fault charged to it, so that its next connection is refused.
static void crash_own_worker(const halo_test_daemon_t *daemon) {
  halo_client_t *client = halo_test_connect(daemon, 0);
  halo_executable_t *executable = load(client, 0);
  halo_dispatch_params_t params = {.executable = executable,
                                   .entry = "crash",
                                   .grid = {1, 1, 1},
                                   .block = {1, 1, 1}};
  halo_command_buffer_t *cb =
      halo_test_begin(client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  halo_semaphore_t *done = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &done));
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, NULL, 0, NULL, 0, &signal, 1));
  halo_status_t status =
      halo_semaphore_wait(done, 1, HALO_TEST_DEADLINE_MS * HALO_TEST_MS);
  assert_int_equal(halo_status_code(status), HALO_STATUS_DEVICE_LOST);
  halo_status_free(status);
  halo_client_close(client);  // its objects went with the session
}

// idle-domains 2: this uid's domain idles (a root client of its own loads
// and leaves), then uid 65534's; this process, over fault-budget, connects
// and is refused, which leaves its domain's place in the idle order (its
// refusal comes before the domain is acquired; one that comes after, when
// the loop had not handled the worker's loss yet, goes through
// halod_domain_release_refused); a third uid's domain idling then ends
// this uid's, idle longest, not 65534's.
static void test_refused_session_keeps_the_idle_order(void **state) {
  halo_test_fixture_t *fixture = *state;
  if (geteuid() != 0) {
    print_message("skipped: not root (setuid to other uids)\n");
    skip();
  }
  HALO_TEST_LOCAL_ONLY("the crash kernel is an ELF for the local driver");
  const halo_test_daemon_t *daemon = &fixture->daemon;
  assert_int_equal(chmod(daemon->socket_path, 0666), 0);
  assert_int_equal(chmod(daemon->fd_channel_path, 0666), 0);
  char kernels[64];
  copy_kernels(kernels, sizeof(kernels));
  crash_own_worker(daemon);
  assert_true(HALO_TEST_POLL(no_sessions(daemon), HALO_TEST_DEADLINE_MS));

  run_client_as(daemon, kernels, 0);  // this uid's domain idles first
  run_client_as(daemon, kernels, 65534);
  assert_true(halo_test_admin_worker_pid(daemon, domain_name()) > 0);
  assert_true(halo_test_admin_worker_pid(daemon, "uid:65534") > 0);

  // Refused (its fault): at Hello, or its first request.
  halo_client_options_t options = {.address = daemon->listen_address};
  halo_client_t *refused = NULL;
  halo_status_t status = halo_client_connect(&options, &refused);
  if (!status) status = halo_client_ping(refused);
  assert_int_equal(halo_status_code(status), HALO_STATUS_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(halo_status_message(status), "device fault"));
  halo_status_free(status);
  halo_client_close(refused);
  assert_true(HALO_TEST_POLL(no_sessions(daemon), HALO_TEST_DEADLINE_MS));

  run_client_as(daemon, kernels, 65533);
  assert_true(
      HALO_TEST_POLL(no_worker(daemon, domain_name()), HALO_TEST_DEADLINE_MS));
  assert_true(halo_test_admin_worker_pid(daemon, "uid:65534") > 0);
  assert_true(halo_test_admin_worker_pid(daemon, "uid:65533") > 0);
  unlink(kernels);
}

int main(void) {
  halo_test_require_driver();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_next_session_hits, setup_default,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_executable_bound_and_order,
                                      setup_small, halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_memo_bound, setup_small,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_zero_keeps_nothing, setup_none,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_reload_lowers_the_bound,
                                      setup_reload, halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_lost_worker_drops_its_entries,
                                      setup_default,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_executable_bytes_bound,
                                      setup_two_executables,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_kept_recordings_executables_count,
                                      setup_one_executable,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_unheld_bytes_follow_random_use,
                                      setup_three_executables,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_larger_than_the_bound_is_not_kept,
                                      setup_two_executables,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_recordings_that_free_nothing_stay,
                                      setup_one_executable,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_work_retiring_after_a_process_domain,
                                      setup_process_domains,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_no_idle_domain_after_work,
                                      setup_no_idle,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_no_idle_domain_kept, setup_no_idle,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_reload_ends_idle_domains,
                                      setup_reload_idle,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_refused_session_keeps_the_idle_order,
                                      setup_two_idle_one_fault,
                                      halo_test_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_longest_idle_domain_ends_first,
                                      setup_one_idle,
                                      halo_test_fixture_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
