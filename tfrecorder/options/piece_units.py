"""How many rows a resumable image job's encoding unit holds: the rows whose pieces close together
(beam_pipelines.steps.encode_rows.EncodeImageParts), which decides the pieces' sizes, hence whether a
shard is one piece (made by a hard link) or several (copied together at the end: a second write of
every image byte).

A unit holds rows of one split (encode_rows.SplitUnits) and grows with the job, from MIN_UNIT_BATCHES to
MAX_UNIT_BATCHES batches: 1,600 rows of 80 KB images make a ~130 MB piece of any split, a shard on its
own under the default 150 MB cut. Forked encoding processes (header mode,
beam_pipelines.launches.runners.encode_processes) take a unit per task, so a job keeps at least
UNITS_PER_JOB units while it can, and the processes end together. A job that decodes
images encodes in one process (decoding on a thread per core): its units are the largest. The choice
depends only on the job (its row estimate and options, both in its fingerprint), never on the machine,
so a resumed job cuts the same pieces.
"""
from __future__ import annotations

from tfrecorder.core.schema import Schema
from tfrecorder.io.decode_check import DECODE
from tfrecorder.options.job_config import BATCH_ROWS

MIN_UNIT_BATCHES = 4  # 256 rows at the default batch size
MAX_UNIT_BATCHES = 25  # 1,600 rows
UNITS_PER_JOB = 8  # forked encoding processes share the units: this many keep the processes' ends close


def unit_batches(rows_estimate: int, schema: Schema, validate: str) -> int:
    """Batches of BATCH_ROWS rows in a unit of a job of about `rows_estimate` rows (`validate`: its
    option; a job that decodes its images encodes them in one process)."""
    if validate == DECODE and schema.image_columns:
        return MAX_UNIT_BATCHES
    batches = max(0, int(rows_estimate)) // (BATCH_ROWS * UNITS_PER_JOB)
    return min(MAX_UNIT_BATCHES, max(MIN_UNIT_BATCHES, batches))
