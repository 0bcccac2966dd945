"""beam_pipelines.steps.encode_columns: EncodePart discards bad rows and rolls pieces over at max_shard_bytes."""
from __future__ import annotations

import pandas as pd
from apache_beam.pvalue import TaggedOutput
from apache_beam.utils.windowed_value import WindowedValue

from beam_pipelines.steps.collect_statistics import QUALITY, STATISTICS_KEY
from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.encode_columns import EncodePart
from beam_pipelines.steps.shard_planning import Piece
from tfrecorder.core.progress_bar import rows_reported
from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.framing import read_records
from tfrecorder.options.job_config import JobConfig
from tfrecorder.sources import dataframe_source, dataframe_staging

MAX_SHARD_BYTES = 300


def _encode(tmp_path, frame: pd.DataFrame, monkeypatch, **options) -> tuple[list, list]:
    """Run EncodePart over the frame's staged row groups as one bundle; (process outputs, finish_bundle outputs)."""
    monkeypatch.setattr(dataframe_staging, "MAX_ROW_GROUP_ROWS", 40)
    table = dataframe_source.open_dataframe(frame)
    schema = table.infer_schema()
    config = JobConfig(source=table.row_source(schema, str(tmp_path / "job" / "_work")), schema=schema,
                       columns=tuple(table.columns), base_dir="", final_dir="", temp_dir=str(tmp_path / "job"),
                       job_name="t", runner="DirectRunner", split_ratios=(0.8, 0.1, 0.1), num_shards=0,
                       max_shard_bytes=MAX_SHARD_BYTES, compression=None, image_size=None, validate="header",
                       progress_dir=str(tmp_path / "progress"), **options)
    (tmp_path / "progress").mkdir()
    encode = EncodePart(config)
    encode.setup()
    encode.start_bundle()
    processed = [out for part in config.source.known_parts() for out in encode.process(part, {"label": ["cat", "dog"]})]
    return processed, list(encode.finish_bundle())


def _frame() -> pd.DataFrame:
    frame = pd.DataFrame({"split": ["TRAIN"] * 80 + ["VALIDATION"] * 20, "n": range(100),
                          "label": (["cat", "dog"] * 50)})
    frame.loc[7, "split"] = "HOLDOUT"
    frame.loc[90, "label"] = "owl"  # not among the TRAIN labels
    return frame


def test_pieces_roll_over_at_max_shard_bytes_and_hold_every_good_row(tmp_path, monkeypatch):
    processed, finished = _encode(tmp_path, _frame(), monkeypatch)
    pieces = [out for out in processed if isinstance(out, Piece)]
    assert not [out for out in finished if isinstance(out, WindowedValue)]  # each split's last piece ends with
    # its part (issue 27), not with the bundle; the bundle's statistics leave at its end (issue 29)
    [statistics] = [out.value.value[1] for out in finished  # one per bundle, in the global window
                    if isinstance(out, TaggedOutput) and out.tag == QUALITY and out.value.value[0] == STATISTICS_KEY]
    assert statistics.rows == {"TRAIN": 79, "VALIDATION": 20}
    rolled = [piece for piece in pieces if piece.bytes >= MAX_SHARD_BYTES]
    closed = [piece for piece in pieces if piece.bytes < MAX_SHARD_BYTES]  # a part's last piece of a split
    assert len(rolled) > 3 and {piece.split for piece in closed} == {"TRAIN", "VALIDATION"}
    found = {}
    for piece in rolled + closed:
        with open(piece.path, "rb") as stream:
            records = list(read_records(stream))
        assert len(records) == piece.records
        smallest_last = piece.bytes - len(records[-1]) - 16  # the record that crossed the cap ends its piece
        assert smallest_last < MAX_SHARD_BYTES
        for record in records:
            found[int(parse_example(record)["n"][0])] = piece.split
    assert found == {n: "TRAIN" if n < 80 else "VALIDATION" for n in range(100) if n != 7}
    assert sum(piece.unknown_labels for piece in rolled + closed) == 1
    assert rows_reported(str(tmp_path / "progress")) == 100  # discarded rows are done too


def test_bad_rows_are_discarded_with_their_values(tmp_path, monkeypatch):
    processed, _ = _encode(tmp_path, _frame(), monkeypatch)
    discards = [out.value for out in processed if isinstance(out, TaggedOutput) and out.tag == DISCARD]
    assert [(values, reason.split(":")[0]) for values, reason in discards] == [
        ({"split": "HOLDOUT", "n": 7, "label": "dog"}, "unknown split")]


def test_with_drop_each_rows_digest_carries_its_piece_and_record_even_across_a_roll_over(tmp_path, monkeypatch):
    """duplicates="drop" (issue 29): a block row's place is the piece file and record number its Example
    was written to (a batch's records spread over several pieces), with its unknown labels and its part;
    its row number is its row's in the part, counting the rows discarded before it (row 7)."""
    import hashlib

    from tfrecorder.rows.duplicate_groups import DigestBlock

    processed, finished = _encode(tmp_path, _frame(), monkeypatch, duplicates="drop")
    pieces = {piece.path.rsplit("/", 1)[-1]: piece for piece in processed if isinstance(piece, Piece)}
    records = {}
    for name, piece in pieces.items():
        with open(piece.path, "rb") as stream:
            records[name] = list(read_records(stream))
    blocks = [block for out in processed + finished if isinstance(out, TaggedOutput) and out.tag == QUALITY
              for key, found in [getattr(out.value, "value", out.value)] if key != STATISTICS_KEY
              for block in found if isinstance(block, DigestBlock)]
    seen = set()
    for block in blocks:
        assert block.places is not None and block.source and len(block.places) == len(block.rows)
        for i, (piece, record, unknown) in enumerate(block.places.tolist()):
            data = records[block.pieces[piece]][record]
            assert hashlib.blake2b(data, digest_size=16).digest() == block.digests[16 * i:16 * i + 16]
            row = int(block.rows[i]) + 40 * int(block.part.rsplit(" ", 1)[-1])  # 40 rows a row group
            assert int(parse_example(data)["n"][0]) == row and unknown == (row == 90)
            seen.add(row)
    assert seen == set(range(100)) - {7} and len({block.source for block in blocks}) == 3  # 3 row groups
    assert len(pieces) > 3
