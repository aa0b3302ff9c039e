"""Hostile files for the corpus: YAML bombs, damaged and lying safetensors, zip bombs, .npy files with huge headers,
checkpoints with a flipped bit or edited metadata, kernel caches that are not only yours. Each is bytes, a string,
or a harness.Made that builds the file where the case plants it."""

from __future__ import annotations

import functools
import io
import json
import os
import stat
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save, save_file

from tests.hostile.harness import SECRET, Assets, Made

HEAD = "specgrad: 1\nname: t\ninput: {shape: [2]}\nmodel: [{linear: 2}]\n"
GRAPH = "specgrad: 1\nname: t\ninputs: {x: {shape: [2]}}\nmodel:\n  graph:\n    - {name: %s, layer: linear, out: 2, from: x}\n  outputs: [%s]\n"  # noqa: E501
MIB = 1 << 20


def graph_named(name: str) -> str:
    """A graph spec with one node called `name` (a JSON string, so any character can be written)."""
    quoted = json.dumps(name)
    return GRAPH % (quoted, quoted)


# *** YAML ***


def billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 "lol"']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return HEAD + "vars:\n" + "".join(f"  {line}\n" for line in lines)


def long_string_alias(chars: int = 100_000, copies: int = 100) -> str:
    """A 100 KB spec whose aliases make 10 MB of text."""
    return HEAD + f"description: &s {'x' * chars}\nexport: [{', '.join(['*s'] * copies)}]\n"


def aliased_arithmetic(copies: int = 20_000) -> str:
    """One expression of 40 terms anchored once and aliased `copies` times."""
    expr = " + ".join(["$d"] * 40)
    uses = ", ".join(f"v{i}: *e" for i in range(copies))
    head = HEAD.replace("model: [{linear: 2}]\n", "")
    return head + f"vars: {{d: 1}}\nmodel: [{{linear: &e '{expr}'}}]\nextra: {{{uses}}}\n"


def nested_repeat(repeat: int = 1000) -> str:
    """A block of `repeat` copies of a block, repeated `repeat` times: a million layers."""
    return f"""specgrad: 1
name: t
inputs: {{x: {{shape: [4]}}}}
blocks:
  inner: {{graph: [{{name: out, layer: relu, from: in}}]}}
  outer: {{graph: [{{name: out, block: inner, repeat: {repeat}, from: in}}]}}
model:
  graph:
    - {{name: body, block: outer, repeat: {repeat}, from: x}}
  outputs: [body]
"""


def deep_nesting(depth: int = 10_000) -> str:
    return HEAD + "vars:\n  deep: " + "[" * depth + "]" * depth + "\n"


def one_long_line(size: int = 1 << 20) -> str:
    return HEAD + "description: " + "x" * size + "\n"


def extends_chain(depth: int = 3000) -> Made:
    """spec.yaml extends s1.yaml extends s2.yaml ... extends s<depth>.yaml."""

    def make(path: Path, assets: Assets) -> None:
        folder = path.parent
        path.write_text(HEAD + "extends: s1.yaml\n")
        for i in range(1, depth):
            (folder / f"s{i}.yaml").write_text(f"specgrad: 1\nextends: s{i + 1}.yaml\n")
        (folder / f"s{depth}.yaml").write_text(HEAD)

    return Made(make)


def long_line_with_secret(prefix: str = "") -> str:
    """A line that is not a mapping, whose end (past any excerpt's 60 characters) holds the secret."""
    return prefix + "- " + "y" * 200 + SECRET + "\n"


# *** data files ***


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def npy_huge_header(header_bytes: int = 1_000_000) -> bytes:
    """A version 2.0 .npy whose header (a valid dict, padded with spaces) is `header_bytes` long."""
    head = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }"
    head = head + " " * (header_bytes - len(head) - 1) + "\n"
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(head)) + head.encode() + bytes(8)


