// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Unit tests of token formatting and parsing (halo_token_format/parse).
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdlib.h>
#include <string.h>

#include "halo/halo.h"

static void test_format_known_bytes(void **state) {
  (void)state;
  halo_token_t token;
  for (int i = 0; i < 16; ++i) token.bytes[i] = (uint8_t)(i * 17);
  char text[33];
  memset(text, 'x', sizeof(text));
  halo_token_format(&token, text);
  assert_string_equal(text, "00112233445566778899aabbccddeeff");
  assert_int_equal(text[32], '\0');
}

static void test_parse_known_text(void **state) {
  (void)state;
  halo_token_t token;
  assert_null(halo_token_parse("0123456789abcdefFEDCBA9876543210", &token));
  static const uint8_t expected[16] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
                                       0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98,
                                       0x76, 0x54, 0x32, 0x10};
  assert_memory_equal(token.bytes, expected, 16);
}

static void test_round_trip(void **state) {
  (void)state;
  srand(12345);
  for (int round = 0; round < 1000; ++round) {
    halo_token_t token;
    for (int i = 0; i < 16; ++i) token.bytes[i] = (uint8_t)rand();
    char text[33];
    halo_token_format(&token, text);
    assert_int_equal(strlen(text), 32);
    assert_int_equal(strspn(text, "0123456789abcdef"), 32);
    halo_token_t parsed;
    assert_null(halo_token_parse(text, &parsed));
    assert_memory_equal(parsed.bytes, token.bytes, 16);
  }
}

static void expect_parse_error(const char *text, const char *fragment) {
  halo_token_t token;
  memset(&token, 0xab, sizeof(token));
  halo_status_t status = halo_token_parse(text, &token);
  assert_non_null(status);
  // Nothing of a partly parsed text is left in the token.
  static const halo_token_t kZero;
  assert_memory_equal(token.bytes, kZero.bytes, sizeof(token.bytes));
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  if (!strstr(halo_status_message(status), fragment)) {
    print_error("message \"%s\" lacks \"%s\"\n", halo_status_message(status),
                fragment);
    halo_status_free(status);
    fail();
  }
  halo_status_free(status);
}

static void test_parse_rejects_bad_text(void **state) {
  (void)state;
  // The message names the offending character's position.
  expect_parse_error("0123g56789abcdef0123456789abcdef", "character 4 ('g')");
  expect_parse_error("0123456789abcdef0123456789abcde-", "character 31 ('-')");
  expect_parse_error(" 0123456789abcdef0123456789abcdef", "character 0 (' ')");
  expect_parse_error("0123456789abcdef0123456789abcd\n0",
                     "character 30 (byte 0x0a)");
  // Too short: how many digits of the 32 there are (not the terminator
  // taken for a character that is no hex digit).
  expect_parse_error("0123456789abcdef0123456789abcde", "31 of 32 hex digits");
  expect_parse_error("abc", "3 of 32 hex digits");
  expect_parse_error("", "0 of 32 hex digits");
  // Too long.
  expect_parse_error("0123456789abcdef0123456789abcdef0", "longer");
}

static void test_parse_rejects_null(void **state) {
  (void)state;
  halo_token_t token;
  memset(&token, 0xab, sizeof(token));
  halo_status_t status = halo_token_parse(NULL, &token);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  static const halo_token_t kZero;
  assert_memory_equal(token.bytes, kZero.bytes, sizeof(token.bytes));
  halo_status_free(status);
  status = halo_token_parse("00112233445566778899aabbccddeeff", NULL);
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(status);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_format_known_bytes),
      cmocka_unit_test(test_parse_known_text),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_parse_rejects_bad_text),
      cmocka_unit_test(test_parse_rejects_null),
  };
  return cmocka_run_group_tests_name("token", tests, NULL, NULL);
}
