"""runner="DataflowRunner", offline: Beam's real DataflowRunner against the GCS emulator and a local
Dataflow REST service (tests/support/dataflow_stub.py), plus dry runs for graph properties."""
from __future__ import annotations

import io
import json
import os
import site
import subprocess
import sys
import zipfile

import pandas as pd
import pytest

from support import imagegen
from support.dataflow_stub import DataflowStub

import tfrecorder
from beam_pipelines.launches import dataflow_job
from tfrecorder.errors import DataflowJobError
from tfrecorder.options.conversion_options import OutputLocation
from tfrecorder.result import DataflowConversionResult
from tfrecorder.format.framing import read_records

PROJECT, REGION, BUCKET = "tfrecorder-test", "europe-west4", "tfrecorder-dataflow-test"
OUTPUT = f"gs://{BUCKET}/out"
OFFLINE = {"no_auth": True}  # anonymous Cloud Storage (the emulator); no credential lookup


@pytest.fixture(scope="module")
def emulator(gcs):
    """The session's GCS emulator, with this module's bucket."""
    gcs.bucket(BUCKET)
    return gcs


@pytest.fixture(scope="module")
def image_rows(emulator) -> pd.DataFrame:
    """Real images of many formats in the emulated bucket, plus one that is not an image.

    (No missing object: reading one through Beam's GCS client raises NotFound, which the GCS issue
    turns into a row-level discard.)
    """
    rows = []
    for i, (name, (data, _fmt, _channels)) in enumerate(sorted(imagegen.odd_images().items())):
        uri = f"gs://{BUCKET}/images/{name}"
        emulator.upload(uri, data)
        rows.append({"split": ("TRAIN", "TRAIN", "VALIDATION", "TEST")[i % 4], "image_uri": uri,
                     "label": ("cat", "dog")[i % 2]})
    text, _reason = imagegen.broken_images()["text.jpg"]
    emulator.upload(f"gs://{BUCKET}/images/text.jpg", text)
    rows.append({"split": "TRAIN", "image_uri": f"gs://{BUCKET}/images/text.jpg", "label": "cat"})
    return pd.DataFrame(rows)


def submit(frame, emulator, **options):
    return tfrecorder.convert(frame, OUTPUT, runner="DataflowRunner", project=PROJECT, region=REGION,
                              job_label=options.pop("job_label", "pets"),
                              dataflow_options={**OFFLINE, **options.pop("dataflow_options", {})}, **options)


# --- bad calls are refused before anything is staged ---------------------------------------------

@pytest.mark.parametrize("change, message", [
    ({"project": None}, "needs project"),
    ({"project": "x"}, "not a valid Google Cloud project id"),
    ({"region": None}, "needs region"),
    ({"region": "mars"}, "not a valid Google Cloud region"),
    ({"output_dir": "local/out"}, "must be gs://"),
    ({"output_dir": "gs://ab/out"}, "must be gs://"),
    ({"job_label": "../../etc"}, "cannot name a Dataflow job"),
    ({"job_label": "9lives"}, "cannot name a Dataflow job"),
    ({"job_label": "x" * 41}, "cannot name a Dataflow job"),
    ({"job_label": "ümlaut"}, "cannot name a Dataflow job"),
    ({"dataflow_options": {"max_num_worker": 3}}, "not Beam/Dataflow pipeline options"),
    ({"dataflow_options": {"project": "other-project"}}, "contradicts project"),
    ({"dataflow_options": {"job_name": "Bad_Name"}}, "not a valid Dataflow job name"),
    ({"tfrecorder_wheel": "/nonexistent/tfrecorder-0.1.0-py3-none-any.whl"}, "does not exist"),
])
def test_bad_calls_are_refused_before_staging(emulator, image_rows, change, message):
    before = emulator.list(f"gs://{BUCKET}/")
    arguments = dict(source=image_rows, output_dir=OUTPUT, runner="DataflowRunner", project=PROJECT,
                     region=REGION, job_label="pets", dataflow_options=dict(OFFLINE))
    arguments.update(change)
    with pytest.raises(ValueError, match=message):
        tfrecorder.convert(**arguments)
    assert emulator.list(f"gs://{BUCKET}/") == before


