// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Shared pieces of the benchmarks (bench_common.h).
#include "bench_common.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "tests/support/fake_cuda_image.h"

int64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t bench_self_cpu_ns(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return ((int64_t)usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000000000 +
         ((int64_t)usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1000;
}

// Reads up to |size| - 1 bytes of |path|; false if it cannot be opened.
static bool bench_read_text(const char *path, char *text, size_t size) {
  FILE *file = fopen(path, "r");
  if (!file) return false;
  size_t length = fread(text, 1, size - 1, file);
  fclose(file);
  text[length] = '\0';
  return true;
}

// The sum of the first field of /proc/PID/task/*/schedstat (time on a CPU,
// nanoseconds); -1 without schedstat.
static int64_t bench_process_schedstat_ns(pid_t pid) {
  char path[96], text[256];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR *tasks = opendir(path);
  if (!tasks) return -1;
  int64_t total = 0;
  int found = 0;
  struct dirent *entry;
  while ((entry = readdir(tasks))) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    snprintf(path, sizeof(path), "/proc/%d/task/%.16s/schedstat", (int)pid,
             entry->d_name);
    unsigned long long ns = 0;
    if (bench_read_text(path, text, sizeof(text)) &&
        sscanf(text, "%llu", &ns) == 1) {
      total += (int64_t)ns;
      ++found;
    }
  }
  closedir(tasks);
  return found ? total : -1;
}

int64_t bench_process_cpu_ns(pid_t pid) {
  int64_t ns = bench_process_schedstat_ns(pid);
  if (ns >= 0) return ns;
  char path[64], text[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  if (!bench_read_text(path, text, sizeof(text))) return -1;
  // Fields 14 and 15, counted after the command name's closing parenthesis.
  const char *p = strrchr(text, ')');
  unsigned long user = 0, system = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                   &user, &system) != 2) {
    return -1;
  }
  return (int64_t)(user + system) * 1000000000 / sysconf(_SC_CLK_TCK);
}

int bench_tasks(pid_t pid, bench_task_t *out_tasks, int capacity) {
  char path[96], text[256];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR *tasks = opendir(path);
  if (!tasks) return 0;
  int count = 0;
  struct dirent *entry;
  while (count < capacity && (entry = readdir(tasks))) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    bench_task_t *task = &out_tasks[count];
    task->tid = (pid_t)atoi(entry->d_name);
    unsigned long long ns = 0, waited = 0, switches = 0;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid,
             (int)task->tid);
    if (!bench_read_text(path, text, sizeof(text)) ||
        sscanf(text, "%llu %llu %llu", &ns, &waited, &switches) != 3) {
      continue;
    }
    task->ns = (int64_t)ns;
    task->switches = (int64_t)switches;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid,
             (int)task->tid);
    if (!bench_read_text(path, task->name, sizeof(task->name))) {
      strcpy(task->name, "?");
    }
    task->name[strcspn(task->name, "\n")] = '\0';
    ++count;
  }
  closedir(tasks);
  return count;
}

int bench_children(pid_t pid, pid_t *out_children, int capacity) {
  char path[96], text[1024];
  snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
  if (!bench_read_text(path, text, sizeof(text))) return 0;
  int count = 0;
  char *cursor = text;
  while (count < capacity) {
    char *end = NULL;
    long child = strtol(cursor, &end, 10);
    if (end == cursor) break;
    out_children[count++] = (pid_t)child;
    cursor = end;
  }
  return count;
}

