"""The C export's header says what goes in and comes out (a csv's columns in order, each one-hot column's positions
and categories, whether the function standardizes, the class names in order or the target and its units); its runner
reads numbers separated by commas, spaces or both and says so on a bad line; the file builds with -Wall -Wextra
-Werror for plain x86-64, x86-64-v2 and x86-64-v3 (no vector wider than 16 bytes in a signature: -Wpsabi on an
AVX-512 machine) and prints what `specgrad run` computes."""

from __future__ import annotations

import platform
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.datasets import load_digits

pytestmark = pytest.mark.xdist_group("c_layout")  # NOTE: on one worker: the trained runs are shared by the tests

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
COLORS = ("red", "green", "blue")
KINDS = ("cheap", "dear */ x??/")  # NOTE: a class name that would end the header's comment or form a trigraph
SPEC = """\
specgrad: 1
name: shop
input: {shape: [5]}
model: [{linear: 8}, relu, {linear: 2}]
data: {source: csv, path: d.csv, features: [size, color, weight], target: kind, categorical: {color: one_hot},
       batch_size: 8}
train: {steps: 4}
"""


def _cli(*args: object) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def _export(run: Path, c_file: Path) -> str:
    _cli("export", run, "--format", "c", "--out", c_file)
    return c_file.with_suffix(".h").read_text()


def _unwrapped(header: str) -> str:
    """The header with its comment's wrapped lines joined: ' * ' starts each line, and more spaces a continuation."""
    return re.sub(r"\n \*     ", " ", header)


def _build(cc: str, c_file: Path, *flags: str) -> Path:
    binary = c_file.with_name(c_file.stem + "".join(f.replace("=", "_") for f in flags))
    built = subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", *flags, "-DSPECGRAD_MAIN", str(c_file), "-o",
                            str(binary), "-lm"], capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0 and not built.stderr, built.stderr
    return binary


