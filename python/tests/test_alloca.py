# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Queue-ordered alloca and dealloca (Queue.alloca, Queue.dealloca) on a real
halod: over the submission ring by default; HALO_RING=0 in the environment
runs the same tests over the socket."""

import numpy as np
import pytest

import halogpu

N = 1024


def add(client, kernels):
    with client.record(bindings=3) as cb:
        cb.dispatch(kernels, "add", grid=(N + 63) // 64, block=64,
                    args=[halogpu.slot(0), halogpu.slot(1), halogpu.slot(2),
                          np.uint32(N)])
    return cb


@pytest.mark.parametrize("memory", ["device", "host_visible"])
def test_alloca_execute_dealloca(client, kernels, memory):
    queue = client.create_queue()
    a = client.create_buffer(4 * N, memory="host_visible")
    b = client.create_buffer(4 * N, memory="host_visible")
    a.numpy(np.float32)[:] = np.arange(N)
    b.numpy(np.float32)[:] = 1.0
    s = client.create_semaphore()
    c = queue.alloca(4 * N, memory=memory, signal=[(s, 1)])
    assert isinstance(c, halogpu.Buffer) and c.size == 4 * N
    assert c.memory_type == halogpu.MemoryType[memory.upper()]
    assert not c.deallocated
    cb = add(client, kernels)
    queue.execute(cb, bindings=[a, b, c], wait=[(s, 1)], signal=[(s, 2)])
    s.wait(2, timeout=10)
    result = np.frombuffer(c.read(), np.float32)
    assert np.array_equal(result, np.arange(N) + 1.0)
    queue.dealloca(c, wait=[(s, 2)], signal=[(s, 3)])
    s.wait(3, timeout=10)
    assert c.deallocated
    with pytest.raises(halogpu.NotFoundError, match=f"0x{c.handle:x}"):
        c.read(4)
    with pytest.raises(halogpu.NotFoundError, match="deallocated"):
        queue.dealloca(c)
    with pytest.raises(halogpu.NotFoundError):
        queue.execute(cb, bindings=[a, b, c])
    # Recording it is a use too: refused at once, naming the dealloca (not
    # at end(), as a stale handle).
    recording = client.record()
    for record in (lambda: recording.fill(c, np.uint32(1)),
                   lambda: recording.copy(a, c.ref(0, 16)),
                   lambda: recording.update(b"x" * 4, c),
                   lambda: recording.dispatch(kernels, "add", grid=1,
                                              args=[a, b, c, np.uint32(N)])):
        with pytest.raises(halogpu.NotFoundError,
                           match=f"0x{c.handle:x} was deallocated"):
            record()
    recording.end()  # nothing of it was recorded
    c.release()  # local: the daemon's handle went with the dealloca


def test_alloca_waits_and_failures(client):
    queue = client.create_queue()
    gate = client.create_semaphore()
    s = client.create_semaphore()
    c = queue.alloca(256, wait=[(gate, 1)], signal=[(s, 1)])
    with pytest.raises(halogpu.DeadlineExceededError):
        s.wait(1, timeout=0.02)
    gate.signal(1)
    s.wait(1, timeout=10)
    # A failed wait fails the signals with the cause.
    d = client.create_semaphore()
    queue.dealloca(c, wait=[(gate, 2)], signal=[(d, 1)])
    gate.fail(halogpu.StatusCode.DATA_LOSS, "upstream broke")
    with pytest.raises(halogpu.DataLossError, match="upstream broke"):
        d.wait(1, timeout=10)


def test_alloca_errors(client, other_client):
    queue = client.create_queue()
    s = client.create_semaphore()
    with pytest.raises(ValueError):
        queue.alloca(0)
    with pytest.raises(ValueError, match="memory"):
        queue.alloca(64, memory="shared")
    with pytest.raises(halogpu.ResourceExhaustedError,
                       match="session-device-bytes"):
        queue.alloca(2**40)
    s.signal(5)
    with pytest.raises(halogpu.InvalidArgumentError, match="signal 0"):
        queue.alloca(64, signal=[(s, 5)])
    exported = client.create_buffer(64, exportable=True)
    with pytest.raises(halogpu.FailedPreconditionError, match="exportable"):
        queue.dealloca(exported)
    foreign = other_client.create_buffer(64)
    with pytest.raises(ValueError, match="another client"):
        queue.dealloca(foreign)
    # A failed dealloca leaves the buffer usable.
    plain = client.create_buffer(64)
    with pytest.raises(halogpu.InvalidArgumentError, match="signal 0"):
        queue.dealloca(plain, signal=[(s, 5)])
    plain.write(b"\x01" * 64)
    assert plain.read(4) == b"\x01" * 4
    queue.dealloca(plain)
    assert plain.deallocated


def test_dealloca_warns_of_live_views(client):
    """A view made before Queue.dealloca() would show the bytes of whatever
    buffer the daemon places there next: dealloca warns while views are
    alive (and not when they are gone)."""
    import gc
    import warnings

    queue = client.create_queue()
    s = client.create_semaphore()
    b = queue.alloca(4096, memory="host_visible", signal=[(s, 1)])
    s.wait(1, timeout=10)
    view = b.numpy()
    with pytest.warns(RuntimeWarning,
                      match=r"1 view\(s\) of buffer 0x[0-9a-f]+ .*release\(\)"):
        queue.dealloca(b, signal=[(s, 2)])
    s.wait(2, timeout=10)
    del view
    c = queue.alloca(4096, memory="host_visible", signal=[(s, 3)])
    s.wait(3, timeout=10)
    c.numpy()[:] = 1  # a view made and dropped
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        queue.dealloca(c, signal=[(s, 4)])
    s.wait(4, timeout=10)


def test_one_pair_instead_of_a_list_says_so(client):
    queue = client.create_queue()
    s = client.create_semaphore()
    with pytest.raises(TypeError, match=r"signal\[0\] must be a \(Semaphore, "
                       r"value\) pair: a list of pairs, "
                       r"signal=\[\(semaphore, value\)\], not one pair"):
        queue.alloca(256, signal=(s, 1))
