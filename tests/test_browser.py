"""The built book in a real browser: every TOC page loads cleanly and its links resolve.

Serves ``_build/html`` on loopback and opens each page listed in ``_toc.yml`` in
headless Chromium (Debian's ``chromium``, driven by Playwright). For every page:
no console errors, every internal link answers HTTP 200 and its ``#anchor`` exists,
every image has a non-zero natural size, and the title (``<h1>``, ``<title>`` and
the sidebar entry) is the TOC title, numbered "N. " in a part marked ``numbered``,
and nothing (code cell, output, table) is wider than its box at 1280 px: a reader
never scrolls sideways. At a phone's 390 px the page itself never scrolls
sideways (long inline code and words break; code blocks and tables scroll inside
their own box), and the intro's table numbers the chapters as the sidebar does. Sphinx's search page finds a chapter by a word from its
text. Screenshots of the introduction and the training chapter go to
``artifacts/screenshots/``.

The checks are proven able to fail on small synthetic pages (a broken link, a
missing anchor, a missing image, a console error, an uncaught exception, a code
line, an output line or a table too wide for the page), the book's CSS
(``_static/book.css``) is shown to make a too-wide table wrap, and a
broken ``{ref}`` is shown to fail a ``-W -n`` book build.

The book must be built first (``make book``); if ``_build/html`` is missing the
fixture builds it with the same command.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import urllib.parse
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
import yaml

import browser_check
import prerequisites

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
HTML = REPO / "_build" / "html"
SCREENSHOTS = REPO / "artifacts" / "screenshots"
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")

# --------------------------------------------------------------------------- the TOC

def toc_files(toc_path: Path = REPO / "_toc.yml") -> list[str]:
    """Every file of the TOC (root first), as written there: 'book/intro', 'notebooks/01_dataset'."""
    toc = yaml.safe_load(toc_path.read_text())
    files = [toc["root"]]

    def walk(entries: list[dict]) -> None:
        for entry in entries:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    walk(toc.get("chapters", []))
    return files


def toc_numbers(toc_path: Path = REPO / "_toc.yml") -> dict[str, str]:
    """'N. ' for each page of a part marked ``numbered`` (Sphinx counts them from 1)."""
    toc = yaml.safe_load(toc_path.read_text())
    numbers = {}
    for part in toc.get("parts", []):
        if part.get("numbered"):
            for n, entry in enumerate(part.get("chapters", []), start=1):
                numbers[entry["file"]] = f"{n}. "
    return numbers


def source_title(stem: str) -> str:
    """The first '# ' heading of the page's source (.md or .ipynb): its TOC title."""
    md, ipynb = REPO / f"{stem}.md", REPO / f"{stem}.ipynb"
    if md.exists():
        texts = [md.read_text()]
    else:
        notebook = nbformat.read(ipynb, as_version=4)
        texts = [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]
    for text in texts:
        match = re.search(r"^# +(.+?)\s*$", text, re.MULTILINE)
        if match:
            return re.sub(r"[`*]", "", match.group(1))
    raise AssertionError(f"{stem}: no '# ' title heading")


# --------------------------------------------------------------------------- fixtures

PAGES = toc_files()
NUMBERS = toc_numbers()


# --------------------------------------------------------------------------- the book

def test_toc_pages_were_built(built_html: Path) -> None:
    missing = [stem for stem in PAGES if not (built_html / f"{stem}.html").exists()]
    assert not missing, f"TOC pages without HTML: {missing}"


_REPORTS: dict[str, browser_check.PageReport] = {}


def page_report(book, url: str) -> browser_check.PageReport:
    """One visit's report per page, shared by the tests that read it (a visit is the
    slow part, and a page answers the same each time): its console, links, images,
    titles and sidebar, and its layout at 1280 px."""
    if url not in _REPORTS:
        context, links, _ = book
        _REPORTS[url] = browser_check.check_page(context, url, links, layout_width=1280)
    return _REPORTS[url]


@pytest.mark.parametrize("stem", PAGES)
def test_page_loads_cleanly(book, base_url: str, stem: str) -> None:
    report = page_report(book, f"{base_url}{stem}.html")
    assert not report.problems, f"{stem}.html:\n  " + "\n  ".join(report.problems)
    assert report.links_checked > 0, f"{stem}.html: no internal links found (sidebar missing?)"