def _printed(binary: Path, text: str) -> np.ndarray:
    ran = subprocess.run([str(binary)], input=text, capture_output=True, text=True)
    assert ran.returncode == 0 and not ran.stderr, ran.stderr
    return np.array([line.split() for line in ran.stdout.splitlines()], np.float64)


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A csv classifier: size, color (one_hot), weight; text class names, one of them hostile to a C comment."""
    folder = tmp_path_factory.mktemp("shop")
    rows = [f"{1 + i % 7},{COLORS[i % 3]},{0.5 * (i % 5)},{KINDS[(i % 7 + i % 3) % 2]}" for i in range(60)]
    (folder / "d.csv").write_text("size,color,weight,kind\n" + "\n".join(rows) + "\n")
    (folder / "spec.yaml").write_text(SPEC)
    _cli("train", folder / "spec.yaml", "--out", folder / "runs")
    return folder / "runs" / "shop-1"


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("digits")
    _cli("train", ROOT / "specs" / "digits_mlp.yaml", "--steps", "3", "--out", folder)
    return folder / "digits-mlp-1"


def test_header_names_the_columns_one_hot_order_and_classes(shop: Path, tmp_path: Path, cc: str) -> None:
    header = _export(shop, tmp_path / "shop.c")
    assert (" * What shop_forward takes and gives for one example, in order; the runner reads the inputs in this order "
            "and prints probabilities on one line.\n"
            " * input: 5 float values, the csv's columns in this order:\n"
            " *   [0] size\n"
            " *   [1..3] color: one-hot, 1 at the row's category and 0 at the others, in this order: "
            '"blue", "green", "red"\n'
            " *   [4] weight\n"
            " *   standardized by shop_forward with the training split's mean and std ((x - mean) / std, one-hot "
            "values as 0 and 1): pass the values as the data holds them.\n"
            " * logits and probabilities (2 floats each): one per class, in this order: "
            '0 "cheap", 1 "dear * / x?.?/"; '
            "probabilities are the softmax of the logits.\n */\n") in _unwrapped(header)  # fmt: skip
    assert header.count("*/") == 2, "a class name ended the comment"  # NOTE: the title's and the layout's
    _build(cc, tmp_path / "shop.c")


def test_header_of_a_regression_names_the_target_and_its_units(tmp_path: Path) -> None:
    _cli("train", ROOT / "specs" / "house_prices.yaml", "--steps", "3", "--out", tmp_path / "runs")
    header = _unwrapped(_export(tmp_path / "runs" / "house-prices-1", tmp_path / "houses.c"))
    assert " *   [0] rooms\n *   [1] area\n *   [2] age\n *   [3] distance\n" in header
    assert (" * prediction (1 float): the target price, in its own units (the model's standardized value times the "
            "training targets' std, plus their mean).\n") in header  # fmt: skip


def test_header_of_several_inputs_and_outputs_names_each(tmp_path: Path) -> None:
    _cli("train", ROOT / "docs" / "examples" / "two_heads.yaml", "--steps", "3", "--out", tmp_path / "runs")
    header = _unwrapped(_export(tmp_path / "runs" / "two-heads-1", tmp_path / "heads.c"))
    assert "and prints out_fault_probabilities and out_load_prediction on one line.\n" in header
    assert " * in_sensor: 8 float values: the float32 values of one example of shape [8], in C order" in header
    assert " * in_context: 3 float values: the float32 values of one example of shape [3], in C order" in header
    assert (" * out_fault_logits and out_fault_probabilities (2 floats each), the output fault: one per class, the "
            "classes 0 to 1 in order; probabilities are the softmax of the logits.\n") in header  # fmt: skip
    assert " * out_load_prediction (1 float), the output load: the target load, in its own units" in header


def _shop_rows(shop: Path) -> tuple[list[list[float]], np.ndarray, Path]:
    """Four rows as the header lays them out (size, blue, green, red, weight) and what `run` gives for them."""
    raw = [(3, "red", 1.5), (5, "blue", 0.0), (1, "green", 2.0), (7, "red", 0.5)]
    csv = shop.parent / "rows.csv"
    csv.write_text("size,color,weight\n" + "".join(f"{s},{c},{w}\n" for s, c, w in raw))
    _cli("run", shop, "--input", csv, "--output", shop.parent / "rows.npy")
    rows = [[s, *(float(c == k) for k in ("blue", "green", "red")), w] for s, c, w in raw]
    return rows, np.load(shop.parent / "rows.npy"), csv


def test_runner_reads_commas_spaces_or_both(shop: Path, tmp_path: Path, cc: str) -> None:
    _export(shop, tmp_path / "shop.c")
    binary = _build(cc, tmp_path / "shop.c")
    rows, ran, _ = _shop_rows(shop)
    text = [[repr(v) for v in row] for row in rows]
    forms = {
        "commas": "\n".join(",".join(r) for r in text) + "\n",
        "spaces": "\n".join(" ".join(r) for r in text),
        "both": "\n".join(", ".join(r) for r in text) + "\n",
        "trailing commas, CRLF": "".join(",".join(r) + ",\r\n" for r in text),
        "one line": ",".join(v for r in text for v in r),  # NOTE: 20 values on a line: 'too long for a number' before
        "a value a line": "\n".join(v for r in text for v in r),
    }
    printed = {k: _printed(binary, v) for k, v in forms.items()}
    for k, got in printed.items():
        np.testing.assert_array_equal(got, printed["spaces"], err_msg=k)
    np.testing.assert_allclose(printed["spaces"], ran, rtol=1e-5, atol=1e-6)


WANTS = "an example's values are numbers separated by commas, spaces or both"
DECIMAL = "(decimal commas? write 3.5, not 3,5)"
BAD = [
    ("1;0;0;1;2.5", f"example 0, value 0 (counting from 0): '1;0;0;1;2.5' is not a number: {WANTS}"),
    ("1,0,0,1,2.5\n1,,0,1,2.5", f"example 1, value 1 (counting from 0): '' is empty (nothing between two commas): "
                                f"{WANTS}"),
    (",1,0,0,1,2.5", f"example 0, value 0 (counting from 0): '' is empty (nothing between two commas): {WANTS}"),
    ("3,5 0 0 1 2,5", "example 0, value 1 (counting from 0): '5' is followed by spaces only, but the values before "
                      f"it on its line by commas {DECIMAL}: {WANTS}, the same along a line"),
    ("3 0 0 1 2,5", "example 0, value 4 (counting from 0): '2' is followed by a comma, but the values before it on its "
                    f"line by spaces only {DECIMAL}: {WANTS}, the same along a line"),
    ("1,0,0,1,,", f"example 0, value 4 (counting from 0): '' is empty (nothing between two commas): {WANTS}"),
    ("1,0,0,1," + "1" * 70, f"example 0, value 4 (counting from 0): '{'1' * 63}' (cut short) is too long for a "
                            f"number: {WANTS}"),
    ("1,0,0", "the input ends inside example 0: it has 3 of the 5 numbers an example needs"),
]  # fmt: skip


@pytest.mark.parametrize(("given", "said"), BAD)
def test_runner_says_what_it_wants_on_a_bad_line(shop: Path, tmp_path: Path, cc: str, given: str, said: str) -> None:
    _export(shop, tmp_path / "shop.c")
    ran = subprocess.run([str(_build(cc, tmp_path / "shop.c"))], input=given, capture_output=True, text=True)
    assert ran.returncode == 1 and ran.stderr == f"error: {said}\n", ran.stderr
    assert ran.stdout.count("\n") == given.count("\n"), "the examples before the bad one are printed, not that one"


def test_no_vector_wider_than_sse2_and_neon_in_the_file(digits: Path, tmp_path: Path) -> None:
    """The CLANG device's own width (64 bytes with AVX-512) stays out of the export: those vectors, passed by value to
    the kernels' helpers, make gcc warn (-Wpsabi) on any target without AVX-512."""
    _export(digits, tmp_path / "d.c")
    widths = {int(w) for w in re.findall(r"vector_size\((\d+)\)", (tmp_path / "d.c").read_text())}
    assert widths and max(widths) <= 16, widths


