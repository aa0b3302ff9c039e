"""Export a model as self-contained C: the CLANG kernels TinyJit captured for one forward pass, the weights as
arrays, and a forward function that calls the kernels in order. No Python is needed to run it. Given the weights'
metadata (a task), the forward function computes what `specgrad run` computes, as the ONNX export does: it standardizes
the input, and its outputs are `logits` and `probabilities` (classify, language) or `prediction` (regress, in the
target's units); without a task its one output is the model's own.

The runner (-DSPECGRAD_MAIN) checks its input: junk, NaN or infinity, or an example cut short ends it with a message
and exit code 1, never with numbers printed for it.

Imports the public API (Tensor, TinyJit, Device), modelspec (builder, contract, errors,
validate); kernel
sources come from the captured runners, never from driving codegen.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from specgrad import Device, Tensor, TinyJit
from specgrad.device import Buffer, Runner
from specgrad.helpers import atomic_write
from specgrad.modelspec.builder import Model
from specgrad.modelspec.contract import RunContract, contract_from_meta
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import ValidSpec, is_float
from specgrad.realize import ExecItem
from specgrad.renderer.cstyle import C_DIALECT, KERNEL_MARK, PARALLEL_GLOBAL

MAIN = """
#ifdef SPECGRAD_MAIN
#include <ctype.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
/* Reads examples from stdin as whitespace-separated numbers ({name}_IN_SIZE per example) and prints each example's
   {printed} on one line. Input that is not {what} (a word, NaN or infinity, a value out of range, an example cut
   short) ends it with a message on stderr and exit code 1, before that example is run; examples are counted from 0,
   as `specgrad run` counts them. */
static int read_token(char* buf, int size) {{
  int c, n = 0;
  while ((c = getchar()) != EOF && isspace(c)) {{}}
  for (; c != EOF && !isspace(c); c = getchar(), n++)
    if (n < size - 1) buf[n] = (char)c;
  buf[n < size - 1 ? n : size - 1] = 0;
  return n;  /* 0 at the end of the input; size or more: too long for a number */
}}
static int bad_input(long example, int i, const char* what, const char* token) {{
  fprintf(stderr, "error: example %ld, value %d (counting from 0): '%s' %s\\n", example, i, token, what);
  return 1;
}}
static int finish(void) {{
  if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
  fprintf(stderr, "error: cannot write the output\\n");
  return 1;
}}
int main(void) {{
  static {in_type} x[{name}_IN_SIZE];
  static {out_type} {outs};
  char token[64];
  for (long example = 0;; example++) {{
    for (int i = 0; i < {name}_IN_SIZE; i++) {{
      int n = read_token(token, (int)sizeof token);
      if (n == 0 && ferror(stdin)) {{
        fprintf(stderr, "error: cannot read the input\\n");
        return 1;
      }}
      if (n == 0 && i == 0) return finish();
      if (n == 0) {{
        fprintf(stderr, "error: the input ends inside example %ld: it has %d of the %d numbers an example needs\\n",
                example, i, {name}_IN_SIZE);
        return 1;
      }}
      if (n >= (int)sizeof token) return bad_input(example, i, "(cut short) is too long for a number", token);
      char* end;
      double v = strtod(token, &end);
      if (end == token || *end != 0) return bad_input(example, i, "is not a number", token);
      if (!isfinite(v)) return bad_input(example, i, "is not a finite number", token);
      if ({out_of_range}) return bad_input(example, i, "{range_message}", token);
      x[i] = ({in_type})v;
    }}
    {name}_forward(x, {args});
    for (int i = 0; i < {name}_OUT_SIZE; i++) printf(i ? " %.9g" : "%.9g", (double){printed}[i]);
    printf("\\n");
  }}
}}
#endif
"""

SOFTMAX = """
/* The softmax of each row, in double precision as `specgrad run` computes it. */
static void softmax_rows(const float* x, float* p, int rows, int width) {
  for (int r = 0; r < rows; r++, x += width, p += width) {
    double m = x[0], s = 0;
    for (int i = 1; i < width; i++) m = x[i] > m ? x[i] : m;
    for (int i = 0; i < width; i++) s += exp((double)x[i] - m);
    for (int i = 0; i < width; i++) p[i] = (float)(exp((double)x[i] - m) / s);
  }
}
"""


def _input_check(dtype: str) -> tuple[str, str, str]:
    """(what the runner reads, a C condition on the double v that refuses it, the message) for the input's dtype."""
    if is_float(dtype):
        return "a finite number", "fabs(v) > FLT_MAX", "is too large for a float"
    lo, hi = (0, 1) if dtype == "bool" else (int(np.iinfo(np.dtype(dtype)).min), int(np.iinfo(np.dtype(dtype)).max))
    return (f"a whole number from {lo} to {hi}", f"v != floor(v) || v < {lo}.0 || v > {hi}.0",
            f"is not a whole number from {lo} to {hi} ({dtype})")  # fmt: skip


