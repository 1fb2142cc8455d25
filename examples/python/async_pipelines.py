# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""async_pipelines: two pipelines overlapped with asyncio.

Each pipeline runs STEPS steps on a queue of its own: write the step's
input into a host-visible buffer, execute a recorded vector add
(c = a + b) that signals the pipeline's semaphore, then
``await semaphore.wait_async(step)`` and check the result. While one
pipeline waits for its device work, the event loop runs the other (and a
heartbeat that shows the loop is never blocked). Both pipelines replay
one memoized recording with their own binding tables.

Run:  HALO_ADDRESS=ipc:///path/to/halo.sock python3 async_pipelines.py

Needs: the halogpu package (pip install ./python), numpy, libhalo; on the
CPU driver a C compiler (the kernel of vector_add.py is built with cc).
"""

import argparse
import asyncio
import os
import sys
import time

import numpy as np

import halogpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vector_add import load_kernel  # noqa: E402  (the same add kernel)

N = 1 << 16
BLOCK = 256


async def pipeline(name, client, command_buffer, steps, log):
    """One pipeline: its own queue, semaphore and buffers."""
    queue = client.create_queue()
    done = client.create_semaphore()
    a, b, c = (client.create_buffer(4 * N, memory="host_visible")
               for _ in range(3))
    va, vb, vc = (x.numpy(np.float32) for x in (a, b, c))
    for step in range(1, steps + 1):
        va[:] = step
        vb[:] = np.arange(N, dtype=np.float32)
        queue.execute(command_buffer, bindings=[a, b, c],
                      signal=[(done, step)])
        log.append(f"{name} {step} submitted")
        await done.wait_async(step, timeout=30)  # the loop runs others
        log.append(f"{name} {step} done")
        if not np.array_equal(vc, step + np.arange(N, dtype=np.float32)):
            raise RuntimeError(f"{name}: wrong result at step {step}")


async def heartbeat(stop, beats):
    while not stop.is_set():
        beats.append(time.monotonic())
        await asyncio.sleep(0.005)


async def run(client, kernel, steps):
    with client.record(bindings=3) as command_buffer:
        command_buffer.dispatch(kernel, "add", grid=N // BLOCK, block=BLOCK,
                                args=[halogpu.slot(0), halogpu.slot(1),
                                      halogpu.slot(2), np.uint32(N)])
    log, beats = [], []
    stop = asyncio.Event()
    beat = asyncio.create_task(heartbeat(stop, beats))
    started = time.perf_counter()
    await asyncio.gather(
        pipeline("first", client, command_buffer, steps, log),
        pipeline("second", client, command_buffer, steps, log))
    elapsed = time.perf_counter() - started
    stop.set()
    await beat
    return log, len(beats), elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="halod's ipc:// address")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with halogpu.connect(args.address,
                         client_name="async_pipelines") as client:
        device = client.devices[0]
        kernel = load_kernel(client, device)
        log, beats, elapsed = asyncio.run(run(client, kernel, args.steps))
    # Overlap: the second pipeline submitted its first step before the
    # first pipeline's first step was done.
    overlapped = log.index("second 1 submitted") < log.index("first 1 done")
    print(f"async_pipelines: 2 x {args.steps} steps in "
          f"{elapsed * 1e3:.1f} ms on {device.driver}, {beats} heartbeats, "
          f"overlapped: {overlapped}")
    if not overlapped:
        sys.exit("async_pipelines: the pipelines did not overlap")
    print("async_pipelines: ok")


if __name__ == "__main__":
    main()
