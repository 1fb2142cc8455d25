# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""DLPack export of host-visible buffers (``Buffer.__dlpack__``).

A DLPack producer hands its consumer (``numpy.from_dlpack``,
``torch.from_dlpack``, ...) a PyCapsule holding the tensor's address,
shape and type and a deleter the consumer calls when it no longer needs the
memory: a ``DLManagedTensorVersioned`` named ``"dltensor_versioned"``
(dlpack.h 1.0) to a consumer that asks for version 1 (``max_version``),
else the unversioned ``DLManagedTensor`` named ``"dltensor"`` that every
consumer takes (numpy makes read-only arrays of those: the unversioned ABI
cannot say the memory is writable). The consumer renames the capsule
``"used_..."``; a capsule never consumed calls the deleter itself when it
is destroyed.

Here the tensor is the buffer's array (kDLCPU, compact, row-major: its
dtype and shape, else its bytes as uint8 in one dimension) in the
client's mapping. Each export pins the mapping (like a numpy view):
releasing the buffer or closing the client invalidates the Python objects,
but the memory stays mapped until the deleter ran. The structures live in
a table keyed by the export's number (its manager_ctx), so nothing is
freed while C code may still read them.
"""

import ctypes
import itertools
import threading
import types
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from . import _core

if TYPE_CHECKING:
    # What numpy's and the array API's stubs say __dlpack__ returns.
    from typing_extensions import CapsuleType as CapsuleType
else:
    # types.CapsuleType is Python 3.13's; typing_extensions is not needed
    # at run time.
    CapsuleType = getattr(types, "CapsuleType", object)

KDLCPU = 1  # DLDeviceType
# DLDataTypeCode
KDLINT = 0
KDLUINT = 1
KDLFLOAT = 2
KDLCOMPLEX = 5
KDLBOOL = 6

# numpy's dtype kinds, the codes of their DLPack types and the sizes (bits)
# consumers take (numpy refuses long double, float128, and a capsule it
# refuses is never deleted: the export would pin the buffer for good).
_KIND_CODES = {"i": (KDLINT, (8, 16, 32, 64)), "u": (KDLUINT, (8, 16, 32, 64)),
               "f": (KDLFLOAT, (16, 32, 64)), "c": (KDLCOMPLEX, (64, 128)),
               "b": (KDLBOOL, (8,))}


def type_code(dtype: Any) -> Optional[Tuple[int, int]]:
    """The DLPack (code, bits) of the numpy |dtype|, or None where DLPack
    has none its consumers take (structured, strings, object, long double)
    or the byte order is not native."""
    kind = _KIND_CODES.get(dtype.kind)
    bits = dtype.itemsize * 8
    if kind is None or bits not in kind[1] or not dtype.isnative or \
            dtype.fields is not None:
        return None
    return kind[0], bits


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _Deleter),
]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


_DeleterVersioned = ctypes.CFUNCTYPE(
    None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _DeleterVersioned),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

# The DLPack version written into versioned capsules.
VERSION = (1, 0)

# A private instance of the Python C API (what ctypes.pythonapi is, on
# POSIX): its function objects, and the prototypes set on them, are this
# module's. ctypes.pythonapi is the process's: prototypes set there would
# break other libraries calling it with other arguments (py_object), and
# theirs would break the capsule destructor here (which would then leave
# the export pinned for good).
_api = ctypes.PyDLL(None)
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                               _CapsuleDestructor]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# Export number -> (the DLManagedTensor, its shape array, the pinned
# handle): kept alive until the deleter runs.
_exports: Dict[int, Tuple[Any, Any, _core.Handle]] = {}
_exports_lock = threading.Lock()
_numbers = itertools.count(1)


def _delete(managed: Any) -> None:
    """The deleter of both structures: drops the export and unpins the
    mapping. Called by the consumer (any thread; ctypes takes the GIL) or
    by the destructor of a capsule nobody consumed."""
    number = managed.contents.manager_ctx
    with _exports_lock:
        entry = _exports.pop(number, None)
    if entry is not None:
        _core.map_unpin(entry[2])


def _destroy_capsule(capsule: int) -> None:
    """The capsule's destructor: an unconsumed capsule still owns its
    tensor, so it calls the deleter (a consumed one was renamed)."""
    for name, kind in ((b"dltensor", DLManagedTensor),
                       (b"dltensor_versioned", DLManagedTensorVersioned)):
        if _api.PyCapsule_IsValid(capsule, name):
            pointer = _api.PyCapsule_GetPointer(capsule, name)
            managed = ctypes.cast(pointer, ctypes.POINTER(kind))
            managed.contents.deleter(managed)
            return


# Module lifetime: C holds these function pointers.
_DELETER = _Deleter(_delete)
_DELETER_VERSIONED = _DeleterVersioned(_delete)
_DESTRUCTOR = _CapsuleDestructor(_destroy_capsule)


def export(handle: _core.Handle, address: int, versioned: bool,
           dltype: Tuple[int, int], shape: Tuple[int, ...]) -> CapsuleType:
    """A capsule over the compact array of DLPack type |dltype| (code,
    bits) and |shape| at |address| of the buffer of |handle| (pinned here,
    unpinned by the deleter): "dltensor_versioned" (writable) if
    |versioned|, else "dltensor"."""
    managed: Any
    _core.map_pin(handle)
    try:
        number = next(_numbers)
        dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        if versioned:
            managed = DLManagedTensorVersioned()
            managed.version = DLPackVersion(*VERSION)
            managed.flags = 0  # writable, not a copy
            managed.deleter = _DELETER_VERSIONED
            name = b"dltensor_versioned"
        else:
            managed = DLManagedTensor()
            managed.deleter = _DELETER
            name = b"dltensor"
        tensor = managed.dl_tensor
        tensor.data = address
        tensor.device = DLDevice(KDLCPU, 0)
        tensor.ndim = len(shape)
        tensor.dtype = DLDataType(dltype[0], dltype[1], 1)
        tensor.shape = dims
        tensor.strides = None  # compact, row-major
        tensor.byte_offset = 0
        managed.manager_ctx = number
        with _exports_lock:
            _exports[number] = (managed, dims, handle)
    except BaseException:
        _core.map_unpin(handle)
        raise
    try:
        capsule: CapsuleType = _api.PyCapsule_New(
            ctypes.addressof(managed), name, _DESTRUCTOR)
    except BaseException:
        _delete(ctypes.pointer(managed))
        raise
    return capsule


def live_exports() -> int:
    """How many exports the consumers have not let go of (for tests)."""
    with _exports_lock:
        return len(_exports)
