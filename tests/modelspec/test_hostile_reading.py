"""Reading the files a spec names, as someone else's spec or file would make specgrad read them: only inside the spec's
folder and the root (unless allowed), only regular files, within MAX_FILE_MB, .npz and .npy checked before they are
read, safetensors read by the tensors asked for and checked against their checksums. Each case ends with a located
error (exit 1), prints nothing of a file outside the project, and ends within a time and memory bound (a guard against
hangs, not a speed test)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import struct
import tracemalloc
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file
from specgrad.cli.main import app
from typer.testing import CliRunner

import specgrad.train.sources.csv as csv_source
import specgrad.train.sources.text as text_source
from specgrad import Tensor
from specgrad.flags import Context
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import CHECKSUM_KEY, safe_load, safe_load_metadata, safe_save
from specgrad.train.data import load_data

SECRET = "SECRET-4c1d-never-printed"
SPECS = Path(__file__).resolve().parents[2] / "specs"
HEAD = "specgrad: 1\nname: t\ninput: {shape: [2]}\nmodel: [{linear: 2}]\n"
runner = CliRunner()


@contextlib.contextmanager
def bounded(seconds: float = 20.0, mib: int = 128) -> Iterator[None]:
    """Fails when the block runs past `seconds` (a hang: SIGALRM interrupts even a blocking open) or its Python and
    numpy allocations peak over `mib` MiB."""

    def alarm(*_: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        tracemalloc.stop()
    assert peak < mib << 20, f"allocated {peak / 2**20:.0f} MiB"


def validate(spec: Path, *args: str) -> tuple[int, str]:
    """`specgrad validate SPEC`: its exit code and output, checked to end by exiting, without a traceback."""
    with bounded():
        result = runner.invoke(app, ["validate", str(spec), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def refused(spec: Path, where: str, message: str) -> str:
    """validate exits 1 with `message` as its first error, at `where` (line:col) in the spec; nothing secret shown."""
    code, output = validate(spec)
    assert code == 1, output
    assert output.startswith(f"{spec}:{where}: error: {message}"), output
    assert SECRET not in output
    return output


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """tmp/project, the root (SPEC_ROOT), and beside it tmp/outside, whose files no spec in the project may read."""
    (tmp_path / "project").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.yaml").write_text(f"{SECRET}: 1\nseed: 4\n")
    (tmp_path / "outside" / "secret.csv").write_text(f"{SECRET},y\n1,2\n")
    with Context(SPEC_ROOT=str(tmp_path / "project"), SPEC_ALLOW_OUTSIDE=0):
        yield tmp_path / "project"


def spec(folder: Path, text: str, name: str = "spec.yaml") -> Path:
    (path := folder / name).write_text(text)
    return path


def csv_spec(folder: Path, path: str) -> Path:
    """A csv spec whose data.path (line 5, column 27) is `path`."""
    return spec(folder, HEAD + f"data: {{source: csv, path: '{path}', target: y, task: classify}}\n")


# *** only inside the spec's folder and the root ***


@pytest.mark.parametrize("value", ["{outside}/secret.yaml", "../outside/secret.yaml", "sub/../../outside/secret.yaml"])
def test_extends_outside_the_project_is_refused_at_its_value(project: Path, value: str) -> None:
    value = value.format(outside=project.parent / "outside")
    path = spec(project, f"specgrad: 1\nname: t\nextends: '{value}'\n")
    output = refused(path, "3:10", f"extends '{value}' leaves the folders a spec may read from ({project})")
    assert "--allow-outside" in output and "--root DIR" in output


def test_a_symbolic_link_inside_that_leads_outside_is_refused(project: Path) -> None:
    (project / "base.yaml").symlink_to(project.parent / "outside" / "secret.yaml")
    (project / "d.csv").symlink_to(project.parent / "outside" / "secret.csv")
    output = refused(spec(project, "specgrad: 1\nname: t\nextends: base.yaml\n"), "3:10", "extends 'base.yaml' leaves")
    assert f"a symbolic link on the way leads to {project.parent / 'outside' / 'secret.yaml'}" in output
    refused(csv_spec(project, "d.csv"), "5:27", "data.path 'd.csv' leaves the folders a spec may read from")


def test_data_path_outside_is_refused_by_validate_and_by_the_loader(project: Path) -> None:
    path = csv_spec(project, "../outside/secret.csv")
    refused(path, "5:27", "data.path '../outside/secret.csv' leaves the folders a spec may read from")
    with bounded(), pytest.raises(SpecError) as e:
        load_data(validate_file(path, data_files=False))  # NOTE: as train reads it
    assert "leaves the folders a spec may read from" in str(e.value) and SECRET not in str(e.value)


def test_a_null_character_in_a_path_is_a_located_error(project: Path) -> None:
    refused(spec(project, 'specgrad: 1\nname: t\nextends: "a\\0b.yaml"\n'), "3:10", "extends holds a null character")
    path = spec(project, HEAD + 'data: {source: csv, path: "d\\0.csv", target: y}\n')
    refused(path, "5:27", "data.path holds a null character")


def test_files_outside_are_read_when_the_user_allows_it(project: Path, tmp_path: Path) -> None:
    """The flags are read when a file is named (the CLI's --allow-outside and --root set them for a command)."""
    (tmp_path / "outside" / "base.yaml").write_text(HEAD + "seed: 5\n")
    path = spec(project, "extends: ../outside/base.yaml\n")
    assert validate(path)[0] == 1
    with Context(SPEC_ALLOW_OUTSIDE=1):
        assert validate(path)[0] == 0
    with Context(SPEC_ROOT=str(tmp_path)):
        assert validate(path)[0] == 0
        assert validate_file(path).values["seed"] == 5


def test_the_root_is_the_current_folder_by_default(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "base.yaml").write_text(HEAD)
    (project / "sub").mkdir()
    path = spec(project / "sub", "extends: ../base.yaml\n")
    with Context(SPEC_ROOT=""):
        monkeypatch.chdir(project)
        assert validate(path)[0] == 0
        monkeypatch.chdir(project / "sub")
        refused(path, "1:10", f"extends '../base.yaml' leaves the folders a spec may read from ({project / 'sub'})")


# *** only regular files ***


@pytest.mark.parametrize("key", ["extends", "data.path"])
def test_a_fifo_is_refused_at_once_as_a_fifo(project: Path, key: str) -> None:
    """Opened without O_NONBLOCK, reading a FIFO waits for a writer forever."""
    os.mkfifo(project / "pipe")
    if key == "extends":
        path = spec(project, "specgrad: 1\nname: t\nextends: pipe\n")
        output = refused(path, "3:10", "extends: cannot read")
    else:
        path = csv_spec(project, "pipe")
        output = refused(path, "5:27", "data.path: cannot read")
        with bounded(), pytest.raises(SpecError, match=r"it is a FIFO \(named pipe\), not a regular file"):
            load_data(validate_file(path, data_files=False))
    assert "it is a FIFO (named pipe), not a regular file" in output and "no such file" not in output


def test_devices_sockets_and_folders_are_refused_by_what_they_are(project: Path) -> None:
    (project / "zero.csv").symlink_to("/dev/zero")
    refused(csv_spec(project, "zero.csv"), "5:27", "data.path 'zero.csv' leaves the folders")  # NOTE: /dev is outside
    with Context(SPEC_ALLOW_OUTSIDE=1):
        path = csv_spec(project, "zero.csv")
        refused(path, "5:27", f"data.path: cannot read {project / 'zero.csv'}: it is a character device, not a regular")
        with bounded(), pytest.raises(SpecError, match="it is a character device, not a regular file"):
            load_data(validate_file(path, data_files=False))
    (project / "folder.csv").mkdir()
    refused(csv_spec(project, "folder.csv"), "5:27", "data.path: cannot read")
    assert "it is a folder, not a regular file" in validate(project / "spec.yaml")[1]
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(project / "sock.csv"))
        refused(csv_spec(project, "sock.csv"), "5:27", "data.path: cannot read")
        assert "it is a socket, not a regular file" in validate(project / "spec.yaml")[1]


