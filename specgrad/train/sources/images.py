"""The images source: a folder of PNG or JPEG files per class (data.path/<class>/*.png).

An image is read as floats 0..1 of the input's shape [channels, height, width] (1 channel: grayscale, 3: RGB, 4: RGBA,
converted from what the file holds), normalized per channel. Each file's header is checked (declared size, JPEG coding,
PNG rows) before it is decoded. Imports numpy, modelspec (errors, schema, validate) and sources.base and .split; Pillow,
an optional extra, only when images are read.
"""

from __future__ import annotations

import io
import math
import os
import re
import warnings
import zlib
from pathlib import Path
from struct import error as struct_error
from typing import Any

import numpy as np

from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.modelspec.schema import did_you_mean
from specgrad.modelspec.validate import check_folder
from specgrad.train.sources.base import (
    MAX_PROBLEMS,
    SHOWN,
    Dataset,
    SourceDef,
    _class_order,
    _raise_cut,
    _shown_names,
    _Source,
)
from specgrad.train.sources.split import _split, _Target

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")  # NOTE: what Pillow is asked to read (its formats PNG and JPEG only)
IMAGE_MODES = {1: "L", 3: "RGB", 4: "RGBA"}  # NOTE: the input's channels -> the Pillow mode every image is converted to
MAX_IMAGES = 1_000_000  # NOTE: files listed in an images folder
MAX_IMAGE_VALUES = 1 << 30  # NOTE: values of all images once decoded (4 GiB of float32), checked before decoding
# NOTE: pixels one image may decode to, from its header before decoding: 16 times the input's height and width, or
# 2^24 (16 megapixels: a 4K or 5K screenshot, 0.1-0.2 s to decode) where that is more. A JPEG is decoded at up to 1/8
# scale per side (its draft mode) when it is resized, so its declared pixels count 1/64.
IMAGE_SCALE, MIN_IMAGE_PIXELS = 16, 1 << 24
JPEG_FORMATS = ("JPEG", "MPO")  # NOTE: Pillow opens a JPEG with a multi-picture block (phones, cameras) as MPO


def pillow(loc: Location | None) -> Any:
    """Pillow's Image module (the optional extra `images`), or an error at `loc` saying how to install it."""
    try:
        from PIL import Image
    except ImportError:
        raise SpecError.at(loc, "reading images needs Pillow, which is not installed",
                           "pip install 'specgrad[images]'") from None  # fmt: skip
    return Image


def _class_folders(src: _Source, folder: Path, loc: Location) -> list[tuple[str, list[Path]]]:
    """(class name, its image files) for every sub-folder of `folder`, classes sorted as class names are and files by
    name; hidden names (starting with '.') are skipped. Anything else in the way is an error naming it."""
    real, problems, listed = Path(src.checked(folder, src.value, loc)), [], 0
    check_folder(str(real), loc, str(folder), src.key, src.missing_hint)

    def entries(path: Path) -> list[os.DirEntry]:
        nonlocal listed
        found = []
        with os.scandir(path) as it:
            for e in it:
                listed += 1
                if listed > MAX_IMAGES:
                    raise SpecError.at(loc, f"{folder} holds more than {MAX_IMAGES:,} files and folders, more than "
                                       "an images source reads", "use fewer images, or save them as arrays in an "
                                       ".npz")  # fmt: skip
                if not e.name.startswith("."):
                    found.append(e)
        return sorted(found, key=lambda e: e.name)

    classes = []
    for e in entries(real):
        shown = folder / e.name
        if not e.is_dir():
            problems.append(Problem(f"{shown} is not a folder: {folder} must hold one sub-folder of images per class",
                                    loc, "move it into its class folder, or out of the data folder"))  # fmt: skip
            continue
        files = []
        for f in entries(Path(src.checked(real / e.name, f"{src.value}/{e.name}", loc))):
            if f.is_dir() or Path(f.name).suffix.lower() not in IMAGE_SUFFIXES:
                what = "a folder" if f.is_dir() else "not a .png, .jpg or .jpeg file"
                problems.append(Problem(f"{shown / f.name} is {what}: a class folder holds PNG and JPEG images only",
                                        loc, "remove it or move it out of the data folder"))  # fmt: skip
            else:
                files.append(shown / f.name)
        if not files:
            problems.append(Problem(f"the class folder {shown} holds no images", loc,
                                    "add PNG or JPEG images of the class, or remove the folder"))  # fmt: skip
        classes.append((e.name, files))
    _raise_cut(problems, folder)
    if src.classes is not None:  # NOTE: a test folder: any of the classes the model was trained on
        return _known_classes(src.classes, classes, folder, loc)
    if len(classes) < 2:
        found = f"only one, '{excerpt(classes[0][0], SHOWN)}'" if classes else "none"
        raise SpecError.at(loc, f"{folder} must hold one sub-folder of images per class, and a classifier needs at "
                           f"least 2 classes; it holds {found}", "add a folder for each class, named after it, with "
                           "its images inside")  # fmt: skip
    return sorted(classes, key=lambda c: _class_order(c[0]))


