// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo: the client library of halo, a GPU device server.
//
// A client connects to halod, allocates buffers and timeline semaphores,
// loads executables, records command buffers and submits them to queues.
// The client never creates a CUDA context: the daemon owns the devices.
//
// Conventions
// - Every fallible call returns a halo_status_t (see halo/status.h): NULL on
//   success, otherwise an object the caller owns and frees with
//   halo_status_free(). Output parameters come last, are named out_*, and are
//   cleared (set to NULL/0) before anything else happens.
// - Objects returned through out_* are owned by the caller and released with
//   the matching *_release() call. Releasing an object the daemon still uses
//   (a buffer bound to in-flight work) is fine: the daemon keeps its own
//   reference until the work is done.
// - Thread-safety: a halo_client_t and every object created from it may be
//   used from any number of threads at once. Releasing an object while
//   another thread still uses it is the caller's bug. halo_client_close()
//   must be the last call on a client; objects not yet released are released
//   by it (their pointers become invalid).
// - Fork: a client belongs to the process that connected it. A child that
//   process forks (fork() without exec) holds a copy of the client, whose
//   connection, submission ring and shared memory are the parent's session:
//   every call on it or on its objects that would reach halod or the
//   session's memory returns FAILED_PRECONDITION naming the process that
//   connected it, and touches nothing of the session
//   (halo_buffer_host_pointer returns NULL; halo_semaphore_query and the
//   waits only read the semaphore's page; recording into a command buffer
//   begun before the fork stays local until halo_command_buffer_end, which
//   is refused). The child frees its copy object by object (each
//   *_release() frees the child's copy of the object: its memory and
//   mappings) and then with halo_client_close(), or with
//   halo_client_close() alone, which frees what is left (memory, mappings,
//   descriptors) but for nng's own: the connection's socket and nng's
//   event descriptors (about three) stay open in the child until it exits
//   or execs, since nng cannot be called in a forked child (they are
//   duplicates: the connection stays the parent's, and ends with it);
//   neither sends anything, and the parent's session goes on unaffected. Either
//   works whatever the parent's other threads were doing at the fork (creating,
//   releasing, executing, waiting): libhalo's fork handler makes fork() wait
//   for the short sections in which a thread updates a client's objects and
//   mappings (never for a request to halod), so the child finds every client
//   whole and no release in it waits for a lock (as with malloc's locks, a
//   fork() from a signal handler that interrupted such a section could wait for
//   ever). Nor can such a child connect: nng, libhalo's transport, cannot be
//   used in a process forked after it was initialized (it would abort), so
//   halo_client_connect() returns FAILED_PRECONDITION in every process forked
//   (a child's children too) after libhalo first connected in its parent or an
//   ancestor, even once that one closed its clients. What works: exec in the
//   child (fork then exec, or posix_spawn) and connect in the new program, or
//   fork before the first connect. libhalo tells a forked child by a
//   pthread_atfork handler: a raw clone(2) that skips them is not detected.
// - Status codes every call may return besides the ones listed on it:
//   UNAVAILABLE (the daemon is gone or shutting down; reconnect later),
//   INVALID_ARGUMENT (a NULL pointer or value out of range, named in the
//   message), DEADLINE_EXCEEDED (the daemon did not answer within the
//   client's request timeout; the message names what the call waited for),
//   SESSION_LOST (the session was lost with its trust domain's device
//   worker; calls that libhalo serves without asking the daemon, such as
//   reading a host-visible buffer, still work: see halo/status.h).
#ifndef HALO_HALO_H_
#define HALO_HALO_H_

#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Bumped on any incompatible change of this header's types or functions.
#define HALO_ABI_VERSION 1

// Returns HALO_ABI_VERSION of the loaded library (the Python package checks
// it before calling anything else).
HALO_API uint32_t halo_abi_version(void);

// Returns the library's version string ("0.1.0").
HALO_API const char *halo_version_string(void);

// Timeouts are in nanoseconds; 0 polls once; HALO_TIMEOUT_INFINITE waits
// for ever (still returning UNAVAILABLE if the daemon dies).
#define HALO_TIMEOUT_INFINITE INT64_MAX

// A capability that lets another client import an exported object. Treat it
// like a password: whoever holds it can use the object.
typedef struct halo_token_t {
  uint8_t bytes[16];
} halo_token_t;

// Formats |token| as 32 lowercase hex digits plus a NUL into |out_text|.
HALO_API void halo_token_format(const halo_token_t *token, char out_text[33]);
// Parses 32 hex digits. INVALID_ARGUMENT names the offending character
// (its index and the character), or how many digits a text too short has;
// |out_token| (if not NULL) is all zeros on any error.
HALO_API halo_status_t halo_token_parse(const char *text,
                                        halo_token_t *out_token);

