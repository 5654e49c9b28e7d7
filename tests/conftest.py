"""Fixtures shared by test files.

``playwright``: one Playwright (sync API) per session. Its sync API runs an event
loop in the calling thread, so a second ``sync_playwright()`` while another is open
fails ("Sync API inside the asyncio loop"); the book's browser test and the
JupyterLab test therefore share this one.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def playwright():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as session:
        yield session
