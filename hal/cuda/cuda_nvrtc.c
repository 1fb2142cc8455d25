// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// CUDA C through NVRTC (halo_hal_cuda_nvrtc_compile), in a process of its
// own, in a read-only sandbox.
//
// Each compile runs in halo-nvrtc (nvrtc_helper/halo_nvrtc.c), started for
// it: a crash or an abort in NVRTC ends that process, not the one that
// serves the device, and the compile fails naming the signal; a compile
// that runs past the device's compile timeout (compile_timeout_ms) is
// killed and fails DEADLINE_EXCEEDED; and the process has none of this
// one's descriptors (its trust domain's shared memory) or memory to read.
//
// The sandbox: NVRTC opens whatever file an #include or a -I option names,
// with the rights of the process that compiles; without one a tenant's
// source could read any file halod's user can read (another tenant's
// cached code, a Kubernetes service account's token) into the compile log
// it gets back. So halo-nvrtc enters Landlock (common/sandbox.h) before
// NVRTC sees the source, allowed to read only the CUDA toolkit's headers;
// an #include of anything else fails with "cannot open source file ...:
// Permission denied". The toolkit's include directories are passed as -I,
// so that <cuda_fp16.h> and (CUDA 13) <cuda/std/...> need no option of the
// client's. A host without Landlock (Linux before 5.13, not enabled at
// boot, a seccomp filter that refuses it) compiles no CUDA C:
// FAILED_PRECONDITION says why, and PTX, CUBIN and FATBIN still load.
//
// Thread-safety: thread-safe.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/memfd.h"
#include "common/sandbox.h"
#include "common/status.h"
#include "hal/cuda/cuda_device.h"
#include "hal/cuda/cuda_nvrtc_protocol.h"

#ifndef HALO_NVRTC_INSTALLED_PATH
#define HALO_NVRTC_INSTALLED_PATH "/usr/libexec/halo/halo-nvrtc"
#endif

// Toolkit include directories: the one beside NVRTC's library, and
// /usr/local/cuda's.
#define HALO_HAL_CUDA_NVRTC_MAX_INCLUDES 2
// What of the compiler's standard error an error quotes (a crash's last
// words), and of its error's message (a compile log is at most 1 MiB).
#define HALO_HAL_CUDA_NVRTC_MAX_STDERR_BYTES 2048
#define HALO_HAL_CUDA_NVRTC_MAX_MESSAGE_BYTES ((uint64_t)2 << 20)

// What every compile of the process shares, made once.
typedef struct halo_hal_cuda_nvrtc_setup_t {
  pthread_once_t once;
  halo_status_t failure;             // why no compile can run (NULL: none)
  char library_directory[PATH_MAX];  // NVRTC's, resolved ("" unknown)
  uint32_t include_count;
  char includes[HALO_HAL_CUDA_NVRTC_MAX_INCLUDES][PATH_MAX];
  // -I options: each include directory, and its cccl/ where it has one.
  uint32_t option_count;
  char options[2 * HALO_HAL_CUDA_NVRTC_MAX_INCLUDES][PATH_MAX + 16];
} halo_hal_cuda_nvrtc_setup_t;

static halo_hal_cuda_nvrtc_setup_t halo_hal_cuda_nvrtc_setup = {
    .once = PTHREAD_ONCE_INIT};

