// haloctl: the operator's view of a running halod, over its admin socket.
//
//   haloctl [--admin ADDR] [--json] [--timeout MS] COMMAND
//
// Commands: status, clients, semaphores, queues, cache. Human output is aligned
// tables;
// --json prints one JSON document (strings escaped, invalid UTF-8 replaced
// by U+FFFD) so scripts can parse it.
//
// Exit status: 0 success, 1 the daemon could not be reached or refused the
// request, 2 usage error.
//
// Single-threaded.
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/admin.h"
#include "common/wire.h"

#define HALOCTL_EXIT_OK 0
#define HALOCTL_EXIT_FAILURE 1
#define HALOCTL_EXIT_USAGE 2

typedef struct haloctl_options_t {
  const char *admin_address;  // resolved: flag, $HALO_ADMIN_ADDRESS, default
  bool json;
  int timeout_ms;
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

// Writes |text| as a JSON string literal.
static void haloctl_json_string(FILE *out, const char *text) {
  const unsigned char *s = (const unsigned char *)(text ? text : "");
  fputc('"', out);
  while (*s) {
    unsigned char c = *s;
    if (c == '"' || c == '\\') {
      fputc('\\', out);
      fputc(c, out);
      ++s;
    } else if (c < 0x20) {
      switch (c) {
        case '\n':
          fputs("\\n", out);
          break;
        case '\r':
          fputs("\\r", out);
          break;
        case '\t':
          fputs("\\t", out);
          break;
        case '\b':
          fputs("\\b", out);
          break;
        case '\f':
          fputs("\\f", out);
          break;
        default:
          fprintf(out, "\\u%04x", c);
      }
      ++s;
    } else {
      size_t length = haloctl_utf8_sequence_length(s);
      if (length == 0) {
        fputs("\\ufffd", out);
        ++s;
      } else {
        fwrite(s, 1, length, out);
        s += length;
      }
    }
  }
  fputc('"', out);
}

// ,"NAME":VALUE or ,"NAME":null for an absent optional field.
static void haloctl_json_optional_u32(FILE *out, const char *name, bool has,
                                      uint32_t value) {
  if (has) {
    fprintf(out, ",\"%s\":%" PRIu32, name, value);
  } else {
    fprintf(out, ",\"%s\":null", name);
  }
}

// Seconds for JSON: NaN and infinities are not JSON numbers.
static double haloctl_json_seconds(double seconds) {
  return isfinite(seconds) && seconds >= 0 ? seconds : 0.0;
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

#define HALOCTL_TABLE_MAX_COLUMNS 16

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

// Connects and runs one admin request. Prints the error and returns false on
// failure (the caller exits 1).
typedef halo_status_t (*haloctl_request_fn)(halo_admin_t *admin,
                                            halo_wire_response_t **out);

static bool haloctl_call(const haloctl_options_t *options, const char *command,
                         haloctl_request_fn request,
                         halo_wire_response_t **out_response) {
  *out_response = NULL;
  halo_admin_t *admin = NULL;
  halo_status_t status =
      halo_admin_connect(options->admin_address, options->timeout_ms, &admin);
  if (!status) {
    status = request(admin, out_response);
    halo_admin_close(admin);
    if (status && (halo_status_code(status) == HALO_STATUS_UNAVAILABLE ||
                   halo_status_code(status) == HALO_STATUS_DEADLINE_EXCEEDED)) {
      // Connected, but no answer: the daemon is as unreachable as if the
      // dial had failed.
    } else if (status) {
      fprintf(stderr, "haloctl: %s: halod at %s answered %s: %s\n", command,
              options->admin_address,
              halo_status_code_name(halo_status_code(status)),
              halo_status_message(status));
      halo_status_free(status);
      return false;
    }
  }
  if (status) {
    fprintf(stderr, "haloctl: cannot reach halod at %s: %s\n",
            options->admin_address, halo_status_message(status));
    halo_status_free(status);
    return false;
  }
  return true;
}

// A reply body the daemon left out is a protocol error, not a crash.
static bool haloctl_check_body(const halo_wire_response_t *response,
                               const void *body, const char *command) {
  if (body) return true;
  fprintf(stderr,
          "haloctl: %s: halod answered without the expected reply "
          "(body case %d); is it a different protocol version?\n",
          command, (int)response->body_case);
  return false;
}

// ------------------------------------------------------------------ status

static void haloctl_status_print_json(const Halo__Wire__AdminStatusReply *s) {
  FILE *out = stdout;
  fputs("{\"version\":", out);
  haloctl_json_string(out, s->daemon_version);
  fprintf(out,
          ",\"protocol_version\":%" PRIu32 ",\"pid\":%" PRIu64
          ",\"uptime_seconds\":%.3f,\"incarnation\":%" PRIu64 ",\"listen\":",
          s->protocol_version, s->pid, haloctl_json_seconds(s->uptime_seconds),
          s->incarnation);
  haloctl_json_string(out, s->listen_address);
  fputs(",\"drivers\":[", out);
  for (size_t i = 0; i < s->n_drivers; ++i) {
    const Halo__Wire__DriverInfo *d = s->drivers[i];
    fputs(i ? ",{\"name\":" : "{\"name\":", out);
    haloctl_json_string(out, d->name);
    fprintf(out,
            ",\"available\":%s,\"reason\":", d->available ? "true" : "false");
    if (d->reason) {
      haloctl_json_string(out, d->reason);
    } else {
      fputs("null", out);
    }
    fputc('}', out);
  }
  fputs("],\"devices\":[", out);
  for (size_t i = 0; i < s->n_devices; ++i) {
    const Halo__Wire__DeviceInfo *d = s->devices[i];
    fprintf(out, "%s{\"ordinal\":%" PRIu32 ",\"driver\":", i ? "," : "",
            d->ordinal);
    haloctl_json_string(out, d->driver);
    fputs(",\"name\":", out);
    haloctl_json_string(out, d->name);
    fprintf(out, ",\"memory_bytes\":%" PRIu64, d->memory_bytes);
    haloctl_json_optional_u32(out, "compute_major", d->has_compute_major,
                              d->compute_major);
    haloctl_json_optional_u32(out, "compute_minor", d->has_compute_minor,
                              d->compute_minor);
    haloctl_json_optional_u32(out, "multiprocessor_count",
                              d->has_multiprocessor_count,
                              d->multiprocessor_count);
    fputc('}', out);
  }
  fprintf(out, "],\"sessions\":%" PRIu32 ",\"trust_domains\":%" PRIu32 "}\n",
          s->sessions, s->trust_domains);
}

static void haloctl_status_print_text(const Halo__Wire__AdminStatusReply *s) {
  FILE *out = stdout;
  char *version = haloctl_printable(s->daemon_version);
  char *listen = haloctl_printable(s->listen_address);
  char *uptime = haloctl_format_duration(s->uptime_seconds);
  fprintf(out, "halod %s (protocol %" PRIu32 ")\n", version,
          s->protocol_version);
  fprintf(out, "  pid            %" PRIu64 "\n", s->pid);
  fprintf(out, "  uptime         %s\n", uptime);
  fprintf(out, "  incarnation    %016" PRIx64 "\n", s->incarnation);
  fprintf(out, "  listen         %s\n", listen);
  fprintf(out, "  sessions       %" PRIu32 "\n", s->sessions);
  fprintf(out, "  trust domains  %" PRIu32 "\n", s->trust_domains);
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

static int haloctl_command_status(const haloctl_options_t *options) {
  halo_wire_response_t *response = NULL;
  if (!haloctl_call(options, "status", halo_admin_status, &response)) {
    return HALOCTL_EXIT_FAILURE;
  }
  int exit_code = HALOCTL_EXIT_FAILURE;
  if (haloctl_check_body(response, response->admin_status, "status")) {
    if (options->json) {
      haloctl_status_print_json(response->admin_status);
    } else {
      haloctl_status_print_text(response->admin_status);
    }
    exit_code = HALOCTL_EXIT_OK;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return exit_code;
}

// ------------------------------------------------------------------ clients

static void haloctl_clients_print_json(
    const Halo__Wire__AdminSessionsReply *reply) {
  FILE *out = stdout;
  fputc('[', out);
  for (size_t i = 0; i < reply->n_sessions; ++i) {
    const Halo__Wire__SessionInfo *s = reply->sessions[i];
    fprintf(out,
            "%s{\"session_id\":%" PRIu64 ",\"uid\":%" PRIu32 ",\"pid\":%" PRIu32
            ",\"trust_domain\":",
            i ? "," : "", s->session_id, s->uid, s->pid);
    haloctl_json_string(out, s->trust_domain);
    fputs(",\"client_name\":", out);
    if (s->client_name) {
      haloctl_json_string(out, s->client_name);
    } else {
      fputs("null", out);
    }
    fprintf(out,
            ",\"age_seconds\":%.3f,\"buffers\":%" PRIu32
            ",\"semaphores\":%" PRIu32 ",\"arenas\":%" PRIu32
            ",\"host_bytes\":%" PRIu64 ",\"device_bytes\":%" PRIu64
            ",\"requests\":%" PRIu64 "}",
            haloctl_json_seconds(s->age_seconds), s->buffers, s->semaphores,
            s->arenas, s->host_bytes, s->device_bytes, s->requests);
  }
  fputs("]\n", out);
}

static void haloctl_clients_print_text(
    const Halo__Wire__AdminSessionsReply *reply) {
  if (reply->n_sessions == 0) {
    fputs("no clients\n", stdout);
    return;
  }
  static const char *const kColumns[] = {
      ">SESSION",      ">UID",      ">PID",        "DOMAIN",  "NAME",
      ">AGE",          ">BUFFERS",  ">SEMAPHORES", ">ARENAS", ">HOST BYTES",
      ">DEVICE BYTES", ">REQUESTS", NULL};
  haloctl_table_t table;
  haloctl_table_initialize(&table, kColumns);
  for (size_t i = 0; i < reply->n_sessions; ++i) {
    const Halo__Wire__SessionInfo *s = reply->sessions[i];
    haloctl_table_add(&table, haloctl_format("%" PRIu64, s->session_id));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->uid));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->pid));
    haloctl_table_add(&table, haloctl_printable(s->trust_domain));
    haloctl_table_add(
        &table, haloctl_printable(
                    s->client_name && *s->client_name ? s->client_name : "-"));
    haloctl_table_add(&table, haloctl_format_duration(s->age_seconds));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->buffers));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->semaphores));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->arenas));
    haloctl_table_add(&table, haloctl_format_bytes(s->host_bytes));
    haloctl_table_add(&table, haloctl_format_bytes(s->device_bytes));
    haloctl_table_add(&table, haloctl_format("%" PRIu64, s->requests));
  }
  haloctl_table_print(&table, stdout, "");
  haloctl_table_deinitialize(&table);
}

