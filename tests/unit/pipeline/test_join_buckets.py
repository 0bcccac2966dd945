"""beam_pipelines.steps.join_buckets: records spilled to bucket parts by image id and joined per bucket."""
from __future__ import annotations

import os

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.steps import join_buckets
from support.job_configs import job_config
from tfrecorder.rows import dataset_records as dr


def _image(key):
    return {dr.RECORD: dr.IMAGE, "image_key": key, "image_uri": f"{key}.png", "split": "TRAIN"}


def _object(key, annotation_id, category_id=1):
    return {dr.RECORD: dr.OBJECT, "image_key": key, "annotation_id": annotation_id, "category_id": category_id}


def test_frames_round_trip_and_buckets_are_stable():
    data = join_buckets.frame("ünï", b"abc") + join_buckets.frame("2", b"")
    assert list(join_buckets.unframe(data)) == [("ünï", b"abc"), ("2", b"")]
    assert join_buckets.bucket_of("123") == join_buckets.bucket_of("123") < join_buckets.BUCKETS
    assert len({join_buckets.bucket_of(str(i), 8) for i in range(100)}) == 8


def test_spill_writes_parts_at_the_threshold_and_at_the_bundle_end(tmp_path):
    config = job_config(temp_dir=str(tmp_path))
    os.makedirs(config.work_dir)
    spill = join_buckets.SpillRecords(config, buckets=4, spill_bytes=200)
    spill.start_bundle()
    records = [(str(i % 10), dr.pack(_object(str(i % 10), i))) for i in range(40)]
    descriptors = [d for keyed in records for d in spill.process(keyed)]
    descriptors += [w.value for w in spill.finish_bundle()]
    assert len(descriptors) > 4 and len(os.listdir(config.work_dir)) == len(descriptors)
    found = []
    for bucket, path in descriptors:
        for key, packed in join_buckets.unframe(open(path, "rb").read()):
            assert join_buckets.bucket_of(key, 4) == bucket
            found.append((key, packed))
    assert sorted(found) == sorted(records)


def test_join_records_in_a_pipeline(tmp_path):
    config = job_config(temp_dir=str(tmp_path))
    os.makedirs(config.work_dir)
    records = [_image("1"), _object("1", 5), _object("1", 3), _image("2"), _object("9", 7), _object("2", 8, 4)]
    with beam.Pipeline("DirectRunner") as pipeline:
        labels = beam.pvalue.AsSingleton(pipeline | "Labels" >> beam.Create([{1: "cat"}]))
        joined = pipeline | beam.Create(records) | join_buckets.JoinRecords(config, labels)
        images = joined.images | "Images" >> beam.Map(lambda j: (j.key, [row["annotation_id"] for row, _i, _n in j.objects]))
        reasons = joined[join_buckets.DISCARD] | "Reasons" >> beam.Map(lambda d: d[1])
        assert_that(images, equal_to([("1", [3, 5]), ("2", [])]), label="CheckImages")
        assert_that(reasons, equal_to(["unknown image id: no image has id '9'", "unknown category id: 4"]),
                    label="CheckReasons")


class _Counter:
    def __init__(self):
        self.count = 0

    def add(self, n):
        self.count += n


def test_join_bucket_counts_its_records_and_joins_in_image_id_order(tmp_path):
    """A resumable job's bucket (dataset_graph.EncodeDatasetBuckets): the same images in the same order
    from the same parts, however they were spilled, and the records read (the bucket's committed rows)."""
    config = job_config(temp_dir=str(tmp_path))
    first, second = tmp_path / "a.part", tmp_path / "b.part"
    first.write_bytes(join_buckets.frame("2", dr.pack(_image("2"))) + join_buckets.frame("1", dr.pack(_object("1", 5))))
    second.write_bytes(join_buckets.frame("1", dr.pack(_image("1"))) + join_buckets.frame("9", dr.pack(_object("9", 7))))
    counted, done = [], _Counter()
    outputs = list(join_buckets.join_bucket(config, [str(second), str(first)], {1: "cat"}, done, counted))
    images = [o.key for o in outputs if not isinstance(o, beam.pvalue.TaggedOutput)]
    discards = [o.value[1] for o in outputs if isinstance(o, beam.pvalue.TaggedOutput)]
    assert images == ["1", "2"] and discards == ["unknown image id: no image has id '9'"]
    assert counted == [4] and done.count == 1
