#include "daemon/config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"

typedef enum halod_config_type_e {
  HALOD_CONFIG_STRING,
  HALOD_CONFIG_U32,
  HALOD_CONFIG_U64,
  HALOD_CONFIG_OCTAL,
} halod_config_type_t;

typedef struct halod_config_entry_t {
  const char *name;  // flag --name, and "name = value" in the file
  halod_config_type_t type;
  size_t offset;
  size_t size;  // strings: buffer size
  const char *default_value;
  uint64_t min;
  uint64_t max;
  const char *help;
} halod_config_entry_t;

#define HALOD_STRING(field)                             \
  HALOD_CONFIG_STRING, offsetof(halod_config_t, field), \
      sizeof(((halod_config_t *)0)->field)
#define HALOD_NUMBER(type, field) type, offsetof(halod_config_t, field), 0

static const halod_config_entry_t halod_config_entries[] = {
    {"listen", HALOD_STRING(listen), "ipc:///run/halo/halo.sock", 0, 0,
     "client socket (ipc:// only: clients share memory with the daemon); "
     "the fd channel is its path + \".fd\""},
    {"admin", HALOD_STRING(admin), "ipc:///run/halo/admin.sock", 0, 0,
     "admin socket (haloctl)"},
    {"driver", HALOD_STRING(driver), "auto", 0, 0,
     "auto | local | cuda: auto serves the best available driver"},
    {"log-level", HALOD_STRING(log_level), "info", 0, 0,
     "error | warn | info | debug"},
    {"config", HALOD_STRING(config_file), "", 0, 0,
     "config file of \"name = value\" lines (same names as the flags)"},
    {"socket-mode", HALOD_NUMBER(HALOD_CONFIG_OCTAL, socket_mode), "0660", 0,
     0777, "permissions of the client and admin sockets"},
    {"max-message-bytes", HALOD_NUMBER(HALOD_CONFIG_U64, max_message_bytes),
     "4194304", 4096, 1u << 30,
     "NNG_OPT_RECVMAXSZ: larger messages drop the sender's connection"},
    {"contexts", HALOD_NUMBER(HALOD_CONFIG_U32, contexts), "16", 1, 1024,
     "nng rep contexts per socket (requests served concurrently)"},
    {"arena-bytes", HALOD_NUMBER(HALOD_CONFIG_U64, arena_bytes), "67108864",
     1u << 16, 1ull << 40,
     "size of a session's host-visible arena (larger buffers get their own)"},
    {"session-host-bytes", HALOD_NUMBER(HALOD_CONFIG_U64, session_host_bytes),
     "17179869184", 0, UINT64_MAX, "quota of host-visible bytes per session"},
    {"session-device-bytes",
     HALOD_NUMBER(HALOD_CONFIG_U64, session_device_bytes), "17179869184", 0,
     UINT64_MAX, "quota of device bytes per session"},
    {"session-handles", HALOD_NUMBER(HALOD_CONFIG_U32, session_handles),
     "65536", 16, 1u << 20, "quota of live handles per session"},
    {"native-code", HALOD_STRING(native_code), "owner", 0, 0,
     "who may load native code (local-driver ELF executables): owner (the "
     "daemon's uid and root), any, or none; it runs inside halod"},
    {"session-pending", HALOD_NUMBER(HALOD_CONFIG_U32, session_pending),
     "65536", 1, 1u << 24,
     "quota of submissions per session not yet completed"},
    {"cuda-completion", HALOD_STRING(cuda_completion), "thread", 0, 0,
     "how the CUDA driver learns that GPU work finished: thread (a "
     "completion thread waits on events) or host_func (cuLaunchHostFunc)"},
    {"cache-directory", HALOD_STRING(cache_directory), "", 0, 0,
     "compiled GPU code (NVRTC, PTX JIT) kept across restarts and shared "
     "by clients; CUDA_CACHE_PATH points below it unless set. Default: "
     "$CACHE_DIRECTORY (systemd's CacheDirectory=), else none"},
};

