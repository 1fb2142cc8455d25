// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/config.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/ring.h"
#include "common/status.h"
#include "daemon/fault_budget.h"
#include "daemon/metrics_http.h"

typedef enum halod_config_type_e {
  HALOD_CONFIG_STRING,
  HALOD_CONFIG_CHOICE,  // one of |choices|
  HALOD_CONFIG_PATH,    // absolute, or "" for none
  HALOD_CONFIG_U32,
  HALOD_CONFIG_U64,
  HALOD_CONFIG_BYTES,  // u64 with an optional K/M/G/T (binary) suffix
  HALOD_CONFIG_BYTES_POWER_OF_TWO,  // BYTES, and a power of two
  HALOD_CONFIG_OCTAL,
  HALOD_CONFIG_HTTP_ADDRESS,  // "HOST:PORT" (daemon/metrics_http.h), or ""
  HALOD_CONFIG_I32,  // int32_t, |min| to |max| read as int64_t (HALOD_I64)
} halod_config_type_t;

typedef struct halod_config_entry_t {
  const char *name;  // flag --name, and "name = value" in the file
  halod_config_type_t type;
  size_t offset;
  size_t size;  // strings: buffer size
  const char *default_value;
  uint64_t min;
  uint64_t max;
  const char *choices;  // CHOICE: "a|b|c"
  bool live;            // SIGHUP applies it; otherwise at the next start
  const char *help;
} halod_config_entry_t;

#define HALOD_FIELD(field) \
  offsetof(halod_config_t, field), sizeof(((halod_config_t *)0)->field)
#define HALOD_STRING(field) HALOD_CONFIG_STRING, HALOD_FIELD(field)
#define HALOD_PATH(field) HALOD_CONFIG_PATH, HALOD_FIELD(field)
#define HALOD_CHOICE(field) HALOD_CONFIG_CHOICE, HALOD_FIELD(field)
#define HALOD_HTTP_ADDRESS(field) HALOD_CONFIG_HTTP_ADDRESS, HALOD_FIELD(field)
#define HALOD_NUMBER(type, field) type, HALOD_FIELD(field)

// A signed bound of an I32 entry, kept in the table's uint64_t fields.
#define HALOD_I64(value) ((uint64_t)(int64_t)(value))

#define LIVE true
#define START false