def npz(**members: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def png(width: int = 2, height: int = 2, rows: bytes | None = None) -> bytes:
    """A grayscale 8-bit PNG of width x height: its header says the size, `rows` (each a filter byte and its pixels,
    zeros by default) are its compressed data. A huge size with few rows is a decompression bomb."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = rows if rows is not None else bytes((width + 1) * height)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))  # fmt: skip


@functools.lru_cache(maxsize=1)
def zip_bomb(unpacked_mib: int = 256) -> bytes:
    """A .npz whose array x.npy unpacks to `unpacked_mib` MiB of zeros from about a thousandth of that."""
    header = _npy_header((unpacked_mib * MIB // 8, 2))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        with z.open("x.npy", "w", force_zip64=True) as m:
            m.write(header)
            chunk = bytes(MIB)
            for _ in range(unpacked_mib):
                m.write(chunk)
        z.writestr("y.npy", npy_bytes(np.zeros(4, np.int64)))
    return buf.getvalue()


def _npy_header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    head = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    pad = 64 - (10 + len(head) + 1) % 64
    head = head + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode()


def lying_zip_directory() -> bytes:
    """A .npz whose zip directory says x.npy unpacks to almost 4 GiB."""
    data = bytearray(npz(**{"x.npy": npy_bytes(np.zeros((4, 2), np.float32)), "y.npy": npy_bytes(np.zeros(4))}))
    first = data.find(b"PK\x01\x02")  # NOTE: the central directory's entry for x.npy
    assert first != -1
    struct.pack_into("<I", data, first + 24, 0xFFFFFFFF - 1)  # NOTE: the uncompressed size field of the entry
    return bytes(data)


def many_members(count: int = 300) -> bytes:
    return npz(**{f"a{i}.npy": npy_bytes(np.zeros(1)) for i in range(count)})


def pickled_npz() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, x=np.array([{"a": 1}, None], dtype=object), y=np.zeros(2))
    return buf.getvalue()


# *** safetensors ***


def safetensors_bytes(header: dict | bytes, data: bytes = b"") -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def huge_safetensors(nbytes: int = 10 << 30, name: str = "steps.0.1.weight", shape: list[int] | None = None) -> Made:
    """A sparse safetensors file whose one tensor takes `nbytes` (its header honest, its data holes); `shape` is
    its shape when it is not flat."""

    def make(path: Path, assets: Assets) -> None:
        dims = shape or [nbytes // 4]
        header = json.dumps({name: {"dtype": "F32", "shape": dims, "data_offsets": [0, nbytes]}}).encode()
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
            f.truncate(8 + len(header) + nbytes)

    return Made(make)


def other_model_weights() -> bytes:
    """Weights of another model: other names, other shapes."""
    tensors = {"steps.0.1.weight": np.zeros((3, 5), np.float32), "steps.9.1.bias": np.zeros(3, np.float32)}
    return save(tensors, metadata={"task": "classify"})


def remeta(asset: str, inner: str = "", **changes: str) -> Made:
    """A copy of an asset's safetensors file (`inner`: a path inside a folder asset) with metadata keys changed; its
    tensors and their checksums are unchanged."""

    def make(path: Path, assets: Assets) -> None:
        src = assets.path(asset) / inner if inner else assets.path(asset)
        with safe_open(str(src), "np") as f:
            meta = dict(f.metadata())
        meta.update(changes)
        if os.path.lexists(path):
            path.unlink()
        save_file(load_file(str(src)), str(path), metadata=meta)

    return Made(make)


def flip_bit(in_tensor: str | None = None, bit: int = 0) -> Made:
    """Flip one bit of the tensor data of the (already planted) safetensors file at the path: in the tensor named
    `in_tensor`, else the first byte of the data."""

    def make(path: Path, assets: Assets) -> None:
        raw = bytearray(path.read_bytes())
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8 : 8 + n])
        offset = header[in_tensor]["data_offsets"][0] if in_tensor else 0
        raw[8 + n + offset] ^= 1 << bit
        path.write_bytes(bytes(raw))

    return Made(make)


def truncate(keep: int) -> Made:
    def make(path: Path, assets: Assets) -> None:
        path.write_bytes(path.read_bytes()[:keep])

    return Made(make)


def rewrite(text: str) -> Made:
    """Replace the (already planted) file at the path with `text`, placeholders left as they are."""

    def make(path: Path, assets: Assets) -> None:
        if os.path.lexists(path):
            path.unlink()
        path.write_text(text)

    return Made(make)


def socket_file() -> Made:
    def make(path: Path, assets: Assets) -> None:
        import socket

        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind(str(path))
        finally:
            s.close()

    return Made(make)


# *** kernel caches ***


def cache_entries(path: Path) -> list[Path]:
    return [Path(folder) / f for folder, _, files in os.walk(path) for f in files]


def chmod_cache(folder_mode: int | None = None, entry_mode: int | None = None) -> Made:
    """The (already planted) cache with its folders or its entries made writable by others."""

    def make(path: Path, assets: Assets) -> None:
        for p in cache_entries(path):
            if entry_mode is not None:
                p.chmod(entry_mode)
        if folder_mode is not None:
            for folder, dirs, _ in os.walk(path):
                for d in dirs:
                    (Path(folder) / d).chmod(folder_mode)

    return Made(make)


def chown_cache(uid: int = 4242) -> Made:
    def make(path: Path, assets: Assets) -> None:
        for folder, dirs, files in os.walk(path):
            for name in dirs + files:
                os.lchown(Path(folder) / name, uid, uid)
        os.lchown(path, uid, uid)

    return Made(make)


def replace_entries(kind: str) -> Made:
    """Each entry of the (already planted) cache replaced: by a FIFO, a link to a file outside, or garbage."""

    def make(path: Path, assets: Assets) -> None:
        entries = cache_entries(path)
        assert entries, f"the warmed cache {path} holds no entries"
        for p in entries:
            mode = stat.S_IMODE(p.stat().st_mode)
            p.unlink()
            if kind == "fifo":
                os.mkfifo(p, 0o600)
            elif kind == "link":
                p.symlink_to(path.parent.parent / "outside" / "secret.txt")
            else:
                p.write_bytes(b"\x7fELF garbage " + SECRET.encode())
                p.chmod(mode)

    return Made(make)
