// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// halod's configuration: errors name the file, line and setting (or the
// flag); --print-config shows the effective configuration and where each
// value came from; the example file (systemd/halod.conf) parses and covers
// every setting; SIGHUP applies live settings, names those it ignores and
// keeps the running configuration when the file is wrong; the metrics
// textfile.
#include <ctype.h>
#include <dirent.h>
#include <strings.h>
#include <sys/resource.h>

#include "tests/integration/ops_support.h"
#include "tests/support/halo_test.h"

#ifndef HALO_TEST_HALOD
#error "HALO_TEST_HALOD must name the halod executable"
#endif
#ifndef HALO_TEST_EXAMPLE_CONFIG
#error "HALO_TEST_EXAMPLE_CONFIG must name systemd/halod.conf"
#endif

typedef struct config_fixture_t {
  ops_daemon_t daemon;
  char path[200];  // the config file
} config_fixture_t;

static int config_setup(void **state) {
  config_fixture_t *fixture = calloc(1, sizeof(*fixture));
  assert_non_null(fixture);
  ops_daemon_prepare(&fixture->daemon);
  snprintf(fixture->path, sizeof(fixture->path), "%s/halod.conf",
           fixture->daemon.dir);
  *state = fixture;
  return 0;
}

static int config_teardown(void **state) {
  config_fixture_t *fixture = *state;
  int code = ops_daemon_stop(&fixture->daemon);
  ops_daemon_cleanup(&fixture->daemon);
  free(fixture);
  assert_int_equal(code, 0);
  return 0;
}

// `halod --config PATH ARGS... --print-config`.
static void config_print(const config_fixture_t *fixture,
                         const char *const *args, ops_result_t *out_result) {
  const char *argv[16] = {HALO_TEST_HALOD, "--config", fixture->path};
  size_t n = 3;
  while (args && *args && n < 14) argv[n++] = *args++;
  argv[n++] = "--print-config";
  argv[n] = NULL;
  ops_run(argv, NULL, out_result);
}

static void test_errors_name_file_line_and_setting(void **state) {
  config_fixture_t *fixture = *state;
  static const struct {
    const char *text;
    const char *expected;  // after "PATH:"
  } kCases[] = {
      {"log-level = info\nbogus = 1\n", "2: unknown setting 'bogus'"},
      {"# comment\n\ncontexts = many\n", "3: contexts: 'many' is not a number"},
      {"contexts = 0\n", "1: contexts: 0 is out of range [1, 1024]"},
      {"contexts = 2048\n", "1: contexts: 2048 is out of range"},
      {"log-level = loud\n",
       "1: log-level: 'loud' is not one of error, warn, info, debug"},
      {"driver = gpu\n", "1: driver: 'gpu' is not one of auto, local, cuda"},
      {"metrics-textfile = halo.prom\n",
       "1: metrics-textfile: 'halo.prom' is not an absolute path"},
      {"socket-mode = 0999\n", "1: socket-mode: '0999' is not an octal"},
      // In octal, as it was written (not "1023 is out of range [0, 511]").
      {"socket-mode = 1777\n",
       "1: socket-mode: 01777 is out of range [0, 0777]"},
      {"session-host-bytes = 12Q\n",
       "1: session-host-bytes: '12Q' is not a number of bytes"},
      {"session-recording-bytes = -1\n",
       "1: session-recording-bytes: '-1' is not a number of bytes"},
      {"session-recording-bytes = 16E\n",
       "1: session-recording-bytes: '16E' is not a number of bytes"},
      {"memo-cache-bytes = 1X\n",
       "1: memo-cache-bytes: '1X' is not a number of bytes"},
      {"ring-bytes = 48K\n",
       "1: ring-bytes: '48K' (49152) is not a power of two"},
      {"ring-bytes = 16K\n",
       "1: ring-bytes: 16384 is out of range [32768, 16777216]"},
      {"ring-bytes = 32M\n", "1: ring-bytes: 33554432 is out of range"},
      {"log-level = info\nlog_level = debug\n",
       "2: log-level: set twice (first on line 1)"},
      {"[halod]\nlog-level = info\n", "2: log-level: settings take no"},
      {"log-level = info\njust words\n", "2: expected \"name = value\""},
      {"config = /etc/other.conf\n", "1: unknown setting 'config'"},
      {"log-level = info\n  contexts = 4\n", "2: log-level: an indented line"},
      {"nice = -21\n", "1: nice: '-21' is not an integer from -20 to 19"},
      {"oom-score-adj = 1001\n",
       "1: oom-score-adj: '1001' is not an integer from -1000 to 1000"},
      {"nice = low\n", "1: nice: 'low' is not an integer"},
      // Errors between two settings name the line of the one refused.
      {"contexts = 4\nsession-requests = 4\n",
       "2: session-requests: 4 must be less than contexts (4, from "},
      {"uid-replies = 9\ncontexts = 4\n",
       "1: uid-replies: 9 must be less than contexts (4, from "},
      {"log-level = info\nlisten = tcp://127.0.0.1:5555\n",
       "2: listen: 'tcp://127.0.0.1:5555' is not an ipc:// address"},
      {"admin = /run/halo/admin.sock\n",
       "1: admin: '/run/halo/admin.sock' is not an ipc:// address"},
      {"admin = ipc:///run/halo/halo.sock\n",
       "1: admin: the admin socket must differ from the client socket"},
      {"listen = ipc:///run/h.sock\nadmin = ipc:///run/h.sock.fd\n",
       "2: admin: ipc:///run/h.sock.fd is the client socket's fd channel"},
  };
  for (size_t i = 0; i < sizeof(kCases) / sizeof(kCases[0]); ++i) {
    ops_write_file(fixture->path, kCases[i].text);
    ops_result_t r;
    config_print(fixture, NULL, &r);
    char expected[400];
    snprintf(expected, sizeof(expected), "halod: %s:%s", fixture->path,
             kCases[i].expected);
    OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, expected) && !r.out[0]);
    ops_result_free(&r);
  }
  // A line too long for inih.
  char *long_line = malloc(400);
  assert_non_null(long_line);
  snprintf(long_line, 400, "metrics-textfile = /%0300d\n", 0);
  ops_write_file(fixture->path, long_line);
  free(long_line);
  ops_result_t r;
  config_print(fixture, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, ":1: line longer than"));
  ops_result_free(&r);
  // A missing file; a bad flag names the flag.
  const char *missing[] = {HALO_TEST_HALOD, "--config", "/nonexistent/h.conf",
                           NULL};
  ops_run(missing, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, "/nonexistent/h.conf") &&
                     strstr(r.err, "No such file"));
  ops_result_free(&r);
  // A directory is not an empty file.
  const char *directory[] = {HALO_TEST_HALOD, "--config", "/tmp",
                             "--print-config", NULL};
  ops_run(directory, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, "config file /tmp: ") &&
                     strstr(r.err, "Is a directory") && !r.out[0]);
  ops_result_free(&r);
  // A socket path past a Unix socket's (107 bytes with ".fd"): a
  // configuration error that --print-config finds, not a failed start.
  char listen[160];
  snprintf(listen, sizeof(listen), "ipc:///tmp/%0101d.sock", 0);
  const char *long_path[] = {HALO_TEST_HALOD, "--listen", listen,
                             "--print-config", NULL};
  ops_run(long_path, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, "--listen: the path of ") &&
                     strstr(r.err, "must fit a Unix socket's 107"));
  ops_result_free(&r);
  const char *flag[] = {HALO_TEST_HALOD, "--session-pending", "0", NULL};
  ops_run(flag, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 2 &&
                     strstr(r.err, "--session-pending: 0 is out of range"));
  ops_result_free(&r);
  const char *ring[] = {HALO_TEST_HALOD, "--ring-bytes", "100000", NULL};
  ops_run(ring, NULL, &r);
  OPS_EXPECT(
      &r, r.exit_code == 2 && strstr(r.err,
                                     "--ring-bytes: '100000' (100000) is not "
                                     "a power of two"));
  ops_result_free(&r);
  // The admin socket at the client socket's fd channel (its path + ".fd"):
  // a configuration error, not a start that fails "Address in use".
  const char *fd_channel[] = {HALO_TEST_HALOD,
                              "--listen",
                              "ipc:///run/halo/halo.sock",
                              "--admin",
                              "ipc:///run/halo/halo.sock.fd",
                              "--print-config",
                              NULL};
  ops_run(fd_channel, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, "halod: --admin: ") &&
                     strstr(r.err, "fd channel") && !r.out[0]);
  ops_result_free(&r);
  // A flag against the file: the flag, and where the other came from.
  ops_write_file(fixture->path, "log-level = info\ncontexts = 2\n");
  config_print(fixture, (const char *const[]){"--uid-replies", "2", NULL}, &r);
  char expected[300];
  snprintf(expected, sizeof(expected),
           "halod: --uid-replies: 2 must be less than contexts (2, from "
           "%s:2)",
           fixture->path);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, expected) && !r.out[0]);
  ops_result_free(&r);
  // Not set, session-requests follows a smaller contexts.
  config_print(fixture, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, "session-requests = 1\n"));
  ops_result_free(&r);
  const char *unknown[] = {HALO_TEST_HALOD, "--frobnicate", "1", NULL};
  ops_run(unknown, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, "unknown flag"));
  ops_result_free(&r);
}