def test_sources_workers_cannot_read_are_refused(emulator, image_rows, tmp_path):
    local_images = image_rows.assign(image_uri=[f"/data/{i}.jpg" for i in range(len(image_rows))])
    with pytest.raises(ValueError, match="only read images on Cloud Storage"):
        submit(local_images, emulator, dataflow_options={"dry_run": True})
    csv_path = tmp_path / "rows.csv"
    image_rows.to_csv(csv_path, index=False)
    with pytest.raises(ValueError, match="cannot read the local file"):
        submit(str(csv_path), emulator, dataflow_options={"dry_run": True})


def test_job_label_is_sanitised_into_job_name_and_directory(emulator, image_rows):
    result = submit(image_rows, emulator, job_label="My Pets_v2.1", dataflow_options={"dry_run": True})
    name = result["job_name"]
    assert name.startswith("my-pets-v2-1-") and len(name) <= 63
    assert result["tfrecord_dir"] == f"{OUTPUT}/{name}"
    assert dataflow_job._JOB_NAME.fullmatch(name)


# --- dry runs: the job request and the graph -------------------------------------------------------

def _producer(proto, pcollection_id):
    for transform in proto.components.transforms.values():
        if pcollection_id in transform.outputs.values() and not transform.subtransforms:
            return transform
    raise KeyError(pcollection_id)


def _main_input(transform) -> str:
    from apache_beam.portability.api import beam_runner_api_pb2

    side = set()
    if transform.spec.urn == "beam:transform:pardo:v1":
        side = set(beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload).side_inputs)
    return next(pcollection for tag, pcollection in transform.inputs.items() if tag not in side)


def _top_level(name: str) -> str:
    return name.split("/", 1)[0]


def test_dry_run_graph_keeps_image_bytes_out_of_group_by_keys(emulator, image_rows):
    result = submit(image_rows, emulator, dataflow_options={"dry_run": True})
    assert isinstance(result, DataflowConversionResult) and result["state"] == "DRY_RUN"
    proto = result.pipeline_result.job.proto_pipeline
    transforms = {t.unique_name: t for t in proto.components.transforms.values()}
    group_by_keys = sorted(n for n, t in transforms.items() if t.spec.urn == "beam:transform:group_by_key:v1")
    # The only GroupByKeys: the reshuffles of rows, of source parts and of shard plans, combines of
    # small values, and the statistics stage's grouping of sketches, digests and hashes (issue 29).
    assert any(n.startswith("SpreadRows/") for n in group_by_keys)
    assert any(n.startswith("SpreadShards/") for n in group_by_keys)  # shards assembled on every worker
    for name in group_by_keys:
        assert name.startswith(("SpreadRows/", "SpreadShards/", "StatsSpreadParts/", "RowsSpreadParts/",
                                "GroupQuality", "JoinPairs")) \
            or "/CombinePerKey/" in name or "/MaybeReshuffle/" in name, name
    # Rows are reshuffled between reading and fetching images: EncodeAndWrite ← SpreadRows ← Prepare.
    encode = next(t for n, t in transforms.items() if n.startswith("EncodeAndWrite/") and not t.subtransforms)
    upstream = []
    pcollection = _main_input(encode)
    while len(upstream) < 30:
        producer = _producer(proto, pcollection)
        upstream.append(_top_level(producer.unique_name))
        if not producer.inputs:
            break
        pcollection = _main_input(producer)
    assert upstream.index("SpreadRows") < upstream.index("Prepare") < upstream.index("ReadRows")
    staged = emulator.list(f"{OUTPUT}/.incomplete-{result['job_name']}/")
    assert staged == []  # a dry run leaves nothing behind


