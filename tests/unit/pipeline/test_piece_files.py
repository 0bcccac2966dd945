"""Piece files and shard assembly: byte ranges cut at record boundaries, inputs never destroyed, reruns harmless."""
from __future__ import annotations

import gzip
import hashlib
import os

import pytest

from beam_pipelines.steps.piece_files import PieceWriter, assemble_shard, byte_range, remove_assembled_pieces
from tfrecorder.io import storage
from beam_pipelines.steps.shard_planning import plan_shards
from tfrecorder.format.framing import read_records


def write_piece(directory: str, split: str, records: list[bytes]):
    writer = PieceWriter(directory, split)
    for data in records:
        writer.write(data)
    return writer.close()


def records_of(path: str, compression=None) -> list[bytes]:
    with storage.open_read(path) as raw:
        stream = gzip.GzipFile(fileobj=raw) if compression == "gzip" else raw
        return list(read_records(stream))


def data(n: int, size: int = 10) -> list[bytes]:
    return [f"record-{i:04d}-".encode() + bytes(size * (i % 7)) for i in range(n)]


def test_byte_ranges_follow_the_offsets_sidecar(tmp_path):
    piece = write_piece(str(tmp_path), "TRAIN", data(9))
    assert storage.size(piece.offsets_path) == 8 * 9
    [plan_a, plan_b] = plan_shards([piece], 2, 1 << 20)
    start, end = byte_range(plan_b.ranges[0])
    with open(piece.path, "rb") as stream:
        stream.seek(start)
        assert list(read_records(_Bounded(stream.read(end - start)))) == data(9)[5:]
    assert byte_range(plan_a.ranges[0])[0] == 0


class _Bounded:
    def __init__(self, payload: bytes) -> None:
        self.payload, self.position = payload, 0

    def read(self, size: int) -> bytes:
        chunk = self.payload[self.position:self.position + size]
        self.position += len(chunk)
        return chunk


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_assembly_twice_gives_the_same_shards_and_keeps_its_inputs(tmp_path, compression):
    pieces = [write_piece(str(tmp_path / "pieces"), "TRAIN", data(n)) for n in (5, 1, 8)]
    before = {p.path: open(p.path, "rb").read() for p in pieces}
    plans = plan_shards(pieces, 4, 1 << 20)
    out = str(tmp_path / "out")
    os.makedirs(out)
    first = [assemble_shard(plan, out, compression) for plan in plans]
    shards = {path: open(path, "rb").read() for path in storage.list_files(out)}  # index files included
    again = [assemble_shard(plan, out, compression) for plan in plans]
    assert again == first and {path: open(path, "rb").read() for path in storage.list_files(out)} == shards
    assert {p.path: open(p.path, "rb").read() for p in pieces} == before
    ordered = sorted(pieces, key=lambda p: p.digest)
    expected = [r for p in ordered for r in records_of(p.path)]
    got = [r for shard in first for r in records_of(os.path.join(out, shard["file"]), compression)]
    assert got == expected and [s["records"] for s in first] == [4, 4, 3, 3]


def test_a_whole_single_piece_shard_is_linked_not_moved(tmp_path):
    piece = write_piece(str(tmp_path / "pieces"), "TEST", data(3))
    [plan] = plan_shards([piece], 0, 1 << 20)
    summary = assemble_shard(plan, str(tmp_path), None)
    assert os.path.exists(piece.path) and summary["bytes"] == piece.bytes
    assert records_of(str(tmp_path / summary["file"])) == data(3)


def test_pieces_held_whole_by_an_assembled_shard_are_removed_and_a_repeat_keeps_the_shard(tmp_path):
    pieces_dir = str(tmp_path / "job" / "_pieces")
    pieces = [write_piece(pieces_dir, "TRAIN", data(n)) for n in (5, 1, 8)]
    plans = plan_shards(pieces, 4, 1 << 20)  # 4, 4, 3, 3 records: only the 1-record piece is whole in one shard
    out = str(tmp_path / "job")
    first = [assemble_shard(plan, out, None) for plan in plans]
    shards = {path: open(path, "rb").read() for path in storage.list_files(out) if "_pieces" not in path}
    removed = [remove_assembled_pieces(plan, pieces_dir) for plan in plans]
    [single] = [p for p in pieces if p.records == 1]
    assert sum(removed) == 1 and not os.path.exists(single.path)
    assert all(os.path.exists(p.path) for p in pieces if p is not single)  # cut between two shards: kept
    assert os.path.exists(single.offsets_path)  # sidecars stay until finalize (index files, keys)
    again = [assemble_shard(plan, out, None) for plan in plans]  # a retried or resumed assembly
    assert again == first
    assert {path: open(path, "rb").read() for path in storage.list_files(out) if "_pieces" not in path} == shards
    assert [remove_assembled_pieces(plan, pieces_dir) for plan in plans] == [0, 0, 0, 0]  # missing is fine


