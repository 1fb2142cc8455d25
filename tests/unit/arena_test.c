// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Host arenas' placement (daemon/arena.c) over their free ranges
// (daemon/free_ranges.c), on real arenas (a memfd each) of a daemon with
// no devices, and on the free ranges alone:
// - first fit: the hole of the lowest offset that holds a buffer, not the
//   best one nor the last freed;
// - sizes round up to HALOD_ARENA_ALIGNMENT, and so does what a free
//   returns;
// - a free coalesces with the range before, after, and both;
// - a full arena places nothing, a hole too small places nothing, and the
//   whole arena fits again once everything is freed;
// - |live|, and which empty arenas go: exclusive and orphaned ones, not a
//   session's own;
// - 80,000 random allocations and frees, in two mixes, against a bitmap
//   of the arena's units: the same offsets, the same free ranges, and the
//   tree's invariants (order, balance, heights, largest sizes, parents,
//   nothing left uncoalesced, enough nodes and not many more) after every
//   step;
// - without memory (calloc failing), an allocation fails cleanly, placing
//   nothing, and every free still succeeds;
// - a range given back that was not taken changes nothing.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "daemon/arena.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/free_ranges.h"

enum { kAlign = HALOD_ARENA_ALIGNMENT };

// calloc for the code under test (linked with --wrap=calloc): fails while
// |calloc_fails|.
static bool calloc_fails;
void *__real_calloc(size_t count, size_t size);
void *__wrap_calloc(size_t count, size_t size) {
  return calloc_fails ? NULL : __real_calloc(count, size);
}

static int setup(void **state) {
  halod_t *daemon = calloc(1, sizeof(*daemon));
  halo_u64_map_initialize(&daemon->shared.arenas);
  *state = daemon;
  return 0;
}

static int teardown(void **state) {
  halod_t *daemon = *state;
  assert_int_equal(daemon->shared.arenas.count, 0);
  halo_u64_map_deinitialize(&daemon->shared.arenas);
  free(daemon);
  return 0;
}

// A finished arena of |size| bytes (a session's own: owner 1).
static halod_arena_t *arena_new(halod_t *daemon, uint64_t size,
                                bool exclusive) {
  halod_arena_t *arena = NULL;
  halo_status_t status =
      halod_arena_create(daemon, NULL, size, exclusive, 1, &arena);
  if (status) fail_msg("%s", halo_status_message(status));
  return arena;
}

// Places |size| on |arena|; UINT64_MAX if it does not fit.
static uint64_t place(halod_arena_t *arena, uint64_t size) {
  bool fits = halod_arena_fits(arena, size);
  bool placed = true;
  uint64_t offset = 7;
  halo_status_t status = halod_arena_allocate(arena, size, &placed, &offset);
  if (status) fail_msg("%s", halo_status_message(status));
  assert_int_equal(placed, fits);
  if (!placed) {
    assert_int_equal(offset, 0);
    return UINT64_MAX;
  }
  assert_int_equal(offset % kAlign, 0);
  return offset;
}

// ---- the tree's invariants

typedef struct walk_t {
  uint64_t end;    // of the range before (0: none yet)
  uint32_t count;  // nodes seen
  bool any;        // a range seen
  uint64_t unit;   // offsets and sizes are multiples of it
  uint64_t limit;  // the address space's size
} walk_t;

