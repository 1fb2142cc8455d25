// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Tokens: 16 random bytes, formatted as 32 hex digits.
#include <stdio.h>

#include "common/status.h"
#include "halo/halo.h"

void halo_token_format(const halo_token_t *token, char out_text[33]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    out_text[2 * i] = digits[token->bytes[i] >> 4];
    out_text[2 * i + 1] = digits[token->bytes[i] & 15];
  }
  out_text[32] = '\0';
}

static int halo__hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

halo_status_t halo_token_parse(const char *text, halo_token_t *out_token) {
  if (out_token) memset(out_token, 0, sizeof(*out_token));
  if (!text || !out_token) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "token text and out_token must not be NULL");
  }
  halo_token_t token = {{0}};
  for (int i = 0; i < 32; ++i) {
    // The text ends early: say how many digits it has, not that its
    // terminator is no hex digit.
    if (text[i] == '\0') {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "token: too short, %d of 32 hex digits", i);
    }
    int value = halo__hex_value(text[i]);
    if (value < 0) {
      unsigned char c = (unsigned char)text[i];
      if (c >= 0x20 && c < 0x7f) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "token: character %d ('%c') is not a hex "
                                "digit (a token is 32 hex digits)",
                                i, (char)c);
      }
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "token: character %d (byte 0x%02x) is not a "
                              "hex digit (a token is 32 hex digits)",
                              i, c);
    }
    token.bytes[i / 2] |= (uint8_t)(value << ((i % 2) ? 0 : 4));
  }
  if (text[32] != '\0') {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "token: longer than 32 hex digits");
  }
  *out_token = token;  // only a whole token: on an error it stays zero
  return NULL;
}
