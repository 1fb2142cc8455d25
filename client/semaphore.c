// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// libhalo semaphores: the state is read from the daemon's read-only page;
// waits never talk to the daemon; signal and fail do.
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/timeline.h"

struct halo_semaphore_s {
  halo_object_link_t link;  // first: halo_client_close walks links
  halo_client_t *client;
  uint64_t handle;
  uint64_t page_id;
  uint32_t generation;
  const halo_timeline_slot_t *slot;
  // Its failure's message, once read from halod (a failure is for good):
  // later waits and queries say it without asking again. Set once.
  _Atomic(char *) failure_message;
};

static halo_status_t halo_semaphore_from_reply(
    halo_client_t *client, const halo_wire_response_t *response,
    halo_semaphore_t **out_semaphore) {
  if (response->body_case != HALO__WIRE__RESPONSE__BODY_SEMAPHORE ||
      response->semaphore->slot >= HALO_TIMELINE_SLOTS_PER_PAGE) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "halod answered with no valid semaphore");
  }
  const Halo__Wire__SemaphoreReply *reply = response->semaphore;
  halo_semaphore_t *semaphore = calloc(1, sizeof(*semaphore));
  if (!semaphore) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
  }
  semaphore->client = client;
  semaphore->handle = reply->handle;
  semaphore->page_id = reply->page_id;
  semaphore->generation = reply->generation;
  void *page = NULL;
  halo_status_t status = halo_client_map_page(client, reply->page_id, &page);
  if (!status && ((const halo_timeline_page_t *)page)->header.magic !=
                     HALO_TIMELINE_PAGE_MAGIC) {
    halo_client_unmap_page(client, reply->page_id);
    status = halo_status_make(HALO_STATUS_INTERNAL,
                              "semaphore page %llu has no timeline header",
                              (unsigned long long)reply->page_id);
  }
  if (status) {
    Halo__Wire__SemaphoreRelease release = HALO__WIRE__SEMAPHORE_RELEASE__INIT;
    release.handle = semaphore->handle;
    Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
    request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_RELEASE;
    request.semaphore_release = &release;
    halo_status_free(halo_client_call_status(client, &request));
    free(semaphore);
    return status;
  }
  semaphore->slot = &((const halo_timeline_page_t *)page)->slots[reply->slot];
  halo_client_track(client, &semaphore->link, HALO_OBJECT_SEMAPHORE);
  *out_semaphore = semaphore;
  return NULL;
}

halo_status_t halo_semaphore_create(halo_client_t *client,
                                    uint64_t initial_value, uint32_t flags,
                                    halo_semaphore_t **out_semaphore) {
  HALO_CHECK_ARG(out_semaphore, "out_semaphore must not be NULL");
  *out_semaphore = NULL;
  HALO_CHECK_ARG(client, "client must not be NULL");
  HALO_CHECK_ARG((flags & ~HALO_OBJECT_FLAG_EXPORTABLE) == 0,
                 "unknown semaphore flags 0x%x", flags);
  HALO_CHECK_ARG(initial_value <= HALO_SEMAPHORE_MAX_VALUE,
                 "initial value %llu is >= 2^63",
                 (unsigned long long)initial_value);
  Halo__Wire__SemaphoreCreate create = HALO__WIRE__SEMAPHORE_CREATE__INIT;
  create.initial_value = initial_value;
  create.has_flags = true;
  create.flags = flags;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_CREATE;
  request.semaphore_create = &create;
  halo_wire_response_t *response;
  HALO_RETURN_IF_ERROR(halo_client_call(client, &request, &response));
  halo_status_t status =
      halo_semaphore_from_reply(client, response, out_semaphore);
  halo__wire__response__free_unpacked(response, NULL);
  return status;
}

