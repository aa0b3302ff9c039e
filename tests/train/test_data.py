"""spec/data.py: every source gives arrays of the input's shape and dtype, deterministically from the seed, normalized
with training statistics only; every data problem is a SpecError at the exact file:line:col."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from specgrad.datasets import load_digits, load_text, split
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import ValidSpec, validate_file
from specgrad.train.data import (
    Dataset,
    batches,
    eval_batches,
    load_data,
    standardize,
    stratified_split,
    unstandardize,
)

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "specs").glob("*.yaml"))
FIXTURES = Path(__file__).resolve().parent / "data"
TEXT_MODEL = "[{embedding: {vocab: 128, dim: 4}}, {linear: 128}]"
DATA_LINE = 7  # the first line of the data section in specs written by make_spec


def make_spec(folder: Path, data: str, shape: str = "[2]", dtype: str = "float32",
              model: str = "[flatten, {linear: 2}]", overrides: tuple[str, ...] = (), train: str = ""
              ) -> ValidSpec:  # fmt: skip
    """A spec in `folder` whose data section is `data` (block YAML, starting at line DATA_LINE), then `train`."""
    text = f"specgrad: 1\nname: t\nseed: 0\ninput: {{shape: {shape}, dtype: {dtype}}}\nmodel: {model}\ndata:\n"
    path = folder / "spec.yaml"
    path.write_text(text + textwrap.indent(textwrap.dedent(data), "  ") + (f"train: {train}\n" if train else ""))
    return validate_file(path, overrides)


def problems(spec: ValidSpec) -> list[str]:
    with pytest.raises(SpecError) as e:
        load_data(spec)
    return [str(p) for p in e.value.problems]


def same(a: Dataset, b: Dataset) -> bool:
    pairs = [(a.x_train, b.x_train), (a.y_train, b.y_train), (a.x_valid, b.x_valid), (a.y_valid, b.y_valid)]
    return all(np.array_equal(p, q) for p, q in pairs)


# *** the example specs ***


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_example_spec_loads(path: Path) -> None:
    spec = validate_file(path)
    ds = load_data(spec)
    (shape, dtype), = spec.inputs.values()  # fmt: skip
    for x, y in ((ds.x_train, ds.y_train), (ds.x_valid, ds.y_valid)):
        assert x.shape[1:] == shape and x.dtype == np.dtype(dtype) and len(x) == len(y) > 0
        assert y.dtype == (np.float32 if ds.task == "regress" else np.int32)
    assert len(ds.x_train) >= spec.batch_size
    assert same(ds, load_data(validate_file(path)))


def test_digits_classify_and_split() -> None:
    ds = load_data(validate_file(ROOT / "specs/digits_mlp.yaml"))
    assert (ds.task, ds.num_classes) == ("classify", 10)
    assert ds.x_train.shape == (1438, 1, 8, 8) and ds.x_valid.shape == (359, 1, 8, 8)
    assert set(np.unique(ds.y_train)) == set(range(10))
    train, valid, _ = stratified_split(load_digits()[1], 0.2, 0.0, 0)  # classes keep their shares (data.stratify)
    assert np.array_equal(ds.y_valid, load_digits()[1][valid]) and np.array_equal(ds.y_train, load_digits()[1][train])
    assert ds.stats["mean"].shape == ()  # one mean and std for every pixel of an image
    assert abs(ds.x_train.mean()) < 1e-5 and abs(ds.x_train.std() - 1) < 1e-4


def test_digits_seed_changes_the_split() -> None:
    a = load_data(validate_file(ROOT / "specs/digits_mlp.yaml"))
    b = load_data(validate_file(ROOT / "specs/digits_mlp.yaml", ["seed=1"]))
    assert not np.array_equal(a.y_valid, b.y_valid)


def test_digits_without_normalize_are_pixels_over_16() -> None:
    ds = load_data(validate_file(ROOT / "specs/digits_cnn.yaml", ["data.normalize=false", "data.stratify=false"]))
    images, _ = load_digits()
    assert ds.stats == {} and ds.x_train.min() == 0 and ds.x_train.max() == 1
    train, _ = split(1797, 0.2, 0)
    assert np.array_equal(ds.x_train[:, 0], images[train] / np.float32(16))


def test_autoencoder_target_is_the_unnormalized_image() -> None:
    spec = validate_file(ROOT / "specs/digits_autoencoder.yaml")
    ds = load_data(spec)
    assert (ds.task, ds.num_classes) == ("regress", None)
    assert ds.y_train.shape == (1438, 64) and ds.y_train.dtype == np.float32
    assert 0 <= ds.y_train.min() and ds.y_train.max() <= 1
    np.testing.assert_allclose(standardize(ds.y_train, ds.stats), ds.x_train, rtol=1e-5, atol=1e-5)


# *** normalization: statistics of the training split only ***


def test_normalize_uses_the_training_split_only(tmp_path: Path) -> None:
    x = np.stack([np.arange(50.0), np.full(50, 5.0)], axis=1)  # feature 0 differs between splits, feature 1 is constant
    np.savez(tmp_path / "d.npz", x=x, y=np.arange(50) % 3)
    ds = load_data(make_spec(tmp_path, "source: npz\npath: d.npz\nbatch_size: 4\n", model="[{linear: 3}]"))
    train, valid, _ = stratified_split(np.arange(50) % 3, 0.2, 0.0, 0)
    np.testing.assert_allclose(ds.stats["mean"], x[train].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(ds.stats["std"], [x[train, 0].std(), 1.0], rtol=1e-6)  # std 0 -> 1
    assert not np.allclose(ds.stats["mean"][0], x[:, 0].mean())
    np.testing.assert_allclose(ds.x_valid, (x[valid] - ds.stats["mean"]) / ds.stats["std"], rtol=1e-5)
    np.testing.assert_allclose(ds.x_train.mean(axis=0), 0, atol=1e-5)


def test_csv_normalize_matches_raw_training_columns() -> None:
    raw = load_data(validate_file(ROOT / "specs/house_prices.yaml", ["data.normalize=false"]))
    ds = load_data(validate_file(ROOT / "specs/house_prices.yaml"))
    assert raw.stats == {} and ds.stats["mean"].shape == (4,)
    np.testing.assert_allclose(ds.stats["mean"], raw.x_train.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(ds.stats["std"], raw.x_train.std(axis=0), rtol=1e-5)
    np.testing.assert_allclose(ds.x_valid, standardize(raw.x_valid, ds.stats), rtol=1e-5, atol=1e-5)
    assert np.array_equal(ds.y_valid, raw.y_valid)  # data.normalize is for inputs: both standardize the targets alike


# *** regression targets: standardized with statistics of the training split, saved as target_stats ***


def test_house_prices_targets_are_standardized_with_training_statistics() -> None:
    raw = load_data(validate_file(ROOT / "specs/house_prices.yaml", ["data.normalize_target=false"]))
    ds = load_data(validate_file(ROOT / "specs/house_prices.yaml"))
    assert raw.target_stats == {} and 150 < raw.y_train.mean() < 300  # prices in thousands: mean ~228, std ~94
    assert ds.target_stats["mean"].shape == ds.target_stats["std"].shape == (1,)
    assert ds.target_stats["mean"].dtype == ds.target_stats["std"].dtype == np.float32
    np.testing.assert_allclose(ds.target_stats["mean"], raw.y_train.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(ds.target_stats["std"], raw.y_train.std(axis=0), rtol=1e-5)
    np.testing.assert_allclose(ds.y_valid, standardize(raw.y_valid, ds.target_stats), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(unstandardize(ds.y_valid, ds.target_stats), raw.y_valid, rtol=1e-5)
    assert abs(ds.y_train.mean()) < 1e-5 and abs(ds.y_train.std() - 1) < 1e-4 and ds.y_train.dtype == np.float32


def test_target_statistics_never_see_the_validation_split(tmp_path: Path) -> None:
    y = np.zeros((50, 2))
    train, valid = split(50, 0.2, 0)
    y[train] = np.stack([np.arange(40.0), np.full(40, 7.0)], axis=1)  # column 1 is constant in training: std 0 -> 1
    y[valid] = 1000.0  # far off, so any use of the validation targets would move the statistics
    spec = npz_spec(tmp_path, model="[{linear: 2}]", train="{loss: mse}", x=np.zeros((50, 3)), y=y)
    ds = load_data(spec)
    np.testing.assert_allclose(ds.target_stats["mean"], [19.5, 7.0], rtol=1e-6)
    np.testing.assert_allclose(ds.target_stats["std"], [np.arange(40.0).std(), 1.0], rtol=1e-6)
    want = (1000.0 - np.array([19.5, 7.0])) / ds.target_stats["std"]
    np.testing.assert_allclose(ds.y_valid, np.broadcast_to(want, (10, 2)), rtol=1e-5)


def test_target_stats_are_empty_unless_regression() -> None:
    for name in ("digits_mlp", "digits_autoencoder", "char_gpt"):
        assert load_data(validate_file(ROOT / f"specs/{name}.yaml")).target_stats == {}, name


# *** class labels: csv columns (numbers or text), arrays, bundled sets; class names ***


def test_class_names_of_bundled_sets(tmp_path: Path) -> None:
    assert load_data(validate_file(ROOT / "specs/digits_mlp.yaml")).class_names == [str(i) for i in range(10)]
    assert load_data(make_spec(tmp_path, "source: spirals\nsamples: 100\n")).class_names == ["0", "1"]
    assert load_data(validate_file(ROOT / "specs/house_prices.yaml")).class_names is None


def test_csv_integer_labels_classify_with_task(tmp_path: Path) -> None:
    rows = "".join(f"{i},{i % 5},{i % 3}\n" for i in range(30))
    ds = load_data(csv_spec(tmp_path, "a,b,y\n" + rows, "task: classify\n", model="[{linear: 3}]", train=""))
    assert (ds.task, ds.num_classes, ds.class_names) == ("classify", 3, ["0", "1", "2"])
    assert ds.y_train.dtype == np.int32 and ds.y_train.shape == (24,) and ds.target_stats == {}
    train, _, _ = stratified_split(np.arange(30) % 3, 0.2, 0.0, 0)
    assert np.array_equal(ds.y_train, train % 3)


def test_csv_text_labels_classify_by_themselves(tmp_path: Path) -> None:
    kinds = ["setosa", "virginica", "versicolor"]
    rows = "".join(f"{i},{i % 5}, {kinds[i % 3]}\n" for i in range(30))
    ds = load_data(csv_spec(tmp_path, "a,b,y\n" + rows, model="[{linear: 3}]", train=""))
    assert (ds.task, ds.num_classes, ds.class_names) == ("classify", 3, ["setosa", "versicolor", "virginica"])
    train, _, _ = stratified_split(np.arange(30) % 3, 0.2, 0.0, 0)
    assert [ds.class_names[k] for k in ds.y_train] == [kinds[i % 3] for i in train]


def test_csv_label_problems_are_located_at_their_rows(tmp_path: Path) -> None:
    rows = "a,b,y\n" + "".join(f"{i},{i},{i % 3}\n" for i in range(10)) + "1,2,2.5\n1,2,-1\n1,2,7\n"
    file = tmp_path / "d.csv"
    spec = csv_spec(tmp_path, rows, "task: classify\n", model="[{linear: 3}]", train="")
    assert problems(spec) == [
        f"{file}:12:3: error: row 12, column 'y' is 2.5, not a whole number, so it cannot be a class label\n  hint: "
        "to predict the numbers themselves, set data.task: regress and train.loss: mse",
        f"{file}:13:3: error: row 13, column 'y' is -1: class labels are 0 or more\n  hint: number the classes 0, 1, "
        "2, ...",
        f"{file}:14:3: error: row 14, column 'y' is 7, out of range of the model's 3 classes (0..2): its output has "
        "one value per class\n  hint: the labels go up to 7: set the out of the last layer (line 5) to 8, or correct "
        "the label",
    ]


def test_large_labels_are_refused_not_wrapped(tmp_path: Path) -> None:
    y = np.arange(40, dtype=np.int64) % 2
    y[9] = 2**32 + 1  # wraps to 1 through int32
    spec = npz_spec(tmp_path, model="[{linear: 2}]", x=np.zeros((40, 3)), y=y)
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 1}:9: error: y[9] in d.npz is 4294967297, too "
                              "large: out of range of the model's 2 classes (0..1)\n  hint: correct the label: classes "
                              "are numbered 0, 1, 2, ..., and a model has at most 1048576 of them"]  # fmt: skip
    spec = npz_spec(tmp_path, model="[{linear: 2}]", train="{loss: mse}", x=np.zeros((40, 3)), y=y)
    assert any("y[9] in d.npz is 4294967297, too large: out of range of int32 class labels" in p
               for p in problems(spec))  # fmt: skip
    y = (np.arange(40) % 2).astype(np.uint64)
    y[7] = 2**63 + 5  # float64 would show 9223372036854775808
    got = problems(npz_spec(tmp_path, x=np.zeros((40, 3)), y=y))
    assert "y[7] in d.npz is 9223372036854775813, too large" in got[0]


@pytest.mark.parametrize("big", [2**40, 2**63, 2**70, 2**53 + 1])
def test_huge_csv_labels_are_exact_and_too_large(tmp_path: Path, big: int) -> None:
    rows = "a,b,y\n" + "".join(f"{i},{i},{i % 3}\n" for i in range(10)) + f"1,2,{big}\n"
    got = problems(csv_spec(tmp_path, rows, "task: classify\n", model="[{linear: 3}]", train=""))
    assert got == [f"{tmp_path / 'd.csv'}:12:3: error: row 12, column 'y' is {big}, too large: out of range of the "
                   "model's 3 classes (0..2)\n  hint: correct the label: classes are numbered 0, 1, 2, ..., and a "
                   "model has at most 1048576 of them"]  # fmt: skip


def test_one_class_is_not_a_classifier(tmp_path: Path) -> None:
    rows = "a,b,y\n" + "".join(f"{i},{i},cat\n" for i in range(10))
    got = problems(csv_spec(tmp_path, rows, model="[{linear: 1}]", train=""))
    assert got == [f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 2}:11: error: the classes in column 'y' of d.csv hold only "
                   "one class (cat): a classifier needs examples of at least 2 classes\n  hint: add examples of the "
                   "other classes"]  # fmt: skip
    rows = "a,b,y\n" + "".join(f"{i},{i},1\n" for i in range(10))
    got = problems(csv_spec(tmp_path, rows, "task: classify\n", model="[{linear: 2}]", train=""))
    assert got[0].endswith("hold only one class (1): a classifier needs examples of at least 2 classes\n  hint: add "
                           "examples of the other classes; to predict the numbers themselves, set data.task: regress "
                           "and train.loss: mse")  # fmt: skip
    got = problems(npz_spec(tmp_path, model="[{linear: 1}]", x=np.zeros((40, 3)), y=np.zeros(40, dtype=np.int64)))
    assert "'y' in d.npz hold only one class (0)" in got[0]


def test_class_counts_are_singular_or_plural(tmp_path: Path) -> None:
    got = problems(make_spec(tmp_path, "source: spirals\n", model="[{linear: 1}]"))
    assert "the model's output has 1 value per example, one per class, but the spiral labels hold 2 classes" in got[0]
    rows = "a,b,y\n" + "".join(f"{i},{i},{i % 2}\n" for i in range(10))
    got = problems(csv_spec(tmp_path, rows, "task: classify\n", model="[{linear: 1}]", train=""))
    assert "out of range of the model's 1 class (0..0)" in got[0]


def test_stray_text_in_a_column_of_numbers_is_a_probable_typo(tmp_path: Path) -> None:
    rows = "a,b,y\n" + "".join(f"{i},{i},{i % 12}\n" for i in range(30)) + "1,2,cat\n"
    got = problems(csv_spec(tmp_path, rows, model="[{linear: 13}]", train=""))
    assert got == [f"{tmp_path / 'd.csv'}:32:3: error: row 32, column 'y': 'cat' is not a number, but 30 of the "
                   "column's 31 values are whole numbers, so it is probably a typo\n  hint: correct it or remove the "
                   "row; if the column holds class names, set data.task: classify"]  # fmt: skip
    ds = load_data(csv_spec(tmp_path, rows, "task: classify\n", model="[{linear: 13}]", train=""))
    assert ds.class_names == [*(str(i) for i in range(12)), "cat"]  # 2 before 10: whole numbers in numeric order
    train, _, _ = stratified_split(np.array([*(np.arange(30) % 12), 12]), 0.2, 0.0, 0)
    assert [ds.class_names[k] for k in ds.y_train] == [str(i % 12) if i < 30 else "cat" for i in train]
    rows = "a,b,y\n" + "".join(f"{i},{i},{'cat' if i % 2 else i % 3}\n" for i in range(30))  # half words: classes
    assert load_data(csv_spec(tmp_path, rows, model="[{linear: 4}]", train="")).class_names == ["0", "1", "2", "cat"]


def test_width_and_loss_must_fit_the_labels(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, "source: spirals\n", model="[{linear: 3}]")
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:5:9: error: the model's output has 3 values per example, one "
                              "per class, but the spiral labels hold 2 classes (0, 1)\n  hint: set the out of this "
                              "last layer to 2"]  # fmt: skip
    spec = make_spec(tmp_path, "source: spirals\n", train="{loss: mse}")
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 1}:15: error: train.loss is mse, but the spiral "
                              "labels are class labels, which cross_entropy learns\n  hint: use loss: "
                              "cross_entropy"]  # fmt: skip


def test_float_labels_must_be_whole_to_classify(tmp_path: Path) -> None:
    y = np.arange(40.0) % 2
    ds = load_data(npz_spec(tmp_path, "task: classify\n", x=np.zeros((40, 3)), y=y))
    assert ds.task == "classify" and ds.y_train.dtype == np.int32 and ds.num_classes == 2
    y[3] = 0.5
    assert problems(npz_spec(tmp_path, "task: classify\n", x=np.zeros((40, 3)), y=y))[0].endswith(
        "y[3] in d.npz is 0.5, not a whole number, so it cannot be a class label\n  hint: to predict the numbers "
        "themselves, set data.task: regress and train.loss: mse")  # fmt: skip


def test_integer_regression_targets_must_fit_float32(tmp_path: Path) -> None:
    y = np.arange(40, dtype=np.int64)
    ds = load_data(npz_spec(tmp_path, "task: regress\n", model="[{linear: 1}]", train="{loss: mse}",
                            x=np.zeros((40, 3)), y=y))  # fmt: skip
    assert ds.task == "regress" and ds.y_train.dtype == np.float32
    y[5] = 2**24 + 1
    got = problems(npz_spec(tmp_path, "task: regress\n", model="[{linear: 1}]", train="{loss: mse}",
                            x=np.zeros((40, 3)), y=y))  # fmt: skip
    assert got[0].endswith("y[5] in d.npz is 16777217 (or minus it): regression targets are float32, which holds "
                           "whole numbers exactly up to 16777216 only\n  hint: scale the targets down, or save them as "
                           "floats")  # fmt: skip


def test_integer_csv_regression_targets_must_fit_float32_as_in_npz(tmp_path: Path) -> None:
    for big in (2**24 + 1, 2**53 + 1, -(2**40)):
        rows = "a,b,y\n" + "".join(f"{i},{i},{i}\n" for i in range(10)) + f"1,2,{big}\n"
        assert problems(csv_spec(tmp_path, rows)) == [
            f"{tmp_path / 'd.csv'}:12:3: error: row 12, column 'y' is {big}: regression targets are float32, which "
            "holds whole numbers exactly up to 16777216 only\n  hint: scale the targets down (thousands instead of "
            "units, say)"]  # fmt: skip
    rows = "a,b,y\n" + "".join(f"{i},{i},{i}\n" for i in range(10)) + f"1,2,{2**24}\n1,2,20000000.5\n"
    assert load_data(csv_spec(tmp_path, rows)).task == "regress"


def test_several_outputs_need_a_loss_each_and_an_npz_source(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    head = ("specgrad: 1\nname: t\ninputs: {a: {shape: [2]}}\nmodel:\n  graph:\n"
            "    - {name: p, layer: linear, out: 2, from: a}\n    - {name: q, layer: linear, out: 2, from: a}\n"
            "  outputs: [p, q]\ndata: {source: spirals}\n")  # fmt: skip
    path.write_text(head)
    with pytest.raises(SpecError) as e:
        validate_file(path)
    assert [str(p) for p in e.value.problems] == [
        f"{path}:8:12: error: the model has 2 outputs (p, q), so training needs a loss for each of them\n  hint: add "
        "train.losses, e.g. losses: {p: {loss: cross_entropy}, q: {loss: mse, weight: 0.5}}"]  # fmt: skip
    path.write_text(head + "train: {losses: {p: {loss: cross_entropy}, q: {loss: mse}}}\n")
    assert problems(validate_file(path)) == [
        f"{path}:9:16: error: source spirals feeds a model with one input and one output, but this one has inputs a "
        "and outputs p, q\n  hint: use source: npz, with one array per input and per output, named after them"
    ]


# *** text ***


def test_sonnets_windows_are_shifted_by_one_and_split_by_position() -> None:
    ds = load_data(validate_file(ROOT / "specs/char_gpt.yaml"))
    codes = np.array([ord(c) for c in load_text("sonnets")])
    cut = len(codes) - round(len(codes) * 0.2)
    assert (ds.task, ds.num_classes) == ("language", 128)
    assert len(ds.x_train) == (cut - 65) // 32 + 1  # windows every context // 2 characters
    for k in (0, 1, len(ds.x_train) - 1):
        assert np.array_equal(ds.x_train[k], codes[32 * k : 32 * k + 64])
        assert np.array_equal(ds.y_train[k], codes[32 * k + 1 : 32 * k + 65])
    assert 32 * (len(ds.x_train) - 1) + 65 <= cut  # no training window reaches the validation text
    assert np.array_equal(ds.x_valid[0], codes[cut : cut + 64])
    assert np.array_equal(ds.y_valid[:, :-1], ds.x_valid[:, 1:])


def test_text_file_is_relative_to_the_spec(tmp_path: Path) -> None:
    (tmp_path / "corpus.txt").write_bytes(b"\xef\xbb\xbf" + b"abcdefghij\r\n" * 10)  # a BOM and Windows line ends
    spec = make_spec(tmp_path, "source: text\npath: corpus.txt\ncontext: 8\nbatch_size: 2\nvalid_split: 0.2\n",
                     "[8]", "int32", TEXT_MODEL)  # fmt: skip
    ds = load_data(spec)
    assert ds.x_train.dtype == np.int32 and ds.x_train.shape[1:] == (8,)
    assert "".join(map(chr, ds.x_train[0])) == "abcdefgh" and "".join(map(chr, ds.x_train[1])) == "efghij\na"
    assert ds.stats == {}


def test_non_ascii_text_is_located() -> None:
    file = FIXTURES / "non_ascii.txt"
    hint = "  hint: remove or replace it, or raise the embedding's vocab (now 128) to at least"
    assert problems(validate_file(FIXTURES / "text_non_ascii.yaml")) == [
        f"{file}:1:33: error: the character '\u2019' (U+2019) is outside the model's 128 characters (codes 0..127); "
        f"it appears 2 times\n{hint} 8218",
        f"{file}:5:47: error: the character '\u00e9' (U+00E9) is outside the model's 128 characters (codes 0..127); "
        f"it appears 1 time\n{hint} 234",
    ]


def test_text_not_utf8_and_too_short(tmp_path: Path) -> None:
    data = "source: text\npath: t.txt\ncontext: 8\nbatch_size: 2\n"
    (tmp_path / "t.txt").write_bytes(b"abc\nd\xffe\n")
    spec = make_spec(tmp_path, data, "[8]", "int32", TEXT_MODEL)
    assert problems(spec) == [f"{tmp_path / 't.txt'}:2:2: error: t.txt is not UTF-8 text: byte 0xff here cannot be "
                              "read\n  hint: save the file as UTF-8 (most editors offer it in Save As)"]  # fmt: skip
    (tmp_path / "t.txt").write_text("just a short line\n")
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 2}:12: error: the 18 characters of "
                              f"{tmp_path / 't.txt'} with context 8 and valid_split 0.2 leave no validation examples"
                              "\n  hint: add examples, or set valid_split: 0"]  # fmt: skip


def test_text_context_must_match_the_input(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, "source: text\ncorpus: sonnets\ncontext: 8\n", "[16]", "int32", TEXT_MODEL)
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 2}:12: error: data.context is 8, but the "
                              "input 'input' has shape [16]\n  hint: set the input's shape to [8]"]  # fmt: skip


# *** csv ***


def test_house_prices_csv() -> None:
    ds = load_data(validate_file(ROOT / "specs/house_prices.yaml"))
    assert ds.x_train.shape == (320, 4) and ds.y_train.shape == (320, 1) and ds.x_valid.shape == (80, 4)
    assert (ds.task, ds.num_classes) == ("regress", None) and ds.y_train.dtype == np.float32


def csv_spec(folder: Path, text: str, extra: str = "", shape: str = "[2]", model: str = "[{linear: 1}]",
             train: str = "{loss: mse}") -> ValidSpec:  # fmt: skip
    (folder / "d.csv").write_text(text)
    data = f"source: csv\npath: d.csv\ntarget: y\nbatch_size: 2\n{extra}"
    return make_spec(folder, data, shape, model=model, train=train)


def test_csv_default_features_are_every_other_column(tmp_path: Path) -> None:
    rows = "".join(f"{i},{3 * i},note {i},{i % 2}\n" for i in range(10))
    ds = load_data(csv_spec(tmp_path, "a,y,note,c\n" + rows, "features: [a, c]\n"))
    assert ds.x_train.shape == (8, 2)  # the text column is not a feature, so it is never read as a number
    rows = "a,b,y\n" + "".join(f"{i},{2 * i},{3 * i}\n" for i in range(10))
    spec = csv_spec(tmp_path, rows, "normalize: false\nnormalize_target: false\n")
    ds = load_data(spec)
    a = ds.x_train[:, 0]
    assert np.array_equal(ds.x_train[:, 1], 2 * a) and np.array_equal(ds.y_train[:, 0], 3 * a)


def missing_hint(column: str) -> str:
    return (
        "fill in a number, or remove the row; or let specgrad fill missing cells: data.missing: mean, median, "
        f"mode, drop_row or {{fill: VALUE}} (for one column: data.missing_columns: {{{column}: ...}})"
    )


def test_csv_bad_cells_are_all_reported() -> None:
    file, spec = FIXTURES / "bad_cells.csv", FIXTURES / "bad_cells.yaml"
    assert problems(validate_file(spec)) == [
        # NOTE: the spec's own mistake (no train: section, so the default loss) is found beside the bad cells
        f"{spec}:9:11: error: train.loss is cross_entropy (the default), which learns class labels, but the values of "
        "column 'price' in bad_cells.csv are numbers to predict (a regression)\n  hint: use loss: mse; if the numbers "
        "are class labels 0, 1, 2, ..., set data.task: classify",
        f"{file}:3:2: error: row 3, column 'area' is missing ('n/a')\n  hint: {missing_hint('area')}",
        f"{file}:4:3: error: row 4, column 'age' is missing ('nan')\n  hint: {missing_hint('age')}",
        f"{file}:5:4: error: row 5 has 3 cells, but the header has 4 columns\n  hint: check for a missing or extra "
        "comma; a value with a comma in it goes in quotes",
    ]


def test_csv_missing_column_says_did_you_mean(tmp_path: Path) -> None:
    spec = csv_spec(tmp_path, "rooms,area,y\n" + "1,2,3\n" * 5, "features: [rooms, arae]\n")
    # NOTE: at the spec's item to edit, the header's place as context
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 4}:21: error: data.features names the column "
                              "'arae', but d.csv has no such column (d.csv:1:1)\n  hint: did you mean 'area'? the "
                              "header has: rooms, area, y"]  # fmt: skip


def test_csv_without_header_says_so(tmp_path: Path) -> None:
    spec = csv_spec(tmp_path, "1,2,3\n4,5,6\n", "features: [a, b]\n")
    hint = "  hint: the first row holds numbers: it must be a header row naming the columns. the header has: 1, 2, 3"
    at, lacks = f"{tmp_path / 'spec.yaml'}", f"but d.csv has no such column (d.csv:1:1)\n{hint}"
    assert problems(spec) == [  # NOTE: every name the header lacks, each at its key, in the spec's order
        f"{at}:{DATA_LINE + 2}:11: error: data.target names the column 'y', {lacks}",
        f"{at}:{DATA_LINE + 4}:14: error: data.features names the column 'a', {lacks}",
        f"{at}:{DATA_LINE + 4}:17: error: data.features names the column 'b', {lacks}",
    ]


@pytest.mark.parametrize(("text", "where", "message"), [
    ("", "1:1", "d.csv is empty: a CSV file needs a header row naming the columns, then one row per example"),
    ("\n\n", "1:1", "d.csv is empty: a CSV file needs a header row naming the columns, then one row per example"),
    ("a,b,y\n", "2:1", "d.csv has a header but no rows of data"),
    ("a,b,y\n1,2,3\n\n4,,6\n" + "1,2,3\n" * 3, "4:2", f"row 4, column 'b' is empty\n  hint: {missing_hint('b')}"),
    ("a,b,y\n1,2,3,4\n" + "1,2,3\n" * 4, "2:4", "row 2 has 4 cells, but the header has 3 columns\n  hint: check for "
     "a missing or extra comma; a value with a comma in it goes in quotes"),
    ("a,b,y\n1,2,inf\n", "2:3", "row 2, column 'y': 'inf' is not a finite number\n  hint: missing or infinite values "
     "cannot be learned from: fill in a number, or remove the row"),
])  # fmt: skip
def test_csv_errors_are_located(tmp_path: Path, text: str, where: str, message: str) -> None:
    assert problems(csv_spec(tmp_path, text)) == [f"{tmp_path / 'd.csv'}:{where}: error: {message}"]


def test_too_few_rows_for_a_batch_is_at_batch_size(tmp_path: Path) -> None:
    batch = (f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 3}:15: error: batch_size 2 is more than the training split has: "
             "the 2 data rows of d.csv with valid_split 0.2 leave 1 training examples, and training uses full batches "
             "only (d.csv:{}:1)\n  hint: lower data.batch_size or data.valid_split, or add examples")  # fmt: skip
    assert problems(csv_spec(tmp_path, "a,b,y\n1,2,3\n4,5,6\n")) == [batch.format(3)]
    # NOTE: a bad cell stops none of the checks that do not read it: the split is still too small
    assert problems(csv_spec(tmp_path, "a,b,y\n1,2,3\n\n4,,6\n")) == [
        batch.format(4),
        f"{tmp_path / 'd.csv'}:4:2: error: row 4, column 'b' is empty\n  hint: {missing_hint('b')}",
    ]


def test_csv_feature_count_must_match_the_input(tmp_path: Path) -> None:
    spec = csv_spec(tmp_path, "a,b,c,y\n" + "1,2,3,4\n" * 5, shape="[2]")
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:4:16: error: data.features gives 3 columns (a, b, c), "
                              "shape [3] per example, but the input's shape is [2]\n  hint: set the input's shape "
                              "to [3]"]  # fmt: skip


def test_missing_csv_file_is_located_at_data_path(tmp_path: Path) -> None:
    spec = csv_spec(tmp_path, "a,b,y\n1,2,3\n")
    (tmp_path / "d.csv").unlink()  # gone after validation
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 1}:9: error: data.path: no such file: "
                              f"{tmp_path / 'd.csv'}\n  hint: paths are relative to the folder of the spec that names "
                              "them"]  # fmt: skip


# *** npz ***


def npz_spec(folder: Path, extra: str = "", shape: str = "[3]", model: str = "[flatten, {linear: 2}]", train: str = "",
             **arrays: np.ndarray) -> ValidSpec:  # fmt: skip
    np.savez(folder / "d.npz", **arrays)
    return make_spec(folder, f"source: npz\npath: d.npz\nbatch_size: 4\n{extra}", shape, model=model, train=train)


def test_npz_integer_targets_classify(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    ds = load_data(npz_spec(tmp_path, model="[{linear: 5}]", x=rng.standard_normal((40, 3)), y=rng.integers(0, 5, 40)))
    assert (ds.task, ds.num_classes, ds.class_names) == ("classify", 5, ["0", "1", "2", "3", "4"])
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32 and ds.x_train.shape == (32, 3)


def test_npz_float_targets_regress_and_named_target(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    mse = {"model": "[{linear: 1}]", "train": "{loss: mse}"}
    ds = load_data(npz_spec(tmp_path, "target: price\n", **mse, x=rng.standard_normal((40, 3)), price=np.arange(40.0)))
    assert (ds.task, ds.num_classes, ds.class_names) == ("regress", None, None) and ds.y_train.shape == (32, 1)
    assert ds.y_train.dtype == np.float32 and ds.target_stats["mean"].shape == (1,)
    ds = load_data(npz_spec(tmp_path, "target: input\n", model="[{linear: 3}]", train="{loss: mse}",
                            x=rng.standard_normal((40, 3))))  # fmt: skip
    assert ds.task == "regress" and ds.y_train.shape == (32, 3) and ds.target_stats == {}


@pytest.mark.parametrize(("extra", "arrays", "where", "message"), [
    ("target: label\n", {"labels": np.zeros(40, int)}, f"{DATA_LINE + 3}:11",
     "d.npz has no array named 'label'\n  hint: did you mean 'labels'? it holds: x, labels"),
    ("", {"z": np.zeros(40, int)}, f"{DATA_LINE + 1}:9", "d.npz has no array named 'y'\n  hint: it holds: x, z"),
    ("", {"y": np.zeros(39, int)}, f"{DATA_LINE + 1}:9", "'y' in d.npz has 39 examples but 'x' has 40\n  hint: save "
     "one target per example"),
    ("", {"y": np.arange(40) % 2 - 1}, f"{DATA_LINE + 1}:9", "y[0] in d.npz is -1: class labels are 0 or more (and 19 "
     "more examples like it)\n  hint: number the classes 0, 1, 2, ..."),
])  # fmt: skip
def test_npz_errors_are_located(tmp_path: Path, extra: str, arrays: dict, where: str, message: str) -> None:
    spec = npz_spec(tmp_path, extra, x=np.zeros((40, 3)), **arrays)
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:{where}: error: {message}"]


def test_npz_nan_shape_and_missing_file(tmp_path: Path) -> None:
    x = np.zeros((40, 3))
    x[7, 1] = np.nan
    spec = npz_spec(tmp_path, x=x, y=np.zeros(40, int))
    at = f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 1}:9: error:"
    assert problems(spec) == [f"{at} x[7] in d.npz holds NaN or infinity (1 of 40 examples do)\n  hint: fill in or "
                              "remove those examples"]  # fmt: skip
    # NOTE: two classes: a y of one class would be a problem of its own, reported beside the shape
    spec = npz_spec(tmp_path, shape="[4]", x=np.zeros((40, 3)), y=np.arange(40) % 2)
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:4:16: error: 'x' in d.npz holds examples of shape [3], but "
                              "the input's shape is [4]\n  hint: set the input's shape to [3]"]  # fmt: skip
    (tmp_path / "d.npz").write_text("not numpy")
    assert problems(spec)[0].startswith(f"{at} d.npz cannot be read as a .npz file")
    (tmp_path / "d.npz").unlink()
    assert problems(spec)[0].startswith(f"{at} data.path: no such file: {tmp_path / 'd.npz'}")


# *** generated sources ***


def test_spirals(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, "source: spirals\nsamples: 200\nnoise: 0.1\n")
    ds = load_data(spec)
    assert ds.x_train.shape == (160, 2) and ds.x_valid.shape == (40, 2) and ds.x_train.dtype == np.float32
    assert (ds.task, ds.num_classes) == ("classify", 2) and set(np.unique(ds.y_train)) == {0, 1}
    assert same(ds, load_data(spec))
    assert not same(ds, load_data(make_spec(tmp_path, "source: spirals\nsamples: 200\nnoise: 0.1\n",
                                            overrides=("seed=1",))))  # fmt: skip


def test_sine(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, "source: sine\nsamples: 100\nnormalize: false\nnormalize_target: false\n", "[1]",
                     model="[{linear: 1}]", train="{loss: mse}")  # fmt: skip
    ds = load_data(spec)
    assert ds.x_train.shape == ds.y_train.shape == (80, 1) and ds.task == "regress"
    assert -3 <= ds.x_train.min() and ds.x_train.max() <= 3
    np.testing.assert_allclose(ds.y_train, np.sin(ds.x_train), atol=1e-6)


def test_generated_shape_must_match_the_input(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, "source: spirals\n", "[3]")
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:4:16: error: spirals are points in the plane, shape [2] "
                              "per example, but the input's shape is [3]\n  hint: set the input's shape to "
                              "[2]"]  # fmt: skip


def test_keys_for_other_sources_are_errors(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, "source: spirals\ncontext: 8\ntask: regress\n")
    assert problems(spec) == [
        f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 1}:12: error: data.context is for the text source, not spirals",
        f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 2}:9: error: data.task is for the csv and npz sources, not spirals",
    ]


def test_keys_that_do_not_apply_are_errors(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, "source: digits\ntarget: label\n", "[64]")
    assert problems(spec) == [f"{tmp_path / 'spec.yaml'}:{DATA_LINE + 1}:11: error: data.target 'label' does not "
                              "apply to source digits\n  hint: leave it out for the digit labels, or write input to "
                              "rebuild the image"]  # fmt: skip


def test_no_data_section(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("specgrad: 1\nname: t\ninput: {shape: [2]}\nmodel: [{linear: 1}]\n")
    assert problems(validate_file(path)) == [f"{path}:1:1: error: the spec has no data: section, so there is "
                                             "nothing to train on\n  hint: add one, for example data: {source: "
                                             "digits}"]  # fmt: skip


# *** batches ***


def test_batches_are_full_and_seeded() -> None:
    x, y = np.arange(10)[:, None], np.arange(10)
    plain = list(batches(x, y, 3, shuffle=False))
    assert [b[1].tolist() for b in plain] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]  # the partial batch [9] is dropped
    a = [b[1].tolist() for b in batches(x, y, 3, True, np.random.default_rng(5))]
    assert a == [b[1].tolist() for b in batches(x, y, 3, True, np.random.default_rng(5))]
    assert a != [b[1].tolist() for b in batches(x, y, 3, True, np.random.default_rng(6))]
    assert len(a) == 3 and len(set(sum(a, []))) == 9
    assert all(np.array_equal(bx[:, 0], by) for bx, by in batches(x, y, 3, True, np.random.default_rng(0)))
    assert list(batches(x, y, 11, shuffle=False)) == []


def test_eval_batches_cover_every_example_in_order() -> None:
    x, y = np.arange(10)[:, None], np.arange(10)
    out = list(eval_batches(x, y, 4))
    assert [len(b[1]) for b in out] == [4, 4, 2]
    assert np.array_equal(np.concatenate([b[1] for b in out]), y)


def test_data_path_is_relative_to_the_spec_that_names_it(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    csv_spec(tmp_path / "base", "a,b,y\n" + "1,2,3\n" * 10)  # writes base/d.csv and base/spec.yaml
    (tmp_path / "child.yaml").write_text("specgrad: 1\nextends: base/spec.yaml\nname: child\n")
    ds = load_data(validate_file(tmp_path / "child.yaml"))
    assert ds.x_train.shape == (8, 2)


def test_npz_of_python_objects_is_refused(tmp_path: Path) -> None:
    spec = npz_spec(tmp_path, x=np.zeros((40, 3)), y=np.zeros(40, int))
    np.savez(tmp_path / "d.npz", x=np.array([{}, 1], dtype=object))
    assert problems(spec)[0].endswith("d.npz cannot be read as a .npz file ('x.npy' holds Python objects, which are "
                                      "never loaded)\n  hint: save the arrays with numpy: np.savez(path, x=inputs, "
                                      "y=targets)")  # fmt: skip


def test_npy_inputs_with_targets_in_a_second_file(tmp_path: Path) -> None:
    """source: npz also reads a single .npy of inputs, with `target` naming a .npy of targets beside it."""
    from specgrad.modelspec.validate import validate_file
    from specgrad.train.data import load_data

    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((50, 3)).astype(np.float32))
    np.save(tmp_path / "y.npy", rng.integers(0, 4, 50).astype(np.int64))
    spec = tmp_path / "s.yaml"
    spec.write_text("specgrad: 1\nname: n\ninput: {shape: [3]}\nmodel:\n  - linear: 4\n"
                    "data: {source: npz, path: x.npy, target: y.npy, batch_size: 8}\n")  # fmt: skip
    data = load_data(validate_file(spec))
    assert data.task == "classify" and data.num_classes == 4
    assert len(data.x_train) + len(data.x_valid) == 50 and data.y_train.dtype == np.int32


# *** docs/datasets.md: every spec in "Your own data" validates and loads ***


def test_the_datasets_guide_specs_validate_and_load(tmp_path: Path) -> None:
    from PIL import Image

    text = (ROOT / "docs" / "datasets.md").read_text()
    specs = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL) if b.startswith("specgrad: 1")]
    assert len(specs) == 4, "the guide's example specs"
    rows = ["size,rooms,color,city,price"]
    for i in range(80):
        color, city = ("red", "green", "blue")[i % 3], ("Berlin", "Paris", "Rome", "Oslo")[i % 4]
        rows.append(f"{30 + i},{1 + i % 5},{color},{city},{100 + 3 * i + 10 * (i % 3)}")
    (tmp_path / "shop.csv").write_text("\n".join(rows) + "\n")
    rng = np.random.default_rng(0)
    for name in ("cat", "dog"):
        for k in range(4):
            (tmp_path / "photos" / name).mkdir(parents=True, exist_ok=True)
            size = (40, 30) if k % 2 else (32, 32)  # NOTE: resize: true scales them all to 32x32
            Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(
                tmp_path / "photos" / name / f"{k}.{'png' if k < 2 else 'jpg'}")  # fmt: skip
    for k, body in enumerate(specs):
        path = tmp_path / f"spec{k}.yaml"
        path.write_text(body)
        ds = load_data(validate_file(path, ["data.batch_size=2"]))
        assert len(ds.x_train) and ds.x_train.shape[1:] == next(iter(validate_file(path).inputs.values()))[0]


def test_a_std_too_small_for_float32_is_taken_as_a_constant() -> None:
    """A column whose spread is subnormal (or rounds to 0) in float32 gets std 1, as a constant does: the weights'
    metadata check refuses any std that is not a normal float32, so training must never write one (issue 30)."""
    from specgrad.train.data import _statistics

    x = np.array([[1.0, 0.0, 5.0, 1e-40], [1.0, 1e-39, 6.0, -1e-40], [1.0, 2e-39, 7.0, 0.0]])
    std = _statistics(x, axis=0)["std"]
    assert std.dtype == np.float32 and std[0] == 1 and std[1] == 1 and std[3] == 1
    assert std[2] == np.float32(np.std([5.0, 6.0, 7.0]))
    assert (std >= np.finfo(np.float32).tiny).all()
