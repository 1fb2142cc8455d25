// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Which process the kernel kills first under memory pressure: halod's
// oom_score_adj (the setting oom-score-adj, -900 by default) and its device
// workers', 500 above it. A worker's memory is mostly its trust domain's
// tenants' buffers and work; halod's, every tenant's sessions. Without the
// difference the largest process goes, which can be halod (recordings, a
// host-visible buffer it read) or another domain's worker, and the memory
// one domain pushed into halod's cgroup then ends other domains' sessions.
//
// The kernel adds oom_score_adj / 1000 of the memory the choice is made in
// (the machine's, or the cgroup's memory.max) to each process's own pages:
// 500 apart, a worker goes before halod unless halod holds half of that
// memory more than the worker. At -900 and -400 (the defaults) the rest of
// the machine, at 0, still goes before either in a machine-wide shortage
// unless they are large. Raising a score needs no privilege; lowering one
// below the lowest a privileged writer set for the process
// (oom_score_adj_min; systemd's OOMScoreAdjust= sets it before halod
// starts) needs CAP_SYS_RESOURCE.
//
// Any thread.
#ifndef HALOD_OOM_SCORE_H_
#define HALOD_OOM_SCORE_H_

#include <stdbool.h>

// How far above halod's score a device worker puts its own.
#define HALOD_OOM_SCORE_WORKER_ABOVE 500

// Opens /proc/self/oom_score_adj for writing and keeps it for
// halod_oom_score_write: called before the process makes itself not
// dumpable (main.c), after which its /proc/self files belong to root and a
// process that is not root could not open it (the kernel checks at open,
// not at each write).
void halod_oom_score_prepare(void);

// This process's /proc/self/oom_score_adj; false (errno set) if unreadable.
bool halod_oom_score_read(int *out_score);
// Writes it; false (errno set: EACCES to lower it without CAP_SYS_RESOURCE)
// on failure.
bool halod_oom_score_write(int score);

// The score a device worker takes when halod's (inherited) is |inherited|:
// HALOD_OOM_SCORE_WORKER_ABOVE above it, at most 1000.
int halod_oom_score_for_worker(int inherited);

// In a device worker at its start, before the device's memory (through
// the descriptor halod_oom_score_prepare opened): raises its score to
// halod_oom_score_for_worker of the one it inherited (logs a warning if it
// cannot; never lowers it).
void halod_oom_score_raise_worker(void);

#endif  // HALOD_OOM_SCORE_H_