static void test_print_config(void **state) {
  config_fixture_t *fixture = *state;
  ops_write_file(fixture->path,
                 "# halo\n"
                 "log_level = debug ; inline comment\n"
                 "session-device-bytes = 2G\n"
                 "contexts = 8\n");
  ops_result_t r;
  config_print(fixture, (const char *const[]){"--contexts", "4", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && !r.err[0]);
  char from_file[300];
  snprintf(from_file, sizeof(from_file),
           "log-level = debug\n#   from %s:2; live\n", fixture->path);
  OPS_EXPECT(&r, strstr(r.out, from_file));
  OPS_EXPECT(&r, strstr(r.out, "session-device-bytes = 2147483648\n"));
  // A quota's default (256M) and that SIGHUP applies it.
  OPS_EXPECT(&r,
             strstr(r.out, "session-recording-bytes = 268435456\n#   live\n"));
  // The memo cache's bound in bytes (256M), live too.
  OPS_EXPECT(&r, strstr(r.out, "memo-cache-bytes = 268435456\n#   live\n"));
  // Flags override the file.
  OPS_EXPECT(&r, strstr(r.out, "contexts = 4\n#   from --contexts\n"));
  OPS_EXPECT(&r, strstr(r.out, "socket-mode = 0660\n"));
  OPS_EXPECT(&r, strstr(r.out, "nice = -10\n"));
  OPS_EXPECT(&r, strstr(r.out, "listen = ipc:///run/halo/halo.sock\n"));
  // The output is itself a config file halod accepts.
  char printed[220];
  snprintf(printed, sizeof(printed), "%s/printed.conf", fixture->daemon.dir);
  ops_write_file(printed, r.out);
  ops_result_free(&r);
  const char *again[] = {HALO_TEST_HALOD, "--config", printed, "--print-config",
                         NULL};
  ops_run(again, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, "contexts = 4\n"));
  ops_result_free(&r);
  // --help lists every setting with its default and whether SIGHUP applies
  // it.
  const char *help[] = {HALO_TEST_HALOD, "--help", NULL};
  ops_run(help, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, "--metrics-textfile") &&
                     strstr(r.out, "SIGHUP applies it") &&
                     strstr(r.out, "--print-config"));
  // ... and its type and bounds (those of the table in daemon/config.c).
  static const char *const kTypes[] = {
      "(integer, 1 to 1024; default: 16)\n",
      "(one of auto, local, cuda; default: auto)\n",
      "(bytes, a power of two, 32K to 16M; default: 65536; SIGHUP applies "
      "it)\n",
      "(bytes, 4K to 1G; default: 4194304)\n",
      "(octal, 0 to 0777; default: 0660)\n",
      "(integer, -20 to 19; default: -10)\n",
      "(an absolute path, or empty for none; default: none; SIGHUP applies "
      "it)\n",
      "(bytes; default: 17179869184; SIGHUP applies it)\n",
  };
  for (size_t i = 0; i < sizeof(kTypes) / sizeof(kTypes[0]); ++i) {
    OPS_EXPECT(&r, strstr(r.out, kTypes[i]));
  }
  // The help of native-code says where native code runs, socket-mode
  // names the fd channel.
  OPS_EXPECT(&r, !strstr(r.out, "inside halod") &&
                     strstr(r.out, "trust domain's device worker"));
  OPS_EXPECT(&r, strstr(r.out, "fd channel and admin sockets"));
  ops_result_free(&r);
  // --version and -V (as haloctl's) print the version and exit 0.
  const char *version[] = {HALO_TEST_HALOD, "--version", NULL};
  const char *short_version[] = {HALO_TEST_HALOD, "-V", NULL};
  ops_run(version, NULL, &r);
  OPS_EXPECT(&r,
             r.exit_code == 0 && strstr(r.out, "halod " HALO_VERSION_STRING));
  ops_result_free(&r);
  ops_run(short_version, NULL, &r);
  OPS_EXPECT(&r,
             r.exit_code == 0 && strstr(r.out, "halod " HALO_VERSION_STRING));
  ops_result_free(&r);
}

