"""Draw the GPU page's figure from the records: the fast recipe for 75 epochs
in MindSpore (``h100-fast75/``) and in its PyTorch twin
(``h100-2026-12-06/twin_fast75.json``), validation top-1 per epoch and each test top-1.

    python results/gpu/draw.py        # from the repository root; writes figures/

``tests/test_gpu_records.py`` redraws it and compares the bytes with the committed file.
"""

import csv
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
MINDSPORE_75 = HERE / "h100-fast75"
TWIN_75 = HERE / "h100-2026-12-06" / "twin_fast75.json"
TWIN_FIGURE = HERE / "figures" / "twin-accuracy.png"


def draw_twin(out: Path = TWIN_FIGURE) -> tuple[Path, str]:
    """Write the MindSpore-against-PyTorch figure; return its path and caption."""
    from matplotlib.figure import Figure

    from msresnet.chapters.results_figures import DPI, SHARP, SIZE

    with (MINDSPORE_75 / "history.csv").open() as handle:
        ours = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(handle)]
    mindspore_test = json.loads((MINDSPORE_75 / "test.json").read_text())["chosen"]
    twin = json.loads(TWIN_75.read_text())
    figure = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    axes = figure.subplots()
    axes.set_title("One recipe, two frameworks, one H100")
    axes.set_xlabel("epoch")
    axes.set_ylabel("validation top-1 (%)")
    axes.grid(alpha=0.3)
    axes.plot([r["epoch"] for r in ours], [100 * r["val_top1"] for r in ours], "-",
              label="MindSpore 2.10")
    axes.plot([r["epoch"] for r in twin["history"]],
              [100 * r["val_top1"] for r in twin["history"]], "--", label="PyTorch 2.11 twin")
    marks = ((mindspore_test["epoch"], mindspore_test["top1"], "MindSpore test top-1", "C0",
              "*", 15), (twin["chosen_epoch"], twin["test_chosen"]["top1"], "twin test top-1",
                         "C1", "x", 9))  # a cross over a star: both show where they meet
    for epoch, top1, label, colour, marker, size in marks:
        axes.plot([epoch], [100 * top1], marker, markersize=size, color=colour,
                  markeredgewidth=2, label=label)
    axes.set_ylim(30, 100)
    axes.legend(loc="lower right")
    caption = (
        f"The fast recipe for {len(ours)} epochs on one H100 in MindSpore and in its "
        f"PyTorch twin (measured, drawn from `h100-fast75/` and "
        f"`h100-2026-12-06/` by `results/gpu/draw.py`). Lines: top-1 on the 5,000 held-out "
        f"training images after each epoch. Star and cross: test top-1 on the 10,000 test "
        f"images of each run's chosen checkpoint, scored once: {100 * mindspore_test['top1']:.2f} % "
        f"and {100 * twin['test_chosen']['top1']:.2f} %.")
    out.parent.mkdir(parents=True, exist_ok=True)
    # twice the pixels of the page's width (704 px shown, 1408 drawn): sharp on a 2x screen
    figure.savefig(out, dpi=SHARP * DPI, metadata={"Software": None})
    return out, caption


if __name__ == "__main__":
    path, caption = draw_twin()
    print(f"wrote {path}\n{caption}")
