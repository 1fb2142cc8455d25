// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// haloctl: the operator's view of a running halod, over its admin socket.
//
//   haloctl COMMAND [ARGS] [--admin ADDR] [--json | --query F,... |
//           --format csv[,noheader]] [--timeout MS] [--watch SECONDS
//           [--count N]]
//
// Options go before or after the command. Commands: status, clients,
// queues, workers, semaphores, buffers, executables, cache, metrics,
// kill-client PID, forgive-client PID, drain [SECONDS], undrain. Human
// output is aligned tables; --json prints one JSON document per command
// (built with jansson; one per line under --watch; invalid UTF-8 replaced
// by U+FFFD; 64-bit ids as strings, as protobuf's JSON mapping writes
// them) so scripts can parse it; --query/--format csv print the listings'
// rows as CSV (client/haloctl/query.h). docs/man/haloctl.1 is the manual.
//
// Exit status: 0 success, 1 the daemon answered with an error (or a drain
// did not finish in time), 2 usage error, 3 the daemon could not be
// reached.
//
// Single-threaded.
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/admin.h"
#include "client/haloctl/query.h"
#include "common/wire.h"

#define HALOCTL_EXIT_OK 0
#define HALOCTL_EXIT_FAILURE 1
#define HALOCTL_EXIT_USAGE 2
#define HALOCTL_EXIT_UNREACHABLE 3

typedef struct haloctl_options_t {
  const char *admin_address;  // resolved: flag, $HALO_ADMIN_ADDRESS, default
  bool json;
  bool csv;           // --format=csv: CSV rows instead of tables
  bool csv_header;    // ... with a header line (not ",noheader")
  const char *query;  // --query=FIELD,...: those fields (implies csv)
  int timeout_ms;
  double watch_seconds;  // 0: run once
  long watch_count;      // 0: until interrupted
} haloctl_options_t;

// ------------------------------------------------------------------ text

// Length of the valid UTF-8 sequence at |s| (1..4), or 0 if the bytes there
// are not one (overlong forms, surrogates and values past U+10FFFF count as
// invalid).
static size_t haloctl_utf8_sequence_length(const unsigned char *s) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t length;
  uint32_t min;
  uint32_t cp;
  if ((c & 0xe0) == 0xc0) {
    length = 2, min = 0x80, cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    length = 3, min = 0x800, cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    length = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  for (size_t i = 1; i < length; ++i) {
    if ((s[i] & 0xc0) != 0x80) return 0;  // also stops at the NUL
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return length;
}

// |text| as a JSON string (jansson wants valid UTF-8: invalid bytes become
// U+FFFD; jansson escapes the rest).
static json_t *haloctl_json_text(const char *text) {
  const unsigned char *s = (const unsigned char *)(text ? text : "");
  char *copy = malloc(strlen((const char *)s) * 3 + 1);
  if (!copy) abort();
  char *d = copy;
  while (*s) {
    size_t length = haloctl_utf8_sequence_length(s);
    if (length == 0) {
      memcpy(d, "\xef\xbf\xbd", 3);
      d += 3;
      ++s;
    } else {
      memcpy(d, s, length);
      d += length;
      s += length;
    }
  }
  *d = '\0';
  json_t *value = json_string(copy);
  free(copy);
  if (!value) abort();
  return value;
}

// |text|, or null for NULL (and for "" when |empty_is_null|).
static json_t *haloctl_json_nullable(const char *text, bool empty_is_null) {
  if (!text || (empty_is_null && !*text)) return json_null();
  return haloctl_json_text(text);
}

// A 64-bit id as a string, as protobuf's JSON mapping writes 64-bit
// integers: a JSON number loses precision past 2^53 (jq, JavaScript).
static json_t *haloctl_json_id(uint64_t id) {
  char text[24];
  snprintf(text, sizeof(text), "%" PRIu64, id);
  return json_string(text);
}

// A count or size: a number (exact below 2^53).
static json_t *haloctl_json_count(uint64_t value) {
  return json_integer((json_int_t)value);
}

static json_t *haloctl_json_optional_u32(bool has, uint32_t value) {
  return has ? json_integer(value) : json_null();
}

// Seconds (or another measure) to the millisecond; NaN and infinities are
// not JSON numbers.
static json_t *haloctl_json_seconds(double seconds) {
  if (!isfinite(seconds) || seconds < 0) seconds = 0;
  return json_real(round(seconds * 1000.0) / 1000.0);
}

// Sets |key| of |object| to |value| (taking it).
static void haloctl_json_set(json_t *object, const char *key, json_t *value) {
  if (!value || json_object_set_new(object, key, value) != 0) abort();
}

static void haloctl_json_append(json_t *array, json_t *value) {
  if (!value || json_array_append_new(array, value) != 0) abort();
}

// Prints |document| on one line and frees it.
static void haloctl_json_print(json_t *document) {
  json_dumpf(document, stdout, JSON_COMPACT | JSON_REAL_PRECISION(15));
  fputc('\n', stdout);
  json_decref(document);
}

// A copy of |text| fit for a terminal: control characters and invalid UTF-8
// become '?' (client names come from clients). Never NULL.
static char *haloctl_printable(const char *text) {
  const unsigned char *s = (const unsigned char *)(text ? text : "");
  char *copy = malloc(strlen((const char *)s) + 1);
  if (!copy) abort();
  char *d = copy;
  while (*s) {
    if (*s < 0x20 || *s == 0x7f) {
      *d++ = '?';
      ++s;
      continue;
    }
    size_t length = haloctl_utf8_sequence_length(s);
    if (length == 0) {
      *d++ = '?';
      ++s;
      continue;
    }
    memcpy(d, s, length);
    d += length;
    s += length;
  }
  *d = '\0';
  return copy;
}

// Display width of valid UTF-8 |text| (one column per code point).
static size_t haloctl_text_width(const char *text) {
  size_t width = 0;
  for (const unsigned char *s = (const unsigned char *)text; *s; ++s) {
    if ((*s & 0xc0) != 0x80) ++width;
  }
  return width;
}

static char *haloctl_format(const char *format, ...)
    __attribute__((format(printf, 1, 2)));
static char *haloctl_format(const char *format, ...) {
  va_list args;
  va_start(args, format);
  char *text = NULL;
  int rv = vasprintf(&text, format, args);
  va_end(args);
  if (rv < 0) abort();
  return text;
}

// "512 B", "1.5 KiB", "3.0 GiB".
static char *haloctl_format_bytes(uint64_t bytes) {
  static const char *const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return haloctl_format("%" PRIu64 " B", bytes);
  double value = (double)bytes / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    value /= 1024.0;
    ++unit;
  }
  return haloctl_format("%.1f %s", value, kUnits[unit]);
}