// $CACHE_DIRECTORY (systemd's CacheDirectory=) is cache-directory's default
// only: a cache-directory given empty, in the file or as a flag, keeps the
// disk cache off under the unit.
static void test_cache_directory_given_empty_is_off(void **state) {
  config_fixture_t *fixture = *state;
  const char *const env[] = {"CACHE_DIRECTORY=/var/cache/halo-test", NULL};
  const char *argv[8] = {HALO_TEST_HALOD, "--config", fixture->path};
  ops_result_t r;
  ops_write_file(fixture->path, "log-level = info\n");
  argv[3] = "--print-config";
  ops_run(argv, env, &r);
  OPS_EXPECT(&r, r.exit_code == 0 &&
                     strstr(r.out,
                            "\ncache-directory = /var/cache/halo-test\n"
                            "#   from $CACHE_DIRECTORY\n"));
  ops_result_free(&r);
  argv[3] = "--cache-directory";
  argv[4] = "";
  argv[5] = "--print-config";
  ops_run(argv, env, &r);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out,
                                            "\ncache-directory = \n"
                                            "#   from --cache-directory\n"));
  ops_result_free(&r);
  ops_write_file(fixture->path, "log-level = info\ncache-directory =\n");
  argv[3] = "--print-config";
  argv[4] = NULL;
  ops_run(argv, env, &r);
  char expected[300];
  snprintf(expected, sizeof(expected), "\ncache-directory = \n#   from %s:2\n",
           fixture->path);
  OPS_EXPECT(&r, r.exit_code == 0 && strstr(r.out, expected));
  ops_result_free(&r);
}

// Runs halod (not --print-config: it starts) on the fixture's sockets with
// |args| after them, through |wrapper| (a command and its arguments,
// NULL-terminated; NULL: none) and with |env| added.
static void config_start(const config_fixture_t *fixture,
                         const char *const *wrapper, const char *const *args,
                         const char *const *env, ops_result_t *out_result) {
  const char *argv[32];
  size_t n = 0;
  while (wrapper && *wrapper) argv[n++] = *wrapper++;
  argv[n++] = HALO_TEST_HALOD;
  argv[n++] = "--listen";
  argv[n++] = fixture->daemon.listen;
  argv[n++] = "--admin";
  argv[n++] = fixture->daemon.admin;
  while (args && *args && n < 31) argv[n++] = *args++;
  argv[n] = NULL;
  ops_run(argv, env, out_result);
}