// ---------------------------------------------------------------- client

typedef struct halo_client_s halo_client_t;

typedef struct halo_client_options_t {
  // nng address of halod; NULL: $HALO_ADDRESS, else
  // "ipc:///run/halo/halo.sock". Only ipc:// addresses are supported (the
  // client shares memory with the daemon).
  const char *address;
  // Shown to the operator by haloctl; NULL: the process name.
  const char *client_name;
  // Limit for each request to the daemon, in milliseconds; 0: 30000;
  // negative: INVALID_ARGUMENT. The time a request waits for other
  // threads' requests, for the submission ring and for the fd channel
  // (mapping shared memory) counts. Most calls make one request; a chunked
  // read or write of a device buffer, or a create that maps a new page or
  // arena, makes one per chunk or mapping.
  int32_t request_timeout_ms;
} halo_client_options_t;

// Connects to halod: opens the control socket, performs the version
// handshake, and opens the fd channel. |options| may be NULL.
// Returns UNAVAILABLE if no daemon listens at the address,
// FAILED_PRECONDITION on a protocol version mismatch or in a process forked
// (without exec) after libhalo connected in its parent or an ancestor (see
// Fork above), RESOURCE_EXHAUSTED if this process caused more device faults
// than halod's fault budget allows (the message says until when;
// reconnecting sooner does not help).
// The hot path: when halod offers one, the session gets a shared-memory
// submission ring (docs/architecture.md "Submission ring"), and
// halo_queue_execute, halo_queue_alloca, halo_queue_dealloca and
// halo_semaphore_signal go through it instead of the socket, with the same
// results: each waits for the daemon's verdict on its record and returns
// it. $HALO_RING=0 keeps everything on the socket. $HALO_RING_ASYNC=1 makes
// halo_queue_execute (and halo_queue_dealloca: see there) return as soon as
// its record is in the ring: errors it can check locally (NULL arguments,
// objects of another client, binding ranges, counts) and UNAVAILABLE once
// the connection to halod is lost are still returned; what
// only the daemon checks (slot requirements, handles, signal values, quota,
// draining) then fails the execution's signal semaphores with the reason
// instead. A full ring makes the call wait; order is kept across the ring
// and the socket. Over the ring as over the socket, a call that halod does
// not answer returns DEADLINE_EXCEEDED after the request timeout (waiting
// for room, for the verdict, or for the ring to drain before a socket
// request); as with a timed-out request, halod may still carry out a
// record it takes later.
// Each request on the socket is one message of at most halod's
// max-message-bytes (4 MiB by default), which halod states at connect:
// nng would drop the connection of a larger one, ending the session.
// libhalo refuses such a request before sending it: RESOURCE_EXHAUSTED
// naming the request, its size, the limit and max-message-bytes; the
// session goes on.
HALO_API halo_status_t halo_client_connect(const halo_client_options_t *options,
                                           halo_client_t **out_client);

// Ends the session: closes the connection (the daemon then releases
// everything the session held, exactly as if the process had exited), frees
// the objects the caller did not release and frees |client|. NULL is fine.
// In a forked child, on a client inherited from the parent, only frees the
// child's copy: the parent's session is not touched (see Fork above).
HALO_API void halo_client_close(halo_client_t *client);

// The session id the daemon gave this client (shown by haloctl).
HALO_API uint64_t halo_client_session_id(const halo_client_t *client);

// The daemon's process id, from the fd channel's peer credentials; 0 where
// halod runs outside this process's pid namespace (a client in a
// container). The session works either way.
HALO_API int32_t halo_client_daemon_pid(const halo_client_t *client);

// A no-op round trip to the daemon (used to measure the control plane).
HALO_API halo_status_t halo_client_ping(halo_client_t *client);

// ---------------------------------------------------------------- devices

typedef struct halo_device_info_t {
  uint32_t ordinal;
  char driver[16];  // "local" or "cuda"
  char name[128];
  uint64_t memory_bytes;
  uint32_t compute_major;  // 0 for the CPU driver
  uint32_t compute_minor;
  uint32_t multiprocessor_count;
} halo_device_info_t;

// Number of devices the daemon serves (at least 1: the CPU driver).
HALO_API halo_status_t halo_client_device_count(halo_client_t *client,
                                                uint32_t *out_count);