// "0.4s", "42s", "3m07s", "2h05m", "4d03h".
static char *haloctl_format_duration(double seconds) {
  if (!isfinite(seconds) || seconds < 0) seconds = 0;
  if (seconds < 10) return haloctl_format("%.1fs", seconds);
  uint64_t s = (uint64_t)seconds;
  if (s < 60) return haloctl_format("%" PRIu64 "s", s);
  if (s < 3600)
    return haloctl_format("%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
  if (s < 86400)
    return haloctl_format("%" PRIu64 "h%02" PRIu64 "m", s / 3600,
                          (s % 3600) / 60);
  return haloctl_format("%" PRIu64 "d%02" PRIu64 "h", s / 86400,
                        (s % 86400) / 3600);
}

// ------------------------------------------------------------------ tables

#define HALOCTL_TABLE_MAX_COLUMNS 24

// A table of owned strings printed with aligned columns. Numeric columns
// (|right| set) are right-aligned.
typedef struct haloctl_table_t {
  size_t column_count;
  const char *headers[HALOCTL_TABLE_MAX_COLUMNS];
  bool right[HALOCTL_TABLE_MAX_COLUMNS];
  char **cells;  // row-major
  size_t row_count;
  size_t row_capacity;
  size_t next_column;  // of the row being filled
} haloctl_table_t;

// |spec| is "NAME" or ">NAME" (right-aligned) per column, NULL-terminated.
static void haloctl_table_initialize(haloctl_table_t *table,
                                     const char *const *spec) {
  memset(table, 0, sizeof(*table));
  for (; *spec && table->column_count < HALOCTL_TABLE_MAX_COLUMNS; ++spec) {
    bool right = (*spec)[0] == '>';
    table->right[table->column_count] = right;
    table->headers[table->column_count++] = *spec + (right ? 1 : 0);
  }
}

static void haloctl_table_deinitialize(haloctl_table_t *table) {
  for (size_t i = 0; i < table->row_count * table->column_count; ++i) {
    free(table->cells[i]);
  }
  free(table->cells);
}

// Appends one cell, taking ownership of |text| (already printable). Cells
// fill rows left to right; a new row starts after the last column.
static void haloctl_table_add(haloctl_table_t *table, char *text) {
  if (table->next_column == 0) {
    if (table->row_count == table->row_capacity) {
      size_t capacity = table->row_capacity ? table->row_capacity * 2 : 16;
      char **cells = realloc(table->cells,
                             capacity * table->column_count * sizeof(char *));
      if (!cells) abort();
      table->cells = cells;
      table->row_capacity = capacity;
    }
    ++table->row_count;
  }
  size_t row = table->row_count - 1;
  table->cells[row * table->column_count + table->next_column] = text;
  table->next_column = (table->next_column + 1) % table->column_count;
}

static void haloctl_table_print_cell(FILE *out, const char *text, size_t width,
                                     bool right, bool last) {
  size_t pad = width - haloctl_text_width(text);
  if (right) fprintf(out, "%*s", (int)pad, "");
  fputs(text, out);
  if (!right && !last) fprintf(out, "%*s", (int)pad, "");
}

static void haloctl_table_print(const haloctl_table_t *table, FILE *out,
                                const char *indent) {
  size_t widths[HALOCTL_TABLE_MAX_COLUMNS] = {0};
  for (size_t c = 0; c < table->column_count; ++c) {
    widths[c] = haloctl_text_width(table->headers[c]);
    for (size_t r = 0; r < table->row_count; ++r) {
      size_t w = haloctl_text_width(table->cells[r * table->column_count + c]);
      if (w > widths[c]) widths[c] = w;
    }
  }
  for (size_t r = 0; r <= table->row_count; ++r) {
    fputs(indent, out);
    for (size_t c = 0; c < table->column_count; ++c) {
      const char *text = r == 0
                             ? table->headers[c]
                             : table->cells[(r - 1) * table->column_count + c];
      bool last = c + 1 == table->column_count;
      haloctl_table_print_cell(out, text, widths[c], table->right[c], last);
      if (!last) fputs("  ", out);
    }
    fputc('\n', out);
  }
}

// ------------------------------------------------------------------ admin

typedef halo_status_t (*haloctl_simple_fn)(halo_admin_t *admin,
                                           halo_wire_response_t **out);
// |data| is the request's argument.
typedef halo_status_t (*haloctl_request_fn)(halo_admin_t *admin, void *data,
                                            halo_wire_response_t **out);

// Connects, runs one admin request and checks the reply has |body_case|.
// Prints what went wrong and returns the exit code (0: |*out_response| is
// the reply).
static int haloctl_call(const haloctl_options_t *options, const char *command,
                        haloctl_request_fn request, void *request_data,
                        int body_case, halo_wire_response_t **out_response) {
  *out_response = NULL;
  halo_admin_t *admin = NULL;
  halo_status_t status =
      halo_admin_connect(options->admin_address, options->timeout_ms, &admin);
  if (!status) {
    status = request(admin, request_data, out_response);
    halo_admin_close(admin);
    if (status && (halo_status_code(status) == HALO_STATUS_UNAVAILABLE ||
                   halo_status_code(status) == HALO_STATUS_DEADLINE_EXCEEDED)) {
      // Connected, but no answer: as unreachable as if the dial had failed.
    } else if (status) {
      fprintf(stderr, "haloctl: %s: halod at %s answered %s: %s\n", command,
              options->admin_address,
              halo_status_code_name(halo_status_code(status)),
              halo_status_message(status));
      halo_status_free(status);
      return HALOCTL_EXIT_FAILURE;
    }
  }
  if (status) {
    // The admin client's message names the address where it could not dial,
    // and says who the admin socket admits when it was refused.
    const char *message = halo_status_message(status);
    bool named = strstr(message, options->admin_address) != NULL;
    fprintf(stderr, "haloctl: cannot reach halod%s%s: %s\n",
            named ? "" : " at ", named ? "" : options->admin_address, message);
    halo_status_free(status);
    return HALOCTL_EXIT_UNREACHABLE;
  }
  if ((int)(*out_response)->body_case != body_case) {
    fprintf(stderr,
            "haloctl: %s: halod answered without the expected reply "
            "(body case %d); is it a different protocol version?\n",
            command, (int)(*out_response)->body_case);
    halo__wire__response__free_unpacked(*out_response, NULL);
    *out_response = NULL;
    return HALOCTL_EXIT_FAILURE;
  }
  return HALOCTL_EXIT_OK;
}

static const char *haloctl_failure_name(int32_t code) {
  if (code == 0) return "OK";
  return halo_status_code_name((halo_status_code_t)code);
}

// "12.3 us", "4.5 ms", "1.20 s".
static char *haloctl_format_us(double us) {
  if (!isfinite(us) || us <= 0) return haloctl_format("-");
  if (us < 1000) return haloctl_format("%.1f us", us);
  if (us < 1e6) return haloctl_format("%.2f ms", us / 1e3);
  return haloctl_format("%.2f s", us / 1e6);
}

// ------------------------------------------------------------------ status

static json_t *haloctl_status_json(const Halo__Wire__AdminStatusReply *s) {
  json_t *o = json_object();
  haloctl_json_set(o, "version", haloctl_json_text(s->daemon_version));
  haloctl_json_set(o, "protocol_version", json_integer(s->protocol_version));
  haloctl_json_set(o, "pid", haloctl_json_count(s->pid));
  haloctl_json_set(o, "uptime_seconds",
                   haloctl_json_seconds(s->uptime_seconds));
  haloctl_json_set(o, "incarnation", haloctl_json_id(s->incarnation));
  haloctl_json_set(o, "listen", haloctl_json_text(s->listen_address));
  haloctl_json_set(o, "admin", haloctl_json_nullable(s->admin_address, false));
  json_t *drivers = json_array();
  for (size_t i = 0; i < s->n_drivers; ++i) {
    const Halo__Wire__DriverInfo *d = s->drivers[i];
    json_t *driver = json_object();
    haloctl_json_set(driver, "name", haloctl_json_text(d->name));
    haloctl_json_set(driver, "available", json_boolean(d->available));
    haloctl_json_set(driver, "reason", haloctl_json_nullable(d->reason, false));
    haloctl_json_append(drivers, driver);
  }
  haloctl_json_set(o, "drivers", drivers);
  json_t *devices = json_array();
  for (size_t i = 0; i < s->n_devices; ++i) {
    const Halo__Wire__DeviceInfo *d = s->devices[i];
    json_t *device = json_object();
    haloctl_json_set(device, "ordinal", json_integer(d->ordinal));
    haloctl_json_set(device, "driver", haloctl_json_text(d->driver));
    haloctl_json_set(device, "name", haloctl_json_text(d->name));
    haloctl_json_set(device, "memory_bytes",
                     haloctl_json_count(d->memory_bytes));
    haloctl_json_set(
        device, "compute_major",
        haloctl_json_optional_u32(d->has_compute_major, d->compute_major));
    haloctl_json_set(
        device, "compute_minor",
        haloctl_json_optional_u32(d->has_compute_minor, d->compute_minor));
    haloctl_json_set(device, "multiprocessor_count",
                     haloctl_json_optional_u32(d->has_multiprocessor_count,
                                               d->multiprocessor_count));
    haloctl_json_append(devices, device);
  }
  haloctl_json_set(o, "devices", devices);
  haloctl_json_set(o, "sessions", json_integer(s->sessions));
  haloctl_json_set(o, "trust_domains", json_integer(s->trust_domains));
  haloctl_json_set(o, "draining", json_boolean(s->draining));
  haloctl_json_set(o, "pending", json_integer(s->pending));
  haloctl_json_set(o, "in_flight", json_integer(s->in_flight));
  haloctl_json_set(o, "ring_worker_executions",
                   haloctl_json_count(s->ring_worker_executions));
  return o;
}

static void haloctl_status_print_text(const Halo__Wire__AdminStatusReply *s) {
  FILE *out = stdout;
  char *version = haloctl_printable(s->daemon_version);
  char *listen = haloctl_printable(s->listen_address);
  char *uptime = haloctl_format_duration(s->uptime_seconds);
  fprintf(out, "halod %s (protocol %" PRIu32 ")%s\n", version,
          s->protocol_version, s->draining ? "  DRAINING" : "");
  fprintf(out, "  pid            %" PRIu64 "\n", s->pid);
  fprintf(out, "  uptime         %s\n", uptime);
  fprintf(out, "  incarnation    %016" PRIx64 "\n", s->incarnation);
  fprintf(out, "  listen         %s\n", listen);
  if (s->admin_address) {
    char *admin = haloctl_printable(s->admin_address);
    fprintf(out, "  admin          %s\n", admin);
    free(admin);
  }
  fprintf(out, "  sessions       %" PRIu32 "\n", s->sessions);
  fprintf(out, "  trust domains  %" PRIu32 "\n", s->trust_domains);
  fprintf(out, "  work           %" PRIu32 " pending, %" PRIu32 " in flight\n",
          s->pending, s->in_flight);
  fprintf(out, "  ring executions taken by workers  %" PRIu64 "\n",
          s->ring_worker_executions);
  free(version);
  free(listen);
  free(uptime);

  fputs("\ndrivers\n", out);
  static const char *const kDriverColumns[] = {"DRIVER", "STATE", "REASON",
                                               NULL};
  haloctl_table_t drivers;
  haloctl_table_initialize(&drivers, kDriverColumns);
  for (size_t i = 0; i < s->n_drivers; ++i) {
    const Halo__Wire__DriverInfo *d = s->drivers[i];
    haloctl_table_add(&drivers, haloctl_printable(d->name));
    haloctl_table_add(
        &drivers,
        haloctl_printable(d->available ? "available" : "unavailable"));
    haloctl_table_add(
        &drivers, haloctl_printable(d->reason && *d->reason ? d->reason : "-"));
  }
  haloctl_table_print(&drivers, out, "  ");
  haloctl_table_deinitialize(&drivers);

  fputs("\ndevices\n", out);
  if (s->n_devices == 0) {
    fputs("  (none)\n", out);
    return;
  }
  static const char *const kDeviceColumns[] = {
      ">#", "DRIVER", "NAME", ">MEMORY", ">CC", ">SMS", NULL};
  haloctl_table_t devices;
  haloctl_table_initialize(&devices, kDeviceColumns);
  for (size_t i = 0; i < s->n_devices; ++i) {
    const Halo__Wire__DeviceInfo *d = s->devices[i];
    haloctl_table_add(&devices, haloctl_format("%" PRIu32, d->ordinal));
    haloctl_table_add(&devices, haloctl_printable(d->driver));
    haloctl_table_add(&devices, haloctl_printable(d->name));
    haloctl_table_add(&devices, haloctl_format_bytes(d->memory_bytes));
    haloctl_table_add(
        &devices, d->has_compute_major && d->compute_major
                      ? haloctl_format("%" PRIu32 ".%" PRIu32, d->compute_major,
                                       d->compute_minor)
                      : haloctl_format("-"));
    haloctl_table_add(&devices,
                      d->has_multiprocessor_count && d->multiprocessor_count
                          ? haloctl_format("%" PRIu32, d->multiprocessor_count)
                          : haloctl_format("-"));
  }
  haloctl_table_print(&devices, out, "  ");
  haloctl_table_deinitialize(&devices);
}

// ------------------------------------------------------------------ clients

// One row of clients (--json, --query).
static json_t *haloctl_clients_row(const Halo__Wire__SessionInfo *s) {
  json_t *o = json_object();
  haloctl_json_set(o, "session_id", haloctl_json_id(s->session_id));
  haloctl_json_set(o, "uid", json_integer(s->uid));
  haloctl_json_set(o, "pid", json_integer(s->pid));
  haloctl_json_set(o, "trust_domain", haloctl_json_text(s->trust_domain));
  haloctl_json_set(o, "client_name",
                   haloctl_json_nullable(s->client_name, false));
  haloctl_json_set(o, "age_seconds", haloctl_json_seconds(s->age_seconds));
  haloctl_json_set(o, "buffers", json_integer(s->buffers));
  haloctl_json_set(o, "semaphores", json_integer(s->semaphores));
  haloctl_json_set(o, "arenas", json_integer(s->arenas));
  haloctl_json_set(o, "host_bytes", haloctl_json_count(s->host_bytes));
  haloctl_json_set(o, "device_bytes", haloctl_json_count(s->device_bytes));
  haloctl_json_set(o, "requests", haloctl_json_count(s->requests));
  haloctl_json_set(o, "executables", json_integer(s->executables));
  haloctl_json_set(o, "command_buffers", json_integer(s->command_buffers));
  haloctl_json_set(o, "recording_bytes",
                   haloctl_json_count(s->recording_bytes));
  haloctl_json_set(o, "queues", json_integer(s->queues));
  haloctl_json_set(o, "submissions", haloctl_json_count(s->submissions));
  haloctl_json_set(o, "pending", json_integer(s->pending));
  haloctl_json_set(o, "in_flight", json_integer(s->in_flight));
  haloctl_json_set(o, "completed", haloctl_json_count(s->completed));
  haloctl_json_set(o, "failures", haloctl_json_count(s->failures));
  haloctl_json_set(o, "faults", json_integer(s->faults));
  haloctl_json_set(o, "process_faults", json_integer(s->process_faults));
  haloctl_json_set(o, "lost", haloctl_json_nullable(s->lost, true));
  haloctl_json_set(o, "refused", haloctl_json_nullable(s->refused, true));
  json_t *devices = json_array();
  for (size_t d = 0; d < s->n_device_usage; ++d) {
    const Halo__Wire__DeviceUsage *u = s->device_usage[d];
    json_t *usage = json_object();
    haloctl_json_set(usage, "device", json_integer(u->device));
    haloctl_json_set(usage, "buffers", json_integer(u->buffers));
    haloctl_json_set(usage, "device_bytes",
                     haloctl_json_count(u->device_bytes));
    haloctl_json_set(usage, "host_bytes", haloctl_json_count(u->host_bytes));
    haloctl_json_append(devices, usage);
  }
  haloctl_json_set(o, "devices", devices);
  return o;
}

static json_t *haloctl_clients_json(
    const Halo__Wire__AdminSessionsReply *reply) {
  json_t *list = json_array();
  for (size_t i = 0; i < reply->n_sessions; ++i) {
    haloctl_json_append(list, haloctl_clients_row(reply->sessions[i]));
  }
  return list;
}

// Every field of a row of clients, for --query without rows.
static json_t *haloctl_clients_schema(void) {
  Halo__Wire__SessionInfo empty = HALO__WIRE__SESSION_INFO__INIT;
  return haloctl_clients_row(&empty);
}

// "0:2/1.0 MiB 1:1/512 B" over the devices where the session owns buffers.
static char *haloctl_clients_per_device(const Halo__Wire__SessionInfo *s) {
  char *text = haloctl_format("%s", "");
  for (size_t d = 0; d < s->n_device_usage; ++d) {
    const Halo__Wire__DeviceUsage *u = s->device_usage[d];
    if (!u->buffers) continue;
    char *bytes = haloctl_format_bytes(u->device_bytes + u->host_bytes);
    char *next = haloctl_format("%s%s%" PRIu32 ":%" PRIu32 "/%s", text,
                                *text ? " " : "", u->device, u->buffers, bytes);
    free(bytes);
    free(text);
    text = next;
  }
  if (!*text) {
    free(text);
    text = haloctl_format("-");
  }
  return text;
}

static void haloctl_clients_print_text(
    const Halo__Wire__AdminSessionsReply *reply) {
  if (reply->n_sessions == 0) {
    fputs("no clients\n", stdout);
    return;
  }
  static const char *const kColumns[] = {
      ">SESSION", ">PID",       ">UID",     "NAME",       "DOMAIN",
      ">AGE",     ">BUFFERS",   ">HOST",    ">DEVICE",    "PER DEVICE",
      ">QUEUES",  ">SUBMITTED", ">PENDING", ">IN FLIGHT", ">COMPLETED",
      ">FAILED",  ">FAULTS",    NULL};
  haloctl_table_t table;
  haloctl_table_initialize(&table, kColumns);
  for (size_t i = 0; i < reply->n_sessions; ++i) {
    const Halo__Wire__SessionInfo *s = reply->sessions[i];
    haloctl_table_add(&table, haloctl_format("%" PRIu64, s->session_id));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->pid));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->uid));
    haloctl_table_add(
        &table, haloctl_printable(
                    s->client_name && *s->client_name ? s->client_name : "-"));
    // A refused session has none.
    haloctl_table_add(
        &table,
        haloctl_printable(s->trust_domain && *s->trust_domain ? s->trust_domain
                                                              : "-"));
    haloctl_table_add(&table, haloctl_format_duration(s->age_seconds));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->buffers));
    haloctl_table_add(&table, haloctl_format_bytes(s->host_bytes));
    haloctl_table_add(&table, haloctl_format_bytes(s->device_bytes));
    haloctl_table_add(&table, haloctl_clients_per_device(s));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->queues));
    haloctl_table_add(&table, haloctl_format("%" PRIu64, s->submissions));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->pending));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->in_flight));
    haloctl_table_add(&table, haloctl_format("%" PRIu64, s->completed));
    haloctl_table_add(&table, haloctl_format("%" PRIu64, s->failures));
    // The process's faults in the window, against the budget.
    haloctl_table_add(
        &table, reply->fault_budget
                    ? haloctl_format("%" PRIu32 "/%" PRIu32, s->process_faults,
                                     reply->fault_budget)
                    : haloctl_format("%" PRIu32, s->process_faults));
  }
  haloctl_table_print(&table, stdout, "");
  haloctl_table_deinitialize(&table);
  bool any_lost = false;
  for (size_t i = 0; i < reply->n_sessions; ++i) {
    const Halo__Wire__SessionInfo *s = reply->sessions[i];
    if (!s->lost || !*s->lost) continue;
    if (!any_lost) {
      fputs("\nlost (SESSION_LOST until the client reconnects)\n", stdout);
      any_lost = true;
    }
    char *reason = haloctl_printable(s->lost);
    printf("  session %" PRIu64 " (pid %" PRIu32 "%s): %s\n", s->session_id,
           s->pid, s->faults ? ", charged a fault" : "", reason);
    free(reason);
  }
  bool any_refused = false;
  for (size_t i = 0; i < reply->n_sessions; ++i) {
    const Halo__Wire__SessionInfo *s = reply->sessions[i];
    if (!s->refused || !*s->refused) continue;
    if (!any_refused) {
      fputs("\nrefused (over the fault budget: RESOURCE_EXHAUSTED)\n", stdout);
      any_refused = true;
    }
    char *reason = haloctl_printable(s->refused);
    printf("  session %" PRIu64 " (pid %" PRIu32 "): %s\n", s->session_id,
           s->pid, reason);
    free(reason);
  }
}