def test_dry_run_million_row_dataframe_request_is_small(emulator):
    n = 1_000_000
    frame = pd.DataFrame({
        "split": ["TRAIN"] * n,
        "image_uri": [f"gs://{BUCKET}/images/{i:07d}.jpg" for i in range(n)],
        "label": ["cat", "dog"] * (n // 2),
    })
    result = submit(frame, emulator, dataflow_options={"dry_run": True})
    job = result.pipeline_result.job
    pipeline_bytes = len(job.proto_pipeline.SerializeToString())
    request_bytes = len(job.json().encode())
    assert pipeline_bytes < 1_000_000 and request_bytes < 1_000_000, (pipeline_bytes, request_bytes)
    assert result["rows_in"] == n


# --- a template: the full job JSON, options passed through, the staged package installs ------------

@pytest.fixture(scope="module")
def template(emulator, image_rows):
    location = f"gs://{BUCKET}/templates/pets.json"
    result = submit(image_rows, emulator, dataflow_options={
        "template_location": location, "machine_type": "n2-standard-4", "max_num_workers": 7,
        "sdk_container_image": "europe-docker.pkg.dev/tfrecorder-test/images/beam:2.77",
        "service_account_email": "runner@tfrecorder-test.iam.gserviceaccount.com",
        "network": "vpc-a", "subnetwork": "regions/europe-west4/subnetworks/sub-a",
        "labels": ["team=ml", "cost=dataset"],
    })
    return result, json.loads(emulator.download(location))


def test_template_holds_the_full_job_with_passed_options(template):
    result, job = template
    assert result["state"] == "TEMPLATE_CREATED" and result["job_id"] is None
    assert job["name"] == result["job_name"]
    assert job["labels"] == {"team": "ml", "cost": "dataset"}
    options = job["environment"]["sdkPipelineOptions"]["options"]
    assert options["project"] == PROJECT and options["region"] == REGION
    assert options["machine_type"] == "n2-standard-4" and int(options["max_num_workers"]) == 7
    assert options["service_account_email"] == "runner@tfrecorder-test.iam.gserviceaccount.com"
    assert options["network"] == "vpc-a" and options["subnetwork"].endswith("subnetworks/sub-a")
    assert options["temp_location"].startswith(f"{OUTPUT}/.tfrecorder-dataflow/temp/")
    assert options["staging_location"].startswith(f"{OUTPUT}/.tfrecorder-dataflow/staging/")
    assert job["environment"]["serviceAccountEmail"] == "runner@tfrecorder-test.iam.gserviceaccount.com"
    assert json.dumps(job).count("europe-docker.pkg.dev/tfrecorder-test/images/beam:2.77") >= 1


def test_dataframe_rows_are_staged_as_a_file_not_in_the_job(emulator, template, image_rows):
    import pyarrow as pa

    result, job = template
    staged = emulator.list(f"{OUTPUT}/.incomplete-{result['job_name']}/_work/")
    assert len(staged) == 1 and staged[0].endswith("/rows.arrow")
    rows = pa.ipc.open_file(io.BytesIO(emulator.download(staged[0]))).read_all()
    assert rows.column("image_uri").to_pylist() == list(image_rows["image_uri"])
    assert image_rows["image_uri"].iloc[0] not in json.dumps(job)


def _staged_wheel(emulator, result) -> bytes:
    staged = emulator.list(f"{OUTPUT}/.tfrecorder-dataflow/staging/{result['job_name']}")
    wheels = [url for url in staged if url.endswith(".whl") and "tfrecorder" in url]
    assert len(wheels) == 1, staged
    return emulator.download(wheels[0])


def test_staged_package_installs_without_dependencies_and_imports(emulator, template, tmp_path):
    result, _job = template
    wheel = tmp_path / "tfrecorder-0.1.0-py3-none-any.whl"
    wheel.write_bytes(_staged_wheel(emulator, result))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], check=True)
    # Dependencies come from this venv, appended last, so tfrecorder itself must come from the wheel.
    # TensorFlow is blocked: the worker modules import without it (it is only declared, for decoding).
    check = (
        "import sys, importlib.metadata as m; sys.modules['tensorflow'] = None; "
        f"sys.path.append({site.getsitepackages()[0]!r}); "
        "import tfrecorder, beam_pipelines.graphs.image_graph, beam_pipelines.steps.encode_rows, beam_pipelines.steps.read_rows; "
        "print(tfrecorder.__file__); print(beam_pipelines.graphs.image_graph.__file__); print(m.requires('tfrecorder'))"
    )
    out = subprocess.run([python, "-c", check], check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    module_file, pipeline_file, requires = out.splitlines()
    assert module_file.startswith(str(venv)) and pipeline_file.startswith(str(venv))
    # The default validate="decode" decodes with TensorFlow, so the worker package declares it.
    assert eval(requires) == [*dataflow_job.WORKER_REQUIREMENTS, *dataflow_job.DECODE_REQUIREMENTS]


def test_worker_requirements_are_in_install_requires():
    setup_py = open(os.path.join(os.path.dirname(tfrecorder.__file__), os.pardir, "setup.py")).read()
    for requirement in dataflow_job.WORKER_REQUIREMENTS:
        assert f'"{requirement}"' in setup_py
    assert not any("tensorflow" in r for r in dataflow_job.WORKER_REQUIREMENTS)


def test_given_wheel_is_staged_instead_of_a_built_one(emulator, image_rows, tmp_path):
    given = dataflow_job.build_worker_wheel(str(tmp_path))
    with zipfile.ZipFile(given, "a") as wheel:
        wheel.writestr("tfrecorder/_given_marker.py", "")
    result = submit(image_rows, emulator, tfrecorder_wheel=given,
                    dataflow_options={"template_location": f"gs://{BUCKET}/templates/given.json"})
    with zipfile.ZipFile(io.BytesIO(_staged_wheel(emulator, result))) as staged:
        assert "tfrecorder/_given_marker.py" in staged.namelist()


# --- a submitted job: returns at once; wait() shows progress and fills in the counts ---------------

@pytest.fixture
def service():
    stub = DataflowStub()
    yield stub
    stub.stop()


def test_submit_returns_at_once_and_wait_reports_progress_until_done(emulator, image_rows, service):
    result = submit(image_rows, emulator, dataflow_options={"dataflow_endpoint": service.endpoint})
    job_id = result["job_id"]
    assert job_id in service.jobs and result["state"] == "SUBMITTED"
    assert result["console_url"] == (
        f"https://console.cloud.google.com/dataflow/jobs/{REGION}/{job_id}?project={PROJECT}")
    assert result["tfrecord_dir"].startswith(f"{OUTPUT}/pets-") and "written" not in result
    assert service.jobs[job_id].request["name"] == result["job_name"]

    reports = []
    result.wait(poll_seconds=0.2, progress=lambda *report: reports.append(report))
    states = [state for state, _processed, _total in reports]
    assert states[0] == "RUNNING" and states[-1] == "DONE"
    assert reports[-1] == ("DONE", len(image_rows), len(image_rows))
    metadata = json.loads(emulator.download(f"{result['tfrecord_dir']}/metadata.json"))
    assert result["rows_in"] == metadata["rows_in"] == len(image_rows)
    assert sum(result["written"].values()) + result["discarded"] == len(image_rows)
    assert result["discarded"] == 1 and list(result["discard_reasons"].values()) == [1]
    records = 0
    for split in metadata["splits"].values():
        for shard in split["shards"]:
            records += sum(1 for _ in read_records(io.BytesIO(emulator.download(f"{result['tfrecord_dir']}/{shard['file']}"))))
    assert records == sum(result["written"].values())
    assert "DONE" in repr(result) and job_id in repr(result)


def test_wait_raises_a_clear_error_when_the_job_fails(emulator, image_rows):
    stub = DataflowStub(fail_jobs=True)
    try:
        result = submit(image_rows, emulator, dataflow_options={"dataflow_endpoint": stub.endpoint})
        with pytest.raises(DataflowJobError, match=f"{result['job_id']} ended FAILED.*console.cloud.google.com"):
            result.wait(poll_seconds=0.1, progress=False)
        assert result["state"] == "FAILED"
    finally:
        stub.stop()


def test_rows_processed_reads_committed_user_counters():
    from google.cloud.dataflow_v1beta3 import types as api

    def metric(origin, name, scalar, **context):
        return api.MetricUpdate(name=api.MetricStructuredName(origin=origin, name=name, context=context),
                                scalar=scalar)

    metrics = api.JobMetrics(metrics=[
        metric("user", "rows_processed", 40, namespace="tfrecorder", step="s3"),
        metric("user", "rows_processed", 2, namespace="tfrecorder", step="s9"),
        metric("user", "rows_processed", 99, namespace="tfrecorder", step="s3", tentative="true"),
        metric("user", "rows_processed", 7, namespace="other", step="s3"),
        metric("dataflow/v1b3", "ElementCount", 1000, original_name="s3.out0"),
    ])
    assert dataflow_job.rows_processed(metrics) == 42
    assert dataflow_job.rows_processed(api.JobMetrics(metrics=[])) is None


# --- the command line ------------------------------------------------------------------------------

def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "tfrecorder", "convert", *args], capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)


