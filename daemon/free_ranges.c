// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/free_ranges.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"

// The tree's rotations and rebalancing are hal/semaphore.c's (its
// timepoints' tree), with each node's |largest| kept along with its height.

static uint32_t halod_free_ranges_height(const halod_free_range_t *node) {
  return node ? node->height : 0;
}

static uint64_t halod_free_ranges_largest(const halod_free_range_t *node) {
  return node ? node->largest : 0;
}

// |node|'s height and largest from its children's.
static void halod_free_ranges_update(halod_free_range_t *node) {
  uint32_t left = halod_free_ranges_height(node->left);
  uint32_t right = halod_free_ranges_height(node->right);
  node->height = 1 + (left > right ? left : right);
  uint64_t largest = node->size;
  uint64_t left_largest = halod_free_ranges_largest(node->left);
  uint64_t right_largest = halod_free_ranges_largest(node->right);
  if (left_largest > largest) largest = left_largest;
  if (right_largest > largest) largest = right_largest;
  node->largest = largest;
}

// Puts |child| (may be NULL) where |old| hangs from |parent| (NULL: the
// root).
static void halod_free_ranges_replace(halod_free_ranges_t *ranges,
                                      halod_free_range_t *parent,
                                      halod_free_range_t *old,
                                      halod_free_range_t *child) {
  if (!parent) {
    ranges->root = child;
  } else if (parent->left == old) {
    parent->left = child;
  } else {
    parent->right = child;
  }
  if (child) child->parent = parent;
}

// Rotates |node|'s right child up into its place; returns that child.
static halod_free_range_t *halod_free_ranges_rotate_left(
    halod_free_ranges_t *ranges, halod_free_range_t *node) {
  halod_free_range_t *up = node->right;
  node->right = up->left;
  if (up->left) up->left->parent = node;
  halod_free_ranges_replace(ranges, node->parent, node, up);
  up->left = node;
  node->parent = up;
  halod_free_ranges_update(node);
  halod_free_ranges_update(up);
  return up;
}

// Rotates |node|'s left child up into its place; returns that child.
static halod_free_range_t *halod_free_ranges_rotate_right(
    halod_free_ranges_t *ranges, halod_free_range_t *node) {
  halod_free_range_t *up = node->left;
  node->left = up->right;
  if (up->right) up->right->parent = node;
  halod_free_ranges_replace(ranges, node->parent, node, up);
  up->right = node;
  node->parent = up;
  halod_free_ranges_update(node);
  halod_free_ranges_update(up);
  return up;
}

// Restores the heights, the largest sizes and the balance from |node|
// (NULL: nothing) up to the root, after a node was attached below it,
// taken from below it, or its own range changed. Always to the root, O(log
// n): unlike a height, a largest size can change above a node whose own
// stayed the same (a node taken out of the tree hands its place to its
// successor from below).
static void halod_free_ranges_rebalance(halod_free_ranges_t *ranges,
                                        halod_free_range_t *node) {
  while (node) {
    uint32_t left = halod_free_ranges_height(node->left);
    uint32_t right = halod_free_ranges_height(node->right);
    if (left > right + 1) {
      if (halod_free_ranges_height(node->left->left) <
          halod_free_ranges_height(node->left->right)) {
        halod_free_ranges_rotate_left(ranges, node->left);
      }
      node = halod_free_ranges_rotate_right(ranges, node);
    } else if (right > left + 1) {
      if (halod_free_ranges_height(node->right->right) <
          halod_free_ranges_height(node->right->left)) {
        halod_free_ranges_rotate_right(ranges, node->right);
      }
      node = halod_free_ranges_rotate_left(ranges, node);
    } else {
      halod_free_ranges_update(node);
    }
    node = node->parent;
  }
}

// Takes |node| out of the tree into the spares.
static void halod_free_ranges_unlink(halod_free_ranges_t *ranges,
                                     halod_free_range_t *node) {
  halod_free_range_t *parent = node->parent;
  halod_free_range_t *rebalance_from;
  if (node->left && node->right) {
    // Its successor (the leftmost of its right subtree, which has no left
    // child) takes its place: the order of the rest stays.
    halod_free_range_t *successor = node->right;
    while (successor->left) successor = successor->left;
    if (successor->parent == node) {
      rebalance_from = successor;
    } else {
      rebalance_from = successor->parent;
      halod_free_ranges_replace(ranges, successor->parent, successor,
                                successor->right);
      successor->right = node->right;
      successor->right->parent = successor;
    }
    successor->left = node->left;
    successor->left->parent = successor;
    halod_free_ranges_replace(ranges, parent, node, successor);
  } else {
    halod_free_ranges_replace(ranges, parent, node,
                              node->left ? node->left : node->right);
    rebalance_from = parent;
  }
  halod_free_ranges_rebalance(ranges, rebalance_from);
  --ranges->count;
  node->parent = node->left = NULL;
  node->right = ranges->spares;
  ranges->spares = node;
  ++ranges->spare_count;
}

// A spare node out of the spares (there is one: see the header).
static halod_free_range_t *halod_free_ranges_spare(
    halod_free_ranges_t *ranges) {
  halod_free_range_t *node = ranges->spares;
  ranges->spares = node->right;
  --ranges->spare_count;
  memset(node, 0, sizeof(*node));
  return node;
}

