# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Semaphore.wait_async: the event loop keeps running while a wait blocks,
timeouts, failures, cancellation leaves no thread in a wait, and the
asyncio example overlaps two pipelines."""

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

import halogpu

from conftest import REPO


def test_wait_async_does_not_block_the_loop(client):
    semaphore = client.create_semaphore()
    ticks = []

    async def ticker(stop):
        while not stop.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def main():
        stop = asyncio.Event()
        task = asyncio.create_task(ticker(stop))
        threading.Timer(0.4, semaphore.signal, (3,)).start()
        started = time.monotonic()
        await semaphore.wait_async(3, timeout=10)
        waited = time.monotonic() - started
        stop.set()
        await task
        return waited

    waited = asyncio.run(main())
    assert 0.35 <= waited < 5
    # The loop ran throughout: ~40 ticks of 10 ms in 0.4 s.
    assert len(ticks) >= 15, ticks


def test_wait_async_reached_value_needs_no_thread(client):
    semaphore = client.create_semaphore(5)

    async def main():
        await semaphore.wait_async(5)
        await semaphore.wait_async(1, timeout=0)

    asyncio.run(main())


def test_wait_async_timeout_and_failure(client):
    semaphore = client.create_semaphore()

    async def timeout():
        started = time.monotonic()
        with pytest.raises(halogpu.DeadlineExceededError, match=">= 1"):
            await semaphore.wait_async(1, timeout=0.25)
        return time.monotonic() - started

    assert 0.2 <= asyncio.run(timeout()) < 2

    async def failure():
        threading.Timer(0.1, semaphore.fail,
                        (halogpu.StatusCode.DATA_LOSS, "bad bytes")).start()
        with pytest.raises(halogpu.DataLossError, match="bad bytes"):
            await semaphore.wait_async(1, timeout=10)

    asyncio.run(failure())
    with pytest.raises(TypeError):
        asyncio.run(semaphore.wait_async("1"))


def test_cancelled_wait_leaves_no_thread_waiting(client):
    semaphore = client.create_semaphore()
    session = client._session

    async def main():
        task = asyncio.create_task(semaphore.wait_async(7))
        await asyncio.sleep(0.15)
        assert session.calls == 1  # a thread is in halo_semaphore_wait
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    deadline = time.monotonic() + 2
    while session.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert session.calls == 0  # the slice ended; nothing waits any more
    semaphore.release()
    assert semaphore._handle.freed


def test_many_waits_at_once(client):
    semaphores = [client.create_semaphore() for _ in range(40)]

    async def main():
        waits = [asyncio.create_task(s.wait_async(1, timeout=20))
                 for s in semaphores]
        await asyncio.sleep(0.05)
        for s in semaphores:
            s.signal(1)
        started = time.monotonic()
        await asyncio.gather(*waits)
        return time.monotonic() - started

    # 40 waits on 16 threads: each queued wait finds its value at once.
    assert asyncio.run(main()) < 5


def test_many_pending_waits_each_wake_promptly(client):
    """256 waits pending at once (more than the waiting threads, which
    wait on up to 64 semaphores each): each completes within 100 ms of
    its signal, not when a thread next gets round to it."""
    count = 256
    semaphores = [client.create_semaphore() for _ in range(count)]
    signalled = [0.0] * count
    woke = [0.0] * count

    def signaller(order):
        for i in order:
            signalled[i] = time.monotonic()
            semaphores[i].signal(1)
            time.sleep(0.002)

    async def waiter(i):
        await semaphores[i].wait_async(1, timeout=30)
        woke[i] = time.monotonic()

    async def main():
        waits = [asyncio.create_task(waiter(i)) for i in range(count)]
        await asyncio.sleep(0.3)  # every wait is pending now
        # An order unlike the one the waits started in.
        order = list(range(1, count, 2)) + list(range(0, count, 2))
        thread = threading.Thread(target=signaller, args=(order,))
        thread.start()
        await asyncio.gather(*waits)
        thread.join()

    asyncio.run(main())
    late = sorted((woke[i] - signalled[i], i) for i in range(count))
    assert late[0][0] >= 0
    assert late[-1][0] < 0.1, f"slowest wake-ups (s, index): {late[-5:]}"


def test_one_wait_ending_leaves_the_others_waiting(client):
    """Waits that share a waiting thread end one by one: a failure, a
    release and a cancellation settle only their own wait."""
    failing, released, cancelled, plain = (client.create_semaphore()
                                           for _ in range(4))

    async def main():
        waits = {name: asyncio.create_task(s.wait_async(1, timeout=20))
                 for name, s in [("failing", failing),
                                 ("released", released),
                                 ("cancelled", cancelled),
                                 ("plain", plain)]}
        await asyncio.sleep(0.2)
        failing.fail(halogpu.StatusCode.DATA_LOSS, "bad bytes")
        with pytest.raises(halogpu.DataLossError, match="bad bytes"):
            await waits["failing"]
        released.release()
        with pytest.raises(halogpu.ClosedError, match="released"):
            await waits["released"]
        waits["cancelled"].cancel()
        with pytest.raises(asyncio.CancelledError):
            await waits["cancelled"]
        await asyncio.sleep(0.2)
        assert not waits["plain"].done()
        plain.signal(1)
        await waits["plain"]

    asyncio.run(main())


def test_wait_waiting_for_room_still_times_out(client, monkeypatch):
    """A wait begun while every waiting thread is full (64 waits each)
    waits for room, but its timeout and a release still end it on time:
    the thread that is full settles them between its slices."""
    monkeypatch.setattr(halogpu.semaphore, "ASYNC_WAIT_THREADS", 1)
    # Threads of its own (those of earlier tests would take the waits).
    monkeypatch.setattr(halogpu.semaphore, "_async_waits",
                        halogpu.semaphore._AsyncWaits())
    busy = [client.create_semaphore() for _ in range(64)]
    late, released = client.create_semaphore(), client.create_semaphore()

    async def main():
        waits = [asyncio.create_task(s.wait_async(1, timeout=30))
                 for s in busy]
        await asyncio.sleep(0.3)  # the one thread holds all 64
        started = time.monotonic()
        with pytest.raises(halogpu.DeadlineExceededError, match=">= 1"):
            await asyncio.wait_for(late.wait_async(1, timeout=0.3), 10)
        took = time.monotonic() - started
        pending = asyncio.create_task(released.wait_async(1))
        await asyncio.sleep(0.1)
        released.release()
        with pytest.raises(halogpu.ClosedError, match="released"):
            await asyncio.wait_for(pending, 10)
        for s in busy:
            s.signal(1)
        await asyncio.gather(*waits)
        return took

    took = asyncio.run(main())
    assert 0.25 <= took < 2, took


def test_wait_waiting_for_room_completes_when_reached(client, monkeypatch):
    """A wait begun while every waiting thread is full completes within
    0.1 s of its value being reached (or its semaphore failing), without
    waiting for room: the waits that fill the threads may depend on it (a
    producer that opens their gate). While nothing changes, no thread
    polls it in a busy loop."""
    monkeypatch.setattr(halogpu.semaphore, "ASYNC_WAIT_THREADS", 1)
    # Threads of its own (those of earlier tests would take the waits).
    monkeypatch.setattr(halogpu.semaphore, "_async_waits",
                        halogpu.semaphore._AsyncWaits())
    gate, done, failing = (client.create_semaphore() for _ in range(3))

    async def producer():
        await done.wait_async(1)  # no timeout: only its value ends it
        gate.signal(1)

    async def main():
        consumers = [asyncio.create_task(gate.wait_async(1))
                     for _ in range(64)]
        await asyncio.sleep(0.3)  # the one thread holds all 64
        task = asyncio.create_task(producer())
        await asyncio.sleep(0.1)
        cpu = time.process_time()
        await asyncio.sleep(0.5)  # nothing changes
        cpu = time.process_time() - cpu
        assert not task.done()
        started = time.monotonic()
        done.signal(1)
        await asyncio.wait_for(asyncio.shield(task), 10)
        took = time.monotonic() - started
        await asyncio.wait_for(asyncio.gather(*consumers), 10)
        filler = [asyncio.create_task(done.wait_async(2)) for _ in range(64)]
        await asyncio.sleep(0.3)  # the thread is full again
        fail = asyncio.create_task(failing.wait_async(1))
        await asyncio.sleep(0.1)
        started = time.monotonic()
        failing.fail(halogpu.StatusCode.DATA_LOSS, "bad bytes")
        with pytest.raises(halogpu.DataLossError, match="bad bytes"):
            await asyncio.wait_for(fail, 10)
        failed = time.monotonic() - started
        done.signal(2)
        await asyncio.gather(*filler)
        return took, failed, cpu

    took, failed, cpu = asyncio.run(main())
    assert took < 0.5, took  # within 0.1 s, and a loaded machine's slack
    assert failed < 0.5, failed
    assert cpu < 0.25, f"{cpu:.3f} s of CPU in 0.5 s of waiting"


def test_daemon_death_ends_pending_waits(fresh_daemon):
    """halod killed under pending waits: each raises UnavailableError."""
    client = halogpu.connect(fresh_daemon.address)
    semaphores = [client.create_semaphore() for _ in range(3)]

    async def main():
        waits = [asyncio.create_task(s.wait_async(1, timeout=20))
                 for s in semaphores]
        await asyncio.sleep(0.2)
        started = time.monotonic()
        fresh_daemon.process.kill()
        results = await asyncio.gather(*waits, return_exceptions=True)
        return results, time.monotonic() - started

    try:
        results, took = asyncio.run(main())
    finally:
        client.close()
    assert all(isinstance(r, halogpu.UnavailableError) for r in results), \
        results
    assert took < 5


def test_async_pipelines_example(address):
    if not shutil.which("cc"):
        pytest.skip("no cc for the CPU-driver kernel")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(halogpu.__file__))
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "python",
                                      "async_pipelines.py"),
         "--address", address, "--steps", "10"],
        capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "overlapped: True" in result.stdout
    assert "async_pipelines: ok" in result.stdout
