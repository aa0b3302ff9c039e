"""One error path for every command (cli/errors.py): user mistakes exit 1 with a located message, the environment
exits 3 with how to fix it, an engine bug is an internal error (exit 70, the traceback only with --debug), Ctrl-C 130;
`run` refuses NaN and infinity unless --allow-nonfinite; the exported C runner refuses junk input; and the reading
policy's options reach their flags."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.errors import ENVIRONMENT, INTERNAL, NON_FINITE, describe
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad import Tensor
from specgrad.device import DTypeUnavailable, KernelBuildError
from specgrad.flags import MAX_FILE_MB, SPEC_ALLOW_OUTSIDE, SPEC_ROOT
from specgrad.helpers import WriteError
from specgrad.modelspec.errors import SpecError
from specgrad.train.trainer import NonFiniteLoss

pytestmark = pytest.mark.xdist_group("errors")  # NOTE: on one worker: a run folder made once

SPECS = Path(__file__).resolve().parents[2] / "specs"
MLP = str(SPECS / "digits_mlp.yaml")
runner = CliRunner()


@pytest.fixture()
def examples(tmp_path: Path) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).random((3, 1, 8, 8), dtype=np.float32))
    return path


def invoke(*args: str | Path, env: dict[str, str] | None = None) -> object:
    return runner.invoke(app, [str(a) for a in args], env=env)


def engine_bug(exc: BaseException):
    def numpy(self: Tensor) -> np.ndarray:
        raise exc

    return numpy


# *** an engine bug is never bad input ***


@pytest.mark.parametrize("exc", [ValueError("shapes (3, 64) and (32,) do not fit\nmore detail"),
                                 RuntimeError("kernel ran off its buffer")])  # fmt: skip
def test_an_engine_bug_in_run_or_export_is_an_internal_error(weights: Path, examples: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             exc: Exception) -> None:  # fmt: skip
    monkeypatch.setattr(Tensor, "numpy", engine_bug(exc))
    summary = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    for args in (
        ["run", MLP, "--weights", weights, "--input", examples],
        ["export", MLP, "--weights", weights, "--format", "safetensors", "--out", tmp_path / "m.safetensors"],
    ):
        result = invoke(*args)
        assert result.exit_code == INTERNAL == 70, result.output
        assert f"error: internal error (a bug in specgrad, please report it): {summary}\n" in result.output
        assert "run again with --debug (or SPECGRAD_DEBUG=1) for the traceback" in result.output
        assert "Traceback" not in result.output and "more detail" not in result.output
    assert not (tmp_path / "m.safetensors").exists()


def test_debug_shows_the_traceback(weights: Path, examples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Tensor, "numpy", engine_bug(ValueError("boom")))
    for result in (
        invoke("--debug", "run", MLP, "--weights", weights, "--input", examples),
        invoke("run", MLP, "--weights", weights, "--input", examples, env={"SPECGRAD_DEBUG": "1"}),
    ):
        assert result.exit_code == 70
        assert "Traceback (most recent call last)" in result.output and "raise exc" in result.output
        assert result.output.rstrip().endswith("hint: the traceback is above, and include it in the report")
    quiet = invoke("run", MLP, "--weights", weights, "--input", examples, env={"SPECGRAD_DEBUG": "0"})
    assert quiet.exit_code == 70 and "Traceback" not in quiet.output


def test_every_command_takes_the_one_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def bug(*args: object, **kwargs: object) -> None:
        raise KeyError("a key the engine lost")

    monkeypatch.setattr("specgrad.cli.demo.train_spirals", bug)
    monkeypatch.setattr("specgrad.cli.validate.validate_file", bug)
    monkeypatch.setattr("specgrad.cli.bench.report", bug)
    monkeypatch.setattr("specgrad.modelspec.jsonschema.spec_json_schema", bug)
    for args in (["demo", "--steps", "1"], ["validate", MLP], ["bench", "--quick"], ["schema"]):
        result = invoke(*args)
        assert result.exit_code == 70, (args, result.output)
        assert (
            "internal error (a bug in specgrad, please report it): KeyError: 'a key the engine lost'" in result.output
        )
        assert "Traceback" not in result.output


def test_ctrl_c_is_130(weights: Path, examples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Tensor, "numpy", engine_bug(KeyboardInterrupt()))
    result = invoke("run", MLP, "--weights", weights, "--input", examples)
    assert result.exit_code == 130 and result.output.strip() == "interrupted"


def test_a_user_mistake_is_still_exit_1(weights: Path, tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("specgrad: 1\nname: x\nmodle: []\n")
    result = invoke("run", tmp_path / "bad.yaml", "--weights", weights, "--input", tmp_path / "x.npy")
    assert result.exit_code == 1 and f"{tmp_path / 'bad.yaml'}:3:1: error:" in result.output
    assert "internal error" not in result.output and "Traceback" not in result.output


# *** the environment: exit 3 with how to fix it ***


@pytest.mark.parametrize(("err", "hint"), [(errno.ENOSPC, "the disk is full"), (errno.EROFS, "read-only"),
                                           (errno.EACCES, "choose a folder you can write to"),
                                           (errno.EDQUOT, "quota")])  # fmt: skip
def test_run_output_on_a_disk_that_refuses_it_exits_3(weights: Path, examples: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, err: int,
                                                      hint: str) -> None:  # fmt: skip
    (tmp_path / "y.json").write_text("the previous outputs")
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(".y.json."):
            raise OSError(err, os.strerror(err))
        real_fsync(fd)

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd")
    monkeypatch.setattr(os, "fsync", fsync)
    result = invoke("run", MLP, "--weights", weights, "--input", examples, "--output", tmp_path / "y.json")
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert f"error: cannot write {tmp_path / 'y.json'}: {os.strerror(err)}\n  hint: " in result.output
    assert hint in result.output
    assert (tmp_path / "y.json").read_text() == "the previous outputs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy", "y.json"]


def test_environment_errors_name_the_file_and_the_fix() -> None:
    code, message = describe(WriteError("runs/m/model.onnx", os.strerror(errno.ENOSPC), errno.ENOSPC))
    assert code == ENVIRONMENT and message.startswith("error: cannot write runs/m/model.onnx: No space left on device")
    code, message = describe(PermissionError(errno.EACCES, "Permission denied", "/data/x.csv"))
    assert code == ENVIRONMENT and message.startswith("error: /data/x.csv: Permission denied\n  hint: ")
    code, message = describe(FileNotFoundError(errno.ENOENT, "No such file or directory", "x"))
    assert code == INTERNAL, "a file we did not expect to be missing is our bug: it should have been a located error"
    missing = ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
    assert describe(missing) == (ENVIRONMENT, "error: No module named 'matplotlib'\n  hint: install it: pip install "
                                 "'specgrad[plot]'")  # fmt: skip
    assert describe(ImportError("cannot import name 'x' from 'specgrad.tensor'", name="specgrad.tensor"))[0] == INTERNAL


def test_a_non_finite_loss_and_a_missing_device_have_their_own_codes() -> None:
    assert describe(NonFiniteLoss("loss is nan at step 7")) == (NON_FINITE, "error: loss is nan at step 7")
    for unavailable in (DTypeUnavailable("no half here"), KernelBuildError("clang crashed")):
        assert describe(unavailable) == (ENVIRONMENT, f"error: {unavailable}")


def test_a_missing_onnx_exits_3_with_what_to_install(weights: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setitem(sys.modules, "onnx", None)
    result = invoke("export", MLP, "--weights", weights, "--format", "onnx", "--out", tmp_path / "m.onnx")
    assert (
        result.exit_code == 3 and "pip install 'specgrad[onnx]'" in result.output and "Traceback" not in result.output
    )
    assert list(tmp_path.iterdir()) == []


# *** run: NaN and infinity ***


def test_run_refuses_non_finite_examples(weights: Path, tmp_path: Path) -> None:
    x = np.random.default_rng(0).random((3, 1, 8, 8), dtype=np.float32)
    x[1, 0, 2, 3], x[2, 0, 0, 0] = np.nan, np.inf
    np.save(tmp_path / "x.npy", x)
    result = invoke("run", MLP, "--weights", weights, "--input", tmp_path / "x.npy")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"error: {tmp_path / 'x.npy'}: example 1, position [0, 2, 3] is nan (2 values are NaN or infinite)" \
        in result.output and "or pass --allow-nonfinite to run them anyway" in result.output  # fmt: skip
    allowed = invoke("run", MLP, "--weights", weights, "--input", tmp_path / "x.npy", "--allow-nonfinite")
    assert allowed.exit_code == 0, allowed.output
    assert f"warning: {tmp_path / 'x.npy'}: example 1, position [0, 2, 3] is nan (2 values are NaN or infinite); " \
        "running them as given (--allow-nonfinite)" in allowed.output  # fmt: skip
    assert allowed.output.count(": class ") == 3 and "0: class" in allowed.output


def test_json_and_csv_non_finite_values_with_and_without_the_option(weights: Path, tmp_path: Path) -> None:
    rows = [[0.5] * 64 for _ in range(2)]
    rows[1][9] = float("inf")
    (tmp_path / "x.json").write_text(json.dumps([np.reshape(r, (1, 8, 8)).tolist() for r in rows]))
    (tmp_path / "x.csv").write_text(",".join(f"p{i}" for i in range(64)) + "\n"
                                    + "\n".join(",".join(map(str, r)) for r in rows) + "\n")  # fmt: skip
    said = {".json": "item [1][0][1][1] (Infinity) is not a finite number",
            ".csv": "row 3, column 'p9': 'inf' is not a finite number"}  # fmt: skip
    for ext in (".json", ".csv"):
        result = invoke("run", MLP, "--weights", weights, "--input", tmp_path / f"x{ext}")
        assert result.exit_code == 1 and said[ext] in result.output and "--allow-nonfinite" in result.output
        allowed = invoke("run", MLP, "--weights", weights, "--input", tmp_path / f"x{ext}", "--allow-nonfinite")
        assert allowed.exit_code == 0 and allowed.output.count(": class ") == 2, allowed.output
        assert "warning:" in allowed.output and "position [0, 1, 1] is inf" in allowed.output
    (tmp_path / "junk.csv").write_text("a,b\n1,dark\n")
    junk = invoke("run", MLP, "--weights", weights, "--input", tmp_path / "junk.csv", "--allow-nonfinite")
    assert junk.exit_code == 1 and "'dark' is not a number" in junk.output, "the option is about NaN and inf only"


# *** the exported C runner checks its input ***


@pytest.fixture(scope="module")
def runner_binary(weights: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("c")
    result = invoke("export", MLP, "--weights", weights, "--format", "c", "--out", folder / "digits.c")
    assert result.exit_code == 0, result.output
    c_file, binary = folder / "digits.c", folder / "digits"
    build = subprocess.run([cc, "-O1", "-DSPECGRAD_MAIN", str(c_file), "-o", str(binary), "-lm"], capture_output=True,
                           text=True)  # fmt: skip
    assert build.returncode == 0, build.stderr
    return binary


GOOD = " ".join(["0.5"] * 64)


@pytest.mark.parametrize(("stdin", "said"), [
    ("abc", "example 0, value 0 (counting from 0): 'abc' is not a number"),
    (f"{GOOD}\n1 2 abc", "example 1, value 2 (counting from 0): 'abc' is not a number"),
    (" ".join(["0.5"] * 63) + " 0.5x", "example 0, value 63 (counting from 0): '0.5x' is not a number"),
    (" ".join(["0.5"] * 10) + " nan", "example 0, value 10 (counting from 0): 'nan' is not a finite number"),
    ("-inf", "example 0, value 0 (counting from 0): '-inf' is not a finite number"),
    ("1e999", "'1e999' is not a finite number"),
    ("1e39", "example 0, value 0 (counting from 0): '1e39' is too large for a float"),
    ("1" * 80, "(cut short) is too long for a number"),
    (f"{GOOD}\n0.5 0.5 0.5", "the input ends inside example 1: it has 3 of the 64 numbers an example needs"),
])  # fmt: skip
def test_the_c_runner_refuses_junk(runner_binary: Path, stdin: str, said: str) -> None:
    ran = subprocess.run([str(runner_binary)], input=stdin, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1 and ran.stderr.startswith("error: ") and said in ran.stderr, ran.stderr
    good_lines = sum(line == GOOD for line in stdin.splitlines())
    assert len(ran.stdout.splitlines()) == good_lines, "numbers only for the whole, good examples before the junk"


def test_the_c_runner_runs_good_input(runner_binary: Path) -> None:
    ran = subprocess.run([str(runner_binary)], input=f"{GOOD}\n{GOOD}\n", capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stderr == "" and len(ran.stdout.splitlines()) == 2
    assert abs(sum(float(v) for v in ran.stdout.splitlines()[0].split()) - 1) < 1e-5, "probabilities"
    empty = subprocess.run([str(runner_binary)], input="", capture_output=True, text=True, timeout=60)
    assert empty.returncode == 0 and empty.stdout == ""


# *** the reading policy's options reach the flags ***


def test_reading_options_set_the_flags_for_the_command(weights: Path, examples: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    seen = []

    def loader(*args: object, **kwargs: object) -> None:
        seen.append((SPEC_ROOT.value, SPEC_ALLOW_OUTSIDE.value, MAX_FILE_MB.value))
        raise SpecError.at(None, "stopped here by the test")

    for module in ("validate", "train", "run"):  # NOTE: export loads the spec through run's spec_and_weights
        monkeypatch.setattr(f"specgrad.cli.{module}.validate_file", loader)
    defaults = (SPEC_ROOT.value, SPEC_ALLOW_OUTSIDE.value, MAX_FILE_MB.value)
    options = ["--root", str(tmp_path), "--allow-outside", "--max-file-mb", "7"]
    commands = [["validate", MLP], ["train", MLP], ["run", MLP, "--weights", weights, "--input", examples],
                ["export", MLP, "--weights", weights, "--format", "c", "--out", tmp_path / "m.c"]]  # fmt: skip
    for command in commands:
        seen.clear()
        result = invoke(*command, *options)
        assert result.exit_code == 1 and "stopped here by the test" in result.output, (command, result.output)
        assert seen == [(str(tmp_path), 1, 7)], command
        assert (SPEC_ROOT.value, SPEC_ALLOW_OUTSIDE.value, MAX_FILE_MB.value) == defaults, "only for the command"
        seen.clear()
        assert invoke(*command).exit_code == 1 and seen == [defaults], "without the options: the environment's values"
    assert invoke("validate", MLP, "--max-file-mb", "0").exit_code == 2, "at least 1 MiB"


# NOTE: every path parameter of every command (cli/main.py parses them as plain Paths, so none is typer's to check)
NULL_BYTE_PATHS = [
    ["validate", "s\0.yaml"], ["validate", "specs/digits_mlp.yaml", "--root", "r\0"],
    ["train", "s\0.yaml"], ["train", "specs/digits_mlp.yaml", "--out", "r\0"], ["train", "--resume", "r\0"],
    ["run", "s\0", "--input", "x.npy"], ["run", "specs/digits_mlp.yaml", "--weights", "w\0", "--input", "x.npy"],
    ["run", "specs/digits_mlp.yaml", "--weights", "w", "--input", "x\0.npy"],
    ["run", "specs/digits_mlp.yaml", "--weights", "w", "--input", "x.npy", "--output", "y\0.npy"],
    ["evaluate", "s\0"], ["evaluate", "specs/digits_mlp.yaml", "--weights", "w\0"],
    ["compare", "a\0", "b"], ["compare", "a", "b", "--plot", "p\0.png"],
    ["generate", "s\0", "--prompt", "a"], ["generate", "specs/char_gpt.yaml", "--weights", "w\0", "--prompt", "a"],
    ["sweep", "s\0.yaml"], ["sweep", "specs/digits_mlp.yaml", "--out", "o\0"], ["sweep", "--resume", "r\0"],
    ["export", "s\0", "--format", "onnx"], ["export", "specs/digits_mlp.yaml", "--weights", "w\0", "--format", "onnx"],
    ["export", "specs/digits_mlp.yaml", "--weights", "w", "--format", "onnx", "--out", "m\0.onnx"],
    ["bench", "--compare", "c\0.json"],
]  # fmt: skip


@pytest.mark.parametrize("args", NULL_BYTE_PATHS, ids=lambda a: " ".join(a).replace("\0", "\\0"))
def test_a_path_holding_a_null_byte_is_a_bad_command_line(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "null byte" in result.output and "Traceback" not in result.output, result.output
