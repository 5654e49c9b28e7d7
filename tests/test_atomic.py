"""msresnet.atomic: a file is the old complete one or the new one, never half of either.

No MindSpore here: the module is standard library only, and these tests run in a
second or so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from msresnet import atomic


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_writes_bytes_text_and_json(tmp_path):
    assert atomic.write_bytes(tmp_path / "a.bin", b"\x00\x01") == tmp_path / "a.bin"
    atomic.write_text(tmp_path / "b.txt", "héllo\n")
    atomic.write_json(tmp_path / "c.json", {"b": 1, "a": [1, 2]}, sort_keys=True)
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "b.txt").read_text(encoding="utf-8") == "héllo\n"
    text = (tmp_path / "c.json").read_text()
    assert text.endswith("}\n") and text.index('"a"') < text.index('"b"')
    assert json.loads(text) == {"a": [1, 2], "b": 1}
    assert listing(tmp_path) == ["a.bin", "b.txt", "c.json"]  # no temporary left


def test_replaces_an_existing_file(tmp_path):
    target = tmp_path / "best.json"
    atomic.write_json(target, {"top1": 0.5})
    atomic.write_json(target, {"top1": 0.9}, indent=None)
    assert target.read_text() == '{"top1": 0.9}\n'


@pytest.mark.parametrize("error", [OSError("disk full"), KeyboardInterrupt()])
def test_a_writer_that_raises_leaves_the_old_file_and_no_temporary(tmp_path, error):
    target = tmp_path / "model.ckpt"
    target.write_bytes(b"old, complete")
    with pytest.raises(type(error)):
        with atomic.atomic_path(target) as partial:
            assert partial.parent == tmp_path and partial != target
            partial.write_bytes(b"half a ")  # the writer dies mid-file
            raise error
    assert target.read_bytes() == b"old, complete"
    assert listing(tmp_path) == ["model.ckpt"]


def test_a_writer_that_raises_before_creating_anything_is_fine(tmp_path):
    with pytest.raises(ValueError):
        with atomic.atomic_path(tmp_path / "x.npz"):
            raise ValueError("nothing written")
    assert listing(tmp_path) == []


def test_unserialisable_json_touches_nothing(tmp_path):
    target = tmp_path / "run.json"
    target.write_text('{"ok": true}\n')
    with pytest.raises(TypeError):
        atomic.write_json(target, {"bad": object()})
    assert target.read_text() == '{"ok": true}\n'
    assert listing(tmp_path) == ["run.json"]
    atomic.write_json(target, {"obj": Path("p")}, default=str)  # default= serialises it
    assert json.loads(target.read_text()) == {"obj": "p"}


def test_failed_rename_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch):
    target = tmp_path / "history.csv"
    target.write_text("old\n")

    def no_rename(src, dst):
        raise PermissionError("read-only folder")

    monkeypatch.setattr(atomic.os, "replace", no_rename)
    with pytest.raises(PermissionError):
        atomic.write_text(target, "new\n")
    assert target.read_text() == "old\n"
    assert listing(tmp_path) == ["history.csv"]


def test_data_is_synced_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync folder" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync file")
        real_fsync(fd)

    def replace(src, dst):
        events.append(f"replace {Path(src).name} -> {Path(dst).name}")
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "replace", replace)
    atomic.write_bytes(tmp_path / "m.ckpt", b"data")
    assert events == ["fsync file", "replace m.part.ckpt -> m.ckpt", "fsync folder"]


def test_temporary_names_keep_the_suffix_and_can_be_unique(tmp_path):
    assert atomic.partial_path(tmp_path / "resnet50-3_8.ckpt").name == "resnet50-3_8.part.ckpt"
    first, second = (atomic.partial_path(tmp_path / "done.json", unique=True) for _ in range(2))
    assert first != second
    assert first.suffix == ".json" and first.name.startswith("done.part-")
    atomic.write_json(tmp_path / "done.json", {"n": 1}, unique=True)
    assert listing(tmp_path) == ["done.json"]


def test_copy_file(tmp_path):
    source = tmp_path / "resnet50-2_8.ckpt"
    source.write_bytes(b"weights")
    target = tmp_path / "best.ckpt"
    target.write_bytes(b"older weights")
    atomic.copy_file(source, target)
    assert target.read_bytes() == b"weights"
    with pytest.raises(FileNotFoundError):
        atomic.copy_file(tmp_path / "missing.ckpt", target)
    assert target.read_bytes() == b"weights"
    assert listing(tmp_path) == ["best.ckpt", "resnet50-2_8.ckpt"]


def test_write_csv_keeps_the_fields_in_order_and_leaves_missing_values_empty(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text("older\n")
    rows = [{"epoch": 1, "loss": 2.5, "extra": "ignored"}, {"loss": None, "epoch": 2}]
    assert atomic.write_csv(path, ("epoch", "loss", "top1"), rows) == path
    assert path.read_bytes() == b"epoch,loss,top1\r\n1,2.5,\r\n2,,\r\n"  # csv line ends
    assert listing(tmp_path) == ["history.csv"]