// A start that the configuration makes impossible exits 2, as a bad value
// does, naming the setting: a group that does not exist, a group halod is
// not in (it could not give its socket to it), and driver cuda without
// CUDA.
static void test_start_failures_of_the_configuration_exit_2(void **state) {
  config_fixture_t *fixture = *state;
  ops_result_t r;
  config_start(fixture, NULL,
               (const char *const[]){"--driver", "local", "--admin-group",
                                     "halo-no-such-group", NULL},
               NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 2 &&
                     strstr(r.err,
                            "--admin-group: there is no group "
                            "'halo-no-such-group'") &&
                     strstr(r.err, "to give the admin socket to"));
  ops_result_free(&r);
  ops_write_file(fixture->path, "socket-group = halo-no-such-group\n");
  config_start(fixture, NULL,
               (const char *const[]){"--driver", "local", "--config",
                                     fixture->path, NULL},
               NULL, &r);
  char expected[300];
  snprintf(expected, sizeof(expected),
           "%s:1: socket-group: there is no group 'halo-no-such-group'",
           fixture->path);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, expected));
  ops_result_free(&r);
  // driver cuda where CUDA has no device (none visible, or none at all).
  config_start(fixture, NULL, (const char *const[]){"--driver", "cuda", NULL},
               (const char *const[]){"CUDA_VISIBLE_DEVICES=-1", NULL}, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, "--driver: ") &&
                     strstr(r.err, "driver cuda unavailable"));
  ops_result_free(&r);
  // A group halod is not in, as a user without CAP_CHOWN (root: through
  // setpriv as nobody, in a directory nobody may write).
  static const char *const kAsNobody[] = {"/usr/bin/setpriv", "--reuid=65534",
                                          "--regid=65534",    "--clear-groups",
                                          "--inh-caps=-all",  NULL};
  bool root = geteuid() == 0;
  if (root && access(kAsNobody[0], X_OK) != 0) {
    print_message(
        "no setpriv: the check of a group halod is not in is "
        "skipped\n");
    return;
  }
  gid_t groups[256];
  int count = getgroups(256, groups);
  bool member = getegid() == 0;
  for (int i = 0; i < count; ++i) member |= groups[i] == 0;
  if (!root && member) return;  // a member of group 0: no group to try
  char nobody_dir[128];
  snprintf(nobody_dir, sizeof(nobody_dir), "%s/nobody", fixture->daemon.dir);
  assert_int_equal(mkdir(nobody_dir, 0777), 0);
  assert_int_equal(chmod(nobody_dir, 0777), 0);
  assert_int_equal(chmod(fixture->daemon.dir, 0711), 0);
  char listen[200], admin[200];
  snprintf(listen, sizeof(listen), "ipc://%s/halo.sock", nobody_dir);
  snprintf(admin, sizeof(admin), "ipc://%s/admin.sock", nobody_dir);
  const char *argv[20];
  size_t n = 0;
  for (const char *const *w = kAsNobody; root && *w; ++w) argv[n++] = *w;
  const char *const tail[] = {
      HALO_TEST_HALOD, "--listen", listen, "--admin",       admin, "--driver",
      "local",         "--nice",   "0",    "--admin-group", "0",   NULL};
  for (const char *const *t = tail; *t; ++t) argv[n++] = *t;
  argv[n] = NULL;
  ops_run(argv, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, "--admin-group: ") &&
                     strstr(r.err, "not a member of group 0"));
  ops_result_free(&r);
}

// Whether line |line| of |text| (NUL-terminated, |end| its end) is a
// setting's: "name = " or "# name = " (a name of lowercase letters, digits
// and dashes).
static bool config_setting_line(const char *line, const char *end) {
  if (line + 2 <= end && line[0] == '#' && line[1] == ' ') line += 2;
  const char *name = line;
  while (line < end && ((*line >= 'a' && *line <= 'z') ||
                        (*line >= '0' && *line <= '9') || *line == '-')) {
    ++line;
  }
  return line > name && end - line >= 3 && strncmp(line, " = ", 3) == 0;
}

// The start of the line before |line| in |text|, or NULL at the first.
static const char *config_previous_line(const char *text, const char *line) {
  if (line == text) return NULL;
  const char *start = line - 1;
  while (start > text && start[-1] != '\n') --start;
  return start;
}

// Whether the comment above the setting at |line| of the example says
// "live" (any case, as a word): the comment lines right above it, or,
// where it follows other settings, those above the first of them.
static bool config_example_says_live(const char *example, const char *line) {
  const char *top = line;
  for (const char *up = config_previous_line(example, top);
       up && config_setting_line(up, top - 1);
       up = config_previous_line(example, up)) {
    top = up;
  }
  const char *from = top;
  for (const char *up = config_previous_line(example, from);
       up && up[0] == '#' && !config_setting_line(up, from - 1);
       up = config_previous_line(example, up)) {
    from = up;
  }
  for (const char *at = from; at < top; ++at) {
    if (strncasecmp(at, "live", 4) != 0) continue;
    bool starts = at == example || !isalpha((unsigned char)at[-1]);
    if (starts && !isalpha((unsigned char)at[4])) return true;
  }
  return false;
}

