from __future__ import annotations

import collections

import pytest

from tfrecorder.core.splits import SPLITS, UNASSIGNED, assign_split, normalize_split, split_indices, validate_split_ratios


@pytest.mark.parametrize(
    "value, expected",
    [("TRAIN", "TRAIN"), ("train", "TRAIN"), (" Validation ", "VALIDATION"), ("test", "TEST"),
     ("UNASSIGNED", UNASSIGNED), ("", UNASSIGNED), (None, UNASSIGNED), (float("nan"), UNASSIGNED),
     ("dev", None), ("TRAINING", None)],
)
def test_normalize_split(value, expected):
    assert normalize_split(value) == expected


def test_assignment_is_deterministic_and_follows_ratios():
    keys = [f"gs://bucket/img_{i}.jpg" for i in range(20_000)]
    first = [assign_split(k) for k in keys]
    assert first == [assign_split(k) for k in keys]
    counts = collections.Counter(first)
    assert abs(counts["TRAIN"] / len(keys) - 0.8) < 0.02
    assert abs(counts["VALIDATION"] / len(keys) - 0.1) < 0.02
    assert set(counts) == {"TRAIN", "VALIDATION", "TEST"}


@pytest.mark.parametrize("ratios", [(0.8, 0.1, 0.1), (0.7, 0.3, 0.0), (1.0, 0.0, 0.0), (0.1, 0.45, 0.45), (1 / 3, 1 / 3, 1 / 3)])
def test_split_indices_assign_every_key_as_assign_split_does(ratios):
    keys = [f'{{"id": "{i}", "text": "ü{i}"}}' for i in range(20_000)] + [""]
    assert [SPLITS[i] for i in split_indices(keys, ratios)] == [assign_split(k, ratios) for k in keys]


def test_ratios_change_assignment():
    keys = [str(i) for i in range(1000)]
    assert {assign_split(k, (1.0, 0.0, 0.0)) for k in keys} == {"TRAIN"}


@pytest.mark.parametrize("ratios", [(0.5, 0.5), (0.5, 0.6, 0.1), (0.0, 0.5, 0.5), (1.1, -0.1, 0.0)])
def test_bad_ratios_are_refused(ratios):
    with pytest.raises(ValueError, match="split_ratios"):
        validate_split_ratios(ratios)


def test_split_of_digest_follows_the_ratios_and_is_a_function_of_the_digest():
    import hashlib

    from tfrecorder.core.splits import split_of_digest

    digests = [hashlib.blake2b(str(i).encode(), digest_size=16).digest() for i in range(20_000)]
    found = [split_of_digest(d, (0.7, 0.2, 0.1)) for d in digests]
    shares = {split: found.count(split) / len(found) for split in ("TRAIN", "VALIDATION", "TEST")}
    assert abs(shares["TRAIN"] - 0.7) < 0.02 and abs(shares["VALIDATION"] - 0.2) < 0.02
    assert abs(shares["TEST"] - 0.1) < 0.02
    assert [split_of_digest(d, (0.7, 0.2, 0.1)) for d in digests[:50]] == found[:50]
    assert {split_of_digest(d, (1.0, 0.0, 0.0)) for d in digests[:100]} == {"TRAIN"}
