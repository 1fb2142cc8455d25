# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Buffers: copies from every bytes-like type, zero-copy numpy views and
their lifetime, export/import."""

import array
import gc
import tracemalloc

import numpy as np
import pytest

import halogpu


@pytest.fixture(params=["host_visible", "device"])
def memory(request):
    return request.param


def test_create_properties(client, memory):
    buffer = client.create_buffer(1000, memory=memory)
    assert buffer.size == len(buffer) == buffer.nbytes == 1000
    assert buffer.memory_type == (halogpu.MemoryType.HOST_VISIBLE
                                  if memory == "host_visible" else
                                  halogpu.MemoryType.DEVICE)
    assert buffer.device == 0
    assert buffer.handle > 0
    assert (buffer.host_pointer is not None) == (memory == "host_visible")
    assert buffer.host_visible == (memory == "host_visible")
    buffer.release()
    assert buffer.released
    with pytest.raises(halogpu.ClosedError, match="released"):
        buffer.read()


@pytest.mark.parametrize("make", [
    lambda raw: raw,
    lambda raw: bytearray(raw),
    lambda raw: memoryview(raw),
    lambda raw: memoryview(bytearray(raw)),
    lambda raw: np.frombuffer(raw, np.uint8),  # read-only array
    lambda raw: np.frombuffer(raw, np.uint8).copy(),
    lambda raw: np.frombuffer(raw, np.float32).reshape(4, 16),
    lambda raw: array.array("B", raw),
])
def test_write_accepts_bytes_like(client, memory, make):
    raw = bytes(range(256))
    buffer = client.create_buffer(256, memory=memory)
    buffer.write(make(raw))
    assert buffer.read() == raw


def test_write_non_contiguous_copies(client, memory):
    data = np.arange(64, dtype=np.int32).reshape(8, 8)
    view = data[:, ::2]  # not contiguous
    buffer = client.create_buffer(view.nbytes, memory=memory)
    buffer.write(view)
    assert np.array_equal(np.frombuffer(buffer.read(), np.int32),
                          view.ravel())


def test_read_ranges_and_readinto(client, memory):
    buffer = client.create_buffer(64, memory=memory)
    buffer.write(bytes(range(64)))
    assert buffer.read(4, offset=10) == bytes([10, 11, 12, 13])
    assert buffer.read(offset=60) == bytes([60, 61, 62, 63])
    out = np.zeros(8, np.uint16)
    assert buffer.readinto(out, offset=16) == 16
    assert out.tobytes() == bytes(range(16, 32))
    target = bytearray(4)
    buffer.readinto(memoryview(target))
    assert target == bytes(range(4))


def test_out_of_range_is_the_daemons_error(client, memory):
    buffer = client.create_buffer(16, memory=memory)
    with pytest.raises(halogpu.OutOfRangeError, match="16 bytes"):
        buffer.write(b"x" * 17)
    with pytest.raises(halogpu.OutOfRangeError):
        buffer.read(4, offset=14)


def test_read_past_the_end_allocates_nothing(client, memory):
    """read() checks the range before it allocates the result: a length
    past the end is OutOfRangeError naming the range and the buffer's
    size (it was a MemoryError for 2**32 bytes, an OverflowError for
    2**63, and 64 MiB zero-filled before the error)."""
    buffer = client.create_buffer(16, memory=memory)
    for length in (2**32, 2**63, 64 << 20, 17):
        with pytest.raises(halogpu.OutOfRangeError,
                           match=rf"range \[0, 0 \+ {length}\) exceeds the "
                           r"buffer's 16 bytes"):
            buffer.read(length)
    with pytest.raises(halogpu.OutOfRangeError,
                       match=r"range \[20, 20 \+ 0\) exceeds"):
        buffer.read(offset=20)  # to the end, from past it
    with pytest.raises(halogpu.OutOfRangeError,
                       match=r"range \[12, 12 \+ 8\) exceeds"):
        buffer.read(8, offset=12)
    tracemalloc.start()
    try:
        with pytest.raises(halogpu.OutOfRangeError):
            buffer.read(64 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    assert buffer.read(4, offset=12) == bytes(4)  # exactly to the end
    assert buffer.read(0, offset=16) == b""
    buffer.release()
    with pytest.raises(halogpu.ClosedError):  # before the range
        buffer.read(2**32)


def test_wrong_types_before_any_call(client):
    buffer = client.create_buffer(16, memory="host_visible")
    with pytest.raises(TypeError, match="str"):
        buffer.write("text")
    with pytest.raises(TypeError):
        buffer.write(12)
    with pytest.raises(ValueError):
        buffer.write(b"x", offset=-1)
    with pytest.raises(TypeError):
        buffer.read(offset=1.5)
    with pytest.raises(TypeError, match="read-only"):
        buffer.readinto(b"immutable")
    with pytest.raises(ValueError, match="read-only"):
        buffer.readinto(np.frombuffer(b"abcd", np.uint8))
    with pytest.raises(ValueError, match="contiguous"):
        buffer.readinto(np.zeros((4, 4), np.uint8)[:, ::2])
    with pytest.raises(ValueError):
        client.create_buffer(0)
    with pytest.raises(ValueError):
        client.create_buffer(16, memory="shared")
    with pytest.raises(TypeError):
        client.create_buffer("16")


def test_object_arrays_are_refused(client):
    """An array of Python objects holds pointers into this process, not
    data: writing it (or making a buffer of it) is a TypeError naming the
    dtype, before any call."""
    buffer = client.create_buffer(64, memory="host_visible")
    buffer.write(bytes(64))
    objects = np.array([1, "two", 3.0, None], dtype=object)
    record = np.zeros(2, dtype=[("n", "<i4"), ("o", "O")])
    for data in (objects, objects[::2], record, memoryview(objects),
                 memoryview(record)):
        with pytest.raises(TypeError, match="Python objects"):
            buffer.write(data)
    with pytest.raises(TypeError, match=r"dtype object .*Python objects"):
        client.from_numpy(objects)
    with pytest.raises(TypeError, match=r"\('o', 'O'\)"):
        client.from_numpy(record)
    with pytest.raises(TypeError, match="Python objects"):
        with client.record() as cb:
            cb.update(objects, buffer)
    assert buffer.read() == bytes(64)


def test_object_dtype_views_are_refused(client):
    """A view (numpy(), numpy.asarray()) or an empty() buffer of a dtype of
    Python objects would read the buffer's bytes as pointers into this
    process (and crash on the first element): a TypeError naming the
    dtype, with no array made and no buffer created."""
    buffer = client.create_buffer(64, memory="host_visible")
    buffer.write(np.ones(8))  # bytes that are no object's address
    record = [("n", "<i4"), ("o", "O")]
    for dtype in (object, np.dtype(object), record):
        with pytest.raises(TypeError, match="Buffer.numpy: dtype .*Python "
                                            "objects"):
            buffer.numpy(dtype)
        with pytest.raises(TypeError, match="numpy.asarray: dtype .*Python "
                                            "objects"):
            np.asarray(buffer, dtype=dtype)
        with pytest.raises(TypeError, match="Client.empty: dtype .*Python "
                                            "objects"):
            client.empty(4, dtype)
    assert buffer.numpy(np.float64)[0] == 1.0  # the buffer is unharmed


def test_byte_order(client):
    """from_numpy keeps the values: an array in the other byte order is
    converted to the native one (kernels read native numbers), its dtype
    the native dtype. write() copies an array's bytes as they are."""
    big = np.arange(4, dtype=">u4")
    made = client.from_numpy(big)
    assert made.dtype == np.dtype("=u4") and made.dtype.isnative
    assert (made.numpy(made.dtype) == np.arange(4)).all()
    assert made.read() == np.arange(4, dtype="=u4").tobytes()
    fields = np.array([(1, 2.5)], dtype=[("n", ">i4"), ("x", ">f8")])
    made = client.from_numpy(fields)
    assert made.dtype.isnative and made.numpy(made.dtype)[0].item() == \
        (1, 2.5)
    raw = client.create_buffer(16, memory="host_visible")
    raw.write(big)
    assert raw.read() == big.tobytes()


