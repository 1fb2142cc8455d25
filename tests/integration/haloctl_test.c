// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// haloctl against a running halod with clients: every command in both
// output modes (tables and JSON that parses), what it shows of the clients'
// work, the device workers (and a session lost with its worker), the device
// faults charged to a client and its refusal over the fault budget,
// kill-client, forgive-client, drain, metrics, --watch, the exit codes, and
// that the client socket refuses every admin request.
#include "tests/integration/ops_support.h"
// clang-format off
#include "tests/support/halo_test.h"
// clang-format on

#include <dirent.h>
#include <inttypes.h>

#include "halo/halo.h"

#ifndef HALO_TEST_HALOCTL
#error "HALO_TEST_HALOCTL must name the haloctl executable"
#endif
#ifndef HALO_TEST_PEER
#error "HALO_TEST_PEER must name semaphore_peer"
#endif

typedef struct haloctl_fixture_t {
  ops_daemon_t daemon;
  halo_client_t *client;
  pid_t peer;
} haloctl_fixture_t;

static int haloctl_setup(void **state) {
  haloctl_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  ops_daemon_prepare(&fixture->daemon);
  ops_daemon_start(&fixture->daemon, NULL, NULL);
  halo_client_options_t options = {.address = fixture->daemon.listen,
                                   .client_name = "haloctl-test \"quoted\""};
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &fixture->client));
  return 0;
}

static int haloctl_teardown(void **state) {
  haloctl_fixture_t *fixture = *state;
  if (fixture->peer) {
    kill(fixture->peer, SIGKILL);
    waitpid(fixture->peer, NULL, 0);
  }
  halo_client_close(fixture->client);
  int code = ops_daemon_stop(&fixture->daemon);
  ops_daemon_cleanup(&fixture->daemon);
  free(fixture);
  assert_int_equal(code, 0);  // under ASan: nothing leaked
  return 0;
}

// Runs haloctl against the fixture's daemon with |args| (NULL-terminated).
static void haloctl_run(const haloctl_fixture_t *fixture,
                        const char *const *args, ops_result_t *out_result) {
  const char *argv[24] = {HALO_TEST_HALOCTL, "--admin", fixture->daemon.admin};
  size_t n = 3;
  while (*args && n < 23) argv[n++] = *args++;
  argv[n] = NULL;
  ops_run(argv, NULL, out_result);
}

// The fixture's client: a device buffer, a host-visible one and a
// semaphore; a fill submission waiting on the semaphore (value 1).
typedef struct haloctl_work_t {
  halo_buffer_t *device_buffer;
  halo_buffer_t *host_buffer;
  halo_semaphore_t *gate;
  halo_semaphore_t *done;
  halo_command_buffer_t *command_buffer;
} haloctl_work_t;

static void haloctl_work_begin(haloctl_fixture_t *fixture,
                               haloctl_work_t *work) {
  memset(work, 0, sizeof(*work));
  halo_client_t *client = fixture->client;
  HALO_TEST_ASSERT_OK(halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, 4096, 0,
                                         &work->device_buffer));
  HALO_TEST_ASSERT_OK(halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE,
                                         1 << 20, 0, &work->host_buffer));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &work->gate));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &work->done));
  HALO_TEST_ASSERT_OK(halo_command_buffer_begin(
      client, 0, HALO_COMMAND_BUFFER_REUSABLE, 0, &work->command_buffer));
  uint32_t pattern = 0x5a5a5a5a;
  HALO_TEST_ASSERT_OK(halo_command_buffer_fill(
      work->command_buffer, halo_buffer_ref(work->device_buffer, 0, 4096),
      &pattern, sizeof(pattern)));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(work->command_buffer));
  halo_semaphore_value_t wait = {work->gate, 1};
  halo_semaphore_value_t signal = {work->done, 1};
  HALO_TEST_ASSERT_OK(halo_queue_execute(NULL, work->command_buffer, NULL, 0,
                                         &wait, 1, &signal, 1));
}

// Opens the gate and waits for the submission.
static void haloctl_work_finish(haloctl_work_t *work) {
  HALO_TEST_ASSERT_OK(halo_semaphore_signal(work->gate, 1));
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(work->done, 1, 5000000000ll));
}

static void haloctl_work_release(haloctl_work_t *work) {
  halo_command_buffer_release(work->command_buffer);
  halo_semaphore_release(work->gate);
  halo_semaphore_release(work->done);
  halo_buffer_release(work->device_buffer);
  halo_buffer_release(work->host_buffer);
}

static void test_every_command_in_both_modes(void **state) {
  haloctl_fixture_t *fixture = *state;
  haloctl_work_t work;
  haloctl_work_begin(fixture, &work);
  static const char *const kCommands[] = {
      "status",  "clients",     "queues", "workers", "semaphores",
      "buffers", "executables", "cache",  "metrics"};
  for (size_t i = 0; i < sizeof(kCommands) / sizeof(kCommands[0]); ++i) {
    ops_result_t text, json;
    haloctl_run(fixture, (const char *const[]){kCommands[i], NULL}, &text);
    haloctl_run(fixture, (const char *const[]){"--json", kCommands[i], NULL},
                &json);
    OPS_EXPECT(&text, text.exit_code == 0 && text.out[0] && !text.err[0]);
    OPS_EXPECT(&json, json.exit_code == 0 && ops_json_valid(json.out));
    ops_result_free(&text);
    ops_result_free(&json);
  }
  haloctl_work_finish(&work);
  haloctl_work_release(&work);
}