// Checks |node|'s subtree (hanging from |parent|), in order; returns its
// height.
static uint32_t check_subtree(const halod_free_range_t *node,
                              const halod_free_range_t *parent, walk_t *walk) {
  if (!node) return 0;
  assert_ptr_equal(node->parent, parent);
  uint32_t left = check_subtree(node->left, node, walk);
  assert_true(node->size > 0);
  assert_int_equal(node->offset % walk->unit, 0);
  assert_int_equal(node->size % walk->unit, 0);
  // Sorted, disjoint, and never touching the one before (coalesced).
  if (walk->any) assert_true(node->offset > walk->end);
  assert_true(node->offset + node->size <= walk->limit);
  walk->end = node->offset + node->size;
  walk->any = true;
  ++walk->count;
  uint32_t right = check_subtree(node->right, node, walk);
  assert_true(left <= right + 1 && right <= left + 1);
  assert_int_equal(node->height, 1 + (left > right ? left : right));
  uint64_t largest = node->size;
  if (node->left && node->left->largest > largest) {
    largest = node->left->largest;
  }
  if (node->right && node->right->largest > largest) {
    largest = node->right->largest;
  }
  assert_int_equal(node->largest, largest);
  return node->height;
}

static void check_tree(const halod_free_ranges_t *ranges, uint64_t unit,
                       uint64_t limit) {
  walk_t walk = {.unit = unit, .limit = limit};
  check_subtree(ranges->root, NULL, &walk);
  assert_int_equal(walk.count, ranges->count);
  // Coalesced ranges are separated by taken ones.
  assert_true(ranges->count <= ranges->taken + 1);
  // Enough nodes for any return, and at most one more than that.
  uint32_t nodes = ranges->count + ranges->spare_count;
  assert_true(nodes >= ranges->taken + 1);
  assert_true(nodes <= ranges->taken + 2);
  uint32_t spares = 0;
  for (const halod_free_range_t *s = ranges->spares; s; s = s->right) ++spares;
  assert_int_equal(spares, ranges->spare_count);
}

// The free ranges in order, into |out| (|capacity|); returns their count.
static uint32_t collect(const halod_free_range_t *node, halod_free_range_t *out,
                        uint32_t count, uint32_t capacity) {
  if (!node) return count;
  count = collect(node->left, out, count, capacity);
  assert_true(count < capacity);
  out[count++] = *node;
  return collect(node->right, out, count, capacity);
}

static void expect_ranges(const halod_arena_t *arena,
                          const uint64_t (*expected)[2], uint32_t count) {
  halod_free_range_t found[16];
  uint32_t n = collect(arena->free_ranges.root, found, 0, 16);
  assert_int_equal(n, count);
  for (uint32_t i = 0; i < count; ++i) {
    assert_int_equal(found[i].offset, expected[i][0]);
    assert_int_equal(found[i].size, expected[i][1]);
  }
  check_tree(&arena->free_ranges, kAlign, arena->size);
}

// ---- placement on an arena

static void test_first_fit_order(void **state) {
  halod_t *daemon = *state;
  halod_arena_t *arena = arena_new(daemon, 8 * 1024, false);
  assert_int_equal(arena->size, 8 * 1024);
  uint64_t a = place(arena, 256);   // [0, 256)
  uint64_t b = place(arena, 1024);  // [256, 1280)
  uint64_t c = place(arena, 256);   // [1280, 1536)
  uint64_t d = place(arena, 512);   // [1536, 2048)
  uint64_t e = place(arena, 256);   // [2048, 2304)
  assert_int_equal(a, 0);
  assert_int_equal(b, 256);
  assert_int_equal(c, 1280);
  assert_int_equal(d, 1536);
  assert_int_equal(e, 2048);
  // Holes of 1024 at 256 and 512 at 1536, freed last first.
  halod_arena_free(daemon, arena, d, 512);
  halod_arena_free(daemon, arena, b, 1024);
  // The lowest hole that holds it, though the later one fits better.
  assert_int_equal(place(arena, 512), 256);
  // The rest of that hole, [768, 1280), is still the lowest.
  assert_int_equal(place(arena, 256), 768);
  // 512 no longer fits below 1536.
  assert_int_equal(place(arena, 512), 1536);
  // Nothing below the tail holds 1024.
  assert_int_equal(place(arena, 1024), 2304);
  assert_int_equal(place(arena, 256), 1024);
  assert_int_equal(arena->live, 8);
  static const uint64_t kFree[][2] = {{3328, 8192 - 3328}};
  expect_ranges(arena, kFree, 1);
  halod_arena_destroy(daemon, arena);
}

