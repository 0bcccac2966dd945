"""Masks of dataset jobs (COCO, VOC, YOLO) decoded without TensorFlow, for `data_source` and `inspect`.

Records hold one PNG per instance (`image/object/mask`, values 0/1) and maybe a semantic mask
(`image/segmentation/class/encoded`, class ids); Pillow decodes them here into uint8 arrays:
instance masks [N, H, W], the semantic mask [H, W].
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tfrecorder.format import detection_keys
from tfrecorder.format.typed_values import decode_image


def _png(data: bytes) -> np.ndarray:
    array = decode_image(data, 1)
    return array[:, :, 0]


def instance_masks(pngs: Any, height: int, width: int) -> np.ndarray:
    """The instance masks of a record as uint8 [N, H, W] (N may be 0)."""
    masks = [_png(bytes(data)) for data in list(pngs if pngs is not None else [])]
    return np.stack(masks) if masks else np.zeros((0, int(height), int(width)), dtype=np.uint8)


def semantic_mask(data: Optional[bytes]) -> Optional[np.ndarray]:
    """The semantic mask of a record as uint8 [H, W] of class ids, or None when it has none."""
    return _png(data) if data else None


def is_dataset_features(features: dict) -> bool:
    return detection_keys.MASK in features


def decode_dataset_values(values: dict[str, Any], channels: Optional[int] = None) -> dict[str, Any]:
    """A parsed dataset record with its image, instance masks and semantic mask decoded (in place)."""
    values[detection_keys.ENCODED] = decode_image(values[detection_keys.ENCODED], channels)
    values[detection_keys.MASK] = instance_masks(values.get(detection_keys.MASK), values[detection_keys.HEIGHT],
                                                 values[detection_keys.WIDTH])
    if detection_keys.SEGMENTATION in values:
        missing = values.get(detection_keys.SEGMENTATION + "_missing")
        values[detection_keys.SEGMENTATION] = None if missing else semantic_mask(values[detection_keys.SEGMENTATION])
    return values