static void test_clients_show_the_work_of_each(void **state) {
  haloctl_fixture_t *fixture = *state;
  haloctl_work_t work;
  haloctl_work_begin(fixture, &work);
  char pid[32];
  snprintf(pid, sizeof(pid), "\"pid\":%d,", (int)getpid());

  ops_result_t r;
  haloctl_run(fixture, (const char *const[]){"--json", "clients", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out));
  OPS_EXPECT(&r, strstr(r.out, pid));
  OPS_EXPECT(&r,
             strstr(r.out, "\"client_name\":\"haloctl-test \\\"quoted\\\"\""));
  OPS_EXPECT(&r, strstr(r.out, "\"device_bytes\":4096"));
  OPS_EXPECT(&r, strstr(r.out, "\"host_bytes\":1048576"));
  OPS_EXPECT(&r, strstr(r.out,
                        "\"devices\":[{\"device\":0,\"buffers\":2,"
                        "\"device_bytes\":4096,\"host_bytes\":1048576}]"));
  OPS_EXPECT(&r, strstr(r.out, "\"submissions\":1,\"pending\":1,"));
  ops_result_free(&r);

  haloctl_run(fixture, (const char *const[]){"clients", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  char pid_text[32];
  snprintf(pid_text, sizeof(pid_text), " %d ", (int)getpid());
  OPS_EXPECT(&r, strstr(r.out, "PER DEVICE") && strstr(r.out, pid_text));
  OPS_EXPECT(&r, strstr(r.out, "0:2/1.0 MiB"));
  // Its trust domain (the default: its uid's).
  char domain_text[32];
  snprintf(domain_text, sizeof(domain_text), " uid:%u ", (unsigned)getuid());
  OPS_EXPECT(&r, strstr(r.out, "DOMAIN") && strstr(r.out, domain_text));
  ops_result_free(&r);

  // The queue: the pending submission waits on the gate for 1.
  haloctl_run(fixture, (const char *const[]){"--json", "queues", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out));
  OPS_EXPECT(&r, strstr(r.out, "\"pending\":1,"));
  OPS_EXPECT(&r, strstr(r.out, "\"value\":1,\"current\":0,\"met\":false"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"queues", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  OPS_EXPECT(&r, strstr(r.out, "pending (oldest first)") &&
                     strstr(r.out, ">= 1 (now 0)"));
  ops_result_free(&r);

  // The semaphore it waits on has a daemon-side waiter; the one it will
  // signal has a pending value.
  haloctl_run(fixture, (const char *const[]){"--json", "semaphores", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out));
  OPS_EXPECT(&r, strstr(r.out, "\"waiters\":1,"));
  OPS_EXPECT(&r, strstr(r.out, "\"pending_value\":1,"));
  ops_result_free(&r);

  haloctl_work_finish(&work);
  haloctl_run(fixture, (const char *const[]){"--json", "clients", NULL}, &r);
  OPS_EXPECT(&r, strstr(r.out,
                        "\"submissions\":1,\"pending\":0,"
                        "\"in_flight\":0,\"completed\":1,"
                        "\"failures\":0"));
  ops_result_free(&r);
  // The table has the completed submissions too: 1, right-aligned under
  // COMPLETED in the session's row (the only one).
  haloctl_run(fixture, (const char *const[]){"clients", NULL}, &r);
  const char *completed = strstr(r.out, "IN FLIGHT  COMPLETED  FAILED");
  const char *row = strchr(r.out, '\n');
  OPS_EXPECT(&r, r.exit_code == 0 && completed && row);
  size_t end = (size_t)(completed - r.out) + strlen("IN FLIGHT  COMPLETED");
  OPS_EXPECT(&r, strlen(row + 1) > end && row[end] == '1' &&
                     row[end - 1] == ' ' && row[end + 1] == ' ');
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"--json", "queues", NULL}, &r);
  OPS_EXPECT(&r, strstr(r.out, "\"completed\":1,") &&
                     !strstr(r.out, "\"latency_p50_us\":0.0,"));
  ops_result_free(&r);

  // A failed semaphore shows its failure.
  HALO_TEST_ASSERT_OK(halo_semaphore_fail(work.gate, HALO_STATUS_DATA_LOSS,
                                          "broken on purpose"));
  haloctl_run(fixture, (const char *const[]){"semaphores", NULL}, &r);
  OPS_EXPECT(&r, strstr(r.out, "failed: DATA_LOSS") &&
                     strstr(r.out, "broken on purpose"));
  ops_result_free(&r);
  haloctl_work_release(&work);
}

static void test_buffers_and_cache(void **state) {
  haloctl_fixture_t *fixture = *state;
  haloctl_work_t work;
  haloctl_work_begin(fixture, &work);
  ops_result_t r;
  haloctl_run(fixture, (const char *const[]){"--json", "buffers", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out));
  OPS_EXPECT(&r, strstr(r.out, "\"memory_type\":\"device\",\"size\":4096"));
  OPS_EXPECT(&r, strstr(r.out,
                        "\"memory_type\":\"host_visible\","
                        "\"size\":1048576"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"--json", "cache", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out));
  OPS_EXPECT(&r, strstr(r.out, "\"misses\":1,\"entries\":[{"));
  OPS_EXPECT(&r, strstr(r.out, "\"executables\":[]"));
  // The summaries: one recording held by the work, nothing cached yet.
  OPS_EXPECT(&r, strstr(r.out,
                        "\"memo_cache\":{\"entries\":1,\"held\":1,"
                        "\"cached\":0,\"capacity\":256,\"hits\":0,"
                        "\"misses\":1,\"evictions\":0,\"cached_bytes\":0,"
                        "\"capacity_bytes\":268435456}"));
  OPS_EXPECT(&r, strstr(r.out, "\"executable_cache\":{\"entries\":0,"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"cache", NULL}, &r);
  OPS_EXPECT(&r, strstr(r.out, "memoized recordings: 1") &&
                     strstr(r.out, "executables: 0 loaded"));
  OPS_EXPECT(&r, strstr(r.out,
                        "memo cache: 1 entries (1 held, 0 cached of at most "
                        "256, 0 bytes of at most 268435456); hits 0, misses "
                        "1, evictions 0"));
  OPS_EXPECT(&r, strstr(r.out,
                        "executable cache: 0 entries (0 held, 0 cached of at "
                        "most 64, 0 bytes of at most 536870912)"));
  ops_result_free(&r);
  haloctl_work_finish(&work);
  haloctl_work_release(&work);
}

static void test_metrics(void **state) {
  haloctl_fixture_t *fixture = *state;
  haloctl_work_t work;
  haloctl_work_begin(fixture, &work);
  haloctl_work_finish(&work);
  ops_result_t r;
  haloctl_run(fixture, (const char *const[]){"metrics", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  OPS_EXPECT(&r, strstr(r.out,
                        "# TYPE halo_submissions_total counter\n"
                        "halo_submissions_total{device=\"0\"} 1\n"));
  OPS_EXPECT(&r, strstr(r.out, "halo_completions_total{device=\"0\"} 1\n"));
  OPS_EXPECT(&r, strstr(r.out, "halo_pending_submissions{device=\"0\"} 0\n"));
  OPS_EXPECT(&r, strstr(r.out,
                        "# TYPE halo_execution_latency_seconds "
                        "histogram"));
  OPS_EXPECT(&r, strstr(r.out,
                        "halo_execution_latency_seconds_bucket{"
                        "device=\"0\",le=\"+Inf\"} 1\n"));
  OPS_EXPECT(&r, strstr(r.out,
                        "halo_execution_latency_seconds_count{"
                        "device=\"0\"} 1\n"));
  OPS_EXPECT(&r, strstr(r.out,
                        "halo_device_allocated_bytes{device=\"0\","
                        "memory=\"device\"} 4096\n"));
  // Labels are bounded: nothing per session or process (haloctl clients
  // has that).
  OPS_EXPECT(&r, !strstr(r.out, "pid=\"") && !strstr(r.out, "session=\"") &&
                     !strstr(r.out, "haloctl-test"));
  OPS_EXPECT(&r, strstr(r.out, "halo_sessions_active 1\n"));
  OPS_EXPECT(&r, strstr(r.out, "# TYPE process_open_fds gauge\n"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"--json", "metrics", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out));
  OPS_EXPECT(&r, strstr(r.out,
                        "{\"name\":\"halo_completions_total\","
                        "\"labels\":{\"device\":\"0\"},\"value\":1}"));
  ops_result_free(&r);
  haloctl_work_release(&work);
}

// The value of the sample "NAME " (no labels) in `haloctl metrics`.
static double haloctl_metric_value(const haloctl_fixture_t *fixture,
                                   const char *name) {
  ops_result_t r;
  haloctl_run(fixture, (const char *const[]){"metrics", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  char key[96];
  snprintf(key, sizeof(key), "\n%s ", name);
  const char *at = strstr(r.out, key);
  OPS_EXPECT(&r, at);
  double value = strtod(at + strlen(key), NULL);
  ops_result_free(&r);
  return value;
}

// halo_start_time_seconds is when halod started: the same in every scrape
// (Prometheus' changes() of it tells restarts), and close to
// process_start_time_seconds. It was the current second less the
// uptime, so it moved by up to a second from one scrape to the next.
static void test_start_time_is_constant(void **state) {
  haloctl_fixture_t *fixture = *state;
  double first = haloctl_metric_value(fixture, "halo_start_time_seconds");
  double process = haloctl_metric_value(fixture, "process_start_time_seconds");
  for (int i = 0; i < 3; ++i) {
    ops_sleep_ms(270);
    double again = haloctl_metric_value(fixture, "halo_start_time_seconds");
    if (again != first) {
      print_error("halo_start_time_seconds moved from %.6f to %.6f\n", first,
                  again);
      fail();
    }
  }
  // Both are taken early in halod's start (loose bounds for sanitizers).
  assert_true(first - process < 5.0 && process - first < 5.0);
}

// The row of docs/operations.md's metrics table that names |name| (its
// first column lists names in backquotes, "`..._misses_total`" standing for
// the name before it with its last two parts replaced); NULL if none.
static const char *haloctl_metrics_row(const char *table, const char *name,
                                       char *out_type, size_t capacity) {
  for (const char *row = strstr(table, "\n| `"); row;
       row = strstr(row + 1, "\n| `")) {
    const char *end = strchr(row + 1, '\n');
    if (!end) end = row + strlen(row);
    const char *column_end = strstr(row + 3, " | ");
    if (!column_end || column_end > end) continue;
    char previous[128] = "";
    int index = 0, found = -1;
    for (const char *c = strchr(row, '`'); c && c < column_end;
         c = strchr(c + 1, '`')) {
      const char *close = strchr(c + 1, '`');
      if (!close || close > column_end) break;
      char listed[128];
      snprintf(listed, sizeof(listed), "%.*s", (int)(close - c - 1), c + 1);
      if (strncmp(listed, "...", 3) == 0) {
        // "..._a_b": the name before, less its last two parts, then "_a_b".
        char *cut = strrchr(previous, '_');
        if (cut) *cut = '\0';
        cut = strrchr(previous, '_');
        if (cut) *cut = '\0';
        char expanded[128];
        snprintf(expanded, sizeof(expanded), "%s%s", previous, listed + 3);
        snprintf(listed, sizeof(listed), "%s", expanded);
      }
      snprintf(previous, sizeof(previous), "%s", listed);
      if (strcmp(listed, name) == 0) found = index;
      ++index;
      c = close;
    }
    if (found < 0) continue;
    // The type column: "gauge", or "gauge, counter" one per name, the last
    // for the names after it.
    const char *types = column_end + 3;
    const char *types_end = strstr(types, " | ");
    int count = 0;
    for (const char *t = types; t && t < types_end && count <= found;) {
      size_t length = strcspn(t, ", |");
      snprintf(out_type, capacity, "%.*s", (int)length, t);
      ++count;
      t += length;
      while (*t == ',' || *t == ' ') ++t;
    }
    return row;
  }
  return NULL;
}

// Every family `haloctl metrics` prints has a row of its type in
// docs/operations.md's metrics table.
static void test_metrics_are_documented(void **state) {
  haloctl_fixture_t *fixture = *state;
  char path[512];
  const char *example = HALO_TEST_EXAMPLE_CONFIG;
  snprintf(path, sizeof(path), "%.*sdocs/operations.md",
           (int)(strstr(example, "systemd/halod.conf") - example), example);
  char *operations = ops_read_file(path);
  const char *table =
      strstr(operations, "| metric | type | labels | meaning |");
  assert_non_null(table);
  ops_result_t r;
  haloctl_run(fixture, (const char *const[]){"metrics", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  bool missing = false;
  for (const char *type = strstr(r.out, "# TYPE "); type;
       type = strstr(type + 1, "# TYPE ")) {
    char name[128], kind[32];
    assert_int_equal(sscanf(type, "# TYPE %127s %31s", name, kind), 2);
    char documented[32] = "";
    if (!haloctl_metrics_row(table, name, documented, sizeof(documented))) {
      print_error("docs/operations.md's metrics table has no %s (%s)\n", name,
                  kind);
      missing = true;
    } else if (strcmp(documented, kind) != 0) {
      print_error("docs/operations.md's metrics table: %s is a %s, not a %s\n",
                  name, kind, documented);
      missing = true;
    }
  }
  ops_result_free(&r);
  free(operations);
  assert_false(missing);
}

// The pid after |key| ("\"domain\":\"uid:1000\",\"pid\":") in the output of
// `haloctl --json workers`, if the worker's state is |state| (a lost worker
// is listed with pid 0); -1 if none.
static pid_t haloctl_worker_pid(const char *json, const char *key,
                                const char *state) {
  char expected[64];
  snprintf(expected, sizeof(expected), ",\"state\":\"%s\"", state);
  for (const char *at = strstr(json, key); at; at = strstr(at + 1, key)) {
    int pid = 0, consumed = 0;
    if (sscanf(at + strlen(key), "%d%n", &pid, &consumed) == 1 &&
        strncmp(at + strlen(key) + consumed, expected, strlen(expected)) == 0) {
      return (pid_t)pid;
    }
  }
  return -1;
}

// Runs `haloctl --json workers` until it lists a worker of |domain| ("" for
// a spare) in |state| (at most 10 s); returns its pid (0 for a lost one).
static pid_t haloctl_wait_worker(const haloctl_fixture_t *fixture,
                                 const char *domain, const char *state) {
  char key[64];
  snprintf(key, sizeof(key), "\"domain\":\"%s\",\"pid\":", domain);
  int64_t deadline = ops_now_ms() + 10000;
  for (;;) {
    ops_result_t r;
    haloctl_run(fixture, (const char *const[]){"--json", "workers", NULL}, &r);
    OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out));
    pid_t pid = haloctl_worker_pid(r.out, key, state);
    if (pid >= 0 || ops_now_ms() > deadline) {
      if (pid < 0) {
        print_error("no %s worker of domain \"%s\" listed:\n%s\n", state,
                    domain, r.out);
      }
      ops_result_free(&r);
      assert_true(strcmp(state, "lost") == 0 ? pid == 0 : pid > 0);
      return pid;
    }
    ops_result_free(&r);
    ops_sleep_ms(20);
  }
}

static void test_workers(void **state) {
  haloctl_fixture_t *fixture = *state;
  // The fixture's client made its domain (--trust-domain uid, the default)
  // take a worker; a spare is started beside it.
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->client));
  char domain[32];
  snprintf(domain, sizeof(domain), "uid:%d", (int)getuid());
  pid_t serving = haloctl_wait_worker(fixture, domain, "serving");
  assert_true(halo_test_is_live_child(serving, fixture->daemon.pid));
  pid_t spare = haloctl_wait_worker(fixture, "", "spare");
  assert_true(halo_test_is_live_child(spare, fixture->daemon.pid));
  assert_int_not_equal(serving, spare);

  ops_result_t r;
  haloctl_run(fixture, (const char *const[]){"--json", "workers", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out));
  char needle[256];
  snprintf(needle, sizeof(needle),
           "{\"device\":0,\"domain\":\"%s\",\"pid\":%d,"
           "\"state\":\"serving\",\"sessions\":1,\"started\":1,"
           "\"faults\":0,\"last_fault\":\"\",\"graph_bytes\":null,"
           "\"graph_bytes_limit\":null,\"graph_instances\":null}",
           domain, (int)serving);
  OPS_EXPECT(&r, strstr(r.out, needle));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"workers", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && !r.err[0]);
  OPS_EXPECT(&r, strstr(r.out, "DEVICE") && strstr(r.out, "GRAPH MEMORY") &&
                     strstr(r.out, "LAST FAULT"));
  char pid_text[32];
  snprintf(pid_text, sizeof(pid_text), " %d  serving ", (int)serving);
  OPS_EXPECT(&r, strstr(r.out, domain) && strstr(r.out, pid_text));
  snprintf(pid_text, sizeof(pid_text), " %d  spare ", (int)spare);
  OPS_EXPECT(&r, strstr(r.out, "(spare)") && strstr(r.out, pid_text));
  ops_result_free(&r);

  // The worker dies: it is listed as lost with the fault, and the session
  // as lost with the reason.
  assert_int_equal(kill(serving, SIGKILL), 0);
  haloctl_wait_worker(fixture, domain, "lost");
  haloctl_run(fixture, (const char *const[]){"--json", "workers", NULL}, &r);
  snprintf(needle, sizeof(needle),
           "\"domain\":\"%s\",\"pid\":0,\"state\":\"lost\","
           "\"sessions\":1,\"started\":1,\"faults\":1,\"last_fault\":\"",
           domain);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, needle) &&
                     strstr(r.out, "killed by signal 9"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"--json", "clients", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out) &&
                     strstr(r.out, "\"lost\":\"") &&
                     !strstr(r.out, "\"lost\":null"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"clients", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, "\nlost (SESSION_LOST"));
  ops_result_free(&r);
}

// halod with fault-budget 1: one fault and the process is refused.
static int haloctl_setup_budget_one(void **state) {
  haloctl_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  ops_daemon_prepare(&fixture->daemon);
  static const char *const args[] = {"--fault-budget", "1", NULL};
  ops_daemon_start(&fixture->daemon, args, NULL);
  halo_client_options_t options = {.address = fixture->daemon.listen,
                                   .client_name = "haloctl-test"};
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &fixture->client));
  return 0;
}

