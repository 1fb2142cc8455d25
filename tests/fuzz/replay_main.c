// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Runs a fuzz harness's LLVMFuzzerTestOneInput over files, as libFuzzer
// would over a corpus, for builds without libFuzzer (gcc, the plain, ASan
// and TSan trees): ctest replays the committed corpora of tests/fuzz/corpus/
// through each harness this way.
//
//   halo-fuzz-request-replay FILE_OR_DIRECTORY...
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *file = fopen(path, "rb");
  if (!file) {
    fprintf(stderr, "cannot open %s\n", path);
    return 1;
  }
  size_t capacity = 4096, size = 0;
  uint8_t *data = malloc(capacity);
  size_t got;
  while (data && (got = fread(data + size, 1, capacity - size, file)) > 0) {
    size += got;
    if (size == capacity) {
      uint8_t *grown = realloc(data, capacity * 2);
      if (!grown) break;
      data = grown;
      capacity *= 2;
    }
  }
  fclose(file);
  if (!data) return 1;
  LLVMFuzzerTestOneInput(data, size);
  free(data);
  return 0;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

// Replays the regular files of |path| in name order; returns the count
// (negative on an error).
static int replay_directory(const char *path) {
  DIR *directory = opendir(path);
  if (!directory) return -1;
  char **names = NULL;
  size_t count = 0;
  struct dirent *entry;
  while ((entry = readdir(directory))) {
    if (entry->d_name[0] == '.') continue;
    char **grown = realloc(names, (count + 1) * sizeof(*names));
    if (!grown) break;
    names = grown;
    names[count++] = strdup(entry->d_name);
  }
  closedir(directory);
  qsort(names, count, sizeof(*names), compare_names);
  int replayed = 0;
  for (size_t i = 0; i < count; ++i) {
    char file[4096];
    snprintf(file, sizeof(file), "%s/%s", path, names[i]);
    struct stat info;
    if (stat(file, &info) == 0 && S_ISREG(info.st_mode)) {
      if (replay_file(file) != 0) replayed = -1;
      if (replayed >= 0) ++replayed;
    }
    free(names[i]);
  }
  free(names);
  return replayed;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE_OR_DIRECTORY...\n", argv[0]);
    return 2;
  }
  LLVMFuzzerInitialize(&argc, &argv);
  int total = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat info;
    if (stat(argv[i], &info) != 0) {
      fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 1;
    }
    int count = S_ISDIR(info.st_mode) ? replay_directory(argv[i])
                                      : (replay_file(argv[i]) == 0 ? 1 : -1);
    if (count < 0) {
      fprintf(stderr, "%s: cannot read it\n", argv[i]);
      return 1;
    }
    total += count;
  }
  printf("%d inputs replayed\n", total);
  return total > 0 ? 0 : 1;
}
