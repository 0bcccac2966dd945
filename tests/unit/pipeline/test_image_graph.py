"""The conversion graph run directly: its progress counter accounts for every row; its distributed form is the config's choice."""
from __future__ import annotations

import dataclasses

from apache_beam.metrics.metric import MetricsFilter

from support import imagegen
from beam_pipelines.graphs.image_graph import build_image_graph
from beam_pipelines.steps.progress_counters import NAMESPACE, ROWS_PROCESSED
from tfrecorder.sources import source_registry
from tfrecorder.core import types
from beam_pipelines.launches import runners
from tfrecorder.format import job_directory
from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.options.job_config import JobConfig
from tfrecorder.core.progress_bar import rows_reported
from tfrecorder.core.schema import Schema


def test_rows_processed_counts_rows_written_and_discarded_at_every_step(tmp_path):
    imagegen.write_files(tmp_path / "img", {"a.jpg": imagegen.odd_images()["rgb.jpg"][0]})
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("split,image_uri,label\nTRAIN,img/a.jpg,cat\nholdout,img/a.jpg,cat\n"
                        "TRAIN,img/none.jpg,cat\nTRAIN,img/a.jpg,\n")  # written, 2 prepare discards, 1 encode discard
    final_dir, temp_dir = job_directory.reserve_job_dir(str(tmp_path / "out"), "pipe")
    (tmp_path / "progress").mkdir()
    schema = Schema({"split": types.SplitKey, "image_uri": types.ImageUri, "label": types.StringLabel})
    table = source_registry.open_table(str(csv_path))
    config = JobConfig(
        source=table.row_source(schema, ""), schema=schema, columns=("split", "image_uri", "label"),
        base_dir=str(tmp_path), final_dir=final_dir, temp_dir=temp_dir, job_name="pipe", runner="DirectRunner",
        split_ratios=(0.8, 0.1, 0.1), num_shards=0, max_shard_bytes=1 << 20, compression=None, image_size=None,
        validate="header", progress_dir=str(tmp_path / "progress"),
    )
    pipeline = runners.local_pipeline()
    build_image_graph(pipeline, config)
    result = pipeline.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE).with_name(ROWS_PROCESSED))["counters"]
    assert {c.key.step.split("/")[0]: c.committed for c in counters} == {"Prepare": 2, "EncodeAndWrite": 2}
    assert sum(c.committed for c in counters) == 4 == rows_reported(str(tmp_path / "progress"))
    metadata = JobMetadata.read(final_dir).document
    assert metadata["records_written"] == 1 and metadata["discarded"] == 3


def transform_names(config: JobConfig) -> set[str]:
    pipeline = runners.local_pipeline()
    build_image_graph(pipeline, config)
    return {transform.unique_name for transform in pipeline.to_runner_api().components.transforms.values()}


def test_the_distributed_graph_is_chosen_by_the_config_not_by_the_runners_name(tmp_path):
    """Reshuffles spread rows and shard plans over workers elsewhere (Dataflow, Flink, Spark); the
    in-process runner would only hold them in memory. The launch decides, whatever the runner is called."""
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("split,image_uri,label\nTRAIN,a.jpg,cat\n")
    schema = Schema({"split": types.SplitKey, "image_uri": types.ImageUri, "label": types.StringLabel})
    config = JobConfig(
        source=source_registry.open_table(str(csv_path)).row_source(schema, ""), schema=schema,
        columns=tuple(schema), base_dir=str(tmp_path), final_dir="out/job", temp_dir="out/.incomplete-job",
        job_name="job", runner="DataflowRunner", split_ratios=(0.8, 0.1, 0.1), num_shards=0,
        max_shard_bytes=1 << 20, compression=None, image_size=None, validate="header")
    spread = {"SpreadRows", "SpreadShards"}
    assert not spread & transform_names(config)
    assert spread <= transform_names(dataclasses.replace(config, runner="FlinkRunner", distributed=True))


def test_the_graph_that_commits_no_parts_drops_duplicates_and_splits_unassigned_rows_by_content(tmp_path):
    """The graph of distributed runs (no part commits), in the in-process runner under bundle replay:
    UNASSIGNED copies of one image share a split, and duplicates="drop" keeps one row of each."""
    import csv

    image = imagegen.odd_images()["rgb.jpg"][0]
    files = {f"{name}{copy}.jpg": image + bytes([i]) for i, name in enumerate("abcd")
             for copy in range(3)}  # four distinct images (a byte after their end differs), three names each
    imagegen.write_files(tmp_path / "img", files)
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("split,image_uri,label\n" + "".join(f",img/{name},cat\n" for name in sorted(files)))
    final_dir, temp_dir = job_directory.reserve_job_dir(str(tmp_path / "out"), "pipe")
    schema = Schema({"split": types.SplitKey, "image_uri": types.ImageUri, "label": types.StringLabel})
    config = JobConfig(
        source=source_registry.open_table(str(csv_path)).row_source(schema, ""), schema=schema,
        columns=("split", "image_uri", "label"), base_dir=str(tmp_path), final_dir=final_dir, temp_dir=temp_dir,
        job_name="pipe", runner="DirectRunner", split_ratios=(0.4, 0.3, 0.3), num_shards=0, max_shard_bytes=1 << 20,
        compression=None, image_size=None, validate="header", distributed=True, duplicates="drop",
        content_splits=True)
    pipeline = runners.local_pipeline({"direct_runner_bundle_repeat": 1})
    build_image_graph(pipeline, config)
    pipeline.run().wait_until_finish()
    metadata = JobMetadata.read(final_dir).document
    assert metadata["records_written"] == 4 and metadata["discard_reasons"] == {"duplicate of": 8}
    with open(f"{final_dir}/discarded.csv") as stream:
        reasons = {row["image_uri"]: row["reason"] for row in csv.DictReader(stream)}
    assert reasons == {f"img/{name}{copy}.jpg": f"duplicate of {tmp_path}/img/{name}0.jpg"
                       for name in "abcd" for copy in (1, 2)}
    with open(f"{final_dir}/duplicates.csv") as stream:
        groups: dict = {}
        for row in csv.DictReader(stream):
            groups.setdefault(row["group"], set()).add(row["split"])
    assert len(groups) == 4 and all(len(splits) == 1 for splits in groups.values())
