"""Tests of msresnet.data.prepare (safe extraction, prepare_dataset, its marker and
lock) and of the command ``msresnet prepare`` (msresnet.data.prepare).

Fake datasets (tests/fake_cifar10.py) are a few records per file, built in tmp_path,
so everything but the two tests on the real local mirror runs in well under a second.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

from msresnet.cli import main as msresnet_main
from msresnet.data import cifar10
from msresnet.data import prepare as preparation
from msresnet.data import prepare as prepare_cli
from msresnet.data.cifar10 import FOLDER_NAME, DatasetError, validate
from msresnet.data.prepare import MARKER_NAME, prepare_dataset
from msresnet.paths import LOCAL_MIRROR_MD5 as MIRROR_MD5
from msresnet.paths import LOCAL_MIRROR_VARIABLE, REPO_ROOT, local_mirror

from fake_cifar10 import (COUNTS, contents, fake_files, leftovers, write_archive,
                          write_folder)
from fake_cifar10 import any_record_count, archive, root  # noqa: F401 - fixtures
from prerequisites import needs_mirror, require_mirror  # skipped without it; CI=true: failed


def cli_main(argv):
    return msresnet_main(["prepare", *argv])


# ---------------------------------------------------------------------------- prepare: sources

def test_prepare_extracts_a_local_archive(archive: Path, root: Path) -> None:
    report = prepare_dataset(archive, root, progress=False)
    folder = root / FOLDER_NAME
    assert report.folder == folder and report.action == "extracted"
    assert validate(folder) == COUNTS == report.records
    actual = hashlib.md5(archive.read_bytes()).hexdigest()
    assert report.checksum == f"md5 {actual} computed; check skipped (local archive, no md5 given)"
    assert (folder / "readme.html").is_file()
    marker = json.loads((folder / MARKER_NAME).read_text())
    assert marker["source"] == str(archive) and marker["md5"] == actual
    assert leftovers(root) == []
    probe = root / "probe"
    probe.mkdir()  # the folder gets the usual permissions (umask), not mkdtemp's private 0700
    assert folder.stat().st_mode & 0o777 == probe.stat().st_mode & 0o777


def test_provenance_reads_the_marker_of_the_folder(archive: Path, root: Path) -> None:
    from msresnet.data.prepare import provenance
    report = prepare_dataset(archive, root, progress=False)
    for given in (root, root / FOLDER_NAME):  # data_dir or the folder itself
        record = provenance(given)
        assert record["source"] == str(archive) and record["checksum"] == report.checksum
        assert record["folder"] == str(root / FOLDER_NAME) and record["prepared_at"]
    (root / FOLDER_NAME / MARKER_NAME).unlink()
    bare = provenance(root)
    assert bare["source"] is None and "not prepared by msresnet.data.prepare" in bare["note"]
    (root / FOLDER_NAME / MARKER_NAME).write_text("{not json")
    with pytest.raises(DatasetError, match=f"{MARKER_NAME}: unreadable"):
        provenance(root)


def test_prepare_verifies_a_given_md5(archive: Path, root: Path) -> None:
    actual = hashlib.md5(archive.read_bytes()).hexdigest()
    report = prepare_dataset(archive, root, md5=actual.upper(), progress=False)
    assert report.checksum == f"md5 {actual} verified (given by caller)"


def test_prepare_wrong_md5_names_expected_and_actual(archive: Path, root: Path) -> None:
    actual = hashlib.md5(archive.read_bytes()).hexdigest()
    with pytest.raises(DatasetError) as info:
        prepare_dataset(archive, root, md5="0123456789abcdef0123456789abcdef", progress=False)
    assert str(info.value) == (f"{archive}: MD5 mismatch: expected"
                               f" 0123456789abcdef0123456789abcdef, got {actual}")
    assert archive.exists()  # the user's own file is never deleted
    assert not (root / FOLDER_NAME).exists()


def test_prepare_copies_an_extracted_folder(tmp_path: Path, root: Path) -> None:
    source = write_folder(tmp_path / "elsewhere" / FOLDER_NAME)
    for given in (source.parent, source):  # the folder that contains it, or the folder itself
        report = prepare_dataset(given, root, progress=False)
        assert report.action == "copied from folder" and report.records == COUNTS
        copied = (root / FOLDER_NAME / "data_batch_5.bin").read_bytes()
        assert copied == (source / "data_batch_5.bin").read_bytes()
        (root / FOLDER_NAME / MARKER_NAME).unlink()
        for path in (root / FOLDER_NAME).iterdir():
            path.unlink()
        (root / FOLDER_NAME).rmdir()


def test_prepare_broken_source_folder_names_it(tmp_path: Path, root: Path) -> None:
    source = write_folder(tmp_path / "elsewhere" / FOLDER_NAME)
    (source / "test_batch.bin").unlink()
    with pytest.raises(DatasetError, match=rf"^missing test_batch\.bin in {source}$"):
        prepare_dataset(source, root, progress=False)
    assert not (root / FOLDER_NAME).exists() and leftovers(root) == []


def test_prepare_missing_source(tmp_path: Path, root: Path) -> None:
    with pytest.raises(DatasetError, match="source not found: .*nope.tar.gz"):
        prepare_dataset(tmp_path / "nope.tar.gz", root, progress=False)


def test_truncated_archive_is_reported(archive: Path, root: Path) -> None:
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError,
                       match=r"cifar-10-binary\.tar\.gz: not a readable \.tar\.gz archive"):
        prepare_dataset(archive, root, progress=False)
    assert not (root / FOLDER_NAME).exists() and leftovers(root) == []


def test_archive_missing_a_member_is_reported(tmp_path: Path, root: Path) -> None:
    files = fake_files()
    del files["data_batch_4.bin"]
    archive = write_archive(tmp_path / "a.tar.gz", files)
    with pytest.raises(DatasetError,
                       match=r"^a\.tar\.gz: missing data_batch_4\.bin in the archive$"):
        prepare_dataset(archive, root, progress=False)
    assert not (root / FOLDER_NAME).exists() and leftovers(root) == []


# ---------------------------------------------------------------------------- extraction safety

def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


@pytest.mark.parametrize(("member", "message"), [
    (_member(f"{FOLDER_NAME}/../evil"),
     r"refusing unsafe member path 'cifar-10-batches-bin/\.\./evil'"),
    (_member("../evil"), r"refusing unsafe member path '\.\./evil'"),
    (_member("/tmp/evil"), r"refusing unsafe member path '/tmp/evil'"),
    (_member(f"{FOLDER_NAME}/data_batch_1.bin", tarfile.SYMTYPE, "/etc/passwd"),
     r"refusing link member 'cifar-10-batches-bin/data_batch_1\.bin' -> '/etc/passwd'"),
    (_member(f"{FOLDER_NAME}/evil", tarfile.LNKTYPE, "/etc/passwd"), "refusing link member"),
    (_member(f"{FOLDER_NAME}/evil", tarfile.CHRTYPE), "refusing special member"),
    (_member(f"{FOLDER_NAME}/evil", tarfile.FIFOTYPE), "refusing special member"),
    (_member(f"{FOLDER_NAME}/evil.sh"), r"unexpected member 'cifar-10-batches-bin/evil\.sh'"),
    (_member(f"{FOLDER_NAME}/sub", tarfile.DIRTYPE),
     "unexpected member 'cifar-10-batches-bin/sub'"),
])
def test_unsafe_members_are_refused_and_nothing_is_left(tmp_path: Path, root: Path,
                                                        member: tarfile.TarInfo,
                                                        message: str) -> None:
    archive = write_archive(tmp_path / "evil.tar.gz", extra=[member])
    with tarfile.open(archive) as tar:  # the crafted name really is in the archive
        assert member.name in tar.getnames()
    with pytest.raises(DatasetError, match=rf"^evil\.tar\.gz: {message}"):
        prepare_dataset(archive, root, progress=False)
    assert not (root / FOLDER_NAME).exists() and leftovers(root) == []
    assert not list(tmp_path.rglob("evil")) and not Path("/tmp/evil").exists()


def test_duplicate_member_is_refused(tmp_path: Path, root: Path) -> None:
    duplicate = _member(f"{FOLDER_NAME}/test_batch.bin")
    archive = write_archive(tmp_path / "dup.tar.gz", extra=[duplicate])
    with pytest.raises(DatasetError, match="appears twice"):
        prepare_dataset(archive, root, progress=False)
    assert not (root / FOLDER_NAME).exists()


# ------------------------------------------------------------------ atomicity, idempotence

def test_crash_mid_extraction_leaves_nothing(archive: Path, root: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    real_copy = preparation._copy_member
    calls: list[Path] = []

    def crash_on_third(source, target: Path) -> None:  # type: ignore[no-untyped-def]
        calls.append(target)
        if len(calls) == 3:
            raise OSError("simulated crash: disk full")
        real_copy(source, target)

    monkeypatch.setattr(preparation, "_copy_member", crash_on_third)
    with pytest.raises(OSError, match="simulated crash"):
        prepare_dataset(archive, root, progress=False)
    assert len(calls) == 3
    assert not (root / FOLDER_NAME).exists() and leftovers(root) == []


@pytest.mark.parametrize("failure", ["corrupt archive", "interrupted copy", "wrong record count"])
def test_a_failed_prepare_leaves_the_root_as_it_was(archive: Path, root: Path, failure: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """No lock file, partial folder or marker: the root holds what it held before."""
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    if failure == "corrupt archive":
        data = archive.read_bytes()
        archive.write_bytes(data[: len(data) // 2])
        expected: type[BaseException] = DatasetError
    elif failure == "interrupted copy":
        real_copy, calls = preparation._copy_member, []

        def interrupt_on_fourth(source, target: Path) -> None:  # type: ignore[no-untyped-def]
            calls.append(target)
            if len(calls) == 4:
                assert leftovers(root) and (root / preparation.LOCK_NAME).exists()  # mid-way
                raise KeyboardInterrupt
            real_copy(source, target)

        monkeypatch.setattr(preparation, "_copy_member", interrupt_on_fourth)
        expected = KeyboardInterrupt
    else:
        monkeypatch.setattr(cifar10, "RECORDS_PER_FILE", 10_000)
        expected = DatasetError
    with pytest.raises(expected):
        prepare_dataset(archive, root, progress=False)
    assert contents(root) == ["notes.txt"]
    assert archive.exists()  # the reader's own archive is never deleted


def test_a_successful_prepare_leaves_only_the_dataset(archive: Path, root: Path) -> None:
    prepare_dataset(archive, root, progress=False)
    assert contents(root) == [FOLDER_NAME]  # the lock file is gone too
    assert prepare_dataset(archive, root, progress=False).action == "already prepared"
    assert contents(root) == [FOLDER_NAME]


def test_an_unusable_download_is_removed(archive: Path, root: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Reused as it is (no MD5 for an unknown URL), a broken download would fail every rerun."""
    url = "http://127.0.0.1:9/cifar-10-binary.tar.gz"

    def fake_fetch(source: str, into: Path, md5: str | None,  # type: ignore[no-untyped-def]
                   progress: bool):
        target = into / "cifar-10-binary.tar.gz"
        target.write_bytes(archive.read_bytes()[:1000])
        return target, "md5 computed; check skipped", "0" * 32

    monkeypatch.setattr(preparation, "_fetch", fake_fetch)
    with pytest.raises(DatasetError, match=r"not a readable \.tar\.gz archive .* \(downloaded from"
                                           rf" {url}; removed .*, the next run downloads it"
                                           r" again\)$"):
        prepare_dataset(url, root, progress=False)
    assert contents(root) == []


