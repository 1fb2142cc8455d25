# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Fault containment between trust domains, seen from Python: a kernel that
crashes its device worker fails that client's work with DeviceLostError,
its session with SessionLostError, and a reconnect works; a client of
another trust domain never notices; a client that keeps crashing is refused
over its fault budget. halod runs with --trust-domain process
(every client process is a domain of its own) and the CPU driver."""

import multiprocessing
import os

import numpy as np
import pytest

import halogpu

from conftest import DRIVER, Daemon

N = 256

pytestmark = pytest.mark.skipif(
    DRIVER != "local", reason="the crash kernel is an ELF for the CPU driver")


def vector_add(client, kernels, step):
    """One checked c = a + b on |client|; raises on a failure."""
    buffers = [client.create_buffer(N * 4, memory="host_visible")
               for _ in range(3)]
    a, b, c = (buffer.numpy(np.float32) for buffer in buffers)
    a[:] = np.arange(N) + step
    b[:] = 2 * np.arange(N)
    done = client.create_semaphore()
    with client.record(bindings=3) as cb:
        cb.dispatch(kernels, "add", grid=(N + 63) // 64, block=64,
                    args=[halogpu.slot(0), halogpu.slot(1), halogpu.slot(2),
                          np.uint32(N)])
    client.execute(cb, bindings=buffers, signal=[(done, 1)])
    done.wait(1, timeout=10)
    assert np.array_equal(c, 3 * np.arange(N, dtype=np.float32) + step)


def victim(address, kernels_path, steps, result):
    """Another process, so another trust domain: |steps| checked adds."""
    try:
        with halogpu.connect(address, client_name="victim") as client:
            kernels = client.load_executable_file(kernels_path)
            for step in range(steps):
                vector_add(client, kernels, step)
        result.put(("ok", steps))
    except Exception as error:  # reported to the parent, which fails
        result.put(("failed", repr(error)))


@pytest.fixture
def domains_daemon():
    started = Daemon("--trust-domain", "process", "--native-code", "any")
    yield started
    started.stop()


def test_crash_loses_only_its_domain(domains_daemon, kernels_file):
    context = multiprocessing.get_context("spawn")
    result = context.Queue()
    other = context.Process(target=victim,
                            args=(domains_daemon.address, kernels_file, 300,
                                  result))
    other.start()
    client = halogpu.connect(domains_daemon.address, client_name="attacker")
    kernels = client.load_executable_file(kernels_file)
    vector_add(client, kernels, 0)
    done = client.create_semaphore()
    with client.record() as cb:
        cb.dispatch(kernels, "crash", grid=1, block=1)
    client.execute(cb, signal=[(done, 1)])
    with pytest.raises(halogpu.DeviceLostError, match="worker"):
        done.wait(1, timeout=10)
    # The session went with its worker: every call says so, with the reason.
    with pytest.raises(halogpu.SessionLostError, match="trust domain"):
        client.create_semaphore()
    client.close()
    # Rebuilding is connecting again: a fresh worker serves the new session.
    with halogpu.connect(domains_daemon.address) as again:
        vector_add(again, again.load_executable_file(kernels_file), 1)
    other.join(60)
    assert result.get(timeout=5) == ("ok", 300)
    assert domains_daemon.process.poll() is None  # halod itself stays


def crash(client, kernels):
    """Dispatches `crash` on |client|: its worker dies, the wait raises."""
    done = client.create_semaphore()
    with client.record() as cb:
        cb.dispatch(kernels, "crash", grid=1, block=1)
    client.execute(cb, signal=[(done, 1)])
    with pytest.raises(halogpu.DeviceLostError, match="worker"):
        done.wait(1, timeout=10)


@pytest.fixture
def budget_daemon():
    started = Daemon("--trust-domain", "process", "--native-code", "any",
                     "--fault-budget", "2", "--fault-budget-window-s", "600")
    yield started
    started.stop()


def test_fault_budget_refuses_a_repeat_offender(budget_daemon, kernels_file):
    context = multiprocessing.get_context("spawn")
    result = context.Queue()
    other = context.Process(target=victim,
                            args=(budget_daemon.address, kernels_file, 300,
                                  result))
    other.start()
    for fault in (1, 2):
        client = halogpu.connect(budget_daemon.address, client_name="attacker")
        kernels = client.load_executable_file(kernels_file)
        vector_add(client, kernels, fault)
        crash(client, kernels)
        # After the second, the lost session says a reconnect is refused.
        expected = "reconnect and rebuild" if fault == 1 else "refused"
        with pytest.raises(halogpu.SessionLostError, match=expected):
            client.create_semaphore()
        client.close()
    # Over its budget: connecting raises ResourceExhaustedError saying why,
    # until when, and how an operator clears it.
    with pytest.raises(halogpu.ResourceExhaustedError) as refused:
        halogpu.connect(budget_daemon.address)
    message = str(refused.value)
    assert f"client pid {os.getpid()} " in message
    assert "caused 2 device faults in the last 600 s" in message
    assert "(fault-budget=2): refused until" in message
    assert f"haloctl forgive-client {os.getpid()}" in message
    # The victim, of another trust domain, was never charged nor stopped.
    other.join(60)
    assert result.get(timeout=5) == ("ok", 300)
    assert budget_daemon.process.poll() is None
