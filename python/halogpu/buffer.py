# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Buffers, buffer references and the host views of host-visible buffers."""

import ctypes
import enum
import math
import re
import weakref
from typing import (TYPE_CHECKING, Any, Optional, Sequence, SupportsIndex,
                    Tuple, Type, Union)

from . import _core, _dlpack, _lib
from ._object import (HaloObject, Index, Shape, check_int, check_shape,
                      format_token)
from .errors import NotFoundError, OutOfRangeError, check

if TYPE_CHECKING:
    from .client import Client


class MemoryType(enum.IntEnum):
    """halo_memory_type_t.

    DEVICE: memory of the device, reached from Python only through
    Buffer.read()/write() (on the CPU driver: the daemon's memory).
    HOST_VISIBLE: shared memory mapped by this process and the daemon (and
    registered with CUDA so kernels reach it): Buffer.numpy() and
    Buffer.memoryview() view it without a copy.
    """

    DEVICE = 0
    HOST_VISIBLE = 1


def memory_type(value: Union["MemoryType", str, int]) -> "MemoryType":
    """A MemoryType from a MemoryType, int or name ("device",
    "host_visible"; "host" for short)."""
    if isinstance(value, MemoryType):
        return value
    if isinstance(value, str):
        name = value.strip().lower().replace("-", "_")
        if name == "host":
            name = "host_visible"
        try:
            return MemoryType[name.upper()]
        except KeyError:
            raise ValueError(
                f"memory type {value!r} is neither 'device' nor "
                "'host_visible'") from None
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return MemoryType(value)
        except ValueError:
            raise ValueError(f"{value} is not a halo memory type") from None
    raise TypeError(
        f"memory type must be a MemoryType or name, not "
        f"{type(value).__name__}")


def _length(length: Optional[Index], name: str = "length") -> int:
    if length is None:
        return _lib.WHOLE_BUFFER
    return check_int(length, name)


class BufferRef:
    """A direct reference to bytes of a buffer: ``(buffer, offset,
    length)``; length None means "to the end of the buffer" (in
    CommandBuffer.copy() the other side's length if it has one, in
    update() the data's). Made by Buffer.ref(); a Buffer itself stands for
    ``buffer.ref()``."""

    __slots__ = ("buffer", "offset", "length", "dtype")

    def __init__(self, buffer: "Buffer", offset: Index = 0,
                 length: Optional[Index] = None,
                 dtype: Any = None) -> None:
        if not isinstance(buffer, Buffer):
            raise TypeError(
                f"BufferRef needs a Buffer, not {type(buffer).__name__}")
        self.buffer = buffer
        self.offset = check_int(offset, "offset")
        self.length = None if length is None else check_int(length, "length")
        # The element type a typed consumer (halogpu.triton) sees: the
        # buffer's unless given.
        self.dtype: Any = buffer.dtype if dtype is None else dtype

    def __repr__(self) -> str:
        return (f"BufferRef({self.buffer!r}, offset={self.offset}, "
                f"length={self.length})")


class SlotRef:
    """An indirect reference: entry |slot| of the binding table given at
    execution, plus |offset| (added to the entry's offset) and |length|.
    A length of None is "to the end of the bound range" for a dispatch
    argument only: CommandBuffer.fill() needs a length, copy() takes the
    other side's (and refuses two slots without one), update() writes
    the data's, dispatch_indirect() reads 12 bytes. Made by
    halogpu.slot()."""

    __slots__ = ("slot", "offset", "length")

    def __init__(self, slot: Index, offset: Index = 0,
                 length: Optional[Index] = None) -> None:
        self.slot = check_int(slot, "slot", 0, _lib.MAX_BINDINGS - 1)
        self.offset = check_int(offset, "offset")
        self.length = None if length is None else check_int(length, "length")

    def __repr__(self) -> str:
        return (f"halogpu.slot({self.slot}, offset={self.offset}, "
                f"length={self.length})")


