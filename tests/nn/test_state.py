"""Model state: state dicts, strict loading with named problems, safetensors files both ways."""

from __future__ import annotations

import gc
import json
import os
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load, load_file, save_file

from specgrad import Tensor, dtypes
from specgrad.flags import Context
from specgrad.nn.state import (
    ChecksumMismatch,
    FileTooLarge,
    NonFinite,
    SafetensorsError,
    StateMismatch,
    get_parameters,
    get_state_dict,
    load_state_dict,
    safe_load,
    safe_load_metadata,
    safe_save,
)


class Tiny:
    def __init__(self, device: str) -> None:
        self.layers = [
            Tensor.ones(2, 3, device=device).contiguous(),
            {"b": Tensor.zeros(3, device=device).contiguous()},
        ]
        self.scale = Tensor.full((1,), 2.0, device=device).contiguous()


def test_state_dict_keys_and_parameters(device: str) -> None:
    m = Tiny(device)
    assert list(get_state_dict(m)) == ["layers.0", "layers.1.b", "scale"]
    m.alias = m.scale
    assert len(get_parameters(m)) == 3


def test_load_state_dict_copies_in_place(device: str) -> None:
    m = Tiny(device)
    Tensor.corealize(get_parameters(m))
    buf = m.scale.lazydata.base.realized
    load_state_dict(m, {"layers.0": Tensor(np.full((2, 3), 5.0)), "layers.1.b": Tensor([1, 2, 3]),
                        "scale": Tensor([7.0])})  # fmt: skip
    assert m.layers[0].numpy().tolist() == [[5.0] * 3] * 2 and m.layers[1]["b"].dtype == dtypes.float32
    assert m.layers[1]["b"].numpy().tolist() == [1.0, 2.0, 3.0]
    assert m.scale.lazydata.base.realized is buf and m.scale.item() == 7.0


def test_load_state_dict_names_every_problem() -> None:
    m = Tiny("CPU")
    bad = {"layers.0": Tensor.ones(3, 2), "scale": Tensor([1.0]), "extra.w": Tensor.ones(4)}
    with pytest.raises(ValueError) as e:
        load_state_dict(m, bad)
    text = str(e.value)
    assert "wrong shape for layers.0: the model has (2, 3), the state has (3, 2)" in text
    assert "missing key layers.1.b (shape (3,))" in text and "unexpected key extra.w (shape (4,))" in text
    with pytest.raises(ValueError, match="wrong shape"):
        load_state_dict(m, bad, strict=False)
    load_state_dict(m, {"scale": Tensor([3.0]), "extra.w": Tensor.ones(4)}, strict=False)
    assert m.scale.item() == 3.0


ALL_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
              "float64"]  # fmt: skip


def test_safetensors_round_trip_every_dtype(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = {name: (rng.standard_normal((2, 3)) * 50).astype(name) for name in ALL_DTYPES}
    path = tmp_path / "m.safetensors"
    safe_save({k: Tensor(v) for k, v in arrays.items()}, path, metadata={"note": "test"})
    for k, v in load_file(path).items():  # the safetensors library reads what specgrad wrote
        np.testing.assert_array_equal(v, arrays[k])
        assert v.dtype == arrays[k].dtype
    for k, t in safe_load(path).items():
        np.testing.assert_array_equal(t.numpy(), arrays[k])
        assert t.dtype == dtypes.from_np(arrays[k].dtype)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_file_written_by_the_safetensors_library(tmp_path: Path, device: str) -> None:
    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "step": np.array([7], dtype=np.int64)}
    save_file(arrays, tmp_path / "lib.safetensors")
    loaded = safe_load(tmp_path / "lib.safetensors", device=device)
    assert loaded["w"].device == device
    np.testing.assert_array_equal(loaded["w"].numpy(), arrays["w"])
    np.testing.assert_array_equal(loaded["step"].numpy(), arrays["step"])


def test_torch_reads_and_writes_the_same_files(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file as torch_load
    from safetensors.torch import save_file as torch_save

    safe_save({"a": Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))}, tmp_path / "sg.safetensors")
    assert torch.equal(torch_load(tmp_path / "sg.safetensors")["a"], torch.arange(6, dtype=torch.float32).reshape(2, 3))
    torch_save({"b": torch.tensor([1.5, -2.0], dtype=torch.float64)}, tmp_path / "pt.safetensors")
    assert safe_load(tmp_path / "pt.safetensors")["b"].numpy().tolist() == [1.5, -2.0]