// Runs the test kernels' `crash` on the fixture's client (it loses its
// worker: a fault charged to this process) and waits for DEVICE_LOST.
static void haloctl_crash(haloctl_fixture_t *fixture) {
  halo_executable_t *executable = halo_test_load_kernels(fixture->client);
  halo_semaphore_t *done = NULL;
  HALO_TEST_ASSERT_OK(halo_semaphore_create(fixture->client, 0, 0, &done));
  halo_command_buffer_t *cb =
      halo_test_begin(fixture->client, HALO_COMMAND_BUFFER_ONE_SHOT, 0);
  halo_dispatch_params_t params = {.executable = executable,
                                   .entry = "crash",
                                   .grid = {1, 1, 1},
                                   .block = {1, 1, 1}};
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(cb));
  halo_semaphore_value_t signal = {done, 1};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, cb, NULL, 0, NULL, 0, &signal, 1));
  halo_status_t status = halo_semaphore_wait(done, 1, 10000000000ll);
  assert_int_equal(halo_status_code(status), HALO_STATUS_DEVICE_LOST);
  halo_status_free(status);
  halo_command_buffer_release(cb);
  halo_semaphore_release(done);
  halo_executable_release(executable);
}

static void test_faults_and_forgive_client(void **state) {
  haloctl_fixture_t *fixture = *state;
  haloctl_crash(fixture);
  char pid[16];
  snprintf(pid, sizeof(pid), "%d", (int)getpid());

  // The lost session was charged the fault, and so was its process.
  ops_result_t r;
  haloctl_run(fixture, (const char *const[]){"--json", "clients", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out) &&
                     strstr(r.out,
                            "\"faults\":1,\"process_faults\":1,"
                            "\"lost\":\"") &&
                     strstr(r.out, "\"refused\":null"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"clients", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, "FAULTS") &&
                     strstr(r.out, " 1/1\n") &&
                     strstr(r.out, ", charged a fault): "));
  ops_result_free(&r);

  // Its process is over the budget (1): a new session is refused on Hello
  // and listed as refused, with the reason.
  halo_client_close(fixture->client);
  fixture->client = NULL;
  halo_test_raw_t raw;
  halo_test_raw_open(&raw, fixture->daemon.listen, 5000);
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  Halo__Wire__Hello hello = HALO__WIRE__HELLO__INIT;
  hello.protocol_version = HALO_PROTOCOL_VERSION;
  request.body_case = HALO__WIRE__REQUEST__BODY_HELLO;
  request.hello = &hello;
  HALO_TEST_EXPECT_ERROR(halo_test_raw_call(&raw, &request),
                         HALO_STATUS_RESOURCE_EXHAUSTED,
                         "(fault-budget=1): refused until");
  haloctl_run(fixture, (const char *const[]){"--json", "clients", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out) &&
                     strstr(r.out,
                            "\"faults\":0,\"process_faults\":1,"
                            "\"lost\":null,\"refused\":\"client "
                            "pid "));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"clients", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 &&
                     strstr(r.out, "\nrefused (over the fault budget") &&
                     strstr(r.out, "haloctl forgive-client "));
  ops_result_free(&r);
  halo_test_raw_close(&raw);

  // forgive-client forgets it: the process connects again.
  haloctl_run(fixture, (const char *const[]){"forgive-client", pid, NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, "forgave pid ") &&
                     strstr(r.out, " 1 device fault(s)"));
  ops_result_free(&r);
  haloctl_run(fixture,
              (const char *const[]){"--json", "forgive-client", pid, NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 1 && strstr(r.err, "NOT_FOUND"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"forgive-client", "x", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 2);
  ops_result_free(&r);
  halo_client_options_t options = {.address = fixture->daemon.listen,
                                   .client_name = "haloctl-test"};
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &fixture->client));
  haloctl_run(fixture, (const char *const[]){"--json", "clients", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out,
                                            "\"faults\":0,\"process_faults\":0,"
                                            "\"lost\":null,\"refused\":null"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"clients", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, " 0/1\n"));
  ops_result_free(&r);
}