def _known_classes(names: list[str], found: list[tuple[str, list[Path]]], folder: Path, loc: Location
                   ) -> list[tuple[str, list[Path]]]:  # fmt: skip
    """A test folder's class folders as (name, files) for every trained class in order (none where it has no folder);
    a folder of a class the model never learned is an error."""
    files = dict(found)
    unknown = [Problem(f"{folder / name} is a class the model was not trained on", loc,
                       f"{did_you_mean(name, names) or ''} the classes are: {_shown_names(names)}".strip())
               for name in files if name not in names][:MAX_PROBLEMS]  # fmt: skip
    _raise_cut(unknown, folder)
    return [(name, files.get(name, [])) for name in names]


class WrongSize(ValueError):
    """An image of another size than the input's, without data.resize."""


def read_image(raw: bytes, shown: str, shape: tuple[int, ...], resize: bool, image: Any) -> np.ndarray:
    """One PNG or JPEG file's bytes as floats 0..1 of `shape` (channels, height, width): turned as its EXIF
    orientation says, converted to the channels' mode, scaled to height x width when `resize` (else another size is an
    error). A ValueError says in words why it cannot be (a damaged file, another format, too many pixels, the size)."""
    from PIL import ImageOps

    channels, h, w = shape
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", image.DecompressionBombWarning)  # NOTE: refused before any pixel is decoded
            warnings.simplefilter("ignore", UserWarning)  # NOTE: e.g. palette transparency notes on conversion
            with image.open(io.BytesIO(raw), formats=("PNG", "JPEG")) as img:
                _check_declared_size(img, shown, shape, resize)
                if img.format in JPEG_FORMATS:
                    _check_jpeg(raw, shown)
                else:
                    _check_png_rows(img, raw, shown)
                if resize and img.format in JPEG_FORMATS:
                    img.draft(IMAGE_MODES[channels], (w, h))  # NOTE: JPEG decodes at a smaller scale, faster
                img = ImageOps.exif_transpose(img)
                if img.size != (w, h) and not resize:
                    raise WrongSize(f"{shown} is {img.size[0]}x{img.size[1]} pixels, but the input's shape "
                                    f"{list(shape)} takes {w}x{h} images (width x height)")  # fmt: skip
                wide = img.mode.startswith("I")  # NOTE: 16-bit grayscale PNG: 0..65535, which convert('L') would clip
                img = image.fromarray(np.asarray(img, np.float32) / 65535, "F") if wide else \
                    img.convert(IMAGE_MODES[channels])  # fmt: skip
                if img.size != (w, h):
                    img = img.resize((w, h), image.Resampling.BILINEAR)
                a = np.asarray(img, np.float32) / (1 if wide else 255)
                if wide and channels > 1:  # NOTE: gray repeated as RGB, and an opaque alpha
                    a = np.stack([a] * 3 + [np.ones_like(a)] * (channels - 3), axis=2)
    except (image.DecompressionBombError, image.DecompressionBombWarning):
        raise ValueError(f"{shown} declares more than {image.MAX_IMAGE_PIXELS:,} pixels, more than an image is "
                         "decoded for (a decompression bomb, or a huge photo)") from None  # fmt: skip
    except image.UnidentifiedImageError:
        raise ValueError(f"{shown} is not a PNG or JPEG image (its contents are something else)") from None
    except (OSError, SyntaxError, EOFError, struct_error, ZeroDivisionError, MemoryError) as e:
        raise ValueError(f"{shown} cannot be read as an image: it is damaged or cut short ({excerpt(str(e), 80)})"
                         ) from None  # fmt: skip
    return (a[None] if a.ndim == 2 else a.transpose(2, 0, 1)).reshape(shape)