static bool halo_hal_cuda_is_directory(const char *path) {
  struct stat info;
  return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

// Adds the include directory |path| (resolved; skipped where it is not a
// directory or is already there).
static void halo_hal_cuda_nvrtc_add_include(const char *path) {
  char resolved[PATH_MAX];
  if (!realpath(path, resolved) || !halo_hal_cuda_is_directory(resolved)) {
    return;
  }
  halo_hal_cuda_nvrtc_setup_t *setup = &halo_hal_cuda_nvrtc_setup;
  for (uint32_t i = 0; i < setup->include_count; ++i) {
    if (strcmp(setup->includes[i], resolved) == 0) return;
  }
  if (setup->include_count == HALO_HAL_CUDA_NVRTC_MAX_INCLUDES) return;
  memcpy(setup->includes[setup->include_count++], resolved,
         strlen(resolved) + 1);
  snprintf(setup->options[setup->option_count++], sizeof(setup->options[0]),
           "-I%s", resolved);
  char cccl[PATH_MAX + 8];
  snprintf(cccl, sizeof(cccl), "%s/cccl", resolved);
  if (halo_hal_cuda_is_directory(cccl)) {
    snprintf(setup->options[setup->option_count++], sizeof(setup->options[0]),
             "-I%s", cccl);
  }
}

// What does not change from one compile to the next: whether a sandbox
// can be made, and the toolkit's include directories.
static void halo_hal_cuda_nvrtc_setup_once(void) {
  halo_hal_cuda_nvrtc_setup_t *setup = &halo_hal_cuda_nvrtc_setup;
  char reason[160];
  int abi = halo_sandbox_abi(reason, sizeof(reason));
  if (abi == 0) {
    setup->failure = halo_status_make(
        HALO_STATUS_FAILED_PRECONDITION,
        "halod compiles CUDA C only in a read-only sandbox (Landlock), and "
        "this host cannot make one: %s; load PTX, CUBIN or FATBIN compiled "
        "on the client instead",
        reason);
    return;
  }
  if (abi > HALO_SANDBOX_KNOWN_ABI) {
    HALO_LOG_WARN(
        "Landlock ABI %d is newer than halo knows (%d): rights it "
        "adds are not taken from NVRTC's sandbox",
        abi, HALO_SANDBOX_KNOWN_ABI);
  }
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = NULL;
  halo_status_t status = halo_hal_cuda_nvrtc_load(&nvrtc);
  if (status) {
    setup->failure = status;
    return;
  }
  Dl_info info;
  char library[PATH_MAX];
  if (dladdr(*(void **)&nvrtc->nvrtcCompileProgram, &info) && info.dli_fname &&
      realpath(info.dli_fname, library)) {
    char *slash = strrchr(library, '/');
    if (slash) {
      *slash = '\0';
      memcpy(setup->library_directory, library, strlen(library) + 1);
      snprintf(slash, sizeof(library) - (size_t)(slash - library),
               "/../include");
      halo_hal_cuda_nvrtc_add_include(library);
    }
  }
  halo_hal_cuda_nvrtc_add_include("/usr/local/cuda/include");
  HALO_LOG_INFO(
      "CUDA C: NVRTC %d.%d compiles in a process of its own (halo-nvrtc), in "
      "a read-only sandbox (Landlock ABI %d); include directories: %s%s%s",
      nvrtc->major, nvrtc->minor, abi,
      setup->include_count > 0 ? setup->includes[0] : "none",
      setup->include_count > 1 ? ", " : "",
      setup->include_count > 1 ? setup->includes[1] : "");
}

// The client's NVRTC options halod passes on: those that shape the code,
// none that reads or writes a file of its own (-time, --fdevice-time-trace,
// --pre-include, --create-pch: NVRTC aborts the process where it cannot
// write, and reading is the sandbox's to refuse) or picks the target.
static const struct {
  const char *name;
  // A prefix whose value follows in the same string (NVRTC would take the
  // next string as the value of a bare -D or one ending in a space).
  bool value;
} halo_hal_cuda_nvrtc_options[] = {
    {"-D", true},
    {"--define-macro=", true},
    {"-U", true},
    {"--undefine-macro=", true},
    {"-I", true},
    {"--include-path=", true},
    {"-std=", true},
    {"--std=", true},
    {"-use_fast_math", false},
    {"--use_fast_math", false},
    {"-ftz=", true},
    {"--ftz=", true},
    {"-prec-div=", true},
    {"--prec-div=", true},
    {"-prec-sqrt=", true},
    {"--prec-sqrt=", true},
    {"-fmad=", true},
    {"--fmad=", true},
    {"-maxrregcount=", true},
    {"--maxrregcount=", true},
    {"-dopt=", true},
    {"--dopt=", true},
    {"-lineinfo", false},
    {"--generate-line-info", false},
    {"-G", false},
    {"--device-debug", false},
    {"-default-device", false},
    {"--device-as-default-execution-space", false},
    {"-restrict", false},
    {"--restrict", false},
    {"-extra-device-vectorization", false},
    {"--extra-device-vectorization", false},
    {"-device-int128", false},
    {"--device-int128", false},
    {"-w", false},
    {"--disable-warnings", false},
    {"-diag-suppress=", true},
    {"--diag-suppress=", true},
    {"-diag-error=", true},
    {"--diag-error=", true},
    {"-diag-warn=", true},
    {"--diag-warn=", true},
    {"-Ofc=", true},
    {"--Ofast-compile=", true},
    {"-no-source-include", false},
    {"--no-source-include", false},
    {"-minimal", false},
    {"--minimal", false},
    {"-builtin-move-forward=", true},
    {"--builtin-move-forward=", true},
    {"-builtin-initializer-list=", true},
    {"--builtin-initializer-list=", true},
};

#define HALO_HAL_CUDA_NVRTC_OPTION_COUNT \
  (sizeof(halo_hal_cuda_nvrtc_options) / sizeof(halo_hal_cuda_nvrtc_options[0]))

// NULL where halod passes |option| on, else why not (INVALID_ARGUMENT
// naming it and what halod takes).
static halo_status_t halo_hal_cuda_nvrtc_check_option(const char *option) {
  for (size_t i = 0; i < HALO_HAL_CUDA_NVRTC_OPTION_COUNT; ++i) {
    const char *name = halo_hal_cuda_nvrtc_options[i].name;
    size_t length = strlen(name);
    if (!halo_hal_cuda_nvrtc_options[i].value) {
      if (strcmp(option, name) == 0) return NULL;
      continue;
    }
    if (strncmp(option, name, length) != 0) continue;
    char first = option[length];
    if (first != '\0' && first != ' ' && first != '\t') return NULL;
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "NVRTC option '%s' needs its value in the same "
                            "string, right after %s (as in -DNAME=1 or "
                            "-std=c++17)",
                            option, name);
  }
  char names[1024];
  size_t used = 0;
  for (size_t i = 0;
       i < HALO_HAL_CUDA_NVRTC_OPTION_COUNT && used < sizeof(names); ++i) {
    int written = snprintf(names + used, sizeof(names) - used, "%s%s",
                           i ? ", " : "", halo_hal_cuda_nvrtc_options[i].name);
    if (written > 0) used += (size_t)written;
  }
  return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                          "NVRTC option '%s' is not one halod passes on (none "
                          "that reads or writes a file); it takes: %s",
                          option, names);
}

