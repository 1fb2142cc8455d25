# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Command buffers: recorded once, validated and memoized by the daemon,
executed any number of times with a binding table."""

import ctypes
import itertools
import struct
import threading
import weakref
from typing import (TYPE_CHECKING, Any, Dict, Iterable, List, Optional,
                    Sequence, Tuple, Union)

from . import _core, _lib
from ._object import HaloObject, check_client, check_int
from .buffer import Buffer, BufferRef, SlotRef, readable
from .errors import ClosedError, check
from .executable import Executable

if TYPE_CHECKING:
    from .client import Client


class _BindingTableArgument:
    """The dispatch argument that passes the address of the submission's
    binding table (binding_capacity uint64 addresses)."""

    _instance = None

    def __new__(cls) -> "_BindingTableArgument":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "halogpu.BINDING_TABLE"

    def __reduce__(self) -> str:
        return "BINDING_TABLE"


BINDING_TABLE = _BindingTableArgument()

# A None dispatch argument: a null device pointer (64 bits on every driver).
_NULL_POINTER = bytes(8)

# libhalo has no public handle accessor for command buffers: number them.
_numbers = itertools.count(1)

# halogpu.constant()'s type names, then their short forms.
_CONSTANT_NAMES = {
    "int8": "b", "uint8": "B", "int16": "h", "uint16": "H",
    "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q",
    "float16": "e", "float32": "f", "float64": "d", "bool": "?",
}
_CONSTANT_SHORT_NAMES = {
    "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I",
    "i64": "q", "u64": "Q", "f16": "e", "f32": "f", "f64": "d",
}
_CONSTANT_FORMATS = {**_CONSTANT_NAMES, **_CONSTANT_SHORT_NAMES}
# bfloat16 (struct has no such format): float32's upper half, rounded.
_BFLOAT16_NAMES = ("bfloat16", "bf16")


def _bfloat16_bits(value: Any) -> int:
    """|value| as bfloat16's 16 bits: float32's, rounded to nearest even
    (a NaN stays a quiet NaN)."""
    bits: int = struct.unpack("=I", struct.pack("=f", value))[0]
    if bits & 0x7F800000 == 0x7F800000 and bits & 0x7FFFFF:
        return (bits >> 16) | 0x40
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


class Constant:
    """Bytes passed by value to a dispatch (a CONSTANT argument)."""

    __slots__ = ("data",)

    def __init__(self, data: Union[bytes, bytearray, memoryview]) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"Constant takes bytes, not {type(data).__name__}")
        data = bytes(data)
        if not 0 < len(data) <= _lib.MAX_CONSTANT_BYTES:
            raise ValueError(
                f"a constant is 1..{_lib.MAX_CONSTANT_BYTES} bytes, not "
                f"{len(data)}")
        self.data = data

    def __repr__(self) -> str:
        return f"halogpu.Constant({self.data!r})"


def _refuse_arrays(value: Any, dtype: str) -> None:
    """TypeError if |value| (a scalar, or a tuple or list of them) is or
    holds an array of one or more dimensions: a constant packs scalars."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    for item in values:
        shape = getattr(item, "shape", None)
        if isinstance(shape, tuple) and shape != ():
            items = getattr(item, "size", "n")
            raise TypeError(
                f"halogpu.constant(..., {dtype!r}) packs scalars (numbers, "
                f"numpy scalars, 0-d arrays), not an array of shape {shape}: "
                "pass array.item() for one value, or tuple(array.tolist()) "
                f"with a format of as many items ('{items}I', '{items}f')")