static int haloctl_command_clients(const haloctl_options_t *options) {
  halo_wire_response_t *response = NULL;
  if (!haloctl_call(options, "clients", halo_admin_sessions, &response)) {
    return HALOCTL_EXIT_FAILURE;
  }
  int exit_code = HALOCTL_EXIT_FAILURE;
  if (haloctl_check_body(response, response->admin_sessions, "clients")) {
    if (options->json) {
      haloctl_clients_print_json(response->admin_sessions);
    } else {
      haloctl_clients_print_text(response->admin_sessions);
    }
    exit_code = HALOCTL_EXIT_OK;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return exit_code;
}

// ------------------------------------------------------------------ semaphores

static const char *haloctl_failure_name(int32_t code) {
  if (code == 0) return "OK";
  return halo_status_code_name((halo_status_code_t)code);
}

static void haloctl_semaphores_print_json(
    const Halo__Wire__AdminSemaphoresReply *reply) {
  FILE *out = stdout;
  fputc('[', out);
  for (size_t i = 0; i < reply->n_semaphores; ++i) {
    const Halo__Wire__SemaphoreInfo *s = reply->semaphores[i];
    fprintf(out,
            "%s{\"semaphore_id\":%" PRIu64 ",\"owner_session\":%" PRIu64
            ",\"value\":%" PRIu64 ",\"failure_code\":%" PRId32 ",\"failure\":",
            i ? "," : "", s->semaphore_id, s->owner_session, s->value,
            s->failure_code);
    if (s->failure_code) {
      haloctl_json_string(out, haloctl_failure_name(s->failure_code));
    } else {
      fputs("null", out);
    }
    fprintf(out, ",\"holders\":%" PRIu32 ",\"exportable\":%s}", s->holders,
            s->exportable ? "true" : "false");
  }
  fputs("]\n", out);
}

static void haloctl_semaphores_print_text(
    const Halo__Wire__AdminSemaphoresReply *reply) {
  if (reply->n_semaphores == 0) {
    fputs("no semaphores\n", stdout);
    return;
  }
  static const char *const kColumns[] = {">SEMAPHORE", ">OWNER",   ">VALUE",
                                         "STATE",      ">HOLDERS", "EXPORTABLE",
                                         NULL};
  haloctl_table_t table;
  haloctl_table_initialize(&table, kColumns);
  for (size_t i = 0; i < reply->n_semaphores; ++i) {
    const Halo__Wire__SemaphoreInfo *s = reply->semaphores[i];
    haloctl_table_add(&table, haloctl_format("%" PRIu64, s->semaphore_id));
    haloctl_table_add(&table, s->owner_session
                                  ? haloctl_format("%" PRIu64, s->owner_session)
                                  : haloctl_format("-"));
    haloctl_table_add(&table, haloctl_format("%" PRIu64, s->value));
    haloctl_table_add(
        &table, s->failure_code
                    ? haloctl_format("failed: %s",
                                     haloctl_failure_name(s->failure_code))
                    : haloctl_format("ok"));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, s->holders));
    haloctl_table_add(&table, haloctl_format(s->exportable ? "yes" : "no"));
  }
  haloctl_table_print(&table, stdout, "");
  haloctl_table_deinitialize(&table);
}

