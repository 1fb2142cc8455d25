# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Loading libhalo and declaring its C API for ctypes.

The library is found in this order:

1. ``$HALO_LIBRARY`` (a path to ``libhalo.so``), if set;
2. the installed library: ``libhalo.so.1`` (the SONAME) through the
   dynamic linker's search path (``LD_LIBRARY_PATH``, the ``ldconfig``
   cache: the Debian package libhalo1 puts it in
   ``/usr/lib/<multiarch>``), then what ``ctypes.util.find_library`` finds,
   then ``/usr/local/lib`` and ``/usr/lib`` (with and without the multiarch
   folder) as ``cmake --install`` places it, for a library installed
   without running ``ldconfig``;
3. the build tree: ``build/lib/libhalo.so`` in any folder above this package
   (a source checkout, or a virtual environment created inside one).

The first library that loads must report ``halo_abi_version() ==
ABI_VERSION``; a library of another ABI is refused with LibraryError (no
other function of it is called). Loading is lazy: ``import halogpu`` works
without libhalo, the first call that needs it loads it.

Every prototype here mirrors include/halo/halo.h and status.h of
HALO_ABI_VERSION 1; tests/test_abi.py compiles a C program that checks the
structure layouts below against the header.
"""

import ctypes
import ctypes.util
import os
import stat
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

# The HALO_ABI_VERSION this package was written for.
ABI_VERSION = 1

# From halo.h.
TIMEOUT_INFINITE = 2**63 - 1
SEMAPHORE_MAX_VALUE = 2**63 - 1
WHOLE_BUFFER = 2**64 - 1
OBJECT_FLAG_EXPORTABLE = 1
COMMAND_BUFFER_ONE_SHOT = 1
COMMAND_BUFFER_REUSABLE = 2
COMMAND_BUFFER_UNALIGNED_BINDINGS = 4
DISPATCH_ALIGNMENT = 16
MAX_COMMANDS = 65536
MAX_BINDINGS = 4096
MAX_DISPATCH_ARGS = 64
MAX_CONSTANT_BYTES = 4096
MAX_CUDA_PARAMETER_BYTES = 8192
MAX_UPDATE_BYTES = 65536
MAX_INLINE_BYTES = 1 << 20
WAIT_MAX_COUNT = 64
WAIT_ALL = 0
WAIT_ANY = 1
DISPATCH_ARG_BUFFER = 0
DISPATCH_ARG_CONSTANT = 1
DISPATCH_ARG_BINDING_TABLE = 2


class LibraryError(ImportError):
    """libhalo could not be found or loaded, or has another ABI version."""


c_status = ctypes.c_void_p  # halo_status_t: NULL (None) for OK
c_enum = ctypes.c_int


class Token(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint8 * 16)]


class ClientOptions(ctypes.Structure):
    _fields_ = [
        ("address", ctypes.c_char_p),
        ("client_name", ctypes.c_char_p),
        ("request_timeout_ms", ctypes.c_int32),
    ]


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("ordinal", ctypes.c_uint32),
        ("driver", ctypes.c_char * 16),
        ("name", ctypes.c_char * 128),
        ("memory_bytes", ctypes.c_uint64),
        ("compute_major", ctypes.c_uint32),
        ("compute_minor", ctypes.c_uint32),
        ("multiprocessor_count", ctypes.c_uint32),
    ]


class ExecutableParams(ctypes.Structure):
    _fields_ = [
        ("format", c_enum),
        ("data", ctypes.c_void_p),
        ("size", ctypes.c_size_t),
        ("options", ctypes.POINTER(ctypes.c_char_p)),
        ("option_count", ctypes.c_size_t),
    ]


class Parameter(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_uint32), ("size", ctypes.c_uint32)]


class BufferRef(ctypes.Structure):
    _fields_ = [
        ("buffer", ctypes.c_void_p),
        ("slot", ctypes.c_uint32),
        ("offset", ctypes.c_uint64),
        ("length", ctypes.c_uint64),
    ]


class DispatchArg(ctypes.Structure):
    _fields_ = [
        ("kind", c_enum),
        ("ref", BufferRef),
        ("data", ctypes.c_void_p),
        ("size", ctypes.c_size_t),
    ]


class DispatchParams(ctypes.Structure):
    _fields_ = [
        ("executable", ctypes.c_void_p),
        ("entry", ctypes.c_char_p),
        ("grid", ctypes.c_uint32 * 3),
        ("block", ctypes.c_uint32 * 3),
        ("shared_memory_bytes", ctypes.c_uint32),
        ("args", ctypes.POINTER(DispatchArg)),
        ("arg_count", ctypes.c_size_t),
    ]


class Binding(ctypes.Structure):
    _fields_ = [
        ("buffer", ctypes.c_void_p),
        ("offset", ctypes.c_uint64),
        ("length", ctypes.c_uint64),
    ]


class SemaphoreValue(ctypes.Structure):
    _fields_ = [("semaphore", ctypes.c_void_p), ("value", ctypes.c_uint64)]


_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_u32 = ctypes.c_uint32
_u64 = ctypes.c_uint64
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_size = ctypes.c_size_t

# name: (restype, argtypes)
_PROTOTYPES = {
    # status.h
    "halo_status_code": (c_enum, [c_status]),
    "halo_status_message": (ctypes.c_char_p, [c_status]),
    "halo_status_code_name": (ctypes.c_char_p, [c_enum]),
    "halo_status_free": (None, [c_status]),
    # halo.h
    "halo_abi_version": (_u32, []),
    "halo_version_string": (ctypes.c_char_p, []),
    # halo_token_format / halo_token_parse: tokens are formatted here (32
    # lowercase hex digits, as halo_token_format writes them).
    "halo_client_connect": (c_status, [ctypes.POINTER(ClientOptions), _PP]),
    "halo_client_close": (None, [_P]),
    "halo_client_session_id": (_u64, [_P]),
    "halo_client_daemon_pid": (_i32, [_P]),
    "halo_client_ping": (c_status, [_P]),
    "halo_client_device_count": (c_status, [_P, ctypes.POINTER(_u32)]),
    "halo_client_device_info": (
        c_status,
        [_P, _u32, ctypes.POINTER(DeviceInfo)],
    ),
    "halo_buffer_create": (c_status, [_P, _u32, c_enum, _u64, _u32, _PP]),
    "halo_buffer_release": (None, [_P]),
    "halo_buffer_size": (_u64, [_P]),
    "halo_buffer_memory_type": (c_enum, [_P]),
    "halo_buffer_handle": (_u64, [_P]),
    "halo_buffer_host_pointer": (_P, [_P]),
    "halo_buffer_write": (c_status, [_P, _u64, _P, _u64]),
    "halo_buffer_read": (c_status, [_P, _u64, _P, _u64]),
    "halo_buffer_export": (c_status, [_P, ctypes.POINTER(Token)]),
    "halo_buffer_import": (c_status, [_P, ctypes.POINTER(Token), _PP]),
    "halo_semaphore_create": (c_status, [_P, _u64, _u32, _PP]),
    "halo_semaphore_release": (None, [_P]),
    "halo_semaphore_query": (c_status, [_P, ctypes.POINTER(_u64)]),
    "halo_semaphore_signal": (c_status, [_P, _u64]),
    "halo_semaphore_fail": (c_status, [_P, c_enum, ctypes.c_char_p]),
    "halo_semaphore_wait": (c_status, [_P, _u64, _i64]),
    "halo_semaphore_wait_list": (
        c_status,
        [_size, _PP, ctypes.POINTER(_u64), c_enum, _i64,
         ctypes.POINTER(_size)],
    ),
    "halo_semaphore_export": (c_status, [_P, ctypes.POINTER(Token)]),
    "halo_semaphore_import": (c_status, [_P, ctypes.POINTER(Token), _PP]),
    "halo_semaphore_handle": (_u64, [_P]),
    "halo_executable_create": (
        c_status,
        [_P, _u32, ctypes.POINTER(ExecutableParams), _PP],
    ),
    "halo_executable_create_from_file": (
        c_status,
        [_P, _u32, ctypes.c_char_p, c_enum, _PP],
    ),
    "halo_executable_release": (None, [_P]),
    "halo_executable_content_hash": (ctypes.c_char_p, [_P]),
    "halo_executable_cache_hit": (ctypes.c_int, [_P]),
    "halo_executable_parameters": (
        c_status, [_P, ctypes.c_char_p, ctypes.POINTER(Parameter), _size,
                   ctypes.POINTER(_size)]),
    "halo_command_buffer_begin": (c_status, [_P, _u32, _u32, _u32, _PP]),
    "halo_command_buffer_fill": (c_status, [_P, BufferRef, _P, _size]),
    "halo_command_buffer_copy": (c_status, [_P, BufferRef, BufferRef]),
    "halo_command_buffer_update": (c_status, [_P, _P, _size, BufferRef]),
    "halo_command_buffer_dispatch": (
        c_status,
        [_P, ctypes.POINTER(DispatchParams)],
    ),
    "halo_command_buffer_dispatch_indirect": (
        c_status,
        [_P, ctypes.POINTER(DispatchParams), BufferRef],
    ),
    "halo_command_buffer_barrier": (c_status, [_P]),
    "halo_command_buffer_end": (c_status, [_P]),
    "halo_command_buffer_memo_hit": (ctypes.c_int, [_P]),
    "halo_command_buffer_release": (None, [_P]),
    "halo_queue_create": (c_status, [_P, _u32, _i32, _PP]),
    "halo_queue_release": (None, [_P]),
    "halo_queue_execute": (
        c_status,
        [_P, _P, ctypes.POINTER(Binding), _size,
         ctypes.POINTER(SemaphoreValue), _size,
         ctypes.POINTER(SemaphoreValue), _size],
    ),
    "halo_queue_alloca": (
        c_status,
        [_P, ctypes.POINTER(SemaphoreValue), _size,
         ctypes.POINTER(SemaphoreValue), _size, c_enum, _u64, _PP],
    ),
    "halo_queue_dealloca": (
        c_status,
        [_P, ctypes.POINTER(SemaphoreValue), _size,
         ctypes.POINTER(SemaphoreValue), _size, _P],
    ),
}

_lock = threading.Lock()
_lib = None
_path = None


def _candidates() -> List[Tuple[str, str]]:
    """Paths (or sonames) to try, in order, with where each came from."""
    env = os.environ.get("HALO_LIBRARY")
    if env:
        # An explicit choice: nothing else is tried.
        return [(env, "$HALO_LIBRARY")]
    found = []
    # The dynamic linker's own search (LD_LIBRARY_PATH, ld.so.cache).
    found.append(("libhalo.so.1", "the dynamic linker's search path"))
    name = ctypes.util.find_library("halo")
    if name:
        found.append((name, "ldconfig"))
    multiarch = getattr(sys.implementation, "_multiarch", None)
    for prefix in ("/usr/local/lib", "/usr/lib"):
        dirs = [prefix]
        if multiarch:
            dirs.insert(0, os.path.join(prefix, multiarch))
        for folder in dirs:
            found.append((os.path.join(folder, "libhalo.so.1"),
                          "the installed location"))
    here = os.path.dirname(os.path.abspath(__file__))
    folder = here
    while True:
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
        if _trusted_source_tree(folder):
            found.append((os.path.join(folder, "build", "lib", "libhalo.so"),
                          "the build tree"))
    return found


def _trusted_source_tree(folder: str) -> bool:
    """Whether |folder| is a halo source tree that only its owner can change.

    The walk up from the module passes folders such as /tmp, where any user
    could leave a build/lib/libhalo.so for the next one to load: a folder
    counts only if it holds halo's sources (CMakeLists.txt and
    include/halo/halo.h) and it, build, build/lib and the library belong to
    this user or root and are writable by neither their group nor others.
    """
    if not (os.path.isfile(os.path.join(folder, "CMakeLists.txt")) and
            os.path.isfile(os.path.join(folder, "include", "halo",
                                        "halo.h"))):
        return False
    library = os.path.join(folder, "build", "lib", "libhalo.so")
    for path in (folder, os.path.join(folder, "build"),
                 os.path.join(folder, "build", "lib"), library):
        try:
            status = os.stat(path)
        except OSError:
            return False
        if status.st_uid not in (0, os.getuid()):
            return False
        if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False
    return True


def _declare(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in _PROTOTYPES.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


def load() -> Any:
    """Returns the loaded libhalo (a ctypes.CDLL), loading it on first use."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for candidate, origin in _candidates():
            if os.sep in candidate and not os.path.exists(candidate):
                if origin == "$HALO_LIBRARY":
                    raise LibraryError(
                        f"HALO_LIBRARY={candidate}: no such file")
                continue
            try:
                lib = ctypes.CDLL(candidate)
            except OSError as error:
                if origin == "$HALO_LIBRARY":
                    raise LibraryError(
                        f"HALO_LIBRARY={candidate}: {error}") from None
                tried.append(f"{candidate} ({origin}): {error}")
                continue
            try:
                abi_version = lib.halo_abi_version
            except AttributeError:
                raise LibraryError(
                    f"{candidate} ({origin}) has no halo_abi_version: "
                    "not libhalo") from None
            abi_version.restype = ctypes.c_uint32
            abi_version.argtypes = []
            version = abi_version()
            if version != ABI_VERSION:
                raise LibraryError(
                    f"{candidate} ({origin}) has ABI version {version}; this "
                    f"halo package was written for ABI version {ABI_VERSION}"
                    " (install the matching package or library, or point "
                    "HALO_LIBRARY at a matching libhalo.so)")
            try:
                _declare(lib)
            except AttributeError as error:
                raise LibraryError(
                    f"{candidate} ({origin}) lacks a function of ABI "
                    f"version {ABI_VERSION}: {error}") from None
            _path = getattr(lib, "_name", candidate)
            if os.sep not in _path:
                _path = _resolved_path(lib) or _path
            _lib = lib
            return lib
        details = "".join(f"\n  {line}" for line in tried)
        raise LibraryError(
            "libhalo not found: set HALO_LIBRARY to the path of libhalo.so, "
            "install it (the Debian package libhalo1, or cmake --install "
            "and ldconfig), or build it (scripts/build)"
            + details)


def _resolved_path(lib: ctypes.CDLL) -> Optional[str]:
    """The file the dynamic linker loaded for |lib| (from /proc/self/maps)."""
    try:
        address = ctypes.cast(lib.halo_abi_version, ctypes.c_void_p).value
        if address is None:
            return None
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                if len(fields) < 6:
                    continue
                low, high = (int(x, 16) for x in fields[0].split("-"))
                if low <= address < high:
                    return fields[5]
    except (OSError, ValueError):
        pass
    return None


def path() -> str:
    """The path of the loaded libhalo (loading it if needed)."""
    load()
    assert _path is not None
    return _path
