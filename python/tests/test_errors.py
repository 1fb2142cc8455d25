# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Status codes and exception classes (no daemon needed)."""

import pickle

import pytest

import halo
from halo import errors


def test_every_code_has_its_class():
    for code in halo.StatusCode:
        if code == halo.StatusCode.OK:
            continue
        cls = halo.error_class(code)
        assert issubclass(cls, halo.HaloError)
        assert cls.code == code
        error = errors.make_error(int(code), "what was wrong")
        assert type(error) is cls
        assert error.message == "what was wrong"
        assert str(error) == f"{code.name}: what was wrong"


def test_unknown_code_is_a_plain_halo_error():
    error = errors.make_error(99, "strange")
    assert type(error) is halo.HaloError
    assert error.code == 99
    assert "strange" in str(error)


def test_builtin_bases():
    assert issubclass(halo.DeadlineExceededError, TimeoutError)
    assert issubclass(halo.PermissionDeniedError, PermissionError)
    assert issubclass(halo.UnavailableError, ConnectionError)
    assert issubclass(halo.ClosedError, halo.FailedPreconditionError)
    assert halo.ClosedError.code == halo.StatusCode.FAILED_PRECONDITION


def test_errors_pickle():
    for error in (halo.InvalidArgumentError("bad slot 3"),
                  halo.DeadlineExceededError("late"),
                  errors.make_error(99, "odd"),
                  halo.ClosedError("closed")):
        error.value = 7
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert copy.message == error.message
        assert copy.code == error.code
        assert copy.value == 7
        assert str(copy) == str(error)


def test_status_code_conversion():
    assert errors.status_code("aborted") == halo.StatusCode.ABORTED
    assert errors.status_code(13) == halo.StatusCode.INTERNAL
    assert errors.status_code(halo.DataLossError) == halo.StatusCode.DATA_LOSS
    with pytest.raises(ValueError):
        errors.status_code("NO_SUCH_CODE")
    with pytest.raises(ValueError):
        errors.status_code(1000)
    with pytest.raises(TypeError):
        errors.status_code(1.5)
    with pytest.raises(TypeError):
        errors.status_code(True)
