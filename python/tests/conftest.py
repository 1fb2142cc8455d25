"""Fixtures: a real halod on a private socket (CPU driver), clients of it,
and the CPU-driver test kernels compiled with cc.

Environment: HALO_HALOD (the halod to run; default build/bin/halod of this
checkout), HALO_LIBRARY (the libhalo to load; default build/lib/libhalo.so
beside that halod), HALO_TEST_KEEP=1 keeps the daemon's folder and log.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
INCLUDE = os.path.join(REPO, "client", "include")


def _halod_path():
    path = os.environ.get("HALO_HALOD") or os.path.join(REPO, "build", "bin",
                                                        "halod")
    if not os.access(path, os.X_OK):
        pytest.exit(f"no halod at {path}: build it (scripts/build) or set "
                    "HALO_HALOD", returncode=2)
    return path


# The package loads libhalo lazily: point it at the build's library before
# any test loads it.
if not os.environ.get("HALO_LIBRARY"):
    _lib_guess = os.path.join(os.path.dirname(os.path.dirname(
        os.environ.get("HALO_HALOD") or os.path.join(REPO, "build", "bin",
                                                     "halod"))),
        "lib", "libhalo.so")
    if os.path.exists(_lib_guess):
        os.environ["HALO_LIBRARY"] = _lib_guess

import halo  # noqa: E402


class Daemon:
    """A halod on a private socket, with its log."""

    def __init__(self, *extra_args):
        self.dir = tempfile.mkdtemp(prefix="halo-py.")
        self.address = f"ipc://{self.dir}/halo.sock"
        self.admin = f"ipc://{self.dir}/admin.sock"
        self.log_path = os.path.join(self.dir, "halod.log")
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [_halod_path(), "--listen", self.address, "--admin", self.admin,
             "--driver", "local", "--log-level", "info", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"halod exited with {self.process.returncode} during "
                    f"start-up:\n{self.log_text()}")
            try:
                halo.connect(self.address).close()
                break
            except halo.UnavailableError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"halod did not accept a client within 15 s:\n"
                        f"{self.log_text()}")
                time.sleep(0.02)

    def log_text(self):
        self.log.flush()
        with open(self.log_path, "rb") as log:
            return log.read().decode(errors="replace")[-4000:]

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        if os.environ.get("HALO_TEST_KEEP") == "1":
            print(f"halod folder kept: {self.dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon():
    """The halod shared by the tests of a session."""
    started = Daemon()
    yield started
    started.stop()


@pytest.fixture
def fresh_daemon():
    """A halod of one test's own (for tests that kill or stop it)."""
    started = Daemon()
    yield started
    started.stop()


@pytest.fixture
def address(daemon):
    return daemon.address


@pytest.fixture
def client(daemon):
    with halo.connect(daemon.address, client_name="pytest") as connected:
        yield connected


@pytest.fixture
def other_client(daemon):
    with halo.connect(daemon.address, client_name="pytest-other") as connected:
        yield connected


KERNELS_C = os.path.join(HERE, "kernels.c")


def compile_kernel(source_path, output_dir, name="kernels.so"):
    """Compiles a CPU-driver kernel library with cc; the path of the .so."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if not compiler:
        pytest.skip("no C compiler (cc) to build the CPU-driver kernels")
    output = os.path.join(output_dir, name)
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-I", INCLUDE,
                    "-o", output, source_path], check=True)
    return output


@pytest.fixture(scope="session")
def kernels_so(tmp_path_factory):
    """tests/kernels.c compiled to a shared object."""
    return compile_kernel(KERNELS_C, str(tmp_path_factory.mktemp("kernels")))


@pytest.fixture
def kernels(client, kernels_so):
    """The test kernels loaded into |client| on the CPU device."""
    return client.load_shared_object(kernels_so)
