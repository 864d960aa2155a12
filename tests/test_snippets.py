"""Every code block of the README and docs/*.md, as a reader would paste it.

* ```python blocks run as pasted, each as its own script in a fresh interpreter started in an empty
  temporary directory, and must exit 0 without printing a warning that rlcore raised (a deprecated
  path, say) or gymnasium-robotics' import notice. A block that needs an optional extra is marked
  with ``<!-- needs: EXTRA -->`` on the line before it and is skipped only when that extra's
  packages are not installed.
* ```bash blocks are commands that train for minutes to hours, so they are checked, not run: every
  ``rlcore ...`` command must parse with rlcore's own argument parser, every ``python SCRIPT``
  must exist and define each ``--flag`` it is given, every ``make TARGET`` must be a Makefile
  target, every ``pip install '.[EXTRA]'`` (or ``dist/rlcore-*.whl[EXTRA]``) an extra of
  pyproject.toml, and no ``pip install rlcore...`` (rlcore is not on PyPI).
* every other block must say what it is (```text for listings, output and diagrams; ```toml, ...):
  a block without a language fails, so no code block goes unchecked by accident.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
# what each extra a block may need brings, as import names
EXTRA_IMPORTS = {
    "compat": ["stable_baselines3", "tianshou"],
    "ray": ["ray"],
    "robotics": ["gymnasium_robotics", "mujoco"],
    "minari": ["minari"],
    "torch": ["torch"],
    "mujoco": ["mujoco"],
    "envpool": ["envpool"],
    "atari": ["ale_py", "cv2"],
    "video": ["moviepy", "pygame"],
}
NOT_CODE = {"text", "toml", "json", "yaml"}
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
NEEDS = re.compile(r"<!--\s*needs:\s*([\w, -]+?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    needs: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _blocks() -> list[Block]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            needs = NEEDS.search(before)
            extras = tuple(x.strip() for x in needs.group(1).split(",")) if needs else ()
            out.append(Block(page, line, m.group(1), m.group(2), extras))
    return out


BLOCKS = _blocks()
PYTHON = [b for b in BLOCKS if b.lang == "python"]
SHELL = [b for b in BLOCKS if b.lang in ("bash", "sh", "shell")]


def test_every_block_says_what_it_is() -> None:
    unlabeled = [b.id for b in BLOCKS if b.lang not in {"python", "bash", "sh", "shell", *NOT_CODE}]
    assert not unlabeled, f"code blocks without a known language (python, bash, text, ...): {unlabeled}"
    for b in BLOCKS:
        for extra in b.needs:
            assert extra in EXTRAS and extra in EXTRA_IMPORTS, f"{b.id}: unknown extra {extra!r}"


def _missing(extras: tuple[str, ...]) -> list[str]:
    return [e for e in extras for mod in EXTRA_IMPORTS[e] if importlib.util.find_spec(mod) is None]


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_block_runs_as_pasted(block: Block, tmp_path: Path) -> None:
    missing = _missing(block.needs)
    if missing:
        pytest.skip(f"needs rlcore[{','.join(block.needs)}], not installed here ({', '.join(missing)})")
    script = tmp_path / "snippet.py"
    script.write_text(block.code, encoding="utf-8")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg", "RAY_USAGE_STATS_ENABLED": "0"}
    p = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env
    )
    assert p.returncode == 0, f"{block.id} failed:\n{block.code}\n--- stderr:\n{p.stderr[-4000:]}"
    noise = [
        line
        for line in p.stderr.splitlines()
        if ("Warning" in line and "rlcore" in line) or "Adroit" in line
    ]
    assert not noise, f"{block.id} printed warnings a reader would see:\n" + "\n".join(noise)


def _commands(code: str) -> list[list[str]]:
    """The simple commands of a shell block: continuation lines joined, comments dropped, split at
    ``;``/``&&``/``|``, loops unrolled by taking their body with the loop variable set to its first
    value, ``VAR=value`` prefixes and ``nice -n K`` dropped."""
    text = code.replace("\\\n", " ")
    out = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        loop = re.match(r"for (\w+) in (\S+)[^;]*; do (.*); done$", line)
        if loop:
            line = loop.group(3).replace(f"${loop.group(1)}", loop.group(2))
        for part in re.split(r"\s*(?:;|&&|\|\|?)\s*", line):
            words = shlex.split(part)
            while words and re.match(r"^\w+=", words[0]):
                words = words[1:]
            if words[:1] == ["nice"]:
                words = words[3:] if words[1:2] == ["-n"] else words[1:]
            if words:
                out.append(words)
    return out


def _script_flags(path: Path) -> set[str]:
    return set(re.findall(r"""["'](--[\w-]+)["']""", path.read_text(encoding="utf-8")))


def _pip_install(words: list[str]) -> bool:
    """``pip install ...``, ``.venv/bin/pip install ...`` or ``python -m pip install ...``."""
    if Path(words[0]).name == "pip":
        return words[1:2] == ["install"]
    return Path(words[0]).name in ("python", "python3") and words[1:4] == ["-m", "pip", "install"]


@pytest.mark.parametrize("block", SHELL, ids=[b.id for b in SHELL])
def test_shell_block_commands_exist_with_their_flags(block: Block) -> None:
    from rlcore.cli.parser import build_parser

    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))
    for words in _commands(block.code):
        cmd = " ".join(words)
        if words[0] == "rlcore":
            try:
                build_parser().parse_args(words[1:])
            except SystemExit as e:
                pytest.fail(f"{block.id}: `{cmd}` does not parse (exit {e.code})")
        elif words[0] in ("python", "python3") and words[1:2] != ["-m"]:
            script = ROOT / words[1]
            assert script.is_file(), f"{block.id}: `{cmd}`: no {words[1]} in the repository"
            flags = {w.split("=", 1)[0] for w in words[2:] if w.startswith("--")}
            unknown = flags - _script_flags(script)
            assert not unknown, f"{block.id}: `{cmd}`: {words[1]} has no {sorted(unknown)}"
        elif words[0] == "make":
            for t in (w for w in words[1:] if "=" not in w):
                assert t in targets, f"{block.id}: `{cmd}`: no Makefile target {t!r}"
        elif _pip_install(words):
            for spec in words[words.index("install") + 1 :]:
                # rlcore is not on PyPI: from the clone ('.[x]', '-e .[x]') or a wheel of `make wheel`
                assert not re.match(r"rlcore($|\[|[=<>])", spec), (
                    f"{block.id}: `{cmd}`: rlcore is not on PyPI; install from the clone ('.[EXTRA]') or a "
                    "wheel of `make wheel` (dist/rlcore-*.whl[EXTRA])"
                )
                m = re.fullmatch(r"(?:\.|dist/rlcore-[^\[]*\.whl)\[([\w,]+)\]", spec)
                if m:
                    for extra in m.group(1).split(","):
                        assert extra in EXTRAS, f"{block.id}: `{cmd}`: no extra {extra!r}"
        elif words[0] in ("python", "python3") and words[1:3] == ["-m", "venv"]:
            continue
        elif words[0] in ("source", "cd", "ls", "cat", "cargo", "git", "apt-get", "sudo", "du", "export"):
            continue
        else:
            pytest.fail(f"{block.id}: `{cmd}`: the snippet test does not know how to check {words[0]!r}")