// Information about device |ordinal|. OUT_OF_RANGE past the last device.
HALO_API halo_status_t halo_client_device_info(halo_client_t *client,
                                               uint32_t ordinal,
                                               halo_device_info_t *out_info);

// ---------------------------------------------------------------- buffers

typedef enum halo_memory_type_e {
  // Memory of the device; reached by the client only through
  // halo_buffer_read/write (on the CPU driver: the daemon's memory).
  HALO_MEMORY_DEVICE = 0,
  // Shared memory mapped by the client and the daemon (and registered with
  // CUDA so kernels and copies reach it): halo_buffer_host_pointer().
  HALO_MEMORY_HOST_VISIBLE = 1,
} halo_memory_type_t;

// The object may be exported to other clients. Exportable host-visible
// buffers get their own memfd (an arena shared by other buffers would
// expose them too).
#define HALO_OBJECT_FLAG_EXPORTABLE 1u

typedef struct halo_buffer_s halo_buffer_t;

// Allocates |size| bytes (1 .. 2^40) on |device| with |memory_type|.
// RESOURCE_EXHAUSTED past the session's quota; OUT_OF_RANGE for an unknown
// device.
HALO_API halo_status_t halo_buffer_create(halo_client_t *client,
                                          uint32_t device,
                                          halo_memory_type_t memory_type,
                                          uint64_t size, uint32_t flags,
                                          halo_buffer_t **out_buffer);

// Drops this client's reference. NULL is fine.
HALO_API void halo_buffer_release(halo_buffer_t *buffer);

HALO_API uint64_t halo_buffer_size(const halo_buffer_t *buffer);
HALO_API halo_memory_type_t
halo_buffer_memory_type(const halo_buffer_t *buffer);
// The session-local handle (for logs and haloctl).
HALO_API uint64_t halo_buffer_handle(const halo_buffer_t *buffer);

// The client's mapping of a host-visible buffer; NULL for device buffers.
// Valid until the buffer is released.
HALO_API void *halo_buffer_host_pointer(const halo_buffer_t *buffer);

// Copies |length| bytes into / out of the buffer at |offset|. Host-visible
// buffers are copied locally; device buffers go through the daemon in
// chunks (of at most 1 MiB, and writes within halod's max-message-bytes).
// OUT_OF_RANGE if [offset, offset+length) exceeds the buffer. |data| may be
// NULL when |length| is 0.
HALO_API halo_status_t halo_buffer_write(halo_buffer_t *buffer, uint64_t offset,
                                         const void *data, uint64_t length);
HALO_API halo_status_t halo_buffer_read(halo_buffer_t *buffer, uint64_t offset,
                                        void *out_data, uint64_t length);

// Returns a token another client can import. FAILED_PRECONDITION if the
// buffer was not created with HALO_OBJECT_FLAG_EXPORTABLE.
HALO_API halo_status_t halo_buffer_export(halo_buffer_t *buffer,
                                          halo_token_t *out_token);
// NOT_FOUND if no live exported buffer has |token|.
HALO_API halo_status_t halo_buffer_import(halo_client_t *client,
                                          const halo_token_t *token,
                                          halo_buffer_t **out_buffer);

// ---------------------------------------------------------------- semaphores

// A 64-bit timeline semaphore. Its value only increases and is below 2^63.
// Its state lives in a daemon-owned page the client maps read-only: query
// and wait read it directly; signal and fail ask the daemon.
typedef struct halo_semaphore_s halo_semaphore_t;

#define HALO_SEMAPHORE_MAX_VALUE UINT64_C(0x7fffffffffffffff)  // INT64_MAX

HALO_API halo_status_t halo_semaphore_create(halo_client_t *client,
                                             uint64_t initial_value,
                                             uint32_t flags,
                                             halo_semaphore_t **out_semaphore);

// Drops this client's reference. An explicit release by the creator hands
// the semaphore over to its importers (it keeps working). When the
// creator's session ends instead (halo_client_close, exit or crash) while
// importers still hold it, the daemon fails it with ABORTED (waiters for
// values already reached still succeed). Once nothing can signal it any
// more (no client holds it, no pending execution signals it; an export
// token not yet imported does not count) while executions still wait on
// it for a value it has not reached, the daemon fails it with ABORTED
// naming it and the value waited for: those executions fail, and so do
// the semaphores they would have signaled, instead of waiting for ever.
HALO_API void halo_semaphore_release(halo_semaphore_t *semaphore);