def decoded_pixel_limit(shape: tuple[int, ...]) -> int:
    """The most pixels one image for an input of `shape` (channels, height, width) is decoded to (IMAGE_SCALE)."""
    return max(MIN_IMAGE_PIXELS, IMAGE_SCALE**2 * shape[1] * shape[2])


def _check_declared_size(img: Any, shown: str, shape: tuple[int, ...], resize: bool) -> None:
    """Refuse, from the header alone, an image that would decode to far more pixels than the input takes: a PNG a few
    KiB long may declare 89 million pixels (Pillow's own limit), which decode for seconds into hundreds of MiB for
    an 8x8 input. Without resize, any size but the input's (either way round: EXIF may turn it) is refused here."""
    _, h, w = shape
    width, height = img.size
    if not resize and (width, height) not in ((w, h), (h, w)):
        raise WrongSize(f"{shown} is {width}x{height} pixels, but the input's shape {list(shape)} takes {w}x{h} "
                        "images (width x height)")  # fmt: skip
    jpeg = img.format in JPEG_FORMATS
    decoded = width * height // (64 if jpeg and resize else 1)
    if decoded > (limit := decoded_pixel_limit(shape)):
        raise ValueError(f"{shown} is {width}x{height} pixels, more than an image is decoded for with an input of "
                         f"{w}x{h} (at most {limit:,} pixels{', after JPEG reduction' if jpeg else ''})"
                         )  # fmt: skip


JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # NOTE: DHT, JPG and DAC share the range
JPEG_ARITHMETIC = frozenset(range(0xC9, 0xD0)) - {0xCC}
JPEG_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")  # NOTE: ends a scan's data: not a stuffed FF00, RSTn or fill
JPEG_RST = tuple(bytes([0xFF, m]) for m in range(0xD0, 0xD8))
NOT_FILL = re.compile(rb"[^\xff]")  # NOTE: a marker's code after its FF and any fill bytes


class _Damaged(ValueError):
    """A JPEG whose markers do not hold together; `what` says how, `at` the byte where it was found."""

    def __init__(self, what: str, at: int) -> None:
        super().__init__(f"{what} at byte {at:,}")


def _jpeg_frame(seg: bytes, at: int) -> tuple[int, int, int]:
    """(width, height, 8x8 blocks of its largest component) from an SOF segment's body: a component sampled h x v of
    the largest hmax x vmax covers ceil(width * h / hmax) x ceil(height * v / vmax) pixels."""
    if len(seg) < 6 or len(seg) != 6 + 3 * seg[5] or seg[5] == 0:
        raise _Damaged("a frame header of the wrong length", at)
    height, width = int.from_bytes(seg[1:3], "big"), int.from_bytes(seg[3:5], "big")
    factors = [(seg[7 + 3 * k] >> 4, seg[7 + 3 * k] & 15) for k in range(seg[5])]
    if not width or not height or not all(1 <= h <= 4 and 1 <= v <= 4 for h, v in factors):
        raise _Damaged("a frame header with a zero size or a bad sampling factor", at)
    hmax, vmax = max(h for h, _ in factors), max(v for _, v in factors)
    blocks = max(math.ceil(math.ceil(width * h / hmax) / 8) * math.ceil(math.ceil(height * v / vmax) / 8)
                 for h, v in factors)  # fmt: skip
    return width, height, blocks


def _jpeg_scan_end(raw: bytes, start: int) -> tuple[int, int]:
    """(where the entropy-coded data from `start` ends, how many coded bytes it holds): the next marker that is not a
    stuffed FF00 or a restart marker; those are not counted. bytes.find and count only: no Python loop per byte."""
    found = JPEG_MARKER.search(raw, start)
    if found is None:
        raise _Damaged("a scan that runs to the end of the file (no end-of-image marker)", start)
    end = found.start()
    data = raw[start:end]
    return end, len(data) - data.count(b"\xff\x00") - 2 * sum(data.count(m) for m in JPEG_RST)