// ------------------------------------------------------------------ queues

// One row of queues (--json, --query).
static json_t *haloctl_queues_row(const Halo__Wire__QueueInfo *q) {
  json_t *o = json_object();
  haloctl_json_set(o, "session_id", haloctl_json_id(q->session_id));
  haloctl_json_set(o, "session_live", json_boolean(q->session_live));
  haloctl_json_set(o, "queue_handle", haloctl_json_id(q->queue_handle));
  haloctl_json_set(o, "device", json_integer(q->device));
  haloctl_json_set(o, "priority", json_integer(q->priority));
  haloctl_json_set(o, "pending", json_integer(q->pending));
  haloctl_json_set(o, "in_flight", json_integer(q->in_flight));
  haloctl_json_set(o, "completed", haloctl_json_count(q->completed));
  haloctl_json_set(o, "failed", haloctl_json_count(q->failed));
  haloctl_json_set(o, "mean_latency_us",
                   haloctl_json_seconds(q->mean_latency_us));
  haloctl_json_set(o, "latency_p50_us",
                   haloctl_json_seconds(q->latency_p50_us));
  haloctl_json_set(o, "latency_p99_us",
                   haloctl_json_seconds(q->latency_p99_us));
  json_t *actions = json_array();
  for (size_t a = 0; a < q->n_pending_actions; ++a) {
    const Halo__Wire__PendingAction *action = q->pending_actions[a];
    json_t *entry = json_object();
    haloctl_json_set(entry, "submission_id",
                     haloctl_json_id(action->submission_id));
    haloctl_json_set(entry, "kind", haloctl_json_text(action->kind));
    haloctl_json_set(entry, "age_seconds",
                     haloctl_json_seconds(action->age_seconds));
    if (action->has_buffer_id) {
      haloctl_json_set(entry, "buffer_id", haloctl_json_id(action->buffer_id));
    }
    json_t *waits = json_array();
    for (size_t w = 0; w < action->n_waits; ++w) {
      const Halo__Wire__PendingWait *wait = action->waits[w];
      json_t *item = json_object();
      haloctl_json_set(item, "semaphore_id",
                       haloctl_json_id(wait->semaphore_id));
      haloctl_json_set(item, "value", haloctl_json_count(wait->value));
      haloctl_json_set(item, "current", haloctl_json_count(wait->current));
      haloctl_json_set(item, "met", json_boolean(wait->met));
      haloctl_json_append(waits, item);
    }
    haloctl_json_set(entry, "waits", waits);
    haloctl_json_append(actions, entry);
  }
  haloctl_json_set(o, "pending_actions", actions);
  return o;
}

