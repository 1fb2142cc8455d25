# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Liveness of C objects, tracked on the Python side.

libhalo's contract (halo.h) leaves three things to the caller: an object
must not be released while another thread uses it, halo_client_close() must
be the last call on a client (it frees every object not yet released), and
a host-visible mapping is valid only until its buffer is released. Python
code cannot be trusted with that, so every C pointer lives in a Handle and
every call goes through ``enter()``/``leave()``:

- A Session (one per halo_client_t) counts the calls in flight. Closing it
  stops new calls at once (they raise ClosedError), waits for the calls in
  flight on other threads, then calls halo_client_close(). Semaphore waits
  run in slices of at most WAIT_SLICE_S, so a waiter notices within that
  time and raises ClosedError instead of keeping close() waiting.
- A Handle counts its uses: calls in flight, holds (a command buffer being
  recorded holds the buffers and executables it references: the recording
  has only their handles until end()) and maps (live memoryviews and numpy
  arrays over a host-visible buffer). Releasing a Handle stops new uses at
  once; the C release runs when the last use ends.
- While maps are alive the session is not closed either (closing would
  unmap the memory under them): closing marks everything closed at once and
  the C close runs when the last view is garbage-collected.
- After fork() a child never touches its parent's sessions: every object
  inherited from the parent raises ClosedError, and the child's garbage
  collection of them calls nothing in libhalo. A child forked after the
  parent connected cannot connect either (nng aborts such a child), so
  connect() raises FailedPreconditionError there.

