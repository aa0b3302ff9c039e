"""Losses (mae, huber, binary_cross_entropy, class weights) against a float64 numpy reference and PyTorch, forward and
gradient, on CLANG and CPU; the validation metrics (mae, rmse, r2, macro precision/recall/F1, AUC, top-k) each epoch,
equal to specgrad.train.evaluation's on the same outputs and to `specgrad evaluate`; any of them watched by early
stopping and the best checkpoint, with its direction; and the errors a spec gets for a metric or loss that does not
fit its data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad import Tensor
from specgrad.device import Device
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import higher_is_better, is_metric, top_k, validate_file
from specgrad.nn.state import load_state_dict, safe_load, safe_load_metadata
from specgrad.train.evaluation import auc, chosen, classification, top_k_accuracy
from specgrad.train.trainer import BadMetadata, Position, Trainer, binary_correct, check_position, make_losses

runner = CliRunner()
DEVICES = ["CLANG", "CPU"]


# *** float64 references ***


def ref_huber(r: np.ndarray, d: float | np.ndarray) -> np.ndarray:
    a = np.abs(r)
    return np.where(a <= d, 0.5 * r**2, d * (a - 0.5 * d))


def ref_weighted_ce(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    z = x - x.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return float((-logp[np.arange(len(y)), y] * w[y]).sum() / w[y].sum())


def ref_bce(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> float:
    each = np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))
    wy = np.ones_like(x) if w is None else w[y.astype(int)]
    return float((each * wy).sum() / wy.sum())


def forward_and_grad(fn, out: np.ndarray, y: np.ndarray, device: str) -> tuple[float, np.ndarray]:
    o = Tensor(out.astype(np.float32), device=device, requires_grad=True)
    loss = fn(o, Tensor(y, device=device))
    loss.backward()
    return float(loss.numpy()), o.grad.numpy()


RNG = np.random.default_rng(7)
OUT = RNG.normal(0, 2, (12, 1))
TARGET = RNG.normal(0, 1, (12, 1)).astype(np.float32)
STATS = {"mean": np.array([5.0]), "std": np.array([3.0])}


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The default device for the test (the losses make their constants on it)."""
    monkeypatch.setattr(Device, "DEFAULT", request.param)
    return request.param


def test_mae_and_huber_train_standardized_and_report_in_units(device: str) -> None:
    r = OUT - TARGET.astype(np.float64)
    for kind, train_ref, units_ref, grad_ref in (
        ("mae", np.abs(r).mean(), (np.abs(r) * 3).mean(), np.sign(r) / r.size),
        # NOTE: delta 1.5 in units is 0.5 standardized; the reported huber is that of the residual in units
        ("huber", ref_huber(r, 0.5).mean(), ref_huber(r * 3, 1.5).mean(), np.clip(r, -0.5, 0.5) / r.size),
    ):
        train, reported = make_losses("regress", kind, STATS, (1,), delta=1.5)
        value, grad = forward_and_grad(train, OUT, TARGET, device)
        assert value == pytest.approx(train_ref, rel=1e-5) and np.allclose(grad, grad_ref, atol=1e-6)
        shown = float(reported(Tensor(OUT.astype(np.float32), device=device), Tensor(TARGET, device=device)).numpy())
        assert shown == pytest.approx(units_ref, rel=1e-5)