// The table. Keep docs/operations.md, systemd/halod.conf and
// docs/man/halod.8 in step (config_test checks the example file).
static const halod_config_entry_t halod_config_entries[] = {
    {"listen", HALOD_STRING(listen), "ipc:///run/halo/halo.sock", 0, 0, NULL,
     START,
     "client socket (ipc:// only: clients share memory with the daemon); "
     "the fd channel is its path + \".fd\""},
    {"admin", HALOD_STRING(admin), "ipc:///run/halo-admin/admin.sock", 0, 0,
     NULL, START, "admin socket (haloctl); ipc:// only"},
    {"driver", HALOD_CHOICE(driver), "auto", 0, 0, "auto|local|cuda", START,
     "auto serves the best available driver"},
    {"log-level", HALOD_CHOICE(log_level), "info", 0, 0,
     "error|warn|info|debug", LIVE, "the least severe level logged"},
    {"config", HALOD_PATH(config_file), "", 0, 0, NULL, START,
     "config file of \"name = value\" lines (same names as the flags)"},
    {"socket-mode", HALOD_NUMBER(HALOD_CONFIG_OCTAL, socket_mode), "0660", 0,
     0777, NULL, START,
     "permissions of the client, fd channel and admin sockets"},
    {"socket-group", HALOD_STRING(socket_group), "", 0, 0, NULL, START,
     "group (name or number) of the client socket and fd channel: who may "
     "use the GPUs; default halod's own group"},
    {"admin-group", HALOD_STRING(admin_group), "", 0, 0, NULL, START,
     "group (name or number) of the admin socket: who may run haloctl; "
     "default halod's own group. halod must be a member"},
    {"max-message-bytes", HALOD_NUMBER(HALOD_CONFIG_BYTES, max_message_bytes),
     "4194304", 4096, 1u << 30, NULL, START,
     "NNG_OPT_RECVMAXSZ: larger messages drop the sender's connection"},
    {"contexts", HALOD_NUMBER(HALOD_CONFIG_U32, contexts), "16", 1, 1024, NULL,
     START, "nng rep contexts per socket (requests served concurrently)"},
    {"reply-timeout-ms", HALOD_NUMBER(HALOD_CONFIG_U32, reply_timeout_ms),
     "2000", 10, 600000, NULL, START,
     "milliseconds a reply may wait for its client to read it; then it is "
     "dropped and its context serves others (a client that never reads "
     "cannot hold contexts)"},
    {"session-requests", HALOD_NUMBER(HALOD_CONFIG_U32, session_requests), "4",
     1, 1023, NULL, START,
     "requests one connection may have in flight (received, not yet "
     "answered and taken); the next is answered RESOURCE_EXHAUSTED, or "
     "dropped if a reply already waits on that client. Must be less than "
     "contexts"},
    {"uid-replies", HALOD_NUMBER(HALOD_CONFIG_U32, uid_replies), "4", 1, 1023,
     NULL, START,
     "replies that the connections of one uid may have waiting on their "
     "clients at once (per uid under every trust-domain); a further reply of "
     "that uid that its client does not "
     "take within 50 ms is dropped, so clients that do not read cannot hold "
     "more "
     "contexts together than this. Must be less than contexts"},
    {"loads", HALOD_NUMBER(HALOD_CONFIG_U32, loads), "32", 1, 1024, NULL, START,
     "executable loads (compiles, JITs) that may wait at once, each on an nng "
     "context of its own beside the contexts ones, so that loads never hold "
     "the contexts other requests need (a request waiting for a device "
     "worker's control call has places of its own: calls); the next is "
     "refused for now (RESOURCE_EXHAUSTED naming this setting), and libhalo "
     "sends it again until its request timeout"},
    {"domain-loads", HALOD_NUMBER(HALOD_CONFIG_U32, domain_loads), "4", 1, 1024,
     NULL, LIVE,
     "of those, the loads one trust domain may have waiting at once (a load "
     "joining another's load of the same code counts); the next is refused "
     "for now as above, so one domain cannot take every load's place or "
     "every thread that loads"},
    {"calls", HALOD_NUMBER(HALOD_CONFIG_U32, calls), "64", 1, 1024, NULL, START,
     "requests that may wait at once for a device worker (its control call: "
     "an allocation, a buffer's write or read, a recording's preparation; or "
     "behind its session's call), each on an nng context of its own beside "
     "the contexts ones, so that a slow or stopped worker never holds the "
     "contexts other domains need (as many again may wait for their "
     "domain's worker to start); the next is refused for now "
     "(RESOURCE_EXHAUSTED naming this setting), and libhalo sends it again "
     "until its request timeout"},
    {"domain-calls", HALOD_NUMBER(HALOD_CONFIG_U32, domain_calls), "16", 1,
     1024, NULL, LIVE,
     "of those, the requests one trust domain may have waiting for its "
     "workers at once; the next is refused for now as above, so one "
     "domain's stopped worker cannot take every place"},
    {"arena-bytes", HALOD_NUMBER(HALOD_CONFIG_BYTES, arena_bytes), "67108864",
     1u << 16, 1ull << 40, NULL, LIVE,
     "size of a session's host-visible arena (larger buffers get their own); "
     "live: for arenas created after a reload"},
    {"session-host-bytes", HALOD_NUMBER(HALOD_CONFIG_BYTES, session_host_bytes),
     "17179869184", 0, UINT64_MAX, NULL, LIVE,
     "quota of host-visible bytes per session"},
    {"session-device-bytes",
     HALOD_NUMBER(HALOD_CONFIG_BYTES, session_device_bytes), "17179869184", 0,
     UINT64_MAX, NULL, LIVE, "quota of device bytes per session"},
    {"domain-host-bytes", HALOD_NUMBER(HALOD_CONFIG_BYTES, domain_host_bytes),
     "0", 0, UINT64_MAX, NULL, LIVE,
     "quota of host-visible bytes all sessions of one trust domain (a uid, a "
     "pod or a process, as trust-domain says) hold together, each counted "
     "as session-host-bytes counts it; past it creating or importing a "
     "buffer fails with RESOURCE_EXHAUSTED. 0: no bound"},
    {"domain-device-bytes",
     HALOD_NUMBER(HALOD_CONFIG_BYTES, domain_device_bytes), "0", 0, UINT64_MAX,
     NULL, LIVE,
     "the same for device bytes: a bound on the GPU memory one trust domain "
     "takes, so that one tenant's many sessions cannot take what others "
     "need. 0: no bound"},
    {"session-recording-bytes",
     HALOD_NUMBER(HALOD_CONFIG_BYTES, session_recording_bytes), "268435456", 0,
     UINT64_MAX, NULL, LIVE,
     "quota of bytes the recordings of a session's command buffers cost "
     "halod and the device worker (commands, arguments and inline bytes as "
     "kept, in both; a shared memoized recording is charged to each session "
     "holding it); past it creating one fails with RESOURCE_EXHAUSTED"},
    {"session-handles", HALOD_NUMBER(HALOD_CONFIG_U32, session_handles),
     "65536", 16, 1u << 20, NULL, LIVE,
     "quota of live handles per session; live: for sessions that connect "
     "after a reload"},
    {"session-fds", HALOD_NUMBER(HALOD_CONFIG_U32, session_fds), "1024", 1,
     1u << 20, NULL, LIVE,
     "quota of descriptors halod holds for a session: semaphore pages (an "
     "exportable semaphore has one of its own) and host arenas (an "
     "exportable or large buffer has one of its own), those of imported "
     "semaphores and buffers counted too (the importer keeps them alive); "
     "past it creating or importing one fails with RESOURCE_EXHAUSTED"},
    // The default follows halod's open-file limit (halod_config_parse);
    // this one stands where the limit is unlimited.
    {"uid-fds", HALOD_NUMBER(HALOD_CONFIG_U32, uid_fds), "16384", 1, 1u << 30,
     NULL, LIVE,
     "quota of descriptors halod holds for all sessions of one uid together "
     "(under trust-domain cgroup, of one uid in one cgroup), root included, "
     "each counted as session-fds counts it; past it creating "
     "or importing one fails with RESOURCE_EXHAUSTED, and a new connection "
     "of a uid holding that many is refused likewise, so that one uid cannot "
     "take the descriptors others need. Not set: a quarter of halod's "
     "open-file limit (RLIMIT_NOFILE's hard limit, to which halod raises its "
     "own; 16384 under the unit's LimitNOFILE=65536), the default below only "
     "where that limit is unlimited"},
    {"fd-reserve", HALOD_NUMBER(HALOD_CONFIG_U32, fd_reserve), "64", 8,
     1u << 30, NULL, LIVE,
     "descriptors under RLIMIT_NOFILE that semaphore pages and host arenas "
     "never take, kept for new connections and the admin socket"},
    {"connections", HALOD_NUMBER(HALOD_CONFIG_U32, connections), "8192", 1,
     1u << 20, NULL, LIVE,
     "client socket connections (sessions) in all; further ones are closed "
     "as they arrive, so connections of many users cannot use up halod's "
     "descriptors (a session holds up to 4: keep 4 times it below "
     "LimitNOFILE minus fd-reserve)"},
    {"hello-timeout-ms", HALOD_NUMBER(HALOD_CONFIG_U32, hello_timeout_ms),
     "10000", 100, 3600000, NULL, START,
     "milliseconds a client socket connection may stay open without "
     "completing Hello; then halod closes it"},
    {"uid-connections", HALOD_NUMBER(HALOD_CONFIG_U32, uid_connections), "1024",
     1, 1u << 20, NULL, LIVE,
     "client socket connections (sessions) of one uid (under trust-domain "
     "cgroup, of one uid in one cgroup: a pod), root included; more "
     "get a session whose every request fails with RESOURCE_EXHAUSTED naming "
     "this setting, and past 16 such, further connections are closed"},
    {"uid-domains", HALOD_NUMBER(HALOD_CONFIG_U32, uid_domains), "64", 1,
     1u << 20, NULL, LIVE,
     "trust domains of one uid at once, root included, with device workers "
     "(a domain counts once, whatever its parts): each has workers of its "
     "own, on a GPU a context each (about 560 MiB of its memory), and a uid "
     "starts one per process (trust-domain process) or per cgroup it "
     "creates (trust-domain cgroup, with a delegated cgroup tree). A "
     "session that would start one more is refused with "
     "RESOURCE_EXHAUSTED naming this setting. Under trust-domain cgroup also "
     "the cgroups of one uid whose connections count apart against the "
     "per-uid bounds; further ones share the uid's"},
    {"fd-channel-unauthenticated",
     HALOD_NUMBER(HALOD_CONFIG_U32, fd_channel_unauthenticated), "64", 1,
     1u << 20, NULL, LIVE,
     "fd channel connections of one uid (under trust-domain cgroup, of one "
     "uid in one cgroup) not yet authenticated; more are "
     "refused with RESOURCE_EXHAUSTED and closed"},
    {"fd-channel-connections",
     HALOD_NUMBER(HALOD_CONFIG_U32, fd_channel_connections), "1024", 1,
     1u << 20, NULL, LIVE,
     "fd channel connections of one uid (under trust-domain cgroup, of one "
     "uid in one cgroup; a session holds one); more are "
     "refused with RESOURCE_EXHAUSTED and closed"},
    {"fd-channel-auth-ms", HALOD_NUMBER(HALOD_CONFIG_U32, fd_channel_auth_ms),
     "5000", 10, 3600000, NULL, LIVE,
     "milliseconds an fd channel connection may stay unauthenticated before "
     "halod closes it"},
    {"native-code", HALOD_CHOICE(native_code), "owner", 0, 0, "owner|any|none",
     LIVE,
     "who may load native code (local-driver ELF executables): owner (the "
     "daemon's uid and root), any, or none; it runs as halod's user in the "
     "trust domain's device worker (in halod itself with device-workers "
     "inline)"},
    {"session-pending", HALOD_NUMBER(HALOD_CONFIG_U32, session_pending),
     "65536", 1, 1u << 24, NULL, LIVE,
     "quota of submissions per session not yet completed (their waits "
     "and signals: 8 per submission of it, at least 1024)"},
    {"ring-poll-us", HALOD_NUMBER(HALOD_CONFIG_U32, ring_poll_us), "50", 0,
     1000000, NULL, LIVE,
     "microseconds the loop keeps polling a session's submission ring after "
     "its last record before it asks for the doorbell (0: never poll)"},
    {"ring-bytes", HALOD_NUMBER(HALOD_CONFIG_BYTES_POWER_OF_TWO, ring_bytes),
     "65536", HALO_RING_MIN_CAPACITY, HALO_RING_MAX_CAPACITY, NULL, LIVE,
     "record bytes of a session's submission ring, a power of two (a full "
     "ring makes the client wait); live: for sessions that connect after a "
     "reload"},
    {"cuda-completion", HALOD_CHOICE(cuda_completion), "thread", 0, 0,
     "thread|host_func", START,
     "how the CUDA driver learns that GPU work finished: thread (a "
     "completion thread waits on events) or host_func (cuLaunchHostFunc)"},
    // The default is the CUDA driver's HALO_HAL_CUDA_DEFAULT_STREAMS.
    {"cuda-streams", HALOD_NUMBER(HALOD_CONFIG_U32, cuda_streams), "16", 1, 128,
     NULL, START,
     "CUDA streams per priority level that the queues of a device share "
     "(each costs GPU memory: about 0.5 MiB on an H100). The default "
     "priority's are created when the device is opened, another priority's "
     "when a queue of it first runs; a queue takes the one with the fewest "
     "queues, so queues share a stream only when there are more queues than "
     "this, and a queue on a shared stream can wait behind the other queues' "
     "work there"},
    // The default is the CUDA driver's
    // HALO_HAL_CUDA_DEFAULT_COMPILE_TIMEOUT_MS.
    {"cuda-compile-deadline-ms",
     HALOD_NUMBER(HALOD_CONFIG_U32, cuda_compile_deadline_ms), "240000", 1000,
     3600000, NULL, START,
     "milliseconds one CUDA C compile may run (NVRTC, in a process of its "
     "own, halo-nvrtc) before that process is killed and the load fails with "
     "DEADLINE_EXCEEDED; the worker and its other sessions go on. halod "
     "waits for a worker's executable load this long and 60 s more (at "
     "least 300 s) before it counts the worker as hung"},
    // The default is the CUDA driver's HALO_HAL_CUDA_DEFAULT_GRAPH_BYTES.
    {"cuda-graph-bytes", HALOD_NUMBER(HALOD_CONFIG_BYTES, cuda_graph_bytes),
     "4294967296", 1048576, UINT64_MAX, NULL, START,
     "device memory the CUDA graphs of one device worker's recordings may "
     "take on its GPU, by halo's estimate per graph instance (about 128 KiB, "
     "120 KiB a command that runs beside others between two barriers, 4 KiB "
     "one alone, 5 bytes a byte of kernel parameters). A trust domain's "
     "recordings share it: past it idle instances of other recordings are "
     "destroyed to make room, an execution waits for an instance of its own "
     "recording to come back (and its queue's later executions behind it), "
     "and one whose recording has none waits while other recordings' "
     "instances are in use, failing with RESOURCE_EXHAUSTED when nothing it "
     "could wait for is in use or a try 1 s after its first wait finds no "
     "room. The driver keeps what it took for destroyed instances and hands "
     "it to later ones"},
    {"nice", HALOD_NUMBER(HALOD_CONFIG_I32, nice), "-10", HALOD_I64(-20),
     HALOD_I64(19), NULL, START,
     "scheduling niceness (-20 to 19) of halod and its device workers, set "
     "at start: their threads issue every tenant's work and see it finish, "
     "so they should not wait for CPU behind clients that spin while they "
     "wait for the GPU. Lowering it takes CAP_SYS_NICE (or systemd's Nice=, "
     "Kubernetes' SYS_NICE capability); without, halod warns and runs at the "
     "niceness it was started with"},
    {"oom-score-adj", HALOD_NUMBER(HALOD_CONFIG_I32, oom_score_adj), "-900",
     HALOD_I64(-1000), HALOD_I64(1000), NULL, START,
     "halod's oom_score_adj (-1000 to 1000), set at start: under memory "
     "pressure the kernel kills the process of the highest score, and every "
     "tenant's sessions end with halod. Each device worker raises its own "
     "to 500 above halod's (at most 1000), so a domain's "
     "worker, whose tenants' buffers and work its memory mostly is, goes "
     "first. Lowering it takes CAP_SYS_RESOURCE (or systemd's "
     "OOMScoreAdjust=, which the unit sets, or Kubernetes' SYS_RESOURCE "
     "capability); without, halod warns and keeps the score it was started "
     "with"},
    {"cuda-connections", HALOD_NUMBER(HALOD_CONFIG_U32, cuda_connections), "0",
     0, 32, NULL, START,
     "hardware work queues each device context asks for "
     "(CUDA_DEVICE_MAX_CONNECTIONS, unless halod's environment sets it); "
     "queues on more streams than this share work queues and can wait "
     "behind each other. Under MPS a client gets few by default, which "
     "serializes a worker's tenants: set it there (the MPS server's pool "
     "bounds the sum over its clients). 0: the driver's default"},
    {"device-workers", HALOD_CHOICE(device_workers), "process", 0, 0,
     "process|inline", START,
     "where device work runs: process (one worker process per device and "
     "trust domain, so a fault ends only that domain's worker) or inline "
     "(in halod itself: a device fault ends halod)"},
    {"trust-domain", HALOD_CHOICE(trust_domain), "uid", 0, 0,
     "uid|process|cgroup", START,
     "what groups clients into trust domains, which share a device context "
     "and its faults: uid (one domain per user), process (one per client "
     "process) or cgroup (one per uid and cgroup v2: a container, or with "
     "trust-domain-cgroup-trim a pod)"},
    {"trust-domain-cgroup-trim",
     HALOD_NUMBER(HALOD_CONFIG_U32, trust_domain_cgroup_trim), "0", 0, 64, NULL,
     START,
     "with trust-domain cgroup: how many trailing components of the "
     "client's cgroup path to drop before keying its domain (1: the "
     "containers of a Kubernetes pod, each a cgroup below the pod's, share "
     "one domain)"},
    {"submission-deadline-ms",
     HALOD_NUMBER(HALOD_CONFIG_U32, submission_deadline_ms), "0", 0, 86400000,
     NULL, START,
     "milliseconds an execution may run on a device worker before it fails "
     "with DEADLINE_EXCEEDED and its worker is replaced (0: no deadline; "
     "device-workers process only)"},
    {"worker-hang-ms", HALOD_NUMBER(HALOD_CONFIG_U32, worker_hang_ms), "20000",
     2000, 3600000, NULL, START,
     "milliseconds a device worker may stay silent before it counts as hung, "
     "is killed and is replaced (its trust domain's sessions are lost, as for "
     "a crash): a running worker sends its liveness message every second, "
     "whatever it does, so one that sends nothing is stopped or frozen. A "
     "control call it does not answer within this or 30 s, whichever is "
     "longer (an executable's creation: cuda-compile-deadline-ms and 60 s "
     "more, at least 300 s), makes it hung too. Keep it "
     "below clients' request timeouts (libhalo's default: 30 s), so that a "
     "request waiting on a stopped worker fails with DEVICE_LOST naming it "
     "(device-workers process only)"},
    {"worker-spares", HALOD_NUMBER(HALOD_CONFIG_U32, worker_spares), "1", 0, 4,
     NULL, START,
     "device workers per device started ahead of need: a new trust domain "
     "(or one whose worker was lost) takes one at once instead of its first "
     "session waiting for a context to be created; each holds a context's "
     "memory (device-workers process only)"},
    {"workers-per-domain", HALOD_NUMBER(HALOD_CONFIG_U32, workers_per_domain),
     "1", 1, HALOD_WORKERS_PER_DOMAIN_MAX, NULL, START,
     "device workers per device and trust domain: a domain's client "
     "processes are spread over this many worker processes (each its own "
     "context, issuing in parallel; run over MPS so that they share the "
     "GPU), the sessions of one process on one worker; device memory is "
     "bound only on the worker that holds it (device-workers process "
     "only)"},
    {"worker-poll-us", HALOD_NUMBER(HALOD_CONFIG_U32, worker_poll_us), "50", 0,
     1000000, NULL, START,
     "microseconds each end of a device worker's link keeps polling for the "
     "next message before it sleeps (executions and completions that follow "
     "closely are taken at once; 0: never poll)"},
    {"worker-report-linger-us",
     HALOD_NUMBER(HALOD_CONFIG_U32, worker_report_linger_us), "20000", 0,
     1000000, NULL, START,
     "microseconds a device worker may hold back the report of a ring "
     "execution's completion that nothing in halod waits for, to send it "
     "with others (clients see the values at once either way; failures and "
     "values halod waits for go at once; 0: every completion at once)"},
    {"ring-consumer", HALOD_CHOICE(ring_consumer), "worker", 0, 0,
     "worker|halod", LIVE,
     "who drains a session's submission ring: worker (its trust domain's "
     "device worker takes the executions it can validate itself and hands "
     "the rest to halod, so the hot path skips halod) or halod (every "
     "record through halod, as before); live: for rings created after "
     "a reload; device-workers process only"},
    {"fault-budget", HALOD_NUMBER(HALOD_CONFIG_U32, fault_budget), "3", 0,
     HALOD_FAULT_BUDGET_MAX, NULL, LIVE,
     "device faults a client process may cause within "
     "fault-budget-window-s before its sessions are refused with "
     "RESOURCE_EXHAUSTED (a fault: its execution was in flight on a device "
     "worker that was lost, or ran past submission-deadline-ms); 0: no "
     "limit"},
    {"fault-budget-window-s",
     HALOD_NUMBER(HALOD_CONFIG_U32, fault_budget_window_s), "600", 1, 604800,
     NULL, LIVE,
     "seconds over which fault-budget counts a process's faults: it is "
     "refused until enough of them are older than this"},
    {"executable-cache-entries",
     HALOD_NUMBER(HALOD_CONFIG_U32, executable_cache_entries), "64", 0, 65536,
     NULL, LIVE,
     "executables kept loaded after their last holder released them (least "
     "recently used first out), so that the next client loading the same "
     "code in the same trust domain finds it; 0: none (haloctl cache)"},
    {"memo-cache-entries", HALOD_NUMBER(HALOD_CONFIG_U32, memo_cache_entries),
     "256", 0, 65536, NULL, LIVE,
     "prepared REUSABLE recordings kept after their last command buffer was "
     "released (least recently used first out); 0: none (haloctl cache)"},
    {"memo-cache-bytes", HALOD_NUMBER(HALOD_CONFIG_BYTES, memo_cache_bytes),
     "268435456", 0, UINT64_MAX, NULL, LIVE,
     "bytes the recordings kept after their last release (memo-cache-entries) "
     "may cost halod and the device workers in all, counted as "
     "session-recording-bytes counts them (least recently used first out; a "
     "recording larger than this is not kept); 0: none"},
    {"executable-cache-bytes",
     HALOD_NUMBER(HALOD_CONFIG_BYTES, executable_cache_bytes), "512M", 0,
     UINT64_MAX, NULL, LIVE,
     "bytes of the executables no session holds, each counted as the "
     "image its client sent: those kept after their last release "
     "(executable-cache-entries) and those only kept recordings hold "
     "(memo-cache-entries). Past it the least recently used executables go "
     "first, then the least recently used recordings holding one no session "
     "holds (which release theirs); one larger than this alone, or a "
     "recording whose executables no session else holds are, is not kept; "
     "0: none kept"},
    {"idle-domains", HALOD_NUMBER(HALOD_CONFIG_U32, idle_domains), "4", 0,
     1u << 20, NULL, LIVE,
     "trust domains without sessions kept, with their device workers (on a "
     "GPU a context each, about 560 MiB of its memory), for the entries the "
     "caches hold of them (trust-domain uid: the uid's next client finds its "
     "executables and recordings). Past it the domain whose last session "
     "ended longest ago loses its entries and ends (once work its sessions "
     "left is done); 0: a domain ends with its last session, or when the "
     "work that session left is done"},
    {"cache-directory", HALOD_PATH(cache_directory), "", 0, 0, NULL, START,
     "compiled GPU code (NVRTC, PTX JIT) kept across restarts and shared "
     "by clients; CUDA_CACHE_PATH points below it unless set. Not set: "
     "$CACHE_DIRECTORY (systemd's CacheDirectory=), else none; set empty: "
     "none"},
    {"metrics-address", HALOD_HTTP_ADDRESS(metrics_address), "", 0, 0, NULL,
     START,
     "serve the Prometheus metrics over HTTP at http://HOST:PORT/metrics "
     "(Prometheus text 0.0.4, or OpenMetrics 1.0 when the scraper asks for "
     "it): an IPv4 address, or an IPv6 address in brackets, and a port "
     "(0: any free one, logged); e.g. 127.0.0.1:9400. Off by default"},
    {"metrics-textfile", HALOD_PATH(metrics_textfile), "", 0, 0, NULL, LIVE,
     "write the Prometheus metrics (haloctl metrics) to this file every "
     "metrics-interval seconds, for node-exporter's textfile collector "
     "(a *.prom file in its directory); none by default"},
    {"metrics-interval", HALOD_NUMBER(HALOD_CONFIG_U32, metrics_interval), "15",
     1, 86400, NULL, LIVE, "seconds between metrics-textfile writes"},
};