@pytest.mark.parametrize("stem", PAGES)
def test_page_title_matches_toc(book, base_url: str, stem: str) -> None:
    expected = NUMBERS.get(stem, "") + source_title(stem)
    url = f"{base_url}{stem}.html"
    report = page_report(book, url)
    sidebar = report.sidebar
    assert sidebar.get(url) == expected, f"sidebar entry for {stem}: {sidebar.get(url)!r}"
    assert report.h1 == expected, f"{stem}: <h1> {report.h1!r}, TOC title {expected!r}"
    assert report.title.startswith(f"{expected} \u2014 "), f"{stem}: <title> {report.title!r}"


def test_chapters_are_numbered() -> None:
    """The Chapters part is numbered 1. to 10. in the order of the files' own prefixes."""
    chapters = [stem for stem in PAGES if stem.startswith("notebooks/")]
    assert chapters and all(stem in NUMBERS for stem in chapters), NUMBERS
    for stem in chapters:
        prefix = Path(stem).name.split("_")[0]
        assert NUMBERS[stem] == f"{int(prefix)}. ", f"{stem} is numbered {NUMBERS[stem]!r}"


@pytest.mark.parametrize("stem", PAGES)
def test_nothing_clipped_sideways(book, base_url: str, stem: str) -> None:
    """No code cell, output or table is wider than its box in a 1280 px window."""
    clipped = _layout(book, base_url, stem, 1280).clipped  # the visit the layout tests share
    assert not clipped, (f"{stem}.html at 1280 px, {len(clipped)} clipped:\n  "
                         + "\n  ".join(clipped))


PHONE = 390
"""A phone's window width in CSS pixels (an iPhone 12 to 15's): the page must not
scroll sideways there; code blocks and tables may scroll inside their own box."""


_LAYOUTS: dict[tuple[str, int], browser_check.PageLayout] = {}
"""One visit per page and width for the tests below (the browser test's time)."""


def _layout(book, base_url: str, stem: str, width: int) -> browser_check.PageLayout:
    if width == 1280:  # measured in the visit page_report makes
        return page_report(book, f"{base_url}{stem}.html").layout
    if (stem, width) not in _LAYOUTS:
        context, _, _ = book
        _LAYOUTS[stem, width] = browser_check.page_layout(context, f"{base_url}{stem}.html",
                                                          width)
    return _LAYOUTS[stem, width]


@pytest.mark.parametrize("width", [PHONE, 1280])
@pytest.mark.parametrize("stem", PAGES)
def test_the_page_never_scrolls_sideways(book, base_url: str, stem: str, width: int) -> None:
    layout = _layout(book, base_url, stem, width)
    scroll, found = layout.scroll, layout.found
    assert scroll <= 0 and not found, (f"{stem}.html at {width} px scrolls sideways by "
                                       f"{scroll} px:\n  " + "\n  ".join(found))


@pytest.mark.parametrize("width", [PHONE, 1280])
@pytest.mark.parametrize("stem", PAGES)
def test_no_contents_entry_or_next_link_is_cut(book, base_url: str, stem: str,
                                               width: int) -> None:
    """Nor a table that scrolls in its box without a cue (browser_check.page_layout)."""
    cut = _layout(book, base_url, stem, width).cut
    assert not cut, f"{stem}.html at {width} px:\n  " + "\n  ".join(cut)


@pytest.mark.parametrize("opened", ["served", "from disk"])
def test_formulas_render_from_the_books_own_mathjax(book, base_url: str,
                                                    built_html: Path, opened: str) -> None:
    """Chapter 2's formulas are typeset by the MathJax copy the book carries
    (``mathjax/tex-chtml.js`` at its root), with every other host answered by an empty
    stub, as a reader without a network has it: served, and opened from disk
    (``file://``, as the setup page invites)."""
    context, _, external = book
    assert (built_html / "mathjax" / "tex-chtml.js").is_file()
    root = base_url if opened == "served" else built_html.as_uri() + "/"
    page = context.new_page()
    try:
        page.goto(f"{root}notebooks/02_config_lr.html", wait_until="load")
        page.wait_for_function("document.querySelectorAll('mjx-container').length > 0",
                               timeout=15_000)
        formulas = page.eval_on_selector_all(".math", "els => els.length")
        typeset = page.eval_on_selector_all("mjx-container", "els => els.length")
        scripts = page.eval_on_selector_all("script[src*='tex-chtml']", "els => els.map(e => e.src)")
    finally:
        page.close()
    assert formulas >= 8 and typeset >= formulas, (formulas, typeset)
    assert scripts and all(src.startswith(root) for src in scripts), scripts
    assert not [url for url in external if "mathjax" in url], external


