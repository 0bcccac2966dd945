"""tfrecorder.reading.dataset_masks: instance and semantic masks of dataset records decoded with Pillow."""
from __future__ import annotations

import numpy as np

from tfrecorder.format import detection_keys as keys
from tfrecorder.reading import dataset_masks
from tfrecorder.rows.instance_masks import encode_png
from tfrecorder.sample_data import encode_image, photo_array


def test_instance_masks_stack_and_empty():
    a, b = np.eye(4, 6, dtype=np.uint8), np.ones((4, 6), np.uint8)
    stacked = dataset_masks.instance_masks([encode_png(a), encode_png(b)], 4, 6)
    assert stacked.shape == (2, 4, 6) and stacked.dtype == np.uint8
    np.testing.assert_array_equal(stacked[0], a)
    assert dataset_masks.instance_masks([], 4, 6).shape == (0, 4, 6)
    assert dataset_masks.semantic_mask(b"") is None


def test_decode_dataset_values():
    from PIL import Image

    semantic = np.full((4, 6), 15, np.uint8)
    png = encode_image(Image.fromarray(photo_array(4, 6, 0)), "PNG")
    values = {keys.ENCODED: encode_image(Image.fromarray(photo_array(4, 6, 0)), "PNG"), keys.HEIGHT: 4, keys.WIDTH: 6,
              keys.MASK: np.array([encode_png(semantic > 0)], dtype=object), keys.SEGMENTATION: encode_png(semantic),
              keys.SEGMENTATION + "_missing": False}
    decoded = dataset_masks.decode_dataset_values(values)
    assert decoded[keys.ENCODED].shape == (4, 6, 3) and decoded[keys.MASK].shape == (1, 4, 6)
    np.testing.assert_array_equal(decoded[keys.SEGMENTATION], semantic)
    assert dataset_masks.is_dataset_features({keys.MASK: {}}) and not dataset_masks.is_dataset_features({})
    missing = dataset_masks.decode_dataset_values({**values, keys.ENCODED: png,
                                                   keys.SEGMENTATION: b"", keys.SEGMENTATION + "_missing": True,
                                                   keys.MASK: []})
    assert missing[keys.SEGMENTATION] is None and missing[keys.MASK].shape == (0, 4, 6)
