"""Splits: data.split_seed (the split's own seed), stratified validation and test splits (data.stratify), run folders
written before stratify existed, and data.class_names for whole-number labels."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from specgrad.datasets import load_digits, split
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import ValidSpec, validate_file
from specgrad.train.data import load_data, stratified_split
from specgrad.train.run_folder import resolved_spec_text, spec_hash

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "specs" / "digits_mlp.yaml"


def npz_spec(folder: Path, y: np.ndarray, data: str = "", model: str = "[{linear: 3}]", train: str = "",
             name: str = "spec.yaml", seed: int = 0) -> Path:  # fmt: skip
    """A spec (data section from line 6) over d.npz: 3 random features per example and the labels y."""
    np.savez(folder / "d.npz", x=np.random.default_rng(1).standard_normal((len(y), 3)), y=y)
    text = f"specgrad: 1\nname: t\nseed: {seed}\ninput: {{shape: [3]}}\nmodel: {model}\ndata:\n"
    text += textwrap.indent(f"source: npz\npath: d.npz\nbatch_size: 4\n{textwrap.dedent(data)}", "  ")
    (folder / name).write_text(text + (f"train: {train}\n" if train else ""))
    return folder / name


def problems(spec: ValidSpec) -> list[str]:
    with pytest.raises(SpecError) as e:
        load_data(spec)
    return [str(p) for p in e.value.problems]


def counts(y: np.ndarray, k: int) -> list[int]:
    return np.bincount(y, minlength=k).tolist()


# *** data.split_seed ***


def test_split_seed_keeps_one_split_while_the_seed_varies() -> None:
    a = load_data(validate_file(DIGITS, ["seed=0", "data.split_seed=5"]))
    b = load_data(validate_file(DIGITS, ["seed=1", "data.split_seed=5"]))
    assert np.array_equal(a.y_valid, b.y_valid) and np.array_equal(a.x_valid, b.x_valid)
    assert np.array_equal(a.y_train, b.y_train)
    c = load_data(validate_file(DIGITS, ["seed=1"]))  # NOTE: without it the training seed draws the split
    assert not np.array_equal(a.y_valid, c.y_valid)


def test_split_seed_left_out_is_the_seed_so_old_specs_keep_their_split() -> None:
    by_seed = load_data(validate_file(DIGITS, ["seed=7"]))
    by_split_seed = load_data(validate_file(DIGITS, ["data.split_seed=7"]))
    assert np.array_equal(by_seed.y_valid, by_split_seed.y_valid)
    random = load_data(validate_file(DIGITS, ["seed=7", "data.stratify=false"]))
    _, valid = split(1797, 0.2, 7)  # NOTE: the split of every specgrad before data.stratify, bit for bit
    assert np.array_equal(random.y_valid, load_digits()[1][valid])


def test_split_seed_applies_to_the_test_split_too(tmp_path: Path) -> None:
    y = np.arange(60) % 3
    spec = npz_spec(tmp_path, y, "test_split: 0.2\nsplit_seed: 11\n")
    a, b = (load_data(validate_file(spec, [f"seed={s}"]), held="test") for s in (0, 1))
    assert np.array_equal(a.x_valid, b.x_valid) and len(a.x_valid) == 12


def test_split_seed_is_not_for_the_text_source(tmp_path: Path) -> None:
    spec = validate_file(ROOT / "specs" / "char_gpt.yaml", ["data.split_seed=3"])
    assert problems(spec) == ["--set data.split_seed=3:1:17: error: data.split_seed is for the digits, csv, npz, "
                              "images, spirals and sine sources, not text"]  # fmt: skip


# *** stratified splits ***


def test_each_class_keeps_its_share_of_validation_and_test(tmp_path: Path) -> None:
    y = np.array([0] * 70 + [1] * 25 + [2] * 5)
    spec = validate_file(npz_spec(tmp_path, y, "valid_split: 0.2\ntest_split: 0.1\n"))
    valid, test = load_data(spec), load_data(spec, held="test")
    assert counts(valid.y_valid, 3) == [14, 5, 1] and counts(test.y_valid, 3) in ([7, 3, 0], [7, 2, 1])  # 7 2.5 0.5
    assert counts(valid.y_train, 3) == (np.array([56, 20, 4]) - counts(test.y_valid, 3)).tolist()
    assert valid.test_examples == 10
    plain = load_data(validate_file(spec.path, ["data.stratify=false"]))
    _, want = split(100, 0.2, 0)
    assert np.array_equal(plain.y_valid, y[want])  # the random split, as before


def test_validation_is_the_same_with_a_test_split_or_without(tmp_path: Path) -> None:
    y = np.random.default_rng(3).integers(0, 4, 203)
    without = load_data(validate_file(npz_spec(tmp_path, y, "normalize: false\n", model="[{linear: 4}]")))
    with_test = load_data(validate_file(npz_spec(tmp_path, y, "normalize: false\ntest_split: 0.15\n",
                                                 model="[{linear: 4}]")))  # fmt: skip
    assert np.array_equal(without.x_valid, with_test.x_valid) and len(with_test.x_train) == len(without.x_train) - 30


@pytest.mark.parametrize("n,k,valid,test", [(7, 2, 0.2, 0.0), (50, 3, 0.3, 0.2), (101, 5, 0.1, 0.1),
                                            (1000, 10, 0.2, 0.0), (9, 9, 0.5, 0.3), (30, 1, 0.2, 0.0),
                                            (40, 2, 0.0, 0.25), (1, 1, 0.2, 0.0)])  # fmt: skip
def test_stratified_split_shares_and_totals(n: int, k: int, valid: float, test: float) -> None:
    y = np.random.default_rng(n).integers(0, k, n)
    train, v, t = stratified_split(y, valid, test, seed=2)
    assert sorted([*train, *v, *t]) == list(range(n))  # every example once
    plain_train, plain_valid = split(n, valid, 2) if valid else (np.arange(n), np.arange(0))
    assert len(v) == len(plain_valid) and len(t) == min(len(plain_train), max(1, round(n * test)) if test else 0)
    for c in range(k):
        for part in (v, t):
            assert abs((y[part] == c).sum() - (y == c).sum() * len(part) / n) < 1, (c, part)


def test_stratified_split_depends_on_the_classes_not_their_numbers() -> None:
    y = np.random.default_rng(0).integers(0, 4, 97)
    renamed = np.array([30, 10, 0, 20])[y]
    assert all(np.array_equal(a, b) for a, b in zip(stratified_split(y, 0.2, 0.1, 5),
                                                     stratified_split(renamed, 0.2, 0.1, 5)))  # fmt: skip


def test_a_csv_split_for_its_vocabularies_is_the_split_it_trains_on(tmp_path: Path) -> None:
    """The categories are the training rows' (read before the labels are checked): both must be one split, so a
    category of a validation row is reported as one, and one of a training row is learned."""
    labels = ["cat"] * 6 + ["dog"] * 24
    train, valid, _ = stratified_split(np.array(labels), 0.2, 0.0, 0)
    random_train, random_valid = split(30, 0.2, 0)
    spec = tmp_path / "spec.yaml"
    spec.write_text("specgrad: 1\nname: t\ninput: {shape: [3]}\nmodel: [{linear: 2}]\ndata: {source: csv, path: "
                    "d.csv, target: y, categorical: {color: one_hot}, batch_size: 2}\n")  # fmt: skip

    def with_one_purple(lone: int) -> None:
        rows = [f"{i},{'purple' if i == lone else 'red' if i % 2 else 'blue'},{y}" for i, y in enumerate(labels)]
        (tmp_path / "d.csv").write_text("a,color,y\n" + "\n".join(rows) + "\n")

    lone = int(np.intersect1d(valid, random_train)[0])  # validates when stratified, trains when not
    with_one_purple(lone)
    assert problems(validate_file(spec)) == [f"{tmp_path / 'd.csv'}:{lone + 2}:2: error: row {lone + 2}, column "
                                             "'color': 'purple' is in validation rows only: the categories are those "
                                             "of the training rows, so the model never learns it\n  hint: the "
                                             "categories are: blue, red"]  # fmt: skip
    wide = "input.shape=[4]"  # NOTE: a one-hot column of 3 categories
    assert load_data(validate_file(spec, ["data.stratify=false", wide])).columns.categorical["color"][1] == \
        ("blue", "purple", "red")  # fmt: skip
    with_one_purple(int(np.intersect1d(train, random_valid)[0]))  # the other way round
    ds = load_data(validate_file(spec, [wide]))
    assert ds.columns.categorical["color"][1] == ("blue", "purple", "red") and counts(ds.y_valid, 2) == [1, 5]
    assert "is in validation rows only" in problems(validate_file(spec, ["data.stratify=false"]))[0]


def test_a_regression_target_and_a_class_per_position_are_split_at_random(tmp_path: Path) -> None:
    y = np.random.default_rng(0).standard_normal((40, 2))
    ds = load_data(validate_file(npz_spec(tmp_path, y, model="[{linear: 2}]", train="{loss: mse}")))
    _, valid = split(40, 0.2, 0)
    np.testing.assert_allclose(ds.y_valid * ds.target_stats["std"] + ds.target_stats["mean"], y[valid], rtol=1e-5)


# *** run folders: the split they were trained on ***


def test_a_new_run_folder_records_stratify_and_an_old_one_keeps_its_random_split(tmp_path: Path) -> None:
    y = np.array([0] * 40 + [1] * 10)
    run = tmp_path / "t-1"  # NOTE: the spec and its data in the run folder, so that the copy reads them by itself
    run.mkdir()
    spec = validate_file(npz_spec(run, y, model="[{linear: 2}]"))
    text = resolved_spec_text(spec, run)
    assert yaml.safe_load(text)["data"]["stratify"] is True  # NOTE: written although it is the default
    (run / "spec.resolved.yaml").write_text(text)
    new = validate_file(run / "spec.resolved.yaml")
    assert spec_hash(new.values) == spec_hash(spec.values)
    assert np.array_equal(load_data(new).y_valid, load_data(spec).y_valid)
    assert counts(load_data(new).y_valid, 2) == [8, 2]
    # NOTE: a run folder of a specgrad before data.stratify: its spec.resolved.yaml has no stratify; it split at random
    (run / "spec.resolved.yaml").write_text(text.replace("  stratify: true\n", ""))
    old = validate_file(run / "spec.resolved.yaml")
    _, valid = split(50, 0.2, 0)
    assert np.array_equal(load_data(old).y_valid, y[valid]) and spec_hash(old.values) == spec_hash(spec.values)
    assert "stratify" not in yaml.safe_load(resolved_spec_text(old, run))["data"]  # a run of it stays random
    renamed = run / "copy.yaml"  # NOTE: copied out of the run folder it is a spec like any other
    renamed.write_text(text.replace("  stratify: true\n", ""))
    assert counts(load_data(validate_file(renamed)).y_valid, 2) == [8, 2]


# *** data.class_names ***


def test_class_names_name_whole_number_labels(tmp_path: Path) -> None:
    y = np.arange(30) % 3
    spec = validate_file(npz_spec(tmp_path, y, "class_names: [setosa, versicolor, virginica]\n"))
    ds = load_data(spec)
    assert ds.class_names == ["setosa", "versicolor", "virginica"] and ds.y_train.dtype == np.int32
    assert load_data(validate_file(DIGITS)).class_names == [str(k) for k in range(10)]  # NOTE: left out: the numbers
    names = [f"digit {k}" for k in range(10)]
    assert load_data(validate_file(DIGITS, [f"data.class_names={names}"])).class_names == names


def test_a_test_file_of_named_classes_still_holds_numbers(tmp_path: Path) -> None:
    y = np.arange(30) % 3
    path = npz_spec(tmp_path, y, "class_names: [a, b, c]\n")
    np.savez(tmp_path / "t.npz", x=np.zeros((4, 3)), y=np.array([2, 1, 0, 2]))
    ds = load_data(validate_file(path, ["data.test_path=t.npz"]), held="test")
    assert ds.class_names == ["a", "b", "c"] and ds.y_valid.tolist() == [2, 1, 0, 2]


@pytest.mark.parametrize("names,message,hint", [
    ("[a, b]", "data.class_names has 2 names, but the model has 3 classes (labels 0 to 2)",
     "give 3 names, the name of label k at position k"),
    ("[a, b, a]", "data.class_names names 'a' more than once", "give each class its own name"),
    ("[a, ' ', c]", "data.class_names: name 1 (of label 1) is empty", "give every class a name"),
])  # fmt: skip
def test_class_names_must_name_each_class_once(tmp_path: Path, names: str, message: str, hint: str) -> None:
    spec = validate_file(npz_spec(tmp_path, np.arange(30) % 3, f"class_names: {names}\n"))
    assert problems(spec) == [f"{spec.path}:10:16: error: {message}\n  hint: {hint}"]


def test_class_names_are_for_whole_number_labels_only(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("a,y\n" + "".join(f"{i},{'cat' if i % 2 else 'dog'}\n" for i in range(20)))
    spec = tmp_path / "spec.yaml"
    spec.write_text("specgrad: 1\nname: t\ninput: {shape: [1]}\nmodel: [{linear: 2}]\ndata:\n  source: csv\n  path: "
                    "d.csv\n  target: y\n  batch_size: 2\n  class_names: [x, y]\n")  # fmt: skip
    assert problems(validate_file(spec)) == [f"{spec}:10:16: error: data.class_names names whole-number labels, but "
                                             "the classes in column 'y' of d.csv are named by the data already (cat, "
                                             "dog)\n  hint: remove data.class_names: the data's names are "
                                             "used"]  # fmt: skip
    reg = validate_file(npz_spec(tmp_path, np.linspace(0, 1, 30), "class_names: [a]\n", model="[{linear: 1}]",
                                 train="{loss: mse}"))  # fmt: skip
    assert problems(reg) == [f"{reg.path}:10:16: error: data.class_names names class labels, but 'y' in d.npz are "
                             "numbers to predict (task regress)\n  hint: remove data.class_names"]  # fmt: skip
    text = validate_file(ROOT / "specs" / "char_gpt.yaml", ["data.class_names=[a]"])
    assert "data.class_names is for the digits, csv, npz and spirals sources, not text" in problems(text)[0]


@pytest.mark.parametrize("source", ["spirals", "sine"])
def test_split_seed_fixes_the_points_of_generated_sources(tmp_path: Path, source: str) -> None:
    """The spirals' and sine's points come from the split's seed: two training seeds with one split_seed validate
    (and train) on the same points; without split_seed each seed has its points, as before."""
    out, shape, loss = ("2", "[2]", "") if source == "spirals" else ("1", "[1]", "\ntrain: {loss: mse}")
    got = {}
    for seed, fixed in ((1, True), (2, True), (1, False), (2, False)):
        fix = ", split_seed: 0" if fixed else ""
        text = (f"specgrad: 1\nname: g\nseed: {seed}\ninput: {{shape: {shape}}}\nmodel: [{{linear: {out}}}]\n"
                f"data: {{source: {source}, normalize: false{fix}}}{loss}\n")  # fmt: skip
        (tmp_path / "g.yaml").write_text(text)
        data = load_data(validate_file(tmp_path / "g.yaml"))
        got[seed, fixed] = np.concatenate([data.x_train.reshape(-1), data.x_valid.reshape(-1)])
    assert np.array_equal(np.sort(got[1, True]), np.sort(got[2, True]))
    assert not np.array_equal(np.sort(got[1, False]), np.sort(got[2, False]))
