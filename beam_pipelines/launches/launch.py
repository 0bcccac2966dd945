"""Launching a conversion's Beam graph, locally, on Dataflow or on a portable runner: each launch owns its
checks, its Beam options and its run.

`launch_for` picks one from the runner, once, before anything is written: a LocalLaunch (Beam's
in-process FnApiRunner; forked encoding processes or Beam worker processes when they pay off, see
beam_pipelines.launches.runners), a DataflowLaunch (request checks, Cloud Storage reachability of the table,
job options, worker package, submit without waiting; beam_pipelines.launches.dataflow_job) or a
PortableLaunch (PortableRunner, FlinkRunner, SparkRunner: beam_pipelines.launches.portable_launch).
A launch's `distributed` chooses the graph's distributed form (reshuffles spreading rows and shards over
workers). convert() and upgrade() call the chosen launch along one straight line, and `fail_job` is their
one cleanup path.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, NoReturn, Optional, Union

from beam_pipelines.graphs.tabular_graph import is_tabular
from beam_pipelines.launches import dataflow_job, runners
from beam_pipelines.launches.portable_launch import PortableLaunch, check_request as check_portable_request
from tfrecorder.core.caller_heap import caller_objects_frozen
from tfrecorder.core.deferred_interrupts import deferred_interrupts
from tfrecorder.errors import StorageReadError, interruption, translate_pipeline_error
from tfrecorder.format import job_directory
from tfrecorder.io import storage, tensorflow_kernels
from tfrecorder.io.decode_check import DECODE
from tfrecorder.options.conversion_options import OutputLocation
from tfrecorder.options.job_config import JobConfig
from tfrecorder.core.progress_bar import should_show
from tfrecorder.core.quiet import quiet_libraries
from tfrecorder.core.schema import Schema

BuildGraph = Callable[[Any, JobConfig], Any]  # (Beam pipeline, config) → adds the job's transforms


def decodes_images(validate: str, schema: Schema) -> bool:
    """Whether a job of this table decodes images with TensorFlow (validate="decode" and image columns)."""
    return validate == DECODE and bool(schema.image_columns)


LOADS_WHILE_STARTING_ROWS = 20_000  # a decoding job of at most this many rows starts its pipeline while
# TensorFlow's libraries load (~0.25 s, about all of a 100-row job's own work): its steps before the
# decoding one are short. A larger job waits for them first, so that a machine where they do not load
# fails at once, not after counting its table.


class LocalLaunch:
    """A run on this machine (DirectRunner): `run` blocks until the job is published."""

    runner = "DirectRunner"
    distributed = False  # one stage less: the in-process runner would hold every reshuffled row in memory
    resumable = True  # a killed job is continued by the next run (issue 27)

    def __init__(self, beam_options: Mapping[str, Any]) -> None:
        self.beam_options = beam_options  # the caller's beam_options (checked), given to the local runner

    def check_table(self, table: Any, schema: Schema) -> None:
        """Local workers read whatever the driver reads: nothing more to check."""

    def preload_decoder(self, validate: str, schema: Schema) -> None:
        """Start loading TensorFlow's decoding kernels on a thread as soon as the table is known to need
        them (validate="decode", image columns): their ~0.25 s then overlaps the driver's staging,
        fingerprint and planning too, not only the graph's building (`run`). Beam's runner module is
        imported first: a module with compiled extensions imported while the libraries load waits for the
        dynamic loader's lock, holding the GIL. A 100-row job: 9–41 ms less (0.549–0.581 → 0.525–0.540 s,
        medians of four interleaved runs)."""
        if decodes_images(validate, schema):
            runners.in_process_runner()  # imported first: what the run's local_pipeline imports
            tensorflow_kernels.load_in_background()

    def check_readable_dir(self, path: str) -> None:
        """Local workers read whatever the driver reads."""

    def shows_progress(self, progress: bool) -> bool:
        return should_show(progress)

    def job_options(self, config: JobConfig) -> Optional[Mapping[str, Any]]:
        return self.beam_options

    def plan(self, config: JobConfig, rows_estimate: int, images_remote: bool,
             encoding_pool: bool = True) -> tuple[JobConfig, dict[str, Any]]:
        """The config with its forked encoding processes (the image and tabular graphs' pools,
        `encoding_pool`), and the Beam options that spread the rest of the work over the cores when that
        pays off. `images_remote`: the images, or the table itself, live in an object store."""
        threads_use_every_core = decodes_images(config.validate, config.schema)
        if encoding_pool and (config.schema.image_columns or is_tabular(config)):
            known = None if config.schema.image_columns else config.source.known_parts()
            config = dataclasses.replace(config, encode_processes=runners.encode_processes(
                rows_estimate, self.beam_options, threads_use_every_core=threads_use_every_core,
                local_files=not (storage.is_remote(config.temp_dir) or images_remote),
                tabular=not config.schema.image_columns, parts=None if known is None else len(known)))
        return config, runners.local_options(rows_estimate, self.beam_options,
                                             threads_use_every_core=threads_use_every_core,
                                             encode_processes=config.encode_processes,
                                             tabular=not config.schema.image_columns)

    def run(self, build: BuildGraph, config: JobConfig, options: Optional[Mapping[str, Any]], verbose: bool,
            rows_total: int, rows_estimated: bool = False, progress: Optional[bool] = False) -> None:
        """Run the job here; its bar (`progress`) is the caller's, over config.progress_dir (shows_progress)."""
        with quiet_libraries(verbose), caller_objects_frozen():  # collections skip the caller's (TensorFlow's) objects
            pipeline = runners.local_pipeline(options)
            decodes = decodes_images(config.validate, config.schema)
            if decodes:  # loaded while the graph is built; the decoding DoFn waits for it
                tensorflow_kernels.load_in_background()
            build(pipeline, config)
            if decodes and not (rows_total is not None and rows_total <= LOADS_WHILE_STARTING_ROWS):
                tensorflow_kernels.kernels()  # loaded, or TensorFlowUnavailable before the pipeline starts
            try:
                pipeline.run().wait_until_finish()
            except BaseException as exc:
                if decodes:  # loaded or failed before the error goes on: the loading thread holds stderr meanwhile
                    try:
                        tensorflow_kernels.kernels()
                    except Exception:
                        if isinstance(exc, Exception):  # a job that failed because TensorFlow does not load says so
                            raise
                raise


