// Host timeline semaphores: a slot in a shared page (common/timeline.h)
// plus the timepoints that wait on it in the daemon (deferred executions).
// Driver-independent: the CUDA driver stores values from the GPU into the
// same slot and then reports completion, which signals here.
//
// Loop thread only.
#ifndef HALO_HAL_SEMAPHORE_H_
#define HALO_HAL_SEMAPHORE_H_

#include <stdbool.h>
#include <stdint.h>

#include "common/timeline.h"
#include "halo/status.h"

typedef struct halo_hal_timepoint_t halo_hal_timepoint_t;

// Called when the semaphore reaches the timepoint's value (|status| NULL) or
// fails before it (|status| the failure, owned by the callee). The timepoint
// is unlinked before the call.
typedef void (*halo_hal_timepoint_fn)(halo_hal_timepoint_t *timepoint,
                                      halo_status_t status);

struct halo_hal_timepoint_t {
  halo_hal_timepoint_t *next;
  uint64_t value;
  halo_hal_timepoint_fn callback;
  void *user_data;
  bool linked;
};

typedef struct halo_hal_semaphore_t {
  halo_timeline_slot_t *slot;
  // The highest value an accepted submission will signal (>= the value).
  uint64_t pending_max;
  char *failure_message;             // set by the first failure
  halo_hal_timepoint_t *timepoints;  // sorted by value
} halo_hal_semaphore_t;

void halo_hal_semaphore_initialize(halo_hal_semaphore_t *semaphore,
                                   halo_timeline_slot_t *slot,
                                   uint64_t initial_value);
// Fails the pending timepoints with ABORTED (the semaphore is going away).
void halo_hal_semaphore_deinitialize(halo_hal_semaphore_t *semaphore);

uint64_t halo_hal_semaphore_value(const halo_hal_semaphore_t *semaphore);
// 0 while healthy.
int32_t halo_hal_semaphore_failure(const halo_hal_semaphore_t *semaphore);

// INVALID_ARGUMENT unless |value| < 2^63 and above the current value and
// every pending signal; FAILED_PRECONDITION if the semaphore failed.
halo_status_t halo_hal_semaphore_check_signal(
    const halo_hal_semaphore_t *semaphore, uint64_t value);

// Advances to |value| (checked by the caller), wakes every waiter in every
// process and fires the timepoints it reaches. A value the device stored
// into the slot already (a GPU signal) is accepted the same way: the epoch
// still moves and sleepers still wake.
void halo_hal_semaphore_signal(halo_hal_semaphore_t *semaphore, uint64_t value);

// Sets the sticky failure (first one wins; later ones are ignored), wakes
// waiters and fails every timepoint not yet reached. Takes |status|.
void halo_hal_semaphore_fail(halo_hal_semaphore_t *semaphore,
                             halo_status_t status);

// The failure as a new status (NULL if healthy).
halo_status_t halo_hal_semaphore_failure_status(
    const halo_hal_semaphore_t *semaphore);

// Registers |timepoint| (its value, callback and user_data set). Fires at
// once if already reached or failed.
void halo_hal_semaphore_add_timepoint(halo_hal_semaphore_t *semaphore,
                                      halo_hal_timepoint_t *timepoint);
// Unlinks a timepoint that has not fired.
void halo_hal_semaphore_remove_timepoint(halo_hal_semaphore_t *semaphore,
                                         halo_hal_timepoint_t *timepoint);

#endif  // HALO_HAL_SEMAPHORE_H_
