"""Model state: finding a model's tensors by attribute path, loading a state into them, safetensors files.

A model is a plain Python object; its state is every Tensor reachable through attributes, lists, tuples and dicts,
named by the path to it ("layers.0.weight"). Files are written through the safetensors library and read by the parser
here, which checks the whole header before any tensor is made, over the file mapped on the DISK device. Every file
safe_save writes carries a sha256 of each tensor in its metadata (CHECKSUM_KEY), and loading a tensor onto a compute
device checks it: a changed bit is a ChecksumMismatch naming the file; NaN or infinity in a floating-point tensor
is a NonFinite naming the tensor, checksums or not. A file that cannot be used is a SafetensorsError
(a ValueError), a state that does not fit its model a StateMismatch: bad input, each its own type, so a caller can tell
them from a bug. Imports device, dtype, flags, helpers, lazy, ops and tensor.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from safetensors.numpy import save

from specgrad.device import Buffer, Device
from specgrad.dtype import DType, dtypes
from specgrad.flags import MAX_FILE_MB
from specgrad.helpers import atomic_write, prod
from specgrad.lazy import LazyBuffer
from specgrad.ops import LoadOps
from specgrad.tensor import Tensor


class SafetensorsError(ValueError):
    """A file safe_load or safe_load_metadata cannot use as it is: missing or not a regular file, not a valid
    safetensors file, or (the subclasses) too large to load or damaged. The message names the file."""


class FileTooLarge(SafetensorsError):
    """Loading would read more than MAX_FILE_MB of tensors; nothing was read."""


class ChecksumMismatch(SafetensorsError):
    """A tensor's bytes differ from the sha256 specgrad wrote beside them (or the checksums themselves are damaged)."""


class NonFinite(SafetensorsError):
    """A floating-point tensor holds NaN or infinity: what training never writes (it stops when the loss is not
    finite), and what would make every output NaN; checked whether or not the file carries checksums."""


class StateMismatch(ValueError):
    """load_state_dict: the state's keys or shapes do not fit the model; the message lists every problem, one a line."""


def get_state_dict(obj: Any, prefix: str = "") -> dict[str, Tensor]:
    """Every Tensor reachable from `obj`, keyed by its attribute path, in definition order."""
    if isinstance(obj, Tensor):
        return {prefix.rstrip("."): obj}
    if isinstance(obj, (list, tuple)):
        return {k: v for i, x in enumerate(obj) for k, v in get_state_dict(x, f"{prefix}{i}.").items()}
    if isinstance(obj, dict):
        return {k: v for name, x in obj.items() for k, v in get_state_dict(x, f"{prefix}{name}.").items()}
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return get_state_dict(vars(obj), prefix)
    return {}


def get_parameters(obj: Any) -> list[Tensor]:
    """The distinct Tensors of a model (a tensor reachable by two paths is listed once)."""
    return list({id(t): t for t in get_state_dict(obj).values()}.values())


def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True) -> None:
    """Copy `state_dict` into the model's tensors in place (cast to each tensor's dtype and device). Strict: every
    key must match; any missing, unexpected or wrongly shaped key is reported, all of them in one StateMismatch."""
    own = get_state_dict(model)
    problems = [f"wrong shape for {k}: the model has {own[k].shape}, the state has {v.shape}"
                for k, v in state_dict.items() if k in own and tuple(own[k].shape) != tuple(v.shape)]  # fmt: skip
    if strict:
        problems += [f"missing key {k} (shape {t.shape})" for k, t in own.items() if k not in state_dict]
        problems += [f"unexpected key {k} (shape {v.shape})" for k, v in state_dict.items() if k not in own]
    if problems:
        raise StateMismatch("state dict does not fit the model:\n  " + "\n  ".join(problems))
    updated = [own[k].assign(v.to(own[k].device).cast(own[k].dtype)) for k, v in state_dict.items() if k in own]
    Tensor.corealize(updated)


