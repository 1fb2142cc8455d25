// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Integration test of the order halod's loop serves requests in
// (daemon/request_lanes.h): one trust domain's queued requests, each
// costing the loop a tenth of a second or more, do not hold another
// domain's request behind all of them. A real halod; the other domain is a
// client process of another uid (semaphore_peer, exec'd after setuid);
// halod's loop thread is stopped alone (ptrace) while the requests arrive,
// so that they wait in a known order. Needs root (setuid, ptrace): skipped
// otherwise.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

// Sessions of the test's own domain, each with one heavy request queued.
#define HEAVY_SESSIONS 6
// Dispatches of 14 empty arguments in each: half a million structures to
// decode (about 0.1 s of the loop, more under a sanitizer), within every
// bound halod checks before decoding.
#define HEAVY_COMMANDS 32768
#define HEAVY_ARGS 14

// A CommandBufferCreate of HEAVY_COMMANDS dispatches of an executable the
// session does not have: halod decodes all of it and then refuses it.
static uint8_t *heavy_request(size_t *out_length) {
  Halo__Wire__DispatchArg arg = HALO__WIRE__DISPATCH_ARG__INIT;
  Halo__Wire__DispatchArg *args[HEAVY_ARGS];
  for (size_t i = 0; i < HEAVY_ARGS; ++i) args[i] = &arg;
  Halo__Wire__Command dispatch = HALO__WIRE__COMMAND__INIT;
  dispatch.type = HALO__WIRE__COMMAND_TYPE__COMMAND_DISPATCH;
  dispatch.has_executable = true;
  dispatch.executable = 0x7777;
  dispatch.entry = "main";
  dispatch.n_args = HEAVY_ARGS;
  dispatch.args = args;
  Halo__Wire__Command **commands = calloc(HEAVY_COMMANDS, sizeof(*commands));
  assert_non_null(commands);
  for (size_t i = 0; i < HEAVY_COMMANDS; ++i) commands[i] = &dispatch;
  Halo__Wire__CommandBufferCreate create =
      HALO__WIRE__COMMAND_BUFFER_CREATE__INIT;
  create.flags = HALO_COMMAND_BUFFER_ONE_SHOT;
  create.n_commands = HEAVY_COMMANDS;
  create.commands = commands;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_COMMAND_BUFFER_CREATE;
  request.command_buffer_create = &create;
  size_t length = protobuf_c_message_get_packed_size(&request.base);
  uint8_t *bytes = malloc(length);
  assert_non_null(bytes);
  protobuf_c_message_pack(&request.base, bytes);
  free(commands);
  *out_length = length;
  return bytes;
}

// Starts semaphore_peer's "ping" as uid and gid 65534 (another trust
// domain), its stdin on *|out_stdin|.
static void spawn_other_uid_pinger(const halo_test_daemon_t *daemon,
                                   halo_test_process_t *process,
                                   int *out_stdin) {
  int input[2], output[2];
  assert_int_equal(pipe(input), 0);
  assert_int_equal(pipe(output), 0);
  const char *peer = halo_test_peer_path();
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    dup2(input[0], STDIN_FILENO);
    dup2(output[1], STDOUT_FILENO);
    close(input[1]);
    close(output[0]);
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
      _exit(10);
    }
    execl(peer, peer, daemon->listen_address, "ping", (char *)NULL);
    _exit(127);
  }
  close(input[0]);
  close(output[1]);
  memset(process, 0, sizeof(*process));
  process->pid = child;
  process->stdout_fd = output[0];
  *out_stdin = input[1];
}

// |raw|'s reply: whether it came already (|flags| NNG_FLAG_NONBLOCK) or
// within the socket's receive timeout. It must refuse the executable the
// request names.
static bool answered(halo_test_raw_t *raw, int flags) {
  nng_msg *reply = NULL;
  int rv = nng_recvmsg(raw->socket, &reply, flags);
  if (rv != 0) {
    assert_int_equal(rv, NNG_EAGAIN);
    return false;
  }
  halo_wire_response_t *response = halo__wire__response__unpack(
      NULL, nng_msg_len(reply), nng_msg_body(reply));
  nng_msg_free(reply);
  HALO_TEST_EXPECT_ERROR(response, HALO_STATUS_INVALID_ARGUMENT,
                         "handle 0x7777");
  return true;
}

