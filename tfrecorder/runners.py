"""Pipeline runners: which Beam runner executes a conversion, with which options.

Locally we pin the in-process FnApiRunner: Beam's default DirectRunner first tries to download the
Prism runner binary from the internet. DataflowRunner pipelines get Beam's Dataflow runner; with the
`no_auth` option, Cloud Storage is accessed anonymously too (emulators, public buckets). Both are
PlainPipelines, built the same way inside Jupyter as in a script (tfrecorder.plain_pipeline).
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

from tfrecorder.plain_pipeline import PlainPipeline

KNOWN_RUNNERS = ("DirectRunner", "DataflowRunner")
# When a local job runs on a worker process per core (Beam's multi_processing FnApiRunner), measured on
# 2 cores with benchmarks/convert_bench.py: each worker process spends ~2.7 s of CPU starting (importing
# Beam and tfrecorder's modules) and the runner adds ~1 s, while the per-row work (~170 µs in header
# mode) is shared by the workers. Worker processes are chosen when the time they save beats twice that
# start-up cost (a margin for the measurement's noise).
ROW_SECONDS = 170e-6
TABULAR_ROW_SECONDS = 6e-6  # image-free rows, encoded column-wise (benchmarks/tabular_bench.py, issue 19)
WORKER_START_SECONDS = 4.0
_WORKER_OPTIONS = ("direct_num_workers", "direct_running_mode")


def check_runner(runner: str) -> str:
    if runner not in KNOWN_RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; expected one of {list(KNOWN_RUNNERS)}")
    return runner


def make_pipeline(runner: str, options: Optional[Mapping[str, Any]] = None) -> beam.Pipeline:
    """A Beam Pipeline for `runner` with `options` (Beam option names (dests) → Python values)."""
    check_runner(runner)
    pipeline_options = PipelineOptions([], **dict(options or {}))  # typed values, used as given
    if runner == "DirectRunner":
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return PlainPipeline(runner=FnApiRunner(), options=pipeline_options)
    if pipeline_options.view_as(GoogleCloudOptions).no_auth:
        connect_anonymously()
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

    return PlainPipeline(runner=DataflowRunner(), options=pipeline_options)


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def worker_processes_pay_off(rows: int, cores: int, row_seconds: float = ROW_SECONDS) -> bool:
    """Whether a worker process per core finishes `rows` rows (`row_seconds` each) sooner than the
    in-process worker."""
    return cores > 1 and rows * row_seconds * (1 - 1 / cores) > 2 * WORKER_START_SECONDS


def local_options(rows: int, options: Optional[Mapping[str, Any]] = None, cores: Optional[int] = None,
                  threads_use_every_core: bool = False, tabular: bool = False) -> dict[str, Any]:
    """Beam options for a local (DirectRunner) job of `rows` rows: one worker process per core when
    that pays off (large jobs on several cores), the in-process worker otherwise — always when the
    job's heavy work already runs on a thread per core (`threads_use_every_core`: validate="decode",
    where each worker process would also pay TensorFlow's import). Image-free (`tabular`) rows cost
    TABULAR_ROW_SECONDS each, so only tables of millions of rows pay for worker processes.

    Beam's own `direct_num_workers` / `direct_running_mode`, when the caller passes either, decide
    instead (e.g. `direct_num_workers=1` keeps a large job in-process).
    """
    chosen = dict(options or {})
    cores = usable_cores() if cores is None else cores
    if (threads_use_every_core or any(name in chosen for name in _WORKER_OPTIONS)
            or not worker_processes_pay_off(rows, cores, TABULAR_ROW_SECONDS if tabular else ROW_SECONDS)):
        return chosen
    return {**chosen, "direct_running_mode": "multi_processing", "direct_num_workers": cores}


def connect_anonymously() -> None:
    """Make Beam's GCS client anonymous, as `no_auth` asks, instead of looking credentials up.

    Beam caches the credential lookup per process; without credentials that lookup retries for ~26 s
    before it gives up and connects anonymously anyway, so we record the anonymous outcome up front.
    """
    from apache_beam.internal.gcp import auth

    with auth._Credentials._credentials_lock:
        auth._Credentials._credentials = None
        auth._Credentials._credentials_init = True