// Reads the current value without a round trip. If the semaphore failed,
// returns the failure status (and still sets |out_value|): its code from
// the page, its message asked of halod once (kept then for every later
// query and wait), for at most 100 ms or a wait's remaining timeout, if
// longer; where halod does not answer in that time, the code alone. UNAVAILABLE
// once halod has exited (killed or crashed, it failed nothing: the value
// set is the last it wrote), as a wait says.
HALO_API halo_status_t halo_semaphore_query(halo_semaphore_t *semaphore,
                                            uint64_t *out_value);

// Advances the value to |value|. INVALID_ARGUMENT if |value| is not greater
// than the current value or is >= 2^63 (values only increase: a signal to a
// lower or equal value is rejected, never ignored). FAILED_PRECONDITION if
// the semaphore has failed. Wakes every waiter in every process.
HALO_API halo_status_t halo_semaphore_signal(halo_semaphore_t *semaphore,
                                             uint64_t value);

// Fails the semaphore with |code| (not OK) and |message|. The first failure
// wins; later ones are ignored and return OK. Waiters for values not yet
// reached wake and return the failure.
HALO_API halo_status_t halo_semaphore_fail(halo_semaphore_t *semaphore,
                                           halo_status_code_t code,
                                           const char *message);

// Waits until the value is >= |value|: spins up to ~20 us, then sleeps on a
// futex (no message to the daemon). Returns OK, DEADLINE_EXCEEDED after
// |timeout_ns|, the semaphore's failure status (if it failed before reaching
// |value|), ABORTED if the semaphore was destroyed, or UNAVAILABLE if the
// daemon died or is stopping (halod fails every semaphore with it on
// SIGTERM: the wait returns at once).
HALO_API halo_status_t halo_semaphore_wait(halo_semaphore_t *semaphore,
                                           uint64_t value, int64_t timeout_ns);

typedef enum halo_wait_mode_e {
  HALO_WAIT_ALL = 0,  // every semaphore reaches its value
  HALO_WAIT_ANY = 1,  // at least one does
} halo_wait_mode_t;

// Waits on up to HALO_WAIT_MAX_COUNT semaphores (of one client or several).
// With HALO_WAIT_ANY, |out_index| (may be NULL) receives the index of a
// satisfied semaphore. A failure of any semaphore not yet satisfied ends
// the wait with that failure. A |count| of 0 returns OK at once in either
// mode (|semaphores| and |values| may then be NULL); |out_index| receives
// 0, which names no semaphore. The wait watches the halod of each client
// the semaphores belong to: one that dies ends the wait with UNAVAILABLE
// naming it (|out_index|: its first semaphore) unless the wait is met.
#define HALO_WAIT_MAX_COUNT 64
HALO_API halo_status_t halo_semaphore_wait_list(
    size_t count, halo_semaphore_t *const *semaphores, const uint64_t *values,
    halo_wait_mode_t mode, int64_t timeout_ns, size_t *out_index);

// Export / import, as for buffers. Exportable semaphores live on their own
// page (mapping a page exposes every slot on it).
HALO_API halo_status_t halo_semaphore_export(halo_semaphore_t *semaphore,
                                             halo_token_t *out_token);
HALO_API halo_status_t halo_semaphore_import(halo_client_t *client,
                                             const halo_token_t *token,
                                             halo_semaphore_t **out_semaphore);

HALO_API uint64_t halo_semaphore_handle(const halo_semaphore_t *semaphore);

// ---------------------------------------------------------------- executables

typedef enum halo_executable_format_e {
  // An ELF shared object for the local (CPU) driver. Entry points are
  // functions `void entry(const halo_dispatch_state_t *state)` (see
  // halo/local_kernel.h). Loading native code is a trust decision: by default
  // halod accepts it only from clients with the daemon's uid or root
  // (config key native-code); others get PERMISSION_DENIED.
  HALO_EXECUTABLE_FORMAT_ELF = 1,
  HALO_EXECUTABLE_FORMAT_PTX = 2,
  // A CUDA ELF image for the device's architecture, as nvcc -cubin, ptxas
  // and Triton write it. halod checks its ELF tables, indices and offsets
  // lie within |size| before the driver reads it: a damaged image is
  // INVALID_ARGUMENT naming the field; another architecture's is
  // INVALID_ARGUMENT with CUDA_ERROR_NO_BINARY_FOR_GPU.
  HALO_EXECUTABLE_FORMAT_CUBIN = 3,
  // A fat binary (nvcc -fatbin): its entries must lie within |size|, a
  // compressed entry (Zstandard or LZ4) must decompress to the size its
  // header declares, and each ELF image in it, compressed or not,
  // passes the CUBIN's checks.
  HALO_EXECUTABLE_FORMAT_FATBIN = 4,
  HALO_EXECUTABLE_FORMAT_CUDA_SOURCE = 5,
} halo_executable_format_t;

