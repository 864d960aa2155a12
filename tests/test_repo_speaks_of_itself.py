"""The repository speaks of itself only: no source, doc or build file names a path of the machine
it was written on, or a document that is not in the repository (the docs site has its own test in
test_docs_site.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = re.compile(r"(\.(py|pyi|rs|md|toml|yml|yaml|cfg|sh|txt)|Makefile|/run)$")
MACHINE_PATH = re.compile(r"(?<![\w.:/~-])/(?:work|home|root|Users|mnt|srv)/[\w.-]")
# documents of the team's own workspace, outside the repository
OUTSIDE_DOC = re.compile(r"\b(?:DESIGN|CASES|STYLE|FACTS|DEVELOPERS)\.md\b|\.\./shared\b")


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    return [ROOT / n for n in names if TEXT.search(n) and (ROOT / n).is_file()]


def test_no_tracked_file_names_a_machine_path_or_an_outside_document() -> None:
    files = _tracked_text_files()
    assert len(files) > 200, len(files)
    found = []
    for path in files:
        if path == Path(__file__).resolve():
            continue
        for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for pattern in (MACHINE_PATH, OUTSIDE_DOC):
                m = pattern.search(line)
                if m:
                    found.append(f"{path.relative_to(ROOT)}:{lineno}: {m.group(0)}")
    assert not found, "\n".join(found[:60])
