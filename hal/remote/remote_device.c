// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The supervisor's proxy of a device worker (see the header).
#include "hal/remote/remote_device.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/memfd.h"
#include "common/status.h"
#include "common/timeline.h"
#include "common/u64_map.h"
#include "hal/remote/remote_link.h"

extern char **environ;

// An executable's compile may take longer than a control call's bound:
// NVRTC and PTX JIT. The worker's own bound of a CUDA C compile
// (options.compile_ns) and this margin, at least the timeout.
#define HALO_REMOTE_COMPILE_TIMEOUT_NS (300ll * 1000000000ll)
#define HALO_REMOTE_COMPILE_MARGIN_NS (60ll * 1000000000ll)
// The least bound of a control call or a send, whatever the silence bound:
// a live worker (its liveness message flowing) may answer late behind a
// long kernel (a synchronous copy) or a large recording's preparation.
#define HALO_REMOTE_CALL_MIN_NS (30ll * 1000000000ll)
// A reader whose wait (or turn) ended this much past its timeout was held
// up itself: this process stopped or frozen (Ctrl-Z, a frozen cgroup,
// docker pause), most likely with its workers; the worker's silence counts
// afresh from then.
#define HALO_REMOTE_HELD_UP_NS (1000ll * 1000000ll)
// How many of the times the reader found this process held up it keeps for
// the submission deadline (halo_hal_remote_held_up_within).
#define HALO_REMOTE_HELD_UP_KEPT 8
// A control call waits for its reply at most this long at a time, to see
// whether this process was held up (halo_hal_remote_call).
#define HALO_REMOTE_CALL_SLICE_NS (500ll * 1000000ll)
// How often an idle reader (no message, no submission deadline to watch)
// wakes to look at how long the worker has been silent.
#define HALO_REMOTE_SILENCE_CHECK_MS 250

// A control call waiting for its reply: the reader fills it in.
typedef struct halo_hal_remote_call_t {
  struct halo_hal_remote_call_t *next;
  uint64_t id;
  bool done;
  halo_status_t status;
  uint64_t values[2];
  void *data;  // where the reply's data goes (exactly |data_size| bytes)
  uint64_t data_size;
} halo_hal_remote_call_t;

typedef struct halo_hal_remote_execution_t {
  halo_hal_completion_fn completion;
  void *user_data;
  int64_t issued_ns;
  bool overdue;
} halo_hal_remote_execution_t;

typedef struct halo_hal_remote_device_t {
  halo_hal_device_t base;
  halo_hal_allocator_t allocator;
  // The device's own reference (destroy drops it) and one per object;
  // under |mutex|.
  uint32_t references;
  halo_remote_link_t link;
  pid_t pid;
  pthread_t reader;
  char label[160];
  int64_t deadline_ns;
  // The longest the worker may stay silent (options.hang_ns), and the bound
  // of a control call and a send: the same, and at least
  // HALO_REMOTE_CALL_MIN_NS.
  int64_t hang_ns;
  int64_t call_ns;
  // The bound of an executable's creation (NVRTC, PTX JIT).
  int64_t create_executable_ns;
  int64_t poll_ns;  // the link's polling window (options.poll_ns)
  // When the reader last took a message from the worker (the reader only),
  // and whether it found the worker silent past the bound already.
  int64_t heard_ns;
  bool silence_fired;
  // The last times the reader found this process held up (stopped or
  // frozen): when each ended and how long it was (written by the reader,
  // under |mutex|). The submission deadline does not count them against
  // an execution in flight through them.
  struct {
    int64_t end_ns;
    int64_t length_ns;
  } held_up[HALO_REMOTE_HELD_UP_KEPT];
  uint32_t held_up_next;
  halo_hal_remote_lost_fn lost_fn;
  void *lost_user_data;
  halo_hal_remote_ring_fn ring_fn;
  void *ring_user_data;
  // The flight table shared with the worker (remote_link.h), mapped once
  // the worker is ready; NULL if it could not be created (the worker then
  // takes no ring records: it bounces them).
  halo_remote_flight_t *flight;

  pthread_mutex_t mutex;  // everything below
  pthread_cond_t cond;
  uint64_t next_id;
  halo_hal_remote_call_t *calls;
  halo_u64_map_t executions;     // id -> halo_hal_remote_execution_t
  halo_u64_map_t registrations;  // key (page-aligned mapping) -> size
  bool ready;                    // the worker reported its device
  halo_status_t start_failure;   // why it never did (owned)
  int64_t start_timeout_ns;
  bool counted;    // in halo_hal_remote_live
  bool releasing;  // the last reference went: the link's end is no loss
  bool closing;    // ... and the link is shut: the reader frees the device
  bool lost;
  bool completed_lost;
  bool deadline_fired;
  int64_t deadline_at;  // when it fired
  char lost_reason[1024];
  // Why halod killed the worker as hung (the first finding; "" if it did
  // not): the loss's reason names it.
  char hung_reason[256];
  // The worker's last USAGE (query_usage answers it), whether one came,
  // and the malformed ones refused (logged at most once a minute).
  halo_hal_device_usage_t usage;
  bool usage_known;
  uint64_t usage_refused;
  int64_t usage_logged_ns;
} halo_hal_remote_device_t;

static const halo_hal_device_vtable_t halo_hal_remote_device_vtable;
static const halo_hal_allocator_vtable_t halo_hal_remote_allocator_vtable;

// Remote devices alive in the process (halo_hal_remote_wait_all).
static struct {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t count;
} halo_hal_remote_live = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                          0};

static halo_hal_remote_device_t *halo_hal_remote_device_cast(
    halo_hal_device_t *device) {
  return device->vtable == &halo_hal_remote_device_vtable
             ? (halo_hal_remote_device_t *)device
             : NULL;
}

bool halo_hal_remote_device_is(const halo_hal_device_t *device) {
  return device && device->vtable == &halo_hal_remote_device_vtable;
}

static void halo_hal_remote_device_add_reference(
    halo_hal_remote_device_t *device) {
  pthread_mutex_lock(&device->mutex);
  ++device->references;
  pthread_mutex_unlock(&device->mutex);
}

// The last reference: the link closes, the reader sees the end, reaps the
// worker and frees the device (not a loss: |releasing| says so).
static void halo_hal_remote_device_release(halo_hal_remote_device_t *device) {
  pthread_mutex_lock(&device->mutex);
  bool last = --device->references == 0;
  if (last) device->releasing = true;
  pthread_mutex_unlock(&device->mutex);
  if (!last) return;
  // The link first: once |closing| is set, the reader may free the device.
  shutdown(device->link.fd, SHUT_RDWR);
  pthread_mutex_lock(&device->mutex);
  device->closing = true;
  pthread_cond_broadcast(&device->cond);
  pthread_mutex_unlock(&device->mutex);
}

// ---------------------------------------------------------------- calls

static halo_status_t halo_hal_remote_lost_status(
    halo_hal_remote_device_t *device) {
  return halo_status_make(HALO_STATUS_DEVICE_LOST, "%s", device->lost_reason);
}

// A send that failed: the worker is gone (its reader reports the loss).
static halo_status_t halo_hal_remote_send_failed(
    halo_hal_remote_device_t *device, halo_status_t status) {
  halo_status_t lost = halo_status_make(
      HALO_STATUS_DEVICE_LOST, "%s: the device worker is gone (%s)",
      device->label, halo_status_message(status));
  halo_status_free(status);
  return lost;
}

// halo_hal_remote_control_calls.
static _Atomic uint64_t halo_hal_remote_calls_made;

uint64_t halo_hal_remote_control_calls(void) {
  return atomic_load_explicit(&halo_hal_remote_calls_made,
                              memory_order_relaxed);
}

// A worker found hung (|why|: it did not answer a control call, it sent
// nothing for the hang bound, or why the link found it): it is killed, and
// its reader reports the loss, naming |why|. Any thread, the device's mutex
// not held.
static void halo_hal_remote_kill_hung(halo_hal_remote_device_t *device,
                                      const char *why) {
  pthread_mutex_lock(&device->mutex);
  pid_t pid = device->pid;
  char label[sizeof(device->label)];
  memcpy(label, device->label, sizeof(label));
  if (pid > 0 && !device->lost && !device->hung_reason[0]) {
    snprintf(device->hung_reason, sizeof(device->hung_reason), "%s", why);
  }
  pthread_mutex_unlock(&device->mutex);
  if (pid <= 0) return;
  HALO_LOG_ERROR("%s: worker pid %d hung (%s); killing it", label, (int)pid,
                 why);
  kill(pid, SIGKILL);
}

