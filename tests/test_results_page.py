"""The results page: recorded from a reproduce folder, and never out of step with it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from msresnet.chapters import results_page
from msresnet.paths import REPO_ROOT
from msresnet.chapters.results_page import ResultsError, record, render_page, write_page


def _png(width: int, height: int, dpi: int) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, "PNG", dpi=(dpi, dpi))
    return buffer.getvalue()


FAKE_PNG = _png(600, 400, 100)
"""A chapter's figure in the fake runs: a real PNG, drawn at 100 dpi and saved so."""

HISTORY = [
    {"epoch": 1, "step": 10, "lr": 0.01, "train_loss": 2.2, "val_loss": 2.0, "val_top1": 0.25,
     "val_top5": 0.7, "train_seconds": 60.0, "eval_seconds": 5.0, "images_per_second": 70.0},
    {"epoch": 2, "step": 20, "lr": 0.001, "train_loss": 1.7, "val_loss": 1.6, "val_top1": 0.41,
     "val_top5": 0.88, "train_seconds": 58.0, "eval_seconds": 5.0, "images_per_second": 72.0},
]


def fake_run(tmp_path: Path, *, status: str = "ok", sweep_figures: int = 4) -> Path:
    """A reproduce --out folder as chapters 1, 4 and 5 leave it (no checkpoints needed)."""
    run_dir = tmp_path / "run"
    train = run_dir / "train"
    train.mkdir(parents=True)
    (train / "history.json").write_text(json.dumps(HISTORY))
    for name in ("history.csv", "config.yaml", "result.json"):
        (train / name).write_text("x\n")
    (train / "best.json").write_text(json.dumps({"source": "resnet50-2_10.ckpt", "top1": 0.4123,
                                                 "selected_by": "checkpoint sweep"}))
    metrics = {
        "01_dataset": {"train_records": 50000},
        "04_train_eval": {"steps": 20, "train_seconds": 118.0, "eval_seconds": 10.0,
                          "train_images_per_second": 71.0, "eval_images_per_second": 400.0,
                          "best_top1": 0.41},
        "05_checkpoint_sweep": {"best_top1": 0.4123, "best_top5": 0.8811, "best_epoch": 2,
                                "last_top1": 0.4123, "checkpoints": 2,
                                "seconds_per_checkpoint": 30.0},
    }
    figures = {"04_train_eval": 1, "05_checkpoint_sweep": sweep_figures, "01_dataset": 2}
    notebooks = []
    for name, values in metrics.items():
        (run_dir / "metrics").mkdir(exist_ok=True)
        (run_dir / "metrics" / f"{name}.json").write_text(json.dumps(values))
        drawn = []
        for i in range(figures[name]):
            path = run_dir / "figures" / f"{name}-{i + 1}.png"
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(FAKE_PNG)
            drawn.append(f"figures/{path.name}")
        notebooks.append({"name": name, "status": "ok" if name != "05_checkpoint_sweep" else status,
                          "seconds": 12.5, "metrics": values, "figures": drawn,
                          "started": f"2026-11-29T20:0{len(notebooks)}:00",
                          "finished": f"2026-11-29T20:1{len(notebooks)}:00"})
    run = {"profile": "cpu", "command": "msresnet reproduce --profile cpu --only 1,4,5 "
                                        "--out runs/cpu-reference",
           "parameters": {"output_dir": str(train), "train_samples": 320, "eval_samples": None,
                          # the schedule whose last step of each epoch HISTORY records
                          "epoch_size": 2, "batch_size": 32, "lr_schedule": "linear",
                          "lr_init": 0.01, "lr_max": 0.01, "lr_end": 0.0, "warmup_epochs": 1,
                          "amp_level": "O0", "image_size": 32},
           "versions": {"python": "3.11.9", "mindspore": "2.10.0", "numpy": "1.26.4"},
           "device": {"device_target": "CPU", "mode": "graph"},
           "machine": {"cpu_model": "Test CPU", "cpu_count": 2, "platform": "Linux"},
           "git": {"commit": "0123456789abcdef", "dirty": False},
           "started": "2026-11-29T20:00:00", "finished": "2026-11-29T20:40:00", "seconds": 2400.0,
           "notebooks": notebooks}
    (run_dir / "run.json").write_text(json.dumps(run))
    (run_dir / "report.md").write_text("# report\n")
    return run_dir


