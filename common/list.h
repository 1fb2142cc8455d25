// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// An intrusive doubly linked list: the entry embeds a halo_list_link_t and
// the list keeps its first and last link. Adding at either end, inserting
// after a given link and removing any link cost O(1); nothing is allocated.
// Used for a semaphore's timepoints (hal/semaphore.c), the caches' LRU lists
// (daemon/cache.c), a session's submissions (daemon/submission.c), the
// CUDA driver's watch list (hal/cuda/cuda_queue.c) and the /metrics server's
// connections (daemon/metrics_http.c).
//
// A list zeroed (or halo_list_initialize'd) is empty. A link removed, or
// never added, has NULL |prev| and |next|; so does the only link of a
// list, so NULL pointers do not tell whether a link is in a list: its owner
// keeps that (a flag, or knowing which list holds it). A link is in one list
// at a time, and every call on a link names the list that holds it.
//
// Thread-compatible: the list's owner says which thread may change it (or
// which mutex guards it), for the list and the links in it alike; a link's
// pointers belong to whoever owns the list that holds it.
#ifndef HALO_COMMON_LIST_H_
#define HALO_COMMON_LIST_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct halo_list_link_t {
  struct halo_list_link_t *prev;  // towards the head
  struct halo_list_link_t *next;  // towards the tail
} halo_list_link_t;

typedef struct halo_list_t {
  halo_list_link_t *head;
  halo_list_link_t *tail;
} halo_list_t;

// The entry of |type| whose |member| (a halo_list_link_t) is |link|; NULL
// when |link| is NULL (the end of a walk).
#define HALO_LIST_ENTRY(link, type, member) \
  ((type *)halo_list_entry_at((link), offsetof(type, member)))

static inline void *halo_list_entry_at(const halo_list_link_t *link,
                                       size_t offset) {
  return link ? (void *)((uintptr_t)link - offset) : NULL;
}

static inline void halo_list_initialize(halo_list_t *list) {
  list->head = list->tail = NULL;
}

static inline bool halo_list_empty(const halo_list_t *list) {
  return list->head == NULL;
}

// Inserts |link| (in no list) after |after|, a link of |list|, or at the
// front when |after| is NULL.
static inline void halo_list_insert_after(halo_list_t *list,
                                          halo_list_link_t *after,
                                          halo_list_link_t *link) {
  link->prev = after;
  link->next = after ? after->next : list->head;
  if (link->next) {
    link->next->prev = link;
  } else {
    list->tail = link;
  }
  if (after) {
    after->next = link;
  } else {
    list->head = link;
  }
}

static inline void halo_list_push_front(halo_list_t *list,
                                        halo_list_link_t *link) {
  halo_list_insert_after(list, NULL, link);
}

static inline void halo_list_push_back(halo_list_t *list,
                                       halo_list_link_t *link) {
  halo_list_insert_after(list, list->tail, link);
}

// Takes |link|, which |list| holds, out of it; its pointers are NULL after.
static inline void halo_list_remove(halo_list_t *list, halo_list_link_t *link) {
  if (link->prev) {
    link->prev->next = link->next;
  } else {
    list->head = link->next;
  }
  if (link->next) {
    link->next->prev = link->prev;
  } else {
    list->tail = link->prev;
  }
  link->prev = link->next = NULL;
}

// Moves every link of |list|, in order, into the list returned, and leaves
// |list| empty (the links are not touched).
static inline halo_list_t halo_list_take_all(halo_list_t *list) {
  halo_list_t taken = *list;
  halo_list_initialize(list);
  return taken;
}

#endif  // HALO_COMMON_LIST_H_
