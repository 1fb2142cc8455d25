// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "common/wire.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "common/clock.h"
#include "common/status.h"

halo_status_t halo_wire_pack(const ProtobufCMessage *message,
                             nng_msg **out_msg) {
  *out_msg = NULL;
  size_t size = protobuf_c_message_get_packed_size(message);
  nng_msg *msg;
  int rv = nng_msg_alloc(&msg, size);
  if (rv != 0) return halo_wire_status_from_nng(rv, "nng_msg_alloc");
  protobuf_c_message_pack(message, nng_msg_body(msg));
  *out_msg = msg;
  return NULL;
}

halo_status_t halo_wire_status_from_nng(int nng_error, const char *what) {
  halo_status_code_t code;
  switch (nng_error) {
    case NNG_ETIMEDOUT:
      code = HALO_STATUS_DEADLINE_EXCEEDED;
      break;
    case NNG_ECONNREFUSED:
    case NNG_ECONNSHUT:
    case NNG_ECONNRESET:
    case NNG_ECLOSED:
    case NNG_ENOENT:
    case NNG_ECONNABORTED:
      code = HALO_STATUS_UNAVAILABLE;
      break;
    case NNG_ECANCELED:
      code = HALO_STATUS_CANCELLED;
      break;
    case NNG_ENOMEM:
      code = HALO_STATUS_RESOURCE_EXHAUSTED;
      break;
    case NNG_EMSGSIZE:
    case NNG_EINVAL:
    case NNG_EADDRINVAL:
      code = HALO_STATUS_INVALID_ARGUMENT;
      break;
    case NNG_EPERM:
      code = HALO_STATUS_PERMISSION_DENIED;
      break;
    default:
      code = HALO_STATUS_INTERNAL;
      break;
  }
  return halo_status_make(code, "%s: %s", what, nng_strerror(nng_error));
}