def test_record_copies_the_records_and_the_page_shows_them(tmp_path):
    run_dir = fake_run(tmp_path)
    dest, page = tmp_path / "results" / "cpu", tmp_path / "book" / "results.md"
    page.parent.mkdir()
    written = record(run_dir, dest)
    assert dest / "run.json" in written and dest / "train" / "history.json" in written
    assert (dest / "figures" / "05_checkpoint_sweep-4.png").read_bytes() == FAKE_PNG
    assert not (dest / "figures" / "01_dataset-1.png").exists(), "only chapters 4 and 5's figures"
    assert not list(dest.rglob("*.ckpt"))

    text = write_page(dest, page).read_text()
    assert "**41.23%**" in text and "(epoch 2; top-5 88.11%)" in text
    assert "| 2 | 20 | 0.00100 | 1.7000 | 1.6000 | 41.00% | 88.00% | 58 | 72.0 |" in text
    assert "Test CPU, 2 cores" in text and "2 epochs x 320 images" in text
    assert "| started / finished (UTC) | 2026-11-29T20:00:00 / 2026-11-29T20:12:00 |" in text
    assert "| whole reproduction | 0.6 min (the chapters' own times) |" in text
    assert "skipped by `--resume`" not in text
    assert "msresnet reproduce --profile cpu --only 1,4,5 --out runs/cpu-reference" in text
    # long commands wrap on the page (_static/book.css) instead of scrolling sideways
    assert "```{code-block} bash\n:class: wrap-lines\nmsresnet reproduce" in text
    figures = re.findall(r"```\{figure\} (\S+)", text)
    assert len(figures) == 5
    for figure in figures:
        assert (page.parent / figure).resolve().is_file(), figure


def test_a_resumed_run_says_which_chapters_came_from_the_earlier_invocation(tmp_path):
    run_dir = fake_run(tmp_path)
    run = json.loads((run_dir / "run.json").read_text())
    run["notebooks"][0]["skipped"] = True
    (run_dir / "run.json").write_text(json.dumps(run))
    dest = tmp_path / "dest"
    record(run_dir, dest)
    assert "Chapters 01_dataset were completed by an earlier invocation" in render_page(
        dest, tmp_path / "results.md")


@pytest.mark.parametrize("broken, message", [
    ({"status": "failed"}, "failed: 05_checkpoint_sweep"),
    ({"sweep_figures": 2}, "05_checkpoint_sweep drew 2 figures, the page expects 4"),
])
def test_an_incomplete_run_is_refused_with_the_reason(tmp_path, broken, message):
    with pytest.raises(ResultsError, match=re.escape(message)):
        record(fake_run(tmp_path, **broken), tmp_path / "dest")


