// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halod's HTTP /metrics (metrics-address): a real halod with a client
// connected, scraped over HTTP by tests/integration/metrics_scrape.py with
// the Prometheus client's own parsers in both formats (0.0.4 and
// OpenMetrics 1.0), over IPv4 and IPv6; scrapes answered at once with the
// last snapshot, marked by its age, while halod's loop is blocked, and
// fresh ones again once it runs; the textfile removed when halod stops; a
// bad metrics-address refused naming the setting (flag and file); a port
// in use refused at start.
#include "tests/integration/ops_support.h"
// clang-format off
#include "tests/support/halo_test.h"
// clang-format on

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "halo/halo.h"

#ifndef HALO_TEST_PYTHON
#error "HALO_TEST_PYTHON must name a python3 that has prometheus_client"
#endif
#ifndef HALO_TEST_SCRAPE
#error "HALO_TEST_SCRAPE must name tests/integration/metrics_scrape.py"
#endif

// "http://HOST:PORT/metrics" from halod's log line "metrics: serving ...".
static void metrics_url(const ops_daemon_t *daemon, char *url,
                        size_t capacity) {
  assert_true(ops_daemon_log_has(daemon, "metrics: serving http://", 5000));
  char *log = ops_read_file(daemon->log_path);
  const char *start = strstr(log, "metrics: serving ") + strlen("metrics: ");
  start += strlen("serving ");
  size_t length = strcspn(start, "\n");
  snprintf(url, capacity, "%.*s", (int)length, start);
  free(log);
}

// Runs the scraper against |url| with halod's loop answering ("fresh") or
// blocked ("stale"); see metrics_scrape.py.
static void metrics_scrape_run(const char *url, int sessions, const char *mode,
                               ops_result_t *out_result) {
  char count[16];
  snprintf(count, sizeof(count), "%d", sessions);
  ops_run((const char *const[]){HALO_TEST_PYTHON, HALO_TEST_SCRAPE, url, count,
                                mode, NULL},
          NULL, out_result);
}

// Fails the test unless the scraper passed; skips it when the scraper says
// so (77: no Prometheus client).
static void metrics_scrape_expect(ops_result_t *r) {
  if (r->exit_code == 77) {
    print_message("skipped: %s\n", r->out);
    ops_result_free(r);
    skip();
  }
  OPS_EXPECT(r, r->exit_code == 0);
  print_message("%s", r->out);
  ops_result_free(r);
}

static void metrics_scrape(const char *url, int sessions) {
  ops_result_t r;
  metrics_scrape_run(url, sessions, "fresh", &r);
  metrics_scrape_expect(&r);
}

// Whether something accepts TCP connections on 127.0.0.1:|port|.
static bool metrics_port_open(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool open = connect(fd, (struct sockaddr *)&address, sizeof(address)) == 0;
  close(fd);
  return open;
}

static void test_scrape_both_formats(void **state) {
  (void)state;
  ops_daemon_t daemon;
  ops_daemon_prepare(&daemon);
  char textfile[128];
  snprintf(textfile, sizeof(textfile), "%s/halo.prom", daemon.dir);
  ops_daemon_start(&daemon,
                   (const char *const[]){"--metrics-address", "127.0.0.1:0",
                                         "--metrics-textfile", textfile, NULL},
                   NULL);
  halo_client_options_t options = {.address = daemon.listen,
                                   .client_name = "metrics-test"};
  halo_client_t *client = NULL;
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &client));
  char url[128];
  metrics_url(&daemon, url, sizeof(url));
  assert_non_null(strstr(url, "http://127.0.0.1:"));
  uint16_t port = (uint16_t)atoi(strrchr(url, ':') + 1);
  assert_true(port > 0);
  metrics_scrape(url, 1);
  halo_client_close(client);

  // Stopped: no textfile left behind, nothing on the port.
  assert_int_equal(access(textfile, F_OK), 0);
  assert_int_equal(ops_daemon_stop(&daemon), 0);
  assert_int_equal(access(textfile, F_OK), -1);
  assert_false(metrics_port_open(port));
  ops_daemon_cleanup(&daemon);
}

