"""What every data source shares: SourceDef (the registry's record of a source: its keys, reader and checks), the
_Source helper (the data section, its one input and output, and where each value is written), Dataset and Head (what a
reader gives), the helpers their messages share, and standardization. Imports numpy and modelspec (auto, contract,
errors, files, layers, loader, validate); csv's CsvNotes is named for annotations only.

Files are read as modelspec.files allows: inside the allowed folders, regular files of at most MAX_FILE_MB. Messages
quote a data file only in short excerpts (a cell, a column name).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from specgrad.modelspec.auto import DataWidths
from specgrad.modelspec.contract import TINY, Columns
from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.modelspec.files import RELATIVE_HINT, check_inside, read_data
from specgrad.modelspec.layers import LAYERS
from specgrad.modelspec.loader import YNode
from specgrad.modelspec.validate import DATA, ValidSpec

if TYPE_CHECKING:
    from specgrad.train.sources.csv import CsvNotes


DEFAULT_VOCAB = 128  # NOTE: characters are their code points; ASCII unless the model's embedding says otherwise
MAX_PROBLEMS = 10  # problems of one kind (cells, characters) reported at once; the rest are counted
EXACT_FLOAT32 = 2**24  # NOTE: integers up to this are exact in float32
FLOAT32_MAX = float(np.finfo(np.float32).max)  # NOTE: a larger value from a file would become infinity on the device
MAX_CLASSES = LAYERS["linear"].entry.args.fields["out"].max  # NOTE: the widest output layer the schema allows
SHOWN = 40  # NOTE: characters of a data file's cell or column name a message quotes


@dataclass
class Head:
    """One output of a model with several inputs or outputs: what it learns, and what its targets say."""

    task: str  # "classify" (int32 labels) or "regress" (float32), from its loss: cross_entropy or mse
    loss: str
    weight: float  # its share of the total loss
    num_classes: int | None = None
    class_names: list[str] | None = None
    target_stats: dict[str, np.ndarray] = field(default_factory=dict)  # as Dataset.target_stats


@dataclass
class Dataset:
    """Training and validation examples: x is (N, *input shape) in the input's dtype, y the targets. A model with
    several inputs or outputs (task "multi") has structured arrays instead, one field per input (x[name] is (N, *its
    shape)) and per output, so that examples are still rows to split, shuffle and batch; `fields` takes them apart."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_valid: np.ndarray
    y_valid: np.ndarray
    task: str  # "classify" (y int32 labels), "regress" (y float32) or "language" (y int32 next tokens (N, context))
    num_classes: int | None = None
    stats: dict[str, np.ndarray] = field(default_factory=dict)  # "mean", "std" of the training x when normalized
    # "mean", "std" (shape y.shape[1:], e.g. (F,)) of the training y when regression targets are standardized
    target_stats: dict[str, np.ndarray] = field(default_factory=dict)
    class_names: list[str] | None = None  # task "classify": the label of each class index, in order
    columns: Columns | None = None  # csv: the columns read and the categorical vocabularies (saved with the weights)
    augment: dict[str, Any] | None = None  # data.augment when it changes anything: applied to training batches only
    heads: dict[str, Head] = field(default_factory=dict)  # task "multi": output name -> its task, loss and statistics
    input_stats: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # task "multi": input name -> stats
    test_examples: int = 0  # examples data.test_split holds out, which training never reads
    table: CsvNotes | None = None  # csv: its dialect, its missing cells and the rows left out, for validate


def fields(a: np.ndarray, names: tuple[str, ...] | list[str]) -> list[np.ndarray]:
    """The arrays a batch gives the model, one per input (or target per output): a structured array's fields by name,
    else the array itself (a model with one input and one output)."""
    return [np.ascontiguousarray(a[n]) for n in names] if a.dtype.names else [a]


