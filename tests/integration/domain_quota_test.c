// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A trust domain's byte quotas (domain-device-bytes, domain-host-bytes):
// every session of one domain together holds at most that many bytes,
// whatever the number of its sessions, while another domain's sessions are
// counted apart. halod runs with --trust-domain process (so this process is
// one domain and the program re-executed with --other another) and
// quotas of 1 MiB a domain, the session quotas left at their 16 GiB.
// - Two sessions of this domain share the MiB: what one holds, the other
//   cannot create (RESOURCE_EXHAUSTED naming the setting and the domain),
//   down to the byte; importing the other's buffer counts it again.
// - A session that ends gives its bytes back to the domain.
// - The other domain creates its own MiB meanwhile.
// - uid-domains: a uid's sessions that would start one trust domain more
//   than it allows (here 2: one process per domain) are refused naming it;
//   once one ends, another starts.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/halo_test.h"

#define QUOTA (1u << 20)

// `domain_quota_test --other ADDRESS TYPE`: another domain creates a buffer
// of the whole quota of memory type TYPE; exits 0 if it could.
static int other_main(const char *address, const char *type) {
  halo_client_options_t options = {.address = address};
  halo_client_t *client = NULL;
  halo_status_t status = halo_client_connect(&options, &client);
  halo_buffer_t *buffer = NULL;
  if (!status) {
    status = halo_buffer_create(client, 0, (halo_memory_type_t)atoi(type),
                                QUOTA, 0, &buffer);
  }
  if (status) {
    fprintf(stderr, "the other domain: %s\n", halo_status_message(status));
    halo_status_free(status);
  }
  halo_buffer_release(buffer);
  halo_client_close(client);
  return status ? 1 : 0;
}

// `domain_quota_test --hold ADDRESS`: another domain connects, prints "ok"
// (or "refused MESSAGE" and exits 1) and holds its session until its stdin
// closes.
static int hold_main(const char *address) {
  halo_client_options_t options = {.address = address};
  halo_client_t *client = NULL;
  halo_status_t status = halo_client_connect(&options, &client);
  if (status) {
    printf("refused %s\n", halo_status_message(status));
    halo_status_free(status);
    return 1;
  }
  printf("ok\n");
  fflush(stdout);
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  halo_client_close(client);
  return 0;
}

typedef struct holder_t {
  pid_t pid;
  int input;        // its stdin's write end
  char line[1024];  // what it printed
} holder_t;

