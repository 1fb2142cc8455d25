# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""examples/python runs against the test daemon."""

import os
import shutil
import subprocess
import sys

import pytest

import halogpu

from conftest import REPO

EXAMPLES = os.path.join(REPO, "examples", "python")


def run_example(name, *args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(halogpu.__file__))
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name),
                           *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_vector_add(address):
    if not shutil.which("cc"):
        pytest.skip("no cc for the CPU-driver kernel")
    result = run_example("vector_add.py", "--address", address, "-n", "10000")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "vector_add: ok" in result.stdout


def test_pipeline(address):
    result = run_example("pipeline.py", "--address", address, "--items", "40")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pipeline: ok" in result.stdout


def test_pipeline_failure_reaches_the_producer(address):
    result = run_example("pipeline.py", "--address", address, "--items",
                         "40", "--fail-at", "7")
    assert result.returncode == 1
    assert "pipeline: INTERNAL: semaphore failed: consumer: cannot " \
        "transform item 7" in result.stderr
