# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Status codes and the exceptions that carry them.

Every libhalo call returns a status; a non-OK one becomes an exception of
the HaloError subclass for its code, carrying the message libhalo or the
daemon wrote (the C status object is freed before the exception is raised).

Some classes also derive from the built-in exception a Python user would
catch: DeadlineExceededError is a TimeoutError, PermissionDeniedError a
PermissionError, UnavailableError a ConnectionError.

Errors found in Python before any call into libhalo (a wrong type, a shape
that cannot fit) are TypeError and ValueError, never HaloError.
"""

import enum
import operator
from typing import Any, Dict, Optional, Type


class StatusCode(enum.IntEnum):
    """halo_status_code_t (halo/status.h)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16
    DEVICE_LOST = 17
    SESSION_LOST = 18


class HaloError(Exception):
    """A non-OK halo status: ``code`` (a StatusCode) and ``message``.

    ``str(error)`` is ``"CODE_NAME: message"``. Subclasses fix the code;
    HaloError itself is raised only for codes this package does not know.

    ``value`` (an int or None): on the failure Semaphore.query() (and
    Semaphore.value) raises, the value the semaphore had reached; None on
    every other error.
    """

    code = StatusCode.UNKNOWN
    # Set by Semaphore.query() on the failure it raises.
    value: Optional[int] = None

    def __init__(self, message: str = "",
                 code: Optional["StatusCode"] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        code = self.code
        name = code.name if isinstance(code, StatusCode) else str(code)
        return f"{name}: {self.message}" if self.message else name

    def __reduce__(self) -> Any:
        # Picklable (multiprocessing sends exceptions between processes).
        return (_rebuild, (type(self), self.message, self.code,
                           self.__dict__))


def _rebuild(cls: Type["HaloError"], message: str, code: "StatusCode",
             state: Dict[str, Any]) -> "HaloError":
    error = cls.__new__(cls)
    HaloError.__init__(error, message, code)
    error.__dict__.update(state)
    return error


class CancelledError(HaloError):
    code = StatusCode.CANCELLED


class UnknownError(HaloError):
    code = StatusCode.UNKNOWN


class InvalidArgumentError(HaloError):
    code = StatusCode.INVALID_ARGUMENT


class DeadlineExceededError(HaloError, TimeoutError):
    code = StatusCode.DEADLINE_EXCEEDED


class NotFoundError(HaloError):
    code = StatusCode.NOT_FOUND


class AlreadyExistsError(HaloError):
    code = StatusCode.ALREADY_EXISTS


class PermissionDeniedError(HaloError, PermissionError):
    code = StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(HaloError):
    code = StatusCode.RESOURCE_EXHAUSTED


class FailedPreconditionError(HaloError):
    code = StatusCode.FAILED_PRECONDITION


class AbortedError(HaloError):
    code = StatusCode.ABORTED


class OutOfRangeError(HaloError):
    code = StatusCode.OUT_OF_RANGE


class UnimplementedError(HaloError):
    code = StatusCode.UNIMPLEMENTED


class InternalError(HaloError):
    code = StatusCode.INTERNAL


class UnavailableError(HaloError, ConnectionError):
    code = StatusCode.UNAVAILABLE


class DataLossError(HaloError):
    code = StatusCode.DATA_LOSS


class UnauthenticatedError(HaloError):
    code = StatusCode.UNAUTHENTICATED


class DeviceLostError(HaloError):
    code = StatusCode.DEVICE_LOST


class SessionLostError(HaloError):
    code = StatusCode.SESSION_LOST


class ClosedError(FailedPreconditionError):
    """The object was released, or its client closed (or it was inherited
    from the parent process across fork()). Raised by this package, before
    any call into libhalo: a stale object never reaches the C library."""


_BY_CODE = {
    cls.code: cls
    for cls in (CancelledError, UnknownError, InvalidArgumentError,
                DeadlineExceededError, NotFoundError, AlreadyExistsError,
                PermissionDeniedError, ResourceExhaustedError,
                FailedPreconditionError, AbortedError, OutOfRangeError,
                UnimplementedError, InternalError, UnavailableError,
                DataLossError, UnauthenticatedError, DeviceLostError,
                SessionLostError)
}


def error_class(code: Any) -> Type[HaloError]:
    """The HaloError subclass for |code|: a StatusCode or its number, its
    name ("NOT_FOUND", any case; as Semaphore.fail() takes them), or a
    HaloError subclass (itself); HaloError for None or a number this
    package does not know. ValueError for a name that is no status
    code's."""
    if isinstance(code, type) and issubclass(code, HaloError):
        return code
    if code is None:
        return HaloError
    if not isinstance(code, (str, bool)):
        try:
            code = operator.index(code)  # numpy integers too
        except TypeError:
            pass
        else:
            if code not in StatusCode._value2member_map_:
                return HaloError
    return _BY_CODE.get(status_code(code), HaloError)


def make_error(code: Any, message: str) -> HaloError:
    """An exception for |code| and |message|."""
    try:
        code = StatusCode(code)
    except ValueError:
        return HaloError(message, code)
    return error_class(code)(message)


# Names of the C API in libhalo's and halod's messages, and what a Python
# caller writes instead (the C name follows in parentheses).
_PYTHON_NAMES = (
    ("HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS",
     "record(unaligned_bindings=True) (HALO_COMMAND_BUFFER_UNALIGNED_BINDINGS)"),
    ("halo_command_buffer_end", "CommandBuffer.end() (halo_command_buffer_end)"),
    ("halo_buffer_release", "Buffer.release() (halo_buffer_release)"),
    # Inside the C message's parentheses: "not created exportable
    # (exportable=True, HALO_OBJECT_FLAG_EXPORTABLE)".
    ("HALO_OBJECT_FLAG_EXPORTABLE",
     "exportable=True, HALO_OBJECT_FLAG_EXPORTABLE"),
)


def python_message(message: str) -> str:
    """|message| with the C API's names it holds given their Python
    spelling."""
    for c_name, python_name in _PYTHON_NAMES:
        message = message.replace(c_name, python_name)
    return message


def take_error(lib: Any, status: int) -> HaloError:
    """Turns a non-NULL halo_status_t into an exception and frees it."""
    try:
        code = lib.halo_status_code(status)
        raw = lib.halo_status_message(status)
        message = raw.decode("utf-8", "replace") if raw else ""
    finally:
        lib.halo_status_free(status)
    return make_error(code, python_message(message))


def check(lib: Any, status: Optional[int]) -> None:
    """Raises the exception for |status| (a halo_status_t) unless it is OK."""
    if status:
        raise take_error(lib, status)


def status_code(value: Any) -> "StatusCode":
    """A StatusCode from a StatusCode, int, name or HaloError subclass."""
    if isinstance(value, type) and issubclass(value, HaloError):
        value = value.code
    if isinstance(value, bool):
        raise TypeError("a status code is a StatusCode, int or name, not bool")
    if isinstance(value, str):
        try:
            return StatusCode[value.upper()]
        except KeyError:
            raise ValueError(f"no status code named {value!r}") from None
    if isinstance(value, int):
        try:
            return StatusCode(value)
        except ValueError:
            raise ValueError(f"{value} is not a halo status code") from None
    raise TypeError(
        f"a status code is a StatusCode, int, name or HaloError subclass, "
        f"not {type(value).__name__}")


__all__ = [
    "StatusCode", "HaloError", "ClosedError", "CancelledError",
    "UnknownError", "InvalidArgumentError", "DeadlineExceededError",
    "NotFoundError", "AlreadyExistsError", "PermissionDeniedError",
    "ResourceExhaustedError", "FailedPreconditionError", "AbortedError",
    "OutOfRangeError", "UnimplementedError", "InternalError",
    "UnavailableError", "DataLossError", "UnauthenticatedError",
    "DeviceLostError", "SessionLostError", "error_class",
]