static json_t *haloctl_queues_json(const Halo__Wire__AdminQueuesReply *r) {
  json_t *list = json_array();
  for (size_t i = 0; i < r->n_queues; ++i) {
    haloctl_json_append(list, haloctl_queues_row(r->queues[i]));
  }
  return list;
}

// Every field of a row of queues, for --query without rows.
static json_t *haloctl_queues_schema(void) {
  Halo__Wire__QueueInfo empty = HALO__WIRE__QUEUE_INFO__INIT;
  return haloctl_queues_row(&empty);
}

static void haloctl_queues_print_text(const Halo__Wire__AdminQueuesReply *r) {
  if (r->n_queues == 0) {
    fputs("no queues\n", stdout);
    return;
  }
  static const char *const kColumns[] = {
      ">SESSION",   ">QUEUE",  ">DEVICE", ">PRIO", ">PENDING", ">IN FLIGHT",
      ">COMPLETED", ">FAILED", ">P50",    ">P99",  NULL};
  haloctl_table_t table;
  haloctl_table_initialize(&table, kColumns);
  bool any_pending = false;
  for (size_t i = 0; i < r->n_queues; ++i) {
    const Halo__Wire__QueueInfo *q = r->queues[i];
    any_pending |= q->n_pending_actions > 0;
    haloctl_table_add(&table, q->session_live
                                  ? haloctl_format("%" PRIu64, q->session_id)
                                  : haloctl_format("(ended)"));
    haloctl_table_add(
        &table, q->queue_handle ? haloctl_format("0x%" PRIx64, q->queue_handle)
                                : haloctl_format("default"));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, q->device));
    haloctl_table_add(&table, haloctl_format("%" PRId32, q->priority));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, q->pending));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, q->in_flight));
    haloctl_table_add(&table, haloctl_format("%" PRIu64, q->completed));
    haloctl_table_add(&table, haloctl_format("%" PRIu64, q->failed));
    haloctl_table_add(&table, haloctl_format_us(q->latency_p50_us));
    haloctl_table_add(&table, haloctl_format_us(q->latency_p99_us));
  }
  haloctl_table_print(&table, stdout, "");
  haloctl_table_deinitialize(&table);
  if (!any_pending) return;
  fputs("\npending (oldest first)\n", stdout);
  for (size_t i = 0; i < r->n_queues; ++i) {
    const Halo__Wire__QueueInfo *q = r->queues[i];
    for (size_t a = 0; a < q->n_pending_actions; ++a) {
      const Halo__Wire__PendingAction *action = q->pending_actions[a];
      char *age = haloctl_format_duration(action->age_seconds);
      printf("  session %" PRIu64 " submission %" PRIu64 " %s", q->session_id,
             action->submission_id, action->kind);
      if (action->has_buffer_id) printf(" buffer %" PRIu64, action->buffer_id);
      printf(" (%s):", age);
      free(age);
      for (size_t w = 0; w < action->n_waits; ++w) {
        const Halo__Wire__PendingWait *wait = action->waits[w];
        if (wait->met) continue;
        printf(" semaphore %" PRIu64 " >= %" PRIu64 " (now %" PRIu64 ")",
               wait->semaphore_id, wait->value, wait->current);
      }
      putchar('\n');
    }
    if (q->pending > q->n_pending_actions) {
      printf("  session %" PRIu64 ": %" PRIu32 " more\n", q->session_id,
             q->pending - (uint32_t)q->n_pending_actions);
    }
  }
}

// ------------------------------------------------------------------ workers

// One row of workers (--json, --query).
static json_t *haloctl_workers_row(const Halo__Wire__WorkerInfo *w) {
  json_t *o = json_object();
  haloctl_json_set(o, "device", json_integer(w->device));
  haloctl_json_set(o, "domain", haloctl_json_text(w->domain));
  haloctl_json_set(o, "pid", json_integer(w->pid));
  haloctl_json_set(o, "state", haloctl_json_text(w->state));
  haloctl_json_set(o, "sessions", json_integer(w->sessions));
  haloctl_json_set(o, "started", json_integer(w->started));
  haloctl_json_set(o, "faults", json_integer(w->faults));
  haloctl_json_set(o, "last_fault", haloctl_json_text(w->last_fault));
  // null until the worker's first usage report (or for a driver that
  // reports none).
  haloctl_json_set(
      o, "graph_bytes",
      w->has_graph_bytes ? haloctl_json_count(w->graph_bytes) : json_null());
  haloctl_json_set(o, "graph_bytes_limit",
                   w->has_graph_bytes_limit
                       ? haloctl_json_count(w->graph_bytes_limit)
                       : json_null());
  haloctl_json_set(
      o, "graph_instances",
      haloctl_json_optional_u32(w->has_graph_instances, w->graph_instances));
  return o;
}

static json_t *haloctl_workers_json(const Halo__Wire__AdminWorkersReply *r) {
  json_t *list = json_array();
  for (size_t i = 0; i < r->n_workers; ++i) {
    haloctl_json_append(list, haloctl_workers_row(r->workers[i]));
  }
  return list;
}

// Every field of a row of workers, for --query without rows.
static json_t *haloctl_workers_schema(void) {
  Halo__Wire__WorkerInfo empty = HALO__WIRE__WORKER_INFO__INIT;
  return haloctl_workers_row(&empty);
}

// "3.2 MiB/8.0 MiB (40%)": the worker's graph instances' memory against
// cuda-graph-bytes; "-" before its first report (or for a driver that
// reports none).
static char *haloctl_workers_graph_memory(const Halo__Wire__WorkerInfo *w) {
  if (!w->has_graph_bytes || !w->has_graph_bytes_limit) {
    return haloctl_format("-");
  }
  char *used = haloctl_format_bytes(w->graph_bytes);
  char *limit = haloctl_format_bytes(w->graph_bytes_limit);
  char *text = w->graph_bytes_limit
                   ? haloctl_format("%s/%s (%.0f%%)", used, limit,
                                    floor(100.0 * (double)w->graph_bytes /
                                          (double)w->graph_bytes_limit))
                   : haloctl_format("%s", used);
  free(used);
  free(limit);
  return text;
}

static void haloctl_workers_print_text(const Halo__Wire__AdminWorkersReply *r) {
  if (r->n_workers == 0) {
    fputs("no worker processes (device-workers inline?)\n", stdout);
    return;
  }
  static const char *const kColumns[] = {
      ">DEVICE",   "DOMAIN",     ">PID",    "STATE",
      ">SESSIONS", ">STARTED",   ">FAULTS", ">GRAPH MEMORY",
      ">GRAPHS",   "LAST FAULT", NULL};
  haloctl_table_t table;
  haloctl_table_initialize(&table, kColumns);
  for (size_t i = 0; i < r->n_workers; ++i) {
    const Halo__Wire__WorkerInfo *w = r->workers[i];
    haloctl_table_add(&table, haloctl_format("%" PRIu32, w->device));
    haloctl_table_add(&table,
                      haloctl_printable(*w->domain ? w->domain : "(spare)"));
    haloctl_table_add(&table, w->pid > 0 ? haloctl_format("%" PRId32, w->pid)
                                         : haloctl_format("-"));
    haloctl_table_add(&table, haloctl_printable(w->state));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, w->sessions));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, w->started));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, w->faults));
    haloctl_table_add(&table, haloctl_workers_graph_memory(w));
    haloctl_table_add(&table,
                      w->has_graph_instances
                          ? haloctl_format("%" PRIu32, w->graph_instances)
                          : haloctl_format("-"));
    haloctl_table_add(&table,
                      haloctl_printable(*w->last_fault ? w->last_fault : "-"));
  }
  haloctl_table_print(&table, stdout, "");
  haloctl_table_deinitialize(&table);
}

// ------------------------------------------------------------------ semaphores

// One row of semaphores (--json, --query).
static json_t *haloctl_semaphores_row(const Halo__Wire__SemaphoreInfo *s) {
  json_t *o = json_object();
  haloctl_json_set(o, "semaphore_id", haloctl_json_id(s->semaphore_id));
  haloctl_json_set(o, "owner_session", haloctl_json_id(s->owner_session));
  haloctl_json_set(o, "owner_pid",
                   haloctl_json_optional_u32(s->has_owner_pid, s->owner_pid));
  haloctl_json_set(o, "value", haloctl_json_count(s->value));
  haloctl_json_set(o, "pending_value", haloctl_json_count(s->pending_value));
  haloctl_json_set(o, "failure_code", json_integer(s->failure_code));
  haloctl_json_set(
      o, "failure",
      s->failure_code ? haloctl_json_text(haloctl_failure_name(s->failure_code))
                      : json_null());
  haloctl_json_set(o, "failure_message",
                   haloctl_json_nullable(s->failure_message, false));
  haloctl_json_set(o, "waiters", json_integer(s->waiters));
  haloctl_json_set(o, "importers", json_integer(s->importers));
  haloctl_json_set(o, "holders", json_integer(s->holders));
  haloctl_json_set(o, "exportable", json_boolean(s->exportable));
  return o;
}

