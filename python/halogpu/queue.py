# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Queues and submissions (halo_queue_execute, halo_queue_alloca,
halo_queue_dealloca)."""

import ctypes
import warnings
from typing import TYPE_CHECKING, Any, Iterable, List, Optional, Tuple

from . import _core, _lib
from ._object import HaloObject, check_client, check_int
from .buffer import Buffer, BufferRef, make_buffer, memory_type
from .command_buffer import CommandBuffer
from .errors import check, take_error
from .semaphore import Semaphore

if TYPE_CHECKING:
    from .client import Client


class Queue(HaloObject):
    """A queue of one device (Client.create_queue).

    Queues are unordered except through semaphores (IREE semantics):
    submissions whose waits are met may run concurrently and complete in
    any order. Thread safety: execute() may be called from any number of
    threads at once."""

    _kind = "queue"

    def __init__(self, client: "Client", handle: _core.Handle, device: int,
                 priority: int) -> None:
        super().__init__(client, handle, None)
        self._device = device
        self._priority = priority

    @property
    def device(self) -> int:
        """The device ordinal of the queue."""
        return self._device

    @property
    def priority(self) -> int:
        """The priority given to Client.create_queue()."""
        return self._priority

    def execute(self, command_buffer: CommandBuffer, bindings: Any = (),
                wait: Iterable[Tuple[Semaphore, int]] = (),
                signal: Iterable[Tuple[Semaphore, int]] = ()) -> None:
        """Submits |command_buffer| on this queue; see Client.execute()."""
        execute(self._client, self, command_buffer, bindings, wait, signal)

    def alloca(self, size: int, *, memory: Any = "device",
               wait: Iterable[Tuple[Semaphore, int]] = (),
               signal: Iterable[Tuple[Semaphore, int]] = ()) -> Buffer:
        """Queue-ordered allocation (halo_queue_alloca): returns a Buffer
        of |size| bytes (1 .. 2**40) on this queue's device at once; work
        that waits on |signal| ((Semaphore, value) pairs) may use it, and
        |signal| is signaled once |wait| is met (a failed wait fails it).

        The memory is allocated now, not when |wait| is met: the session's
        quota is charged at once (ResourceExhaustedError names it).
        |memory|: "device" or "host_visible", as Client.create_buffer()."""
        size = check_int(size, "size", 1, 2**40)
        kind = memory_type(memory)
        waits = _values(wait, "wait", self._client)
        signals = _values(signal, "signal", self._client)
        c_waits, c_signals, handles = _c_values(waits, signals)
        lib = _lib.load()
        session = self._handle.session
        pointer = ctypes.c_void_p()
        with _core.Call(session, self._handle, *handles):
            _fill_values(c_waits, waits)
            _fill_values(c_signals, signals)
            status = lib.halo_queue_alloca(
                self._handle.pointer, c_waits, len(waits), c_signals,
                len(signals), kind, size, ctypes.byref(pointer))
            if not status:
                return make_buffer(self._client, session, pointer.value,
                                   self._device, False)
        raise take_error(lib, status)

    def dealloca(self, buffer: Buffer, *,
                 wait: Iterable[Tuple[Semaphore, int]] = (),
                 signal: Iterable[Tuple[Semaphore, int]] = ()) -> None:
        """Queue-ordered deallocation (halo_queue_dealloca) of |buffer|
        (not exportable): its handle goes at once (later uses raise
        NotFoundError; release() stays local), the memory is freed once
        |wait| is met and every execution that bound it is done, and then
        |signal| is signaled. Work waiting on |signal| must not use the
        buffer: it would wait for itself, undetected, until the client
        closes (or a wait on what it signals times out). A RuntimeWarning where views of it (numpy(),
        memoryview(), DLPack) are still alive: they stay mapped, but once
        the dealloca completes the daemon may give their bytes to another
        buffer (release() instead keeps the memory for them)."""
        if not isinstance(buffer, Buffer):
            raise TypeError(f"expected a Buffer, not {type(buffer).__name__}")
        check_client(buffer, self._client, "buffer")
        buffer._check_allocated()
        waits = _values(wait, "wait", self._client)
        signals = _values(signal, "signal", self._client)
        c_waits, c_signals, handles = _c_values(waits, signals)
        lib = _lib.load()
        with _core.Call(self._handle.session, self._handle, buffer._handle,
                        *handles):
            _fill_values(c_waits, waits)
            _fill_values(c_signals, signals)
            status = lib.halo_queue_dealloca(
                self._handle.pointer, c_waits, len(waits), c_signals,
                len(signals), buffer._handle.pointer)
            if not status:
                buffer._deallocated = True
        check(lib, status)
        views = buffer._handle.maps
        if views:
            warnings.warn(
                f"Queue.dealloca: {views} view(s) of {buffer._handle.name} "
                "(numpy, memoryview, DLPack) are still alive; once the "
                "dealloca completes the daemon may give their bytes to "
                "another buffer: drop them first, or release() the buffer "
                "instead", RuntimeWarning, stacklevel=2)


def _binding(value: Any, i: int, client: "Client"
             ) -> Tuple[Optional[Buffer], int, int]:
    """(buffer or None, offset, length) for binding-table entry |i|."""
    if value is None:
        return None, 0, 0
    if isinstance(value, Buffer):
        value = BufferRef(value)
    elif isinstance(value, tuple):
        if not 1 <= len(value) <= 3 or not isinstance(value[0], Buffer):
            raise TypeError(
                f"bindings[{i}] must be a Buffer, buffer.ref(...), "
                "(buffer, offset[, length]) or None")
        value = BufferRef(*value)
    if not isinstance(value, BufferRef):
        raise TypeError(
            f"bindings[{i}] must be a Buffer, buffer.ref(...), (buffer, "
            f"offset[, length]) or None, not {type(value).__name__}")
    check_client(value.buffer, client, f"bindings[{i}]")
    length = _lib.WHOLE_BUFFER if value.length is None else value.length
    return value.buffer, value.offset, length


def _values(pairs: Any, what: str, client: "Client"
            ) -> List[Tuple[Semaphore, int]]:
    try:
        pairs = list(pairs)
    except TypeError:
        raise TypeError(
            f"{what} must be an iterable of (Semaphore, value) pairs") \
            from None
    result = []
    for i, pair in enumerate(pairs):
        try:
            semaphore, value = pair
        except (TypeError, ValueError):
            hint = ""
            if i == 0 and isinstance(pair, Semaphore):
                hint = (f": a list of pairs, {what}=[(semaphore, value)], "
                        "not one pair")
            raise TypeError(
                f"{what}[{i}] must be a (Semaphore, value) pair{hint}") \
                from None
        if not isinstance(semaphore, Semaphore):
            raise TypeError(
                f"{what}[{i}]: expected a Semaphore, not "
                f"{type(semaphore).__name__}")
        check_client(semaphore, client, f"{what}[{i}]")
        result.append((semaphore, check_int(
            value, f"{what}[{i}] value", 0, _lib.SEMAPHORE_MAX_VALUE)))
    return result


def _c_values(waits: List[Tuple[Semaphore, int]],
              signals: List[Tuple[Semaphore, int]]
              ) -> Tuple[Any, Any, List[_core.Handle]]:
    """ctypes arrays for |waits| and |signals| and the semaphores' handles
    (to hold during the call)."""
    c_waits = (_lib.SemaphoreValue * max(1, len(waits)))()
    c_signals = (_lib.SemaphoreValue * max(1, len(signals)))()
    handles = [semaphore._handle for semaphore, _ in waits]
    handles.extend(semaphore._handle for semaphore, _ in signals)
    return c_waits, c_signals, handles


def _fill_values(array: Any, pairs: List[Tuple[Semaphore, int]]) -> None:
    """Fills |array| (inside the Call that holds the semaphores)."""
    for i, (semaphore, value) in enumerate(pairs):
        array[i].semaphore = semaphore._handle.pointer
        array[i].value = value


def execute(client: "Client", queue: Optional["Queue"],
            command_buffer: CommandBuffer, bindings: Any, wait: Any,
            signal: Any) -> None:
    if not isinstance(command_buffer, CommandBuffer):
        raise TypeError(
            f"expected a CommandBuffer, not {type(command_buffer).__name__}")
    check_client(command_buffer, client, "command buffer")
    if queue is not None:
        check_client(queue, client, "queue")
        if queue.device != command_buffer.device:
            raise ValueError(
                f"the queue is on device {queue.device}, the command buffer "
                f"on device {command_buffer.device}")
    if isinstance(bindings, (Buffer, BufferRef)):
        raise TypeError("bindings must be a sequence (a list of buffers)")
    bindings = [_binding(value, i, client)
                for i, value in enumerate(bindings)]
    if len(bindings) > command_buffer.binding_capacity:
        raise ValueError(
            f"{len(bindings)} bindings exceed the command buffer's binding "
            f"capacity {command_buffer.binding_capacity}")
    waits = _values(wait, "wait", client)
    signals = _values(signal, "signal", client)

    handles = [command_buffer._handle]
    if queue is not None:
        handles.append(queue._handle)
    handles.extend(buffer._handle for buffer, _, _ in bindings if buffer)
    handles.extend(semaphore._handle for semaphore, _ in waits)
    handles.extend(semaphore._handle for semaphore, _ in signals)

    c_bindings = (_lib.Binding * max(1, len(bindings)))()
    c_waits = (_lib.SemaphoreValue * max(1, len(waits)))()
    c_signals = (_lib.SemaphoreValue * max(1, len(signals)))()
    lib = _lib.load()
    with _core.Call(client._session, *handles):
        for i, (buffer, offset, length) in enumerate(bindings):
            if buffer is not None:
                c_bindings[i].buffer = buffer._handle.pointer
                c_bindings[i].offset = offset
                c_bindings[i].length = length
        _fill_values(c_waits, waits)
        _fill_values(c_signals, signals)
        status = lib.halo_queue_execute(
            queue._handle.pointer if queue is not None else None,
            command_buffer._handle.pointer, c_bindings, len(bindings),
            c_waits, len(waits), c_signals, len(signals))
    check(lib, status)


def make_queue(client: "Client", session: _core.Session, pointer: Optional[int],
               device: int, priority: int) -> "Queue":
    lib = _lib.load()
    handle = _core.Handle(session, pointer, lib.halo_queue_release, "queue",
                          f"queue (device {device}, priority {priority})")
    return Queue(client, handle, device, priority)
