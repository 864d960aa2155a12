"""The README's two commands: `make run`/`make test` work in a project venv, check their
prerequisites first and say in one line what is missing; `.ci/run` calls the README's test command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")


def _make(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [shutil.which("make") or "make", "--no-print-directory", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_run_and_test_use_the_project_venv_unless_py_is_given() -> None:
    dry = _make("-n", "-W", "pyproject.toml", "run", "VENV=/nonexistent/venv")
    assert "/nonexistent/venv/bin/python -m rlcore.cli train --algo ddpg --env FetchReach-v4 --her" in dry.stdout
    assert "-m venv /nonexistent/venv" in dry.stdout  # made from $(PYTHON) when missing
    own = _make("-n", "test-python", "PY=/opt/py/bin/python")
    pytest_lines = [line for line in own.stdout.splitlines() if "-m pytest" in line]
    assert pytest_lines == [f"RLCORE_DOCS_SHOTS={ROOT}/build/docs-shots /opt/py/bin/python -m pytest -q"]


def test_a_missing_python_is_one_line_with_how_to_get_it() -> None:
    p = _make("check", "VENV=/nonexistent/venv", "PYTHON=no-such-python3")
    assert p.returncode != 0
    lines = [line for line in p.stderr.splitlines() if line.startswith("rlcore: ")]
    assert lines == [
        "rlcore: needs Python >= 3.11, but 'no-such-python3' is not on PATH: install Python 3.11+ "
        "(Debian/Ubuntu: apt-get install python3 python3-venv) or pass PYTHON=/path/to/python3.11"
    ]


def test_a_missing_rust_toolchain_is_one_line_with_how_to_get_it(tmp_path: Path) -> None:
    # a PATH with the tools make's recipe needs, a Python, and no cargo/rustc
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "awk", "df", "grep", "cc", "python3"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    p = _make("check", "VENV=/nonexistent/venv", path=str(bin_dir))
    assert p.returncode != 0
    rust = [line for line in p.stderr.splitlines() if "Rust" in line]
    assert len(rust) == 1 and rust[0].startswith("rlcore: needs a Rust toolchain >= 1.80") and "rustup" in rust[0]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(make run.*?)```", readme, re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["make run", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    makes = [line.strip() for line in ci.splitlines() if re.match(r"\s*make\b", line)]
    assert makes == ["make test"]


def test_make_wheel_builds_one_abi3_release_wheel_with_maturin() -> None:
    """``make wheel`` (the README's install path outside the clone; tests/test_wheel.py builds and
    installs one): a release build with PyO3's abi3 feature, into dist/ unless WHEEL_DIR says."""
    dry = _make("-n", "wheel", "PY=/opt/py/bin/python", "WHEEL_DIR=/tmp/w")
    build = [line for line in dry.stdout.splitlines() if "maturin build" in line]
    assert len(build) == 1, dry.stdout
    assert "/opt/py/bin/python -m maturin build --release --out /tmp/w -i /opt/py/bin/python --features pyo3/abi3-py311" in build[0]
    assert "wheel" in _make("help").stdout


def test_the_readme_opens_the_built_site_as_a_file_and_the_site_is_built_for_that() -> None:
    """The README says to open site/index.html; MkDocs' directory URLs (``training/``) would show a
    directory listing there, so the site is built with a file per page (tests/test_docs_site.py
    follows its links)."""
    readme = (ROOT / "README.md").read_text()
    assert "open `site/index.html`" in readme
    config = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"^use_directory_urls: false$", config, re.M)
    assert "site/index.html" in _make("help").stdout