@dataclass(frozen=True)
class _Source:
    """The data section and its one input; locations come from the validated spec's resolved tree."""

    spec: ValidSpec
    data: dict[str, Any]
    name: str
    shape: tuple[int, ...]
    dtype: str
    out: str  # the output whose targets are being read (a model with several has a _Source per output)
    held: str = "valid"  # the held-out part a Dataset's x_valid/y_valid hold: "valid", or "test" (for evaluate)
    # reading a file of test examples (data.test_path, or evaluate --split FILE): every example in it is a test example
    test_file: Path | None = None
    test_key: str = "data.test_path"  # what names test_file, in messages
    columns: Columns | None = None  # test_file: the training split's csv columns and vocabularies
    classes: list[str] | None = None  # test_file: the training split's class names (labels are their indices)

    @property
    def key(self) -> str:
        """What names the file being read, in messages."""
        return self.test_key if self.test_file is not None else "data.path"

    @property
    def missing_hint(self) -> str:
        """Where a relative path is looked for, in words."""
        return "a path on the command line is relative to the current folder" if self.test_key == "--split" else \
            RELATIVE_HINT  # fmt: skip

    @property
    def value(self) -> str:
        """The file being read, as named."""
        return str(self.test_file) if self.test_file is not None else self.data["path"]

    @property
    def loss(self) -> str:
        return self.spec.losses[self.out][0]

    @property
    def regress_fix(self) -> str:
        """How to make the output learn numbers instead of class labels, in words."""
        return f"set train.losses.{self.out}.loss: mse" if named(self.spec) else \
            "set data.task: regress and train.loss: mse"  # fmt: skip

    def loss_loc(self) -> Location | None:
        """Where the output's loss is written: train.losses.<out>.loss, or train.loss."""
        node = self.node("train", "losses", self.out, "loss")
        return node.loc if node is not None else self.written("train", "loss")

    def node(self, *keys: str) -> YNode | None:
        return self.spec.node(*keys)

    def loc(self, key: str) -> Location | None:
        """Where data.<key> is written, when the spec as written still holds the value being used."""
        node = self.node("data", key)
        return node.loc if node is not None and node.to_plain() == self.data[key] else None

    def near(self, key: str) -> Location | None:
        """Where data.<key> is written, else the data section (a default value, or one set on the command line)."""
        data = self.node("data")
        return self.loc(key) or (data.loc if data is not None else None)

    def written(self, section: str, key: str) -> Location | None:
        """Where <section>.<key> is written, when the spec as written holds the value being used."""
        node = self.node(section, key)
        return node.loc if node is not None and node.to_plain() == self.spec.values[section][key] else None

    def given(self, key: str) -> bool:
        """data.<key> is written in the spec, or set on the command line to something other than its default."""
        return self.node("data", key) is not None or self.data[key] != DATA.fields[key].default

    def output(self) -> tuple[tuple[int, ...], Location]:
        """The output `out`: its shape per example, and where its width is set (the output layer, or the last
        layer before it with an `out`, when activations follow that one)."""
        steps = {s.name: s for s in self.spec.steps}
        last = step = steps[self.out]
        while "out" not in step.args and len(step.srcs) == 1 and step.srcs[0] in steps:
            step = steps[step.srcs[0]]
        return tuple(last.out_shape), (step if "out" in step.args else last).loc

    def input_loc(self, key: str = "shape") -> Location | None:
        node = self.node("input", key) or self.node("inputs", self.name, key)
        return node.loc if node is not None else None

    def file(self) -> Path:
        """The test file being read, else data.path, relative to the folder of the spec file that names it."""
        return self.test_file if self.test_file is not None else self.named_file("path")

    def named_file(self, key: str) -> Path:
        """data.<key> (path or test_path), relative to the folder of the spec file that names it."""
        loc = self.loc(key)
        folder = Path(loc.file).parent if loc is not None and not loc.file.startswith("--set") else None
        return (folder or Path(self.spec.path).parent) / self.data[key]

    def path_loc(self, file: Path) -> Location:
        """Problems with a whole file: where the spec names it, else at the file itself."""
        key = "path" if self.test_file is None else "test_path" if self.test_key == "data.test_path" else None
        return (self.loc(key) if key else None) or Location(str(file), 1, 1)

    def checked(self, file: Path, value: str, loc: Location | None) -> str:
        """`file` (named `value` in the spec, at `loc`), once it is known to lie in the folders the spec may read."""
        check_inside(str(file), self.spec.path, loc, self.key, value)
        return str(file)

    def read(self, file: Path, value: str, loc: Location | None) -> bytes:
        """The whole of `file` (named `value` in the spec), at most MAX_FILE_MB; a FIFO, device or folder is refused."""
        return read_data(self.checked(file, value, loc), loc, self.key, self.missing_hint)


@dataclass(frozen=True)
class SourceDef:
    """One data source a spec can name (data.source): its reader and what applies to it. load_data, the checks of the
    data section, `validate` and `evaluate` read these through the registry (sources/__init__.py), so that a new
    source is one module defining its SourceDef and one entry there."""

    name: str  # as the spec names it: one of modelspec.validate.SOURCES
    read: Callable[[_Source], Dataset]  # the examples, split (a file of test examples: all of them held out)
    keys: tuple[str, ...]  # data keys that do something for it beyond the common ones; any other given is an error
    floats: bool = False  # gives numbers with fractions, so the input's dtype must be a float
    targets: tuple[str | None, ...] | None = None  # the data.target values it takes (None: any, a column or an array)
    normalizes: bool = True  # data.normalize standardizes its x (a float input's)
    axis: int | tuple[int, ...] | None = 0  # the axes of x its normalization statistics are taken over (None: all)
    widths: Callable[[_Source, bool], DataWidths] | None = None  # input.shape: auto and out: auto from its data


def named(spec: ValidSpec) -> bool:
    """A model with several inputs or outputs: its data is an npz with one array per input and output, by name."""
    return len(spec.inputs) > 1 or len(spec.outputs) > 1


def _raise_all(problems: list[Problem], spec: str) -> None:
    """Every problem once, sorted by place: the spec's lines first (what to edit), then each data file's, then those
    without a place (a count of the ones left out)."""
    if not problems:
        return
    ordered = sorted(dict.fromkeys(problems), key=lambda p: (p.loc is None, p.loc is not None and p.loc.file != spec,
                                                            p.loc.file if p.loc else "", p.loc.line if p.loc else 0,
                                                            p.loc.col if p.loc else 0))  # fmt: skip
    raise SpecError(ordered)


