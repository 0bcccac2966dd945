"""What identifies an image across versions of a dataset (issue 28): its URI as the table names it, and the SHA-256 of its bytes.

`record_image_keys` finds the two in a serialised tf.train.Example without decoding the rest of it:
it walks the Example's feature map entries, compares each entry's name with the two wanted ones and
skips every other entry by its length, so a record costs a few microseconds whatever it holds (a full
parse costs ~30 µs; an append looking for duplicates reads every record of its base once).
Image bytes are never searched for a pattern, so an image cannot forge a key.

Keys travel as 64-bit hashes (`key_hash`). A shard an append writes gets a keys sidecar
(`keys/<job>.<shard>.keys`: its records' key hashes, sorted, distinct, little-endian uint64), carried
with the shard to later versions, so a later append reads 16 bytes per base record instead of the
record (a shard without one, e.g. of a first conversion, is scanned once and gets one in the version).

`KeyFilter` is a Bloom filter of the new rows' key hashes: the base's keys are checked against it where
they are read (a whole sidecar at once, with NumPy), and only hashes it may hold travel further, so what
the pipeline gathers to decide which new rows are duplicates grows with the new rows, not with the base.
"""
from __future__ import annotations

import hashlib
import math
from typing import Iterable, Optional

import numpy as np

from tfrecorder.format.example_decoder import read_varint

URI, DIGEST = "uri:", "sha256:"


def uri_key(uri: str) -> str:
    return URI + uri


def digest_key(data: bytes) -> str:
    return sha256_key(hashlib.sha256(data).digest())


def sha256_key(sha256: bytes) -> str:
    """`digest_key` of bytes whose SHA-256 (the 32-byte digest) the caller computed already."""
    return DIGEST + sha256.hex()


def key_hash(key: str) -> int:
    """A key as the 64-bit hash it travels and is stored as."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


def hashes_bytes(hashes: Iterable[int]) -> bytes:
    """A keys sidecar's content: the hashes sorted, distinct, as little-endian uint64."""
    values = hashes.astype(np.uint64) if isinstance(hashes, np.ndarray) else np.fromiter(hashes, dtype=np.uint64)
    array = np.unique(values)
    return array.astype("<u8").tobytes()


def read_hashes(data: bytes) -> "np.ndarray":
    """A keys sidecar's hashes (ValueError for a damaged one)."""
    if len(data) % 8:
        raise ValueError(f"a keys file holds 8-byte hashes; this one has {len(data)} bytes")
    return np.frombuffer(data, dtype="<u8").astype(np.uint64)


_LENGTH_DELIMITED = 2
_FIRST = 1 << 3 | _LENGTH_DELIMITED  # field 1, length-delimited: Example.features, map entry key, bytes_list, value


def _first_bytes_value(data: bytes, pos: int, end: int) -> Optional[bytes]:
    """The first value of the bytes_list of the Feature in data[pos:end], or None."""
    while pos < end:
        key, pos = read_varint(data, pos)
        if key & 7 != _LENGTH_DELIMITED:
            return None
        length, pos = read_varint(data, pos)
        if key == _FIRST:  # bytes_list
            inner_end = pos + length
            while pos < inner_end:
                tag, pos = read_varint(data, pos)
                size, pos = read_varint(data, pos)
                if tag == _FIRST:
                    return data[pos:pos + size]
                pos += size
            return None
        pos += length
    return None


def record_image_keys(record: bytes, prefix: str) -> list[str]:
    """The keys of a record's image `prefix`: its URI key (the `<prefix>_uri` feature) and the digest of
    its bytes (the `<prefix>` feature), those present (URI first). ValueError for bytes that are no Example."""
    names = {prefix.encode("utf-8"): DIGEST, (prefix + "_uri").encode("utf-8"): URI}
    data = record
    found: dict[str, str] = {}
    try:
        pos, size = 0, len(data)
        while pos < size:
            key, pos = read_varint(data, pos)
            if key & 7 != _LENGTH_DELIMITED:
                raise ValueError("not a tf.train.Example")
            length, pos = read_varint(data, pos)
            if key != _FIRST:  # not Example.features
                pos += length
                continue
            end, pos = pos + length, pos
            while pos < end:  # map entries; one-byte varints (tags, short names) read inline: the hot loop
                pos += 1 if data[pos] < 0x80 else read_varint(data, pos)[1] - pos  # the entry's tag
                if data[pos] < 0x80:
                    entry_size, pos = data[pos], pos + 1
                else:
                    entry_size, pos = read_varint(data, pos)
                entry_end = pos + entry_size
                if data[pos] == _FIRST:
                    name_size, at = (data[pos + 1], pos + 2) if data[pos + 1] < 0x80 else read_varint(data, pos + 1)
                    kind = names.get(data[at:at + name_size])
                    if kind is not None:
                        at += name_size
                        _value_tag, at = read_varint(data, at)
                        value_size, at = read_varint(data, at)
                        value = _first_bytes_value(data, at, at + value_size)
                        if value is not None:
                            found[kind] = digest_key(value) if kind == DIGEST else uri_key(value.decode("utf-8", "replace"))
                pos = entry_end
            if pos > size:
                raise IndexError
    except IndexError:
        raise ValueError("truncated tf.train.Example") from None
    return [found[kind] for kind in (URI, DIGEST) if kind in found]