def test_the_command_names_itself_in_its_one_error_line(tmp_path, capsys):
    """Issue 45: results-page printed "error: ..." where every other verb prints
    "msresnet VERB: error: ..."."""
    from msresnet import cli

    folder = tmp_path / "not-a-run"
    code = cli.main(["results-page", str(folder), "--dest", str(tmp_path / "dest"),
                     "--page", str(tmp_path / "results.md"), "--readme", str(tmp_path / "R.md")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"msresnet results-page: error: {folder / 'run.json'}: no run.json"), err
    assert list(tmp_path.iterdir()) == []


def test_the_run_folders_come_from_typed_fields_of_run_json(tmp_path):
    """``out`` and ``train_dir`` (written by reproduce) win over the command text;
    the page's command is quoted for the shell."""
    run_dir = fake_run(tmp_path)
    (run_dir / "train").rename(run_dir / "training")
    run = json.loads((run_dir / "run.json").read_text())
    run.update(out="runs/cpu reference", train_dir="training",
               command="msresnet reproduce --profile cpu --out elsewhere")
    (run_dir / "run.json").write_text(json.dumps(run))
    dest = tmp_path / "dest"
    assert dest / "train" / "history.json" in record(run_dir, dest)
    text = render_page(dest, tmp_path / "results.md")
    assert ("msresnet results-page 'runs/cpu reference' --dest results/cpu "
            "--page book/results.md") in text
    assert "elsewhere --dest" not in text


def test_older_records_without_the_typed_fields_still_render(tmp_path):
    run = {"command": "msresnet reproduce --profile cpu --out=runs/a --resume"}
    assert results_page.out_folder(run) == "runs/a"
    assert results_page.train_folder(run) == "train"
    run["command"] = "msresnet reproduce --profile cpu --out runs/b --resume"
    assert results_page.out_folder(run) == "runs/b"
    with pytest.raises(ResultsError, match="no 'out' field and no --out"):
        results_page.out_folder({"command": "msresnet reproduce --profile cpu"})


def test_the_page_names_the_archive_the_run_read(tmp_path):
    run_dir = fake_run(tmp_path)
    run = json.loads((run_dir / "run.json").read_text())
    run["dataset"] = {"folder": "data/cifar-10-batches-bin", "source": "/mirror/cifar.tar.gz",
                      "md5": "ab" * 16, "checksum": f"md5 {'ab' * 16} verified (given by caller)",
                      "prepared_at": "2026-12-01T19:13:17+0000"}
    (run_dir / "run.json").write_text(json.dumps(run))
    dest = tmp_path / "dest"
    record(run_dir, dest)
    text = render_page(dest, tmp_path / "book" / "results.md")
    assert (f"| CIFAR-10 archive | `/mirror/cifar.tar.gz`, md5 {'ab' * 16} verified "
            "(given by caller) |") in text
    del run["dataset"]
    (dest / "run.json").write_text(json.dumps(run))
    assert "| CIFAR-10 archive | not recorded (this run.json predates the field" in \
        render_page(dest, tmp_path / "book" / "results.md")


def test_a_missing_training_record_is_named(tmp_path):
    run_dir = fake_run(tmp_path)
    (run_dir / "train" / "best.json").unlink()
    with pytest.raises(ResultsError, match=r"train/best\.json: missing"):
        record(run_dir, tmp_path / "dest")


def test_the_committed_results_page_matches_the_committed_run():
    """book/results.md is exactly what the recorded run renders to: no hand edits, no drift."""
    dest, page = REPO_ROOT / "results" / "cpu", REPO_ROOT / "book" / "results.md"
    assert (dest / "run.json").is_file(), "the reference run is not recorded in results/cpu/"
    assert page.read_text() == render_page(dest, page), (
        "book/results.md differs from its records: run msresnet results-page")
    for figure in re.findall(r"```\{figure\} (\S+)", page.read_text()):
        assert (page.parent / figure).resolve().is_file(), figure
    assert "book/results" in (REPO_ROOT / "_toc.yml").read_text()
    assert set(results_page.FIGURES) <= {e["name"] for e in
                                         json.loads((dest / "run.json").read_text())["notebooks"]}


def test_a_run_that_chose_on_held_out_images_reports_the_test_score_of_its_choice(tmp_path):
    run_dir = fake_run(tmp_path)
    run = json.loads((run_dir / "run.json").read_text())
    run["parameters"].update(valid_split=5000, train_samples=None, seed=1)
    for entry in run["notebooks"]:
        if entry["name"] == "05_checkpoint_sweep":
            entry["metrics"].update(test_top1=0.6312, last_test_top1=0.6287)
    (run_dir / "run.json").write_text(json.dumps(run))
    (run_dir / "train" / "test.json").write_text('{"chosen": {}}')
    dest = tmp_path / "dest"
    (dest / "train").mkdir(parents=True)
    record(run_dir, dest)
    assert (dest / "train" / "test.json").read_text() == '{"chosen": {}}'
    text = render_page(dest, tmp_path / "book" / "results.md")
    assert "| test top-1 of the chosen checkpoint (10,000 test images) | **63.12%** (epoch 2) |" in text
    assert "| last checkpoint's test top-1 | 62.87% |" in text
    assert "on 5,000 held-out training images (`valid_split` 5,000, seed 1): 41.23%" in text
    assert "2 epochs x 45,000 images" in text
    # a later run without a held-out split does not keep the earlier run's test.json
    (run_dir / "train" / "test.json").unlink()
    record(run_dir, dest)
    assert not (dest / "train" / "test.json").exists()


def test_the_readme_row_of_the_reference_run_is_generated_from_its_records(tmp_path):
    """The README's reproduction row for the recorded run: generated, never typed."""
    readme = (REPO_ROOT / "README.md").read_text()
    row = results_page.readme_row(REPO_ROOT / "results" / "cpu")
    assert row in readme.split("\n"), (
        "README.md's reference row differs from results/cpu: run msresnet results-page")
    copy = tmp_path / "README.md"
    copy.write_text("intro\n| a | b |\n" + results_page.README_ROW_START + " old |\nend\n")
    results_page.write_readme_row(REPO_ROOT / "results" / "cpu", copy)
    assert copy.read_text() == f"intro\n| a | b |\n{row}\nend\n"
    copy.write_text("no row here\n")
    with pytest.raises(ResultsError, match="expected one line starting with"):
        results_page.write_readme_row(REPO_ROOT / "results" / "cpu", copy)


def test_the_page_draws_its_own_figures_from_the_records(tmp_path):
    """One idea per figure, shown at 704 x 374 px and drawn at twice that (crisp on a
    2x screen), each with a caption from the records; the chapters' three-panel figure
    is no longer shown."""
    from PIL import Image
    run_dir = fake_run(tmp_path)
    dest, page = tmp_path / "results" / "cpu", tmp_path / "book" / "results.md"
    page.parent.mkdir()
    record(run_dir, dest)
    text = write_page(dest, page).read_text()
    figures = re.findall(r"```\{figure\} (\S+)", text)
    assert figures[:3] == [f"../results/cpu/figures/page-{name}.png"
                           for name in ("loss", "accuracy", "learning-rate")]
    assert "04_train_eval-1.png" not in text and "05_checkpoint_sweep-1.png" not in text
    for name in ("loss", "accuracy", "learning-rate"):
        image = Image.open(dest / "figures" / f"page-{name}.png")
        assert image.size == (1408, 748) and round(image.info["dpi"][0]) == 220
    assert text.count(":width: 704px") == 3  # the three drawn here, not the chapters' two
    assert "Learning rate of each of the 20 steps (10 per epoch): the `linear` schedule" in text
    assert ("Accuracy on the 10,000 test images (the run validated on the test set) after "
            "each epoch") in text


def test_a_schedule_that_disagrees_with_the_recorded_rates_is_refused(tmp_path):
    run_dir = fake_run(tmp_path)
    dest = tmp_path / "dest"
    record(run_dir, dest)
    run = json.loads((dest / "run.json").read_text())
    run["parameters"]["lr_end"] = 0.005
    (dest / "run.json").write_text(json.dumps(run))
    with pytest.raises(ResultsError, match="history epoch 2: recorded lr 0.001, the schedule"):
        results_page.draw_figures(dest)
    del run["parameters"]["warmup_epochs"]
    (dest / "run.json").write_text(json.dumps(run))
    with pytest.raises(ResultsError, match="no 'warmup_epochs' to redraw the schedule"):
        results_page.draw_figures(dest)


def test_the_committed_figures_are_what_the_records_draw(tmp_path):
    """results/cpu/figures/page-*.png are redrawn from results/cpu alone, pixel for pixel."""
    import numpy as np
    from PIL import Image
    from msresnet.chapters import results_figures
    dest = REPO_ROOT / "results" / "cpu"
    records = results_page._figure_records(dest, results_page._facts(dest))
    for path in results_figures.draw_all(records, tmp_path):
        committed = np.asarray(Image.open(dest / "figures" / path.name))
        assert np.array_equal(committed, np.asarray(Image.open(path))), path.name


@pytest.mark.parametrize("device, amp, shown", [("CPU", "O0", "float32"), ("CPU", "O3", "float32"),
                                                ("GPU", "O2", "float16 (O2)"),
                                                ("GPU", "O0", "float32")])
def test_the_precision_shown_is_what_training_computed_in(device, amp, shown):
    """The device policy decides first: a CPU run trains in float32 even when its
    profile names an AMP level (training.device)."""
    from msresnet.chapters.results_page import precision

    assert precision({"amp_level": amp}, device) == shown


def test_a_chapter_figure_is_shown_at_the_width_its_notebook_showed_it(tmp_path):
    """A chapter's figure saved at twice its drawing density (``retina``, 200 dpi) is
    shown at half its pixels, as the notebook showed it; one saved at the density it
    was drawn at (or without a density) keeps its own size."""
    from PIL import Image

    for dpi, expected in ((200, "602px"), (199.9996, "602px"), (100, None), (80, None),
                          (None, None)):
        png = tmp_path / f"figure-{dpi}.png"
        Image.new("RGB", (1204, 1038)).save(png, **({"dpi": (dpi, dpi)} if dpi else {}))
        assert results_page.shown_width(png) == expected, dpi


def test_chapter_5_figures_come_from_a_retraining_identical_to_the_reference():
    """results/cpu/redraw/README.md: the page's chapter-5 figures were drawn again, at
    twice their density, from a re-training of the reference run. Every recorded
    number of that re-training but its times equals the reference's, so the
    checkpoint chapter 5 drew from is the reference run's."""
    from PIL import Image

    reference, redraw = REPO_ROOT / "results" / "cpu", REPO_ROOT / "results" / "cpu" / "redraw"

    def without_times(record):
        if isinstance(record, list):
            return [without_times(r) for r in record]
        return {k: v for k, v in record.items() if "seconds" not in k and k != "images_per_second"}

    def read(path):
        return json.loads(path.read_text())

    assert without_times(read(redraw / "train" / "history.json")) == \
        without_times(read(reference / "train" / "history.json"))
    name = "05_checkpoint_sweep.json"
    assert without_times(read(redraw / "metrics" / name)) == \
        without_times(read(reference / "metrics" / name))
    run = read(redraw / "run.json")
    [chapter] = run["notebooks"]
    assert chapter["name"] == "05_checkpoint_sweep" and chapter["status"] == "ok"
    assert run["profile"] == "cpu" and not run["git"]["dirty"]
    assert run["parameters"]["output_dir"] == "runs/cpu-reference-rerun"
    assert [f.removeprefix("figures/") for f in chapter["figures"]] == [
        p.name for p in sorted((reference / "figures").glob("05_checkpoint_sweep-*.png"))]
    for figure in chapter["figures"]:
        with Image.open(reference / figure) as image:
            assert round(image.info["dpi"][0]) == 200, figure  # drawn at 100, saved at 2x
