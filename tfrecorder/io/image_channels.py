"""Decoded image tensors to the channel count and size a reader asks for (load() and TFRecorder 2.0 records).

TensorFlow is passed in (`tf`), so importing this module never imports it.
"""
from __future__ import annotations


def resize_uint8(tf, image, size) -> "tf.Tensor":
    """uint8 [H, W, C] → uint8 [*size, C], resized bilinearly (`tf.image.resize`'s default), rounded to nearest.

    Bilinear interpolation weighs neighbouring pixels with weights in [0, 1] that sum to 1, so every
    value stays within [0, 255] (up to float rounding, which the rounding to whole numbers absorbs):
    the cast needs no clip. A clip measured ≈8% of the CPU load() spends decoding and resizing a
    500×375 JPEG; tests compare the pixels with a clipped resize.
    """
    return tf.cast(tf.round(tf.image.resize(image, size)), tf.uint8)


def convert_channels(tf, image, wanted: int):
    """uint8 [H, W, 1|2|3|4] → [H, W, wanted] (gray ↔ RGB, alpha added opaque or dropped); 0 = unchanged."""
    if not wanted or image.shape[-1] == wanted:
        return image

    def from_layout(stored: int):
        def convert():
            color = image[..., :1] if stored <= 2 else image[..., :3]
            if wanted == 1:
                if stored <= 2:
                    return color
                gray = tf.image.rgb_to_grayscale(tf.cast(color, tf.float32))
                return tf.cast(tf.clip_by_value(tf.round(gray), 0.0, 255.0), tf.uint8)
            rgb = tf.tile(color, [1, 1, 3]) if stored <= 2 else color
            if wanted == 3:
                return rgb
            opaque = tf.fill(tf.shape(image[..., :1]), tf.constant(255, tf.uint8))
            return tf.concat([rgb, image[..., stored - 1:] if stored in (2, 4) else opaque], axis=-1)
        return convert

    return tf.switch_case(tf.shape(image)[-1] - 1, [from_layout(n) for n in (1, 2, 3, 4)])
