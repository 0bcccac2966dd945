"""The duplicates stage: bucket files written idempotently, merged into duplicates.csv with counts."""
import csv

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.steps.collect_statistics import NEAR_OFFSET, STATISTICS_KEY
from beam_pipelines.steps.find_duplicates import bucket_path, quality_outputs, write_bucket, write_duplicates_file
from tfrecorder.core.schema import Schema
from tfrecorder.rows.dataset_statistics import DatasetStatistics
from tfrecorder.rows import near_duplicates
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


def test_one_grouping_serves_statistics_exact_and_near_duplicates(tmp_path):
    config = job_config(final_dir=str(tmp_path / "final"), temp_dir=str(tmp_path / "job"),
                        schema=Schema({"n": "IntegerInput"}), near_duplicate_distance=7)
    same = content_digest(b"a")
    bundles = []
    for split in ("TRAIN", "TEST"):
        stats = DatasetStatistics(config.schema)
        stats.add_rows(split, [{"n": 1}])
        bundles.append((STATISTICS_KEY, stats))
    exact = [(bucket_of(same), [(same, "TRAIN", "x")]), (bucket_of(same), [(same, "TRAIN", "y")])]
    near_entries = [(0xFF00FF00FF00FF00, content_digest(b"p"), "TRAIN", "p.jpg"),
                    (0xFF00FF00FF00FF01, content_digest(b"q"), "TEST", "q.jpg")]
    near = [(NEAR_OFFSET + bucket, keyed) for bucket, keyed in near_duplicates.bucketed(near_entries).items()]

    def summarise(_, statistics, duplicates):
        return statistics.rows, sorted((b.kind, b.counts.groups, b.counts.leaking_groups) for b in duplicates)

    with beam.Pipeline("FnApiRunner") as pipeline:
        inputs = quality_outputs(config, pipeline | beam.Create(bundles + exact + near))
        found = pipeline | "Start" >> beam.Create([None]) | beam.Map(summarise, inputs["statistics"], inputs["duplicates"])
        assert_that(found, equal_to([({"TRAIN": 1, "TEST": 1}, [("exact", 1, 0), ("near", 1, 1)])]))
    assert quality_outputs(job_config(statistics=False), None) == {}


def test_drop_mode_sends_each_groups_other_rows_by_piece(tmp_path):
    import apache_beam as beam

    from beam_pipelines.steps.find_duplicates import DROPPED

    config = job_config(final_dir=str(tmp_path / "final"), temp_dir=str(tmp_path / "job"), duplicates="drop")
    same = content_digest(b"a")
    batches = [[(same, "TRAIN", "x.jpg", ("p1", 0, 0, ("x.jpg",))), (same, "TEST", "y.jpg", ("p2", 3, 1, ("y.jpg",)))],
               [(same, "TEST", "w.jpg", ("p2", 1, 0, ("w.jpg",)))]]
    out = list(write_bucket((bucket_of(same), batches), config))
    dropped = [o.value for o in out if isinstance(o, beam.pvalue.TaggedOutput) and o.tag == DROPPED]
    assert dropped == [("p1", [(0, 0, ("x.jpg",), "duplicate of w.jpg")]),
                       ("p2", [(3, 1, ("y.jpg",), "duplicate of w.jpg")])]
    assert [o for o in out if not isinstance(o, beam.pvalue.TaggedOutput)][0].counts.redundant == 2
