"""spec/resolve.py: extends (merging, cycles, missing bases), --set overrides, and vars ($name and arithmetic), each
error with its exact text and file:line:col. Fixtures in bad/resolve_*.yaml state their expected error on a
'# error: FILE:LINE:COL: message' line (and optionally '# hint: ...'); good/resolve_*.yaml is a three-file chain."""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specgrad.modelspec.errors import Location, Problem, SpecError
from specgrad.modelspec.loader import parse_yaml
from specgrad.modelspec.resolve import apply_override, merge, resolve
from specgrad.modelspec.validate import TRAIN, validate_file

GOOD = Path(__file__).parent / "good"
BAD = Path(__file__).parent / "bad"


def problems_of(call: Callable[[], Any]) -> list[Problem]:
    with pytest.raises(SpecError) as info:
        call()
    return info.value.problems


def check_error(call: Callable[[], Any], where: str, message: str, hint: str | None = None) -> Problem:
    """`call` raises one problem with this message at `where` ('file:line:col'), printed as 'where: error: message'."""
    (p,) = problems_of(call)
    assert (str(p.loc), p.message) == (where, message)
    assert str(p).splitlines()[0] == f"{where}: error: {message}"
    if hint is not None:
        assert p.hint == hint
    return p


@pytest.fixture
def write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], str]:
    """Writes a file into a fresh current folder, so locations read 'name.yaml:line:col'."""
    monkeypatch.chdir(tmp_path)

    def write(name: str, text: str) -> str:
        Path(name).write_text(text)
        return name

    return write


def value_of(text: str, overrides: tuple[str, ...] = (), name: str = "s.yaml") -> Any:
    Path(name).write_text(text)
    return resolve(name, overrides).to_plain()


# ---- extends


def test_three_file_chain_merges_each_level_over_the_one_below(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOOD)
    root = resolve("resolve_child.yaml")
    assert root.to_plain() == {
        "specgrad": 1,
        "name": "child",
        "seed": 7,
        "vars": {"width": 64, "classes": 10, "hidden": 128},
        "input": {"shape": [1, 8, 8]},
        "model": ["flatten", {"linear": 128}, "relu", {"linear": {"out": 32}}, "relu", {"linear": 10}],
        "data": {"source": "digits", "batch_size": 32, "shuffle": True},
        "train": {"epochs": 5, "lr": 0.01, "metrics": ["accuracy"]},
    }
    v = root.value
    assert "extends" not in v and "extends" not in root.key_locs
    assert str(v["seed"].loc) == "resolve_base.yaml:4:7" and str(root.key_locs["seed"]) == "resolve_base.yaml:4:1"
    assert str(v["name"].loc) == "resolve_child.yaml:3:7"
    assert str(v["data"].value["source"].loc) == "resolve_base.yaml:12:16"
    assert str(v["data"].value["batch_size"].loc) == "resolve_mid.yaml:6:15"
    assert str(v["train"].value["lr"].loc) == "resolve_base.yaml:13:24"
    assert str(v["train"].value["epochs"].loc) == "resolve_child.yaml:13:17"
    assert str(v["vars"].value["width"].loc) == "resolve_mid.yaml:4:15"
    assert str(v["model"].value[5].value["linear"].loc) == "resolve_child.yaml:12:13"  # $classes, from the base


def test_base_path_is_relative_to_the_folder_of_the_spec_naming_it() -> None:
    root = resolve(GOOD / "resolve_child.yaml")
    assert root.value["seed"].loc == Location(str(GOOD / "resolve_base.yaml"), 4, 7)


def test_a_base_in_another_folder(write: Callable[[str, str], str]) -> None:
    Path("common").mkdir()
    write("common/base.yaml", "seed: 1\ntrain: {lr: 0.1, epochs: 2}\n")
    write("s.yaml", "extends: common/base.yaml\ntrain: {lr: 0.5}\n")
    root = resolve("s.yaml")
    assert root.to_plain() == {"seed": 1, "train": {"lr": 0.5, "epochs": 2}}
    assert str(root.value["train"].value["epochs"].loc) == "common/base.yaml:2:26"


