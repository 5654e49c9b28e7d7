"""Draw the GPU page's figure from the records: the fast recipe's validation accuracy
per epoch and its test score (``h200-2026-12-04/train_fast_run/``), with the results
page's own drawing (:func:`msresnet.chapters.results_figures.accuracy_figure`).

    python results/gpu/draw.py        # from the repository root; writes figures/

``tests/test_gpu_records.py`` redraws it and compares the bytes with the committed file.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN = HERE / "h200-2026-12-04" / "train_fast_run"
FIGURE = HERE / "figures" / "fast-accuracy.png"


def draw(run: Path = RUN, out: Path = FIGURE) -> tuple[Path, str]:
    """Write the figure; return its path and caption."""
    from msresnet.chapters.results_figures import DPI, accuracy_figure

    history = json.loads((run / "history.json").read_text())
    test = json.loads((run / "test.json").read_text())
    held = test["selected_on"]["images"]
    figure, caption = accuracy_figure(history, test, f"{held:,} held-out training images")
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=DPI, metadata={"Software": None})
    return out, caption


if __name__ == "__main__":
    path, caption = draw(Path(sys.argv[1]) if len(sys.argv) > 1 else RUN)
    print(f"wrote {path}\n{caption}")
