"""The assemble stage: shards planned from the committed pieces, each assembled from byte ranges of them."""
from __future__ import annotations

import apache_beam as beam

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps.piece_files import assemble_shard


class AssembleShard(beam.DoFn):
    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def process(self, plan):
        yield assemble_shard(plan, self.config.temp_dir, self.config.compression)
