"""JobConfigs for tests: every field a pipeline step reads, with only what a test cares about given."""
from __future__ import annotations

import os
from typing import Any

from tfrecorder.core.schema import Schema
from tfrecorder.format import job_directory
from tfrecorder.options.job_config import JobConfig

TABLE_SCHEMA = {"split": "SplitKey", "n": "IntegerInput", "label": "StringLabel"}


def job_config(**fields: Any) -> JobConfig:
    """A JobConfig of the in-process runner with header validation and automatic shards, `fields` replaced."""
    defaults: dict[str, Any] = dict(
        source=None, schema=Schema({}), columns=(), base_dir="", final_dir="", temp_dir="", job_name="job",
        runner="DirectRunner", split_ratios=(0.8, 0.1, 0.1), num_shards=0, max_shard_bytes=1 << 20,
        compression=None, image_size=None, validate="header")
    return JobConfig(**{**defaults, **fields})


def reserved_job(output_dir: str, label: str, **fields: Any) -> JobConfig:
    """A JobConfig whose job directory is reserved under `output_dir`, as convert() reserves it, for a
    split,n,label table."""
    final_dir, temp_dir = job_directory.reserve_job_dir(output_dir, label)
    return job_config(schema=Schema(TABLE_SCHEMA), columns=tuple(TABLE_SCHEMA), final_dir=final_dir,
                      temp_dir=temp_dir, job_name=os.path.basename(final_dir), **fields)