def test_merge_rules() -> None:
    base = parse_yaml("a: {x: 1, y: [1, 2]}\nb: [1, 2, 3]\nc: 1\nd: {k: v}\n", "base.yaml")
    over = parse_yaml("a: {y: [9], z: 3}\nb: [4]\nd: null\ne: new\n", "over.yaml")
    merged = merge(base, over)
    assert merged.to_plain() == {"a": {"x": 1, "y": [9], "z": 3}, "b": [4], "c": 1, "d": None, "e": "new"}
    assert list(merged.value) == ["a", "b", "c", "d", "e"]  # the base's order, then new keys
    assert merged.value["a"].value["x"].loc.file == "base.yaml" and merged.value["a"].value["y"].loc.file == "over.yaml"
    assert merged.key_locs["c"].file == "base.yaml" and merged.key_locs["a"].file == "over.yaml"
    assert base.to_plain()["a"] == {"x": 1, "y": [1, 2]}  # inputs are not changed


def fixture_expectation(path: Path) -> tuple[str, str, str | None]:
    lines = path.read_text().splitlines()
    where, message = lines[0].removeprefix("# error: ").split(": ", 1)
    hint = lines[1].removeprefix("# hint: ") if lines[1].startswith("# hint: ") else None
    return where, message, hint


@pytest.mark.parametrize("path", sorted(BAD.glob("resolve_*.yaml")), ids=lambda p: p.stem)
def test_bad_fixture(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(BAD)
    check_error(lambda: resolve(path.name), *fixture_expectation(path))
    assert not Path("pwned.txt").exists()


def test_cycle_and_missing_base_with_absolute_paths() -> None:
    (p,) = problems_of(lambda: resolve(BAD / "resolve_cycle_a.yaml"))
    a, b = BAD / "resolve_cycle_a.yaml", BAD / "resolve_cycle_b.yaml"
    assert p.loc == Location(str(b), 3, 1) and p.message == f"extends makes a cycle: {a} -> {b} -> {a}"
    (p,) = problems_of(lambda: resolve(BAD / "resolve_missing_base.yaml"))
    assert p.message == f"extends: no such file: {BAD / 'no_such_base.yaml'}"


def test_cycle_further_down_a_chain(write: Callable[[str, str], str]) -> None:
    write("top.yaml", "extends: a.yaml\n")
    write("a.yaml", "seed: 1\nextends: b.yaml\n")
    write("b.yaml", "extends: a.yaml\n")
    check_error(lambda: resolve("top.yaml"), "b.yaml:1:1", "extends makes a cycle: a.yaml -> b.yaml -> a.yaml")


def test_empty_extends(write: Callable[[str, str], str]) -> None:
    write("s.yaml", "seed: 1\nextends:\n")
    check_error(lambda: resolve("s.yaml"), "s.yaml:2:9", "extends must name another spec file, got nothing")


def test_base_that_is_a_folder(write: Callable[[str, str], str]) -> None:
    Path("base").mkdir()
    write("s.yaml", "extends: base\n")
    check_error(lambda: resolve("s.yaml"), "s.yaml:1:10", "extends: cannot read base: it is a folder, not a regular "
                "file")  # fmt: skip


def test_syntax_error_in_a_base_points_into_the_base(write: Callable[[str, str], str]) -> None:
    write("base.yaml", "seed: 1\nname: my: net\n")
    write("s.yaml", "extends: base.yaml\n")
    check_error(lambda: resolve("s.yaml"), "base.yaml:2:9", "unexpected ':' here")


# ---- --set overrides

SPEC = """\
specgrad: 1
name: s
model:
  - flatten
  - linear: {out: 64}
  - linear: 10
data: {source: digits, shuffle: true}
"""


@pytest.mark.parametrize(
    "override, path, value, where",
    [
        ("data.shuffle=false", ["data", "shuffle"], False, 14),
        ("model.1.linear.out=32", ["model", 1, "linear", "out"], 32, 20),
        ("model.2.linear=0x10", ["model", 2, "linear"], 16, 16),
        ("model.0=relu", ["model", 0], "relu", 9),
        ("train.lr=0.01", ["train", "lr"], 0.01, 10),
        ("train.lr=1e-3", ["train", "lr"], 0.001, 10),
        ("name=3.10", ["name"], 3.1, 6),
        ('name="3.10"', ["name"], "3.10", 6),
        ("name='it''s'", ["name"], "it's", 6),
        ("name=yes", ["name"], "yes", 6),
        ("name=my: net", ["name"], "my: net", 6),
        ("name=", ["name"], None, 6),
        ("name = x ", ["name"], "x", 8),
        ("input.shape=[1, 8, 8]", ["input", "shape"], [1, 8, 8], 13),
        ("data={source: digits, batch_size: 8}", ["data"], {"source": "digits", "batch_size": 8}, 6),
    ],
)
def test_set_value_types_and_locations(
    write: Callable[[str, str], str], override: str, path: list, value: Any, where: int
) -> None:
    root = resolve(write("s.yaml", SPEC), [override])
    node = root
    for key in path:
        node = node.value[key]
    assert node.to_plain() == value and type(node.to_plain()) is type(value)
    assert node.loc == Location(f"--set {override}", 1, where)


def test_set_keeps_everything_else_and_its_locations(write: Callable[[str, str], str]) -> None:
    root = resolve(write("s.yaml", SPEC), ["model.1.linear.out=32", "data.batch_size=8"])
    assert root.to_plain()["model"] == ["flatten", {"linear": {"out": 32}}, {"linear": 10}]
    assert root.to_plain()["data"] == {"source": "digits", "shuffle": True, "batch_size": 8}
    assert str(root.value["model"].value[2].loc) == "s.yaml:6:5"
    assert str(root.value["data"].key_locs["shuffle"]) == "s.yaml:7:24"
    assert str(root.value["data"].key_locs["batch_size"]) == "--set data.batch_size=8:1:6"


def test_set_creates_missing_keys_with_their_locations(write: Callable[[str, str], str]) -> None:
    path = write("s.yaml", SPEC.replace("- flatten", "- dropout:") + "train:\n")
    root = resolve(path, ["train.optimizer.lr=0.1", "model.0.dropout.p=0.5"])
    assert root.to_plain()["train"] == {"optimizer": {"lr": 0.1}}  # an empty (null) value becomes a mapping
    assert str(root.value["train"].value["optimizer"].key_locs["lr"]) == "--set train.optimizer.lr=0.1:1:17"
    assert root.to_plain()["model"][0] == {"dropout": {"p": 0.5}}


def test_set_later_override_wins(write: Callable[[str, str], str]) -> None:
    root = resolve(write("s.yaml", SPEC), ["data.shuffle=false", "data.shuffle=true"])
    assert root.value["data"].value["shuffle"].loc.file == "--set data.shuffle=true"


def test_set_after_extends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOOD)
    root = resolve("resolve_child.yaml", ["seed=3", "data.batch_size=8"])
    assert root.to_plain()["seed"] == 3 and root.to_plain()["data"]["batch_size"] == 8
    assert root.value["data"].value["source"].loc.file == "resolve_base.yaml"