static void test_scrape_ipv6(void **state) {
  (void)state;
  int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in6 loopback = {.sin6_family = AF_INET6,
                                  .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  bool has_ipv6 = probe >= 0 && bind(probe, (struct sockaddr *)&loopback,
                                     sizeof(loopback)) == 0;
  if (probe >= 0) close(probe);
  if (!has_ipv6) {
    print_message("skipped: no IPv6 loopback here\n");
    skip();
  }
  ops_daemon_t daemon;
  ops_daemon_prepare(&daemon);
  ops_daemon_start(&daemon,
                   (const char *const[]){"--metrics-address", "[::1]:0", NULL},
                   NULL);
  char url[128];
  metrics_url(&daemon, url, sizeof(url));
  assert_non_null(strstr(url, "http://[::1]:"));
  metrics_scrape(url, 0);
  assert_int_equal(ops_daemon_stop(&daemon), 0);
  ops_daemon_cleanup(&daemon);
}

// A scrape while halod's loop does not answer (its thread stopped alone,
// halo_test_pause_loop: no request of a client makes it wait any more) is
// answered within about a second, with the last snapshot and its age;
// scrapes at once share that wait; once the loop runs, they are fresh.
// Before halod served the last snapshot, such a scrape waited 5 s and got
// 503.
static void test_scrape_while_loop_blocked(void **state) {
  (void)state;
  ops_daemon_t daemon;
  ops_daemon_prepare(&daemon);
  ops_daemon_start(
      &daemon, (const char *const[]){"--metrics-address", "127.0.0.1:0", NULL},
      NULL);
  halo_client_options_t options = {.address = daemon.listen,
                                   .client_name = "metrics-test"};
  halo_client_t *client = NULL;
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &client));
  char url[128];
  metrics_url(&daemon, url, sizeof(url));
  // A fresh snapshot with the client in it, in both formats.
  metrics_scrape(url, 1);

  if (!halo_test_pause_loop(daemon.pid)) {
    print_message("skipped: halod's loop cannot be paused alone (ptrace: %s)\n",
                  strerror(errno));
    halo_client_close(client);
    assert_int_equal(ops_daemon_stop(&daemon), 0);
    ops_daemon_cleanup(&daemon);
    skip();
  }
  ops_result_t stale = {0};
  metrics_scrape_run(url, 1, "stale", &stale);
  halo_test_resume_loop(daemon.pid);
  metrics_scrape_expect(&stale);

  // The loop runs again: fresh snapshots.
  metrics_scrape(url, 1);
  halo_client_close(client);
  assert_int_equal(ops_daemon_stop(&daemon), 0);
  ops_daemon_cleanup(&daemon);
}

static void test_bad_address_names_the_setting(void **state) {
  (void)state;
  static const struct {
    const char *value;
    const char *error;
  } kCases[] = {
      {"9400", "--metrics-address: '9400' is not HOST:PORT"},
      {"localhost:9400",
       "--metrics-address: 'localhost:9400': 'localhost' is not an IPv4 "
       "address"},
      {"127.0.0.1:65536",
       "--metrics-address: '127.0.0.1:65536': the port is not a number"},
      {"127.0.0.1:", "the port is not a number in 0..65535"},
      {"[::1:9400", "--metrics-address: '[::1:9400' is not HOST:PORT"},
      {"[1.2.3.4]:9400", "'1.2.3.4' is not an IPv6 address"},
  };
  for (size_t i = 0; i < sizeof(kCases) / sizeof(kCases[0]); ++i) {
    ops_result_t r;
    ops_run((const char *const[]){HALO_TEST_HALOD, "--metrics-address",
                                  kCases[i].value, NULL},
            NULL, &r);
    OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, kCases[i].error));
    ops_result_free(&r);
  }
  // In a config file: the file, the line and the setting.
  char dir[] = "/tmp/halo-metrics-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[64];
  snprintf(path, sizeof(path), "%s/halod.conf", dir);
  ops_write_file(path, "log-level = info\nmetrics-address = 0.0.0.0\n");
  ops_result_t r;
  ops_run((const char *const[]){HALO_TEST_HALOD, "--config", path, NULL}, NULL,
          &r);
  char expected[128];
  snprintf(expected, sizeof(expected),
           "%s:2: metrics-address: '0.0.0.0' is not HOST:PORT", path);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, expected));
  ops_result_free(&r);
  unlink(path);
  rmdir(dir);
}

static void test_port_in_use_is_refused(void **state) {
  (void)state;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in address = {.sin_family = AF_INET};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&address, sizeof(address)), 0);
  assert_int_equal(listen(fd, 1), 0);
  socklen_t length = sizeof(address);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&address, &length), 0);
  char value[32];
  snprintf(value, sizeof(value), "127.0.0.1:%u", ntohs(address.sin_port));

  ops_daemon_t daemon;
  ops_daemon_prepare(&daemon);
  ops_daemon_spawn(
      &daemon, (const char *const[]){"--metrics-address", value, NULL}, NULL);
  assert_int_equal(ops_wait(daemon.pid, 10000), 1);
  daemon.pid = 0;
  char expected[96];
  snprintf(expected, sizeof(expected),
           "metrics-address: cannot serve HTTP on %s: Address already in use",
           value);
  assert_true(ops_daemon_log_has(&daemon, expected, 0));
  ops_daemon_cleanup(&daemon);
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scrape_both_formats),
      cmocka_unit_test(test_scrape_ipv6),
      cmocka_unit_test(test_scrape_while_loop_blocked),
      cmocka_unit_test(test_bad_address_names_the_setting),
      cmocka_unit_test(test_port_in_use_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
