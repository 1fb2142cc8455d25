# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Timeline semaphores and waits on several of them."""

import asyncio
import ctypes
import os
import threading
import time
from typing import (TYPE_CHECKING, Any, Dict, Iterable, Iterator, List,
                    Optional, Tuple)

from . import _core, _lib
from ._object import HaloObject, check_int, check_timeout, format_token
from .errors import (DeadlineExceededError, HaloError, StatusCode, check,
                     make_error, status_code, take_error)

if TYPE_CHECKING:
    from .client import Client


_SLICE_NS = int(_core.WAIT_SLICE_S * 1e9)

# wait_async(): the threads that wait for event loops. Each waits for any
# of up to WAIT_MAX_COUNT (64) semaphores of one daemon at once
# (halo_semaphore_wait_list, WAIT_ANY), in slices of at most WAIT_SLICE_S,
# between which it takes more waits and drops cancelled ones. At most this
# many threads (plus one per other daemon with waits): a wait that finds
# them all busy waits for room, until a thread of its daemon with room takes
# it at the end of that thread's slice, or a thread that went idle does.
# Meanwhile the threads query it every WAIT_SLICE_S (a read of the mapped
# semaphore page, no message to the daemon): it completes within 0.1 s of
# its value being reached or its semaphore failing, and ends on its timeout
# (or cancellation, or release) all the same.
ASYNC_WAIT_THREADS = 16


class _AsyncWait:
    """One pending wait_async(): its semaphore and value, the event loop
    and future to settle, its deadline (monotonic ns, None: for ever)."""

    __slots__ = ("semaphore", "value", "loop", "future", "deadline",
                 "timeout", "key")

    def __init__(self, semaphore: "Semaphore", value: int,
                 loop: asyncio.AbstractEventLoop, deadline: Optional[int],
                 timeout: Optional[float]) -> None:
        self.semaphore = semaphore
        self.value = value
        self.loop = loop
        self.future: "asyncio.Future[None]" = loop.create_future()
        self.deadline = deadline
        self.timeout = timeout
        # The daemon: one wait_list watches one daemon's liveness.
        self.key = (semaphore._handle.session.address,
                    semaphore._client.daemon_pid)

    def settle(self, error: Optional[BaseException]) -> None:
        """Completes the future on its loop (from a waiter thread)."""
        try:
            self.loop.call_soon_threadsafe(_settle, self.future, error)
        except RuntimeError:
            pass  # the loop was closed: nobody awaits it any more


def _settle(future: "asyncio.Future[None]",
            error: Optional[BaseException]) -> None:
    if future.done():
        return  # cancelled meanwhile
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


def _sweep(lib: Any, waits: List[_AsyncWait]) -> List[_AsyncWait]:
    """Polls each wait once (within the Calls of their handles): settles
    those reached, failed or past their deadline; returns the others."""
    now = time.monotonic_ns()
    pending = []
    for wait in waits:
        status = lib.halo_semaphore_wait(wait.semaphore._handle.pointer,
                                         wait.value, 0)
        if not status:
            wait.settle(None)
        elif lib.halo_status_code(status) != StatusCode.DEADLINE_EXCEEDED:
            wait.settle(take_error(lib, status))
        else:
            lib.halo_status_free(status)
            if wait.deadline is not None and now >= wait.deadline:
                wait.settle(DeadlineExceededError(
                    f"wait for {wait.semaphore._handle.name} >= "
                    f"{wait.value} timed out after {wait.timeout} s"))
            else:
                pending.append(wait)
    return pending


def _enter(waits: List[_AsyncWait]) -> List[_core.Call]:
    """Enters the Calls of the handles of |waits| (one per session);
    HaloError if one was released or its client closed."""
    by_session: Dict[int, Tuple[_core.Session, List[_core.Handle]]] = {}
    for wait in waits:
        handle = wait.semaphore._handle
        by_session.setdefault(id(handle.session),
                              (handle.session, []))[1].append(handle)
    return _core.calls(list(by_session.values()))


def _poll(waits: List[_AsyncWait]) -> List[_AsyncWait]:
    """Settles the waits of |waits| (waiting for room, any daemon's) whose
    value was reached or whose semaphore failed or was destroyed; returns
    those it settled. Each is queried first (a read of the mapped page: no
    message, nothing allocated while the value is not reached); only
    those that changed are polled as _sweep() does."""
    try:
        entered = _enter(waits)
    except HaloError:
        return []  # released meanwhile: the next slice settles it
    lib = _lib.load()
    try:
        value = ctypes.c_uint64()
        changed = []
        for wait in waits:
            status = lib.halo_semaphore_query(wait.semaphore._handle.pointer,
                                              ctypes.byref(value))
            if status:
                lib.halo_status_free(status)
                changed.append(wait)
            elif value.value >= wait.value:
                changed.append(wait)
        if not changed:
            return []
        pending = {id(wait) for wait in _sweep(lib, changed)}
        return [wait for wait in changed if id(wait) not in pending]
    finally:
        _core.leave_all(entered)