void halo_semaphore_release_link(halo_object_link_t *link) {
  halo_semaphore_t *semaphore = (halo_semaphore_t *)link;
  halo_client_t *client = semaphore->client;
  halo_client_untrack(client, &semaphore->link);
  Halo__Wire__SemaphoreRelease release = HALO__WIRE__SEMAPHORE_RELEASE__INIT;
  release.handle = semaphore->handle;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_RELEASE;
  request.semaphore_release = &release;
  halo_status_free(halo_client_call_status(client, &request));
  halo_client_unmap_page(client, semaphore->page_id);
  free(atomic_load(&semaphore->failure_message));
  free(semaphore);
}

void halo_semaphore_release(halo_semaphore_t *semaphore) {
  if (semaphore) halo_semaphore_release_link(&semaphore->link);
}

uint64_t halo_semaphore_handle(const halo_semaphore_t *semaphore) {
  return semaphore ? semaphore->handle : 0;
}

halo_client_t *halo_semaphore_client(const halo_semaphore_t *semaphore) {
  return semaphore->client;
}

const halo_timeline_slot_t *halo_semaphore_slot(
    const halo_semaphore_t *semaphore) {
  return semaphore->slot;
}

// The name of a CUDA driver error that loses a device (a sticky error), or
// NULL: libhalo links no CUDA, so the few that matter are listed here.
static const char *halo_semaphore_cuda_error_name(int32_t result) {
  switch (result) {
    case 214:
      return "CUDA_ERROR_ECC_UNCORRECTABLE";
    case 220:
      return "CUDA_ERROR_NVLINK_UNCORRECTABLE";
    case 700:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 702:
      return "CUDA_ERROR_LAUNCH_TIMEOUT";
    case 710:
      return "CUDA_ERROR_ASSERT";
    case 714:
      return "CUDA_ERROR_HARDWARE_STACK_ERROR";
    case 715:
      return "CUDA_ERROR_ILLEGAL_INSTRUCTION";
    case 716:
      return "CUDA_ERROR_MISALIGNED_ADDRESS";
    case 717:
      return "CUDA_ERROR_INVALID_ADDRESS_SPACE";
    case 718:
      return "CUDA_ERROR_INVALID_PC";
    case 719:
      return "CUDA_ERROR_LAUNCH_FAILED";
    default:
      return NULL;
  }
}

// A lost device's failure, from the slot alone: the daemon is exiting and
// answers nothing (its log has the whole story).
static halo_status_t halo_semaphore_device_lost_status(
    const halo_timeline_failure_info_t *info) {
  char error[96];
  const char *name = halo_semaphore_cuda_error_name(info->detail);
  if (name) {
    snprintf(error, sizeof(error), "%s (%d), a sticky error", name,
             (int)info->detail);
  } else if (info->detail != 0) {
    snprintf(error, sizeof(error), "CUDA error %d, a sticky error",
             (int)info->detail);
  } else {
    snprintf(error, sizeof(error), "a sticky CUDA error");
  }
  return halo_status_make(
      HALO_STATUS_DEVICE_LOST,
      "semaphore failed: device %u lost: %s poisoned its context, with %u "
      "submission(s) of any client in flight on it (the fault is in one of "
      "them); halod restarts: reconnect and rebuild your objects. The "
      "daemon log (journalctl -u halod) names the submissions in flight",
      info->device, error, info->count);
}

// Why a semaphore whose creating session an administrator killed failed.
static halo_status_t halo_semaphore_killed_status(
    const halo_timeline_failure_info_t *info) {
  return halo_status_make(
      HALO_STATUS_ABORTED,
      "semaphore failed: the session that created it (pid %d) was killed by "
      "an administrator (haloctl kill-client)",
      (int)info->detail);
}