// Six sessions of one domain each queue a request the loop takes about a
// tenth of a second to serve; then a client of another uid pings. Served in
// the order they arrived, the ping waited for all six (before lanes: it was
// answered after every one of them). Now it waits for the request being
// served and at most one more of that domain.
static void test_other_domain_waits_for_one_heavy_request(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: not root (setuid to another uid, ptrace)\n");
    skip();
  }
  halo_test_daemon_t daemon;
  halo_test_daemon_start(&daemon);
  // The other uid reaches the client socket and its fd channel.
  assert_int_equal(chmod(daemon.socket_path, 0666), 0);
  assert_int_equal(chmod(daemon.fd_channel_path, 0666), 0);
  halo_test_process_t pinger;
  int pinger_stdin = -1;
  spawn_other_uid_pinger(&daemon, &pinger, &pinger_stdin);
  char line[128];
  halo_test_read_line(&pinger, line, sizeof(line), 20000);
  assert_string_equal(line, "ready");

  halo_test_raw_t heavy[HEAVY_SESSIONS];
  for (size_t i = 0; i < HEAVY_SESSIONS; ++i) {
    halo_test_raw_open(&heavy[i], daemon.listen_address, 30000);
    halo_test_raw_hello(&heavy[i]);
  }
  size_t length = 0;
  uint8_t *bytes = heavy_request(&length);
  if (!halo_test_pause_loop(daemon.pid)) {
    print_message("skipped: halod's loop cannot be paused alone (ptrace: %s)\n",
                  strerror(errno));
    free(bytes);
    for (size_t i = 0; i < HEAVY_SESSIONS; ++i) halo_test_raw_close(&heavy[i]);
    close(pinger_stdin);
    halo_test_process_cleanup(&pinger);
    halo_test_daemon_cleanup(&daemon);
    skip();
  }
  for (size_t i = 0; i < HEAVY_SESSIONS; ++i) {
    assert_int_equal(halo_test_raw_send_bytes(&heavy[i], bytes, length), 0);
  }
  free(bytes);
  // nng's threads read them into the stopped loop's queue; then the ping.
  halo_test_sleep_ms(300);
  assert_int_equal(write(pinger_stdin, "ping\n", 5), 5);
  halo_test_sleep_ms(100);
  halo_test_resume_loop(daemon.pid);

  halo_test_read_line(&pinger, line, sizeof(line), 30000);
  int served_before = 0;
  bool served[HEAVY_SESSIONS];
  for (size_t i = 0; i < HEAVY_SESSIONS; ++i) {
    served[i] = answered(&heavy[i], NNG_FLAG_NONBLOCK);
    if (served[i]) ++served_before;
  }
  print_message(
      "the other uid's ping (%s) came after %d of %d heavy "
      "requests\n",
      line, served_before, HEAVY_SESSIONS);
  assert_string_equal(line, "pinged 0");
  assert_true(served_before <= 2);

  // The rest are served too, each refused for the executable it names.
  for (size_t i = 0; i < HEAVY_SESSIONS; ++i) {
    if (!served[i]) assert_true(answered(&heavy[i], 0));
    halo_test_raw_close(&heavy[i]);
  }
  close(pinger_stdin);
  assert_int_equal(halo_test_process_wait(&pinger, 10000), 0);
  halo_test_process_cleanup(&pinger);
  halo_test_daemon_stop(&daemon, SIGTERM);
  halo_test_daemon_cleanup(&daemon);
}

int main(void) {
  halo_test_require_driver();  // HALO_TEST_DRIVER; exits 77 if unavailable
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_other_domain_waits_for_one_heavy_request),
  };
  return cmocka_run_group_tests_name("request_fairness", tests, NULL, NULL);
}
