"""One serialized tf.train.Example → a dict of NumPy / Python values, typed by metadata.json (no TensorFlow).

The values are what `tfrecorder.load()` yields for one element, as NumPy: shape [] → a NumPy scalar
(strings as bytes), [n, ...] → an array of that shape, null → a 1-D array (strings: object array of
bytes); float64 stored as bit patterns restored; a feature that may be missing comes with
`<name>_missing` and, when absent, its default. Images stay encoded bytes unless decoded with
`decode_image` (Pillow), which gives the channel count TensorFlow's decoder gives.
"""
from __future__ import annotations

import io
import struct
from typing import Any, Mapping, Optional

import numpy as np

from tfrecorder.format.example_decoder import parse_example

_NUMPY = {"string": object, "int64": np.int64, "float32": np.float32, "float64": np.float64}
_ZEROS = {"string": b"", "int64": 0, "float32": 0.0, "float64": 0.0}
_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
_SIXTEEN_BIT = ("I", "I;16", "I;16B", "I;16L")


def _typed(values: list, feature: Mapping[str, Any]) -> Any:
    dtype = feature["dtype"]
    if feature.get("stored_as") == "float64_bits":
        values = [struct.unpack("<d", struct.pack("<q", v))[0] for v in values]
    shape = feature["shape"]
    if shape == []:
        if len(values) != 1:
            raise ValueError(f"expected one value, found {len(values)}")
        return values[0] if dtype == "string" else _NUMPY[dtype](values[0])
    array = np.array(values, dtype=_NUMPY[dtype]) if values else np.zeros(0, dtype=_NUMPY[dtype])
    return array if shape is None else array.reshape(shape)


def _default(feature: Mapping[str, Any]) -> list:
    """The stored values a missing feature stands for (its "default", or zeros)."""
    default = feature.get("default")
    if default is None:
        default = _ZEROS[feature["dtype"]] if feature["shape"] == [] else []
    items = default if isinstance(default, list) else [default]
    if feature["dtype"] == "string":
        items = [v.encode("utf-8") if isinstance(v, str) else v for v in items]
    if feature.get("stored_as") == "float64_bits":  # defaults are logical floats: store them as bits
        items = [struct.unpack("<q", struct.pack("<d", float(v)))[0] for v in items]
    return items


def record_values(record: bytes, features: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Every feature of metadata.json's "features" for one record (ValueError if one does not fit)."""
    parsed = parse_example(record)
    out: dict[str, Any] = {}
    for name, feature in features.items():
        present = name in parsed
        if not present and not feature["allow_missing"]:
            raise ValueError(f"record has no {name!r} feature, which metadata.json says is always present")
        try:
            out[name] = _typed(parsed[name] if present else _default(feature), feature)
        except ValueError as exc:
            raise ValueError(f"feature {name!r}: {exc}") from None
        if feature["allow_missing"]:
            out[f"{name}_missing"] = not present
    return out


def decode_image(data: bytes, channels: Optional[int] = None) -> np.ndarray:
    """Encoded image bytes → uint8 [H, W, C] with Pillow; C as `tf.io.decode_image` gives it unless
    `channels` (1, 3 or 4) asks for a conversion. Animated images give their first frame."""
    from PIL import Image

    from tfrecorder.io.image_probe import PIL_FORMATS, decoded_channels

    with Image.open(io.BytesIO(data)) as image:
        image.load()
        wanted = channels or decoded_channels(PIL_FORMATS.get(image.format, "png"), image)
        if image.mode in _SIXTEEN_BIT:  # TensorFlow scales 16-bit samples to 8 bits
            image = Image.fromarray((np.asarray(image, dtype=np.uint32) >> 8).astype(np.uint8), "L")
        if image.mode != _MODES[wanted]:
            image = image.convert(_MODES[wanted])
        array = np.asarray(image, dtype=np.uint8)
    return array[:, :, None] if array.ndim == 2 else array