def _shown(v: Any) -> str:
    """A label as it was written: integers exactly (never through a float), whole floats without '.0'."""
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _count(n: int, word: str) -> str:
    """'1 class', '3 classes', '1 value', '2 values'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}{'es' if word.endswith(('s', 'x', 'ch', 'sh')) else 's'}"


def _context(src: _Source, key: str, where: Location | None) -> str:
    """' (d.csv:9:1)': the data's place, said beside a problem located at the spec key data.<key> that causes it."""
    if src.loc(key) is None or where is None or where.file == src.loc(key).file:
        return ""
    return f" ({Path(where.file).name}:{where.line}:{where.col})"


def _check_shape(src: _Source, got: tuple[int, ...], what: str) -> None:
    """The examples' shape must be the input's; `what` says where the examples' shape comes from."""
    if tuple(got) != src.shape:
        raise SpecError.at(src.input_loc(), f"{what}, but the input's shape is {list(src.shape)}",
                           f"set the input's shape to {list(got)}")  # fmt: skip


def standardize(x: np.ndarray, stats: dict[str, np.ndarray]) -> np.ndarray:
    """x with the training statistics applied, as load_data does; unchanged when stats is empty."""
    return (x - stats["mean"]) / stats["std"] if stats else x


def unstandardize(y: np.ndarray, stats: dict[str, np.ndarray]) -> np.ndarray:
    """Standardized targets (or predictions of them) back in the target's own units; unchanged when stats is empty."""
    return y * stats["std"] + stats["mean"] if stats else y


def _statistics(x: np.ndarray, axis: int | tuple[int, ...] | None) -> dict[str, np.ndarray]:
    """Mean and std as float32, over `axis` (None: one number for everything; a tuple keeps the other axes, e.g.
    (0, 2, 3) gives images (C, 1, 1) statistics per channel). A std of 0, or one too small for a normal float32 (it
    would round to 0 or lose its precision), is 1: such a value is a constant, and the weights' metadata check refuses
    a std specgrad could not have written."""
    x = x.astype(np.float64)
    keep = isinstance(axis, tuple)
    mean, std = np.asarray(x.mean(axis=axis, keepdims=keep)), np.asarray(x.std(axis=axis, keepdims=keep))
    if keep:
        mean, std = mean[0], std[0]  # NOTE: without the batch axis
    std = np.where(std < TINY, 1.0, std)
    return {"mean": mean.astype(np.float32), "std": std.astype(np.float32)}


def _read_bytes(src: _Source, file: Path) -> bytes:
    """The whole data file data.path (or data.test_path) names."""
    return src.read(file, src.value, src.path_loc(file))


def _quoted(text: str) -> str:
    """A data file's cell or column name as a message quotes it."""
    return excerpt(text, SHOWN)


def _decode(raw: bytes, file: Path) -> str:
    """UTF-8 text (a byte-order mark is dropped); a bad byte is an error at its line and column."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line_start = raw.rfind(b"\n", 0, e.start) + 1
        col = len(raw[line_start : e.start].decode("utf-8", errors="replace")) + 1
        loc = Location(str(file), raw.count(b"\n", 0, e.start) + 1, col)
        raise SpecError.at(loc, f"{file.name} is not UTF-8 text: byte 0x{raw[e.start]:02x} here cannot be read",
                           "save the file as UTF-8 (most editors offer it in Save As)") from None  # fmt: skip


def _vocab(src: _Source) -> tuple[int, bool]:
    """(how many token codes the model takes, whether an embedding said so)."""
    sizes = [s.args["vocab"] for s in src.spec.steps if s.what == "embedding" and src.name in s.srcs]
    return (int(sizes[0]), True) if sizes else (DEFAULT_VOCAB, False)


def _int(s: str) -> int | None:
    """The whole number a cell's text spells (exactly, however large), else None."""
    try:
        return int(s)
    except ValueError:
        return None


def _class_order(name: str) -> tuple[int, int, str]:
    """Class names that spell whole numbers first, in numeric order (2 before 10), then the others as text."""
    n = _int(name)
    return (0, n, "") if n is not None else (1, 0, name)


def _numbered(n: int) -> list[str]:
    """The class names of labels that are numbers: '0', '1', ..."""
    return [str(i) for i in range(n)]


def _shown_names(names: list[str]) -> str:
    return ", ".join(_quoted(v) for v in names[:10]) + (f", ... ({len(names)} in all)" if len(names) > 10 else "")


def _raise_cut(problems: list[Problem], file: Path) -> None:
    if problems:
        raise SpecError(_cut(problems, file))


def _cut(problems: list[Problem], file: Path) -> list[Problem]:
    """Up to MAX_PROBLEMS problems, then how many more there are."""
    if len(problems) <= MAX_PROBLEMS:
        return problems
    more = len(problems) - MAX_PROBLEMS
    return [*problems[:MAX_PROBLEMS], Problem(f"... and {more} more problem{'s' * (more > 1)} in {file}")]
