// The operations the client socket and the submission ring share: one
// validation path, whichever way a request came (docs/architecture.md
// "Submission ring"). Loop thread only.
#ifndef HALOD_REQUESTS_H_
#define HALOD_REQUESTS_H_

#include <stdint.h>

#include "common/wire.h"
#include "daemon/daemon.h"

// queue_execute: validates |request| (plain C structs: the ring builds them
// from its copied record) and accepts the submission.
halo_status_t halod_requests_queue_execute(
    halod_t *daemon, halod_session_t *session,
    const Halo__Wire__QueueExecute *request, uint64_t *out_submission_id);

// A host signal of the session's semaphore |handle| to |value|.
halo_status_t halod_requests_semaphore_signal(halod_t *daemon,
                                              halod_session_t *session,
                                              uint64_t handle, uint64_t value);

#endif  // HALOD_REQUESTS_H_