SET_HINT = "write --set key.path=value, e.g. --set train.lr=0.01 or --set model.1.linear.out=64"
# fmt: off
BAD_SETS = [  # (override, col, message, hint)
    ("model.9.linear.out=64", 7, "model has 3 items, so there is no item 9", "items are counted from 0: use 0 to 2"),
    ("model.first=relu", 7, "model is a list, so 'first' must be an item number",
     "items are counted from 0: use 0 to 2"),
    ("model.-1=relu", 7, "model is a list, so '-1' must be an item number", None),
    ("model.99999999999=relu", 7, "model has 3 items, so there is no item 99999999999", None),
    ("train.metrics.x=loss", 15, "train.metrics is a list, so 'x' must be an item number",
     "items are counted from 0: use 0 to 0"),
    ("name.first=x", 6, "name is 's', not a mapping or a list, so it has no 'first'", SET_HINT),
    ("model.1.linear.out.x=1", 20, "model.1.linear.out is '64', not a mapping or a list, so it has no 'x'", None),
    ("train.lr", 1, "this override has no '=' between the key and the value", SET_HINT),
    ("", 1, "this override has no '=' between the key and the value", SET_HINT),
    ("=0.01", 1, "this override has no key before '='", SET_HINT),
    ("  =0.01", 3, "this override has no key before '='", SET_HINT),
    ("train..lr=0.01", 7, "the key has an empty part between dots", SET_HINT),
    ("train.lr.=0.01", 10, "the key has an empty part between dots", SET_HINT),
    ("extends=other.yaml", 1, "extends cannot be set with --set: it is read before overrides apply", None),
    ("input.shape=[1, 8", 18, "expected ',' or ']' here, but found the end of the file: the list opened on line 1, "
                              "column 13 is not closed", None),
]
# fmt: on


