"""tfrecorder.sources.staged_rows: a staged DataFrame's Arrow file read back row group by row group."""
from __future__ import annotations

import numpy as np
import pandas as pd

from tfrecorder.core.schema import Schema
from tfrecorder.sources import dataframe_staging
from tfrecorder.sources.staged_rows import StagedRows, read_staged_batches, staged_parts


def frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame({"split": ["TRAIN", "TEST"] * (rows // 2), "n": np.arange(rows),
                         "vec": [np.array([i, 0.5]) for i in range(rows)], "s": [f"v{i}" for i in range(rows)]})


def test_each_row_group_is_read_whole_in_batches_of_the_readers_size(tmp_path, monkeypatch):
    monkeypatch.setattr(dataframe_staging, "MAX_ROW_GROUP_ROWS", 30)
    data, path = frame(100), str(tmp_path / "rows.arrow")
    schema = Schema({"split": "SplitKey", "n": "IntegerInput", "vec": "FloatInput[2]", "s": "StringInput"})
    row_groups = dataframe_staging.stage_frame(data, schema, path)
    assert row_groups == 4  # four groups' worth of at most 30 rows: 25 each
    batches = list(read_staged_batches(staged_parts(path, row_groups)[1], ["n", "s"], batch_rows=10))
    assert [b.num_rows for b in batches] == [10, 10, 5] and batches[0].schema.names == ["n", "s"]
    assert [n for b in batches for n in b.column("n").to_pylist()] == list(range(25, 50))
    rows = StagedRows(staged_parts(path, row_groups))
    read = [row for part in rows.known_parts() for row in rows.read_part(part, list(data.columns), schema)]
    assert [row["n"] for row in read] == list(range(100)) and read[7]["vec"] == [7.0, 0.5] and read[7]["s"] == "v7"
    assert rows.null_facts(rows.known_parts()[0], ["n"]) == {}  # no footer settles a column: it is read


def test_a_job_on_gcs_stages_a_compressed_file_its_workers_read_the_same(gcs, tmp_path):
    data = frame(40)
    schema = Schema({"split": "SplitKey", "n": "IntegerInput", "vec": "FloatInput[2]", "s": "StringInput"})
    local, remote = str(tmp_path / "rows.arrow"), "gs://tfr-staged/job/_work/rows.arrow"
    gcs.bucket("tfr-staged")
    assert dataframe_staging.stage_frame(data, schema, local) == dataframe_staging.stage_frame(data, schema, remote)
    plain, compressed = (StagedRows(staged_parts(path, 1)) for path in (local, remote))
    assert list(plain.read_part(plain.parts[0], ["n", "vec"], schema)) == \
        list(compressed.read_part(compressed.parts[0], ["n", "vec"], schema))
    assert len(gcs.download(remote)) < (tmp_path / "rows.arrow").stat().st_size  # zstd buffers