// Reads the peer's stdout file until a line starts with |prefix|.
static char *haloctl_wait_output(const char *path, const char *prefix) {
  int64_t deadline = ops_now_ms() + 5000;
  for (;;) {
    char *text = ops_read_file(path);
    char *line = strstr(text, prefix);
    if (line && strchr(line, '\n')) return text;
    free(text);
    if (ops_now_ms() > deadline) {
      print_error("no \"%s\" from the peer\n", prefix);
      fail();
    }
    ops_sleep_ms(10);
  }
}

static void test_kill_client(void **state) {
  haloctl_fixture_t *fixture = *state;
  char out_path[200];
  snprintf(out_path, sizeof(out_path), "%s/peer.out", fixture->daemon.dir);
  const char *argv[] = {HALO_TEST_PEER, fixture->daemon.listen, "create", "0",
                        NULL};
  fixture->peer = ops_spawn(argv, NULL, out_path, NULL);
  char *text = haloctl_wait_output(out_path, "token ");
  halo_token_t token;
  char hex[33] = {0};
  assert_int_equal(sscanf(strstr(text, "token ") + 6, "%32s", hex), 1);
  free(text);
  HALO_TEST_ASSERT_OK(halo_token_parse(hex, &token));
  halo_semaphore_t *imported = NULL;
  HALO_TEST_ASSERT_OK(
      halo_semaphore_import(fixture->client, &token, &imported));

  char pid[16];
  snprintf(pid, sizeof(pid), "%d", (int)fixture->peer);
  ops_result_t r;
  haloctl_run(fixture,
              (const char *const[]){"--json", "kill-client", pid, NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out));
  unsigned long long session_id = 0;
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "{\"pid\":%s,\"sessions\":[\"", pid);
  OPS_EXPECT(&r, strncmp(r.out, prefix, strlen(prefix)) == 0 &&
                     sscanf(r.out + strlen(prefix), "%llu", &session_id) == 1);
  ops_result_free(&r);
  // The peer's semaphore failed with the reason; its session is gone (nng
  // in the peer may dial again, which makes a new session without Hello).
  halo_status_t status = halo_semaphore_wait(imported, 1, 5000000000ll);
  assert_int_equal(halo_status_code(status), HALO_STATUS_ABORTED);
  assert_non_null(strstr(halo_status_message(status), "administrator"));
  halo_status_free(status);
  haloctl_run(fixture, (const char *const[]){"--json", "clients", NULL}, &r);
  char needle[64];
  snprintf(needle, sizeof(needle), "\"session_id\":\"%llu\",", session_id);
  OPS_EXPECT(&r, r.exit_code == 0 && !strstr(r.out, needle));
  ops_result_free(&r);
  halo_semaphore_release(imported);
  // The process's connection is refused from now on (nng dials again).
  ops_sleep_ms(300);
  haloctl_run(fixture, (const char *const[]){"--json", "clients", NULL}, &r);
  snprintf(needle, sizeof(needle), "\"pid\":%s,", pid);
  OPS_EXPECT(&r, r.exit_code == 0 && !strstr(r.out, needle));
  ops_result_free(&r);

  // No session of that pid any more: an error from the daemon, exit 1.
  haloctl_run(fixture, (const char *const[]){"kill-client", pid, NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 1 && strstr(r.err, "NOT_FOUND"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"kill-client", "x", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 2);
  ops_result_free(&r);
  HALO_TEST_ASSERT_OK(halo_client_ping(fixture->client));
}

// The killed process's own waiter learns why too: its semaphore's slot
// says so, since its connection closes before it could ask (it got
// "semaphore failed with ABORTED" alone). |mode|: the peer's command.
static void haloctl_kill_client_waiter(haloctl_fixture_t *fixture,
                                       const char *mode) {
  char out_path[200];
  snprintf(out_path, sizeof(out_path), "%s/peer.out", fixture->daemon.dir);
  const char *argv[] = {HALO_TEST_PEER, fixture->daemon.listen, mode, NULL};
  fixture->peer = ops_spawn(argv, NULL, out_path, NULL);
  free(haloctl_wait_output(out_path, "ready"));
  char pid[16];
  snprintf(pid, sizeof(pid), "%d", (int)fixture->peer);
  ops_result_t r;
  haloctl_run(fixture, (const char *const[]){"kill-client", pid, NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  ops_result_free(&r);
  char *text = haloctl_wait_output(out_path, "done ");
  char expected[256];
  snprintf(expected, sizeof(expected),
           "done %d semaphore failed: the session that created it (pid %s) "
           "was killed by an administrator (haloctl kill-client)",
           (int)HALO_STATUS_ABORTED, pid);
  if (!strstr(text, expected)) {
    print_error("the peer said: %s\nexpected: %s\n", text, expected);
    fail();
  }
  free(text);
}

static void test_kill_client_tells_its_own_waiters(void **state) {
  haloctl_kill_client_waiter(*state, "own-wait");
}

// The same when the semaphore waited for is the signal of the peer's
// queued work: failing the semaphore that work waits on fails the work, and
// so this one, before the kill reaches it (it got "semaphore failed with
// ABORTED": the kill's reason was set only on a semaphore not failed yet).
static void test_kill_client_tells_waiters_of_queued_work(void **state) {
  haloctl_kill_client_waiter(*state, "queued-wait");
}

static void test_drain_and_undrain(void **state) {
  haloctl_fixture_t *fixture = *state;
  haloctl_work_t work;
  haloctl_work_begin(fixture, &work);
  // Work pending: a drain that does not wait reports it; one that waits a
  // little times out (exit 1).
  ops_result_t r;
  haloctl_run(fixture, (const char *const[]){"--json", "drain", "0", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out) &&
                     strstr(r.out, "\"draining\":true,\"drained\":false"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"drain", "0.3", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 1 && strstr(r.out, "still draining"));
  ops_result_free(&r);

  // New sessions and new submissions are refused; accepted work finishes.
  halo_client_options_t options = {.address = fixture->daemon.listen};
  halo_client_t *late = NULL;
  halo_status_t status = halo_client_connect(&options, &late);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNAVAILABLE);
  assert_non_null(strstr(halo_status_message(status), "draining"));
  halo_status_free(status);
  halo_semaphore_value_t signal = {work.done, 2};
  status = halo_queue_execute(NULL, work.command_buffer, NULL, 0, NULL, 0,
                              &signal, 1);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNAVAILABLE);
  halo_status_free(status);
  haloctl_work_finish(&work);
  haloctl_run(fixture, (const char *const[]){"drain", "5", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, "drained"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"--json", "status", NULL}, &r);
  OPS_EXPECT(&r, strstr(r.out, "\"draining\":true"));
  ops_result_free(&r);

  haloctl_run(fixture, (const char *const[]){"undrain", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  ops_result_free(&r);
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &late));
  halo_client_close(late);
  haloctl_work_release(&work);
}

static void test_watch(void **state) {
  haloctl_fixture_t *fixture = *state;
  ops_result_t r;
  haloctl_run(fixture,
              (const char *const[]){"--json", "--watch", "0.1", "--count", "3",
                                    "status", NULL},
              &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  // One document a line.
  int lines = 0;
  for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
    OPS_EXPECT(&r, ops_json_valid(line));
    ++lines;
  }
  assert_int_equal(lines, 3);
  ops_result_free(&r);
  haloctl_run(
      fixture,
      (const char *const[]){"--watch", "0.1", "--count", "2", "queues", NULL},
      &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out,
                                            "every 0.1s: haloctl "
                                            "queues"));
  ops_result_free(&r);
  // Only status, clients and queues can be watched.
  haloctl_run(fixture,
              (const char *const[]){"--watch", "1", "semaphores", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 2);
  ops_result_free(&r);
}

static void test_exit_codes_and_help(void **state) {
  haloctl_fixture_t *fixture = *state;
  ops_result_t r;
  const char *help[] = {HALO_TEST_HALOCTL, "--help", NULL};
  ops_run(help, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, "exit status") &&
                     strstr(r.out, "kill-client PID"));
  ops_result_free(&r);
  // Usage: 2.
  haloctl_run(fixture, (const char *const[]){"frobnicate", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, "unknown command"));
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 2);
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"status", "extra", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 2);
  ops_result_free(&r);
  // Cannot connect: 3.
  char nowhere[200];
  snprintf(nowhere, sizeof(nowhere), "ipc://%s/nobody.sock",
           fixture->daemon.dir);
  const char *unreachable[] = {HALO_TEST_HALOCTL, "--admin", nowhere, "status",
                               NULL};
  ops_run(unreachable, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 3 && strstr(r.err, "cannot reach"));
  ops_result_free(&r);
  // $HALO_ADMIN_ADDRESS when --admin is not given.
  char env[200];
  snprintf(env, sizeof(env), "HALO_ADMIN_ADDRESS=%s", fixture->daemon.admin);
  const char *plain[] = {HALO_TEST_HALOCTL, "status", NULL};
  ops_run(plain, (const char *const[]){env, NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, "halod "));
  ops_result_free(&r);
  // The admin socket's path without ipc:// (the flag and the variable).
  const char *path = fixture->daemon.admin + strlen("ipc://");
  const char *by_path[] = {HALO_TEST_HALOCTL, "--admin", path, "status", NULL};
  ops_run(by_path, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, "halod "));
  ops_result_free(&r);
  snprintf(env, sizeof(env), "HALO_ADMIN_ADDRESS=%s", path);
  ops_run(plain, (const char *const[]){env, NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, "halod "));
  ops_result_free(&r);
  // Another scheme: the admin socket is ipc:// only.
  const char *tcp[] = {HALO_TEST_HALOCTL, "--admin", "tcp://127.0.0.1:1",
                       "status", NULL};
  ops_run(tcp, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 2 &&
                     strstr(r.err, "'tcp://127.0.0.1:1' is not an ipc://"));
  ops_result_free(&r);
}