@pytest.mark.parametrize("override, col, message, hint", BAD_SETS, ids=[b[0] or "empty" for b in BAD_SETS])
def test_bad_set(write: Callable[[str, str], str], override: str, col: int, message: str, hint: str | None) -> None:
    path = write("s.yaml", SPEC + "train: {metrics: [accuracy]}\n")
    check_error(lambda: resolve(path, [override]), f"--set {override}:1:{col}", message, hint)


def test_set_on_an_empty_list(write: Callable[[str, str], str]) -> None:
    path = write("s.yaml", "model: []\n")
    check_error(lambda: resolve(path, ["model.0=relu"]), "--set model.0=relu:1:7",
                "model has 0 items, so there is no item 0", "model is empty")  # fmt: skip


def test_apply_override_returns_a_new_tree() -> None:
    root = parse_yaml(SPEC, "s.yaml")
    new = apply_override(root, "model.1.linear.out=32")
    assert root.to_plain()["model"][1] == {"linear": {"out": 64}}
    assert new.to_plain()["model"][1] == {"linear": {"out": 32}}


# ---- vars


def test_vars_in_nested_maps_and_lists(write: Callable[[str, str], str]) -> None:
    text = (
        "vars: {d: 64, act: relu, on: true, rate: 0.5, label: digits}\n"
        "model:\n"
        "  - linear: {out: $d, bias: $on}\n"
        "  - $act\n"
        "  - dropout: {p: $rate}\n"
        "input: {shape: [1, $d, [$d, {deep: $label}]]}\n"
    )
    root = resolve(write("s.yaml", text))
    assert root.to_plain()["model"] == [{"linear": {"out": 64, "bias": True}}, "relu", {"dropout": {"p": 0.5}}]
    assert root.to_plain()["input"] == {"shape": [1, 64, [64, {"deep": "digits"}]]}
    out = root.value["model"].value[0].value["linear"].value["out"]
    assert str(out.loc) == "s.yaml:3:19" and out.text == "64" and not out.quoted  # the reference's location


def test_vars_stay_with_their_values(write: Callable[[str, str], str]) -> None:
    root = resolve(write("s.yaml", "vars: {hidden: 4 * $d, d: 64, name: '3.10'}\nx: $name\n"))
    assert root.to_plain()["vars"] == {"hidden": 256, "d": 64, "name": "3.10"}
    assert str(root.value["vars"].value["hidden"].loc) == "s.yaml:1:16"
    x = root.value["x"]
    assert x.value == "3.10" and x.quoted and x.text == "3.10"  # quoted text stays text through a variable


def test_vars_use_vars_in_dependency_order(write: Callable[[str, str], str]) -> None:
    text = "vars:\n  c: $b * 2\n  b: $a + 1\n  a: 3\n  e: $c // $b\nx: [$a, $b, $c, $e]\n"
    assert value_of(text)["x"] == [3, 4, 8, 2]


def test_a_long_chain_of_vars(write: Callable[[str, str], str]) -> None:
    chain = "".join(f"  v{i}: $v{i - 1} + 1\n" for i in range(1, 400))
    assert value_of("vars:\n  v0: 0\n" + chain + "x: $v399\n")["x"] == 399


