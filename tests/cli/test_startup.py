"""Start-up: a command imports only what it uses (issue 31: `--help` and `validate` well under half a second warm)."""

import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

ENGINE = ("specgrad.device", "specgrad.tensor", "numpy")
# NOTE: optional extras and heavy libraries, each imported only by the command or the data that uses it (PIL comes
# with matplotlib, and with an images source)
OPTIONAL = ("matplotlib", "onnx", "onnxruntime", "ray", "PIL", "pyopencl", "torch", "jsonschema", "hypothesis")
SPECS = Path(__file__).resolve().parents[2] / "specs"


def _imported_after(code: str) -> set[str]:
    probe = (
        f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)), file=sys.stderr)"  # NOTE: apart from --help's text
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stderr.split())


def _command(*args: str) -> str:
    """Code that runs `specgrad ARGS` and asserts it succeeded."""
    run = f"app({list(args)!r})"
    return f"from specgrad.cli.main import app\ntry:\n    {run}\nexcept SystemExit as e:\n    assert not e.code, e"


def _roots(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_the_app_and_its_help_load_no_engine():
    loaded = _imported_after(
        "from specgrad.cli.main import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass"
    )
    assert "specgrad.cli.main" in loaded
    assert not loaded & set(ENGINE), sorted(loaded & set(ENGINE))
    commands = {m for m in loaded if m.startswith("specgrad.cli.")} - {"specgrad.cli.main", "specgrad.cli.errors"}
    assert not commands


def test_the_package_names_load_on_first_use():
    loaded = _imported_after("import specgrad.flags")
    assert not loaded & set(ENGINE)
    loaded = _imported_after("import specgrad\nspecgrad.Tensor\nassert 'Tensor' in dir(specgrad)")
    assert {"specgrad.tensor", "specgrad.device"} <= loaded


def test_an_unknown_name_is_an_attribute_error():
    import pytest

    import specgrad

    with pytest.raises(AttributeError, match="no attribute 'Tensr'"):
        specgrad.Tensr  # noqa: B018


def test_validate_loads_no_optional_library_and_no_progress_bar():
    loaded = _imported_after(_command("validate", str(SPECS / "digits_mlp.yaml")))
    assert "specgrad.cli.validate" in loaded
    assert not _roots(loaded) & set(OPTIONAL), sorted(_roots(loaded) & set(OPTIONAL))
    assert not loaded & {"rich.progress", "rich.live", "typer.rich_utils", "specgrad.train.trainer"}


def test_train_leaves_matplotlib_to_the_child_that_draws_the_plot(tmp_path: Path):
    """The training's own process imports no optional library for digits_mlp: metrics.png is drawn by a child that
    imports matplotlib while the steps run (here always; a command starts one where a core is to spare)."""
    ahead = "import specgrad.train.plots\nspecgrad.train.plots.is_worth_a_child = lambda: True\n"
    train = _command("train", str(SPECS / "digits_mlp.yaml"), "--epochs", "1", "--out", str(tmp_path))
    loaded = _imported_after(ahead + train)
    (run,) = tmp_path.iterdir()
    assert (run / "metrics.png").read_bytes().startswith(b"\x89PNG") or find_spec("matplotlib") is None
    assert not _roots(loaded) & set(OPTIONAL), sorted(_roots(loaded) & set(OPTIONAL))