// Sends a request and waits for its reply (at most |timeout_ns|: then the
// worker is hung and killed). |out_values| (optional) receives the reply's
// two values; |out_data| (optional) exactly |data_size| bytes of reply data.
static halo_status_t halo_hal_remote_call(halo_hal_remote_device_t *device,
                                          uint32_t type,
                                          const halo_remote_part_t *parts,
                                          uint32_t part_count, int fd,
                                          int64_t timeout_ns,
                                          uint64_t out_values[2],
                                          void *out_data, uint64_t data_size) {
  halo_hal_remote_call_t call = {.data = out_data, .data_size = data_size};
  atomic_fetch_add_explicit(&halo_hal_remote_calls_made, 1,
                            memory_order_relaxed);
  pthread_mutex_lock(&device->mutex);
  if (device->lost) {
    halo_status_t status = halo_hal_remote_lost_status(device);
    pthread_mutex_unlock(&device->mutex);
    return status;
  }
  call.id = ++device->next_id;
  call.next = device->calls;
  device->calls = &call;
  pthread_mutex_unlock(&device->mutex);
  halo_status_t status = halo_remote_link_send(&device->link, type, call.id,
                                               parts, part_count, fd);
  bool timed_out = false;
  if (status) {
    // A worker that read nothing within the send's time limit is hung as
    // one that does not answer (the link is shut down already).
    timed_out = halo_status_code(status) == HALO_STATUS_DEADLINE_EXCEEDED;
    status = halo_hal_remote_send_failed(device, status);
  }
  // Waited for in slices of at most HALO_REMOTE_CALL_SLICE_NS: a slice
  // that ended more than HALO_REMOTE_HELD_UP_NS past its end found this
  // process stopped or frozen (a frozen service: its workers most likely
  // with it), and the time it was held up does not count against the
  // worker, as for its silence (halo_hal_remote_reader). Before, a service
  // frozen for longer than the bound with a call in flight killed a healthy
  // worker on thaw, and every session of its domain was lost.
  int64_t deadline_ns = halo_clock_now_ns() + timeout_ns;
  pthread_mutex_lock(&device->mutex);
  while (!status && !call.done && !device->lost && !timed_out) {
    int64_t now_ns = halo_clock_now_ns();
    if (now_ns >= deadline_ns) {
      timed_out = true;
      break;
    }
    int64_t slice_end_ns = deadline_ns - now_ns > HALO_REMOTE_CALL_SLICE_NS
                               ? now_ns + HALO_REMOTE_CALL_SLICE_NS
                               : deadline_ns;
    struct timespec until = halo_clock_timespec(slice_end_ns);
    pthread_cond_timedwait(&device->cond, &device->mutex, &until);
    int64_t late_ns = halo_clock_now_ns() - slice_end_ns;
    if (late_ns > HALO_REMOTE_HELD_UP_NS) deadline_ns += late_ns;
  }
  halo_hal_remote_call_t **link = &device->calls;
  while (*link && *link != &call) link = &(*link)->next;
  if (*link) *link = call.next;
  if (!status && !call.done) {
    timed_out = !device->lost;
    status = device->lost ? halo_hal_remote_lost_status(device)
                          : halo_status_make(HALO_STATUS_DEADLINE_EXCEEDED,
                                             "%s: the worker (pid %d) did not "
                                             "answer within %lld ms",
                                             device->label, (int)device->pid,
                                             (long long)(timeout_ns / 1000000));
  }
  pthread_mutex_unlock(&device->mutex);
  // A worker that cannot answer a control call is hung: replace it.
  if (timed_out) {
    char why[128];
    snprintf(why, sizeof(why),
             "it did not answer a control call within %lld ms "
             "(worker-hang-ms, at least 30 s)",
             (long long)(timeout_ns / 1000000));
    halo_hal_remote_kill_hung(device, why);
  }
  if (!status) status = call.status;
  if (!status && out_values) {
    out_values[0] = call.values[0];
    out_values[1] = call.values[1];
  }
  return status;
}

// Messages without a reply (destroys, deallocations, executions, the
// ring's messages) are posted (remote_link.h): the loop thread sends most
// of them, and must not wait for a worker that reads nothing, nor for a
// call thread's send to it.
static void halo_hal_remote_send_destroy(halo_hal_remote_device_t *device,
                                         uint32_t kind, uint64_t id) {
  halo_remote_object_t object = {.kind = kind, .id = id};
  halo_remote_part_t part = {&object, sizeof(object)};
  halo_status_free(halo_remote_link_post(&device->link, HALO_REMOTE_DESTROY, 0,
                                         &part, 1, -1));
}

// The link found the worker hung (its outbox's writer waited the send
// limit for it to read, or the outbox passed its bound; the link is shut
// down already): kill it, as a control call does. Its reader reports the
// loss. The thread that found it.
static void halo_hal_remote_on_hung(void *user_data, halo_status_t status) {
  halo_hal_remote_kill_hung(user_data, halo_status_message(status));
}

// ---------------------------------------------------------------- allocator

static halo_hal_remote_device_t *halo_hal_remote_allocator_device(
    halo_hal_allocator_t *allocator) {
  return (halo_hal_remote_device_t *)((char *)allocator -
                                      offsetof(halo_hal_remote_device_t,
                                               allocator));
}

static halo_status_t halo_hal_remote_allocate(halo_hal_allocator_t *allocator,
                                              uint64_t size,
                                              uint64_t *out_address) {
  *out_address = 0;
  halo_hal_remote_device_t *device =
      halo_hal_remote_allocator_device(allocator);
  halo_remote_allocate_t request = {.size = size};
  halo_remote_part_t part = {&request, sizeof(request)};
  uint64_t values[2];
  HALO_RETURN_IF_ERROR(halo_hal_remote_call(device, HALO_REMOTE_ALLOCATE, &part,
                                            1, -1, device->call_ns, values,
                                            NULL, 0));
  *out_address = values[0];
  return NULL;
}

static void halo_hal_remote_deallocate(halo_hal_allocator_t *allocator,
                                       uint64_t address, uint64_t size) {
  halo_hal_remote_device_t *device =
      halo_hal_remote_allocator_device(allocator);
  halo_remote_allocate_t request = {.address = address, .size = size};
  halo_remote_part_t part = {&request, sizeof(request)};
  halo_status_free(halo_remote_link_post(&device->link, HALO_REMOTE_DEALLOCATE,
                                         0, &part, 1, -1));
}

static halo_status_t halo_hal_remote_write(halo_hal_allocator_t *allocator,
                                           uint64_t address, const void *data,
                                           uint64_t length) {
  halo_hal_remote_device_t *device =
      halo_hal_remote_allocator_device(allocator);
  halo_remote_memory_t request = {.address = address, .length = length};
  halo_remote_part_t parts[2] = {{&request, sizeof(request)},
                                 {data, (size_t)length}};
  return halo_hal_remote_call(device, HALO_REMOTE_WRITE, parts, 2, -1,
                              device->call_ns, NULL, NULL, 0);
}

static halo_status_t halo_hal_remote_read(halo_hal_allocator_t *allocator,
                                          uint64_t address, void *out_data,
                                          uint64_t length) {
  halo_hal_remote_device_t *device =
      halo_hal_remote_allocator_device(allocator);
  halo_remote_memory_t request = {.address = address, .length = length};
  halo_remote_part_t part = {&request, sizeof(request)};
  return halo_hal_remote_call(device, HALO_REMOTE_READ, &part, 1, -1,
                              device->call_ns, NULL, out_data, length);
}

static halo_status_t halo_hal_remote_register_host(
    halo_hal_allocator_t *allocator, void *pointer, uint64_t size, int fd,
    uint64_t *out_address) {
  *out_address = 0;
  halo_hal_remote_device_t *device =
      halo_hal_remote_allocator_device(allocator);
  if (fd < 0) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "%s: host memory without its memfd cannot reach "
                            "a worker process",
                            device->label);
  }
  halo_remote_register_t request = {.key = (uint64_t)(uintptr_t)pointer,
                                    .size = size};
  halo_remote_part_t part = {&request, sizeof(request)};
  uint64_t values[2];
  HALO_RETURN_IF_ERROR(halo_hal_remote_call(device, HALO_REMOTE_REGISTER_HOST,
                                            &part, 1, fd, device->call_ns,
                                            values, NULL, 0));
  pthread_mutex_lock(&device->mutex);
  halo_status_t status = halo_u64_map_put(&device->registrations, request.key,
                                          (void *)(uintptr_t)size);
  pthread_mutex_unlock(&device->mutex);
  if (status) {
    halo_status_free(halo_remote_link_post(
        &device->link, HALO_REMOTE_UNREGISTER_HOST, 0, &part, 1, -1));
    return status;
  }
  *out_address = values[0];
  return NULL;
}

static void halo_hal_remote_unregister_host(halo_hal_allocator_t *allocator,
                                            void *pointer) {
  halo_hal_remote_device_t *device =
      halo_hal_remote_allocator_device(allocator);
  halo_remote_register_t request = {.key = (uint64_t)(uintptr_t)pointer};
  pthread_mutex_lock(&device->mutex);
  halo_u64_map_remove(&device->registrations, request.key);
  pthread_mutex_unlock(&device->mutex);
  halo_remote_part_t part = {&request, sizeof(request)};
  halo_status_free(halo_remote_link_post(
      &device->link, HALO_REMOTE_UNREGISTER_HOST, 0, &part, 1, -1));
}

static const halo_hal_allocator_vtable_t halo_hal_remote_allocator_vtable = {
    .allocate = halo_hal_remote_allocate,
    .deallocate = halo_hal_remote_deallocate,
    .write = halo_hal_remote_write,
    .read = halo_hal_remote_read,
    .register_host = halo_hal_remote_register_host,
    .unregister_host = halo_hal_remote_unregister_host,
};

// ---------------------------------------------------------------- objects

// What every proxy holds after its HAL base: the worker's object.
typedef struct halo_hal_remote_object_t {
  halo_hal_remote_device_t *device;  // held
  uint64_t id;                       // the worker's id of it
  uint32_t kind;                     // halo_remote_object_kind_t
} halo_hal_remote_object_t;

// Allocates a proxy of |size| bytes whose halo_hal_remote_object_t is at
// |offset|, for the worker's object |id|; NULL on oom (the worker's object
// is destroyed again).
static void *halo_hal_remote_object_create(halo_hal_remote_device_t *device,
                                           uint32_t kind, uint64_t id,
                                           size_t size, size_t offset) {
  char *proxy = calloc(1, size);
  if (!proxy) {
    halo_hal_remote_send_destroy(device, kind, id);
    return NULL;
  }
  halo_hal_remote_object_t *object =
      (halo_hal_remote_object_t *)(proxy + offset);
  object->device = device;
  object->id = id;
  object->kind = kind;
  halo_hal_remote_device_add_reference(device);
  return proxy;
}