// A wait or query that found |semaphore|'s slot retired (the semaphore
// destroyed). haloctl kill-client fails the session's semaphores and ends
// the session at once, so its own waiters often see the slot retired
// rather than failed: the slot still says why.
static halo_status_t halo_semaphore_retired_status(halo_semaphore_t *semaphore,
                                                   const char *when) {
  uint64_t value;
  int32_t failure;
  halo_timeline_slot_read(semaphore->slot, semaphore->generation, UINT64_MAX,
                          &value, &failure);
  halo_timeline_failure_info_t info =
      halo_timeline_slot_failure_info(semaphore->slot);
  if (failure == HALO_STATUS_ABORTED &&
      info.reason == HALO_TIMELINE_FAILURE_SESSION_KILLED) {
    return halo_semaphore_killed_status(&info);
  }
  return halo_status_make(HALO_STATUS_ABORTED,
                          "semaphore handle 0x%llx was destroyed%s",
                          (unsigned long long)semaphore->handle, when);
}

// How long a wait whose own timeout has run out (a poll), or a query, still
// gives the lookup of a failure's message: a halod that answers does within
// a millisecond (a busy loop within this), and one that does not (stopped)
// costs the poll this, not the request timeout.
#define HALO_SEMAPHORE_MESSAGE_FLOOR_NS 100000000

// The failure status of |semaphore|: asks the daemon for the message (one
// round trip, the first time only: it is kept), until |deadline_ns| (a
// wait's, or now for a query) extended to at least
// HALO_SEMAPHORE_MESSAGE_FLOOR_NS from now, and within the request timeout;
// falls back to the code alone.
// A lost device's failure and halod's stop are told from the slot, without
// asking (the daemon is exiting).
static halo_status_t halo_semaphore_failure_status(halo_semaphore_t *semaphore,
                                                   int32_t failure,
                                                   int64_t deadline_ns) {
  halo_status_code_t code = (unsigned)failure < HALO_STATUS_CODE_COUNT
                                ? (halo_status_code_t)failure
                                : HALO_STATUS_UNKNOWN;
  halo_timeline_failure_info_t info =
      halo_timeline_slot_failure_info(semaphore->slot);
  if (code == HALO_STATUS_DEVICE_LOST &&
      info.reason == HALO_TIMELINE_FAILURE_DEVICE_LOST) {
    return halo_semaphore_device_lost_status(&info);
  }
  if (code == HALO_STATUS_ABORTED &&
      info.reason == HALO_TIMELINE_FAILURE_SESSION_KILLED) {
    return halo_semaphore_killed_status(&info);
  }
  if (code == HALO_STATUS_UNAVAILABLE &&
      info.reason == HALO_TIMELINE_FAILURE_DAEMON_STOPPING) {
    return halo_status_make(
        HALO_STATUS_UNAVAILABLE,
        "semaphore failed: halod is stopping (SIGTERM: a stop or restart); "
        "reconnect once it is back and rebuild your objects");
  }
  const char *kept = atomic_load(&semaphore->failure_message);
  if (kept) return halo_status_make(code, "semaphore failed: %s", kept);
  Halo__Wire__SemaphoreQuery query = HALO__WIRE__SEMAPHORE_QUERY__INIT;
  query.handle = semaphore->handle;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_QUERY;
  request.semaphore_query = &query;
  halo_wire_response_t *response = NULL;
  int64_t floor_ns = halo_clock_now_ns() + HALO_SEMAPHORE_MESSAGE_FLOOR_NS;
  if (deadline_ns < floor_ns) deadline_ns = floor_ns;
  halo_status_t status = halo_client_call_until(semaphore->client, &request,
                                                deadline_ns, &response);
  halo_status_t result;
  if (!status &&
      response->body_case == HALO__WIRE__RESPONSE__BODY_SEMAPHORE_QUERY &&
      response->semaphore_query->failure_message) {
    const char *message = response->semaphore_query->failure_message;
    result = halo_status_make(code, "semaphore failed: %s", message);
    char *copy = strdup(message);
    char *expected = NULL;
    if (copy && !atomic_compare_exchange_strong(&semaphore->failure_message,
                                                &expected, copy)) {
      free(copy);  // another thread kept it first
    }
  } else {
    result = halo_status_make(code, "semaphore failed with %s",
                              halo_status_code_name(code));
  }
  halo_status_free(status);
  if (response) halo__wire__response__free_unpacked(response, NULL);
  return result;
}

