"""A structure-aware spec fuzzer (issue 14 item 7): each shipped spec in specs/ is parsed, its tree mutated (values
swapped for other kinds and extremes, keys dropped, renamed and nested, subtrees aliased, swapped and grafted from
other specs, lists repeated; huge, negative and NaN numbers, long strings, odd unicode, expressions), dumped back to
YAML (sometimes with its text mutated too: a line duplicated, dropped or cut), given odd --set overrides, and run
through `specgrad validate`. Every example must end as a user's mistake (exit 1 with located errors) or a valid
spec (exit 0): never a traceback, never an internal error, never a hang.

The default tier runs FAST_EXAMPLES examples with a fixed seed (derandomize) so CI is deterministic; the slow tier
(`-m slow`) runs SLOW_EXAMPLES."""

from __future__ import annotations

import copy
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.flags import Context

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted((REPO / "specs").glob("*.yaml"))
TREES = {p.name: yaml.safe_load(p.read_text()) for p in SPECS}
FAST_EXAMPLES = 200
SLOW_EXAMPLES = 3000
HANG_S = 30  # NOTE: one validate takes well under a second; past this it is a hang
runner = CliRunner()


def _keys(tree: Any) -> Iterator[str]:
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield str(k)
            yield from _keys(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from _keys(v)


def _leaves(tree: Any) -> Iterator[Any]:
    if isinstance(tree, dict):
        for v in tree.values():
            yield from _leaves(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from _leaves(v)
    else:
        yield tree


KEYS = sorted({k for tree in TREES.values() for k in _keys(tree)} | {"extends", "blocks", "inputs", "graph", "repeat"})
WORDS = sorted({v for tree in TREES.values() for v in _leaves(tree) if isinstance(v, str)})  # NOTE: layer names, ...
ODD_TEXT = ["", " ", "\u202e", "\x00", "\x1b[31m", "\x1b]0;t\x07", "[/]", "[bold]", "../../etc/passwd", "/dev/zero",
            "/", "..", "$x", "$", "${", "$d", "4 * $d", "$d // 0", "$d % 0", "(" * 40 + "1" + ")" * 40, "9" * 400,
            "-" * 300 + "1", "1e999", ".nan", "-.inf", "~", "null", "yes", "no", "on", "0x10", "0o17", "1_000", "-0",
            "!!python/object:os.system", "&a", "*a", "<<", "=", "é", "\U0001f600", "\t", "\n", "---", "...", "- a",
            "{a: 1}", "a: b", "'", '"', "\\", "%YAML 1.1", "#", "@", "`", "in", "out", "input"]  # fmt: skip
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2, 2**31, 2**63, -(2**63), 2**64, 10**100, 1 << 20, (1 << 20) + 1, 65536, 10**18]),
    st.floats(allow_nan=True, allow_infinity=True),
)
TEXT = st.one_of(
    st.sampled_from(ODD_TEXT),
    st.sampled_from(KEYS),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "$", "(", "é", "9", "[", "a "]), st.integers(60, 5000)),
)
LEAF = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
VALUE = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.sampled_from(KEYS), TEXT), inner, max_size=4)
    ),
    max_leaves=12,
)
INDEX = st.integers(min_value=0, max_value=10**6)
TWEAK = st.tuples(st.just("tweak"), INDEX, INDEX)  # NOTE: a near miss, so more mutants get past the first checks
MUTATION = st.one_of(
    TWEAK,
    TWEAK,
    TWEAK,
    st.tuples(st.just("replace"), INDEX, VALUE),
    st.tuples(st.just("drop"), INDEX),
    st.tuples(st.just("rename"), INDEX, st.one_of(st.sampled_from(KEYS), TEXT)),
    st.tuples(st.just("nest_list"), INDEX),
    st.tuples(st.just("nest_map"), INDEX, st.sampled_from(KEYS)),
    st.tuples(st.just("alias"), INDEX, INDEX),
    st.tuples(st.just("swap"), INDEX, INDEX),
    st.tuples(st.just("graft"), INDEX, st.sampled_from(sorted(TREES)), INDEX),
    st.tuples(st.just("repeat"), INDEX, st.integers(2, 50)),
)
TEXT_MUTATION = st.one_of(
    st.tuples(st.just("duplicate_line"), INDEX),
    st.tuples(st.just("drop_line"), INDEX),
    st.tuples(st.just("insert_line"), INDEX, TEXT),
    st.tuples(st.just("cut"), INDEX),
)


