# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Finding and checking libhalo, and the package without numpy (run in
subprocesses: the library is loaded once per process)."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import halogpu

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
# Where the halo under test comes from (the installed one, or python/).
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(
    halogpu.__file__)))


def run_python(code, env_update, check=False):
    env = dict(os.environ)
    env["PYTHONPATH"] = PACKAGE_PARENT + os.pathsep + env.get("PYTHONPATH",
                                                              "")
    for key, value in env_update.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          env=env, capture_output=True, text=True,
                          check=check, timeout=60)


def test_import_needs_no_library():
    result = run_python(
        "import halogpu; print(halogpu.ABI_VERSION)",
        {"HALO_LIBRARY": "/nonexistent/libhalo.so"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


def test_missing_library_is_a_library_error():
    result = run_python("""
        import halogpu
        try:
            halogpu.connect("ipc:///nonexistent/halo.sock")
        except halogpu.LibraryError as error:
            print("LibraryError", error)
        """, {"HALO_LIBRARY": "/nonexistent/libhalo.so"})
    assert result.returncode == 0, result.stderr
    assert "LibraryError HALO_LIBRARY=/nonexistent/libhalo.so" in \
        result.stdout


def test_other_abi_version_is_refused(tmp_path):
    compiler = shutil.which("cc")
    if not compiler:
        pytest.skip("no cc")
    source = tmp_path / "fake.c"
    source.write_text(
        "unsigned halo_abi_version(void) { return 999; }\n"
        "int halo_client_connect(void) { return 0; }\n")
    fake = tmp_path / "libhalo.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(fake),
                    str(source)], check=True)
    result = run_python("""
        import halogpu
        try:
            halogpu.library_path()
        except halogpu.LibraryError as error:
            print("LibraryError", error)
        """, {"HALO_LIBRARY": str(fake)})
    assert result.returncode == 0, result.stderr
    assert "ABI version 999" in result.stdout
    assert "written for ABI version 1" in result.stdout


def test_loaded_library_has_our_abi():
    path = halogpu.library_path()
    assert os.path.exists(path)
    assert halogpu.library_version()
    if os.environ.get("HALO_LIBRARY"):
        assert os.path.samefile(path, os.environ["HALO_LIBRARY"])


def test_build_tree_is_found_without_the_variable():
    # A package inside a checkout (python/halo, or a venv in build/) finds
    # build/lib/libhalo.so above it, unless an installed one comes first.
    folder = os.path.dirname(os.path.abspath(halogpu.__file__))
    build_lib = None
    while os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
        candidate = os.path.join(folder, "build", "lib", "libhalo.so")
        if os.path.exists(candidate):
            build_lib = candidate
            break
    if build_lib is None:
        pytest.skip("the package under test is not inside a build tree")
    if not os.path.samefile(build_lib, halogpu.library_path()):
        pytest.skip(f"{build_lib} is not the libhalo under test")
    result = run_python("import halogpu; print(halogpu.library_path())",
                        {"HALO_LIBRARY": None, "LD_LIBRARY_PATH": None})
    assert result.returncode == 0, result.stderr
    found = result.stdout.strip()
    installed = not found.startswith(os.path.dirname(
        os.path.dirname(build_lib)))
    assert installed or os.path.samefile(found, build_lib)


def test_build_tree_walk_skips_untrusted_folders(tmp_path):
    # The walk up from the module takes a folder's build/lib/libhalo.so
    # only where the folder is a halo source tree that no other user can
    # write to: a package below /tmp must not load what anyone left in
    # /tmp/build/lib.
    tree = tmp_path / "tree"
    package = tree / "python" / "halogpu"
    shutil.copytree(os.path.dirname(os.path.abspath(halogpu.__file__)),
                    package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "build" / "lib").mkdir(parents=True)
    (tree / "build" / "lib" / "libhalo.so").write_bytes(b"")
    library = str(tree / "build" / "lib" / "libhalo.so")

    def listed():
        result = run_python(
            "from halogpu import _lib\n"
            "for path, _ in _lib._candidates(): print(path)\n",
            {"HALO_LIBRARY": None, "PYTHONPATH": str(tree / "python")})
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    # Not a source tree: only a build/lib/libhalo.so.
    assert library not in listed()
    (tree / "CMakeLists.txt").write_text("project(halo)\n")
    (tree / "include" / "halo").mkdir(parents=True)
    (tree / "include" / "halo" / "halo.h").write_text("\n")
    assert library in listed()
    # A source tree anyone may write to (as /tmp is).
    os.chmod(tree, 0o777)
    try:
        assert library not in listed()
    finally:
        os.chmod(tree, 0o755)
    os.chmod(tree / "build" / "lib", 0o777)
    assert library not in listed()
    os.chmod(tree / "build" / "lib", 0o755)
    assert library in listed()
    # ... or its group (a shared project folder: the group's members could
    # plant the library too).
    os.chmod(tree / "build" / "lib" / "libhalo.so", 0o664)
    assert library not in listed()


def test_without_numpy(daemon):
    # numpy is optional: block its import and use buffers through bytes.
    result = run_python(f"""
        import sys
        sys.modules["numpy"] = None
        import halogpu
        with halogpu.connect({daemon.address!r}) as client:
            buffer = client.create_buffer(16, memory="host_visible")
            buffer.write(b"0123456789abcdef")
            view = buffer.memoryview()
            view[0:4] = b"ABCD"
            del view
            print(buffer.read())
            try:
                buffer.numpy()
            except ImportError as error:
                print("ImportError", error)
        """, {})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "b'ABCD456789abcdef'"
    assert lines[1].startswith("ImportError numpy is not installed")