// Refused by the admin socket's permissions: the hint is given once.
static void test_permission_denied_hint_once(void **state) {
  haloctl_fixture_t *fixture = *state;
  // A directory nobody may search (root: haloctl runs as nobody, through
  // setpriv, where it cannot search the fixture's directory either).
  char locked[128], address[200];
  snprintf(locked, sizeof(locked), "%s/locked", fixture->daemon.dir);
  assert_int_equal(mkdir(locked, 0), 0);
  snprintf(address, sizeof(address), "ipc://%s/admin.sock", locked);
  const char *argv[12];
  size_t n = 0;
  if (geteuid() == 0) {
    if (access("/usr/bin/setpriv", X_OK) != 0) {
      print_message("no setpriv: the permission hint is not checked\n");
      return;
    }
    static const char *const kAsNobody[] = {
        "/usr/bin/setpriv", "--reuid=65534",   "--regid=65534",
        "--clear-groups",   "--inh-caps=-all", NULL};
    for (const char *const *w = kAsNobody; *w; ++w) argv[n++] = *w;
  }
  argv[n++] = HALO_TEST_HALOCTL;
  argv[n++] = "--admin";
  argv[n++] = address;
  argv[n++] = "status";
  argv[n] = NULL;
  ops_result_t r;
  ops_run(argv, NULL, &r);
  static const char kHint[] = "run haloctl as root or as a member";
  const char *hint = strstr(r.err, kHint);
  OPS_EXPECT(&r, r.exit_code == 3 && strstr(r.err, "Permission denied") &&
                     hint && !strstr(hint + strlen(kHint), "member") &&
                     !strstr(r.err, "admits root"));
  // The address once too.
  const char *named = strstr(r.err, address);
  OPS_EXPECT(&r, named && !strstr(named + 1, address));
  ops_result_free(&r);
}