#define HALOD_CONFIG_COUNT \
  (sizeof(halod_config_entries) / sizeof(halod_config_entries[0]))

// Names match with '_' and '-' alike (cuda_completion = cuda-completion).
static bool halod_config_name_equals(const char *entry, const char *name,
                                     size_t length) {
  if (strlen(entry) != length) return false;
  for (size_t i = 0; i < length; ++i) {
    char c = name[i] == '_' ? '-' : name[i];
    if (entry[i] != c) return false;
  }
  return true;
}

static const halod_config_entry_t *halod_config_find(const char *name,
                                                     size_t length) {
  for (size_t i = 0; i < HALOD_CONFIG_COUNT; ++i) {
    if (halod_config_name_equals(halod_config_entries[i].name, name, length)) {
      return &halod_config_entries[i];
    }
  }
  return NULL;
}

static halo_status_t halod_config_set(halod_config_t *config,
                                      const halod_config_entry_t *entry,
                                      const char *value) {
  char *field = (char *)config + entry->offset;
  if (entry->type == HALOD_CONFIG_STRING) {
    if (strlen(value) >= entry->size) {
      return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                              "%s: value longer than %zu characters",
                              entry->name, entry->size - 1);
    }
    strcpy(field, value);
    return NULL;
  }
  errno = 0;
  char *end = NULL;
  int base = entry->type == HALOD_CONFIG_OCTAL ? 8 : 10;
  unsigned long long number = strtoull(value, &end, base);
  if (errno || end == value || *end != '\0' || value[0] == '-') {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%s: '%s' is not a%s number", entry->name, value,
                            base == 8 ? "n octal" : "");
  }
  if (number < entry->min || number > entry->max) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "%s: %llu is out of range [%" PRIu64 ", %" PRIu64
                            "]",
                            entry->name, number, entry->min, entry->max);
  }
  if (entry->type == HALOD_CONFIG_U64) {
    *(uint64_t *)field = number;
  } else {
    *(uint32_t *)field = (uint32_t)number;
  }
  return NULL;
}

void halod_config_initialize(halod_config_t *config) {
  memset(config, 0, sizeof(*config));
  for (size_t i = 0; i < HALOD_CONFIG_COUNT; ++i) {
    halo_status_t status =
        halod_config_set(config, &halod_config_entries[i],
                         halod_config_entries[i].default_value);
    halo_status_free(status);  // defaults are valid by construction
  }
}

static char *halod_trim(char *text) {
  while (*text == ' ' || *text == '\t') ++text;
  char *end = text + strlen(text);
  while (end > text && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' ||
                        end[-1] == '\r')) {
    *--end = '\0';
  }
  return text;
}

static halo_status_t halod_config_read_file(halod_config_t *config,
                                            const char *path) {
  FILE *file = fopen(path, "r");
  if (!file) return halo_status_from_errno(errno, "config file %s", path);
  char line[1024];
  int number = 0;
  halo_status_t status = NULL;
  while (!status && fgets(line, sizeof(line), file)) {
    ++number;
    char *text = halod_trim(line);
    if (*text == '\0' || *text == '#') continue;
    char *equals = strchr(text, '=');
    if (!equals) {
      status =
          halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                           "%s:%d: expected \"name = value\"", path, number);
      break;
    }
    *equals = '\0';
    char *name = halod_trim(text);
    char *value = halod_trim(equals + 1);
    const halod_config_entry_t *entry = halod_config_find(name, strlen(name));
    if (!entry || strcmp(entry->name, "config") == 0) {
      status =
          halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                           "%s:%d: unknown setting '%s'", path, number, name);
      break;
    }
    status = halo_status_annotate(halod_config_set(config, entry, value),
                                  "%s:%d", path, number);
  }
  fclose(file);
  return status;
}

