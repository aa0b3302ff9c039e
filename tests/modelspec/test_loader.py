"""spec/loader.py: YAML 1.2 core scalars, located nodes, and every loader-level rejection with its text and line:col.
Fixtures in bad/load_*.yaml state their expected error on a '# error: LINE:COL: message' line."""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from specgrad.modelspec.errors import Location, Problem, SpecError
from specgrad.modelspec.loader import YNode, load_yaml, parse_yaml, resolve_scalar

BAD = Path(__file__).parent / "bad"


def check_error(call: Callable[[], Any], where: str | None, message: str, hint: str | None = None) -> SpecError:
    """`call` raises one SpecError problem with this message at this 'line:col' (None: no location)."""
    with pytest.raises(SpecError) as info:
        call()
    (p,) = info.value.problems
    assert p.message == message
    assert (None if p.loc is None else f"{p.loc.line}:{p.loc.col}") == where
    assert str(info.value).splitlines()[0] == (f"{p.loc}: error: {message}" if where else f"error: {message}")
    if hint is not None:
        assert p.hint == hint
    return info.value


def parse(text: str, **limits: int) -> YNode:
    return parse_yaml(text, "spec.yaml", **limits)


# ---- rejections, written inline

TAG_HINT = "a spec is plain data: remove the tag (put the value in quotes if it is text)"
BAD_TEXT = [  # (what, text, line:col, message)
    ("colon in value", "name: my: net\n", "1:9", "unexpected ':' here"),
    ("flow list not closed", "shape: [1, 8\nseed: 0\n", "2:5",
     "expected ',' or ']' here, but found ':': the list opened on line 1, column 8 is not closed"),
    ("flow map not closed", "data: {source: digits\n", "2:1",
     "expected ',' or '}' here, but found the end of the file: the mapping opened on line 1, column 7 is not closed"),
    ("unknown escape", 'path: "C:\\data"\n', "1:11", "'\\d' is not an escape that YAML knows"),
    ("value starts with @", "name: @me\n", "1:7", "a value cannot start with '@'"),
    ("list then mapping", "- relu\nseed: 0\n", "2:1", "a key is not expected here"),
    ("missing ':'", "seed: 0\nname digits\n", "2:1", "this key has no ':' after it"),
    ("missing key", ": 1\n", "1:1", "a key is missing before ':'"),
    ("missing value", "model: ]\n", "1:8", "expected a value here, but found ']'"),
    ("text after quotes", 'name: "a" b\n', "1:11", "a value is not expected here"),
    ("block scalar header", "notes: | hello\n  x\n", "1:10", "after '|' or '>' the text must start on the next line"),
    ("after '...'", "seed: 0\n...\nname: x\n", "3:1", "unexpected text after the end of the document ('...')"),
    ("second document", "seed: 0\n---\nseed: 1\n", "2:1",
     "a second YAML document starts here, but a spec file holds only one"),
    ("control character", "name: a\x07b\n", "1:8", "the character U+0007 is not allowed in a spec"),
    ("NUL byte", "seed: 0\nname: \x00\n", "2:7", "the character U+0000 is not allowed in a spec"),
    ("empty text", "", "1:1", "the spec is empty"),
    ("only '---'", "---\n", "1:1", "the spec is empty"),
    ("YAML 2.0", "%YAML 2.0\n---\nseed: 0\n", "1:1", "unsupported YAML version: specs are read as YAML 1.2"),
    ("duplicate key", "seed: 0\nname: a\nseed: 1\n", "3:1", "duplicate key 'seed': it is already set on line 1"),
    ("duplicate nested key", "train:\n  lr: 1\n  epochs: 2\n  lr: 3\n", "4:3",
     "duplicate key 'lr': it is already set on line 2"),
    ("duplicate in flow map", "opt: {lr: 1, lr: 2}\n", "1:14", "duplicate key 'lr': it is already set on line 1"),
    ("tag !!str", "name: !!str 1\n", "1:7", "tags are not allowed in a spec: !!str"),
    ("local tag", "name: !custom x\n", "1:7", "tags are not allowed in a spec: !custom"),
    ("non-specific tag", "name: ! x\n", "1:7", "tags are not allowed in a spec: !"),
    ("tag on a mapping", "opt: !!python/object/new:collections.OrderedDict {lr: 1}\n", "1:6",
     "tags are not allowed in a spec: !!python/object/new:collections.OrderedDict"),
    ("tag on a sequence", "shape: !!python/tuple [1, 2]\n", "1:8", "tags are not allowed in a spec: !!python/tuple"),
    ("tag on a key", "!!str seed: 0\n", "1:1", "tags are not allowed in a spec: !!str"),
    ("tag after an anchor", "name: &n !!binary aGk=\n", "1:10", "tags are not allowed in a spec: !!binary"),
    ("python name tag", "f: !!python/name:os.system\n", "1:4",
     "tags are not allowed in a spec: !!python/name:os.system"),
    ("undefined tag handle", "name: !my!x 1\n", "1:7", "tags are not allowed in a spec"),
    ("int key", "1: one\n", "1:1", "key 1 is read as a number: keys must be plain names"),
    ("float key", "vars:\n  3.10: x\n", "2:3", "key 3.10 is read as a number: keys must be plain names"),
    ("bool key", "true: x\n", "1:1", "key true is read as the boolean true: keys must be plain names"),
    ("null key", "~: x\n", "1:1", "a key is missing here: keys must be plain names"),
    ("empty explicit key", "? \n: x\n", "1:2", "a key is missing here: keys must be plain names"),
    ("list as key", "? [a, b]\n: x\n", "1:3", "a list cannot be a key: keys must be plain names"),
    ("mapping as key", "{a: 1}: x\n", "1:1", "a mapping cannot be a key: keys must be plain names"),
    ("alias as key", "a: &k name\n*k : x\n", "2:1", "an alias (*k) cannot be a key: keys must be plain names"),
    ("undefined alias", "model: *layers\n", "1:8", "alias *layers has no anchor"),
    ("alias before its anchor", "a: *x\nb: &x 1\n", "1:4", "alias *x has no anchor"),
    ("duplicate anchor", "a: &x 1\nb: &x 2\n", "2:4", "anchor &x is already defined on line 1"),
    ("anchor without a name", "a: & 1\n", "1:5",
     "an anchor (&name) or alias (*name) needs a name of letters, digits, '-' or '_'"),
    ("recursive alias", "&a [*a]\n", "1:5", "alias *a is inside its own anchor &a, so it would repeat forever"),
    ("recursive alias in a map", "train: &t {opt: {inner: *t}}\n", "1:25",
     "alias *t is inside its own anchor &t, so it would repeat forever"),
]  # fmt: skip


