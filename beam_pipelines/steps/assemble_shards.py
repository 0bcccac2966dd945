"""The assemble stage: shards planned from the committed pieces, each assembled from byte ranges of them
(an append's carried parent shards are linked or copied: beam_pipelines.steps.carry_shards). Locally the
pieces a shard holds whole are removed as soon as it is in place (piece_files.remove_assembled_pieces)."""
from __future__ import annotations

import apache_beam as beam

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps.carry_shards import CarryBatch, carry_shards, with_new_keys
from beam_pipelines.steps.piece_files import assemble_shard, remove_assembled_pieces


class AssembleShard(beam.DoFn):
    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def process(self, plan):
        if isinstance(plan, CarryBatch):
            yield from carry_shards(plan, self.config)
            return
        summary = with_new_keys(assemble_shard(plan, self.config.temp_dir, self.config.compression), self.config, plan)
        remove_assembled_pieces(plan, self.config.pieces_dir)
        yield summary