// The example mentions every setting, set or commented out, and says
// "live" above exactly those SIGHUP applies (its header: the others apply
// at the next start).
static void test_example_config_covers_every_setting(void **state) {
  (void)state;
  ops_result_t r;
  const char *argv[] = {HALO_TEST_HALOD, "--config", HALO_TEST_EXAMPLE_CONFIG,
                        "--print-config", NULL};
  ops_run(argv, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  char *example = ops_read_file(HALO_TEST_EXAMPLE_CONFIG);
  int wrong = 0;
  for (char *line = r.out; *line;) {
    char *end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    char *next = *end ? end + 1 : end;
    if (line[0] == '#') {
      line = next;
      continue;
    }
    char name[64];
    assert_int_equal(sscanf(line, "%63s =", name), 1);
    // --print-config's note under a setting ends in "live" for those
    // SIGHUP applies ("#   from FILE:LINE; live", "#   live").
    const char *note_end = strchr(next, '\n');
    if (!note_end) note_end = next + strlen(next);
    bool live = next[0] == '#' && note_end - next >= 4 &&
                strncmp(note_end - 4, "live", 4) == 0;
    char set[80], commented[80];
    snprintf(set, sizeof(set), "\n%s = ", name);
    snprintf(commented, sizeof(commented), "\n# %s = ", name);
    const char *found = strstr(example, set);
    if (!found) found = strstr(example, commented);
    if (!found) {
      print_error("%s does not mention '%s'\n", HALO_TEST_EXAMPLE_CONFIG, name);
      ++wrong;
    } else if (config_example_says_live(example, found + 1) != live) {
      print_error("%s: the comment above '%s' %s \"live\", but SIGHUP %s\n",
                  HALO_TEST_EXAMPLE_CONFIG, name, live ? "lacks" : "says",
                  live ? "applies it" : "does not apply it");
      ++wrong;
    }
    line = next;
  }
  free(example);
  ops_result_free(&r);
  assert_int_equal(wrong, 0);
}

// |source|'s "systemd/halod.conf" replaced by |path| (a file of the source
// tree beside the example configuration).
static void source_path(const char *path, char *out, size_t capacity) {
  const char *example = HALO_TEST_EXAMPLE_CONFIG;
  const char *tail = strstr(example, "systemd/halod.conf");
  assert_non_null(tail);
  snprintf(out, capacity, "%.*s%s", (int)(tail - example), example, path);
}

// The settings halod.conf(5) describes: the names on each ".BR" line that
// opens an entry (".TP" before it), "\-" read as "-", space-separated.
static void man_page_settings(const char *page, char *out, size_t capacity) {
  out[0] = '\0';
  size_t used = 0;
  for (const char *at = strstr(page, ".TP\n.BR "); at;
       at = strstr(at + 1, ".TP\n.BR ")) {
    const char *c = at + strlen(".TP\n.BR ");
    bool quoted = false;
    char name[64];
    size_t length = 0;
    for (; *c && *c != '\n'; ++c) {
      if (*c == '"') {
        quoted = !quoted;
        continue;
      }
      if (quoted) continue;
      if (*c == ' ' || *c == ',') {
        if (length && used + length + 2 < capacity) {
          used += (size_t)snprintf(out + used, capacity - used, " %.*s",
                                   (int)length, name);
        }
        length = 0;
        continue;
      }
      if (*c == '\\' && c[1] == '-') ++c;
      if (length + 1 < sizeof(name)) name[length++] = *c;
    }
    if (length && used + length + 2 < capacity) {
      used += (size_t)snprintf(out + used, capacity - used, " %.*s",
                               (int)length, name);
    }
  }
  if (used + 1 < capacity) strcat(out, " ");
}

// halod.conf(5) and docs/operations.md's table describe every setting
// halod has (those halod.8 describes aside).
static void test_docs_cover_every_setting(void **state) {
  (void)state;
  ops_result_t r;
  const char *argv[] = {HALO_TEST_HALOD, "--print-config", NULL};
  ops_run(argv, NULL, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  char path[512];
  source_path("docs/man/halod.conf.5", path, sizeof(path));
  char *page = ops_read_file(path);
  assert_true(page[0]);
  static char described[16384];
  man_page_settings(page, described, sizeof(described));
  source_path("docs/operations.md", path, sizeof(path));
  char *operations = ops_read_file(path);
  assert_true(operations[0]);
  bool missing = false;
  for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] == '#') continue;
    char name[64];
    assert_int_equal(sscanf(line, "%63s =", name), 1);
    char word[80];
    snprintf(word, sizeof(word), " %s ", name);
    if (!strstr(described, word)) {
      print_error("halod.conf(5) has no entry for '%s'\n", name);
      missing = true;
    }
    snprintf(word, sizeof(word), "| `--%s ", name);
    if (!strstr(operations, word)) {
      print_error("docs/operations.md's table has no row for '%s'\n", name);
      missing = true;
    }
  }
  free(page);
  free(operations);
  ops_result_free(&r);
  assert_false(missing);
}

// Writes a "metrics-textfile = /aaa..." line of |length| characters (and
// its newline) to |path| and runs --print-config on it.
static void config_line_of(const config_fixture_t *fixture, int length,
                           ops_result_t *out_result) {
  char line[512];
  int used = snprintf(line, sizeof(line), "metrics-textfile = /");
  while (used < length && used < (int)sizeof(line) - 2) line[used++] = 'a';
  line[used++] = '\n';
  line[used] = '\0';
  ops_write_file(fixture->path, line);
  config_print(fixture, NULL, out_result);
}

// The longest line halod takes is the one the docs give: a line of that
// many characters parses, one more is refused saying so.
static void test_line_limit_as_documented(void **state) {
  config_fixture_t *fixture = *state;
  ops_result_t r;
  config_line_of(fixture, 300, &r);
  const char *said = strstr(r.err, "line longer than ");
  OPS_EXPECT(&r, r.exit_code == 2 && said);
  int limit = atoi(said + strlen("line longer than "));
  ops_result_free(&r);
  assert_true(limit > 100);
  config_line_of(fixture, limit, &r);
  OPS_EXPECT(&r, r.exit_code == 0);
  ops_result_free(&r);
  config_line_of(fixture, limit + 1, &r);
  OPS_EXPECT(&r, r.exit_code == 2 && strstr(r.err, "line longer than"));
  ops_result_free(&r);
  char expected[64], path[512];
  static const char *const kDocs[][2] = {
      {"docs/operations.md", "lines up to %d characters"},
      {"docs/man/halod.conf.5", "lines of at most %d characters"},
  };
  for (size_t i = 0; i < sizeof(kDocs) / sizeof(kDocs[0]); ++i) {
    source_path(kDocs[i][0], path, sizeof(path));
    char *text = ops_read_file(path);
    // The man page and the markdown wrap lines: compare with single spaces.
    for (char *c = text; *c; ++c) {
      if (*c == '\n') *c = ' ';
    }
    snprintf(expected, sizeof(expected), kDocs[i][1], limit);
    if (!strstr(text, expected)) {
      print_error("%s does not say '%s'\n", kDocs[i][0], expected);
      free(text);
      fail();
    }
    free(text);
  }
}