// Adds a spare node; RESOURCE_EXHAUSTED without memory for it.
static halo_status_t halod_free_ranges_reserve(halod_free_ranges_t *ranges) {
  halod_free_range_t *node = calloc(1, sizeof(*node));
  if (!node) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "out of memory for a free range's node");
  }
  node->right = ranges->spares;
  ranges->spares = node;
  ++ranges->spare_count;
  return NULL;
}

halo_status_t halod_free_ranges_initialize(halod_free_ranges_t *ranges,
                                           uint64_t size) {
  memset(ranges, 0, sizeof(*ranges));
  ranges->limit = size;
  // One node for the whole range and one for the first take's return.
  halo_status_t status = halod_free_ranges_reserve(ranges);
  if (!status) status = halod_free_ranges_reserve(ranges);
  if (status) {
    halod_free_ranges_deinitialize(ranges);
    return status;
  }
  if (size == 0) return NULL;
  halod_free_range_t *node = halod_free_ranges_spare(ranges);
  node->size = node->largest = size;
  node->height = 1;
  ranges->root = node;
  ranges->count = 1;
  return NULL;
}

// Frees |node|'s subtree (recursion as deep as the tree, O(log n)).
static void halod_free_ranges_free_subtree(halod_free_range_t *node) {
  if (!node) return;
  halod_free_ranges_free_subtree(node->left);
  halod_free_ranges_free_subtree(node->right);
  free(node);
}

void halod_free_ranges_deinitialize(halod_free_ranges_t *ranges) {
  halod_free_ranges_free_subtree(ranges->root);
  while (ranges->spares) {
    halod_free_range_t *next = ranges->spares->right;
    free(ranges->spares);
    ranges->spares = next;
  }
  memset(ranges, 0, sizeof(*ranges));
}

bool halod_free_ranges_fits(const halod_free_ranges_t *ranges, uint64_t size) {
  return halod_free_ranges_largest(ranges->root) >= size;
}

halo_status_t halod_free_ranges_take(halod_free_ranges_t *ranges, uint64_t size,
                                     bool *out_taken, uint64_t *out_offset) {
  *out_taken = false;
  *out_offset = 0;
  if (size == 0 || !halod_free_ranges_fits(ranges, size)) return NULL;
  // The node its return may need, before anything changes.
  if (ranges->count + ranges->spare_count < ranges->taken + 2) {
    HALO_RETURN_IF_ERROR(halod_free_ranges_reserve(ranges));
  }
  // The leftmost node that holds |size|: left while the left subtree has
  // one, else this node if it does, else right (whose subtree must).
  halod_free_range_t *node = ranges->root;
  for (;;) {
    if (halod_free_ranges_largest(node->left) >= size) {
      node = node->left;
    } else if (node->size >= size) {
      break;
    } else {
      node = node->right;
    }
  }
  *out_offset = node->offset;
  node->offset += size;
  node->size -= size;
  if (node->size == 0) {
    halod_free_ranges_unlink(ranges, node);
  } else {
    halod_free_ranges_rebalance(ranges, node);
  }
  ++ranges->taken;
  *out_taken = true;
  return NULL;
}

void halod_free_ranges_give(halod_free_ranges_t *ranges, uint64_t offset,
                            uint64_t size) {
  // The free ranges before and after it, in one descent; |parent| and
  // |place| where a node for it would go.
  halod_free_range_t *before = NULL;
  halod_free_range_t *after = NULL;
  halod_free_range_t *parent = NULL;
  halod_free_range_t **place = &ranges->root;
  while (*place) {
    parent = *place;
    if (offset < parent->offset) {
      after = parent;
      place = &parent->left;
    } else {
      before = parent;
      place = &parent->right;
    }
  }
  // Not a range taken before: a caller's bug, never ranges that overlap.
  if (size == 0 || ranges->taken == 0 || size > ranges->limit ||
      offset > ranges->limit - size ||
      (before && before->offset + before->size > offset) ||
      (after && offset + size > after->offset)) {
    HALO_LOG_ERROR(
        "free ranges: [%llu, +%llu) given back was not taken (ignored)",
        (unsigned long long)offset, (unsigned long long)size);
    return;
  }
  --ranges->taken;
  bool joins_before = before && before->offset + before->size == offset;
  bool joins_after = after && offset + size == after->offset;
  if (joins_before && joins_after) {
    before->size += size + after->size;
    halod_free_ranges_unlink(ranges, after);
    halod_free_ranges_rebalance(ranges, before);
  } else if (joins_before) {
    before->size += size;
    halod_free_ranges_rebalance(ranges, before);
  } else if (joins_after) {
    // Still after |before|'s end: the order stays.
    after->offset = offset;
    after->size += size;
    halod_free_ranges_rebalance(ranges, after);
  } else {
    halod_free_range_t *node = halod_free_ranges_spare(ranges);
    node->offset = offset;
    node->size = node->largest = size;
    node->height = 1;
    node->parent = parent;
    *place = node;
    ++ranges->count;
    halod_free_ranges_rebalance(ranges, parent);
  }
  // Keeps at most one node more than the bound (see the header): a take
  // and its return in turn allocate nothing.
  while (ranges->spares &&
         ranges->count + ranges->spare_count > ranges->taken + 2) {
    free(halod_free_ranges_spare(ranges));
  }
}