typedef struct halo_executable_s halo_executable_t;

typedef struct halo_executable_params_t {
  halo_executable_format_t format;
  const void *data;
  size_t size;
  // Compiler options; may be NULL. CUDA source takes those that shape the
  // code (-D, -U, -I, -std=, --use_fast_math, -lineinfo and the others the
  // architecture guide's CUDA driver section lists); PTX takes -O<n>,
  // --maxrregcount=N and -lineinfo. Others are INVALID_ARGUMENT naming
  // the option. A CUDA source's #include reads only the CUDA toolkit's
  // headers (<cuda_fp16.h> needs no -I); FAILED_PRECONDITION where the
  // host cannot sandbox the compile (no Landlock).
  const char *const *options;
  size_t option_count;
} halo_executable_params_t;

// Loads an executable on |device|. The same bytes (and options) loaded by
// any number of clients are one executable in the daemon (content-hashed).
// UNIMPLEMENTED if the device's driver does not take |format|;
// INVALID_ARGUMENT with the loader's or compiler's whole log if the code
// does not load; PERMISSION_DENIED for native code from an untrusted uid.
HALO_API halo_status_t halo_executable_create(
    halo_client_t *client, uint32_t device,
    const halo_executable_params_t *params, halo_executable_t **out_executable);
// Reads |path| and loads it; the format is guessed from the extension
// (.so ELF, .ptx, .cubin, .fatbin, .cu) unless |format| is nonzero.
// The bytes go in one request, which halod's max-message-bytes bounds (see
// halo_client_connect), as for halo_executable_create. INVALID_ARGUMENT
// where |path| names no file (a directory, a path through a file).
HALO_API halo_status_t halo_executable_create_from_file(
    halo_client_t *client, uint32_t device, const char *path,
    halo_executable_format_t format, halo_executable_t **out_executable);
HALO_API void halo_executable_release(halo_executable_t *executable);
// The daemon's content hash of the executable (64 hex digits).
HALO_API const char *halo_executable_content_hash(
    const halo_executable_t *executable);
// True if the daemon had this executable already (loaded for another
// handle, or kept in its cache after the last holder released it:
// docs/architecture.md "Caches"), so that nothing was compiled or loaded.
HALO_API int halo_executable_cache_hit(const halo_executable_t *executable);

// One parameter of an entry point: where it lies in the kernel's parameter
// block and how many bytes it has (a pointer: 8).
typedef struct halo_parameter_t {
  uint32_t offset;
  uint32_t size;
} halo_parameter_t;

// The parameter list of entry point |entry|, as the driver knows it (CUDA:
// cuFuncGetParamInfo, after the compiler's specialization, hidden
// parameters included; local: the kernel's HALO_LOCAL_KERNEL_PARAMS).
// |out_count| receives the number of parameters; the first
// min(count, |capacity|) are written to |out_parameters| (which may be NULL
// when |capacity| is 0, to ask for the count). A kernel of more than
// HALO_MAX_DISPATCH_ARGS parameters reports its count but only that many
// entries. NOT_FOUND names an entry the executable does not have;
// UNIMPLEMENTED when the driver cannot tell (a local kernel without
// HALO_LOCAL_KERNEL_PARAMS, a CUBIN without parameter information).
HALO_API halo_status_t halo_executable_parameters(
    halo_executable_t *executable, const char *entry,
    halo_parameter_t *out_parameters, size_t capacity, size_t *out_count);

// ---------------------------------------------------------------- commands

// A command buffer is recorded once on the client (nothing is sent until
// halo_command_buffer_end), validated and memoized by the daemon, then
// executed any number of times (REUSABLE) or once (ONE_SHOT) with a binding
// table that fills its indirect buffer references.
//
// Thread-compatible: record from one thread at a time. After end() a
// command buffer may be executed from any number of threads at once.
typedef struct halo_command_buffer_s halo_command_buffer_t;

