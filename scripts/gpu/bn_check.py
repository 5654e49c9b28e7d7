"""Check MindSpore's BatchNorm, one operator, against a float64 reference.

``amp_batchnorm: float16`` trained to a NaN loss on an H100 while the same graph
with BatchNorm in float32 (O2) trains (results/gpu/h100-2026-12-06-levers/). This
runs BatchNorm alone in training mode, forward and backward, on the network's
activation shapes, in float16 and float32, NCHW and NHWC, and compares its output,
its input gradient and its scale and bias gradients with NumPy's float64 result.
A case that breaks shows which layout and precision break, without a network
around it.

BatchNorm alone was right in every case on an H100. ``fused`` checks instead the
patterns MindSpore's GPU backend fuses into one cuDNN call when BatchNorm runs in
float16 channels-last (``BatchNormWithActivation``, ``BatchNormWithAddAndActivation``
and their gradients): ReLU(BN(x)) and ReLU(BN(x) + r).

Usage (the GPU machine, ``env.sh`` sourced):
    python3 scripts/gpu/bn_check.py OUT.json [fused]
Writes one record per case and prints one line each.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from msresnet.model.architecture import BN_EPS, BN_MOMENTUM

CASES = [  # (pattern, layout, dtype, shape NCHW, input scale)
    ("bn", layout, dtype, shape, scale)
    for shape, scale in [((256, 64, 32, 32), 1.0), ((256, 64, 32, 32), 30.0),
                         ((256, 256, 32, 32), 1.0), ((256, 2048, 4, 4), 1.0)]
    for layout in ("NCHW", "NHWC") for dtype in ("float16", "float32")]
FUSED_CASES = [  # (pattern, layout, dtype, shape NCHW, input scale)
    (pattern, layout, "float16", (256, 256, 16, 16), 1.0)
    for pattern in ("bn_relu", "bn_add_relu") for layout in ("NHWC", "NCHW")]
DY_SCALE = 0.01  # a loss-scaled gradient's size at a BatchNorm's output


def reference(x: np.ndarray, dy: np.ndarray, eps: float = BN_EPS, pattern: str = "bn",
              r: np.ndarray | None = None):
    """Training-mode BatchNorm with scale 1 and bias 0, NCHW, in float64 (followed
    by ``+ r`` and a ReLU as ``pattern`` says): the output, the input gradient and
    the scale and bias gradients."""
    axes = (0, 2, 3)
    count = x.size // x.shape[1]
    mean = x.mean(axes, keepdims=True)
    inv = 1.0 / np.sqrt(x.var(axes, keepdims=True) + eps)
    xhat = (x - mean) * inv
    y = xhat
    if pattern != "bn":
        pre = xhat + r if pattern == "bn_add_relu" else xhat
        y = np.maximum(pre, 0)
        dy = dy * (pre > 0)  # the gradient that reaches BatchNorm through the ReLU
    dbeta = dy.sum(axes)
    dgamma = (dy * xhat).sum(axes)
    dx = inv * (dy - (dbeta[None, :, None, None] + xhat * dgamma[None, :, None, None]) / count)
    return y, dx, dgamma, dbeta


def inputs(shape, scale: float, seed: int = 0):
    """Activations with a per-channel offset (as a convolution's output has) and an
    output gradient, in float64."""
    rng = np.random.default_rng(seed)
    offset = rng.normal(0, scale, (1, shape[1], 1, 1))
    x = rng.normal(0, scale, shape) + offset
    dy = rng.normal(0, DY_SCALE, shape)
    return x, dy


def compare(got: np.ndarray, want: np.ndarray) -> dict:
    """Finite or not, and the largest error relative to the reference's largest value."""
    got = got.astype(np.float64)
    finite = bool(np.isfinite(got).all())
    err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)) if finite else None
    return {"finite": finite, "rel_err": err}


def mindspore_case(layout: str, dtype: str, x: np.ndarray, dy: np.ndarray,
                   pattern: str = "bn", r: np.ndarray | None = None):
    """MindSpore's BatchNorm2d in training mode, in ``pattern``: output, dx, dgamma,
    dbeta (NCHW)."""
    import mindspore as ms
    from mindspore import nn, ops

    class Pattern(nn.Cell):
        def __init__(self, bn):
            super().__init__()
            self.bn = bn
            self.relu = nn.ReLU()

        def construct(self, a, b):
            y = self.bn(a)
            if pattern == "bn_add_relu":
                y = y + b
            if pattern != "bn":
                y = self.relu(y)
            return y

    class Grad(nn.Cell):
        def __init__(self, net):
            super().__init__()
            self.net = net
            self.params = ms.ParameterTuple(net.trainable_params())
            self.grad = ops.GradOperation(get_all=True, get_by_list=True, sens_param=True)

        def construct(self, a, b, da):
            return self.net(a, b), self.grad(self.net, self.params)(a, b, da)

    kwargs = {"data_format": "NHWC"} if layout == "NHWC" else {}
    bn = nn.BatchNorm2d(x.shape[1], eps=BN_EPS, momentum=BN_MOMENTUM, **kwargs)
    net = Pattern(bn)
    net.set_train(True)
    to, back = ((0, 2, 3, 1), (0, 3, 1, 2)) if layout == "NHWC" else ((0, 1, 2, 3),) * 2
    cast = getattr(np, dtype)
    r = np.zeros_like(x) if r is None else r
    y, ((dx, _), (dgamma, dbeta)) = Grad(net)(*(ms.Tensor(a.transpose(to).astype(cast))
                                                for a in (x, r, dy)))
    return (y.asnumpy().transpose(back), dx.asnumpy().transpose(back),
            dgamma.asnumpy(), dbeta.asnumpy())


def run_case(layout: str, dtype: str, shape, scale: float, pattern: str = "bn") -> dict:
    x, dy = inputs(shape, scale)
    r = inputs(shape, 1.0, seed=1)[0] if pattern == "bn_add_relu" else None
    start = time.time()
    try:
        got = mindspore_case(layout, dtype, x, dy, pattern, r)
    except Exception as exc:  # the record says which case failed and why
        return {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"}
    names = ("y", "dx", "dgamma", "dbeta")
    want = reference(x, dy, pattern=pattern, r=r)
    result = {n: compare(g, w) for n, g, w in zip(names, got, want)}
    return {**result, "seconds": round(time.time() - start, 2)}


def main(out: str, which: str = "alone") -> None:
    import mindspore as ms

    ms.set_device("GPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    records = []
    for pattern, layout, dtype, shape, scale in FUSED_CASES if which == "fused" else CASES:
        record = {"pattern": pattern, "layout": layout, "dtype": dtype, "shape": list(shape),
                  "scale": scale, **run_case(layout, dtype, shape, scale, pattern)}
        records.append(record)
        with open(out, "w") as handle:
            json.dump(records, handle, indent=1)
        parts = [f"{n} {record[n]['finite'] and 'ok' or 'NOT FINITE'} {record[n]['rel_err']}"
                 for n in ("y", "dx", "dgamma", "dbeta") if n in record]
        print(pattern, layout, dtype, shape, scale, record.get("error") or "; ".join(parts),
              flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
