"""A joined dataset image (COCO, VOC, YOLO) → one tf.train.Example with the OD API's keys and masks.

Boxes and classes as every detection job writes them (tfrecorder.rows.detection_encoder), plus
`image/object/{mask, is_crowd, area, difficult, truncated, view}` and, when the dataset has one for the
image, the semantic mask `image/segmentation/class/{encoded, format}` (keys: tfrecorder.format.
detection_keys). Every check that needs the image's real size is made here, after the image is read:
a box outside the image or degenerate, a polygon of fewer than 3 points, an RLE whose size is not the
image's. Each costs the discard of that object only; an image that cannot be read or decoded costs its
own record and all of its objects. An image whose objects are all discarded is still written (no
objects): the image record itself was good.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tfrecorder.errors import InvalidImage, RowError
from tfrecorder.format import detection_keys as keys
from tfrecorder.format.example_encoder import Feature, encode_example
from tfrecorder.io import decode_check, image_probe
from tfrecorder.rows import instance_masks
from tfrecorder.rows.dataset_records import PIXELS, RELATIVE, JoinedImage, Row, for_discard
from tfrecorder.rows.detection_statistics import EncodedImage, image_row
from tfrecorder.rows.detection_encoder import TOLERANCE, image_name
from tfrecorder.rows.row_encoding import DecodeLookup, ImageReader, probe_read_image, resolve_uri

FileReader = Callable[[str], bytes]


def _numbers(values: Any, count: int, what: str) -> list[float]:
    try:
        numbers = [float(v) for v in values]
    except (TypeError, ValueError):
        raise RowError(f"invalid box: {what} is not {count} numbers ({values!r})") from None
    if len(numbers) != count or not all(math.isfinite(v) for v in numbers):
        raise RowError(f"invalid box: {what} is not {count} finite numbers ({values!r})")
    return numbers


def relative_box(row: Row, height: int, width: int) -> tuple[float, float, float, float]:
    """The object's [xmin, ymin, xmax, ymax] in [0, 1]; RowError if degenerate or outside the image."""
    xmin, ymin, xmax, ymax = _numbers(row.get("box"), 4, "box")
    if row.get("box_units", PIXELS) == PIXELS:
        xmin, xmax, ymin, ymax = xmin / width, xmax / width, ymin / height, ymax / height
    if not (xmax > xmin and ymax > ymin):
        raise RowError(f"degenerate box: {row.get('box')!r} has no area")
    if min(xmin, ymin) < -TOLERANCE or max(xmax, ymax) > 1 + TOLERANCE:
        raise RowError(f"box outside the image: {row.get('box')!r} in a {width}x{height} image")
    return tuple(min(max(v, 0.0), 1.0) for v in (xmin, ymin, xmax, ymax))  # type: ignore[return-value]