def test_binary_cross_entropy_and_class_weights(device: str) -> None:
    y = (RNG.random(12) > 0.5).astype(np.int32)
    x = OUT.reshape(12, 1)
    for w in (None, np.array([3.0, 0.5])):
        fn, _ = make_losses("classify", "binary_cross_entropy", {}, (), class_weights=w)
        value, grad = forward_and_grad(fn, x, y, device)
        p, wy = 1 / (1 + np.exp(-x[:, 0])), np.ones(12) if w is None else w[y]
        assert value == pytest.approx(ref_bce(x[:, 0], y, w), rel=1e-5)
        assert np.allclose(grad[:, 0], (p - y) * wy / wy.sum(), atol=1e-6)
    hits = binary_correct(Tensor(x.astype(np.float32), device=device), Tensor(y, device=device)).numpy()
    assert int(hits) == int(((x[:, 0] > 0) == y).sum())
    logits, labels, w = RNG.normal(0, 2, (12, 4)), RNG.integers(0, 4, 12).astype(np.int32), np.array([1, 2, 0.5, 4.0])
    fn, _ = make_losses("classify", "cross_entropy", {}, (), class_weights=w)
    value, grad = forward_and_grad(fn, logits, labels, device)
    z = np.exp(logits - logits.max(1, keepdims=True))
    soft, hot = z / z.sum(1, keepdims=True), np.eye(4)[labels]
    assert value == pytest.approx(ref_weighted_ce(logits, labels, w), rel=1e-5)
    assert np.allclose(grad, (soft - hot) * w[labels][:, None] / w[labels].sum(), atol=1e-6)


def test_the_losses_match_pytorch() -> None:
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    r_out, r_y = torch.tensor(OUT, dtype=torch.float64), torch.tensor(TARGET, dtype=torch.float64)
    for kind, want in (("mae", F.l1_loss(r_out, r_y)), ("huber", F.huber_loss(r_out, r_y, delta=0.7))):
        train, _ = make_losses("regress", kind, {}, (1,), delta=0.7)
        got = train(Tensor(OUT.astype(np.float32)), Tensor(TARGET)).numpy()
        assert float(got) == pytest.approx(float(want), rel=1e-5)
    logits, labels, w = RNG.normal(0, 2, (9, 3)), RNG.integers(0, 3, 9).astype(np.int32), np.array([0.2, 1.0, 5.0])
    want = F.cross_entropy(torch.tensor(logits), torch.tensor(labels, dtype=torch.long), weight=torch.tensor(w))
    fn, _ = make_losses("classify", "cross_entropy", {}, (), class_weights=w)
    assert float(fn(Tensor(logits.astype(np.float32)), Tensor(labels)).numpy()) == pytest.approx(float(want), rel=1e-5)
    x, y = OUT[:, 0], (RNG.random(12) > 0.5).astype(np.int32)
    want = F.binary_cross_entropy_with_logits(torch.tensor(x), torch.tensor(y, dtype=torch.float64))
    fn, _ = make_losses("classify", "binary_cross_entropy", {}, ())
    assert float(fn(Tensor(x.astype(np.float32)[:, None]), Tensor(y)).numpy()) == pytest.approx(float(want), rel=1e-5)


# *** the metrics ***


def test_auc_is_the_chance_a_positive_outscores_a_negative() -> None:
    scores, truth = np.array([0.1, 0.4, 0.35, 0.8, 0.4, 0.4]), np.array([0, 0, 1, 1, 1, 0])
    pairs = [(p, n) for p in scores[truth == 1] for n in scores[truth == 0]]
    want = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in pairs) / len(pairs)  # NOTE: ties count half
    assert auc(scores, truth) == pytest.approx(want)
    assert auc(scores, np.ones(6)) is None and auc(np.zeros(0), np.zeros(0)) is None
    logits = np.stack([np.zeros(6), scores], 1)
    assert classification(scores[:, None], truth)["auc"] == classification(logits, truth)["auc"] == auc(scores, truth)


def test_top_k_and_names() -> None:
    scores, truth = np.array([[0.1, 0.5, 0.4], [0.9, 0.05, 0.05], [0.2, 0.3, 0.5]]), np.array([2, 2, 0])
    assert top_k_accuracy(scores, truth, 2) == pytest.approx(1 / 3) and top_k_accuracy(scores, truth, 3) == 1.0
    assert top_k("top5") == 5 and top_k("top1") is None and top_k("top05") is None and top_k("top101") is None
    assert is_metric("price.r2") and not is_metric("mse") and not is_metric("topk")
    assert [higher_is_better(m) for m in ("loss", "mae", "rmse", "r2", "f1", "auc", "top3", "out.accuracy")] == \
        [False, False, False, True, True, True, True, True]  # fmt: skip