D = "vars: {d: 4, f: 0.25, h: 3}\nx: "
ARITHMETIC = [  # (expression, value): ints stay ints; / is whole when it divides exactly; // and % floor
    ("$d", 4),
    ("2 + 3 * $d", 14),
    ("(2 + 3) * $d", 20),
    ("$d - 1 - 1", 2),
    ("$d-1", 3),
    ("$d - -1", 5),
    ("-(-$d)", 4),
    ("-$d * 2", -8),
    ("+$d", 4),
    ("$d / 2", 2),
    ("$d / 2 / 2", 1),
    ("$d / 3", 4 / 3),
    ("$d / 8", 0.5),
    ("$d // 3", 1),
    ("-$d // 3", -2),
    ("-$d % 3", 2),
    ("7 % $d", 3),
    ("2 * ($d + 1) // 3", 3),
    ("(($d))", 4),
    ("$d * 0.5", 2.0),
    ("$f * 2", 0.5),
    ("$f * 4", 1.0),
    ("$d * 1e3", 4000.0),
    ("$d // 0.5", 8.0),
    ("$h / $h", 1),
    (".5 * $d", 2.0),
    ("$d*$h+1", 13),
    ("  $d  *  $h  ", 12),
]


@pytest.mark.parametrize("expr, value", ARITHMETIC, ids=[a[0] for a in ARITHMETIC])
def test_arithmetic(write: Callable[[str, str], str], expr: str, value: int | float) -> None:
    got = value_of(D + expr + "\n")["x"]
    assert got == value and type(got) is type(value)


def test_quoted_expressions_and_dollar_text(write: Callable[[str, str], str]) -> None:
    text = D + "[\"$d\", '$d * 2', '$$d', 'costs $5', 'a $$ b', '50%', '4 * 4', 'x$$d$$']\n"
    assert value_of(text)["x"] == [4, 8, "$d", "costs $5", "a $ b", "50%", "4 * 4", "x$d$"]


def test_single_reference_keeps_the_variables_type(write: Callable[[str, str], str]) -> None:
    text = "vars: {t: relu, b: false, n: null, i: .inf}\nx: [$t, ($t), $b, $n, $i]\n"
    assert value_of(text)["x"] == ["relu", "relu", False, None, math.inf]


def test_arithmetic_result_text_and_location(write: Callable[[str, str], str]) -> None:
    root = resolve(write("s.yaml", "vars: {d: 3}\nx: {a: 2 * $d, b: $d / 2}\n"))
    a, b = root.value["x"].value["a"], root.value["x"].value["b"]
    assert (a.value, a.text, str(a.loc)) == (6, "6", "s.yaml:2:8") and (b.value, b.text) == (1.5, "1.5")


def test_set_a_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOOD)
    root = resolve("resolve_child.yaml", ["vars.width=256", "model.5.linear=$hidden // 2"])
    assert root.to_plain()["vars"]["hidden"] == 512 and root.to_plain()["model"][3] == {"linear": {"out": 128}}
    last = root.value["model"].value[5].value["linear"]
    assert last.value == 256 and last.loc == Location("--set model.5.linear=$hidden // 2", 1, 16)


EXPR_HINT = ("a value that uses a $variable holds only that variable, or arithmetic such as 4 * $d or ($a + 1) // 2 "
             "(numbers, $variables, + - * / // % and parentheses); write $$ for a $ in text")  # fmt: skip