halo_status_t halo_wire_dial_failed(int nng_error, const char *target,
                                    const char *denied, const char *absent) {
  const char *hint = nng_error == NNG_EPERM ? denied
                     : nng_error == NNG_ECONNREFUSED || nng_error == NNG_ENOENT
                         ? absent
                         : NULL;
  halo_status_t dial = halo_wire_status_from_nng(nng_error, "dial");
  halo_status_t status = halo_status_make(
      halo_status_code(dial), "%s: %s%s%s%s", target, halo_status_message(dial),
      hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
  halo_status_free(dial);
  return status;
}

void halo_wire_connection_lost(nng_pipe pipe, _Atomic bool *lost,
                               nng_aio *aio) {
  if (lost) atomic_store(lost, true);
  if (aio) nng_aio_abort(aio, NNG_ECONNSHUT);
  nng_dialer_close(nng_pipe_dialer(pipe));
}

static void halo_wire_on_pipe_removed(nng_pipe pipe, nng_pipe_ev event,
                                      void *arg) {
  (void)event;
  (void)arg;
  halo_wire_connection_lost(pipe, NULL, NULL);
}

int halo_wire_dial_once(nng_socket socket, const char *address,
                        nng_pipe_cb on_removed, void *arg) {
  nng_socket_set_ms(socket, NNG_OPT_RECONNMINT, 3600000);
  nng_socket_set_ms(socket, NNG_OPT_RECONNMAXT, 3600000);
  int rv = nng_pipe_notify(socket, NNG_PIPE_EV_REM_POST,
                           on_removed ? on_removed : halo_wire_on_pipe_removed,
                           on_removed ? arg : NULL);
  if (rv == 0) rv = nng_dial(socket, address, NULL, 0);
  return rv;
}

typedef struct halo_wire_dial_t {
  nng_socket socket;
  const char *address;
  nng_pipe_cb on_removed;
  void *arg;
  pthread_mutex_t mutex;
  pthread_cond_t finished;  // CLOCK_MONOTONIC
  bool done;                // under |mutex|
  int rv;
} halo_wire_dial_t;

static void *halo_wire_dial_main(void *argument) {
  halo_wire_dial_t *dial = argument;
  int rv = halo_wire_dial_once(dial->socket, dial->address, dial->on_removed,
                               dial->arg);
  pthread_mutex_lock(&dial->mutex);
  dial->rv = rv;
  dial->done = true;
  pthread_cond_signal(&dial->finished);
  pthread_mutex_unlock(&dial->mutex);
  return NULL;
}

int halo_wire_dial_within(nng_socket socket, const char *address,
                          nng_pipe_cb on_removed, void *arg, int64_t timeout_ns,
                          bool *out_timed_out) {
  *out_timed_out = false;
  halo_wire_dial_t dial = {.socket = socket,
                           .address = address,
                           .on_removed = on_removed,
                           .arg = arg};
  pthread_mutex_init(&dial.mutex, NULL);
  halo_clock_cond_initialize(&dial.finished);
  pthread_t thread;
  if (pthread_create(&thread, NULL, halo_wire_dial_main, &dial) != 0) {
    halo_wire_dial_main(&dial);
  } else {
    struct timespec deadline =
        halo_clock_timespec(halo_clock_deadline_ns(timeout_ns));
    pthread_mutex_lock(&dial.mutex);
    int error = 0;
    while (!dial.done && error != ETIMEDOUT) {
      error = pthread_cond_timedwait(&dial.finished, &dial.mutex, &deadline);
    }
    bool done = dial.done;
    pthread_mutex_unlock(&dial.mutex);
    if (!done) nng_close(socket);  // ends the dial, which then returns
    pthread_join(thread, NULL);
    if (!done) dial.rv = NNG_ETIMEDOUT;
    *out_timed_out = !done;
  }
  pthread_cond_destroy(&dial.finished);
  pthread_mutex_destroy(&dial.mutex);
  return dial.rv;
}

// Waits for the step just started on |aio|; see halo_wire_call for |lost|.
// The removal callback stores |lost| before it aborts, and this load comes
// after the step started: either it sees |lost|, or the abort comes after
// the start and ends the step.
static int halo_wire_wait(nng_aio *aio, const _Atomic bool *lost) {
  if (lost && atomic_load(lost)) nng_aio_abort(aio, NNG_ECONNSHUT);
  nng_aio_wait(aio);
  return nng_aio_result(aio);
}

// Where |deadline_ns| (CLOCK_MONOTONIC; 0: none) is set, the next step on
// |aio| gets what is left of it as its timeout (nng applies an aio's
// timeout to each operation anew); false once nothing is left.
static bool halo_wire_step_within(nng_aio *aio, int64_t deadline_ns) {
  if (deadline_ns == 0) return true;
  int64_t left_ms = (deadline_ns - halo_clock_now_ns() + 999999) / 1000000;
  if (left_ms <= 0) return false;
  nng_aio_set_timeout(aio, (nng_duration)left_ms);
  return true;
}

// The request message of halo_wire_call_once, packed in a frame of its own:
// the ASan tree's LeakSanitizer suppression for nng's defect names this
// function (tests/lsan.supp), so that no other allocation is covered.
__attribute__((noinline)) static halo_status_t halo_wire_pack_request(
    const halo_wire_request_t *request, nng_msg **out_msg) {
  halo_status_t status = halo_wire_pack(&request->base, out_msg);
  // Not a tail call: this frame stays on the stack while nng allocates
  // (the sanitizer's stack must show it).
  __asm__ volatile("" ::: "memory");
  return status;
}

// One round trip of halo_wire_call, each step within |deadline_ns| where
// set (halo_wire_step_within); *|out_retry_after_ms| is a refusal's
// retry_after_ms (0: none).
static halo_status_t halo_wire_call_once(nng_ctx ctx, nng_aio *aio,
                                         const _Atomic bool *lost,
                                         const halo_wire_request_t *request,
                                         int64_t deadline_ns,
                                         uint32_t *out_retry_after_ms,
                                         halo_wire_response_t **out_response) {
  *out_response = NULL;
  *out_retry_after_ms = 0;
  if (!halo_wire_step_within(aio, deadline_ns)) {
    return halo_wire_status_from_nng(NNG_ETIMEDOUT, "sending request to halod");
  }
  nng_msg *msg;
  HALO_RETURN_IF_ERROR(halo_wire_pack_request(request, &msg));
  nng_aio_set_msg(aio, msg);
  nng_ctx_send(ctx, aio);
  int rv = halo_wire_wait(aio, lost);
  if (rv != 0) {
    nng_msg_free(nng_aio_get_msg(aio));
    return halo_wire_status_from_nng(rv, "sending request to halod");
  }
  if (!halo_wire_step_within(aio, deadline_ns)) {
    return halo_wire_status_from_nng(NNG_ETIMEDOUT, "waiting for halod");
  }
  nng_ctx_recv(ctx, aio);
  rv = halo_wire_wait(aio, lost);
  if (rv != 0) return halo_wire_status_from_nng(rv, "waiting for halod");
  msg = nng_aio_get_msg(aio);
  halo_wire_response_t *response =
      halo__wire__response__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
  nng_msg_free(msg);
  if (!response) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "halod sent a response that does not decode");
  }
  if (response->code != HALO_STATUS_OK) {
    halo_status_code_t code = (halo_status_code_t)response->code;
    if ((unsigned)code >= HALO_STATUS_CODE_COUNT) code = HALO_STATUS_UNKNOWN;
    halo_status_t status = halo_status_make(
        code, "%s", response->message ? response->message : "");
    if (response->has_retry_after_ms) {
      *out_retry_after_ms = response->retry_after_ms;
    }
    halo__wire__response__free_unpacked(response, NULL);
    return status;
  }
  *out_response = response;
  return NULL;
}

halo_status_t halo_wire_call(nng_ctx ctx, nng_aio *aio,
                             const _Atomic bool *lost,
                             const halo_wire_request_t *request,
                             halo_wire_response_t **out_response) {
  uint32_t retry_after_ms;
  return halo_wire_call_once(ctx, aio, lost, request, 0, &retry_after_ms,
                             out_response);
}

halo_status_t halo_wire_call_retrying(nng_ctx ctx, nng_aio *aio,
                                      const _Atomic bool *lost,
                                      const halo_wire_request_t *request,
                                      int64_t deadline_ns,
                                      halo_wire_response_t **out_response) {
  // The last refusal: what the call returns where the request sent again
  // runs out of time (it names what halod was short of; a timeout would
  // not).
  halo_status_t refusal = NULL;
  for (;;) {
    uint32_t retry_after_ms = 0;
    halo_status_t status = halo_wire_call_once(
        ctx, aio, lost, request, deadline_ns, &retry_after_ms, out_response);
    if (refusal && halo_status_code(status) == HALO_STATUS_DEADLINE_EXCEEDED) {
      halo_status_free(status);
      return refusal;
    }
    halo_status_free(refusal);
    refusal = NULL;
    if (!status || retry_after_ms == 0) return status;
    if (retry_after_ms > HALO_WIRE_RETRY_MAX_MS) {
      retry_after_ms = HALO_WIRE_RETRY_MAX_MS;
    }
    int64_t wait_ns = (int64_t)retry_after_ms * 1000000;
    if (halo_clock_now_ns() + wait_ns > deadline_ns) return status;
    refusal = status;
    struct timespec wait = halo_clock_timespec(wait_ns);
    while (nanosleep(&wait, &wait) != 0 && errno == EINTR) {
    }
  }
}
