# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Executables, command buffers and execution on the CPU driver, with the
kernels of tests/kernels.c."""

import ctypes
import gc
import struct
import threading

import numpy as np
import pytest

import halogpu

N = 1000


def host(client, count, dtype=np.float32):
    buffer = client.create_buffer(count * np.dtype(dtype).itemsize,
                                  memory="host_visible")
    return buffer, buffer.numpy(dtype)


def test_load_shared_object(client, kernels_so, kernels):
    assert isinstance(kernels, halogpu.Executable)
    assert kernels.format == halogpu.ExecutableFormat.ELF
    assert kernels.device == 0
    assert len(kernels.content_hash) == 64
    # Content-hashed: the same bytes are the same executable.
    with open(kernels_so, "rb") as file:
        again = client.load_executable(file.read(), "elf")
    assert again.content_hash == kernels.content_hash
    from_file = client.load_executable_file(kernels_so)
    assert from_file.content_hash == kernels.content_hash


def test_load_errors(client, tmp_path):
    with pytest.raises(halogpu.InvalidArgumentError):
        client.load_executable(b"not an ELF file", "elf")
    with pytest.raises(halogpu.UnimplementedError):
        client.load_ptx(".version 8.0\n.target sm_90\n")
    with pytest.raises(halogpu.UnimplementedError):
        client.load_cuda_source("__global__ void k() {}", options=["-DX=1"])
    with pytest.raises(ValueError, match="extension"):
        client.load_executable_file(tmp_path / "kernel.bin")
    with pytest.raises(halogpu.HaloError, match="no_such.so"):
        client.load_executable_file(tmp_path / "no_such.so")
    with pytest.raises(TypeError):
        client.load_executable("text", "cubin")
    with pytest.raises(ValueError):
        client.load_executable(b"", "elf")
    with pytest.raises(ValueError):
        client.load_executable(b"x", "wasm")
    with pytest.raises(TypeError):
        client.load_cuda_source("x", options="-O3")


def test_vector_add_through_slots(client, kernels):
    a, va = host(client, N)
    b, vb = host(client, N)
    c, vc = host(client, N)
    va[:] = np.arange(N)
    vb[:] = 2 * np.arange(N)
    done = client.create_semaphore()
    with client.record(bindings=3) as cb:
        cb.dispatch(kernels, "add", grid=(N + 63) // 64, block=64,
                    args=[halogpu.slot(0), halogpu.slot(1), halogpu.slot(2),
                          np.uint32(N)])
    assert cb.ended and cb.memo_hit is False
    client.execute(cb, bindings=[a, b, c], signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert np.array_equal(vc, 3 * np.arange(N, dtype=np.float32))
    # Reusable: again with another table (c = a + c).
    client.execute(cb, bindings=[a, c, b], signal=[(done, 2)])
    done.wait(2, timeout=10)
    assert np.array_equal(vb, 4 * np.arange(N, dtype=np.float32))


def test_memo_hit_for_identical_recording(client, kernels):
    def record():
        with client.record(bindings=3) as cb:
            cb.dispatch(kernels, "add", grid=4, block=64,
                        args=[halogpu.slot(0), halogpu.slot(1),
                              halogpu.slot(2),
                              np.uint32(256)])
        return cb

    first = record()
    assert record().memo_hit is True
    first.release()


def test_direct_references_and_constants(client, kernels):
    x, vx = host(client, N)
    y, vy = host(client, N)
    vx[:] = 1.0
    vy[:] = np.arange(N)
    done = client.create_semaphore()
    with client.record() as cb:
        cb.dispatch(kernels, "saxpy", grid=(N + 127) // 128, block=128,
                    args=[ctypes.c_float(2.0), x, y.ref(),
                          halogpu.constant(N, "uint64")])
    client.execute(cb, signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert np.array_equal(vy, np.arange(N) + 2.0)


def test_binding_table_argument(client, kernels):
    a, va = host(client, 64)
    b, vb = host(client, 64)
    c, vc = host(client, 64)
    va[:] = 1
    vb[:] = 2
    done = client.create_semaphore()
    with client.record(bindings=3) as cb:
        cb.dispatch(kernels, "add_table", grid=1, block=64,
                    args=[halogpu.BINDING_TABLE, np.uint32(64)])
    client.execute(cb, bindings=[a, b, c], signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert (vc == 3).all()


def test_binding_offsets(client, kernels):
    big, view = host(client, 3 * 256)
    view[:256] = 1
    view[256:512] = 5
    done = client.create_semaphore()
    with client.record(bindings=3) as cb:
        cb.dispatch(kernels, "add", grid=4, block=64,
                    args=[halogpu.slot(0), halogpu.slot(1), halogpu.slot(2, 0),
                          np.uint32(256)])
    client.execute(cb, bindings=[big.ref(0, 1024), (big, 1024, 1024),
                                 (big, 2048)], signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert (view[512:] == 6).all()


def test_fill_update_copy_on_device_memory(client):
    device = client.create_buffer(64)
    out = client.create_buffer(64, memory="host_visible")
    done = client.create_semaphore()
    with client.record(one_shot=True) as cb:
        cb.fill(device, np.uint32(0xAABBCCDD))
        cb.barrier()
        cb.update(b"halo", device.ref(8, 4))
        cb.barrier()
        cb.copy(device, out)
    assert cb.one_shot
    client.execute(cb, signal=[(done, 1)])
    done.wait(1, timeout=10)
    words = out.numpy(np.uint32)
    assert words[0] == 0xAABBCCDD and words[3] == 0xAABBCCDD
    assert out.read(4, offset=8) == b"halo"
    assert device.read(4, offset=8) == b"halo"


def test_indirect_fill_and_copy(client):
    source = client.create_buffer(32, memory="host_visible")
    target = client.create_buffer(32, memory="host_visible")
    source.write(bytes(range(32)))
    done = client.create_semaphore()
    with client.record(bindings=2) as cb:
        cb.copy(halogpu.slot(0, 0, 16), halogpu.slot(1, 16))
        cb.fill(halogpu.slot(1, 0, 16), b"\x07")
    client.execute(cb, bindings=[source, target], signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert target.read() == b"\x07" * 16 + bytes(range(16))


def test_slot_references_without_a_length(client):
    """A slot without a length (SlotRef): a copy takes the other side's,
    a direct reference's rest of its buffer where neither has one; two
    such slots are refused, and so is a fill of one; an update writes the
    data's length."""
    source = client.create_buffer(64, memory="host_visible")
    target = client.create_buffer(64, memory="host_visible")
    source.write(bytes(range(64)))
    done = client.create_semaphore()
    with client.record(bindings=2) as cb:
        cb.copy(source.ref(48), halogpu.slot(0))  # 16 bytes to slot 0
        cb.copy(halogpu.slot(1, 0, 8), halogpu.slot(0, 16))  # 8 bytes
        cb.update(b"halo", halogpu.slot(0, 24))
    client.execute(cb, bindings=[target, source], signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert target.read() == bytes(range(48, 64)) + bytes(range(8)) + \
        b"halo" + bytes(36)
    for record, side in (
            (lambda cb: cb.copy(halogpu.slot(0), halogpu.slot(1)), "source"),
            (lambda cb: cb.fill(halogpu.slot(0), b"\0"), "target")):
        with pytest.raises(halogpu.InvalidArgumentError,
                           match=f"{side}: an indirect reference \\(slot 0\\) "
                                 "needs an explicit length"):
            with client.record(bindings=2) as cb:
                record(cb)


def test_dispatch_indirect(client, kernels):
    counts = client.create_buffer(12, memory="host_visible")
    counts.numpy(np.uint32)[:] = (2, 3, 1)
    out, view = host(client, 3 * 6, np.uint32)
    done = client.create_semaphore()
    with client.record() as cb:
        cb.dispatch_indirect(kernels, "counts", workgroup_count=counts,
                             args=[out])
    client.execute(cb, signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert (view.reshape(6, 3) == (2, 3, 1)).all()


def test_zero_grid_dispatch_is_a_noop(client, kernels):
    a, va = host(client, 64)
    b, vb = host(client, 64)
    c, vc = host(client, 64)
    untouched, vu = host(client, 64)
    va[:] = np.arange(64)
    vb[:] = 2 * np.arange(64)
    done = client.create_semaphore()
    with client.record(bindings=1) as cb:
        cb.dispatch(kernels, "add", grid=(1, 0), block=64,
                    args=[a, b, halogpu.slot(0), np.uint32(64)])
        cb.barrier()
        cb.dispatch(kernels, "add", grid=1, block=64,
                    args=[a, b, c, np.uint32(64)])
    # The no-op's slot is required like any other.
    with pytest.raises(halogpu.InvalidArgumentError, match="slot 0"):
        client.execute(cb, signal=[(done, 1)])
    client.execute(cb, bindings=[untouched], signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert np.array_equal(vc, 3 * np.arange(64, dtype=np.float32))
    assert (vu == 0).all()
    # Nothing but a no-op: the execution still signals.
    with client.record(one_shot=True) as only:
        only.dispatch(kernels, "add", grid=(0, 0, 0), block=64,
                      args=[a, b, untouched, np.uint32(64)])
    client.execute(only, signal=[(done, 2)])
    done.wait(2, timeout=10)
    assert (vu == 0).all()


def test_queue(client, kernels):
    queue = client.create_queue(priority=1)
    assert queue.device == 0 and queue.priority == 1
    a, va = host(client, 64)
    va[:] = 1
    done = client.create_semaphore()
    with client.record(bindings=3) as cb:
        cb.dispatch(kernels, "add", grid=1, block=64,
                    args=[halogpu.slot(0), halogpu.slot(1), halogpu.slot(2),
                          np.uint32(64)])
    queue.execute(cb, bindings=[a, a, a], signal=[(done, 1)])
    done.wait(1, timeout=10)
    client.execute(cb, bindings=[a, a, a], signal=[(done, 2)], queue=queue)
    done.wait(2, timeout=10)
    assert (va == 4).all()


def test_waits_order_submissions(client, kernels):
    a, va = host(client, 64)
    va[:] = 1
    start = client.create_semaphore()
    done = client.create_semaphore()
    with client.record(bindings=3) as cb:
        cb.dispatch(kernels, "add", grid=1, block=64,
                    args=[halogpu.slot(0), halogpu.slot(1), halogpu.slot(2),
                          np.uint32(64)])
    # Submitted before its wait is met: runs only after start reaches 1.
    client.execute(cb, bindings=[a, a, a], wait=[(start, 1)],
                   signal=[(done, 1)])
    with pytest.raises(halogpu.DeadlineExceededError):
        done.wait(1, timeout=0.1)
    assert (va == 1).all()
    start.signal(1)
    done.wait(1, timeout=10)
    assert (va == 2).all()


def test_failed_wait_fails_the_signals(client, kernels):
    a, _ = host(client, 64)
    start = client.create_semaphore()
    done = client.create_semaphore()
    with client.record(bindings=3) as cb:
        cb.dispatch(kernels, "add", grid=1, block=64,
                    args=[halogpu.slot(0), halogpu.slot(1), halogpu.slot(2),
                          np.uint32(64)])
    client.execute(cb, bindings=[a, a, a], wait=[(start, 1)],
                   signal=[(done, 1)])
    start.fail("data_loss", "upstream stage lost its input")
    with pytest.raises(halogpu.DataLossError, match="upstream stage"):
        done.wait(1, timeout=10)


def test_record_errors_name_command_and_argument(client, kernels):
    buffer = client.create_buffer(64)
    cb = client.record(bindings=1)
    cb.barrier()
    with pytest.raises(halogpu.InvalidArgumentError, match="command 1"):
        cb.fill(buffer.ref(1, 8), np.uint32(0))  # offset not a multiple
    with pytest.raises(halogpu.OutOfRangeError, match="command 1"):
        cb.update(b"x" * 8, buffer.ref(60))
    with pytest.raises(ValueError, match="slot 1"):
        cb.copy(halogpu.slot(1, 0, 4), buffer)
    cb.release()


def test_daemon_validation_at_end(client, kernels):
    cb = client.record()
    cb.dispatch(kernels, "no_such_entry", grid=1, args=[])
    with pytest.raises(halogpu.HaloError, match="no_such_entry"):
        cb.end()
    assert not cb.ended
    # After a failed end() the command buffer can only be released.
    with pytest.raises(halogpu.FailedPreconditionError):
        cb.barrier()
    with pytest.raises(halogpu.FailedPreconditionError):
        client.execute(cb)
    cb.release()


def test_python_checks_before_any_call(client, kernels):
    buffer = client.create_buffer(64)
    cb = client.record(bindings=2)
    with pytest.raises(TypeError, match="numpy.uint32"):
        cb.dispatch(kernels, "add", grid=1, args=[64])
    # A float's hint names float types (numpy.uint32(1.5) would truncate,
    # ctypes.c_uint32(1.5) raise).
    with pytest.raises(TypeError, match=r"argument 0: a plain float .*"
                       r"numpy\.float32\(1\.5\), ctypes\.c_float\(1\.5\) "
                       r"or halogpu\.constant\(1\.5, 'float32'\)") as raised:
        cb.dispatch(kernels, "add", grid=1, args=[1.5])
    assert "uint32" not in str(raised.value)
    with pytest.raises(TypeError):
        cb.dispatch(kernels, "add", grid=1, args=["text"])
    with pytest.raises(TypeError):
        cb.dispatch("kernels", "add", grid=1)
    with pytest.raises(TypeError):
        cb.dispatch(kernels, None, grid=1)
    with pytest.raises(ValueError):
        cb.dispatch(kernels, "add", grid=(1, 1, 1, 1))
    with pytest.raises(ValueError):
        cb.dispatch(kernels, "add", grid=-1)
    with pytest.raises(ValueError):
        cb.dispatch(kernels, "add", grid=1, block=(64, 0))
    with pytest.raises(ValueError):
        cb.dispatch(kernels, "add", grid=1, args=[b"x" * 4097])
    with pytest.raises(ValueError):
        cb.dispatch(kernels, "add", grid=1, args=[np.uint8(0)] * 65)
    with pytest.raises(ValueError):
        cb.fill(buffer, b"abc")
    with pytest.raises(ValueError):
        cb.update(b"", buffer)
    with pytest.raises(TypeError):
        cb.copy(buffer, 3)
    with pytest.raises(ValueError):
        halogpu.slot(4096)
    with pytest.raises(ValueError):
        client.record(bindings=4097)
    cb.end()
    with pytest.raises(ValueError, match="binding capacity"):
        client.execute(cb, bindings=[buffer, buffer, buffer])
    with pytest.raises(TypeError):
        client.execute(cb, bindings=buffer)
    with pytest.raises(TypeError):
        client.execute(cb, bindings=["buffer"])
    with pytest.raises(TypeError):
        client.execute(cb, signal=[buffer])
    with pytest.raises(ValueError):
        client.execute(cb, signal=[(client.create_semaphore(), -1)])
    with pytest.raises(TypeError):
        client.execute("cb")


def test_constant_types():
    """halogpu.constant() packs a value as a type name or a struct format;
    an unknown type is a ValueError listing the names (struct said only
    "bad char in struct format")."""
    assert halogpu.constant(1.5, "float32").data == struct.pack("=f", 1.5)
    assert halogpu.constant(7, "u16").data == struct.pack("=H", 7)
    assert halogpu.constant(7, np.int64).data == struct.pack("=q", 7)
    assert halogpu.constant((1, 2), "<2I").data == struct.pack("<2I", 1, 2)
    for dtype in ("float", float, "uint33"):
        with pytest.raises(ValueError, match=r"constant type '\w+' is "
                           r"neither a type name \(int8, uint8, .*float32, "
                           r"float64, bool, bfloat16; i8, .*f64, bf16 for "
                           r"short\) nor a "
                           r"struct format"):
            halogpu.constant(1, dtype)
    with pytest.raises(ValueError, match="cannot pack 300 as 'uint8'"):
        halogpu.constant(300, "uint8")


def test_constant_value_errors():
    """A value its type cannot hold is a ValueError, as documented (a float
    too large for float16 was struct's OverflowError); an array (not a
    scalar) is a TypeError saying that a constant packs scalars (it was
    numpy's "only integer scalar arrays can be converted to a scalar
    index")."""
    for dtype in ("float16", "f32", "bf16"):
        with pytest.raises(ValueError, match=rf"cannot pack 1e\+?0?39 as "
                           rf"'{dtype}'.*too large"):
            halogpu.constant(1e39, dtype)
    with pytest.raises(ValueError, match=r"cannot pack 1000000.0 as "
                       r"'float16'"):
        halogpu.constant(1e6, "float16")
    for value, dtype in ((np.arange(3), "uint32"), (np.arange(3), "bf16"),
                         (np.arange(3), "3I"), ((np.arange(2), 1), "3I"),
                         ([np.ones(1)], "float32")):
        with pytest.raises(TypeError, match=r"packs scalars .* not an array "
                           r"of shape \(\d,\): pass array.item\(\)"):
            halogpu.constant(value, dtype)
    # Scalars of numpy (0-d arrays too) are scalars.
    assert halogpu.constant(np.array(5), "uint32").data == \
        struct.pack("=I", 5)
    assert halogpu.constant((np.uint8(1), np.float32(2)), "Bf").data == \
        struct.pack("=Bf", 1, 2)


def test_execute_errors_from_libhalo(client, kernels):
    small = client.create_buffer(16)
    with client.record(bindings=3) as cb:
        cb.dispatch(kernels, "add", grid=1, block=64,
                    args=[halogpu.slot(0, 0, 256), halogpu.slot(1),
                          halogpu.slot(2),
                          np.uint32(64)])
    with pytest.raises(halogpu.InvalidArgumentError, match="binding 0"):
        client.execute(cb, bindings=[small, small, small])
    semaphore = client.create_semaphore(5)
    with pytest.raises(halogpu.InvalidArgumentError):
        client.execute(cb, bindings=[small] * 3, signal=[(semaphore, 5)])
    recording = client.record()
    with pytest.raises(halogpu.FailedPreconditionError):
        client.execute(recording)


def test_objects_of_another_client_are_refused(client, other_client,
                                               kernels):
    foreign = other_client.create_buffer(64)
    cb = client.record(bindings=1)
    with pytest.raises(ValueError, match="another client"):
        cb.fill(foreign, b"\0")
    cb.end()
    with pytest.raises(ValueError, match="another client"):
        client.execute(cb, bindings=[foreign])
    with pytest.raises(ValueError, match="another client"):
        client.execute(cb, signal=[(other_client.create_semaphore(), 1)])


def test_with_block_that_raises_releases_the_recording(client, kernels):
    with pytest.raises(RuntimeError):
        with client.record() as cb:
            cb.barrier()
            raise RuntimeError("abandon")
    assert cb.released and not cb.ended
    # end() at the block's end fails: released too, not left to the GC.
    with pytest.raises(halogpu.NotFoundError, match="nope"):
        with client.record() as failed:
            failed.dispatch(kernels, "nope", grid=1)
    assert failed.released and not failed.ended


def test_recording_holds_its_buffers(client):
    buffer = client.create_buffer(64, memory="host_visible")
    out = client.create_buffer(64, memory="host_visible")
    buffer.write(b"k" * 64)
    handle = buffer._handle
    cb = client.record()
    cb.copy(buffer, out)
    buffer.release()  # before end(): the C release waits for end()
    assert buffer.released and not handle.freed
    cb.end()
    assert handle.freed
    done = client.create_semaphore()
    client.execute(cb, signal=[(done, 1)])  # the daemon kept it alive
    done.wait(1, timeout=10)
    assert out.read() == b"k" * 64


def test_released_buffer_cannot_be_recorded(client):
    buffer = client.create_buffer(64)
    buffer.release()
    cb = client.record()
    with pytest.raises(halogpu.ClosedError, match="released"):
        cb.fill(buffer, b"\0")


@pytest.mark.parametrize("state", ["ended", "released"])
def test_recording_after_the_end_holds_nothing(client, kernels, state):
    """Recording into an ended (or released) command buffer raises
    ClosedError without holding the buffers and executable it names: their
    release() still frees them at once."""
    buffer = client.create_buffer(64)
    out = client.create_buffer(64)
    count = client.create_buffer(12)
    cb = client.record()
    cb.barrier()
    if state == "ended":
        cb.end()
    else:
        cb.release()
    attempts = [
        lambda: cb.fill(buffer, b"\0"),
        lambda: cb.copy(buffer, out),
        lambda: cb.update(b"\1" * 4, buffer),
        lambda: cb.dispatch(kernels, "add", 1, args=[buffer, buffer, out,
                                                     np.uint32(16)]),
        lambda: cb.dispatch_indirect(kernels, "add", count,
                                     args=[buffer, buffer, out,
                                           np.uint32(16)]),
    ]
    for attempt in attempts:
        with pytest.raises(halogpu.ClosedError):
            attempt()
    for obj in (buffer, out, count, kernels):
        handle = obj._handle
        obj.release()
        assert handle.freed, obj


def test_bound_buffers_may_be_released_after_execute(client, kernels):
    a, va = host(client, 64)
    va[:] = 2
    del va
    start = client.create_semaphore()
    done = client.create_semaphore()
    out = client.create_buffer(256, memory="host_visible")
    with client.record(bindings=2) as cb:
        cb.copy(halogpu.slot(0, 0, 256), halogpu.slot(1, 0, 256))
    client.execute(cb, bindings=[a, out], wait=[(start, 1)],
                   signal=[(done, 1)])
    a.release()
    cb.release()
    gc.collect()
    start.signal(1)
    done.wait(1, timeout=10)
    assert (out.numpy(np.float32) == 2).all()


def test_concurrent_execution_from_threads(client, kernels):
    a, va = host(client, 64)
    va[:] = 0
    b, vb = host(client, 64)
    vb[:] = 1
    with client.record(bindings=3) as cb:
        cb.dispatch(kernels, "add", grid=1, block=64,
                    args=[halogpu.slot(0), halogpu.slot(1), halogpu.slot(2),
                          np.uint32(64)])
    semaphores = [client.create_semaphore() for _ in range(4)]
    outputs = [host(client, 64) for _ in range(4)]
    errors = []

    def worker(i):
        try:
            for step in range(1, 11):
                client.execute(cb, bindings=[a, b, outputs[i][0]],
                               signal=[(semaphores[i], step)])
                semaphores[i].wait(step, timeout=10)
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for _, view in outputs:
        assert (view == 1).all()


def test_close_with_recordings_and_queues(address, kernels_so):
    client = halogpu.connect(address)
    kernels = client.load_shared_object(kernels_so)
    buffer = client.create_buffer(64)
    queue = client.create_queue()
    recording = client.record()
    recording.fill(buffer, b"\0")
    client.close()
    for call in (recording.end, recording.barrier,
                 lambda: queue.execute(recording),
                 lambda: client.record()):
        with pytest.raises(halogpu.ClosedError):
            call()
    assert kernels.released


def test_none_is_a_null_pointer(client, kernels):
    a, va = host(client, N)
    b, vb = host(client, N)
    c, vc = host(client, N)
    va[:] = np.arange(N)
    vb[:] = 5
    done = client.create_semaphore()
    with client.record() as cb:
        # b as None: the kernel sees a null pointer and adds 1.
        cb.dispatch(kernels, "add_optional", grid=(N + 63) // 64, block=64,
                    args=[a, None, c, np.uint32(N)])
        cb.barrier()
        cb.dispatch(kernels, "add_optional", grid=(N + 63) // 64, block=64,
                    args=[c, b, c, np.uint32(N)])
    client.execute(cb, signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert np.array_equal(vc, np.arange(N, dtype=np.float32) + 6)


def test_record_on_a_device_the_daemon_lacks(client):
    """record() names a device the daemon does not have at once, as
    create_queue() does (it failed only at end())."""
    count = len(client.devices)
    with pytest.raises(halogpu.OutOfRangeError,
                       match=rf"device {count} does not exist "
                       rf"\(the daemon has {count}\)"):
        client.record(device=count)


def test_bfloat16_constants():
    """bfloat16 (struct has no format for it): float32's upper half,
    rounded to nearest even; a NaN stays a NaN."""
    assert halogpu.constant(1.0, "bfloat16").data == struct.pack("=H", 0x3F80)
    assert halogpu.constant(3.14159, "bf16").data == struct.pack("=H", 0x4049)
    # 1 + 2**-8 is halfway between 1 and the next bfloat16: to even (1).
    assert halogpu.constant(1 + 2**-8, "bf16").data == \
        struct.pack("=H", 0x3F80)
    assert halogpu.constant(1 + 3 * 2**-8, "bf16").data == \
        struct.pack("=H", 0x3F82)
    nan = struct.unpack("=H", halogpu.constant(float("nan"), "bf16").data)[0]
    assert nan & 0x7F80 == 0x7F80 and nan & 0x7F
    assert halogpu.constant([1.0, -2.0], "bfloat16").data == \
        struct.pack("=2H", 0x3F80, 0xC000)
    with pytest.raises(ValueError, match="cannot pack 'x' as 'bf16'"):
        halogpu.constant("x", "bf16")


def test_with_a_closed_client_raises(address):
    client = halogpu.connect(address)
    client.close()
    with pytest.raises(halogpu.ClosedError, match="closed"):
        with client:
            pass
