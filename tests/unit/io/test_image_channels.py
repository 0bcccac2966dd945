"""Channel conversion of decoded images, with TensorFlow itself."""
from __future__ import annotations

import numpy as np

from tfrecorder.io.image_channels import convert_channels


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
