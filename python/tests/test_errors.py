# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Status codes and exception classes (no daemon needed)."""

import pickle

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


def test_failure_value_is_typed_under_mypy_strict(mypy_strict):
    """The value a failed semaphore had reached, on the failure
    Semaphore.query() raises (``error.value``), is an Optional[int] in user
    code checked by mypy --strict: None on every other error (it was an
    int that other errors did not have at all: AttributeError)."""
    mypy_strict(
        "uses_value.py",
        "import halogpu\n\n\n"
        "def reached(semaphore: halogpu.Semaphore) -> int:\n"
        "    try:\n"
        "        return semaphore.query()\n"
        "    except halogpu.HaloError as error:\n"
        "        if error.value is None:\n"
        "            raise\n"
        "        value: int = error.value\n"
        "        return value\n")


def test_value_is_none_on_other_errors():
    assert halogpu.NotFoundError("x").value is None
    assert halogpu.HaloError("x").value is None


def test_error_class_takes_names_and_classes():
    """error_class takes what Semaphore.fail() takes: a code, its number,
    its name or a HaloError subclass (a name gave the base class)."""
    assert halogpu.error_class("NOT_FOUND") is halogpu.NotFoundError
    assert halogpu.error_class("unavailable") is halogpu.UnavailableError
    assert halogpu.error_class(halogpu.NotFoundError) is halogpu.NotFoundError
    assert halogpu.error_class(halogpu.StatusCode.ABORTED) is \
        halogpu.AbortedError
    assert halogpu.error_class(5) is halogpu.NotFoundError
    assert halogpu.error_class(999) is halogpu.HaloError
    assert halogpu.error_class(None) is halogpu.HaloError
    assert halogpu.error_class(halogpu.ClosedError) is halogpu.ClosedError
    assert halogpu.error_class(halogpu.HaloError) is halogpu.HaloError
    np = pytest.importorskip("numpy")
    assert halogpu.error_class(np.int64(5)) is halogpu.NotFoundError
    with pytest.raises(ValueError, match="no status code named 'NOPE'"):
        halogpu.error_class("NOPE")


def test_messages_name_the_python_api(client):
    """A message of libhalo's or halod's that names a C function or flag
    names the Python spelling too (python_message)."""
    recording = client.record()
    with pytest.raises(halogpu.FailedPreconditionError,
                       match=r"still recording; call CommandBuffer.end\(\) "
                       r"\(halo_command_buffer_end\) first"):
        client.execute(recording)
    recording.end()
    assert errors.python_message("only halo_buffer_release may follow") == \
        "only Buffer.release() (halo_buffer_release) may follow"
    # Export of an object not created exportable: the keyword to pass.
    with pytest.raises(halogpu.FailedPreconditionError,
                       match=r"not created exportable \(exportable=True, "
                       r"HALO_OBJECT_FLAG_EXPORTABLE\)"):
        client.create_buffer(16).export()
    with pytest.raises(halogpu.FailedPreconditionError,
                       match=r"exportable=True"):
        client.create_semaphore().export()