// Destroys the worker's object and drops the device (the caller frees the
// proxy).
static void halo_hal_remote_object_destroy(halo_hal_remote_object_t *object) {
  halo_hal_remote_send_destroy(object->device, object->kind, object->id);
  halo_hal_remote_device_release(object->device);
}

#define HALO_HAL_REMOTE_OOM() \
  halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom")

// ---------------------------------------------------------------- executables

// An entry the worker found, kept with its executable: a loaded module's
// entries do not change, so a name costs one round trip per executable, not
// one per use (a recording of 65,536 dispatches of one kernel made as many
// control calls, each on halod's loop). Names it did not find are asked
// again (a recording stops at its first error).
typedef struct halo_hal_remote_entry_t {
  struct halo_hal_remote_entry_t *next;  // another name of the same key
  halo_hal_entry_info_t info;
  char name[];
} halo_hal_remote_entry_t;

typedef struct halo_hal_remote_executable_t {
  halo_hal_executable_t base;
  halo_hal_remote_object_t remote;
  pthread_mutex_t mutex;   // entries
  halo_u64_map_t entries;  // halo_hal_remote_entry_key -> chain
} halo_hal_remote_executable_t;

static const halo_hal_executable_vtable_t halo_hal_remote_executable_vtable;

// FNV-1a of |name|, never 0 (a map key).
static uint64_t halo_hal_remote_entry_key(const char *name) {
  uint64_t key = 14695981039346656037ull;
  for (const unsigned char *c = (const unsigned char *)name; *c; ++c) {
    key = (key ^ *c) * 1099511628211ull;
  }
  return key ? key : 1;
}

static void halo_hal_remote_executable_destroy(
    halo_hal_executable_t *base_executable) {
  halo_hal_remote_executable_t *executable =
      (halo_hal_remote_executable_t *)base_executable;
  halo_hal_remote_object_destroy(&executable->remote);
  for (size_t i = 0; i < executable->entries.capacity; ++i) {
    if (!executable->entries.entries[i].key) continue;
    halo_hal_remote_entry_t *entry = executable->entries.entries[i].value;
    while (entry) {
      halo_hal_remote_entry_t *next = entry->next;
      free(entry);
      entry = next;
    }
  }
  halo_u64_map_deinitialize(&executable->entries);
  pthread_mutex_destroy(&executable->mutex);
  free(executable);
}

// Whether |executable| kept the entry |name| (a lookup found it before).
static bool halo_hal_remote_executable_kept(
    halo_hal_remote_executable_t *executable, const char *name,
    halo_hal_entry_info_t *out_info) {
  uint64_t key = halo_hal_remote_entry_key(name);
  pthread_mutex_lock(&executable->mutex);
  halo_hal_remote_entry_t *first = halo_u64_map_get(&executable->entries, key);
  for (halo_hal_remote_entry_t *entry = first; entry; entry = entry->next) {
    if (strcmp(entry->name, name) == 0) {
      *out_info = entry->info;
      pthread_mutex_unlock(&executable->mutex);
      return true;
    }
  }
  pthread_mutex_unlock(&executable->mutex);
  return false;
}

static halo_status_t halo_hal_remote_executable_lookup_entry(
    halo_hal_executable_t *base_executable, const char *name,
    halo_hal_entry_info_t *out_info) {
  halo_hal_remote_executable_t *executable =
      (halo_hal_remote_executable_t *)base_executable;
  if (halo_hal_remote_executable_kept(executable, name, out_info)) return NULL;
  memset(out_info, 0, sizeof(*out_info));
  halo_remote_object_t object = {.kind = HALO_REMOTE_OBJECT_EXECUTABLE,
                                 .id = executable->remote.id};
  size_t length = strlen(name);
  halo_remote_part_t parts[2] = {{&object, sizeof(object)}, {name, length + 1}};
  HALO_RETURN_IF_ERROR(halo_hal_remote_call(
      executable->remote.device, HALO_REMOTE_LOOKUP_ENTRY, parts, 2, -1,
      executable->remote.device->call_ns, NULL, out_info, sizeof(*out_info)));
  // Kept if memory allows (else asked again next time). Another thread may
  // have kept the same name meanwhile: a second copy is harmless.
  halo_hal_remote_entry_t *entry = malloc(sizeof(*entry) + length + 1);
  if (!entry) return NULL;
  entry->info = *out_info;
  memcpy(entry->name, name, length + 1);
  uint64_t key = halo_hal_remote_entry_key(name);
  pthread_mutex_lock(&executable->mutex);
  entry->next = halo_u64_map_get(&executable->entries, key);
  halo_status_t status = halo_u64_map_put(&executable->entries, key, entry);
  pthread_mutex_unlock(&executable->mutex);
  if (status) {
    halo_status_free(status);
    free(entry);
  }
  return NULL;
}

static const halo_hal_executable_vtable_t halo_hal_remote_executable_vtable = {
    .destroy = halo_hal_remote_executable_destroy,
    .lookup_entry = halo_hal_remote_executable_lookup_entry,
};

bool halo_hal_remote_executable_is(const halo_hal_executable_t *executable) {
  return executable && executable->vtable == &halo_hal_remote_executable_vtable;
}

bool halo_hal_remote_executable_known_entry(halo_hal_executable_t *executable,
                                            const char *name,
                                            halo_hal_entry_info_t *out_info) {
  if (!halo_hal_remote_executable_is(executable)) return false;
  return halo_hal_remote_executable_kept(
      (halo_hal_remote_executable_t *)executable, name, out_info);
}

static halo_status_t halo_hal_remote_device_create_executable(
    halo_hal_device_t *base_device, const halo_hal_executable_params_t *params,
    halo_hal_executable_t **out_executable) {
  *out_executable = NULL;
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  size_t options_size = 0;
  for (uint32_t i = 0; i < params->option_count; ++i) {
    options_size += strlen(params->options[i]) + 1;
  }
  char *options = malloc(options_size ? options_size : 1);
  if (!options) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  size_t used = 0;
  for (uint32_t i = 0; i < params->option_count; ++i) {
    size_t length = strlen(params->options[i]) + 1;
    memcpy(options + used, params->options[i], length);
    used += length;
  }
  halo_remote_executable_t request = {.format = params->format,
                                      .option_count = params->option_count,
                                      .options_size = options_size,
                                      .code_size = params->size};
  halo_remote_part_t parts[3] = {{&request, sizeof(request)},
                                 {options, options_size},
                                 {params->data, (size_t)params->size}};
  uint64_t values[2];
  halo_status_t status =
      halo_hal_remote_call(device, HALO_REMOTE_CREATE_EXECUTABLE, parts, 3, -1,
                           device->create_executable_ns, values, NULL, 0);
  free(options);
  if (status) return status;
  halo_hal_remote_executable_t *executable = halo_hal_remote_object_create(
      device, HALO_REMOTE_OBJECT_EXECUTABLE, values[0], sizeof(*executable),
      offsetof(halo_hal_remote_executable_t, remote));
  if (!executable) return HALO_HAL_REMOTE_OOM();
  executable->base.vtable = &halo_hal_remote_executable_vtable;
  executable->base.origin = (uint32_t)values[1];
  pthread_mutex_init(&executable->mutex, NULL);
  halo_u64_map_initialize(&executable->entries);
  *out_executable = &executable->base;
  return NULL;
}

// ---------------------------------------------------------------- command
// buffers

typedef struct halo_hal_remote_command_buffer_t {
  halo_hal_command_buffer_t base;
  halo_hal_remote_object_t remote;
} halo_hal_remote_command_buffer_t;

static void halo_hal_remote_command_buffer_destroy(
    halo_hal_command_buffer_t *base_command_buffer) {
  halo_hal_remote_command_buffer_t *command_buffer =
      (halo_hal_remote_command_buffer_t *)base_command_buffer;
  halo_hal_remote_object_destroy(&command_buffer->remote);
  halo_hal_recording_deinitialize(&command_buffer->base.recording);
  free(command_buffer);
}

static const halo_hal_command_buffer_vtable_t
    halo_hal_remote_command_buffer_vtable = {
        .destroy = halo_hal_remote_command_buffer_destroy,
};

static halo_status_t halo_hal_remote_device_prepare_command_buffer(
    halo_hal_device_t *base_device, halo_hal_recording_t *recording,
    halo_hal_command_buffer_t **out_command_buffer) {
  *out_command_buffer = NULL;
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  // The commands travel with their executables' remote ids.
  size_t commands_size = sizeof(halo_hal_command_t) * recording->command_count;
  halo_hal_command_t *commands = malloc(commands_size ? commands_size : 1);
  if (!commands) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  memcpy(commands, recording->commands, commands_size);
  for (uint32_t i = 0; i < recording->command_count; ++i) {
    halo_hal_executable_t *executable = commands[i].executable;
    if (!executable) continue;
    if (executable->vtable != &halo_hal_remote_executable_vtable ||
        ((halo_hal_remote_executable_t *)executable)->remote.device != device) {
      free(commands);
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "command %u uses an executable of another "
                              "device or trust domain",
                              i);
    }
    commands[i].executable =
        (halo_hal_executable_t *)(uintptr_t)((halo_hal_remote_executable_t *)
                                                 executable)
            ->remote.id;
  }
  halo_remote_prepare_t request = {
      .flags = recording->flags,
      .binding_capacity = recording->binding_capacity,
      .command_count = recording->command_count,
      .arg_count = recording->arg_count,
      .data_size = recording->data_size,
  };
  halo_remote_part_t parts[4] = {
      {&request, sizeof(request)},
      {commands, commands_size},
      {recording->args, sizeof(*recording->args) * recording->arg_count},
      {recording->data, recording->data_size},
  };
  uint64_t values[2];
  halo_status_t status =
      halo_hal_remote_call(device, HALO_REMOTE_PREPARE, parts, 4, -1,
                           device->call_ns, values, NULL, 0);
  free(commands);
  if (status) return status;
  halo_hal_remote_command_buffer_t *command_buffer =
      halo_hal_remote_object_create(
          device, HALO_REMOTE_OBJECT_COMMAND_BUFFER, values[0],
          sizeof(*command_buffer),
          offsetof(halo_hal_remote_command_buffer_t, remote));
  if (!command_buffer) return HALO_HAL_REMOTE_OOM();
  command_buffer->base.vtable = &halo_hal_remote_command_buffer_vtable;
  command_buffer->base.recording = *recording;
  memset(recording, 0, sizeof(*recording));
  *out_command_buffer = &command_buffer->base;
  return NULL;
}