# *** sizes ***


def test_a_sparse_20_gib_csv_is_refused_before_it_is_read(project: Path) -> None:
    with open(project / "big.csv", "wb") as f:
        f.write(b"a,y\n1,2\n")
        try:
            f.truncate(20 << 30)
        except OSError as e:
            pytest.skip(f"this filesystem cannot hold a sparse 20 GiB file: {e}")
    path = csv_spec(project, "big.csv")
    message = f"{project / 'big.csv'} is 20,480.0 MiB, over the limit of 1,024 MiB for a data file"
    output = refused(path, "5:27", message)
    assert "--max-file-mb" in output
    with bounded(mib=16), pytest.raises(SpecError, match=message):
        load_data(validate_file(path))


def test_max_file_mb_is_read_when_a_file_is(project: Path) -> None:
    np.savez(project / "d.npz", x=np.zeros((70_000, 2), np.float32), y=np.arange(70_000) % 2)  # 1.1 MiB
    path = npz_spec(project)
    assert validate(path)[0] == 0
    with Context(MAX_FILE_MB=1):
        refused(path, "5:27", f"{project / 'd.npz'} is 1.1 MiB, over the limit of 1 MiB for a data file")


def test_a_text_source_refuses_a_file_over_the_limit_too(project: Path) -> None:
    (project / "t.txt").write_text("abcdefgh\n" * 200_000)
    path = spec(project, "specgrad: 1\nname: t\ninput: {shape: [8], dtype: int32}\nmodel: [{embedding: {vocab: 128, "
                "dim: 4}}, {linear: 128}]\ndata: {source: text, path: t.txt, context: 8}\n")  # fmt: skip
    with Context(MAX_FILE_MB=1):
        refused(path, "5:28", f"{project / 't.txt'} is 1.7 MiB, over the limit of 1 MiB for a data file")


