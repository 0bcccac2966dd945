"""Pipeline runners: which Beam runner executes a conversion, with which options.

Locally we pin the in-process FnApiRunner: Beam's default DirectRunner first tries to download the
Prism runner binary from the internet. DataflowRunner pipelines get Beam's Dataflow runner; with the
`no_auth` option, Cloud Storage is accessed anonymously too (emulators, public buckets). Both are
PlainPipelines, built the same way inside Jupyter as in a script (beam_pipelines.launches.plain_pipeline).

Option names are checked against the PipelineOptions classes Beam has registered (`check_option_names`,
close matches named); a local run also refuses options that would choose another runner or where its
workers run (`check_local_options`): it always runs in-process, and `runner=` is how to run elsewhere.
"""
from __future__ import annotations

import difflib
import os
import sys
from typing import Any, Iterable, Mapping, Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

from beam_pipelines.launches.plain_pipeline import PlainPipeline
from tfrecorder.core.quiet import leaves_logging_alone

KNOWN_RUNNERS = ("DirectRunner", "DataflowRunner")
# Local jobs spread their per-row work over the cores in one of two ways (encode_processes, local_options):
# - forked encoding processes (beam_pipelines.workers.fork_pool): each child encodes and writes whole batches
#   while the in-process worker reads and checks rows. Measured on 2 cores (benchmarks/convert_bench.py,
#   header mode, shared machine): one process spends 130-190 µs of CPU per row (ROW_SECONDS), and
#   starting and stopping two forked children costs ~30 ms (POOL_START_SECONDS, with a margin), so the
#   pool is used once the rows' work it takes off the in-process worker beats twice that cost
#   (~1,200 rows on 2 cores).
# - Beam's multi_processing FnApiRunner: each worker process spends ~WORKER_START_SECONDS of CPU
#   starting (fresh interpreters import Beam and tfrecorder); only chosen for jobs the pool cannot take
#   (images or output on remote storage) when the rows' work beats twice that start-up.
ROW_SECONDS = 170e-6
POOL_START_SECONDS = 0.05
TABULAR_ROW_SECONDS = 6e-6  # image-free rows, encoded column-wise (benchmarks/tabular_bench.py, issue 19)
WORKER_START_SECONDS = 4.0
_WORKER_OPTIONS = ("direct_num_workers", "direct_running_mode")
# Beam's options classes of other runners and of portable workers: a local run would ignore them.
_OTHER_RUNNER_OPTIONS = ("PortableOptions", "JobServerOptions", "FlinkRunnerOptions", "SparkRunnerOptions",
                         "PrismRunnerOptions", "KafkaStreamsRunnerOptions")


def check_runner(runner: str) -> str:
    """`runner` if it is one of KNOWN_RUNNERS; checked once, when a conversion picks its launch."""
    if runner not in KNOWN_RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; expected one of {list(KNOWN_RUNNERS)}")
    return runner


@leaves_logging_alone  # every PipelineOptions() calls logging.basicConfig()
def beam_option_names() -> set[str]:
    """Every option name (argparse dest) of the PipelineOptions classes Beam has registered."""
    return set(PipelineOptions([]).get_all_options(drop_default=False))


@leaves_logging_alone
def other_runner_option_names() -> set[str]:
    """`runner` and the options of other runners' and portable workers' classes (job_endpoint, environment_type, ...)."""
    options = PipelineOptions([])
    names = {"runner"}
    for cls in PipelineOptions.__subclasses__():
        if cls.__name__ in _OTHER_RUNNER_OPTIONS:
            names.update(options.view_as(cls).get_all_options(current_only=True))
    return names


def check_option_names(names: Iterable[str], what: str) -> None:
    """ValueError naming every name that is no Beam pipeline option, with the options it is close to."""
    known = beam_option_names()
    unknown = sorted({name for name in names if name not in known})
    if not unknown:
        return
    hints = [f"{name!r}: did you mean {' or '.join(map(repr, close))}?" for name in unknown
             if (close := difflib.get_close_matches(name, known, n=3))]
    raise ValueError(f"{what}: {unknown} are not Beam/Dataflow pipeline options" + (f" ({'; '.join(hints)})" if hints else ""))


