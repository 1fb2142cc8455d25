// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "daemon/metrics_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "common/clock.h"
#include "common/list.h"
#include "common/log.h"
#include "common/status.h"
#include "daemon/metrics.h"

// How long a scrape waits for the loop to render a snapshot before it is
// served the last one. A loop that is not blocked answers within
// milliseconds (tens under sanitizers; rendering takes well under one), so
// 1 s passes only when it is blocked (a control call waiting for a hung
// worker, up to 30 s), and a scrape that waited it still ends far inside
// Prometheus' scrape_timeout (10 s by default).
#define HALOD_METRICS_HTTP_WAIT_NS 1000000000LL

// Connections served at once, and of one client address: past either a
// connection is closed as it arrives, so one client (an address) holds at
// most an eighth of them (MHD_OPTION_PER_IP_CONNECTION_LIMIT) and a
// scraper of another address always finds room.
#define HALOD_METRICS_HTTP_CONNECTIONS 64u
#define HALOD_METRICS_HTTP_ADDRESS_CONNECTIONS 8u
// The time a connection has to complete a request: from its accept, or
// from the end of its last request. libmicrohttpd's own timeout counts
// idle time only (a client trickling a header line now and then keeps a
// connection forever); at this deadline the connection is closed, however
// much it sent. A scrape is answered within about 1 s
// (HALOD_METRICS_HTTP_WAIT_NS), so 5 s leaves a slow one room; a
// keep-alive connection idle that long is closed too (Prometheus connects
// again).
#define HALOD_METRICS_HTTP_REQUEST_S 5u
#define HALOD_METRICS_HTTP_REQUEST_NS \
  ((int64_t)HALOD_METRICS_HTTP_REQUEST_S * 1000000000LL)
#define HALOD_METRICS_HTTP_LOG_NS 1000000000LL

#define HALOD_METRICS_FORMAT_COUNT 2

static const char *const kContentTypes[HALOD_METRICS_FORMAT_COUNT] = {
    "text/plain; version=0.0.4; charset=utf-8",
    "application/openmetrics-text; version=1.0.0; charset=utf-8",
};

// An open connection (from libmicrohttpd's notification of its start to
// that of its close, which comes before its socket is closed) and the
// deadline of its request.
typedef struct halod_metrics_http_connection_t {
  halo_list_link_t link;  // in halod_metrics_http_t.connections
  int fd;
  int64_t deadline_ns;  // monotonic
  bool shut;            // shut down for its deadline: closing
  char peer[INET6_ADDRSTRLEN];
} halod_metrics_http_connection_t;

struct halod_metrics_http_t {
  halod_t *daemon;
  struct MHD_Daemon *server;  // NULL once stopped
  uv_async_t render;          // the HTTP thread asks the loop to render
  pthread_t reaper;           // closes connections past their deadline
  bool reaper_started;

  // Below: under |mutex|, shared by the loop and the HTTP thread.
  pthread_mutex_t mutex;
  pthread_cond_t published;  // |done| advanced, or |stopping|
  uint64_t asked;            // snapshots asked for
  uint64_t done;             // the snapshots of |texts| answer asks <= done
  unsigned formats;          // formats asked for since the loop took asks
  // When the loop was first asked after it last took the asks; 0: it took
  // every ask. Scrapes wait until HALOD_METRICS_HTTP_WAIT_NS after it.
  int64_t untaken_since_ns;
  char *texts[HALOD_METRICS_FORMAT_COUNT];  // the latest; NULL: none (OOM)
  int64_t rendered_ns[HALOD_METRICS_FORMAT_COUNT];  // when, monotonic
  bool stopping;
  // The open connections, newest first, with their deadlines (also the
  // reaper's); it waits on |deadlines_changed| until the earliest.
  halo_list_t connections;
  pthread_cond_t deadlines_changed;

  // libmicrohttpd's messages logged at most one per
  // HALOD_METRICS_HTTP_LOG_NS: when the last was, how many were not since.
  pthread_mutex_t log_mutex;
  int64_t logged_ns;
  uint64_t unlogged;
};

// ------------------------------------------------------------------ address

