"""The images source (data.source: images): one sub-folder of PNG or JPEG files per class, read through Pillow and the
reading policy, converted to the input's channels, sized by data.resize; every bad folder or file a located error."""

from __future__ import annotations

import builtins
import io
import json
import os
import struct
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.flags import Context
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import safe_load_metadata
from specgrad.train.data import load_data

Image = pytest.importorskip("PIL.Image")
runner = CliRunner()
CONV = "[{conv2d: {out: 4, kernel: 3, padding: 1}}, relu, flatten, {linear: 2}]"


def picture(path: Path, size: tuple[int, int] = (6, 4), mode: str = "RGB", value: int = 0) -> Path:
    """A small image of `size` (width, height): a horizontal ramp plus `value`, saved by its suffix's format."""
    w, h = size
    ramp = (np.arange(w)[None, :] * 20 + np.arange(h)[:, None] * 3 + value).clip(0, 255).astype(np.uint8)
    a = ramp if mode == "L" else np.stack([ramp, 255 - ramp, np.full_like(ramp, value)], axis=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(a, mode).save(path)
    return path


def folder(root: Path, classes: dict[str, int] | None = None, **kw) -> Path:
    """root/photos/<class>/<k>.png, `classes` class name -> how many images."""
    for name, n in (classes or {"cat": 5, "dog": 5}).items():
        for k in range(n):
            picture(root / "photos" / name / f"{k}.png", value=10 * k, **kw)
    return root / "photos"


def spec(root: Path, data: str = "", shape: str = "[3, 4, 6]", model: str = CONV, train: str = "{steps: 3}") -> Path:
    """A spec whose data section starts on line 6: source images, path photos, batch_size 2, then `data`."""
    text = f"specgrad: 1\nname: pics\ninput: {{shape: {shape}}}\nmodel: {model}\ntrain: {train}\ndata:\n"
    body = "source: images\npath: photos\nbatch_size: 2\n" + textwrap.dedent(data)
    path = root / "spec.yaml"
    path.write_text(text + textwrap.indent(body, "  "))
    return path


def messages(path: Path, overrides: tuple[str, ...] = ()) -> list[str]:
    with pytest.raises(SpecError) as e:
        load_data(validate_file(path, overrides))
    return [str(p) for p in e.value.problems]


def test_class_folders_are_the_classes(tmp_path: Path) -> None:
    folder(tmp_path, {"dog": 4, "cat": 3, "10": 2, "2": 2})
    ds = load_data(
        validate_file(spec(tmp_path, model=CONV.replace("linear: 2", "linear: 4")), ["data.normalize=false"])
    )
    assert ds.task == "classify" and ds.class_names == ["2", "10", "cat", "dog"] and ds.num_classes == 4
    assert ds.x_train.shape[1:] == (3, 4, 6) and ds.x_train.dtype == np.float32
    assert len(ds.x_train) + len(ds.x_valid) == 11 and 0 <= ds.x_train.min() and ds.x_train.max() <= 1
    everything = np.concatenate([ds.x_train, ds.x_valid])
    first = np.asarray(Image.open(tmp_path / "photos" / "cat" / "1.png"), np.float32).transpose(2, 0, 1) / 255
    assert any(np.array_equal(x, first) for x in everything)


def test_statistics_are_per_channel(tmp_path: Path) -> None:
    folder(tmp_path)
    ds = load_data(validate_file(spec(tmp_path)))
    assert ds.stats["mean"].shape == (3, 1, 1) and ds.stats["std"].shape == (3, 1, 1)
    np.testing.assert_allclose(ds.x_train.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    np.testing.assert_allclose(ds.x_train.std(axis=(0, 2, 3)), 1, atol=1e-4)


def test_modes_are_converted_by_the_channel_count(tmp_path: Path) -> None:
    gray = picture(tmp_path / "photos" / "a" / "g.png", mode="L")
    picture(tmp_path / "photos" / "b" / "c.jpg")
    rgb = load_data(validate_file(spec(tmp_path, "valid_split: 0\n"), ["data.normalize=false", "data.batch_size=1"]))
    g = np.asarray(Image.open(gray), np.float32) / 255
    x = rgb.x_train[np.argsort(rgb.y_train)]
    assert np.array_equal(x[0], np.stack([g, g, g]))  # gray repeated as RGB
    assert np.abs(x[1] - np.asarray(Image.open(tmp_path / "photos/b/c.jpg"), np.float32).transpose(2, 0, 1) / 255
                  ).max() == 0  # fmt: skip
    one = load_data(validate_file(spec(tmp_path, "valid_split: 0\n", shape="[1, 4, 6]"),
                                  ["data.normalize=false", "data.batch_size=1"]))  # fmt: skip
    assert one.x_train.shape[1:] == (1, 4, 6)
    luma = np.asarray(Image.open(tmp_path / "photos/b/c.jpg").convert("L"), np.float32) / 255
    assert np.array_equal(one.x_train[np.argsort(one.y_train)][1, 0], luma)


def test_sixteen_bit_grayscale_keeps_its_range(tmp_path: Path) -> None:
    a = (np.arange(24).reshape(4, 6) * 2700).astype(np.uint16)
    (tmp_path / "photos" / "a").mkdir(parents=True)
    Image.fromarray(a).save(tmp_path / "photos" / "a" / "deep.png")
    picture(tmp_path / "photos" / "b" / "x.png", mode="L")
    ds = load_data(validate_file(spec(tmp_path, "valid_split: 0\n", shape="[1, 4, 6]"),
                                 ["data.normalize=false", "data.batch_size=1"]))  # fmt: skip
    np.testing.assert_allclose(ds.x_train[ds.y_train == 0][0, 0], a / 65535, rtol=1e-6)


def test_another_size_is_an_error_unless_resize(tmp_path: Path) -> None:
    folder(tmp_path)
    picture(tmp_path / "photos" / "dog" / "big.png", size=(12, 8))
    path = spec(tmp_path)
    assert messages(path) == [f"{path}:8:9: error: {tmp_path / 'photos/dog/big.png'} is 12x8 pixels, but the input's "
                              "shape [3, 4, 6] takes 6x4 images (width x height)\n  hint: set data.resize: true to "
                              "scale every image to the input's size, or resize the files"]  # fmt: skip
    ds = load_data(validate_file(spec(tmp_path, "resize: true\n")))
    assert len(ds.x_train) + len(ds.x_valid) == 11


def test_bad_files_and_folders_are_located(tmp_path: Path) -> None:
    photos = folder(tmp_path)
    whole = picture(tmp_path / "whole.png", size=(6, 4)).read_bytes()
    (photos / "cat" / "broken.png").write_bytes(whole[: len(whole) - 30])  # NOTE: cut short in its pixel data
    (photos / "cat" / "notes.txt").write_text("hello")
    (photos / "dog" / "fake.jpg").write_text("not a jpeg at all")
    (photos / "dog" / "inner").mkdir()
    (photos / "readme.md").write_text("hi")
    (photos / ".DS_Store").write_bytes(b"\0\1")  # NOTE: hidden names are skipped
    path = spec(tmp_path)
    found = messages(path)
    at = f"{path}:8:9: error: "
    assert found == [
        f"{at}{photos / 'cat' / 'notes.txt'} is not a .png, .jpg or .jpeg file: a class folder holds PNG and JPEG "
        "images only\n  hint: remove it or move it out of the data folder",
        f"{at}{photos / 'dog' / 'inner'} is a folder: a class folder holds PNG and JPEG images only\n"
        "  hint: remove it or move it out of the data folder",
        f"{at}{photos / 'readme.md'} is not a folder: {photos} must hold one sub-folder of images per class\n"
        "  hint: move it into its class folder, or out of the data folder",
    ]  # fmt: skip
    assert len(found) == 3
    (photos / "cat" / "notes.txt").unlink()
    (photos / "dog" / "inner").rmdir()
    (photos / "readme.md").unlink()
    found = messages(path)
    assert found[0].startswith(f"{at}{photos / 'cat' / 'broken.png'} cannot be read as an image: it is damaged or cut "
                               "short (")  # fmt: skip
    assert found[1] == f"{at}{photos / 'dog' / 'fake.jpg'} is not a PNG or JPEG image (its contents are something else)"


def test_empty_and_single_class_folders(tmp_path: Path) -> None:
    photos = folder(tmp_path, {"cat": 3})
    path = spec(tmp_path)
    assert messages(path) == [f"{path}:8:9: error: {photos} must hold one sub-folder of images per class, and a "
                              "classifier needs at least 2 classes; it holds only one, 'cat'\n  hint: add a folder for "
                              "each class, named after it, with its images inside"]  # fmt: skip
    (photos / "dog").mkdir()
    assert messages(path) == [f"{path}:8:9: error: the class folder {photos / 'dog'} holds no images\n"
                              "  hint: add PNG or JPEG images of the class, or remove the folder"]  # fmt: skip


def png_bomb(width: int, height: int) -> bytes:
    """A PNG header declaring width x height pixels, with almost no data: Pillow learns the size before decoding."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("side", [10_000, 100_000])  # NOTE: over Pillow's warning limit, and over its error limit
def test_a_decompression_bomb_is_refused_before_decoding(tmp_path: Path, side: int) -> None:
    photos = folder(tmp_path)
    (photos / "cat" / "bomb.png").write_bytes(png_bomb(side, side))
    path = spec(tmp_path, "resize: true\n")
    assert messages(path) == [f"{path}:8:9: error: {photos / 'cat' / 'bomb.png'} declares more than "
                              f"{Image.MAX_IMAGE_PIXELS:,} pixels, more than an image is decoded for (a decompression "
                              "bomb, or a huge photo)\n  hint: replace or remove the file"]  # fmt: skip


def valid_black_png(width: int, height: int) -> bytes:
    """A complete, valid grayscale PNG of width x height black pixels: a few KiB of file that decodes in full."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    z, row = zlib.compressobj(9), b"\0" * (width + 1)
    idat = b"".join(z.compress(row) for _ in range(height)) + z.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


@pytest.mark.parametrize("resize", [True, False])
def test_an_image_far_larger_than_the_input_is_refused_before_decoding(tmp_path: Path, resize: bool) -> None:
    """A PNG under Pillow's own limit (25 million pixels, a few KiB of file) for a 4x6 input: refused from its header,
    in well under the seconds and hundreds of MiB decoding it takes (issue 30)."""
    import resource
    import time

    photos = folder(tmp_path)
    (photos / "cat" / "big.png").write_bytes(valid_black_png(5000, 5000))
    path = spec(tmp_path, "resize: true\n" if resize else "")
    before, started = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
    said = messages(path)
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) << 10
    shown = photos / "cat" / "big.png"
    if resize:
        assert said == [f"{path}:8:9: error: {shown} is 5000x5000 pixels, more than an image is decoded for with an "
                        "input of 6x4 (at most 16,777,216 pixels)\n  hint: replace or remove the file"]  # fmt: skip
    else:
        assert said[0].startswith(f"{path}:8:9: error: {shown} is 5000x5000 pixels, but the input's shape")
    assert grown < 50 << 20 and time.perf_counter() - started < 5  # NOTE: a guard that it was not decoded


def test_a_large_jpeg_counts_at_its_reduced_scale(tmp_path: Path) -> None:
    """A 2400x1800 photo for a 32x32 input decodes at 1/8 scale (its draft mode): accepted."""
    photos = folder(tmp_path, size=(32, 32))
    picture(photos / "cat" / "photo.jpg", size=(2400, 1800))
    ds = load_data(validate_file(spec(tmp_path, "resize: true\n", shape="[3, 32, 32]")))
    assert len(ds.x_train) + len(ds.x_valid) == 11


def edited_jpeg(width: int, height: int, mode: str = "L", progressive: bool = False, comment: bytes = b"",
                tail: bytes = b"") -> bytes:  # fmt: skip
    """An 8x8 JPEG whose frame header is edited to say width x height, with a comment segment after SOI and `tail`
    after EOI: libjpeg would fill what its scans lack with gray and only warn (issue 30)."""
    buf = io.BytesIO()
    Image.new(mode, (8, 8)).save(buf, "JPEG", progressive=progressive)
    raw = bytearray(buf.getvalue())
    at = max(raw.find(b"\xff\xc0"), raw.find(b"\xff\xc2"))
    raw[at + 5 : at + 9] = struct.pack(">HH", height, width)
    com = b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment if comment else b""
    return bytes(raw[:2] + com + raw[2:]) + tail


def restart_jpeg(width: int, height: int, scan: bytes | None = None) -> bytes:
    """A grayscale baseline JPEG built by hand with a restart marker after every block (Pillow 10 cannot write DRI):
    one-code Huffman tables, each block a DC difference of 0 and an end-of-block (bits 00, padded with ones: 3F), so a
    flat gray 128 image. `scan` replaces the entropy-coded data."""
    blocks = -(-width // 8) * -(-height // 8)
    table = bytes([1] + [0] * 15) + b"\0"  # NOTE: one code of one bit, for symbol 0 (DC: no difference; AC: EOB)
    data = b"".join(b"\x3f" + (b"\xff" + bytes([0xD0 + k % 8]) if k < blocks - 1 else b"") for k in range(blocks))
    return (b"\xff\xd8\xff\xdb\x00\x43\x00" + b"\x01" * 64 + b"\xff\xc0\x00\x0b\x08" + struct.pack(">HH", height, width)
            + b"\x01\x01\x11\x00\xff\xc4\x00\x14\x00" + table + b"\xff\xc4\x00\x14\x10" + table
            + b"\xff\xdd\x00\x04\x00\x01\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00" + (data if scan is None else scan)
            + b"\xff\xd9")  # fmt: skip


def test_a_jpeg_too_short_for_its_declared_size_is_damaged(tmp_path: Path) -> None:
    """Only the bytes of its scans count (not comments, EXIF, or what follows EOI), and only the frame header present
    decides arithmetic coding: bytes FF C9 in a comment or after EOI do not switch the check off (issue 30)."""
    photos, at = folder(tmp_path, size=(32, 32)), f"{tmp_path / 'spec.yaml'}:8:9: error: "
    pad = b"x" * 9000
    made = {"pad.jpg": edited_jpeg(2000, 2000, comment=pad), "c9.jpg": edited_jpeg(5000, 5000, comment=b"\xff\xc9"),
            "tail.jpg": edited_jpeg(5000, 5000, tail=b"\xff\xc9"),
            "print.jpg": edited_jpeg(2000, 2000, "CMYK", comment=pad),
            "deep.jpg": edited_jpeg(4000, 1000, progressive=True, comment=pad),
            "resets.jpg": restart_jpeg(2000, 2000, b"\xff\xd0\xff\xd1" * 5000)}  # fmt: skip
    for name, raw in made.items():
        (photos / "cat" / name).write_bytes(raw)
    said = messages(spec(tmp_path, "resize: true\n", shape="[3, 32, 32]"))
    cut = "image data holds {} bytes, too few for them (at least {}): it is damaged or cut short"
    assert said == [
        f"{at}{photos / 'cat' / 'c9.jpg'} declares 5000x5000 pixels but its {cut.format(3, '48,829')}\n"
        "  hint: replace or remove the file",
        f"{at}{photos / 'cat' / 'deep.jpg'} declares 4000x1000 pixels but its {cut.format(6, '7,813')}",
        f"{at}{photos / 'cat' / 'pad.jpg'} declares 2000x2000 pixels but its {cut.format(3, '7,813')}",
        f"{at}{photos / 'cat' / 'print.jpg'} declares 2000x2000 pixels but its {cut.format(8, '7,813')}",
        f"{at}{photos / 'cat' / 'resets.jpg'} declares 2000x2000 pixels but its {cut.format(0, '7,813')}",
        f"{at}{photos / 'cat' / 'tail.jpg'} declares 5000x5000 pixels but its {cut.format(3, '48,829')}"]  # fmt: skip


def test_a_jpeg_whose_markers_do_not_hold_together_is_damaged(tmp_path: Path) -> None:
    """Cut in its scan (even by its last two bytes, EOI), a segment longer than the file after the scan (Pillow reads
    only up to the scan), stray bytes between segments, a second frame header: refused with the byte where the walk
    stopped, never decoded with gray filling."""
    photos, at = folder(tmp_path, size=(32, 32)), f"{tmp_path / 'spec.yaml'}:8:9: error: "
    buf = io.BytesIO()
    Image.new("L", (64, 64), 90).save(buf, "JPEG")
    good = buf.getvalue()
    frame, scan = good.index(b"\xff\xc0"), good.index(b"\xff\xda") + 10
    made = {"a.jpg": good[: scan + 4], "b.jpg": good[:-2], "c.jpg": good[:-2] + b"\xff\xfe\x40\x00",
            "d.jpg": good[:frame] + b"\0" + good[frame:],
            "e.jpg": good[:frame] + good[frame : frame + 13] + good[frame:]}  # fmt: skip
    for name, raw in made.items():
        (photos / "cat" / name).write_bytes(raw)
    said = messages(spec(tmp_path, "resize: true\n", shape="[3, 32, 32]"))
    why = {"a": f"a scan that runs to the end of the file (no end-of-image marker) at byte {scan:,}",
           "b": f"a scan that runs to the end of the file (no end-of-image marker) at byte {scan:,}",
           "c": f"a segment longer than the file at byte {len(good) - 2:,}",
           "d": f"stray bytes where a marker belongs at byte {frame}",
           "e": f"a second frame header at byte {frame + 13}"}  # fmt: skip
    assert said == [f"{at}{photos / 'cat' / k}.jpg cannot be read as an image: it is damaged or cut short (JPEG: {w})"
                    + ("\n  hint: replace or remove the file" if k == "a" else "") for k, w in why.items()]  # fmt: skip


HONEST = {"gray": ("L", {}), "progressive": ("L", {"progressive": True}), "420": ("RGB", {"subsampling": 2}),
          "444 progressive": ("RGB", {"subsampling": 0, "progressive": True}), "cmyk": ("CMYK", {}),
          "cmyk progressive": ("CMYK", {"progressive": True})}  # fmt: skip


@pytest.mark.parametrize("kind", HONEST)
def test_the_smallest_honest_jpegs_are_not_taken_for_damaged(tmp_path: Path, kind: str) -> None:
    """One color over 2401x1799, Huffman tables optimized: about the fewest bytes a real JPEG of that size holds (2
    bits per block of gray), in every layout Pillow writes."""
    mode, options = HONEST[kind]
    photos = folder(tmp_path, size=(32, 32))
    Image.new(mode, (2401, 1799), (90,) * len(mode)).save(photos / "cat" / "flat.jpg", optimize=True, **options)
    ds = load_data(validate_file(spec(tmp_path, "resize: true\n", shape="[3, 32, 32]")))
    assert len(ds.x_train) + len(ds.x_valid) == 11


def test_honest_jpegs_with_restarts_or_noise_are_read(tmp_path: Path) -> None:
    """A restart marker after every block (not counted as image data, yet 1 byte of data per block is plenty), and
    a photo-like noise image: read as written."""
    from specgrad.train.data import read_image

    flat = read_image(restart_jpeg(2000, 2000), "r.jpg", (1, 32, 32), True, Image)
    np.testing.assert_allclose(flat, 128 / 255, atol=1e-6)
    noise = (np.random.default_rng(0).random((480, 640, 3)) * 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(noise).save(buf, "JPEG", quality=90)
    got = read_image(buf.getvalue(), "n.jpg", (3, 480, 640), False, Image)
    assert abs(float(got.mean()) - noise.mean() / 255) < 0.01


def png(width: int, height: int, rows: bytes, interlace: int = 0) -> bytes:
    """A grayscale 8-bit PNG of width x height whose image data is `rows` (filter bytes included), compressed whole:
    a complete zlib stream whatever it holds."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))  # fmt: skip


def adam7(a: np.ndarray) -> bytes:
    """The image data of `a` (height x width, uint8) interlaced: Adam7's passes, each row with filter byte 0."""
    passes = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
    return b"".join(b"\0" + r.tobytes() for x, y, dx, dy in passes for r in a[y::dy, x::dx] if r.size)


def test_a_png_holding_fewer_rows_than_it_declares_is_damaged(tmp_path: Path) -> None:
    """A complete zlib stream of 3 rows for an 8x8 image decodes without an error, the missing rows 0 (issue 30); so
    does an interlaced one a byte short, and a chunk cut by the end of the file is named as such."""
    photos, at = folder(tmp_path, size=(8, 8)), f"{tmp_path / 'spec.yaml'}:8:9: error: "
    a = np.arange(64, dtype=np.uint8).reshape(8, 8)
    (photos / "cat" / "a.png").write_bytes(png(8, 8, b"".join(b"\0" + bytes([200]) * 8 for _ in range(3))))
    (photos / "cat" / "b.png").write_bytes(png(8, 8, adam7(a)[:-1], interlace=1))
    (photos / "cat" / "c.png").write_bytes(png(8, 8, adam7(a), interlace=1)[:-20])
    said = messages(spec(tmp_path, shape="[1, 8, 8]"))
    assert said == [f"{at}{photos / 'cat' / 'a.png'} declares 8x8 pixels but its image data holds 27 of the 72 bytes "
                    "they need: it is damaged or cut short\n  hint: replace or remove the file",
                    f"{at}{photos / 'cat' / 'b.png'} declares 8x8 pixels but its image data holds 78 of the 79 bytes "
                    "they need: it is damaged or cut short",
                    f"{at}{photos / 'cat' / 'c.png'} cannot be read as an image: it is damaged or cut short (PNG: its "
                    "last chunk runs past the end of the file)"]  # fmt: skip


@pytest.mark.parametrize("mode", ["1", "L", "LA", "P", "RGB", "RGBA", "I;16", "adam7"])
def test_honest_pngs_of_every_layout_are_read(tmp_path: Path, mode: str) -> None:
    """Every bit depth and colour type Pillow writes (1-bit, palette, 16-bit), and Adam7 interlacing built by hand
    (Pillow does not write it), at a size whose rows end mid-byte: counted right, read as written."""
    from specgrad.train.data import read_image

    a = (np.random.default_rng(0).random((11, 13)) * 255).astype(np.uint8)
    if mode == "adam7":
        raw = png(13, 11, adam7(a), interlace=1)
    else:
        img = Image.fromarray(a).convert(mode) if mode != "I;16" else Image.fromarray(a.astype(np.uint16) * 257)
        buf = io.BytesIO()
        img.save(buf, "PNG")
        raw = buf.getvalue()
    got = read_image(raw, "x.png", (1, 11, 13), False, Image)
    if mode in ("L", "LA", "I;16", "adam7"):
        np.testing.assert_allclose(got[0], a / 255, atol=1e-6)


def test_a_phone_jpeg_with_a_multi_picture_block_is_read_as_a_jpeg(tmp_path: Path) -> None:
    """Pillow opens a JPEG carrying an MPF block (phones, many cameras) as format MPO: it is a JPEG all the same,
    checked and reduced as one (a large one counts 1/64 of its pixels when resized)."""
    photos = folder(tmp_path, size=(32, 32))
    rng = np.random.default_rng(0)
    first = Image.fromarray((rng.random((1800, 2400, 3)) * 255).astype(np.uint8))
    first.save(photos / "cat" / "phone.jpg", "MPO", save_all=True, append_images=[first.rotate(90)])
    assert Image.open(photos / "cat" / "phone.jpg").format == "MPO"
    ds = load_data(validate_file(spec(tmp_path, "resize: true\n", shape="[3, 32, 32]")))
    assert len(ds.x_train) + len(ds.x_valid) == 11


def test_pillow_missing_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder(tmp_path)
    real = builtins.__import__

    def no_pil(name, *args, **kwargs):
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pil)
    path = spec(tmp_path)
    assert messages(path) == [f"{path}:7:11: error: reading images needs Pillow, which is not installed\n"
                              "  hint: pip install 'specgrad[images]'"]  # fmt: skip


def test_the_reading_policy_holds_for_every_file(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    photos = folder(project)
    picture(outside / "secret.png")
    (photos / "cat" / "link.png").symlink_to(outside / "secret.png")
    path = spec(project)
    found = messages(path)
    assert len(found) == 1 and "leaves the folders a spec may read from" in found[0] and "secret.png" in found[0]
    (photos / "cat" / "link.png").unlink()
    os.mkfifo(photos / "cat" / "pipe.png")
    found = messages(path)
    assert len(found) == 1 and "it is a FIFO (named pipe), not a regular file" in found[0]
    (photos / "cat" / "pipe.png").unlink()
    (photos / "dog" / "big.png").write_bytes(b"\0" * (2 << 20))
    with Context(MAX_FILE_MB=1):
        found = messages(path)
    assert len(found) == 1 and "over the limit of 1 MiB" in found[0]


def test_the_path_must_be_a_folder_inside_the_project(tmp_path: Path) -> None:
    folder(tmp_path)
    (tmp_path / "file.png").write_bytes(b"")
    with pytest.raises(SpecError) as e:
        validate_file(spec(tmp_path), ["data.path=file.png"])
    assert "data.path: " in str(e.value) and "is not a folder, but source images reads a folder" in str(e.value)
    with pytest.raises(SpecError) as e:
        validate_file(spec(tmp_path), ["data.path=nowhere"])
    assert "data.path: no such folder: " in str(e.value)


def test_input_shape_and_keys_are_checked(tmp_path: Path) -> None:
    folder(tmp_path)
    flat = spec(tmp_path, shape="[24]", model="[{linear: 2}]")
    assert messages(flat) == [f"{flat}:3:16: error: source images gives examples of shape [channels, height, width] "
                              "with 1 (grayscale), 3 (RGB) or 4 (RGBA) channels, but the input's shape is [24]\n"
                              "  hint: set the input's shape to, e.g., [3, 32, 32]"]  # fmt: skip
    other = spec(tmp_path, shape="[2]", model="[{linear: 2}]")
    other.write_text(other.read_text().replace("source: images\n  path: photos", "source: spirals\n  resize: true"))
    assert messages(other) == [f"{other}:8:11: error: data.resize is for the images source, not spirals"]


def test_an_image_model_trains_and_keeps_its_class_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder(tmp_path, {"cat": 4, "dog": 4})
    monkeypatch.chdir(tmp_path)  # NOTE: the run folder's spec names ../../photos: inside the project root
    result = runner.invoke(app, ["train", str(spec(tmp_path)), "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    meta = safe_load_metadata(tmp_path / "runs" / "pics-1" / "model.safetensors")
    assert meta["class_names"] == '["cat", "dog"]' and "columns" not in meta
    again = runner.invoke(app, ["validate", str(tmp_path / "runs" / "pics-1")])
    assert again.exit_code == 0, again.output


def test_run_takes_one_image_read_as_training_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder(tmp_path, {"cat": 4, "dog": 4})
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["train", str(spec(tmp_path)), "--out", "runs"]).exit_code == 0
    gray = picture(tmp_path / "new" / "gray.jpeg", mode="L")  # NOTE: converted to RGB, as in training
    result = runner.invoke(app, ["run", "runs/pics-1", "--input", str(gray), "--json"])
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)
    assert record["name"] in ("cat", "dog") and len(record["probabilities"]) == 2
    big = picture(tmp_path / "new" / "big.png", size=(12, 8))
    refused = runner.invoke(app, ["run", "runs/pics-1", "--input", str(big)])
    assert refused.exit_code == 1 and f"{big} is 12x8 pixels, but the input's shape [3, 4, 6] takes 6x4 images" in \
        refused.output and "set data.resize: true" in refused.output  # fmt: skip
    (tmp_path / "new" / "fake.png").write_text("text")
    fake = runner.invoke(app, ["run", "runs/pics-1", "--input", str(tmp_path / "new" / "fake.png")])
    assert fake.exit_code == 1 and "is not a PNG or JPEG image" in fake.output and "Traceback" not in fake.output
    mlp = Path(__file__).resolve().parents[2] / "specs" / "digits_mlp.yaml"
    other = runner.invoke(app, ["run", str(mlp), "--weights", "runs/pics-1/model.safetensors", "--input", str(big)])
    assert other.exit_code == 1 and "Traceback" not in other.output


def test_evaluate_reads_a_folder_of_test_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the trained classes, some of them only; a class folder the model never learned is an error."""
    folder(tmp_path, {"bird": 4, "cat": 4, "dog": 4})
    monkeypatch.chdir(tmp_path)
    three = spec(tmp_path, model=CONV.replace("linear: 2", "linear: 3"))
    assert runner.invoke(app, ["train", str(three), "--out", "runs"]).exit_code == 0
    for k in range(3):  # NOTE: a test folder with one of the three classes only
        picture(tmp_path / "test" / "dog" / f"{k}.png", value=5 * k)
    test_path = ["--split", "test", "--set", "data.test_path=../../test"]  # NOTE: from the run folder's spec
    result = runner.invoke(app, ["evaluate", "runs/pics-1", *test_path, "--json"])
    assert result.exit_code == 0, result.output
    report = next(iter(json.loads(result.stdout)["outputs"].values()))
    assert [(c["name"], c["support"]) for c in report["classes"]] == [("bird", 0), ("cat", 0), ("dog", 3)]
    picture(tmp_path / "test" / "emu" / "0.png")
    unknown = runner.invoke(app, ["evaluate", "runs/pics-1", "--split", "test/"])
    assert unknown.exit_code == 1 and "test/emu is a class the model was not trained on" in unknown.output
    missing = runner.invoke(app, ["evaluate", "runs/pics-1", "--split", "nothing"])
    assert missing.exit_code == 1 and "--split: no such folder: nothing" in missing.output
    assert "Traceback" not in unknown.output + missing.output
