"""Open built HTML pages in headless Chromium and report what a reader would find broken.

Used by ``tests/test_browser.py`` on the built book (``_build/html``) and on small
synthetic pages that prove each check can fail. One :func:`check_page` call loads a
page and reports:

* console errors and uncaught JavaScript exceptions (``console``/``pageerror``
  events), and requests to the local server that failed;
* internal links whose target file does not answer HTTP 200, or whose ``#anchor``
  is not an ``id`` (or ``<a name>``) on the target page;
* images that did not load or have a natural size of zero;
* the page's title: the ``<h1>`` and ``document.title``.

:func:`clipped_sideways` reports what a reader at a given window width could only
read by scrolling sideways: code cells, outputs and tables (and the containers
that scroll them) whose content is wider than their box. :func:`page_overflow`
reports whether the page itself scrolls sideways (on a phone, where code blocks
and tables may scroll inside their own box but the page must not), and what
pushes it wider.

The machine that runs the tests has no internet. Requests to other hosts (MathJax
from a CDN, say) are answered with an empty response and listed in the report
instead of failing: they are not part of the book, and a broken *image* among
them still fails the image check because it then has no size.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import mimetypes
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium (``apt-get install chromium``); Playwright only drives it."""

CHROMIUM_ARGS = [
    # Playwright adds --headless itself (headless=True) and a fresh --user-data-dir
    # (launch_persistent_context); these keep Chromium from reaching the network.
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

# The article's <h1> text (not the print-only copy above it, which lacks the chapter
# number) without Sphinx's "#" permalink, and every image after it settled.
_H1_JS = """() => {
  const h1 = ['article h1', 'main h1', 'h1'].map(s => document.querySelector(s)).find(e => e);
  if (!h1) return null;
  const copy = h1.cloneNode(true);
  copy.querySelectorAll('.headerlink').forEach(e => e.remove());
  return copy.textContent.replace(/\\s+/g, ' ').trim();
}"""

_IMAGES_JS = """async () => {
  const images = [...document.images];
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.complete ? null :
      new Promise(done => { img.addEventListener('load', done); img.addEventListener('error', done); })));
  return images.map(img => ({src: img.getAttribute('src'), url: img.currentSrc || img.src,
                             width: img.naturalWidth, height: img.naturalHeight}));
}"""


@dataclass
class PageReport:
    """What one page load found; ``problems`` is empty for a good page."""

    url: str
    title: str = ""
    h1: str | None = None
    links_checked: int = 0
    images_checked: int = 0
    external_links: int = 0
    problems: list[str] = field(default_factory=list)
    sidebar: dict[str, str] = field(default_factory=dict)  # the sidebar's titles (_sidebar)
    layout: PageLayout | None = None  # page_layout at layout_width, same visit


# --------------------------------------------------------------------------- server

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib name)
        pass

    def copyfile(self, source, outputfile) -> None:  # type: ignore[no-untyped-def]
        try:
            super().copyfile(source, outputfile)
        except (BrokenPipeError, ConnectionResetError):
            # Chromium hung up before the file was sent (a page it left, a request it
            # dropped): what the checks read is on the browser's side, and socketserver
            # would print this thread's traceback into the test log.
            self.close_connection = True


