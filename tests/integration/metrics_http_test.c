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
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/time.h>

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

// ------------------------------------------------------- slow and many clients

// A TCP connection from |source| (an address of the loopback network) to
// 127.0.0.1:|port|; -1 with errno if it cannot be made.
static int metrics_connect_from(const char *source, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in local = {.sin_family = AF_INET};
  assert_int_equal(inet_pton(AF_INET, source, &local.sin_addr), 1);
  struct sockaddr_in remote = {.sin_family = AF_INET, .sin_port = htons(port)};
  remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&local, sizeof(local)) != 0 ||
      connect(fd, (struct sockaddr *)&remote, sizeof(remote)) != 0) {
    int error = errno;
    close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

// Whether 127.0.0.2 can be a source address here (Linux routes all of
// 127.0.0.0/8 to the loopback interface).
static bool metrics_second_address(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in local = {.sin_family = AF_INET};
  inet_pton(AF_INET, "127.0.0.2", &local.sin_addr);
  bool ok = bind(fd, (struct sockaddr *)&local, sizeof(local)) == 0;
  close(fd);
  return ok;
}

// GET /metrics from |source| (the connection closed after it): whether the
// answer is 200 with metrics; a connection refused or closed without an
// answer, or none within 10 s, is not.
static bool metrics_get_from(const char *source, uint16_t port) {
  int fd = metrics_connect_from(source, port);
  if (fd < 0) return false;
  struct timeval timeout = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  static const char kRequest[] =
      "GET /metrics HTTP/1.1\r\nHost: halod\r\nConnection: close\r\n\r\n";
  bool ok = send(fd, kRequest, sizeof(kRequest) - 1, MSG_NOSIGNAL) ==
            (ssize_t)(sizeof(kRequest) - 1);
  char reply[65536];
  size_t length = 0;
  while (ok && length < sizeof(reply) - 1) {
    ssize_t n = recv(fd, reply + length, sizeof(reply) - 1 - length, 0);
    if (n <= 0) break;
    length += (size_t)n;
  }
  reply[length] = '\0';
  close(fd);
  return ok && strncmp(reply, "HTTP/1.1 200", 12) == 0 &&
         strstr(reply, "halo_metrics_snapshot_age_seconds");
}

// Whether the server closed |fd| (end of file or a reset), waiting at most
// |timeout_ms| for it.
static bool metrics_closed(int fd, int timeout_ms) {
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  if (poll(&pfd, 1, timeout_ms) <= 0) return false;
  char byte;
  return recv(fd, &byte, 1, MSG_DONTWAIT) <= 0;
}

// The start of a request whose headers never end.
static const char kUnfinished[] = "GET /metrics HTTP/1.1\r\nHost: halod\r\n";

// Sends a header line on each of |count| connections every 300 ms (well
// within any idle timeout) until |*stop|.
typedef struct metrics_trickle_t {
  const int *fds;
  int count;
  atomic_bool stop;
} metrics_trickle_t;

static void *metrics_trickle(void *argument) {
  metrics_trickle_t *trickle = argument;
  while (!atomic_load(&trickle->stop)) {
    static const char kLine[] = "X-Trickle: 1\r\n";
    for (int i = 0; i < trickle->count; ++i) {
      if (trickle->fds[i] < 0) continue;
      (void)send(trickle->fds[i], kLine, sizeof(kLine) - 1,
                 MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    ops_sleep_ms(300);
  }
  return NULL;
}

// 64 connections of one address, each sending a request a header line at a
// time (as many as halod serves at once): it keeps at most 8 of them (it
// closes the others as they arrive), and a scrape from another address
// succeeds meanwhile. Before, the 64 held every connection /metrics serves
// and every other scrape timed out.
static void test_one_address_cannot_hold_every_connection(void **state) {
  (void)state;
  if (!metrics_second_address()) {
    print_message("skipped: 127.0.0.2 is not a local address here\n");
    skip();
  }
  ops_daemon_t daemon;
  ops_daemon_prepare(&daemon);
  ops_daemon_start(
      &daemon, (const char *const[]){"--metrics-address", "127.0.0.1:0", NULL},
      NULL);
  char url[128];
  metrics_url(&daemon, url, sizeof(url));
  uint16_t port = (uint16_t)atoi(strrchr(url, ':') + 1);
  enum { kConnections = 64 };
  int fds[kConnections];
  for (int i = 0; i < kConnections; ++i) {
    fds[i] = metrics_connect_from("127.0.0.1", port);
    if (fds[i] >= 0) {
      (void)send(fds[i], kUnfinished, sizeof(kUnfinished) - 1, MSG_NOSIGNAL);
    }
  }
  metrics_trickle_t trickle = {.fds = fds, .count = kConnections};
  pthread_t trickler;
  assert_int_equal(pthread_create(&trickler, NULL, metrics_trickle, &trickle),
                   0);
  bool scraped = metrics_get_from("127.0.0.2", port);
  atomic_store(&trickle.stop, true);
  pthread_join(trickler, NULL);
  assert_true(scraped);
  // Those closed as they arrived are closed by now, those kept are closed 5 s
  // after they arrived: at least 56 closed (given 2 s to be seen).
  bool seen_closed[kConnections] = {false};
  int closed = 0;
  for (int64_t give_up = ops_now_ms() + 2000;
       closed < kConnections - 8 && ops_now_ms() < give_up;) {
    ops_sleep_ms(20);
    for (int i = 0; i < kConnections; ++i) {
      if (!seen_closed[i] && (fds[i] < 0 || metrics_closed(fds[i], 0))) {
        seen_closed[i] = true;
        ++closed;
      }
    }
  }
  for (int i = 0; i < kConnections; ++i) {
    if (fds[i] >= 0) close(fds[i]);
  }
  if (closed < kConnections - 8) {
    print_error("halod kept %d connections of one address\n",
                kConnections - closed);
    fail();
  }
  // Its connections gone, the first address is served again (once halod
  // saw them close).
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    served = metrics_get_from("127.0.0.1", port);
    if (!served) ops_sleep_ms(100);
  }
  assert_true(served);
  assert_int_equal(ops_daemon_stop(&daemon), 0);
  ops_daemon_cleanup(&daemon);
}

// A client that sends its request a header line at a time, each well within
// libmicrohttpd's idle timeout, is closed once the request has taken 5 s,
// however long it would go on; a scrape of the same address works after
// it. Before, such a client held its connection for as long as it sent.
static void test_slow_request_is_closed(void **state) {
  (void)state;
  ops_daemon_t daemon;
  ops_daemon_prepare(&daemon);
  ops_daemon_start(
      &daemon, (const char *const[]){"--metrics-address", "127.0.0.1:0", NULL},
      NULL);
  char url[128];
  metrics_url(&daemon, url, sizeof(url));
  uint16_t port = (uint16_t)atoi(strrchr(url, ':') + 1);
  int fd = metrics_connect_from("127.0.0.1", port);
  assert_true(fd >= 0);
  assert_int_equal(send(fd, kUnfinished, sizeof(kUnfinished) - 1, MSG_NOSIGNAL),
                   (ssize_t)(sizeof(kUnfinished) - 1));
  // A header line every 200 ms for up to 30 s (the test gives up then).
  bool closed = false;
  for (int i = 0; i < 150 && !closed; ++i) {
    static const char kLine[] = "X-Trickle: 1\r\n";
    closed = send(fd, kLine, sizeof(kLine) - 1, MSG_NOSIGNAL) < 0 ||
             metrics_closed(fd, 200);
  }
  close(fd);
  if (!closed) {
    print_error("halod kept a request that went on for 30 s\n");
    fail();
  }
  assert_true(metrics_get_from("127.0.0.1", port));
  assert_int_equal(ops_daemon_stop(&daemon), 0);
  ops_daemon_cleanup(&daemon);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scrape_both_formats),
      cmocka_unit_test(test_scrape_ipv6),
      cmocka_unit_test(test_scrape_while_loop_blocked),
      cmocka_unit_test(test_bad_address_names_the_setting),
      cmocka_unit_test(test_port_in_use_is_refused),
      cmocka_unit_test(test_one_address_cannot_hold_every_connection),
      cmocka_unit_test(test_slow_request_is_closed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