// Which of |clients|' halods has exited (its pidfd is readable), or NULL.
// A wait that timed out asks (halo_semaphore_wait_list), as does a query,
// and a consumer polling with timeout 0 in a tight loop would pay a system
// call per poll (about 0.5 us, three times the poll itself): while its
// connection stands, a thread asks of a client at most once a millisecond,
// so a death is seen within a millisecond of polling; once the connection
// is lost (nng's pipe removal, or a death seen here, which marks it lost:
// every later call fails at once), every time.
// |now|: ask each client at once (a wait saw a pidfd readable).
static halo_client_t *halo_semaphore_exited_daemon(
    halo_client_t *const *clients, size_t count, bool now) {
  static _Thread_local int64_t asked_ns;
  int64_t now_ns = halo_clock_now_ns();
  bool ask_all = now || asked_ns == 0 || now_ns - asked_ns >= 1000000;
  if (ask_all) asked_ns = now_ns;
  for (size_t i = 0; i < count; ++i) {
    halo_client_t *client = clients[i];
    if (client->daemon_pidfd < 0) continue;
    if (!ask_all && !atomic_load(&client->lost)) continue;
    if (!halo_client_daemon_exited(client)) continue;
    atomic_store(&client->lost, true);
    return client;
  }
  return NULL;
}

// UNAVAILABLE: |client|'s halod exited during a wait on |semaphores|;
// *|out_index| (may be NULL) is its first semaphore's.
static halo_status_t halo_semaphore_daemon_exited_status(
    size_t count, halo_semaphore_t *const *semaphores,
    const halo_client_t *client, size_t *out_index) {
  size_t index = 0;
  while (index + 1 < count && semaphores[index]->client != client) ++index;
  if (out_index) *out_index = index;
  return halo_status_make(HALO_STATUS_UNAVAILABLE,
                          "halod (pid %d) exited while waiting (semaphore "
                          "handle 0x%llx)",
                          (int)client->daemon_pid,
                          (unsigned long long)semaphores[index]->handle);
}

halo_status_t halo_semaphore_query(halo_semaphore_t *semaphore,
                                   uint64_t *out_value) {
  HALO_CHECK_ARG(out_value, "out_value must not be NULL");
  *out_value = 0;
  HALO_CHECK_ARG(semaphore, "semaphore must not be NULL");
  uint64_t value;
  int32_t failure;
  halo_timeline_wait_result_t result = halo_timeline_slot_read(
      semaphore->slot, semaphore->generation, UINT64_MAX, &value, &failure);
  *out_value = value;
  if (result == HALO_TIMELINE_WAIT_RETIRED) {
    return halo_semaphore_retired_status(semaphore, "");
  }
  if (result == HALO_TIMELINE_WAIT_FAILED) {
    return halo_semaphore_failure_status(semaphore, failure,
                                         halo_clock_now_ns());
  }
  // A halod that died (SIGKILL, a crash) failed nothing: the slot keeps
  // the last value it wrote, which no one will ever change. Say so, as a
  // wait does, rather than give that value as the current one.
  if (halo_semaphore_exited_daemon(&semaphore->client, 1, false)) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE,
                            "halod (pid %d) exited; the value %llu is the "
                            "last it wrote",
                            (int)semaphore->client->daemon_pid,
                            (unsigned long long)value);
  }
  return NULL;
}

halo_status_t halo_semaphore_signal(halo_semaphore_t *semaphore,
                                    uint64_t value) {
  HALO_CHECK_ARG(semaphore, "semaphore must not be NULL");
  bool used = false;
  halo_status_t status = halo_client_ring_signal(
      semaphore->client, semaphore->handle, value, &used);
  if (used || status) return status;
  Halo__Wire__SemaphoreSignal signal = HALO__WIRE__SEMAPHORE_SIGNAL__INIT;
  signal.handle = semaphore->handle;
  signal.value = value;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_SIGNAL;
  request.semaphore_signal = &signal;
  return halo_client_call_status(semaphore->client, &request);
}

