// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Framed messages over the supervisor-worker socket (see the header).
#include "hal/remote/remote_link.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fd_channel.h"
#include "common/status.h"
#include "common/tsan.h"

#define HALO_REMOTE_MAX_PARTS 8

void halo_remote_link_initialize(halo_remote_link_t *link, int fd) {
  memset(link, 0, sizeof(*link));
  link->fd = fd;
  pthread_mutex_init(&link->send_mutex, NULL);
  pthread_mutex_init(&link->outbox_mutex, NULL);
  halo_clock_cond_initialize(&link->outbox_cond);
  link->outbox_limit_bytes = HALO_REMOTE_OUTBOX_BYTES;
  link->outbox_limit_fds = HALO_REMOTE_OUTBOX_FDS;
}

void halo_remote_link_on_hung(halo_remote_link_t *link,
                              halo_remote_link_hung_fn hung, void *user_data) {
  link->hung_fn = hung;
  link->hung_user_data = user_data;
}

void halo_remote_link_limit_outbox(halo_remote_link_t *link, size_t bytes,
                                   uint32_t fds) {
  link->outbox_limit_bytes = bytes;
  link->outbox_limit_fds = fds;
}

halo_status_t halo_remote_link_limit_sends(halo_remote_link_t *link,
                                           int64_t timeout_ns) {
  struct timeval limit = {
      .tv_sec = (time_t)(timeout_ns / 1000000000),
      .tv_usec = (suseconds_t)(timeout_ns % 1000000000) / 1000};
  if (setsockopt(link->fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit))) {
    return halo_status_from_errno(errno, "SO_SNDTIMEO on a worker link");
  }
  link->send_limit_ns = timeout_ns;
  return NULL;
}

// ---------------------------------------------------------------- outbox

// What a send or post to a link that failed (or closed) returns.
static halo_status_t halo_remote_link_gone(void) {
  return halo_status_make(HALO_STATUS_UNAVAILABLE, "the device worker is gone");
}

// What an entry costs the outbox's bound: its bytes and its bookkeeping, so
// that many small messages are bounded too.
static size_t halo_remote_outbox_cost(const halo_remote_outbox_entry_t *entry) {
  return sizeof(*entry) + entry->size;
}

// Frees a chain of entries taken out of the outbox, closing the
// descriptors they still hold.
static void halo_remote_outbox_free(halo_remote_outbox_entry_t *entry) {
  while (entry) {
    halo_remote_outbox_entry_t *next = entry->next;
    if (entry->fd >= 0) close(entry->fd);
    free(entry);
    entry = next;
  }
}

// Takes every entry out of the outbox (|outbox_mutex| held; and
// |send_mutex|, or no other thread left: the first entry may be being
// written).
static halo_remote_outbox_entry_t *halo_remote_link_take_outbox(
    halo_remote_link_t *link) {
  halo_remote_outbox_entry_t *entries = link->outbox_head;
  link->outbox_head = link->outbox_tail = NULL;
  link->outbox_bytes = 0;
  link->outbox_fds = 0;
  return entries;
}

// Shuts the link down (|outbox_mutex| held): the peer sees its end, later
// sends and posts fail, and the writer wakes to empty the outbox. Returns
// whether this call did it (the first failure reports a hang).
static bool halo_remote_link_fail(halo_remote_link_t *link) {
  if (link->failed) return false;
  link->failed = true;
  if (link->fd >= 0) shutdown(link->fd, SHUT_RDWR);
  pthread_cond_broadcast(&link->outbox_cond);
  return true;
}

// Fails the link and empties the outbox (|send_mutex| held).
static bool halo_remote_link_fail_and_drop(halo_remote_link_t *link) {
  pthread_mutex_lock(&link->outbox_mutex);
  bool first = halo_remote_link_fail(link);
  halo_remote_outbox_entry_t *dropped = halo_remote_link_take_outbox(link);
  pthread_mutex_unlock(&link->outbox_mutex);
  halo_remote_outbox_free(dropped);
  return first;
}

void halo_remote_link_shut_down(halo_remote_link_t *link) {
  pthread_mutex_lock(&link->send_mutex);
  halo_remote_link_fail_and_drop(link);
  pthread_mutex_unlock(&link->send_mutex);
}