#define HALOD_CONFIG_COUNT \
  (sizeof(halod_config_entries) / sizeof(halod_config_entries[0]))

_Static_assert(HALOD_CONFIG_COUNT <= HALOD_CONFIG_MAX_ENTRIES,
               "raise HALOD_CONFIG_MAX_ENTRIES");

// Names match with '_' and '-' alike (cuda_completion = cuda-completion).
static bool halod_config_name_equals(const char *entry, const char *name,
                                     size_t length) {
  if (strlen(entry) != length) return false;
  for (size_t i = 0; i < length; ++i) {
    char c = name[i] == '_' ? '-' : name[i];
    if (entry[i] != c) return false;
  }
  return true;
}

static const halod_config_entry_t *halod_config_find(const char *name,
                                                     size_t length) {
  for (size_t i = 0; i < HALOD_CONFIG_COUNT; ++i) {
    if (halod_config_name_equals(halod_config_entries[i].name, name, length)) {
      return &halod_config_entries[i];
    }
  }
  return NULL;
}

static size_t halod_config_index(const halod_config_entry_t *entry) {
  return (size_t)(entry - halod_config_entries);
}

// Where setting |name|'s value came from, as an error names it: "FILE:LINE:
// name", "--name", "name (from $CACHE_DIRECTORY)" for a value halod
// derived, or "name" for its default.
static void halod_config_where(const halod_config_t *config, const char *name,
                               char *out, size_t capacity) {
  const halod_config_entry_t *entry = halod_config_find(name, strlen(name));
  const char *source = entry ? config->sources[halod_config_index(entry)] : "";
  size_t file_length = strlen(config->config_file);
  if (!source[0]) {
    snprintf(out, capacity, "%s", name);
  } else if (strncmp(source, "--", 2) == 0) {
    snprintf(out, capacity, "%s", source);
  } else if (file_length &&
             strncmp(source, config->config_file, file_length) == 0 &&
             source[file_length] == ':') {
    snprintf(out, capacity, "%s: %s", source, name);
  } else {
    snprintf(out, capacity, "%s (from %s)", name, source);
  }
}