def slot(index: Index, offset: Index = 0,
         length: Optional[Index] = None) -> SlotRef:
    """An indirect buffer reference to binding-table entry |index| (see
    SlotRef for a |length| of None)."""
    return SlotRef(index, offset, length)


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        raise ImportError(
            "numpy is not installed: Buffer.numpy() needs it (install numpy, "
            "or use Buffer.memoryview(), read() and write())") from None
    return numpy


# Element types numpy has no dtype for, by the names Buffer.dtype and
# Client.empty() take them, and their sizes in bytes. halogpu.triton passes
# a buffer of one as a pointer to that type; numpy(), numpy.asarray() and
# DLPack give its bytes.
NAMED_DTYPES = {"bfloat16": 2}


def is_named_dtype(dtype: Any) -> bool:
    """True if |dtype| is a name of NAMED_DTYPES ("bfloat16")."""
    return isinstance(dtype, str) and dtype in NAMED_DTYPES


def check_dtype(dtype: Any, what: str) -> Any:
    """|dtype| unchanged if it is None, a name of NAMED_DTYPES or anything
    numpy.dtype() takes; ValueError naming |what| and a name numpy does not
    know (a typo: "flaot32"), TypeError for another object numpy cannot
    read as a dtype. Without numpy nothing but None and those names can be
    checked: the rest is taken as it is."""
    if dtype is None or is_named_dtype(dtype):
        return dtype
    try:
        import numpy
    except ImportError:
        return dtype
    if isinstance(dtype, numpy.dtype):
        return dtype
    try:
        numpy.dtype(dtype)
    except (TypeError, ValueError) as error:
        if isinstance(dtype, str):
            raise ValueError(
                f"{what}: {dtype!r} is not a dtype numpy knows ({error}) "
                f"nor one of {', '.join(map(repr, NAMED_DTYPES))}") from None
        raise TypeError(
            f"{what}: {dtype!r} ({type(dtype).__name__}) is not a dtype: "
            f"{error}") from None
    return dtype


# A struct format's field names (":name:"), which may contain any letter.
_FIELD_NAMES = re.compile(r":[^:]*:")


def refuse_objects(data: Any) -> None:
    """TypeError if |data| (a numpy array or dtype, a memoryview) holds
    Python objects: their bytes are pointers into this process."""
    dtype = data if hasattr(data, "hasobject") else getattr(data, "dtype",
                                                             None)
    if getattr(dtype, "hasobject", False):
        what = f"dtype {dtype}"
    elif isinstance(data, memoryview) and \
            "O" in _FIELD_NAMES.sub("", data.format):
        what = f"format {data.format!r}"
    else:
        return
    raise TypeError(
        f"data of {what} holds Python objects (pointers into this "
        "process), not bytes a device can use: convert it to a numeric "
        "dtype first")


def refuse_object_dtype(dtype: Any, what: str) -> None:
    """TypeError naming |what| if the numpy |dtype| holds Python objects
    (dtype object, or a structured dtype with an object field): a buffer's
    bytes read as such would be taken for pointers into this process."""
    if dtype.hasobject:
        raise TypeError(
            f"{what}: dtype {dtype} holds Python objects (pointers into this "
            "process), not bytes a buffer can hold: use a numeric dtype")


