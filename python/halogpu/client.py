# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""The connection to halod."""

import ctypes
import math
import os
import weakref
from dataclasses import dataclass
from typing import (Any, Iterable, NoReturn, Optional, Sequence, Tuple,
                    Union)

from . import _core, _lib
from ._object import Index, Shape, check_int, check_shape, parse_token
from .buffer import (NAMED_DTYPES, MemoryType, _numpy, check_dtype,
                     is_named_dtype, make_buffer, memory_type,
                     refuse_object_dtype, refuse_objects)
from .command_buffer import make_command_buffer
from .errors import ClosedError, OutOfRangeError, check, take_error
from .executable import (ExecutableFormat, code_bytes, executable_format,
                         format_from_path, make_executable, options_array)
from .queue import execute, make_queue
from .semaphore import make_semaphore
from .buffer import Buffer
from .command_buffer import CommandBuffer
from .executable import Executable
from .queue import Queue
from .semaphore import Semaphore


# The largest buffer (bytes) create_buffer() takes.
MAX_BUFFER_SIZE = 2**40


@dataclass(frozen=True)
class Device:
    """A device the daemon serves (halo_device_info_t)."""

    ordinal: int
    driver: str  # "local" or "cuda"
    name: str
    memory_bytes: int
    compute_capability: Tuple[int, int]  # (major, minor); (0, 0) for the CPU driver
    multiprocessor_count: int


def connect(address: Optional[str] = None, *,
            client_name: Optional[str] = None,
            request_timeout: Optional[float] = None) -> "Client":
    """Connects to halod and returns a Client (a context manager: leaving
    the ``with`` block closes it).

    |address|: halod's ipc:// address; None: $HALO_ADDRESS, else
    ipc:///run/halo/halo.sock. |client_name| is shown to the operator by
    haloctl (None: the process name). |request_timeout| limits each request
    to the daemon, in seconds (None: 30).

    Raises UnavailableError if no daemon listens there,
    FailedPreconditionError on a protocol version mismatch or in a process
    forked after its parent connected (libhalo's transport, nng, would abort
    it: use multiprocessing's spawn or forkserver), LibraryError if libhalo
    cannot be loaded."""
    if address is not None:
        if not isinstance(address, str):
            raise TypeError(
                f"address must be a str, not {type(address).__name__}")
        if not address.startswith("ipc://"):
            raise ValueError(
                f"address {address!r} is not an ipc:// address (halo "
                "clients share memory with the daemon)")
    if client_name is not None and not isinstance(client_name, str):
        raise TypeError(
            f"client_name must be a str, not {type(client_name).__name__}")
    timeout_ms = 0
    if request_timeout is not None:
        if isinstance(request_timeout, bool) or not isinstance(
                request_timeout, (int, float)):
            raise TypeError("request_timeout must be seconds (int or float)")
        if not 0 < request_timeout * 1000 <= 2**31 - 1:
            raise ValueError(
                f"request_timeout {request_timeout} s is out of range")
        timeout_ms = max(1, int(request_timeout * 1000))
    lib = _lib.load()
    options = _lib.ClientOptions()
    if address is not None:
        options.address = address.encode()
    if client_name is not None:
        options.client_name = client_name.encode()
    options.request_timeout_ms = timeout_ms
    _core.check_can_connect()
    pointer = ctypes.c_void_p()
    check(lib, lib.halo_client_connect(ctypes.byref(options),
                                       ctypes.byref(pointer)))
    resolved = address or os.environ.get("HALO_ADDRESS") or \
        "ipc:///run/halo/halo.sock"
    return Client(_core.Session(lib, pointer.value, resolved))