Garbage collection may run a finalizer (releasing a handle, or closing an
unreachable client) at any allocation, in the middle of this module's own
bookkeeping on the same thread. So the locks are re-entrant, every piece of
bookkeeping counts itself as a call in flight before it looks at anything
(a close then defers the C close to the last call out instead of freeing
the client under it), and a close run by garbage collection never waits.
"""

import os
import threading
from typing import (Any, Callable, Dict, Iterable, List, Optional, Sequence,
                    Tuple)

from .errors import ClosedError, FailedPreconditionError

# Longest slice of a semaphore wait, in seconds: how quickly a waiter sees
# that its client was closed (and how quickly Ctrl-C interrupts a wait).
WAIT_SLICE_S = 0.1

_fork_generation = 0


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)

_CALL, _HOLD, _MAP = 0, 1, 2

# The fork generation in which libhalo first opened a connection (and so
# started nng's threads); None before. nng panics ("nng is not
# fork-reentrant safe") when a child forked after that opens a socket, so
# connect() refuses in such a child.
_nng_generation = None


def check_can_connect() -> None:
    """Raises FailedPreconditionError in a child forked after this process
    (or an ancestor) used libhalo; notes the first use otherwise."""
    global _nng_generation
    if _nng_generation is None:
        _nng_generation = _fork_generation
    elif _nng_generation != _fork_generation:
        raise FailedPreconditionError(
            "libhalo cannot connect in a process forked after its parent "
            "connected (nng, its transport, is not fork-safe and would abort "
            "the process): start workers with multiprocessing's 'spawn' or "
            "'forkserver' method, or fork before the first connect")


class Session:
    """The liveness of one halo_client_t (see the module docstring)."""

    def __init__(self, lib: Any, pointer: Optional[int],
                 address: str) -> None:
        self.lib = lib
        self.pointer = pointer
        self.address = address
        self.generation = _fork_generation
        self.pid = os.getpid()
        self.lock = threading.RLock()
        self.idle = threading.Condition(self.lock)
        self.closing = False  # no new calls
        self.closed = False  # halo_client_close() ran (or never will)
        self.calls = 0  # calls in flight, C releases and bookkeeping
        self.maps = 0  # live views of host-visible memory
        self.threads: Dict[int, int] = {}  # thread id -> its part of |calls|
        self.reason = "the client was closed"

    def foreign(self) -> bool:
        return self.generation != _fork_generation

    def foreign_error(self) -> ClosedError:
        return ClosedError(
            f"this halo client was created by process {self.pid}, not this "
            f"one (pid {os.getpid()}): a forked child inherits no halo "
            "session (connect in the child, or start it with "
            "multiprocessing's spawn method, and share objects by token)")

    # Under the lock: one more / one fewer call in flight on this thread.
    def _begin_locked(self) -> None:
        self.calls += 1
        thread = threading.get_ident()
        self.threads[thread] = self.threads.get(thread, 0) + 1

    def _end_locked(self) -> bool:
        """Returns True if the deferred C close must run now (the caller
        runs it after letting go of the lock)."""
        thread = threading.get_ident()
        left = self.threads[thread] - 1
        if left:
            self.threads[thread] = left
        else:
            del self.threads[thread]
        self.calls -= 1
        if self.closing:
            self.idle.notify_all()  # close() may wait for this
        if self.closing and not self.closed and self.calls == 0 \
                and self.maps == 0:
            self.closed = True
            return True
        return False

    def _close_now(self) -> None:
        pointer, self.pointer = self.pointer, None
        self.lib.halo_client_close(pointer)

    def end_call(self) -> None:
        with self.lock:
            close_now = self._end_locked()
        if close_now:
            self._close_now()

    def close(self, reason: Optional[str] = None, wait: bool = True) -> None:
        """Ends the session (see the module docstring). Idempotent. With
        |wait|, waits for the calls in flight on other threads first;
        without (garbage collection), the last of them closes."""
        if self.foreign():
            # Never touch the parent's state (its lock may be held by a
            # thread that does not exist here).
            self.closing = self.closed = True
            return
        with self.lock:
            if self.closing:
                return
            self.closing = True
            if reason:
                self.reason = reason
            self._begin_locked()
            if wait:
                mine = self.threads[threading.get_ident()]
                while self.calls > mine:
                    self.idle.wait()
        self.end_call()


class Handle:
    """One C object: its pointer, its release function and its uses."""

    __slots__ = ("session", "pointer", "release_function", "kind", "name",
                 "uses", "maps", "released", "freed", "__weakref__")

    def __init__(self, session: Session, pointer: Optional[int],
                 release_function: Callable[[Optional[int]], None],
                 kind: str, name: str) -> None:
        self.session = session
        self.pointer = pointer
        self.release_function = release_function
        self.kind = kind  # "buffer", "semaphore", ...
        self.name = name  # shown in errors: "buffer 0x12"
        self.uses = 0
        self.maps = 0  # of |uses|: views and exports of its memory
        self.released = False
        self.freed = False

    def released_error(self) -> ClosedError:
        return ClosedError(f"{self.name} was released")


def _acquire(session: Session, handles: Sequence[Handle], what: int) -> None:
    """Starts a use of |handles|: a call (counted until _release_uses), a
    hold or a map."""
    if session.foreign():
        raise session.foreign_error()
    with session.lock:
        session._begin_locked()  # first: no close can free the client now
        try:
            if session.closing:
                raise ClosedError(session.reason)
            for handle in handles:
                if handle.released:
                    raise handle.released_error()
            for handle in handles:
                handle.uses += 1
                if what == _MAP:
                    handle.maps += 1
            if what == _MAP:
                session.maps += 1
        except BaseException as raised:
            error: Optional[BaseException] = raised
            close_now = session._end_locked()
        else:
            error = None
    if error is not None:
        if close_now:
            session._close_now()
        raise error
    if what != _CALL:
        session.end_call()  # only a call stays counted


def _release_uses(session: Session, handles: Sequence[Handle],
                  what: int) -> None:
    """Ends a use started by _acquire; frees the handles that were released
    meanwhile (unless the session is closing: its close frees them)."""
    if session.foreign():
        return
    with session.lock:
        if what != _CALL:
            session._begin_locked()  # bookkeeping counts as a call
        to_free = None
        for handle in handles:
            handle.uses -= 1
            if what == _MAP:
                handle.maps -= 1
            if handle.uses == 0 and handle.released and not handle.freed:
                handle.freed = True
                if not session.closing:
                    if to_free is None:
                        to_free = [handle]
                    else:
                        to_free.append(handle)
        if what == _MAP:
            session.maps -= 1
    try:
        if to_free:
            for handle in to_free:
                pointer, handle.pointer = handle.pointer, None
                handle.release_function(pointer)
    finally:
        session.end_call()


class Call:
    """``with Call(session, *handles) as call:`` one call into libhalo with
    |handles| in use. Raises ClosedError if the session is closed or a
    handle released."""

    __slots__ = ("session", "handles")

    def __init__(self, session: Session, *handles: Handle) -> None:
        self.session = session
        self.handles = handles

    def __enter__(self) -> "Call":
        _acquire(self.session, self.handles, _CALL)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _release_uses(self.session, self.handles, _CALL)


def calls(groups: Iterable[Tuple[Session, Sequence[Handle]]]) -> List[Call]:
    """Enters one Call per (session, handles) in |groups| (a wait on
    semaphores of several clients); returns the list to leave with
    leave_all()."""
    entered = []
    try:
        for session, handles in groups:
            call = Call(session, *handles)
            call.__enter__()
            entered.append(call)
    except BaseException:
        leave_all(entered)
        raise
    return entered


def leave_all(entered: List[Call]) -> None:
    for call in reversed(entered):
        call.__exit__(None, None, None)


def hold(handle: Handle) -> None:
    """Keeps |handle| from being freed (not from being released) until
    unhold(); raises ClosedError if it is already released."""
    _acquire(handle.session, (handle,), _HOLD)


def unhold(handle: Handle) -> None:
    _release_uses(handle.session, (handle,), _HOLD)


def map_pin(handle: Handle) -> None:
    """Keeps |handle| and its session's mappings alive until map_unpin()."""
    _acquire(handle.session, (handle,), _MAP)


def map_unpin(handle: Handle) -> None:
    _release_uses(handle.session, (handle,), _MAP)


def release(handle: Handle) -> None:
    """Releases |handle| now, or when its last use ends. Idempotent; fine
    after the session closed and in a forked child (no C call then)."""
    session = handle.session
    if session.foreign():
        handle.released = True
        return
    with session.lock:
        if handle.released:
            return
        handle.released = True
        if handle.uses:
            return  # the last use frees it
        handle.freed = True
        if session.closing:
            return  # halo_client_close frees it
        session._begin_locked()
    try:
        pointer, handle.pointer = handle.pointer, None
        handle.release_function(pointer)
    finally:
        session.end_call()
