"""Image decoding and batching inside tf.data pipelines, shared by `load()` and its detection variant
(tfrecorder.reading.detection_dataset)."""
from __future__ import annotations

from typing import Optional

from tfrecorder.io.image_channels import convert_channels, resize_uint8

JPEG_RATIOS = (2, 4, 8)  # libjpeg can decode straight to 1/2, 1/4, 1/8 of the stored size


def decode_image(data: "tf.Tensor", image_format: "tf.Tensor", height: "tf.Tensor", width: "tf.Tensor",
                 image_size: Optional[tuple[int, int]], channels: Optional[int],
                 largest: Optional[tuple[int, int]] = None) -> "tf.Tensor":
    """Decode one image to uint8 [H, W, C]; with `image_size`, resized to exactly that size.

    A JPEG much larger than `image_size` is decoded by libjpeg straight at 1/2, 1/4 or 1/8 scale
    (DCT scaling: much less work than decoding every pixel and throwing most away), then resized.
    `largest` (height, width), when known, bounds every stored image the pipeline will see: scales
    no image can use are left out of the graph, and with none left the choice itself (a `Case` op,
    ≈3% of a 500×375 JPEG's decode and resize) goes too. The pixels are the same either way.
    """
    import tensorflow as tf

    wanted = channels or 0
    # Every decoder accepts 0 (as stored) and 3; others (1 for GIF, 4 for JPEG and GIF) fail, so other
    # counts are decoded as stored and converted after (`convert_channels`).
    decode_as = 3 if wanted == 3 else 0

    def full():
        return tf.io.decode_image(data, channels=decode_as, dtype=tf.uint8, expand_animations=False)

    if image_size is None:
        image = convert_channels(tf, full(), wanted)
        image.set_shape([None, None, channels])
        return image
    target_h, target_w = image_size
    ratios = usable_ratios(image_size, largest)
    if ratios:
        branches = [full] + [lambda r=r: tf.io.decode_jpeg(data, channels=decode_as, ratio=r) for r in ratios]
        branch = tf.constant(0)
        for index, ratio in enumerate(ratios, start=1):
            fits = tf.logical_and(height >= target_h * ratio, width >= target_w * ratio)
            branch = tf.where(tf.logical_and(tf.equal(image_format, "jpeg"), fits), index, branch)
        image = tf.switch_case(branch, branches)
    else:
        image = full()
    image = convert_channels(tf, resize_uint8(tf, image, [target_h, target_w]), wanted)
    image.set_shape([target_h, target_w, channels])
    return image


def usable_ratios(image_size: tuple[int, int], largest: Optional[tuple[int, int]]) -> tuple[int, ...]:
    """The DCT scales a JPEG at most `largest` (height, width) could be decoded at for `image_size`
    without dropping below it (all of JPEG_RATIOS when `largest` is unknown)."""
    if largest is None:
        return JPEG_RATIOS
    return tuple(r for r in JPEG_RATIOS if largest[0] >= image_size[0] * r and largest[1] >= image_size[1] * r)


def rebatch(tf, ds, batch_size: int, drop_remainder: bool, ragged: bool, image_keys):
    """Batch decoded elements: ragged where sizes differ, resized images always dense."""
    if not ragged:
        return ds.batch(batch_size, drop_remainder=drop_remainder)
    ds = ds.ragged_batch(batch_size, drop_remainder=drop_remainder, row_splits_dtype=tf.int64)
    image_keys = list(image_keys)
    if not image_keys:
        return ds

    def densify(element):
        element = dict(element)
        for key in image_keys:  # resized images all have one size; only an unknown channel count made them ragged
            element[key] = element[key].to_tensor() if isinstance(element[key], tf.RaggedTensor) else element[key]
        return element

    return ds.map(densify)