def test_cli_submits_a_gcs_csv_and_waits(emulator, image_rows, service):
    source = f"gs://{BUCKET}/tables/pets.csv"
    emulator.upload(source, image_rows.to_csv(index=False).encode())
    done = run_cli("--source", source, "--output_dir", OUTPUT, "--runner", "DataflowRunner", "--project", PROJECT,
                   "--region", REGION, "--job_label", "cli", "--dataflow_option", "no_auth",
                   "--dataflow_option", f"dataflow_endpoint={service.endpoint}",
                   "--dataflow_option", "max_num_workers=3", "--dataflow_option", "labels=team=ml")
    assert done.returncode == 0, done.stderr[-3000:]
    (job,) = service.jobs.values()
    options = job.request["environment"]["sdkPipelineOptions"]["options"]
    assert options["max_num_workers"] == 3 and job.request["labels"] == {"team": "ml"}
    assert "console.cloud.google.com/dataflow/jobs/" in done.stdout and "Dataflow job DONE" in done.stderr
    assert "written: TRAIN=" in done.stdout and "discarded: 1" in done.stdout


def test_cli_refuses_dataflow_without_project(emulator):
    done = run_cli("--source", f"gs://{BUCKET}/tables/none.csv", "--output_dir", OUTPUT,
                   "--runner", "DataflowRunner", "--region", REGION)
    assert done.returncode == 2 and "needs project" in done.stderr
    done = run_cli("--source", f"gs://{BUCKET}/tables/none.csv", "--output_dir", OUTPUT, "--runner", "DataflowRunner",
                   "--project", PROJECT, "--region", REGION, "--dataflow_option", "max_workers=3")
    assert done.returncode == 2 and "not Beam/Dataflow pipeline options" in done.stderr


