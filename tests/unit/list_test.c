// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of the intrusive list (common/list.h): adding at either end
// and after a link, removing at the head, in the middle, at the tail and
// the only link, taking a whole list, and the entry of a link. Every check
// walks the list both ways.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "common/list.h"

// The link is not the first member: HALO_LIST_ENTRY must subtract its
// offset.
typedef struct item_t {
  int value;
  halo_list_link_t link;
} item_t;

static item_t *item_of(halo_list_link_t *link) {
  return HALO_LIST_ENTRY(link, item_t, link);
}

// |list| holds exactly the items of |values|, in that order, linked both
// ways, with head and tail at its ends.
static void expect_values(const halo_list_t *list, const int *values,
                          size_t count) {
  if (count == 0) {
    assert_true(halo_list_empty(list));
    assert_null(list->head);
    assert_null(list->tail);
    return;
  }
  assert_false(halo_list_empty(list));
  assert_non_null(list->head);
  assert_non_null(list->tail);
  assert_null(list->head->prev);
  assert_null(list->tail->next);
  size_t i = 0;
  halo_list_link_t *previous = NULL;
  for (halo_list_link_t *link = list->head; link; link = link->next) {
    assert_true(i < count);
    assert_ptr_equal(link->prev, previous);
    assert_int_equal(item_of(link)->value, values[i]);
    previous = link;
    ++i;
  }
  assert_int_equal(i, count);
  assert_ptr_equal(list->tail, previous);
  // Backwards from the tail: the same items, reversed.
  for (halo_list_link_t *link = list->tail; link; link = link->prev) {
    assert_true(i > 0);
    --i;
    assert_int_equal(item_of(link)->value, values[i]);
  }
  assert_int_equal(i, 0);
}

static void expect_unlinked(const item_t *item) {
  assert_null(item->link.prev);
  assert_null(item->link.next);
}

static void test_entry_of_link(void **state) {
  (void)state;
  item_t item = {.value = 7};
  assert_ptr_equal(item_of(&item.link), &item);
  assert_int_equal(item_of(&item.link)->value, 7);
  assert_null(item_of(NULL));
}

static void test_empty(void **state) {
  (void)state;
  halo_list_t zeroed = {0};
  expect_values(&zeroed, NULL, 0);
  halo_list_link_t stale;
  halo_list_t list = {.head = &stale, .tail = &stale};
  halo_list_initialize(&list);
  expect_values(&list, NULL, 0);
  halo_list_t taken = halo_list_take_all(&list);
  expect_values(&taken, NULL, 0);
  expect_values(&list, NULL, 0);
}

static void test_push_back_and_front(void **state) {
  (void)state;
  item_t items[4] = {{.value = 0}, {.value = 1}, {.value = 2}, {.value = 3}};
  halo_list_t list;
  halo_list_initialize(&list);
  halo_list_push_back(&list, &items[1].link);
  expect_values(&list, (const int[]){1}, 1);
  halo_list_push_back(&list, &items[2].link);
  halo_list_push_front(&list, &items[0].link);
  halo_list_push_back(&list, &items[3].link);
  expect_values(&list, (const int[]){0, 1, 2, 3}, 4);
  // Front only: newest first.
  halo_list_t stack;
  halo_list_initialize(&stack);
  item_t more[3] = {{.value = 10}, {.value = 11}, {.value = 12}};
  for (int i = 0; i < 3; ++i) halo_list_push_front(&stack, &more[i].link);
  expect_values(&stack, (const int[]){12, 11, 10}, 3);
}

static void test_insert_after(void **state) {
  (void)state;
  item_t items[6];
  for (int i = 0; i < 6; ++i) items[i] = (item_t){.value = i};
  halo_list_t list;
  halo_list_initialize(&list);
  // After nothing, into an empty list: the only link.
  halo_list_insert_after(&list, NULL, &items[2].link);
  expect_values(&list, (const int[]){2}, 1);
  // After the tail: the new tail.
  halo_list_insert_after(&list, &items[2].link, &items[5].link);
  expect_values(&list, (const int[]){2, 5}, 2);
  // After nothing: the new head.
  halo_list_insert_after(&list, NULL, &items[0].link);
  expect_values(&list, (const int[]){0, 2, 5}, 3);
  // In the middle.
  halo_list_insert_after(&list, &items[0].link, &items[1].link);
  halo_list_insert_after(&list, &items[2].link, &items[3].link);
  halo_list_insert_after(&list, &items[3].link, &items[4].link);
  expect_values(&list, (const int[]){0, 1, 2, 3, 4, 5}, 6);
}

