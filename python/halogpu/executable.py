# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Executables: code a device runs (PTX, CUBIN, FATBIN, CUDA source, ELF
shared objects for the CPU driver)."""

import ctypes
import enum
import os
from typing import (TYPE_CHECKING, Any, List, NamedTuple, Optional,
                    Sequence, Tuple, Union)

from . import _core, _lib
from ._object import HaloObject
from .errors import OutOfRangeError, check

if TYPE_CHECKING:
    from .client import Client


class ExecutableFormat(enum.IntEnum):
    """halo_executable_format_t."""

    ELF = 1  # a shared object for the local (CPU) driver
    PTX = 2
    CUBIN = 3
    FATBIN = 4
    CUDA_SOURCE = 5


_FORMAT_NAMES = {
    "elf": ExecutableFormat.ELF,
    "so": ExecutableFormat.ELF,
    "shared_object": ExecutableFormat.ELF,
    "ptx": ExecutableFormat.PTX,
    "cubin": ExecutableFormat.CUBIN,
    "fatbin": ExecutableFormat.FATBIN,
    "cuda": ExecutableFormat.CUDA_SOURCE,
    "cu": ExecutableFormat.CUDA_SOURCE,
    "cuda_source": ExecutableFormat.CUDA_SOURCE,
}

_EXTENSIONS = {
    ".so": ExecutableFormat.ELF,
    ".ptx": ExecutableFormat.PTX,
    ".cubin": ExecutableFormat.CUBIN,
    ".fatbin": ExecutableFormat.FATBIN,
    ".cu": ExecutableFormat.CUDA_SOURCE,
}


def executable_format(value: Union["ExecutableFormat", str, int]
                      ) -> "ExecutableFormat":
    """An ExecutableFormat from an ExecutableFormat, int or name ("elf",
    "so", "ptx", "cubin", "fatbin", "cuda")."""
    if isinstance(value, ExecutableFormat):
        return value
    if isinstance(value, str):
        try:
            return _FORMAT_NAMES[value.strip().lower().replace("-", "_")]
        except KeyError:
            raise ValueError(
                f"unknown executable format {value!r} (one of "
                f"{', '.join(sorted(_FORMAT_NAMES))})") from None
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return ExecutableFormat(value)
        except ValueError:
            raise ValueError(
                f"{value} is not a halo executable format") from None
    raise TypeError(
        f"format must be an ExecutableFormat or name, not "
        f"{type(value).__name__}")


def format_from_path(path: Union[str, "os.PathLike[str]"]
                     ) -> "ExecutableFormat":
    """The format a file name's extension says (as libhalo guesses it)."""
    extension = os.path.splitext(os.fspath(path))[1]
    try:
        return _EXTENSIONS[extension]
    except KeyError:
        raise ValueError(
            f"cannot tell the format of {os.fspath(path)!r} from its "
            "extension (.so, .ptx, .cubin, .fatbin or .cu); pass format="
        ) from None


def code_bytes(data: Union[str, bytes, bytearray, memoryview],
               fmt: "ExecutableFormat") -> bytes:
    """The bytes of |data| for |fmt|: text formats (PTX, CUDA source) take
    str or bytes, binary ones bytes-like."""
    if isinstance(data, str):
        if fmt not in (ExecutableFormat.PTX, ExecutableFormat.CUDA_SOURCE):
            raise TypeError(
                f"{fmt.name} code is binary: pass bytes, not str")
        data = data.encode()
    elif isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
    else:
        raise TypeError(
            f"executable code must be bytes (or str for PTX and CUDA "
            f"source), not {type(data).__name__}")
    if not data:
        raise ValueError("executable code is empty")
    return data