# *** the tree: paths to every node, and changes at a path ***


def paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    """Every node's path (the root's too), each node once (an aliased subtree is walked where it is first met)."""
    found, seen = [], set()

    def walk(node: Any, at: tuple) -> None:
        found.append(at)
        if isinstance(node, (dict, list)):
            if id(node) in seen:
                return
            seen.add(id(node))
            for k, v in node.items() if isinstance(node, dict) else enumerate(node):
                walk(v, (*at, k))

    walk(tree, prefix)
    return found


def get(tree: Any, path: tuple) -> Any:
    for k in path:
        tree = tree[k]
    return tree


def put(tree: Any, path: tuple, value: Any) -> Any:
    """The tree with the node at `path` replaced (the root itself when `path` is empty)."""
    if not path:
        return value
    get(tree, path[:-1])[path[-1]] = value
    return tree


def pick(tree: Any, index: int, below_root: bool = False) -> tuple:
    found = paths(tree)[1:] if below_root else paths(tree)
    return found[index % len(found)] if found else ()


def related(a: tuple, b: tuple) -> bool:
    return a[: len(b)] == b or b[: len(a)] == a


def mutate(tree: Any, m: tuple) -> Any:
    kind, index = m[0], m[1]
    at = pick(tree, index, below_root=kind in ("drop", "rename"))
    if kind == "replace":
        return put(tree, at, m[2])
    if kind == "tweak":
        return put(tree, at, tweaked(get(tree, at), m[2]))
    if kind in ("drop", "rename") and at:
        parent, key = get(tree, at[:-1]), at[-1]
        value = parent.pop(key) if isinstance(parent, (dict, list)) else None
        if kind == "rename" and isinstance(parent, dict):
            parent[m[2]] = value
        return tree
    if kind == "nest_list":
        return put(tree, at, [get(tree, at)])
    if kind == "nest_map":
        return put(tree, at, {m[2]: get(tree, at)})
    if kind in ("alias", "swap"):
        other = pick(tree, m[2])
        if related(at, other):
            return tree
        a, b = get(tree, at), get(tree, other)
        tree = put(tree, at, b)  # NOTE: alias: one object twice, which the YAML dumper writes as &anchor and *alias
        return put(tree, other, a) if kind == "swap" else tree
    if kind == "graft":
        donor = TREES[m[2]]
        return put(tree, at, copy.deepcopy(get(donor, pick(donor, m[3]))))
    if kind == "repeat":
        node = get(tree, at)
        return put(tree, at, node * m[2]) if isinstance(node, list) and len(node) * m[2] <= 200 else tree
    return tree


def tweaked(v: Any, choice: int) -> Any:
    """A value near `v`: a number scaled, shifted or at a bound; a word swapped for another of the shipped specs'."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        near = [v * 2, v // 2, v + 1, v - 1, 0, 1, -v, v * 1000, 2**31, v + 0.5, v / 3, 1 << 20]
        return near[choice % len(near)]
    if isinstance(v, str):
        return WORDS[choice % len(WORDS)]
    if isinstance(v, list) and v:
        return v[: choice % len(v)]
    return v


def mutate_text(text: str, m: tuple) -> str:
    lines = text.split("\n")
    i = m[1] % max(len(lines), 1)
    if m[0] == "duplicate_line":
        lines.insert(i, lines[i])
    elif m[0] == "drop_line":
        lines.pop(i)
    elif m[0] == "insert_line":
        lines.insert(i, str(m[2]))
    else:
        return text[: m[1] % max(len(text), 1)]
    return "\n".join(lines)


def override(tree: Any, index: int, value: Any) -> str:
    """--set KEY=VALUE for a node of the tree (its dotted path), the value written as YAML flow text."""
    at = pick(tree, index, below_root=True)
    key = ".".join(str(k) for k in at) or "name"
    text = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True, width=10**9).strip()
    return f"{key}={text.removesuffix('...').strip()}"


# *** running validate ***


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of specs/ (the data files the shipped specs name included); the mutated spec is written beside them."""
    root = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(REPO / "specs", root / "specs")
    with Context(SPEC_ROOT=str(root), SPEC_ALLOW_OUTSIDE=0):
        yield root / "specs"


