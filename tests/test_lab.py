"""Running the chapters interactively: ``make lab`` in a real browser, and ``make restore``.

``test_lab_runs_a_chapter_on_the_book_kernel`` starts the server exactly as ``make
lab`` does (``msresnet lab``, the same entry point and options), on
127.0.0.1 with token authentication and a free port picked by the server, and drives
JupyterLab in headless Chromium (Debian's ``/usr/bin/chromium``, as the book's
browser test) like a reader: it opens chapter 2, checks that the registered kernel
"ResNet50 book (MindSpore 2.10)" is the one selected, clears the stored outputs,
runs the first cells (imports, the ``parameters`` cell and the ParameterGuard config
cell) with Shift+Enter and checks that their output is the stored one, with no error.
Then it stops the launcher with SIGTERM and checks that nothing is left behind: no
server or kernel process, no runtime file, no new file in ``notebooks/`` (no
``.ipynb_checkpoints``) and the chapter unchanged (it was not saved).

The reader's own Jupyter state (settings, workspaces, runtime files, checkpoints) is
pointed at a temporary folder, with autosave off there, so the test changes nothing
of the user's and the chapter is not rewritten while the test runs.

``test_restore_brings_back_the_stored_outputs`` runs a chapter in a temporary git
repository (the outputs it stores change), runs the documented ``make restore``
there and checks that the chapter is byte-identical to the committed one and passes
strict nbval again. The real ``notebooks/`` is never modified.

``test_book_page_downloads_the_chapter_notebook`` opens the built chapter page and
saves its ``.ipynb`` from the download menu, with the server sending ``.ipynb`` as
``application/json`` (as many static hosts do: without ``_static/ipynb-download.js``
the browser then shows the JSON in a tab and nothing is saved).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import psutil
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

import browser_check
from msresnet.chapters import lab

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
CHAPTER = "02_config_lr.ipynb"  # the quick chapter: no MindSpore operator, no data
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with",
         str(REPO / "tests" / "nbval_sanitize.cfg")]

# Generous limits for a loaded 2-core machine; every wait is on a condition.
SERVER_START_S = 300
PAGE_S = 180_000        # ms, Playwright
CELLS_S = 600_000       # ms: the imports cell imports MindSpore in a cold kernel
STOP_S = 120


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _first_cells(path: Path) -> list[nbformat.NotebookNode]:
    """The code cells up to the one after the ``parameters`` cell (the guard's config cell)."""
    code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    tagged = [i for i, c in enumerate(code) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: expected one cell tagged 'parameters'"
    return code[:tagged[0] + 2]


def _stored_text(cell: nbformat.NotebookNode) -> str:
    """What the cell's stored outputs show as text (streams and text/plain)."""
    parts = []
    for output in cell.outputs:
        if output.output_type == "stream":
            parts.append(output.text)
        elif "text/plain" in output.get("data", {}):
            parts.append(output.data["text/plain"])
    return "".join(parts).strip()


@pytest.fixture
def jupyter_home(tmp_path, monkeypatch):
    """A private Jupyter user state: runtime, config, settings (autosave off), cache."""
    home = tmp_path / "jupyter-home"
    paths = {
        "JUPYTER_RUNTIME_DIR": home / "runtime",
        "JUPYTER_CONFIG_DIR": home / "config",
        "JUPYTER_DATA_DIR": home / "data",
        "JUPYTERLAB_WORKSPACES_DIR": home / "workspaces",
        "JUPYTERLAB_SETTINGS_DIR": home / "settings",
        "XDG_CACHE_HOME": home / "cache",
    }
    for name, path in paths.items():
        path.mkdir(parents=True)
        monkeypatch.setenv(name, str(path))
    monkeypatch.delenv("JUPYTER_TOKEN", raising=False)
    settings = paths["JUPYTERLAB_SETTINGS_DIR"] / "@jupyterlab"
    (settings / "docmanager-extension").mkdir(parents=True)
    (settings / "docmanager-extension" / "plugin.jupyterlab-settings").write_text(
        json.dumps({"autosave": False}))
    (settings / "apputils-extension").mkdir(parents=True)
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    return paths


def _start_lab(log: Path) -> tuple[subprocess.Popen, lab.Server, str]:
    """``msresnet lab --port 0``: the make lab entry point on a free port."""
    out = log.open("w")
    process = subprocess.Popen([sys.executable, "-m", "msresnet", "lab", "--port", "0"],
                               cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        text = log.read_text()
        match = re.search(r"^    (http://127\.0\.0\.1:(\d+)/lab\?token=(\w+))$", text, re.MULTILINE)
        if match:
            url, port, token = match.group(1), int(match.group(2)), match.group(3)
            server_pid = next(child.pid for child in psutil.Process(process.pid).children())
            runtime_file = lab.runtime_dir() / f"jpserver-{server_pid}.json"
            return process, lab.Server(server_pid, port, token, runtime_file), url
        if process.poll() is not None:
            pytest.fail(f"make lab's launcher exited with {process.returncode}:\n{text}")
        time.sleep(0.5)
    process.terminate()
    pytest.fail(f"no URL printed within {SERVER_START_S} s:\n{log.read_text()}")


def _stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=STOP_S)


@pytest.mark.browser
@pytest.mark.timeout(1500)
def test_lab_runs_a_chapter_on_the_book_kernel(tmp_path, jupyter_home, playwright):
    chapter = NOTEBOOKS / CHAPTER
    before_files = {p.name for p in NOTEBOOKS.iterdir()}
    before_digest = _digest(chapter)
    cells = _first_cells(chapter)
    log = tmp_path / "lab.log"
    process, server, url = _start_lab(log)
    spawned: list[psutil.Process] = []
    try:
        text = log.read_text()
        assert f"ssh -N -L {server.port}:127.0.0.1:{server.port} " in text
        assert "make restore" in text
        assert "token=" in url and server.token  # token authentication is on
        # Without the token the API refuses (the URL's token is what logs a reader in).
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/sessions", timeout=30)
        assert refused.value.code == 403

        with contextlib.nullcontext(playwright):  # the session's (conftest.py)
            context = browser_check.launch(playwright, tmp_path / "chromium-profile")
            try:
                page = context.new_page()
                page.goto(url.replace("/lab?", f"/lab/tree/{CHAPTER}?"), timeout=PAGE_S)
                page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-CodeCell",
                                       timeout=PAGE_S)
                # The kernel the reader sees selected, and that it comes up.
                kernel_name = page.locator(".jp-NotebookPanel-toolbar .jp-Toolbar-kernelName")
                try:
                    page.wait_for_function(
                        """name => { const e = document.querySelector('.jp-NotebookPanel-toolbar '
                             + '.jp-Toolbar-kernelName');
                             return e && e.textContent.trim() === name; }""",
                        arg=lab.display_name(), timeout=PAGE_S)
                except PlaywrightTimeout:
                    pytest.fail(f"the notebook shows kernel {kernel_name.inner_text()!r}, "
                                f"not {lab.display_name()!r}")
                page.wait_for_function(
                    """() => { const e = document.querySelector('.jp-NotebookPanel-toolbar '
                         + '.jp-Notebook-ExecutionIndicator');
                         return e && e.getAttribute('data-status') === 'idle'; }""",
                    timeout=CELLS_S)
                sessions = json.loads(_get(server, "/api/sessions"))
                assert [(s["path"], s["kernel"]["name"]) for s in sessions] == \
                    [(CHAPTER, lab.KERNEL_NAME)]
                spawned = psutil.Process(process.pid).children(recursive=True)
                kernels = [p for p in spawned if "ipykernel_launcher" in p.cmdline()]
                assert len(kernels) == 1 and kernels[0].cmdline()[0] == sys.executable

                # Clear the stored outputs, then run the first cells as a reader does.
                page.click(".lm-MenuBar-itemLabel:text-is('Edit')")
                page.click(".lm-Menu-itemLabel:text-is('Clear Outputs of All Cells')")
                code = page.locator(".jp-Notebook .jp-CodeCell")
                page.wait_for_function(
                    """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')]
                         .every(c => !c.querySelector('.jp-OutputArea-output'))""",
                    timeout=PAGE_S)
                code.nth(0).locator(".jp-InputPrompt").click()
                for _ in cells:
                    page.keyboard.press("Shift+Enter")
                last = len(cells) - 1
                page.wait_for_function(
                    """n => { const c = document.querySelectorAll('.jp-Notebook .jp-CodeCell')[n];
                         return c && c.querySelector('.jp-InputPrompt').textContent.trim()
                                     === `[${n + 1}]:`; }""",
                    arg=last, timeout=CELLS_S)
                for index, cell in enumerate(cells):
                    shown = code.nth(index)
                    assert shown.locator(".jp-InputPrompt").inner_text().strip() == \
                        f"[{index + 1}]:"
                    errors = shown.locator(
                        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
                    assert errors.count() == 0, errors.all_inner_texts()
                    outputs = shown.locator(".jp-OutputArea-output")
                    live = "".join(outputs.all_inner_texts()).strip()
                    assert live == _stored_text(cell), f"cell {index + 1}"
                assert "profile " in code.nth(last).inner_text()
                page.screenshot(path=str(tmp_path / "lab.png"))
            finally:
                context.close()
    finally:
        if not spawned and process.poll() is None:
            spawned = psutil.Process(process.pid).children(recursive=True)
        code_ = _stop(process) if process.poll() is None else process.returncode

    assert code_ == 0, log.read_text()
    _, alive = psutil.wait_procs(spawned, timeout=STOP_S)
    assert not alive, f"left running: {[p.cmdline() for p in alive]}"
    assert not server.runtime_file.exists()
    leftovers = [p.name for p in lab.runtime_dir().iterdir() if p.name.startswith(
        ("jpserver-", "kernel-"))]
    assert not leftovers, leftovers
    assert {p.name for p in NOTEBOOKS.iterdir()} == before_files
    assert _digest(chapter) == before_digest, f"{CHAPTER} was rewritten"


def _serve_ipynb_as_json(root: Path):
    """Serve ``root`` on loopback with .ipynb as ``application/json``, as many hosts do.

    A browser shows such a file instead of saving it unless the link asks for a
    download, which is what ``_static/ipynb-download.js`` adds.
    """
    return browser_check.serve_directory(root, {".ipynb": "application/json"})


@pytest.mark.browser
@pytest.mark.timeout(900)
def test_book_page_downloads_the_chapter_notebook(tmp_path, playwright):
    """The rendered chapter's download menu saves its .ipynb (stored outputs included)."""
    html = REPO / "_build" / "html"
    if not (html / "notebooks" / CHAPTER.replace(".ipynb", ".html")).exists():
        subprocess.run([str(Path(sys.executable).with_name("jupyter-book")), "build", ".",
                        "-W", "-n", "--keep-going"], cwd=REPO, check=True)
    with _serve_ipynb_as_json(html) as base:
        context = browser_check.launch(playwright, tmp_path / "chromium-profile")
        try:
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{base}notebooks/{CHAPTER.replace('.ipynb', '.html')}", timeout=PAGE_S)
            page.click(".dropdown-download-buttons button.dropdown-toggle")
            entry = page.locator(".dropdown-download-buttons a.btn-download-source-button")
            assert entry.inner_text().strip() == ".ipynb"
            with page.expect_download(timeout=PAGE_S) as download_info:
                entry.click()
            download = download_info.value
            assert download.suggested_filename == CHAPTER
            saved = tmp_path / CHAPTER
            download.save_as(saved)
            assert not errors, errors
        finally:
            context.close()
    notebook = nbformat.read(saved, as_version=4)
    built_from = nbformat.read(html / "_sources" / "notebooks" / CHAPTER, as_version=4)
    assert notebook == built_from
    assert any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")


def _get(server: lab.Server, path: str) -> str:
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}",
                                     headers={"Authorization": f"token {server.token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read().decode()


def _reader_checkout(root: Path) -> Path:
    """A git repository with this checkout's package, profiles and chapter 2, committed.

    The chapter finds the repository from the package (``msresnet.paths.REPO_ROOT``),
    so the copy brings its own ``msresnet/`` and is put first on ``PYTHONPATH``.
    """
    repo = root / "checkout"
    for folder in ("msresnet", "configs"):
        shutil.copytree(REPO / folder, repo / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "notebooks").mkdir()
    shutil.copy2(NOTEBOOKS / CHAPTER, repo / "notebooks" / CHAPTER)
    if (REPO / "data").exists():
        (repo / "data").symlink_to(REPO / "data")
    (repo / "notes.md").write_text("a reader's own file\n")
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    for command in (["init", "-q"], ["add", "msresnet", "configs", "notebooks", "notes.md"],
                    ["commit", "-q", "-m", "chapters"]):
        subprocess.run(git + command, cwd=repo, check=True)
    return repo


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_restore_brings_back_the_stored_outputs(tmp_path, monkeypatch):
    from nbclient import NotebookClient

    repo = _reader_checkout(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(repo))  # the kernels and nbval import the copy
    path = repo / "notebooks" / CHAPTER
    where = subprocess.run(  # from the folder the chapter's kernel runs in
        [sys.executable, "-c", "import msresnet.paths as p; print(p.REPO_ROOT)"],
        cwd=path.parent, check=True, capture_output=True, text=True).stdout.strip()
    assert Path(where) == repo
    committed = _digest(path)

    # Run the chapter on the book's kernel as a reader would, and save what it printed.
    lab.register_kernel()
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=1200, kernel_name=lab.KERNEL_NAME,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(notebook, path)
    (repo / "notes.md").write_text("a reader's own file, edited\n")
    assert _digest(path) != committed, "running the chapter should rewrite its outputs"

    restore = subprocess.run(["make", "-f", str(REPO / "Makefile"), "restore"], cwd=repo,
                             capture_output=True, text=True)
    assert restore.returncode == 0, restore.stdout + restore.stderr
    assert _digest(path) == committed
    assert (repo / "notes.md").read_text().endswith("edited\n"), "restore touched notes.md"
    status = subprocess.run(["git", "status", "--porcelain", "notebooks"], cwd=repo,
                            check=True, capture_output=True, text=True).stdout
    assert status == ""

    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NBVAL, str(path)],
        cwd=repo, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout)


@pytest.mark.parametrize("ip", ["999.1.1.1", "192.0.2.1"])
def test_an_address_it_cannot_listen_on_is_one_line_before_anything_starts(ip, monkeypatch,
                                                                           capsys):
    """Issue 45: ``msresnet lab --ip 999.1.1.1`` registered the kernel, started JupyterLab
    and printed its three tracebacks (exit 1). 192.0.2.1 (TEST-NET-1) is an address of
    no machine here."""
    from msresnet import cli

    def started(*args, **kwargs):
        raise AssertionError("the kernel was registered or the server started")

    monkeypatch.setattr(lab, "register_kernel", started)
    monkeypatch.setattr(lab.subprocess, "Popen", started)
    assert cli.main(["lab", "--ip", ip]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"msresnet lab: error: --ip: {ip!r} is not an address this machine can listen on"), err
    lab.check_ip("127.0.0.1")  # and the default passes