def options_array(options: Optional[Sequence[str]]
                  ) -> Tuple[Any, int, Any]:
    """(ctypes array of char*, count, keep-alive) for compiler options."""
    if options is None:
        return None, 0, None
    if isinstance(options, (str, bytes)):
        raise TypeError("options must be a sequence of str, not one string")
    encoded = []
    for i, option in enumerate(options):
        if not isinstance(option, str):
            raise TypeError(
                f"options[{i}] must be a str, not {type(option).__name__}")
        if "\0" in option:
            raise ValueError(f"options[{i}] contains a NUL character")
        encoded.append(option.encode())
    if not encoded:
        return None, 0, None
    array = (ctypes.c_char_p * len(encoded))(*encoded)
    return array, len(encoded), (array, encoded)


class Parameter(NamedTuple):
    """One parameter of a kernel entry point (halo_parameter_t): where it
    lies in the kernel's parameter block and how many bytes it has (a
    pointer, a BINDING_TABLE: 8)."""

    offset: int
    size: int


class Executable(HaloObject):
    """Code loaded on one device (Client.load_executable and friends).

    The daemon content-hashes what it loads: the same code (and options)
    loaded by any number of clients is one executable there, compiled once.
    Thread safety: usable from any thread; a command buffer that records a
    dispatch of it keeps it alive until its end()."""

    _kind = "executable"

    def __init__(self, client: "Client", handle: _core.Handle,
                 ident: Optional[int], device: int, fmt: "ExecutableFormat",
                 content_hash: str, cache_hit: bool) -> None:
        super().__init__(client, handle, ident)
        self._device = device
        self._format = fmt
        self._content_hash = content_hash
        self._cache_hit = cache_hit

    @property
    def device(self) -> int:
        """The device ordinal it was loaded on."""
        return self._device

    @property
    def format(self) -> "ExecutableFormat":
        """The format it was loaded from."""
        return self._format

    @property
    def content_hash(self) -> str:
        """The daemon's content hash (64 hex digits)."""
        return self._content_hash

    @property
    def cache_hit(self) -> bool:
        """True if the daemon had this code already: nothing was compiled.

        It had it loaded for another handle or client of the same trust
        domain, or kept it in its executable cache after the last holder
        released it."""
        return self._cache_hit

    def parameters(self, entry: str) -> List[Parameter]:
        """The parameters of entry point |entry| in order, as the driver
        knows them (CUDA: after the compiler's specialization, hidden
        parameters included; the CPU driver: the kernel's
        HALO_LOCAL_KERNEL_PARAMS declaration). Asks the daemon.

        NotFoundError if the executable has no entry |entry|;
        UnimplementedError if the driver cannot tell (a CPU-driver kernel
        without a declaration, a CUBIN without parameter information);
        OutOfRangeError for an entry of more than 64 parameters (more than
        a dispatch can pass)."""
        if not isinstance(entry, str):
            raise TypeError(f"entry must be a str, not {type(entry).__name__}")
        if not entry or "\0" in entry:
            raise ValueError(
                f"entry {entry!r} is not an entry point name (empty or with "
                "a NUL character)")
        lib = _lib.load()
        capacity = _lib.MAX_DISPATCH_ARGS
        array = (_lib.Parameter * capacity)()
        count = ctypes.c_size_t()
        with self._call():
            status = lib.halo_executable_parameters(
                self._handle.pointer, entry.encode(), array, capacity,
                ctypes.byref(count))
        check(lib, status)
        if count.value > capacity:
            raise OutOfRangeError(
                f"entry {entry!r} has {count.value} parameters; halo lists "
                f"at most {capacity} (the most a dispatch can pass)")
        return [Parameter(array[i].offset, array[i].size)
                for i in range(count.value)]


def make_executable(client: "Client", session: _core.Session, pointer: Optional[int],
                    device: int, fmt: "ExecutableFormat",
                    ident: Optional[int]) -> "Executable":
    lib = _lib.load()
    content_hash = lib.halo_executable_content_hash(pointer).decode()
    cache_hit = bool(lib.halo_executable_cache_hit(pointer))
    label = f"executable {content_hash[:12]}" if ident is None else \
        f"executable 0x{ident:x}"
    handle = _core.Handle(session, pointer, lib.halo_executable_release,
                          "executable", label)
    return Executable(client, handle, ident, device, fmt, content_hash,
                      cache_hit)
