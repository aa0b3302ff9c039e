"""init.from specgrad's own weights (a run folder, its model.safetensors or a checkpoint), read by weight name with no
map: the same spec or a compatible one (issue 32, item 5), and `validate --weights FILE`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.modelspec.builder import build_model
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import get_state_dict, safe_load

runner = CliRunner()
GRAPH = """\
specgrad: 1
name: NAME
seed: SEED
input: {shape: [2]}
model:
  graph:
    - {name: fc1, layer: linear, out: 8, from: input}
    - {name: act, layer: relu, from: fc1}
MIDDLE    - {name: out, layer: linear, out: 2, from: LAST}
  outputs: [out]
data: {source: spirals, samples: 64, batch_size: 16}
train: {epochs: 2, lr: 0.01}
"""
MID = "    - {name: mid, layer: linear, out: 8, from: act}\n"


def _spec(name: str, seed: int = 0, mid: bool = False, init: str | None = None, fc1: int = 8) -> str:
    text = GRAPH.replace("NAME", name).replace("SEED", str(seed)).replace("MIDDLE", MID if mid else "")
    text = text.replace("LAST", "mid" if mid else "act").replace("out: 8, from: input", f"out: {fc1}, from: input")
    return text + (f"init:\n  from: {init}\n" if init is not None else "")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of the graph spec: runs/src-1 inside a project folder."""
    root = tmp_path_factory.mktemp("project")
    (root / "src.yaml").write_text(_spec("src"))
    result = runner.invoke(app, ["train", str(root / "src.yaml"), "--out", str(root / "runs"), "--device", "CPU"])
    assert result.exit_code == 0, result.output
    return root / "runs" / "src-1"


@pytest.fixture
def run(source: Path, tmp_path: Path) -> Path:
    """The source run, copied into the folder of the spec that names it (a spec reads inside its own folder)."""
    shutil.copytree(source, tmp_path / "runs" / "src-1")
    return Path("runs/src-1")


def _by_name(model) -> dict[str, np.ndarray]:  # noqa: ANN001
    """fc1.weight ... as the graph spec (steps: fc1, act, [mid,] out) names them."""
    names = [name for name, _ in model.steps]
    return {f"{names[int(k.split('.')[1])]}.{k.split('.', 3)[3]}": v.numpy() for k, v in get_state_dict(model).items()}


def _trained(folder: Path) -> dict[str, np.ndarray]:
    names = {"0": "fc1", "2": "out"}
    return {f"{names[k.split('.')[1]]}.{k.split('.', 3)[3]}": v.numpy()
            for k, v in safe_load(folder / "model.safetensors").items()}  # fmt: skip


@pytest.mark.parametrize("named", ["RUN", "RUN/model.safetensors", "RUN/checkpoints/epoch-00002.safetensors"])
def test_the_same_spec_starts_from_a_runs_weights_by_name(run: Path, tmp_path: Path, named: str) -> None:
    """init.from: a run folder, its model.safetensors or one of its checkpoints: every weight is loaded, no map."""
    spec = tmp_path / "warm.yaml"
    spec.write_text(_spec("warm", seed=5, init=named.replace("RUN", str(run))))
    model = _by_name(build_model(validate_file(spec), init=True))
    checkpoint = tmp_path / run / "checkpoints" / "epoch-00002.safetensors"
    expected = _by_name_file(checkpoint) if named.startswith("RUN/checkpoints") else _trained(tmp_path / run)
    assert model.keys() == expected.keys()
    for k in model:
        np.testing.assert_array_equal(model[k], expected[k])


