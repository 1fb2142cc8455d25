# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""The base of every halo object (buffer, semaphore, executable, ...) and
argument checks shared by the modules."""

import operator
import weakref
from typing import (TYPE_CHECKING, Any, NoReturn, Optional, Sequence,
                    SupportsIndex, Tuple, TypeVar, Union)

from . import _core
from .errors import ClosedError

if TYPE_CHECKING:
    from .client import Client

_Self = TypeVar("_Self", bound="HaloObject")

# An int argument: an int, a numpy integer or anything else with __index__
# (every int is a SupportsIndex: int is named for the signatures' readers,
# which would show a bare SupportsIndex as "<class 'SupportsIndex'>").
Index = Union[int, SupportsIndex]
# A shape argument: a count of items or a sequence of them.
Shape = Union[int, SupportsIndex, Sequence[SupportsIndex]]


class HaloObject:
    """A C object of one client.

    ``release()`` (or leaving a ``with`` block, or garbage collection)
    drops this client's reference. A released object raises ClosedError
    from every method; the C release itself waits until calls in flight on
    other threads, command buffers still recording it and views of its
    memory are done with it. Every object keeps its Client alive.
    """

    _kind = "object"
    # How another process gets one (said when pickling is refused).
    _share = "load, record or create it again in the other process"

    def __init__(self, client: "Client", handle: _core.Handle,
                 ident: Optional[int]) -> None:
        self._client = client
        self._handle = handle
        self._id = ident
        finalizer = weakref.finalize(self, _core.release, handle)
        # At interpreter exit the process ends the session anyway.
        finalizer.atexit = False
        self._finalizer = finalizer

    @property
    def client(self) -> "Client":
        """The Client this object belongs to."""
        return self._client

    @property
    def released(self) -> bool:
        """True once this object was released or its client closed, and in
        a process forked from the one that made it (where every use raises
        ClosedError)."""
        session = self._handle.session
        return self._handle.released or session.closing or session.foreign()

    def release(self) -> None:
        """Drops this client's reference (idempotent)."""
        self._finalizer()

    def __enter__(self: _Self) -> _Self:
        return self

    def __reduce__(self) -> NoReturn:
        # multiprocessing (and copy.deepcopy) would otherwise fail on a
        # ctypes pointer, naming neither the object nor the way to share.
        raise TypeError(
            f"a halogpu.{type(self).__name__} cannot be pickled (or "
            "deep-copied): it belongs to its client's session in this "
            f"process; {self._share}")

    def __copy__(self: _Self) -> _Self:
        # copy.copy(): another Python object for the same C object (it
        # shares the handle and its release).
        alias = type(self).__new__(type(self))
        alias.__dict__.update(self.__dict__)
        return alias

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    @property
    def handle(self) -> Optional[int]:
        """The session-local handle (as haloctl and the daemon's logs show
        it)."""
        return self._id

    def _check_alive(self) -> None:
        """Raises ClosedError if this object may not be used (no C call)."""
        handle = self._handle
        session = handle.session
        if session.foreign():
            raise session.foreign_error()
        if session.closing:
            raise ClosedError(session.reason)
        if handle.released:
            raise handle.released_error()

    def _call(self, *others: _core.Handle) -> _core.Call:
        """A Call with this object (and |others|' handles) in use."""
        return _core.Call(self._handle.session, self._handle, *others)

    def __repr__(self) -> str:
        state = " released" if self.released else ""
        return f"<halogpu.{type(self).__name__} {self._handle.name}{state}>"


def check_int(value: Any, name: str, low: int = 0,
              high: int = 2**64 - 1) -> int:
    """|value| as an int in [low, high]; TypeError / ValueError otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an int, not {type(value).__name__}") from None
    if value < low or value > high:
        raise ValueError(f"{name} = {value} is out of range [{low}, {high}]")
    return int(value)


def check_timeout(timeout: Optional[float]) -> int:
    """Seconds (None: for ever) as nanoseconds for libhalo."""
    from ._lib import TIMEOUT_INFINITE

    if timeout is None:
        return TIMEOUT_INFINITE
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(
            f"timeout must be seconds (int or float) or None, not "
            f"{type(timeout).__name__}")
    if timeout != timeout or timeout < 0:
        raise ValueError(f"timeout must be >= 0 seconds, not {timeout}")
    ns = timeout * 1e9
    return TIMEOUT_INFINITE if ns >= TIMEOUT_INFINITE else int(ns)


def check_client(obj: "HaloObject", client: "Client", what: str) -> None:
    """Objects of another client mean nothing in this session."""
    if obj._client is not client:
        raise ValueError(
            f"{what} ({obj._handle.name}) belongs to another client")


def check_shape(shape: Any, name: str = "shape") -> Tuple[int, ...]:
    """|shape| (an int, or a sequence of them: a tuple, a list, an array)
    as a tuple of ints; TypeError / ValueError naming |name| otherwise."""
    try:
        return (check_int(shape, name),)
    except TypeError:  # not an int (a bool is not one either)
        pass
    try:
        items = list(shape)
    except TypeError:
        raise TypeError(
            f"{name} must be an int or a sequence of ints, not "
            f"{type(shape).__name__}") from None
    return tuple(check_int(n, name) for n in items)


def parse_token(token: Union[str, bytes, bytearray, memoryview]) -> Any:
    """An import token (32 hex digits, as export() returns, as text or as
    ASCII bytes, or its 16 raw bytes) as a _lib.Token; TypeError /
    ValueError before any C call."""
    from ._lib import Token

    if isinstance(token, str):
        text = token.strip()
        if len(text) != 32:
            raise ValueError(
                f"a token is 32 hex digits, not {len(text)} characters")
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raise ValueError(f"token {token!r} is not hex") from None
    elif isinstance(token, (bytes, bytearray, memoryview)):
        raw = bytes(token)
        if len(raw) != 16:  # the hex digits, read from a pipe or a file
            raw = raw.strip()
        if len(raw) == 32:
            try:
                raw = bytes.fromhex(raw.decode("ascii"))
            except ValueError:
                raise ValueError(
                    "a token of 32 bytes is 32 hex digits, and these are "
                    "not") from None
        elif len(raw) != 16:
            raise ValueError(
                f"a token is 32 hex digits (as text or bytes) or its 16 raw "
                f"bytes, not {len(raw)} bytes")
    else:
        raise TypeError(
            f"a token is a hex string (or 16 bytes), not "
            f"{type(token).__name__}")
    result = Token()
    result.bytes[:] = raw
    return result


def format_token(lib: Any, token: Any) -> str:
    """A _lib.Token as 32 lowercase hex digits (halo_token_format's
    format)."""
    return bytes(token.bytes).hex()