halo_status_t halo_semaphore_fail(halo_semaphore_t *semaphore,
                                  halo_status_code_t code,
                                  const char *message) {
  HALO_CHECK_ARG(semaphore, "semaphore must not be NULL");
  HALO_CHECK_ARG(
      code != HALO_STATUS_OK && (unsigned)code < HALO_STATUS_CODE_COUNT,
      "fail code %d is not a failure status code", (int)code);
  Halo__Wire__SemaphoreFail fail = HALO__WIRE__SEMAPHORE_FAIL__INIT;
  fail.handle = semaphore->handle;
  fail.code = (int32_t)code;
  fail.message = (char *)(message ? message : "");
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_FAIL;
  request.semaphore_fail = &fail;
  return halo_client_call_status(semaphore->client, &request);
}

halo_status_t halo_semaphore_wait_list(size_t count,
                                       halo_semaphore_t *const *semaphores,
                                       const uint64_t *values,
                                       halo_wait_mode_t mode,
                                       int64_t timeout_ns, size_t *out_index) {
  if (out_index) *out_index = 0;
  HALO_CHECK_ARG(count <= HALO_WAIT_MAX_COUNT, "wait on %zu semaphores (0..%d)",
                 count, HALO_WAIT_MAX_COUNT);
  HALO_CHECK_ARG(mode == HALO_WAIT_ALL || mode == HALO_WAIT_ANY,
                 "wait mode %d is neither ALL nor ANY", (int)mode);
  // Nothing to wait for: an empty list is satisfied at once, in either mode.
  if (count == 0) return NULL;
  HALO_CHECK_ARG(semaphores, "semaphores must not be NULL");
  HALO_CHECK_ARG(values, "values must not be NULL");
  halo_timeline_wait_target_t targets[HALO_WAIT_MAX_COUNT];
  for (size_t i = 0; i < count; ++i) {
    HALO_CHECK_ARG(semaphores[i], "semaphores[%zu] is NULL", i);
    HALO_CHECK_ARG(values[i] <= HALO_SEMAPHORE_MAX_VALUE,
                   "values[%zu] = %llu is >= 2^63", i,
                   (unsigned long long)values[i]);
    targets[i].slot = semaphores[i]->slot;
    targets[i].generation = semaphores[i]->generation;
    targets[i].value = values[i];
  }
  // The clients of the semaphores, each once: a wait watches each one's
  // halod, whose death ends it with UNAVAILABLE (its semaphores would
  // never move again), as a wait on one semaphore does.
  halo_client_t *clients[HALO_WAIT_MAX_COUNT];
  size_t client_count = 0;
  for (size_t i = 0; i < count; ++i) {
    size_t known = 0;
    while (known < client_count && clients[known] != semaphores[i]->client) {
      ++known;
    }
    if (known == client_count) clients[client_count++] = semaphores[i]->client;
  }
  int pidfds[HALO_WAIT_MAX_COUNT];
  for (size_t i = 0; i < client_count; ++i) {
    pidfds[i] = clients[i]->daemon_pidfd;
  }
  int64_t deadline_ns = halo_clock_deadline_ns(timeout_ns);
  size_t index = 0;
  int32_t failure = 0;
  // The wait looks at every client's halod between its sleeps.
  halo_timeline_wait_result_t result = halo_timeline_wait_owners(
      targets, count, mode == HALO_WAIT_ANY, deadline_ns, pidfds, client_count,
      &index, &failure);
  if (out_index) *out_index = index;
  switch (result) {
    case HALO_TIMELINE_WAIT_OK:
      return NULL;
    case HALO_TIMELINE_WAIT_FAILED:
      return halo_semaphore_failure_status(semaphores[index], failure,
                                           deadline_ns);
    case HALO_TIMELINE_WAIT_RETIRED:
      return halo_semaphore_retired_status(semaphores[index], " while waiting");
    case HALO_TIMELINE_WAIT_TIMEOUT: {
      // A wait that ended within its spin (a poll, a short timeout) never
      // looked at the daemons: a dead one would give DEADLINE_EXCEEDED to
      // every such wait for ever.
      halo_client_t *exited =
          halo_semaphore_exited_daemon(clients, client_count, false);
      if (exited) {
        return halo_semaphore_daemon_exited_status(count, semaphores, exited,
                                                   out_index);
      }
      // The semaphores' signallers (work on a queue, another client), not
      // halod's answers, are what the wait waited for.
      if (count == 1) {
        return halo_status_make(
            HALO_STATUS_DEADLINE_EXCEEDED,
            "wait timed out after %lld ns: semaphore handle 0x%llx did not "
            "reach value %llu",
            (long long)timeout_ns, (unsigned long long)semaphores[0]->handle,
            (unsigned long long)values[0]);
      }
      return halo_status_make(
          HALO_STATUS_DEADLINE_EXCEEDED,
          "wait timed out after %lld ns: %s of the %zu semaphores reached "
          "its value",
          (long long)timeout_ns, mode == HALO_WAIT_ANY ? "none" : "not each",
          count);
    }
    case HALO_TIMELINE_WAIT_OWNER_DEAD: {
      // One of the pidfds was readable: whose.
      halo_client_t *exited =
          halo_semaphore_exited_daemon(clients, client_count, true);
      if (!exited) {
        exited = clients[0];
        atomic_store(&exited->lost, true);
      }
      return halo_semaphore_daemon_exited_status(count, semaphores, exited,
                                                 out_index);
    }
  }
  return halo_status_make(HALO_STATUS_INTERNAL, "unknown wait result");
}