def _serve(batch: List[_AsyncWait], block: bool = True,
           until: Optional[int] = None) -> List[_AsyncWait]:
    """One slice of a waiter thread: waits until any wait of |batch| (one
    daemon's) is reached or fails, or for at most WAIT_SLICE_S (and not
    past |until|, monotonic ns, if given); settles what ended and returns
    the waits still pending. Without |block|, polls each wait once (any
    number of them, of any daemon) instead."""
    live = []
    for wait in batch:
        if wait.future.done() or wait.loop.is_closed():
            continue  # cancelled, or its loop is gone
        try:
            wait.semaphore._check_alive()
        except HaloError as error:  # released, or its client closed
            wait.settle(error)
            continue
        live.append(wait)
    if not live:
        return []
    try:
        entered = _enter(live)
    except HaloError:
        return live  # released meanwhile: the next slice settles it
    lib = _lib.load()
    try:
        live = _sweep(lib, live)
        if not live or not block:
            return live
        count = len(live)
        pointers = (ctypes.c_void_p * count)(
            *(wait.semaphore._handle.pointer for wait in live))
        values = (ctypes.c_uint64 * count)(*(wait.value for wait in live))
        slice_ns = _SLICE_NS
        deadlines = [w.deadline for w in live if w.deadline is not None]
        if until is not None:
            deadlines.append(until)
        if deadlines:
            slice_ns = max(0, min(slice_ns,
                                  min(deadlines) - time.monotonic_ns()))
        index = ctypes.c_size_t()
        status = lib.halo_semaphore_wait_list(count, pointers, values,
                                              _lib.WAIT_ANY, slice_ns,
                                              ctypes.byref(index))
        if status and lib.halo_status_code(status) == \
                StatusCode.DEADLINE_EXCEEDED:
            lib.halo_status_free(status)
            status = None
        pending = _sweep(lib, live)
        if status:
            if len(pending) == count:
                # No wait of its own ended it: the daemon died
                # (UNAVAILABLE), which every wait of the batch shares.
                died = take_error(lib, status)
                for wait in pending:
                    wait.settle(make_error(died.code, died.message))
                return []
            lib.halo_status_free(status)
        return pending
    finally:
        _core.leave_all(entered)