def test_cli_reports_a_failed_job_on_one_line(emulator, image_rows):
    source = f"gs://{BUCKET}/tables/failing.csv"
    emulator.upload(source, image_rows.to_csv(index=False).encode())
    stub = DataflowStub(fail_jobs=True)
    common = ("--source", source, "--output_dir", OUTPUT, "--runner", "DataflowRunner", "--project", PROJECT,
              "--region", REGION, "--dataflow_option", "no_auth", "--dataflow_option", f"dataflow_endpoint={stub.endpoint}")
    try:
        submitted = run_cli(*common, "--no_wait")
        done = run_cli("--source", source, "--output_dir", OUTPUT, "--runner", "DataflowRunner", "--project", PROJECT,
                       "--region", REGION, "--dataflow_option", "no_auth",
                       "--dataflow_option", f"dataflow_endpoint={stub.endpoint}")
    finally:
        stub.stop()
    assert submitted.returncode == 0 and "console.cloud.google.com/dataflow/jobs/europe-west4/" in submitted.stdout
    assert "written" not in submitted.stdout
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("tfrecorder: error: Dataflow job ")
    assert "ended FAILED" in done.stderr


# --- a Parquet source: the job carries its row-group parts ------------------------------------------

def _created_values(proto, label: str) -> list:
    """The elements a beam.Create labelled `label` holds in a portable pipeline proto (Create keeps
    them coder-encoded inside its FlatMap and decodes them in a Map: both functions are pickled)."""
    from apache_beam.internal import pickler
    from apache_beam.portability.api import beam_runner_api_pb2

    functions = {}
    for transform in proto.components.transforms.values():
        step = transform.unique_name[len(label) + 1:]
        if transform.unique_name.startswith(label + "/") and step.startswith(("FlatMap", "Map(decode)")):
            payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload).do_fn.payload
            functions[step.split("(")[0]] = pickler.loads(payload)[0]._fn
    return [decoded for value in functions["FlatMap"](None) for decoded in functions["Map"](value)]


