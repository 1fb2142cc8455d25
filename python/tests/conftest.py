# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Fixtures: a real halod on a private socket, clients of it, and the test
kernels for its driver (kernels.c compiled with cc for the CPU driver; its
CUDA twin kernels.cu as PTX for CUDA).

Environment: HALO_HALOD (the halod to run; default build/bin/halod of this
checkout), HALO_LIBRARY (the libhalo to load; default build/lib/libhalo.so
beside that halod), HALO_TEST_KEEP=1 keeps the daemon's folder and log.
HALO_TEST_DRIVER: the driver halod serves, "local" (default) or "cuda".
Under cuda every test is skipped where halod cannot serve CUDA (it says
"driver cuda unavailable" at start-up), the tests that are about the CPU
driver are skipped (LOCAL_ONLY below), and the kernels are
HALO_TEST_PYTHON_KERNELS (a .ptx, .cubin or .fatbin of kernels.cu), else
the build's tests/kernels/python_kernels.ptx beside that halod, else
kernels.cu compiled here with nvcc.
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
INCLUDE = os.path.join(REPO, "include")


DRIVER = os.environ.get("HALO_TEST_DRIVER") or "local"
if DRIVER not in ("local", "cuda"):
    raise RuntimeError(f"HALO_TEST_DRIVER={DRIVER}: expected local or cuda")

# Tests about the CPU driver itself, skipped under another driver.
LOCAL_ONLY = {
    "test_client.py::test_devices": "asserts device 0 is the CPU driver",
    "test_client.py::test_info_command": "expects '0: local' in the output",
    "test_execute.py::test_load_errors":
        "expects PTX and CUDA source to be UNIMPLEMENTED (the CPU driver)",
}


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

import halogpu  # noqa: E402


class DriverUnavailable(RuntimeError):
    """halod exited at start-up: it cannot serve HALO_TEST_DRIVER here."""


class Daemon:
    """A halod on a private socket serving HALO_TEST_DRIVER, with its log."""

    def __init__(self, *extra_args):
        self.dir = tempfile.mkdtemp(prefix="halo-py.")
        self.address = f"ipc://{self.dir}/halo.sock"
        self.admin = f"ipc://{self.dir}/admin.sock"
        self.log_path = os.path.join(self.dir, "halod.log")
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [_halod_path(), "--listen", self.address, "--admin", self.admin,
             "--driver", DRIVER, "--log-level", "info", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT)
        # A GPU driver's initialization may take seconds.
        timeout = 15 if DRIVER == "local" else 60
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                log = self.log_text()
                self.stop()
                unavailable = f"driver {DRIVER} unavailable"
                if unavailable in log:
                    reason = log[log.index(unavailable):].splitlines()[0]
                    raise DriverUnavailable(reason)
                raise RuntimeError(
                    f"halod --driver {DRIVER} exited with "
                    f"{self.process.returncode} during start-up:\n{log}")
            try:
                halogpu.connect(self.address).close()
                break
            except halogpu.UnavailableError:
                if time.monotonic() > deadline:
                    log = self.log_text()
                    self.stop()
                    raise RuntimeError(
                        f"halod --driver {DRIVER} did not accept a client "
                        f"within {timeout} s:\n{log}")
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


def pytest_collection_modifyitems(config, items):
    """Under a driver other than local, skips the LOCAL_ONLY tests."""
    if DRIVER == "local":
        return
    for item in items:
        for suffix, reason in LOCAL_ONLY.items():
            if item.nodeid.endswith(suffix):
                item.add_marker(pytest.mark.skip(
                    reason=f"local driver only: {reason}"))


@pytest.fixture(scope="session", autouse=True)
def driver():
    """HALO_TEST_DRIVER. For a driver other than local, one halod is started
    first: every test is skipped if it cannot serve the driver."""
    if DRIVER != "local":
        try:
            probe = Daemon()
        except DriverUnavailable as error:
            pytest.skip(f"halod cannot serve driver {DRIVER} here: {error}")
        with halogpu.connect(probe.address) as client:
            device = client.devices[0]
            print(f"\nhalo tests: driver {DRIVER}, halod {_halod_path()}, "
                  f"device 0: {device.driver} {device.name}",
                  file=sys.stderr)
        probe.stop()
    return DRIVER


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
    with halogpu.connect(daemon.address, client_name="pytest") as connected:
        yield connected


@pytest.fixture
def other_client(daemon):
    with halogpu.connect(daemon.address,
                         client_name="pytest-other") as connected:
        yield connected


KERNELS_C = os.path.join(HERE, "kernels.c")
KERNELS_CU = os.path.join(HERE, "kernels.cu")



@pytest.fixture
def mypy_strict(tmp_path):
    """A function that checks Python source as user code under mypy
    --strict, against the halogpu these tests import (a source tree, or an
    installed one that mypy finds by itself); skips where mypy is not
    installed."""
    pytest.importorskip("mypy", reason="mypy is not installed")
    import halogpu

    def check(name, text):
        source = tmp_path / name
        source.write_text(text)
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(halogpu.__file__))
        if os.path.basename(root) not in ("site-packages", "dist-packages"):
            env["MYPYPATH"] = root
        result = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--cache-dir",
             str(tmp_path / "cache"), str(source)],
            capture_output=True, text=True, env=env, cwd=tmp_path,
            timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr

    return check


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
    """tests/kernels.c compiled to a shared object (CPU driver only)."""
    if DRIVER != "local":
        pytest.skip(f"ELF shared objects are the CPU driver's (driver "
                    f"{DRIVER})")
    return compile_kernel(KERNELS_C, str(tmp_path_factory.mktemp("kernels")))


def _cuda_kernels(output_dir):
    """The CUDA twin of kernels.c (kernels.cu) as a file halo loads: see the
    module's docstring for where it comes from."""
    path = os.environ.get("HALO_TEST_PYTHON_KERNELS")
    if path:
        return path
    built = os.path.join(os.path.dirname(os.path.dirname(_halod_path())),
                         "tests", "kernels", "python_kernels.ptx")
    if os.path.exists(built):
        return built
    nvcc = shutil.which("nvcc") or shutil.which(
        "nvcc", path="/usr/local/cuda/bin")
    if not nvcc:
        pytest.skip(f"no CUDA kernels: neither HALO_TEST_PYTHON_KERNELS nor "
                    f"{built}, and no nvcc to build {KERNELS_CU}")
    output = os.path.join(output_dir, "kernels.ptx")
    subprocess.run([nvcc, "-ptx", "-arch=compute_75", "-o", output,
                    KERNELS_CU], check=True)
    return output


@pytest.fixture(scope="session")
def kernels_file(request, tmp_path_factory):
    """The test kernels for HALO_TEST_DRIVER: kernels_so (local) or
    kernels.cu as PTX (cuda)."""
    if DRIVER == "local":
        return request.getfixturevalue("kernels_so")
    return _cuda_kernels(str(tmp_path_factory.mktemp("cuda-kernels")))


@pytest.fixture
def kernels(client, kernels_file):
    """The test kernels loaded into |client| on device 0."""
    try:
        return client.load_executable_file(kernels_file)
    except halogpu.HaloError as error:
        raise RuntimeError(f"loading the test kernels for driver {DRIVER} "
                           f"from {kernels_file}: {error}") from error
