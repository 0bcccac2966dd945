"""beam_pipelines.steps.encode_columns: EncodePart discards bad rows and rolls pieces over at max_shard_bytes;
a large local job's parts are encoded by forked processes into the job the in-process encoder makes."""
from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pandas as pd
import pytest
from apache_beam.pvalue import TaggedOutput
from apache_beam.utils.windowed_value import WindowedValue

import tfrecorder
from beam_pipelines.launches import runners
from beam_pipelines.steps.collect_statistics import QUALITY, STATISTICS_KEY
from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.encode_columns import EncodePart
from beam_pipelines.steps.shard_planning import Piece
from support.piece_writers import log_piece_writers, piece_writers
from support.replay import REPLAY, snapshot
from tfrecorder.core.progress_bar import rows_reported
from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.framing import read_records
from tfrecorder.options.job_config import JobConfig
from tfrecorder.sources import csv_slicing, dataframe_source, dataframe_staging

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
    from tfrecorder.rows.duplicate_groups import DigestBlock, record_digests

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
            assert record_digests([data]) == block.digests[16 * i:16 * i + 16]
            row = int(block.rows[i]) + 25 * int(block.part.rsplit(" ", 1)[-1])  # 40 rows at most: 4 groups of 25
            assert int(parse_example(data)["n"][0]) == row and unknown == (row == 90)
            seen.add(row)
    assert seen == set(range(100)) - {7} and len({block.source for block in blocks}) == 4  # 4 row groups
    assert len(pieces) > 3


# ---------------------------------------------------------------- parts encoded by forked processes

@pytest.fixture
def two_encoders(monkeypatch, tmp_path) -> Path:
    """Every local table job of several parts (40-row row groups, 2,000-byte CSV ranges) on two forked
    encoding processes; returns the log of piece writers: a "pid path" line per piece file opened (a
    file, so that the children's writes show)."""
    monkeypatch.setattr(runners, "POOL_START_SECONDS", 0.0)
    monkeypatch.setattr(runners, "usable_cores", lambda: 2)
    monkeypatch.setattr(dataframe_staging, "MAX_ROW_GROUP_ROWS", 40)
    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", 2_000)  # batches still pay (64 records)
    return log_piece_writers(monkeypatch, tmp_path / "piece-writers.log")


def test_large_local_tables_get_a_process_per_core_and_never_more_than_parts():
    rows = 1_000_000  # ~6 µs a row (TABULAR_ROW_SECONDS): 3 s of work, 6 ms to fork
    assert runners.encode_processes(rows, None, cores=2, tabular=True) == 2
    assert runners.encode_processes(rows, None, cores=4, tabular=True, parts=3) == 3
    assert runners.encode_processes(rows, None, cores=2, tabular=True, parts=1) == 1  # nothing to share
    assert runners.encode_processes(10_000, None, cores=2, tabular=True) == 1  # forking costs more than it saves
    assert runners.encode_processes(10_000, None, cores=2) == 2  # 10,000 image rows do pay
    assert runners.encode_processes(rows, None, cores=2, tabular=True, local_files=False) == 1


def test_a_forked_encoder_shows_its_rows_on_the_bar_and_answers_with_the_part_manifest(tmp_path, monkeypatch):
    processed, finished = _encode(tmp_path, _frame(), monkeypatch, resumable=True, encode_processes=2)
    pieces = [out for out in processed + finished if isinstance(getattr(out, "value", out), Piece)]
    assert sum(getattr(piece, "value", piece).records for piece in pieces) == 99
    assert rows_reported(str(tmp_path / "progress")) == 100  # each child's own file, batch by batch
    assert len(list((tmp_path / "progress").iterdir())) == 2