halo_status_t halod_config_annotate(const halod_config_t *config,
                                    const char *name, halo_status_t status) {
  if (!status) return NULL;
  char where[160];
  halod_config_where(config, name, where, sizeof(where));
  return halo_status_annotate(status, "%s", where);
}

// Whether |value| is one of the '|'-separated |choices|.
static bool halod_config_is_choice(const char *choices, const char *value) {
  size_t length = strlen(value);
  for (const char *c = choices; *c;) {
    size_t n = strcspn(c, "|");
    if (n == length && strncmp(c, value, n) == 0) return true;
    c += n;
    if (*c == '|') ++c;
  }
  return false;
}

// "one of a, b, c" for |choices| "a|b|c".
static void halod_config_choice_list(const char *choices, char *out,
                                     size_t capacity) {
  size_t used = 0;
  out[0] = '\0';
  for (const char *c = choices; *c && used + 1 < capacity; ++c) {
    used += (size_t)snprintf(out + used, capacity - used, "%s",
                             *c == '|' ? ", " : (char[]){*c, '\0'});
  }
}

static bool halod_config_is_bytes(halod_config_type_t type) {
  return type == HALOD_CONFIG_BYTES || type == HALOD_CONFIG_BYTES_POWER_OF_TWO;
}

// Parses a number, with a binary K/M/G/T suffix for BYTES.
static halo_status_t halod_config_number(const halod_config_entry_t *entry,
                                         const char *value,
                                         uint64_t *out_number) {
  bool bytes = halod_config_is_bytes(entry->type);
  errno = 0;
  char *end = NULL;
  int base = entry->type == HALOD_CONFIG_OCTAL ? 8 : 10;
  unsigned long long number = strtoull(value, &end, base);
  if (errno || end == value || value[0] == '-' || value[0] == '+' ||
      value[0] == ' ') {
    goto bad;
  }
  if (bytes && *end) {
    static const char kSuffixes[] = "KMGT";
    const char *suffix = strchr(kSuffixes, *end);
    if (!suffix || !*suffix) goto bad;
    unsigned shift = 10u * (unsigned)(suffix - kSuffixes + 1);
    ++end;
    if (*end == 'i' && end[1] == 'B') end += 2;
    if (number > (UINT64_MAX >> shift)) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT, "'%s' is too large",
                              value);
    }
    number <<= shift;
  }
  if (*end) goto bad;
  if (number < entry->min || number > entry->max) {
    if (base == 8) {  // as it was written
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "%#llo is out of range [%#" PRIo64 ", %#" PRIo64
                              "]",
                              number, entry->min, entry->max);
    }
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%llu is out of range [%" PRIu64 ", %" PRIu64 "]",
                            number, entry->min, entry->max);
  }
  if (entry->type == HALOD_CONFIG_BYTES_POWER_OF_TWO &&
      (number & (number - 1)) != 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "'%s' (%llu) is not a power of two", value, number);
  }
  *out_number = number;
  return NULL;