static void halo_remote_link_report_hung(halo_remote_link_t *link,
                                         halo_status_t status) {
  if (link->hung_fn) link->hung_fn(link->hung_user_data, status);
}

void halo_remote_link_outbox_size(halo_remote_link_t *link,
                                  uint32_t *out_messages, size_t *out_bytes) {
  pthread_mutex_lock(&link->outbox_mutex);
  uint32_t messages = 0;
  size_t bytes = 0;
  for (halo_remote_outbox_entry_t *entry = link->outbox_head; entry;
       entry = entry->next) {
    ++messages;
    bytes += entry->size - entry->sent;
  }
  pthread_mutex_unlock(&link->outbox_mutex);
  *out_messages = messages;
  *out_bytes = bytes;
}

void halo_remote_link_deinitialize(halo_remote_link_t *link) {
  // The writer ends: the socket is shut down first, so that a write of
  // its to a peer that reads nothing fails at once instead of waiting for
  // the send limit.
  pthread_mutex_lock(&link->outbox_mutex);
  bool writer = link->writer_joinable;
  link->stopping = true;
  if (writer && link->fd >= 0) shutdown(link->fd, SHUT_RDWR);
  pthread_cond_broadcast(&link->outbox_cond);
  pthread_mutex_unlock(&link->outbox_mutex);
  if (writer) pthread_join(link->writer, NULL);
  halo_remote_outbox_free(halo_remote_link_take_outbox(link));
  if (link->fd >= 0) close(link->fd);
  link->fd = -1;
  for (uint32_t i = 0; i < link->fd_count; ++i) close(link->fds[i]);
  link->fd_count = 0;
  free(link->in);
  link->in = NULL;
  pthread_cond_destroy(&link->outbox_cond);
  pthread_mutex_destroy(&link->outbox_mutex);
  pthread_mutex_destroy(&link->send_mutex);
}

// Moves |*iov| (|*count| entries) past |sent| bytes written.
static void halo_remote_link_advance(struct iovec **iov, int *count,
                                     size_t sent) {
  while (*count > 0 && sent >= (*iov)->iov_len) {
    sent -= (*iov)->iov_len;
    ++*iov;
    --*count;
  }
  if (*count > 0) {
    (*iov)->iov_base = (char *)(*iov)->iov_base + sent;
    (*iov)->iov_len -= sent;
  }
}

// Sends every byte of |iov|; the descriptor goes with the first chunk.
// |out_started|: whether any byte went (a failure after that leaves a
// partial message on the stream). |limit_ns| (0: none): the socket's
// SO_SNDTIMEO, which ends a write that made no progress for that long, and
// the bound on the whole message (a write cut short by the timeout returns
// what it wrote, and the next would wait as long again).
static halo_status_t halo_remote_link_send_all(int socket_fd, struct iovec *iov,
                                               int count, int fd,
                                               int64_t limit_ns,
                                               bool *out_started) {
  *out_started = false;
  int64_t deadline_ns = limit_ns > 0 ? halo_clock_now_ns() + limit_ns : 0;
  while (count > 0) {
    ssize_t sent = halo_fd_sendmsg(socket_fd, iov, count, fd, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // The socket's send time limit passed (the link is blocking).
        return halo_status_make(HALO_STATUS_DEADLINE_EXCEEDED,
                                "sending to the device worker: it read "
                                "nothing within the send time limit");
      }
      return halo_status_from_errno(errno, "sending to the device worker");
    }
    fd = -1;
    if (sent > 0) *out_started = true;
    if (deadline_ns && halo_clock_now_ns() >= deadline_ns) {
      size_t total = 0;
      for (int i = 0; i < count; ++i) total += iov[i].iov_len;
      if ((size_t)sent < total) {
        return halo_status_make(HALO_STATUS_DEADLINE_EXCEEDED,
                                "sending to the device worker: it read too "
                                "little within the send time limit");
      }
    }
    halo_remote_link_advance(&iov, &count, (size_t)sent);
  }
  return NULL;
}