def _alarm(*_: object) -> None:
    raise TimeoutError(f"validate still running after {HANG_S} s (a hang)")


def validate_mutant(folder: Path, text: str, sets: list[str], as_json: bool) -> int:
    """`specgrad validate` on the text as a spec in `folder`: exit 0 or 1, no traceback, no internal error."""
    spec = folder / "fuzzed.yaml"
    spec.write_text(text, encoding="utf-8", errors="surrogatepass")
    args = ["validate", str(spec), *[a for s in sets for a in ("--set", s)], *(["--json"] if as_json else [])]
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_S)
    try:
        result = runner.invoke(app, args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    shown = f"spec:\n{text[:3000]}\n--set {sets}\noutput:\n{result.output[-3000:]}"
    assert result.exception is None or isinstance(result.exception, SystemExit), f"{result.exception!r}\n{shown}"
    assert result.exit_code in (0, 1), f"exit {result.exit_code}\n{shown}"
    assert "Traceback" not in result.output and "internal error" not in result.output, shown
    assert result.exit_code == 0 or "error" in result.output, shown
    return result.exit_code


def sometimes(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """An empty list three times in four, else one item: most mutants keep their text and take no --set."""
    return st.one_of(st.just([]), st.just([]), st.just([]), st.lists(strategy, min_size=1, max_size=1))


MUTANT = st.tuples(
    st.sampled_from(sorted(TREES)),
    st.lists(MUTATION, min_size=1, max_size=3),
    sometimes(TEXT_MUTATION),
    sometimes(st.tuples(INDEX, st.one_of(TEXT, VALUE, st.sampled_from(WORDS)))),
    st.booleans(),
    st.booleans(),
)


def check_mutant(folder: Path, mutant: tuple) -> None:
    name, mutations, text_mutations, sets, unicode, as_json = mutant
    tree = copy.deepcopy(TREES[name])
    for m in mutations:
        tree = mutate(tree, m)
    text = yaml.safe_dump(tree, sort_keys=False, allow_unicode=unicode, width=120)
    for m in text_mutations:
        text = mutate_text(text, m)
    code = validate_mutant(folder, text, [override(tree, i, v) for i, v in sets], as_json)
    event(f"exit {code}")  # NOTE: --hypothesis-show-statistics says how many mutants were valid


# NOTE: derandomize: the same examples every run (CI is deterministic); database None: nothing kept between runs
COMMON = {"deadline": 10_000, "database": None, "derandomize": True, "print_blob": True,
          "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                                    HealthCheck.filter_too_much]}  # fmt: skip


@settings(max_examples=FAST_EXAMPLES, **COMMON)
@given(mutant=MUTANT)
def test_mutated_specs_validate_or_fail_cleanly(folder: Path, mutant: tuple) -> None:
    check_mutant(folder, mutant)


@pytest.mark.slow
@settings(max_examples=SLOW_EXAMPLES, **COMMON)
@given(mutant=MUTANT)
def test_mutated_specs_validate_or_fail_cleanly_many(folder: Path, mutant: tuple) -> None:
    check_mutant(folder, mutant)


@pytest.mark.parametrize("name", sorted(TREES))
def test_each_shipped_spec_validates_unmutated(folder: Path, name: str) -> None:
    """The fuzzer starts from valid specs: each one, dumped back to YAML from its tree, still validates."""
    text = yaml.safe_dump(TREES[name], sort_keys=False, allow_unicode=True)
    assert validate_mutant(folder, text, [], False) == 0
