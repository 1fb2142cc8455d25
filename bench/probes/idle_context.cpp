// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A stand-alone probe (no halo code) of what an idle CUDA context costs
// the host's CPUs: a process that holds device 0's primary context and
// does nothing, measured per thread (/proc/self/task/*/schedstat) over a
// few seconds of idleness after each stage: the context alone; then a
// stream, an event and one kernel run and waited for; then one host
// function run (CUDA then keeps a thread for them); then a blocking-sync
// event waited for; then the same while another process (its own
// context) runs a kernel and waits for it on a blocking-sync event about
// 1,000 times a second, as a busy worker beside a spare does. halo's
// spare worker (a worker process started ahead
// of need, its context made, waiting for its first session) is such a
// process; docs/performance.md compares the two. Not built by CMake (it
// needs the CUDA driver's header); on a GPU machine:
//   g++ -O2 -I/usr/local/cuda/include bench/probes/idle_context.cpp -lcuda
//     -o /tmp/ic && /tmp/ic [seconds]
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

#include "probe.h"

namespace {

const char kPtx[] =
    ".version 8.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry k(.param .u64 p) { ret; }\n";

struct ThreadTime {
  std::string name;
  u64 run_ns;
};

// Every thread of this process: its name and the nanoseconds it ran.
std::map<int, ThreadTime> threads_now() {
  std::map<int, ThreadTime> out;
  DIR *dir = opendir("/proc/self/task");
  if (!dir) return out;
  while (struct dirent *entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    int tid = atoi(entry->d_name);
    std::string base = std::string("/proc/self/task/") + entry->d_name;
    ThreadTime time = {"?", 0};
    if (FILE *f = fopen((base + "/comm").c_str(), "r")) {
      char name[64] = {0};
      if (fgets(name, sizeof(name), f)) {
        name[strcspn(name, "\n")] = 0;
        time.name = name;
      }
      fclose(f);
    }
    if (FILE *f = fopen((base + "/schedstat").c_str(), "r")) {
      if (fscanf(f, "%llu", &time.run_ns) != 1) time.run_ns = 0;
      fclose(f);
    }
    out[tid] = time;
  }
  closedir(dir);
  return out;
}

// Sleeps |seconds| and prints what each thread ran meanwhile, as a share
// of one core.
void idle(const char *stage, double seconds) {
  std::map<int, ThreadTime> before = threads_now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  std::map<int, ThreadTime> after = threads_now();
  double total = 0;
  printf("%s: idle %.1f s\n", stage, seconds);
  for (const auto &entry : after) {
    auto was = before.find(entry.first);
    u64 then = was == before.end() ? 0 : was->second.run_ns;
    double share = (entry.second.run_ns - then) / (seconds * 1e9);
    total += share;
    printf("  thread %-16s %6.3f%% of a core\n", entry.second.name.c_str(),
           100 * share);
  }
  printf("  all threads      %6.3f%% of a core\n", 100 * total);
}

void CUDA_CB host_function(void *) {}

// The neighbour process: its own context, a kernel and a blocking-sync
// event wait about 1,000 times a second, until killed.
void neighbour() {
  CD(cuInit(0));
  CUdevice device;
  CD(cuDeviceGet(&device, 0));
  CUcontext context;
  CD(cuDevicePrimaryCtxRetain(&context, device));
  CD(cuCtxSetCurrent(context));
  CUmodule module;
  CD(cuModuleLoadData(&module, kPtx));
  CUfunction function;
  CD(cuModuleGetFunction(&function, module, "k"));
  CUstream stream;
  CD(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent event;
  CD(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC));
  u64 argument = 0;
  void *arguments[] = {&argument};
  for (;;) {
    CD(cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream, arguments, NULL));
    CD(cuEventRecord(event, stream));
    CD(cuEventSynchronize(event));
    usleep(1000);
  }
}

}  // namespace

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 5;
  // Before this process touches the driver: a child forked after cuInit
  // may not use CUDA.
  pid_t child = fork();
  if (child == 0) {
    raise(SIGSTOP);  // until the idle stages are done
    neighbour();
    _exit(0);
  }
  CD(cuInit(0));
  CUdevice device;
  CD(cuDeviceGet(&device, 0));
  CUcontext context;
  CD(cuDevicePrimaryCtxRetain(&context, device));
  CD(cuCtxSetCurrent(context));
  idle("the context alone", seconds);

  CUstream stream;
  CD(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent event;
  CD(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
  CUmodule module;
  CD(cuModuleLoadData(&module, kPtx));
  CUfunction function;
  CD(cuModuleGetFunction(&function, module, "k"));
  u64 argument = 0;
  void *arguments[] = {&argument};
  CD(cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream, arguments, NULL));
  CD(cuEventRecord(event, stream));
  CD(cuEventSynchronize(event));
  idle("+ a stream, an event, one kernel", seconds);

  CD(cuLaunchHostFunc(stream, host_function, NULL));
  CD(cuStreamSynchronize(stream));
  idle("+ one host function", seconds);

  CUevent blocking;
  CD(cuEventCreate(&blocking,
                   CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC));
  CD(cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream, arguments, NULL));
  CD(cuEventRecord(blocking, stream));
  CD(cuEventSynchronize(blocking));
  idle("+ a blocking-sync event waited for", seconds);

  kill(child, SIGCONT);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // its context up
  idle("the same, another process busy beside it", seconds);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  return 0;
}
