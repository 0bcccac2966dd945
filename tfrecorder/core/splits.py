"""Split names and deterministic split assignment.

Rows say TRAIN / VALIDATION / TEST (any case). Rows marked UNASSIGNED, or tables with no split column,
are assigned by hashing a stable key, so reruns put every row in the same split without storing any
state: a row of images by the digest of its image bytes, once they are read (`split_of_digest`: images
with identical bytes land in one split whatever their URIs, issue 29), any other row by its whole row
(and detection and COCO/VOC/YOLO jobs by their image URI).
"""
from __future__ import annotations

import hashlib
from typing import Optional, Sequence

import numpy as np

TRAIN, VALIDATION, TEST = "TRAIN", "VALIDATION", "TEST"
SPLITS = (TRAIN, VALIDATION, TEST)
UNASSIGNED = "UNASSIGNED"
DEFAULT_SPLIT_RATIOS = (0.8, 0.1, 0.1)


def validate_split_ratios(ratios: Sequence[float]) -> tuple[float, float, float]:
    """Check (train, validation, test) ratios: three non-negative numbers summing to 1, train > 0."""
    if len(ratios) != 3:
        raise ValueError(f"split_ratios must have 3 values (train, validation, test), got {ratios!r}")
    values = tuple(float(r) for r in ratios)
    if any(v < 0 for v in values) or abs(sum(values) - 1.0) > 1e-6 or values[0] <= 0:
        raise ValueError(f"split_ratios must be non-negative, sum to 1 and give TRAIN a share; got {ratios!r}")
    return values  # type: ignore[return-value]


def normalize_split(value: object) -> Optional[str]:
    """Canonical split name for a cell, UNASSIGNED for empty cells, None for unknown values."""
    if value is None or (isinstance(value, float) and value != value):
        return UNASSIGNED
    text = str(value).strip().upper()
    if text in ("", UNASSIGNED):
        return UNASSIGNED
    return text if text in SPLITS else None


def assign_split(key: str, ratios: Sequence[float] = DEFAULT_SPLIT_RATIOS) -> str:
    """Deterministically map `key` to a split with the given (train, validation, test) ratios."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return _split_of_fraction(int.from_bytes(digest[:8], "big") / 2**64, ratios)


def split_indices(keys: Sequence[str], ratios: Sequence[float] = DEFAULT_SPLIT_RATIOS) -> np.ndarray:
    """`assign_split` of each key as its index in SPLITS (int8), the fractions compared all at once: a
    uint64 converts to the same correctly rounded double as Python's int / 2**64 gives."""
    sha256 = hashlib.sha256
    heads = b"".join([sha256(key.encode("utf-8")).digest()[:8] for key in keys])
    fractions = np.frombuffer(heads, dtype=">u8").astype(np.float64) / 2.0**64
    return np.where(fractions < ratios[0], 0, np.where(fractions < ratios[0] + ratios[1], 1, 2)).astype(np.int8)


def split_of_digest(digest: bytes, ratios: Sequence[float] = DEFAULT_SPLIT_RATIOS) -> str:
    """The split of an UNASSIGNED row of images from the content digest of its image bytes (a uniform
    hash of 16 bytes or more: tfrecorder.rows.duplicate_groups.content_digest): rows whose images are
    byte-identical get one split. Its bytes 8-16 are used, independent of the bytes that choose a
    duplicate bucket."""
    return _split_of_fraction(int.from_bytes(digest[8:16], "big") / 2**64, ratios)


def _split_of_fraction(fraction: float, ratios: Sequence[float]) -> str:
    if fraction < ratios[0]:
        return TRAIN
    if fraction < ratios[0] + ratios[1]:
        return VALIDATION
    return TEST
