// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The free ranges of one address space [0, size) that ranges are taken
// from and given back to (a host arena's, daemon/arena.h): first fit by the
// lowest offset, coalesced on return, each in O(log n) for n free ranges.
//
// The free ranges are the nodes of a balanced search tree (AVL: heights of
// sibling subtrees differ by at most 1) keyed by offset, each node with the
// largest size in its subtree: first fit goes down into the leftmost
// subtree whose largest fits, and a return finds the ranges before and
// after it in one descent. A sorted array did both with a walk: one client
// freeing 64,000 buffers every other one, then the rest, held halod's loop
// for about a second, and placing 32,000 more past the holes for one to
// three (docs/performance.md).
//
// A return never fails: coalesced free ranges are separated by taken ones,
// so there are at most |taken| + 1 of them, and the tree keeps that many
// nodes (in the tree or spare) at all times. A take allocates the node for
// its later return when none is spare, and fails cleanly, taking nothing,
// when memory runs out.
//
// Sizes and offsets are the caller's units (the arena's are bytes, rounded
// up to HALOD_ARENA_ALIGNMENT before they get here).
//
// Thread-compatible: the caller serializes (the arena's are loop thread
// only).
#ifndef HALOD_FREE_RANGES_H_
#define HALOD_FREE_RANGES_H_

#include <stdbool.h>
#include <stdint.h>

#include "halo/status.h"

typedef struct halod_free_range_t {
  struct halod_free_range_t *parent;
  struct halod_free_range_t *left;
  struct halod_free_range_t *right;  // also the next spare
  uint64_t offset;
  uint64_t size;     // never 0 in the tree
  uint64_t largest;  // the largest |size| in its subtree
  uint32_t height;   // of its subtree: 1 for a leaf
} halod_free_range_t;

typedef struct halod_free_ranges_t {
  uint64_t limit;  // the address space's size
  halod_free_range_t *root;
  uint32_t count;  // free ranges (nodes in the tree)
  uint32_t taken;  // ranges taken and not given back
  // Nodes out of the tree, kept for returns that coalesce with neither
  // neighbour: |count| + |spare_count| >= |taken| + 1 always.
  halod_free_range_t *spares;
  uint32_t spare_count;
} halod_free_ranges_t;

// One free range, [0, |size|), and a spare node (its first take needs no
// memory).
halo_status_t halod_free_ranges_initialize(halod_free_ranges_t *ranges,
                                           uint64_t size);
// Frees the nodes; a zeroed |ranges| has none.
void halod_free_ranges_deinitialize(halod_free_ranges_t *ranges);

// Whether a range of |size| would be taken: O(1).
bool halod_free_ranges_fits(const halod_free_ranges_t *ranges, uint64_t size);

// Takes |size| (> 0) from the start of the free range of the lowest offset
// that holds it; |*out_taken| false (and nothing taken) if none does.
// RESOURCE_EXHAUSTED, nothing taken, only when no spare node is left and
// none can be allocated; never the first take after initializing.
halo_status_t halod_free_ranges_take(halod_free_ranges_t *ranges, uint64_t size,
                                     bool *out_taken, uint64_t *out_offset);
// Gives back a range taken before ([|offset|, |offset| + |size|), as
// taken), coalescing it with the free ranges on either side. Cannot fail.
void halod_free_ranges_give(halod_free_ranges_t *ranges, uint64_t offset,
                            uint64_t size);

#endif  // HALOD_FREE_RANGES_H_
