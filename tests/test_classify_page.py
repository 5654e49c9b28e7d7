"""The in-browser classifier page (book/classify.md) in headless Chromium.

The page loads the committed INT8 model (web/classify/model.int8.onnx) with
onnxruntime-web and classifies the sample test images it shows. The page's
probabilities must be onnxruntime's in Python for the same files (same model, the
same input bit for bit through msresnet.data.images), a click on a sample must show
that top-1 in the page, marked right or wrong against the sample's true class (which
labels its thumbnail), and no console error or failed request may occur. The
model's provenance (model.json) must describe the committed file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import browser_check
from msresnet.data.cifar10 import CLASSES
from msresnet.deploy.export import input_record, sha256
from msresnet.data.images import model_input, read_image
from msresnet.deploy.predict import softmax

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
WEB = REPO / "web" / "classify"
# WebAssembly SIMD and onnxruntime's native kernels need not round every INT8
# requantization alike. Measured largest probability difference over the samples:
# below 1e-6 with the model of 2026-12-01, 2.5e-4 with the one rebuilt on 2026-12-02
# from the Nesterov checkpoint, 2.5e-4 with its weights stored as uint8 (2026-12-03,
# onnxruntime-web's WebAssembly in Node against the native kernels of an AVX2 CPU:
# the same top-1 on all 10,000 test images, probabilities within 1.1e-2). The top-1
# class must agree on every sample (asserted separately); the probabilities, which
# the page shows to 0.01 %, within 0.1 point.
TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def metadata() -> dict:
    return json.loads((WEB / "model.json").read_text())


@pytest.fixture(scope="module")
def samples() -> list[dict]:
    return json.loads((WEB / "samples.json").read_text())


def test_model_json_describes_the_committed_model(metadata, samples):
    model = WEB / metadata["model"]
    assert model.stat().st_size == metadata["bytes"]
    assert sha256(model) == metadata["sha256"]
    assert metadata["input"] == input_record(32)  # what export writes, the page reads
    assert metadata["command"].startswith("msresnet export ")
    assert 0 < metadata["best"]["top1"] <= 1
    if metadata["best"]["evaluated_on"]["split"] == "valid":  # chosen on held-out images:
        assert metadata["test"]["images"] == 10_000       # the page quotes the test score
        assert 0 < metadata["test"]["top1"] <= metadata["test"]["top5"] <= 1
    assert sorted(s["label"] for s in samples) == sorted(CLASSES)
    assert all((WEB / s["file"]).is_file() for s in samples)


def test_model_json_records_the_served_int8_score_apart_from_the_checkpoints(metadata):
    """model.json's "test" is the checkpoint's score before quantization; "int8_test" is
    the served INT8 model's own, on the same 10,000 images, with the CPU and runtime it
    was measured with (tests/test_predict.py measures it again)."""
    served, checkpoint = metadata["int8_test"], metadata["test"]
    assert served["of"] == metadata["model"]
    assert checkpoint["of"].startswith(metadata["checkpoint"])
    assert served["images"] == checkpoint["images"] == 10_000
    assert served["sha256"] == checkpoint["sha256"]
    assert 0 < served["top1"] <= served["top5"] <= 1
    assert served["runtime"] == f"onnxruntime {ort.__version__} (CPU)"
    assert re.fullmatch(r".+ \((AVX-512 VNNI|AVX-VNNI|AVX2, no VNNI|no AVX2)\)", served["cpu"])
    assert metadata["quantization"]["weights"].endswith("stored as uint8 with zero point 128 "
                                                        "(U8U8)")


def test_the_page_quotes_the_served_int8_score(metadata):
    """book/classify.md's figures are model.json's, and the page's script quotes the INT8
    one (int8_test) as the model's score, the checkpoint's as the score before."""
    page = (REPO / "book" / "classify.md").read_text()
    text = " ".join(page.split())
    served, checkpoint = metadata["int8_test"], metadata["test"]
    assert f"(the run's `test.json`: {100 * checkpoint['top1']:.2f} %)" in text
    assert (f"the CPU it was measured on ({100 * served['top1']:.2f} %, top-5 "
            f"{100 * served['top5']:.2f} %" in text)
    assert f"{100 * served['top1']:.2f} % top-1 on the 10,000 test images" in text
    per_class = served["per_class_top1"]
    assert list(per_class) == list(CLASSES)
    for name, accuracy in per_class.items():  # the page's table is model.json's
        assert f"| {name} | {100 * accuracy:.1f} % |" in page, name
    script = (WEB / "classify.js").read_text()
    assert "const served = meta.int8_test;" in script
    assert "top-1 ${percent(served.top1)} on" in script


def test_the_page_says_how_many_samples_the_model_gets_right(metadata, samples):
    """"it classifies N of the 10 samples above correctly", and the chance of N or
    fewer at the served top-1, are what onnxruntime and the binomial law give."""
    from math import comb

    text = " ".join((REPO / "book" / "classify.md").read_text().split())
    session = ort.InferenceSession(str(WEB / metadata["model"]),
                                   providers=["CPUExecutionProvider"])
    right = sum(CLASSES[int(session.run(None, {"x": model_input(read_image(WEB / s["file"]))
                                               [None].astype(np.float32)})[0].argmax())]
                == s["label"] for s in samples)
    assert f"it classifies {right} of the {len(samples)} samples above correctly" in text
    p, n = metadata["int8_test"]["top1"], len(samples)
    assert round(n * p) in (6, 7) and "six or seven right on average" in text
    at_most = sum(comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(right + 1))
    assert 0.05 < at_most < 0.15 and "about one time in ten" in text


def test_make_browser_model_rebuilds_from_the_committed_models_run(metadata):
    """``make browser-model``'s default run is the one the committed model was
    exported from, so rebuilding it does not silently switch checkpoints."""
    default = re.search(r"^REFERENCE_RUN \?= (\S+)$", (REPO / "Makefile").read_text(), re.M)
    assert default, "Makefile: no 'REFERENCE_RUN ?= ...' line"
    assert metadata["command"] == (f"msresnet export {default.group(1)}/best.ckpt "
                                   "--browser --out web/classify")


def python_probabilities(metadata: dict, file: Path) -> np.ndarray:
    session = ort.InferenceSession(str(WEB / metadata["model"]), providers=["CPUExecutionProvider"])
    inputs = model_input(read_image(file), 32)[None]
    return softmax(session.run(None, {"x": inputs})[0].astype(np.float64))[0]


def test_page_predicts_what_python_predicts(book, base_url, metadata, samples):
    context, _, _ = book
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"JavaScript exception: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    try:
        page.goto(base_url + "book/classify.html", wait_until="load")
        ready = page.evaluate("() => window.msresnetClassifier.ready.then(m => m.sha256)")
        assert ready == metadata["sha256"]
        page.wait_for_selector("#msresnet-classifier[data-state=ready]", timeout=60_000)
        buttons = page.locator(".msresnet-samples button")
        assert buttons.count() == len(samples)
        labels = page.locator(".msresnet-samples .msresnet-label").all_inner_texts()
        assert [text.strip() for text in labels] == [s["label"] for s in samples]
        worst = 0.0
        right = 0
        for index, sample in enumerate(samples):
            url = base_url + "classify/" + sample["file"]
            in_page = np.array(page.evaluate("url => window.msresnetClassifier.classifyUrl(url)",
                                             url))
            in_python = python_probabilities(metadata, WEB / sample["file"])
            assert in_page.shape == (10,)
            assert in_page.argmax() == in_python.argmax(), sample
            worst = max(worst, float(np.abs(in_page - in_python).max()))
            # and the page's own display: a click shows that top-1 first (the previous
            # sample's result is cleared first, so the wait sees this click's)
            page.evaluate("() => { document.querySelector('.msresnet-result').replaceChildren();"
                          " delete document.querySelector('#msresnet-classifier').dataset.top1; }")
            buttons.nth(index).click()
            page.wait_for_function(
                "want => document.querySelector('#msresnet-classifier').dataset.top1 === want"
                " && document.querySelectorAll('.msresnet-top5 tbody tr').length === 5",
                arg=CLASSES[int(in_python.argmax())], timeout=30_000)
            # the result is marked right or wrong against the sample's true class
            expected = "right" if CLASSES[int(in_python.argmax())] == sample["label"] else "wrong"
            right += expected == "right"
            root = page.locator("#msresnet-classifier")
            assert root.get_attribute("data-verdict") == expected, sample
            verdict = page.locator(".msresnet-verdict").inner_text()
            assert verdict.startswith(expected.capitalize() + ":") and sample["label"] in verdict
            assert page.locator(".msresnet-verdict").get_attribute("class").split()[-1] == expected
            button = buttons.nth(index)
            assert button.get_attribute("data-verdict") == expected
            mark = button.locator(".msresnet-mark")
            assert mark.inner_text().strip() == {"right": "\u2713", "wrong": "\u2717"}[expected]
            assert mark.get_attribute("title") == f"the model is {expected}"
            rank = 1 + [CLASSES[i] for i in np.argsort(-in_python)].index(sample["label"])
            if expected == "wrong":
                ordinal = ["second", "third", "fourth", "fifth"]
                where = (f"its {ordinal[rank - 2]} answer" if rank <= 5
                         else "not among its first five answers")
                assert verdict.endswith(f"the label, {sample['label']}, is {where}."), verdict
            bold = page.locator(".msresnet-top5 tr.msresnet-true td")
            if rank <= 5:
                assert bold.first.inner_text() == sample["label"]
            else:
                assert bold.count() == 0
        text = " ".join((REPO / "book" / "classify.md").read_text().split())
        assert f"it classifies {right} of the {len(samples)} samples above correctly" in text
        # a reader's own picture has no label: no verdict
        page.locator("input[type=file]").set_input_files(str(WEB / samples[0]["file"]))
        page.wait_for_function("() => document.querySelector('.msresnet-shown')"
                               " && document.querySelector('.msresnet-shown').alt"
                               ".startsWith('your picture')", timeout=30_000)
        assert page.locator("#msresnet-classifier").get_attribute("data-verdict") is None
        assert page.locator(".msresnet-verdict").count() == 0
        assert worst < TOLERANCE, worst
        print(f"largest probability difference page vs Python over {len(samples)} images: "
              f"{worst:.1e}")
    finally:
        page.close()
    assert not problems, problems


def test_page_reports_a_model_that_does_not_load(browser, tmp_path):
    """A missing model is shown on the page and logged, not silently ignored."""
    site = tmp_path / "site"
    (site / "classify" / "ort").mkdir(parents=True)
    for file in (WEB / "ort").iterdir():
        (site / "classify" / "ort" / file.name).symlink_to(file)
    (site / "classify" / "classify.js").symlink_to(WEB / "classify.js")
    meta = json.loads((WEB / "model.json").read_text())
    meta["model"] = "missing.onnx"
    (site / "classify" / "model.json").write_text(json.dumps(meta))
    (site / "page.html").write_text(
        '<div id="msresnet-classifier"><p class="msresnet-status"></p>'
        '<div class="msresnet-samples"></div><div class="msresnet-drop"><input type="file">'
        '</div><div class="msresnet-result"></div></div>'
        '<script src="classify/ort/ort.wasm.min.js"></script>'
        '<script src="classify/classify.js"></script>')
    with browser_check.serve_directory(site) as url:
        page = browser.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        try:
            page.goto(url + "page.html", wait_until="load")
            page.wait_for_selector("#msresnet-classifier[data-state=error]", timeout=60_000)
            status = page.locator(".msresnet-status").inner_text()
        finally:
            page.close()
    assert status.startswith("The model could not be loaded")
    assert errors