def test_regression_metrics_are_in_the_targets_units() -> None:
    pred, true = RNG.normal(0, 1, (20, 1)), RNG.normal(0, 1, (20, 1))
    got = chosen("regress", ("mae", "rmse", "r2"), pred, true, STATS)
    p, t = pred * 3 + 5, true * 3 + 5
    assert got["mae"] == pytest.approx(np.abs(p - t).mean()) and got["rmse"] == pytest.approx(
        math.sqrt(((p - t) ** 2).mean()))  # fmt: skip
    assert got["r2"] == pytest.approx(1 - ((p - t) ** 2).sum() / ((t - t.mean()) ** 2).sum())


# *** training ***


SPIRALS = """specgrad: 1
name: spir
seed: 0
input: {shape: [2]}
model:
  - linear: 16
  - relu
  - linear: OUT
data: {source: spirals, samples: 200, batch_size: 16}
train:
  epochs: 3
  lr: 0.01
  loss: LOSS
EXTRA"""


def spirals(tmp_path: Path, extra: str = "", loss: str = "binary_cross_entropy", out: int = 1) -> Path:
    path = tmp_path / "spir.yaml"
    path.write_text(SPIRALS.replace("OUT", str(out)).replace("LOSS", loss).replace("EXTRA", extra))
    return path


def records(folder: Path, split: str = "valid") -> list[dict]:
    logged = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [r for r in logged if r["split"] == split]


def train(spec: Path, *args: str) -> Path:
    result = runner.invoke(app, ["train", str(spec), "--out", str(spec.parent / "runs"), *args])
    assert result.exit_code == 0, result.output
    return max((spec.parent / "runs").iterdir(), key=lambda p: p.stat().st_mtime_ns)


def test_binary_training_reports_every_metric_as_evaluate_computes_it(tmp_path: Path) -> None:
    spec = spirals(tmp_path, "  metrics: [f1, precision, recall, auc]\n  class_weights: {'0': 2.0}\n"
                             "  early_stopping: {metric: auc, patience: 10}\n")  # fmt: skip
    trainer = Trainer.create(validate_file(spec))
    assert trainer.losses[0].metrics == ("accuracy", "precision", "recall", "f1", "auc")
    folder = train(spec)
    valid = records(folder)
    assert [set(r) - {"split", "epoch", "step"} for r in valid] == [{"loss", "accuracy", "precision", "recall",
                                                                     "f1", "auc"}] * 3  # fmt: skip
    assert valid[-1]["loss"] < valid[0]["loss"]  # NOTE: the weighted binary cross-entropy trains
    best = max(range(3), key=lambda i: (valid[i]["auc"], -i))
    assert "best valid auc" in runner.invoke(app, ["train", str(spec), "--out", str(tmp_path / "r2")]).output
    doc = json.loads(runner.invoke(app, ["evaluate", str(folder), "--json"]).output)
    report = next(iter(doc["outputs"].values()))
    # NOTE: the final weights are the best epoch's (by AUC, higher): evaluate's figures are that epoch's
    assert report["auc"] == pytest.approx(valid[best]["auc"], abs=1e-12)
    assert report["macro"]["f1"] == pytest.approx(valid[best]["f1"], abs=1e-12)
    assert report["accuracy"] == pytest.approx(valid[best]["accuracy"], abs=1e-12)
    assert (folder / "metrics.csv").read_text().splitlines()[0].endswith("precision,recall,f1,auc")
    printed = runner.invoke(app, ["evaluate", str(folder)]).output
    assert "AUC" in printed


