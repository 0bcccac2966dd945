"""Channel conversion and resizing of decoded images, with TensorFlow itself."""
from __future__ import annotations

import numpy as np

from tfrecorder.io.image_channels import convert_channels, resize_uint8


def test_gray_rgb_and_alpha_convert_both_ways(tf):
    gray = tf.constant(np.full((2, 3, 1), 7, np.uint8))
    rgba = tf.constant(np.array([[[10, 20, 30, 40]]], np.uint8))
    assert convert_channels(tf, gray, 3).numpy().tolist() == [[[7, 7, 7]] * 3] * 2
    assert convert_channels(tf, gray, 4).numpy()[0, 0].tolist() == [7, 7, 7, 255]
    assert convert_channels(tf, rgba, 3).numpy().tolist() == [[[10, 20, 30]]]
    assert convert_channels(tf, rgba, 1).numpy().tolist() == [[[round(0.2989 * 10 + 0.587 * 20 + 0.114 * 30)]]]


def test_zero_or_the_same_count_leaves_the_image_alone(tf):
    rgb = tf.constant(np.zeros((1, 1, 3), np.uint8))
    assert convert_channels(tf, rgb, 0) is rgb and convert_channels(tf, rgb, 3) is rgb


def test_resizing_without_a_clip_gives_the_pixels_of_a_clipped_resize(tf):
    """Noise and 0/255 checkerboards, the images whose interpolation would overshoot first, scaled up
    and down to odd sizes, eagerly and inside a traced function (as in load()'s pipeline): every pixel
    equals a resize whose values are clipped to [0, 255] before the cast. A method that overshoots
    (bicubic, Lanczos) would wrap around in the cast and fail this."""
    rng = np.random.default_rng(5)

    def clipped(image, size):
        return tf.cast(tf.clip_by_value(tf.round(tf.image.resize(image, size)), 0.0, 255.0), tf.uint8)

    traced = tf.function(lambda image, size: resize_uint8(tf, image, size),  # shapes unknown, as in load()
                         input_signature=[tf.TensorSpec([None, None, None], tf.uint8), tf.TensorSpec([2], tf.int32)])
    for trial in range(60):
        height, width = (int(n) for n in rng.integers(1, 120, 2))
        channels = int(rng.choice([1, 3, 4]))
        if trial % 2:
            checker = (np.indices((height, width)).sum(0) % 2 * 255).astype(np.uint8)
            image = np.repeat(checker[..., None], channels, axis=-1)
        else:
            image = rng.choice(np.array([0, 255, 1, 254], np.uint8), (height, width, channels))
        size = [int(n) for n in rng.integers(1, 240, 2)]
        expected = clipped(tf.constant(image), size).numpy()
        assert np.array_equal(resize_uint8(tf, tf.constant(image), size).numpy(), expected), (image.shape, size)
        assert np.array_equal(traced(tf.constant(image), tf.constant(size)).numpy(), expected), (image.shape, size)