@pytest.mark.parametrize("stem, drawn", [("book/results", "page-"),
                                         ("book/gpu-ascend", "twin-accuracy")])
def test_the_books_own_figures_are_drawn_at_twice_their_shown_size(book, base_url: str,
                                                                   stem: str,
                                                                   drawn: str) -> None:
    """The figures drawn from the records (the results page's three, the GPU page's
    twin figure) hold two pixels for each CSS pixel the page shows, at 1280 px, so a
    2x screen shows them crisp."""
    context, _, _ = book
    page = context.new_page()
    try:
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(f"{base_url}{stem}.html", wait_until="load")
        sizes = page.eval_on_selector_all(
            f"img[src*='{drawn}']",
            "els => els.map(e => [e.naturalWidth, e.getBoundingClientRect().width])")
    finally:
        page.close()
    assert sizes, f"{stem}: no figure {drawn}*"
    assert all(natural >= 2 * shown - 1 and shown >= 600 for natural, shown in sizes), sizes


@pytest.mark.parametrize("stem", PAGES)
def test_every_figure_is_captioned_numbered_and_sharp(book, base_url: str, stem: str) -> None:
    """Issue 44: every figure has a caption with its number, "Fig. 4.1" in chapter 4,
    and on a page outside the numbered chapters counted from "Fig. 1" on that page
    (book/_ext/page_numbers.py; tables too); every figure, a chapter's plots
    (helpers.figure_style) and the pages' own images alike, holds two pixels for each
    CSS pixel shown at 1280 px."""
    found = _layout(book, base_url, stem, 1280).figures  # the visit the layout tests share
    figures, tables = found["figures"], [t for t in found["tables"] if t]
    unnumbered = [f["src"] for f in figures if not f["number"]]
    assert not unnumbered, f"{stem}: figures without a numbered caption: {unnumbered}"
    chapter = re.match(r"notebooks/(\d\d)_", stem)
    prefix = f"{int(chapter[1])}." if chapter else ""
    for kind, numbers in (("Fig.", [f["number"] for f in figures]), ("Table", tables)):
        expected = [f"{kind} {prefix}{n}" for n in range(1, len(numbers) + 1)]
        assert [n.rstrip(" .:") for n in numbers] == expected, (stem, numbers)
    blurred = [f for f in figures if f["natural"] < 2 * f["shown"] - 1]
    assert not blurred, f"{stem}: figures drawn at less than twice their shown size: {blurred}"


def test_intro_numbers_the_chapters(book, base_url: str) -> None:
    """The intro's table of chapters and the prose pages name chapters by their number
    (Sphinx's {numref}, from _toc.yml's numbering), as the sidebar does."""
    context, _, _ = book
    sidebar = page_report(book, f"{base_url}{PAGES[0]}.html").sidebar
    page = context.new_page()
    try:
        page.goto(f"{base_url}{PAGES[0]}.html", wait_until="load")
        rows = page.eval_on_selector_all(
            "article table tbody tr td:first-child a",
            "links => links.map(a => [a.href.split('#')[0], a.textContent.trim()])")
    finally:
        page.close()
    chapters = [f"{base_url}{stem}.html" for stem in PAGES if stem in NUMBERS]
    numbered = {url: text for url, text in rows if url in chapters}
    assert list(numbered) == chapters, rows
    for url, text in numbered.items():
        assert text == sidebar[url], f"intro's table says {text!r}, the sidebar {sidebar[url]!r}"


FILE_SUFFIXES = ("py", "md", "json", "yaml", "yml", "txt", "sh", "ipynb", "csv", "toml",
                 "cfg", "ckpt", "onnx", "mindir", "log")
"""Endings of file names that linkify's fuzzy matching takes for top-level domains."""


def file_names_linked_as_addresses(html: str) -> list[str]:
    """Links whose address is a bare file name made into a web address ("train.py"
    became http://train.py): written-out addresses only have a path or a known host."""
    pattern = rf'href="https?://([\w-]+\.(?:{"|".join(FILE_SUFFIXES)}))/?"'
    return re.findall(pattern, html)