def test_parquet_source_parts_are_in_the_job(emulator, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from apache_beam.portability.api import beam_runner_api_pb2

    from tfrecorder.sources.parquet_parts import ParquetPart

    for i, rows in enumerate((5, 2)):
        sink = pa.BufferOutputStream()
        pq.write_table(pa.table({"split": ["TRAIN"] * rows, "x": list(range(rows))}), sink, row_group_size=2)
        emulator.upload(f"gs://{BUCKET}/table/part-{i}.parquet", sink.getvalue().to_pybytes())
    location = f"gs://{BUCKET}/templates/parquet.json"
    result = submit(f"gs://{BUCKET}/table/*.parquet", emulator, job_label="parquet", validate="header",
                    dataflow_options={"template_location": location})
    assert result["state"] == "TEMPLATE_CREATED" and result["rows_in"] == 7 and not result["rows_in_estimated"]
    staged = emulator.list(f"{OUTPUT}/.tfrecorder-dataflow/staging/{result['job_name']}")
    proto = beam_runner_api_pb2.Pipeline.FromString(emulator.download(next(u for u in staged if u.endswith("pipeline.pb"))))
    expected = [ParquetPart(f"gs://{BUCKET}/table/part-0.parquet", group) for group in range(3)]
    expected.append(ParquetPart(f"gs://{BUCKET}/table/part-1.parquet", 0))
    assert _created_values(proto, "RowsParts") == _created_values(proto, "StatsParts") == expected


def test_local_parquet_files_are_refused_for_dataflow(emulator, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"split": ["TRAIN"], "x": [1]}), tmp_path / "t.parquet")
    with pytest.raises(ValueError, match="cannot read the local file .*t.parquet"):
        submit(str(tmp_path / "t.parquet"), emulator, dataflow_options={"dry_run": True})


def test_job_ended_asks_the_dataflow_service_for_the_jobs_state(emulator, service):
    """The resubmit's check of a Dataflow job holding a job's lock (issue 27), through Beam's client."""
    from support.dataflow_stub import StubJob

    request = dataflow_job.check_request(OutputLocation.of(OUTPUT), PROJECT,
                                         REGION, "pets", {**OFFLINE, "dataflow_endpoint": service.endpoint}, None)
    service.jobs["job-1"] = StubJob({"name": "pets"}, state="JOB_STATE_RUNNING")
    holder = {"dataflow_job": "job-1", "project": PROJECT, "region": REGION}
    assert not dataflow_job.job_ended(request, holder)
    for state in ("JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_DONE"):
        service.jobs["job-1"].state = state
        assert dataflow_job.job_ended(request, holder)
    assert dataflow_job.job_ended(request, {**holder, "dataflow_job": "gone"})  # unknown to the service