def test_csv_and_text_sources_bound_what_they_hold_in_memory(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A csv's cells are Python strings and a text's windows 16 bytes a character: each has a cap of its own."""
    monkeypatch.setattr(csv_source, "MAX_CSV_CELLS", 1000)
    (project / "d.csv").write_text("a,b,y\n" + "1,2,0\n3,4,1\n" * 200)
    output = validate(csv_spec(project, "d.csv"))[1]
    assert output.startswith(f"{project / 'd.csv'}:334:1: error: d.csv has more than 1,000 cells"), output
    assert "source: npz" in output
    monkeypatch.setattr(text_source, "MAX_TEXT_CHARS", 1000)
    (project / "t.txt").write_text("abcdefgh\n" * 200)
    path = spec(project, "specgrad: 1\nname: t\ninput: {shape: [8], dtype: int32}\nmodel: [{embedding: {vocab: 128, "
                "dim: 4}}, {linear: 128}]\ndata: {source: text, path: t.txt, context: 8}\n")  # fmt: skip
    refused(path, "5:28", "t.txt has more than 1,000 characters, more than a text source trains on")


# *** npz and npy ***


def npz_spec(folder: Path, name: str = "d.npz") -> Path:
    """An npz spec whose data.path (line 5, column 27) is `name`."""
    return spec(folder, HEAD + f"data: {{source: npz, path: {name}, task: classify}}\n")


def npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def test_an_npz_zip_bomb_is_refused_from_its_zip_directory(project: Path) -> None:
    """64 MiB of zeros deflate to 64 KiB: the directory's sizes are checked before anything is unpacked."""
    with zipfile.ZipFile(project / "d.npz", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("x.npy", npy_bytes(np.zeros((1 << 24,), np.float32)))
        z.writestr("y.npy", npy_bytes(np.zeros((4,), np.int64)))
    assert (project / "d.npz").stat().st_size < 1 << 20
    with Context(MAX_FILE_MB=16):
        path = npz_spec(project)
        refused(path, "5:27", f"{project / 'd.npz'} unpacks to 64.0 MiB, over the limit of 16 MiB for a data file")
        with bounded(mib=8), pytest.raises(SpecError, match="unpacks to 64.0 MiB"):
            load_data(validate_file(path))


@pytest.mark.parametrize("case", ["300 arrays", "not an npy", "pickle"])
def test_an_npz_holds_a_few_plain_npy_arrays(project: Path, case: str) -> None:
    with zipfile.ZipFile(project / "d.npz", "w") as z:
        if case == "300 arrays":
            for i in range(300):
                z.writestr(f"a{i}.npy", npy_bytes(np.zeros(1)))
        elif case == "not an npy":
            z.writestr("x.npy", npy_bytes(np.zeros((4, 2))))
            z.writestr("y", b"\0" * 100)
        else:
            z.writestr("x.npy", npy_bytes(np.array([{}, 1], dtype=object)))
    why = {"300 arrays": "its zip directory lists 300 files in ",
           "not an npy": "'y' in it is not a .npy array (np.savez writes only those)",
           "pickle": "'x.npy' holds Python objects, which are never loaded"}[case]  # fmt: skip
    output = refused(npz_spec(project), "5:27", f"d.npz cannot be read as a .npz file ({why}")
    assert case != "300 arrays" or "bytes, but a .npz may hold at most 256 arrays)" in output


def test_an_npy_with_a_huge_header_or_a_lying_shape_is_refused_before_its_data(project: Path) -> None:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }" + " " * 200_000 + "\n"
    (project / "d.npy").write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header)) + header.encode() + bytes(12))
    path = npz_spec(project, "d.npy")
    refused(path, "5:27", f"d.npy cannot be read as a .npz file (the header of 'd.npy' is {len(header):,} bytes long, "
            "over the 10,000 a .npy header may have)")  # fmt: skip
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }".ljust(117) + "\n"
    (project / "d.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(12))
    refused(path, "5:27", "d.npy cannot be read as a .npz file ('d.npy' of shape [1000000000000] and dtype float32 "
            "needs 4,000,000,000,000 bytes, but only 12 follow its header: is it cut short?)")  # fmt: skip
    with bounded(mib=8), pytest.raises(SpecError, match="is it cut short"):
        load_data(validate_file(path))


def test_an_npz_reads_only_the_arrays_it_uses(project: Path) -> None:
    np.savez(project / "d.npz", x=np.zeros((40, 2), np.float32), y=np.arange(40) % 2, unused=np.zeros(1 << 22))
    with bounded(mib=8):
        ds = load_data(validate_file(npz_spec(project)))
    assert len(ds.x_train) + len(ds.x_valid) == 40


# *** messages quote a data file or a base spec in short excerpts only ***


def test_messages_quote_data_files_in_short_excerpts(project: Path) -> None:
    (project / "d.csv").write_text(f"{'a' * 60}{SECRET},b\n1,2\n")
    code, output = validate(csv_spec(project, "d.csv"))
    assert code == 1 and "the header has: aaaa" in output and SECRET not in output, output
    (project / "d.csv").write_text(f"a,b,y\n1,2,0\n{'7' * 60}{SECRET},2,1\n" + "1,2,0\n" * 40)
    code, output = validate(csv_spec(project, "d.csv"))
    assert code == 1 and f"{project / 'd.csv'}:3:1: error: row 3, column 'a': '7777" in output, output
    assert SECRET not in output


def test_a_base_that_is_not_a_mapping_is_quoted_in_a_short_excerpt(project: Path) -> None:
    (project / "notes.txt").write_text("just some notes " * 20 + SECRET + "\n")
    code, output = validate(spec(project, "specgrad: 1\nname: t\nextends: notes.txt\n"))
    assert code == 1 and "so it must hold 'key: value' lines, got 'just some notes" in output
    assert SECRET not in output and len(output) < 500


# *** safetensors: lazily, within MAX_FILE_MB, checked against checksums ***


def test_a_flipped_bit_in_a_tensor_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    safe_save({"w": Tensor(np.arange(64, dtype=np.float32)), "b": Tensor(np.ones(3, np.float32))}, path)
    sums = json.loads(safe_load_metadata(path)[CHECKSUM_KEY])
    assert set(sums) == {"w", "b"} and all(len(v) == 64 for v in sums.values())
    raw = bytearray(path.read_bytes())
    raw[-100] ^= 0x10  # NOTE: a bit of w's data (the last 12 bytes are b's)
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=f"{path} is damaged: tensor 'w' does not match its checksum"):
        safe_load(path, device="CPU")
    assert safe_load(path, device="CPU", keys=["b"])["b"].numpy().tolist() == [1.0, 1.0, 1.0]  # NOTE: b is intact


