"""The assemble stage: shards planned from the committed pieces, each assembled from byte ranges of them
(an append's carried parent shards are linked or copied: beam_pipelines.steps.carry_shards).

Locally the pieces a shard holds whole are removed as soon as it is in place
(piece_files.remove_assembled_pieces), on a thread of the step's own while the next shard is copied:
an unlink mostly waits on the file system (freeing, discarding blocks), the copy mostly uses a core.
Every removal ends before the bundle does (finish_bundle), and a failed one fails the bundle: its
retry keeps the shards in place and removes what is left.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Optional

import apache_beam as beam

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps.carry_shards import CarryBatch, carry_shards, with_new_keys
from beam_pipelines.steps.piece_files import assemble_shard, remove_assembled_pieces


class AssembleShard(beam.DoFn):
    def __init__(self, config: JobConfig) -> None:
        self.config = config
        self._removing: Optional[ThreadPoolExecutor] = None
        self._removals: list[Future] = []

    def process(self, plan):
        if isinstance(plan, CarryBatch):
            yield from carry_shards(plan, self.config)
            return
        summary = with_new_keys(assemble_shard(plan, self.config.temp_dir, self.config.compression), self.config, plan)
        if self._removing is None:
            self._removing = ThreadPoolExecutor(1, thread_name_prefix="tfrecorder-pieces")
        self._removals.append(self._removing.submit(remove_assembled_pieces, plan, self.config.pieces_dir))
        yield summary

    def finish_bundle(self):
        removals, self._removals = self._removals, []
        for removal in removals:
            removal.result()  # re-raises a failed removal: the bundle fails, its retry finishes it

    def teardown(self):
        if self._removing is not None:
            self._removing.shutdown()
            self._removing = None
