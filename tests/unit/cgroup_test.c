// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// The client cgroup behind trust-domain = cgroup (daemon/cgroup.c): the
// cgroup v2 line of /proc/PID/cgroup fixtures (a Kubernetes pod under the
// systemd and cgroupfs drivers, a hybrid host, a v1-only host, malformed
// lines), trimming to the pod, and this process's own file; and the
// tenants halod's per-user bounds count under (daemon/tenant.c): a uid, or
// under trust-domain cgroup a uid in one cgroup.
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "daemon/cgroup.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"
#include "daemon/tenant.h"

// A container of a burstable pod, kubelet with the systemd cgroup driver.
static const char kSystemdPod[] =
    "0::/kubepods.slice/kubepods-burstable.slice/"
    "kubepods-burstable-pod6f1c2a4e_9b3d_4c1e_8f00_1234567890ab.slice/"
    "cri-containerd-"
    "4c5e496ea333229f262dad49f276568d4c5e496ea333229f262dad49f276568d.scope\n";

static void test_parses_the_v2_line(void **state) {
  (void)state;
  char path[4096];
  assert_null(halod_cgroup_parse(kSystemdPod, path, sizeof(path)));
  // The line without "0::" and without its newline.
  assert_int_equal(strlen(path), strlen(kSystemdPod) - 4);
  assert_memory_equal(path, kSystemdPod + 3, strlen(path));
}

static void test_hybrid_host_takes_the_v2_line(void **state) {
  (void)state;
  // cgroup v1 controllers and the unified hierarchy side by side: the v2
  // line comes last, after v1 lines that name other paths.
  const char text[] =
      "9:name=systemd:/\n"
      "8:pids:/\n"
      "4:memory:/process_api/4c5e496e\n"
      "1:cpu:/\n"
      "0::/ns-test/pod-a\n";
  char path[256];
  assert_null(halod_cgroup_parse(text, path, sizeof(path)));
  assert_string_equal(path, "/ns-test/pod-a");
  // The root cgroup, without a final newline.
  assert_null(halod_cgroup_parse("0::/", path, sizeof(path)));
  assert_string_equal(path, "/");
}

static void test_v1_only_host_is_not_found(void **state) {
  (void)state;
  char path[256];
  halo_status_t status = halod_cgroup_parse(
      "12:memory:/kubepods/pod1/c1\n1:name=systemd:/kubepods/pod1/c1\n", path,
      sizeof(path));
  assert_int_equal(halo_status_code(status), HALO_STATUS_NOT_FOUND);
  assert_non_null(strstr(halo_status_message(status), "cgroup v1 only"));
  halo_status_free(status);
  status = halod_cgroup_parse("", path, sizeof(path));
  assert_int_equal(halo_status_code(status), HALO_STATUS_NOT_FOUND);
  halo_status_free(status);
}

static void test_malformed_lines_are_refused(void **state) {
  (void)state;
  char path[16];
  halo_status_t status = halod_cgroup_parse("0::\n", path, sizeof(path));
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "no absolute path"));
  halo_status_free(status);
  status = halod_cgroup_parse("0::relative/path\n", path, sizeof(path));
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  halo_status_free(status);
  // Longer than the buffer: refused, never truncated (a truncated path
  // could merge two pods).
  status =
      halod_cgroup_parse("0::/a/very/long/cgroup/path\n", path, sizeof(path));
  assert_int_equal(halo_status_code(status), HALO_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(halo_status_message(status), "longer than 15"));
  halo_status_free(status);
}

static void test_trim_keys_the_pod(void **state) {
  (void)state;
  char path[4096];
  assert_null(halod_cgroup_parse(kSystemdPod, path, sizeof(path)));
  halod_cgroup_trim(path, 1);
  assert_string_equal(path,
                      "/kubepods.slice/kubepods-burstable.slice/"
                      "kubepods-burstable-pod6f1c2a4e_9b3d_4c1e_8f00_"
                      "1234567890ab.slice");
  // A guaranteed pod sits one level higher; trim 1 still gives the pod.
  char guaranteed[] = "/kubepods/pod6f1c2a4e/4c5e496ea333";
  halod_cgroup_trim(guaranteed, 1);
  assert_string_equal(guaranteed, "/kubepods/pod6f1c2a4e");
  char path2[] = "/a/b/c";
  halod_cgroup_trim(path2, 0);
  assert_string_equal(path2, "/a/b/c");
  halod_cgroup_trim(path2, 2);
  assert_string_equal(path2, "/a");
  halod_cgroup_trim(path2, 5);
  assert_string_equal(path2, "/");
  char root[] = "/";
  halod_cgroup_trim(root, 3);
  assert_string_equal(root, "/");
}

