# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Timeline semaphores and waits on several of them."""

import asyncio
import concurrent.futures
import ctypes
import os
import threading
import time
from typing import (TYPE_CHECKING, Any, Dict, Iterable, Iterator, List,
                    Optional, Tuple)

from . import _core, _lib
from ._object import HaloObject, check_int, check_timeout, format_token
from .errors import (DeadlineExceededError, StatusCode, check, status_code,
                     take_error)

if TYPE_CHECKING:
    from .client import Client


_SLICE_NS = int(_core.WAIT_SLICE_S * 1e9)

# wait_async(): the threads that block in halo_semaphore_wait for event
# loops, at most this many at once (more waits queue for a thread); each
# blocks for one slice (WAIT_SLICE_S) at a time, so a cancelled wait frees
# its thread within a slice.
ASYNC_WAIT_THREADS = 16

_async_executor = None
_async_executor_lock = threading.Lock()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _async_executor
    with _async_executor_lock:
        if _async_executor is None:
            _async_executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=ASYNC_WAIT_THREADS,
                thread_name_prefix="halogpu-wait")
        return _async_executor


def _forget_executor_in_child() -> None:
    # A forked child has none of the parent's threads.
    global _async_executor, _async_executor_lock
    _async_executor = None
    _async_executor_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_executor_in_child)


