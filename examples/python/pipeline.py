#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""pipeline: two processes sharing a halo buffer and two semaphores.

The producer (this process) creates an exportable host-visible buffer of
DEPTH slots and two exportable timeline semaphores, and starts a consumer
process with multiprocessing, passing it only the three export tokens (32
hex digits each). Each side connects on its own and maps the same memory:

  producer: for item k = 1, 2, ...: wait until consumed >= k - DEPTH (its
            slot is free), write item k into slot k % DEPTH, signal
            produced = k.
  consumer: wait until produced >= k, compute out = 2 * in + 1 in the same
            slot's output half (numpy, zero-copy), signal consumed = k.

No message goes between the processes after the start: the semaphores live
in shared memory and a wait is a futex. If the consumer fails, it fails the
`consumed` semaphore with its error, and the producer's next wait raises
that error (with the consumer's message).

Run:  HALO_ADDRESS=ipc:///path/to/halo.sock python3 pipeline.py
      (or --address ...)
"""

import argparse
import multiprocessing
import sys
import time

import numpy as np

import halogpu

DEPTH = 4  # slots in flight
WIDTH = 4096  # float32 per slot, input and output each


def slot_views(buffer, slot):
    """The input and output arrays of |slot| (views of the shared buffer)."""
    slots = buffer.numpy(np.float32, shape=(DEPTH, 2, WIDTH))
    return slots[slot, 0], slots[slot, 1]


def consumer(address, buffer_token, produced_token, consumed_token, items,
             fail_at=0):
    """The second process: imports the objects by token and transforms each
    item as soon as it is produced."""
    with halogpu.connect(address, client_name="pipeline-consumer") as client:
        buffer = client.import_buffer(buffer_token)
        produced = client.import_semaphore(produced_token)
        consumed = client.import_semaphore(consumed_token)
        try:
            for k in range(1, items + 1):
                produced.wait(k, timeout=30)
                if k == fail_at:
                    raise RuntimeError(f"cannot transform item {k} (--fail-at)")
                data, out = slot_views(buffer, k % DEPTH)
                np.multiply(data, 2, out=out)
                out += 1
                del data, out  # views keep the mapping alive: drop them
                consumed.signal(k)
        except Exception as error:
            # Tell the producer why, through the semaphore it waits on.
            consumed.fail(halogpu.StatusCode.INTERNAL, f"consumer: {error}")
            raise


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="halod's ipc:// address")
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--fail-at", type=int, default=0,
                        help="make the consumer fail at this item (to show "
                             "how the failure reaches the producer)")
    args = parser.parse_args()

    # spawn: the consumer inherits nothing of this process (halo sessions
    # do not survive fork(); objects go across by token only).
    context = multiprocessing.get_context("spawn")
    with halogpu.connect(args.address,
                         client_name="pipeline-producer") as client:
        buffer = client.create_buffer(DEPTH * 2 * WIDTH * 4,
                                      memory="host_visible", exportable=True)
        produced = client.create_semaphore(exportable=True)
        consumed = client.create_semaphore(exportable=True)
        worker = context.Process(
            target=consumer,
            args=(client.address, buffer.export(), produced.export(),
                  consumed.export(), args.items, args.fail_at))
        worker.start()

        try:
            # The consumer starts a Python interpreter and connects: time
            # from its first item on.
            first = None
            for k in range(1, args.items + 1):
                if k == 2:
                    consumed.wait(1, timeout=60)
                    first = time.perf_counter()
                if k > DEPTH:
                    consumed.wait(k - DEPTH, timeout=30)  # slot k is free
                    # ... and item k - DEPTH is done: check it.
                    check(buffer, k - DEPTH)
                data, _ = slot_views(buffer, k % DEPTH)
                data[:] = np.arange(WIDTH, dtype=np.float32) + k
                del data
                produced.signal(k)
            consumed.wait(args.items, timeout=30)
            for k in range(max(1, args.items - DEPTH + 1), args.items + 1):
                check(buffer, k)
        except halogpu.HaloError as error:
            worker.join(10)
            sys.exit(f"pipeline: {error}")
        elapsed = time.perf_counter() - first if first else 0.0
        worker.join(30)
        if worker.exitcode != 0:
            sys.exit(f"pipeline: the consumer exited with {worker.exitcode}")
    if args.items > 1:
        print(f"pipeline: items 2..{args.items} went through 2 processes in "
              f"{1e3 * elapsed:.1f} ms ({1e6 * elapsed / (args.items - 1):.0f}"
              " us an item)")
    print("pipeline: ok")


def check(buffer, k):
    _, out = slot_views(buffer, k % DEPTH)
    expected = 2 * (np.arange(WIDTH, dtype=np.float32) + k) + 1
    if not np.array_equal(out, expected):
        raise SystemExit(f"pipeline: WRONG output for item {k}")


if __name__ == "__main__":
    main()
