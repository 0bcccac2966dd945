"""Pipeline runners: which Beam runner executes a conversion, with which options.

Locally we pin the in-process FnApiRunner: Beam's default DirectRunner first tries to download the
Prism runner binary from the internet. DataflowRunner pipelines get Beam's Dataflow runner; with the
`no_auth` option, Cloud Storage is accessed anonymously too (emulators, public buckets). PortableRunner,
FlinkRunner and SparkRunner pipelines get Beam's runner of that name (a job service and SDK workers
elsewhere: beam_pipelines.launches.portable_launch). All are PlainPipelines, built the same way inside
Jupyter as in a script (beam_pipelines.launches.plain_pipeline).

The caller's Beam options come as `beam_options` (`dataflow_options` is its older name: `chosen_options`).
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

PORTABLE_RUNNERS = ("PortableRunner", "FlinkRunner", "SparkRunner")  # a job service, SDK workers elsewhere
KNOWN_RUNNERS = ("DirectRunner", "DataflowRunner", *PORTABLE_RUNNERS)
# Runners Beam has that cannot run the conversion graph, with the reason.
REFUSED_RUNNERS = {
    "DaskRunner": "Beam's DaskRunner drops what a DoFn emits in finish_bundle and every tagged output, and the "
                  "conversion graph sends its piece files and discarded rows exactly that way; run on a Flink or "
                  "Spark cluster instead (runner='FlinkRunner' or 'SparkRunner', see docs/runners.md)",
}
# Local jobs spread their per-row work over the cores in one of two ways (encode_processes, local_options):
# - forked encoding processes (beam_pipelines.workers.fork_pool): each child encodes and writes whole batches
#   while the in-process worker reads and checks rows (image-free tables: each child reads, encodes, writes
#   and commits whole parts). Measured on 2 cores (benchmarks/convert_bench.py, header mode, shared
#   machine): one process spends 130-190 µs of CPU per row (ROW_SECONDS), and starting and stopping two
#   forked children costs ~30 ms (POOL_START_SECONDS, with a margin), so the pool is used once the rows'
#   work it takes off the in-process worker beats twice that cost (~1,200 image rows on 2 cores; image-free
#   rows cost ~TABULAR_ROW_SECONDS, so ~35,000 of them).
# - Beam's multi_processing FnApiRunner: each worker process spends ~WORKER_START_SECONDS of CPU
#   starting (fresh interpreters import Beam and tfrecorder); only chosen for jobs the pool cannot take
#   (images, table or output on remote storage) when the rows' work beats twice that start-up.
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
    if runner in REFUSED_RUNNERS:
        raise ValueError(f"runner={runner!r} is not supported: {REFUSED_RUNNERS[runner]}")
    if runner not in KNOWN_RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; expected one of {list(KNOWN_RUNNERS)}")
    return runner


@leaves_logging_alone  # every PipelineOptions() calls logging.basicConfig()
def beam_option_names() -> set[str]:
    """Every option name (argparse dest) of the PipelineOptions classes Beam has registered."""
    return set(PipelineOptions([]).get_all_options(drop_default=False))


@leaves_logging_alone
def option_names_of(class_names: Iterable[str]) -> set[str]:
    """The option names of Beam's PipelineOptions classes named `class_names` (e.g. 'FlinkRunnerOptions')."""
    options, wanted = PipelineOptions([]), set(class_names)
    names: set[str] = set()
    for cls in PipelineOptions.__subclasses__():
        if cls.__name__ in wanted:
            names.update(options.view_as(cls).get_all_options(current_only=True))
    return names


def other_runner_option_names() -> set[str]:
    """`runner` and the options of other runners' and portable workers' classes (job_endpoint, environment_type, ...)."""
    return {"runner"} | option_names_of(_OTHER_RUNNER_OPTIONS)


def chosen_options(beam_options: Optional[Mapping[str, Any]],
                   dataflow_options: Optional[Mapping[str, Any]]) -> Optional[Mapping[str, Any]]:
    """The caller's Beam options: `beam_options`, or `dataflow_options` (its older name); ValueError for both."""
    if beam_options is not None and dataflow_options is not None:
        raise ValueError("pass Beam pipeline options once: beam_options= (dataflow_options= is its older name), "
                         "not both")
    return beam_options if beam_options is not None else dataflow_options


