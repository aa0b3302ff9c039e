"""Model state: state dicts, strict loading with named problems, safetensors files both ways."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from specgrad import Tensor, dtypes
from specgrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save


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