def _capture(spec: ValidSpec, model: Model) -> tuple[list[ExecItem], Buffer, Buffer]:
    """The kernels of one forward pass (batch of 1) on CLANG, with the input and output buffers."""
    if len(spec.inputs) != 1 or len(spec.outputs) != 1:
        raise SpecError.at(None, f"the C export takes a model with one input and one output; {spec.path} has "
                           f"{len(spec.inputs)} and {len(spec.outputs)}", "export it to ONNX instead, which keeps "
                           "every input and output")  # fmt: skip
    ((shape, dtype),) = spec.inputs.values()
    zeros = np.zeros((1, *shape), dtype=np.float32 if is_float(dtype) else np.int32)
    x = Tensor(zeros, device="CLANG").realize()
    # NOTE: a model that gives its input back in order (flatten, reshape) has no kernels; any other view of the input
    # (an expand, a permute) is copied into place by contiguous()
    if model(x).contiguous().lazydata.base is x.lazydata.base:
        return [], x.lazydata.base.realized, x.lazydata.base.realized
    jitted = TinyJit(lambda x: model(x).contiguous().realize())
    for _ in range(3):
        x = Tensor(zeros, device="CLANG")
        out = jitted(x)
    non_kernels = [i for i in jitted.items if not isinstance(getattr(i.run, "__self__", None), Runner)]
    if non_kernels:
        raise SpecError.at(None, f"the model of {spec.path} copies or draws random numbers in its forward pass, so "
                           "it cannot be exported to C", "export it to ONNX instead")  # fmt: skip
    return jitted.items, x.lazydata.base.realized, out.lazydata.base.realized


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


