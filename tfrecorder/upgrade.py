"""`tfrecorder.upgrade()`: rewrite a TFRecorder 2.0 dataset as a job directory of this package.

    result = tfrecorder.upgrade("gs://bucket/tfrecorder-20201010-101010-convert", "gs://bucket/upgraded")
    result["input_bytes"], result["output_bytes"]

Every image (base64 raw pixels) is re-encoded losslessly as PNG; labels keep their indices and
TFRecorder 2.0's vocabulary (its order, not re-sorted); splits stay as they were; every other
feature keeps its values. Every legacy record is accounted for: written, or listed in
discarded.csv with the reason (pixels that do not match their shape), and the rows 2.0 itself
discarded are carried into discarded.csv too. Runs as a Beam pipeline, locally or on Dataflow,
publishing the directory exactly like a conversion (temporary directory, metadata.json last).
"""
from __future__ import annotations

import math
import os
import re
import time
from typing import Any, Mapping, Optional

from tfrecorder.format import job_directory
from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.io import storage
from tfrecorder.options.conversion_options import DEFAULT_MAX_SHARD_BYTES, OutputLocation, check_shard_options
from tfrecorder.options.job_config import JobConfig
from tfrecorder.result import ConversionResult, DataflowConversionResult
from tfrecorder.core.schema import Schema
from tfrecorder.core.splits import DEFAULT_SPLIT_RATIOS

PART_BYTES = 256 * 1024 * 1024  # legacy shard bytes per reading worker
MAX_PARTS = 8  # each part decompresses the whole shard: more parts would cost more than they save
DEFAULT_JOB_LABEL = "upgraded"


def _corrupt_shard_error(exc: BaseException) -> Optional[ValueError]:
    """The pipeline's corrupt-shard message as the ValueError upgrade() raises (without Beam's suffix), if it is one."""
    corrupt = re.search(r"corrupt TFRecorder 2\.0 shard .*?reports the damage\)", str(exc))
    return ValueError(corrupt.group(0)) if corrupt else None


def shard_parts(job: JobInfo, max_parts: int) -> list:
    """The units of work: each legacy shard, split by size into at most `max_parts` parts."""
    from beam_pipelines.graphs.upgrade_graph import ShardPart

    parts = []
    for split, info in job.metadata["splits"].items():
        for shard in info["shards"]:
            count = max(1, min(max_parts, math.ceil(shard["bytes"] / PART_BYTES)))
            parts.extend(ShardPart(split, shard["file"], index, count) for index in range(count))
    return parts


def _read_legacy(legacy_dir: str) -> JobInfo:
    job = JobInfo.read(legacy_dir)
    if not job.legacy:
        raise ValueError(f"{legacy_dir} is already a tfrecorder job directory (it has metadata.json): nothing to upgrade")
    problems = job.metadata["layout_problems"]
    if problems:
        raise ValueError(f"cannot upgrade {legacy_dir} completely: {'; '.join(problems)}")
    return job


def upgrade(
    legacy_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    runner: str = "DirectRunner",
    job_label: Optional[str] = None,
    compression: Optional[str] = None,
    num_shards: int = 0,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    beam_options: Optional[Mapping[str, Any]] = None,
    dataflow_options: Optional[Mapping[str, Any]] = None,
    shared_filesystem: bool = False,
    project: Optional[str] = None,
    region: Optional[str] = None,
    tfrecorder_wheel: Optional[str] = None,
    verbose: bool = False,
) -> ConversionResult:
    """Rewrite the TFRecorder 2.0 directory `legacy_dir` as a new job directory under `output_dir`.

    Returns a ConversionResult with, besides the usual counts, `input_bytes` (the legacy shards)
    and `output_bytes` (the new shards). Options mean what they mean for `convert()`; with
    runner="DataflowRunner" both directories must be on gs:// and the call returns once the job is
    submitted (`.wait()`); on Flink, Spark or another portable runner (`beam_options`) they must be where
    the workers read them too (docs/runners.md).
    """
    from beam_pipelines.launches.launch import fail_job, launch_for  # see convert()

    started = time.monotonic()
    legacy_dir, output = storage.user_path(legacy_dir, "legacy_dir"), OutputLocation.of(output_dir)
    launch = launch_for(runner, output, project, region, job_label, beam_options, tfrecorder_wheel,
                        dataflow_options=dataflow_options, shared_filesystem=shared_filesystem)
    launch.check_readable_dir(legacy_dir)
    check_shard_options(num_shards, max_shard_bytes, compression, None, "header")
    job = _read_legacy(legacy_dir)
    output_dir = output.checked().path
    input_bytes = sum(info["bytes"] for info in job.metadata["splits"].values())

    final_dir, temp_dir = job_directory.reserve_job_dir(output_dir, job_label or DEFAULT_JOB_LABEL)
    config = JobConfig(
        source=None, schema=Schema.from_json(job.metadata["schema"]),
        columns=("split", "source", "record", "image_name"), base_dir="", final_dir=final_dir, temp_dir=temp_dir,
        job_name=os.path.basename(final_dir.rstrip("/")), runner=launch.runner, distributed=launch.distributed,
        split_ratios=DEFAULT_SPLIT_RATIOS,
        num_shards=num_shards, max_shard_bytes=max_shard_bytes, compression=compression, image_size=None,
        validate="header", extra_metadata={"upgraded_from": {
            "format": job.metadata["legacy_format"], "directory": legacy_dir, "input_bytes": input_bytes,
            "compression": job.compression}},
    )
    try:
        from beam_pipelines.graphs.upgrade_graph import build_upgrade_graph

        # Parts only pay off with parallel workers: a single local worker would decompress a shard n times.
        workers = MAX_PARTS if launch.distributed else int(launch.beam_options.get("direct_num_workers") or 1)
        parts = shard_parts(job, min(MAX_PARTS, workers))

        def build(pipeline, config: JobConfig) -> None:
            build_upgrade_graph(pipeline, config, legacy_dir, parts, job.metadata["discard_files"],
                                job.metadata["vocabularies"], job.compression)

        # rows_in is unknown until the job has read every record
        submitted = launch.run(build, config, launch.job_options(config), verbose, rows_total=0)
        if submitted is not None:  # input_bytes is known now; output_bytes once wait() is done
            return DataflowConversionResult.of(submitted, input_bytes=input_bytes)
    except BaseException as exc:
        fail_job(exc, temp_dir, final_dir, output_dir, own_error=_corrupt_shard_error(exc))
    metadata = JobMetadata.read(final_dir).document
    return ConversionResult.from_metadata(final_dir, launch.runner, metadata, time.monotonic() - started)