// --timeout bounds the connection too: a halod that is stopped (SIGSTOP, a
// debugger, a frozen host) accepts the connection in the kernel but never
// completes nng's handshake, which nng itself gives up on only after 10 s.
static void test_timeout_with_a_stopped_daemon(void **state) {
  haloctl_fixture_t *fixture = *state;
  assert_int_equal(kill(fixture->daemon.pid, SIGSTOP), 0);
  int64_t start = ops_now_ms();
  ops_result_t r;
  haloctl_run(fixture,
              (const char *const[]){"--timeout", "500", "status", NULL}, &r);
  int64_t took = ops_now_ms() - start;
  assert_int_equal(kill(fixture->daemon.pid, SIGCONT), 0);
  OPS_EXPECT(&r, r.exit_code == 3 && strstr(r.err, "cannot reach halod"));
  if (took > 3000) {
    print_error("haloctl --timeout 500 took %lld ms\n", (long long)took);
    fail();
  }
  ops_result_free(&r);
  // Running again, it answers.
  haloctl_run(fixture, (const char *const[]){"status", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  ops_result_free(&r);
}

// Options after the command, 64-bit ids as JSON strings, the CSV query, and
// one-line usage errors.
static void test_options_anywhere_ids_and_queries(void **state) {
  haloctl_fixture_t *fixture = *state;
  haloctl_work_t work;
  haloctl_work_begin(fixture, &work);
  haloctl_work_finish(&work);
  ops_result_t r;
  // `haloctl status --json` as `haloctl --json status`.
  haloctl_run(fixture, (const char *const[]){"status", "--json", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && ops_json_valid(r.out) &&
                     strstr(r.out, "\"incarnation\":\""));
  ops_result_free(&r);
  // The session id as a string, exactly (it may exceed 2^53).
  char id[64];
  snprintf(id, sizeof(id), "\"session_id\":\"%" PRIu64 "\",",
           halo_client_session_id(fixture->client));
  haloctl_run(fixture, (const char *const[]){"clients", "--json", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, id));
  ops_result_free(&r);

  // The query: a header, then one row per session, CSV-quoted.
  haloctl_run(fixture,
              (const char *const[]){"clients",
                                    "--query=session_id,pid,uid,client_name,"
                                    "faults",
                                    "--format=csv", NULL},
              &r);
  char expected[200];
  snprintf(expected, sizeof(expected),
           "session_id,pid,uid,client_name,faults\n%" PRIu64
           ",%d,%d,\"haloctl-test \"\"quoted\"\"\",0\n",
           halo_client_session_id(fixture->client), (int)getpid(),
           (int)getuid());
  OPS_EXPECT(&r, r.exit_code == 0 && strcmp(r.out, expected) == 0);
  ops_result_free(&r);
  haloctl_run(fixture,
              (const char *const[]){"--format", "csv,noheader", "--query",
                                    "pid", "clients", NULL},
              &r);
  snprintf(expected, sizeof(expected), "%d\n", (int)getpid());
  OPS_EXPECT(&r, r.exit_code == 0 && strcmp(r.out, expected) == 0);
  ops_result_free(&r);
  // Every field that is a value, without --query; a field of an object.
  haloctl_run(fixture, (const char *const[]){"buffers", "--format=csv", NULL},
              &r);
  OPS_EXPECT(&r,
             r.exit_code == 0 &&
                 strncmp(r.out, "buffer_id,owner_session,device,", 31) == 0 &&
                 strstr(r.out, ",device,4096,"));
  ops_result_free(&r);
  haloctl_run(
      fixture,
      (const char *const[]){"metrics", "--query=name,labels.device,value",
                            "--format=csv,noheader", NULL},
      &r);
  OPS_EXPECT(&r, r.exit_code == 0 &&
                     strstr(r.out, "\nhalo_completions_total,0,1\n") &&
                     strstr(r.out, "\nhalo_sessions_active,,1\n"));
  ops_result_free(&r);
  // Fields that are not there, or not values: exit 2, naming them.
  haloctl_run(fixture,
              (const char *const[]){"clients", "--query=pid,nope", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && !r.out[0] &&
                     strstr(r.err, "clients has no field 'nope'"));
  ops_result_free(&r);
  haloctl_run(fixture,
              (const char *const[]){"clients", "--query=devices", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, "'devices' holds a list"));
  ops_result_free(&r);

  // Usage errors: one line naming what was wrong.
  static const struct {
    const char *args[4];
    const char *error;
  } kErrors[] = {
      {{"status", "--jsn"}, "haloctl: unknown option '--jsn'"},
      {{"status", "--timeout"}, "haloctl: option '--timeout' needs a value"},
      {{"status", "--format=xml"}, "--format wants csv or csv,noheader"},
      {{"status", "--json", "--query=pid"}, "exclude each other"},
      {{"kill-client", "1", "--query=pid"}, "not kill-client"},
      {{"clients", "--query=a,,b"}, "--query wants FIELD,FIELD"},
  };
  for (size_t i = 0; i < sizeof(kErrors) / sizeof(kErrors[0]); ++i) {
    haloctl_run(fixture, kErrors[i].args, &r);
    OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, kErrors[i].error) &&
                       strstr(r.err, "(see haloctl --help)\n") &&
                       strchr(r.err, '\n') == r.err + strlen(r.err) - 1);
    ops_result_free(&r);
  }
  haloctl_work_release(&work);
}

// A listing with no rows: --query's fields are checked against the
// listing's fields all the same, and --format=csv prints its header.
static void test_queries_of_an_empty_listing(void **state) {
  haloctl_fixture_t *fixture = *state;
  halo_client_close(fixture->client);
  fixture->client = NULL;
  ops_result_t r;
  // The closed session may take a moment to go.
  int64_t deadline = ops_now_ms() + 5000;
  for (;;) {
    haloctl_run(fixture,
                (const char *const[]){"clients", "--query=pid",
                                      "--format=csv,noheader", NULL},
                &r);
    bool empty = r.exit_code == 0 && !r.out[0];
    if (empty || ops_now_ms() > deadline) {
      OPS_EXPECT(&r, empty);
      ops_result_free(&r);
      break;
    }
    ops_result_free(&r);
    ops_sleep_ms(20);
  }
  haloctl_run(fixture,
              (const char *const[]){"clients", "--query=pid,bogus",
                                    "--format=csv", NULL},
              &r);
  OPS_EXPECT(&r, r.exit_code == 2 && !r.out[0] &&
                     strstr(r.err, "clients has no field 'bogus'") &&
                     strstr(r.err, "session_id"));
  ops_result_free(&r);
  haloctl_run(fixture,
              (const char *const[]){"clients", "--query=devices", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, "'devices' holds a list"));
  ops_result_free(&r);
  haloctl_run(fixture,
              (const char *const[]){"clients", "--query=pid,client_name",
                                    "--format=csv", NULL},
              &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strcmp(r.out, "pid,client_name\n") == 0);
  ops_result_free(&r);
  // Without --query: the header of every field that is a value, and no row.
  haloctl_run(fixture, (const char *const[]){"clients", "--format=csv", NULL},
              &r);
  OPS_EXPECT(
      &r, r.exit_code == 0 && strncmp(r.out, "session_id,uid,pid,", 19) == 0 &&
              strstr(r.out, ",completed,") && !strstr(r.out, "devices") &&
              strchr(r.out, '\n') == r.out + strlen(r.out) - 1);
  ops_result_free(&r);
  // The fixture's client loaded no executable; metrics has rows.
  haloctl_run(fixture,
              (const char *const[]){"executables", "--format=csv", NULL}, &r);
  OPS_EXPECT(
      &r, r.exit_code == 0 && strncmp(r.out,
                                      "executable_id,device,format,hash,state,"
                                      "bytes,origin,",
                                      52) == 0);
  ops_result_free(&r);
  haloctl_run(fixture,
              (const char *const[]){"executables", "--query=nope", NULL}, &r);
  OPS_EXPECT(
      &r, r.exit_code == 2 && strstr(r.err, "executables has no field 'nope'"));
  ops_result_free(&r);
  haloctl_run(fixture,
              (const char *const[]){"metrics", "--query=name,labels.x,value",
                                    "--format=csv", NULL},
              &r);
  OPS_EXPECT(
      &r, r.exit_code == 0 && strncmp(r.out, "name,labels.x,value\n", 20) == 0);
  ops_result_free(&r);
}

static void test_client_socket_refuses_admin_requests(void **state) {
  haloctl_fixture_t *fixture = *state;
  halo_test_raw_t raw;
  halo_test_raw_open(&raw, fixture->daemon.listen, 0);
  halo_test_raw_hello(&raw);
  // Every admin body of the protocol (numbers 100 and up).
  const ProtobufCMessageDescriptor *descriptor =
      &halo__wire__request__descriptor;
  int admin_types = 0;
  for (unsigned i = 0; i < descriptor->n_fields; ++i) {
    const ProtobufCFieldDescriptor *field = &descriptor->fields[i];
    if (field->id < 100) continue;
    ++admin_types;
    const ProtobufCMessageDescriptor *body = field->descriptor;
    ProtobufCMessage *message = calloc(1, body->sizeof_message);
    assert_non_null(message);
    protobuf_c_message_init(body, message);
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
    *(ProtobufCMessage **)((char *)&request + field->offset) = message;
    *(uint32_t *)((char *)&request + field->quantifier_offset) = field->id;
    HALO_TEST_EXPECT_ERROR(halo_test_raw_call(&raw, &request),
                           HALO_STATUS_PERMISSION_DENIED, "admin socket");
    free(message);
  }
  assert_true(admin_types >= 10);
  halo_test_raw_close(&raw);
  // haloctl pointed at the client socket (no Hello: it is no client) is
  // told it is the wrong one, not that Hello must come first.
  const char *wrong[] = {HALO_TEST_HALOCTL, "--admin", fixture->daemon.listen,
                         "status", NULL};
  ops_result_t r;
  ops_run(wrong, NULL, &r);
  OPS_EXPECT(&r, r.exit_code != 0 && strstr(r.err, "PERMISSION_DENIED") &&
                     strstr(r.err, "client socket") && !strstr(r.err, "Hello"));
  ops_result_free(&r);
  // Still there.
  haloctl_run(fixture, (const char *const[]){"status", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  ops_result_free(&r);
}

// The sockets this process has open.
static int count_own_sockets(void) {
  DIR *fds = opendir("/proc/self/fd");
  assert_non_null(fds);
  int count = 0;
  struct dirent *entry;
  while ((entry = readdir(fds))) {
    char path[300], target[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%s", entry->d_name);
    ssize_t length = readlink(path, target, sizeof(target) - 1);
    if (length <= 0) continue;
    target[length] = 0;
    if (strncmp(target, "socket:", 7) == 0) ++count;
  }
  closedir(fds);
  return count;
}

// haloctl's admin client does not dial again once its connection is lost:
// it holds no connection to a new halod on the same socket (nng 1.5.2 would
// have dialed it again on its own), and a call fails at once.
static void test_admin_client_does_not_redial(void **state) {
  haloctl_fixture_t *fixture = *state;
  halo_client_close(fixture->client);
  fixture->client = NULL;
  // The sockets before the admin client's (the closed client's may take a
  // moment to go): the same in two looks 50 ms apart.
  int before = -1;
  for (int tries = 0; tries < 100; ++tries) {
    int now = count_own_sockets();
    if (now == before) break;
    before = now;
    ops_sleep_ms(50);
  }
  halo_admin_t *admin = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_connect(fixture->daemon.admin, 5000, &admin));
  halo_wire_response_t *response = NULL;
  HALO_TEST_ASSERT_OK(halo_admin_status(admin, &response));
  halo__wire__response__free_unpacked(response, NULL);
  assert_true(count_own_sockets() > before);
  assert_int_equal(ops_daemon_stop(&fixture->daemon), 0);
  ops_daemon_start(&fixture->daemon, NULL, NULL);
  // The lost connection's sockets are closed (nng closes them on its own
  // threads)...
  assert_true(HALO_TEST_POLL(count_own_sockets() == before, 5000));
  // ...and none is opened again: nng's reconnect time is 100 ms by
  // default, and half the time none.
  ops_sleep_ms(500);
  assert_int_equal(count_own_sockets(), before);
  int64_t start = ops_now_ms();
  response = NULL;
  halo_status_t status = halo_admin_status(admin, &response);
  int64_t took = ops_now_ms() - start;
  if (!status) {
    halo__wire__response__free_unpacked(response, NULL);
    print_error("the admin client dialed the new halod again\n");
    fail();
  }
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNAVAILABLE);
  halo_status_free(status);
  assert_true(took < 1000);
  halo_admin_close(admin);
  // A new connection is answered.
  assert_true(ops_daemon_answers(&fixture->daemon));
}

// ---------------------------------------------------------------- ring

// The fixture's client running a REUSABLE recording of the test kernels'
// `armed` entry on a host-visible word (|flags|: [0] the mode, [1] set
// once an armed run started), signaling |done|: the first execution halod
// takes from the submission ring and grants to the device worker, which
// takes the later ones itself.
typedef struct haloctl_ring_t {
  halo_executable_t *executable;
  halo_buffer_t *word;
  uint32_t *flags;
  halo_command_buffer_t *cb;
  halo_semaphore_t *done;
  uint64_t steps;  // executed so far (the last signal)
} haloctl_ring_t;

// Executes the recording once more, signaling done |ring->steps|.
static void haloctl_ring_execute(haloctl_fixture_t *fixture,
                                 haloctl_ring_t *ring) {
  (void)fixture;
  halo_semaphore_value_t signal = {ring->done, ++ring->steps};
  HALO_TEST_ASSERT_OK(
      halo_queue_execute(NULL, ring->cb, NULL, 0, NULL, 0, &signal, 1));
}

// Runs the recording harmlessly twice (halod takes the first, the worker
// the second).
static void haloctl_ring_start(haloctl_fixture_t *fixture,
                               haloctl_ring_t *ring) {
  memset(ring, 0, sizeof(*ring));
  halo_client_t *client = fixture->client;
  ring->executable = halo_test_load_kernels(client);
  ring->word = halo_test_create_buffer(client, HALO_MEMORY_HOST_VISIBLE, 8, 0);
  ring->flags = halo_buffer_host_pointer(ring->word);
  halo_dispatch_arg_t args[1] = {
      {HALO_DISPATCH_ARG_BUFFER, halo_buffer_ref(ring->word, 0, 8), NULL, 0},
  };
  halo_dispatch_params_t params = {.executable = ring->executable,
                                   .entry = "armed",
                                   .grid = {1, 1, 1},
                                   .block = {1, 1, 1},
                                   .args = args,
                                   .arg_count = 1};
  ring->cb = halo_test_begin(client, HALO_COMMAND_BUFFER_REUSABLE, 0);
  HALO_TEST_ASSERT_OK(halo_command_buffer_dispatch(ring->cb, &params));
  HALO_TEST_ASSERT_OK(halo_command_buffer_end(ring->cb));
  HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &ring->done));
  for (int i = 0; i < 2; ++i) {
    haloctl_ring_execute(fixture, ring);
    HALO_TEST_ASSERT_OK(
        halo_semaphore_wait(ring->done, ring->steps, 10000000000ll));
  }
}

// Arms the recording with |mode| (1 spin for ever, 2 crash, 3 spin until
// disarmed), executes it and waits until it runs.
static void haloctl_ring_arm(haloctl_fixture_t *fixture, haloctl_ring_t *ring,
                             uint32_t mode) {
  (void)fixture;
  __atomic_store_n(&ring->flags[0], mode, __ATOMIC_RELEASE);
  halo_semaphore_value_t signal = {ring->done, ++ring->steps};
  halo_status_t status =
      halo_queue_execute(NULL, ring->cb, NULL, 0, NULL, 0, &signal, 1);
  // A crash can be quick enough to fail the call itself (SESSION_LOST).
  if (mode == 2 && halo_status_code(status) == HALO_STATUS_SESSION_LOST) {
    halo_status_free(status);
  } else {
    HALO_TEST_ASSERT_OK(status);
  }
  assert_true(HALO_TEST_POLL(
      __atomic_load_n(&ring->flags[1], __ATOMIC_ACQUIRE) == 1, 5000));
}

static void haloctl_ring_release(haloctl_ring_t *ring) {
  halo_semaphore_release(ring->done);
  halo_command_buffer_release(ring->cb);
  halo_buffer_release(ring->word);
  halo_executable_release(ring->executable);
}

// What the fixture's one session shows of its work, and device 0.
typedef struct haloctl_counts_t {
  uint64_t submissions;
  uint32_t in_flight;
  uint64_t completed;
  uint64_t failures;
} haloctl_counts_t;

// Whether haloctl (status, clients, and unless |session_only| queues) and
// the metrics of device 0 show |expected|; |print|: says what differs.
static bool haloctl_counts_shown(const haloctl_fixture_t *fixture,
                                 const haloctl_counts_t *expected,
                                 bool with_queues, bool print) {
  bool shown = true;
  char needle[256];
  ops_result_t r;
  haloctl_run(fixture, (const char *const[]){"--json", "clients", NULL}, &r);
  snprintf(needle, sizeof(needle),
           "\"submissions\":%" PRIu64 ",\"pending\":0,\"in_flight\":%" PRIu32
           ",\"completed\":%" PRIu64 ",\"failures\":%" PRIu64,
           expected->submissions, expected->in_flight, expected->completed,
           expected->failures);
  if (r.exit_code != 0 || !strstr(r.out, needle)) {
    if (print) print_error("haloctl clients: no %s in\n%s\n", needle, r.out);
    shown = false;
  }
  ops_result_free(&r);
  if (with_queues) {
    haloctl_run(fixture, (const char *const[]){"--json", "queues", NULL}, &r);
    snprintf(needle, sizeof(needle),
             "\"pending\":0,\"in_flight\":%" PRIu32 ",\"completed\":%" PRIu64
             ",\"failed\":%" PRIu64 ",",
             expected->in_flight, expected->completed, expected->failures);
    if (r.exit_code != 0 || !strstr(r.out, needle)) {
      if (print) print_error("haloctl queues: no %s in\n%s\n", needle, r.out);
      shown = false;
    }
    ops_result_free(&r);
  }
  haloctl_run(fixture, (const char *const[]){"--json", "status", NULL}, &r);
  snprintf(needle, sizeof(needle), "\"pending\":0,\"in_flight\":%" PRIu32 ",",
           expected->in_flight);
  if (r.exit_code != 0 || !strstr(r.out, needle)) {
    if (print) print_error("haloctl status: no %s in\n%s\n", needle, r.out);
    shown = false;
  }
  ops_result_free(&r);
  haloctl_run(fixture, (const char *const[]){"metrics", NULL}, &r);
  const struct {
    const char *name;
    uint64_t value;
  } samples[] = {
      {"halo_submissions_total", expected->submissions},
      {"halo_in_flight_submissions", expected->in_flight},
      {"halo_completions_total", expected->completed},
      {"halo_failures_total", expected->failures},
  };
  for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); ++i) {
    snprintf(needle, sizeof(needle), "\n%s{device=\"0\"} %" PRIu64 "\n",
             samples[i].name, samples[i].value);
    if (r.exit_code != 0 || !strstr(r.out, needle)) {
      if (print) print_error("haloctl metrics: no %s\n", needle + 1);
      shown = false;
    }
  }
  if (!shown && print) print_error("haloctl metrics:\n%s\n", r.out);
  ops_result_free(&r);
  return shown;
}

