"""The build settings that live outside Cargo.toml (`.cargo/config.toml`: PyO3's reference pool
off) reach every way rlcore is built: the checkout's own build, and a build from the sdist."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_cargo_config_turns_the_reference_pool_off() -> None:
    text = (ROOT / ".cargo" / "config.toml").read_text()
    assert '"--cfg", "pyo3_disable_reference_pool"' in text
    # a drop without the interpreter is leaked, never an abort
    assert '"--cfg", "pyo3_leak_on_drop_without_reference_pool"' in text


def test_the_sdist_carries_the_cargo_config(tmp_path: Path) -> None:
    maturin = shutil.which("maturin", path=str(Path(sys.executable).parent)) or shutil.which("maturin")
    if maturin is None:
        pytest.skip("maturin is not installed")
    subprocess.run([maturin, "sdist", "--out", str(tmp_path)], cwd=ROOT, check=True, capture_output=True)
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    assert any(n.endswith("/.cargo/config.toml") for n in names), names[:20]