static void test_alignment(void **state) {
  halod_t *daemon = *state;
  // The arena's own size rounds up to a page.
  halod_arena_t *arena = arena_new(daemon, 5000, false);
  assert_int_equal(arena->size, 8192);
  static const uint64_t kSizes[] = {1, 255, 256, 257, 1000, 3};
  static const uint64_t kOffsets[] = {0, 256, 512, 768, 1280, 2304};
  uint64_t offsets[6];
  for (int i = 0; i < 6; ++i) {
    offsets[i] = place(arena, kSizes[i]);
    assert_int_equal(offsets[i], kOffsets[i]);
  }
  // A free returns the rounded size: 257 bytes gave back [768, 1280).
  halod_arena_free(daemon, arena, offsets[3], 257);
  static const uint64_t kHole[][2] = {{768, 512}, {2560, 8192 - 2560}};
  expect_ranges(arena, kHole, 2);
  assert_int_equal(place(arena, 300), 768);
  assert_int_equal(place(arena, 1), 2560);
  halod_arena_destroy(daemon, arena);
}

static void test_coalescing(void **state) {
  halod_t *daemon = *state;
  halod_arena_t *arena = arena_new(daemon, 4096, false);
  uint64_t offsets[16];
  for (int i = 0; i < 16; ++i) offsets[i] = place(arena, 256);
  assert_null(arena->free_ranges.root);  // full
  // With the one after: 3, then 2.
  halod_arena_free(daemon, arena, offsets[3], 256);
  halod_arena_free(daemon, arena, offsets[2], 256);
  static const uint64_t kAfter[][2] = {{512, 512}};
  expect_ranges(arena, kAfter, 1);
  // With the one before: 6, then 7.
  halod_arena_free(daemon, arena, offsets[6], 256);
  halod_arena_free(daemon, arena, offsets[7], 256);
  static const uint64_t kBefore[][2] = {{512, 512}, {1536, 512}};
  expect_ranges(arena, kBefore, 2);
  // With both: 4 and 5 between them.
  halod_arena_free(daemon, arena, offsets[5], 256);
  static const uint64_t kBetween[][2] = {{512, 512}, {1280, 768}};
  expect_ranges(arena, kBetween, 2);
  halod_arena_free(daemon, arena, offsets[4], 256);
  static const uint64_t kBoth[][2] = {{512, 1536}};
  expect_ranges(arena, kBoth, 1);
  // The arena's ends: the first and the last.
  halod_arena_free(daemon, arena, offsets[15], 256);
  halod_arena_free(daemon, arena, offsets[0], 256);
  static const uint64_t kEnds[][2] = {{0, 256}, {512, 1536}, {3840, 256}};
  expect_ranges(arena, kEnds, 3);
  for (int i = 1; i < 15; ++i) {
    if (i < 2 || i > 7) halod_arena_free(daemon, arena, offsets[i], 256);
  }
  static const uint64_t kAll[][2] = {{0, 4096}};
  expect_ranges(arena, kAll, 1);
  assert_int_equal(arena->live, 0);
  assert_int_equal(place(arena, 4096), 0);
  halod_arena_destroy(daemon, arena);
}

static void test_full_and_no_fit(void **state) {
  halod_t *daemon = *state;
  halod_arena_t *arena = arena_new(daemon, 4096, false);
  assert_int_equal(place(arena, 4097), UINT64_MAX);
  assert_int_equal(arena->live, 0);
  uint64_t offsets[16];
  for (int i = 0; i < 16; ++i) {
    offsets[i] = place(arena, 200);
    assert_int_equal(offsets[i], (uint64_t)i * 256);
  }
  assert_int_equal(place(arena, 1), UINT64_MAX);  // full
  assert_int_equal(arena->live, 16);
  // Two holes of 256 apart: 512 fits neither.
  halod_arena_free(daemon, arena, offsets[4], 200);
  halod_arena_free(daemon, arena, offsets[9], 200);
  assert_int_equal(place(arena, 512), UINT64_MAX);
  assert_int_equal(place(arena, 257), UINT64_MAX);
  assert_int_equal(arena->live, 14);
  assert_int_equal(place(arena, 256), 4 * 256);
  assert_int_equal(place(arena, 256), 9 * 256);
  assert_int_equal(place(arena, 1), UINT64_MAX);
  halod_arena_destroy(daemon, arena);
}

