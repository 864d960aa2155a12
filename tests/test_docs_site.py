"""The documentation site: it builds with warnings as errors (`mkdocs build --strict`, what `make docs`
runs); it works opened from the file system as the README says (``site/index.html``: every page a
file, every internal link to an existing file and every ``#anchor`` to an id on its page, never to a
folder, which a browser would show as a directory listing); no page holds an absolute path of the
machine that built it; the API reference covers every public module; and its API page of
``ReplayBuffer.sample`` shows the parameters and the errors, looked at in a real headless Chromium
(Debian's package, driven by Playwright), which also follows the navigation from ``index.html`` opened
as a file. The screenshot is kept in ``$RLCORE_DOCS_SHOTS`` (default: the test's temporary directory)
for people to look at.

Without the docs extra or a Chromium the tests skip and say what is missing; with
``RLCORE_DOCS_BROWSER=required`` (what ``.ci/run`` sets once Chromium is there) they fail instead,
so CI never passes with the site unbuilt or unseen."""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import NoReturn
from urllib.parse import unquote, urlsplit

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
        "replay-buffer.html",
        "n-step.html",
        "her.html",
        "per.html",
        "gae.html",
        "training.html",
        "imitation.html",
        "compat.html",
        "distributed.html",
        "benchmarks.html",
        "api/buffers.html",
        "api/algos.html",
        "api/trainers.html",
        "api/policy.html",
    ):
        assert (site / page).is_file(), page
    html = (site / "api" / "buffers.html").read_text(encoding="utf-8")
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
    url = (site / "api" / "buffers.html").as_uri() + "#rlcore.ReplayBuffer.sample"
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


# ----------------------------------------------------------------------------- links, anchors, paths


class _Page(HTMLParser):
    """The ids of an HTML page and the targets of its links (``href`` and ``src``)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            elif name in ("href", "src") and value:
                self.links.append(value)


def _pages(site: Path) -> dict[Path, _Page]:
    pages = {}
    for path in sorted(site.rglob("*.html")):
        if path == site / "404.html":  # a web server's page for a missing URL: links from the site root
            continue
        page = _Page()
        page.feed(path.read_text(encoding="utf-8"))
        pages[path] = page
    return pages


def test_every_internal_link_and_anchor_resolves_to_a_file_of_the_site(site: Path) -> None:
    """Opened from the file system, a link works when it names a file; a link to a folder shows a
    directory listing (what MkDocs' default directory URLs did). Every ``#anchor`` names an id of its
    target page."""
    pages = _pages(site)
    bad: list[str] = []
    checked = 0
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("#") and not link[1:]:
                continue  # external (https:, mailto:, data:) or the page itself
            where = f"{path.relative_to(site)}: {link}"
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            checked += 1
            if not target.is_relative_to(site.resolve()):
                bad.append(f"{where} (outside the site)")
            elif not target.is_file():
                bad.append(f"{where} ({'a folder' if target.is_dir() else 'no such file'})")
            elif parts.fragment:
                if target.suffix != ".html":
                    bad.append(f"{where} (an anchor into a file that is not a page)")
                elif unquote(parts.fragment) not in pages[target].ids:
                    bad.append(f"{where} (no id {unquote(parts.fragment)!r} on that page)")
    assert checked > 500, checked
    assert not bad, f"{len(bad)} broken internal links:\n" + "\n".join(bad[:60])


MACHINE_PATH = re.compile(r"(?<![\w.:/~-])/(?:work|home|root|tmp|Users|mnt|opt|srv|var/folders|private/var)/[\w.-]")


def test_no_page_holds_an_absolute_path_of_the_build_machine(site: Path) -> None:
    """Pages say where things are relative to the repository (``runs/...``, ``docs/...``), never
    where they were on the machine that wrote or built them."""
    found = []
    for path in [*site.rglob("*.html"), site / "search" / "search_index.json"]:
        text = path.read_text(encoding="utf-8")
        hits = {m.group(0) for m in MACHINE_PATH.finditer(text)}
        if str(ROOT) in text:
            hits.add(str(ROOT))
        found += [f"{path.relative_to(site)}: {h}" for h in sorted(hits)]
    assert not found, "absolute paths of a machine in the site:\n" + "\n".join(found[:40])


# ----------------------------------------------------------------------------- the API reference


#: not in the API reference: the command's own modules (its reference is ``rlcore --help`` and the
#: command-line page, which documents the entry point, the shared parts and ``enjoy``) and the demo
#: script of ``make demo``
NOT_API = re.compile(r"^rlcore\.(cli\..+|demo)$")


def _public_modules() -> set[str]:
    import rlcore

    out = set()
    for info in pkgutil.walk_packages(rlcore.__path__, "rlcore."):
        name = info.name
        if any(part.startswith("_") for part in name.split(".")) or NOT_API.match(name):
            continue
        module = importlib.import_module(name)
        own = [k for k, v in vars(module).items() if not k.startswith("_") and getattr(v, "__module__", None) == name]
        if info.ispkg and not own:
            continue  # a package that only re-exports its modules' names: its modules are the API
        out.add(name)
    return out


def _covered() -> tuple[set[str], list[str]]:
    """The modules the ``::: target`` directives of docs/api render: a module's own directive, the
    module of a class or function, and for a package the modules of the names in its ``__all__``."""
    covered: set[str] = set()
    unresolved = []
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        for target in re.findall(r"^:::\s+(\S+)", page.read_text(encoding="utf-8"), re.M):
            try:
                obj = importlib.import_module(target)
            except ImportError:
                module, _, attr = target.rpartition(".")
                try:
                    obj = getattr(importlib.import_module(module), attr)
                except (ImportError, AttributeError):
                    unresolved.append(f"{page.name}: {target}")
                    continue
            if isinstance(obj, type(sys)):
                covered.add(obj.__name__)
                for name in getattr(obj, "__all__", ()):
                    covered.add(getattr(getattr(obj, name), "__module__", obj.__name__))
            else:
                covered.add(obj.__module__)
    return covered, unresolved


def test_the_api_reference_covers_every_public_module() -> None:
    covered, unresolved = _covered()
    assert not unresolved, f"docs/api directives that name nothing: {unresolved}"
    missing = sorted(_public_modules() - covered)
    assert not missing, f"public modules without a page in docs/api (add a `::: module` line): {missing}"
    for name in ("rlcore.nets", "rlcore.presets", "rlcore.buffers.persist", "rlcore.results", "rlcore.datasets", "rlcore.policy"):
        assert name in covered, name


def test_the_site_opened_as_a_file_navigates_to_pages_not_folders(site: Path) -> None:
    """The README's way to read the docs: open ``site/index.html`` from the file system and follow the
    navigation."""
    chromium = _chromium()
    if chromium is None:
        _missing("no Chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    if importlib.util.find_spec("playwright") is None:
        _missing("playwright is not installed (the test extra: pip install -e '.[test]')")
    from playwright import sync_api

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto((site / "index.html").as_uri())
            for file in ("training.html", "api/buffers.html"):
                page.locator(f"nav.md-nav--primary a[href='{file}']").first.click()
                page.wait_for_load_state()
                assert page.url == (site / file).as_uri(), page.url
                assert "Index of" not in page.content()
                assert page.locator("article h1").first.is_visible()
                page.go_back()
        finally:
            browser.close()