#define HALO_COMMAND_BUFFER_ONE_SHOT 1u
#define HALO_COMMAND_BUFFER_REUSABLE 2u
// Alignment of kernel buffer arguments. Without this flag, every buffer
// address a dispatch passes to a kernel must be a multiple of
// HALO_DISPATCH_ALIGNMENT: compilers (Triton's, nvcc's for float4) emit
// vectorized loads that fault the GPU on a lesser address, and a GPU fault
// loses every session of the trust domain. So:
// - a BUFFER argument's direct reference (buffer address + offset) is
//   checked at end(); an indirect one's offset at end(), and at
//   halo_queue_execute the bound address (buffer + binding offset) of its
//   slot;
// - a dispatch with a BINDING_TABLE argument may pass any slot's address on,
//   so every bound slot of the table is checked at execution.
// A failure is INVALID_ARGUMENT naming the command and argument (end()) or
// the binding, its slot and offset (execute; over the submission ring as
// well). Buffers start 256-byte aligned on every driver, so offset 0
// always passes. Fill, copy, update and the workgroup count of
// dispatch_indirect need only their own element alignment. Combine this
// flag with ONE_SHOT or REUSABLE for kernels that take arguments at any
// address (the old rule: no alignment for kernel arguments).
#define HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS 4u
#define HALO_DISPATCH_ALIGNMENT 16u

// Limits enforced at record time (client) and again at end() (daemon).
#define HALO_MAX_COMMANDS 65536
#define HALO_MAX_BINDINGS 4096
#define HALO_MAX_DISPATCH_ARGS 64
#define HALO_MAX_CONSTANT_BYTES 4096      // one CONSTANT argument
#define HALO_MAX_UPDATE_BYTES 65536       // one update command
#define HALO_MAX_INLINE_BYTES (1u << 20)  // all inline bytes of a recording
// On a CUDA device a dispatch's arguments may take at most 8 KiB of kernel
// parameters, each argument counted 16-byte aligned (a buffer 16 bytes):
// more is INVALID_ARGUMENT at end(). Past about 16 KiB the CUDA driver sets
// aside gigabytes of device memory per context for them; pass large data in
// a buffer.
#define HALO_MAX_CUDA_PARAMETER_BYTES 8192
// One halo_queue_execute (or halo_queue_alloca, halo_queue_dealloca) waits
// on and signals at most this many semaphore values, its waits and signals
// counted together: libhalo refuses more with INVALID_ARGUMENT naming the
// counts (halod refuses them too, with either transport). Each is a
// timepoint halod keeps until the work retires.
#define HALO_MAX_EXECUTE_SEMAPHORES 1024

// Length meaning "from the offset to the end of the buffer".
#define HALO_WHOLE_BUFFER UINT64_MAX

// A reference to bytes of a buffer: direct (|buffer| set) or indirect
// (|buffer| NULL: binding table entry |slot|). For indirect references the
// offset composes: table entry offset + reference offset.
typedef struct halo_buffer_ref_t {
  halo_buffer_t *buffer;
  uint32_t slot;
  uint64_t offset;
  uint64_t length;
} halo_buffer_ref_t;

static inline halo_buffer_ref_t halo_buffer_ref(halo_buffer_t *buffer,
                                                uint64_t offset,
                                                uint64_t length) {
  halo_buffer_ref_t ref = {buffer, 0, offset, length};
  return ref;
}

static inline halo_buffer_ref_t halo_binding_ref(uint32_t slot, uint64_t offset,
                                                 uint64_t length) {
#ifdef __cplusplus
  halo_buffer_ref_t ref = {nullptr, slot, offset, length};
#else
  halo_buffer_ref_t ref = {NULL, slot, offset, length};
#endif
  return ref;
}

typedef enum halo_dispatch_arg_kind_e {
  // The device address of |ref| (on the local driver: a pointer).
  HALO_DISPATCH_ARG_BUFFER = 0,
  // |size| bytes at |data|, passed by value.
  HALO_DISPATCH_ARG_CONSTANT = 1,
  // The device address of the submission's binding table: an array of
  // binding_capacity uint64_t addresses (entry offset applied).
  HALO_DISPATCH_ARG_BINDING_TABLE = 2,
} halo_dispatch_arg_kind_t;

typedef struct halo_dispatch_arg_t {
  halo_dispatch_arg_kind_t kind;
  halo_buffer_ref_t ref;
  const void *data;
  size_t size;
} halo_dispatch_arg_t;

typedef struct halo_dispatch_params_t {
  halo_executable_t *executable;
  const char *entry;
  uint32_t grid[3];   // workgroups (CUDA: blocks)
  uint32_t block[3];  // workgroup size (CUDA: threads per block)
  uint32_t shared_memory_bytes;
  const halo_dispatch_arg_t *args;  // in the kernel's parameter order
  size_t arg_count;
} halo_dispatch_params_t;