// Runs one admin call and prints its body with |print_json| or
// |print_text|; |body| picks the reply body out of the response.
typedef const void *(*haloctl_body_fn)(const halo_wire_response_t *response);
typedef void (*haloctl_print_fn)(const void *body);

static int haloctl_run_listing(
    const haloctl_options_t *options, const char *command,
    halo_status_t (*call)(halo_admin_t *, halo_wire_response_t **),
    haloctl_body_fn body, haloctl_print_fn print_json,
    haloctl_print_fn print_text) {
  halo_wire_response_t *response = NULL;
  if (!haloctl_call(options, command, call, &response)) {
    return HALOCTL_EXIT_FAILURE;
  }
  int exit_code = HALOCTL_EXIT_FAILURE;
  const void *reply = body(response);
  if (haloctl_check_body(response, reply, command)) {
    (options->json ? print_json : print_text)(reply);
    exit_code = HALOCTL_EXIT_OK;
  }
  halo__wire__response__free_unpacked(response, NULL);
  return exit_code;
}

static const void *haloctl_semaphores_body(const halo_wire_response_t *r) {
  return r->admin_semaphores;
}

static int haloctl_command_semaphores(const haloctl_options_t *options) {
  return haloctl_run_listing(options, "semaphores", halo_admin_semaphores,
                             haloctl_semaphores_body,
                             (haloctl_print_fn)haloctl_semaphores_print_json,
                             (haloctl_print_fn)haloctl_semaphores_print_text);
}

