"""tfrecorder.rows.instance_masks: COCO RLE decoded exactly as pycocotools encodes it, polygons, PNGs."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from support.datasets import rle_of
from tfrecorder.errors import RowError
from tfrecorder.rows import instance_masks


def _random_mask(seed: int, shape=(37, 53)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random(shape) > 0.6).astype(np.uint8)


@pytest.mark.parametrize("seed", range(5))
def test_compressed_rle_from_pycocotools_decodes_pixel_exactly(seed):
    mask = _random_mask(seed)
    np.testing.assert_array_equal(instance_masks.rle_mask(rle_of(mask), *mask.shape), mask)


def test_uncompressed_counts_and_pycocotools_decode_agree():
    from pycocotools import mask as mask_utils

    mask = _random_mask(7, (20, 30))
    counts = rle_of(mask, compressed=False)
    np.testing.assert_array_equal(instance_masks.rle_mask(counts, 20, 30), mask)
    frompy = mask_utils.decode(mask_utils.frPyObjects(counts, 20, 30))
    np.testing.assert_array_equal(instance_masks.rle_mask(counts, 20, 30), frompy)


def test_empty_and_full_masks():
    for mask in (np.zeros((4, 5), np.uint8), np.ones((4, 5), np.uint8)):
        np.testing.assert_array_equal(instance_masks.rle_mask(rle_of(mask), 4, 5), mask)


@pytest.mark.parametrize("rle, reason", [
    ({"size": [10, 10], "counts": [100]}, "RLE size mismatch: RLE is [10, 10], image is [4, 5]"),
    ({"size": [4, 5], "counts": [3, 4]}, "RLE size mismatch: runs cover 7 pixels, image has 20"),
    ({"size": [4, 5], "counts": "\x7f"}, "invalid RLE"),
    ({"size": [4, 5]}, "invalid RLE"),
    ({"size": [4, 5], "counts": [1.5, 18.5]}, "invalid RLE"),
])
def test_bad_rle_is_a_row_error(rle, reason):
    with pytest.raises(RowError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        instance_masks.rle_mask(rle, 4, 5)


def test_polygon_is_rasterised_with_pillow_outline_included():
    polygon = [2, 3, 12, 3, 12, 9, 2, 9]
    expected = Image.new("L", (16, 12), 0)
    ImageDraw.Draw(expected).polygon([(2, 3), (12, 3), (12, 9), (2, 9)], fill=1, outline=1)
    mask = instance_masks.segmentation_mask([polygon], 12, 16)
    np.testing.assert_array_equal(mask, np.asarray(expected))
    assert mask.sum() == 11 * 7


@pytest.mark.parametrize("polygons, reason", [
    ([[1, 1, 5, 5]], "fewer than 3 points"),
    ([[1, 1, 5, 5, 3]], "odd number of coordinates"),
    ([[1, "x", 5, 5, 3, 3]], "not a number"),
    ([], "no polygon"),
    ([5], "expected a list"),
])
def test_bad_polygons_are_row_errors(polygons, reason):
    with pytest.raises(RowError, match=reason):
        instance_masks.segmentation_mask(polygons, 10, 10)


def test_segmentation_of_another_type_is_a_row_error():
    with pytest.raises(RowError, match="invalid segmentation"):
        instance_masks.segmentation_mask("mask", 10, 10)


def test_png_round_trip_and_box_mask():
    mask = _random_mask(3)
    data = instance_masks.encode_png(mask)
    assert data.startswith(b"\x89PNG")
    np.testing.assert_array_equal(instance_masks.decode_png(data), mask)
    box = instance_masks.box_mask((1.5, 2, 3, 2), 6, 8)
    assert box.sum() == 8 and box[2:4, 1:5].all()


def test_compact_polygons_rasterise_as_the_lists_do():
    polygons = [[2.5, 3.25, 12, 3, 12.75, 9.5, 2, 9], [0, 0, 3, 0, 3, 3]]
    compact = instance_masks.compact_polygons(polygons)
    assert all(isinstance(p, bytes) for p in compact)
    np.testing.assert_array_equal(instance_masks.segmentation_mask(compact, 12, 16),
                                  instance_masks.segmentation_mask(polygons, 12, 16))
    for kept in ([[1, "x", 2, 2, 3, 3]], [[1, float("nan"), 2, 2, 3, 3]], {"size": [1, 1], "counts": [1]}, [], None):
        assert instance_masks.compact_polygons(kept) is kept