def safe_save(tensors: dict[str, Tensor], path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write tensors as a safetensors file, atomically: a crash leaves the old file or the new one, never half. The
    metadata gets CHECKSUM_KEY, a sha256 of each tensor (replacing any given), which safe_load verifies."""
    save_arrays(snapshot(tensors), path, metadata)


def snapshot(tensors: dict[str, Tensor]) -> dict[str, np.ndarray]:
    """The tensors' values now, as numpy arrays of their own (later writes to the tensors do not reach them)."""
    return {k: np.array(t.numpy(), order="C") for k, t in tensors.items()}  # NOTE: keeps 0-d arrays 0-d


def save_arrays(arrays: dict[str, np.ndarray], path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """safe_save of a snapshot."""
    atomic_write(path, safetensors_bytes(arrays, metadata))


def safetensors_bytes(arrays: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> bytes:
    """The safetensors file safe_save writes, as bytes."""
    sums = {k: tensor_sha256(a.dtype.name, a.shape, a.astype(a.dtype.newbyteorder("<"), copy=False)) for k, a in
            arrays.items()}  # fmt: skip
    return save(arrays, metadata={**(metadata or {}), CHECKSUM_KEY: json.dumps(sums, sort_keys=True)})


def safe_load_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The text metadata stored in a safetensors file's header (a SafetensorsError when it has none to give)."""
    return _Mapped(path).metadata


def safe_load(path: str | os.PathLike, device: str | None = None, keys: Iterable[str] | None = None,
              finite: bool = True) -> dict[str, Tensor]:  # fmt: skip
    """Read a safetensors file (written by specgrad, the safetensors library or PyTorch) into Tensors on `device`; only
    the tensors named in `keys` when given (the others' bytes are never read). On a compute device, the bytes read are
    at most MAX_FILE_MB (else FileTooLarge), each tensor is checked against the file's CHECKSUM_KEY (else
    ChecksumMismatch; a file without one, written by another tool or an older specgrad, loads unchecked) and, with
    `finite`, each floating-point tensor holds finite numbers only (else NonFinite, with or without checksums). With
    device="disk" the tensors stay in the file (mapped read-only): nothing is read, or checked, until a tensor is
    copied. A file that cannot be used is a SafetensorsError naming it."""
    f = _Mapped(path)
    target = Device.canonicalize(device) if device is not None else Device.DEFAULT
    if target.startswith("DISK") and target not in ("DISK", f.device):
        raise ValueError(f"safe_load gives the tensors of {path} on its own disk device {f.device}, not {target}")
    entries = f.entries
    if keys is not None:
        keys = list(keys)
        if missing := [k for k in keys if k not in entries]:
            raise SafetensorsError(f"{path} has no tensor {_short(missing[0])} (it has {len(entries)})")
        entries = {k: entries[k] for k in keys}
    if target.startswith("DISK"):
        return {k: f.tensor(e) for k, e in entries.items()}
    f.check_size(entries.values())
    f.verify(entries.values())
    if finite:
        f.check_finite(entries.values())
    ret = {k: f.tensor(e).to(target) for k, e in entries.items()}
    Tensor.corealize(list(ret.values()))
    return ret


# *** checksums: a sha256 per tensor, over its dtype, shape and bytes (little-endian, C order) ***

CHECKSUM_KEY = "tensors_sha256"  # NOTE: metadata key: JSON {tensor name: hex sha256}
MIB = 1 << 20


def tensor_sha256(dtype: str, shape: tuple[int, ...], data: np.ndarray) -> str:
    """The checksum of one tensor: `dtype` is its numpy name, `data` its elements or its bytes (C order)."""
    h = hashlib.sha256(f"{dtype} {list(shape)}\n".encode())
    h.update(np.ascontiguousarray(data).reshape(-1).view(np.uint8))
    return h.hexdigest()


# *** reading safetensors: 8 bytes of header length (little-endian), a JSON header, then the tensors' bytes ***

SAFETENSORS_DTYPES: dict[str, DType] = {
    "BOOL": dtypes.bool, "U8": dtypes.uint8, "I8": dtypes.int8, "I16": dtypes.int16, "U16": dtypes.uint16,
    "I32": dtypes.int32, "U32": dtypes.uint32, "I64": dtypes.int64, "U64": dtypes.uint64,
    "F16": dtypes.float16, "F32": dtypes.float32, "F64": dtypes.float64,
}  # fmt: skip
MAX_HEADER = 100_000_000  # bytes; the safetensors library's own limit
MAX_DIMS = 64  # numpy's limit
FINITE_CHUNK = 1 << 22  # NOTE: values checked for NaN at once: a 16 MiB float32 slice, a 4 MiB mask


@dataclass(frozen=True)
class SafeEntry:
    """One tensor of a safetensors header; `begin` and `end` are byte offsets into the data after the header."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    begin: int
    end: int


class _Mapped:
    """A safetensors file mapped on its DISK device, its header checked whole: every problem is one SafetensorsError
    naming the file, raised before any tensor is made; nothing is read beyond the header until a tensor is used."""

    def __init__(self, path: str | os.PathLike):
        self.path = path
        self.device = Device.canonicalize(f"disk:{os.fspath(path)}")
        self.allocator: Any = Device[self.device].allocator
        try:
            self.data = self.allocator.open()
        except ValueError as e:  # NOTE: map_file's own words: no such file, cannot open it, not a regular file
            raise SafetensorsError(str(e)) from None
        self.start, entries, self.metadata = parse_safetensors_header(self.allocator.path, self.data)
        self.entries = {e.name: e for e in entries}  # NOTE: in file order

    def bytes(self, e: SafeEntry) -> np.ndarray:
        return self.data[self.start + e.begin : self.start + e.end]

    def tensor(self, e: SafeEntry) -> Tensor:
        region = self.allocator.region(self.data, self.start + e.begin, e.end - e.begin)
        lb = LazyBuffer.loadop(LoadOps.EMPTY, e.shape, e.dtype, self.device)
        lb.realized = Buffer(self.device, prod(e.shape), e.dtype, opaque=region)
        return Tensor(lb, device=self.device)

    def check_size(self, entries: Iterable[SafeEntry]) -> None:
        """At most MAX_FILE_MB of tensors are read, and that is checked before any is."""
        size, limit = sum(e.end - e.begin for e in entries), int(MAX_FILE_MB) * MIB
        if size > limit:
            raise FileTooLarge(f"{self.path} is too large: loading it reads {size / MIB:,.1f} MiB, over the limit of "
                               f"{int(MAX_FILE_MB):,} MiB for a weights or checkpoint file (MAX_FILE_MB, the command "
                               "line's --max-file-mb)")  # fmt: skip

    def verify(self, entries: Iterable[SafeEntry]) -> None:
        """Each tensor's bytes against the file's checksums, when it has them."""
        if CHECKSUM_KEY not in self.metadata:
            return
        damaged = ChecksumMismatch(f"{self.path} is damaged: its {CHECKSUM_KEY} metadata is not a checksum of each "
                                   "of its tensors")  # fmt: skip
        try:
            sums = json.loads(self.metadata[CHECKSUM_KEY])
        except (ValueError, RecursionError):
            raise damaged from None
        if not isinstance(sums, dict) or set(sums) != set(self.entries):
            raise damaged
        for e in entries:
            if tensor_sha256(e.dtype.name, e.shape, self.bytes(e)) != sums[e.name]:
                raise ChecksumMismatch(f"{self.path} is damaged: tensor {_short(e.name)} does not match its checksum "
                                       "(its bytes changed after specgrad wrote them)")  # fmt: skip

    def check_finite(self, entries: Iterable[SafeEntry]) -> None:
        """Each floating-point tensor holds no NaN or infinity, read from the mapped file a chunk at a time (bounded
        memory for a large tensor); the first tensor that does is named, with how many of its values."""
        for e in entries:
            if not dtypes.is_float(e.dtype):
                continue
            values = self.bytes(e).view(np.dtype(e.dtype.np).newbyteorder("<"))
            bad = sum(int(np.count_nonzero(~np.isfinite(values[i : i + FINITE_CHUNK])))
                      for i in range(0, values.size, FINITE_CHUNK))  # fmt: skip
            if bad:
                raise NonFinite(f"{self.path}: tensor {_short(e.name)} holds NaN or infinity ({bad:,} of its "
                                f"{values.size:,} values), which training never writes")  # fmt: skip


def parse_safetensors_header(path: str, data: np.ndarray) -> tuple[int, list[SafeEntry], dict[str, str]]:
    """Where the data starts, the entries (sorted by offset) and the metadata of a safetensors file's bytes, checked
    as the safetensors library checks them: the header fits in the file, every dtype and shape is valid, and the
    tensors tile the data exactly (no gap, no overlap, nothing past the end or after it). Duplicate names are refused
    too (the library keeps the last)."""

    def bad(what: str) -> SafetensorsError:
        return SafetensorsError(f"{path} is not a valid safetensors file: {what}")

    if data.size < 8:
        raise bad(f"it has {data.size} bytes, fewer than the 8 that give the header's length")
    n = int.from_bytes(bytes(data[:8]), "little")
    if n > MAX_HEADER:
        raise bad(f"its header length {n} is more than the {MAX_HEADER} bytes safetensors allows")
    if 8 + n > data.size:
        raise bad(f"its header length {n} runs past the end of the file ({data.size} bytes)")
    try:
        header = json.loads(bytes(data[8 : 8 + n]).decode("utf-8"), object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as e:
        raise bad(f"its header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise bad(f"its header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise bad("its __metadata__ is not an object of strings")
    size = data.size - 8 - n
    entries = sorted((_entry(bad, name, info, size) for name, info in header.items()), key=lambda e: (e.begin, e.end))
    pos = 0
    for e in entries:
        if e.begin != pos:
            where = "overlaps the tensor before it" if e.begin < pos else f"leaves bytes [{pos}, {e.begin}) unused"
            raise bad(f"tensor {e.name!r} at data bytes [{e.begin}, {e.end}) {where}")
        pos = e.end
    if pos != size:
        raise bad(f"its tensors end at data byte {pos}, but {size - pos} more bytes follow them")
    return 8 + n, entries, metadata


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    ret: dict[str, Any] = {}
    for k, v in pairs:
        if k in ret:
            raise ValueError(f"duplicate key {k!r}")
        ret[k] = v
    return ret


def _short(x: Any) -> str:
    """repr(x), cut to 80 characters: a hostile header's values can be megabytes long."""
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_sizes(x: Any) -> bool:
    return isinstance(x, list) and all(type(v) is int and v >= 0 for v in x)


def _entry(bad: Any, key: str, info: Any, size: int) -> SafeEntry:
    """One header entry, checked against the `size` bytes of data that follow the header."""
    name = _short(key)
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
        raise bad(f"tensor {name} needs dtype, shape and data_offsets")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in SAFETENSORS_DTYPES:
        raise bad(f"tensor {name} has dtype {_short(dtype)}, which specgrad cannot load (it loads "
                  f"{', '.join(SAFETENSORS_DTYPES)})")  # fmt: skip
    if not _is_sizes(shape) or len(shape) > MAX_DIMS:
        raise bad(f"tensor {name} has shape {_short(shape)}, not a list of at most {MAX_DIMS} sizes")
    if not _is_sizes(offsets) or len(offsets) != 2 or offsets[0] > offsets[1]:
        raise bad(f"tensor {name} has data_offsets {_short(offsets)}, not [begin, end] with begin <= end")
    begin, end = offsets
    if end > size:
        raise bad(f"tensor {name} ends at data byte {end}, past the end of the file ({size} bytes of data): is the "
                  "file truncated?")  # fmt: skip
    nbytes = prod(shape) * SAFETENSORS_DTYPES[dtype].itemsize
    if end - begin != nbytes:
        raise bad(f"tensor {name} of shape {tuple(shape)} and dtype {dtype} needs {nbytes} bytes, its data_offsets "
                  f"give {end - begin}")  # fmt: skip
    return SafeEntry(key, SAFETENSORS_DTYPES[dtype], tuple(shape), begin, end)