class Semaphore(HaloObject):
    """A 64-bit timeline semaphore (Client.create_semaphore /
    import_semaphore).

    Its value only increases and stays below 2**63. Its state lives in a
    page of the daemon that this process maps read-only: ``value`` and
    ``wait()`` read it without a message to the daemon; ``signal()`` and
    ``fail()`` ask the daemon, which wakes every waiter in every process.

    Thread safety: every method may be called from any number of threads at
    once. wait() releases the GIL while it sleeps (so do all calls into
    libhalo).

    Lifetime: release() drops this client's reference. An explicit release
    by the creator hands the semaphore over to its importers; if the
    creator's session ends instead (close, exit or crash) while importers
    still hold it, the daemon fails it with ABORTED.
    """

    _kind = "semaphore"

    @property
    def value(self) -> int:
        """The current value (query()); raises the failure if the semaphore
        failed."""
        return self.query()

    def query(self) -> int:
        """Returns the current value without a round trip. If the semaphore
        failed, raises its failure (the exception's ``value`` attribute
        holds the value it had reached)."""
        lib = _lib.load()
        value = ctypes.c_uint64()
        with self._call():
            status = lib.halo_semaphore_query(self._handle.pointer,
                                              ctypes.byref(value))
        if status:
            error = take_error(lib, status)
            error.value = value.value  # type: ignore[attr-defined]
            raise error
        return value.value

    def signal(self, value: int) -> None:
        """Advances the value to |value| and wakes every waiter.

        InvalidArgumentError if |value| is not above the current value
        (values only increase: a lower or equal signal is rejected, never
        ignored); FailedPreconditionError if the semaphore has failed."""
        value = check_int(value, "value", 0, _lib.SEMAPHORE_MAX_VALUE)
        lib = _lib.load()
        with self._call():
            status = lib.halo_semaphore_signal(self._handle.pointer, value)
        check(lib, status)

    def fail(self, code: Any, message: str = "") -> None:
        """Fails the semaphore with |code| (a StatusCode, its name, or a
        HaloError subclass; not OK) and |message|. The first failure wins;
        later ones are ignored. Waiters for values not yet reached wake and
        raise the failure (the exception class of |code|)."""
        code = status_code(code)
        if code == StatusCode.OK:
            raise ValueError("a semaphore cannot fail with OK")
        if not isinstance(message, str):
            raise TypeError(
                f"message must be a str, not {type(message).__name__}")
        lib = _lib.load()
        with self._call():
            status = lib.halo_semaphore_fail(self._handle.pointer, code,
                                             message.encode())
        check(lib, status)

    def wait(self, value: int, timeout: Optional[float] = None) -> None:
        """Waits until the value is >= |value|.

        |timeout| in seconds (None: for ever; 0: poll once). Raises
        DeadlineExceededError (a TimeoutError) when it passes, the
        semaphore's failure if it failed before reaching |value|,
        AbortedError if it was destroyed, UnavailableError if the daemon
        died, ClosedError if this semaphore is released or its client
        closed meanwhile (noticed within 0.1 s). Spins ~20 us, then sleeps
        on a futex with the GIL released; never messages the daemon."""
        value = check_int(value, "value", 0, _lib.SEMAPHORE_MAX_VALUE)
        for this_slice in self._slices(value, timeout):
            if self._wait_slice(value, this_slice):
                return

    def _slices(self, value: int,
                timeout: Optional[float]) -> Iterator[int]:
        """The timeouts (ns) of the slices of a wait for |value| of at most
        |timeout| seconds (None: for ever): slices of at most 0.1 s (so that
        a released semaphore or a cancelled task is noticed), the first at
        once; raises DeadlineExceededError once |timeout| passed."""
        timeout_ns = check_timeout(timeout)
        deadline = None if timeout_ns >= _lib.TIMEOUT_INFINITE else \
            time.monotonic_ns() + timeout_ns
        this_slice = _SLICE_NS if deadline is None else min(_SLICE_NS,
                                                            timeout_ns)
        while True:
            yield this_slice
            if deadline is not None:
                remaining = deadline - time.monotonic_ns()
                if remaining <= 0:
                    raise DeadlineExceededError(
                        f"wait for {self._handle.name} >= {value} timed out "
                        f"after {timeout} s")
                this_slice = min(_SLICE_NS, remaining)

    def _wait_slice(self, value: int, timeout_ns: int) -> bool:
        """One bounded wait: True once the value is >= |value|, False if
        |timeout_ns| passed first; raises anything else."""
        lib = _lib.load()
        with self._call():
            status = lib.halo_semaphore_wait(self._handle.pointer, value,
                                             timeout_ns)
        if not status:
            return True
        if lib.halo_status_code(status) != StatusCode.DEADLINE_EXCEEDED:
            raise take_error(lib, status)
        lib.halo_status_free(status)
        return False

    async def wait_async(self, value: int,
                         timeout: Optional[float] = None) -> None:
        """``await semaphore.wait_async(value)``: wait() for asyncio, never
        blocking the event loop.

        A value already reached returns without a thread (after yielding
        to the event loop once, as any await should).
        Otherwise the wait runs on a small pool of threads
        (ASYNC_WAIT_THREADS) in slices of at most 0.1 s, each a futex wait
        with the GIL released; the event loop learns of the result through
        its executor future. Cancelling the awaiting task stops the wait
        after the current slice (no thread is left blocked for ever).
        Errors as wait(); |timeout| in seconds (None: for ever)."""
        value = check_int(value, "value", 0, _lib.SEMAPHORE_MAX_VALUE)
        check_timeout(timeout)
        if self._wait_slice(value, 0):
            # Still a suspension point: a loop of waits on reached values
            # lets the other tasks run.
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        executor = _executor()
        for this_slice in self._slices(value, timeout):
            if await loop.run_in_executor(executor, self._wait_slice, value,
                                          this_slice):
                return

    def export(self) -> str:
        """A token (32 hex digits) another client can pass to
        Client.import_semaphore(). FailedPreconditionError unless created
        with exportable=True. Treat it like a password."""
        lib = _lib.load()
        token = _lib.Token()
        with self._call():
            status = lib.halo_semaphore_export(self._handle.pointer,
                                               ctypes.byref(token))
        check(lib, status)
        return format_token(lib, token)


