#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""vector_add: c = a + b on a halo device, from Python.

Connects to halod, loads a kernel for the device's driver (on the CPU
driver: a shared object compiled here with cc from the C source below; on
CUDA: the CUDA source below, compiled by the daemon), records one
command buffer with three binding slots, executes it twice with different
binding tables, waits on a timeline semaphore and checks the results in
zero-copy numpy views of the host-visible buffers.

Run:  HALO_ADDRESS=ipc:///path/to/halo.sock python3 vector_add.py
      (or --address ...; without either: ipc:///run/halo/halo.sock)
Needs: the halogpu package (pip install ./python), numpy, libhalo (found as
the package documents, or HALO_LIBRARY=build/lib/libhalo.so), and on the CPU
driver a C compiler (cc).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import halogpu

# The kernel for the local (CPU) driver: called once per workgroup.
LOCAL_SOURCE = r"""
#include <stdint.h>
#include "halo/local_kernel.h"

HALO_LOCAL_KERNEL(add) {
  const float *a = HALO_ARG(state, 0, const float *);
  const float *b = HALO_ARG(state, 1, const float *);
  float *c = HALO_ARG(state, 2, float *);
  uint32_t n = HALO_ARG(state, 3, uint32_t);
  uint32_t first = state->workgroup_id[0] * state->workgroup_size[0];
  for (uint32_t i = first; i < first + state->workgroup_size[0] && i < n; ++i)
    c[i] = a[i] + b[i];
}
"""

# The same for the CUDA driver (NVRTC in the daemon).
CUDA_SOURCE = r"""
extern "C" __global__ void add(const float *a, const float *b, float *c,
                               unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""


def include_dir():
    """The folder holding halo/local_kernel.h: the source tree's
    include (this file is examples/python/vector_add.py), else the
    installed headers."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "..", "..", "include"),
                  "/usr/local/include", "/usr/include"]
    for folder in candidates:
        if os.path.exists(os.path.join(folder, "halo", "local_kernel.h")):
            return os.path.normpath(folder)
    sys.exit("vector_add: halo/local_kernel.h not found (run from the halo "
             "source tree)")


def load_kernel(client, device):
    if device.driver == "local":
        compiler = shutil.which(os.environ.get("CC", "cc"))
        if not compiler:
            sys.exit("vector_add: the CPU driver needs a C compiler (cc)")
        with tempfile.TemporaryDirectory(prefix="halo-vector-add.") as tmp:
            source = os.path.join(tmp, "add.c")
            with open(source, "w") as file:
                file.write(LOCAL_SOURCE)
            library = os.path.join(tmp, "add.so")
            subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-I",
                            include_dir(), "-o", library, source], check=True)
            return client.load_shared_object(library, device=device.ordinal)
    return client.load_cuda_source(CUDA_SOURCE, device=device.ordinal,
                                   options=["--use_fast_math"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="halod's ipc:// address")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("-n", type=int, default=1 << 20,
                        help="elements (default 2^20)")
    args = parser.parse_args()
    n = args.n
    block = 256

    with halogpu.connect(args.address, client_name="vector_add") as client:
        device = client.devices[args.device]
        print(f"device {device.ordinal}: {device.driver} {device.name}")

        started = time.perf_counter()
        kernel = load_kernel(client, device)
        print(f"loaded the kernel in {1e3 * (time.perf_counter() - started):.1f}"
              f" ms (content hash {kernel.content_hash[:16]}...)")

        # Host-visible buffers: the numpy arrays are the shared memory the
        # daemon (and, on CUDA, the GPU) reads and writes. No copies.
        def host_array(fill):
            buffer = client.create_buffer(4 * n, memory="host_visible",
                                          device=device.ordinal)
            array = buffer.numpy(np.float32)
            array[:] = fill
            return buffer, array

        a, va = host_array(np.arange(n, dtype=np.float32))
        b, vb = host_array(2.0)
        c, vc = host_array(0.0)

        # One recording, executed with any binding table: slots 0, 1, 2 are
        # a, b and c of each execution.
        with client.record(bindings=3, device=device.ordinal) as cb:
            cb.dispatch(kernel, "add", grid=(n + block - 1) // block,
                        block=block,
                        args=[halogpu.slot(0), halogpu.slot(1),
                              halogpu.slot(2),
                              np.uint32(n)])
        print(f"recorded (daemon memo cache hit: {cb.memo_hit})")

        done = client.create_semaphore()
        started = time.perf_counter()
        client.execute(cb, bindings=[a, b, c], signal=[(done, 1)])
        done.wait(1, timeout=30)
        print(f"c = a + b in {1e3 * (time.perf_counter() - started):.2f} ms")
        expected = np.arange(n, dtype=np.float32) + 2.0
        if not np.array_equal(vc, expected):
            sys.exit("vector_add: WRONG result in c")

        # The same command buffer, another table: b = a + c.
        client.execute(cb, bindings=[a, c, b], signal=[(done, 2)])
        done.wait(2, timeout=30)
        if not np.array_equal(vb, 2 * np.arange(n, dtype=np.float32) + 2.0):
            sys.exit("vector_add: WRONG result in b")
        print(f"b = a + c checked too; c[:4] = {vc[:4]}, b[:4] = {vb[:4]}")
    print("vector_add: ok")


if __name__ == "__main__":
    main()
