"""Running a conversion on Google Cloud Dataflow: request checks, job options, worker package, submit.

Everything here happens on the driver. The Beam graph is the same as for local runs
(beam_pipelines.graphs.image_graph); what differs is where files live (gs:// only), how the workers get this
package (a wheel built at submit time and staged by Beam as an extra package) and that the call
returns as soon as the job is submitted (`DataflowConversionResult.wait()` blocks).
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from tfrecorder.core import types
from tfrecorder.core.quiet import leaves_logging_alone
from tfrecorder.format.file_names import DATAFLOW_STAGING_DIR
from tfrecorder.io import storage
from tfrecorder.core.version import __version__
from beam_pipelines.launches import runners
from tfrecorder.options.job_config import JobConfig
from tfrecorder.rows.row_encoding import resolve_uri
from tfrecorder.rows.value_coercion import is_missing
from tfrecorder.core.schema import Schema
from tfrecorder.options.conversion_options import OutputLocation
from tfrecorder.sources.source_protocol import Table

# What workers import from PyPI (beam_pipelines + the tfrecorder modules they use). Apache Beam and
# google-cloud-storage come with Beam's SDK container; records are encoded by hand (see
# tfrecorder.format.example_encoder), so TensorFlow is only needed to decode images. Keep in step with
# setup.py's install_requires.
WORKER_REQUIREMENTS = (
    "pandas>=2.0",
    "pillow>=10.0",
    "google-crc32c>=1.5",
    "pyarrow>=14",
    "numpy>=1.24",
)
# validate="decode" (the default) checks every image with TensorFlow's own decoder (nothing lighter
# gives its exact verdict, see tfrecorder.io.decode_check), so workers install it in that mode only; it adds
# to each worker's start-up. validate="header" keeps workers free of TensorFlow.
DECODE_REQUIREMENTS = ("tensorflow>=2.16",)
WORKER_PACKAGES = ("tfrecorder", "beam_pipelines")
CONSOLE_URL = "https://console.cloud.google.com/dataflow/jobs/{region}/{job_id}?project={project}"

# Google Cloud's documented formats: project ids (optionally domain-scoped), regions, bucket URLs,
# Dataflow job names.
_PROJECT = re.compile(r"([a-z][-a-z0-9.]*[a-z0-9]:)?[a-z][-a-z0-9]{4,28}[a-z0-9]")
_REGION = re.compile(r"[a-z]+(-[a-z]+)+[0-9]+")
_JOB_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
# A job label keeps its meaning when sanitised: letters, digits and separators, starting with a letter.
_JOB_LABEL = re.compile(r"[A-Za-z][-A-Za-z0-9_. ]{0,39}")
_FIXED_OPTIONS = ("runner", "project", "region")  # set by convert()'s own arguments


@dataclasses.dataclass(frozen=True)
class DataflowRequest:
    """A checked request to run on Dataflow (nothing staged yet)."""

    project: str
    region: str
    output_dir: str
    options: dict[str, Any]  # the caller's dataflow_options, passed to Beam unchanged
    tfrecorder_wheel: Optional[str]


def check_request(
    output: OutputLocation,
    project: Optional[str],
    region: Optional[str],
    job_label: Optional[str],
    dataflow_options: Optional[Mapping[str, Any]],
    tfrecorder_wheel: Optional[str],
) -> DataflowRequest:
    """Refuse (ValueError) anything Dataflow would reject, before anything is written or staged."""
    if not project:
        raise ValueError("runner='DataflowRunner' needs project= (the Google Cloud project id)")
    if not _PROJECT.fullmatch(str(project)):
        raise ValueError(f"project {project!r} is not a valid Google Cloud project id")
    if not region:
        raise ValueError("runner='DataflowRunner' needs region= (a Dataflow region such as 'us-central1')")
    if not _REGION.fullmatch(str(region)):
        raise ValueError(f"region {region!r} is not a valid Google Cloud region (like 'us-central1')")
    output.require_gcs("runner='DataflowRunner'")
    if job_label is not None and not _JOB_LABEL.fullmatch(str(job_label)):
        raise ValueError(
            f"job_label {job_label!r} cannot name a Dataflow job: use up to 40 letters, digits, '-', '_', '.' "
            "or spaces, starting with a letter"
        )
    options = _check_dataflow_options(dataflow_options, project, region)
    if tfrecorder_wheel is not None:
        tfrecorder_wheel = storage.user_path(tfrecorder_wheel, "tfrecorder_wheel")
        if not tfrecorder_wheel.endswith(".whl"):
            raise ValueError(f"tfrecorder_wheel must be a .whl file, got {tfrecorder_wheel!r}")
        if not storage.exists(tfrecorder_wheel):
            raise ValueError(f"tfrecorder_wheel {tfrecorder_wheel} does not exist")
    if options.get("no_auth"):
        runners.connect_anonymously()  # before the driver's first Cloud Storage access
    return DataflowRequest(str(project), str(region), output.path, options, tfrecorder_wheel)


def _check_dataflow_options(dataflow_options: Optional[Mapping[str, Any]], project: str, region: str) -> dict[str, Any]:
    options = runners.checked_option_dict(dataflow_options)
    for key, value in (("project", project), ("region", region), ("runner", "DataflowRunner")):
        if key in options and options[key] != value:
            raise ValueError(f"dataflow_options[{key!r}]={options[key]!r} contradicts {key}={value!r}")
    if "job_name" in options and not _JOB_NAME.fullmatch(str(options["job_name"])):
        raise ValueError(f"dataflow_options['job_name']={options['job_name']!r} is not a valid Dataflow job name")
    return {k: v for k, v in options.items() if k not in _FIXED_OPTIONS}


def parse_option_flags(items: Sequence[str]) -> dict[str, Any]:
    """`KEY=VALUE` / `KEY` strings (the CLI's --beam_option) → typed Beam options, as Beam parses them.

    A repeated KEY (labels, experiments, ...) accumulates; a bare KEY sets a boolean flag (no_auth).
    """
    from apache_beam.options.pipeline_options import PipelineOptions

    keys = [item.split("=", 1)[0] for item in items]
    runners.check_option_names(keys, "--beam_option")
    try:
        parsed = PipelineOptions([f"--{item}" for item in items]).get_all_options(drop_default=False)
    except SystemExit:  # Beam's argparse has already printed what was wrong
        raise ValueError(f"--beam_option: cannot parse {list(items)}") from None
    return {key: parsed[key] for key in dict.fromkeys(keys)}


def check_table_reachable(table: Table, schema: Schema, workers: str = "Dataflow workers") -> None:
    """The `workers` read the source and the images themselves, so both must be on Cloud Storage."""
    local = next((path for path in table.worker_files() if not storage.is_remote(path)), None)
    if local is not None:
        raise ValueError(
            f"{workers} cannot read the local file {local}: copy the source to gs:// or pass it as a "
            "DataFrame (pd.read_csv(...), pd.read_parquet(...)), which is staged for the workers automatically"
        )
    for column in schema.columns_of(types.ImageUri):
        for value in table.sample[column]:
            if is_missing(value):
                continue
            uri = resolve_uri(str(value), table.base_dir if storage.is_remote(table.base_dir) else "")
            if not uri.startswith("gs://"):
                raise ValueError(
                    f"{workers} can only read images on Cloud Storage: column {column!r} holds {value!r}"
                )


def staging_root(output_dir: str) -> str:
    return f"{output_dir.rstrip('/')}/{DATAFLOW_STAGING_DIR}"


def pipeline_options(request: DataflowRequest, job_name: str) -> dict[str, Any]:
    """Beam options for the job: defaults under the output dir, overridden by the caller's options."""
    if not _JOB_NAME.fullmatch(job_name):
        raise ValueError(f"{job_name!r} is not a valid Dataflow job name")
    root = staging_root(request.output_dir)
    return {
        "project": request.project,
        "region": request.region,
        "job_name": job_name,
        "temp_location": f"{root}/temp",
        "staging_location": f"{root}/staging",
        **request.options,
    }


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_worker_wheel(directory: str, requirements: Sequence[str] = WORKER_REQUIREMENTS) -> str:
    """Write a wheel of `tfrecorder` + `beam_pipelines` (as imported right now) into `directory`.

    Built straight from the imported modules, so it works from a source checkout and from an
    installed package alike, offline and without running setup.py. Its metadata declares
    `requirements`, which the workers' pip installs. Deterministic: same code, same bytes.
    """
    version = __version__
    dist_info = f"tfrecorder-{version}.dist-info"
    files: dict[str, bytes] = {}
    for package in WORKER_PACKAGES:
        root = Path(__import__(package).__file__).parent
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" not in path.parts:
                files[f"{package}/{path.relative_to(root).as_posix()}"] = path.read_bytes()
    metadata = ["Metadata-Version: 2.1", "Name: tfrecorder", f"Version: {version}",
                "Summary: tfrecorder worker package for Dataflow"]
    metadata += [f"Requires-Dist: {requirement}" for requirement in requirements]
    files[f"{dist_info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tfrecorder\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{dist_info}/top_level.txt"] = ("\n".join(WORKER_PACKAGES) + "\n").encode()
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files.items())
    files[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()

    path = os.path.join(directory, f"tfrecorder-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            wheel.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    return path


def stage_worker_wheel(pipeline, config: JobConfig, directory: str, wheel: Optional[str] = None) -> str:
    """Add tfrecorder's worker package to the pipeline's `extra_packages`, which Beam stages for workers
    that install what they run (Dataflow, and the portable runner's DOCKER and PROCESS workers): `wheel`
    if given, else one built into `directory` (which must outlive `pipeline.run()`). Returns its path."""
    from apache_beam.options.pipeline_options import SetupOptions

    setup = pipeline.options.view_as(SetupOptions)
    requirements = WORKER_REQUIREMENTS + (DECODE_REQUIREMENTS if config.validate == "decode" else ())
    wheel = wheel or build_worker_wheel(directory, requirements)
    setup.extra_packages = [*(setup.extra_packages or []), wheel]
    return wheel


def rows_processed(job_metrics) -> Optional[int]:
    """The committed `tfrecorder/rows_processed` counter from a Dataflow JobMetrics message (None: not yet)."""
    from beam_pipelines.steps.progress_counters import NAMESPACE, ROWS_PROCESSED

    total = None
    for metric in job_metrics.metrics:
        context = dict(metric.name.context)
        if (metric.name.origin == "user" and metric.name.name == ROWS_PROCESSED
                and context.get("namespace") == NAMESPACE and context.get("tentative") != "true"):
            total = (total or 0) + int(metric.scalar or 0)
    return total


@dataclasses.dataclass(frozen=True)
class SubmittedJob:
    """What the Dataflow launch knows once the job is submitted (the user layer wraps it in a
    DataflowConversionResult): `poll` → (Beam state name, rows processed or None), None when no job runs."""

    poll: Optional[Callable[[], tuple[str, Optional[int]]]]
    pipeline_result: Any
    fields: dict[str, Any]


def submit(pipeline, request: DataflowRequest, config: JobConfig, rows_total: int,
           rows_estimated: bool = False) -> SubmittedJob:
    """Stage the worker package, submit the built pipeline, and return without waiting.

    `rows_total` is exact for a DataFrame; for a file source it is estimated from the driver's sample
    (`rows_estimated`), and metadata.json has the exact count once the job is done."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions, TestOptions

    with tempfile.TemporaryDirectory(prefix="tfrecorder-wheel-") as scratch:
        stage_worker_wheel(pipeline, config, scratch, request.tfrecorder_wheel)
        beam_result = pipeline.run()
    cloud = pipeline.options.view_as(GoogleCloudOptions)
    fields = dict(tfrecord_dir=config.final_dir, job_name=cloud.job_name, project=request.project,
                  region=request.region, rows_in=rows_total, rows_in_estimated=rows_estimated)
    if pipeline.options.view_as(TestOptions).dry_run:
        storage.delete_tree(config.temp_dir)  # nothing will run: leave nothing behind
        return SubmittedJob(None, beam_result, dict(state="DRY_RUN", job_id=None, console_url=None, **fields))
    if not getattr(beam_result, "has_job", False):  # template_location: a template was written, no job
        return SubmittedJob(None, beam_result, dict(state="TEMPLATE_CREATED", job_id=None, console_url=None,
                                                    template_location=cloud.template_location, **fields))
    job_id = beam_result.job_id()
    client = pipeline.runner.dataflow_client

    def poll() -> tuple[str, Optional[int]]:
        state = str(beam_result.state)
        try:
            processed = rows_processed(client.get_job_metrics(job_id))
        except Exception:  # metrics are best effort; the job state decides
            processed = None
        return state, processed

    url = CONSOLE_URL.format(region=request.region, job_id=job_id, project=request.project)
    return SubmittedJob(poll, beam_result, dict(state="SUBMITTED", job_id=job_id, console_url=url, **fields))


ENDED_STATES = ("JOB_STATE_DONE", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_UPDATED",
                "JOB_STATE_DRAINED", "JOB_STATE_STOPPED")


@leaves_logging_alone  # PipelineOptions() calls logging.basicConfig()
def job_ended(request: DataflowRequest, holder: Mapping[str, Any]) -> bool:
    """Whether the Dataflow job named by a job's lock (`holder`: dataflow_job, project, region) has
    ended, asked through the Dataflow API client Beam submits with (the caller's endpoint and
    credentials). A job that cannot be found is taken as ended; any other error is raised, so an
    unreachable service never lets two jobs write one directory."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions
    from apache_beam.runners.dataflow.internal import apiclient
    from google.cloud import dataflow

    options = PipelineOptions([], **{**pipeline_options(request, "tfrecorder-lock-check"),
                                     "project": holder.get("project") or request.project,
                                     "region": holder.get("region") or request.region})
    if options.view_as(GoogleCloudOptions).no_auth:
        runners.connect_anonymously()
    client = apiclient.DataflowApplicationClient(options)
    cloud = options.view_as(GoogleCloudOptions)
    get = dataflow.GetJobRequest(job_id=holder["dataflow_job"], project_id=cloud.project, location=cloud.region)
    try:  # the jobs client itself: Beam's get_job retries a missing job for minutes
        job = client._jobs_client.get_job(get)
    except Exception as exc:  # the API's NotFound: the job is gone (or never existed)
        if type(exc).__name__ in ("NotFound", "HttpNotFoundError") or getattr(exc, "code", None) == 404:
            return True
        raise
    state = getattr(job.current_state, "name", str(job.current_state))
    return state in ENDED_STATES