halo_status_t halod_metrics_http_parse_address(const char *text,
                                               struct sockaddr_storage *out,
                                               socklen_t *out_length) {
  memset(out, 0, sizeof(*out));
  char host[64];
  const char *port_text = NULL;
  bool ipv6 = text[0] == '[';
  if (ipv6) {
    const char *close = strchr(text, ']');
    if (!close || close[1] != ':' ||
        (size_t)(close - text - 1) >= sizeof(host)) {
      goto bad;
    }
    memcpy(host, text + 1, (size_t)(close - text - 1));
    host[close - text - 1] = '\0';
    port_text = close + 2;
  } else {
    const char *colon = strrchr(text, ':');
    if (!colon || (size_t)(colon - text) >= sizeof(host)) goto bad;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    port_text = colon + 1;
  }
  char *end = NULL;
  errno = 0;
  unsigned long port = strtoul(port_text, &end, 10);
  if (!*port_text || *end || errno || port > 65535 || port_text[0] == '-' ||
      port_text[0] == '+' || port_text[0] == ' ') {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "'%s': the port is not a number in 0..65535", text);
  }
  if (ipv6) {
    struct sockaddr_in6 *address = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET6, host, &address->sin6_addr) != 1) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "'%s': '%s' is not an IPv6 address", text, host);
    }
    address->sin6_family = AF_INET6;
    address->sin6_port = htons((uint16_t)port);
    *out_length = sizeof(*address);
  } else {
    struct sockaddr_in *address = (struct sockaddr_in *)out;
    if (inet_pton(AF_INET, host, &address->sin_addr) != 1) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "'%s': '%s' is not an IPv4 address (an IPv6 "
                              "address goes in brackets: [::1]:9400)",
                              text, host);
    }
    address->sin_family = AF_INET;
    address->sin_port = htons((uint16_t)port);
    *out_length = sizeof(*address);
  }
  return NULL;
bad:
  return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                          "'%s' is not HOST:PORT (e.g. 127.0.0.1:9400 or "
                          "[::1]:9400; \"\" turns /metrics off)",
                          text);
}

// ------------------------------------------------------------------ loop

// Loop thread: renders |formats| (a bit per format) and publishes them as
// the answer to the asks up to |asked|. A format that could not be
// rendered (out of memory) keeps its last snapshot, which ages.
static void halod_metrics_http_publish(halod_metrics_http_t *http,
                                       unsigned formats, uint64_t asked) {
  char *texts[HALOD_METRICS_FORMAT_COUNT] = {NULL};
  int64_t rendered_ns[HALOD_METRICS_FORMAT_COUNT] = {0};
  for (int f = 0; f < HALOD_METRICS_FORMAT_COUNT; ++f) {
    if (formats & (1u << f)) {
      texts[f] = halod_metrics_render(http->daemon, (halod_metrics_format_t)f);
      rendered_ns[f] = halo_clock_now_ns();
    }
  }
  pthread_mutex_lock(&http->mutex);
  for (int f = 0; f < HALOD_METRICS_FORMAT_COUNT; ++f) {
    if (!texts[f]) continue;
    free(http->texts[f]);
    http->texts[f] = texts[f];
    http->rendered_ns[f] = rendered_ns[f];
  }
  if (asked > http->done) http->done = asked;
  pthread_cond_broadcast(&http->published);
  pthread_mutex_unlock(&http->mutex);
}

// Loop thread: takes the asks made so far and answers them.
static void halod_metrics_http_on_render(uv_async_t *async) {
  halod_metrics_http_t *http = async->data;
  pthread_mutex_lock(&http->mutex);
  uint64_t asked = http->asked;
  unsigned formats = http->formats;
  http->formats = 0;
  http->untaken_since_ns = 0;
  pthread_mutex_unlock(&http->mutex);
  if (formats) halod_metrics_http_publish(http, formats, asked);
}

// ------------------------------------------------------------------ HTTP