static json_t *haloctl_semaphores_json(
    const Halo__Wire__AdminSemaphoresReply *reply) {
  json_t *list = json_array();
  for (size_t i = 0; i < reply->n_semaphores; ++i) {
    haloctl_json_append(list, haloctl_semaphores_row(reply->semaphores[i]));
  }
  return list;
}

// Every field of a row of semaphores, for --query without rows.
static json_t *haloctl_semaphores_schema(void) {
  Halo__Wire__SemaphoreInfo empty = HALO__WIRE__SEMAPHORE_INFO__INIT;
  return haloctl_semaphores_row(&empty);
}

static void haloctl_semaphores_print_text(
    const Halo__Wire__AdminSemaphoresReply *reply) {
  if (reply->n_semaphores == 0) {
    fputs("no semaphores\n", stdout);
    return;
  }
  static const char *const kColumns[] = {
      ">SEMAPHORE", "OWNER",    ">VALUE",     ">PENDING", ">WAITERS",
      ">IMPORTERS", ">HOLDERS", "EXPORTABLE", "STATE",    NULL};
  haloctl_table_t table;
  haloctl_table_initialize(&table, kColumns);
  for (size_t i = 0; i < reply->n_semaphores; ++i) {
    const Halo__Wire__SemaphoreInfo *s = reply->semaphores[i];
    haloctl_table_add(&table, haloctl_format("%" PRIu64, s->semaphore_id));
    haloctl_table_add(&table,
                      s->owner_session
                          ? haloctl_format("%" PRIu64 " (pid %" PRIu32 ")",
                                           s->owner_session, s->owner_pid)
                          : haloctl_format("-"));
    haloctl_table_add(&table, haloctl_format("%" PRIu64, s->value));
    haloctl_table_add(&table, s->pending_value > s->value
                                  ? haloctl_format("%" PRIu64, s->pending_value)
                                  : haloctl_format("-"));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->waiters));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->importers));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->holders));
    haloctl_table_add(&table, haloctl_format(s->exportable ? "yes" : "no"));
    if (s->failure_code) {
      char *message = haloctl_printable(s->failure_message);
      haloctl_table_add(&table,
                        haloctl_format("failed: %s%s%s",
                                       haloctl_failure_name(s->failure_code),
                                       *message ? ": " : "", message));
      free(message);
    } else {
      haloctl_table_add(&table, haloctl_format("ok"));
    }
  }
  haloctl_table_print(&table, stdout, "");
  haloctl_table_deinitialize(&table);
}

// ------------------------------------------------------------------ buffers

// One row of buffers (--json, --query).
static json_t *haloctl_buffers_row(const Halo__Wire__BufferInfo *b) {
  json_t *o = json_object();
  haloctl_json_set(o, "buffer_id", haloctl_json_id(b->buffer_id));
  haloctl_json_set(o, "owner_session", haloctl_json_id(b->owner_session));
  haloctl_json_set(o, "device", json_integer(b->device));
  haloctl_json_set(o, "memory_type", haloctl_json_text(b->memory_type));
  haloctl_json_set(o, "size", haloctl_json_count(b->size));
  haloctl_json_set(o, "holders", json_integer(b->holders));
  haloctl_json_set(o, "sessions", json_integer(b->sessions));
  haloctl_json_set(o, "exportable", json_boolean(b->exportable));
  haloctl_json_set(o, "exported", json_boolean(b->exported));
  return o;
}

static json_t *haloctl_buffers_json(const Halo__Wire__AdminBuffersReply *r) {
  json_t *list = json_array();
  for (size_t i = 0; i < r->n_buffers; ++i) {
    haloctl_json_append(list, haloctl_buffers_row(r->buffers[i]));
  }
  return list;
}

// Every field of a row of buffers, for --query without rows.
static json_t *haloctl_buffers_schema(void) {
  Halo__Wire__BufferInfo empty = HALO__WIRE__BUFFER_INFO__INIT;
  return haloctl_buffers_row(&empty);
}

static void haloctl_buffers_print_text(const Halo__Wire__AdminBuffersReply *r) {
  if (r->n_buffers == 0) {
    fputs("no buffers\n", stdout);
    return;
  }
  static const char *const kColumns[] = {">BUFFER",   ">OWNER", ">DEVICE",
                                         "MEMORY",    ">SIZE",  ">HOLDERS",
                                         ">SESSIONS", "EXPORT", NULL};
  haloctl_table_t table;
  haloctl_table_initialize(&table, kColumns);
  for (size_t i = 0; i < r->n_buffers; ++i) {
    const Halo__Wire__BufferInfo *b = r->buffers[i];
    haloctl_table_add(&table, haloctl_format("%" PRIu64, b->buffer_id));
    haloctl_table_add(&table, b->owner_session
                                  ? haloctl_format("%" PRIu64, b->owner_session)
                                  : haloctl_format("-"));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, b->device));
    haloctl_table_add(&table, haloctl_printable(b->memory_type));
    haloctl_table_add(&table, haloctl_format_bytes(b->size));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, b->holders));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, b->sessions));
    haloctl_table_add(&table, haloctl_format(b->exported     ? "exported"
                                             : b->exportable ? "exportable"
                                                             : "no"));
  }
  haloctl_table_print(&table, stdout, "");
  haloctl_table_deinitialize(&table);
}

// ------------------------------------------------------------------
// executables

// One row of executables (--json, --query).
static json_t *haloctl_executables_row(const Halo__Wire__ExecutableInfo *e) {
  json_t *o = json_object();
  haloctl_json_set(o, "executable_id", haloctl_json_id(e->executable_id));
  haloctl_json_set(o, "device", json_integer(e->device));
  haloctl_json_set(o, "format", haloctl_json_text(e->format));
  haloctl_json_set(o, "hash", haloctl_json_text(e->hash));
  haloctl_json_set(o, "state", haloctl_json_text(e->state));
  haloctl_json_set(o, "bytes", haloctl_json_count(e->bytes));
  haloctl_json_set(o, "origin", haloctl_json_text(e->origin));
  haloctl_json_set(o, "load_ms", haloctl_json_seconds(e->load_ms));
  haloctl_json_set(o, "users", json_integer(e->users));
  haloctl_json_set(o, "sessions", json_integer(e->sessions));
  return o;
}

static json_t *haloctl_executables_list(
    Halo__Wire__ExecutableInfo *const *items, size_t count) {
  json_t *list = json_array();
  for (size_t i = 0; i < count; ++i) {
    haloctl_json_append(list, haloctl_executables_row(items[i]));
  }
  return list;
}

// Every field of a row of executables, for --query without rows.
static json_t *haloctl_executables_schema(void) {
  Halo__Wire__ExecutableInfo empty = HALO__WIRE__EXECUTABLE_INFO__INIT;
  return haloctl_executables_row(&empty);
}

static void haloctl_executables_table(Halo__Wire__ExecutableInfo *const *items,
                                      size_t count, const char *indent) {
  static const char *const kColumns[] = {
      ">EXECUTABLE", ">DEVICE", "FORMAT", "HASH",      "STATE", ">BYTES",
      "ORIGIN",      ">LOAD",   ">USERS", ">SESSIONS", NULL};
  haloctl_table_t table;
  haloctl_table_initialize(&table, kColumns);
  for (size_t i = 0; i < count; ++i) {
    const Halo__Wire__ExecutableInfo *e = items[i];
    haloctl_table_add(&table, haloctl_format("%" PRIu64, e->executable_id));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, e->device));
    haloctl_table_add(&table, haloctl_printable(e->format));
    haloctl_table_add(&table, haloctl_format("%.16s", e->hash));
    haloctl_table_add(&table, haloctl_printable(e->state));
    haloctl_table_add(&table, haloctl_format_bytes(e->bytes));
    haloctl_table_add(
        &table, haloctl_printable(e->origin && *e->origin ? e->origin : "-"));
    haloctl_table_add(&table, haloctl_format_us(e->load_ms * 1e3));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, e->users));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, e->sessions));
  }
  haloctl_table_print(&table, stdout, indent);
  haloctl_table_deinitialize(&table);
}

static json_t *haloctl_executables_json(
    const Halo__Wire__AdminExecutablesReply *r) {
  return haloctl_executables_list(r->executables, r->n_executables);
}

static void haloctl_executables_print_text(
    const Halo__Wire__AdminExecutablesReply *r) {
  if (r->n_executables == 0) {
    fputs("no executables\n", stdout);
    return;
  }
  haloctl_executables_table(r->executables, r->n_executables, "");
}

// ------------------------------------------------------------------ cache

// One cache's summary; null when the daemon sent none.
static json_t *haloctl_cache_summary_json(const Halo__Wire__CacheSummary *c) {
  if (!c) return json_null();
  json_t *o = json_object();
  haloctl_json_set(o, "entries", json_integer(c->entries));
  haloctl_json_set(o, "held", json_integer(c->held));
  haloctl_json_set(o, "cached", json_integer(c->cached));
  haloctl_json_set(o, "capacity", json_integer(c->capacity));
  haloctl_json_set(o, "hits", haloctl_json_count(c->hits));
  haloctl_json_set(o, "misses", haloctl_json_count(c->misses));
  haloctl_json_set(o, "evictions", haloctl_json_count(c->evictions));
  if (c->has_held_by_cached) {
    haloctl_json_set(o, "held_by_cached", json_integer(c->held_by_cached));
  }
  if (c->has_cached_bytes) {
    haloctl_json_set(o, "cached_bytes", haloctl_json_count(c->cached_bytes));
  }
  if (c->has_capacity_bytes) {
    haloctl_json_set(o, "capacity_bytes",
                     haloctl_json_count(c->capacity_bytes));
  }
  return o;
}