// The compiler program: the device's option, else halo-nvrtc beside the
// running program (a build tree), else where halo installs it.
static halo_status_t halo_hal_cuda_nvrtc_find_compiler(
    const halo_hal_cuda_device_t *device, char *out_path, size_t path_size) {
  if (device->options.compiler[0]) {
    snprintf(out_path, path_size, "%s", device->options.compiler);
    if (access(out_path, X_OK) == 0) return NULL;
    return halo_status_from_errno(errno,
                                  "halod compiles CUDA C in the program %s, "
                                  "which it cannot run",
                                  out_path);
  }
  char self[PATH_MAX] = "";
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  char *slash = length > 0 ? memrchr(self, '/', (size_t)length) : NULL;
  if (slash) {
    *slash = '\0';
    snprintf(out_path, path_size, "%s/halo-nvrtc", self);
    if (access(out_path, X_OK) == 0) return NULL;
  }
  snprintf(out_path, path_size, "%s", HALO_NVRTC_INSTALLED_PATH);
  if (access(out_path, X_OK) == 0) return NULL;
  return halo_status_make(
      HALO_STATUS_FAILED_PRECONDITION,
      "halod compiles CUDA C in a process of its own, and its program "
      "halo-nvrtc is neither beside %s nor at %s (install halo whole); PTX, "
      "CUBIN and FATBIN still load",
      slash ? self : "the running program", HALO_NVRTC_INSTALLED_PATH);
}