// Whether the Accept header asks for OpenMetrics: one of its media ranges
// is application/openmetrics-text with a q above 0.
static bool halod_metrics_http_wants_openmetrics(const char *accept) {
  if (!accept) return false;
  static const char kType[] = "application/openmetrics-text";
  for (const char *range = accept; *range;) {
    size_t length = strcspn(range, ",");
    while (length > 0 && (*range == ' ' || *range == '\t')) {
      ++range;
      --length;
    }
    if (length >= sizeof(kType) - 1 &&
        strncasecmp(range, kType, sizeof(kType) - 1) == 0 &&
        (length == sizeof(kType) - 1 || range[sizeof(kType) - 1] == ';' ||
         range[sizeof(kType) - 1] == ' ')) {
      bool refused = false;
      for (const char *p = range; p < range + length; ++p) {
        if (*p != ';') continue;
        const char *q = p + 1;
        while (*q == ' ') ++q;
        if ((q[0] == 'q' || q[0] == 'Q') && q[1] == '=') {
          refused = strtod(q + 2, NULL) <= 0;
        }
      }
      if (!refused) return true;
    }
    range += length;
    if (*range == ',') ++range;
  }
  return false;
}

static enum MHD_Result halod_metrics_http_reply(
    struct MHD_Connection *connection, unsigned code, const char *type,
    char *body) {
  struct MHD_Response *response = MHD_create_response_from_buffer(
      strlen(body), body, MHD_RESPMEM_MUST_FREE);
  if (!response) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  // A 405 names the methods served (RFC 9110, 15.5.6).
  if (code == MHD_HTTP_METHOD_NOT_ALLOWED) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  }
  enum MHD_Result result = MHD_queue_response(connection, code, response);
  MHD_destroy_response(response);
  return result;
}

static enum MHD_Result halod_metrics_http_text(
    struct MHD_Connection *connection, unsigned code, const char *text) {
  char *body = strdup(text);
  if (!body) return MHD_NO;
  return halod_metrics_http_reply(connection, code, "text/plain; charset=utf-8",
                                  body);
}

// HTTP thread: asks the loop for a snapshot and waits for it until
// HALOD_METRICS_HTTP_WAIT_NS after the oldest ask the loop has not taken
// (so scrapes that come while it is blocked share one wait instead of
// waiting in turn); then the latest snapshot, fresh or not, behind the
// gauge of its age. NULL (and |*out_code| the status to answer) if halod
// is stopping or has no snapshot to serve.
static char *halod_metrics_http_snapshot(halod_metrics_http_t *http,
                                         halod_metrics_format_t format,
                                         unsigned *out_code) {
  pthread_mutex_lock(&http->mutex);
  uint64_t ticket = ++http->asked;
  http->formats |= 1u << format;
  if (!http->untaken_since_ns) http->untaken_since_ns = halo_clock_now_ns();
  struct timespec deadline =
      halo_clock_timespec(http->untaken_since_ns + HALOD_METRICS_HTTP_WAIT_NS);
  pthread_mutex_unlock(&http->mutex);
  uv_async_send(&http->render);
  char *body = NULL;
  *out_code = MHD_HTTP_SERVICE_UNAVAILABLE;
  pthread_mutex_lock(&http->mutex);
  int error = 0;
  while (http->done < ticket && !http->stopping && error != ETIMEDOUT) {
    error = pthread_cond_timedwait(&http->published, &http->mutex, &deadline);
  }
  if (!http->stopping && http->texts[format]) {
    double age =
        (double)(halo_clock_now_ns() - http->rendered_ns[format]) / 1e9;
    // HELP and TYPE as daemon/metrics.c writes them; first, so that the
    // OpenMetrics text still ends in "# EOF".
    if (asprintf(&body,
                 "# HELP halo_metrics_snapshot_age_seconds Seconds since "
                 "halod's loop rendered these metrics: about 0 when it "
                 "answered this scrape, more when it was blocked and this "
                 "is the last snapshot it rendered.\n"
                 "# TYPE halo_metrics_snapshot_age_seconds gauge\n"
                 "halo_metrics_snapshot_age_seconds %.3f\n%s",
                 age, http->texts[format]) < 0) {
      body = NULL;
      *out_code = MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
  }
  pthread_mutex_unlock(&http->mutex);
  return body;
}

// HTTP thread: one request.
static enum MHD_Result halod_metrics_http_on_request(
    void *user_data, struct MHD_Connection *connection, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **request_state) {
  (void)version;
  (void)upload_data;
  (void)upload_data_size;
  (void)request_state;
  halod_metrics_http_t *http = user_data;
  bool head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && !head) {
    return halod_metrics_http_text(connection, MHD_HTTP_METHOD_NOT_ALLOWED,
                                   "halod serves GET /metrics only\n");
  }
  if (strcmp(url, "/metrics") != 0) {
    return halod_metrics_http_text(
        connection, MHD_HTTP_NOT_FOUND,
        "halod serves its Prometheus metrics at /metrics\n");
  }
  const char *accept = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_ACCEPT);
  halod_metrics_format_t format = halod_metrics_http_wants_openmetrics(accept)
                                      ? HALOD_METRICS_OPENMETRICS
                                      : HALOD_METRICS_PROMETHEUS;
  unsigned code = 0;
  char *text = halod_metrics_http_snapshot(http, format, &code);
  if (!text) {
    return halod_metrics_http_text(
        connection, code,
        code == MHD_HTTP_SERVICE_UNAVAILABLE
            ? "halod is stopping, or has no metrics rendered to serve (its "
              "loop did not answer within 1 s)\n"
            : "halod could not copy the metrics (out of memory)\n");
  }
  return halod_metrics_http_reply(connection, MHD_HTTP_OK,
                                  kContentTypes[format], text);
}