// ---------------------------------------------------------------- fences

typedef struct halo_hal_remote_fence_t {
  halo_hal_fence_t base;
  halo_hal_remote_object_t remote;
} halo_hal_remote_fence_t;

static void halo_hal_remote_fence_destroy(halo_hal_fence_t *base_fence) {
  halo_hal_remote_fence_t *fence = (halo_hal_remote_fence_t *)base_fence;
  halo_hal_remote_object_destroy(&fence->remote);
  free(fence);
}

static const halo_hal_fence_vtable_t halo_hal_remote_fence_vtable = {
    .destroy = halo_hal_remote_fence_destroy,
};

// ---------------------------------------------------------------- queues

typedef struct halo_hal_remote_queue_t {
  halo_hal_queue_t base;
  halo_hal_remote_object_t remote;
} halo_hal_remote_queue_t;

static void halo_hal_remote_queue_destroy(halo_hal_queue_t *base_queue) {
  halo_hal_remote_queue_t *queue = (halo_hal_remote_queue_t *)base_queue;
  halo_hal_remote_object_destroy(&queue->remote);
  free(queue);
}

// The slot's page as the worker knows it (0: not registered there).
static void halo_hal_remote_locate_slot(halo_hal_remote_device_t *device,
                                        const halo_timeline_slot_t *slot,
                                        halo_remote_signal_t *out_signal) {
  if (!slot) return;
  uint64_t address = (uint64_t)(uintptr_t)slot;
  uint64_t key = address & ~(uint64_t)(HALO_TIMELINE_PAGE_SIZE - 1);
  if (halo_u64_map_get(&device->registrations, key)) {
    out_signal->slot_key = key;
    out_signal->slot_offset = address - key;
  }
}

static halo_status_t halo_hal_remote_queue_execute(
    halo_hal_queue_t *base_queue, const halo_hal_execution_t *execution) {
  halo_hal_remote_queue_t *queue = (halo_hal_remote_queue_t *)base_queue;
  halo_hal_remote_device_t *device = queue->remote.device;
  if (execution->out_fence) *execution->out_fence = NULL;
  halo_hal_remote_command_buffer_t *command_buffer =
      (halo_hal_remote_command_buffer_t *)execution->command_buffer;
  if (command_buffer->base.vtable != &halo_hal_remote_command_buffer_vtable ||
      command_buffer->remote.device != device) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%s: the command buffer belongs to another device "
                            "or trust domain",
                            device->label);
  }
  // The signals, then the fence ids waited for, in one block.
  size_t signals_size = sizeof(halo_remote_signal_t) * execution->signal_count;
  size_t tail_size =
      signals_size + sizeof(uint64_t) * execution->wait_fence_count;
  uint64_t tail_inline[64];
  void *tail =
      tail_size <= sizeof(tail_inline) ? tail_inline : malloc(tail_size);
  halo_hal_remote_execution_t *record = calloc(1, sizeof(*record));
  if (!tail || !record) {
    if (tail != tail_inline) free(tail);
    free(record);
    return HALO_HAL_REMOTE_OOM();
  }
  halo_remote_signal_t *signals = tail;
  uint64_t *fence_ids = (uint64_t *)((char *)tail + signals_size);
  for (uint32_t i = 0; i < execution->wait_fence_count; ++i) {
    fence_ids[i] =
        ((halo_hal_remote_fence_t *)execution->wait_fences[i])->remote.id;
  }
  record->completion = execution->completion;
  record->user_data = execution->user_data;
  halo_remote_execute_t request = {
      .queue = queue->remote.id,
      .command_buffer = command_buffer->remote.id,
      .binding_count = execution->binding_count,
      .signal_count = execution->signal_count,
      .wait_fence_count = execution->wait_fence_count,
  };
  pthread_mutex_lock(&device->mutex);
  halo_status_t status =
      device->lost ? halo_hal_remote_lost_status(device) : NULL;
  uint64_t id = 0;
  if (!status) {
    for (uint32_t i = 0; i < execution->signal_count; ++i) {
      memset(&signals[i], 0, sizeof(signals[i]));
      signals[i].device_address = execution->signals[i].device_address;
      signals[i].value = execution->signals[i].value;
      halo_hal_remote_locate_slot(device, execution->signals[i].slot,
                                  &signals[i]);
    }
    id = ++device->next_id;
    if (execution->out_fence && queue->base.fence_domain) {
      request.out_fence = ++device->next_id;
    }
    record->issued_ns = halo_clock_now_ns();
    status = halo_u64_map_put(&device->executions, id, record);
  }
  pthread_mutex_unlock(&device->mutex);
  if (!status) {
    halo_remote_part_t parts[3] = {
        {&request, sizeof(request)},
        {execution->bindings,
         sizeof(*execution->bindings) * execution->binding_count},
        {tail, tail_size},
    };
    status = halo_remote_link_post(&device->link, HALO_REMOTE_EXECUTE, id,
                                   parts, 3, -1);
    if (status) {
      status = halo_hal_remote_send_failed(device, status);
      // Not sent: unless the loss already took it over, it never started.
      pthread_mutex_lock(&device->mutex);
      bool mine = halo_u64_map_remove(&device->executions, id) != NULL;
      pthread_mutex_unlock(&device->mutex);
      if (!mine) {
        halo_status_free(status);
        status = NULL;
        record = NULL;  // the loss completes it
      }
    } else {
      record = NULL;  // the completion frees it
    }
  }
  if (tail != tail_inline) free(tail);
  free(record);
  if (status) return status;
  if (request.out_fence) {
    // NULL on oom: the consumers then wait through the host.
    halo_hal_remote_fence_t *fence = halo_hal_remote_object_create(
        device, HALO_REMOTE_OBJECT_FENCE, request.out_fence, sizeof(*fence),
        offsetof(halo_hal_remote_fence_t, remote));
    if (fence) {
      fence->base.vtable = &halo_hal_remote_fence_vtable;
      atomic_init(&fence->base.references, 1);
      fence->base.domain = queue->base.fence_domain;
      *execution->out_fence = &fence->base;
    }
  }
  return NULL;
}

static const halo_hal_queue_vtable_t halo_hal_remote_queue_vtable = {
    .destroy = halo_hal_remote_queue_destroy,
    .execute = halo_hal_remote_queue_execute,
};

static halo_status_t halo_hal_remote_device_create_queue(
    halo_hal_device_t *base_device, int32_t priority,
    halo_hal_queue_t **out_queue) {
  *out_queue = NULL;
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  halo_remote_queue_t request = {.priority = priority};
  halo_remote_part_t part = {&request, sizeof(request)};
  uint64_t values[2];
  HALO_RETURN_IF_ERROR(halo_hal_remote_call(device, HALO_REMOTE_CREATE_QUEUE,
                                            &part, 1, -1, device->call_ns,
                                            values, NULL, 0));
  halo_hal_remote_queue_t *queue = halo_hal_remote_object_create(
      device, HALO_REMOTE_OBJECT_QUEUE, values[0], sizeof(*queue),
      offsetof(halo_hal_remote_queue_t, remote));
  if (!queue) return HALO_HAL_REMOTE_OOM();
  queue->base.vtable = &halo_hal_remote_queue_vtable;
  // The worker's queues share its context: their fences are one domain.
  queue->base.fence_domain = values[1] ? device : NULL;
  *out_queue = &queue->base;
  return NULL;
}

// ---------------------------------------------------------------- the device

static void halo_hal_remote_device_destroy(halo_hal_device_t *base_device) {
  halo_hal_remote_device_release(halo_hal_remote_device_cast(base_device));
}

// Any thread: the worker's last report, without asking it.
static bool halo_hal_remote_device_query_usage(
    halo_hal_device_t *base_device, halo_hal_device_usage_t *out_usage) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  pthread_mutex_lock(&device->mutex);
  // A lost worker's last report is no one's now.
  bool known = device->usage_known && !device->lost;
  if (known) *out_usage = device->usage;
  pthread_mutex_unlock(&device->mutex);
  return known;
}

static const halo_hal_device_vtable_t halo_hal_remote_device_vtable = {
    .destroy = halo_hal_remote_device_destroy,
    .create_executable = halo_hal_remote_device_create_executable,
    .prepare_command_buffer = halo_hal_remote_device_prepare_command_buffer,
    .create_queue = halo_hal_remote_device_create_queue,
    .query_usage = halo_hal_remote_device_query_usage,
};