// ------------------------------------------------------------------ queues

static void haloctl_queues_print_json(const Halo__Wire__AdminQueuesReply *r) {
  FILE *out = stdout;
  fputc('[', out);
  for (size_t i = 0; i < r->n_queues; ++i) {
    const Halo__Wire__QueueInfo *q = r->queues[i];
    fprintf(out,
            "%s{\"session_id\":%" PRIu64 ",\"queue_handle\":%" PRIu64
            ",\"device\":%" PRIu32 ",\"pending\":%" PRIu32
            ",\"in_flight\":%" PRIu32 ",\"completed\":%" PRIu64
            ",\"failed\":%" PRIu64 ",\"mean_latency_us\":%.3f}",
            i ? "," : "", q->session_id, q->queue_handle, q->device, q->pending,
            q->in_flight, q->completed, q->failed, q->mean_latency_us);
  }
  fputs("]\n", out);
}

static void haloctl_queues_print_text(const Halo__Wire__AdminQueuesReply *r) {
  if (r->n_queues == 0) {
    fputs("no queues\n", stdout);
    return;
  }
  static const char *const kColumns[] = {
      ">SESSION",   ">QUEUE",  ">DEVICE",       ">PENDING", ">IN FLIGHT",
      ">COMPLETED", ">FAILED", ">MEAN LATENCY", NULL};
  haloctl_table_t table;
  haloctl_table_initialize(&table, kColumns);
  for (size_t i = 0; i < r->n_queues; ++i) {
    const Halo__Wire__QueueInfo *q = r->queues[i];
    haloctl_table_add(&table, haloctl_format("%" PRIu64, q->session_id));
    haloctl_table_add(
        &table, q->queue_handle ? haloctl_format("0x%" PRIx64, q->queue_handle)
                                : haloctl_format("default"));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, q->device));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, q->pending));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, q->in_flight));
    haloctl_table_add(&table, haloctl_format("%" PRIu64, q->completed));
    haloctl_table_add(&table, haloctl_format("%" PRIu64, q->failed));
    haloctl_table_add(&table, haloctl_format("%.1f us", q->mean_latency_us));
  }
  haloctl_table_print(&table, stdout, "");
  haloctl_table_deinitialize(&table);
}