def readable(data: Any) -> Tuple[Any, int, Any]:
    """(pointer argument, length, object to keep alive) for bytes-like
    |data|: bytes, bytearray, memoryview, numpy arrays, array.array, ...
    Contiguous data is passed without a copy; other data is copied once.
    An array's bytes are taken as they are (in its byte order); arrays of
    Python objects are refused (TypeError)."""
    if isinstance(data, bytes):
        return data, len(data), data
    if isinstance(data, str):
        raise TypeError("data must be bytes-like, not str (encode it)")
    refuse_objects(data)
    interface = getattr(data, "__array_interface__", None)
    if isinstance(interface, dict) and interface.get("strides") is None \
            and isinstance(interface.get("data"), tuple):
        # A C-contiguous numpy array (read-only ones too): its address.
        nbytes = int(data.nbytes)
        return (interface["data"][0] if nbytes else None), nbytes, data
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(
            f"data must be bytes-like (bytes, bytearray, memoryview, numpy "
            f"array), not {type(data).__name__}") from None
    refuse_objects(view)
    if not view.c_contiguous or view.readonly:
        copy = view.tobytes()
        return copy, len(copy), copy
    nbytes = view.nbytes
    if nbytes == 0:
        return None, 0, None
    array = (ctypes.c_char * nbytes).from_buffer(view.cast("B"))
    return ctypes.addressof(array), nbytes, array


def writable(out: Any) -> Tuple[Any, int, Any]:
    """(pointer, length, keep-alive) for a writable C-contiguous buffer."""
    interface = getattr(out, "__array_interface__", None)
    if isinstance(interface, dict) and isinstance(interface.get("data"),
                                                  tuple):
        if interface["data"][1]:
            raise ValueError("out is a read-only array")
        if interface.get("strides") is not None:
            raise ValueError("out must be a C-contiguous array")
        nbytes = int(out.nbytes)
        return (interface["data"][0] if nbytes else None), nbytes, out
    try:
        view = memoryview(out)
    except TypeError:
        raise TypeError(
            f"out must be a writable bytes-like object (bytearray, "
            f"memoryview, numpy array), not {type(out).__name__}") from None
    if view.readonly:
        raise TypeError(f"out ({type(out).__name__}) is read-only")
    if not view.c_contiguous:
        raise ValueError("out must be C-contiguous")
    nbytes = view.nbytes
    if nbytes == 0:
        return None, 0, None
    array = (ctypes.c_char * nbytes).from_buffer(view.cast("B"))
    return ctypes.addressof(array), nbytes, array