def test_init_written_as_a_path_is_init_from_that_path(run: Path, tmp_path: Path) -> None:
    """init: RUN_DIR is init: {from: RUN_DIR}: the same weights, the same values (and spec_hash), the line kept."""
    from specgrad.train.run_folder import spec_hash

    short, whole = tmp_path / "short.yaml", tmp_path / "whole.yaml"
    short.write_text(_spec("warm", seed=5) + f"init: {run}\n")
    whole.write_text(_spec("warm", seed=5, init=str(run)))
    a, b = validate_file(short), validate_file(whole)
    assert a.values["init"] == b.values["init"] and a.values["init"]["from"] == str(run)
    assert spec_hash(a.values) == spec_hash(b.values)
    got, want = _by_name(build_model(a, init=True)), _by_name(build_model(b, init=True))
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in got)
    short.write_text(_spec("warm", seed=5) + "init: runs/nowhere\n")
    with pytest.raises(SpecError) as e:
        validate_file(short)
    assert e.value.problems[0].loc is not None and e.value.problems[0].loc.line == 13, str(e.value)


def _by_name_file(path: Path) -> dict[str, np.ndarray]:
    names = {"0": "fc1", "2": "out"}
    return {f"{names[k.split('.')[2]]}.{k.split('.', 4)[4]}": v.numpy() for k, v in safe_load(path).items()
            if k.startswith("model.")}  # fmt: skip


def test_a_compatible_spec_loads_what_fits_and_says_what_is_left(run: Path, tmp_path: Path) -> None:
    """One more layer (mid): fc1 and out come from the run, mid starts from the seed as it would without init:;
    validate says which."""
    spec = tmp_path / "wider.yaml"
    spec.write_text(_spec("wider", seed=3, mid=True, init=str(run)))
    valid = validate_file(spec)
    warm, cold = _by_name(build_model(valid, init=True)), _by_name(build_model(valid))
    trained = _trained(tmp_path / run)
    for k in ("fc1.weight", "fc1.bias", "out.weight", "out.bias"):
        np.testing.assert_array_equal(warm[k], trained[k])
    for k in ("mid.weight", "mid.bias"):
        np.testing.assert_array_equal(warm[k], cold[k])
    said = runner.invoke(app, ["validate", str(spec)])
    assert said.exit_code == 0, said.output
    assert "init: 4 weights from" in said.output and "from the seed: mid.weight, mid.bias" in said.output
    # NOTE: and the other way: a run with mid loaded into the spec without it leaves mid out
    result = runner.invoke(app, ["train", str(spec), "--out", str(tmp_path / "runs"), "--device", "CPU"])
    assert result.exit_code == 0, result.output
    narrow = tmp_path / "narrow.yaml"
    narrow.write_text(_spec("narrow", init="runs/wider-1"))
    said = runner.invoke(app, ["validate", str(narrow)])
    assert said.exit_code == 0, said.output
    assert "from the seed: none; left out: mid.weight, mid.bias" in said.output


