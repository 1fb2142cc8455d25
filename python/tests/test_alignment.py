# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Kernel buffer arguments must be 16-byte aligned
(halogpu.DISPATCH_ALIGNMENT) unless the command buffer is recorded with
Client.record(unaligned_bindings=True): a slot bound at an unaligned
address is refused by execute() naming the binding, its slot and offset;
a direct reference at an unaligned offset by end(), naming the argument."""

import numpy as np
import pytest

import halogpu

N = 256


def host(client, count):
    buffer = client.create_buffer(count * 4, memory="host_visible")
    return buffer, buffer.numpy(np.float32)


def record_add(client, kernels, **flags):
    with client.record(bindings=3, **flags) as cb:
        cb.dispatch(kernels, "add", grid=N // 64, block=64,
                    args=[halogpu.slot(0), halogpu.slot(1), halogpu.slot(2),
                          np.uint32(N)])
    return cb


def test_unaligned_binding_refused_naming_the_slot(client, kernels):
    assert halogpu.DISPATCH_ALIGNMENT == 16
    a, va = host(client, N + 4)
    b, vb = host(client, N)
    c, vc = host(client, N)
    va[:] = np.arange(N + 4)
    vb[:] = 1.0
    done = client.create_semaphore()
    cb = record_add(client, kernels)
    assert not cb.unaligned_bindings and not cb.one_shot
    # Offset 4 into a: slot 0 bound at an address 4 past a 16-byte one.
    with pytest.raises(halogpu.InvalidArgumentError,
                       match=r"binding 0: offset 4 is not 16-byte aligned, "
                       r"as slot 0 needs.*record\(unaligned_bindings=True\) "
                       r"\(HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS\)"):
        client.execute(cb, bindings=[(a, 4), b, c], signal=[(done, 1)])
    # Nothing ran; an aligned offset runs.
    assert done.value == 0
    client.execute(cb, bindings=[(a, 16), b, c], signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert np.array_equal(vc, np.arange(4, N + 4, dtype=np.float32) + 1)


def test_unaligned_bindings_flag_accepts_them(client, kernels):
    a, va = host(client, N + 4)
    b, vb = host(client, N)
    c, vc = host(client, N)
    va[:] = np.arange(N + 4)
    vb[:] = 2.0
    done = client.create_semaphore()
    aligned = record_add(client, kernels)
    cb = record_add(client, kernels, unaligned_bindings=True)
    assert cb.unaligned_bindings and not cb.one_shot
    # The flag is part of the daemon's memo key: not the aligned recording.
    assert cb.memo_hit is False
    client.execute(cb, bindings=[(a, 4), b, c], signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert np.array_equal(vc, np.arange(1, N + 1, dtype=np.float32) + 2)
    assert record_add(client, kernels, unaligned_bindings=True).memo_hit
    aligned.release()
    one_shot = client.record(one_shot=True, unaligned_bindings=True)
    assert one_shot.one_shot and one_shot.unaligned_bindings
    one_shot.release()


def test_unaligned_direct_reference_refused_at_end(client, kernels):
    a, _ = host(client, N + 4)
    b, _ = host(client, N)
    for unaligned in (False, True):
        cb = client.record(unaligned_bindings=unaligned)
        cb.dispatch(kernels, "add", grid=1, block=64,
                    args=[a.ref(4), b, b, np.uint32(N)])
        if unaligned:
            cb.end()
            assert cb.ended
        else:
            with pytest.raises(halogpu.InvalidArgumentError,
                               match=r"command 0 \(dispatch\): argument 0.*"
                               "offset 4"):
                cb.end()
        cb.release()