// A USAGE: kept as the worker's last report. A malformed one is refused
// (the last good report stands) and logged, at most once a minute: a
// worker is trusted less than halod.
static void halo_hal_remote_on_usage(halo_hal_remote_device_t *device,
                                     const halo_remote_header_t *header,
                                     const void *payload) {
  halo_hal_device_usage_t usage;
  halo_status_t status =
      halo_remote_usage_decode(payload, header->length, &usage);
  pthread_mutex_lock(&device->mutex);
  bool log = false;
  uint64_t refused = 0;
  if (!status) {
    device->usage = usage;
    device->usage_known = true;
  } else {
    refused = ++device->usage_refused;
    log = halo_clock_due(&device->usage_logged_ns, halo_clock_now_ns(),
                         60000000000ll);
  }
  char label[sizeof(device->label)];
  memcpy(label, device->label, sizeof(label));
  pthread_mutex_unlock(&device->mutex);
  if (log) {
    HALO_LOG_WARN(
        "%s: the worker's usage report is refused: %s (%llu refused so far; "
        "logged at most once a minute)",
        label, halo_status_message(status), (unsigned long long)refused);
  }
  halo_status_free(status);
}

// A REPLY: hands it to the waiting call.
static void halo_hal_remote_on_reply(halo_hal_remote_device_t *device,
                                     const halo_remote_header_t *header,
                                     const void *payload) {
  halo_remote_reply_t reply = {0};
  bool valid = header->length >= sizeof(reply);
  if (valid) {
    memcpy(&reply, payload, sizeof(reply));
    valid = sizeof(reply) + (uint64_t)reply.message_length <= header->length;
  }
  const char *message = (const char *)payload + sizeof(reply);
  const char *data = message + (valid ? reply.message_length : 0);
  uint64_t data_size =
      valid ? header->length - sizeof(reply) - reply.message_length : 0;
  pthread_mutex_lock(&device->mutex);
  halo_hal_remote_call_t *call = device->calls;
  while (call && call->id != header->id) call = call->next;
  if (call) {
    if (!valid) {
      call->status = halo_status_make(HALO_STATUS_INTERNAL,
                                      "%s: a malformed reply from the worker",
                                      device->label);
    } else if (reply.code != HALO_STATUS_OK) {
      call->status = halo_status_make((halo_status_code_t)reply.code, "%.*s",
                                      (int)reply.message_length, message);
    } else if (call->data && data_size != call->data_size) {
      call->status = halo_status_make(
          HALO_STATUS_INTERNAL, "%s: %llu bytes of reply where %llu were due",
          device->label, (unsigned long long)data_size,
          (unsigned long long)call->data_size);
    } else {
      call->values[0] = reply.values[0];
      call->values[1] = reply.values[1];
      if (call->data && data_size) memcpy(call->data, data, data_size);
    }
    call->done = true;
    pthread_cond_broadcast(&device->cond);
  }
  pthread_mutex_unlock(&device->mutex);
}

static void halo_hal_remote_on_complete(halo_hal_remote_device_t *device,
                                        const halo_remote_header_t *header,
                                        const void *payload) {
  pthread_mutex_lock(&device->mutex);
  halo_hal_remote_execution_t *record =
      halo_u64_map_remove(&device->executions, header->id);
  pthread_mutex_unlock(&device->mutex);
  if (!record) return;
  halo_status_t status = NULL;
  halo_remote_complete_t complete = {0};
  if (header->length >= sizeof(complete)) {
    memcpy(&complete, payload, sizeof(complete));
  }
  if (complete.code != HALO_STATUS_OK) {
    uint32_t length = complete.message_length;
    if (sizeof(complete) + (uint64_t)length > header->length) length = 0;
    status =
        halo_status_make((halo_status_code_t)complete.code, "%.*s", (int)length,
                         (const char *)payload + sizeof(complete));
  }
  record->completion(record->user_data, status);
  free(record);
}

void halo_hal_remote_device_complete_lost(halo_hal_device_t *base_device) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  pthread_mutex_lock(&device->mutex);
  if (device->completed_lost || !device->lost) {
    pthread_mutex_unlock(&device->mutex);
    return;
  }
  device->completed_lost = true;
  size_t count = device->executions.count;
  halo_hal_remote_execution_t **records =
      calloc(count ? count : 1, sizeof(*records));
  size_t n = 0;
  for (size_t i = 0; records && i < device->executions.capacity; ++i) {
    if (!device->executions.entries[i].key) continue;
    records[n++] = device->executions.entries[i].value;
  }
  if (records) {
    halo_u64_map_deinitialize(&device->executions);
    halo_u64_map_initialize(&device->executions);
  }
  char reason[sizeof(device->lost_reason)];
  memcpy(reason, device->lost_reason, sizeof(reason));
  int64_t deadline_ms = device->deadline_ns / 1000000;
  pthread_mutex_unlock(&device->mutex);
  if (!records) {
    HALO_LOG_ERROR("%s: out of memory completing lost work", device->label);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    halo_status_t status =
        records[i]->overdue
            ? halo_status_make(HALO_STATUS_DEADLINE_EXCEEDED,
                               "%s: the execution ran past the submission "
                               "deadline of %lld ms (submission-deadline-ms); "
                               "its worker was replaced",
                               device->label, (long long)deadline_ms)
            : halo_status_make(HALO_STATUS_DEVICE_LOST, "%s", reason);
    records[i]->completion(records[i]->user_data, status);
    free(records[i]);
  }
  free(records);
}

// The worker ended (or must end): record why, fail the calls waiting.
static void halo_hal_remote_mark_lost(halo_hal_remote_device_t *device,
                                      pid_t pid, const char *cause) {
  pthread_mutex_lock(&device->mutex);
  if (!device->lost) {
    device->lost = true;
    snprintf(device->lost_reason, sizeof(device->lost_reason),
             "%s: the trust domain's device worker (pid %d) %s", device->label,
             (int)pid, cause);
  }
  pthread_cond_broadcast(&device->cond);
  pthread_mutex_unlock(&device->mutex);
}

// Reaps the worker and describes how it ended.
static void halo_hal_remote_reap(halo_hal_remote_device_t *device,
                                 char *out_cause, size_t capacity) {
  int wstatus = 0;
  pid_t pid = device->pid;
  snprintf(out_cause, capacity, "closed its link");
  if (pid <= 0) return;
  // The link closed: the worker is exiting or gone. Give it a moment, then
  // make sure (a worker that closed its link but hangs is as good as dead).
  int64_t deadline = halo_clock_now_ns() + 2000000000ll;
  pid_t reaped = 0;
  while ((reaped = waitpid(pid, &wstatus, WNOHANG)) == 0 &&
         halo_clock_now_ns() < deadline) {
    usleep(1000);
  }
  if (reaped == 0) {
    kill(pid, SIGKILL);
    reaped = waitpid(pid, &wstatus, 0);
  }
  if (reaped == pid) {
    if (WIFSIGNALED(wstatus)) {
      snprintf(out_cause, capacity, "was killed by signal %d (%s)",
               WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
    } else if (WIFEXITED(wstatus)) {
      snprintf(out_cause, capacity, "exited with status %d",
               WEXITSTATUS(wstatus));
    }
  }
  pthread_mutex_lock(&device->mutex);
  device->pid = 0;
  pthread_mutex_unlock(&device->mutex);
}

// The reader: this process was held up for |length_ns|, until |end_ns|.
static void halo_hal_remote_held_up(halo_hal_remote_device_t *device,
                                    int64_t end_ns, int64_t length_ns) {
  pthread_mutex_lock(&device->mutex);
  uint32_t slot = device->held_up_next++ % HALO_REMOTE_HELD_UP_KEPT;
  device->held_up[slot].end_ns = end_ns;
  device->held_up[slot].length_ns = length_ns;
  pthread_mutex_unlock(&device->mutex);
}

// How much of [|since_ns|, |until_ns|] this process was held up (of the
// kept times). Under |mutex|.
static int64_t halo_hal_remote_held_up_within(
    const halo_hal_remote_device_t *device, int64_t since_ns,
    int64_t until_ns) {
  int64_t total = 0;
  uint32_t kept = device->held_up_next < HALO_REMOTE_HELD_UP_KEPT
                      ? device->held_up_next
                      : HALO_REMOTE_HELD_UP_KEPT;
  for (uint32_t i = 0; i < kept; ++i) {
    int64_t end_ns = device->held_up[i].end_ns;
    int64_t start_ns = end_ns - device->held_up[i].length_ns;
    if (end_ns > until_ns) end_ns = until_ns;
    if (start_ns < since_ns) start_ns = since_ns;
    if (end_ns > start_ns) total += end_ns - start_ns;
  }
  return total;
}

// Whether an execution issued at |issued_ns| had run past the submission
// deadline at |at_ns|, the times this process was held up left out. Under
// |mutex|.
static bool halo_hal_remote_past_deadline(
    const halo_hal_remote_device_t *device, int64_t issued_ns, int64_t at_ns) {
  return at_ns - issued_ns -
             halo_hal_remote_held_up_within(device, issued_ns, at_ns) >
         device->deadline_ns;
}

// The watchdog: marks the executions past the deadline and kills the
// worker; returns whether it fired.
static bool halo_hal_remote_watchdog(halo_hal_remote_device_t *device) {
  if (device->deadline_ns <= 0) return false;
  int64_t now = halo_clock_now_ns();
  bool fire = false;
  pthread_mutex_lock(&device->mutex);
  for (size_t i = 0; !device->deadline_fired && i < device->executions.capacity;
       ++i) {
    if (!device->executions.entries[i].key) continue;
    halo_hal_remote_execution_t *record = device->executions.entries[i].value;
    if (halo_hal_remote_past_deadline(device, record->issued_ns, now)) {
      record->overdue = true;
      fire = true;
    }
  }
  // The executions the worker took from rings itself: the flight table.
  halo_remote_flight_t *flight = device->flight;
  for (uint32_t i = 0; flight && !fire && !device->deadline_fired &&
                       i < HALO_REMOTE_FLIGHT_ENTRIES;
       ++i) {
    halo_remote_flight_entry_t *entry = &flight->entries[i];
    uint64_t id = atomic_load_explicit(&entry->id, memory_order_acquire);
    if (!id) continue;
    if (!halo_remote_flight_entry_running(entry)) continue;  // its report
    int64_t issued_ns =
        atomic_load_explicit(&entry->issued_ns, memory_order_relaxed);
    // A sequence lock (remote_link.h): the worker may have freed the entry
    // and be filling it for another execution meanwhile, its |completed| 0
    // seen before its |issued_ns| (no order between the two stores); the
    // time is |id|'s only if |id| held. A changed entry is looked at again
    // at the next check.
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&entry->id, memory_order_relaxed) != id) continue;
    if (halo_hal_remote_past_deadline(device, issued_ns, now)) fire = true;
  }
  if (fire) {
    device->deadline_fired = true;
    device->deadline_at = now;
  }
  pid_t pid = device->pid;
  pthread_mutex_unlock(&device->mutex);
  if (fire && pid > 0) {
    HALO_LOG_ERROR(
        "%s: an execution ran past the submission deadline of "
        "%lld ms; killing worker pid %d",
        device->label, (long long)(device->deadline_ns / 1000000), (int)pid);
    kill(pid, SIGKILL);
  }
  return fire;
}

