"""Running a conversion on Beam's portable runner: a job service (Beam's embedded one, or a Flink or Spark
cluster's) runs the graph, and SDK workers in processes or containers of their own run its steps.

`runner="PortableRunner"` needs `job_endpoint` ('embed': Beam's job service inside this process; or the
host:port of a running one). FlinkRunner and SparkRunner start Beam's job-server jar themselves
(`flink_job_server_jar` / `spark_job_server_jar`, else Beam downloads it from Maven) unless
`job_endpoint` names one already running. Where the SDK workers run is `environment_type`:

- LOOPBACK, Beam's embedded environments and `SUBPROCESS_ENVIRONMENT` (a worker process started with
  `environment_config`, e.g. `subprocess_worker_command()`) run on this machine and read its files;
- DOCKER (Beam's default), PROCESS and EXTERNAL workers may run anywhere: source, images and output must
  then be on Cloud Storage, unless the caller says every worker sees the same files
  (`shared_filesystem=True`: an NFS mount at the same path everywhere, say).

Every option is checked by name before anything is written (`check_request`): a Beam option, not one
of the local runner (direct_*) or of the other cluster runner (spark_* for Flink, flink_* for Spark),
an environment Beam knows with the config it needs, and a job-server jar that exists.

Workers must be able to import tfrecorder (installed in their image or environment); the graph is
the distributed one Dataflow runs (`distributed`), without the local fork pool, and without the local
progress directory, a driver-local path. The progress bar reads the job's rows_processed counter from the
job service instead, while the job runs and once more when it is done (Beam 2.77's own job service
reports a job's counters only once it is done; the bar then jumps to the end).
"""
from __future__ import annotations

import dataclasses
import os
import shlex
import sys
import tempfile
import threading
from typing import Any, Callable, Mapping, Optional

from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_job_api_pb2

from beam_pipelines.launches import dataflow_job, runners
from beam_pipelines.steps.progress_counters import rows_processed_in
from tfrecorder.core.progress_bar import ProgressBar, should_show
from tfrecorder.core.quiet import quiet_libraries
from tfrecorder.core.schema import Schema
from tfrecorder.io import storage
from tfrecorder.options.conversion_options import OutputLocation
from tfrecorder.options.job_config import JobConfig

SUBPROCESS_ENVIRONMENT = python_urns.SUBPROCESS_SDK  # beam:env:harness_subprocess_python:v1
# Environments whose SDK workers run on the driver's machine (threads or child processes of the job service).
DRIVER_MACHINE_ENVIRONMENTS = ("LOOPBACK", python_urns.EMBEDDED_PYTHON, python_urns.EMBEDDED_PYTHON_GRPC,
                               python_urns.EMBEDDED_PYTHON_LOOPBACK, SUBPROCESS_ENVIRONMENT)
# Environments whose workers may run on other machines; each but DOCKER needs environment_config.
REMOTE_ENVIRONMENTS = ("DOCKER", "PROCESS", "EXTERNAL")
_NEED_CONFIG = ("PROCESS", "EXTERNAL", SUBPROCESS_ENVIRONMENT)
# Beam options classes a runner would ignore: the local runner's, and the other cluster runner's.
_IGNORED_OPTIONS = {
    "PortableRunner": ("DirectOptions", "FlinkRunnerOptions", "SparkRunnerOptions"),
    "FlinkRunner": ("DirectOptions", "SparkRunnerOptions"),
    "SparkRunner": ("DirectOptions", "FlinkRunnerOptions"),
}
_JOB_SERVER_JARS = ("flink_job_server_jar", "spark_job_server_jar")


def subprocess_worker_command(python: str = sys.executable) -> str:
    """The `environment_config` of SUBPROCESS_ENVIRONMENT: an SDK worker run by `python` (by default this
    very interpreter, so the worker imports what the driver imports)."""
    return f"{shlex.quote(python)} -m apache_beam.runners.worker.sdk_worker_main"


def job_rows_processed(result: Any) -> Optional[int]:
    """The rows_processed counter of a portable job (Beam's portable PipelineResult) as its job service
    reports it now; None when it reports none yet or does not answer (progress is best effort). Asks the
    job service each time: Beam's `result.metrics()` keeps its first answer."""
    from apache_beam.runners.portability.portable_runner import PortableMetrics

    try:
        response = result._job_service.GetJobMetrics(beam_job_api_pb2.GetJobMetricsRequest(job_id=result._job_id))
        return rows_processed_in(PortableMetrics(response))
    except Exception:  # noqa: BLE001 - a job service that cannot say leaves the bar where it is
        return None


@dataclasses.dataclass(frozen=True)
class PortableRequest:
    """A checked request to run on a portable runner (nothing started yet)."""

    runner: str  # PortableRunner, FlinkRunner or SparkRunner
    options: dict[str, Any]  # the caller's Beam options, passed to Beam unchanged (without `runner`)
    workers_share_files: bool  # workers read the driver's local paths (same machine, or shared_filesystem)