bad:
  return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                          "'%s' is not a%s number%s", value,
                          base == 8 ? "n octal" : "",
                          bytes ? " of bytes (suffixes K, M, G, T)" : "");
}

// Checks and stores |value|; the error names neither the setting nor where
// it came from (the caller adds both).
static halo_status_t halod_config_set(halod_config_t *config,
                                      const halod_config_entry_t *entry,
                                      const char *value) {
  char *field = (char *)config + entry->offset;
  switch (entry->type) {
    case HALOD_CONFIG_CHOICE:
      if (!halod_config_is_choice(entry->choices, value)) {
        char list[128];
        halod_config_choice_list(entry->choices, list, sizeof(list));
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "'%s' is not one of %s", value, list);
      }
      break;
    case HALOD_CONFIG_PATH:
      if (value[0] && value[0] != '/') {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "'%s' is not an absolute path", value);
      }
      break;
    case HALOD_CONFIG_STRING:
      break;
    case HALOD_CONFIG_I32: {
      errno = 0;
      char *end = NULL;
      long long number = strtoll(value, &end, 10);
      int64_t min = (int64_t)entry->min;
      int64_t max = (int64_t)entry->max;
      if (errno || end == value || *end || value[0] == ' ' || number < min ||
          number > max) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "'%s' is not an integer from %lld to %lld",
                                value, (long long)min, (long long)max);
      }
      *(int32_t *)field = (int32_t)number;
      return NULL;
    }
    case HALOD_CONFIG_HTTP_ADDRESS:
      if (value[0]) {
        struct sockaddr_storage address;
        socklen_t length = 0;
        HALO_RETURN_IF_ERROR(
            halod_metrics_http_parse_address(value, &address, &length));
      }
      break;
    default: {
      uint64_t number = 0;
      HALO_RETURN_IF_ERROR(halod_config_number(entry, value, &number));
      if (entry->type == HALOD_CONFIG_U32 ||
          entry->type == HALOD_CONFIG_OCTAL) {
        *(uint32_t *)field = (uint32_t)number;
      } else {
        *(uint64_t *)field = number;
      }
      return NULL;
    }
  }
  if (strlen(value) >= entry->size) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "value longer than %zu characters",
                            entry->size - 1);
  }
  strcpy(field, value);
  return NULL;
}