// Kills the worker as hung (once) for a silence of |silent_ns|: it |what|.
static void halo_hal_remote_kill_silent(halo_hal_remote_device_t *device,
                                        const char *what, int64_t silent_ns) {
  if (device->silence_fired) return;
  device->silence_fired = true;
  char why[192];
  snprintf(why, sizeof(why), "it %s for %lld ms (worker-hang-ms): %s", what,
           (long long)(silent_ns / 1000000), "stopped or frozen");
  halo_hal_remote_kill_hung(device, why);
}

// The reader, its wait for the next message over and nothing to read: a
// worker it has heard nothing from (not even its liveness message, ALIVE or
// USAGE, which its reporter thread sends at least once per
// HALO_REMOTE_USAGE_INTERVAL_NS whatever the rest of it does) for the hang
// bound is stopped or frozen: kill it (once) as hung. Only what the socket
// held counts: a reader held up alone (halod stopped, a callback slow)
// finds the worker's messages waiting; one held up with its workers (the
// whole service frozen) restarts the count (HALO_REMOTE_HELD_UP_NS). A
// worker whose reporter runs while the rest of it is wedged is found by a
// control call's bound or the submission deadline instead.
static void halo_hal_remote_check_silence(halo_hal_remote_device_t *device) {
  int64_t silent_ns = halo_clock_now_ns() - device->heard_ns;
  if (silent_ns < device->hang_ns) return;
  halo_hal_remote_kill_silent(
      device, "sent nothing, not even its liveness message,", silent_ns);
}

static void halo_hal_remote_device_free(halo_hal_remote_device_t *device) {
  bool counted = device->counted;
  halo_remote_link_stop_counting(&device->link);
  if (device->flight) munmap(device->flight, HALO_REMOTE_FLIGHT_BYTES);
  halo_status_free(device->start_failure);
  halo_remote_link_deinitialize(&device->link);
  halo_u64_map_deinitialize(&device->executions);
  halo_u64_map_deinitialize(&device->registrations);
  pthread_cond_destroy(&device->cond);
  pthread_mutex_destroy(&device->mutex);
  free(device);
  if (counted) {
    pthread_mutex_lock(&halo_hal_remote_live.mutex);
    --halo_hal_remote_live.count;
    pthread_cond_broadcast(&halo_hal_remote_live.cond);
    pthread_mutex_unlock(&halo_hal_remote_live.mutex);
  }
}

void halo_hal_remote_device_retain(halo_hal_device_t *base_device) {
  halo_hal_remote_device_add_reference(
      halo_hal_remote_device_cast(base_device));
}

uint32_t halo_hal_remote_wait_all(int64_t timeout_ns) {
  int64_t deadline = halo_clock_now_ns() + timeout_ns;
  pthread_mutex_lock(&halo_hal_remote_live.mutex);
  while (halo_hal_remote_live.count > 0 && halo_clock_now_ns() < deadline) {
    pthread_mutex_unlock(&halo_hal_remote_live.mutex);
    usleep(1000);
    pthread_mutex_lock(&halo_hal_remote_live.mutex);
  }
  uint32_t left = halo_hal_remote_live.count;
  pthread_mutex_unlock(&halo_hal_remote_live.mutex);
  return left;
}