def test_damaged_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.safetensors"
    safe_save({"a": Tensor.ones(4)}, path)
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(ValueError, match="is not a valid safetensors file"):
        safe_load(path)


def test_each_refusal_has_its_own_type(tmp_path: Path) -> None:
    """Bad input is a SafetensorsError (FileTooLarge, ChecksumMismatch) or a StateMismatch, each a ValueError, so a
    caller (the CLI) tells them from a ValueError that is a bug; the optimizer state of a checkpoint is never read when
    keys= asks for the model's tensors only."""
    path = tmp_path / "c.safetensors"
    safe_save({"model.w": Tensor.ones(4), "optimizer.m": Tensor.zeros(1 << 19)}, path)
    with Context(MAX_FILE_MB=1), pytest.raises(FileTooLarge, match="is too large: loading it reads 2.0 MiB"):
        safe_load(path, device="CPU")
    with Context(MAX_FILE_MB=1):
        assert safe_load(path, device="CPU", keys=["model.w"])["model.w"].numpy().tolist() == [1.0] * 4
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1  # NOTE: the last byte of optimizer.m
    path.write_bytes(bytes(raw))
    with pytest.raises(ChecksumMismatch, match="tensor 'optimizer.m' does not match its checksum"):
        safe_load(path, device="CPU")
    assert safe_load(path, device="CPU", keys=["model.w"])["model.w"].numpy().tolist() == [1.0] * 4
    os.mkfifo(tmp_path / "pipe.safetensors")
    for bad in (tmp_path / "pipe.safetensors", tmp_path / "none.safetensors", tmp_path):
        with pytest.raises(SafetensorsError):
            safe_load_metadata(bad)
    with pytest.raises(StateMismatch, match="missing key"):
        load_state_dict(Tiny("CPU"), {})
    assert issubclass(SafetensorsError, ValueError) and issubclass(StateMismatch, ValueError)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_weights_holding_nan_or_infinity_are_refused_with_or_without_checksums(tmp_path: Path, dtype: str) -> None:
    """Weights another tool wrote (no checksums), or whose checksums were written again over NaN, loaded and gave p=nan
    with exit 0; now the tensor is named, its whole numbers untouched, the DISK device and finite=False (init's own
    check, with its place in the spec) still read them as they are."""
    w = np.arange(12, dtype=dtype).reshape(3, 4)
    w[2, 1], w[0, 3] = np.nan, -np.inf
    save_file({"a": np.ones(3, dtype), "b": w, "n": np.array([7], np.int64)}, tmp_path / "lib.safetensors")
    safe_save({"b": Tensor(w)}, tmp_path / "sg.safetensors")
    for path in (tmp_path / "lib.safetensors", tmp_path / "sg.safetensors"):
        with pytest.raises(NonFinite, match=r"tensor 'b' holds NaN or infinity \(2 of its 12 values\), which training "
                           "never writes") as e:  # fmt: skip
            safe_load(path, device="CPU")
        assert isinstance(e.value, SafetensorsError) and str(e.value).startswith(f"{path}: ")
        assert np.isnan(safe_load(path, device="CPU", finite=False)["b"].numpy()[2, 1])
        assert safe_load(path, device="disk")["b"].shape == (3, 4)
    loaded = safe_load(tmp_path / "lib.safetensors", device="CPU", keys=["a", "n"])
    assert loaded["a"].numpy().tolist() == [1.0] * 3 and loaded["n"].numpy().tolist() == [7]


# *** safetensors on the DISK device, and files that are not what they claim ***


def safetensors_bytes(header: dict, data: bytes, pad: bytes = b"") -> bytes:
    """A safetensors file by hand: 8 bytes of header length, the JSON header (plus `pad`), then the data."""
    text = json.dumps(header).encode() + pad
    return struct.pack("<Q", len(text)) + text + data


