"""The install path outside the clone: ``make wheel`` builds one abi3 wheel (CPython >= 3.11), and
a fresh virtual environment that installs it (numpy and gymnasium come from the package index; no
torch) runs the README's first example as pasted, from a directory outside the clone, and has the
``rlcore`` command.

The build is a release build of the Rust core (about 1.5 min on 2 cores the first time, cargo's
cache after that) and the install needs the package index (or pip's cache), as ``make test`` does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    shutil.which("make") is None or shutil.which("cargo") is None, reason="needs make and cargo"
)


def _first_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## A first example", 1)[1]
    block = re.search(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert block is not None, "README: no python block under 'A first example'"
    return block.group(1)


def test_make_wheel_installs_into_a_fresh_venv_and_runs_the_readme_first_example(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "VIRTUAL_ENV")}
    dist = tmp_path / "dist"
    p = subprocess.run(
        ["make", "--no-print-directory", "wheel", f"PY={sys.executable}", f"WHEEL_DIR={dist}"],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=1800,
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    wheels = list(dist.glob("rlcore-*.whl"))
    assert len(wheels) == 1, wheels
    assert "-cp311-abi3-" in wheels[0].name, wheels[0].name  # one wheel for every CPython >= 3.11

    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(target)
    py = target / "bin" / "python"
    p = subprocess.run(
        [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", str(wheels[0])],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=1800,
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]

    work = tmp_path / "work"  # outside the clone: rlcore comes from the wheel, not from python/
    work.mkdir()
    (work / "first.py").write_text(_first_example(), encoding="utf-8")
    p = subprocess.run([str(py), "first.py"], cwd=work, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    assert p.stdout.strip() == "1000 (256, 3) (256,)", p.stdout
    where = subprocess.run(
        [str(py), "-c", "import importlib.util as u, rlcore; print(rlcore.__file__, u.find_spec('torch') is None)"],
        cwd=work, capture_output=True, text=True, env=env, timeout=600,
    )
    assert where.stdout.split() == [str(target / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages" / "rlcore" / "__init__.py"), "True"], where
    cli = subprocess.run([str(target / "bin" / "rlcore"), "--help"], cwd=work, capture_output=True, text=True, env=env)
    assert cli.returncode == 0 and "enjoy" in cli.stdout, cli.stderr[-2000:]