def test_regression_metrics_each_epoch_and_the_best_by_r2(tmp_path: Path) -> None:
    spec = tmp_path / "sine.yaml"
    spec.write_text("specgrad: 1\nname: sine\nseed: 0\ninput: {shape: [1]}\nmodel: [{linear: 16}, tanh, {linear: 1}]\n"
                    "data: {source: sine, samples: 200, batch_size: 16}\ntrain:\n  epochs: 4\n  lr: 0.01\n"
                    "  loss: huber\n  huber_delta: 0.5\n  metrics: [mae, r2]\n"
                    "  early_stopping: {metric: r2, patience: 10}\n")  # fmt: skip
    trainer = Trainer.create(validate_file(spec))
    trainer.valid_batches = None
    figures = trainer.evaluate()
    out = np.concatenate([o.numpy() for o in (trainer.model.outputs(Tensor(trainer.data.x_valid)))])
    want = chosen("regress", ("mae", "r2"), out, trainer.data.y_valid, trainer.data.target_stats)
    assert set(figures) == {"loss", "mae", "r2"}  # NOTE: huber: no rmse from the loss
    assert figures["mae"] == pytest.approx(want["mae"], rel=1e-6)
    assert figures["r2"] == pytest.approx(want["r2"], rel=1e-5)
    folder = train(spec)
    valid = records(folder)
    best = max(range(4), key=lambda i: (valid[i]["r2"], -i)) + 1
    assert safe_load_metadata(folder / "model.safetensors")["epoch"] == str(best)


def test_mse_regression_reports_rmse_from_its_loss(tmp_path: Path) -> None:
    spec = tmp_path / "sine.yaml"
    spec.write_text("specgrad: 1\nname: sine\nseed: 0\ninput: {shape: [1]}\nmodel: [{linear: 8}, tanh, {linear: 1}]\n"
                    "data: {source: sine, samples: 100, batch_size: 16}\ntrain: {epochs: 1, loss: mse}\n")  # fmt: skip
    valid = records(train(spec))[0]
    assert set(valid) - {"split", "epoch", "step"} == {"loss", "rmse"} and valid["rmse"] == math.sqrt(valid["loss"])


def test_digits_top_k_and_balanced_weights(tmp_path: Path) -> None:
    spec = tmp_path / "dig.yaml"
    spec.write_text("specgrad: 1\nname: dig\nseed: 0\ninput: {shape: [64]}\nmodel: [{linear: 10}]\n"
                    "data: {source: digits, batch_size: 64}\n"
                    "train: {epochs: 1, class_weights: balanced, metrics: [top3, f1]}\n")  # fmt: skip
    trainer = Trainer.create(validate_file(spec))
    out = np.concatenate([o.numpy() for o in trainer.model.outputs(Tensor(trainer.data.x_valid))])
    figures = trainer.evaluate()
    want = chosen("classify", ("top3", "f1"), out, trainer.data.y_valid)
    assert figures["top3"] == pytest.approx(want["top3"]) and figures["f1"] == pytest.approx(want["f1"])
    counts = np.bincount(trainer.data.y_train, minlength=10)
    assert trainer.losses[0].metrics == ("accuracy", "f1", "top3") and counts.min() > 0


# *** errors ***


def error_of(spec: Path) -> str:
    result = runner.invoke(app, ["train", str(spec), "--out", str(spec.parent / "runs")])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    return result.output


def test_a_metric_is_never_answered_with_a_loss(tmp_path: Path) -> None:
    output = error_of(spirals(tmp_path, "  metrics: [mea]\n"))
    assert "spir.yaml:14:" in output and "did you mean 'mae'?" in output and "'mse'" not in output
    output = error_of(spirals(tmp_path, "  early_stopping: {metric: msee}\n"))
    assert "train.early_stopping.metric must be a metric" in output and "'mse'" not in output