def check_request(runner: str, output: OutputLocation, beam_options: Optional[Mapping[str, Any]],
                  shared_filesystem: bool) -> PortableRequest:
    """Refuse (ValueError) what the runner would reject or ignore, and a local output its workers
    cannot write, before anything is written or started."""
    options = runners.checked_option_dict(beam_options)
    if options.get("runner", runner) != runner:
        raise ValueError(f"beam_options['runner']={options['runner']!r} contradicts runner={runner!r}")
    ignored = sorted(set(options) & runners.option_names_of(_IGNORED_OPTIONS[runner]))
    if ignored:
        raise ValueError(f"beam_options {ignored} belong to another runner: runner={runner!r} would ignore them")
    environment = options.get("environment_type")
    if environment is not None and environment not in DRIVER_MACHINE_ENVIRONMENTS + REMOTE_ENVIRONMENTS:
        raise ValueError(f"environment_type {environment!r} is none of {list(REMOTE_ENVIRONMENTS)} or "
                         f"{list(DRIVER_MACHINE_ENVIRONMENTS)}")
    if environment in _NEED_CONFIG and not options.get("environment_config"):
        raise ValueError(f"environment_type {environment!r} needs environment_config (see docs/runners.md)")
    if runner == "PortableRunner" and not options.get("job_endpoint"):
        raise ValueError("runner='PortableRunner' needs beam_options['job_endpoint']: 'embed' (Beam's job service "
                         "in this process) or the host:port of a running job service")
    if not isinstance(shared_filesystem, bool):
        raise ValueError(f"shared_filesystem must be True or False, got {shared_filesystem!r}")
    share = shared_filesystem or environment in DRIVER_MACHINE_ENVIRONMENTS
    if not share:
        output.require_gcs(f"runner={runner!r} with workers of their own (environment_type "
                           f"{environment or 'DOCKER'}; shared_filesystem=True if they see this machine's files)")
    for name in _JOB_SERVER_JARS:
        jar = options.get(name)
        if jar and "://" not in str(jar) and not os.path.isfile(str(jar)):
            raise ValueError(f"beam_options[{name!r}]: no file {jar}")
    return PortableRequest(runner, {key: value for key, value in options.items() if key != "runner"}, share)


class PortableLaunch:
    """A job on a portable runner's job service: `run` blocks until the job is published."""

    distributed = True  # the graph Dataflow runs: reshuffles spread rows and shards over the workers

    def __init__(self, request: PortableRequest) -> None:
        self.request = request

    @property
    def runner(self) -> str:
        return self.request.runner

    @property
    def stages_worker_package(self) -> bool:
        """Whether Beam stages tfrecorder's wheel for the workers: DOCKER (Beam's default) and PROCESS workers
        install the job's extra packages; EXTERNAL, LOOPBACK and this machine's workers must already have
        tfrecorder installed (docs/runners.md)."""
        return self.request.options.get("environment_type", "DOCKER") in ("DOCKER", "PROCESS")

    @property
    def workers(self) -> str:
        return f"{self.runner} workers"

    def check_table(self, table: Any, schema: Schema) -> None:
        """Workers of their own read the source and images from Cloud Storage only."""
        if not self.request.workers_share_files:
            dataflow_job.check_table_reachable(table, schema, workers=self.workers)

    def preload_decoder(self, validate: str, schema: Schema) -> None:
        """Nothing: the SDK workers, processes of their own, load their own."""

    def check_readable_dir(self, path: str) -> None:
        """A directory the workers read (upgrade's legacy directory): on Cloud Storage for workers of their own."""
        if not self.request.workers_share_files and not storage.is_remote(path):
            raise ValueError(f"{self.workers} cannot read the local directory {path}: copy it to gs:// first, "
                             "or pass shared_filesystem=True if every worker sees this machine's files")

    def shows_progress(self, progress: bool) -> bool:
        """No local progress directory (workers elsewhere cannot write it): `run` shows the bar itself."""
        return False

    def job_options(self, config: JobConfig) -> dict[str, Any]:
        return {"job_name": config.job_name, **self.request.options}

    def plan(self, config: JobConfig, rows_estimate: int, images_remote: bool,
             encoding_pool: bool = True) -> tuple[JobConfig, dict[str, Any]]:
        """The config as it is (no forked encoding processes in SDK workers), and the job's Beam options."""
        return config, self.job_options(config)

    def run(self, build: Callable[[Any, JobConfig], Any], config: JobConfig, options: Mapping[str, Any],
            verbose: bool, rows_total: int, rows_estimated: bool = False, progress: Optional[bool] = False) -> None:
        """Build the graph, submit it to the job service, and wait until the job is done (a failed job
        raises Beam's RuntimeError, whose text holds the worker's traceback for translate_pipeline_error).
        With `progress` (and a terminal or notebook to show it), a bar over `rows_total` follows the job's
        rows_processed counter; an estimated total becomes the rows processed once the job is done."""
        with quiet_libraries(verbose), tempfile.TemporaryDirectory(prefix="tfrecorder-wheel-") as scratch:
            pipeline = runners.portable_pipeline(self.runner, options)
            build(pipeline, config)
            if self.stages_worker_package:
                dataflow_job.stage_worker_wheel(pipeline, config, scratch)
            result = pipeline.run()
            if not should_show(progress):
                result.wait_until_finish()
                return
            finished = threading.Event()

            def counts() -> tuple[Optional[int], Optional[int]]:
                done = job_rows_processed(result)
                return done, done if finished.is_set() and rows_estimated else None

            with ProgressBar(counts, rows_total):
                result.wait_until_finish()
                finished.set()
