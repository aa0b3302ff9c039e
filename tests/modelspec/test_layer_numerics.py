"""Layer kinds against PyTorch: a one-layer spec, built, with its weights copied into the matching torch module,
computes the same output and the same gradients for the input and every weight (training mode, so batchnorm uses the
batch's statistics). Pooling runs odd sizes where ceil_mode and padding matter. Skipped without torch. Also (slow):
a tiny U-Net (conv2d, groupnorm, maxpool, conv_transpose2d, bilinear upsample) and a small classifier (batchnorm
without bias, ceil-mode avgpool, adaptive_avgpool, conv1d, global_avgpool) train on the digits; and a shape a kind
cannot take is refused in words that say what it needs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad import Tensor
from specgrad.modelspec.builder import build_model
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.layers import LAYERS
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import get_state_dict

# NOTE: (kernel, stride, padding, ceil_mode, shape): shapes where ceil_mode reads past the right padding (the part
# left out of avgpool's divisor) and where it would start a last window in the padding (dropped)
POOLS = [(3, 2, 1, True, (2, 7, 8)), (3, 2, 0, True, (1, 9, 6)), (2, 2, 0, True, (1, 5, 6)), (3, 3, 1, True, (1, 8, 9)),
         (2, 3, 1, True, (1, 7, 9)), (4, 3, 2, True, (1, 10, 11)), (3, 1, 1, False, (1, 5, 6)),
         (5, 2, 2, True, (1, 7, 8)), (3, 2, 1, False, (2, 7, 8))]  # fmt: skip

CASES: list[tuple[str, dict[str, Any], tuple[int, ...]]] = [
    *((kind, {"kernel": k, "stride": s, "padding": p, "ceil_mode": ceil}, shape)
      for kind in ("maxpool", "avgpool") for k, s, p, ceil, shape in POOLS),
    ("maxpool", {"kernel": 3, "stride": 2, "padding": 1}, (3, 16, 16)),  # ResNet's stem
    ("global_avgpool", {}, (3, 5, 7)),
    ("global_avgpool", {}, (4, 9)),
    *(("adaptive_avgpool", {"size": size}, (2, 7, 10)) for size in ([1, 1], [7, 5], [3, 4], [4, 3], [9, 12])),
    ("conv1d", {"out": 4, "kernel": 3}, (2, 9)),
    ("conv1d", {"out": 6, "kernel": 3, "stride": 2, "padding": 2, "dilation": 2, "groups": 3}, (3, 12)),
    ("conv1d", {"out": 2, "kernel": 4, "stride": 3, "padding": 1, "bias": False}, (4, 10)),
    ("conv2d", {"out": 4, "kernel": 3, "stride": 2, "padding": 1, "groups": 2}, (2, 7, 6)),
    ("conv_transpose2d", {"out": 3, "kernel": 3}, (2, 4, 5)),
    ("conv_transpose2d", {"out": 4, "kernel": 2, "stride": 2}, (3, 4, 3)),
    ("conv_transpose2d", {"out": 4, "kernel": 3, "stride": 2, "padding": 1, "output_padding": 1}, (2, 5, 4)),
    ("conv_transpose2d", {"out": 6, "kernel": 3, "stride": 3, "padding": 2, "output_padding": 1, "dilation": 2,
                          "groups": 2, "bias": False}, (4, 3, 5)),
    ("conv_transpose2d", {"out": 4, "kernel": 4, "stride": 2, "padding": 1, "groups": 4}, (4, 3, 3)),
    *(("upsample", {"scale": s, "mode": m}, (2, 3, 5)) for s in (1, 2, 3) for m in ("nearest", "bilinear")),
    ("upsample", {"scale": 4, "mode": "bilinear"}, (1, 1, 2)),
    ("groupnorm", {"groups": 2}, (4, 3, 5)),
    ("groupnorm", {"groups": 3, "eps": 0.01}, (6, 7)),
    ("groupnorm", {"groups": 1, "bias": False}, (3, 2, 2, 2)),
    ("groupnorm", {"groups": 4, "affine": False}, (4, 5, 3)),
    ("batchnorm", {}, (3, 4, 5)),
    ("batchnorm", {"bias": False}, (3, 4, 5)),
    ("batchnorm", {"affine": False}, (4, 6)),
]  # fmt: skip


def _ids(case: tuple[str, dict, tuple]) -> str:
    name, args, shape = case
    return f"{name}-{'-'.join(f'{k}{v}' for k, v in args.items())}-{'x'.join(map(str, shape))}".replace(" ", "")


def _torch_layer(torch: Any, name: str, a: dict, shape: tuple[int, ...]) -> Any:
    nn, c = torch.nn, shape[0]
    convs: dict[str, Callable[..., Any]] = {"conv1d": nn.Conv1d, "conv2d": nn.Conv2d}
    if name in ("maxpool", "avgpool"):
        cls = nn.MaxPool2d if name == "maxpool" else nn.AvgPool2d
        return cls(a["kernel"], a.get("stride"), a["padding"], ceil_mode=a["ceil_mode"])
    if name == "global_avgpool":
        return nn.Sequential(nn.AdaptiveAvgPool2d(1) if len(shape) == 3 else nn.AdaptiveAvgPool1d(1), nn.Flatten())
    if name == "adaptive_avgpool":
        return nn.AdaptiveAvgPool2d(a["size"])
    if name in convs:
        return convs[name](c, a["out"], a["kernel"], a.get("stride", 1), a.get("padding", 0), a.get("dilation", 1),
                           a.get("groups", 1), a.get("bias", True))  # fmt: skip
    if name == "conv_transpose2d":
        return nn.ConvTranspose2d(c, a["out"], a["kernel"], a.get("stride", 1), a.get("padding", 0),
                                  a.get("output_padding", 0), a.get("groups", 1), a.get("bias", True),
                                  a.get("dilation", 1))  # fmt: skip
    if name == "upsample":
        return nn.Upsample(scale_factor=a["scale"], mode=a["mode"])
    if name == "groupnorm":
        return nn.GroupNorm(a["groups"], c, a.get("eps", 1e-5), a.get("affine", True))
    if name == "batchnorm":
        return (nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d)(c, affine=a.get("affine", True))
    raise KeyError(name)


def _one_layer(tmp_path: Path, name: str, args: dict, shape: tuple[int, ...]) -> Any:
    text = {"specgrad": 1, "name": f"one-{name}", "input": {"shape": list(shape)}, "model": [{name: args} if args
                                                                                              else name]}  # fmt: skip
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(text, sort_keys=False))
    return build_model(validate_file(tmp_path / "spec.yaml"))


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_forward_and_gradients_match_torch(case: tuple[str, dict, tuple[int, ...]], tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    name, args, shape = case
    model = _one_layer(tmp_path, name, args, shape)
    full = {**{k: f.default for k, f in LAYERS[name].entry.args.fields.items()}, **args}
    ref = _torch_layer(torch, name, full, shape).double()
    weights = {k.removeprefix("steps.0.1."): t for k, t in get_state_dict(model).items() if t.requires_grad}
    own = dict(ref.named_parameters())
    with torch.no_grad():
        for k, t in weights.items():
            own[k].copy_(torch.from_numpy(t.numpy().astype(np.float64)))
        for k in set(own) - set(weights):  # NOTE: a shift the spec leaves out (bias: false) stays zero in torch
            own[k].zero_().requires_grad_(False)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, *shape)).astype(np.float32)
    x_t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y_t = ref(x_t)
    r = rng.standard_normal(tuple(y_t.shape)).astype(np.float32)
    (y_t * torch.from_numpy(r.astype(np.float64))).sum().backward()
    with Tensor.train(True):
        xs = Tensor(x, requires_grad=True)
        y = model(xs)
        (y * Tensor(r)).sum().backward()
    np.testing.assert_allclose(y.numpy(), y_t.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=f"{name} forward")
    np.testing.assert_allclose(xs.grad.numpy(), x_t.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=f"{name} input grad")
    for k, t in weights.items():
        np.testing.assert_allclose(t.grad.numpy(), own[k].grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=f"{name} {k}")


# *** shape errors in plain words ***

SHAPE_ERRORS = [
    ({"maxpool": {"kernel": 3, "padding": 2}}, [1, 8, 8], "needs padding at most half the kernel (as PyTorch): "
     "padding 2 with kernel 3"),
    ({"avgpool": {"kernel": 5, "padding": 1}}, [1, 2, 8], "needs a window that fits the input: 5x5 does not fit 4x10 "
     "(with padding 1)"),
    ("global_avgpool", [5], "needs a (channels, *spatial) input with at least one spatial axis, got [5]"),
    ({"adaptive_avgpool": [2]}, [1, 8, 8], "needs size as two numbers [height, width], got [2]"),
    ({"conv1d": {"out": 4, "kernel": 3}}, [2, 8, 8], "needs a (channels, length) input, got shape [2, 8, 8]"),
    ({"conv1d": {"out": 4, "kernel": 5, "dilation": 2}}, [2, 8],
     "needs a window that fits the input: 9 does not fit 8"),
    ({"conv_transpose2d": {"out": 4, "kernel": 3, "stride": 2, "output_padding": 2}}, [2, 4, 4],
     "needs output_padding smaller than the stride or the dilation (as PyTorch): output_padding 2 with stride 2"),
    ({"conv_transpose2d": {"out": 3, "kernel": 3, "groups": 2}}, [2, 4, 4],
     "needs groups=2 to divide the 2 input and 3 output channels"),
    ({"conv_transpose2d": {"out": 4, "kernel": 1, "padding": 1}}, [2, 1, 1],
     "needs less padding: padding 1 leaves an output of -1x-1"),
    ({"upsample": 2}, [3, 8], "needs a (channels, height, width) input, got shape [3, 8]"),
    ({"groupnorm": 4}, [6, 3, 3], "needs groups=4 to divide the 6 channels"),
]  # fmt: skip


@pytest.mark.parametrize("layer, shape, words", SHAPE_ERRORS, ids=[w[:40] for *_, w in SHAPE_ERRORS])
def test_shape_errors_say_what_the_layer_needs(layer: Any, shape: list[int], words: str, tmp_path: Path) -> None:
    name = layer if isinstance(layer, str) else next(iter(layer))
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"specgrad": 1, "name": "bad", "input": {"shape": shape}, "model": [layer]}))
    with pytest.raises(SpecError) as e:
        validate_file(path)
    assert f"layer 0 ({name}) cannot take shape {shape} from the input (line 2): it {words}" in str(e.value)


# *** small specs of the newer kinds train ***

TINY_UNET = """
specgrad: 1
name: tiny-unet
seed: 0
input: {shape: [1, 8, 8]}
model:
  graph:
    - {name: enc, layer: conv2d, out: 8, kernel: 3, padding: 1, from: input}
    - {name: enc_norm, layer: groupnorm, groups: 2, from: enc}
    - {name: enc_act, layer: relu, from: enc_norm}
    - {name: down, layer: maxpool, kernel: 3, stride: 2, padding: 1, from: enc_act}
    - {name: mid, layer: conv2d, out: 16, kernel: 3, padding: 1, from: down}
    - {name: mid_act, layer: relu, from: mid}
    - {name: up, layer: conv_transpose2d, out: 8, kernel: 2, stride: 2, from: mid_act}
    - {name: up_skip, layer: upsample, scale: 2, mode: bilinear, from: down}
    - {name: joined, op: concat, axis: 0, from: [enc_act, up, up_skip]}
    - {name: mixed, layer: conv2d, out: 1, kernel: 1, from: joined}
    - {name: image, layer: sigmoid, from: mixed}
  outputs: [image]