static void test_reload(void **state) {
  config_fixture_t *fixture = *state;
  char metrics[220];
  snprintf(metrics, sizeof(metrics), "%s/halo.prom", fixture->daemon.dir);
  ops_write_file(fixture->path, "log-level = info\ncontexts = 4\n");
  // halod under a umask that would hide the metrics file from others (the
  // systemd unit's is 0007): the file is still 0644.
  mode_t umask_before = umask(077);
  ops_daemon_start(&fixture->daemon,
                   (const char *const[]){"--config", fixture->path, NULL},
                   NULL);
  umask(umask_before);
  // Live settings apply; a setting that needs a restart is named and
  // ignored.
  char text[600];
  snprintf(text, sizeof(text),
           "log-level = debug\ncontexts = 8\nsession-pending = 5\n"
           "session-recording-bytes = 1M\n"
           "memo-cache-bytes = 2M\n"
           "metrics-textfile = %s\nmetrics-interval = 1\n",
           metrics);
  ops_write_file(fixture->path, text);
  kill(fixture->daemon.pid, SIGHUP);
  assert_true(ops_daemon_log_has(&fixture->daemon,
                                 "reload: log-level: info -> debug", 5000));
  assert_true(ops_daemon_log_has(&fixture->daemon,
                                 "reload: session-pending: 65536 -> 5", 5000));
  assert_true(ops_daemon_log_has(
      &fixture->daemon, "reload: session-recording-bytes: 268435456 -> 1048576",
      5000));
  assert_true(ops_daemon_log_has(
      &fixture->daemon, "reload: memo-cache-bytes: 268435456 -> 2097152",
      5000));
  assert_true(ops_daemon_log_has(
      &fixture->daemon,
      "reload: contexts: 4 -> 8 needs a restart; ignored (still 4)", 5000));
  assert_true(ops_daemon_log_has(&fixture->daemon, "reload: done", 5000));
  // The metrics textfile appears (written at once, then every second).
  int64_t deadline = ops_now_ms() + 5000;
  char *prom = NULL;
  for (;;) {
    prom = ops_read_file(metrics);
    if (strstr(prom, "halo_sessions_active ") || ops_now_ms() > deadline) break;
    free(prom);
    ops_sleep_ms(20);
  }
  assert_non_null(strstr(prom, "# TYPE halo_sessions_total counter"));
  free(prom);
  struct stat made;
  assert_int_equal(stat(metrics, &made), 0);
  assert_int_equal(made.st_mode & 0777, 0644);

  // A wrong file: reported with its line, the running configuration kept.
  ops_write_file(fixture->path, "log-level = debug\nsession-pending = -1\n");
  kill(fixture->daemon.pid, SIGHUP);
  char expected[300];
  snprintf(expected, sizeof(expected),
           "reload: keeping the running configuration: %s:2: "
           "session-pending: '-1' is not a number",
           fixture->path);
  assert_true(ops_daemon_log_has(&fixture->daemon, expected, 5000));
  assert_true(ops_daemon_answers(&fixture->daemon));
  // The metrics file is still rewritten: the running configuration stands.
  struct stat before, after;
  assert_int_equal(stat(metrics, &before), 0);
  ops_sleep_ms(1300);
  assert_int_equal(stat(metrics, &after), 0);
  assert_true(after.st_mtim.tv_sec > before.st_mtim.tv_sec ||
              after.st_mtim.tv_nsec != before.st_mtim.tv_nsec);

  // A FIFO in the file's place: refused at once, not waited on (its open
  // held halod's loop, every client's requests with it, until something
  // wrote to the FIFO).
  assert_int_equal(unlink(fixture->path), 0);
  assert_int_equal(mkfifo(fixture->path, 0600), 0);
  kill(fixture->daemon.pid, SIGHUP);
  snprintf(expected, sizeof(expected),
           "reload: keeping the running configuration: config file %s: not "
           "a regular file",
           fixture->path);
  assert_true(ops_daemon_log_has(&fixture->daemon, expected, 5000));
  assert_true(ops_daemon_answers(&fixture->daemon));
  assert_int_equal(unlink(fixture->path), 0);
}

static void test_metrics_textfile_failure_is_logged_once(void **state) {
  config_fixture_t *fixture = *state;
  ops_daemon_start(
      &fixture->daemon,
      (const char *const[]){"--metrics-textfile", "/nonexistent/dir/halo.prom",
                            "--metrics-interval", "1", NULL},
      NULL);
  assert_true(ops_daemon_log_has(
      &fixture->daemon, "metrics: creating /nonexistent/dir/halo.prom", 5000));
  ops_sleep_ms(2300);  // two more failed writes
  char *log = ops_read_file(fixture->daemon.log_path);
  const char *first = strstr(log, "metrics: creating");
  assert_non_null(first);
  assert_null(strstr(first + 1, "metrics: creating"));
  free(log);
  assert_true(ops_daemon_answers(&fixture->daemon));
}

// The niceness of task |tid| of process |pid| (/proc/PID/task/TID/stat,
// field 19), or 100 if it cannot be read.
static int task_nice(pid_t pid, const char *tid) {
  char path[320];
  snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, tid);
  char *stat = ops_read_file(path);
  const char *p = strrchr(stat, ')');
  int nice = 100;
  // After the command: state (3) ... priority (18), nice (19).
  for (int field = 2; p && field < 19; ++field) p = strchr(p + 1, ' ');
  if (p) nice = atoi(p + 1);
  free(stat);
  return nice;
}

// Checks every thread of |pid| runs at |nice|; returns how many there are.
static int expect_threads_nice(pid_t pid, int nice) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR *dir = opendir(path);
  assert_non_null(dir);
  int threads = 0;
  for (struct dirent *entry; (entry = readdir(dir));) {
    if (entry->d_name[0] == '.') continue;
    int seen = task_nice(pid, entry->d_name);
    if (seen == 100) continue;  // the thread ended meanwhile
    if (seen != nice) {
      print_error("process %d thread %s: nice %d, want %d\n", (int)pid,
                  entry->d_name, seen, nice);
      fail();
    }
    ++threads;
  }
  closedir(dir);
  return threads;
}