// haloctl and the metrics show |expected| now.
static void haloctl_expect_counts(const haloctl_fixture_t *fixture,
                                  haloctl_counts_t expected, bool with_queues) {
  assert_true(haloctl_counts_shown(fixture, &expected, with_queues, true));
}

// ... within 10 s (what the worker reports may linger a little).
static void haloctl_expect_counts_soon(const haloctl_fixture_t *fixture,
                                       haloctl_counts_t expected,
                                       bool with_queues) {
  int64_t deadline = ops_now_ms() + 10000;
  while (!haloctl_counts_shown(fixture, &expected, with_queues, false)) {
    if (ops_now_ms() > deadline) {
      haloctl_expect_counts(fixture, expected, with_queues);
      return;
    }
    ops_sleep_ms(20);
  }
}

// An execution the device worker took from the submission ring itself
// (ring-consumer worker, the default) counts as submitted once taken and
// as in flight until it completed, in haloctl clients and queues and in
// halo_submissions_total as in haloctl status and
// halo_in_flight_submissions. Before, clients and queues showed it in
// flight nowhere and halo_submissions_total and the clients' submissions
// counted it only once its completion reached halod, while status and
// halo_in_flight_submissions counted it in flight.
static void test_ring_executions_in_flight(void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  haloctl_fixture_t *fixture = *state;
  haloctl_ring_t ring;
  haloctl_ring_start(fixture, &ring);
  haloctl_expect_counts_soon(fixture, (haloctl_counts_t){2, 0, 2, 0}, true);
  assert_true(
      haloctl_metric_value(fixture, "halo_ring_worker_executions_total") >= 1);
  double taken =
      haloctl_metric_value(fixture, "halo_ring_worker_executions_total");
  haloctl_ring_arm(fixture, &ring, 3);  // spins until disarmed
  haloctl_expect_counts(fixture, (haloctl_counts_t){3, 1, 2, 0}, true);
  // Taken by the worker, not by halod.
  assert_true(haloctl_metric_value(
                  fixture, "halo_ring_worker_executions_total") == taken);
  __atomic_store_n(&ring.flags[0], 0, __ATOMIC_RELEASE);
  HALO_TEST_ASSERT_OK(halo_semaphore_wait(ring.done, 3, 10000000000ll));
  haloctl_expect_counts_soon(fixture, (haloctl_counts_t){3, 0, 3, 0}, true);
  assert_true(haloctl_metric_value(
                  fixture, "halo_ring_worker_executions_total") == taken + 1);
  haloctl_ring_release(&ring);
}

// A ring execution in flight on a worker that is lost (|mode| 1: it spins
// and the test kills the worker once haloctl showed it in flight; 2: it
// crashes the worker before anyone looked) counts as submitted and failed.
// Before, it counted nowhere: its completion never reached halod.
static void haloctl_ring_lost(haloctl_fixture_t *fixture, uint32_t mode) {
  haloctl_ring_t ring;
  haloctl_ring_start(fixture, &ring);
  haloctl_expect_counts_soon(fixture, (haloctl_counts_t){2, 0, 2, 0}, true);
  char domain[32];
  snprintf(domain, sizeof(domain), "uid:%d", (int)getuid());
  pid_t worker = haloctl_wait_worker(fixture, domain, "serving");
  haloctl_ring_arm(fixture, &ring, mode);
  if (mode == 1) {
    haloctl_expect_counts(fixture, (haloctl_counts_t){3, 1, 2, 0}, true);
    assert_int_equal(kill(worker, SIGKILL), 0);
  }
  halo_status_t status = halo_semaphore_wait(ring.done, 3, 10000000000ll);
  assert_int_not_equal(halo_status_consume_code(status), HALO_STATUS_OK);
  // The session is lost with its worker (its queue may be gone: the
  // session's and the device's totals keep its counts).
  haloctl_expect_counts_soon(fixture, (haloctl_counts_t){3, 0, 2, 1}, false);
  haloctl_ring_release(&ring);
}