def test_demo_prints_no_third_party_import_notice() -> None:
    """``make demo`` (``python -m rlcore.demo``) shows its own lines only: gymnasium-robotics' notice
    about Adroit envs, printed on import, is kept out."""
    if importlib.util.find_spec("gymnasium_robotics") is None:
        pytest.skip("needs rlcore[robotics] (gymnasium-robotics), not installed here")
    p = subprocess.run(
        [sys.executable, "-m", "rlcore.demo"], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Adroit" not in p.stdout + p.stderr
    assert p.stderr.strip() == "", p.stderr[-2000:]
    assert "env FetchReach-v4 x4" in p.stdout and "relabeled fraction" in p.stdout


def test_cli_env_lookup_prints_no_third_party_import_notice() -> None:
    """``rlcore train --env FetchReach-v4`` (and every other command that makes envs) imports
    gymnasium-robotics to register its envs, without the notice about Adroit envs it prints on import."""
    if importlib.util.find_spec("gymnasium_robotics") is None:
        pytest.skip("needs rlcore[robotics] (gymnasium-robotics), not installed here")
    code = "from rlcore.cli.common import _make_envs; print(_make_envs('FetchReach-v4', 1).num_envs)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "1"
    assert "Adroit" not in p.stderr and p.stderr.strip() == "", p.stderr[-2000:]