def test_the_lock_excludes_while_its_file_comes_and_goes(tmp_path: Path) -> None:
    """Each holder deletes the lock file; a waiter that locked the deleted file locks again."""
    active, most, errors = [0], [0], []
    guard = threading.Lock()

    def worker() -> None:
        try:
            for _ in range(30):
                with preparation._lock(tmp_path):
                    with guard:
                        active[0] += 1
                        most[0] = max(most[0], active[0])
                    time.sleep(0.0005)
                    with guard:
                        active[0] -= 1
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and most[0] == 1
    assert contents(tmp_path) == []


def test_leftover_from_a_killed_run_is_cleaned(archive: Path, root: Path) -> None:
    killed = root / f".{FOLDER_NAME}.partial-999-deadbeef"
    write_folder(killed)
    (killed / "data_batch_1.bin").write_bytes(b"half")
    prepare_dataset(archive, root, progress=False)
    assert leftovers(root) == []
    assert validate(root / FOLDER_NAME) == COUNTS


def test_second_call_does_nothing(archive: Path, root: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    folder = prepare_dataset(archive, root, progress=False).folder
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the second call re-did the work")

    for name in ("extract_archive", "validate", "md5sum", "_lock"):
        monkeypatch.setattr(preparation, name, must_not_run)  # _lock too: read-only mounts work
    for name in ("validate", "check_bin"):
        monkeypatch.setattr(cifar10, name, must_not_run)
    report = prepare_dataset(archive, root, progress=False)
    assert report.action == "already prepared" and report.records == COUNTS
    assert "[recorded when prepared," in report.checksum
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_ready_folder_damaged_later_is_not_trusted(archive: Path, root: Path) -> None:
    folder = prepare_dataset(archive, root, progress=False).folder
    path = folder / "data_batch_2.bin"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DatasetError,
                       match=r"^data_batch_2\.bin: .* \(truncated\?\) \(the folder .* remove it"):
        prepare_dataset(archive, root, progress=False)
    assert path.exists()  # reported, not deleted