def test_every_kind_of_tensor_is_written_with_a_checksum_and_loads(tmp_path: Path) -> None:
    arrays = {"scalar": np.array(3.0, np.float32), "empty": np.zeros((0, 3), np.float32), "half": np.array([1.5], "f2"),
              "flags": np.array([True, False]), "big": np.arange(6, dtype=np.int64).reshape(2, 3)}  # fmt: skip
    safe_save({k: Tensor(v) for k, v in arrays.items()}, tmp_path / "all.safetensors")
    assert set(json.loads(safe_load_metadata(tmp_path / "all.safetensors")[CHECKSUM_KEY])) == set(arrays)
    for k, t in safe_load(tmp_path / "all.safetensors", device="CPU").items():
        np.testing.assert_array_equal(t.numpy(), arrays[k])


def test_checksum_metadata_that_does_not_fit_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    save_file({"w": np.ones(3, np.float32)}, path, metadata={CHECKSUM_KEY: json.dumps({"v": "0" * 64})})
    with pytest.raises(ValueError, match=f"{path} is damaged: its {CHECKSUM_KEY} metadata is not a checksum"):
        safe_load(path, device="CPU")


def test_a_file_without_checksums_loads_as_before(tmp_path: Path) -> None:
    """Files of other tools (and of specgrad before checksums) have none: they load, unchecked."""
    save_file({"w": np.arange(3, dtype=np.float32)}, tmp_path / "lib.safetensors")
    assert safe_load(tmp_path / "lib.safetensors", device="CPU")["w"].numpy().tolist() == [0.0, 1.0, 2.0]


