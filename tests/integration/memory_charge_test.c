// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Memory pressure (docs/operations.md "Memory: whose it is"), through a real
// halod and its real device worker:
// - oom-score-adj: halod takes the setting (-900 by default, where it may
//   lower its own: with CAP_SYS_RESOURCE; else it keeps the score it was
//   started with) and its device worker raises its own 500
//   above (at most 1000), so the kernel kills a trust
//   domain's worker before halod and every tenant's sessions; a setting of
//   100 gives 100 and 600; so does a halod that is not root (as nobody,
//   through setpriv, when the test runs as root: the systemd unit's
//   User=halo), whose processes are not dumpable (their /proc/self files
//   then belong to root).
// - a BufferRead of host-visible memory nobody wrote faults nothing into
//   halod: it reads the arena's memfd (a hole reads as zeros) instead of
//   touching its mapping, which charged every page read to halod (its RSS
//   and its cgroup: 16 MiB read, 16 MiB more RssShmem, before). What a
//   client wrote still reads back.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/wire.h"
#include "tests/support/halo_test.h"

static int read_oom_score(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)pid);
  FILE *file = fopen(path, "r");
  assert_non_null(file);
  int score = 0;
  assert_int_equal(fscanf(file, "%d", &score), 1);
  fclose(file);
  return score;
}

// Whether this process (and so the halod it starts) has CAP_SYS_RESOURCE.
static bool has_sys_resource(void) {
  FILE *file = fopen("/proc/self/status", "r");
  assert_non_null(file);
  char line[256];
  unsigned long long effective = 0;
  while (fgets(line, sizeof(line), file)) {
    if (sscanf(line, "CapEff: %llx", &effective) == 1) break;
  }
  fclose(file);
  return (effective >> 24) & 1;  // CAP_SYS_RESOURCE
}

// The RssShmem of |pid|, in KiB.
static long rss_shmem_kib(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  FILE *file = fopen(path, "r");
  assert_non_null(file);
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof(line), file)) {
    if (sscanf(line, "RssShmem: %ld kB", &kib) == 1) break;
  }
  fclose(file);
  assert_true(kib >= 0);
  return kib;
}

static pid_t own_domain_worker(const halo_test_daemon_t *daemon) {
  char domain[32];
  snprintf(domain, sizeof(domain), "uid:%u", (unsigned)getuid());
  pid_t worker = halo_test_admin_worker_pid(daemon, domain);
  assert_true(worker > 0);
  return worker;
}

// halod took |setting|, or (it may not lower its score below what a
// privileged writer set for this process, and lowering past that takes
// CAP_SYS_RESOURCE) warned and kept the one it inherited from this process;
// its worker is 500 above halod's, at most 1000.
static void expect_worker_above_halod(const halo_test_daemon_t *daemon,
                                      int setting) {
  int inherited = read_oom_score(getpid());
  int halod_score = read_oom_score(daemon->pid);
  int worker_score = read_oom_score(own_domain_worker(daemon));
  print_message(
      "oom_score_adj: this process's %d, halod's %d (setting %d), "
      "its worker's %d\n",
      inherited, halod_score, setting, worker_score);
  if (halod_score != setting) {
    assert_int_equal(halod_score, inherited);
    assert_true(setting < inherited);  // a raise needs no privilege
    assert_false(has_sys_resource());
  }
  int worker_expected = halod_score + 500 > 1000 ? 1000 : halod_score + 500;
  assert_int_equal(worker_score, worker_expected);
}

static void test_worker_goes_before_halod(void **state) {
  halo_test_fixture_t *fixture = *state;
  // The fixture's client has the domain's worker started.
  halo_client_t *client = fixture->client;
  assert_null(halo_client_ping(client));
  expect_worker_above_halod(&fixture->daemon, -900);
}

static void test_oom_score_adj_setting(void **state) {
  (void)state;
  halo_test_daemon_t daemon;
  const char *args[] = {"--oom-score-adj", "100", NULL};
  halo_test_daemon_start_with_args(&daemon, args);
  halo_client_t *client = halo_test_connect(&daemon, 0);
  assert_null(halo_client_ping(client));
  expect_worker_above_halod(&daemon, 100);
  halo_client_close(client);
  halo_test_daemon_stop(&daemon, SIGTERM);
  halo_test_daemon_cleanup(&daemon);
}

// halod as nobody (setpriv, no capabilities) with --oom-score-adj 100: it
// takes 100 (a raise needs no privilege) where this process's score is at
// most that, and its worker 500 above. Before, both writes failed with
// EACCES: each process had made itself not dumpable first. Started in the
// setup, so that the teardown stops it whatever the test asserted.
static halo_test_daemon_t nobody_daemon;

static int setup_halod_as_nobody(void **state) {
  (void)state;
  memset(&nobody_daemon, 0, sizeof(nobody_daemon));
  if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) return 0;
  // The wrapper gives nobody the private directory ($3 is --listen's
  // ipc://DIR/halo.sock), then runs halod as nobody.
  static const char *const wrapper[] = {
      "/bin/sh", "-c",
      "d=${3#ipc://}; chown 65534:65534 \"${d%/*}\" && exec /usr/bin/setpriv "
      "--reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \"$@\"",
      "sh", NULL};
  const char *args[] = {"--oom-score-adj", "100", NULL};
  halo_test_daemon_start_wrapped(&nobody_daemon, wrapper, args);
  return 0;
}