@pytest.mark.parametrize("text, where, message", [c[1:] for c in BAD_TEXT], ids=[c[0] for c in BAD_TEXT])
def test_bad_text(text: str, where: str, message: str):
    check_error(lambda: parse(text), where, message)


def fixture_expectation(path: Path) -> tuple[str, str]:
    line = next(ln for ln in path.read_bytes().decode("latin-1").splitlines() if ln.startswith("# error: "))
    where, message = line.removeprefix("# error: ").split(": ", 1)
    return where, message


@pytest.mark.parametrize("path", sorted(BAD.glob("load_*.yaml")), ids=lambda p: p.stem)
def test_bad_file(path: Path):
    where, message = fixture_expectation(path)
    err = check_error(lambda: load_yaml(path), where, message)
    assert str(err).startswith(f"{path}:{where}: error: {message}")


def test_hints_say_how_to_fix():
    check_error(
        lambda: parse("a:\n\tb: 1\n"), "2:1", "a tab character cannot be used here", "indent with spaces, not tabs"
    )
    check_error(lambda: parse("name: 'abc\n"), "1:7", "this quoted text is never closed", "add the closing '")
    err = check_error(lambda: parse("x: !!str 1\n"), "1:4", "tags are not allowed in a spec: !!str", TAG_HINT)
    assert str(err) == f"spec.yaml:1:4: error: tags are not allowed in a spec: !!str\n  hint: {TAG_HINT}"
    check_error(lambda: parse("1: x\n"), "1:1", "key 1 is read as a number: keys must be plain names",
                "use a name that starts with a letter, or write '1' in quotes if you mean the text")  # fmt: skip


# ---- nothing in a spec can run code