# fmt: off
BAD_VARS = [  # (what, spec text, where, message, hint)
    ("unknown, close", "vars: {width: 8, depth: 2}\nx: 4 * $widht\n", "2:8", "unknown variable $widht",
     "did you mean '$width'?"),
    ("unknown, not close", "vars: {width: 8, depth: 2}\nx: $zzz\n", "2:4", "unknown variable $zzz",
     "define it under vars (defined: $width, $depth)"),
    ("unknown, no vars", "x: [1, $d]\n", "1:8", "unknown variable $d",
     "define it at the top level, e.g. vars: {d: 64}"),
    ("unknown in a var", "vars: {a: $b}\n", "1:11", "unknown variable $b", "define it under vars (defined: $a)"),
    ("text around", "vars: {d: 64}\nname: net-$d\n", "2:7",
     "cannot read 'net-$d': 'net' is not a number, a $variable or an operator", EXPR_HINT),
    ("text in quotes", "vars: {d: 1}\nx: 'a $e'\n", "2:5",
     "cannot read 'a $e': 'a' is not a number, a $variable or an operator", EXPR_HINT),
    ("self cycle", "vars:\n  a: $a + 1\n", "2:6", "$a is defined through itself: $a -> $a",
     "a variable cannot use itself, directly or through other variables"),
    ("two cycle", "vars:\n  a: $b + 1\n  b: 2 * $a\n", "3:10", "$a is defined through itself: $a -> $b -> $a", None),
    ("three cycle", "vars: {x: 1, a: $b, b: $c, c: ($a)}\n", "1:32",
     "$a is defined through itself: $a -> $b -> $c -> $a", None),
    ("divide by zero var", "vars: {d: 64, heads: 0}\nx: $d // $heads\n", "2:7",
     "division by zero in '$d // $heads': $heads is 0", None),
    ("divide by zero", "vars: {d: 64}\nx: $d / (1 - 1)\n", "2:7", "division by zero in '$d / (1 - 1)'", None),
    ("modulo zero", "vars: {d: 64}\nx: $d % 0.0\n", "2:7", "division by zero in '$d % 0.0'", None),
    ("garbage after", "vars: {d: 64}\nx: 4 * $d abc\n", "2:11",
     "cannot read '4 * $d abc': 'abc' is not a number, a $variable or an operator", EXPR_HINT),
    ("two operands", "vars: {d: 64}\nx: $d 2\n", "2:7", "cannot read '$d 2': '2' comes after a complete expression",
     EXPR_HINT),
    ("ends with operator", "vars: {d: 64}\nx: $d *\n", "2:8",
     "cannot read '$d *': expected a number, a $variable or '(' but found the end", EXPR_HINT),
    ("two operators", "vars: {d: 64}\nx: $d * / 2\n", "2:9",
     "cannot read '$d * / 2': expected a number, a $variable or '(' but found '/'", None),
    ("unclosed", "vars: {d: 64}\nx: ($d + 1 * 2\n", "2:4", "cannot read '($d + 1 * 2': this '(' is never closed", None),
    ("stray close", "vars: {d: 64}\nx: $d + 1)\n", "2:10",
     "cannot read '$d + 1)': ')' comes after a complete expression", None),
    ("inside parens", "vars: {d: 64}\nx: ($d 1)\n", "2:8",
     "cannot read '($d 1)': '1' comes where an operator or ')' is expected", None),
    ("power", "vars: {d: 64}\nx: $d ** 2\n", "2:8",
     "cannot read '$d ** 2': expected a number, a $variable or '(' but found '*'", None),
    ("dollar digit", "vars: {d: 64}\nx: $d + $5\n", "2:9",
     "cannot read '$d + $5': '$5' is not a number, a $variable or an operator", None),
    ("text in arithmetic", "vars: {act: relu}\nx: 2 * $act\n", "2:8",
     "$act is text ('relu'), not a number, so it cannot be used in arithmetic",
     "use a variable that holds a number; it is set at s.yaml:1:13"),
    ("bool in arithmetic", "vars: {on: true}\nx: -$on\n", "2:5",
     "$on is true, not a number, so it cannot be used in arithmetic", None),
    ("null in arithmetic", "vars: {n: null}\nx: $n + 1\n", "2:4",
     "$n is empty (null), not a number, so it cannot be used in arithmetic", None),
    ("too large", "vars: {d: 99999999999}\nx: $d * $d\n", "2:7",
     "'$d * $d' gives a number too large to use (over 9,223,372,036,854,775,807)", None),
    ("huge literal", "vars: {d: 1}\nx: $d * 1" + "0" * 200 + "\n", "2:9",
     "'$d * 1" + "0" * 200 + "' gives a number too large to use (over 9,223,372,036,854,775,807)", None),
    ("nan", "vars: {d: .nan}\nx: $d + 1\n", "2:7", "'$d + 1' does not give a number (NaN)", None),
    ("vars not a map", "vars: [d, 64]\n", "1:7", "vars must be a mapping of names to values, got a list",
     "e.g. vars: {d: 64, heads: 4}"),
    ("bad var name", "vars: {my-width: 3}\n", "1:8", "variable name 'my-width' cannot be written as $my-width",
     "use letters, digits and '_', starting with a letter or '_'"),
    ("list var", "vars: {shape: [1, 8]}\n", "1:15", "vars.shape must be a number, text or true/false, got a list",
     None),
]
# fmt: on