// ------------------------------------------------------------ deadlines

// HTTP thread: a connection started (tracked with its deadline) or closed
// (forgotten, before libmicrohttpd closes its socket).
static void halod_metrics_http_on_connection(
    void *user_data, struct MHD_Connection *connection, void **socket_context,
    enum MHD_ConnectionNotificationCode code) {
  halod_metrics_http_t *http = user_data;
  halod_metrics_http_connection_t *tracked = *socket_context;
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    if (!tracked) return;
    pthread_mutex_lock(&http->mutex);
    halo_list_remove(&http->connections, &tracked->link);
    pthread_mutex_unlock(&http->mutex);
    free(tracked);
    *socket_context = NULL;
    return;
  }
  const union MHD_ConnectionInfo *fd =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!fd) return;
  tracked = calloc(1, sizeof(*tracked));
  if (!tracked) {
    // Without a deadline it could be held for good: closed at once.
    shutdown(fd->connect_fd, SHUT_RDWR);
    return;
  }
  tracked->fd = fd->connect_fd;
  const union MHD_ConnectionInfo *address =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  const struct sockaddr *peer = address ? address->client_addr : NULL;
  if (peer && peer->sa_family == AF_INET) {
    inet_ntop(AF_INET, &((const struct sockaddr_in *)peer)->sin_addr,
              tracked->peer, sizeof(tracked->peer));
  } else if (peer && peer->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)peer)->sin6_addr,
              tracked->peer, sizeof(tracked->peer));
  }
  pthread_mutex_lock(&http->mutex);
  tracked->deadline_ns = halo_clock_now_ns() + HALOD_METRICS_HTTP_REQUEST_NS;
  halo_list_push_front(&http->connections, &tracked->link);
  pthread_cond_signal(&http->deadlines_changed);
  pthread_mutex_unlock(&http->mutex);
  *socket_context = tracked;
}

// HTTP thread: a request ended (answered, or its connection failed): the
// connection's next request has the time from now.
static void halod_metrics_http_on_completed(
    void *user_data, struct MHD_Connection *connection, void **request_state,
    enum MHD_RequestTerminationCode code) {
  (void)request_state;
  (void)code;
  halod_metrics_http_t *http = user_data;
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  halod_metrics_http_connection_t *tracked = info ? info->socket_context : NULL;
  if (!tracked) return;
  pthread_mutex_lock(&http->mutex);
  tracked->deadline_ns = halo_clock_now_ns() + HALOD_METRICS_HTTP_REQUEST_NS;
  pthread_mutex_unlock(&http->mutex);
}