@pytest.mark.parametrize("extra, loss, out, line, said", [
    ("  metrics: [top3]\n", "cross_entropy", 2, 14, "top3 counts the label among the 3 best scores, but the data "
     "has 2"),
    ("  early_stopping: {metric: r2}\n", "binary_cross_entropy", 1, 14,
     "train.early_stopping.metric is r2, which this run does not report (its classify data has: loss, accuracy)"),
    ("  class_weights: {'2': 3.0}\n", "binary_cross_entropy", 1, 14, "names the class '2', which the data does not"),
    ("", "binary_cross_entropy", 2, 8, "binary_cross_entropy learns two classes from one value"),
    ("", "huber", 1, 13, "train.loss is huber, but the spiral labels are class labels"),
    ("  class_weights: ballanced\n", "cross_entropy", 2, 14, "did you mean 'balanced'?"),
])  # fmt: skip
def test_errors_point_at_the_spec_line(tmp_path: Path, extra: str, loss: str, out: int, line: int, said: str) -> None:
    output = error_of(spirals(tmp_path, extra, loss, out))
    assert f"spir.yaml:{line}:" in output and said in output, output


def test_auc_needs_two_classes(tmp_path: Path) -> None:
    spec = tmp_path / "dig.yaml"
    spec.write_text("specgrad: 1\nname: dig\ninput: {shape: [64]}\nmodel: [{linear: 10}]\ndata: {source: digits}\n"
                    "train:\n  metrics: [auc]\n")  # fmt: skip
    for output in (error_of(spec), runner.invoke(app, ["validate", str(spec)]).output):  # NOTE: validate says so too
        assert "dig.yaml:7:" in output and "auc is the area under the ROC curve of two classes, but the data has 10" \
            in output  # fmt: skip
    with pytest.raises(SpecError, match="which the data does not have"):
        spec.write_text(spec.read_text().replace("metrics: [auc]", "class_weights: {ten: 2}"))
        Trainer.create(validate_file(spec))


def test_one_logit_gives_both_probabilities_in_run_and_the_exports(tmp_path: Path) -> None:
    folder = train(spirals(tmp_path))
    (tmp_path / "x.csv").write_text("a,b\n0.1,0.2\n-0.5,0.7\n")
    ran = json.loads(runner.invoke(app, ["run", str(folder), "--input", str(tmp_path / "x.csv"), "--json"]).output)
    trainer = Trainer.create(validate_file(folder / "spec.resolved.yaml"))
    load_state_dict(trainer.model, safe_load(folder / "model.safetensors"))  # NOTE: the final weights, as run loads
    x = (np.array([[0.1, 0.2], [-0.5, 0.7]]) - trainer.data.stats["mean"]) / trainer.data.stats["std"]
    logit = trainer.model.outputs(Tensor(x.astype(np.float32)))[0].numpy()[:, 0].astype(np.float64)
    p = 1 / (1 + np.exp(-logit))
    assert np.allclose([r["probabilities"] for r in ran], [[1 - q, q] for q in p], rtol=1e-5)
    assert [r["class"] for r in ran] == [int(q > 0.5) for q in p]
    ort = pytest.importorskip("onnxruntime")
    assert runner.invoke(app, ["export", str(folder), "--format", "onnx", "--out", str(tmp_path / "m.onnx")]
                         ).exit_code == 0  # fmt: skip
    session = ort.InferenceSession(str(tmp_path / "m.onnx"))
    x32 = np.array([[0.1, 0.2], [-0.5, 0.7]], np.float32)
    got = session.run(["probabilities"], {session.get_inputs()[0].name: x32})
    assert got[0][:, 0] == pytest.approx(p, rel=1e-5)


def test_a_negative_best_r2_resumes() -> None:
    """R^2 can be below 0: a checkpoint whose best (and early stopping's reference) is negative is one train writes."""
    pos = Position(epoch=2, step=6, best=-0.5, best_epoch=1, ref=-0.5, stale=1)
    check_position(pos, pos.to_meta(), "epoch-00002.safetensors", 3, 9, True)
    with pytest.raises(BadMetadata, match="not a value a loss"):
        bad = Position(epoch=2, step=6, best=-1e39, best_epoch=1, ref=-0.5, stale=1)
        check_position(bad, bad.to_meta(), "epoch-00002.safetensors", 3, 9, True)