def record_key_slots(record: bytes, prefix: str) -> tuple[int, int]:
    """A record's image keys as two hashes, (URI key, bytes digest key), 0 for one it lacks: the fixed
    16 bytes per record of a piece's keys sidecar (written while the record is encoded)."""
    found = record_image_keys(record, prefix)
    uri = next((key_hash(key) for key in found if key.startswith(URI)), 0)
    digest = next((key_hash(key) for key in found if key.startswith(DIGEST)), 0)
    return uri, digest


def image_key_slots(uri: str, sha256: bytes) -> tuple[int, int]:
    """`record_key_slots` of a record the caller is writing, from what it put there: the image's URI (the
    `<prefix>_uri` value) and the SHA-256 of its bytes (the `<prefix>` value). An encoder hashes each
    image once, for this and for its content digest (duplicate_groups.content_digest), and parses nothing."""
    return key_hash(uri_key(uri)), key_hash(sha256_key(sha256))


class KeyFilter:
    """A Bloom filter of keys: `may_hold(key)` is True for every added key, and for others with about
    `false_rate` probability; its size is fixed by the `capacity` it is built for. Merging two filters of
    the same size is the union of their sets (a Beam CombineFn's merge)."""

    def __init__(self, capacity: int, false_rate: float = 0.001, bits: Optional[int] = None,
                 hashes: Optional[int] = None) -> None:
        capacity = max(int(capacity), 1)
        self.bits = bits or max(64, int(math.ceil(-capacity * math.log(false_rate) / math.log(2) ** 2)))
        self.hashes = hashes or max(1, round(self.bits / capacity * math.log(2)))
        self.array = bytearray((self.bits + 7) // 8)

    def _positions(self, value: int) -> Iterable[int]:
        first, second = value & 0xFFFFFFFF, (value >> 32) | 1
        return ((first + i * second) % self.bits for i in range(self.hashes))

    def add(self, value: int) -> None:
        """Add a key hash (`key_hash`)."""
        for position in self._positions(value):
            self.array[position >> 3] |= 1 << (position & 7)

    def may_hold(self, value: int) -> bool:
        array = self.array
        return all(array[position >> 3] & (1 << (position & 7)) for position in self._positions(value))

    def may_hold_all(self, values: "np.ndarray") -> "np.ndarray":
        """`may_hold` of each hash of a uint64 array, at once."""
        values = np.asarray(values, dtype=np.uint64)
        first, second = values & np.uint64(0xFFFFFFFF), (values >> np.uint64(32)) | np.uint64(1)
        bits = np.frombuffer(bytes(self.array), dtype=np.uint8)
        held = np.ones(len(values), dtype=bool)
        for i in range(self.hashes):  # < 2^32 + i * 2^32: no uint64 overflow for i < 2^31
            position = (first + np.uint64(i) * second) % np.uint64(self.bits)
            byte = bits[(position >> np.uint64(3)).astype(np.int64)]
            held &= (byte >> (position & np.uint64(7)).astype(np.uint8)) & 1 == 1
        return held

    def merge(self, other: "KeyFilter") -> "KeyFilter":
        if (other.bits, other.hashes) != (self.bits, self.hashes):
            raise ValueError("only filters of the same size merge")
        size = len(self.array)
        merged = int.from_bytes(self.array, "little") | int.from_bytes(other.array, "little")
        self.array = bytearray(merged.to_bytes(size, "little"))
        return self

    def empty_like(self) -> "KeyFilter":
        return KeyFilter(1, bits=self.bits, hashes=self.hashes)
