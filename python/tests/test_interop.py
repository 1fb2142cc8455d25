# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""numpy.asarray(buffer) and DLPack (numpy.from_dlpack, torch.from_dlpack
when torch is installed) over host-visible buffers: zero copy, and the
mapping outlives the buffer, the client and the capsule as long as an array
uses it."""

import ctypes
import gc

import numpy as np
import pytest

import halogpu
from halogpu import _dlpack

N = 1024


@pytest.fixture(autouse=True)
def no_exports_left():
    yield
    gc.collect()
    assert _dlpack.live_exports() == 0


def test_asarray_is_a_zero_copy_view(client):
    buffer = client.create_buffer(4 * N, memory="host_visible")
    array = np.asarray(buffer)
    assert array.dtype == np.uint8 and array.shape == (4 * N,)
    assert array.ctypes.data == buffer.host_pointer
    array.view(np.float32)[:] = 2.5
    assert np.frombuffer(buffer.read(), np.float32).tolist() == [2.5] * N
    buffer.write(np.full(N, 7, np.uint32))
    assert (array.view(np.uint32) == 7).all()
    # A copy only when asked for.
    copied = np.array(buffer, copy=True)
    copied[:] = 0
    assert (array.view(np.uint32) == 7).all()
    assert np.asarray(buffer, dtype=np.int32)[0] == 7  # values converted


def test_asarray_of_a_device_buffer_is_a_clear_error(client):
    buffer = client.create_buffer(64)
    with pytest.raises(TypeError, match="device buffer.*host_visible"):
        np.asarray(buffer)


def test_from_dlpack_is_zero_copy(client):
    buffer = client.create_buffer(4 * N, memory="host_visible")
    assert buffer.__dlpack_device__() == (1, 0)  # kDLCPU
    array = np.from_dlpack(buffer)
    assert array.dtype == np.uint8 and array.shape == (4 * N,)
    assert array.ctypes.data == buffer.host_pointer
    assert _dlpack.live_exports() == 1
    floats = array.view(np.float32)
    floats[:] = np.arange(N, dtype=np.float32)  # written through numpy
    assert np.array_equal(np.frombuffer(buffer.read(), np.float32),
                          np.arange(N, dtype=np.float32))  # read by halo
    buffer.write(b"\x00" * 4)  # written by halo, seen through numpy
    assert floats[0] == 0
    del array, floats
    gc.collect()
    assert _dlpack.live_exports() == 0


def test_dlpack_array_outlives_buffer_client_and_capsule(address):
    client = halogpu.connect(address)
    buffer = client.create_buffer(4 * N, memory="host_visible")
    session = client._session
    array = np.from_dlpack(buffer).view(np.uint32)
    array[:] = 5
    buffer.release()
    client.close()
    assert client.closed and not session.closed  # the export pins it
    gc.collect()
    assert (array == 5).all()  # still mapped
    array[:] = 6
    assert _dlpack.live_exports() == 1
    del array
    gc.collect()
    assert _dlpack.live_exports() == 0
    assert session.closed  # the deleter let go of the last pin


def test_unversioned_capsule_for_older_consumers(client):
    buffer = client.create_buffer(64, memory="host_visible")
    buffer.write(bytes(range(64)))

    class OldConsumerView:  # passes no max_version, as DLPack 0.x callers
        def __dlpack__(self, **ignored):
            return buffer.__dlpack__()

        def __dlpack_device__(self):
            return buffer.__dlpack_device__()

    array = np.from_dlpack(OldConsumerView())
    assert array.ctypes.data == buffer.host_pointer
    assert array.tolist() == list(range(64))
    assert not array.flags.writeable  # numpy's rule for unversioned ones
    del array


def test_unconsumed_capsule_unpins(client):
    buffer = client.create_buffer(64, memory="host_visible")
    capsule = buffer.__dlpack__()
    assert type(capsule).__name__ == "PyCapsule"
    assert _dlpack.live_exports() == 1
    del capsule
    gc.collect()
    assert _dlpack.live_exports() == 0
    buffer.release()
    assert buffer._handle.freed


def test_dlpack_leaves_ctypes_pythonapi_alone(client, monkeypatch):
    """halogpu calls the capsule API through a ctypes.PyDLL of its own:
    ctypes.pythonapi, which every library of the process shares, keeps its
    prototypes (another library's PyCapsule_IsValid(py_object(capsule),
    name) was an ArgumentError), and prototypes another library sets there
    do not touch halogpu's capsule destructor (it did nothing then, and
    the unconsumed export pinned the buffer for good)."""
    api = ctypes.pythonapi
    for name in ("PyCapsule_New", "PyCapsule_IsValid",
                 "PyCapsule_GetPointer"):
        function = getattr(api, name)
        assert function.argtypes is None, name
        assert function.restype is ctypes.c_int, name  # ctypes' default
    buffer = client.create_buffer(64, memory="host_visible")
    capsule = buffer.__dlpack__()
    # As another library calls it, with ctypes.pythonapi's defaults.
    assert api.PyCapsule_IsValid(ctypes.py_object(capsule), b"dltensor") == 1
    del capsule
    gc.collect()
    assert _dlpack.live_exports() == 0
    # Another library's prototypes, unlike the ones halogpu would need.
    monkeypatch.setattr(api.PyCapsule_IsValid, "argtypes",
                        [ctypes.py_object, ctypes.c_char_p])
    monkeypatch.setattr(api.PyCapsule_GetPointer, "argtypes",
                        [ctypes.py_object, ctypes.c_char_p])
    monkeypatch.setattr(api.PyCapsule_GetPointer, "restype", ctypes.c_size_t)
    for versioned in (None, (1, 0)):
        capsule = buffer.__dlpack__(max_version=versioned)
        assert _dlpack.live_exports() == 1
        del capsule  # never consumed: its destructor calls the deleter
        gc.collect()
        assert _dlpack.live_exports() == 0
    buffer.release()
    assert buffer._handle.freed


def test_dlpack_refusals(client):
    device = client.create_buffer(64)
    with pytest.raises(BufferError, match="device buffer"):
        device.__dlpack__()
    with pytest.raises(BufferError, match="device buffer"):
        device.__dlpack_device__()
    with pytest.raises(BufferError, match="device buffer"):
        np.from_dlpack(device)
    host = client.create_buffer(64, memory="host_visible")
    with pytest.raises(BufferError, match="kDLCPU"):
        host.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="copy"):
        host.__dlpack__(copy=True)
    host.release()
    with pytest.raises(halogpu.ClosedError):
        host.__dlpack__()


def test_from_dlpack_of_a_buffer_passes_mypy_strict(mypy_strict):
    """numpy.from_dlpack(buffer), as the README shows it, type-checks in
    user code under mypy --strict: numpy's stubs take an object whose
    __dlpack__ returns a capsule (CapsuleType), not any object."""
    mypy_strict(
        "uses_dlpack.py",
        "import numpy as np\n"
        "import numpy.typing as npt\n"
        "import halogpu\n\n\n"
        "def typed(buffer: halogpu.Buffer) -> npt.NDArray[np.float32]:\n"
        "    return np.from_dlpack(buffer).view(np.float32)\n")


def test_torch_from_dlpack_is_zero_copy(client):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    buffer = client.create_buffer(4 * N, memory="host_visible")
    tensor = torch.from_dlpack(buffer).view(torch.float32)
    assert tensor.data_ptr() == buffer.host_pointer
    tensor.fill_(3.0)
    assert np.frombuffer(buffer.read(), np.float32).tolist() == [3.0] * N
    del tensor


def test_typed_buffers_give_their_array_back(client):
    """A buffer with a dtype and shape (from_numpy, empty) gives an array of
    them back, without a copy, through numpy(), numpy.asarray() and
    DLPack (it gave a 4x longer uint8 array of its bytes)."""
    source = np.arange(6, dtype=np.float32).reshape(2, 3)
    buffer = client.from_numpy(source)
    assert buffer.shape == (2, 3) and buffer.dtype == np.float32
    for array in (buffer.numpy(), np.asarray(buffer), np.from_dlpack(buffer)):
        assert array.dtype == np.float32 and array.shape == (2, 3)
        assert array.ctypes.data == buffer.host_pointer
        assert np.array_equal(array, source)
        del array
    np.from_dlpack(buffer)[1, 2] = 42.0  # written through DLPack
    assert buffer.numpy()[1, 2] == 42.0
    # The bytes when asked for; another dtype: as many items as fit.
    assert buffer.numpy(np.uint8).shape == (24,)
    assert buffer.numpy(np.int16).shape == (12,)
    # A shape assigned (or none) and empty() with a shape.
    buffer.shape = None
    assert buffer.numpy().shape == (6,) and np.from_dlpack(buffer).shape == (6,)
    made = client.empty((4, 2), "int64")
    assert made.shape == (4, 2) and np.asarray(made).shape == (4, 2)
    assert np.from_dlpack(made).dtype == np.int64
    assert client.empty(5, np.float16).numpy().shape == (5,)
    with pytest.raises(ValueError, match=r"shape \(0, 3\) holds no items"):
        client.empty((0, 3), np.float32)
    flags = client.from_numpy(np.array([True, False]))
    assert np.from_dlpack(flags).dtype == np.bool_
    # A dtype DLPack has no code for: its bytes.
    record = client.from_numpy(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")]))
    assert record.numpy().shape == (2,)
    capsule_array = np.from_dlpack(record)
    assert capsule_array.dtype == np.uint8 and capsule_array.shape == (16,)


def test_typed_buffers_at_the_edges(client):
    """Long double (no consumer takes its DLPack type) and a dtype name
    numpy does not know give the bytes; a 0-d array keeps its shape; a
    shape that does not fit is BufferError for DLPack, ValueError for
    numpy; empty() takes count= (its older name) and any sequence."""
    longdouble = client.from_numpy(np.ones(3, np.longdouble))
    assert np.from_dlpack(longdouble).dtype == np.uint8
    assert longdouble.numpy().dtype == np.longdouble  # numpy takes it
    scalar = client.from_numpy(np.array(3.5, np.float32))
    assert scalar.shape == () and np.from_dlpack(scalar).shape == ()
    assert float(scalar.numpy()) == 3.5
    named = client.empty(8, np.uint16)
    named.dtype = "bfloat16"  # for halogpu.triton; numpy has no such type
    assert np.asarray(named).dtype == np.uint8
    assert np.from_dlpack(named).shape == (16,)
    assert named.numpy(np.uint16).shape == (8,)
    wrong = client.empty(3, np.float32)
    wrong.shape = (4,)  # 16 bytes in 12
    with pytest.raises(BufferError, match="__dlpack__: shape"):
        np.from_dlpack(wrong)
    with pytest.raises(ValueError, match="exceeds the buffer's 12 bytes"):
        np.asarray(wrong)
    assert client.empty(count=3, dtype=np.float32).shape == (3,)
    assert client.empty(np.array([2, 3]), np.int8).shape == (2, 3)
    with pytest.raises(TypeError, match="shape or count, not both"):
        client.empty(3, np.int8, count=3)
    gc.collect()
    assert _dlpack.live_exports() == 0
