# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""halogpu.triton launches, run for real without Triton or a GPU: Triton's
compiler is stubbed (halogpu.triton.compile returns a Compiled that names a
kernel of kernels.c / kernels.cu) and Kernel._executable returns the test
kernels, so Kernel.run's recording, binding, completion and scratch
handling run against halod's driver. Every launch completes on its own
semaphore value: halo queues are unordered, so a later launch can finish
first, and one failed launch must not fail the others."""

import inspect
import threading
import time
import types

import numpy as np
import pytest

import halogpu
import halogpu.triton as halotriton

N = 1024
BLOCK = 256  # 32 * num_warps (8) threads: the workgroup size of a launch


def _jit(function):
    """What Kernel reads of a @triton.jit function."""
    return types.SimpleNamespace(
        fn=function, __name__=function.__name__,
        cache_key=function.__name__,
        params=[types.SimpleNamespace(name=name, is_constexpr=False)
                for name in inspect.signature(function).parameters])


def add(x_ptr, y_ptr, out_ptr, n):  # kernels.c's add: out = x + y
    pass


def scratch_address(out_ptr):  # kernels.c's scratch_address
    pass


@pytest.fixture
def stubbed(monkeypatch, kernels):
    """Triton stubbed out: a Kernel of a function above launches the
    kernels.c entry of the same name."""
    compiled = {
        "add": halotriton.Compiled(
            name="add", cubin=b"", ptx="", num_warps=8, shared=0,
            parameters=[8, 8, 8, 4], global_scratch=0, num_ctas=1,
            metadata=types.SimpleNamespace(hash="add")),
        # Triton's two hidden parameters (global and profile scratch)
        # follow out_ptr; 16 bytes of global scratch per program.
        "scratch_address": halotriton.Compiled(
            name="scratch_address", cubin=b"", ptx="", num_warps=8, shared=0,
            parameters=[8, 8, 8], global_scratch=16, num_ctas=1,
            metadata=types.SimpleNamespace(hash="scratch_address")),
    }
    monkeypatch.setattr(halotriton, "_triton",
                        lambda: types.ModuleType("triton"))
    monkeypatch.setattr(halotriton, "compile",
                        lambda fn, *args, **kwargs: compiled[fn.__name__])
    monkeypatch.setattr(halotriton.Kernel, "_executable",
                        lambda self, compiled: kernels)

    def make(client, function):
        return halotriton.kernel(client, _jit(function), arch=90)
    return make


def _operands(client):
    x = client.from_numpy(np.ones(N, np.float32))
    y = client.from_numpy(np.full(N, 2, np.float32))
    return x, y


def _zeros(client):
    out = client.empty(N, np.float32)
    out.numpy(np.float32)[:] = 0
    return out


def test_launch_waits_for_its_own_kernel(client, stubbed):
    """A launch held back by wait= is not done when a later one is: its
    wait() times out until the gate opens, then sees its results."""
    kernel = stubbed(client, add)
    x, y = _operands(client)
    out1, out2 = _zeros(client), _zeros(client)
    gate = client.create_semaphore()
    first = kernel[(N // BLOCK,)](x, y, out1, N, wait=[(gate, 1)])
    second = kernel[(N // BLOCK,)](x, y, out2, N)
    second.wait(timeout=10)
    assert (out2.numpy(np.float32) == 3).all()
    with pytest.raises(halogpu.DeadlineExceededError):
        first.wait(timeout=0.2)
    assert (out1.numpy(np.float32) == 0).all()
    gate.signal(1)
    first.wait(timeout=10)
    assert (out1.numpy(np.float32) == 3).all()


def test_failed_launch_fails_only_itself(client, stubbed):
    """A launch whose wait fails fails its own Launch; the kernel's other
    launches, before and after, still run and complete."""
    kernel = stubbed(client, add)
    x, y = _operands(client)
    outs = [_zeros(client) for _ in range(3)]
    gate = client.create_semaphore()
    doomed = kernel[(N // BLOCK,)](x, y, outs[0], N, wait=[(gate, 1)])
    before = kernel[(N // BLOCK,)](x, y, outs[1], N)
    gate.fail(halogpu.StatusCode.DATA_LOSS, "the producer failed")
    with pytest.raises(halogpu.DataLossError, match="the producer failed"):
        doomed.wait(timeout=10)
    before.wait(timeout=10)
    after = kernel[(N // BLOCK,)](x, y, outs[2], N)
    after.wait(timeout=10)
    assert (outs[0].numpy(np.float32) == 0).all()
    assert (outs[1].numpy(np.float32) == 3).all()
    assert (outs[2].numpy(np.float32) == 3).all()
    # The failed launch's semaphore is never signalled again.
    assert after.semaphore is not doomed.semaphore


def test_completed_launches_reuse_their_semaphore(client, stubbed):
    """Launches one after another signal one semaphore with 1, 2, 3...;
    a launch still in flight makes the next take another."""
    kernel = stubbed(client, add)
    x, y = _operands(client)
    out = _zeros(client)
    launches = []
    for _ in range(3):
        launches.append(kernel[(N // BLOCK,)](x, y, out, N))
        launches[-1].wait(timeout=10)
    assert len({id(launch.semaphore) for launch in launches}) == 1
    assert [launch.value for launch in launches] == [1, 2, 3]
    gate = client.create_semaphore()
    held = kernel[(N // BLOCK,)](x, y, out, N, wait=[(gate, 1)])
    free = kernel[(N // BLOCK,)](x, y, out, N)
    assert free.semaphore is not held.semaphore
    free.wait(timeout=10)
    gate.signal(1)
    held.wait(timeout=10)


def test_launches_in_flight_are_capped(client, stubbed, monkeypatch):
    """At most MAX_LAUNCHES_IN_FLIGHT launches of one Kernel are pending;
    the next waits until one of them completes."""
    monkeypatch.setattr(halotriton, "MAX_LAUNCHES_IN_FLIGHT", 3)
    kernel = stubbed(client, add)
    x, y = _operands(client)
    out = _zeros(client)
    gates = [client.create_semaphore() for _ in range(3)]
    held = [kernel[(N // BLOCK,)](x, y, out, N, wait=[(gate, 1)])
            for gate in gates]
    launched = []
    thread = threading.Thread(target=lambda: launched.append(
        kernel[(N // BLOCK,)](x, y, out, N)))
    thread.start()
    time.sleep(0.2)
    assert not launched  # every semaphore is in use
    gates[1].signal(1)
    thread.join(10)
    assert launched and launched[0].semaphore is held[1].semaphore
    launched[0].wait(timeout=10)
    for gate in (gates[0], gates[2]):
        gate.signal(1)
    for launch in held:
        launch.wait(timeout=10)


def test_concurrent_launches_get_their_own_scratch(client, stubbed):
    """Global scratch memory is per launch in flight: two launches running
    at once get two buffers (the kernel writes the address it was given);
    a later launch reuses a completed launch's buffer."""
    kernel = stubbed(client, scratch_address)

    def out():
        buffer = client.empty(2, np.uint64)
        buffer.numpy(np.uint64)[:] = 0
        return buffer

    outs = [out() for _ in range(3)]
    gate = client.create_semaphore()
    first = kernel[(1,)](outs[0], wait=[(gate, 1)])
    second = kernel[(1,)](outs[1])
    second.wait(timeout=10)
    gate.signal(1)
    first.wait(timeout=10)
    third = kernel[(1,)](outs[2])
    third.wait(timeout=10)
    addresses = [int(o.numpy(np.uint64)[0]) for o in outs]
    assert 0 not in addresses, addresses
    assert addresses[0] != addresses[1]
    assert addresses[2] in addresses[:2]