def test_from_numpy_releases_its_buffer_when_the_copy_fails(client,
                                                            monkeypatch):
    """A copy that fails or is interrupted (Ctrl-C during a large copy to
    device memory, a request timeout) releases the new buffer at once, not
    when the exception's traceback goes (a notebook keeps the last one,
    and with it the device memory)."""
    made = []

    def interrupted(self, data, offset=0):
        made.append(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(halogpu.Buffer, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        client.from_numpy(np.ones(1024, np.float32), memory="device")
    assert made and made[0].released and made[0]._handle.freed


def test_dtype_is_assignable_under_mypy_strict(mypy_strict):
    """Buffer.dtype takes a numpy dtype, its name or None in user code
    checked by mypy --strict (numpy is optional: the attribute is Any)."""
    mypy_strict(
        "uses_dtype.py",
        "import numpy as np\n"
        "import halogpu\n\n\n"
        "def typed(client: halogpu.Client) -> None:\n"
        "    buffer = client.create_buffer(16)\n"
        "    buffer.dtype = np.dtype('float32')\n"
        "    buffer.dtype = 'float32'\n"
        "    buffer.dtype = None\n"
        "    buffer.ref(dtype=np.float16).dtype = np.dtype('int8')\n")


def test_dtype_typos_are_refused(client):
    """A dtype name numpy does not know is a ValueError naming it, when
    assigned or given to empty() (it gave the buffer's bytes as uint8,
    silently); "bfloat16", which numpy lacks, is taken on purpose."""
    buffer = client.create_buffer(16, memory="host_visible")
    buffer.dtype = "float32"
    for typo in ("flaot32", "int33", "bfloat"):
        with pytest.raises(ValueError, match=rf"Buffer.dtype: '{typo}' is "
                           r"not a dtype numpy knows .* nor one of "
                           r"'bfloat16'"):
            buffer.dtype = typo
        with pytest.raises(ValueError, match=rf"Client.empty: '{typo}'"):
            client.empty(4, typo)
    assert buffer.dtype == "float32"  # unchanged by the refusals
    assert buffer.numpy().dtype == np.float32
    with pytest.raises(TypeError, match=r"Buffer.dtype: 12 \(int\) is not a "
                       r"dtype"):
        buffer.dtype = 12
    for dtype in (np.float64, np.dtype("int8"), "<u2", [("a", "<i4")],
                  "bfloat16", None):
        buffer.dtype = dtype
        assert buffer.dtype is dtype  # kept as given


def test_bfloat16_by_name(client):
    """empty(n, "bfloat16") needs no ml_dtypes: 2 bytes an item, dtype
    "bfloat16"; numpy(), numpy.asarray() and DLPack give its bytes (numpy
    has no bfloat16), numpy(dtype) views it as another type."""
    buffer = client.empty((2, 3), "bfloat16")
    assert buffer.size == 12
    assert buffer.dtype == "bfloat16" and buffer.shape == (2, 3)
    buffer.write(np.full(6, 0x3F80, np.uint16))  # 1.0 in bfloat16
    for view in (buffer.numpy(), np.asarray(buffer), np.from_dlpack(buffer)):
        assert view.dtype == np.uint8 and view.shape == (12,)
        del view
    assert (buffer.numpy(np.uint16) == 0x3F80).all()
    device = client.empty(5, "bfloat16", memory="device")
    assert device.size == 10 and device.dtype == "bfloat16"


def test_empty_makes_the_byte_order_native(client):
    """empty() of a dtype in non-native byte order makes the native dtype,
    as from_numpy() does (kernels read native numbers)."""
    other = ">f4" if np.little_endian else "<f4"
    buffer = client.empty(4, other)
    assert buffer.dtype == np.dtype("=f4") and buffer.dtype.isnative
    assert buffer.numpy().dtype.isnative
    fields = client.empty(2, [("n", ">i4"), ("x", ">f8")])
    assert fields.dtype.isnative and fields.size == 24
    # Assigned: kept as it is (halogpu.triton refuses it).
    buffer.dtype = other
    assert buffer.dtype == other and not buffer.numpy().dtype.isnative


def test_empty_of_too_large_a_shape_names_the_shape(client):
    """A shape past a buffer's 2**40 bytes is named (it was "size = ... is
    out of range", a parameter empty() does not have)."""
    with pytest.raises(ValueError, match=r"Client.empty: shape \(1048576, "
                       r"1048576\) of float32 is 4398046511104 bytes, past "
                       r"a buffer's 1099511627776 \(2\*\*40\)"):
        client.empty((2**20, 2**20), np.float32)
    with pytest.raises(ValueError, match=r"shape \(2199023255552,\) of "
                       r"bfloat16"):
        client.empty(2**41, "bfloat16")


def test_integer_like_arguments_under_mypy_strict(mypy_strict):
    """numpy integers (SupportsIndex) where an int is taken, sequences of
    them for shapes, and tokens as bytearray or memoryview, type-check in
    user code under mypy --strict, as they work at run time."""
    mypy_strict(
        "uses_indices.py",
        "import numpy as np\n"
        "import halogpu\n\n\n"
        "def typed(client: halogpu.Client, token: bytearray) -> None:\n"
        "    n = np.int64(4)\n"
        "    buffer = client.create_buffer(n * 4, memory='host_visible',\n"
        "                                  device=np.uint32(0))\n"
        "    client.empty(n, np.float32)\n"
        "    client.empty((n, np.int32(2)), 'bfloat16', exportable=True)\n"
        "    client.empty([2, n], 'int8', count=None)\n"
        "    client.from_numpy(np.zeros(3), exportable=True)\n"
        "    buffer.numpy(np.float32, shape=(n,), offset=np.int8(0))\n"
        "    buffer.numpy(shape=n)\n"
        "    buffer.read(n, offset=np.int64(0))\n"
        "    buffer.ref(np.int64(0), n)\n"
        "    halogpu.slot(np.int64(1), length=n)\n"
        "    client.import_buffer(token)\n"
        "    client.import_buffer(memoryview(token))\n"
        "    client.import_semaphore(bytes(token))\n"
        "    client.import_semaphore(memoryview(token))\n")


def test_numpy_view_is_zero_copy(client):
    buffer = client.create_buffer(64 * 4, memory="host_visible")
    view = buffer.numpy(np.float32)
    assert view.shape == (64,) and view.dtype == np.float32
    assert view.ctypes.data == buffer.host_pointer
    view[:] = np.arange(64)
    assert np.array_equal(np.frombuffer(buffer.read(), np.float32),
                          np.arange(64, dtype=np.float32))
    buffer.write(np.full(64, 7, np.float32))
    assert (view == 7).all()


def test_numpy_dtype_shape_strides(client):
    buffer = client.create_buffer(4096, memory="host_visible")
    matrix = buffer.numpy(np.float64, shape=(16, 8), offset=64)
    assert matrix.shape == (16, 8)
    assert matrix.strides == (64, 8)
    assert matrix.ctypes.data == buffer.host_pointer + 64
    matrix[:] = np.arange(128).reshape(16, 8)
    columns = buffer.numpy(np.float64, shape=(8, 16), offset=64,
                           strides=(8, 64))
    assert np.array_equal(columns, matrix.T)
    records = buffer.numpy(np.dtype([("x", "<u4"), ("y", "<f4")]),
                           shape=512)
    assert records.shape == (512,)
    assert buffer.numpy(np.int16, shape=()).shape == ()
    assert buffer.numpy(np.uint8, shape=[2, 3]).shape == (2, 3)
    with pytest.raises(TypeError):
        buffer.numpy(np.uint8, shape="12")
    with pytest.raises(ValueError, match="whole number"):
        buffer.numpy(np.float32, offset=2)
    # A shape past the end: the bytes asked and the buffer's size (numpy
    # said only "buffer is too small for requested array").
    with pytest.raises(ValueError, match=r"shape \(1000,\) of float64 is "
                       r"8000 bytes: \[0, 0 \+ 8000\) exceeds the buffer's "
                       r"4096 bytes"):
        buffer.numpy(np.float64, shape=(1000,))
    with pytest.raises(ValueError, match=r"shape \(2, 255\) of float64 is "
                       r"4080 bytes: \[64, 64 \+ 4080\) exceeds"):
        buffer.numpy(np.float64, shape=(2, 255), offset=64)
    assert buffer.numpy(np.float64, shape=(2, 252), offset=64).shape == \
        (2, 252)  # exactly to the end
    with pytest.raises(ValueError):
        buffer.numpy(np.float64, shape=(8, 16), offset=64, strides=(8, 512))


def test_memoryview(client):
    buffer = client.create_buffer(32, memory="host_visible")
    view = buffer.memoryview(8, 8)
    assert view.format == "B" and view.nbytes == 8 and not view.readonly
    view[:] = b"12345678"
    assert buffer.read(8, offset=8) == b"12345678"
    with pytest.raises(ValueError):
        buffer.memoryview(30, 8)


def test_device_buffer_has_no_view(client):
    buffer = client.create_buffer(32)
    with pytest.raises(ValueError, match="device buffer"):
        buffer.numpy()
    with pytest.raises(ValueError, match="device buffer"):
        buffer.memoryview()
    assert buffer.host_pointer is None


def test_view_keeps_mapping_alive_after_release(client):
    buffer = client.create_buffer(4096, memory="host_visible")
    view = buffer.numpy(np.uint32)
    view[:] = 42
    handle = buffer._handle
    buffer.release()
    assert buffer.released and not handle.freed
    with pytest.raises(halogpu.ClosedError):
        buffer.numpy()
    assert (view == 42).all()  # still mapped
    view[:] = 43
    del view
    gc.collect()
    assert handle.freed


def test_views_defer_close(address):
    client = halogpu.connect(address)
    buffer = client.create_buffer(4096, memory="host_visible")
    view = buffer.numpy(np.uint8)
    session = client._session
    client.close()
    assert client.closed and not session.closed
    with pytest.raises(halogpu.ClosedError):
        buffer.read()
    view[:] = 1  # still mapped, no crash
    assert view.sum() == 4096
    del view
    gc.collect()
    assert session.closed


def test_views_of_the_garbage_collected_buffer(client):
    view = client.create_buffer(64, memory="host_visible").numpy(np.int64)
    gc.collect()
    view[:] = np.arange(8)
    assert view.sum() == 28


def test_export_import(client, other_client, memory):
    buffer = client.create_buffer(64, memory=memory, exportable=True)
    buffer.write(b"shared!!" * 8)
    token = buffer.export()
    assert isinstance(token, str) and len(token) == 32
    int(token, 16)
    imported = other_client.import_buffer(token)
    assert imported.size == 64
    assert imported.device is None and imported.exportable is None
    assert imported.read(8) == b"shared!!"
    imported.write(b"answer")
    assert buffer.read(6) == b"answer"
    if memory == "host_visible":
        assert (imported.numpy()[:6] == np.frombuffer(b"answer",
                                                     np.uint8)).all()
    # Raw token bytes work too.
    other_client.import_buffer(bytes.fromhex(token)).release()


def test_export_needs_exportable(client):
    buffer = client.create_buffer(16)
    with pytest.raises(halogpu.FailedPreconditionError,
                       match=r"exportable=True"):
        buffer.export()


def test_typed_buffers_are_exportable(client, other_client, memory):
    """from_numpy() and empty() take exportable= as create_buffer() does.
    The importer gets the bytes, not the dtype and shape (the daemon does
    not carry them): it sets them itself."""
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    made = client.from_numpy(source, memory=memory, exportable=True)
    empty = client.empty((2, 2), np.int16, memory=memory, exportable=True)
    assert made.exportable and empty.exportable
    assert client.from_numpy(source).exportable is False
    assert client.empty(4, np.int8).exportable is False
    empty.write(np.array([1, -2, 3, -4], np.int16))
    for buffer, dtype, shape in ((made, np.float32, (3, 4)),
                                 (empty, np.int16, (2, 2))):
        imported = other_client.import_buffer(buffer.export())
        assert imported.dtype is None and imported.shape is None
        assert imported.size == buffer.size
        expected = np.frombuffer(buffer.read(), dtype).reshape(shape)
        if memory == "host_visible":
            assert imported.numpy().dtype == np.uint8
            imported.dtype, imported.shape = dtype, shape
            assert np.array_equal(imported.numpy(), expected)
        else:
            assert np.array_equal(np.frombuffer(imported.read(), dtype)
                                  .reshape(shape), expected)
    with pytest.raises(halogpu.FailedPreconditionError,
                       match=r"exportable=True"):
        client.empty(4, np.int8).export()


def test_import_errors(client):
    with pytest.raises(halogpu.NotFoundError):
        client.import_buffer("00" * 16)
    with pytest.raises(ValueError):
        client.import_buffer("xyz")
    with pytest.raises(ValueError):
        client.import_buffer("zz" * 16)
    with pytest.raises(TypeError):
        client.import_buffer(1234)


def test_buffer_as_context_manager(client):
    with client.create_buffer(16) as buffer:
        buffer.write(b"x" * 16)
    assert buffer.released
