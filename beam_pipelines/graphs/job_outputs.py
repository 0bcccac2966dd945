"""The common tail of every conversion graph: shards assembled from the pieces, discarded.csv, then finalize."""
from __future__ import annotations

from typing import Optional

import apache_beam as beam
from apache_beam.pvalue import AsList, AsSingleton

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps.assemble_shards import AssembleShard
from beam_pipelines.steps.carry_shards import plan_job_shards, with_merged_pieces
from beam_pipelines.steps.discard_files import WriteDiscardParts, write_discards


def write_outputs(pipeline: beam.Pipeline, config: JobConfig, pieces: beam.PCollection,
                  found: dict[str, beam.PCollection], finalize, *finalize_inputs,
                  committed_discards: Optional[beam.PCollection] = None, **finalize_options) -> beam.PCollection:
    """The graph's common tail: assemble shards from `pieces`, write discarded.csv from the discards
    `found` by each step (and the DiscardParts of parts committed whole, `committed_discards`: resumable
    jobs), then `finalize(_, config, shards, *finalize_inputs, discard reasons, pieces, **finalize_options)`."""
    pieces = with_merged_pieces(pipeline, config, pieces)  # an append: the parent's small shards re-assembled
    start = pipeline | "Start" >> beam.Create([None])
    plans = start | "PlanShards" >> beam.FlatMap(
        lambda _, ps: plan_job_shards(ps, config), AsList(pieces))  # an append's carried shards too
    if config.distributed:  # assemble shards on every worker (locally: one stage less)
        plans = plans | "SpreadShards" >> beam.Reshuffle()
    shards = plans | "AssembleShards" >> beam.ParDo(AssembleShard(config))
    discard_parts = [  # written where they are found (fused with the step): discards are never buffered
        discards | f"{step}DiscardParts" >> beam.ParDo(WriteDiscardParts(config))
        for step, discards in found.items()
    ] + ([] if committed_discards is None else [committed_discards]) | "AllDiscardParts" >> beam.Flatten()
    discard_reasons = start | "WriteDiscards" >> beam.Map(
        lambda _, parts: write_discards(parts, config), AsList(discard_parts)
    )
    return start | "Finalize" >> beam.FlatMap(
        finalize, config, AsList(shards), *finalize_inputs, AsSingleton(discard_reasons), AsList(pieces),
        **finalize_options,
    )