class Buffer(HaloObject):
    """A buffer of a device (Client.create_buffer / import_buffer).

    Thread safety: any method may be called from any thread. Writes and
    reads of overlapping bytes from several threads (or through views) at
    once are not ordered: order them with semaphores.

    Host views: memoryview() and numpy() of a HOST_VISIBLE buffer are views
    of the shared memory itself, no copy. Each view keeps the mapping
    alive: releasing the buffer (or closing the client) while views exist
    invalidates the Buffer object at once, but the memory stays mapped
    (and the daemon's buffer alive) until the last view is
    garbage-collected.

    Queue.dealloca() hands the buffer back: from then on every use raises
    NotFoundError naming its handle (``deallocated`` is True) and
    release() is local. Views made before stay mapped, but the daemon may
    give their bytes to another buffer once the dealloca completed.

    ``dtype`` (typed ``Any``): the element type the buffer holds, a numpy
    dtype or its name, "bfloat16", or None; ``shape`` (an attribute): the
    shape of the array it holds, a tuple of ints, or None. halo itself
    moves bytes; typed consumers read them: numpy(), numpy.asarray() and
    DLPack (numpy.from_dlpack, torch.from_dlpack) give an array of that
    dtype and shape (of uint8, one dimension, where dtype is None or
    "bfloat16"; of as many items as fit where shape is None), and
    halogpu.triton passes the buffer as a pointer to that type.
    Client.from_numpy() and Client.empty() set both; assign them freely.
    The buffer of an importer (Client.import_buffer) has neither: the
    daemon shares bytes, not types.
    """

    _kind = "buffer"
    _share = ("share it by token: buffer.export() here (exportable=True), "
              "client.import_buffer(token) there")

    def __init__(self, client: "Client", handle: _core.Handle, ident: int,
                 size: int, memory_type: MemoryType, device: Optional[int],
                 host_pointer: Optional[int],
                 exportable: Optional[bool]) -> None:
        super().__init__(client, handle, ident)
        self._size = size
        self._memory_type = memory_type
        self._device = device
        self._host_pointer = host_pointer
        self._exportable = exportable
        self._deallocated = False
        # Any: numpy is optional, and a name is fine too (see dtype).
        self._dtype: Any = None
        # shape: the array's shape (a tuple of ints), or None: numpy(),
        # numpy.asarray() and DLPack use it with dtype.
        self.shape: Optional[Tuple[int, ...]] = None

    @property
    def dtype(self) -> Any:
        """The element type the buffer holds (see the class docstring): a
        numpy dtype or anything numpy.dtype() takes (np.float32, "int64",
        a structured dtype), "bfloat16", or None. halo itself moves bytes;
        typed consumers read it: halogpu.triton passes the buffer as a
        pointer to this type, numpy(), numpy.asarray() and DLPack view
        the buffer as an array of it.

        Assigned values are kept as given (a name stays a name), after a
        check where numpy is installed: ValueError for a name numpy does
        not know (a typo such as "flaot32"; "bfloat16" is taken, and
        numpy(), numpy.asarray() and DLPack give the bytes of a buffer of
        it, as numpy has no bfloat16: view them with a dtype of your own,
        buffer.numpy(ml_dtypes.bfloat16)), TypeError for another object
        numpy cannot read as a dtype. A dtype in non-native byte order is
        kept as it is (halogpu.triton refuses it; Client.from_numpy() and
        Client.empty() make it native)."""
        return self._dtype

    @dtype.setter
    def dtype(self, value: Any) -> None:
        self._dtype = check_dtype(value, "Buffer.dtype")

    @property
    def deallocated(self) -> bool:
        """True once Queue.dealloca() took the buffer."""
        return self._deallocated

    def _check_allocated(self) -> None:
        self._check_alive()
        if self._deallocated:
            raise NotFoundError(
                f"buffer handle 0x{self._id:x} was deallocated "
                "(Queue.dealloca); only release() may follow")

    @property
    def size(self) -> int:
        """Size in bytes."""
        return self._size

    @property
    def nbytes(self) -> int:
        """Size in bytes (as numpy spells it)."""
        return self._size

    def __len__(self) -> int:
        return self._size

    @property
    def memory_type(self) -> MemoryType:
        """DEVICE or HOST_VISIBLE (see MemoryType)."""
        return self._memory_type

    @property
    def host_visible(self) -> bool:
        """True for HOST_VISIBLE memory (viewable with numpy() and
        memoryview())."""
        return self._memory_type == MemoryType.HOST_VISIBLE

    @property
    def device(self) -> Optional[int]:
        """The device ordinal, or None for an imported buffer (libhalo does
        not say where an imported buffer lives)."""
        return self._device

    @property
    def exportable(self) -> Optional[bool]:
        """True if created exportable; None for an imported buffer."""
        return self._exportable

    @property
    def host_pointer(self) -> Optional[int]:
        """The address of the client's mapping (an int), None for a device
        buffer. Valid only while the buffer is alive: prefer numpy() and
        memoryview(), which keep the mapping alive."""
        self._check_allocated()
        return self._host_pointer

    def ref(self, offset: Index = 0,
            length: Optional[Index] = None,
            dtype: Any = None) -> BufferRef:
        """A direct reference to [offset, offset + length) of this buffer
        (length None: to the end), with element type |dtype| for typed
        consumers (None: the buffer's ``dtype``)."""
        return BufferRef(self, offset, length, dtype)

    # ---------------------------------------------------------- copies

    def write(self, data: Any, offset: Index = 0) -> None:
        """Copies bytes-like |data| into the buffer at |offset|.

        Host-visible buffers are copied locally; device buffers go through
        the daemon. OutOfRangeError if the data does not fit. An array's
        bytes are copied as they are (in its byte order, which
        Client.from_numpy makes native); TypeError for an array of Python
        objects (dtype object, or a structured dtype with an object
        field): its bytes are pointers into this process."""
        offset = check_int(offset, "offset")
        pointer, length, keep = readable(data)
        lib = _lib.load()
        with self._call():
            status = lib.halo_buffer_write(self._handle.pointer, offset,
                                           pointer, length)
        del keep
        check(lib, status)

    def read(self, length: Optional[Index] = None,
             offset: Index = 0) -> bytes:
        """Returns |length| bytes (None: to the end) from |offset| as
        bytes. OutOfRangeError, naming the range and the buffer's size,
        if [offset, offset + length) is not inside the buffer (before
        any memory is allocated for the result)."""
        offset = check_int(offset, "offset")
        if length is None:
            length = max(self._size - offset, 0)
        length = check_int(length, "length")
        self._check_allocated()
        if offset > self._size or length > self._size - offset:
            # As libhalo says it, but before allocating |length| bytes.
            raise OutOfRangeError(
                f"range [{offset}, {offset} + {length}) exceeds the "
                f"buffer's {self._size} bytes")
        if self._host_pointer is not None:
            # One copy, from the mapping (as libhalo reads host-visible
            # memory), not three (zeroing, reading, converting to bytes).
            with self._call():
                return ctypes.string_at(self._host_pointer + offset, length)
        out = bytearray(length)
        self.readinto(out, offset)
        return bytes(out)

    def readinto(self, out: Any, offset: Index = 0) -> int:
        """Fills the writable bytes-like |out| (bytearray, memoryview,
        C-contiguous numpy array) from |offset|; returns the byte count."""
        offset = check_int(offset, "offset")
        pointer, length, keep = writable(out)
        lib = _lib.load()
        with self._call():
            status = lib.halo_buffer_read(self._handle.pointer, offset,
                                          pointer, length)
        del keep
        check(lib, status)
        return length

    # ---------------------------------------------------------- views

    def _exporter(self, offset: int, length: int) -> Any:
        """A ctypes array over [offset, offset + length) of the mapping that
        keeps the mapping (and this buffer's C object) alive."""
        self._check_allocated()
        address = self._host_only("a view", ValueError,
                                  "or use read()/write()")
        handle = self._handle
        _core.map_pin(handle)
        try:
            array = (ctypes.c_ubyte * length).from_address(
                address + offset)
            weakref.finalize(array, _core.map_unpin, handle).atexit = False
        except BaseException:
            _core.map_unpin(handle)
            raise
        return array

    def memoryview(self, offset: Index = 0,
                   length: Optional[Index] = None) -> memoryview:
        """A writable memoryview (format 'B') of a host-visible buffer's
        bytes [offset, offset + length), without a copy. It keeps the
        mapping alive (see the class docstring)."""
        offset = check_int(offset, "offset")
        if offset > self._size:
            raise ValueError(
                f"offset {offset} is past the buffer's {self._size} bytes")
        length = self._size - offset if length is None else check_int(
            length, "length")
        if length > self._size - offset:
            raise ValueError(
                f"[{offset}, {offset} + {length}) exceeds the buffer's "
                f"{self._size} bytes")
        return memoryview(self._exporter(offset, length)).cast("B")

    def numpy(self, dtype: Any = None, shape: Optional[Shape] = None,
              offset: Index = 0,
              strides: Optional[Sequence[SupportsIndex]] = None) -> Any:
        """A numpy array over a host-visible buffer, without a copy.

        |dtype| (default: the buffer's ``dtype``, else uint8; the bytes as
        uint8 for a "bfloat16" buffer, which numpy has no dtype for), |shape|
        (default: the buffer's ``shape`` for an array of its dtype from
        offset 0 in C order, else as many items as fit from |offset| to the
        end; an int or a tuple), |offset| in bytes and |strides| in bytes
        (default C order) are numpy's. ValueError if the
        array does not fit in the buffer, naming the bytes it needs and the
        buffer's size (numpy checks the extent of an array with |strides|).
        The array keeps the mapping alive (see the class docstring). TypeError for a dtype of Python objects
        (dtype object, or a structured dtype with an object field): the
        buffer's bytes are not pointers into this process.
        """
        np = _numpy()
        dtype, shape, offset = self._layout(dtype, shape, offset, strides)
        exporter = self._exporter(0, self._size)
        return np.ndarray(shape, dtype, buffer=exporter, offset=offset,
                          strides=strides)

    def _layout(self, dtype: Any, shape: Any, offset: Index,
                strides: Optional[Sequence[SupportsIndex]]
                ) -> Tuple[Any, Tuple[int, ...], int]:
        """numpy()'s dtype, shape and offset for its arguments (defaults
        resolved, checked against the buffer), without making the array."""
        np = _numpy()
        own = self._numpy_dtype()
        dtype = np.dtype(dtype) if dtype is not None else \
            own if own is not None else np.dtype("uint8")
        refuse_object_dtype(dtype, "Buffer.numpy")
        offset = check_int(offset, "offset")
        if shape is None and offset == 0 and strides is None and \
                self.shape is not None and own is not None and dtype == own:
            shape = self.shape
        if offset > self._size:
            raise ValueError(
                f"offset {offset} is past the buffer's {self._size} bytes")
        if shape is None:
            available = self._size - offset
            if dtype.itemsize == 0 or available % dtype.itemsize:
                raise ValueError(
                    f"{available} bytes from offset {offset} are not a whole "
                    f"number of {dtype} items ({dtype.itemsize} bytes); pass "
                    "a shape")
            shape = (available // dtype.itemsize,)
        else:
            shape = check_shape(shape)
        if strides is None:
            nbytes = math.prod(shape) * dtype.itemsize
            if nbytes > self._size - offset:
                raise ValueError(
                    f"shape {shape} of {dtype} is {nbytes} bytes: [{offset}, "
                    f"{offset} + {nbytes}) exceeds the buffer's {self._size} "
                    "bytes")
        return dtype, shape, offset

    # ---------------------------------------------------------- protocols

    def _host_only(self, what: str,
                   error: Type[Exception] = BufferError,
                   otherwise: str = "or copy it out with read()") -> int:
        """The host address of a host-visible buffer; |error| naming |what|
        for a device buffer (which numpy, DLPack and the buffer protocol
        each report with their own exception type)."""
        if self._host_pointer is None:
            raise error(
                f"{what}: {self._handle.name} is a device buffer, not in "
                "this process's memory; create it with "
                f"memory='host_visible' ({otherwise})")
        return self._host_pointer

    def __dlpack__(self, *, stream: Optional[int] = None,
                   max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None,
                   copy: Optional[bool] = None) -> _dlpack.CapsuleType:
        """The DLPack protocol: a capsule over this host-visible buffer,
        no copy, on kDLCPU: an array of its ``dtype`` and ``shape`` as
        numpy() makes it (of uint8, one dimension, without a dtype, or
        with one DLPack has no code for, or without numpy; BufferError if
        its dtype and shape do not fit the buffer); DLPack 1.0
        ("dltensor_versioned", writable) if |max_version| allows it, else
        the unversioned capsule. numpy.from_dlpack()
        and torch.from_dlpack() consume it; the consumer's array keeps the
        mapping alive (like numpy()) until it is freed. BufferError for a
        device buffer, or if a copy or another device is asked for."""
        self._check_allocated()
        address = self._host_only("__dlpack__")
        if stream is not None and stream != -1:
            raise BufferError(
                f"__dlpack__: a host buffer takes no stream (got {stream!r})")
        if dl_device is not None and tuple(dl_device) != (
                _dlpack.KDLCPU, 0):
            raise BufferError(
                f"__dlpack__: the buffer is on the CPU (kDLCPU, 0), not "
                f"{tuple(dl_device)}; copy it there yourself")
        if copy:
            raise BufferError(
                "__dlpack__: copy=True is not offered; export, then copy "
                "with the consumer (numpy.array(...))")
        versioned = max_version is not None and \
            tuple(max_version)[0] >= _dlpack.VERSION[0]
        return _dlpack.export(self._handle, address, versioned,
                              *self._dlpack_layout())

    def _numpy_dtype(self) -> Any:
        """The buffer's ``dtype`` as a numpy dtype; None without one, or
        for a name numpy has no dtype for (NAMED_DTYPES: "bfloat16" for
        halogpu.triton): numpy(), numpy.asarray() and DLPack then give its
        bytes. Any other dtype was checked when assigned."""
        if self._dtype is None or is_named_dtype(self._dtype):
            return None
        return _numpy().dtype(self._dtype)

    def _dlpack_layout(self) -> Tuple[Tuple[int, int], Tuple[int, ...]]:
        """The DLPack type (code, bits) and shape of the buffer's array:
        its dtype's and shape's (numpy() from offset 0), else its bytes.
        BufferError if they do not fit the buffer."""
        raw = ((_dlpack.KDLUINT, 8), (self._size,))
        try:
            dtype = self._numpy_dtype()
        except ImportError:
            return raw
        code = None if dtype is None else _dlpack.type_code(dtype)
        if code is None:
            return raw
        try:
            return code, self._layout(dtype, None, 0, None)[1]
        except ValueError as error:
            raise BufferError(f"__dlpack__: {error}") from None

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(kDLCPU, 0) for a host-visible buffer; BufferError for a device
        buffer."""
        self._host_only("__dlpack_device__")
        return (_dlpack.KDLCPU, 0)

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> Any:
        """``numpy.asarray(buffer)``: a host-visible buffer's array as
        numpy() makes it (its dtype and shape, else its bytes as uint8),
        without a copy; a copy if |copy| is True or another |dtype| is
        asked for. TypeError for a device
        buffer (numpy would otherwise make a 0-d object array) and for a
        |dtype| of Python objects (as numpy() refuses it)."""
        self._host_only("numpy.asarray", TypeError,
                        "or read it: numpy.frombuffer(buffer.read(), dtype)")
        if dtype is not None:
            dtype = _numpy().dtype(dtype)
            refuse_object_dtype(dtype, "numpy.asarray")
        array = self.numpy()
        if dtype is not None and dtype != array.dtype:
            if copy is False:
                raise ValueError(
                    f"numpy.asarray: a {dtype} array of the buffer's bytes "
                    "needs a copy (view it with buffer.numpy(dtype))")
            return array.astype(dtype)
        return array.copy() if copy else array

    # ---------------------------------------------------------- sharing

    def export(self) -> str:
        """A token (32 hex digits) another client can pass to
        Client.import_buffer(). FailedPreconditionError unless the buffer
        was created with exportable=True. Treat it like a password."""
        lib = _lib.load()
        token = _lib.Token()
        with self._call():
            status = lib.halo_buffer_export(self._handle.pointer,
                                            ctypes.byref(token))
        check(lib, status)
        return format_token(lib, token)


def make_buffer(client: "Client", session: _core.Session, pointer: Optional[int],
                device: Optional[int], exportable: Optional[bool]) -> Buffer:
    """Wraps a new halo_buffer_t (called inside the creating Call)."""
    lib = _lib.load()
    handle_value = lib.halo_buffer_handle(pointer)
    handle = _core.Handle(session, pointer, lib.halo_buffer_release,
                          "buffer", f"buffer 0x{handle_value:x}")
    kind = MemoryType(lib.halo_buffer_memory_type(pointer))
    host = lib.halo_buffer_host_pointer(pointer) if \
        kind == MemoryType.HOST_VISIBLE else None
    return Buffer(client, handle, handle_value, lib.halo_buffer_size(pointer),
                  kind, device, host, exportable)