data: {source: digits, target: input, batch_size: 32}
train: {epochs: 1, loss: mse, optimizer: adam, lr: 0.01, metrics: [loss]}
"""

TINY_POOLS = """
specgrad: 1
name: tiny-pools
seed: 0
input: {shape: [1, 8, 8]}
model:
  - conv2d: {out: 8, kernel: 3, padding: 1}
  - batchnorm: {bias: false}
  - relu
  - avgpool: {kernel: 3, stride: 2, ceil_mode: true}
  - adaptive_avgpool: [3, 3]
  - reshape: [8, 9]
  - conv1d: {out: 16, kernel: 3, padding: 1}
  - relu
  - global_avgpool
  - linear: 10
data: {source: digits, batch_size: 32}
train: {epochs: 1, optimizer: adam, lr: 0.01}
"""


@pytest.mark.slow  # NOTE: about 7 s each, mostly compiling the training step's kernels
@pytest.mark.parametrize("text", [TINY_UNET, TINY_POOLS], ids=["unet", "pools"])
def test_small_specs_of_the_newer_kinds_train(text: str, tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(text)
    result = CliRunner().invoke(app, ["train", str(tmp_path / "spec.yaml"), "--out", str(tmp_path), "--steps", "30"])
    assert result.exit_code == 0, result.output
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    losses = [r["loss"] for r in map(json.loads, (folder / "metrics.jsonl").read_text().splitlines())
              if r["split"] == "train"]  # fmt: skip
    assert len(losses) == 3 and losses[-1] < losses[0], losses