// What the compiler wrote to one of its pipes.
typedef struct halo_hal_cuda_nvrtc_output_t {
  int fd;  // -1 once it ended
  char *data;
  size_t size;
  size_t capacity;
  size_t limit;  // past it: dropped (standard error) or an error (reply)
  bool over;     // more came than |limit|
} halo_hal_cuda_nvrtc_output_t;

// Reads what |output|'s pipe has now, in at most 1024 reads (a pipe's read
// gives at most 64 KiB; the wait's deadline is looked at between); closes
// it at its end. False on memory exhaustion.
static bool halo_hal_cuda_nvrtc_output_read(
    halo_hal_cuda_nvrtc_output_t *output) {
  for (int turn = 0; turn < 1024; ++turn) {
    if (output->size == output->capacity && output->size < output->limit) {
      size_t capacity = output->capacity ? output->capacity * 2 : 4096;
      if (capacity > output->limit) capacity = output->limit;
      char *grown = realloc(output->data, capacity);
      if (!grown) return false;
      output->data = grown;
      output->capacity = capacity;
    }
    // Past the limit what comes is read and dropped: the pipe stays open,
    // so that the writer is not killed by SIGPIPE for what it says.
    char sink[4096];
    bool full = output->size == output->capacity;
    ssize_t got = read(output->fd, full ? sink : output->data + output->size,
                       full ? sizeof(sink) : output->capacity - output->size);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EAGAIN) return true;
    if (got <= 0) {
      close(output->fd);
      output->fd = -1;
      return true;
    }
    if (full) {
      output->over = true;
    } else {
      output->size += (size_t)got;
    }
  }
  return true;
}

// Moves |*fd| above the standard descriptors (where this process had one of
// them closed, a pipe may have taken its number, and the child's dup2 of
// one onto another would mix them up).
static halo_status_t halo_hal_cuda_nvrtc_above_stdio(int *fd) {
  if (*fd > STDERR_FILENO) return NULL;
  int moved = fcntl(*fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  if (moved < 0) return halo_status_from_errno(errno, "a compile's pipe");
  close(*fd);
  *fd = moved;
  return NULL;
}

// Starts |program| with |request_fd| as its standard input and the write
// ends of |out_pipe| and |err_pipe| as its output and error, and nothing
// else of this process's descriptors, in a process group of its own;
// signals at their defaults. Its parent-death signal (halo-nvrtc sets it)
// is tied to the thread that spawns it: that thread waits for it.
static halo_status_t halo_hal_cuda_nvrtc_spawn(const char *program,
                                               int request_fd, int out_pipe,
                                               int err_pipe, pid_t *out_pid) {
  posix_spawn_file_actions_t actions;
  int error = posix_spawn_file_actions_init(&actions);
  if (error) return halo_status_from_errno(error, "starting %s", program);
  if (!error) {
    error =
        posix_spawn_file_actions_adddup2(&actions, request_fd, STDIN_FILENO);
  }
  if (!error) {
    error = posix_spawn_file_actions_adddup2(&actions, out_pipe, STDOUT_FILENO);
  }
  if (!error) {
    error = posix_spawn_file_actions_adddup2(&actions, err_pipe, STDERR_FILENO);
  }
  if (!error) {
    error =
        posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  }
  posix_spawnattr_t attr;
  bool attr_made = false;
  if (!error) {
    error = posix_spawnattr_init(&attr);
    attr_made = !error;
  }
  if (!error) {
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setpgroup(&attr, 0);
    error = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF |
                                                POSIX_SPAWN_SETSIGMASK |
                                                POSIX_SPAWN_SETPGROUP);
  }
  char parent[24];
  snprintf(parent, sizeof(parent), "%ld", (long)getpid());
  char *const argv[] = {"halo-nvrtc", parent, NULL};
  extern char **environ;
  if (!error) {
    error = posix_spawn(out_pid, program, &actions, &attr, argv, environ);
  }
  posix_spawn_file_actions_destroy(&actions);
  if (attr_made) posix_spawnattr_destroy(&attr);
  if (error) return halo_status_from_errno(error, "starting %s", program);
  return NULL;
}