// Writes what the socket takes now of |iov| (MSG_DONTWAIT), the descriptor
// with the first bytes; |out_sent| the bytes written. A full socket is no
// failure: it stops there.
static halo_status_t halo_remote_link_send_now(int socket_fd,
                                               const struct iovec *parts,
                                               int count, int fd,
                                               size_t *out_sent) {
  *out_sent = 0;
  struct iovec iov_storage[HALO_REMOTE_MAX_PARTS];
  memcpy(iov_storage, parts, sizeof(*parts) * (size_t)count);
  struct iovec *iov = iov_storage;
  while (count > 0) {
    ssize_t sent =
        halo_fd_sendmsg(socket_fd, iov, count, fd, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return NULL;
      return halo_status_from_errno(errno, "sending to the device worker");
    }
    fd = -1;
    *out_sent += (size_t)sent;
    halo_remote_link_advance(&iov, &count, (size_t)sent);
  }
  return NULL;
}

// A message framed for writing: the header, filled in, and the parts after
// it as |iov| (empty parts left out); |size| its bytes. |iov| points into
// the frame: it is not copied.
typedef struct halo_remote_frame_t {
  halo_remote_header_t header;
  struct iovec iov[HALO_REMOTE_MAX_PARTS];
  int count;
  size_t size;
} halo_remote_frame_t;

static halo_status_t halo_remote_link_frame(halo_remote_frame_t *frame,
                                            uint32_t type, uint64_t id,
                                            const halo_remote_part_t *parts,
                                            uint32_t part_count) {
  if (part_count + 1 > HALO_REMOTE_MAX_PARTS) {
    return halo_status_make(HALO_STATUS_INTERNAL,
                            "a worker message of %u parts", part_count);
  }
  memset(&frame->header, 0, sizeof(frame->header));
  frame->header.type = type;
  frame->header.id = id;
  frame->iov[0].iov_base = &frame->header;
  frame->iov[0].iov_len = sizeof(frame->header);
  frame->count = 1;
  for (uint32_t i = 0; i < part_count; ++i) {
    frame->header.length += parts[i].size;
    if (parts[i].size == 0) continue;
    frame->iov[frame->count].iov_base = (void *)parts[i].data;
    frame->iov[frame->count].iov_len = parts[i].size;
    ++frame->count;
  }
  frame->size = sizeof(frame->header) + frame->header.length;
  return NULL;
}

// Writes the outbox's messages in order (|send_mutex| held): |blocking|,
// each within the send limit, as a send; else what the socket takes now.
// NULL once the outbox is empty (or, not blocking, the socket is full). A
// message that cannot be written fails the link (its first bytes may have
// gone; and a message that was counted must not be skipped): the outbox
// is emptied and the failure returned, |out_first| whether this call
// failed the link.
static halo_status_t halo_remote_link_flush(halo_remote_link_t *link,
                                            bool blocking, bool *out_first) {
  *out_first = false;
  for (;;) {
    pthread_mutex_lock(&link->outbox_mutex);
    if (link->failed) {
      halo_remote_outbox_entry_t *dropped = halo_remote_link_take_outbox(link);
      pthread_mutex_unlock(&link->outbox_mutex);
      halo_remote_outbox_free(dropped);
      return halo_remote_link_gone();
    }
    halo_remote_outbox_entry_t *entry = link->outbox_head;
    pthread_mutex_unlock(&link->outbox_mutex);
    if (!entry) return NULL;
    // Only the holder of |send_mutex| writes or removes the first entry;
    // posts append behind it.
    struct iovec iov = {.iov_base = entry->bytes + entry->sent,
                        .iov_len = entry->size - entry->sent};
    int fd = entry->sent == 0 ? entry->fd : -1;
    halo_status_t status = NULL;
    size_t written = 0;
    if (blocking) {
      bool started = false;
      size_t rest = iov.iov_len;
      status = halo_remote_link_send_all(link->fd, &iov, 1, fd,
                                         link->send_limit_ns, &started);
      if (!status) written = rest;
    } else {
      status = halo_remote_link_send_now(link->fd, &iov, 1, fd, &written);
    }
    if (status) {
      *out_first = halo_remote_link_fail_and_drop(link);
      return status;
    }
    pthread_mutex_lock(&link->outbox_mutex);
    entry->sent += written;
    if (written > 0) link->outbox_progress_ns = halo_clock_now_ns();
    bool done = entry->sent == entry->size;
    if (done) {
      link->outbox_head = entry->next;
      if (!link->outbox_head) link->outbox_tail = NULL;
      link->outbox_bytes -= halo_remote_outbox_cost(entry);
      if (entry->fd >= 0) --link->outbox_fds;
    }
    pthread_mutex_unlock(&link->outbox_mutex);
    if (!done) return NULL;  // not blocking: the socket is full
    entry->next = NULL;
    halo_remote_outbox_free(entry);  // its descriptor went with it
  }
}

