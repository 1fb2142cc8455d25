// libhalo internals shared by client.c, buffer.c and semaphore.c.
#ifndef HALO_CLIENT_CLIENT_H_
#define HALO_CLIENT_CLIENT_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/u64_map.h"
#include "common/wire.h"
#include "halo/halo.h"

// A memfd mapping shared by the objects on it (semaphore page or arena).
typedef struct halo_mapping_t {
  void *pointer;
  uint64_t size;
  uint32_t references;
} halo_mapping_t;

// Objects the client still holds (released by halo_client_close).
typedef struct halo_object_link_t {
  struct halo_object_link_t *prev;
  struct halo_object_link_t *next;
  bool is_semaphore;
} halo_object_link_t;

struct halo_client_s {
  nng_socket socket;
  nng_ctx ctx;
  nng_aio *aio;
  pthread_mutex_t call_mutex;  // one request at a time on |ctx|
  _Atomic bool lost;           // the connection to halod is gone
  uint64_t session_id;
  uint8_t token[16];
  uint64_t incarnation;
  char address[512];
  // The fd channel and the daemon's liveness.
  int fd_channel;
  pthread_mutex_t fd_mutex;
  int32_t daemon_pid;
  int daemon_pidfd;
  // Mappings and live objects, under |state_mutex|.
  pthread_mutex_t state_mutex;
  halo_u64_map_t pages;        // page id -> halo_mapping_t
  halo_u64_map_t arenas;       // arena id -> halo_mapping_t
  halo_object_link_t objects;  // sentinel
};

// One request/response round trip (thread-safe). Frees nothing of
// |request|; the caller frees |*out_response|.
halo_status_t halo_client_call(halo_client_t *client,
                               const halo_wire_request_t *request,
                               halo_wire_response_t **out_response);

// Same, for requests whose reply has no body.
halo_status_t halo_client_call_status(halo_client_t *client,
                                      const halo_wire_request_t *request);

// Maps (or reuses) page |page_id| read-only / arena |arena_id| read-write
// through the fd channel, counting a reference.
halo_status_t halo_client_map_page(halo_client_t *client, uint64_t page_id,
                                   void **out_pointer);
void halo_client_unmap_page(halo_client_t *client, uint64_t page_id);
halo_status_t halo_client_map_arena(halo_client_t *client, uint64_t arena_id,
                                    uint64_t arena_size, void **out_pointer);
void halo_client_unmap_arena(halo_client_t *client, uint64_t arena_id);

void halo_client_track(halo_client_t *client, halo_object_link_t *link,
                       bool is_semaphore);
void halo_client_untrack(halo_client_t *client, halo_object_link_t *link);

// Release helpers for halo_client_close (buffer.c, semaphore.c).
void halo_buffer_release_link(halo_object_link_t *link);
void halo_semaphore_release_link(halo_object_link_t *link);

#define HALO_CHECK_ARG(cond, ...)                                         \
  do {                                                                    \
    if (!(cond))                                                          \
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT, __VA_ARGS__); \
  } while (0)

#endif  // HALO_CLIENT_CLIENT_H_