class DataflowLaunch:
    """A job submitted to Dataflow: `run` returns as soon as it is submitted (or its template written)."""

    runner = "DataflowRunner"
    distributed = True  # reshuffles spread rows and shards over every worker

    def __init__(self, request: dataflow_job.DataflowRequest) -> None:
        self.request = request
        # A resubmitted job continues a failed or cancelled one's committed parts (issue 27); a template
        # (launched later, maybe many times) or a dry run (nothing runs) starts afresh and holds no lock.
        self.resumable = not (request.options.get("template_location") or request.options.get("dry_run"))

    def check_table(self, table: Any, schema: Schema) -> None:
        dataflow_job.check_table_reachable(table, schema)

    def preload_decoder(self, validate: str, schema: Schema) -> None:
        """Nothing: Dataflow's workers load their own."""

    def lock_owner(self, submitted: dataflow_job.SubmittedJob) -> Optional[dict[str, Any]]:
        """What the job's lock records once the job is submitted: the Dataflow job that now holds it
        (None: a dry run or a template, nothing runs)."""
        job_id = submitted.fields.get("job_id")
        return None if not job_id else {"dataflow_job": job_id, "project": self.request.project,
                                         "region": self.request.region}

    def job_ended(self, holder: Mapping[str, Any]) -> bool:
        """Whether the Dataflow job holding a job's lock has ended (a resubmit may then continue it)."""
        return dataflow_job.job_ended(self.request, holder)

    def check_readable_dir(self, path: str) -> None:
        """A directory the workers read (upgrade's legacy directory) must be on Cloud Storage."""
        if not path.startswith("gs://"):
            raise ValueError(f"Dataflow workers cannot read the local directory {path}: copy it to gs:// first")

    def shows_progress(self, progress: bool) -> bool:
        return False  # DataflowConversionResult.wait() reports the job's progress

    def job_options(self, config: JobConfig) -> dict[str, Any]:
        return dataflow_job.pipeline_options(self.request, config.job_name)

    def plan(self, config: JobConfig, rows_estimate: int, images_remote: bool,
             encoding_pool: bool = True) -> tuple[JobConfig, dict[str, Any]]:
        return config, self.job_options(config)

    def run(self, build: BuildGraph, config: JobConfig, options: Mapping[str, Any], verbose: bool,
            rows_total: int, rows_estimated: bool = False,
            progress: Optional[bool] = False) -> dataflow_job.SubmittedJob:
        """Submit the job and return; its progress is DataflowConversionResult.wait()'s (`progress` unused)."""
        with quiet_libraries(verbose):
            pipeline = runners.dataflow_pipeline(options)
            build(pipeline, config)
            return dataflow_job.submit(pipeline, self.request, config, rows_total, rows_estimated=rows_estimated)