halo_status_t halo_semaphore_wait(halo_semaphore_t *semaphore, uint64_t value,
                                  int64_t timeout_ns) {
  HALO_CHECK_ARG(semaphore, "semaphore must not be NULL");
  return halo_semaphore_wait_list(1, &semaphore, &value, HALO_WAIT_ALL,
                                  timeout_ns, NULL);
}

halo_status_t halo_semaphore_export(halo_semaphore_t *semaphore,
                                    halo_token_t *out_token) {
  HALO_CHECK_ARG(out_token, "out_token must not be NULL");
  memset(out_token, 0, sizeof(*out_token));
  HALO_CHECK_ARG(semaphore, "semaphore must not be NULL");
  Halo__Wire__Export body = HALO__WIRE__EXPORT__INIT;
  body.handle = semaphore->handle;
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_EXPORT;
  request.semaphore_export = &body;
  return halo_client_export(semaphore->client, &request, out_token);
}

halo_status_t halo_semaphore_import(halo_client_t *client,
                                    const halo_token_t *token,
                                    halo_semaphore_t **out_semaphore) {
  HALO_CHECK_ARG(out_semaphore, "out_semaphore must not be NULL");
  *out_semaphore = NULL;
  HALO_CHECK_ARG(client, "client must not be NULL");
  HALO_CHECK_ARG(token, "token must not be NULL");
  Halo__Wire__Import body = HALO__WIRE__IMPORT__INIT;
  body.token.data = (uint8_t *)token->bytes;
  body.token.len = sizeof(token->bytes);
  Halo__Wire__Request request = HALO__WIRE__REQUEST__INIT;
  request.body_case = HALO__WIRE__REQUEST__BODY_SEMAPHORE_IMPORT;
  request.semaphore_import = &body;
  halo_wire_response_t *response;
  HALO_RETURN_IF_ERROR(halo_client_call(client, &request, &response));
  halo_status_t status =
      halo_semaphore_from_reply(client, response, out_semaphore);
  halo__wire__response__free_unpacked(response, NULL);
  return status;
}