def check_local_options(options: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """The caller's `dataflow_options` for a local run, checked before anything is written: ValueError for
    a name that is no Beam option, or one that would choose another runner or where workers run (a local
    run always uses the in-process FnApiRunner; runner='DataflowRunner' runs elsewhere)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(f"dataflow_options must be a dict of Beam pipeline options, got {type(options).__name__}")
    options = {str(key): value for key, value in options.items()}
    check_option_names(options, "dataflow_options")
    elsewhere = sorted(set(options) & other_runner_option_names())
    if elsewhere:
        raise ValueError(f"dataflow_options {elsewhere} would choose another runner or where its workers run; a local "
                         f"run always uses Beam's in-process runner: choose the runner with runner= (one of "
                         f"{list(KNOWN_RUNNERS)})")
    return options


class ReusedViews(PipelineOptions):
    """PipelineOptions that make each view once. Beam asks the pipeline's options for a view on every
    transform it applies and every type it checks (~230 views for a conversion graph), and each new
    view parses every flag with argparse again: ~0.07 s of a local job's ~0.45 s start-up. Views of
    one options object share its values (Beam's own design), so a reused view reads and writes exactly
    what a new one would."""

    def view_as(self, cls):
        views = self.__dict__.get("_views")
        if views is None:
            views = {}
            object.__setattr__(self, "_views", views)  # PipelineOptions' __setattr__ takes options only
        view = views.get(cls)
        if view is None:
            view = views[cls] = super().view_as(cls)
        return view


def local_pipeline(options: Optional[Mapping[str, Any]] = None) -> beam.Pipeline:
    """A Beam Pipeline on the in-process FnApiRunner with `options` (Beam option names (dests) → Python values)."""
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    return PlainPipeline(runner=FnApiRunner(), options=ReusedViews([], **dict(options or {})))


def dataflow_pipeline(options: Mapping[str, Any]) -> beam.Pipeline:
    """A Beam Pipeline on Beam's DataflowRunner with `options` (typed values, used as given)."""
    pipeline_options = PipelineOptions([], **dict(options))
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


def worker_processes_pay_off(rows: int, cores: int, start_seconds: float = WORKER_START_SECONDS,
                             row_seconds: float = ROW_SECONDS) -> bool:
    """Whether a worker process per core, each costing `start_seconds` to start, finishes `rows` rows
    (`row_seconds` each) sooner than the in-process worker alone."""
    return cores > 1 and rows * row_seconds * (1 - 1 / cores) > 2 * start_seconds


def can_fork() -> bool:
    """Forking without exec is safe here (Linux; macOS and Windows libraries forbid or break it)."""
    return sys.platform.startswith("linux")


def encode_processes(rows: int, options: Optional[Mapping[str, Any]] = None, cores: Optional[int] = None,
                     threads_use_every_core: bool = False, local_files: bool = True) -> int:
    """How many forked processes encode and write a local image job's batches (1: the in-process worker).

    A process per core for jobs of enough rows whose images and output are local files (a fork must
    not share network clients), unless the heavy work already runs on a thread per core
    (`threads_use_every_core`: validate="decode") or the caller chose Beam's workers
    (`direct_num_workers` / `direct_running_mode`; `direct_num_workers=1` keeps a job on one core).
    """
    cores = usable_cores() if cores is None else cores
    if (threads_use_every_core or not local_files or not can_fork()
            or any(name in (options or {}) for name in _WORKER_OPTIONS)
            or not worker_processes_pay_off(rows, cores, POOL_START_SECONDS)):
        return 1
    return cores


def local_options(rows: int, options: Optional[Mapping[str, Any]] = None, cores: Optional[int] = None,
                  threads_use_every_core: bool = False, encode_processes: int = 1,
                  tabular: bool = False) -> dict[str, Any]:
    """Beam options for a local (DirectRunner) job of `rows` rows: one worker process per core when
    that pays off (large jobs on several cores), the in-process worker otherwise — always when the
    job's heavy work already runs on every core: on a thread per core (`threads_use_every_core`:
    validate="decode", where each worker process would also load TensorFlow's kernels) or in forked
    encoding processes (`encode_processes` > 1). Image-free (`tabular`) rows cost TABULAR_ROW_SECONDS
    each, so only tables of millions of rows pay for worker processes.

    Beam's own `direct_num_workers` / `direct_running_mode`, when the caller passes either, decide
    instead (e.g. `direct_num_workers=1` keeps a large job in-process).
    """
    chosen = dict(options or {})
    cores = usable_cores() if cores is None else cores
    if (threads_use_every_core or encode_processes > 1 or any(name in chosen for name in _WORKER_OPTIONS)
            or not worker_processes_pay_off(rows, cores,
                                            row_seconds=TABULAR_ROW_SECONDS if tabular else ROW_SECONDS)):
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