class _AsyncWaits:
    """The waits of wait_async() not yet taken by a thread, and the
    threads (see ASYNC_WAIT_THREADS)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready = threading.Condition(self.lock)
        self.pending: List[_AsyncWait] = []
        self.threads = 0
        self.idle = 0  # threads waiting on |ready| that no add() woke yet
        self.keys: Dict[Tuple[str, int], int] = {}  # daemon -> its threads
        # When the waits of |pending| are next queried (monotonic ns): by
        # the first thread whose slice ends after it, every WAIT_SLICE_S
        # while any wait for room (each slice ends by then).
        self.poll_at = 0

    def add(self, wait: _AsyncWait) -> None:
        with self.lock:
            self.pending.append(wait)
            if self.idle:
                self.idle -= 1
                self.ready.notify()
                return
            if self.threads >= ASYNC_WAIT_THREADS and wait.key in self.keys:
                return  # a thread of its daemon takes it after its slice
            self.threads += 1
            self.keys[wait.key] = self.keys.get(wait.key, 0) + 1
        try:
            threading.Thread(target=self._run, args=(wait.key,),
                             name="halogpu-wait", daemon=True).start()
        except BaseException:
            with self.lock:
                self.threads -= 1
                self._leave(wait.key)
                if wait in self.pending:
                    self.pending.remove(wait)
            raise

    def _leave(self, key: Tuple[str, int]) -> None:
        left = self.keys[key] - 1
        if left:
            self.keys[key] = left
        else:
            del self.keys[key]

    def _take(self, batch: List[_AsyncWait], key: Tuple[str, int]) -> None:
        """Moves pending waits of daemon |key| into |batch| while it has
        room (under the lock)."""
        room = _lib.WAIT_MAX_COUNT - len(batch)
        if not room or not self.pending:
            return
        others = []
        for wait in self.pending:
            if room and wait.key == key:
                batch.append(wait)
                room -= 1
            else:
                others.append(wait)
        self.pending = others

    def _run(self, key: Optional[Tuple[str, int]]) -> None:
        """A waiter thread: serves waits of daemon |key| (counted in
        |keys|) until none is left, then idles until add() wakes it."""
        batch: List[_AsyncWait] = []
        while True:
            with self.lock:
                if key is None:
                    while not self.pending:
                        self.idle += 1
                        self.ready.wait()  # add() took it off |idle|
                    key = self.pending[0].key
                    self.keys[key] = self.keys.get(key, 0) + 1
                self._take(batch, key)
                if not batch:
                    self._leave(key)
                    key = None
                    continue
                ended, polled = self._due()
                # While waits wait for room, the slice ends by their next
                # query.
                until = self.poll_at if self.pending else None
            while ended:
                ended = _serve(ended, block=False)
            if polled:
                settled = {id(wait) for wait in _poll(polled)}
                with self.lock:
                    if settled:
                        self.pending = [wait for wait in self.pending
                                        if id(wait) not in settled]
                    # The next query a slice after this one ended: however
                    # long a query of many waits takes, the threads pause.
                    self.poll_at = time.monotonic_ns() + _SLICE_NS
                    until = self.poll_at if self.pending else None
            batch = _serve(batch, until=until)

    def _due(self) -> Tuple[List[_AsyncWait], List[_AsyncWait]]:
        """Once per WAIT_SLICE_S (of all threads) while waits no thread
        took yet wait for room (every thread of their daemon is full):
        takes those that ended (_ended) and lists the others, to query
        (_poll); else two empty lists (under the lock). The thread settles
        the first and queries the others between its slices, so a wait
        waiting for room still ends on time, and completes within
        WAIT_SLICE_S of its value being reached or its semaphore failing;
        while nothing changes, that is all the threads do for it."""
        if not self.pending:
            return [], []
        now = time.monotonic_ns()
        if now < self.poll_at:
            return [], []
        self.poll_at = now + _SLICE_NS  # _run() sets it again after _poll
        return self._ended(now), list(self.pending)

    def _ended(self, now: int) -> List[_AsyncWait]:
        """Takes the waits of |pending| that ended: cancelled, released, or
        past their deadline at |now| (under the lock)."""
        ended, others = [], []
        for wait in self.pending:
            if wait.future.done() or wait.loop.is_closed() or \
                    wait.semaphore.released or \
                    (wait.deadline is not None and now >= wait.deadline):
                ended.append(wait)
            else:
                others.append(wait)
        self.pending = others
        return ended


_async_waits: Optional[_AsyncWaits] = None
_async_waits_lock = threading.Lock()


def _waits() -> _AsyncWaits:
    global _async_waits
    with _async_waits_lock:
        if _async_waits is None:
            _async_waits = _AsyncWaits()
        return _async_waits


def _forget_waits_in_child() -> None:
    # A forked child has none of the parent's threads.
    global _async_waits, _async_waits_lock
    _async_waits = None
    _async_waits_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_waits_in_child)


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
    _share = ("share it by token: semaphore.export() here "
              "(exportable=True), client.import_semaphore(token) there")

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
            error.value = value.value
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
        to the event loop once, as any await should). Otherwise a few
        threads (ASYNC_WAIT_THREADS) wait for the event loops, each on up
        to 64 semaphores of one daemon at once, with the GIL released: a
        wait a thread holds completes as soon as its value is reached. A
        wait begun while every thread is full waits for room (a thread
        with room takes it up within 0.1 s); meanwhile the threads query
        it every 0.1 s (a read of the semaphore's mapped page), so it too
        completes within 0.1 s of its value being reached or its semaphore
        failing, however many are pending. Cancelling the awaiting task
        stops the wait within 0.1 s (no thread is left blocked for it).
        Errors as wait(); |timeout| in seconds (None: for ever), kept
        (within 0.1 s) by a wait still waiting for room too."""
        value = check_int(value, "value", 0, _lib.SEMAPHORE_MAX_VALUE)
        timeout_ns = check_timeout(timeout)
        if self._wait_slice(value, 0):
            # Still a suspension point: a loop of waits on reached values
            # lets the other tasks run.
            await asyncio.sleep(0)
            return
        if timeout_ns == 0:
            raise DeadlineExceededError(
                f"wait for {self._handle.name} >= {value} timed out after "
                f"{timeout} s")
        deadline = None if timeout_ns >= _lib.TIMEOUT_INFINITE else \
            time.monotonic_ns() + timeout_ns
        wait = _AsyncWait(self, value, asyncio.get_running_loop(), deadline,
                          timeout)
        _waits().add(wait)
        await wait.future

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
