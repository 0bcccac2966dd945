"""beam_pipelines.steps.part_passes: one output per element, in forked processes when the job's config
says so (an image-free job encoding in forked processes), the same outputs either way."""
from __future__ import annotations

import multiprocessing
import os

import pytest
from apache_beam.utils.windowed_value import WindowedValue

from beam_pipelines.launches import runners
from beam_pipelines.steps.part_passes import PartPass
from support.job_configs import job_config
from tfrecorder.core.schema import Schema

pytestmark = pytest.mark.skipif(not runners.can_fork(), reason="forked processes are Linux-only")


class SquareAndPid(PartPass):
    def output_of(self, element: int) -> tuple[int, int]:
        return element * element, os.getpid()


def _run(config) -> list[tuple[int, int]]:
    """One bundle of elements 0..9: (output, pid) of each, from process() and finish_bundle()."""
    step = SquareAndPid(config)
    step.setup()
    step.start_bundle()
    outputs = [output for element in range(10) for output in step.process(element)]
    outputs += [output.value for output in step.finish_bundle() if isinstance(output, WindowedValue)]
    step.teardown()
    return outputs


@pytest.mark.parametrize("processes, images, forked", [(1, False, False), (2, False, True), (2, True, False)])
def test_each_element_gives_one_output_in_forked_processes_only_for_an_image_free_job_encoding_in_them(
        processes, images, forked):
    schema = Schema({"image_uri": "ImageUri"} if images else {"n": "IntegerInput"})
    outputs = _run(job_config(schema=schema, encode_processes=processes))
    assert sorted(square for square, _ in outputs) == [n * n for n in range(10)]
    pids = {pid for _, pid in outputs}
    assert pids == ({os.getpid()} if not forked else pids - {os.getpid()}) and len(pids) == (2 if forked else 1)
    assert multiprocessing.active_children() == []
