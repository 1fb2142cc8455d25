// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
#include "client/haloctl/query.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define HALOCTL_QUERY_MAX_FIELDS 64

bool haloctl_query_fields_valid(const char *fields) {
  if (!fields || !*fields) return false;
  size_t length = 0;
  for (const char *c = fields;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (length == 0) return false;
      if (*c == '\0') return true;
      length = 0;
    } else if (isalnum((unsigned char)*c) || *c == '_' || *c == '.') {
      ++length;
    } else {
      return false;
    }
  }
}

// The value at |path| ("a.b") in |row|; NULL if absent.
static const json_t *haloctl_query_lookup(const json_t *row, const char *path) {
  const json_t *value = row;
  char name[128];
  while (*path) {
    size_t length = strcspn(path, ".");
    if (length >= sizeof(name) || !json_is_object(value)) return NULL;
    memcpy(name, path, length);
    name[length] = '\0';
    value = json_object_get(value, name);
    if (!value) return NULL;
    path += length;
    if (*path == '.') ++path;
  }
  return value;
}

static void haloctl_query_cell(FILE *out, const char *text) {
  if (!strpbrk(text, ",\"\r\n")) {
    fputs(text, out);
    return;
  }
  fputc('"', out);
  for (const char *c = text; *c; ++c) {
    if (*c == '"') fputc('"', out);
    fputc(*c, out);
  }
  fputc('"', out);
}

static void haloctl_query_value(FILE *out, const json_t *value) {
  if (json_is_null(value)) return;
  if (json_is_string(value)) {
    haloctl_query_cell(out, json_string_value(value));
    return;
  }
  char *text = json_dumps(value, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
  if (!text) abort();
  fputs(text, out);
  free(text);
}

// The names of |row|'s scalar fields, comma-separated; "" if none.
static char *haloctl_query_all_fields(const json_t *row) {
  size_t capacity = 1;
  const char *key;
  const json_t *value;
  json_object_foreach((json_t *)row, key, value) {
    capacity += strlen(key) + 1;
  }
  char *fields = calloc(1, capacity);
  if (!fields) abort();
  json_object_foreach((json_t *)row, key, value) {
    if (json_is_object(value) || json_is_array(value)) continue;
    if (*fields) strcat(fields, ",");
    strcat(fields, key);
  }
  return fields;
}

bool haloctl_query_print(const char *command, const json_t *document,
                         const json_t *schema, const char *fields, bool header,
                         FILE *out) {
  size_t row_count = json_is_array(document) ? json_array_size(document) : 1;
  // The fields are checked against the schema: not against the first row,
  // which an empty listing lacks.
  const json_t *first = json_is_array(document)
                            ? (schema      ? schema
                               : row_count ? json_array_get(document, 0)
                                           : NULL)
                            : document;
  char *owned = NULL;
  if (!fields) {
    owned = first ? haloctl_query_all_fields(first) : calloc(1, 1);
    if (!owned) abort();
    fields = owned;
  }
  // Split the list.
  char *copy = strdup(fields);
  if (!copy) abort();
  const char *names[HALOCTL_QUERY_MAX_FIELDS];
  size_t count = 0;
  for (char *name = strtok(copy, ","); name; name = strtok(NULL, ",")) {
    if (count == HALOCTL_QUERY_MAX_FIELDS) {
      fprintf(stderr, "haloctl: %s: more than %d fields in --query\n", command,
              HALOCTL_QUERY_MAX_FIELDS);
      free(copy);
      free(owned);
      return false;
    }
    names[count++] = name;
  }
  // Check every field against the schema before printing anything: its
  // first name must be a field (a name below it may be absent in a row:
  // labels.device), and it must hold a value.
  bool ok = true;
  for (size_t f = 0; first && f < count && ok; ++f) {
    char top[128];
    snprintf(top, sizeof(top), "%.*s", (int)strcspn(names[f], "."), names[f]);
    const json_t *value = haloctl_query_lookup(first, names[f]);
    bool nested = strchr(names[f], '.') != NULL;
    if (!json_object_get(first, top) ||
        (nested && !json_is_object(json_object_get(first, top)))) {
      char *known = haloctl_query_all_fields(first);
      fprintf(stderr, "haloctl: %s has no field '%s' (its fields: %s)\n",
              command, names[f], known);
      free(known);
      ok = false;
    } else if (value && (json_is_object(value) || json_is_array(value))) {
      fprintf(stderr,
              "haloctl: %s: field '%s' holds %s, not a value (see "
              "--json%s)\n",
              command, names[f], json_is_array(value) ? "a list" : "an object",
              json_is_object(value) ? ", or query NAME.FIELD" : "");
      ok = false;
    }
  }
  if (ok && header && count > 0) {
    for (size_t f = 0; f < count; ++f) {
      if (f) fputc(',', out);
      haloctl_query_cell(out, names[f]);
    }
    fputc('\n', out);
  }
  for (size_t r = 0; ok && r < row_count && count > 0; ++r) {
    const json_t *row =
        json_is_array(document) ? json_array_get(document, r) : document;
    for (size_t f = 0; f < count; ++f) {
      if (f) fputc(',', out);
      const json_t *value = haloctl_query_lookup(row, names[f]);
      if (value && !json_is_object(value) && !json_is_array(value)) {
        haloctl_query_value(out, value);
      }
    }
    fputc('\n', out);
  }
  free(copy);
  free(owned);
  return ok;
}