def test_non_native_byte_order_is_refused(client, stubbed):
    """A buffer whose dtype is in the other byte order is no Triton
    pointer type (the kernel would read its numbers wrong)."""
    other = ">f4" if np.little_endian else "<f4"
    with pytest.raises(TypeError, match="not in native byte order"):
        halotriton.triton_type(np.dtype(other))
    with pytest.raises(TypeError, match="not in native byte order"):
        halotriton.triton_type(other)
    assert halotriton.triton_type(np.dtype("=f4")) == "fp32"
    kernel = stubbed(client, add)
    x, y = _operands(client)
    out = client.empty(N, np.float32)
    out.dtype = other  # kept as assigned (empty() would make it native)
    with pytest.raises(TypeError, match="not in native byte order"):
        kernel[(N // BLOCK,)](x, y, out, N)


def test_bfloat16_buffers_by_name(client, stubbed):
    """numpy has no bfloat16: a buffer made with Client.empty(n,
    "bfloat16") (no ml_dtypes needed) is a pointer to bf16, as
    triton_type() names the type by its name."""
    assert halotriton.triton_type("bfloat16") == "bf16"
    assert halotriton.triton_type("float32") == "fp32"
    with pytest.raises(TypeError, match="no Triton equivalent"):
        halotriton.triton_type("complex64")
    kernel = stubbed(client, add)
    x, y, out = (client.empty(N, "bfloat16") for _ in range(3))
    assert x.dtype == "bfloat16" and x.size == 2 * N
    plan = kernel.prepare(x, y, out, N, grid=(N // BLOCK,))
    assert [plan.signature[name] for name in ("x_ptr", "y_ptr", "out_ptr")] \
        == ["*bf16"] * 3


def test_kernel_on_a_device_the_daemon_lacks(client, stubbed):
    """A device ordinal past the daemon's devices is named, as
    Client.create_buffer names it, not an IndexError of a tuple."""
    count = len(client.devices)
    with pytest.raises(halogpu.OutOfRangeError,
                       match=rf"device {count} does not exist "
                       rf"\(the daemon has {count}\)"):
        halotriton.kernel(client, _jit(add), device=count)


def scaled(x_ptr, n, scale, flag):  # annotated as Triton allows below
    pass


def test_annotated_parameters_keep_their_type(client, monkeypatch):
    """As Triton's launcher does: a parameter annotated with a type
    (x_ptr: "*fp32", n: tl.int64, scale: tl.float16, flag: tl.int1) is
    compiled and passed as that type, whatever its value's own type (an
    int64 count given as 1000 is no i32: its kernel does 64-bit index
    arithmetic)."""
    jit = _jit(scaled)
    for param, kind in zip(jit.params, ["*fp32", "i64", "fp16", "u1"]):
        param.annotation_type = kind
    signatures = []

    def compile(fn, signature, *args, **kwargs):
        signatures.append(dict(signature))
        return halotriton.Compiled(
            name="scaled", cubin=b"", ptx="", num_warps=4, shared=0,
            parameters=[8, 8, 2, 1], global_scratch=0, num_ctas=1,
            metadata=types.SimpleNamespace(hash="scaled"))

    monkeypatch.setattr(halotriton, "_triton",
                        lambda: types.ModuleType("triton"))
    monkeypatch.setattr(halotriton, "compile", compile)
    kernel = halotriton.kernel(client, jit, arch=90)
    raw = client.create_buffer(64, memory="host_visible")  # no dtype
    plan = kernel.prepare(raw, 1000, 0.5, True, grid=(1,))
    assert signatures[-1] == {"x_ptr": "*fp32", "n": "i64", "scale": "fp16",
                              "flag": "u1"}
    assert plan.args[1:] == [(1000).to_bytes(8, "little"),
                             np.float16(0.5).tobytes(), b"\x01"]
    with pytest.raises(TypeError, match="argument x_ptr.*\\*fp32"):
        kernel.prepare(3, 1000, 0.5, True, grid=(1,))
    with pytest.raises(TypeError, match="argument n.*i64"):
        kernel.prepare(raw, raw, 0.5, True, grid=(1,))
    with pytest.raises(TypeError, match="argument n.*i64"):
        kernel.prepare(raw, 1.5, 0.5, True, grid=(1,))
    with pytest.raises(ValueError, match="argument n.*i64"):
        kernel.prepare(raw, 2**63, 0.5, True, grid=(1,))