def _resized(mask: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    from PIL import Image

    if mask.shape == tuple(size):
        return mask
    return np.asarray(Image.fromarray(mask).resize((size[1], size[0]), Image.Resampling.NEAREST), dtype=np.uint8)


class InstanceEncoder:
    """Encode joined dataset images into Examples (one per image)."""

    def __init__(self, base_dir: str = "", image_size: Optional[Sequence[int]] = None,
                 validate: str = decode_check.DEFAULT_VALIDATION,
                 max_image_pixels: int = image_probe.DEFAULT_MAX_IMAGE_PIXELS) -> None:
        self.base_dir = base_dir
        self.image_size = tuple(image_size) if image_size else None
        self.validate = validate
        self.max_image_pixels = max_image_pixels
        self.image_kinds: set = set()  # what the encoding step collects for metadata "images"; none here
        self.written: Optional[EncodedImage] = None  # the last image encoded (statistics, duplicates: issue 29)

    def resolve(self, uri: str) -> str:
        return resolve_uri(uri, self.base_dir)

    def encode(self, joined: JoinedImage, read_image: ImageReader, read_file: FileReader,
               decoded: Optional[DecodeLookup] = None) -> tuple[Optional[bytes], int, list[tuple[Row, str]]]:
        """(Example bytes or None, records inside it, [(row, reason)] discarded)."""
        everything = [joined.image] + [row for row, _id, _name in joined.objects]
        self.written = None
        try:
            resolved = self.resolve(joined.uri)
            data = read_image(resolved)
            info = probe_read_image(resolved, data, self.validate, decoded, self.max_image_pixels)
            height, width = info.height, info.width
            semantic = self._semantic(joined.image, read_file, height, width)
            object_masks = self._object_masks(joined.image, read_file, height, width)
            if self.image_size and (height, width) != self.image_size:
                data, info = image_probe.resize_image(data, info, self.image_size, self.max_image_pixels)
        except (RowError, InvalidImage) as exc:
            return None, 0, [(for_discard(row), str(exc)) for row in everything]
        size = (info.height, info.width)
        with_masks = object_masks is not None or any(row.get("segmentation") for row, _i, _n in joined.objects)
        kept, discards = [], []
        for row, category_id, name in joined.objects:
            try:
                box = relative_box(row, height, width)
                mask = self._mask(row, object_masks, height, width) if with_masks else None
            except RowError as exc:
                discards.append((for_discard(row), str(exc)))
                continue
            kept.append((row, category_id, name, box, mask))
        features = {
            keys.ENCODED: Feature("bytes", (data,)),
            keys.FORMAT: Feature("bytes", (info.format.encode(),)),
            keys.HEIGHT: Feature("int64", (info.height,)),
            keys.WIDTH: Feature("int64", (info.width,)),
            keys.FILENAME: Feature("bytes", (image_name(joined.uri).encode("utf-8"),)),
            keys.SOURCE_ID: Feature("bytes", (_source_id(joined.image, joined.uri).encode("ascii"),)),
            keys.URI: Feature("bytes", (joined.uri.encode("utf-8"),)),
            keys.XMIN: Feature("float", [k[3][0] for k in kept]),
            keys.YMIN: Feature("float", [k[3][1] for k in kept]),
            keys.XMAX: Feature("float", [k[3][2] for k in kept]),
            keys.YMAX: Feature("float", [k[3][3] for k in kept]),
            keys.CLASS_TEXT: Feature("bytes", [k[2].encode("utf-8") for k in kept]),
            keys.CLASS_LABEL: Feature("int64", [k[1] for k in kept]),
            keys.IS_CROWD: Feature("int64", [int(bool(k[0].get("is_crowd"))) for k in kept]),
            keys.AREA: Feature("float", [_area(k[0], k[3], k[4], height, width) for k in kept]),
            keys.DIFFICULT: Feature("int64", [int(bool(k[0].get("difficult"))) for k in kept]),
            keys.TRUNCATED: Feature("int64", [int(bool(k[0].get("truncated"))) for k in kept]),
            keys.VIEW: Feature("bytes", [str(k[0].get("view") or "").encode("utf-8") for k in kept]),
            keys.MASK: Feature("bytes", [instance_masks.encode_png(_resized(k[4], size)) for k in kept
                                         if k[4] is not None]),
        }
        if semantic is not None:
            features[keys.SEGMENTATION] = Feature("bytes", (instance_masks.encode_png(_resized(semantic, size)),))
            features[keys.SEGMENTATION_FORMAT] = Feature("bytes", (instance_masks.MASK_FORMAT.encode(),))
        self.written = EncodedImage(data, info, image_row([k[2] for k in kept], [k[3] for k in kept], height, width),
                                    tuple(for_discard(row) for row in [joined.image] + [k[0] for k in kept]))
        return encode_example(features), 1 + len(kept), discards

    def _read_mask(self, uri: str, read_file: FileReader, height: int, width: int, what: str) -> np.ndarray:
        try:
            mask = instance_masks.decode_png(read_file(self.resolve(uri)))
        except RowError as exc:
            raise RowError(f"{what} unreadable: {exc}") from None
        except (OSError, ValueError) as exc:
            raise RowError(f"{what} undecodable: {type(exc).__name__}") from None
        if mask.shape != (height, width):
            raise RowError(f"{what} size mismatch: mask is {mask.shape[1]}x{mask.shape[0]}, image is {width}x{height}")
        return mask

    def _semantic(self, image: Row, read_file: FileReader, height: int, width: int) -> Optional[np.ndarray]:
        uri = image.get("segmentation_uri")
        return None if not uri else self._read_mask(uri, read_file, height, width, "semantic mask")

    def _object_masks(self, image: Row, read_file: FileReader, height: int, width: int) -> Optional[np.ndarray]:
        uri = image.get("objects_uri")
        return None if not uri else self._read_mask(uri, read_file, height, width, "object mask")

    @staticmethod
    def _mask(row: Row, object_masks: Optional[np.ndarray], height: int, width: int) -> np.ndarray:
        segmentation = row.get("segmentation")
        if segmentation and row.get("box_units") == RELATIVE and isinstance(segmentation, list):  # YOLO-seg
            segmentation = [[float(v) * (width if i % 2 == 0 else height) for i, v in enumerate(_list(polygon))]
                            for polygon in segmentation]
        if segmentation:
            return instance_masks.segmentation_mask(segmentation, height, width)
        index = row.get("instance_index")
        if object_masks is not None and index is not None:
            return (object_masks == int(index)).astype(np.uint8)
        x0, y0, x1, y1 = relative_box(row, height, width)
        return instance_masks.box_mask((x0 * width, y0 * height, (x1 - x0) * width, (y1 - y0) * height), height, width)


def _area(row: Row, box: tuple[float, ...], mask: Optional[np.ndarray], height: int, width: int) -> float:
    """COCO's own `area` when given; else the mask's pixel count, else the box's area in pixels."""
    area = row.get("area")
    if area is not None:
        try:
            value = float(area)
            if math.isfinite(value):
                return value
        except (TypeError, ValueError):
            pass
    if mask is not None:
        return float(mask.sum())
    return float((box[2] - box[0]) * width * (box[3] - box[1]) * height)


def _list(polygon: Any) -> list:
    if not isinstance(polygon, (list, tuple)):
        raise RowError(f"invalid polygon: expected a list of coordinates, got {type(polygon).__name__}")
    try:
        return [float(v) for v in polygon]
    except (TypeError, ValueError):
        raise RowError("invalid polygon: a coordinate is not a number") from None


def _source_id(image: Row, uri: str) -> str:
    """COCO's numeric image id (Model Garden's COCO evaluation matches on it), else the hash of the URI
    every detection job writes."""
    given = str(image.get("source_id") or "")
    return given if given.isdigit() and len(given) <= 18 else keys.source_id(uri)
