// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration test of issue 14's "one client blocks all others": attacker
// processes connect, send 1 MiB pings back to back and never read a reply.
// Before reply-timeout-ms and session-requests, 17 such pings held all 16
// of halod's request contexts and every other client's Hello timed out.
// Here a normal client keeps connecting (Hello), pinging and creating
// semaphores for the whole attack, each call within a bound, and halod
// still serves and stops cleanly afterwards. With many connections of one
// uid (more than contexts / session-requests), uid-replies keeps them from
// holding every context for reply-timeout-ms.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/halo_test.h"

enum {
  MAX_ATTACKERS = 16,    // processes, one connection each
  ATTACK_PINGS = 64,     // at most, per attacker
  PING_BYTES = 1 << 20,  // under max-message-bytes (4 MiB)
  ATTACK_MS = 10000,     // the normal client's probes run this long
  CALL_BOUND_MS = 3000,  // each of its calls must finish within
};

// A child process: one session that sends pings of PING_BYTES for
// |attack_ms| (at most ATTACK_PINGS) and never reads, then holds its
// connection until its parent closes |hold_fd|. It stops between whole
// frames: nng 1.5.2 can hang closing a pipe a message is arriving on.
static void attacker_main(const char *path, int64_t attack_ms, int hold_fd) {
  int fd = halo_test_ipc_open_session(path);
  uint8_t *payload = calloc(1, PING_BYTES);
  if (!payload) _exit(3);
  Halo__Wire__Ping ping = HALO__WIRE__PING__INIT;
  ping.has_payload = true;
  ping.payload.data = payload;
  ping.payload.len = PING_BYTES;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_PING;
  request.ping = &ping;
  int64_t deadline = halo_clock_now_ns() + attack_ms * 1000000;
  for (uint32_t i = 0; i < ATTACK_PINGS && halo_clock_now_ns() < deadline;
       ++i) {
    if (!halo_test_ipc_send_request(fd, 100 + i, &request)) _exit(4);
  }
  char byte;
  while (read(hold_fd, &byte, 1) > 0) {
  }
  free(payload);
  close(fd);
  _exit(0);
}

// HALO_TEST_TIME_SCALE (the TSan tree: 5): calls take that many times as
// long, so the bound on each call does too, and fewer probes fit.
static int64_t time_scale(void) {
  const char *scale = getenv("HALO_TEST_TIME_SCALE");
  int64_t value = scale ? strtoll(scale, NULL, 10) : 1;
  return value > 0 ? value : 1;
}

static int64_t elapsed_ms(int64_t start_ns) {
  return (halo_clock_now_ns() - start_ns) / 1000000;
}

// |attacker_count| attackers (one connection each) against |daemon| while
// a normal client probes; each of its calls must end within |bound_ms|.
static void attack(halo_test_daemon_t *daemon, int attacker_count,
                   int64_t bound_ms) {
  bound_ms *= time_scale();
  int hold[2];
  assert_int_equal(pipe(hold), 0);
  assert_true(attacker_count <= MAX_ATTACKERS);
  pid_t attackers[MAX_ATTACKERS];
  for (int i = 0; i < attacker_count; ++i) {
    attackers[i] = fork();
    assert_true(attackers[i] >= 0);
    if (attackers[i] == 0) {
      close(hold[1]);
      attacker_main(daemon->socket_path, ATTACK_MS + 1000, hold[0]);
    }
  }
  close(hold[0]);
  // Let the attackers fill every context first.
  usleep(500 * 1000);

  int64_t attack_start = halo_clock_now_ns();
  int64_t worst_ms = 0;
  uint32_t probes = 0;
  while (elapsed_ms(attack_start) < ATTACK_MS) {
    int64_t start = halo_clock_now_ns();
    halo_client_t *client = halo_test_connect(daemon, bound_ms);
    int64_t hello_ms = elapsed_ms(start);
    start = halo_clock_now_ns();
    HALO_TEST_ASSERT_OK(halo_client_ping(client));
    int64_t ping_ms = elapsed_ms(start);
    start = halo_clock_now_ns();
    halo_semaphore_t *semaphore = NULL;
    HALO_TEST_ASSERT_OK(halo_semaphore_create(client, 0, 0, &semaphore));
    HALO_TEST_ASSERT_OK(halo_semaphore_signal(semaphore, 1));
    halo_semaphore_release(semaphore);
    int64_t semaphore_ms = elapsed_ms(start);
    halo_client_close(client);
    int64_t probe_worst = hello_ms > ping_ms ? hello_ms : ping_ms;
    if (semaphore_ms > probe_worst) probe_worst = semaphore_ms;
    if (probe_worst > worst_ms) worst_ms = probe_worst;
    assert_true(probe_worst < bound_ms);
    ++probes;
    usleep(100 * 1000);
  }
  print_message("%u probes over %d ms of attack; slowest call %lld ms\n",
                probes, ATTACK_MS, (long long)worst_ms);
  assert_true(probes >= (time_scale() > 1 ? 1 : 3));

  // The attackers are still connected (their replies unread): halod serves.
  halo_client_t *client = halo_test_connect(daemon, bound_ms);
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_client_close(client);
  close(hold[1]);
  for (int i = 0; i < attacker_count; ++i) {
    int status = 0;
    assert_int_equal(waitpid(attackers[i], &status, 0), attackers[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  client = halo_test_connect(daemon, bound_ms);
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_client_close(client);
}

// Four connections with the defaults: replies wait at most
// reply-timeout-ms (2 s), so every call ends within CALL_BOUND_MS.
static void test_slow_readers_do_not_block_others(void **state) {
  (void)state;
  halo_test_daemon_t daemon = {0};
  halo_test_daemon_start(&daemon);
  attack(&daemon, 4, CALL_BOUND_MS);
  halo_test_daemon_stop(&daemon, SIGTERM);
  halo_test_daemon_cleanup(&daemon);
}

// Sixteen connections of one uid (64 requests in flight against 16
// contexts) with a reply-timeout-ms of 30 s (times the time scale): without
// uid-replies they would hold every context and each call of the normal
// client (same uid, but it reads its replies) would wait up to the
// timeout. With it the attackers hold 4 contexts at most, so each call ends
// within a small fraction of the timeout.
static void test_many_connections_of_one_uid(void **state) {
  (void)state;
  halo_test_daemon_t daemon = {0};
  char timeout[32];
  snprintf(timeout, sizeof(timeout), "%lld", (long long)(30000 * time_scale()));
  const char *const args[] = {"--reply-timeout-ms", timeout, NULL};
  halo_test_daemon_start_with_args(&daemon, args);
  attack(&daemon, MAX_ATTACKERS, CALL_BOUND_MS);
  halo_test_daemon_stop(&daemon, SIGTERM);
  halo_test_daemon_cleanup(&daemon);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slow_readers_do_not_block_others),
      cmocka_unit_test(test_many_connections_of_one_uid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