def _table(tmp_path, kind: str):
    """300 rows, 9 of them discarded (an unknown split, an empty label), as a DataFrame, a CSV file or a
    Parquet file (of 40-row row groups, which the children read mapped: storage.open_source)."""
    frame = pd.DataFrame({"split": (["TRAIN"] * 8 + ["VALIDATION", "TEST"]) * 30, "n": range(300),
                          "x": [n * 0.25 for n in range(300)], "label": ["cat", "dog", "owl"] * 100})
    frame.loc[[7, 150, 299], "split"] = "HOLDOUT"
    frame.loc[range(20, 280, 45), "label"] = ""
    if kind == "dataframe":
        return frame
    if kind == "parquet":
        frame.to_parquet(tmp_path / "table.parquet", index=False, row_group_size=40)
        return str(tmp_path / "table.parquet")
    frame.to_csv(tmp_path / "table.csv", index=False)
    return str(tmp_path / "table.csv")


@pytest.mark.parametrize("kind", ["dataframe", "csv", "parquet"])
def test_parts_encoded_by_two_forked_processes_make_the_job_the_in_process_encoder_makes(kind, tmp_path, two_encoders):
    """Pieces depend only on their part, so the same shards, records, statistics and discards."""
    source = _table(tmp_path, kind)
    single = tfrecorder.convert(source, str(tmp_path / "single"), job_label="t", progress=False,
                                dataflow_options={"direct_num_workers": 1})
    assert piece_writers(two_encoders) == {os.getpid()}  # direct_num_workers=1 keeps the job in this process
    two_encoders.unlink()
    pooled = tfrecorder.convert(source, str(tmp_path / "pooled"), job_label="t", progress=False)
    writers = piece_writers(two_encoders)
    assert len(writers) == 2 and os.getpid() not in writers  # both children wrote pieces, the parent none
    assert pooled["discarded"] == 9 and sum(pooled["written"].values()) == 291
    assert snapshot(pooled["tfrecord_dir"]) == snapshot(single["tfrecord_dir"])
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("kind", ["dataframe", "csv"])
def test_replaying_every_bundle_of_a_pooled_table_job_gives_the_same_job(kind, tmp_path, two_encoders):
    source = _table(tmp_path, kind)
    normal = tfrecorder.convert(source, str(tmp_path / "normal"), job_label="t", progress=False, num_shards=3)
    pieces = len(two_encoders.read_text().splitlines())
    replayed = tfrecorder.convert(source, str(tmp_path / "replayed"), job_label="t", progress=False, num_shards=3,
                                  dataflow_options=REPLAY)
    # the second attempt of each part found it committed by the first (issue 27): no piece written again
    assert len(two_encoders.read_text().splitlines()) == 2 * pieces > 0
    assert os.getpid() not in piece_writers(two_encoders)  # forked children wrote them all
    assert snapshot(replayed["tfrecord_dir"]) == snapshot(normal["tfrecord_dir"])


def test_a_storage_failure_in_a_forked_encoder_fails_the_job_and_the_next_run_resumes(tmp_path, two_encoders,
                                                                                     monkeypatch):
    """An outage while a child reads its part fails the run with the in-process error, publishes nothing
    and leaves no process behind; the next conversion continues with the parts committed."""
    from beam_pipelines.steps import encode_columns
    from tfrecorder.errors import StorageReadError

    source = _table(tmp_path, "dataframe")
    real_read = encode_columns.read_batches

    def outage(config, part, **options):
        if part.row_group == 3:
            raise StorageReadError(5, f"could not read {part.path}: outage")
        return real_read(config, part, **options)

    with monkeypatch.context() as patched:
        patched.setattr(encode_columns, "read_batches", outage)
        with pytest.raises(StorageReadError, match="outage; the conversion stopped and nothing was published"):
            tfrecorder.convert(source, str(tmp_path / "out"), progress=False)
    assert multiprocessing.active_children() == [] and os.getpid() not in piece_writers(two_encoders)
    (kept,) = (tmp_path / "out").glob(".incomplete-*")
    result = tfrecorder.convert(source, str(tmp_path / "out"), progress=False)
    assert result["resumed"] is True and sum(result["written"].values()) == 291 and result["discarded"] == 9