@pytest.mark.parametrize("what, text, where, message, hint", BAD_VARS, ids=[b[0] for b in BAD_VARS])
def test_bad_vars(
    write: Callable[[str, str], str], what: str, text: str, where: str, message: str, hint: str | None
) -> None:
    path = write("s.yaml", text)
    check_error(lambda: resolve(path), f"s.yaml:{where}", message, hint)


def test_deep_parentheses(write: Callable[[str, str], str]) -> None:
    path = write("s.yaml", "vars: {d: 1}\nx: " + "(" * 40 + "$d" + ")" * 40 + "\n")
    check_error(lambda: resolve(path), "s.yaml:2:36", "cannot read '" + "(" * 40 + "$d" + ")" * 40 + "': more than 32 "
                "parentheses inside each other")  # fmt: skip
    assert value_of("vars: {d: 1}\nx: " + "(" * 30 + "$d" + ")" * 30 + "\n")["x"] == 1
    assert value_of("vars: {d: 1}\nx: " + "-" * 250 + "$d\n")["x"] == 1  # no recursion per sign


def test_every_problem_of_the_substitution_in_one_run(write: Callable[[str, str], str]) -> None:
    path = write("s.yaml", "vars: {d: 1}\na: $e\nb: [1, $d / 0]\nc: $d\n")
    got = [f"{p.loc}: {p.message}" for p in problems_of(lambda: resolve(path))]
    assert got == ["s.yaml:2:4: unknown variable $e", "s.yaml:3:11: division by zero in '$d / 0'"]


def test_a_var_that_uses_a_bad_var_is_not_reported_twice(write: Callable[[str, str], str]) -> None:
    path = write("s.yaml", "vars: {a: $zz, b: $a + 1, c: $b}\nx: $c\n")
    check_error(lambda: resolve(path), "s.yaml:1:11", "unknown variable $zz")


def test_error_in_an_override_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOOD)
    check_error(lambda: resolve("resolve_child.yaml", ["train.lr=2 * $widht"]), "--set train.lr=2 * $widht:1:14",
                "unknown variable $widht", "did you mean '$width'?")  # fmt: skip


def test_a_variable_inherited_from_a_base_is_overridden_by_the_child(write: Callable[[str, str], str]) -> None:
    write("base.yaml", "vars: {d: 2}\nx: $d * 10\n")
    assert value_of("extends: base.yaml\nvars: {d: 5}\n")["x"] == 50  # the base's expression uses the child's $d


def test_nothing_is_run_as_python(write: Callable[[str, str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a spec value reached eval/exec/compile")

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, refuse)
    text = "vars: {d: 1, code: \"__import__('os').system('echo pwned > pwned.txt')\"}\nx: $code\ny: (1).__class__\n"
    assert value_of(text)["x"] == "__import__('os').system('echo pwned > pwned.txt')"
    for expr in ["$d + __import__('os')", "$d.__class__", "[$d for _ in ()]", "$d if 1 else 2", "$d; 1", "lambda: $d"]:
        write("s.yaml", f'vars: {{d: 1}}\nx: "{expr}"\n')
        (p,) = problems_of(lambda: resolve("s.yaml"))
        assert p.message.startswith(f"cannot read '{expr}'"), p.message
    assert not Path("pwned.txt").exists()


# ---- through validate_file

CHILD_ROWS = [(64,), (128,), (128,), (32,), (32,), (10,)]


def test_validate_a_spec_with_extends_and_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOOD)
    spec = validate_file("resolve_child.yaml")
    assert [r.out_shape for r in spec.steps] == CHILD_ROWS
    assert spec.params == (64 * 128 + 128) + (128 * 32 + 32) + (32 * 10 + 10) == 12778
    assert spec.batch_size == 32 and spec.values["seed"] == 7 and spec.values["name"] == "child"
    assert spec.values["vars"] == {"width": 64, "classes": 10, "hidden": 128} and spec.values["extends"] is None
    assert str(spec.steps[5].loc) == "resolve_child.yaml:12:5"


def test_validate_with_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOOD)
    spec = validate_file("resolve_child.yaml", overrides=["vars.width=16", "data.batch_size=4"])
    assert [r.out_shape for r in spec.steps] == [(64,), (32,), (32,), (8,), (8,), (10,)] and spec.batch_size == 4