// "memo cache: 3 entries (1 held, 2 cached of at most 256, 4096 bytes of
// at most 268435456); hits 4, misses 3, evictions 0" (the bytes: where the
// daemon sent them; "2 held (1 by cached recordings only)" for the
// executables cached recordings alone hold).
static void haloctl_cache_summary_text(const char *name,
                                       const Halo__Wire__CacheSummary *c) {
  if (!c) return;
  char by_cached[48] = "";
  if (c->has_held_by_cached && c->held_by_cached > 0) {
    snprintf(by_cached, sizeof(by_cached),
             " (%" PRIu32 " by cached recordings only)", c->held_by_cached);
  }
  char bytes[64] = "";
  if (c->has_cached_bytes && c->has_capacity_bytes) {
    snprintf(bytes, sizeof(bytes), ", %" PRIu64 " bytes of at most %" PRIu64,
             c->cached_bytes, c->capacity_bytes);
  }
  printf("%s cache: %" PRIu32 " entries (%" PRIu32 " held%s, %" PRIu32
         " cached of at most %" PRIu32 "%s); hits %" PRIu64 ", misses %" PRIu64
         ", evictions %" PRIu64 "\n",
         name, c->entries, c->held, by_cached, c->cached, c->capacity, bytes,
         c->hits, c->misses, c->evictions);
}

static json_t *haloctl_cache_json(const Halo__Wire__AdminMemoCacheReply *r) {
  json_t *o = json_object();
  haloctl_json_set(o, "hits", haloctl_json_count(r->hits));
  haloctl_json_set(o, "misses", haloctl_json_count(r->misses));
  json_t *entries = json_array();
  for (size_t i = 0; i < r->n_entries; ++i) {
    const Halo__Wire__MemoEntry *e = r->entries[i];
    json_t *entry = json_object();
    haloctl_json_set(entry, "key", haloctl_json_text(e->key));
    haloctl_json_set(entry, "device", json_integer(e->device));
    haloctl_json_set(entry, "commands", json_integer(e->commands));
    haloctl_json_set(entry, "hits", haloctl_json_count(e->hits));
    haloctl_json_set(entry, "sharers", json_integer(e->sharers));
    haloctl_json_set(entry, "cached", json_boolean(e->cached));
    haloctl_json_append(entries, entry);
  }
  haloctl_json_set(o, "entries", entries);
  haloctl_json_set(o, "executable_hits",
                   haloctl_json_count(r->executable_hits));
  haloctl_json_set(o, "executable_misses",
                   haloctl_json_count(r->executable_misses));
  haloctl_json_set(o, "cache_directory",
                   haloctl_json_nullable(r->cache_directory, true));
  haloctl_json_set(o, "memo_cache", haloctl_cache_summary_json(r->memo));
  haloctl_json_set(o, "executable_cache",
                   haloctl_cache_summary_json(r->executable));
  haloctl_json_set(o, "executables",
                   haloctl_executables_list(r->executables, r->n_executables));
  return o;
}

static void haloctl_cache_print_text(const Halo__Wire__AdminMemoCacheReply *r) {
  haloctl_cache_summary_text("memo", r->memo);
  haloctl_cache_summary_text("executable", r->executable);
  printf("\nmemoized recordings: %zu (hits %" PRIu64 ", misses %" PRIu64 ")\n",
         r->n_entries, r->hits, r->misses);
  if (r->n_entries > 0) {
    static const char *const kColumns[] = {
        "KEY", ">DEVICE", ">COMMANDS", ">HITS", ">SHARERS", "STATE", NULL};
    haloctl_table_t table;
    haloctl_table_initialize(&table, kColumns);
    for (size_t i = 0; i < r->n_entries; ++i) {
      const Halo__Wire__MemoEntry *e = r->entries[i];
      haloctl_table_add(&table, haloctl_format("%.16s", e->key));
      haloctl_table_add(&table, haloctl_format("%" PRIu32, e->device));
      haloctl_table_add(&table, haloctl_format("%" PRIu32, e->commands));
      haloctl_table_add(&table, haloctl_format("%" PRIu64, e->hits));
      haloctl_table_add(&table, haloctl_format("%" PRIu32, e->sharers));
      haloctl_table_add(&table,
                        haloctl_format("%s", e->cached ? "cached" : "held"));
    }
    haloctl_table_print(&table, stdout, "  ");
    haloctl_table_deinitialize(&table);
  }
  char *directory = haloctl_printable(
      r->cache_directory && *r->cache_directory ? r->cache_directory : "none");
  printf("\nexecutables: %zu loaded (hits %" PRIu64 ", misses %" PRIu64
         "); compiled code on disk: %s\n",
         r->n_executables, r->executable_hits, r->executable_misses, directory);
  free(directory);
  if (r->n_executables > 0) {
    haloctl_executables_table(r->executables, r->n_executables, "  ");
  }
}

// ------------------------------------------------------------------ metrics

// One Prometheus sample line ("name{a=\"b\"} value") as a JSON object
// {name, labels, value}; NULL if it does not parse.
static json_t *haloctl_metrics_sample_json(const char *line) {
  size_t name_length = strcspn(line, "{ ");
  if (name_length == 0) return NULL;
  json_t *sample = json_object();
  json_t *labels = json_object();
  char *name = haloctl_format("%.*s", (int)name_length, line);
  haloctl_json_set(sample, "name", haloctl_json_text(name));
  free(name);
  haloctl_json_set(sample, "labels", labels);
  const char *c = line + name_length;
  char *value_text = malloc(strlen(line) + 1);
  if (!value_text) abort();
  if (*c == '{') {
    ++c;
    while (*c && *c != '}') {
      size_t key_length = strcspn(c, "=");
      if (c[key_length] != '=' || c[key_length + 1] != '"') goto bad;
      char *key = haloctl_format("%.*s", (int)key_length, c);
      c += key_length + 2;
      char *d = value_text;
      while (*c && *c != '"') {
        if (*c == '\\' && c[1]) {
          ++c;
          *d++ = *c == 'n' ? '\n' : *c;
        } else {
          *d++ = *c;
        }
        ++c;
      }
      *d = '\0';
      haloctl_json_set(labels, key, haloctl_json_text(value_text));
      free(key);
      if (*c != '"') goto bad;
      ++c;
      if (*c == ',') ++c;
    }
    if (*c != '}') goto bad;
    ++c;
  }
  while (*c == ' ') ++c;
  char *end = NULL;
  double value = strtod(c, &end);
  if (end == c) goto bad;
  free(value_text);
  if (!isfinite(value)) {
    haloctl_json_set(sample, "value",
                     json_string(isnan(value) ? "NaN"
                                 : value > 0  ? "+Inf"
                                              : "-Inf"));
  } else if (value == floor(value) && fabs(value) < 9007199254740992.0) {
    haloctl_json_set(sample, "value", json_integer((json_int_t)value));
  } else {
    haloctl_json_set(sample, "value", json_real(value));
  }
  return sample;
bad:
  free(value_text);
  json_decref(sample);
  return NULL;
}

static json_t *haloctl_metrics_json(const Halo__Wire__AdminMetricsReply *r) {
  json_t *list = json_array();
  const char *line = r->text;
  while (line && *line) {
    size_t length = strcspn(line, "\n");
    if (line[0] != '#' && length > 0) {
      char *copy = haloctl_format("%.*s", (int)length, line);
      json_t *sample = haloctl_metrics_sample_json(copy);
      if (sample) haloctl_json_append(list, sample);
      free(copy);
    }
    line += length;
    if (*line == '\n') ++line;
  }
  return list;
}

// The fields of a sample: name, labels (an object of any labels), value.
static json_t *haloctl_metrics_schema(void) {
  return haloctl_metrics_sample_json("name 0");
}

static void haloctl_metrics_print_text(const Halo__Wire__AdminMetricsReply *r) {
  fputs(r->text, stdout);
}

// ------------------------------------------------------------------ listings

// A command that fetches one reply and prints it.
typedef struct haloctl_listing_t {
  haloctl_simple_fn request;
  int body_case;
  size_t body_offset;  // of the reply body's pointer in the response
  json_t *(*to_json)(const void *body);  // --json, --query
  void (*print_text)(const void *body);
  // A row with every field of the listing's rows (--query checks the
  // fields against it, rows or none); NULL where the document is one
  // object (status, cache).
  json_t *(*schema)(void);
} haloctl_listing_t;

#define HALOCTL_LISTING(fn, BODY, field, prefix, schema)    \
  {                                                         \
    fn, HALO__WIRE__RESPONSE__BODY_##BODY,                  \
        offsetof(halo_wire_response_t, field),              \
        (json_t * (*)(const void *)) prefix##_json,         \
        (void (*)(const void *))prefix##_print_text, schema \
  }

static const haloctl_listing_t kStatus = HALOCTL_LISTING(
    halo_admin_status, ADMIN_STATUS, admin_status, haloctl_status, NULL);
static const haloctl_listing_t kClients =
    HALOCTL_LISTING(halo_admin_sessions, ADMIN_SESSIONS, admin_sessions,
                    haloctl_clients, haloctl_clients_schema);
static const haloctl_listing_t kQueues =
    HALOCTL_LISTING(halo_admin_queues, ADMIN_QUEUES, admin_queues,
                    haloctl_queues, haloctl_queues_schema);
static const haloctl_listing_t kWorkers =
    HALOCTL_LISTING(halo_admin_workers, ADMIN_WORKERS, admin_workers,
                    haloctl_workers, haloctl_workers_schema);
static const haloctl_listing_t kSemaphores =
    HALOCTL_LISTING(halo_admin_semaphores, ADMIN_SEMAPHORES, admin_semaphores,
                    haloctl_semaphores, haloctl_semaphores_schema);
static const haloctl_listing_t kBuffers =
    HALOCTL_LISTING(halo_admin_buffers, ADMIN_BUFFERS, admin_buffers,
                    haloctl_buffers, haloctl_buffers_schema);
static const haloctl_listing_t kExecutables = HALOCTL_LISTING(
    halo_admin_executables, ADMIN_EXECUTABLES, admin_executables,
    haloctl_executables, haloctl_executables_schema);