def _pairs(pairs: Iterable[Tuple["Semaphore", int]]
           ) -> List[Tuple["Semaphore", int]]:
    try:
        pairs = list(pairs)
    except TypeError:
        raise TypeError(
            "expected an iterable of (Semaphore, value) pairs") from None
    if len(pairs) > _lib.WAIT_MAX_COUNT:
        raise ValueError(
            f"wait on {len(pairs)} semaphores (0..{_lib.WAIT_MAX_COUNT})")
    checked = []
    for i, pair in enumerate(pairs):
        try:
            semaphore, value = pair
        except (TypeError, ValueError):
            raise TypeError(
                f"waits[{i}] must be a (Semaphore, value) pair") from None
        if not isinstance(semaphore, Semaphore):
            raise TypeError(
                f"waits[{i}]: expected a Semaphore, not "
                f"{type(semaphore).__name__}")
        checked.append((semaphore, check_int(
            value, f"waits[{i}] value", 0, _lib.SEMAPHORE_MAX_VALUE)))
    return checked


def _wait(pairs: Iterable[Tuple["Semaphore", int]], mode: int,
          timeout: Optional[float]) -> Optional[int]:
    """Waits in slices of at most _core.WAIT_SLICE_S; returns the index
    libhalo reports (the satisfied semaphore for WAIT_ANY), or None for an
    empty |pairs|, which is satisfied at once."""
    pairs = _pairs(pairs)
    timeout_ns = check_timeout(timeout)
    if not pairs:
        return None
    lib = _lib.load()
    count = len(pairs)
    by_session: Dict[int, Tuple[_core.Session, List[_core.Handle]]] = {}
    for semaphore, _ in pairs:
        handle = semaphore._handle
        by_session.setdefault(id(handle.session),
                              (handle.session, []))[1].append(handle)
    groups = list(by_session.values())
    pointers = (ctypes.c_void_p * count)()
    values = (ctypes.c_uint64 * count)(*(value for _, value in pairs))
    index = ctypes.c_size_t()
    slice_ns = _SLICE_NS
    infinite = timeout_ns >= _lib.TIMEOUT_INFINITE
    deadline = None if infinite else time.monotonic_ns() + timeout_ns
    while True:
        entered = _core.calls(groups)
        try:
            for i, (semaphore, _) in enumerate(pairs):
                pointers[i] = semaphore._handle.pointer
            if deadline is None:
                this_slice = slice_ns
            else:
                this_slice = min(slice_ns,
                                 max(0, deadline - time.monotonic_ns()))
            status = lib.halo_semaphore_wait_list(count, pointers, values,
                                                  mode, this_slice,
                                                  ctypes.byref(index))
        finally:
            _core.leave_all(entered)
        if not status:
            return index.value
        if lib.halo_status_code(status) == StatusCode.DEADLINE_EXCEEDED:
            lib.halo_status_free(status)
            if deadline is None or time.monotonic_ns() < deadline:
                continue
            what = ", ".join(f"{s._handle.name} >= {v}" for s, v in pairs)
            raise DeadlineExceededError(
                f"wait for {what} timed out after {timeout} s")
        raise take_error(lib, status)


def wait_all(pairs: Iterable[Tuple["Semaphore", int]],
             timeout: Optional[float] = None) -> None:
    """Waits until every (semaphore, value) of |pairs| is reached (up to 64
    semaphores, of one client or several; none returns at once). Errors as
    Semaphore.wait(); a failure of any semaphore not yet satisfied ends the
    wait."""
    _wait(pairs, _lib.WAIT_ALL, timeout)


def wait_any(pairs: Iterable[Tuple["Semaphore", int]],
             timeout: Optional[float] = None) -> Optional[int]:
    """Waits until at least one (semaphore, value) of |pairs| is reached;
    returns its index in |pairs|. An empty |pairs| is satisfied at once and
    returns None (no semaphore to name). Errors as Semaphore.wait()."""
    return _wait(pairs, _lib.WAIT_ANY, timeout)


def make_semaphore(client: "Client", session: _core.Session,
                   pointer: Optional[int]) -> "Semaphore":
    lib = _lib.load()
    ident = lib.halo_semaphore_handle(pointer)
    handle = _core.Handle(session, pointer, lib.halo_semaphore_release,
                          "semaphore", f"semaphore 0x{ident:x}")
    return Semaphore(client, handle, ident)