// The outbox's writer: sends what is posted while no send does, each
// message within the send limit; past it the peer is hung. Ends after
// HALO_REMOTE_OUTBOX_IDLE_NS without work, or at the link's end.
static void *halo_remote_link_writer_main(void *argument) {
  halo_remote_link_t *link = argument;
  pthread_mutex_lock(&link->outbox_mutex);
  for (;;) {
    if (!link->outbox_head) {
      if (link->stopping) break;
      struct timespec until =
          halo_clock_timespec(halo_clock_now_ns() + HALO_REMOTE_OUTBOX_IDLE_NS);
      int waited = pthread_cond_timedwait(&link->outbox_cond,
                                          &link->outbox_mutex, &until);
      if (waited == ETIMEDOUT && !link->outbox_head) break;
      continue;
    }
    pthread_mutex_unlock(&link->outbox_mutex);
    pthread_mutex_lock(&link->send_mutex);
    bool first = false;
    halo_status_t status = halo_remote_link_flush(link, true, &first);
    pthread_mutex_unlock(&link->send_mutex);
    if (status && first &&
        halo_status_code(status) == HALO_STATUS_DEADLINE_EXCEEDED) {
      halo_remote_link_report_hung(link, status);
    }
    halo_status_free(status);
    pthread_mutex_lock(&link->outbox_mutex);
  }
  link->writer_running = false;
  pthread_mutex_unlock(&link->outbox_mutex);
  return NULL;
}

// Queues |size| bytes of |iov| from |skip| on (|outbox_mutex| held), with
// a duplicate of |fd| (>= 0: none of the message went yet): first in the
// outbox if |front| (the rest of a message being sent by the holder of
// |send_mutex|), else last, counted if |count|. Starts the writer. Past
// the outbox's bound the link fails (|*out_hung|).
static halo_status_t halo_remote_link_enqueue(halo_remote_link_t *link,
                                              const struct iovec *iov,
                                              int count, size_t size,
                                              size_t skip, int fd, bool front,
                                              bool counted, bool *out_hung) {
  *out_hung = false;
  if (link->failed) {
    return halo_remote_link_gone();
  }
  size_t rest = size - skip;
  size_t bytes = link->outbox_bytes + sizeof(halo_remote_outbox_entry_t) + rest;
  uint32_t fds = link->outbox_fds + (fd >= 0 ? 1 : 0);
  bool over = bytes > link->outbox_limit_bytes ||
              (fd >= 0 && fds > link->outbox_limit_fds);
  if (over && link->send_limit_ns > 0 &&
      bytes <= link->outbox_limit_bytes * HALO_REMOTE_OUTBOX_HARD &&
      fds <= link->outbox_limit_fds * HALO_REMOTE_OUTBOX_HARD &&
      halo_clock_now_ns() - link->outbox_progress_ns < link->send_limit_ns) {
    over = false;  // past the bound, but the peer reads: a burst
  }
  if (over) {
    *out_hung = halo_remote_link_fail(link);
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "the device worker left %zu bytes and %u "
                            "descriptors of halod's messages unread "
                            "(at most %zu and %u): it counts as hung",
                            link->outbox_bytes, link->outbox_fds,
                            link->outbox_limit_bytes, link->outbox_limit_fds);
  }
  halo_remote_outbox_entry_t *entry = malloc(sizeof(*entry) + rest);
  if (!entry) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "oom (a device worker message of %zu bytes to "
                            "queue)",
                            rest);
  }
  entry->next = NULL;
  entry->size = rest;
  entry->sent = 0;
  entry->fd = -1;
  if (fd >= 0) {
    entry->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (entry->fd < 0) {
      halo_status_t status = halo_status_from_errno(
          errno, "duplicating a descriptor for a device worker message");
      free(entry);
      return status;
    }
  }
  size_t at = 0;
  for (int i = 0; i < count; ++i) {
    size_t length = iov[i].iov_len;
    size_t from = 0;
    if (skip > 0) {
      size_t skipped = skip < length ? skip : length;
      skip -= skipped;
      from = skipped;
    }
    memcpy(entry->bytes + at, (const char *)iov[i].iov_base + from,
           length - from);
    at += length - from;
  }
  if (!link->writer_running) {
    if (link->writer_joinable) {
      // It ended (idle) and only returns now: the join takes no time.
      pthread_join(link->writer, NULL);
      link->writer_joinable = false;
    }
    int error =
        pthread_create(&link->writer, NULL, halo_remote_link_writer_main, link);
    if (error) {
      halo_remote_outbox_free(entry);
      return halo_status_from_errno(error,
                                    "a device worker link's writer thread");
    }
    link->writer_running = true;
    link->writer_joinable = true;
  }
  if (counted && link->sent) {
    atomic_fetch_add_explicit(link->sent, 1, memory_order_seq_cst);
  }
  // An outbox that was empty starts the peer's time to take from it.
  if (!link->outbox_head) link->outbox_progress_ns = halo_clock_now_ns();
  if (front) {
    entry->next = link->outbox_head;
    link->outbox_head = entry;
    if (!link->outbox_tail) link->outbox_tail = entry;
  } else {
    if (link->outbox_tail) {
      link->outbox_tail->next = entry;
    } else {
      link->outbox_head = entry;
    }
    link->outbox_tail = entry;
  }
  link->outbox_bytes += halo_remote_outbox_cost(entry);
  if (entry->fd >= 0) ++link->outbox_fds;
  pthread_cond_broadcast(&link->outbox_cond);
  return NULL;
}

