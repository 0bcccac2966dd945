"""The duplicates stage: bucket files written idempotently, merged into duplicates.csv with counts."""
import csv

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.steps.find_duplicates import bucket_path, find_duplicates, write_bucket, write_duplicates_file
from tfrecorder.format.statistics_files import DUPLICATES_FILE
from tfrecorder.rows.duplicate_groups import bucket_of, content_digest
from support.job_configs import job_config


def _config(tmp_path):
    return job_config(final_dir=str(tmp_path / "final"), temp_dir=str(tmp_path / "job"))


def test_bucket_groups_written_once_and_merged(tmp_path):
    config = _config(tmp_path)
    same, lone = content_digest(b"a"), content_digest(b"b")
    bucket = bucket_of(same)
    batches = [[(same, "TRAIN", "x.jpg")], [(same, "TEST", "y.jpg"), (lone, "TRAIN", "z.jpg")]]
    [part] = list(write_bucket((bucket, batches), config))
    assert part.path == bucket_path(config, bucket) and part.counts.leaking_groups == 1
    assert list(write_bucket((bucket_of(lone), [[(lone, "TRAIN", "z.jpg")]]), config)) == []
    again = list(write_bucket((bucket, batches), config))[0]  # a retry writes the same bytes
    assert again == part
    destination = str(tmp_path / "job" / DUPLICATES_FILE)
    summary = write_duplicates_file([part], destination)
    assert summary["counts"]["groups"] == 1 and summary["leaks"] == [[["TRAIN", "x.jpg"], ["TEST", "y.jpg"]]]
    rows = list(csv.reader(open(destination)))
    assert rows[0] == ["group", "kind", "split", "row", "kept", "leak"]
    assert [r[2:] for r in rows[1:]] == [["TRAIN", "x.jpg", "yes", "yes"], ["TEST", "y.jpg", "no", "yes"]]


def test_pipeline_groups_across_batches(tmp_path):
    config = _config(tmp_path)
    same = content_digest(b"a")
    keys = [(bucket_of(same), [(same, "TRAIN", "x")]), (bucket_of(same), [(same, "TRAIN", "y")])]
    with beam.Pipeline("FnApiRunner") as pipeline:
        summary = find_duplicates(pipeline | beam.Create(keys), config)
        assert_that(summary | beam.Map(lambda s: s["counts"]["groups"]), equal_to([1]))
    assert (tmp_path / "job" / DUPLICATES_FILE).read_text().count("\n") == 3
