#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""graph_memory: the GPU memory one client's recordings make a device
worker's CUDA graphs take, against halod's cuda-graph-bytes.

One client records RECORDINGS command buffers of WIDTH dispatches each, with
no barrier between them (so they may run concurrently: the shape whose
graph instances cost the driver most; each recording differs from the
others by a constant, so none is a memo hit), and executes each once, one
after another. Each execution builds its recording's graph instance in the
worker, and the instance stays when the execution is done, ready for the
recording's next execution. It prints the GPU's memory in use
(nvidia-smi) before and after, the executions that failed
(RESOURCE_EXHAUSTED: one instance larger than the bound, or none idle to
make room) and the seconds they took. Run it against halods started with
different --cuda-graph-bytes (scripts/gpu-bench's G1 does;
docs/performance.md quotes it).

Run:  HALO_ADDRESS=ipc:///path/to/halo.sock python3 bench/graph_memory.py \
          --width 1024 --recordings 64
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
                        help="dispatches in each recording, no barrier")
    parser.add_argument("--recordings", type=int, default=64,
                        help="recordings, each executed once")
    parser.add_argument("--label", default="",
                        help="what the halod was started with, for the line")
    args = parser.parse_args()
    with halogpu.connect(args.address, client_name="graph_memory") as client:
        kernel = client.load_cuda_source(SOURCE, device=args.device)
        # A one-dispatch warm-up: the worker, its context and its pools are
        # up before the first reading.
        with client.record(device=args.device) as warm:
            warm.dispatch(kernel, "spin", grid=1, block=32,
                          args=[np.uint64(0)])
        done = client.create_semaphore()
        client.execute(warm, signal=[(done, 1)])
        done.wait(1, timeout=60)
        time.sleep(0.5)
        before = used_mib(args.device)
        recordings = []
        for r in range(args.recordings):
            with client.record(device=args.device) as recording:
                for _ in range(args.width):
                    # 1 + r ns: a recording of its own (no memo hit).
                    recording.dispatch(kernel, "spin", grid=1, block=32,
                                       args=[np.uint64(1 + r)])
            recordings.append(recording)
        failed = []
        started = time.perf_counter()
        value = 1
        for recording in recordings:
            value += 1
            try:
                client.execute(recording, signal=[(done, value)])
                done.wait(value, timeout=120)
            except halogpu.HaloError as error:
                failed.append(error)
                done = client.create_semaphore(value)
        seconds = time.perf_counter() - started
        time.sleep(0.5)
        after = used_mib(args.device)
    print(f"graph_memory {args.label}: {args.recordings} recordings of "
          f"{args.width} dispatches beside each other, each executed once: "
          f"GPU memory {before:.0f} -> {after:.0f} MiB "
          f"(+{after - before:.0f}), {len(failed)} failed, {seconds:.2f} s")
    for error in failed[:1]:
        print(f"  {type(error).__name__}: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