static void test_live_and_destruction(void **state) {
  halod_t *daemon = *state;
  // A session's own arena stays once empty, until it is orphaned.
  halod_arena_t *shared = arena_new(daemon, 4096, false);
  uint64_t a = place(shared, 100);
  uint64_t b = place(shared, 100);
  assert_int_equal(shared->live, 2);
  halod_arena_free(daemon, shared, a, 100);
  halod_arena_free(daemon, shared, b, 100);
  assert_int_equal(shared->live, 0);
  assert_int_equal(daemon->shared.arenas.count, 1);
  halod_arena_orphan(daemon, shared);  // empty: goes now
  assert_int_equal(daemon->shared.arenas.count, 0);

  // Orphaned with buffers on it: goes with the last free.
  shared = arena_new(daemon, 4096, false);
  a = place(shared, 100);
  b = place(shared, 100);
  halod_arena_orphan(daemon, shared);
  assert_int_equal(daemon->shared.arenas.count, 1);
  halod_arena_free(daemon, shared, b, 100);
  assert_int_equal(daemon->shared.arenas.count, 1);
  assert_int_equal(shared->live, 1);
  halod_arena_free(daemon, shared, a, 100);
  assert_int_equal(daemon->shared.arenas.count, 0);

  // An exclusive arena goes with its buffer.
  halod_arena_t *exclusive = arena_new(daemon, 10000, true);
  a = place(exclusive, 10000);
  assert_int_equal(a, 0);
  assert_int_equal(daemon->shared.arenas.count, 1);
  halod_arena_free(daemon, exclusive, a, 10000);
  assert_int_equal(daemon->shared.arenas.count, 0);
}

// ---- random operations against a bitmap

// xorshift64*: the same sequence on every run.
static uint64_t random_next(uint64_t *seed) {
  *seed ^= *seed >> 12;
  *seed ^= *seed << 25;
  *seed ^= *seed >> 27;
  return *seed * 2685821657736338717ull;
}

enum { kUnits = 4096, kSteps = 40000 };

typedef struct model_t {
  bool used[kUnits];  // per HALOD_ARENA_ALIGNMENT unit
  uint64_t offsets[kUnits];
  uint64_t sizes[kUnits];  // as asked for, not rounded
  uint32_t live;
} model_t;

// The bitmap's first fit: the start of the first run of |units| free.
static int64_t model_first_fit(const model_t *model, uint32_t units) {
  uint32_t run = 0;
  for (uint32_t i = 0; i < kUnits; ++i) {
    run = model->used[i] ? 0 : run + 1;
    if (run == units) return (int64_t)(i + 1 - units);
  }
  return -1;
}

// The tree holds exactly the bitmap's runs of free units.
static void model_compare(const model_t *model, const halod_arena_t *arena) {
  static halod_free_range_t found[kUnits];
  uint32_t count = collect(arena->free_ranges.root, found, 0, kUnits);
  uint32_t next = 0;
  for (uint32_t i = 0; i < kUnits;) {
    if (model->used[i]) {
      ++i;
      continue;
    }
    uint32_t start = i;
    while (i < kUnits && !model->used[i]) ++i;
    assert_true(next < count);
    assert_int_equal(found[next].offset, (uint64_t)start * kAlign);
    assert_int_equal(found[next].size, (uint64_t)(i - start) * kAlign);
    ++next;
  }
  assert_int_equal(next, count);
}