// |counter| NULL: halo_remote_link_send.
halo_status_t halo_remote_link_send_counted(halo_remote_link_t *link,
                                            _Atomic uint64_t *counter,
                                            uint32_t type, uint64_t id,
                                            const halo_remote_part_t *parts,
                                            uint32_t part_count, int fd) {
  halo_remote_frame_t frame;
  HALO_RETURN_IF_ERROR(
      halo_remote_link_frame(&frame, type, id, parts, part_count));
  // The two processes of a link order their work by its messages: a worker's
  // driver thread sends COMPLETE (a load thread, REPLY) once it is done with
  // the objects it used, and the supervisor sends DESTROY or DEALLOCATE for
  // them only after that, which the worker's receiving thread carries out.
  // That order passes through the other process, where ThreadSanitizer
  // cannot see it, and TSan took each such free for a race with the driver
  // thread's last read. Under TSan every send releases and every receive
  // acquires the link, which is the order the protocol gives: a message
  // received may answer any message this process sent before it.
  HALO_TSAN_RELEASE(link);
  pthread_mutex_lock(&link->send_mutex);
  halo_status_t status = NULL;
  if (link->fd < 0) {
    status = halo_remote_link_gone();
  }
  // What was posted before goes first, each message within the send limit
  // as this one (a peer that read nothing for that long is hung: the
  // caller handles it, as for this message). Counting starts once the
  // outbox is empty, so that a message posted before it goes before it,
  // uncounted.
  bool first = false;
  while (!status) {
    status = halo_remote_link_flush(link, true, &first);
    if (status) break;
    pthread_mutex_lock(&link->outbox_mutex);
    bool empty = !link->outbox_head;
    if (empty && counter) link->sent = counter;
    if (link->failed) {
      status = halo_remote_link_gone();
    }
    pthread_mutex_unlock(&link->outbox_mutex);
    if (empty || !counter) break;
  }
  if (!status) {
    // Counted first (see halo_remote_link_send_counted). A send that fails
    // before its first byte (a bad descriptor to pass, no memory) takes
    // its count back: the link stays usable. One that fails after it left
    // a partial message, which no receiver can frame, or that found the
    // peer not reading within the time limit: the link is shut down, and
    // the receiver sees its end.
    if (link->sent) {
      atomic_fetch_add_explicit(link->sent, 1, memory_order_seq_cst);
    }
    bool started = false;
    status = halo_remote_link_send_all(link->fd, frame.iov, frame.count, fd,
                                       link->send_limit_ns, &started);
    bool hung =
        status && halo_status_code(status) == HALO_STATUS_DEADLINE_EXCEEDED;
    if (status && !started && !hung && link->sent) {
      atomic_fetch_sub_explicit(link->sent, 1, memory_order_seq_cst);
    } else if (status && (started || hung)) {
      halo_remote_link_fail_and_drop(link);
    }
  }
  pthread_mutex_unlock(&link->send_mutex);
  return status;
}