static void test_own_process(void **state) {
  (void)state;
  FILE *file = fopen("/proc/self/cgroup", "r");
  if (!file) skip();
  char text[8192];
  size_t length = fread(text, 1, sizeof(text) - 1, file);
  fclose(file);
  text[length] = '\0';
  char expected[4096];
  halo_status_t parsed = halod_cgroup_parse(text, expected, sizeof(expected));
  char path[4096];
  halo_status_t status =
      halod_cgroup_of_process((uint32_t)getpid(), 0, path, sizeof(path));
  if (parsed) {
    // A v1-only host: the same answer, naming the pid and the file.
    assert_int_equal(halo_status_code(status), halo_status_code(parsed));
    assert_non_null(strstr(halo_status_message(status), "/proc/"));
    halo_status_free(parsed);
    halo_status_free(status);
    return;
  }
  assert_null(status);
  assert_string_equal(path, expected);
  // A process that does not exist.
  status = halod_cgroup_of_process(0x7ffffffe, 0, path, sizeof(path));
  assert_int_equal(halo_status_code(status), HALO_STATUS_NOT_FOUND);
  assert_non_null(strstr(halo_status_message(status), "pid 2147483646"));
  halo_status_free(status);
}

// A tenant keeps its uid whatever the mode; under trust-domain cgroup two
// uids in one cgroup, and one uid in two cgroups, are different tenants,
// and a process whose cgroup cannot be read is its uid's.
static void test_tenants(void **state) {
  (void)state;
  const halod_tenancy_t by_uid = {.by_cgroup = false};
  uint32_t self = (uint32_t)getpid();
  uint64_t user = halod_tenant_of(by_uid, 1000, self);
  assert_int_equal(halod_tenant_uid(user), 1000);
  assert_true(user != 0);
  assert_true(halod_tenant_of(by_uid, 1001, self) != user);
  assert_int_equal(halod_tenant_uid(halod_tenant_of(by_uid, 0, self)), 0);
  assert_true(halod_tenant_of(by_uid, 0, self) != 0);
  char words[HALOD_TENANT_WORDS_BYTES];
  halod_tenant_describe(by_uid, user, self, words, sizeof(words));
  assert_string_equal(words, "uid 1000");

  const halod_tenancy_t by_cgroup = {.by_cgroup = true};
  char path[4096];
  halo_status_t status = halod_cgroup_of_process(self, 0, path, sizeof(path));
  if (status) {  // a v1-only host: every process is its uid's tenant
    halo_status_free(status);
    assert_true(halod_tenant_of(by_cgroup, 1000, self) == user);
    skip();
  }
  uint64_t own = halod_tenant_of(by_cgroup, 1000, self);
  assert_int_equal(halod_tenant_uid(own), 1000);
  assert_true(own != user);
  assert_true(halod_tenant_of(by_cgroup, 1000, self) == own);
  assert_true(halod_tenant_of(by_cgroup, 1001, self) != own);
  char expected[4200];
  snprintf(expected, sizeof(expected), "uid 1000 in cgroup %s", path);
  halod_tenant_describe(by_cgroup, own, self, words, sizeof(words));
  assert_string_equal(words, expected);
  // Trimmed to the root, another cgroup (unless this one is the root).
  const halod_tenancy_t by_root = {.by_cgroup = true, .cgroup_trim = 64};
  uint64_t root = halod_tenant_of(by_root, 1000, self);
  assert_int_equal(halod_tenant_uid(root), 1000);
  if (strcmp(path, "/") != 0) assert_true(root != own);
  // No such process: the uid's tenant.
  assert_true(halod_tenant_of(by_cgroup, 1000, 0x7ffffffe) == user);
  halod_tenant_describe(by_cgroup, user, 0x7ffffffe, words, sizeof(words));
  assert_string_equal(words, "uid 1000");
  halod_tenant_describe(by_cgroup, own, 0x7ffffffe, words, sizeof(words));
  assert_string_equal(words, "uid 1000 in its cgroup");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parses_the_v2_line),
      cmocka_unit_test(test_hybrid_host_takes_the_v2_line),
      cmocka_unit_test(test_v1_only_host_is_not_found),
      cmocka_unit_test(test_malformed_lines_are_refused),
      cmocka_unit_test(test_trim_keys_the_pod),
      cmocka_unit_test(test_own_process),
      cmocka_unit_test(test_tenants),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
