"""The documentation site: it builds with warnings as errors (`mkdocs build --strict`, what `make docs`
runs) and its API page of ``ReplayBuffer.sample`` shows the parameters and the errors, looked at in a
real headless Chromium (Debian's package, driven by Playwright). The screenshot is kept in
``$RLCORE_DOCS_SHOTS`` (default: the test's temporary directory) for people to look at.

Without the docs extra or a Chromium the tests skip and say what is missing; with
``RLCORE_DOCS_BROWSER=required`` (what ``.ci/run`` sets once Chromium is there) they fail instead,
so CI never passes with the site unbuilt or unseen."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = os.environ.get("RLCORE_DOCS_BROWSER") == "required"


def _missing(reason: str) -> NoReturn:
    if REQUIRED:
        pytest.fail(f"{reason}, but RLCORE_DOCS_BROWSER=required", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


if importlib.util.find_spec("mkdocs") is None:
    _missing("the docs extra is not installed (pip install -e '.[docs]')")


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    p = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, "mkdocs build --strict failed:\n" + (p.stdout + p.stderr)[-6000:]
    return out


def test_site_builds_with_warnings_as_errors_and_has_every_page(site: Path) -> None:
    for page in (
        "index.html",
        "replay-buffer/index.html",
        "n-step/index.html",
        "her/index.html",
        "per/index.html",
        "gae/index.html",
        "training/index.html",
        "imitation/index.html",
        "compat/index.html",
        "distributed/index.html",
        "benchmarks/index.html",
        "api/buffers/index.html",
        "api/algos/index.html",
        "api/trainers/index.html",
    ):
        assert (site / page).is_file(), page
    html = (site / "api" / "buffers" / "index.html").read_text(encoding="utf-8")
    assert 'id="rlcore.ReplayBuffer.sample"' in html
    assert ":class:`" not in html and ":meth:`" not in html  # Sphinx roles rendered as code


def test_replay_buffer_sample_page_renders_parameters_and_errors_in_chromium(site: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    if chromium is None:
        _missing("no Chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    if importlib.util.find_spec("playwright") is None:
        _missing("playwright is not installed (the test extra: pip install -e '.[test]')")
    from playwright import sync_api
    shots = Path(os.environ.get("RLCORE_DOCS_SHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / "api-ReplayBuffer.sample.png"
    url = (site / "api" / "buffers" / "index.html").as_uri() + "#rlcore.ReplayBuffer.sample"
    with sync_api.sync_playwright() as pw:
        # as root (CI) Chromium needs --no-sandbox; a container's small /dev/shm would crash it
        browser = pw.chromium.launch(
            executable_path=chromium, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.goto(url)
            block = page.locator(
                "xpath=//*[@id='rlcore.ReplayBuffer.sample']/ancestor::div[contains(@class,'doc-function')][1]"
            )
            block.scroll_into_view_if_needed()
            assert block.is_visible()
            text = block.inner_text()
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    # the signature, each parameter with its type and default, the return and every error class
    for want in ("sample(", "batch_size", "n_step", "gamma", "out", "0.99", "TransitionBatch"):
        assert want in text, want
    assert "Parameters:" in text and "Returns:" in text and "Raises:" in text
    for error in ("InvalidValueError", "DTypeError", "EmptyBufferError", "ShapeError", "ApiUsageError"):
        assert error in text, error
    assert "the buffer holds no transition" in text
    assert shot.stat().st_size > 20_000
    print(f"screenshot: {shot}")
