"""tfrecorder.reading.dataset_images: decoding images inside tf.data (reduced-scale JPEG decodes) and batching them."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from tfrecorder.reading.dataset_images import decode_image, rebatch, usable_ratios
from tfrecorder.sample_data import encode_image, photo_array


@pytest.mark.parametrize("size, ratio", [((160, 200), 2), ((80, 100), 4), ((40, 50), 8), ((30, 45), 8),
                                         ((200, 200), 1), ((170, 100), 1)])
def test_large_jpegs_are_decoded_at_reduced_scale_then_resized(tf, size, ratio):
    """A 320×400 JPEG: libjpeg's 1/ratio decode is used exactly when it still covers `size`."""
    data = encode_image(Image.fromarray(photo_array(320, 400, 3)), "JPEG", quality=90)
    image = decode_image(tf.constant(data), tf.constant("jpeg"), tf.constant(320, tf.int64), tf.constant(400, tf.int64),
                         size, None)
    scaled = tf.io.decode_jpeg(data, ratio=ratio)
    expected = tf.cast(tf.clip_by_value(tf.round(tf.image.resize(scaled, size)), 0, 255), tf.uint8)
    assert image.shape == (*size, 3) and np.array_equal(image.numpy(), expected.numpy())
    full = tf.image.resize(tf.io.decode_jpeg(data), size).numpy()
    assert np.abs(full - image.numpy()).mean() < 20  # the same picture as a full decode, within resize noise


def test_non_jpeg_images_take_the_full_decode(tf):
    png = encode_image(Image.fromarray(photo_array(320, 400, 3)), "PNG")
    image = decode_image(tf.constant(png), tf.constant("png"), tf.constant(320, tf.int64), tf.constant(400, tf.int64),
                         (40, 50), None)
    expected = tf.cast(tf.clip_by_value(tf.round(tf.image.resize(tf.io.decode_png(png), (40, 50))), 0, 255), tf.uint8)
    assert np.array_equal(image.numpy(), expected.numpy())


def test_photo_jpeg_bytes_decode_like_tensorflow(tf):
    data = encode_image(Image.fromarray(photo_array(30, 40, 1)), "JPEG")
    image = decode_image(tf.constant(data), tf.constant("jpeg"), tf.constant(30, tf.int64), tf.constant(40, tf.int64),
                         None, None)
    assert np.array_equal(image.numpy(), tf.io.decode_jpeg(data).numpy())
    assert np.asarray(Image.open(io.BytesIO(data))).shape == image.shape


def test_rebatch_is_ragged_where_sizes_differ_and_keeps_resized_images_dense(tf):
    elements = [{"image": np.full((2, 2, c), c, np.uint8), "tags": np.arange(n)} for c, n in ((1, 0), (3, 2), (3, 1))]
    ds = tf.data.Dataset.from_generator(lambda: iter(elements), output_signature={
        "image": tf.TensorSpec([2, 2, None], tf.uint8), "tags": tf.TensorSpec([None], tf.int64)})
    [batch] = list(rebatch(tf, ds, 4, False, ragged=True, image_keys=[]))
    assert isinstance(batch["image"], tf.RaggedTensor) and batch["tags"].to_list() == [[], [0, 1], [0]]
    same = ds.filter(lambda e: tf.shape(e["image"])[2] == 3)
    [dense] = list(rebatch(tf, same, 4, False, ragged=True, image_keys=["image"]))
    assert isinstance(dense["image"], tf.Tensor) and dense["image"].shape == (2, 2, 2, 3)
    assert isinstance(dense["tags"], tf.RaggedTensor)
    plain = [b["image"].shape for b in rebatch(tf, same, 1, True, ragged=False, image_keys=["image"])]
    assert plain == [(1, 2, 2, 3), (1, 2, 2, 3)]


def test_usable_ratios_are_the_scales_the_largest_stored_image_could_take():
    assert usable_ratios((224, 224), None) == (2, 4, 8)  # nothing known: every scale stays in the graph
    assert usable_ratios((224, 224), (375, 500)) == ()  # the benchmark's photos: no scale covers 224
    assert usable_ratios((100, 100), (450, 900)) == (2, 4)
    assert usable_ratios((40, 50), (320, 400)) == (2, 4, 8)


def test_a_size_bound_leaves_out_the_scales_no_image_can_use(tf):
    """Told no image exceeds 300×400, a 160×200 target keeps only the full decode; with the true bound
    (320×400) the 1/2 decode is used as without one, so a right bound never changes the pixels."""
    data = encode_image(Image.fromarray(photo_array(320, 400, 3)), "JPEG", quality=90)

    def decoded(largest):
        return decode_image(tf.constant(data), tf.constant("jpeg"), tf.constant(320, tf.int64),
                            tf.constant(400, tf.int64), (160, 200), None, largest).numpy()

    full = tf.cast(tf.clip_by_value(tf.round(tf.image.resize(tf.io.decode_jpeg(data), (160, 200))), 0, 255), tf.uint8)
    assert np.array_equal(decoded((300, 400)), full.numpy())
    assert np.array_equal(decoded((320, 400)), decoded(None))
    assert not np.array_equal(decoded(None), full.numpy())