def test_folder_extracted_by_hand_is_accepted_and_marked(root: Path, archive: Path) -> None:
    folder = write_folder(root / FOLDER_NAME)
    report = prepare_dataset(archive, root, progress=False)
    assert report.action == "validated existing folder" and report.records == COUNTS
    assert json.loads((folder / MARKER_NAME).read_text())["source"] == "existing folder"
    assert prepare_dataset(archive, root, progress=False).action == "already prepared"


def test_concurrent_callers_extract_once(archive: Path, root: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    real_extract = preparation.extract_archive
    extractions: list[Path] = []

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        extractions.append(args[0])
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(preparation, "extract_archive", counting)
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(
        prepare_dataset(archive, root, progress=False).action)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["already prepared"] * 3 + ["extracted"]
    assert len(extractions) == 1


# ---------------------------------------------------------------------------- command line

def test_cli_error_is_one_clear_line(archive: Path, root: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MSRESNET_DEBUG", raising=False)
    status = cli_main(["--source", str(archive), "--root", str(root), "--md5", "0" * 32, "--quiet"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(f"msresnet prepare: error: {archive}: MD5 mismatch:"
                          f" expected {'0' * 32}, got ")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert contents(root) == []  # the root it made for this call is gone again


def test_cli_interrupted_says_so_and_leaves_nothing(archive: Path, root: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupt(source, target: Path) -> None:  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(preparation, "_copy_member", interrupt)
    assert cli_main(["--source", str(archive), "--root", str(root), "--quiet"]) == 130
    assert "interrupted; nothing half-done is left" in capsys.readouterr().err
    assert contents(root) == []


def test_cli_source_auto_takes_the_local_mirror_when_it_exists(
        archive: Path, root: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    monkeypatch.setenv(LOCAL_MIRROR_VARIABLE, str(archive))
    monkeypatch.setattr(prepare_cli, "LOCAL_MIRROR_MD5", md5)
    assert cli_main(["--source", "auto", "--root", str(root), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"--source auto: the local mirror {archive} ({LOCAL_MIRROR_VARIABLE});"
                        " using it")
    assert lines[1] == f"source:   {os.path.relpath(archive)}"
    assert lines[2] == f"checksum: md5 {md5} verified (given by caller)"
    # a wrong mirror checksum is caught: auto passes the mirror's MD5 on
    monkeypatch.setattr(prepare_cli, "LOCAL_MIRROR_MD5", "0" * 32)
    assert cli_main(["--source", "auto", "--root", str(root / "again"), "--quiet"]) == 2


@pytest.mark.parametrize("value", [None, "", "  "])
def test_source_auto_without_the_variable_is_the_official_archive(
        value: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if value is None:
        monkeypatch.delenv(LOCAL_MIRROR_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(LOCAL_MIRROR_VARIABLE, value)
    assert local_mirror() is None
    source, md5, note = prepare_cli.resolve_source("auto", None)
    assert (source, md5) == (cifar10.OFFICIAL_URL, None)  # prepare_dataset checks the official MD5
    assert note == (f"--source auto: {LOCAL_MIRROR_VARIABLE} is not set (no local mirror);"
                    " using the official archive")
    assert prepare_cli.resolve_source("official", None) == (cifar10.OFFICIAL_URL, None, None)
    assert prepare_cli.resolve_source("x.tar.gz", "ab") == ("x.tar.gz", "ab", None)


def test_source_auto_refuses_a_variable_naming_a_missing_file(
        tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Bad input is refused in one line naming the variable and the path, exit status 2:
    no download of another archive in its place."""
    absent = tmp_path / "absent.tar.gz"
    monkeypatch.setenv(LOCAL_MIRROR_VARIABLE, str(absent))
    monkeypatch.delenv("MSRESNET_DEBUG", raising=False)
    assert cli_main(["--source", "auto", "--root", str(root), "--quiet"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"msresnet prepare: error: --source auto: {LOCAL_MIRROR_VARIABLE}={absent}: no such file")
    assert not root.exists()
    monkeypatch.setenv(LOCAL_MIRROR_VARIABLE, str(tmp_path))  # a folder is not the archive
    with pytest.raises(DatasetError, match=f"{LOCAL_MIRROR_VARIABLE}={tmp_path}: no such file"):
        prepare_cli.resolve_source("auto", None)


def test_the_local_mirror_is_named_in_one_place() -> None:
    """The Makefile names the mirror's location and exports it as MSRESNET_LOCAL_MIRROR;
    the library names no location (only the mirror's MD5), and the chapters' cells take
    it from msresnet.paths.local_mirror, not a copy (stored outputs may show it: they
    print records)."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    folder = "shared/data"
    assert makefile.count(f"{folder}/cifar-10-binary.tar.gz") == 1 and MIRROR_MD5 not in makefile
    assert f"export {LOCAL_MIRROR_VARIABLE} :=" in makefile
    assert "--source $(CIFAR10_SOURCE)" in makefile and "CIFAR10_SOURCE ?= auto" in makefile
    for module in (REPO_ROOT / "msresnet").rglob("*.py"):
        assert folder not in module.read_text(), f"{module} names the mirror's location"
    chapters = sorted(REPO_ROOT.glob("notebooks/*.ipynb"))
    for path in chapters + [REPO_ROOT / "book" / "troubleshooting.ipynb"]:
        for index, cell in enumerate(json.loads(path.read_text())["cells"]):
            source = "".join(cell["source"])
            assert folder not in source and MIRROR_MD5 not in source, \
                f"{path.name} cell {index} names the local mirror; use msresnet.paths"


@needs_mirror
def test_cli_on_the_local_mirror(tmp_path: Path) -> None:
    mirror = require_mirror()
    command = [sys.executable, "-m", "msresnet", "prepare", "--source", str(mirror),
               "--root", str(tmp_path), "--md5", MIRROR_MD5, "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        f"source:   {mirror}",
        f"checksum: md5 {MIRROR_MD5} verified (given by caller)",
        f"folder:   {tmp_path / FOLDER_NAME} (50000 train + 10000 test records)",
        first.stdout.splitlines()[3],
    ]
    assert first.stdout.splitlines()[3].startswith("action:   extracted in ")
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0 and "action:   already prepared" in second.stdout


@needs_mirror
def test_prepare_on_the_local_mirror(tmp_path: Path) -> None:
    folder = prepare_dataset(require_mirror(), tmp_path, md5=MIRROR_MD5, progress=False).folder
    counts = validate(folder)
    assert cifar10.split_counts(counts) == (50_000, 10_000)
    assert all(count == 10_000 for count in counts.values())