def test_a_huge_weights_file_is_refused_whole_and_read_by_the_keys_asked_for(tmp_path: Path) -> None:
    """A 1 TiB safetensors file (sparse): loading all of it is refused by MAX_FILE_MB before anything is read; loading
    one small tensor reads only its bytes."""
    n, small = 2**38, np.array([0.5, -1.0], dtype=np.float32)
    header = json.dumps({"huge": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]},
                         "w": {"dtype": "F32", "shape": [2], "data_offsets": [4 * n, 4 * n + 8]}}).encode()  # fmt: skip
    path = tmp_path / "huge.safetensors"
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        try:
            f.truncate(8 + len(header) + 4 * n)
        except OSError as e:
            pytest.skip(f"this filesystem cannot hold a sparse 1 TiB file: {e}")
        f.seek(8 + len(header) + 4 * n)
        f.write(small.tobytes())
    with bounded(mib=64):
        with pytest.raises(ValueError, match=r"loading it reads 1,048,576.0 MiB, over the limit of 1,024 MiB .*"
                                             r"--max-file-mb"):  # fmt: skip
            safe_load(path, device="CPU")
        w = safe_load(path, device="CPU", keys=["w"])
    assert list(w) == ["w"] and w["w"].numpy().tolist() == [0.5, -1.0]
    with pytest.raises(ValueError, match="has no tensor 'v'"):
        safe_load(path, device="CPU", keys=["v"])


def test_resume_refuses_a_checkpoint_with_a_flipped_bit(tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", str(SPECS / "digits_mlp.yaml"), "--out", str(tmp_path), "--steps", "2"])
    assert result.exit_code == 0, result.output
    (folder,) = tmp_path.iterdir()
    (ckpt,) = (folder / "checkpoints").glob("epoch-*.safetensors")
    raw = bytearray(ckpt.read_bytes())
    raw[len(raw) // 2] ^= 0x01  # NOTE: past the header: a checkpoint's header is a few KiB, its data 100s of KiB
    ckpt.write_bytes(bytes(raw))
    with bounded(seconds=120, mib=512):
        result = runner.invoke(app, ["train", "--resume", str(folder)])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"{ckpt} is damaged: tensor '" in result.output and "does not match its checksum" in result.output