// The value of |entry| in |config| as text.
static void halod_config_format(const halod_config_t *config,
                                const halod_config_entry_t *entry, char *out,
                                size_t capacity) {
  const char *field = (const char *)config + entry->offset;
  switch (entry->type) {
    case HALOD_CONFIG_U32:
      snprintf(out, capacity, "%" PRIu32, *(const uint32_t *)field);
      break;
    case HALOD_CONFIG_OCTAL:
      snprintf(out, capacity, "0%" PRIo32, *(const uint32_t *)field);
      break;
    case HALOD_CONFIG_I32:
      snprintf(out, capacity, "%" PRId32, *(const int32_t *)field);
      break;
    case HALOD_CONFIG_U64:
    case HALOD_CONFIG_BYTES:
    case HALOD_CONFIG_BYTES_POWER_OF_TWO:
      snprintf(out, capacity, "%" PRIu64, *(const uint64_t *)field);
      break;
    default:
      snprintf(out, capacity, "%s", field);
  }
}

void halod_config_initialize(halod_config_t *config) {
  memset(config, 0, sizeof(*config));
  for (size_t i = 0; i < HALOD_CONFIG_COUNT; ++i) {
    halo_status_t status =
        halod_config_set(config, &halod_config_entries[i],
                         halod_config_entries[i].default_value);
    halo_status_free(status);  // defaults are valid by construction
  }
}

// ------------------------------------------------------------------ file

// inih's reader and handler state: the reader counts lines, so the handler
// knows which line it is called for.
typedef struct halod_config_file_t {
  halod_config_t *config;
  const char *path;
  FILE *file;
  int line;
  bool indented;  // the current line starts with blanks
  bool too_long;  // the current line did not fit
  uint32_t set_on_line[HALOD_CONFIG_MAX_ENTRIES];  // 0: not in the file
  halo_status_t status;                            // the first error
} halod_config_file_t;

static char *halod_config_file_read_line(char *line, int capacity,
                                         void *stream) {
  halod_config_file_t *file = stream;
  char text[2048];
  if (!fgets(text, sizeof(text), file->file)) return NULL;
  ++file->line;
  size_t length = strlen(text);
  bool complete = length > 0 && text[length - 1] == '\n';
  if (!complete && !feof(file->file)) {
    // Skip the rest of the line; it is reported below.
    int c;
    while ((c = fgetc(file->file)) != EOF && c != '\n') {
    }
  }
  file->indented = text[0] == ' ' || text[0] == '\t';
  file->too_long =
      (!complete && !feof(file->file)) || length >= (size_t)capacity;
  if (file->too_long) {
    if (!file->status) {
      file->status = halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                      "%s:%d: line longer than %d characters",
                                      file->path, file->line, capacity - 2);
    }
    snprintf(line, (size_t)capacity, "\n");
    return line;
  }
  memcpy(line, text, length + 1);
  return line;
}

static int halod_config_file_on_value(void *user, const char *section,
                                      const char *name, const char *value) {
  halod_config_file_t *file = user;
  if (file->status) return 1;  // only the first error is reported
  halo_status_t status = NULL;
  const halod_config_entry_t *entry = halod_config_find(name, strlen(name));
  if (file->indented) {
    status = halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "%s: an indented line continues the value "
                              "of the line before; write one setting a line, "
                              "unindented",
                              name);
  } else if (section[0]) {
    status = halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "%s: settings take no [section] (found [%s])",
                              name, section);
  } else if (!entry || strcmp(entry->name, "config") == 0) {
    status = halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "unknown setting '%s' (halod --help lists them)",
                              name);
  } else if (file->set_on_line[halod_config_index(entry)]) {
    status = halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "%s: set twice (first on line %u)", entry->name,
                              file->set_on_line[halod_config_index(entry)]);
  } else {
    status = halo_status_annotate(halod_config_set(file->config, entry, value),
                                  "%s", entry->name);
    file->set_on_line[halod_config_index(entry)] = (uint32_t)file->line;
    snprintf(file->config->sources[halod_config_index(entry)],
             sizeof(file->config->sources[0]), "%s:%d", file->path, file->line);
  }
  if (status) {
    file->status =
        halo_status_annotate(status, "%s:%d", file->path, file->line);
    return 0;
  }
  return 1;
}

static halo_status_t halod_config_read_file(halod_config_t *config,
                                            const char *path) {
  halod_config_file_t file = {.config = config, .path = path};
  // Non-blocking: a FIFO (or a device) in the file's place must not hold
  // halod's loop in open() at a reload (SIGHUP), nor its start; only a
  // regular file is read.
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return halo_status_from_errno(errno, "config file %s", path);
  struct stat info;
  if (fstat(fd, &info) != 0) {
    int error = errno;
    close(fd);
    return halo_status_from_errno(error, "config file %s", path);
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    if (S_ISDIR(info.st_mode)) {
      return halo_status_from_errno(EISDIR, "config file %s", path);
    }
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "config file %s: not a regular file (a FIFO, "
                            "socket or device)",
                            path);
  }
  // O_NONBLOCK stays: it changes nothing in reads of a regular file.
  file.file = fdopen(fd, "r");
  if (!file.file) {
    int error = errno;
    close(fd);
    return halo_status_from_errno(error, "config file %s", path);
  }
  int rv = ini_parse_stream(halod_config_file_read_line, &file,
                            halod_config_file_on_value, &file);
  // A read that failed (EIO, halfway) ended the parse as an end of file
  // would: an error, before what the lines read said, and nothing of the
  // file is applied.
  int read_error = ferror(file.file) ? (errno ? errno : EIO) : 0;
  fclose(file.file);
  if (read_error) {
    halo_status_free(file.status);
    return halo_status_from_errno(read_error, "config file %s: reading line %d",
                                  path, file.line + 1);
  }
  if (file.status) return file.status;
  if (rv > 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%s:%d: expected \"name = value\"", path, rv);
  }
  if (rv < 0) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "%s: inih could not parse it (error %d)", path, rv);
  }
  return NULL;
}

// ------------------------------------------------------------------ flags

// |bytes| as --help writes a bound: with the largest K/M/G/T suffix that
// divides it ("64K", "1T", "4194305").
static void halod_config_bytes_text(uint64_t bytes, char *out,
                                    size_t capacity) {
  static const char kSuffixes[] = "KMGT";
  int suffix = -1;
  while (suffix < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++suffix;
  }
  // A suffix as a string of its own: gcc 12.2 at -O0 crashed (an internal
  // error in its printf warnings) on "%.*s" with a conditional pointer.
  char suffix_text[2] = {suffix >= 0 ? kSuffixes[suffix] : '\0', '\0'};
  snprintf(out, capacity, "%" PRIu64 "%s", bytes, suffix_text);
}

