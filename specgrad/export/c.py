"""Export a model as self-contained C: the CLANG kernels TinyJit captured for one forward pass, the weights as
arrays, and a forward function that calls the kernels in order. No Python is needed to run it. Given the weights'
metadata (a task), the forward function computes what `specgrad run` computes, as the ONNX export does: it standardizes
each float input, and gives each output as `logits` and `probabilities` (classify, language) or `prediction`
(regress, in the target's units); without a task, each output is the model's own.

A model with one input and one output gets `<name>_forward(const float* input, float* logits, ...)`; one with several
gets a parameter per input (`in_<input>`) and per output (`out_<output>_logits`, ..., or `out_<output>`), in the
spec's order, with a size macro for each (`<name>_in_<input>_SIZE`). <name> is the spec's name in C's letters
(c_identifier: `2layer` is `model_2layer`), so every valid name compiles.

The header says what each value is (layout_comment: a csv's columns, one-hot positions and categories, the class
names in order or the target). The kernels are lowered with vectors of at most 16 bytes (PORTABLE_VECTOR_BYTES), so
`cc` builds the file without an ABI warning for any x86-64 or arm64 target, whatever this CPU's widest vectors are.

The runner (-DSPECGRAD_MAIN) reads each example as its inputs' numbers in order, separated by commas, spaces or
both, and prints each output's probabilities, prediction or values on one line, in order. It checks its input: junk
(a NUL byte inside a number, a word, an empty value (nothing between two commas, or a comma first on a line) that
the model fills no missing value for, a line whose separators change from commas to spaces, as decimal commas make
them), NaN or infinity, a value infinite once standardized, or an example cut short ends it with a message (the
token's bytes escaped; what it wants, for a bad separator) and exit code 1, never with numbers printed for it; so
does an output that is not finite. The forward function itself checks nothing: a caller of it checks what it passes
and gets. For a csv model whose training filled missing cells (data.missing), the runner reads a missing-value token
(the empty value, NA, ?, ..., any case: data.missing_values) where a numeric column's value goes as that column's
fill, as `run` does; the forward function takes filled values.

Imports the public API (Tensor, TinyJit, Device), modelspec (builder, contract, errors, validate); kernel sources come
from the captured runners, never from driving codegen.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from specgrad import Device, Tensor, TinyJit
from specgrad.device import Buffer, Runner
from specgrad.helpers import atomic_write, prod
from specgrad.modelspec.builder import Model
from specgrad.modelspec.contract import Columns, RunContract, contract_from_meta
from specgrad.modelspec.errors import SpecError, label
from specgrad.modelspec.validate import MISSING_VALUES, ValidSpec, is_float
from specgrad.realize import ExecItem
from specgrad.renderer.cstyle import C_DIALECT, KERNEL_MARK, PARALLEL_GLOBAL

# NOTE: the widest vector every x86-64 (SSE2) and arm64 (NEON) has; a wider one changes the ABI on a target without it
PORTABLE_VECTOR_BYTES = 16

RUNNER = """
#ifdef SPECGRAD_MAIN
#include <ctype.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Reads examples from stdin as numbers separated by commas, spaces or both, a line or several per example as one
   likes ({name}_IN_SIZE per example: {layout}) and prints each example's {printed} on one line ({name}_OUT_SIZE
   numbers). Input that is not what an input holds (a word, an empty value the model does not fill, a line that
   separates its values with commas in one place and spaces only in another, as decimal commas do, a NUL byte, NaN or
   infinity, a value out of its type's range or one that is infinite once standardized, an example cut short) ends it
   with a message on stderr and exit code 1, before that example is printed, and so does an output that is not
   finite; examples and values are counted from 0, as `specgrad run` counts them. */
#define SG_VALUES "an example's values are numbers separated by commas, spaces or both"
static char token[64];
static int token_len;
static int started;  /* the blank lines before the first value are skipped */
/* What follows the value read last, and the values before it on its line: 1 a comma (spaces or not), 2 spaces only,
   0 a line break or the end of the input (line_kind: nothing yet on this line). */
static int after_kind, line_kind;
/* The next value's text into token, and the separator after it read (spaces, at most one comma, spaces; no comma
   after a line break, which starts the next line's first value): its length (sizeof token or more: too long for a
   number), 0 for an empty value (a comma first on a line, or two with nothing between), -1 at the end of the input. */
static int read_token(void) {{
  int c = getchar(), n = 0, commas = 0, lines = 0;
  for (; !started && c != EOF && isspace(c); c = getchar()) {{}}
  started = 1;
  for (; c != EOF && !isspace(c) && c != ','; c = getchar(), n++)
    if (n < (int)sizeof token - 1) token[n] = (char)c;
  token_len = n < (int)sizeof token - 1 ? n : (int)sizeof token - 1;
  token[token_len] = 0;
  if (n == 0 && c == EOF) return -1;
  for (; c != EOF && (isspace(c) || (c == ',' && !commas && !lines)); c = getchar()) {{
    commas += c == ',';
    lines += c == '\\n';
  }}
  if (c != EOF) ungetc(c, stdin);  /* NOTE: the next value's first character, or a second comma: an empty value */
  after_kind = lines || c == EOF ? 0 : commas ? 1 : 2;
  return n;
}}
/* The token as read, its bytes outside printable ASCII written \\xNN: no control character reaches the terminal. */
static void put_token(void) {{
  for (int i = 0; i < token_len; i++) {{
    unsigned char c = (unsigned char)token[i];
    if (c >= 0x20 && c < 0x7f && c != '\\\\') fputc(c, stderr);
    else fprintf(stderr, "\\\\x%02x", c);
  }}
}}
static int bad_input(long example, int i, const char* what) {{
  fprintf(stderr, "error: example %ld, value %d (counting from 0): '", example, i);
  put_token();
  fprintf(stderr, "' %s\\n", what);
  return 1;
}}
/* The example's value i into v: 0, or 1 after a message, or -1 at the end of the input before an example. */
static int read_value(long example, int i, double* v) {{
  int n = read_token();
  if (n < 0 && ferror(stdin)) {{
    fprintf(stderr, "error: cannot read the input\\n");
    return 1;
  }}
  if (n < 0 && i == 0) return -1;
  if (n < 0) {{
    fprintf(stderr, "error: the input ends inside example %ld: it has %d of the %d numbers an example needs\\n",
            example, i, {name}_IN_SIZE);
    return 1;
  }}
  if (n >= (int)sizeof token) return bad_input(example, i, "(cut short) is too long for a number: " SG_VALUES);
  if ((int)strlen(token) != token_len) return bad_input(example, i, "holds a NUL byte, so it is not a number");
  if (after_kind && line_kind && after_kind != line_kind)
    return bad_input(example, i, after_kind == 1 ? "is followed by a comma, but the values before it on its line by "
                     "spaces only (decimal commas? write 3.5, not 3,5): " SG_VALUES ", the same along a line"
                     : "is followed by spaces only, but the values before it on its line by commas (decimal commas? "
                     "write 3.5, not 3,5): " SG_VALUES ", the same along a line");
  line_kind = after_kind;
{missing}  char* end;
  *v = strtod(token, &end);
  if (n == 0) return bad_input(example, i, "is empty (nothing between two commas): " SG_VALUES);
  if (end == token || *end != 0) return bad_input(example, i, "is not a number: " SG_VALUES);
  if (!isfinite(*v)) return bad_input(example, i, "is not a finite number");
  return 0;
}}
static int finish(void) {{
  if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
  fprintf(stderr, "error: cannot write the output\\n");
  return 1;
}}
int main(void) {{
{arrays}
  for (long example = 0;; example++) {{
    int at = 0, r;
    double v = 0;
{reads}
    {name}_forward({args});
{prints}
    printf("\\n");
  }}
}}
#endif
"""

READ = """    for (int i = 0; i < {size}; i++, at++) {{
      if ((r = read_value(example, at, &v)) != 0) return r < 0 ? finish() : 1;
      if ({out_of_range}) return bad_input(example, at, "{range_message}");
      {param}[i] = ({ctype})v;
    }}"""

PRINT = "    for (int i = 0; i < {size}; i++) printf({first}, (double){param}[i]);"

STANDARDIZED = """    for (int i = 0; i < {size}; i++)
      if (!isfinite({fed}[i])) {{
        fprintf(stderr, "error: example %ld, value %d (counting from 0): %g is infinite once standardized "
                "(x - mean) / std with the training statistics\\n", example, {at} + i, (double){param}[i]);
        return 1;
      }}"""

FINITE = """    for (int i = 0; i < {size}; i++)
      if (!isfinite({param}[i])) {{
        fprintf(stderr, "error: example %ld: the model's output is not finite (value %d of {param} is %g): its "
                "weights overflow float32 on this example\\n", example, i, (double){param}[i]);
        return 1;
      }}"""

# NOTE: inside read_value, after the token is read: a missing cell's token (data.missing_values, any case) at a value
# training fills becomes the fill; elsewhere it is refused in words
MISSING = """  {{
    static const double fills[{n}] = {{{fills}}};
    static const char* const missing[{count}] = {{{tokens}}};
    for (int k = 0; k < {count}; k++) {{
      const char *a = token, *b = missing[k];
      while (*a && *b && tolower((unsigned char)*a) == *b) a++, b++;
      if (*a || *b) continue;
      if (i < {n} && !isnan(fills[i])) {{
        *v = fills[i];
        return 0;
      }}
      return bad_input(example, i, "is a missing value ({shown}), but the model fills no missing value there");
    }}
  }}
"""

SOFTMAX = """
/* The softmax of each row, in double precision as `specgrad run` computes it; one logit per row (binary cross-entropy)
   gives the probability of the second class, its sigmoid. */
static void softmax_rows(const float* x, float* p, int rows, int width) {
  if (width == 1) {
    for (int r = 0; r < rows; r++) p[r] = (float)(1.0 / (1.0 + exp(-(double)x[r])));
    return;
  }
  for (int r = 0; r < rows; r++, x += width, p += width) {
    double m = x[0], s = 0;
    for (int i = 1; i < width; i++) m = x[i] > m ? x[i] : m;
    for (int i = 0; i < width; i++) s += exp((double)x[i] - m);
    for (int i = 0; i < width; i++) p[i] = (float)(exp((double)x[i] - m) / s);
  }
}
"""


@dataclass(frozen=True)
class _Input:
    """One input of the forward function: its C parameter, the buffer the captured kernels read it from, its spec
    dtype (what the runner accepts), the training statistics `run` standardizes it with ({}: none) and, for token
    ids an embedding reads, how many there are (the runner refuses others, as `run` does)."""

    name: str
    param: str
    buf: Buffer
    dtype: str
    norm: dict[str, np.ndarray]
    suffix: str  # NOTE: of the file-level names that belong to it (normalized<suffix>), "" for a model's one input
    vocab: int | None = None

    @property
    def fed(self) -> str:
        """What the kernels read: the parameter, or its standardized copy."""
        return f"normalized{self.suffix}" if self.norm else self.param


@dataclass(frozen=True)
class _Output:
    """One output of the model: its buffer, what `run` applies after it (head) and the C parameters it fills."""

    name: str
    buf: Buffer
    head: RunContract
    params: tuple[str, ...]  # logits and probabilities, prediction, or the model's value
    suffix: str

    @property
    def made(self) -> str:
        """Where the model's own value goes: the first parameter, or a scratch array the target's units are put on."""
        return f"model_out{self.suffix}" if self.head.target else self.params[0]

    @property
    def printed(self) -> str:
        """The parameter the runner prints: the probabilities, the prediction or the model's value."""
        return self.params[-1]


def export_c(spec: ValidSpec, model: Model, c_path: Path, meta: dict[str, str] | None = None) -> Path:
    """Write <name>.c and <name>.h beside it; returns the header's path. `meta` (the weights' metadata, with the task)
    adds what `specgrad run` applies around the model: the training split's mean and std on each float input, and
    the softmax or the target's units on each output."""
    Device["CLANG"]  # NOTE: the export is made of CLANG kernels: fail early, with the reason, without a compiler
    contract = contract_from_meta(spec, meta)
    items, in_bufs, out_bufs = _capture(spec, model)
    name = c_identifier(str(spec.values["name"]))
    ins, outs = _ports(spec, contract, in_bufs, out_bufs)
    before, after, more = _around(spec, ins, outs)
    headers, kernels, arrays, calls = _kernels(items, ins, outs)
    missing = _missing(spec, contract) if len(ins) == 1 else ""
    params = [f"const {_ctype(i.buf)}* {i.param}" for i in ins] + [f"{_ctype(o.buf)}* {p}" for o in outs
                                                                    for p in o.params]  # fmt: skip
    signature = f"void {name}_forward({', '.join(params)})"
    h_path = c_path.with_suffix(".h")
    guard = f"SPECGRAD_{name.upper()}_H"
    h = [f"/* {spec.values['name']}: generated by specgrad export; one example per call. */", *_sizes(name, ins, outs),
         *layout_comment(spec, contract, name, ins, outs), f"{signature};"]  # fmt: skip
    c = [*headers, "#include <math.h>", f'#include "{h_path.name}"', *kernels, *arrays, *more, f"{signature} {{",
         *before, *calls, *after, "}", _runner(name, ins, outs, missing)]  # fmt: skip
    atomic_write(h_path, "\n".join([f"#ifndef {guard}", f"#define {guard}", *h, "#endif", ""]).encode())
    atomic_write(c_path, "\n".join(c).encode())
    return h_path


@contextmanager
def _portable_vectors() -> Iterator[None]:
    """The CLANG device lowers kernels with vectors of at most PORTABLE_VECTOR_BYTES meanwhile. Its own width is the
    widest its compiler proves for this CPU (64 bytes with AVX-512), and a vector wider than the target's registers,
    passed to or returned by the kernels' helpers, makes `cc` without that -march warn that it changes the ABI
    (-Wpsabi); 16 bytes are SSE2's on every x86-64 and NEON's on every arm64, so the file builds cleanly anywhere."""
    device = Device["CLANG"]
    before = device.opts
    device.opts = replace(before, vector_bytes=min(before.vector_bytes, PORTABLE_VECTOR_BYTES))
    try:
        yield
    finally:
        device.opts = before


def _capture(spec: ValidSpec, model: Model) -> tuple[list[ExecItem], list[Buffer], list[Buffer]]:
    """The kernels of one forward pass (batch of 1) on CLANG, with the buffer of each input and of each output,
    lowered for a portable vector width."""
    with _portable_vectors():
        return _captured(spec, model)


def _captured(spec: ValidSpec, model: Model) -> tuple[list[ExecItem], list[Buffer], list[Buffer]]:
    zeros = [
        np.zeros((1, *shape), np.float32 if is_float(dtype) else np.int32) for shape, dtype in spec.inputs.values()
    ]
    xs = [Tensor(z, device="CLANG").realize() for z in zeros]
    # NOTE: an output that gives an input back in order (flatten, reshape) has no kernels, and is copied from that
    # input; any other view of an input (an expand, a permute) is copied into place by contiguous()
    bases = [x.lazydata.base for x in xs]
    given = [next((k for k, b in enumerate(bases) if o.contiguous().lazydata.base is b), None)
             for o in model.outputs(*xs)]  # fmt: skip
    computed = [k for k, g in enumerate(given) if g is None]

    def forward(xs: list[Tensor]) -> list[Tensor]:
        outs = [o.contiguous() for k, o in enumerate(model.outputs(*xs)) if k in computed]
        Tensor.corealize(outs)
        return outs

    items: list[ExecItem] = []
    made: dict[int, Buffer] = {}
    if computed:
        jitted = TinyJit(forward)
        for _ in range(3):
            xs = [Tensor(z, device="CLANG").realize() for z in zeros]
            ret = jitted(xs)
        if any(not isinstance(getattr(i.run, "__self__", None), Runner) for i in jitted.items):
            raise SpecError.at(None, f"the model of {spec.path} copies or draws random numbers in its forward pass, "
                               "so it cannot be exported to C", "export it to ONNX instead")  # fmt: skip
        items, made = jitted.items, {k: t.lazydata.base.realized for k, t in zip(computed, ret)}
    in_bufs = [x.lazydata.base.realized for x in xs]
    return items, in_bufs, [in_bufs[g] if g is not None else made[k] for k, g in enumerate(given)]


def _ports(spec: ValidSpec, contract: RunContract, in_bufs: list[Buffer], out_bufs: list[Buffer]
           ) -> tuple[list[_Input], list[_Output]]:  # fmt: skip
    """The forward function's inputs and outputs: `input` and `logits`, ... for a model with one of each; `in_<input>`
    and `out_<output>_logits`, ... (in C's letters, made unique) for one with several."""
    if contract.task != "multi" and len(spec.inputs) == 1 and len(spec.outputs) == 1:
        ((name, (_, dtype)),) = spec.inputs.items()
        return ([_Input(name, "input", in_bufs[0], dtype, contract.norm, "", spec.vocabulary(name))],
                [_Output(spec.outputs[0], out_bufs[0], contract, contract.outputs or ("output",), "")])  # fmt: skip
    heads = [contract.heads.get(o, RunContract()) for o in spec.outputs]
    wanted = [f"in_{_c_name(k)}" for k in spec.inputs]
    wanted += [f"out_{_c_name(o)}{f'_{n}' * bool(n)}" for o, h in zip(spec.outputs, heads) for n in h.outputs or ("",)]
    params = iter(_unique(wanted))
    ins = [_Input(k, next(params), b, dtype, contract.inputs.get(k, {}), str(n), spec.vocabulary(k))
           for n, ((k, (_, dtype)), b) in enumerate(zip(spec.inputs.items(), in_bufs))]  # fmt: skip
    outs = [_Output(o, b, h, tuple(next(params) for _ in h.outputs or ("",)), str(n))
            for n, (o, b, h) in enumerate(zip(spec.outputs, out_bufs, heads))]  # fmt: skip
    return ins, outs


def c_identifier(name: str) -> str:
    """The model's name as the prefix of its C names (<name>_forward, <name>_IN_SIZE): every character but an ASCII
    letter, digit or '_' becomes '_', leading and trailing '_' go, a name that starts with a digit gets 'model_' in
    front (2layer: model_2layer_forward), and one left empty is 'model'. So any valid spec name compiles."""
    ret = _c_name(name).strip("_") or "model"
    return f"model_{ret}" if ret[0].isdigit() else ret


def _c_name(name: str) -> str:
    """A name in C's letters: each character but an ASCII letter, digit or '_' becomes '_'."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _unique(names: list[str]) -> list[str]:
    """The names, each one that repeats an earlier one given a number (a-b and a_b are both a_b in C)."""
    ret: list[str] = []
    for n in names:
        k, base = 2, n
        while n in ret:
            n, k = f"{base}_{k}", k + 1
        ret.append(n)
    return ret


def _ctype(buf: Buffer) -> str:
    return C_DIALECT.storage_type(buf.dtype)


def _kernels(items: list[ExecItem], ins: list[_Input], outs: list[_Output]) -> tuple[list, list, list, list]:
    """(the kernels' header chunks, the kernels, the file-level arrays, the forward function's calls and copies): each
    buffer named once, an input by what the kernels read, an output by where its value goes, a buffer a kernel writes
    as scratch (t<n>), any other as the weights it holds (w<n>). An output no kernel writes (an input given back, or
    another output) is copied into place after the calls."""
    written = {id(i.bufs[0]) for i in items}
    names: dict[int, str] = {id(i.buf): i.fed for i in ins}
    copied = []
    for o in outs:
        if id(o.buf) in names or id(o.buf) not in written:
            copied.append(o)
        else:
            names[id(o.buf)] = o.made
    headers: list[str] = []
    kernels, arrays, calls = [], [], []

    def name_of(b: Buffer) -> str:
        if id(b) not in names:
            ctype = _ctype(b)
            names[id(b)] = f"{'t' if id(b) in written else 'w'}{len(names)}"
            if id(b) in written:
                arrays.append(f"static {ctype} {names[id(b)]}[{max(b.size, 1)}];")
            else:
                values = b.numpy().view(np.uint16) if b.dtype.name == "float16" else b.numpy()
                arrays.append(f"static const {ctype} {names[id(b)]}[{max(b.size, 1)}] = {_array(values, ctype)};")
        return names[id(b)]

    for k, item in enumerate(items):
        chunks, fn = _kernel_source(item.run.__self__, f"kernel{k}")  # type: ignore[attr-defined]
        headers += [c for c in chunks if c not in headers]
        kernels.append(fn)
        calls.append(f"  kernel{k}({', '.join(name_of(b) for b in item.bufs)});")
    calls += [f"  for (int i = 0; i < {o.buf.size}; i++) {o.made}[i] = {name_of(o.buf)}[i];" for o in copied]
    return headers, kernels, arrays, calls


def _kernel_source(runner: Runner, name: str) -> tuple[list[str], str]:
    """(the header chunks, the kernel's own code with its names prefixed by `name` and its entry point static)."""
    header, body = runner.src.split(KERNEL_MARK + "\n", 1)
    fn = re.search(r"^void (\w+)\(", body, re.MULTILINE).group(1)  # type: ignore[union-attr]
    body = re.sub(rf"\b{fn}(?=\b|_args\b|_body\b)", name, body)
    body = re.sub(rf"^void {name}\(", f"static void {name}(", body, flags=re.MULTILINE)
    # NOTE: a kernel's thread hook stays unset here (one thread) and private to the exported file
    chunks = [c.replace(PARALLEL_GLOBAL, "static " + PARALLEL_GLOBAL) for c in header.rstrip("\n").split("\n\n")]
    return chunks, body


def _array(values: np.ndarray, ctype: str) -> str:
    flat = values.reshape(-1)
    if flat.dtype.kind == "f":
        items = [("NAN" if np.isnan(v) else ("INFINITY" if v > 0 else "-INFINITY")) if not np.isfinite(v)
                 else float(v).hex() + ("f" if ctype == "float" else "") for v in flat.tolist()]  # fmt: skip
    else:
        items = [str(int(v)) for v in flat.tolist()]
    lines = [", ".join(items[i : i + 8]) for i in range(0, len(items), 8)]
    return "{\n  " + ",\n  ".join(lines) + "\n}"


def _around(spec: ValidSpec, ins: list[_Input], outs: list[_Output]) -> tuple[list, list, list]:
    """(C lines before the kernel calls, lines after them, file-level definitions) for what `specgrad run` applies
    around the model: each float input standardized into `normalized`, each output's softmax or target units."""
    before, after, more = [], [], []
    for i in ins:
        if i.norm and _ctype(i.buf) != "float":
            _not_float(spec, f"takes {_ctype(i.buf)} for the input {i.name}")
        if i.norm:
            n, s = i.buf.size, i.suffix
            more += [f"static const float norm_mean{s}[{n}] = {_array(i.norm['mean'], 'float')};",
                     f"static const float norm_std{s}[{n}] = {_array(i.norm['std'], 'float')};",
                     f"static float normalized{s}[{n}];"]  # fmt: skip
            before.append(f"  for (int i = 0; i < {n}; i++) {i.fed}[i] = ({i.param}[i] - norm_mean{s}[i]) / "
                          f"norm_std{s}[i];")  # fmt: skip
    for o in outs:
        softmax = o.head.task in ("classify", "language")
        if (o.head.target or softmax) and _ctype(o.buf) != "float":
            _not_float(spec, f"gives {_ctype(o.buf)} for the output {o.name}")
        n, s = o.buf.size, o.suffix
        if o.head.target:
            more += [f"static const float target_mean{s}[{n}] = {_array(o.head.target['mean'], 'float')};",
                     f"static const float target_std{s}[{n}] = {_array(o.head.target['std'], 'float')};",
                     f"static float {o.made}[{n}];"]  # fmt: skip
            after.append(f"  for (int i = 0; i < {n}; i++) {o.params[0]}[i] = {o.made}[i] * target_std{s}[i] + "
                         f"target_mean{s}[i];")  # fmt: skip
        if softmax:
            width = spec.output_shape(o.name)[-1]
            more += [SOFTMAX] if SOFTMAX not in more else []
            after.append(f"  softmax_rows({o.params[0]}, {o.params[1]}, {n // width}, {width});")
    return before, after, more


def _not_float(spec: ValidSpec, what: str) -> None:
    raise SpecError.at(None, f"the C export applies the training statistics and the softmax to float32 values only; "
                       f"the model of {spec.path} {what}", "export it to ONNX instead")  # fmt: skip


def layout_comment(spec: ValidSpec, contract: RunContract, name: str, ins: list[_Input], outs: list[_Output]
                   ) -> list[str]:  # fmt: skip
    """The header's account of an example's values and of what comes out, in order (the runner reads and prints the
    same): each input's values (a csv's columns, each categorical one's one-hot positions or codes with their
    categories, the fills of missing cells) and whether the function standardizes them; each output's class names in
    order, or the target it predicts and in which units."""
    printed = " and ".join(o.printed for o in outs)
    lines = [f"What {name}_forward takes and gives for one example, in order; the runner reads the inputs in this "
             f"order and prints {printed} on one line."]  # fmt: skip
    for i in ins:
        lines += _input_lines(spec, contract, name, i)
    for o in outs:
        lines += _output_lines(spec, o)
    wrapped = [w for line in lines for w in textwrap.wrap(line, 114, subsequent_indent="    ", break_on_hyphens=False)]
    return ["/*", *(f" * {w}".rstrip() for w in wrapped), " */"]


def _input_lines(spec: ValidSpec, contract: RunContract, name: str, i: _Input) -> list[str]:
    shape, dtype = spec.inputs[i.name]
    columns = contract.columns if i.param == "input" else None
    what = f"{i.param}: {i.buf.size} {_ctype(i.buf)} value{'s' * (i.buf.size != 1)}"
    if columns is None:
        values = f"token ids from 0 to {i.vocab - 1}" if i.vocab is not None else f"the {dtype} values"
        lines = [f"{what}: {values} of one example of shape {list(shape)}, in C order (the last axis fastest)."]
    else:
        lines = [f"{what}, the csv's columns in this order:", *_column_lines(columns)]
        lines += [_missing_line(columns, f) for f in columns.features if f in columns.missing]
    if i.norm:
        kept = ", one-hot values as 0 and 1" if columns is not None and columns.one_hot_mask().any() else ""
        lines.append(f"  standardized by {name}_forward with the training split's mean and std ((x - mean) / std"
                     f"{kept}): pass the values as the data holds them.")  # fmt: skip
    else:
        lines.append("  used as given: nothing standardizes them.")
    return lines


def _column_lines(columns: Columns) -> list[str]:
    """A line per column: its position (or positions), its name and, for a categorical one, its categories."""
    lines = []
    for f, (at, enc, codes) in zip(columns.features, columns.slots()):
        if enc == "one_hot":
            where = f"[{at}]" if len(codes) == 1 else f"[{at}..{at + len(codes) - 1}]"
            lines.append(f"  {where} {_comment(f)}: one-hot, 1 at the row's category and 0 at the others, in this "
                         f"order: {', '.join(_named(c) for c in codes)}")  # fmt: skip
        elif enc == "index":
            lines.append(f"  [{at}] {_comment(f)}: the category's code: "
                         f"{', '.join(f'{k} {_named(c)}' for c, k in codes.items())}")  # fmt: skip
        else:
            lines.append(f"  [{at}] {_comment(f)}")
    return lines


def _missing_line(columns: Columns, f: str) -> str:
    how, fill = columns.missing[f]
    if fill is None:
        return f"  a missing {_comment(f)}: training left such rows out ({how}); the model has no value for it."
    shown = f"the category {_named(fill)}" if f in columns.categorical else _comment(fill)
    return f"  a missing {_comment(f)}: training filled it with {shown} ({how}); pass that."


def _output_lines(spec: ValidSpec, o: _Output) -> list[str]:
    shape, head = spec.output_shape(o.name), o.head
    size = f"{o.buf.size} float{'s' * (o.buf.size != 1)}{' each' * (len(o.params) > 1)}"
    what = f"{' and '.join(o.params)} ({size})" + (f", the output {_comment(o.name)}" if len(spec.outputs) > 1 else "")
    softmax = "; probabilities are the softmax of the logits" if len(o.params) > 1 else ""
    if head.task == "classify":
        names = head.class_names
        if names == tuple(str(k) for k in range(len(names))):
            return [f"{what}: one per class, the classes 0 to {len(names) - 1} in order{softmax}."]
        order = [f"{k} {_named(c)}" for k, c in enumerate(names)] if len(names) == shape[-1] else \
            [_named(c) for c in names]  # fmt: skip
        return [f"{what}: one per class, in this order: {', '.join(order)}{softmax}."]
    if head.task == "language":
        return [f"{what}: for each of the {prod(shape[:-1])} positions, one per token id 0 to {shape[-1] - 1}"
                f"{softmax}."]  # fmt: skip
    if head.task == "regress":
        target = (spec.values.get("data") or {}).get("target") if len(spec.outputs) == 1 else o.name
        units = "in its own units (the model's standardized value times the training targets' std, plus their mean)" \
            if head.target else "in its own units, as trained (data.normalize_target: false)"  # fmt: skip
        return [f"{what}: the target {_comment(str(target))}, {units}."]
    return [f"{what}: the model's own values, of shape {list(shape)}."]


def _comment(text: str) -> str:
    """Text from the data or the spec as a C comment shows it: control characters escaped, and nothing that ends the
    comment, opens another or forms a trigraph (*/, /*, ??)."""
    return label(text, None).replace("*/", "* /").replace("/*", "/ *").replace("??", "?.?")


def _named(text: str) -> str:
    """A category or class name in double quotes (a quote or backslash in it escaped with a backslash), as a C comment
    shows it: a name holding a comma or a space reads as one name in a list ("north, east", "south")."""
    return _comment('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')


def _sizes(name: str, ins: list[_Input], outs: list[_Output]) -> list[str]:
    """The header's size macros: the numbers the runner reads and prints per example (IN_SIZE, OUT_SIZE), and for a
    model with several inputs or outputs the size of each parameter."""
    lines = [f"#define {name}_IN_SIZE {sum(i.buf.size for i in ins)}",
             f"#define {name}_OUT_SIZE {sum(o.buf.size for o in outs)}"]  # fmt: skip
    if len(ins) > 1 or len(outs) > 1 or ins[0].param != "input":
        lines += [f"#define {name}_{i.param}_SIZE {i.buf.size}  /* the input {i.name} */" for i in ins]
        lines += [f"#define {name}_{p}_SIZE {o.buf.size}  /* the output {o.name} */" for o in outs for p in o.params]
    return lines


def _input_check(i: _Input) -> tuple[str, str]:
    """(a C condition on the double v that refuses it as a value of the input, the message)."""
    if is_float(i.dtype):
        return "fabs(v) > FLT_MAX", "is too large for a float"
    if i.vocab is not None:
        return f"v != floor(v) || v < 0.0 || v > {i.vocab - 1}.0", \
            f"is not a token id of the model's vocabulary (a whole number from 0 to {i.vocab - 1})"  # fmt: skip
    info = np.iinfo(np.dtype(i.dtype)) if i.dtype != "bool" else None
    lo, hi = (0, 1) if info is None else (int(info.min), int(info.max))
    return f"v != floor(v) || v < {lo}.0 || v > {hi}.0", f"is not a whole number from {lo} to {hi} ({i.dtype})"


def _missing(spec: ValidSpec, contract: RunContract) -> str:
    """The runner's lines that read a missing cell of a csv's numeric column (data.missing_values, e.g. NA) as the
    value training filled it with (data.missing, recorded with the weights); "" when no column has a fill. A
    categorical column comes encoded, its fill's category included, as `run` encodes it."""
    columns = contract.columns
    fills = [math.nan] * (columns.width if columns is not None else 0)
    for f, (at, enc, _) in zip(columns.features if columns is not None else (), columns.slots() if columns else []):
        if enc is None and columns.fill(f) is not None:
            fills[at] = float(columns.fill(f))
    given = (spec.values.get("data") or {}).get("missing_values")
    # NOTE: '' is an empty value between two commas (there is none between spaces)
    tokens = sorted({t.strip().lower() for t in (MISSING_VALUES if given is None else given)})
    if all(math.isnan(v) for v in fills) or not tokens:
        return ""
    listed = ", ".join(f'"{_c_string(t)}"' for t in tokens)
    shown = "/".join(t or "empty" for t in tokens)
    return MISSING.format(n=len(fills), fills=_array(np.array(fills, np.float64), "double")[2:-2].replace("\n", ""),
                          tokens=listed, count=len(tokens), shown=_c_string(shown))  # fmt: skip


def _c_string(text: str) -> str:
    """Text as the inside of a C string literal: printable ASCII as it is, any other byte \\ooo."""
    return "".join(c if 0x20 <= ord(c) < 0x7F and c not in '\\"' else "".join(f"\\{b:03o}" for b in c.encode())
                   for c in text)  # fmt: skip


def _runner(name: str, ins: list[_Input], outs: list[_Output], missing: str = "") -> str:
    """The command-line runner's main(): reads each example's inputs in order, prints its outputs on one line."""
    arrays = [f"  static {_ctype(i.buf)} {i.param}[{max(i.buf.size, 1)}];" for i in ins]
    arrays += [f"  static {_ctype(o.buf)} {p}[{max(o.buf.size, 1)}];" for o in outs for p in o.params]
    reads = [READ.format(size=i.buf.size, param=i.param, ctype=_ctype(i.buf), out_of_range=cond, range_message=says)
             for i in ins for cond, says in [_input_check(i)]]  # fmt: skip
    starts = np.cumsum([0] + [i.buf.size for i in ins])
    checks = [STANDARDIZED.format(size=i.buf.size, fed=i.fed, at=int(at), param=i.param)
              for i, at in zip(ins, starts) if i.norm]  # fmt: skip
    checks += [FINITE.format(size=o.buf.size, param=o.printed) for o in outs if _ctype(o.buf) in ("float", "double")]
    prints = [PRINT.format(size=o.buf.size, param=o.printed, first='i ? " %.9g" : "%.9g"' if k == 0 else '" %.9g"')
              for k, o in enumerate(outs)]  # fmt: skip
    several = len(ins) > 1 or len(outs) > 1
    layout = ", ".join(f"{i.name} ({i.buf.size})" for i in ins) if several else "the input's values"
    printed = ", ".join(f"{o.printed} ({o.buf.size})" for o in outs) if several else outs[0].printed
    return RUNNER.format(name=name, layout=layout, printed=printed, arrays="\n".join(arrays), reads="\n".join(reads),
                         args=", ".join([i.param for i in ins] + [p for o in outs for p in o.params]),
                         prints="\n".join(checks + prints), missing=missing)  # fmt: skip