def jpeg_coding(raw: bytes) -> tuple[bool, int, int, int, int]:
    """Walk a JPEG's markers from SOI to EOI: (arithmetic coded, width, height, blocks of its largest component,
    entropy-coded bytes of all its scans). Segments are skipped by their lengths, so bytes inside an EXIF thumbnail or
    a comment are never taken for markers; a missing SOI or EOI, a segment past the end, a second frame, a scan before
    the frame, or stray bytes between segments raise _Damaged. Linear in the file's size."""
    if raw[:2] != b"\xff\xd8":
        raise _Damaged("no start-of-image marker", 0)
    at, frame, coded, scans = 2, None, 0, 0
    while True:
        if raw[at : at + 1] != b"\xff":
            raise _Damaged("stray bytes where a marker belongs" if at < len(raw) else "no end-of-image marker", at)
        if (code := NOT_FILL.search(raw, at)) is None:  # NOTE: fill bytes FF may precede any marker
            raise _Damaged("no end-of-image marker", len(raw))
        marker, at = raw[code.start()], code.start() + 1
        if marker == 0xD9:
            break
        if 0xD0 <= marker <= 0xD7 or marker in (0x00, 0x01, 0xD8):
            raise _Damaged(f"a misplaced marker FF{marker:02X}", at - 2)
        size = int.from_bytes(raw[at : at + 2], "big")
        if size < 2 or at + size > len(raw):
            raise _Damaged("a segment longer than the file" if size >= 2 else "a segment length under 2", at - 2)
        seg, at = raw[at + 2 : at + size], at + size
        if marker in JPEG_SOF:
            if frame is not None:
                raise _Damaged("a second frame header", at - size - 2)
            frame = (marker in JPEG_ARITHMETIC, *_jpeg_frame(seg, at - size - 2))
        elif marker == 0xDA:
            if frame is None:
                raise _Damaged("a scan before the frame header", at - size - 2)
            at, n = _jpeg_scan_end(raw, at)
            coded, scans = coded + n, scans + 1
    if frame is None or not scans:
        raise _Damaged("an end-of-image marker before any frame or scan", at - 2)
    return (*frame, coded)


def _check_jpeg(raw: bytes, shown: str) -> None:
    """Refuse a JPEG whose markers do not hold together, or whose scans hold too few bytes for the pixels its frame
    declares. libjpeg fills the missing part of a cut-short or emptied scan with gray and only warns (Pillow passes the
    warning by), so such a file would be trained on.

    The floor, for Huffman coding: a JPEG's first DC scan of a component (sequential or progressive, interleaved or
    not) codes every 8x8 block of that component, at least the component's ceil(w/8) x ceil(h/8) blocks (an
    interleaved scan codes whole MCUs, more), and each block's DC difference is a Huffman code of at least one bit. So
    the scans of an honest file hold at least blocks / 8 bytes of its largest component, stuffing and restart markers
    not counted; a one-colour 2400x1800 image saved with optimized tables holds about 2 bits per block. Arithmetic
    coding (rare) can code a flat block in a fraction of a bit and gets no floor, only the marker walk."""
    try:
        arithmetic, width, height, blocks, coded = jpeg_coding(raw)
    except _Damaged as e:
        raise ValueError(f"{shown} cannot be read as an image: it is damaged or cut short (JPEG: {e})") from None
    least = math.ceil(blocks / 8)
    if not arithmetic and coded < least:
        raise ValueError(f"{shown} declares {width}x{height} pixels but its image data holds {coded:,} bytes, too few "
                         f"for them (at least {least:,}): it is damaged or cut short")  # fmt: skip


PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # NOTE: colour type -> samples per pixel (gray, RGB, palette, GA, RGBA)
# NOTE: Adam7's seven passes, each (first column, first row, column step, row step)
ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
INFLATE_CHUNK = 1 << 20  # NOTE: bytes of a PNG's image data decompressed at a time when counting them


