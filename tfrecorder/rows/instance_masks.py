"""Instance masks: COCO polygons rasterised, COCO run-length encodings decoded, masks as PNG both ways.

A mask is a uint8 [H, W] array of 0/1 the size of its image. The record holds one PNG per instance
(grey, values 0 and 1), as the TF Object Detection API's create_coco_tf_record.py writes them and
Model Garden's TfExampleDecoder(include_mask=True) reads them. Polygons are rasterised with Pillow's
ImageDraw (outline included, as pycocotools' rasteriser includes boundary pixels near enough for
training); run-length encodings (COCO's `counts` as a list, or its compressed string) are decoded
here, column-major as COCO stores them. A bad segmentation raises RowError with its reason: the
caller discards that annotation only.
"""
from __future__ import annotations

import io
import math
from typing import Any, Sequence

import numpy as np

from tfrecorder.errors import RowError

MASK_FORMAT = "png"


def compact_polygons(segmentation: Any) -> Any:
    """COCO polygons as float32 bytes (4 bytes a coordinate instead of a Python float's 24 and a list's
    slot): what the pipeline groups by image stays small. Anything else (an RLE, polygons holding
    something other than finite numbers) is returned as it is, for `segmentation_mask` to judge."""
    if not isinstance(segmentation, list) or not segmentation:
        return segmentation
    try:
        arrays = [np.asarray(polygon, dtype=np.float32) for polygon in segmentation]
    except (TypeError, ValueError):
        return segmentation
    if any(a.ndim != 1 or not np.isfinite(a).all() for a in arrays):
        return segmentation
    return [a.tobytes() for a in arrays]


def _points(polygon: Any) -> list[float]:
    if isinstance(polygon, bytes):  # compact_polygons' form
        polygon = np.frombuffer(polygon, dtype=np.float32).tolist()
    if not isinstance(polygon, (list, tuple)):
        raise RowError(f"invalid polygon: expected a list of coordinates, got {type(polygon).__name__}")
    try:
        points = [float(v) for v in polygon]
    except (TypeError, ValueError):
        raise RowError("invalid polygon: a coordinate is not a number") from None
    if not all(math.isfinite(v) for v in points):
        raise RowError("invalid polygon: a coordinate is not finite")
    if len(points) % 2:
        raise RowError(f"invalid polygon: odd number of coordinates ({len(points)})")
    if len(points) < 6:
        raise RowError(f"invalid polygon: fewer than 3 points ({len(points) // 2})")
    return points


def polygon_mask(polygons: Sequence[Any], height: int, width: int) -> np.ndarray:
    """The union of COCO polygons ([x1, y1, x2, y2, ...] in pixels) as a 0/1 mask of the image's size."""
    from PIL import Image, ImageDraw

    if not polygons:
        raise RowError("invalid polygon: the segmentation holds no polygon")
    canvas = Image.new("L", (width, height), 0)
    draw = ImageDraw.Draw(canvas)
    for polygon in polygons:
        points = _points(polygon)
        draw.polygon(list(zip(points[0::2], points[1::2])), fill=1, outline=1)
    return np.asarray(canvas, dtype=np.uint8)


def _counts_from_string(text: str) -> list[int]:
    """COCO's compressed RLE string (pycocotools' rleFrString): 5 bits per character, offset by 48, a
    continuation bit, sign-extended, each run after the second relative to the run two before."""
    counts: list[int] = []
    position = 0
    while position < len(text):
        value, shift, more = 0, 0, True
        while more:
            if position >= len(text):
                raise RowError("RLE size mismatch: the compressed counts end inside a number")
            c = ord(text[position]) - 48
            if not 0 <= c < 64:
                raise RowError("invalid RLE: a character outside COCO's compressed alphabet")
            value |= (c & 0x1F) << (5 * shift)
            more = bool(c & 0x20)
            position += 1
            shift += 1
            if not more and c & 0x10:
                value |= -1 << (5 * shift)
            if shift > 13:
                raise RowError("invalid RLE: a run longer than any image")
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value)
    return counts


def rle_mask(rle: Any, height: int, width: int) -> np.ndarray:
    """A COCO run-length encoding ({"size": [h, w], "counts": list or compressed string}) as a 0/1 mask;
    RowError when its size is not the image's or its runs do not cover exactly h × w pixels."""
    if not isinstance(rle, dict) or "counts" not in rle or "size" not in rle:
        raise RowError("invalid RLE: expected {'size': [h, w], 'counts': ...}")
    size = rle["size"]
    if not isinstance(size, (list, tuple)) or len(size) != 2 or [int(v) for v in size] != [height, width]:
        raise RowError(f"RLE size mismatch: RLE is {size}, image is [{height}, {width}]")
    counts = rle["counts"]
    if isinstance(counts, bytes):
        counts = counts.decode("ascii", "replace")
    if isinstance(counts, str):
        runs = _counts_from_string(counts)
    elif isinstance(counts, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in counts):
        runs = list(counts)
    else:
        raise RowError("invalid RLE: counts must be a list of integers or COCO's compressed string")
    if any(v < 0 for v in runs) or sum(runs) != height * width:
        raise RowError(f"RLE size mismatch: runs cover {sum(runs)} pixels, image has {height * width}")
    values = np.zeros(len(runs), dtype=np.uint8)
    values[1::2] = 1  # runs alternate 0, 1, 0, ... starting with zeros
    flat = np.repeat(values, runs)
    return flat.reshape((width, height)).T.copy()  # column-major, as COCO stores it


def segmentation_mask(segmentation: Any, height: int, width: int) -> np.ndarray:
    """A COCO `segmentation` (a list of polygons, or an RLE dict) as a 0/1 mask of the image's size."""
    if isinstance(segmentation, dict):
        return rle_mask(segmentation, height, width)
    if isinstance(segmentation, (list, tuple)):
        return polygon_mask(segmentation, height, width)
    raise RowError(f"invalid segmentation: expected polygons or an RLE, got {type(segmentation).__name__}")


def box_mask(box: Sequence[float], height: int, width: int) -> np.ndarray:
    """A filled rectangle ([x, y, w, h] in pixels): the mask of an object that has only a box, when
    others in its image have masks (every object of a record needs one)."""
    mask = np.zeros((height, width), dtype=np.uint8)
    x, y, w, h = box
    mask[int(math.floor(y)):int(math.ceil(y + h)), int(math.floor(x)):int(math.ceil(x + w))] = 1
    return mask


def encode_png(mask: np.ndarray) -> bytes:
    """A uint8 mask (0/1 instance, or class indices) as a grey PNG."""
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(mask, dtype=np.uint8)).save(out, format="PNG")
    return out.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    """A grey or palette PNG mask as uint8 [H, W] of its stored values (palette indices, not colours)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        if image.mode not in ("L", "P", "1"):
            image = image.convert("L")
        return np.asarray(image, dtype=np.uint8)
