"""The finalize stage's statistics files, duplicate counts and duplicates="fail"."""
import pytest

from beam_pipelines.steps.data_quality import leak_error, write_quality_files
from beam_pipelines.steps.find_duplicates import write_bucket
from tfrecorder.rows.duplicate_groups import bucket_of, content_digest
from support.job_configs import job_config
from tfrecorder.core import types
from tfrecorder.core.schema import Schema
from tfrecorder.errors import TableError
from tfrecorder.format.statistics_files import read_statistics
from tfrecorder.rows.dataset_statistics import DatasetStatistics


def _leaking_bucket(config):
    same = content_digest(b"same")
    return list(write_bucket((bucket_of(same), [[(same, "TRAIN", "a.jpg"), (same, "TEST", "b.jpg")]]), config))


def test_fail_mode_names_the_leaking_groups(tmp_path):
    config = job_config(temp_dir=str(tmp_path), duplicates="fail")
    with pytest.raises(TableError, match=r"train/test leakage: 1 duplicate group.*a\.jpg \(TRAIN\) = b\.jpg \(TEST\)"):
        write_quality_files(config, {}, None, _leaking_bucket(config))
    assert leak_error({"counts": {"leaking_groups": 0}}) is None
    assert leak_error({"counts": {"leaking_groups": 0, "near": {"leaking_groups": 2}}, "leaks": []}) is not None


def test_report_mode_writes_statistics_and_counts(tmp_path):
    schema = Schema({"n": types.IntegerInput})
    stats = DatasetStatistics(schema)
    stats.add_rows("TRAIN", [{"n": 1}])
    config = job_config(temp_dir=str(tmp_path), schema=schema)
    entries = write_quality_files(config, {}, stats, _leaking_bucket(config))
    assert entries["duplicates"]["leaking_groups"] == 1 and entries["duplicates"]["near"]["groups"] == 0
    assert read_statistics(str(tmp_path))["splits"]["TRAIN"]["rows"] == 1
    assert (tmp_path / "duplicates.csv").read_text().count("\n") == 3
    assert write_quality_files(job_config(temp_dir=str(tmp_path / "none")), {}, None, None) == {}
    assert write_quality_files(config, {}, None, [])["duplicates"]["groups"] == 0  # every row discarded
    assert read_statistics(str(tmp_path))["splits"] == {}


def test_drop_mode_counts_the_dropped_rows(tmp_path):
    config = job_config(temp_dir=str(tmp_path), duplicates="drop")
    counts = write_quality_files(config, {}, None, _leaking_bucket(config))["duplicates"]
    assert counts["dropped"] == 1 and counts["leaking_groups"] == 1  # the groups found, before dropping
