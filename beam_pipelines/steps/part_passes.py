"""A pass over a source's parts (or its CSV scan units) with one output per element, run in the job's
forked processes when its config says so (JobConfig.forks_part_passes: an image-free job encoding in
forked processes; beam_pipelines.workers.fork_pool.BundleTasks) and in this process otherwise."""
from __future__ import annotations

from typing import Any, Optional

import apache_beam as beam

from beam_pipelines.steps.bundle_outputs import in_global_window
from beam_pipelines.workers.fork_pool import BundleTasks
from tfrecorder.options.job_config import JobConfig


class PartPass(beam.DoFn):
    """Emits `output_of(element)` for each element; subclasses say what that is."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def output_of(self, element: Any) -> Any:
        raise NotImplementedError

    def committed_output(self, element: Any) -> Optional[Any]:
        """`output_of(element)` when work committed before holds it (read here: no process is forked for
        it), else None."""
        return None

    def setup(self) -> None:
        self._forked: Optional[BundleTasks] = None
        if self.config.forks_part_passes:
            self._forked = BundleTasks(self.config.encode_processes, self.output_of)

    def teardown(self) -> None:
        if self._forked is not None:
            self._forked.close()

    def start_bundle(self) -> None:
        if self._forked is not None:
            self._forked.start_bundle()

    def process(self, element):
        committed = self.committed_output(element)
        if committed is not None:
            yield committed
        elif self._forked is None:
            yield self.output_of(element)
        else:
            yield from self._forked.submit(element)

    def finish_bundle(self):
        for output in (self._forked.finish() if self._forked is not None else ()):
            yield in_global_window(output)
