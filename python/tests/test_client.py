# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Connecting, devices, ping, closing, and python -m halogpu info."""

import os
import subprocess
import sys

import pytest

import halogpu


def test_connect_as_context_manager(address):
    with halogpu.connect(address, client_name="pytest-cm") as client:
        assert not client.closed
        assert client.session_id > 0
        assert client.daemon_pid > 0
        assert client.address == address
        client.ping()
    assert client.closed
    with pytest.raises(halogpu.ClosedError):
        client.ping()
    client.close()  # idempotent


def test_connect_from_environment(address, monkeypatch):
    monkeypatch.setenv("HALO_ADDRESS", address)
    with halogpu.connect() as client:
        client.ping()
        assert client.address == address


def test_devices(client):
    devices = client.devices
    assert isinstance(devices, tuple) and len(devices) >= 1
    cpu = devices[0]
    assert isinstance(cpu, halogpu.Device)
    assert cpu.ordinal == 0
    assert cpu.driver == "local"
    assert cpu.name
    assert cpu.memory_bytes > 0
    assert cpu.compute_capability == (0, 0)
    assert client.devices is devices  # asked once


def test_bad_arguments_before_any_call():
    with pytest.raises(ValueError, match="ipc://"):
        halogpu.connect("tcp://127.0.0.1:1")
    with pytest.raises(TypeError):
        halogpu.connect(42)
    with pytest.raises(TypeError):
        halogpu.connect("ipc:///x", client_name=3)
    with pytest.raises(ValueError):
        halogpu.connect("ipc:///x", request_timeout=-1)


def test_no_daemon_is_unavailable(tmp_path):
    with pytest.raises(halogpu.UnavailableError) as raised:
        halogpu.connect(f"ipc://{tmp_path}/nobody.sock")
    assert isinstance(raised.value, ConnectionError)
    assert "nobody.sock" in str(raised.value)


def test_request_timeout(address):
    with halogpu.connect(address, request_timeout=5) as client:
        client.ping()


def test_closing_invalidates_every_object(address):
    client = halogpu.connect(address)
    buffer = client.create_buffer(64, memory="host_visible")
    device_buffer = client.create_buffer(64)
    semaphore = client.create_semaphore()
    queue = client.create_queue()
    client.close()
    for call in (lambda: buffer.write(b"x"), lambda: buffer.read(),
                 lambda: buffer.numpy(), lambda: buffer.memoryview(),
                 lambda: buffer.host_pointer, lambda: device_buffer.read(),
                 lambda: semaphore.signal(1), lambda: semaphore.value,
                 lambda: semaphore.wait(0), lambda: semaphore.export(),
                 lambda: client.create_buffer(1), lambda: client.devices,
                 lambda: client.record(), lambda: client.create_queue()):
        with pytest.raises(halogpu.ClosedError, match="closed"):
            call()
    assert buffer.released and semaphore.released and queue.released
    # Releasing after close is a no-op, never a crash.
    buffer.release()
    semaphore.release()
    queue.release()


def test_garbage_collected_client_closes(address):
    client = halogpu.connect(address)
    session = client._session
    del client
    import gc

    gc.collect()
    assert session.closed


def test_objects_keep_their_client_alive(address):
    semaphore = halogpu.connect(address).create_semaphore(5)
    assert semaphore.value == 5
    semaphore.client.close()


def test_info_command(address):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(halogpu.__file__))
    result = subprocess.run(
        [sys.executable, "-m", "halogpu", "info", "--address", address],
        capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "libhalo" in out
    assert "daemon       pid" in out
    assert "session" in out
    assert "0: local" in out


def test_info_command_without_daemon(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(halogpu.__file__))
    result = subprocess.run(
        [sys.executable, "-m", "halogpu", "info", "--address",
         f"ipc://{tmp_path}/none.sock"],
        capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 1
    assert "UNAVAILABLE" in result.stderr
