"""duplicates="drop": a piece rewritten without its dropped records (offsets and keys sidecars with it), the
dropped rows discarded with their reason, pieces without drops passed on untouched."""
from __future__ import annotations

import dataclasses

import apache_beam as beam
import numpy as np

from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.drop_duplicates import DropFromPieces, piece_name, without_records
from beam_pipelines.steps.piece_files import PieceWriter, assemble_shard, shard_keys_from_pieces
from beam_pipelines.steps.shard_planning import plan_shards
from tfrecorder.format.framing import read_records
from tfrecorder.format.image_keys import hashes_bytes
from tfrecorder.io import storage
from support.job_configs import job_config


def _piece(directory, records, unknown=0, keyed=False):
    writer = PieceWriter(directory, "TRAIN")
    for data in records:
        writer.write(data, unknown)
    piece = writer.close()
    if keyed:  # each record's two key hashes: (100 + i, 200 + i)
        keys = np.array([[100 + i, 200 + i] for i in range(len(records))], dtype="<u8")
        storage.write_bytes(piece.keys_path, keys.tobytes())
        piece = dataclasses.replace(piece, keyed=True)
    return piece


def _records(path):
    with open(path, "rb") as stream:
        return list(read_records(stream))


RECORDS = [f"record-{i}".encode() * (i + 1) for i in range(7)]


def test_a_piece_without_some_records_keeps_the_others_in_order_with_their_offsets_and_keys(tmp_path):
    piece = _piece(str(tmp_path), RECORDS, unknown=1, keyed=True)
    kept = without_records(piece, {0: 1, 3: 0, 4: 1, 6: 0}, str(tmp_path))
    assert kept.path != piece.path and piece_name(kept) != piece_name(piece)
    assert _records(kept.path) == [RECORDS[1], RECORDS[2], RECORDS[5]]
    assert (kept.records, kept.split, kept.unknown_labels) == (3, "TRAIN", 7 - 2)
    assert kept.bytes == storage.size(kept.path)
    ends = np.frombuffer(storage.read_bytes(kept.offsets_path), dtype="<u8")
    assert ends[-1] == kept.bytes and len(ends) == 3
    [plan] = plan_shards([kept], 2, 1 << 20)[1:]  # the second of two shards: a range starting inside the piece
    summary = assemble_shard(plan, str(tmp_path / "out"), None)
    assert _records(str(tmp_path / "out" / summary["file"])) == [RECORDS[5]]
    assert shard_keys_from_pieces(plan) == hashes_bytes(np.array([105, 205], dtype="<u8"))
    again = without_records(piece, {6: 0, 4: 1, 3: 0, 0: 1}, str(tmp_path))  # a retried attempt
    assert again.digest == kept.digest and _records(again.path) == _records(kept.path)
    assert without_records(piece, {2: 0}, str(tmp_path)).digest != kept.digest


def test_every_record_dropped_leaves_an_empty_piece(tmp_path):
    piece = _piece(str(tmp_path), RECORDS[:2])
    empty = without_records(piece, {0: 0, 1: 0}, str(tmp_path))
    assert (empty.records, empty.bytes, storage.size(empty.path)) == (0, 0, 0)
    assert plan_shards([empty], 0, 1 << 20) == []


def test_drop_step_rewrites_pieces_with_drops_and_discards_their_rows(tmp_path):
    config = job_config(temp_dir=str(tmp_path), columns=("image_uri", "label"))
    untouched, holding = _piece(str(tmp_path), RECORDS[:2]), _piece(str(tmp_path), RECORDS)
    dropped = [[(2, 0, ("b.png", "cat"), "duplicate of a.png"), (5, 0, ("c.png", "dog"), "duplicate of a.png")],
               [(2, 0, ("b.png", "cat"), "duplicate of a.png")]]  # a row two groups drop: once
    step = DropFromPieces(config)
    assert list(step.process((piece_name(untouched), {"pieces": [untouched], "dropped": []}))) == [untouched]
    out = list(step.process((piece_name(holding), {"pieces": [holding], "dropped": dropped})))
    [rewritten] = [o for o in out if not isinstance(o, beam.pvalue.TaggedOutput)]
    assert _records(rewritten.path) == [r for i, r in enumerate(RECORDS) if i not in (2, 5)]
    assert [o.value for o in out if isinstance(o, beam.pvalue.TaggedOutput) and o.tag == DISCARD] == [
        ({"image_uri": "b.png", "label": "cat"}, "duplicate of a.png"),
        ({"image_uri": "c.png", "label": "dog"}, "duplicate of a.png")]


def _csv_config(tmp_path, monkeypatch):
    """A CSV of rows n=0…29 (a malformed line after n=3, not numbered) read in batches of 4 rows."""
    from beam_pipelines.steps import read_rows
    from tfrecorder.sources import source_registry

    monkeypatch.setattr(read_rows, "BATCH_ROWS", 4)
    lines = ["split,n"] + [f"TRAIN,{n}" for n in range(4)] + ["TRAIN,4,extra"] + [f"TEST,{n}" for n in range(4, 30)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    table = source_registry.open_table(str(tmp_path / "t.csv"))
    schema = table.infer_schema()
    source = table.row_source(schema, str(tmp_path / "work"))
    config = job_config(source=source, schema=schema, columns=tuple(table.columns), temp_dir=str(tmp_path))
    [part] = source.plan_parts([source.scan(unit) for unit in source.scan_units()])
    return config, part


def test_dropped_image_free_rows_are_read_back_from_their_part_numbered_as_the_encoder_numbers_them(
        tmp_path, monkeypatch):
    """An image-free row's place names its source part and row number (no cells): the piece is rewritten,
    its row goes to REREAD, and ReadDroppedRows gives it its cells from the part (the malformed line is
    not a row; a row two bundle attempts report is read once)."""
    from beam_pipelines.steps.drop_duplicates import REREAD, ReadDroppedRows, rows_of_part
    from tfrecorder.format.resume_files import part_key

    config, part = _csv_config(tmp_path, monkeypatch)
    holding = _piece(str(tmp_path), RECORDS)
    key = part_key(part)
    dropped = [[(1, 0, None, "duplicate of t.csv row 0", key, 4), (3, 0, None, "duplicate of t.csv row 0", key, 29)]]
    out = list(DropFromPieces(config).process((piece_name(holding), {"pieces": [holding], "dropped": dropped})))
    [rewritten] = [o for o in out if not isinstance(o, beam.pvalue.TaggedOutput)]
    assert rewritten.records == len(RECORDS) - 2
    reread = [o.value for o in out if isinstance(o, beam.pvalue.TaggedOutput)]
    assert all(o.tag == REREAD for o in out if isinstance(o, beam.pvalue.TaggedOutput))
    assert reread == [(key, [(4, "duplicate of t.csv row 0"), (29, "duplicate of t.csv row 0")])]  # one a part
    rows = reread[0][1]
    found = list(ReadDroppedRows(config).process((key, {"parts": [part], "rows": [rows, rows[:1]]})))
    assert [(int(values["n"]), values["split"], reason) for values, reason in found] == [
        (4, "TEST", "duplicate of t.csv row 0"), (29, "TEST", "duplicate of t.csv row 0")]
    assert list(ReadDroppedRows(config).process((key, {"parts": [part], "rows": []}))) == []
    assert [int(values["n"]) for values, _ in rows_of_part(config, part, {0: "a", 3: "b", 8: "c"})] == [0, 3, 8]