// The codes halo-nvrtc answers with; any other is the compiler's fault.
static bool halo_hal_cuda_nvrtc_known_code(int32_t code) {
  switch (code) {
    case HALO_STATUS_INVALID_ARGUMENT:
    case HALO_STATUS_RESOURCE_EXHAUSTED:
    case HALO_STATUS_FAILED_PRECONDITION:
    case HALO_STATUS_NOT_FOUND:
    case HALO_STATUS_UNAVAILABLE:
    case HALO_STATUS_INTERNAL:
      return true;
    default:
      return false;
  }
}

// The compile's outcome from what the compiler wrote and how it ended.
static halo_status_t halo_hal_cuda_nvrtc_outcome(
    const halo_hal_cuda_device_t *device, const char *program, int wstatus,
    halo_hal_cuda_nvrtc_output_t *reply, halo_hal_cuda_nvrtc_output_t *err,
    halo_hal_cuda_image_t *out_image) {
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = device->nvrtc;
  // What it wrote to its standard error, for an error's message (trailing
  // newlines dropped).
  char words[HALO_HAL_CUDA_NVRTC_MAX_STDERR_BYTES + 16] = "";
  if (err->size > 0) {
    int length = (int)err->size;
    while (length > 0 && (err->data[length - 1] == '\n')) --length;
    snprintf(words, sizeof(words), "; it wrote: %.*s%s", length, err->data,
             err->over ? " ..." : "");
  }
  halo_hal_cuda_nvrtc_reply_t header;
  bool whole = reply->size >= sizeof(header);
  if (whole) {
    memcpy(&header, reply->data, sizeof(header));
    whole = header.magic == HALO_HAL_CUDA_NVRTC_REPLY_MAGIC &&
            header.size == reply->size - sizeof(header);
  }
  if (WIFSIGNALED(wstatus)) {
    int signal_number = WTERMSIG(wstatus);
    const char *name = sigabbrev_np(signal_number);
    return halo_status_make(
        HALO_STATUS_INTERNAL,
        "NVRTC %d.%d crashed compiling the CUDA source for sm_%d: its "
        "process (%s) ended on signal %d (SIG%s)%s",
        nvrtc->major, nvrtc->minor, device->arch, program, signal_number,
        name ? name : "?", words);
  }
  if (!whole || WEXITSTATUS(wstatus) != 0) {
    return halo_status_make(
        HALO_STATUS_INTERNAL,
        "the CUDA C compiler %s exited with status %d after %s%s", program,
        WEXITSTATUS(wstatus), whole ? "its reply" : "no whole reply", words);
  }
  const char *payload = reply->data + sizeof(header);
  if (header.code != HALO_STATUS_OK) {
    bool known = halo_hal_cuda_nvrtc_known_code(header.code);
    return halo_status_make(
        known ? (halo_status_code_t)header.code : HALO_STATUS_INTERNAL,
        "%s%.*s%s", known ? "" : "the CUDA C compiler answered: ",
        (int)(header.size < HALO_HAL_CUDA_NVRTC_MAX_MESSAGE_BYTES
                  ? header.size
                  : HALO_HAL_CUDA_NVRTC_MAX_MESSAGE_BYTES),
        payload,
        header.size > HALO_HAL_CUDA_NVRTC_MAX_MESSAGE_BYTES ? " ..." : "");
  }
  if (header.size == 0) {
    return halo_status_make(HALO_STATUS_INTERNAL, "NVRTC produced no CUBIN");
  }
  // The compiler's process is one a crafted source might have taken over:
  // what it sends passes the checks a client's CUBIN does before the
  // driver reads it.
  halo_hal_executable_params_t cubin = {
      .format = HALO_HAL_EXECUTABLE_FORMAT_CUBIN,
      .data = payload,
      .size = header.size};
  halo_status_t damage = halo_hal_cuda_image_check(&cubin);
  if (damage) {
    halo_status_t status = halo_status_make(
        HALO_STATUS_INTERNAL,
        "the CUDA C compiler %s replied with a CUBIN the driver must not "
        "read: %s",
        program, halo_status_message(damage));
    halo_status_free(damage);
    return status;
  }
  // The CUBIN, moved to the front of the reply's buffer, which the image
  // then owns.
  memmove(reply->data, payload, (size_t)header.size);
  out_image->owned = reply->data;
  out_image->data = reply->data;
  out_image->size = (size_t)header.size;
  out_image->compiled = true;
  reply->data = NULL;
  return NULL;
}