// kSteps random steps: sizes up to |largest| units, a large one (up to 64
// units) one time in 23 if |large|, allocations |allocate_percent| of the
// time; if |fill|, after the arena was filled with single units first.
static void random_against_bitmap(halod_t *daemon, uint64_t seed,
                                  uint32_t largest, bool large,
                                  uint32_t allocate_percent, bool fill) {
  static model_t model;
  memset(&model, 0, sizeof(model));
  halod_arena_t *arena = arena_new(daemon, (uint64_t)kUnits * kAlign, false);
  uint32_t placed = 0, refused = 0;
  bool filling = fill;
  for (uint32_t step = 0; step < kSteps; ++step) {
    uint64_t r = random_next(&seed);
    if (filling || r % 100 < allocate_percent || model.live == 0) {
      uint64_t size;
      if (filling) {
        size = 1 + r % kAlign;
        if (model.live == kUnits) filling = false;
      } else if (large && r % 23 == 0) {
        size = 1 + random_next(&seed) % (64 * kAlign);
      } else {
        size = 1 + random_next(&seed) % (largest * kAlign);
      }
      uint32_t units = (uint32_t)((size + kAlign - 1) / kAlign);
      int64_t expected = model_first_fit(&model, units);
      uint64_t offset = place(arena, size);
      if (expected < 0) {
        assert_int_equal(offset, UINT64_MAX);
        ++refused;
      } else {
        assert_int_equal(offset, (uint64_t)expected * kAlign);
        for (uint32_t u = 0; u < units; ++u) {
          assert_false(model.used[expected + u]);
          model.used[expected + u] = true;
        }
        model.offsets[model.live] = offset;
        model.sizes[model.live] = size;
        ++model.live;
        ++placed;
      }
    } else {
      uint32_t victim = (uint32_t)(random_next(&seed) % model.live);
      uint64_t offset = model.offsets[victim];
      uint64_t size = model.sizes[victim];
      halod_arena_free(daemon, arena, offset, size);
      uint32_t units = (uint32_t)((size + kAlign - 1) / kAlign);
      for (uint32_t u = 0; u < units; ++u) {
        model.used[offset / kAlign + u] = false;
      }
      --model.live;
      model.offsets[victim] = model.offsets[model.live];
      model.sizes[victim] = model.sizes[model.live];
    }
    assert_int_equal(arena->live, model.live);
    assert_int_equal(arena->free_ranges.taken, model.live);
    check_tree(&arena->free_ranges, kAlign, arena->size);
    model_compare(&model, arena);
  }
  // Both paths ran often.
  assert_true(placed > kSteps / 4);
  assert_true(refused > kSteps / 100);
  while (model.live > 0) {
    --model.live;
    halod_arena_free(daemon, arena, model.offsets[model.live],
                     model.sizes[model.live]);
    check_tree(&arena->free_ranges, kAlign, arena->size);
  }
  assert_int_equal(arena->free_ranges.count, 1);
  halod_arena_destroy(daemon, arena);
}

// Slightly more allocations than frees, of mixed sizes: the arena fills,
// fragments and refuses, and frees keep opening holes (up to 174 free
// ranges at once).
static void test_random_mixed(void **state) {
  random_against_bitmap(*state, 0x9e3779b97f4a7c15ull, 6, true, 55, false);
}

// A full arena of single units, then small buffers as often freed as
// placed: many more, smaller holes (up to 436 free ranges at once, a tree
// 11 high).
static void test_random_fragmented(void **state) {
  random_against_bitmap(*state, 0x2545f4914f6cdd1dull, 2, false, 50, true);
}

// ---- the free ranges without memory