halo_status_t halo_remote_link_send(halo_remote_link_t *link, uint32_t type,
                                    uint64_t id,
                                    const halo_remote_part_t *parts,
                                    uint32_t part_count, int fd) {
  return halo_remote_link_send_counted(link, NULL, type, id, parts, part_count,
                                       fd);
}

// A post with |send_mutex| held: the outbox's messages first, as far as
// the socket takes them now; then this one, at once if nothing is left
// before it, its rest queued first in the outbox.
static halo_status_t halo_remote_link_post_locked(halo_remote_link_t *link,
                                                  const struct iovec *iov,
                                                  int count, size_t size,
                                                  int fd, bool *out_hung) {
  *out_hung = false;
  bool first = false;
  HALO_RETURN_IF_ERROR(halo_remote_link_flush(link, false, &first));
  pthread_mutex_lock(&link->outbox_mutex);
  halo_status_t status = NULL;
  if (link->failed || link->outbox_head) {
    // Behind what is queued (or refused: the link failed).
    status = halo_remote_link_enqueue(link, iov, count, size, 0, fd, false,
                                      true, out_hung);
    pthread_mutex_unlock(&link->outbox_mutex);
    return status;
  }
  // Counted before its first byte (see halo_remote_link_send_counted);
  // posts that come meanwhile queue behind it.
  _Atomic uint64_t *counter = link->sent;
  if (counter) atomic_fetch_add_explicit(counter, 1, memory_order_seq_cst);
  pthread_mutex_unlock(&link->outbox_mutex);
  size_t written = 0;
  status = halo_remote_link_send_now(link->fd, iov, count, fd, &written);
  if (!status && written == size) return NULL;
  pthread_mutex_lock(&link->outbox_mutex);
  if (!status) {
    // The socket is full: the rest goes first in the outbox, before any
    // post that queued meanwhile.
    status =
        halo_remote_link_enqueue(link, iov, count, size, written,
                                 written == 0 ? fd : -1, true, false, out_hung);
  }
  halo_remote_outbox_entry_t *dropped = NULL;
  if (status && written == 0 && !link->failed) {
    // Nothing went: the link stays usable, the count is taken back.
    if (counter) atomic_fetch_sub_explicit(counter, 1, memory_order_seq_cst);
  } else if (status) {
    // Part of it went (or the outbox's bound failed the link): no receiver
    // could frame what follows.
    halo_remote_link_fail(link);
    dropped = halo_remote_link_take_outbox(link);
  }
  pthread_mutex_unlock(&link->outbox_mutex);
  halo_remote_outbox_free(dropped);
  return status;
}

halo_status_t halo_remote_link_post(halo_remote_link_t *link, uint32_t type,
                                    uint64_t id,
                                    const halo_remote_part_t *parts,
                                    uint32_t part_count, int fd) {
  halo_remote_frame_t frame;
  HALO_RETURN_IF_ERROR(
      halo_remote_link_frame(&frame, type, id, parts, part_count));
  if (link->fd < 0) {
    return halo_remote_link_gone();
  }
  // Under TSan: see halo_remote_link_send_counted (the message leaves this
  // thread here, whichever thread writes it).
  HALO_TSAN_RELEASE(link);
  halo_status_t status = NULL;
  bool hung = false;
  if (pthread_mutex_trylock(&link->send_mutex) == 0) {
    status = halo_remote_link_post_locked(link, frame.iov, frame.count,
                                          frame.size, fd, &hung);
    pthread_mutex_unlock(&link->send_mutex);
  } else {
    // Another thread is sending (perhaps waiting for a peer that reads
    // nothing): queued behind what it sends, counted now.
    pthread_mutex_lock(&link->outbox_mutex);
    status = halo_remote_link_enqueue(link, frame.iov, frame.count, frame.size,
                                      0, fd, false, true, &hung);
    pthread_mutex_unlock(&link->outbox_mutex);
  }
  if (hung) halo_remote_link_report_hung(link, status);
  return status;
}