// The children of |parent| (its device workers), at most |capacity|.
static int children_of(pid_t parent, pid_t *out, int capacity) {
  DIR *proc = opendir("/proc");
  assert_non_null(proc);
  int count = 0;
  for (struct dirent *entry; (entry = readdir(proc)) && count < capacity;) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    char path[300];
    snprintf(path, sizeof(path), "/proc/%s/stat", entry->d_name);
    char *stat = ops_read_file(path);
    const char *p = strrchr(stat, ')');
    int ppid = 0;
    if (p) sscanf(p + 1, " %*c %d", &ppid);
    free(stat);
    if (ppid == parent) out[count++] = (pid_t)atoi(entry->d_name);
  }
  closedir(proc);
  return count;
}

// nice: halod sets it before it starts a thread, so every thread and every
// device worker runs at it. Raising it takes no privilege; lowering it
// below where the test runs either works (CAP_SYS_NICE) or is logged as
// not applied, halod running on at the niceness it got.
static void test_nice(void **state) {
  config_fixture_t *fixture = *state;
  errno = 0;
  int base = getpriority(PRIO_PROCESS, 0);
  assert_int_equal(errno, 0);
  if (base > 18) skip();
  char raised[16];
  snprintf(raised, sizeof(raised), "%d", base + 1);
  ops_daemon_start(&fixture->daemon,
                   (const char *const[]){"--nice", raised, NULL}, NULL);
  int threads = expect_threads_nice(fixture->daemon.pid, base + 1);
  assert_true(threads > 1);
  pid_t workers[8];
  int count = children_of(fixture->daemon.pid, workers, 8);
  for (int i = 0; i < count; ++i) expect_threads_nice(workers[i], base + 1);
  print_message("nice %d: %d threads of halod, %d worker processes\n", base + 1,
                threads, count);
  assert_int_equal(ops_daemon_stop(&fixture->daemon), 0);

  if (base < -19) return;
  char lowered[16];
  snprintf(lowered, sizeof(lowered), "%d", base - 1);
  ops_daemon_start(&fixture->daemon,
                   (const char *const[]){"--nice", lowered, NULL}, NULL);
  char expected[64];
  snprintf(expected, sizeof(expected), "nice %d not applied", base - 1);
  char *log = ops_read_file(fixture->daemon.log_path);
  bool refused = strstr(log, expected) != NULL;
  free(log);
  expect_threads_nice(fixture->daemon.pid, refused ? base : base - 1);
  print_message("nice %d: %s\n", base - 1,
                refused ? "not applied (no CAP_SYS_NICE), logged" : "applied");
}

// uid-fds not set follows the open-file limit halod raises its own to (the
// hard one): a quarter of it, and --print-config says where it came from;
// set, it is what was set.
static void test_uid_fds_follows_the_open_file_limit(void **state) {
  (void)state;
  const char *prlimit = halo_test_prlimit();
  if (!prlimit) {
    print_message("prlimit(1) is not installed (util-linux); skipped\n");
    skip();
  }
  ops_result_t r;
  const char *derived[] = {prlimit, "--nofile=1000:1000", HALO_TEST_HALOD,
                           "--print-config", NULL};
  ops_run(derived, NULL, &r);
  OPS_EXPECT(
      &r, r.exit_code == 0 && strstr(r.out,
                                     "\nuid-fds = 250\n#   from a quarter of "
                                     "RLIMIT_NOFILE (1000); live\n"));
  ops_result_free(&r);
  const char *set[] = {prlimit,
                       "--nofile=1000:1000",
                       HALO_TEST_HALOD,
                       "--uid-fds",
                       "7",
                       "--print-config",
                       NULL};
  ops_run(set, NULL, &r);
  OPS_EXPECT(&r,
             r.exit_code == 0 &&
                 strstr(r.out, "\nuid-fds = 7\n#   from --uid-fds; live\n"));
  ops_result_free(&r);
}

// A second halod started on the socket a halod serves (by hand, a start
// script run twice, a surge pod) fails at once, naming the first, before
// it touches a path: before, it removed the first's fd channel (created
// before nng's listener found the address in use) and the first served no
// new client until restarted. Once the first stops, a new one starts on
// the socket it left.
static void test_second_halod_on_a_served_socket_leaves_it_alone(void **state) {
  config_fixture_t *fixture = *state;
  ops_daemon_start(&fixture->daemon, NULL, NULL);
  char admin[200];
  snprintf(admin, sizeof(admin), "ipc://%s/admin2.sock", fixture->daemon.dir);
  const char *second[] = {HALO_TEST_HALOD, "--listen", fixture->daemon.listen,
                          "--admin",       admin,      "--driver",
                          "local",         NULL};
  ops_result_t r;
  ops_run(second, NULL, &r);
  char expected[320];
  snprintf(expected, sizeof(expected),
           "cannot start: another halod (pid %d) serves %s already",
           (int)fixture->daemon.pid, fixture->daemon.listen);
  OPS_EXPECT(&r, r.exit_code == 1 && strstr(r.err, expected));
  ops_result_free(&r);
  // The first still takes new clients (their connect opens its fd
  // channel).
  halo_client_options_t options = {.address = fixture->daemon.listen};
  halo_client_t *client = NULL;
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &client));
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  halo_client_close(client);
  assert_int_equal(ops_daemon_stop(&fixture->daemon), 0);
  ops_daemon_start(&fixture->daemon, NULL, NULL);
}