def export_c(spec: ValidSpec, model: Model, c_path: Path, meta: dict[str, str] | None = None) -> Path:
    """Write <name>.c and <name>.h beside it; returns the header's path. `meta` (the weights' metadata, with the task)
    adds what `specgrad run` applies around the model: the training split's mean and std on the input, and the
    softmax or the target's units on the output."""
    Device["CLANG"]  # NOTE: the export is made of CLANG kernels: fail early, with the reason, without a compiler
    contract = contract_from_meta(spec, meta)
    items, inp, out = _capture(spec, model)
    name = re.sub(r"\W", "_", str(spec.values["name"])).strip("_") or "model"
    in_type, out_type = C_DIALECT.storage_type(inp.dtype), C_DIALECT.storage_type(out.dtype)
    outs = contract.outputs or ("output",)
    written = {id(i.bufs[0]) for i in items}
    in_name, out_name = "normalized" if contract.norm else "input", "model_out" if contract.target else outs[0]
    names: dict[int, str] = {id(inp): in_name, id(out): out_name}
    headers: list[str] = []
    kernels, calls, arrays = [], [], []
    for k, item in enumerate(items):
        chunks, fn = _kernel_source(item.run.__self__, f"kernel{k}")  # type: ignore[attr-defined]
        headers += [c for c in chunks if c not in headers]
        kernels.append(fn)
        for b in item.bufs:
            if id(b) in names:
                continue
            ctype = C_DIALECT.storage_type(b.dtype)
            if id(b) in written:
                names[id(b)] = f"t{len(names)}"
                arrays.append(f"static {ctype} {names[id(b)]}[{max(b.size, 1)}];")
            else:
                names[id(b)] = f"w{len(names)}"
                values = b.numpy().view(np.uint16) if b.dtype.name == "float16" else b.numpy()
                arrays.append(f"static const {ctype} {names[id(b)]}[{max(b.size, 1)}] = {_array(values, ctype)};")
        calls.append(f"  kernel{k}({', '.join(names[id(b)] for b in item.bufs)});")
    if inp is out:  # NOTE: a model that only moves values gives its input back, in its own shape
        calls.append(f"  for (int i = 0; i < {inp.size}; i++) {out_name}[i] = {in_name}[i];")
    before, after, more = _around(contract, spec, in_type, out_type, out.size)
    signature = f"void {name}_forward(const {in_type}* input, {', '.join(f'{out_type}* {o}' for o in outs)})"
    h = (f"/* {spec.values['name']}: generated by specgrad export; one example per call. */\n"
         f"#define {name}_IN_SIZE {inp.size}\n#define {name}_OUT_SIZE {out.size}\n{signature};\n")  # fmt: skip
    guard = f"SPECGRAD_{name.upper()}_H"
    h_path = c_path.with_suffix(".h")
    what, out_of_range, range_message = _input_check(next(iter(spec.inputs.values()))[1])
    main = MAIN.format(name=name, in_type=in_type, out_type=out_type,
                       outs=", ".join(f"{o}[{name}_OUT_SIZE]" for o in outs), args=", ".join(outs),
                       printed=outs[-1], what=what, out_of_range=out_of_range,
                       range_message=range_message)  # fmt: skip
    c = "\n".join([*headers, "#include <math.h>", f'#include "{h_path.name}"', *kernels, *arrays, *more,
                   f"{signature} {{", *before, *calls, *after, "}", main])  # fmt: skip
    atomic_write(h_path, f"#ifndef {guard}\n#define {guard}\n{h}#endif\n".encode())
    atomic_write(c_path, c.encode())
    return h_path


def _around(c: RunContract, spec: ValidSpec, in_type: str, out_type: str, size: int) -> tuple[list, list, list]:
    """(C lines before the kernel calls, lines after them, file-level definitions) for what `specgrad run` applies
    around the model: the input standardized into `normalized`, the output's softmax or target units."""
    if (c.norm and in_type != "float") or ((c.target or c.task in ("classify", "language")) and out_type != "float"):
        raise SpecError.at(None, f"the C export applies the training statistics and the softmax to float32 values "
                           f"only; the model of {spec.path} takes {in_type} and gives {out_type}",
                           "export it to ONNX instead")  # fmt: skip
    before, after, more = [], [], []
    if c.norm:
        n = c.norm["mean"].size
        more += [f"static const float norm_mean[{n}] = {_array(c.norm['mean'], 'float')};",
                 f"static const float norm_std[{n}] = {_array(c.norm['std'], 'float')};",
                 f"static float normalized[{n}];"]  # fmt: skip
        before = [f"  for (int i = 0; i < {n}; i++) normalized[i] = (input[i] - norm_mean[i]) / norm_std[i];"]
    if c.target:
        more += [f"static const float target_mean[{size}] = {_array(c.target['mean'], 'float')};",
                 f"static const float target_std[{size}] = {_array(c.target['std'], 'float')};",
                 f"static float model_out[{size}];"]  # fmt: skip
        after = [f"  for (int i = 0; i < {size}; i++) prediction[i] = model_out[i] * target_std[i] + target_mean[i];"]
    if c.task in ("classify", "language"):
        width = spec.output_shape(spec.outputs[0])[-1]
        more.append(SOFTMAX)
        after = [f"  softmax_rows(logits, probabilities, {size // width}, {width});"]
    return before, after, more
