"""Keep the garbage collector's full collections off the caller's objects while a local job runs.

A process that has imported TensorFlow (a notebook that trains) holds some 400k objects the collector
tracks; building and running a Beam graph allocates enough to trigger many collections, and each full
one walks all of them (≈0.2 s): about a third of a 100-row job's time. `caller_objects_frozen` moves
the objects that exist when a job starts into the collector's permanent generation (`gc.freeze`) and
puts them back (`gc.unfreeze`) when it ends, so the job's own garbage is still collected and the caller
finds the collector as it left it. A caller that froze objects itself, or turned the collector off, is
left alone.

The public calls that run jobs hold it from their start (`objects_frozen_during`): the driver's own work
(opening the table, importing the pipeline's modules) triggered a full collection too (0.1 s of a
million-row CSV's conversion). A block inside one of ours freezes the objects made since (the modules
imported meanwhile) and leaves the unfreezing to the outermost.
"""
from __future__ import annotations

import contextlib
import functools
import gc
from typing import Any, Callable, Iterator, TypeVar

Function = TypeVar("Function", bound=Callable[..., Any])
_open_blocks = 0  # caller_objects_frozen blocks of ours now open (one job's call and its launch)


@contextlib.contextmanager
def caller_objects_frozen() -> Iterator[None]:
    """Within the block, collections skip the objects that existed before it (see the module's doc)."""
    global _open_blocks
    if not gc.isenabled() or (gc.get_freeze_count() and not _open_blocks):
        yield
        return
    gc.freeze()
    _open_blocks += 1
    try:
        yield
    finally:
        _open_blocks -= 1
        if not _open_blocks:
            gc.unfreeze()


def objects_frozen_during(function: Function) -> Function:
    """Decorate a public call that runs a job: `caller_objects_frozen` from its start to its end."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        with caller_objects_frozen():
            return function(*args, **kwargs)

    return call  # type: ignore[return-value]