// An admin socket whose directory is missing: halod names the directory
// (nng alone said "listen: Entry not found").
static void test_missing_admin_directory_is_named(void **state) {
  config_fixture_t *fixture = *state;
  char admin[200], listen[200];
  snprintf(admin, sizeof(admin), "ipc://%s/missing/admin.sock",
           fixture->daemon.dir);
  snprintf(listen, sizeof(listen), "ipc://%s/halo.sock", fixture->daemon.dir);
  const char *argv[] = {HALO_TEST_HALOD, "--listen", listen,  "--admin",
                        admin,           "--driver", "local", NULL};
  ops_result_t r;
  ops_run(argv, NULL, &r);
  char expected[600];
  snprintf(expected, sizeof(expected),
           "%s: listen: the socket's directory %s/missing: No such file or "
           "directory",
           admin, fixture->daemon.dir);
  OPS_EXPECT(&r, r.exit_code == 1 && strstr(r.err, expected));
  ops_result_free(&r);
}

// A file size limit (RLIMIT_FSIZE) below an arena: halod warns at start,
// and a client's host-visible buffer fails with RESOURCE_EXHAUSTED naming
// the limit while halod serves on. Before, the arena's ftruncate raised
// SIGXFSZ and ended halod, every session with it.
static void test_file_size_limit_fails_the_buffer_not_halod(void **state) {
  config_fixture_t *fixture = *state;
  struct rlimit saved;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit limited = saved;
  limited.rlim_cur = 1 << 20;
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < limited.rlim_cur) {
    limited.rlim_cur = saved.rlim_max;
  }
  // halod inherits it; this process writes nothing that large meanwhile.
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &limited), 0);
  ops_daemon_start(&fixture->daemon, NULL, NULL);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
  assert_true(ops_daemon_log_has(&fixture->daemon,
                                 "the file size limit (RLIMIT_FSIZE) is", 0));
  halo_client_options_t options = {.address = fixture->daemon.listen};
  halo_client_t *client = NULL;
  HALO_TEST_ASSERT_OK(halo_client_connect(&options, &client));
  halo_buffer_t *buffer = NULL;
  HALO_TEST_EXPECT_STATUS(
      halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE, 4096, 0, &buffer),
      HALO_STATUS_RESOURCE_EXHAUSTED, "RLIMIT_FSIZE");
  assert_null(buffer);
  HALO_TEST_ASSERT_OK(halo_client_ping(client));
  // Device buffers are not files.
  buffer = halo_test_create_buffer(client, HALO_MEMORY_DEVICE, 4096, 0);
  halo_buffer_release(buffer);
  halo_client_close(client);
  assert_int_equal(waitpid(fixture->daemon.pid, NULL, WNOHANG), 0);
}

// Under a low open-file limit (128) connections follows it (a quarter of
// what it leaves above fd-reserve: 16), so that many sessions of one
// client cannot take the descriptors kept for the admin socket: with 32
// connecting, halod still answers haloctl. Before, connections stayed 8192,
// the sessions took every descriptor and the admin socket was out of reach
// (the operator could not even kill-client).
static void test_connections_leave_the_admin_socket_room(void **state) {
  config_fixture_t *fixture = *state;
  const char *prlimit = halo_test_prlimit();
  if (!prlimit) {
    print_message("prlimit(1) is not installed (util-linux); skipped\n");
    skip();
  }
  ops_result_t r;
  const char *print[] = {prlimit, "--nofile=128:128", HALO_TEST_HALOD,
                         "--print-config", NULL};
  ops_run(print, NULL, &r);
  OPS_EXPECT(
      &r, r.exit_code == 0 && strstr(r.out,
                                     "\nconnections = 16\n#   from a quarter "
                                     "of RLIMIT_NOFILE (128) less fd-reserve"));
  ops_result_free(&r);
  ops_daemon_t *daemon = &fixture->daemon;
  const char *argv[] = {prlimit,       "--nofile=128:128", HALO_TEST_HALOD,
                        "--listen",    daemon->listen,     "--admin",
                        daemon->admin, "--driver",         "local",
                        NULL};
  daemon->pid = ops_spawn(argv, NULL, NULL, daemon->log_path);
  assert_true(HALO_TEST_POLL(ops_daemon_answers(daemon), 10000));
  enum { CLIENTS = 32 };
  halo_client_t *clients[CLIENTS] = {0};
  int connected = 0;
  for (int i = 0; i < CLIENTS; ++i) {
    halo_client_options_t options = {.address = daemon->listen,
                                     .request_timeout_ms = 1000};
    halo_status_t status = halo_client_connect(&options, &clients[i]);
    if (status) {
      halo_status_free(status);
      clients[i] = NULL;
    } else {
      ++connected;
    }
  }
  print_message("%d of %d clients connected\n", connected, CLIENTS);
  assert_true(connected > 0 && connected <= 16);
  assert_true(ops_daemon_answers(daemon));
  for (int i = 0; i < CLIENTS; ++i) {
    if (clients[i]) halo_client_close(clients[i]);
  }
}

int main(void) {
#define T(name) \
  cmocka_unit_test_setup_teardown(name, config_setup, config_teardown)
  const struct CMUnitTest tests[] = {
      T(test_errors_name_file_line_and_setting),
      T(test_print_config),
      T(test_cache_directory_given_empty_is_off),
      T(test_start_failures_of_the_configuration_exit_2),
      T(test_example_config_covers_every_setting),
      T(test_docs_cover_every_setting),
      T(test_line_limit_as_documented),
      T(test_reload),
      T(test_metrics_textfile_failure_is_logged_once),
      T(test_nice),
      T(test_uid_fds_follows_the_open_file_limit),
      T(test_second_halod_on_a_served_socket_leaves_it_alone),
      T(test_missing_admin_directory_is_named),
      T(test_file_size_limit_fails_the_buffer_not_halod),
      T(test_connections_leave_the_admin_socket_room),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
