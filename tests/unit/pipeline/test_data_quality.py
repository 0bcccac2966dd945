"""The finalize stage's statistics files, duplicate counts and duplicates="fail"."""
import pytest

from beam_pipelines.steps.data_quality import leak_error, write_quality_files
from support.job_configs import job_config
from tfrecorder.core import types
from tfrecorder.core.schema import Schema
from tfrecorder.errors import TableError
from tfrecorder.format.statistics_files import read_statistics
from tfrecorder.rows.dataset_statistics import DatasetStatistics

LEAK = {"counts": {"groups": 1, "rows": 2, "redundant": 1, "leaking_groups": 1, "leaking_rows": 2},
        "leaks": [[["TRAIN", "a.jpg"], ["TEST", "b.jpg"]]]}


def test_fail_mode_names_the_leaking_groups(tmp_path):
    config = job_config(temp_dir=str(tmp_path), duplicates="fail")
    with pytest.raises(TableError, match=r"train/test leakage: 1 duplicate group.*a\.jpg \(TRAIN\) = b\.jpg \(TEST\)"):
        write_quality_files(config, {}, None, LEAK)
    assert leak_error({"counts": {"leaking_groups": 0}}) is None


def test_report_mode_writes_statistics_and_counts(tmp_path):
    schema = Schema({"n": types.IntegerInput})
    stats = DatasetStatistics(schema)
    stats.add_rows("TRAIN", [{"n": 1}])
    entries = write_quality_files(job_config(temp_dir=str(tmp_path), schema=schema), {}, stats, LEAK)
    assert entries == {"duplicates": LEAK["counts"]}
    assert read_statistics(str(tmp_path))["splits"]["TRAIN"]["rows"] == 1
    assert write_quality_files(job_config(temp_dir=str(tmp_path)), {}, None, None) == {}