def test_python_tags_run_nothing(tmp_path: Path):
    marker = tmp_path / "ran"
    spec = f'specgrad: 1\nname: !!python/object/apply:os.system ["touch {marker}"]\n'
    check_error(lambda: parse(spec), "2:7", "tags are not allowed in a spec: !!python/object/apply:os.system")
    check_error(lambda: load_yaml(tmp_path / "s.yaml", text=spec), "2:7",
                "tags are not allowed in a spec: !!python/object/apply:os.system")  # fmt: skip
    assert not marker.exists()
    yaml.unsafe_load(spec)  # control: the same text does run a command when pyyaml constructs Python objects
    assert marker.exists()


@pytest.mark.parametrize(
    "text",
    [
        "a: !!python/object/new:os.system [echo]\n",
        "a: !!python/object/apply:subprocess.check_call {args: [[echo]]}\n",
        "- !!python/object:__main__.X {}\n",
        "!!python/object/apply:os.system [echo]\n",
    ],
)
def test_python_tags_are_refused(text: str):
    with pytest.raises(SpecError, match="tags are not allowed in a spec: !!python/"):
        parse(text)


# ---- YAML 1.2 core schema

INF, NAN = math.inf, math.nan
SCALARS = [  # plain text -> value
    ("~", None), ("null", None), ("Null", None), ("NULL", None), ("", None), ("nULL", "nULL"), ("none", "none"),
    ("true", True), ("True", True), ("TRUE", True), ("false", False), ("False", False), ("FALSE", False),
    ("tRUE", "tRUE"), ("yes", "yes"), ("no", "no"), ("Yes", "Yes"), ("NO", "NO"), ("on", "on"), ("off", "off"),
    ("y", "y"), ("n", "n"),
    ("0", 0), ("7", 7), ("010", 10), ("-5", -5), ("+5", 5), ("0o17", 15), ("0x1F", 31), ("0xff", 255),
    ("0X1F", "0X1F"), ("0o8", "0o8"), ("-0o17", "-0o17"), ("0b101", "0b101"), ("1_000", "1_000"), ("12:30", "12:30"),
    ("1e-3", 0.001), ("3e-3", 0.003), ("3.10", 3.1), ("1.", 1.0), (".5", 0.5), ("+.5", 0.5), ("-1.5e+2", -150.0),
    ("1E3", 1000.0), ("1e", "1e"), (".", "."), ("1.2.3", "1.2.3"), ("2024-01-01", "2024-01-01"),
    (".inf", INF), (".Inf", INF), (".INF", INF), ("+.inf", INF), ("-.inf", -INF), (".iNF", ".iNF"), ("inf", "inf"),
    (".nan", NAN), (".NaN", NAN), (".NAN", NAN), ("-.nan", "-.nan"), ("nan", "nan"),
    ("$width", "$width"), ("4 * $d", "4 * $d"), ("digits-cnn", "digits-cnn"), ("<<", "<<"),
]  # fmt: skip


def same(a: Any, b: Any) -> bool:
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return type(a) is type(b) and (a == b or both_nan)


@pytest.mark.parametrize("text, value", SCALARS, ids=[repr(t) for t, _ in SCALARS])
def test_plain_scalars_follow_yaml_1_2(text: str, value: Any):
    node = parse(f"v: {text}\n").value["v"]
    assert node.kind == "scalar" and same(node.value, value) and same(resolve_scalar(text), value)
    assert node.text == text and not node.quoted


QUOTED = [  # written text -> value (always a str)
    ("'1'", "1"), ('"true"', "true"), ("'010'", "010"), ('"3.10"', "3.10"), ("'~'", "~"), ("''", ""),
    ('"null"', "null"), ("'.inf'", ".inf"), ('"1e-3"', "1e-3"), ("'yes'", "yes"), ('"a\\tb"', "a\tb"),
    ("'it''s'", "it's"), ("|\n  3.10\n", "3.10\n"), (">-\n  true\n", "true"),
]  # fmt: skip


@pytest.mark.parametrize("text, value", QUOTED, ids=[repr(t) for t, _ in QUOTED])
def test_quoted_scalars_are_text(text: str, value: str):
    node = parse(f"v: {text}\n").value["v"]
    assert same(node.value, value) and node.text == value and node.quoted


def test_text_keeps_what_was_written():
    node = parse("python: 3.10\n").value["python"]
    assert (node.value, node.text, node.quoted) == (3.1, "3.10", False)