@contextlib.contextmanager
def serve_directory(root: Path, types: dict[str, str] | None = None) -> Iterator[str]:
    """Serve ``root`` over HTTP on a free loopback port; yields the base URL (ends in /).

    ``types`` maps file endings to the Content-Type to send for them (e.g. a host
    that serves ``.ipynb`` as ``application/json``).
    """

    class Handler(_QuietHandler):
        extensions_map = {**_QuietHandler.extensions_map, **(types or {})}

    handler = functools.partial(Handler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="book-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# --------------------------------------------------------------------------- links

class _AnchorParser(HTMLParser):
    """Collects every ``id`` and ``<a name>`` of a page: the valid #fragments."""

    def __init__(self) -> None:
        super().__init__()
        self.anchors: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value and (key == "id" or (tag == "a" and key == "name")):
                self.anchors.add(value)


class LinkChecker:
    """Fetches link targets from the local server once each, and their anchors."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._status: dict[str, int] = {}
        self._anchors: dict[str, set[str]] = {}

    def is_internal(self, url: str) -> bool:
        return url.startswith(self.base_url)

    def status(self, target: str) -> int:
        if target not in self._status:
            try:
                with urllib.request.urlopen(target, timeout=30) as response:
                    body = response.read()
                    self._status[target] = response.status
                    if "html" in response.headers.get("Content-Type", ""):
                        parser = _AnchorParser()
                        parser.feed(body.decode("utf-8", errors="replace"))
                        self._anchors[target] = parser.anchors
            except urllib.error.HTTPError as error:
                self._status[target] = error.code
            except OSError:
                self._status[target] = 0
        return self._status[target]

    def problem(self, url: str) -> str | None:
        """Why the internal link ``url`` is broken, or None when it resolves."""
        target, _, fragment = url.partition("#")
        status = self.status(target)
        if status != 200:
            return f"HTTP {status}"
        fragment = urllib.parse.unquote(fragment)
        if fragment and fragment not in self._anchors.get(target, set()):
            return f"no #{fragment} on the target page"
        return None


# --------------------------------------------------------------------------- browser

def launch(playwright, user_data_dir: Path, viewport: dict | None = None):
    """A headless Chromium context with a fresh profile, offline except for loopback."""
    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install -y chromium")
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir), executable_path=str(CHROMIUM), headless=True,
        chromium_sandbox=False, args=CHROMIUM_ARGS,
        viewport=viewport or {"width": 1280, "height": 900}, service_workers="block")


LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


def stub_external_requests(context) -> list[str]:
    """Answer every request to a non-loopback host with an empty 200; return their URLs."""
    external: list[str] = []

    def handle(route) -> None:
        url = route.request.url
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or parts.hostname in LOOPBACK_HOSTS:
            route.continue_()
            return
        external.append(url)
        content_type = mimetypes.guess_type(urllib.parse.urlsplit(url).path)[0] or "text/plain"
        route.fulfill(status=200, body=b"", content_type=content_type)

    context.route("**/*", handle)
    return external


def check_page(context, url: str, links: LinkChecker, settle_ms: int = 300,
               layout_width: int | None = None) -> PageReport:
    """Load ``url`` in a new tab and report console errors, broken links and images,
    and the sidebar's titles; with ``layout_width``, also what :func:`page_layout`
    finds at that width, measured last in the same visit (a page load in Chromium is
    most of the browser test's CPU time, and the page is the same each time)."""
    report = PageReport(url=url)
    page = context.new_page()
    page.on("console", lambda message: report.problems.append(
        f"console {message.type}: {message.text}") if message.type == "error" else None)
    page.on("pageerror", lambda error: report.problems.append(f"JavaScript exception: {error}"))
    page.on("requestfailed", lambda request: report.problems.append(
        f"request failed: {request.url} ({request.failure})") if links.is_internal(request.url) else None)
    try:
        if layout_width:
            page.set_viewport_size({"width": layout_width, "height": 900})
        response = page.goto(url, wait_until="load")
        if response is None or response.status != 200:
            report.problems.append(f"page answered HTTP {response.status if response else 'nothing'}")
        page.wait_for_timeout(settle_ms)  # late console errors from deferred scripts

        report.title = page.title()
        report.h1 = page.evaluate(_H1_JS)
        report.sidebar = _sidebar(page)
        for image in page.evaluate(_IMAGES_JS):
            report.images_checked += 1
            if not (image["width"] > 0 and image["height"] > 0):
                report.problems.append(f"image did not load: {image['src']}")
        _check_links(page, links, report)
        if layout_width:
            report.layout = _measure_layout(page)  # opens every <details>: last
    finally:
        page.close()
    return report


def _check_links(page, links: LinkChecker, report: PageReport) -> None:
    """Every internal link of the page answers (:class:`LinkChecker`); external ones counted."""
    hrefs = page.eval_on_selector_all("a[href]", "elements => elements.map(e => e.href)")
    for href in sorted(set(hrefs)):
        if not href.startswith(("http://", "https://")):
            continue  # mailto:, javascript:
        if not links.is_internal(href):
            report.external_links += 1
            continue
        report.links_checked += 1
        why = links.problem(href)
        if why:
            report.problems.append(f"broken link {href} ({why})")


# Every <details> opened (collapsed hide-input/hide-cell cells, dropdowns) so what
# a reader can unfold is measured too; then each code block, output and table of
# the article, and each box that scrolls one, whose content is wider than its box.
_CLIPPED_JS = r"""(selectors) => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  const root = document.querySelector('article') || document.body;
  const heading = (el) => {
    const all = [...root.querySelectorAll('h1, h2, h3, h4')];
    const before = all.filter(
        h => h.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING);
    const h = before.length ? before[before.length - 1] : null;
    return h ? h.textContent.replace(/[#\u00b6]/g, '').replace(/\s+/g, ' ').trim() : '(top)';
  };
  const widest = (el) => {
    const lines = (el.innerText || '').split('\n');
    return lines.reduce((a, b) => (b.length > a.length ? b : a), '');
  };
  const found = [];
  const seen = new Set();
  for (const selector of selectors) {
    for (const el of root.querySelectorAll(selector)) {
      if (seen.has(el) || !el.getClientRects().length) continue;
      seen.add(el);
      const parent = el.parentElement;
      // A table wider than its parent spills out even where nothing scrolls.
      const box = el.tagName === 'TABLE' && parent ? Math.min(el.clientWidth, parent.clientWidth)
                                                   : el.clientWidth;
      const content = el.tagName === 'TABLE' ? Math.max(el.scrollWidth, el.offsetWidth)
                                             : el.scrollWidth;
      if (content > box + 1) {
        const line = widest(el);
        found.push({selector, heading: heading(el), content, box,
                    line: line.length > 70 ? line.slice(0, 67) + '...' : line,
                    columns: line.length});
      }
    }
  }
  return found;
}"""

CLIPPED_SELECTORS = (
    "div.highlight pre",                   # code cells and highlighted outputs
    ".cell_output pre", ".output pre",     # plain-text outputs
    "table",                               # markdown tables, list-tables, DataFrames
    ".pst-scrollable-table-container",     # the theme's scroll box around a table
    ".table-wrapper",                      # myst-nb's box around an output table
    "div.cell_output", "div.cell_input",   # a cell's whole output or input
)
"""What :func:`clipped_sideways` measures (CSS selectors, inside the page's article)."""


def clipped_sideways(context, url: str, width: int = 1280) -> list[str]:
    """What on ``url`` is wider than its box in a ``width``-pixel window, one line each.

    An element counts when its ``scrollWidth`` exceeds its ``clientWidth`` (it
    scrolls sideways, or is cut where overflow is hidden), or, for a table, when it
    is wider than its parent. Each line names the element's selector, the heading
    it sits under, both widths and its widest line of text.
    """
    return page_layout(context, url, width).clipped


def _clipped_lines(found: list[dict]) -> list[str]:
    return [f"{item['selector']} under \"{item['heading']}\": {item['content']} px of content "
            f"in {item['box']} px; widest line ({item['columns']} chars): {item['line']!r}"
            for item in found]


# What makes a page wider than the window: the elements that reach past its right
# edge, or whose text does (a long word in a box that does not scroll), with no
# ancestor that scrolls or clips them; the innermost of them, which hold the culprit.
_PAGE_OVERFLOW_JS = r"""() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const width = document.documentElement.clientWidth;
  const contained = (el) => {
    for (let a = el.parentElement; a && a !== document.documentElement; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') return true;
    }
    return false;
  };
  const describe = (el, right) => {
    const name = el.tagName.toLowerCase() + (el.classList.length ? '.' + [...el.classList].join('.') : '');
    const text = (el.innerText || '').replace(/\s+/g, ' ').trim();
    return `${name} reaches ${Math.round(right)} px: '${text.length > 60 ? text.slice(0, 57) + '...' : text}'`;
  };
  const candidates = [];
  for (const el of document.querySelectorAll('body *')) {
    if (getComputedStyle(el).position === 'fixed' || contained(el)) continue;
    const rect = el.getBoundingClientRect();
    const overflowing = getComputedStyle(el).overflowX === 'visible' && el.clientWidth > 0
        && el.scrollWidth > el.clientWidth + 1 && rect.left + el.scrollWidth > width + 1;
    if ((rect.width && rect.right > width + 1) || overflowing) {
      candidates.push([el, Math.max(rect.right, rect.left + el.scrollWidth)]);
    }
  }
  const found = candidates.filter(([el]) => !candidates.some(([other]) => other !== el
      && el.contains(other))).map(([el, right]) => describe(el, right));
  return {scroll: document.documentElement.scrollWidth - width, found};
}"""


def page_overflow(context, url: str, width: int = 390) -> tuple[int, list[str]]:
    """How many pixels ``url`` scrolls sideways in a ``width``-pixel window (0: none), and
    what pushes it wider: the elements (or their text) that reach past the window's
    right edge without a scrolling box around them, outermost first."""
    layout = page_layout(context, url, width)
    return layout.scroll, layout.found


@dataclass
class PageLayout:
    """What one visit of a page at one window width finds (:func:`page_layout`)."""

    scroll: int  # pixels the page scrolls sideways (0: none)
    found: list[str]  # what pushes it wider (page_overflow)
    cut: list[str]  # contents entries, Previous/Next links, silent table scrolls
    figures: dict  # {"figures": [...], "tables": [...]}: caption numbers and widths
    clipped: list[str]  # what is wider than its box (clipped_sideways)


def page_layout(context, url: str, width: int) -> PageLayout:
    """Everything the layout tests look at, from one visit (a page load in Chromium
    costs the browser test most of its time): what is clipped in its box and the
    figures and table captions (:data:`_FIGURES_JS`, first, as the reader finds the
    page), then the links cut there (right-hand contents entries that reach past
    their column's box, "Previous" or "Next" links that reach past the window; a
    contents column hidden off-screen on a phone is not looked at), tables that scroll
    inside their box without a cue (no fade at the box's right edge while columns
    lie beyond it, or a fade left once the box is scrolled to its end), and last how
    far the page scrolls sideways with every folded cell opened."""
    page = context.new_page()
    try:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(url, wait_until="load")
        return _measure_layout(page)
    finally:
        page.close()


def _measure_layout(page) -> PageLayout:
    """:func:`page_layout`'s measurements on a loaded page (it opens every ``<details>``)."""
    page.evaluate("document.fonts.ready.then(() => null)")
    clipped = _clipped_lines(page.evaluate(_CLIPPED_JS, list(CLIPPED_SELECTORS)))
    figures = page.evaluate(_FIGURES_JS)
    cut = page.evaluate(_CUT_LINKS_JS) + page.evaluate(_SILENT_SCROLL_JS)
    result = page.evaluate(_PAGE_OVERFLOW_JS)  # opens every <details>: last
    return PageLayout(result["scroll"], result["found"], cut, figures, clipped)


_FIGURES_JS = """() => {
  const number = el => { const n = el && el.querySelector('.caption-number');
    return n ? n.textContent.trim() : null; };
  const figures = [...document.querySelectorAll('article img')]
    .filter(img => img.closest('.cell_output, figure'))
    .map(img => ({src: img.getAttribute('src').slice(-40), natural: img.naturalWidth,
                  shown: img.getBoundingClientRect().width, number: number(img.closest('figure'))}));
  const tables = [...document.querySelectorAll('article table caption')].map(number);
  return {figures, tables};
}"""


_SILENT_SCROLL_JS = """async () => {
  const frame = () => new Promise(done => requestAnimationFrame(() => done()));
  const faded = box => getComputedStyle(box).maskImage.includes('gradient')
    || (getComputedStyle(box).webkitMaskImage || '').includes('gradient');
  const text = el => el.textContent.replace(/\\s+/g, ' ').trim().slice(0, 60);
  const silent = [];
  for (const box of document.querySelectorAll('article .pst-scrollable-table-container')) {
    if (box.scrollWidth <= box.clientWidth + 1) continue;
    if (!faded(box)) silent.push('table scrolls without a cue: ' + text(box));
    box.scrollLeft = box.scrollWidth;
    box.dispatchEvent(new Event('scroll'));
    await frame();
    if (faded(box)) silent.push('table still fades at its end: ' + text(box));
    box.scrollLeft = 0;
    box.dispatchEvent(new Event('scroll'));
  }
  return silent;
}"""


_CUT_LINKS_JS = """() => {
  const inside = (el, box) => { const r = el.getBoundingClientRect();
    return r.width === 0 || (r.left >= box.left - 0.5 && r.right <= box.right + 0.5); };
  const text = el => el.textContent.replace(/\\s+/g, ' ').trim().slice(0, 60);
  const cut = [];
  const side = document.querySelector('.bd-sidebar-secondary');
  if (side && side.getBoundingClientRect().left < window.innerWidth) {
    const box = side.getBoundingClientRect();
    for (const a of side.querySelectorAll('a')) if (!inside(a, box)) cut.push('contents: ' + text(a));
  }
  const page = {left: 0, right: document.documentElement.clientWidth};
  for (const a of document.querySelectorAll('.prev-next-area a'))
    if (!inside(a, page)) cut.push('previous/next: ' + text(a));
  return cut;
}"""


def _sidebar(page) -> dict[str, str]:
    """The book's table of contents as the sidebar of a loaded page shows it: page URL -> text."""
    return dict(page.eval_on_selector_all(
        "nav.bd-docs-nav a.reference.internal",
        "links => links.map(a => [a.href.split('#')[0], a.textContent.replace(/\\s+/g, ' ').trim()])"))


def search(context, base_url: str, word: str, timeout_ms: int = 30_000) -> list[str]:
    """Run Sphinx's search page for ``word``; return the result links (page URLs)."""
    page = context.new_page()
    try:
        page.goto(f"{base_url}search.html?q={urllib.parse.quote(word)}", wait_until="load")
        # Sphinx writes a summary line once the search has finished, hits or not.
        page.wait_for_selector("#search-results .search-summary, #search-results p",
                               timeout=timeout_ms)
        page.wait_for_function(
            "() => !document.querySelector('#search-results h2')"
            " || !/Searching/.test(document.querySelector('#search-results h2').textContent)",
            timeout=timeout_ms)
        return page.eval_on_selector_all(
            "#search-results ul.search li a", "links => links.map(a => a.href.split('#')[0])")
    finally:
        page.close()