void bench_tasks_print_delta(void *file, const char *indent,
                             const bench_task_t *before, int before_count,
                             const bench_task_t *after, int after_count,
                             double per) {
  // Groups by name, in order of first appearance.
  struct {
    char name[20];
    int threads;
    int64_t ns;
    int64_t switches;
  } groups[64];
  int group_count = 0;
  int64_t total = 0;
  for (int a = 0; a < after_count; ++a) {
    int64_t base = 0, base_switches = 0;
    bool found = false;
    for (int b = 0; b < before_count && !found; ++b) {
      if (before[b].tid == after[a].tid) {
        base = before[b].ns;
        base_switches = before[b].switches;
        found = true;
      }
    }
    int64_t delta = after[a].ns - base;  // a new thread: all of it
    int64_t switches = after[a].switches - base_switches;
    int g = 0;
    while (g < group_count && strcmp(groups[g].name, after[a].name)) ++g;
    if (g == group_count) {
      if (group_count == 64) continue;
      snprintf(groups[g].name, sizeof(groups[g].name), "%s", after[a].name);
      groups[g].threads = 0;
      groups[g].ns = 0;
      groups[g].switches = 0;
      ++group_count;
    }
    ++groups[g].threads;
    groups[g].ns += delta;
    groups[g].switches += switches;
    total += delta;
  }
  FILE *out = file;
  for (int g = 0; g < group_count; ++g) {
    if (groups[g].ns <= 0) continue;
    fprintf(out, "%s%-18s x%-3d %9.2f us %7.2f switches\n", indent,
            groups[g].name, groups[g].threads, (double)groups[g].ns / 1e3 / per,
            (double)groups[g].switches / per);
  }
  fprintf(out, "%s%-23s %9.2f us\n", indent, "all threads",
          (double)total / 1e3 / per);
}

void bench_tree_take(bench_tree_t *tree, pid_t client_pid, pid_t daemon_pid) {
  int count = 0;
  tree->has_client = client_pid > 0;
  if (tree->has_client) tree->pids[count++] = client_pid;
  tree->pids[count++] = daemon_pid;
  count += bench_children(daemon_pid, tree->pids + count,
                          BENCH_TREE_PROCESSES - count);
  tree->process_count = count;
  for (int p = 0; p < count; ++p) {
    tree->counts[p] =
        bench_tasks(tree->pids[p], tree->tasks[p], BENCH_TREE_TASKS);
  }
}

void bench_tree_print(void *file, const char *indent,
                      const bench_tree_t *before, const bench_tree_t *after,
                      double per) {
  char inner[64];
  snprintf(inner, sizeof(inner), "%s  ", indent);
  int daemon_index = after->has_client ? 1 : 0;
  for (int p = 0; p < after->process_count; ++p) {
    int b = 0;
    while (b < before->process_count && before->pids[b] != after->pids[p]) ++b;
    if (b == before->process_count) continue;
    fprintf(file, "%sper step, %s (pid %d):\n", indent,
            p < daemon_index    ? "client"
            : p == daemon_index ? "halod"
                                : "halod's child",
            (int)after->pids[p]);
    bench_tasks_print_delta(file, inner, before->tasks[b], before->counts[b],
                            after->tasks[p], after->counts[p], per);
  }
}

long bench_futex(_Atomic uint32_t *word, int op, uint32_t value,
                 const struct timespec *timeout) {
  return syscall(SYS_futex, word, op, value, timeout, NULL, 0);
}

static int bench_compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

bench_summary_t bench_summarize(double *us, int64_t count) {
  bench_summary_t summary = {.count = count};
  if (count <= 0) return summary;
  qsort(us, (size_t)count, sizeof(double), bench_compare_doubles);
  double total = 0;
  for (int64_t i = 0; i < count; ++i) total += us[i];
  summary.p50 = us[count / 2];
  summary.p99 = us[(int64_t)((double)(count - 1) * 0.99)];
  summary.mean = total / (double)count;
  summary.min = us[0];
  summary.max = us[count - 1];
  return summary;
}

//===----------------------------------------------------------------------===//
// CSV
//===----------------------------------------------------------------------===//

static FILE *bench_csv;
static const char *bench_csv_program;

