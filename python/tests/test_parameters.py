# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Executable.parameters(entry) and Executable.cache_hit: the parameter
lists of the test kernels (tests/kernels.c declares them with
HALO_LOCAL_KERNEL_PARAMS; CUDA knows kernels.cu's), NOT_FOUND for an entry
the executable lacks, and a second load of the same code in a new client
found in the daemon's executable cache."""

import numpy as np
import pytest

import halogpu

from conftest import DRIVER

# The kernels' parameters as CUDA lays them out: each at a multiple of its
# size (pointers 8 bytes).
EXPECTED = {
    "add": [(0, 8), (8, 8), (16, 8), (24, 4)],
    "add_optional": [(0, 8), (8, 8), (16, 8), (24, 4)],
    "saxpy": [(0, 4), (8, 8), (16, 8), (24, 8)],
    "add_table": [(0, 8), (8, 4)],
    "counts": [(0, 8)],
}


def test_parameters_of_the_test_kernels(kernels):
    for entry, expected in EXPECTED.items():
        parameters = kernels.parameters(entry)
        assert parameters == [halogpu.Parameter(offset, size)
                              for offset, size in expected], entry
        assert all(isinstance(p, halogpu.Parameter) for p in parameters)
    first = kernels.parameters("saxpy")[0]
    assert (first.offset, first.size) == (0, 4)
    assert first._asdict() == {"offset": 0, "size": 4}


def test_parameters_errors(kernels):
    with pytest.raises(halogpu.NotFoundError, match="no_such_entry"):
        kernels.parameters("no_such_entry")
    with pytest.raises(TypeError, match="entry must be a str"):
        kernels.parameters(b"add")
    with pytest.raises(ValueError, match="not an entry point name"):
        kernels.parameters("")
    with pytest.raises(ValueError, match="not an entry point name"):
        kernels.parameters("add\0")
    # The session serves on after a refusal.
    assert len(kernels.parameters("add")) == 4
    kernels.release()
    with pytest.raises(halogpu.ClosedError):
        kernels.parameters("add")


@pytest.mark.skipif(DRIVER != "local",
                    reason="a CPU-driver kernel without a declaration")
def test_parameters_unknown_without_a_declaration(kernels):
    # kernels.c's crash declares no parameters: the driver cannot tell.
    with pytest.raises(halogpu.UnimplementedError):
        kernels.parameters("crash")


def test_declared_parameters_check_dispatches(client, kernels):
    """The declaration is also checked when the daemon takes a recording
    (end()): a constant of the wrong size is refused, naming the
    argument."""
    buffer = client.create_buffer(64, memory="host_visible")
    cb = client.record()
    cb.dispatch(kernels, "add", grid=1, block=1,
                args=[buffer, buffer, buffer, np.uint64(16)])
    with pytest.raises(halogpu.InvalidArgumentError,
                       match=r"argument 3: 8 bytes.*parameter 3 of 'add' "
                       "has 4"):
        cb.end()
    cb.release()
    with client.record() as cb:
        cb.dispatch(kernels, "add", grid=1, block=1,
                    args=[buffer, buffer, buffer, np.uint32(16)])
    assert cb.ended


def test_cache_hit_on_a_second_load(fresh_daemon, kernels_file):
    """A new daemon compiles or loads the code on the first load; a second
    client of the same trust domain finds it, held or cached."""
    with halogpu.connect(fresh_daemon.address) as first:
        loaded = first.load_executable_file(kernels_file)
        assert loaded.cache_hit is False
        # Another handle of the same session: the daemon has it.
        again = first.load_executable_file(kernels_file)
        assert again.cache_hit is True
        assert again.content_hash == loaded.content_hash
    with halogpu.connect(fresh_daemon.address) as second:
        # The first client is gone: the executable cache kept it.
        cached = second.load_executable_file(kernels_file)
        assert cached.cache_hit is True
        assert cached.content_hash == loaded.content_hash
        assert cached.parameters("add") == [
            halogpu.Parameter(*p) for p in EXPECTED["add"]]