void halo_remote_link_stop_counting(halo_remote_link_t *link) {
  pthread_mutex_lock(&link->send_mutex);
  pthread_mutex_lock(&link->outbox_mutex);
  link->sent = NULL;
  pthread_mutex_unlock(&link->outbox_mutex);
  pthread_mutex_unlock(&link->send_mutex);
}

void halo_remote_link_count_receives(halo_remote_link_t *link,
                                     const _Atomic uint64_t *counter,
                                     uint64_t received) {
  link->peer_sent = counter;
  link->received = received;
}

// One read of at most |size| bytes into |data|; descriptors that come with
// it join the link's queue. 0 bytes: the peer closed.
static halo_status_t halo_remote_link_read(halo_remote_link_t *link, void *data,
                                           size_t size, size_t *out_read) {
  union {
    struct cmsghdr header;
    char bytes[CMSG_SPACE(sizeof(int) * HALO_REMOTE_LINK_MAX_FDS)];
  } control;
  struct iovec iov = {.iov_base = data, .iov_len = size};
  struct msghdr message = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = control.bytes,
                           .msg_controllen = sizeof(control.bytes)};
  ssize_t got;
  do {
    got = recvmsg(link->fd, &message, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    // The socket's receive timeout (SO_RCVTIMEO, which halod's reader
    // sets): the peer sent no more of the message.
    return halo_status_make(HALO_STATUS_DEADLINE_EXCEEDED,
                            "the device link's peer sent no more of a "
                            "message within the receive timeout");
  }
  if (got < 0) {
    return halo_status_from_errno(errno, "receiving from the device link");
  }
  for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&message); cmsg;
       cmsg = CMSG_NXTHDR(&message, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
      continue;
    }
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t k = 0; k < count; ++k) {
      int fd;
      memcpy(&fd, CMSG_DATA(cmsg) + k * sizeof(int), sizeof(int));
      if (link->fd_count < HALO_REMOTE_LINK_MAX_FDS) {
        link->fds[link->fd_count++] = fd;
      } else {
        close(fd);
      }
    }
  }
  *out_read = (size_t)got;
  if (got == 0) {
    return halo_status_make(HALO_STATUS_UNAVAILABLE, "the device link closed");
  }
  return NULL;
}

// Fills |out| with |size| bytes: buffered ones first, then from the socket
// (small reads through the buffer, so that what follows is read ahead).
static halo_status_t halo_remote_link_take(halo_remote_link_t *link, void *out,
                                           size_t size) {
  char *bytes = out;
  while (size > 0) {
    size_t buffered = link->in_end - link->in_start;
    if (buffered > 0) {
      size_t n = buffered < size ? buffered : size;
      memcpy(bytes, link->in + link->in_start, n);
      link->in_start += n;
      bytes += n;
      size -= n;
      continue;
    }
    size_t got = 0;
    if (size >= HALO_REMOTE_LINK_BUFFER) {
      HALO_RETURN_IF_ERROR(halo_remote_link_read(link, bytes, size, &got));
      bytes += got;
      size -= got;
      continue;
    }
    if (!link->in) {
      link->in = malloc(HALO_REMOTE_LINK_BUFFER);
      if (!link->in) {
        return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED, "oom");
      }
    }
    link->in_start = link->in_end = 0;
    HALO_RETURN_IF_ERROR(
        halo_remote_link_read(link, link->in, HALO_REMOTE_LINK_BUFFER, &got));
    link->in_end = got;
  }
  return NULL;
}

// Whether a message of |type| carries a descriptor.
static bool halo_remote_link_carries_fd(uint32_t type) {
  switch (type) {
    case HALO_REMOTE_REGISTER_HOST:
    case HALO_REMOTE_RING_FLIGHT:
    case HALO_REMOTE_RING_ATTACH:
    case HALO_REMOTE_RING_DOORBELL:
      return true;
    default:
      return false;
  }
}