class Client:
    """A session with halod (halogpu.connect()).

    Thread safety: a Client and every object made from it may be used from
    any number of threads at once.

    Lifetime: close() (or leaving the ``with`` block, or garbage
    collection of the Client once no object of it is left) ends the
    session: the daemon releases everything it held, exactly as if the
    process had exited. Every object of the client then raises ClosedError
    (a FailedPreconditionError) without calling libhalo, never a crash.
    close() waits for calls in flight on other threads (semaphore waits
    notice within 0.1 s and raise ClosedError). If numpy arrays or
    memoryviews of host-visible buffers are still alive, the memory stays
    mapped and the session open until the last of them is collected.

    fork(): a child process inherits no session; objects inherited from the
    parent raise ClosedError in the child. A child forked after the parent
    connected cannot connect at all (nng is not fork-safe), so start
    workers with multiprocessing's spawn or forkserver method (or fork
    before the first connect) and share objects with export() /
    import_*(). A Client and its objects cannot be pickled (as arguments
    of another process, say): that raises TypeError saying so.
    """

    def __init__(self, session: _core.Session) -> None:
        self._session = session
        self._devices: Optional[Tuple[Device, ...]] = None
        lib = session.lib
        self._session_id = lib.halo_client_session_id(session.pointer)
        self._daemon_pid = lib.halo_client_daemon_pid(session.pointer)
        # Garbage collection closes without waiting (it may run on a thread
        # in the middle of a call of this very session).
        self._finalizer = weakref.finalize(self, session.close, None, False)
        self._finalizer.atexit = False

    def __enter__(self) -> "Client":
        """ClosedError for a closed client (and in a forked child), as
        its first use in the block would raise."""
        if self._session.foreign():
            raise self._session.foreign_error()
        if self._session.closing:
            raise ClosedError(self._session.reason)
        return self

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a halogpu.Client cannot be pickled (or deep-copied): its "
            "session belongs to this process; connect in the other process "
            "and share buffers and semaphores by token (export(), "
            "import_buffer(), import_semaphore())")

    def __copy__(self) -> "Client":
        # copy.copy(): another Python object for the same session.
        alias = Client.__new__(Client)
        alias.__dict__.update(self.__dict__)
        return alias

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return (f"<halogpu.Client session {self._session_id} at "
                f"{self._session.address}{state}>")

    def close(self) -> None:
        """Ends the session (idempotent); see the class docstring."""
        self._finalizer.detach()
        self._session.close()

    @property
    def closed(self) -> bool:
        """True once close() was called (or the client was garbage
        collected), and in a process forked from the one that connected
        (where every use raises ClosedError)."""
        return self._session.closing or self._session.foreign()

    @property
    def address(self) -> str:
        """The daemon's address this client connected to."""
        return self._session.address

    @property
    def session_id(self) -> int:
        """The session id the daemon gave this client (haloctl shows it)."""
        return int(self._session_id)

    @property
    def daemon_pid(self) -> int:
        """The daemon's process id (from the kernel, not a message).

        0 where halod runs outside this process's pid namespace (a client
        in a container); the session works either way.
        """
        return int(self._daemon_pid)

    def _call(self, *handles: _core.Handle) -> _core.Call:
        return _core.Call(self._session, *handles)

    def ping(self) -> None:
        """A no-op round trip to the daemon."""
        lib = self._session.lib
        with self._call():
            status = lib.halo_client_ping(self._session.pointer)
        check(lib, status)

    @property
    def devices(self) -> Tuple[Device, ...]:
        """The devices the daemon serves (a tuple of Device; at least the
        CPU driver's). Asked once per client."""
        if self._devices is None:
            lib = self._session.lib
            count = ctypes.c_uint32()
            devices = []
            with self._call():
                check(lib, lib.halo_client_device_count(
                    self._session.pointer, ctypes.byref(count)))
                for ordinal in range(count.value):
                    info = _lib.DeviceInfo()
                    check(lib, lib.halo_client_device_info(
                        self._session.pointer, ordinal, ctypes.byref(info)))
                    devices.append(Device(
                        ordinal=info.ordinal,
                        driver=info.driver.decode(errors="replace"),
                        name=info.name.decode(errors="replace"),
                        memory_bytes=info.memory_bytes,
                        compute_capability=(info.compute_major,
                                            info.compute_minor),
                        multiprocessor_count=info.multiprocessor_count))
            self._devices = tuple(devices)
        return self._devices

    # ---------------------------------------------------------- buffers

    def create_buffer(self, size: Index, *, memory: Any = "device",
                      device: Index = 0,
                      exportable: bool = False) -> Buffer:
        """Allocates |size| bytes (1 .. 2**40) on |device|.

        |memory|: "device" (MemoryType.DEVICE, reached with read/write) or
        "host_visible" (MemoryType.HOST_VISIBLE: shared memory, viewable
        with numpy() / memoryview()). |exportable|: may be exported to
        other clients (export()). ResourceExhaustedError past the
        session's quota; OutOfRangeError for an unknown device."""
        size = check_int(size, "size", 1, MAX_BUFFER_SIZE)
        kind = memory_type(memory)
        device = check_int(device, "device", 0, 2**32 - 1)
        flags = _lib.OBJECT_FLAG_EXPORTABLE if exportable else 0
        lib = self._session.lib
        pointer = ctypes.c_void_p()
        with self._call():
            status = lib.halo_buffer_create(self._session.pointer, device,
                                            kind, size, flags,
                                            ctypes.byref(pointer))
            if not status:
                return make_buffer(self, self._session, pointer.value, device,
                                   bool(exportable))
        raise take_error(lib, status)

    def from_numpy(self, array: Any, *, memory: Any = "host_visible",
                   device: Index = 0,
                   exportable: bool = False) -> Buffer:
        """A new buffer holding a copy of |array| (any numpy array or
        array-like; made C-contiguous), its ``dtype`` and ``shape`` set to
        the array's. A host-visible buffer (the default) then gives that
        array back without a copy: ``buffer.numpy()``,
        ``numpy.asarray(buffer)``, ``torch.from_dlpack(buffer)``.
        |memory|, |device| and |exportable| are create_buffer()'s. An
        importer of an exported buffer (Client.import_buffer) gets its
        bytes, not its ``dtype`` and ``shape``: it sets them itself.

        An array in non-native byte order (``>f4`` on a little-endian
        host) is converted to the native order (the values are kept;
        kernels read native numbers) and ``dtype`` is the native dtype.
        TypeError for an array of Python objects (dtype object, or a
        structured dtype with an object field). If the copy fails (or is
        interrupted) the new buffer is released before the error
        propagates."""
        np = _numpy()
        shape = tuple(np.shape(array))  # () for a 0-d array: kept
        data = np.ascontiguousarray(array)
        refuse_objects(data)
        if data.nbytes == 0:
            raise ValueError("from_numpy: the array is empty")
        if not data.dtype.isnative:
            data = data.astype(data.dtype.newbyteorder("="))
        buffer = self.create_buffer(data.nbytes, memory=memory,
                                    device=device, exportable=exportable)
        try:
            buffer.write(data)
        except BaseException:
            # At once: a traceback kept (a notebook's last one) must not
            # keep the memory.
            buffer.release()
            raise
        buffer.dtype = data.dtype
        buffer.shape = shape
        return buffer

    def empty(self, shape: Optional[Shape] = None, dtype: Any = None, *,
              memory: Any = "host_visible", device: Index = 0,
              count: Optional[Index] = None,
              exportable: bool = False) -> Buffer:
        """A new buffer for an array of |shape| (a count of items, or a
        sequence of them, as numpy.empty takes it) of |dtype| (a numpy dtype
        or its name, or "bfloat16": 2 bytes an item, which numpy has no
        dtype for; see Buffer.dtype), its ``dtype`` and ``shape`` set; the
        contents are unspecified. |count| is the older name of a
        one-dimensional shape. |memory|, |device| and |exportable| are
        create_buffer()'s.

        A dtype in non-native byte order (``>f4`` on a little-endian host)
        gives the native dtype, as Client.from_numpy() makes it (kernels
        read native numbers). Before any buffer is made: ValueError for a
        shape of no items, for one past a buffer's 2**40 bytes (naming the
        shape), and for a dtype name numpy does not know (a typo such as
        "flaot32"); TypeError for a dtype of Python objects (dtype object,
        or a structured dtype with an object field)."""
        np = _numpy()
        if count is not None:
            if shape is not None:
                raise TypeError("Client.empty: shape or count, not both")
            shape = count
        if shape is None or dtype is None:
            raise TypeError("Client.empty needs a shape (or count) and a dtype")
        dtype = check_dtype(dtype, "Client.empty")
        if is_named_dtype(dtype):
            itemsize = NAMED_DTYPES[dtype]
        else:
            dtype = np.dtype(dtype)
            refuse_object_dtype(dtype, "Client.empty")
            if not dtype.isnative:
                dtype = dtype.newbyteorder("=")
            itemsize = dtype.itemsize
        dims = check_shape(shape)
        items = math.prod(dims)
        if items == 0:
            raise ValueError(f"Client.empty: shape {dims} holds no items")
        nbytes = items * itemsize
        if nbytes > MAX_BUFFER_SIZE:
            raise ValueError(
                f"Client.empty: shape {dims} of {dtype} is {nbytes} bytes, "
                f"past a buffer's {MAX_BUFFER_SIZE} (2**40)")
        buffer = self.create_buffer(nbytes, memory=memory, device=device,
                                    exportable=exportable)
        buffer.dtype = dtype
        buffer.shape = dims
        return buffer

    def import_buffer(self, token: Union[str, bytes, bytearray, memoryview]
                      ) -> Buffer:
        """Imports a buffer another client exported (its token: 32 hex
        digits, as text or ASCII bytes, or its 16 raw bytes). NotFoundError
        if no live exported buffer has it.

        The daemon shares the bytes, not the exporter's ``dtype`` and
        ``shape`` (Client.from_numpy(), Client.empty()): the imported
        buffer has neither (None; numpy() gives its bytes) until the
        importer sets them (``buffer.dtype = "float32"``,
        ``buffer.shape = (4, 4)``). ``device`` and ``exportable`` are None
        too."""
        c_token = parse_token(token)
        lib = self._session.lib
        pointer = ctypes.c_void_p()
        with self._call():
            status = lib.halo_buffer_import(self._session.pointer,
                                            ctypes.byref(c_token),
                                            ctypes.byref(pointer))
            if not status:
                return make_buffer(self, self._session, pointer.value, None,
                                   None)
        raise take_error(lib, status)

    # ---------------------------------------------------------- semaphores

    def create_semaphore(self, initial_value: Index = 0, *,
                         exportable: bool = False) -> Semaphore:
        """A timeline semaphore starting at |initial_value| (< 2**63)."""
        initial_value = check_int(initial_value, "initial_value", 0,
                                  _lib.SEMAPHORE_MAX_VALUE)
        flags = _lib.OBJECT_FLAG_EXPORTABLE if exportable else 0
        lib = self._session.lib
        pointer = ctypes.c_void_p()
        with self._call():
            status = lib.halo_semaphore_create(self._session.pointer,
                                               initial_value, flags,
                                               ctypes.byref(pointer))
            if not status:
                return make_semaphore(self, self._session, pointer.value)
        raise take_error(lib, status)

    def import_semaphore(self, token: Union[str, bytes, bytearray,
                                            memoryview]) -> Semaphore:
        """Imports a semaphore another client exported (its token: 32 hex
        digits, as text or ASCII bytes, or its 16 raw bytes)."""
        c_token = parse_token(token)
        lib = self._session.lib
        pointer = ctypes.c_void_p()
        with self._call():
            status = lib.halo_semaphore_import(self._session.pointer,
                                               ctypes.byref(c_token),
                                               ctypes.byref(pointer))
            if not status:
                return make_semaphore(self, self._session, pointer.value)
        raise take_error(lib, status)

    # ---------------------------------------------------------- executables

    def load_executable(self, code: Union[str, bytes, bytearray, memoryview],
                        format: Union[ExecutableFormat, str, int], *,
                        device: int = 0,
                        options: Optional[Sequence[str]] = None
                        ) -> Executable:
        """Loads |code| (bytes; str for PTX and CUDA source) of |format|
        (an ExecutableFormat or "elf", "ptx", "cubin", "fatbin", "cuda") on
        |device|. |options|: compiler options for CUDA source.

        The same code loaded by any number of clients is compiled once.
        UnimplementedError if the device's driver does not take |format|;
        InvalidArgumentError with the loader's or compiler's whole log if
        the code does not load; PermissionDeniedError for native code (ELF)
        from a uid the daemon does not trust."""
        fmt = executable_format(format)
        data = code_bytes(code, fmt)
        device = check_int(device, "device", 0, 2**32 - 1)
        option_array, option_count, keep = options_array(options)
        params = _lib.ExecutableParams()
        params.format = fmt
        buffer = ctypes.create_string_buffer(data, len(data))
        params.data = ctypes.addressof(buffer)
        params.size = len(data)
        params.options = option_array
        params.option_count = option_count
        return self._create_executable(device, fmt, params, keep)

    def _create_executable(self, device: int, fmt: ExecutableFormat,
                           params: Any, keep: Any) -> Executable:
        lib = self._session.lib
        pointer = ctypes.c_void_p()
        with self._call():
            status = lib.halo_executable_create(self._session.pointer, device,
                                                ctypes.byref(params),
                                                ctypes.byref(pointer))
            if not status:
                return make_executable(self, self._session, pointer.value,
                                       device, fmt, None)
        del keep
        raise take_error(lib, status)

    def load_executable_file(self, path: Union[str, bytes,
                                               "os.PathLike[str]"],
                             format: Union[ExecutableFormat, str, int,
                                           None] = None, *,
                             device: int = 0,
                             options: Optional[Sequence[str]] = None
                             ) -> Executable:
        """Loads the file at |path|; the format comes from the extension
        (.so ELF, .ptx, .cubin, .fatbin, .cu) unless |format| is given."""
        path = os.fspath(path)
        if not isinstance(path, str):
            path = os.fsdecode(path)
        fmt = format_from_path(path) if format is None else \
            executable_format(format)
        device = check_int(device, "device", 0, 2**32 - 1)
        if options is not None:
            with open(path, "rb") as file:
                code = file.read()
            return self.load_executable(code, fmt, device=device,
                                        options=options)
        lib = self._session.lib
        pointer = ctypes.c_void_p()
        with self._call():
            status = lib.halo_executable_create_from_file(
                self._session.pointer, device, os.fsencode(path), fmt,
                ctypes.byref(pointer))
            if not status:
                return make_executable(self, self._session, pointer.value,
                                       device, fmt, None)
        raise take_error(lib, status)

    def load_ptx(self, ptx: Union[str, bytes], *, device: int = 0
                 ) -> Executable:
        """Loads PTX text (str or bytes)."""
        return self.load_executable(ptx, ExecutableFormat.PTX, device=device)

    def load_cubin(self, cubin: bytes, *, device: int = 0) -> Executable:
        """Loads a CUBIN (bytes): a CUDA ELF image for the device's
        architecture (``nvcc -cubin``, ptxas, Triton's ``asm["cubin"]``).

        Raises InvalidArgumentError naming the field when its ELF tables do
        not lie within the bytes, and with CUDA_ERROR_NO_BINARY_FOR_GPU when
        it is for another architecture."""
        return self.load_executable(cubin, ExecutableFormat.CUBIN,
                                    device=device)

    def load_fatbin(self, fatbin: bytes, *, device: int = 0) -> Executable:
        """Loads a fat binary (bytes, ``nvcc -fatbin``); its entries must lie
        within the bytes and each uncompressed ELF image in it passes
        load_cubin's checks (else InvalidArgumentError)."""
        return self.load_executable(fatbin, ExecutableFormat.FATBIN,
                                    device=device)

    def load_cuda_source(self, source: Union[str, bytes], *, device: int = 0,
                         options: Optional[Sequence[str]] = None
                         ) -> Executable:
        """Compiles CUDA C++ |source| in the daemon (NVRTC) with |options|
        (e.g. ["-DN=4", "--use_fast_math"]: those that shape the code; any
        other, such as one that reads or writes a file, is refused naming
        it); the whole compiler log
        comes back in the InvalidArgumentError on failure. An #include
        reads only the CUDA toolkit's headers (<cuda_fp16.h> needs no
        -I)."""
        return self.load_executable(source, ExecutableFormat.CUDA_SOURCE,
                                    device=device, options=options)

    def load_shared_object(self, so: Union[str, bytes, "os.PathLike[str]"],
                           *, device: int = 0) -> Executable:
        """Loads a CPU-driver kernel library: a path (str or os.PathLike)
        or the bytes of an ELF shared object (see halo/local_kernel.h)."""
        if isinstance(so, (bytes, bytearray, memoryview)):
            return self.load_executable(so, ExecutableFormat.ELF,
                                        device=device)
        return self.load_executable_file(so, ExecutableFormat.ELF,
                                         device=device)

    # ---------------------------------------------------------- commands

    def record(self, bindings: int = 0, *, device: int = 0,
               one_shot: bool = False,
               unaligned_bindings: bool = False) -> CommandBuffer:
        """Begins a CommandBuffer on |device| (OutOfRangeError at once for
        one the daemon does not have) with a binding table of |bindings|
        slots (0 .. 4096). |one_shot|: executed at most once
        (else reusable). Use it as ``with client.record(bindings=4) as cb:``
        (end() at the end of the block) or call end() yourself.

        Every buffer address a dispatch passes to a kernel must be a
        multiple of 16 bytes (halogpu.DISPATCH_ALIGNMENT): compilers emit
        vectorized loads that fault the GPU on a lesser address. A direct
        reference's offset is checked by end(), a slot's bound address
        (buffer offset plus binding offset) by execute() (for a dispatch
        taking BINDING_TABLE, every bound slot), each an
        InvalidArgumentError naming the argument or the binding and its
        slot. |unaligned_bindings|: no such check, for kernels that take
        their arguments at any address (the flag is part of the daemon's
        memo key). Fill, copy and update need only their own element
        alignment either way."""
        bindings = check_int(bindings, "bindings", 0, _lib.MAX_BINDINGS)
        device = check_int(device, "device", 0, 2**32 - 1)
        # At once, as create_queue() does (the recording is made here and
        # reaches the daemon at end()).
        if device >= len(self.devices):
            raise OutOfRangeError(
                f"device {device} does not exist (the daemon has "
                f"{len(self.devices)})")
        flags = _lib.COMMAND_BUFFER_ONE_SHOT if one_shot else \
            _lib.COMMAND_BUFFER_REUSABLE
        if unaligned_bindings:
            flags |= _lib.COMMAND_BUFFER_UNALIGNED_BINDINGS
        lib = self._session.lib
        pointer = ctypes.c_void_p()
        with self._call():
            status = lib.halo_command_buffer_begin(self._session.pointer,
                                                   device, flags, bindings,
                                                   ctypes.byref(pointer))
            if not status:
                return make_command_buffer(self, self._session, pointer.value,
                                           device, flags, bindings)
        raise take_error(lib, status)

    # ---------------------------------------------------------- queues

    def create_queue(self, *, device: int = 0, priority: int = 0) -> Queue:
        """A Queue on |device| with |priority| (higher runs first where the
        driver supports priorities)."""
        device = check_int(device, "device", 0, 2**32 - 1)
        priority = check_int(priority, "priority", -2**31, 2**31 - 1)
        lib = self._session.lib
        pointer = ctypes.c_void_p()
        with self._call():
            status = lib.halo_queue_create(self._session.pointer, device,
                                           priority, ctypes.byref(pointer))
            if not status:
                return make_queue(self, self._session, pointer.value, device,
                                  priority)
        raise take_error(lib, status)

    def execute(self, command_buffer: CommandBuffer, bindings: Any = (),
                wait: Iterable[Tuple[Semaphore, int]] = (),
                signal: Iterable[Tuple[Semaphore, int]] = (), *,
                queue: Optional[Queue] = None) -> None:
        """Submits an ended |command_buffer|.

        |bindings|: the binding table, up to its binding capacity; each
        entry a Buffer, buffer.ref(offset, length), (buffer, offset[,
        length]) or None (unbound: fine for slots the recording does not
        use). |wait| and |signal|: (Semaphore, value) pairs. Returns as
        soon as the daemon accepted the submission; the work starts when
        every wait is met and signals every semaphore of |signal| when
        done; a failure fails the signal semaphores with the cause (so
        wait on them to learn it). The daemon keeps the command buffer and
        the bound buffers alive until the work is done, even if they are
        released meanwhile. |queue| None: the session's default queue of
        the command buffer's device."""
        execute(self, queue, command_buffer, bindings, wait, signal)


__all__ = ["Client", "Device", "MemoryType", "connect"]
