#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""graph_memory: the GPU memory one client's recording makes a device
worker's CUDA graphs take, against halod's cuda-graph-bytes.

One client records WIDTH dispatches of a spinning kernel with no barrier
between them (so they may run concurrently: the shape whose graph instances
cost the driver most), the first spinning HOLD_MS and the others not at
all, executes it on EXECUTIONS queues at once (each execution in flight
needs a graph instance of its own, up to 64, and holds it HOLD_MS: longer
than the worker takes to build the instances one after another, so that
they are all in use at once) and waits.
It prints the GPU's memory in use (nvidia-smi) before and after, the
executions that failed (RESOURCE_EXHAUSTED: one instance larger than the
bound), and the seconds they took. Run it against halods started with
different --cuda-graph-bytes (scripts/gpu-bench does; docs/performance.md
quotes it).

Run:  HALO_ADDRESS=ipc:///path/to/halo.sock python3 bench/graph_memory.py \
          --width 1024 --executions 64 --hold-ms 4000
Needs: the halogpu package, numpy, nvidia-smi, halod --driver cuda.
"""

import argparse
import subprocess
import sys
import time

import numpy as np

import halogpu

SOURCE = r"""
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
"""


def used_mib(device):
    """The GPU's memory in use, MiB (nvidia-smi)."""
    out = subprocess.run(
        ["nvidia-smi", "-i", str(device), "--query-gpu=memory.used",
         "--format=csv,noheader,nounits"],
        check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="halod's ipc:// address")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--width", type=int, default=1024,
                        help="dispatches in the recording, no barrier")
    parser.add_argument("--executions", type=int, default=64,
                        help="executions at once, each on its own queue")
    parser.add_argument("--hold-ms", type=int, default=4000,
                        help="the first dispatch's time on the GPU")
    parser.add_argument("--label", default="",
                        help="what the halod was started with, for the line")
    args = parser.parse_args()
    with halogpu.connect(args.address, client_name="graph_memory") as client:
        kernel = client.load_cuda_source(SOURCE, device=args.device)
        hold = np.uint64(args.hold_ms * 1000000)
        ns = np.uint64(0)
        # A one-dispatch warm-up: the worker, its context and its pools are
        # up before the first reading.
        with client.record(device=args.device) as warm:
            warm.dispatch(kernel, "spin", grid=1, block=32, args=[ns])
        done = client.create_semaphore()
        client.execute(warm, signal=[(done, 1)])
        done.wait(1, timeout=60)
        time.sleep(0.5)
        before = used_mib(args.device)
        with client.record(device=args.device) as wide:
            for i in range(args.width):
                wide.dispatch(kernel, "spin", grid=1, block=32,
                              args=[hold if i == 0 else ns])
        queues = [client.create_queue(device=args.device)
                  for _ in range(args.executions)]
        semaphores = [client.create_semaphore() for _ in queues]
        started = time.perf_counter()
        for queue, semaphore in zip(queues, semaphores):
            queue.execute(wide, signal=[(semaphore, 1)])
        failed = []
        for semaphore in semaphores:
            try:
                semaphore.wait(1, timeout=600)
            except halogpu.HaloError as error:
                failed.append(error)
        seconds = time.perf_counter() - started
        time.sleep(0.5)
        after = used_mib(args.device)
    print(f"graph_memory {args.label}: {args.width} dispatches beside each "
          f"other, {args.executions} executions at once holding "
          f"{args.hold_ms} ms: GPU memory "
          f"{before:.0f} -> {after:.0f} MiB (+{after - before:.0f}), "
          f"{len(failed)} failed, {seconds:.2f} s")
    for error in failed[:1]:
        print(f"  {type(error).__name__}: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