def test_keys_are_text():
    root = parse("'1': a\nyes: b\nno: c\n\"true\": d\non: e\n")
    assert list(root.value) == ["1", "yes", "no", "true", "on"]


def test_merge_key_is_an_ordinary_key():
    root = parse("base: &b {lr: 0.1}\ntrain:\n  <<: *b\n  lr: 0.2\n")
    assert root.to_plain() == {"base": {"lr": 0.1}, "train": {"<<": {"lr": 0.1}, "lr": 0.2}}


# ---- located good specs

GOOD = """\
specgrad: 1
name: digits-cnn
model:
  - conv2d: {out: $width, kernel: 3}
  - relu
  - linear:
      out: 10
train: {epochs: 20, optimizer: {adam: {lr: 3e-3}}, metrics: [accuracy, loss]}
"""


def where(loc: Location) -> tuple[int, int]:
    return loc.line, loc.col


def test_locations_of_keys_and_items():
    root = load_yaml("specs/digits.yaml", text=GOOD)
    assert root.kind == "map" and root.loc == Location("specs/digits.yaml", 1, 1)
    assert {k: where(loc) for k, loc in root.key_locs.items()} == {
        "specgrad": (1, 1), "name": (2, 1), "model": (3, 1), "train": (8, 1)}  # fmt: skip
    model = root.value["model"]
    assert model.kind == "seq" and where(model.loc) == (4, 3)
    conv, relu, linear = model.value
    assert where(conv.loc) == (4, 5) and where(conv.key_locs["conv2d"]) == (4, 5)
    args = conv.value["conv2d"]
    assert (
        where(args.loc) == (4, 13)
        and where(args.key_locs["out"]) == (4, 14)
        and where(args.key_locs["kernel"]) == (4, 27)
    )
    assert where(args.value["out"].loc) == (4, 19) and args.value["kernel"].value == 3
    assert relu.kind == "scalar" and relu.value == "relu" and where(relu.loc) == (5, 5)
    out = linear.value["linear"]
    assert where(out.key_locs["out"]) == (7, 7) and where(out.value["out"].loc) == (7, 12)
    train = root.value["train"]
    assert where(train.key_locs["epochs"]) == (8, 9) and where(train.key_locs["metrics"]) == (8, 52)
    lr = train.get("optimizer").get("adam").get("lr")
    assert lr.value == 0.003 and lr.text == "3e-3" and where(lr.loc) == (8, 44)
    assert [where(m.loc) for m in train.value["metrics"].value] == [(8, 62), (8, 72)]


def test_to_plain_and_get():
    root = parse(GOOD)
    assert root.to_plain() == {
        "specgrad": 1,
        "name": "digits-cnn",
        "model": [{"conv2d": {"out": "$width", "kernel": 3}}, "relu", {"linear": {"out": 10}}],
        "train": {"epochs": 20, "optimizer": {"adam": {"lr": 0.003}}, "metrics": ["accuracy", "loss"]},
    }
    assert root.get("name").value == "digits-cnn" and root.get("missing") is None
    assert root.get("name").get("x") is None and root.value["model"].get("x") is None


def test_aliases_expand_to_separate_nodes_located_at_their_anchor():
    root = parse("base: &b\n  lr: 0.1\ntrain: *b\n")
    base, train = root.value["base"], root.value["train"]
    assert train.to_plain() == {"lr": 0.1} and train is not base and train.value["lr"] is not base.value["lr"]
    assert where(train.loc) == (1, 7)  # an anchored node starts at its '&'
    assert where(train.value["lr"].loc) == (2, 7) and where(train.key_locs["lr"]) == (2, 3)


def test_line_endings_and_byte_order_mark(tmp_path: Path):
    root = parse("a: 1\r\nb:\r\n  c: 2\r\n")
    assert where(root.key_locs["b"]) == (2, 1) and where(root.value["b"].key_locs["c"]) == (3, 3)
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: 1\nname: caf\xc3\xa9\n")
    root = load_yaml(path)
    assert root.to_plain() == {"a": 1, "name": "café"} and where(root.key_locs["a"]) == (1, 1)


def test_non_mapping_roots_are_left_to_the_validator():
    assert parse("- relu\n- flatten\n").to_plain() == ["relu", "flatten"]
    assert parse("~\n").to_plain() is None


# ---- limits and files