def f32(shape: list[int], begin: int, end: int, dtype: str = "F32") -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_disk_tensors_read_what_the_safetensors_library_reads(tmp_path: Path, device: str, dtype: str) -> None:
    rng = np.random.default_rng(2)
    arrays = {"m": (rng.standard_normal((3, 5)) * 50).astype(dtype), "s": np.array(rng.standard_normal() * 9, dtype),
              "none": np.zeros((0, 4), dtype=dtype)}  # fmt: skip
    save_file(arrays, tmp_path / "f.safetensors")
    reference = load_file(tmp_path / "f.safetensors")
    disk = safe_load(tmp_path / "f.safetensors", device="disk")
    assert {t.device for t in disk.values()} == {f"DISK:{tmp_path / 'f.safetensors'}"}
    for k, t in disk.items():
        assert (t.shape, t.dtype) == (reference[k].shape, dtypes.from_np(reference[k].dtype))
        np.testing.assert_array_equal(t.to(device).numpy(), reference[k])  # a float16 on GPU skips (no half)
    np.testing.assert_array_equal(disk["m"].shrink(((1, 3), (2, 4))).to(device).numpy(), reference["m"][1:3, 2:4])
    loaded = safe_load(tmp_path / "f.safetensors", device=device)
    assert list(loaded) == list(disk) and all(t.device == device for t in loaded.values())
    for k, t in loaded.items():
        np.testing.assert_array_equal(t.numpy(), reference[k])


def test_unaligned_data_reads_right(tmp_path: Path, device: str) -> None:
    """The safetensors library pads its header to 8 bytes; a file that does not still loads (float64 at odd offsets)."""
    data = np.arange(6, dtype=np.float64) * 1.5
    raw = safetensors_bytes({"x": f32([2, 3], 0, 48, "F64")}, data.tobytes(), pad=b" ")
    assert (len(raw) - 48) % 8 != 0
    (tmp_path / "odd.safetensors").write_bytes(raw)
    np.testing.assert_array_equal(load_file(tmp_path / "odd.safetensors")["x"], data.reshape(2, 3))
    disk = safe_load(tmp_path / "odd.safetensors", device="disk")["x"]
    np.testing.assert_array_equal(disk.to(device).numpy(), data.reshape(2, 3))
    np.testing.assert_array_equal(disk.permute(1, 0).to(device).numpy(), data.reshape(2, 3).T)


def test_load_state_dict_copies_disk_tensors_to_each_model_tensor_device(tmp_path: Path, device: str) -> None:
    src = Tiny("CPU")
    load_state_dict(src, {"layers.0": Tensor(np.arange(6.0).reshape(2, 3)), "layers.1.b": Tensor([1.0, 2.0, 3.0]),
                          "scale": Tensor([7.0])})  # fmt: skip
    safe_save(get_state_dict(src), tmp_path / "tiny.safetensors")
    m = Tiny(device)
    Tensor.corealize(get_parameters(m))
    buf = m.layers[0].lazydata.base.realized
    load_state_dict(m, safe_load(tmp_path / "tiny.safetensors", device="disk"))
    assert m.layers[0].device == device and m.layers[0].lazydata.base.realized is buf
    assert m.layers[0].numpy().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and m.scale.item() == 7.0
    assert m.layers[1]["b"].numpy().tolist() == [1.0, 2.0, 3.0]


def mapped(path: Path) -> bool:
    """Whether this process has `path` mapped (Linux's /proc/self/maps)."""
    return str(path) in Path("/proc/self/maps").read_text()


def test_one_key_of_a_huge_file_reads_only_that_key(tmp_path: Path, device: str) -> None:
    """A 1 TiB safetensors file (sparse, so it takes no space) cannot be read whole here: a disk load maps it, and a
    model with one of its keys loads that key, allocating nothing near the file's size."""
    if not Path("/proc/self/maps").exists():
        pytest.skip("needs Linux's /proc/self/maps to see the mapping")
    n = 2**38  # float32s: 1 TiB
    small = np.array([[0.5, -1.0], [2.0, 3.5]], dtype=np.float32)
    head = safetensors_bytes({"huge": f32([n], 0, 4 * n), "w": f32([2, 2], 4 * n, 4 * n + 16)}, b"")
    path = tmp_path / "huge.safetensors"
    with open(path, "wb") as f:
        f.write(head)
        try:
            f.truncate(len(head) + 4 * n)
        except OSError as e:
            pytest.skip(f"this filesystem cannot hold a sparse 1 TiB file: {e}")
        f.seek(len(head) + 4 * n)
        f.write(small.tobytes())

    class One:
        def __init__(self) -> None:
            self.w = Tensor.zeros(2, 2, device=device).contiguous().realize()

    model = One()
    tracemalloc.start()
    try:
        disk = safe_load(path, device="disk")
        assert mapped(path) and disk["huge"].shape == (n,)
        load_state_dict(model, {"w": disk["w"]})
        tail = disk["huge"].shrink(((n - 3, n),)).to(device).numpy()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(model.w.numpy(), small)
    np.testing.assert_array_equal(tail, np.zeros(3, dtype=np.float32))
    # NOTE: 64 MiB, not 1: lowering and compiling a kernel not yet cached allocates a few MiB of Python objects
    assert peak < 64 * 2**20, f"loading 16 bytes of a 1 TiB file allocated {peak} bytes"
    del disk
    gc.collect()
    assert not mapped(path), "the mapping outlives the disk tensors"


