/*
 * The book's in-browser classifier (book/classify.md): the reference run's best
 * checkpoint, exported to a static INT8 ONNX graph by `msresnet export
 * --browser`, run by onnxruntime-web's WebAssembly backend (pinned in
 * package.json, served from ./ort/, no CDN).
 *
 * A picture becomes the network's input exactly as msresnet/data/images.py does it:
 * transparent pixels on white, the largest centred square, resized to the model's
 * size (no resize for a 32x32 CIFAR-10 image), then (pixel / 255 - mean) / std per channel in float32
 * (Math.fround after every operation), channels first. The class names, mean and std
 * are model.json's (written by msresnet.deploy.export.input_record from
 * msresnet/data/cifar10.py), not a copy kept here. tests/test_classify_page.py
 * checks that the page's probabilities are onnxruntime's in Python for the same
 * files.
 */
(function () {
  "use strict";

  const base = new URL(".", document.currentScript.src).href;
  const SCALE = Math.fround(1 / 255);
  // model.json's input record: class names in output order, per-channel mean and std
  let CLASSES = [], MEAN = [], STD = [];

  ort.env.wasm.wasmPaths = base + "ort/";
  ort.env.wasm.numThreads = 1;  // threads need cross-origin isolation, which a static host lacks

  const metadata = fetch(base + "model.json").then((r) => {
    if (!r.ok) throw new Error(`model.json: HTTP ${r.status}`);
    return r.json();
  }).then((meta) => {
    const input = meta.input || {};
    for (const key of ["classes", "mean", "std"]) {
      if (!Array.isArray(input[key])) throw new Error(`model.json: input has no "${key}" list`);
    }
    CLASSES = input.classes;
    MEAN = input.mean.map(Math.fround);
    STD = input.std.map(Math.fround);
    return meta;
  });
  const session = metadata.then((meta) =>
    ort.InferenceSession.create(base + meta.model, {executionProviders: ["wasm"]}));

  function pixels(source, size) {
    const width = source.naturalWidth || source.width;
    const height = source.naturalHeight || source.height;
    const side = Math.min(width, height);
    const canvas = document.createElement("canvas");
    canvas.width = size;
    canvas.height = size;
    const context = canvas.getContext("2d", {willReadFrequently: true});
    context.fillStyle = "#ffffff";  // transparent pixels on white, as msresnet.data.images does
    context.fillRect(0, 0, size, size);
    context.drawImage(source, Math.floor((width - side) / 2), Math.floor((height - side) / 2),
                      side, side, 0, 0, size, size);
    return context.getImageData(0, 0, size, size).data;  // RGBA, row by row
  }

  function toInput(rgba, size) {
    const plane = size * size;
    const input = new Float32Array(3 * plane);
    for (let i = 0; i < plane; i++) {
      for (let c = 0; c < 3; c++) {
        const scaled = Math.fround(rgba[4 * i + c] * SCALE);
        input[c * plane + i] = Math.fround(Math.fround(scaled - MEAN[c]) / STD[c]);
      }
    }
    return input;
  }

  function softmax(logits) {
    const top = Math.max(...logits);
    const exp = Array.from(logits, (v) => Math.exp(v - top));
    const sum = exp.reduce((a, b) => a + b, 0);
    return exp.map((v) => v / sum);
  }

  async function classify(source) {
    const meta = await metadata;
    const size = meta.input.shape[2];
    const input = new ort.Tensor("float32", toInput(pixels(source, size), size), [1, 3, size, size]);
    const model = await session;
    const output = await model.run({[meta.input.name]: input});
    return softmax(output[model.outputNames[0]].data);
  }

  function loadImage(url) {
    return new Promise((resolve, reject) => {
      const image = new Image();
      image.onload = () => resolve(image);
      image.onerror = () => reject(new Error(`cannot load the picture ${url}`));
      image.src = url;
    });
  }

  // For the book's tests and for readers' consoles: probabilities of a picture URL.
  window.msresnetClassifier = {
    ready: session.then(() => metadata),
    classifyUrl: async (url) => classify(await loadImage(url)),
    get classes() { return CLASSES; },
  };

  // Right or wrong, for a picture whose true class is known (a test image): the model's
  // first answer against the label, and where the label is among its answers.
  function verdict(probabilities, label) {
    const order = probabilities.map((p, i) => [p, i]).sort((a, b) => b[0] - a[0]);
    const rank = order.findIndex(([, i]) => CLASSES[i] === label) + 1;
    const top1 = CLASSES[order[0][1]];
    if (top1 === label) {
      return {right: true, text: `Right: the model's first answer is the label, ${label}.`};
    }
    const ordinal = ["", "first", "second", "third", "fourth", "fifth"];
    const where = rank <= 5 ? `its ${ordinal[rank]} answer` : "not among its first five answers";
    return {right: false,
            text: `Wrong: the model's first answer is ${top1}; the label, ${label}, is ${where}.`};
  }

  function show(root, probabilities, picture, caption, label) {
    const ranked = probabilities.map((p, i) => [p, i]).sort((a, b) => b[0] - a[0]).slice(0, 5);
    const result = root.querySelector(".msresnet-result");
    result.replaceChildren();
    const figure = document.createElement("figure");
    const shown = document.createElement("img");
    shown.src = picture;
    shown.alt = caption;
    shown.className = "msresnet-shown";
    const text = document.createElement("figcaption");
    text.textContent = caption;
    figure.append(shown, text);
    const table = document.createElement("table");
    table.className = "msresnet-top5";
    table.innerHTML = "<thead><tr><th>class</th><th>probability</th></tr></thead>";
    const body = document.createElement("tbody");
    for (const [p, i] of ranked) {
      const row = document.createElement("tr");
      row.dataset.class = CLASSES[i];
      const name = document.createElement("td");
      name.textContent = CLASSES[i];
      const value = document.createElement("td");
      value.textContent = (100 * p).toFixed(2) + " %";
      if (CLASSES[i] === label) row.className = "msresnet-true";
      row.append(name, value);
      body.append(row);
    }
    table.append(body);
    const answer = document.createElement("div");
    answer.append(table);
    if (label) {
      const judged = verdict(probabilities, label);
      const line = document.createElement("p");
      line.className = `msresnet-verdict ${judged.right ? "right" : "wrong"}`;
      line.textContent = judged.text;
      answer.prepend(line);
      root.dataset.verdict = judged.right ? "right" : "wrong";
    } else {
      delete root.dataset.verdict;  // a reader's own picture: no label to judge by
    }
    result.append(figure, answer);
    root.dataset.state = "classified";
    root.dataset.top1 = CLASSES[ranked[0][1]];
    return label ? root.dataset.verdict : null;
  }

  async function start(root) {
    const status = root.querySelector(".msresnet-status");
    try {
      const meta = await window.msresnetClassifier.ready;
      const best = meta.best || {};
      // The INT8 model's own test score, as served (export.int8_test), and the checkpoint's:
      // the chosen checkpoint's test score (a run that chose on held-out images), else
      // best.json's own score, which was then measured on test images.
      const served = meta.int8_test;
      if (!served) throw new Error("model.json records no int8_test score");
      const before = meta.test || {top1: best.top1};
      const percent = (value) => `${(100 * value).toFixed(2)} %`;
      status.textContent = `Model loaded: ${meta.model} (${(meta.bytes / 1e6).toFixed(1)} MB), ` +
        `from ${best.source || meta.checkpoint}: top-1 ${percent(served.top1)} on ` +
        `${served.images} test images as served (INT8), ${percent(before.top1)} before ` +
        `quantization.`;
    } catch (error) {
      status.textContent = `The model could not be loaded: ${error.message}`;
      root.dataset.state = "error";
      console.error(error);
      return;
    }
    const samples = await (await fetch(base + "samples.json")).json();
    const gallery = root.querySelector(".msresnet-samples");
    for (const sample of samples) {
      const button = document.createElement("button");
      button.type = "button";
      button.title = `a test image labelled ${sample.label}`;
      button.dataset.label = sample.label;
      const image = document.createElement("img");
      image.src = base + sample.file;
      image.alt = `a test image labelled ${sample.label}`;
      // The true class under each thumbnail; after it is classified, a mark says
      // whether the model's first answer was right (the mark's title says it in words).
      const caption = document.createElement("span");
      caption.className = "msresnet-label";
      caption.textContent = sample.label;
      const mark = document.createElement("span");
      mark.className = "msresnet-mark";
      caption.append(mark);
      button.append(image, caption);
      button.addEventListener("click", async () => {
        const probabilities = await window.msresnetClassifier.classifyUrl(image.src);
        const judged = show(root, probabilities, image.src, `test image, labelled ${sample.label}`,
                            sample.label);
        button.dataset.verdict = judged;
        mark.textContent = judged === "right" ? " \u2713" : " \u2717";
        mark.title = judged === "right" ? "the model is right" : "the model is wrong";
      });
      gallery.append(button);
    }
    const own = async (file) => {
      if (!file) return;
      const url = URL.createObjectURL(file);
      try {
        const probabilities = await window.msresnetClassifier.classifyUrl(url);
        show(root, probabilities, url, `your picture: ${file.name}`, null);
      } catch (error) {
        status.textContent = `${file.name}: ${error.message}`;
      }
    };
    root.querySelector("input[type=file]").addEventListener("change", (e) => own(e.target.files[0]));
    const drop = root.querySelector(".msresnet-drop");
    drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (e) => {
      e.preventDefault();
      drop.classList.remove("over");
      own(e.dataTransfer.files[0]);
    });
    root.dataset.state = "ready";  // model loaded, samples shown, inputs wired
  }

  const root = document.getElementById("msresnet-classifier");
  if (root) start(root);
})();
