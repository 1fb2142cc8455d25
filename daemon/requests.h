// The operations the client socket and the submission ring share: one
// validation path, whichever way a request came (docs/architecture.md
// "Submission ring"). Loop thread only.
#ifndef HALOD_REQUESTS_H_
#define HALOD_REQUESTS_H_

#include <stdint.h>

#include "common/wire.h"
#include "daemon/buffer.h"
#include "daemon/daemon.h"

// queue_execute: validates |request| (plain C structs: the ring builds them
// from its copied record) and accepts the submission.
halo_status_t halod_requests_queue_execute(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__QueueExecute *request, uint64_t *out_submission_id);

// queue_alloca: validates |request|, allocates the buffer and accepts the
// submission that orders its signals after its waits. |out_buffer|
// (borrowed from the session's handle |out_handle|) fills the reply.
halo_status_t halod_requests_queue_alloca(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__QueueAlloca *request, halod_buffer_t **out_buffer,
    uint64_t *out_handle, uint64_t *out_submission_id);

// queue_dealloca: validates |request|, removes the buffer's handle and
// accepts the submission that frees it.
halo_status_t halod_requests_queue_dealloca(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__QueueDealloca *request, uint64_t *out_submission_id);

// A host signal of the session's semaphore |handle| to |value|.
halo_status_t halod_requests_semaphore_signal(halod_t *daemon,
                                              halod_session_t *session,
                                              uint64_t handle, uint64_t value);

#endif  // HALOD_REQUESTS_H_