def test_whole_pieces_are_removed_only_under_the_pieces_directory(tmp_path):
    inside = write_piece(str(tmp_path / "job" / "_pieces"), "TRAIN", data(3))
    outside = write_piece(str(tmp_path / "parent"), "TRAIN", data(2))  # an append's re-assembled parent shard
    [plan] = plan_shards([inside, outside], 0, 1 << 20)
    assemble_shard(plan, str(tmp_path / "job"), None)
    assert remove_assembled_pieces(plan, str(tmp_path / "job" / "_pieces")) == 1
    assert not os.path.exists(inside.path) and os.path.exists(outside.path)


def test_a_shard_is_made_again_while_all_its_pieces_are_there(tmp_path):
    pieces = [write_piece(str(tmp_path / "pieces"), "TRAIN", data(4)), write_piece(str(tmp_path / "pieces"), "TRAIN", data(2))]
    [plan] = plan_shards(pieces, 0, 1 << 20)
    summary = assemble_shard(plan, str(tmp_path), None)
    (tmp_path / summary["file"]).write_bytes(b"stale")  # not from this plan: every piece is still there
    assert assemble_shard(plan, str(tmp_path), None) == summary
    assert len(records_of(str(tmp_path / summary["file"]))) == 6


def test_assembly_on_gcs_copies_ranges_and_whole_pieces(gcs, tmp_path):
    gcs.bucket("tfr-pieces")
    pieces = [write_piece("gs://tfr-pieces/job/_pieces", "TRAIN", data(n, 1000)) for n in (6, 2)]
    for plans in (plan_shards(pieces, 3, 1 << 20), plan_shards(pieces, 0, 1)):
        out = f"gs://tfr-pieces/job/out-{len(plans)}"
        summaries = [assemble_shard(plan, out, None) for plan in plans]
        assert [s["records"] for s in summaries] == [p.records for p in plans]
        got = [r for s in summaries for r in records_of(f"{out}/{s['file']}")]
        assert sorted(got) == sorted(data(6, 1000) + data(2, 1000))
    assert all(storage.exists(p.path) for p in pieces)


@pytest.mark.parametrize("beside_copy", [False, True])
def test_uncompressed_shards_get_index_files_from_the_offsets_sidecars(tmp_path, monkeypatch, beside_copy):
    """Issue 15: each record's (offset, length) in the shard, for whole pieces and cut ranges alike;
    the same lines when a large shard's index is written on a thread while its bytes are copied."""
    from beam_pipelines.steps import piece_files
    from tfrecorder.format.record_index import parse_index, scan_index

    monkeypatch.setattr(piece_files, "INDEX_BESIDE_COPY_RECORDS", 0 if beside_copy else 10**9)
    pieces = [write_piece(str(tmp_path / "pieces"), "TRAIN", data(n)) for n in (5, 1, 8)]
    out = str(tmp_path / "out")
    os.makedirs(out)
    for plan in plan_shards(pieces, 3, 1 << 20) + plan_shards(pieces[:1], 0, 1 << 20):
        summary = assemble_shard(plan, out, None)
        with open(os.path.join(out, summary["file"]), "rb") as shard:
            scanned = list(scan_index(shard))
        assert parse_index(open(os.path.join(out, summary["index_file"]), "rb").read()) == scanned
        assert len(scanned) == summary["records"]


def test_pieces_record_image_keys_and_a_shard_gathers_those_of_its_ranges(tmp_path):
    from beam_pipelines.steps.base_duplicates import shard_key_hashes
    from beam_pipelines.steps.piece_files import shard_keys_from_pieces
    from tfrecorder.format.example_encoder import Feature, encode_example
    from tfrecorder.format.image_keys import image_key_slots

    examples = [encode_example({"image": Feature("bytes", (bytes([i % 4]) * 9,)),
                                "image_uri": Feature("bytes", (f"{i}.png".encode(),))}) for i in range(9)]
    writer = PieceWriter(str(tmp_path), "TRAIN", keys_prefix="image")
    for example in examples:
        writer.write(example)
    piece = writer.close()
    assert piece.keyed and storage.size(piece.keys_path) == 16 * 9
    for plan in plan_shards([piece], 2, 1 << 20):  # records 0-4 and 5-8: what a scan of each shard finds
        summary = assemble_shard(plan, str(tmp_path), None)
        assert shard_keys_from_pieces(plan) == shard_key_hashes(str(tmp_path / summary["file"]), None, "image_uri")
    given = PieceWriter(str(tmp_path), "TRAIN", keys_prefix="image")  # keys the encoder hands over, not parsed
    for i, example in enumerate(examples):
        given.write([example[:5], example[5:]], keys=image_key_slots(f"{i}.png", hashlib.sha256(bytes([i % 4]) * 9).digest()))
    assert storage.read_bytes(given.close().keys_path) == storage.read_bytes(piece.keys_path)
    unkeyed = write_piece(str(tmp_path), "TRAIN", data(3))
    assert not unkeyed.keyed and shard_keys_from_pieces(plan_shards([unkeyed], 1, 1 << 20)[0]) is None