// Starts a holder (another process: another domain) and reads its line.
static void holder_start(const halo_test_daemon_t *daemon, holder_t *holder) {
  int in[2], out[2];
  assert_int_equal(pipe(in), 0);
  assert_int_equal(pipe(out), 0);
  holder->pid = fork();
  assert_true(holder->pid >= 0);
  if (holder->pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    close(in[1]);
    close(out[0]);
    execl("/proc/self/exe", "domain_quota_test", "--hold",
          daemon->listen_address, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  holder->input = in[1];
  size_t length = 0;
  char c;
  while (length + 1 < sizeof(holder->line) && read(out[0], &c, 1) == 1 &&
         c != '\n') {
    holder->line[length++] = c;
  }
  holder->line[length] = '\0';
  close(out[0]);
}

// Ends a holder's session and waits for it.
static void holder_stop(holder_t *holder) {
  close(holder->input);
  assert_int_equal(waitpid(holder->pid, NULL, 0), holder->pid);
}

// A halod started with |args|, as the test's state.
static int start_with(void **state, const char *const *args) {
  halo_test_daemon_t *daemon = calloc(1, sizeof(*daemon));
  assert_non_null(daemon);
  halo_test_daemon_start_with_args(daemon, args);
  *state = daemon;
  return 0;
}

static int setup(void **state) {
  static const char *const args[] = {"--trust-domain",
                                     "process",
                                     "--domain-device-bytes",
                                     "1M",
                                     "--domain-host-bytes",
                                     "1M",
                                     NULL};
  return start_with(state, args);
}
static int teardown(void **state) {
  halo_test_daemon_t *daemon = *state;
  halo_test_daemon_stop(daemon, SIGTERM);
  halo_test_daemon_cleanup(daemon);
  free(daemon);
  return 0;
}

// Whether another domain (this program re-executed) can create a buffer of
// the whole quota of |type|.
static bool other_domain_creates(const halo_test_daemon_t *daemon,
                                 halo_memory_type_t type) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char text[16];
    snprintf(text, sizeof(text), "%d", (int)type);
    execl("/proc/self/exe", "domain_quota_test", "--other",
          daemon->listen_address, text, (char *)NULL);
    _exit(127);
  }
  int wait_status = 0;
  assert_int_equal(waitpid(pid, &wait_status, 0), pid);
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

static void expect_domain_quota(const halo_test_daemon_t *daemon,
                                halo_memory_type_t type, const char *setting) {
  halo_client_t *first = halo_test_connect(daemon, 0);
  halo_client_t *second = halo_test_connect(daemon, 0);
  halo_buffer_t *held = halo_test_create_buffer(first, type, QUOTA / 4 * 3,
                                                HALO_OBJECT_FLAG_EXPORTABLE);
  // The second session's own quota is 16 GiB; the domain has a quarter
  // left.
  halo_buffer_t *buffer = NULL;
  HALO_TEST_EXPECT_STATUS(
      halo_buffer_create(second, 0, type, QUOTA / 2, 0, &buffer),
      HALO_STATUS_RESOURCE_EXHAUSTED, setting);
  assert_null(buffer);
  halo_status_t status =
      halo_buffer_create(second, 0, type, QUOTA / 2, 0, &buffer);
  assert_non_null(status);
  print_message("the second session: %s\n", halo_status_message(status));
  assert_non_null(strstr(halo_status_message(status), "trust domain pid:"));
  halo_status_free(status);
  // Down to the byte.
  halo_buffer_t *rest = halo_test_create_buffer(second, type, QUOTA / 4, 0);
  HALO_TEST_EXPECT_STATUS(halo_buffer_create(second, 0, type, 1, 0, &buffer),
                          HALO_STATUS_RESOURCE_EXHAUSTED, setting);
  halo_buffer_release(rest);
  // Importing the first's buffer counts it again, for the importer.
  halo_token_t token;
  HALO_TEST_ASSERT_OK(halo_buffer_export(held, &token));
  halo_buffer_t *imported = NULL;
  HALO_TEST_EXPECT_STATUS(halo_buffer_import(second, &token, &imported),
                          HALO_STATUS_RESOURCE_EXHAUSTED, setting);
  assert_null(imported);
  // Another domain has a quota of its own.
  assert_true(other_domain_creates(daemon, type));
  // Released, its bytes are the domain's again (a session that ends with
  // its buffers held: test_an_ended_session_gives_its_bytes_back).
  halo_buffer_release(held);
  halo_client_close(first);
  buffer = halo_test_create_buffer(second, type, QUOTA, 0);
  halo_buffer_release(buffer);
  halo_client_close(second);
}

static void test_device_bytes_are_bounded_per_domain(void **state) {
  expect_domain_quota(*state, HALO_MEMORY_DEVICE, "domain-device-bytes");
}

static void test_host_bytes_are_bounded_per_domain(void **state) {
  expect_domain_quota(*state, HALO_MEMORY_HOST_VISIBLE, "domain-host-bytes");
}

static int setup_two_domains(void **state) {
  static const char *const args[] = {"--trust-domain", "process",
                                     "--uid-domains", "2", NULL};
  return start_with(state, args);
}

// uid-domains 2: this process's domain and one other; a third process of
// the uid is refused naming the setting, and gets in once the other ended.
static void test_a_uid_starts_at_most_uid_domains(void **state) {
  halo_test_daemon_t *daemon = *state;
  halo_client_t *own = halo_test_connect(daemon, 0);
  holder_t second, third;
  holder_start(daemon, &second);
  assert_string_equal(second.line, "ok");
  holder_start(daemon, &third);
  print_message("the third domain: %s\n", third.line);
  assert_non_null(strstr(third.line, "refused "));
  assert_non_null(strstr(third.line, "uid-domains"));
  holder_stop(&third);
  // Its own domain's further sessions are no new domain.
  halo_client_t *again = halo_test_connect(daemon, 0);
  halo_client_close(again);
  holder_stop(&second);
  // The second's domain ended with its session.
  holder_t fourth;
  bool in = false;
  for (int i = 0; i < 100 && !in; ++i) {
    holder_start(daemon, &fourth);
    in = strcmp(fourth.line, "ok") == 0;
    if (!in) {
      holder_stop(&fourth);
      halo_test_sleep_ms(50);
    }
  }
  assert_true(in);
  holder_stop(&fourth);
  halo_client_close(own);
}

static int setup_one_domain_two_parts(void **state) {
  static const char *const args[] = {"--workers-per-domain", "2",
                                     "--uid-domains", "1", NULL};
  return start_with(state, args);
}

// uid-domains counts a domain once, whatever its parts: with one allowed
// and two parts (trust-domain uid), this process takes one part and
// another process of the uid the other, both in the uid's one domain.
static void test_parts_of_a_domain_are_one_domain(void **state) {
  halo_test_daemon_t *daemon = *state;
  halo_client_t *own = halo_test_connect(daemon, 0);
  holder_t other;
  holder_start(daemon, &other);
  print_message("another process of the uid: %s\n", other.line);
  assert_string_equal(other.line, "ok");
  holder_stop(&other);
  halo_client_close(own);
}

// Whether |client| can create a device buffer of the whole quota.
static bool creates_all(halo_client_t *client) {
  halo_buffer_t *buffer = NULL;
  halo_status_t status =
      halo_buffer_create(client, 0, HALO_MEMORY_DEVICE, QUOTA, 0, &buffer);
  halo_status_free(status);
  halo_buffer_release(buffer);
  return status == NULL;
}

// A session that ends with its buffers' handles open gives the domain their
// bytes back.
static void test_an_ended_session_gives_its_bytes_back(void **state) {
  halo_test_daemon_t *daemon = *state;
  halo_client_t *first = halo_test_connect(daemon, 0);
  halo_buffer_t *kept =
      halo_test_create_buffer(first, HALO_MEMORY_DEVICE, QUOTA, 0);
  (void)kept;  // released with its client
  halo_client_t *second = halo_test_connect(daemon, 0);
  assert_false(creates_all(second));
  halo_client_close(first);
  if (!HALO_TEST_POLL(creates_all(second), HALO_TEST_DEADLINE_MS)) {
    fail_msg("the ended session's %u bytes never came back to its domain",
             QUOTA);
  }
  halo_client_close(second);
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--other") == 0) {
    return other_main(argv[2], argv[3]);
  }
  if (argc == 3 && strcmp(argv[1], "--hold") == 0) return hold_main(argv[2]);
  halo_test_require_driver();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_device_bytes_are_bounded_per_domain,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_bytes_are_bounded_per_domain,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_an_ended_session_gives_its_bytes_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_uid_starts_at_most_uid_domains,
                                      setup_two_domains, teardown),
      cmocka_unit_test_setup_teardown(test_parts_of_a_domain_are_one_domain,
                                      setup_one_domain_two_parts, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