def test_a_warm_started_run_trains_and_resumes(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run folder's resolved spec names the source run relative to itself; it resumes and extends."""
    monkeypatch.chdir(tmp_path)  # NOTE: the project root, holding the spec, the source run and the new runs
    spec = tmp_path / "warm.yaml"
    spec.write_text(_spec("warm", init=str(run)))
    result = runner.invoke(app, ["train", str(spec), "--out", str(tmp_path / "runs"), "--device", "CPU"])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "runs" / "warm-1"
    assert validate_file(folder / "spec.resolved.yaml").values["init"]["from"].endswith("src-1")
    result = runner.invoke(app, ["train", "--resume", str(folder), "--epochs", "3"])
    assert result.exit_code == 0, result.output


def test_a_wrong_shape_is_an_error_at_the_init_line(run: Path, tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(_spec("bad", init=str(run), fc1=4))
    with pytest.raises(SpecError) as e:
        validate_file(spec)
    line = _spec("bad", init=str(run), fc1=4).splitlines().index(f"  from: {run}") + 1
    messages = [(p.loc.line, p.message) for p in e.value.problems]
    assert (line, f"init: the model's fc1.weight is [4, 2], but 'fc1.weight' in {run} is [8, 2]") in messages
    assert (line, f"init: the model's fc1.bias is [4], but 'fc1.bias' in {run} is [8]") in messages
    result = runner.invoke(app, ["validate", str(spec)])
    assert result.exit_code == 1 and f"bad.yaml:{line}:9: error: init: the model's fc1.weight" in result.output


def test_specgrad_weights_away_from_their_run_folder(run: Path, tmp_path: Path) -> None:
    """A copied model.safetensors has no spec to name its step-numbered tensors: an error saying what to do; a folder
    that is no run folder, or a run without its final weights, too. A map still reads the internal names."""
    shutil.copy(tmp_path / run / "model.safetensors", tmp_path / "copy.safetensors")
    spec = tmp_path / "copy.yaml"
    spec.write_text(_spec("copy", init="copy.safetensors"))
    with pytest.raises(SpecError, match=r"copy.safetensors holds specgrad's step-numbered tensors \('steps.0.1.bias'\)"
                       r", but no spec.resolved.yaml of a run folder beside it"):  # fmt: skip
        validate_file(spec)
    mapped = _spec("copy", init="copy.safetensors") + "  map: {fc1.weight: steps.0.1.weight}\n"
    spec.write_text(mapped)
    np.testing.assert_array_equal(_by_name(build_model(validate_file(spec), init=True))["fc1.weight"],
                                  _trained(tmp_path / run)["fc1.weight"])  # fmt: skip
    (tmp_path / "plain").mkdir()
    spec.write_text(_spec("copy", init="plain"))
    with pytest.raises(SpecError, match=r"init.from: plain is a folder, but not a run folder"):
        validate_file(spec)
    unfinished = tmp_path / "unfinished"
    shutil.copytree(tmp_path / run, unfinished)
    (unfinished / "model.safetensors").unlink()
    spec.write_text(_spec("copy", init="unfinished"))
    with pytest.raises(SpecError, match=r"the run folder unfinished has no model.safetensors \(its run has not "
                       r"finished\)\n  hint: name one of its checkpoints"):  # fmt: skip
        validate_file(spec)


def test_validate_lists_the_weights_a_file_provides(run: Path, tmp_path: Path) -> None:
    spec = tmp_path / "wider.yaml"
    spec.write_text(_spec("wider", mid=True))
    result = runner.invoke(app, ["validate", str(spec), "--weights", str(tmp_path / run)])
    assert result.exit_code == 0, result.output
    assert "fc1.weight [8, 2]: 'steps.0.1.weight' [8, 2]" in result.output
    assert "mid.bias [8]: not in the file (starts from the seed)" in result.output
    listed = json.loads(runner.invoke(app, ["validate", str(spec), "--json", "--weights", str(tmp_path / run)]).output)
    assert [w["name"] for w in listed["weights"]] == ["fc1.weight", "fc1.bias", "mid.weight", "mid.bias",
                                                      "out.weight", "out.bias"]  # fmt: skip
    assert listed["weights"][2]["tensor"] is None and listed["unused"] == []
    result = runner.invoke(app, ["validate", str(spec), "--weights", str(tmp_path / "none.safetensors")])
    assert result.exit_code == 1 and "--weights: no such file" in result.output and "Traceback" not in result.output


def test_weights_that_are_not_their_run_folders_are_refused(run: Path, tmp_path: Path) -> None:
    """A model.safetensors put into another run's folder: its step-numbered tensors do not have the shapes that run's
    spec gives them, so nothing is loaded under the wrong names."""
    spec = tmp_path / "wider.yaml"
    spec.write_text(_spec("wider", mid=True))
    result = runner.invoke(app, ["train", str(spec), "--out", str(tmp_path / "runs"), "--device", "CPU"])
    assert result.exit_code == 0, result.output
    shutil.copy(tmp_path / run / "model.safetensors", tmp_path / "runs" / "wider-1" / "model.safetensors")
    narrow = tmp_path / "narrow.yaml"
    narrow.write_text(_spec("narrow", init="runs/wider-1"))
    with pytest.raises(SpecError, match=r"narrow.yaml:14:9: error: 'steps.2.1.bias' in runs/wider-1 is \[2\], but its "
                       r"mid.bias is \[8\] in the spec of its run folder .*: the file is not that run's"):  # fmt: skip
        validate_file(narrow)