// The type and bounds of |entry|, as --help writes them ("integer, 1 to
// 1024", "one of auto, local, cuda", "bytes, a power of two, 32K to 16M").
static void halod_config_type_text(const halod_config_entry_t *entry, char *out,
                                   size_t capacity) {
  char low[32], high[32];
  switch (entry->type) {
    case HALOD_CONFIG_STRING:
      snprintf(out, capacity, "text");
      break;
    case HALOD_CONFIG_CHOICE: {
      char choices[128];
      halod_config_choice_list(entry->choices, choices, sizeof(choices));
      snprintf(out, capacity, "one of %s", choices);
      break;
    }
    case HALOD_CONFIG_PATH:
      snprintf(out, capacity, "an absolute path, or empty for none");
      break;
    case HALOD_CONFIG_HTTP_ADDRESS:
      snprintf(out, capacity, "HOST:PORT, or empty for none");
      break;
    case HALOD_CONFIG_I32:
      snprintf(out, capacity, "integer, %lld to %lld", (long long)entry->min,
               (long long)entry->max);
      break;
    case HALOD_CONFIG_OCTAL:
      snprintf(out, capacity, "octal, %#" PRIo64 " to %#" PRIo64, entry->min,
               entry->max);
      break;
    case HALOD_CONFIG_U32:
    case HALOD_CONFIG_U64:
      snprintf(out, capacity, "integer, %" PRIu64 " to %" PRIu64, entry->min,
               entry->max);
      break;
    case HALOD_CONFIG_BYTES:
    case HALOD_CONFIG_BYTES_POWER_OF_TWO: {
      const char *kind = entry->type == HALOD_CONFIG_BYTES_POWER_OF_TWO
                             ? "bytes, a power of two"
                             : "bytes";
      halod_config_bytes_text(entry->min, low, sizeof(low));
      halod_config_bytes_text(entry->max, high, sizeof(high));
      if (entry->max == UINT64_MAX && entry->min == 0) {
        snprintf(out, capacity, "%s", kind);
      } else if (entry->max == UINT64_MAX) {
        snprintf(out, capacity, "%s, at least %s", kind, low);
      } else {
        snprintf(out, capacity, "%s, %s to %s", kind, low, high);
      }
      break;
    }
  }
}

void halod_config_print_help(FILE *stream) {
  fprintf(stream,
          "usage: halod [--flag VALUE | --flag=VALUE]...\n"
          "halo's GPU device server; runs in the foreground.\n"
          "Each setting: its help, then (type and bounds; default; whether "
          "SIGHUP applies it).\n"
          "Sizes in bytes take a K, M, G or T suffix (powers of 1024).\n\n");
  for (size_t i = 0; i < HALOD_CONFIG_COUNT; ++i) {
    const halod_config_entry_t *entry = &halod_config_entries[i];
    char type[160];
    halod_config_type_text(entry, type, sizeof(type));
    fprintf(stream, "  --%-22s %s\n  %-24s (%s; default: %s%s)\n", entry->name,
            entry->help, "", type,
            entry->default_value[0] ? entry->default_value : "none",
            entry->live ? "; SIGHUP applies it" : "");
  }
  fprintf(stream, "  --%-22s %s\n  --%-22s %s\n  --%-22s %s\n", "print-config",
          "print the effective configuration and exit", "help", "this text",
          "version", "print the version (also -V)");
}

void halod_config_print(const halod_config_t *config, FILE *stream) {
  fprintf(stream,
          "# halod %s: effective configuration. Settings marked live are "
          "applied by\n# SIGHUP (systemctl reload halod); the others at the "
          "next start.\n",
          HALO_VERSION_STRING);
  for (size_t i = 0; i < HALOD_CONFIG_COUNT; ++i) {
    const halod_config_entry_t *entry = &halod_config_entries[i];
    char value[600];
    halod_config_format(config, entry, value, sizeof(value));
    const char *source = config->sources[i];
    fprintf(stream, "%s%s = %s\n",
            strcmp(entry->name, "config") == 0 ? "# " : "", entry->name, value);
    if (source[0] || entry->live) {
      fprintf(stream, "#   %s%s%s\n", source[0] ? "from " : "", source,
              entry->live ? (source[0] ? "; live" : "live") : "");
    }
  }
}

// One pass over the flags: --config only (|config_pass|) or the others.
static halo_status_t halod_config_parse_flags(halod_config_t *config, int argc,
                                              char **argv, bool config_pass,
                                              int *out_exit) {
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      if (config_pass) halod_config_print_help(stdout);
      *out_exit = 1;
      return NULL;
    }
    if (strcmp(arg, "--version") == 0 || strcmp(arg, "-V") == 0) {
      if (config_pass) printf("halod %s\n", HALO_VERSION_STRING);
      *out_exit = 1;
      return NULL;
    }
    if (strcmp(arg, "--print-config") == 0) continue;
    if (strncmp(arg, "--", 2) != 0) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "unexpected argument '%s' (flags start with "
                              "--; see --help)",
                              arg);
    }
    const char *name = arg + 2;
    const char *equals = strchr(name, '=');
    size_t length = equals ? (size_t)(equals - name) : strlen(name);
    const halod_config_entry_t *entry = halod_config_find(name, length);
    if (!entry) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "unknown flag '%s' (see --help)", arg);
    }
    const char *value = equals ? equals + 1 : NULL;
    if (!value) {
      if (i + 1 >= argc) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "flag --%s needs a value", entry->name);
      }
      value = argv[++i];
    }
    bool is_config = strcmp(entry->name, "config") == 0;
    if (is_config != config_pass) continue;
    HALO_RETURN_IF_ERROR(halo_status_annotate(
        halod_config_set(config, entry, value), "--%s", entry->name));
    snprintf(config->sources[halod_config_index(entry)],
             sizeof(config->sources[0]), "--%s", entry->name);
  }
  return NULL;
}

// |*value| (setting |name|) must be less than contexts, or |who| could hold
// every context. The default follows a small contexts; a value given
// explicitly must fit.
static halo_status_t halod_config_fit_contexts(halod_config_t *config,
                                               const char *name,
                                               uint32_t *value,
                                               const char *who) {
  uint32_t most = config->contexts > 1 ? config->contexts - 1 : 1;
  if (*value <= most) return NULL;
  const halod_config_entry_t *entry = halod_config_find(name, strlen(name));
  if (config->sources[halod_config_index(entry)][0]) {
    const halod_config_entry_t *contexts =
        halod_config_find("contexts", strlen("contexts"));
    const char *source = config->sources[halod_config_index(contexts)];
    return halod_config_annotate(
        config, name,
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                         "%u must be less than contexts (%u, %s%s), or %s "
                         "could hold every context",
                         *value, config->contexts,
                         source[0] ? "from " : "its default", source, who));
  }
  *value = most;
  return NULL;
}

// Where setting |name| was not set and halod's open-file limit is finite:
// its entry, its source (to fill) and that limit (the hard one, to which
// halod raises its own). NULL otherwise.
static const halod_config_entry_t *halod_config_follows_nofile(
    halod_config_t *config, const char *name, char **out_source,
    uint64_t *out_limit) {
  const halod_config_entry_t *entry = halod_config_find(name, strlen(name));
  *out_source = config->sources[halod_config_index(entry)];
  struct rlimit limit;
  if ((*out_source)[0] || getrlimit(RLIMIT_NOFILE, &limit) != 0 ||
      limit.rlim_max == RLIM_INFINITY) {
    return NULL;
  }
  *out_limit = (uint64_t)limit.rlim_max;
  return entry;
}

