// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The link's outbox (hal/remote/remote_link.h): one-way messages posted to
// a peer that reads nothing, over a real socketpair. A post returns at once
// while the socket is full; what it queued arrives in order, a descriptor
// with its message, once the peer reads, and a blocking send goes after
// everything posted before it; a posted message is counted as it is
// queued, and the receiver sees it counted ahead until it arrives; past
// the outbox's bound a post fails and the peer counts as hung (once), as
// it does when the outbox's writer waits the send limit for it (with a
// send limit, only while the peer takes nothing: a burst to a peer that
// reads is queued); the
// descriptors of queued messages are closed when the link fails and when
// it is deinitialized. And a USAGE message's checks
// (halo_remote_usage_decode): one that crossed the link as the worker sends
// it is taken, one of another size or with reserved bits set is refused.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "hal/remote/remote_link.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/status.h"
#include "tests/support/test_poll.h"

#define MS 1000000ll
// A message's payload; enough of them fill the socket many times over.
#define PAYLOAD_BYTES 4096u
#define MESSAGES 1024u
// How long a post may take (generous: sanitizer builds).
#define POST_BOUND_NS (200 * MS)

typedef struct test_t {
  halo_remote_link_t sender;
  halo_remote_link_t receiver;
  _Atomic uint64_t counter;  // the sender's count, as in the flight table
  // halo_remote_link_on_hung's calls and the last one's status code.
  _Atomic uint32_t hung_calls;
  _Atomic int hung_code;
  // A pipe whose write end travels in a message: its read end sees the
  // end once every copy of the write end is closed.
  int pipe_read;
  int pipe_write;
} test_t;

static void on_hung(void *user_data, halo_status_t status) {
  test_t *test = user_data;
  atomic_store(&test->hung_code, (int)halo_status_code(status));
  atomic_fetch_add(&test->hung_calls, 1);
}