static const void *haloctl_queues_body(const halo_wire_response_t *r) {
  return r->admin_queues;
}

static int haloctl_command_queues(const haloctl_options_t *options) {
  return haloctl_run_listing(options, "queues", halo_admin_queues,
                             haloctl_queues_body,
                             (haloctl_print_fn)haloctl_queues_print_json,
                             (haloctl_print_fn)haloctl_queues_print_text);
}

// ------------------------------------------------------------------ cache

static void haloctl_cache_print_json(const Halo__Wire__AdminMemoCacheReply *r) {
  FILE *out = stdout;
  fprintf(out, "{\"hits\":%" PRIu64 ",\"misses\":%" PRIu64 ",\"entries\":[",
          r->hits, r->misses);
  for (size_t i = 0; i < r->n_entries; ++i) {
    const Halo__Wire__MemoEntry *e = r->entries[i];
    fprintf(out, "%s{\"key\":", i ? "," : "");
    haloctl_json_string(out, e->key);
    fprintf(out,
            ",\"device\":%" PRIu32 ",\"commands\":%" PRIu32 ",\"hits\":%" PRIu64
            ",\"sharers\":%" PRIu32 "}",
            e->device, e->commands, e->hits, e->sharers);
  }
  fputs("]}\n", out);
}

static void haloctl_cache_print_text(const Halo__Wire__AdminMemoCacheReply *r) {
  printf("memoized recordings: %zu (hits %" PRIu64 ", misses %" PRIu64 ")\n",
         r->n_entries, r->hits, r->misses);
  if (r->n_entries == 0) return;
  static const char *const kColumns[] = {"KEY",   ">DEVICE",  ">COMMANDS",
                                         ">HITS", ">SHARERS", NULL};
  haloctl_table_t table;
  haloctl_table_initialize(&table, kColumns);
  for (size_t i = 0; i < r->n_entries; ++i) {
    const Halo__Wire__MemoEntry *e = r->entries[i];
    haloctl_table_add(&table, haloctl_format("%.16s", e->key));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, e->device));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, e->commands));
    haloctl_table_add(&table, haloctl_format("%" PRIu64, e->hits));
    haloctl_table_add(&table, haloctl_format("%" PRIu32, e->sharers));
  }
  haloctl_table_print(&table, stdout, "");
  haloctl_table_deinitialize(&table);
}

static const void *haloctl_cache_body(const halo_wire_response_t *r) {
  return r->admin_memo_cache;
}

static int haloctl_command_cache(const haloctl_options_t *options) {
  return haloctl_run_listing(options, "cache", halo_admin_memo_cache,
                             haloctl_cache_body,
                             (haloctl_print_fn)haloctl_cache_print_json,
                             (haloctl_print_fn)haloctl_cache_print_text);
}

// ------------------------------------------------------------------ main

typedef struct haloctl_command_t {
  const char *name;
  int (*run)(const haloctl_options_t *options);
  const char *help;
} haloctl_command_t;