def test_no_file_name_is_linked_as_a_web_address(built_html: Path) -> None:
    """_config.yml turns linkify's fuzzy links off for the pages; a notebook's Markdown
    output is rendered by myst-nb's own GFM parser, which keeps them on, so a file name
    there must be written as code (`train.py`)."""
    found = {}
    for path in sorted(built_html.rglob("*.html")):
        names = file_names_linked_as_addresses(path.read_text(errors="replace"))
        if names:
            found[path.relative_to(built_html).as_posix()] = names
    assert not found, f"file names linked as web addresses: {found}"
    assert file_names_linked_as_addresses('<a href="http://train.py">train.py</a>')
    assert not file_names_linked_as_addresses('<a href="https://www.mindspore.cn/">x</a>')


def test_sidebar_lists_exactly_the_toc(book, base_url: str) -> None:
    sidebar = page_report(book, f"{base_url}{PAGES[0]}.html").sidebar
    listed = [urllib.parse.urlsplit(url).path.lstrip("/").removesuffix(".html") for url in sidebar]
    assert listed == PAGES


class _ProseParser(HTMLParser):
    """Words of the <p> paragraphs inside the article (not code, not navigation)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = {"article": 0, "p": 0, "code": 0, "pre": 0}
        self.words: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.depth:
            self.depth[tag] += 1

    def handle_endtag(self, tag):
        if tag in self.depth and self.depth[tag]:
            self.depth[tag] -= 1

    def handle_data(self, data):
        d = self.depth
        if d["article"] and d["p"] and not d["code"] and not d["pre"]:
            self.words += re.findall(r"[a-z]+", data.lower())


def prose_words(path: Path) -> Counter:
    parser = _ProseParser()
    parser.feed(path.read_text())
    return Counter(parser.words)


def test_search_finds_a_chapter(book, base_url: str, built_html: Path) -> None:
    """Pick a word that only the first chapter's prose uses; search must return that chapter."""
    context, _, _ = book
    chapters = [stem for stem in PAGES if stem.startswith("notebooks/")] or PAGES[1:]
    chapter = chapters[0]
    elsewhere = Counter()
    for stem in PAGES:
        if stem != chapter:
            elsewhere |= prose_words(built_html / f"{stem}.html")
    candidates = sorted((word for word in prose_words(built_html / f"{chapter}.html")
                         if len(word) >= 7 and word not in elsewhere), key=lambda w: (-len(w), w))
    assert candidates, f"{chapter}: no word of 7+ letters used only there"
    word = candidates[0]
    hits = browser_check.search(context, base_url, word)
    assert f"{base_url}{chapter}.html" in hits, f"search for {word!r} returned {hits}"


def test_screenshots(book, base_url: str) -> None:
    """The introduction and the training chapter (its top, and its first figure if it has one)."""
    context, _, _ = book
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    training = f"notebooks/{prerequisites.chapter('04_train_eval').stem}"  # renamed: CI fails
    written = []
    for name, stem in {"intro": PAGES[0], Path(training).name: training}.items():
        page = context.new_page()
        try:
            page.goto(f"{base_url}{stem}.html", wait_until="load")
            page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
            written.append(SCREENSHOTS / f"{name}.png")
            figure = page.locator("article .cell_output img").first
            if stem == training and figure.count():
                figure.scroll_into_view_if_needed()
                page.screenshot(path=str(SCREENSHOTS / f"{name}-figure.png"))
                written.append(SCREENSHOTS / f"{name}-figure.png")
        finally:
            page.close()
    for path in written:
        assert path.stat().st_size > 10_000, f"{path.name} looks empty"


# --------------------------------------------------------------------------- the checker can fail

