# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Status codes and exception classes (no daemon needed)."""

import os
import pickle
import subprocess
import sys

import pytest

import halogpu
from halogpu import errors


def test_every_code_has_its_class():
    for code in halogpu.StatusCode:
        if code == halogpu.StatusCode.OK:
            continue
        cls = halogpu.error_class(code)
        assert issubclass(cls, halogpu.HaloError)
        assert cls.code == code
        error = errors.make_error(int(code), "what was wrong")
        assert type(error) is cls
        assert error.message == "what was wrong"
        assert str(error) == f"{code.name}: what was wrong"


def test_unknown_code_is_a_plain_halo_error():
    error = errors.make_error(99, "strange")
    assert type(error) is halogpu.HaloError
    assert error.code == 99
    assert "strange" in str(error)


def test_builtin_bases():
    assert issubclass(halogpu.DeadlineExceededError, TimeoutError)
    assert issubclass(halogpu.PermissionDeniedError, PermissionError)
    assert issubclass(halogpu.UnavailableError, ConnectionError)
    assert issubclass(halogpu.ClosedError, halogpu.FailedPreconditionError)
    assert halogpu.ClosedError.code == halogpu.StatusCode.FAILED_PRECONDITION


def test_errors_pickle():
    for error in (halogpu.InvalidArgumentError("bad slot 3"),
                  halogpu.DeadlineExceededError("late"),
                  errors.make_error(99, "odd"),
                  halogpu.ClosedError("closed")):
        error.value = 7
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert copy.message == error.message
        assert copy.code == error.code
        assert copy.value == 7
        assert str(copy) == str(error)


def test_status_code_conversion():
    assert errors.status_code("aborted") == halogpu.StatusCode.ABORTED
    assert errors.status_code(13) == halogpu.StatusCode.INTERNAL
    assert errors.status_code(halogpu.DataLossError) == \
        halogpu.StatusCode.DATA_LOSS
    with pytest.raises(ValueError):
        errors.status_code("NO_SUCH_CODE")
    with pytest.raises(ValueError):
        errors.status_code(1000)
    with pytest.raises(TypeError):
        errors.status_code(1.5)
    with pytest.raises(TypeError):
        errors.status_code(True)


def test_failure_value_is_typed_under_mypy_strict(tmp_path):
    """The value a failed semaphore had reached, on the failure
    Semaphore.query() raises (``error.value``), is an int in user code
    checked by mypy --strict (it was set without a declaration)."""
    pytest.importorskip("mypy", reason="mypy is not installed")
    source = tmp_path / "uses_value.py"
    source.write_text(
        "import halogpu\n\n\n"
        "def reached(semaphore: halogpu.Semaphore) -> int:\n"
        "    try:\n"
        "        return semaphore.query()\n"
        "    except halogpu.HaloError as error:\n"
        "        value: int = error.value\n"
        "        return value\n")
    env = dict(os.environ)
    # The halogpu these tests import (a source tree, or an installed one
    # that mypy finds by itself).
    root = os.path.dirname(os.path.dirname(halogpu.__file__))
    if os.path.basename(root) not in ("site-packages", "dist-packages"):
        env["MYPYPATH"] = root
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir",
         str(tmp_path / "cache"), str(source)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
