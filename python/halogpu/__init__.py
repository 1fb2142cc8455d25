# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""halogpu: the Python client of halo, a GPU device server.

A thin layer over libhalo (through ctypes, no compiled extension) that
mirrors its C API (include/halo/halo.h) in Python style::

    import halogpu, numpy as np

    with halogpu.connect() as client:        # $HALO_ADDRESS or the default
        print(client.devices)
        buf = client.create_buffer(4096, memory="host_visible")
        buf.numpy(np.float32)[:] = 1.0        # a view of the shared memory
        sem = client.create_semaphore()
        sem.signal(1)
        sem.wait(1, timeout=1.0)

libhalo is found through $HALO_LIBRARY, the installed library, then the
build tree of a source checkout; its ABI version must be ABI_VERSION.
numpy is optional: without it buffers work on bytes and memoryviews.
See python/README.md for lifetimes, thread safety and errors.
"""

from ._lib import (ABI_VERSION, DISPATCH_ALIGNMENT, LibraryError,
                   WHOLE_BUFFER)
from .buffer import Buffer, BufferRef, MemoryType, SlotRef, slot
from .client import Client, Device, connect
from .command_buffer import BINDING_TABLE, CommandBuffer, Constant, constant
from .errors import (AbortedError, AlreadyExistsError, CancelledError,
                     ClosedError, DataLossError, DeadlineExceededError,
                     DeviceLostError, FailedPreconditionError, HaloError,
                     InternalError, InvalidArgumentError, NotFoundError,
                     OutOfRangeError, PermissionDeniedError,
                     ResourceExhaustedError, SessionLostError, StatusCode,
                     UnauthenticatedError, UnavailableError,
                     UnimplementedError, UnknownError, error_class)
from .executable import Executable, ExecutableFormat, Parameter
from .queue import Queue
from .semaphore import Semaphore, wait_all, wait_any

__version__ = "0.1.0"

SEMAPHORE_MAX_VALUE = 2**63 - 1


def library_path() -> str:
    """The path of the libhalo this package loaded (loading it if needed;
    LibraryError if it cannot)."""
    from . import _lib

    return _lib.path()


def library_version() -> str:
    """libhalo's version string (halo_version_string())."""
    from . import _lib

    return str(_lib.load().halo_version_string().decode())


__all__ = [
    "ABI_VERSION", "BINDING_TABLE", "DISPATCH_ALIGNMENT",
    "SEMAPHORE_MAX_VALUE", "WHOLE_BUFFER",
    "AbortedError", "AlreadyExistsError", "Buffer", "BufferRef",
    "CancelledError", "Client", "ClosedError", "CommandBuffer", "Constant",
    "DataLossError", "DeadlineExceededError", "Device", "DeviceLostError",
    "Executable", "ExecutableFormat", "FailedPreconditionError",
    "HaloError", "InternalError", "InvalidArgumentError", "LibraryError",
    "MemoryType", "NotFoundError", "OutOfRangeError", "Parameter",
    "PermissionDeniedError", "Queue", "ResourceExhaustedError", "Semaphore",
    "SessionLostError", "SlotRef", "StatusCode", "UnauthenticatedError",
    "UnavailableError", "UnimplementedError", "UnknownError", "connect",
    "constant", "error_class", "library_path", "library_version", "slot",
    "wait_all", "wait_any",
]
