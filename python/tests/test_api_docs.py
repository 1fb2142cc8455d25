# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""scripts/python-api-docs builds the API reference, and the committed
docs/python-api.md names the same classes, functions and methods."""

import re
import subprocess
import sys

from conftest import REPO

SCRIPT = f"{REPO}/scripts/python-api-docs"


def names(text):
    """Every documented name (headings and members), signatures cut."""
    found = set()
    for line in text.splitlines():
        match = re.match(r"^(?:### (?:class )?|- \*\*)`(?:async )?([\w.]+)",
                         line)
        if match:
            found.add(match.group(1))
    return found


def test_api_reference_builds_and_is_current(tmp_path):
    output = tmp_path / "python-api.md"
    subprocess.run([sys.executable, SCRIPT, str(output)], check=True,
                   timeout=120)
    text = output.read_text()
    built = names(text)
    for name in ("connect", "Client", "create_buffer", "from_numpy",
                 "__dlpack__", "__array__", "wait_async", "kernel",
                 "Kernel", "prepare", "Launch"):
        assert name in built, name
    assert "## `halogpu.triton`" in text
    with open(f"{REPO}/docs/python-api.md") as file:
        committed = names(file.read())
    assert built == committed, (
        "docs/python-api.md is stale: run scripts/python-api-docs "
        f"(new: {sorted(built - committed)}, gone: "
        f"{sorted(committed - built)})")