static void test_out_of_memory(void **state) {
  (void)state;
  halod_free_ranges_t ranges;
  calloc_fails = true;
  halo_status_t status = halod_free_ranges_initialize(&ranges, 1 << 20);
  calloc_fails = false;
  assert_non_null(status);
  assert_int_equal(halo_status_code(status), HALO_STATUS_RESOURCE_EXHAUSTED);
  halo_status_free(status);
  assert_null(ranges.root);

  assert_null(halod_free_ranges_initialize(&ranges, 1 << 20));
  // The first take needs no memory.
  calloc_fails = true;
  bool taken = false;
  uint64_t offset = 1;
  assert_null(halod_free_ranges_take(&ranges, 16, &taken, &offset));
  assert_true(taken);
  assert_int_equal(offset, 0);
  // The second needs a node for its return: refused, nothing taken.
  status = halod_free_ranges_take(&ranges, 16, &taken, &offset);
  assert_non_null(status);
  assert_int_equal(halo_status_code(status), HALO_STATUS_RESOURCE_EXHAUSTED);
  halo_status_free(status);
  assert_false(taken);
  assert_int_equal(ranges.taken, 1);
  check_tree(&ranges, 16, 1 << 20);
  calloc_fails = false;

  // Every other of 2,000 ranges, then the rest, returned without memory:
  // 1,000 ranges that coalesce with nothing, then all of them joined.
  enum { kTaken = 2000 };
  static uint64_t offsets[kTaken];
  offsets[0] = 0;
  for (uint32_t i = 1; i < kTaken; ++i) {
    assert_null(halod_free_ranges_take(&ranges, 16, &taken, &offsets[i]));
    assert_true(taken);
    assert_int_equal(offsets[i], (uint64_t)i * 16);
  }
  calloc_fails = true;
  for (uint32_t i = 0; i < kTaken; i += 2) {
    halod_free_ranges_give(&ranges, offsets[i], 16);
    check_tree(&ranges, 16, 1 << 20);
  }
  assert_int_equal(ranges.count, kTaken / 2 + 1);
  for (uint32_t i = 1; i < kTaken; i += 2) {
    halod_free_ranges_give(&ranges, offsets[i], 16);
  }
  calloc_fails = false;
  check_tree(&ranges, 16, 1 << 20);
  assert_int_equal(ranges.count, 1);
  assert_int_equal(ranges.root->size, 1 << 20);
  // Trimmed back: the whole range and a spare.
  assert_int_equal(ranges.spare_count, 1);
  halod_free_ranges_deinitialize(&ranges);
}

// A range given back that was not taken (twice, free, overlapping a free
// one, past the end) is refused, not merged.
static void test_bad_return(void **state) {
  (void)state;
  halod_free_ranges_t ranges;
  assert_null(halod_free_ranges_initialize(&ranges, 4096));
  bool taken;
  uint64_t a, b;
  assert_null(halod_free_ranges_take(&ranges, 256, &taken, &a));
  assert_null(halod_free_ranges_take(&ranges, 256, &taken, &b));
  halod_free_ranges_give(&ranges, a, 256);
  halod_free_ranges_give(&ranges, a, 256);        // twice
  halod_free_ranges_give(&ranges, 1024, 256);     // free already
  halod_free_ranges_give(&ranges, b + 128, 256);  // overlaps the tail
  halod_free_ranges_give(&ranges, 4096, 256);     // past the end
  halod_free_ranges_give(&ranges, UINT64_MAX - 255, 256);
  assert_int_equal(ranges.taken, 1);
  check_tree(&ranges, 128, 4096);
  assert_int_equal(ranges.count, 2);
  halod_free_ranges_give(&ranges, b, 256);
  assert_int_equal(ranges.count, 1);
  halod_free_ranges_deinitialize(&ranges);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_first_fit_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_alignment, setup, teardown),
      cmocka_unit_test_setup_teardown(test_coalescing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_full_and_no_fit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_live_and_destruction, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_random_mixed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_random_fragmented, setup, teardown),
      cmocka_unit_test(test_out_of_memory),
      cmocka_unit_test(test_bad_return),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
