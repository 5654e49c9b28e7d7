"""Fixtures shared by test files.

``playwright``: one Playwright (sync API) per session. Its sync API runs an event
loop in the calling thread, so a second ``sync_playwright()`` while another is open
fails ("Sync API inside the asyncio loop"); the book's browser test and the
JupyterLab test therefore share this one.

``built_html``, ``base_url``, ``browser`` and ``book``: the built book served on
loopback and one headless Chromium for it, shared by tests/test_browser.py and
tests/test_classify_page.py.

The ``needs`` marker (``tests/prerequisites.py``): a test that needs the prepared
data, the local mirror or a chapter skips without it, and fails under ``CI=true``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import browser_check
from prerequisites import pytest_configure, pytest_runtest_setup  # noqa: F401  (the hooks)

REPO = Path(__file__).resolve().parents[1]
HTML = REPO / "_build" / "html"
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
BUILD_COMMAND = [str(JUPYTER_BOOK), "build", ".", "-W", "-n", "--keep-going"]


def pytest_deselected(items):
    """Keep what ``-m``/``-k`` left out: :func:`collected_tests` counts the whole folder."""
    config = items[0].config if items else None
    if config is not None:
        config.stash.setdefault(DESELECTED, []).extend(items)


DESELECTED = pytest.StashKey[list]()


def collected_tests(session: pytest.Session) -> list[pytest.Item] | None:
    """Every test this session collected, selected or not, when it collected this
    folder whole (``pytest ... tests``); None when it was given less."""
    folder = Path(__file__).resolve().parent
    if [Path(arg).resolve() for arg in session.config.args] != [folder]:
        return None
    return list(session.items) + session.config.stash.get(DESELECTED, [])


@pytest.fixture(scope="session")
def playwright():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as session:
        yield session


@pytest.fixture(scope="session")
def built_html() -> Path:
    if not (HTML / "index.html").exists():
        result = subprocess.run(BUILD_COMMAND, cwd=REPO, capture_output=True, text=True,
                                timeout=1200)
        assert result.returncode == 0, (
            f"book build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return HTML


@pytest.fixture(scope="session")
def base_url(built_html: Path):
    with browser_check.serve_directory(built_html) as url:
        yield url


@pytest.fixture(scope="session")
def browser(playwright, tmp_path_factory):
    """One headless Chromium (fresh profile) for the session, offline but for loopback."""
    context = browser_check.launch(playwright, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield context
    finally:
        context.close()


@pytest.fixture(scope="session")
def book(browser, base_url: str):
    """The browser with external hosts stubbed, and the shared link checker."""
    external = browser_check.stub_external_requests(browser)
    return browser, browser_check.LinkChecker(base_url), external