def checked_option_dict(options: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """The caller's Beam options as a dict of str keys whose every name is a Beam option (ValueError otherwise)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(f"beam_options must be a dict of Beam pipeline options, got {type(options).__name__}")
    options = {str(key): value for key, value in options.items()}
    check_option_names(options, "beam_options")
    return options


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
    """The caller's `beam_options` for a local run, checked before anything is written: ValueError for
    a name that is no Beam option, or one that would choose another runner or where workers run (a local
    run always uses the in-process FnApiRunner; runner='PortableRunner', 'FlinkRunner', 'SparkRunner' or
    'DataflowRunner' runs elsewhere, and takes those options)."""
    options = checked_option_dict(options)
    elsewhere = sorted(set(options) & other_runner_option_names())
    if elsewhere:
        raise ValueError(f"beam_options {elsewhere} would choose another runner or where its workers run; a local "
                         f"run always uses Beam's in-process runner: choose the runner with runner= (one of "
                         f"{list(KNOWN_RUNNERS)}; {list(PORTABLE_RUNNERS)} take these options)")
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
    """A Beam Pipeline on the in-process FnApiRunner with `options` (Beam option names (dests) → Python values).

    Beam's construction-time type check is off unless the options turn it on: it infers each step's
    output type from its function's bytecode (~80 inferences, 0.13 s of a 100-row job's ~0.45 s), which
    a fixed, tested graph does not need; the elements are then coded as values of any type. A Dataflow
    or portable job keeps the check (dataflow_pipeline, portable_pipeline)."""
    return PlainPipeline(runner=in_process_runner()(),
                         options=ReusedViews([], **{"pipeline_type_check": False, **dict(options or {})}))


def in_process_runner() -> type:
    """Beam's in-process runner class, imported on first use with its compiled modules (a decoding job
    imports it before TensorFlow's libraries start loading: launch.LocalLaunch.preload_decoder)."""
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    return FnApiRunner


def dataflow_pipeline(options: Mapping[str, Any]) -> beam.Pipeline:
    """A Beam Pipeline on Beam's DataflowRunner with `options` (typed values, used as given)."""
    pipeline_options = PipelineOptions([], **dict(options))
    if pipeline_options.view_as(GoogleCloudOptions).no_auth:
        connect_anonymously()
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

    return PlainPipeline(runner=DataflowRunner(), options=pipeline_options)


def portable_pipeline(runner: str, options: Mapping[str, Any]) -> beam.Pipeline:
    """A Beam Pipeline on Beam's PortableRunner, FlinkRunner or SparkRunner (`runner`) with `options`
    (typed values, used as given); nothing is started until it runs."""
    if runner == "FlinkRunner":
        from apache_beam.runners.portability.flink_runner import FlinkRunner as runner_class
    elif runner == "SparkRunner":
        from apache_beam.runners.portability.spark_runner import SparkRunner as runner_class
    else:
        from apache_beam.runners.portability.portable_runner import PortableRunner as runner_class
    return PlainPipeline(runner=runner_class(), options=PipelineOptions([], **dict(options)))


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
                     threads_use_every_core: bool = False, local_files: bool = True,
                     tabular: bool = False, parts: Optional[int] = None) -> int:
    """How many forked processes encode and write a local job's rows (1: the in-process worker): an image
    job's batches, or an image-free (`tabular`) job's whole parts, whose rows cost TABULAR_ROW_SECONDS.

    A process per core (at most one per part, when the `parts` are known beforehand) for jobs of enough
    rows whose source, images and output are local files (a fork must not share network clients),
    unless the heavy work already runs on a thread per core (`threads_use_every_core`:
    validate="decode") or the caller chose Beam's workers (`direct_num_workers` /
    `direct_running_mode`; `direct_num_workers=1` keeps a job on one core).
    """
    cores = usable_cores() if cores is None else cores
    if parts is not None:
        cores = min(cores, parts)
    if (threads_use_every_core or not local_files or not can_fork()
            or any(name in (options or {}) for name in _WORKER_OPTIONS)
            or not worker_processes_pay_off(rows, cores, POOL_START_SECONDS,
                                            row_seconds=TABULAR_ROW_SECONDS if tabular else ROW_SECONDS)):
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
