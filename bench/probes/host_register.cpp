// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A stand-alone probe (no halo code) of the device memory that registering
// small host pages with the driver costs on a fresh context: what a device
// worker does for each session's semaphore page (cuMemHostRegister with
// DEVICEMAP | PORTABLE of a 4 KiB shared page, a second mapping of a memfd).
// It registers PAGES pages one after another and prints the device's free
// memory (cuMemGetInfo) before and after each; then unregisters them all
// and registers as many new ones again. Where the pages go:
//   spread   each page where the kernel puts a new mapping (as now)
//   window   each page at the next 4 KiB of one 2 MiB-aligned window
//            reserved up front (mmap MAP_FIXED into a PROT_NONE reservation)
//   alias    as halo's CUDA allocator does: a second mapping of the page
//            (mremap with an old size of 0) registered, and its device
//            address asked for (cuMemHostGetDevicePointer)
// One mode per process, so each starts on a fresh context.
// docs/performance.md quotes it. Not built by CMake (it needs the CUDA
// driver's header); on a GPU machine:
//   g++ -O2 -I/usr/local/cuda/include bench/probes/host_register.cpp -lcuda
//     -o /tmp/hr && /tmp/hr spread 16 && /tmp/hr window 16 && /tmp/hr alias 16
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // mremap
#endif
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "probe.h"

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kWindow = 2u << 20;

size_t free_bytes() {
  size_t free = 0, total = 0;
  CD(cuMemGetInfo(&free, &total));
  return free;
}

// A 4 KiB shared page of its own memfd, mapped at |where| (nullptr: where
// the kernel likes).
void *map_page(void *where) {
  int fd = memfd_create("probe-page", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, kPage) != 0) {
    perror("memfd");
    exit(1);
  }
  void *page = mmap(where, kPage, PROT_READ | PROT_WRITE,
                    MAP_SHARED | (where ? MAP_FIXED : 0), fd, 0);
  close(fd);
  if (page == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  memset(page, 0, kPage);
  return page;
}

// Registers |count| pages (in |window| when it is not null), printing the
// free memory's change at each; returns the pages.
std::vector<void *> register_pages(int count, char *window, int first,
                                   bool alias) {
  std::vector<void *> pages;
  size_t before = free_bytes();
  size_t start = before;
  for (int i = 0; i < count; ++i) {
    void *page = map_page(window ? window + (first + i) * kPage : nullptr);
    if (alias) {
      void *second = mremap(page, 0, kPage, MREMAP_MAYMOVE);
      if (second == MAP_FAILED) {
        perror("mremap");
        exit(1);
      }
      page = second;  // the first mapping stays, as the caller's would
    }
    CD(cuMemHostRegister(
        page, kPage,
        CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE));
    if (alias) {
      CUdeviceptr address;
      CD(cuMemHostGetDevicePointer(&address, page, 0));
    }
    size_t after = free_bytes();
    printf("  page %2d at %p: %+.2f MiB\n", i, page,
           ((double)before - (double)after) / 1048576.0);
    before = after;
    pages.push_back(page);
  }
  printf("  %d pages: %.2f MiB in all\n", count,
         ((double)start - (double)before) / 1048576.0);
  return pages;
}

}  // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "spread";
  int count = argc > 2 ? atoi(argv[2]) : 16;
  if ((mode != "spread" && mode != "window" && mode != "alias") || count < 1 ||
      (size_t)count * 2 * kPage > kWindow) {
    fprintf(stderr, "usage: %s spread|window|alias [PAGES, at most 256]\n",
            argv[0]);
    return 2;
  }
  CUdevice device;
  probe_primary_context(&device);
  char *window = nullptr;
  if (mode == "window") {
    // A 2 MiB-aligned window inside a 4 MiB reservation.
    void *reserved = mmap(nullptr, 2 * kWindow, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserved == MAP_FAILED) {
      perror("mmap");
      return 1;
    }
    uintptr_t aligned =
        ((uintptr_t)reserved + kWindow - 1) & ~(uintptr_t)(kWindow - 1);
    window = (char *)aligned;
  }
  printf("%s, %d pages, a fresh context (%.0f MiB free):\n", mode.c_str(),
         count, (double)free_bytes() / 1048576.0);
  std::vector<void *> pages = register_pages(count, window, 0, mode == "alias");
  size_t before = free_bytes();
  for (void *page : pages) {
    CD(cuMemHostUnregister(page));
    munmap(page, kPage);
  }
  printf("unregistered: %+.2f MiB back\n",
         ((double)free_bytes() - (double)before) / 1048576.0);
  printf("again, %d new pages:\n", count);
  pages = register_pages(count, window, count, mode == "alias");
  CD(cuDevicePrimaryCtxRelease(device));
  return 0;
}