def test_a_50_mb_file_is_refused_before_reading(tmp_path: Path):
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as f:
        f.write(b"specgrad: 1\n")
        f.truncate(50_000_000)  # NOTE: the rest is NUL bytes, which the loader would refuse only after reading them
    check_error(
        lambda: load_yaml(path),
        "1:1",
        "the file is too big: 50,000,000 bytes, but a spec may be at most 1,000,000 bytes",
        "keep data in its own files (CSV, NPZ, text) and name them in the spec",
    )


def test_size_limit_applies_to_text_too():
    check_error(lambda: parse("name: abcdef\n", max_bytes=10), "1:1",
                "the file is too big: 13 bytes, but a spec may be at most 10 bytes")  # fmt: skip
    assert parse("name: é\n", max_bytes=10).value["name"].value == "é"


def test_billion_laughs_fails_fast():
    laughs = (BAD / "load_billion_laughs.yaml").read_text()
    check_error(lambda: parse(laughs), "8:8", "alias *e makes the spec too big: it grows past 100,000 values")
    check_error(
        lambda: parse(laughs, max_nodes=1000), "6:8", "alias *c makes the spec too big: it grows past 1,000 values"
    )


def test_too_many_values_without_aliases():
    too_big = "the spec is too big: it has more than 5 values"
    check_error(lambda: parse("[1, 2, 3, 4, 5]\n", max_nodes=5), "1:14", too_big)
    check_error(lambda: parse("a: 1\nb: 2\nc: 3\nd: 4\ne: 5\n", max_nodes=5), "5:4", too_big)  # keys are not values
    assert parse("[1, 2, 3, 4]\n", max_nodes=5).to_plain() == [1, 2, 3, 4]


def test_depth_limit():
    too_deep = "the spec nests too deep: more than 64 levels of lists and mappings"
    deepest = parse("[" * 64 + "]" * 64)
    for _ in range(63):
        (deepest,) = deepest.value
    assert deepest.kind == "seq" and deepest.value == []
    check_error(lambda: parse("[" * 65 + "]" * 65), "1:65", too_deep)
    check_error(lambda: parse("[\n" * 100_000), "65:1", too_deep)  # fails at once, no RecursionError
    block = "a:\n  b:\n    c:\n      d: 1\n"
    assert parse(block, max_depth=4).to_plain() == {"a": {"b": {"c": {"d": 1}}}}
    check_error(
        lambda: parse(block, max_depth=3), "4:7", "the spec nests too deep: more than 3 levels of lists and mappings"
    )


def test_depth_limit_through_aliases():
    text = "a: &a [[1]]\nb: [*a]\n"
    assert parse(text, max_depth=4).to_plain() == {"a": [[1]], "b": [[[1]]]}
    check_error(lambda: parse(text, max_depth=3), "2:5",
                "alias *a makes the spec nest too deep: more than 3 levels of lists and mappings")  # fmt: skip


def test_missing_file_and_folder(tmp_path: Path):
    missing = tmp_path / "nope.yaml"
    check_error(lambda: load_yaml(missing), None, f"no such file: {missing}")
    check_error(lambda: load_yaml(tmp_path), None, f"cannot read {tmp_path}: it is a folder, not a regular file")


def test_text_argument_skips_the_file():
    root = load_yaml("not/on/disk.yaml", text="seed: 3\n")
    assert root.value["seed"].loc == Location("not/on/disk.yaml", 1, 7)


# ---- errors.py


def test_error_types():
    loc = Location("s.yaml", 3, 5)
    assert str(loc) == "s.yaml:3:5"
    assert str(Problem("bad", loc)) == "s.yaml:3:5: error: bad"
    assert str(Problem("bad", loc, "fix it")) == "s.yaml:3:5: error: bad\n  hint: fix it"
    assert str(Problem("no such file: x")) == "error: no such file: x"
    err = SpecError([Problem("one", loc), Problem("two", Location("s.yaml", 4, 1))])
    assert str(err) == "s.yaml:3:5: error: one\ns.yaml:4:1: error: two"
    assert SpecError.at(loc, "bad", "fix").problems == [Problem("bad", loc, "fix")]
    assert SpecError(Problem("x")).problems == [Problem("x")]
    assert pickle.loads(pickle.dumps(err)).problems == err.problems
    with pytest.raises(ValueError):
        SpecError([])