def png(width: int = 4, height: int = 3) -> bytes:
    """A valid grey RGB PNG, written by hand (no imaging library needed)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\x80" * (3 * width) for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


NO_ICON = '<link rel="icon" href="data:,">'

SYNTHETIC = {
    "good.html": '<h1>Good</h1><p><a href="target.html#here">ok</a> <img src="pixel.png"></p>',
    "target.html": '<h1>Target</h1><p id="here">anchor</p>',
    "broken_link.html": '<h1>Broken link</h1><a href="missing.html">gone</a>',
    "broken_anchor.html": '<h1>Broken anchor</h1><a href="target.html#nowhere">gone</a>',
    "missing_image.html": '<h1>Missing image</h1><img src="missing.png">',
    "console_error.html": '<h1>Console error</h1><script>console.error("boom")</script>',
    "exception.html": '<h1>Exception</h1><script>throw new Error("kaboom")</script>',
}


@pytest.fixture(scope="module")
def synthetic_site(tmp_path_factory, browser):
    root = tmp_path_factory.mktemp("synthetic-site")
    for name, body in SYNTHETIC.items():
        # No favicon.ico to fetch: Chromium's request for it 404s now and then.
        (root / name).write_text(f"<!doctype html><html><head><title>{name}</title>{NO_ICON}</head>"
                                 f"<body>{body}</body></html>")
    (root / "pixel.png").write_bytes(png())
    with browser_check.serve_directory(root) as url:
        yield browser, url


# Pages built like the book's (an <article>, a theme-style scroll box around each
# table, `pre` that scrolls) at 1280 px: one too-wide element each, and one that fits.
_LONG = "x = 1  # " + "a long comment " * 12
# One unbreakable word (a dotted path in inline code) wider than the article.
_WIDE_CELL = "<code>" + ".".join(["msresnet.training.checkpoints.load_strict"] * 3) + "</code>"
CLIPPING = {
    "fits.html": (f"<pre>{'x' * 60}</pre>"
                  "<div class='scroll'><table><tr><td>short</td></tr></table></div>"),
    "wide_code.html": f"<div class='cell_input'><div class='highlight'><pre>{_LONG}</pre></div>"
                      "</div>",
    "wide_output.html": f"<div class='cell_output'><div class='output'><pre>{_LONG}</pre></div>"
                        "</div>",
    "wide_table.html": ("<div class='scroll'><table><tr><th>PyTorch</th><th>note</th></tr>"
                        f"<tr><td>torch.nn.Module</td><td>{_WIDE_CELL}"
                        "</td></tr></table></div>"),
}
_CLIPPING_STYLE = ("body{margin:0} article{width:700px;margin-left:300px}"
                   "pre{overflow:auto;font:14px monospace} .scroll{overflow-x:auto}")


def clipping_page(body: str, css: str = "") -> str:
    return (f"<!doctype html><html><head><title>t</title>{NO_ICON}<style>{_CLIPPING_STYLE}</style>"
            f"<style>{css}</style></head><body><article><h2>Section</h2>{body}</article>"
            "</body></html>")


@pytest.mark.parametrize(("page", "selector"), [
    ("fits.html", None),
    ("wide_code.html", "div.highlight pre"),
    ("wide_output.html", ".cell_output pre"),
    ("wide_table.html", "table"),
])
def test_clipping_detected(browser, tmp_path: Path, page: str, selector: str | None) -> None:
    (tmp_path / page).write_text(clipping_page(CLIPPING[page]))
    with browser_check.serve_directory(tmp_path) as url:
        clipped = browser_check.clipped_sideways(browser, url + page, width=1280)
    if selector is None:
        assert clipped == []
    else:
        assert any(line.startswith(f"{selector} under \"Section\"") for line in clipped), clipped


def test_book_css_wraps_a_wide_table(browser, tmp_path: Path) -> None:
    """_static/book.css makes the too-wide table above fit (its cells wrap), nothing else."""
    css = (REPO / "_static" / "book.css").read_text()
    body = CLIPPING["wide_table.html"]
    (tmp_path / "plain.html").write_text(clipping_page(body))
    (tmp_path / "styled.html").write_text(clipping_page(body, css))
    with browser_check.serve_directory(tmp_path) as url:
        assert browser_check.clipped_sideways(browser, url + "plain.html"), "table fits unstyled"
        assert browser_check.clipped_sideways(browser, url + "styled.html") == []


# A page built like the book's at a phone's width: running text with a long inline
# code span (Sphinx keeps each word of it in a span.pre that does not wrap), a long
# heading word, and a code block wider than the window inside a box that scrolls.
_PHONE_BODY = ("<h2>msresnet.training.checkpoints.load_strict_checkpoint_for_resume</h2>"
               "<p>Call <code class='docutils literal notranslate'><span class='pre'>"
               "mindspore.dataset.config.set_num_parallel_workers(n)</span></code> first.</p>"
               f"<div class='highlight'><pre>{_LONG}</pre></div>")
_PHONE_STYLE = ("body{margin:0} article{padding:0 16px} pre{overflow:auto} "
                "span.pre{white-space:nowrap}")


def test_page_overflow_detected_and_book_css_fixes_it(browser, tmp_path: Path) -> None:
    """At 390 px the page scrolls sideways because of the inline code and the heading;
    _static/book.css makes them break, and the code block keeps scrolling in its box."""
    css = (REPO / "_static" / "book.css").read_text()
    for name, extra in (("plain.html", ""), ("styled.html", css)):
        (tmp_path / name).write_text(
            f"<!doctype html><html><head><title>t</title>{NO_ICON}"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<style>{_PHONE_STYLE}</style><style>{extra}</style></head>"
            f"<body><article>{_PHONE_BODY}</article></body></html>")
    with browser_check.serve_directory(tmp_path) as url:
        scroll, found = browser_check.page_overflow(browser, url + "plain.html", width=PHONE)
        assert scroll > 0 and any("span.pre" in f or "code" in f for f in found), found
        assert any(f.startswith("h2") for f in found), found
        assert browser_check.page_overflow(browser, url + "styled.html", width=PHONE) == (0, [])
        clipped = browser_check.clipped_sideways(browser, url + "styled.html", width=PHONE)
        assert any(line.startswith("div.highlight pre") for line in clipped), clipped


def test_a_table_that_scrolls_silently_is_found_and_the_books_cue_marks_it(
        browser, tmp_path: Path) -> None:
    """A table box that scrolls at 390 px with nothing to say so is reported; with
    _static/book.css and _static/table-scroll.js its right edge fades until the box is
    scrolled to its end (the results page's per-epoch table, issue 44)."""
    css = (REPO / "_static" / "book.css").read_text()
    script = (REPO / "_static" / "table-scroll.js").read_text()
    cells = "".join(f"<td>{n:,}&nbsp;images&nbsp;per&nbsp;second</td>" for n in range(9))
    table = (f"<div class='pst-scrollable-table-container'><table>"
             f"<caption>Every epoch's figures</caption><tr>{cells}</tr></table></div>")
    for name, extra, js in (("plain.html", "", ""), ("styled.html", css, script)):
        (tmp_path / name).write_text(
            f"<!doctype html><html><head><title>t</title>{NO_ICON}"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<style>{_PHONE_STYLE} .pst-scrollable-table-container{{overflow-x:auto}}</style>"
            f"<style>{extra}</style></head>"
            f"<body><article>{table}</article><script>{js}</script></body></html>")
    with browser_check.serve_directory(tmp_path) as url:
        plain = browser_check.page_layout(browser, url + "plain.html", PHONE).cut
        styled = browser_check.page_layout(browser, url + "styled.html", PHONE).cut
    assert [line.split(":")[0] for line in plain] == ["table scrolls without a cue"], plain
    assert styled == [], styled


@pytest.mark.parametrize(("page", "expected"), [
    ("good.html", None),
    ("broken_link.html", "broken link"),
    ("broken_anchor.html", "no #nowhere"),
    ("missing_image.html", "image did not load"),
    ("console_error.html", "console error: boom"),
    ("exception.html", "JavaScript exception"),
])
def test_checker_detects(synthetic_site, page: str, expected: str | None) -> None:
    context, url = synthetic_site
    report = browser_check.check_page(context, url + page, browser_check.LinkChecker(url))
    if expected is None:
        assert report.problems == [] and report.links_checked == 1 and report.images_checked == 1
    else:
        assert any(expected in problem for problem in report.problems), report.problems


def test_broken_reference_fails_the_build(tmp_path: Path) -> None:
    """-W -n turns an unresolved {ref} or {doc} into a failed build (and a good one passes).
    Both broken roles go in one build: --keep-going reports every warning before it fails."""
    (tmp_path / "_config.yml").write_text(
        "title: t\nexecute:\n  execute_notebooks: 'off'\nonly_build_toc_files: true\n"
        "sphinx:\n  config:\n    nitpicky: true\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: other\n")
    (tmp_path / "other.md").write_text("(other-label)=\n# Other\n\nText.\n")

    def build(intro: str) -> subprocess.CompletedProcess:
        (tmp_path / "intro.md").write_text(f"# Intro\n\n{intro}\n")
        return subprocess.run([str(JUPYTER_BOOK), "build", str(tmp_path), "-W", "-n", "--keep-going"],
                              capture_output=True, text=True, timeout=600)

    good = build("See {ref}`other-label` and {doc}`other`.")
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-3000:]
    bad = build("See {ref}`no-such-label` and {doc}`no-such-page`.")
    said = bad.stdout + bad.stderr
    assert bad.returncode != 0 and "no-such-label" in said and "no-such-page" in said, said[-3000:]