static int setup(void **state) {
  test_t *test = calloc(1, sizeof(*test));
  assert_non_null(test);
  int pair[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  halo_remote_link_initialize(&test->sender, pair[0]);
  halo_remote_link_initialize(&test->receiver, pair[1]);
  halo_remote_link_on_hung(&test->sender, on_hung, test);
  int pipe_fds[2];
  assert_int_equal(pipe2(pipe_fds, O_CLOEXEC), 0);
  test->pipe_read = pipe_fds[0];
  test->pipe_write = pipe_fds[1];
  *state = test;
  return 0;
}

static int teardown(void **state) {
  test_t *test = *state;
  halo_remote_link_deinitialize(&test->sender);
  halo_remote_link_deinitialize(&test->receiver);
  close(test->pipe_read);
  if (test->pipe_write >= 0) close(test->pipe_write);
  free(test);
  return 0;
}

// Posts message |id| (its payload PAYLOAD_BYTES of the id's low byte), a
// RING_DOORBELL with |fd| attached where |fd| >= 0, else a DESTROY;
// asserts it returned within POST_BOUND_NS.
static halo_status_t post(test_t *test, uint64_t id, int fd) {
  static uint8_t payload[PAYLOAD_BYTES];
  memset(payload, (int)(id & 0xff), sizeof(payload));
  halo_remote_part_t part = {payload, sizeof(payload)};
  int64_t start = halo_clock_now_ns();
  // A descriptor travels with a type that carries one (the receiver hands
  // it to no other).
  uint32_t type = fd >= 0 ? HALO_REMOTE_RING_DOORBELL : HALO_REMOTE_DESTROY;
  halo_status_t status =
      halo_remote_link_post(&test->sender, type, id, &part, 1, fd);
  int64_t took = halo_clock_now_ns() - start;
  if (took > POST_BOUND_NS) {
    fail_msg("posting message %llu took %lld ms", (unsigned long long)id,
             (long long)(took / MS));
  }
  return status;
}

static uint32_t outbox_messages(test_t *test) {
  uint32_t messages = 0;
  size_t bytes = 0;
  halo_remote_link_outbox_size(&test->sender, &messages, &bytes);
  return messages;
}

// Receives one message and checks it is |id| with its payload; returns the
// descriptor it carried (-1: none).
static int expect_message(test_t *test, uint64_t id) {
  halo_remote_header_t header;
  void *payload = NULL;
  int fd = -1;
  halo_status_t status =
      halo_remote_link_receive(&test->receiver, &header, &payload, &fd);
  if (status) fail_msg("receive: %s", halo_status_message(status));
  assert_int_equal(header.id, id);
  assert_int_equal(header.length, PAYLOAD_BYTES);
  uint8_t expected[PAYLOAD_BYTES];
  memset(expected, (int)(id & 0xff), sizeof(expected));
  assert_memory_equal(payload, expected, sizeof(expected));
  free(payload);
  return fd;
}

// Whether |fd| is the pipe's write end (another descriptor of it).
static bool same_file(int fd, int other) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && fstat(other, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// Whether the pipe's read end sees its end (every write end closed)
// within |timeout_ms|.
static bool pipe_closed(test_t *test, int timeout_ms) {
  struct pollfd poll_fd = {.fd = test->pipe_read, .events = POLLIN};
  return poll(&poll_fd, 1, timeout_ms) == 1 && (poll_fd.revents & POLLHUP);
}

// Posts messages from |first| on until the outbox holds some (the socket
// is full) and then |more| more; returns the next id.
static uint64_t fill(test_t *test, uint64_t first, uint32_t more) {
  uint64_t id = first;
  while (outbox_messages(test) == 0) {
    assert_true(id < first + MESSAGES);
    assert_null(post(test, id++, -1));
  }
  for (uint32_t i = 0; i < more; ++i) assert_null(post(test, id++, -1));
  return id;
}

typedef struct send_args_t {
  test_t *test;
  uint64_t id;
  halo_status_t status;
} send_args_t;

static void *send_main(void *argument) {
  send_args_t *args = argument;
  static uint8_t payload[PAYLOAD_BYTES];
  memset(payload, (int)(args->id & 0xff), sizeof(payload));
  halo_remote_part_t part = {payload, sizeof(payload)};
  args->status = halo_remote_link_send(&args->test->sender, HALO_REMOTE_WRITE,
                                       args->id, &part, 1, -1);
  return NULL;
}

// Posts return at once while the peer reads nothing; once it reads, every
// message arrives in order, the descriptor with its own, and a blocking
// send made meanwhile after all of them. Each posted message is counted
// when posted, and the receiver sees the count ahead until it arrives.
static void test_posts_keep_their_order(void **state) {
  test_t *test = *state;
  // Counting starts with a sent message, as RING_FLIGHT starts it.
  halo_remote_part_t none = {NULL, 0};
  assert_null(halo_remote_link_send_counted(
      &test->sender, &test->counter, HALO_REMOTE_RING_FLIGHT, 0, &none, 0, -1));
  uint64_t next = fill(test, 1, 16);
  uint64_t with_fd = next++;
  assert_null(post(test, with_fd, test->pipe_write));
  uint64_t last_posted = fill(test, next, 16) - 1;
  assert_true(outbox_messages(test) >= 33);
  // Every message counted though many are not written yet.
  assert_int_equal(atomic_load(&test->counter), 1 + last_posted);
  // A call's send waits for the peer, behind everything posted.
  send_args_t args = {.test = test, .id = last_posted + 1};
  pthread_t sender;
  assert_int_equal(pthread_create(&sender, NULL, send_main, &args), 0);

  halo_remote_header_t header;
  void *payload = NULL;
  int fd = -1;
  assert_null(
      halo_remote_link_receive(&test->receiver, &header, &payload, &fd));
  assert_int_equal(header.type, HALO_REMOTE_RING_FLIGHT);
  halo_remote_link_count_receives(&test->receiver, &test->counter, 1);
  uint64_t counted = halo_remote_link_counted(&test->receiver);
  assert_true(counted >= 1 + last_posted);
  for (uint64_t id = 1; id <= last_posted; ++id) {
    assert_true(halo_remote_link_counted_ahead(&test->receiver, counted));
    int got = expect_message(test, id);
    if (id == with_fd) {
      assert_true(got >= 0);
      assert_true(same_file(got, test->pipe_write));
      close(got);
    } else {
      assert_int_equal(got, -1);
    }
  }
  assert_int_equal(expect_message(test, last_posted + 1), -1);
  assert_int_equal(pthread_join(sender, NULL), 0);
  assert_null(args.status);
  assert_false(halo_remote_link_counted_ahead(
      &test->receiver, halo_remote_link_counted(&test->receiver)));
  assert_int_equal(outbox_messages(test), 0);
  assert_int_equal(atomic_load(&test->hung_calls), 0);
  // And later posts go on.
  assert_null(post(test, 7, -1));
  assert_int_equal(expect_message(test, 7), -1);
}

// Past the outbox's bound a post fails, the peer counts as hung (once), the
// link is shut down and what the outbox held dropped, its descriptors
// closed; later posts fail.
static void test_outbox_bound(void **state) {
  test_t *test = *state;
  halo_remote_link_limit_outbox(&test->sender, 64 * PAYLOAD_BYTES, 4);
  uint64_t next = fill(test, 1, 0);
  assert_null(post(test, next++, test->pipe_write));
  close(test->pipe_write);
  test->pipe_write = -1;
  halo_status_t status = NULL;
  for (uint32_t i = 0; i < 128 && !status; ++i) status = post(test, next++, -1);
  assert_non_null(status);
  assert_int_equal(halo_status_code(status), HALO_STATUS_RESOURCE_EXHAUSTED);
  halo_status_free(status);
  assert_int_equal(atomic_load(&test->hung_calls), 1);
  assert_int_equal(atomic_load(&test->hung_code),
                   HALO_STATUS_RESOURCE_EXHAUSTED);
  status = post(test, next++, -1);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNAVAILABLE);
  halo_status_free(status);
  // The writer drops the outbox: the queued descriptor is closed.
  assert_true(pipe_closed(test, 5000));
  assert_true(HALO_TEST_POLL(outbox_messages(test) == 0, 5000));
  assert_int_equal(atomic_load(&test->hung_calls), 1);
  // The peer reads what was written, then the end.
  for (uint64_t id = 1;; ++id) {
    halo_remote_header_t header;
    void *payload = NULL;
    int fd = -1;
    status = halo_remote_link_receive(&test->receiver, &header, &payload, &fd);
    free(payload);
    if (fd >= 0) close(fd);
    if (status) break;
    assert_int_equal(header.id, id);
  }
  halo_status_free(status);
}

// The bound on descriptors: a fifth queued one fails the link.
static void test_outbox_descriptor_bound(void **state) {
  test_t *test = *state;
  halo_remote_link_limit_outbox(&test->sender, 16u << 20, 4);
  uint64_t next = fill(test, 1, 0);
  for (int i = 0; i < 4; ++i) {
    assert_null(post(test, next++, test->pipe_write));
  }
  halo_status_t status = post(test, next++, test->pipe_write);
  assert_int_equal(halo_status_code(status), HALO_STATUS_RESOURCE_EXHAUSTED);
  halo_status_free(status);
  assert_int_equal(atomic_load(&test->hung_calls), 1);
}

// A peer that reads, however slowly, is not hung for a burst past the
// outbox's bound (a session ending with thousands of handles posts as many
// releases at once): with a send limit, the bound holds only while the
// peer takes nothing.
typedef struct reader_args_t {
  test_t *test;
  uint64_t count;
  uint64_t received;  // in order, each its own id
} reader_args_t;

// Not cmocka's thread: counts what arrives in order, stops at the first
// that does not.
static void *slow_reader_main(void *argument) {
  reader_args_t *args = argument;
  for (uint64_t id = 1; id <= args->count; ++id) {
    halo_remote_header_t header;
    void *payload = NULL;
    int fd = -1;
    halo_status_t status =
        halo_remote_link_receive(&args->test->receiver, &header, &payload, &fd);
    free(payload);
    if (fd >= 0) close(fd);
    bool in_order = !status && header.id == id;
    halo_status_free(status);
    if (!in_order) break;
    args->received = id;
    usleep(100);
  }
  return NULL;
}

static void test_outbox_burst_to_a_reading_peer(void **state) {
  test_t *test = *state;
  assert_null(halo_remote_link_limit_sends(&test->sender, 2000 * MS));
  halo_remote_link_limit_outbox(&test->sender, 64 * PAYLOAD_BYTES, 4);
  // About 10 times the bound, posted at once (below the hard bound, 16
  // times).
  enum { BURST = 640 };
  reader_args_t args = {.test = test, .count = BURST};
  pthread_t reader;
  assert_int_equal(pthread_create(&reader, NULL, slow_reader_main, &args), 0);
  uint32_t most = 0;
  for (uint64_t id = 1; id <= BURST; ++id) {
    assert_null(post(test, id, -1));
    uint32_t queued = outbox_messages(test);
    if (queued > most) most = queued;
  }
  assert_int_equal(pthread_join(reader, NULL), 0);
  assert_int_equal(args.received, BURST);
  assert_true(most > 64);  // past the bound
  assert_int_equal(atomic_load(&test->hung_calls), 0);
}

// With a send limit, a peer that takes nothing of an outbox past its bound
// for that long is hung: the post that finds it fails.
static void test_outbox_bound_with_a_send_limit(void **state) {
  test_t *test = *state;
  assert_null(halo_remote_link_limit_sends(&test->sender, 300 * MS));
  halo_remote_link_limit_outbox(&test->sender, 64 * PAYLOAD_BYTES, 4);
  int64_t start = halo_clock_now_ns();
  uint64_t next = fill(test, 1, 0);
  halo_status_t status = NULL;
  while (!status && halo_clock_now_ns() - start < 10000 * MS) {
    status = post(test, next++, -1);
    if (outbox_messages(test) > 64) usleep(1000);
  }
  assert_non_null(status);
  assert_true(halo_clock_now_ns() - start >= 300 * MS);
  halo_status_free(status);
  assert_true(HALO_TEST_POLL(atomic_load(&test->hung_calls) == 1, 5000));
}

// The outbox's writer waits the send limit for a peer that reads nothing,
// then the peer counts as hung: the link is shut down, the outbox dropped
// (its descriptor closed).
static void test_writer_bound(void **state) {
  test_t *test = *state;
  assert_null(halo_remote_link_limit_sends(&test->sender, 200 * MS));
  int64_t start = halo_clock_now_ns();
  uint64_t next = fill(test, 1, 64);
  assert_null(post(test, next++, test->pipe_write));
  close(test->pipe_write);
  test->pipe_write = -1;
  assert_true(HALO_TEST_POLL(atomic_load(&test->hung_calls) == 1, 10000));
  assert_true(halo_clock_now_ns() - start >= 200 * MS);
  assert_int_equal(atomic_load(&test->hung_code),
                   HALO_STATUS_DEADLINE_EXCEEDED);
  assert_true(pipe_closed(test, 5000));
  assert_int_equal(outbox_messages(test), 0);
  halo_status_t status = post(test, next++, -1);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNAVAILABLE);
  halo_status_free(status);
}