static const haloctl_listing_t kCache =
    HALOCTL_LISTING(halo_admin_memo_cache, ADMIN_MEMO_CACHE, admin_memo_cache,
                    haloctl_cache, NULL);
static const haloctl_listing_t kMetrics =
    HALOCTL_LISTING(halo_admin_metrics, ADMIN_METRICS, admin_metrics,
                    haloctl_metrics, haloctl_metrics_schema);

static halo_status_t haloctl_listing_request(halo_admin_t *admin, void *data,
                                             halo_wire_response_t **out) {
  return ((const haloctl_listing_t *)data)->request(admin, out);
}

static int haloctl_run_listing(const haloctl_options_t *options,
                               const char *command,
                               const haloctl_listing_t *listing) {
  halo_wire_response_t *response = NULL;
  int exit_code = haloctl_call(options, command, haloctl_listing_request,
                               (void *)listing, listing->body_case, &response);
  if (exit_code) return exit_code;
  const void *body =
      *(const void *const *)((const char *)response + listing->body_offset);
  exit_code = HALOCTL_EXIT_OK;
  if (options->csv) {
    json_t *document = listing->to_json(body);
    json_t *schema = listing->schema ? listing->schema() : NULL;
    if (!haloctl_query_print(command, document, schema, options->query,
                             options->csv_header, stdout)) {
      exit_code = HALOCTL_EXIT_USAGE;
    }
    json_decref(schema);
    json_decref(document);
  } else if (options->json) {
    haloctl_json_print(listing->to_json(body));
  } else {
    listing->print_text(body);
  }
  halo__wire__response__free_unpacked(response, NULL);
  return exit_code;
}

// ------------------------------------------------------------------ actions

static halo_status_t haloctl_kill_request(halo_admin_t *admin, void *data,
                                          halo_wire_response_t **out) {
  return halo_admin_kill_client(admin, *(uint32_t *)data, out);
}

static int haloctl_command_kill_client(const haloctl_options_t *options,
                                       uint32_t pid) {
  halo_wire_response_t *response = NULL;
  int exit_code =
      haloctl_call(options, "kill-client", haloctl_kill_request, &pid,
                   HALO__WIRE__RESPONSE__BODY_ADMIN_KILL_CLIENT, &response);
  if (exit_code) return exit_code;
  const Halo__Wire__AdminKillClientReply *reply = response->admin_kill_client;
  if (options->json) {
    json_t *o = json_object();
    haloctl_json_set(o, "pid", json_integer(pid));
    json_t *sessions = json_array();
    for (size_t i = 0; i < reply->n_session_ids; ++i) {
      haloctl_json_append(sessions, haloctl_json_id(reply->session_ids[i]));
    }
    haloctl_json_set(o, "sessions", sessions);
    haloctl_json_print(o);
  } else {
    printf("killed %zu session(s) of pid %" PRIu32 ":", reply->n_session_ids,
           pid);
    for (size_t i = 0; i < reply->n_session_ids; ++i) {
      printf(" %" PRIu64, reply->session_ids[i]);
    }
    fputs(
        " (waiting work and their semaphores failed; work already on a "
        "device finishes first)\n",
        stdout);
  }
  halo__wire__response__free_unpacked(response, NULL);
  return HALOCTL_EXIT_OK;
}

static halo_status_t haloctl_forgive_request(halo_admin_t *admin, void *data,
                                             halo_wire_response_t **out) {
  return halo_admin_forgive_client(admin, *(uint32_t *)data, out);
}

static int haloctl_command_forgive_client(const haloctl_options_t *options,
                                          uint32_t pid) {
  halo_wire_response_t *response = NULL;
  int exit_code =
      haloctl_call(options, "forgive-client", haloctl_forgive_request, &pid,
                   HALO__WIRE__RESPONSE__BODY_ADMIN_FORGIVE_CLIENT, &response);
  if (exit_code) return exit_code;
  const Halo__Wire__AdminForgiveClientReply *reply =
      response->admin_forgive_client;
  if (options->json) {
    json_t *o = json_object();
    haloctl_json_set(o, "pid", json_integer(pid));
    haloctl_json_set(o, "faults", json_integer(reply->faults));
    haloctl_json_print(o);
  } else {
    printf("forgave pid %" PRIu32 " %" PRIu32
           " device fault(s): its next connection is accepted\n",
           pid, reply->faults);
  }
  halo__wire__response__free_unpacked(response, NULL);
  return HALOCTL_EXIT_OK;
}

static halo_status_t haloctl_drain_request(halo_admin_t *admin, void *data,
                                           halo_wire_response_t **out) {
  return halo_admin_drain(admin, *(bool *)data, out);
}

