# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Semaphores: signal, query, waits (timeouts, failures, other threads,
closing), export/import, wait_all / wait_any."""

import threading
import time

import pytest

import halogpu


def test_signal_query_wait(client):
    semaphore = client.create_semaphore(5)
    assert semaphore.value == 5
    semaphore.signal(7)
    assert semaphore.query() == 7
    semaphore.wait(7)
    semaphore.wait(3, timeout=0)
    assert semaphore.handle > 0


def test_signal_must_increase(client):
    semaphore = client.create_semaphore(5)
    with pytest.raises(halogpu.InvalidArgumentError):
        semaphore.signal(5)
    with pytest.raises(halogpu.InvalidArgumentError):
        semaphore.signal(4)
    with pytest.raises(ValueError):
        semaphore.signal(2**63)
    with pytest.raises(ValueError):
        semaphore.signal(-1)
    with pytest.raises(TypeError):
        semaphore.signal(1.0)
    with pytest.raises(ValueError):
        client.create_semaphore(2**63)


def test_wait_timeout(client):
    semaphore = client.create_semaphore()
    started = time.monotonic()
    with pytest.raises(halogpu.DeadlineExceededError) as raised:
        semaphore.wait(1, timeout=0.25)
    elapsed = time.monotonic() - started
    assert 0.24 <= elapsed < 2
    assert isinstance(raised.value, TimeoutError)
    assert "timed out after 0.25 s" in str(raised.value)
    with pytest.raises(halogpu.DeadlineExceededError):
        semaphore.wait(1, timeout=0)
    with pytest.raises(ValueError):
        semaphore.wait(1, timeout=-1)
    with pytest.raises(TypeError):
        semaphore.wait(1, timeout="1")


def test_wait_releases_the_gil(client):
    semaphore = client.create_semaphore()
    ticks = []

    def signal_later():
        # Runs Python code while the main thread waits.
        for _ in range(10):
            ticks.append(time.monotonic())
            time.sleep(0.01)
        semaphore.signal(1)

    thread = threading.Thread(target=signal_later)
    thread.start()
    semaphore.wait(1, timeout=10)
    thread.join()
    assert len(ticks) == 10


def test_many_waiting_threads(client):
    semaphore = client.create_semaphore()
    woke = []

    def waiter(value):
        semaphore.wait(value, timeout=10)
        woke.append(value)

    threads = [threading.Thread(target=waiter, args=(v,)) for v in (1, 2, 3)]
    for thread in threads:
        thread.start()
    time.sleep(0.05)
    assert woke == []
    semaphore.signal(3)
    for thread in threads:
        thread.join()
    assert sorted(woke) == [1, 2, 3]


@pytest.mark.parametrize("code,cls", [
    (halogpu.StatusCode.ABORTED, halogpu.AbortedError),
    ("internal", halogpu.InternalError),
    (halogpu.DeviceLostError, halogpu.DeviceLostError),
    (halogpu.StatusCode.DATA_LOSS.value, halogpu.DataLossError),
])
def test_fail_wakes_waiters_with_the_failure(client, code, cls):
    semaphore = client.create_semaphore(1)
    errors = []

    def waiter():
        try:
            semaphore.wait(2, timeout=10)
        except halogpu.HaloError as error:
            errors.append(error)

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.05)
    semaphore.fail(code, "the producer crashed")
    thread.join()
    assert len(errors) == 1 and type(errors[0]) is cls
    assert "the producer crashed" in errors[0].message
    # Values already reached still succeed.
    semaphore.wait(1, timeout=0)
    with pytest.raises(cls) as raised:
        semaphore.query()
    assert raised.value.value == 1
    with pytest.raises(halogpu.FailedPreconditionError):
        semaphore.signal(5)
    semaphore.fail("aborted", "second failure is ignored")


def test_fail_arguments(client):
    semaphore = client.create_semaphore()
    with pytest.raises(ValueError):
        semaphore.fail(halogpu.StatusCode.OK)
    with pytest.raises(ValueError):
        semaphore.fail("NOT_A_CODE")
    with pytest.raises(TypeError):
        semaphore.fail(halogpu.StatusCode.ABORTED, message=5)
    assert semaphore.value == 0


def test_close_wakes_waiter_with_closed_error(address):
    client = halogpu.connect(address)
    semaphore = client.create_semaphore()
    errors = []

    def waiter():
        try:
            semaphore.wait(1)  # for ever
        except halogpu.HaloError as error:
            errors.append(error)

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.05)
    started = time.monotonic()
    client.close()
    thread.join(5)
    assert not thread.is_alive()
    assert time.monotonic() - started < 1
    assert len(errors) == 1 and isinstance(errors[0], halogpu.ClosedError)


def test_release_while_waiting(client):
    semaphore = client.create_semaphore()
    errors = []

    def waiter():
        try:
            semaphore.wait(1, timeout=10)
        except halogpu.HaloError as error:
            errors.append(error)

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.05)
    semaphore.release()
    thread.join(5)
    assert len(errors) == 1 and isinstance(errors[0], halogpu.ClosedError)
    assert "released" in str(errors[0])


def test_export_import(client, other_client):
    semaphore = client.create_semaphore(exportable=True)
    token = semaphore.export()
    assert len(token) == 32 and token == token.lower()
    imported = other_client.import_semaphore(token)
    assert imported.value == 0
    imported.signal(3)
    semaphore.wait(3, timeout=5)
    semaphore.signal(4)
    imported.wait(4, timeout=5)
    # The token as bytes: its hex digits (read from a pipe, a file) or its
    # 16 raw bytes.
    assert other_client.import_semaphore(token.encode()).value == 4
    assert other_client.import_semaphore(bytes.fromhex(token)).value == 4
    assert other_client.import_semaphore(token.encode() + b"\n").value == 4
    with pytest.raises(ValueError, match="32 hex digits, and these are not"):
        other_client.import_semaphore(b"z" * 32)
    with pytest.raises(ValueError, match="or its 16 raw bytes, not 5 bytes"):
        other_client.import_semaphore(b"short")


def test_export_needs_exportable(client):
    with pytest.raises(halogpu.FailedPreconditionError):
        client.create_semaphore().export()
    with pytest.raises(halogpu.NotFoundError):
        client.import_semaphore("ab" * 16)


def test_creator_close_aborts_importers(address, other_client):
    creator = halogpu.connect(address)
    semaphore = creator.create_semaphore(1, exportable=True)
    imported = other_client.import_semaphore(semaphore.export())
    creator.close()
    imported.wait(1, timeout=0)
    with pytest.raises(halogpu.AbortedError):
        imported.wait(2, timeout=5)


def test_wait_all_and_any(client, other_client):
    a = client.create_semaphore()
    b = client.create_semaphore(exportable=True)
    c = other_client.import_semaphore(b.export())
    with pytest.raises(halogpu.DeadlineExceededError):
        halogpu.wait_any([(a, 1), (c, 1)], timeout=0.05)
    b.signal(1)
    assert halogpu.wait_any([(a, 1), (c, 1)], timeout=5) == 1
    with pytest.raises(halogpu.DeadlineExceededError):
        halogpu.wait_all([(a, 1), (c, 1)], timeout=0.05)
    a.signal(2)
    halogpu.wait_all([(a, 2), (c, 1)], timeout=5)
    # An empty list is satisfied at once; wait_any has no index to return.
    assert halogpu.wait_all([], timeout=0) is None
    assert halogpu.wait_any([]) is None
    assert halogpu.wait_any(iter(()), timeout=0) is None
    with pytest.raises(ValueError):
        halogpu.wait_all([], timeout=-1)
    with pytest.raises(ValueError):
        halogpu.wait_all([(a, 1)] * 65)
    with pytest.raises(TypeError):
        halogpu.wait_all([a])
    with pytest.raises(TypeError):
        halogpu.wait_any([("a", 1)])


def test_semaphore_as_context_manager(client):
    with client.create_semaphore() as semaphore:
        semaphore.signal(1)
    assert semaphore.released
    with pytest.raises(halogpu.ClosedError):
        semaphore.value