// A receive on a socket with a receive timeout (halod's reader sets one)
// whose peer stopped halfway through a message ends DEADLINE_EXCEEDED
// after the timeout, not in recvmsg for ever, and is told from the
// peer's end (UNAVAILABLE).
static void test_receive_times_out_halfway(void **state) {
  test_t *test = *state;
  struct timeval timeout = {.tv_sec = 0, .tv_usec = 200000};
  assert_int_equal(setsockopt(test->receiver.fd, SOL_SOCKET, SO_RCVTIMEO,
                              &timeout, sizeof(timeout)),
                   0);
  halo_remote_header_t sent = {
      .type = HALO_REMOTE_ALIVE, .id = 0, .length = 4096};
  static const uint8_t part[100];
  assert_int_equal(write(test->sender.fd, &sent, sizeof(sent)),
                   (ssize_t)sizeof(sent));
  assert_int_equal(write(test->sender.fd, part, sizeof(part)),
                   (ssize_t)sizeof(part));
  halo_remote_header_t header;
  void *payload = NULL;
  int fd = -1;
  int64_t start = halo_clock_now_ns();
  halo_status_t status =
      halo_remote_link_receive(&test->receiver, &header, &payload, &fd);
  int64_t took = halo_clock_now_ns() - start;
  assert_int_equal(halo_status_code(status), HALO_STATUS_DEADLINE_EXCEEDED);
  halo_status_free(status);
  assert_true(took >= 150 * MS);
  assert_null(payload);
  assert_int_equal(fd, -1);
  // The peer's end is another status.
  shutdown(test->sender.fd, SHUT_WR);
  status = halo_remote_link_receive(&test->receiver, &header, &payload, &fd);
  assert_int_equal(halo_status_code(status), HALO_STATUS_UNAVAILABLE);
  halo_status_free(status);
}