// Sorted by value, equal values in the order added, each placed after the
// last one at or below its value looked for from the tail (as a
// semaphore's timepoints are).
static void test_sorted_insert_from_tail(void **state) {
  (void)state;
  static const int values[] = {5, 3, 5, 9, 1, 5, 9, 0, 3};
  enum { COUNT = sizeof(values) / sizeof(values[0]) };
  item_t items[COUNT];
  halo_list_t list;
  halo_list_initialize(&list);
  for (int i = 0; i < COUNT; ++i) {
    items[i] = (item_t){.value = values[i]};
    halo_list_link_t *before = list.tail;
    while (before && item_of(before)->value > values[i]) before = before->prev;
    halo_list_insert_after(&list, before, &items[i].link);
  }
  expect_values(&list, (const int[]){0, 1, 3, 3, 5, 5, 5, 9, 9}, COUNT);
  // Equal values in the order added: the three 5s are items 0, 2, 5.
  halo_list_link_t *link = list.head;
  for (int skip = 0; skip < 4; ++skip) link = link->next;
  assert_ptr_equal(link, &items[0].link);
  assert_ptr_equal(link->next, &items[2].link);
  assert_ptr_equal(link->next->next, &items[5].link);
}

static void test_remove(void **state) {
  (void)state;
  item_t items[5];
  halo_list_t list;
  halo_list_initialize(&list);
  for (int i = 0; i < 5; ++i) {
    items[i] = (item_t){.value = i};
    halo_list_push_back(&list, &items[i].link);
  }
  // The middle.
  halo_list_remove(&list, &items[2].link);
  expect_unlinked(&items[2]);
  expect_values(&list, (const int[]){0, 1, 3, 4}, 4);
  // The head.
  halo_list_remove(&list, &items[0].link);
  expect_unlinked(&items[0]);
  expect_values(&list, (const int[]){1, 3, 4}, 3);
  // The tail.
  halo_list_remove(&list, &items[4].link);
  expect_unlinked(&items[4]);
  expect_values(&list, (const int[]){1, 3}, 2);
  // A removed link goes back in, in the middle.
  halo_list_insert_after(&list, &items[1].link, &items[2].link);
  expect_values(&list, (const int[]){1, 2, 3}, 3);
  halo_list_remove(&list, &items[3].link);
  halo_list_remove(&list, &items[1].link);
  expect_values(&list, (const int[]){2}, 1);
  // The only link: the list is empty after.
  halo_list_remove(&list, &items[2].link);
  expect_unlinked(&items[2]);
  expect_values(&list, NULL, 0);
  // And takes links again.
  halo_list_push_front(&list, &items[4].link);
  halo_list_push_front(&list, &items[3].link);
  expect_values(&list, (const int[]){3, 4}, 2);
}

// Removing the head again and again empties the list in order (how the
// semaphore fires its timepoints and the CUDA watchdog fails a taken list).
static void test_remove_head_until_empty(void **state) {
  (void)state;
  item_t items[4];
  halo_list_t list;
  halo_list_initialize(&list);
  for (int i = 0; i < 4; ++i) {
    items[i] = (item_t){.value = i};
    halo_list_push_back(&list, &items[i].link);
  }
  for (int i = 0; i < 4; ++i) {
    item_t *first = item_of(list.head);
    assert_ptr_equal(first, &items[i]);
    halo_list_remove(&list, &first->link);
    expect_unlinked(first);
  }
  expect_values(&list, NULL, 0);
}

static void test_take_all(void **state) {
  (void)state;
  item_t items[4];
  halo_list_t list;
  halo_list_initialize(&list);
  for (int i = 0; i < 3; ++i) {
    items[i] = (item_t){.value = i};
    halo_list_push_back(&list, &items[i].link);
  }
  halo_list_t taken = halo_list_take_all(&list);
  expect_values(&list, NULL, 0);
  expect_values(&taken, (const int[]){0, 1, 2}, 3);
  // Both go on independently.
  items[3] = (item_t){.value = 3};
  halo_list_push_back(&list, &items[3].link);
  expect_values(&list, (const int[]){3}, 1);
  halo_list_remove(&taken, &items[1].link);
  expect_values(&taken, (const int[]){0, 2}, 2);
  expect_values(&list, (const int[]){3}, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_entry_of_link),
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_push_back_and_front),
      cmocka_unit_test(test_insert_after),
      cmocka_unit_test(test_sorted_insert_from_tail),
      cmocka_unit_test(test_remove),
      cmocka_unit_test(test_remove_head_until_empty),
      cmocka_unit_test(test_take_all),
  };
  return cmocka_run_group_tests_name("list", tests, NULL, NULL);
}
