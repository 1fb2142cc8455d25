// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Test support for halo's cmocka tests: a real halod on a private socket,
// raw protocol clients, fd channel helpers, child processes and /proc
// inspection.
//
// Functions that can fail use cmocka assertions (the current test fails and
// its teardown still runs), so they may only be called from a test, its
// setup or its teardown, on the thread cmocka runs it on. Never call them in
// a forked child: children use plain syscalls and _exit().
#ifndef HALO_TESTS_SUPPORT_HALO_TEST_H_
#define HALO_TESTS_SUPPORT_HALO_TEST_H_

// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdbool.h>
#include <sys/types.h>

#include "common/fd_channel.h"
#include "common/wire.h"
#include "halo/halo.h"
#include "tests/support/test_poll.h"

// How long a test waits for something that should happen "at once" (a
// daemon noticing a dead client, a child waking up) before failing.
#define HALO_TEST_DEADLINE_MS 5000

#define HALO_TEST_MS (1000000ll)  // nanoseconds in a millisecond

// CLOCK_MONOTONIC in nanoseconds.
int64_t halo_test_now_ns(void);

// Sleeps |ms| milliseconds (only between polls of a condition).
void halo_test_sleep_ms(int ms);

// Fails the test if |status| is not OK, printing its code and message.
#define HALO_TEST_ASSERT_OK(expr) \
  halo_test_assert_status((expr), HALO_STATUS_OK, #expr, __FILE__, __LINE__)
// Fails the test unless |expr| returns a status with |code|; frees it.
#define HALO_TEST_ASSERT_CODE(expr, code) \
  halo_test_assert_status((expr), (code), #expr, __FILE__, __LINE__)
void halo_test_assert_status(halo_status_t status, halo_status_code_t code,
                             const char *expression, const char *file,
                             int line);
// Fails the test unless |expr| returns a status with |code| and (unless
// |substring| is NULL) a message containing |substring|; frees it.
#define HALO_TEST_EXPECT_STATUS(expr, code, substring)                  \
  halo_test_expect_status((expr), (code), (substring), #expr, __FILE__, \
                          __LINE__)
// Fails unless |status| has |code| and its message contains every one of
// |substrings| (NULL-terminated); prints it as |what| either way, frees it.
void halo_test_expect_status_all(halo_status_t status, halo_status_code_t code,
                                 const char *const *substrings,
                                 const char *what);
void halo_test_expect_status(halo_status_t status, halo_status_code_t code,
                             const char *substring, const char *expression,
                             const char *file, int line);

// ---------------------------------------------------------------- daemon

typedef struct halo_test_daemon_t {
  pid_t pid;                  // 0 once stopped or killed
  char dir[64];               // private directory of the sockets
  char socket_path[128];      // DIR/halo.sock
  char listen_address[160];   // ipc://DIR/halo.sock
  char admin_address[160];    // ipc://DIR/admin.sock
  char fd_channel_path[160];  // DIR/halo.sock.fd
} halo_test_daemon_t;

// Starts `halod --driver DRIVER` (halo_test_driver()) on sockets in a fresh
// private directory and waits until its admin socket answers. The first
// start of a test program calls halo_test_require_driver() first.
void halo_test_daemon_start(halo_test_daemon_t *daemon);
// The same with more halod flags: |extra_args| NULL-terminated (at most 8),
// e.g. {"--session-pending", "4", NULL}.
void halo_test_daemon_start_with_args(halo_test_daemon_t *daemon,
                                      const char *const *extra_args);
// The same, halod's command line behind |wrapper| (NULL-terminated, at most
// 16; e.g. {"unshare", "--pid", "--fork", "--kill-child", NULL}): |pid| is
// the wrapper's. Stop such a daemon with halo_test_daemon_cleanup.
void halo_test_daemon_start_wrapped(halo_test_daemon_t *daemon,
                                    const char *const *wrapper,
                                    const char *const *extra_args);

// Sends |signal_number| and waits for the daemon to exit; asserts it exits
// with status 0 within HALO_TEST_DEADLINE_MS.
void halo_test_daemon_stop(halo_test_daemon_t *daemon, int signal_number);

// SIGKILLs the daemon (if still running) and reaps it.
void halo_test_daemon_kill(halo_test_daemon_t *daemon);

// Kills a daemon still running (without asserting) and removes the
// directory. Safe after stop/kill; used by teardowns.
void halo_test_daemon_cleanup(halo_test_daemon_t *daemon);

// Connects a libhalo client to |daemon| (request timeout |timeout_ms|, 0 for
// the default).
halo_client_t *halo_test_connect(const halo_test_daemon_t *daemon,
                                 int32_t timeout_ms);

// ---------------------------------------------------------------- drivers
//
// A test program runs against the driver named by the environment variable
// HALO_TEST_DRIVER: "local" (the default) or "cuda". tests/CMakeLists.txt
// registers the integration tests a second time as cuda.<name> with
// HALO_TEST_DRIVER=cuda, the ctest label cuda and SKIP_RETURN_CODE 77.

// The exit code of a test program that did not run (ctest reports it as
// skipped: SKIP_RETURN_CODE).
#define HALO_TEST_EXIT_SKIPPED 77

// HALO_TEST_DRIVER, or "local" when unset or empty.
const char *halo_test_driver(void);

// Whether halo_test_driver() is |name|.
bool halo_test_driver_is(const char *name);

// Call first in main(). Exits 2 for an unknown HALO_TEST_DRIVER. For a
// driver other than local, starts halod once with it (then stops it) and
// prints the driver, the halod and the kernel file the tests will use; if
// halod exits at start-up saying "driver DRIVER unavailable" (no GPU, no
// libcuda, built without cuda.h), prints its reason and exits
// HALO_TEST_EXIT_SKIPPED; if it fails otherwise, prints its output and
// exits 1. Does its work once per process (later calls return at once).
void halo_test_require_driver(void);

// The test kernels for halo_test_driver(): the environment variable
// HALO_TEST_KERNELS if set (format from its extension: .so, .ptx, .cubin,
// .fatbin, .cu), else tests/kernels' ELF shared object (local) or
// nvcc-built PTX (cuda; "" when the build found no nvcc).
const char *halo_test_kernels_path(void);

// Loads halo_test_kernels_path() on device 0 of |client| (asserts; the
// failure message names the driver, the file and the status).
halo_executable_t *halo_test_load_kernels(halo_client_t *client);

// Skips the current test (cmocka skip()) when the driver is not local,
// printing |reason|: for the cases of a test that only make sense on the
// local driver.
#define HALO_TEST_LOCAL_ONLY(reason) \
  halo_test_local_only((reason), __FILE__, __LINE__)
void halo_test_local_only(const char *reason, const char *file, int line);

// ---------------------------------------------------------------- admin

// One admin round trip; asserts it succeeds. Free the result with
// halo__wire__response__free_unpacked(r, NULL).
halo_wire_response_t *halo_test_admin_status(const halo_test_daemon_t *daemon);
halo_wire_response_t *halo_test_admin_sessions(
    const halo_test_daemon_t *daemon);
halo_wire_response_t *halo_test_admin_semaphores(
    const halo_test_daemon_t *daemon);

// The number of sessions (AdminStatusReply.sessions).
// The value of metric |name| (with its labels and a trailing space, e.g.
// "halo_semaphores " or "halo_device_buffers{device=\"0\"} ") in the
// metrics |text| (the line that starts with it); fails the test if it is
// not there.
uint64_t halo_test_metric_in(const char *text, const char *name);
// The same, in halod's metrics now (AdminMetrics).
uint64_t halo_test_admin_metric(const halo_test_daemon_t *daemon,
                                const char *name);
uint32_t halo_test_admin_session_count(const halo_test_daemon_t *daemon);

// Whether the daemon lists a session of process |pid|; if so and |out_info|
// is not NULL, copies the counters (strings are not copied).
bool halo_test_admin_find_session(const halo_test_daemon_t *daemon, pid_t pid,
                                  Halo__Wire__SessionInfo *out_info);

// The device faults the daemon charged to process |pid| (the fault
// budget): within the window (|out_process_faults|) and to its listed
// sessions (their sum, |out_session_faults|). False, and zeros, if no
// session of |pid| is listed. Either output may be NULL.
bool halo_test_admin_client_faults(const halo_test_daemon_t *daemon, pid_t pid,
                                   uint32_t *out_process_faults,
                                   uint32_t *out_session_faults);

// Forgives process |pid| its device faults (haloctl forgive-client);
// returns how many were forgotten, 0 if none were counted (NOT_FOUND).
uint32_t halo_test_admin_forgive_client(const halo_test_daemon_t *daemon,
                                        uint32_t pid);

// Prints every session the daemon lists (for failure messages).
void halo_test_admin_print_sessions(const halo_test_daemon_t *daemon);

// Polls until the daemon lists |count| sessions; on timeout prints them and
// returns false.
bool halo_test_admin_expect_session_count(const halo_test_daemon_t *daemon,
                                          uint32_t count, int timeout_ms);

// The queues of live sessions (AdminQueuesReply); free as above.
halo_wire_response_t *halo_test_admin_queues(const halo_test_daemon_t *daemon);

// Sums over every queue the daemon lists: submissions waiting on
// semaphores (|out_pending|) and released to the device (|out_in_flight|).
// Either may be NULL.
void halo_test_admin_queue_totals(const halo_test_daemon_t *daemon,
                                  uint32_t *out_pending,
                                  uint32_t *out_in_flight);

// The number of semaphores the daemon holds (AdminSemaphoresReply), those
// kept alive only by unfinished submissions included.
uint32_t halo_test_admin_semaphore_count(const halo_test_daemon_t *daemon);

// The device worker processes (AdminWorkersReply); free as above.
halo_wire_response_t *halo_test_admin_workers(const halo_test_daemon_t *daemon);

// The pid of the worker serving trust domain |domain| ("uid:1000",
// "pid:42"; "" names a spare) on any device, from `haloctl workers`'s admin
// request; 0 if none is running.
pid_t halo_test_admin_worker_pid(const halo_test_daemon_t *daemon,
                                 const char *domain);

// Waits (at most |timeout_ms|) until halod has a spare worker up, so that
// a new trust domain's session gets its worker at once (not after a
// context's creation, which a loaded GPU can stretch past a short request
// timeout). True at once with device-workers inline (no workers).
bool halo_test_admin_wait_spare(const halo_test_daemon_t *daemon,
                                int timeout_ms);

// ---------------------------------------------------------------- raw client

// A client speaking the wire protocol directly (no libhalo), to send what
// libhalo never would.
typedef struct halo_test_raw_t {
  nng_socket socket;
  bool open;
  uint64_t session_id;
  uint8_t session_token[16];
  char fd_channel_path[160];
} halo_test_raw_t;

// Dials |address| (no Hello). Receive timeout |timeout_ms| (0: 5000).
void halo_test_raw_open(halo_test_raw_t *raw, const char *address,
                        int timeout_ms);
void halo_test_raw_close(halo_test_raw_t *raw);

// Sends Hello and asserts the reply is OK; keeps the session id, token and
// fd channel path.
void halo_test_raw_hello(halo_test_raw_t *raw);

// Sends |request| and returns the decoded response whatever its code;
// asserts one arrives and decodes. Free it with
// halo__wire__response__free_unpacked().
halo_wire_response_t *halo_test_raw_call(halo_test_raw_t *raw,
                                         const halo_wire_request_t *request);
// The same with arbitrary bytes as the request.
halo_wire_response_t *halo_test_raw_call_bytes(halo_test_raw_t *raw,
                                               const void *bytes,
                                               size_t length);
// Sends bytes without waiting for a reply; returns the nng error (0: sent).
int halo_test_raw_send_bytes(halo_test_raw_t *raw, const void *bytes,
                             size_t length);

// Asserts |response| has |code| and a message containing |substring| (NULL:
// any non-empty message; case-insensitive), then frees it.
#define HALO_TEST_EXPECT_ERROR(response, code, substring) \
  halo_test_expect_error((response), (code), (substring), __FILE__, __LINE__)
void halo_test_expect_error(halo_wire_response_t *response,
                            halo_status_code_t code, const char *substring,
                            const char *file, int line);
// Like HALO_TEST_EXPECT_ERROR but any code of |codes| (|count| of them).
void halo_test_expect_error_in(halo_wire_response_t *response,
                               const halo_status_code_t *codes, size_t count,
                               const char *substring, const char *file,
                               int line);
// Asserts |response| is OK and returns it.
#define HALO_TEST_EXPECT_OK(response) \
  halo_test_expect_ok((response), __FILE__, __LINE__)
halo_wire_response_t *halo_test_expect_ok(halo_wire_response_t *response,
                                          const char *file, int line);

// Raw requests used by many tests; each asserts an OK reply and returns the
// values of interest.
uint64_t halo_test_raw_semaphore_create(halo_test_raw_t *raw,
                                        uint64_t initial_value, uint32_t flags,
                                        uint64_t *out_page_id,
                                        uint32_t *out_slot);
uint64_t halo_test_raw_buffer_create(halo_test_raw_t *raw, uint64_t size,
                                     Halo__Wire__MemoryType memory_type,
                                     uint32_t flags,
                                     Halo__Wire__HostPlacement *out_placement);
// Sends SemaphoreSignal(|handle|, |value|) and returns the response.
halo_wire_response_t *halo_test_raw_semaphore_signal(halo_test_raw_t *raw,
                                                     uint64_t handle,
                                                     uint64_t value);

// ---------------------------------------------------------------- recording

// halo_buffer_create on device 0 (asserts).
halo_buffer_t *halo_test_create_buffer(halo_client_t *client,
                                       halo_memory_type_t type, uint64_t size,
                                       uint32_t flags);

// halo_command_buffer_begin on device 0 (asserts).
halo_command_buffer_t *halo_test_begin(halo_client_t *client, uint32_t flags,
                                       uint32_t binding_capacity);
// Records c = a + b over |*n| floats with the test kernels' "add" entry, a,
// b and c in binding slots 0, 1, 2 (REUSABLE, ended; asserts).
halo_command_buffer_t *halo_test_record_vector_add(
    halo_client_t *client, halo_executable_t *executable, const uint32_t *n);

// ---------------------------------------------------------------- raw ipc

// The client socket at the level of nng's ipc framing (plain syscalls), to
// send frames nng itself would refuse to build. Connects to |path| and
// exchanges the req0/rep0 greeting (asserts).
int halo_test_ipc_connect(const char *path);
// Sends a frame header announcing |declared_length| bytes, then |length|
// bytes of |data|; false if the peer closed the connection.
bool halo_test_ipc_send_frame(int fd, uint64_t declared_length,
                              const void *data, size_t length);
// Sends |body| as request |request_id| and returns the decoded response
// (asserts one arrives).
halo_wire_response_t *halo_test_ipc_call(int fd, uint32_t request_id,
                                         const void *body, size_t length);
// Whether the daemon closes the connection within |timeout_ms|.
bool halo_test_ipc_wait_closed(int fd, int timeout_ms);
// Connects to |path| and opens a session with a Hello (asserts): a client
// that can go away with requests in flight by a plain close(), which nng
// 1.5.2's own sockets cannot do safely (nng_close may hang).
int halo_test_ipc_open_session(const char *path);
// Packs |request| and sends it as request |request_id| without waiting for
// the reply; false if the peer closed the connection.
bool halo_test_ipc_send_request(int fd, uint32_t request_id,
                                const Halo__Wire__Request *request);

// ---------------------------------------------------------------- fd channel

// Connects a SOCK_SEQPACKET socket to |path|; -1 with errno on failure.
int halo_test_fd_connect(const char *path);

// Sends one request and receives one reply (plain syscalls: safe in a forked
// child). Returns 0 with |*out_reply| filled and |*out_fd| the passed
// descriptor or -1; -1 if the daemon closed the connection (or on a socket
// error, errno set).
int halo_test_fd_transact(int socket_fd, uint32_t kind, uint64_t id,
                          const uint8_t token[16], halo_fd_reply_t *out_reply,
                          int *out_fd);

// Connects to |raw|'s fd channel and authenticates its session (asserts,
// and that the reply carries a pidfd of halod).
int halo_test_fd_open_session(const halo_test_raw_t *raw);

// The pid a pidfd refers to, as this process sees it (the "Pid:" line of
// /proc/self/fdinfo/FD): 0 for a process outside this pid namespace, -1
// for one that exited or a descriptor that is no pidfd.
int halo_test_pidfd_pid(int fd);

// GETs |kind| |id| on an authenticated channel; asserts an OK reply with a
// descriptor and returns it.
int halo_test_fd_get(int socket_fd, uint32_t kind, uint64_t id,
                     uint64_t *out_size);

// ---------------------------------------------------------------- processes

// The state ('R', 'S', 'Z', ...) and parent of process |pid| from
// /proc/PID/stat; false if it does not exist. Either output may be NULL.
bool halo_test_proc_stat(pid_t pid, char *out_state, pid_t *out_ppid);

// Whether |pid| is a live (not zombie) child of |parent|.
bool halo_test_is_live_child(pid_t pid, pid_t parent);

// The path of prlimit(1) (util-linux), or NULL where it is not installed.
const char *halo_test_prlimit(void);

typedef struct halo_test_process_t {
  pid_t pid;  // 0 once reaped
  int stdout_fd;
  char buffer[512];
  size_t length;
  int wait_status;
} halo_test_process_t;

// Starts |argv| (NULL-terminated) with stdout on a pipe; stderr is
// inherited. The child dies with the test process (PR_SET_PDEATHSIG).
void halo_test_spawn(halo_test_process_t *process, const char *const *argv);

// Reads one line of the child's stdout (without the newline) within
// |timeout_ms|; asserts it arrives.
void halo_test_read_line(halo_test_process_t *process, char *out_line,
                         size_t capacity, int timeout_ms);

// Whether the child exited (reaps it; its status lands in wait_status).
bool halo_test_process_exited(halo_test_process_t *process);

// Waits up to |timeout_ms| for the child to exit and asserts it exited
// normally; returns its exit code.
int halo_test_process_wait(halo_test_process_t *process, int timeout_ms);

// SIGKILLs and reaps a child still running; closes its pipe.
void halo_test_process_cleanup(halo_test_process_t *process);

// Common per-test fixture: one daemon, one libhalo client, and room for the
// child processes a test starts (the teardown kills those still running).
#define HALO_TEST_MAX_PEERS 16
typedef struct halo_test_fixture_t {
  halo_test_daemon_t daemon;
  halo_client_t *client;
  halo_test_process_t peers[HALO_TEST_MAX_PEERS];
} halo_test_fixture_t;
int halo_test_fixture_setup(void **state);
// The same with more halod flags (|args|, NULL-terminated, or NULL)
// and, unless |connect|, no client of the fixture's own.
int halo_test_fixture_setup_with(void **state, const char *const *args,
                                 bool connect);
// Kills leftover peers, closes the client and stops the daemon with SIGTERM,
// asserting exit 0 (under ASan that also means the daemon leaked nothing).
int halo_test_fixture_teardown(void **state);

// Starts tests/integration/semaphore_peer with |address| and |args|
// (NULL-terminated).
void halo_test_spawn_peer(halo_test_process_t *process, const char *address,
                          const char *const *args);
// The semaphore_peer executable's path (to exec it another way).
const char *halo_test_peer_path(void);

// Waits until thread |tid| of process |pid| sleeps in a futex call (or, if
// /proc does not say which call, is asleep); false after |timeout_ms|.
bool halo_test_wait_until_sleeping(pid_t pid, pid_t tid, int timeout_ms);

// Stops halod's loop thread (the main thread of |pid|, a child of the
// test) while its other threads go on (nng's, the metrics server's, the
// readers of its workers' links): ptrace's PTRACE_INTERRUPT stops that
// thread alone. halod is not dumpable, so this takes CAP_SYS_PTRACE (root);
// false (nothing stopped) where ptrace is not allowed.
// halo_test_resume_loop lets the loop go on.
bool halo_test_pause_loop(pid_t pid);
void halo_test_resume_loop(pid_t pid);

// ---------------------------------------------------------------- /proc

// The number of descriptors process |pid| holds open; -1 if /proc cannot be
// read.
int halo_test_count_fds(pid_t pid);

// The number of memfds process |pid| holds open (links "/memfd:..." in
// /proc/PID/fd); -1 if /proc cannot be read.
int halo_test_count_memfds(pid_t pid);

#endif  // HALO_TESTS_SUPPORT_HALO_TEST_H_