// uid-fds not set: a quarter of the open-file limit, so that one uid leaves
// the rest to others.
static void halod_config_derive_uid_fds(halod_config_t *config) {
  char *source;
  uint64_t limit;
  const halod_config_entry_t *entry =
      halod_config_follows_nofile(config, "uid-fds", &source, &limit);
  if (!entry) return;
  uint64_t quarter = limit / 4;
  config->uid_fds = (uint32_t)(quarter < 1            ? 1
                               : quarter > entry->max ? entry->max
                                                      : quarter);
  snprintf(source, sizeof(config->sources[0]),
           "a quarter of RLIMIT_NOFILE (%llu)", (unsigned long long)limit);
}

// connections not set: no more than a quarter of what the open-file limit
// leaves above fd-reserve (a session holds up to 4 descriptors), so that
// connections alone never take the descriptors kept for the admin socket.
static void halod_config_derive_connections(halod_config_t *config) {
  char *source;
  uint64_t limit;
  if (!halod_config_follows_nofile(config, "connections", &source, &limit)) {
    return;
  }
  uint64_t room =
      limit > config->fd_reserve ? (limit - config->fd_reserve) / 4 : 1;
  if (room >= config->connections) return;
  config->connections = (uint32_t)(room < 1 ? 1 : room);
  snprintf(source, sizeof(config->sources[0]),
           "a quarter of RLIMIT_NOFILE (%llu) less fd-reserve",
           (unsigned long long)limit);
}

halo_status_t halod_config_parse(halod_config_t *config, int argc, char **argv,
                                 int *out_exit) {
  *out_exit = 0;
  config->argc = argc;
  config->argv = argv;
  HALO_RETURN_IF_ERROR(
      halod_config_parse_flags(config, argc, argv, true, out_exit));
  if (*out_exit) return NULL;
  if (config->config_file[0]) {
    HALO_RETURN_IF_ERROR(halod_config_read_file(config, config->config_file));
  }
  HALO_RETURN_IF_ERROR(
      halod_config_parse_flags(config, argc, argv, false, out_exit));
  halod_config_derive_uid_fds(config);
  halod_config_derive_connections(config);
  // Under systemd, CacheDirectory= exports $CACHE_DIRECTORY: the default,
  // where cache-directory is not given (given empty, the cache is off).
  const char *systemd_cache = getenv("CACHE_DIRECTORY");
  const halod_config_entry_t *cache =
      halod_config_find("cache-directory", strlen("cache-directory"));
  char *cache_source = config->sources[halod_config_index(cache)];
  if (!cache_source[0] && systemd_cache && systemd_cache[0] == '/') {
    size_t length = strcspn(systemd_cache, ":");
    if (length < sizeof(config->cache_directory)) {
      memcpy(config->cache_directory, systemd_cache, length);
      config->cache_directory[length] = '\0';
      snprintf(cache_source, sizeof(config->sources[0]), "$CACHE_DIRECTORY");
    }
  }
  if (strncmp(config->listen, "ipc://", 6) != 0) {
    return halod_config_annotate(
        config, "listen",
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                         "'%s' is not an ipc:// address (clients share "
                         "memory with the daemon, so they must be local)",
                         config->listen));
  }
  if (strncmp(config->admin, "ipc://", 6) != 0) {
    return halod_config_annotate(
        config, "admin",
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                         "'%s' is not an ipc:// address (the admin socket's "
                         "permissions are its protection)",
                         config->admin));
  }
  // A Unix socket's path fits sun_path (107 bytes and the NUL): the client
  // socket's with its fd channel's ".fd", and the admin socket's.
  size_t most = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
  if (strlen(config->listen) - 6 + strlen(".fd") > most) {
    return halod_config_annotate(
        config, "listen",
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                         "the path of '%s' is %zu bytes: with its fd "
                         "channel's \".fd\" it must fit a Unix socket's %zu",
                         config->listen, strlen(config->listen) - 6, most));
  }
  if (strlen(config->admin) - 6 > most) {
    return halod_config_annotate(
        config, "admin",
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                         "the path of '%s' is %zu bytes: it must fit a Unix "
                         "socket's %zu",
                         config->admin, strlen(config->admin) - 6, most));
  }
  // Between the two: the admin socket's setting is named, unless only the
  // client socket's was given.
  const halod_config_entry_t *admin = halod_config_find("admin", 5);
  const char *culprit =
      config->sources[halod_config_index(admin)][0] ? "admin" : "listen";
  if (strcmp(config->listen, config->admin) == 0) {
    return halod_config_annotate(
        config, culprit,
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                         "the admin socket must differ from the client "
                         "socket (%s)",
                         config->listen));
  }
  // The fd channel is the client socket's path + ".fd".
  size_t listen_length = strlen(config->listen);
  if (strncmp(config->admin, config->listen, listen_length) == 0 &&
      strcmp(config->admin + listen_length, ".fd") == 0) {
    return halod_config_annotate(
        config, culprit,
        halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                         "%s is the client socket's fd channel (its path + "
                         "\".fd\"); the admin socket needs a path of its own",
                         config->admin));
  }
  // One connection, and the connections of one user, must leave a context
  // for the others.
  HALO_RETURN_IF_ERROR(halod_config_fit_contexts(
      config, "session-requests", &config->session_requests, "one connection"));
  HALO_RETURN_IF_ERROR(
      halod_config_fit_contexts(config, "uid-replies", &config->uid_replies,
                                "the connections of one user"));
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--print-config") == 0) {
      halod_config_print(config, stdout);
      *out_exit = 1;
      break;
    }
  }
  return NULL;
}

halo_status_t halod_config_reload(const halod_config_t *current,
                                  halod_config_t *out_next) {
  halod_config_initialize(out_next);
  int exit_now = 0;
  // --print-config on the original command line exited long ago.
  HALO_RETURN_IF_ERROR(
      halod_config_parse(out_next, current->argc, current->argv, &exit_now));
  for (size_t i = 0; i < HALOD_CONFIG_COUNT; ++i) {
    const halod_config_entry_t *entry = &halod_config_entries[i];
    char before[600], after[600];
    halod_config_format(current, entry, before, sizeof(before));
    halod_config_format(out_next, entry, after, sizeof(after));
    if (strcmp(before, after) == 0) continue;
    if (entry->live) {
      HALO_LOG_INFO("reload: %s: %s -> %s", entry->name, before, after);
    } else {
      HALO_LOG_WARN("reload: %s: %s -> %s needs a restart; ignored (still %s)",
                    entry->name, before, after, before);
      memcpy((char *)out_next + entry->offset,
             (const char *)current + entry->offset, entry->size);
      memcpy(out_next->sources[i], current->sources[i],
             sizeof(out_next->sources[i]));
    }
  }
  return NULL;
}
