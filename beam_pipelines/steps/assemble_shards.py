"""The assemble stage: shards planned from the committed pieces, each assembled from byte ranges of them
(an append's carried parent shards are linked or copied: beam_pipelines.steps.carry_shards).

Locally the shards are assembled on a thread per core (the copy is the kernel's `copy_file_range`,
which releases the GIL, so the cores copy side by side where one thread left the other idle at the
job's end), and their summaries are emitted when the bundle finishes. The pieces a shard holds whole
are removed as soon as it is in place (piece_files.remove_assembled_pieces), on a thread of the step's
own while other shards are copied: an unlink mostly waits on the file system (freeing, discarding
blocks), the copy mostly uses a core. Every assembly and removal ends before the bundle does
(finish_bundle), and a failed one fails the bundle (once all of them have ended): its retry keeps the
shards in place and makes or removes what is left. Distributed jobs assemble one shard at a time per
worker (their shards are spread over the workers).
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Optional

import apache_beam as beam

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.launches.runners import usable_cores
from beam_pipelines.steps.bundle_outputs import in_global_window
from beam_pipelines.steps.carry_shards import CarryBatch, carry_shards, with_new_keys
from beam_pipelines.steps.piece_files import assemble_shard, remove_assembled_pieces
from beam_pipelines.steps.shard_planning import ShardPlan


class AssembleShard(beam.DoFn):
    def __init__(self, config: JobConfig) -> None:
        self.config = config
        self._removing: Optional[ThreadPoolExecutor] = None
        self._assembling: Optional[ThreadPoolExecutor] = None
        self._removals: list[Future] = []
        self._shards: list[Future] = []

    def process(self, plan):
        if isinstance(plan, CarryBatch):
            yield from carry_shards(plan, self.config)
            return
        if self._removing is None:
            self._removing = ThreadPoolExecutor(1, thread_name_prefix="tfrecorder-pieces")
        if self.config.distributed:
            yield self._assemble(plan)
            return
        if self._assembling is None:
            self._assembling = ThreadPoolExecutor(usable_cores(), thread_name_prefix="tfrecorder-assemble")
        self._shards.append(self._assembling.submit(self._assemble, plan))  # emitted by finish_bundle

    def _assemble(self, plan: ShardPlan) -> dict:
        """Make one shard (and its keys sidecar); its pieces' removal queued. Returns its summary."""
        summary = with_new_keys(assemble_shard(plan, self.config.temp_dir, self.config.compression), self.config, plan)
        self._removals.append(self._removing.submit(remove_assembled_pieces, plan, self.config.pieces_dir))
        return summary

    def finish_bundle(self):
        shards, self._shards = self._shards, []
        wait(shards)  # every assembly ends (and queues its removal) before the bundle does, failed or not
        removals, self._removals = self._removals, []
        wait(removals)
        summaries = [shard.result() for shard in shards]  # re-raises a failed assembly: the bundle fails
        for removal in removals:
            removal.result()  # re-raises a failed removal: the bundle fails, its retry finishes it
        for summary in summaries:
            yield in_global_window(summary)

    def teardown(self):
        for pool in (self._assembling, self._removing):
            if pool is not None:
                pool.shutdown()
        self._assembling = self._removing = None