// A link deinitialized with messages queued (its writer waiting, without
// a send limit, for a peer that reads nothing) ends at once and closes
// their descriptors.
static void test_deinitialize_drops_the_outbox(void **state) {
  test_t *test = *state;
  uint64_t next = fill(test, 1, 64);
  assert_null(post(test, next++, test->pipe_write));
  close(test->pipe_write);
  test->pipe_write = -1;
  assert_false(pipe_closed(test, 0));
  int64_t start = halo_clock_now_ns();
  halo_remote_link_deinitialize(&test->sender);
  assert_true(halo_clock_now_ns() - start < 2000 * MS);
  assert_true(pipe_closed(test, 0));
  assert_int_equal(atomic_load(&test->hung_calls), 0);
  // The teardown's deinitialize finds nothing left.
  halo_remote_link_initialize(&test->sender, -1);
}

// A USAGE as a worker sends it crosses the link and decodes to what was
// sent; payloads of other sizes (none, short, long) and one with reserved
// bits set are refused with INVALID_ARGUMENT, leaving nothing behind.
static void test_usage_decode(void **state) {
  test_t *test = *state;
  halo_hal_device_usage_t sent = {.graph_bytes = 6187776,
                                  .graph_bytes_limit = 8388608,
                                  .graph_instances = 2};
  halo_remote_part_t part = {&sent, sizeof(sent)};
  assert_null(
      halo_remote_link_send(&test->sender, HALO_REMOTE_USAGE, 0, &part, 1, -1));
  halo_remote_header_t header;
  void *payload = NULL;
  int fd = -1;
  assert_null(
      halo_remote_link_receive(&test->receiver, &header, &payload, &fd));
  assert_int_equal(header.type, HALO_REMOTE_USAGE);
  assert_int_equal(fd, -1);
  halo_hal_device_usage_t usage;
  assert_null(halo_remote_usage_decode(payload, header.length, &usage));
  assert_memory_equal(&usage, &sent, sizeof(usage));
  free(payload);

  uint8_t bytes[sizeof(sent) + 8];
  memset(bytes, 0x5a, sizeof(bytes));
  const struct {
    const void *payload;
    uint64_t length;
    const char *says;
  } kMalformed[] = {
      {NULL, 0, "a USAGE message of 0 bytes"},
      {bytes, sizeof(sent) - 1, "a USAGE message of 23 bytes (24 expected)"},
      {bytes, sizeof(sent) + 8, "a USAGE message of 32 bytes (24 expected)"},
      {bytes, sizeof(sent), "reserved bits set (0x5a5a5a5a)"},
  };
  _Static_assert(sizeof(halo_hal_device_usage_t) == 24,
                 "the messages above name its size");
  for (size_t i = 0; i < sizeof(kMalformed) / sizeof(kMalformed[0]); ++i) {
    halo_status_t status = halo_remote_usage_decode(
        kMalformed[i].payload, kMalformed[i].length, &usage);
    assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
    if (!strstr(halo_status_message(status), kMalformed[i].says)) {
      fail_msg("malformed USAGE %zu: %s", i, halo_status_message(status));
    }
    halo_status_free(status);
    halo_hal_device_usage_t zero = {0};
    assert_memory_equal(&usage, &zero, sizeof(usage));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_posts_keep_their_order, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_outbox_bound, setup, teardown),
      cmocka_unit_test_setup_teardown(test_outbox_descriptor_bound, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_writer_bound, setup, teardown),
      cmocka_unit_test_setup_teardown(test_outbox_burst_to_a_reading_peer,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_outbox_bound_with_a_send_limit,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_deinitialize_drops_the_outbox, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_usage_decode, setup, teardown),
      cmocka_unit_test_setup_teardown(test_receive_times_out_halfway, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