// True once |reply| holds more than it may: past the bound its header
// names, or past what its header says follows.
static bool halo_hal_cuda_nvrtc_reply_over(
    const halo_hal_cuda_nvrtc_output_t *reply) {
  halo_hal_cuda_nvrtc_reply_t header;
  if (reply->over) return true;
  if (reply->size < sizeof(header)) return false;
  memcpy(&header, reply->data, sizeof(header));
  return header.size > HALO_HAL_CUDA_NVRTC_MAX_REPLY_BYTES ||
         reply->size - sizeof(header) > header.size;
}

// The compiler's process while it runs: its pipes, and how it ended.
typedef struct halo_hal_cuda_nvrtc_child_t {
  pid_t pid;
  int pidfd;  // readable once it ended (-1: none; polled instead)
  bool reaped;
  int wstatus;
} halo_hal_cuda_nvrtc_child_t;

// Reaps |child| if it ended (without waiting), ending first what it left
// in its process group: while it is a zombie its pid, the group's id, is
// still its own.
static void halo_hal_cuda_nvrtc_child_check(
    halo_hal_cuda_nvrtc_child_t *child) {
  if (child->reaped) return;
  siginfo_t info;
  memset(&info, 0, sizeof(info));
  int waited;
  while ((waited = waitid(P_PID, (id_t)child->pid, &info,
                          WEXITED | WNOHANG | WNOWAIT)) < 0 &&
         errno == EINTR) {
  }
  if (waited < 0) {
    // ECHILD: someone else reaped it (SIGCHLD ignored): it ended.
    child->reaped = errno == ECHILD;
    return;
  }
  if (info.si_pid != child->pid) return;
  kill(-child->pid, SIGKILL);
  while (waitpid(child->pid, &child->wstatus, 0) < 0 && errno == EINTR) {
  }
  child->reaped = true;
}

// Ends |child| and whatever it started in its process group, and reaps it
// (a process in an uninterruptible sleep, a toolkit header on a hung network
// mount, holds this until the kernel lets it go: SIGKILL is all there is).
static void halo_hal_cuda_nvrtc_child_end(halo_hal_cuda_nvrtc_child_t *child) {
  if (!child->reaped) {
    kill(-child->pid, SIGKILL);
    kill(child->pid, SIGKILL);
    while (waitpid(child->pid, &child->wstatus, 0) < 0 && errno == EINTR) {
    }
    child->reaped = true;
  }
  if (child->pidfd >= 0) close(child->pidfd);
  child->pidfd = -1;
}