// The reaper thread: shuts down each connection past its deadline (under
// the mutex, so never one whose close was notified, whose descriptor may be
// another's by then); libmicrohttpd then reads its end and closes it. Runs
// until halod_metrics_http_stop.
static void *halod_metrics_http_reap(void *argument) {
  halod_metrics_http_t *http = argument;
  pthread_mutex_lock(&http->mutex);
  while (!http->stopping) {
    int64_t now = halo_clock_now_ns();
    int64_t next = 0;
    for (halo_list_link_t *link = http->connections.head; link;
         link = link->next) {
      halod_metrics_http_connection_t *tracked =
          HALO_LIST_ENTRY(link, halod_metrics_http_connection_t, link);
      if (tracked->shut) continue;
      if (tracked->deadline_ns <= now) {
        shutdown(tracked->fd, SHUT_RDWR);
        tracked->shut = true;
        HALO_LOG_DEBUG(
            "metrics: closed a connection from %s: no request completed "
            "within %u s",
            tracked->peer[0] ? tracked->peer : "an unknown address",
            HALOD_METRICS_HTTP_REQUEST_S);
      } else if (!next || tracked->deadline_ns < next) {
        next = tracked->deadline_ns;
      }
    }
    if (next) {
      struct timespec deadline = halo_clock_timespec(next);
      pthread_cond_timedwait(&http->deadlines_changed, &http->mutex, &deadline);
    } else {
      pthread_cond_wait(&http->deadlines_changed, &http->mutex);
    }
  }
  pthread_mutex_unlock(&http->mutex);
  return NULL;
}

// Stops and joins the reaper (HTTP server stopped or never started).
static void halod_metrics_http_stop_reaper(halod_metrics_http_t *http) {
  pthread_mutex_lock(&http->mutex);
  http->stopping = true;
  pthread_cond_broadcast(&http->published);
  pthread_cond_broadcast(&http->deadlines_changed);
  pthread_mutex_unlock(&http->mutex);
  if (http->reaper_started) pthread_join(http->reaper, NULL);
  http->reaper_started = false;
}

// libmicrohttpd's own errors (e.g. a connection it could not accept, or
// closed as it arrived past a limit): at most one a second, so that a
// client opening connections in a loop does not flood halod's log; the
// next one logged says how many were not. Keeps errno (MHD_start_daemon's
// caller reads bind's).
static void halod_metrics_http_on_log(void *user_data, const char *format,
                                      va_list args) {
  halod_metrics_http_t *http = user_data;
  int saved_errno = errno;
  pthread_mutex_lock(&http->log_mutex);
  bool due = halo_clock_due(&http->logged_ns, halo_clock_now_ns(),
                            HALOD_METRICS_HTTP_LOG_NS);
  uint64_t unlogged = http->unlogged;
  http->unlogged = due ? 0 : unlogged + 1;
  pthread_mutex_unlock(&http->log_mutex);
  if (due) {
    char text[512];
    vsnprintf(text, sizeof(text), format, args);
    size_t length = strlen(text);
    while (length > 0 && text[length - 1] == '\n') text[--length] = '\0';
    if (unlogged) {
      HALO_LOG_WARN("metrics-address: libmicrohttpd: %s (and %" PRIu64
                    " messages not logged since the last)",
                    text, unlogged);
    } else {
      HALO_LOG_WARN("metrics-address: libmicrohttpd: %s", text);
    }
  }
  errno = saved_errno;
}

// ------------------------------------------------------------------ life

static void halod_metrics_http_free(halod_metrics_http_t *http) {
  for (int f = 0; f < HALOD_METRICS_FORMAT_COUNT; ++f) free(http->texts[f]);
  // Every connection's close was notified when the server stopped.
  while (!halo_list_empty(&http->connections)) {
    halo_list_link_t *link = http->connections.head;
    halo_list_remove(&http->connections, link);
    free(HALO_LIST_ENTRY(link, halod_metrics_http_connection_t, link));
  }
  pthread_cond_destroy(&http->deadlines_changed);
  pthread_cond_destroy(&http->published);
  pthread_mutex_destroy(&http->log_mutex);
  pthread_mutex_destroy(&http->mutex);
  free(http);
}

