"""Nothing the chapters printed or wrote under strict nbval holds a credential.

``make nbval`` runs every chapter with recognisable fake credentials for chapter
6's local object store (``LOCAL_S3_ACCESS_KEY_ID`` / ``LOCAL_S3_SECRET_ACCESS_KEY``,
which ``msresnet.testing.local_s3`` takes when set) and keeps every executed cell's outputs
in ``runs/nbval-outputs`` (the root ``conftest.py``), then runs this test: the two
values must appear in no output of any chapter, ignored cells included, and in no
text file chapter 6's job wrote. This is the one run of chapter 6 in the test
command, so the check costs nothing extra.
"""

from __future__ import annotations

import os

from msresnet.chapters.notebook import NBVAL_OUTPUTS_VARIABLE
from msresnet.paths import REPO_ROOT
from msresnet.chapters.reproduce import chapters
from prerequisites import after_nbval, nbval_chapters

NBVAL_OUTPUTS = REPO_ROOT / "runs" / "nbval-outputs"
CREDENTIALS = ("LOCAL_S3_ACCESS_KEY_ID", "LOCAL_S3_SECRET_ACCESS_KEY")
JOB_FOLDER = REPO_ROOT / "runs" / "06_obs_staging"
TEXT_SUFFIXES = (".log", ".json", ".yaml", ".csv", ".txt")
pytestmark = after_nbval(NBVAL_OUTPUTS_VARIABLE, NBVAL_OUTPUTS)


def test_the_run_kept_every_chapter_and_had_the_fake_credentials():
    kept = {path.stem for path in NBVAL_OUTPUTS.glob("*.jsonl") if path.stat().st_size}
    assert nbval_chapters({chapter.name for chapter in chapters()}) <= kept
    for name in CREDENTIALS:
        assert len(os.environ.get(name, "")) >= 16, f"make nbval sets {name}"


def test_no_output_and_no_job_file_holds_a_credential():
    texts = {path.name: path.read_text(encoding="utf-8")
             for path in NBVAL_OUTPUTS.glob("*.jsonl")}
    for path in JOB_FOLDER.rglob("*"):
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            texts[str(path.relative_to(REPO_ROOT))] = path.read_text(errors="replace")
    if "06_obs_staging" in nbval_chapters({"06_obs_staging"}):
        assert any(name.endswith("job.log") for name in texts), "chapter 6's job wrote no log"
    for variable in CREDENTIALS:
        secret = os.environ[variable]
        for name, text in texts.items():
            assert secret not in text, f"{variable} leaked into {name}"