def test_validate_reports_an_override_where_it_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOOD)
    check_error(lambda: validate_file("resolve_child.yaml", overrides=["train.lr=fast"]), "--set train.lr=fast:1:10",
                "train.lr must be a number, got 'fast'", "numbers are written without quotes")  # fmt: skip
    check_error(lambda: validate_file("resolve_child.yaml", overrides=["train.lrr=0.1"]), "--set train.lrr=0.1:1:7",
                "unknown key 'lrr' in train", f"did you mean 'lr'? valid keys: {', '.join(TRAIN.fields)}")  # fmt: skip
    got = [str(p) for p in problems_of(lambda: validate_file("resolve_child.yaml", overrides=["vars.width=2.5"]))]
    assert got == [  # the values are computed from the override, but written at these references
        "resolve_child.yaml:8:13: error: model[1].linear.out must be a whole number, got '5.0'\n"
        "  hint: use a whole number",
        "resolve_child.yaml:10:19: error: model[3].linear.out must be a whole number, got '1.0'\n"
        "  hint: use a whole number",
    ]


def test_validate_reports_an_inherited_value_in_its_base_file(write: Callable[[str, str], str]) -> None:
    write("base.yaml", "specgrad: 1\nname: b\ninput: {shape: [1, 8, 8]}\nmodel: [flatten, linear: 10]\n"
                       "train: {epochs: 0}\n")  # fmt: skip
    write("s.yaml", "extends: base.yaml\nname: s\n")
    check_error(
        lambda: validate_file("s.yaml"), "base.yaml:5:17", "train.epochs must be between 1 and 1000000, got '0'"
    )


def test_set_of_a_variable_the_spec_neither_defines_nor_uses(write: Callable[[str, str], str]) -> None:
    path = write("v.yaml", "vars: {hidden: 8}\nmodel:\n  - linear: $hidden\n  - linear: $out\n")
    check_error(lambda: resolve(path, ["vars.hiden=3"]), "--set vars.hiden=3:1:6",
                "the spec has no variable 'hiden', so setting it would change nothing",
                "did you mean 'hidden'?")  # fmt: skip
    assert resolve(path, ["vars.hidden=3", "vars.out=2"]).to_plain()["model"] == [{"linear": 3}, {"linear": 2}]


def test_set_of_a_variable_defined_but_used_nowhere(write: Callable[[str, str], str]) -> None:
    path = write("v.yaml", "vars: {hidden: 8, d: 2, w: 4 * $d}\nmodel:\n  - linear: 8\n  - linear: $w\n")
    check_error(lambda: resolve(path, ["vars.hidden=3"]), "--set vars.hidden=3:1:6",
                "the variable 'hidden' is used nowhere in the spec, so setting it would change nothing")  # fmt: skip
    assert resolve(path, ["vars.d=3"]).to_plain()["model"][1] == {"linear": 12}  # NOTE: used through another variable


def test_set_of_a_block_parameter_is_not_a_variable(write: Callable[[str, str], str]) -> None:
    """Inside a block, $width reads the block's own parameter: it does not make vars.width a variable the spec uses."""
    path = write("b.yaml", "vars: {d: 8, heads: 2}\nblocks:\n  b:\n    params: [width]\n    graph:\n"
                 "      - {name: out, layer: linear, out: $width * $heads, from: in}\n"
                 "model:\n  graph:\n    - {name: x, block: b, with: {width: $d}, from: input}\n")  # fmt: skip
    check_error(lambda: resolve(path, ["vars.width=3"]), "--set vars.width=3:1:6",
                "the spec has no variable 'width', so setting it would change nothing",
                "'width' is a parameter of block 'b', given where the block is used (with: {width: ...}); its "
                "variables are d, heads")  # fmt: skip
    assert resolve(path, ["vars.heads=3", "vars.d=4"]).to_plain()["vars"] == {"d": 4, "heads": 3}