Launch = Union[LocalLaunch, DataflowLaunch, PortableLaunch]


def launch_for(runner: str, output: OutputLocation, project: Optional[str], region: Optional[str],
               job_label: Optional[str], beam_options: Optional[Mapping[str, Any]],
               tfrecorder_wheel: Optional[str], *, dataflow_options: Optional[Mapping[str, Any]] = None,
               shared_filesystem: bool = False) -> Launch:
    """The launch for `runner` with the caller's `beam_options` (or `dataflow_options`, their older name;
    not both), its request checked (ValueError) before anything is written or staged; a launch constrains
    where `output` may be (Dataflow, and portable workers that do not share this machine's files
    (`shared_filesystem`): Cloud Storage only)."""
    runners.check_runner(runner)
    options = runners.chosen_options(beam_options, dataflow_options)
    if runner in runners.PORTABLE_RUNNERS:
        return PortableLaunch(check_portable_request(runner, output, options, shared_filesystem))
    if shared_filesystem:
        raise ValueError(f"shared_filesystem=True is for workers of a portable runner ({list(runners.PORTABLE_RUNNERS)}), "
                         f"not runner={runner!r}")
    if runner == DataflowLaunch.runner:
        return DataflowLaunch(dataflow_job.check_request(output, project, region, job_label, options,
                                                         tfrecorder_wheel))
    return LocalLaunch(runners.check_local_options(options))


def fail_job(exc: BaseException, temp_dir: str, final_dir: str, output_dir: str,
             own_error: Optional[Exception] = None, keep_resumable: bool = False) -> NoReturn:
    """Called from the `except` of a failed launch: leave nothing of the job behind, then raise.

    Raises the KeyboardInterrupt if `exc` is (or Beam made a RuntimeError of) Ctrl-C, else `own_error`
    (an error the caller recognised in `exc`, stated without Beam's chain) if given, else `exc`
    translated into a tfrecorder error (chained to it), else `exc` itself.

    `keep_resumable` (a resumable job, issue 27): a job stopped by Ctrl-C or by a storage outage keeps
    its `.incomplete-` directory and committed parts, which the same call continues; the error says
    so (an interrupt carries the directory as `kept_job`). Bad input and a full disk still remove it.
    """
    interrupted = interruption(exc)
    translated = translate_pipeline_error(exc, output_dir) if interrupted is None and own_error is None else None
    keep = keep_resumable and (interrupted is not None or isinstance(translated, StorageReadError))
    if not keep:
        with deferred_interrupts():  # a second Ctrl-C must not leave the job half-removed
            job_directory.abandon(temp_dir, final_dir)
    if interrupted is not None:
        if keep:
            interrupted.kept_job = temp_dir
        raise interrupted from None
    if own_error is not None:
        raise own_error from None
    if translated is exc:
        raise  # noqa: PLE0704 - re-raises the exception being handled by the caller
    if keep:
        translated = StorageReadError(translated.errno, translated.strerror.replace(
            "nothing was published", f"nothing was published; its committed work is kept in {temp_dir}: "
            "the same call continues it"))
    raise translated from exc
