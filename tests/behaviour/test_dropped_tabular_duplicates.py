"""Issue 29, point 4, for image-free tables: duplicates="drop" keeps one row per group of rows with identical
written values (the one duplicates.csv marks kept) and discards the others with their own cells as
`duplicate of <kept row's id>` (duplicates.csv's "<part> row <i>")."""
import csv
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tfrecorder
from support.replay import REPLAY, snapshot
from tfrecorder.format.statistics_files import DUPLICATES_FILE
from tfrecorder.sources import parquet_parts

DISTINCT, COPIES = 30, 3


def _table(rows: int = DISTINCT * COPIES) -> pd.DataFrame:
    """Rows whose values repeat every DISTINCT rows (groups of COPIES), each copy in another split (each
    group leaks: the split is not a written value), and row 5 discarded for its split."""
    frame = pd.DataFrame({
        "split": [("TRAIN", "TEST", "VALIDATION")[(i // DISTINCT) % 3] for i in range(rows)],
        "n": [i % DISTINCT for i in range(rows)],
        "x": [(i % DISTINCT) * 0.25 for i in range(rows)],
        "label": [("a", "b")[i % 2] for i in range(DISTINCT)] * (rows // DISTINCT),
    })
    frame.loc[5, "split"] = "HOLDOUT"  # discarded as an unknown split: row 5 is no group's member
    return frame


def _read(path):
    with open(path) as stream:
        return list(csv.DictReader(stream))


def _written(job):
    import tensorflow as tf

    from tfrecorder.format.metadata_file import JobMetadata

    for split, info in JobMetadata.read(job).document["splits"].items():
        for shard in info["shards"]:
            for record in tf.data.TFRecordDataset(os.path.join(job, shard["file"])):
                example = tf.train.Example.FromString(record.numpy())
                yield split, example.features.feature["n"].int64_list.value[0]


def _check_drop(result, frame, row_index, other_discards):
    """One row per group written (the one duplicates.csv marks kept); every other member discarded with
    its own cells as "duplicate of <kept row's id>"."""
    job = result.tfrecord_dir
    groups = {}
    for row in _read(os.path.join(job, DUPLICATES_FILE)):
        groups.setdefault(row["group"], []).append(row)
    assert len(groups) == DISTINCT
    written, dropped = [], []
    for members in groups.values():
        assert [member["kept"] for member in members] == ["yes"] + ["no"] * (len(members) - 1)
        kept = row_index(members[0]["row"])
        written.append((frame["split"][kept], frame["n"][kept]))
        for member in members[1:]:
            i = row_index(member["row"])
            assert member["split"] == frame["split"][i] and frame["n"][i] == frame["n"][kept]
            dropped.append((frame["split"][i], frame["n"][i], frame["label"][i], f"duplicate of {members[0]['row']}"))
    assert sorted(_written(job)) == sorted(written) and sorted(n for _s, n in written) == list(range(DISTINCT))
    found = [(row["split"], int(row["n"]), row["label"], row["reason"])
             for row in _read(os.path.join(job, "discarded.csv")) if row["reason"].startswith("duplicate of")]
    assert sorted(found) == sorted(dropped) and len(dropped) == len(frame) - 1 - DISTINCT  # row 5 is no member
    metadata = result.metadata
    assert metadata["duplicates"]["dropped"] == len(dropped) == metadata["discard_reasons"]["duplicate of"]
    assert metadata["discarded"] == len(dropped) + other_discards
    assert "leakage" not in repr(result)


def test_a_dataframe_drops_duplicates_with_many_pieces_identically_under_replay(tmp_path):
    frame = _table()
    options = {"duplicates": "drop", "max_shard_bytes": 400, "progress": False}  # many pieces
    plain = tfrecorder.convert(frame, tmp_path / "plain", **options)
    replayed = tfrecorder.convert(frame, tmp_path / "replayed", beam_options=REPLAY, **options)
    assert snapshot(replayed.tfrecord_dir) == snapshot(plain.tfrecord_dir)
    _check_drop(plain, frame, lambda row: int(row.rsplit(" ", 1)[-1]), 1)  # "DataFrame row group 0 row <i>"


@pytest.mark.parametrize("kind", ["csv", "parquet", "parquet-sliced"])
def test_csv_and_parquet_sources_drop_with_the_dropped_rows_own_cells(tmp_path, kind, monkeypatch):
    """Several parts (Parquet row groups of 20 rows, or of 45 read as three slices whose rows keep their
    numbers in the row group; CSV with a malformed line, not numbered as a row)."""
    frame = _table()
    if kind.startswith("parquet"):
        path = tmp_path / "table.parquet"
        group = 45 if kind == "parquet-sliced" else 20
        monkeypatch.setattr(parquet_parts, "SLICE_ROWS", 20)  # 45 rows: three slices (16, 15, 14)
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=group)

        def row_name(row):  # "table.parquet row group <g> row <i>"
            return group * int(row.split(" ")[3]) + int(row.rsplit(" ", 1)[-1])
    else:
        path = tmp_path / "table.csv"
        text = frame.to_csv(index=False).splitlines()
        text.insert(3, "TRAIN,1")  # a field short: a malformed line
        path.write_text("\n".join(text) + "\n")

        def row_name(row):  # "CSV bytes from 0 row <i>"
            return int(row.rsplit(" ", 1)[-1])
    result = tfrecorder.convert(str(path), tmp_path / "out", duplicates="drop", progress=False)
    _check_drop(result, frame, row_name, 2 if kind == "csv" else 1)


def test_a_resumed_image_free_drop_job_publishes_what_an_uninterrupted_one_does(tmp_path, monkeypatch):
    """A committed part's quality file holds its rows' places; a continued job drops the same records
    from the same committed pieces and reads the same cells back from the source."""
    from pathlib import Path

    from support.resume_runs import convert_code, incomplete, job_contents, manifests, run_killed
    from tfrecorder.format import resume_files
    from tfrecorder.sources import csv_slicing

    source = tmp_path / "table.csv"
    lines = ["split,label,value,text"] + [f"{('TRAIN', 'TRAIN', 'VALIDATION', 'TEST')[i // 500 % 4]},"
                                          f"{'abc'[i % 500 % 3]},{(i % 500) * 0.5},row {i % 500}" for i in range(6000)]
    source.write_text("\n".join(lines) + "\n")
    options = {"num_shards": 2, "duplicates": "drop"}
    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", 20_000)  # several parts, as the killed run has
    reference = tfrecorder.convert(str(source), str(tmp_path / "reference"), progress=False,
                                   beam_options={"direct_num_workers": 1}, **options)
    assert sum(info["records"] for info in reference.metadata["splits"].values()) == 500
    assert reference.metadata["discard_reasons"]["duplicate of"] == 5500
    output = tmp_path / "out"
    run_killed(convert_code(source, output, **options), lambda: manifests(output) >= 2)
    (job,) = incomplete(output)
    assert 2 <= len(resume_files.committed_parts(str(job)))
    result = tfrecorder.convert(str(source), str(output), progress=False, beam_options={"direct_num_workers": 1},
                                **options)
    assert result["resumed"] is True
    assert job_contents(Path(result["tfrecord_dir"])) == job_contents(Path(reference["tfrecord_dir"]))


def test_a_csv_too_wide_for_the_columnar_encoder_drops_through_the_row_path(tmp_path, monkeypatch):
    """Records too wide to pay for batches are read row by row (the image graph's path): there a row is
    named by its values (duplicates.csv's JSON) and carries its cells with its place."""
    import json

    from tfrecorder.sources import csv_slicing

    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", 200)
    lines = ["split,n,text"] + [f"{('TRAIN', 'TEST')[i // 10 % 2]},{i % 10},word {i % 10}" for i in range(30)]
    (tmp_path / "wide.csv").write_text("\n".join(lines) + "\n")
    result = tfrecorder.convert(str(tmp_path / "wide.csv"), tmp_path / "out", progress=False, duplicates="drop",
                                beam_options=REPLAY)
    assert {split: info["records"] for split, info in result.metadata["splits"].items()} == {"TEST": 10}
    dropped = _read(os.path.join(result.tfrecord_dir, "discarded.csv"))
    assert len(dropped) == 20 == result.metadata["duplicates"]["dropped"]
    for row in dropped:  # the two TRAIN copies of each TEST row (the smaller JSON: "TEST" < "TRAIN")
        kept = json.loads(row["reason"][len("duplicate of "):])
        assert row["split"] == "TRAIN" and kept == {"split": "TEST", "n": row["n"], "text": row["text"]}