bench_row_t bench_row(const char *workload, const char *name,
                      const char *impl) {
  bench_row_t row = {
      .workload = workload,
      .name = name,
      .impl = impl,
      .n = -1,
      .p50_us = NAN,
      .p99_us = NAN,
      .mean_us = NAN,
      .per_second = NAN,
      .cpu_us = NAN,
      .daemon_cpu_us = NAN,
      .memory_mib = NAN,
      .ms = NAN,
  };
  return row;
}

void bench_csv_open(const char *path, const char *program) {
  bench_csv = fopen(path, "a");
  if (!bench_csv) {
    perror(path);
    exit(2);
  }
  bench_csv_program = program;
  struct stat info;
  if (fstat(fileno(bench_csv), &info) == 0 && info.st_size == 0) {
    fputs(
        "workload,name,impl,clients,n,p50_us,p99_us,mean_us,per_second,"
        "cpu_us,daemon_cpu_us,memory_mib,ms,program,note\n",
        bench_csv);
  }
}

void bench_csv_close(void) {
  if (bench_csv) fclose(bench_csv);
  bench_csv = NULL;
}

// A quoted field; double quotes inside become single ones.
static void bench_csv_text(const char *text) {
  fputc('"', bench_csv);
  for (const char *c = text ? text : ""; *c; ++c) {
    fputc(*c == '"' ? '\'' : *c == '\n' ? ' ' : *c, bench_csv);
  }
  fputc('"', bench_csv);
}

static void bench_csv_figure(double value) {
  if (isfinite(value)) fprintf(bench_csv, "%.3f", value);
  fputc(',', bench_csv);
}

void bench_csv_write(const bench_row_t *row) {
  if (!bench_csv) return;
  fprintf(bench_csv, "%s,", row->workload);
  bench_csv_text(row->name);
  fprintf(bench_csv, ",%s,", row->impl);
  if (row->clients > 0) fprintf(bench_csv, "%d", row->clients);
  fputc(',', bench_csv);
  if (row->n >= 0) fprintf(bench_csv, "%lld", (long long)row->n);
  fputc(',', bench_csv);
  bench_csv_figure(row->p50_us);
  bench_csv_figure(row->p99_us);
  bench_csv_figure(row->mean_us);
  bench_csv_figure(row->per_second);
  bench_csv_figure(row->cpu_us);
  bench_csv_figure(row->daemon_cpu_us);
  bench_csv_figure(row->memory_mib);
  bench_csv_figure(row->ms);
  fprintf(bench_csv, "%s,", bench_csv_program);
  bench_csv_text(row->note);
  fputc('\n', bench_csv);
  fflush(bench_csv);
}

//===----------------------------------------------------------------------===//
// The fake driver
//===----------------------------------------------------------------------===//

bool bench_fake_cuda(void) {
  const char *fake = getenv("HALO_TEST_FAKE_CUDA");
  return fake && strcmp(fake, "1") == 0;
}

void bench_fake_image(uint8_t out_image[BENCH_FAKE_IMAGE_SIZE],
                      uint8_t variant) {
  halo_fake_cuda_image(out_image, variant);
}

void bench_print_header(FILE *out, const char *program, const char *version,
                        int32_t daemon_pid, const char *address) {
  char model[256] = "unknown CPU";
  FILE *cpuinfo = fopen("/proc/cpuinfo", "r");
  if (cpuinfo) {
    char line[512];
    while (fgets(line, sizeof(line), cpuinfo)) {
      if (strncmp(line, "model name", 10) == 0) {
        char *colon = strchr(line, ':');
        if (colon) {
          snprintf(model, sizeof(model), "%s", colon + 2);
          model[strcspn(model, "\n")] = '\0';
        }
        break;
      }
    }
    fclose(cpuinfo);
  }
  struct utsname uts;
  uname(&uts);
  char date[64] = "";
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm)) {
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", &tm);
  }
  fprintf(out, "%s %s, %s: halod pid %d at %s\n", program, version, date,
          daemon_pid, address);
  fprintf(out, "host: %ld online CPUs, %s, Linux %s\n",
          sysconf(_SC_NPROCESSORS_ONLN), model, uts.release);
}