static const haloctl_command_t kCommands[] = {
    {"status", haloctl_command_status,
     "daemon version, uptime, drivers, devices, session count"},
    {"clients", haloctl_command_clients,
     "connected sessions and what each one holds"},
    {"semaphores", haloctl_command_semaphores,
     "timeline semaphores: value, failure, holders"},
    {"queues", haloctl_command_queues,
     "queues: pending, in flight, completed, failed, latency"},
    {"cache", haloctl_command_cache,
     "memoized command buffers: entries, hits, sharers"},
};

static void haloctl_usage(FILE *out) {
  fputs(
      "usage: haloctl [--admin ADDR] [--json] [--timeout MS] COMMAND\n"
      "\n"
      "Shows the state of a running halod over its admin socket.\n"
      "\n"
      "commands:\n",
      out);
  for (size_t i = 0; i < sizeof(kCommands) / sizeof(kCommands[0]); ++i) {
    fprintf(out, "  %-12s %s\n", kCommands[i].name, kCommands[i].help);
  }
  fputs(
      "\n"
      "options:\n"
      "  --admin ADDR   admin socket of halod (default: $HALO_ADMIN_ADDRESS,\n"
      "                 else ipc:///run/halo/admin.sock)\n"
      "  --json         print JSON instead of tables\n"
      "  --timeout MS   give up on the daemon after MS milliseconds "
      "(default 5000)\n"
      "  --help         show this help\n"
      "  --version      show haloctl's version\n"
      "\n"
      "exit status: 0 ok, 1 daemon unreachable or request refused, 2 usage\n",
      out);
}

int main(int argc, char **argv) {
  enum { kOptionAdmin = 256, kOptionJson, kOptionTimeout };
  static const struct option kLongOptions[] = {
      {"admin", required_argument, NULL, kOptionAdmin},
      {"json", no_argument, NULL, kOptionJson},
      {"timeout", required_argument, NULL, kOptionTimeout},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  haloctl_options_t options = {.timeout_ms = 5000};
  const char *admin_flag = NULL;
  int opt;
  while ((opt = getopt_long(argc, argv, "hV", kLongOptions, NULL)) != -1) {
    switch (opt) {
      case kOptionAdmin:
        admin_flag = optarg;
        break;
      case kOptionJson:
        options.json = true;
        break;
      case kOptionTimeout: {
        char *end = NULL;
        long value = strtol(optarg, &end, 10);
        if (!*optarg || *end || value <= 0 || value > 3600000) {
          fprintf(stderr,
                  "haloctl: --timeout wants milliseconds in 1..3600000, "
                  "got '%s'\n",
                  optarg);
          return HALOCTL_EXIT_USAGE;
        }
        options.timeout_ms = (int)value;
        break;
      }
      case 'h':
        haloctl_usage(stdout);
        return HALOCTL_EXIT_OK;
      case 'V':
        printf("haloctl %s (protocol %d)\n", HALO_VERSION_STRING,
               HALO_PROTOCOL_VERSION);
        return HALOCTL_EXIT_OK;
      default:  // getopt_long printed what was wrong
        haloctl_usage(stderr);
        return HALOCTL_EXIT_USAGE;
    }
  }
  if (optind >= argc) {
    fputs("haloctl: no command given\n", stderr);
    haloctl_usage(stderr);
    return HALOCTL_EXIT_USAGE;
  }
  if (argc - optind > 1) {
    fprintf(stderr, "haloctl: unexpected argument '%s'\n", argv[optind + 1]);
    haloctl_usage(stderr);
    return HALOCTL_EXIT_USAGE;
  }
  const char *name = argv[optind];
  options.admin_address = halo_admin_default_address(admin_flag);
  for (size_t i = 0; i < sizeof(kCommands) / sizeof(kCommands[0]); ++i) {
    if (strcmp(name, kCommands[i].name) == 0) {
      int exit_code = kCommands[i].run(&options);
      if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("haloctl: writing output");
        return HALOCTL_EXIT_FAILURE;
      }
      return exit_code;
    }
  }
  fprintf(stderr, "haloctl: unknown command '%s'\n", name);
  haloctl_usage(stderr);
  return HALOCTL_EXIT_USAGE;
}