static void halod_metrics_http_on_closed(uv_handle_t *handle) {
  halod_metrics_http_free(handle->data);
}

halo_status_t halod_metrics_http_start(halod_t *daemon, uv_loop_t *loop,
                                       const char *address,
                                       halod_metrics_http_t **out_http) {
  *out_http = NULL;
  struct sockaddr_storage socket_address;
  socklen_t socket_length = 0;
  HALO_RETURN_IF_ERROR(
      halo_status_annotate(halod_metrics_http_parse_address(
                               address, &socket_address, &socket_length),
                           "metrics-address"));
  halod_metrics_http_t *http = calloc(1, sizeof(*http));
  if (!http) {
    return halo_status_make(HALO_STATUS_RESOURCE_EXHAUSTED,
                            "metrics-address: out of memory");
  }
  http->daemon = daemon;
  pthread_mutex_init(&http->mutex, NULL);
  pthread_mutex_init(&http->log_mutex, NULL);
  halo_clock_cond_initialize(&http->published);
  halo_clock_cond_initialize(&http->deadlines_changed);
  // Before the server's thread starts: a scrape sends it at once.
  uv_async_init(loop, &http->render, halod_metrics_http_on_render);
  http->render.data = http;
  // The first snapshot: a scrape that finds the loop blocked gets one.
  halod_metrics_http_publish(http, (1u << HALOD_METRICS_FORMAT_COUNT) - 1, 0);

  int error =
      pthread_create(&http->reaper, NULL, halod_metrics_http_reap, http);
  if (error) {
    uv_close((uv_handle_t *)&http->render, halod_metrics_http_on_closed);
    return halo_status_make(HALO_STATUS_UNAVAILABLE,
                            "metrics-address: cannot start the HTTP "
                            "connections' deadline thread: %s",
                            strerror(error));
  }
  http->reaper_started = true;

  unsigned flags =
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
  if (socket_address.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  // MHD_start_daemon gives no reason; errno is bind's or listen's.
  errno = 0;
  http->server = MHD_start_daemon(
      flags, 0, NULL, NULL, halod_metrics_http_on_request, http,
      MHD_OPTION_EXTERNAL_LOGGER, halod_metrics_http_on_log, http,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&socket_address,
      MHD_OPTION_CONNECTION_LIMIT, HALOD_METRICS_HTTP_CONNECTIONS,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      HALOD_METRICS_HTTP_ADDRESS_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
      HALOD_METRICS_HTTP_REQUEST_S, MHD_OPTION_NOTIFY_CONNECTION,
      halod_metrics_http_on_connection, http, MHD_OPTION_NOTIFY_COMPLETED,
      halod_metrics_http_on_completed, http, MHD_OPTION_END);
  if (!http->server) {
    error = errno;
    halod_metrics_http_stop_reaper(http);
    uv_close((uv_handle_t *)&http->render, halod_metrics_http_on_closed);
    return halo_status_make(
        HALO_STATUS_UNAVAILABLE, "metrics-address: cannot serve HTTP on %s: %s",
        address, error ? strerror(error) : "libmicrohttpd failed");
  }
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(http->server, MHD_DAEMON_INFO_BIND_PORT);
  unsigned port = info ? info->port : 0;
  // The host as given ("[::1]" keeps its brackets), the port as bound.
  int host_length = (int)(strrchr(address, ':') - address);
  HALO_LOG_INFO("metrics: serving http://%.*s:%u/metrics", host_length, address,
                port);
  *out_http = http;
  return NULL;
}

void halod_metrics_http_stop(halod_metrics_http_t *http) {
  if (!http) return;
  // Scrapes waiting for the loop answer 503 at once; the reaper ends.
  halod_metrics_http_stop_reaper(http);
  // Joins the HTTP thread: no request runs after this.
  MHD_stop_daemon(http->server);
  http->server = NULL;
  uv_close((uv_handle_t *)&http->render, halod_metrics_http_on_closed);
}
