"""The hand-written stub of the native module, ``python/rlcore/_core.pyi``, matches the built
``rlcore._core``: mypy's stubtest compares every name, signature, default and class in the stub with
the module as imported (the user docstrings of the binding live in the stub, so a method the binding
adds, renames or drops must be written there too). About 40 s with a cold mypy cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import rlcore
import rlcore._core as native

pytest.importorskip("mypy.stubtest")


def test_the_native_stub_matches_the_built_module(tmp_path: Path) -> None:
    allow = tmp_path / "allowlist.txt"
    # bench-only, built with the cargo feature `bench` (make install-test, make bench)
    allow.write_text("" if hasattr(native.RawBuffer, "_floor_gather") else "rlcore._core.RawBuffer._floor_gather\n")
    env = {
        **os.environ,
        # the stub beside the package this process imported, and a cache of this test's own
        "MYPYPATH": str(Path(rlcore.__file__).resolve().parents[1]),
        "MYPY_CACHE_DIR": str(tmp_path / "mypy-cache"),
    }
    cmd = [sys.executable, "-m", "mypy.stubtest", "rlcore._core", "--allowlist", str(allow)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
