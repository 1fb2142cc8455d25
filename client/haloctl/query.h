// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// haloctl's field query for scripts (--query=FIELD,... --format=csv), in the
// manner of `nvidia-smi --query-gpu=... --format=csv`: the rows of a
// command's JSON document as CSV (RFC 4180).
//
// Single-threaded.
#ifndef HALOCTL_QUERY_H_
#define HALOCTL_QUERY_H_

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

// Prints |document| (an array of row objects, or one object: one row) as
// CSV on |out|. |schema| is a row of the listing with every field a row
// has (a row of its empty message), for an array: the fields are checked
// against it, so a listing without rows refuses the same fields as one
// with rows; NULL: |document| is one object, the row itself. |fields| is
// "a,b,c" (a dot descends into an object: labels.device), or NULL for every
// field of the schema that is not a list or an object. |header|: a first
// line of field names, printed even when there is no row. Strings are
// printed as they are, quoted when they hold a comma, quote or line break;
// null is empty; numbers as in --json. False (with one line on stderr
// naming |command| and the field) for an unknown field or one that holds a
// list or an object.
bool haloctl_query_print(const char *command, const json_t *document,
                         const json_t *schema, const char *fields, bool header,
                         FILE *out);

// Whether |fields| is a well-formed list ("a,b.c": names of letters,
// digits, '_' and '.', none empty).
bool haloctl_query_fields_valid(const char *fields);

#endif  // HALOCTL_QUERY_H_