void halod_config_print_help(FILE *stream) {
  fprintf(stream,
          "usage: halod [--flag VALUE | --flag=VALUE]...\n"
          "halo's GPU device server; runs in the foreground.\n\n");
  for (size_t i = 0; i < HALOD_CONFIG_COUNT; ++i) {
    const halod_config_entry_t *entry = &halod_config_entries[i];
    fprintf(stream, "  --%-22s %s\n  %-24s (default: %s)\n", entry->name,
            entry->help, "",
            entry->default_value[0] ? entry->default_value : "none");
  }
  fprintf(stream, "  --%-22s %s\n  --%-22s %s\n", "help", "this text",
          "version", "print the version");
}

halo_status_t halod_config_parse(halod_config_t *config, int argc, char **argv,
                                 int *out_exit) {
  *out_exit = 0;
  // Pass 1: find --config so the file is applied before the flags.
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 1; i < argc; ++i) {
      const char *arg = argv[i];
      if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
        if (pass == 0) halod_config_print_help(stdout);
        *out_exit = 1;
        return NULL;
      }
      if (strcmp(arg, "--version") == 0) {
        printf("halod %s\n", HALO_VERSION_STRING);
        *out_exit = 1;
        return NULL;
      }
      if (strncmp(arg, "--", 2) != 0) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "unexpected argument '%s' (flags start with "
                                "--; see --help)",
                                arg);
      }
      const char *name = arg + 2;
      const char *equals = strchr(name, '=');
      size_t length = equals ? (size_t)(equals - name) : strlen(name);
      const halod_config_entry_t *entry = halod_config_find(name, length);
      if (!entry) {
        return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                "unknown flag '%s' (see --help)", arg);
      }
      const char *value = equals ? equals + 1 : NULL;
      if (!value) {
        if (i + 1 >= argc) {
          return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                                  "flag --%s needs a value", entry->name);
        }
        value = argv[++i];
      }
      bool is_config = strcmp(entry->name, "config") == 0;
      if (pass == 0 && is_config) {
        HALO_RETURN_IF_ERROR(halod_config_set(config, entry, value));
        if (*config->config_file) {
          HALO_RETURN_IF_ERROR(
              halod_config_read_file(config, config->config_file));
        }
      } else if (pass == 1 && !is_config) {
        HALO_RETURN_IF_ERROR(halod_config_set(config, entry, value));
      }
    }
  }
  if (halo_log_level_parse(config->log_level) < 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "log-level: '%s' is not one of error, warn, info, "
                            "debug",
                            config->log_level);
  }
  if (strcmp(config->native_code, "owner") != 0 &&
      strcmp(config->native_code, "any") != 0 &&
      strcmp(config->native_code, "none") != 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "native-code: '%s' is not one of owner, any, none",
                            config->native_code);
  }
  if (strcmp(config->cuda_completion, "thread") != 0 &&
      strcmp(config->cuda_completion, "host_func") != 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "cuda-completion: '%s' is not one of thread, "
                            "host_func",
                            config->cuda_completion);
  }
  // Under systemd, CacheDirectory= exports $CACHE_DIRECTORY: the default.
  const char *systemd_cache = getenv("CACHE_DIRECTORY");
  if (!config->cache_directory[0] && systemd_cache && systemd_cache[0] == '/') {
    size_t length = strcspn(systemd_cache, ":");
    if (length < sizeof(config->cache_directory)) {
      memcpy(config->cache_directory, systemd_cache, length);
      config->cache_directory[length] = '\0';
    }
  }
  if (config->cache_directory[0] && config->cache_directory[0] != '/') {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "cache-directory: '%s' is not an absolute path",
                            config->cache_directory);
  }
  if (strncmp(config->listen, "ipc://", 6) != 0) {
    return halo_status_make(HALO_STATUS_INVALID_ARGUMENT,
                            "listen: '%s' is not an ipc:// address (clients "
                            "share memory with the daemon, so they must be "
                            "local)",
                            config->listen);
  }
  return NULL;
}