// Runs |request| in the compiler |program|, for at most the device's
// compile timeout.
static halo_status_t halo_hal_cuda_nvrtc_run(
    const halo_hal_cuda_device_t *device, const char *program,
    const halo_hal_cuda_nvrtc_request_t *request,
    halo_hal_cuda_image_t *out_image) {
  int request_fd = -1;
  HALO_RETURN_IF_ERROR(halo_memfd_create("halo-nvrtc-request", 0, &request_fd));
  halo_status_t status = halo_hal_cuda_nvrtc_request_write(request_fd, request);
  if (!status && lseek(request_fd, 0, SEEK_SET) != 0) {
    status = halo_status_from_errno(errno, "rewinding a compile's request");
  }
  if (!status) {
    status = halo_memfd_seal(
        request_fd, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  }
  if (!status) status = halo_hal_cuda_nvrtc_above_stdio(&request_fd);
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  // The compiler's ends block (it writes its reply whole); this process's
  // do not.
  if (!status &&
      (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
       fcntl(out_pipe[0], F_SETFL, O_NONBLOCK) != 0 ||
       fcntl(err_pipe[0], F_SETFL, O_NONBLOCK) != 0)) {
    status = halo_status_from_errno(errno, "pipes for a compile");
  }
  for (int i = 0; i < 2 && !status; ++i) {
    status = halo_hal_cuda_nvrtc_above_stdio(&out_pipe[i]);
    if (!status) status = halo_hal_cuda_nvrtc_above_stdio(&err_pipe[i]);
  }
  halo_hal_cuda_nvrtc_child_t child = {.pid = -1, .pidfd = -1};
  if (!status) {
    status = halo_hal_cuda_nvrtc_spawn(program, request_fd, out_pipe[1],
                                       err_pipe[1], &child.pid);
  }
  close(request_fd);
  if (out_pipe[1] >= 0) close(out_pipe[1]);
  if (err_pipe[1] >= 0) close(err_pipe[1]);
  halo_hal_cuda_nvrtc_output_t reply = {
      .fd = out_pipe[0],
      .limit = sizeof(halo_hal_cuda_nvrtc_reply_t) +
               HALO_HAL_CUDA_NVRTC_MAX_REPLY_BYTES};
  halo_hal_cuda_nvrtc_output_t err = {
      .fd = err_pipe[0], .limit = HALO_HAL_CUDA_NVRTC_MAX_STDERR_BYTES};
  if (status) {
    if (reply.fd >= 0) close(reply.fd);
    if (err.fd >= 0) close(err.fd);
    return status;
  }
  // Its end wakes the wait below (where there is no pidfd, a kernel before
  // 5.3 or a seccomp filter that refuses it, the wait looks every 10 ms).
  child.pidfd = (int)syscall(SYS_pidfd_open, child.pid, 0);
  uint32_t timeout_ms = device->options.compile_timeout_ms
                            ? device->options.compile_timeout_ms
                            : HALO_HAL_CUDA_DEFAULT_COMPILE_TIMEOUT_MS;
  int64_t deadline_ns = halo_clock_now_ns() + (int64_t)timeout_ms * 1000000;
  bool late = false, oom = false, over = false;
  // Until the process ended and its pipes are read to their end (what it
  // left running in its group is ended with it), or the deadline.
  for (;;) {
    halo_hal_cuda_nvrtc_child_check(&child);
    if (child.reaped && reply.fd < 0 && err.fd < 0) break;
    int64_t left_ns = deadline_ns - halo_clock_now_ns();
    if (left_ns <= 0) {
      late = true;
      break;
    }
    struct pollfd fds[3] = {
        {.fd = reply.fd, .events = POLLIN},
        {.fd = err.fd, .events = POLLIN},
        {.fd = child.reaped ? -1 : child.pidfd, .events = POLLIN}};
    int64_t wait_ms = (left_ns + 999999) / 1000000;
    if (child.pidfd < 0 && wait_ms > 10) wait_ms = 10;
    if (wait_ms > INT32_MAX) wait_ms = INT32_MAX;
    int ready = poll(fds, 3, (int)wait_ms);
    if (ready < 0 && errno != EINTR) {
      status = halo_status_from_errno(errno, "waiting for a compile");
      break;
    }
    if (ready <= 0) continue;
    if (fds[0].revents && !halo_hal_cuda_nvrtc_output_read(&reply)) oom = true;
    if (fds[1].revents && !halo_hal_cuda_nvrtc_output_read(&err)) oom = true;
    over = halo_hal_cuda_nvrtc_reply_over(&reply);
    if (oom || over) break;
  }
  halo_hal_cuda_nvrtc_child_end(&child);
  if (reply.fd >= 0) close(reply.fd);
  if (err.fd >= 0) close(err.fd);
  if (!status && late) {
    status = halo_status_make(
        HALO_STATUS_DEADLINE_EXCEEDED,
        "NVRTC %d.%d compiling the CUDA source for sm_%d ran past the "
        "compile timeout (%u ms) and was stopped",
        device->nvrtc->major, device->nvrtc->minor, device->arch, timeout_ms);
  } else if (!status && over) {
    status = halo_status_make(
        HALO_STATUS_INTERNAL,
        "the CUDA C compiler %s sent a reply over its bound (%llu bytes) or "
        "longer than its header says, and was stopped",
        program, (unsigned long long)HALO_HAL_CUDA_NVRTC_MAX_REPLY_BYTES);
  } else if (!status && oom) {
    status = halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "oom reading a compile's reply");
  } else if (!status) {
    status = halo_hal_cuda_nvrtc_outcome(device, program, child.wstatus, &reply,
                                         &err, out_image);
  }
  free(reply.data);
  free(err.data);
  return status;
}

