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


def section(text, heading):
    """The text of one class's section (up to the next heading)."""
    start = text.index(heading)
    end = text.find("\n### ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def test_api_reference_has_inherited_members_and_whole_docstrings(
        tmp_path):
    """Every public member of a class is listed, those it inherits from
    halogpu's base classes (HaloObject) included, and a property's whole
    docstring is there, not only its first line."""
    output = tmp_path / "python-api.md"
    subprocess.run([sys.executable, SCRIPT, str(output)], check=True,
                   timeout=120)
    text = output.read_text()
    for cls in ("Buffer", "Semaphore", "CommandBuffer", "Executable",
                "Queue"):
        members = names(section(text, f"### class `{cls}`"))
        for inherited in ("release", "released", "handle", "client"):
            assert inherited in members, (cls, inherited)
    buffer = section(text, "### class `Buffer`")
    assert "from `HaloObject`" in buffer
    # Buffer.device and Buffer.host_pointer: docstrings of several lines.
    assert "does\n  not say where an imported buffer lives" in buffer
    assert "prefer numpy() and\n  memoryview()" in buffer
