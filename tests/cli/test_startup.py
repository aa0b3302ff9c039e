"""Start-up: a command imports only what it uses (issue 31: `--help` and `validate` well under half a second warm)."""

import subprocess
import sys

ENGINE = ("specgrad.device", "specgrad.tensor", "numpy")


def _imported_after(code: str) -> set[str]:
    probe = (
        f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)), file=sys.stderr)"  # NOTE: apart from --help's text
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return set(done.stderr.split())


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