def test_a_compute_device_load_leaves_no_mapping_behind(tmp_path: Path) -> None:
    if not Path("/proc/self/maps").exists():
        pytest.skip("needs Linux's /proc/self/maps to see the mapping")
    safe_save({"a": Tensor(np.arange(4.0, dtype=np.float32))}, tmp_path / "a.safetensors")
    loaded = safe_load(tmp_path / "a.safetensors", device="CPU")
    gc.collect()
    assert not mapped(tmp_path / "a.safetensors") and loaded["a"].numpy().tolist() == [0.0, 1.0, 2.0, 3.0]


# fmt: off
GOOD = {"a": f32([2], 0, 8), "b": f32([1], 8, 12)}
HOSTILE: dict[str, tuple[bytes, str]] = {
    "truncated": (safetensors_bytes(GOOD, bytes(12))[:-3], r"tensor 'b' ends at data byte 12, past the end of the "
                  r"file \(9 bytes of data\): is the file truncated\?"),
    "too short": (b"\x05\x00\x00", "it has 3 bytes, fewer than the 8 that give the header's length"),
    "header length past the end": (struct.pack("<Q", 500) + b"{}", r"its header length 500 runs past the end of "
                                   r"the file \(10 bytes\)"),
    "header length huge": (struct.pack("<Q", 2**63) + b"{}", "is more than the 100000000 bytes safetensors allows"),
    "offsets past the end": (safetensors_bytes({"a": f32([2], 0, 8), "b": f32([1], 1000, 1004)}, bytes(12)),
                             "tensor 'b' ends at data byte 1004, past the end of the file"),
    "overlapping": (safetensors_bytes({"a": f32([2], 0, 8), "b": f32([1], 4, 8)}, bytes(8)),
                    r"tensor 'b' at data bytes \[4, 8\) overlaps the tensor before it"),
    "gap": (safetensors_bytes({"a": f32([1], 4, 8)}, bytes(8)), r"leaves bytes \[0, 4\) unused"),
    "bytes after the data": (safetensors_bytes(GOOD, bytes(20)), "its tensors end at data byte 12, but 8 more"),
    "size differs from shape": (safetensors_bytes({"a": f32([3], 0, 8)}, bytes(8)),
                                r"tensor 'a' of shape \(3,\) and dtype F32 needs 12 bytes, its data_offsets give 8"),
    "unknown dtype": (safetensors_bytes({"a": f32([2], 0, 8, "Q7")}, bytes(8)),
                      "tensor 'a' has dtype 'Q7', which specgrad cannot load"),
    "bfloat16": (safetensors_bytes({"a": f32([4], 0, 8, "BF16")}, bytes(8)),
                 "tensor 'a' has dtype 'BF16', which specgrad cannot load"),
    "negative size": (safetensors_bytes({"a": f32([-2], 0, 8)}, bytes(8)), r"has shape \[-2\], not a list of at"),
    "65 dims": (safetensors_bytes({"a": f32([1] * 65, 0, 4)}, bytes(4)), r"not a list of at most 64 sizes"),
    "dtype not a string": (safetensors_bytes({"a": {"dtype": [], "shape": [], "data_offsets": [0, 0]}}, b""),
                           r"tensor 'a' has dtype \[\], which specgrad cannot load"),
    "long name": (safetensors_bytes({"x" * 10**6: f32([9], 0, 4)}, bytes(4)), r"tensor 'xxxx.*x\.\.\. of shape"),
    "reversed offsets": (safetensors_bytes({"a": f32([0], 8, 0)}, bytes(8)), r"not \[begin, end\] with begin <= end"),
    "entry not an object": (safetensors_bytes({"a": [1, 2]}, b""), "tensor 'a' needs dtype, shape and data_offsets"),
    "header not JSON": (struct.pack("<Q", 4) + b"{no}", "its header is not valid JSON"),
    "header not UTF-8": (struct.pack("<Q", 4) + b"\xff\xfe{}", "its header is not valid JSON"),
    "header nested too deep": (struct.pack("<Q", 200000) + b"[" * 200000, "its header is not valid JSON"),
    "header a list": (struct.pack("<Q", 2) + b"[]", "its header is a JSON list, not an object"),
    "metadata not strings": (safetensors_bytes({"__metadata__": {"k": 1}}, b""), "its __metadata__ is not an object"),
    "duplicate name": (struct.pack("<Q", 24) + b'{"a":"x", "a":"y"}      ', "duplicate key 'a'"),
}
# fmt: on


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_file_is_one_value_error_naming_it(tmp_path: Path, case: str) -> None:
    raw, what = HOSTILE[case]
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(raw)
    for read in (lambda: safe_load(path, device="disk"), lambda: safe_load(path, device="CPU"),
                 lambda: safe_load_metadata(path)):  # fmt: skip
        with pytest.raises(ValueError, match=what) as e:
            read()
        assert str(e.value).startswith(f"{path} is not a valid safetensors file: ")
    if case != "duplicate name":  # NOTE: the library keeps the last of two equal names; specgrad refuses the file
        with pytest.raises(Exception):  # noqa: B017 (its error types vary: SafetensorError, KeyError for BF16)
            load(raw)
    assert path.read_bytes() == raw and [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_path_that_is_not_a_file_is_a_value_error(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # NOTE: opened without O_NONBLOCK, reading a FIFO waits for a writer forever
    for path, what in [(tmp_path / "missing", "no such file"), (tmp_path, "is a directory, not a regular file"),
                       (fifo, "is a FIFO, not a regular file")]:  # fmt: skip
        for device in ("disk", "CPU"):
            with pytest.raises(ValueError, match=what) as e:
                safe_load(path, device=device)
            assert str(path) in str(e.value)


def test_random_damage_is_refused_or_read_as_the_library_reads_it(tmp_path: Path) -> None:
    """Seeded damage to a good file (bytes changed in the header, cut short, a wrong header length): specgrad refuses
    it with a ValueError exactly when the safetensors library refuses it, and otherwise reads the same values."""
    good = Path(tmp_path / "good.safetensors")
    save_file({"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array([1, -2], dtype=np.int64)}, good)
    raw, rng, agreed = good.read_bytes(), np.random.default_rng(3), 0
    path = tmp_path / "damaged.safetensors"
    for _ in range(300):
        data = bytearray(raw)
        kind = rng.integers(3)
        if kind == 0:
            for i in rng.integers(8, 8 + int.from_bytes(raw[:8], "little"), size=rng.integers(1, 4)):
                data[i] = int(rng.integers(32, 127))
        elif kind == 1:
            data = data[: rng.integers(len(raw))]
        else:
            data[:8] = struct.pack("<Q", int.from_bytes(raw[:8], "little") + int(rng.integers(-9, 10)))
        path.write_bytes(bytes(data))
        try:
            ours = {k: t.numpy() for k, t in safe_load(path, device="disk").items()}
        except ValueError as e:
            if "duplicate key" not in str(e):  # NOTE: the one file specgrad refuses and the library reads
                with pytest.raises(Exception):  # noqa: B017 (SafetensorError, or KeyError for a dtype numpy lacks)
                    load(bytes(data))
            continue
        theirs = load(bytes(data))
        assert sorted(ours) == sorted(theirs)  # NOTE: the library's order varies (a hash map's)
        for k, v in theirs.items():
            np.testing.assert_array_equal(ours[k], v)
            assert ours[k].dtype == v.dtype
        agreed += 1
    assert agreed > 0  # NOTE: some damage (a changed name, a space) leaves a valid file; both readers must agree there


def test_disk_load_of_another_files_device_is_refused(tmp_path: Path) -> None:
    safe_save({"a": Tensor([1.0])}, tmp_path / "a.safetensors")
    with pytest.raises(ValueError, match="on its own disk device"):
        safe_load(tmp_path / "a.safetensors", device=f"disk:{tmp_path / 'other'}")
    assert safe_load(tmp_path / "a.safetensors", device=f"disk:{tmp_path / 'a.safetensors'}")["a"].numpy() == [1.0]
