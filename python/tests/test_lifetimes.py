# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Object lifetimes across threads, garbage collection and fork()."""

import gc
import os
import threading
import time

import numpy as np
import pytest

import halogpu


def test_fork_child_cannot_use_the_parents_objects(client, address):
    semaphore = client.create_semaphore(exportable=True)
    buffer = client.create_buffer(64, memory="host_visible")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        # Released (closed) here: every use raises.
        states = (semaphore.released, buffer.released, client.closed)
        results = ["released" if all(states) else
                   "states " + " ".join(map(str, states))]
        for call in (client.ping, lambda: semaphore.signal(1),
                     lambda: buffer.read(), semaphore.release, client.close):
            try:
                call()
                results.append("ok")
            except halogpu.ClosedError as error:
                results.append("closed" if "fork" in str(error) else
                               str(error))
            except BaseException as error:  # noqa: BLE001
                results.append(repr(error))
        # nng aborts a child forked after the parent connected: connect()
        # refuses instead.
        try:
            halogpu.connect(address)
            results.append("connected")
        except halogpu.FailedPreconditionError as error:
            results.append("refused" if "spawn" in str(error) else
                           str(error))
        except BaseException as error:  # noqa: BLE001
            results.append(repr(error))
        os.write(write_fd, ",".join(results).encode())
        os._exit(0)
    os.close(write_fd)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read_fd) as pipe:
        results = pipe.read().split(",")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    # ping, signal, read raise; release and close are quiet no-ops.
    assert results == ["released", "closed", "closed", "closed", "ok", "ok",
                       "refused"]
    # The parent's objects are untouched by the child.
    assert not (semaphore.released or buffer.released or client.closed)
    semaphore.signal(7)
    assert semaphore.value == 7
    client.ping()
    assert buffer.read(1) == b"\0"


def test_release_waits_for_calls_in_flight(client):
    semaphore = client.create_semaphore()
    handle = semaphore._handle
    entered = threading.Event()
    errors = []

    def waiter():
        entered.set()
        try:
            semaphore.wait(1, timeout=5)
        except halogpu.HaloError as error:
            errors.append(error)

    thread = threading.Thread(target=waiter)
    thread.start()
    entered.wait()
    time.sleep(0.02)
    semaphore.release()
    thread.join(5)
    assert handle.freed and handle.pointer is None
    assert isinstance(errors[0], halogpu.ClosedError)


def test_many_objects_collected(client):
    for _ in range(200):
        buffer = client.create_buffer(256, memory="host_visible")
        view = buffer.numpy()
        view[:] = 1
        client.create_semaphore().signal(1)
        del buffer, view
    gc.collect()
    client.ping()
    session = client._session
    assert session.calls == 0 and session.maps == 0


def test_threads_hammer_one_client(client):
    semaphore = client.create_semaphore()
    errors = []

    def worker(index):
        try:
            for i in range(30):
                buffer = client.create_buffer(64, memory="host_visible")
                buffer.write(bytes([index]) * 64)
                assert buffer.numpy()[0] == index
                buffer.release()
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    semaphore.signal(1)
    assert not errors


def test_close_from_another_thread_while_calls_run(address):
    client = halogpu.connect(address)
    semaphores = [client.create_semaphore() for _ in range(4)]
    outcomes = []

    def worker(semaphore):
        try:
            while True:
                client.ping()
                semaphore.query()
        except halogpu.ClosedError:
            outcomes.append("closed")
        except Exception as error:  # noqa: BLE001
            outcomes.append(repr(error))

    threads = [threading.Thread(target=worker, args=(s,))
               for s in semaphores]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    client.close()
    for thread in threads:
        thread.join(5)
    assert outcomes == ["closed"] * 4
    assert client._session.closed


def test_view_outlives_everything(address):
    def make_view():
        client = halogpu.connect(address)
        buffer = client.create_buffer(1 << 16, memory="host_visible")
        return buffer.numpy(np.uint16)

    view = make_view()
    gc.collect()
    view[:] = 3  # the client and buffer objects are gone; the mapping not
    assert int(view.sum()) == 3 * (1 << 15)
    del view
    gc.collect()


@pytest.mark.parametrize("release_first", [True, False])
def test_memoryview_pins_like_numpy(client, release_first):
    buffer = client.create_buffer(64, memory="host_visible")
    view = buffer.memoryview()
    if release_first:
        buffer.release()
    view[:4] = b"abcd"
    assert bytes(view[:4]) == b"abcd"
    view.release()
    gc.collect()


def test_pickling_says_to_share_by_token(client, kernels):
    """A halo object handed to another process (multiprocessing pickles
    it) is refused with a TypeError that names it and says how to share
    it, not a ctypes AttributeError about a _FuncPtr. copy.copy() stays
    an alias of the same object, as before."""
    import copy
    import pickle

    buffer = client.create_buffer(64, memory="host_visible")
    semaphore = client.create_semaphore()
    for obj, pattern in [
            (buffer, r"halogpu\.Buffer cannot be pickled.*export\(\).*"
                     r"import_buffer\(token\)"),
            (buffer.ref(16), r"halogpu\.Buffer cannot be pickled"),
            (semaphore, r"halogpu\.Semaphore cannot be pickled.*export\(\)"
                        r".*import_semaphore\(token\)"),
            (kernels, r"halogpu\.Executable cannot be pickled.*again"),
            (client.create_queue(), r"halogpu\.Queue cannot be pickled"),
            (client, r"halogpu\.Client cannot be pickled.*connect"),
    ]:
        with pytest.raises(TypeError, match=pattern):
            pickle.dumps(obj)
    with pytest.raises(TypeError, match=r"halogpu\.Buffer cannot be pickled"):
        copy.deepcopy(buffer)
    alias = copy.copy(buffer)
    alias.write(b"\x07")
    assert buffer.read(1) == b"\x07"
    assert copy.copy(client).address == client.address


def test_fork_before_the_first_connect_is_fine(address):
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(f"""
        import os, halogpu
        pid = os.fork()
        if pid == 0:
            with halogpu.connect({address!r}) as client:
                client.ping()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        with halogpu.connect({address!r}) as client:
            client.ping()
        print("ok")
        """)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(halogpu.__file__))
    result = subprocess.run([sys.executable, "-c", code], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_garbage_collection_at_every_allocation(address):
    # Finalizers (releases, closes of unreachable clients) then run in the
    # middle of the package's own bookkeeping: no deadlock, no crash.
    class Cycle:
        pass

    old = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        for _ in range(20):
            client = halogpu.connect(address)
            holder = Cycle()
            holder.self = holder
            holder.client = client
            holder.buffer = client.create_buffer(64, memory="host_visible")
            holder.view = holder.buffer.numpy()
            holder.semaphore = client.create_semaphore()
            holder.semaphore.signal(1)
            holder.semaphore.wait(1, timeout=5)
            holder.view[:] = 5
            del client, holder  # only the cycle holds them now
        with halogpu.connect(address) as client:
            for _ in range(50):
                other = Cycle()
                other.self = other
                other.buffer = client.create_buffer(32, memory="host_visible")
                other.view = other.buffer.memoryview()
                client.ping()
                del other
    finally:
        gc.set_threshold(*old)
    gc.collect()