def constant(value: Any, dtype: Any) -> Constant:
    """A constant argument: |value| (a scalar: a number, a numpy scalar or
    0-d array; or a tuple or list of them for a format of several items)
    packed as |dtype|, a numpy-style name ("uint32", "float32", "int64",
    ..., "bfloat16"; "u32", "f32", "bf16" for short) or a struct format
    ("<I", "2f", ...). ValueError listing the type names for any other
    |dtype|, and for a |value| that |dtype| cannot hold (1e6 as float16,
    -1 as uint32, a string); TypeError for an array of one or more
    dimensions (a numpy array, not a scalar)."""
    if not isinstance(dtype, str):
        dtype = getattr(dtype, "__name__", None) or str(dtype)
    _refuse_arrays(value, dtype)
    if dtype.lower() in _BFLOAT16_NAMES:
        values = value if isinstance(value, (tuple, list)) else (value,)
        try:
            return Constant(b"".join(
                struct.pack("=H", _bfloat16_bits(v)) for v in values))
        except (struct.error, OverflowError) as error:
            raise ValueError(f"cannot pack {value!r} as {dtype!r}: {error}") \
                from None
    fmt = _CONSTANT_FORMATS.get(dtype.lower(), dtype)
    if fmt[:1] not in "<>=!@":
        fmt = "=" + fmt  # native byte order, no padding
    try:
        struct.calcsize(fmt)
    except struct.error as error:
        raise ValueError(
            f"constant type {dtype!r} is neither a type name "
            f"({', '.join(_CONSTANT_NAMES)}, bfloat16; "
            f"{', '.join(_CONSTANT_SHORT_NAMES)}, bf16 for short) nor a struct "
            f"format ('<I', '2f', ...): {error}") from None
    try:
        if isinstance(value, (tuple, list)):
            data = struct.pack(fmt, *value)
        else:
            data = struct.pack(fmt, value)
    except (struct.error, OverflowError) as error:  # 1e6 as float16
        raise ValueError(f"cannot pack {value!r} as {dtype!r}: {error}") \
            from None
    return Constant(data)


def constant_bytes(value: Any, what: str) -> bytes:
    """The bytes of a constant-like |value| (Constant, bytes, a numpy scalar
    or 0-d array, a ctypes instance)."""
    if isinstance(value, Constant):
        return value.data
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    elif isinstance(value, (ctypes._SimpleCData, ctypes.Structure,
                            ctypes.Union, ctypes.Array)):
        data = ctypes.string_at(ctypes.addressof(value), ctypes.sizeof(value))
    elif getattr(value, "shape", None) == () and hasattr(value, "tobytes") \
            and hasattr(value, "dtype"):
        data = value.tobytes()  # a numpy scalar or 0-d array
    elif isinstance(value, float):
        raise TypeError(
            f"{what}: a plain float has no size; pass "
            f"numpy.float32({value!r}), ctypes.c_float({value!r}) or "
            f"halogpu.constant({value!r}, 'float32') (with the kernel's "
            "type: float64, c_double for a double)")
    elif isinstance(value, (bool, int)):
        raise TypeError(
            f"{what}: a plain {type(value).__name__} has no size; pass "
            f"numpy.uint32({value!r}), ctypes.c_uint32({value!r}) or "
            f"halogpu.constant({value!r}, 'uint32') (with the kernel's type)")
    else:
        raise TypeError(
            f"{what}: expected a Buffer, BufferRef, halogpu.slot(), "
            f"halogpu.BINDING_TABLE or a constant (numpy scalar, ctypes "
            f"value, bytes, halogpu.constant), not {type(value).__name__}")
    if not 0 < len(data) <= _lib.MAX_CONSTANT_BYTES:
        raise ValueError(
            f"{what}: a constant is 1..{_lib.MAX_CONSTANT_BYTES} bytes, not "
            f"{len(data)}")
    return data