halo_status_t halo_hal_cuda_nvrtc_compile(
    halo_hal_cuda_device_t *device, const halo_hal_executable_params_t *params,
    halo_hal_cuda_image_t *out_image) {
  const halo_hal_cuda_nvrtc_symbols_t *nvrtc = device->nvrtc;
  if (!nvrtc) {
    const halo_hal_cuda_nvrtc_symbols_t *unused = NULL;
    halo_status_t reason = halo_hal_cuda_nvrtc_load(&unused);
    halo_status_t status = halo_status_make(
        HALO_STATUS_UNIMPLEMENTED, "CUDA C sources need NVRTC in halod: %s",
        halo_status_message(reason));
    halo_status_free(reason);
    return status;
  }
  if (memchr(params->data, '\0', (size_t)params->size)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "the CUDA source contains a NUL byte");
  }
  for (uint32_t i = 0; i < params->option_count; ++i) {
    const char *option = params->options[i];
    if (strncmp(option, "-arch", 5) == 0 ||
        strncmp(option, "--gpu-architecture", 18) == 0 ||
        strncmp(option, "-gencode", 8) == 0 || strcmp(option, "-dlto") == 0 ||
        strncmp(option, "--dlink-time-opt", 16) == 0 ||
        strcmp(option, "-ptx") == 0) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "NVRTC option '%s' is not allowed: halod "
                              "compiles for the device's architecture "
                              "(sm_%d) to a CUBIN",
                              option, device->arch);
    }
    HALO_RETURN_IF_ERROR(halo_hal_cuda_nvrtc_check_option(option));
  }
  halo_hal_cuda_nvrtc_setup_t *setup = &halo_hal_cuda_nvrtc_setup;
  pthread_once(&setup->once, halo_hal_cuda_nvrtc_setup_once);
  if (setup->failure) {
    return halo_status_make(halo_status_code(setup->failure), "%s",
                            halo_status_message(setup->failure));
  }
  char program[PATH_MAX];
  HALO_RETURN_IF_ERROR(
      halo_hal_cuda_nvrtc_find_compiler(device, program, sizeof(program)));
  if (params->option_count >
      HALO_HAL_CUDA_NVRTC_MAX_STRINGS - 1 - setup->option_count) {
    return halo_status_make(
        HALO_STATUS_INVALID_ARGUMENT, "%u NVRTC options: at most %u",
        params->option_count,
        HALO_HAL_CUDA_NVRTC_MAX_STRINGS - 1 - setup->option_count);
  }
  // The architecture, the toolkit's includes, the client's options.
  uint32_t count = params->option_count + 1 + setup->option_count;
  const char **options = calloc(count, sizeof(char *));
  if (!options) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  char arch[32];
  snprintf(arch, sizeof(arch), "--gpu-architecture=sm_%d", device->arch);
  // halod's first: a client's option cannot take one of them as its value.
  uint32_t next = 0;
  options[next++] = arch;
  for (uint32_t i = 0; i < setup->option_count; ++i) {
    options[next++] = setup->options[i];
  }
  for (uint32_t i = 0; i < params->option_count; ++i) {
    options[next++] = params->options[i];
  }
  const char *paths[HALO_HAL_CUDA_NVRTC_MAX_INCLUDES];
  for (uint32_t i = 0; i < setup->include_count; ++i) {
    paths[i] = setup->includes[i];
  }
  halo_hal_cuda_nvrtc_request_t request = {
      .soname = nvrtc->soname,
      .directory = setup->library_directory,
      .arch = device->arch,
      .path_count = setup->include_count,
      .paths = paths,
      .option_count = count,
      .options = options,
      .source = params->data,
      .source_size = (size_t)params->size,
  };
  halo_status_t status =
      halo_hal_cuda_nvrtc_run(device, program, &request, out_image);
  free(options);
  return status;
}
