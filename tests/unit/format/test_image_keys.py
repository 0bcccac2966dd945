"""tfrecorder.format.image_keys: an image's keys found in a record without a full parse, and the Bloom filter of keys."""
from __future__ import annotations

import hashlib
import random

import pytest

from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.example_encoder import Feature, encode_example
import numpy as np

from tfrecorder.format.image_keys import (KeyFilter, digest_key, hashes_bytes, image_key_slots, key_hash, read_hashes,
                                          record_image_keys, record_key_slots, sha256_key, uri_key)


def record(**features) -> bytes:
    return encode_example(features)


def test_keys_are_the_uri_and_the_digest_of_the_image_bytes():
    data = bytes(range(256)) * 3
    example = record(image=Feature("bytes", (data,)), image_format=Feature("bytes", (b"png",)),
                     image_height=Feature("int64", (3,)), label=Feature("int64", (1,)),
                     image_uri=Feature("bytes", ("dir/ü.png".encode(),)))
    assert record_image_keys(example, "image") == ["uri:dir/ü.png", "sha256:" + hashlib.sha256(data).hexdigest()]
    assert digest_key(data) == "sha256:" + hashlib.sha256(data).hexdigest() and uri_key("a") == "uri:a"


def test_other_prefixes_and_missing_features_give_fewer_keys():
    example = record(mask=Feature("bytes", (b"m",)), mask_uri=Feature("bytes", (b"m.png",)),
                     image_uri=Feature("bytes", (b"i.png",)))
    assert record_image_keys(example, "mask") == ["uri:m.png", digest_key(b"m")]
    assert record_image_keys(example, "image") == ["uri:i.png"]
    assert record_image_keys(record(n=Feature("int64", (5,))), "image") == []


def test_an_image_holding_a_fake_entry_forges_no_key():
    fake = record(image_uri=Feature("bytes", (b"forged.png",)))
    example = record(image=Feature("bytes", (fake,)), image_uri=Feature("bytes", (b"real.png",)))
    assert record_image_keys(example, "image") == ["uri:real.png", digest_key(fake)]


def test_agrees_with_the_full_parser_on_random_records():
    rng = random.Random(3)
    for _ in range(50):
        data, uri = rng.randbytes(rng.randrange(0, 3000)), "u" * rng.randrange(1, 300)
        example = record(image=Feature("bytes", (data,)), image_uri=Feature("bytes", (uri.encode(),)),
                         weights=Feature("float", tuple(rng.random() for _ in range(rng.randrange(0, 40)))))
        parsed = parse_example(example)
        assert record_image_keys(example, "image") == [uri_key(parsed["image_uri"][0].decode()),
                                                       digest_key(parsed["image"][0])]


def test_bytes_that_are_no_example_raise_value_error():
    with pytest.raises(ValueError):
        record_image_keys(b"\x0a\xff\xff\xff", "image")


def test_key_filter_holds_what_was_added_and_rarely_anything_else():
    keys = [key_hash(f"uri:{i}") for i in range(2000)]
    wanted = KeyFilter(len(keys))
    for key in keys:
        wanted.add(key)
    assert all(wanted.may_hold(key) for key in keys)
    others = [key_hash(f"sha256:{i}") for i in range(20000)]
    false = sum(wanted.may_hold(key) for key in others)
    assert false < 100  # built for 0.1%: 20 expected
    assert wanted.may_hold_all(np.array(keys, dtype=np.uint64)).all()
    assert wanted.may_hold_all(np.array(others, dtype=np.uint64)).tolist() == [wanted.may_hold(k) for k in others]


def test_keys_sidecars_hold_sorted_distinct_hashes():
    data = hashes_bytes([5, 3, 5, 2**64 - 1])
    assert len(data) == 24 and read_hashes(data).tolist() == [3, 5, 2**64 - 1]
    assert read_hashes(hashes_bytes([])).tolist() == []
    with pytest.raises(ValueError, match="8-byte"):
        read_hashes(b"123")
    assert key_hash("uri:a") != key_hash("uri:b") and 0 <= key_hash("uri:a") < 2**64


def test_key_filters_merge_as_the_union_of_their_keys():
    first, second = KeyFilter(100), KeyFilter(100)
    first.add(key_hash("a"))
    second.add(key_hash("b"))
    merged = first.merge(second)
    assert merged.may_hold(key_hash("a")) and merged.may_hold(key_hash("b"))
    assert not first.empty_like().may_hold(key_hash("a"))
    with pytest.raises(ValueError, match="same size"):
        KeyFilter(10).merge(KeyFilter(10_000))


def test_key_slots_are_the_uri_then_the_digest_hash_with_zero_for_a_missing_one():
    data = b"\x89PNG-bytes"
    example = record(image=Feature("bytes", (data,)), image_uri=Feature("bytes", (b"a.png",)))
    assert record_key_slots(example, "image") == (key_hash(uri_key("a.png")), key_hash(digest_key(data)))
    assert record_key_slots(record(image=Feature("bytes", (data,))), "image") == (0, key_hash(digest_key(data)))
    assert record_key_slots(record(label=Feature("int64", (1,))), "image") == (0, 0)
    assert hashes_bytes(np.array([5, 3, 5], dtype=np.uint64)) == hashes_bytes([3, 5])


def test_an_encoder_gets_the_same_key_slots_from_the_uri_and_the_sha256_it_holds():
    data = bytes(range(200)) * 5
    example = record(image=Feature("bytes", (data,)), image_uri=Feature("bytes", ("dir/ü.jpg".encode(),)),
                     label=Feature("int64", (2,)))
    sha = hashlib.sha256(data).digest()
    assert sha256_key(sha) == digest_key(data)
    assert image_key_slots("dir/ü.jpg", sha) == record_key_slots(example, "image")