def png_data_size(width: int, height: int, depth: int, colour: int, interlaced: bool) -> int:
    """Bytes a PNG's decompressed image data holds: each row of each pass (one, or Adam7's seven) is a filter byte
    and its pixels' bits rounded up to whole bytes; a pass with no pixel has no rows."""
    bits, total = depth * PNG_CHANNELS[colour], 0
    for x, y, dx, dy in ADAM7 if interlaced else ((0, 0, 1, 1),):
        cols, rows = max(0, -(-(width - x) // dx)), max(0, -(-(height - y) // dy))
        total += rows * (1 + math.ceil(cols * bits / 8)) if cols else 0
    return total


def _png_idat(raw: bytes) -> bytes | None:
    """A PNG's IDAT chunks joined, read by chunk lengths up to IEND; None where a chunk runs past the file's end."""
    at, parts = 8, []
    while at + 8 <= len(raw):
        size, kind = int.from_bytes(raw[at : at + 4], "big"), raw[at + 4 : at + 8]
        if at + 12 + size > len(raw):
            return None
        if kind == b"IEND":
            break
        if kind == b"IDAT":
            parts.append(raw[at + 8 : at + 8 + size])
        at += 12 + size
    return b"".join(parts)


def _png_data_count(data: bytes, need: int) -> int | None:
    """How many bytes a PNG's image data `data` decompresses to, counted no further than past `need` (in INFLATE_CHUNK
    pieces, never held whole); None where it does not decompress."""
    got, z = 0, zlib.decompressobj()
    try:
        while data and got <= need and not z.eof:
            got += len(z.decompress(data, INFLATE_CHUNK))
            data = z.unconsumed_tail
    except zlib.error:
        return None
    return got


def _check_png_rows(img: Any, raw: bytes, shown: str) -> None:
    """Refuse a PNG whose image data holds fewer bytes than its header's size needs: a complete zlib stream of 3 rows
    for an 8-row image decodes without an error (Pillow leaves the missing rows 0), so it would be trained on. This
    costs one more decompression of the data (no more than _check_declared_size allows), about a quarter of Pillow's
    whole decode, and INFLATE_CHUNK of memory."""
    width, height = img.size
    ihdr = raw[16:29]  # NOTE: IHDR's body; Pillow has read it (the first chunk, always) to open the file
    data = _png_idat(raw)
    if data is None:
        raise ValueError(f"{shown} cannot be read as an image: it is damaged or cut short (PNG: its last chunk runs "
                         "past the end of the file)")  # fmt: skip
    need = png_data_size(width, height, ihdr[8], ihdr[9], ihdr[12] == 1)
    if (got := _png_data_count(data, need)) is None:
        raise ValueError(f"{shown} cannot be read as an image: it is damaged or cut short (PNG: its image data does "
                         "not decompress)")  # fmt: skip
    if got < need:
        raise ValueError(f"{shown} declares {width}x{height} pixels but its image data holds {got:,} of the {need:,} "
                         "bytes they need: it is damaged or cut short")  # fmt: skip


def _load_images(src: _Source) -> Dataset:
    folder, loc = src.file(), src.path_loc(src.file())
    if len(src.shape) != 3 or src.shape[0] not in IMAGE_MODES:
        raise SpecError.at(src.input_loc(), f"source images gives examples of shape [channels, height, width] with 1 "
                           f"(grayscale), 3 (RGB) or 4 (RGBA) channels, but the input's shape is {list(src.shape)}",
                           "set the input's shape to, e.g., [3, 32, 32]")  # fmt: skip
    image = pillow(src.near("source"))
    classes = _class_folders(src, folder, loc)
    files = [(f, k) for k, (_, fs) in enumerate(classes) for f in fs]
    if len(files) * math.prod(src.shape) > MAX_IMAGE_VALUES:
        raise SpecError.at(loc, f"{len(files):,} images of shape {list(src.shape)} are more than {MAX_IMAGE_VALUES:,} "
                           "values, more than an images source holds in memory",
                           "use smaller images (data.resize) or fewer of them")  # fmt: skip
    x, problems, hinted = np.zeros((len(files), *src.shape), np.float32), [], set()
    for i, (file, _) in enumerate(files):
        raw = src.read(file, str(file), loc)
        try:
            x[i] = read_image(raw, str(file), src.shape, src.data["resize"], image)
        except ValueError as e:
            hint = "set data.resize: true to scale every image to the input's size, or resize the files" if \
                isinstance(e, WrongSize) else "replace or remove the file"  # fmt: skip
            problems.append(Problem(str(e), loc, hint if hint not in hinted else None))  # NOTE: each hint once
            hinted.add(hint)
    _raise_cut(problems, folder)
    y = np.array([k for _, k in files], np.int32)
    names = [name for name, _ in classes]
    target = _Target("classify", f"the class folders of {folder.name}", names=names)
    return _split(src, x, y, target, loc, f"the {len(files)} images in {folder} with valid_split "
                  f"{src.data['valid_split']}")  # fmt: skip


DEFS = (SourceDef("images", _load_images, ("path", "test_path", "resize", "split_seed"), floats=True, targets=(None,),
                  axis=(0, 2, 3)),)  # fmt: skip