static void haloctl_sleep(double seconds) {
  struct timespec ts = {.tv_sec = (time_t)seconds,
                        .tv_nsec = (long)((seconds - floor(seconds)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static double haloctl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

// drain: asks halod to drain, then polls until no work is pending or in
// flight, or |wait_seconds| pass (0: does not wait). undrain: |cancel|.
static int haloctl_command_drain(const haloctl_options_t *options, bool cancel,
                                 double wait_seconds) {
  const char *command = cancel ? "undrain" : "drain";
  double deadline = haloctl_now() + wait_seconds;
  bool reported = false;
  for (;;) {
    halo_wire_response_t *response = NULL;
    int exit_code =
        haloctl_call(options, command, haloctl_drain_request, &cancel,
                     HALO__WIRE__RESPONSE__BODY_ADMIN_DRAIN, &response);
    if (exit_code) return exit_code;
    const Halo__Wire__AdminDrainReply *r = response->admin_drain;
    bool idle = r->pending == 0 && r->in_flight == 0;
    bool done = cancel || idle || haloctl_now() >= deadline;
    if (done) {
      if (options->json) {
        json_t *o = json_object();
        haloctl_json_set(o, "draining", json_boolean(r->draining));
        haloctl_json_set(o, "drained", json_boolean(r->draining && idle));
        haloctl_json_set(o, "sessions", json_integer(r->sessions));
        haloctl_json_set(o, "pending", json_integer(r->pending));
        haloctl_json_set(o, "in_flight", json_integer(r->in_flight));
        haloctl_json_print(o);
      } else if (cancel) {
        puts("halod accepts new sessions and submissions again");
      } else if (idle) {
        printf("drained: no work pending or in flight (%" PRIu32
               " session(s) still connected); restart halod now "
               "(systemctl restart halod)\n",
               r->sessions);
      } else if (wait_seconds > 0) {
        printf("still draining after %.0f s: %" PRIu32 " pending, %" PRIu32
               " in flight\n",
               wait_seconds, r->pending, r->in_flight);
      } else {
        printf("draining: %" PRIu32 " pending, %" PRIu32
               " in flight; new sessions and submissions are refused\n",
               r->pending, r->in_flight);
      }
      halo__wire__response__free_unpacked(response, NULL);
      return cancel || idle || wait_seconds == 0 ? HALOCTL_EXIT_OK
                                                 : HALOCTL_EXIT_FAILURE;
    }
    if (!options->json && !reported) {
      printf("draining: waiting for %" PRIu32 " pending and %" PRIu32
             " in-flight submission(s) (up to %.0f s)\n",
             r->pending, r->in_flight, wait_seconds);
      fflush(stdout);
      reported = true;
    }
    halo__wire__response__free_unpacked(response, NULL);
    haloctl_sleep(0.1);
  }
}

// ------------------------------------------------------------------ main

typedef struct haloctl_command_t {
  const char *name;
  const char *arguments;             // for the usage text
  const haloctl_listing_t *listing;  // NULL: handled in main
  bool watchable;
  const char *help;
} haloctl_command_t;

static const haloctl_command_t kCommands[] = {
    {"status", "", &kStatus, true,
     "daemon, drivers, devices, sessions, work, draining"},
    {"clients", "", &kClients, true,
     "sessions: pid, uid, name, bytes per device, work, faults"},
    {"queues", "", &kQueues, true,
     "queues: pending (and on what), in flight, done, p50/p99"},
    {"workers", "", &kWorkers, false,
     "device worker processes: domain, pid, state, faults"},
    {"semaphores", "", &kSemaphores, false,
     "semaphores: value, waiters, owner, importers, failure"},
    {"buffers", "", &kBuffers, false,
     "buffers: owner, device, memory, size, holders"},
    {"executables", "", &kExecutables, false,
     "executables: format, hash, users, load state, load time"},
    {"cache", "", &kCache, false, "memo and executable caches: entries, hits"},
    {"metrics", "", &kMetrics, false,
     "Prometheus text exposition of halod's metrics"},
    {"kill-client", " PID", NULL, false,
     "end PID's sessions: fail its work, release its objects"},
    {"forgive-client", " PID", NULL, false,
     "forget PID's device faults: a refused client may connect"},
    {"drain", " [SECONDS]", NULL, false,
     "refuse new sessions, work; wait SECONDS (60) for the rest"},
    {"undrain", "", NULL, false, "accept sessions and submissions again"},
};

#define HALOCTL_COMMAND_COUNT (sizeof(kCommands) / sizeof(kCommands[0]))

static void haloctl_usage(FILE *out) {
  fputs(
      "usage: haloctl [OPTIONS] COMMAND [ARGS] [OPTIONS]\n"
      "\n"
      "Shows and steers a running halod over its admin socket.\n"
      "\n"
      "commands:\n",
      out);
  for (size_t i = 0; i < HALOCTL_COMMAND_COUNT; ++i) {
    char name[40];
    snprintf(name, sizeof(name), "%s%s", kCommands[i].name,
             kCommands[i].arguments);
    fprintf(out, "  %-18s %s\n", name, kCommands[i].help);
  }
  fputs(
      "\n"
      "options:\n"
      "  --admin ADDR       admin socket of halod: ipc://PATH, or the PATH "
      "(default:\n"
      "                     $HALO_ADMIN_ADDRESS, else "
      "ipc:///run/halo-admin/admin.sock)\n"
      "  --json             print JSON instead of tables (every command;\n"
      "                     64-bit ids are strings)\n"
      "  --query F1,F2,...  listings: print those fields of each row as CSV\n"
      "                     (the names of --json; a.b for a field of an "
      "object)\n"
      "  --format csv[,noheader]\n"
      "                     listings: CSV rows (with --query, those "
      "fields;\n"
      "                     without, every field that is a value)\n"
      "  --timeout MS       give up on the daemon after MS milliseconds "
      "(default 5000)\n"
      "  --watch SECONDS    status, clients, queues: print again every "
      "SECONDS\n"
      "                     (--json: one document a line) until interrupted\n"
      "  --count N          with --watch: stop after N times\n"
      "  --help             show this help\n"
      "  --version          show haloctl's version\n"
      "\n"
      "exit status: 0 ok, 1 error from the daemon (or drain timed out), "
      "2 usage,\n"
      "3 cannot connect to the daemon. Options go before or after the "
      "command.\nSee haloctl(1).\n",
      out);
}

static int haloctl_usage_error(const char *format, ...)
    __attribute__((format(printf, 1, 2)));
static int haloctl_usage_error(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fputs("haloctl: ", stderr);
  vfprintf(stderr, format, args);
  fputs(" (see haloctl --help)\n", stderr);
  va_end(args);
  return HALOCTL_EXIT_USAGE;
}

static bool haloctl_parse_double(const char *text, double min, double max,
                                 double *out) {
  char *end = NULL;
  errno = 0;
  double value = strtod(text, &end);
  if (!*text || *end || errno || !isfinite(value) || value < min ||
      value > max) {
    return false;
  }
  *out = value;
  return true;
}

static int haloctl_run(const haloctl_options_t *options,
                       const haloctl_command_t *command, int argc,
                       char **argv) {
  if (command->listing) {
    if (argc > 0) {
      return haloctl_usage_error("%s takes no arguments, got '%s'",
                                 command->name, argv[0]);
    }
    return haloctl_run_listing(options, command->name, command->listing);
  }
  bool kill = strcmp(command->name, "kill-client") == 0;
  if (kill || strcmp(command->name, "forgive-client") == 0) {
    double pid = 0;
    if (argc != 1 || !haloctl_parse_double(argv[0], 1, 4194304, &pid) ||
        pid != floor(pid)) {
      return haloctl_usage_error("%s wants one process id", command->name);
    }
    return kill ? haloctl_command_kill_client(options, (uint32_t)pid)
                : haloctl_command_forgive_client(options, (uint32_t)pid);
  }
  if (strcmp(command->name, "drain") == 0) {
    double seconds = 60;
    if (argc > 1 ||
        (argc == 1 && !haloctl_parse_double(argv[0], 0, 86400, &seconds))) {
      return haloctl_usage_error("drain takes at most SECONDS (0..86400)");
    }
    return haloctl_command_drain(options, false, seconds);
  }
  if (argc > 0) {
    return haloctl_usage_error("%s takes no arguments", command->name);
  }
  return haloctl_command_drain(options, true, 0);
}

int main(int argc, char **argv) {
  enum {
    kOptionAdmin = 256,
    kOptionJson,
    kOptionTimeout,
    kOptionWatch,
    kOptionCount,
    kOptionQuery,
    kOptionFormat
  };
  static const struct option kLongOptions[] = {
      {"admin", required_argument, NULL, kOptionAdmin},
      {"json", no_argument, NULL, kOptionJson},
      {"timeout", required_argument, NULL, kOptionTimeout},
      {"watch", required_argument, NULL, kOptionWatch},
      {"count", required_argument, NULL, kOptionCount},
      {"query", required_argument, NULL, kOptionQuery},
      {"format", required_argument, NULL, kOptionFormat},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  haloctl_options_t options = {.timeout_ms = 5000};
  const char *admin_flag = NULL;
  const char *format = NULL;
  int opt;
  // Options go before or after the command (getopt_long permutes; "--"
  // ends them). ":": a missing argument is reported as ':', and opterr 0:
  // haloctl says what was wrong in one line.
  opterr = 0;
  while ((opt = getopt_long(argc, argv, ":hV", kLongOptions, NULL)) != -1) {
    double value = 0;
    switch (opt) {
      case kOptionQuery:
        if (!haloctl_query_fields_valid(optarg)) {
          return haloctl_usage_error(
              "--query wants FIELD,FIELD,... (names of --json's fields), got "
              "'%s'",
              optarg);
        }
        options.query = optarg;
        options.csv = true;
        break;
      case kOptionFormat:
        format = optarg;
        break;
      case kOptionAdmin:
        admin_flag = optarg;
        break;
      case kOptionJson:
        options.json = true;
        break;
      case kOptionTimeout:
        if (!haloctl_parse_double(optarg, 1, 3600000, &value) ||
            value != floor(value)) {
          return haloctl_usage_error(
              "--timeout wants milliseconds in 1..3600000, got '%s'", optarg);
        }
        options.timeout_ms = (int)value;
        break;
      case kOptionWatch:
        if (!haloctl_parse_double(optarg, 0.1, 86400, &value)) {
          return haloctl_usage_error(
              "--watch wants seconds in 0.1..86400, got '%s'", optarg);
        }
        options.watch_seconds = value;
        break;
      case kOptionCount:
        if (!haloctl_parse_double(optarg, 1, 1e9, &value) ||
            value != floor(value)) {
          return haloctl_usage_error("--count wants a positive count, got '%s'",
                                     optarg);
        }
        options.watch_count = (long)value;
        break;
      case 'h':
        haloctl_usage(stdout);
        return HALOCTL_EXIT_OK;
      case 'V':
        printf("haloctl %s (protocol %d)\n", HALO_VERSION_STRING,
               HALO_PROTOCOL_VERSION);
        return HALOCTL_EXIT_OK;
      case ':':
        return haloctl_usage_error("option '%s' needs a value",
                                   argv[optind - 1]);
      default:
        if (optopt && optopt < 256) {
          return haloctl_usage_error("unknown option '-%c'", optopt);
        }
        return haloctl_usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (format) {
    // csv, then optionally noheader, in any order.
    bool csv = false, noheader = false;
    char *copy = strdup(format);
    if (!copy) abort();
    bool ok = true;
    for (char *item = strtok(copy, ","); item; item = strtok(NULL, ",")) {
      if (strcmp(item, "csv") == 0) {
        csv = true;
      } else if (strcmp(item, "noheader") == 0) {
        noheader = true;
      } else {
        ok = false;
      }
    }
    free(copy);
    if (!ok || !csv) {
      return haloctl_usage_error("--format wants csv or csv,noheader, got '%s'",
                                 format);
    }
    options.csv = true;
    options.csv_header = !noheader;
  } else {
    options.csv_header = true;
  }
  if (options.csv && options.json) {
    return haloctl_usage_error(
        "--json and --query/--format csv exclude each "
        "other");
  }
  if (optind >= argc) return haloctl_usage_error("no command given");
  const char *name = argv[optind];
  const haloctl_command_t *command = NULL;
  for (size_t i = 0; i < HALOCTL_COMMAND_COUNT; ++i) {
    if (strcmp(name, kCommands[i].name) == 0) command = &kCommands[i];
  }
  if (!command) return haloctl_usage_error("unknown command '%s'", name);
  if (options.watch_count && !options.watch_seconds) {
    return haloctl_usage_error("--count goes with --watch");
  }
  if (options.csv && !command->listing) {
    return haloctl_usage_error(
        "--query and --format work with the listing commands, not %s", name);
  }
  if (options.watch_seconds && !command->watchable) {
    return haloctl_usage_error(
        "--watch works with status, clients and queues, not %s", name);
  }
  options.admin_address = halo_admin_default_address(admin_flag);
  // halod's admin socket is ipc:// only: a path without a scheme is taken
  // as that path's ipc:// address.
  static char admin_address[512];
  if (!strstr(options.admin_address, "://")) {
    if (strlen(options.admin_address) + strlen("ipc://") >=
        sizeof(admin_address)) {
      return haloctl_usage_error("the admin address '%s' is too long",
                                 options.admin_address);
    }
    snprintf(admin_address, sizeof(admin_address), "ipc://%s",
             options.admin_address);
    options.admin_address = admin_address;
  } else if (strncmp(options.admin_address, "ipc://", 6) != 0) {
    return haloctl_usage_error(
        "the admin address '%s' is not an ipc:// address or a path (%s; "
        "halod's admin socket is ipc:// only)",
        options.admin_address,
        admin_flag && *admin_flag ? "--admin" : "$HALO_ADMIN_ADDRESS");
  }
  int command_argc = argc - optind - 1;
  char **command_argv = argv + optind + 1;
  bool clear = options.watch_seconds && !options.json && isatty(STDOUT_FILENO);
  int exit_code = HALOCTL_EXIT_OK;
  for (long round = 1;; ++round) {
    if (options.watch_seconds && !options.json) {
      if (clear) fputs("\033[H\033[2J", stdout);
      time_t now = time(NULL);
      char stamp[32];
      strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", localtime(&now));
      printf("every %gs: haloctl %s    %s\n\n", options.watch_seconds, name,
             stamp);
    }
    exit_code = haloctl_run(&options, command, command_argc, command_argv);
    if (fflush(stdout) != 0 || ferror(stdout)) {
      perror("haloctl: writing output");
      return HALOCTL_EXIT_FAILURE;
    }
    // Under --watch a daemon that is down (restarting) is reported and
    // asked again; a usage error ends it.
    if (!options.watch_seconds || exit_code == HALOCTL_EXIT_USAGE) break;
    if (options.watch_count && round >= options.watch_count) break;
    haloctl_sleep(options.watch_seconds);
  }
  return exit_code;
}