// Reads the worker's first message: READY with its device, or FAILED.
static halo_status_t halo_hal_remote_await_ready(
    halo_hal_remote_device_t *device, int64_t timeout_ns) {
  struct pollfd poll_fd = {.fd = device->link.fd, .events = POLLIN};
  int timeout_ms = (int)(timeout_ns / 1000000);
  int ready;
  do {
    ready = poll(&poll_fd, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) {
    return halo_status_make(HALO_STATUS_DEADLINE_EXCEEDED,
                            "%s: the worker did not start within %d ms",
                            device->label, timeout_ms);
  }
  halo_remote_header_t header;
  void *payload = NULL;
  int fd = -1;
  halo_status_t status =
      halo_remote_link_receive(&device->link, &header, &payload, &fd);
  if (fd >= 0) close(fd);
  if (status) {
    return halo_status_annotate(status, "%s: starting the worker",
                                device->label);
  }
  if (header.type == HALO_REMOTE_FAILED) {
    status = halo_status_make(HALO_STATUS_UNAVAILABLE, "%s: %.*s",
                              device->label, (int)header.length,
                              payload ? (const char *)payload : "");
  } else if (header.type != HALO_REMOTE_READY ||
             header.length != sizeof(halo_remote_ready_t)) {
    status = halo_status_make(HALO_STATUS_INTERNAL,
                              "%s: the worker's first message is not READY",
                              device->label);
  } else {
    halo_remote_ready_t ready_message;
    memcpy(&ready_message, payload, sizeof(ready_message));
    if (ready_message.version != HALO_REMOTE_LINK_VERSION ||
        ready_message.header_size != sizeof(halo_remote_header_t) ||
        ready_message.execute_size != sizeof(halo_remote_execute_t) ||
        ready_message.command_size != sizeof(halo_hal_command_t)) {
      status = halo_status_make(HALO_STATUS_FAILED_PRECONDITION,
                                "%s: the worker speaks link version %u, "
                                "halod %u (another build?)",
                                device->label, ready_message.version,
                                HALO_REMOTE_LINK_VERSION);
    } else {
      device->base.info = ready_message.info;
    }
  }
  free(payload);
  return status;
}

// Creates the flight table and hands it to the worker (before anything else
// is sent: the reader runs this before it marks the device ready). Without
// one the worker takes no ring records.
static void halo_hal_remote_share_flight(halo_hal_remote_device_t *device) {
  int memfd = -1;
  void *pointer = NULL;
  halo_status_t status =
      halo_memfd_create("halo-flight", HALO_REMOTE_FLIGHT_BYTES, &memfd);
  if (!status) status = halo_memfd_seal(memfd, HALO_SEALS_FIXED_SIZE);
  if (!status) {
    status = halo_memfd_map(memfd, HALO_REMOTE_FLIGHT_BYTES,
                            PROT_READ | PROT_WRITE, &pointer);
  }
  if (!status) {
    halo_remote_flight_t *flight = pointer;
    flight->capacity = HALO_REMOTE_FLIGHT_ENTRIES;
    // Every message from RING_FLIGHT on is counted in the table (the
    // worker's ring loop looks at the count, not the socket).
    halo_remote_part_t part = {NULL, 0};
    status = halo_remote_link_send_counted(&device->link, &flight->link_sent,
                                           HALO_REMOTE_RING_FLIGHT, 0, &part, 0,
                                           memfd);
  }
  if (memfd >= 0) close(memfd);
  if (status) {
    HALO_LOG_WARN("%s: no flight table (%s): its rings stay with halod",
                  device->label, halo_status_message(status));
    halo_status_free(status);
    halo_remote_link_stop_counting(&device->link);
    if (pointer) munmap(pointer, HALO_REMOTE_FLIGHT_BYTES);
    return;
  }
  device->flight = pointer;
}

// The reader thread: replies, completions, the end of the worker.
static void *halo_hal_remote_reader_main(void *argument) {
  halo_hal_remote_device_t *device = argument;
  char lost_message[256] = "";
  // A worker stopped halfway through a message (a large report whose send
  // blocked, then SIGSTOP or a freeze) leaves the reader in recvmsg, where
  // it looks at no silence: a receive (READY's too) waits at most the
  // silence bound.
  struct timeval receive_timeout = {
      .tv_sec = (time_t)(device->hang_ns / 1000000000),
      .tv_usec = (suseconds_t)(device->hang_ns % 1000000000 / 1000)};
  if (setsockopt(device->link.fd, SOL_SOCKET, SO_RCVTIMEO, &receive_timeout,
                 sizeof(receive_timeout)) != 0) {
    HALO_LOG_WARN("%s: the link's receive timeout: %s", device->label,
                  strerror(errno));
  }
  halo_status_t started =
      halo_hal_remote_await_ready(device, device->start_timeout_ns);
  pthread_mutex_lock(&device->mutex);
  if (started) {
    device->start_failure = started;
    device->lost = true;
    snprintf(device->lost_reason, sizeof(device->lost_reason), "%s",
             halo_status_message(started));
  } else {
    device->ready = true;
    halo_hal_remote_share_flight(device);
  }
  device->heard_ns = halo_clock_now_ns();
  pthread_cond_broadcast(&device->cond);
  pthread_mutex_unlock(&device->mutex);
  if (started) {
    // Nothing ran on it: no loss to report. It goes with its last reference.
    if (device->pid > 0) kill(device->pid, SIGKILL);
    char cause[256];
    halo_hal_remote_reap(device, cause, sizeof(cause));
    pthread_mutex_lock(&device->mutex);
    while (!device->closing) pthread_cond_wait(&device->cond, &device->mutex);
    pthread_mutex_unlock(&device->mutex);
    halo_hal_remote_device_free(device);
    return NULL;
  }
  // After a message the reader polls |poll_ns| for the next before it sleeps,
  // where the gap before that message or the one before it (from the end of
  // handling the message before) was within the window
  // (halo_clock_gaps_spin_ns): one completion a millisecond costs a
  // wake-up each, not a poll window each. Idle, it wakes every 20 ms to
  // watch the submission deadline (where one is set), else every
  // HALO_REMOTE_SILENCE_CHECK_MS to watch the worker's silence; a message
  // ends the wait at once either way.
  halo_clock_gaps_t gaps = {0, 0, 0};
  int64_t turn_ns = halo_clock_now_ns();
  for (;;) {
    int timeout_ms =
        device->deadline_ns > 0 ? 20 : HALO_REMOTE_SILENCE_CHECK_MS;
    int64_t spin_ns = halo_clock_gaps_spin_ns(&gaps, device->poll_ns);
    int64_t wait_start_ns = halo_clock_now_ns();
    bool got = halo_remote_link_wait(&device->link, spin_ns, timeout_ms);
    int64_t arrived_ns = halo_clock_now_ns();
    int64_t turn_start_ns = turn_ns;
    turn_ns = arrived_ns;
    // A wait that ended far past its timeout (a message waiting at a thaw
    // ends it late just the same): this process was stopped or frozen, its
    // workers most likely with it, and that time does not count against
    // their executions' submission deadline. The wait alone: a long turn
    // of the reader's own (a large reply's receive) is not a freeze, and
    // forgiving it would let a client's large reads put off the deadline.
    int64_t wait_late_ns =
        arrived_ns - wait_start_ns - (int64_t)timeout_ms * 1000000 - spin_ns;
    if (wait_late_ns > HALO_REMOTE_HELD_UP_NS) {
      halo_hal_remote_held_up(device, arrived_ns, wait_late_ns);
    }
    if (!got) {
      // A turn (the last message's handling and this wait) that took far
      // longer than the wait's timeout: held up as above. Only the time it
      // was held up is not the worker's silence: one resumed after halod
      // has its bound to speak again, and a reader late on every turn (a
      // swapping host) still finds a stopped worker.
      int64_t late_ns =
          arrived_ns - turn_start_ns - (int64_t)timeout_ms * 1000000 - spin_ns;
      if (late_ns > HALO_REMOTE_HELD_UP_NS) {
        device->heard_ns += late_ns;
        if (device->heard_ns > arrived_ns) device->heard_ns = arrived_ns;
      }
      halo_hal_remote_watchdog(device);
      halo_hal_remote_check_silence(device);
      continue;
    }
    halo_clock_gaps_arrived(&gaps, arrived_ns);
    device->heard_ns = arrived_ns;
    halo_remote_header_t header;
    void *payload = NULL;
    int fd = -1;
    halo_status_t status =
        halo_remote_link_receive(&device->link, &header, &payload, &fd);
    if (fd >= 0) close(fd);
    if (status) {
      // The receive's timeout: the rest of the message never came.
      if (halo_status_code(status) == HALO_STATUS_DEADLINE_EXCEEDED) {
        halo_hal_remote_kill_silent(device,
                                    "stopped in the middle of a message",
                                    halo_clock_now_ns() - arrived_ns);
      }
      halo_status_free(status);
      break;
    }
    if (header.type == HALO_REMOTE_RING_BOUNCE ||
        header.type == HALO_REMOTE_RING_COMPLETE ||
        header.type == HALO_REMOTE_RING_RELEASED ||
        header.type == HALO_REMOTE_RING_REFUSED) {
      if (device->ring_fn) {
        device->ring_fn(device->ring_user_data, &device->base, header.type,
                        payload, header.length);
        payload = NULL;
      }
    } else if (header.type == HALO_REMOTE_REPLY) {
      halo_hal_remote_on_reply(device, &header, payload);
    } else if (header.type == HALO_REMOTE_COMPLETE) {
      halo_hal_remote_on_complete(device, &header, payload);
    } else if (header.type == HALO_REMOTE_USAGE) {
      halo_hal_remote_on_usage(device, &header, payload);
    } else if (header.type == HALO_REMOTE_ALIVE) {
      // Liveness only: |heard_ns| above.
    } else if (header.type == HALO_REMOTE_LOST) {
      snprintf(lost_message, sizeof(lost_message), "%.*s", (int)header.length,
               payload ? (const char *)payload : "");
    }
    free(payload);
    if (device->deadline_ns > 0) halo_hal_remote_watchdog(device);
    gaps.done_ns = halo_clock_now_ns();
  }
  char cause[256];
  pid_t pid = device->pid;
  halo_hal_remote_reap(device, cause, sizeof(cause));
  pthread_mutex_lock(&device->mutex);
  bool releasing = device->releasing;
  bool deadline = device->deadline_fired;
  char hung[sizeof(device->hung_reason)];
  memcpy(hung, device->hung_reason, sizeof(hung));
  // The reference handed to the lost callback.
  if (!releasing && device->lost_fn) ++device->references;
  pthread_mutex_unlock(&device->mutex);
  if (!releasing) {
    char text[640];
    if (lost_message[0]) {
      snprintf(text, sizeof(text), "lost the device (%s) and %s", lost_message,
               cause);
    } else if (deadline) {
      snprintf(text, sizeof(text),
               "was killed by the watchdog: an execution ran past the "
               "submission deadline of %lld ms",
               (long long)(device->deadline_ns / 1000000));
    } else if (hung[0]) {
      snprintf(text, sizeof(text), "%s: halod killed it as hung (%s)", cause,
               hung);
    } else {
      snprintf(text, sizeof(text), "%s", cause);
    }
    halo_hal_remote_mark_lost(device, pid, text);
    if (device->lost_fn) {
      // Its owner logs the loss, in one line with what it knows more
      // (halod: the submissions in flight).
      device->lost_fn(device->lost_user_data, &device->base);
    } else {
      HALO_LOG_ERROR("%s", device->lost_reason);
      halo_hal_remote_device_complete_lost(&device->base);
    }
  } else {
    halo_hal_remote_mark_lost(device, pid, "was stopped");
  }
  // Objects may live on after the loss: the device goes with the last.
  pthread_mutex_lock(&device->mutex);
  while (!device->closing) pthread_cond_wait(&device->cond, &device->mutex);
  pthread_mutex_unlock(&device->mutex);
  halo_hal_remote_device_free(device);
  return NULL;
}

halo_status_t halo_hal_remote_device_start(
    const halo_hal_remote_options_t *options, halo_hal_device_t **out_device) {
  *out_device = NULL;
  halo_hal_remote_device_t *device = calloc(1, sizeof(*device));
  if (!device) return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  device->base.vtable = &halo_hal_remote_device_vtable;
  device->base.allocator = &device->allocator;
  device->allocator.vtable = &halo_hal_remote_allocator_vtable;
  device->references = 1;
  snprintf(device->label, sizeof(device->label), "%s",
           options->label ? options->label : "device");
  device->deadline_ns = options->deadline_ns;
  device->hang_ns =
      options->hang_ns > 0 ? options->hang_ns : HALO_REMOTE_DEFAULT_HANG_NS;
  device->call_ns = device->hang_ns > HALO_REMOTE_CALL_MIN_NS
                        ? device->hang_ns
                        : HALO_REMOTE_CALL_MIN_NS;
  device->create_executable_ns =
      options->compile_ns + HALO_REMOTE_COMPILE_MARGIN_NS >
              HALO_REMOTE_COMPILE_TIMEOUT_NS
          ? options->compile_ns + HALO_REMOTE_COMPILE_MARGIN_NS
          : HALO_REMOTE_COMPILE_TIMEOUT_NS;
  device->poll_ns = options->poll_ns;
  device->lost_fn = options->lost;
  device->lost_user_data = options->lost_user_data;
  device->ring_fn = options->ring;
  device->ring_user_data = options->ring_user_data;
  pthread_mutex_init(&device->mutex, NULL);
  halo_clock_cond_initialize(&device->cond);
  halo_u64_map_initialize(&device->executions);
  halo_u64_map_initialize(&device->registrations);
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    halo_status_t status = halo_status_from_errno(
        errno, "%s: socketpair for a worker", device->label);
    halo_remote_link_initialize(&device->link, -1);
    halo_hal_remote_device_free(device);
    return status;
  }
  halo_remote_link_initialize(&device->link, pair[0]);
  // A worker that reads nothing for as long as a control call may take
  // (call_ns) is hung: a send to it fails then (and shuts the link down,
  // so that its reader reaps it) instead of holding the link, and every thread
  // that sends to it, for as long as it stays stopped.
  halo_status_t limited =
      halo_remote_link_limit_sends(&device->link, device->call_ns);
  if (limited) {
    HALO_LOG_WARN("%s: %s; sends to the worker are not bounded", device->label,
                  halo_status_message(limited));
    halo_status_free(limited);
  }
  // What is posted to it waits in the link's outbox for as long; past that,
  // or past the outbox's bound, it is killed as hung.
  halo_remote_link_on_hung(&device->link, halo_hal_remote_on_hung, device);
  // The child gets its end as descriptor 3 (dup2 clears CLOEXEC).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pair[1], 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The worker must not take the supervisor's signal dispositions or mask:
  // libuv blocks nothing, but start from defaults.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGHUP);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const char *program = options->program ? options->program : options->argv[0];
  int error = posix_spawn(&pid, program, &actions, &attr,
                          (char *const *)options->argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(pair[1]);
  if (error) {
    halo_status_t status = halo_status_from_errno(
        error, "%s: starting worker %s", device->label, program);
    halo_hal_remote_device_free(device);
    return status;
  }
  device->pid = pid;
  device->start_timeout_ns =
      options->start_timeout_ns > 0 ? options->start_timeout_ns : 30000000000ll;
  halo_status_t status = NULL;
  error = pthread_create(&device->reader, NULL, halo_hal_remote_reader_main,
                         device);
  if (error) {
    status = halo_status_from_errno(error, "%s: a worker reader thread",
                                    device->label);
  }
  if (status) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    halo_hal_remote_device_free(device);
    return status;
  }
  pthread_detach(device->reader);
  pthread_mutex_lock(&halo_hal_remote_live.mutex);
  device->counted = true;
  ++halo_hal_remote_live.count;
  pthread_mutex_unlock(&halo_hal_remote_live.mutex);
  *out_device = &device->base;
  return NULL;
}