halo_status_t halo_remote_link_receive(halo_remote_link_t *link,
                                       halo_remote_header_t *out_header,
                                       void **out_payload, int *out_fd) {
  *out_payload = NULL;
  *out_fd = -1;
  HALO_RETURN_IF_ERROR(
      halo_remote_link_take(link, out_header, sizeof(*out_header)));
  if (link->peer_sent) ++link->received;
  // Under TSan: see halo_remote_link_send.
  HALO_TSAN_ACQUIRE(link);
  if (out_header->length > HALO_REMOTE_MAX_PAYLOAD) {
    return halo_status_make(HALO_STATUS_DATA_LOSS,
                            "a device link message of %llu bytes",
                            (unsigned long long)out_header->length);
  }
  if (out_header->length > 0) {
    void *payload = malloc(out_header->length);
    if (!payload) {
      return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                              "oom (a device link message of %llu bytes)",
                              (unsigned long long)out_header->length);
    }
    halo_status_t status =
        halo_remote_link_take(link, payload, out_header->length);
    if (status) {
      free(payload);
      return status;
    }
    *out_payload = payload;
  }
  // Descriptors travel only with REGISTER_HOST, RING_FLIGHT, RING_ATTACH and
  // RING_DOORBELL, one each, in order.
  if (halo_remote_link_carries_fd(out_header->type) && link->fd_count > 0) {
    *out_fd = link->fds[0];
    memmove(link->fds, link->fds + 1, (link->fd_count - 1) * sizeof(int));
    --link->fd_count;
  }
  return NULL;
}

uint64_t halo_remote_link_counted(const halo_remote_link_t *link) {
  return link->peer_sent
             ? atomic_load_explicit(link->peer_sent, memory_order_seq_cst)
             : 0;
}

bool halo_remote_link_counted_ahead(const halo_remote_link_t *link,
                                    uint64_t counted) {
  if (!link->peer_sent) return false;
  uint64_t now = atomic_load_explicit(link->peer_sent, memory_order_seq_cst);
  return link->received < (now < counted ? now : counted);
}

bool halo_remote_link_readable(halo_remote_link_t *link) {
  if (link->in_end > link->in_start) return true;  // read ahead
  // Counted: nothing counted past the messages taken, nothing to read (but
  // every HALO_REMOTE_LINK_POLL_EVERY-th look polls: a peer that closed
  // the link). A count ahead is confirmed by a poll: a counted message
  // whose first byte is not on the socket yet is still being sent, so
  // nothing the peer did after sending it has happened yet, and it is
  // taken next time; a count behind is a peer that does not count.
  if (link->peer_sent &&
      atomic_load_explicit(link->peer_sent, memory_order_seq_cst) ==
          link->received &&
      ++link->looks < HALO_REMOTE_LINK_POLL_EVERY) {
    return false;
  }
  link->looks = 0;
  struct pollfd poll_fd = {.fd = link->fd, .events = POLLIN};
  return poll(&poll_fd, 1, 0) == 1;
}

void halo_remote_link_poll_next(halo_remote_link_t *link) {
  link->looks = HALO_REMOTE_LINK_POLL_EVERY;
}

bool halo_remote_link_wait(halo_remote_link_t *link, int64_t spin_ns,
                           int timeout_ms) {
  if (link->in_end > link->in_start) return true;  // read ahead
  struct pollfd poll_fd = {.fd = link->fd, .events = POLLIN};
  int64_t spin_until = halo_clock_now_ns() + spin_ns;
  do {
    if (poll(&poll_fd, 1, 0) == 1) return true;
  } while (spin_ns > 0 && halo_clock_now_ns() < spin_until);
  if (timeout_ms == 0) return false;  // looked just now (the loop's check)
  int ready;
  do {
    ready = poll(&poll_fd, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  return ready > 0;
}

// ---------------------------------------------------------------- messages

halo_status_t halo_remote_usage_decode(const void *payload, uint64_t length,
                                       halo_hal_device_usage_t *out_usage) {
  *out_usage = (halo_hal_device_usage_t){0};
  if (length != sizeof(*out_usage)) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "a USAGE message of %llu bytes (%zu expected)",
                            (unsigned long long)length, sizeof(*out_usage));
  }
  halo_hal_device_usage_t usage;
  memcpy(&usage, payload, sizeof(usage));
  if (usage.reserved != 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "a USAGE message with reserved bits set (0x%x)",
                            usage.reserved);
  }
  *out_usage = usage;
  return NULL;
}