@pytest.mark.parametrize("march", ["", "-march=x86-64", "-march=x86-64-v2", "-march=x86-64-v3"])
def test_builds_without_warnings_and_prints_what_run_does(digits: Path, tmp_path: Path, cc: str, march: str) -> None:
    if march and platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip(f"{march} is an x86-64 target; this machine is {platform.machine()}")
    _export(digits, tmp_path / "d.c")
    binary = _build(cc, tmp_path / "d.c", *([march] if march else []))
    x = (load_digits()[0][:6].astype(np.float32) / 16).reshape(6, 1, 8, 8)
    np.save(tmp_path / "x.npy", x)
    _cli("run", digits, "--input", tmp_path / "x.npy", "--output", tmp_path / "p.npy")
    text = "\n".join(", ".join(repr(float(v)) for v in row) for row in x.reshape(6, -1))
    np.testing.assert_allclose(_printed(binary, text), np.load(tmp_path / "p.npy"), rtol=1e-5, atol=1e-6)


def test_header_says_what_fills_a_missing_cell(tmp_path: Path) -> None:
    """data.missing: the fill training recorded for each column, a number's or a category's, so a caller of the
    function can pass it."""
    rows = [f"{'NA' if i % 11 == 0 else 1 + i % 7},{'' if i % 13 == 0 else COLORS[i % 3]},{0.5 * (i % 5)},"
            f"{KINDS[(i % 7 + i % 3) % 2]}" for i in range(60)]  # fmt: skip
    (tmp_path / "d.csv").write_text("size,color,weight,kind\n" + "\n".join(rows) + "\n")
    (tmp_path / "spec.yaml").write_text(SPEC.replace("batch_size: 8}", "batch_size: 8, missing: mean}"))
    _cli("train", tmp_path / "spec.yaml", "--out", tmp_path / "runs")
    header = _unwrapped(_export(tmp_path / "runs" / "shop-1", tmp_path / "shop.c"))
    assert re.search(r" \*   a missing size: training filled it with 3\.\d+ \(mean\); pass that\.\n", header), header
    assert ' *   a missing color: training filled it with the category "blue" (mode); pass that.\n' in header