static int teardown_halod_as_nobody(void **state) {
  (void)state;
  if (nobody_daemon.pid) halo_test_daemon_stop(&nobody_daemon, SIGTERM);
  if (nobody_daemon.dir[0]) halo_test_daemon_cleanup(&nobody_daemon);
  return 0;
}

static void test_oom_score_of_a_halod_not_root(void **state) {
  (void)state;
  if (!nobody_daemon.pid) {
    print_message("skipped: needs root and setpriv (halod as nobody)\n");
    skip();
  }
  halo_client_t *client = halo_test_connect(&nobody_daemon, 0);
  assert_null(halo_client_ping(client));
  int inherited = read_oom_score(getpid());
  int halod_score = read_oom_score(nobody_daemon.pid);
  int worker_score = read_oom_score(own_domain_worker(&nobody_daemon));
  halo_client_close(client);
  print_message(
      "halod as nobody: this process's oom_score_adj %d, halod's %d "
      "(setting 100), its worker's %d\n",
      inherited, halod_score, worker_score);
  assert_int_equal(halod_score, inherited <= 100 ? 100 : inherited);
  assert_int_equal(worker_score,
                   halod_score + 500 > 1000 ? 1000 : halod_score + 500);
}

static void buffer_read(halo_test_raw_t *raw, uint64_t handle, uint64_t offset,
                        uint8_t *out, uint64_t length) {
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__BufferRead read = HALO__WIRE__BUFFER_READ__INIT;
  read.handle = handle;
  read.offset = offset;
  read.length = length;
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_READ;
  request.buffer_read = &read;
  halo_wire_response_t *response =
      HALO_TEST_EXPECT_OK(halo_test_raw_call(raw, &request));
  assert_int_equal(response->buffer_read->data.len, length);
  memcpy(out, response->buffer_read->data.data, length);
  halo__wire__response__free_unpacked(response, NULL);
}

static void test_read_of_untouched_memory_faults_nothing(void **state) {
  halo_test_fixture_t *fixture = *state;
  halo_test_raw_t raw;
  halo_test_raw_open(&raw, fixture->daemon.listen_address, 0);
  halo_test_raw_hello(&raw);
  enum { kBytes = 16 << 20 };
  uint64_t handle = halo_test_raw_buffer_create(
      &raw, kBytes, HALO__WIRE__MEMORY_TYPE__MEMORY_HOST_VISIBLE, 0, NULL);
  uint8_t *chunk = malloc(HALO_WIRE_MAX_CHUNK_BYTES);
  assert_non_null(chunk);
  long before = rss_shmem_kib(fixture->daemon.pid);
  for (uint64_t offset = 0; offset < kBytes;
       offset += HALO_WIRE_MAX_CHUNK_BYTES) {
    memset(chunk, 0xab, HALO_WIRE_MAX_CHUNK_BYTES);
    buffer_read(&raw, handle, offset, chunk, HALO_WIRE_MAX_CHUNK_BYTES);
    for (uint32_t i = 0; i < HALO_WIRE_MAX_CHUNK_BYTES; ++i) {
      if (chunk[i])
        fail_msg("byte %llu is %u, not 0", (unsigned long long)(offset + i),
                 chunk[i]);
    }
  }
  long after = rss_shmem_kib(fixture->daemon.pid);
  print_message(
      "halod's RssShmem %ld KiB before reading 16 MiB nobody "
      "wrote, %ld KiB after\n",
      before, after);
  assert_true(after - before < 1024);

  // What was written reads back (a write at the buffer's end, across a
  // page).
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__BufferWrite write = HALO__WIRE__BUFFER_WRITE__INIT;
  uint8_t data[6000];
  for (size_t i = 0; i < sizeof(data); ++i) data[i] = (uint8_t)(i * 7 + 1);
  write.handle = handle;
  write.offset = kBytes - sizeof(data);
  write.data.data = data;
  write.data.len = sizeof(data);
  request.body_case = HALO__WIRE__REQUEST__BODY_BUFFER_WRITE;
  request.buffer_write = &write;
  halo__wire__response__free_unpacked(
      HALO_TEST_EXPECT_OK(halo_test_raw_call(&raw, &request)), NULL);
  buffer_read(&raw, handle, kBytes - sizeof(data), chunk, sizeof(data));
  assert_memory_equal(chunk, data, sizeof(data));
  free(chunk);
  halo_test_raw_close(&raw);
}

int main(void) {
  halo_test_require_driver();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_worker_goes_before_halod,
                                      halo_test_fixture_setup,
                                      halo_test_fixture_teardown),
      cmocka_unit_test(test_oom_score_adj_setting),
      cmocka_unit_test_setup_teardown(test_oom_score_of_a_halod_not_root,
                                      setup_halod_as_nobody,
                                      teardown_halod_as_nobody),
      cmocka_unit_test_setup_teardown(
          test_read_of_untouched_memory_faults_nothing, halo_test_fixture_setup,
          halo_test_fixture_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
