# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Triton kernels through halogpu on a real GPU (scripts/gpu-test's Triton
step; not a pytest module: the CPU driver cannot run PTX).

Runs Triton's tutorial masked vector add (from the CUBIN and from the
PTX, and at offsets that are not 16-byte aligned), a row softmax and a
small fp16 matmul (tl.dot, shared memory) on device 0 of a halod started with --driver cuda, compares each with numpy
and prints one "PASS name" or "FAIL name: why" line per check; exits 1 if
any failed.

    HALO_ADDRESS=ipc://... HALO_LIBRARY=build/lib/libhalo.so \\
        PYTHONPATH=python python3 python/tests/gpu_triton_check.py
"""

import sys
import time
import traceback

import numpy as np
import triton
import triton.language as tl

import halogpu
import halogpu.triton


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements,
               BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride,
                   output_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_cols
    x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                other=-float("inf"))
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak,
                  stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a_mask = (rm[:, None] < M) & (rk[None, :] + k < K)
        b_mask = (rk[:, None] + k < K) & (rn[None, :] < N)
        acc += tl.dot(tl.load(a, mask=a_mask, other=0.0),
                      tl.load(b, mask=b_mask, other=0.0))
        a += BLOCK_K * stride_ak
        b += BLOCK_K * stride_bk
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def vector_add(client, binary):
    n = 98432  # the tutorial's size: not a multiple of the block
    rng = np.random.default_rng(0)
    x = client.from_numpy(rng.random(n, dtype=np.float32))
    y = client.from_numpy(rng.random(n, dtype=np.float32))
    out = client.empty(n, np.float32)
    add = halogpu.triton.kernel(client, add_kernel, binary=binary)
    add[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](
        x, y, out, n, BLOCK_SIZE=1024).wait(30)
    expected = x.numpy(np.float32) + y.numpy(np.float32)
    if not np.array_equal(out.numpy(np.float32), expected):
        raise AssertionError("out != x + y")
    # A second launch with other buffers replays the memoized recording.
    x2 = client.from_numpy(np.full(n, 2, np.float32))
    launch = add[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](
        x2, x2, out, n, BLOCK_SIZE=1024)
    launch.wait(30)
    if launch.memo_hit is not None:
        raise AssertionError("the second launch recorded again")
    if not (out.numpy(np.float32) == 4).all():
        raise AssertionError("replayed out != 4")
    started = time.perf_counter()
    for _ in range(100):
        launch = add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    launch.wait(30)
    return f"{(time.perf_counter() - started) * 1e4:.1f} us per launch"


def vector_add_unaligned(client):
    """Pointers 4 bytes past 16-byte boundaries: compiled without
    tt.divisibility, recorded with unaligned_bindings (halod refuses such
    kernel arguments otherwise), and the driver's parameter list agreed
    with the PTX's when the kernel was loaded."""
    n = 4099
    rng = np.random.default_rng(3)
    x = client.from_numpy(rng.random(n + 1, dtype=np.float32))
    y = client.from_numpy(rng.random(n + 1, dtype=np.float32))
    out = client.from_numpy(np.zeros(n + 1, np.float32))
    add = halogpu.triton.kernel(client, add_kernel)
    plan = add.prepare(x.ref(4), y.ref(4), out.ref(4), n, BLOCK_SIZE=1024,
                       grid=(triton.cdiv(n, 1024),))
    if not plan.unaligned:
        raise AssertionError("the plan of offset-4 pointers is not unaligned")
    add[(triton.cdiv(n, 1024),)](x.ref(4), y.ref(4), out.ref(4), n,
                                 BLOCK_SIZE=1024).wait(30)
    got = out.numpy(np.float32)
    expected = x.numpy(np.float32)[1:] + y.numpy(np.float32)[1:]
    if got[0] != 0 or not np.array_equal(got[1:], expected):
        raise AssertionError("out[1:] != x[1:] + y[1:]")
    executable = add._executable(plan.compiled)
    try:
        checked = f"{len(executable.parameters(plan.compiled.name))} " \
            "parameters checked"
    except halogpu.UnimplementedError:
        checked = "parameters unknown to the driver"
    return (f"{n} elements at offset 4, {checked}, cache hit "
            f"{executable.cache_hit}")


def softmax(client):
    rows, cols = 333, 781
    data = np.random.default_rng(1).standard_normal(
        (rows, cols)).astype(np.float32)
    x = client.from_numpy(data)
    y = client.empty(rows * cols, np.float32)
    kernel = halogpu.triton.kernel(client, softmax_kernel)
    kernel[(rows,)](y, x, cols, cols, cols,
                    BLOCK_SIZE=triton.next_power_of_2(cols),
                    num_warps=8).wait(30)
    expected = np.exp(data - data.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    got = y.numpy(np.float32).reshape(rows, cols)
    if not np.allclose(got, expected, rtol=1e-5, atol=1e-6):
        raise AssertionError(
            f"max error {np.abs(got - expected).max()}")
    return f"{rows}x{cols}"


def matmul(client):
    m, n, k = 256, 192, 320
    rng = np.random.default_rng(2)
    a16 = rng.standard_normal((m, k)).astype(np.float16)
    b16 = rng.standard_normal((k, n)).astype(np.float16)
    a = client.from_numpy(a16)
    b = client.from_numpy(b16)
    c = client.empty(m * n, np.float32)
    kernel = halogpu.triton.kernel(client, matmul_kernel)
    blocks = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    launch = kernel[lambda meta: (triton.cdiv(m, meta["BLOCK_M"]),
                                  triton.cdiv(n, meta["BLOCK_N"]))](
        a, b, c, m, n, k, k, 1, n, 1, n, 1, **blocks)
    launch.wait(30)
    expected = a16.astype(np.float32) @ b16.astype(np.float32)
    got = c.numpy(np.float32).reshape(m, n)
    if not np.allclose(got, expected, rtol=1e-2, atol=1e-2):
        raise AssertionError(f"max error {np.abs(got - expected).max()}")
    plan = kernel.prepare(a, b, c, m, n, k, k, 1, n, 1, n, 1, grid=(1, 1),
                          **blocks)
    return f"{m}x{k} @ {k}x{n} fp16, {plan.compiled.shared} B shared"


def main():
    failed = 0
    with halogpu.connect(client_name="gpu-triton-check") as client:
        device = client.devices[0]
        print(f"device 0: {device.driver} {device.name} "
              f"sm_{device.compute_capability[0]}"
              f"{device.compute_capability[1]}, triton {triton.__version__}")
        checks = [("triton vector add (cubin)", lambda: vector_add(client,
                                                                   "cubin")),
                  ("triton vector add (ptx)", lambda: vector_add(client,
                                                                 "ptx")),
                  ("triton vector add (unaligned)",
                   lambda: vector_add_unaligned(client)),
                  ("triton softmax", lambda: softmax(client)),
                  ("triton matmul", lambda: matmul(client))]
        for name, check in checks:
            try:
                detail = check()
                print(f"PASS {name}: {detail}", flush=True)
            except Exception as error:  # one line each, then the next check
                failed += 1
                print(f"FAIL {name}: {type(error).__name__}: {error}",
                      flush=True)
                traceback.print_exc(file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