static void test_ring_execution_of_a_killed_worker(void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  haloctl_ring_lost(*state, 1);
}

static void test_ring_execution_of_a_crashed_worker(void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  haloctl_ring_lost(*state, 2);
}

// A fixture whose device workers hold after each RING_COMPLETE they send,
// before they free the flight entries of the executions it reports, while
// the file |hold| exists (tests/support/worker_gates.c, preloaded into halod).
// While the file |fail| exists, their sends of a RING_COMPLETE fail.
typedef struct haloctl_hold_fixture_t {
  haloctl_fixture_t base;  // first: the tests take it as a haloctl_fixture_t
  char hold[128];
  char fail[128];
} haloctl_hold_fixture_t;

static int haloctl_setup_report_hold(void **state) {
  haloctl_hold_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  *state = fixture;
  ops_daemon_prepare(&fixture->base.daemon);
  snprintf(fixture->hold, sizeof(fixture->hold), "%s/hold",
           fixture->base.daemon.dir);
  snprintf(fixture->fail, sizeof(fixture->fail), "%s/fail",
           fixture->base.daemon.dir);
  // ASan wants its runtime first among the loaded libraries; the preloaded
  // one comes before it (it is not instrumented).
  const char *asan = getenv("ASAN_OPTIONS");
  char asan_options[512], preload[512], hold[160], fail[160];
  snprintf(asan_options, sizeof(asan_options),
           "ASAN_OPTIONS=%s%sverify_asan_link_order=0", asan ? asan : "",
           asan && *asan ? ":" : "");
  snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", WORKER_GATES_LIBRARY);
  snprintf(hold, sizeof(hold), "HALO_TEST_REPORT_HOLD=%s", fixture->hold);
  snprintf(fail, sizeof(fail), "HALO_TEST_REPORT_FAIL=%s", fixture->fail);
  const char *const env[] = {asan_options, preload, hold, fail, NULL};
  ops_daemon_start(&fixture->base.daemon, NULL, env);
  halo_client_options_t options = {.address = fixture->base.daemon.listen};
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &fixture->base.client));
  return 0;
}

static int haloctl_teardown_report_hold(void **state) {
  haloctl_hold_fixture_t *fixture = *state;
  unlink(fixture->hold);  // the worker goes on
  unlink(fixture->fail);
  return haloctl_teardown(state);
}

// Runs the ring recording once more with the worker held after its report
// (|hold|): halod applied the report (the wait returned, and the counts
// show it completed) while the worker still names the execution in its
// flight table.
static void haloctl_ring_reported_and_held(haloctl_hold_fixture_t *fixture,
                                           haloctl_ring_t *ring) {
  haloctl_ring_start(&fixture->base, ring);
  haloctl_expect_counts_soon(&fixture->base, (haloctl_counts_t){2, 0, 2, 0},
                             true);
  int fd = open(fixture->hold, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  close(fd);
  haloctl_ring_execute(&fixture->base, ring);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(ring->done, ring->steps, 10000000000ll));
  char held[160];
  snprintf(held, sizeof(held), "%s.held", fixture->hold);
  assert_true(HALO_TEST_POLL(access(held, F_OK) == 0, 5000));
  haloctl_expect_counts_soon(&fixture->base, (haloctl_counts_t){3, 0, 3, 0},
                             true);
}

// A ring execution whose report halod applied while the worker had not
// freed its flight entry yet (a worker preempted between the send and the
// free) counts once. Before, every later look at the counts took it from
// the table as taken again: haloctl and halo_submissions_total showed 4
// submissions of 3 for good, and the worker's end counted it failed too.
static void test_ring_execution_reported_before_its_entry_is_freed(
    void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  haloctl_hold_fixture_t *fixture = *state;
  haloctl_ring_t ring;
  haloctl_ring_reported_and_held(fixture, &ring);
  // Looked at again (each look reads the flight table), still once.
  haloctl_expect_counts(&fixture->base, (haloctl_counts_t){3, 0, 3, 0}, true);
  assert_int_equal(unlink(fixture->hold), 0);
  haloctl_ring_execute(&fixture->base, &ring);
  HALO_TEST_ASSERT_OK(
      halo_semaphore_wait(ring.done, ring.steps, 10000000000ll));
  haloctl_expect_counts_soon(&fixture->base, (haloctl_counts_t){4, 0, 4, 0},
                             true);
  haloctl_ring_release(&ring);
}

// ... and where the worker is lost right then: its flight table, read
// before its last reports, still names the execution, which counts once,
// as completed. Before, it counted twice (4 submissions, 4 completed).
static void test_ring_execution_reported_then_worker_lost(void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  haloctl_hold_fixture_t *fixture = *state;
  haloctl_ring_t ring;
  char domain[32];
  snprintf(domain, sizeof(domain), "uid:%d", (int)getuid());
  haloctl_ring_reported_and_held(fixture, &ring);
  pid_t worker = haloctl_wait_worker(&fixture->base, domain, "serving");
  assert_int_equal(kill(worker, SIGKILL), 0);
  haloctl_wait_worker(&fixture->base, domain, "lost");
  haloctl_expect_counts_soon(&fixture->base, (haloctl_counts_t){3, 0, 3, 0},
                             false);
  haloctl_ring_release(&ring);
}

// A ring execution whose report the worker fails to send (before its
// first byte, as for want of memory: the link stays up) is tried again,
// then the worker shuts its link down and ends; halod counts the execution
// once, as completed, its outcome applied from the flight table. Before,
// the worker freed its entry as if the report had gone and went on: the
// execution counted nowhere and its outcome was never applied.
static void test_ring_execution_whose_report_failed(void **state) {
  HALO_TEST_LOCAL_ONLY("the armed kernel is an ELF for the local driver");
  haloctl_hold_fixture_t *fixture = *state;
  haloctl_ring_t ring;
  char domain[32];
  snprintf(domain, sizeof(domain), "uid:%d", (int)getuid());
  haloctl_ring_start(&fixture->base, &ring);
  haloctl_expect_counts_soon(&fixture->base, (haloctl_counts_t){2, 0, 2, 0},
                             true);
  int fd = open(fixture->fail, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  close(fd);
  haloctl_ring_execute(&fixture->base, &ring);
  haloctl_wait_worker(&fixture->base, domain, "lost");
  assert_int_equal(unlink(fixture->fail), 0);
  haloctl_expect_counts_soon(&fixture->base, (haloctl_counts_t){3, 0, 3, 0},
                             false);
  assert_true(ops_daemon_log_has(&fixture->base.daemon,
                                 "a ring completion report could not be sent",
                                 5000));
  haloctl_ring_release(&ring);
}

int main(void) {
#define T(name) \
  cmocka_unit_test_setup_teardown(name, haloctl_setup, haloctl_teardown)
  const struct CMUnitTest tests[] = {
      T(test_every_command_in_both_modes),
      T(test_clients_show_the_work_of_each),
      T(test_buffers_and_cache),
      T(test_workers),
      T(test_metrics),
      T(test_start_time_is_constant),
      T(test_metrics_are_documented),
      T(test_ring_executions_in_flight),
      T(test_ring_execution_of_a_killed_worker),
      T(test_ring_execution_of_a_crashed_worker),
      cmocka_unit_test_setup_teardown(
          test_ring_execution_reported_before_its_entry_is_freed,
          haloctl_setup_report_hold, haloctl_teardown_report_hold),
      cmocka_unit_test_setup_teardown(
          test_ring_execution_reported_then_worker_lost,
          haloctl_setup_report_hold, haloctl_teardown_report_hold),
      cmocka_unit_test_setup_teardown(test_ring_execution_whose_report_failed,
                                      haloctl_setup_report_hold,
                                      haloctl_teardown_report_hold),
      T(test_kill_client),
      T(test_kill_client_tells_its_own_waiters),
      T(test_kill_client_tells_waiters_of_queued_work),
      cmocka_unit_test_setup_teardown(test_faults_and_forgive_client,
                                      haloctl_setup_budget_one,
                                      haloctl_teardown),
      T(test_drain_and_undrain),
      T(test_watch),
      T(test_exit_codes_and_help),
      T(test_permission_denied_hint_once),
      T(test_timeout_with_a_stopped_daemon),
      T(test_options_anywhere_ids_and_queries),
      T(test_queries_of_an_empty_listing),
      T(test_client_socket_refuses_admin_requests),
      T(test_admin_client_does_not_redial),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