// |flags|: ONE_SHOT or REUSABLE, optionally with UNALIGNED_BINDINGS.
// |binding_capacity|: slots of the binding table (0 .. HALO_MAX_BINDINGS).
//
// Each record call checks what the client can (slots against the capacity,
// direct ranges against the buffer's size, pattern and inline sizes,
// objects of another client) and fails with INVALID_ARGUMENT or
// OUT_OF_RANGE naming the command index and argument ("command 3
// (dispatch): argument 2: slot 9 out of range (binding capacity 4)"),
// RESOURCE_EXHAUSTED past HALO_MAX_COMMANDS or HALO_MAX_INLINE_BYTES, and
// FAILED_PRECONDITION after end(). A failed record call records nothing:
// recording may go on. An indirect reference of a fill needs an explicit
// length; one of an update takes the data's size, one of a workgroup count
// its 12 bytes, and one of a copy the other side's length
// (halo_command_buffer_copy). The executables and buffers a
// recording names must stay alive until end() returns (then the daemon
// holds its own references).
HALO_API halo_status_t halo_command_buffer_begin(
    halo_client_t *client, uint32_t device, uint32_t flags,
    uint32_t binding_capacity, halo_command_buffer_t **out_command_buffer);
// Fills |target| with a 1-, 2- or 4-byte |pattern| (target offset and length
// multiples of the pattern size).
HALO_API halo_status_t halo_command_buffer_fill(
    halo_command_buffer_t *command_buffer, halo_buffer_ref_t target,
    const void *pattern, size_t pattern_size);
// Copies |source| to |target| (equal lengths; HALO_WHOLE_BUFFER takes the
// other side's length, and where both sides have it, a direct reference
// covers the rest of its buffer and a slot takes that; two slots without a
// length are refused).
HALO_API halo_status_t
halo_command_buffer_copy(halo_command_buffer_t *command_buffer,
                         halo_buffer_ref_t source, halo_buffer_ref_t target);
// Writes |size| inline bytes (copied now) to |target|.
HALO_API halo_status_t halo_command_buffer_update(
    halo_command_buffer_t *command_buffer, const void *data, size_t size,
    halo_buffer_ref_t target);
// Records a dispatch of |params|->grid workgroups of |params|->block
// threads each. A 0 in any grid dimension makes a no-op: the dispatch is
// checked like any other (its errors are reported at record or end(), its
// binding slots count toward the binding table's requirements) and does
// nothing at execution, while the other commands run and the execution
// signals as usual. A 0 in any block dimension is INVALID_ARGUMENT.
HALO_API halo_status_t
halo_command_buffer_dispatch(halo_command_buffer_t *command_buffer,
                             const halo_dispatch_params_t *params);
// Like dispatch, but the grid is read at execution from |workgroup_count|
// (three uint32_t; |params|->grid is ignored). A 0 count in any dimension
// makes that execution's dispatch a no-op, as for dispatch.
HALO_API halo_status_t halo_command_buffer_dispatch_indirect(
    halo_command_buffer_t *command_buffer, const halo_dispatch_params_t *params,
    halo_buffer_ref_t workgroup_count);
// Everything recorded before runs before anything recorded after. Commands
// between barriers may run concurrently.
HALO_API halo_status_t
halo_command_buffer_barrier(halo_command_buffer_t *command_buffer);
// Sends the recording; the daemon validates it (errors name the command
// index and argument) and memoizes it. No command may be added afterwards.
// After a failed end() the command buffer can only be released.
// The recording (its commands, their arguments and inline bytes) goes in
// one request, which halod's max-message-bytes bounds (4 MiB by default;
// see halo_client_connect): the limits above alone do not keep it below
// that. A larger one is RESOURCE_EXHAUSTED naming max-message-bytes; split
// the work into several command buffers, or pass large data in a buffer.
HALO_API halo_status_t
halo_command_buffer_end(halo_command_buffer_t *command_buffer);
// True if the daemon found an identical prepared recording (after end()).
HALO_API int halo_command_buffer_memo_hit(
    const halo_command_buffer_t *command_buffer);
HALO_API void halo_command_buffer_release(
    halo_command_buffer_t *command_buffer);

// ---------------------------------------------------------------- queues

// Queues are unordered except through semaphores: submissions whose waits
// are met may run concurrently and complete in any order.
typedef struct halo_queue_s halo_queue_t;

HALO_API halo_status_t halo_queue_create(halo_client_t *client, uint32_t device,
                                         int32_t priority,
                                         halo_queue_t **out_queue);
HALO_API void halo_queue_release(halo_queue_t *queue);

typedef struct halo_binding_t {
  halo_buffer_t *buffer;
  uint64_t offset;
  uint64_t length;  // HALO_WHOLE_BUFFER: to the end
} halo_binding_t;

