"""TFRecorder 2.0 records: their base64 raw-pixel images, read with numpy or TensorFlow, and upgraded.

TFRecorder 2.0 stored each image as `base64.b64encode(pil_image.tobytes(), altchars=b"-_")` with
`image_height`, `image_width` and `image_channels` (1 for grayscale modes, else 3). For images
whose Pillow mode was neither L nor RGB (RGBA, palette, 16-bit, …) the stored bytes do not hold
height × width × channels values: such a record's pixels cannot be recovered, and every reader
here says so instead of guessing.
"""
from __future__ import annotations

import base64
import binascii
import io
from typing import Any, Mapping, Optional

import numpy as np

from tfrecorder.core import types
from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.example_encoder import Feature, encode_example
from tfrecorder.io.image_channels import convert_channels, resize_uint8
from tfrecorder.errors import RowError
from tfrecorder.core.schema import Schema

PIXEL_MISMATCH = "pixel data does not match image_height x image_width x image_channels"
_MODES = {1: "L", 3: "RGB"}


def _one(example: Mapping[str, list], name: str) -> Any:
    values = example.get(name)
    if not values or len(values) != 1:
        raise RowError(f"unparsable record: feature {name!r} must hold one value, has {len(values or [])}")
    return values[0]


def pixel_array(example: Mapping[str, list], prefix: str = "image") -> np.ndarray:
    """The image of a parsed TFRecorder 2.0 record as uint8 [H, W, C]; RowError if it cannot be."""
    height, width, channels = (int(_one(example, f"{prefix}_{n}")) for n in ("height", "width", "channels"))
    try:
        pixels = base64.b64decode(_one(example, prefix), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise RowError(f"unreadable image: {prefix!r} is not URL-safe base64") from None
    if height < 1 or width < 1 or channels not in _MODES:
        raise RowError(f"{PIXEL_MISMATCH}: {height}x{width}x{channels} is not an image shape")
    if len(pixels) != height * width * channels:
        raise RowError(f"{PIXEL_MISMATCH}: {len(pixels)} bytes for {height}x{width}x{channels} "
                       f"(TFRecorder 2.0 stored an image mode other than L or RGB)")
    return np.frombuffer(pixels, np.uint8).reshape(height, width, channels)


PNG_LEVEL = 4  # zlib level: on 500x375 photo-like images smaller than Pillow's default 6 and ~3x faster


def png_bytes(pixels: np.ndarray) -> bytes:
    """Lossless PNG of uint8 [H, W, 1|3] pixels."""
    from PIL import Image

    out = io.BytesIO()
    image = Image.fromarray(pixels[:, :, 0] if pixels.shape[2] == 1 else pixels, _MODES[pixels.shape[2]])
    image.save(out, "PNG", compress_level=PNG_LEVEL)
    return out.getvalue()


def png_or_raw(example: Mapping[str, list], prefix: str = "image") -> tuple[bytes, str]:
    """(PNG bytes, "png") of a record's image, or (its stored bytes, "bin") when the pixels cannot be read."""
    try:
        return png_bytes(pixel_array(example, prefix)), "png"
    except RowError:
        return _one(example, prefix), "bin"


def upgrade_record(record: bytes, schema: Schema) -> tuple[bytes, int]:
    """A TFRecorder 2.0 record re-encoded as this package writes it: (Example bytes, unknown labels).

    The image becomes a PNG with its format/height/width/channels features and `image_uri` holding
    the old `image_name`; labels keep their indices (-1, an unknown label, is counted); other
    features keep their values. RowError for a record that cannot be upgraded.
    """
    try:
        example = parse_example(record)
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise RowError(f"unparsable record: {exc}") from None
    features: dict[str, Feature] = {}
    unknown = 0
    for column, role in schema.items():
        if role == types.SplitKey:
            continue
        if role == types.ImageUri:
            pixels = pixel_array(example)
            height, width, channels = pixels.shape
            name = example.get("image_name") or [b""]
            features.update({
                "image": Feature("bytes", (png_bytes(pixels),)), "image_format": Feature("bytes", (b"png",)),
                "image_height": Feature("int64", (height,)), "image_width": Feature("int64", (width,)),
                "image_channels": Feature("int64", (channels,)), "image_uri": Feature("bytes", (name[0],)),
            })
            continue
        values = example.get(column)
        if values is None:
            raise RowError(f"unparsable record: feature {column!r} is missing")
        if role.is_label:
            unknown += int(_one(example, column)) < 0
        elif not role.is_list or role.length is not None:
            expected = role.length or 1
            if len(values) != expected:
                raise RowError(f"unparsable record: feature {column!r} holds {len(values)} values, expected {expected}")
        features[column] = Feature(role.feature_dtype, values)
    return encode_example(features), unknown


def decode_pixels(data, height, width, channels, image_size: Optional[tuple[int, int]], want: Optional[int]):
    """TensorFlow: a TFRecorder 2.0 image feature → uint8 [H, W, C], as `load()` returns decoded images.

    `want` converts the channel count as load() does; `image_size` resizes like load().
    A record whose pixel count does not match its shape fails with a message naming the problem.
    """
    import tensorflow as tf

    pixels = tf.io.decode_raw(tf.io.decode_base64(data), tf.uint8)
    shape = tf.cast(tf.stack([height, width, channels]), tf.int32)
    check = tf.debugging.assert_equal(
        tf.size(pixels), tf.reduce_prod(shape),
        message=f"TFRecorder 2.0 record: {PIXEL_MISMATCH}; tfrecorder.verify() lists such records and "
                "tfrecorder.upgrade() discards them with a reason")
    with tf.control_dependencies([check]):
        image = tf.reshape(pixels, shape)
    if want is not None:
        image = convert_channels(tf, image, want)
    if image_size is None:
        image.set_shape([None, None, want])
        return image
    image = resize_uint8(tf, image, list(image_size))
    image.set_shape([*image_size, want])
    return image