halo_status_t halo_hal_remote_device_wait_ready(
    halo_hal_device_t *base_device) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  pthread_mutex_lock(&device->mutex);
  while (!device->ready && !device->lost) {
    pthread_cond_wait(&device->cond, &device->mutex);
  }
  halo_status_t status =
      device->start_failure
          ? halo_status_make(halo_status_code(device->start_failure), "%s",
                             halo_status_message(device->start_failure))
      : device->lost ? halo_hal_remote_lost_status(device)
                     : NULL;
  pthread_mutex_unlock(&device->mutex);
  return status;
}

bool halo_hal_remote_device_is_ready(halo_hal_device_t *base_device) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  pthread_mutex_lock(&device->mutex);
  bool ready = device->ready && !device->lost;
  pthread_mutex_unlock(&device->mutex);
  return ready;
}

halo_status_t halo_hal_remote_device_create(
    const halo_hal_remote_options_t *options, halo_hal_device_t **out_device) {
  HALO_RETURN_IF_ERROR(halo_hal_remote_device_start(options, out_device));
  halo_status_t status = halo_hal_remote_device_wait_ready(*out_device);
  if (status) {
    (*out_device)->vtable->destroy(*out_device);
    *out_device = NULL;
  }
  return status;
}

void halo_hal_remote_device_set_label(halo_hal_device_t *base_device,
                                      const char *label) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  pthread_mutex_lock(&device->mutex);
  snprintf(device->label, sizeof(device->label), "%s", label);
  pthread_mutex_unlock(&device->mutex);
}

pid_t halo_hal_remote_device_pid(halo_hal_device_t *base_device) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  pthread_mutex_lock(&device->mutex);
  pid_t pid = device->pid;
  pthread_mutex_unlock(&device->mutex);
  return pid;
}

bool halo_hal_remote_device_lost(halo_hal_device_t *base_device,
                                 char *out_reason, size_t capacity) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  // A link the worker hung up is a loss its reader is about to report
  // (it reaps the worker first): wait for that, briefly.
  struct pollfd poll_fd = {.fd = device->link.fd, .events = POLLRDHUP};
  bool hung_up = poll(&poll_fd, 1, 0) == 1 &&
                 (poll_fd.revents & (POLLRDHUP | POLLHUP | POLLERR));
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += 3;
  pthread_mutex_lock(&device->mutex);
  while (hung_up && !device->lost &&
         pthread_cond_timedwait(&device->cond, &device->mutex, &deadline) !=
             ETIMEDOUT) {
  }
  bool lost = device->lost;
  if (out_reason && capacity) {
    snprintf(out_reason, capacity, "%s", lost ? device->lost_reason : "");
  }
  pthread_mutex_unlock(&device->mutex);
  return lost;
}

uint32_t halo_hal_remote_device_in_flight(halo_hal_device_t *base_device) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  pthread_mutex_lock(&device->mutex);
  uint32_t count = (uint32_t)device->executions.count;
  pthread_mutex_unlock(&device->mutex);
  return count;
}

void halo_hal_remote_device_visit_in_flight(halo_hal_device_t *base_device,
                                            void (*visit)(void *visit_data,
                                                          void *user_data,
                                                          bool overdue),
                                            void *visit_data) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  pthread_mutex_lock(&device->mutex);
  for (size_t i = 0; i < device->executions.capacity; ++i) {
    if (!device->executions.entries[i].key) continue;
    const halo_hal_remote_execution_t *record =
        device->executions.entries[i].value;
    visit(visit_data, record->user_data, record->overdue);
  }
  pthread_mutex_unlock(&device->mutex);
}

// UNAVAILABLE unless |device|'s worker is alive and takes rings (its
// flight table was sent).
static halo_status_t halo_hal_remote_device_check_rings(
    halo_hal_remote_device_t *device) {
  pthread_mutex_lock(&device->mutex);
  bool usable = !device->lost && device->flight;
  pthread_mutex_unlock(&device->mutex);
  if (usable) return NULL;
  return halo_status_make(HALO_STATUS_UNAVAILABLE,
                          "%s: the worker is lost or takes no rings",
                          device->label);
}

halo_status_t halo_hal_remote_device_send(halo_hal_device_t *base_device,
                                          uint32_t type, const void *payload,
                                          size_t length, const void *tail,
                                          size_t tail_length, int fd) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  HALO_RETURN_IF_ERROR(halo_hal_remote_device_check_rings(device));
  halo_remote_part_t parts[2] = {{payload, length}, {tail, tail_length}};
  halo_status_t status =
      halo_remote_link_post(&device->link, type, 0, parts, 2, fd);
  return status ? halo_hal_remote_send_failed(device, status) : NULL;
}

halo_status_t halo_hal_remote_device_ring_detach(halo_hal_device_t *base_device,
                                                 uint64_t session,
                                                 uint64_t *out_head,
                                                 uint64_t *out_sequence) {
  *out_head = 0;
  *out_sequence = 0;
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  HALO_RETURN_IF_ERROR(halo_hal_remote_device_check_rings(device));
  halo_remote_ring_session_t detach = {.session = session};
  halo_remote_part_t part = {&detach, sizeof(detach)};
  uint64_t values[2] = {0, 0};
  HALO_RETURN_IF_ERROR(halo_hal_remote_call(device, HALO_REMOTE_RING_DETACH,
                                            &part, 1, -1, device->call_ns,
                                            values, NULL, 0));
  *out_head = values[0];
  *out_sequence = values[1];
  return NULL;
}

bool halo_hal_remote_device_locate_slot(halo_hal_device_t *base_device,
                                        const void *slot, uint64_t *out_key,
                                        uint64_t *out_offset) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  halo_remote_signal_t signal = {0};
  pthread_mutex_lock(&device->mutex);
  halo_hal_remote_locate_slot(device, slot, &signal);
  pthread_mutex_unlock(&device->mutex);
  *out_key = signal.slot_key;
  *out_offset = signal.slot_offset;
  return signal.slot_key != 0;
}

uint64_t halo_hal_remote_queue_id(const halo_hal_queue_t *queue) {
  if (queue->vtable != &halo_hal_remote_queue_vtable) return 0;
  return ((const halo_hal_remote_queue_t *)queue)->remote.id;
}

uint64_t halo_hal_remote_command_buffer_id(
    const halo_hal_command_buffer_t *command_buffer) {
  if (command_buffer->vtable != &halo_hal_remote_command_buffer_vtable) {
    return 0;
  }
  return ((const halo_hal_remote_command_buffer_t *)command_buffer)->remote.id;
}

bool halo_hal_remote_device_flight_overdue(halo_hal_device_t *base_device,
                                           int64_t issued_ns) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  pthread_mutex_lock(&device->mutex);
  bool overdue =
      device->deadline_fired && device->deadline_ns > 0 &&
      halo_hal_remote_past_deadline(device, issued_ns, device->deadline_at);
  pthread_mutex_unlock(&device->mutex);
  return overdue;
}

void halo_hal_remote_device_visit_flight(
    halo_hal_device_t *base_device,
    void (*visit)(void *visit_data, uint64_t id,
                  const struct halo_remote_flight_entry_t *entry),
    void *visit_data) {
  halo_hal_remote_device_t *device = halo_hal_remote_device_cast(base_device);
  halo_remote_flight_t *flight = device->flight;
  if (!flight) return;
  for (uint32_t i = 0; i < HALO_REMOTE_FLIGHT_ENTRIES; ++i) {
    halo_remote_flight_entry_t *entry = &flight->entries[i];
    uint64_t id = atomic_load_explicit(&entry->id, memory_order_acquire);
    if (!id) continue;
    visit(visit_data, id, entry);
  }
}

void halo_hal_remote_device_kill(halo_hal_device_t *base_device) {
  pid_t pid = halo_hal_remote_device_pid(base_device);
  if (pid > 0) kill(pid, SIGKILL);
}