def _dims(value: Any, name: str, minimum: int) -> Tuple[int, int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    try:
        value = tuple(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an int or a tuple of 1 to 3 ints") from None
    if not 1 <= len(value) <= 3:
        raise ValueError(f"{name} must have 1 to 3 dimensions, not "
                         f"{len(value)}")
    dims = [check_int(v, f"{name}[{i}]", minimum, 2**32 - 1)
            for i, v in enumerate(value)] + [1] * (3 - len(value))
    return (dims[0], dims[1], dims[2])


class CommandBuffer(HaloObject):
    """A recording of commands for one device (Client.record).

    Record with fill / copy / update / dispatch / dispatch_indirect /
    barrier, then end(): nothing goes to the daemon until end(), which
    validates and memoizes the recording (errors name the command index and
    argument). Used as ``with client.record(bindings=4) as cb:`` the block's
    end calls end(); if the block raised, or end() failed, it releases the
    recording (and end()'s error propagates).

    Buffer references: a Buffer (all of it), buffer.ref(offset, length)
    (direct) or halogpu.slot(i, offset, length) (entry i of the binding table
    passed to execute()).

    Thread safety: record calls are serialized by a lock; after end() the
    command buffer may be executed from any number of threads. Lifetime:
    buffers and executables referenced directly are kept alive until end()
    returns (the recording holds their handles only); after end() the
    daemon holds its own references, and execute() keeps what a submission
    uses alive until the work is done. Recording after end() or release()
    raises ClosedError and holds nothing.
    """

    _kind = "command buffer"

    def __init__(self, client: "Client", handle: _core.Handle, device: int,
                 flags: int, binding_capacity: int) -> None:
        super().__init__(client, handle, None)
        self._device = device
        self._flags = flags
        self._binding_capacity = binding_capacity
        self._lock = threading.Lock()
        self._ended = False
        self._memo_hit: Optional[bool] = None
        self._held: Dict[int, _core.Handle] = {}  # id(handle) -> handle held until end()
        # Releasing the recording also lets go of what it holds.
        self._finalizer.detach()
        self._finalizer = weakref.finalize(  # type: ignore[call-arg]
            self, _release_recording, handle,  # type: ignore[arg-type]
            self._held, self._lock)
        self._finalizer.atexit = False

    @property
    def device(self) -> int:
        """The device ordinal it records for."""
        return self._device

    @property
    def binding_capacity(self) -> int:
        """The binding table's slots (Client.record(bindings=...))."""
        return self._binding_capacity

    @property
    def one_shot(self) -> bool:
        """True if executed at most once (Client.record(one_shot=True))."""
        return bool(self._flags & _lib.COMMAND_BUFFER_ONE_SHOT)

    @property
    def unaligned_bindings(self) -> bool:
        """True if kernel buffer arguments need not be 16-byte aligned.

        Set by Client.record(unaligned_bindings=True)."""
        return bool(self._flags & _lib.COMMAND_BUFFER_UNALIGNED_BINDINGS)

    @property
    def ended(self) -> bool:
        """True once end() succeeded."""
        return self._ended

    @property
    def memo_hit(self) -> Optional[bool]:
        """After end(): True if the daemon already had an identical
        prepared recording (None before end())."""
        return self._memo_hit

    def __enter__(self) -> "CommandBuffer":
        return self

    def __exit__(self, *exc_info: object) -> None:
        if exc_info[0] is None and not self._ended:
            try:
                self.end()
            except BaseException:
                self.release()  # a failed end() leaves nothing to use
                raise
        elif exc_info[0] is not None:
            self.release()

    # ---------------------------------------------------------- helpers

    def _check_recording(self) -> None:
        """Under self._lock: raises ClosedError once nothing may be
        recorded (after end(), or once released)."""
        if self._ended:
            raise ClosedError(
                "the command buffer was ended; nothing can be recorded "
                "after end()")
        self._check_alive()

    def _hold(self, handle: _core.Handle) -> None:
        """Holds |handle| until end() or release(). Checked under the lock
        first: a command buffer that can no longer record holds nothing
        (end() and release() let go of what is held, under the lock)."""
        with self._lock:
            self._check_recording()
            if id(handle) not in self._held:
                _core.hold(handle)
                self._held[id(handle)] = handle

    def _ref(self, value: Any, what: str,
             handles: List[_core.Handle]) -> _lib.BufferRef:
        """A _lib.BufferRef for |value|; holds and collects the handle of a
        direct reference. NotFoundError for a buffer Queue.dealloca() took
        (ClosedError for a released one)."""
        if isinstance(value, Buffer):
            value = BufferRef(value)
        if isinstance(value, BufferRef):
            buffer = value.buffer
            check_client(buffer, self._client, what)
            buffer._check_allocated()
            self._hold(buffer._handle)
            handles.append(buffer._handle)
            length = _lib.WHOLE_BUFFER if value.length is None else \
                value.length
            return _lib.BufferRef(None, 0, value.offset, length)
        if isinstance(value, SlotRef):
            if value.slot >= self._binding_capacity:
                raise ValueError(
                    f"{what}: slot {value.slot} is out of range (the "
                    f"binding capacity is {self._binding_capacity})")
            length = _lib.WHOLE_BUFFER if value.length is None else \
                value.length
            return _lib.BufferRef(None, value.slot, value.offset, length)
        raise TypeError(
            f"{what}: expected a Buffer, BufferRef or halogpu.slot(), not "
            f"{type(value).__name__}")

    def _record(self, function: Any, handles: List[_core.Handle], *args: Any,
                refs: Sequence[Tuple[Any, Optional[_core.Handle]]] = ()
                ) -> None:
        """Calls libhalo's record |function| with the C pointers of the
        direct references |refs| (pairs of _lib.BufferRef and handle index
        in |handles|) filled in inside the call."""
        lib = _lib.load()
        with self._lock:
            self._check_recording()
            with _core.Call(self._handle.session, self._handle, *handles):
                for ref, handle in refs:
                    if handle is not None:
                        ref.buffer = handle.pointer
                status = function(self._handle.pointer, *args)
        check(lib, status)

    # ---------------------------------------------------------- commands

    def fill(self, target: Any, pattern: Any) -> None:
        """Fills |target| with a 1-, 2- or 4-byte |pattern| (bytes, a numpy
        scalar, a ctypes value). Target offset and length are multiples of
        the pattern size. A slot reference needs a length
        (``halogpu.slot(i, offset, length)``; InvalidArgumentError
        without); a direct one without a length fills the rest of its
        buffer."""
        data = constant_bytes(pattern, "pattern")
        if len(data) not in (1, 2, 4):
            raise ValueError(
                f"a fill pattern is 1, 2 or 4 bytes, not {len(data)}")
        handles: List[_core.Handle] = []
        ref = self._ref(target, "target", handles)
        pattern_buffer = ctypes.create_string_buffer(data, len(data))
        lib = _lib.load()
        self._record(lib.halo_command_buffer_fill, handles, ref,
                     pattern_buffer, len(data),
                     refs=[(ref, handles[0] if handles else None)])

    def copy(self, source: Any, target: Any) -> None:
        """Copies |source| to |target| (equal lengths).

        A reference without a length takes the other side's. Where neither
        side has one, a direct reference (a Buffer, buffer.ref()) covers
        the rest of its buffer and a slot reference takes that length; two
        slot references without a length are refused
        (InvalidArgumentError)."""
        handles: List[_core.Handle] = []
        source_ref = self._ref(source, "source", handles)
        source_handle = handles[-1] if handles else None
        count = len(handles)
        target_ref = self._ref(target, "target", handles)
        target_handle = handles[-1] if len(handles) > count else None
        lib = _lib.load()
        self._record(lib.halo_command_buffer_copy, handles, source_ref,
                     target_ref, refs=[(source_ref, source_handle),
                                       (target_ref, target_handle)])

    def update(self, data: Any, target: Any) -> None:
        """Writes bytes-like |data| (copied now, at most 64 KiB) to
        |target|: all of |data|'s bytes, which a reference's length, if it
        has one, must equal."""
        pointer, length, keep = readable(data)
        if not 0 < length <= _lib.MAX_UPDATE_BYTES:
            raise ValueError(
                f"an update writes 1..{_lib.MAX_UPDATE_BYTES} bytes, not "
                f"{length}")
        handles: List[_core.Handle] = []
        ref = self._ref(target, "target", handles)
        lib = _lib.load()
        self._record(lib.halo_command_buffer_update, handles, pointer,
                     length, ref,
                     refs=[(ref, handles[0] if handles else None)])
        del keep

    def _dispatch_params(self, executable: Executable, entry: str, grid: Any,
                         block: Any, args: Iterable[Any], shared_memory: int,
                         indirect: bool) -> Tuple[Any, List[_core.Handle],
                                                  List[Tuple[int, Any]],
                                                  List[Any], Any]:
        if not isinstance(executable, Executable):
            raise TypeError(
                f"expected an Executable, not {type(executable).__name__}")
        check_client(executable, self._client, "executable")
        if not isinstance(entry, str) or not entry:
            raise TypeError("entry must be a non-empty str")
        block = _dims(block, "block", 1)
        grid = (1, 1, 1) if grid is None else _dims(grid, "grid", 0)
        shared_memory = check_int(shared_memory, "shared_memory", 0,
                                  2**32 - 1)
        args = list(args)
        if len(args) > _lib.MAX_DISPATCH_ARGS:
            raise ValueError(
                f"{len(args)} arguments exceed the limit of "
                f"{_lib.MAX_DISPATCH_ARGS}")
        handles: List[_core.Handle] = []
        refs = []
        keep: List[Any] = []
        c_args = (_lib.DispatchArg * max(1, len(args)))()
        for i, value in enumerate(args):
            what = f"argument {i}"
            c_arg = c_args[i]
            if value is BINDING_TABLE:
                if self._binding_capacity == 0:
                    raise ValueError(
                        f"{what}: BINDING_TABLE in a command buffer without "
                        "bindings")
                c_arg.kind = _lib.DISPATCH_ARG_BINDING_TABLE
            elif isinstance(value, (Buffer, BufferRef, SlotRef)):
                count = len(handles)
                ref = self._ref(value, what, handles)
                c_arg.kind = _lib.DISPATCH_ARG_BUFFER
                c_arg.ref = ref
                refs.append((i, handles[-1] if len(handles) > count
                             else None))
            else:
                # None: a null pointer, the address 0 as a 64-bit constant
                # (a kernel's optional pointer, Triton's scratch pointers).
                data = (_NULL_POINTER if value is None
                        else constant_bytes(value, what))
                storage = ctypes.create_string_buffer(data, len(data))
                keep.append(storage)
                c_arg.kind = _lib.DISPATCH_ARG_CONSTANT
                c_arg.data = ctypes.addressof(storage)
                c_arg.size = len(data)
        self._hold(executable._handle)
        handles.append(executable._handle)
        params = _lib.DispatchParams()
        params.entry = entry.encode()
        params.grid[:] = grid
        params.block[:] = block
        params.shared_memory_bytes = shared_memory
        params.args = c_args
        params.arg_count = len(args)
        keep.append(c_args)
        return params, handles, refs, keep, c_args

    def dispatch(self, executable: Executable, entry: str, grid: Any,
                 block: Any = 1, args: Iterable[Any] = (),
                 shared_memory: int = 0) -> None:
        """Records a dispatch of |entry| of |executable|.

        |grid| (workgroups, CUDA blocks) and |block| (workgroup size, CUDA
        threads per block) are ints or tuples of up to 3 ints. A 0 in
        |grid| makes a no-op (checked like any dispatch; the rest of the
        command buffer runs and signals as usual); |block| is at least 1
        in each dimension. |args| are in the kernel's parameter order: a
        Buffer / BufferRef / halogpu.slot() passes an address,
        halogpu.BINDING_TABLE the binding table's address, None a null
        pointer (8 zero bytes), anything else is a constant passed by value
        (numpy scalar, ctypes value, bytes, halogpu.constant(); plain ints
        are refused: their size is unknown).
        |shared_memory| is the dynamic shared memory in bytes. On a CUDA
        device the arguments may take at most 8 KiB of kernel parameters
        (HALO_MAX_CUDA_PARAMETER_BYTES in halo.h, each argument counted
        16-byte aligned); end() fails with InvalidArgumentError past it."""
        self._dispatch(executable, entry, grid, block, args, shared_memory,
                       None)

    def dispatch_indirect(self, executable: Executable, entry: str,
                          workgroup_count: Any, block: Any = 1,
                          args: Iterable[Any] = (),
                          shared_memory: int = 0) -> None:
        """Like dispatch(), with the grid read at execution from
        |workgroup_count|: a reference to three uint32 (12 bytes). A 0
        count makes that execution's dispatch a no-op."""
        self._dispatch(executable, entry, None, block, args, shared_memory,
                       workgroup_count)

    def _dispatch(self, executable: Executable, entry: str, grid: Any,
                  block: Any, args: Iterable[Any], shared_memory: int,
                  workgroup_count: Any) -> None:
        params, handles, refs, keep, c_args = self._dispatch_params(
            executable, entry, grid, block, args, shared_memory,
            workgroup_count is not None)
        lib = _lib.load()
        extra: Tuple[Any, ...] = ()
        count_ref = None
        count_handle = None
        if workgroup_count is not None:
            count = len(handles)
            count_ref = self._ref(workgroup_count, "workgroup_count", handles)
            if len(handles) > count:
                count_handle = handles[-1]
            extra = (count_ref,)
        with self._lock:
            self._check_recording()
            with _core.Call(self._handle.session, self._handle, *handles):
                params.executable = executable._handle.pointer
                for i, handle in refs:
                    if handle is not None:
                        c_args[i].ref.buffer = handle.pointer
                if count_ref is not None and count_handle is not None:
                    count_ref.buffer = count_handle.pointer
                if workgroup_count is None:
                    status = lib.halo_command_buffer_dispatch(
                        self._handle.pointer, ctypes.byref(params))
                else:
                    status = lib.halo_command_buffer_dispatch_indirect(
                        self._handle.pointer, ctypes.byref(params), *extra)
        del keep
        check(lib, status)

    def barrier(self) -> None:
        """Everything recorded before runs before anything recorded after;
        commands between barriers may run concurrently."""
        lib = _lib.load()
        self._record(lib.halo_command_buffer_barrier, [])

    def end(self) -> "CommandBuffer":
        """Sends the recording; the daemon validates and memoizes it. After
        a failed end() the command buffer can only be released."""
        lib = _lib.load()
        with self._lock:
            if self._ended:
                raise ClosedError("end() was already called")
            try:
                with self._call():
                    status = lib.halo_command_buffer_end(self._handle.pointer)
                    memo_hit: Optional[bool] = None if status else bool(
                        lib.halo_command_buffer_memo_hit(self._handle.pointer))
            finally:
                # The daemon holds its own references now (or the recording
                # failed): let go of ours.
                _unhold_all(self._held)
            check(lib, status)
            self._ended = True
            self._memo_hit = memo_hit
        return self


def _unhold_all(held: Dict[int, _core.Handle]) -> None:
    handles = list(held.values())
    held.clear()
    for handle in handles:
        _core.unhold(handle)


def _release_recording(handle: _core.Handle, held: Dict[int, _core.Handle],
                       lock: threading.Lock) -> None:
    _core.release(handle)
    # Under the recording's lock: a _hold() on another thread either
    # finds the handle released or holds before this lets go of all.
    with lock:
        handles = dict(held)
        held.clear()
    _unhold_all(handles)


def make_command_buffer(client: "Client", session: _core.Session,
                        pointer: Optional[int], device: int, flags: int,
                        binding_capacity: int) -> CommandBuffer:
    lib = _lib.load()
    handle = _core.Handle(session, pointer, lib.halo_command_buffer_release,
                          "command buffer",
                          f"command buffer #{next(_numbers)}")
    return CommandBuffer(client, handle, device, flags, binding_capacity)