typedef struct halo_semaphore_value_t {
  halo_semaphore_t *semaphore;
  uint64_t value;
} halo_semaphore_value_t;

// Submits |command_buffer| with |bindings| (binding_count <= its capacity).
// Returns as soon as the daemon accepted the submission; the work starts
// when every wait is met (a wait may precede its signal) and signals every
// semaphore in |signals| when done. A failed wait or a failed execution
// fails the signal semaphores with the cause. The daemon copies the table
// and keeps the command buffer and every bound buffer alive until the work
// is done. |queue| NULL: the session's default queue of the command
// buffer's device. INVALID_ARGUMENT names the binding or semaphore that
// was wrong (slot out of range, buffer too small for what the recording
// needs, a signal value not above the current or a pending one).
// FAILED_PRECONDITION if |command_buffer| was not ended (or a ONE_SHOT one
// ran already). Every object must belong to the command buffer's client.
// A binding entry {NULL, 0, 0} leaves its slot unbound, as do the slots
// past |binding_count|; the daemon refuses an unbound slot the recording
// uses. At most HALO_MAX_EXECUTE_SEMAPHORES waits and signals in all
// (INVALID_ARGUMENT naming the counts). Over the socket the execution is
// one request, which halod's max-message-bytes bounds (see
// halo_client_connect; 4096 bindings and HALO_MAX_EXECUTE_SEMAPHORES
// values take well below its default).
HALO_API halo_status_t
halo_queue_execute(halo_queue_t *queue, halo_command_buffer_t *command_buffer,
                   const halo_binding_t *bindings, size_t binding_count,
                   const halo_semaphore_value_t *waits, size_t wait_count,
                   const halo_semaphore_value_t *signals, size_t signal_count);

// Queue-ordered allocation (IREE queue_alloca): returns a buffer of |size|
// bytes (1 .. 2^40) and |memory_type| on |queue|'s device at once; work
// that waits on |signals| may use it (bind it, read or write it); |signals|
// are signaled once |waits| are met. A failed wait fails |signals| with the
// cause (the buffer stays allocated: dealloca or release it).
// The memory is allocated when the daemon processes the call, not when the
// waits are met (docs/architecture.md "Queue-ordered alloca and
// dealloca"): the session's quota is charged at once, and an over-quota
// size is RESOURCE_EXHAUSTED naming the quota (session-device-bytes,
// session-host-bytes) here, never a failure of |signals| later. A
// host-visible buffer is mapped as halo_buffer_create's are. The buffer is
// not exportable. |queue| must not be NULL; every semaphore must belong to
// its client. INVALID_ARGUMENT names the wait or signal that was wrong.
// Over the submission ring the call waits for the daemon's verdict (it
// returns the new handle), even with $HALO_RING_ASYNC=1.
HALO_API halo_status_t halo_queue_alloca(
    halo_queue_t *queue, const halo_semaphore_value_t *waits, size_t wait_count,
    const halo_semaphore_value_t *signals, size_t signal_count,
    halo_memory_type_t memory_type, uint64_t size, halo_buffer_t **out_buffer);

// Queue-ordered deallocation (IREE queue_dealloca) of |buffer|, which need
// not come from halo_queue_alloca but must not be exportable
// (FAILED_PRECONDITION: other sessions may hold it; release it instead).
// The daemon's handle goes at once: from then on every use of |buffer|
// (bindings, read, write, export, another dealloca) fails with NOT_FOUND
// naming the handle, and halo_buffer_host_pointer returns NULL; the caller
// still releases |buffer| with halo_buffer_release (locally, no message).
// The memory is freed once |waits| are met and every execution that bound
// the buffer (or a command buffer that names it directly) is done with
// it; then |signals| are signaled. A failed wait fails |signals| (the
// memory is still freed once nothing uses it). Work that waits on
// |signals| must not use the buffer (bind it, or run a recording that
// names it): it would wait for itself, and halod does not detect it (as it
// does cycles of submissions through semaphores alone): both wait until
// the session ends (which cancels them) and a waiter on what the work
// signals until its own timeout.
// With $HALO_RING_ASYNC=1 the call returns once its record is in the ring;
// a rejection then fails |signals| with the reason (the handle is dropped
// all the same).
HALO_API halo_status_t
halo_queue_dealloca(halo_queue_t *queue, const halo_semaphore_value_t *waits,
                    size_t wait_count, const halo_semaphore_value_t *signals,
                    size_t signal_count, halo_buffer_t *buffer);

#ifdef __cplusplus
}
#endif

#endif  // HALO_HALO_H_
